/* The host's networks for the reconciler: addresses from the records,
 * bridges and TAPs from NetworkManager, asked for on the main context. */
#include "host-network.h"
#include "core/errors.h"
#include "core/ipam.h"
#include "core/net-rules.h"
#include "counters.h"
#include "nft.h"
#include "rate-limit.h"
#include "traffic.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

struct _MvHostNetwork {
  MvNetwork       iface;
  MvNetworkStore *store;
  MvNm           *nm;
  GMainContext   *context;
  MvNft          *nft;           /* NULL: no nftables here; no ports, rules or waking */
  MvTraffic      *traffic;       /* NULL: traffic does not wake machines */
  MvNetworkTrafficFunc traffic_func;
  gpointer        traffic_data;
  guint64         sequence;      /* of the last traffic event */
  GMutex          lock;
  GHashTable     *ports;         /* machine id → its published ports (MvPortMapping*) */
};

/* ---- NetworkManager, from a worker thread ---- */

typedef enum {
  NM_ENSURE_BRIDGE,
  NM_ENSURE_TAP,
  NM_REMOVE,
} NmOp;

/* One request to MvNm, made on the main context and waited for. */
typedef struct {
  MvHostNetwork *self;
  NmOp           op;
  MvNmLinkKind   kind;          /* NM_REMOVE */
  char          *name;
  char          *bridge;        /* NM_ENSURE_TAP */
  char          *gateway_cidr;  /* NM_ENSURE_BRIDGE */
  guint          mtu;
  GCancellable  *cancellable;
  GMutex         lock;
  GCond          cond;
  gboolean       done;
  GError        *error;
} NmCall;

static void
nm_call_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  NmCall *call = user_data;
  GError *error = NULL;
  gboolean ok;

  switch (call->op)
    {
    case NM_ENSURE_BRIDGE:
      ok = mv_nm_ensure_bridge_finish (call->self->nm, result, &error);
      break;
    case NM_ENSURE_TAP:
      ok = mv_nm_ensure_tap_finish (call->self->nm, result, &error);
      break;
    case NM_REMOVE:
    default:
      ok = mv_nm_remove_finish (call->self->nm, result, &error);
      break;
    }
  g_mutex_lock (&call->lock);
  if (!ok)
    call->error = error;
  call->done = TRUE;
  g_cond_signal (&call->cond);
  g_mutex_unlock (&call->lock);
}

static gboolean
nm_call_start (gpointer user_data)
{
  NmCall *call = user_data;
  MvNm *nm = call->self->nm;

  switch (call->op)
    {
    case NM_ENSURE_BRIDGE:
      mv_nm_ensure_bridge_async (nm, call->name, call->gateway_cidr, call->mtu, call->cancellable,
                                 nm_call_done, call);
      break;
    case NM_ENSURE_TAP:
      mv_nm_ensure_tap_async (nm, call->name, call->bridge, 0, call->cancellable, nm_call_done,
                              call);
      break;
    case NM_REMOVE:
      mv_nm_remove_async (nm, call->kind, call->name, call->cancellable, nm_call_done, call);
      break;
    }
  return G_SOURCE_REMOVE;
}

static gboolean
nm_call_run (NmCall *call, GError **error)
{
  gboolean ok;

  g_mutex_init (&call->lock);
  g_cond_init (&call->cond);
  g_main_context_invoke (call->self->context, nm_call_start, call);
  g_mutex_lock (&call->lock);
  while (!call->done)
    g_cond_wait (&call->cond, &call->lock);
  g_mutex_unlock (&call->lock);
  g_mutex_clear (&call->lock);
  g_cond_clear (&call->cond);
  ok = call->error == NULL;
  if (!ok)
    g_propagate_error (error, call->error);
  return ok;
}

static char *
gateway_cidr (const MvNetworkSpec *network)
{
  g_autofree char *gateway = mv_ipv4_to_string (network->gateway);

  return g_strdup_printf ("%s/%u", gateway, network->prefix);
}

/* A guest woken by traffic answers ARP moments after its VMM starts, and
 * the client's first packet waits in the bridge's neighbour queue until
 * it does: the bridge asks every 100 ms (for 3 s, as the kernel's default
 * of three probes a second apart would), so that packet reaches the guest
 * at once rather than after a retransmission. */
#define NEIGH_RETRANS_MS     "100"
#define NEIGH_MCAST_SOLICIT  "30"

static void
write_sysctl (const char *bridge, const char *key, const char *value)
{
  g_autofree char *path = g_strdup_printf ("/proc/sys/net/ipv4/neigh/%s/%s", bridge, key);
  int fd = open (path, O_WRONLY | O_CLOEXEC);

  if (fd < 0 || write (fd, value, strlen (value)) < 0)
    g_debug ("%s: %s", path, g_strerror (errno));
  if (fd >= 0)
    close (fd);
}

/* The host forgets the guest's link-layer address, so that what is sent
 * to it while it sleeps waits for it to answer ARP again (in the
 * neighbour queue) instead of going to a TAP that nobody reads. */
static void
forget_neighbour (const char *bridge, const char *address)
{
  const char *argv[] = { "ip", "neigh", "flush", "to", address, "dev", bridge, NULL };
  g_autoptr (GError) error = NULL;
  int status = 0;

  if (!g_spawn_sync (NULL, (char **) argv, NULL, G_SPAWN_SEARCH_PATH | G_SPAWN_STDOUT_TO_DEV_NULL |
                     G_SPAWN_STDERR_TO_DEV_NULL, NULL, NULL, NULL, NULL, &status, &error) ||
      !g_spawn_check_wait_status (status, &error))
    g_debug ("ip neigh flush to %s dev %s: %s", address, bridge, error->message);
}

static void
tune_neighbours (const char *bridge)
{
  write_sysctl (bridge, "retrans_time_ms", NEIGH_RETRANS_MS);
  write_sysctl (bridge, "mcast_solicit", NEIGH_MCAST_SOLICIT);
}

static gboolean
ensure_bridge (MvHostNetwork *self, const MvNetworkSpec *network, GCancellable *cancellable,
               GError **error)
{
  g_autofree char *name = mv_network_bridge_name (network->id);
  g_autofree char *cidr = gateway_cidr (network);
  NmCall call = {
    .self = self, .op = NM_ENSURE_BRIDGE, .name = name, .gateway_cidr = cidr,
    .mtu = network->mtu, .cancellable = cancellable,
  };

  if (!nm_call_run (&call, error))
    return FALSE;
  tune_neighbours (name);
  return TRUE;
}

static gboolean
ensure_tap (MvHostNetwork *self, const char *tap, const char *bridge, GCancellable *cancellable,
            GError **error)
{
  NmCall call = {
    .self = self, .op = NM_ENSURE_TAP, .name = (char *) tap, .bridge = (char *) bridge,
    .cancellable = cancellable,
  };

  return nm_call_run (&call, error);
}

static gboolean
remove_link (MvHostNetwork *self, MvNmLinkKind kind, const char *name, GError **error)
{
  NmCall call = { .self = self, .op = NM_REMOVE, .kind = kind, .name = (char *) name };

  return nm_call_run (&call, error);
}

/* A machine's TAP, and the interface NetworkManager would not give it,
 * named for the caller. */
static gboolean
nm_failed (GError **error, const char *machine_id)
{
  if (*error && g_error_matches (*error, MV_ERROR, MV_ERROR_UNAVAILABLE))
    g_prefix_error (error, "network_name: NetworkManager is needed for machine %s: ",
                    machine_id);
  return FALSE;
}

/* ---- published ports and rules ---- */

static MvNftProtocol
nft_protocol (MvNetProtocol protocol)
{
  switch (protocol)
    {
    case MV_NET_PROTOCOL_TCP: return MV_NFT_TCP;
    case MV_NET_PROTOCOL_UDP: return MV_NFT_UDP;
    case MV_NET_PROTOCOL_ICMP: return MV_NFT_ICMP;
    case MV_NET_PROTOCOL_ANY:
    default: return MV_NFT_ANY;
    }
}

static gboolean
needs_rules (const MvSpec *spec)
{
  return spec->ports->len > 0 || json_array_get_length (spec->firewall) > 0;
}

static gboolean
no_nftables (GError **error, const MvSpec *spec)
{
  return mv_error_set (error, MV_ERROR_UNSUPPORTED, "%s: nftables is not available on this host",
                       spec->ports->len > 0 ? "ports" : "firewall");
}

/* The machine's published ports, firewall rules and (while it sleeps)
 * wake log, as its spec says, replacing what it had. */
static gboolean
apply_rules (MvHostNetwork *self, const char *machine_id, const MvSpec *spec, guint32 address,
             const char *bridge, gboolean sleeping, GError **error)
{
  g_autoptr (GPtrArray) rules = NULL;
  g_autofree MvNftPort *ports = NULL;
  g_autofree MvNftRule *nft_rules = NULL;
  MvNftMachine machine = {
    .machine_id = machine_id, .address = address, .bridge = bridge, .sleeping = sleeping,
  };

  if (!self->nft)
    return !needs_rules (spec) || no_nftables (error, spec);
  if (!(rules = mv_firewall_rules_parse (spec->firewall, error)))
    return FALSE;
  ports = g_new0 (MvNftPort, MAX (spec->ports->len, 1));
  for (guint i = 0; i < spec->ports->len; i++)
    {
      const MvPortMapping *p = spec->ports->pdata[i];

      ports[i] = (MvNftPort) { p->host_address, p->host_port, p->guest_port,
                               nft_protocol (p->protocol) };
    }
  nft_rules = g_new0 (MvNftRule, MAX (rules->len, 1));
  for (guint i = 0; i < rules->len; i++)
    {
      const MvFirewallRule *r = rules->pdata[i];

      nft_rules[i] = (MvNftRule) { r->allow, nft_protocol (r->protocol), r->port_min, r->port_max,
                                   r->source, r->source_prefix };
    }
  machine.ports = ports;
  machine.n_ports = spec->ports->len;
  machine.rules = nft_rules;
  machine.n_rules = rules->len;
  return mv_nft_apply_machine (self->nft, &machine, error);
}

static gboolean
remove_rules (MvHostNetwork *self, const char *machine_id, GError **error)
{
  return !self->nft || mv_nft_remove_machine (self->nft, machine_id, error);
}

/* The first of @ports another machine holding its ports publishes too:
 * CONFLICT naming it. Called with the lock held. */
static gboolean
check_ports_locked (MvHostNetwork *self, const char *machine_id, const GPtrArray *ports,
                    GError **error)
{
  GHashTableIter iter;
  gpointer holder, held;

  g_hash_table_iter_init (&iter, self->ports);
  while (g_hash_table_iter_next (&iter, &holder, &held))
    {
      const MvPortMapping *taken;

      if (g_strcmp0 (holder, machine_id) == 0 || !(taken = mv_port_mappings_conflict (held, ports)))
        continue;
      for (guint i = 0; i < ports->len; i++)
        if (mv_port_mapping_overlaps (ports->pdata[i], taken))
          {
            g_autofree char *text = mv_port_mapping_to_string (ports->pdata[i]);

            return mv_error_set (error, MV_ERROR_CONFLICT,
                                 "ports[%u]: %s: machine %s publishes that port already", i, text,
                                 (const char *) holder);
          }
    }
  return TRUE;
}

/* @machine_id holds @ports from now on (none: it holds none). */
static gboolean
hold_ports (MvHostNetwork *self, const char *machine_id, const GPtrArray *ports, GError **error)
{
  gboolean ok = TRUE;

  g_mutex_lock (&self->lock);
  if (!ports || ports->len == 0)
    g_hash_table_remove (self->ports, machine_id);
  else if ((ok = check_ports_locked (self, machine_id, ports, error)))
    {
      GPtrArray *copy = g_ptr_array_new_with_free_func (g_free);

      for (guint i = 0; i < ports->len; i++)
        g_ptr_array_add (copy, mv_port_mapping_copy (ports->pdata[i]));
      g_hash_table_insert (self->ports, g_strdup (machine_id), copy);
    }
  g_mutex_unlock (&self->lock);
  return ok;
}

/* A network's own rules: its bridge's traffic forwarded, and masqueraded
 * when it has NAT. */
static void
apply_network_rules (MvHostNetwork *self, const MvNetworkSpec *network)
{
  g_autofree char *bridge = mv_network_bridge_name (network->id);
  g_autoptr (GError) error = NULL;

  if (self->nft &&
      !mv_nft_apply_network (self->nft, network->id, bridge, network->address, network->prefix,
                             network->nat, &error))
    g_warning ("Network %s: its forwarding and NAT rules are not in place: %s", network->name,
               error->message);
}

/* ---- traffic ---- */

static void
on_traffic (guint32 address, guint8 protocol, guint16 port, gpointer data)
{
  MvHostNetwork *self = data;
  g_autoptr (GPtrArray) networks = mv_network_store_list (self->store);
  g_autofree char *dotted = mv_ipv4_to_string (address);

  for (guint i = 0; i < networks->len; i++)
    {
      MvNetworkSpec *network = networks->pdata[i];
      g_autofree char *machine_id = NULL;

      if (!mv_network_contains (network, address) ||
          !(machine_id = mv_network_store_instance_at (self->store, network->id, dotted)))
        continue;
      /* Rising across restarts of the daemon, as the machines' records
       * keep the last one. */
      self->sequence = MAX (self->sequence + 1, (guint64) g_get_real_time ());
      if (self->traffic_func)
        self->traffic_func (machine_id, self->sequence, self->traffic_data);
      return;
    }
}

/* ---- MvNetwork ---- */

static MvHostNetwork *
self_of (MvNetwork *network)
{
  return network->data;
}

static gboolean
net_check (MvNetwork *network, const char *machine_id, const MvSpec *spec, GError **error)
{
  MvHostNetwork *self = self_of (network);
  gboolean ok;

  if (!mv_network_store_check (self->store, spec->network_name, machine_id, spec->static_ip,
                               error))
    return FALSE;
  if (!self->nft && needs_rules (spec))
    return no_nftables (error, spec);
  g_mutex_lock (&self->lock);
  ok = check_ports_locked (self, machine_id, spec->ports, error);
  g_mutex_unlock (&self->lock);
  return ok;
}

static char *
net_address_of (MvNetwork *network, const char *machine_id, const MvSpec *spec)
{
  return mv_network_store_address_of (self_of (network)->store, spec->network_name, machine_id);
}

/* What @machine_id holding @address on @net is given. */
static MvNetworkAttachment *
describe (const MvNetworkSpec *net, const char *machine_id, const char *address)
{
  MvNetworkAttachment *attachment = g_new0 (MvNetworkAttachment, 1);

  attachment->network_id = g_strdup (net->id);
  attachment->tap_device = mv_network_tap_name (machine_id);
  attachment->mac_address = mv_network_mac_for (machine_id);
  attachment->address = g_strdup_printf ("%s/%u", address, net->prefix);
  attachment->gateway = mv_ipv4_to_string (net->gateway);
  attachment->mtu = net->mtu;
  return attachment;
}

static MvNetworkAttachment *
net_held (MvNetwork *network, const MvRuntimeRequest *req)
{
  MvHostNetwork *self = self_of (network);
  g_autoptr (MvNetworkSpec) net = mv_network_store_find (self->store, req->spec->network_name);
  g_autofree char *address = net ? mv_network_store_address_of (self->store, net->id,
                                                                 req->machine_id) : NULL;

  return address ? describe (net, req->machine_id, address) : NULL;
}

static MvNetworkAttachment *
net_attach (MvNetwork *network, const MvRuntimeRequest *req, GError **error)
{
  MvHostNetwork *self = self_of (network);
  const MvSpec *spec = req->spec;
  g_autoptr (MvNetworkSpec) net = mv_network_store_find (self->store, spec->network_name);
  g_autoptr (MvNetworkAttachment) attachment = NULL;
  g_autofree char *address = NULL;
  g_autofree char *bridge = NULL;

  if (!net)
    {
      mv_error_set (error, MV_ERROR_NOT_FOUND, "network_name: no network called %s",
                    spec->network_name);
      return NULL;
    }
  /* Moved to this network: what it held on another is given back. */
  if (!mv_network_store_release_elsewhere (self->store, req->machine_id, net->id, error) ||
      !mv_network_store_allocate (self->store, net->id, req->machine_id, spec->static_ip,
                                  &address, error))
    return NULL;

  bridge = mv_network_bridge_name (net->id);
  attachment = describe (net, req->machine_id, address);
  if (!ensure_bridge (self, net, req->cancellable, error) ||
      !ensure_tap (self, attachment->tap_device, bridge, req->cancellable, error))
    {
      nm_failed (error, req->machine_id);
      return NULL;
    }
  apply_network_rules (self, net);
  /* Its ports, its rules (awake), and on a VMM without a limiter of its
   * own its rate limits; what fails gives back what this attach made. */
  if (!hold_ports (self, req->machine_id, spec->ports, error))
    goto undo;
  {
    guint32 host_order = 0;

    mv_ipv4_parse (address, &host_order);
    if (!apply_rules (self, req->machine_id, spec, host_order, bridge, FALSE, error))
      goto undo;
  }
  if (req->host_limits_network &&
      (spec->upload_bytes_per_second || spec->download_bytes_per_second) &&
      !mv_rate_limit_apply (attachment->tap_device, spec->download_bytes_per_second,
                            spec->upload_bytes_per_second, error))
    goto undo;
  return g_steal_pointer (&attachment);

undo:
  hold_ports (self, req->machine_id, NULL, NULL);
  remove_rules (self, req->machine_id, NULL);
  remove_link (self, MV_NM_LINK_TAP, attachment->tap_device, NULL);
  return NULL;
}

static gboolean
net_detach (MvNetwork *network, const MvRuntimeRequest *req, GError **error)
{
  MvHostNetwork *self = self_of (network);
  g_autofree char *tap = mv_network_tap_name (req->machine_id);
  g_autoptr (GError) local = NULL;

  if (!remove_rules (self, req->machine_id, error))
    return FALSE;
  hold_ports (self, req->machine_id, NULL, NULL);
  /* What a limit on the TAP's upload made (its IFB) goes with it. */
  if (!mv_rate_limit_apply (tap, 0, 0, &local))
    {
      g_warning ("Machine %s: %s", req->machine_id, local->message);
      g_clear_error (&local);
    }
  if (remove_link (self, MV_NM_LINK_TAP, tap, &local))
    return TRUE;
  /* Without NetworkManager there is nobody to ask: whatever of the TAP
   * it keeps is swept by the next Recover. A stop or a destroy is not
   * held up by it. */
  if (g_error_matches (local, MV_ERROR, MV_ERROR_UNAVAILABLE))
    {
      g_warning ("Machine %s: its TAP %s is left to the next start of microvmd: %s",
                 req->machine_id, tap, local->message);
      return TRUE;
    }
  g_propagate_error (error, g_steal_pointer (&local));
  return FALSE;
}

static gboolean
net_sleep (MvNetwork *network, const MvRuntimeRequest *req, GError **error)
{
  MvHostNetwork *self = self_of (network);
  g_autoptr (MvNetworkSpec) net = mv_network_store_find (self->store, req->spec->network_name);
  g_autofree char *address = NULL, *bridge = NULL;
  guint32 host_order = 0;

  if (!net || !(address = mv_network_store_address_of (self->store, net->id, req->machine_id)))
    return mv_error_set (error, MV_ERROR_NOT_FOUND, "network_name: machine %s holds no address "
                         "on %s", req->machine_id, req->spec->network_name);
  if (!self->nft || !self->traffic)
    return mv_error_set (error, MV_ERROR_UNSUPPORTED, "this host cannot watch for traffic "
                         "(nftables and its log are needed)");
  mv_ipv4_parse (address, &host_order);
  bridge = mv_network_bridge_name (net->id);
  if (!apply_rules (self, req->machine_id, req->spec, host_order, bridge, TRUE, error))
    return FALSE;
  forget_neighbour (bridge, address);
  return TRUE;
}

static gboolean
net_update_rules (MvNetwork *network, const char *machine_id, const MvSpec *spec,
                  gboolean sleeping, GError **error)
{
  MvHostNetwork *self = self_of (network);
  g_autoptr (MvNetworkSpec) net = mv_network_store_find (self->store, spec->network_name);
  g_autofree char *address = NULL, *bridge = NULL;
  guint32 host_order = 0;

  if (!net || !(address = mv_network_store_address_of (self->store, net->id, machine_id)))
    return TRUE;    /* not attached yet: its next start applies them */
  mv_ipv4_parse (address, &host_order);
  bridge = mv_network_bridge_name (net->id);
  return apply_rules (self, machine_id, spec, host_order, bridge, sleeping, error);
}

static gboolean
net_counters (MvNetwork *network, const char *machine_id, MvNetworkCounters *counters,
              GError **error)
{
  g_autofree char *tap = mv_network_tap_name (machine_id);
  MvNetCounters c;

  if (!mv_net_counters_read (tap, &c, error))
    return FALSE;
  *counters = (MvNetworkCounters) {
    c.rx_bytes, c.rx_packets, c.rx_dropped, c.rx_errors,
    c.tx_bytes, c.tx_packets, c.tx_dropped, c.tx_errors,
  };
  return TRUE;
}

static gboolean
net_release (MvNetwork *network, const MvRuntimeRequest *req, GError **error)
{
  MvHostNetwork *self = self_of (network);

  /* A machine on no network may still hold an address it had before an
   * Update; it has no TAP or rules. */
  return (!req->spec->network_name || net_detach (network, req, error)) &&
         mv_network_store_release_elsewhere (self->store, req->machine_id, NULL, error);
}

static gboolean
net_forget (MvNetwork *network, const char *machine_id, GError **error)
{
  return mv_network_store_release_elsewhere (self_of (network)->store, machine_id, NULL, error);
}

/* The connections of ours NetworkManager has, read on the main context. */
typedef struct {
  MvHostNetwork *self;
  GPtrArray     *links;
  GError        *error;
  GMutex         lock;
  GCond          cond;
  gboolean       done;
} ListCall;

static gboolean
list_on_main (gpointer user_data)
{
  ListCall *call = user_data;
  GPtrArray *links = mv_nm_list (call->self->nm, &call->error);

  g_mutex_lock (&call->lock);
  call->links = links;
  call->done = TRUE;
  g_cond_signal (&call->cond);
  g_mutex_unlock (&call->lock);
  return G_SOURCE_REMOVE;
}

static GPtrArray *
list_links (MvHostNetwork *self, GError **error)
{
  ListCall call = { .self = self };

  g_mutex_init (&call.lock);
  g_cond_init (&call.cond);
  g_main_context_invoke (self->context, list_on_main, &call);
  g_mutex_lock (&call.lock);
  while (!call.done)
    g_cond_wait (&call.cond, &call.lock);
  g_mutex_unlock (&call.lock);
  g_mutex_clear (&call.lock);
  g_cond_clear (&call.cond);
  if (call.error)
    g_propagate_error (error, call.error);
  return call.links;
}

/* The rules of machines that hold their place are made again as their
 * specs say (the ports held again); those of others, and of networks that
 * are gone, are removed. */
static void
reconcile_rules (MvHostNetwork *self, GHashTable *holding, GPtrArray *networks)
{
  g_autoptr (GError) local = NULL;
  g_autoptr (GPtrArray) ruled = NULL;
  GHashTableIter iter;
  gpointer id, value;

  if (!self->nft)
    return;
  g_hash_table_iter_init (&iter, holding);
  while (g_hash_table_iter_next (&iter, &id, &value))
    {
      const MvNetworkHolder *holder = value;

      if (!hold_ports (self, id, holder->spec->ports, &local) ||
          !net_update_rules (&self->iface, id, holder->spec, holder->sleeping, &local))
        {
          g_warning ("Machine %s: its ports and rules are not in place: %s", (const char *) id,
                     local->message);
          g_clear_error (&local);
        }
    }
  if ((ruled = mv_nft_list_machines (self->nft, &local)))
    for (guint i = 0; i < ruled->len; i++)
      if (!g_hash_table_contains (holding, ruled->pdata[i]))
        {
          g_message ("Networks: removing the rules of machine %s, which holds no place",
                     (const char *) ruled->pdata[i]);
          remove_rules (self, ruled->pdata[i], NULL);
        }
  g_clear_error (&local);
  g_clear_pointer (&ruled, g_ptr_array_unref);
  if ((ruled = mv_nft_list_networks (self->nft, &local)))
    for (guint i = 0; i < ruled->len; i++)
      {
        gboolean known = FALSE;

        for (guint j = 0; j < networks->len && !known; j++)
          known = g_str_equal (((MvNetworkSpec *) networks->pdata[j])->id, ruled->pdata[i]);
        if (!known)
          mv_nft_remove_network (self->nft, ruled->pdata[i], NULL);
      }
}

static gboolean
net_reconcile (MvNetwork *network, GHashTable *defined, GHashTable *holding, GError **error)
{
  MvHostNetwork *self = self_of (network);
  g_autoptr (GHashTable) taps = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  g_autoptr (GHashTable) bridges = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  g_autoptr (GPtrArray) networks = mv_network_store_list (self->store);
  g_autoptr (GPtrArray) links = NULL;
  g_autoptr (GError) local = NULL;
  GHashTableIter iter;
  gpointer id;
  guint released = 0;

  if (!mv_network_store_reconcile (self->store, defined, &released, error))
    return FALSE;
  if (released > 0)
    g_message ("Networks: gave back %u addresses of machines that are gone", released);

  g_hash_table_iter_init (&iter, holding);
  while (g_hash_table_iter_next (&iter, &id, NULL))
    g_hash_table_add (taps, mv_network_tap_name (id));
  for (guint i = 0; i < networks->len; i++)
    {
      MvNetworkSpec *net = networks->pdata[i];

      g_hash_table_add (bridges, mv_network_bridge_name (net->id));
      /* Every network's bridge is up, machines on it or not. */
      if (!ensure_bridge (self, net, NULL, &local))
        {
          g_warning ("Network %s: its bridge is not up: %s", net->name, local->message);
          g_clear_error (&local);
        }
      apply_network_rules (self, net);
    }
  reconcile_rules (self, holding, networks);

  links = list_links (self, &local);
  if (!links)
    {
      /* No NetworkManager, no links of ours to sweep. */
      g_debug ("Networks: links not swept: %s", local->message);
      return TRUE;
    }
  for (guint i = 0; i < links->len; i++)
    {
      MvNmLink *link = links->pdata[i];
      GHashTable *kept = link->kind == MV_NM_LINK_TAP ? taps : bridges;

      if (g_hash_table_contains (kept, link->name))
        continue;
      g_message ("Networks: removing %s %s, which nothing holds",
                 link->kind == MV_NM_LINK_TAP ? "TAP" : "bridge", link->name);
      if (!remove_link (self, link->kind, link->name, &local))
        {
          g_warning ("Networks: could not remove %s: %s", link->name, local->message);
          g_clear_error (&local);
        }
    }
  return TRUE;
}

/* ---- bridges in the background, on the main thread ---- */

static void
on_bridge_ensured (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autofree char *name = user_data;
  g_autoptr (GError) error = NULL;

  if (mv_nm_ensure_bridge_finish (MV_NM (source), result, &error))
    tune_neighbours (name);
  else if (!g_error_matches (error, MV_ERROR, MV_ERROR_UNAVAILABLE))
    g_warning ("Network bridge %s is not up: %s", name, error->message);
}

static void
on_bridge_removed (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autofree char *name = user_data;
  g_autoptr (GError) error = NULL;

  if (!mv_nm_remove_finish (MV_NM (source), result, &error))
    g_warning ("Network bridge %s could not be removed: %s", name, error->message);
}

/* Main thread: the daemon's nftables table and its wake log, made once
 * the host has a network (a host without one is left as it is). Made
 * before any machine can attach, and not changed after. */
static void
enable_rules (MvHostNetwork *self)
{
  g_autoptr (GError) error = NULL;

  if (self->nft)
    return;
  self->nft = mv_nft_new (MV_HOST_NETWORK_WAKE_GROUP, &error);
  if (!self->nft)
    {
      g_warning ("Networks: no nftables (%s): published ports and firewall rules are refused, "
                 "and traffic does not wake machines", error->message);
      return;
    }
  self->traffic = mv_traffic_new (MV_HOST_NETWORK_WAKE_GROUP, MV_HOST_NETWORK_WAKE_INTERVAL_MS,
                                  on_traffic, self, &error);
  if (!self->traffic)
    g_warning ("Networks: traffic will not wake machines on standby: %s", error->message);
}

void
mv_host_network_added (MvHostNetwork *self, const MvNetworkSpec *network)
{
  enable_rules (self);
  g_autofree char *cidr = gateway_cidr (network);
  char *name = mv_network_bridge_name (network->id);

  /* Its forwarding and NAT rules are made by the first attach to it (and
   * by Recover), in a worker: none are needed before a machine is on it. */
  mv_nm_ensure_bridge_async (self->nm, name, cidr, network->mtu, NULL, on_bridge_ensured, name);
}

void
mv_host_network_removed (MvHostNetwork *self, const MvNetworkSpec *network)
{
  char *name = mv_network_bridge_name (network->id);

  g_autoptr (GError) error = NULL;

  mv_nm_remove_async (self->nm, MV_NM_LINK_BRIDGE, name, NULL, on_bridge_removed, name);
  if (self->nft && !mv_nft_remove_network (self->nft, network->id, &error))
    g_warning ("Network %s: its rules could not be removed: %s", network->name, error->message);
}

void
mv_host_network_set_traffic_func (MvHostNetwork *self, MvNetworkTrafficFunc func, gpointer data)
{
  self->traffic_func = func;
  self->traffic_data = data;
}

MvHostNetwork *
mv_host_network_new (MvNetworkStore *store, MvNm *nm)
{
  MvHostNetwork *self = g_new0 (MvHostNetwork, 1);

  self->store = store;
  self->nm = nm;
  self->context = g_main_context_ref_thread_default ();
  g_mutex_init (&self->lock);
  self->ports = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
                                       (GDestroyNotify) g_ptr_array_unref);
  {
    g_autoptr (GPtrArray) networks = mv_network_store_list (store);

    if (networks->len > 0)
      enable_rules (self);
  }
  self->iface = (MvNetwork) {
    .data = self,
    .check = net_check,
    .address_of = net_address_of,
    .held = net_held,
    .attach = net_attach,
    .detach = net_detach,
    .sleep = net_sleep,
    .update_rules = net_update_rules,
    .counters = net_counters,
    .release = net_release,
    .forget = net_forget,
    .reconcile = net_reconcile,
  };
  return self;
}

void
mv_host_network_free (MvHostNetwork *self)
{
  if (!self)
    return;
  g_clear_pointer (&self->traffic, mv_traffic_free);
  g_clear_pointer (&self->nft, mv_nft_free);
  g_hash_table_unref (self->ports);
  g_mutex_clear (&self->lock);
  g_main_context_unref (self->context);
  g_free (self);
}

MvNetwork *
mv_host_network_iface (MvHostNetwork *self)
{
  return &self->iface;
}
