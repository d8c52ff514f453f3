/* Reconciliation: compare what is desired with what is observed, take one
 * step through the Runtime in a worker thread, record what came of it, and
 * look again. The phase and a fresh operation ID are written before every
 * host call, so a crash leaves enough to finish or undo the step. */
#include "reconciler.h"
#include "core/errors.h"
#include "core/plan.h"
#include "names.h"

#include <errno.h>
#include <glib/gstdio.h>

typedef struct {
  sd_bus_message *call;
  char           *reply_path;
  MvDesired       target;
  guint64         generation;
} MvWaiter;

typedef struct {
  MvMachine  *machine;
  MvRuntime  *runtime;
  MvStep      step;
  char       *machine_id;
  char       *runtime_dir;
  MvSpec     *spec;
  JsonObject *vmm;
  guint       stop_timeout_seconds;
} StepTask;

static void reconcile (MvMachine *machine);

static void
step_task_free (StepTask *task)
{
  g_free (task->machine_id);
  g_free (task->runtime_dir);
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
reply_ok (MvWaiter *w)
{
  if (w->reply_path)
    sd_bus_reply_method_return (w->call, "o", w->reply_path);
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
        {
          sd_bus_error e = SD_BUS_ERROR_NULL;
          mv_bus_error_from_gerror (&e, failure);
          sd_bus_reply_method_error (w->call, &e);
          sd_bus_error_free (&e);
        }
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

void
mv_reconciler_wait (MvMachine *machine, sd_bus_message *call, const char *reply_path)
{
  MvWaiter *w = g_new0 (MvWaiter, 1);

  w->call = sd_bus_message_ref (call);
  w->reply_path = g_strdup (reply_path);
  w->target = machine->config->desired;
  w->generation = machine->config->desired_generation;
  g_queue_push_tail (&machine->waiters, w);
  mv_reconciler_kick (machine);
}

static void
on_vmm_exit (const char *machine_id, gboolean has_exit_code, int exit_code,
             const char *reason, gpointer user_data)
{
  MvDaemon *daemon = user_data;
  MvMachine *machine = g_hash_table_lookup (daemon->machines, machine_id);
  MvStatus *status;
  gboolean clean = has_exit_code && exit_code == 0;

  /* An operation under way (a stop, say) accounts for the end itself. */
  if (!machine || machine->busy || machine->gone)
    return;

  status = machine->status;
  machine->watch_id = 0;
  g_clear_pointer (&status->vmm, json_object_unref);
  status->started_at = 0;
  status->finished_at = now_us ();
  status->has_exit_code = has_exit_code;
  status->exit_code = has_exit_code ? exit_code : 0;
  mv_machine_changed (machine, MV_PROP_STARTED_AT | MV_PROP_EXIT_CODE);

  if (clean)
    {
      /* The guest ended its work: nobody wants it running any more. */
      if (mv_config_set_desired (machine->config, MV_DESIRED_STOPPED, now_us ()))
        {
          save_config (machine);
          mv_machine_changed (machine, MV_PROP_ALL_CONFIG);
        }
      set_state (machine, MV_STATE_STOPPED, reason);
      status->observed_generation = machine->config->desired_generation;
    }
  else
    {
      status->failed_generation = machine->config->desired_generation;
      set_state (machine, MV_STATE_FAILED, reason ? reason : "the VMM ended unexpectedly");
    }
  mv_machine_changed (machine, MV_PROP_OBSERVED_GENERATION);
  save_status (machine);

  g_autoptr (GError) error = clean ? NULL
    : g_error_new (MV_ERROR, MV_ERROR_INVALID_STATE, "Machine %s failed: %s",
                   machine->config->spec->name, status->state_error);
  settle_waiters (machine, error);
  mv_reconciler_kick (machine);
}

static void
watch_vmm (MvMachine *machine, MvRuntime *runtime)
{
  if (machine->watch_id == 0 && runtime->watch && machine->status->vmm)
    machine->watch_id = runtime->watch (runtime, machine->id, machine->status->vmm,
                                        on_vmm_exit, machine->daemon);
}

static void
unwatch_vmm (MvMachine *machine, MvRuntime *runtime)
{
  if (machine->watch_id != 0 && runtime && runtime->unwatch)
    runtime->unwatch (runtime, machine->watch_id);
  machine->watch_id = 0;
}

static MvRuntime *
runtime_for (MvMachine *machine, GError **error)
{
  const char *type = machine->config->spec->hypervisor_type;
  MvRuntime *runtime = mv_daemon_find_runtime (machine->daemon, type);

  if (!runtime)
    g_set_error (error, MV_ERROR, MV_ERROR_UNSUPPORTED,
                 "hypervisor_type: %s is not available on this host",
                 type ? type : "(default)");
  return runtime;
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

  switch (task->step)
    {
    case MV_STEP_START:
      if (g_mkdir_with_parents (task->runtime_dir, 0700) < 0)
        {
          int saved = errno;
          g_set_error (&error, G_IO_ERROR, g_io_error_from_errno (saved),
                       "Could not create %s: %s", task->runtime_dir, g_strerror (saved));
          break;
        }
      vmm = rt->start (rt, &req, &error);
      ok = vmm != NULL;
      break;
    case MV_STEP_STOP:
    case MV_STEP_FORCE_STOP:
      ok = rt->stop (rt, &req, task->step == MV_STEP_FORCE_STOP, &error);
      break;
    case MV_STEP_PAUSE:
      ok = rt->pause (rt, &req, &error);
      break;
    case MV_STEP_RESUME:
      ok = rt->resume (rt, &req, &error);
      break;
    case MV_STEP_DESTROY:
      ok = rt->destroy (rt, &req, &error);
      break;
    case MV_STEP_NONE:
      ok = TRUE;
      break;
    }

  if (!ok)
    g_task_return_error (gtask, error);
  else if (vmm)
    g_task_return_pointer (gtask, vmm, (GDestroyNotify) json_object_unref);
  else
    g_task_return_pointer (gtask, NULL, NULL);
}

static void
finish_destroy (MvMachine *machine)
{
  g_autoptr (GError) error = NULL;

  if (!mv_store_remove_machine (machine->daemon->store, machine->id, &error))
    {
      g_warning ("Machine %s: could not remove its records: %s", machine->id, error->message);
      machine->status->failed_generation = machine->config->desired_generation;
      set_state (machine, MV_STATE_FAILED, error->message);
      save_status (machine);
      settle_waiters (machine, error);
      return;
    }
  mv_daemon_drop_machine (machine->daemon, machine);
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
    {
      g_autoptr (GError) reported = NULL;

      if (task->step == MV_STEP_START)
        g_clear_pointer (&status->vmm, json_object_unref);
      status->failed_generation = machine->config->desired_generation;
      set_state (machine, MV_STATE_FAILED, error->message);
      save_status (machine);
      if (error->domain == MV_ERROR)
        reported = g_error_copy (error);
      else
        reported = g_error_new (MV_ERROR, MV_ERROR_FAILED, "%s", error->message);
      settle_waiters (machine, reported);
      mv_reconciler_kick (machine);
      return;
    }

  switch (task->step)
    {
    case MV_STEP_START:
      g_clear_pointer (&status->vmm, json_object_unref);
      status->vmm = vmm;
      status->started_at = now_us ();
      status->has_exit_code = FALSE;
      status->observed_restart_generation = machine->config->restart_generation;
      g_clear_pointer (&status->saved_state, g_free);
      mv_machine_changed (machine, MV_PROP_STARTED_AT | MV_PROP_EXIT_CODE);
      set_state (machine, MV_STATE_RUNNING, NULL);
      watch_vmm (machine, task->runtime);
      break;
    case MV_STEP_STOP:
    case MV_STEP_FORCE_STOP:
      unwatch_vmm (machine, task->runtime);
      g_clear_pointer (&status->vmm, json_object_unref);
      g_clear_pointer (&status->saved_state, g_free);
      status->started_at = 0;
      mv_machine_changed (machine, MV_PROP_STARTED_AT);
      set_state (machine, MV_STATE_STOPPED, NULL);
      break;
    case MV_STEP_PAUSE:
      set_state (machine, MV_STATE_PAUSED, NULL);
      break;
    case MV_STEP_RESUME:
      set_state (machine, MV_STATE_RUNNING, NULL);
      break;
    case MV_STEP_DESTROY:
      unwatch_vmm (machine, task->runtime);
      finish_destroy (machine);
      return;
    case MV_STEP_NONE:
      break;
    }

  save_status (machine);
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

static void
run_step (MvMachine *machine, MvStep step)
{
  MvDaemon *daemon = machine->daemon;
  MvStatus *status = machine->status;
  g_autoptr (GError) error = NULL;
  MvRuntime *runtime = runtime_for (machine, &error);

  if (!runtime)
    {
      status->failed_generation = machine->config->desired_generation;
      set_state (machine, MV_STATE_FAILED, error->message);
      save_status (machine);
      settle_waiters (machine, error);
      return;
    }

  /* Record what is about to happen before the host is touched. */
  machine->busy = TRUE;
  g_free (status->phase);
  status->phase = g_strdup (mv_step_to_string (step));
  g_free (status->operation_id);
  status->operation_id = mv_id_new ();
  set_state (machine, transitional_state (step, status->state), NULL);
  mv_machine_changed (machine, MV_PROP_PHASE);
  save_status (machine);

  StepTask *task = g_new0 (StepTask, 1);
  task->machine = machine;
  task->runtime = runtime;
  task->step = step;
  task->machine_id = g_strdup (machine->id);
  task->runtime_dir = mv_store_machine_runtime_dir (daemon->store, machine->id);
  task->spec = mv_spec_copy (machine->config->spec);
  task->vmm = status->vmm ? json_object_ref (status->vmm) : NULL;
  task->stop_timeout_seconds = daemon->stop_timeout_seconds;

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

  if (machine->busy || machine->gone)
    return;

  step = mv_plan_next_step (config, status, g_get_real_time ());
  if (step != MV_STEP_NONE)
    {
      run_step (machine, step);
      return;
    }

  if (mv_desired_reached (config->desired, status->state))
    {
      if (status->observed_generation != config->desired_generation)
        {
          status->observed_generation = config->desired_generation;
          mv_machine_changed (machine, MV_PROP_OBSERVED_GENERATION);
          save_status (machine);
        }
      settle_waiters (machine, NULL);
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

void
mv_reconciler_recover (MvMachine *machine)
{
  MvStatus *status = machine->status;
  g_autoptr (GError) error = NULL;
  MvRuntime *runtime = runtime_for (machine, NULL);
  g_autofree char *runtime_dir = mv_store_machine_runtime_dir (machine->daemon->store, machine->id);
  MvRuntimeRequest req = {
    .machine_id = machine->id,
    .spec = machine->config->spec,
    .runtime_dir = runtime_dir,
    .vmm = status->vmm,
  };

  switch (status->state)
    {
    case MV_STATE_RUNNING:
    case MV_STATE_PAUSED:
      switch (runtime && status->vmm ? runtime->probe (runtime, &req) : MV_VMM_GONE)
        {
        case MV_VMM_RUNNING:
          set_state (machine, MV_STATE_RUNNING, NULL);
          watch_vmm (machine, runtime);
          break;
        case MV_VMM_PAUSED:
          set_state (machine, MV_STATE_PAUSED, NULL);
          watch_vmm (machine, runtime);
          break;
        case MV_VMM_GONE:
          g_clear_pointer (&status->vmm, json_object_unref);
          status->started_at = 0;
          status->failed_generation = machine->config->desired_generation;
          set_state (machine, MV_STATE_FAILED, "the VMM ended while the daemon was not running");
          break;
        }
      break;

    case MV_STATE_STARTING:
    case MV_STATE_STOPPING:
      {
        g_autofree char *why = g_strdup_printf ("interrupted while %s (operation %s)",
                                                status->state == MV_STATE_STARTING ? "starting" : "stopping",
                                                status->operation_id ? status->operation_id : "unknown");
        /* Whatever the interrupted step left running is ended, so the
         * machine holds nothing it does not account for. */
        if (runtime && !runtime->stop (runtime, &req, TRUE, &error))
          g_warning ("Machine %s: could not clean up after an interrupted operation: %s",
                     machine->id, error->message);
        g_clear_pointer (&status->vmm, json_object_unref);
        status->started_at = 0;
        status->failed_generation = machine->config->desired_generation;
        set_state (machine, MV_STATE_FAILED, why);
      }
      break;

    default:
      break;
    }

  g_clear_pointer (&status->phase, g_free);
  g_clear_pointer (&status->operation_id, g_free);
  save_status (machine);
}
