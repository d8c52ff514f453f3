/* Networks through the daemon: CreateNetwork and its refusals, ListNetworks,
 * the Network object's properties, Delete refused while a machine's spec
 * names the network, an invalid record left alone and reported, polkit's
 * refusal of an unprivileged caller, and microvmctl network. The host's
 * side (bridges, TAPs) is in test-net-guests.c, with NetworkManager. */
#include "bus-client.h"
#include "names.h"

#include <json-glib/json-glib.h>
#include <signal.h>

#define MACHINE_ON_LAN "{\"name\":\"web\",\"hypervisor_type\":\"test\",\"kernel\":\"/k\"," \
                       "\"network_name\":\"lan\"}"

static char *
create_network (Fixture *f, const char *json, char **error_name, char **error_message)
{
  g_autofree char *message = NULL;
  g_autoptr (sd_bus_message) reply = client_call (f->client, MV_MANAGER_PATH, MV_MANAGER_IFACE,
                                                  "CreateNetwork", error_name, &message, "s", json);
  const char *path = NULL;

  if (reply == NULL)
    {
      g_test_message ("CreateNetwork %s: %s", json, message);
      if (error_message)
        *error_message = g_steal_pointer (&message);
      return NULL;
    }
  g_assert_cmpint (sd_bus_message_read (reply, "o", &path), >, 0);
  return g_strdup (path);
}

static char *
network_string (Fixture *f, const char *path, const char *prop)
{
  sd_bus_error error = SD_BUS_ERROR_NULL;
  char *value = NULL;
  int r = sd_bus_get_property_string (f->client->bus, MV_BUS_NAME, path, MV_NETWORK_IFACE, prop,
                                      &error, &value);

  if (r < 0)
    {
      g_test_message ("%s.%s: %s", path, prop, error.message);
      sd_bus_error_free (&error);
      return NULL;
    }
  return value;
}

static guint32
network_u32 (Fixture *f, const char *path, const char *prop)
{
  sd_bus_error error = SD_BUS_ERROR_NULL;
  uint32_t value = 0;

  g_assert_cmpint (sd_bus_get_property_trivial (f->client->bus, MV_BUS_NAME, path,
                                                MV_NETWORK_IFACE, prop, &error, 'u', &value), >=, 0);
  return value;
}

static guint
count_machines (Fixture *f, const char *path, const char *want)
{
  sd_bus_error error = SD_BUS_ERROR_NULL;
  g_autoptr (sd_bus_message) reply = NULL;
  const char *machine;
  guint n = 0;

  g_assert_cmpint (sd_bus_get_property (f->client->bus, MV_BUS_NAME, path, MV_NETWORK_IFACE,
                                        "Machines", &error, &reply, "ao"), >=, 0);
  g_assert_cmpint (sd_bus_message_enter_container (reply, 'a', "o"), >, 0);
  while (sd_bus_message_read (reply, "o", &machine) > 0)
    {
      if (want)
        g_assert_cmpstr (machine, ==, want);
      n++;
    }
  return n;
}

static guint
count_network_dirs (Fixture *f)
{
  g_autofree char *dir = g_build_filename (mv_test_env_state_dir (f->env), MV_NETWORKS_DIR, NULL);
  g_autoptr (GDir) d = g_dir_open (dir, 0, NULL);
  guint n = 0;

  while (d && g_dir_read_name (d))
    n++;
  return n;
}

/* ListNetworks as "name=path name=path". */
static char *
list_networks (Fixture *f)
{
  g_autoptr (sd_bus_message) reply = client_call (f->client, MV_MANAGER_PATH, MV_MANAGER_IFACE,
                                                  "ListNetworks", NULL, NULL, NULL);
  GString *text = g_string_new (NULL);
  const char *id, *name, *path;

  g_assert_nonnull (reply);
  g_assert_cmpint (sd_bus_message_enter_container (reply, 'a', "(sso)"), >, 0);
  while (sd_bus_message_read (reply, "(sso)", &id, &name, &path) > 0)
    {
      g_assert_cmpuint (strlen (id), ==, 32);
      g_string_append_printf (text, "%s%s=%s", text->len ? " " : "", name, path);
    }
  return g_string_free (text, FALSE);
}

static void
assert_refused (Fixture *f, const char *json, const char *want_name, const char *want_text)
{
  g_autofree char *err = NULL, *msg = NULL;
  g_autofree char *path = create_network (f, json, &err, &msg);

  g_assert_null (path);
  g_assert_cmpstr (err, ==, want_name);
  if (want_text && !strstr (msg, want_text))
    g_error ("%s: '%s' does not say '%s'", json, msg, want_text);
}

static void
test_create_list_refusals (Fixture *f, gconstpointer data)
{
  g_autofree char *lan = create_network (f, "{\"name\":\"lan\",\"subnet\":\"10.10.0.0/24\"}",
                                         NULL, NULL);
  g_autofree char *dmz = NULL, *listed = NULL, *want = NULL;
  g_autofree char *name = NULL, *subnet = NULL, *gateway = NULL, *bridge = NULL, *id = NULL;
  g_autofree char *err = NULL;
  g_auto (GStrv) features = NULL;
  sd_bus_error error = SD_BUS_ERROR_NULL;
  int nat = -1;

  g_assert_nonnull (lan);
  g_assert_true (g_str_has_prefix (lan, MV_NETWORK_PREFIX "/"));
  name = network_string (f, lan, "Name");
  subnet = network_string (f, lan, "Subnet");
  gateway = network_string (f, lan, "Gateway");
  bridge = network_string (f, lan, "Bridge");
  id = network_string (f, lan, "Id");
  g_assert_cmpstr (name, ==, "lan");
  g_assert_cmpstr (subnet, ==, "10.10.0.0/24");
  g_assert_cmpstr (gateway, ==, "10.10.0.1");
  g_assert_true (g_str_has_prefix (bridge, "mvbr"));
  g_assert_cmpuint (strlen (bridge), ==, 15);
  g_assert_cmpuint (network_u32 (f, lan, "MTU"), ==, 1500);
  g_assert_cmpint (sd_bus_get_property_trivial (f->client->bus, MV_BUS_NAME, lan, MV_NETWORK_IFACE,
                                                "NAT", &error, 'b', &nat), >=, 0);
  g_assert_cmpint (nat, ==, 1);
  g_assert_cmpuint (count_machines (f, lan, NULL), ==, 0);
  g_assert_cmpuint (count_network_dirs (f), ==, 1);
  client_settle (f->client, 200);
  g_assert_cmpuint (client_count_signals (f->client, MV_MANAGER_PATH, "InterfacesAdded"), >=, 1);

  g_assert_cmpint (sd_bus_get_property_strv (f->client->bus, MV_BUS_NAME, MV_MANAGER_PATH,
                                             MV_MANAGER_IFACE, "Features", &error, &features), >=, 0);
  g_assert_true (g_strv_contains ((const char *const *) features, "networks"));

  dmz = create_network (f, "{\"name\":\"dmz\",\"subnet\":\"192.168.50.0/24\",\"gateway\":"
                        "\"192.168.50.254\",\"nat\":false,\"mtu\":1400}", NULL, NULL);
  g_assert_nonnull (dmz);
  g_assert_cmpuint (network_u32 (f, dmz, "MTU"), ==, 1400);
  listed = list_networks (f);
  want = g_strdup_printf ("dmz=%s lan=%s", dmz, lan);
  g_assert_cmpstr (listed, ==, want);

  /* Each refused, and nothing new on disk. */
  assert_refused (f, "{\"name\":\"wide\",\"subnet\":\"10.0.0.0/8\"}", MV_BUS_ERROR_INVALID_ARGUMENT,
                  "subnet: 10.0.0.0/8 overlaps 10.10.0.0/24 of the network lan");
  assert_refused (f, "{\"name\":\"x\",\"subnet\":", MV_BUS_ERROR_INVALID_ARGUMENT, "spec");
  assert_refused (f, "{\"name\":\"x\",\"subnet\":\"10.20.0.0/24\",\"vlan\":2}",
                  MV_BUS_ERROR_INVALID_ARGUMENT, "unknown field");
  assert_refused (f, "{\"name\":\"x\",\"subnet\":\"10.20.0.7/24\"}", MV_BUS_ERROR_INVALID_ARGUMENT,
                  "not a network address");
  assert_refused (f, "{\"name\":\"x\",\"subnet\":\"10.20.0.0/24\",\"gateway\":\"10.21.0.1\"}",
                  MV_BUS_ERROR_INVALID_ARGUMENT, "gateway: 10.21.0.1 is outside the subnet");
  assert_refused (f, "{\"name\":\"x\",\"subnet\":\"fd00::/64\"}", MV_BUS_ERROR_UNSUPPORTED, "subnet:");
  assert_refused (f, "{\"name\":\"lan\",\"subnet\":\"10.30.0.0/24\"}", MV_BUS_ERROR_ALREADY_EXISTS,
                  "lan");
  g_assert_cmpuint (count_network_dirs (f), ==, 2);

  /* Delete: the object goes, and the record. */
  g_autoptr (sd_bus_message) gone = client_call (f->client, dmz, MV_NETWORK_IFACE, "Delete", &err,
                                                 NULL, NULL);
  g_assert_nonnull (gone);
  g_assert_cmpuint (count_network_dirs (f), ==, 1);
  g_assert_null (network_string (f, dmz, "Name"));
  client_settle (f->client, 200);
  g_assert_cmpuint (client_count_signals (f->client, MV_MANAGER_PATH, "InterfacesRemoved"), >=, 1);

  /* The records outlive the daemon. */
  mv_test_env_stop_daemon (f->env, SIGTERM);
  mv_test_env_start_daemon (f->env, NULL);
  client_free (f->client);
  f->client = client_new (f->env);
  g_clear_pointer (&listed, g_free);
  g_clear_pointer (&want, g_free);
  listed = list_networks (f);
  want = g_strdup_printf ("lan=%s", lan);
  g_assert_cmpstr (listed, ==, want);
}

static void
test_delete_refused_while_named (Fixture *f, gconstpointer data)
{
  g_autofree char *lan = create_network (f, "{\"name\":\"lan\",\"subnet\":\"10.10.0.0/24\"}",
                                         NULL, NULL);
  g_autofree char *machine = NULL;
  g_autofree char *err = NULL, *msg = NULL, *err2 = NULL;

  g_assert_nonnull (lan);
  machine = client_create_ok (f->client, MACHINE_ON_LAN);
  g_assert_cmpuint (count_machines (f, lan, machine), ==, 1);
  g_autoptr (sd_bus_message) refused = client_call (f->client, lan, MV_NETWORK_IFACE, "Delete",
                                                    &err, &msg, NULL);
  g_assert_null (refused);
  g_assert_cmpstr (err, ==, MV_BUS_ERROR_INVALID_STATE);
  g_assert_nonnull (strstr (msg, "web"));
  g_assert_cmpuint (count_network_dirs (f), ==, 1);

  /* The machine gone, Machines says so and the network can go. */
  g_autoptr (sd_bus_message) deleted = client_call (f->client, machine, MV_MACHINE_IFACE, "Delete",
                                                    NULL, NULL, "b", 0);
  g_assert_nonnull (deleted);
  client_settle (f->client, 200);
  g_assert_cmpuint (count_machines (f, lan, NULL), ==, 0);
  g_assert_cmpuint (client_count_signals (f->client, lan, "PropertiesChanged:Machines"), >=, 1);
  g_autoptr (sd_bus_message) gone = client_call (f->client, lan, MV_NETWORK_IFACE, "Delete", &err2,
                                                 NULL, NULL);
  g_assert_nonnull (gone);
  g_assert_cmpuint (count_network_dirs (f), ==, 0);
}

static void
test_invalid_record (Fixture *f, gconstpointer data)
{
  g_autofree char *lan = create_network (f, "{\"name\":\"lan\",\"subnet\":\"10.10.0.0/24\"}",
                                         NULL, NULL);
  g_autofree char *bad_dir = g_build_filename (mv_test_env_state_dir (f->env), MV_NETWORKS_DIR,
                                               "00000000000000000000000000000bad", NULL);
  g_autofree char *bad = g_build_filename (bad_dir, "network.json", NULL);
  g_autofree char *text = NULL, *listed = NULL, *want = NULL;
  static const char garbage[] = "{\"format\":1,\"id\":\"00000000000000000000000000000bad\","
                                "\"name\":\"broken\",\"subnet\":\"10.99.0.0/33\"}";
  sd_bus_error error = SD_BUS_ERROR_NULL;
  g_autoptr (sd_bus_message) reply = NULL;
  const char *path, *reason;
  gboolean reported = FALSE;

  g_assert_nonnull (lan);
  mv_test_env_stop_daemon (f->env, SIGTERM);
  g_assert_cmpint (g_mkdir_with_parents (bad_dir, 0700), ==, 0);
  g_assert_true (g_file_set_contents (bad, garbage, -1, NULL));
  mv_test_env_start_daemon (f->env, NULL);
  client_free (f->client);
  f->client = client_new (f->env);

  g_assert_cmpint (sd_bus_get_property (f->client->bus, MV_BUS_NAME, MV_MANAGER_PATH,
                                        MV_MANAGER_IFACE, "InvalidRecords", &error, &reply,
                                        "a(ss)"), >=, 0);
  g_assert_cmpint (sd_bus_message_enter_container (reply, 'a', "(ss)"), >, 0);
  while (sd_bus_message_read (reply, "(ss)", &path, &reason) > 0)
    if (g_str_equal (path, bad))
      {
        reported = TRUE;
        g_assert_nonnull (strstr (reason, "subnet"));
      }
  g_assert_true (reported);
  g_assert_true (g_file_get_contents (bad, &text, NULL, NULL));
  g_assert_cmpstr (text, ==, garbage);
  /* The rest works. */
  listed = list_networks (f);
  want = g_strdup_printf ("lan=%s", lan);
  g_assert_cmpstr (listed, ==, want);
  g_assert_cmpuint (count_network_dirs (f), ==, 2);
}

static int
call_as_nobody (Fixture *f, const char *path, const char *method, const char *arg, char **output)
{
  const char *argv[] = { "gdbus", "call", "--system", "--dest", MV_BUS_NAME, "--object-path", path,
                         "--method", method, arg, NULL };
  g_autofree char *out = NULL, *err = NULL;
  int status = mv_test_env_run_as_nobody (f->env, argv, &out, &err);

  *output = g_strconcat (out ? out : "", err ? err : "", NULL);
  return status;
}

static void
assert_denied (Fixture *f, const char *path, const char *method, const char *arg)
{
  g_autofree char *output = NULL;

  g_assert_cmpint (call_as_nobody (f, path, method, arg, &output), !=, 0);
  if (!strstr (output, "org.freedesktop.DBus.Error.AccessDenied") &&
      !strstr (output, "org.freedesktop.DBus.Error.InteractiveAuthorizationRequired"))
    g_error ("%s %s: expected a refusal, got: %s", path, method, output);
}

static void
test_unprivileged (Fixture *f, gconstpointer data)
{
  g_autofree char *lan = create_network (f, "{\"name\":\"lan\",\"subnet\":\"10.10.0.0/24\"}",
                                         NULL, NULL);
  g_autofree char *output = NULL;

  g_assert_nonnull (lan);
  assert_denied (f, MV_MANAGER_PATH, MV_MANAGER_IFACE ".CreateNetwork",
                 "{\"name\":\"mine\",\"subnet\":\"10.20.0.0/24\"}");
  assert_denied (f, lan, MV_NETWORK_IFACE ".Delete", NULL);
  g_assert_cmpuint (count_network_dirs (f), ==, 1);
  /* Reading is open to everyone. */
  g_assert_cmpint (call_as_nobody (f, MV_MANAGER_PATH, MV_MANAGER_IFACE ".ListNetworks", NULL,
                                   &output), ==, 0);
  g_assert_nonnull (strstr (output, "'lan'"));
}

static int
microvmctl (Fixture *f, char **out, char **err, ...)
{
  g_autoptr (GPtrArray) argv = g_ptr_array_new ();
  g_autofree char *exe = g_build_filename (g_getenv ("MICROVMD_BUILD_DIR"), "src", "cli",
                                           "microvmctl", NULL);
  const char *arg;
  va_list ap;

  g_ptr_array_add (argv, exe);
  g_ptr_array_add (argv, "--no-ask-password");
  va_start (ap, err);
  while ((arg = va_arg (ap, const char *)))
    g_ptr_array_add (argv, (gpointer) arg);
  va_end (ap);
  g_ptr_array_add (argv, NULL);
  return mv_test_env_run (f->env, (const char *const *) argv->pdata, out, err);
}

static void
test_cli (Fixture *f, gconstpointer data)
{
  g_autofree char *out = NULL, *err = NULL;

  g_assert_cmpint (microvmctl (f, NULL, NULL, "network", "create", "lan", "10.10.0.0/24",
                               "--gateway", "10.10.0.254", "--no-nat", "--mtu", "1400", NULL), ==, 0);
  g_assert_cmpint (microvmctl (f, &out, NULL, "network", "list", NULL), ==, 0);
  g_assert_nonnull (strstr (out, "lan"));
  g_assert_nonnull (strstr (out, "10.10.0.0/24"));
  g_assert_nonnull (strstr (out, "10.10.0.254"));
  g_assert_nonnull (strstr (out, "1400"));
  g_assert_nonnull (strstr (out, "mvbr"));
  g_clear_pointer (&out, g_free);
  g_assert_cmpint (microvmctl (f, &out, NULL, "network", "list", "--names", NULL), ==, 0);
  g_assert_cmpstr (out, ==, "lan\n");
  g_clear_pointer (&out, g_free);
  g_assert_cmpint (microvmctl (f, &out, NULL, "--json", "network", "list", NULL), ==, 0);
  g_assert_nonnull (strstr (out, "\"nat\" : false"));
  g_clear_pointer (&out, g_free);

  /* The daemon's refusal, quoted; a usage error before any call. */
  g_assert_cmpint (microvmctl (f, NULL, &err, "network", "create", "wide", "10.0.0.0/8", NULL), ==, 1);
  g_assert_nonnull (strstr (err, "overlaps"));
  g_clear_pointer (&err, g_free);
  g_assert_cmpint (microvmctl (f, NULL, &err, "network", "list", "--mtu", "1400", NULL), ==, 2);
  g_clear_pointer (&err, g_free);
  g_assert_cmpint (microvmctl (f, NULL, &err, "volume", "list", "--no-nat", NULL), ==, 2);
  g_clear_pointer (&err, g_free);

  g_assert_cmpint (microvmctl (f, NULL, NULL, "network", "rm", "lan", NULL), ==, 0);
  g_assert_cmpuint (count_network_dirs (f), ==, 0);
  g_assert_cmpint (microvmctl (f, NULL, &err, "network", "rm", "lan", NULL), ==, 1);
  g_assert_nonnull (strstr (err, "no network called lan"));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add ("/networks/create-list-refusals", Fixture, NULL, fixture_setup_netns,
              test_create_list_refusals, fixture_teardown);
  g_test_add ("/networks/delete-refused-while-named", Fixture, NULL, fixture_setup_netns,
              test_delete_refused_while_named, fixture_teardown);
  g_test_add ("/networks/invalid-record", Fixture, NULL, fixture_setup_netns, test_invalid_record,
              fixture_teardown);
  g_test_add ("/networks/unprivileged", Fixture, NULL, fixture_setup_netns, test_unprivileged,
              fixture_teardown);
  g_test_add ("/networks/cli", Fixture, NULL, fixture_setup_netns, test_cli, fixture_teardown);
  return g_test_run ();
}
