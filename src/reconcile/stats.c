/* Stats: what a machine's VMM uses of the host now, from the runtime's
 * usage() and its network interface's counters. */
#include "reconciler-private.h"
#include "core/errors.h"

gboolean
mv_reconciler_read_stats (MvMachine *machine, MvMachineStats *stats, GError **error)
{
  MvReconciler *rec = machine->reconciler;
  MvRecords *records = rec->host->records;
  MvNetwork *network = rec->host->network;
  const MvSpec *spec = machine->config->spec;
  g_autofree char *runtime_dir = NULL;
  MvRuntime *runtime;

  if (machine->gone || !machine->status->vmm)
    {
      g_set_error (error, MV_ERROR, MV_ERROR_INVALID_STATE,
                   "Machine %s has no VMM running (it is %s)", spec->name,
                   mv_state_to_string (machine->status->state));
      return FALSE;
    }
  if (!(runtime = mv_reconciler_runtime_for (machine, error)))
    return FALSE;
  if (!runtime->usage)
    {
      g_set_error (error, MV_ERROR, MV_ERROR_UNSUPPORTED,
                   "The %s runtime cannot tell what its VMMs use", runtime->type);
      return FALSE;
    }

  *stats = (MvMachineStats) {
    .started_at = machine->status->started_at,
    .read_at = rec->clock->real_time (rec->clock->data),
    .vcpus = mv_spec_vcpus (spec),
    .memory_bytes = spec->memory_bytes,
  };
  runtime_dir = records->runtime_dir (records, machine->id);
  {
    MvRuntimeRequest req = mv_machine_request (machine, runtime_dir);

    if (!runtime->usage (runtime, &req, &stats->usage, error))
      return FALSE;
  }
  /* A machine without its TAP (on no network, or between attach and
   * start) has no network counters, which is not a failure. */
  stats->has_network = network && spec->network_name &&
                       network->counters (network, machine->id, &stats->network, NULL);
  return TRUE;
}
