/* Networks, pure: the spec CreateNetwork reads, its record, overlaps,
 * the address table and the names a machine's interface gets. */
#include "core/errors.h"
#include "core/ipam.h"
#include "core/network-spec.h"

#include <stdio.h>
#include <string.h>

#define ID_A "0123456789abcdef0123456789abcdef"
#define ID_B "fedcba9876543210fedcba9876543210"
#define ID_C "00000000000000000000000000000001"

static MvNetworkSpec *
spec_ok (const char *json)
{
  g_autoptr (GError) error = NULL;
  MvNetworkSpec *network = mv_network_spec_from_json (json, &error);

  g_assert_no_error (error);
  g_assert_nonnull (network);
  return network;
}

static void
test_spec_defaults (void)
{
  g_autoptr (MvNetworkSpec) network = spec_ok ("{\"name\":\"lan\",\"subnet\":\"10.10.0.0/24\"}");
  g_autofree char *subnet = mv_network_subnet_to_string (network);
  g_autofree char *gateway = mv_ipv4_to_string (network->gateway);
  g_autoptr (MvNetworkSpec) full = spec_ok ("{\"name\":\"wan\",\"subnet\":\"172.16.0.0/12\","
                                            "\"gateway\":\"172.31.255.254\",\"nat\":false,"
                                            "\"mtu\":9000}");
  g_autofree char *full_gateway = mv_ipv4_to_string (full->gateway);

  g_assert_cmpstr (network->name, ==, "lan");
  g_assert_cmpstr (subnet, ==, "10.10.0.0/24");
  g_assert_cmpstr (gateway, ==, "10.10.0.1");
  g_assert_true (network->nat);
  g_assert_cmpuint (network->mtu, ==, 1500);
  g_assert_null (network->id);

  g_assert_cmpstr (full_gateway, ==, "172.31.255.254");
  g_assert_false (full->nat);
  g_assert_cmpuint (full->mtu, ==, 9000);
  g_assert_cmpuint (full->prefix, ==, 12);
}

typedef struct {
  const char *json;
  MvError     code;
  const char *message;   /* a part of it */
} Refusal;

static void
test_spec_refused (void)
{
  static const Refusal table[] = {
    { "{\"name\":\"n\",\"subnet\":\"10.0.0.0/24\",\"vlan\":3}", MV_ERROR_INVALID_ARGUMENT, "unknown field" },
    { "{\"name\":\"n\",\"subnet\":\"10.0.0.0/24\"", MV_ERROR_INVALID_ARGUMENT, "spec" },
    { "[]", MV_ERROR_INVALID_ARGUMENT, "spec" },
    { "{\"subnet\":\"10.0.0.0/24\"}", MV_ERROR_INVALID_ARGUMENT, "name: missing" },
    { "{\"name\":\"n\"}", MV_ERROR_INVALID_ARGUMENT, "subnet: missing" },
    { "{\"name\":\"a/b\",\"subnet\":\"10.0.0.0/24\"}", MV_ERROR_INVALID_ARGUMENT, "name:" },
    { "{\"name\":\"n\",\"subnet\":\"10.0.0.0\"}", MV_ERROR_INVALID_ARGUMENT, "no prefix length" },
    { "{\"name\":\"n\",\"subnet\":\"10.0.0.1/24\"}", MV_ERROR_INVALID_ARGUMENT,
      "subnet: 10.0.0.1/24 is not a network address: host bits are set; the network is 10.0.0.0/24" },
    { "{\"name\":\"n\",\"subnet\":\"10.0.0.0/31\"}", MV_ERROR_INVALID_ARGUMENT, "outside /8 to /30" },
    { "{\"name\":\"n\",\"subnet\":\"10.0.0.0/7\"}", MV_ERROR_INVALID_ARGUMENT, "outside /8 to /30" },
    { "{\"name\":\"n\",\"subnet\":\"10.0.0.0/33\"}", MV_ERROR_INVALID_ARGUMENT, "subnet: the prefix length" },
    { "{\"name\":\"n\",\"subnet\":\"10.0.0.0/024\"}", MV_ERROR_INVALID_ARGUMENT, "subnet: the prefix length" },
    { "{\"name\":\"n\",\"subnet\":\"10.0.0.256/24\"}", MV_ERROR_INVALID_ARGUMENT, "not an IPv4 address" },
    { "{\"name\":\"n\",\"subnet\":\"010.0.0.0/24\"}", MV_ERROR_INVALID_ARGUMENT, "not an IPv4 address" },
    { "{\"name\":\"n\",\"subnet\":\"10.0.0/24\"}", MV_ERROR_INVALID_ARGUMENT, "not an IPv4 address" },
    { "{\"name\":\"n\",\"subnet\":\"fd00::/64\"}", MV_ERROR_UNSUPPORTED, "subnet: fd00::/64 is IPv6" },
    { "{\"name\":\"n\",\"subnet\":10}", MV_ERROR_INVALID_ARGUMENT, "subnet" },
    { "{\"name\":\"n\",\"subnet\":\"10.0.0.0/24\",\"gateway\":\"10.0.1.1\"}", MV_ERROR_INVALID_ARGUMENT,
      "gateway: 10.0.1.1 is outside the subnet 10.0.0.0/24" },
    { "{\"name\":\"n\",\"subnet\":\"10.0.0.0/24\",\"gateway\":\"10.0.0.0\"}", MV_ERROR_INVALID_ARGUMENT,
      "gateway: 10.0.0.0 is the network address" },
    { "{\"name\":\"n\",\"subnet\":\"10.0.0.0/24\",\"gateway\":\"10.0.0.255\"}", MV_ERROR_INVALID_ARGUMENT,
      "gateway: 10.0.0.255 is the broadcast address" },
    { "{\"name\":\"n\",\"subnet\":\"10.0.0.0/24\",\"gateway\":\"x\"}", MV_ERROR_INVALID_ARGUMENT, "gateway:" },
    { "{\"name\":\"n\",\"subnet\":\"10.0.0.0/24\",\"nat\":\"yes\"}", MV_ERROR_INVALID_ARGUMENT, "nat" },
    { "{\"name\":\"n\",\"subnet\":\"10.0.0.0/24\",\"mtu\":575}", MV_ERROR_INVALID_ARGUMENT, "mtu: 575 is outside 576 to 9000" },
    { "{\"name\":\"n\",\"subnet\":\"10.0.0.0/24\",\"mtu\":9001}", MV_ERROR_INVALID_ARGUMENT, "mtu: 9001" },
  };

  for (gsize i = 0; i < G_N_ELEMENTS (table); i++)
    {
      g_autoptr (GError) error = NULL;
      g_autoptr (MvNetworkSpec) network = mv_network_spec_from_json (table[i].json, &error);

      g_test_message ("%s", table[i].json);
      g_assert_null (network);
      g_assert_error (error, MV_ERROR, (gint) table[i].code);
      if (strstr (error->message, table[i].message) == NULL)
        g_error ("%s: '%s' does not say '%s'", table[i].json, error->message, table[i].message);
    }
}

static void
test_ipv4 (void)
{
  static const struct {
    const char *text;
    gboolean    ok;
    guint32     value;
  } table[] = {
    { "0.0.0.0", TRUE, 0 }, { "255.255.255.255", TRUE, G_MAXUINT32 },
    { "10.1.2.3", TRUE, 0x0a010203 }, { "1.2.3", FALSE, 0 }, { "1.2.3.4.5", FALSE, 0 },
    { "1.2.3.04", FALSE, 0 }, { "1.2.3.256", FALSE, 0 }, { " 1.2.3.4", FALSE, 0 },
    { "1.2.3.4 ", FALSE, 0 }, { "1..3.4", FALSE, 0 }, { "", FALSE, 0 }, { "1.2.3.1000", FALSE, 0 },
    { "+1.2.3.4", FALSE, 0 },
  };

  for (gsize i = 0; i < G_N_ELEMENTS (table); i++)
    {
      guint32 value = 0;

      g_assert_cmpint (mv_ipv4_parse (table[i].text, &value), ==, table[i].ok);
      if (table[i].ok)
        {
          g_autofree char *back = mv_ipv4_to_string (value);

          g_assert_cmpuint (value, ==, table[i].value);
          g_assert_cmpstr (back, ==, table[i].text);
        }
    }
}

static void
test_overlap (void)
{
  static const struct {
    const char *a, *b;
    gboolean    overlap;
  } table[] = {
    { "10.0.0.0/24", "10.0.0.0/24", TRUE },
    { "10.0.0.0/8", "10.200.0.0/16", TRUE },
    { "10.200.0.0/16", "10.0.0.0/8", TRUE },
    { "10.0.0.0/24", "10.0.1.0/24", FALSE },
    { "10.0.0.0/23", "10.0.1.0/24", TRUE },
    { "192.168.0.0/30", "192.168.0.4/30", FALSE },
    { "172.16.0.0/12", "172.32.0.0/16", FALSE },
  };

  for (gsize i = 0; i < G_N_ELEMENTS (table); i++)
    {
      g_autofree char *ja = g_strdup_printf ("{\"name\":\"a\",\"subnet\":\"%s\"}", table[i].a);
      g_autofree char *jb = g_strdup_printf ("{\"name\":\"b\",\"subnet\":\"%s\"}", table[i].b);
      g_autoptr (MvNetworkSpec) a = spec_ok (ja);
      g_autoptr (MvNetworkSpec) b = spec_ok (jb);
      g_autoptr (GPtrArray) others = g_ptr_array_new ();
      g_autoptr (GError) error = NULL;

      g_assert_cmpint (mv_network_spec_overlaps (a, b), ==, table[i].overlap);
      g_ptr_array_add (others, b);
      g_assert_cmpint (mv_network_spec_check_overlap (a, others, &error), ==, !table[i].overlap);
      if (table[i].overlap)
        {
          g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
          g_assert_true (g_str_has_prefix (error->message, "subnet: "));
          g_assert_nonnull (strstr (error->message, "of the network b"));
          g_assert_nonnull (strstr (error->message, table[i].b));
        }
    }
}

static void
test_record (void)
{
  g_autoptr (MvNetworkSpec) network = spec_ok ("{\"name\":\"lan\",\"subnet\":\"10.9.0.0/16\","
                                               "\"gateway\":\"10.9.8.7\",\"nat\":false,\"mtu\":1400}");
  g_autoptr (GError) error = NULL;
  g_autofree char *json = NULL;
  g_autoptr (MvNetworkSpec) back = NULL;

  network->id = g_strdup (ID_A);
  network->created_at = G_GINT64_CONSTANT (1700000000) * G_USEC_PER_SEC;
  json = mv_network_spec_to_json (network);
  g_assert_nonnull (strstr (json, "\"format\" : 1"));
  g_assert_nonnull (strstr (json, "\"subnet\" : \"10.9.0.0/16\""));
  back = mv_network_spec_from_record (json, strlen (json), &error);
  g_assert_no_error (error);
  g_assert_cmpstr (back->id, ==, ID_A);
  g_assert_cmpstr (back->name, ==, "lan");
  g_assert_cmpuint (back->address, ==, network->address);
  g_assert_cmpuint (back->prefix, ==, 16);
  g_assert_cmpuint (back->gateway, ==, network->gateway);
  g_assert_false (back->nat);
  g_assert_cmpuint (back->mtu, ==, 1400);
  g_assert_cmpint (back->created_at, ==, network->created_at);

  g_assert_null (mv_network_spec_from_record ("{\"format\":2}", 12, &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  /* A record must say its gateway: no default is guessed for one. */
  {
    const char *no_gateway = "{\"format\":1,\"id\":\"" ID_A "\",\"name\":\"n\","
                             "\"subnet\":\"10.0.0.0/24\",\"nat\":true,\"mtu\":1500,"
                             "\"created_at\":\"2026-01-01T00:00:00Z\"}";

    g_assert_null (mv_network_spec_from_record (no_gateway, strlen (no_gateway), &error));
    g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
    g_assert_nonnull (strstr (error->message, "gateway: missing"));
  }
}

/* ---- IPAM ---- */

static MvNetworkSpec *
small_network (void)
{
  /* 10.0.0.0/29: hosts .1 to .6, the gateway .1: five for machines. */
  return spec_ok ("{\"name\":\"small\",\"subnet\":\"10.0.0.0/29\"}");
}

static char *
allocate_ok (MvIpam *ipam, const char *id, const char *static_ip)
{
  g_autoptr (GError) error = NULL;
  guint32 address = 0;

  g_assert_true (mv_ipam_allocate (ipam, id, static_ip, &address, &error));
  g_assert_no_error (error);
  return mv_ipv4_to_string (address);
}

static void
test_ipam_allocate (void)
{
  g_autoptr (MvNetworkSpec) network = small_network ();
  g_autoptr (MvIpam) ipam = mv_ipam_new (network);
  g_autoptr (GError) error = NULL;
  g_autofree char *a = allocate_ok (ipam, ID_A, NULL);
  g_autofree char *a_again = allocate_ok (ipam, ID_A, NULL);
  g_autofree char *b = allocate_ok (ipam, ID_B, NULL);
  g_autofree char *c = NULL, *a_after = NULL, *reused = NULL;
  guint32 address = 0;

  /* The lowest free host, never the gateway; a machine keeps its own. */
  g_assert_cmpstr (a, ==, "10.0.0.2");
  g_assert_cmpstr (a_again, ==, "10.0.0.2");
  g_assert_cmpstr (b, ==, "10.0.0.3");
  g_assert_cmpstr (mv_ipam_instance_at (ipam, "10.0.0.3"), ==, ID_B);
  g_assert_null (mv_ipam_instance_at (ipam, "10.0.0.4"));
  g_assert_null (mv_ipam_instance_at (ipam, "nonsense"));

  /* A static address: free, taken, or not one a machine may have. */
  c = allocate_ok (ipam, ID_C, "10.0.0.6");
  g_assert_cmpstr (c, ==, "10.0.0.6");
  g_assert_false (mv_ipam_allocate (ipam, "11111111111111111111111111111111", "10.0.0.6", &address,
                                    &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_CONFLICT);
  g_assert_nonnull (strstr (error->message, "static_ip"));
  g_assert_nonnull (strstr (error->message, ID_C));
  g_clear_error (&error);

  static const struct {
    const char *ip, *says;
  } bad[] = {
    { "10.0.0.1", "static_ip: 10.0.0.1 is the gateway" },
    { "10.0.0.0", "static_ip: 10.0.0.0 is the network address" },
    { "10.0.0.7", "static_ip: 10.0.0.7 is the broadcast address" },
    { "10.0.0.8", "static_ip: 10.0.0.8 is outside the subnet 10.0.0.0/29" },
    { "10.0.0.5/24", "another prefix length" },
    { "fd00::5", "static_ip: fd00::5 is not an IPv4 address" },
  };
  for (gsize i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      g_assert_false (mv_ipam_allocate (ipam, "22222222222222222222222222222222", bad[i].ip,
                                        &address, &error));
      g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
      if (!strstr (error->message, bad[i].says))
        g_error ("%s: '%s' does not say '%s'", bad[i].ip, error->message, bad[i].says);
      g_clear_error (&error);
    }
  g_free (allocate_ok (ipam, "33333333333333333333333333333333", "10.0.0.5/29"));

  /* Its static address changed: the machine moves, its old one is free. */
  a_after = allocate_ok (ipam, ID_A, "10.0.0.4");
  g_assert_cmpstr (a_after, ==, "10.0.0.4");
  g_assert_null (mv_ipam_instance_at (ipam, "10.0.0.2"));
  g_assert_cmpuint (mv_ipam_count (ipam), ==, 4);

  /* Release, and the lowest is taken again. */
  mv_ipam_release (ipam, ID_B);
  mv_ipam_release (ipam, ID_B);
  g_assert_false (mv_ipam_lookup (ipam, ID_B, NULL));
  reused = allocate_ok (ipam, "44444444444444444444444444444444", NULL);
  g_assert_cmpstr (reused, ==, "10.0.0.2");
}

static void
test_ipam_exhausted (void)
{
  g_autoptr (MvNetworkSpec) network = spec_ok ("{\"name\":\"tiny\",\"subnet\":\"10.0.0.0/30\"}");
  g_autoptr (MvIpam) ipam = mv_ipam_new (network);
  g_autoptr (GError) error = NULL;
  g_autofree char *only = allocate_ok (ipam, ID_A, NULL);
  guint32 address = 0;

  /* /30: .1 the gateway, .2 the one host. */
  g_assert_cmpstr (only, ==, "10.0.0.2");
  g_assert_false (mv_ipam_allocate (ipam, ID_B, NULL, &address, &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_RESOURCE_EXHAUSTED);
  g_assert_nonnull (strstr (error->message, "tiny"));
  g_assert_false (mv_ipam_lookup (ipam, ID_B, NULL));
}

static void
test_ipam_record (void)
{
  g_autoptr (MvNetworkSpec) network = small_network ();
  g_autoptr (MvIpam) ipam = mv_ipam_new (network);
  g_autoptr (MvIpam) back = NULL;
  g_autoptr (GHashTable) live = g_hash_table_new (g_str_hash, g_str_equal);
  g_autoptr (GError) error = NULL;
  g_autofree char *json = NULL;
  guint32 address = 0;

  g_free (allocate_ok (ipam, ID_B, NULL));
  g_free (allocate_ok (ipam, ID_A, "10.0.0.5"));
  json = mv_ipam_to_json (ipam);
  /* Keys in byte order, whatever the hash table's order. */
  g_assert_cmpstr (json, ==, "{\n  \"format\" : 1,\n  \"allocations\" : {\n    \"" ID_A
                   "\" : \"10.0.0.5\",\n    \"" ID_B "\" : \"10.0.0.2\"\n  }\n}");
  back = mv_ipam_from_json (network, json, strlen (json), &error);
  g_assert_no_error (error);
  g_assert_true (mv_ipam_lookup (back, ID_A, &address));
  g_assert_cmpuint (address, ==, 0x0a000005);
  g_assert_cmpstr (mv_ipam_instance_at (back, "10.0.0.2"), ==, ID_B);

  static const char *const bad[] = {
    "{\"format\":2,\"allocations\":{}}",
    "{\"format\":1}",
    "{\"format\":1,\"allocations\":{\"Not/An-ID\":\"10.0.0.2\"}}",
    "{\"format\":1,\"allocations\":{\"" ID_A "\":\"10.0.0.1\"}}",
    "{\"format\":1,\"allocations\":{\"" ID_A "\":\"10.1.0.2\"}}",
    "{\"format\":1,\"allocations\":{\"" ID_A "\":\"10.0.0.2\",\"" ID_B "\":\"10.0.0.2\"}}",
    "{\"format\":1,\"allocations\":{},\"extra\":1}",
  };
  for (gsize i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      g_autoptr (MvIpam) refused = mv_ipam_from_json (network, bad[i], strlen (bad[i]), &error);

      g_test_message ("%s", bad[i]);
      g_assert_null (refused);
      g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
      g_clear_error (&error);
    }

  /* Reconcile: what a machine that is gone held is freed. */
  g_hash_table_add (live, (gpointer) ID_A);
  g_assert_cmpuint (mv_ipam_reconcile (back, live), ==, 1);
  g_assert_false (mv_ipam_lookup (back, ID_B, NULL));
  g_assert_true (mv_ipam_lookup (back, ID_A, NULL));
}

/* ---- names ---- */

static char *
hash_hex (const char *purpose, const char *id)
{
  g_autofree char *input = g_strconcat (purpose, ":", id, NULL);

  return g_compute_checksum_for_string (G_CHECKSUM_SHA256, input, -1);
}

static void
test_names (void)
{
  g_autoptr (GHashTable) taps = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  g_autoptr (GHashTable) bridges = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  g_autofree char *mac = mv_network_mac_for (ID_A);
  g_autofree char *mac_again = mv_network_mac_for (ID_A);
  g_autofree char *mac_other = mv_network_mac_for (ID_B);
  guint first_octet = 0;

  /* Stable, locally administered and unicast. */
  g_assert_cmpstr (mac, ==, mac_again);
  g_assert_cmpstr (mac, !=, mac_other);
  g_assert_cmpuint (strlen (mac), ==, 17);
  g_assert_true (sscanf (mac, "%x:", &first_octet) == 1);
  g_assert_cmpuint (first_octet & 0x02, ==, 0x02);
  g_assert_cmpuint (first_octet & 0x01, ==, 0);

  for (guint i = 0; i < 5000; i++)
    {
      g_autofree char *id = g_strdup_printf ("%032x", g_random_int () ^ (i << 8));
      g_autofree char *tap = mv_network_tap_name (id);
      g_autofree char *bridge = mv_network_bridge_name (id);
      g_autofree char *tap_hash = hash_hex ("tap", id);
      g_autofree char *bridge_hash = hash_hex ("bridge", id);

      g_assert_cmpuint (strlen (tap), <=, MV_IFNAME_MAX_BYTES);
      g_assert_cmpuint (strlen (bridge), <=, MV_IFNAME_MAX_BYTES);
      g_assert_true (g_str_has_prefix (tap, "mv"));
      g_assert_true (g_str_has_prefix (bridge, "mvbr"));
      /* Hex digits after "mv": a TAP is never taken for a bridge. */
      g_assert_cmpuint (strspn (tap + 2, "0123456789abcdef"), ==, 13);
      g_assert_cmpuint (strspn (bridge + 4, "0123456789abcdef"), ==, 11);
      /* The name is the hash's prefix, whole: two names collide exactly
       * when the hashes' prefixes do. */
      g_assert_true (strncmp (tap + 2, tap_hash, 13) == 0 && strlen (tap) == 15);
      g_assert_true (strncmp (bridge + 4, bridge_hash, 11) == 0 && strlen (bridge) == 15);
      g_hash_table_add (taps, g_steal_pointer (&tap));
      g_hash_table_add (bridges, g_steal_pointer (&bridge));
    }
  /* 52 and 44 bits of hash: no collision among a few thousand. */
  g_assert_cmpuint (g_hash_table_size (taps), >=, 4999);
  g_assert_cmpuint (g_hash_table_size (bridges), >=, 4999);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/network/spec/defaults", test_spec_defaults);
  g_test_add_func ("/network/spec/refused", test_spec_refused);
  g_test_add_func ("/network/ipv4", test_ipv4);
  g_test_add_func ("/network/overlap", test_overlap);
  g_test_add_func ("/network/record", test_record);
  g_test_add_func ("/network/ipam/allocate", test_ipam_allocate);
  g_test_add_func ("/network/ipam/exhausted", test_ipam_exhausted);
  g_test_add_func ("/network/ipam/record", test_ipam_record);
  g_test_add_func ("/network/names", test_names);
  return g_test_run ();
}
