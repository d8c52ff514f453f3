/* Images on the bus: Manager.PullImage against a real registry on
 * loopback (and a slowed proxy in front of it), the Image objects it
 * makes, PullProgress, cancel by disconnecting, Image.Delete,
 * PruneImages keeping what a machine is pinned to, polkit for an
 * unprivileged caller, and microvmctl pull / image. */
#include "bus-client.h"
#include "names.h"
#include "test-registry.h"

#include <gio/gio.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <string.h>

#define SLOW_RATE   (4 * 1024 * 1024)
#define BIG_FILLER  (20 * 1024 * 1024)

static char *tmp;
static MvTestRegistry *registry;
static char *small_ref;      /* 127.0.0.1:PORT/test/busybox:1 */
static char *big_slow_ref;   /* 127.0.0.1:SLOWPORT/test/big:1 */
static char *other_layout_ref;  /* oci:DIR:1, another image */
static char *tampered_ref;   /* oci:DIR:1 with a changed layer */

typedef struct {
  guint64 done, total;
} Progress;

static int
on_progress (sd_bus_message *m, void *userdata, sd_bus_error *error)
{
  GArray *seen = userdata;
  const char *ref = NULL;
  Progress p = { 0 };

  if (sd_bus_message_read (m, "stt", &ref, &p.done, &p.total) >= 0)
    g_array_append_val (seen, p);
  return 0;
}

static void
watch_progress (Client *client, GArray *seen)
{
  g_assert_cmpint (sd_bus_match_signal (client->bus, NULL, MV_BUS_NAME, MV_MANAGER_PATH, MV_MANAGER_IFACE,
                                        "PullProgress", on_progress, seen), >=, 0);
}

static char *
pull (Client *client, const char *ref, const char *policy, char **error_name, char **error_message)
{
  g_autoptr (sd_bus_message) reply = client_call (client, MV_MANAGER_PATH, MV_MANAGER_IFACE, "PullImage",
                                                  error_name, error_message, "ss", ref, policy);
  const char *path = NULL;

  if (reply == NULL)
    return NULL;
  g_assert_cmpint (sd_bus_message_read (reply, "o", &path), >=, 0);
  return g_strdup (path);
}

static char *
pull_ok (Client *client, const char *ref)
{
  g_autofree char *name = NULL, *message = NULL;
  char *path = pull (client, ref, "", &name, &message);

  if (path == NULL)
    g_error ("PullImage %s: %s: %s", ref, name, message);
  return path;
}

static char *
image_string (Client *client, const char *path, const char *prop)
{
  sd_bus_error error = SD_BUS_ERROR_NULL;
  char *value = NULL;

  if (sd_bus_get_property_string (client->bus, MV_BUS_NAME, path, MV_IMAGE_IFACE, prop, &error, &value) < 0)
    g_error ("Get %s on %s: %s", prop, path, error.message);
  return value;
}

static guint64
image_u64 (Client *client, const char *path, const char *prop)
{
  sd_bus_error error = SD_BUS_ERROR_NULL;
  uint64_t value = 0;

  if (sd_bus_get_property_trivial (client->bus, MV_BUS_NAME, path, MV_IMAGE_IFACE, prop, &error, 't',
                                   &value) < 0)
    g_error ("Get %s on %s: %s", prop, path, error.message);
  return value;
}

static char **
image_strv (Client *client, const char *path, const char *prop, const char *type)
{
  sd_bus_error error = SD_BUS_ERROR_NULL;
  g_autoptr (sd_bus_message) reply = NULL;
  char **value = NULL;

  if (sd_bus_get_property (client->bus, MV_BUS_NAME, path, MV_IMAGE_IFACE, prop, &error, &reply, type) < 0)
    g_error ("Get %s on %s: %s", prop, path, error.message);
  g_assert_cmpint (sd_bus_message_read_strv (reply, &value), >=, 0);
  return value ? value : g_new0 (char *, 1);
}

/* Entries of the image cache: images and staging directories. */
static guint
cache_entries (Fixture *f)
{
  g_autofree char *dir = g_build_filename (mv_test_env_state_dir (f->env), "images", NULL);
  g_autoptr (GDir) d = g_dir_open (dir, 0, NULL);
  const char *name;
  guint n = 0;

  while (d && (name = g_dir_read_name (d)) != NULL)
    if (!g_str_equal (name, ".policy.json"))
      n++;
  return n;
}

static char *
image_dir (Fixture *f, Client *client, const char *path)
{
  g_autofree char *id = image_string (client, path, "Id");

  return g_build_filename (mv_test_env_state_dir (f->env), "images", id, NULL);
}

static void
assert_error (const char *got_name, const char *got_message, const char *want)
{
  if (g_strcmp0 (got_name, want) != 0)
    g_error ("expected %s, got %s: %s", want, got_name ? got_name : "success",
             got_message ? got_message : "");
}

/* Whether the daemon has a file whose path holds @needle mapped. */
static gboolean
daemon_maps (Fixture *f, const char *needle)
{
  g_autofree char *path = g_strdup_printf ("/proc/%d/maps", (int) mv_test_env_daemon_pid (f->env));
  g_autofree char *maps = NULL;

  g_assert_true (g_file_get_contents (path, &maps, NULL, NULL));
  return strstr (maps, needle) != NULL;
}

/* ---- the tests ---- */

static void
test_pull_and_delete (Fixture *f, gconstpointer data)
{
  g_autoptr (GArray) seen = g_array_new (FALSE, FALSE, sizeof (Progress));
  g_autofree char *path = NULL;
  g_autofree char *digest = NULL;
  g_autofree char *id = NULL;
  g_autofree char *dir = NULL;
  g_autofree char *rootfs = NULL;
  g_auto (GStrv) refs = NULL;
  g_auto (GStrv) used_by = NULL;
  g_autofree char *name = NULL, *message = NULL;
  g_autoptr (sd_bus_message) reply = NULL;
  Progress last;

  /* libarchive is opened for the first layer, not with the daemon. */
  g_assert_false (daemon_maps (f, "/libarchive.so"));
  watch_progress (f->client, seen);
  path = pull_ok (f->client, big_slow_ref);
  client_settle (f->client, 300);
  g_assert_true (daemon_maps (f, "/libarchive.so"));

  /* The object, announced. */
  g_assert_cmpuint (client_count_signals (f->client, MV_MANAGER_PATH, "InterfacesAdded"), ==, 1);
  digest = image_string (f->client, path, "Digest");
  id = image_string (f->client, path, "Id");
  g_assert_true (g_str_has_prefix (digest, "sha256:"));
  g_assert_cmpstr (digest + strlen ("sha256:"), ==, id);
  refs = image_strv (f->client, path, "References", "as");
  g_assert_true (g_strv_contains ((const char * const *) refs, big_slow_ref));
  used_by = image_strv (f->client, path, "UsedBy", "ao");
  g_assert_cmpuint (g_strv_length (used_by), ==, 0);
  g_assert_cmpuint (image_u64 (f->client, path, "SizeBytes"), >, BIG_FILLER);
  g_assert_cmpuint (image_u64 (f->client, path, "PulledAt"), >, 0);
  g_assert_cmpuint (image_u64 (f->client, path, "CreatedAt"), >, 0);
  dir = image_dir (f, f->client, path);
  rootfs = g_build_filename (dir, "rootfs.ext4", NULL);
  g_assert_true (g_file_test (rootfs, G_FILE_TEST_IS_REGULAR));

  /* Progress: more than one report for a pull that lasts seconds, never
   * past the total, never going back, ending complete. */
  g_assert_cmpuint (seen->len, >=, 2);
  for (guint i = 0; i < seen->len; i++)
    {
      Progress *p = &g_array_index (seen, Progress, i);

      g_assert_cmpuint (p->done, <=, p->total);
      if (i > 0)
        g_assert_cmpuint (p->done, >=, g_array_index (seen, Progress, i - 1).done);
    }
  last = g_array_index (seen, Progress, seen->len - 1);
  g_assert_cmpuint (last.total, >, BIG_FILLER);
  g_assert_cmpuint (last.done, ==, last.total);

  /* A second pull of a cached reference is the same object, not a new one. */
  g_clear_pointer (&path, g_free);
  path = pull_ok (f->client, big_slow_ref);
  client_settle (f->client, 100);
  g_assert_cmpuint (client_count_signals (f->client, MV_MANAGER_PATH, "InterfacesAdded"), ==, 1);

  /* Delete removes the object and the files. */
  reply = client_call (f->client, path, MV_IMAGE_IFACE, "Delete", &name, &message, NULL);
  g_assert_nonnull (reply);
  client_settle (f->client, 200);
  g_assert_cmpuint (client_count_signals (f->client, MV_MANAGER_PATH, "InterfacesRemoved"), ==, 1);
  g_assert_false (g_file_test (dir, G_FILE_TEST_EXISTS));
  g_assert_cmpuint (cache_entries (f), ==, 0);
  g_clear_pointer (&reply, sd_bus_message_unref);
  reply = client_call (f->client, path, MV_IMAGE_IFACE, "Delete", &name, &message, NULL);
  g_assert_null (reply);
  g_assert_nonnull (name);
}

static void
test_errors (Fixture *f, gconstpointer data)
{
  g_autofree char *down = g_strdup_printf ("127.0.0.1:%u/test/busybox:1", mv_test_free_port ());
  struct {
    const char *ref, *policy, *error, *mentions;
  } cases[] = {
    { small_ref, "never", MV_BUS_ERROR_NOT_FOUND, "never" },
    { down, "", MV_BUS_ERROR_UNAVAILABLE, NULL },
    { tampered_ref, "always", MV_BUS_ERROR_FAILED, NULL },
    { small_ref, "sometimes", MV_BUS_ERROR_INVALID_ARGUMENT, "policy" },
    { "busybox:1", "", MV_BUS_ERROR_INVALID_ARGUMENT, NULL },
  };

  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *name = NULL, *message = NULL;
      g_autofree char *path = pull (f->client, cases[i].ref, cases[i].policy, &name, &message);

      g_assert_null (path);
      assert_error (name, message, cases[i].error);
      if (cases[i].mentions && !strstr (message, cases[i].mentions))
        g_error ("%s: the message does not name %s: %s", cases[i].ref, cases[i].mentions, message);
      g_assert_cmpuint (cache_entries (f), ==, 0);
    }
  client_settle (f->client, 100);
  g_assert_cmpuint (client_count_signals (f->client, MV_MANAGER_PATH, "InterfacesAdded"), ==, 0);
}

static gboolean
progress_started (Client *client, gpointer data)
{
  GArray *seen = data;

  for (guint i = 0; i < seen->len; i++)
    if (g_array_index (seen, Progress, i).done > 0)
      return TRUE;
  return FALSE;
}

static void
test_cancel_by_disconnect (Fixture *f, gconstpointer data)
{
  g_autoptr (GArray) seen = g_array_new (FALSE, FALSE, sizeof (Progress));
  sd_bus *caller = mv_test_env_open_bus (f->env);
  g_autoptr (sd_bus_message) m = NULL;
  gint64 deadline;

  watch_progress (f->client, seen);
  g_assert_cmpint (sd_bus_message_new_method_call (caller, &m, MV_BUS_NAME, MV_MANAGER_PATH, MV_MANAGER_IFACE,
                                                   "PullImage"), >=, 0);
  g_assert_cmpint (sd_bus_message_append (m, "ss", big_slow_ref, ""), >=, 0);
  g_assert_cmpint (sd_bus_call_async (caller, NULL, m, NULL, NULL, 120 * G_USEC_PER_SEC), >=, 0);
  g_assert_cmpint (sd_bus_flush (caller), >=, 0);

  /* Under way: bytes are coming in and the staging directory is there. */
  g_assert_true (client_wait (f->client, progress_started, seen, 20000));
  g_assert_cmpuint (cache_entries (f), ==, 1);

  sd_bus_flush_close_unref (caller);

  /* Everything goes, long before the pull could have ended. */
  deadline = g_get_monotonic_time () + 3 * G_USEC_PER_SEC;
  while (cache_entries (f) > 0 && g_get_monotonic_time () < deadline)
    client_settle (f->client, 100);
  g_assert_cmpuint (cache_entries (f), ==, 0);
  client_settle (f->client, 300);
  g_assert_cmpuint (client_count_signals (f->client, MV_MANAGER_PATH, "InterfacesAdded"), ==, 0);

  /* The daemon goes on serving: the caller's departure is handled once,
   * not on every turn of its bus while the pull winds down. */
  {
    g_autoptr (sd_bus_message) call = NULL, reply = NULL;
    sd_bus_error error = SD_BUS_ERROR_NULL;

    g_assert_cmpint (sd_bus_message_new_method_call (f->client->bus, &call, MV_BUS_NAME, MV_MANAGER_PATH,
                                                     "org.freedesktop.DBus.Peer", "Ping"), >=, 0);
    g_assert_cmpint (sd_bus_call (f->client->bus, call, 5 * G_USEC_PER_SEC, &error, &reply), >=, 0);
    sd_bus_error_free (&error);
  }
  g_free (pull_ok (f->client, small_ref));
}

/* Pins the machine @name's spec to @digest in its record while the daemon
 * is stopped: the create path of this version refuses images. */
static void
pin_machine (Fixture *f, const char *machine_path, const char *image_ref, const char *digest)
{
  g_autofree char *id = client_get_string (f->client, machine_path, "Id");
  g_autofree char *config = g_build_filename (mv_test_env_state_dir (f->env), "machines", id, "config.json",
                                              NULL);
  g_autoptr (JsonParser) parser = json_parser_new ();
  g_autoptr (JsonGenerator) gen = json_generator_new ();
  g_autoptr (GError) error = NULL;
  JsonObject *spec;

  mv_test_env_stop_daemon (f->env, SIGTERM);
  g_assert_true (json_parser_load_from_file (parser, config, &error));
  spec = json_object_get_object_member (json_node_get_object (json_parser_get_root (parser)), "spec");
  json_object_set_string_member (spec, "image", image_ref);
  json_object_set_string_member (spec, "image_digest", digest);
  json_generator_set_root (gen, json_parser_get_root (parser));
  g_assert_true (json_generator_to_file (gen, config, &error));
  mv_test_env_start_daemon (f->env, NULL);
}

static char **
prune (Client *client)
{
  g_autofree char *name = NULL, *message = NULL;
  g_autoptr (sd_bus_message) reply = client_call (client, MV_MANAGER_PATH, MV_MANAGER_IFACE, "PruneImages",
                                                  &name, &message, NULL);
  char **paths = NULL;

  if (reply == NULL)
    g_error ("PruneImages: %s: %s", name, message);
  g_assert_cmpint (sd_bus_message_read_strv (reply, &paths), >=, 0);
  return paths ? paths : g_new0 (char *, 1);
}

static void
test_prune_keeps_used (Fixture *f, gconstpointer data)
{
  g_autofree char *pinned = pull_ok (f->client, small_ref);
  g_autofree char *other = pull_ok (f->client, other_layout_ref);
  g_autofree char *digest = image_string (f->client, pinned, "Digest");
  g_autofree char *machine = client_create_ok (f->client,
    "{\"name\":\"pinned\",\"hypervisor_type\":\"test\",\"kernel\":\"/k\"}");
  g_autofree char *name = NULL, *message = NULL;
  g_auto (GStrv) used_by = NULL;
  g_auto (GStrv) removed = NULL;
  g_autoptr (sd_bus_message) reply = NULL;

  g_assert_cmpstr (pinned, !=, other);
  pin_machine (f, machine, small_ref, digest);
  client_free (f->client);
  f->client = client_new (f->env);

  /* Both images are there after the restart; one is used. */
  used_by = image_strv (f->client, pinned, "UsedBy", "ao");
  g_assert_cmpuint (g_strv_length (used_by), ==, 1);
  g_assert_cmpstr (used_by[0], ==, machine);
  g_clear_pointer (&used_by, g_strfreev);
  used_by = image_strv (f->client, other, "UsedBy", "ao");
  g_assert_cmpuint (g_strv_length (used_by), ==, 0);

  /* A used image is not deleted, and the message names the machine. */
  reply = client_call (f->client, pinned, MV_IMAGE_IFACE, "Delete", &name, &message, NULL);
  g_assert_null (reply);
  assert_error (name, message, MV_BUS_ERROR_INVALID_STATE);
  g_assert_nonnull (strstr (message, "pinned"));

  /* Prune removes the other one only. */
  removed = prune (f->client);
  g_assert_cmpuint (g_strv_length (removed), ==, 1);
  g_assert_cmpstr (removed[0], ==, other);
  client_settle (f->client, 200);
  g_assert_cmpuint (client_count_signals (f->client, MV_MANAGER_PATH, "InterfacesRemoved"), ==, 1);
  g_assert_cmpuint (cache_entries (f), ==, 1);
  {
    g_autofree char *still = image_string (f->client, pinned, "Digest");

    g_assert_cmpstr (still, ==, digest);
  }

  /* The machine goes: UsedBy says so, and the image can be pruned. */
  client_clear_signals (f->client);
  g_clear_pointer (&reply, sd_bus_message_unref);
  reply = client_call (f->client, machine, MV_MACHINE_IFACE, "Delete", NULL, NULL, "b", 0);
  g_assert_nonnull (reply);
  client_settle (f->client, 500);
  g_assert_cmpuint (client_count_signals (f->client, pinned, "PropertiesChanged:UsedBy"), >=, 1);
  g_clear_pointer (&used_by, g_strfreev);
  used_by = image_strv (f->client, pinned, "UsedBy", "ao");
  g_assert_cmpuint (g_strv_length (used_by), ==, 0);
  g_clear_pointer (&removed, g_strfreev);
  removed = prune (f->client);
  g_assert_cmpuint (g_strv_length (removed), ==, 1);
  g_assert_cmpstr (removed[0], ==, pinned);
  g_assert_cmpuint (cache_entries (f), ==, 0);
}

static int
call_as_nobody (Fixture *f, const char *path, const char *method, const char *arg1, const char *arg2,
                char **output)
{
  g_autofree char *full = g_strdup_printf ("%s.%s", g_str_equal (path, MV_MANAGER_PATH) ? MV_MANAGER_IFACE
                                           : MV_IMAGE_IFACE, method);
  const char *argv[] = { "gdbus", "call", "--system", "--dest", MV_BUS_NAME, "--object-path", path,
                         "--method", full, arg1, arg2, NULL };
  g_autofree char *out = NULL, *err = NULL;
  int status = mv_test_env_run_as_nobody (f->env, argv, &out, &err);

  *output = g_strconcat (out ? out : "", err ? err : "", NULL);
  return status;
}

static void
assert_refused (Fixture *f, const char *path, const char *method, const char *arg1, const char *arg2)
{
  g_autofree char *output = NULL;
  int status = call_as_nobody (f, path, method, arg1, arg2, &output);

  g_assert_cmpint (status, !=, 0);
  if (!strstr (output, "org.freedesktop.DBus.Error.AccessDenied") &&
      !strstr (output, "org.freedesktop.DBus.Error.InteractiveAuthorizationRequired"))
    g_error ("%s %s: expected a refusal, got: %s", path, method, output);
}

static void
test_unprivileged (Fixture *f, gconstpointer data)
{
  g_autofree char *path = pull_ok (f->client, small_ref);
  g_autofree char *output = NULL;

  assert_refused (f, MV_MANAGER_PATH, "PullImage", other_layout_ref, "");
  assert_refused (f, MV_MANAGER_PATH, "PruneImages", NULL, NULL);
  assert_refused (f, path, "Delete", NULL, NULL);
  g_assert_cmpuint (cache_entries (f), ==, 1);
  /* Reading is open to everyone. */
  g_assert_cmpint (call_as_nobody (f, MV_MANAGER_PATH, "PullImage", small_ref, "sometimes", &output), !=, 0);
  g_clear_pointer (&output, g_free);
  {
    const char *argv[] = { "busctl", "--system", "get-property", MV_BUS_NAME, path, MV_IMAGE_IFACE, "Digest",
                           NULL };
    g_autofree char *out = NULL;

    g_assert_cmpint (mv_test_env_run_as_nobody (f->env, argv, &out, NULL), ==, 0);
    g_assert_nonnull (strstr (out, "sha256:"));
  }
}

static int
microvmctl (Fixture *f, char **out, ...)
{
  g_autoptr (GPtrArray) argv = g_ptr_array_new ();
  g_autofree char *exe = g_build_filename (g_getenv ("MICROVMD_BUILD_DIR"), "src", "cli", "microvmctl", NULL);
  const char *arg;
  va_list ap;

  g_ptr_array_add (argv, exe);
  va_start (ap, out);
  while ((arg = va_arg (ap, const char *)) != NULL)
    g_ptr_array_add (argv, (gpointer) arg);
  va_end (ap);
  g_ptr_array_add (argv, NULL);
  return mv_test_env_run (f->env, (const char *const *) argv->pdata, out, NULL);
}

static void
test_cli (Fixture *f, gconstpointer data)
{
  g_autofree char *out = NULL;
  g_autofree char *path = NULL;
  g_autofree char *digest = NULL;

  g_assert_cmpint (microvmctl (f, &out, "pull", small_ref, NULL), ==, 0);
  g_assert_nonnull (strstr (out, "sha256:"));
  g_clear_pointer (&out, g_free);
  g_assert_cmpint (microvmctl (f, &out, "pull", "--policy", "never", other_layout_ref, NULL), !=, 0);
  g_assert_cmpuint (cache_entries (f), ==, 1);
  g_clear_pointer (&out, g_free);

  path = pull_ok (f->client, small_ref);
  digest = image_string (f->client, path, "Digest");
  g_assert_cmpint (microvmctl (f, &out, "image", "list", NULL), ==, 0);
  g_assert_nonnull (strstr (out, "DIGEST"));
  g_assert_nonnull (strstr (out, "REFERENCES"));
  g_assert_nonnull (strstr (out, small_ref));
  {
    g_autofree char *short_digest = g_strndup (digest + strlen ("sha256:"), 12);

    g_assert_nonnull (strstr (out, short_digest));
  }
  g_clear_pointer (&out, g_free);

  /* rm by reference; prune of nothing removes nothing. */
  g_assert_cmpint (microvmctl (f, &out, "image", "rm", small_ref, NULL), ==, 0);
  g_assert_cmpuint (cache_entries (f), ==, 0);
  g_clear_pointer (&out, g_free);
  g_assert_cmpint (microvmctl (f, &out, "image", "rm", small_ref, NULL), !=, 0);
  g_clear_pointer (&out, g_free);
  g_assert_cmpint (microvmctl (f, &out, "pull", other_layout_ref, NULL), ==, 0);
  g_clear_pointer (&out, g_free);
  g_assert_cmpint (microvmctl (f, &out, "image", "prune", NULL), ==, 0);
  g_assert_cmpuint (cache_entries (f), ==, 0);
}

int
main (int argc, char **argv)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *small_layout = NULL, *big_layout = NULL, *other_layout = NULL, *tampered = NULL;
  g_autofree char *ref = NULL, *cmd = NULL;
  g_autofree char *blobs = NULL;
  int status;

  g_test_init (&argc, &argv, NULL);
  if (getuid () != 0)
    {
      g_print ("1..0 # SKIP needs root\n");
      return 77;
    }
  tmp = g_dir_make_tmp ("test-images-XXXXXX", &error);
  g_assert_no_error (error);
  registry = mv_test_registry_new (tmp);

  small_layout = g_build_filename (tmp, "small", NULL);
  mv_test_build_busybox_image (small_layout, tmp, 0);
  ref = g_strdup_printf ("oci:%s:1", small_layout);
  small_ref = mv_test_registry_push (registry, ref, "test/busybox:1");

  big_layout = g_build_filename (tmp, "big", NULL);
  mv_test_build_busybox_image (big_layout, tmp, BIG_FILLER);
  g_clear_pointer (&ref, g_free);
  ref = g_strdup_printf ("oci:%s:1", big_layout);
  g_free (mv_test_registry_push (registry, ref, "test/big:1"));
  big_slow_ref = g_strdup_printf ("127.0.0.1:%u/test/big:1", mv_test_registry_slow_port (registry, SLOW_RATE));

  other_layout = g_build_filename (tmp, "other", NULL);
  cmd = g_strdup_printf ("cp -a %s %s", small_layout, other_layout);
  mv_test_run_command (cmd);
  g_clear_pointer (&cmd, g_free);
  cmd = g_strdup_printf ("umoci config --image %s:1 --config.env EXTRA=1", other_layout);
  mv_test_run_command (cmd);
  other_layout_ref = g_strdup_printf ("oci:%s:1", other_layout);

  /* The small image with a byte of its layer changed. */
  tampered = g_build_filename (tmp, "tampered", NULL);
  g_clear_pointer (&cmd, g_free);
  cmd = g_strdup_printf ("cp -a %s %s", small_layout, tampered);
  mv_test_run_command (cmd);
  blobs = g_build_filename (tampered, "blobs", "sha256", NULL);
  {
    g_autoptr (GDir) d = g_dir_open (blobs, 0, NULL);
    g_autofree char *largest = NULL;
    goffset size = -1;
    const char *name;
    FILE *fp;

    while ((name = g_dir_read_name (d)) != NULL)
      {
        g_autofree char *p = g_build_filename (blobs, name, NULL);
        GStatBuf st;

        if (g_stat (p, &st) == 0 && st.st_size > size)
          {
            size = st.st_size;
            g_free (largest);
            largest = g_steal_pointer (&p);
          }
      }
    fp = fopen (largest, "r+b");
    g_assert_nonnull (fp);
    fseek (fp, 100, SEEK_SET);
    fputc ('!', fp);
    fclose (fp);
  }
  tampered_ref = g_strdup_printf ("oci:%s:1", tampered);

  g_test_add ("/images/pull-and-delete", Fixture, NULL, fixture_setup, test_pull_and_delete, fixture_teardown);
  g_test_add ("/images/errors", Fixture, NULL, fixture_setup, test_errors, fixture_teardown);
  g_test_add ("/images/cancel-by-disconnect", Fixture, NULL, fixture_setup, test_cancel_by_disconnect,
              fixture_teardown);
  g_test_add ("/images/prune-keeps-used", Fixture, NULL, fixture_setup, test_prune_keeps_used, fixture_teardown);
  g_test_add ("/images/unprivileged", Fixture, NULL, fixture_setup, test_unprivileged, fixture_teardown);
  g_test_add ("/images/cli", Fixture, NULL, fixture_setup, test_cli, fixture_teardown);
  status = g_test_run ();

  g_clear_pointer (&registry, mv_test_registry_free);
  {
    g_autofree char *rm = g_strdup_printf ("rm -rf %s", tmp);
    mv_test_run_command (rm);
  }
  return status;
}
