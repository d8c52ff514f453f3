/* #16 and #17: what reading the machines' usage costs through the daemon.
 *
 *   #16  Manager.GetAllStats with 100 machines running on the Firecracker
 *        test VMM, against the bench reading the same /proc/PID/stat,
 *        status and io files of those 100 VMMs itself.
 *   #17  GET /metrics with 1,000 machines defined (those 100 running, 900
 *        stopped on the test runtime), against a bare libsoup server in
 *        the bench process serving the bytes of one scrape as they are;
 *        one client session fetches both, alternately, the same number
 *        of times. The daemon keeps a scrape's text for a second, so a
 *        loop like this one renders about once a second.
 *
 * One daemon serves both rows. The daemon's VMMs are walled in, as by
 * default; the sampler of daily metrics is set to an hour so that none of
 * its rounds falls inside the measurement. */
#include "bench.h"

#include "names.h"

#include <json-glib/json-glib.h>
#include <libsoup/soup.h>
#include <string.h>

/* The simulated guest is ready at once. */
#define RUNNING     100
#define DEFINED     1000

typedef struct {
  Bench    *bench;
  GArray   *pids;            /* GPid of each running machine's VMM */
  GPtrArray *running;        /* their object paths */
  guint16   port;            /* the daemon's /metrics */
} Observed;

static guint16
free_port (Bench *bench)
{
  g_autoptr (GSocket) socket = g_socket_new (G_SOCKET_FAMILY_IPV4, G_SOCKET_TYPE_STREAM,
                                             G_SOCKET_PROTOCOL_TCP, NULL);
  g_autoptr (GInetAddress) loopback = g_inet_address_new_loopback (G_SOCKET_FAMILY_IPV4);
  g_autoptr (GSocketAddress) any = g_inet_socket_address_new (loopback, 0);
  g_autoptr (GSocketAddress) bound = NULL;

  if (!socket || !g_socket_bind (socket, any, FALSE, NULL) ||
      !(bound = g_socket_get_local_address (socket, NULL)))
    bench_fail (bench, "cannot find a free port on loopback");
  return g_inet_socket_address_get_port (G_INET_SOCKET_ADDRESS (bound));
}

static void
populate (Observed *o)
{
  Bench *bench = o->bench;
  g_autofree char *kernel = NULL, *initrd = NULL;
  guint running = bench->smoke ? 5 : RUNNING, defined = bench->smoke ? 50 : DEFINED;

  bench_stand_in_guest (bench, &kernel, &initrd);
  for (guint i = 0; i < running; i++)
    {
      g_autofree char *spec = g_strdup_printf (
        "{\"name\":\"bench-o%05u\",\"hypervisor_type\":\"firecracker\",\"kernel\":\"%s\","
        "\"initrd\":\"%s\",\"kernel_args\":\"" BENCH_FAKE_KERNEL_ARGS "\",\"memory_bytes\":134217728}",
        ++bench->machine_seq, kernel, initrd);
      g_autoptr (sd_bus_message) created = NULL;
      g_autoptr (sd_bus_message) started = NULL;
      g_autofree char *path = NULL, *id = NULL;
      const char *p = NULL;
      GPid pid;

      created = bench_call (bench, bench->bus, MV_BUS_NAME, MV_MANAGER_PATH, MV_MANAGER_IFACE,
                            "CreateMachine", "st", spec, (uint64_t) 0);
      sd_bus_message_read (created, "o", &p);
      path = g_strdup (p);
      started = bench_call (bench, bench->bus, MV_BUS_NAME, path, MV_MACHINE_IFACE, "Start", NULL);
      id = bench_get_string (bench, bench->bus, MV_BUS_NAME, path, MV_MACHINE_IFACE, "Id");
      pid = bench_vmm_pid (bench, id);
      g_array_append_val (o->pids, pid);
      g_ptr_array_add (o->running, g_steal_pointer (&path));
    }
  for (guint i = running; i < defined; i++)
    g_free (bench_create_machine (bench, bench->bus, NULL, FALSE));
}

/* ---- #16 ---- */

static guint
timed_get_all_stats (Bench *bench, double *us)
{
  gint64 t0 = bench_now ();
  g_autoptr (sd_bus_message) reply = bench_call (bench, bench->bus, MV_BUS_NAME, MV_MANAGER_PATH,
                                                 MV_MANAGER_IFACE, "GetAllStats", NULL);
  guint n = 0;

  *us = (double) (bench_now () - t0);
  if (sd_bus_message_enter_container (reply, 'a', "(sa{sv})") < 0)
    bench_fail (bench, "GetAllStats: unexpected reply");
  while (sd_bus_message_skip (reply, "(sa{sv})") > 0)
    n++;
  return n;
}

/* The three files the runtime reads for each VMM, read and their figures
 * taken out: utime, stime and RSS of stat, the VmRSS line of status, the
 * byte counts of io. */
static double
timed_proc_reads (Bench *bench, GArray *pids)
{
  gint64 t0 = bench_now ();
  guint64 sum = 0;

  for (guint i = 0; i < pids->len; i++)
    {
      GPid pid = g_array_index (pids, GPid, i);
      static const char *const files[] = { "stat", "status", "io" };

      for (guint f = 0; f < G_N_ELEMENTS (files); f++)
        {
          g_autofree char *path = g_strdup_printf ("/proc/%d/%s", pid, files[f]);
          g_autofree char *text = NULL;
          const char *p;

          if (!g_file_get_contents (path, &text, NULL, NULL))
            bench_fail (bench, "cannot read %s: the VMM is gone", path);
          if (f == 0 && (p = strrchr (text, ')')))
            {
              g_auto (GStrv) fields = g_strsplit (p + 2, " ", -1);
              if (g_strv_length (fields) > 21)
                sum += g_ascii_strtoull (fields[11], NULL, 10) +
                       g_ascii_strtoull (fields[12], NULL, 10) +
                       g_ascii_strtoull (fields[21], NULL, 10);
            }
          else if (f == 1 && (p = strstr (text, "VmRSS:")))
            sum += g_ascii_strtoull (p + 6, NULL, 10);
          else if (f == 2 && (p = strstr (text, "read_bytes: ")))
            sum += g_ascii_strtoull (p + 12, NULL, 10);
        }
    }
  /* Kept, so that the parsing is not optimised away. */
  if (sum == G_MAXUINT64)
    g_print ("%" G_GUINT64_FORMAT "\n", sum);
  return (double) (bench_now () - t0);
}

static void
row_get_all_stats (Observed *o)
{
  Bench *bench = o->bench;
  guint runs = bench->smoke ? 20 : 500;
  BenchSamples *figure = bench_samples_new (), *baseline = bench_samples_new ();
  g_autofree char *what = g_strdup_printf ("GetAllStats, %u machines running (Firecracker test VMM)",
                                           o->pids->len);
  g_autofree char *note = NULL;
  BenchResult *r;
  double us;

  /* Warm: the first call of each side reads files not yet cached. */
  timed_get_all_stats (bench, &us);
  timed_proc_reads (bench, o->pids);
  for (guint i = 0; i < runs; i++)
    {
      guint n = timed_get_all_stats (bench, &us);

      if (n != o->pids->len)
        bench_fail (bench, "GetAllStats listed %u machines, %u run", n, o->pids->len);
      bench_samples_add (figure, us);
      bench_samples_add (baseline, timed_proc_reads (bench, o->pids));
    }
  note = bench_spread_note ("GetAllStats", figure, "the reads", baseline);
  r = bench_report_add (bench->report, "16", "16-get-all-stats", what, "µs", o->pids->len, figure,
                        "the bench reads /proc/PID/{stat,status,io} of the same VMMs itself",
                        baseline);
  bench_result_set_note (r, note);
  bench_result_print (r);
}

/* ---- #17 ---- */

typedef struct {
  GMutex        lock;
  GCond         cond;
  GMainContext *context;
  GMainLoop    *loop;
  GBytes       *body;
  guint16       port;        /* 0 until it listens */
  gboolean      failed;
} BareServer;

static void
on_bare_metrics (SoupServer *server, SoupServerMessage *msg, const char *path, GHashTable *query,
                 gpointer user_data)
{
  BareServer *bare = user_data;

  soup_server_message_set_status (msg, SOUP_STATUS_OK, NULL);
  soup_server_message_set_response (msg, "text/plain; version=0.0.4; charset=utf-8",
                                    SOUP_MEMORY_STATIC, g_bytes_get_data (bare->body, NULL),
                                    g_bytes_get_size (bare->body));
}

/* The bare server's thread: its own main context, as the daemon's server
 * has the daemon's main loop. */
static gpointer
bare_server_thread (gpointer data)
{
  BareServer *bare = data;
  g_autoptr (SoupServer) server = NULL;
  g_autoptr (GSList) uris = NULL;
  guint16 port = 0;

  g_main_context_push_thread_default (bare->context);
  server = soup_server_new (NULL, NULL);
  soup_server_add_handler (server, "/metrics", on_bare_metrics, bare, NULL);
  if (soup_server_listen_local (server, 0, SOUP_SERVER_LISTEN_IPV4_ONLY, NULL) &&
      (uris = soup_server_get_uris (server)))
    port = (guint16) g_uri_get_port (uris->data);
  g_slist_free_full (g_steal_pointer (&uris), (GDestroyNotify) g_uri_unref);

  g_mutex_lock (&bare->lock);
  bare->port = port;
  bare->failed = port == 0;
  g_cond_broadcast (&bare->cond);
  g_mutex_unlock (&bare->lock);
  if (port)
    g_main_loop_run (bare->loop);
  soup_server_disconnect (server);
  g_main_context_pop_thread_default (bare->context);
  return NULL;
}

static GBytes *
fetch (Bench *bench, SoupSession *session, guint16 port, double *us)
{
  g_autofree char *uri = g_strdup_printf ("http://127.0.0.1:%u/metrics", port);
  g_autoptr (SoupMessage) msg = soup_message_new ("GET", uri);
  g_autoptr (GError) error = NULL;
  gint64 t0 = bench_now ();
  GBytes *body = soup_session_send_and_read (session, msg, NULL, &error);

  *us = (double) (bench_now () - t0);
  if (!body)
    bench_fail (bench, "GET %s: %s", uri, error->message);
  if (soup_message_get_status (msg) != SOUP_STATUS_OK)
    bench_fail (bench, "GET %s: HTTP %u", uri, soup_message_get_status (msg));
  return body;
}

static void
row_scrape (Observed *o, guint defined)
{
  Bench *bench = o->bench;
  guint runs = bench->smoke ? 20 : 300;
  BenchSamples *figure = bench_samples_new (), *baseline = bench_samples_new ();
  BenchSamples *render = bench_samples_new ();
  g_autoptr (SoupSession) session = soup_session_new ();
  g_autofree char *what = g_strdup_printf ("GET /metrics, %u machines defined (%u running)",
                                           defined, o->pids->len);
  g_autofree char *note = NULL, *spread = NULL;
  BareServer bare = { 0 };
  GThread *thread;
  BenchResult *r;
  double us;

  /* The bytes the bare server serves: one scrape of the daemon's. */
  bare.body = fetch (bench, session, o->port, &us);
  bare.context = g_main_context_new ();
  bare.loop = g_main_loop_new (bare.context, FALSE);
  g_mutex_init (&bare.lock);
  g_cond_init (&bare.cond);
  thread = g_thread_new ("bare-metrics", bare_server_thread, &bare);
  g_mutex_lock (&bare.lock);
  while (!bare.port && !bare.failed)
    g_cond_wait (&bare.cond, &bare.lock);
  g_mutex_unlock (&bare.lock);
  if (bare.failed)
    bench_fail (bench, "the bare libsoup server could not listen on loopback");

  /* Warm: one connection each, kept alive by the session. */
  g_bytes_unref (fetch (bench, session, bare.port, &us));
  g_bytes_unref (fetch (bench, session, o->port, &us));
  for (guint i = 0; i < runs; i++)
    {
      g_autoptr (GBytes) ours = fetch (bench, session, o->port, &us);
      g_autoptr (GBytes) theirs = NULL;

      bench_samples_add (figure, us);
      theirs = fetch (bench, session, bare.port, &us);
      bench_samples_add (baseline, us);
      if (g_bytes_get_size (theirs) != g_bytes_get_size (bare.body))
        bench_fail (bench, "the bare server served %zu bytes, not %zu",
                    g_bytes_get_size (theirs), g_bytes_get_size (bare.body));
      bench_samples_add (render, (double) g_bytes_get_size (ours));
    }
  g_main_loop_quit (bare.loop);
  g_main_context_wakeup (bare.context);
  g_thread_join (thread);

  spread = bench_spread_note ("the daemon", figure, "the bare server", baseline);
  note = g_strdup_printf ("%s; body %.0f KiB (%.2f KiB a machine)", spread,
                          bench_samples_percentile (render, 50) / 1024,
                          bench_samples_percentile (render, 50) / 1024 / defined);
  r = bench_report_add (bench->report, "17", "17-scrape", what, "µs", defined, figure,
                        "a bare libsoup 3 server in the bench serving the same bytes, same client",
                        baseline);
  bench_result_set_note (r, note);
  bench_result_print (r);

  bench_samples_free (render);
  g_bytes_unref (bare.body);
  g_main_loop_unref (bare.loop);
  g_main_context_unref (bare.context);
  g_mutex_clear (&bare.lock);
  g_cond_clear (&bare.cond);
}

void
bench_rows_observability (Bench *bench, gboolean stats, gboolean scrape)
{
  g_autofree char *fake = g_build_filename (bench->build_dir, "tests", "vmm", "fake-firecracker",
                                            NULL);
  g_autofree char *config = NULL;
  Observed o = { .bench = bench, .pids = g_array_new (FALSE, FALSE, sizeof (GPid)),
                 .running = g_ptr_array_new_with_free_func (g_free) };

  o.port = free_port (bench);
  config = g_strdup_printf (BENCH_BASE_CONFIG "[firecracker]\nbinaries=%s\n[metrics]\n"
                            "sample-seconds=3600\n[prometheus]\nlisten=127.0.0.1:%u\n", fake, o.port);
  mv_test_env_write_config (bench->env, config);
  bench_daemon_start (bench);
  populate (&o);
  if (stats)
    row_get_all_stats (&o);
  if (scrape)
    row_scrape (&o, bench->smoke ? 50 : DEFINED);
  /* A daemon that stops leaves its VMMs running: they go first. */
  for (guint i = 0; i < o.running->len; i++)
    {
      g_autoptr (sd_bus_message) deleted = bench_call (bench, bench->bus, MV_BUS_NAME,
                                                       o.running->pdata[i], MV_MACHINE_IFACE,
                                                       "Delete", "b", 1);
    }
  bench_daemon_stop (bench);
  bench_clear_state (bench);
  /* The configuration the other rows expect. */
  mv_test_env_write_config (bench->env, BENCH_BASE_CONFIG);
  g_array_unref (o.pids);
  g_ptr_array_unref (o.running);
}
