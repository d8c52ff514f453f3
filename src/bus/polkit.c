/* Authorization: ask the bus driver who the caller is (once per caller),
 * let root through, ask polkit about everyone else, and before acting make
 * sure the caller is still there — a client that has gone gets nothing
 * done. Every step is an asynchronous call; the main loop never waits. */
#include "polkit.h"
#include "names.h"

#include <errno.h>

#define POLKIT_NAME   "org.freedesktop.PolicyKit1"
#define POLKIT_PATH   "/org/freedesktop/PolicyKit1/Authority"
#define POLKIT_IFACE  "org.freedesktop.PolicyKit1.Authority"
#define POLKIT_ALLOW_USER_INTERACTION 1u

typedef struct {
  sd_bus_message   *call;
  gboolean          root;
  guint32           known_uid;  /* from uid_by_sender, when it was there */
  char             *action_id;
  char            **details;
  MvAuthorizedFunc  func;
  gpointer          user_data;
  GDestroyNotify    destroy;
} AuthCheck;

/* sender -> number of its calls waiting for authorization */
static GHashTable *pending_by_sender;

/* sender -> its uid + 1. A unique name is never given to another
 * connection, and a connection's uid is fixed when it connects, so what
 * the bus driver said once stays true: the next call of the same caller
 * skips the round trip. Emptied when full, which only costs round trips. */
static GHashTable *uid_by_sender;
#define UID_CACHE_MAX 4096

static void
pending_drop (sd_bus_message *call)
{
  const char *sender = sd_bus_message_get_sender (call) ? sd_bus_message_get_sender (call) : "";
  guint n = GPOINTER_TO_UINT (g_hash_table_lookup (pending_by_sender, sender));

  if (n > 1)
    g_hash_table_insert (pending_by_sender, g_strdup (sender), GUINT_TO_POINTER (n - 1));
  else
    g_hash_table_remove (pending_by_sender, sender);
}

static void
auth_check_free (AuthCheck *check)
{
  pending_drop (check->call);
  if (check->destroy)
    check->destroy (check->user_data);
  sd_bus_message_unref (check->call);
  g_free (check->action_id);
  g_strfreev (check->details);
  g_free (check);
}

static void
auth_check_deny (AuthCheck *check, const char *name, const char *message)
{
  sd_bus_reply_method_errorf (check->call, name, "%s", message);
  auth_check_free (check);
}

static void
auth_check_grant (AuthCheck *check)
{
  check->func (check->call, check->root, check->user_data);
  auth_check_free (check);
}

static int
on_name_has_owner (sd_bus_message *reply, void *user_data, sd_bus_error *ret_error)
{
  AuthCheck *check = user_data;
  int has_owner = 0;

  if (!sd_bus_message_is_method_error (reply, NULL))
    sd_bus_message_read (reply, "b", &has_owner);
  if (has_owner)
    auth_check_grant (check);
  else
    {
      g_message ("Caller %s left before %s was done; dropping the call",
                 sd_bus_message_get_sender (check->call), check->action_id);
      auth_check_free (check);
    }
  return 1;
}

static void
confirm_caller_then_grant (AuthCheck *check)
{
  sd_bus *bus = sd_bus_message_get_bus (check->call);
  int r;

  /* The driver answers in order: if the caller left before this call
   * reached it, it says so. */
  r = sd_bus_call_method_async (bus, NULL, "org.freedesktop.DBus", "/org/freedesktop/DBus",
                                "org.freedesktop.DBus", "NameHasOwner",
                                on_name_has_owner, check, "s",
                                sd_bus_message_get_sender (check->call));
  if (r < 0)
    auth_check_deny (check, SD_BUS_ERROR_ACCESS_DENIED, "Could not verify the caller");
}

static int
on_polkit_reply (sd_bus_message *reply, void *user_data, sd_bus_error *ret_error)
{
  AuthCheck *check = user_data;
  int authorized = 0, challenge = 0;
  int r;

  if (sd_bus_message_is_method_error (reply, NULL))
    {
      const sd_bus_error *e = sd_bus_message_get_error (reply);
      static gint64 warned_at;
      static guint suppressed;
      gint64 now = g_get_monotonic_time ();

      /* With polkitd down every call fails here: say so once a minute. */
      if (warned_at == 0 || now - warned_at >= 60 * G_USEC_PER_SEC)
        {
          g_warning ("polkit could not check %s for %s: %s (%u more such failures since the "
                     "last warning)", check->action_id, sd_bus_message_get_sender (check->call),
                     e->message ? e->message : e->name, suppressed);
          warned_at = now;
          suppressed = 0;
        }
      else
        suppressed++;
      auth_check_deny (check, SD_BUS_ERROR_ACCESS_DENIED,
                       "Authorization is unavailable: polkit did not answer");
      return 1;
    }

  r = sd_bus_message_enter_container (reply, 'r', "bba{ss}");
  if (r >= 0)
    r = sd_bus_message_read (reply, "bb", &authorized, &challenge);
  if (r < 0)
    {
      auth_check_deny (check, SD_BUS_ERROR_ACCESS_DENIED, "polkit sent a malformed answer");
      return 1;
    }

  if (authorized)
    confirm_caller_then_grant (check);
  else if (challenge && !sd_bus_message_get_allow_interactive_authorization (check->call))
    auth_check_deny (check, SD_BUS_ERROR_INTERACTIVE_AUTHORIZATION_REQUIRED,
                     "Interactive authentication is required for this operation");
  else
    {
      g_autofree char *msg = g_strdup_printf ("Not authorized: %s", check->action_id);
      auth_check_deny (check, SD_BUS_ERROR_ACCESS_DENIED, msg);
    }
  return 1;
}

static int
append_details (sd_bus_message *m, char **details)
{
  int r = sd_bus_message_open_container (m, 'a', "{ss}");
  for (guint i = 0; r >= 0 && details && details[i] && details[i + 1]; i += 2)
    r = sd_bus_message_append (m, "{ss}", details[i], details[i + 1]);
  if (r >= 0)
    r = sd_bus_message_close_container (m);
  return r;
}

static void
ask_polkit (AuthCheck *check)
{
  sd_bus *bus = sd_bus_message_get_bus (check->call);
  g_autoptr (sd_bus_message) m = NULL;
  guint32 flags = 0;
  int r;

  if (sd_bus_message_get_allow_interactive_authorization (check->call))
    flags |= POLKIT_ALLOW_USER_INTERACTION;

  r = sd_bus_message_new_method_call (bus, &m, POLKIT_NAME, POLKIT_PATH, POLKIT_IFACE,
                                      "CheckAuthorization");
  if (r >= 0)
    r = sd_bus_message_append (m, "(sa{sv})s", "system-bus-name", 1, "name", "s",
                               sd_bus_message_get_sender (check->call), check->action_id);
  if (r >= 0)
    r = append_details (m, check->details);
  if (r >= 0)
    r = sd_bus_message_append (m, "us", flags, "");
  /* An interactive check waits for a person: no timeout of ours. */
  if (r >= 0)
    r = sd_bus_call_async (bus, NULL, m, on_polkit_reply, check,
                           (flags & POLKIT_ALLOW_USER_INTERACTION) ? UINT64_MAX - 1 : 0);
  if (r < 0)
    auth_check_deny (check, SD_BUS_ERROR_ACCESS_DENIED, "Could not ask polkit");
}

static void
decide (AuthCheck *check, guint32 uid)
{
  check->root = uid == 0;
  if (uid == 0)
    auth_check_grant (check);
  else
    ask_polkit (check);
}

/* A caller whose uid is known is decided on from the main loop all the
 * same, as one whose uid is asked for: @func never runs inside
 * mv_polkit_check, where its caller's method handler is still running. */
static gboolean
decide_known (gpointer data)
{
  AuthCheck *check = data;

  decide (check, check->known_uid);
  return G_SOURCE_REMOVE;
}

static int
on_caller_uid (sd_bus_message *reply, void *user_data, sd_bus_error *ret_error)
{
  AuthCheck *check = user_data;
  guint32 uid = G_MAXUINT32;

  if (sd_bus_message_is_method_error (reply, NULL) ||
      sd_bus_message_read (reply, "u", &uid) < 0)
    {
      /* The caller is gone: there is nobody to answer. */
      auth_check_free (check);
      return 1;
    }

  if (g_hash_table_size (uid_by_sender) >= UID_CACHE_MAX)
    g_hash_table_remove_all (uid_by_sender);
  g_hash_table_insert (uid_by_sender, g_strdup (sd_bus_message_get_sender (check->call)),
                       GUINT_TO_POINTER (uid + 1));
  decide (check, uid);
  return 1;
}

void
mv_polkit_check (sd_bus_message    *call,
                 const char        *action_id,
                 const char *const *details,
                 MvAuthorizedFunc   func,
                 gpointer           user_data,
                 GDestroyNotify     destroy)
{
  const char *sender = sd_bus_message_get_sender (call);
  AuthCheck *check;
  guint pending, known;
  int r;

  if (!pending_by_sender)
    pending_by_sender = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  pending = GPOINTER_TO_UINT (g_hash_table_lookup (pending_by_sender, sender ? sender : ""));
  if (pending >= MV_POLKIT_PENDING_PER_SENDER_MAX)
    {
      sd_bus_reply_method_errorf (call, MV_BUS_ERROR_RESOURCE_EXHAUSTED,
                                  "%u calls of %s wait for authorization already (the limit is %u)",
                                  pending, sender, MV_POLKIT_PENDING_PER_SENDER_MAX);
      if (destroy)
        destroy (user_data);
      return;
    }
  g_hash_table_insert (pending_by_sender, g_strdup (sender ? sender : ""),
                       GUINT_TO_POINTER (pending + 1));

  check = g_new0 (AuthCheck, 1);
  check->call = sd_bus_message_ref (call);
  check->action_id = g_strdup (action_id);
  check->details = g_strdupv ((char **) details);
  check->func = func;
  check->user_data = user_data;
  check->destroy = destroy;

  if (!uid_by_sender)
    uid_by_sender = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  known = sender ? GPOINTER_TO_UINT (g_hash_table_lookup (uid_by_sender, sender)) : 0;
  if (known)
    {
      check->known_uid = known - 1;
      g_idle_add_full (G_PRIORITY_DEFAULT, decide_known, check, NULL);
      return;
    }
  r = sd_bus_call_method_async (sd_bus_message_get_bus (call), NULL, "org.freedesktop.DBus",
                                "/org/freedesktop/DBus", "org.freedesktop.DBus",
                                "GetConnectionUnixUser", on_caller_uid, check, "s",
                                sd_bus_message_get_sender (call));
  if (r < 0)
    auth_check_deny (check, SD_BUS_ERROR_ACCESS_DENIED, "Could not identify the caller");
}
