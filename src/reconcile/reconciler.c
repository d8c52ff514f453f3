/* Reconciliation: compare what is desired with what is observed, take one
 * step through the Runtime in a worker thread, record what came of it, and
 * look again. The phase and a fresh operation ID are written before every
 * host call, so that a crash leaves enough to finish or undo the step
 * (mv_reconciler_recover). One step at a time per machine; many machines
 * at once. */
#include "reconciler.h"
#include "core/errors.h"
#include "core/plan.h"
#include "core/restart.h"
#include "names.h"
#include "store/fault.h"
#include "util/files.h"

#include <errno.h>
#include <glib/gstdio.h>

/* Where a machine's frozen guest lives, beside its records, and where it is
 * written before it is known to be whole. */
#define SAVED_STATE_NAME    "saved"
#define SAVED_PARTIAL_NAME  "saved.partial"

/* What a destroy removes, in order; each is recorded in status.destroyed
 * once gone, so that an interrupted destroy resumes with the next. The
 * records go last. */
static const char *const destroy_resources[] = {
  "vmm",
  "runtime",
  "saved-state",
  "records",
};

typedef struct {
  sd_bus_message *call;
  char           *reply_path;
  MvDesired       target;
  guint64         generation;
  gboolean        reply_bool;    /* the reply is (b) TRUE */
} MvWaiter;

typedef struct {
  MvMachine  *machine;
  MvRuntime  *runtime;         /* NULL only for a destroy of a type gone from the host */
  MvStore    *store;
  MvStep      step;
  char       *phase;           /* as recorded; also names the fault points */
  char       *machine_id;
  char       *runtime_dir;
  char       *saved_dir;       /* <machine dir>/saved */
  char       *partial_dir;     /* <machine dir>/saved.partial */
  MvSpec     *spec;
  JsonObject *vmm;
  gboolean    restore;         /* START: from the saved guest */
  gboolean    restarting;      /* START: by the restart policy */
  const char *resource;        /* DESTROY: the one resource this step removes */
} StepTask;

static void reconcile (MvMachine *machine);

static void
step_task_free (StepTask *task)
{
  g_free (task->phase);
  g_free (task->machine_id);
  g_free (task->runtime_dir);
  g_free (task->saved_dir);
  g_free (task->partial_dir);
  mv_spec_free (task->spec);
  if (task->vmm)
    json_object_unref (task->vmm);
  g_free (task);
}

static void
waiter_free (MvWaiter *waiter)
{
  sd_bus_message_unref (waiter->call);
  g_free (waiter->reply_path);
  g_free (waiter);
}

static gint64
now_us (void)
{
  return g_get_real_time ();
}

static char *
saved_dir_of (MvMachine *machine, const char *name)
{
  g_autofree char *dir = mv_store_machine_dir (machine->daemon->store, machine->id);
  return g_build_filename (dir, name, NULL);
}

static gboolean
is_migrating (MvMachine *machine)
{
  MvDaemon *daemon = machine->daemon;

  return daemon->migration_guard &&
         daemon->migration_guard (machine->id, daemon->migration_guard_data);
}

static void
save_status (MvMachine *machine)
{
  g_autoptr (GError) error = NULL;

  if (!mv_store_save_status (machine->daemon->store, machine->id, machine->status, &error))
    g_warning ("Machine %s: could not record its status: %s", machine->id, error->message);
}

static void
save_config (MvMachine *machine)
{
  g_autoptr (GError) error = NULL;

  if (!mv_store_save_config (machine->daemon->store, machine->config, &error))
    g_warning ("Machine %s: could not record its configuration: %s", machine->id, error->message);
  mv_machine_changed (machine, MV_PROP_ALL_CONFIG);
}

static void
set_state (MvMachine *machine, MvState state, const char *error)
{
  MvStatus *status = machine->status;
  guint props = 0;

  if (status->state != state)
    {
      g_log_structured (G_LOG_DOMAIN, G_LOG_LEVEL_MESSAGE,
                        MV_LOG_FIELD_MACHINE_ID, machine->id,
                        "MESSAGE", "Machine %s (%s): %s -> %s%s%s", machine->config->spec->name,
                        machine->id, mv_state_to_string (status->state),
                        mv_state_to_string (state), error ? ": " : "", error ? error : "");
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

static void
set_failed (MvMachine *machine, const char *why)
{
  machine->status->failed_generation = machine->config->desired_generation;
  set_state (machine, MV_STATE_FAILED, why);
}

static void
clear_vmm (MvMachine *machine)
{
  MvStatus *status = machine->status;

  g_clear_pointer (&status->vmm, json_object_unref);
  status->started_at = 0;
  machine->idle_sampled_at = 0;
  machine->idle_since = 0;
  mv_machine_changed (machine, MV_PROP_STARTED_AT);
}

static void
reply_ok (MvWaiter *w)
{
  if (w->reply_path)
    sd_bus_reply_method_return (w->call, "o", w->reply_path);
  else if (w->reply_bool)
    sd_bus_reply_method_return (w->call, "b", 1);
  else
    sd_bus_reply_method_return (w->call, NULL);
}

/* Replies to every waiting call whose wish is settled: reached, replaced
 * by another wish, or failed with @failure. */
static void
settle_waiters (MvMachine *machine, const GError *failure)
{
  MvConfig *config = machine->config;
  MvStatus *status = machine->status;
  GList *l = machine->waiters.head;

  while (l)
    {
      GList *next = l->next;
      MvWaiter *w = l->data;
      gboolean done = TRUE;

      if (machine->gone)
        {
          if (w->target == MV_DESIRED_DESTROYED)
            reply_ok (w);
          else
            sd_bus_reply_method_errorf (w->call, MV_BUS_ERROR_NOT_FOUND,
                                        "Machine %s was deleted", machine->id);
        }
      else if (w->target != config->desired && w->generation < config->desired_generation)
        sd_bus_reply_method_errorf (w->call, MV_BUS_ERROR_INVALID_STATE,
                                    "Superseded: machine %s is now wanted %s",
                                    config->spec->name, mv_desired_to_string (config->desired));
      else if (failure)
        mv_bus_reply_gerror (w->call, failure);
      else if (status->observed_generation >= w->generation)
        reply_ok (w);
      else
        done = FALSE;

      if (done)
        {
          waiter_free (w);
          g_queue_delete_link (&machine->waiters, l);
        }
      l = next;
    }
}

void
mv_reconciler_settle_waiters (MvMachine *machine, const GError *error)
{
  settle_waiters (machine, error);
}

static void
add_waiter (MvMachine *machine, sd_bus_message *call, const char *reply_path, gboolean reply_bool)
{
  MvWaiter *w = g_new0 (MvWaiter, 1);

  w->call = sd_bus_message_ref (call);
  w->reply_path = g_strdup (reply_path);
  w->reply_bool = reply_bool;
  w->target = machine->config->desired;
  w->generation = machine->config->desired_generation;
  g_queue_push_tail (&machine->waiters, w);
  mv_reconciler_kick (machine);
}

void
mv_reconciler_wait (MvMachine *machine, sd_bus_message *call, const char *reply_path)
{
  add_waiter (machine, call, reply_path, FALSE);
}

static MvRuntime *
runtime_for (MvMachine *machine, GError **error)
{
  return mv_daemon_runtime_for_spec (machine->daemon, machine->config->spec, error);
}

/* Restarts ---------------------------------------------------------------- */

static gboolean
on_restart_due (gpointer user_data)
{
  MvMachine *machine = user_data;

  machine->restart_timer = 0;
  reconcile (machine);
  return G_SOURCE_REMOVE;
}

static void
schedule_restart (MvMachine *machine)
{
  gint64 delay_ms = (machine->status->next_restart_at - now_us ()) / 1000;

  g_clear_handle_id (&machine->restart_timer, g_source_remove);
  machine->restart_timer = g_timeout_add ((guint) CLAMP (delay_ms, 0, G_MAXUINT), on_restart_due,
                                          machine);
}

void
mv_reconciler_cancel_restart (MvMachine *machine)
{
  MvStatus *status = machine->status;

  g_clear_handle_id (&machine->restart_timer, g_source_remove);
  if (status->restart_count != 0 || status->next_restart_at != 0)
    {
      status->restart_count = 0;
      status->next_restart_at = 0;
      mv_machine_changed (machine, MV_PROP_RESTART_COUNT);
      save_status (machine);
    }
}

static void unwatch_vmm (MvMachine *machine);

/* The guest ended without being asked to (or could not be started again
 * by its restart policy): the restart policy decides what becomes of it. */
static void
handle_end (MvMachine *machine, gboolean has_exit_code, int exit_code, const char *reason)
{
  MvConfig *config = machine->config;
  MvStatus *status = machine->status;
  MvDaemon *daemon = machine->daemon;
  gboolean clean = has_exit_code && exit_code == 0;
  gint64 restart_at = 0;
  g_autoptr (GError) error = NULL;
  MvEndOutcome outcome;

  unwatch_vmm (machine);
  clear_vmm (machine);
  status->finished_at = now_us ();
  status->has_exit_code = has_exit_code;
  status->exit_code = has_exit_code ? exit_code : 0;
  mv_machine_changed (machine, MV_PROP_EXIT_CODE);

  outcome = mv_restart_decide (config->spec, status->restart_count, clean, status->finished_at,
                               (gint64) daemon->restart_backoff_ms * 1000, &restart_at);
  switch (outcome)
    {
    case MV_END_RESTART:
      status->restart_count++;
      status->next_restart_at = restart_at;
      mv_machine_changed (machine, MV_PROP_RESTART_COUNT);
      set_state (machine, MV_STATE_RESTARTING, reason);
      schedule_restart (machine);
      break;
    case MV_END_STOPPED:
      /* The guest ended its work: nobody wants it running any more. */
      if (mv_config_set_desired (config, MV_DESIRED_STOPPED, now_us ()))
        save_config (machine);
      set_state (machine, MV_STATE_STOPPED, reason);
      status->observed_generation = config->desired_generation;
      mv_machine_changed (machine, MV_PROP_OBSERVED_GENERATION);
      break;
    case MV_END_FAILED:
      set_failed (machine, reason ? reason : "the VMM ended unexpectedly");
      error = g_error_new (MV_ERROR, MV_ERROR_INVALID_STATE, "Machine %s failed: %s",
                           config->spec->name, status->state_error);
      break;
    }
  save_status (machine);

  if (outcome != MV_END_RESTART && config->spec->remove_on_exit)
    {
      g_message ("Machine %s (%s) ended and is removed, as it asked", config->spec->name,
                 machine->id);
      mv_config_set_desired (config, MV_DESIRED_DESTROYED, now_us ());
      save_config (machine);
    }
  settle_waiters (machine, error);
  reconcile (machine);
}

static void
on_vmm_exit (const char *machine_id, gboolean has_exit_code, int exit_code,
             const char *reason, gpointer user_data)
{
  MvDaemon *daemon = user_data;
  MvMachine *machine = g_hash_table_lookup (daemon->machines, machine_id);

  if (!machine || machine->gone)
    return;
  machine->watch_id = 0;
  /* An operation under way (a stop, say) accounts for the end itself. */
  if (machine->busy)
    return;
  handle_end (machine, has_exit_code, exit_code, reason);
}

static void
watch_vmm (MvMachine *machine, MvRuntime *runtime)
{
  if (machine->watch_id == 0 && runtime->watch && machine->status->vmm)
    machine->watch_id = runtime->watch (runtime, machine->id, machine->status->vmm,
                                        on_vmm_exit, machine->daemon);
}

static void
unwatch_vmm (MvMachine *machine)
{
  MvRuntime *runtime = runtime_for (machine, NULL);

  if (machine->watch_id != 0 && runtime && runtime->unwatch)
    runtime->unwatch (runtime, machine->watch_id);
  machine->watch_id = 0;
}

/* Steps, in a worker thread ------------------------------------------------ */

static gboolean
make_dir (const char *path, GError **error)
{
  if (g_mkdir_with_parents (path, 0700) == 0)
    return TRUE;
  int saved = errno;
  g_set_error (error, G_IO_ERROR, g_io_error_from_errno (saved), "Could not create %s: %s",
               path, g_strerror (saved));
  return FALSE;
}

/* Freezes the guest into saved.partial, then renames it to saved: a
 * directory called saved is always whole. */
static gboolean
standby_in_thread (StepTask *task, const MvRuntimeRequest *req, GError **error)
{
  MvRuntime *rt = task->runtime;

  if (!rt->save)
    {
      g_set_error (error, MV_ERROR, MV_ERROR_UNSUPPORTED,
                   "The %s hypervisor cannot freeze a guest to disk", rt->type);
      return FALSE;
    }
  if (!mv_remove_tree (task->partial_dir, error) || !mv_remove_tree (task->saved_dir, error) ||
      !make_dir (task->partial_dir, error))
    return FALSE;
  if (!rt->save (rt, req, task->partial_dir, error))
    {
      mv_remove_tree (task->partial_dir, NULL);
      return FALSE;
    }
  if (rename (task->partial_dir, task->saved_dir) < 0)
    {
      int saved = errno;
      g_set_error (error, G_IO_ERROR, g_io_error_from_errno (saved), "Could not rename %s: %s",
                   task->partial_dir, g_strerror (saved));
      return FALSE;
    }
  return TRUE;
}

static gboolean
destroy_in_thread (StepTask *task, const MvRuntimeRequest *req, GError **error)
{
  MvRuntime *rt = task->runtime;
  const char *what = task->resource;

  if (g_str_equal (what, "vmm"))
    return !rt || rt->stop (rt, req, TRUE, error);
  if (g_str_equal (what, "runtime"))
    return (!rt || rt->destroy (rt, req, error)) && mv_remove_tree (task->runtime_dir, error);
  if (g_str_equal (what, "saved-state"))
    return mv_remove_tree (task->partial_dir, error) && mv_remove_tree (task->saved_dir, error);
  if (g_str_equal (what, "records"))
    return mv_store_remove_machine (task->store, task->machine_id, error);
  g_assert_not_reached ();
}

static void
run_step_in_thread (GTask *gtask, gpointer source, gpointer task_data, GCancellable *cancellable)
{
  StepTask *task = task_data;
  MvRuntime *rt = task->runtime;
  MvRuntimeRequest req = {
    .machine_id = task->machine_id,
    .spec = task->spec,
    .runtime_dir = task->runtime_dir,
    .vmm = task->vmm,
  };
  GError *error = NULL;
  JsonObject *vmm = NULL;
  gboolean ok = FALSE;

  mv_fault_point (task->phase, "recorded");

  switch (task->step)
    {
    case MV_STEP_START:
      if (!make_dir (task->runtime_dir, &error))
        break;
      if (task->restore)
        {
          if (!rt->restore)
            g_set_error (&error, MV_ERROR, MV_ERROR_UNSUPPORTED,
                         "The %s hypervisor cannot restore a frozen guest", rt->type);
          else
            vmm = rt->restore (rt, &req, task->saved_dir, &error);
        }
      else
        vmm = rt->start (rt, &req, &error);
      ok = vmm != NULL;
      break;
    case MV_STEP_STOP:
    case MV_STEP_FORCE_STOP:
      /* Stopped means booting afresh next time: what was frozen goes. */
      ok = rt->stop (rt, &req, task->step == MV_STEP_FORCE_STOP, &error) &&
           mv_remove_tree (task->partial_dir, &error) && mv_remove_tree (task->saved_dir, &error);
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
      ok = destroy_in_thread (task, &req, &error);
      break;
    case MV_STEP_NONE:
      ok = TRUE;
      break;
    }

  if (!ok)
    {
      g_clear_pointer (&vmm, json_object_unref);
      g_task_return_error (gtask, error);
      return;
    }
  mv_fault_point (task->phase, "done");
  if (vmm)
    g_task_return_pointer (gtask, vmm, (GDestroyNotify) json_object_unref);
  else
    g_task_return_pointer (gtask, NULL, NULL);
}

/* Back on the main thread ------------------------------------------------- */

#define STALE_PREFIX  SAVED_STATE_NAME ".stale-"

static void
remove_in_thread (GTask *gtask, gpointer source, gpointer task_data, GCancellable *cancellable)
{
  g_autoptr (GError) error = NULL;

  if (!mv_remove_tree (task_data, &error))
    g_warning ("%s", error->message);
  g_task_return_boolean (gtask, TRUE);
}

/* Moves @saved_dir out of the way at once (a rename) and deletes it in a
 * worker thread: a frozen guest is as large as its memory, and the reply
 * to whoever woke it should not wait for that. Leftovers of a crash are
 * removed by recovery. */
static void
discard_later (const char *saved_dir)
{
  g_autofree char *id = mv_id_new ();
  g_autofree char *stale = g_strconcat (saved_dir, ".stale-", id, NULL);
  g_autoptr (GTask) gtask = NULL;

  if (rename (saved_dir, stale) < 0)
    {
      if (errno != ENOENT)
        g_warning ("Could not move %s aside: %s", saved_dir, g_strerror (errno));
      return;
    }
  gtask = g_task_new (NULL, NULL, NULL, NULL);
  g_task_set_task_data (gtask, g_steal_pointer (&stale), g_free);
  g_task_run_in_thread (gtask, remove_in_thread);
}

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
      handle_end (machine, FALSE, 0, error->message);
      return;
    }
  if (task->step == MV_STEP_START)
    clear_vmm (machine);
  if (task->step == MV_STEP_START && task->restore)
    {
      /* A restore failure keeps the saved guest, to be tried again. */
      status->failed_generation = machine->config->desired_generation;
      set_state (machine, MV_STATE_STANDBY, error->message);
    }
  else if (task->step == MV_STEP_STANDBY)
    {
      /* Nothing was frozen; the guest runs on if its VMM still does. */
      MvRuntimeRequest req = { machine->id, machine->config->spec, task->runtime_dir, status->vmm };
      MvVmmState vmm = task->runtime->probe (task->runtime, &req);

      status->failed_generation = machine->config->desired_generation;
      if (vmm == MV_VMM_GONE)
        {
          clear_vmm (machine);
          set_state (machine, MV_STATE_FAILED, error->message);
        }
      else
        set_state (machine, vmm == MV_VMM_PAUSED ? MV_STATE_PAUSED : MV_STATE_RUNNING,
                   error->message);
    }
  else
    set_failed (machine, error->message);
  save_status (machine);
  settle_waiters (machine, reported);
}

/* Returns FALSE if the machine is gone (freed) once its records are. */
static gboolean
step_succeeded (MvMachine *machine, StepTask *task, JsonObject *vmm)
{
  MvStatus *status = machine->status;
  gboolean discard_saved = FALSE;

  switch (task->step)
    {
    case MV_STEP_START:
      g_clear_pointer (&status->vmm, json_object_unref);
      status->vmm = vmm;
      status->started_at = now_us ();
      status->has_exit_code = FALSE;
      status->observed_restart_generation = machine->config->restart_generation;
      status->next_restart_at = 0;
      mv_machine_changed (machine, MV_PROP_STARTED_AT | MV_PROP_EXIT_CODE);
      /* The guest runs on from it: the saved state is stale now. It goes
       * once the status no longer names it, off the main loop. */
      discard_saved = task->restore;
      if (task->restore)
        g_clear_pointer (&status->saved_state, g_free);
      set_state (machine, MV_STATE_RUNNING, NULL);
      watch_vmm (machine, task->runtime);
      break;
    case MV_STEP_STOP:
    case MV_STEP_FORCE_STOP:
      unwatch_vmm (machine);
      clear_vmm (machine);
      g_clear_pointer (&status->saved_state, g_free);
      set_state (machine, MV_STATE_STOPPED, NULL);
      break;
    case MV_STEP_PAUSE:
      set_state (machine, MV_STATE_PAUSED, NULL);
      break;
    case MV_STEP_RESUME:
      set_state (machine, MV_STATE_RUNNING, NULL);
      break;
    case MV_STEP_STANDBY:
      unwatch_vmm (machine);
      clear_vmm (machine);
      g_free (status->saved_state);
      status->saved_state = g_strdup (task->saved_dir);
      set_state (machine, MV_STATE_STANDBY, NULL);
      break;
    case MV_STEP_DESTROY:
      if (g_str_equal (task->resource, "records"))
        {
          mv_daemon_drop_machine (machine->daemon, machine);
          return FALSE;
        }
      if (g_str_equal (task->resource, "vmm"))
        {
          unwatch_vmm (machine);
          clear_vmm (machine);
          if (status->state != MV_STATE_STANDBY)
            set_state (machine, MV_STATE_STOPPED, NULL);
        }
      if (g_str_equal (task->resource, "saved-state"))
        g_clear_pointer (&status->saved_state, g_free);
      g_ptr_array_add (status->destroyed, g_strdup (task->resource));
      break;
    case MV_STEP_NONE:
      break;
    }
  save_status (machine);
  if (discard_saved)
    discard_later (task->saved_dir);
  return TRUE;
}

static void
on_step_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  StepTask *task = g_task_get_task_data (G_TASK (result));
  MvMachine *machine = task->machine;
  MvStatus *status = machine->status;
  g_autoptr (GError) error = NULL;
  JsonObject *vmm = g_task_propagate_pointer (G_TASK (result), &error);

  machine->busy = FALSE;
  g_clear_pointer (&status->phase, g_free);
  g_clear_pointer (&status->operation_id, g_free);
  mv_machine_changed (machine, MV_PROP_PHASE);

  if (error)
    step_failed (machine, task, error);
  else if (!step_succeeded (machine, task, vmm))
    return;
  reconcile (machine);
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

static const char *
next_destroy_resource (const MvStatus *status)
{
  for (guint i = 0; i < G_N_ELEMENTS (destroy_resources); i++)
    if (!g_ptr_array_find_with_equal_func (status->destroyed, destroy_resources[i],
                                           g_str_equal, NULL))
      return destroy_resources[i];
  return "records";
}

static void
run_step (MvMachine *machine, MvStep step)
{
  MvDaemon *daemon = machine->daemon;
  MvStatus *status = machine->status;
  g_autoptr (GError) error = NULL;
  MvRuntime *runtime = runtime_for (machine, &error);
  StepTask *task;

  if (!runtime && step != MV_STEP_DESTROY)
    {
      set_failed (machine, error->message);
      save_status (machine);
      settle_waiters (machine, error);
      return;
    }

  task = g_new0 (StepTask, 1);
  task->machine = machine;
  task->runtime = runtime;
  task->store = daemon->store;
  task->step = step;
  task->machine_id = g_strdup (machine->id);
  task->runtime_dir = mv_store_machine_runtime_dir (daemon->store, machine->id);
  task->saved_dir = saved_dir_of (machine, SAVED_STATE_NAME);
  task->partial_dir = saved_dir_of (machine, SAVED_PARTIAL_NAME);
  task->spec = mv_spec_copy (machine->config->spec);
  task->vmm = status->vmm ? json_object_ref (status->vmm) : NULL;
  task->restore = step == MV_STEP_START && status->saved_state != NULL;
  task->restarting = step == MV_STEP_START && status->state == MV_STATE_RESTARTING;
  if (step == MV_STEP_DESTROY)
    {
      task->resource = next_destroy_resource (status);
      task->phase = g_strconcat ("destroy-", task->resource, NULL);
    }
  else
    task->phase = g_strdup (task->restore ? "restore" : mv_step_to_string (step));

  /* Record what is about to happen before the host is touched. */
  machine->busy = TRUE;
  g_free (status->phase);
  status->phase = g_strdup (task->phase);
  g_free (status->operation_id);
  status->operation_id = mv_id_new ();
  if (step == MV_STEP_DESTROY && g_str_equal (task->resource, "vmm") &&
      mv_state_holds_resources (status->state))
    set_state (machine, MV_STATE_STOPPING, NULL);
  else
    set_state (machine, transitional_state (step, status->state), NULL);
  mv_machine_changed (machine, MV_PROP_PHASE);
  save_status (machine);

  g_autoptr (GTask) gtask = g_task_new (NULL, NULL, on_step_done, NULL);
  g_task_set_task_data (gtask, task, (GDestroyNotify) step_task_free);
  g_task_set_source_tag (gtask, run_step);
  g_task_run_in_thread (gtask, run_step_in_thread);
}

static void
reconcile (MvMachine *machine)
{
  MvConfig *config = machine->config;
  MvStatus *status = machine->status;
  MvStep step;

  if (machine->busy || machine->gone || is_migrating (machine))
    return;

  step = mv_plan_next_step (config, status, now_us ());
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
          save_status (machine);
        }
      settle_waiters (machine, NULL);
    }
  else if (status->state == MV_STATE_RESTARTING)
    {
      if (machine->restart_timer == 0)
        schedule_restart (machine);
    }
  else if (machine->waiters.length > 0)
    {
      /* Nothing more will be tried for this wish: say why. */
      g_autoptr (GError) error =
        g_error_new (MV_ERROR, MV_ERROR_INVALID_STATE, "Machine %s is %s%s%s",
                     config->spec->name, mv_state_to_string (status->state),
                     status->state_error ? ": " : "",
                     status->state_error ? status->state_error : "");
      settle_waiters (machine, error);
    }
}

void
mv_reconciler_kick (MvMachine *machine)
{
  reconcile (machine);
}

/* Standby: by request, when idle, and waking on traffic -------------------- */

static void
want_standby (MvMachine *machine, gboolean standby)
{
  if (mv_config_set_standby (machine->config, standby, now_us ()))
    save_config (machine);
}

void
mv_reconciler_sample_idle (MvMachine *machine)
{
  MvDaemon *daemon = machine->daemon;
  MvSpec *spec = machine->config->spec;
  MvRuntime *runtime = runtime_for (machine, NULL);
  g_autofree char *runtime_dir = NULL;
  guint64 cpu_ns = 0;
  gint64 now = g_get_monotonic_time ();

  if (spec->standby_after_seconds == 0 || machine->status->state != MV_STATE_RUNNING ||
      machine->busy || machine->config->standby || !runtime || !runtime->usage ||
      is_migrating (machine))
    {
      machine->idle_sampled_at = 0;
      machine->idle_since = 0;
      return;
    }

  runtime_dir = mv_store_machine_runtime_dir (daemon->store, machine->id);
  MvRuntimeRequest req = { machine->id, spec, runtime_dir, machine->status->vmm };
  if (!runtime->usage (runtime, &req, &cpu_ns, NULL))
    {
      machine->idle_sampled_at = 0;
      machine->idle_since = 0;
      return;
    }

  if (machine->idle_sampled_at != 0 && cpu_ns >= machine->idle_cpu_ns)
    {
      /* Idle: below idle_cpu_percent of one CPU since the last sample. */
      guint64 used_ns = cpu_ns - machine->idle_cpu_ns;
      guint64 elapsed_ns = (guint64) (now - machine->idle_sampled_at) * 1000;
      gboolean idle = used_ns * 100 < elapsed_ns * daemon->idle_cpu_percent;

      if (!idle)
        machine->idle_since = 0;
      else if (machine->idle_since == 0)
        machine->idle_since = machine->idle_sampled_at;

      if (idle && now - machine->idle_since >= (gint64) spec->standby_after_seconds * G_USEC_PER_SEC)
        {
          g_log_structured (G_LOG_DOMAIN, G_LOG_LEVEL_MESSAGE,
                            MV_LOG_FIELD_MACHINE_ID, machine->id,
                            "MESSAGE", "Machine %s (%s) idle for %u s: going on standby",
                            spec->name, machine->id, spec->standby_after_seconds);
          machine->idle_sampled_at = 0;
          machine->idle_since = 0;
          want_standby (machine, TRUE);
          reconcile (machine);
          return;
        }
    }
  machine->idle_cpu_ns = cpu_ns;
  machine->idle_sampled_at = now;
}

void
mv_reconciler_traffic (MvMachine *machine, guint64 sequence, sd_bus_message *call)
{
  MvStatus *status = machine->status;

  /* Events are handled in order, each once: an older or repeated one is
   * stale and changes nothing. */
  if (sequence <= status->traffic_sequence)
    {
      sd_bus_reply_method_return (call, "b", 0);
      return;
    }
  status->traffic_sequence = sequence;
  save_status (machine);

  if (!machine->config->standby)
    {
      sd_bus_reply_method_return (call, "b", 0);
      return;
    }
  g_log_structured (G_LOG_DOMAIN, G_LOG_LEVEL_MESSAGE, MV_LOG_FIELD_MACHINE_ID, machine->id,
                    "MESSAGE", "Machine %s (%s): traffic, waking it",
                    machine->config->spec->name, machine->id);
  want_standby (machine, FALSE);
  add_waiter (machine, call, NULL, TRUE);
}

static void
discard_saved_state (MvMachine *machine, const char *saved, const char *partial)
{
  g_autoptr (GError) error = NULL;

  if (!mv_remove_tree (partial, &error) || !mv_remove_tree (saved, &error))
    g_warning ("Machine %s: %s", machine->id, error->message);
  g_clear_pointer (&machine->status->saved_state, g_free);
}

void
mv_reconciler_discard_saved_state (MvMachine *machine)
{
  g_autofree char *saved = saved_dir_of (machine, SAVED_STATE_NAME);
  g_autofree char *partial = saved_dir_of (machine, SAVED_PARTIAL_NAME);

  discard_saved_state (machine, saved, partial);
  if (machine->status->state == MV_STATE_STANDBY)
    {
      gint64 now = now_us ();
      gboolean changed = mv_config_set_standby (machine->config, FALSE, now);

      changed |= mv_config_set_desired (machine->config, MV_DESIRED_STOPPED, now);
      if (changed)
        save_config (machine);
      set_state (machine, MV_STATE_STOPPED, NULL);
    }
  save_status (machine);
  reconcile (machine);
}

/* Recover at startup (seed 002) ------------------------------------------- */

static gboolean
dir_exists (const char *path)
{
  return g_file_test (path, G_FILE_TEST_IS_DIR);
}

/* Ends whatever an interrupted step may have left serving, recorded or
 * not; the runtime checks each process's identity before it signals. */
static void
kill_leftovers (MvMachine *machine, MvRuntime *runtime, const MvRuntimeRequest *req)
{
  g_autoptr (GError) error = NULL;

  if (runtime && !runtime->stop (runtime, req, TRUE, &error))
    g_warning ("Machine %s: could not end what an interrupted operation left: %s",
               machine->id, error->message);
}


/* What discard_later() had not finished deleting when the daemon ended. */
static void
remove_stale_saved_states (MvMachine *machine)
{
  g_autofree char *dir = mv_store_machine_dir (machine->daemon->store, machine->id);
  g_autoptr (GDir) d = g_dir_open (dir, 0, NULL);
  const char *name;

  while (d && (name = g_dir_read_name (d)))
    if (g_str_has_prefix (name, STALE_PREFIX))
      {
        g_autofree char *path = g_build_filename (dir, name, NULL);
        g_autoptr (GError) error = NULL;
        if (!mv_remove_tree (path, &error))
          g_warning ("Machine %s: %s", machine->id, error->message);
      }
}

void
mv_reconciler_recover (MvMachine *machine)
{
  MvStatus *status = machine->status;
  MvConfig *config = machine->config;
  MvRuntime *runtime = runtime_for (machine, NULL);
  g_autofree char *runtime_dir = mv_store_machine_runtime_dir (machine->daemon->store, machine->id);
  g_autofree char *saved = saved_dir_of (machine, SAVED_STATE_NAME);
  g_autofree char *partial = saved_dir_of (machine, SAVED_PARTIAL_NAME);
  g_autoptr (JsonNode) before = mv_status_to_node (status);
  g_autofree char *phase = g_steal_pointer (&status->phase);
  g_autofree char *why = NULL;
  MvRuntimeRequest req = {
    .machine_id = machine->id,
    .spec = config->spec,
    .runtime_dir = runtime_dir,
    .vmm = status->vmm,
  };
  MvVmmState vmm = MV_VMM_GONE;

  g_clear_pointer (&status->operation_id, g_free);
  remove_stale_saved_states (machine);
  if (phase)
    g_message ("Machine %s (%s): found operation %s interrupted", config->spec->name,
               machine->id, phase);

  if (config->desired == MV_DESIRED_DESTROYED || (phase && g_str_has_prefix (phase, "destroy-")))
    {
      /* The destroy resumes where it stopped, from status.destroyed. */
    }
  else if (g_strcmp0 (phase, "start") == 0 || g_strcmp0 (phase, "restore") == 0 ||
           status->state == MV_STATE_STARTING)
    {
      /* A VMM this start may have left was never recorded: it goes, by
       * its socket. A frozen guest is kept for the next try. */
      kill_leftovers (machine, runtime, &req);
      clear_vmm (machine);
      if (status->saved_state && dir_exists (saved))
        set_state (machine, MV_STATE_STANDBY, "interrupted while waking from standby");
      else
        set_failed (machine, "interrupted while starting");
    }
  else if (g_strcmp0 (phase, "stop") == 0 || g_strcmp0 (phase, "force-stop") == 0 ||
           status->state == MV_STATE_STOPPING)
    {
      kill_leftovers (machine, runtime, &req);
      clear_vmm (machine);
      discard_saved_state (machine, saved, partial);
      /* What was asked is what was being done: finish it. */
      if (config->desired == MV_DESIRED_STOPPED)
        set_state (machine, MV_STATE_STOPPED, NULL);
      else
        set_failed (machine, "interrupted while stopping");
    }
  else if (g_strcmp0 (phase, "standby") == 0 && !(runtime && status->vmm &&
                                                    runtime->probe (runtime, &req) != MV_VMM_GONE))
    {
      /* The VMM ended: the guest is frozen if the saved directory made
       * it to its final name, which happens only once it is whole. */
      clear_vmm (machine);
      mv_remove_tree (partial, NULL);
      if (dir_exists (saved))
        {
          g_free (status->saved_state);
          status->saved_state = g_strdup (saved);
          set_state (machine, MV_STATE_STANDBY, NULL);
        }
      else
        set_failed (machine, "interrupted while going on standby; the guest was lost");
    }
  else if (status->state == MV_STATE_RUNNING || status->state == MV_STATE_PAUSED)
    {
      vmm = runtime && status->vmm ? runtime->probe (runtime, &req) : MV_VMM_GONE;
      if (vmm != MV_VMM_GONE)
        {
          /* A saved guest beside a running VMM is stale. */
          if (status->saved_state || dir_exists (saved) || dir_exists (partial))
            discard_saved_state (machine, saved, partial);
          set_state (machine, vmm == MV_VMM_PAUSED ? MV_STATE_PAUSED : MV_STATE_RUNNING, NULL);
          watch_vmm (machine, runtime);
        }
      else
        why = g_strdup ("the VMM ended while the daemon was not running");
    }
  else if (status->state == MV_STATE_RESTARTING)
    schedule_restart (machine);

  /* Written only if recovery changed it: a start with many records reads
   * them all but writes none of them. */
  g_autoptr (JsonNode) after = mv_status_to_node (status);
  if (!json_node_equal (before, after))
    save_status (machine);
  if (why)
    handle_end (machine, FALSE, 0, why);
}

void
mv_reconciler_start_on_boot (MvMachine *machine)
{
  MvConfig *config = machine->config;
  MvState state = machine->status->state;

  if ((state != MV_STATE_STOPPED && state != MV_STATE_FAILED) ||
      config->desired == MV_DESIRED_DESTROYED ||
      !mv_restart_starts_on_boot (config->spec, config->stopped_by_user))
    return;
  g_message ("Machine %s (%s): started on boot, as its restart policy %s says",
             config->spec->name, machine->id, mv_restart_mode_to_string (config->spec->restart_mode));
  if (!mv_config_set_desired (config, MV_DESIRED_RUNNING, now_us ()))
    mv_config_retry (config, now_us ());
  save_config (machine);
}
