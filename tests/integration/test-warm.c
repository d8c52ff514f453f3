/* Warm starts through the daemon, on the test runtime: a machine's first
 * start boots it and builds the warm template of its shape in the
 * background; the next machine of that shape starts from the template
 * (StartedFrom "warm"), one of another shape or with start_mode "cold"
 * boots, and start_mode "warm" without a template fails saying why. A
 * crash at every point of a build and of a warm start leaves no half
 * template, nothing staged and no frozen guest that is not a machine's. */
#include "bus-client.h"
#include "names.h"
#include "reconcile/reconciler.h"

#include <glib/gstdio.h>
#include <json-glib/json-glib.h>

#define SPEC(name, extra) "{\"name\":\"" name "\",\"hypervisor_type\":\"test\"," \
  "\"kernel\":\"/boot/vmlinuz\",\"memory_bytes\":268435456" extra "}"

static char *
warm_dir (Fixture *f)
{
  return g_build_filename (mv_test_env_state_dir (f->env), MV_WARM_DIR, NULL);
}

static gboolean
has_templates (Client *client, gpointer data)
{
  Fixture *f = data;

  return count_warm_templates (mv_test_env_state_dir (f->env), TRUE) > 0;
}

static void
wait_for_template (Fixture *f)
{
  if (!client_wait (f->client, has_templates, f, 20000))
    g_error ("no warm template was built");
}

static void
assert_started_from (Fixture *f, const char *path, const char *expected)
{
  g_autofree char *from = client_get_string (f->client, path, "StartedFrom");

  g_assert_cmpstr (from, ==, expected);
}

/* The frozen guests the machines hold: none outside standby. */
static guint
count_saved_states (Fixture *f)
{
  g_autofree char *machines = g_build_filename (mv_test_env_state_dir (f->env), MV_MACHINES_DIR,
                                                NULL);
  g_autoptr (GDir) d = g_dir_open (machines, 0, NULL);
  const char *name;
  guint n = 0;

  while (d && (name = g_dir_read_name (d)))
    {
      g_autoptr (GDir) inner = NULL;
      g_autofree char *dir = g_build_filename (machines, name, NULL);
      const char *entry;

      inner = g_dir_open (dir, 0, NULL);
      while (inner && (entry = g_dir_read_name (inner)))
        n += g_str_has_prefix (entry, "saved");
    }
  return n;
}

static void
test_warm_starts (Fixture *f, gconstpointer data)
{
  g_autofree char *first = NULL, *second = NULL, *cold = NULL, *other = NULL;
  g_autofree char *err = NULL, *message = NULL, *state = NULL;

  g_assert_cmpuint (count_warm_templates (mv_test_env_state_dir (f->env), FALSE), ==, 0);
  first = client_create (f->client, SPEC ("first", ""), MV_CREATE_START, NULL, NULL);
  g_assert_nonnull (first);
  assert_started_from (f, first, "cold");
  wait_for_template (f);
  g_assert_cmpuint (count_warm_templates (mv_test_env_state_dir (f->env), FALSE), ==, 1);

  /* Its shape, its template. */
  second = client_create (f->client, SPEC ("second", ",\"cmd\":[\"/bin/app\"]"),
                          MV_CREATE_START, &err, &message);
  if (!second)
    g_error ("%s: %s", err, message);
  assert_started_from (f, second, "warm");
  g_assert_cmpuint (count_saved_states (f), ==, 0);

  /* Asked to boot, it boots. */
  cold = client_create (f->client, SPEC ("third", ",\"start_mode\":\"cold\""), MV_CREATE_START,
                        NULL, NULL);
  g_assert_nonnull (cold);
  assert_started_from (f, cold, "cold");

  /* Another shape has no template; asked to start warm, it says so. */
  other = client_create (f->client, "{\"name\":\"other\",\"hypervisor_type\":\"test\","
                         "\"kernel\":\"/boot/vmlinuz\",\"memory_bytes\":536870912,"
                         "\"start_mode\":\"warm\"}", 0, NULL, NULL);
  g_assert_nonnull (other);
  g_free (client_machine_call (f->client, other, "Start", &message));
  g_assert_nonnull (message);
  g_assert_nonnull (strstr (message, "start_mode: warm, and no warm template matches"));
  state = client_get_string (f->client, other, "State");
  g_assert_cmpstr (state, !=, "Running");
  assert_started_from (f, other, "");

  /* The daemon remembers how each came up. */
  client_free (f->client);
  mv_test_env_stop_daemon (f->env, SIGTERM);
  mv_test_env_start_daemon (f->env, NULL);
  f->client = client_new (f->env);
  assert_started_from (f, second, "warm");
  assert_started_from (f, first, "cold");

  /* Woken from standby, it came from its own frozen guest; once it has
   * run, a start boots it: its disk is its own now. */
  client_call_ok (f->client, second, "Standby");
  client_call_ok (f->client, second, "Start");
  assert_started_from (f, second, "saved-state");
  client_call_ok (f->client, second, "Stop");
  client_call_ok (f->client, second, "Start");
  assert_started_from (f, second, "cold");
  g_assert_cmpuint (count_warm_templates (mv_test_env_state_dir (f->env), FALSE), ==, 1);
}

/* A template of a hypervisor version the host no longer has is removed
 * when the daemon starts. */
static void
test_hypervisor_gone (Fixture *f, gconstpointer data)
{
  g_autofree char *dir = warm_dir (f);
  g_autofree char *first = client_create (f->client, SPEC ("first", ""), MV_CREATE_START, NULL,
                                          NULL);
  g_autoptr (GDir) d = NULL;
  g_autofree char *record = NULL, *text = NULL;
  g_autoptr (GString) edited = NULL;
  const char *name;

  g_assert_nonnull (first);
  wait_for_template (f);
  client_free (f->client);
  mv_test_env_stop_daemon (f->env, SIGTERM);
  d = g_dir_open (dir, 0, NULL);
  while ((name = g_dir_read_name (d)))
    if (name[0] != '.')
      record = g_build_filename (dir, name, "snapshot.json", NULL);
  g_assert_true (g_file_get_contents (record, &text, NULL, NULL));
  edited = g_string_new (text);
  g_assert_cmpuint (g_string_replace (edited, "\"hypervisor_version\" : \"1.0.0\"",
                                      "\"hypervisor_version\" : \"0.9.0\"", 1), ==, 1);
  g_assert_true (g_file_set_contents (record, edited->str, -1, NULL));
  mv_test_env_start_daemon (f->env, NULL);
  f->client = client_new (f->env);
  g_assert_cmpuint (count_warm_templates (mv_test_env_state_dir (f->env), FALSE), ==, 0);
}

/* BuildWarmImage: its object path, or NULL with the error's name. */
static char *
build_warm (Fixture *f, const char *spec, char **err)
{
  g_autofree char *message = NULL;
  g_autoptr (sd_bus_message) reply = client_call (f->client, MV_MANAGER_PATH, MV_MANAGER_IFACE,
                                                  "BuildWarmImage", err, &message, "s", spec);
  const char *path = NULL;

  if (!reply)
    {
      g_test_message ("BuildWarmImage: %s", message);
      return NULL;
    }
  g_assert_cmpint (sd_bus_message_read (reply, "o", &path), >, 0);
  return g_strdup (path);
}

/* A template built ahead is an object of its own, announced; the first
 * start of its shape starts from it; asked again, the same one answers;
 * a bad spec builds nothing. */
static void
test_build_ahead (Fixture *f, gconstpointer data)
{
  g_autofree char *path = NULL, *again = NULL, *err = NULL, *key = NULL, *machine = NULL;
  g_autofree char *record = NULL, *spec = NULL, *image = NULL;
  sd_bus_error error = SD_BUS_ERROR_NULL;
  guint64 memory = 0;

  path = build_warm (f, SPEC ("ahead", ",\"cmd\":[\"/bin/app\"]"), &err);
  g_assert_cmpstr (err, ==, NULL);
  g_assert_true (g_str_has_prefix (path, MV_WARM_IMAGE_PREFIX "/"));
  g_assert_cmpuint (count_warm_templates (mv_test_env_state_dir (f->env), FALSE), ==, 1);
  client_settle (f->client, 200);
  g_assert_cmpuint (client_count_announced (f->client, "InterfacesAdded", path), ==, 1);
  g_assert_cmpint (sd_bus_get_property_string (f->client->bus, MV_BUS_NAME, path,
                                               MV_WARM_IMAGE_IFACE, "Key", &error, &key), >=, 0);
  g_assert_cmpint (sd_bus_get_property_trivial (f->client->bus, MV_BUS_NAME, path,
                                                MV_WARM_IMAGE_IFACE, "MemoryBytes", &error, 't',
                                                &memory), >=, 0);
  g_assert_cmpuint (memory, ==, 268435456);
  g_assert_cmpint (sd_bus_get_property_string (f->client->bus, MV_BUS_NAME, path,
                                               MV_WARM_IMAGE_IFACE, "Spec", &error, &spec), >=, 0);
  /* Nothing of the machine it was asked for. */
  g_assert_null (strstr (spec, "/bin/app"));
  g_assert_null (strstr (spec, "ahead"));
  record = g_build_filename (mv_test_env_state_dir (f->env), MV_WARM_DIR, key, NULL);
  g_assert_true (g_file_test (record, G_FILE_TEST_IS_DIR));

  again = build_warm (f, SPEC ("ahead-again", ""), &err);
  g_assert_cmpstr (again, ==, path);
  g_assert_cmpuint (count_warm_templates (mv_test_env_state_dir (f->env), FALSE), ==, 1);

  machine = client_create (f->client, SPEC ("user", ""), MV_CREATE_START, NULL, NULL);
  g_assert_nonnull (machine);
  assert_started_from (f, machine, "warm");

  g_assert_null (build_warm (f, SPEC ("bad", ",\"start_mode\":\"hot\""), &err));
  g_assert_cmpstr (err, ==, MV_BUS_ERROR_INVALID_ARGUMENT);
  g_assert_cmpuint (count_warm_templates (mv_test_env_state_dir (f->env), FALSE), ==, 1);

  /* It stays over a restart. */
  client_free (f->client);
  mv_test_env_stop_daemon (f->env, SIGTERM);
  mv_test_env_start_daemon (f->env, NULL);
  f->client = client_new (f->env);
  g_assert_cmpint (sd_bus_get_property_string (f->client->bus, MV_BUS_NAME, path,
                                               MV_WARM_IMAGE_IFACE, "ImageDigest", &error,
                                               &image), >=, 0);
  g_assert_cmpstr (image, ==, "");
}

/* The host keeps at most MV_WARM_TEMPLATES_MAX templates: one more
 * asked for is refused, and a first start past it boots and builds none. */
static void
test_templates_bounded (Fixture *f, gconstpointer data)
{
  g_autofree char *err = NULL, *over = NULL, *machine = NULL;

  for (guint i = 0; i < MV_WARM_TEMPLATES_MAX; i++)
    {
      g_autofree char *spec = g_strdup_printf ("{\"name\":\"shape-%u\",\"hypervisor_type\":\"test\","
                                               "\"kernel\":\"/boot/vmlinuz\",\"memory_bytes\":%u}",
                                               i, (64 + i) << 21);
      g_autofree char *path = build_warm (f, spec, &err);

      g_assert_cmpstr (err, ==, NULL);
      g_assert_nonnull (path);
    }
  g_assert_cmpuint (count_warm_templates (mv_test_env_state_dir (f->env), FALSE), ==, MV_WARM_TEMPLATES_MAX);
  over = build_warm (f, SPEC ("one-more", ""), &err);
  g_assert_null (over);
  g_assert_cmpstr (err, ==, MV_BUS_ERROR_RESOURCE_EXHAUSTED);

  machine = client_create (f->client, SPEC ("first-of-its-shape", ""), MV_CREATE_START, NULL,
                           NULL);
  g_assert_nonnull (machine);
  assert_started_from (f, machine, "cold");
  client_settle (f->client, 500);
  g_assert_cmpuint (count_warm_templates (mv_test_env_state_dir (f->env), FALSE), ==, MV_WARM_TEMPLATES_MAX);
}

/* 2 CPUs × 1.5 = 3 vCPUs; (2 GiB − 512 MiB) × 1 = 1.5 GiB. */
static const char small_host[] =
  "[resources]\n"
  "host-cpus=2\n"
  "host-memory-bytes=2147483648\n"
  "reserved-memory-bytes=536870912\n"
  "cpu-overcommit=1.5\n"
  "memory-overcommit=1.0\n";

#define GIB_SPEC(name) "{\"name\":\"" name "\",\"hypervisor_type\":\"test\"," \
  "\"kernel\":\"/boot/vmlinuz\",\"memory_bytes\":1073741824}"

/* A template being built runs a guest: it is admitted as a start is, and
 * holds its size while it boots. On a host with room for 1.5 GiB, one
 * 1 GiB machine running leaves no room for its 1 GiB template, asked for
 * or built behind its start. */
static void
test_builds_admitted (Fixture *f, gconstpointer data)
{
  g_autofree char *machine = NULL, *err = NULL, *path = NULL;

  machine = client_create (f->client, GIB_SPEC ("big"), MV_CREATE_START, NULL, NULL);
  g_assert_nonnull (machine);
  assert_started_from (f, machine, "cold");
  client_settle (f->client, 500);
  g_assert_cmpuint (count_warm_templates (mv_test_env_state_dir (f->env), FALSE), ==, 0);

  path = build_warm (f, GIB_SPEC ("big-template"), &err);
  g_assert_null (path);
  g_assert_cmpstr (err, ==, MV_BUS_ERROR_RESOURCE_EXHAUSTED);
  g_assert_cmpuint (count_warm_templates (mv_test_env_state_dir (f->env), FALSE), ==, 0);

  /* With the machine stopped there is room. */
  client_call_ok (f->client, machine, "Stop");
  g_clear_pointer (&err, g_free);
  path = build_warm (f, GIB_SPEC ("big-template"), &err);
  g_assert_cmpstr (err, ==, NULL);
  g_assert_cmpuint (count_warm_templates (mv_test_env_state_dir (f->env), FALSE), ==, 1);
}

/* microvmctl with @args (NULL-ended): its exit status, its output in
 * @out. */
static int
ctl (Fixture *f, char **out, ...)
{
  g_autoptr (GPtrArray) argv = g_ptr_array_new_with_free_func (g_free);
  g_autofree char *err = NULL;
  const char *arg;
  va_list ap;
  int status;

  g_ptr_array_add (argv, g_build_filename (g_getenv ("MICROVMD_BUILD_DIR"), "src", "cli",
                                           "microvmctl", NULL));
  va_start (ap, out);
  while ((arg = va_arg (ap, const char *)))
    g_ptr_array_add (argv, g_strdup (arg));
  va_end (ap);
  g_ptr_array_add (argv, NULL);
  g_clear_pointer (out, g_free);
  status = mv_test_env_run (f->env, (const char *const *) argv->pdata, out, &err);
  g_test_message ("microvmctl: %d %s %s", status, *out, err);
  return status;
}

/* The object paths of @path's UsedBy, joined by spaces. */
static char *
used_by (Fixture *f, const char *path)
{
  g_autoptr (sd_bus_message) reply = NULL;
  sd_bus_error error = SD_BUS_ERROR_NULL;
  g_autoptr (GString) joined = g_string_new ("");
  const char *p;

  g_assert_cmpint (sd_bus_get_property (f->client->bus, MV_BUS_NAME, path, MV_WARM_IMAGE_IFACE,
                                        "UsedBy", &error, &reply, "ao"), >=, 0);
  g_assert_cmpint (sd_bus_message_enter_container (reply, 'a', "o"), >, 0);
  while (sd_bus_message_read (reply, "o", &p) > 0)
    g_string_append_printf (joined, "%s%s", joined->len ? " " : "", p);
  return g_string_free (g_steal_pointer (&joined), FALSE);
}

/* A template's UsedBy lists the machines started from it, announced as
 * they start and go, over a restart too; microvmctl warm lists the
 * templates with them, and builds one. */
static void
test_used_by (Fixture *f, gconstpointer data)
{
  g_autofree char *first = NULL, *second = NULL, *third = NULL, *path = NULL, *users = NULL;
  g_autofree char *out = NULL, *key = NULL, *spec_file = NULL, *err = NULL;
  sd_bus_error error = SD_BUS_ERROR_NULL;

  first = client_create (f->client, SPEC ("first", ""), MV_CREATE_START, NULL, NULL);
  g_assert_nonnull (first);
  wait_for_template (f);
  /* BuildWarmImage answers with the template there is. */
  path = build_warm (f, SPEC ("any", ""), &err);
  g_assert_nonnull (path);
  users = used_by (f, path);
  g_assert_cmpstr (users, ==, "");

  second = client_create (f->client, SPEC ("second", ""), MV_CREATE_START, NULL, NULL);
  third = client_create (f->client, SPEC ("third", ""), MV_CREATE_START, NULL, NULL);
  assert_started_from (f, second, "warm");
  assert_started_from (f, third, "warm");
  client_settle (f->client, 300);
  g_assert_cmpuint (client_count_signals (f->client, path, "PropertiesChanged:UsedBy"), ==, 2);
  g_free (users);
  users = used_by (f, path);
  {
    /* Sorted by path. */
    gboolean in_order = strcmp (second, third) < 0;
    g_autofree char *want = g_strjoin (" ", in_order ? second : third, in_order ? third : second,
                                       NULL);
    g_assert_cmpstr (users, ==, want);
  }

  /* microvmctl warm list shows it with them. */
  g_assert_cmpint (sd_bus_get_property_string (f->client->bus, MV_BUS_NAME, path,
                                               MV_WARM_IMAGE_IFACE, "Key", &error, &key), >=, 0);
  g_assert_cmpint (ctl (f, &out, "warm", "list", NULL), ==, 0);
  {
    g_autofree char *short_key = g_strndup (key, 12);
    g_assert_nonnull (strstr (out, short_key));
    g_assert_true (strstr (out, "second,third") || strstr (out, "third,second"));
    g_assert_nonnull (strstr (out, "test 1.0.0"));
  }
  g_assert_cmpint (ctl (f, &out, "--json", "warm", "list", NULL), ==, 0);
  {
    g_autoptr (JsonNode) node = json_from_string (out, NULL);
    JsonObject *template;
    JsonArray *names;

    g_assert_nonnull (node);
    g_assert_cmpuint (json_array_get_length (json_node_get_array (node)), ==, 1);
    template = json_array_get_object_element (json_node_get_array (node), 0);
    g_assert_cmpstr (json_object_get_string_member (template, "key"), ==, key);
    g_assert_cmpint (json_object_get_int_member (template, "memory_bytes"), ==, 268435456);
    names = json_object_get_array_member (template, "used_by");
    g_assert_cmpuint (json_array_get_length (names), ==, 2);
  }

  /* The daemon remembers which started from it. */
  client_free (f->client);
  mv_test_env_stop_daemon (f->env, SIGTERM);
  mv_test_env_start_daemon (f->env, NULL);
  f->client = client_new (f->env);
  g_free (users);
  users = used_by (f, path);
  g_assert_nonnull (strstr (users, second));
  g_assert_nonnull (strstr (users, third));

  /* One goes, and it is used by one fewer. */
  {
    g_autoptr (sd_bus_message) r = client_call (f->client, second, MV_MACHINE_IFACE, "Delete",
                                                NULL, NULL, "b", 1);
    g_assert_nonnull (r);
  }
  client_settle (f->client, 300);
  g_assert_cmpuint (client_count_signals (f->client, path, "PropertiesChanged:UsedBy"), ==, 1);
  g_free (users);
  users = used_by (f, path);
  g_assert_cmpstr (users, ==, third);

  /* microvmctl warm build: the key of a template of another shape. */
  spec_file = g_build_filename (mv_test_env_dir (f->env), "bigger.json", NULL);
  g_assert_true (g_file_set_contents (spec_file, "{\"name\":\"bigger\",\"hypervisor_type\":"
                                      "\"test\",\"kernel\":\"/boot/vmlinuz\","
                                      "\"memory_bytes\":536870912}", -1, NULL));
  g_assert_cmpint (ctl (f, &out, "warm", "build", spec_file, NULL), ==, 0);
  g_strstrip (out);
  g_assert_cmpuint (strlen (out), ==, 32);
  g_assert_cmpstr (out, !=, key);
  g_assert_cmpuint (count_warm_templates (mv_test_env_state_dir (f->env), FALSE), ==, 2);
  g_assert_cmpint (ctl (f, &out, "warm", "frobnicate", NULL), !=, 0);
}

static void
test_bad_start_mode (Fixture *f, gconstpointer data)
{
  g_autofree char *err = NULL, *message = NULL;
  g_autofree char *path = client_create (f->client, SPEC ("bad", ",\"start_mode\":\"hot\""), 0,
                                         &err, &message);

  g_assert_null (path);
  g_assert_cmpstr (err, ==, MV_BUS_ERROR_INVALID_ARGUMENT);
  g_assert_nonnull (strstr (message, "start_mode: \"hot\" is not one of auto, cold, warm"));
  g_assert_cmpuint (count_machine_dirs (mv_test_env_state_dir (f->env)), ==, 0);
}

static void
teardown (Fixture *f, gconstpointer data)
{
  client_delete_all (f->client);
  fixture_teardown (f, data);
}

/* ---- a crash at every point ---- */

typedef struct {
  const char *fault;
  gboolean    build;      /* in the build of the template; else in a warm start */
} SweepCase;

static const SweepCase sweep_cases[] = {
  { "warm-build:booted", TRUE },
  { "warm-build:saved", TRUE },
  { "warm-build:committed", TRUE },
  { "start:warm-found", FALSE },
  { "start:warm-put-back", FALSE },
};

static gboolean
settled (Client *client, gpointer data)
{
  g_autofree char *phase = client_get_string (client, data, "Phase");

  return *phase == '\0';
}

static void
run_sweep_case (Fixture *f, const SweepCase *c, guint n)
{
  g_autofree char *name = g_strdup_printf ("crash-%u", n);
  g_autofree char *spec = g_strdup_printf ("{\"name\":\"%s\",\"hypervisor_type\":\"test\","
                                           "\"kernel\":\"/boot/vmlinuz\","
                                           "\"memory_bytes\":%u}", name, (n + 5) << 26);
  g_autofree char *warm_spec = g_strdup_printf ("{\"name\":\"%s-warm\",\"hypervisor_type\":"
                                                "\"test\",\"kernel\":\"/boot/vmlinuz\","
                                                "\"memory_bytes\":%u}", name, (n + 5) << 26);
  g_autofree char *machine = NULL, *warm = NULL;
  guint templates = count_warm_templates (mv_test_env_state_dir (f->env), FALSE);

  g_test_message ("fault point %s", c->fault);
  if (c->build)
    {
      g_setenv ("MICROVMD_FAULT_POINT", c->fault, TRUE);
      mv_test_env_stop_daemon (f->env, SIGTERM);
      mv_test_env_start_daemon (f->env, NULL);
      g_unsetenv ("MICROVMD_FAULT_POINT");
      /* The first start boots, and the build behind it ends the daemon. */
      machine = client_create (f->client, spec, MV_CREATE_START, NULL, NULL);
      mv_test_env_wait_for_name (f->env, MV_BUS_NAME, FALSE, 20000);
      mv_test_env_stop_daemon (f->env, SIGKILL);
      mv_test_env_start_daemon (f->env, NULL);
      /* Nothing staged is left; a template is whole or absent. */
      g_assert_cmpuint (count_warm_templates (mv_test_env_state_dir (f->env), FALSE), <=, templates + 1);
      if (g_str_equal (c->fault, "warm-build:committed"))
        g_assert_cmpuint (count_warm_templates (mv_test_env_state_dir (f->env), FALSE), ==, templates + 1);
      else
        g_assert_cmpuint (count_warm_templates (mv_test_env_state_dir (f->env), FALSE), ==, templates);
    }
  else
    {
      machine = client_create (f->client, spec, MV_CREATE_START, NULL, NULL);
      /* Its template, built behind its start. */
      for (guint i = 0; i < 400 && count_warm_templates (mv_test_env_state_dir (f->env), TRUE) == templates; i++)
        client_settle (f->client, 50);
      g_assert_cmpuint (count_warm_templates (mv_test_env_state_dir (f->env), TRUE), ==, templates + 1);
      g_setenv ("MICROVMD_FAULT_POINT", c->fault, TRUE);
      mv_test_env_stop_daemon (f->env, SIGTERM);
      mv_test_env_start_daemon (f->env, NULL);
      g_unsetenv ("MICROVMD_FAULT_POINT");
      warm = client_create (f->client, warm_spec, 0, NULL, NULL);
      g_assert_nonnull (warm);
      g_free (client_machine_call (f->client, warm, "Start", NULL));
      mv_test_env_wait_for_name (f->env, MV_BUS_NAME, FALSE, 20000);
      mv_test_env_stop_daemon (f->env, SIGKILL);
      mv_test_env_start_daemon (f->env, NULL);
      if (!client_wait (f->client, settled, warm, 10000))
        g_error ("%s: the machine did not settle", c->fault);
      /* The template's files put back for it went with the start. */
      g_assert_cmpuint (count_saved_states (f), ==, 0);
    }
  client_delete_all (f->client);
  g_assert_cmpuint (count_machine_dirs (mv_test_env_state_dir (f->env)), ==, 0);
}

static void
test_crash_sweep (Fixture *f, gconstpointer data)
{
  for (guint i = 0; i < G_N_ELEMENTS (sweep_cases); i++)
    run_sweep_case (f, &sweep_cases[i], i);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
#define ADD(name, fn) g_test_add ("/warm/" name, Fixture, NULL, fixture_setup, fn, teardown)
  ADD ("starts", test_warm_starts);
  ADD ("bad-start-mode", test_bad_start_mode);
  ADD ("build-ahead", test_build_ahead);
  ADD ("templates-bounded", test_templates_bounded);
  g_test_add ("/warm/builds-admitted", Fixture, small_host, fixture_setup, test_builds_admitted,
              teardown);
  ADD ("hypervisor-gone", test_hypervisor_gone);
  ADD ("crash-sweep", test_crash_sweep);
  ADD ("used-by", test_used_by);
  return g_test_run ();
}
