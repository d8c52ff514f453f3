/* The host's networks for the reconciler: addresses from the records,
 * bridges and TAPs from NetworkManager, asked for on the main context. */
#include "host-network.h"
#include "core/errors.h"
#include "core/ipam.h"

struct _MvHostNetwork {
  MvNetwork       iface;
  MvNetworkStore *store;
  MvNm           *nm;
  GMainContext   *context;
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

  return nm_call_run (&call, error);
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

  return mv_network_store_check (self->store, spec->network_name, machine_id, spec->static_ip,
                                 error);
}

static char *
net_address_of (MvNetwork *network, const char *machine_id, const MvSpec *spec)
{
  return mv_network_store_address_of (self_of (network)->store, spec->network_name, machine_id);
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
  attachment = g_new0 (MvNetworkAttachment, 1);
  attachment->network_id = g_strdup (net->id);
  attachment->tap_device = mv_network_tap_name (req->machine_id);
  attachment->mac_address = mv_network_mac_for (req->machine_id);
  attachment->address = g_strdup_printf ("%s/%u", address, net->prefix);
  attachment->gateway = mv_ipv4_to_string (net->gateway);
  attachment->mtu = net->mtu;
  if (!ensure_bridge (self, net, req->cancellable, error) ||
      !ensure_tap (self, attachment->tap_device, bridge, req->cancellable, error))
    {
      nm_failed (error, req->machine_id);
      return NULL;
    }
  return g_steal_pointer (&attachment);
}

static gboolean
net_detach (MvNetwork *network, const MvRuntimeRequest *req, GError **error)
{
  MvHostNetwork *self = self_of (network);
  g_autofree char *tap = mv_network_tap_name (req->machine_id);
  g_autoptr (GError) local = NULL;

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
  return TRUE;
}

static gboolean
net_release (MvNetwork *network, const MvRuntimeRequest *req, GError **error)
{
  MvHostNetwork *self = self_of (network);

  return net_detach (network, req, error) &&
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
    }

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

  if (!mv_nm_ensure_bridge_finish (MV_NM (source), result, &error) &&
      !g_error_matches (error, MV_ERROR, MV_ERROR_UNAVAILABLE))
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

void
mv_host_network_added (MvHostNetwork *self, const MvNetworkSpec *network)
{
  g_autofree char *cidr = gateway_cidr (network);
  char *name = mv_network_bridge_name (network->id);

  mv_nm_ensure_bridge_async (self->nm, name, cidr, network->mtu, NULL, on_bridge_ensured, name);
}

void
mv_host_network_removed (MvHostNetwork *self, const MvNetworkSpec *network)
{
  char *name = mv_network_bridge_name (network->id);

  mv_nm_remove_async (self->nm, MV_NM_LINK_BRIDGE, name, NULL, on_bridge_removed, name);
}

MvHostNetwork *
mv_host_network_new (MvNetworkStore *store, MvNm *nm)
{
  MvHostNetwork *self = g_new0 (MvHostNetwork, 1);

  self->store = store;
  self->nm = nm;
  self->context = g_main_context_ref_thread_default ();
  self->iface = (MvNetwork) {
    .data = self,
    .check = net_check,
    .address_of = net_address_of,
    .attach = net_attach,
    .detach = net_detach,
    .sleep = net_sleep,
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
  g_main_context_unref (self->context);
  g_free (self);
}

MvNetwork *
mv_host_network_iface (MvHostNetwork *self)
{
  return &self->iface;
}
