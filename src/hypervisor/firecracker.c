/* Firecracker over its REST API. */
#include "firecracker.h"
#include "metadata.h"
#include "rest.h"
#include "versions.h"
#include "core/errors.h"
#include "core/json-util.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#define SERVER_NAME        "Firecracker"
#define START_TIMEOUT_MS   10000
#define RESIZE_TIMEOUT_MS  10000
#define RESIZE_POLL_MS     50
#define MIB                (G_GUINT64_CONSTANT (1) << 20)
/* virtio-mem's hotplug region is made of slots of this size. */
#define HOTPLUG_SLOT_MIB   128
#define HOTPLUG_BLOCK_MIB  2
/* Firecracker's --id: alphanumerics and hyphens, at most 64. */
#define INSTANCE_ID_MAX    64
/* The first version whose network interfaces take an MTU; older ones
 * refuse the member and give the guest 1500. */
#define MTU_SINCE_MAJOR    1
#define MTU_SINCE_MINOR    16
#define MTU_OLD_DEFAULT    1500

/* ---- API calls ---- */

/* Every refusal is a 400; the message tells a wrong-state call. */
static void
refine_error (guint status, GError *error)
{
  if (error && status == 400 &&
      (strstr (error->message, "not supported after starting") ||
       strstr (error->message, "not supported before starting") ||
       strstr (error->message, "must be paused") ||
       strstr (error->message, "not allowed after")))
    error->code = MV_ERROR_INVALID_STATE;
}

static gboolean
action (MvRestHypervisor *hv, const char *type, GError **error)
{
  g_autoptr (JsonObject) body = json_object_new ();

  json_object_set_string_member (body, "action_type", type);
  return mv_rest_put (hv, "/actions", body, error);
}

/* ---- the running guest ---- */

/* Firecracker has no API to stop: its process is ended. */
static gboolean
kill_vmm (MvRestHypervisor *hv, GError **error)
{
  g_autoptr (GPtrArray) found = mv_process_find_by_socket (hv->socket_path);

  for (guint i = 0; i < found->len; i++)
    if (!mv_process_kill (found->pdata[i], error))
      return FALSE;
  return TRUE;
}

static gboolean
fc_destroy_vm (MvHypervisor *base, GError **error)
{
  return kill_vmm ((MvRestHypervisor *) base, error);
}

static gboolean
fc_shutdown_vm (MvHypervisor *base, GError **error)
{
  return action ((MvRestHypervisor *) base, "SendCtrlAltDel", error);
}

static gboolean
fc_shutdown (MvHypervisor *base, GError **error)
{
  return kill_vmm ((MvRestHypervisor *) base, error);
}

static gboolean
fc_vm_info (MvHypervisor *base, MvVmInfo *info, GError **error)
{
  MvRestHypervisor *hv = (MvRestHypervisor *) base;
  g_autoptr (JsonObject) instance = mv_rest_get (hv, "/", error);
  g_autoptr (JsonObject) config = NULL;
  const char *state;
  JsonObject *hotplug;

  if (!instance)
    return FALSE;
  config = mv_rest_get (hv, "/vm/config", error);
  if (!config)
    return FALSE;
  memset (info, 0, sizeof *info);
  state = json_object_get_string_member_with_default (instance, "state", "");
  info->state = mv_rest_vm_state (state);
  info->has_memory_bytes = TRUE;
  info->memory_bytes = mv_json_get_uint (mv_json_get_object (config, "machine-config"),
                                         "mem_size_mib") * MIB;
  hotplug = mv_json_get_object (config, "memory-hotplug");
  if (hotplug && info->state != MV_VM_STATE_STOPPED)
    {
      g_autoptr (JsonObject) now = mv_rest_get (hv, "/hotplug/memory", error);
      if (!now)
        return FALSE;
      info->memory_bytes += mv_json_get_uint (now, "plugged_size_mib") * MIB;
    }
  return TRUE;
}

static gboolean
set_vm_state (MvRestHypervisor *hv, const char *state, GError **error)
{
  g_autoptr (JsonObject) body = json_object_new ();

  json_object_set_string_member (body, "state", state);
  return mv_rest_call (hv, "PATCH", "/vm", body, NULL, error);
}

static gboolean
fc_pause_vm (MvHypervisor *base, GError **error)
{
  return set_vm_state ((MvRestHypervisor *) base, "Paused", error);
}

static gboolean
fc_resume_vm (MvHypervisor *base, GError **error)
{
  return set_vm_state ((MvRestHypervisor *) base, "Resumed", error);
}

/* What a restore must know of the snapshot's devices to override them:
 * naming one the snapshot lacks makes the load fail, and Firecracker
 * exit. */
static gboolean
write_devices (MvRestHypervisor *hv, const char *dir, GError **error)
{
  g_autoptr (JsonObject) config = mv_rest_get (hv, "/vm/config", error);
  g_autoptr (JsonObject) devices = json_object_new ();
  g_autoptr (JsonNode) node = json_node_new (JSON_NODE_OBJECT);
  g_autofree char *path = g_build_filename (dir, MV_FIRECRACKER_SNAPSHOT_DEVICES, NULL);
  g_autofree char *text = NULL;
  JsonArray *nets, *ids = json_array_new ();
  JsonObject *vsock;

  if (!config)
    {
      json_array_unref (ids);
      return FALSE;
    }
  nets = mv_json_get_array (config, "network-interfaces");
  for (guint i = 0; nets && i < json_array_get_length (nets); i++)
    {
      JsonObject *net = json_array_get_object_element (nets, i);
      const char *id = net ? json_object_get_string_member_with_default (net, "iface_id", NULL)
                           : NULL;
      if (id)
        json_array_add_string_element (ids, id);
    }
  json_object_set_array_member (devices, "network_interfaces", ids);
  vsock = mv_json_get_object (config, "vsock");
  json_object_set_boolean_member (devices, "vsock", vsock != NULL);
  json_node_set_object (node, devices);
  text = json_to_string (node, FALSE);
  return g_file_set_contents_full (path, text, -1, G_FILE_SET_CONTENTS_CONSISTENT, 0600, error);
}

static gboolean
fc_snapshot_vm (MvHypervisor *base, const char *dest_dir, GError **error)
{
  MvRestHypervisor *hv = (MvRestHypervisor *) base;
  g_autofree char *dir = mv_rest_absolute_path (dest_dir);
  g_autofree char *state = g_build_filename (dir, MV_FIRECRACKER_SNAPSHOT_STATE, NULL);
  g_autofree char *memory = g_build_filename (dir, MV_FIRECRACKER_SNAPSHOT_MEMORY, NULL);
  g_autoptr (JsonObject) body = json_object_new ();

  json_object_set_string_member (body, "snapshot_type", "Full");
  json_object_set_string_member (body, "snapshot_path", state);
  json_object_set_string_member (body, "mem_file_path", memory);
  return mv_rest_put (hv, "/snapshot/create", body, error) &&
         write_devices (hv, dir, error);
}

static gboolean
fc_resize_vm_memory (MvHypervisor *base, guint64 bytes, GError **error)
{
  MvRestHypervisor *hv = (MvRestHypervisor *) base;
  g_autoptr (JsonObject) config = mv_rest_get (hv, "/vm/config", error);
  g_autoptr (JsonObject) body = json_object_new ();
  JsonObject *hotplug;
  guint64 boot_bytes, requested_mib;
  gint64 deadline;

  if (!config)
    return FALSE;
  boot_bytes = mv_json_get_uint (mv_json_get_object (config, "machine-config"),
                                 "mem_size_mib") * MIB;
  hotplug = mv_json_get_object (config, "memory-hotplug");
  if (!mv_check_memory_resize (bytes, boot_bytes,
                               mv_json_get_uint (hotplug, "total_size_mib") * MIB, error))
    return FALSE;
  requested_mib = (bytes - boot_bytes) / MIB;
  json_object_set_int_member (body, "requested_size_mib", (gint64) requested_mib);
  if (!mv_rest_call (hv, "PATCH", "/hotplug/memory", body, NULL, error))
    return FALSE;

  deadline = g_get_monotonic_time () + RESIZE_TIMEOUT_MS * 1000;
  for (;;)
    {
      g_autoptr (JsonObject) now = mv_rest_get (hv, "/hotplug/memory", error);
      guint64 plugged;

      if (!now)
        return FALSE;
      plugged = mv_json_get_uint (now, "plugged_size_mib");
      if (plugged == requested_mib)
        return TRUE;
      if (g_get_monotonic_time () > deadline)
        {
          g_set_error (error, MV_ERROR, MV_ERROR_FAILED, "memory_bytes: the guest has %"
                       G_GUINT64_FORMAT " MiB plugged %d ms after it was asked for %"
                       G_GUINT64_FORMAT, plugged, RESIZE_TIMEOUT_MS, requested_mib);
          return FALSE;
        }
      g_usleep (RESIZE_POLL_MS * 1000);
    }
}

static gboolean
fc_resize_vm_cpu (MvHypervisor *base, guint count, GError **error)
{
  g_set_error (error, MV_ERROR, MV_ERROR_UNSUPPORTED,
               "max_vcpus: Firecracker cannot add or remove vCPUs of a running guest");
  return FALSE;
}

/* The error for the VMM's refusal of a PUT /mmds; returns FALSE. */
static gboolean
mmds_refused (const MvHttpResponse *response, GError **error)
{
  g_autofree char *message = mv_http_error_text (response->body);

  g_set_error (error, MV_ERROR,
               response->status == 413 ? MV_ERROR_RESOURCE_EXHAUSTED : MV_ERROR_FAILED,
               "%s refused PUT /mmds (%u): %s", SERVER_NAME, response->status, message);
  return FALSE;
}

static gboolean
fc_set_metadata (MvHypervisor *base, JsonNode *document, GError **error)
{
  MvRestHypervisor *hv = (MvRestHypervisor *) base;
  g_autofree char *text = mv_metadata_document_serialize (document, error);
  g_auto (MvHttpResponse) response = { 0 };

  if (!text)
    return FALSE;
  /* PUT replaces the whole store; PATCH would merge into what is there. */
  if (!mv_http_request (hv->http, "PUT", "/mmds", text, strlen (text), &response, error))
    return FALSE;
  if (response.status != 204 && response.status != 200)
    return mmds_refused (&response, error);
  return TRUE;
}

static char *
fc_vmm_version (MvHypervisor *base, GError **error)
{
  g_autoptr (JsonObject) version = mv_rest_get ((MvRestHypervisor *) base, "/version", error);
  const char *text;

  if (!version)
    return NULL;
  text = json_object_get_string_member_with_default (version, "firecracker_version", "");
  return g_strdup (mv_version_without_v (text));
}

static MvRestHypervisor *
hypervisor_new (const char *socket_path)
{
  MvRestHypervisor *hv = mv_rest_hypervisor_new (socket_path, SERVER_NAME, "", refine_error);

  hv->base.destroy_vm = fc_destroy_vm;
  hv->base.shutdown_vm = fc_shutdown_vm;
  hv->base.shutdown = fc_shutdown;
  hv->base.vm_info = fc_vm_info;
  hv->base.pause_vm = fc_pause_vm;
  hv->base.resume_vm = fc_resume_vm;
  hv->base.snapshot_vm = fc_snapshot_vm;
  hv->base.resize_vm_memory = fc_resize_vm_memory;
  hv->base.resize_vm_cpu = fc_resize_vm_cpu;
  hv->base.set_metadata = fc_set_metadata;
  hv->base.vmm_version = fc_vmm_version;
  return hv;
}

/* ---- booting ---- */

static gboolean
takes_mtu (MvStarter *starter)
{
  return mv_version_at_least (starter->version (starter), MTU_SINCE_MAJOR, MTU_SINCE_MINOR);
}

static gboolean
configure (MvRestHypervisor *hv, MvStarter *starter, const MvVmSpec *spec, const char *mmds,
           GError **error)
{
  g_autoptr (JsonObject) machine = json_object_new ();
  g_autoptr (JsonObject) boot = json_object_new ();

  json_object_set_int_member (machine, "vcpu_count", spec->cpu.count);
  json_object_set_int_member (machine, "mem_size_mib", (gint64) (spec->memory.size_bytes / MIB));
  /* A topology is one package of cores, with two threads each or one
   * (its capabilities). */
  json_object_set_boolean_member (machine, "smt", spec->cpu.topology.threads_per_core == 2);
  if (!mv_rest_put (hv, "/machine-config", machine, error))
    return FALSE;

  json_object_set_string_member (boot, "kernel_image_path", spec->boot.kernel_path);
  json_object_set_string_member (boot, "boot_args",
                                 spec->boot.kernel_args ? spec->boot.kernel_args
                                                        : starter->default_kernel_args (starter));
  if (spec->boot.initrd_path && *spec->boot.initrd_path)
    json_object_set_string_member (boot, "initrd_path", spec->boot.initrd_path);
  if (!mv_rest_put (hv, "/boot-source", boot, error))
    return FALSE;

  for (guint i = 0; i < spec->disks->len; i++)
    {
      MvDiskConfig *d = spec->disks->pdata[i];
      g_autoptr (JsonObject) drive = json_object_new ();
      JsonObject *limiter = mv_rest_rate_limiter (d);
      g_autofree char *id = g_strdup_printf ("disk%u", i);
      g_autofree char *path = g_strconcat ("/drives/", id, NULL);

      json_object_set_string_member (drive, "drive_id", id);
      json_object_set_string_member (drive, "path_on_host", d->path);
      json_object_set_boolean_member (drive, "is_root_device", FALSE);
      json_object_set_boolean_member (drive, "is_read_only", d->read_only);
      if (limiter)
        json_object_set_object_member (drive, "rate_limiter", limiter);
      if (!mv_rest_put (hv, path, drive, error))
        return FALSE;
    }

  for (guint i = 0; i < spec->nets->len; i++)
    {
      MvNetConfig *n = spec->nets->pdata[i];
      g_autoptr (JsonObject) net = json_object_new ();
      JsonObject *rx = mv_rest_net_rate_limiter (n->rx_bytes_per_second);
      JsonObject *tx = mv_rest_net_rate_limiter (n->tx_bytes_per_second);
      g_autofree char *id = g_strdup_printf ("net%u", i);
      g_autofree char *path = g_strconcat ("/network-interfaces/", id, NULL);

      json_object_set_string_member (net, "iface_id", id);
      json_object_set_string_member (net, "host_dev_name", n->tap_device);
      if (n->mac)
        json_object_set_string_member (net, "guest_mac", n->mac);
      if (rx)
        json_object_set_object_member (net, "rx_rate_limiter", rx);
      if (tx)
        json_object_set_object_member (net, "tx_rate_limiter", tx);
      if (n->mtu && takes_mtu (starter))
        json_object_set_int_member (net, "mtu", n->mtu);
      if (!mv_rest_put (hv, path, net, error))
        return FALSE;
    }

  if (spec->agent.kind == MV_AGENT_CHANNEL_VSOCK)
    {
      g_autoptr (JsonObject) vsock = json_object_new ();
      json_object_set_int_member (vsock, "guest_cid", spec->agent.cid);
      json_object_set_string_member (vsock, "uds_path", spec->agent.socket_path);
      if (!mv_rest_put (hv, "/vsock", vsock, error))
        return FALSE;
    }

  /* Without serial_out_path the serial console is Firecracker's stdin
   * and stdout, which its parent holds (console.h). */

  if (spec->memory.hotplug_bytes > 0)
    {
      g_autoptr (JsonObject) hotplug = json_object_new ();
      guint64 mib = spec->memory.hotplug_bytes / MIB;

      /* The region is whole slots; resizes stay within what the spec set
       * aside (see mv_check_memory_resize()), the rest is never plugged. */
      mib = (mib + HOTPLUG_SLOT_MIB - 1) / HOTPLUG_SLOT_MIB * HOTPLUG_SLOT_MIB;
      json_object_set_int_member (hotplug, "total_size_mib", (gint64) mib);
      json_object_set_int_member (hotplug, "slot_size_mib", HOTPLUG_SLOT_MIB);
      json_object_set_int_member (hotplug, "block_size_mib", HOTPLUG_BLOCK_MIB);
      if (!mv_rest_put (hv, "/hotplug/memory", hotplug, error))
        return FALSE;
    }

  if (mmds)
    {
      g_auto (MvHttpResponse) response = { 0 };

      if (spec->nets->len > 0)
        {
          g_autoptr (JsonObject) config = json_object_new ();
          JsonArray *ifaces = json_array_new ();
          json_array_add_string_element (ifaces, "net0");
          json_object_set_string_member (config, "version", "V2");
          json_object_set_array_member (config, "network_interfaces", ifaces);
          if (!mv_rest_put (hv, "/mmds/config", config, error))
            return FALSE;
        }
      if (!mv_http_request (hv->http, "PUT", "/mmds", mmds, strlen (mmds), &response, error))
        return FALSE;
      if (response.status != 204)
        return mmds_refused (&response, error);
    }

  return action (hv, "InstanceStart", error);
}

/* ---- the starter ---- */

static gboolean
fc_power_off_ends_vm (MvStarter *base)
{
  return FALSE;
}

static gboolean
fc_check (MvStarter *base, const char *socket_path, const MvVmSpec *spec, GError **error)
{
  g_autofree char *dir = g_path_get_dirname (socket_path);

  if (!mv_check_socket_path ("socket", socket_path, error))
    return FALSE;
  if (spec->cpu.count > MV_FIRECRACKER_MAX_VCPUS)
    {
      g_set_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT,
                   "cpu_millicores: %u vCPUs is more than Firecracker's maximum of %d",
                   spec->cpu.count, MV_FIRECRACKER_MAX_VCPUS);
      return FALSE;
    }
  if (spec->agent.kind == MV_AGENT_CHANNEL_SERIAL)
    {
      g_set_error (error, MV_ERROR, MV_ERROR_UNSUPPORTED,
                   "agent: Firecracker has no virtio-serial ports; use vsock");
      return FALSE;
    }
  /* Its API has no way to pin vCPU threads (its jailer leaves that to
   * the cgroup's cpuset). */
  if (spec->cpu.affinity->len > 0)
    {
      g_set_error (error, MV_ERROR, MV_ERROR_UNSUPPORTED,
                   "cpu_affinity: Firecracker cannot pin vCPUs to host CPUs");
      return FALSE;
    }

  for (guint i = 0; i < spec->nets->len; i++)
    {
      const MvNetConfig *net = spec->nets->pdata[i];

      if (net->mtu && net->mtu != MTU_OLD_DEFAULT && !takes_mtu (base))
        {
          g_set_error (error, MV_ERROR, MV_ERROR_UNSUPPORTED,
                       "mtu: the network's MTU of %u needs Firecracker %d.%d or later; "
                       "version %s gives its guests %d", net->mtu, MTU_SINCE_MAJOR,
                       MTU_SINCE_MINOR, base->version (base), MTU_OLD_DEFAULT);
          return FALSE;
        }
    }
  if (spec->shares->len > 0)
    {
      g_set_error (error, MV_ERROR, MV_ERROR_UNSUPPORTED,
                   "mounts: directory mounts need virtio-fs, which Firecracker does not have");
      return FALSE;
    }
  if (spec->metadata)
    {
      g_autofree char *text = mv_metadata_document_serialize (spec->metadata, error);
      if (!text)
        return FALSE;
    }
  return mv_vm_spec_check (spec, dir, error);
}

static char *
instance_id (const char *socket_path)
{
  g_autofree char *dir = g_path_get_dirname (socket_path);
  g_autofree char *base = g_path_get_basename (dir);
  GString *id = g_string_new (NULL);

  for (const char *p = base; *p && id->len < INSTANCE_ID_MAX; p++)
    g_string_append_c (id, g_ascii_isalnum (*p) || *p == '-' ? *p : '-');
  if (id->len == 0)
    g_string_append (id, "microvmd");
  return g_string_free (id, FALSE);
}

static MvProcess *
launch (MvRestStarter *starter, const char *socket_path, MvJail *jail, const char *console_log,
        const MvCgroupJoin *cgroup, GError **error)
{
  MvProcessOptions options = { .jail = jail, .console_log = console_log, .cgroup = cgroup };
  g_autofree char *id = instance_id (socket_path);
  g_autofree char *limit = g_strdup_printf ("%d", MV_MMDS_SIZE_LIMIT_BYTES);
  /* The MMDS limit is set explicitly, and requests may be as large, since
   * PUT /mmds carries the whole document. */
  const char *argv[] = { starter->binary, "--api-sock", socket_path, "--id", id,
                         "--mmds-size-limit", limit, "--http-api-max-payload-size", limit,
                         "--level", "Warning", NULL };

  if (!mv_check_socket_path ("socket", socket_path, error))
    return NULL;
  /* Firecracker will not bind over an existing socket; and one that still
   * accepts would answer for the new VMM while it fails. */
  if (g_file_test (socket_path, G_FILE_TEST_EXISTS))
    {
      g_set_error (error, MV_ERROR, MV_ERROR_INVALID_STATE,
                   "socket: %s exists; Firecracker cannot start on it (another one may serve "
                   "there, or a stale socket was left)", socket_path);
      return NULL;
    }
  return mv_process_start_with (socket_path, argv, &options, START_TIMEOUT_MS, error);
}

static MvHypervisor *
fc_start_vm (MvStarter *base, const char *socket_path, const MvVmSpec *spec, MvProcess **vmm,
             GError **error)
{
  MvRestStarter *starter = (MvRestStarter *) base;
  g_autoptr (MvProcess) process = NULL;
  g_autofree char *mmds = NULL;
  MvRestHypervisor *hv;

  if (!fc_check (base, socket_path, spec, error))
    return NULL;
  /* The whole document is checked before the VMM is started. */
  if (spec->metadata && !(mmds = mv_metadata_document_serialize (spec->metadata, error)))
    return NULL;
  if (spec->jail && !mv_rest_furnish_jail (starter, spec, error))
    return NULL;
  process = launch (starter, socket_path, spec->jail, spec->console.path, spec->cgroup, error);
  if (!process)
    return NULL;
  hv = hypervisor_new (socket_path);
  if (!mv_rest_call (hv, "GET", "/", NULL, NULL, error) || !configure (hv, base, spec, mmds, error))
    return mv_rest_abandon (base, &hv->base, process, "Could not boot the guest: ", error);
  *vmm = g_steal_pointer (&process);
  return &hv->base;
}

static JsonObject *
read_devices (const char *snapshot_dir, GError **error)
{
  g_autofree char *path = g_build_filename (snapshot_dir, MV_FIRECRACKER_SNAPSHOT_DEVICES, NULL);
  g_autoptr (JsonNode) root = mv_snapshot_json_load (path, error);

  if (root == NULL)
    {
      g_prefix_error (error, "The snapshot is incomplete: ");
      return NULL;
    }
  if (!JSON_NODE_HOLDS_OBJECT (root))
    {
      g_set_error (error, MV_ERROR, MV_ERROR_FAILED, "%s is not a JSON object", path);
      return NULL;
    }
  return json_object_ref (json_node_get_object (root));
}

/* The disks a restored guest opens: Firecracker takes no override of
 * them and opens them where the snapshot's guest had them (@recorded's).
 * A walled-in VMM is shown @spec's disks there; without a wall, they
 * must be those files. */
static gboolean
check_restore_disks (const MvRestoreSpec *spec, const MvVmSpec *recorded, GError **error)
{
  if (!mv_restore_spec_check_disks (spec, recorded->disks->len, error))
    return FALSE;
  for (guint i = 0; !spec->jail && i < spec->disks->len; i++)
    {
      const MvDiskConfig *given = spec->disks->pdata[i];
      const MvDiskConfig *then = recorded->disks->pdata[i];
      g_autofree char *given_path = mv_rest_absolute_path (given->path);
      g_autofree char *then_path = mv_rest_absolute_path (then->path);

      if (strcmp (given_path, then_path) != 0)
        return mv_error_set (error, MV_ERROR_UNSUPPORTED,
                             "disks[%u].path: Firecracker restores a guest only onto the disk "
                             "files it had when its state was taken (%s, not %s); without the "
                             "sandbox's wall no other file can be shown there",
                             i, then_path, given_path);
    }
  return TRUE;
}

static MvHypervisor *
fc_restore_vm (MvStarter *base, const char *socket_path, const char *snapshot_dir,
               const MvRestoreSpec *spec, MvProcess **vmm, GError **error)
{
  MvRestStarter *starter = (MvRestStarter *) base;
  g_autofree char *dir = mv_rest_absolute_path (snapshot_dir);
  g_autofree char *state = g_build_filename (dir, MV_FIRECRACKER_SNAPSHOT_STATE, NULL);
  g_autofree char *memory = g_build_filename (dir, MV_FIRECRACKER_SNAPSHOT_MEMORY, NULL);
  g_autoptr (JsonObject) devices = read_devices (snapshot_dir, error);
  g_autoptr (JsonObject) load = json_object_new ();
  g_autoptr (MvProcess) process = NULL;
  g_autoptr (MvVmSpec) recorded = NULL;
  JsonObject *backend;
  JsonArray *ifaces;
  MvRestHypervisor *hv;

  if (!devices)
    return NULL;
  ifaces = mv_json_get_array (devices, "network_interfaces");
  if (spec->tap_device && (!ifaces || json_array_get_length (ifaces) == 0))
    {
      g_set_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT,
                   "network: the snapshot has no network interface to give %s", spec->tap_device);
      return NULL;
    }

  json_object_set_string_member (load, "snapshot_path", state);
  backend = json_object_new ();
  json_object_set_string_member (backend, "backend_type", "File");
  json_object_set_string_member (backend, "backend_path", memory);
  json_object_set_object_member (load, "mem_backend", backend);
  json_object_set_boolean_member (load, "resume_vm", FALSE);
  if (spec->tap_device)
    {
      JsonArray *overrides = json_array_new ();
      JsonObject *o = json_object_new ();
      json_object_set_string_member (o, "iface_id", json_array_get_string_element (ifaces, 0));
      json_object_set_string_member (o, "host_dev_name", spec->tap_device);
      json_array_add_object_element (overrides, o);
      json_object_set_array_member (load, "network_overrides", overrides);
    }
  if (spec->agent_socket && json_object_get_boolean_member_with_default (devices, "vsock", FALSE))
    {
      JsonObject *o = json_object_new ();
      json_object_set_string_member (o, "uds_path", spec->agent_socket);
      json_object_set_object_member (load, "vsock_override", o);
    }

  if (spec->disks &&
      (!(recorded = mv_snapshot_vm_spec_load (snapshot_dir, error)) ||
       !check_restore_disks (spec, recorded, error)))
    return NULL;

  if (spec->jail && !mv_rest_furnish_restore_jail (starter, spec->jail, snapshot_dir,
                                                  spec->tap_device, spec->disks,
                                                  recorded ? recorded->disks : NULL, error))
    return NULL;
  process = launch (starter, socket_path, spec->jail, spec->console.path, spec->cgroup, error);
  if (!process)
    return NULL;
  hv = hypervisor_new (socket_path);
  /* A failed load ends Firecracker; its answer still says why. */
  if (!mv_rest_put (hv, "/snapshot/load", load, error))
    return mv_rest_abandon (base, &hv->base, process, "Could not restore the guest: ", error);
  *vmm = g_steal_pointer (&process);
  return &hv->base;
}

static MvHypervisor *
fc_connect (MvStarter *base, const char *socket_path, GError **error)
{
  return mv_rest_connect (hypervisor_new (socket_path), "/", error);
}

static MvCapabilities
fc_capabilities (MvStarter *base)
{
  return (MvCapabilities) {
    .snapshot = TRUE,
    .hotplug_memory = TRUE,      /* virtio-mem */
    .hotplug_cpu = FALSE,
    .cpu_affinity = FALSE,
    .cpu_topology = MV_CPU_TOPOLOGIES_SMT,
    .pause = TRUE,
    .vsock = TRUE,
    .gpu_passthrough = FALSE,
    .disk_rate_limit = TRUE,
    .net_rate_limit = TRUE,
    .virtio_fs = FALSE,
  };
}

static void
fc_cleanup (MvStarter *base, const char *socket_path)
{
  /* Firecracker leaves its socket behind, and will not start on it. */
  g_unlink (socket_path);
}

MvStarter *
mv_firecracker_starter_new (const char *binary, GError **error)
{
  MvRestStarter *starter = mv_rest_starter_new (MV_FIRECRACKER_TYPE, binary, "Firecracker",
                                                error);

  if (!starter)
    return NULL;
  starter->base.power_off_ends_vm = fc_power_off_ends_vm;
  starter->base.check = fc_check;
  starter->base.start_vm = fc_start_vm;
  starter->base.restore_vm = fc_restore_vm;
  starter->base.connect = fc_connect;
  starter->base.capabilities = fc_capabilities;
  starter->base.cleanup = fc_cleanup;
  return &starter->base;
}
