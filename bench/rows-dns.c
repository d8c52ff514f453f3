/* #12: the DNS server on a network's gateway. One entry:
 *
 *   12-query   a UDP query for A web.microvm. (a name the server answers
 *              from its lookup) → its answer, sent and read by a thread
 *              of the benchmark's on one connected socket, to microvmd's
 *              server (network/dns.h, MvDns driven by the benchmark's
 *              main thread on a main context of its own, as the daemon's
 *              main loop would) against dnsmasq answering the same name
 *              (--address=/web.microvm/…) in the same namespace; runs
 *              alternate between the two, after a warm-up of each.
 *
 * The row runs in a network namespace of its own, entered by the calling
 * thread alone and left again at the end (the rest of the benchmark and
 * its threads stay where they were): lo up, and a bridge holding both
 * servers' addresses, 10.77.0.1 (MvDns) and 10.77.0.2 (dnsmasq), each on
 * port 53. The daemon is not involved. */
#include "bench.h"

#include "network/dns.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define ROW           "12"
#define RUNS          4000
#define SMOKE_RUNS    100
#define WARMUP        200
#define BRIDGE        "mvbdns0"
#define MVDNS_ADDR    0x0a4d0001   /* 10.77.0.1 */
#define DNSMASQ_ADDR  0x0a4d0002   /* 10.77.0.2 */
#define MACHINE_ADDR  "10.77.0.5"
#define NETWORK       "bench"
#define CLIENT_TIMEOUT_S 5

/* web.microvm. IN A, recursion desired; the ID goes in the first two bytes. */
static const guint8 web_query[] = {
  0x00, 0x00, 0x01, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
  3, 'w', 'e', 'b', 7, 'm', 'i', 'c', 'r', 'o', 'v', 'm', 0,
  0x00, 0x01, 0x00, 0x01,
};

typedef struct {
  Bench        *bench;
  GMainContext *context;
  guint         runs;
  BenchSamples *mvdns;
  BenchSamples *dnsmasq;
  char         *failure;   /* what went wrong in the client, or NULL */
  gint          done;
} Dns;

static GPtrArray *
lookup_host (const char *network_id, const char *name, gpointer data)
{
  GPtrArray *array = g_ptr_array_new_with_free_func (g_free);

  if (g_str_equal (name, "web"))
    g_ptr_array_add (array, g_strdup (MACHINE_ADDR));
  return array;
}

static GPtrArray *
lookup_addr (const char *network_id, guint32 address, gpointer data)
{
  return NULL;
}

static void
run_ip (Bench *bench, const char *const *argv)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *err = NULL;
  int status = 0;

  if (!g_spawn_sync (NULL, (char **) argv, NULL,
                     G_SPAWN_SEARCH_PATH | G_SPAWN_STDOUT_TO_DEV_NULL, NULL, NULL, NULL, &err,
                     &status, &error))
    bench_fail (bench, "cannot run ip: %s", error->message);
  if (!g_spawn_check_wait_status (status, NULL))
    bench_fail (bench, "ip %s %s failed: %s", argv[1], argv[2], err);
}

static int
client_socket (guint32 address)
{
  struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons (53),
                             .sin_addr.s_addr = htonl (address) };
  struct timeval tv = { .tv_sec = CLIENT_TIMEOUT_S };
  int fd = socket (AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

  if (fd < 0 || setsockopt (fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) < 0 ||
      connect (fd, (struct sockaddr *) &sin, sizeof sin) < 0)
    {
      if (fd >= 0)
        close (fd);
      return -1;
    }
  return fd;
}

/* One query → answer on @fd: µs, or a negative number when the answer did
 * not come or is not one A record for the query's ID. */
static double
round_trip (int fd, guint16 id)
{
  guint8 q[sizeof web_query];
  guint8 answer[512];
  gint64 t0, t1;
  ssize_t n;

  memcpy (q, web_query, sizeof q);
  q[0] = id >> 8;
  q[1] = id & 0xff;
  t0 = bench_now ();
  if (send (fd, q, sizeof q, 0) != sizeof q)
    return -1;
  do
    n = recv (fd, answer, sizeof answer, 0);
  while (n >= 2 && (answer[0] != q[0] || answer[1] != q[1]));
  t1 = bench_now ();
  /* A response, NOERROR, one question, one answer. */
  if (n < 12 || !(answer[2] & 0x80) || (answer[3] & 0x0f) != 0 || answer[5] != 1 ||
      answer[6] != 0 || answer[7] != 1)
    return -1;
  return (double) (t1 - t0);
}

static gpointer
client_thread (gpointer data)
{
  Dns *d = data;
  int mvdns = client_socket (MVDNS_ADDR);
  int dnsmasq = client_socket (DNSMASQ_ADDR);

  if (mvdns < 0 || dnsmasq < 0)
    d->failure = g_strdup_printf ("cannot open the client's sockets: %s", g_strerror (errno));
  for (guint i = 0; !d->failure && i < WARMUP + d->runs; i++)
    {
      /* Alternate which goes first, so that neither always follows the other. */
      gboolean mvdns_first = i % 2 == 0;
      double a, b;

      if (mvdns_first)
        {
          a = round_trip (mvdns, (guint16) (2 * i));
          b = round_trip (dnsmasq, (guint16) (2 * i + 1));
        }
      else
        {
          b = round_trip (dnsmasq, (guint16) (2 * i + 1));
          a = round_trip (mvdns, (guint16) (2 * i));
        }
      if (a < 0 || b < 0)
        d->failure = g_strdup_printf ("run %u: %s did not answer web.microvm. as expected", i,
                                      a < 0 ? "microvmd's server" : "dnsmasq");
      else if (i >= WARMUP)
        {
          bench_samples_add (d->mvdns, a);
          bench_samples_add (d->dnsmasq, b);
        }
    }
  if (mvdns >= 0)
    close (mvdns);
  if (dnsmasq >= 0)
    close (dnsmasq);
  g_atomic_int_set (&d->done, 1);
  g_main_context_wakeup (d->context);
  return NULL;
}

static GPid
start_dnsmasq (Bench *bench)
{
  const char *argv[] = { "dnsmasq", "--no-daemon", "--no-resolv", "--no-hosts",
                         "--conf-file=/dev/null", "--pid-file=", "--user=root", "--port=53",
                         "--listen-address=10.77.0.2", "--bind-interfaces",
                         "--address=/web.microvm/" MACHINE_ADDR, NULL };
  g_autoptr (GError) error = NULL;
  GPid pid = 0;
  int fd;

  if (!g_spawn_async (NULL, (char **) argv, NULL,
                      G_SPAWN_SEARCH_PATH | G_SPAWN_DO_NOT_REAP_CHILD |
                      G_SPAWN_STDOUT_TO_DEV_NULL | G_SPAWN_STDERR_TO_DEV_NULL,
                      NULL, NULL, &pid, &error))
    bench_fail (bench, "cannot start dnsmasq: %s", error->message);
  /* Ready once it answers. */
  fd = client_socket (DNSMASQ_ADDR);
  if (fd < 0)
    bench_fail (bench, "cannot open a socket: %s", g_strerror (errno));
  {
    struct timeval tv = { .tv_usec = 100000 };
    setsockopt (fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  for (guint i = 0; i < 100; i++)
    {
      if (round_trip (fd, (guint16) i) >= 0)
        {
          close (fd);
          return pid;
        }
      g_usleep (100000);
    }
  bench_fail (bench, "dnsmasq did not answer on 10.77.0.2 port 53 within 20 s");
}

void
bench_row_dns (Bench *bench)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *dnsmasq = g_find_program_in_path ("dnsmasq");
  MvDnsOptions options = { .domain = "microvm" };
  Dns d = { .bench = bench, .runs = bench->smoke ? SMOKE_RUNS : RUNS };
  BenchResult *r;
  GThread *thread;
  MvDns *dns;
  GPid pid;
  int home;

  if (!dnsmasq)
    {
      bench_result_print (bench_report_add_not_measured (bench->report, ROW, "12-query",
                                                         "DNS query round trip (UDP)",
                                                         "dnsmasq is not installed"));
      return;
    }

  /* This thread alone moves: namespaces belong to threads. */
  home = open ("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
  if (home < 0 || unshare (CLONE_NEWNET) < 0)
    bench_fail (bench, "cannot enter a network namespace of the row's own: %s", g_strerror (errno));
  run_ip (bench, (const char *const[]) { "ip", "link", "set", "lo", "up", NULL });
  run_ip (bench, (const char *const[]) { "ip", "link", "add", BRIDGE, "type", "bridge", NULL });
  run_ip (bench, (const char *const[]) { "ip", "addr", "add", "10.77.0.1/24", "dev", BRIDGE, NULL });
  run_ip (bench, (const char *const[]) { "ip", "addr", "add", "10.77.0.2/24", "dev", BRIDGE, NULL });
  run_ip (bench, (const char *const[]) { "ip", "link", "set", BRIDGE, "up", NULL });

  d.context = g_main_context_new ();
  g_main_context_push_thread_default (d.context);
  dns = mv_dns_new (&options, lookup_host, lookup_addr, NULL);
  if (!mv_dns_serve (dns, NETWORK, MVDNS_ADDR, 53, &error))
    bench_fail (bench, "MvDns cannot serve: %s", error->message);
  pid = start_dnsmasq (bench);

  d.mvdns = bench_samples_new ();
  d.dnsmasq = bench_samples_new ();
  thread = g_thread_new ("dns-client", client_thread, &d);
  while (!g_atomic_int_get (&d.done))
    g_main_context_iteration (d.context, TRUE);
  g_thread_join (thread);

  kill (pid, SIGTERM);
  waitpid (pid, NULL, 0);
  mv_dns_free (dns);
  g_main_context_pop_thread_default (d.context);
  g_main_context_unref (d.context);
  if (setns (home, CLONE_NEWNET) < 0)
    bench_fail (bench, "cannot go back to the benchmark's network namespace: %s",
                g_strerror (errno));
  close (home);
  if (d.failure)
    bench_fail (bench, "#12: %s", d.failure);

  {
    g_autofree char *note = g_strdup_printf (
      "runs alternate, after %u of each not counted; client, MvDns (on the benchmark's main "
      "thread) and dnsmasq share the machine's cores; spread (min–max, µs): figure %.0f–%.0f, "
      "baseline %.0f–%.0f", WARMUP,
      bench_samples_percentile (d.mvdns, 0.001), bench_samples_percentile (d.mvdns, 100),
      bench_samples_percentile (d.dnsmasq, 0.001), bench_samples_percentile (d.dnsmasq, 100));

    r = bench_report_add (bench->report, ROW, "12-query",
                          "DNS query round trip (UDP, a name the server answers)", "µs", -1,
                          d.mvdns, "dnsmasq answering the same name in the same namespace",
                          d.dnsmasq);
    bench_result_set_note (r, note);
    bench_result_print (r);
  }
}
