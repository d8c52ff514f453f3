/* The daily metrics sampler: every sample interval, what each machine
 * with a VMM has used (its stats, read on the main thread as they are
 * cheap) goes to the writer in a worker thread, one round at a time, so
 * that the main loop never waits on a disk. */
#include "reconciler-private.h"

struct _MvMetricsSampler {
  gint                ref;
  MvReconciler       *reconciler;   /* NULL once freed by its owner */
  guint               sample_seconds;
  MvMetricsWriteFunc  write;
  gpointer            data;
  guint               timer;
  gboolean            writing;
};

typedef struct {
  char            *machine_dir;
  char            *machine_id;
  MvMetricsSample  sample;
} Entry;

typedef struct {
  GArray             *entries;      /* Entry */
  MvMetricsWriteFunc  write;
  gpointer            data;
  guint               sample_seconds;
} Round;

static void
entry_clear (gpointer p)
{
  Entry *e = p;

  g_free (e->machine_dir);
  g_free (e->machine_id);
}

static void
round_free (gpointer p)
{
  Round *round = p;

  g_array_unref (round->entries);
  g_free (round);
}

static MvMetricsSampler *
sampler_ref (MvMetricsSampler *sampler)
{
  g_atomic_int_inc (&sampler->ref);
  return sampler;
}

static void
sampler_unref (MvMetricsSampler *sampler)
{
  if (g_atomic_int_dec_and_test (&sampler->ref))
    g_free (sampler);
}

static void
write_round (GTask *task, gpointer source, gpointer task_data, GCancellable *cancellable)
{
  Round *round = task_data;

  for (guint i = 0; i < round->entries->len; i++)
    {
      Entry *e = &g_array_index (round->entries, Entry, i);
      g_autoptr (GError) error = NULL;

      if (!round->write (e->machine_dir, &e->sample, round->sample_seconds, round->data, &error))
        g_warning ("Cannot write the metrics of machine %s: %s", e->machine_id, error->message);
    }
  g_task_return_boolean (task, TRUE);
}

static void
round_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  MvMetricsSampler *sampler = user_data;

  sampler->writing = FALSE;
  sampler_unref (sampler);
}

static void
sample_round (MvMetricsSampler *sampler)
{
  MvReconciler *rec = sampler->reconciler;
  MvRecords *records = rec->host->records;
  g_autoptr (GPtrArray) machines = mv_reconciler_list (rec);
  g_autoptr (GTask) task = NULL;
  Round *round;

  round = g_new0 (Round, 1);
  round->entries = g_array_new (FALSE, TRUE, sizeof (Entry));
  g_array_set_clear_func (round->entries, entry_clear);
  round->write = sampler->write;
  round->data = sampler->data;
  round->sample_seconds = sampler->sample_seconds;

  for (guint i = 0; i < machines->len; i++)
    {
      MvMachine *machine = machines->pdata[i];
      MvMachineStats stats;
      Entry e;

      /* A step may be ending the VMM or removing the records: the next
       * round samples the machine again if it still runs. */
      if (machine->busy || !machine->status->vmm ||
          !mv_reconciler_read_stats (machine, &stats, NULL))
        continue;
      e = (Entry) {
        .machine_dir = records->machine_dir (records, machine->id),
        .machine_id = g_strdup (machine->id),
        .sample = {
          .time = stats.read_at,
          .started_at = stats.started_at,
          .cpu_ns = stats.usage.cpu_ns,
          .memory_bytes = stats.usage.memory_bytes,
          .disk_read_bytes = stats.usage.disk_read_bytes,
          .disk_written_bytes = stats.usage.disk_write_bytes,
          .network_rx_bytes = stats.has_network ? stats.network.rx_bytes : 0,
          .network_tx_bytes = stats.has_network ? stats.network.tx_bytes : 0,
        },
      };
      g_array_append_val (round->entries, e);
    }
  if (round->entries->len == 0)
    {
      round_free (round);
      return;
    }
  sampler->writing = TRUE;
  task = g_task_new (NULL, NULL, round_done, sampler_ref (sampler));
  g_task_set_source_tag (task, sample_round);
  g_task_set_task_data (task, round, round_free);
  g_task_run_in_thread (task, write_round);
}

static gboolean
on_sample (gpointer user_data)
{
  MvMetricsSampler *sampler = user_data;

  if (sampler->writing)
    g_debug ("The last round of metrics is still being written: this one is skipped");
  else
    sample_round (sampler);
  return G_SOURCE_CONTINUE;
}

MvMetricsSampler *
mv_metrics_sampler_new (MvReconciler *reconciler, guint sample_seconds, MvMetricsWriteFunc write,
                        gpointer data)
{
  MvMetricsSampler *sampler = g_new0 (MvMetricsSampler, 1);

  sampler->ref = 1;
  sampler->reconciler = reconciler;
  sampler->sample_seconds = CLAMP (sample_seconds, MV_METRICS_SAMPLE_MIN_S,
                                   MV_METRICS_SAMPLE_MAX_S);
  sampler->write = write;
  sampler->data = data;
  sampler->timer = mv_reconciler_timeout (reconciler, sampler->sample_seconds * 1000, on_sample,
                                          sampler);
  return sampler;
}

void
mv_metrics_sampler_free (MvMetricsSampler *sampler)
{
  if (!sampler)
    return;
  mv_reconciler_remove_timeout (sampler->reconciler, &sampler->timer);
  sampler->reconciler = NULL;
  sampler_unref (sampler);
}

gboolean
mv_metrics_sampler_busy (MvMetricsSampler *sampler)
{
  return sampler && sampler->writing;
}
