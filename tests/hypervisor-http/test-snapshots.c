/* The runtime's snapshot and fork over the Cloud Hypervisor and
 * Firecracker backends, against the test VMMs: a snapshot keeps the VMM
 * and leaves the guest paused; a restore into another machine's
 * directory gives the guest that machine's disks, TAP, MAC and vsock
 * socket, as the requests on the wire show. */
#include "vmm-fixture.h"
#include "hypervisor/cloud-hypervisor.h"
#include "hypervisor/firecracker.h"
#include "hypervisor/http.h"
#include "hypervisor/runtime.h"
#include "hypervisor/sandbox.h"
#include "core/errors.h"

#include <glib/gstdio.h>
#include <string.h>
#include <unistd.h>

#define BOOT_ARGS "console=ttyS0 reboot=k panic=1 microvmd.boot_ms=20"

/* One machine as the reconciler hands it to the runtime. */
typedef struct {
  char                *dir;
  char                *console;
  MvBlock              disk;
  GPtrArray           *blocks;
  MvNetworkAttachment  network;
  MvRuntimeRequest     req;
} Machine;

static void
machine_init (Machine *m, VmmFixture *fixture, const MvSpec *spec, const char *name,
              const char *disk, const char *tap, const char *mac, gboolean networked)
{
  m->dir = g_build_filename (fixture->dir, name, NULL);
  if (!g_file_test (m->dir, G_FILE_TEST_IS_DIR))
    g_assert_cmpint (g_mkdir (m->dir, 0700), ==, 0);
  m->console = g_build_filename (m->dir, "console.log", NULL);
  m->disk.role = MV_BLOCK_OVERLAY;
  m->disk.path = g_strdup (disk);
  m->blocks = g_ptr_array_new ();
  g_ptr_array_add (m->blocks, &m->disk);
  m->network.tap_device = g_strdup (tap);
  m->network.mac_address = g_strdup (mac);
  m->network.address = g_strdup ("10.0.0.2/24");
  m->network.gateway = g_strdup ("10.0.0.1");
  m->req.machine_id = name;
  m->req.spec = spec;
  m->req.runtime_dir = m->dir;
  m->req.blocks = m->blocks;
  m->req.network = networked ? &m->network : NULL;
}

static void
machine_clear (Machine *m)
{
  g_free (m->dir);
  g_free (m->console);
  g_free (m->disk.path);
  g_ptr_array_unref (m->blocks);
  g_free (m->network.tap_device);
  g_free (m->network.mac_address);
  g_free (m->network.address);
  g_free (m->network.gateway);
  g_clear_pointer (&m->req.vmm, json_object_unref);
}

static MvSpec *
guest_spec (VmmFixture *fixture)
{
  MvSpec *spec = mv_spec_new ();

  spec->name = g_strdup ("guest");
  spec->kernel = g_strdup (fixture->kernel);
  spec->kernel_args = g_strdup (BOOT_ARGS);
  spec->readiness = MV_READINESS_VMM;
  spec->memory_bytes = 256 << 20;
  return spec;
}

static MvRuntime *
runtime_for (const char *name, MvSandbox *sandbox)
{
  return mv_hypervisor_runtime_new (vmm_fixture_starter (name), sandbox, 10, 5);
}

static char *
read_text (const char *path)
{
  char *text = NULL;

  g_assert_true (g_file_get_contents (path, &text, NULL, NULL));
  return text;
}

/* The request lines the test VMM in @dir logged for @what ("PUT /x"). */
static char *
logged (const char *dir, const char *what)
{
  g_autofree char *path = g_build_filename (dir, "fake-vmm.requests", NULL);
  g_autofree char *text = read_text (path);
  g_auto (GStrv) lines = g_strsplit (text, "\n", -1);
  g_autofree char *prefix = g_strconcat (what, " ", NULL);

  for (char **line = lines; *line; line++)
    if (g_str_has_prefix (*line, prefix))
      return g_strdup (*line + strlen (prefix));
  g_error ("%s sent no %s; it logged:\n%s", dir, what, text);
  return NULL;
}

static void
arm_request_log (const char *dir)
{
  g_autofree char *path = g_build_filename (dir, "fake-vmm.control", NULL);

  g_assert_true (g_file_set_contents (path, "log-requests", -1, NULL));
}

static void
wait_counter_above (const char *console, int value)
{
  gint64 deadline = g_get_monotonic_time () + VMM_FIXTURE_CONSOLE_TIMEOUT_MS * 1000;

  while (vmm_fixture_last_counter (console) <= value)
    {
      g_assert_cmpint (g_get_monotonic_time (), <, deadline);
      g_usleep (50 * 1000);
    }
}

/* Starts @m and waits for its guest to count. */
static void
start (MvRuntime *rt, Machine *m)
{
  g_autoptr (GError) error = NULL;

  m->req.vmm = rt->start (rt, &m->req, &error);
  g_assert_no_error (error);
  g_assert_nonnull (m->req.vmm);
  wait_counter_above (m->console, 0);
}

static int
compare_names (gconstpointer a, gconstpointer b)
{
  return g_strcmp0 (*(char *const *) a, *(char *const *) b);
}

/* snapshot of the running guest of @m into @state: the VMM stays, the
 * guest is paused and stands still, and runs on when resumed. */
static void
snapshot_and_resume (MvRuntime *rt, Machine *m, const char *state, const char *files)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MvProcess) vmm = mv_process_attach_recorded (m->req.vmm);
  g_autofree char *listing = NULL;
  g_autoptr (GDir) dir = NULL;
  g_autoptr (GPtrArray) names = g_ptr_array_new_with_free_func (g_free);
  const char *name;
  int counter;

  g_assert_nonnull (vmm);
  g_assert_cmpint (g_mkdir (state, 0700), ==, 0);
  g_assert_true (rt->snapshot (rt, &m->req, state, &error));
  g_assert_no_error (error);
  g_assert_true (mv_process_alive (vmm));
  g_assert_cmpint (rt->probe (rt, &m->req), ==, MV_VMM_PAUSED);
  dir = g_dir_open (state, 0, NULL);
  while ((name = g_dir_read_name (dir)))
    g_ptr_array_add (names, g_strdup (name));
  g_ptr_array_sort (names, compare_names);
  g_ptr_array_add (names, NULL);
  listing = g_strjoinv (" ", (char **) names->pdata);
  g_assert_cmpstr (listing, ==, files);

  counter = vmm_fixture_last_counter (m->console);
  g_usleep (1300 * 1000);
  g_assert_cmpint (vmm_fixture_last_counter (m->console), ==, counter);

  /* A second snapshot of the guest, paused as it is, leaves it paused. */
  {
    g_autofree char *again = g_strconcat (state, "-again", NULL);

    g_assert_cmpint (g_mkdir (again, 0700), ==, 0);
    g_assert_true (rt->snapshot (rt, &m->req, again, &error));
    g_assert_no_error (error);
    g_assert_cmpint (rt->probe (rt, &m->req), ==, MV_VMM_PAUSED);
  }

  g_assert_true (rt->resume (rt, &m->req, &error));
  g_assert_no_error (error);
  g_assert_cmpint (rt->probe (rt, &m->req), ==, MV_VMM_RUNNING);
  wait_counter_above (m->console, counter);
}

static void
stop (MvRuntime *rt, Machine *m)
{
  g_autoptr (GError) error = NULL;

  g_assert_true (rt->stop (rt, &m->req, TRUE, &error));
  g_assert_no_error (error);
  g_assert_true (rt->destroy (rt, &m->req, &error));
  g_assert_no_error (error);
}

/* What the VMM serving @m was given, as vm.info reports it. */
static JsonObject *
chv_config (Machine *m)
{
  const char *socket_path = json_object_get_string_member (m->req.vmm, "socket");
  g_autoptr (MvHttp) http = mv_http_new (socket_path, "Cloud Hypervisor");
  g_autoptr (JsonNode) reply = NULL;
  g_autoptr (GError) error = NULL;

  g_assert_true (mv_http_call_json (http, "GET", "/api/v1/vm.info", NULL, &reply, NULL, &error));
  g_assert_no_error (error);
  return json_object_ref (json_object_get_object_member (json_node_get_object (reply), "config"));
}

static void
test_chv (VmmFixture *fixture, gconstpointer data)
{
  g_autoptr (MvRuntime) rt = runtime_for ("cloud-hypervisor", NULL);
  g_autoptr (MvSpec) spec = guest_spec (fixture);
  g_autofree char *state = g_build_filename (fixture->dir, "state", NULL);
  g_autofree char *fork_disk = g_build_filename (fixture->dir, "fork.img", NULL);
  g_autofree char *restore_dir = NULL;
  g_autofree char *body = NULL;
  g_autofree char *expected = NULL;
  g_autofree char *vsock = NULL;
  g_autofree char *saved = NULL;
  g_autoptr (JsonObject) config = NULL;
  g_autoptr (GError) error = NULL;
  JsonObject *disk, *net;
  Machine origin = { 0 }, fork = { 0 };
  int counter;

  g_assert_true (g_file_set_contents (fork_disk, "fork", -1, NULL));
  machine_init (&origin, fixture, spec, "origin", fixture->disk, "mvtap0", "52:54:00:00:00:01",
                TRUE);
  start (rt, &origin);
  snapshot_and_resume (rt, &origin, state, "config.json memory-ranges state.json vm-spec.json");
  counter = vmm_fixture_last_counter (origin.console);

  /* Restored as another machine, beside the first. */
  machine_init (&fork, fixture, spec, "fork", fork_disk, "mvtap7", "52:54:00:00:00:02", TRUE);
  arm_request_log (fork.dir);
  fork.req.vmm = rt->restore (rt, &fork.req, state, &error);
  g_assert_no_error (error);
  g_assert_nonnull (fork.req.vmm);
  wait_counter_above (fork.console, counter - 2);

  /* The VMM was pointed at an edited copy of the snapshot... */
  restore_dir = g_build_filename (fork.dir, MV_CLOUD_HYPERVISOR_RESTORE_DIR, NULL);
  body = logged (fork.dir, "PUT /api/v1/vm.restore");
  expected = g_strdup_printf ("{\"source_url\":\"file://%s\"}", restore_dir);
  g_assert_cmpstr (body, ==, expected);
  /* ...whose config gives the guest this machine's disk, NIC and socket. */
  config = chv_config (&fork);
  disk = json_array_get_object_element (json_object_get_array_member (config, "disks"), 0);
  g_assert_cmpstr (json_object_get_string_member (disk, "path"), ==, fork_disk);
  net = json_array_get_object_element (json_object_get_array_member (config, "net"), 0);
  g_assert_cmpstr (json_object_get_string_member (net, "tap"), ==, "mvtap7");
  g_assert_cmpstr (json_object_get_string_member (net, "mac"), ==, "52:54:00:00:00:02");
  vsock = g_build_filename (fork.dir, "vsock.sock", NULL);
  g_assert_cmpstr (json_object_get_string_member (json_object_get_object_member (config, "vsock"),
                                                  "socket"), ==, vsock);
  /* The console is the VMM's terminal, which its parent holds. */
  g_assert_cmpstr (json_object_get_string_member (json_object_get_object_member (config, "serial"),
                                                  "mode"), ==, "Tty");
  g_assert_null (json_object_get_string_member_with_default (
    json_object_get_object_member (config, "serial"), "file", NULL));
  /* The snapshot itself is the origin's still. */
  {
    g_autofree char *path = g_build_filename (state, "config.json", NULL);
    saved = read_text (path);
    g_assert_nonnull (strstr (saved, fixture->disk));
    g_assert_null (strstr (saved, fork_disk));
  }
  /* The origin ran on meanwhile. */
  wait_counter_above (origin.console, counter);

  /* A machine with another number of disks is refused, and nothing runs. */
  {
    Machine two = { 0 };
    g_autoptr (GPtrArray) left = NULL;
    g_autofree char *socket_path = NULL;

    machine_init (&two, fixture, spec, "two", fork_disk, "mvtap8", NULL, TRUE);
    g_ptr_array_add (two.blocks, &two.disk);
    g_assert_null (rt->restore (rt, &two.req, state, &error));
    g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
    g_assert_nonnull (strstr (error->message, "the snapshot's guest has 1 disks; it cannot be "
                              "given 2"));
    g_clear_error (&error);
    socket_path = g_build_filename (two.dir, "api.sock", NULL);
    left = mv_process_find_by_socket (socket_path);
    g_assert_cmpuint (left->len, ==, 0);
    machine_clear (&two);
  }

  stop (rt, &fork);
  stop (rt, &origin);
  machine_clear (&fork);
  machine_clear (&origin);
}

static void
test_firecracker (VmmFixture *fixture, gconstpointer data)
{
  g_autoptr (MvRuntime) rt = runtime_for ("firecracker", NULL);
  g_autoptr (MvSpec) spec = guest_spec (fixture);
  g_autofree char *state = g_build_filename (fixture->dir, "state", NULL);
  g_autofree char *fork_disk = g_build_filename (fixture->dir, "fork.img", NULL);
  g_autofree char *body = NULL;
  g_autofree char *expected = NULL;
  g_autoptr (GError) error = NULL;
  Machine origin = { 0 }, fork = { 0 }, same = { 0 };
  int counter;

  g_assert_true (g_file_set_contents (fork_disk, "fork", -1, NULL));
  machine_init (&origin, fixture, spec, "origin", fixture->disk, "mvtap0", "52:54:00:00:00:01",
                TRUE);
  start (rt, &origin);
  snapshot_and_resume (rt, &origin, state, "devices.json memory vm-spec.json vmstate");
  counter = vmm_fixture_last_counter (origin.console);

  /* Firecracker opens the disks where the snapshot's guest had them:
   * another disk cannot be given without the sandbox's wall. */
  machine_init (&fork, fixture, spec, "fork", fork_disk, "mvtap7", "52:54:00:00:00:02", TRUE);
  g_assert_null (rt->restore (rt, &fork.req, state, &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_UNSUPPORTED);
  g_assert_nonnull (strstr (error->message, "disks[0].path: Firecracker restores a guest only "
                            "onto the disk files it had"));
  g_assert_nonnull (strstr (error->message, fork_disk));
  g_assert_null (strstr (error->message, "The console's last lines"));
  g_clear_error (&error);

  /* On the same disk, the state restores as another machine: its TAP and
   * vsock socket are overrides of the load. */
  machine_init (&same, fixture, spec, "same", fixture->disk, "mvtap7", "52:54:00:00:00:02", TRUE);
  arm_request_log (same.dir);
  same.req.vmm = rt->restore (rt, &same.req, state, &error);
  g_assert_no_error (error);
  g_assert_nonnull (same.req.vmm);
  wait_counter_above (same.console, counter - 2);
  body = logged (same.dir, "PUT /snapshot/load");
  expected = g_strdup_printf ("{\"snapshot_path\":\"%s/vmstate\",\"mem_backend\":"
                              "{\"backend_type\":\"File\",\"backend_path\":\"%s/memory\"},"
                              "\"resume_vm\":false,\"network_overrides\":[{\"iface_id\":\"net0\","
                              "\"host_dev_name\":\"mvtap7\"}],\"vsock_override\":{\"uds_path\":"
                              "\"%s/vsock.sock\"}}", state, state, same.dir);
  g_assert_cmpstr (body, ==, expected);
  /* The serial console stays on Firecracker's stdin and stdout, which its
   * parent holds. */
  {
    g_autofree char *log_path = g_build_filename (same.dir, "fake-vmm.requests", NULL);
    g_autofree char *log_text = read_text (log_path);
    g_assert_null (strstr (log_text, "PUT /serial "));
  }
  wait_counter_above (origin.console, counter);

  stop (rt, &same);
  stop (rt, &origin);
  machine_clear (&same);
  machine_clear (&fork);
  machine_clear (&origin);
}

/* Behind the sandbox's wall, the forked guest's own disk is shown to
 * Firecracker where the snapshot's guest had its disk: the load finds a
 * disk there though the origin's file is gone from the host. */
static void
test_firecracker_walled (VmmFixture *fixture, gconstpointer data)
{
  g_autoptr (GKeyFile) config = g_key_file_new ();
  g_autofree char *text = g_strdup_printf ("[paths]\nallowed-directories=%s\n", fixture->dir);
  g_autoptr (MvSandbox) sandbox = NULL;
  g_autoptr (MvRuntime) rt = NULL;
  g_autoptr (MvSpec) spec = guest_spec (fixture);
  g_autofree char *state = g_build_filename (fixture->dir, "state", NULL);
  g_autofree char *fork_disk = g_build_filename (fixture->dir, "fork.img", NULL);
  g_autofree char *body = NULL;
  g_autoptr (GError) error = NULL;
  Machine origin = { 0 }, fork = { 0 };
  int counter;

  if (getuid () != 0)
    {
      g_test_skip ("the sandbox's wall needs root");
      return;
    }
  g_assert_true (g_key_file_load_from_data (config, text, -1, G_KEY_FILE_NONE, NULL));
  sandbox = mv_sandbox_new_from_config (config, &error);
  g_assert_no_error (error);
  g_assert_true (mv_sandbox_enabled (sandbox));
  rt = runtime_for ("firecracker", sandbox);
  g_assert_true (g_file_set_contents (fork_disk, "fork", -1, NULL));
  machine_init (&origin, fixture, spec, "origin", fixture->disk, NULL, NULL, FALSE);
  start (rt, &origin);
  g_assert_cmpint (json_object_get_int_member (origin.req.vmm, "uid"), >, 0);
  snapshot_and_resume (rt, &origin, state, "devices.json memory vm-spec.json vmstate");
  counter = vmm_fixture_last_counter (origin.console);
  stop (rt, &origin);
  g_assert_cmpint (g_unlink (fixture->disk), ==, 0);

  machine_init (&fork, fixture, spec, "fork", fork_disk, NULL, NULL, FALSE);
  arm_request_log (fork.dir);
  fork.req.vmm = rt->restore (rt, &fork.req, state, &error);
  g_assert_no_error (error);
  g_assert_nonnull (fork.req.vmm);
  wait_counter_above (fork.console, counter - 2);
  body = logged (fork.dir, "PUT /snapshot/load");
  g_assert_null (strstr (body, "network_overrides"));
  g_assert_nonnull (strstr (body, "\"vsock_override\":{\"uds_path\":\""));

  stop (rt, &fork);
  machine_clear (&fork);
  machine_clear (&origin);
}

#define VMM_TEST(name, func) \
  g_test_add (name, VmmFixture, NULL, vmm_fixture_setup, func, vmm_fixture_teardown)

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  VMM_TEST ("/snapshots/cloud-hypervisor", test_chv);
  VMM_TEST ("/snapshots/firecracker", test_firecracker);
  VMM_TEST ("/snapshots/firecracker-walled", test_firecracker_walled);
  return g_test_run ();
}
