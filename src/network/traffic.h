/* MvTraffic: the wake listener. Packets that an nftables rule logs with
 * `log group N` (NFLOG) are reported one destination at a time, so that
 * the daemon can start a machine when something tries to reach it.
 *
 * It is one netlink socket (NETLINK_NETFILTER, the NFULNL subsystem)
 * bound to the group, read on the thread-default main context of the
 * thread that made it. The kernel copies only the first
 * MV_TRAFFIC_COPY_RANGE bytes of each packet: an IPv4 header with options
 * and the transport ports. The kernel sends each packet at once (a queue
 * threshold of one), not in batches.
 *
 * Only IPv4 is reported. The address is the destination in the packet as
 * the logging rule saw it: a rule in a hook after destination NAT
 * (forward, output or postrouting, or prerouting after dstnat) sees the
 * translated address. The port is that of TCP, UDP, UDP-Lite, SCTP or
 * DCCP in the first fragment; 0 for other protocols and later fragments.
 *
 * A message that is not a well-formed logged IPv4 packet is skipped. When
 * the socket's buffer overflows the kernel drops messages; the next ones
 * are read as usual (a wake needs one packet, and clients retry). */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* 60 bytes of IPv4 header with the longest options, then the ports. */
#define MV_TRAFFIC_COPY_RANGE 64

typedef struct _MvTraffic MvTraffic;

/* Main thread. @address: the packet's IPv4 destination (host byte order,
 * after any DNAT), @protocol: IPPROTO_*, @port: its destination port (0
 * when none). It must not free the MvTraffic that calls it. */
typedef void (*MvTrafficFunc) (guint32  address,
                               guint8   protocol,
                               guint16  port,
                               gpointer data);

/* Binds NFLOG group @group and reports each logged IPv4 packet on the
 * thread-default main context. The same address is reported at most once
 * per @min_interval_ms (a burst of SYNs is one event). Fails with
 * MV_ERROR_FAILED naming the group if it cannot bind (another listener
 * holds it, or the process lacks CAP_NET_ADMIN). */
MvTraffic *mv_traffic_new  (guint           group,
                            guint           min_interval_ms,
                            MvTrafficFunc   func,
                            gpointer        data,
                            GError        **error);
void       mv_traffic_free (MvTraffic *traffic);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (MvTraffic, mv_traffic_free)

/* Parses one netlink message of @len bytes as an NFLOG packet. TRUE and
 * the destination when it is a logged IPv4 packet whose lengths all hold;
 * FALSE for anything else. Pure; exposed for tests. */
gboolean   mv_traffic_parse_message (const void *message,
                                     gsize       len,
                                     guint32    *address,
                                     guint8     *protocol,
                                     guint16    *port);

G_END_DECLS
