/* The firecracker backend against the test VMM. */
#include "vmm-fixture.h"
#include "hypervisor/firecracker.h"
#include "hypervisor/http.h"
#include "hypervisor/metadata.h"
#include "core/errors.h"

#include <glib/gstdio.h>
#include <string.h>

#define MIB (G_GUINT64_CONSTANT (1) << 20)

static JsonObject *
get (const char *socket_path, const char *path)
{
  g_autoptr (MvHttp) http = mv_http_new (socket_path, "Firecracker");
  g_autoptr (JsonNode) reply = NULL;
  g_autoptr (GError) error = NULL;

  g_assert_true (mv_http_call_json (http, "GET", path, NULL, &reply, NULL, &error));
  g_assert_no_error (error);
  return json_object_ref (json_node_get_object (reply));
}

/* @limiter of @net takes @size bytes a second, refilled each second, and
 * nothing else. */
static void
assert_bandwidth (JsonObject *net, const char *limiter, gint64 size)
{
  JsonObject *o = json_object_get_object_member (net, limiter);
  JsonObject *bucket = json_object_get_object_member (o, "bandwidth");

  g_assert_nonnull (bucket);
  g_assert_true (!json_object_has_member (o, "ops") || json_object_get_null_member (o, "ops"));
  g_assert_cmpint (json_object_get_int_member (bucket, "size"), ==, size);
  g_assert_cmpint (json_object_get_int_member (bucket, "refill_time"), ==, 1000);
}

static MvHypervisor *
boot_spec (VmmFixture *fixture, MvStarter *starter, MvVmSpec *spec, MvProcess **vmm)
{
  g_autoptr (GError) error = NULL;
  MvHypervisor *hv = starter->start_vm (starter, fixture->socket_path, spec, vmm, &error);

  g_assert_no_error (error);
  g_assert_nonnull (hv);
  return hv;
}

/* Each way its own limit: what the guest receives is rx, what it sends tx;
 * an unlimited way has no limiter. */
static void
test_net_limits (VmmFixture *fixture, gconstpointer data)
{
  g_autoptr (MvStarter) starter = vmm_fixture_starter ("firecracker");
  g_autoptr (MvVmSpec) spec = vmm_fixture_spec (fixture);
  g_autoptr (MvProcess) vmm = NULL;
  g_autoptr (MvHypervisor) hv = NULL;
  g_autoptr (JsonObject) config = NULL;
  JsonObject *net;

  mv_vm_spec_set_net_limits (spec, 9000, 2 << 20, 0);
  hv = boot_spec (fixture, starter, spec, &vmm);
  config = get (fixture->socket_path, "/vm/config");
  net = json_array_get_object_element (json_object_get_array_member (config, "network-interfaces"), 0);
  g_assert_cmpint (json_object_get_int_member (net, "mtu"), ==, 9000);
  assert_bandwidth (net, "rx_rate_limiter", 2 << 20);
  g_assert_true (!json_object_has_member (net, "tx_rate_limiter") ||
                 json_object_get_null_member (net, "tx_rate_limiter"));
}

/* Before 1.16 an interface takes no MTU: 1500 (what it gives the guest)
 * is not sent, another is refused before anything starts. */
static void
test_mtu_old_version (VmmFixture *fixture, gconstpointer data)
{
  g_autofree char *binary = vmm_fixture_versioned_binary (fixture, "firecracker", "1.15.0");
  g_autoptr (GError) error = NULL;
  g_autoptr (MvStarter) starter = mv_firecracker_starter_new (binary, &error);
  g_autoptr (MvVmSpec) spec = vmm_fixture_spec (fixture);
  g_autoptr (MvProcess) vmm = NULL;
  g_autoptr (MvHypervisor) hv = NULL;
  g_autoptr (JsonObject) config = NULL;
  JsonObject *net;

  g_assert_no_error (error);
  g_assert_cmpstr (starter->version (starter), ==, "1.15.0");
  g_assert_false (starter->check (starter, fixture->socket_path, spec, &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_UNSUPPORTED);
  g_assert_cmpstr (error->message, ==, "mtu: the network's MTU of 1400 needs Firecracker 1.16 "
                   "or later; version 1.15.0 gives its guests 1500");
  g_clear_error (&error);

  mv_vm_spec_set_net_limits (spec, 1500, 1 << 20, 1 << 19);
  g_assert_true (starter->check (starter, fixture->socket_path, spec, &error));
  g_assert_no_error (error);
  hv = boot_spec (fixture, starter, spec, &vmm);
  config = get (fixture->socket_path, "/vm/config");
  net = json_array_get_object_element (json_object_get_array_member (config, "network-interfaces"), 0);
  g_assert_false (json_object_has_member (net, "mtu"));
  assert_bandwidth (net, "rx_rate_limiter", 1 << 20);
  assert_bandwidth (net, "tx_rate_limiter", 1 << 19);
}

/* The test VMM checks the interface as Firecracker does: an MTU only from
 * 1.16, rate limiters of token buckets with their required members. */
static void
test_net_fields_checked (VmmFixture *fixture, gconstpointer data)
{
  static const struct {
    const char *version;
    const char *body;
    guint       status;
    const char *message;   /* the start of it */
  } cases[] = {
    { "1.16.0", "{\"iface_id\":\"net0\",\"host_dev_name\":\"tap0\",\"mtu\":9000}", 204, NULL },
    { "1.15.0", "{\"iface_id\":\"net0\",\"host_dev_name\":\"tap0\",\"mtu\":9000}", 400,
      "An error occurred when deserializing the json body of a request: unknown field `mtu`" },
    { "1.16.0", "{\"iface_id\":\"net0\",\"host_dev_name\":\"tap0\",\"mtu\":70000}", 400,
      "An error occurred when deserializing the json body of a request: " },
    { "1.16.0", "{\"iface_id\":\"net0\",\"host_dev_name\":\"tap0\","
      "\"rx_rate_limiter\":{\"bandwidth\":{\"size\":1}}}", 400,
      "An error occurred when deserializing the json body of a request: missing field `refill_time`" },
    { "1.16.0", "{\"iface_id\":\"net0\",\"host_dev_name\":\"tap0\","
      "\"tx_rate_limiter\":{\"bandwidth\":{\"size\":1,\"refill_time\":1000,\"rate\":1}}}", 400,
      "An error occurred when deserializing the json body of a request: unknown field `rate`" },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *binary = vmm_fixture_versioned_binary (fixture, "firecracker",
                                                              cases[i].version);
      const char *argv[] = { binary, "--api-sock", fixture->socket_path, NULL };
      g_autoptr (GError) error = NULL;
      g_autoptr (MvProcess) vmm = NULL;
      g_autoptr (MvHttp) http = NULL;
      g_auto (MvHttpResponse) response = { 0 };
      g_autofree char *text = NULL;

      g_test_message ("%s %s", cases[i].version, cases[i].body);
      g_unlink (fixture->socket_path);
      vmm = mv_process_start (fixture->socket_path, argv, NULL, 10000, &error);
      g_assert_no_error (error);
      http = mv_http_new (fixture->socket_path, "Firecracker");
      g_assert_true (mv_http_request (http, "PUT", "/network-interfaces/net0", cases[i].body,
                                      strlen (cases[i].body), &response, &error));
      g_assert_no_error (error);
      g_assert_cmpuint (response.status, ==, cases[i].status);
      if (cases[i].message)
        {
          text = mv_http_error_text (response.body);
          g_assert_true (g_str_has_prefix (text, cases[i].message));
        }
      vmm_fixture_kill (fixture);
    }
}

static void
test_lifecycle (VmmFixture *fixture, gconstpointer data)
{
  g_autoptr (MvStarter) starter = vmm_fixture_starter ("firecracker");
  g_autoptr (MvProcess) vmm = NULL;
  g_autoptr (MvHypervisor) hv = NULL;
  g_autoptr (GError) error = NULL;
  g_autoptr (JsonObject) config = NULL;
  g_autofree char *version = NULL;
  g_autofree char *cmdline_path = NULL;
  g_autofree char *cmdline = NULL;
  MvCapabilities caps = starter->capabilities (starter);
  JsonObject *drive, *net;
  MvVmInfo info;
  gsize length;

  g_assert_cmpstr (starter->type, ==, "firecracker");
  g_assert_cmpstr (starter->version (starter), ==, "1.16.0");
  g_assert_false (starter->power_off_ends_vm (starter));
  /* Honest: no vCPU hotplug, no pinning, no passthrough. */
  g_assert_false (caps.hotplug_cpu);
  g_assert_false (caps.cpu_affinity);
  g_assert_false (caps.gpu_passthrough);
  g_assert_true (caps.hotplug_memory && caps.snapshot && caps.pause && caps.vsock);
  /* A VM spec that pins vCPUs is refused before anything starts. */
  {
    g_autoptr (MvVmSpec) pinned = vmm_fixture_spec (fixture);
    g_autoptr (MvCpuAffinity) affinity = mv_cpu_affinity_new (0);
    guint32 cpu = 0;

    g_array_append_val (affinity->host_cpus, cpu);
    g_ptr_array_add (pinned->cpu.affinity, g_steal_pointer (&affinity));
    g_assert_false (starter->check (starter, fixture->socket_path, pinned, &error));
    g_assert_error (error, MV_ERROR, MV_ERROR_UNSUPPORTED);
    g_assert_cmpstr (error->message, ==, "cpu_affinity: Firecracker cannot pin vCPUs to host CPUs");
    g_clear_error (&error);
    g_assert_null (starter->start_vm (starter, fixture->socket_path, pinned, &vmm, &error));
    g_assert_error (error, MV_ERROR, MV_ERROR_UNSUPPORTED);
    g_clear_error (&error);
    g_assert_null (vmm);
    g_assert_false (g_file_test (fixture->socket_path, G_FILE_TEST_EXISTS));
  }

  hv = vmm_fixture_boot (fixture, starter, &vmm);
  vmm_fixture_assert_state (hv, MV_VM_STATE_RUNNING);
  g_assert_true (hv->vm_info (hv, &info, &error));
  g_assert_cmpuint (info.memory_bytes, ==, 256 * MIB);

  /* The MMDS limit is set explicitly on the command line. */
  cmdline_path = g_strdup_printf ("/proc/%d/cmdline", vmm->pid);
  g_assert_true (g_file_get_contents (cmdline_path, &cmdline, &length, NULL));
  for (gsize i = 0; i + 1 < length; i++)
    if (cmdline[i] == '\0')
      cmdline[i] = ' ';
  g_assert_nonnull (strstr (cmdline, "--mmds-size-limit 262144"));
  g_assert_nonnull (strstr (cmdline, "--api-sock "));

  config = get (fixture->socket_path, "/vm/config");
  g_assert_cmpint (json_object_get_int_member (json_object_get_object_member (config, "machine-config"),
                                               "vcpu_count"), ==, 1);
  drive = json_array_get_object_element (json_object_get_array_member (config, "drives"), 0);
  g_assert_cmpint (json_object_get_int_member (json_object_get_object_member (
                     json_object_get_object_member (drive, "rate_limiter"), "ops"), "size"), ==, 1000);
  g_assert_cmpstr (json_object_get_string_member (
                     json_array_get_object_element (json_object_get_array_member (config, "network-interfaces"), 0),
                     "guest_mac"), ==, "52:54:00:12:34:56");

  net = json_array_get_object_element (json_object_get_array_member (config, "network-interfaces"), 0);
  g_assert_cmpint (json_object_get_int_member (net, "mtu"), ==, 1400);
  assert_bandwidth (net, "rx_rate_limiter", 1 << 20);
  assert_bandwidth (net, "tx_rate_limiter", 1 << 20);

  version = hv->vmm_version (hv, &error);
  g_assert_cmpstr (version, ==, "1.16.0");

  g_assert_true (hv->pause_vm (hv, &error));
  g_assert_no_error (error);
  vmm_fixture_assert_state (hv, MV_VM_STATE_PAUSED);
  g_assert_true (hv->resume_vm (hv, &error));
  g_assert_no_error (error);
  vmm_fixture_assert_state (hv, MV_VM_STATE_RUNNING);

  /* Memory through virtio-mem; vCPUs not at all. */
  g_assert_true (hv->resize_vm_memory (hv, 320 * MIB, &error));
  g_assert_no_error (error);
  g_assert_true (hv->vm_info (hv, &info, &error));
  g_assert_cmpuint (info.memory_bytes, ==, 320 * MIB);
  g_assert_false (hv->resize_vm_memory (hv, 1024 * MIB, &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  g_assert_false (hv->resize_vm_cpu (hv, 2, &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_UNSUPPORTED);
  g_clear_error (&error);

  /* Ctrl-Alt-Del: with reboot=k the guest resets and Firecracker ends. */
  g_assert_true (hv->shutdown_vm (hv, &error));
  g_assert_no_error (error);
  g_assert_true (mv_process_wait (vmm, 5000));
  g_assert_true (vmm_fixture_wait_console (fixture->console_path, "ctrl-alt-del", 1000));
  /* Firecracker leaves its socket; cleanup removes it. */
  g_assert_true (g_file_test (fixture->socket_path, G_FILE_TEST_EXISTS));
  starter->cleanup (starter, fixture->socket_path);
  g_assert_false (g_file_test (fixture->socket_path, G_FILE_TEST_EXISTS));
}

static void
test_destroy (VmmFixture *fixture, gconstpointer data)
{
  g_autoptr (MvStarter) starter = vmm_fixture_starter ("firecracker");
  g_autoptr (MvProcess) vmm = NULL;
  g_autoptr (MvHypervisor) hv = vmm_fixture_boot (fixture, starter, &vmm);
  g_autoptr (MvHypervisor) again = NULL;
  g_autoptr (GError) error = NULL;

  again = starter->connect (starter, fixture->socket_path, &error);
  g_assert_no_error (error);
  /* No API stops Firecracker: its process is killed. */
  g_assert_true (again->destroy_vm (again, &error));
  g_assert_no_error (error);
  g_assert_false (mv_process_alive (vmm));
}

static void
test_errors (VmmFixture *fixture, gconstpointer data)
{
  g_autoptr (MvStarter) starter = vmm_fixture_starter ("firecracker");
  g_autoptr (MvProcess) vmm = NULL;
  g_autoptr (MvHypervisor) hv = vmm_fixture_boot (fixture, starter, &vmm);
  g_autoptr (MvHttp) http = mv_http_new (fixture->socket_path, "Firecracker");
  g_autoptr (GError) error = NULL;
  g_autoptr (JsonNode) unknown = json_from_string ("{\"vcpu_count\":1,\"mem_size_mib\":128,\"foo\":1}", NULL);
  g_autoptr (JsonNode) machine = json_from_string ("{\"vcpu_count\":1,\"mem_size_mib\":128}", NULL);
  g_autoptr (MvVmSpec) spec = vmm_fixture_spec (fixture);
  g_autoptr (MvProcess) second = NULL;
  MvHypervisor *none;

  /* Strict JSON: an unknown field is refused, with serde's words. */
  g_assert_false (mv_http_call_json (http, "PUT", "/machine-config", unknown, NULL, NULL, &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
  g_assert_nonnull (strstr (error->message, "(400): An error occurred when deserializing the "
                            "json body of a request: unknown field `foo`"));
  g_clear_error (&error);

  /* Pre-boot calls after InstanceStart. */
  g_assert_false (mv_http_call_json (http, "PUT", "/machine-config", machine, NULL, NULL, &error));
  g_assert_nonnull (strstr (error->message, "The requested operation is not supported after "
                            "starting the microVM."));
  g_clear_error (&error);

  /* Snapshots want a paused guest. */
  {
    g_autofree char *dir = g_build_filename (fixture->dir, "snap", NULL);
    g_assert_cmpint (g_mkdir (dir, 0700), ==, 0);
    g_assert_false (hv->snapshot_vm (hv, dir, &error));
    g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_STATE);
    g_assert_nonnull (strstr (error->message, "must be paused"));
    g_clear_error (&error);
  }

  /* A second Firecracker is not started on a socket that exists. */
  none = starter->start_vm (starter, fixture->socket_path, spec, &second, &error);
  g_assert_null (none);
  g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_STATE);
  g_assert_nonnull (strstr (error->message, "exists; Firecracker cannot start on it"));
  g_clear_error (&error);
  vmm_fixture_assert_state (hv, MV_VM_STATE_RUNNING);

  /* Too many vCPUs are refused before anything starts. */
  spec->cpu.count = spec->cpu.max_count = 33;
  g_assert_false (starter->check (starter, fixture->socket_path, spec, &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
  g_assert_nonnull (strstr (error->message, "maximum of 32"));
}

static void
test_stale_socket (VmmFixture *fixture, gconstpointer data)
{
  g_autofree char *binary = vmm_fixture_binary ("firecracker");
  const char *argv[] = { binary, "--api-sock", fixture->socket_path, NULL };
  g_autoptr (GError) error = NULL;
  g_autoptr (MvProcess) vmm = NULL;

  /* Firecracker itself fails on a path that exists, and says so. */
  g_assert_true (g_file_set_contents (fixture->socket_path, "", 0, NULL));
  vmm = mv_process_start (fixture->socket_path, argv, NULL, 10000, &error);
  g_assert_null (vmm);
  g_assert_nonnull (strstr (error->message, "Check that it is not already used"));
}

static void
test_payload_limit (VmmFixture *fixture, gconstpointer data)
{
  g_autofree char *binary = vmm_fixture_binary ("firecracker");
  const char *argv[] = { binary, "--api-sock", fixture->socket_path, NULL };
  g_autoptr (GError) error = NULL;
  g_autoptr (MvProcess) vmm = mv_process_start (fixture->socket_path, argv, NULL, 10000, &error);
  g_autoptr (MvHttp) http = mv_http_new (fixture->socket_path, "Firecracker");
  g_auto (MvHttpResponse) response = { 0 };
  g_autofree char *big = g_strnfill (51201, ' ');
  g_autofree char *text = NULL;

  g_assert_no_error (error);
  big[0] = '{';
  big[51200] = '}';
  /* One byte over the default 51200: micro-http refuses it. */
  g_assert_true (mv_http_request (http, "PUT", "/mmds", big, 51201, &response, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (response.status, ==, 400);
  text = mv_http_error_text (response.body);
  g_assert_cmpstr (text, ==, "Request payload with size 51201 is larger than the limit of 51200 "
                   "allowed by server.");
}

static void
test_snapshot_restore (VmmFixture *fixture, gconstpointer data)
{
  g_autoptr (MvStarter) starter = vmm_fixture_starter ("firecracker");
  g_autoptr (MvProcess) vmm = NULL;
  g_autoptr (MvHypervisor) hv = vmm_fixture_boot (fixture, starter, &vmm);
  g_autoptr (JsonObject) config = NULL;
  VmmRestored restored = { 0 };

  vmm_fixture_snapshot_restore (fixture, starter, hv, vmm, &restored);
  config = get (restored.socket_path, "/vm/config");
  g_assert_cmpstr (json_object_get_string_member (
                     json_array_get_object_element (json_object_get_array_member (config, "network-interfaces"), 0),
                     "host_dev_name"), ==, "mvtap9");
  /* The rest of the interface is the snapshot's, limits and all. */
  assert_bandwidth (json_array_get_object_element (json_object_get_array_member (config, "network-interfaces"), 0),
                    "rx_rate_limiter", 1 << 20);
  g_assert_cmpstr (json_object_get_string_member (json_object_get_object_member (config, "vsock"),
                                                  "uds_path"), ==, restored.spec.agent_socket);
  vmm_fixture_resume_restored (&restored);
  vmm_restored_clear (&restored);
}

static void
test_failed_load_ends_vmm (VmmFixture *fixture, gconstpointer data)
{
  g_autoptr (MvStarter) starter = vmm_fixture_starter ("firecracker");
  g_autoptr (GError) error = NULL;
  g_autoptr (MvProcess) vmm = NULL;
  g_autofree char *snapshot = g_build_filename (fixture->dir, "snapshot", NULL);
  g_autofree char *state = g_build_filename (snapshot, MV_FIRECRACKER_SNAPSHOT_STATE, NULL);
  g_autofree char *devices = g_build_filename (snapshot, MV_FIRECRACKER_SNAPSHOT_DEVICES, NULL);
  MvRestoreSpec restore = { 0 };
  MvHypervisor *hv;

  g_assert_cmpint (g_mkdir (snapshot, 0700), ==, 0);
  g_assert_true (g_file_set_contents (state, "{\"magic\":\"garbage\"}", -1, NULL));
  g_assert_true (g_file_set_contents (devices, "{\"network_interfaces\":[],\"vsock\":false}", -1, NULL));
  hv = starter->restore_vm (starter, fixture->socket_path, snapshot, &restore, &vmm, &error);
  g_assert_null (hv);
  g_assert_nonnull (strstr (error->message, "Load snapshot error: Failed to restore from snapshot"));
  /* Nothing is left serving on the socket. */
  {
    g_autoptr (GPtrArray) left = mv_process_find_by_socket (fixture->socket_path);
    g_assert_cmpuint (left->len, ==, 0);
  }
}

#define VMM_TEST(name, func) \
  g_test_add (name, VmmFixture, NULL, vmm_fixture_setup, func, vmm_fixture_teardown)

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  VMM_TEST ("/firecracker/lifecycle", test_lifecycle);
  VMM_TEST ("/firecracker/net-limits", test_net_limits);
  VMM_TEST ("/firecracker/mtu-old-version", test_mtu_old_version);
  VMM_TEST ("/firecracker/net-fields-checked", test_net_fields_checked);
  VMM_TEST ("/firecracker/destroy", test_destroy);
  VMM_TEST ("/firecracker/errors", test_errors);
  VMM_TEST ("/firecracker/payload-limit", test_payload_limit);
  VMM_TEST ("/firecracker/stale-socket", test_stale_socket);
  VMM_TEST ("/firecracker/snapshot-restore", test_snapshot_restore);
  VMM_TEST ("/firecracker/failed-load", test_failed_load_ends_vmm);
  return g_test_run ();
}
