/* The reconciler: the table of machines, its clock, the work it hands to
 * threads, what happens when a guest ends (restart policies), and the
 * timers that look at every machine now and then. Steps are in steps.c,
 * recovery in recover.c, requests in requests.c. */
#include "reconciler-private.h"
#include "util/log.h"
#include "core/errors.h"
#include "core/restart.h"

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

const MvOpStats *
mv_reconciler_op_stats (MvReconciler *rec)
{
  return &rec->op_stats;
}

gint64
mv_reconciler_now (MvReconciler *rec)
{
  return rec->clock->real_time (rec->clock->data);
}

gint64
mv_reconciler_monotonic (MvReconciler *rec)
{
  return rec->clock->monotonic_time (rec->clock->data);
}

guint
mv_reconciler_timeout (MvReconciler *rec, guint ms, GSourceFunc func, gpointer data)
{
  return rec->clock->timeout_add (ms, func, data, rec->clock->data);
}

void
mv_reconciler_remove_timeout (MvReconciler *rec, guint *id)
{
  if (*id)
    rec->clock->source_remove (*id, rec->clock->data);
  *id = 0;
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
  rec->creating = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  rec->invalid_ids = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  rec->snapshots = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
                                          (GDestroyNotify) mv_snapshot_free);
  rec->snapshot_names = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  rec->snapshot_users = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  rec->warm_building = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  rec->warm = g_hash_table_new_full (g_str_hash, g_str_equal, NULL,
                                     (GDestroyNotify) mv_snapshot_free);
  rec->warm_behind_cancel = g_cancellable_new ();
  mv_op_stats_init (&rec->op_stats);
  rec->machines = g_hash_table_new_full (g_str_hash, g_str_equal, NULL,
                                         (GDestroyNotify) mv_machine_free);
  rec->names = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  mv_reconciler_listen_to_guests (rec);
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
    mv_machine_settled (machine, error, G_MAXUINT64);
  mv_reconciler_remove_timeout (rec, &rec->resync_timer);
  mv_reconciler_remove_timeout (rec, &rec->idle_timer);
  mv_reconciler_console_free (rec);
  g_clear_pointer (&rec->by_name, g_ptr_array_unref);
  g_hash_table_unref (rec->names);
  g_hash_table_unref (rec->machines);
  g_hash_table_unref (rec->creating);
  g_hash_table_unref (rec->invalid_ids);
  g_hash_table_unref (rec->snapshots);
  g_hash_table_unref (rec->snapshot_names);
  g_hash_table_unref (rec->snapshot_users);
  g_hash_table_unref (rec->warm_building);
  g_hash_table_unref (rec->warm);
  g_object_unref (rec->warm_behind_cancel);
  g_free (rec);
}

MvMachine *
mv_reconciler_add_loaded (MvReconciler *rec, MvConfig *config, MvStatus *status)
{
  return mv_machine_new (rec, config, status);
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

  if (machine)
    return machine;
  machine = g_hash_table_lookup (rec->names, name_or_id);
  return machine && !machine->gone && g_str_equal (machine->config->spec->name, name_or_id)
         ? machine : NULL;
}

/* Names are unique among the machines (creates and renames check), so
 * the index holds one machine per name; records edited by hand that
 * repeat a name leave the first one loaded findable by it. */
void
mv_reconciler_name_added (MvReconciler *rec, MvMachine *machine)
{
  const char *name = machine->config->spec->name;

  if (!g_hash_table_contains (rec->names, name))
    g_hash_table_insert (rec->names, g_strdup (name), machine);
}

void
mv_reconciler_name_changed (MvReconciler *rec, MvMachine *machine, const char *old_name)
{
  if (g_hash_table_lookup (rec->names, old_name) == machine)
    g_hash_table_remove (rec->names, old_name);
  mv_reconciler_name_added (rec, machine);
  g_clear_pointer (&rec->by_name, g_ptr_array_unref);
}

void
mv_reconciler_name_removed (MvReconciler *rec, MvMachine *machine)
{
  const char *name = machine->config->spec->name;

  if (g_hash_table_lookup (rec->names, name) == machine)
    g_hash_table_remove (rec->names, name);
  g_clear_pointer (&rec->by_name, g_ptr_array_unref);
}

static gint
compare_by_name (gconstpointer a, gconstpointer b)
{
  const MvMachine *ma = *(MvMachine *const *) a;
  const MvMachine *mb = *(MvMachine *const *) b;

  return g_strcmp0 (ma->config->spec->name, mb->config->spec->name);
}

/* Whether @sorted still holds every machine there is, none gone, in the
 * order of their names: a rename or a machine that went is seen here, in
 * one pass, rather than told from every place that changes a name. */
static gboolean
still_sorted (MvReconciler *rec, GPtrArray *sorted)
{
  guint there = 0;
  GHashTableIter iter;
  MvMachine *machine;

  g_hash_table_iter_init (&iter, rec->machines);
  while (g_hash_table_iter_next (&iter, NULL, (gpointer *) &machine))
    there += !machine->gone;
  if (there != sorted->len)
    return FALSE;
  for (guint i = 0; i < sorted->len; i++)
    {
      machine = sorted->pdata[i];
      if (machine->gone)
        return FALSE;
      if (i > 0 && compare_by_name (&sorted->pdata[i - 1], &sorted->pdata[i]) > 0)
        return FALSE;
    }
  return TRUE;
}

/* Every machine that is not gone, by name. The order is kept between
 * calls: a listing of thousands costs a pass, not a sort. */
GPtrArray *
mv_reconciler_list (MvReconciler *rec)
{
  GPtrArray *list;
  GHashTableIter iter;
  MvMachine *machine;

  if (rec->by_name && still_sorted (rec, rec->by_name))
    return g_ptr_array_copy (rec->by_name, NULL, NULL);

  g_clear_pointer (&rec->by_name, g_ptr_array_unref);
  list = g_ptr_array_sized_new (g_hash_table_size (rec->machines));
  g_hash_table_iter_init (&iter, rec->machines);
  while (g_hash_table_iter_next (&iter, NULL, (gpointer *) &machine))
    if (!machine->gone)
      g_ptr_array_add (list, machine);
  g_ptr_array_sort (list, compare_by_name);
  rec->by_name = g_ptr_array_copy (list, NULL, NULL);
  return list;
}

GPtrArray *
mv_reconciler_active_since (MvReconciler *rec, gint64 since)
{
  GPtrArray *ids = g_ptr_array_new_with_free_func (g_free);
  GHashTableIter iter;
  MvMachine *machine;
  const char *id;

  g_hash_table_iter_init (&iter, rec->machines);
  while (g_hash_table_iter_next (&iter, NULL, (gpointer *) &machine))
    if (!machine->gone &&
        (machine->status->vmm != NULL || machine->busy || machine->active_at >= since))
      g_ptr_array_add (ids, g_strdup (machine->id));
  /* What runs for a record left alone is not watched: always looked at. */
  g_hash_table_iter_init (&iter, rec->invalid_ids);
  while (g_hash_table_iter_next (&iter, (gpointer *) &id, NULL))
    g_ptr_array_add (ids, g_strdup (id));
  return ids;
}

/* The machines that answer for names on @network, with their addresses. */
static GPtrArray *
lookup (MvReconciler *rec, const char *network, const char *name, const char *address,
        gboolean names)
{
  GPtrArray *found = g_ptr_array_new_with_free_func (g_free);
  MvNetwork *net = rec->host->network;
  GHashTableIter iter;
  MvMachine *machine;

  if (!net)
    return found;
  g_hash_table_iter_init (&iter, rec->machines);
  while (g_hash_table_iter_next (&iter, NULL, (gpointer *) &machine))
    {
      const MvSpec *spec = machine->config->spec;
      const char *hostname = spec->hostname && *spec->hostname ? spec->hostname : spec->name;
      g_autofree char *held = NULL;

      if (machine->gone || g_strcmp0 (spec->network_name, network) != 0 ||
          !mv_state_holds_resources (machine->status->state))
        continue;
      if (name && g_ascii_strcasecmp (spec->name, name) != 0 &&
          g_ascii_strcasecmp (hostname, name) != 0)
        continue;
      held = net->address_of (net, machine->id, spec);
      if (!held || (address && !g_str_equal (held, address)))
        continue;
      if (!names)
        g_ptr_array_add (found, g_steal_pointer (&held));
      else
        {
          g_ptr_array_add (found, g_strdup (spec->name));
          if (g_ascii_strcasecmp (hostname, spec->name) != 0)
            g_ptr_array_add (found, g_strdup (hostname));
        }
    }
  return found;
}

GPtrArray *
mv_reconciler_lookup_host (MvReconciler *rec, const char *network, const char *name)
{
  return lookup (rec, network, name, NULL, FALSE);
}

GPtrArray *
mv_reconciler_lookup_addr (MvReconciler *rec, const char *network, const char *address)
{
  return lookup (rec, network, NULL, address, TRUE);
}

void
mv_reconciler_add_invalid (MvReconciler *rec, const char *machine_id)
{
  g_hash_table_add (rec->invalid_ids, g_strdup (machine_id));
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
    if (machine->busy || machine->record_writes > 0)
      return TRUE;
  return FALSE;
}

MvWishOutcome
mv_machine_wish_outcome (const MvMachine *machine, MvDesired target, guint64 generation)
{
  const MvConfig *config = machine->config;

  /* Reached as such, though something wanted since (a workload that ended
   * as its Start was being recorded) may already have replaced it. */
  if (machine->status->observed_generation == generation)
    return MV_WISH_REACHED;
  if (target != config->desired && generation < config->desired_generation)
    return MV_WISH_SUPERSEDED;
  if (machine->status->observed_generation >= generation)
    return MV_WISH_REACHED;
  return MV_WISH_PENDING;
}

typedef struct {
  MvStorage *storage;
  char     **machine_ids;
} SweepTask;

static void
sweep_task_free (SweepTask *task)
{
  g_strfreev (task->machine_ids);
  g_free (task);
}

static void
sweep_in_thread (GTask *gtask, gpointer source, gpointer task_data, GCancellable *cancellable)
{
  SweepTask *task = task_data;

  for (guint i = 0; task->machine_ids[i]; i++)
    {
      g_autoptr (GError) error = NULL;

      if (!task->storage->sweep (task->storage, task->machine_ids[i], &error))
        mv_log_machine (G_LOG_LEVEL_WARNING, task->machine_ids[i], NULL, NULL, "Machine %s: %s",
                        task->machine_ids[i], error->message);
    }
  g_task_return_boolean (gtask, TRUE);
}

void
mv_reconciler_sweep_later (MvReconciler *rec, char **machine_ids)
{
  SweepTask *task = g_new0 (SweepTask, 1);

  task->storage = rec->host->storage;
  task->machine_ids = machine_ids;
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
  mv_reconciler_sweep_later (machine->reconciler, g_strdupv ((char *[]) { machine->id, NULL }));
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

  mv_reconciler_remove_timeout (rec, &machine->restart_timer);
  machine->restart_timer = mv_reconciler_timeout (rec, (guint) CLAMP (delay_ms, 0, G_MAXUINT),
                                          on_restart_due, machine);
}

void
mv_reconciler_cancel_restart (MvMachine *machine)
{
  MvStatus *status = machine->status;

  mv_reconciler_remove_timeout (machine->reconciler, &machine->restart_timer);
  if (status->restart_count != 0 || status->next_restart_at != 0)
    {
      status->restart_count = 0;
      status->next_restart_at = 0;
      mv_machine_changed (machine, MV_PROP_RESTART_COUNT);
      mv_machine_save_status (machine, NULL);
    }
}

/* Ended cleanly only with exit code 0, as the restart policy judges it:
 * anything else is a crash. */
static void
report_end (MvMachine *machine, gboolean has_exit_code, int exit_code, const char *reason)
{
  MvEvent event = {
    .kind = has_exit_code && exit_code == 0 ? MV_EVENT_ENDED : MV_EVENT_CRASHED,
    .machine_id = machine->id,
    .machine_name = machine->config->spec->name,
    .message = (char *) reason,
    .has_exit_code = has_exit_code,
    .exit_code = exit_code,
  };

  mv_reconciler_event (machine->reconciler, &event);
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
  machine->active_at = mv_reconciler_monotonic (rec);
  status->finished_at = mv_reconciler_now (rec);
  status->has_exit_code = has_exit_code;
  status->exit_code = has_exit_code ? exit_code : 0;
  mv_machine_changed (machine, MV_PROP_EXIT_CODE);
  report_end (machine, has_exit_code, exit_code, reason);

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
    mv_machine_failed_now (machine, error);
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
    {
      machine->watch_id = runtime->watch (runtime, machine->id, machine->status->vmm,
                                          on_vmm_exit, machine->reconciler);
      mv_reconciler_attach_guest (machine, runtime);
    }
}

void
mv_reconciler_unwatch_vmm (MvMachine *machine)
{
  MvRuntime *runtime = mv_reconciler_runtime_for (machine, NULL);

  if (machine->watch_id && runtime && runtime->unwatch)
    runtime->unwatch (runtime, machine->watch_id);
  machine->watch_id = 0;
  mv_reconciler_detach_guest (machine, runtime);
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
/* What is observed reaches the disk once it can: a status that could
 * not be written (a full disk) is written again. */
static void
resync (MvMachine *machine)
{
  if (machine->status_unsaved && !machine->busy)
    mv_machine_save_status (machine, NULL);
  mv_reconciler_reconcile (machine);
}

static gboolean
on_resync (gpointer user_data)
{
  for_each_machine (user_data, resync);
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
  rec->resync_timer = mv_reconciler_timeout (rec, rec->options.resync_seconds * 1000, on_resync, rec);
  rec->idle_timer = mv_reconciler_timeout (rec, rec->options.idle_sample_seconds * 1000, on_idle_sample,
                                   rec);
}
