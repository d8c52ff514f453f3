/* Warm starts of real QEMU guests (TCG) booting the test image with
 * microvmd's agent: the first machine boots and its template is built
 * behind it; the second starts from the template, and its workload,
 * started once its identity is in place, sees its own hostname and
 * random state; its overlay disk is its own. start_mode cold boots; an
 * image with another digest never uses the template; a daemon killed in
 * the middle of a build leaves no template, nothing staged and no VMM. */
#include "bus-client.h"
#include "names.h"

#include <glib/gstdio.h>
#include <signal.h>

static char *guest_files;
static char *layout;

static const char config_text[] =
  "[qemu]\naccel=tcg\n"
  "[lifecycle]\n"
  "boot-timeout-seconds=90\n"
  "stop-timeout-seconds=20\n"
  "resync-seconds=600\n";

/* What the workload saw as it started: its hostname and random bytes. */
#define SEEN \
  "\"cmd\":[\"/bin/sh\",\"-c\",\"hostname > /tmp/seen; " \
  "head -c 16 /dev/urandom | od -An -tx1 > /tmp/rand; exec sleep 100000\"]"

static void
setup (Fixture *f, gconstpointer data)
{
  g_autofree char *config = g_strconcat (config_text, guest_files, NULL);

  f->env = mv_test_env_new ();
  mv_test_env_write_config (f->env, config);
  mv_test_env_start_daemon (f->env, NULL);
  f->client = client_new (f->env);
}

/* The guests go with the test: a VMM outlives its daemon. */
static void
teardown (Fixture *f, gconstpointer data)
{
  client_delete_all (f->client);
  fixture_teardown (f, data);
}

static char *
create_flags (Fixture *f, const char *name, const char *image, const char *extra, guint64 flags,
              char **err, char **message)
{
  /* 64 MiB of overlay disk unless @extra says otherwise. */
  gboolean sized = extra && strstr (extra, "disk_bytes");
  g_autofree char *spec = g_strdup_printf (
    "{\"name\":\"%s\",\"hypervisor_type\":\"qemu\",\"memory_bytes\":268435456,"
    "\"readiness\":\"agent\",\"image\":\"oci:%s:1\",%s%s%s%s}",
    name, image, sized ? "" : "\"disk_bytes\":67108864,", SEEN, extra ? "," : "",
    extra ? extra : "");

  return client_create (f->client, spec, flags, err, message);
}

static char *
create_ok (Fixture *f, const char *name, const char *image, const char *extra)
{
  g_autofree char *err = NULL, *message = NULL;
  char *path = create_flags (f, name, image, extra, MV_CREATE_START, &err, &message);

  if (!path)
    g_error ("%s: %s: %s", name, err, message);
  return path;
}

static char *
guest_output (Fixture *f, const char *path, const char *script)
{
  const char *argv[] = { "sh", "-c", script, NULL };
  g_autofree char *out = exec_output (f, path, argv);

  return g_strdup (g_strstrip (out));
}

static char *
started_from (Fixture *f, const char *path)
{
  return client_get_string (f->client, path, "StartedFrom");
}

static void
wait_for_templates (Fixture *f, guint n)
{
  for (guint i = 0; i < 1200 && count_warm_templates (mv_test_env_state_dir (f->env), TRUE) < n; i++)
    client_settle (f->client, 100);
  g_assert_cmpuint (count_warm_templates (mv_test_env_state_dir (f->env), FALSE), ==, n);
}

/* A copy of the test image whose config differs by one environment
 * variable: another digest for the same root file system. */
static char *
image_variant (void)
{
  g_autofree char *dir = g_dir_make_tmp ("warm-oci-XXXXXX", NULL);
  g_autofree char *copy = g_build_filename (dir, "oci", NULL);
  g_autofree char *out = NULL, *errors = NULL;
  const char *script =
    "import hashlib, json, os, sys\n"
    "root = sys.argv[1]\n"
    "def blob(d): return os.path.join(root, 'blobs', 'sha256', d.split(':')[1])\n"
    "def put(data):\n"
    "    d = 'sha256:' + hashlib.sha256(data).hexdigest()\n"
    "    open(blob(d), 'wb').write(data)\n"
    "    return d, len(data)\n"
    "index = json.load(open(os.path.join(root, 'index.json')))\n"
    "entry = index['manifests'][0]\n"
    "manifest = json.load(open(blob(entry['digest'])))\n"
    "config = json.load(open(blob(manifest['config']['digest'])))\n"
    "config.setdefault('config', {}).setdefault('Env', []).append('VARIANT=1')\n"
    "manifest['config']['digest'], manifest['config']['size'] = put(json.dumps(config).encode())\n"
    "entry['digest'], entry['size'] = put(json.dumps(manifest).encode())\n"
    "json.dump(index, open(os.path.join(root, 'index.json'), 'w'))\n";
  const char *cp[] = { "cp", "-r", layout, copy, NULL };
  const char *py[] = { "python3", "-c", script, copy, NULL };
  int status = 0;

  g_assert_nonnull (dir);
  g_assert_true (g_spawn_sync (NULL, (char **) cp, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL, NULL,
                               NULL, &status, NULL));
  g_assert_true (g_spawn_check_wait_status (status, NULL));
  g_assert_true (g_spawn_sync (NULL, (char **) py, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL, &out,
                               &errors, &status, NULL));
  if (!g_spawn_check_wait_status (status, NULL))
    g_error ("the image variant: %s", errors);
  return g_steal_pointer (&copy);
}

static void
prune (Fixture *f)
{
  g_autofree char *err = NULL, *message = NULL;
  g_autoptr (sd_bus_message) reply = client_call (f->client, MV_MANAGER_PATH, MV_MANAGER_IFACE,
                                                  "PruneImages", &err, &message, NULL);

  if (!reply)
    g_error ("PruneImages: %s: %s", err, message);
}

/* The object path of the one warm template there is. */
static char *
only_template_path (Fixture *f)
{
  g_autofree char *dir = g_build_filename (mv_test_env_state_dir (f->env), MV_WARM_DIR, NULL);
  g_autoptr (GDir) d = g_dir_open (dir, 0, NULL);
  const char *name;
  char *path = NULL;

  while (d && (name = g_dir_read_name (d)))
    if (name[0] != '.')
      g_assert_cmpint (sd_bus_path_encode (MV_WARM_IMAGE_PREFIX, name, &path), >=, 0);
  g_assert_nonnull (path);
  return path;
}

static void
test_warm_start (Fixture *f, gconstpointer data)
{
  g_autofree char *first = NULL, *second = NULL, *cold = NULL, *variant_path = NULL;
  g_autofree char *from = NULL, *seen = NULL, *rand_a = NULL, *rand_b = NULL;
  g_autofree char *mine = NULL, *theirs = NULL, *written = NULL, *variant = image_variant ();
  g_autofree char *err = NULL, *message = NULL, *template_path = NULL;

  first = create_ok (f, "first", layout, NULL);
  from = started_from (f, first);
  g_assert_cmpstr (from, ==, "cold");
  wait_for_templates (f, 1);
  rand_a = guest_output (f, first, "cat /tmp/rand");
  written = guest_output (f, first, "echo mine > /first-file && cat /first-file");
  g_assert_cmpstr (written, ==, "mine");

  second = create_ok (f, "second", layout, NULL);
  g_free (from);
  from = started_from (f, second);
  g_assert_cmpstr (from, ==, "warm");
  /* Its workload started under its own name, with its own random state. */
  seen = guest_output (f, second, "while [ ! -s /tmp/rand ]; do sleep 0.1; done; cat /tmp/seen");
  g_assert_cmpstr (seen, ==, "second");
  rand_b = guest_output (f, second, "cat /tmp/rand");
  g_assert_cmpuint (strlen (rand_b), >, 32);
  g_assert_cmpstr (rand_a, !=, rand_b);
  /* Its root's changes are its own, and the first's are the first's. */
  theirs = guest_output (f, second, "cat /first-file 2>&1 || echo none");
  g_assert_cmpstr (theirs, ==, "cat: can't open '/first-file': No such file or directory\nnone");
  g_free (guest_output (f, second, "echo second > /second-file; sync"));
  mine = guest_output (f, first, "cat /second-file 2>/dev/null || echo none");
  g_assert_cmpstr (mine, ==, "none");

  /* Asked to boot, it boots. */
  cold = create_ok (f, "third", layout, "\"start_mode\":\"cold\"");
  g_free (from);
  from = started_from (f, cold);
  g_assert_cmpstr (from, ==, "cold");

  /* Another image digest: the template is not its. */
  variant_path = create_flags (f, "variant", variant, "\"start_mode\":\"warm\"", 0, &err,
                               &message);
  if (!variant_path)
    g_error ("variant: %s: %s", err, message);
  g_clear_pointer (&message, g_free);
  g_free (client_machine_call (f->client, variant_path, "Start", &message));
  g_assert_nonnull (message);
  g_assert_nonnull (strstr (message, "no warm template matches"));
  g_assert_cmpuint (count_warm_templates (mv_test_env_state_dir (f->env), FALSE), ==, 1);

  /* Another overlay disk size: the template's disk would not be its. */
  {
    g_autofree char *bigger = create_flags (f, "bigger", layout,
                                            "\"start_mode\":\"warm\",\"disk_bytes\":134217728", 0,
                                            &err, &message);

    g_assert_nonnull (bigger);
    g_clear_pointer (&message, g_free);
    g_free (client_machine_call (f->client, bigger, "Start", &message));
    g_assert_nonnull (message);
    g_assert_nonnull (strstr (message, "no warm template matches"));
  }

  /* A template goes with its image, once no machine is pinned to it,
   * and its object with it. */
  prune (f);
  g_assert_cmpuint (count_warm_templates (mv_test_env_state_dir (f->env), FALSE), ==, 1);
  template_path = only_template_path (f);
  client_delete_all (f->client);
  prune (f);
  g_assert_cmpuint (count_warm_templates (mv_test_env_state_dir (f->env), FALSE), ==, 0);
  client_settle (f->client, 200);
  g_assert_cmpuint (client_count_announced (f->client, "InterfacesRemoved", template_path), ==, 1);
}

/* Killed while a template boots: after the restart nothing of it is
 * left, no template stands for it, and no VMM of it runs. */
static void
test_killed_build (Fixture *f, gconstpointer data)
{
  g_autofree char *machine = NULL, *again = NULL, *from = NULL;
  g_autofree char *warm = g_build_filename (mv_test_env_state_dir (f->env), MV_WARM_DIR, NULL);

  client_free (f->client);
  mv_test_env_stop_daemon (f->env, SIGTERM);
  g_setenv ("MICROVMD_FAULT_POINT", "warm-build:booted", TRUE);
  mv_test_env_start_daemon (f->env, NULL);
  g_unsetenv ("MICROVMD_FAULT_POINT");
  f->client = client_new (f->env);
  machine = create_ok (f, "killed", layout, NULL);
  mv_test_env_wait_for_name (f->env, MV_BUS_NAME, FALSE, 120000);
  mv_test_env_stop_daemon (f->env, SIGKILL);
  client_free (f->client);
  mv_test_env_start_daemon (f->env, NULL);
  f->client = client_new (f->env);
  g_assert_cmpuint (count_warm_templates (mv_test_env_state_dir (f->env), FALSE), ==, 0);
  g_assert_cmpuint (count_processes_with (warm), ==, 0);

  /* The machine runs on; the next of its shape boots, and builds the
   * template anew. */
  client_assert_state_soon (f->client, machine, "Running", 120000);
  again = create_ok (f, "again", layout, NULL);
  from = started_from (f, again);
  g_assert_cmpstr (from, ==, "cold");
  wait_for_templates (f, 1);
  g_assert_cmpuint (count_processes_with (warm), ==, 0);
}

int
main (int argc, char **argv)
{
  const char *build = g_getenv ("MICROVMD_BUILD_DIR");

  g_test_init (&argc, &argv, NULL);
  g_assert_nonnull (build);
  layout = g_build_filename (build, "tests", "guest", "oci", NULL);
  guest_files = g_strdup_printf ("[guest]\nkernel=%s/guest/vmlinuz\ninitramfs=%s/guest/initramfs.img\n",
                                 build, build);
#define ADD(name, fn) g_test_add ("/warm-guests/qemu/" name, Fixture, NULL, setup, fn, teardown)
  ADD ("warm-start", test_warm_start);
  ADD ("killed-build", test_killed_build);
  return g_test_run ();
}
