/* The addresses of one network: which machine holds which of the
 * subnet's host addresses (allocations.json), and the names and MAC a
 * machine's interface gets. A machine keeps its address while it is
 * defined, running or not; the gateway, the network and the broadcast
 * addresses are never given out. Pure. */
#pragma once
#include "network-spec.h"

#define MV_ALLOCATIONS_RECORD_FORMAT  1
/* The kernel's IFNAMSIZ, 16, less its NUL. */
#define MV_IFNAME_MAX_BYTES           15

typedef struct _MvIpam MvIpam;

/* An empty table for @network, which it copies. */
MvIpam     *mv_ipam_new (const MvNetworkSpec *network);
void        mv_ipam_free (MvIpam *ipam);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (MvIpam, mv_ipam_free)

/* The address of @machine_id: the one it holds; else @static_ip (NULL:
 * none), which must be a host address of the subnet other than the
 * gateway's (MV_ERROR_INVALID_ARGUMENT naming static_ip) and free
 * (MV_ERROR_CONFLICT naming static_ip and its holder); else the lowest
 * free one (MV_ERROR_RESOURCE_EXHAUSTED when none is). A machine holding
 * an address other than its @static_ip moves to that one, if it can.
 * @static_ip may carry the subnet's own prefix length ("10.0.0.5/24"). */
gboolean    mv_ipam_allocate (MvIpam *ipam, const char *machine_id, const char *static_ip,
                              guint32 *address, GError **error);
/* What @machine_id held, if anything, is free again. */
void        mv_ipam_release (MvIpam *ipam, const char *machine_id);
/* The machine holding @address (NULL: none, or not an IPv4 address). */
const char *mv_ipam_instance_at (MvIpam *ipam, const char *address);
/* Whether @machine_id holds an address, and which. */
gboolean    mv_ipam_lookup (MvIpam *ipam, const char *machine_id, guint32 *address);
guint       mv_ipam_count (MvIpam *ipam);
/* Releases what every machine not in @live (a set of IDs) holds: those
 * left behind by machines deleted while the daemon was down. How many. */
guint       mv_ipam_reconcile (MvIpam *ipam, GHashTable *live);

/* allocations.json, format 1: {"format": 1, "allocations": {id: address}},
 * keys in byte order. Reading checks every ID and address as allocate
 * does, and that no address is held twice. */
char       *mv_ipam_to_json (MvIpam *ipam);
MvIpam     *mv_ipam_from_json (const MvNetworkSpec *network, const char *data, gsize len,
                               GError **error);

/* ---- names on the host ---- */

/* The MAC of @machine_id's interface: locally administered, unicast,
 * "02:" and five bytes of a SHA-256 of the ID. */
char       *mv_network_mac_for (const char *machine_id);
/* Its TAP device: "mv" and 13 hex digits of such a hash, 15 bytes. */
char       *mv_network_tap_name (const char *machine_id);
/* A network's bridge: "mvbr" and 11 hex digits of a hash of its ID. */
char       *mv_network_bridge_name (const char *network_id);
