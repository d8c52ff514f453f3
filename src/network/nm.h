/* MvNm: the bridges and TAP devices of microvmd's networks, made by
 * NetworkManager through libnm.
 *
 * An MvNm holds one NMClient on the thread-default main context of the
 * thread that created it (the daemon's main loop) and never blocks it:
 * every operation is asynchronous, in the GAsyncReadyCallback style, and
 * finishes on that context. Reads of the client's cache (mv_nm_list())
 * are synchronous because they do no I/O.
 *
 * What NetworkManager is given:
 * - a bridge is a connection of type bridge with an interface name, STP
 *   off, IPv4 method manual with the gateway address (the host's side of
 *   the network), IPv6 disabled, an optional MTU, autoconnect on;
 * - a TAP is a connection of type tun, mode tap, owned by a uid so that an
 *   unprivileged VMM can open it, one queue, no packet information, a port
 *   of its bridge (master + slave-type bridge), autoconnect on. It carries
 *   the bridge's MTU so that joining does not lower the bridge's.
 * Each connection's id is MV_NM_ID_PREFIX + the interface name, and its
 * UUID is derived from the kind and the name (SHA-1, version 5 layout), so
 * the daemon finds its own connections again after any restart and never
 * touches anybody else's.
 *
 * The connections are added in memory (NM_SETTINGS_ADD_CONNECTION2_FLAG_
 * IN_MEMORY), not written as keyfiles: microvmd's records are the truth
 * about which networks exist, and Recover asks for them again at every
 * start, so nothing on disk can outlive the daemon or disagree with its
 * records. NetworkManager keeps in-memory profiles under /run across its
 * own restarts; after a reboot the daemon re-creates them.
 *
 * An ensure finishes once the connection is activated: the bridge is up
 * with its address, the TAP exists and is a port of its bridge. Ensuring
 * what is already there as asked changes nothing (an active connection is
 * not re-activated: a running VMM keeps its TAP); a connection of ours
 * whose settings differ is replaced. Removing deletes the connection, and
 * with it the device NetworkManager made; removing what does not exist
 * succeeds.
 *
 * MvNm remembers what it was asked to ensure (until it is asked to remove
 * it). When NetworkManager leaves the bus and comes back, it ensures all of
 * that again, bridges before TAPs, and emits "restored" when done.
 *
 * Errors are in MV_ERROR: names longer than MV_NM_IFNAME_MAX bytes or not
 * valid interface names, bad gateways and MTUs are MV_ERROR_INVALID_
 * ARGUMENT; a TAP whose bridge is not one of ours is MV_ERROR_NOT_FOUND;
 * NetworkManager not on the bus is MV_ERROR_UNAVAILABLE; what
 * NetworkManager refuses or fails to activate is MV_ERROR_FAILED with its
 * message. */
#pragma once

#include <gio/gio.h>
#include <sys/types.h>

G_BEGIN_DECLS

#define MV_NM_ID_PREFIX      "microvmd-"
/* IFNAMSIZ - 1: the kernel's limit on interface names. */
#define MV_NM_IFNAME_MAX     15
/* How long an activation may take before an ensure fails. */
#define MV_NM_ACTIVATE_TIMEOUT_MS 30000

typedef enum {
  MV_NM_LINK_BRIDGE,
  MV_NM_LINK_TAP,
} MvNmLinkKind;

/* A connection of ours as NetworkManager has it, from mv_nm_list(). */
typedef struct {
  MvNmLinkKind kind;
  char        *name;        /* the interface name */
  char        *bridge;      /* a TAP's bridge; NULL for a bridge */
  gboolean     active;      /* activated (device up as configured) */
} MvNmLink;

void mv_nm_link_free (MvNmLink *link);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (MvNmLink, mv_nm_link_free)

#define MV_TYPE_NM (mv_nm_get_type ())
G_DECLARE_FINAL_TYPE (MvNm, mv_nm, MV, NM, GObject)

/* Connects to NetworkManager on @bus (NULL: the system bus). Succeeds when
 * NetworkManager is not running: operations then fail with
 * MV_ERROR_UNAVAILABLE until it appears. */
void        mv_nm_new_async            (GDBusConnection     *bus,
                                        GCancellable        *cancellable,
                                        GAsyncReadyCallback  callback,
                                        gpointer             user_data);
MvNm       *mv_nm_new_finish           (GAsyncResult        *result,
                                        GError             **error);

/* Whether NetworkManager owns its name on the bus. */
gboolean    mv_nm_is_running           (MvNm *nm);

/* @gateway_cidr: the bridge's own IPv4 address with prefix, "10.0.0.1/24".
 * @mtu: 0 for NetworkManager's default. */
void        mv_nm_ensure_bridge_async  (MvNm                *nm,
                                        const char          *name,
                                        const char          *gateway_cidr,
                                        guint                mtu,
                                        GCancellable        *cancellable,
                                        GAsyncReadyCallback  callback,
                                        gpointer             user_data);
gboolean    mv_nm_ensure_bridge_finish (MvNm                *nm,
                                        GAsyncResult        *result,
                                        GError             **error);

/* @bridge must have been ensured by this MvNm. */
void        mv_nm_ensure_tap_async     (MvNm                *nm,
                                        const char          *name,
                                        const char          *bridge,
                                        uid_t                owner_uid,
                                        GCancellable        *cancellable,
                                        GAsyncReadyCallback  callback,
                                        gpointer             user_data);
gboolean    mv_nm_ensure_tap_finish    (MvNm                *nm,
                                        GAsyncResult        *result,
                                        GError             **error);

/* Forgets the link and deletes its connection; finishes when the device
 * is gone. Removing a bridge does not remove its TAPs. */
void        mv_nm_remove_async         (MvNm                *nm,
                                        MvNmLinkKind         kind,
                                        const char          *name,
                                        GCancellable        *cancellable,
                                        GAsyncReadyCallback  callback,
                                        gpointer             user_data);
gboolean    mv_nm_remove_finish        (MvNm                *nm,
                                        GAsyncResult        *result,
                                        GError             **error);

/* The connections of ours NetworkManager has (by id prefix), bridges
 * first, each kind by name; for Recover to reconcile. An array of
 * MvNmLink. */
GPtrArray  *mv_nm_list                 (MvNm                *nm,
                                        GError             **error);

/* Checks an interface name: 1..MV_NM_IFNAME_MAX bytes of letters, digits,
 * '-', '_' and '.', not "." or "..". */
gboolean    mv_nm_check_ifname         (const char          *name,
                                        GError             **error);

G_END_DECLS
