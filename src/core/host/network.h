/* Network: a machine's place on a host network (NetworkManager bridge,
 * TAP device, address, published ports, firewall rules). Not on this host
 * yet: a daemon without one refuses every spec field that needs it; the
 * destroy of a machine releases what it holds (reconcile, destroy order).
 * Contract:
 * - attach() and release() block and are called from worker threads, at
 *   most one at a time per machine;
 * - attach() is idempotent for a machine: asked again, it returns what the
 *   machine holds already; on failure it holds nothing new;
 * - release() of a machine that holds nothing succeeds. */
#pragma once
#include "runtime.h"

typedef struct _MvNetwork MvNetwork;

/* What a machine holds on its network, for the runtime to give the VMM. */
typedef struct {
  char *tap_device;            /* the TAP the VMM opens */
  char *mac_address;
  char *address;               /* the guest's address, CIDR notation */
  char *gateway;
} MvNetworkAttachment;

void mv_network_attachment_free (MvNetworkAttachment *attachment);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (MvNetworkAttachment, mv_network_attachment_free)

struct _MvNetwork {
  gpointer data;

  /* Allocates the machine's address and TAP on @req->spec's network. */
  MvNetworkAttachment *(*attach) (MvNetwork *network, const MvRuntimeRequest *req,
                                  GError **error);
  /* Gives back the address, TAP, ports and rules the machine holds. */
  gboolean             (*release) (MvNetwork *network, const MvRuntimeRequest *req,
                                   GError **error);
};
