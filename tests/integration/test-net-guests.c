/* Machines on networks, end to end: the daemon and its QEMU guests (TCG)
 * in a network namespace of the test's own with a real NetworkManager in
 * it on the private bus. A network's bridge carries its gateway; guests on
 * it are given their addresses by the agent and reach each other and the
 * gateway; a static IP is honoured and a taken one refused; a stopped
 * machine keeps its address and gives up its TAP; Update moves it; destroy
 * gives everything back; NetworkManager restarting under a running daemon
 * gets its bridge and TAPs back; without NetworkManager a networked start
 * is Unavailable and says so. No packet leaves the namespace. */
#include "bus-client.h"
#include "names.h"
#include "test-netns.h"

#include <json-glib/json-glib.h>
#include <signal.h>

static char *rootfs;

typedef struct {
  Fixture      f;
  MvTestNetns *netns;
} NetFixture;

static char *guest_files;

static const char config_text[] =
  "[qemu]\naccel=tcg\n"
  "[lifecycle]\n"
  "boot-timeout-seconds=40\n"
  "stop-timeout-seconds=20\n"
  "restart-backoff-ms=300\n"
  /* Nothing here waits for a resync: a wake on traffic starts at once. */
  "resync-seconds=600\n";

static void
net_setup (NetFixture *nf, gconstpointer data)
{
  Fixture *f = &nf->f;
  const char *type = data;
  g_autofree char *base = g_strconcat (config_text, guest_files, NULL);
  g_autofree char *config = type ? guest_config (type, base) : g_strdup (base);

  f->env = mv_test_env_new ();
  nf->netns = mv_test_netns_new (f->env);
  mv_test_env_write_config (f->env, config);
  mv_test_env_set_daemon_netns (f->env, mv_test_netns_name (nf->netns));
  mv_test_env_start_daemon (f->env, NULL);
  f->client = client_new (f->env);
}

static void
net_teardown (NetFixture *nf, gconstpointer data)
{
  Fixture *f = &nf->f;

  client_delete_all (f->client);
  client_free (f->client);
  /* The daemon first: it is a client of NetworkManager's. */
  mv_test_env_stop_daemon (f->env, SIGTERM);
  mv_test_netns_free (nf->netns);
  mv_test_env_free (f->env);
}

/* ---- helpers ---- */

static char *
create_network (Fixture *f, const char *json)
{
  g_autofree char *err = NULL, *msg = NULL;
  g_autoptr (sd_bus_message) reply = client_call (f->client, MV_MANAGER_PATH, MV_MANAGER_IFACE,
                                                  "CreateNetwork", &err, &msg, "s", json);
  const char *path = NULL;

  if (!reply)
    g_error ("CreateNetwork %s: %s: %s", json, err, msg);
  g_assert_cmpint (sd_bus_message_read (reply, "o", &path), >, 0);
  return g_strdup (path);
}

static char *
network_bridge (Fixture *f, const char *path)
{
  sd_bus_error error = SD_BUS_ERROR_NULL;
  char *value = NULL;

  g_assert_cmpint (sd_bus_get_property_string (f->client->bus, MV_BUS_NAME, path,
                                               MV_NETWORK_IFACE, "Bridge", &error, &value), >=, 0);
  return value;
}

/* `ip -j addr show dev IFNAME` in the namespace: whether it holds
 * @cidr ("10.88.0.1/24"); FALSE if there is no such device. */
static gboolean
device_has_address (NetFixture *nf, const char *ifname, const char *cidr)
{
  const char *argv[] = { "ip", "-j", "addr", "show", "dev", ifname, NULL };
  g_autofree char *out = NULL, *err = NULL;
  g_auto (GStrv) parts = g_strsplit (cidr, "/", 2);
  g_autoptr (JsonParser) parser = json_parser_new ();
  JsonArray *links;

  if (mv_test_netns_run (nf->netns, argv, &out, &err) != 0 ||
      !json_parser_load_from_data (parser, out, -1, NULL))
    return FALSE;
  links = json_node_get_array (json_parser_get_root (parser));
  for (guint i = 0; i < json_array_get_length (links); i++)
    {
      JsonArray *addrs = json_object_get_array_member (json_array_get_object_element (links, i),
                                                       "addr_info");
      for (guint j = 0; addrs && j < json_array_get_length (addrs); j++)
        {
          JsonObject *a = json_array_get_object_element (addrs, j);

          if (g_strcmp0 (json_object_get_string_member_with_default (a, "local", ""),
                         parts[0]) == 0 &&
              json_object_get_int_member_with_default (a, "prefixlen", -1) ==
                g_ascii_strtoll (parts[1], NULL, 10))
            return TRUE;
        }
    }
  return FALSE;
}

static gboolean
device_exists (NetFixture *nf, const char *ifname)
{
  const char *argv[] = { "ip", "link", "show", "dev", ifname, NULL };
  g_autofree char *out = NULL, *err = NULL;

  return mv_test_netns_run (nf->netns, argv, &out, &err) == 0;
}

/* The interface @ifname's master, or NULL. */
static char *
device_master (NetFixture *nf, const char *ifname)
{
  const char *argv[] = { "ip", "-j", "link", "show", "dev", ifname, NULL };
  g_autofree char *out = NULL, *err = NULL;
  g_autoptr (JsonParser) parser = json_parser_new ();
  JsonArray *links;

  if (mv_test_netns_run (nf->netns, argv, &out, &err) != 0 ||
      !json_parser_load_from_data (parser, out, -1, NULL))
    return NULL;
  links = json_node_get_array (json_parser_get_root (parser));
  if (json_array_get_length (links) != 1)
    return NULL;
  return g_strdup (json_object_get_string_member_with_default (
    json_array_get_object_element (links, 0), "master", NULL));
}

static void
wait_for_address (NetFixture *nf, const char *ifname, const char *cidr)
{
  for (guint i = 0; i < 200; i++)
    {
      if (device_has_address (nf, ifname, cidr))
        return;
      g_usleep (100 * 1000);
    }
  g_error ("%s never had %s", ifname, cidr);
}

static void
wait_for_device (NetFixture *nf, const char *ifname, gboolean present)
{
  for (guint i = 0; i < 200; i++)
    {
      if (device_exists (nf, ifname) == present)
        return;
      g_usleep (100 * 1000);
    }
  g_error ("%s is %s", ifname, present ? "never there" : "still there");
}

/* A machine of microvmd's guest on @network, its extra spec fields
 * @extra (may be NULL); created and not started. */
static char *
create_on (Fixture *f, const char *name, const char *network, const char *extra)
{
  g_autofree char *spec = g_strdup_printf (
    "{\"name\":\"%s\",\"hypervisor_type\":\"qemu\",\"memory_bytes\":268435456,"
    "\"readiness\":\"agent\",\"network_name\":\"%s\","
    "\"disks\":[{\"path\":\"%s\",\"read_only\":true,\"root\":true}]%s%s}",
    name, network, rootfs, extra ? "," : "", extra ? extra : "");

  return client_create_ok (f->client, spec);
}

static char *
tap_of (Fixture *f, const char *path)
{
  g_autofree char *id = client_get_string (f->client, path, "Id");
  g_autofree char *input = g_strconcat ("tap:", id, NULL);
  g_autofree char *hex = g_compute_checksum_for_string (G_CHECKSUM_SHA256, input, -1);

  /* core/ipam.c: "mv" and 13 hex digits of a SHA-256 of "tap:" and the ID. */
  return g_strdup_printf ("mv%.13s", hex);
}

static int
guest_run (Fixture *f, const char *path, const char *const *argv, char **out)
{
  g_auto (ExecResult) r = { 0 };

  exec_run (f, path, argv, NULL, &r);
  g_test_message ("%s: %s %s%s", argv[0], r.status, r.out, r.err);
  if (out)
    *out = g_strdup (r.out);
  return g_str_equal (r.status, "exit 0") ? 0 : 1;
}

static void
assert_pings (Fixture *f, const char *path, const char *address)
{
  const char *argv[] = { "ping", "-c", "1", "-W", "3", address, NULL };

  g_assert_cmpint (guest_run (f, path, argv, NULL), ==, 0);
}

/* ---- the tests ---- */

/* The bridge carries the gateway; two guests on it reach each other and
 * the gateway at the addresses they were given, one of them its static
 * IP, which a third machine cannot have. */
static void
test_guests_ping (NetFixture *nf, gconstpointer data)
{
  Fixture *f = &nf->f;
  g_autofree char *net = create_network (f, "{\"name\":\"lan\",\"subnet\":\"10.88.0.0/24\"}");
  g_autofree char *bridge = network_bridge (f, net);
  g_autofree char *a = NULL, *b = NULL, *a_address = NULL, *b_address = NULL;
  g_autofree char *a_tap = NULL, *master = NULL, *err = NULL, *msg = NULL;
  g_autofree char *taken = NULL, *c = NULL, *ifconfig = NULL;
  const char *show[] = { "ip", "-4", "addr", NULL };

  /* The bridge is up with the gateway before any machine is on it, and
   * asks for its neighbours often enough that a woken guest is found at
   * once. */
  wait_for_address (nf, bridge, "10.88.0.1/24");
  {
    g_autofree char *file = g_strdup_printf ("/proc/sys/net/ipv4/neigh/%s/retrans_time_ms", bridge);
    const char *cat[] = { "cat", file, NULL };
    g_autofree char *retrans = NULL;

    for (guint i = 0; i < 50; i++)
      {
        g_clear_pointer (&retrans, g_free);
        g_assert_cmpint (mv_test_netns_run (nf->netns, cat, &retrans, NULL), ==, 0);
        if (g_str_equal (retrans, "100\n"))
          break;
        g_usleep (100 * 1000);
      }
    g_assert_cmpstr (retrans, ==, "100\n");
  }

  a = create_on (f, "a", "lan", "\"hostname\":\"alpha\"");
  b = create_on (f, "b", "lan", "\"static_ip\":\"10.88.0.50\"");
  client_call_ok (f->client, a, "Start");
  client_call_ok (f->client, b, "Start");
  a_address = client_get_string (f->client, a, "Address");
  b_address = client_get_string (f->client, b, "Address");
  g_assert_cmpstr (a_address, ==, "10.88.0.2");
  g_assert_cmpstr (b_address, ==, "10.88.0.50");

  /* Each TAP is a port of the bridge. */
  a_tap = tap_of (f, a);
  master = device_master (nf, a_tap);
  g_assert_cmpstr (master, ==, bridge);

  /* The guest has its address on its interface, from the agent. */
  g_assert_cmpint (guest_run (f, b, show, &ifconfig), ==, 0);
  g_assert_nonnull (strstr (ifconfig, "10.88.0.50/24"));

  assert_pings (f, a, "10.88.0.50");
  assert_pings (f, b, "10.88.0.2");
  assert_pings (f, a, "10.88.0.1");

  /* The network's DNS, on the gateway the guest was told of, knows the
   * running machines by name and hostname, whatever the case; a stopped
   * one's name does not resolve. */
  {
    const char *resolv[] = { "cat", "/etc/resolv.conf", NULL };
    const char *by_name[] = { "nslookup", "a", NULL };
    const char *by_hostname[] = { "nslookup", "ALPHA.microvm", NULL };
    const char *by_address[] = { "nslookup", "10.88.0.50", NULL };
    const char *stopped[] = { "nslookup", "sleeper", NULL };
    g_autofree char *out = NULL, *sleeper = NULL;

    g_autofree char *maps_path = g_strdup_printf ("/proc/%d/maps",
                                                  (int) mv_test_env_daemon_pid (f->env));
    g_autofree char *maps = NULL;

    g_assert_cmpint (guest_run (f, b, resolv, &out), ==, 0);
    g_assert_nonnull (strstr (out, "nameserver 10.88.0.1"));
    g_clear_pointer (&out, g_free);
    g_assert_cmpint (guest_run (f, b, by_name, &out), ==, 0);
    g_assert_nonnull (strstr (out, "10.88.0.2"));
    g_clear_pointer (&out, g_free);
    /* ldns was opened for the first query, in the daemon. */
    g_assert_true (g_file_get_contents (maps_path, &maps, NULL, NULL));
    g_assert_nonnull (strstr (maps, "/libldns.so"));
    g_assert_cmpint (guest_run (f, b, by_hostname, &out), ==, 0);
    g_assert_nonnull (strstr (out, "10.88.0.2"));
    g_clear_pointer (&out, g_free);
    g_assert_cmpint (guest_run (f, a, by_address, &out), ==, 0);
    g_assert_nonnull (strstr (out, "b.microvm"));

    sleeper = client_create_ok (f->client, "{\"name\":\"sleeper\",\"hypervisor_type\":\"test\","
                                "\"kernel\":\"/boot/vmlinuz\",\"network_name\":\"lan\"}");
    client_call_ok (f->client, sleeper, "Start");
    g_clear_pointer (&out, g_free);
    g_assert_cmpint (guest_run (f, b, stopped, &out), ==, 0);
    client_call_ok (f->client, sleeper, "Stop");
    g_assert_cmpint (guest_run (f, b, stopped, NULL), !=, 0);
  }

  /* Taken: refused at create, nothing recorded. */
  taken = g_strdup_printf ("{\"name\":\"c\",\"hypervisor_type\":\"qemu\",\"network_name\":\"lan\","
                           "\"static_ip\":\"10.88.0.50\",\"disks\":[{\"path\":\"%s\","
                           "\"read_only\":true,\"root\":true}]}", rootfs);
  c = client_create (f->client, taken, 0, &err, &msg);
  g_assert_null (c);
  g_assert_cmpstr (err, ==, "org.microvmd1.Error.Conflict");
  g_assert_nonnull (strstr (msg, "static_ip"));
  g_clear_pointer (&err, g_free);
  g_clear_pointer (&msg, g_free);

  /* The gateway and an address outside the subnet are not a machine's. */
  g_free (taken);
  taken = g_strdup_printf ("{\"name\":\"c\",\"hypervisor_type\":\"qemu\",\"network_name\":\"lan\","
                           "\"static_ip\":\"10.88.0.1\",\"kernel\":\"/k\"}");
  g_assert_null (client_create (f->client, taken, 0, &err, &msg));
  g_assert_cmpstr (err, ==, "org.microvmd1.Error.InvalidArgument");
  g_assert_nonnull (strstr (msg, "static_ip"));
  g_clear_pointer (&err, g_free);
  g_clear_pointer (&msg, g_free);
  g_assert_null (client_create (f->client,
                                "{\"name\":\"c\",\"hypervisor_type\":\"qemu\","
                                "\"network_name\":\"nosuch\",\"kernel\":\"/k\"}", 0, &err, &msg));
  g_assert_cmpstr (err, ==, "org.microvmd1.Error.NotFound");
  g_assert_nonnull (strstr (msg, "network_name"));

  /* Destroyed: its TAP goes, and its address is free for another. */
  {
    g_autoptr (sd_bus_message) r = client_call (f->client, a, MV_MACHINE_IFACE, "Delete", NULL,
                                                NULL, "b", 1);
    g_assert_nonnull (r);
  }
  wait_for_device (nf, a_tap, FALSE);
  g_free (c);
  c = create_on (f, "c", "lan", "\"static_ip\":\"10.88.0.2\"");
  g_assert_nonnull (c);
}

/* Stop keeps the address and gives up the TAP; Update of static_ip
 * frees the old address at once; the next start has the new one. */
static void
test_stop_and_update (NetFixture *nf, gconstpointer data)
{
  Fixture *f = &nf->f;
  g_autofree char *net = create_network (f, "{\"name\":\"lan\",\"subnet\":\"10.89.0.0/24\","
                                         "\"mtu\":1400}");
  g_autofree char *a = create_on (f, "a", "lan", "\"download_bytes_per_second\":1048576,"
                                   "\"upload_bytes_per_second\":524288");
  g_autofree char *tap = tap_of (f, a), *address = NULL, *spec = NULL, *other = NULL;
  g_autofree char *link = NULL, *qdiscs = NULL;
  const char *show[] = { "ip", "link", NULL };
  const char *tc[] = { "tc", "-j", "qdisc", "show", "dev", tap, NULL };

  client_call_ok (f->client, a, "Start");
  /* QEMU has no limiter of its own: its TAP is shaped (tbf, 1 MiB/s). */
  g_assert_cmpint (mv_test_netns_run (nf->netns, tc, &qdiscs, NULL), ==, 0);
  g_test_message ("%s", qdiscs);
  g_assert_nonnull (strstr (qdiscs, "\"tbf\""));
  g_assert_nonnull (strstr (qdiscs, "1048576"));
  address = client_get_string (f->client, a, "Address");
  g_assert_cmpstr (address, ==, "10.89.0.2");
  g_assert_true (device_exists (nf, tap));
  /* The network's MTU reaches the guest. */
  g_assert_cmpint (guest_run (f, a, show, &link), ==, 0);
  g_assert_nonnull (strstr (link, "mtu 1400"));

  client_call_ok (f->client, a, "Stop");
  wait_for_device (nf, tap, FALSE);
  g_free (address);
  address = client_get_string (f->client, a, "Address");
  g_assert_cmpstr (address, ==, "10.89.0.2");

  spec = g_strdup_printf ("{\"name\":\"a\",\"hypervisor_type\":\"qemu\",\"memory_bytes\":268435456,"
                          "\"readiness\":\"agent\",\"network_name\":\"lan\","
                          "\"static_ip\":\"10.89.0.77\",\"disks\":[{\"path\":\"%s\","
                          "\"read_only\":true,\"root\":true}]}", rootfs);
  {
    g_autofree char *err = NULL, *msg = NULL;
    g_autoptr (sd_bus_message) r = client_call (f->client, a, MV_MACHINE_IFACE, "Update", &err,
                                                &msg, "s", spec);
    if (!r)
      g_error ("Update: %s: %s", err, msg);
  }
  /* Free at once: another machine may have it. */
  other = create_on (f, "b", "lan", "\"static_ip\":\"10.89.0.2\"");
  client_call_ok (f->client, a, "Start");
  g_free (address);
  address = client_get_string (f->client, a, "Address");
  g_assert_cmpstr (address, ==, "10.89.0.77");
  assert_pings (f, a, "10.89.0.1");
}

/* NetworkManager restarted under a running daemon: the bridge and the
 * running machine's TAP come back, and the guest reaches the gateway. */
static void
test_nm_restart (NetFixture *nf, gconstpointer data)
{
  Fixture *f = &nf->f;
  g_autofree char *net = create_network (f, "{\"name\":\"lan\",\"subnet\":\"10.90.0.0/24\"}");
  g_autofree char *bridge = network_bridge (f, net);
  g_autofree char *a = create_on (f, "a", "lan", NULL);
  g_autofree char *tap = tap_of (f, a), *master = NULL;

  client_call_ok (f->client, a, "Start");
  assert_pings (f, a, "10.90.0.1");

  mv_test_netns_stop_nm (nf->netns, SIGTERM);
  /* NetworkManager takes its devices down as it goes; here its in-memory
   * profiles go with its /run. */
  mv_test_netns_start_nm (nf->netns);
  wait_for_address (nf, bridge, "10.90.0.1/24");
  wait_for_device (nf, tap, TRUE);
  for (guint i = 0; i < 100 && !master; i++)
    {
      master = device_master (nf, tap);
      if (!master)
        g_usleep (100 * 1000);
    }
  g_assert_cmpstr (master, ==, bridge);
  assert_pings (f, a, "10.90.0.1");
}

/* No NetworkManager: a networked start fails with Unavailable naming it,
 * and the machine holds no TAP. */
static void
test_without_nm (NetFixture *nf, gconstpointer data)
{
  Fixture *f = &nf->f;
  g_autofree char *net = create_network (f, "{\"name\":\"lan\",\"subnet\":\"10.91.0.0/24\"}");
  g_autofree char *a = create_on (f, "a", "lan", NULL);
  g_autofree char *msg = NULL, *tap = tap_of (f, a);
  g_autofree char *err = NULL;

  mv_test_netns_stop_nm (nf->netns, SIGTERM);
  err = client_machine_call (f->client, a, "Start", &msg);
  g_assert_cmpstr (err, ==, "org.microvmd1.Error.Unavailable");
  g_assert_nonnull (strstr (msg, "NetworkManager"));
  g_assert_false (device_exists (nf, tap));
  mv_test_netns_start_nm (nf->netns);
}

/* ---- a crash at every network phase (the test runtime) ---- */

typedef struct {
  const char *fault;
  const char *method;     /* what is under way when the daemon dies */
} NetFault;

static const NetFault net_faults[] = {
  { "start:network", "Start" },
  { "start:done", "Start" },
  { "stop:recorded", "Stop" },
  { "stop:done", "Stop" },
  { "standby:done", "Standby" },
  { "restore:network", "Start" },
  { "restore:done", "Start" },
  { "destroy-network:recorded", "Delete" },
  { "destroy-network:done", "Delete" },
};

/* The names of the TAPs in the namespace. */
static GHashTable *
taps_present (NetFixture *nf)
{
  const char *argv[] = { "ip", "-j", "link", "show", "type", "tun", NULL };
  g_autofree char *out = NULL, *err = NULL;
  g_autoptr (JsonParser) parser = json_parser_new ();
  GHashTable *names = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  JsonArray *links;

  g_assert_cmpint (mv_test_netns_run (nf->netns, argv, &out, &err), ==, 0);
  g_assert_true (json_parser_load_from_data (parser, out, -1, NULL));
  links = json_node_get_array (json_parser_get_root (parser));
  for (guint i = 0; i < json_array_get_length (links); i++)
    g_hash_table_add (names, g_strdup (json_object_get_string_member (
                                         json_array_get_object_element (links, i), "ifname")));
  return names;
}

/* The NetworkManager connections of microvmd's. */
static guint
our_connections (Fixture *f)
{
  const char *argv[] = { "nmcli", "-g", "NAME", "connection", "show", NULL };
  g_autofree char *out = NULL, *err = NULL;
  g_auto (GStrv) lines = NULL;
  guint n = 0;

  g_assert_cmpint (mv_test_env_run (f->env, argv, &out, &err), ==, 0);
  lines = g_strsplit (out, "\n", -1);
  for (guint i = 0; lines[i]; i++)
    n += g_str_has_prefix (lines[i], "microvmd-");
  return n;
}

static char *
allocations (Fixture *f, const char *network_path)
{
  sd_bus_error error = SD_BUS_ERROR_NULL;
  g_autofree char *id = NULL;
  g_autofree char *file = NULL;
  char *text = NULL;

  g_assert_cmpint (sd_bus_get_property_string (f->client->bus, MV_BUS_NAME, network_path,
                                               MV_NETWORK_IFACE, "Id", &error, &id), >=, 0);
  file = g_build_filename (mv_test_env_state_dir (f->env), "networks", id, "allocations.json",
                           NULL);
  if (!g_file_get_contents (file, &text, NULL, NULL))
    text = g_strdup ("");
  return text;
}

/* How many nftables rules carry machine @id's tag. */
static guint
rules_of (NetFixture *nf, const char *id)
{
  const char *argv[] = { "nft", "list", "table", "inet", "microvmd", NULL };
  g_autofree char *out = NULL, *err = NULL;
  g_autofree char *tag = g_strdup_printf ("\"mv:%s\"", id);
  guint n = 0;

  if (mv_test_netns_run (nf->netns, argv, &out, &err) != 0)
    return 0;
  for (const char *p = out; (p = strstr (p, tag)); p += strlen (tag))
    n++;
  return n;
}

static gboolean
holds_place (const char *state)
{
  return g_str_equal (state, "Running") || g_str_equal (state, "Paused") ||
         g_str_equal (state, "Standby");
}

static void
test_crash_sweep (NetFixture *nf, gconstpointer data)
{
  Fixture *f = &nf->f;
  g_autofree char *net = create_network (f, "{\"name\":\"lan\",\"subnet\":\"10.92.0.0/24\"}");
  g_autofree char *log = NULL;

  for (guint i = 0; i < G_N_ELEMENTS (net_faults); i++)
    {
      const NetFault *c = &net_faults[i];
      g_autofree char *name = g_strdup_printf ("crash-%u", i);
      g_autofree char *spec = g_strdup_printf ("{\"name\":\"%s\",\"hypervisor_type\":\"test\","
                                               "\"kernel\":\"/boot/vmlinuz\","
                                               "\"network_name\":\"lan\","
                                               "\"ports\":[{\"host_port\":%u}]}", name, 9000 + i);
      g_autofree char *path = client_create_ok (f->client, spec);
      g_autofree char *id = client_get_string (f->client, path, "Id");
      g_autofree char *tap = tap_of (f, path);
      g_autofree char *held = NULL, *state = NULL;
      g_autoptr (GHashTable) taps = NULL;
      gboolean exists = TRUE;

      g_test_message ("fault point %s", c->fault);
      if (!g_str_equal (c->method, "Start") || g_str_has_prefix (c->fault, "restore"))
        client_call_ok (f->client, path, "Start");
      if (g_str_has_prefix (c->fault, "restore"))
        client_call_ok (f->client, path, "Standby");

      g_setenv ("MICROVMD_FAULT_POINT", c->fault, TRUE);
      mv_test_env_stop_daemon (f->env, SIGTERM);
      mv_test_env_start_daemon (f->env, NULL);
      g_unsetenv ("MICROVMD_FAULT_POINT");
      if (g_str_equal (c->method, "Delete"))
        {
          g_autoptr (sd_bus_message) r = client_call (f->client, path, MV_MACHINE_IFACE, "Delete",
                                                      NULL, NULL, "b", 1);
          g_assert_null (r);
        }
      else
        {
          g_autofree char *err = client_machine_call (f->client, path, c->method, NULL);
          g_assert_nonnull (err);
        }
      mv_test_env_wait_for_name (f->env, MV_BUS_NAME, FALSE, 20000);
      mv_test_env_stop_daemon (f->env, SIGKILL);
      mv_test_env_start_daemon (f->env, NULL);

      /* Finished or undone: a TAP only for a machine that holds its
       * place, an address only for a machine that exists. */
      if (g_str_equal (c->method, "Delete"))
        for (guint t = 0; t < 100 && exists; t++)
          {
            g_autoptr (sd_bus_message) r = client_call (f->client, MV_MANAGER_PATH,
                                                        MV_MANAGER_IFACE, "GetMachine", NULL,
                                                        NULL, "s", name);
            exists = r != NULL;
            if (exists)
              client_settle (f->client, 100);
          }
      if (exists)
        {
          for (guint t = 0; t < 100; t++)
            {
              g_autofree char *phase = client_get_string (f->client, path, "Phase");
              g_free (state);
              state = client_get_string (f->client, path, "State");
              if (!*phase && !g_str_equal (state, "Starting") && !g_str_equal (state, "Stopping"))
                break;
              client_settle (f->client, 100);
            }
          g_test_message ("%s: %s", c->fault, state);
        }
      /* Recover's sweep runs before the bus is served. */
      taps = taps_present (nf);
      g_assert_cmpint (g_hash_table_contains (taps, tap), ==, exists && holds_place (state));
      held = allocations (f, net);
      g_assert_cmpint (strstr (held, id) != NULL, ==, exists);
      /* The bridge, and the TAP if there is one. */
      g_assert_cmpuint (our_connections (f), ==, 1 + g_hash_table_size (taps));
      /* Its rules (the published port) only while it holds its place. */
      g_assert_cmpint (rules_of (nf, id) > 0, ==, exists && holds_place (state));

      if (exists)
        {
          g_autoptr (sd_bus_message) r = client_call (f->client, path, MV_MACHINE_IFACE, "Delete",
                                                      NULL, NULL, "b", 1);
          g_assert_nonnull (r);
        }
      g_hash_table_unref (g_steal_pointer (&taps));
      taps = taps_present (nf);
      g_assert_false (g_hash_table_contains (taps, tap));
      g_free (held);
      held = allocations (f, net);
      g_assert_null (strstr (held, id));
      g_assert_cmpuint (rules_of (nf, id), ==, 0);
    }
  log = mv_test_env_read_daemon_log (f->env);
  for (guint i = 0; i < G_N_ELEMENTS (net_faults); i++)
    {
      g_autofree char *line = g_strdup_printf ("fault point %s reached", net_faults[i].fault);
      if (!strstr (log, line))
        g_error ("the daemon never reached %s", net_faults[i].fault);
    }
}

/* The MAC microvmd gives machine @path: core/ipam.c, "02:" and ten hex
 * digits of a SHA-256 of "mac:" and the ID. */
static char *
mac_of (Fixture *f, const char *path)
{
  g_autofree char *id = client_get_string (f->client, path, "Id");
  g_autofree char *input = g_strconcat ("mac:", id, NULL);
  g_autofree char *hex = g_compute_checksum_for_string (G_CHECKSUM_SHA256, input, -1);

  return g_strdup_printf ("02:%.2s:%.2s:%.2s:%.2s:%.2s", hex, hex + 2, hex + 4, hex + 6, hex + 8);
}

/* ---- the test VMMs on the wire ---- */

/* The VMM's own view of the machine's interfaces: Cloud Hypervisor's
 * vm.info config.net, Firecracker's /vm/config network-interfaces. */
static JsonArray *
vmm_nets (Fixture *f, const char *type, const char *path, JsonNode **keep)
{
  gboolean chv = g_str_equal (type, "cloud-hypervisor");
  g_autofree char *api = fixture_runtime_file (f, path, "api.sock");
  g_autofree char *body = http_get_unix (api, chv ? "/api/v1/vm.info" : "/vm/config");
  JsonObject *root;

  *keep = json_from_string (body, NULL);
  g_assert_nonnull (*keep);
  root = json_node_get_object (*keep);
  if (chv)
    root = json_object_get_object_member (root, "config");
  return json_object_get_array_member (root, chv ? "net" : "network-interfaces");
}

static void
assert_vmm_has_tap (Fixture *f, const char *type, const char *path, const char *tap,
                    const char *mac)
{
  gboolean chv = g_str_equal (type, "cloud-hypervisor");
  g_autoptr (JsonNode) node = NULL;
  JsonArray *nets = vmm_nets (f, type, path, &node);
  JsonObject *net;

  g_assert_nonnull (nets);
  g_assert_cmpuint (json_array_get_length (nets), ==, 1);
  net = json_array_get_object_element (nets, 0);
  g_assert_cmpstr (json_object_get_string_member (net, chv ? "tap" : "host_dev_name"), ==, tap);
  if (mac)
    g_assert_cmpstr (json_object_get_string_member (net, chv ? "mac" : "guest_mac"), ==, mac);
}

/* Attach at start (the VMM is given the TAP and the MAC), standby keeps
 * the TAP, the restored VMM is given it again, destroy removes it. */
static void
test_vmm_lifecycle (NetFixture *nf, gconstpointer data)
{
  Fixture *f = &nf->f;
  const char *type = data;
  g_autofree char *net = create_network (f, "{\"name\":\"lan\",\"subnet\":\"10.93.0.0/24\"}");
  g_autofree char *spec = g_strdup_printf (
    "{\"name\":\"w\",\"hypervisor_type\":\"%s\",\"kernel\":\"%s/guest/vmlinuz\","
    "\"initrd\":\"%s/guest/initramfs.img\",\"memory_bytes\":268435456,\"readiness\":\"vmm\","
    "\"network_name\":\"lan\"}", type, g_getenv ("MICROVMD_BUILD_DIR"),
    g_getenv ("MICROVMD_BUILD_DIR"));
  g_autofree char *path = client_create_ok (f->client, spec);
  g_autofree char *id = client_get_string (f->client, path, "Id");
  g_autofree char *tap = tap_of (f, path), *address = NULL;
  g_autofree char *mac = mac_of (f, path);

  /* One limiter for both directions: two different ones are refused at
   * create, before anything is recorded. */
  if (g_str_equal (type, "cloud-hypervisor"))
    {
      g_autofree char *err = NULL, *msg = NULL;
      g_autofree char *limited = g_strdup_printf (
        "{\"name\":\"limited\",\"hypervisor_type\":\"%s\",\"kernel\":\"/k\","
        "\"network_name\":\"lan\",\"upload_bytes_per_second\":1048576,"
        "\"download_bytes_per_second\":2097152}", type);
      g_autofree char *refused = client_create (f->client, limited, 0, &err, &msg);

      g_assert_null (refused);
      g_assert_cmpstr (err, ==, "org.microvmd1.Error.Unsupported");
      g_assert_true (g_str_has_prefix (msg, "download_bytes_per_second"));
    }

  client_call_ok (f->client, path, "Start");
  address = client_get_string (f->client, path, "Address");
  g_assert_cmpstr (address, ==, "10.93.0.2");
  g_assert_true (device_exists (nf, tap));
  assert_vmm_has_tap (f, type, path, tap, mac);

  client_call_ok (f->client, path, "Standby");
  g_assert_true (device_exists (nf, tap));
  client_call_ok (f->client, path, "Start");
  assert_vmm_has_tap (f, type, path, tap, mac);

  {
    g_autoptr (sd_bus_message) r = client_call (f->client, path, MV_MACHINE_IFACE, "Delete",
                                                NULL, NULL, "b", 1);
    g_assert_nonnull (r);
  }
  wait_for_device (nf, tap, FALSE);
  {
    g_autofree char *held = allocations (f, net);
    g_assert_null (strstr (held, id));
  }
}

/* ---- names ---- */

static char *
lookup (Fixture *f, const char *method, const char *network, const char *what, char **error_name)
{
  g_autoptr (sd_bus_message) reply = client_call (f->client, MV_MANAGER_PATH, MV_MANAGER_IFACE,
                                                  method, error_name, NULL, "ss", network, what);
  g_autoptr (GString) joined = g_string_new ("");
  const char *s;

  if (!reply)
    return NULL;
  g_assert_cmpint (sd_bus_message_enter_container (reply, 'a', "s"), >, 0);
  while (sd_bus_message_read (reply, "s", &s) > 0)
    g_string_append_printf (joined, "%s%s", joined->len ? " " : "", s);
  return g_string_free (g_steal_pointer (&joined), FALSE);
}

/* LookupHost and LookupAddr answer for machines that hold resources, by
 * name or hostname, without regard to case. */
static void
test_lookup (NetFixture *nf, gconstpointer data)
{
  Fixture *f = &nf->f;
  g_autofree char *net = create_network (f, "{\"name\":\"lan\",\"subnet\":\"10.94.0.0/24\"}");
  g_autofree char *web = client_create_ok (f->client,
                                           "{\"name\":\"Web\",\"hypervisor_type\":\"test\","
                                           "\"kernel\":\"/boot/vmlinuz\",\"network_name\":\"lan\","
                                           "\"hostname\":\"frontend\"}");
  g_autofree char *db = client_create_ok (f->client,
                                          "{\"name\":\"db\",\"hypervisor_type\":\"test\","
                                          "\"kernel\":\"/boot/vmlinuz\",\"network_name\":\"lan\"}");
  g_autofree char *found = NULL, *err = NULL;

  client_call_ok (f->client, web, "Start");
  client_call_ok (f->client, db, "Start");
  client_call_ok (f->client, db, "Stop");

  found = lookup (f, "LookupHost", "lan", "WEB", NULL);
  g_assert_cmpstr (found, ==, "10.94.0.2");
  g_free (found);
  found = lookup (f, "LookupHost", "lan", "Frontend", NULL);
  g_assert_cmpstr (found, ==, "10.94.0.2");
  g_free (found);
  found = lookup (f, "LookupAddr", "lan", "10.94.0.2", NULL);
  g_assert_cmpstr (found, ==, "Web frontend");
  /* Stopped: it keeps its address, but no name answers for it. */
  g_free (found);
  found = lookup (f, "LookupHost", "lan", "db", NULL);
  g_assert_cmpstr (found, ==, "");
  g_free (found);
  found = lookup (f, "LookupAddr", "lan", "10.94.0.3", NULL);
  g_assert_cmpstr (found, ==, "");

  g_assert_null (lookup (f, "LookupHost", "wan", "web", &err));
  g_assert_cmpstr (err, ==, "org.microvmd1.Error.NotFound");
  g_clear_pointer (&err, g_free);
  g_assert_null (lookup (f, "LookupAddr", "lan", "web", &err));
  g_assert_cmpstr (err, ==, "org.microvmd1.Error.InvalidArgument");
}

/* ---- published ports, the firewall, waking on traffic ---- */

/* curl from the namespace's host side; its output, or NULL if it failed. */
static char *
fetch (NetFixture *nf, const char *url, const char *max_time)
{
  const char *argv[] = { "curl", "-s", "--max-time", max_time, url, NULL };
  g_autofree char *out = NULL, *err = NULL;

  if (mv_test_netns_run (nf->netns, argv, &out, &err) != 0)
    return NULL;
  return g_steal_pointer (&out);
}

static char *
fetch_soon (NetFixture *nf, const char *url)
{
  for (guint i = 0; i < 40; i++)
    {
      char *body = fetch (nf, url, "2");

      if (body)
        return body;
      g_usleep (250 * 1000);
    }
  return NULL;
}

#define WWW_WORKLOAD \
  "\"cmd\":[\"sh\",\"-c\",\"mkdir -p /www && echo hello-from-guest > /www/index.html && " \
  "exec httpd -f -p 80 -h /www\"]"

static char *
www_spec (const char *extra)
{
  return g_strdup_printf ("{\"name\":\"www\",\"hypervisor_type\":\"qemu\",\"memory_bytes\":268435456,"
                          "\"readiness\":\"agent\",\"network_name\":\"lan\","
                          "\"disks\":[{\"path\":\"%s\",\"read_only\":true,\"root\":true}],"
                          "\"ports\":[{\"host_port\":8080,\"guest_port\":80}]," WWW_WORKLOAD "%s%s}",
                          rootfs, extra ? "," : "", extra ? extra : "");
}

static void
update_ok (Fixture *f, const char *path, const char *spec)
{
  g_autofree char *err = NULL, *msg = NULL;
  g_autoptr (sd_bus_message) r = client_call (f->client, path, MV_MACHINE_IFACE, "Update", &err,
                                              &msg, "s", spec);
  if (!r)
    g_error ("Update: %s: %s", err, msg);
}

/* A TCP server in the guest is reached through its published port; a
 * firewall rule blocks it and an Update without a restart lets it through
 * again; a taken port is refused; on standby, a connection to the port
 * wakes the machine and completes without the client trying again. */
static void
test_ports_firewall_wake (NetFixture *nf, gconstpointer data)
{
  Fixture *f = &nf->f;
  g_autofree char *net = create_network (f, "{\"name\":\"lan\",\"subnet\":\"10.95.0.0/24\"}");
  g_autofree char *spec = www_spec (NULL);
  g_autofree char *walled = www_spec ("\"firewall\":[{\"action\":\"deny\",\"protocol\":\"tcp\","
                                      "\"port\":80}]");
  g_autofree char *path = client_create_ok (f->client, spec);
  g_autofree char *body = NULL, *state = NULL, *err = NULL, *msg = NULL, *second = NULL;
  const char *url = "http://10.95.0.1:8080/";
  guint64 generation;

  client_call_ok (f->client, path, "Start");
  body = fetch_soon (nf, url);
  g_assert_cmpstr (body, ==, "hello-from-guest\n");

  /* Denied at once, with no restart; the spec's generation moves. */
  generation = client_get_u64 (f->client, path, "SpecificationGeneration");
  update_ok (f, path, walled);
  g_assert_cmpuint (client_get_u64 (f->client, path, "SpecificationGeneration"), >, generation);
  g_free (state);
  state = client_get_string (f->client, path, "State");
  g_assert_cmpstr (state, ==, "Running");
  for (guint i = 0; i < 20; i++)
    {
      g_free (body);
      body = fetch (nf, url, "2");
      if (!body)
        break;
      g_usleep (100 * 1000);
    }
  if (body)
    {
      const char *list[] = { "nft", "list", "table", "inet", "microvmd", NULL };
      g_autofree char *rules = NULL;

      mv_test_netns_run (nf->netns, list, &rules, NULL);
      g_test_message ("%s", rules);
    }
  g_assert_null (body);
  update_ok (f, path, spec);
  body = fetch_soon (nf, url);
  g_assert_cmpstr (body, ==, "hello-from-guest\n");

  /* The port is this machine's while it holds its place. */
  second = client_create (f->client,
                          "{\"name\":\"other\",\"hypervisor_type\":\"qemu\",\"network_name\":\"lan\","
                          "\"kernel\":\"/k\",\"ports\":[{\"host_port\":8080}]}", 0, &err, &msg);
  g_assert_null (second);
  g_assert_cmpstr (err, ==, "org.microvmd1.Error.Conflict");
  g_assert_nonnull (strstr (msg, "ports[0]"));

  /* Asleep: a client's connection wakes it and gets its answer. */
  client_call_ok (f->client, path, "Standby");
  g_free (state);
  state = client_get_string (f->client, path, "State");
  g_assert_cmpstr (state, ==, "Standby");
  /* The host has forgotten its link-layer address: the first packet to
   * it waits for it to answer again. */
  {
    const char *neigh[] = { "ip", "neigh", "show", "to", "10.95.0.2", NULL };
    g_autofree char *entries = NULL;

    g_assert_cmpint (mv_test_netns_run (nf->netns, neigh, &entries, NULL), ==, 0);
    g_assert_cmpstr (entries, ==, "");
  }
  g_free (body);
  body = fetch (nf, url, "60");
  g_assert_cmpstr (body, ==, "hello-from-guest\n");
  g_free (state);
  state = client_get_string (f->client, path, "State");
  g_assert_cmpstr (state, ==, "Running");
}

/* A machine on standby whose frozen guest cannot wake into its new shape
 * is Stopped, and gives up its TAP, rules and ports as a stop does. */
static void
test_standby_reshaped (NetFixture *nf, gconstpointer data)
{
  Fixture *f = &nf->f;
  g_autofree char *net = create_network (f, "{\"name\":\"lan\",\"subnet\":\"10.97.0.0/24\"}");
  g_autofree char *path = client_create_ok (f->client,
    "{\"name\":\"m\",\"hypervisor_type\":\"test\",\"kernel\":\"/boot/vmlinuz\","
    "\"network_name\":\"lan\",\"ports\":[{\"host_port\":9100}]}");
  g_autofree char *id = client_get_string (f->client, path, "Id");
  g_autofree char *tap = tap_of (f, path), *state = NULL, *other = NULL;

  client_call_ok (f->client, path, "Start");
  client_call_ok (f->client, path, "Standby");
  g_assert_true (device_exists (nf, tap));
  g_assert_cmpuint (rules_of (nf, id), >, 0);
  update_ok (f, path, "{\"name\":\"m\",\"hypervisor_type\":\"test\",\"kernel\":\"/boot/vmlinuz\","
                      "\"memory_bytes\":1073741824,\"network_name\":\"lan\","
                      "\"ports\":[{\"host_port\":9100}]}");
  state = client_get_string (f->client, path, "State");
  g_assert_cmpstr (state, ==, "Stopped");
  wait_for_device (nf, tap, FALSE);
  g_assert_cmpuint (rules_of (nf, id), ==, 0);
  other = client_create_ok (f->client,
    "{\"name\":\"n\",\"hypervisor_type\":\"test\",\"kernel\":\"/boot/vmlinuz\","
    "\"network_name\":\"lan\",\"ports\":[{\"host_port\":9100}]}");
  client_call_ok (f->client, other, "Start");
}

/* ---- warm starts ---- */

static guint
count_of (const char *haystack, const char *needle)
{
  guint n = 0;

  for (const char *p = haystack; (p = strstr (p, needle)); p += strlen (needle))
    n++;
  return n;
}

/* Nothing of a template's build is left on the network: no TAP but the
 * machines', no address but theirs (@held of them, on 10.95.0.0/24). */
static void
assert_only_machines_attached (NetFixture *nf, const char *net, const char *const *machines,
                               guint held)
{
  Fixture *f = &nf->f;
  g_autoptr (GHashTable) taps = taps_present (nf);
  g_autofree char *addresses = allocations (f, net);

  g_assert_cmpuint (g_hash_table_size (taps), ==, g_strv_length ((char **) machines));
  for (guint i = 0; machines[i]; i++)
    {
      g_autofree char *tap = tap_of (f, machines[i]);
      g_assert_true (g_hash_table_contains (taps, tap));
    }
  g_assert_cmpuint (count_of (addresses, "10.95.0."), ==, held);
}

/* A machine of microvmd's guest of @type on lan, @extra (may be NULL)
 * among its fields. */
static char *
warm_spec (const char *type, const char *name, const char *extra)
{
  return g_strdup_printf ("{\"name\":\"%s\",\"hypervisor_type\":\"%s\","
                          "\"memory_bytes\":268435456,\"readiness\":\"agent\","
                          "\"network_name\":\"lan\",%s%s"
                          "\"disks\":[{\"path\":\"%s\",\"read_only\":true,\"root\":true}]}",
                          name, type, extra ? extra : "", extra ? "," : "", rootfs);
}

/* The first machine on a network boots, and the template of its shape is
 * built with a NIC of its own that it gives back; the second starts from
 * the template on its own TAP with its own MAC, and its agent gives the
 * guest its own address: on QEMU it reaches the first. */
static void
test_warm_on_network (NetFixture *nf, gconstpointer data)
{
  Fixture *f = &nf->f;
  const char *type = data ? data : "qemu";
  g_autofree char *net = create_network (f, "{\"name\":\"lan\",\"subnet\":\"10.95.0.0/24\"}");
  g_autofree char *first = NULL, *second = NULL, *from = NULL;
  g_autofree char *first_address = NULL, *second_address = NULL;
  g_autofree char *tap = NULL, *mac = NULL;
  g_autofree char *spec = NULL;

  spec = warm_spec (type, "first", NULL);
  first = client_create_ok (f->client, spec);
  client_call_ok (f->client, first, "Start");
  from = client_get_string (f->client, first, "StartedFrom");
  g_assert_cmpstr (from, ==, "cold");
  for (guint i = 0; i < 1200 && count_warm_templates (mv_test_env_state_dir (f->env), TRUE) == 0; i++)
    client_settle (f->client, 100);
  g_assert_cmpuint (count_warm_templates (mv_test_env_state_dir (f->env), TRUE), ==, 1);
  {
    const char *const attached[] = { first, NULL };
    assert_only_machines_attached (nf, net, attached, 1);
  }

  g_free (spec);
  spec = warm_spec (type, "second", "\"hostname\":\"second\",\"start_mode\":\"warm\"");
  second = client_create_ok (f->client, spec);
  client_call_ok (f->client, second, "Start");
  g_free (from);
  from = client_get_string (f->client, second, "StartedFrom");
  g_assert_cmpstr (from, ==, "warm");
  first_address = client_get_string (f->client, first, "Address");
  second_address = client_get_string (f->client, second, "Address");
  g_assert_cmpstr (second_address, !=, "");
  g_assert_cmpstr (second_address, !=, first_address);
  tap = tap_of (f, second);
  mac = mac_of (f, second);
  {
    const char *const attached[] = { first, second, NULL };
    assert_only_machines_attached (nf, net, attached, 2);
  }
  if (!g_str_equal (type, "qemu"))
    {
      /* The VMM restored the template onto the machine's own TAP, and
       * Cloud Hypervisor with its MAC. Firecracker's snapshot load
       * overrides only the TAP: the device keeps the template's MAC,
       * and the guest's agent takes the machine's, as a fork's does. */
      assert_vmm_has_tap (f, type, second, tap,
                          g_str_equal (type, "cloud-hypervisor") ? mac : NULL);
      return;
    }

  /* The guest has its own address, MAC and name, and reaches the first. */
  {
    const char *show[] = { "ip", "-o", "addr", "show", "dev", "eth0", NULL };
    const char *link[] = { "cat", "/sys/class/net/eth0/address", NULL };
    const char *name[] = { "hostname", NULL };
    g_autofree char *addr = NULL, *ether = NULL, *hostname = NULL;
    g_autofree char *want = g_strdup_printf ("%s/24", second_address);

    g_assert_cmpint (guest_run (f, second, show, &addr), ==, 0);
    g_assert_nonnull (strstr (addr, want));
    g_assert_cmpint (guest_run (f, second, link, &ether), ==, 0);
    g_assert_cmpstr (g_strstrip (ether), ==, mac);
    g_assert_cmpint (guest_run (f, second, name, &hostname), ==, 0);
    g_assert_cmpstr (g_strstrip (hostname), ==, "second");
    assert_pings (f, second, first_address);
    assert_pings (f, first, second_address);
    assert_pings (f, second, "10.95.0.1");
  }
}

/* A daemon killed while a template is built on a network (its NIC made,
 * and its guest booted): after the restart the template's TAP and
 * address are given back, and no template stands. */
static void
test_warm_build_killed (NetFixture *nf, gconstpointer data)
{
  Fixture *f = &nf->f;
  g_autofree char *net = create_network (f, "{\"name\":\"lan\",\"subnet\":\"10.95.0.0/24\"}");
  static const char *const faults[] = { "warm-build:network", "warm-build:booted" };

  for (guint i = 0; i < G_N_ELEMENTS (faults); i++)
    {
      g_autofree char *name = g_strdup_printf ("killed-%u", i);
      g_autofree char *spec = g_strdup_printf ("{\"name\":\"%s\",\"hypervisor_type\":\"test\","
                                               "\"kernel\":\"/boot/vmlinuz\",\"memory_bytes\":%u,"
                                               "\"network_name\":\"lan\"}", name,
                                               (i + 1) * 268435456u);
      g_autofree char *path = client_create_ok (f->client, spec);
      g_autofree char *log = NULL, *line = NULL;

      g_test_message ("fault point %s", faults[i]);
      client_free (f->client);
      g_setenv ("MICROVMD_FAULT_POINT", faults[i], TRUE);
      mv_test_env_stop_daemon (f->env, SIGTERM);
      mv_test_env_start_daemon (f->env, NULL);
      g_unsetenv ("MICROVMD_FAULT_POINT");
      f->client = client_new (f->env);
      /* Its first start boots, and the template is built behind it. */
      g_free (client_machine_call (f->client, path, "Start", NULL));
      mv_test_env_wait_for_name (f->env, MV_BUS_NAME, FALSE, 20000);
      mv_test_env_stop_daemon (f->env, SIGKILL);
      log = mv_test_env_read_daemon_log (f->env);
      line = g_strdup_printf ("fault point %s reached", faults[i]);
      g_assert_nonnull (strstr (log, line));
      client_free (f->client);
      mv_test_env_start_daemon (f->env, NULL);
      f->client = client_new (f->env);

      client_assert_state_soon (f->client, path, "Running", 20000);
      g_assert_cmpuint (count_warm_templates (mv_test_env_state_dir (f->env), FALSE), ==, 0);
      {
        const char *const attached[] = { path, NULL };
        assert_only_machines_attached (nf, net, attached, 1);
      }
      g_assert_cmpuint (our_connections (f), ==, 2);
      client_delete_all (f->client);
    }
}

int
main (int argc, char **argv)
{
  const char *build = g_getenv ("MICROVMD_BUILD_DIR");

  g_test_init (&argc, &argv, NULL);
  g_assert_nonnull (build);
  rootfs = g_build_filename (build, "tests", "guest", "rootfs.ext4", NULL);
  guest_files = g_strdup_printf ("[guest]\nkernel=%s/guest/vmlinuz\ninitramfs=%s/guest/initramfs.img\n",
                                 build, build);
  g_test_add ("/net-guests/qemu/ping", NetFixture, NULL, net_setup, test_guests_ping,
              net_teardown);
  g_test_add ("/net-guests/qemu/stop-and-update", NetFixture, NULL, net_setup,
              test_stop_and_update, net_teardown);
  g_test_add ("/net-guests/qemu/ports-firewall-wake", NetFixture, NULL, net_setup,
              test_ports_firewall_wake, net_teardown);
  g_test_add ("/net-guests/qemu/networkmanager-restart", NetFixture, NULL, net_setup,
              test_nm_restart, net_teardown);
  g_test_add ("/net-guests/qemu/without-networkmanager", NetFixture, NULL, net_setup,
              test_without_nm, net_teardown);
  g_test_add ("/net-guests/cloud-hypervisor/lifecycle", NetFixture, "cloud-hypervisor", net_setup,
              test_vmm_lifecycle, net_teardown);
  g_test_add ("/net-guests/firecracker/lifecycle", NetFixture, "firecracker", net_setup,
              test_vmm_lifecycle, net_teardown);
  g_test_add ("/net-guests/test/lookup", NetFixture, NULL, net_setup, test_lookup, net_teardown);
  g_test_add ("/net-guests/test/standby-reshaped", NetFixture, NULL, net_setup,
              test_standby_reshaped, net_teardown);
  g_test_add ("/net-guests/test/crash-sweep", NetFixture, NULL, net_setup, test_crash_sweep,
              net_teardown);
  g_test_add ("/net-guests/qemu/warm-start", NetFixture, NULL, net_setup, test_warm_on_network,
              net_teardown);
  g_test_add ("/net-guests/cloud-hypervisor/warm-start", NetFixture, "cloud-hypervisor",
              net_setup, test_warm_on_network, net_teardown);
  g_test_add ("/net-guests/firecracker/warm-start", NetFixture, "firecracker", net_setup,
              test_warm_on_network, net_teardown);
  g_test_add ("/net-guests/test/warm-build-killed", NetFixture, NULL, net_setup,
              test_warm_build_killed, net_teardown);
  return g_test_run ();
}
