/* MvDns in a network namespace of the test's own: lo up and 10.77.0.1/24
 * on a bridge (a network's gateway is one; these machines' kernel has no
 * dummy devices), the server on the gateway's port 53, a real dnsmasq on
 * 127.0.0.1 as its upstream. Queries are made with ldns from a
 * thread of the test's while the main thread runs the server's main loop. */
#include "network/dns.h"
#include "core/errors.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ldns/ldns.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define GATEWAY        0x0a4d0001  /* 10.77.0.1 */
#define GATEWAY_TEXT   "10.77.0.1"
#define PORT           53
#define NETWORK        "net-1"
#define DOMAIN         "microvm"
#define DNSMASQ_PORT   5390
#define DNSMASQ        "127.0.0.1:5390"
/* Nothing listens there. */
#define SILENT         "127.0.0.1:5391"
#define CLIENT_TIMEOUT_S 5

static GPid dnsmasq_pid;

/* ----- the lookups: two machines on NETWORK ----- */

static GPtrArray *
strings (const char *first, ...)
{
  GPtrArray *array = g_ptr_array_new_with_free_func (g_free);
  va_list ap;

  va_start (ap, first);
  for (const char *s = first; s; s = va_arg (ap, const char *))
    g_ptr_array_add (array, g_strdup (s));
  va_end (ap);
  return array;
}

static GPtrArray *
lookup_host (const char *network_id, const char *name, gpointer data)
{
  /* The server folds case itself: the lookup compares exactly. */
  if (!g_str_equal (network_id, NETWORK))
    return NULL;
  if (g_str_equal (name, "web"))
    return strings ("10.77.0.5", NULL);
  if (g_str_equal (name, "db"))
    return strings ("10.77.0.6", "10.77.0.7", NULL);
  return NULL;
}

static GPtrArray *
lookup_addr (const char *network_id, guint32 address, gpointer data)
{
  if (g_str_equal (network_id, NETWORK) && address == 0x0a4d0005)
    return strings ("web", NULL);
  return NULL;
}

static MvDns *
dns_new (const char *const *upstreams, guint timeout_ms)
{
  MvDnsOptions options = { .domain = DOMAIN, .upstreams = upstreams,
                           .upstream_timeout_ms = timeout_ms };
  g_autoptr (GError) error = NULL;
  MvDns *dns = mv_dns_new (&options, lookup_host, lookup_addr, NULL);

  g_assert_nonnull (dns);
  g_assert_true (mv_dns_serve (dns, NETWORK, GATEWAY, PORT, &error));
  g_assert_no_error (error);
  return dns;
}

/* ----- a client in a thread ----- */

typedef struct {
  gboolean     tcp;
  gboolean     half_close; /* TCP: shut the sending side after the queries */
  GPtrArray   *queries;   /* GBytes, sent at once */
  guint        expect;    /* answers to read */
  GPtrArray   *answers;   /* GBytes */
  gint         done;
} Exchange;

static int
client_socket (gboolean tcp)
{
  struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons (PORT),
                             .sin_addr.s_addr = htonl (GATEWAY) };
  struct timeval tv = { .tv_sec = CLIENT_TIMEOUT_S };
  int fd = socket (AF_INET, tcp ? SOCK_STREAM : SOCK_DGRAM, 0);

  g_assert_cmpint (fd, >=, 0);
  g_assert_cmpint (setsockopt (fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv), ==, 0);
  g_assert_cmpint (connect (fd, (struct sockaddr *) &sin, sizeof sin), ==, 0);
  return fd;
}

static gboolean
read_all (int fd, guint8 *buf, gsize len)
{
  gsize at = 0;

  while (at < len)
    {
      ssize_t n = recv (fd, buf + at, len - at, 0);

      if (n <= 0)
        return FALSE;
      at += n;
    }
  return TRUE;
}

static gpointer
exchange_thread (gpointer data)
{
  Exchange *ex = data;
  int fd = client_socket (ex->tcp);

  for (guint i = 0; i < ex->queries->len; i++)
    {
      gsize size = 0;
      const guint8 *q = g_bytes_get_data (g_ptr_array_index (ex->queries, i), &size);

      if (ex->tcp)
        {
          guint8 prefix[2] = { size >> 8, size & 0xff };
          g_assert_cmpint (send (fd, prefix, 2, MSG_NOSIGNAL), ==, 2);
        }
      g_assert_cmpint (send (fd, q, size, MSG_NOSIGNAL), ==, (gssize) size);
    }
  if (ex->half_close)
    g_assert_cmpint (shutdown (fd, SHUT_WR), ==, 0);
  for (guint i = 0; i < ex->expect; i++)
    {
      guint8 *buf = g_malloc (65536);
      ssize_t n;

      if (ex->tcp)
        {
          guint8 prefix[2];

          n = read_all (fd, prefix, 2) ? (prefix[0] << 8) | prefix[1] : -1;
          if (n >= 0 && !read_all (fd, buf, n))
            n = -1;
        }
      else
        n = recv (fd, buf, 65536, 0);
      if (n < 0)
        {
          g_free (buf);
          break;
        }
      g_ptr_array_add (ex->answers, g_bytes_new_take (buf, n));
    }
  close (fd);
  g_atomic_int_set (&ex->done, 1);
  g_main_context_wakeup (NULL);
  return NULL;
}

/* Sends @queries (GBytes) to the server and returns up to @expect answers,
 * fewer when the server sends no more within CLIENT_TIMEOUT_S. */
static GPtrArray *
exchange_full (GPtrArray *queries, gboolean tcp, gboolean half_close, guint expect)
{
  Exchange ex = { .tcp = tcp, .half_close = half_close, .queries = queries, .expect = expect,
                  .answers = g_ptr_array_new_with_free_func ((GDestroyNotify) g_bytes_unref) };
  GThread *thread = g_thread_new ("client", exchange_thread, &ex);

  while (!g_atomic_int_get (&ex.done))
    g_main_context_iteration (NULL, TRUE);
  g_thread_join (thread);
  return ex.answers;
}

static GPtrArray *
exchange (GPtrArray *queries, gboolean tcp, guint expect)
{
  return exchange_full (queries, tcp, FALSE, expect);
}

static GBytes *
query_wire (const char *name, ldns_rr_type type, guint16 id)
{
  ldns_pkt *pkt = NULL;
  guint8 *wire = NULL;
  size_t size = 0;
  GBytes *bytes;

  g_assert_cmpint (ldns_pkt_query_new_frm_str (&pkt, name, type, LDNS_RR_CLASS_IN, LDNS_RD), ==,
                   LDNS_STATUS_OK);
  ldns_pkt_set_id (pkt, id);
  g_assert_cmpint (ldns_pkt2wire (&wire, pkt, &size), ==, LDNS_STATUS_OK);
  bytes = g_bytes_new (wire, size);
  free (wire);
  ldns_pkt_free (pkt);
  return bytes;
}

static ldns_pkt *
parse (GBytes *answer)
{
  gsize size = 0;
  const guint8 *data = g_bytes_get_data (answer, &size);
  ldns_pkt *pkt = NULL;

  g_assert_cmpint (ldns_wire2pkt (&pkt, data, size), ==, LDNS_STATUS_OK);
  return pkt;
}

/* One query, one answer, with the query's ID and question. */
static ldns_pkt *
query_full (const char *name, ldns_rr_type type, gboolean tcp)
{
  guint16 id = (guint16) g_random_int ();
  g_autoptr (GPtrArray) queries = g_ptr_array_new_with_free_func ((GDestroyNotify) g_bytes_unref);
  g_autoptr (GPtrArray) answers = NULL;
  ldns_pkt *pkt;
  ldns_rr *q;
  char *owner;

  g_ptr_array_add (queries, query_wire (name, type, id));
  answers = exchange (queries, tcp, 1);
  g_assert_cmpuint (answers->len, ==, 1);
  pkt = parse (g_ptr_array_index (answers, 0));
  g_assert_cmpuint (ldns_pkt_id (pkt), ==, id);
  g_assert_true (ldns_pkt_qr (pkt));
  g_assert_cmpuint (ldns_pkt_qdcount (pkt), ==, 1);
  q = ldns_rr_list_rr (ldns_pkt_question (pkt), 0);
  owner = ldns_rdf2str (ldns_rr_owner (q));
  g_assert_true (g_str_has_prefix (owner, name));
  free (owner);
  g_assert_cmpint (ldns_rr_get_type (q), ==, type);
  return pkt;
}

static ldns_pkt *
query (const char *name, ldns_rr_type type)
{
  return query_full (name, type, FALSE);
}

static int
compare_lines (gconstpointer a, gconstpointer b)
{
  return strcmp (*(char *const *) a, *(char *const *) b);
}

/* The answer section as "OWNER TTL TYPE RDATA" lines, sorted. */
static char *
answers_text (const ldns_pkt *pkt)
{
  const ldns_rr_list *list = ldns_pkt_answer (pkt);
  g_autoptr (GPtrArray) lines = g_ptr_array_new_with_free_func (g_free);

  for (size_t i = 0; i < ldns_rr_list_rr_count (list); i++)
    {
      const ldns_rr *rr = ldns_rr_list_rr (list, i);
      char *owner = ldns_rdf2str (ldns_rr_owner (rr));
      char *rdata = ldns_rdf2str (ldns_rr_rdf (rr, 0));
      char *type = ldns_rr_type2str (ldns_rr_get_type (rr));

      g_ptr_array_add (lines, g_strdup_printf ("%s %u %s %s", owner, ldns_rr_ttl (rr), type, rdata));
      free (owner);
      free (rdata);
      free (type);
    }
  g_ptr_array_sort (lines, compare_lines);
  g_ptr_array_add (lines, NULL);
  return g_strjoinv ("\n", (char **) lines->pdata);
}

#define assert_answers(pkt, rcode, aa, text)                                  \
  G_STMT_START {                                                              \
    g_autofree char *got_ = answers_text (pkt);                               \
    g_assert_cmpint (ldns_pkt_get_rcode (pkt), ==, (rcode));                  \
    g_assert_cmpint (ldns_pkt_aa (pkt), ==, (aa));                            \
    g_assert_cmpstr (got_, ==, (text));                                       \
  } G_STMT_END

/* ----- dnsmasq ----- */

static void
start_dnsmasq (void)
{
  const char *argv[] = { "dnsmasq", "--no-daemon", "--no-resolv", "--no-hosts",
                         "--conf-file=/dev/null", "--pid-file=", "--user=root",
                         "--port=5390", "--listen-address=127.0.0.1", "--bind-interfaces",
                         "--address=/ext.test/192.0.2.7",
                         "--ptr-record=9.0.77.10.in-addr.arpa,other.ext.test",
                         /* Were a name under the domain forwarded, this would answer it. */
                         "--address=/" DOMAIN "/192.0.2.99", NULL };
  g_autoptr (GError) error = NULL;
  struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons (DNSMASQ_PORT),
                             .sin_addr.s_addr = htonl (INADDR_LOOPBACK) };
  struct timeval tv = { .tv_usec = 100000 };
  g_autoptr (GBytes) q = query_wire ("probe.ext.test.", LDNS_RR_TYPE_A, 1);
  int fd;

  g_assert_true (g_spawn_async (NULL, (char **) argv, NULL,
                                G_SPAWN_SEARCH_PATH | G_SPAWN_DO_NOT_REAP_CHILD |
                                G_SPAWN_STDOUT_TO_DEV_NULL | G_SPAWN_STDERR_TO_DEV_NULL,
                                NULL, NULL, &dnsmasq_pid, &error));
  g_assert_no_error (error);
  fd = socket (AF_INET, SOCK_DGRAM, 0);
  setsockopt (fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  g_assert_cmpint (connect (fd, (struct sockaddr *) &sin, sizeof sin), ==, 0);
  for (guint i = 0; i < 100; i++)
    {
      guint8 buf[512];
      gsize size = 0;
      const guint8 *data = g_bytes_get_data (q, &size);

      send (fd, data, size, 0);
      if (recv (fd, buf, sizeof buf, 0) > 0)
        {
          close (fd);
          return;
        }
      /* Refused before it listens: that comes back at once. */
      g_usleep (100000);
    }
  g_error ("dnsmasq did not answer on " DNSMASQ " within 10 s");
}

static void
stop_dnsmasq (void)
{
  if (dnsmasq_pid > 0)
    {
      kill (dnsmasq_pid, SIGTERM);
      waitpid (dnsmasq_pid, NULL, 0);
      dnsmasq_pid = 0;
    }
}

/* ----- the tests ----- */

static void
test_machine_names (void)
{
  g_autoptr (MvDns) dns = dns_new (NULL, 0);
  ldns_pkt *pkt;

  pkt = query ("web.", LDNS_RR_TYPE_A);
  assert_answers (pkt, LDNS_RCODE_NOERROR, TRUE, "web. 5 A 10.77.0.5");
  ldns_pkt_free (pkt);

  pkt = query ("web.microvm.", LDNS_RR_TYPE_A);
  assert_answers (pkt, LDNS_RCODE_NOERROR, TRUE, "web.microvm. 5 A 10.77.0.5");
  ldns_pkt_free (pkt);

  /* Compared without regard to case, answered as asked. */
  pkt = query ("WeB.MicroVM.", LDNS_RR_TYPE_A);
  assert_answers (pkt, LDNS_RCODE_NOERROR, TRUE, "WeB.MicroVM. 5 A 10.77.0.5");
  ldns_pkt_free (pkt);

  pkt = query ("db.microvm.", LDNS_RR_TYPE_A);
  assert_answers (pkt, LDNS_RCODE_NOERROR, TRUE,
                  "db.microvm. 5 A 10.77.0.6\ndb.microvm. 5 A 10.77.0.7");
  ldns_pkt_free (pkt);

  pkt = query ("5.0.77.10.in-addr.arpa.", LDNS_RR_TYPE_PTR);
  assert_answers (pkt, LDNS_RCODE_NOERROR, TRUE, "5.0.77.10.in-addr.arpa. 5 PTR web.microvm.");
  ldns_pkt_free (pkt);
}

static void
test_unknown_and_nodata (void)
{
  const char *const upstreams[] = { DNSMASQ, NULL };
  g_autoptr (MvDns) dns = dns_new (upstreams, 1000);
  const char *const unknown[] = { "nobody.microvm.", "nobody.", "a.web.microvm.", "NoBody.MICROVM." };
  ldns_pkt *pkt;

  /* dnsmasq answers everything under the domain: a forwarded one would
   * come back as 192.0.2.99. */
  for (guint i = 0; i < G_N_ELEMENTS (unknown); i++)
    {
      pkt = query (unknown[i], LDNS_RR_TYPE_A);
      assert_answers (pkt, LDNS_RCODE_NXDOMAIN, TRUE, "");
      ldns_pkt_free (pkt);
    }

  pkt = query ("web.microvm.", LDNS_RR_TYPE_AAAA);
  assert_answers (pkt, LDNS_RCODE_NOERROR, TRUE, "");
  ldns_pkt_free (pkt);
  pkt = query ("web.", LDNS_RR_TYPE_MX);
  assert_answers (pkt, LDNS_RCODE_NOERROR, TRUE, "");
  ldns_pkt_free (pkt);
  /* The domain itself exists and has nothing. */
  pkt = query ("microvm.", LDNS_RR_TYPE_A);
  assert_answers (pkt, LDNS_RCODE_NOERROR, TRUE, "");
  ldns_pkt_free (pkt);
  g_assert_cmpuint (mv_dns_get_forwards (dns), ==, 0);
}

static void
test_forward (void)
{
  /* Two upstreams that do not answer before the one that does. */
  const char *const upstreams[] = { SILENT, SILENT, DNSMASQ, NULL };
  g_autoptr (MvDns) dns = dns_new (upstreams, 200);
  gint64 t0 = g_get_monotonic_time ();
  ldns_pkt *pkt;

  pkt = query ("host.ext.test.", LDNS_RR_TYPE_A);
  g_assert_cmpint (g_get_monotonic_time () - t0, >=, 400 * 1000);
  g_assert_cmpint (ldns_pkt_get_rcode (pkt), ==, LDNS_RCODE_NOERROR);
  {
    g_autofree char *got = answers_text (pkt);
    g_assert_true (g_str_has_suffix (got, " A 192.0.2.7"));
  }
  ldns_pkt_free (pkt);
  g_assert_cmpuint (mv_dns_get_forwards (dns), ==, 0);

  /* An address the lookup does not know is forwarded too. */
  pkt = query ("9.0.77.10.in-addr.arpa.", LDNS_RR_TYPE_PTR);
  {
    g_autofree char *got = answers_text (pkt);
    g_assert_true (g_str_has_suffix (got, " PTR other.ext.test."));
  }
  ldns_pkt_free (pkt);
}

static void
test_servfail (void)
{
  const char *const upstreams[] = { SILENT, NULL };
  g_autoptr (MvDns) dns = dns_new (upstreams, 300);
  gint64 t0 = g_get_monotonic_time ();
  ldns_pkt *pkt = query ("host.ext.test.", LDNS_RR_TYPE_A);
  gint64 took = g_get_monotonic_time () - t0;

  assert_answers (pkt, LDNS_RCODE_SERVFAIL, FALSE, "");
  g_assert_cmpint (took, >=, 300 * 1000);
  g_assert_cmpint (took, <, 3 * G_USEC_PER_SEC);
  ldns_pkt_free (pkt);
  g_assert_cmpuint (mv_dns_get_forwards (dns), ==, 0);
}

static void
test_refused (void)
{
  g_autoptr (MvDns) dns = dns_new (NULL, 0);
  ldns_pkt *pkt = query ("example.com.", LDNS_RR_TYPE_A);

  assert_answers (pkt, LDNS_RCODE_REFUSED, FALSE, "");
  ldns_pkt_free (pkt);
}

static void
test_tcp (void)
{
  const char *const upstreams[] = { DNSMASQ, NULL };
  g_autoptr (MvDns) dns = dns_new (upstreams, 1000);
  g_autoptr (GPtrArray) queries = g_ptr_array_new_with_free_func ((GDestroyNotify) g_bytes_unref);
  g_autoptr (GPtrArray) answers = NULL;
  ldns_pkt *pkt;
  gboolean seen_local = FALSE, seen_forwarded = FALSE;

  pkt = query_full ("web.microvm.", LDNS_RR_TYPE_A, TRUE);
  assert_answers (pkt, LDNS_RCODE_NOERROR, TRUE, "web.microvm. 5 A 10.77.0.5");
  ldns_pkt_free (pkt);
  pkt = query_full ("host.ext.test.", LDNS_RR_TYPE_A, TRUE);
  g_assert_cmpint (ldns_pkt_get_rcode (pkt), ==, LDNS_RCODE_NOERROR);
  ldns_pkt_free (pkt);

  /* Two messages on one connection, one of them forwarded: both answered,
   * each with its ID. */
  g_ptr_array_add (queries, query_wire ("host.ext.test.", LDNS_RR_TYPE_A, 0x1111));
  g_ptr_array_add (queries, query_wire ("db.", LDNS_RR_TYPE_A, 0x2222));
  answers = exchange (queries, TRUE, 2);
  g_assert_cmpuint (answers->len, ==, 2);
  for (guint i = 0; i < 2; i++)
    {
      pkt = parse (g_ptr_array_index (answers, i));
      if (ldns_pkt_id (pkt) == 0x1111)
        {
          g_autofree char *got = answers_text (pkt);
          g_assert_true (g_str_has_suffix (got, " A 192.0.2.7"));
          seen_forwarded = TRUE;
        }
      else
        {
          g_assert_cmpuint (ldns_pkt_id (pkt), ==, 0x2222);
          g_assert_cmpuint (ldns_pkt_ancount (pkt), ==, 2);
          seen_local = TRUE;
        }
      ldns_pkt_free (pkt);
    }
  g_assert_true (seen_local && seen_forwarded);

  /* A client that shuts its side after asking still gets the answer that
   * has to come from the upstream. */
  g_ptr_array_set_size (queries, 0);
  g_ptr_array_add (queries, query_wire ("host.ext.test.", LDNS_RR_TYPE_A, 0x3333));
  g_clear_pointer (&answers, g_ptr_array_unref);
  answers = exchange_full (queries, TRUE, TRUE, 1);
  g_assert_cmpuint (answers->len, ==, 1);
  pkt = parse (g_ptr_array_index (answers, 0));
  g_assert_cmpuint (ldns_pkt_id (pkt), ==, 0x3333);
  g_assert_cmpuint (ldns_pkt_ancount (pkt), ==, 1);
  ldns_pkt_free (pkt);
}

static GBytes *
bytes_of (const char *data, gsize len)
{
  return g_bytes_new (data, len);
}

static void
test_malformed (void)
{
  g_autoptr (MvDns) dns = dns_new (NULL, 0);
  /* A header that promises a question and has none. */
  const char truncated[] = "\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00";
  g_autoptr (GPtrArray) queries = g_ptr_array_new_with_free_func ((GDestroyNotify) g_bytes_unref);
  g_autoptr (GPtrArray) answers = NULL;
  g_autoptr (GBytes) web = query_wire ("web.", LDNS_RR_TYPE_A, 0x4242);
  g_autofree guint8 *big = g_malloc0 (600);
  const guint8 *p;
  gsize size = 0;
  ldns_pkt *pkt;

  /* Too short for a header (dropped), a response (dropped), the header
   * without its question (FORMERR), then a real query. */
  g_ptr_array_add (queries, bytes_of ("\x01\x02\x03", 3));
  g_ptr_array_add (queries, bytes_of ("\x55\x55\x81\x80\x00\x00\x00\x00\x00\x00\x00\x00", 12));
  g_ptr_array_add (queries, bytes_of (truncated, 12));
  g_ptr_array_add (queries, g_bytes_ref (web));
  answers = exchange (queries, FALSE, 2);
  g_assert_cmpuint (answers->len, ==, 2);
  p = g_bytes_get_data (g_ptr_array_index (answers, 0), &size);
  g_assert_cmpuint (size, >=, 12);
  g_assert_cmpuint (p[0], ==, 0x12);
  g_assert_cmpuint (p[1], ==, 0x34);
  g_assert_cmpuint (p[3] & 0x0f, ==, LDNS_RCODE_FORMERR);
  pkt = parse (g_ptr_array_index (answers, 1));
  g_assert_cmpuint (ldns_pkt_id (pkt), ==, 0x4242);
  assert_answers (pkt, LDNS_RCODE_NOERROR, TRUE, "web. 5 A 10.77.0.5");
  ldns_pkt_free (pkt);

  /* Over 512 bytes on UDP: a valid query with padding after it. */
  p = g_bytes_get_data (web, &size);
  memcpy (big, p, size);
  g_ptr_array_set_size (queries, 0);
  g_ptr_array_add (queries, g_bytes_new (big, 600));
  g_clear_pointer (&answers, g_ptr_array_unref);
  answers = exchange (queries, FALSE, 1);
  g_assert_cmpuint (answers->len, ==, 1);
  p = g_bytes_get_data (g_ptr_array_index (answers, 0), &size);
  g_assert_cmpuint (p[3] & 0x0f, ==, LDNS_RCODE_REFUSED);

  /* A TCP message too short for a header closes the connection, and the
   * server goes on. */
  g_ptr_array_set_size (queries, 0);
  g_ptr_array_add (queries, bytes_of ("\x00\x01", 2));
  g_clear_pointer (&answers, g_ptr_array_unref);
  answers = exchange (queries, TRUE, 1);
  g_assert_cmpuint (answers->len, ==, 0);
  pkt = query_full ("web.", LDNS_RR_TYPE_A, TRUE);
  assert_answers (pkt, LDNS_RCODE_NOERROR, TRUE, "web. 5 A 10.77.0.5");
  ldns_pkt_free (pkt);
}

typedef struct {
  gint done;
  gint closed_past_limit;
  gint answered_within;
} Crowd;

/* MV_DNS_MAX_CONNECTIONS connections, then one more: that one is closed,
 * the first still answers. */
static gpointer
crowd_thread (gpointer data)
{
  Crowd *crowd = data;
  int fds[MV_DNS_MAX_CONNECTIONS + 1];
  g_autoptr (GBytes) q = query_wire ("web.", LDNS_RR_TYPE_A, 7);
  gsize size = 0;
  const guint8 *wire = g_bytes_get_data (q, &size);
  guint8 prefix[2] = { size >> 8, size & 0xff };
  guint8 buf[512];

  for (guint i = 0; i <= MV_DNS_MAX_CONNECTIONS; i++)
    {
      fds[i] = client_socket (TRUE);
      /* Accepted in order: the limit is reached with the last one. */
      g_usleep (20000);
    }
  crowd->closed_past_limit = recv (fds[MV_DNS_MAX_CONNECTIONS], buf, sizeof buf, 0) == 0;
  send (fds[0], prefix, 2, MSG_NOSIGNAL);
  send (fds[0], wire, size, MSG_NOSIGNAL);
  crowd->answered_within = read_all (fds[0], buf, 2) &&
                           read_all (fds[0], buf, (buf[0] << 8) | buf[1]);
  for (guint i = 0; i <= MV_DNS_MAX_CONNECTIONS; i++)
    close (fds[i]);
  g_atomic_int_set (&crowd->done, 1);
  g_main_context_wakeup (NULL);
  return NULL;
}

static void
test_tcp_limit (void)
{
  g_autoptr (MvDns) dns = dns_new (NULL, 0);
  Crowd crowd = { 0 };
  GThread *thread = g_thread_new ("crowd", crowd_thread, &crowd);

  while (!g_atomic_int_get (&crowd.done))
    g_main_context_iteration (NULL, TRUE);
  g_thread_join (thread);
  g_assert_true (crowd.closed_past_limit);
  g_assert_true (crowd.answered_within);
}

typedef struct {
  gint   done;
  gint64 closed_after; /* µs, or -1 when it was not closed */
} Idle;

static gpointer
idle_thread (gpointer data)
{
  Idle *idle = data;
  int fd = client_socket (TRUE);
  struct timeval tv = { .tv_sec = MV_DNS_IDLE_SECONDS + CLIENT_TIMEOUT_S };
  gint64 t0 = g_get_monotonic_time ();
  guint8 buf[16];

  setsockopt (fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  idle->closed_after = recv (fd, buf, sizeof buf, 0) == 0 ? g_get_monotonic_time () - t0 : -1;
  close (fd);
  g_atomic_int_set (&idle->done, 1);
  g_main_context_wakeup (NULL);
  return NULL;
}

static void
test_tcp_idle (void)
{
  g_autoptr (MvDns) dns = dns_new (NULL, 0);
  Idle idle = { 0 };
  GThread *thread = g_thread_new ("idle", idle_thread, &idle);

  while (!g_atomic_int_get (&idle.done))
    g_main_context_iteration (NULL, TRUE);
  g_thread_join (thread);
  g_assert_cmpint (idle.closed_after, >=, (MV_DNS_IDLE_SECONDS - 1) * G_USEC_PER_SEC);
  g_assert_cmpint (idle.closed_after, <, (MV_DNS_IDLE_SECONDS + 2) * G_USEC_PER_SEC);
}

static void
test_forward_limit (void)
{
  const char *const upstreams[] = { SILENT, NULL };
  g_autoptr (MvDns) dns = dns_new (upstreams, 5000);
  g_autoptr (GPtrArray) queries = g_ptr_array_new_with_free_func ((GDestroyNotify) g_bytes_unref);
  g_autoptr (GPtrArray) answers = NULL;
  ldns_pkt *pkt;

  for (guint i = 0; i <= MV_DNS_MAX_FORWARDS; i++)
    {
      g_autofree char *name = g_strdup_printf ("h%u.ext.test.", i);
      g_ptr_array_add (queries, query_wire (name, LDNS_RR_TYPE_A, 1000 + i));
    }
  /* Only the one past the limit is answered before the upstream's time. */
  answers = exchange (queries, FALSE, 1);
  g_assert_cmpuint (answers->len, ==, 1);
  pkt = parse (g_ptr_array_index (answers, 0));
  g_assert_cmpuint (ldns_pkt_id (pkt), ==, 1000 + MV_DNS_MAX_FORWARDS);
  g_assert_cmpint (ldns_pkt_get_rcode (pkt), ==, LDNS_RCODE_SERVFAIL);
  ldns_pkt_free (pkt);
  g_assert_cmpuint (mv_dns_get_forwards (dns), ==, MV_DNS_MAX_FORWARDS);
}

static void
test_serve_and_stop (void)
{
  g_autoptr (MvDns) dns = dns_new (NULL, 0);
  g_autoptr (GError) error = NULL;
  ldns_pkt *pkt;

  /* The same again changes nothing; another network cannot have the port. */
  g_assert_true (mv_dns_serve (dns, NETWORK, GATEWAY, PORT, &error));
  g_assert_no_error (error);
  g_assert_false (mv_dns_serve (dns, "net-2", GATEWAY, PORT, &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_FAILED);
  g_clear_error (&error);
  pkt = query ("web.", LDNS_RR_TYPE_A);
  assert_answers (pkt, LDNS_RCODE_NOERROR, TRUE, "web. 5 A 10.77.0.5");
  ldns_pkt_free (pkt);

  /* Stopped, the port is free: another network takes it, and is answered
   * as that network (the lookup knows no machines on it). */
  mv_dns_stop (dns, NETWORK);
  g_assert_true (mv_dns_serve (dns, "net-2", GATEWAY, PORT, &error));
  g_assert_no_error (error);
  pkt = query ("web.", LDNS_RR_TYPE_A);
  assert_answers (pkt, LDNS_RCODE_NXDOMAIN, TRUE, "");
  ldns_pkt_free (pkt);

  /* An address not on any interface yet (IP_FREEBIND). */
  g_assert_true (mv_dns_serve (dns, "net-3", 0x0a4e0001, PORT, &error));
  g_assert_no_error (error);
}

static void
test_host_upstreams (void)
{
  g_autofree char *path = NULL;
  g_auto (GStrv) got = NULL;
  g_auto (GStrv) none = NULL;
  const char *const exclude[] = { "10.77.0.1", NULL };
  int fd = g_file_open_tmp ("resolv-XXXXXX.conf", &path, NULL);

  g_assert_cmpint (fd, >=, 0);
  close (fd);
  g_assert_true (g_file_set_contents (path,
                                      "# generated\n"
                                      "search example.org\n"
                                      "nameserver 192.0.2.53\n"
                                      "nameserver  10.77.0.1\n"
                                      "nameserver ::1\n"
                                      "\tnameserver\t198.51.100.1 # office\n"
                                      "nameserverx 203.0.113.1\n", -1, NULL));
  got = mv_dns_host_upstreams (path, exclude);
  g_assert_cmpstrv (got, ((const char *const[]) { "192.0.2.53", "198.51.100.1", NULL }));
  for (guint i = 0; got[i]; i++)
    g_assert_true (mv_dns_upstream_validate (got[i], NULL));
  unlink (path);
  none = mv_dns_host_upstreams (path, NULL);
  g_assert_cmpuint (g_strv_length (none), ==, 0);
}

static void
test_validate (void)
{
  g_autoptr (GError) error = NULL;

  g_assert_true (mv_dns_upstream_validate ("192.0.2.1", NULL));
  g_assert_true (mv_dns_upstream_validate ("192.0.2.1:5353", NULL));
  g_assert_false (mv_dns_upstream_validate ("192.0.2.1:0", &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  g_assert_false (mv_dns_upstream_validate ("dns.example", NULL));
  g_assert_false (mv_dns_upstream_validate ("::1", NULL));
  g_assert_true (mv_dns_domain_validate ("microvm", NULL));
  g_assert_true (mv_dns_domain_validate ("vm.internal.", NULL));
  g_assert_false (mv_dns_domain_validate ("", NULL));
  g_assert_false (mv_dns_domain_validate ("a..b", NULL));
  g_assert_false (mv_dns_domain_validate ("bad domain", NULL));
}

static void
run (const char *const *argv)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *err = NULL;
  int status = 0;

  g_assert_true (g_spawn_sync (NULL, (char **) argv, NULL,
                               G_SPAWN_SEARCH_PATH | G_SPAWN_STDOUT_TO_DEV_NULL,
                               NULL, NULL, NULL, &err, &status, &error));
  g_assert_no_error (error);
  if (!g_spawn_check_wait_status (status, NULL))
    g_error ("%s failed: %s", argv[0], err);
}

int
main (int argc, char **argv)
{
  int status;

  g_test_init (&argc, &argv, NULL);
  if (geteuid () != 0)
    {
      g_printerr ("test-dns: needs root (a network namespace of its own)\n");
      return 77;
    }
  if (unshare (CLONE_NEWNET) < 0)
    g_error ("unshare (CLONE_NEWNET): %s", g_strerror (errno));
  run ((const char *const[]) { "ip", "link", "set", "lo", "up", NULL });
  run ((const char *const[]) { "ip", "link", "add", "d0", "type", "bridge", NULL });
  run ((const char *const[]) { "ip", "addr", "add", GATEWAY_TEXT "/24", "dev", "d0", NULL });
  run ((const char *const[]) { "ip", "link", "set", "d0", "up", NULL });
  start_dnsmasq ();

  g_test_add_func ("/dns/machine-names", test_machine_names);
  g_test_add_func ("/dns/unknown-and-nodata", test_unknown_and_nodata);
  g_test_add_func ("/dns/forward", test_forward);
  g_test_add_func ("/dns/servfail", test_servfail);
  g_test_add_func ("/dns/refused", test_refused);
  g_test_add_func ("/dns/tcp", test_tcp);
  g_test_add_func ("/dns/malformed", test_malformed);
  g_test_add_func ("/dns/tcp-limit", test_tcp_limit);
  g_test_add_func ("/dns/tcp-idle", test_tcp_idle);
  g_test_add_func ("/dns/forward-limit", test_forward_limit);
  g_test_add_func ("/dns/serve-and-stop", test_serve_and_stop);
  g_test_add_func ("/dns/host-upstreams", test_host_upstreams);
  g_test_add_func ("/dns/validate", test_validate);
  status = g_test_run ();
  stop_dnsmasq ();
  return status;
}
