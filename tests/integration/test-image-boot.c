/* Machines booted from images through the daemon: a create pins the digest
 * its reference resolves to and records nothing when the image cannot be
 * had; the pull policies; QEMU guests under TCG boot the image with
 * microvmd's initramfs, run its entrypoint as its user with its env, keep
 * what they write on their overlay disk from one start to the next and
 * see it grow; the test VMMs are given the image, the overlay and the
 * rate limits on the wire, and start warm from a template of the image
 * onto their own overlay disks, each told its own identity and entropy. The image is the test root file system as an
 * OCI layout (tests/guest/build-rootfs.sh), copied and changed with umoci
 * where a test needs another. */
#include "bus-client.h"
#include "names.h"
#include "test-registry.h"

#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <signal.h>
#include <unistd.h>

static char *agent_kernel;
static char *agent_initramfs;
static char *layout;
/* A copy of microvmd's kernel, configured in [kernels] as "named". */
static char *named_kernel;

typedef struct {
  const char *type;
  char       *config;
} ImageCase;

static const char lifecycle_config[] =
  "[lifecycle]\n"
  "boot-timeout-seconds=25\n"
  "stop-timeout-seconds=20\n"
  "resync-seconds=1\n";

static void
image_fixture_setup (Fixture *f, gconstpointer data)
{
  const ImageCase *c = data;

  fixture_setup (f, c->config);
}

static void
image_fixture_teardown (Fixture *f, gconstpointer data)
{
  client_delete_all (f->client);
  fixture_teardown (f, data);
}

static void
run (const char *command)
{
  g_autofree char *out = NULL, *err = NULL;
  int status = 0;

  const char *argv[] = { "/bin/sh", "-c", command, NULL };

  g_test_message ("$ %s", command);
  g_assert_true (g_spawn_sync (NULL, (char **) argv, NULL, G_SPAWN_DEFAULT, NULL, NULL, &out, &err,
                               &status, NULL));
  if (!g_spawn_check_wait_status (status, NULL))
    g_error ("%s failed: %s%s", command, out, err);
}

/* A copy of the test image's layout in the test's directory. */
static char *
copy_layout (Fixture *f, const char *name)
{
  char *copy = g_build_filename (mv_test_env_dir (f->env), name, NULL);
  g_autofree char *cmd = g_strdup_printf ("cp -a %s %s", layout, copy);

  run (cmd);
  return copy;
}

/* The digest tag "1" of @dir's index names. */
static char *
layout_digest (const char *dir)
{
  g_autofree char *index = g_build_filename (dir, "index.json", NULL);
  g_autoptr (JsonParser) parser = json_parser_new ();
  JsonObject *root;
  JsonArray *manifests;

  g_assert_true (json_parser_load_from_file (parser, index, NULL));
  root = json_node_get_object (json_parser_get_root (parser));
  manifests = json_object_get_array_member (root, "manifests");
  for (guint i = 0; i < json_array_get_length (manifests); i++)
    {
      JsonObject *m = json_array_get_object_element (manifests, i);
      JsonObject *a = json_object_get_object_member (m, "annotations");

      if (a && g_strcmp0 (json_object_get_string_member_with_default (
                            a, "org.opencontainers.image.ref.name", ""), "1") == 0)
        return g_strdup (json_object_get_string_member (m, "digest"));
    }
  g_assert_not_reached ();
}

static char *
image_spec (gconstpointer data, const char *name, const char *dir, const char *extra)
{
  const ImageCase *c = data;

  return g_strdup_printf ("{\"name\":\"%s\",\"hypervisor_type\":\"%s\","
                          "\"memory_bytes\":268435456,\"image\":\"oci:%s:1\"%s%s}",
                          name, c->type, dir, extra ? "," : "", extra ? extra : "");
}

static char *
create_image (Fixture *f, gconstpointer data, const char *name, const char *dir,
              const char *extra)
{
  g_autofree char *spec = image_spec (data, name, dir, extra);

  return client_create_ok (f->client, spec);
}

static char *
get_spec (Fixture *f, const char *path)
{
  g_autoptr (sd_bus_message) r = client_call (f->client, path, MV_MACHINE_IFACE, "GetSpec",
                                              NULL, NULL, NULL);
  const char *json = NULL;

  g_assert_nonnull (r);
  g_assert_cmpint (sd_bus_message_read (r, "s", &json), >, 0);
  return g_strdup (json);
}

static char *
spec_member (Fixture *f, const char *path, const char *member)
{
  g_autofree char *json = get_spec (f, path);
  g_autoptr (JsonNode) node = json_from_string (json, NULL);

  g_assert_nonnull (node);
  return g_strdup (json_object_get_string_member_with_default (json_node_get_object (node),
                                                               member, ""));
}

/* Replaces the spec's disk_bytes through Update; the error name or NULL. */
static char *
update_disk_bytes (Fixture *f, const char *path, guint64 bytes, char **message)
{
  g_autofree char *json = get_spec (f, path);
  g_autoptr (JsonNode) node = json_from_string (json, NULL);
  g_autofree char *updated = NULL;
  char *name = NULL;

  json_object_set_int_member (json_node_get_object (node), "disk_bytes", (gint64) bytes);
  updated = json_to_string (node, FALSE);
  g_autoptr (sd_bus_message) r = client_call (f->client, path, MV_MACHINE_IFACE, "Update", &name,
                                              message, "s", updated);
  return name;
}

static guint
count_entries (const char *dir)
{
  g_autoptr (GDir) d = g_dir_open (dir, 0, NULL);
  guint n = 0;

  const char *name;

  /* Not the store's own files (.policy.json). */
  while (d && (name = g_dir_read_name (d)))
    if (name[0] != '.' || g_str_has_prefix (name, ".staging-"))
      {
        g_test_message ("%s: %s", dir, name);
        n++;
      }
  return n;
}

static char *
images_dir (Fixture *f)
{
  return g_build_filename (mv_test_env_state_dir (f->env), "images", NULL);
}

static gboolean
console_has (Client *client, gpointer data)
{
  gpointer *args = data;
  g_autofree char *text = console_text (args[0], args[1]);

  return strstr (text, args[2]) != NULL;
}

static void
assert_console_soon (Fixture *f, const char *path, const char *text)
{
  gpointer args[] = { f, (gpointer) path, (gpointer) text };

  if (!client_wait (f->client, console_has, args, 20000))
    {
      g_autofree char *console = console_text (f, path);

      g_error ("the console never said \"%s\": %s", text, console);
    }
}

/* ---- QEMU ---- */

/* The image's entrypoint and command run as its user, in its working
 * directory, with its environment; the digest it resolved to is pinned. */
static void
test_boots_image (Fixture *f, gconstpointer data)
{
  g_autofree char *path = create_image (f, data, "web", layout, NULL);
  g_autofree char *digest = spec_member (f, path, "image_digest");
  g_autofree char *expected = layout_digest (layout);
  g_autofree char *passwd = NULL;

  g_autofree char *reference = g_strdup_printf ("oci:%s:1", layout);
  g_autofree char *image_property = client_get_string (f->client, path, "Image");
  g_autofree char *digest_property = client_get_string (f->client, path, "ImageDigest");

  g_assert_cmpstr (digest, ==, expected);
  /* Typed properties as well as the spec. */
  g_assert_cmpstr (image_property, ==, reference);
  g_assert_cmpstr (digest_property, ==, expected);
  client_call_ok (f->client, path, "Start");
  assert_console_soon (f, path, "image-says hello uid=1000 cwd=/home/tester");
  /* The root is the image's. */
  passwd = exec_output (f, path, (const char *const[]) { "cat", "/etc/passwd", NULL });
  g_assert_nonnull (strstr (passwd, "tester:x:1000:1000"));
}

/* The spec's cmd, env and user take the place of the image's. */
static void
test_spec_overrides_image (Fixture *f, gconstpointer data)
{
  g_autofree char *path = create_image (f, data, "own", layout,
                                        "\"cmd\":[\"sh\",\"-c\",\"echo own-says $GREETING $EXTRA "
                                        "uid=$(id -u); exec sleep 1000000\"],"
                                        "\"env\":{\"GREETING\":\"bonjour\",\"EXTRA\":\"more\"},"
                                        "\"user\":\"root\"");

  client_call_ok (f->client, path, "Start");
  assert_console_soon (f, path, "own-says bonjour more uid=0");
}

/* What the guest writes survives Stop and Start; a larger disk_bytes is
 * there at the next start, file system and all; a smaller one is
 * refused; the disk goes with the machine. */
static void
test_overlay_disk (Fixture *f, gconstpointer data)
{
  g_autofree char *path = create_image (f, data, "keeper", layout,
                                        "\"disk_bytes\":134217728");
  g_autofree char *id = client_get_string (f->client, path, "Id");
  g_autofree char *overlay = g_build_filename (mv_test_env_state_dir (f->env), "machines", id,
                                               "overlay.ext4", NULL);
  g_autofree char *kept = NULL, *sectors = NULL, *message = NULL, *error = NULL;
  g_autofree char *blocks = NULL;
  GStatBuf st;

  client_call_ok (f->client, path, "Start");
  g_assert_cmpint (g_stat (overlay, &st), ==, 0);
  g_assert_cmpint (st.st_size, ==, 128 << 20);
  /* Sparse: a fresh file system takes a fraction of its size. */
  g_assert_cmpint (st.st_blocks * 512, <, 64 << 20);
  g_free (exec_output (f, path, (const char *const[]) {
    "sh", "-c", "echo kept > /kept && sync", NULL }));
  client_call_ok (f->client, path, "Stop");
  client_call_ok (f->client, path, "Start");
  kept = exec_output (f, path, (const char *const[]) { "cat", "/kept", NULL });
  g_assert_cmpstr (kept, ==, "kept\n");
  client_call_ok (f->client, path, "Stop");

  error = update_disk_bytes (f, path, 64 << 20, &message);
  g_assert_cmpstr (error, ==, MV_BUS_ERROR_INVALID_ARGUMENT);
  g_test_message ("Update: %s", message);
  g_assert_nonnull (strstr (message, "disk_bytes: 67108864 (64 MiB) is smaller than the "
                                     "machine's overlay disk of 134217728 (128 MiB)"));
  g_clear_pointer (&error, g_free);
  error = update_disk_bytes (f, path, 256 << 20, NULL);
  g_assert_null (error);
  client_call_ok (f->client, path, "Start");
  sectors = exec_output (f, path, (const char *const[]) { "cat", "/sys/block/vdb/size", NULL });
  g_assert_cmpstr (sectors, ==, "524288\n");
  /* What was kept is there still on the grown disk. */
  blocks = exec_output (f, path, (const char *const[]) { "cat", "/kept", NULL });
  g_assert_cmpstr (blocks, ==, "kept\n");
  client_call_ok (f->client, path, "Stop");
  {
    g_autofree char *cmd = g_strdup_printf ("dumpe2fs -h %s", overlay);
    g_autofree char *out = NULL;
    const char *count, *size;

    g_assert_true (g_spawn_command_line_sync (cmd, &out, NULL, NULL, NULL));
    count = strstr (out, "Block count:");
    size = strstr (out, "Block size:");
    g_assert_nonnull (count);
    g_assert_nonnull (size);
    /* The file system grew with the disk. */
    g_assert_cmpuint (g_ascii_strtoull (count + strlen ("Block count:"), NULL, 10) *
                      g_ascii_strtoull (size + strlen ("Block size:"), NULL, 10), ==, 256 << 20);
  }
  {
    g_autoptr (sd_bus_message) r = client_call (f->client, path, MV_MACHINE_IFACE, "Delete", NULL,
                                                NULL, "b", 0);
    g_assert_nonnull (r);
  }
  g_assert_false (g_file_test (overlay, G_FILE_TEST_EXISTS));
}

/* A machine boots the digest it was created with, whatever its
 * reference names later. "missing" takes what the host pulled by that
 * reference, "always" asks the source again, "never" only looks. */
static void
test_pinned_and_policies (Fixture *f, gconstpointer data)
{
  g_autofree char *dir = copy_layout (f, "retagged");
  g_autofree char *first = layout_digest (dir);
  g_autofree char *a = create_image (f, data, "a", dir, NULL);
  g_autofree char *cmd = g_strdup_printf ("umoci config --image %s:1 --config.env GREETING=changed",
                                          dir);
  g_autofree char *second = NULL, *spec = NULL, *b = NULL, *c = NULL;
  g_autofree char *digest_a = NULL, *digest_b = NULL, *digest_c = NULL;
  g_autofree char *name = NULL, *message = NULL;
  g_autofree char *absent = copy_layout (f, "never-pulled");
  g_autofree char *images_path = images_dir (f);
  guint images;

  run (cmd);
  second = layout_digest (dir);
  g_assert_cmpstr (first, !=, second);

  spec = image_spec (data, "b", dir, NULL);
  b = client_create (f->client, spec, 0, NULL, NULL);
  g_free (spec);
  spec = image_spec (data, "c", dir, NULL);
  c = client_create (f->client, spec, MV_CREATE_PULL_ALWAYS, &name, &message);
  g_assert_nonnull (c);
  digest_a = spec_member (f, a, "image_digest");
  digest_b = spec_member (f, b, "image_digest");
  digest_c = spec_member (f, c, "image_digest");
  g_assert_cmpstr (digest_a, ==, first);
  g_assert_cmpstr (digest_b, ==, first);
  g_assert_cmpstr (digest_c, ==, second);

  client_call_ok (f->client, a, "Start");
  assert_console_soon (f, a, "image-says hello");
  client_call_ok (f->client, c, "Start");
  assert_console_soon (f, c, "image-says changed");

  /* Both flags at once are refused; "never" of an image the host lacks
   * is NotFound and records nothing. */
  images = count_entries (images_path);
  g_assert_cmpuint (images, ==, 2);
  g_free (spec);
  spec = image_spec (data, "d", absent, NULL);
  g_assert_null (client_create (f->client, spec, MV_CREATE_PULL_ALWAYS | MV_CREATE_PULL_NEVER,
                                &name, &message));
  g_assert_cmpstr (name, ==, MV_BUS_ERROR_INVALID_ARGUMENT);
  g_clear_pointer (&name, g_free);
  g_clear_pointer (&message, g_free);
  g_assert_null (client_create (f->client, spec, MV_CREATE_PULL_NEVER, &name, &message));
  g_assert_cmpstr (name, ==, MV_BUS_ERROR_NOT_FOUND);
  g_assert_nonnull (strstr (message, "pull policy never"));
  g_assert_cmpuint (count_machine_dirs (mv_test_env_state_dir (f->env)), ==, 3);
  g_assert_cmpuint (count_entries (images_path), ==, images);
}

/* ---- bad input ---- */

/* The biggest blob of @dir (its layer), changed but not resized. */
static void
tamper (const char *dir)
{
  g_autofree char *blobs = g_build_filename (dir, "blobs", "sha256", NULL);
  g_autoptr (GDir) d = g_dir_open (blobs, 0, NULL);
  g_autofree char *biggest = NULL;
  goffset size = 0;
  const char *name;
  FILE *file;

  g_assert_nonnull (d);
  while ((name = g_dir_read_name (d)))
    {
      g_autofree char *blob = g_build_filename (blobs, name, NULL);
      GStatBuf st;

      if (g_stat (blob, &st) == 0 && st.st_size > size)
        {
          size = st.st_size;
          g_free (biggest);
          biggest = g_steal_pointer (&blob);
        }
    }
  g_assert_nonnull (biggest);
  file = fopen (biggest, "r+");
  g_assert_nonnull (file);
  g_assert_cmpint (fseek (file, size / 2, SEEK_SET), ==, 0);
  g_assert_cmpint (fputs ("tampered", file), >=, 0);
  g_assert_cmpint (fclose (file), ==, 0);
}

/* An image that cannot be had records nothing and leaves nothing in the
 * cache; a reference that cannot be one is refused before anything is
 * fetched; a name taken while a pull is under way is refused. */
static void
test_bad_images (Fixture *f, gconstpointer data)
{
  g_autofree char *dir = copy_layout (f, "tampered");
  g_autofree char *images_path = images_dir (f);
  g_autofree char *spec = image_spec (data, "bad", dir, NULL);
  g_autofree char *name = NULL, *message = NULL;
  g_autofree char *missing = g_build_filename (mv_test_env_dir (f->env), "nowhere", NULL);
  g_autofree char *path = NULL;

  tamper (dir);
  g_assert_null (client_create (f->client, spec, 0, &name, &message));
  g_assert_cmpstr (name, ==, MV_ERROR_PREFIX "Failed");
  g_assert_cmpuint (count_machine_dirs (mv_test_env_state_dir (f->env)), ==, 0);
  g_assert_cmpuint (count_entries (images_path), ==, 0);

  g_clear_pointer (&name, g_free);
  g_clear_pointer (&message, g_free);
  g_free (spec);
  spec = image_spec (data, "absent", missing, NULL);
  g_assert_null (client_create (f->client, spec, 0, &name, &message));
  g_assert_cmpstr (name, ==, MV_BUS_ERROR_NOT_FOUND);
  g_assert_cmpuint (count_machine_dirs (mv_test_env_state_dir (f->env)), ==, 0);

  g_clear_pointer (&name, g_free);
  g_clear_pointer (&message, g_free);
  g_assert_null (client_create (f->client, "{\"name\":\"x\",\"image\":\"not a reference\"}", 0,
                                &name, &message));
  g_assert_cmpstr (name, ==, MV_BUS_ERROR_INVALID_ARGUMENT);
  g_assert_nonnull (strstr (message, "image:"));

  /* A taken name is refused before the pull. */
  path = create_image (f, data, "taken", layout, NULL);
  g_clear_pointer (&name, g_free);
  g_clear_pointer (&message, g_free);
  g_free (spec);
  spec = image_spec (data, "taken", missing, NULL);
  g_assert_null (client_create (f->client, spec, 0, &name, &message));
  g_assert_cmpstr (name, ==, MV_ERROR_PREFIX "AlreadyExists");
  g_assert_cmpuint (count_machine_dirs (mv_test_env_state_dir (f->env)), ==, 1);
}

/* An image of another architecture is refused; of a multi-platform
 * index, the linux/amd64 entry is the one pulled. */
static void
test_platforms (Fixture *f, gconstpointer data)
{
  g_autofree char *arm = copy_layout (f, "arm");
  g_autofree char *multi = copy_layout (f, "multi");
  g_autofree char *cmd = g_strdup_printf ("umoci config --image %s:1 --architecture arm64", arm);
  g_autofree char *spec = image_spec (data, "arm", arm, NULL);
  g_autofree char *name = NULL, *message = NULL, *path = NULL, *digest = NULL;
  g_autofree char *amd64 = layout_digest (multi);
  g_autofree char *index_cmd = NULL, *arm_cmd = NULL;

  run (cmd);
  g_assert_null (client_create (f->client, spec, 0, &name, &message));
  g_assert_cmpstr (name, ==, MV_ERROR_PREFIX "Unsupported");
  g_assert_nonnull (strstr (message, "arm64"));
  g_assert_cmpuint (count_machine_dirs (mv_test_env_state_dir (f->env)), ==, 0);

  /* The arm64 image's manifest joins the amd64 one's in an image index
   * (arm64 first), which tag "1" names. */
  arm_cmd = g_strdup_printf ("umoci config --image %s:1 --architecture arm64 --tag arm", multi);
  run (arm_cmd);
  index_cmd = g_strdup_printf (
    "cd %s && python3 -c '\n"
    "import hashlib, json\n"
    "index = json.load (open (\"index.json\"))\n"
    "by_tag = {m[\"annotations\"][\"org.opencontainers.image.ref.name\"]: m for m in index[\"manifests\"]}\n"
    "entries = []\n"
    "for tag, arch in ((\"arm\", \"arm64\"), (\"1\", \"amd64\")):\n"
    "    m = dict (by_tag[tag]); m.pop (\"annotations\")\n"
    "    m[\"platform\"] = {\"os\": \"linux\", \"architecture\": arch}\n"
    "    entries.append (m)\n"
    "blob = json.dumps ({\"schemaVersion\": 2, \"mediaType\": \"application/vnd.oci.image.index.v1+json\","
    " \"manifests\": entries}).encode ()\n"
    "digest = hashlib.sha256 (blob).hexdigest ()\n"
    "open (\"blobs/sha256/\" + digest, \"wb\").write (blob)\n"
    "index[\"manifests\"] = [{\"mediaType\": \"application/vnd.oci.image.index.v1+json\","
    " \"digest\": \"sha256:\" + digest, \"size\": len (blob),"
    " \"annotations\": {\"org.opencontainers.image.ref.name\": \"1\"}}]\n"
    "json.dump (index, open (\"index.json\", \"w\"))\n'", multi);
  run (index_cmd);
  path = create_image (f, data, "multi", multi, NULL);
  digest = spec_member (f, path, "image_digest");
  /* Pinned to the index's linux/amd64 manifest, which is what it boots. */
  g_assert_cmpstr (digest, ==, amd64);
  client_call_ok (f->client, path, "Start");
  assert_console_soon (f, path, "image-says hello");
}

/* ---- an archive over HTTP ---- */

static GPid
serve_http (const char *dir, guint port)
{
  g_autofree char *port_text = g_strdup_printf ("%u", port);
  const char *argv[] = { "python3", "-m", "http.server", "--bind", "127.0.0.1", "--directory", dir,
                         port_text, NULL };
  g_autoptr (GError) error = NULL;
  GPid pid = 0;

  g_assert_true (g_spawn_async (NULL, (char **) argv, NULL,
                                G_SPAWN_SEARCH_PATH | G_SPAWN_STDOUT_TO_DEV_NULL |
                                G_SPAWN_STDERR_TO_DEV_NULL | G_SPAWN_DO_NOT_REAP_CHILD,
                                NULL, NULL, &pid, &error));
  g_assert_no_error (error);
  /* Serving once it answers. */
  for (guint i = 0; i < 100; i++)
    {
      g_autofree char *cmd = g_strdup_printf ("curl -sf -o /dev/null http://127.0.0.1:%u/", port);
      int status = 0;

      if (g_spawn_command_line_sync (cmd, NULL, NULL, &status, NULL) &&
          g_spawn_check_wait_status (status, NULL))
        return pid;
      g_usleep (100 * 1000);
    }
  g_error ("the HTTP server on port %u never answered", port);
}

/* An OCI archive from a real HTTP server on loopback, by a signed URL: a
 * retry of the create with a fresh signature is the same create (seed
 * 000: the fingerprint leaves the query string out), another archive
 * under the same ID is a conflict. */
static void
test_signed_archive_url (Fixture *f, gconstpointer data)
{
  const ImageCase *c = data;
  g_autofree char *dir = g_build_filename (mv_test_env_dir (f->env), "www", NULL);
  g_autofree char *tar = g_strdup_printf ("mkdir -p %s && tar -C %s -cf %s/busybox.tar .", dir,
                                          layout, dir);
  guint port = mv_test_free_port ();
  GPid server;
  g_autofree char *spec_a = NULL, *spec_b = NULL, *spec_c = NULL;
  g_autofree char *a = NULL, *b = NULL, *name = NULL, *message = NULL;
  g_autofree char *digest = NULL, *expected = layout_digest (layout);
  static const char id[] = "0123456789abcdef0123456789abcdef";

  run (tar);
  server = serve_http (dir, port);
#define ARCHIVE_SPEC(query) \
  g_strdup_printf ("{\"id\":\"%s\",\"name\":\"fetched\",\"hypervisor_type\":\"%s\"," \
                   "\"image\":\"http://127.0.0.1:%u/busybox.tar?%s\"}", id, c->type, port, query)
  spec_a = ARCHIVE_SPEC ("X-Signature=aaa&Expires=1");
  spec_b = ARCHIVE_SPEC ("X-Signature=bbb&Expires=2");
  spec_c = g_strdup_printf ("{\"id\":\"%s\",\"name\":\"fetched\",\"hypervisor_type\":\"%s\","
                            "\"image\":\"http://127.0.0.1:%u/other.tar?X-Signature=aaa\"}",
                            id, c->type, port);
#undef ARCHIVE_SPEC
  a = client_create (f->client, spec_a, 0, &name, &message);
  g_assert_cmpstr (name, ==, NULL);
  digest = spec_member (f, a, "image_digest");
  g_assert_cmpstr (digest, ==, expected);
  b = client_create (f->client, spec_b, 0, &name, &message);
  g_assert_cmpstr (b, ==, a);
  /* Neither the property, open to every user, nor the cache keeps the
   * signature. */
  {
    g_autofree char *image = client_get_string (f->client, a, "Image");
    g_autofree char *url = g_strdup_printf ("http://127.0.0.1:%u/busybox.tar", port);
    g_autofree char *record = g_build_filename (mv_test_env_state_dir (f->env), "images",
                                                digest + strlen ("sha256:"), "image.json", NULL);
    g_autofree char *text = NULL;

    g_assert_cmpstr (image, ==, url);
    g_assert_true (g_file_get_contents (record, &text, NULL, NULL));
    g_assert_null (strstr (text, "X-Signature"));
    g_assert_nonnull (strstr (text, url));
  }
  g_assert_null (client_create (f->client, spec_c, 0, &name, &message));
  g_assert_cmpstr (name, ==, MV_ERROR_PREFIX "Conflict");
  g_assert_cmpuint (count_machine_dirs (mv_test_env_state_dir (f->env)), ==, 1);
  kill (server, SIGTERM);
  g_spawn_close_pid (server);
}

/* ---- the test VMMs: what goes on the wire ---- */

/* The disks the test VMM of @path was given, as its vm.info (Cloud
 * Hypervisor) or /vm/config (Firecracker) shows them; @keep holds them. */
static JsonArray *
vmm_disks (Fixture *f, const char *type, const char *path, JsonNode **keep)
{
  gboolean chv = g_str_equal (type, "cloud-hypervisor");
  g_autofree char *api = fixture_runtime_file (f, path, "api.sock");
  g_autofree char *body = http_get_unix (api, chv ? "/api/v1/vm.info" : "/vm/config");
  JsonArray *disks;

  g_test_message ("%s", body);
  *keep = json_from_string (body, NULL);
  g_assert_nonnull (*keep);
  if (chv)
    disks = json_object_get_array_member (
      json_object_get_object_member (json_node_get_object (*keep), "config"), "disks");
  else
    disks = json_object_get_array_member (json_node_get_object (*keep), "drives");
  g_assert_nonnull (disks);
  return disks;
}

/* The image read-only, the overlay disk read-write, both limited. */
static void
test_disks_on_the_wire (Fixture *f, gconstpointer data)
{
  const ImageCase *c = data;
  /* The simulated guest runs a few commands of its own, not the image's. */
  g_autofree char *path = create_image (f, data, "wired", layout,
                                        "\"disk_bytes_per_second\":1048576,\"disk_iops\":200,"
                                        "\"cmd\":[\"sleep\",\"100000\"]");
  g_autofree char *rootfs = NULL, *overlay_dir = NULL;
  g_autofree char *id = client_get_string (f->client, path, "Id");
  g_autoptr (JsonNode) node = NULL;
  gboolean chv = g_str_equal (c->type, "cloud-hypervisor");
  JsonArray *disks;
  g_autofree char *digest = spec_member (f, path, "image_digest");

  client_call_ok (f->client, path, "Start");
  disks = vmm_disks (f, c->type, path, &node);
  g_assert_cmpuint (json_array_get_length (disks), ==, 2);
  rootfs = g_build_filename ("images", digest + strlen ("sha256:"), "rootfs.ext4", NULL);
  overlay_dir = g_build_filename ("machines", id, "overlay.ext4", NULL);
  for (guint i = 0; i < 2; i++)
    {
      JsonObject *disk = json_array_get_object_element (disks, i);
      const char *file = json_object_get_string_member (disk, chv ? "path" : "path_on_host");
      JsonObject *limiter = json_object_get_object_member (disk, chv ? "rate_limiter_config"
                                                                     : "rate_limiter");
      gboolean read_only = chv ? json_object_get_boolean_member_with_default (disk, "readonly", FALSE)
                               : json_object_get_boolean_member_with_default (disk, "is_read_only",
                                                                              FALSE);

      g_assert_true (g_str_has_suffix (file, i == 0 ? rootfs : overlay_dir));
      g_assert_cmpint (read_only, ==, i == 0);
      g_assert_nonnull (limiter);
      g_assert_nonnull (json_object_get_object_member (limiter, "bandwidth"));
      g_assert_nonnull (json_object_get_object_member (limiter, "ops"));
    }
}

/* The command line (its arguments joined by spaces) of a process whose
 * command line names the machine @id and holds @marker; its PID in
 * @pid. */
static char *
process_of (const char *id, const char *marker, GPid *pid)
{
  g_autoptr (GDir) proc = g_dir_open ("/proc", 0, NULL);
  const char *entry;

  while ((entry = g_dir_read_name (proc)))
    {
      g_autofree char *file = g_build_filename ("/proc", entry, "cmdline", NULL);
      g_autofree char *cmdline = NULL;
      gsize len = 0;

      if (!g_ascii_isdigit (entry[0]) || !g_file_get_contents (file, &cmdline, &len, NULL))
        continue;
      for (gsize i = 0; i + 1 < len; i++)
        if (cmdline[i] == '\0')
          cmdline[i] = ' ';
      if (strstr (cmdline, id) && strstr (cmdline, marker))
        {
          if (pid)
            *pid = (GPid) g_ascii_strtoll (entry, NULL, 10);
          return g_steal_pointer (&cmdline);
        }
    }
  g_error ("no process with %s runs for %s", marker, id);
}

/* The disk files the test VMM of @path was given, on the wire. */
static char *
vmm_disk_paths (Fixture *f, const char *type, const char *path)
{
  gboolean chv = g_str_equal (type, "cloud-hypervisor");
  g_autoptr (JsonNode) node = NULL;
  g_autoptr (GString) files = g_string_new ("");
  JsonArray *disks = vmm_disks (f, type, path, &node);

  for (guint i = 0; i < json_array_get_length (disks); i++)
    g_string_append_printf (files, "%s%s", i ? " " : "", json_object_get_string_member (
                              json_array_get_object_element (disks, i),
                              chv ? "path" : "path_on_host"));
  return g_string_free (g_steal_pointer (&files), FALSE);
}

static void
assert_started_from (Fixture *f, const char *path, const char *expected)
{
  g_autofree char *from = client_get_string (f->client, path, "StartedFrom");

  g_assert_cmpstr (from, ==, expected);
}

/* Warm starts on the test VMMs, on the wire: the first machine of the
 * image boots and its template is built behind it; the second is
 * restored from it onto its own overlay disk and told its own hostname;
 * start_mode cold boots; an image of another digest has no template; a
 * daemon killed while a template boots leaves none of it, nothing staged
 * and no VMM. */
static void
test_warm_on_the_wire (Fixture *f, gconstpointer data)
{
  const ImageCase *c = data;
  const char *sleep = "\"cmd\":[\"sleep\",\"100000\"]";
  g_autofree char *first = NULL, *second = NULL, *cold = NULL, *variant = NULL;
  g_autofree char *killed = NULL, *disks = NULL, *id = NULL, *overlay = NULL, *name = NULL;
  g_autofree char *message = NULL, *cmd = NULL, *dir = copy_layout (f, "variant");
  g_autofree char *warm = g_build_filename (mv_test_env_state_dir (f->env), MV_WARM_DIR, NULL);
  g_autofree char *extra = g_strconcat (sleep, ",\"hostname\":\"second-host\"", NULL);
  const char *hostname[] = { "hostname", NULL };

  first = create_image (f, data, "first", layout, sleep);
  client_call_ok (f->client, first, "Start");
  assert_started_from (f, first, "cold");
  for (guint i = 0; i < 200 && count_warm_templates (mv_test_env_state_dir (f->env), TRUE) == 0; i++)
    client_settle (f->client, 100);
  g_assert_cmpuint (count_warm_templates (mv_test_env_state_dir (f->env), FALSE), ==, 1);

  second = create_image (f, data, "second", layout, extra);
  client_call_ok (f->client, second, "Start");
  assert_started_from (f, second, "warm");
  name = exec_output (f, second, hostname);
  g_assert_cmpstr (name, ==, "second-host\n");
  /* Its own overlay disk, the image's root file system. */
  id = client_get_string (f->client, second, "Id");
  overlay = g_build_filename ("machines", id, "overlay.ext4", NULL);
  disks = vmm_disk_paths (f, c->type, second);
  g_test_message ("%s", disks);
  g_assert_nonnull (strstr (disks, "rootfs.ext4"));
  if (g_str_equal (c->type, "cloud-hypervisor"))
    {
      g_assert_nonnull (strstr (disks, overlay));
      g_assert_null (strstr (disks, MV_WARM_DIR "/"));
    }
  else
    {
      /* Firecracker restores onto the paths its state names, the
       * template's: its sandbox shows the machine's own disk there. */
      g_auto (GStrv) files = g_strsplit (disks, " ", -1);
      g_autofree char *mine = g_build_filename (mv_test_env_state_dir (f->env), overlay, NULL);
      g_autofree char *cmdline = NULL, *seen = NULL;
      GPid vmm = 0;
      GStatBuf a, b;

      cmdline = process_of (id, "fake-", &vmm);
      seen = g_strdup_printf ("/proc/%d/root%s", (int) vmm, files[1]);
      g_assert_nonnull (strstr (files[1], MV_WARM_DIR "/"));
      g_assert_cmpint (g_stat (mine, &a), ==, 0);
      g_assert_cmpint (g_stat (seen, &b), ==, 0);
      g_assert_cmpuint (a.st_ino, ==, b.st_ino);
      g_assert_cmpuint (a.st_dev, ==, b.st_dev);
    }

  /* A sibling from the same template: each was told its own identity
   * and given its own entropy (REIDENTIFY, on the agent's wire). */
  {
    g_autofree char *sibling_extra = g_strconcat (sleep, ",\"hostname\":\"sibling-host\"", NULL);
    g_autofree char *sibling = create_image (f, data, "sibling", layout, sibling_extra);
    g_autofree char *mine = NULL, *theirs = NULL;
    const char *a, *b;

    client_call_ok (f->client, sibling, "Start");
    assert_started_from (f, sibling, "warm");
    mine = console_text (f, second);
    theirs = console_text (f, sibling);
    a = strstr (mine, "reidentified as second-host, ");
    b = strstr (theirs, "reidentified as sibling-host, ");
    g_assert_nonnull (a);
    g_assert_nonnull (b);
    a = strstr (a, "(SHA-256 ");
    b = strstr (b, "(SHA-256 ");
    g_assert_nonnull (a);
    g_assert_nonnull (b);
    g_assert_false (strncmp (a, b, strlen ("(SHA-256 ") + 16) == 0);
  }

  g_free (extra);
  extra = g_strconcat (sleep, ",\"start_mode\":\"cold\"", NULL);
  cold = create_image (f, data, "cold", layout, extra);
  client_call_ok (f->client, cold, "Start");
  assert_started_from (f, cold, "cold");

  /* Another digest of the same root file system: not the template's. */
  cmd = g_strdup_printf ("umoci config --image %s:1 --config.env GREETING=changed", dir);
  run (cmd);
  g_free (extra);
  extra = g_strconcat (sleep, ",\"start_mode\":\"warm\"", NULL);
  variant = create_image (f, data, "variant", dir, extra);
  g_free (client_machine_call (f->client, variant, "Start", &message));
  g_assert_nonnull (message);
  g_assert_nonnull (strstr (message, "no warm template matches"));

  /* Killed while that image's template boots. */
  client_free (f->client);
  mv_test_env_stop_daemon (f->env, SIGTERM);
  g_setenv ("MICROVMD_FAULT_POINT", "warm-build:booted", TRUE);
  mv_test_env_start_daemon (f->env, NULL);
  g_unsetenv ("MICROVMD_FAULT_POINT");
  f->client = client_new (f->env);
  killed = create_image (f, data, "killed", dir, sleep);
  g_free (client_machine_call (f->client, killed, "Start", NULL));
  mv_test_env_wait_for_name (f->env, MV_BUS_NAME, FALSE, 20000);
  mv_test_env_stop_daemon (f->env, SIGKILL);
  client_free (f->client);
  mv_test_env_start_daemon (f->env, NULL);
  f->client = client_new (f->env);
  g_assert_cmpuint (count_warm_templates (mv_test_env_state_dir (f->env), FALSE), ==, 1);
  g_assert_cmpuint (count_processes_with (warm), ==, 0);
  client_assert_state_soon (f->client, killed, "Running", 20000);
}

/* The QEMU command line of the machine @id. */
static char *
qemu_cmdline (const char *id)
{
  return process_of (id, "-kernel", NULL);
}

/* QEMU's block throttling on every disk, the image's and the overlay's. */
static void
test_qemu_rate_limits (Fixture *f, gconstpointer data)
{
  g_autofree char *path = create_image (f, data, "throttled", layout,
                                        "\"disk_bytes_per_second\":1048576,\"disk_iops\":200");
  g_autofree char *id = client_get_string (f->client, path, "Id");
  g_autofree char *cmdline = NULL;
  guint found = 0;

  client_call_ok (f->client, path, "Start");
  cmdline = qemu_cmdline (id);
  g_test_message ("%s", cmdline);
  for (const char *p = cmdline; (p = strstr (p, "throttling.bps-total=1048576,"
                                               "throttling.iops-total=200")); p++)
    found++;
  g_assert_cmpuint (found, ==, 2);
}

/* kernel_name boots the kernel [kernels] names; one it does not name is
 * refused before anything is pulled or recorded. */
static void
test_kernel_name (Fixture *f, gconstpointer data)
{
  g_autofree char *path = create_image (f, data, "named", layout, "\"kernel_name\":\"named\"");
  g_autofree char *id = client_get_string (f->client, path, "Id");
  g_autofree char *cmdline = NULL, *kernel = g_strdup_printf ("-kernel %s ", named_kernel);
  g_autofree char *spec = image_spec (data, "unnamed", layout, "\"kernel_name\":\"nope\"");
  g_autofree char *name = NULL, *message = NULL;

  client_call_ok (f->client, path, "Start");
  cmdline = qemu_cmdline (id);
  g_test_message ("%s", cmdline);
  g_assert_nonnull (strstr (cmdline, kernel));
  g_assert_null (client_create (f->client, spec, 0, &name, &message));
  g_assert_cmpstr (name, ==, MV_BUS_ERROR_INVALID_ARGUMENT);
  g_assert_nonnull (strstr (message, "kernel_name: no kernel called nope in [kernels] of "
                                     "microvmd.conf (named)"));
  g_assert_cmpuint (count_machine_dirs (mv_test_env_state_dir (f->env)), ==, 1);
}

/* ---- registration ---- */

static void
add (const char *type, const char *name, void (*func) (Fixture *, gconstpointer))
{
  ImageCase *c = g_new0 (ImageCase, 1);
  g_autofree char *guest = g_strdup_printf ("[guest]\nkernel=%s\ninitramfs=%s\n[kernels]\n"
                                            "named=%s\n%s", agent_kernel, agent_initramfs,
                                            named_kernel, lifecycle_config);
  g_autofree char *test_path = g_strdup_printf ("/image-boot/%s/%s", type, name);

  c->type = type;
  c->config = guest_config (type, guest);
  g_test_add (test_path, Fixture, c, image_fixture_setup, func, image_fixture_teardown);
}

int
main (int argc, char **argv)
{
  const char *build = g_getenv ("MICROVMD_BUILD_DIR");

  g_test_init (&argc, &argv, NULL);
  g_assert_nonnull (build);
  agent_kernel = g_build_filename (build, "guest", "vmlinuz", NULL);
  agent_initramfs = g_build_filename (build, "guest", "initramfs.img", NULL);
  layout = g_build_filename (build, "tests", "guest", "oci", NULL);
  named_kernel = g_build_filename (build, "tests", "integration", "named-vmlinuz", NULL);
  {
    g_autofree char *kernel = NULL;
    gsize length = 0;

    g_assert_true (g_file_get_contents (agent_kernel, &kernel, &length, NULL));
    g_assert_true (g_file_set_contents (named_kernel, kernel, (gssize) length, NULL));
  }

  add ("qemu", "boots-image", test_boots_image);
  add ("qemu", "spec-overrides-image", test_spec_overrides_image);
  add ("qemu", "overlay-disk", test_overlay_disk);
  add ("qemu", "pinned-and-policies", test_pinned_and_policies);
  add ("qemu", "bad-images", test_bad_images);
  add ("qemu", "rate-limits", test_qemu_rate_limits);
  add ("qemu", "kernel-name", test_kernel_name);
  add ("qemu", "signed-archive-url", test_signed_archive_url);
  add ("qemu", "platforms", test_platforms);
  add ("cloud-hypervisor", "disks-on-the-wire", test_disks_on_the_wire);
  add ("firecracker", "disks-on-the-wire", test_disks_on_the_wire);
  add ("cloud-hypervisor", "warm-start", test_warm_on_the_wire);
  add ("firecracker", "warm-start", test_warm_on_the_wire);
  return g_test_run ();
}
