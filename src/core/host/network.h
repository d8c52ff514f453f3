/* Network: a machine's place on a host network (a NetworkManager bridge,
 * its TAP device, its address, published ports, firewall rules). A host
 * without one refuses every spec that names a network.
 *
 * What a machine holds, by state:
 * - defined: its address on its network (allocations.json), running or
 *   not, until it is released;
 * - running, paused, stopping: also its TAP, its published ports and its
 *   firewall rules;
 * - standby: all of that still (its ports stay its own), and the first
 *   packet of a new connection to it is reported as traffic, so that it
 *   is woken.
 *
 * Contract:
 * - check() runs on the main thread and does no I/O;
 * - every other call blocks and is called from worker threads, at most
 *   one at a time per machine;
 * - attach() is idempotent for a machine: asked again, it returns what the
 *   machine holds already (a machine waking from standby gets its TAP
 *   again); on failure it holds nothing new but its address;
 * - detach() and release() of a machine that holds nothing succeed. */
#pragma once
#include "runtime.h"

typedef struct _MvNetwork MvNetwork;

/* Bytes, packets, drops and errors each way, as the guest sees them. */
typedef struct {
  guint64 rx_bytes, rx_packets, rx_dropped, rx_errors;   /* what the guest received */
  guint64 tx_bytes, tx_packets, tx_dropped, tx_errors;   /* what it sent */
} MvNetworkCounters;

/* A machine that holds its place on its network, as Recover finds it. */
typedef struct {
  const MvSpec *spec;
  gboolean      sleeping;       /* on standby: traffic to it is reported */
} MvNetworkHolder;

/* Called on the main thread when traffic arrives for a machine on
 * standby; @sequence rises with each event. */
typedef void (*MvNetworkTrafficFunc) (const char *machine_id, guint64 sequence,
                                      gpointer user_data);

struct _MvNetwork {
  gpointer data;

  /* Refuses a spec whose network_name names no network (NOT_FOUND), or
   * whose static_ip is not a host address of its subnet other than the
   * gateway (INVALID_ARGUMENT) or is held by a machine other than
   * @machine_id (CONFLICT; @machine_id is NULL at create). */
  gboolean             (*check) (MvNetwork *network, const char *machine_id, const MvSpec *spec,
                                 GError **error);
  /* Main thread, no I/O: the address @machine_id holds on @spec's
   * network (dotted quad), or NULL. */
  char                *(*address_of) (MvNetwork *network, const char *machine_id,
                                      const MvSpec *spec);
  /* What the machine holds now, as attach() gave it, or NULL; makes
   * nothing (for a guest being frozen: what its VMM was given). */
  MvNetworkAttachment *(*held) (MvNetwork *network, const MvRuntimeRequest *req);
  /* Start and restore: the machine's address on @req->spec's network,
   * its TAP on that network's bridge, its ports and rules. The address
   * of a machine that moved to another network (or static_ip) is given
   * back first. */
  MvNetworkAttachment *(*attach) (MvNetwork *network, const MvRuntimeRequest *req,
                                  GError **error);
  /* The machine's VMM is gone and no frozen guest is kept: its TAP,
   * ports and rules go; it keeps its address. */
  gboolean             (*detach) (MvNetwork *network, const MvRuntimeRequest *req,
                                  GError **error);
  /* The machine went on standby: what it holds stays, and traffic to it
   * is reported. */
  gboolean             (*sleep) (MvNetwork *network, const MvRuntimeRequest *req,
                                 GError **error);
  /* Main thread; writes a record, like the machine's own: the address
   * @machine_id holds is free again (Update moved it to another network
   * or static_ip). What else it holds is given back or moved by its next
   * attach(), detach() or release(). */
  gboolean             (*forget) (MvNetwork *network, const char *machine_id, GError **error);
  /* A running (or sleeping) machine's firewall changed: its rules are
   * made again from @spec at once. */
  gboolean             (*update_rules) (MvNetwork *network, const char *machine_id,
                                        const MvSpec *spec, gboolean sleeping, GError **error);
  /* What has gone through the machine's interface, from the guest's side;
   * NOT_FOUND while it has no TAP. Cheap. */
  gboolean             (*counters) (MvNetwork *network, const char *machine_id,
                                    MvNetworkCounters *counters, GError **error);
  /* Gives back everything the machine holds, its address too. */
  gboolean             (*release) (MvNetwork *network, const MvRuntimeRequest *req,
                                   GError **error);
  /* Recover: gives back everything held by machines not in @defined (a
   * set of IDs, those with invalid records too) and the TAPs, ports and
   * rules of those in @defined but not in @holding (ID → MvNetworkHolder*:
   * those whose VMM runs or whose guest is frozen), whose ports and rules
   * are made again as their specs say. */
  gboolean             (*reconcile) (MvNetwork *network, GHashTable *defined,
                                     GHashTable *holding, GError **error);
};
