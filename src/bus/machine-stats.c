/* Stats and daily metrics over the bus. Stats are read on the main
 * thread (the runtime's usage() reads a few /proc files); metrics files
 * are read in a worker thread and the call answered from there. */
#include "machine-stats.h"
#include "bus-util.h"
#include "core/errors.h"
#include "names.h"
#include "store/metrics.h"

static int
append_u64 (sd_bus_message *reply, const char *key, guint64 value)
{
  return sd_bus_message_append (reply, "{sv}", key, "t", value);
}

/* One machine's stats as a{sv} (seed 002's Stats, in its field names). */
static int
append_stats (sd_bus_message *reply, const MvMachineStats *s)
{
  int r;

  if ((r = sd_bus_message_open_container (reply, 'a', "{sv}")) < 0)
    return r;
  if ((r = sd_bus_message_append (reply, "{sv}", "started_at", "x", s->started_at)) < 0 ||
      (r = sd_bus_message_append (reply, "{sv}", "read_at", "x", s->read_at)) < 0 ||
      (r = sd_bus_message_append (reply, "{sv}", "vcpus", "u", s->vcpus)) < 0 ||
      (r = append_u64 (reply, "memory_bytes", s->memory_bytes)) < 0 ||
      (r = append_u64 (reply, "cpu_time_ns", s->usage.cpu_ns)) < 0 ||
      (r = append_u64 (reply, "resident_memory_bytes", s->usage.memory_bytes)) < 0 ||
      (r = append_u64 (reply, "disk_read_bytes", s->usage.disk_read_bytes)) < 0 ||
      (r = append_u64 (reply, "disk_written_bytes", s->usage.disk_write_bytes)) < 0)
    return r;
  if (s->has_network)
    {
      const MvNetworkCounters *n = &s->network;

      if ((r = append_u64 (reply, "network_receive_bytes", n->rx_bytes)) < 0 ||
          (r = append_u64 (reply, "network_transmit_bytes", n->tx_bytes)) < 0 ||
          (r = append_u64 (reply, "network_receive_packets", n->rx_packets)) < 0 ||
          (r = append_u64 (reply, "network_transmit_packets", n->tx_packets)) < 0 ||
          (r = append_u64 (reply, "network_receive_drops", n->rx_dropped)) < 0 ||
          (r = append_u64 (reply, "network_transmit_drops", n->tx_dropped)) < 0 ||
          (r = append_u64 (reply, "network_receive_errors", n->rx_errors)) < 0 ||
          (r = append_u64 (reply, "network_transmit_errors", n->tx_errors)) < 0)
        return r;
    }
  return sd_bus_message_close_container (reply);
}

int
mv_machine_method_get_stats (sd_bus_message *m, MvMachine *machine, sd_bus_error *error)
{
  g_autoptr (sd_bus_message) reply = NULL;
  g_autoptr (GError) local = NULL;
  MvMachineStats stats;
  int r;

  if (!mv_reconciler_read_stats (machine, &stats, &local))
    return mv_bus_error_from_gerror (error, local);
  if ((r = sd_bus_message_new_method_return (m, &reply)) < 0 ||
      (r = append_stats (reply, &stats)) < 0)
    return r;
  return sd_bus_send (NULL, reply, NULL);
}

int
mv_manager_method_get_all_stats (sd_bus_message *m, MvBusService *service, sd_bus_error *error)
{
  g_autoptr (GPtrArray) sorted = mv_reconciler_list (mv_bus_service_reconciler (service));
  g_autoptr (sd_bus_message) reply = NULL;
  int r;

  if ((r = sd_bus_message_new_method_return (m, &reply)) < 0 ||
      (r = sd_bus_message_open_container (reply, 'a', "(sa{sv})")) < 0)
    return r;
  for (guint i = 0; i < sorted->len; i++)
    {
      MvMachine *machine = sorted->pdata[i];
      MvMachineStats stats;

      /* Seed 002: a machine whose VMM cannot be read is left out. */
      if (!machine->status->vmm || !mv_reconciler_read_stats (machine, &stats, NULL))
        continue;
      if ((r = sd_bus_message_open_container (reply, 'r', "sa{sv}")) < 0 ||
          (r = sd_bus_message_append (reply, "s", machine->id)) < 0 ||
          (r = append_stats (reply, &stats)) < 0 ||
          (r = sd_bus_message_close_container (reply)) < 0)
        return r;
    }
  if ((r = sd_bus_message_close_container (reply)) < 0)
    return r;
  return sd_bus_send (NULL, reply, NULL);
}

/* ---- GetMetrics ---- */

/* Reads under way at once, for everyone: each may parse a week of files. */
#define METRICS_READS_MAX  8
static guint metrics_reads;

typedef struct {
  sd_bus_message *call;
  char           *machine_dir;
  gint64          since, until;
} MetricsRead;

static void
metrics_read_free (gpointer p)
{
  MetricsRead *read = p;

  sd_bus_message_unref (read->call);
  g_free (read->machine_dir);
  g_free (read);
}

static void
read_metrics (GTask *task, gpointer source, gpointer task_data, GCancellable *cancellable)
{
  MetricsRead *read = task_data;
  GError *error = NULL;
  GArray *samples = mv_metrics_read (read->machine_dir, read->since, read->until,
                                     MV_METRICS_REPLY_MAX, &error);

  if (!samples)
    g_task_return_error (task, error);
  else
    g_task_return_pointer (task, samples, (GDestroyNotify) g_array_unref);
}

static int
append_sample (sd_bus_message *reply, const MvMetricsSample *s)
{
  int r;

  if ((r = sd_bus_message_open_container (reply, 'r', "ta{sv}")) < 0 ||
      (r = sd_bus_message_append (reply, "t", (guint64) s->time)) < 0 ||
      (r = sd_bus_message_open_container (reply, 'a', "{sv}")) < 0)
    return r;
  if ((r = sd_bus_message_append (reply, "{sv}", "started_at", "x", s->started_at)) < 0 ||
      (r = append_u64 (reply, "cpu_time_ns", s->cpu_ns)) < 0 ||
      (r = append_u64 (reply, "resident_memory_bytes", s->memory_bytes)) < 0 ||
      (r = append_u64 (reply, "disk_read_bytes", s->disk_read_bytes)) < 0 ||
      (r = append_u64 (reply, "disk_written_bytes", s->disk_written_bytes)) < 0 ||
      (r = append_u64 (reply, "network_receive_bytes", s->network_rx_bytes)) < 0 ||
      (r = append_u64 (reply, "network_transmit_bytes", s->network_tx_bytes)) < 0)
    return r;
  if ((r = sd_bus_message_close_container (reply)) < 0)
    return r;
  return sd_bus_message_close_container (reply);
}

static void
metrics_read_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  MetricsRead *read = g_task_get_task_data (G_TASK (result));
  g_autoptr (GError) error = NULL;
  g_autoptr (GArray) samples = g_task_propagate_pointer (G_TASK (result), &error);
  g_autoptr (sd_bus_message) reply = NULL;
  int r;

  metrics_reads--;
  if (!samples)
    {
      mv_bus_reply_gerror (read->call, error);
      return;
    }
  r = sd_bus_message_new_method_return (read->call, &reply);
  if (r >= 0)
    r = sd_bus_message_open_container (reply, 'a', "(ta{sv})");
  for (guint i = 0; r >= 0 && i < samples->len; i++)
    r = append_sample (reply, &g_array_index (samples, MvMetricsSample, i));
  if (r >= 0)
    r = sd_bus_message_close_container (reply);
  if (r >= 0)
    r = sd_bus_send (NULL, reply, NULL);
  if (r < 0)
    sd_bus_reply_method_errnof (read->call, -r, "Cannot send the metrics: %m");
}

int
mv_machine_method_get_metrics (sd_bus_message *m, MvMachine *machine, sd_bus_error *error)
{
  MvRecords *records = mv_reconciler_host (machine->reconciler)->records;
  MetricsRead *read;
  guint64 since, until;
  int r;

  if ((r = sd_bus_message_read (m, "tt", &since, &until)) < 0)
    return r;
  if (since > G_MAXINT64 || until > G_MAXINT64)
    return sd_bus_error_setf (error, MV_BUS_ERROR_INVALID_ARGUMENT,
                              "%s: more than %" G_GINT64_FORMAT " µs since the epoch",
                              since > G_MAXINT64 ? "since" : "until", G_MAXINT64);
  if (until < since)
    return sd_bus_error_setf (error, MV_BUS_ERROR_INVALID_ARGUMENT,
                              "until: %" G_GUINT64_FORMAT " is before since (%" G_GUINT64_FORMAT
                              ")", until, since);
  if (metrics_reads >= METRICS_READS_MAX)
    return sd_bus_error_setf (error, MV_BUS_ERROR_RESOURCE_EXHAUSTED,
                              "%d GetMetrics calls are being answered, the most at once; "
                              "try again in a moment", METRICS_READS_MAX);
  metrics_reads++;
  read = g_new0 (MetricsRead, 1);
  read->call = sd_bus_message_ref (m);
  read->machine_dir = records->machine_dir (records, machine->id);
  read->since = (gint64) since;
  read->until = (gint64) until;
  mv_bus_run_in_thread (read_metrics, read, metrics_read_free, metrics_read_done);
  return 1;
}
