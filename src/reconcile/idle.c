/* Idleness: a running machine with standby_after_seconds goes on standby
 * once its VMM has used less than idle_cpu_percent of one CPU for that
 * long, judged from the VMM's CPU time every idle_sample_seconds. */
#include "reconciler-private.h"

void
mv_machine_reset_idle (MvMachine *machine)
{
  machine->idle_sampled_at = 0;
  machine->idle_since = 0;
}

void
mv_reconciler_sample_idle (MvMachine *machine)
{
  MvReconciler *rec = machine->reconciler;
  MvRecords *records = rec->host->records;
  MvSpec *spec = machine->config->spec;
  MvRuntime *runtime = mv_reconciler_runtime_for (machine, NULL);
  g_autofree char *runtime_dir = NULL;
  MvRuntimeUsage usage = { 0 };
  guint64 cpu_ns;
  gint64 now = rec->clock->monotonic_time (rec->clock->data);

  if (spec->standby_after_seconds == 0 || machine->status->state != MV_STATE_RUNNING ||
      machine->busy || machine->config->standby || !runtime || !runtime->usage ||
      mv_reconciler_is_migrating (machine))
    {
      mv_machine_reset_idle (machine);
      return;
    }

  runtime_dir = records->runtime_dir (records, machine->id);
  MvRuntimeRequest req = mv_machine_request (machine, runtime_dir);
  if (!runtime->usage (runtime, &req, &usage, NULL))
    {
      mv_machine_reset_idle (machine);
      return;
    }
  cpu_ns = usage.cpu_ns;

  if (machine->idle_sampled_at != 0 && cpu_ns >= machine->idle_cpu_ns)
    {
      guint64 used_ns = cpu_ns - machine->idle_cpu_ns;
      guint64 elapsed_ns = (guint64) (now - machine->idle_sampled_at) * 1000;
      gboolean idle = used_ns * 100 < elapsed_ns * rec->options.idle_cpu_percent;

      if (!idle)
        machine->idle_since = 0;
      else if (machine->idle_since == 0)
        machine->idle_since = machine->idle_sampled_at;

      if (idle && now - machine->idle_since >= (gint64) spec->standby_after_seconds * G_USEC_PER_SEC)
        {
          g_autoptr (GError) error = NULL;

          mv_machine_log (machine, G_LOG_LEVEL_MESSAGE,
                          "Machine %s (%s) idle for %u s: going on standby", spec->name,
                          machine->id, spec->standby_after_seconds);
          mv_machine_reset_idle (machine);
          if (mv_reconciler_request (rec, machine, MV_REQUEST_STANDBY, &error))
            mv_reconciler_reconcile (machine);
          return;
        }
    }
  machine->idle_cpu_ns = cpu_ns;
  machine->idle_sampled_at = now;
}
