#include <string.h>

#include "core/errors.h"
#include "core/json-strict.h"
#include "core/machine.h"

/* 2026-11-29T10:00:00.123456Z */
#define T0 G_GINT64_CONSTANT (1795946400123456)
#define T1 (T0 + 5 * G_USEC_PER_SEC)

static MvSpec *
test_spec (void)
{
  g_autoptr(GError) error = NULL;
  MvSpec *spec = mv_spec_from_json ("{\"name\":\"web\",\"kernel\":\"/boot/vmlinuz\","
                                    "\"cpu_millicores\":1500,\"memory_bytes\":536870912,"
                                    "\"ssh_keys\":[\"ssh-ed25519 AAAA\"],"
                                    "\"user_data\":\"#cloud-config\","
                                    "\"metadata\":{\"role\":\"frontend\"},\"network_name\":\"lan\","
                                    "\"firewall\":[{\"action\":\"allow\",\"protocol\":\"tcp\",\"port\":22}],"
                                    "\"labels\":{\"team\":\"web\"}}", &error);

  g_assert_no_error (error);
  return spec;
}

static MvConfig *
test_config (void)
{
  return mv_config_new ("0123456789abcdef0123456789abcdef", test_spec (), T0);
}

/* The readers of the records, on the text of @node: as the store reads
 * a record. */
static const MvJsonLimits record_limits = {
  .max_bytes = MV_RECORD_MAX_BYTES,
  .max_depth = MV_RECORD_MAX_DEPTH,
};

static MvConfig *
config_from_tree (JsonNode *node, GError **error)
{
  g_autofree char *text = json_to_string (node, FALSE);
  g_autoptr(MvJsonDoc) doc = mv_json_read (text, -1, &record_limits, "config", error);

  return doc != NULL ? mv_config_from_node (mv_json_doc_root (doc), error) : NULL;
}

static MvStatus *
status_from_tree (JsonNode *node, GError **error)
{
  g_autofree char *text = json_to_string (node, FALSE);
  g_autoptr(MvJsonDoc) doc = mv_json_read (text, -1, &record_limits, "status", error);

  return doc != NULL ? mv_status_from_node (mv_json_doc_root (doc), error) : NULL;
}

static void
assert_message_contains (const char *message, const char *needle)
{
  if (strstr (message, needle) == NULL)
    g_assert_cmpstr (message, ==, needle);
}

/* ---- IDs ---- */

static void
test_id_new (void)
{
  g_autofree char *a = mv_id_new ();
  g_autofree char *b = mv_id_new ();
  g_autoptr(GError) error = NULL;

  g_assert_cmpuint (strlen (a), ==, 32);
  for (const char *p = a; *p; p++)
    g_assert_true (g_ascii_isdigit (*p) || (*p >= 'a' && *p <= 'f'));
  g_assert_true (mv_id_validate (a, &error));
  g_assert_no_error (error);
  g_assert_cmpstr (a, !=, b);
}

static void
test_id_validate (void)
{
  static const char *const good[] = { "a", "9", "m-1", "m_1", "0123456789abcdef0123456789abcdef" };
  static const char *const bad[] = { "", "-a", "_a", "A", "a.b", "a/b", "a b", "\xc3\xa9" };
  g_autofree char *longest = g_strnfill (MV_ID_MAX_BYTES, 'a');
  g_autofree char *too_long = g_strnfill (MV_ID_MAX_BYTES + 1, 'a');
  g_autoptr(GError) error = NULL;

  for (guint i = 0; i < G_N_ELEMENTS (good); i++)
    {
      g_assert_true (mv_id_validate (good[i], &error));
      g_assert_no_error (error);
    }
  g_assert_true (mv_id_validate (longest, NULL));
  g_assert_false (mv_id_validate (too_long, &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
  g_assert_cmpstr (error->message, ==, "id: longer than 63 bytes");
  g_clear_error (&error);
  g_assert_false (mv_id_validate (NULL, NULL));
  for (guint i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      g_assert_false (mv_id_validate (bad[i], &error));
      g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
      g_assert_true (g_str_has_prefix (error->message, "id: "));
      g_clear_error (&error);
    }
}

/* ---- generations ---- */

static void
test_config_new (void)
{
  g_autoptr(MvConfig) config = test_config ();
  g_autofree char *fingerprint = mv_spec_fingerprint (config->spec);

  g_assert_cmpstr (config->id, ==, "0123456789abcdef0123456789abcdef");
  g_assert_cmpstr (config->spec->id, ==, config->id);
  g_assert_cmpint (config->desired, ==, MV_DESIRED_STOPPED);
  g_assert_cmpuint (config->desired_generation, ==, 1);
  g_assert_cmpuint (config->specification_generation, ==, 1);
  g_assert_cmpuint (config->restart_generation, ==, 0);
  g_assert_cmpstr (config->fingerprint, ==, fingerprint);
  g_assert_cmpint (config->created_at, ==, T0);
  g_assert_cmpint (config->updated_at, ==, T0);
  g_assert_false (config->stopped_by_user);
}

static void
test_set_desired (void)
{
  g_autoptr(MvConfig) config = test_config ();

  /* Asking for what is already desired changes nothing. */
  g_assert_false (mv_config_set_desired (config, MV_DESIRED_STOPPED, T1));
  g_assert_cmpuint (config->desired_generation, ==, 1);
  g_assert_cmpint (config->updated_at, ==, T0);

  g_assert_true (mv_config_set_desired (config, MV_DESIRED_RUNNING, T1));
  g_assert_cmpint (config->desired, ==, MV_DESIRED_RUNNING);
  g_assert_cmpuint (config->desired_generation, ==, 2);
  g_assert_cmpint (config->updated_at, ==, T1);
  g_assert_false (mv_config_set_desired (config, MV_DESIRED_RUNNING, T1 + 1));
  g_assert_cmpuint (config->desired_generation, ==, 2);
  g_assert_cmpint (config->updated_at, ==, T1);

  g_assert_true (mv_config_set_desired (config, MV_DESIRED_PAUSED, T1 + 2));
  g_assert_true (mv_config_set_desired (config, MV_DESIRED_DESTROYED, T1 + 3));
  g_assert_cmpuint (config->desired_generation, ==, 4);
  /* None of it touches the other generations. */
  g_assert_cmpuint (config->specification_generation, ==, 1);
  g_assert_cmpuint (config->restart_generation, ==, 0);
}

static void
test_request_restart (void)
{
  g_autoptr(MvConfig) config = test_config ();

  mv_config_request_restart (config, T1);
  g_assert_cmpuint (config->restart_generation, ==, 1);
  g_assert_cmpuint (config->desired_generation, ==, 2);
  g_assert_cmpuint (config->specification_generation, ==, 1);
  g_assert_cmpint (config->updated_at, ==, T1);

  /* Every accepted restart counts, even back to back. */
  mv_config_request_restart (config, T1 + 1);
  g_assert_cmpuint (config->restart_generation, ==, 2);
  g_assert_cmpuint (config->desired_generation, ==, 3);
}

static void
test_update_spec (void)
{
  g_autoptr(MvConfig) config = test_config ();
  g_autofree char *fingerprint = g_strdup (config->fingerprint);
  MvSpec *spec;

  /* The same spec again: nothing changes. */
  g_assert_false (mv_config_update_spec (config, mv_spec_copy (config->spec), T1));
  g_assert_cmpuint (config->desired_generation, ==, 1);
  g_assert_cmpuint (config->specification_generation, ==, 1);
  g_assert_cmpint (config->updated_at, ==, T0);

  /* A spec without the ID is the same spec: the ID is the machine's. */
  spec = mv_spec_copy (config->spec);
  g_clear_pointer (&spec->id, g_free);
  g_assert_false (mv_config_update_spec (config, spec, T1));
  g_assert_cmpuint (config->desired_generation, ==, 1);

  /* Standby time alone: desired rises, specification does not. */
  spec = mv_spec_copy (config->spec);
  spec->standby_after_seconds = 600;
  g_assert_true (mv_config_update_spec (config, spec, T1));
  g_assert_cmpuint (config->desired_generation, ==, 2);
  g_assert_cmpuint (config->specification_generation, ==, 1);
  g_assert_cmpuint (config->spec->standby_after_seconds, ==, 600);
  g_assert_cmpint (config->updated_at, ==, T1);

  /* A firewall change raises both. */
  spec = mv_spec_copy (config->spec);
  json_array_add_object_element (spec->firewall, json_object_new ());
  g_assert_true (mv_config_update_spec (config, spec, T1 + 1));
  g_assert_cmpuint (config->desired_generation, ==, 3);
  g_assert_cmpuint (config->specification_generation, ==, 2);
  g_assert_cmpuint (json_array_get_length (config->spec->firewall), ==, 2);

  /* So do labels and resources. */
  spec = mv_spec_copy (config->spec);
  g_hash_table_insert (spec->labels, g_strdup ("env"), g_strdup ("prod"));
  g_assert_true (mv_config_update_spec (config, spec, T1 + 2));
  g_assert_cmpuint (config->specification_generation, ==, 3);
  spec = mv_spec_copy (config->spec);
  spec->memory_bytes *= 2;
  g_assert_true (mv_config_update_spec (config, spec, T1 + 3));
  g_assert_cmpuint (config->specification_generation, ==, 4);
  g_assert_cmpuint (config->desired_generation, ==, 5);

  /* The ID stays the machine's whatever the spec says. */
  spec = mv_spec_copy (config->spec);
  g_free (spec->id);
  spec->id = g_strdup ("other");
  g_assert_false (mv_config_update_spec (config, spec, T1 + 4));
  g_assert_cmpstr (config->spec->id, ==, config->id);
  g_assert_cmpuint (config->desired_generation, ==, 5);

  /* A spec without a name keeps the machine's. */
  spec = mv_spec_copy (config->spec);
  g_clear_pointer (&spec->name, g_free);
  g_assert_false (mv_config_update_spec (config, spec, T1 + 4));
  g_assert_cmpstr (config->spec->name, ==, "web");

  /* A new name is a rename: a change of the spec like any other. */
  spec = mv_spec_copy (config->spec);
  g_free (spec->name);
  spec->name = g_strdup ("renamed");
  g_assert_true (mv_config_update_spec (config, spec, T1 + 5));
  g_assert_cmpstr (config->spec->name, ==, "renamed");
  g_assert_cmpuint (config->desired_generation, ==, 6);
  g_assert_cmpuint (config->specification_generation, ==, 5);

  /* The create fingerprint is never recomputed. */
  g_assert_cmpstr (config->fingerprint, ==, fingerprint);

  /* Nothing of the desired state itself moved. */
  g_assert_cmpint (config->desired, ==, MV_DESIRED_STOPPED);
  g_assert_cmpuint (config->restart_generation, ==, 0);
}

static void
test_retry (void)
{
  g_autoptr(MvConfig) config = test_config ();

  mv_config_set_desired (config, MV_DESIRED_RUNNING, T0);
  mv_config_retry (config, T1);
  g_assert_cmpuint (config->desired_generation, ==, 3);
  g_assert_cmpint (config->desired, ==, MV_DESIRED_RUNNING);
  g_assert_cmpuint (config->specification_generation, ==, 1);
  g_assert_cmpuint (config->restart_generation, ==, 0);
  g_assert_cmpint (config->updated_at, ==, T1);
}

static void
test_copies (void)
{
  g_autoptr(MvConfig) config = test_config ();
  g_autoptr(MvConfig) config_copy = mv_config_copy (config);
  g_autoptr(MvStatus) status = mv_status_new ();
  g_autoptr(MvStatus) status_copy = NULL;

  g_assert_true (mv_spec_equal (config->spec, config_copy->spec));
  g_assert_cmpstr (config->fingerprint, ==, config_copy->fingerprint);
  g_assert_cmpuint (config->desired_generation, ==, config_copy->desired_generation);
  config_copy->spec->cpu_millicores = 4000;
  g_assert_cmpuint (config->spec->cpu_millicores, ==, 1500);

  status->vmm = json_object_new ();
  json_object_set_int_member (status->vmm, "pid", 42);
  status->phase = g_strdup ("boot");
  status_copy = mv_status_copy (status);
  json_object_set_int_member (status_copy->vmm, "pid", 43);
  g_assert_cmpint (json_object_get_int_member (status->vmm, "pid"), ==, 42);
  g_assert_cmpstr (status_copy->phase, ==, "boot");
  g_assert_true (status_copy->phase != status->phase);
}

/* ---- config.json ---- */

static JsonNode *
node_round_trip_text (JsonNode *node)
{
  g_autofree char *text = json_to_string (node, FALSE);
  JsonNode *again = json_from_string (text, NULL);

  g_assert_nonnull (again);
  return again;
}

static void
test_config_round_trip (void)
{
  g_autoptr(MvConfig) config = test_config ();
  g_autoptr(JsonNode) node = NULL;
  g_autoptr(JsonNode) parsed_node = NULL;
  g_autoptr(MvConfig) parsed = NULL;
  g_autoptr(JsonNode) node_again = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *text = NULL;
  g_autofree char *text_again = NULL;
  JsonObject *object;

  mv_config_set_desired (config, MV_DESIRED_RUNNING, T1);
  mv_config_request_restart (config, T1 + 1);
  config->stopped_by_user = TRUE;

  node = mv_config_to_node (config);
  object = json_node_get_object (node);
  g_assert_cmpint (json_object_get_int_member (object, "format"), ==, MV_CONFIG_FORMAT);
  g_assert_cmpstr (json_object_get_string_member (object, "desired_state"), ==, "running");
  g_assert_cmpstr (json_object_get_string_member (object, "created_at"), ==,
                   "2026-11-29T10:00:00.123456Z");
  g_assert_cmpstr (json_object_get_string_member (object, "updated_at"), ==,
                   "2026-11-29T10:00:05.123457Z");
  /* The record keeps the secrets. */
  g_assert_true (json_object_has_member (json_object_get_object_member (object, "spec"),
                                         "user_data"));

  /* Through text, as the store does. */
  parsed_node = node_round_trip_text (node);
  parsed = config_from_tree (parsed_node, &error);
  g_assert_no_error (error);
  g_assert_nonnull (parsed);
  g_assert_cmpstr (parsed->id, ==, config->id);
  g_assert_cmpint (parsed->desired, ==, MV_DESIRED_RUNNING);
  g_assert_cmpuint (parsed->desired_generation, ==, 3);
  g_assert_cmpuint (parsed->specification_generation, ==, 1);
  g_assert_cmpuint (parsed->restart_generation, ==, 1);
  g_assert_cmpstr (parsed->fingerprint, ==, config->fingerprint);
  g_assert_cmpint (parsed->created_at, ==, T0);
  g_assert_cmpint (parsed->updated_at, ==, T1 + 1);
  g_assert_true (parsed->stopped_by_user);
  g_assert_true (mv_spec_equal (parsed->spec, config->spec));

  node_again = mv_config_to_node (parsed);
  text = json_to_string (node, FALSE);
  text_again = json_to_string (node_again, FALSE);
  g_assert_cmpstr (text, ==, text_again);
}

static void
test_timestamps (void)
{
  static const struct { gint64 usec; const char *text; } cases[] = {
    { 0, "1970-01-01T00:00:00.000000Z" },
    { 1, "1970-01-01T00:00:00.000001Z" },
    { -1, "1969-12-31T23:59:59.999999Z" },
    { T0, "2026-11-29T10:00:00.123456Z" },
    { G_GINT64_CONSTANT (1795946400999999), "2026-11-29T10:00:00.999999Z" },
    /* Years before 1000 keep their four digits, or they would not read back. */
    { G_GINT64_CONSTANT (-61340000000) * G_USEC_PER_SEC, "0026-03-19T07:06:40.000000Z" },
    { G_GINT64_CONSTANT (-62135596800) * G_USEC_PER_SEC, "0001-01-01T00:00:00.000000Z" },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr(MvConfig) config = test_config ();
      g_autoptr(JsonNode) node = NULL;
      g_autoptr(MvConfig) parsed = NULL;
      g_autoptr(GError) error = NULL;

      config->created_at = config->updated_at = cases[i].usec;
      node = mv_config_to_node (config);
      g_assert_cmpstr (json_object_get_string_member (json_node_get_object (node), "created_at"),
                       ==, cases[i].text);
      parsed = config_from_tree (node, &error);
      g_assert_no_error (error);
      g_assert_cmpint (parsed->created_at, ==, cases[i].usec);
    }

  /* Other offsets are read as the same instant. */
  {
    g_autoptr(MvConfig) config = test_config ();
    g_autoptr(JsonNode) node = mv_config_to_node (config);
    g_autoptr(MvConfig) parsed = NULL;

    json_object_set_string_member (json_node_get_object (node), "created_at",
                                   "2026-11-29T11:00:00.123456+01:00");
    parsed = config_from_tree (node, NULL);
    g_assert_nonnull (parsed);
    g_assert_cmpint (parsed->created_at, ==, T0);
  }
}

static void
test_config_optional_fields (void)
{
  g_autoptr(MvConfig) config = test_config ();
  g_autoptr(JsonNode) node = mv_config_to_node (config);
  JsonObject *object = json_node_get_object (node);
  g_autoptr(MvConfig) parsed = NULL;
  g_autoptr(GError) error = NULL;

  /* A spec without an ID takes the record's. */
  json_object_remove_member (json_object_get_object_member (object, "spec"), "id");
  json_object_remove_member (object, "updated_at");
  json_object_remove_member (object, "stopped_by_user");
  json_object_remove_member (object, "fingerprint");
  parsed = config_from_tree (node, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (parsed->spec->id, ==, config->id);
  g_assert_cmpint (parsed->updated_at, ==, parsed->created_at);
  g_assert_false (parsed->stopped_by_user);
  g_assert_null (parsed->fingerprint);
}

#define assert_config_rejected(mutate_stmt, needle) \
  G_STMT_START { \
    g_autoptr(MvConfig) config_ = test_config (); \
    g_autoptr(JsonNode) node_ = mv_config_to_node (config_); \
    JsonObject *o = json_node_get_object (node_); \
    JsonObject *spec G_GNUC_UNUSED = json_object_get_object_member (o, "spec"); \
    g_autoptr(GError) error_ = NULL; \
    g_autoptr(MvConfig) parsed_ = NULL; \
    mutate_stmt; \
    parsed_ = config_from_tree (node_, &error_); \
    g_assert_null (parsed_); \
    g_assert_error (error_, MV_ERROR, MV_ERROR_INVALID_ARGUMENT); \
    assert_message_contains (error_->message, (needle)); \
  } G_STMT_END

static void
test_config_strict (void)
{
  static const char *const required[] = {
    "id", "desired_state", "desired_generation", "specification_generation",
    "restart_generation", "created_at", "spec",
  };

  for (guint i = 0; i < G_N_ELEMENTS (required); i++)
    {
      g_autofree char *needle = g_strdup_printf ("%s: missing", required[i]);

      assert_config_rejected (json_object_remove_member (o, required[i]), needle);
      assert_config_rejected (json_object_set_null_member (o, required[i]), needle);
    }

  /* The format first, and only the current one. */
  assert_config_rejected (json_object_remove_member (o, "format"), "format: missing");
  assert_config_rejected (json_object_set_int_member (o, "format", 1),
                          "format: 1 is not the current format 2");
  assert_config_rejected (json_object_set_int_member (o, "format", 3), "format: 3");
  assert_config_rejected (json_object_set_string_member (o, "format", "2"),
                          "format: expected an integer");

  assert_config_rejected (json_object_set_int_member (o, "extra", 1), "unknown field 'extra'");
  assert_config_rejected (json_object_set_int_member (spec, "vcpus", 1),
                          "spec: unknown field 'vcpus'");

  /* Wrong types. */
  assert_config_rejected (json_object_set_int_member (o, "id", 5), "id: expected a string");
  assert_config_rejected (json_object_set_string_member (o, "desired_generation", "3"),
                          "desired_generation: expected an integer");
  assert_config_rejected (json_object_set_double_member (o, "restart_generation", 1.5),
                          "restart_generation: expected an integer");
  assert_config_rejected (json_object_set_string_member (o, "stopped_by_user", "no"),
                          "stopped_by_user: expected a boolean");
  assert_config_rejected (json_object_set_int_member (o, "created_at", 1795946400),
                          "created_at: expected a string");
  assert_config_rejected (json_object_set_boolean_member (o, "fingerprint", TRUE),
                          "fingerprint: expected a string");
  assert_config_rejected (json_object_set_string_member (o, "spec", "{}"),
                          "spec: expected an object");

  /* Bad values. */
  assert_config_rejected (json_object_set_string_member (o, "id", "Not An ID"), "id: ");
  assert_config_rejected (json_object_set_string_member (o, "desired_state", "Running"),
                          "desired_state: 'Running'");
  assert_config_rejected (json_object_set_int_member (o, "desired_generation", 0),
                          "desired_generation: ");
  assert_config_rejected (json_object_set_int_member (o, "specification_generation", 0),
                          "specification_generation: ");
  assert_config_rejected (json_object_set_int_member (o, "restart_generation", -1),
                          "restart_generation: ");
  assert_config_rejected (json_object_set_string_member (o, "created_at", "yesterday"),
                          "created_at: 'yesterday'");
  assert_config_rejected (json_object_set_string_member (o, "updated_at", "2026-11-29T10:00:00"),
                          "updated_at: ");
  assert_config_rejected (json_object_set_string_member (o, "fingerprint", "abc"),
                          "fingerprint: ");
  assert_config_rejected (json_object_set_int_member (spec, "cpu_millicores", 50),
                          "spec: cpu_millicores: 50 is below the minimum of 100");
  assert_config_rejected (json_object_remove_member (spec, "name"), "spec: name: required");
  assert_config_rejected (json_object_set_string_member (spec, "id", "another"),
                          "spec: id 'another' differs");

  /* Not an object at all. */
  {
    g_autoptr(JsonNode) node = json_node_init_int (json_node_alloc (), 2);
    g_autoptr(GError) error = NULL;

    g_assert_null (config_from_tree (node, &error));
    g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
  }
}

/* ---- status.json ---- */

static void
test_status_new (void)
{
  g_autoptr(MvStatus) status = mv_status_new ();
  g_autoptr(JsonNode) node = mv_status_to_node (status);
  g_autofree char *text = json_to_string (node, FALSE);

  g_assert_cmpint (status->state, ==, MV_STATE_STOPPED);
  g_assert_cmpuint (status->observed_generation, ==, 0);
  /* Nothing optional is written for a fresh status. */
  g_assert_cmpstr (text, ==,
                   "{\"format\":1,\"state\":\"Stopped\",\"observed_generation\":0,"
                   "\"observed_restart_generation\":0,\"restart_count\":0}");
}

static void
test_status_round_trip (void)
{
  g_autoptr(MvStatus) status = mv_status_new ();
  g_autoptr(JsonNode) node = NULL;
  g_autoptr(JsonNode) text_node = NULL;
  g_autoptr(MvStatus) parsed = NULL;
  g_autoptr(JsonNode) node_again = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *text = NULL;
  g_autofree char *text_again = NULL;
  JsonObject *object;

  status->state = MV_STATE_RESTARTING;
  status->state_error = g_strdup ("guest exited with 1");
  status->phase = g_strdup ("start-vmm");
  status->operation_id = g_strdup ("op-7");
  status->observed_generation = 12;
  status->observed_restart_generation = 2;
  status->failed_generation = 11;
  status->started_at = T0;
  status->finished_at = T1;
  status->next_restart_at = T1 + G_USEC_PER_SEC;
  status->has_exit_code = TRUE;
  status->exit_code = -9;
  status->restart_count = 3;
  status->vmm = json_object_new ();
  json_object_set_int_member (status->vmm, "pid", 4242);
  json_object_set_string_member (status->vmm, "socket", "/run/microvmd/machines/x/api.sock");
  status->saved_state = g_strdup ("/var/lib/microvmd/machines/x/saved");
  status->vcpus = 3;
  status->memory_bytes = G_GUINT64_CONSTANT (3) << 30;
  status->started_from = g_strdup (MV_STARTED_WARM);
  status->warm_template = g_strdup ("0123456789abcdef0123456789abcdef");

  node = mv_status_to_node (status);
  object = json_node_get_object (node);
  g_assert_cmpint (json_object_get_int_member (object, "format"), ==, MV_STATUS_FORMAT);
  g_assert_cmpstr (json_object_get_string_member (object, "state"), ==, "Restarting");
  g_assert_cmpstr (json_object_get_string_member (object, "started_at"), ==,
                   "2026-11-29T10:00:00.123456Z");

  text_node = node_round_trip_text (node);
  parsed = status_from_tree (text_node, &error);
  g_assert_no_error (error);
  g_assert_cmpint (parsed->state, ==, MV_STATE_RESTARTING);
  g_assert_cmpstr (parsed->state_error, ==, status->state_error);
  g_assert_cmpstr (parsed->phase, ==, "start-vmm");
  g_assert_cmpstr (parsed->operation_id, ==, "op-7");
  g_assert_cmpuint (parsed->observed_generation, ==, 12);
  g_assert_cmpuint (parsed->observed_restart_generation, ==, 2);
  g_assert_cmpuint (parsed->failed_generation, ==, 11);
  g_assert_cmpint (parsed->started_at, ==, T0);
  g_assert_cmpint (parsed->finished_at, ==, T1);
  g_assert_cmpint (parsed->next_restart_at, ==, T1 + G_USEC_PER_SEC);
  g_assert_true (parsed->has_exit_code);
  g_assert_cmpint (parsed->exit_code, ==, -9);
  g_assert_cmpuint (parsed->restart_count, ==, 3);
  g_assert_nonnull (parsed->vmm);
  g_assert_cmpint (json_object_get_int_member (parsed->vmm, "pid"), ==, 4242);
  g_assert_cmpstr (parsed->saved_state, ==, status->saved_state);
  g_assert_cmpuint (parsed->vcpus, ==, 3);
  g_assert_cmpuint (parsed->memory_bytes, ==, G_GUINT64_CONSTANT (3) << 30);
  g_assert_cmpstr (parsed->started_from, ==, "warm");
  g_assert_cmpstr (parsed->warm_template, ==, status->warm_template);

  node_again = mv_status_to_node (parsed);
  text = json_to_string (node, FALSE);
  text_again = json_to_string (node_again, FALSE);
  g_assert_cmpstr (text, ==, text_again);

  /* An exit code of 0 is still an exit code. */
  {
    g_autoptr(MvStatus) clean = mv_status_new ();
    g_autoptr(JsonNode) clean_node = NULL;
    g_autoptr(MvStatus) clean_parsed = NULL;

    clean->has_exit_code = TRUE;
    clean_node = mv_status_to_node (clean);
    g_assert_true (json_object_has_member (json_node_get_object (clean_node), "exit_code"));
    clean_parsed = status_from_tree (clean_node, NULL);
    g_assert_true (clean_parsed->has_exit_code);
    g_assert_cmpint (clean_parsed->exit_code, ==, 0);
  }
}

static void
test_status_minimal (void)
{
  g_autoptr(JsonNode) node =
    json_from_string ("{\"format\":1,\"state\":\"Running\",\"observed_generation\":4}", NULL);
  g_autoptr(GError) error = NULL;
  g_autoptr(MvStatus) status = status_from_tree (node, &error);

  g_assert_no_error (error);
  g_assert_cmpint (status->state, ==, MV_STATE_RUNNING);
  g_assert_cmpuint (status->observed_generation, ==, 4);
  g_assert_null (status->state_error);
  g_assert_null (status->phase);
  g_assert_null (status->operation_id);
  g_assert_cmpint (status->started_at, ==, 0);
  g_assert_false (status->has_exit_code);
  g_assert_cmpuint (status->restart_count, ==, 0);
  g_assert_cmpuint (status->observed_restart_generation, ==, 0);
  g_assert_cmpuint (status->failed_generation, ==, 0);
  g_assert_null (status->vmm);
  g_assert_null (status->saved_state);
}

#define assert_status_rejected(json, needle) \
  G_STMT_START { \
    g_autoptr(JsonNode) node_ = json_from_string ((json), NULL); \
    g_autoptr(GError) error_ = NULL; \
    g_autoptr(MvStatus) parsed_ = NULL; \
    g_assert_nonnull (node_); \
    parsed_ = status_from_tree (node_, &error_); \
    g_assert_null (parsed_); \
    g_assert_error (error_, MV_ERROR, MV_ERROR_INVALID_ARGUMENT); \
    assert_message_contains (error_->message, (needle)); \
  } G_STMT_END

#define ST "\"format\":1,\"state\":\"Stopped\",\"observed_generation\":0"

static void
test_status_strict (void)
{
  assert_status_rejected ("{\"state\":\"Stopped\",\"observed_generation\":0}", "format: missing");
  assert_status_rejected ("{\"format\":2,\"state\":\"Stopped\",\"observed_generation\":0}",
                          "format: 2 is not the current format 1");
  assert_status_rejected ("{\"format\":1,\"observed_generation\":0}", "state: missing");
  assert_status_rejected ("{\"format\":1,\"state\":\"Stopped\"}", "observed_generation: missing");
  assert_status_rejected ("{\"format\":1,\"state\":\"running\",\"observed_generation\":0}",
                          "state: 'running'");
  assert_status_rejected ("{\"format\":1,\"state\":3,\"observed_generation\":0}",
                          "state: expected a string");
  assert_status_rejected ("{" ST ",\"pid\":5}", "unknown field 'pid'");
  assert_status_rejected ("{\"format\":1,\"state\":\"Stopped\",\"observed_generation\":-1}",
                          "observed_generation: ");
  assert_status_rejected ("{" ST ",\"phase\":1}", "phase: expected a string");
  assert_status_rejected ("{" ST ",\"started_at\":0}", "started_at: expected a string");
  assert_status_rejected ("{" ST ",\"finished_at\":\"later\"}", "finished_at: 'later'");
  assert_status_rejected ("{" ST ",\"exit_code\":2147483648}", "exit_code: ");
  assert_status_rejected ("{" ST ",\"exit_code\":\"1\"}", "exit_code: expected an integer");
  assert_status_rejected ("{" ST ",\"restart_count\":-1}", "restart_count: ");
  assert_status_rejected ("{" ST ",\"failed_generation\":\"3\"}",
                          "failed_generation: expected an integer");
  assert_status_rejected ("{" ST ",\"observed_restart_generation\":-2}",
                          "observed_restart_generation: ");
  assert_status_rejected ("{" ST ",\"vmm\":[]}", "vmm: expected an object");
  assert_status_rejected ("{" ST ",\"saved_state\":true}", "saved_state: expected a string");
  assert_status_rejected ("{" ST ",\"started_from\":\"hot\"}", "started_from: not cold");
  assert_status_rejected ("{" ST ",\"warm_template\":\"../../etc\"}", "warm_template: ");
  assert_status_rejected ("{" ST ",\"warm_template\":7}", "warm_template: expected a string");
  assert_status_rejected ("[]", "status: expected an object");
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);

  g_test_add_func ("/machine/id-new", test_id_new);
  g_test_add_func ("/machine/id-validate", test_id_validate);
  g_test_add_func ("/machine/config-new", test_config_new);
  g_test_add_func ("/machine/generations/set-desired", test_set_desired);
  g_test_add_func ("/machine/generations/request-restart", test_request_restart);
  g_test_add_func ("/machine/generations/update-spec", test_update_spec);
  g_test_add_func ("/machine/generations/retry", test_retry);
  g_test_add_func ("/machine/copies", test_copies);
  g_test_add_func ("/machine/config/round-trip", test_config_round_trip);
  g_test_add_func ("/machine/config/timestamps", test_timestamps);
  g_test_add_func ("/machine/config/optional-fields", test_config_optional_fields);
  g_test_add_func ("/machine/config/strict", test_config_strict);
  g_test_add_func ("/machine/status/new", test_status_new);
  g_test_add_func ("/machine/status/round-trip", test_status_round_trip);
  g_test_add_func ("/machine/status/minimal", test_status_minimal);
  g_test_add_func ("/machine/status/strict", test_status_strict);

  return g_test_run ();
}
