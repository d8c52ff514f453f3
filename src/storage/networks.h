/* The host's networks on disk: <state>/networks/<id>/ holds network.json
 * (the network) and allocations.json (which machine holds which address).
 * A network is written in .staging-<id>/ and renamed into place whole;
 * one being deleted is renamed to .deleting-<id>/ first; what a crash
 * leaves of either is swept when the store opens. These are records
 * only: nothing here touches the host's interfaces. Every function is
 * safe from any thread. */
#pragma once
#include "core/ipam.h"
#include "core/network-spec.h"
#include "store/store.h"

#include <gio/gio.h>

#define MV_NETWORK_RECORD_NAME      "network.json"
#define MV_ALLOCATIONS_RECORD_NAME  "allocations.json"

typedef struct _MvNetworkStore MvNetworkStore;

/* Opens @dir (made 0700 if missing), sweeps what a crash left, and loads
 * every network; each invalid one is added to @invalid (may be NULL),
 * logged and left as it is. */
MvNetworkStore *mv_network_store_open (const char *dir, GPtrArray *invalid /* MvInvalidRecord* */,
                                       GError **error);
void            mv_network_store_free (MvNetworkStore *store);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (MvNetworkStore, mv_network_store_free)

/* Blocks (fsync): the network of @spec, with a new ID, written whole and
 * with no allocations. MV_ERROR_ALREADY_EXISTS if the name is taken (or
 * being taken), MV_ERROR_INVALID_ARGUMENT naming subnet and the other
 * network if the subnets overlap, MV_ERROR_RESOURCE_EXHAUSTED past
 * MV_NETWORKS_MAX; on failure nothing of it is left. */
MvNetworkSpec  *mv_network_store_create (MvNetworkStore *store, const MvNetworkSpec *spec,
                                         GError **error);
/* Blocks: removes the network with @id and its allocations;
 * MV_ERROR_NOT_FOUND if none. It is no longer found from the moment this
 * is called. */
gboolean        mv_network_store_delete (MvNetworkStore *store, const char *id, GError **error);
/* A copy of the network called (or with the ID) @name_or_id, or NULL. */
MvNetworkSpec  *mv_network_store_find (MvNetworkStore *store, const char *name_or_id);
/* Copies of every network (MvNetworkSpec*), by name. */
GPtrArray      *mv_network_store_list (MvNetworkStore *store);

/* Blocks: mv_ipam_allocate() on the network @name_or_id, written to its
 * allocations.json before this returns; *@address is the dotted quad.
 * MV_ERROR_NOT_FOUND naming network_name for an unknown network. On a
 * failed write the table is as it was. */
gboolean        mv_network_store_allocate (MvNetworkStore *store, const char *name_or_id,
                                           const char *machine_id, const char *static_ip,
                                           char **address, GError **error);
/* The address @machine_id holds on @name_or_id (dotted quad), or NULL.
 * Does no I/O. */
char           *mv_network_store_address_of (MvNetworkStore *store, const char *name_or_id,
                                             const char *machine_id);
/* Whether mv_network_store_allocate() would succeed, without allocating:
 * the same errors. @machine_id may be NULL (a machine not yet created).
 * Does no I/O. */
gboolean        mv_network_store_check (MvNetworkStore *store, const char *name_or_id,
                                        const char *machine_id, const char *static_ip,
                                        GError **error);
/* Blocks: what @machine_id holds on every network but @keep_id (NULL:
 * on every network) is free again, on disk. */
gboolean        mv_network_store_release_elsewhere (MvNetworkStore *store,
                                                    const char *machine_id,
                                                    const char *keep_id, GError **error);
/* Blocks: what @machine_id holds on @name_or_id is free again, on disk. */
gboolean        mv_network_store_release (MvNetworkStore *store, const char *name_or_id,
                                          const char *machine_id, GError **error);
/* Blocks: on every network, releases what machines not in @live (a set
 * of IDs) hold, and writes the tables that changed; *@released (may be
 * NULL) counts them. @live must hold every machine still defined, those
 * whose records are invalid too: they keep their addresses. */
gboolean        mv_network_store_reconcile (MvNetworkStore *store, GHashTable *live,
                                            guint *released, GError **error);
/* The machine holding @address on @name_or_id, or NULL. */
char           *mv_network_store_instance_at (MvNetworkStore *store, const char *name_or_id,
                                              const char *address);
