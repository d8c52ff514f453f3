/* A test double for the cloud-hypervisor binary.
 *
 * Speaks Cloud Hypervisor's REST API (cloud-hypervisor.yaml, around v53)
 * under /api/v1/ on the Unix socket given by --api-socket: 204 for most
 * actions, 200 with JSON for vmm.ping, vm.info and vm.counters, errors as a
 * JSON array of strings (the error chain, outermost first), 404 before a VM
 * is created, 500 for a call the VM's state does not allow, lenient JSON
 * (unknown fields ignored). The guest is simulated (fake-guest.c); its
 * vCPUs are not threads, but cpus.affinity is checked as the real one's
 * types check it and each vCPU's pinning is logged as it would be done
 * (start_vcpus()). Test code only: never installed.
 *
 * The version it reports is $MICROVMD_FAKE_VERSION, or the one its name
 * ends in (fake_vmm_version()), by default 53.0.0.
 * A test makes vm.snapshot fail and vm.info hang through fake-control.h. */
#include "fake-control.h"
#include "fake-guest.h"
#include "fake-http.h"
#include "fake-json.h"
#include "fake-vmm.h"
#include "fake-vsock.h"

#include <errno.h>
#include <fcntl.h>
#include <glib-unix.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sched.h>
#include <sys/un.h>
#include <unistd.h>

#define DEFAULT_VERSION "53.0.0"
#define MEM_HEADER      "CHMEM-fake\n"
#define MIB             (G_GINT64_CONSTANT (1) << 20)

/* ---- the API's types: Cloud Hypervisor ignores fields it does not know ---- */

static const FakeField token_bucket_fields[] = {
  { "size", &fake_u64, TRUE }, { "one_time_burst", &fake_opt_u64 },
  { "refill_time", &fake_u64, TRUE }, { NULL } };
static const FakeType opt_token_bucket = FAKE_OPT_LENIENT_OF ("TokenBucket", token_bucket_fields);
static const FakeField rate_limiter_fields[] = {
  { "bandwidth", &opt_token_bucket }, { "ops", &opt_token_bucket }, { NULL } };
static const FakeType opt_rate_limiter = FAKE_OPT_LENIENT_OF ("RateLimiterConfig", rate_limiter_fields);

static const FakeField payload_fields[] = {
  { "kernel", &fake_opt_str }, { "cmdline", &fake_opt_str }, { "initramfs", &fake_opt_str },
  { "firmware", &fake_opt_str }, { NULL } };
static const FakeType payload = FAKE_LENIENT_OF ("PayloadConfig", payload_fields);
/* CpuAffinity: each vCPU thread is pinned to its host CPUs as it starts. */
static const FakeType host_cpus = FAKE_LIST_OF (&fake_usize);
static const FakeField cpu_affinity_fields[] = {
  { "vcpu", &fake_u32, TRUE }, { "host_cpus", &host_cpus, TRUE }, { NULL } };
static const FakeType cpu_affinity = FAKE_LENIENT_OF ("CpuAffinity", cpu_affinity_fields);
static const FakeType opt_cpu_affinities = FAKE_OPT_LIST_OF (&cpu_affinity);
/* CpuTopology: how the vCPUs are shown to the guest. */
static const FakeField cpu_topology_fields[] = {
  { "threads_per_core", &fake_u8, TRUE }, { "cores_per_die", &fake_u8, TRUE },
  { "dies_per_package", &fake_u8, TRUE }, { "packages", &fake_u8, TRUE }, { NULL } };
static const FakeType opt_cpu_topology = FAKE_OPT_LENIENT_OF ("CpuTopology", cpu_topology_fields);
static const FakeField cpus_fields[] = {
  { "boot_vcpus", &fake_u8, TRUE }, { "max_vcpus", &fake_u8, TRUE },
  { "topology", &opt_cpu_topology }, { "affinity", &opt_cpu_affinities }, { NULL } };
static const FakeType opt_cpus = FAKE_OPT_LENIENT_OF ("CpusConfig", cpus_fields);
static const char *const hotplug_methods[] = { "Acpi", "VirtioMem", NULL };
static const FakeType hotplug_method = FAKE_ENUM_OF ("HotplugMethod", hotplug_methods);
static const FakeField memory_fields[] = {
  { "size", &fake_u64, TRUE }, { "hotplug_method", &hotplug_method, FALSE, "\"Acpi\"" },
  { "hotplug_size", &fake_opt_u64 }, { "hotplugged_size", &fake_opt_u64 },
  { "shared", &fake_bool, FALSE, "false" }, { NULL } };
static const FakeType opt_memory = FAKE_OPT_LENIENT_OF ("MemoryConfig", memory_fields);
static const FakeField disk_fields[] = {
  { "path", &fake_opt_str }, { "readonly", &fake_bool, FALSE, "false" }, { "id", &fake_opt_str },
  { "rate_limiter_config", &opt_rate_limiter }, { NULL } };
static const FakeType disk = FAKE_LENIENT_OF ("DiskConfig", disk_fields);
static const FakeType opt_disks = FAKE_OPT_LIST_OF (&disk);
static const FakeField net_fields[] = {
  { "tap", &fake_opt_str }, { "mac", &fake_opt_str }, { "mtu", &fake_opt_u16 },
  { "id", &fake_opt_str }, { "rate_limiter_config", &opt_rate_limiter }, { NULL } };
static const FakeType net = FAKE_LENIENT_OF ("NetConfig", net_fields);
static const FakeType opt_nets = FAKE_OPT_LIST_OF (&net);
static const char *const console_modes[] = { "Off", "Pty", "Tty", "File", "Socket", "Null", NULL };
static const FakeType console_mode = FAKE_ENUM_OF ("ConsoleOutputMode", console_modes);
static const FakeField serial_fields[] = {
  { "mode", &console_mode, TRUE }, { "file", &fake_opt_str }, { "socket", &fake_opt_str },
  { NULL } };
static const FakeType opt_serial = FAKE_OPT_LENIENT_OF ("ConsoleConfig", serial_fields);
static const FakeField console_fields[] = {
  { "mode", &console_mode, TRUE }, { "file", &fake_opt_str }, { NULL } };
static const FakeType opt_console = FAKE_OPT_LENIENT_OF ("ConsoleConfig", console_fields);
static const FakeField vsock_fields[] = {
  { "cid", &fake_u32, TRUE }, { "socket", &fake_str, TRUE }, { "id", &fake_opt_str }, { NULL } };
static const FakeType opt_vsock = FAKE_OPT_LENIENT_OF ("VsockConfig", vsock_fields);
/* FsConfig: a vhost-user-fs device, whose backend (virtiofsd) listens on
 * the socket. */
static const FakeField fs_fields[] = {
  { "tag", &fake_str, TRUE }, { "socket", &fake_str, TRUE },
  { "num_queues", &fake_usize, FALSE, "1" }, { "queue_size", &fake_u16, FALSE, "1024" },
  { "id", &fake_opt_str }, { NULL } };
static const FakeType fs = FAKE_LENIENT_OF ("FsConfig", fs_fields);
static const FakeType opt_fs = FAKE_OPT_LIST_OF (&fs);
/* DeviceConfig: a host device passed through by VFIO, named by its sysfs
 * directory (a PCI device's or a mediated device's). */
static const FakeField device_fields[] = {
  { "path", &fake_str, TRUE }, { "iommu", &fake_bool, FALSE, "false" },
  { "id", &fake_opt_str }, { NULL } };
static const FakeType device_config = FAKE_LENIENT_OF ("DeviceConfig", device_fields);
static const FakeType opt_devices = FAKE_OPT_LIST_OF (&device_config);
static const FakeField vm_config_fields[] = {
  { "payload", &payload, TRUE }, { "cpus", &opt_cpus }, { "memory", &opt_memory },
  { "disks", &opt_disks }, { "net", &opt_nets }, { "serial", &opt_serial },
  { "console", &opt_console }, { "vsock", &opt_vsock }, { "fs", &opt_fs },
  { "devices", &opt_devices }, { NULL } };
static const FakeType vm_config = FAKE_LENIENT_OF ("VmConfig", vm_config_fields);

static const FakeField resize_fields[] = {
  { "desired_vcpus", &fake_opt_u8 }, { "desired_ram", &fake_opt_i64 },
  { "desired_balloon", &fake_opt_i64 }, { NULL } };
static const FakeType resize_type = FAKE_LENIENT_OF ("VmResize", resize_fields);
static const FakeField snapshot_fields[] = { { "destination_url", &fake_str, TRUE }, { NULL } };
static const FakeType snapshot_type = FAKE_LENIENT_OF ("VmSnapshotConfig", snapshot_fields);
static const char *const restore_modes[] = { "Copy", "OnDemand", NULL };
static const FakeType restore_mode = FAKE_ENUM_OF ("MemoryRestoreMode", restore_modes);
static const FakeField restore_fields[] = {
  { "source_url", &fake_str, TRUE }, { "prefault", &fake_bool, FALSE, "false" },
  { "memory_restore_mode", &restore_mode, FALSE, "\"Copy\"" },
  { "resume", &fake_bool, FALSE, "false" }, { NULL } };
static const FakeType restore_type = FAKE_LENIENT_OF ("RestoreConfig", restore_fields);

/* ---- the VMM ---- */

typedef struct {
  const char     *version;
  char           *api_socket;
  char           *log_file;
  gboolean        verbose;
  int             lock_fd;
  FakeLog         log;
  FakeHttpServer *http;
  FakeControl     control;

  JsonObject     *config;       /* VmConfig once created */
  const char     *state;        /* Created, Running, Paused, Shutdown */
  FakeGuest      *guest;
  FakeVsock      *vsock;
  GArray         *fs_fds;       /* int: the connections to the fs devices' backends */
  JsonObject     *counters;
} Chv;

/* The error chain, outermost first: a NULL-terminated list. */
static void
chain (FakeResponse *response, guint status, const char *first, ...) G_GNUC_NULL_TERMINATED;

static void
chain_array (FakeResponse *response, guint status, GPtrArray *messages)
{
  g_autoptr (JsonArray) array = json_array_new ();
  g_autoptr (JsonNode) node = json_node_new (JSON_NODE_ARRAY);

  for (guint i = 0; i < messages->len; i++)
    json_array_add_string_element (array, messages->pdata[i]);
  json_node_set_array (node, array);
  fake_response_json (response, status, node);
}

static void
chain (FakeResponse *response, guint status, const char *first, ...)
{
  g_autoptr (GPtrArray) messages = g_ptr_array_new ();
  va_list args;

  va_start (args, first);
  for (const char *m = first; m; m = va_arg (args, const char *))
    g_ptr_array_add (messages, (gpointer) m);
  va_end (args);
  chain_array (response, status, messages);
}

static JsonObject *
body_object (const FakeRequest *request, const FakeType *type, FakeResponse *response)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (JsonNode) node = NULL;
  const char *data;
  gsize len;

  data = g_bytes_get_data (request->body, &len);
  node = fake_json_parse (data, len, type, &error);
  if (!node)
    {
      chain (response, 400, "Error deserializing JSON", error->message, NULL);
      return NULL;
    }
  return json_object_ref (json_node_get_object (node));
}

static void
reply_object (FakeResponse *response, JsonObject *object)
{
  g_autoptr (JsonNode) node = json_node_new (JSON_NODE_OBJECT);

  json_node_set_object (node, object);
  fake_response_json (response, 200, node);
}

static gboolean
need_vm (Chv *chv, const char *what, FakeResponse *response)
{
  g_autofree char *outer = NULL;

  if (chv->config)
    return TRUE;
  outer = g_strdup_printf ("Error %s", what);
  chain (response, 404, outer, "The VM is not created", NULL);
  return FALSE;
}

static gboolean
state_is (Chv *chv, const char *a, const char *b)
{
  return g_strcmp0 (chv->state, a) == 0 || (b && g_strcmp0 (chv->state, b) == 0);
}

static gboolean
transition (Chv *chv, const char *what, const char *to, const char *allowed, FakeResponse *response)
{
  g_autofree char *outer = NULL;
  g_autofree char *inner = NULL;

  if (state_is (chv, allowed, NULL))
    return TRUE;
  outer = g_strdup_printf ("Error %s", what);
  inner = g_strdup_printf ("Invalid VM state transition: %s to %s", chv->state, to);
  chain (response, 500, outer, inner, NULL);
  return FALSE;
}

static void chv_exit (Chv *chv, int code);

static void
exit_after_reply (gpointer data)
{
  chv_exit (data, 0);
}

static void
ping (Chv *chv, const FakeRequest *request, FakeResponse *response)
{
  g_autoptr (JsonObject) reply = json_object_new ();
  g_autofree char *build = g_strconcat ("v", chv->version, NULL);
  JsonArray *features = json_array_new ();

  json_object_set_string_member (reply, "build_version", build);
  json_object_set_string_member (reply, "version", chv->version);
  json_object_set_int_member (reply, "pid", getpid ());
  json_array_add_string_element (features, "kvm");
  json_array_add_string_element (features, "io_uring");
  json_object_set_array_member (reply, "features", features);
  reply_object (response, reply);
}

static void
vmm_shutdown (Chv *chv, const FakeRequest *request, FakeResponse *response)
{
  fake_response_status (response, 200);
  fake_response_after (response, exit_after_reply, chv);
}

static JsonObject *
object_from (const char *text)
{
  g_autoptr (JsonNode) node = json_from_string (text, NULL);

  return json_object_ref (json_node_get_object (node));
}

static void
set_default_object (JsonObject *config, const char *name, const char *text)
{
  if (fake_json_is_null (config, name))
    json_object_set_object_member (config, name, object_from (text));
}

static void
create (Chv *chv, const FakeRequest *request, FakeResponse *response)
{
  g_autoptr (JsonObject) cfg = body_object (request, &vm_config, response);
  JsonObject *cpus, *memory, *serial;
  JsonArray *disks, *nets;
  guint n_disks;

  if (!cfg)
    return;
  if (chv->config)
    {
      chain (response, 500, "Failed to create the VM", "The VM is already created", NULL);
      return;
    }
  set_default_object (cfg, "cpus", "{\"boot_vcpus\":1,\"max_vcpus\":1}");
  cpus = fake_json_obj (cfg, "cpus");
  if (fake_json_int (cpus, "max_vcpus") < fake_json_int (cpus, "boot_vcpus") ||
      fake_json_int (cpus, "boot_vcpus") == 0)
    {
      chain (response, 500, "Failed to create the VM", "Error validating configuration",
             "Max CPUs lower than boot CPUs", NULL);
      return;
    }
  /* Every part at least one, and their product the most vCPUs there can be. */
  if (fake_json_obj (cpus, "topology"))
    {
      JsonObject *t = fake_json_obj (cpus, "topology");
      gint64 threads = fake_json_int (t, "threads_per_core"), cores = fake_json_int (t, "cores_per_die");
      gint64 dies = fake_json_int (t, "dies_per_package"), packages = fake_json_int (t, "packages");

      if (threads == 0 || cores == 0 || dies == 0 || packages == 0)
        {
          chain (response, 500, "Failed to create the VM", "Error validating configuration",
                 "No part of the CPU topology can be zero", NULL);
          return;
        }
      if (threads * cores * dies * packages != fake_json_int (cpus, "max_vcpus"))
        {
          chain (response, 500, "Failed to create the VM", "Error validating configuration",
                 "Product of CPU topology parts does not match maximum vCPUs", NULL);
          return;
        }
    }
  set_default_object (cfg, "memory", "{\"size\":536870912,\"hotplug_method\":\"Acpi\"}");
  memory = fake_json_obj (cfg, "memory");
  if (g_strcmp0 (fake_json_str (memory, "hotplug_method"), "VirtioMem") == 0 &&
      fake_json_int (memory, "hotplug_size") % (2 * MIB))
    {
      chain (response, 500, "Failed to create the VM", "Error validating configuration",
             "Invalid hotplug size", NULL);
      return;
    }
  json_object_set_int_member (memory, "hotplugged_size", fake_json_int (memory, "hotplugged_size"));
  if (!fake_json_is_null (cfg, "fs") && json_array_get_length (fake_json_arr (cfg, "fs")) > 0 &&
      !fake_json_bool (memory, "shared"))
    {
      chain (response, 500, "Failed to create the VM", "Error validating configuration",
             "Using vhost-user requires using shared memory or huge pages", NULL);
      return;
    }
  if (fake_json_is_null (cfg, "fs"))
    json_object_set_array_member (cfg, "fs", json_array_new ());
  if (fake_json_is_null (cfg, "disks"))
    json_object_set_array_member (cfg, "disks", json_array_new ());
  if (fake_json_is_null (cfg, "net"))
    json_object_set_array_member (cfg, "net", json_array_new ());
  set_default_object (cfg, "serial", "{\"mode\":\"Null\"}");
  /* The virtio console defaults to the VMM's terminal. */
  set_default_object (cfg, "console", "{\"mode\":\"Tty\"}");
  serial = fake_json_obj (cfg, "serial");
  if (g_strcmp0 (fake_json_str (serial, "mode"), "File") == 0 && !fake_json_str (serial, "file"))
    {
      chain (response, 500, "Failed to create the VM", "Error validating configuration",
             "Path missing when using file console mode", NULL);
      return;
    }
  disks = fake_json_arr (cfg, "disks");
  nets = fake_json_arr (cfg, "net");
  n_disks = json_array_get_length (disks);
  for (guint i = 0; i < n_disks; i++)
    if (!fake_json_str (json_array_get_object_element (disks, i), "id"))
      {
        g_autofree char *id = g_strdup_printf ("_disk%u", i);
        json_object_set_string_member (json_array_get_object_element (disks, i), "id", id);
      }
  for (guint i = 0; i < json_array_get_length (nets); i++)
    if (!fake_json_str (json_array_get_object_element (nets, i), "id"))
      {
        g_autofree char *id = g_strdup_printf ("_net%u", i + n_disks);
        json_object_set_string_member (json_array_get_object_element (nets, i), "id", id);
      }
  chv->config = g_steal_pointer (&cfg);
  chv->state = "Created";
  fake_response_status (response, 204);
}

/* ---- the guest ---- */

static void on_power_off (gpointer data, const char *why);
static void on_reset (gpointer data, const char *why);

static JsonObject *
block_counters (void)
{
  return object_from ("{\"read_bytes\":0,\"read_ops\":0,\"write_bytes\":0,\"write_ops\":0,"
                      "\"read_latency_min\":0,\"read_latency_max\":0,\"read_latency_avg\":0,"
                      "\"write_latency_min\":0,\"write_latency_max\":0,\"write_latency_avg\":0}");
}

static int
open_console (JsonObject *config)
{
  const char *cmdline = fake_json_str (fake_json_obj (config, "payload"), "cmdline");
  JsonObject *serial = fake_json_obj (config, "serial");
  const char *mode = fake_json_str (serial, "mode");

  /* The guest writes to its first serial port only if told to. */
  if (!cmdline || !strstr (cmdline, "console=ttyS0"))
    return -1;
  if (g_strcmp0 (mode, "File") == 0)
    return open (fake_json_str (serial, "file"), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (g_strcmp0 (mode, "Tty") == 0)
    return dup (STDOUT_FILENO);
  return -1;
}

/* Starts vCPUs @from to @to - 1 as Cloud Hypervisor does: each thread
 * pins itself to the host CPUs cpus.affinity lists for it (the last entry
 * for a vCPU listed twice, entries past max_vcpus unused). A set the
 * process may not run on fails in that thread alone, which logs it and
 * ends: the VM goes on without that vCPU. Nothing runs here; the log says
 * what was done. */
static void
start_vcpus (Chv *chv, gint64 from, gint64 to)
{
  JsonArray *affinity = fake_json_arr (fake_json_obj (chv->config, "cpus"), "affinity");
  cpu_set_t allowed;

  CPU_ZERO (&allowed);
  if (sched_getaffinity (0, sizeof allowed, &allowed) < 0)
    CPU_ZERO (&allowed);
  for (gint64 vcpu = from; vcpu < to; vcpu++)
    {
      JsonArray *cpus = NULL;
      g_autoptr (GString) list = g_string_new (NULL);
      gboolean usable = FALSE;

      for (guint i = 0; affinity && i < json_array_get_length (affinity); i++)
        {
          JsonObject *entry = json_array_get_object_element (affinity, i);

          if (fake_json_int (entry, "vcpu") == vcpu)
            cpus = fake_json_arr (entry, "host_cpus");
        }
      if (!cpus)
        continue;
      for (guint j = 0; j < json_array_get_length (cpus); j++)
        {
          gint64 cpu = json_array_get_int_element (cpus, j);

          g_string_append_printf (list, "%s%" G_GINT64_FORMAT, list->len ? ", " : "", cpu);
          if (cpu < CPU_SETSIZE && CPU_ISSET (cpu, &allowed))
            usable = TRUE;
        }
      if (usable)
        fake_log_info (&chv->log, "vCPU %" G_GINT64_FORMAT " runs on host CPUs [%s]", vcpu,
                       list->str);
      else
        fake_log_error (&chv->log, "Failed scheduling the vCPU %" G_GINT64_FORMAT " on the "
                        "expected CPU set: Invalid argument (os error 22)", vcpu);
    }
}

/* A host device as VFIO finds it: its IOMMU group from its sysfs
 * directory, then the group's node, /dev/vfio/<group>, opened. Nothing
 * is passed through, but what is missing or closed to the VMM fails as
 * it would. NULL, or the error chain under the caller's own message. */
static GPtrArray *
open_vfio (Chv *chv, JsonObject *d)
{
  const char *path = fake_json_str (d, "path");
  g_autofree char *link = g_build_filename (path, "iommu_group", NULL);
  g_autofree char *target = g_file_read_link (link, NULL);
  g_autofree char *group = target ? g_path_get_basename (target) : NULL;
  g_autofree char *node = group ? g_build_filename ("/dev/vfio", group, NULL) : NULL;
  int fd = node ? open (node, O_RDWR | O_CLOEXEC) : -1;
  GPtrArray *error;

  if (fd < 0)
    {
      g_autofree char *why = fake_os_error_text (node ? errno : ENOENT);
      error = g_ptr_array_new_with_free_func (g_free);
      g_ptr_array_add (error, g_strdup ("Error from device manager"));
      g_ptr_array_add (error, g_strdup ("Cannot create VFIO device"));
      g_ptr_array_add (error, g_strdup_printf ("Failed to open the VFIO group of %s (%s): %s",
                                               path, node ? node : "no iommu_group", why));
      return error;
    }
  close (fd);
  fake_log_info (&chv->log, "VFIO device %s: %s, group %s", fake_json_str (d, "id"), path, group);
  return NULL;
}

/* Brings the configured VM up; NULL, or the error chain under the
 * caller's own outermost message. */
static GPtrArray *
start_guest (Chv *chv, JsonObject *guest_state, gboolean paused)
{
  FakeGuestHooks hooks = { on_power_off, on_reset, chv };
  JsonArray *disks = fake_json_arr (chv->config, "disks");
  JsonArray *nets = fake_json_arr (chv->config, "net");
  JsonObject *vsock = fake_json_obj (chv->config, "vsock");
  JsonArray *devices = fake_json_arr (chv->config, "devices");
  GPtrArray *error;

  for (guint i = 0; i < json_array_get_length (disks); i++)
    {
      JsonObject *d = json_array_get_object_element (disks, i);
      const char *path = fake_json_str (d, "path");
      int fd = open (path ? path : "", (fake_json_bool (d, "readonly") ? O_RDONLY : O_RDWR) | O_CLOEXEC);

      if (fd < 0)
        {
          g_autofree char *why = fake_os_error_text (errno);
          error = g_ptr_array_new_with_free_func (g_free);
          g_ptr_array_add (error, g_strdup ("Error from device manager"));
          g_ptr_array_add (error, g_strdup ("Cannot create virtio-blk device"));
          g_ptr_array_add (error, g_strdup_printf ("Failed to open disk file %s: %s",
                                                   path ? path : "", why));
          return error;
        }
      close (fd);
    }
  for (guint i = 0; devices && i < json_array_get_length (devices); i++)
    if ((error = open_vfio (chv, json_array_get_object_element (devices, i))))
      return error;
  for (guint i = 0; i < json_array_get_length (fake_json_arr (chv->config, "fs")); i++)
    {
      JsonObject *f = json_array_get_object_element (fake_json_arr (chv->config, "fs"), i);
      const char *path = fake_json_str (f, "socket");
      struct sockaddr_un addr = { .sun_family = AF_UNIX };
      int fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

      g_strlcpy (addr.sun_path, path, sizeof addr.sun_path);
      if (fd < 0 || connect (fd, (struct sockaddr *) &addr, sizeof addr) < 0)
        {
          g_autofree char *why = fake_os_error_text (errno);
          if (fd >= 0)
            close (fd);
          error = g_ptr_array_new_with_free_func (g_free);
          g_ptr_array_add (error, g_strdup ("Error from device manager"));
          g_ptr_array_add (error, g_strdup ("Cannot create virtio-fs device"));
          g_ptr_array_add (error, g_strdup_printf ("Failed connecting the backend: %s", why));
          return error;
        }
      fake_log_info (&chv->log, "fs %s: connected to %s", fake_json_str (f, "tag"), path);
      g_array_append_val (chv->fs_fds, fd);
    }
  if (vsock)
    {
      FakeVsock *device = fake_vsock_new (fake_json_str (vsock, "socket"),
                                          fake_json_int (vsock, "cid"), &chv->log);
      int err = fake_vsock_bind (device);

      if (err)
        {
          g_autofree char *why = fake_os_error_text (err);
          fake_vsock_free (device);
          error = g_ptr_array_new_with_free_func (g_free);
          g_ptr_array_add (error, g_strdup ("Error from device manager"));
          g_ptr_array_add (error, g_strdup ("Cannot create virtio-vsock device"));
          g_ptr_array_add (error, g_strdup_printf ("Error binding to the Unix socket: %s", why));
          return error;
        }
      chv->vsock = device;
    }
  g_clear_pointer (&chv->counters, json_object_unref);
  chv->counters = json_object_new ();
  for (guint i = 0; i < json_array_get_length (disks); i++)
    json_object_set_object_member (chv->counters,
                                   fake_json_str (json_array_get_object_element (disks, i), "id"),
                                   block_counters ());
  for (guint i = 0; i < json_array_get_length (nets); i++)
    json_object_set_object_member (chv->counters,
                                   fake_json_str (json_array_get_object_element (nets, i), "id"),
                                   object_from ("{\"rx_bytes\":0,\"rx_frames\":0,\"tx_bytes\":0,"
                                                "\"tx_frames\":0}"));
  chv->guest = fake_guest_new (fake_json_str (fake_json_obj (chv->config, "payload"), "cmdline"),
                               &hooks, open_console (chv->config), guest_state, chv->vsock);
  /* In Tty mode the serial port reads the VMM's stdin. */
  if (g_strcmp0 (fake_json_str (fake_json_obj (chv->config, "serial"), "mode"), "Tty") == 0)
    fake_guest_take_console_input (chv->guest, STDIN_FILENO);
  if (chv->vsock)
    fake_vsock_start (chv->vsock, chv->guest);
  start_vcpus (chv, 0, fake_json_int (fake_json_obj (chv->config, "cpus"), "boot_vcpus"));
  fake_guest_start (chv->guest, paused);
  chv->state = paused ? "Paused" : "Running";
  return NULL;
}

static void
stop_guest (Chv *chv)
{
  g_clear_pointer (&chv->guest, fake_guest_free);
  g_clear_pointer (&chv->vsock, fake_vsock_free);
  for (guint i = 0; i < chv->fs_fds->len; i++)
    close (g_array_index (chv->fs_fds, int, i));
  g_array_set_size (chv->fs_fds, 0);
}

static void
on_power_off (gpointer data, const char *why)
{
  Chv *chv = data;

  fake_log_info (&chv->log, "VM shut down by the guest (%s)", why);
  /* Without --no-shutdown the VMM exits with the guest. */
  chv_exit (chv, 0);
}

static void
on_reset (gpointer data, const char *why)
{
  Chv *chv = data;
  g_autoptr (GPtrArray) error = NULL;

  /* A guest reboot restarts the VM in Cloud Hypervisor. */
  stop_guest (chv);
  error = start_guest (chv, NULL, FALSE);
  if (error)
    fake_log_error (&chv->log, "Error rebooting the VM: %s", (const char *) error->pdata[error->len - 1]);
}

static void
respond_start_error (FakeResponse *response, const char *outer, GPtrArray *error)
{
  g_ptr_array_insert (error, 0, g_strdup (outer));
  chain_array (response, 500, error);
}

static void
boot (Chv *chv, const FakeRequest *request, FakeResponse *response)
{
  g_autoptr (GPtrArray) error = NULL;

  if (!need_vm (chv, "booting the VM", response))
    return;
  if (!state_is (chv, "Created", NULL))
    {
      chain (response, 500, "Error booting the VM", "The VM is already booted", NULL);
      return;
    }
  error = start_guest (chv, NULL, FALSE);
  if (error)
    respond_start_error (response, "Error booting the VM", error);
  else
    fake_response_status (response, 204);
}

static void
info (Chv *chv, const FakeRequest *request, FakeResponse *response)
{
  g_autoptr (JsonObject) reply = json_object_new ();
  JsonObject *memory;

  if (!need_vm (chv, "getting VM info", response))
    return;
  memory = fake_json_obj (chv->config, "memory");
  json_object_set_object_member (reply, "config", json_object_ref (chv->config));
  json_object_set_string_member (reply, "state", chv->state);
  json_object_set_int_member (reply, "memory_actual_size",
                              fake_json_int (memory, "size") + fake_json_int (memory, "hotplugged_size"));
  json_object_set_object_member (reply, "device_tree", json_object_new ());
  reply_object (response, reply);
  /* vm.info is how microvmd asks whether the VMM is still there. */
  fake_control_probe (&chv->control, response);
}

static void
counters (Chv *chv, const FakeRequest *request, FakeResponse *response)
{
  JsonObjectIter iter;
  const char *device;
  JsonNode *node;

  if (!need_vm (chv, "getting VM counters", response))
    return;
  if (!chv->counters)
    chv->counters = json_object_new ();
  if (chv->guest)
    {
      /* The guest does some I/O while it runs, so that counters move. */
      gint64 up = (gint64) (fake_guest_uptime (chv->guest) * 1000);

      json_object_iter_init (&iter, chv->counters);
      while (json_object_iter_next (&iter, &device, &node))
        {
          JsonObject *c = json_node_get_object (node);
          if (json_object_has_member (c, "read_bytes"))
            {
              json_object_set_int_member (c, "read_ops", up);
              json_object_set_int_member (c, "read_bytes", up * 4096);
            }
          else
            {
              json_object_set_int_member (c, "rx_frames", up / 10);
              json_object_set_int_member (c, "rx_bytes", up * 100);
            }
        }
    }
  reply_object (response, chv->counters);
}

static void
pause_vm (Chv *chv, const FakeRequest *request, FakeResponse *response)
{
  if (!need_vm (chv, "pausing the VM", response) ||
      !transition (chv, "pausing the VM", "Paused", "Running", response))
    return;
  fake_guest_set_paused (chv->guest, TRUE);
  chv->state = "Paused";
  fake_response_status (response, 204);
}

static void
resume_vm (Chv *chv, const FakeRequest *request, FakeResponse *response)
{
  if (!need_vm (chv, "resuming the VM", response) ||
      !transition (chv, "resuming the VM", "Running", "Paused", response))
    return;
  fake_guest_set_paused (chv->guest, FALSE);
  chv->state = "Running";
  fake_response_status (response, 204);
}

static void
press_power_button (gpointer data)
{
  Chv *chv = data;

  if (chv->guest)
    fake_guest_power_button (chv->guest);
}

static void
power_button (Chv *chv, const FakeRequest *request, FakeResponse *response)
{
  if (!need_vm (chv, "triggering power button", response))
    return;
  if (!state_is (chv, "Running", "Paused"))
    {
      chain (response, 500, "Error triggering power button", "The VM is not booted", NULL);
      return;
    }
  /* A real guest takes far longer to react than the reply takes to leave,
   * so the button is pressed once the reply is out. */
  fake_response_status (response, 204);
  fake_response_after (response, press_power_button, chv);
}

static void
vm_shutdown (Chv *chv, const FakeRequest *request, FakeResponse *response)
{
  if (!need_vm (chv, "shutting down the VM", response))
    return;
  if (!state_is (chv, "Running", "Paused"))
    {
      chain (response, 500, "Error shutting down the VM", "The VM is not booted", NULL);
      return;
    }
  /* The VM stops; the VMM stays. */
  stop_guest (chv);
  chv->state = "Shutdown";
  fake_response_status (response, 204);
}

static void
reboot (Chv *chv, const FakeRequest *request, FakeResponse *response)
{
  g_autoptr (GPtrArray) error = NULL;

  if (!need_vm (chv, "rebooting the VM", response))
    return;
  if (!state_is (chv, "Running", NULL))
    {
      chain (response, 500, "Error rebooting the VM", "The VM is not booted", NULL);
      return;
    }
  stop_guest (chv);
  error = start_guest (chv, NULL, FALSE);
  if (error)
    respond_start_error (response, "Error rebooting the VM", error);
  else
    fake_response_status (response, 204);
}

static void
delete (Chv *chv, const FakeRequest *request, FakeResponse *response)
{
  stop_guest (chv);
  g_clear_pointer (&chv->config, json_object_unref);
  chv->state = NULL;
  fake_response_status (response, 204);
}

static void
resize (Chv *chv, const FakeRequest *request, FakeResponse *response)
{
  g_autoptr (JsonObject) r = body_object (request, &resize_type, response);
  JsonObject *cpus, *memory;
  g_autofree char *why = NULL;

  if (!r || !need_vm (chv, "resizing the VM", response))
    return;
  if (!state_is (chv, "Running", "Paused") && !state_is (chv, "Created", NULL))
    {
      chain (response, 500, "Error resizing the VM", "The VM is not booted", NULL);
      return;
    }
  cpus = fake_json_obj (chv->config, "cpus");
  memory = fake_json_obj (chv->config, "memory");
  if (!fake_json_is_null (r, "desired_vcpus"))
    {
      gint64 n = fake_json_int (r, "desired_vcpus");
      if (n > fake_json_int (cpus, "max_vcpus"))
        why = g_strdup_printf ("Cannot resize to %" G_GINT64_FORMAT " vCPUs: more than the maximum "
                               "of %" G_GINT64_FORMAT, n, fake_json_int (cpus, "max_vcpus"));
      else if (n < 1)
        why = g_strdup ("Cannot remove all vCPUs");
      if (why)
        {
          chain (response, 500, "Error resizing the VM", "Error resizing vCPUs", why, NULL);
          return;
        }
    }
  if (!fake_json_is_null (r, "desired_ram"))
    {
      gint64 ram = fake_json_int (r, "desired_ram");
      gint64 size = fake_json_int (memory, "size");
      gint64 hotplug = fake_json_int (memory, "hotplug_size");
      gboolean virtio_mem = g_strcmp0 (fake_json_str (memory, "hotplug_method"), "VirtioMem") == 0;

      if (!hotplug)
        why = g_strdup ("Memory hotplug is not enabled: no hotplug_size was given");
      else if (ram > size + hotplug)
        why = g_strdup_printf ("Cannot hotplug memory beyond the maximum of %" G_GINT64_FORMAT
                               " bytes", size + hotplug);
      /* ACPI only grows; virtio-mem grows and shrinks in 2 MiB blocks. */
      else if (!virtio_mem && ram < size + fake_json_int (memory, "hotplugged_size"))
        why = g_strdup ("Cannot remove memory with the ACPI hotplug method");
      else if (virtio_mem && (ram < size || ram % (2 * MIB)))
        why = g_strdup_printf ("Invalid size for virtio-mem: %" G_GINT64_FORMAT, ram);
      if (why)
        {
          chain (response, 500, "Error resizing the VM", "Error resizing memory", why, NULL);
          return;
        }
      json_object_set_int_member (memory, "hotplugged_size", ram - size);
    }
  if (!fake_json_is_null (r, "desired_vcpus"))
    {
      gint64 had = fake_json_int (cpus, "boot_vcpus");

      json_object_set_int_member (cpus, "boot_vcpus", fake_json_int (r, "desired_vcpus"));
      if (chv->guest)
        start_vcpus (chv, had, fake_json_int (r, "desired_vcpus"));
    }
  fake_response_status (response, 204);
}

/* ---- snapshots ---- */

static const char *
url_path (const char *url, const char *outer, FakeResponse *response)
{
  g_autofree char *invalid = NULL;

  if (g_str_has_prefix (url, "file://"))
    return url + strlen ("file://");
  invalid = g_strdup_printf ("Invalid snapshot URL: %s", url);
  chain (response, 500, outer, invalid, NULL);
  return NULL;
}

static gboolean
write_json (const char *path, JsonNode *node, gboolean pretty, int *errnum)
{
  g_autoptr (JsonGenerator) generator = json_generator_new ();
  g_autofree char *text = NULL;
  int fd;

  json_generator_set_root (generator, node);
  json_generator_set_pretty (generator, pretty);
  json_generator_set_indent (generator, 1);
  text = json_generator_to_data (generator, NULL);
  fd = open (path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0 || !fake_write_all (fd, text, strlen (text)))
    {
      *errnum = errno;
      if (fd >= 0)
        close (fd);
      return FALSE;
    }
  close (fd);
  return TRUE;
}

static gboolean
write_snapshot (Chv *chv, const char *dir, int *errnum)
{
  g_autofree char *nonce = g_strdup_printf ("%d-%" G_GINT64_FORMAT, getpid (), g_get_real_time ());
  g_autofree char *header = g_strconcat (MEM_HEADER, nonce, "\n", NULL);
  g_autofree char *memory_path = g_build_filename (dir, "memory-ranges", NULL);
  g_autofree char *config_path = g_build_filename (dir, "config.json", NULL);
  g_autofree char *state_path = g_build_filename (dir, "state.json", NULL);
  g_autoptr (JsonNode) config = json_node_new (JSON_NODE_OBJECT);
  g_autoptr (JsonNode) state = json_node_new (JSON_NODE_OBJECT);
  JsonObject *memory = fake_json_obj (chv->config, "memory");
  JsonObject *s = json_object_new ();
  int fd;

  json_node_set_object (config, chv->config);
  json_object_set_string_member (s, "version", chv->version);
  json_object_set_string_member (s, "nonce", nonce);
  json_object_set_member (s, "guest", fake_guest_snapshot_state (chv->guest));
  json_node_take_object (state, s);
  if (!g_file_test (dir, G_FILE_TEST_IS_DIR))
    {
      *errnum = ENOENT;
      return FALSE;
    }
  /* As large as the guest's memory, and sparse. */
  fd = open (memory_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0 || !fake_write_all (fd, header, strlen (header)) ||
      ftruncate (fd, fake_json_int (memory, "size") + fake_json_int (memory, "hotplugged_size")) < 0)
    {
      *errnum = errno;
      if (fd >= 0)
        close (fd);
      return FALSE;
    }
  close (fd);
  return write_json (config_path, config, TRUE, errnum) &&
         write_json (state_path, state, FALSE, errnum);
}

static void
snapshot (Chv *chv, const FakeRequest *request, FakeResponse *response)
{
  g_autoptr (JsonObject) cfg = body_object (request, &snapshot_type, response);
  const char *dir;
  int errnum = 0;

  if (!cfg || !need_vm (chv, "creating VM snapshot", response))
    return;
  if (!state_is (chv, "Paused", NULL))
    {
      chain (response, 500, "Error creating VM snapshot", "Trying to snapshot while VM is running",
             NULL);
      return;
    }
  dir = url_path (fake_json_str (cfg, "destination_url"), "Error creating VM snapshot", response);
  if (!dir)
    return;
  errnum = fake_control_snapshot_error (&chv->control);
  if (errnum || !write_snapshot (chv, dir, &errnum))
    {
      g_autofree char *os = fake_os_error_text (errnum);
      g_autofree char *why = g_strdup_printf ("Failed to write snapshot to %s: %s", dir, os);
      chain (response, 500, "Error creating VM snapshot", "Error sending snapshot", why, NULL);
      return;
    }
  fake_response_status (response, 204);
}

static JsonNode *
read_json (const char *dir, const char *name, const FakeType *type, char **why)
{
  g_autofree char *path = g_build_filename (dir, name, NULL);
  g_autofree char *text = NULL;
  g_autoptr (GError) error = NULL;
  gsize len;
  int errnum;
  JsonNode *node;

  if (!fake_read_file (path, &text, &len, &errnum))
    {
      *why = fake_os_error_text (errnum);
      return NULL;
    }
  node = fake_json_parse (text, len, type, &error);
  if (!node)
    *why = g_strdup (error->message);
  else if (!JSON_NODE_HOLDS_OBJECT (node))
    {
      *why = g_strdup_printf ("%s is not a JSON object", name);
      g_clear_pointer (&node, json_node_unref);
    }
  return node;
}

/* The first @len bytes of @path as a string (shorter if the file is). */
static char *
read_head (const char *path, gsize len, int *errnum)
{
  char *head = g_malloc0 (len + 1);
  int fd = open (path, O_RDONLY | O_CLOEXEC);

  if (fd < 0 || read (fd, head, len) < 0)
    {
      *errnum = errno;
      if (fd >= 0)
        close (fd);
      g_free (head);
      return NULL;
    }
  close (fd);
  return head;
}

static void
restore (Chv *chv, const FakeRequest *request, FakeResponse *response)
{
  g_autoptr (JsonObject) cfg = body_object (request, &restore_type, response);
  g_autoptr (JsonNode) config = NULL;
  g_autoptr (JsonNode) state = NULL;
  g_autoptr (GPtrArray) error = NULL;
  g_autofree char *why = NULL;
  g_autofree char *expected = NULL;
  g_autofree char *memory_path = NULL;
  g_autofree char *head = NULL;
  const char *dir, *version, *nonce;
  int errnum = 0;

  if (!cfg)
    return;
  if (chv->config)
    {
      chain (response, 500, "Error restoring VM", "The VM is already created", NULL);
      return;
    }
  dir = url_path (fake_json_str (cfg, "source_url"), "Error restoring VM", response);
  if (!dir)
    return;
  config = read_json (dir, "config.json", &vm_config, &why);
  if (config)
    state = read_json (dir, "state.json", NULL, &why);
  nonce = state ? fake_json_str (json_node_get_object (state), "nonce") : NULL;
  memory_path = g_build_filename (dir, "memory-ranges", NULL);
  if (state && !nonce)
    why = g_strdup ("state.json has no nonce");
  else if (nonce)
    {
      /* Only the head: the rest is as large as the guest's memory. */
      expected = g_strconcat (MEM_HEADER, nonce, "\n", NULL);
      head = read_head (memory_path, strlen (expected), &errnum);
      if (!head)
        why = fake_os_error_text (errnum);
    }
  if (why)
    {
      g_autofree char *inner = g_strdup_printf ("Cannot read snapshot in %s: %s", dir, why);
      chain (response, 500, "Error restoring VM", "Error receiving snapshot", inner, NULL);
      return;
    }
  /* Same binary version only. */
  version = fake_json_str (json_node_get_object (state), "version");
  if (g_strcmp0 (version, chv->version) != 0)
    {
      g_autofree char *inner = g_strdup_printf ("The snapshot was taken by version %s; this is %s",
                                                version ? version : "None", chv->version);
      chain (response, 500, "Error restoring VM", "Error restoring snapshot", inner, NULL);
      return;
    }
  if (strcmp (head, expected) != 0)
    {
      chain (response, 500, "Error restoring VM", "Error restoring memory",
             "memory-ranges does not belong to this snapshot", NULL);
      return;
    }
  chv->config = json_object_ref (json_node_get_object (config));
  error = start_guest (chv, fake_json_obj (json_node_get_object (state), "guest"),
                       !fake_json_bool (cfg, "resume"));
  if (error)
    {
      g_clear_pointer (&chv->config, json_object_unref);
      respond_start_error (response, "Error restoring VM", error);
      return;
    }
  fake_response_status (response, 204);
}

/* vm.add-device: a host device plugged into the VM, hot if it is booted
 * (200 with its ID and PCI address), cold if not (204, for its boot). */
static void
add_device (Chv *chv, const FakeRequest *request, FakeResponse *response)
{
  g_autoptr (JsonObject) d = body_object (request, &device_config, response);
  g_autoptr (GPtrArray) error = NULL;
  g_autoptr (JsonObject) reply = NULL;
  g_autofree char *bdf = NULL;
  JsonArray *devices;
  const char *id;
  guint n;

  if (!d || !need_vm (chv, "adding the device to the VM", response))
    return;
  devices = fake_json_arr (chv->config, "devices");
  if (!devices)
    {
      json_object_set_array_member (chv->config, "devices", json_array_new ());
      devices = fake_json_arr (chv->config, "devices");
    }
  n = json_array_get_length (devices);
  id = fake_json_str (d, "id");
  for (guint i = 0; id && i < n; i++)
    if (g_strcmp0 (fake_json_str (json_array_get_object_element (devices, i), "id"), id) == 0)
      {
        g_autofree char *why = g_strdup_printf ("Identifier %s is not unique", id);
        chain (response, 500, "Error adding the device to the VM", "Error from device manager",
               why, NULL);
        return;
      }
  if (state_is (chv, "Created", NULL))
    {
      json_array_add_object_element (devices, json_object_ref (d));
      fake_response_status (response, 204);
      return;
    }
  if ((error = open_vfio (chv, d)))
    {
      respond_start_error (response, "Error adding the device to the VM", error);
      return;
    }
  if (!id)
    {
      g_autofree char *given = g_strdup_printf ("_vfio%u", n);
      json_object_set_string_member (d, "id", given);
    }
  json_array_add_object_element (devices, json_object_ref (d));
  reply = json_object_new ();
  json_object_set_string_member (reply, "id", fake_json_str (d, "id"));
  bdf = g_strdup_printf ("0000:00:%02x.0", 8 + n);
  json_object_set_string_member (reply, "bdf", bdf);
  reply_object (response, reply);
}

/* ---- routing ---- */

typedef void (*Handler) (Chv *chv, const FakeRequest *request, FakeResponse *response);

static const struct {
  const char *name;
  const char *method;
  Handler     handler;
  gboolean    takes_body;
} routes[] = {
  { "vmm.ping", "GET", ping, FALSE },
  { "vmm.shutdown", "PUT", vmm_shutdown, FALSE },
  { "vm.create", "PUT", create, TRUE },
  { "vm.boot", "PUT", boot, FALSE },
  { "vm.info", "GET", info, FALSE },
  { "vm.counters", "GET", counters, FALSE },
  { "vm.pause", "PUT", pause_vm, FALSE },
  { "vm.resume", "PUT", resume_vm, FALSE },
  { "vm.shutdown", "PUT", vm_shutdown, FALSE },
  { "vm.reboot", "PUT", reboot, FALSE },
  { "vm.power-button", "PUT", power_button, FALSE },
  { "vm.delete", "PUT", delete, FALSE },
  { "vm.snapshot", "PUT", snapshot, TRUE },
  { "vm.restore", "PUT", restore, TRUE },
  { "vm.resize", "PUT", resize, TRUE },
  { "vm.add-device", "PUT", add_device, TRUE },
};

static void
handle (const FakeRequest *request, FakeResponse *response, gpointer data)
{
  g_autofree char *path = fake_request_path (request);
  const char *prefix = "/api/v1/";
  const char *name;

  fake_control_request (&((Chv *) data)->control, request);
  if (!g_str_has_prefix (path, prefix))
    {
      fake_response_status (response, 404);
      return;
    }
  name = path + strlen (prefix);
  for (gsize i = 0; i < G_N_ELEMENTS (routes); i++)
    {
      if (strcmp (routes[i].name, name) != 0)
        continue;
      if (strcmp (routes[i].method, request->method) != 0)
        fake_response_status (response, 400);
      else if (routes[i].takes_body && !request->body)
        chain (response, 400, "Missing body", NULL);
      else if (!routes[i].takes_body && request->body && strcmp (name, "vmm.ping") != 0)
        chain (response, 400, "Body not expected", NULL);
      else
        routes[i].handler (data, request, response);
      return;
    }
  fake_response_status (response, 404);
}

/* ---- the process ---- */

static void
chv_exit (Chv *chv, int code)
{
  /* Cloud Hypervisor removes its socket on a clean exit. */
  unlink (chv->api_socket);
  fake_vmm_exit (code);
}

static gboolean
on_signal (gpointer data)
{
  chv_exit (data, 0);
  return G_SOURCE_CONTINUE;
}

static char *
log_prefix (const char *level, gpointer data)
{
  return g_strdup_printf ("cloud-hypervisor: %.6fs: <vmm> %s:", g_get_monotonic_time () / 1e6,
                          level);
}

G_GNUC_NORETURN static void
die (const char *format, ...) G_GNUC_PRINTF (1, 2);

static void
die (const char *format, ...)
{
  va_list args;

  va_start (args, format);
  vfprintf (stderr, format, args);
  va_end (args);
  fputc ('\n', stderr);
  exit (1);
}

static const char *const value_flags[] = {
  "--api-socket", "--log-file", "--event-monitor", "--seccomp", "--kernel", "--cmdline",
  "--initramfs", "--cpus", "--memory", "--serial", "--console", NULL };

/* Cloud Hypervisor's arguments; FALSE for --version. */
static gboolean
parse_args (Chv *chv, int argc, char **argv)
{
  gboolean version = FALSE;

  for (int i = 1; i < argc; i++)
    {
      const char *a = argv[i];

      if (strcmp (a, "-V") == 0 || strcmp (a, "--version") == 0)
        version = TRUE;
      else if (a[0] == '-' && a[1] == 'v' && strspn (a + 1, "v") == strlen (a + 1))
        chv->verbose = TRUE;
      else if (g_strv_contains (value_flags, a))
        {
          const char *v;

          if (i + 1 >= argc)
            die ("error: a value is required for '%s <%s>' but none was supplied", a, a + 2);
          v = argv[++i];
          if (strcmp (a, "--api-socket") == 0)
            {
              g_autoptr (GHashTable) options = fake_parse_options (v);
              const char *path = g_hash_table_lookup (options, "path");

              if (!path && !strchr (v, '='))
                path = v;
              if (!path || !*path)
                die ("Error parsing --api-socket: path=<socket_path> is required");
              g_free (chv->api_socket);
              chv->api_socket = g_strdup (path);
            }
          else if (strcmp (a, "--log-file") == 0)
            {
              g_free (chv->log_file);
              chv->log_file = g_strdup (v);
            }
          else if (strcmp (a, "--kernel") == 0 || strcmp (a, "--cpus") == 0 ||
                   strcmp (a, "--memory") == 0)
            die ("This test double boots only through the API; %s is not supported", a);
        }
      else
        die ("error: unexpected argument '%s' found", a);
    }
  return !version;
}

/* Takes <path>.lock and replaces a stale socket; a VMM holding the lock
 * still serves there. */
static int
bind_api_socket (Chv *chv)
{
  g_autofree char *lock = g_strconcat (chv->api_socket, ".lock", NULL);
  struct sockaddr_un addr = { .sun_family = AF_UNIX };
  int fd;

  chv->lock_fd = open (lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (chv->lock_fd < 0 || lockf (chv->lock_fd, F_TLOCK, 0) < 0)
    die ("Error starting the VMM: Error creating API server: The API socket %s is in use by "
         "another VMM (its lock %s is held)", chv->api_socket, lock);
  if (unlink (chv->api_socket) < 0 && errno != ENOENT)
    {
      g_autofree char *why = fake_os_error_text (errno);
      die ("Error starting the VMM: Error creating API server: %s", why);
    }
  fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (strlen (chv->api_socket) >= sizeof addr.sun_path)
    errno = ENAMETOOLONG;
  else
    {
      strcpy (addr.sun_path, chv->api_socket);
      if (bind (fd, (struct sockaddr *) &addr, sizeof addr) == 0 && listen (fd, 16) == 0)
        return fd;
    }
  {
    g_autofree char *why = fake_os_error_text (errno);
    die ("Error starting the VMM: Error creating API server: %s", why);
  }
}

int
main (int argc, char **argv)
{
  Chv chv = { .lock_fd = -1 };
  guint sigterm, sigint;
  int code;

  chv.fs_fds = g_array_new (FALSE, FALSE, sizeof (int));

  chv.version = fake_vmm_version (argv[0], DEFAULT_VERSION);
  if (!parse_args (&chv, argc, argv))
    {
      printf ("cloud-hypervisor v%s\n", chv.version);
      g_free (chv.api_socket);
      g_free (chv.log_file);
      return 0;
    }
  if (!chv.api_socket)
    die ("Error: --api-socket is required by this test double");
  fake_control_init (&chv.control, chv.api_socket);
  fake_log_init (&chv.log, log_prefix, &chv, chv.verbose ? "info" : "warning");
  if (chv.log_file)
    fake_log_set_path (&chv.log, chv.log_file);
  chv.http = fake_http_server_new (bind_api_socket (&chv), "Cloud Hypervisor API",
                                   FAKE_HTTP_DEFAULT_PAYLOAD_LIMIT, handle, &chv);
  sigterm = g_unix_signal_add (SIGTERM, on_signal, &chv);
  sigint = g_unix_signal_add (SIGINT, on_signal, &chv);
  code = fake_vmm_run ();

  g_source_remove (sigterm);
  g_source_remove (sigint);
  fake_http_server_free (chv.http);
  stop_guest (&chv);
  g_clear_pointer (&chv.config, json_object_unref);
  g_clear_pointer (&chv.counters, json_object_unref);
  fake_log_clear (&chv.log);
  fake_control_clear (&chv.control);
  close (chv.lock_fd);
  g_free (chv.api_socket);
  g_free (chv.log_file);
  return code;
}
