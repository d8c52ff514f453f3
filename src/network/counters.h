/* The traffic counters of a machine's TAP, as the guest sees them. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef struct {
  guint64 rx_bytes, rx_packets, rx_dropped, rx_errors;   /* what the GUEST received */
  guint64 tx_bytes, tx_packets, tx_dropped, tx_errors;   /* what the GUEST sent */
} MvNetCounters;

/* The counters of a machine's TAP @ifname from the guest's side (a TAP's
 * tx is what the guest receives). Reads /sys/class/net/IFNAME/statistics;
 * MV_ERROR_NOT_FOUND if there is no such interface, MV_ERROR_INVALID_
 * ARGUMENT for a name that is not one (mv_nm_check_ifname()), MV_ERROR_
 * FAILED naming the file that cannot be read. The counters are read one
 * file at a time, so they are not one instant's. Blocks briefly; any
 * thread. */
gboolean mv_net_counters_read (const char     *ifname,
                               MvNetCounters  *counters,
                               GError        **error);

G_END_DECLS
