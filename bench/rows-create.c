/* #4: create → Running with the test runtime (instant boot), so what is
 * measured is the daemon's own work; against the record writes that work
 * contains, done alone with the store's own code on the same filesystem. */
#include "bench.h"

#include "core/machine.h"
#include "core/spec.h"
#include "names.h"
#include "store/store.h"

#include <glib/gstdio.h>

/* What one create → Running writes, read from the daemon: the new
 * machine's two records (staged, then renamed into place), the status
 * already holding the start's phase, then status.json once the start is
 * done (the step that reaches Running is observed in that same write). */
#define STATUS_WRITES_PER_CREATE 1

/* Where a client sends its creates. */
typedef struct {
  const char *destination;
  const char *path;
  const char *interface;
  const char *method;
} Target;

static const Target daemon_target = { MV_BUS_NAME, MV_MANAGER_PATH, MV_MANAGER_IFACE, "CreateMachine" };
static const Target echo_target = { BENCH_ECHO_NAME, BENCH_ECHO_PATH, MV_MACHINE_IFACE, "CreateDurable" };

/* The clients of one window start together, once each is connected:
 * the window times creates, not connections being made. */
typedef struct {
  GMutex   lock;
  GCond    cond;
  guint    waiting;   /* clients connected and waiting */
  gboolean go;
  gint64   t0;        /* monotonic, when they were let go */
  double   seconds;   /* the window's length, 0 = a count of creates each */
} Start;

typedef struct {
  Bench        *bench;
  const Target *target;
  Start        *start;
  guint         count;
  gint64        until;        /* monotonic deadline, 0 = count only */
  BenchSamples *latency;
  guint         done;
} Worker;

/* Tells the window that @w is ready, and returns once all are. */
static void
wait_for_start (Worker *w)
{
  Start *start = w->start;

  g_mutex_lock (&start->lock);
  start->waiting++;
  g_cond_broadcast (&start->cond);
  while (!start->go)
    g_cond_wait (&start->cond, &start->lock);
  w->until = start->seconds > 0 ? start->t0 + (gint64) (start->seconds * G_USEC_PER_SEC) : 0;
  g_mutex_unlock (&start->lock);
}

static GMutex name_lock;

static char *
next_spec (Bench *bench)
{
  guint seq;

  g_mutex_lock (&name_lock);
  seq = ++bench->machine_seq;
  g_mutex_unlock (&name_lock);
  return g_strdup_printf ("{\"name\":\"bench-c%06u\",\"hypervisor_type\":\"test\","
                          "\"kernel\":\"/boot/vmlinuz\",\"labels\":{\"role\":\"bench\"}}", seq);
}

static gpointer
create_worker (gpointer data)
{
  Worker *w = data;
  sd_bus *bus = bench_open_bus (w->bench);
  const char *unique = NULL;

  /* Waits for the bus's Hello to be answered. */
  if (sd_bus_get_unique_name (bus, &unique) < 0)
    bench_fail (w->bench, "cannot connect to the private bus");
  wait_for_start (w);
  while (w->until ? bench_now () < w->until : w->done < w->count)
    {
      g_autofree char *spec = next_spec (w->bench);
      gint64 t0 = bench_now ();
      g_autoptr (sd_bus_message) reply = bench_call (w->bench, bus, w->target->destination,
                                                     w->target->path, w->target->interface,
                                                     w->target->method, "st", spec,
                                                     (uint64_t) MV_CREATE_START);
      bench_samples_add (w->latency, (double) (bench_now () - t0));
      w->done++;
    }
  sd_bus_flush_close_unref (bus);
  return NULL;
}

/* The records of a new machine of spec @json, as the daemon makes them. */
MvConfig *
bench_create_config (const char *json, GError **error)
{
  g_autoptr (MvSpec) spec = mv_spec_from_json (json, error);
  g_autofree char *id = mv_id_new ();

  if (!spec)
    return NULL;
  spec->id = g_strdup (id);
  return mv_config_new (id, g_steal_pointer (&spec), g_get_real_time ());
}

/* One create → Running's records written alone, with the store's own
 * code: the machine's two records, then its status as often as the
 * daemon writes it. Also the writes of the bare service's CreateDurable. */
gboolean
bench_write_create_records (MvStore *store, MvConfig *config, GError **error)
{
  g_autoptr (MvStatus) status = mv_status_new ();

  if (!mv_store_create_machine (store, config, status, error))
    return FALSE;
  for (guint i = 0; i < STATUS_WRITES_PER_CREATE; i++)
    {
      status->observed_generation = i;
      if (!mv_store_save_status (store, config->id, status, error))
        return FALSE;
    }
  return TRUE;
}

static gpointer
store_worker (gpointer data)
{
  Worker *w = data;
  g_autofree char *dir = g_build_filename (mv_test_env_dir (w->bench->env), "baseline-state", NULL);
  g_autofree char *run = g_build_filename (mv_test_env_dir (w->bench->env), "baseline-run", NULL);
  g_autoptr (GError) error = NULL;
  g_autoptr (MvStore) store = mv_store_new (dir, run, &error);

  if (!store)
    bench_fail (w->bench, "baseline store: %s", error->message);
  wait_for_start (w);
  while (w->until ? bench_now () < w->until : w->done < w->count)
    {
      g_autofree char *json = next_spec (w->bench);
      g_autoptr (MvConfig) config = bench_create_config (json, &error);
      gint64 t0;

      if (!config)
        bench_fail (w->bench, "baseline spec: %s", error->message);
      t0 = bench_now ();
      if (!bench_write_create_records (store, config, &error))
        bench_fail (w->bench, "baseline create: %s", error->message);
      bench_samples_add (w->latency, (double) (bench_now () - t0));
      w->done++;
    }
  return NULL;
}

/* Runs @clients workers for @seconds (or @count creates each when
 * @seconds is 0); returns creates per second, latencies in @latency. */
static double
run_clients (Bench *bench, GThreadFunc fn, const Target *target, guint clients, guint count,
             double seconds, BenchSamples *latency)
{
  g_autofree Worker *workers = g_new0 (Worker, clients);
  g_autofree GThread **threads = g_new0 (GThread *, clients);
  Start start = { .seconds = seconds };
  guint total = 0;

  g_mutex_init (&start.lock);
  g_cond_init (&start.cond);
  for (guint i = 0; i < clients; i++)
    {
      workers[i] = (Worker) { .bench = bench, .target = target, .start = &start, .count = count,
                              .latency = bench_samples_new () };
      threads[i] = g_thread_new ("bench-client", fn, &workers[i]);
    }
  g_mutex_lock (&start.lock);
  while (start.waiting < clients)
    g_cond_wait (&start.cond, &start.lock);
  start.go = TRUE;
  start.t0 = bench_now ();
  g_cond_broadcast (&start.cond);
  g_mutex_unlock (&start.lock);
  for (guint i = 0; i < clients; i++)
    {
      g_thread_join (threads[i]);
      total += workers[i].done;
      for (guint j = 0; j < bench_samples_count (workers[i].latency); j++)
        bench_samples_add (latency, g_array_index (workers[i].latency->values, double, j));
      bench_samples_free (workers[i].latency);
    }
  g_mutex_clear (&start.lock);
  g_cond_clear (&start.cond);
  return total / ((double) (bench_now () - start.t0) / G_USEC_PER_SEC);
}

void
bench_row_create (Bench *bench)
{
  guint seq_runs = bench->smoke ? 5 : 200;
  /* The disk's speed drifts by a factor of two over minutes here: short
   * windows, many of them, each daemon window beside a write-only one,
   * and the 20-client share judged on the interval of those pairs. */
  double window = bench->smoke ? 0.5 : 2.0;
  guint windows = bench->smoke ? 1 : 9;
  BenchSamples *lat1 = bench_samples_new (), *base1 = bench_samples_new ();
  BenchSamples *lat20 = bench_samples_new (), *base20 = bench_samples_new ();
  BenchSamples *rate1 = bench_samples_new (), *rate1b = bench_samples_new ();
  BenchSamples *rate20 = bench_samples_new (), *rate20b = bench_samples_new ();
  BenchSamples *lat20e = bench_samples_new (), *rate20e = bench_samples_new ();
  BenchResult *r;
  g_autofree char *note = NULL;

  /* Latency, one client: creates alternate with the same writes done alone. */
  for (guint i = 0; i < MAX (1, seq_runs / 10); i++)
    {
      run_clients (bench, create_worker, &daemon_target, 1, 10, 0, lat1);
      run_clients (bench, store_worker, NULL, 1, 10, 0, base1);
    }
  /* Sustained rate with 1 and 20 clients, in windows, alternating. */
  for (guint i = 0; i < windows; i++)
    {
      g_autoptr (BenchSamples) scratch = bench_samples_new ();
      bench_samples_add (rate1, run_clients (bench, create_worker, &daemon_target, 1, 0, window, scratch));
      bench_samples_add (rate1b, run_clients (bench, store_worker, NULL, 1, 0, window, scratch));
      bench_samples_add (rate20, run_clients (bench, create_worker, &daemon_target, 20, 0, window, lat20));
      bench_samples_add (rate20b, run_clients (bench, store_worker, NULL, 20, 0, window, base20));
      bench_samples_add (rate20e, run_clients (bench, create_worker, &echo_target, 20, 0, window, lat20e));
    }

  note = g_strdup_printf ("baseline: the store's mv_store_create_machine plus %d mv_store_save_status "
                          "(temp + fsync + rename + dir fsync each), as one create → Running does; "
                          "target is on figure p50 − baseline p50", STATUS_WRITES_PER_CREATE);
  r = bench_report_add (bench->report, "4", "4-create-latency-1", "create→Running latency, 1 client (test runtime)",
                        "µs", -1, lat1, "the same record writes alone", base1);
  bench_result_set_target (r, BENCH_TARGET_EXCESS_AT_MOST, 1000, "≤ 1 ms over the record writes at p50");
  bench_result_set_note (r, note);
  bench_result_print (r);
  r = bench_report_add (bench->report, "4", "4-create-latency-20", "create→Running latency, 20 concurrent clients",
                        "µs", -1, lat20, "the same record writes alone, 20 threads", bench_samples_copy (base20));
  bench_result_print (r);
  r = bench_report_add (bench->report, "4", "4-create-latency-20-bare",
                        "the bare sd-bus service's CreateDurable latency, 20 concurrent clients", "µs", -1,
                        lat20e, "the same record writes alone, 20 threads", base20);
  bench_result_print (r);
  r = bench_report_add (bench->report, "4", "4-create-rate-1", "sustained creates per second, 1 client",
                        "creates/s", -1, rate1, "record writes alone, 1 thread", rate1b);
  bench_result_set_note (r, "one sample per window; the ratio below 1 is the share of the write-only rate reached");
  bench_result_judge_on_interval (r);
  bench_result_print (r);
  r = bench_report_add (bench->report, "4", "4-create-rate-20", "sustained creates per second, 20 concurrent clients",
                        "creates/s", -1, bench_samples_copy (rate20), "record writes alone, 20 threads",
                        bench_samples_copy (rate20b));
  bench_result_set_target (r, BENCH_TARGET_RATIO_AT_LEAST, 0.6, "≥ 60% of the write-only rate");
  bench_result_judge_on_interval (r);
  bench_result_print (r);
  /* What any service with this API pays on this bus: the share of the
   * write-only rate that is left once the calls and signals travel. */
  r = bench_report_add (bench->report, "4", "4-create-rate-20-bare-vs-writes",
                        "bare sd-bus service: the same writes on a pool of threads, the same signals and answer "
                        "(CreateDurable), 20 concurrent clients", "creates/s", -1, bench_samples_copy (rate20e),
                        "record writes alone, 20 threads", rate20b);
  bench_result_judge_on_interval (r);
  bench_result_print (r);
  r = bench_report_add (bench->report, "4", "4-create-rate-20-vs-bare",
                        "sustained creates per second, 20 concurrent clients (as above)", "creates/s", -1,
                        rate20, "the bare sd-bus service's CreateDurable, 20 threads (as above)", rate20e);
  bench_result_set_note (r, "the bare service sends the daemon's six signals per create and its answer, "
                            "after the same record writes; the ratio is the daemon's share of what a "
                            "service with this API reaches on this bus");
  bench_result_judge_on_interval (r);
  bench_result_print (r);
}
