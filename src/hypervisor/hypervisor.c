/* The VM specification every backend takes, and the checks they share. */
#include "hypervisor.h"
#include "core/enum-names.h"
#include "core/json-strict.h"
#include "core/json-util.h"
#include "util/files.h"

#include <gio/gio.h>

#include <errno.h>
#include <glib/gstdio.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void
disk_free (MvDiskConfig *disk)
{
  g_free (disk->path);
  g_free (disk);
}

static void
net_free (MvNetConfig *net)
{
  g_free (net->tap_device);
  g_free (net->mac);
  g_free (net);
}

static void
device_free (MvVmDevice *device)
{
  g_free (device->id);
  g_free (device->path);
  g_free (device);
}

static void
share_free (MvShareConfig *share)
{
  g_free (share->tag);
  g_free (share->socket_path);
  g_free (share->source);
  g_free (share);
}

GStrv
mv_capabilities_names (const MvCapabilities *caps)
{
  g_autoptr (GStrvBuilder) names = g_strv_builder_new ();
  const struct {
    gboolean    has;
    const char *name;
  } flags[] = {
    { caps->snapshot, "snapshot" },
    { caps->pause, "pause" },
    { caps->hotplug_cpu, "hotplug-cpu" },
    { caps->hotplug_memory, "hotplug-memory" },
    { caps->cpu_affinity, "cpu-affinity" },
    /* Which of cpu_topology's parts may be above 1. */
    { TRUE, "cpu-threads" },
    { caps->cpu_topology != MV_CPU_TOPOLOGIES_SMT, "cpu-packages" },
    { caps->cpu_topology == MV_CPU_TOPOLOGIES_ANY, "cpu-dies" },
    { caps->vsock, "vsock" },
    { caps->gpu_passthrough, "device-passthrough" },
    { caps->gpu_passthrough && caps->hotplug_devices, "hotplug-devices" },
    { caps->disk_rate_limit, "disk-rate-limit" },
    { caps->net_rate_limit, "net-rate-limit" },
    { caps->virtio_fs, "directory-mounts" },
  };

  for (guint i = 0; i < G_N_ELEMENTS (flags); i++)
    if (flags[i].has)
      g_strv_builder_add (names, flags[i].name);
  return g_strv_builder_end (names);
}

MvVmSpec *
mv_vm_spec_new (void)
{
  MvVmSpec *spec = g_new0 (MvVmSpec, 1);

  spec->cpu.count = 1;
  spec->cpu.max_count = 1;
  spec->cpu.affinity = mv_cpu_affinity_list_copy (NULL);
  spec->disks = g_ptr_array_new_with_free_func ((GDestroyNotify) disk_free);
  spec->devices = g_ptr_array_new_with_free_func ((GDestroyNotify) device_free);
  spec->nets = g_ptr_array_new_with_free_func ((GDestroyNotify) net_free);
  spec->shares = g_ptr_array_new_with_free_func ((GDestroyNotify) share_free);
  return spec;
}

void
mv_vm_spec_free (MvVmSpec *spec)
{
  if (!spec)
    return;
  g_free (spec->boot.kernel_path);
  g_free (spec->boot.kernel_args);
  g_free (spec->boot.initrd_path);
  g_ptr_array_unref (spec->cpu.affinity);
  g_ptr_array_unref (spec->disks);
  g_ptr_array_unref (spec->devices);
  g_ptr_array_unref (spec->nets);
  g_ptr_array_unref (spec->shares);
  g_free (spec->console.path);
  g_free (spec->agent.socket_path);
  g_clear_pointer (&spec->metadata, json_node_unref);
  g_free (spec);
}

void
mv_vm_spec_add_disk (MvVmSpec *spec, const char *path, gboolean read_only)
{
  MvDiskConfig *disk = g_new0 (MvDiskConfig, 1);

  disk->path = g_strdup (path);
  disk->read_only = read_only;
  g_ptr_array_add (spec->disks, disk);
}

void
mv_vm_spec_add_device (MvVmSpec *spec, const char *id, const char *path, guint slot)
{
  MvVmDevice *device = g_new0 (MvVmDevice, 1);

  device->id = g_strdup (id);
  device->path = g_strdup (path);
  device->slot = slot;
  g_ptr_array_add (spec->devices, device);
}

void
mv_vm_spec_add_net (MvVmSpec *spec, const char *tap_device, const char *mac)
{
  MvNetConfig *net = g_new0 (MvNetConfig, 1);

  net->tap_device = g_strdup (tap_device);
  net->mac = g_strdup (mac);
  g_ptr_array_add (spec->nets, net);
}

void
mv_vm_spec_set_net_limits (MvVmSpec *spec, guint mtu, guint64 rx_bytes_per_second,
                           guint64 tx_bytes_per_second)
{
  MvNetConfig *net;

  g_return_if_fail (spec->nets->len > 0);
  net = spec->nets->pdata[spec->nets->len - 1];
  net->mtu = mtu;
  net->rx_bytes_per_second = rx_bytes_per_second;
  net->tx_bytes_per_second = tx_bytes_per_second;
}

void
mv_vm_spec_add_share (MvVmSpec *spec, const char *tag, const char *socket_path,
                      const char *source, gboolean read_only, guint mount_index)
{
  MvShareConfig *share = g_new0 (MvShareConfig, 1);

  share->tag = g_strdup (tag);
  share->socket_path = g_strdup (socket_path);
  share->source = g_strdup (source);
  share->read_only = read_only;
  share->mount_index = mount_index;
  g_ptr_array_add (spec->shares, share);
}

void
mv_vm_spec_set_disk_rate_limit (MvVmSpec *spec, guint64 bytes_per_second, guint64 iops)
{
  MvDiskConfig *disk;

  g_return_if_fail (spec->disks->len > 0);
  disk = spec->disks->pdata[spec->disks->len - 1];
  disk->rate_limit_bytes_per_second = bytes_per_second;
  disk->rate_limit_iops = iops;
}

void
mv_vm_spec_set_disk_own (MvVmSpec *spec)
{
  g_return_if_fail (spec->disks->len > 0);
  ((MvDiskConfig *) spec->disks->pdata[spec->disks->len - 1])->own = TRUE;
}

MvVmSpec *
mv_vm_spec_copy (const MvVmSpec *spec)
{
  MvVmSpec *copy = mv_vm_spec_new ();

  copy->boot.kernel_path = g_strdup (spec->boot.kernel_path);
  copy->boot.kernel_args = g_strdup (spec->boot.kernel_args);
  copy->boot.initrd_path = g_strdup (spec->boot.initrd_path);
  g_ptr_array_unref (copy->cpu.affinity);
  copy->cpu = spec->cpu;
  copy->cpu.affinity = mv_cpu_affinity_list_copy (spec->cpu.affinity);
  copy->memory = spec->memory;
  for (guint i = 0; i < spec->devices->len; i++)
    {
      const MvVmDevice *device = spec->devices->pdata[i];
      mv_vm_spec_add_device (copy, device->id, device->path, device->slot);
    }
  for (guint i = 0; i < spec->disks->len; i++)
    {
      MvDiskConfig *disk = spec->disks->pdata[i];
      mv_vm_spec_add_disk (copy, disk->path, disk->read_only);
      mv_vm_spec_set_disk_rate_limit (copy, disk->rate_limit_bytes_per_second,
                                      disk->rate_limit_iops);
      if (disk->own)
        mv_vm_spec_set_disk_own (copy);
    }
  for (guint i = 0; i < spec->nets->len; i++)
    {
      MvNetConfig *net = spec->nets->pdata[i];
      mv_vm_spec_add_net (copy, net->tap_device, net->mac);
      mv_vm_spec_set_net_limits (copy, net->mtu, net->rx_bytes_per_second,
                                 net->tx_bytes_per_second);
    }
  for (guint i = 0; i < spec->shares->len; i++)
    {
      MvShareConfig *share = spec->shares->pdata[i];
      mv_vm_spec_add_share (copy, share->tag, share->socket_path, share->source,
                            share->read_only, share->mount_index);
    }
  copy->console.path = g_strdup (spec->console.path);
  copy->agent.kind = spec->agent.kind;
  copy->agent.socket_path = g_strdup (spec->agent.socket_path);
  copy->agent.cid = spec->agent.cid;
  copy->metadata = spec->metadata ? json_node_copy (spec->metadata) : NULL;
  return copy;
}

void
mv_restore_spec_clear (MvRestoreSpec *spec)
{
  g_clear_pointer (&spec->console.path, g_free);
  g_clear_pointer (&spec->tap_device, g_free);
  g_clear_pointer (&spec->agent_socket, g_free);
  g_clear_pointer (&spec->mac, g_free);
  g_clear_pointer (&spec->disks, g_ptr_array_unref);
  g_clear_pointer (&spec->cpu_affinity, g_ptr_array_unref);
}

MvVmSpec *
mv_snapshot_vm_spec_load (const char *snapshot_dir, GError **error)
{
  g_autofree char *path = g_build_filename (snapshot_dir, MV_SNAPSHOT_VM_SPEC_NAME, NULL);
  g_autoptr (JsonNode) root = NULL;
  g_autoptr (GError) local = NULL;

  root = mv_snapshot_json_load (path, &local);
  if (root == NULL)
    {
      g_set_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT, "The snapshot in %s is unusable: %s",
                   snapshot_dir, local->message);
      return NULL;
    }
  return mv_vm_spec_from_node (root, error);
}

gboolean
mv_restore_spec_check_disks (const MvRestoreSpec *spec, guint snapshot_disks, GError **error)
{
  if (!spec->disks || spec->disks->len == snapshot_disks)
    return TRUE;
  return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT,
                       "disks: the snapshot's guest has %u disks; it cannot be given %u",
                       snapshot_disks, spec->disks->len);
}

/* ---- JSON ---- */

static const char *const agent_kinds[] = {
  [MV_AGENT_CHANNEL_NONE] = "none",
  [MV_AGENT_CHANNEL_SERIAL] = "serial",
  [MV_AGENT_CHANNEL_VSOCK] = "vsock",
};

JsonArray *
mv_cpu_affinity_to_json (const GPtrArray *affinity)
{
  JsonArray *array = json_array_new ();

  for (guint i = 0; affinity && i < affinity->len; i++)
    {
      const MvCpuAffinity *a = affinity->pdata[i];
      JsonObject *o = json_object_new ();
      JsonArray *cpus = json_array_new ();

      for (guint j = 0; j < a->host_cpus->len; j++)
        json_array_add_int_element (cpus, g_array_index (a->host_cpus, guint32, j));
      json_object_set_int_member (o, "vcpu", a->vcpu);
      json_object_set_array_member (o, "host_cpus", cpus);
      json_array_add_object_element (array, o);
    }
  return array;
}

guint64
mv_vm_spec_memlock_bytes (const MvVmSpec *spec)
{
  if (spec->devices->len == 0)
    return 0;
  return spec->memory.size_bytes + spec->memory.hotplug_bytes + (G_GUINT64_CONSTANT (1) << 30);
}

JsonObject *
mv_cpu_topology_to_json (const MvCpuTopology *topology)
{
  JsonObject *o = json_object_new ();

  json_object_set_int_member (o, "threads_per_core", topology->threads_per_core);
  json_object_set_int_member (o, "cores_per_die", topology->cores_per_die);
  json_object_set_int_member (o, "dies_per_package", topology->dies_per_package);
  json_object_set_int_member (o, "packages", topology->packages);
  return o;
}

/* What mv_cpu_affinity_to_json() wrote; entries that are not one are left out. */
static void
affinity_from_array (JsonArray *array, GPtrArray *into)
{
  for (guint i = 0; array && i < json_array_get_length (array); i++)
    {
      JsonObject *o = json_array_get_object_element (array, i);
      JsonArray *cpus = mv_json_get_array (o, "host_cpus");
      g_autoptr (MvCpuAffinity) a = NULL;

      if (!o || !cpus)
        continue;
      a = mv_cpu_affinity_new ((guint32) mv_json_get_uint (o, "vcpu"));
      for (guint j = 0; j < json_array_get_length (cpus); j++)
        {
          JsonNode *n = json_array_get_element (cpus, j);
          gint64 v = JSON_NODE_HOLDS_VALUE (n) ? json_node_get_int (n) : -1;
          guint32 cpu = (guint32) v;

          if (v >= 0 && v < MV_HOST_CPUS_MAX)
            g_array_append_val (a->host_cpus, cpu);
        }
      g_ptr_array_add (into, g_steal_pointer (&a));
    }
}

JsonNode *
mv_vm_spec_to_node (const MvVmSpec *spec)
{
  g_autoptr (JsonObject) root = json_object_new ();
  JsonObject *boot = json_object_new ();
  JsonObject *cpu = json_object_new ();
  JsonObject *memory = json_object_new ();
  JsonObject *console = json_object_new ();
  JsonObject *agent = json_object_new ();
  JsonArray *disks = json_array_new ();
  JsonArray *nets = json_array_new ();
  JsonNode *node = json_node_new (JSON_NODE_OBJECT);

  mv_json_set_optional_string (boot, "kernel", spec->boot.kernel_path);
  mv_json_set_optional_string (boot, "kernel_args", spec->boot.kernel_args);
  mv_json_set_optional_string (boot, "initrd", spec->boot.initrd_path);
  json_object_set_int_member (cpu, "count", spec->cpu.count);
  json_object_set_int_member (cpu, "max_count", spec->cpu.max_count);
  if (spec->cpu.affinity->len > 0)
    json_object_set_array_member (cpu, "affinity", mv_cpu_affinity_to_json (spec->cpu.affinity));
  if (spec->cpu.topology.threads_per_core)
    json_object_set_object_member (cpu, "topology", mv_cpu_topology_to_json (&spec->cpu.topology));
  json_object_set_int_member (memory, "size_bytes", (gint64) spec->memory.size_bytes);
  json_object_set_int_member (memory, "hotplug_bytes", (gint64) spec->memory.hotplug_bytes);
  for (guint i = 0; i < spec->disks->len; i++)
    {
      MvDiskConfig *d = spec->disks->pdata[i];
      JsonObject *o = json_object_new ();
      json_object_set_string_member (o, "path", d->path);
      json_object_set_boolean_member (o, "read_only", d->read_only);
      if (d->rate_limit_bytes_per_second)
        json_object_set_int_member (o, "rate_limit_bytes_per_second",
                                    (gint64) d->rate_limit_bytes_per_second);
      if (d->rate_limit_iops)
        json_object_set_int_member (o, "rate_limit_iops", (gint64) d->rate_limit_iops);
      if (d->own)
        json_object_set_boolean_member (o, "own", TRUE);
      json_array_add_object_element (disks, o);
    }
  for (guint i = 0; i < spec->nets->len; i++)
    {
      MvNetConfig *n = spec->nets->pdata[i];
      JsonObject *o = json_object_new ();
      json_object_set_string_member (o, "tap", n->tap_device);
      mv_json_set_optional_string (o, "mac", n->mac);
      if (n->mtu)
        json_object_set_int_member (o, "mtu", n->mtu);
      if (n->rx_bytes_per_second)
        json_object_set_int_member (o, "rx_bytes_per_second", (gint64) n->rx_bytes_per_second);
      if (n->tx_bytes_per_second)
        json_object_set_int_member (o, "tx_bytes_per_second", (gint64) n->tx_bytes_per_second);
      json_array_add_object_element (nets, o);
    }
  mv_json_set_optional_string (console, "path", spec->console.path);
  json_object_set_string_member (agent, "kind",
                                 mv_enum_to_name (agent_kinds, G_N_ELEMENTS (agent_kinds),
                                                  spec->agent.kind, "none"));
  mv_json_set_optional_string (agent, "socket", spec->agent.socket_path);
  json_object_set_int_member (agent, "cid", spec->agent.cid);

  json_object_set_object_member (root, "boot", boot);
  json_object_set_object_member (root, "cpu", cpu);
  json_object_set_object_member (root, "memory", memory);
  json_object_set_array_member (root, "disks", disks);
  json_object_set_array_member (root, "nets", nets);
  json_object_set_object_member (root, "console", console);
  json_object_set_object_member (root, "agent", agent);
  json_node_set_object (node, root);
  return node;
}

MvVmSpec *
mv_vm_spec_from_node (JsonNode *node, GError **error)
{
  g_autoptr (MvVmSpec) spec = mv_vm_spec_new ();
  JsonObject *root, *boot, *cpu, *memory, *agent;
  JsonArray *array;
  guint kind;

  if (!node || !JSON_NODE_HOLDS_OBJECT (node))
    {
      g_set_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT, "The VM specification is not an object");
      return NULL;
    }
  root = json_node_get_object (node);
  boot = mv_json_get_object (root, "boot");
  cpu = mv_json_get_object (root, "cpu");
  memory = mv_json_get_object (root, "memory");
  agent = mv_json_get_object (root, "agent");
  spec->boot.kernel_path = g_strdup (mv_json_get_string (boot, "kernel"));
  spec->boot.kernel_args = g_strdup (mv_json_get_string (boot, "kernel_args"));
  spec->boot.initrd_path = g_strdup (mv_json_get_string (boot, "initrd"));
  spec->cpu.count = (guint) mv_json_get_uint (cpu, "count");
  spec->cpu.max_count = (guint) mv_json_get_uint (cpu, "max_count");
  affinity_from_array (mv_json_get_array (cpu, "affinity"), spec->cpu.affinity);
  {
    JsonObject *topology = mv_json_get_object (cpu, "topology");

    spec->cpu.topology = (MvCpuTopology) {
      (guint32) mv_json_get_uint (topology, "threads_per_core"),
      (guint32) mv_json_get_uint (topology, "cores_per_die"),
      (guint32) mv_json_get_uint (topology, "dies_per_package"),
      (guint32) mv_json_get_uint (topology, "packages"),
    };
  }
  spec->memory.size_bytes = mv_json_get_uint (memory, "size_bytes");
  spec->memory.hotplug_bytes = mv_json_get_uint (memory, "hotplug_bytes");
  if ((array = mv_json_get_array (root, "disks")))
    for (guint i = 0; i < json_array_get_length (array); i++)
      {
        JsonObject *o = json_array_get_object_element (array, i);
        const char *path = mv_json_get_string (o, "path");
        if (path)
          {
            mv_vm_spec_add_disk (spec, path,
                                 json_object_get_boolean_member_with_default (o, "read_only", FALSE));
            mv_vm_spec_set_disk_rate_limit (spec, mv_json_get_uint (o, "rate_limit_bytes_per_second"),
                                            mv_json_get_uint (o, "rate_limit_iops"));
            if (json_object_get_boolean_member_with_default (o, "own", FALSE))
              mv_vm_spec_set_disk_own (spec);
          }
      }
  if ((array = mv_json_get_array (root, "nets")))
    for (guint i = 0; i < json_array_get_length (array); i++)
      {
        JsonObject *o = json_array_get_object_element (array, i);
        const char *tap = mv_json_get_string (o, "tap");
        const char *mac = mv_json_get_string (o, "mac");
        if (tap)
          mv_vm_spec_add_net (spec, tap, mac);
      }
  spec->console.path = g_strdup (mv_json_get_string (mv_json_get_object (root, "console"), "path"));
  if (mv_enum_from_name (agent_kinds, G_N_ELEMENTS (agent_kinds),
                         mv_json_get_string (agent, "kind"), &kind))
    spec->agent.kind = kind;
  spec->agent.socket_path = g_strdup (mv_json_get_string (agent, "socket"));
  spec->agent.cid = (guint32) mv_json_get_uint (agent, "cid");

  if (!spec->boot.kernel_path || spec->cpu.count == 0 || spec->memory.size_bytes == 0)
    {
      g_set_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT,
                   "The VM specification lacks a kernel, vCPUs or memory");
      return NULL;
    }
  return g_steal_pointer (&spec);
}

/* ---- checks ---- */

#define invalid(error, ...) mv_error_set ((error), MV_ERROR_INVALID_ARGUMENT, __VA_ARGS__)

static gboolean
check_file (const char *field, const char *path, const char *dir, gboolean writable,
            gboolean block_ok, GError **error)
{
  g_autofree char *resolved = g_path_is_absolute (path) ? g_strdup (path)
                                                        : g_build_filename (dir, path, NULL);
  GStatBuf st;

  if (g_stat (resolved, &st) < 0)
    {
      int saved = errno;
      if (saved == ENOENT || saved == ENOTDIR)
        return invalid (error, "%s: %s does not exist", field, path);
      return invalid (error, "%s: %s cannot be read: %s", field, path, g_strerror (saved));
    }
  if (!S_ISREG (st.st_mode) && !(block_ok && S_ISBLK (st.st_mode)))
    return invalid (error, "%s: %s is not a regular file", field, path);
  if (g_access (resolved, R_OK) < 0)
    return invalid (error, "%s: %s is not readable", field, path);
  if (writable && g_access (resolved, W_OK) < 0)
    return invalid (error, "%s: %s is not writable (set read_only for a read-only disk)",
                    field, path);
  return TRUE;
}

gboolean
mv_check_socket_path (const char *field, const char *path, GError **error)
{
  gsize length = strlen (path);

  if (length > MV_UNIX_PATH_MAX_BYTES)
    return invalid (error, "%s: the socket path %s is %zu bytes, over the limit of %d "
                    "(sun_path); use a shorter runtime directory", field, path, length,
                    MV_UNIX_PATH_MAX_BYTES);
  return TRUE;
}

JsonNode *
mv_snapshot_json_load (const char *path, GError **error)
{
  static const MvJsonLimits limits = {
    .max_bytes = MV_SNAPSHOT_JSON_MAX_BYTES,
    .max_depth = MV_SNAPSHOT_JSON_MAX_DEPTH,
  };
  g_autofree char *name = g_path_get_basename (path);
  g_autofree char *data = NULL;
  g_autoptr (GError) local = NULL;
  gsize length;

  if (!mv_file_read_bounded (path, limits.max_bytes, name, &data, &length, &local))
    {
      /* Too large is a property of the document, like too deep. */
      if (g_error_matches (local, G_IO_ERROR, G_IO_ERROR_MESSAGE_TOO_LARGE))
        g_set_error_literal (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT, local->message);
      else
        g_propagate_error (error, g_steal_pointer (&local));
      return NULL;
    }
  return mv_json_parse (data, (gssize) length, &limits, name, error);
}

static gboolean
check_interface_name (const char *field, const char *name, GError **error)
{
  gsize length = strlen (name);

  if (length == 0)
    return invalid (error, "%s: the name is empty", field);
  if (length > MV_IFNAME_MAX_BYTES)
    return invalid (error, "%s: %s is %zu bytes, over the limit of %d", field, name, length,
                    MV_IFNAME_MAX_BYTES);
  for (const char *p = name; *p; p++)
    if (*p == '/' || *p == ',' || *p == ':' || g_ascii_isspace (*p) || !g_ascii_isprint (*p))
      return invalid (error, "%s: %s holds a character an interface name cannot have", field, name);
  return TRUE;
}

static gboolean
check_mac (const char *field, const char *mac, GError **error)
{
  guint octets[6];
  char end;

  if (strlen (mac) != 17 ||
      sscanf (mac, "%2x:%2x:%2x:%2x:%2x:%2x%c", &octets[0], &octets[1], &octets[2], &octets[3],
              &octets[4], &octets[5], &end) != 6)
    return invalid (error, "%s: %s is not a MAC address like 52:54:00:12:34:56", field, mac);
  if (octets[0] & 1)
    return invalid (error, "%s: %s is a multicast address", field, mac);
  return TRUE;
}

gboolean
mv_vm_spec_check (const MvVmSpec *spec, const char *dir, GError **error)
{
  if (!spec->boot.kernel_path || !*spec->boot.kernel_path)
    return invalid (error, "kernel: none was given");
  if (!check_file ("kernel", spec->boot.kernel_path, dir, FALSE, FALSE, error))
    return FALSE;
  if (spec->boot.initrd_path && *spec->boot.initrd_path &&
      !check_file ("initrd", spec->boot.initrd_path, dir, FALSE, FALSE, error))
    return FALSE;
  if (spec->cpu.count == 0 || spec->cpu.max_count < spec->cpu.count)
    return invalid (error, "max_vcpus: %u is below the %u vCPUs the guest boots with",
                    spec->cpu.max_count, spec->cpu.count);
  if (spec->cpu.topology.threads_per_core)
    {
      const MvCpuTopology *t = &spec->cpu.topology;
      guint64 product = (guint64) t->threads_per_core * t->cores_per_die * t->dies_per_package *
                        t->packages;

      if (product != MAX (spec->cpu.count, spec->cpu.max_count))
        return invalid (error, "cpu_topology: it holds %" G_GUINT64_FORMAT " vCPUs, and the "
                        "guest can have %u", product, MAX (spec->cpu.count, spec->cpu.max_count));
    }
  if (spec->memory.size_bytes == 0 || spec->memory.size_bytes % (1 << 20) != 0)
    return invalid (error, "memory_bytes: %" G_GUINT64_FORMAT " is not a whole number of MiB",
                    spec->memory.size_bytes);
  if (spec->memory.hotplug_bytes % MV_MEMORY_RESIZE_STEP_BYTES != 0)
    return invalid (error, "max_memory_bytes: the room for hot-add, %" G_GUINT64_FORMAT
                    ", is not a multiple of %" G_GUINT64_FORMAT " (2 MiB)",
                    spec->memory.hotplug_bytes, MV_MEMORY_RESIZE_STEP_BYTES);
  for (guint i = 0; i < spec->disks->len; i++)
    {
      MvDiskConfig *disk = spec->disks->pdata[i];
      g_autofree char *field = g_strdup_printf ("disks[%u].path", i);

      if (!check_file (field, disk->path, dir, !disk->read_only, TRUE, error))
        return FALSE;
    }
  for (guint i = 0; i < spec->nets->len; i++)
    {
      MvNetConfig *net = spec->nets->pdata[i];
      g_autofree char *field = g_strdup_printf ("network[%u].tap", i);
      g_autofree char *mac_field = g_strdup_printf ("network[%u].mac", i);

      if (!check_interface_name (field, net->tap_device ? net->tap_device : "", error))
        return FALSE;
      if (net->mac && !check_mac (mac_field, net->mac, error))
        return FALSE;
    }
  for (guint i = 0; i < spec->shares->len; i++)
    {
      MvShareConfig *share = spec->shares->pdata[i];

      if (!mv_check_socket_path ("socket", share->socket_path, error))
        return FALSE;
    }
  if (spec->agent.kind != MV_AGENT_CHANNEL_NONE)
    {
      if (!spec->agent.socket_path)
        return invalid (error, "agent: no socket path was given");
      if (!mv_check_socket_path ("agent", spec->agent.socket_path, error))
        return FALSE;
      if (spec->agent.kind == MV_AGENT_CHANNEL_VSOCK && spec->agent.cid < 3)
        return invalid (error, "agent: vsock CID %u is below 3", spec->agent.cid);
    }
  return TRUE;
}

gboolean
mv_check_memory_resize (guint64 bytes, guint64 boot_bytes, guint64 hotplug_bytes, GError **error)
{
  if (hotplug_bytes == 0)
    {
      g_set_error (error, MV_ERROR, MV_ERROR_UNSUPPORTED,
                   "memory_bytes: the guest booted with no memory set aside for resizing "
                   "(max_memory_bytes)");
      return FALSE;
    }
  if (bytes % MV_MEMORY_RESIZE_STEP_BYTES != 0)
    return invalid (error, "memory_bytes: %" G_GUINT64_FORMAT " is not a multiple of %"
                    G_GUINT64_FORMAT " (2 MiB)", bytes, MV_MEMORY_RESIZE_STEP_BYTES);
  if (bytes < boot_bytes)
    return invalid (error, "memory_bytes: %" G_GUINT64_FORMAT " is below the %" G_GUINT64_FORMAT
                    " the guest booted with", bytes, boot_bytes);
  if (bytes - boot_bytes > hotplug_bytes)
    return invalid (error, "memory_bytes: %" G_GUINT64_FORMAT " is above the maximum of %"
                    G_GUINT64_FORMAT, bytes, boot_bytes + hotplug_bytes);
  return TRUE;
}

const char *
mv_vm_state_to_string (MvVmState state)
{
  switch (state)
    {
    case MV_VM_STATE_STOPPED:
      return "Stopped";
    case MV_VM_STATE_RUNNING:
      return "Running";
    case MV_VM_STATE_PAUSED:
      return "Paused";
    }
  return "Unknown";
}
