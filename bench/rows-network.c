/* #13 and #14: machines on a network. Two entries, each measured side by
 * side with its baseline in the same daemon, runs interleaved:
 *
 *   13-attach  create→Running through the daemon (QEMU under TCG,
 *              microvmd's kernel and initramfs, the busybox root disk,
 *              readiness by the agent, `sleep 1000000` as the workload) of
 *              a machine on a network (its TAP made by NetworkManager on
 *              the network's bridge, its address given by the agent),
 *              against the same machine on no network. Each machine is
 *              deleted, forced, after its run.
 *   14-wake    a machine on standby with a published port (httpd in the
 *              guest on port 80, published on the gateway's port 8080):
 *              the µs from a non-blocking connect() to the port until the
 *              socket is writable with no error, the connection
 *              established by the guest the connection woke; against
 *              Standby → Running through Machine.Start alone, the same
 *              machine. The machine goes back to standby before each run.
 *
 * The daemon runs in a network namespace the rows make for themselves,
 * with a NetworkManager of their own in it on the private bus
 * (tests/lib/test-netns.h); the connections of 14-wake are made by a
 * thread that enters that namespace alone. The rest of the benchmark stays
 * where it was, and nothing touches the machine's own network.
 *
 * --smoke runs each entry once with the test runtime instead of QEMU:
 * 13-attach as above; 14-wake until the machine the connection woke is
 * Running (no guest answers the connection). */
#include "bench.h"

#include "names.h"
#include "test-netns.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define ATTACH_RUNS      6
#define WAKE_RUNS        8
#define NETWORK          "benchnet"
#define SUBNET           "10.97.0.0/24"
#define HOST_PORT        8080
#define RUNNING_TIMEOUT_S  60
/* A wake that waits for the daemon's next resync (30 s) is a bug. */
#define WAKE_TIMEOUT_S     15
#define WWW_WORKLOAD \
  "\"cmd\":[\"sh\",\"-c\",\"mkdir -p /www && echo ok > /www/index.html && " \
  "exec httpd -f -p 80 -h /www\"]"

typedef struct {
  Bench       *bench;
  MvTestNetns *netns;
  int          netns_fd;    /* /run/netns/NAME */
  gboolean     qemu;        /* FALSE in smoke mode: the test runtime */
  char        *gateway;     /* the network's, "10.97.0.1" */
} Net;

static void
add (Bench *bench, const char *row, const char *id, const char *what, BenchSamples *figure,
     const char *baseline_what, BenchSamples *baseline, const char *note)
{
  g_autofree char *full = g_strdup_printf ("%s; spread (min–max, µs): figure %.0f–%.0f, "
                                           "baseline %.0f–%.0f", note,
                                           bench_samples_percentile (figure, 0.001),
                                           bench_samples_percentile (figure, 100),
                                           bench_samples_percentile (baseline, 0.001),
                                           bench_samples_percentile (baseline, 100));
  BenchResult *r = bench_report_add (bench->report, row, id, what, "µs", -1, figure,
                                     baseline_what, baseline);

  bench_result_set_note (r, full);
  bench_result_print (r);
}

static char *
machine_spec (Net *net, const char *name, const char *network, const char *extra)
{
  g_autofree char *on = network ? g_strdup_printf (",\"network_name\":\"%s\"", network) : NULL;
  Bench *bench = net->bench;

  if (!net->qemu)
    return g_strdup_printf ("{\"name\":\"%s\",\"hypervisor_type\":\"test\","
                            "\"kernel\":\"/boot/vmlinuz\"%s%s%s}",
                            name, on ? on : "", extra ? "," : "", extra ? extra : "");
  return g_strdup_printf ("{\"name\":\"%s\",\"hypervisor_type\":\"qemu\",\"memory_bytes\":268435456,"
                          "\"readiness\":\"agent\",\"disks\":[{\"path\":\"%s\",\"read_only\":true,"
                          "\"root\":true}]%s,%s}",
                          name, bench->rootfs, on ? on : "",
                          extra ? extra : "\"cmd\":[\"sleep\",\"1000000\"]");
}

static char *
create (Bench *bench, const char *spec, uint64_t flags)
{
  g_autoptr (sd_bus_message) reply = bench_call (bench, bench->bus, MV_BUS_NAME, MV_MANAGER_PATH,
                                                 MV_MANAGER_IFACE, "CreateMachine", "st", spec,
                                                 flags);
  const char *path = NULL;

  if (sd_bus_message_read (reply, "o", &path) < 0)
    bench_fail (bench, "CreateMachine returned no path");
  return g_strdup (path);
}

static void
machine_call (Bench *bench, const char *path, const char *method)
{
  g_autoptr (sd_bus_message) reply = bench_call (bench, bench->bus, MV_BUS_NAME, path,
                                                 MV_MACHINE_IFACE, method, NULL);
}

static void
delete_forced (Bench *bench, const char *path)
{
  g_autoptr (sd_bus_message) reply = bench_call (bench, bench->bus, MV_BUS_NAME, path,
                                                 MV_MACHINE_IFACE, "Delete", "b", 1);
}

static void
expect_state (Bench *bench, const char *path, const char *want, const char *after)
{
  g_autofree char *state = bench_get_string (bench, bench->bus, MV_BUS_NAME, path,
                                             MV_MACHINE_IFACE, "State");

  if (!g_str_equal (state, want))
    bench_fail (bench, "%s is %s after %s, not %s", path, state, after, want);
}

/* ---- 13-attach ---- */

/* CreateMachine with CREATE_START: µs until it returned, the machine
 * Running, with an address on the network if it is on one; then Delete,
 * forced. */
static double
create_running (Net *net, gboolean networked)
{
  Bench *bench = net->bench;
  g_autofree char *name = g_strdup_printf ("bench-n%05u", ++bench->machine_seq);
  g_autofree char *spec = machine_spec (net, name, networked ? NETWORK : NULL, NULL);
  g_autofree char *path = NULL, *address = NULL;
  g_autofree char *prefix = g_strndup (net->gateway, strrchr (net->gateway, '.') + 1 - net->gateway);
  gint64 t0, t1;

  t0 = bench_now ();
  path = create (bench, spec, MV_CREATE_START);
  t1 = bench_now ();
  expect_state (bench, path, "Running", "CreateMachine with CREATE_START");
  address = bench_get_string (bench, bench->bus, MV_BUS_NAME, path, MV_MACHINE_IFACE, "Address");
  if (networked ? !g_str_has_prefix (address, prefix) : *address != '\0')
    bench_fail (bench, "%s has the address \"%s\" %s", name, address,
                networked ? "on " NETWORK " (" SUBNET ")" : "on no network");
  delete_forced (bench, path);
  return (double) (t1 - t0);
}

static void
measure_attach (Net *net)
{
  Bench *bench = net->bench;
  guint runs = bench->smoke ? 1 : ATTACH_RUNS;
  g_autoptr (BenchSamples) on = bench_samples_new ();
  g_autoptr (BenchSamples) off = bench_samples_new ();

  /* Not counted: both read their files once, and the bridge comes up. */
  create_running (net, TRUE);
  create_running (net, FALSE);
  /* ABAB, each side first in turn, so that the machine's drift over the
   * row falls on both alike. */
  for (guint i = 0; i < runs; i++)
    {
      gboolean networked_first = i % 2 == 0;

      if (networked_first)
        bench_samples_add (on, create_running (net, TRUE));
      bench_samples_add (off, create_running (net, FALSE));
      if (!networked_first)
        bench_samples_add (on, create_running (net, TRUE));
      g_print ("[13] run %u of %u: %.2f s on the network, %.2f s on none\n", i + 1, runs,
               g_array_index (on->values, double, i) / 1e6,
               g_array_index (off->values, double, i) / 1e6);
    }
  if (net->qemu)
    add (bench, "13", "13-attach",
         "create→Running on a network (QEMU TCG, microvm, agent ready, TAP on the bridge)",
         g_steal_pointer (&on), "the same machine on no network", g_steal_pointer (&off),
         "microvmd's kernel + initramfs + the busybox root disk read-only, `sleep 1000000` as "
         "the workload on both sides; the network's TAP is made by NetworkManager in the "
         "daemon's namespace and the address set by the agent; one machine of each kind not "
         "counted first; every machine deleted, forced, after its run");
  else
    add (bench, "13", "13-attach", "create→Running on a network (test runtime, smoke)",
         g_steal_pointer (&on), "the same machine on no network", g_steal_pointer (&off),
         "the test runtime: no guest, the TAP and the address only; one machine of each kind "
         "not counted first");
}

/* ---- 14-wake ---- */

typedef struct {
  Net      *net;
  gboolean  established;  /* wait until the connection is established */
  gboolean  get;          /* and then fetch / and expect "ok" */
  int       fd;           /* the socket, left open when not @established */
  double    us;           /* connect() → writable */
  char     *failure;
} Connect;

static gpointer
connect_thread (gpointer data)
{
  Connect *c = data;
  struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons (HOST_PORT) };
  struct pollfd pfd = { .events = POLLOUT };
  int error = 0;
  socklen_t len = sizeof error;
  gint64 t0, t1;

  c->fd = -1;
  /* This thread alone enters the namespace: namespaces belong to threads. */
  if (setns (c->net->netns_fd, CLONE_NEWNET) < 0)
    {
      c->failure = g_strdup_printf ("cannot enter the rows' network namespace: %s",
                                    g_strerror (errno));
      return NULL;
    }
  inet_pton (AF_INET, c->net->gateway, &sin.sin_addr);
  c->fd = socket (AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (c->fd < 0)
    {
      c->failure = g_strdup_printf ("socket: %s", g_strerror (errno));
      return NULL;
    }
  t0 = bench_now ();
  if (connect (c->fd, (struct sockaddr *) &sin, sizeof sin) < 0 && errno != EINPROGRESS)
    {
      c->failure = g_strdup_printf ("connect to %s:%d: %s", c->net->gateway, HOST_PORT,
                                    g_strerror (errno));
      return NULL;
    }
  if (!c->established)
    return NULL;
  pfd.fd = c->fd;
  if (poll (&pfd, 1, WAKE_TIMEOUT_S * 1000) != 1)
    {
      c->failure = g_strdup_printf ("no connection to %s:%d within %d s", c->net->gateway,
                                    HOST_PORT, WAKE_TIMEOUT_S);
      return NULL;
    }
  t1 = bench_now ();
  if (getsockopt (c->fd, SOL_SOCKET, SO_ERROR, &error, &len) < 0 || error != 0)
    {
      c->failure = g_strdup_printf ("connect to %s:%d: %s", c->net->gateway, HOST_PORT,
                                    g_strerror (error ? error : errno));
      return NULL;
    }
  c->us = (double) (t1 - t0);
  if (c->get)
    {
      static const char request[] = "GET /index.html HTTP/1.0\r\n\r\n";
      g_autoptr (GString) answer = g_string_new (NULL);
      char buffer[512];
      ssize_t n;

      pfd.events = POLLIN;
      if (send (c->fd, request, sizeof request - 1, MSG_NOSIGNAL) != sizeof request - 1)
        c->failure = g_strdup_printf ("send: %s", g_strerror (errno));
      while (!c->failure && poll (&pfd, 1, WAKE_TIMEOUT_S * 1000) == 1 &&
             (n = recv (c->fd, buffer, sizeof buffer, 0)) > 0)
        g_string_append_len (answer, buffer, n);
      if (!c->failure && !g_str_has_suffix (answer->str, "\r\n\r\nok\n"))
        c->failure = g_strdup_printf ("the published port answered \"%s\", not the guest's "
                                      "index.html", answer->str);
    }
  close (c->fd);
  c->fd = -1;
  return NULL;
}

/* Runs one connection to the published port from inside the namespace. */
static void
connect_port (Net *net, Connect *c)
{
  c->net = net;
  g_thread_join (g_thread_new ("bench-connect", connect_thread, c));
}

static void
wait_running (Bench *bench, const char *path, guint timeout_s, const char *after)
{
  gint64 deadline = bench_now () + timeout_s * G_USEC_PER_SEC;

  for (;;)
    {
      g_autofree char *state = bench_get_string (bench, bench->bus, MV_BUS_NAME, path,
                                                 MV_MACHINE_IFACE, "State");

      if (g_str_equal (state, "Running"))
        return;
      if (bench_now () > deadline)
        bench_fail (bench, "%s is still %s %u s after %s", path, state, timeout_s, after);
      g_usleep (2000);
    }
}

/* Standby, then Machine.Start: µs until it returned. */
static double
start_alone (Net *net, const char *path)
{
  Bench *bench = net->bench;
  gint64 t0;

  machine_call (bench, path, "Standby");
  expect_state (bench, path, "Standby", "Standby");
  t0 = bench_now ();
  machine_call (bench, path, "Start");
  t0 = bench_now () - t0;
  expect_state (bench, path, "Running", "Start");
  return (double) t0;
}

/* Standby, then a connection to the published port: µs until it was
 * established (QEMU), or until the machine it woke was Running (the test
 * runtime, where nothing answers). */
static double
connect_woken (Net *net, const char *path)
{
  Bench *bench = net->bench;
  Connect c = { .established = net->qemu };
  gint64 t0;

  machine_call (bench, path, "Standby");
  expect_state (bench, path, "Standby", "Standby");
  t0 = bench_now ();
  connect_port (net, &c);
  if (c.failure)
    bench_fail (bench, "#14: %s (daemon state: the machine is on standby)", c.failure);
  if (net->qemu)
    {
      wait_running (bench, path, WAKE_TIMEOUT_S,
                    "a connection was established to its published port");
      return c.us;
    }
  wait_running (bench, path, WAKE_TIMEOUT_S, "a connection to its published port");
  t0 = bench_now () - t0;
  close (c.fd);
  return (double) t0;
}

static void
measure_wake (Net *net)
{
  Bench *bench = net->bench;
  guint runs = bench->smoke ? 1 : WAKE_RUNS;
  g_autofree char *ports = g_strdup_printf ("\"ports\":[{\"host_port\":%d,\"guest_port\":80}],"
                                            WWW_WORKLOAD, HOST_PORT);
  g_autofree char *name = g_strdup_printf ("bench-w%05u", ++bench->machine_seq);
  g_autofree char *spec = machine_spec (net, name, NETWORK, ports);
  g_autofree char *path = create (bench, spec, MV_CREATE_START);
  g_autoptr (BenchSamples) woken = bench_samples_new ();
  g_autoptr (BenchSamples) started = bench_samples_new ();

  expect_state (bench, path, "Running", "CreateMachine with CREATE_START");
  if (net->qemu)
    {
      /* The published port leads to the guest's httpd before anything is
       * timed; then one wake of each kind not counted. */
      Connect c = { .established = TRUE, .get = TRUE };
      gint64 deadline = bench_now () + RUNNING_TIMEOUT_S * G_USEC_PER_SEC;

      for (;;)
        {
          g_clear_pointer (&c.failure, g_free);
          connect_port (net, &c);
          if (!c.failure)
            break;
          if (c.fd >= 0)
            close (c.fd);
          if (bench_now () > deadline)
            bench_fail (bench, "#14: the guest's httpd is not reached: %s", c.failure);
          g_usleep (250 * 1000);
        }
      start_alone (net, path);
      connect_woken (net, path);
    }
  for (guint i = 0; i < runs; i++)
    {
      gboolean connect_first = i % 2 == 0;

      if (connect_first)
        bench_samples_add (woken, connect_woken (net, path));
      bench_samples_add (started, start_alone (net, path));
      if (!connect_first)
        bench_samples_add (woken, connect_woken (net, path));
      g_print ("[14] run %u of %u: %.0f ms connect on standby, %.0f ms Start alone\n", i + 1,
               runs, g_array_index (woken->values, double, i) / 1e3,
               g_array_index (started->values, double, i) / 1e3);
    }
  delete_forced (bench, path);
  if (net->qemu)
    add (bench, "14", "14-wake",
         "connect() to a published port of a machine on standby → connection established "
         "(QEMU TCG, httpd in the guest)",
         g_steal_pointer (&woken), "Standby → Running through Machine.Start alone, same machine",
         g_steal_pointer (&started),
         "a non-blocking connect() to the gateway's port 8080 (DNAT to the guest's port 80) "
         "from a thread in the daemon's namespace, polled for writability, SO_ERROR checked; "
         "the machine put on standby before every run of either side, runs alternating; the "
         "SYN that wakes the machine is let through to its TAP, and when the restored guest "
         "does not answer it the client's kernel sends it again, so runs fall near 0.3 s, 1 s "
         "or 2 s; one wake of each kind not counted first");
  else
    add (bench, "14", "14-wake",
         "connect() to a published port of a machine on standby → the machine Running "
         "(test runtime, smoke)",
         g_steal_pointer (&woken), "Standby → Running through Machine.Start alone, same machine",
         g_steal_pointer (&started), "the test runtime: nothing answers the connection");
}

/* ---- the rows ---- */

/* Why the rows cannot be measured, or NULL. */
static char *
skip_reason (Bench *bench)
{
  g_autofree char *nm = g_find_program_in_path ("NetworkManager");
  g_autofree char *qemu = g_find_program_in_path ("qemu-system-x86_64");
  g_autofree char *kernel = NULL, *initramfs = NULL;

  if (!nm)
    return g_strdup ("NetworkManager is not installed");
  if (bench->smoke)
    return NULL;
  if (!qemu)
    return g_strdup ("qemu-system-x86_64 is not installed");
  if (!bench->agent_guest_dir || !bench->rootfs)
    return g_strdup ("no agent guest given (build guest-image and test-rootfs, then "
                     "--agent-guest-dir BUILD/guest --rootfs BUILD/tests/guest/rootfs.ext4)");
  kernel = g_build_filename (bench->agent_guest_dir, "vmlinuz", NULL);
  initramfs = g_build_filename (bench->agent_guest_dir, "initramfs.img", NULL);
  if (!g_file_test (kernel, G_FILE_TEST_EXISTS) || !g_file_test (initramfs, G_FILE_TEST_EXISTS) ||
      !g_file_test (bench->rootfs, G_FILE_TEST_EXISTS))
    return g_strdup_printf ("the agent guest is missing (%s, %s, %s)", kernel, initramfs,
                            bench->rootfs);
  return NULL;
}

static char *
create_network (Bench *bench)
{
  g_autoptr (sd_bus_message) reply = bench_call (bench, bench->bus, MV_BUS_NAME, MV_MANAGER_PATH,
                                                 MV_MANAGER_IFACE, "CreateNetwork", "s",
                                                 "{\"name\":\"" NETWORK "\",\"subnet\":\"" SUBNET "\"}");
  const char *path = NULL;

  if (sd_bus_message_read (reply, "o", &path) < 0)
    bench_fail (bench, "CreateNetwork returned no path");
  return g_strdup (path);
}

void
bench_rows_network (Bench *bench, gboolean attach, gboolean wake)
{
  g_autofree char *reason = skip_reason (bench);
  g_autofree char *netns_path = NULL, *network = NULL, *config = NULL;
  Net net = { .bench = bench, .qemu = !bench->smoke };

  if (reason)
    {
      if (attach)
        bench_result_print (bench_report_add_not_measured (bench->report, "13", "13-attach",
                                                           "create→Running on a network", reason));
      if (wake)
        bench_result_print (bench_report_add_not_measured (bench->report, "14", "14-wake",
                                                           "connect() waking a machine on standby",
                                                           reason));
      return;
    }

  if (net.qemu)
    {
      g_autofree char *kernel = g_build_filename (bench->agent_guest_dir, "vmlinuz", NULL);
      g_autofree char *initramfs = g_build_filename (bench->agent_guest_dir, "initramfs.img", NULL);

      config = g_strdup_printf ("# rows 13 and 14: networks, microvmd's guest under TCG\n"
                                "[qemu]\naccel=tcg\n[guest]\nkernel=%s\ninitramfs=%s\n",
                                kernel, initramfs);
    }
  else
    config = g_strdup ("# rows 13 and 14: networks, the test runtime\n");

  net.netns = mv_test_netns_new (bench->env);
  netns_path = g_build_filename ("/run/netns", mv_test_netns_name (net.netns), NULL);
  net.netns_fd = open (netns_path, O_RDONLY | O_CLOEXEC);
  if (net.netns_fd < 0)
    bench_fail (bench, "cannot open %s: %s", netns_path, g_strerror (errno));
  mv_test_env_write_config (bench->env, config);
  bench->daemon_netns = g_strdup (mv_test_netns_name (net.netns));
  bench_daemon_start (bench);

  network = create_network (bench);
  net.gateway = bench_get_string (bench, bench->bus, MV_BUS_NAME, network, MV_NETWORK_IFACE,
                                  "Gateway");
  if (attach)
    measure_attach (&net);
  if (wake)
    measure_wake (&net);

  {
    g_autoptr (sd_bus_message) reply = bench_call (bench, bench->bus, MV_BUS_NAME, network,
                                                   MV_NETWORK_IFACE, "Delete", NULL);
  }
  /* The daemon first: it is a client of NetworkManager's. */
  bench_daemon_stop (bench);
  g_clear_pointer (&bench->daemon_netns, g_free);
  close (net.netns_fd);
  mv_test_netns_free (net.netns);
  bench_clear_state (bench);
  mv_test_env_write_config (bench->env, BENCH_BASE_CONFIG);
  g_free (net.gateway);
}
