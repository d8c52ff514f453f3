/* mv_rate_limit_apply() on a veth pair in a network namespace of the
 * test's own (private-netns.h): the qdiscs and filters tc shows, and a
 * real transfer through the pair with and without each limit. */
#include "network/rate-limit.h"
#include "core/errors.h"
#include "private-netns.h"

#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <json-glib/json-glib.h>

/* The host's end is A; B stands for the TAP in the transfer tests: what
 * A sends arrives on B's ingress. */
#define VETH_A       "mvr0"
#define VETH_B       "mvr1"
#define A_ADDR       "10.80.0.1"
#define PEER_ADDR    "10.80.0.2"
#define MIB          (1024 * 1024)
#define DATAGRAM_LEN 1400
#define BLAST_MS     1000
/* Long enough for what a tbf still queues (its latency) to come out. */
#define DRAIN_MS     (4 * MV_RATE_LIMIT_LATENCY_MS)

/* ----- what tc shows ----- */

static JsonNode *
tc_json (const char *first,
         ...)
{
  g_autoptr(GPtrArray) argv = g_ptr_array_new ();
  g_autoptr(GError) error = NULL;
  g_autofree char *command = NULL;
  g_autofree char *out = NULL;
  g_autofree char *err = NULL;
  const char *arg;
  int wait_status = 0;
  JsonNode *node;
  va_list args;

  g_ptr_array_add (argv, (char *) "tc");
  g_ptr_array_add (argv, (char *) "-j");
  g_ptr_array_add (argv, (char *) first);
  va_start (args, first);
  while ((arg = va_arg (args, const char *)) != NULL)
    g_ptr_array_add (argv, (char *) arg);
  va_end (args);
  g_ptr_array_add (argv, NULL);
  command = g_strjoinv (" ", (char **) argv->pdata);
  g_assert_true (g_spawn_sync (NULL, (char **) argv->pdata, NULL, G_SPAWN_SEARCH_PATH, NULL,
                               NULL, &out, &err, &wait_status, &error));
  g_assert_no_error (error);
  if (!g_spawn_check_wait_status (wait_status, &error))
    g_error ("`%s` failed: %s", command, err);
  node = json_from_string (out, &error);
  g_assert_no_error (error);
  g_assert_true (JSON_NODE_HOLDS_ARRAY (node));
  return node;
}

/* The options of @ifname's root tbf, or NULL; asserts it is the only
 * root qdisc. */
static JsonObject *
root_tbf (const char *ifname)
{
  g_autoptr(JsonNode) node = tc_json ("qdisc", "show", "dev", ifname, NULL);
  JsonArray *qdiscs = json_node_get_array (node);
  JsonObject *found = NULL;

  for (guint i = 0; i < json_array_get_length (qdiscs); i++)
    {
      JsonObject *qdisc = json_array_get_object_element (qdiscs, i);

      if (!json_object_get_boolean_member_with_default (qdisc, "root", FALSE)
          || !g_str_equal (json_object_get_string_member (qdisc, "kind"), "tbf"))
        continue;
      g_assert_null (found);
      found = json_object_ref (json_object_get_object_member (qdisc, "options"));
    }
  return found;
}

static gboolean
has_ingress (const char *ifname)
{
  g_autoptr(JsonNode) node = tc_json ("qdisc", "show", "dev", ifname, NULL);
  JsonArray *qdiscs = json_node_get_array (node);

  for (guint i = 0; i < json_array_get_length (qdiscs); i++)
    if (g_str_equal (json_object_get_string_member (json_array_get_object_element (qdiscs, i),
                                                    "kind"), "ingress"))
      return TRUE;
  return FALSE;
}

/* The devices the ingress filters of @ifname redirect to, one a filter
 * with actions. */
static GStrv
ingress_redirects (const char *ifname)
{
  g_autoptr(JsonNode) node = tc_json ("filter", "show", "dev", ifname, "ingress", NULL);
  g_autoptr(GStrvBuilder) builder = g_strv_builder_new ();
  JsonArray *filters = json_node_get_array (node);

  for (guint i = 0; i < json_array_get_length (filters); i++)
    {
      JsonObject *filter = json_array_get_object_element (filters, i);
      JsonObject *options;
      JsonArray *actions;
      JsonObject *action;

      if (!json_object_has_member (filter, "options"))
        continue;
      options = json_object_get_object_member (filter, "options");
      if (!json_object_has_member (options, "actions"))
        continue;
      g_assert_cmpstr (json_object_get_string_member (filter, "kind"), ==, "u32");
      actions = json_object_get_array_member (options, "actions");
      g_assert_cmpuint (json_array_get_length (actions), ==, 1);
      action = json_array_get_object_element (actions, 0);
      g_assert_cmpstr (json_object_get_string_member (action, "kind"), ==, "mirred");
      g_assert_cmpstr (json_object_get_string_member (action, "mirred_action"), ==, "redirect");
      g_strv_builder_add (builder, json_object_get_string_member (action, "to_dev"));
    }
  return g_strv_builder_end (builder);
}

static gboolean
interface_exists (const char *ifname)
{
  g_autofree char *dir = g_build_filename ("/sys/class/net", ifname, NULL);

  return g_file_test (dir, G_FILE_TEST_IS_DIR);
}

/* A tbf that holds @bps bytes/s: the rate, a burst of at least a
 * hundredth of a second (less what tc rounds off in the scheduler's
 * ticks) and a 1500-byte frame, 50 ms of queue. */
static void
assert_tbf (JsonObject *options,
            guint64     bps)
{
  g_assert_nonnull (options);
  g_assert_cmpint (json_object_get_int_member (options, "rate"), ==, (gint64) bps);
  g_assert_cmpint (json_object_get_int_member (options, "burst"), >=,
                   (gint64) (bps / 100 * 99 / 100));
  g_assert_cmpint (json_object_get_int_member (options, "burst"), >=, 1500);
  g_assert_cmpint (json_object_get_int_member (options, "lat"), >=,
                   MV_RATE_LIMIT_LATENCY_MS * 1000 * 9 / 10);
  g_assert_cmpint (json_object_get_int_member (options, "lat"), <=,
                   MV_RATE_LIMIT_LATENCY_MS * 1000 * 11 / 10);
}

static void
apply (const char *ifname,
       guint64     download_bps,
       guint64     upload_bps)
{
  g_autoptr(GError) error = NULL;

  g_assert_true (mv_rate_limit_apply (ifname, download_bps, upload_bps, &error));
  g_assert_no_error (error);
}

static void
test_qdiscs (void)
{
  g_autofree char *ifb = mv_rate_limit_ifb_name (VETH_B);
  g_autoptr(JsonObject) tbf = NULL;
  g_auto(GStrv) redirects = NULL;

  g_assert_true (g_str_has_prefix (ifb, MV_RATE_LIMIT_IFB_PREFIX));
  g_assert_cmpuint (strlen (ifb), <=, 15);

  apply (VETH_B, 1 * MIB, 2 * MIB);
  tbf = root_tbf (VETH_B);
  assert_tbf (tbf, 1 * MIB);
  g_clear_pointer (&tbf, json_object_unref);
  g_assert_true (has_ingress (VETH_B));
  redirects = ingress_redirects (VETH_B);
  g_assert_cmpuint (g_strv_length (redirects), ==, 1);
  g_assert_cmpstr (redirects[0], ==, ifb);
  g_clear_pointer (&redirects, g_strfreev);
  tbf = root_tbf (ifb);
  assert_tbf (tbf, 2 * MIB);
  g_clear_pointer (&tbf, json_object_unref);

  /* Again with other rates: replaced, nothing added. */
  apply (VETH_B, 3 * MIB, 40 * MIB);
  tbf = root_tbf (VETH_B);
  assert_tbf (tbf, 3 * MIB);
  g_clear_pointer (&tbf, json_object_unref);
  redirects = ingress_redirects (VETH_B);
  g_assert_cmpuint (g_strv_length (redirects), ==, 1);
  g_clear_pointer (&redirects, g_strfreev);
  tbf = root_tbf (ifb);
  assert_tbf (tbf, 40 * MIB);
  g_clear_pointer (&tbf, json_object_unref);

  /* Each 0 removes its limit only. */
  apply (VETH_B, 0, 40 * MIB);
  g_assert_null (root_tbf (VETH_B));
  redirects = ingress_redirects (VETH_B);
  g_assert_cmpuint (g_strv_length (redirects), ==, 1);
  g_clear_pointer (&redirects, g_strfreev);

  apply (VETH_B, 2 * MIB, 0);
  tbf = root_tbf (VETH_B);
  assert_tbf (tbf, 2 * MIB);
  g_clear_pointer (&tbf, json_object_unref);
  g_assert_false (has_ingress (VETH_B));
  g_assert_false (interface_exists (ifb));

  apply (VETH_B, 0, 0);
  g_assert_null (root_tbf (VETH_B));
  g_assert_false (has_ingress (VETH_B));
  /* Removing what is not there is no error. */
  apply (VETH_B, 0, 0);
}

/* ----- a real transfer ----- */

static guint64
received_bytes (void)
{
  g_autofree char *out = mv_test_cmd_out ("nft", "-j", "list", "counter", "ip", "mvrate", "got",
                                          NULL);
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonNode) node = json_from_string (out, &error);
  JsonArray *list;

  g_assert_no_error (error);
  list = json_object_get_array_member (json_node_get_object (node), "nftables");
  for (guint i = 0; i < json_array_get_length (list); i++)
    {
      JsonObject *item = json_array_get_object_element (list, i);

      if (json_object_has_member (item, "counter"))
        return (guint64) json_object_get_int_member (json_object_get_object_member (item,
                                                                                    "counter"),
                                                     "bytes");
    }
  g_assert_not_reached ();
}

/* Sends UDP from A to B's side as fast as it can for BLAST_MS; returns
 * the bytes that passed B's ingress (after tc, before routing). */
static guint64
blast (void)
{
  struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons (9) };
  static const char payload[DATAGRAM_LEN];
  int fd = socket (AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  guint64 before = received_bytes ();
  gint64 end_us = g_get_monotonic_time () + BLAST_MS * G_TIME_SPAN_MILLISECOND;

  g_assert_cmpint (fd, >=, 0);
  g_assert_cmpint (inet_pton (AF_INET, PEER_ADDR, &to.sin_addr), ==, 1);
  while (g_get_monotonic_time () < end_us)
    for (int i = 0; i < 64; i++)
      sendto (fd, payload, sizeof payload, 0, (struct sockaddr *) &to, sizeof to);
  close (fd);
  g_usleep (DRAIN_MS * G_TIME_SPAN_MILLISECOND);
  return received_bytes () - before;
}

static void
assert_limited (guint64 limited,
                guint64 unlimited)
{
  g_test_message ("limited to 1 MiB/s: %" G_GUINT64_FORMAT " bytes in %d ms; unlimited: %"
                  G_GUINT64_FORMAT, limited, BLAST_MS, unlimited);
  g_assert_cmpuint (limited, <, 3 * MIB);
  /* It limits; it does not stop everything. */
  g_assert_cmpuint (limited, >, MIB / 2);
  g_assert_cmpuint (unlimited, >, 4 * limited);
}

/* The download limit is A's egress: A stands for the TAP. */
static void
test_download_transfer (void)
{
  guint64 unlimited, limited;

  apply (VETH_A, 0, 0);
  unlimited = blast ();
  apply (VETH_A, 1 * MIB, 0);
  limited = blast ();
  apply (VETH_A, 0, 0);
  assert_limited (limited, unlimited);
}

/* The upload limit is B's ingress: B stands for the TAP. */
static void
test_upload_transfer (void)
{
  guint64 unlimited, limited;

  apply (VETH_B, 0, 0);
  unlimited = blast ();
  apply (VETH_B, 0, 1 * MIB);
  limited = blast ();
  apply (VETH_B, 0, 0);
  assert_limited (limited, unlimited);
}

/* ----- errors and what is left ----- */

static void
test_errors (void)
{
  g_autoptr(GError) error = NULL;

  g_assert_false (mv_rate_limit_apply ("mvrnone0", 1 * MIB, 0, &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_NOT_FOUND);
  g_assert_nonnull (strstr (error->message, "mvrnone0"));
  g_clear_error (&error);
  apply ("mvrnone0", 0, 0);

  g_assert_false (mv_rate_limit_apply ("../mvr0", 0, 0, &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  g_assert_false (mv_rate_limit_apply ("mvr0 root", 1 * MIB, 0, &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);

  g_assert_false (mv_rate_limit_apply (VETH_A, MV_RATE_LIMIT_MIN_BPS - 1, 0, &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
  g_assert_nonnull (strstr (error->message, "download"));
  g_clear_error (&error);
  g_assert_false (mv_rate_limit_apply (VETH_A, 0, MV_RATE_LIMIT_MAX_BPS + 1, &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
  g_assert_nonnull (strstr (error->message, "upload"));
  g_clear_error (&error);
  g_assert_null (root_tbf (VETH_A));
}

/* The kernel removes a TAP's qdiscs with it, not its IFB: removing the
 * limit afterwards does. */
static void
test_ifb_outlives_tap (void)
{
  g_autofree char *ifb = mv_rate_limit_ifb_name ("mvr3");

  mv_test_cmd ("ip", "link", "add", "mvr2", "type", "veth", "peer", "name", "mvr3", NULL);
  apply ("mvr3", 0, 1 * MIB);
  g_assert_true (interface_exists (ifb));
  mv_test_cmd ("ip", "link", "del", "mvr2", NULL);
  g_assert_false (interface_exists ("mvr3"));
  g_assert_true (interface_exists (ifb));

  apply ("mvr3", 0, 0);
  g_assert_false (interface_exists (ifb));
}

int
main (int    argc,
      char **argv)
{
  g_autofree char *peer_mac = NULL;
  g_autofree char *path = g_build_filename ("/sys/class/net", VETH_B, "address", NULL);

  mv_test_private_netns_enter ();
  g_test_init (&argc, &argv, NULL);

  mv_test_cmd ("ip", "link", "add", VETH_A, "type", "veth", "peer", "name", VETH_B, NULL);
  mv_test_cmd ("ip", "addr", "add", A_ADDR "/24", "dev", VETH_A, NULL);
  mv_test_cmd ("ip", "link", "set", "dev", VETH_A, "up", NULL);
  mv_test_cmd ("ip", "link", "set", "dev", VETH_B, "up", NULL);
  mv_test_wait_link_up (VETH_A);
  mv_test_wait_link_up (VETH_B);
  g_assert_true (g_file_get_contents (path, &peer_mac, NULL, NULL));
  g_strchomp (peer_mac);
  mv_test_cmd ("ip", "neigh", "replace", PEER_ADDR, "lladdr", peer_mac, "dev", VETH_A,
               "nud", "permanent", NULL);
  /* What comes in on B after tc, before routing drops it. */
  mv_test_cmd ("nft", "add", "table", "ip", "mvrate", NULL);
  mv_test_cmd ("nft", "add", "counter", "ip", "mvrate", "got", NULL);
  mv_test_cmd ("nft", "add", "chain", "ip", "mvrate", "pre",
               "{ type filter hook prerouting priority -300; policy accept; }", NULL);
  mv_test_cmd ("nft", "add", "rule", "ip", "mvrate", "pre", "iifname", VETH_B, "counter",
               "name", "got", NULL);

  g_test_add_func ("/rate-limit/qdiscs", test_qdiscs);
  g_test_add_func ("/rate-limit/download-transfer", test_download_transfer);
  g_test_add_func ("/rate-limit/upload-transfer", test_upload_transfer);
  g_test_add_func ("/rate-limit/errors", test_errors);
  g_test_add_func ("/rate-limit/ifb-outlives-tap", test_ifb_outlives_tap);
  return g_test_run ();
}
