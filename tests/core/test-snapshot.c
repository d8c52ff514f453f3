/* The snapshot record and the spec of a fork: written and read back
 * whole, every broken record refused naming the field, names made for a
 * snapshot given none, and a fork's identity its own. */
#include "core/errors.h"
#include "core/snapshot.h"

#include <string.h>

static MvSnapshot *
sample (void)
{
  MvSnapshot *s = g_new0 (MvSnapshot, 1);
  g_autoptr (GError) error = NULL;

  s->id = g_strdup ("0123456789abcdef0123456789abcdef");
  s->name = g_strdup ("before-upgrade");
  s->kind = MV_SNAPSHOT_MEMORY;
  s->machine_id = g_strdup ("fedcba9876543210fedcba9876543210");
  s->machine_name = g_strdup ("web");
  s->spec = mv_spec_from_json ("{\"id\":\"fedcba9876543210fedcba9876543210\",\"name\":\"web\","
                               "\"hostname\":\"www\",\"static_ip\":\"10.0.0.5\","
                               "\"network_name\":\"lan\",\"memory_bytes\":268435456,"
                               "\"ssh_keys\":[\"ssh-ed25519 AAAA key\"]}", &error);
  g_assert_no_error (error);
  s->address = g_strdup ("10.0.0.5/24");
  s->mac_address = g_strdup ("02:00:00:00:00:01");
  s->hypervisor_type = g_strdup ("qemu");
  s->hypervisor_version = g_strdup ("7.2.19");
  s->vcpus = 2;
  s->memory_bytes = 268435456;
  s->image_digest = g_strdup ("sha256:" "0000000000000000000000000000000000000000000000000000000000000000");
  s->has_disk = TRUE;
  s->created_at = G_GINT64_CONSTANT (1796158500123456);
  s->size_bytes = 4096;
  return s;
}

static void
test_round_trip (void)
{
  g_autoptr (MvSnapshot) s = sample ();
  g_autofree char *json = mv_snapshot_to_json (s);
  g_autoptr (GError) error = NULL;
  g_autoptr (MvSnapshot) back = mv_snapshot_from_json (json, strlen (json), &error);
  g_autofree char *again = NULL;

  g_assert_no_error (error);
  g_assert_cmpstr (back->id, ==, s->id);
  g_assert_cmpstr (back->name, ==, s->name);
  g_assert_cmpint (back->kind, ==, MV_SNAPSHOT_MEMORY);
  g_assert_cmpstr (back->machine_name, ==, "web");
  g_assert_cmpstr (back->hypervisor_version, ==, "7.2.19");
  g_assert_cmpuint (back->vcpus, ==, 2);
  g_assert_cmpint (back->created_at, ==, s->created_at);
  g_assert_true (back->has_disk);
  /* The spec is kept with its secrets: a restore puts it back whole. */
  g_assert_cmpstr (g_ptr_array_index (back->spec->ssh_keys, 0), ==, "ssh-ed25519 AAAA key");
  again = mv_snapshot_to_json (back);
  g_assert_cmpstr (again, ==, json);
}

static void
assert_refused (const char *json, const char *field)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MvSnapshot) s = mv_snapshot_from_json (json, strlen (json), &error);

  g_assert_null (s);
  g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
  if (!strstr (error->message, field))
    g_error ("\"%s\" does not name %s", error->message, field);
}

/* @member replaced by @value ("" removes it) in the sample's record. */
static char *
edited (const char *member, const char *value)
{
  g_autoptr (MvSnapshot) s = sample ();
  g_autofree char *json = mv_snapshot_to_json (s);
  g_autoptr (JsonParser) parser = json_parser_new ();
  g_autoptr (JsonNode) node = NULL;
  JsonObject *object;

  g_assert_true (json_parser_load_from_data (parser, json, -1, NULL));
  object = json_node_get_object (json_parser_get_root (parser));
  json_object_remove_member (object, member);
  if (*value)
    {
      g_autoptr (JsonParser) vp = json_parser_new ();

      g_assert_true (json_parser_load_from_data (vp, value, -1, NULL));
      json_object_set_member (object, member, json_node_copy (json_parser_get_root (vp)));
    }
  return json_to_string (json_parser_get_root (parser), FALSE);
}

static void
test_refusals (void)
{
  static const struct { const char *member, *value, *field; } cases[] = {
    { "format", "2", "format" },
    { "id", "\"../etc\"", "id" },
    { "name", "\"a/b\"", "name" },
    { "name", "", "name" },
    { "kind", "\"both\"", "kind" },
    { "spec", "{\"name\":1}", "spec" },
    { "spec", "", "spec" },
    { "vcpus", "-1", "vcpus" },
    { "hypervisor_type", "", "hypervisor_type" },
    { "created_at", "\"yesterday\"", "created_at" },
    { "extra", "1", "extra" },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *json = edited (cases[i].member, cases[i].value);

      assert_refused (json, cases[i].field);
    }
  assert_refused ("[]", "snapshot.json");
  assert_refused ("{\"format\":1,", "snapshot.json");
}

static void
test_default_name (void)
{
  g_autofree char *name = mv_snapshot_default_name ("web", G_GINT64_CONSTANT (1796158500) * G_USEC_PER_SEC);
  g_autofree char *long_name = g_strnfill (63, 'x');
  g_autofree char *shortened = mv_snapshot_default_name (long_name, 0);
  /* 30 two-byte characters: cut on a character's boundary. */
  g_autoptr (GString) wide = g_string_new (NULL);
  g_autofree char *wide_name = NULL;
  g_autoptr (GError) error = NULL;

  g_assert_cmpstr (name, ==, "web-20261201-205500");
  g_assert_cmpuint (strlen (shortened), ==, 63);
  g_assert_true (g_str_has_suffix (shortened, "-19700101-000000"));
  for (guint i = 0; i < 30; i++)
    g_string_append (wide, "\xc3\xa9");
  wide_name = mv_snapshot_default_name (wide->str, 0);
  g_assert_true (g_utf8_validate (wide_name, -1, NULL));
  g_assert_cmpuint (strlen (wide_name), <=, 63);
  g_assert_true (mv_name_validate ("name", wide_name, &error));
}

static void
test_fork_spec (void)
{
  g_autoptr (MvSnapshot) s = sample ();
  g_autoptr (GError) error = NULL;
  g_autoptr (MvSpec) fork = mv_snapshot_fork_spec (s, "{\"name\":\"copy\",\"labels\":{\"a\":\"b\"}}",
                                                   &error);
  g_autoptr (MvSpec) pinned = NULL;
  g_autoptr (MvSpec) none = NULL;

  g_assert_no_error (error);
  g_assert_cmpstr (fork->name, ==, "copy");
  /* Its own identity: no ID, address or hostname of the source's. */
  g_assert_null (fork->id);
  g_assert_null (fork->static_ip);
  g_assert_null (fork->hostname);
  /* The rest is the source's, the changes its own. */
  g_assert_cmpstr (fork->network_name, ==, "lan");
  g_assert_cmpuint (fork->memory_bytes, ==, 268435456);
  g_assert_cmpstr (g_hash_table_lookup (fork->labels, "a"), ==, "b");

  pinned = mv_snapshot_fork_spec (s, "{\"name\":\"b\",\"static_ip\":\"10.0.0.9\"}", &error);
  g_assert_no_error (error);
  g_assert_cmpstr (pinned->static_ip, ==, "10.0.0.9");

  none = mv_snapshot_fork_spec (s, "{\"memory_bytes\":1}", &error);
  g_assert_null (none);
  g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
  g_assert_nonnull (strstr (error->message, "name"));
  g_clear_error (&error);
  g_assert_null (mv_snapshot_fork_spec (s, "{\"name\":\"c\",\"nosuch\":1}", &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  g_assert_null (mv_snapshot_fork_spec (s, "\"name\"", &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/snapshot/round-trip", test_round_trip);
  g_test_add_func ("/snapshot/refusals", test_refusals);
  g_test_add_func ("/snapshot/default-name", test_default_name);
  g_test_add_func ("/snapshot/fork-spec", test_fork_spec);
  return g_test_run ();
}
