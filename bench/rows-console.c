/* #22: what a remote console session costs to open: Machine.RequestConsole
 * and the WebSocket handshake with the console bridge, until the session
 * takes keystrokes, against Machine.OpenConsole over the bus, until its
 * descriptor is in hand. One machine on the Firecracker test VMM (its
 * guest simulated); the two are measured in turn, A B A B, each session
 * closed before the next. */
#include "bench.h"

#include "names.h"

#include <libsoup/soup.h>
#include <unistd.h>

typedef struct {
  SoupWebsocketConnection *ws;
  GError                  *error;
  gboolean                 done;
} Connecting;

static void
on_connected (GObject *source, GAsyncResult *result, gpointer data)
{
  Connecting *c = data;

  c->ws = soup_session_websocket_connect_finish (SOUP_SESSION (source), result, &c->error);
  c->done = TRUE;
}

/* µs from RequestConsole to an open session. */
static double
bridge_session (Bench *bench, SoupSession *session, const char *url, const char *path)
{
  g_autoptr (sd_bus_message) reply = NULL;
  g_autoptr (SoupMessage) msg = NULL;
  g_autofree char *full = NULL;
  Connecting c = { 0 };
  const char *token = NULL;
  guint64 expires_at = 0;
  gint64 t0 = bench_now ();
  double us;

  reply = bench_call (bench, bench->bus, MV_BUS_NAME, path, MV_MACHINE_IFACE, "RequestConsole",
                      "s", "serial");
  if (sd_bus_message_read (reply, "st", &token, &expires_at) < 0)
    bench_fail (bench, "RequestConsole: an answer that is not (st)");
  full = g_strdup_printf ("%s?token=%s", url, token);
  msg = soup_message_new (SOUP_METHOD_GET, full);
  soup_session_websocket_connect_async (session, msg, NULL, NULL, G_PRIORITY_DEFAULT, NULL,
                                        on_connected, &c);
  while (!c.done)
    g_main_context_iteration (NULL, TRUE);
  us = (double) (bench_now () - t0);
  if (!c.ws)
    bench_fail (bench, "the console bridge: %s", c.error->message);
  soup_websocket_connection_close (c.ws, SOUP_WEBSOCKET_CLOSE_NORMAL, NULL);
  while (soup_websocket_connection_get_state (c.ws) != SOUP_WEBSOCKET_STATE_CLOSED)
    g_main_context_iteration (NULL, TRUE);
  g_object_unref (c.ws);
  return us;
}

/* µs from OpenConsole to its descriptor. */
static double
bus_session (Bench *bench, const char *path)
{
  gint64 t0 = bench_now ();
  g_autoptr (sd_bus_message) reply = bench_call (bench, bench->bus, MV_BUS_NAME, path,
                                                 MV_MACHINE_IFACE, "OpenConsole", NULL);
  double us = (double) (bench_now () - t0);
  int fd = -1;

  if (sd_bus_message_read (reply, "h", &fd) < 0)
    bench_fail (bench, "OpenConsole: an answer without a descriptor");
  /* The reply's descriptor is closed with the reply. */
  return us;
}

void
bench_row_console (Bench *bench)
{
  g_autofree char *fake = g_build_filename (bench->build_dir, "tests", "vmm", "fake-firecracker",
                                            NULL);
  g_autofree char *config = g_strdup_printf (BENCH_BASE_CONFIG "[firecracker]\nbinaries=%s\n"
                                             "[console]\nlisten=127.0.0.1:0\n", fake);
  g_autofree char *kernel = NULL, *initrd = NULL, *spec = NULL, *path = NULL, *url = NULL;
  g_autoptr (SoupSession) session = soup_session_new ();
  BenchSamples *bridge = bench_samples_new ();
  BenchSamples *bus = bench_samples_new ();
  guint runs = bench->smoke ? 3 : 60;
  BenchResult *r;

  mv_test_env_write_config (bench->env, config);
  bench_daemon_start (bench);
  bench_stand_in_guest (bench, &kernel, &initrd);
  spec = g_strdup_printf ("{\"name\":\"bench-console\",\"hypervisor_type\":\"firecracker\","
                          "\"kernel\":\"%s\",\"initrd\":\"%s\",\"kernel_args\":\""
                          BENCH_FAKE_KERNEL_ARGS "\",\"memory_bytes\":268435456}", kernel, initrd);
  {
    g_autoptr (sd_bus_message) created = bench_call (bench, bench->bus, MV_BUS_NAME,
                                                     MV_MANAGER_PATH, MV_MANAGER_IFACE,
                                                     "CreateMachine", "st", spec,
                                                     (uint64_t) MV_CREATE_START);
    const char *p = NULL;

    if (sd_bus_message_read (created, "o", &p) < 0)
      bench_fail (bench, "CreateMachine returned no path");
    path = g_strdup (p);
  }
  url = bench_get_string (bench, bench->bus, MV_BUS_NAME, MV_MANAGER_PATH, MV_MANAGER_IFACE,
                          "ConsoleURL");
  if (!g_str_has_prefix (url, "ws://"))
    bench_fail (bench, "the console bridge is not served: ConsoleURL is '%s'", url);

  for (guint i = 0; i < runs; i++)
    {
      bench_samples_add (bridge, bridge_session (bench, session, url, path));
      bench_samples_add (bus, bus_session (bench, path));
    }
  r = bench_report_add (bench->report, "22", "22-console-bridge",
                        "RequestConsole + WebSocket session open (serial)", "µs", -1, bridge,
                        "Machine.OpenConsole over the bus, descriptor in hand", bus);
  bench_result_set_target (r, BENCH_TARGET_EXCESS_AT_MOST, 5000,
                           "≤ 5 ms more than OpenConsole");
  bench_result_judge_on_interval (r);
  bench_result_print (r);

  bench_daemon_stop (bench);
  bench_clear_state (bench);
  mv_test_env_write_config (bench->env, BENCH_BASE_CONFIG);
}
