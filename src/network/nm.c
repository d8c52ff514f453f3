/* Bridges and TAPs through NetworkManager. See nm.h. */
#include "nm.h"

#include "core/errors.h"

#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>

#include <NetworkManager.h>

/* How often a removal looks for the device to be gone, and how long it
 * waits before it deletes a device NetworkManager left behind itself. */
#define GONE_POLL_MS          100
#define GONE_DELETE_AFTER_MS  1000
#define GONE_TIMEOUT_MS       10000

#define UUID_NAMESPACE        "org.microvmd1.network:"

/* A link as it was asked for. */
typedef struct {
  MvNmLinkKind kind;
  char        *name;
  char        *gateway_cidr;    /* bridge */
  guint        mtu;             /* bridge */
  char        *bridge;          /* TAP */
  uid_t        owner_uid;       /* TAP */
} Wanted;

typedef enum {
  OP_ENSURE,
  OP_REMOVE,
} OpKind;

/* One queued operation: the task data. Operations run one at a time, in
 * the order they were asked for, so that two ensures of one name never
 * race to add the same UUID. */
typedef struct {
  OpKind              kind;
  Wanted             *link;
  char               *uuid;
  NMRemoteConnection *remote;
  NMActiveConnection *active;
  gulong              state_handler;
  guint               timeout_id;
  guint               poll_id;
  gint64              started_us;
  gboolean            device_delete_tried;
} Op;

struct _MvNm
{
  GObject       parent_instance;

  NMClient     *client;
  /* "bridge:NAME" / "tap:NAME" → Wanted */
  GHashTable   *wanted;

  GQueue        queue;          /* GTask, the head is running */
  gboolean      busy;

  gboolean      had_owner;
  gboolean      restore_needed;
  GCancellable *restore_cancellable;
  guint         restore_left;
  guint         restore_timer;
};

G_DEFINE_TYPE (MvNm, mv_nm, G_TYPE_OBJECT)

enum {
  SIGNAL_RESTORED,
  N_SIGNALS
};

static guint signals[N_SIGNALS];

static void op_next (MvNm *nm);

/* ----- names and links ----- */

static const char *
kind_name (MvNmLinkKind kind)
{
  return kind == MV_NM_LINK_BRIDGE ? "bridge" : "tap";
}

static char *
wanted_key (MvNmLinkKind  kind,
            const char   *name)
{
  return g_strconcat (kind_name (kind), ":", name, NULL);
}

static void
wanted_free (Wanted *link)
{
  if (link == NULL)
    return;
  g_free (link->name);
  g_free (link->gateway_cidr);
  g_free (link->bridge);
  g_free (link);
}

G_DEFINE_AUTOPTR_CLEANUP_FUNC (Wanted, wanted_free)

static Wanted *
wanted_copy (const Wanted *link)
{
  Wanted *copy = g_new0 (Wanted, 1);

  copy->kind = link->kind;
  copy->name = g_strdup (link->name);
  copy->gateway_cidr = g_strdup (link->gateway_cidr);
  copy->mtu = link->mtu;
  copy->bridge = g_strdup (link->bridge);
  copy->owner_uid = link->owner_uid;
  return copy;
}

void
mv_nm_link_free (MvNmLink *link)
{
  if (link == NULL)
    return;
  g_free (link->name);
  g_free (link->bridge);
  g_free (link);
}

gboolean
mv_nm_check_ifname (const char  *name,
                    GError     **error)
{
  gsize length;

  if (name == NULL || *name == '\0')
    return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT, "an interface name is empty");
  length = strlen (name);
  if (length > MV_NM_IFNAME_MAX)
    return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT,
                         "interface name \"%s\" is %zu bytes long; the limit is %d",
                         name, length, MV_NM_IFNAME_MAX);
  if (strcmp (name, ".") == 0 || strcmp (name, "..") == 0)
    return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT,
                         "\"%s\" is not an interface name", name);
  for (const char *p = name; *p != '\0'; p++)
    if (!g_ascii_isalnum (*p) && *p != '-' && *p != '_' && *p != '.')
      return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT,
                           "interface name \"%s\" may hold only letters, digits, '-', '_' "
                           "and '.'", name);
  return TRUE;
}

/* "A.B.C.D/P" with 1 <= P <= 30: a /31 or /32 leaves no address for a
 * guest beside the gateway. */
static gboolean
parse_gateway (const char  *gateway_cidr,
               char       **address,
               guint       *prefix,
               GError     **error)
{
  g_auto(GStrv) parts = NULL;
  guint64 value = 0;
  struct in_addr parsed;

  if (gateway_cidr != NULL)
    parts = g_strsplit (gateway_cidr, "/", 3);
  if (parts == NULL || g_strv_length (parts) != 2
      || inet_pton (AF_INET, parts[0], &parsed) != 1
      || !g_ascii_string_to_unsigned (parts[1], 10, 1, 30, &value, NULL))
    return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT,
                         "gateway \"%s\" is not an IPv4 address with a prefix length "
                         "of 1 to 30 (\"10.0.0.1/24\")",
                         gateway_cidr != NULL ? gateway_cidr : "");
  *address = g_strdup (parts[0]);
  *prefix = (guint) value;
  return TRUE;
}

/* A name-based UUID (RFC 4122 version 5 layout over SHA-1), so that a
 * link's connection is found again by the same name. */
static char *
link_uuid (MvNmLinkKind  kind,
           const char   *name)
{
  g_autoptr(GChecksum) sha1 = g_checksum_new (G_CHECKSUM_SHA1);
  guint8 digest[20];
  gsize length = sizeof digest;
  const char *kind_text = kind_name (kind);

  g_checksum_update (sha1, (const guchar *) UUID_NAMESPACE, strlen (UUID_NAMESPACE));
  g_checksum_update (sha1, (const guchar *) kind_text, strlen (kind_text));
  g_checksum_update (sha1, (const guchar *) ":", 1);
  g_checksum_update (sha1, (const guchar *) name, strlen (name));
  g_checksum_get_digest (sha1, digest, &length);

  digest[6] = (digest[6] & 0x0f) | 0x50;
  digest[8] = (digest[8] & 0x3f) | 0x80;
  return g_strdup_printf ("%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-"
                          "%02x%02x%02x%02x%02x%02x",
                          digest[0], digest[1], digest[2], digest[3], digest[4], digest[5],
                          digest[6], digest[7], digest[8], digest[9], digest[10], digest[11],
                          digest[12], digest[13], digest[14], digest[15]);
}

static guint
bridge_mtu (MvNm       *nm,
            const char *bridge)
{
  g_autofree char *key = wanted_key (MV_NM_LINK_BRIDGE, bridge);
  Wanted *wanted = g_hash_table_lookup (nm->wanted, key);

  return wanted != NULL ? wanted->mtu : 0;
}

static NMConnection *
build_connection (MvNm          *nm,
                  const Wanted  *link,
                  const char    *uuid,
                  GError       **error)
{
  g_autoptr(NMConnection) connection = nm_simple_connection_new ();
  g_autofree char *id = g_strconcat (MV_NM_ID_PREFIX, link->name, NULL);
  NMSetting *setting;
  guint mtu;

  setting = nm_setting_connection_new ();
  g_object_set (setting,
                NM_SETTING_CONNECTION_ID, id,
                NM_SETTING_CONNECTION_UUID, uuid,
                NM_SETTING_CONNECTION_INTERFACE_NAME, link->name,
                NM_SETTING_CONNECTION_AUTOCONNECT, TRUE,
                NM_SETTING_CONNECTION_TYPE, link->kind == MV_NM_LINK_BRIDGE
                                            ? NM_SETTING_BRIDGE_SETTING_NAME
                                            : NM_SETTING_TUN_SETTING_NAME,
                NULL);
  if (link->kind == MV_NM_LINK_TAP)
    g_object_set (setting,
                  NM_SETTING_CONNECTION_MASTER, link->bridge,
                  NM_SETTING_CONNECTION_SLAVE_TYPE, NM_SETTING_BRIDGE_SETTING_NAME,
                  NULL);
  nm_connection_add_setting (connection, setting);

  if (link->kind == MV_NM_LINK_BRIDGE)
    {
      g_autofree char *address_text = NULL;
      NMIPAddress *address;
      guint prefix = 0;

      if (!parse_gateway (link->gateway_cidr, &address_text, &prefix, error))
        return NULL;

      setting = nm_setting_bridge_new ();
      g_object_set (setting, NM_SETTING_BRIDGE_STP, FALSE, NULL);
      nm_connection_add_setting (connection, setting);

      setting = nm_setting_ip4_config_new ();
      g_object_set (setting, NM_SETTING_IP_CONFIG_METHOD, NM_SETTING_IP4_CONFIG_METHOD_MANUAL,
                    NULL);
      address = nm_ip_address_new (AF_INET, address_text, prefix, error);
      if (address == NULL)
        return NULL;
      nm_setting_ip_config_add_address (NM_SETTING_IP_CONFIG (setting), address);
      nm_ip_address_unref (address);
      nm_connection_add_setting (connection, setting);

      setting = nm_setting_ip6_config_new ();
      g_object_set (setting, NM_SETTING_IP_CONFIG_METHOD, NM_SETTING_IP6_CONFIG_METHOD_DISABLED,
                    NULL);
      nm_connection_add_setting (connection, setting);
      mtu = link->mtu;
    }
  else
    {
      g_autofree char *owner = g_strdup_printf ("%u", (unsigned) link->owner_uid);

      setting = nm_setting_tun_new ();
      g_object_set (setting,
                    NM_SETTING_TUN_MODE, (guint) NM_SETTING_TUN_MODE_TAP,
                    NM_SETTING_TUN_OWNER, owner,
                    NM_SETTING_TUN_PI, FALSE,
                    NM_SETTING_TUN_MULTI_QUEUE, FALSE,
                    NULL);
      nm_connection_add_setting (connection, setting);
      mtu = bridge_mtu (nm, link->bridge);
    }

  if (mtu != 0)
    {
      setting = nm_setting_wired_new ();
      g_object_set (setting, NM_SETTING_WIRED_MTU, mtu, NULL);
      nm_connection_add_setting (connection, setting);
    }

  if (!nm_connection_normalize (connection, NULL, NULL, error))
    return NULL;
  return g_steal_pointer (&connection);
}

static NMActiveConnection *
find_active (MvNm       *nm,
             const char *uuid)
{
  const GPtrArray *actives = nm_client_get_active_connections (nm->client);

  for (guint i = 0; actives != NULL && i < actives->len; i++)
    {
      NMActiveConnection *active = actives->pdata[i];

      if (g_strcmp0 (nm_active_connection_get_uuid (active), uuid) == 0)
        return active;
    }
  return NULL;
}

gboolean
mv_nm_is_running (MvNm *nm)
{
  g_return_val_if_fail (MV_IS_NM (nm), FALSE);
  return nm_client_get_dbus_name_owner (nm->client) != NULL;
}

static gboolean
check_running (MvNm    *nm,
               GError **error)
{
  if (!mv_nm_is_running (nm))
    return mv_error_set (error, MV_ERROR_UNAVAILABLE,
                         "NetworkManager is not running: org.freedesktop.NetworkManager "
                         "has no owner on the system bus");
  return TRUE;
}

/* libnm's own errors, turned into ours: NetworkManager gone is
 * Unavailable, anything else it says is a failure in its words. */
static GError *
nm_failure (const char   *what,
            const GError *cause)
{
  if (g_error_matches (cause, NM_CLIENT_ERROR, NM_CLIENT_ERROR_MANAGER_NOT_RUNNING)
      || g_error_matches (cause, G_DBUS_ERROR, G_DBUS_ERROR_SERVICE_UNKNOWN)
      || g_error_matches (cause, G_DBUS_ERROR, G_DBUS_ERROR_NAME_HAS_NO_OWNER))
    return g_error_new (MV_ERROR, MV_ERROR_UNAVAILABLE,
                        "NetworkManager is not running (%s): %s", what, cause->message);
  if (g_error_matches (cause, G_IO_ERROR, G_IO_ERROR_CANCELLED))
    return g_error_copy (cause);
  return g_error_new (MV_ERROR, MV_ERROR_FAILED, "NetworkManager could not %s: %s",
                      what, cause->message);
}

/* ----- the operation queue ----- */

static void
op_clear_waits (Op *op)
{
  if (op->active != NULL && op->state_handler != 0)
    g_signal_handler_disconnect (op->active, op->state_handler);
  op->state_handler = 0;
  g_clear_handle_id (&op->timeout_id, g_source_remove);
  g_clear_handle_id (&op->poll_id, g_source_remove);
}

static void
op_free (Op *op)
{
  op_clear_waits (op);
  wanted_free (op->link);
  g_free (op->uuid);
  g_clear_object (&op->remote);
  g_clear_object (&op->active);
  g_free (op);
}

static MvNm *
op_nm (GTask *task)
{
  return g_task_get_source_object (task);
}

static Op *
op_of (GTask *task)
{
  return g_task_get_task_data (task);
}

/* Ends the running operation; the next one starts once its caller has
 * been told. Takes @error. */
static void
op_finish (GTask  *task,
           GError *error)
{
  MvNm *nm = op_nm (task);
  g_autoptr(GTask) finished = g_queue_pop_head (&nm->queue);

  g_assert (finished == task);
  op_clear_waits (op_of (task));
  nm->busy = FALSE;

  if (error != NULL)
    g_task_return_error (task, error);
  else
    g_task_return_boolean (task, TRUE);
  op_next (nm);
}

static void op_start_ensure (GTask *task);
static void op_start_remove (GTask *task);

static void
op_next (MvNm *nm)
{
  GTask *task;

  if (nm->busy || (task = g_queue_peek_head (&nm->queue)) == NULL)
    return;
  nm->busy = TRUE;
  if (op_of (task)->kind == OP_ENSURE)
    op_start_ensure (task);
  else
    op_start_remove (task);
}

static void
op_enqueue (MvNm                *nm,
            OpKind               kind,
            Wanted              *link,
            GCancellable        *cancellable,
            GAsyncReadyCallback  callback,
            gpointer             user_data,
            gpointer             source_tag)
{
  GTask *task = g_task_new (nm, cancellable, callback, user_data);
  Op *op = g_new0 (Op, 1);

  op->kind = kind;
  op->link = link;
  op->uuid = link_uuid (link->kind, link->name);
  g_task_set_source_tag (task, source_tag);
  g_task_set_task_data (task, op, (GDestroyNotify) op_free);

  g_queue_push_tail (&nm->queue, task);
  op_next (nm);
}

/* ----- ensure ----- */

static void
ensure_check_state (GTask *task)
{
  Op *op = op_of (task);
  NMActiveConnectionState state = nm_active_connection_get_state (op->active);

  if (state == NM_ACTIVE_CONNECTION_STATE_ACTIVATED)
    {
      g_debug ("network: %s %s is active", kind_name (op->link->kind), op->link->name);
      op_finish (task, NULL);
    }
  else if (state == NM_ACTIVE_CONNECTION_STATE_DEACTIVATING
           || state == NM_ACTIVE_CONNECTION_STATE_DEACTIVATED)
    {
      op_finish (task, g_error_new (MV_ERROR, MV_ERROR_FAILED,
                                    "NetworkManager could not activate %s %s "
                                    "(reason %u)", kind_name (op->link->kind), op->link->name,
                                    (unsigned) nm_active_connection_get_state_reason (op->active)));
    }
}

static void
on_active_state (GObject    *object,
                 GParamSpec *pspec,
                 gpointer    user_data)
{
  ensure_check_state (user_data);
}

static gboolean
on_activate_timeout (gpointer user_data)
{
  GTask *task = user_data;
  Op *op = op_of (task);

  op->timeout_id = 0;
  op_finish (task, g_error_new (MV_ERROR, MV_ERROR_FAILED,
                                "%s %s was not activated within %d s",
                                kind_name (op->link->kind), op->link->name,
                                MV_NM_ACTIVATE_TIMEOUT_MS / 1000));
  return G_SOURCE_REMOVE;
}

/* Waits for @active to reach ACTIVATED, or to fail. */
static void
ensure_wait (GTask              *task,
             NMActiveConnection *active)
{
  Op *op = op_of (task);
  NMActiveConnectionState state = nm_active_connection_get_state (active);

  g_set_object (&op->active, active);
  if (state == NM_ACTIVE_CONNECTION_STATE_ACTIVATED
      || state == NM_ACTIVE_CONNECTION_STATE_DEACTIVATING
      || state == NM_ACTIVE_CONNECTION_STATE_DEACTIVATED)
    {
      ensure_check_state (task);
      return;
    }
  op->state_handler = g_signal_connect (active, "notify::" NM_ACTIVE_CONNECTION_STATE,
                                        G_CALLBACK (on_active_state), task);
  op->timeout_id = g_timeout_add (MV_NM_ACTIVATE_TIMEOUT_MS, on_activate_timeout, task);
}

static void
on_activated (GObject      *source,
              GAsyncResult *result,
              gpointer      user_data)
{
  GTask *task = user_data;
  g_autoptr(NMActiveConnection) active = NULL;
  g_autoptr(GError) error = NULL;

  active = nm_client_activate_connection_finish (NM_CLIENT (source), result, &error);
  if (active == NULL)
    {
      op_finish (task, nm_failure ("activate the connection", error));
      return;
    }
  ensure_wait (task, active);
}

/* An active connection that is on its way up or up is waited for, not
 * activated again: re-activating would take a running VMM's TAP away. */
static void
ensure_activate (GTask *task)
{
  MvNm *nm = op_nm (task);
  Op *op = op_of (task);
  NMActiveConnection *active = find_active (nm, op->uuid);

  if (active != NULL)
    {
      NMActiveConnectionState state = nm_active_connection_get_state (active);

      if (state != NM_ACTIVE_CONNECTION_STATE_DEACTIVATING
          && state != NM_ACTIVE_CONNECTION_STATE_DEACTIVATED)
        {
          ensure_wait (task, active);
          return;
        }
    }
  nm_client_activate_connection_async (nm->client, NM_CONNECTION (op->remote), NULL, NULL,
                                       g_task_get_cancellable (task), on_activated, task);
}

static void
on_added (GObject      *source,
          GAsyncResult *result,
          gpointer      user_data)
{
  GTask *task = user_data;
  Op *op = op_of (task);
  g_autoptr(GError) error = NULL;

  op->remote = nm_client_add_connection2_finish (NM_CLIENT (source), result, NULL, &error);
  if (op->remote == NULL)
    {
      op_finish (task, nm_failure ("add the connection", error));
      return;
    }
  g_message ("network: added the NetworkManager connection of %s %s",
             kind_name (op->link->kind), op->link->name);
  ensure_activate (task);
}

/* In memory (see nm.h); autoconnect is blocked until the activation that
 * follows, so that NetworkManager does not start one of its own at the
 * same time. */
static void
ensure_add (GTask *task)
{
  MvNm *nm = op_nm (task);
  Op *op = op_of (task);
  g_autoptr(NMConnection) connection = NULL;
  GError *error = NULL;

  connection = build_connection (nm, op->link, op->uuid, &error);
  if (connection == NULL)
    {
      op_finish (task, error);
      return;
    }
  nm_client_add_connection2 (nm->client,
                             nm_connection_to_dbus (connection, NM_CONNECTION_SERIALIZE_ALL),
                             NM_SETTINGS_ADD_CONNECTION2_FLAG_IN_MEMORY
                             | NM_SETTINGS_ADD_CONNECTION2_FLAG_BLOCK_AUTOCONNECT,
                             NULL, TRUE, g_task_get_cancellable (task), on_added, task);
}

static void
on_replaced_deleted (GObject      *source,
                     GAsyncResult *result,
                     gpointer      user_data)
{
  GTask *task = user_data;
  Op *op = op_of (task);
  g_autoptr(GError) error = NULL;

  if (!nm_remote_connection_delete_finish (NM_REMOTE_CONNECTION (source), result, &error))
    {
      op_finish (task, nm_failure ("delete the connection it replaces", error));
      return;
    }
  g_clear_object (&op->remote);
  ensure_add (task);
}

static void
op_start_ensure (GTask *task)
{
  MvNm *nm = op_nm (task);
  Op *op = op_of (task);
  g_autoptr(NMConnection) connection = NULL;
  NMRemoteConnection *existing;
  GError *error = NULL;

  if (g_task_return_error_if_cancelled (task))
    {
      /* Already told: only the queue is left to move on. */
      g_autoptr(GTask) finished = g_queue_pop_head (&nm->queue);
      nm->busy = FALSE;
      op_next (nm);
      return;
    }
  if (!check_running (nm, &error))
    {
      op_finish (task, error);
      return;
    }
  if (op->link->kind == MV_NM_LINK_TAP)
    {
      g_autofree char *key = wanted_key (MV_NM_LINK_BRIDGE, op->link->bridge);

      if (!g_hash_table_contains (nm->wanted, key))
        {
          op_finish (task, g_error_new (MV_ERROR, MV_ERROR_NOT_FOUND,
                                        "TAP %s: bridge %s is not one of microvmd's bridges",
                                        op->link->name, op->link->bridge));
          return;
        }
    }

  connection = build_connection (nm, op->link, op->uuid, &error);
  if (connection == NULL)
    {
      op_finish (task, error);
      return;
    }

  existing = nm_client_get_connection_by_uuid (nm->client, op->uuid);
  if (existing == NULL)
    {
      ensure_add (task);
      return;
    }
  op->remote = g_object_ref (existing);
  if (nm_connection_compare (NM_CONNECTION (existing), connection,
                             NM_SETTING_COMPARE_FLAG_IGNORE_TIMESTAMP
                             | NM_SETTING_COMPARE_FLAG_IGNORE_SECRETS))
    {
      ensure_activate (task);
      return;
    }
  g_message ("network: the settings of %s %s changed; replacing its connection",
             kind_name (op->link->kind), op->link->name);
  nm_remote_connection_delete_async (existing, g_task_get_cancellable (task),
                                     on_replaced_deleted, task);
}

static void
ensure_async (MvNm                *nm,
              Wanted              *link,
              GCancellable        *cancellable,
              GAsyncReadyCallback  callback,
              gpointer             user_data,
              gpointer             source_tag)
{
  g_autofree char *key = wanted_key (link->kind, link->name);

  g_hash_table_replace (nm->wanted, g_steal_pointer (&key), wanted_copy (link));
  op_enqueue (nm, OP_ENSURE, link, cancellable, callback, user_data, source_tag);
}

static void
refuse (MvNm                *nm,
        GError              *error,
        GAsyncReadyCallback  callback,
        gpointer             user_data,
        gpointer             source_tag)
{
  g_autoptr(GTask) task = g_task_new (nm, NULL, callback, user_data);

  g_task_set_source_tag (task, source_tag);
  g_task_return_error (task, error);
}

void
mv_nm_ensure_bridge_async (MvNm                *nm,
                           const char          *name,
                           const char          *gateway_cidr,
                           guint                mtu,
                           GCancellable        *cancellable,
                           GAsyncReadyCallback  callback,
                           gpointer             user_data)
{
  g_autoptr(Wanted) link = g_new0 (Wanted, 1);
  g_autofree char *address = NULL;
  GError *error = NULL;
  guint prefix = 0;

  g_return_if_fail (MV_IS_NM (nm));

  if (!mv_nm_check_ifname (name, &error) || !parse_gateway (gateway_cidr, &address, &prefix, &error))
    {
      refuse (nm, error, callback, user_data, mv_nm_ensure_bridge_async);
      return;
    }
  if (mtu != 0 && (mtu < 68 || mtu > 65535))
    {
      refuse (nm, g_error_new (MV_ERROR, MV_ERROR_INVALID_ARGUMENT,
                               "bridge %s: MTU %u is out of range 68 to 65535", name, mtu),
              callback, user_data, mv_nm_ensure_bridge_async);
      return;
    }

  link->kind = MV_NM_LINK_BRIDGE;
  link->name = g_strdup (name);
  link->gateway_cidr = g_strdup (gateway_cidr);
  link->mtu = mtu;
  ensure_async (nm, g_steal_pointer (&link), cancellable, callback, user_data,
                mv_nm_ensure_bridge_async);
}

gboolean
mv_nm_ensure_bridge_finish (MvNm          *nm,
                            GAsyncResult  *result,
                            GError       **error)
{
  g_return_val_if_fail (g_task_is_valid (result, nm), FALSE);
  return g_task_propagate_boolean (G_TASK (result), error);
}

void
mv_nm_ensure_tap_async (MvNm                *nm,
                        const char          *name,
                        const char          *bridge,
                        uid_t                owner_uid,
                        GCancellable        *cancellable,
                        GAsyncReadyCallback  callback,
                        gpointer             user_data)
{
  g_autoptr(Wanted) link = g_new0 (Wanted, 1);
  GError *error = NULL;

  g_return_if_fail (MV_IS_NM (nm));

  if (!mv_nm_check_ifname (name, &error) || !mv_nm_check_ifname (bridge, &error))
    {
      refuse (nm, error, callback, user_data, mv_nm_ensure_tap_async);
      return;
    }
  if (owner_uid == (uid_t) -1)
    {
      refuse (nm, g_error_new (MV_ERROR, MV_ERROR_INVALID_ARGUMENT,
                               "TAP %s: the owner uid is not a uid", name),
              callback, user_data, mv_nm_ensure_tap_async);
      return;
    }

  link->kind = MV_NM_LINK_TAP;
  link->name = g_strdup (name);
  link->bridge = g_strdup (bridge);
  link->owner_uid = owner_uid;
  ensure_async (nm, g_steal_pointer (&link), cancellable, callback, user_data,
                mv_nm_ensure_tap_async);
}

gboolean
mv_nm_ensure_tap_finish (MvNm          *nm,
                         GAsyncResult  *result,
                         GError       **error)
{
  g_return_val_if_fail (g_task_is_valid (result, nm), FALSE);
  return g_task_propagate_boolean (G_TASK (result), error);
}

/* ----- remove ----- */

static gboolean
is_link_device (NMDevice     *device,
                MvNmLinkKind  kind)
{
  return kind == MV_NM_LINK_BRIDGE ? NM_IS_DEVICE_BRIDGE (device) : NM_IS_DEVICE_TUN (device);
}

static void
on_device_deleted (GObject      *source,
                   GAsyncResult *result,
                   gpointer      user_data)
{
  g_autoptr(GError) error = NULL;

  /* The poll that follows tells whether it went. */
  if (!nm_device_delete_finish (NM_DEVICE (source), result, &error))
    g_debug ("network: deleting device %s: %s", nm_device_get_iface (NM_DEVICE (source)),
             error->message);
}

/* NetworkManager takes a device it made away with its connection, a
 * moment later. A device it did not make (left over from before its own
 * restart) is deleted here, if it is of the link's kind and no other
 * connection of NetworkManager's holds it. */
static gboolean
on_gone_poll (gpointer user_data)
{
  GTask *task = user_data;
  MvNm *nm = op_nm (task);
  Op *op = op_of (task);
  NMDevice *device = nm_client_get_device_by_iface (nm->client, op->link->name);
  gint64 waited_ms = (g_get_monotonic_time () - op->started_us) / G_TIME_SPAN_MILLISECOND;

  if (device == NULL || !nm_device_is_real (device))
    {
      op->poll_id = 0;
      op_finish (task, NULL);
      return G_SOURCE_REMOVE;
    }
  if (waited_ms >= GONE_TIMEOUT_MS)
    {
      op->poll_id = 0;
      op_finish (task, g_error_new (MV_ERROR, MV_ERROR_FAILED,
                                    "%s %s still exists %d s after its connection was deleted",
                                    kind_name (op->link->kind), op->link->name,
                                    GONE_TIMEOUT_MS / 1000));
      return G_SOURCE_REMOVE;
    }
  if (waited_ms >= GONE_DELETE_AFTER_MS && !op->device_delete_tried
      && nm_device_is_software (device) && is_link_device (device, op->link->kind))
    {
      NMActiveConnection *active = nm_device_get_active_connection (device);

      op->device_delete_tried = TRUE;
      if (active == NULL || g_strcmp0 (nm_active_connection_get_uuid (active), op->uuid) == 0)
        nm_device_delete_async (device, g_task_get_cancellable (task), on_device_deleted, NULL);
      else
        {
          op->poll_id = 0;
          op_finish (task, g_error_new (MV_ERROR, MV_ERROR_CONFLICT,
                                        "%s %s belongs to NetworkManager connection \"%s\", "
                                        "not to microvmd", kind_name (op->link->kind),
                                        op->link->name, nm_active_connection_get_id (active)));
          return G_SOURCE_REMOVE;
        }
    }
  return G_SOURCE_CONTINUE;
}

static void
remove_wait_gone (GTask *task)
{
  Op *op = op_of (task);

  op->started_us = g_get_monotonic_time ();
  if (on_gone_poll (task) == G_SOURCE_CONTINUE)
    op->poll_id = g_timeout_add (GONE_POLL_MS, on_gone_poll, task);
}

static void
on_removed (GObject      *source,
            GAsyncResult *result,
            gpointer      user_data)
{
  GTask *task = user_data;
  Op *op = op_of (task);
  g_autoptr(GError) error = NULL;

  if (!nm_remote_connection_delete_finish (NM_REMOTE_CONNECTION (source), result, &error))
    {
      op_finish (task, nm_failure ("delete the connection", error));
      return;
    }
  g_message ("network: deleted the NetworkManager connection of %s %s",
             kind_name (op->link->kind), op->link->name);
  remove_wait_gone (task);
}

static void
op_start_remove (GTask *task)
{
  MvNm *nm = op_nm (task);
  Op *op = op_of (task);
  NMRemoteConnection *existing;
  GError *error = NULL;

  if (g_task_return_error_if_cancelled (task))
    {
      g_autoptr(GTask) finished = g_queue_pop_head (&nm->queue);
      nm->busy = FALSE;
      op_next (nm);
      return;
    }
  if (!check_running (nm, &error))
    {
      op_finish (task, error);
      return;
    }

  existing = nm_client_get_connection_by_uuid (nm->client, op->uuid);
  if (existing == NULL)
    {
      remove_wait_gone (task);
      return;
    }
  nm_remote_connection_delete_async (existing, g_task_get_cancellable (task), on_removed, task);
}

void
mv_nm_remove_async (MvNm                *nm,
                    MvNmLinkKind         kind,
                    const char          *name,
                    GCancellable        *cancellable,
                    GAsyncReadyCallback  callback,
                    gpointer             user_data)
{
  g_autoptr(Wanted) link = g_new0 (Wanted, 1);
  g_autofree char *key = NULL;
  GError *error = NULL;

  g_return_if_fail (MV_IS_NM (nm));

  if (!mv_nm_check_ifname (name, &error))
    {
      refuse (nm, error, callback, user_data, mv_nm_remove_async);
      return;
    }

  key = wanted_key (kind, name);
  g_hash_table_remove (nm->wanted, key);
  link->kind = kind;
  link->name = g_strdup (name);
  op_enqueue (nm, OP_REMOVE, g_steal_pointer (&link), cancellable, callback, user_data,
              mv_nm_remove_async);
}

gboolean
mv_nm_remove_finish (MvNm          *nm,
                     GAsyncResult  *result,
                     GError       **error)
{
  g_return_val_if_fail (g_task_is_valid (result, nm), FALSE);
  return g_task_propagate_boolean (G_TASK (result), error);
}

/* ----- list ----- */

static int
compare_links (gconstpointer a,
               gconstpointer b)
{
  const MvNmLink *x = *(MvNmLink *const *) a;
  const MvNmLink *y = *(MvNmLink *const *) b;

  if (x->kind != y->kind)
    return x->kind == MV_NM_LINK_BRIDGE ? -1 : 1;
  return strcmp (x->name, y->name);
}

GPtrArray *
mv_nm_list (MvNm    *nm,
            GError **error)
{
  g_autoptr(GPtrArray) links = g_ptr_array_new_with_free_func ((GDestroyNotify) mv_nm_link_free);
  const GPtrArray *connections;

  g_return_val_if_fail (MV_IS_NM (nm), NULL);

  if (!check_running (nm, error))
    return NULL;

  connections = nm_client_get_connections (nm->client);
  for (guint i = 0; connections != NULL && i < connections->len; i++)
    {
      NMConnection *connection = connections->pdata[i];
      const char *id = nm_connection_get_id (connection);
      const char *type = nm_connection_get_connection_type (connection);
      const char *name = nm_connection_get_interface_name (connection);
      NMActiveConnection *active;
      MvNmLink *link;

      if (id == NULL || !g_str_has_prefix (id, MV_NM_ID_PREFIX) || name == NULL)
        continue;
      link = g_new0 (MvNmLink, 1);
      if (g_strcmp0 (type, NM_SETTING_BRIDGE_SETTING_NAME) == 0)
        link->kind = MV_NM_LINK_BRIDGE;
      else if (g_strcmp0 (type, NM_SETTING_TUN_SETTING_NAME) == 0)
        {
          NMSettingConnection *setting = nm_connection_get_setting_connection (connection);

          link->kind = MV_NM_LINK_TAP;
          link->bridge = g_strdup (nm_setting_connection_get_master (setting));
        }
      else
        {
          g_free (link);
          continue;
        }
      link->name = g_strdup (name);
      active = find_active (nm, nm_connection_get_uuid (connection));
      link->active = active != NULL
                     && nm_active_connection_get_state (active) == NM_ACTIVE_CONNECTION_STATE_ACTIVATED;
      g_ptr_array_add (links, link);
    }
  g_ptr_array_sort (links, compare_links);
  return g_steal_pointer (&links);
}

/* ----- NetworkManager coming and going ----- */

static void
on_restored_one (GObject      *source,
                 GAsyncResult *result,
                 gpointer      user_data)
{
  MvNm *nm = MV_NM (source);
  g_autoptr(GError) error = NULL;

  if (!g_task_propagate_boolean (G_TASK (result), &error)
      && !g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
    g_warning ("network: could not restore a link after NetworkManager restarted: %s",
               error->message);

  g_assert (nm->restore_left > 0);
  if (--nm->restore_left == 0)
    {
      g_message ("network: the links are restored after NetworkManager came back");
      g_signal_emit (nm, signals[SIGNAL_RESTORED], 0);
    }
}

static int
compare_wanted (gconstpointer a,
                gconstpointer b)
{
  const Wanted *x = *(Wanted *const *) a;
  const Wanted *y = *(Wanted *const *) b;

  if (x->kind != y->kind)
    return x->kind == MV_NM_LINK_BRIDGE ? -1 : 1;
  return strcmp (x->name, y->name);
}

/* Bridges first: a TAP's activation needs its bridge. */
static void
restore_all (MvNm *nm)
{
  g_autoptr(GPtrArray) links = g_ptr_array_new ();
  GHashTableIter iter;
  gpointer value;

  g_hash_table_iter_init (&iter, nm->wanted);
  while (g_hash_table_iter_next (&iter, NULL, &value))
    g_ptr_array_add (links, value);
  g_ptr_array_sort (links, compare_wanted);

  g_clear_object (&nm->restore_cancellable);
  nm->restore_cancellable = g_cancellable_new ();
  g_message ("network: NetworkManager is back; ensuring %u links again", links->len);

  nm->restore_left += links->len;
  for (guint i = 0; i < links->len; i++)
    op_enqueue (nm, OP_ENSURE, wanted_copy (links->pdata[i]), nm->restore_cancellable,
                on_restored_one, NULL, restore_all);
  if (links->len == 0)
    g_signal_emit (nm, signals[SIGNAL_RESTORED], 0);
}

/* libnm fetches NetworkManager's objects after its name appears and only
 * then notifies the manager's properties (the version among them): before
 * that, lookups by UUID would find nothing. A timer covers a fetch that
 * notifies nothing. */
#define RESTORE_FALLBACK_MS 2000

static void
restore_now (MvNm *nm)
{
  g_clear_handle_id (&nm->restore_timer, g_source_remove);
  if (!nm->restore_needed || nm_client_get_dbus_name_owner (nm->client) == NULL)
    return;
  nm->restore_needed = FALSE;
  restore_all (nm);
}

static gboolean
on_restore_timer (gpointer user_data)
{
  MvNm *nm = user_data;

  nm->restore_timer = 0;
  restore_now (nm);
  return G_SOURCE_REMOVE;
}

/* An activation under way cannot end once NetworkManager has left the
 * bus: its caller hears so now, not when the wait times out. */
static void
fail_waiting_activation (MvNm *nm)
{
  GTask *task = nm->busy ? g_queue_peek_head (&nm->queue) : NULL;
  Op *op = task ? op_of (task) : NULL;

  if (op == NULL || op->kind != OP_ENSURE || op->timeout_id == 0)
    return;
  op_finish (task, g_error_new (MV_ERROR, MV_ERROR_UNAVAILABLE,
                                "NetworkManager is not running: it left the bus while %s %s "
                                "was being activated", kind_name (op->link->kind),
                                op->link->name));
}

static void
on_client_changed (GObject    *object,
                   GParamSpec *pspec,
                   gpointer    user_data)
{
  MvNm *nm = user_data;
  const char *owner = nm_client_get_dbus_name_owner (nm->client);

  g_debug ("network: NetworkManager's %s changed: owner %s", pspec->name,
           owner != NULL ? owner : "none");
  if (owner == NULL)
    {
      g_clear_handle_id (&nm->restore_timer, g_source_remove);
      nm->restore_needed = FALSE;
      if (nm->had_owner)
        {
          g_message ("network: NetworkManager left the bus");
          nm->had_owner = FALSE;
          g_cancellable_cancel (nm->restore_cancellable);
          fail_waiting_activation (nm);
        }
      return;
    }
  if (!nm->had_owner)
    {
      nm->had_owner = TRUE;
      nm->restore_needed = TRUE;
      nm->restore_timer = g_timeout_add (RESTORE_FALLBACK_MS, on_restore_timer, nm);
      return;
    }
  if (g_strcmp0 (pspec->name, NM_CLIENT_VERSION) == 0)
    restore_now (nm);
}

/* ----- the object ----- */

static void
mv_nm_dispose (GObject *object)
{
  MvNm *nm = MV_NM (object);

  g_cancellable_cancel (nm->restore_cancellable);
  g_clear_handle_id (&nm->restore_timer, g_source_remove);
  if (nm->client != NULL)
    g_signal_handlers_disconnect_by_data (nm->client, nm);
  g_clear_object (&nm->client);
  G_OBJECT_CLASS (mv_nm_parent_class)->dispose (object);
}

static void
mv_nm_finalize (GObject *object)
{
  MvNm *nm = MV_NM (object);

  /* Every queued task holds a reference to its source object. */
  g_assert (g_queue_is_empty (&nm->queue));
  g_hash_table_unref (nm->wanted);
  g_clear_object (&nm->restore_cancellable);
  G_OBJECT_CLASS (mv_nm_parent_class)->finalize (object);
}

static void
mv_nm_class_init (MvNmClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);

  object_class->dispose = mv_nm_dispose;
  object_class->finalize = mv_nm_finalize;

  /* Emitted when NetworkManager came back and every link asked for was
   * ensured again (failures are logged). */
  signals[SIGNAL_RESTORED] = g_signal_new ("restored", G_TYPE_FROM_CLASS (klass),
                                           G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                                           G_TYPE_NONE, 0);
}

static void
mv_nm_init (MvNm *nm)
{
  nm->wanted = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
                                      (GDestroyNotify) wanted_free);
  g_queue_init (&nm->queue);
}

static void
on_client_ready (GObject      *source,
                 GAsyncResult *result,
                 gpointer      user_data)
{
  g_autoptr(GTask) task = user_data;
  g_autoptr(GObject) client = NULL;
  g_autoptr(GError) error = NULL;
  MvNm *nm;

  client = g_async_initable_new_finish (G_ASYNC_INITABLE (source), result, &error);
  if (client == NULL)
    {
      g_task_return_new_error (task, MV_ERROR, MV_ERROR_UNAVAILABLE,
                               "cannot reach NetworkManager: %s", error->message);
      return;
    }

  nm = g_object_new (MV_TYPE_NM, NULL);
  nm->client = NM_CLIENT (g_steal_pointer (&client));
  nm->had_owner = nm_client_get_dbus_name_owner (nm->client) != NULL;
  g_signal_connect (nm->client, "notify::" NM_CLIENT_DBUS_NAME_OWNER,
                    G_CALLBACK (on_client_changed), nm);
  g_signal_connect (nm->client, "notify::" NM_CLIENT_VERSION,
                    G_CALLBACK (on_client_changed), nm);
  g_task_return_pointer (task, nm, g_object_unref);
}

void
mv_nm_new_async (GDBusConnection     *bus,
                 GCancellable        *cancellable,
                 GAsyncReadyCallback  callback,
                 gpointer             user_data)
{
  GTask *task = g_task_new (NULL, cancellable, callback, user_data);

  g_task_set_source_tag (task, mv_nm_new_async);
  /* Permissions are polkit questions NetworkManager would ask on our
   * behalf at every start; root does not need them. */
  g_async_initable_new_async (NM_TYPE_CLIENT, G_PRIORITY_DEFAULT, cancellable,
                              on_client_ready, task,
                              NM_CLIENT_DBUS_CONNECTION, bus,
                              NM_CLIENT_INSTANCE_FLAGS, NM_CLIENT_INSTANCE_FLAGS_NO_AUTO_FETCH_PERMISSIONS,
                              NULL);
}

MvNm *
mv_nm_new_finish (GAsyncResult  *result,
                  GError       **error)
{
  g_return_val_if_fail (g_task_is_valid (result, NULL), NULL);
  return g_task_propagate_pointer (G_TASK (result), error);
}
