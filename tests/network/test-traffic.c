/* MvTraffic, the wake listener: a parser test on messages made here, and
 * packets an nftables rule logs in a network namespace of the test's own
 * (private-netns.h). */
#include "network/traffic.h"
#include "core/errors.h"
#include "private-netns.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <linux/if_ether.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_log.h>

#include <libmnl/libmnl.h>

#define GROUP        7
#define INTERVAL_MS  600
#define LOCAL_ADDR   "10.77.1.1"
#define LOCAL_ADDR_H 0x0a4d0101u
#define REMOTE_ADDR  "10.77.1.9"
#define REMOTE_ADDR_H 0x0a4d0109u
#define TCP_PORT     4567
#define QUIET_PORT   4568
#define UDP_PORT     5353
#define WAIT_MS      5000
/* How long nothing more must arrive before a test says nothing did. */
#define SETTLE_MS    300

typedef struct {
  guint32 address;
  guint8  protocol;
  guint16 port;
} Event;

static void
record (guint32  address,
        guint8   protocol,
        guint16  port,
        gpointer data)
{
  Event event = { address, protocol, port };

  g_array_append_val ((GArray *) data, event);
}

static gboolean
on_timeout (gpointer user_data)
{
  *(gboolean *) user_data = TRUE;
  return G_SOURCE_REMOVE;
}

/* Iterates until @events holds the @count expected or WAIT_MS pass, then
 * SETTLE_MS more, so that an event too many is seen. */
static void
wait_events (GArray *events,
             guint   count)
{
  gboolean timed_out = FALSE;
  guint timeout = g_timeout_add (WAIT_MS, on_timeout, &timed_out);

  while (events->len < count && !timed_out)
    g_main_context_iteration (NULL, TRUE);
  if (!timed_out)
    g_source_remove (timeout);
  timed_out = FALSE;
  g_timeout_add (SETTLE_MS, on_timeout, &timed_out);
  while (!timed_out)
    g_main_context_iteration (NULL, TRUE);
}

/* A TCP connection attempt to @address:@port; nothing listens, so it is
 * refused at once, and each attempt is a new connection to conntrack. */
static void
try_connect (const char *address,
             guint16     port)
{
  struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons (port) };
  int fd = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

  g_assert_cmpint (fd, >=, 0);
  g_assert_cmpint (inet_pton (AF_INET, address, &to.sin_addr), ==, 1);
  g_assert_cmpint (connect (fd, (struct sockaddr *) &to, sizeof to), ==, -1);
  g_assert_cmpint (errno, ==, ECONNREFUSED);
  close (fd);
}

static void
send_udp (const char *address,
          guint16     port)
{
  struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons (port) };
  int fd = socket (AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

  g_assert_cmpint (fd, >=, 0);
  g_assert_cmpint (inet_pton (AF_INET, address, &to.sin_addr), ==, 1);
  g_assert_cmpint (sendto (fd, "wake", 4, 0, (struct sockaddr *) &to, sizeof to), ==, 4);
  close (fd);
}

static void
assert_event (GArray  *events,
              guint    index,
              guint32  address,
              guint8   protocol,
              guint16  port)
{
  const Event *event;

  g_assert_cmpuint (index, <, events->len);
  event = &g_array_index (events, Event, index);
  g_assert_cmphex (event->address, ==, address);
  g_assert_cmpuint (event->protocol, ==, protocol);
  g_assert_cmpuint (event->port, ==, port);
}

/* ----- against the kernel ----- */

static void
test_tcp_burst (void)
{
  g_autoptr(GArray) events = g_array_new (FALSE, FALSE, sizeof (Event));
  g_autoptr(GError) error = NULL;
  g_autoptr(MvTraffic) traffic = NULL;
  gint64 first_us;

  traffic = mv_traffic_new (GROUP, INTERVAL_MS, record, events, &error);
  g_assert_no_error (error);
  g_assert_nonnull (traffic);

  /* A port no rule logs is not reported. */
  try_connect (LOCAL_ADDR, QUIET_PORT);
  wait_events (events, 0);
  g_assert_cmpuint (events->len, ==, 0);

  /* A burst of connections within the interval is one event. */
  first_us = g_get_monotonic_time ();
  for (int i = 0; i < 5; i++)
    try_connect (LOCAL_ADDR, TCP_PORT);
  wait_events (events, 1);
  g_assert_cmpuint (events->len, ==, 1);
  assert_event (events, 0, LOCAL_ADDR_H, IPPROTO_TCP, TCP_PORT);
  g_assert_cmpint (g_get_monotonic_time () - first_us, <, INTERVAL_MS * G_TIME_SPAN_MILLISECOND);

  /* Still within the interval: nothing. */
  try_connect (LOCAL_ADDR, TCP_PORT);
  g_assert_cmpint (g_get_monotonic_time () - first_us, <, INTERVAL_MS * G_TIME_SPAN_MILLISECOND);
  wait_events (events, 1);
  g_assert_cmpuint (events->len, ==, 1);

  /* After it: reported again. */
  while (g_get_monotonic_time () - first_us < (INTERVAL_MS + 100) * G_TIME_SPAN_MILLISECOND)
    g_usleep (10 * G_TIME_SPAN_MILLISECOND);
  try_connect (LOCAL_ADDR, TCP_PORT);
  wait_events (events, 2);
  g_assert_cmpuint (events->len, ==, 2);
  assert_event (events, 1, LOCAL_ADDR_H, IPPROTO_TCP, TCP_PORT);
}

static void
test_udp_and_addresses (void)
{
  g_autoptr(GArray) events = g_array_new (FALSE, FALSE, sizeof (Event));
  g_autoptr(GError) error = NULL;
  g_autoptr(MvTraffic) traffic = NULL;

  traffic = mv_traffic_new (GROUP, INTERVAL_MS, record, events, &error);
  g_assert_no_error (error);

  /* Each address has an interval of its own. */
  try_connect (LOCAL_ADDR, TCP_PORT);
  send_udp (REMOTE_ADDR, UDP_PORT);
  send_udp (REMOTE_ADDR, UDP_PORT);
  wait_events (events, 2);
  g_assert_cmpuint (events->len, ==, 2);
  assert_event (events, 0, LOCAL_ADDR_H, IPPROTO_TCP, TCP_PORT);
  assert_event (events, 1, REMOTE_ADDR_H, IPPROTO_UDP, UDP_PORT);
}

static void
test_no_interval (void)
{
  g_autoptr(GArray) events = g_array_new (FALSE, FALSE, sizeof (Event));
  g_autoptr(GError) error = NULL;
  g_autoptr(MvTraffic) traffic = NULL;

  traffic = mv_traffic_new (GROUP, 0, record, events, &error);
  g_assert_no_error (error);
  for (int i = 0; i < 3; i++)
    try_connect (LOCAL_ADDR, TCP_PORT);
  wait_events (events, 3);
  g_assert_cmpuint (events->len, ==, 3);
}

static void
test_group_held (void)
{
  g_autoptr(GArray) events = g_array_new (FALSE, FALSE, sizeof (Event));
  g_autoptr(GError) error = NULL;
  g_autoptr(MvTraffic) first = NULL;
  g_autoptr(MvTraffic) second = NULL;
  g_autoptr(MvTraffic) again = NULL;

  first = mv_traffic_new (GROUP, INTERVAL_MS, record, events, &error);
  g_assert_no_error (error);
  second = mv_traffic_new (GROUP, INTERVAL_MS, record, events, &error);
  g_assert_error (error, MV_ERROR, MV_ERROR_FAILED);
  g_assert_null (second);
  g_assert_nonnull (strstr (error->message, "NFLOG group 7"));
  g_clear_error (&error);

  /* Freeing the first lets the group go. */
  g_clear_pointer (&first, mv_traffic_free);
  again = mv_traffic_new (GROUP, INTERVAL_MS, record, events, &error);
  g_assert_no_error (error);
  g_assert_nonnull (again);

  mv_traffic_new (G_MAXUINT16 + 1u, INTERVAL_MS, record, events, &error);
  g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
}

/* ----- the parser, on messages made here ----- */

typedef struct {
  guint8 family;
  guint16 hw_protocol;
  gboolean with_hdr;
  const guint8 *ip;
  gsize ip_len;
} MessageSpec;

/* Builds an NFLOG packet message in @buffer; returns its length. */
static gsize
build_message (char              *buffer,
               const MessageSpec *spec)
{
  struct nlmsghdr *nlh = mnl_nlmsg_put_header (buffer);
  struct nfgenmsg *nfg;
  struct nfulnl_msg_packet_hdr hdr = { .hw_protocol = htons (spec->hw_protocol), .hook = 3 };

  nlh->nlmsg_type = (NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_PACKET;
  nfg = mnl_nlmsg_put_extra_header (nlh, sizeof *nfg);
  nfg->nfgen_family = spec->family;
  nfg->version = NFNETLINK_V0;
  nfg->res_id = htons (GROUP);
  if (spec->with_hdr)
    mnl_attr_put (nlh, NFULA_PACKET_HDR, sizeof hdr, &hdr);
  mnl_attr_put_strz (nlh, NFULA_PREFIX, "wake");
  mnl_attr_put (nlh, NFULA_PAYLOAD, spec->ip_len, spec->ip);
  return nlh->nlmsg_len;
}

/* An IPv4 TCP SYN header to 10.77.1.1:4567 from 10.77.1.2:40000. */
static const guint8 tcp_syn[] = {
  0x45, 0x00, 0x00, 0x3c, 0x12, 0x34, 0x40, 0x00, 0x40, IPPROTO_TCP, 0x00, 0x00,
  10, 77, 1, 2, 10, 77, 1, 1,
  0x9c, 0x40, 0x11, 0xd7, 0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x02, 0xff, 0xff,
};

static gboolean
parse (const char *buffer,
       gsize       len,
       Event      *event)
{
  return mv_traffic_parse_message (buffer, len, &event->address, &event->protocol,
                                   &event->port);
}

static void
test_parse (void)
{
  char buffer[512];
  guint8 ip[sizeof tcp_syn];
  MessageSpec spec = { NFPROTO_IPV4, ETH_P_IP, TRUE, ip, sizeof ip };
  Event event = { 0 };
  gsize len;

  memcpy (ip, tcp_syn, sizeof ip);
  len = build_message (buffer, &spec);
  g_assert_true (parse (buffer, len, &event));
  g_assert_cmphex (event.address, ==, LOCAL_ADDR_H);
  g_assert_cmpuint (event.protocol, ==, IPPROTO_TCP);
  g_assert_cmpuint (event.port, ==, TCP_PORT);

  /* Every cut short of the whole message is refused. */
  for (gsize cut = 0; cut < len; cut++)
    g_assert_false (parse (buffer, cut, &event));

  /* An inet or bridge table: the family is not IPv4, the link protocol
   * says it is; without a header it is not known. */
  spec.family = NFPROTO_BRIDGE;
  len = build_message (buffer, &spec);
  g_assert_true (parse (buffer, len, &event));
  spec.with_hdr = FALSE;
  len = build_message (buffer, &spec);
  g_assert_false (parse (buffer, len, &event));
  spec.with_hdr = TRUE;
  spec.hw_protocol = ETH_P_IPV6;
  len = build_message (buffer, &spec);
  g_assert_false (parse (buffer, len, &event));
  spec.family = NFPROTO_IPV4;
  spec.hw_protocol = ETH_P_IP;

  /* Not version 4. */
  ip[0] = 0x65;
  len = build_message (buffer, &spec);
  g_assert_false (parse (buffer, len, &event));
  /* A header length below 20 bytes, or beyond what was copied. */
  ip[0] = 0x44;
  len = build_message (buffer, &spec);
  g_assert_false (parse (buffer, len, &event));
  ip[0] = 0x4f;
  len = build_message (buffer, &spec);
  g_assert_false (parse (buffer, len, &event));
  /* A total length below the header's. */
  ip[0] = 0x45;
  ip[2] = 0;
  ip[3] = 16;
  len = build_message (buffer, &spec);
  g_assert_false (parse (buffer, len, &event));
  ip[3] = 0x3c;

  /* Copied only up to the header: the address, no port. */
  spec.ip_len = 20;
  len = build_message (buffer, &spec);
  g_assert_true (parse (buffer, len, &event));
  g_assert_cmphex (event.address, ==, LOCAL_ADDR_H);
  g_assert_cmpuint (event.port, ==, 0);
  spec.ip_len = sizeof ip;
  /* A later fragment has no ports. */
  ip[6] = 0x00;
  ip[7] = 0x10;
  len = build_message (buffer, &spec);
  g_assert_true (parse (buffer, len, &event));
  g_assert_cmpuint (event.port, ==, 0);
  ip[6] = 0x40;
  ip[7] = 0x00;
  /* Nor does ICMP. */
  ip[9] = IPPROTO_ICMP;
  len = build_message (buffer, &spec);
  g_assert_true (parse (buffer, len, &event));
  g_assert_cmpuint (event.protocol, ==, IPPROTO_ICMP);
  g_assert_cmpuint (event.port, ==, 0);
  ip[9] = IPPROTO_TCP;

  /* A payload attribute that claims more than the message holds. */
  len = build_message (buffer, &spec);
  {
    struct nlmsghdr *nlh = (struct nlmsghdr *) buffer;
    struct nlattr *last = (struct nlattr *) (buffer + len - MNL_ALIGN (sizeof ip)
                                             - MNL_ATTR_HDRLEN);

    g_assert_cmpuint (mnl_attr_get_type (last), ==, NFULA_PAYLOAD);
    last->nla_len += 8;
    g_assert_false (parse (buffer, nlh->nlmsg_len, &event));
  }

  /* Another message type of the subsystem. */
  len = build_message (buffer, &spec);
  ((struct nlmsghdr *) buffer)->nlmsg_type = (NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_CONFIG;
  g_assert_false (parse (buffer, len, &event));
}

int
main (int    argc,
      char **argv)
{
  mv_test_private_netns_enter ();
  g_test_init (&argc, &argv, NULL);

  mv_test_cmd ("ip", "link", "add", "mvt0", "type", "veth", "peer", "name", "mvt1", NULL);
  mv_test_cmd ("ip", "addr", "add", LOCAL_ADDR "/24", "dev", "mvt0", NULL);
  mv_test_cmd ("ip", "link", "set", "dev", "mvt0", "up", NULL);
  mv_test_cmd ("ip", "link", "set", "dev", "mvt1", "up", NULL);
  mv_test_cmd ("nft", "add", "table", "ip", "mvtest", NULL);
  mv_test_cmd ("nft", "add", "chain", "ip", "mvtest", "out",
               "{ type filter hook output priority 0; policy accept; }", NULL);
  mv_test_cmd ("nft", "add", "rule", "ip", "mvtest", "out", "ip", "daddr", LOCAL_ADDR, "tcp",
               "dport", G_STRINGIFY (TCP_PORT), "ct", "state", "new", "log", "group",
               G_STRINGIFY (GROUP), NULL);
  mv_test_cmd ("nft", "add", "rule", "ip", "mvtest", "out", "ip", "daddr", REMOTE_ADDR, "udp",
               "dport", G_STRINGIFY (UDP_PORT), "log", "group", G_STRINGIFY (GROUP), NULL);

  g_test_add_func ("/traffic/parse", test_parse);
  g_test_add_func ("/traffic/tcp-burst", test_tcp_burst);
  g_test_add_func ("/traffic/udp-and-addresses", test_udp_and_addresses);
  g_test_add_func ("/traffic/no-interval", test_no_interval);
  g_test_add_func ("/traffic/group-held", test_group_held);
  return g_test_run ();
}
