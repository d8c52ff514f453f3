/* What a machine's spec becomes for a starter: the MvVmSpec it boots,
 * with the console and the agent's socket in the machine's runtime
 * directory. */
#include "runtime-private.h"
#include "host-devices.h"
#include "shares.h"

/* The guest's vsock CID: the first one free for guests. */
#define VSOCK_GUEST_CID  3

char *
mv_runtime_api_socket_path (MvStarter *starter, const char *runtime_dir)
{
  return g_build_filename (runtime_dir, starter->socket_name, NULL);
}

char *
mv_runtime_console_path (const char *runtime_dir)
{
  return g_build_filename (runtime_dir, MV_CONSOLE_LOG_NAME, NULL);
}

static MvAgentChannelKind
agent_kind (MvStarter *starter)
{
  return starter->capabilities (starter).vsock ? MV_AGENT_CHANNEL_VSOCK : MV_AGENT_CHANNEL_SERIAL;
}

/* Each of a machine's disks is limited alike (seed 002). */
static void
limit_disk (MvVmSpec *vm, const MvSpec *spec)
{
  if (spec->disk_bytes_per_second || spec->disk_iops)
    mv_vm_spec_set_disk_rate_limit (vm, spec->disk_bytes_per_second, spec->disk_iops);
}

/* The kernel's own address configuration, ip=CLIENT::GATEWAY:NETMASK::
 * eth0:off, for a guest without an agent to set its interface up (it
 * takes effect where the kernel has its NIC driver built in). */
static char *
add_ip_argument (const char *kernel_args, const MvNetworkAttachment *net)
{
  g_autofree char *client = g_strdup (net->address);
  char *slash = strchr (client, '/');
  guint prefix = slash ? (guint) g_ascii_strtoull (slash + 1, NULL, 10) : 32;
  guint32 mask = prefix == 0 ? 0 : G_MAXUINT32 << (32 - MIN (prefix, 32));

  if (slash)
    *slash = '\0';
  return g_strdup_printf ("%s%sip=%s::%s:%u.%u.%u.%u::eth0:off", kernel_args ? kernel_args : "",
                          kernel_args && *kernel_args ? " " : "", client, net->gateway,
                          mask >> 24, (mask >> 16) & 0xff, (mask >> 8) & 0xff, mask & 0xff);
}

MvVmSpec *
mv_runtime_vm_spec_new (MvStarter *starter, const MvGuestFiles *files,
                        const MvRuntimeRequest *req)
{
  const MvSpec *spec = req->spec;
  MvVmSpec *vm = mv_vm_spec_new ();

  const char *named = spec->kernel_name && files->kernels
                      ? g_hash_table_lookup (files->kernels, spec->kernel_name) : NULL;

  vm->boot.kernel_path = g_strdup (spec->kernel && *spec->kernel ? spec->kernel
                                   : named ? named : files->kernel);
  vm->boot.initrd_path = g_strdup (spec->initrd && *spec->initrd
                                   ? spec->initrd : files->initramfs);
  /* A guest with memory to grow into brings it online where it can be
   * given back (seed 003); a machine's own arguments are its own. */
  if (spec->kernel_args && *spec->kernel_args)
    vm->boot.kernel_args = g_strdup (spec->kernel_args);
  else if (spec->max_memory_bytes > spec->memory_bytes)
    vm->boot.kernel_args = g_strconcat (starter->default_kernel_args (starter), " ",
                                        MV_MEMORY_RESIZE_KERNEL_ARGS, NULL);
  else
    vm->boot.kernel_args = g_strdup (starter->default_kernel_args (starter));
  vm->cpu.count = mv_spec_vcpus (spec);
  vm->cpu.max_count = MAX (spec->max_vcpus, vm->cpu.count);
  g_ptr_array_unref (vm->cpu.affinity);
  vm->cpu.affinity = mv_cpu_affinity_list_copy (spec->cpu_affinity);
  if (spec->cpu_topology)
    vm->cpu.topology = *spec->cpu_topology;
  mv_host_devices_add_to (vm, spec);
  vm->memory.size_bytes = spec->memory_bytes;
  vm->memory.hotplug_bytes = spec->max_memory_bytes > spec->memory_bytes
                             ? spec->max_memory_bytes - spec->memory_bytes : 0;
  /* The disks the storage layer readied, in the guest's order; without
   * them (a request that boots nothing) the spec's. */
  if (req->blocks)
    for (guint i = 0; i < req->blocks->len; i++)
      {
        MvBlock *block = req->blocks->pdata[i];

        mv_vm_spec_add_disk (vm, block->path, block->read_only);
        if (block->role != MV_BLOCK_DISK)
          mv_vm_spec_set_disk_own (vm);
        limit_disk (vm, spec);
      }
  else
    for (guint i = 0; i < spec->disks->len; i++)
      {
        MvDisk *disk = spec->disks->pdata[i];

        mv_vm_spec_add_disk (vm, disk->path, disk->read_only);
        limit_disk (vm, spec);
      }
  for (guint i = 0, n = 0; i < spec->mounts->len; i++)
    {
      const MvMount *mount = spec->mounts->pdata[i];
      g_autofree char *tag = mv_spec_directory_tag (spec, i);
      g_autofree char *socket = NULL;

      if (!tag)
        continue;
      socket = mv_shares_socket_path (req->runtime_dir, n++);
      mv_vm_spec_add_share (vm, tag, socket, mount->source, mount->read_only, i);
    }
  /* The network layer's TAP, the guest's one NIC. */
  if (req->network)
    {
      const MvNetworkAttachment *net = req->network;

      mv_vm_spec_add_net (vm, net->tap_device, net->mac_address);
      mv_vm_spec_set_net_limits (vm, net->mtu, spec->download_bytes_per_second,
                                 spec->upload_bytes_per_second);
      /* A template's NIC stands for every machine's: it has no address
       * until a machine's agent gives it one. */
      if (!req->build_template)
        {
          g_autofree char *args = add_ip_argument (vm->boot.kernel_args, net);

          g_free (vm->boot.kernel_args);
          vm->boot.kernel_args = g_steal_pointer (&args);
        }
    }
  vm->console.path = mv_runtime_console_path (req->runtime_dir);
  vm->agent.kind = agent_kind (starter);
  vm->agent.socket_path = g_build_filename (req->runtime_dir,
                                            vm->agent.kind == MV_AGENT_CHANNEL_VSOCK
                                            ? MV_RUNTIME_VSOCK_SOCKET_NAME : MV_AGENT_SOCKET_NAME,
                                            NULL);
  vm->agent.cid = vm->agent.kind == MV_AGENT_CHANNEL_VSOCK ? VSOCK_GUEST_CID : 0;
  /* Served where the hypervisor has a metadata service; the agent is
   * given it over its channel as well. */
  vm->metadata = mv_spec_metadata_document (spec);
  return vm;
}
