/* Reconciliation: compare what is desired with what is observed, take one
 * step through the host's interfaces in a worker thread, record what came
 * of it, and look again. The phase and a fresh operation ID are written
 * before every host call, so that a crash leaves enough to finish or undo
 * the step (recover.c); a step whose phase cannot be written is not taken.
 * One step at a time per machine; many machines at once. */
#include "reconciler-private.h"
#include "core/errors.h"
#include "core/json-util.h"
#include "core/plan.h"
#include "core/restart.h"
#include "names.h"
#include "util/fault.h"

#include <stdarg.h>

typedef struct {
  MvReconciler *rec;
  char         *machine_id;
  MvRuntime    *runtime;         /* NULL only for a destroy of a type gone from the host */
  MvStep        step;
  char         *phase;           /* as recorded; also names the fault points */
  char         *runtime_dir;
  MvSpec       *spec;            /* copies: nothing here is shared with the main thread */
  JsonObject   *vmm;
  gboolean      restore;         /* START: from the saved guest */
  gboolean      restarting;      /* START: by the restart policy */
  const MvHostResource *resource; /* DESTROY: the one resource this step releases */
  /* Results, read on the main thread once the task is done. */
  JsonObject   *started_vmm;     /* START */
  MvVmmState    probed;          /* STANDBY that failed: what the VMM does now */
} StepTask;

/* Clock ------------------------------------------------------------------- */

static gint64
glib_real_time (gpointer data)
{
  return g_get_real_time ();
}

static gint64
glib_monotonic_time (gpointer data)
{
  return g_get_monotonic_time ();
}

static guint
glib_timeout_add (guint ms, GSourceFunc func, gpointer func_data, gpointer data)
{
  return g_timeout_add (ms, func, func_data);
}

static void
glib_source_remove (guint id, gpointer data)
{
  g_source_remove (id);
}

static const MvClock default_clock = {
  glib_real_time, glib_monotonic_time, glib_timeout_add, glib_source_remove, NULL,
};

const MvClock *
mv_clock_default (void)
{
  return &default_clock;
}

gint64
mv_reconciler_now (MvReconciler *rec)
{
  return rec->clock->real_time (rec->clock->data);
}

static guint
clock_timeout (MvReconciler *rec, guint ms, GSourceFunc func, gpointer data)
{
  return rec->clock->timeout_add (ms, func, data, rec->clock->data);
}

static void
clock_remove (MvReconciler *rec, guint *id)
{
  if (*id)
    rec->clock->source_remove (*id, rec->clock->data);
  *id = 0;
}

/* The machine ---------------------------------------------------------------- */

void
mv_machine_log (const MvMachine *machine, GLogLevelFlags level, const char *format, ...)
{
  g_autofree char *message = NULL;
  const MvStatus *status = machine->status;
  va_list args;

  va_start (args, format);
  message = g_strdup_vprintf (format, args);
  va_end (args);

  const GLogField fields[] = {
    { "MESSAGE", message, -1 },
    { "PRIORITY", level & G_LOG_LEVEL_WARNING ? "4" : level & G_LOG_LEVEL_MESSAGE ? "5"
                  : level & G_LOG_LEVEL_INFO ? "6" : level & G_LOG_LEVEL_DEBUG ? "7" : "3", -1 },
    { "GLIB_DOMAIN", G_LOG_DOMAIN, -1 },
    { MV_LOG_FIELD_MACHINE_ID, machine->id, -1 },
    { MV_LOG_FIELD_OPERATION, status->operation_id ? status->operation_id : "", -1 },
    { MV_LOG_FIELD_PHASE, status->phase ? status->phase : "", -1 },
  };
  g_log_structured_array (level, fields, G_N_ELEMENTS (fields));
}

gboolean
mv_machine_is_active (const MvMachine *machine)
{
  MvState s = machine->status->state;

  return mv_state_holds_resources (s) || s == MV_STATE_STANDBY || s == MV_STATE_STOPPING ||
         machine->busy;
}

void
mv_machine_changed (MvMachine *machine, guint props)
{
  MvReconciler *rec = machine->reconciler;

  if (props && rec->observer.changed)
    rec->observer.changed (machine, props, rec->observer.data);
}

void
mv_machine_settled (MvMachine *machine, const GError *failure)
{
  MvReconciler *rec = machine->reconciler;

  if (rec->observer.settled)
    rec->observer.settled (machine, failure, rec->observer.data);
}

gboolean
mv_machine_save_status (MvMachine *machine, GError **error)
{
  MvRecords *records = machine->reconciler->host->records;
  g_autoptr (GError) local = NULL;

  if (records->save_status (records, machine->id, machine->status, &local))
    return TRUE;
  mv_machine_log (machine, G_LOG_LEVEL_WARNING, "Machine %s: could not record its status: %s",
                  machine->id, local->message);
  g_propagate_prefixed_error (error, g_steal_pointer (&local), "Could not record the status: ");
  return FALSE;
}

gboolean
mv_machine_save_config (MvMachine *machine, GError **error)
{
  MvRecords *records = machine->reconciler->host->records;
  g_autoptr (GError) local = NULL;

  if (records->save_config (records, machine->config, &local))
    {
      mv_machine_changed (machine, MV_PROP_ALL_CONFIG);
      return TRUE;
    }
  mv_machine_log (machine, G_LOG_LEVEL_WARNING,
                  "Machine %s: could not record its configuration: %s", machine->id,
                  local->message);
  g_propagate_prefixed_error (error, g_steal_pointer (&local), "Could not record the change: ");
  return FALSE;
}

void
mv_machine_set_state (MvMachine *machine, MvState state, const char *error)
{
  MvStatus *status = machine->status;
  guint props = 0;

  if (status->state != state)
    {
      if (!mv_state_can_transition (status->state, state))
        mv_machine_log (machine, G_LOG_LEVEL_WARNING, "Machine %s: unexpected move from %s to %s",
                        machine->id, mv_state_to_string (status->state),
                        mv_state_to_string (state));
      mv_machine_log (machine, G_LOG_LEVEL_MESSAGE, "Machine %s (%s): %s -> %s%s%s",
                      machine->config->spec->name, machine->id,
                      mv_state_to_string (status->state), mv_state_to_string (state),
                      error ? ": " : "", error ? error : "");
      status->state = state;
      props |= MV_PROP_STATE;
    }
  if (g_strcmp0 (status->state_error, error) != 0)
    {
      g_free (status->state_error);
      status->state_error = g_strdup (error);
      props |= MV_PROP_STATE_ERROR;
    }
  mv_machine_changed (machine, props);
}

void
mv_machine_set_failed (MvMachine *machine, const char *why)
{
  machine->status->failed_generation = machine->config->desired_generation;
  mv_machine_set_state (machine, MV_STATE_FAILED, why);
}

void
mv_machine_clear_vmm (MvMachine *machine)
{
  MvStatus *status = machine->status;

  g_clear_pointer (&status->vmm, json_object_unref);
  status->started_at = 0;
  mv_machine_reset_idle (machine);
  mv_machine_changed (machine, MV_PROP_STARTED_AT);
}

MvRuntimeRequest
mv_machine_request (MvMachine *machine, const char *runtime_dir)
{
  MvRuntimeRequest req = {
    .machine_id = machine->id,
    .spec = machine->config->spec,
    .runtime_dir = runtime_dir,
    .vmm = machine->status->vmm,
  };
  return req;
}

MvRuntime *
mv_reconciler_runtime_for (MvMachine *machine, GError **error)
{
  return mv_runtimes_for_spec (machine->reconciler->host->runtimes, machine->config->spec, error);
}

gboolean
mv_reconciler_is_migrating (MvMachine *machine)
{
  MvReconcilerOptions *o = &machine->reconciler->options;

  return o->migration_guard && o->migration_guard (machine->id, o->migration_guard_data);
}

void
mv_machine_free (MvMachine *machine)
{
  MvReconciler *rec = machine->reconciler;

  clock_remove (rec, &machine->restart_timer);
  mv_reconciler_unwatch_vmm (machine);
  g_free (machine->end_reason);
  mv_config_free (machine->config);
  mv_status_free (machine->status);
  g_free (machine->id);
  g_free (machine);
}

static MvMachine *
machine_new (MvReconciler *rec, MvConfig *config, MvStatus *status)
{
  MvMachine *machine = g_new0 (MvMachine, 1);

  machine->reconciler = rec;
  machine->id = g_strdup (config->id);
  machine->config = config;
  machine->status = status;
  g_hash_table_insert (rec->machines, machine->id, machine);
  return machine;
}

/* The table ------------------------------------------------------------------ */

MvReconciler *
mv_reconciler_new (const MvHost *host, const MvReconcilerOptions *options,
                   const MvObserver *observer, const MvClock *clock)
{
  MvReconciler *rec = g_new0 (MvReconciler, 1);

  rec->host = host;
  rec->options = *options;
  if (observer)
    rec->observer = *observer;
  rec->clock = clock ? clock : &default_clock;
  rec->machines = g_hash_table_new_full (g_str_hash, g_str_equal, NULL,
                                         (GDestroyNotify) mv_machine_free);
  return rec;
}

void
mv_reconciler_free (MvReconciler *rec)
{
  g_autoptr (GError) error = NULL;
  GHashTableIter iter;
  MvMachine *machine;

  if (!rec)
    return;
  /* Calls still waiting get an answer rather than a timeout. */
  error = g_error_new (MV_ERROR, MV_ERROR_UNAVAILABLE, "The daemon is shutting down");
  g_hash_table_iter_init (&iter, rec->machines);
  while (g_hash_table_iter_next (&iter, NULL, (gpointer *) &machine))
    mv_machine_settled (machine, error);
  clock_remove (rec, &rec->resync_timer);
  clock_remove (rec, &rec->idle_timer);
  g_hash_table_unref (rec->machines);
  g_free (rec);
}

MvMachine *
mv_reconciler_add_loaded (MvReconciler *rec, MvConfig *config, MvStatus *status)
{
  return machine_new (rec, config, status);
}

MvMachine *
mv_reconciler_lookup (MvReconciler *rec, const char *id)
{
  MvMachine *machine = g_hash_table_lookup (rec->machines, id);

  return machine && !machine->gone ? machine : NULL;
}

MvMachine *
mv_reconciler_find (MvReconciler *rec, const char *name_or_id)
{
  MvMachine *machine = mv_reconciler_lookup (rec, name_or_id);
  GHashTableIter iter;

  if (machine)
    return machine;
  g_hash_table_iter_init (&iter, rec->machines);
  while (g_hash_table_iter_next (&iter, NULL, (gpointer *) &machine))
    if (!machine->gone && g_strcmp0 (machine->config->spec->name, name_or_id) == 0)
      return machine;
  return NULL;
}

static gint
compare_by_name (gconstpointer a, gconstpointer b)
{
  const MvMachine *ma = *(MvMachine *const *) a;
  const MvMachine *mb = *(MvMachine *const *) b;

  return g_strcmp0 (ma->config->spec->name, mb->config->spec->name);
}

GPtrArray *
mv_reconciler_list (MvReconciler *rec)
{
  GPtrArray *list = g_ptr_array_sized_new (g_hash_table_size (rec->machines));
  GHashTableIter iter;
  MvMachine *machine;

  g_hash_table_iter_init (&iter, rec->machines);
  while (g_hash_table_iter_next (&iter, NULL, (gpointer *) &machine))
    if (!machine->gone)
      g_ptr_array_add (list, machine);
  g_ptr_array_sort (list, compare_by_name);
  return list;
}

GPtrArray *
mv_reconciler_all (MvReconciler *rec)
{
  GPtrArray *all = g_ptr_array_sized_new (g_hash_table_size (rec->machines));
  GHashTableIter iter;
  gpointer machine;

  g_hash_table_iter_init (&iter, rec->machines);
  while (g_hash_table_iter_next (&iter, NULL, &machine))
    g_ptr_array_add (all, machine);
  return all;
}

guint
mv_reconciler_count (MvReconciler *rec)
{
  return g_hash_table_size (rec->machines);
}

const MvHost *
mv_reconciler_host (MvReconciler *rec)
{
  return rec->host;
}

gboolean
mv_reconciler_busy (MvReconciler *rec)
{
  GHashTableIter iter;
  MvMachine *machine;

  if (rec->background)
    return TRUE;
  g_hash_table_iter_init (&iter, rec->machines);
  while (g_hash_table_iter_next (&iter, NULL, (gpointer *) &machine))
    if (machine->busy)
      return TRUE;
  return FALSE;
}

MvWishOutcome
mv_machine_wish_outcome (const MvMachine *machine, MvDesired target, guint64 generation)
{
  const MvConfig *config = machine->config;

  if (target != config->desired && generation < config->desired_generation)
    return MV_WISH_SUPERSEDED;
  if (machine->status->observed_generation >= generation)
    return MV_WISH_REACHED;
  return MV_WISH_PENDING;
}

/* Worker threads --------------------------------------------------------------- */

void
mv_reconciler_run_in_thread (GTaskThreadFunc func, GAsyncReadyCallback done, gpointer data,
                             GDestroyNotify free)
{
  g_autoptr (GTask) gtask = g_task_new (NULL, NULL, done, NULL);

  g_task_set_task_data (gtask, data, free);
  g_task_run_in_thread (gtask, func);
}

static void
on_background_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  MvReconciler *rec = user_data;

  rec->background--;
}

void
mv_reconciler_run_in_background (MvReconciler *rec, GTaskThreadFunc func, gpointer data,
                                 GDestroyNotify free)
{
  g_autoptr (GTask) gtask = g_task_new (NULL, NULL, on_background_done, rec);

  rec->background++;
  g_task_set_task_data (gtask, data, free);
  g_task_run_in_thread (gtask, func);
}

typedef struct {
  MvStorage *storage;
  char      *machine_id;
} SweepTask;

static void
sweep_task_free (SweepTask *task)
{
  g_free (task->machine_id);
  g_free (task);
}

static void
sweep_in_thread (GTask *gtask, gpointer source, gpointer task_data, GCancellable *cancellable)
{
  SweepTask *task = task_data;
  g_autoptr (GError) error = NULL;

  if (!task->storage->sweep (task->storage, task->machine_id, &error))
    g_warning ("Machine %s: %s", task->machine_id, error->message);
  g_task_return_boolean (gtask, TRUE);
}

void
mv_reconciler_sweep_later (MvReconciler *rec, const char *machine_id)
{
  SweepTask *task = g_new0 (SweepTask, 1);

  task->storage = rec->host->storage;
  task->machine_id = g_strdup (machine_id);
  mv_reconciler_run_in_background (rec, sweep_in_thread, task, (GDestroyNotify) sweep_task_free);
}

void
mv_reconciler_retire_saved_state (MvMachine *machine)
{
  MvStorage *storage = machine->reconciler->host->storage;
  g_autoptr (GError) error = NULL;

  /* A frozen guest is as large as its memory: the rename is immediate,
   * the deletion runs off the main loop. What a crash leaves of it is
   * swept at the next start. */
  if (!storage->retire_saved_state (storage, machine->id, &error))
    {
      mv_machine_log (machine, G_LOG_LEVEL_WARNING, "Machine %s: %s", machine->id,
                      error->message);
      return;
    }
  mv_reconciler_sweep_later (machine->reconciler, machine->id);
}

/* Restarts ---------------------------------------------------------------------- */

static gboolean
on_restart_due (gpointer user_data)
{
  MvMachine *machine = user_data;

  machine->restart_timer = 0;
  mv_reconciler_reconcile (machine);
  return G_SOURCE_REMOVE;
}

void
mv_reconciler_schedule_restart (MvMachine *machine)
{
  MvReconciler *rec = machine->reconciler;
  gint64 delay_ms = (machine->status->next_restart_at - mv_reconciler_now (rec)) / 1000;

  clock_remove (rec, &machine->restart_timer);
  machine->restart_timer = clock_timeout (rec, (guint) CLAMP (delay_ms, 0, G_MAXUINT),
                                          on_restart_due, machine);
}

void
mv_reconciler_cancel_restart (MvMachine *machine)
{
  MvStatus *status = machine->status;

  clock_remove (machine->reconciler, &machine->restart_timer);
  if (status->restart_count != 0 || status->next_restart_at != 0)
    {
      status->restart_count = 0;
      status->next_restart_at = 0;
      mv_machine_changed (machine, MV_PROP_RESTART_COUNT);
      mv_machine_save_status (machine, NULL);
    }
}

/* The guest ended without being asked to (or could not be started again
 * by its restart policy): the restart policy decides what becomes of it. */
void
mv_reconciler_handle_end (MvMachine *machine, gboolean has_exit_code, int exit_code,
                          const char *reason)
{
  MvReconciler *rec = machine->reconciler;
  MvConfig *config = machine->config;
  MvStatus *status = machine->status;
  gboolean clean = has_exit_code && exit_code == 0;
  gint64 restart_at = 0;
  g_autoptr (GError) error = NULL;
  MvEndOutcome outcome;

  mv_reconciler_unwatch_vmm (machine);
  mv_machine_clear_vmm (machine);
  status->finished_at = mv_reconciler_now (rec);
  status->has_exit_code = has_exit_code;
  status->exit_code = has_exit_code ? exit_code : 0;
  mv_machine_changed (machine, MV_PROP_EXIT_CODE);

  outcome = mv_restart_decide (config->spec, status->restart_count, clean, status->finished_at,
                               (gint64) rec->options.restart_backoff_ms * 1000, &restart_at);
  switch (outcome)
    {
    case MV_END_RESTART:
      status->restart_count++;
      status->next_restart_at = restart_at;
      mv_machine_changed (machine, MV_PROP_RESTART_COUNT);
      mv_machine_set_state (machine, MV_STATE_RESTARTING, reason);
      mv_reconciler_schedule_restart (machine);
      break;
    case MV_END_STOPPED:
      /* The guest ended its work: nobody wants it running any more. */
      if (mv_config_set_desired (config, MV_DESIRED_STOPPED, mv_reconciler_now (rec)))
        mv_machine_save_config (machine, NULL);
      mv_machine_set_state (machine, MV_STATE_STOPPED, reason);
      status->observed_generation = config->desired_generation;
      mv_machine_changed (machine, MV_PROP_OBSERVED_GENERATION);
      break;
    case MV_END_FAILED:
      mv_machine_set_failed (machine, reason ? reason : "the VMM ended unexpectedly");
      error = g_error_new (MV_ERROR, MV_ERROR_INVALID_STATE, "Machine %s failed: %s",
                           config->spec->name, status->state_error);
      break;
    }
  mv_machine_save_status (machine, NULL);

  if (outcome != MV_END_RESTART && config->spec->remove_on_exit)
    {
      mv_machine_log (machine, G_LOG_LEVEL_MESSAGE, "Machine %s (%s) ended and is removed, as it asked",
                      config->spec->name, machine->id);
      mv_config_set_desired (config, MV_DESIRED_DESTROYED, mv_reconciler_now (rec));
      mv_machine_save_config (machine, NULL);
    }
  if (error)
    mv_machine_settled (machine, error);
  mv_reconciler_reconcile (machine);
}

static void
on_vmm_exit (const char *machine_id, gboolean has_exit_code, int exit_code,
             const char *reason, gpointer user_data)
{
  MvMachine *machine = mv_reconciler_lookup (user_data, machine_id);

  if (!machine)
    return;
  machine->watch_id = 0;
  /* An operation under way (a stop, say) may account for the end itself:
   * whether it did is known once it is done. */
  if (machine->busy)
    {
      machine->end_heard = TRUE;
      machine->end_has_exit_code = has_exit_code;
      machine->end_exit_code = exit_code;
      g_free (machine->end_reason);
      machine->end_reason = g_strdup (reason);
      return;
    }
  mv_reconciler_handle_end (machine, has_exit_code, exit_code, reason);
}

void
mv_reconciler_watch_vmm (MvMachine *machine, MvRuntime *runtime)
{
  if (machine->watch_id == 0 && runtime->watch && machine->status->vmm)
    machine->watch_id = runtime->watch (runtime, machine->id, machine->status->vmm,
                                        on_vmm_exit, machine->reconciler);
}

void
mv_reconciler_unwatch_vmm (MvMachine *machine)
{
  MvRuntime *runtime = machine->watch_id ? mv_reconciler_runtime_for (machine, NULL) : NULL;

  if (runtime && runtime->unwatch)
    runtime->unwatch (runtime, machine->watch_id);
  machine->watch_id = 0;
}

/* Steps, in a worker thread ---------------------------------------------------- */

/* A copy that shares nothing with @object: the worker gets its own. */
JsonObject *
mv_reconciler_copy_vmm (JsonObject *object)
{
  g_autoptr (JsonNode) node = json_node_init_object (json_node_alloc (), object);
  g_autoptr (JsonNode) copy = mv_json_deep_copy (node);

  return json_object_ref (json_node_get_object (copy));
}

static void
step_task_free (StepTask *task)
{
  g_free (task->machine_id);
  g_free (task->phase);
  g_free (task->runtime_dir);
  mv_spec_free (task->spec);
  g_clear_pointer (&task->vmm, json_object_unref);
  g_clear_pointer (&task->started_vmm, json_object_unref);
  g_free (task);
}

/* Freezes the guest into a staged directory, then makes it the machine's
 * frozen guest in one rename. If that fails, what the VMM does now is
 * asked here too: the VMM may be slow to answer. */
static gboolean
standby_in_thread (StepTask *task, const MvRuntimeRequest *req, GError **error)
{
  MvStorage *storage = task->rec->host->storage;
  MvRuntime *rt = task->runtime;
  g_autofree char *staged = NULL;

  if (!rt->save)
    g_set_error (error, MV_ERROR, MV_ERROR_UNSUPPORTED,
                 "The %s hypervisor cannot freeze a guest to disk", rt->type);
  else if ((staged = storage->stage_saved_state (storage, task->machine_id, error)) &&
           rt->save (rt, req, staged, error) &&
           storage->commit_saved_state (storage, task->machine_id, error))
    return TRUE;

  if (staged)
    storage->discard_saved_state (storage, task->machine_id, NULL);
  task->probed = rt->probe (rt, req);
  return FALSE;
}

static gboolean
start_in_thread (StepTask *task, const MvRuntimeRequest *req, GError **error)
{
  const MvHost *host = task->rec->host;
  MvRuntime *rt = task->runtime;
  g_autofree char *saved = NULL;

  if (!host->records->make_runtime_dir (host->records, task->machine_id, error))
    return FALSE;
  if (!task->restore)
    task->started_vmm = rt->start (rt, req, error);
  else if (!rt->restore)
    g_set_error (error, MV_ERROR, MV_ERROR_UNSUPPORTED,
                 "The %s hypervisor cannot restore a frozen guest", rt->type);
  else
    {
      saved = host->storage->saved_state_dir (host->storage, task->machine_id);
      task->started_vmm = rt->restore (rt, req, saved, error);
    }
  return task->started_vmm != NULL;
}

static void
run_step_in_thread (GTask *gtask, gpointer source, gpointer task_data, GCancellable *cancellable)
{
  StepTask *task = task_data;
  const MvHost *host = task->rec->host;
  MvRuntime *rt = task->runtime;
  MvRuntimeRequest req = {
    .machine_id = task->machine_id,
    .spec = task->spec,
    .runtime_dir = task->runtime_dir,
    .vmm = task->vmm,
  };
  GError *error = NULL;
  gboolean ok = FALSE;

  mv_fault_point (task->phase, "recorded");

  switch (task->step)
    {
    case MV_STEP_START:
      ok = start_in_thread (task, &req, &error);
      break;
    case MV_STEP_STOP:
    case MV_STEP_FORCE_STOP:
      /* Stopped means booting afresh next time: what was frozen goes. */
      ok = rt->stop (rt, &req, task->step == MV_STEP_FORCE_STOP, &error) &&
           host->storage->discard_saved_state (host->storage, task->machine_id, &error);
      break;
    case MV_STEP_PAUSE:
      ok = rt->pause (rt, &req, &error);
      break;
    case MV_STEP_RESUME:
      ok = rt->resume (rt, &req, &error);
      break;
    case MV_STEP_STANDBY:
      ok = standby_in_thread (task, &req, &error);
      break;
    case MV_STEP_DESTROY:
      ok = task->resource->release (host, rt, &req, &error);
      break;
    case MV_STEP_NONE:
      ok = TRUE;
      break;
    }

  if (!ok)
    {
      g_task_return_error (gtask, error);
      return;
    }
  mv_fault_point (task->phase, "done");
  g_task_return_boolean (gtask, TRUE);
}

/* Back on the main thread ------------------------------------------------------ */

static void
step_failed (MvMachine *machine, StepTask *task, GError *error)
{
  MvStatus *status = machine->status;
  g_autoptr (GError) reported = NULL;

  if (error->domain == MV_ERROR)
    reported = g_error_copy (error);
  else
    reported = g_error_new (MV_ERROR, MV_ERROR_FAILED, "%s", error->message);

  if (task->step == MV_STEP_START && task->restarting)
    {
      /* The restart policy tried and failed: that is another end. */
      mv_reconciler_handle_end (machine, FALSE, 0, error->message);
      return;
    }
  if (task->step == MV_STEP_START)
    mv_machine_clear_vmm (machine);
  if (task->step == MV_STEP_START && task->restore)
    {
      /* A restore failure keeps the saved guest, to be tried again. */
      status->failed_generation = machine->config->desired_generation;
      mv_machine_set_state (machine, MV_STATE_STANDBY, error->message);
    }
  else if (task->step == MV_STEP_STANDBY)
    {
      /* Nothing was frozen; the guest runs on if its VMM still does. */
      status->failed_generation = machine->config->desired_generation;
      if (task->probed == MV_VMM_GONE)
        {
          mv_reconciler_unwatch_vmm (machine);
          mv_machine_clear_vmm (machine);
          mv_machine_set_state (machine, MV_STATE_FAILED, error->message);
        }
      else
        mv_machine_set_state (machine,
                              task->probed == MV_VMM_PAUSED ? MV_STATE_PAUSED : MV_STATE_RUNNING,
                              error->message);
    }
  else
    mv_machine_set_failed (machine, error->message);
  mv_machine_save_status (machine, NULL);
  mv_machine_settled (machine, reported);
}

/* Returns FALSE if the machine is gone (freed) once its records are. */
static gboolean
step_succeeded (MvMachine *machine, StepTask *task)
{
  MvReconciler *rec = machine->reconciler;
  MvStatus *status = machine->status;
  gboolean retire = FALSE;

  switch (task->step)
    {
    case MV_STEP_START:
      g_clear_pointer (&status->vmm, json_object_unref);
      status->vmm = g_steal_pointer (&task->started_vmm);
      status->started_at = mv_reconciler_now (rec);
      status->has_exit_code = FALSE;
      status->observed_restart_generation = machine->config->restart_generation;
      status->next_restart_at = 0;
      mv_machine_changed (machine, MV_PROP_STARTED_AT | MV_PROP_EXIT_CODE);
      /* The guest runs on from it: the saved state is stale now. It goes
       * once the status no longer names it, off the main loop. */
      retire = task->restore;
      if (task->restore)
        g_clear_pointer (&status->saved_state, g_free);
      mv_machine_set_state (machine, MV_STATE_RUNNING, NULL);
      mv_reconciler_watch_vmm (machine, task->runtime);
      break;
    case MV_STEP_STOP:
    case MV_STEP_FORCE_STOP:
      mv_reconciler_unwatch_vmm (machine);
      mv_machine_clear_vmm (machine);
      g_clear_pointer (&status->saved_state, g_free);
      mv_machine_set_state (machine, MV_STATE_STOPPED, NULL);
      break;
    case MV_STEP_PAUSE:
      mv_machine_set_state (machine, MV_STATE_PAUSED, NULL);
      break;
    case MV_STEP_RESUME:
      mv_machine_set_state (machine, MV_STATE_RUNNING, NULL);
      break;
    case MV_STEP_STANDBY:
      mv_reconciler_unwatch_vmm (machine);
      mv_machine_clear_vmm (machine);
      g_free (status->saved_state);
      status->saved_state = rec->host->storage->saved_state_dir (rec->host->storage, machine->id);
      mv_machine_set_state (machine, MV_STATE_STANDBY, NULL);
      break;
    case MV_STEP_DESTROY:
      if (g_str_equal (task->resource->name, "records"))
        {
          mv_machine_log (machine, G_LOG_LEVEL_MESSAGE, "Machine %s (%s) deleted",
                          machine->config->spec->name, machine->id);
          machine->gone = TRUE;
          if (rec->observer.removed)
            rec->observer.removed (machine, rec->observer.data);
          g_hash_table_remove (rec->machines, machine->id);
          return FALSE;
        }
      if (g_str_equal (task->resource->name, "vmm"))
        {
          mv_reconciler_unwatch_vmm (machine);
          mv_machine_clear_vmm (machine);
          if (status->state != MV_STATE_STANDBY)
            mv_machine_set_state (machine, MV_STATE_STOPPED, NULL);
        }
      if (g_str_equal (task->resource->name, "saved-state"))
        g_clear_pointer (&status->saved_state, g_free);
      g_ptr_array_add (status->destroyed, g_strdup (task->resource->name));
      break;
    case MV_STEP_NONE:
      break;
    }
  mv_machine_save_status (machine, NULL);
  if (retire)
    mv_reconciler_retire_saved_state (machine);
  return TRUE;
}

static void
on_step_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  StepTask *task = g_task_get_task_data (G_TASK (result));
  MvMachine *machine = mv_reconciler_lookup (task->rec, task->machine_id);
  g_autoptr (GError) error = NULL;
  MvStatus *status;

  g_task_propagate_boolean (G_TASK (result), &error);
  g_return_if_fail (machine != NULL);
  status = machine->status;
  machine->busy = FALSE;
  mv_machine_log (machine, G_LOG_LEVEL_DEBUG, "Machine %s: %s %s%s%s", machine->id,
                  task->phase, error ? "failed" : "done", error ? ": " : "",
                  error ? error->message : "");
  g_clear_pointer (&status->phase, g_free);
  g_clear_pointer (&status->operation_id, g_free);
  mv_machine_changed (machine, MV_PROP_PHASE);

  if (error)
    step_failed (machine, task, error);
  else if (!step_succeeded (machine, task))
    return;
  if (machine->end_heard)
    {
      g_autofree char *reason = g_steal_pointer (&machine->end_reason);

      machine->end_heard = FALSE;
      /* The step kept a VMM that has ended since (a pause, say). */
      if (status->vmm && machine->watch_id == 0)
        {
          mv_reconciler_handle_end (machine, machine->end_has_exit_code, machine->end_exit_code,
                                    reason);
          return;
        }
    }
  mv_reconciler_reconcile (machine);
}

static MvState
transitional_state (MvStep step, MvState current)
{
  switch (step)
    {
    case MV_STEP_START:
      return MV_STATE_STARTING;
    case MV_STEP_STOP:
    case MV_STEP_FORCE_STOP:
      return MV_STATE_STOPPING;
    default:
      return current;
    }
}

static const MvHostResource *
next_destroy_resource (const MvStatus *status)
{
  guint n = 0;
  const MvHostResource *order = mv_host_destroy_order (&n);

  for (guint i = 0; i < n; i++)
    if (!g_ptr_array_find_with_equal_func (status->destroyed, order[i].name, g_str_equal, NULL))
      return &order[i];
  return &order[n - 1];
}

static void
run_step (MvMachine *machine, MvStep step)
{
  MvReconciler *rec = machine->reconciler;
  MvRecords *records = rec->host->records;
  MvStatus *status = machine->status;
  g_autoptr (GError) error = NULL;
  g_autoptr (MvStatus) before = NULL;
  MvRuntime *runtime = mv_reconciler_runtime_for (machine, &error);
  StepTask *task;

  if (!runtime && step != MV_STEP_DESTROY)
    {
      mv_machine_set_failed (machine, error->message);
      mv_machine_save_status (machine, NULL);
      mv_machine_settled (machine, error);
      return;
    }
  g_clear_error (&error);

  task = g_new0 (StepTask, 1);
  task->rec = rec;
  task->runtime = runtime;
  task->step = step;
  task->machine_id = g_strdup (machine->id);
  task->runtime_dir = records->runtime_dir (records, machine->id);
  task->spec = mv_spec_copy (machine->config->spec);
  task->vmm = status->vmm ? mv_reconciler_copy_vmm (status->vmm) : NULL;
  task->restore = step == MV_STEP_START && status->saved_state != NULL;
  task->restarting = step == MV_STEP_START && status->state == MV_STATE_RESTARTING;
  if (step == MV_STEP_DESTROY)
    {
      task->resource = next_destroy_resource (status);
      task->phase = g_strconcat ("destroy-", task->resource->name, NULL);
    }
  else
    task->phase = g_strdup (task->restore ? "restore" : mv_step_to_string (step));

  /* Record what is about to happen before the host is touched; if that
   * cannot be written, the host is not touched. */
  MvState next = transitional_state (step, status->state);
  if (step == MV_STEP_DESTROY && g_str_equal (task->resource->name, "vmm") &&
      mv_state_holds_resources (status->state))
    next = MV_STATE_STOPPING;
  before = mv_status_copy (status);
  g_free (status->phase);
  status->phase = g_strdup (task->phase);
  g_free (status->operation_id);
  status->operation_id = mv_id_new ();
  mv_machine_set_state (machine, next, NULL);
  if (!mv_machine_save_status (machine, &error))
    {
      /* Left as it was, and not tried again until something new is asked. */
      mv_status_free (machine->status);
      machine->status = g_steal_pointer (&before);
      machine->status->failed_generation = machine->config->desired_generation;
      mv_machine_changed (machine, MV_PROP_ALL_STATUS);
      step_task_free (task);
      mv_machine_settled (machine, error);
      return;
    }
  mv_machine_changed (machine, MV_PROP_PHASE);
  machine->busy = TRUE;
  mv_machine_log (machine, G_LOG_LEVEL_DEBUG, "Machine %s: %s", machine->id, task->phase);

  mv_reconciler_run_in_thread (run_step_in_thread, on_step_done, task,
                               (GDestroyNotify) step_task_free);
}

void
mv_reconciler_reconcile (MvMachine *machine)
{
  MvReconciler *rec = machine->reconciler;
  MvConfig *config = machine->config;
  MvStatus *status = machine->status;
  MvStep step;

  if (machine->busy || machine->gone || mv_reconciler_is_migrating (machine))
    return;

  step = mv_plan_next_step (config, status, mv_reconciler_now (rec));
  if (step != MV_STEP_NONE)
    {
      run_step (machine, step);
      return;
    }

  if (mv_machine_desired_reached (config, status))
    {
      if (status->observed_generation != config->desired_generation)
        {
          status->observed_generation = config->desired_generation;
          mv_machine_changed (machine, MV_PROP_OBSERVED_GENERATION);
          mv_machine_save_status (machine, NULL);
        }
      mv_machine_settled (machine, NULL);
    }
  else if (status->state == MV_STATE_RESTARTING)
    {
      if (machine->restart_timer == 0)
        mv_reconciler_schedule_restart (machine);
    }
  else
    {
      /* Nothing more will be tried for this wish: say why. */
      g_autoptr (GError) error =
        g_error_new (MV_ERROR, MV_ERROR_INVALID_STATE, "Machine %s is %s%s%s",
                     config->spec->name, mv_state_to_string (status->state),
                     status->state_error ? ": " : "",
                     status->state_error ? status->state_error : "");
      mv_machine_settled (machine, error);
    }
}

/* Timers ------------------------------------------------------------------------- */

static void
for_each_machine (MvReconciler *rec, void (*func) (MvMachine *machine))
{
  g_autoptr (GPtrArray) machines = mv_reconciler_all (rec);

  /* A copy: what a machine does may remove it from the table. */
  for (guint i = 0; i < machines->len; i++)
    {
      MvMachine *machine = machines->pdata[i];

      if (mv_reconciler_lookup (rec, machine->id) == machine)
        func (machine);
    }
}

/* Looks at every machine again now and then: catches what no event
 * reported (a migration that ended, a clock that jumped). */
static gboolean
on_resync (gpointer user_data)
{
  for_each_machine (user_data, mv_reconciler_reconcile);
  return G_SOURCE_CONTINUE;
}

static gboolean
on_idle_sample (gpointer user_data)
{
  for_each_machine (user_data, mv_reconciler_sample_idle);
  return G_SOURCE_CONTINUE;
}

void
mv_reconciler_run (MvReconciler *rec)
{
  for_each_machine (rec, mv_reconciler_reconcile);
  rec->resync_timer = clock_timeout (rec, rec->options.resync_seconds * 1000, on_resync, rec);
  rec->idle_timer = clock_timeout (rec, rec->options.idle_sample_seconds * 1000, on_idle_sample,
                                   rec);
}
