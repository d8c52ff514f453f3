/* What a machine's spec becomes for a starter: the MvVmSpec it boots,
 * with the console and the agent's socket in the machine's runtime
 * directory. */
#include "runtime-private.h"

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

MvVmSpec *
mv_runtime_vm_spec_new (MvStarter *starter, const MvGuestFiles *files,
                        const MvRuntimeRequest *req)
{
  const MvSpec *spec = req->spec;
  MvVmSpec *vm = mv_vm_spec_new ();

  vm->boot.kernel_path = g_strdup (spec->kernel && *spec->kernel
                                   ? spec->kernel : files->kernel);
  vm->boot.initrd_path = g_strdup (spec->initrd && *spec->initrd
                                   ? spec->initrd : files->initramfs);
  vm->boot.kernel_args = g_strdup (spec->kernel_args && *spec->kernel_args
                                   ? spec->kernel_args
                                   : starter->default_kernel_args (starter));
  vm->cpu.count = mv_spec_vcpus (spec);
  vm->cpu.max_count = MAX (spec->max_vcpus, vm->cpu.count);
  vm->memory.size_bytes = spec->memory_bytes;
  vm->memory.hotplug_bytes = spec->max_memory_bytes > spec->memory_bytes
                             ? spec->max_memory_bytes - spec->memory_bytes : 0;
  /* The storage layer's disks, in the guest's order, where it readied
   * them; otherwise the spec's own. */
  if (req->blocks != NULL)
    for (guint i = 0; i < req->blocks->len; i++)
      {
        const MvBlock *block = req->blocks->pdata[i];
        mv_vm_spec_add_disk (vm, block->path, block->read_only);
        ((MvDiskConfig *) g_ptr_array_index (vm->disks, vm->disks->len - 1))->daemons =
          block->role == MV_BLOCK_VOLUME;
      }
  else
    for (guint i = 0; i < spec->disks->len; i++)
      {
        MvDisk *disk = spec->disks->pdata[i];
        mv_vm_spec_add_disk (vm, disk->path, disk->read_only);
      }
  /* spec->network_name is for the network layer, which will hand over a
   * TAP device; until then guests have no NIC. */
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
