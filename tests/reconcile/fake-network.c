#include "fake-network.h"
#include "core/errors.h"

struct _FakeNetwork {
  MvNetwork   iface;
  FakeLog    *log;
  GMutex      lock;
  GHashTable *attached;       /* machine id set */
  GHashTable *received;       /* machine id → guint64* bytes its guest received */
  char       *release_failure;
};

static FakeNetwork *
fake_of (MvNetwork *network)
{
  return network->data;
}

static MvNetworkAttachment *
fake_attach (MvNetwork *network, const MvRuntimeRequest *req, GError **error)
{
  FakeNetwork *fake = fake_of (network);
  MvNetworkAttachment *attachment = g_new0 (MvNetworkAttachment, 1);

  if (fake_on_main_thread ())
    fake_log_breach (fake->log, "network.attach %s ran on the main thread", req->machine_id);
  fake_log_add (fake->log, "network.attach %s", req->machine_id);
  g_mutex_lock (&fake->lock);
  g_hash_table_add (fake->attached, g_strdup (req->machine_id));
  g_mutex_unlock (&fake->lock);
  attachment->tap_device = g_strdup_printf ("tap-%.8s", req->machine_id);
  attachment->mac_address = g_strdup ("02:00:00:00:00:01");
  attachment->address = g_strdup ("10.0.0.2/24");
  attachment->gateway = g_strdup ("10.0.0.1");
  return attachment;
}

static gboolean
fake_release (MvNetwork *network, const MvRuntimeRequest *req, GError **error)
{
  FakeNetwork *fake = fake_of (network);
  g_autofree char *failure = NULL;

  if (fake_on_main_thread ())
    fake_log_breach (fake->log, "network.release %s ran on the main thread", req->machine_id);
  fake_log_add (fake->log, "network.release %s", req->machine_id);
  g_mutex_lock (&fake->lock);
  failure = g_steal_pointer (&fake->release_failure);
  if (!failure)
    g_hash_table_remove (fake->attached, req->machine_id);
  g_mutex_unlock (&fake->lock);
  if (failure)
    g_set_error_literal (error, MV_ERROR, MV_ERROR_FAILED, failure);
  return failure == NULL;
}

static char *
fake_address_of (MvNetwork *network, const char *machine_id, const MvSpec *spec)
{
  return fake_network_attached (fake_of (network), machine_id) ? g_strdup ("10.0.0.2") : NULL;
}

static MvNetworkAttachment *
fake_held (MvNetwork *network, const MvRuntimeRequest *req)
{
  return NULL;
}

static gboolean
fake_check (MvNetwork *network, const char *machine_id, const MvSpec *spec, GError **error)
{
  return TRUE;
}

/* What a stopped or sleeping machine holds is logged, not kept. */
static gboolean
fake_note (MvNetwork *network, const char *what, const char *machine_id)
{
  FakeNetwork *fake = fake_of (network);

  if (fake_on_main_thread ())
    fake_log_breach (fake->log, "network.%s %s ran on the main thread", what, machine_id);
  fake_log_add (fake->log, "network.%s %s", what, machine_id);
  return TRUE;
}

static gboolean
fake_detach (MvNetwork *network, const MvRuntimeRequest *req, GError **error)
{
  return fake_note (network, "detach", req->machine_id);
}

static gboolean
fake_sleep (MvNetwork *network, const MvRuntimeRequest *req, GError **error)
{
  return fake_note (network, "sleep", req->machine_id);
}

static gboolean
fake_update_rules (MvNetwork *network, const char *machine_id, const MvSpec *spec,
                   gboolean sleeping, GError **error)
{
  return fake_note (network, sleeping ? "update-rules-sleeping" : "update-rules", machine_id);
}

static gboolean
fake_counters (MvNetwork *network, const char *machine_id, MvNetworkCounters *counters,
               GError **error)
{
  FakeNetwork *fake = fake_of (network);
  guint64 *received;

  *counters = (MvNetworkCounters) { 0 };
  g_mutex_lock (&fake->lock);
  received = g_hash_table_lookup (fake->received, machine_id);
  if (received)
    counters->rx_bytes = *received;
  g_mutex_unlock (&fake->lock);
  return TRUE;
}

static gboolean
fake_forget (MvNetwork *network, const char *machine_id, GError **error)
{
  fake_log_add (fake_of (network)->log, "network.forget %s", machine_id);
  return TRUE;
}

static gboolean
fake_reconcile (MvNetwork *network, GHashTable *defined, GHashTable *holding, GError **error)
{
  FakeNetwork *fake = fake_of (network);

  if (fake_on_main_thread ())
    fake_log_breach (fake->log, "network.reconcile ran on the main thread");
  fake_log_add (fake->log, "network.reconcile %u %u", g_hash_table_size (defined),
                g_hash_table_size (holding));
  return TRUE;
}

FakeNetwork *
fake_network_new (FakeLog *log)
{
  FakeNetwork *fake = g_new0 (FakeNetwork, 1);

  fake->log = log;
  g_mutex_init (&fake->lock);
  fake->attached = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  fake->received = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  fake->iface = (MvNetwork) {
    .data = fake,
    .check = fake_check,
    .address_of = fake_address_of,
    .held = fake_held,
    .attach = fake_attach,
    .detach = fake_detach,
    .sleep = fake_sleep,
    .update_rules = fake_update_rules,
    .counters = fake_counters,
    .release = fake_release,
    .forget = fake_forget,
    .reconcile = fake_reconcile,
  };
  return fake;
}

void
fake_network_free (FakeNetwork *fake)
{
  if (!fake)
    return;
  g_free (fake->release_failure);
  g_hash_table_unref (fake->attached);
  g_hash_table_unref (fake->received);
  g_mutex_clear (&fake->lock);
  g_free (fake);
}

MvNetwork *
fake_network_iface (FakeNetwork *fake)
{
  return &fake->iface;
}

void
fake_network_fail_next_release (FakeNetwork *fake, const char *message)
{
  g_mutex_lock (&fake->lock);
  g_free (fake->release_failure);
  fake->release_failure = g_strdup (message);
  g_mutex_unlock (&fake->lock);
}

gboolean
fake_network_attached (FakeNetwork *fake, const char *machine_id)
{
  gboolean attached;

  g_mutex_lock (&fake->lock);
  attached = g_hash_table_contains (fake->attached, machine_id);
  g_mutex_unlock (&fake->lock);
  return attached;
}

void
fake_network_add_received (FakeNetwork *fake, const char *machine_id, guint64 bytes)
{
  guint64 *received;

  g_mutex_lock (&fake->lock);
  received = g_hash_table_lookup (fake->received, machine_id);
  if (!received)
    {
      received = g_new0 (guint64, 1);
      g_hash_table_insert (fake->received, g_strdup (machine_id), received);
    }
  *received += bytes;
  g_mutex_unlock (&fake->lock);
}
