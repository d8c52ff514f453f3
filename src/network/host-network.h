/* MvHostNetwork: the host's networks as the reconciler sees them (the
 * MvNetwork of core/host/network.h), made of the networks' records
 * (storage/networks.h: addresses) and NetworkManager (nm.h: bridges and
 * TAPs).
 *
 * Its MvNetwork calls block in worker threads; what they ask of
 * NetworkManager is handed to the main context the MvHostNetwork was made
 * on, where MvNm lives, and waited for. The main context must therefore
 * keep running while a call is under way (it never waits for a worker).
 *
 * Published ports, firewall rules and the wake log of machines on
 * standby are nftables rules (nft.h) in the daemon's table; the wake log
 * is read from NFLOG (traffic.h) and passed on as traffic for the machine
 * holding the address. Rate limits are the VMM's where it has them, else
 * traffic control on the TAP (rate-limit.h).
 *
 * Every network's bridge is kept up while the network exists: ensured when
 * the host network is made and when a network is created, removed when it
 * is deleted. A bridge NetworkManager could not make is tried again at the
 * next attach to it. */
#pragma once
#include "core/host/network.h"
#include "nm.h"
#include "storage/networks.h"

/* The NFLOG group of the wake log (nft.h), and how often one address
 * is reported at most. */
#define MV_HOST_NETWORK_WAKE_GROUP        7461
#define MV_HOST_NETWORK_WAKE_INTERVAL_MS  1000

typedef struct _MvHostNetwork MvHostNetwork;

/* @store and @nm outlive it; made on the thread-default main context. */
MvHostNetwork *mv_host_network_new (MvNetworkStore *store, MvNm *nm);
void           mv_host_network_free (MvHostNetwork *self);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (MvHostNetwork, mv_host_network_free)

MvNetwork     *mv_host_network_iface (MvHostNetwork *self);

/* Main thread: @network (a record) was created or is about to be deleted;
 * its bridge is made or removed in the background. */
void           mv_host_network_added (MvHostNetwork *self, const MvNetworkSpec *network);
void           mv_host_network_removed (MvHostNetwork *self, const MvNetworkSpec *network);
/* Told, on the main thread, of traffic for a machine on standby (seed
 * 000: the daemon's traffic listener passes it to RestoreAfterTraffic). */
void           mv_host_network_set_traffic_func (MvHostNetwork *self, MvNetworkTrafficFunc func,
                                                 gpointer data);
