/* #4: create → Running with the test runtime (instant boot), so what is
 * measured is the daemon's own work; against the record writes that work
 * contains, done alone with the store's own code on the same filesystem. */
#include "bench.h"

#include "core/machine.h"
#include "core/spec.h"
#include "names.h"
#include "store/store.h"
#include "util/files.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <unistd.h>

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
static const Target signals_target = { BENCH_ECHO_NAME, BENCH_ECHO_PATH, MV_MACHINE_IFACE, "CreateSignals" };

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

/* Where the CPU of a kind of window went, per create, in µs: the whole
 * machine's (every process and the kernel), and of it the service's
 * (the daemon or the bare one, if any), the bus daemon's and the bench's
 * own (its clients or writers). */
typedef struct {
  const GPid   *service;   /* the service's PID, followed across restarts; NULL: none */
  BenchSamples *machine;
  BenchSamples *parts[3];   /* service, bus, bench */
} Usage;

/* What usage_text() calls each part; the service is named by its caller. */
static const char *const usage_parts[] = { NULL, "dbus-daemon", "the bench's clients" };

static Usage *
usage_new (const GPid *service)
{
  Usage *u = g_new0 (Usage, 1);

  u->service = service;
  u->machine = bench_samples_new ();
  for (guint i = 0; i < G_N_ELEMENTS (u->parts); i++)
    u->parts[i] = bench_samples_new ();
  return u;
}

/* Gives away the machine's samples, frees the rest. */
static BenchSamples *
usage_free (Usage *u)
{
  BenchSamples *machine = u->machine;

  for (guint i = 0; i < G_N_ELEMENTS (u->parts); i++)
    bench_samples_free (u->parts[i]);
  g_free (u);
  return machine;
}

static void
usage_read (Bench *bench, const Usage *u, double *machine, double parts[3])
{
  GPid pids[3] = { u->service ? *u->service : 0, mv_test_env_bus_pid (bench->env), getpid () };

  *machine = bench_machine_busy_seconds () * G_USEC_PER_SEC;
  /* From each process's own count, which keeps what its threads that
   * have ended took (the clients', a pool's), in clock ticks: a window
   * of seconds makes thousands of creates. */
  for (guint i = 0; i < 3; i++)
    parts[i] = pids[i] ? bench_proc_cpu_seconds (pids[i]) * G_USEC_PER_SEC : 0;
}

/* "the service 600 µs, dbus-daemon 150 µs, ...": the p50 of each part,
 * and what is left of the machine's for the kernel's own threads. */
static char *
usage_text (const Usage *u, const char *service)
{
  GString *text = g_string_new (NULL);
  double rest = bench_samples_percentile (u->machine, 50);

  for (guint i = 0; i < G_N_ELEMENTS (u->parts); i++)
    {
      double p50 = bench_samples_percentile (u->parts[i], 50);

      if (i == 0 && !u->service)
        continue;
      g_string_append_printf (text, "%s%s %.0f µs", text->len ? ", " : "", i == 0 ? service : usage_parts[i], p50);
      rest -= p50;
    }
  g_string_append_printf (text, ", the kernel's own threads and the rest %.0f µs", rest);
  return g_string_free (text, FALSE);
}

/* Runs @clients workers for @seconds (or @count creates each when
 * @seconds is 0); returns creates per second, latencies in @latency, and
 * in @usage (if given) where the CPU went, per create. */
static double
run_clients (Bench *bench, GThreadFunc fn, const Target *target, guint clients, guint count,
             double seconds, BenchSamples *latency, Usage *usage)
{
  double machine0 = 0, machine1, parts0[3] = { 0 }, parts1[3];
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
  if (usage)
    usage_read (bench, usage, &machine0, parts0);
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
  if (usage && total)
    {
      usage_read (bench, usage, &machine1, parts1);
      bench_samples_add (usage->machine, (machine1 - machine0) / total);
      for (guint i = 0; i < G_N_ELEMENTS (usage->parts); i++)
        bench_samples_add (usage->parts[i], (parts1[i] - parts0[i]) / total);
    }
  g_mutex_clear (&start.lock);
  g_cond_clear (&start.cond);
  return total / ((double) (bench_now () - start.t0) / G_USEC_PER_SEC);
}

/* Moves @path aside, to @path.N, and makes it anew, empty. Removing
 * thousands of records would be cheaper to write but dearer to measure:
 * for minutes after inodes are freed, ext4 looks past them each time it
 * makes a new one, and every later window would pay for that, the
 * earliest the most. What is moved aside goes with the environment. */
static void
set_aside (const char *path, guint round)
{
  g_autofree char *aside = g_strdup_printf ("%s.%u", path, round);

  if (g_rename (path, aside) < 0 && errno != ENOENT)
    g_warning ("cannot move %s aside: %s", path, g_strerror (errno));
  g_mkdir_with_parents (path, 0700);
}

/* Every round of windows starts where the first did: a daemon with no
 * machines, and no records left by the baselines. Otherwise the daemon
 * would carry into each window the machines of all the earlier ones
 * (thousands, running), and their upkeep (a resync every 30 s, the log
 * check every 10 s, a metrics sample every minute) would be timed as the
 * creates' work, in whichever windows it fell; its cost per running
 * machine is what rows 5 and 18 measure. */
static void
start_round (Bench *bench, guint round)
{
  const char *dir = mv_test_env_dir (bench->env);
  g_autofree char *machines = g_build_filename (mv_test_env_state_dir (bench->env), MV_MACHINES_DIR, NULL);
  g_autofree char *baseline = g_build_filename (dir, "baseline-state", MV_MACHINES_DIR, NULL);
  g_autofree char *echo = g_build_filename (dir, "echo-state", MV_MACHINES_DIR, NULL);

  bench_daemon_stop (bench);
  set_aside (machines, round);
  set_aside (baseline, round);
  set_aside (echo, round);
  /* The runtime directories are in memory, and go. */
  bench_clear_state (bench);
  bench_daemon_start (bench);
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
  BenchSamples *rate20s = bench_samples_new (), *bound20 = bench_samples_new ();
  Usage *cpu20 = usage_new (&bench->daemon_pid), *cpu20b = usage_new (NULL);
  Usage *cpu20e = usage_new (&bench->echo_pid), *cpu20s = usage_new (&bench->echo_pid);
  g_autofree char *used = NULL, *used_bare = NULL, *used_writes = NULL, *used_signals = NULL;
  guint n;
  BenchResult *r;
  g_autofree char *note = NULL;

  /* Latency, one client: creates alternate with the same writes done alone. */
  for (guint i = 0; i < MAX (1, seq_runs / 10); i++)
    {
      run_clients (bench, create_worker, &daemon_target, 1, 10, 0, lat1, NULL);
      run_clients (bench, store_worker, NULL, 1, 10, 0, base1, NULL);
    }
  /* Sustained rate with 1 and 20 clients, in windows, alternating. */
  for (guint i = 0; i < windows; i++)
    {
      g_autoptr (BenchSamples) scratch = bench_samples_new ();

      start_round (bench, i);
      bench_samples_add (rate1, run_clients (bench, create_worker, &daemon_target, 1, 0, window, scratch, NULL));
      bench_samples_add (rate1b, run_clients (bench, store_worker, NULL, 1, 0, window, scratch, NULL));
      bench_samples_add (rate20, run_clients (bench, create_worker, &daemon_target, 20, 0, window, lat20, cpu20));
      bench_samples_add (rate20b, run_clients (bench, store_worker, NULL, 20, 0, window, base20, cpu20b));
      bench_samples_add (rate20e, run_clients (bench, create_worker, &echo_target, 20, 0, window, lat20e, cpu20e));
      bench_samples_add (rate20s, run_clients (bench, create_worker, &signals_target, 20, 0, window, scratch, cpu20s));
      /* The most creates a second the machine's CPUs allow a service that
       * makes these writes and sends these messages: all of them, kept
       * busy, over the CPU both take, measured each alone. */
      n = bench_samples_count (cpu20b->machine);
      if (n && n == bench_samples_count (cpu20s->machine))
        bench_samples_add (bound20, g_get_num_processors () * (double) G_USEC_PER_SEC /
                                      (g_array_index (cpu20b->machine->values, double, n - 1) +
                                       g_array_index (cpu20s->machine->values, double, n - 1)));
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
                        "record writes alone, 20 threads", bench_samples_copy (rate20b));
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

  /* Where the CPUs go: the machine's busy time over each window, every
   * process and the kernel, per create made in it. */
  r = bench_report_add (bench->report, "4", "4-create-rate-20-signals",
                        "the bus alone: the bare service's call, signals and answer without the writes "
                        "(CreateSignals), 20 concurrent clients", "creates/s", -1, rate20s,
                        "record writes alone, 20 threads", bench_samples_copy (rate20b));
  bench_result_judge_on_interval (r);
  bench_result_print (r);
  used = usage_text (cpu20, "the daemon");
  used_bare = usage_text (cpu20e, "the bare service");
  g_free (note);
  note = g_strdup_printf ("busy time of all CPUs from /proc/stat over each window (every process, the "
                          "bus and the kernel; not idle, not waiting for the disk), divided by the "
                          "creates made in it; of it, at p50, from each process's own count (/proc/PID/stat): through the "
                          "daemon: %s; through the bare service: %s", used, used_bare);
  r = bench_report_add (bench->report, "4", "4-create-cpu-20",
                        "the machine's CPU per create, 20 concurrent clients, through the daemon", "µs", -1,
                        usage_free (cpu20), "the same through the bare service (CreateDurable)",
                        usage_free (cpu20e));
  bench_result_set_note (r, note);
  bench_result_judge_on_interval (r);
  bench_result_print (r);
  used_writes = usage_text (cpu20b, NULL);
  used_signals = usage_text (cpu20s, "the bare service");
  g_free (note);
  note = g_strdup_printf ("of it, at p50: the writes alone: %s; the bus alone: %s", used_writes, used_signals);
  r = bench_report_add (bench->report, "4", "4-create-cpu-20-writes",
                        "the machine's CPU per create, 20 threads: the record writes alone", "µs", -1,
                        usage_free (cpu20b), "the bus alone (CreateSignals), 20 clients", usage_free (cpu20s));
  bench_result_set_note (r, note);
  bench_result_print (r);
  r = bench_report_add (bench->report, "4", "4-create-rate-20-bound",
                        "the most creates per second the CPUs allow a service with this API, 20 clients",
                        "creates/s", -1, bound20, "record writes alone, 20 threads", rate20b);
  bench_result_set_note (r, "all the machine's CPUs kept busy, divided by the CPU per create of the record "
                            "writes alone plus that of the bus alone, window by window; a share of the "
                            "write-only rate below 0.60 here means that no service with this API can "
                            "reach the target on this machine");
  bench_result_judge_on_interval (r);
  bench_result_print (r);
}
