/* Rate limits for QEMU guests. QEMU has no rate limiter of its own for
 * virtio-net, so on QEMU the daemon limits the machine's TAP with traffic
 * control:
 * - download (what the guest receives, the TAP's egress): a tbf root
 *   qdisc on the TAP;
 * - upload (what the guest sends, the TAP's ingress): an ingress qdisc on
 *   the TAP whose one filter (u32, matching everything) redirects each
 *   packet to an IFB device of the TAP's own, and a tbf root qdisc there.
 *   The kernels microvmd runs on need not have the police action
 *   (CONFIG_NET_ACT_POLICE); IFB, mirred and u32 are common. Shaping the
 *   upload rather than policing it also treats the guest's TCP better: a
 *   short queue before a drop instead of drops alone.
 *
 * Each tbf holds its rate with a burst of a hundredth of a second's worth
 * (at least rate/HZ for any HZ of 100 or more) and at least one frame of
 * the interface's MTU, and queues at most MV_RATE_LIMIT_LATENCY_MS before
 * it drops.
 *
 * The IFB is named MV_RATE_LIMIT_IFB_PREFIX and ten hex digits of a hash
 * of the TAP's name, so that the same TAP finds its IFB again after any
 * restart. It is not removed with the TAP by the kernel: removing the
 * upload limit removes it, also after the TAP is gone. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

#define MV_RATE_LIMIT_IFB_PREFIX  "mvifb"
#define MV_RATE_LIMIT_LATENCY_MS  50
/* Limits outside these are refused (MV_ERROR_INVALID_ARGUMENT): below,
 * one frame would take seconds; above, 100 Gbit/s. */
#define MV_RATE_LIMIT_MIN_BPS     1000
#define MV_RATE_LIMIT_MAX_BPS     G_GUINT64_CONSTANT (12500000000)

/* Limits the TAP @ifname: @download_bps (bytes/s the guest may receive:
 * the TAP's egress) and @upload_bps (bytes/s it may send: the TAP's
 * ingress). 0 removes that limit. Idempotent (replace). The name is
 * checked (mv_nm_check_ifname()); an interface that does not exist is
 * MV_ERROR_NOT_FOUND unless both are 0 (then only a left-over IFB is
 * removed); what tc or ip refuse is MV_ERROR_FAILED with their message.
 * Blocks (runs tc and ip); any thread. */
gboolean mv_rate_limit_apply   (const char  *ifname,
                                guint64      download_bps,
                                guint64      upload_bps,
                                GError     **error);

/* The name of the IFB that carries @ifname's upload limit. */
char    *mv_rate_limit_ifb_name (const char *ifname);

G_END_DECLS
