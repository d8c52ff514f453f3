/* microvmctl against the daemon: human and JSON output, lifecycle
 * commands, errors with the D-Bus error's message and name, and the
 * libraries a command loads. */
#include "bus-client.h"
#include "names.h"
#include "core/spec.h"

#include <glib/gstdio.h>
#include <json-glib/json-glib.h>

/* The record a fixture finds broken at start: a directory named as IDs
 * are, holding a config.json cut short. */
#define BROKEN_RECORD "0123456789abcdef0123456789abcdef"

typedef struct {
  MvTestEnv *env;
  char      *spec_file;
} CliFixture;

static void
cli_fixture_setup (CliFixture *f, gconstpointer data)
{
  f->env = mv_test_env_new ();
  if (data != NULL)
    {
      g_autofree char *dir = g_build_filename (mv_test_env_state_dir (f->env), "machines",
                                               (const char *) data, NULL);
      g_autofree char *config = g_build_filename (dir, "config.json", NULL);

      g_assert_cmpint (g_mkdir_with_parents (dir, 0700), ==, 0);
      g_assert_true (g_file_set_contents (config, "{\"format\": 2, \"id\": \"", -1, NULL));
    }
  mv_test_env_start_daemon (f->env, NULL);
  f->spec_file = g_build_filename (mv_test_env_dir (f->env), "spec.json", NULL);
  g_assert_true (g_file_set_contents (f->spec_file,
    "{\"name\":\"web\",\"hypervisor_type\":\"test\",\"kernel\":\"/k\",\"cpu_millicores\":2000,"
    "\"memory_bytes\":536870912,\"labels\":{\"tier\":\"front\"}}", -1, NULL));
}

static void
cli_fixture_teardown (CliFixture *f, gconstpointer data)
{
  g_free (f->spec_file);
  mv_test_env_free (f->env);
}

static int
ctl (CliFixture *f, char **out, char **err, ...)
{
  g_autoptr (GPtrArray) argv = g_ptr_array_new_with_free_func (g_free);
  va_list ap;
  const char *arg;

  g_ptr_array_add (argv, g_build_filename (g_getenv ("MICROVMD_BUILD_DIR"), "src", "cli",
                                           "microvmctl", NULL));
  va_start (ap, err);
  while ((arg = va_arg (ap, const char *)))
    g_ptr_array_add (argv, g_strdup (arg));
  va_end (ap);
  g_ptr_array_add (argv, NULL);
  /* What an earlier call left in @out and @err is replaced. */
  if (out)
    g_clear_pointer (out, g_free);
  if (err)
    g_clear_pointer (err, g_free);
  return mv_test_env_run (f->env, (const char *const *) argv->pdata, out, err);
}

/* The "spec" member of `show --json`, as JSON text. */
static char *
shown_spec (const char *show_json)
{
  g_autoptr (JsonParser) parser = json_parser_new ();
  JsonObject *root;

  g_assert_true (json_parser_load_from_data (parser, show_json, -1, NULL));
  root = json_node_get_object (json_parser_get_root (parser));
  g_assert_true (json_object_has_member (root, "spec"));
  return json_to_string (json_object_get_member (root, "spec"), FALSE);
}

/* What `show --json NAME | jq .spec | update -f - NAME` does loses
 * nothing: root sees the secrets and sends them back; a spec shown without
 * them is refused by Update, never stored. */
static void
test_show_update_keeps_secrets (CliFixture *f, gconstpointer data)
{
  g_autofree char *out = NULL, *err = NULL, *spec = NULL, *file = NULL, *hidden = NULL;
  const char *secret_spec =
    "{\"name\":\"vault\",\"hypervisor_type\":\"test\",\"kernel\":\"/k\","
    "\"ssh_keys\":[\"ssh-ed25519 AAAAkey one@example\"],\"user_data\":\"#cloud-config\","
    "\"metadata\":{\"token\":\"s3cret\"},\"labels\":{\"a\":\"1\"}}";
  g_autofree char *create_file = g_build_filename (mv_test_env_dir (f->env), "vault.json", NULL);
  const char *show_argv[3] = { NULL };

  g_assert_true (g_file_set_contents (create_file, secret_spec, -1, NULL));
  g_assert_cmpint (ctl (f, &out, &err, "create", "-f", create_file, NULL), ==, 0);

  /* Root may read the secrets: show gives them, and sending the shown spec
   * back (a label changed) keeps them. */
  g_assert_cmpint (ctl (f, &out, &err, "--json", "show", "vault", NULL), ==, 0);
  spec = shown_spec (out);
  g_assert_nonnull (strstr (spec, "AAAAkey"));
  g_assert_nonnull (strstr (spec, "s3cret"));
  g_autoptr (GString) changed = g_string_new (spec);
  g_assert_cmpuint (g_string_replace (changed, "\"a\":\"1\"", "\"a\":\"2\"", 1), ==, 1);
  file = g_build_filename (mv_test_env_dir (f->env), "shown.json", NULL);
  g_assert_true (g_file_set_contents (file, changed->str, -1, NULL));
  g_assert_cmpint (ctl (f, &out, &err, "update", "-f", file, "vault", NULL), ==, 0);
  g_assert_cmpint (ctl (f, &out, &err, "--json", "show", "vault", NULL), ==, 0);
  g_free (spec);
  spec = shown_spec (out);
  g_assert_nonnull (strstr (spec, "AAAAkey"));
  g_assert_nonnull (strstr (spec, "#cloud-config"));
  g_assert_nonnull (strstr (spec, "s3cret"));
  g_assert_nonnull (strstr (spec, "\"a\":\"2\""));

  /* Anyone else sees placeholders, and that spec sent back is refused,
   * naming the field, with nothing stored. */
  show_argv[0] = g_build_filename (g_getenv ("MICROVMD_BUILD_DIR"), "src", "cli", "microvmctl",
                                   NULL);
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);
  {
    const char *argv[] = { show_argv[0], "--json", "show", "vault", NULL };
    g_assert_cmpint (mv_test_env_run_as_nobody (f->env, argv, &out, &err), ==, 0);
  }
  g_free ((char *) show_argv[0]);
  hidden = shown_spec (out);
  g_assert_null (strstr (hidden, "AAAAkey"));
  g_assert_null (strstr (hidden, "s3cret"));
  g_assert_nonnull (strstr (hidden, MV_SPEC_REDACTED));
  g_assert_true (g_file_set_contents (file, hidden, -1, NULL));
  g_assert_cmpint (ctl (f, &out, &err, "update", "-f", file, "vault", NULL), !=, 0);
  g_test_message ("update: %s", err);
  g_assert_nonnull (strstr (err, "InvalidArgument"));
  g_assert_nonnull (strstr (err, "ssh_keys[0]"));
  g_assert_cmpint (ctl (f, &out, &err, "--json", "show", "vault", NULL), ==, 0);
  g_free (spec);
  spec = shown_spec (out);
  g_assert_nonnull (strstr (spec, "AAAAkey"));
  g_assert_nonnull (strstr (spec, "s3cret"));
}

static void
test_lifecycle_through_cli (CliFixture *f, gconstpointer data)
{
  g_autofree char *out = NULL, *err = NULL;

  g_assert_cmpint (ctl (f, &out, &err, "create", "-f", f->spec_file, "--start", NULL), ==, 0);
  g_assert_nonnull (strstr (out, "web"));

  g_clear_pointer (&out, g_free);
  g_assert_cmpint (ctl (f, &out, &err, "list", NULL), ==, 0);
  g_assert_nonnull (strstr (out, "NAME"));
  g_assert_nonnull (strstr (out, "web"));
  g_assert_nonnull (strstr (out, "Running"));
  g_assert_nonnull (strstr (out, "512M"));

  g_clear_pointer (&out, g_free);
  g_assert_cmpint (ctl (f, &out, &err, "--json", "list", NULL), ==, 0);
  g_autoptr (JsonParser) parser = json_parser_new ();
  g_assert_true (json_parser_load_from_data (parser, out, -1, NULL));
  JsonArray *list = json_node_get_array (json_parser_get_root (parser));
  g_assert_cmpuint (json_array_get_length (list), ==, 1);
  JsonObject *m = json_array_get_object_element (list, 0);
  g_assert_cmpstr (json_object_get_string_member (m, "name"), ==, "web");
  g_assert_cmpstr (json_object_get_string_member (m, "state"), ==, "Running");
  g_assert_cmpint (json_object_get_int_member (m, "vcpus"), ==, 2);

  g_clear_pointer (&out, g_free);
  g_assert_cmpint (ctl (f, &out, &err, "--json", "show", "web", NULL), ==, 0);
  g_assert_true (json_parser_load_from_data (parser, out, -1, NULL));
  JsonObject *shown = json_node_get_object (json_parser_get_root (parser));
  g_assert_cmpstr (json_object_get_string_member (shown, "state"), ==, "Running");
  JsonObject *spec = json_object_get_object_member (shown, "spec");
  g_assert_nonnull (spec);
  g_assert_cmpint (json_object_get_int_member (spec, "cpu_millicores"), ==, 2000);

  g_assert_cmpint (ctl (f, NULL, NULL, "pause", "web", NULL), ==, 0);
  g_assert_cmpint (ctl (f, NULL, NULL, "resume", "web", NULL), ==, 0);
  g_assert_cmpint (ctl (f, NULL, NULL, "restart", "web", NULL), ==, 0);
  g_assert_cmpint (ctl (f, NULL, NULL, "stop", "web", NULL), ==, 0);
  g_assert_cmpint (ctl (f, NULL, NULL, "rename", "web", "www", NULL), ==, 0);

  g_clear_pointer (&out, g_free);
  g_assert_cmpint (ctl (f, &out, &err, "show", "www", NULL), ==, 0);
  g_assert_nonnull (strstr (out, "Stopped"));
  g_assert_nonnull (strstr (out, "RestartGeneration"));

  g_assert_cmpint (ctl (f, NULL, NULL, "delete", "www", NULL), ==, 0);
  g_clear_pointer (&out, g_free);
  g_assert_cmpint (ctl (f, &out, &err, "--json", "list", NULL), ==, 0);
  g_assert_true (json_parser_load_from_data (parser, out, -1, NULL));
  g_assert_cmpuint (json_array_get_length (json_node_get_array (json_parser_get_root (parser))), ==, 0);
}

static void
test_errors (CliFixture *f, gconstpointer data)
{
  g_autofree char *out = NULL, *err = NULL;
  g_autofree char *bad = g_build_filename (mv_test_env_dir (f->env), "bad.json", NULL);

  g_assert_cmpint (ctl (f, &out, &err, "start", "nosuch", NULL), ==, 1);
  g_assert_nonnull (strstr (err, MV_BUS_ERROR_NOT_FOUND));

  g_assert_true (g_file_set_contents (bad,
    "{\"name\":\"x\",\"hypervisor_type\":\"test\",\"kernel\":\"/k\",\"cpu_millicores\":50}", -1, NULL));
  g_clear_pointer (&err, g_free);
  g_assert_cmpint (ctl (f, &out, &err, "create", "-f", bad, NULL), ==, 1);
  g_assert_nonnull (strstr (err, MV_BUS_ERROR_INVALID_ARGUMENT));
  g_assert_nonnull (strstr (err, "cpu_millicores"));

  g_clear_pointer (&err, g_free);
  g_assert_cmpint (ctl (f, &out, &err, "frobnicate", NULL), ==, 2);
}

/* A spec file's cpu_affinity is shown where the spec is, and a bad one
 * is refused with the entry's field named. */
static void
test_cpu_affinity (CliFixture *f, gconstpointer data)
{
  g_autofree char *out = NULL, *err = NULL;
  g_autofree char *file = g_build_filename (mv_test_env_dir (f->env), "pinned.json", NULL);
  g_autoptr (JsonParser) parser = json_parser_new ();
  JsonObject *spec;
  JsonArray *affinity;

  g_assert_true (g_file_set_contents (file,
    "{\"name\":\"pinned\",\"hypervisor_type\":\"test\",\"kernel\":\"/k\","
    "\"cpu_millicores\":2000,\"cpu_affinity\":[{\"vcpu\":1,\"host_cpus\":[0]},"
    "{\"vcpu\":0,\"host_cpus\":[1]}]}", -1, NULL));
  g_assert_cmpint (ctl (f, &out, &err, "create", "-f", file, NULL), ==, 0);

  g_assert_cmpint (ctl (f, &out, &err, "show", "pinned", NULL), ==, 0);
  g_assert_nonnull (strstr (out, "\"cpu_affinity\""));
  g_assert_nonnull (strstr (out, "\"host_cpus\""));
  g_assert_cmpint (ctl (f, &out, &err, "--json", "show", "pinned", NULL), ==, 0);
  g_assert_true (json_parser_load_from_data (parser, out, -1, NULL));
  spec = json_object_get_object_member (json_node_get_object (json_parser_get_root (parser)),
                                        "spec");
  affinity = json_object_get_array_member (spec, "cpu_affinity");
  g_assert_cmpuint (json_array_get_length (affinity), ==, 2);
  g_assert_cmpint (json_object_get_int_member (json_array_get_object_element (affinity, 0),
                                               "vcpu"), ==, 1);
  g_assert_cmpint (json_array_get_int_element (
                     json_object_get_array_member (json_array_get_object_element (affinity, 1),
                                                   "host_cpus"), 0), ==, 1);

  g_assert_true (g_file_set_contents (file,
    "{\"name\":\"unpinnable\",\"hypervisor_type\":\"test\",\"kernel\":\"/k\","
    "\"cpu_millicores\":2000,\"cpu_affinity\":[{\"vcpu\":5,\"host_cpus\":[0]}]}", -1, NULL));
  g_assert_cmpint (ctl (f, &out, &err, "create", "-f", file, NULL), ==, 1);
  g_assert_nonnull (strstr (err, MV_BUS_ERROR_INVALID_ARGUMENT));
  g_assert_nonnull (strstr (err, "cpu_affinity[0].vcpu: 5 is not one of the machine's vCPUs"));
  g_assert_cmpint (ctl (f, &out, &err, "delete", "pinned", NULL), ==, 0);
}

static void
test_resume_of_standby (CliFixture *f, gconstpointer data)
{
  g_autofree char *out = NULL, *err = NULL;

  g_assert_cmpint (ctl (f, &out, &err, "create", "-f", f->spec_file, "--start", NULL), ==, 0);
  g_assert_cmpint (ctl (f, &out, &err, "standby", "web", NULL), ==, 0);

  /* The daemon's error says which verb wakes it. */
  g_assert_cmpint (ctl (f, &out, &err, "resume", "web", NULL), ==, 1);
  g_assert_nonnull (strstr (err, "Machine web is on standby: Start resumes it"));
  g_assert_nonnull (strstr (err, MV_BUS_ERROR_INVALID_STATE));

  g_assert_cmpint (ctl (f, &out, &err, "start", "web", NULL), ==, 0);
  g_assert_cmpint (ctl (f, &out, &err, "show", "web", NULL), ==, 0);
  g_assert_nonnull (strstr (out, "Running"));
  g_assert_cmpint (ctl (f, &out, &err, "delete", "--force", "web", NULL), ==, 0);
}

static void
test_console (CliFixture *f, gconstpointer data)
{
  g_autofree char *out = NULL, *err = NULL;

  g_assert_cmpint (ctl (f, &out, &err, "create", "-f", f->spec_file, NULL), ==, 0);

  /* Never booted: no console to attach to, and it says why. */
  g_assert_cmpint (ctl (f, &out, &err, "console", "web", NULL), ==, 1);
  g_assert_cmpstr (out, ==, "");
  g_assert_nonnull (strstr (err, "only a running or paused guest has a console"));

  /* The test runtime's guests have none (integration-guests attaches to
   * real ones). */
  g_assert_cmpint (ctl (f, &out, &err, "start", "web", NULL), ==, 0);
  g_assert_cmpint (ctl (f, &out, &err, "console", "web", NULL), ==, 1);
  g_assert_nonnull (strstr (err, "have no console to attach to"));
  g_assert_cmpint (ctl (f, &out, &err, "delete", "--force", "web", NULL), ==, 0);

  /* libsoup is loaded only for a console over the network (the dynamic
   * loader lists what it opens): here one on a loopback port nothing
   * serves. */
  g_setenv ("LD_DEBUG", "files", TRUE);
  g_assert_cmpint (ctl (f, &out, &err, "list", NULL), ==, 0);
  g_assert_nonnull (strstr (err, "file=libsystemd.so.0"));
  g_assert_null (strstr (err, "libsoup"));
  g_assert_cmpint (ctl (f, &out, &err, "console", "--remote", "ws://127.0.0.1:9/console", "token",
                        NULL), !=, 0);
  g_assert_nonnull (strstr (err, "file=libsoup-3.0.so.0"));
  g_unsetenv ("LD_DEBUG");
}

static void
test_show_invalid_record (CliFixture *f, gconstpointer data)
{
  g_autofree char *out = NULL, *err = NULL;

  /* By its ID: the record itself, where it is and why it is refused. */
  g_assert_cmpint (ctl (f, &out, &err, "show", BROKEN_RECORD, NULL), ==, 1);
  g_assert_nonnull (strstr (err, "The record of machine " BROKEN_RECORD " is invalid"));
  g_assert_nonnull (strstr (err, "/machines/" BROKEN_RECORD "/config.json: "));
  g_assert_null (strstr (err, MV_BUS_ERROR_NOT_FOUND));
  /* ...with the reason the daemon gives, not just the path. */
  const char *reason = strstr (err, "config.json: ");
  g_assert_cmpuint (strlen (reason + strlen ("config.json: ")), >, 2);

  /* By a name, which a broken record cannot tell: not found, but it may be. */
  g_assert_cmpint (ctl (f, &out, &err, "show", "lost", NULL), ==, 1);
  g_assert_nonnull (strstr (err, MV_BUS_ERROR_NOT_FOUND));
  g_assert_nonnull (strstr (err, "1 invalid record at start; lost may be it"));
  g_assert_nonnull (strstr (err, "/machines/" BROKEN_RECORD "/config.json: "));
}

static void
test_list_filters (CliFixture *f, gconstpointer data)
{
  g_autofree char *out = NULL, *err = NULL;
  g_autofree char *db = g_build_filename (mv_test_env_dir (f->env), "db.json", NULL);

  g_assert_true (g_file_set_contents (db,
    "{\"name\":\"db\",\"hypervisor_type\":\"test\",\"kernel\":\"/k\","
    "\"labels\":{\"tier\":\"back\",\"role\":\"primary\"}}", -1, NULL));
  g_assert_cmpint (ctl (f, &out, &err, "create", "-f", f->spec_file, NULL), ==, 0);
  g_assert_cmpint (ctl (f, &out, &err, "create", "-f", db, NULL), ==, 0);

  /* Names alone, one a line, for scripts and completion. */
  g_assert_cmpint (ctl (f, &out, &err, "list", "--names", NULL), ==, 0);
  g_assert_cmpstr (out, ==, "db\nweb\n");

  g_assert_cmpint (ctl (f, &out, &err, "list", "--names", "--label", "tier=front", NULL), ==, 0);
  g_assert_cmpstr (out, ==, "web\n");
  g_assert_cmpint (ctl (f, &out, &err, "list", "--names", "--label", "tier", NULL), ==, 0);
  g_assert_cmpstr (out, ==, "db\nweb\n");
  g_assert_cmpint (ctl (f, &out, &err, "list", "--names", "--label", "tier",
                        "--label", "role=primary", NULL), ==, 0);
  g_assert_cmpstr (out, ==, "db\n");
  g_assert_cmpint (ctl (f, &out, &err, "list", "--names", "--label", "tier=front",
                        "--label", "role", NULL), ==, 0);
  g_assert_cmpstr (out, ==, "");

  /* The table and JSON are filtered the same way. */
  g_assert_cmpint (ctl (f, &out, &err, "list", "--label", "role", NULL), ==, 0);
  g_assert_nonnull (strstr (out, "db"));
  g_assert_null (strstr (out, "web"));
  g_assert_cmpint (ctl (f, &out, &err, "--json", "list", "--label", "tier=front", NULL), ==, 0);
  g_assert_nonnull (strstr (out, "\"web\""));
  g_assert_null (strstr (out, "\"db\""));

  g_assert_cmpint (ctl (f, &out, &err, "list", "--label", "=front", NULL), ==, 2);
  g_assert_cmpint (ctl (f, &out, &err, "show", "--label", "tier", "web", NULL), ==, 2);
  g_assert_cmpint (ctl (f, &out, &err, "--json", "list", "--names", NULL), ==, 2);
}

/* volume create, list and rm; a volume a machine's spec mounts is kept. */
static void
test_volumes (CliFixture *f, gconstpointer data)
{
  g_autofree char *out = NULL, *err = NULL;
  g_autofree char *spec = g_build_filename (mv_test_env_dir (f->env), "mounting.json", NULL);

  g_assert_cmpint (ctl (f, &out, &err, "volume", "create", "data", "32M", NULL), ==, 0);
  g_assert_cmpint (ctl (f, &out, &err, "volume", "create", "cache", "16777216", NULL), ==, 0);
  g_assert_cmpint (ctl (f, &out, &err, "volume", "create", "data", "32M", NULL), ==, 1);
  g_assert_nonnull (strstr (err, "data"));
  g_assert_cmpint (ctl (f, &out, &err, "volume", "create", "big", "lots", NULL), ==, 2);
  g_assert_cmpint (ctl (f, &out, &err, "volume", "list", "--names", NULL), ==, 0);
  g_assert_cmpstr (out, ==, "cache\ndata\n");
  g_assert_cmpint (ctl (f, &out, &err, "volume", "list", NULL), ==, 0);
  g_assert_nonnull (strstr (out, "32M"));

  g_assert_true (g_file_set_contents (spec,
    "{\"name\":\"m\",\"hypervisor_type\":\"test\",\"kernel\":\"/k\","
    "\"mounts\":[{\"type\":\"volume\",\"source\":\"data\",\"target\":\"/data\"}]}", -1, NULL));
  g_assert_cmpint (ctl (f, &out, &err, "create", "-f", spec, NULL), ==, 0);
  g_assert_cmpint (ctl (f, &out, &err, "volume", "rm", "data", NULL), ==, 1);
  g_assert_nonnull (strstr (err, "mounted by machine m"));
  g_assert_cmpint (ctl (f, &out, &err, "delete", "m", NULL), ==, 0);
  g_assert_cmpint (ctl (f, &out, &err, "volume", "rm", "data", NULL), ==, 0);
  g_assert_cmpint (ctl (f, &out, &err, "volume", "rm", "data", NULL), ==, 1);
  g_assert_cmpint (ctl (f, &out, &err, "volume", "list", "--names", NULL), ==, 0);
  g_assert_cmpstr (out, ==, "cache\n");
}

/* The machine ID that `show --json NAME` gives. */
static char *
shown_id (CliFixture *f, const char *name)
{
  g_autofree char *out = NULL, *err = NULL;
  g_autoptr (JsonParser) parser = json_parser_new ();

  g_assert_cmpint (ctl (f, &out, &err, "--json", "show", name, NULL), ==, 0);
  g_assert_true (json_parser_load_from_data (parser, out, -1, NULL));
  return g_strdup (json_object_get_string_member (json_node_get_object (
                     json_parser_get_root (parser)), "id"));
}

/* snapshot create, list, show, fork, restore and rm, fork of a machine,
 * and --set refused before the daemon is asked. */
static void
test_snapshots (CliFixture *f, gconstpointer data)
{
  g_autofree char *out = NULL, *err = NULL, *unnamed = NULL, *web_id = NULL, *copy_id = NULL;
  g_autoptr (JsonParser) parser = json_parser_new ();
  JsonArray *list;
  JsonObject *object;

  g_assert_cmpint (ctl (f, &out, &err, "create", "-f", f->spec_file, NULL), ==, 0);

  /* Stopped, a machine that boots no image has nothing to snapshot. */
  g_assert_cmpint (ctl (f, &out, &err, "snapshot", "create", "web", "cold", NULL), ==, 1);
  g_assert_nonnull (strstr (err, "Machine web boots no image, so it has no disk of its own to "
                                 "snapshot while it is stopped"));
  g_assert_nonnull (strstr (err, MV_BUS_ERROR_INVALID_STATE));

  /* Running, it gives memory snapshots; the name printed is the one taken. */
  g_assert_cmpint (ctl (f, &out, &err, "start", "web", NULL), ==, 0);
  g_assert_cmpint (ctl (f, &out, &err, "snapshot", "create", "web", "before", NULL), ==, 0);
  g_assert_cmpstr (out, ==, "before\n");
  g_assert_cmpint (ctl (f, &out, &err, "snapshot", "create", "web", NULL), ==, 0);
  g_assert_true (g_str_has_prefix (out, "web-2"));
  unnamed = g_strndup (out, strcspn (out, "\n"));
  g_assert_cmpint (ctl (f, &out, &err, "snapshot", "create", "web", "before", NULL), ==, 1);
  g_assert_nonnull (strstr (err, "a snapshot called before exists already"));
  g_assert_nonnull (strstr (err, MV_BUS_ERROR_ALREADY_EXISTS));

  /* Listed by name, as a table, names alone or JSON, and by machine. */
  g_assert_cmpint (ctl (f, &out, &err, "snapshot", "list", NULL), ==, 0);
  g_assert_true (g_str_has_prefix (out, "NAME"));
  g_assert_nonnull (strstr (out, "KIND"));
  g_assert_nonnull (strstr (out, "CREATED"));
  g_assert_nonnull (strstr (out, "before"));
  g_assert_nonnull (strstr (out, "memory"));
  g_assert_nonnull (strstr (out, " test "));
  g_assert_cmpint (ctl (f, &out, &err, "snapshot", "list", "--names", NULL), ==, 0);
  g_autofree char *both = g_strdup_printf ("before\n%s\n", unnamed);
  g_assert_cmpstr (out, ==, both);
  g_assert_cmpint (ctl (f, &out, &err, "snapshot", "list", "--names", "web", NULL), ==, 0);
  g_assert_cmpstr (out, ==, both);
  web_id = shown_id (f, "web");
  g_assert_cmpint (ctl (f, &out, &err, "snapshot", "list", "--names", web_id, NULL), ==, 0);
  g_assert_cmpstr (out, ==, both);
  g_assert_cmpint (ctl (f, &out, &err, "snapshot", "list", "--names", "other", NULL), ==, 0);
  g_assert_cmpstr (out, ==, "");
  g_assert_cmpint (ctl (f, &out, &err, "--json", "snapshot", "list", NULL), ==, 0);
  g_assert_true (json_parser_load_from_data (parser, out, -1, NULL));
  list = json_node_get_array (json_parser_get_root (parser));
  g_assert_cmpuint (json_array_get_length (list), ==, 2);
  object = json_array_get_object_element (list, 0);
  g_assert_cmpstr (json_object_get_string_member (object, "name"), ==, "before");
  g_assert_cmpstr (json_object_get_string_member (object, "kind"), ==, "memory");
  g_assert_cmpstr (json_object_get_string_member (object, "machine_id"), ==, web_id);
  g_assert_cmpstr (json_object_get_string_member (object, "machine_name"), ==, "web");
  g_assert_true (g_str_has_prefix (json_object_get_string_member (object, "path"),
                                   MV_SNAPSHOT_PREFIX "/"));
  g_assert_false (json_object_has_member (object, "spec"));

  /* Every property, the spec last. */
  g_assert_cmpint (ctl (f, &out, &err, "snapshot", "show", "before", NULL), ==, 0);
  g_assert_nonnull (strstr (out, "Kind:"));
  g_assert_nonnull (strstr (out, "MachineName:"));
  g_assert_nonnull (strstr (out, "HypervisorType:"));
  g_assert_nonnull (strstr (out, "SizeBytes:"));
  g_assert_nonnull (strstr (out, "CreatedAt:"));
  g_assert_nonnull (strstr (out, "Spec:\n"));
  g_assert_null (strstr (strstr (out, "Spec:\n"), "Kind:"));
  g_assert_nonnull (strstr (strstr (out, "Spec:\n"), "\"cpu_millicores\" : 2000"));
  g_assert_cmpint (ctl (f, &out, &err, "--json", "snapshot", "show", "before", NULL), ==, 0);
  g_assert_true (json_parser_load_from_data (parser, out, -1, NULL));
  object = json_node_get_object (json_parser_get_root (parser));
  g_assert_cmpstr (json_object_get_string_member (object, "kind"), ==, "memory");
  g_assert_cmpstr (json_object_get_string_member (
                     json_object_get_object_member (object, "spec"), "name"), ==, "web");
  g_assert_cmpint (ctl (f, &out, &err, "snapshot", "show", "nosuch", NULL), ==, 1);
  g_assert_nonnull (strstr (err, MV_BUS_ERROR_NOT_FOUND));

  /* rm is delete. */
  g_assert_cmpint (ctl (f, &out, &err, "snapshot", "rm", unnamed, NULL), ==, 0);
  g_assert_cmpint (ctl (f, &out, &err, "snapshot", "list", "--names", NULL), ==, 0);
  g_assert_cmpstr (out, ==, "before\n");

  /* A malformed --set is refused before any call: the snapshot named is
   * never looked up, and no machine is made. */
  g_assert_cmpint (ctl (f, &out, &err, "snapshot", "fork", "nosuch", "copy", "--set",
                        "memory_bytes", NULL), ==, 2);
  g_assert_nonnull (strstr (err, "invalid --set 'memory_bytes': expected FIELD=JSON"));
  g_assert_null (strstr (err, MV_BUS_ERROR_NOT_FOUND));
  g_assert_cmpint (ctl (f, &out, &err, "snapshot", "fork", "before", "copy", "--set",
                        "labels={\"fork\":", NULL), ==, 2);
  g_assert_nonnull (strstr (err, "the value is not JSON"));
  g_assert_cmpint (ctl (f, &out, &err, "fork", "nosuch", "copy", "--set", "hostname=copy",
                        NULL), ==, 2);
  g_assert_nonnull (strstr (err, "a string is quoted: --set 'hostname=\"copy\"'"));
  g_assert_null (strstr (err, MV_BUS_ERROR_NOT_FOUND));
  g_assert_cmpint (ctl (f, &out, &err, "snapshot", "list", "--set", "a=1", NULL), ==, 2);
  g_assert_cmpint (ctl (f, &out, &err, "list", "--names", NULL), ==, 0);
  g_assert_cmpstr (out, ==, "web\n");

  /* A fork of the snapshot runs, a machine of its own with the fields set. */
  g_assert_cmpint (ctl (f, &out, &err, "snapshot", "fork", "before", "copy", "--set",
                        "labels={\"fork\":\"yes\"}", NULL), ==, 0);
  g_assert_nonnull (strstr (out, "Created machine copy ("));
  g_assert_cmpint (ctl (f, &out, &err, "--json", "show", "copy", NULL), ==, 0);
  g_assert_true (json_parser_load_from_data (parser, out, -1, NULL));
  object = json_node_get_object (json_parser_get_root (parser));
  g_assert_cmpstr (json_object_get_string_member (object, "state"), ==, "Running");
  g_assert_cmpstr (json_object_get_string_member (
                     json_object_get_object_member (object, "labels"), "fork"), ==, "yes");
  copy_id = g_strdup (json_object_get_string_member (object, "id"));
  g_assert_cmpstr (copy_id, !=, web_id);

  /* A fork of the machine: it runs on, the copy runs, no snapshot is kept. */
  g_assert_cmpint (ctl (f, &out, &err, "--json", "fork", "web", "copy2", NULL), ==, 0);
  g_assert_true (json_parser_load_from_data (parser, out, -1, NULL));
  object = json_node_get_object (json_parser_get_root (parser));
  g_assert_cmpstr (json_object_get_string_member (object, "name"), ==, "copy2");
  g_assert_cmpint (ctl (f, &out, &err, "--json", "show", "copy2", NULL), ==, 0);
  g_assert_nonnull (strstr (out, "\"state\" : \"Running\""));
  g_assert_cmpint (ctl (f, &out, &err, "--json", "show", "web", NULL), ==, 0);
  g_assert_nonnull (strstr (out, "\"state\" : \"Running\""));
  g_assert_cmpint (ctl (f, &out, &err, "snapshot", "list", "--names", NULL), ==, 0);
  g_assert_cmpstr (out, ==, "before\n");
  g_assert_cmpint (ctl (f, &out, &err, "fork", "web", "copy", NULL), ==, 1);
  g_assert_nonnull (strstr (err, MV_BUS_ERROR_ALREADY_EXISTS));

  /* Restore wants the machine stopped, and gives it back running. */
  g_assert_cmpint (ctl (f, &out, &err, "snapshot", "restore", "before", NULL), ==, 1);
  g_assert_nonnull (strstr (err, MV_BUS_ERROR_INVALID_STATE));
  g_assert_cmpint (ctl (f, &out, &err, "stop", "web", NULL), ==, 0);
  g_assert_cmpint (ctl (f, &out, &err, "snapshot", "restore", "before", NULL), ==, 0);
  g_assert_cmpstr (out, ==, "");
  g_assert_cmpint (ctl (f, &out, &err, "--json", "show", "web", NULL), ==, 0);
  g_assert_nonnull (strstr (out, "\"state\" : \"Running\""));

  /* Deleted once. */
  g_assert_cmpint (ctl (f, &out, &err, "snapshot", "delete", "before", NULL), ==, 0);
  g_assert_cmpint (ctl (f, &out, &err, "snapshot", "rm", "before", NULL), ==, 1);
  g_assert_nonnull (strstr (err, MV_BUS_ERROR_NOT_FOUND));
  g_assert_cmpint (ctl (f, &out, &err, "snapshot", "list", "--names", NULL), ==, 0);
  g_assert_cmpstr (out, ==, "");

  g_assert_cmpint (ctl (f, &out, &err, "snapshot", "frobnicate", NULL), ==, 2);
  g_assert_cmpint (ctl (f, &out, &err, "snapshot", "show", "--names", "x", NULL), ==, 2);
  for (const char *const *name = (const char *const[]) { "copy", "copy2", "web", NULL };
       *name; name++)
    g_assert_cmpint (ctl (f, &out, &err, "delete", "--force", *name, NULL), ==, 0);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add ("/cli/lifecycle", CliFixture, NULL, cli_fixture_setup, test_lifecycle_through_cli, cli_fixture_teardown);
  g_test_add ("/cli/errors", CliFixture, NULL, cli_fixture_setup, test_errors, cli_fixture_teardown);
  g_test_add ("/cli/volumes", CliFixture, NULL, cli_fixture_setup, test_volumes, cli_fixture_teardown);
  g_test_add ("/cli/show-update-keeps-secrets", CliFixture, NULL, cli_fixture_setup,
              test_show_update_keeps_secrets, cli_fixture_teardown);
  g_test_add ("/cli/cpu-affinity", CliFixture, NULL, cli_fixture_setup, test_cpu_affinity,
              cli_fixture_teardown);
  g_test_add ("/cli/resume-of-standby", CliFixture, NULL, cli_fixture_setup, test_resume_of_standby, cli_fixture_teardown);
  g_test_add ("/cli/console", CliFixture, NULL, cli_fixture_setup, test_console, cli_fixture_teardown);
  g_test_add ("/cli/show-invalid-record", CliFixture, BROKEN_RECORD, cli_fixture_setup, test_show_invalid_record, cli_fixture_teardown);
  g_test_add ("/cli/list-filters", CliFixture, NULL, cli_fixture_setup, test_list_filters, cli_fixture_teardown);
  g_test_add ("/cli/snapshots", CliFixture, NULL, cli_fixture_setup, test_snapshots, cli_fixture_teardown);
  return g_test_run ();
}
