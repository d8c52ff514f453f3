/* #20: the daemon under many callers and many changing machines at once.
 *
 *   a  Machines started at once: 50 stopped machines on the Firecracker
 *      test VMM get their Start calls all together, spread over a few
 *      connections, until every Start has returned (Running); against the
 *      bench spawning 50 bare fake-firecracker processes and configuring
 *      each over its API socket as the daemon's backend does (GET /, PUT
 *      /machine-config, /boot-source, /actions InstanceStart), each from a
 *      thread of its own, until every one answers GET / "Running". Runs in
 *      pairs, alternating which goes first.
 *   b  Read latency under churn: 20 client threads read 20 running machines
 *      round robin (Get(State) and GetAll, alternately) for a window,
 *      while 20 other machines cycle Start/Stop on the test runtime as
 *      fast as the daemon takes them; against windows of the same reads
 *      with those 20 stopped. Windows alternate. The same readers also
 *      read the bare echo service (the same properties, from constants)
 *      in windows of their own, with the churn on and off: how much of a
 *      read's slowing under churn the machine and the bus would impose on
 *      any service.
 *   c  GetManagedObjects at N machines while 20 of them cycle Start/Stop,
 *      against GetManagedObjects on the same daemon with nothing changing,
 *      interleaved in pairs. Filling a daemon with 10,000 machines is the
 *      slow part, so rows-scale.c runs this on its largest N.
 *
 * a and b share one daemon with the Firecracker test VMM; admission is
 * off, as in the other rows. */
#include "bare-qemu.h"   /* bench_vmm_child_setup () */

#include "hypervisor/http.h"
#include "names.h"

#include <signal.h>
#include <string.h>
#include <sys/wait.h>

#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <systemd/sd-event.h>

G_DEFINE_AUTOPTR_CLEANUP_FUNC (sd_event, sd_event_unref)

/* The simulated guest is ready at once. */
#define FAKE_MEMORY_MIB   128
#define AT_ONCE           50
/* The Starts go out over this many connections: the daemon lets one
 * sender have at most 32 calls waiting for authorization. */
#define AT_ONCE_BUSES     5
#define READERS           20
#define READ_MACHINES     20
#define CHURNERS          20
#define VMM_TIMEOUT_S     10
/* Row 20's VMMs' parents: how many run, and how many machines the daemon
 * defines meanwhile (listing them all every hundred). */
#define PARENTS           20
#define PARENTS_CHURN     2000

/* ---- machines cycling Start/Stop ---- */

typedef struct _Churn Churn;

typedef struct {
  Churn      *churn;
  const char *path;
  GThread    *thread;
} Churner;

/* Each churner has a machine and a connection of its own, and cycles it
 * while the churn is on; with the churn off, every machine is stopped. */
struct _Churn {
  Bench    *bench;
  GMutex    lock;
  GCond     changed;         /* cycling or quit was set */
  GCond     parking;         /* a churner has parked */
  gboolean  cycling;
  gboolean  quit;
  guint     parked;          /* churners waiting for cycling */
  guint     cycles;          /* Start + Stop cycles done */
  guint     count;
  Churner  *churners;
  gint64    on_since;        /* when the churn was last turned on */
  double    on_seconds;      /* how long it was on, all told */
};

static gpointer
churn_thread (gpointer data)
{
  Churner *c = data;
  Churn *churn = c->churn;
  sd_bus *bus = bench_open_bus (churn->bench);

  g_mutex_lock (&churn->lock);
  for (;;)
    {
      if (!churn->cycling && !churn->quit)
        {
          churn->parked++;
          g_cond_signal (&churn->parking);
          while (!churn->cycling && !churn->quit)
            g_cond_wait (&churn->changed, &churn->lock);
          churn->parked--;
        }
      if (churn->quit)
        break;
      g_mutex_unlock (&churn->lock);
      {
        g_autoptr (sd_bus_message) started = bench_call (churn->bench, bus, MV_BUS_NAME, c->path,
                                                         MV_MACHINE_IFACE, "Start", NULL);
        g_autoptr (sd_bus_message) stopped = bench_call (churn->bench, bus, MV_BUS_NAME, c->path,
                                                         MV_MACHINE_IFACE, "Stop", NULL);
      }
      g_mutex_lock (&churn->lock);
      churn->cycles++;
    }
  g_mutex_unlock (&churn->lock);
  sd_bus_flush_close_unref (bus);
  return NULL;
}

/* Churners for the stopped machines at @paths, paused. */
static Churn *
churn_new (Bench *bench, GPtrArray *paths)
{
  Churn *churn = g_new0 (Churn, 1);

  churn->bench = bench;
  g_mutex_init (&churn->lock);
  g_cond_init (&churn->changed);
  g_cond_init (&churn->parking);
  churn->count = paths->len;
  churn->churners = g_new0 (Churner, paths->len);
  for (guint i = 0; i < paths->len; i++)
    {
      churn->churners[i].churn = churn;
      churn->churners[i].path = paths->pdata[i];
      churn->churners[i].thread = g_thread_new ("bench-churn", churn_thread, &churn->churners[i]);
    }
  return churn;
}

/* Turns the churn on, or off: then returns once every churner has
 * finished its cycle, its machine stopped. */
static void
churn_set (Churn *churn, gboolean cycling)
{
  g_mutex_lock (&churn->lock);
  churn->cycling = cycling;
  g_cond_broadcast (&churn->changed);
  while (!cycling && churn->parked < churn->count)
    g_cond_wait (&churn->parking, &churn->lock);
  g_mutex_unlock (&churn->lock);
}

/* Ends the churn, every machine stopped. */
static void
churn_free (Churn *churn)
{
  g_mutex_lock (&churn->lock);
  churn->quit = TRUE;
  g_cond_broadcast (&churn->changed);
  g_mutex_unlock (&churn->lock);
  for (guint i = 0; i < churn->count; i++)
    g_thread_join (churn->churners[i].thread);
  g_mutex_clear (&churn->lock);
  g_cond_clear (&churn->changed);
  g_cond_clear (&churn->parking);
  g_free (churn->churners);
  g_free (churn);
}

/* How long the churn runs before what is measured under it, so that
 * every churner is busy by then. */
#define CHURN_RAMP_US (20 * 1000)
/* How long the daemon is given, once the churn is off, to finish what
 * the last cycles left (signals, records), so that nothing is changing. */
#define CHURN_SETTLE_US (100 * 1000)

static void
churn_on (Churn *churn)
{
  churn_set (churn, TRUE);
  churn->on_since = bench_now ();
  g_usleep (CHURN_RAMP_US);
}

static void
churn_off (Churn *churn)
{
  churn_set (churn, FALSE);
  churn->on_seconds += (bench_now () - churn->on_since) / 1e6;
  g_usleep (CHURN_SETTLE_US);
}

/* How busy the churn was, for a note; a churn that never cycled fails
 * the bench (call it with the churn off). */
static char *
churn_rate_note (Bench *bench, Churn *churn)
{
  if (churn->cycles == 0)
    bench_fail (bench, "the %u churning machines made no Start/Stop cycle", churn->count);
  return g_strdup_printf ("while the churn was on (%.1f s in all), its %u machines went through "
                          "%u Start/Stop cycles, %.0f a second", churn->on_seconds, churn->count,
                          churn->cycles, churn->cycles / churn->on_seconds);
}

/* ---- a: machines started at once ---- */

typedef struct {
  guint     pending;
  char     *error;           /* the first failure */
} Batch;

static int
on_batch_reply (sd_bus_message *reply, void *userdata, sd_bus_error *ret_error)
{
  Batch *batch = userdata;
  const sd_bus_error *error = sd_bus_message_get_error (reply);

  if (error && !batch->error)
    batch->error = g_strdup_printf ("%s: %s", error->name, error->message);
  batch->pending--;
  return 1;
}

/* Calls @member on every machine at @paths at once, spread over @buses,
 * and returns the µs until the last has answered. */
static double
call_all_at_once (Bench *bench, sd_bus **buses, GPtrArray *paths, const char *member)
{
  g_autoptr (sd_event) event = NULL;
  Batch batch = { .pending = paths->len };
  gint64 t0;
  double us;
  int r = sd_event_new (&event);

  for (guint b = 0; r >= 0 && b < AT_ONCE_BUSES; b++)
    r = sd_bus_attach_event (buses[b], event, SD_EVENT_PRIORITY_NORMAL);
  if (r < 0)
    bench_fail (bench, "cannot set up an event loop: %s", g_strerror (-r));
  t0 = bench_now ();
  for (guint i = 0; i < paths->len; i++)
    {
      g_autoptr (sd_bus_message) m = NULL;
      sd_bus *bus = buses[i % AT_ONCE_BUSES];

      r = sd_bus_message_new_method_call (bus, &m, MV_BUS_NAME, paths->pdata[i], MV_MACHINE_IFACE,
                                          member);
      if (r >= 0)
        r = sd_bus_call_async (bus, NULL, m, on_batch_reply, &batch, BENCH_CALL_TIMEOUT_US);
      if (r < 0)
        bench_fail (bench, "cannot send %s to %s: %s", member, (char *) paths->pdata[i],
                    g_strerror (-r));
    }
  /* Until every answer is in, without sd_event_exit(): at the loop's
   * exit sd-bus would close the connections attached to it. */
  while (r >= 0 && batch.pending > 0)
    r = sd_event_run (event, UINT64_MAX);
  us = (double) (bench_now () - t0);
  for (guint b = 0; b < AT_ONCE_BUSES; b++)
    sd_bus_detach_event (buses[b]);
  if (r < 0)
    bench_fail (bench, "the event loop failed: %s", g_strerror (-r));
  if (batch.error)
    bench_fail (bench, "%s of %u machines at once: %s", member, paths->len, batch.error);
  return us;
}

static void
expect_states (Bench *bench, GPtrArray *paths, const char *want, const char *after)
{
  for (guint i = 0; i < paths->len; i++)
    {
      g_autofree char *state = bench_get_string (bench, bench->bus, MV_BUS_NAME, paths->pdata[i],
                                                 MV_MACHINE_IFACE, "State");
      if (!g_str_equal (state, want))
        bench_fail (bench, "after %s %s is %s, not %s", after, (char *) paths->pdata[i], state,
                    want);
    }
}

typedef struct {
  Bench      *bench;
  const char *socket;
  GPid        pid;
  const char *kernel;
  const char *initrd;
} BareVmm;

static void
bare_put (BareVmm *vmm, MvHttp *http, const char *path, const char *body)
{
  g_auto (MvHttpResponse) response = { 0 };
  g_autoptr (GError) error = NULL;

  if (!mv_http_request (http, "PUT", path, body, strlen (body), &response, &error))
    bench_fail (vmm->bench, "PUT %s on %s: %s", path, vmm->socket, error->message);
  if (response.status < 200 || response.status > 299)
    {
      g_autofree char *text = response.body ? mv_http_error_text (response.body) : g_strdup ("");
      bench_fail (vmm->bench, "PUT %s on %s: HTTP %u: %s", path, vmm->socket, response.status, text);
    }
}

/* GET / answered, with the VMM's state; NULL while it cannot be reached. */
static char *
bare_state (MvHttp *http)
{
  g_autoptr (JsonNode) reply = NULL;

  if (!mv_http_call_json (http, "GET", "/", NULL, &reply, NULL, NULL) || !reply ||
      !JSON_NODE_HOLDS_OBJECT (reply))
    return NULL;
  return g_strdup (json_object_get_string_member_with_default (json_node_get_object (reply),
                                                               "state", ""));
}

/* What the daemon's Firecracker backend asks of a VMM it has spawned,
 * until the VMM says it runs. */
static gpointer
bare_configure (gpointer data)
{
  BareVmm *vmm = data;
  g_autoptr (MvHttp) http = NULL;
  g_autofree char *boot = g_strdup_printf ("{\"kernel_image_path\":\"%s\",\"initrd_path\":\"%s\","
                                           "\"boot_args\":\"" BENCH_FAKE_KERNEL_ARGS "\"}",
                                           vmm->kernel, vmm->initrd);
  gint64 deadline = bench_now () + VMM_TIMEOUT_S * G_USEC_PER_SEC;

  /* Its socket answers once the VMM listens. */
  for (;;)
    {
      if (g_file_test (vmm->socket, G_FILE_TEST_EXISTS))
        {
          g_autofree char *state = NULL;

          http = mv_http_new (vmm->socket, "Firecracker");
          if ((state = bare_state (http)))
            break;
          g_clear_pointer (&http, mv_http_free);
        }
      if (bench_now () > deadline)
        bench_fail (vmm->bench, "the bare fake-firecracker at %s did not answer within %d s",
                    vmm->socket, VMM_TIMEOUT_S);
      g_usleep (1000);
    }
  bare_put (vmm, http, "/machine-config", "{\"vcpu_count\":1,\"mem_size_mib\":"
            G_STRINGIFY (FAKE_MEMORY_MIB) ",\"smt\":false}");
  bare_put (vmm, http, "/boot-source", boot);
  bare_put (vmm, http, "/actions", "{\"action_type\":\"InstanceStart\"}");
  for (;;)
    {
      g_autofree char *state = bare_state (http);

      if (g_strcmp0 (state, "Running") == 0)
        return NULL;
      if (bench_now () > deadline)
        bench_fail (vmm->bench, "the bare fake-firecracker at %s is not running after %d s",
                    vmm->socket, VMM_TIMEOUT_S);
      g_usleep (1000);
    }
}

/* Spawns @count bare VMMs and configures them all at once; µs until every
 * one runs. They are ended, untimed, before it returns. */
static double
bare_at_once (Bench *bench, const char *fake, const char *kernel, const char *initrd, guint count)
{
  g_autofree char *dir = g_build_filename (mv_test_env_dir (bench->env), "bare-firecracker", NULL);
  g_autofree BareVmm *vmms = g_new0 (BareVmm, count);
  g_autofree GThread **threads = g_new0 (GThread *, count);
  g_autoptr (GPtrArray) sockets = g_ptr_array_new_with_free_func (g_free);
  gint64 t0;
  double us;

  g_mkdir_with_parents (dir, 0700);
  for (guint i = 0; i < count; i++)
    {
      char *socket = g_strdup_printf ("%s/vmm%02u.sock", dir, i);

      /* Firecracker will not bind over a socket left by the last run. */
      g_unlink (socket);
      g_ptr_array_add (sockets, socket);
    }
  t0 = bench_now ();
  for (guint i = 0; i < count; i++)
    {
      g_autofree char *id = g_strdup_printf ("bench-bare-%02u", i);
      const char *argv[] = { fake, "--api-sock", sockets->pdata[i], "--id", id,
                             "--level", "Warning", NULL };
      g_autoptr (GError) error = NULL;

      vmms[i] = (BareVmm) { bench, sockets->pdata[i], 0, kernel, initrd };
      /* Spawned here, not in the threads: a child set to die with its
       * parent dies with the thread that spawned it. */
      if (!g_spawn_async (NULL, (char **) argv, NULL,
                          G_SPAWN_DO_NOT_REAP_CHILD | G_SPAWN_STDIN_FROM_DEV_NULL |
                          G_SPAWN_STDOUT_TO_DEV_NULL | G_SPAWN_STDERR_TO_DEV_NULL,
                          bench_vmm_child_setup, NULL, &vmms[i].pid, &error))
        bench_fail (bench, "cannot start %s: %s", fake, error->message);
      threads[i] = g_thread_new ("bench-bare-vmm", bare_configure, &vmms[i]);
    }
  for (guint i = 0; i < count; i++)
    g_thread_join (threads[i]);
  us = (double) (bench_now () - t0);

  /* Firecracker does not handle SIGTERM: it ends. */
  for (guint i = 0; i < count; i++)
    kill (vmms[i].pid, SIGTERM);
  for (guint i = 0; i < count; i++)
    waitpid (vmms[i].pid, NULL, 0);
  return us;
}

/* @count Firecracker test machines, created stopped. */
static GPtrArray *
create_fake_machines (Bench *bench, const char *kernel, const char *initrd, guint count)
{
  GPtrArray *paths = g_ptr_array_new_with_free_func (g_free);

  for (guint i = 0; i < count; i++)
    {
      g_autofree char *spec = g_strdup_printf (
        "{\"name\":\"bench-f%05u\",\"hypervisor_type\":\"firecracker\",\"kernel\":\"%s\","
        "\"initrd\":\"%s\",\"kernel_args\":\"" BENCH_FAKE_KERNEL_ARGS "\",\"memory_bytes\":%u}",
        ++bench->machine_seq, kernel, initrd, (guint) FAKE_MEMORY_MIB << 20);
      g_autoptr (sd_bus_message) created = bench_call (bench, bench->bus, MV_BUS_NAME,
                                                       MV_MANAGER_PATH, MV_MANAGER_IFACE,
                                                       "CreateMachine", "st", spec, (uint64_t) 0);
      const char *p = NULL;

      if (sd_bus_message_read (created, "o", &p) < 0)
        bench_fail (bench, "CreateMachine returned no path");
      g_ptr_array_add (paths, g_strdup (p));
    }
  return paths;
}

static void
delete_machines (Bench *bench, GPtrArray *paths)
{
  for (guint i = 0; i < paths->len; i++)
    {
      g_autoptr (sd_bus_message) deleted = bench_call (bench, bench->bus, MV_BUS_NAME,
                                                       paths->pdata[i], MV_MACHINE_IFACE,
                                                       "Delete", "b", 1);
    }
}

static void
row_start_at_once (Bench *bench, const char *fake, const char *kernel, const char *initrd)
{
  guint machines = bench->smoke ? 5 : AT_ONCE, pairs = bench->smoke ? 1 : 5;
  g_autoptr (GPtrArray) paths = NULL;
  BenchSamples *figure = bench_samples_new (), *baseline = bench_samples_new ();
  sd_bus *buses[AT_ONCE_BUSES];
  g_autofree char *what = g_strdup_printf ("%u stopped machines started at once (Firecracker test "
                                           "VMM): Starts sent → every Start returned, Running",
                                           machines);
  g_autofree char *baseline_what = g_strdup_printf ("%u bare fake-firecracker spawned by the bench, "
                                                    "each configured over its API socket from a "
                                                    "thread of its own → every one answers "
                                                    "GET / Running", machines);
  g_autofree char *spread = NULL, *note = NULL;
  BenchResult *r;

  paths = create_fake_machines (bench, kernel, initrd, machines);
  for (guint b = 0; b < AT_ONCE_BUSES; b++)
    buses[b] = bench_open_bus (bench);

  for (guint i = 0; i < pairs; i++)
    {
      for (guint side = 0; side < 2; side++)
        {
          gboolean daemon = (side == 0) == (i % 2 == 0);

          if (!daemon)
            {
              bench_samples_add (baseline, bare_at_once (bench, fake, kernel, initrd, machines));
              continue;
            }
          bench_samples_add (figure, call_all_at_once (bench, buses, paths, "Start"));
          expect_states (bench, paths, "Running", "Start");
          call_all_at_once (bench, buses, paths, "Stop");
          expect_states (bench, paths, "Stopped", "Stop");
        }
    }

  for (guint b = 0; b < AT_ONCE_BUSES; b++)
    sd_bus_flush_close_unref (buses[b]);
  delete_machines (bench, paths);

  spread = bench_spread_note ("through the daemon", figure, "bare", baseline);
  note = g_strdup_printf ("%u %s of runs, alternating which goes first; the Starts go over %d "
                          "connections; the daemon's VMMs walled in, as by default; %s",
                          pairs, pairs == 1 ? "pair" : "pairs", AT_ONCE_BUSES, spread);
  r = bench_report_add (bench->report, "20", "20-start-at-once", what, "µs", machines, figure,
                        baseline_what, baseline);
  bench_result_judge_on_interval (r);
  bench_result_set_note (r, note);
  bench_result_print (r);
}

/* ---- b: reads under churn ---- */

typedef struct {
  Bench        *bench;
  sd_bus       *bus;
  const char   *dest;        /* the daemon or the echo service */
  GPtrArray    *paths;       /* the machines read */
  guint         index;
  gint64        until;
  BenchSamples *latency;
} Reader;

static gpointer
read_thread (gpointer data)
{
  Reader *reader = data;

  for (guint k = 0; bench_now () < reader->until; k++)
    {
      const char *path = reader->paths->pdata[(reader->index + k) % reader->paths->len];
      g_autoptr (sd_bus_message) reply = NULL;
      gint64 t0 = bench_now ();

      if (k % 2 == 0)
        reply = bench_call (reader->bench, reader->bus, reader->dest, path,
                            "org.freedesktop.DBus.Properties", "Get", "ss", MV_MACHINE_IFACE,
                            "State");
      else
        reply = bench_call (reader->bench, reader->bus, reader->dest, path,
                            "org.freedesktop.DBus.Properties", "GetAll", "s", MV_MACHINE_IFACE);
      bench_samples_add (reader->latency, (double) (bench_now () - t0));
    }
  return NULL;
}

/* Every reader reads for @seconds; their latencies go to @pooled. Returns
 * the window's own p99. */
static double
read_window (Bench *bench, sd_bus **buses, const char *dest, GPtrArray *paths, double seconds,
             BenchSamples *pooled)
{
  Reader readers[READERS];
  GThread *threads[READERS];
  g_autoptr (BenchSamples) window = bench_samples_new ();
  gint64 until = bench_now () + (gint64) (seconds * G_USEC_PER_SEC);

  for (guint i = 0; i < READERS; i++)
    {
      readers[i] = (Reader) { bench, buses[i], dest, paths, i, until, bench_samples_new () };
      threads[i] = g_thread_new ("bench-reader", read_thread, &readers[i]);
    }
  for (guint i = 0; i < READERS; i++)
    {
      g_thread_join (threads[i]);
      for (guint j = 0; j < bench_samples_count (readers[i].latency); j++)
        {
          double us = g_array_index (readers[i].latency->values, double, j);
          bench_samples_add (window, us);
          bench_samples_add (pooled, us);
        }
      bench_samples_free (readers[i].latency);
    }
  if (bench_samples_count (window) == 0)
    bench_fail (bench, "%d readers made no read in %.1f s", READERS, seconds);
  return bench_samples_percentile (window, 99);
}

static char *
p99s_text (GArray *p99s)
{
  GString *text = g_string_new (NULL);

  for (guint i = 0; i < p99s->len; i++)
    g_string_append_printf (text, "%s%.0f", i ? ", " : "", g_array_index (p99s, double, i));
  return g_string_free (text, FALSE);
}

static void
row_reads_under_churn (Bench *bench)
{
  guint pairs = bench->smoke ? 1 : 4;
  double seconds = bench->smoke ? 0.3 : 2.0;
  g_autoptr (GPtrArray) read = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (GPtrArray) churned = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (GPtrArray) echo = g_ptr_array_new ();
  g_autoptr (GArray) churn_p99s = g_array_new (FALSE, FALSE, sizeof (double));
  g_autoptr (GArray) idle_p99s = g_array_new (FALSE, FALSE, sizeof (double));
  g_autoptr (GArray) echo_churn_p99s = g_array_new (FALSE, FALSE, sizeof (double));
  g_autoptr (GArray) echo_idle_p99s = g_array_new (FALSE, FALSE, sizeof (double));
  BenchSamples *figure = bench_samples_new (), *baseline = bench_samples_new ();
  BenchSamples *echo_churn = bench_samples_new (), *echo_idle = bench_samples_new ();
  BenchSamples *figure_again = NULL, *echo_churn_again = NULL;
  g_autofree char *what = NULL, *note = NULL, *rate = NULL, *churn_text = NULL, *idle_text = NULL;
  g_autofree char *echo_what = NULL, *echo_note = NULL, *echo_churn_text = NULL;
  g_autofree char *echo_idle_text = NULL;
  /* The daemon's CPU seconds in each kind of window: a busy main loop
   * explains slow reads. */
  double churn_cpu = 0, idle_cpu = 0;
  sd_bus *buses[READERS];
  Churn *churn;
  BenchResult *r;

  for (guint i = 0; i < READ_MACHINES; i++)
    g_ptr_array_add (read, bench_create_machine (bench, bench->bus, NULL, TRUE));
  for (guint i = 0; i < CHURNERS; i++)
    g_ptr_array_add (churned, bench_create_machine (bench, bench->bus, NULL, FALSE));
  g_ptr_array_add (echo, (gpointer) BENCH_ECHO_PATH);
  for (guint i = 0; i < READERS; i++)
    buses[i] = bench_open_bus (bench);
  churn = churn_new (bench, churned);

  /* Not counted: the machines just started and the readers' first calls
   * on their connections. */
  {
    g_autoptr (BenchSamples) warm = bench_samples_new ();
    read_window (bench, buses, MV_BUS_NAME, read, seconds, warm);
    read_window (bench, buses, BENCH_ECHO_NAME, echo, seconds, warm);
  }
  for (guint i = 0; i < pairs; i++)
    {
      for (guint side = 0; side < 2; side++)
        {
          gboolean churning = (side == 0) == (i % 2 == 1);
          double cpu0, p99;

          if (!churning)
            {
              cpu0 = bench_proc_cpu_seconds (bench->daemon_pid);
              p99 = read_window (bench, buses, MV_BUS_NAME, read, seconds, baseline);
              idle_cpu += bench_proc_cpu_seconds (bench->daemon_pid) - cpu0;
              g_array_append_val (idle_p99s, p99);
              p99 = read_window (bench, buses, BENCH_ECHO_NAME, echo, seconds, echo_idle);
              g_array_append_val (echo_idle_p99s, p99);
              continue;
            }
          churn_on (churn);
          cpu0 = bench_proc_cpu_seconds (bench->daemon_pid);
          p99 = read_window (bench, buses, MV_BUS_NAME, read, seconds, figure);
          churn_cpu += bench_proc_cpu_seconds (bench->daemon_pid) - cpu0;
          g_array_append_val (churn_p99s, p99);
          /* The same churn, read from a service that has no part in it. */
          p99 = read_window (bench, buses, BENCH_ECHO_NAME, echo, seconds, echo_churn);
          g_array_append_val (echo_churn_p99s, p99);
          churn_off (churn);
        }
    }
  rate = churn_rate_note (bench, churn);
  churn_free (churn);
  for (guint i = 0; i < READERS; i++)
    sd_bus_flush_close_unref (buses[i]);

  what = g_strdup_printf ("Get(State) and GetAll latency, %d client threads on %d running machines, "
                          "while %d other machines cycle Start/Stop (test runtime)",
                          READERS, READ_MACHINES, CHURNERS);
  churn_text = p99s_text (churn_p99s);
  idle_text = p99s_text (idle_p99s);
  note = g_strdup_printf ("%u %s of %.1f s each way, alternating; p99 of each window: %s µs "
                          "under churn, %s µs idle; the daemon used %.0f%% of one CPU under churn, "
                          "%.0f%% idle (its reading windows only); %s", pairs,
                          pairs == 1 ? "window" : "windows", seconds,
                          churn_text, idle_text, churn_cpu / (pairs * seconds) * 100,
                          idle_cpu / (pairs * seconds) * 100, rate);
  figure_again = bench_samples_copy (figure);
  echo_churn_again = bench_samples_copy (echo_churn);
  r = bench_report_add (bench->report, "20", "20-reads-under-churn", what, "µs",
                        READ_MACHINES + CHURNERS, figure,
                        "the same reads, the other machines stopped (idle daemon)", baseline);
  bench_result_set_target (r, BENCH_TARGET_P99_RATIO_AT_MOST, 2, "p99 ≤ 2× idle p99");
  bench_result_set_note (r, note);
  bench_result_print (r);

  echo_what = g_strdup_printf ("the same %d readers on the bare echo service (the same properties, "
                               "from constants), while the daemon's %d machines cycle",
                               READERS, CHURNERS);
  echo_churn_text = p99s_text (echo_churn_p99s);
  echo_idle_text = p99s_text (echo_idle_p99s);
  echo_note = g_strdup_printf ("what the churn costs a service that has no part in it: the machine's "
                               "2 CPUs and the bus shared with it; p99 of each window: %s µs under "
                               "churn, %s µs idle", echo_churn_text, echo_idle_text);
  r = bench_report_add (bench->report, "20", "20-bare-reads-under-churn", echo_what, "µs", 1,
                        echo_churn, "the same reads, the daemon's machines stopped", echo_idle);
  bench_result_show_p99_ratio (r);
  bench_result_set_note (r, echo_note);
  bench_result_print (r);

  r = bench_report_add (bench->report, "20", "20-reads-under-churn-vs-bare",
                        "reads of the daemon under churn (as above)", "µs",
                        READ_MACHINES + CHURNERS, figure_again,
                        "reads of the bare echo service under the same churn", echo_churn_again);
  bench_result_show_p99_ratio (r);
  bench_result_set_note (r, "the daemon's own share of a read under churn: both sides share the "
                            "machine with the same churn, in alternating windows");
  bench_result_print (r);
}

/* ---- d: what a running VMM's parent holds ---- */

/* The memory each running VMM's parent holds alone, after the daemon has
 * worked for a while beside them: a parent that were a fork of the
 * daemon would keep the daemon's pages as they were at the fork, a copy
 * of each as the daemon writes it. */
static void
row_parent_memory (Bench *bench, const char *kernel, const char *initrd)
{
  guint count = bench->smoke ? 5 : PARENTS, churn = bench->smoke ? 100 : PARENTS_CHURN;
  BenchSamples *parents = bench_samples_new (), *vmms = bench_samples_new ();
  g_autoptr (GPtrArray) paths = NULL, defined = NULL;
  g_autofree char *what = NULL, *note = NULL;
  sd_bus *buses[AT_ONCE_BUSES];
  double daemon_rss, held_all = 0;
  BenchResult *r;

  for (guint b = 0; b < AT_ONCE_BUSES; b++)
    buses[b] = bench_open_bus (bench);
  paths = create_fake_machines (bench, kernel, initrd, count);
  call_all_at_once (bench, buses, paths, "Start");
  expect_states (bench, paths, "Running", "Start");
  /* The daemon's work beside them: machines defined (records
   * written, objects exported), every machine listed. */
  defined = g_ptr_array_new_with_free_func (g_free);
  for (guint i = 0; i < churn; i++)
    {
      g_ptr_array_add (defined, bench_create_machine (bench, bench->bus, NULL, FALSE));
      if (i % 100 == 99)
        bench_timed_managed_objects (bench, NULL);
    }
  for (guint i = 0; i < paths->len; i++)
    {
      g_autofree char *id = bench_get_string (bench, bench->bus, MV_BUS_NAME, paths->pdata[i],
                                              MV_MACHINE_IFACE, "Id");
      GPid vmm = bench_vmm_pid (bench, id);
      GPid parent = bench_proc_parent (vmm);
      double held = parent > 1 ? bench_proc_private_kib (parent) : -1;

      if (held < 0)
        bench_fail (bench, "cannot read what the parent of VMM %d holds", vmm);
      bench_samples_add (parents, held);
      held_all += held;
      bench_samples_add (vmms, bench_proc_private_kib (vmm));
    }
  daemon_rss = bench_proc_rss_kib (bench->daemon_pid);
  call_all_at_once (bench, buses, paths, "Stop");
  expect_states (bench, paths, "Stopped", "Stop");
  delete_machines (bench, paths);
  delete_machines (bench, defined);
  for (guint b = 0; b < AT_ONCE_BUSES; b++)
    sd_bus_flush_close_unref (buses[b]);

  what = g_strdup_printf ("memory each running VMM's parent holds alone (Private_Clean + "
                          "Private_Dirty), %u running, after %u more machines were defined "
                          "beside them", count, churn);
  note = g_strdup_printf ("the %u parents together %.0f KiB, the daemon's RSS then %.0f KiB; "
                          "one parent per VMM, Firecracker test VMM", count, held_all, daemon_rss);
  r = bench_report_add (bench->report, "20", "20-parent-memory", what, "KiB", count, parents,
                        "the test VMM's own, the same way", vmms);
  bench_result_set_note (r, note);
  bench_result_print (r);
}

void
bench_rows_concurrency (Bench *bench)
{
  g_autofree char *fake = g_build_filename (bench->build_dir, "tests", "vmm", "fake-firecracker",
                                            NULL);
  g_autofree char *config = g_strdup_printf (BENCH_BASE_CONFIG "[firecracker]\nbinaries=%s\n", fake);
  g_autofree char *kernel = NULL, *initrd = NULL;

  bench_stand_in_guest (bench, &kernel, &initrd);
  mv_test_env_write_config (bench->env, config);
  bench_daemon_start (bench);
  row_start_at_once (bench, fake, kernel, initrd);
  row_parent_memory (bench, kernel, initrd);
  row_reads_under_churn (bench);
  bench_daemon_stop (bench);
  bench_clear_state (bench);
  /* The configuration the other rows expect. */
  mv_test_env_write_config (bench->env, BENCH_BASE_CONFIG);
}

/* ---- c: GetManagedObjects under churn ---- */

/* The first @count machines ListMachines lists. */
static GPtrArray *
some_machines (Bench *bench, guint count)
{
  g_autoptr (sd_bus_message) reply = bench_call (bench, bench->bus, MV_BUS_NAME, MV_MANAGER_PATH,
                                                 MV_MANAGER_IFACE, "ListMachines", NULL);
  GPtrArray *paths = g_ptr_array_new_with_free_func (g_free);
  const char *id, *name, *state, *path;

  if (sd_bus_message_enter_container (reply, 'a', "(ssso)") < 0)
    bench_fail (bench, "ListMachines: unexpected reply");
  while (paths->len < count && sd_bus_message_read (reply, "(ssso)", &id, &name, &state, &path) > 0)
    g_ptr_array_add (paths, g_strdup (path));
  if (paths->len < count)
    bench_fail (bench, "ListMachines listed %u machines, %u wanted", paths->len, count);
  return paths;
}

void
bench_row_listing_under_churn (Bench *bench, guint n)
{
  guint churners = bench->smoke ? 5 : CHURNERS, pairs = bench->smoke ? 3 : 10;
  g_autoptr (GPtrArray) churned = some_machines (bench, churners);
  BenchSamples *figure = bench_samples_new (), *baseline = bench_samples_new ();
  g_autofree char *id = g_strdup_printf ("20-managed-objects-under-churn-n%u", n);
  g_autofree char *what = g_strdup_printf ("GetManagedObjects while %u of the machines cycle "
                                           "Start/Stop (test runtime)", churners);
  g_autofree char *rate = NULL, *spread = NULL, *note = NULL;
  Churn *churn = churn_new (bench, churned);
  BenchResult *r;

  for (guint i = 0; i < pairs; i++)
    {
      for (guint side = 0; side < 2; side++)
        {
          gboolean churning = (side == 0) == (i % 2 == 0);
          /* Both sides list every machine: checked once. */
          guint listed = n, *check = i == 0 ? &listed : NULL;

          if (!churning)
            bench_samples_add (baseline, bench_timed_managed_objects (bench, check));
          else
            {
              churn_on (churn);
              bench_samples_add (figure, bench_timed_managed_objects (bench, check));
              churn_off (churn);
            }
          if (listed != n)
            bench_fail (bench, "GetManagedObjects listed %u machines, %u defined", listed, n);
        }
    }
  rate = churn_rate_note (bench, churn);
  churn_free (churn);
  spread = bench_spread_note ("under churn", figure, "idle", baseline);
  note = g_strdup_printf ("%u pairs, alternating which goes first; %s; %s", pairs, rate, spread);
  r = bench_report_add (bench->report, "20", id, what, "µs", n, figure,
                        "GetManagedObjects, same daemon, nothing changing, interleaved", baseline);
  bench_result_judge_on_interval (r);
  bench_result_set_note (r, note);
  bench_result_print (r);
}
