/* The wake listener over NFLOG. See traffic.h. */
#include "traffic.h"

#include "core/errors.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <linux/if_ether.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_log.h>

#include <glib-unix.h>
#include <libmnl/libmnl.h>

/* Beyond this many remembered addresses, those whose interval has passed
 * are forgotten, so a scan of many addresses cannot grow the table. */
#define RECENT_PRUNE_AT 1024
/* Datagrams read per wake-up of the main loop, so that a flood of logged
 * packets cannot keep it from everything else. */
#define READS_PER_DISPATCH 64

/* The fields of an IPv4 header this file reads, by offset. */
#define IP_MIN_HEADER   20
#define IP_OFF_TOTLEN   2
#define IP_OFF_FRAG     6
#define IP_OFF_PROTOCOL 9
#define IP_OFF_DADDR    16
#define IP_FRAG_OFFSET  0x1fff
/* TCP, UDP, UDP-Lite, SCTP and DCCP all start with the source and the
 * destination port. */
#define L4_OFF_DPORT    2

struct _MvTraffic
{
  struct mnl_socket *socket;
  guint              group;
  gint64             min_interval_us;
  MvTrafficFunc      func;
  gpointer           data;
  GSource           *source;
  /* address → gint64 *, when it was last reported (monotonic µs) */
  GHashTable        *recent;
  char              *buffer;
  gsize              buffer_size;
};

/* ----- parsing ----- */

typedef struct {
  const struct nlattr *packet_hdr;
  const struct nlattr *payload;
} Attrs;

static int
on_attr (const struct nlattr *attr,
         void                *user_data)
{
  Attrs *attrs = user_data;

  switch (mnl_attr_get_type (attr))
    {
    case NFULA_PACKET_HDR:
      if (mnl_attr_validate2 (attr, MNL_TYPE_UNSPEC, sizeof (struct nfulnl_msg_packet_hdr)) == 0)
        attrs->packet_hdr = attr;
      break;
    case NFULA_PAYLOAD:
      attrs->payload = attr;
      break;
    default:
      break;
    }
  return MNL_CB_OK;
}

static gboolean
has_ports (guint8 protocol)
{
  return protocol == IPPROTO_TCP || protocol == IPPROTO_UDP || protocol == IPPROTO_UDPLITE
         || protocol == IPPROTO_SCTP || protocol == IPPROTO_DCCP;
}

gboolean
mv_traffic_parse_message (const void *message,
                          gsize       len,
                          guint32    *address,
                          guint8     *protocol,
                          guint16    *port)
{
  const struct nlmsghdr *nlh = message;
  const struct nfgenmsg *nfg;
  const guint8 *ip;
  Attrs attrs = { 0 };
  gboolean ipv4;
  gsize ip_len, header_len;
  guint16 total_len, frag;
  guint32 daddr;

  if (len > G_MAXINT || !mnl_nlmsg_ok (nlh, (int) len))
    return FALSE;
  if (nlh->nlmsg_type != ((NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_PACKET)
      || mnl_nlmsg_get_payload_len (nlh) < sizeof (struct nfgenmsg))
    return FALSE;
  nfg = mnl_nlmsg_get_payload (nlh);
  if (mnl_attr_parse (nlh, sizeof (struct nfgenmsg), on_attr, &attrs) < MNL_CB_OK
      || attrs.payload == NULL)
    return FALSE;

  /* An ip table logs with its own family; inet, bridge and netdev tables
   * say what the packet is in the header's link protocol. */
  ipv4 = nfg->nfgen_family == NFPROTO_IPV4;
  if (!ipv4 && attrs.packet_hdr != NULL)
    {
      const struct nfulnl_msg_packet_hdr *hdr = mnl_attr_get_payload (attrs.packet_hdr);

      ipv4 = hdr->hw_protocol == htons (ETH_P_IP);
    }
  if (!ipv4)
    return FALSE;

  ip = mnl_attr_get_payload (attrs.payload);
  ip_len = mnl_attr_get_payload_len (attrs.payload);
  if (ip_len < IP_MIN_HEADER || (ip[0] >> 4) != 4)
    return FALSE;
  header_len = (gsize) (ip[0] & 0x0f) * 4;
  total_len = (guint16) (ip[IP_OFF_TOTLEN] << 8 | ip[IP_OFF_TOTLEN + 1]);
  if (header_len < IP_MIN_HEADER || header_len > ip_len || total_len < header_len)
    return FALSE;

  memcpy (&daddr, ip + IP_OFF_DADDR, sizeof daddr);
  *address = ntohl (daddr);
  *protocol = ip[IP_OFF_PROTOCOL];
  *port = 0;
  frag = (guint16) (ip[IP_OFF_FRAG] << 8 | ip[IP_OFF_FRAG + 1]);
  /* The copy range may end before the ports: the address still counts. */
  if ((frag & IP_FRAG_OFFSET) == 0 && has_ports (*protocol)
      && ip_len >= header_len + L4_OFF_DPORT + 2 && total_len >= header_len + L4_OFF_DPORT + 2)
    *port = (guint16) (ip[header_len + L4_OFF_DPORT] << 8 | ip[header_len + L4_OFF_DPORT + 1]);
  return TRUE;
}

/* ----- reporting ----- */

static gboolean
forget_if_old (gpointer key,
               gpointer value,
               gpointer user_data)
{
  const gint64 *reported_us = value;
  const gint64 *before_us = user_data;

  return *reported_us < *before_us;
}

/* Whether @address is due a report now, noting it if so. */
static gboolean
take_turn (MvTraffic *traffic,
           guint32    address)
{
  gint64 now_us = g_get_monotonic_time ();
  gint64 *reported_us = g_hash_table_lookup (traffic->recent, GUINT_TO_POINTER (address));

  if (reported_us != NULL)
    {
      if (now_us - *reported_us < traffic->min_interval_us)
        return FALSE;
      *reported_us = now_us;
      return TRUE;
    }

  if (g_hash_table_size (traffic->recent) >= RECENT_PRUNE_AT)
    {
      gint64 before_us = now_us - traffic->min_interval_us;

      g_hash_table_foreach_remove (traffic->recent, forget_if_old, &before_us);
    }
  reported_us = g_new (gint64, 1);
  *reported_us = now_us;
  g_hash_table_insert (traffic->recent, GUINT_TO_POINTER (address), reported_us);
  return TRUE;
}

static void
handle_datagram (MvTraffic *traffic,
                 gsize      len)
{
  struct nlmsghdr *nlh = (struct nlmsghdr *) traffic->buffer;
  int left = (int) len;

  for (; mnl_nlmsg_ok (nlh, left); nlh = mnl_nlmsg_next (nlh, &left))
    {
      guint32 address;
      guint8 protocol;
      guint16 port;

      if (!mv_traffic_parse_message (nlh, nlh->nlmsg_len, &address, &protocol, &port))
        {
          if (nlh->nlmsg_type != NLMSG_NOOP && nlh->nlmsg_type != NLMSG_DONE)
            g_debug ("NFLOG group %u: skipped a message of type 0x%x, %u bytes", traffic->group,
                     nlh->nlmsg_type, nlh->nlmsg_len);
          continue;
        }
      if (take_turn (traffic, address))
        traffic->func (address, protocol, port, traffic->data);
    }
}

static gboolean
on_readable (int          fd,
             GIOCondition condition,
             gpointer     user_data)
{
  MvTraffic *traffic = user_data;

  for (guint reads = 0; reads < READS_PER_DISPATCH; reads++)
    {
      ssize_t n = mnl_socket_recvfrom (traffic->socket, traffic->buffer, traffic->buffer_size);

      if (n < 0)
        {
          if (errno == EINTR)
            continue;
          /* The kernel dropped what did not fit; the socket goes on. */
          if (errno == ENOBUFS)
            {
              g_debug ("NFLOG group %u: the receive buffer overflowed", traffic->group);
              continue;
            }
          if (errno != EAGAIN)
            g_warning ("NFLOG group %u: cannot read: %s", traffic->group, g_strerror (errno));
          break;
        }
      handle_datagram (traffic, (gsize) n);
    }
  return G_SOURCE_CONTINUE;
}

/* ----- binding ----- */

/* Binds the group, copies MV_TRAFFIC_COPY_RANGE bytes of each packet and
 * sends each at once, in one request, and waits for the kernel's answer. */
static gboolean
configure (MvTraffic  *traffic,
           GError    **error)
{
  struct nfulnl_msg_config_cmd cmd = { .command = NFULNL_CFG_CMD_BIND };
  struct nfulnl_msg_config_mode mode = {
    .copy_range = htonl (MV_TRAFFIC_COPY_RANGE),
    .copy_mode = NFULNL_COPY_PACKET,
  };
  guint32 seq = (guint32) g_get_real_time ();
  guint32 portid = mnl_socket_get_portid (traffic->socket);
  struct nlmsghdr *nlh = mnl_nlmsg_put_header (traffic->buffer);
  struct nfgenmsg *nfg;
  ssize_t n;

  nlh->nlmsg_type = (NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_CONFIG;
  nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
  nlh->nlmsg_seq = seq;
  nfg = mnl_nlmsg_put_extra_header (nlh, sizeof *nfg);
  /* Since Linux 3.17 binding a protocol family does nothing; the group
   * is all there is to bind. */
  nfg->nfgen_family = AF_UNSPEC;
  nfg->version = NFNETLINK_V0;
  nfg->res_id = htons ((guint16) traffic->group);
  mnl_attr_put (nlh, NFULA_CFG_CMD, sizeof cmd, &cmd);
  mnl_attr_put (nlh, NFULA_CFG_MODE, sizeof mode, &mode);
  mnl_attr_put_u32 (nlh, NFULA_CFG_QTHRESH, htonl (1));

  if (mnl_socket_sendto (traffic->socket, nlh, nlh->nlmsg_len) < 0)
    return mv_error_set (error, MV_ERROR_FAILED, "cannot bind NFLOG group %u: %s",
                         traffic->group, g_strerror (errno));
  do
    n = mnl_socket_recvfrom (traffic->socket, traffic->buffer, traffic->buffer_size);
  while (n < 0 && errno == EINTR);
  if (n < 0 || mnl_cb_run (traffic->buffer, (size_t) n, seq, portid, NULL, NULL) < 0)
    {
      int code = errno;

      if (code == EBUSY)
        return mv_error_set (error, MV_ERROR_FAILED,
                             "cannot bind NFLOG group %u: another listener holds it",
                             traffic->group);
      return mv_error_set (error, MV_ERROR_FAILED, "cannot bind NFLOG group %u: %s",
                           traffic->group, g_strerror (code));
    }
  return TRUE;
}

MvTraffic *
mv_traffic_new (guint           group,
                guint           min_interval_ms,
                MvTrafficFunc   func,
                gpointer        data,
                GError        **error)
{
  g_autoptr(MvTraffic) traffic = NULL;
  int fd;

  g_return_val_if_fail (func != NULL, NULL);

  if (group > G_MAXUINT16)
    {
      mv_error_set (error, MV_ERROR_INVALID_ARGUMENT,
                    "NFLOG group %u is out of range (at most %u)", group, G_MAXUINT16);
      return NULL;
    }

  traffic = g_new0 (MvTraffic, 1);
  traffic->group = group;
  traffic->min_interval_us = (gint64) min_interval_ms * G_TIME_SPAN_MILLISECOND;
  traffic->func = func;
  traffic->data = data;
  traffic->recent = g_hash_table_new_full (g_direct_hash, g_direct_equal, NULL, g_free);
  traffic->buffer_size = MNL_SOCKET_BUFFER_SIZE;
  traffic->buffer = g_malloc (traffic->buffer_size);

  traffic->socket = mnl_socket_open2 (NETLINK_NETFILTER, SOCK_CLOEXEC);
  if (traffic->socket == NULL || mnl_socket_bind (traffic->socket, 0, MNL_SOCKET_AUTOPID) < 0)
    {
      mv_error_set (error, MV_ERROR_FAILED, "cannot bind NFLOG group %u: netlink: %s", group,
                    g_strerror (errno));
      return NULL;
    }
  if (!configure (traffic, error))
    return NULL;

  /* Blocking for the one answer above; from here on the main loop reads. */
  fd = mnl_socket_get_fd (traffic->socket);
  if (!g_unix_set_fd_nonblocking (fd, TRUE, NULL))
    {
      mv_error_set (error, MV_ERROR_FAILED, "cannot bind NFLOG group %u: %s", group,
                    g_strerror (errno));
      return NULL;
    }
  traffic->source = g_unix_fd_source_new (fd, G_IO_IN);
  g_source_set_callback (traffic->source, G_SOURCE_FUNC (on_readable), traffic, NULL);
  g_source_attach (traffic->source, g_main_context_get_thread_default ());
  return g_steal_pointer (&traffic);
}

/* Closing the socket unbinds the group. */
void
mv_traffic_free (MvTraffic *traffic)
{
  if (traffic == NULL)
    return;
  if (traffic->source != NULL)
    {
      g_source_destroy (traffic->source);
      g_source_unref (traffic->source);
    }
  if (traffic->socket != NULL)
    mnl_socket_close (traffic->socket);
  g_hash_table_unref (traffic->recent);
  g_free (traffic->buffer);
  g_free (traffic);
}
