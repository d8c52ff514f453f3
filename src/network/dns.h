/* MvDns: the DNS server on each network's gateway, which is the daemon's
 * answer to "what does a guest's resolver see".
 *
 * One MvDns serves any number of networks, each on its gateway address
 * over UDP and TCP, on the thread-default main context of the thread that
 * created it (the daemon's main loop). Nothing in it blocks: every socket
 * is non-blocking and every wait is a main-loop source. The wire format is
 * parsed and built with ldns.
 *
 * What a query gets, the question's name compared without regard to ASCII
 * case (answers carry the name as asked):
 * - A single label (`web`) or one label under the domain (`web.microvm`)
 *   is a machine's name on that network. The host lookup is asked for it,
 *   in ASCII lower case, with the network's ID. A known name gets its
 *   addresses as A records with a TTL of MV_DNS_TTL seconds (names change
 *   when machines stop); AAAA and every other type get NOERROR with no
 *   answer (NODATA). An unknown name, or any other name under the domain
 *   (`a.b.microvm`), gets NXDOMAIN, authoritative, and is never forwarded.
 *   The domain itself gets NODATA.
 * - `d.c.b.a.in-addr.arpa` asks the address lookup for a.b.c.d; the names
 *   it gives are answered as PTR records `NAME.DOMAIN.` (a name that is
 *   not a plain DNS label is left out). An address the lookup does not
 *   know is forwarded like any other name.
 * - Any other name is forwarded: the query is relayed as it came, with an
 *   ID of the server's own, over UDP from one socket of the server's, to
 *   the first upstream; when that gives no answer within
 *   upstream_timeout_ms, to the next, and so on. The first answer from an
 *   upstream that was asked is relayed back with the client's ID (an
 *   answer truncated over UDP is relayed as it is, also to a TCP client).
 *   When none answers, SERVFAIL. At most MV_DNS_MAX_FORWARDS queries are
 *   forwarded at once; another gets SERVFAIL. With no upstreams, REFUSED.
 * - A query that ldns cannot parse, or with other than one question, gets
 *   FORMERR if it has a whole header, and is dropped otherwise; responses
 *   are dropped; opcodes other than QUERY get NOTIMP; a UDP datagram over
 *   MV_DNS_MAX_UDP_BYTES bytes gets REFUSED. An answer that would exceed
 *   512 bytes over UDP is sent empty with the TC bit, so that the client
 *   asks again over TCP.
 * - TCP carries length-prefixed messages (so at most 65535 bytes each),
 *   several on one connection, answered as they are ready; a client that
 *   shuts its sending side still gets the answers to come, then the
 *   connection is closed (a message left unfinished closes it). At most
 *   MV_DNS_MAX_CONNECTIONS connections are open at once (over all
 *   networks; another is closed as soon as it is accepted), and one that
 *   has been idle for MV_DNS_IDLE_SECONDS is closed. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

#define MV_DNS_TTL              5
#define MV_DNS_MAX_UDP_BYTES    512
#define MV_DNS_MAX_FORWARDS     64
#define MV_DNS_MAX_CONNECTIONS  16
#define MV_DNS_IDLE_SECONDS     10
/* When MvDnsOptions.upstream_timeout_ms is 0. */
#define MV_DNS_DEFAULT_UPSTREAM_TIMEOUT_MS 2000

typedef struct _MvDns MvDns;

/* Called on the main thread, while a query is answered: they must not
 * call back into the MvDns. Return an array of char * (dotted quads for
 * hosts, machine names for addresses) with g_free as its element free
 * function, or NULL or an empty array for none. @name is in ASCII lower
 * case; @address in host byte order. */
typedef GPtrArray *(*MvDnsLookupHostFunc) (const char *network_id, const char *name, gpointer data);
typedef GPtrArray *(*MvDnsLookupAddrFunc) (const char *network_id, guint32 address, gpointer data);

typedef struct {
  const char        *domain;            /* e.g. "microvm": names are answered bare and as NAME.DOMAIN */
  const char *const *upstreams;         /* "ADDR" or "ADDR:PORT" (IPv4, port 53 by default);
                                           NULL or empty: other names are REFUSED */
  guint              upstream_timeout_ms; /* per upstream; 0: MV_DNS_DEFAULT_UPSTREAM_TIMEOUT_MS */
} MvDnsOptions;

/* Whether @upstream is one that MvDnsOptions.upstreams may hold; if not,
 * MV_ERROR_INVALID_ARGUMENT says why. */
gboolean mv_dns_upstream_validate (const char *upstream, GError **error);
/* Whether @domain is a domain that MvDnsOptions.domain may hold: one or
 * more labels of letters, digits, '-' and '_', a trailing dot allowed. */
gboolean mv_dns_domain_validate (const char *domain, GError **error);

/* @options->domain and every upstream must be valid (see above). */
MvDns   *mv_dns_new (const MvDnsOptions  *options,
                     MvDnsLookupHostFunc  host,
                     MvDnsLookupAddrFunc  addr,
                     gpointer             data);
void     mv_dns_free (MvDns *dns);

/* Serves network @network_id on @address (host byte order), port @port
 * (53 in the daemon; tests may pick another), UDP and TCP. The sockets
 * are bound with IP_FREEBIND, so a network may be served before its
 * bridge has its address. Serving a network that is served already on the
 * same address and port changes nothing; on another, the new sockets
 * replace the old ones once they are bound (on failure the old ones stay).
 * Fails with MV_ERROR_FAILED when a socket cannot be bound (the address
 * and port taken, for instance). */
gboolean mv_dns_serve (MvDns       *dns,
                       const char  *network_id,
                       guint32      address,
                       guint16      port,
                       GError     **error);
/* Stops serving @network_id: its sockets are closed (the port is free
 * again on return), its TCP connections too, and what it had forwarded
 * is forgotten. Stopping what is not served does nothing. */
void     mv_dns_stop (MvDns      *dns,
                      const char *network_id);

/* How many queries are forwarded and not answered yet. */
guint    mv_dns_get_forwards (MvDns *dns);

/* The IPv4 nameservers of the resolv.conf at @resolv_conf_path, in its
 * order, other than those in @exclude (the gateways the daemon serves on,
 * which would forward to themselves): the default upstreams. Empty when
 * the file cannot be read or names none. */
GStrv    mv_dns_host_upstreams (const char        *resolv_conf_path,
                                const char *const *exclude);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (MvDns, mv_dns_free)

G_END_DECLS
