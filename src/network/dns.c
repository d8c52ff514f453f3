/* The DNS server on the networks' gateways (dns.h). */
#include "network/dns.h"
#include "network/ldns-lib.h"

#include "core/errors.h"

#include <arpa/inet.h>
#include <errno.h>
#include <glib-unix.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#define HEADER_BYTES      12
#define MAX_TCP_BYTES     65535
/* What a UDP read takes: an upstream's answer may be as large as UDP
 * allows, a client's query is refused above MV_DNS_MAX_UDP_BYTES. */
#define MAX_DATAGRAM      65535
/* Datagrams read per wake-up, so that one busy socket does not starve the
 * rest of the main loop. */
#define READS_PER_WAKEUP  32
/* A TCP client that does not read its answers is closed past this. */
#define MAX_TCP_OUTPUT    (256 * 1024)
#define MAX_ANSWERS       32

#define FLAG_QR     0x80
#define FLAG_OPCODE 0x78
#define FLAG_AA     0x04
#define FLAG_TC     0x02
#define FLAG_RD     0x01
#define FLAG_RA     0x80

typedef struct _Server Server;
typedef struct _Connection Connection;

struct _MvDns {
  char               **domain;      /* labels, lower case */
  guint                n_domain;
  GArray              *upstreams;   /* struct sockaddr_in */
  guint                timeout_ms;
  MvDnsLookupHostFunc  lookup_host;
  MvDnsLookupAddrFunc  lookup_addr;
  gpointer             data;
  GMainContext        *context;
  GHashTable          *servers;     /* network ID -> Server */
  guint                n_connections;
  int                  forward_fd;  /* -1 until the first forward */
  GSource             *forward_source;
  GHashTable          *forwards;    /* our query ID -> Forward */
  guint8              *datagram;    /* MAX_DATAGRAM bytes, for every UDP read */
};

struct _Server {
  MvDns   *dns;
  char    *network_id;
  guint32  address;
  guint16  port;
  int      udp_fd;
  int      tcp_fd;
  GSource *udp_source;
  GSource *tcp_source;
  GList   *connections;             /* Connection */
};

struct _Connection {
  Server     *server;
  int         fd;
  GSource    *source;
  GSource    *idle;
  GByteArray *in;
  GByteArray *out;
  guint       forwards;   /* its queries waiting for an upstream */
  gboolean    read_done;  /* the client has sent all it will */
};

/* A query relayed to the upstreams, waiting for an answer. The client is
 * either a UDP peer of @server or a TCP @connection. */
typedef struct {
  MvDns              *dns;
  guint16             id;           /* ours, on the way to the upstreams */
  guint16             client_id;
  guint8             *query;        /* as the client sent it, with our ID */
  gsize               query_len;
  gsize               question_len; /* name + type + class, after the header */
  guint               tried;        /* upstreams asked so far */
  GSource            *timer;
  Server             *server;
  struct sockaddr_in  client;
  Connection         *connection;
} Forward;

/* ---- sockets on the main loop ---- */

/* A source watching one descriptor whose conditions can change (a TCP
 * connection watches for output only while it has some). */
typedef struct {
  GSource  source;
  int      fd;
  gpointer tag;
} FdSource;

static gboolean
fd_source_dispatch (GSource *source, GSourceFunc callback, gpointer user_data)
{
  FdSource *s = (FdSource *) source;
  GUnixFDSourceFunc func = (GUnixFDSourceFunc) (void (*) (void)) callback;

  return func (s->fd, g_source_query_unix_fd (source, s->tag), user_data);
}

static GSourceFuncs fd_source_funcs = { .dispatch = fd_source_dispatch };

static GSource *
fd_source_new (MvDns *dns, int fd, GIOCondition condition, GUnixFDSourceFunc func, gpointer data)
{
  GSource *source = g_source_new (&fd_source_funcs, sizeof (FdSource));
  FdSource *s = (FdSource *) source;

  s->fd = fd;
  s->tag = g_source_add_unix_fd (source, fd, condition);
  g_source_set_callback (source, G_SOURCE_FUNC (func), data, NULL);
  g_source_attach (source, dns->context);
  return source;
}

static void
fd_source_set (GSource *source, GIOCondition condition)
{
  g_source_modify_unix_fd (source, ((FdSource *) source)->tag, condition);
}

static void
source_drop (GSource **source)
{
  if (*source)
    {
      g_source_destroy (*source);
      g_clear_pointer (source, g_source_unref);
    }
}

/* ---- names ---- */

static gboolean
label_char_ok (char c)
{
  return g_ascii_isalnum (c) || c == '-' || c == '_';
}

gboolean
mv_dns_domain_validate (const char *domain, GError **error)
{
  g_auto (GStrv) labels = NULL;
  g_autofree char *bare = NULL;

  if (!domain || !*domain)
    return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT, "domain: must not be empty");
  bare = g_strdup (domain);
  if (g_str_has_suffix (bare, ".") && strlen (bare) > 1)
    bare[strlen (bare) - 1] = '\0';
  if (strlen (bare) > 253)
    return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT,
                         "domain: \"%s\" is longer than 253 bytes", domain);
  labels = g_strsplit (bare, ".", -1);
  for (guint i = 0; labels[i]; i++)
    {
      gsize len = strlen (labels[i]);

      if (len == 0 || len > 63)
        return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT,
                             "domain: \"%s\" has a label of %zu bytes (1 to 63)", domain, len);
      for (gsize j = 0; j < len; j++)
        if (!label_char_ok (labels[i][j]))
          return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT,
                               "domain: \"%s\" has a character other than letters, digits, '-' and '_'",
                               domain);
    }
  return TRUE;
}

static gboolean
parse_upstream (const char *text, struct sockaddr_in *sin, GError **error)
{
  g_autofree char *host = NULL;
  const char *colon = text ? strchr (text, ':') : NULL;
  guint64 port = 53;

  if (!text || !*text)
    return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT, "upstream: must not be empty");
  host = colon ? g_strndup (text, colon - text) : g_strdup (text);
  if (colon && (!g_ascii_string_to_unsigned (colon + 1, 10, 1, 65535, &port, NULL)))
    return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT,
                         "upstream: \"%s\" has a port other than 1 to 65535", text);
  memset (sin, 0, sizeof *sin);
  sin->sin_family = AF_INET;
  sin->sin_port = htons ((guint16) port);
  if (inet_pton (AF_INET, host, &sin->sin_addr) != 1)
    return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT,
                         "upstream: \"%s\" is not an IPv4 address, optionally with :PORT", text);
  return TRUE;
}

gboolean
mv_dns_upstream_validate (const char *upstream, GError **error)
{
  struct sockaddr_in sin;

  return parse_upstream (upstream, &sin, error);
}

/* The labels of a wire-format name that ldns has checked, in lower case.
 * *plain says whether every label is letters, digits, '-' and '_' only:
 * no other name is a machine's. */
static GPtrArray *
name_labels (const ldns_rdf *name, gboolean *plain)
{
  const guint8 *p = mv_ldns.rdf_data (name);
  gsize size = mv_ldns.rdf_size (name);
  GPtrArray *labels = g_ptr_array_new_with_free_func (g_free);
  gsize at = 0;

  *plain = TRUE;
  while (at < size && p[at] != 0)
    {
      guint len = p[at];
      char *label;

      if (len > 63 || at + 1 + len > size)
        {
          *plain = FALSE;
          break;
        }
      label = g_ascii_strdown ((const char *) p + at + 1, len);
      for (guint i = 0; i < len; i++)
        if (!label_char_ok ((char) p[at + 1 + i]))
          *plain = FALSE;
      g_ptr_array_add (labels, label);
      at += 1 + len;
    }
  return labels;
}

/* Whether the last labels of @labels are the domain's. */
static gboolean
ends_in_domain (MvDns *dns, GPtrArray *labels)
{
  if (labels->len < dns->n_domain)
    return FALSE;
  for (guint i = 0; i < dns->n_domain; i++)
    if (!g_str_equal (g_ptr_array_index (labels, labels->len - dns->n_domain + i), dns->domain[i]))
      return FALSE;
  return TRUE;
}

/* a.b.c.d from d.c.b.a.in-addr.arpa. */
static gboolean
reverse_address (GPtrArray *labels, guint32 *address)
{
  guint32 a = 0;

  if (labels->len != 6 || !g_str_equal (g_ptr_array_index (labels, 4), "in-addr") ||
      !g_str_equal (g_ptr_array_index (labels, 5), "arpa"))
    return FALSE;
  for (guint i = 0; i < 4; i++)
    {
      const char *octet = g_ptr_array_index (labels, 3 - i);
      guint64 v;

      /* No leading zeros: "010" is not the address's spelling. */
      if ((octet[0] == '0' && octet[1]) ||
          !g_ascii_string_to_unsigned (octet, 10, 0, 255, &v, NULL))
        return FALSE;
      a = (a << 8) | (guint32) v;
    }
  *address = a;
  return TRUE;
}

/* ---- replies ---- */

/* A reply built by hand from the query's header and @question_len bytes
 * of its question (0: none): for errors, and for queries ldns refused. */
static GBytes *
raw_reply (const guint8 *query, gsize question_len, guint8 rcode, guint8 extra_flags)
{
  guint8 *r = g_malloc0 (HEADER_BYTES + question_len);

  memcpy (r, query, HEADER_BYTES + question_len);
  r[2] = FLAG_QR | (query[2] & (FLAG_OPCODE | FLAG_RD)) | extra_flags;
  r[3] = FLAG_RA | (rcode & 0x0f);
  r[4] = 0;
  r[5] = question_len ? 1 : 0;
  memset (r + 6, 0, 6);
  return g_bytes_new_take (r, HEADER_BYTES + question_len);
}

static ldns_pkt *
answer_new (const ldns_pkt *query, const ldns_rr *question, ldns_pkt_rcode rcode)
{
  ldns_pkt *reply = mv_ldns.pkt_new ();
  ldns_rr *q = mv_ldns.rr_clone (question);

  mv_ldns.pkt_set_id (reply, mv_ldns.pkt_id (query));
  mv_ldns.pkt_set_qr (reply, true);
  mv_ldns.pkt_set_aa (reply, true);
  mv_ldns.pkt_set_rd (reply, mv_ldns.pkt_rd (query));
  mv_ldns.pkt_set_ra (reply, true);
  mv_ldns.pkt_set_opcode (reply, LDNS_PACKET_QUERY);
  mv_ldns.pkt_set_rcode (reply, rcode);
  mv_ldns.rr_set_question (q, true);
  mv_ldns.pkt_push_rr (reply, LDNS_SECTION_QUESTION, q);
  return reply;
}

static void
push_answer (ldns_pkt *reply, const ldns_rr *question, ldns_rr_type type, ldns_rdf *rdata)
{
  ldns_rr *rr = mv_ldns.rr_new ();

  mv_ldns.rr_set_owner (rr, mv_ldns.rdf_clone (mv_ldns.rr_owner (question)));
  mv_ldns.rr_set_type (rr, type);
  mv_ldns.rr_set_class (rr, LDNS_RR_CLASS_IN);
  mv_ldns.rr_set_ttl (rr, MV_DNS_TTL);
  mv_ldns.rr_push_rdf (rr, rdata);
  mv_ldns.pkt_push_rr (reply, LDNS_SECTION_ANSWER, rr);
}

static void
push_addresses (ldns_pkt *reply, const ldns_rr *question, GPtrArray *addresses)
{
  guint n = 0;

  for (guint i = 0; i < addresses->len && n < MAX_ANSWERS; i++)
    {
      struct in_addr in;

      if (inet_pton (AF_INET, g_ptr_array_index (addresses, i), &in) != 1)
        continue;
      push_answer (reply, question, LDNS_RR_TYPE_A,
                   mv_ldns.rdf_new_frm_data (LDNS_RDF_TYPE_A, sizeof in, &in));
      n++;
    }
}

static void
push_names (MvDns *dns, ldns_pkt *reply, const ldns_rr *question, GPtrArray *names)
{
  g_autofree char *domain = g_strjoinv (".", dns->domain);
  guint n = 0;

  for (guint i = 0; i < names->len && n < MAX_ANSWERS; i++)
    {
      const char *name = g_ptr_array_index (names, i);
      g_autofree char *full = NULL;
      ldns_rdf *rdf;
      gsize len = strlen (name);
      gboolean plain = len > 0 && len <= 63;

      for (gsize j = 0; plain && j < len; j++)
        plain = label_char_ok (name[j]);
      if (!plain)
        continue;
      full = g_strdup_printf ("%s.%s.", name, domain);
      rdf = mv_ldns.dname_new_frm_str (full);
      if (!rdf)
        continue;
      push_answer (reply, question, LDNS_RR_TYPE_PTR, rdf);
      n++;
    }
}

static GBytes *
answer_wire (ldns_pkt *reply, const guint8 *query, gsize question_len, gboolean udp)
{
  guint8 *wire = NULL;
  size_t size = 0;
  GBytes *bytes;

  if (mv_ldns.pkt2wire (&wire, reply, &size) != LDNS_STATUS_OK)
    {
      free (wire);
      return raw_reply (query, question_len, LDNS_RCODE_SERVFAIL, 0);
    }
  if (udp && size > MV_DNS_MAX_UDP_BYTES)
    {
      free (wire);
      return raw_reply (query, question_len, mv_ldns.pkt_get_rcode (reply), FLAG_AA | FLAG_TC);
    }
  bytes = g_bytes_new (wire, size);
  free (wire);
  return bytes;
}

/* The answer to a name that is ours, or NULL when it is not (forward it). */
static GBytes *
answer_local (MvDns *dns, const char *network_id, const ldns_pkt *query, const ldns_rr *question,
              const guint8 *wire, gsize question_len, gboolean udp)
{
  ldns_rr_type type = mv_ldns.rr_get_type (question);
  ldns_rr_class klass = mv_ldns.rr_get_class (question);
  gboolean plain, in_class = klass == LDNS_RR_CLASS_IN || klass == LDNS_RR_CLASS_ANY;
  g_autoptr (GPtrArray) labels = name_labels (mv_ldns.rr_owner (question), &plain);
  g_autoptr (GPtrArray) found = NULL;
  ldns_pkt *reply;
  GBytes *bytes;
  guint32 address;

  /* The domain first: it may be a single label itself. */
  if (labels->len == dns->n_domain && ends_in_domain (dns, labels))
    reply = answer_new (query, question, LDNS_RCODE_NOERROR);
  else if (labels->len == 1 || (labels->len > dns->n_domain && ends_in_domain (dns, labels)))
    {
      /* A machine's name, or nothing. */
      if (plain && (labels->len == 1 || labels->len == dns->n_domain + 1) && in_class)
        found = dns->lookup_host (network_id, g_ptr_array_index (labels, 0), dns->data);
      if (!found || found->len == 0)
        reply = answer_new (query, question, LDNS_RCODE_NXDOMAIN);
      else
        {
          reply = answer_new (query, question, LDNS_RCODE_NOERROR);
          if (type == LDNS_RR_TYPE_A || type == LDNS_RR_TYPE_ANY)
            push_addresses (reply, question, found);
        }
    }
  else if (reverse_address (labels, &address) && in_class &&
           (found = dns->lookup_addr (network_id, address, dns->data)) && found->len > 0)
    {
      reply = answer_new (query, question, LDNS_RCODE_NOERROR);
      if (type == LDNS_RR_TYPE_PTR || type == LDNS_RR_TYPE_ANY)
        push_names (dns, reply, question, found);
    }
  else
    return NULL;

  bytes = answer_wire (reply, wire, question_len, udp);
  mv_ldns.pkt_free (reply);
  return bytes;
}

/* ---- forwarding ---- */

static void send_reply (Server *server, const struct sockaddr_in *client, Connection *connection,
                        GBytes *reply);
static gboolean forward_send_next (Forward *forward);

static void
forward_free (gpointer data)
{
  Forward *forward = data;

  if (forward->connection)
    forward->connection->forwards--;
  source_drop (&forward->timer);
  g_free (forward->query);
  g_free (forward);
}

/* Answers the client and forgets @forward. */
static void
forward_finish (Forward *forward, GBytes *reply)
{
  /* Out of the table first: the reply may close the connection, which
   * drops that connection's forwards. */
  Connection *connection = forward->connection;

  g_hash_table_steal (forward->dns->forwards, GUINT_TO_POINTER (forward->id));
  if (connection)
    connection->forwards--;
  forward->connection = NULL;
  send_reply (forward->server, &forward->client, connection, reply);
  forward_free (forward);
}

static void
forward_fail (Forward *forward)
{
  g_autoptr (GBytes) reply = NULL;

  /* Back to the client's ID before the header is copied. */
  forward->query[0] = forward->client_id >> 8;
  forward->query[1] = forward->client_id & 0xff;
  reply = raw_reply (forward->query, forward->question_len, LDNS_RCODE_SERVFAIL, 0);
  forward_finish (forward, reply);
}

static gboolean
on_forward_timeout (gpointer user_data)
{
  Forward *forward = user_data;

  g_clear_pointer (&forward->timer, g_source_unref);
  if (!forward_send_next (forward))
    forward_fail (forward);
  return G_SOURCE_REMOVE;
}

/* Sends the query to the next upstream that takes it; FALSE when none is
 * left. */
static gboolean
forward_send_next (Forward *forward)
{
  MvDns *dns = forward->dns;

  while (forward->tried < dns->upstreams->len)
    {
      const struct sockaddr_in *upstream = &g_array_index (dns->upstreams, struct sockaddr_in,
                                                           forward->tried);

      forward->tried++;
      if (sendto (dns->forward_fd, forward->query, forward->query_len, 0,
                  (const struct sockaddr *) upstream, sizeof *upstream) < 0)
        {
          g_debug ("dns: cannot forward to upstream %u: %s", forward->tried, g_strerror (errno));
          continue;
        }
      forward->timer = g_timeout_source_new (dns->timeout_ms);
      g_source_set_callback (forward->timer, on_forward_timeout, forward, NULL);
      g_source_attach (forward->timer, dns->context);
      return TRUE;
    }
  return FALSE;
}

/* Whether @answer's question is @forward's: name without regard to case,
 * type and class exactly. */
static gboolean
same_question (const Forward *forward, const guint8 *answer, gsize len)
{
  const guint8 *q = forward->query + HEADER_BYTES;
  const guint8 *a = answer + HEADER_BYTES;
  gsize n = forward->question_len;

  if (len < HEADER_BYTES + n || answer[4] != 0 || answer[5] != 1)
    return FALSE;
  for (gsize i = 0; i < n; i++)
    if ((i < n - 4 ? g_ascii_tolower (q[i]) != g_ascii_tolower (a[i]) : q[i] != a[i]))
      return FALSE;
  return TRUE;
}

static gboolean
is_upstream (MvDns *dns, const Forward *forward, const struct sockaddr_in *from)
{
  for (guint i = 0; i < forward->tried; i++)
    {
      const struct sockaddr_in *u = &g_array_index (dns->upstreams, struct sockaddr_in, i);

      if (u->sin_addr.s_addr == from->sin_addr.s_addr && u->sin_port == from->sin_port)
        return TRUE;
    }
  return FALSE;
}

static gboolean
on_upstream_readable (int fd, GIOCondition condition, gpointer user_data)
{
  MvDns *dns = user_data;
  guint8 *buf = dns->datagram;

  for (guint i = 0; i < READS_PER_WAKEUP; i++)
    {
      struct sockaddr_in from;
      socklen_t from_len = sizeof from;
      ssize_t n = recvfrom (fd, buf, MAX_DATAGRAM, 0, (struct sockaddr *) &from, &from_len);
      Forward *forward;

      if (n < 0)
        break;
      if (n < HEADER_BYTES || !(buf[2] & FLAG_QR) || from.sin_family != AF_INET)
        continue;
      forward = g_hash_table_lookup (dns->forwards, GUINT_TO_POINTER ((buf[0] << 8) | buf[1]));
      if (!forward || !is_upstream (dns, forward, &from) || !same_question (forward, buf, n))
        continue;
      buf[0] = forward->client_id >> 8;
      buf[1] = forward->client_id & 0xff;
      {
        g_autoptr (GBytes) reply = g_bytes_new (buf, n);
        forward_finish (forward, reply);
      }
    }
  return G_SOURCE_CONTINUE;
}

static gboolean
ensure_forward_socket (MvDns *dns)
{
  struct sockaddr_in any = { .sin_family = AF_INET };

  if (dns->forward_fd >= 0)
    return TRUE;
  dns->forward_fd = socket (AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (dns->forward_fd < 0 ||
      bind (dns->forward_fd, (const struct sockaddr *) &any, sizeof any) < 0)
    {
      g_warning ("dns: cannot open a socket to forward queries: %s", g_strerror (errno));
      if (dns->forward_fd >= 0)
        close (dns->forward_fd);
      dns->forward_fd = -1;
      return FALSE;
    }
  dns->forward_source = fd_source_new (dns, dns->forward_fd, G_IO_IN, on_upstream_readable, dns);
  return TRUE;
}

static guint16
unused_id (MvDns *dns)
{
  for (;;)
    {
      guint16 id;

      if (getrandom (&id, sizeof id, GRND_NONBLOCK) != sizeof id)
        id = (guint16) g_random_int ();
      if (!g_hash_table_contains (dns->forwards, GUINT_TO_POINTER (id)))
        return id;
    }
}

/* Relays the query to the upstreams; the answer comes later. Returns the
 * reply to send now when it cannot. */
static GBytes *
forward (MvDns *dns, Server *server, const struct sockaddr_in *client, Connection *connection,
         const guint8 *wire, gsize len, gsize question_len)
{
  Forward *f;

  if (dns->upstreams->len == 0)
    return raw_reply (wire, question_len, LDNS_RCODE_REFUSED, 0);
  if (g_hash_table_size (dns->forwards) >= MV_DNS_MAX_FORWARDS || !ensure_forward_socket (dns))
    return raw_reply (wire, question_len, LDNS_RCODE_SERVFAIL, 0);

  f = g_new0 (Forward, 1);
  f->dns = dns;
  f->id = unused_id (dns);
  f->client_id = (wire[0] << 8) | wire[1];
  f->query = g_memdup2 (wire, len);
  f->query_len = len;
  f->question_len = question_len;
  f->query[0] = f->id >> 8;
  f->query[1] = f->id & 0xff;
  f->server = server;
  if (client)
    f->client = *client;
  if (!forward_send_next (f))
    {
      forward_free (f);
      return raw_reply (wire, question_len, LDNS_RCODE_SERVFAIL, 0);
    }
  g_hash_table_insert (dns->forwards, GUINT_TO_POINTER (f->id), f);
  f->connection = connection;
  if (connection)
    connection->forwards++;
  return NULL;
}

/* Forgets every forward whose client is @server's or @connection's. */
static void
drop_forwards (MvDns *dns, Server *server, Connection *connection)
{
  GHashTableIter iter;
  Forward *f;

  g_hash_table_iter_init (&iter, dns->forwards);
  while (g_hash_table_iter_next (&iter, NULL, (gpointer *) &f))
    if ((server && f->server == server) || (connection && f->connection == connection))
      g_hash_table_iter_remove (&iter);
}

/* ---- queries ---- */

/* The reply to @wire now, or NULL when there is none yet (forwarded) or
 * none at all (dropped). */
static GBytes *
handle_query (Server *server, const struct sockaddr_in *client, Connection *connection,
              const guint8 *wire, gsize len)
{
  MvDns *dns = server->dns;
  ldns_pkt *query = NULL;
  const ldns_rr *question;
  gsize question_len;
  GBytes *reply;

  if (len < HEADER_BYTES || (wire[2] & FLAG_QR))
    return NULL;
  if (client && len > MV_DNS_MAX_UDP_BYTES)
    return raw_reply (wire, 0, LDNS_RCODE_REFUSED, 0);
  if ((wire[2] & FLAG_OPCODE) != 0)
    return raw_reply (wire, 0, LDNS_RCODE_NOTIMPL, 0);
  /* ldns is opened with the first query that needs it. */
  if (!mv_ldns_load (NULL))
    return raw_reply (wire, 0, LDNS_RCODE_SERVFAIL, 0);
  if (mv_ldns.wire2pkt (&query, wire, len) != LDNS_STATUS_OK)
    {
      g_debug ("dns: %s: a query ldns cannot parse", server->network_id);
      return raw_reply (wire, 0, LDNS_RCODE_FORMERR, 0);
    }
  if (mv_ldns.pkt_qdcount (query) != 1 || mv_ldns.rr_list_rr_count (mv_ldns.pkt_question (query)) != 1)
    {
      mv_ldns.pkt_free (query);
      return raw_reply (wire, 0, LDNS_RCODE_FORMERR, 0);
    }
  question = mv_ldns.rr_list_rr (mv_ldns.pkt_question (query), 0);
  /* The first name of a message cannot be compressed: the question is
   * these bytes of the query as it came. */
  question_len = mv_ldns.rdf_size (mv_ldns.rr_owner (question)) + 4;
  if (HEADER_BYTES + question_len > len ||
      memcmp (wire + HEADER_BYTES, mv_ldns.rdf_data (mv_ldns.rr_owner (question)),
              question_len - 4) != 0)
    {
      mv_ldns.pkt_free (query);
      return raw_reply (wire, 0, LDNS_RCODE_FORMERR, 0);
    }

  reply = answer_local (dns, server->network_id, query, question, wire, question_len,
                        client != NULL);
  mv_ldns.pkt_free (query);
  if (reply)
    return reply;
  return forward (dns, server, client, connection, wire, len, question_len);
}

/* ---- UDP ---- */

static gboolean
on_udp_readable (int fd, GIOCondition condition, gpointer user_data)
{
  Server *server = user_data;
  guint8 *buf = server->dns->datagram;

  for (guint i = 0; i < READS_PER_WAKEUP; i++)
    {
      struct sockaddr_in from;
      socklen_t from_len = sizeof from;
      ssize_t n = recvfrom (fd, buf, MAX_DATAGRAM, 0, (struct sockaddr *) &from, &from_len);
      g_autoptr (GBytes) reply = NULL;

      if (n < 0)
        break;
      if (from.sin_family != AF_INET)
        continue;
      reply = handle_query (server, &from, NULL, buf, n);
      if (reply)
        send_reply (server, &from, NULL, reply);
    }
  return G_SOURCE_CONTINUE;
}

/* ---- TCP ---- */

static void
connection_close (Connection *c)
{
  Server *server = c->server;

  drop_forwards (server->dns, NULL, c);
  server->connections = g_list_remove (server->connections, c);
  server->dns->n_connections--;
  source_drop (&c->source);
  source_drop (&c->idle);
  close (c->fd);
  g_byte_array_unref (c->in);
  g_byte_array_unref (c->out);
  g_free (c);
}

static gboolean
on_connection_idle (gpointer user_data)
{
  Connection *c = user_data;

  g_debug ("dns: %s: closing a TCP connection idle for %d s", c->server->network_id,
           MV_DNS_IDLE_SECONDS);
  connection_close (c);
  return G_SOURCE_REMOVE;
}

static void
connection_touch (Connection *c)
{
  g_source_set_ready_time (c->idle, g_source_get_time (c->idle) +
                           MV_DNS_IDLE_SECONDS * G_USEC_PER_SEC);
}


/* Writes what it can of the output; FALSE when the connection is broken. */
static gboolean
connection_flush (Connection *c)
{
  while (c->out->len > 0)
    {
      ssize_t n = send (c->fd, c->out->data, c->out->len, MSG_NOSIGNAL);

      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0 && errno == EAGAIN)
        break;
      if (n <= 0)
        return FALSE;
      g_byte_array_remove_range (c->out, 0, n);
    }
  fd_source_set (c->source, (c->read_done ? 0 : G_IO_IN) | (c->out->len ? G_IO_OUT : 0));
  return TRUE;
}

/* Whether the client has sent all it will and has every answer. */
static gboolean
connection_done (Connection *c)
{
  return c->read_done && c->forwards == 0 && c->out->len == 0;
}

static gboolean
connection_queue (Connection *c, GBytes *reply)
{
  gsize size = 0;
  const guint8 *data = g_bytes_get_data (reply, &size);
  guint8 prefix[2] = { size >> 8, size & 0xff };

  if (size > MAX_TCP_BYTES || c->out->len + size > MAX_TCP_OUTPUT)
    return FALSE;
  g_byte_array_append (c->out, prefix, 2);
  g_byte_array_append (c->out, data, size);
  connection_touch (c);
  return connection_flush (c);
}

/* Answers every whole message in the input; FALSE when the connection is
 * to be closed. */
static gboolean
connection_process (Connection *c)
{
  while (c->in->len >= 2)
    {
      gsize len = (c->in->data[0] << 8) | c->in->data[1];
      g_autoptr (GBytes) reply = NULL;

      if (len < HEADER_BYTES)
        return FALSE;
      if (c->in->len < 2 + len)
        break;
      reply = handle_query (c->server, NULL, c, c->in->data + 2, len);
      g_byte_array_remove_range (c->in, 0, 2 + len);
      if (reply && !connection_queue (c, reply))
        return FALSE;
    }
  return TRUE;
}

static gboolean
on_connection_ready (int fd, GIOCondition condition, gpointer user_data)
{
  Connection *c = user_data;
  guint8 buf[4096];

  if ((condition & G_IO_OUT && !connection_flush (c)) || connection_done (c) ||
      (c->read_done && condition & (G_IO_HUP | G_IO_ERR)))
    {
      connection_close (c);
      return G_SOURCE_CONTINUE;
    }
  if (c->read_done || !(condition & (G_IO_IN | G_IO_HUP | G_IO_ERR)))
    return G_SOURCE_CONTINUE;
  for (;;)
    {
      ssize_t n = recv (fd, buf, sizeof buf, 0);

      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0 && errno == EAGAIN)
        break;
      if (n == 0 && c->in->len == 0)
        {
          /* A half-close: the answers still to come are sent first. */
          c->read_done = TRUE;
          if (connection_done (c))
            connection_close (c);
          else
            fd_source_set (c->source, c->out->len ? G_IO_OUT : 0);
          return G_SOURCE_CONTINUE;
        }
      if (n <= 0)
        {
          connection_close (c);
          return G_SOURCE_CONTINUE;
        }
      connection_touch (c);
      g_byte_array_append (c->in, buf, n);
      /* A whole message at most, and its prefix, waits in the input. */
      if (!connection_process (c) || c->in->len > 2 + MAX_TCP_BYTES)
        {
          connection_close (c);
          return G_SOURCE_CONTINUE;
        }
    }
  return G_SOURCE_CONTINUE;
}

static gboolean
on_tcp_acceptable (int fd, GIOCondition condition, gpointer user_data)
{
  Server *server = user_data;
  MvDns *dns = server->dns;

  for (guint i = 0; i < READS_PER_WAKEUP; i++)
    {
      int cfd = accept4 (fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
      Connection *c;

      if (cfd < 0)
        break;
      if (dns->n_connections >= MV_DNS_MAX_CONNECTIONS)
        {
          g_debug ("dns: %s: refusing a TCP connection past %d", server->network_id,
                   MV_DNS_MAX_CONNECTIONS);
          close (cfd);
          continue;
        }
      c = g_new0 (Connection, 1);
      c->server = server;
      c->fd = cfd;
      c->in = g_byte_array_new ();
      c->out = g_byte_array_new ();
      c->source = fd_source_new (dns, cfd, G_IO_IN, on_connection_ready, c);
      c->idle = g_timeout_source_new_seconds (MV_DNS_IDLE_SECONDS);
      g_source_set_callback (c->idle, on_connection_idle, c, NULL);
      g_source_attach (c->idle, dns->context);
      connection_touch (c);
      server->connections = g_list_prepend (server->connections, c);
      dns->n_connections++;
    }
  return G_SOURCE_CONTINUE;
}

static void
send_reply (Server *server, const struct sockaddr_in *client, Connection *connection,
            GBytes *reply)
{
  if (connection)
    {
      if (!connection_queue (connection, reply) || connection_done (connection))
        connection_close (connection);
      return;
    }
  {
    gsize size = 0;
    const guint8 *data = g_bytes_get_data (reply, &size);

    /* A client that does not read loses its answers, nobody else's. */
    if (sendto (server->udp_fd, data, size, MSG_DONTWAIT, (const struct sockaddr *) client,
                sizeof *client) < 0)
      g_debug ("dns: %s: cannot answer: %s", server->network_id, g_strerror (errno));
  }
}

/* ---- serving ---- */

static int
bound_socket (int type, guint32 address, guint16 port, GError **error)
{
  struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons (port),
                             .sin_addr.s_addr = htonl (address) };
  char text[INET_ADDRSTRLEN] = "";
  int one = 1;
  int fd = socket (AF_INET, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

  inet_ntop (AF_INET, &sin.sin_addr, text, sizeof text);
  if (fd < 0)
    {
      mv_error_set (error, MV_ERROR_FAILED, "cannot open a socket for %s: %s", text,
                    g_strerror (errno));
      return -1;
    }
  /* FREEBIND: the bridge may not have its address yet. REUSEADDR: a
   * stopped server's connections in TIME_WAIT do not hold the port. */
  if (setsockopt (fd, IPPROTO_IP, IP_FREEBIND, &one, sizeof one) < 0 ||
      (type == SOCK_STREAM && setsockopt (fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0) ||
      bind (fd, (const struct sockaddr *) &sin, sizeof sin) < 0 ||
      (type == SOCK_STREAM && listen (fd, MV_DNS_MAX_CONNECTIONS) < 0))
    {
      mv_error_set (error, MV_ERROR_FAILED, "cannot serve DNS over %s on %s port %u: %s",
                    type == SOCK_STREAM ? "TCP" : "UDP", text, port, g_strerror (errno));
      close (fd);
      return -1;
    }
  return fd;
}

static void
server_free (gpointer data)
{
  Server *server = data;

  drop_forwards (server->dns, server, NULL);
  while (server->connections)
    connection_close (server->connections->data);
  source_drop (&server->udp_source);
  source_drop (&server->tcp_source);
  close (server->udp_fd);
  close (server->tcp_fd);
  g_free (server->network_id);
  g_free (server);
}

gboolean
mv_dns_serve (MvDns *dns, const char *network_id, guint32 address, guint16 port, GError **error)
{
  Server *old, *server;
  int udp_fd, tcp_fd;

  g_return_val_if_fail (dns && network_id, FALSE);

  old = g_hash_table_lookup (dns->servers, network_id);
  if (old && old->address == address && old->port == port)
    return TRUE;

  udp_fd = bound_socket (SOCK_DGRAM, address, port, error);
  if (udp_fd < 0)
    return FALSE;
  tcp_fd = bound_socket (SOCK_STREAM, address, port, error);
  if (tcp_fd < 0)
    {
      close (udp_fd);
      return FALSE;
    }

  server = g_new0 (Server, 1);
  server->dns = dns;
  server->network_id = g_strdup (network_id);
  server->address = address;
  server->port = port;
  server->udp_fd = udp_fd;
  server->tcp_fd = tcp_fd;
  server->udp_source = fd_source_new (dns, udp_fd, G_IO_IN, on_udp_readable, server);
  server->tcp_source = fd_source_new (dns, tcp_fd, G_IO_IN, on_tcp_acceptable, server);
  g_hash_table_replace (dns->servers, server->network_id, server);
  return TRUE;
}

void
mv_dns_stop (MvDns *dns, const char *network_id)
{
  g_return_if_fail (dns && network_id);

  g_hash_table_remove (dns->servers, network_id);
}

guint
mv_dns_get_forwards (MvDns *dns)
{
  return g_hash_table_size (dns->forwards);
}

MvDns *
mv_dns_new (const MvDnsOptions *options, MvDnsLookupHostFunc host, MvDnsLookupAddrFunc addr,
            gpointer data)
{
  g_autofree char *domain = NULL;
  MvDns *dns;

  g_return_val_if_fail (options && host && addr, NULL);
  g_return_val_if_fail (mv_dns_domain_validate (options->domain, NULL), NULL);

  dns = g_new0 (MvDns, 1);
  domain = g_ascii_strdown (options->domain, -1);
  if (g_str_has_suffix (domain, "."))
    domain[strlen (domain) - 1] = '\0';
  dns->domain = g_strsplit (domain, ".", -1);
  dns->n_domain = g_strv_length (dns->domain);
  dns->upstreams = g_array_new (FALSE, TRUE, sizeof (struct sockaddr_in));
  for (guint i = 0; options->upstreams && options->upstreams[i]; i++)
    {
      struct sockaddr_in sin;

      if (parse_upstream (options->upstreams[i], &sin, NULL))
        g_array_append_val (dns->upstreams, sin);
      else
        g_critical ("mv_dns_new: upstream \"%s\" is not valid", options->upstreams[i]);
    }
  dns->timeout_ms = options->upstream_timeout_ms ? options->upstream_timeout_ms
                                                 : MV_DNS_DEFAULT_UPSTREAM_TIMEOUT_MS;
  dns->lookup_host = host;
  dns->lookup_addr = addr;
  dns->data = data;
  dns->context = g_main_context_ref_thread_default ();
  dns->forward_fd = -1;
  dns->datagram = g_malloc (MAX_DATAGRAM);
  dns->forwards = g_hash_table_new_full (NULL, NULL, NULL, forward_free);
  /* Servers go before the forwards that point at them (server_free). */
  dns->servers = g_hash_table_new_full (g_str_hash, g_str_equal, NULL, server_free);
  return dns;
}

void
mv_dns_free (MvDns *dns)
{
  if (!dns)
    return;
  g_hash_table_destroy (dns->servers);
  g_hash_table_destroy (dns->forwards);
  source_drop (&dns->forward_source);
  if (dns->forward_fd >= 0)
    close (dns->forward_fd);
  g_main_context_unref (dns->context);
  g_array_unref (dns->upstreams);
  g_strfreev (dns->domain);
  g_free (dns->datagram);
  g_free (dns);
}

GStrv
mv_dns_host_upstreams (const char *resolv_conf_path, const char *const *exclude)
{
  g_autoptr (GStrvBuilder) builder = g_strv_builder_new ();
  g_autofree char *text = NULL;
  g_auto (GStrv) lines = NULL;

  if (!g_file_get_contents (resolv_conf_path, &text, NULL, NULL))
    return g_strv_builder_end (builder);
  lines = g_strsplit (text, "\n", -1);
  for (guint i = 0; lines[i]; i++)
    {
      g_auto (GStrv) words = g_strsplit_set (g_strstrip (lines[i]), " \t", -1);
      guint n = 0;
      struct in_addr in;

      if (!words[0] || !g_str_equal (words[0], "nameserver"))
        continue;
      /* The address is the first word after the keyword. */
      for (n = 1; words[n] && !*words[n]; n++)
        ;
      if (!words[n] || inet_pton (AF_INET, words[n], &in) != 1)
        continue;
      if (exclude && g_strv_contains (exclude, words[n]))
        continue;
      g_strv_builder_add (builder, words[n]);
    }
  return g_strv_builder_end (builder);
}
