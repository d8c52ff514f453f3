/* What the reconciler does with the guests' agents: it keeps the runtime
 * in touch with the agent of each watched machine, turns what the agents
 * say into the machines' health, and passes commands and metadata on. */
#include "reconciler-private.h"
#include "core/errors.h"

#include <string.h>

static void
set_string (char **field, const char *value, gboolean *changed)
{
  if (g_strcmp0 (*field, value) == 0)
    return;
  g_free (*field);
  *field = g_strdup (value);
  *changed = TRUE;
}

static void
on_guest_event (const char *machine_id, const MvGuestEvent *event, gpointer data)
{
  MvMachine *machine = mv_reconciler_lookup (data, machine_id);
  gboolean changed = FALSE;

  if (!machine || machine->gone)
    return;
  if (event->usage)
    {
      MvReconciler *rec = data;

      machine->guest_cpu_busy = event->cpu_busy_ticks;
      machine->guest_cpu_total = event->cpu_total_ticks;
      machine->guest_cpus = event->cpus;
      machine->guest_usage_at = mv_reconciler_monotonic (rec);
      return;
    }
  if (event->agent_version)
    {
      gboolean first = machine->agent_version == NULL;

      set_string (&machine->agent_version, event->agent_version, &changed);
      if (changed)
        mv_machine_changed (machine, MV_PROP_GUEST);
      /* The agent said who it is: the guest is up. An agent that answers
       * before its start step is over (readiness "agent" waits for it)
       * is of the start still recorded. */
      if (first)
        mv_machine_event (machine, MV_EVENT_READY,
                          machine->run_operation_id ? machine->run_operation_id
                                                    : machine->status->operation_id,
                          event->agent_version);
      return;
    }
  if (event->health)
    {
      set_string (&machine->health, event->health, &changed);
      if (machine->health_failing_streak != event->health_failing_streak)
        {
          machine->health_failing_streak = event->health_failing_streak;
          changed = TRUE;
        }
      if (changed)
        {
          mv_machine_log (machine, G_LOG_LEVEL_INFO, "Health: %s (%u failing in a row)%s%s",
                          event->health, event->health_failing_streak,
                          event->health_output && *event->health_output ? ": " : "",
                          event->health_output ? event->health_output : "");
          mv_machine_changed (machine, MV_PROP_GUEST);
        }
    }
}

void
mv_reconciler_listen_to_guests (MvReconciler *rec)
{
  MvRuntimes *runtimes = rec->host->runtimes;

  for (guint i = 0; runtimes && i < mv_runtimes_count (runtimes); i++)
    {
      MvRuntime *runtime = mv_runtimes_get (runtimes, i);

      if (runtime->set_guest_listener)
        runtime->set_guest_listener (runtime, on_guest_event, rec);
    }
}

void
mv_reconciler_attach_guest (MvMachine *machine, MvRuntime *runtime)
{
  MvRecords *records = machine->reconciler->host->records;
  g_autofree char *runtime_dir = NULL;

  if (!runtime->attach_guest || !machine->status->vmm)
    return;
  runtime_dir = records->runtime_dir (records, machine->id);
  MvRuntimeRequest req = mv_machine_request (machine, runtime_dir);
  runtime->attach_guest (runtime, &req);
}

void
mv_reconciler_reidentify_guest (MvMachine *machine, MvRuntime *runtime,
                                const MvNetworkAttachment *network)
{
  MvRecords *records = machine->reconciler->host->records;
  g_autoptr (GError) error = NULL;
  g_autofree char *runtime_dir = NULL;

  if (!runtime->reidentify_guest || !machine->status->vmm)
    return;
  runtime_dir = records->runtime_dir (records, machine->id);
  MvRuntimeRequest req = mv_machine_request (machine, runtime_dir);
  req.network = network;
  if (!runtime->reidentify_guest (runtime, &req, &error))
    mv_machine_log (machine, G_LOG_LEVEL_WARNING, "Could not give the restored guest its "
                    "identity: %s", error->message);
}

void
mv_reconciler_detach_guest (MvMachine *machine, MvRuntime *runtime)
{
  gboolean changed = FALSE;

  if (runtime && runtime->detach_guest)
    runtime->detach_guest (runtime, machine->id);
  /* What the agent said is of the guest that ran. */
  machine->guest_usage_at = 0;
  set_string (&machine->agent_version, NULL, &changed);
  set_string (&machine->health, NULL, &changed);
  g_clear_pointer (&machine->run_operation_id, g_free);
  if (machine->health_failing_streak)
    {
      machine->health_failing_streak = 0;
      changed = TRUE;
    }
  if (changed && !machine->gone)
    mv_machine_changed (machine, MV_PROP_GUEST);
}

void
mv_reconciler_update_guest (MvMachine *machine)
{
  MvRecords *records = machine->reconciler->host->records;
  MvRuntime *runtime = mv_reconciler_runtime_for (machine, NULL);
  g_autoptr (GError) error = NULL;
  g_autofree char *runtime_dir = NULL;

  if (!runtime || !runtime->update_guest || !machine->status->vmm ||
      !mv_state_holds_resources (machine->status->state))
    return;
  runtime_dir = records->runtime_dir (records, machine->id);
  MvRuntimeRequest req = mv_machine_request (machine, runtime_dir);
  if (!runtime->update_guest (runtime, &req, &error))
    mv_machine_log (machine, G_LOG_LEVEL_WARNING, "Could not give the guest its new metadata: %s",
                    error->message);
}

gboolean
mv_reconciler_exec (MvMachine *machine, const MvRuntimeExec *exec, int fds[4], GError **error)
{
  MvRuntime *runtime;

  if (machine->gone)
    {
      g_set_error (error, MV_ERROR, MV_ERROR_NOT_FOUND, "The machine was deleted");
      return FALSE;
    }
  if (machine->status->state != MV_STATE_RUNNING || !machine->watch_id)
    {
      g_set_error (error, MV_ERROR, MV_ERROR_INVALID_STATE,
                   "The machine is %s: commands run only in a running guest",
                   mv_state_to_string (machine->status->state));
      return FALSE;
    }
  runtime = mv_reconciler_runtime_for (machine, error);
  if (!runtime)
    return FALSE;
  if (!runtime->exec)
    {
      g_set_error (error, MV_ERROR, MV_ERROR_UNSUPPORTED,
                   "%s guests cannot run commands from the host", runtime->type);
      return FALSE;
    }
  return runtime->exec (runtime, machine->id, exec, fds, error);
}

gboolean
mv_reconciler_has_agent (MvMachine *machine)
{
  MvRuntime *runtime = mv_reconciler_runtime_for (machine, NULL);

  return runtime && runtime->has_agent && runtime->has_agent (runtime, machine->config->spec);
}

typedef struct {
  MvRuntime     *runtime;
  char          *machine_id;
  char          *runtime_dir;
  gboolean       writer;
  MvConsoleFunc  func;
  gpointer       func_data;
} ConsoleWork;

static void
console_work_free (ConsoleWork *work)
{
  g_free (work->machine_id);
  g_free (work->runtime_dir);
  g_free (work);
}

/* The holder answers from its poll loop at once; one that does not (a
 * stopped process) holds up this worker, never the main loop. */
static void
open_console_in_thread (GTask *gtask, gpointer source, gpointer task_data,
                        GCancellable *cancellable)
{
  ConsoleWork *work = task_data;
  MvRuntimeRequest req = { .machine_id = work->machine_id, .runtime_dir = work->runtime_dir };
  GError *error = NULL;
  int fd = work->runtime->open_console (work->runtime, &req, &work->writer, &error);

  if (fd < 0)
    g_task_return_error (gtask, error);
  else
    g_task_return_int (gtask, fd);
}

static void
on_console_opened (GObject *source, GAsyncResult *result, gpointer user_data)
{
  ConsoleWork *work = g_task_get_task_data (G_TASK (result));
  g_autoptr (GError) error = NULL;
  gssize fd = g_task_propagate_int (G_TASK (result), &error);

  work->func (fd < 0 ? -1 : (int) fd, work->writer, error, work->func_data);
}

gboolean
mv_reconciler_open_console (MvMachine *machine, MvConsoleFunc func, gpointer data,
                            GError **error)
{
  MvRecords *records = machine->reconciler->host->records;
  MvRuntime *runtime;
  MvState state = machine->status->state;
  ConsoleWork *work;

  if (machine->gone)
    return mv_error_set (error, MV_ERROR_NOT_FOUND, "The machine was deleted");
  if ((state != MV_STATE_RUNNING && state != MV_STATE_PAUSED) || !machine->status->vmm)
    return mv_error_set (error, MV_ERROR_INVALID_STATE,
                         "The machine is %s: only a running or paused guest has a console",
                         mv_state_to_string (state));
  runtime = mv_reconciler_runtime_for (machine, error);
  if (!runtime)
    return FALSE;
  if (!runtime->open_console)
    return mv_error_set (error, MV_ERROR_UNSUPPORTED, "%s guests have no console to attach to",
                         runtime->type);
  work = g_new0 (ConsoleWork, 1);
  work->runtime = runtime;
  work->machine_id = g_strdup (machine->id);
  work->runtime_dir = records->runtime_dir (records, machine->id);
  work->func = func;
  work->func_data = data;
  mv_reconciler_run_in_thread (open_console_in_thread, on_console_opened, work,
                               (GDestroyNotify) console_work_free);
  return TRUE;
}
