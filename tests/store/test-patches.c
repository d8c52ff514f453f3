/* The record patches: each one on its own, the runner that chains them,
 * and the store applying them to records on disk. */
#include <stdio.h>
#include <sys/stat.h>

#include <glib/gstdio.h>

#include "core/errors.h"
#include "store/patches.h"
#include "store/store.h"
#include "store-test.h"

static JsonObject *
parse_object (const char *json)
{
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autoptr(GError) error = NULL;

  json_parser_load_from_data (parser, json, -1, &error);
  g_assert_no_error (error);
  g_assert_true (JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser)));
  return json_object_ref (json_node_get_object (json_parser_get_root (parser)));
}

static char *
object_to_json (JsonObject *object)
{
  g_autoptr(JsonNode) node = json_node_new (JSON_NODE_OBJECT);

  json_node_set_object (node, object);
  return json_to_string (node, FALSE);
}

/* config 1 → 2 */

static void
test_config_1_to_2 (void)
{
  g_autoptr(JsonObject) record =
    parse_object ("{\"format\": 1, \"id\": \"x\", \"created_at\": 1795946400,"
                  " \"updated_at\": 1795951805}");
  g_autoptr(GError) error = NULL;
  gboolean changed = FALSE;

  g_assert_true (mv_patches_upgrade_config (record, &changed, &error));
  g_assert_no_error (error);
  g_assert_true (changed);
  g_assert_cmpint (json_object_get_int_member (record, "format"), ==, 2);
  g_assert_cmpstr (json_object_get_string_member (record, "created_at"), ==,
                   "2026-11-29T10:00:00.000000Z");
  g_assert_cmpstr (json_object_get_string_member (record, "updated_at"), ==,
                   "2026-11-29T11:30:05.000000Z");
  /* Other members are the next patches' business, or none at all. */
  g_assert_cmpstr (json_object_get_string_member (record, "id"), ==, "x");
}

static void
test_config_1_to_2_without_updated_at (void)
{
  g_autoptr(JsonObject) record = parse_object ("{\"format\": 1, \"created_at\": 0}");
  g_autoptr(GError) error = NULL;
  gboolean changed = FALSE;

  g_assert_true (mv_patches_upgrade_config (record, &changed, &error));
  g_assert_no_error (error);
  g_assert_true (changed);
  g_assert_cmpstr (json_object_get_string_member (record, "created_at"), ==,
                   "1970-01-01T00:00:00.000000Z");
  g_assert_cmpstr (json_object_get_string_member (record, "updated_at"), ==,
                   "1970-01-01T00:00:00.000000Z");
}

static void
test_config_1_to_2_bad_times (void)
{
  const char *const records[] = {
    "{\"format\": 1}",
    "{\"format\": 1, \"created_at\": \"2026-11-29T10:00:00Z\"}",
    "{\"format\": 1, \"created_at\": 1.5}",
    "{\"format\": 1, \"created_at\": -1}",
    "{\"format\": 1, \"created_at\": 253402300800}",
    "{\"format\": 1, \"created_at\": 10, \"updated_at\": null}",
    "{\"format\": 1, \"created_at\": 10, \"updated_at\": \"soon\"}",
  };

  for (gsize i = 0; i < G_N_ELEMENTS (records); i++)
    {
      g_autoptr(JsonObject) record = parse_object (records[i]);
      g_autoptr(GError) error = NULL;
      g_autofree char *after = NULL;
      gboolean changed = TRUE;

      g_assert_false (mv_patches_upgrade_config (record, &changed, &error));
      g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
      g_assert_false (changed);
      g_assert_true (strstr (error->message, "_at") != NULL);
      /* A failed patch leaves the object as it found it. */
      after = object_to_json (record);
      {
        g_autoptr(JsonObject) expected = parse_object (records[i]);
        g_autofree char *expected_json = object_to_json (expected);

        g_assert_cmpstr (after, ==, expected_json);
      }
    }
}

static void
test_config_current_unchanged (void)
{
  const char *json = "{\"format\": 2, \"created_at\": \"2026-11-29T10:00:00.000000Z\"}";
  g_autoptr(JsonObject) record = parse_object (json);
  g_autoptr(JsonObject) expected = parse_object (json);
  g_autofree char *before = object_to_json (expected);
  g_autofree char *after = NULL;
  g_autoptr(GError) error = NULL;
  gboolean changed = TRUE;

  g_assert_true (mv_patches_upgrade_config (record, &changed, &error));
  g_assert_no_error (error);
  g_assert_false (changed);
  after = object_to_json (record);
  g_assert_cmpstr (after, ==, before);
}

static void
test_format_rejected (void)
{
  struct {
    const char *json;
    int code;
    const char *message;
  } cases[] = {
    { "{\"format\": 99}", MV_ERROR_UNSUPPORTED,
      "format 99 is newer than this daemon supports (2)" },
    { "{\"id\": \"x\"}", MV_ERROR_INVALID_ARGUMENT, "format: missing" },
    { "{\"format\": \"2\"}", MV_ERROR_INVALID_ARGUMENT, "format: expected an integer" },
    { "{\"format\": 2.0}", MV_ERROR_INVALID_ARGUMENT, "format: expected an integer" },
    { "{\"format\": null}", MV_ERROR_INVALID_ARGUMENT, "format: expected an integer" },
    { "{\"format\": 0}", MV_ERROR_UNSUPPORTED, "format 0 is older" },
  };

  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr(JsonObject) record = parse_object (cases[i].json);
      g_autoptr(GError) error = NULL;
      gboolean changed = TRUE;

      g_assert_false (mv_patches_upgrade_config (record, &changed, &error));
      g_assert_error (error, MV_ERROR, cases[i].code);
      g_assert_true (g_str_has_prefix (error->message, cases[i].message));
      g_assert_false (changed);
    }
}

static void
test_status_formats (void)
{
  g_autoptr(JsonObject) current = parse_object ("{\"format\": 1, \"state\": \"Stopped\"}");
  g_autoptr(JsonObject) newer = parse_object ("{\"format\": 2, \"state\": \"Stopped\"}");
  g_autoptr(GError) error = NULL;
  gboolean changed = TRUE;

  g_assert_true (mv_patches_upgrade_status (current, &changed, &error));
  g_assert_no_error (error);
  g_assert_false (changed);

  g_assert_false (mv_patches_upgrade_status (newer, &changed, &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_UNSUPPORTED);
  g_assert_cmpstr (error->message, ==, "format 2 is newer than this daemon supports (1)");
}

/* The runner, with a table of the test's own: each patch leaves a mark,
 * so the trail shows which ran and in what order. */

static gboolean
append_mark (JsonObject *record, gint64 from)
{
  JsonArray *trail = json_object_get_array_member (record, "trail");

  json_array_add_int_element (trail, from);
  json_object_set_int_member (record, "format", from + 1);
  return TRUE;
}

static gboolean patch_1 (JsonObject *record, GError **error) { return append_mark (record, 1); }
static gboolean patch_2 (JsonObject *record, GError **error) { return append_mark (record, 2); }
static gboolean patch_3 (JsonObject *record, GError **error) { return append_mark (record, 3); }

static gboolean
patch_failing (JsonObject *record, GError **error)
{
  g_set_error_literal (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT, "cannot");
  return FALSE;
}

static gboolean
patch_forgetful (JsonObject *record, GError **error)
{
  /* Does its work but does not move the format on. */
  json_array_add_int_element (json_object_get_array_member (record, "trail"), 0);
  return TRUE;
}

static char *
run_table (const MvPatch *patches, gsize n, gint64 from, gint64 current,
           gboolean *changed, GError **error)
{
  g_autofree char *json = g_strdup_printf ("{\"format\": %" G_GINT64_FORMAT ", \"trail\": []}",
                                           from);
  g_autoptr(JsonObject) record = parse_object (json);
  g_autoptr(JsonNode) trail = NULL;

  if (!mv_patches_apply (record, patches, n, current, changed, error))
    return NULL;
  g_assert_cmpint (json_object_get_int_member (record, "format"), ==, current);
  trail = json_node_copy (json_object_get_member (record, "trail"));
  return json_to_string (trail, FALSE);
}

static void
test_runner_order (void)
{
  /* Listed out of order: the runner follows the formats, not the list. */
  const MvPatch table[] = { { 3, patch_3 }, { 1, patch_1 }, { 2, patch_2 } };
  g_autoptr(GError) error = NULL;
  gboolean changed = FALSE;
  char *trail;

  trail = run_table (table, G_N_ELEMENTS (table), 1, 4, &changed, &error);
  g_assert_no_error (error);
  g_assert_true (changed);
  g_assert_cmpstr (trail, ==, "[1,2,3]");
  g_free (trail);

  trail = run_table (table, G_N_ELEMENTS (table), 2, 4, &changed, &error);
  g_assert_no_error (error);
  g_assert_true (changed);
  g_assert_cmpstr (trail, ==, "[2,3]");
  g_free (trail);

  trail = run_table (table, G_N_ELEMENTS (table), 4, 4, &changed, &error);
  g_assert_no_error (error);
  g_assert_false (changed);
  g_assert_cmpstr (trail, ==, "[]");
  g_free (trail);

  /* Stops where the daemon's format is, even if more patches exist. */
  trail = run_table (table, G_N_ELEMENTS (table), 1, 3, &changed, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (trail, ==, "[1,2]");
  g_free (trail);
}

static void
test_runner_errors (void)
{
  const MvPatch gap[] = { { 1, patch_1 }, { 3, patch_3 } };
  const MvPatch failing[] = { { 1, patch_1 }, { 2, patch_failing } };
  const MvPatch forgetful[] = { { 1, patch_forgetful } };
  g_autoptr(GError) error = NULL;
  gboolean changed = TRUE;

  g_assert_null (run_table (gap, G_N_ELEMENTS (gap), 1, 4, &changed, &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_UNSUPPORTED);
  g_assert_cmpstr (error->message, ==, "format 2 is older than any this daemon can upgrade");
  g_clear_error (&error);

  g_assert_null (run_table (failing, G_N_ELEMENTS (failing), 1, 3, &changed, &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
  g_assert_cmpstr (error->message, ==, "upgrading from format 2: cannot");
  g_clear_error (&error);

  g_assert_null (run_table (forgetful, G_N_ELEMENTS (forgetful), 1, 2, &changed, &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_FAILED);
  g_clear_error (&error);

  g_assert_null (run_table (forgetful, 0, 5, 2, &changed, &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_UNSUPPORTED);
  g_assert_cmpstr (error->message, ==, "format 5 is newer than this daemon supports (2)");
}

/* The store applying patches to records on disk. */

typedef struct {
  char    *tmp;
  MvStore *store;
} Fixture;

static GPtrArray *warnings;

static void
fixture_set_up (Fixture *fixture, gconstpointer data)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *state = NULL;
  g_autofree char *runtime = NULL;

  fixture->tmp = g_dir_make_tmp ("test-patches-XXXXXX", &error);
  g_assert_no_error (error);
  state = g_build_filename (fixture->tmp, "state", NULL);
  runtime = g_build_filename (fixture->tmp, "run", NULL);
  fixture->store = mv_store_new (state, runtime, &error);
  g_assert_no_error (error);
  g_ptr_array_set_size (warnings, 0);
}

static void
fixture_tear_down (Fixture *fixture, gconstpointer data)
{
  g_clear_pointer (&fixture->store, mv_store_free);
  store_test_remove_all (fixture->tmp);
  g_clear_pointer (&fixture->tmp, g_free);
}

static char *
write_machine_file (Fixture *fixture, const char *id, const char *file, const char *contents)
{
  g_autofree char *dir = mv_store_machine_dir (fixture->store, id);
  char *path = g_build_filename (dir, file, NULL);
  g_autoptr(GError) error = NULL;

  g_assert_cmpint (g_mkdir_with_parents (dir, 0700), ==, 0);
  g_file_set_contents (path, contents, -1, &error);
  g_assert_no_error (error);
  return path;
}

#define FORMAT_1_ID "5f0c8d3a9b2e4c61a7d8e9f001234567"

/* A config.json as format 1 wrote it: times in seconds, no updated_at
 * until the first change. */
static const char format_1_config[] =
  "{\n"
  "  \"format\": 1,\n"
  "  \"id\": \"" FORMAT_1_ID "\",\n"
  "  \"spec\": {\n"
  "    \"id\": \"" FORMAT_1_ID "\",\n"
  "    \"name\": \"old\",\n"
  "    \"kernel\": \"/boot/vmlinuz\"\n"
  "  },\n"
  "  \"desired_state\": \"stopped\",\n"
  "  \"desired_generation\": 1,\n"
  "  \"specification_generation\": 1,\n"
  "  \"restart_generation\": 0,\n"
  "  \"fingerprint\": \"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08\",\n"
  "  \"created_at\": 1795946400,\n"
  "  \"stopped_by_user\": false\n"
  "}\n";

static void
test_store_upgrades_format_1 (Fixture *fixture, gconstpointer data)
{
  g_autofree char *path = write_machine_file (fixture, FORMAT_1_ID, "config.json",
                                              format_1_config);
  g_autoptr(GPtrArray) invalid =
    g_ptr_array_new_with_free_func ((GDestroyNotify) mv_invalid_record_free);
  g_autoptr(GPtrArray) records = NULL;
  g_autoptr(GPtrArray) again = NULL;
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autoptr(GError) error = NULL;
  g_autofree char *written = NULL;
  g_autofree char *dir = NULL;
  g_autoptr(GDir) listing = NULL;
  JsonObject *object;
  MvRecord *record;
  GStatBuf buf;

  records = mv_store_load_machines (fixture->store, invalid);
  for (guint i = 0; i < invalid->len; i++)
    {
      MvInvalidRecord *bad = g_ptr_array_index (invalid, i);
      g_test_message ("invalid: %s: %s", bad->path, bad->reason);
    }
  g_assert_cmpuint (invalid->len, ==, 0);
  g_assert_cmpuint (records->len, ==, 1);
  record = g_ptr_array_index (records, 0);
  g_assert_cmpstr (record->config->id, ==, FORMAT_1_ID);
  g_assert_cmpstr (record->config->spec->name, ==, "old");
  g_assert_cmpint (record->config->created_at, ==, G_GINT64_CONSTANT (1795946400) * G_USEC_PER_SEC);
  g_assert_cmpint (record->config->updated_at, ==, record->config->created_at);

  /* Written back in format 2, with the times as ISO 8601 strings. */
  g_file_get_contents (path, &written, NULL, &error);
  g_assert_no_error (error);
  json_parser_load_from_data (parser, written, -1, &error);
  g_assert_no_error (error);
  object = json_node_get_object (json_parser_get_root (parser));
  g_assert_cmpint (json_object_get_int_member (object, "format"), ==, 2);
  g_assert_cmpstr (json_object_get_string_member (object, "created_at"), ==,
                   "2026-11-29T10:00:00.000000Z");
  g_assert_cmpstr (json_object_get_string_member (object, "updated_at"), ==,
                   "2026-11-29T10:00:00.000000Z");
  g_assert_cmpint (g_stat (path, &buf), ==, 0);
  g_assert_cmpint (buf.st_mode & 07777, ==, 0600);

  /* The missing status.json is not invented on disk; no temp files. */
  dir = mv_store_machine_dir (fixture->store, FORMAT_1_ID);
  listing = g_dir_open (dir, 0, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (g_dir_read_name (listing), ==, "config.json");
  g_assert_null (g_dir_read_name (listing));

  /* The upgraded record loads the same, with nothing left to upgrade. */
  {
    g_autofree char *before = g_strdup (written);

    again = mv_store_load_machines (fixture->store, invalid);
    g_assert_cmpuint (invalid->len, ==, 0);
    g_assert_cmpuint (again->len, ==, 1);
    g_clear_pointer (&written, g_free);
    g_file_get_contents (path, &written, NULL, &error);
    g_assert_no_error (error);
    g_assert_cmpstr (written, ==, before);
  }
  g_assert_cmpuint (warnings->len, ==, 0);
}

static void
test_store_rejects_newer_format (Fixture *fixture, gconstpointer data)
{
  const char *contents = "{\"format\": 99, \"id\": \"" FORMAT_1_ID "\", \"whatever\": [1, 2]}";
  g_autofree char *path = write_machine_file (fixture, FORMAT_1_ID, "config.json", contents);
  g_autoptr(GPtrArray) invalid =
    g_ptr_array_new_with_free_func ((GDestroyNotify) mv_invalid_record_free);
  g_autoptr(GPtrArray) records = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *after = NULL;
  MvInvalidRecord *bad;
  GStatBuf before_stat, after_stat;

  g_assert_cmpint (g_stat (path, &before_stat), ==, 0);
  records = mv_store_load_machines (fixture->store, invalid);
  g_assert_cmpuint (records->len, ==, 0);
  g_assert_cmpuint (invalid->len, ==, 1);
  bad = g_ptr_array_index (invalid, 0);
  g_assert_cmpstr (bad->path, ==, path);
  g_assert_cmpstr (bad->reason, ==, "format 99 is newer than this daemon supports (2)");
  g_assert_cmpuint (warnings->len, ==, 1);
  g_assert_nonnull (strstr (g_ptr_array_index (warnings, 0), path));

  g_file_get_contents (path, &after, NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (after, ==, contents);
  g_assert_cmpint (g_stat (path, &after_stat), ==, 0);
  g_assert_cmpint (after_stat.st_ino, ==, before_stat.st_ino);
  g_assert_cmpint (after_stat.st_mtim.tv_sec, ==, before_stat.st_mtim.tv_sec);
  g_assert_cmpint (after_stat.st_mtim.tv_nsec, ==, before_stat.st_mtim.tv_nsec);
  g_assert_cmpint (after_stat.st_mode, ==, before_stat.st_mode);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  warnings = store_test_capture_warnings ();

  g_test_add_func ("/patches/config/1-to-2", test_config_1_to_2);
  g_test_add_func ("/patches/config/1-to-2-without-updated-at",
                   test_config_1_to_2_without_updated_at);
  g_test_add_func ("/patches/config/1-to-2-bad-times", test_config_1_to_2_bad_times);
  g_test_add_func ("/patches/config/current-unchanged", test_config_current_unchanged);
  g_test_add_func ("/patches/config/format-rejected", test_format_rejected);
  g_test_add_func ("/patches/status/formats", test_status_formats);
  g_test_add_func ("/patches/runner/order", test_runner_order);
  g_test_add_func ("/patches/runner/errors", test_runner_errors);
  g_test_add ("/patches/store/upgrades-format-1", Fixture, NULL,
              fixture_set_up, test_store_upgrades_format_1, fixture_tear_down);
  g_test_add ("/patches/store/rejects-newer-format", Fixture, NULL,
              fixture_set_up, test_store_rejects_newer_format, fixture_tear_down);

  return g_test_run ();
}
