/* Idleness: a running machine with standby_after_seconds goes on standby
 * once it has used less than idle_cpu_percent of one CPU for that long,
 * judged every idle_sample_seconds from what its guest's agent says its
 * CPUs did, or from its VMM's CPU time where no agent says it. A machine
 * that received more than IDLE_NET_BYTES from its network since the last
 * sample is busy, whatever its CPUs did: it is being talked to. */
#include "reconciler-private.h"

/* Below this, what a guest receives is the network's own chatter (ARP,
 * neighbours' broadcasts), not a client. */
#define IDLE_NET_BYTES  4096

void
mv_machine_reset_idle (MvMachine *machine)
{
  machine->idle_sampled_at = 0;
  machine->idle_since = 0;
  machine->idle_guest_busy = 0;
  machine->idle_guest_total = 0;
  machine->idle_net_rx = G_MAXUINT64;
}

/* What the guest has received from its network so far, or G_MAXUINT64. */
static guint64
received_bytes (MvMachine *machine)
{
  MvNetwork *network = machine->reconciler->host->network;
  MvNetworkCounters counters;

  if (!network || !machine->config->spec->network_name ||
      !network->counters (network, machine->id, &counters, NULL))
    return G_MAXUINT64;
  return counters.rx_bytes;
}

/* The guest's own view counts while its agent keeps saying it: USAGE
 * comes every 2 s, so anything older than this has stopped. */
#define GUEST_USAGE_STALE_US  (10 * G_USEC_PER_SEC)

typedef enum { JUDGED_FIRST, JUDGED_IDLE, JUDGED_BUSY, JUDGED_NOTHING_NEW } Judgement;

static gboolean
guest_usage_fresh (MvMachine *machine, gint64 now)
{
  return machine->guest_usage_at != 0 && now - machine->guest_usage_at < GUEST_USAGE_STALE_US;
}

/* Idle is below idle_cpu_percent of one CPU since the last sample: as the
 * guest itself counts its CPUs' ticks when its agent says them (under
 * emulation, an idle guest's VMM spends far more than the guest does),
 * else as the VMM's CPU time says. */
static Judgement
judge (MvMachine *machine, guint64 cpu_ns, gint64 now)
{
  guint percent = machine->reconciler->options.idle_cpu_percent;

  if (guest_usage_fresh (machine, now) && machine->idle_guest_total != 0 &&
      machine->guest_cpu_total >= machine->idle_guest_total &&
      machine->guest_cpu_busy >= machine->idle_guest_busy)
    {
      guint64 busy = machine->guest_cpu_busy - machine->idle_guest_busy;
      guint64 total = machine->guest_cpu_total - machine->idle_guest_total;

      if (total == 0)
        return JUDGED_NOTHING_NEW;
      /* busy / (total / cpus) is the share of one CPU. */
      return busy * MAX (machine->guest_cpus, 1) * 100 < total * percent ? JUDGED_IDLE
                                                                           : JUDGED_BUSY;
    }
  if (machine->idle_sampled_at == 0 || cpu_ns < machine->idle_cpu_ns)
    return JUDGED_FIRST;
  {
    guint64 used_ns = cpu_ns - machine->idle_cpu_ns;
    guint64 elapsed_ns = (guint64) (now - machine->idle_sampled_at) * 1000;

    return used_ns * 100 < elapsed_ns * percent ? JUDGED_IDLE : JUDGED_BUSY;
  }
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
  guint64 cpu_ns, rx;
  Judgement judged;
  gint64 now = mv_reconciler_monotonic (rec);

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
  rx = received_bytes (machine);
  judged = judge (machine, cpu_ns, now);
  if (judged != JUDGED_FIRST && rx != G_MAXUINT64 && machine->idle_net_rx != G_MAXUINT64 &&
      rx >= machine->idle_net_rx && rx - machine->idle_net_rx > IDLE_NET_BYTES)
    judged = JUDGED_BUSY;

  switch (judged)
    {
    case JUDGED_BUSY:
      machine->idle_since = 0;
      break;
    case JUDGED_IDLE:
      if (machine->idle_since == 0)
        machine->idle_since = machine->idle_sampled_at;
      if (now - machine->idle_since >= (gint64) spec->standby_after_seconds * G_USEC_PER_SEC)
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
      break;
    case JUDGED_NOTHING_NEW:
      /* The guest has said nothing since the last sample: the judgement
       * stands, and this sample is not the start of another period. */
      return;
    case JUDGED_FIRST:
      break;
    }
  if (guest_usage_fresh (machine, now))
    {
      machine->idle_guest_busy = machine->guest_cpu_busy;
      machine->idle_guest_total = machine->guest_cpu_total;
    }
  machine->idle_cpu_ns = cpu_ns;
  machine->idle_net_rx = rx;
  machine->idle_sampled_at = now;
}
