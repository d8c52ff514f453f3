/* Directory mounts through the daemon: a host directory shared with a real
 * QEMU guest (TCG) by a real virtiofsd, both ways, read-only too; the
 * virtiofsd ends with the machine, also after a daemon restart; Cloud
 * Hypervisor's test VMM is given the fs device as the real one takes it;
 * Firecracker refuses; sources outside [storage] allowed-directories are
 * refused before anything is recorded. */
#include "bus-client.h"
#include "names.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static char *agent_kernel;
static char *agent_initramfs;
static char *rootfs;
/* The directory [storage] allowed-directories names, and one beside it. */
static char *shared_root;
static char *outside_root;

static const char lifecycle_config[] =
  "[lifecycle]\n"
  "boot-timeout-seconds=40\n"
  "stop-timeout-seconds=20\n"
  "restart-backoff-ms=300\n"
  "resync-seconds=1\n";

typedef struct {
  const char *type;
  char       *config;
} ShareCase;

static void
share_fixture_setup (Fixture *f, gconstpointer data)
{
  const ShareCase *c = data;
  fixture_setup (f, c->config);
}

static void
share_fixture_teardown (Fixture *f, gconstpointer data)
{
  client_delete_all (f->client);
  fixture_teardown (f, data);
}

static char *
spec_text (gconstpointer data, const char *name, const char *mounts, const char *extra)
{
  const ShareCase *c = data;

  return g_strdup_printf ("{\"name\":\"%s\",\"hypervisor_type\":\"%s\","
                          "\"memory_bytes\":268435456,"
                          "\"disks\":[{\"path\":\"%s\",\"read_only\":true,\"root\":true}],"
                          "\"mounts\":[%s]%s%s}",
                          name, c->type, rootfs, mounts, extra ? "," : "", extra ? extra : "");
}

/* A fresh directory @name under @root. */
static char *
make_dir (const char *root, const char *name)
{
  g_autofree char *path = g_build_filename (root, name, NULL);
  g_autofree char *command = g_strdup_printf ("rm -rf '%s'", path);

  g_assert_cmpint (system (command), ==, 0);
  g_assert_cmpint (g_mkdir_with_parents (path, 0755), ==, 0);
  return g_steal_pointer (&path);
}

/* virtiofsd processes serving the machine at @path. */
static guint
count_virtiofsd (Fixture *f, const char *id)
{
  g_autofree char *needle = g_strdup_printf ("--socket-path=%s/machines/%s/fs",
                                             mv_test_env_runtime_dir (f->env), id);

  return count_processes_with (needle);
}

/* ---- a real guest ---- */

static char *
status_json (Fixture *f, const char *id)
{
  g_autofree char *file = g_build_filename (mv_test_env_state_dir (f->env), "machines", id,
                                            "status.json", NULL);
  char *text = NULL;

  g_assert_true (g_file_get_contents (file, &text, NULL, NULL));
  return text;
}

/* Files cross both ways; a read-only mount refuses the guest's writes;
 * the virtiofsd processes end with the machine, and after a daemon
 * restart too; Standby is refused. */
static void
test_qemu_share (Fixture *f, gconstpointer data)
{
  g_autofree char *rw = make_dir (shared_root, "rw");
  g_autofree char *ro = make_dir (shared_root, "ro");
  g_autofree char *from_host = g_build_filename (rw, "from-host", NULL);
  g_autofree char *from_guest = g_build_filename (rw, "from-guest", NULL);
  g_autofree char *sealed = g_build_filename (ro, "sealed", NULL);
  g_autofree char *sealed_new = g_build_filename (ro, "new", NULL);
  g_autofree char *mounts = g_strdup_printf (
    "{\"type\":\"directory\",\"source\":\"%s\",\"target\":\"/share\"},"
    "{\"type\":\"directory\",\"source\":\"%s\",\"target\":\"/sealed\",\"read_only\":true}",
    rw, ro);
  g_autofree char *spec = spec_text (data, "sharer", mounts, NULL);
  g_autofree char *path = client_create_ok (f->client, spec);
  g_autofree char *id = client_get_string (f->client, path, "Id");
  g_autofree char *message = NULL, *error = NULL, *status = NULL, *text = NULL, *host = NULL;
  const char *cat_host[] = { "cat", "/share/from-host", NULL };
  const char *write_guest[] = { "sh", "-c", "echo written in the guest > /share/from-guest",
                                NULL };
  const char *cat_sealed[] = { "cat", "/sealed/sealed", NULL };
  const char *touch_sealed[] = { "touch", "/sealed/new", NULL };
  const char *mounts_table[] = { "cat", "/proc/mounts", NULL };
  g_auto (ExecResult) touched = { 0 };

  g_assert_true (g_file_set_contents (from_host, "written on the host\n", -1, NULL));
  g_assert_true (g_file_set_contents (sealed, "sealed\n", -1, NULL));

  client_call_ok (f->client, path, "Start");
  g_assert_cmpuint (count_virtiofsd (f, id), ==, 2);
  status = status_json (f, id);
  g_assert_nonnull (strstr (status, "\"shares\""));

  text = exec_output (f, path, cat_host);
  g_assert_cmpstr (text, ==, "written on the host\n");
  g_free (exec_output (f, path, write_guest));
  g_assert_true (g_file_get_contents (from_guest, &host, NULL, NULL));
  g_assert_cmpstr (host, ==, "written in the guest\n");

  g_free (text);
  text = exec_output (f, path, cat_sealed);
  g_assert_cmpstr (text, ==, "sealed\n");
  exec_run (f, path, touch_sealed, NULL, &touched);
  g_assert_cmpstr (touched.status, !=, "exit 0");
  g_assert_nonnull (strstr (touched.err, "Read-only file system"));
  g_assert_false (g_file_test (sealed_new, G_FILE_TEST_EXISTS));
  g_free (text);
  text = exec_output (f, path, mounts_table);
  g_assert_nonnull (strstr (text, "mvfs0 /share virtiofs rw"));
  g_assert_nonnull (strstr (text, "mvfs1 /sealed virtiofs ro"));

  error = client_machine_call (f->client, path, "Standby", &message);
  g_assert_cmpstr (error, ==, MV_ERROR_PREFIX "Unsupported");
  g_assert_nonnull (strstr (message, "a machine with a directory mount cannot be frozen"));

  /* A stop ends them. */
  client_call_ok (f->client, path, "Stop");
  g_assert_cmpuint (count_virtiofsd (f, id), ==, 0);

  /* So does one by the next daemon, which finds them in the record. */
  client_call_ok (f->client, path, "Start");
  g_assert_cmpuint (count_virtiofsd (f, id), ==, 2);
  mv_test_env_stop_daemon (f->env, SIGKILL);
  g_assert_cmpuint (count_virtiofsd (f, id), ==, 2);
  mv_test_env_start_daemon (f->env, NULL);
  client_assert_state_soon (f->client, path, "Running", 30000);
  g_free (text);
  text = exec_output (f, path, cat_host);
  g_assert_cmpstr (text, ==, "written on the host\n");
  client_call_ok (f->client, path, "Stop");
  g_assert_cmpuint (count_virtiofsd (f, id), ==, 0);
}

/* ---- Cloud Hypervisor's test VMM ---- */

/* The fs device goes on the wire with its tag, its virtiofsd's socket and
 * shared memory; the test VMM, like the real one, connects to the socket
 * as it boots and refuses the device without shared memory. */
static void
test_chv_share (Fixture *f, gconstpointer data)
{
  g_autofree char *dir = make_dir (shared_root, "chv");
  g_autofree char *mounts = g_strdup_printf (
    "{\"type\":\"directory\",\"source\":\"%s\",\"target\":\"/share\",\"read_only\":true}", dir);
  g_autofree char *spec = spec_text (data, "chv-sharer", mounts, NULL);
  g_autofree char *path = client_create_ok (f->client, spec);
  g_autofree char *id = client_get_string (f->client, path, "Id");
  g_autofree char *api = NULL, *info = NULL, *log = NULL;
  g_autoptr (JsonNode) root = NULL;
  JsonObject *config, *device;
  JsonArray *fs;

  client_call_ok (f->client, path, "Start");
  g_assert_cmpuint (count_virtiofsd (f, id), ==, 1);
  api = fixture_runtime_file (f, path, "api.sock");
  info = http_get_unix (api, "/api/v1/vm.info");
  root = json_from_string (info, NULL);
  g_assert_nonnull (root);
  config = json_object_get_object_member (json_node_get_object (root), "config");
  g_assert_true (json_object_get_boolean_member (json_object_get_object_member (config, "memory"),
                                                 "shared"));
  fs = json_object_get_array_member (config, "fs");
  g_assert_cmpuint (json_array_get_length (fs), ==, 1);
  device = json_array_get_object_element (fs, 0);
  g_assert_cmpstr (json_object_get_string_member (device, "tag"), ==, "mvfs0");
  g_assert_true (g_str_has_suffix (json_object_get_string_member (device, "socket"),
                                   "/fs0/virtiofsd.sock"));
  g_assert_cmpint (json_object_get_int_member (device, "num_queues"), ==, 1);
  log = fixture_runtime_file (f, path, "vmm.log");
  g_autofree char *log_text = NULL;
  g_assert_true (g_file_get_contents (log, &log_text, NULL, NULL));
  g_assert_nonnull (strstr (log_text, "fs mvfs0: connected to"));

  client_call_ok (f->client, path, "Stop");
  g_assert_cmpuint (count_virtiofsd (f, id), ==, 0);
}

/* ---- refusals ---- */

/* @spec is refused with @error_name, the message holding each of @parts,
 * and nothing is recorded. */
static void
assert_refused (Fixture *f, const char *spec, const char *error_name, const char *const *parts)
{
  g_autofree char *name = NULL, *message = NULL;
  g_autofree char *created = client_create (f->client, spec, 0, &name, &message);

  g_assert_null (created);
  g_assert_cmpstr (name, ==, error_name);
  for (guint i = 0; parts[i]; i++)
    {
      if (!strstr (message, parts[i]))
        g_error ("\"%s\" is not in: %s", parts[i], message);
    }
  g_assert_cmpuint (count_machine_dirs (mv_test_env_state_dir (f->env)), ==, 0);
}

static void
test_refused_outside (Fixture *f, gconstpointer data)
{
  g_autofree char *outside = make_dir (outside_root, "elsewhere");
  g_autofree char *escape = g_build_filename (shared_root, "escape", NULL);
  g_autofree char *file = g_build_filename (shared_root, "plain-file", NULL);
  g_autofree char *m_outside = g_strdup_printf (
    "{\"type\":\"tmpfs\",\"target\":\"/tmp\"},"
    "{\"type\":\"directory\",\"source\":\"%s\",\"target\":\"/share\"}", outside);
  g_autofree char *m_escape = g_strdup_printf (
    "{\"type\":\"directory\",\"source\":\"%s\",\"target\":\"/share\"}", escape);
  g_autofree char *m_file = g_strdup_printf (
    "{\"type\":\"directory\",\"source\":\"%s\",\"target\":\"/share\"}", file);
  g_autofree char *m_idle = g_strdup_printf (
    "{\"type\":\"directory\",\"source\":\"%s\",\"target\":\"/share\"}", shared_root);
  g_autofree char *s_outside = spec_text (data, "outside", m_outside, NULL);
  g_autofree char *s_escape = spec_text (data, "escape", m_escape, NULL);
  g_autofree char *s_file = spec_text (data, "file", m_file, NULL);
  g_autofree char *s_idle = spec_text (data, "idle", m_idle, "\"standby_after_seconds\":600");
  const char *outside_parts[] = { "mounts[1].source", "[storage] allowed-directories", NULL };
  const char *escape_parts[] = { "mounts[0].source", "leads out of", NULL };
  const char *file_parts[] = { "mounts[0].source", "only a directory can be shared", NULL };
  const char *idle_parts[] = { "standby_after_seconds", "directory mount", NULL };

  g_unlink (escape);
  g_assert_cmpint (symlink (outside, escape), ==, 0);
  g_assert_true (g_file_set_contents (file, "x", -1, NULL));
  assert_refused (f, s_outside, MV_ERROR_PREFIX "InvalidArgument", outside_parts);
  assert_refused (f, s_escape, MV_ERROR_PREFIX "InvalidArgument", escape_parts);
  assert_refused (f, s_file, MV_ERROR_PREFIX "InvalidArgument", file_parts);
  assert_refused (f, s_idle, MV_ERROR_PREFIX "InvalidArgument", idle_parts);
}

/* With no [storage] allowed-directories, no directory may be shared. */
static void
test_refused_unconfigured (Fixture *f, gconstpointer data)
{
  g_autofree char *mounts = g_strdup_printf (
    "{\"type\":\"directory\",\"source\":\"%s\",\"target\":\"/share\"}", shared_root);
  g_autofree char *spec = spec_text (data, "unconfigured", mounts, NULL);
  const char *parts[] = { "mounts[0].source", "[storage] allowed-directories: none", NULL };

  assert_refused (f, spec, MV_ERROR_PREFIX "InvalidArgument", parts);
}

static void
test_firecracker_refused (Fixture *f, gconstpointer data)
{
  g_autofree char *mounts = g_strdup_printf (
    "{\"type\":\"directory\",\"source\":\"%s\",\"target\":\"/share\"}", shared_root);
  g_autofree char *spec = spec_text (data, "firecracker", mounts, NULL);
  const char *parts[] = { "mounts[0].type", "virtio-fs", NULL };

  assert_refused (f, spec, MV_ERROR_PREFIX "Unsupported", parts);
}

/* ---- registration ---- */

static void
add (const char *type, const char *name, void (*func) (Fixture *, gconstpointer),
     gboolean allowed)
{
  ShareCase *c = g_new0 (ShareCase, 1);
  g_autofree char *storage = allowed ? g_strdup_printf ("[storage]\nallowed-directories=%s\n",
                                                        shared_root)
                                     : g_strdup ("");
  g_autofree char *guest = g_strdup_printf ("[guest]\nkernel=%s\ninitramfs=%s\n%s%s",
                                            agent_kernel, agent_initramfs, lifecycle_config,
                                            storage);
  g_autofree char *test_path = g_strdup_printf ("/shares/%s/%s", type, name);

  c->type = type;
  c->config = guest_config (type, guest);
  g_test_add (test_path, Fixture, c, share_fixture_setup, func, share_fixture_teardown);
}

int
main (int argc, char **argv)
{
  const char *build = g_getenv ("MICROVMD_BUILD_DIR");
  int status;

  g_test_init (&argc, &argv, NULL);
  g_assert_nonnull (build);
  agent_kernel = g_build_filename (build, "guest", "vmlinuz", NULL);
  agent_initramfs = g_build_filename (build, "guest", "initramfs.img", NULL);
  rootfs = g_build_filename (build, "tests", "guest", "rootfs.ext4", NULL);
  shared_root = g_dir_make_tmp ("microvmd-shared-XXXXXX", NULL);
  outside_root = g_dir_make_tmp ("microvmd-outside-XXXXXX", NULL);
  g_assert_nonnull (shared_root);
  g_assert_nonnull (outside_root);

  add ("qemu", "share", test_qemu_share, TRUE);
  add ("qemu", "refused-outside", test_refused_outside, TRUE);
  add ("qemu", "refused-unconfigured", test_refused_unconfigured, FALSE);
  add ("cloud-hypervisor", "share", test_chv_share, TRUE);
  add ("firecracker", "refused", test_firecracker_refused, TRUE);
  status = g_test_run ();

  g_autofree char *command = g_strdup_printf ("rm -rf '%s' '%s'", shared_root, outside_root);
  if (system (command) != 0)
    g_warning ("could not remove %s and %s", shared_root, outside_root);
  return status;
}
