/* MvNm against a real NetworkManager in a network namespace of the test's
 * own (test-netns.h), on the private system bus of test-env.h. */
#include "network/nm.h"
#include "core/errors.h"
#include "test-env.h"
#include "test-netns.h"

#include <signal.h>
#include <string.h>

#include <json-glib/json-glib.h>

#define BRIDGE      "mvtbr0"
#define TAP         "mvttap0"
#define GATEWAY     "10.77.0.1/24"
#define OWNER_UID   4242
#define WAIT_S      60

typedef struct {
  MvTestEnv   *env;
  MvTestNetns *netns;
  MvNm        *nm;
} Fixture;

/* ----- waiting on the main loop ----- */

static void
store_result (GObject      *source,
              GAsyncResult *result,
              gpointer      user_data)
{
  *(GAsyncResult **) user_data = g_object_ref (result);
}

static gboolean
on_too_long (gpointer user_data)
{
  g_error ("%s took longer than %d s", (const char *) user_data, WAIT_S);
  return G_SOURCE_REMOVE;
}

/* Iterates the default context until *@done is set. */
static void
iterate_until (gboolean   *done,
               const char *what)
{
  guint timeout = g_timeout_add_seconds (WAIT_S, on_too_long, (gpointer) what);

  while (!*done)
    g_main_context_iteration (NULL, TRUE);
  g_source_remove (timeout);
}

static GAsyncResult *
wait_result (GAsyncResult **slot,
             const char    *what)
{
  guint timeout = g_timeout_add_seconds (WAIT_S, on_too_long, (gpointer) what);

  while (*slot == NULL)
    g_main_context_iteration (NULL, TRUE);
  g_source_remove (timeout);
  return *slot;
}

static MvNm *
new_nm (MvTestEnv *env)
{
  g_autoptr(GDBusConnection) bus = NULL;
  g_autoptr(GAsyncResult) result = NULL;
  g_autoptr(GError) error = NULL;
  MvNm *nm;

  bus = g_dbus_connection_new_for_address_sync (mv_test_env_bus_address (env),
                                                G_DBUS_CONNECTION_FLAGS_AUTHENTICATION_CLIENT
                                                | G_DBUS_CONNECTION_FLAGS_MESSAGE_BUS_CONNECTION,
                                                NULL, NULL, &error);
  g_assert_no_error (error);
  mv_nm_new_async (bus, NULL, store_result, &result);
  nm = mv_nm_new_finish (wait_result (&result, "connecting to NetworkManager"), &error);
  g_assert_no_error (error);
  g_assert_nonnull (nm);
  return nm;
}

static gboolean
ensure_bridge (MvNm        *nm,
               const char  *name,
               const char  *gateway,
               guint        mtu,
               GError     **error)
{
  g_autoptr(GAsyncResult) result = NULL;

  mv_nm_ensure_bridge_async (nm, name, gateway, mtu, NULL, store_result, &result);
  return mv_nm_ensure_bridge_finish (nm, wait_result (&result, "ensure_bridge"), error);
}

static gboolean
ensure_tap (MvNm        *nm,
            const char  *name,
            const char  *bridge,
            uid_t        owner,
            GError     **error)
{
  g_autoptr(GAsyncResult) result = NULL;

  mv_nm_ensure_tap_async (nm, name, bridge, owner, NULL, store_result, &result);
  return mv_nm_ensure_tap_finish (nm, wait_result (&result, "ensure_tap"), error);
}

static gboolean
remove_link (MvNm          *nm,
             MvNmLinkKind   kind,
             const char    *name,
             GError       **error)
{
  g_autoptr(GAsyncResult) result = NULL;

  mv_nm_remove_async (nm, kind, name, NULL, store_result, &result);
  return mv_nm_remove_finish (nm, wait_result (&result, "remove"), error);
}

/* ----- looking at the namespace ----- */

static JsonNode *
ip_json (Fixture    *fixture,
         const char *const *args)
{
  g_autoptr(GPtrArray) argv = g_ptr_array_new ();
  g_autofree char *out = NULL;
  g_autoptr(GError) error = NULL;
  JsonNode *node;

  g_ptr_array_add (argv, (char *) "ip");
  g_ptr_array_add (argv, (char *) "-j");
  for (gsize i = 0; args[i] != NULL; i++)
    g_ptr_array_add (argv, (char *) args[i]);
  g_ptr_array_add (argv, NULL);
  g_assert_cmpint (mv_test_netns_run (fixture->netns, (const char *const *) argv->pdata,
                                      &out, NULL), ==, 0);
  node = json_from_string (out, &error);
  g_assert_no_error (error);
  g_assert_true (JSON_NODE_HOLDS_ARRAY (node));
  return node;
}

static gboolean
array_has_string (JsonArray  *array,
                  const char *value)
{
  for (guint i = 0; array != NULL && i < json_array_get_length (array); i++)
    if (g_strcmp0 (json_array_get_string_element (array, i), value) == 0)
      return TRUE;
  return FALSE;
}

/* The object `ip -j ... show dev NAME` prints for @name, or NULL. */
static JsonObject *
find_device (JsonNode   *array,
             const char *name)
{
  JsonArray *devices = json_node_get_array (array);

  for (guint i = 0; i < json_array_get_length (devices); i++)
    {
      JsonObject *device = json_array_get_object_element (devices, i);

      if (g_strcmp0 (json_object_get_string_member_with_default (device, "ifname", ""), name) == 0)
        return device;
    }
  return NULL;
}

static gboolean
device_exists (Fixture    *fixture,
               const char *name)
{
  const char *args[] = { "link", "show", NULL };
  g_autoptr(JsonNode) links = ip_json (fixture, args);

  return find_device (links, name) != NULL;
}

static gint64
ifindex (Fixture    *fixture,
         const char *name)
{
  const char *args[] = { "link", "show", NULL };
  g_autoptr(JsonNode) links = ip_json (fixture, args);
  JsonObject *device = find_device (links, name);

  g_assert_nonnull (device);
  return json_object_get_int_member (device, "ifindex");
}

static void
assert_bridge (Fixture    *fixture,
               const char *name,
               const char *address,
               gint64      prefix,
               gint64      mtu)
{
  const char *args[] = { "addr", "show", NULL };
  g_autoptr(JsonNode) addrs = ip_json (fixture, args);
  JsonObject *device = find_device (addrs, name);
  JsonArray *infos;
  gboolean found = FALSE;

  g_assert_nonnull (device);
  g_assert_true (array_has_string (json_object_get_array_member (device, "flags"), "UP"));
  if (mtu != 0)
    g_assert_cmpint (json_object_get_int_member (device, "mtu"), ==, mtu);
  infos = json_object_get_array_member (device, "addr_info");
  for (guint i = 0; i < json_array_get_length (infos); i++)
    {
      JsonObject *info = json_array_get_object_element (infos, i);
      const char *family = json_object_get_string_member (info, "family");

      /* IPv6 is disabled: not even a link-local address. */
      g_assert_cmpstr (family, ==, "inet");
      if (g_strcmp0 (json_object_get_string_member (info, "local"), address) == 0
          && json_object_get_int_member (info, "prefixlen") == prefix)
        found = TRUE;
    }
  g_assert_true (found);
}

static void
assert_tap (Fixture    *fixture,
            const char *name,
            const char *bridge,
            uid_t       owner)
{
  const char *args[] = { "-d", "link", "show", NULL };
  g_autoptr(JsonNode) links = ip_json (fixture, args);
  JsonObject *device = find_device (links, name);
  JsonObject *info;
  JsonObject *data;
  g_autofree char *owner_path = g_strdup_printf ("/sys/class/net/%s/owner", name);
  const char *cat[] = { "cat", owner_path, NULL };
  g_autofree char *owner_text = NULL;
  g_autofree char *expected = g_strdup_printf ("%u", (unsigned) owner);

  g_assert_nonnull (device);
  g_assert_cmpstr (json_object_get_string_member_with_default (device, "master", ""), ==, bridge);
  info = json_object_get_object_member (device, "linkinfo");
  g_assert_nonnull (info);
  g_assert_cmpstr (json_object_get_string_member (info, "info_kind"), ==, "tun");
  data = json_object_get_object_member (info, "info_data");
  g_assert_nonnull (data);
  g_assert_cmpstr (json_object_get_string_member (data, "type"), ==, "tap");
  g_assert_false (json_object_get_boolean_member (data, "multi_queue"));
  g_assert_true (json_object_get_boolean_member (data, "persist"));

  g_assert_cmpint (mv_test_netns_run (fixture->netns, cat, &owner_text, NULL), ==, 0);
  g_assert_cmpstr (g_strstrip (owner_text), ==, expected);
}

/* The names of NetworkManager's connections, from nmcli. */
static char *
nmcli_connections (Fixture *fixture)
{
  const char *argv[] = { "nmcli", "-t", "-f", "NAME,UUID", "connection", "show", NULL };
  char *out = NULL;

  g_assert_cmpint (mv_test_env_run (fixture->env, argv, &out, NULL), ==, 0);
  return out;
}

static guint
count_lines_with (const char *text,
                  const char *needle)
{
  g_auto(GStrv) lines = g_strsplit (text, "\n", -1);
  guint n = 0;

  for (gsize i = 0; lines[i] != NULL; i++)
    if (g_str_has_prefix (lines[i], needle) && lines[i][strlen (needle)] == ':')
      n++;
  return n;
}

/* ----- fixture ----- */

static void
fixture_set_up (Fixture       *fixture,
                gconstpointer  data)
{
  fixture->env = mv_test_env_new ();
  fixture->netns = mv_test_netns_new (fixture->env);
  fixture->nm = new_nm (fixture->env);
  g_assert_true (mv_nm_is_running (fixture->nm));
}

static void
fixture_tear_down (Fixture       *fixture,
                   gconstpointer  data)
{
  g_clear_object (&fixture->nm);
  g_clear_pointer (&fixture->netns, mv_test_netns_free);
  g_clear_pointer (&fixture->env, mv_test_env_free);
}

static void
ensure_both (Fixture *fixture)
{
  g_autoptr(GError) error = NULL;

  g_assert_true (ensure_bridge (fixture->nm, BRIDGE, GATEWAY, 1400, &error));
  g_assert_no_error (error);
  g_assert_true (ensure_tap (fixture->nm, TAP, BRIDGE, OWNER_UID, &error));
  g_assert_no_error (error);
}

/* ----- tests ----- */

static void
test_bridge_gateway (Fixture       *fixture,
                     gconstpointer  data)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) links = NULL;
  g_autofree char *connections = NULL;
  MvNmLink *link;

  g_assert_false (device_exists (fixture, BRIDGE));
  g_assert_true (ensure_bridge (fixture->nm, BRIDGE, GATEWAY, 1400, &error));
  g_assert_no_error (error);
  assert_bridge (fixture, BRIDGE, "10.77.0.1", 24, 1400);

  links = mv_nm_list (fixture->nm, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (links->len, ==, 1);
  link = links->pdata[0];
  g_assert_cmpint (link->kind, ==, MV_NM_LINK_BRIDGE);
  g_assert_cmpstr (link->name, ==, BRIDGE);
  g_assert_null (link->bridge);
  g_assert_true (link->active);

  /* In memory: nothing written to the keyfile directory. */
  connections = nmcli_connections (fixture);
  g_assert_cmpuint (count_lines_with (connections, MV_NM_ID_PREFIX BRIDGE), ==, 1);
  {
    g_autoptr(GDir) dir = g_dir_open (mv_test_netns_keyfile_dir (fixture->netns), 0, NULL);
    g_assert_nonnull (dir);
    g_assert_null (g_dir_read_name (dir));
  }
}

static void
test_tap_port (Fixture       *fixture,
               gconstpointer  data)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) links = NULL;
  MvNmLink *link;

  ensure_both (fixture);
  assert_bridge (fixture, BRIDGE, "10.77.0.1", 24, 1400);
  assert_tap (fixture, TAP, BRIDGE, OWNER_UID);

  links = mv_nm_list (fixture->nm, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (links->len, ==, 2);
  link = links->pdata[1];
  g_assert_cmpint (link->kind, ==, MV_NM_LINK_TAP);
  g_assert_cmpstr (link->name, ==, TAP);
  g_assert_cmpstr (link->bridge, ==, BRIDGE);
  g_assert_true (link->active);
}

static void
test_remove (Fixture       *fixture,
             gconstpointer  data)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) links = NULL;
  g_autofree char *connections = NULL;

  ensure_both (fixture);
  g_assert_true (device_exists (fixture, TAP));

  g_assert_true (remove_link (fixture->nm, MV_NM_LINK_TAP, TAP, &error));
  g_assert_no_error (error);
  g_assert_false (device_exists (fixture, TAP));
  g_assert_true (device_exists (fixture, BRIDGE));
  g_assert_true (remove_link (fixture->nm, MV_NM_LINK_BRIDGE, BRIDGE, &error));
  g_assert_no_error (error);
  g_assert_false (device_exists (fixture, BRIDGE));

  connections = nmcli_connections (fixture);
  g_assert_null (strstr (connections, MV_NM_ID_PREFIX));
  links = mv_nm_list (fixture->nm, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (links->len, ==, 0);

  /* What is not there is removed already. */
  g_assert_true (remove_link (fixture->nm, MV_NM_LINK_TAP, TAP, &error));
  g_assert_no_error (error);
  g_assert_true (remove_link (fixture->nm, MV_NM_LINK_BRIDGE, "mvtnothing", &error));
  g_assert_no_error (error);
}

static void
test_idempotent (Fixture       *fixture,
                 gconstpointer  data)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *connections = NULL;
  gint64 bridge_index, tap_index;

  ensure_both (fixture);
  bridge_index = ifindex (fixture, BRIDGE);
  tap_index = ifindex (fixture, TAP);

  /* Asked again as it is: the same devices, one connection each. */
  ensure_both (fixture);
  g_assert_cmpint (ifindex (fixture, BRIDGE), ==, bridge_index);
  g_assert_cmpint (ifindex (fixture, TAP), ==, tap_index);
  connections = nmcli_connections (fixture);
  g_assert_cmpuint (count_lines_with (connections, MV_NM_ID_PREFIX BRIDGE), ==, 1);
  g_assert_cmpuint (count_lines_with (connections, MV_NM_ID_PREFIX TAP), ==, 1);
  assert_tap (fixture, TAP, BRIDGE, OWNER_UID);

  /* Asked with another gateway: the bridge carries the new one. */
  g_assert_true (ensure_bridge (fixture->nm, BRIDGE, "10.78.0.1/16", 1400, &error));
  g_assert_no_error (error);
  assert_bridge (fixture, BRIDGE, "10.78.0.1", 16, 1400);
  g_clear_pointer (&connections, g_free);
  connections = nmcli_connections (fixture);
  g_assert_cmpuint (count_lines_with (connections, MV_NM_ID_PREFIX BRIDGE), ==, 1);
}

static void
on_restored (MvNm     *nm,
             gpointer  user_data)
{
  *(gboolean *) user_data = TRUE;
}

/* NetworkManager killed, the devices deleted behind its back, its
 * in-memory profiles gone with its /run: only MvNm can bring them back. */
static void
test_restart (Fixture       *fixture,
              gconstpointer  data)
{
  const char *del_tap[] = { "ip", "link", "delete", TAP, NULL };
  const char *del_bridge[] = { "ip", "link", "delete", BRIDGE, NULL };
  gboolean restored = FALSE;
  gulong handler;

  ensure_both (fixture);
  handler = g_signal_connect (fixture->nm, "restored", G_CALLBACK (on_restored), &restored);

  mv_test_netns_stop_nm (fixture->netns, SIGKILL);
  g_assert_cmpint (mv_test_netns_run (fixture->netns, del_tap, NULL, NULL), ==, 0);
  g_assert_cmpint (mv_test_netns_run (fixture->netns, del_bridge, NULL, NULL), ==, 0);
  g_assert_false (device_exists (fixture, TAP));
  g_assert_false (device_exists (fixture, BRIDGE));

  mv_test_netns_start_nm (fixture->netns);
  iterate_until (&restored, "restoring after NetworkManager came back");
  g_signal_handler_disconnect (fixture->nm, handler);

  assert_bridge (fixture, BRIDGE, "10.77.0.1", 24, 1400);
  assert_tap (fixture, TAP, BRIDGE, OWNER_UID);
}

static void
assert_unavailable (const GError *error)
{
  g_assert_error (error, MV_ERROR, MV_ERROR_UNAVAILABLE);
  g_assert_nonnull (strstr (error->message, "NetworkManager"));
}

static void
test_absent (Fixture       *fixture,
             gconstpointer  data)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) links = NULL;
  g_autoptr(MvNm) late = NULL;

  mv_test_netns_stop_nm (fixture->netns, SIGTERM);
  {
    guint timeout = g_timeout_add_seconds (WAIT_S, on_too_long, (gpointer) "MvNm seeing NetworkManager go");

    while (mv_nm_is_running (fixture->nm))
      g_main_context_iteration (NULL, TRUE);
    g_source_remove (timeout);
  }

  g_assert_false (ensure_bridge (fixture->nm, BRIDGE, GATEWAY, 0, &error));
  assert_unavailable (error);
  g_clear_error (&error);
  g_assert_false (remove_link (fixture->nm, MV_NM_LINK_BRIDGE, BRIDGE, &error));
  assert_unavailable (error);
  g_clear_error (&error);
  links = mv_nm_list (fixture->nm, &error);
  g_assert_null (links);
  assert_unavailable (error);
  g_clear_error (&error);

  /* An MvNm made while NetworkManager is away works once it is back. */
  late = new_nm (fixture->env);
  g_assert_false (mv_nm_is_running (late));
  mv_test_netns_start_nm (fixture->netns);
  {
    gboolean restored = FALSE;
    gulong handler = g_signal_connect (late, "restored", G_CALLBACK (on_restored), &restored);

    iterate_until (&restored, "MvNm seeing NetworkManager appear");
    g_signal_handler_disconnect (late, handler);
  }
  g_assert_true (ensure_bridge (late, BRIDGE, GATEWAY, 0, &error));
  g_assert_no_error (error);
  assert_bridge (fixture, BRIDGE, "10.77.0.1", 24, 0);
}

static void
test_invalid (Fixture       *fixture,
              gconstpointer  data)
{
  g_autoptr(GError) error = NULL;

  /* 16 bytes: one more than IFNAMSIZ - 1. */
  g_assert_false (ensure_bridge (fixture->nm, "mvtbr0123456789x", GATEWAY, 0, &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
  g_assert_nonnull (strstr (error->message, "15"));
  g_clear_error (&error);
  g_assert_false (ensure_tap (fixture->nm, "mvttap0123456789", BRIDGE, OWNER_UID, &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  g_assert_false (ensure_bridge (fixture->nm, "mv/br", GATEWAY, 0, &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  g_assert_false (ensure_bridge (fixture->nm, BRIDGE, "10.77.0.1", 0, &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  g_assert_false (ensure_bridge (fixture->nm, BRIDGE, "10.77.0.300/24", 0, &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  g_assert_false (ensure_bridge (fixture->nm, BRIDGE, GATEWAY, 20, &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  /* A TAP needs a bridge of ours. */
  g_assert_false (ensure_tap (fixture->nm, TAP, BRIDGE, OWNER_UID, &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_NOT_FOUND);
  g_clear_error (&error);
  g_assert_false (device_exists (fixture, BRIDGE));
  g_assert_false (device_exists (fixture, TAP));

  /* Exactly 15 bytes is a name. */
  g_assert_true (mv_nm_check_ifname ("mvtbr0123456789", &error));
  g_assert_no_error (error);
}

int
main (int    argc,
      char **argv)
{
  g_test_init (&argc, &argv, NULL);

  g_test_add ("/network/nm/bridge-gateway", Fixture, NULL, fixture_set_up,
              test_bridge_gateway, fixture_tear_down);
  g_test_add ("/network/nm/tap-port", Fixture, NULL, fixture_set_up,
              test_tap_port, fixture_tear_down);
  g_test_add ("/network/nm/remove", Fixture, NULL, fixture_set_up,
              test_remove, fixture_tear_down);
  g_test_add ("/network/nm/idempotent", Fixture, NULL, fixture_set_up,
              test_idempotent, fixture_tear_down);
  g_test_add ("/network/nm/restart", Fixture, NULL, fixture_set_up,
              test_restart, fixture_tear_down);
  g_test_add ("/network/nm/absent", Fixture, NULL, fixture_set_up,
              test_absent, fixture_tear_down);
  g_test_add ("/network/nm/invalid", Fixture, NULL, fixture_set_up,
              test_invalid, fixture_tear_down);
  return g_test_run ();
}
