/* Cloud Hypervisor over its REST API. */
#include "cloud-hypervisor.h"
#include "rest.h"
#include "versions.h"
#include "core/errors.h"
#include "core/json-util.h"
#include "util/files.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#define SERVER_NAME        "Cloud Hypervisor"
#define START_TIMEOUT_MS   10000
#define RESIZE_TIMEOUT_MS  10000
#define RESIZE_POLL_MS     50
#define FS_QUEUE_SIZE      1024   /* virtio-fs requests the device queue holds */

/* ---- API calls ---- */

/* Gives the error the code the VMM's answer means: 404 is "no VM
 * created", and a 500 is a wrong-state call when the message says so. */
static void
refine_error (guint status, GError *error)
{
  if (!error || error->domain != MV_ERROR)
    return;
  if (status == 404)
    error->code = MV_ERROR_INVALID_STATE;
  else if (status == 500 && (strstr (error->message, "state transition") ||
                             strstr (error->message, "while VM is running") ||
                             strstr (error->message, "not booted") ||
                             strstr (error->message, "already")))
    error->code = MV_ERROR_INVALID_STATE;
}

/* ---- the running guest ---- */

static gboolean
chv_destroy_vm (MvHypervisor *base, GError **error)
{
  return mv_rest_put ((MvRestHypervisor *) base, "vm.shutdown", NULL, error);
}

static gboolean
chv_shutdown_vm (MvHypervisor *base, GError **error)
{
  return mv_rest_put ((MvRestHypervisor *) base, "vm.power-button", NULL, error);
}

static gboolean
chv_shutdown (MvHypervisor *base, GError **error)
{
  MvRestHypervisor *hv = (MvRestHypervisor *) base;
  g_autoptr (GError) local = NULL;

  /* The VMM may close the connection as it goes, before or after it
   * answers. */
  if (!mv_rest_put (hv, "vmm.shutdown", NULL, &local) && local->code != MV_ERROR_UNAVAILABLE)
    {
      g_propagate_error (error, g_steal_pointer (&local));
      return FALSE;
    }
  return TRUE;
}

static gboolean
chv_vm_info (MvHypervisor *base, MvVmInfo *info, GError **error)
{
  g_autoptr (JsonObject) reply = mv_rest_get ((MvRestHypervisor *) base, "vm.info", error);
  const char *state;

  if (!reply)
    return FALSE;
  state = json_object_get_string_member_with_default (reply, "state", "");
  memset (info, 0, sizeof *info);
  info->state = mv_rest_vm_state (state);
  if (json_object_has_member (reply, "memory_actual_size"))
    {
      info->has_memory_bytes = TRUE;
      info->memory_bytes = mv_json_get_uint (reply, "memory_actual_size");
    }
  return TRUE;
}

static gboolean
chv_pause_vm (MvHypervisor *base, GError **error)
{
  return mv_rest_put ((MvRestHypervisor *) base, "vm.pause", NULL, error);
}

static gboolean
chv_resume_vm (MvHypervisor *base, GError **error)
{
  return mv_rest_put ((MvRestHypervisor *) base, "vm.resume", NULL, error);
}

static gboolean
chv_snapshot_vm (MvHypervisor *base, const char *dest_dir, GError **error)
{
  g_autoptr (JsonObject) body = json_object_new ();
  g_autofree char *dir = mv_rest_absolute_path (dest_dir);
  g_autofree char *url = g_strconcat ("file://", dir, NULL);

  json_object_set_string_member (body, "destination_url", url);
  return mv_rest_put ((MvRestHypervisor *) base, "vm.snapshot", body, error);
}

static gboolean
chv_resize_vm_memory (MvHypervisor *base, guint64 bytes, GError **error)
{
  MvRestHypervisor *hv = (MvRestHypervisor *) base;
  g_autoptr (JsonObject) info = mv_rest_get (hv, "vm.info", error);
  g_autoptr (JsonObject) body = json_object_new ();
  JsonObject *memory;
  gint64 deadline;

  if (!info)
    return FALSE;
  memory = mv_json_get_object (mv_json_get_object (info, "config"), "memory");
  if (!mv_check_memory_resize (bytes, mv_json_get_uint (memory, "size"),
                               mv_json_get_uint (memory, "hotplug_size"), error))
    return FALSE;
  json_object_set_int_member (body, "desired_ram", (gint64) bytes);
  if (!mv_rest_put (hv, "vm.resize", body, error))
    return FALSE;

  /* virtio-mem plugs and unplugs as the guest gets to it. */
  deadline = g_get_monotonic_time () + RESIZE_TIMEOUT_MS * 1000;
  for (;;)
    {
      MvVmInfo now;

      if (!chv_vm_info (base, &now, error))
        return FALSE;
      if (!now.has_memory_bytes || now.memory_bytes == bytes)
        return TRUE;
      if (g_get_monotonic_time () > deadline)
        {
          g_set_error (error, MV_ERROR, MV_ERROR_FAILED, "memory_bytes: the guest has %"
                       G_GUINT64_FORMAT " bytes %d ms after it was asked for %" G_GUINT64_FORMAT,
                       now.memory_bytes, RESIZE_TIMEOUT_MS, bytes);
          return FALSE;
        }
      g_usleep (RESIZE_POLL_MS * 1000);
    }
}

static gboolean
chv_resize_vm_cpu (MvHypervisor *base, guint count, GError **error)
{
  MvRestHypervisor *hv = (MvRestHypervisor *) base;
  g_autoptr (JsonObject) info = mv_rest_get (hv, "vm.info", error);
  g_autoptr (JsonObject) body = json_object_new ();
  JsonObject *cpus;
  guint64 max;

  if (!info)
    return FALSE;
  cpus = mv_json_get_object (mv_json_get_object (info, "config"), "cpus");
  max = mv_json_get_uint (cpus, "max_vcpus");
  if (count == 0 || count > max)
    {
      g_set_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT,
                   "max_vcpus: %u vCPUs is outside 1 to the %" G_GUINT64_FORMAT
                   " the guest booted with room for", count, max);
      return FALSE;
    }
  json_object_set_int_member (body, "desired_vcpus", count);
  return mv_rest_put (hv, "vm.resize", body, error);
}

/* A host device as DeviceConfig has it, in vm.create and vm.add-device. */
static JsonObject *
device_config (const MvVmDevice *device)
{
  JsonObject *config = json_object_new ();

  json_object_set_string_member (config, "path", device->path);
  json_object_set_string_member (config, "id", device->id);
  return config;
}

static gboolean
chv_add_device (MvHypervisor *base, const MvVmDevice *device, GError **error)
{
  g_autoptr (JsonObject) body = device_config (device);

  return mv_rest_put ((MvRestHypervisor *) base, "vm.add-device", body, error);
}

static gboolean
chv_stats (MvHypervisor *base, MvVmStats *stats, GError **error)
{
  g_autoptr (JsonObject) counters = mv_rest_get ((MvRestHypervisor *) base, "vm.counters", error);
  JsonObjectIter iter;
  const char *device;
  JsonNode *node;

  if (!counters)
    return FALSE;
  memset (stats, 0, sizeof *stats);
  json_object_iter_init (&iter, counters);
  while (json_object_iter_next (&iter, &device, &node))
    {
      JsonObject *c = JSON_NODE_HOLDS_OBJECT (node) ? json_node_get_object (node) : NULL;

      stats->disk_read_bytes += mv_json_get_uint (c, "read_bytes");
      stats->disk_write_bytes += mv_json_get_uint (c, "write_bytes");
      stats->disk_read_ops += mv_json_get_uint (c, "read_ops");
      stats->disk_write_ops += mv_json_get_uint (c, "write_ops");
      stats->net_rx_bytes += mv_json_get_uint (c, "rx_bytes");
      stats->net_tx_bytes += mv_json_get_uint (c, "tx_bytes");
      stats->net_rx_packets += mv_json_get_uint (c, "rx_frames");
      stats->net_tx_packets += mv_json_get_uint (c, "tx_frames");
    }
  return TRUE;
}

static char *
chv_vmm_version (MvHypervisor *base, GError **error)
{
  g_autoptr (JsonObject) ping = mv_rest_get ((MvRestHypervisor *) base, "vmm.ping", error);
  const char *version;

  if (!ping)
    return NULL;
  version = json_object_get_string_member_with_default (ping, "version", NULL);
  if (!version)
    version = json_object_get_string_member_with_default (ping, "build_version", "");
  return g_strdup (mv_version_without_v (version));
}

static MvRestHypervisor *
hypervisor_new (const char *socket_path)
{
  MvRestHypervisor *hv = mv_rest_hypervisor_new (socket_path, SERVER_NAME, "/api/v1/",
                                                 refine_error);

  hv->base.destroy_vm = chv_destroy_vm;
  hv->base.shutdown_vm = chv_shutdown_vm;
  hv->base.shutdown = chv_shutdown;
  hv->base.vm_info = chv_vm_info;
  hv->base.pause_vm = chv_pause_vm;
  hv->base.resume_vm = chv_resume_vm;
  hv->base.snapshot_vm = chv_snapshot_vm;
  hv->base.resize_vm_memory = chv_resize_vm_memory;
  hv->base.resize_vm_cpu = chv_resize_vm_cpu;
  hv->base.add_device = chv_add_device;
  hv->base.stats = chv_stats;
  hv->base.vmm_version = chv_vmm_version;
  return hv;
}

/* ---- the VmConfig ---- */

static JsonObject *
vm_config (MvStarter *starter, const MvVmSpec *spec)
{
  g_autoptr (JsonObject) config = json_object_new ();
  JsonObject *payload = json_object_new ();
  JsonObject *cpus = json_object_new ();
  JsonObject *memory = json_object_new ();
  JsonObject *serial = json_object_new ();
  JsonObject *console = json_object_new ();
  JsonArray *disks = json_array_new ();
  JsonArray *nets = json_array_new ();

  json_object_set_string_member (payload, "kernel", spec->boot.kernel_path);
  json_object_set_string_member (payload, "cmdline",
                                 spec->boot.kernel_args ? spec->boot.kernel_args
                                                        : starter->default_kernel_args (starter));
  if (spec->boot.initrd_path && *spec->boot.initrd_path)
    json_object_set_string_member (payload, "initramfs", spec->boot.initrd_path);
  json_object_set_object_member (config, "payload", payload);

  json_object_set_int_member (cpus, "boot_vcpus", spec->cpu.count);
  json_object_set_int_member (cpus, "max_vcpus", MAX (spec->cpu.max_count, spec->cpu.count));
  /* The VMM pins each vCPU thread as it starts it, hot-added ones too. */
  if (spec->cpu.affinity->len > 0)
    json_object_set_array_member (cpus, "affinity", mv_cpu_affinity_to_json (spec->cpu.affinity));
  if (spec->cpu.topology.threads_per_core)
    json_object_set_object_member (cpus, "topology", mv_cpu_topology_to_json (&spec->cpu.topology));
  json_object_set_object_member (config, "cpus", cpus);
  /* Host devices by their sysfs directories, PCI and mediated alike. */
  if (spec->devices->len > 0)
    {
      JsonArray *devices = json_array_new ();

      for (guint i = 0; i < spec->devices->len; i++)
        json_array_add_object_element (devices, device_config (spec->devices->pdata[i]));
      json_object_set_array_member (config, "devices", devices);
    }

  json_object_set_int_member (memory, "size", (gint64) spec->memory.size_bytes);
  if (spec->memory.hotplug_bytes > 0)
    {
      /* virtio-mem grows and shrinks in 2 MiB blocks; ACPI only grows. */
      json_object_set_string_member (memory, "hotplug_method", "VirtioMem");
      json_object_set_int_member (memory, "hotplug_size", (gint64) spec->memory.hotplug_bytes);
    }
  /* virtiofsd reads and writes the guest's buffers in its memory. */
  if (spec->shares->len > 0)
    json_object_set_boolean_member (memory, "shared", TRUE);
  json_object_set_object_member (config, "memory", memory);

  for (guint i = 0; i < spec->disks->len; i++)
    {
      MvDiskConfig *d = spec->disks->pdata[i];
      JsonObject *disk = json_object_new ();
      JsonObject *limiter = mv_rest_rate_limiter (d);
      g_autofree char *id = g_strdup_printf ("disk%u", i);

      json_object_set_string_member (disk, "path", d->path);
      json_object_set_boolean_member (disk, "readonly", d->read_only);
      json_object_set_string_member (disk, "id", id);
      if (limiter)
        json_object_set_object_member (disk, "rate_limiter_config", limiter);
      json_array_add_object_element (disks, disk);
    }
  json_object_set_array_member (config, "disks", disks);

  for (guint i = 0; i < spec->nets->len; i++)
    {
      MvNetConfig *n = spec->nets->pdata[i];
      JsonObject *net = json_object_new ();
      /* One limiter setting for both ways: chv_check() refused them differing. */
      JsonObject *limiter = mv_rest_net_rate_limiter (n->rx_bytes_per_second);
      g_autofree char *id = g_strdup_printf ("net%u", i);

      json_object_set_string_member (net, "tap", n->tap_device);
      if (n->mac)
        json_object_set_string_member (net, "mac", n->mac);
      if (n->mtu)
        json_object_set_int_member (net, "mtu", n->mtu);
      if (limiter)
        json_object_set_object_member (net, "rate_limiter_config", limiter);
      json_object_set_string_member (net, "id", id);
      json_array_add_object_element (nets, net);
    }
  json_object_set_array_member (config, "net", nets);

  if (spec->shares->len > 0)
    {
      JsonArray *fs = json_array_new ();

      for (guint i = 0; i < spec->shares->len; i++)
        {
          MvShareConfig *share = spec->shares->pdata[i];
          JsonObject *device = json_object_new ();
          g_autofree char *id = g_strdup_printf ("fs%u", i);

          json_object_set_string_member (device, "tag", share->tag);
          json_object_set_string_member (device, "socket", share->socket_path);
          json_object_set_int_member (device, "num_queues", 1);
          json_object_set_int_member (device, "queue_size", FS_QUEUE_SIZE);
          json_object_set_string_member (device, "id", id);
          json_array_add_object_element (fs, device);
        }
      json_object_set_array_member (config, "fs", fs);
    }

  /* The serial console is the VMM's stdin and stdout, which its parent
   * holds (console.h). */
  json_object_set_string_member (serial, "mode", spec->console.path ? "Tty" : "Null");
  json_object_set_object_member (config, "serial", serial);
  /* The virtio console defaults to the VMM's terminal, which a daemon's
   * VMM has none of. */
  json_object_set_string_member (console, "mode", "Off");
  json_object_set_object_member (config, "console", console);

  if (spec->agent.kind == MV_AGENT_CHANNEL_VSOCK)
    {
      JsonObject *vsock = json_object_new ();
      json_object_set_int_member (vsock, "cid", spec->agent.cid);
      json_object_set_string_member (vsock, "socket", spec->agent.socket_path);
      json_object_set_string_member (vsock, "id", "vsock0");
      json_object_set_object_member (config, "vsock", vsock);
    }

  return g_steal_pointer (&config);
}

/* ---- the starter ---- */

static gboolean
chv_power_off_ends_vm (MvStarter *base)
{
  return TRUE;
}

static gboolean
check_socket (const char *socket_path, GError **error)
{
  if (!mv_check_socket_path ("socket", socket_path, error))
    return FALSE;
  /* --api-socket takes "path=P" options: a comma would split it. */
  if (strchr (socket_path, ','))
    {
      g_set_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT,
                   "socket: %s holds a comma, which --api-socket cannot take", socket_path);
      return FALSE;
    }
  return TRUE;
}

static gboolean
chv_check (MvStarter *base, const char *socket_path, const MvVmSpec *spec, GError **error)
{
  g_autofree char *dir = g_path_get_dirname (socket_path);

  if (!check_socket (socket_path, error))
    return FALSE;
  if (spec->agent.kind == MV_AGENT_CHANNEL_SERIAL)
    {
      g_set_error (error, MV_ERROR, MV_ERROR_UNSUPPORTED,
                   "agent: Cloud Hypervisor has no virtio-serial ports; use vsock");
      return FALSE;
    }
  for (guint i = 0; i < spec->nets->len; i++)
    {
      const MvNetConfig *net = spec->nets->pdata[i];

      /* A net device takes one rate limiter setting, for each way alike. */
      if (net->rx_bytes_per_second != net->tx_bytes_per_second)
        {
          g_set_error (error, MV_ERROR, MV_ERROR_UNSUPPORTED,
                       "download_bytes_per_second: Cloud Hypervisor limits both directions "
                       "alike; give upload_bytes_per_second the same value");
          return FALSE;
        }
    }
  return mv_vm_spec_check (spec, dir, error);
}

static MvProcess *
launch (MvRestStarter *starter, const char *socket_path, MvJail *jail, const char *console_log,
        const MvCgroupJoin *cgroup, guint64 memlock, GError **error)
{
  MvProcessOptions options = { .jail = jail, .console_log = console_log, .cgroup = cgroup,
                               .memlock_bytes = memlock };
  g_autofree char *option = g_strconcat ("path=", socket_path, NULL);
  const char *argv[] = { starter->binary, "--api-socket", option, "-v", NULL };

  if (!check_socket (socket_path, error))
    return NULL;
  /* A stale socket is replaced, but one still served belongs to a VMM
   * that would answer for the new one while it fails on the lock. */
  if (g_file_test (socket_path, G_FILE_TEST_EXISTS))
    {
      g_autoptr (MvHttp) probe = mv_http_new (socket_path, SERVER_NAME);
      g_auto (MvHttpResponse) response = { 0 };

      mv_http_set_timeout (probe, 1000);
      if (mv_http_request (probe, "GET", "/api/v1/vmm.ping", NULL, 0, &response, NULL))
        {
          g_set_error (error, MV_ERROR, MV_ERROR_INVALID_STATE,
                       "socket: a VMM already serves on %s", socket_path);
          return NULL;
        }
    }
  return mv_process_start_with (socket_path, argv, &options, START_TIMEOUT_MS, error);
}

static MvHypervisor *
chv_start_vm (MvStarter *base, const char *socket_path, const MvVmSpec *spec, MvProcess **vmm,
              GError **error)
{
  MvRestStarter *starter = (MvRestStarter *) base;
  g_autoptr (MvProcess) process = NULL;
  g_autoptr (JsonObject) config = NULL;
  MvRestHypervisor *hv;

  if (!chv_check (base, socket_path, spec, error) ||
      (spec->jail && !mv_rest_furnish_jail (starter, spec, error)))
    return NULL;
  process = launch (starter, socket_path, spec->jail, spec->console.path, spec->cgroup,
                    mv_vm_spec_memlock_bytes (spec), error);
  if (!process)
    return NULL;
  hv = hypervisor_new (socket_path);
  config = vm_config (base, spec);
  if (!mv_rest_call (hv, "GET", "vmm.ping", NULL, NULL, error) ||
      !mv_rest_put (hv, "vm.create", config, error) ||
      !mv_rest_put (hv, "vm.boot", NULL, error))
    return mv_rest_abandon (base, &hv->base, process, "Could not boot the guest: ", error);
  *vmm = g_steal_pointer (&process);
  return &hv->base;
}

/* The snapshot's config.json with what @spec gives afresh: the console
 * file, the TAP and MAC of its first interface, the disks' paths, the
 * vsock socket. Cloud Hypervisor takes no overrides on restore, so the
 * config is what changes. */
static gboolean
write_restore_dir (const char *snapshot_dir, const char *restore_dir, const MvRestoreSpec *spec,
                   GError **error)
{
  g_autofree char *config_path = g_build_filename (snapshot_dir, "config.json", NULL);
  g_autofree char *out_path = g_build_filename (restore_dir, "config.json", NULL);
  g_autoptr (JsonNode) root = NULL;
  g_autoptr (JsonGenerator) generator = NULL;
  g_autoptr (GDir) dir = NULL;
  g_autofree char *snapshot_abs = NULL;
  g_autofree char *text = NULL;
  JsonObject *config;
  JsonArray *nets, *disks;
  const char *name;

  root = mv_snapshot_json_load (config_path, error);
  if (root == NULL)
    {
      g_prefix_error (error, "The snapshot's config cannot be read: ");
      return FALSE;
    }
  if (!JSON_NODE_HOLDS_OBJECT (root))
    {
      g_set_error (error, MV_ERROR, MV_ERROR_FAILED, "%s is not a VM config", config_path);
      return FALSE;
    }
  config = json_node_get_object (root);
  if (spec->console.path)
    {
      JsonObject *serial = json_object_new ();
      json_object_set_string_member (serial, "mode", "Tty");
      json_object_set_object_member (config, "serial", serial);
    }
  nets = mv_json_get_array (config, "net");
  if (spec->tap_device)
    {
      if (!nets || json_array_get_length (nets) == 0)
        {
          g_set_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT,
                       "network: the snapshot has no network interface to give %s",
                       spec->tap_device);
          return FALSE;
        }
      json_object_set_string_member (json_array_get_object_element (nets, 0), "tap",
                                     spec->tap_device);
    }
  if (spec->mac && nets && json_array_get_length (nets) > 0)
    json_object_set_string_member (json_array_get_object_element (nets, 0), "mac", spec->mac);
  disks = mv_json_get_array (config, "disks");
  if (!mv_restore_spec_check_disks (spec, disks ? json_array_get_length (disks) : 0, error))
    return FALSE;
  for (guint i = 0; spec->disks && i < spec->disks->len; i++)
    {
      JsonObject *disk = json_array_get_object_element (disks, i);
      const MvDiskConfig *given = spec->disks->pdata[i];

      if (!disk)
        return mv_error_set (error, MV_ERROR_FAILED, "%s: disks[%u] is not a disk", config_path, i);
      json_object_set_string_member (disk, "path", given->path);
    }
  /* The vCPUs are pinned as the machine says now, not as they were. */
  if (mv_json_get_object (config, "cpus"))
    {
      JsonObject *cpus = mv_json_get_object (config, "cpus");

      if (spec->cpu_affinity && spec->cpu_affinity->len > 0)
        json_object_set_array_member (cpus, "affinity",
                                      mv_cpu_affinity_to_json (spec->cpu_affinity));
      else if (json_object_has_member (cpus, "affinity"))
        json_object_remove_member (cpus, "affinity");
    }
  if (spec->agent_socket && mv_json_get_object (config, "vsock"))
    json_object_set_string_member (mv_json_get_object (config, "vsock"), "socket",
                                   spec->agent_socket);

  if (g_mkdir_with_parents (restore_dir, 0700) < 0)
    {
      int saved = errno;
      g_set_error (error, MV_ERROR, MV_ERROR_FAILED, "Could not create %s: %s", restore_dir,
                   g_strerror (saved));
      return FALSE;
    }
  generator = json_generator_new ();
  json_generator_set_root (generator, root);
  text = json_generator_to_data (generator, NULL);
  /* 0600 whatever the daemon's umask: it is in the runtime directory. */
  if (!g_file_set_contents_full (out_path, text, -1, G_FILE_SET_CONTENTS_CONSISTENT, 0600, error))
    return FALSE;

  /* Everything else is read where it is: the memory may be large. */
  snapshot_abs = mv_rest_absolute_path (snapshot_dir);
  dir = g_dir_open (snapshot_dir, 0, error);
  if (!dir)
    return FALSE;
  while ((name = g_dir_read_name (dir)))
    {
      g_autofree char *target = NULL;
      g_autofree char *link = NULL;

      if (strcmp (name, "config.json") == 0)
        continue;
      target = g_build_filename (snapshot_abs, name, NULL);
      link = g_build_filename (restore_dir, name, NULL);
      g_unlink (link);
      if (symlink (target, link) < 0)
        {
          int saved = errno;
          g_set_error (error, MV_ERROR, MV_ERROR_FAILED, "Could not link %s: %s", link,
                       g_strerror (saved));
          return FALSE;
        }
    }
  return TRUE;
}

static MvHypervisor *
chv_restore_vm (MvStarter *base, const char *socket_path, const char *snapshot_dir,
                const MvRestoreSpec *spec, MvProcess **vmm, GError **error)
{
  MvRestStarter *starter = (MvRestStarter *) base;
  g_autofree char *dir = g_path_get_dirname (socket_path);
  g_autofree char *relative_dir = g_build_filename (dir, MV_CLOUD_HYPERVISOR_RESTORE_DIR, NULL);
  g_autofree char *restore_dir = mv_rest_absolute_path (relative_dir);
  g_autofree char *url = NULL;
  g_autoptr (JsonObject) body = json_object_new ();
  g_autoptr (MvProcess) process = NULL;
  MvRestHypervisor *hv;

  if (!check_socket (socket_path, error))
    return NULL;
  if (!write_restore_dir (snapshot_dir, restore_dir, spec, error) ||
      (spec->jail && !mv_rest_furnish_restore_jail (starter, spec->jail, snapshot_dir,
                                                    spec->tap_device, spec->disks, NULL,
                                                    error)))
    return NULL;
  /* A guest with host devices is never frozen: nothing to lock. */
  process = launch (starter, socket_path, spec->jail, spec->console.path, spec->cgroup, 0, error);
  if (!process)
    return NULL;
  hv = hypervisor_new (socket_path);
  url = g_strconcat ("file://", restore_dir, NULL);
  json_object_set_string_member (body, "source_url", url);
  if (!mv_rest_put (hv, "vm.restore", body, error))
    return mv_rest_abandon (base, &hv->base, process, "Could not restore the guest: ", error);
  *vmm = g_steal_pointer (&process);
  return &hv->base;
}

static MvHypervisor *
chv_connect (MvStarter *base, const char *socket_path, GError **error)
{
  return mv_rest_connect (hypervisor_new (socket_path), "vmm.ping", error);
}

static MvCapabilities
chv_capabilities (MvStarter *base)
{
  return (MvCapabilities) {
    .snapshot = TRUE,
    .hotplug_memory = TRUE,
    .hotplug_cpu = TRUE,
    .cpu_affinity = TRUE,
    .cpu_topology = MV_CPU_TOPOLOGIES_ANY,
    .pause = TRUE,
    .vsock = TRUE,
    .gpu_passthrough = TRUE,
    .hotplug_devices = TRUE,
    .disk_rate_limit = TRUE,
    .net_rate_limit = TRUE,
    .net_rate_limit_symmetric = TRUE,
    .virtio_fs = TRUE,
  };
}

static void
chv_cleanup (MvStarter *base, const char *socket_path)
{
  g_autofree char *lock = g_strconcat (socket_path, ".lock", NULL);
  g_autofree char *dir = g_path_get_dirname (socket_path);
  g_autofree char *restore_dir = g_build_filename (dir, MV_CLOUD_HYPERVISOR_RESTORE_DIR, NULL);

  g_unlink (socket_path);
  g_unlink (lock);
  mv_remove_tree (restore_dir, NULL);
}

MvStarter *
mv_cloud_hypervisor_starter_new (const char *binary, GError **error)
{
  MvRestStarter *starter = mv_rest_starter_new (MV_CLOUD_HYPERVISOR_TYPE, binary,
                                                "cloud-hypervisor", error);

  if (!starter)
    return NULL;
  starter->base.power_off_ends_vm = chv_power_off_ends_vm;
  starter->base.check = chv_check;
  starter->base.start_vm = chv_start_vm;
  starter->base.restore_vm = chv_restore_vm;
  starter->base.connect = chv_connect;
  starter->base.capabilities = chv_capabilities;
  starter->base.cleanup = chv_cleanup;
  return &starter->base;
}
