/* The cloud-hypervisor backend against the test VMM. */
#include "vmm-fixture.h"
#include "hypervisor/cloud-hypervisor.h"
#include "hypervisor/http.h"
#include "hypervisor/versions.h"
#include "core/errors.h"

#include <glib/gstdio.h>
#include <string.h>

#define MIB (G_GUINT64_CONSTANT (1) << 20)

static GPtrArray *warnings;

/* Warnings are what the deprecation policy produces: keep them for the
 * tests to look at, rather than let GTest abort on them. */
static GLogWriterOutput
writer (GLogLevelFlags level, const GLogField *fields, gsize n_fields, gpointer data)
{
  if (level & G_LOG_LEVEL_WARNING)
    for (gsize i = 0; i < n_fields; i++)
      if (strcmp (fields[i].key, "MESSAGE") == 0)
        {
          g_ptr_array_add (warnings, g_strdup (fields[i].value));
          return G_LOG_WRITER_HANDLED;
        }
  return g_log_writer_standard_streams (level, fields, n_fields, data);
}

/* What the VMM was given, as vm.info reports it. */
static JsonObject *
vm_config (const char *socket_path)
{
  g_autoptr (MvHttp) http = mv_http_new (socket_path, "Cloud Hypervisor");
  g_autoptr (JsonNode) reply = NULL;
  g_autoptr (GError) error = NULL;

  g_assert_true (mv_http_call_json (http, "GET", "/api/v1/vm.info", NULL, &reply, NULL, &error));
  g_assert_no_error (error);
  return json_object_ref (json_object_get_object_member (json_node_get_object (reply), "config"));
}

/* Not given: left out, or null as the VMM reports a default of none. */
static gboolean
absent (JsonObject *object, const char *member)
{
  return !json_object_has_member (object, member) || json_object_get_null_member (object, member);
}

/* The net device's one limiter: @size bytes a second, refilled each
 * second, no limit on operations. */
static void
assert_net_bandwidth (JsonObject *net, gint64 size)
{
  JsonObject *limiter = json_object_get_object_member (net, "rate_limiter_config");
  JsonObject *bucket = json_object_get_object_member (limiter, "bandwidth");

  g_assert_nonnull (bucket);
  g_assert_true (absent (limiter, "ops"));
  g_assert_cmpint (json_object_get_int_member (bucket, "size"), ==, size);
  g_assert_cmpint (json_object_get_int_member (bucket, "refill_time"), ==, 1000);
}

/* One limiter for both ways: limits that differ are refused before
 * anything starts, naming the field to change. */
static void
test_net_limits_differ (VmmFixture *fixture, gconstpointer data)
{
  g_autoptr (MvStarter) starter = vmm_fixture_starter ("cloud-hypervisor");
  g_autoptr (MvVmSpec) spec = vmm_fixture_spec (fixture);
  g_autoptr (MvProcess) vmm = NULL;
  g_autoptr (GError) error = NULL;
  const guint64 cases[][2] = { { 2 << 20, 1 << 20 }, { 1 << 20, 0 }, { 0, 1 << 20 } };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      mv_vm_spec_set_net_limits (spec, 1500, cases[i][0], cases[i][1]);
      g_assert_false (starter->check (starter, fixture->socket_path, spec, &error));
      g_assert_error (error, MV_ERROR, MV_ERROR_UNSUPPORTED);
      g_assert_cmpstr (error->message, ==, "download_bytes_per_second: Cloud Hypervisor limits "
                       "both directions alike; give upload_bytes_per_second the same value");
      g_clear_error (&error);
    }
  g_assert_false (g_file_test (fixture->socket_path, G_FILE_TEST_EXISTS));

  /* Unlimited both ways: no limiter, and no MTU but the default. */
  mv_vm_spec_set_net_limits (spec, 0, 0, 0);
  g_assert_true (starter->check (starter, fixture->socket_path, spec, &error));
  g_assert_no_error (error);
  {
    g_autoptr (MvHypervisor) hv = starter->start_vm (starter, fixture->socket_path, spec, &vmm,
                                                     &error);
    g_autoptr (JsonObject) config = NULL;
    JsonObject *net;

    g_assert_no_error (error);
    config = vm_config (fixture->socket_path);
    net = json_array_get_object_element (json_object_get_array_member (config, "net"), 0);
    g_assert_true (absent (net, "rate_limiter_config"));
    g_assert_true (absent (net, "mtu"));
  }
}

static void
test_lifecycle (VmmFixture *fixture, gconstpointer data)
{
  g_autoptr (MvStarter) starter = vmm_fixture_starter ("cloud-hypervisor");
  g_autoptr (MvProcess) vmm = NULL;
  g_autoptr (MvHypervisor) hv = NULL;
  g_autoptr (GError) error = NULL;
  g_autoptr (JsonObject) config = NULL;
  g_autofree char *version = NULL;
  JsonObject *disk, *memory, *net;
  MvCapabilities caps = starter->capabilities (starter);
  MvVmStats stats;
  MvVmInfo info;
  int counter;

  g_assert_cmpstr (starter->type, ==, "cloud-hypervisor");
  g_assert_cmpstr (starter->version (starter), ==, "53.0.0");
  g_assert_true (starter->power_off_ends_vm (starter));
  g_assert_true (caps.hotplug_cpu && caps.hotplug_memory && caps.snapshot && caps.vsock);

  hv = vmm_fixture_boot (fixture, starter, &vmm);
  g_assert_true (mv_process_alive (vmm));
  vmm_fixture_assert_state (hv, MV_VM_STATE_RUNNING);
  g_assert_true (hv->vm_info (hv, &info, &error));
  g_assert_true (info.has_memory_bytes);
  g_assert_cmpuint (info.memory_bytes, ==, 256 * MIB);

  /* The VmConfig carries the spec: CPUs with room, memory with its
   * virtio-mem region, the rate-limited disk, the TAP and MAC, the serial
   * port on the VMM's terminal with the virtio console off. */
  config = vm_config (fixture->socket_path);
  g_assert_cmpint (json_object_get_int_member (json_object_get_object_member (config, "cpus"),
                                               "max_vcpus"), ==, 2);
  memory = json_object_get_object_member (config, "memory");
  g_assert_cmpstr (json_object_get_string_member (memory, "hotplug_method"), ==, "VirtioMem");
  g_assert_cmpint (json_object_get_int_member (memory, "hotplug_size"), ==, 256 * MIB);
  disk = json_array_get_object_element (json_object_get_array_member (config, "disks"), 0);
  g_assert_cmpint (json_object_get_int_member (json_object_get_object_member (
                     json_object_get_object_member (disk, "rate_limiter_config"), "bandwidth"),
                     "size"), ==, 10 << 20);
  net = json_array_get_object_element (json_object_get_array_member (config, "net"), 0);
  g_assert_cmpstr (json_object_get_string_member (net, "tap"), ==, "mvtap0");
  g_assert_cmpint (json_object_get_int_member (net, "mtu"), ==, 1400);
  assert_net_bandwidth (net, 1 << 20);
  g_assert_cmpstr (json_object_get_string_member (json_object_get_object_member (config, "console"),
                                                  "mode"), ==, "Off");
  /* The serial port is the VMM's terminal, which its parent holds. */
  g_assert_cmpstr (json_object_get_string_member (json_object_get_object_member (config, "serial"),
                                                  "mode"), ==, "Tty");

  version = hv->vmm_version (hv, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (version, ==, "53.0.0");

  /* Paused, the guest's clock stands still. */
  g_assert_true (hv->pause_vm (hv, &error));
  g_assert_no_error (error);
  vmm_fixture_assert_state (hv, MV_VM_STATE_PAUSED);
  counter = vmm_fixture_last_counter (fixture->console_path);
  g_usleep (1300 * 1000);
  g_assert_cmpint (vmm_fixture_last_counter (fixture->console_path), ==, counter);
  g_assert_true (hv->resume_vm (hv, &error));
  g_assert_no_error (error);
  vmm_fixture_assert_state (hv, MV_VM_STATE_RUNNING);
  g_assert_true (vmm_fixture_wait_console (fixture->console_path, "MICROVMD-COUNTER 1",
                                           VMM_FIXTURE_CONSOLE_TIMEOUT_MS));

  g_assert_true (hv->stats (hv, &stats, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (stats.disk_read_ops, >, 0);
  g_assert_cmpuint (stats.disk_read_bytes, ==, stats.disk_read_ops * 4096);

  /* Resizes within what the guest booted with room for. */
  g_assert_true (hv->resize_vm_cpu (hv, 2, &error));
  g_assert_no_error (error);
  g_assert_false (hv->resize_vm_cpu (hv, 3, &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  g_assert_true (hv->resize_vm_memory (hv, 384 * MIB, &error));
  g_assert_no_error (error);
  g_assert_true (hv->vm_info (hv, &info, &error));
  g_assert_cmpuint (info.memory_bytes, ==, 384 * MIB);
  g_assert_false (hv->resize_vm_memory (hv, 385 * MIB, &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  g_assert_false (hv->resize_vm_memory (hv, 1024 * MIB, &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  g_assert_true (hv->vm_info (hv, &info, &error));
  g_assert_cmpuint (info.memory_bytes, ==, 384 * MIB);

  /* The power button: the guest powers off and the VMM ends with it. */
  g_assert_true (hv->shutdown_vm (hv, &error));
  g_assert_no_error (error);
  g_assert_true (vmm_fixture_wait_console (fixture->console_path, "MICROVMD-POWEROFF acpi",
                                           VMM_FIXTURE_CONSOLE_TIMEOUT_MS));
  g_assert_true (mv_process_wait (vmm, 5000));
  starter->cleanup (starter, fixture->socket_path);
  g_assert_false (g_file_test (fixture->socket_path, G_FILE_TEST_EXISTS));
}

static void
test_shutdown (VmmFixture *fixture, gconstpointer data)
{
  g_autoptr (MvStarter) starter = vmm_fixture_starter ("cloud-hypervisor");
  g_autoptr (MvProcess) vmm = NULL;
  g_autoptr (MvHypervisor) hv = vmm_fixture_boot (fixture, starter, &vmm);
  g_autoptr (MvHypervisor) again = NULL;
  g_autoptr (GError) error = NULL;

  /* Destroyed, the guest stops and the VMM stays. */
  g_assert_true (hv->destroy_vm (hv, &error));
  g_assert_no_error (error);
  vmm_fixture_assert_state (hv, MV_VM_STATE_STOPPED);
  g_assert_true (mv_process_alive (vmm));

  /* A daemon restarted meanwhile reaches it by its socket. */
  again = starter->connect (starter, fixture->socket_path, &error);
  g_assert_no_error (error);
  vmm_fixture_assert_state (again, MV_VM_STATE_STOPPED);
  g_assert_true (again->shutdown (again, &error));
  g_assert_no_error (error);
  g_assert_true (mv_process_wait (vmm, 5000));
}

static void
test_snapshot_restore (VmmFixture *fixture, gconstpointer data)
{
  g_autoptr (MvStarter) starter = vmm_fixture_starter ("cloud-hypervisor");
  g_autoptr (MvProcess) vmm = NULL;
  g_autoptr (MvHypervisor) hv = vmm_fixture_boot (fixture, starter, &vmm);
  g_autoptr (GError) error = NULL;
  g_autoptr (JsonObject) config = NULL;
  g_autofree char *running = g_build_filename (fixture->dir, "running", NULL);
  g_autofree char *console_text = NULL;
  VmmRestored restored = { 0 };

  /* Only a paused guest can be snapshotted; the VMM says why not. */
  g_assert_cmpint (g_mkdir (running, 0700), ==, 0);
  g_assert_false (hv->snapshot_vm (hv, running, &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_STATE);
  g_assert_nonnull (strstr (error->message, "Trying to snapshot while VM is running"));
  g_clear_error (&error);

  vmm_fixture_snapshot_restore (fixture, starter, hv, vmm, &restored);
  config = vm_config (restored.socket_path);
  g_assert_cmpstr (json_object_get_string_member (
                     json_array_get_object_element (json_object_get_array_member (config, "net"), 0),
                     "tap"), ==, "mvtap9");
  /* Only the TAP is edited: the limits and MTU are the snapshot's. */
  assert_net_bandwidth (json_array_get_object_element (json_object_get_array_member (config, "net"), 0),
                        1 << 20);
  /* The snapshot itself is kept as it was. */
  {
    g_autofree char *path = g_build_filename (restored.snapshot, "config.json", NULL);
    g_autofree char *text = NULL;
    g_assert_true (g_file_get_contents (path, &text, NULL, NULL));
    g_assert_nonnull (strstr (text, "mvtap0"));
    g_assert_null (strstr (text, "mvtap9"));
  }

  vmm_fixture_resume_restored (&restored);
  /* The guest went on where it was: it did not boot again. */
  g_assert_true (g_file_get_contents (restored.spec.console.path, &console_text, NULL, NULL));
  g_assert_null (strstr (console_text, "Linux version"));
  starter->cleanup (starter, restored.socket_path);
  {
    g_autofree char *restore_dir = g_build_filename (restored.dir,
                                                     MV_CLOUD_HYPERVISOR_RESTORE_DIR, NULL);
    g_assert_false (g_file_test (restore_dir, G_FILE_TEST_EXISTS));
  }
  vmm_restored_clear (&restored);
}

static GPtrArray *
affinity_of (const guint32 pairs[][2], guint n)
{
  GPtrArray *affinity = mv_cpu_affinity_list_copy (NULL);

  for (guint i = 0; i < n; i++)
    {
      MvCpuAffinity *a = mv_cpu_affinity_new (pairs[i][0]);

      g_array_append_val (a->host_cpus, pairs[i][1]);
      g_ptr_array_add (affinity, a);
    }
  return affinity;
}

/* cpus.affinity as compact JSON, "" if there is none. */
static char *
affinity_text (JsonObject *config)
{
  JsonObject *cpus = json_object_get_object_member (config, "cpus");
  g_autoptr (JsonNode) node = NULL;

  if (absent (cpus, "affinity"))
    return g_strdup ("");
  node = json_node_init_array (json_node_alloc (), json_object_get_array_member (cpus, "affinity"));
  return json_to_string (node, FALSE);
}

static gboolean
log_says (const char *socket_path, const char *text)
{
  g_autofree char *log = mv_vmm_log_path (socket_path);
  g_autofree char *contents = NULL;

  return g_file_get_contents (log, &contents, NULL, NULL) && strstr (contents, text);
}

/* The vCPUs' host CPUs go in cpus.affinity, which the VMM takes (the
 * test VMM checks it as Cloud Hypervisor's types do and pins each vCPU
 * thread as it starts it, a hot-added one too); a restored guest is
 * pinned as the restore says, not as it was. */
static void
test_cpu_affinity (VmmFixture *fixture, gconstpointer data)
{
  static const guint32 pinned[][2] = { { 0, 1 }, { 1, 0 } };
  static const guint32 repinned[][2] = { { 1, 1 } };
  g_autoptr (MvStarter) starter = vmm_fixture_starter ("cloud-hypervisor");
  g_autoptr (MvVmSpec) spec = vmm_fixture_spec (fixture);
  g_autoptr (MvProcess) vmm = NULL;
  g_autoptr (MvHypervisor) hv = NULL;
  g_autoptr (GError) error = NULL;
  g_autoptr (JsonObject) config = NULL;
  g_autofree char *text = NULL;
  VmmRestored restored = { 0 };

  g_ptr_array_unref (spec->cpu.affinity);
  spec->cpu.affinity = affinity_of (pinned, G_N_ELEMENTS (pinned));
  hv = starter->start_vm (starter, fixture->socket_path, spec, &vmm, &error);
  g_assert_no_error (error);
  g_assert_true (vmm_fixture_wait_console (fixture->console_path, "MICROVMD-GUEST-READY",
                                           VMM_FIXTURE_CONSOLE_TIMEOUT_MS));
  config = vm_config (fixture->socket_path);
  text = affinity_text (config);
  g_assert_cmpstr (text, ==, "[{\"vcpu\":0,\"host_cpus\":[1]},{\"vcpu\":1,\"host_cpus\":[0]}]");
  /* The boot vCPU is pinned; the second as a resize adds it. */
  g_assert_true (log_says (fixture->socket_path, "vCPU 0 runs on host CPUs [1]"));
  g_assert_false (log_says (fixture->socket_path, "vCPU 1 runs"));
  g_assert_true (hv->resize_vm_cpu (hv, 2, &error));
  g_assert_no_error (error);
  g_assert_true (log_says (fixture->socket_path, "vCPU 1 runs on host CPUs [0]"));
  /* Cloud Hypervisor pins its own threads: nothing for the daemon to do. */
  g_assert_null (hv->pin_vcpus);

  restored.spec.cpu_affinity = affinity_of (repinned, G_N_ELEMENTS (repinned));
  vmm_fixture_snapshot_restore (fixture, starter, hv, vmm, &restored);
  g_clear_pointer (&config, json_object_unref);
  g_clear_pointer (&text, g_free);
  config = vm_config (restored.socket_path);
  text = affinity_text (config);
  g_assert_cmpstr (text, ==, "[{\"vcpu\":1,\"host_cpus\":[1]}]");
  vmm_fixture_resume_restored (&restored);
  vmm_restored_clear (&restored);
}

/* A guest restored without pinning is not pinned as its snapshot was. */
static void
test_cpu_affinity_restored_without (VmmFixture *fixture, gconstpointer data)
{
  static const guint32 pinned[][2] = { { 0, 1 } };
  g_autoptr (MvStarter) starter = vmm_fixture_starter ("cloud-hypervisor");
  g_autoptr (MvVmSpec) spec = vmm_fixture_spec (fixture);
  g_autoptr (MvProcess) vmm = NULL;
  g_autoptr (MvHypervisor) hv = NULL;
  g_autoptr (GError) error = NULL;
  g_autoptr (JsonObject) config = NULL;
  g_autofree char *text = NULL;
  VmmRestored restored = { 0 };

  g_ptr_array_unref (spec->cpu.affinity);
  spec->cpu.affinity = affinity_of (pinned, G_N_ELEMENTS (pinned));
  hv = starter->start_vm (starter, fixture->socket_path, spec, &vmm, &error);
  g_assert_no_error (error);
  vmm_fixture_snapshot_restore (fixture, starter, hv, vmm, &restored);
  config = vm_config (restored.socket_path);
  text = affinity_text (config);
  g_assert_cmpstr (text, ==, "");
  vmm_fixture_resume_restored (&restored);
  vmm_restored_clear (&restored);
}

static void
test_errors (VmmFixture *fixture, gconstpointer data)
{
  g_autoptr (MvStarter) starter = vmm_fixture_starter ("cloud-hypervisor");
  g_autoptr (MvProcess) vmm = NULL;
  g_autoptr (MvHypervisor) hv = vmm_fixture_boot (fixture, starter, &vmm);
  g_autoptr (MvHttp) http = mv_http_new (fixture->socket_path, "Cloud Hypervisor");
  g_autoptr (GError) error = NULL;
  g_auto (MvHttpResponse) response = { 0 };
  g_autofree char *big = NULL;
  g_autofree char *text = NULL;
  g_autoptr (JsonNode) create = json_from_string ("{\"payload\":{\"kernel\":\"x\"}}", NULL);

  /* A wrong-state call is Cloud Hypervisor's 500, quoted. */
  g_assert_false (hv->resume_vm (hv, &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_STATE);
  g_assert_nonnull (strstr (error->message, "(500): Error resuming the VM: Invalid VM state "
                            "transition: Running to Running"));
  g_clear_error (&error);

  /* A second vm.create. */
  g_assert_false (mv_http_call_json (http, "PUT", "/api/v1/vm.create", create, NULL, NULL,
                                     &error));
  g_assert_nonnull (strstr (error->message, "The VM is already created"));
  g_clear_error (&error);

  /* A body over micro-http's 51200 bytes is refused by the server itself. */
  big = g_strnfill (60000, ' ');
  big[0] = '{';
  big[59999] = '}';
  g_assert_true (mv_http_request (http, "PUT", "/api/v1/vm.resize", big, 60000, &response, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (response.status, ==, 400);
  text = mv_http_error_text (response.body);
  g_assert_cmpstr (text, ==, "Request payload with size 60000 is larger than the limit of 51200 "
                   "allowed by server.");
}

static void
test_not_created (VmmFixture *fixture, gconstpointer data)
{
  g_autofree char *binary = vmm_fixture_binary ("cloud-hypervisor");
  g_autofree char *option = g_strconcat ("path=", fixture->socket_path, NULL);
  const char *argv[] = { binary, "--api-socket", option, NULL };
  g_autoptr (GError) error = NULL;
  g_autoptr (MvProcess) vmm = mv_process_start (fixture->socket_path, argv, NULL, 10000, &error);
  g_autoptr (MvStarter) starter = vmm_fixture_starter ("cloud-hypervisor");
  g_autoptr (MvHypervisor) hv = NULL;
  MvVmInfo info;

  g_assert_no_error (error);
  hv = starter->connect (starter, fixture->socket_path, &error);
  g_assert_no_error (error);
  /* Before vm.create there is no VM: 404, which is a state error here. */
  g_assert_false (hv->vm_info (hv, &info, &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_STATE);
  g_assert_nonnull (strstr (error->message, "(404): Error getting VM info: The VM is not created"));
  g_clear_error (&error);
  g_assert_false (hv->pause_vm (hv, &error));
  g_assert_nonnull (strstr (error->message, "The VM is not created"));
}

static void
test_stale_socket (VmmFixture *fixture, gconstpointer data)
{
  g_autoptr (MvStarter) starter = vmm_fixture_starter ("cloud-hypervisor");
  g_autoptr (MvProcess) vmm = NULL;
  g_autoptr (MvHypervisor) hv = NULL;

  /* Cloud Hypervisor replaces a socket nobody serves on. */
  g_assert_true (g_file_set_contents (fixture->socket_path, "", 0, NULL));
  hv = vmm_fixture_boot (fixture, starter, &vmm);
  vmm_fixture_assert_state (hv, MV_VM_STATE_RUNNING);
}

static void
test_versions (VmmFixture *fixture, gconstpointer data)
{
  g_autofree char *v53 = vmm_fixture_versioned_binary (fixture, "cloud-hypervisor", "53.0.0");
  g_autofree char *v52 = vmm_fixture_versioned_binary (fixture, "cloud-hypervisor", "52.0.0");
  g_autoptr (GKeyFile) config = g_key_file_new ();
  g_autoptr (GPtrArray) starters = NULL;
  g_autoptr (GError) error = NULL;
  g_autoptr (MvVmSpec) spec = vmm_fixture_spec (fixture);
  g_autoptr (MvProcess) vmm = NULL;
  g_autoptr (MvHypervisor) hv = NULL;
  g_autofree char *running = NULL;
  g_auto (GStrv) deprecated = NULL;
  const char *list[] = { v53, v52 };
  gboolean is_deprecated = TRUE;
  MvStarter *starter;

  g_key_file_set_string_list (config, "cloud-hypervisor", "binaries", list, 2);
  g_key_file_set_string_list (config, "firecracker", "binaries", NULL, 0);
  starters = mv_http_backends_starters_from_config (config, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (starters->len, ==, 2);

  /* The first is the default, never deprecated. */
  starter = mv_starters_pick (starters, "cloud-hypervisor", NULL, &is_deprecated, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (starter->version (starter), ==, "53.0.0");
  g_assert_false (is_deprecated);
  deprecated = mv_starters_deprecated_versions (starters, "cloud-hypervisor");
  g_assert_cmpuint (g_strv_length (deprecated), ==, 1);
  g_assert_cmpstr (deprecated[0], ==, "52.0.0");
  g_assert_false (mv_starters_is_deprecated (starters, "cloud-hypervisor", ""));
  g_assert_false (mv_starters_is_deprecated (starters, "cloud-hypervisor", "v53.0.0"));

  /* Pinned to the second: exactly that one, with a warning, and it starts. */
  starter = mv_starters_pick (starters, "cloud-hypervisor", "v52.0.0", &is_deprecated, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (starter->version (starter), ==, "52.0.0");
  g_assert_true (is_deprecated);
  g_ptr_array_set_size (warnings, 0);
  g_assert_true (mv_starters_warn_if_deprecated (starters, "cloud-hypervisor", "52.0.0",
                                                 "machine web1"));
  g_assert_cmpuint (warnings->len, ==, 1);
  g_assert_nonnull (strstr (warnings->pdata[0], "machine web1 uses cloud-hypervisor 52.0.0, "
                            "which is deprecated"));
  g_assert_false (mv_starters_warn_if_deprecated (starters, "cloud-hypervisor", "53.0.0",
                                                  "machine web2"));
  g_assert_cmpuint (warnings->len, ==, 1);
  hv = starter->start_vm (starter, fixture->socket_path, spec, &vmm, &error);
  g_assert_no_error (error);
  running = hv->vmm_version (hv, &error);
  g_assert_cmpstr (running, ==, "52.0.0");

  /* A version not configured is not replaced by another. */
  g_assert_null (mv_starters_pick (starters, "cloud-hypervisor", "51.0.0", NULL, &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_UNAVAILABLE);
  g_assert_nonnull (strstr (error->message, "there is only 53.0.0, 52.0.0"));
  g_clear_error (&error);
  g_assert_null (mv_starters_pick (starters, "firecracker", NULL, NULL, &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_UNAVAILABLE);
  g_clear_error (&error);

  /* One version listed twice is a configuration error. */
  {
    const char *twice[] = { v53, v53 };
    g_autoptr (GPtrArray) none = NULL;
    g_key_file_set_string_list (config, "cloud-hypervisor", "binaries", twice, 2);
    none = mv_http_backends_starters_from_config (config, &error);
    g_assert_null (none);
    g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
    g_assert_nonnull (strstr (error->message, "both version 53.0.0"));
  }
}

#define VMM_TEST(name, func) \
  g_test_add (name, VmmFixture, NULL, vmm_fixture_setup, func, vmm_fixture_teardown)

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  warnings = g_ptr_array_new_with_free_func (g_free);
  g_log_set_writer_func (writer, NULL, NULL);
  VMM_TEST ("/chv/lifecycle", test_lifecycle);
  VMM_TEST ("/chv/net-limits-differ", test_net_limits_differ);
  VMM_TEST ("/chv/shutdown-and-connect", test_shutdown);
  VMM_TEST ("/chv/snapshot-restore", test_snapshot_restore);
  VMM_TEST ("/chv/cpu-affinity", test_cpu_affinity);
  VMM_TEST ("/chv/cpu-affinity-restored-without", test_cpu_affinity_restored_without);
  VMM_TEST ("/chv/errors", test_errors);
  VMM_TEST ("/chv/not-created", test_not_created);
  VMM_TEST ("/chv/stale-socket", test_stale_socket);
  VMM_TEST ("/chv/versions", test_versions);
  {
    int result = g_test_run ();
    g_ptr_array_unref (warnings);
    return result;
  }
}
