/* MvRuntime over an MvStarter. A machine's runtime directory holds the
 * VMM's API socket (the starter's socket_name), whatever the starter puts
 * beside it, the VMM's log, console.log and the agent's socket. The VM
 * spec, readiness and exit watches have files of their own
 * (runtime-private.h). */
#include "config.h"
#include "runtime.h"
#include "runtime-private.h"
#include "host-devices.h"
#include "cgroup.h"
#include "console.h"
#include "host-cpus.h"
#include "jail.h"
#include "sandbox.h"
#include "shares.h"
#include "util/log.h"
#include "qemu.h"
#include "versions.h"
#include "core/spec.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <string.h>
#include <unistd.h>

#define QUIT_TIMEOUT_MS        10000
#define CONSOLE_QUOTE_LINES    10
#define LOG_QUOTE_LINES        5

typedef struct {
  MvRuntime         runtime;
  MvStarter        *starter;
  MvSandbox        *sandbox;          /* NULL: no rules for host files, no wall */
  MvShares         *shares;           /* NULL: no directory may be shared */
  MvCgroups        *cgroups;          /* NULL: VMMs run in the daemon's cgroup */
  guint             boot_timeout_s;
  guint             stop_timeout_s;
  MvRuntimeWatches *watches;
  MvRuntimeGuests  *guests;
  GStrv             capabilities;
} Adapter;

static Adapter *
adapter_of (MvRuntime *rt)
{
  return (Adapter *) rt;
}

static goffset
file_size (const char *path)
{
  GStatBuf st;

  return g_stat (path, &st) == 0 ? st.st_size : 0;
}

/* The host files @spec names, against [paths] allowed-directories;
 * MV_ERROR_INVALID_ARGUMENT naming the field. */
static gboolean
check_host_files (Adapter *self, const MvSpec *spec, GError **error)
{
  MvHostPaths *paths = self->sandbox ? mv_sandbox_host_paths (self->sandbox) : NULL;

  if (!paths)
    return TRUE;
  if (spec->kernel && !mv_host_paths_check (paths, "kernel", spec->kernel, error))
    return FALSE;
  if (spec->initrd && !mv_host_paths_check (paths, "initrd", spec->initrd, error))
    return FALSE;
  for (guint i = 0; i < spec->disks->len; i++)
    {
      MvDisk *disk = spec->disks->pdata[i];
      g_autofree char *field = g_strdup_printf ("disks[%u].path", i);

      if (!mv_host_paths_check (paths, field, disk->path, error))
        return FALSE;
    }
  return TRUE;
}

/* The directory mounts of @spec: MV_ERROR_UNSUPPORTED naming the mount's
 * type where the hypervisor has no virtio-fs, MV_ERROR_INVALID_ARGUMENT
 * naming its source where [storage] allowed-directories does not allow it. */
static gboolean
check_shares (Adapter *self, const MvSpec *spec, GError **error)
{
  if (!mv_spec_has_directory_mount (spec))
    return TRUE;
  if (!self->starter->capabilities (self->starter).virtio_fs)
    for (guint i = 0; i < spec->mounts->len; i++)
      if (((const MvMount *) spec->mounts->pdata[i])->type == MV_MOUNT_DIRECTORY)
        return mv_error_set (error, MV_ERROR_UNSUPPORTED,
                             "mounts[%u].type: directory mounts need virtio-fs, which %s does "
                             "not have", i, self->starter->type);
  return mv_shares_check (self->shares, spec, error);
}

/* The spec's cpu_affinity: MV_ERROR_UNSUPPORTED where the hypervisor
 * cannot pin vCPUs (seed 003, Capabilities), MV_ERROR_INVALID_ARGUMENT
 * for a host CPU this host does not have or does not let the VMMs use
 * (host-cpus.h). */
static gboolean
check_cpu_affinity (Adapter *self, const MvSpec *spec, GError **error)
{
  g_autofree char *cpuset = NULL;
  MvHostCpus host;

  if (spec->cpu_affinity->len == 0)
    return TRUE;
  if (!self->starter->capabilities (self->starter).cpu_affinity)
    return mv_error_set (error, MV_ERROR_UNSUPPORTED,
                         "cpu_affinity: %s cannot pin vCPUs to host CPUs; leave cpu_affinity "
                         "out", self->starter->type);
  cpuset = mv_cgroups_cpuset (self->cgroups);
  return mv_host_cpus_read (MV_HOST_CPUS_ONLINE_PATH, cpuset, &host, error) &&
         mv_host_cpus_check (&host, spec->cpu_affinity, error);
}

/* Host devices the hypervisor can pass through, as the host has them
 * (host-devices.h). */
static gboolean
check_host_devices (Adapter *self, const MvSpec *spec, GError **error)
{
  g_autoptr (GPtrArray) devices = NULL;

  if (!mv_spec_has_host_devices (spec))
    return TRUE;
  if (!self->starter->capabilities (self->starter).gpu_passthrough)
    return mv_error_set (error, MV_ERROR_UNSUPPORTED, "%s: %s cannot pass host devices through "
                         "to its guests", spec->pci_devices->len ? "pci_devices" : "gpu",
                         self->starter->type);
  devices = mv_host_devices_resolve (spec, error);
  return devices != NULL;
}

/* A topology the hypervisor can show the guest; else MV_ERROR_UNSUPPORTED. */
static gboolean
check_cpu_topology (Adapter *self, const MvSpec *spec, GError **error)
{
  const MvCpuTopology *t = spec->cpu_topology;

  if (!t)
    return TRUE;
  switch (self->starter->capabilities (self->starter).cpu_topology)
    {
    case MV_CPU_TOPOLOGIES_ANY:
      return TRUE;
    case MV_CPU_TOPOLOGIES_NO_DIES:
      if (t->dies_per_package == 1)
        return TRUE;
      return mv_error_set (error, MV_ERROR_UNSUPPORTED,
                           "cpu_topology.dies_per_package: %s shows its guests one die per "
                           "package; give 1", self->starter->type);
    case MV_CPU_TOPOLOGIES_SMT:
      if (t->threads_per_core <= 2 && t->dies_per_package == 1 && t->packages == 1)
        return TRUE;
      break;
    }
  return mv_error_set (error, MV_ERROR_UNSUPPORTED,
                       "cpu_topology: %s shows its guest one package of one die whose cores "
                       "have one or two threads; %u threads per core, %u dies per package and "
                       "%u packages cannot be had", self->starter->type, t->threads_per_core,
                       t->dies_per_package, t->packages);
}

/* Everything that can be checked before a process starts or a file is
 * made; MV_ERROR_INVALID_ARGUMENT naming the field. The host files are
 * checked again: one may have been swapped since the spec was accepted;
 * so are the host CPUs, which may have gone offline. */
static gboolean
check_before_start (Adapter *self, const MvRuntimeRequest *req, const char *socket_path,
                    const MvVmSpec *vm, GError **error)
{
  return mv_check_socket_path ("socket", socket_path, error) &&
         check_cpu_affinity (self, req->spec, error) &&
         check_cpu_topology (self, req->spec, error) &&
         check_host_devices (self, req->spec, error) &&
         check_host_files (self, req->spec, error) &&
         check_shares (self, req->spec, error) &&
         mv_vm_spec_check (vm, req->runtime_dir, error) &&
         self->starter->check (self->starter, socket_path, vm, error);
}

/* ---- processes ---- */

/* Once the VMM is gone: its sockets, its helpers and its cgroup. */
static void
clear_vmm_leftovers (Adapter *self, const char *machine_id, const char *runtime_dir)
{
  g_autofree char *socket_path = mv_runtime_api_socket_path (self->starter, runtime_dir);
  g_autofree char *agent = g_build_filename (runtime_dir, MV_AGENT_SOCKET_NAME, NULL);
  g_autofree char *vsock = g_build_filename (runtime_dir, MV_RUNTIME_VSOCK_SOCKET_NAME, NULL);
  g_autofree char *exit_path = mv_vmm_exit_path (socket_path);
  g_autofree char *exit_temp = g_strconcat (exit_path, ".tmp", NULL);
  g_autofree char *console = g_build_filename (runtime_dir, MV_CONSOLE_SOCKET_NAME, NULL);
  g_autoptr (GError) local = NULL;
  g_autoptr (GError) cgroup_error = NULL;

  /* A virtiofsd whose VMM is gone has no one left to serve. */
  if (!mv_shares_end (runtime_dir, NULL, &local))
    g_warning ("%s", local->message);
  self->starter->cleanup (self->starter, socket_path);
  g_unlink (agent);
  g_unlink (vsock);
  g_unlink (console);
  g_unlink (exit_temp);
  g_unlink (exit_path);
  /* The VMM's parent gives it back as the VMM ends; this covers a parent
   * that was killed first. */
  mv_jail_reclaim_runtime_dir (runtime_dir);
  /* After the helpers, which are in it too. */
  if (!mv_cgroups_remove (self->cgroups, machine_id, &cgroup_error))
    mv_log_machine (G_LOG_LEVEL_WARNING, machine_id, NULL, NULL, "%s", cgroup_error->message);
}

/* Ends every process that serves @socket_path: what an interrupted start
 * left behind without recording it. */
static gboolean
kill_by_socket (const char *machine_id, const char *socket_path, GError **error)
{
  g_autoptr (GPtrArray) found = mv_process_find_by_socket (socket_path);

  for (guint i = 0; i < found->len; i++)
    {
      MvProcess *process = found->pdata[i];

      mv_log_machine (G_LOG_LEVEL_MESSAGE, machine_id, NULL, NULL,
                      "Ending VMM process %d, left serving %s", process->pid, socket_path);
      if (!mv_process_kill (process, error))
        return FALSE;
    }
  return TRUE;
}

static MvProcess *
attach_running (const MvRuntimeRequest *req, GError **error)
{
  MvProcess *process = mv_process_attach_recorded (req->vmm);

  if (!process)
    g_set_error (error, MV_ERROR, MV_ERROR_INVALID_STATE,
                 "The guest's VMM is not running");
  return process;
}

static JsonObject *
identity_new (Adapter *self, const MvProcess *vmm, GPtrArray *shares)
{
  JsonObject *identity = json_object_new ();
  const char *version = self->starter->version (self->starter);

  mv_process_to_json (vmm, identity);
  mv_shares_to_json (shares, identity);
  json_object_set_string_member (identity, "type", self->starter->type);
  json_object_set_string_member (identity, "version", version ? version : "");
  return identity;
}

/* What the VMM itself wrote to its log after @offset, without the lines
 * microvmd adds there. */
static char *
vmm_output (const char *log, goffset offset)
{
  g_autofree char *tail = mv_file_tail (log, offset, LOG_QUOTE_LINES + 1);
  g_auto (GStrv) lines = g_strsplit (tail, "\n", -1);
  GString *out = g_string_new (NULL);

  for (char **line = lines; *line; line++)
    if (**line && !g_str_has_prefix (*line, "microvmd: "))
      g_string_append_printf (out, "%s\n", *line);
  return g_string_free (out, FALSE);
}

/* Adds the end of the console and of the VMM's log to @error. */
static void
quote_output (GError **error, const char *console, goffset console_offset, const char *log,
              goffset log_offset)
{
  g_autofree char *console_tail = mv_file_tail (console, console_offset, CONSOLE_QUOTE_LINES);
  g_autofree char *log_tail = vmm_output (log, log_offset);
  GString *message;

  if (!error || !*error)
    return;
  message = g_string_new ((*error)->message);
  g_string_append (message, "\nThe console's last lines:\n");
  g_string_append (message, *console_tail ? console_tail : "(nothing)");
  if (message->str[message->len - 1] != '\n')
    g_string_append_c (message, '\n');
  if (*log_tail && !strstr ((*error)->message, log_tail))
    g_string_append_printf (message, "The VMM's log:\n%s", log_tail);
  g_free ((*error)->message);
  (*error)->message = g_string_free (message, FALSE);
}

/* ---- MvRuntime ---- */

/* A spec's kernel_name names one of [kernels]. */
static gboolean
check_kernel_name (Adapter *self, const MvSpec *spec, GError **error)
{
  const MvGuestFiles *files = mv_runtime_guests_files (self->guests);
  g_autofree char *known = NULL;

  if (!spec->kernel_name ||
      (files->kernels && g_hash_table_contains (files->kernels, spec->kernel_name)))
    return TRUE;
  if (files->kernels && g_hash_table_size (files->kernels) > 0)
    {
      g_autoptr (GList) names = g_list_sort (g_hash_table_get_keys (files->kernels),
                                             (GCompareFunc) g_strcmp0);
      g_autoptr (GString) text = g_string_new ("");

      for (GList *l = names; l; l = l->next)
        g_string_append_printf (text, "%s%s", text->len ? ", " : "", (const char *) l->data);
      known = g_string_free (g_steal_pointer (&text), FALSE);
    }
  return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT,
                       "kernel_name: no kernel called %s in [kernels] of microvmd.conf (%s)",
                       spec->kernel_name, known ? known : "none is configured");
}

/* A VMM with one limiter for both directions cannot give the guest two
 * different ones: refused when the spec is recorded, not at its start. */
static gboolean
check_net_limits (Adapter *self, const MvSpec *spec, GError **error)
{
  if (!self->starter->capabilities (self->starter).net_rate_limit_symmetric ||
      spec->upload_bytes_per_second == spec->download_bytes_per_second)
    return TRUE;
  return mv_error_set (error, MV_ERROR_UNSUPPORTED,
                       "download_bytes_per_second: %s limits both directions alike; give "
                       "upload_bytes_per_second the same value", self->starter->type);
}

/* Room to grow that the hypervisor could never give (seed 003,
 * Capabilities): refused rather than accepted without effect. */
static gboolean
check_resize_room (Adapter *self, const MvSpec *spec, GError **error)
{
  MvCapabilities caps = self->starter->capabilities (self->starter);

  if (spec->max_vcpus > mv_spec_vcpus (spec) && !caps.hotplug_cpu)
    return mv_error_set (error, MV_ERROR_UNSUPPORTED,
                         "max_vcpus: %s cannot add vCPUs to a running guest; leave max_vcpus "
                         "out or at the machine's vCPUs", self->starter->type);
  if (spec->max_memory_bytes > spec->memory_bytes && !caps.hotplug_memory)
    return mv_error_set (error, MV_ERROR_UNSUPPORTED,
                         "max_memory_bytes: %s cannot add memory to a running guest; leave "
                         "max_memory_bytes out or at memory_bytes", self->starter->type);
  return TRUE;
}

/* Whether a warm template can stand for @spec's machine at all; if not,
 * MV_ERROR_UNSUPPORTED naming the field. */
static gboolean
check_warm_shape (Adapter *self, const MvSpec *spec, GError **error)
{
  const MvDisk *root = mv_spec_root_disk (spec);

  if (!mv_runtime_guests_has_agent (self->guests, spec))
    return mv_error_set (error, MV_ERROR_UNSUPPORTED, "kernel: a warm start needs microvmd's "
                         "agent in the guest, and this one boots without it");
  if (mv_spec_has_host_devices (spec))
    return mv_error_set (error, MV_ERROR_UNSUPPORTED, "%s: a machine given host devices "
                         "starts by booting (a template cannot be frozen with them)",
                         spec->pci_devices->len ? "pci_devices" : "gpu");
  if (mv_spec_effective_init_mode (spec) != MV_INIT_MODE_EXEC)
    return mv_error_set (error, MV_ERROR_UNSUPPORTED, "init_mode: a machine whose init is "
                         "systemd starts by booting");
  if (root && !root->read_only)
    return mv_error_set (error, MV_ERROR_UNSUPPORTED, "disks: a machine whose root disk is "
                         "writable starts by booting");
  for (guint i = 0; i < spec->mounts->len; i++)
    {
      const MvMount *mount = spec->mounts->pdata[i];

      if (mount->type == MV_MOUNT_VOLUME || mount->type == MV_MOUNT_DIRECTORY)
        return mv_error_set (error, MV_ERROR_UNSUPPORTED, "mounts[%u]: a machine with %s mounts "
                             "starts by booting", i, mv_mount_type_to_string (mount->type));
    }
  return TRUE;
}

/* start_mode warm on a machine no template can stand for would fail at
 * every start: it is refused when the spec is given. */
static gboolean
check_start_mode (Adapter *self, const MvSpec *spec, GError **error)
{
  if (spec->start_mode != MV_START_MODE_WARM || check_warm_shape (self, spec, error))
    return TRUE;
  g_prefix_error (error, "start_mode: warm: ");
  return FALSE;
}

static gboolean
rt_check (MvRuntime *rt, const MvSpec *spec, GError **error)
{
  return check_start_mode (adapter_of (rt), spec, error) &&
         check_resize_room (adapter_of (rt), spec, error) &&
         check_cpu_affinity (adapter_of (rt), spec, error) &&
         check_cpu_topology (adapter_of (rt), spec, error) &&
         check_host_devices (adapter_of (rt), spec, error) &&
         mv_cgroups_check (adapter_of (rt)->cgroups, spec, error) &&
         check_net_limits (adapter_of (rt), spec, error) &&
         check_kernel_name (adapter_of (rt), spec, error) &&
         check_host_files (adapter_of (rt), spec, error) &&
         check_shares (adapter_of (rt), spec, error);
}

static char *
rt_version (MvRuntime *rt, GError **error)
{
  Adapter *self = adapter_of (rt);
  const char *version = self->starter->version (self->starter);

  if (!version)
    {
      g_set_error (error, MV_ERROR, MV_ERROR_UNAVAILABLE, "%s is not installed",
                   self->starter->type);
      return NULL;
    }
  return g_strdup (version);
}

/* @path by what tells one file from another with that name. */
static gboolean
put_file_identity (GString *out, const char *what, const char *path, GError **error)
{
  GStatBuf st;

  if (!path)
    {
      g_string_append_printf (out, "%s=none\n", what);
      return TRUE;
    }
  if (g_stat (path, &st) < 0)
    return mv_set_errno_error (error, errno, "%s: %s", what, path);
  g_string_append_printf (out, "%s=%s size=%" G_GINT64_FORMAT " ctime=%" G_GINT64_FORMAT
                          ".%09ld inode=%" G_GUINT64_FORMAT "\n", what, path,
                          (gint64) st.st_size, (gint64) st.st_ctim.tv_sec, st.st_ctim.tv_nsec,
                          (guint64) st.st_ino);
  return TRUE;
}

static char *
rt_warm_inputs (MvRuntime *rt, const MvRuntimeRequest *req, GError **error)
{
  Adapter *self = adapter_of (rt);
  const MvSpec *spec = req->spec;
  g_autoptr (MvVmSpec) vm = NULL;
  g_autoptr (GString) out = g_string_new (NULL);
  /* The machine's place on its network is given to it after the
   * restore: only what its VMM froze of the NIC counts. */
  MvRuntimeRequest unattached = *req;

  if (!check_warm_shape (self, spec, error))
    return NULL;
  unattached.network = NULL;
  vm = mv_runtime_vm_spec_new (self->starter, mv_runtime_guests_files (self->guests), &unattached);
  g_string_append_printf (out, "hypervisor=%s %s\n", rt->type,
                          self->starter->version (self->starter));
  if (!put_file_identity (out, "kernel", vm->boot.kernel_path, error) ||
      !put_file_identity (out, "initrd", vm->boot.initrd_path, error))
    return NULL;
  g_string_append_printf (out, "cmdline=%s\n", vm->boot.kernel_args ? vm->boot.kernel_args : "");
  g_string_append_printf (out, "vcpus=%u max=%u\n", vm->cpu.count, vm->cpu.max_count);
  if (vm->cpu.topology.threads_per_core)
    g_string_append_printf (out, "topology=%u/%u/%u/%u\n", vm->cpu.topology.threads_per_core,
                            vm->cpu.topology.cores_per_die, vm->cpu.topology.dies_per_package,
                            vm->cpu.topology.packages);
  g_string_append_printf (out, "memory=%" G_GUINT64_FORMAT " hotplug=%" G_GUINT64_FORMAT "\n",
                          vm->memory.size_bytes, vm->memory.hotplug_bytes);
  if (req->network)
    {
      g_string_append_printf (out, "nic mtu=%u", req->network->mtu);
      /* A VMM that limits the NIC itself froze its limits with it. */
      if (rt->limits_network)
        g_string_append_printf (out, " rx=%" G_GUINT64_FORMAT " tx=%" G_GUINT64_FORMAT,
                                spec->download_bytes_per_second, spec->upload_bytes_per_second);
      g_string_append_c (out, '\n');
    }
  for (guint i = 0; req->blocks && i < req->blocks->len; i++)
    {
      const MvBlock *block = req->blocks->pdata[i];
      g_autofree char *what = g_strdup_printf ("disk%u", i);

      switch (block->role)
        {
        case MV_BLOCK_IMAGE:
          if (!put_file_identity (out, what, block->path, error))
            return NULL;
          break;
        case MV_BLOCK_OVERLAY:
          /* The template's overlay disk becomes the machine's, whole. */
          g_string_append_printf (out, "%s=overlay size=%" G_GUINT64_FORMAT "\n", what,
                                  mv_spec_overlay_bytes (spec));
          break;
        case MV_BLOCK_DISK:
          if (block->read_only && !put_file_identity (out, what, block->path, error))
            return NULL;
          if (!block->read_only)
            g_string_append_printf (out, "%s=writable\n", what);
          break;
        case MV_BLOCK_VOLUME:
          g_string_append_printf (out, "%s=volume\n", what);
          break;
        }
    }
  return g_string_free (g_steal_pointer (&out), FALSE);
}

/* Ends a VMM that failed to come up and removes its sockets. */
static void
abandon (Adapter *self, const char *machine_id, const MvProcess *vmm, const char *runtime_dir)
{
  g_autoptr (GError) local = NULL;

  if (vmm && !mv_process_kill (vmm, &local))
    mv_log_machine (G_LOG_LEVEL_WARNING, machine_id, NULL, NULL, "Could not end VMM process %d: %s",
                    vmm->pid, local->message);
  clear_vmm_leftovers (self, machine_id, runtime_dir);
}

/* A VMM about to be started or restored: its paths, its VM spec, and
 * where its console and log stood before it ran, so that a failure
 * quotes only what this VMM wrote. */
typedef struct {
  char     *socket_path;
  char     *log_path;
  MvVmSpec *vm;
  MvJail   *jail;           /* NULL: the sandbox is off */
  MvCgroupJoin cgroup;      /* empty: no cgroup of its own */
  goffset   console_offset;
  goffset   log_offset;
} Launch;

static void
launch_init (Launch *launch, Adapter *self, const MvRuntimeRequest *req)
{
  launch->socket_path = mv_runtime_api_socket_path (self->starter, req->runtime_dir);
  launch->log_path = mv_vmm_log_path (launch->socket_path);
  launch->vm = mv_runtime_vm_spec_new (self->starter, mv_runtime_guests_files (self->guests), req);
  launch->cgroup = (MvCgroupJoin) MV_CGROUP_JOIN_INIT;
}

static void
launch_clear (Launch *launch)
{
  g_clear_pointer (&launch->socket_path, g_free);
  g_clear_pointer (&launch->log_path, g_free);
  g_clear_pointer (&launch->vm, mv_vm_spec_free);
  /* After the VMM spec: the jail is the spec's only by reference. */
  g_clear_pointer (&launch->jail, mv_jail_free);
  mv_cgroup_join_clear (&launch->cgroup);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (Launch, launch_clear)

/* Ends what an interrupted start left serving the socket, clears the
 * sockets away, notes where the console and the log stand, makes the
 * VMM's cgroup afresh, and, unless the sandbox is off, builds the wall
 * the VMM is to run behind (leasing its UID). A VMM runs in its runtime
 * directory: in one made for this start, none can be left, and the
 * host's processes need not be read. */
static gboolean
launch_begin (Adapter *self, const MvRuntimeRequest *req, Launch *launch, GError **error)
{
  if (!req->runtime_dir_new && !kill_by_socket (req->machine_id, launch->socket_path, error))
    return FALSE;
  clear_vmm_leftovers (self, req->machine_id, req->runtime_dir);
  launch->console_offset = file_size (launch->vm->console.path);
  launch->log_offset = file_size (launch->log_path);
  if (!mv_cgroups_prepare (self->cgroups, req->machine_id, req->spec, &launch->cgroup, error))
    return FALSE;
  if (launch->cgroup.n_fds > 0 || launch->cgroup.unit)
    launch->vm->cgroup = &launch->cgroup;
  if (!self->sandbox || !mv_sandbox_enabled (self->sandbox))
    return TRUE;
  launch->jail = mv_jail_new (self->sandbox, req->machine_id, req->runtime_dir, error);
  launch->vm->jail = launch->jail;
  return launch->jail != NULL;
}

/* Under systemd, tells machined of the VMM that has just started in its
 * scope, so that machinectl lists it. A machine machined does not take
 * (a name another machine has) runs on unlisted. */
static void
register_machine (Adapter *self, const MvRuntimeRequest *req, const MvProcess *vmm)
{
  g_autoptr (GError) local = NULL;

  if (!mv_cgroups_register (self->cgroups, req->machine_id, req->spec->name, vmm->pid, &local))
    mv_log_machine (G_LOG_LEVEL_WARNING, req->machine_id, NULL, NULL,
                    "Could not register the machine with systemd-machined: %s", local->message);
}

/* Quotes what the VMM wrote in @error and ends it (@vmm NULL: none ran). */
static void
launch_fail (Adapter *self, const MvRuntimeRequest *req, const Launch *launch,
             const MvProcess *vmm, GError **error)
{
  quote_output (error, launch->vm->console.path, launch->console_offset, launch->log_path,
                launch->log_offset);
  abandon (self, req->machine_id, vmm, req->runtime_dir);
}

static JsonObject *
rt_start (MvRuntime *rt, const MvRuntimeRequest *req, GError **error)
{
  Adapter *self = adapter_of (rt);
  g_auto (Launch) launch = { 0 };
  g_autoptr (MvHypervisor) hv = NULL;
  g_autoptr (MvProcess) vmm = NULL;
  g_autoptr (GBytes) config = NULL;
  g_autoptr (GPtrArray) shares = NULL;
  g_autofree char *agent_version = NULL;
  MvReadiness readiness = mv_runtime_guests_readiness (self->guests, req->spec);
  gboolean has_agent = mv_runtime_guests_has_agent (self->guests, req->spec);
  MvAgentEnd end = mv_runtime_guests_end (self->guests);

  launch_init (&launch, self, req);
  if (!check_before_start (self, req, launch.socket_path, launch.vm, error))
    return NULL;
  if (req->build_template)
    {
      /* A template is ready when its agent says so, whatever the
       * machines started from it wait for. */
      if (!has_agent)
        {
          mv_error_set (error, MV_ERROR_UNSUPPORTED, "kernel: a warm template needs microvmd's "
                        "agent in the guest, and this one boots without it");
          return NULL;
        }
      readiness = MV_READINESS_AGENT;
      if (!(config = mv_agent_template_frame (req->spec, req->image_config, end, error)))
        return NULL;
    }
  else if (has_agent &&
           !(config = mv_agent_config_frame (req->spec, req->image_config, req->network, end,
                                             error)))
    return NULL;
  if (!launch.vm->boot.kernel_path)
    {
      g_set_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT,
                   "kernel: the spec names none, and microvmd's guest kernel is not installed");
      return NULL;
    }
  if (!launch_begin (self, req, &launch, error))
    return NULL;
  /* Before the VMM, which connects to their sockets as it starts. */
  if (launch.vm->shares->len > 0 &&
      !(shares = mv_shares_start (self->shares, launch.vm,
                                  launch.jail ? (gint64) mv_jail_uid (launch.jail) : -1, error)))
    {
      clear_vmm_leftovers (self, req->machine_id, req->runtime_dir);
      return NULL;
    }
  hv = self->starter->start_vm (self->starter, launch.socket_path, launch.vm, &vmm, error);
  if (!hv)
    {
      clear_vmm_leftovers (self, req->machine_id, req->runtime_dir);
      return NULL;
    }
  register_machine (self, req, vmm);
  if (!mv_runtime_wait_ready (hv, vmm, launch.vm, readiness, req->spec->readiness_text, config,
                              NULL, launch.console_offset, self->boot_timeout_s, req->cancellable,
                              &agent_version, error))
    {
      launch_fail (self, req, &launch, vmm, error);
      return NULL;
    }
  mv_runtime_guests_heard_at_start (self->guests, req->machine_id, agent_version);
  return identity_new (self, vmm, shares);
}

/* Presses the guest's power button and waits up to @timeout_ms for the VMM
 * to end. FALSE if it did not. */
static gboolean
press_power_button (Adapter *self, const char *machine_id, const MvProcess *vmm, guint timeout_ms)
{
  g_autoptr (GError) local = NULL;
  g_autoptr (MvHypervisor) hv = self->starter->connect (self->starter, vmm->socket_path, &local);
  MvVmInfo info;

  if (!hv)
    {
      mv_log_machine (G_LOG_LEVEL_MESSAGE, machine_id, NULL, NULL,
                      "Could not reach VMM %d to shut its guest down: %s", vmm->pid, local->message);
      return FALSE;
    }
  /* A paused guest cannot see the power button. */
  if (hv->vm_info (hv, &info, NULL) && info.state == MV_VM_STATE_PAUSED &&
      !hv->resume_vm (hv, &local))
    {
      mv_log_machine (G_LOG_LEVEL_MESSAGE, machine_id, NULL, NULL,
                      "Could not resume VMM %d's guest to shut it down: %s", vmm->pid,
                      local->message);
      return FALSE;
    }
  if (!hv->shutdown_vm (hv, &local))
    {
      mv_log_machine (G_LOG_LEVEL_MESSAGE, machine_id, NULL, NULL,
                      "Could not ask VMM %d's guest to shut down: %s", vmm->pid, local->message);
      return FALSE;
    }
  return mv_process_wait (vmm, timeout_ms);
}

/* Shuts the guest down and waits for its VMM to end; FALSE if it did not
 * within the stop timeout. The agent is asked first, then the power
 * button is pressed; each has half the timeout. A guest whose agent has
 * not answered is still booting and nothing in it can hear a request:
 * it is not waited for. A guest without microvmd's agent gets the power
 * button and the whole timeout. */
static gboolean
stop_gracefully (Adapter *self, const char *machine_id, const MvProcess *vmm)
{
  guint timeout_ms = self->stop_timeout_s * 1000;

  switch (mv_runtime_guests_ask_poweroff (self->guests, machine_id))
    {
    case MV_GUEST_ASKED:
      if (mv_process_wait (vmm, timeout_ms / 2))
        {
          mv_log_machine (G_LOG_LEVEL_MESSAGE, machine_id, NULL, NULL,
                          "The guest powered off at its agent's request");
          return TRUE;
        }
      mv_log_machine (G_LOG_LEVEL_MESSAGE, machine_id, NULL, NULL,
                      "The guest's agent did not power it off within %u s; pressing its power "
                      "button", self->stop_timeout_s / 2);
      if (press_power_button (self, machine_id, vmm, timeout_ms - timeout_ms / 2))
        {
          mv_log_machine (G_LOG_LEVEL_MESSAGE, machine_id, NULL, NULL,
                          "The guest powered off at its power button");
          return TRUE;
        }
      return FALSE;
    case MV_GUEST_NOT_ANSWERING:
      mv_log_machine (G_LOG_LEVEL_MESSAGE, machine_id, NULL, NULL,
                      "The guest's agent has not answered yet: the guest is still booting and "
                      "cannot hear a shutdown request, so its VMM is ended at once");
      return FALSE;
    case MV_GUEST_NO_AGENT:
    default:
      if (press_power_button (self, machine_id, vmm, timeout_ms))
        {
          mv_log_machine (G_LOG_LEVEL_MESSAGE, machine_id, NULL, NULL,
                          "The guest powered off at its power button");
          return TRUE;
        }
      return FALSE;
    }
}

static gboolean
rt_stop (MvRuntime *rt, const MvRuntimeRequest *req, gboolean force, GError **error)
{
  Adapter *self = adapter_of (rt);
  g_autofree char *socket_path = mv_runtime_api_socket_path (self->starter, req->runtime_dir);
  g_autoptr (MvProcess) vmm = NULL;

  if (!req->vmm)
    {
      /* Never recorded: a start was interrupted. Nothing to shut down
       * gracefully; end whatever it left. */
      if (!kill_by_socket (req->machine_id, socket_path, error))
        return FALSE;
      clear_vmm_leftovers (self, req->machine_id, req->runtime_dir);
      return TRUE;
    }

  vmm = mv_process_attach_recorded (req->vmm);
  if (!vmm)
    {
      g_autoptr (GPtrArray) others = mv_process_find_by_socket (socket_path);

      if (others->len > 0)
        {
          g_set_error (error, MV_ERROR, MV_ERROR_CONFLICT,
                       "vmm: the recorded VMM is gone, but process %d, which is not the "
                       "recorded one, serves %s; it was left alone",
                       ((MvProcess *) others->pdata[0])->pid, socket_path);
          return FALSE;
        }
      if (!mv_shares_end (req->runtime_dir, req->vmm, error))
        return FALSE;
      clear_vmm_leftovers (self, req->machine_id, req->runtime_dir);
      return TRUE;
    }

  if (!force && !stop_gracefully (self, req->machine_id, vmm))
    mv_log_machine (G_LOG_LEVEL_MESSAGE, req->machine_id, NULL, NULL,
                    "VMM %d did not end of a graceful stop; ending it", vmm->pid);
  if (!mv_process_kill (vmm, error) || !mv_shares_end (req->runtime_dir, req->vmm, error))
    return FALSE;
  clear_vmm_leftovers (self, req->machine_id, req->runtime_dir);
  return TRUE;
}

static MvHypervisor *
connect_running (Adapter *self, const MvRuntimeRequest *req, GError **error)
{
  g_autoptr (MvProcess) vmm = attach_running (req, error);

  if (!vmm)
    return NULL;
  return self->starter->connect (self->starter, vmm->socket_path, error);
}

static gboolean
rt_pause (MvRuntime *rt, const MvRuntimeRequest *req, GError **error)
{
  g_autoptr (MvHypervisor) hv = connect_running (adapter_of (rt), req, error);

  return hv && hv->pause_vm (hv, error);
}

static gboolean
rt_resume (MvRuntime *rt, const MvRuntimeRequest *req, GError **error)
{
  g_autoptr (MvHypervisor) hv = connect_running (adapter_of (rt), req, error);

  return hv && hv->resume_vm (hv, error);
}

static MvVmmState
rt_probe (MvRuntime *rt, const MvRuntimeRequest *req)
{
  Adapter *self = adapter_of (rt);
  g_autoptr (MvProcess) vmm = mv_process_attach_recorded (req->vmm);
  g_autoptr (MvHypervisor) hv = NULL;
  g_autoptr (GError) local = NULL;
  MvVmInfo info;

  if (!vmm)
    return MV_VMM_GONE;
  hv = self->starter->connect (self->starter, vmm->socket_path, &local);
  if (!hv || !hv->vm_info (hv, &info, &local))
    {
      /* The process is ours and alive: calling it gone would leave it
       * running unmanaged. */
      mv_log_machine (G_LOG_LEVEL_WARNING, req->machine_id, NULL, NULL,
                      "VMM %d runs but does not answer: %s", vmm->pid, local->message);
      return MV_VMM_RUNNING;
    }
  switch (info.state)
    {
    case MV_VM_STATE_RUNNING:
      return MV_VMM_RUNNING;
    case MV_VM_STATE_PAUSED:
      return MV_VMM_PAUSED;
    case MV_VM_STATE_STOPPED:
    default:
      return MV_VMM_GONE;
    }
}

static gboolean
rt_destroy (MvRuntime *rt, const MvRuntimeRequest *req, GError **error)
{
  Adapter *self = adapter_of (rt);
  g_autofree char *socket_path = mv_runtime_api_socket_path (self->starter, req->runtime_dir);
  g_autofree char *log_path = mv_vmm_log_path (socket_path);
  g_autofree char *console = mv_runtime_console_path (req->runtime_dir);
  g_autofree char *workload = g_build_filename (req->runtime_dir, MV_WORKLOAD_LOG_NAME, NULL);
  g_autofree char *workload_rotated = g_strconcat (workload, MV_LOG_ROTATED_SUFFIX, NULL);
  g_autoptr (MvProcess) vmm = mv_process_attach_recorded (req->vmm);

  if (vmm && !mv_process_kill (vmm, error))
    return FALSE;
  if (!kill_by_socket (req->machine_id, socket_path, error) ||
      !mv_shares_end (req->runtime_dir, req->vmm, error))
    return FALSE;
  clear_vmm_leftovers (self, req->machine_id, req->runtime_dir);
  g_unlink (log_path);
  g_unlink (console);
  g_unlink (workload);
  g_unlink (workload_rotated);
  return TRUE;
}

/* ---- save and restore ---- */

static gboolean
write_vm_spec (const MvVmSpec *vm, const char *state_dir, GError **error)
{
  g_autofree char *path = g_build_filename (state_dir, MV_SNAPSHOT_VM_SPEC_NAME, NULL);
  g_autoptr (JsonNode) node = mv_vm_spec_to_node (vm);
  g_autofree char *text = json_to_string (node, FALSE);
  g_autoptr (GError) local = NULL;

  if (!g_file_set_contents_full (path, text, -1, G_FILE_SET_CONTENTS_CONSISTENT, 0600, &local))
    {
      g_set_error (error, MV_ERROR, MV_ERROR_FAILED, "Could not write %s: %s", path,
                   local->message);
      return FALSE;
    }
  return TRUE;
}

/* Has the guest written into @state_dir. A walled-in VMM that writes its
 * snapshot itself is shown the directory for the while. */
static gboolean
snapshot (Adapter *self, const MvProcess *vmm, MvHypervisor *hv, const char *state_dir,
          GError **error)
{
  g_autoptr (GError) local = NULL;
  int pidfd;
  gboolean ok;

  if (vmm->uid < 0 || !self->starter->opens_paths)
    return hv->snapshot_vm (hv, state_dir, error);
  pidfd = mv_process_open_pidfd (vmm);
  if (pidfd < 0)
    {
      int saved = errno;
      g_set_error (error, MV_ERROR, MV_ERROR_INVALID_STATE, "The VMM %d is gone: %s", vmm->pid,
                   g_strerror (saved));
      return FALSE;
    }
  ok = mv_jail_show_dir_to_running (pidfd, (uid_t) vmm->uid, state_dir, error) &&
       hv->snapshot_vm (hv, state_dir, error);
  if (!mv_jail_hide_dir_from_running (pidfd, state_dir, &local))
    g_warning ("%s", local->message);
  close (pidfd);
  return ok;
}

/* Writes the guest's state and its VM spec into @state_dir, leaving it
 * paused; on failure it is as it was, running or paused. */
static gboolean
freeze (Adapter *self, const MvRuntimeRequest *req, const MvProcess *vmm, MvHypervisor *hv,
        const char *state_dir, GError **error)
{
  g_autoptr (MvVmSpec) vm = mv_runtime_vm_spec_new (self->starter,
                                                    mv_runtime_guests_files (self->guests), req);
  g_autoptr (GError) local = NULL;
  const char *why = mv_spec_unfreezable (req->spec);
  MvVmInfo info;

  if (why)
    return mv_error_set (error, MV_ERROR_UNSUPPORTED, "%s", why);
  if (!hv->vm_info (hv, &info, error))
    return FALSE;
  if (info.state == MV_VM_STATE_STOPPED)
    return mv_error_set (error, MV_ERROR_INVALID_STATE,
                         "The guest of VMM %d is not running: there is nothing to freeze",
                         vmm->pid);
  /* Pausing a paused guest is an error to some VMMs. */
  if (info.state == MV_VM_STATE_RUNNING && !hv->pause_vm (hv, error))
    return FALSE;
  if (snapshot (self, vmm, hv, state_dir, error) && write_vm_spec (vm, state_dir, error))
    return TRUE;
  /* Nothing is lost: the guest goes on as it was. */
  if (info.state == MV_VM_STATE_RUNNING && !hv->resume_vm (hv, &local))
    mv_log_machine (G_LOG_LEVEL_WARNING, req->machine_id, NULL, NULL,
                    "Could not resume VMM %d's guest after a failed snapshot: %s", vmm->pid,
                    local->message);
  return FALSE;
}

static gboolean
rt_snapshot (MvRuntime *rt, const MvRuntimeRequest *req, const char *state_dir, GError **error)
{
  Adapter *self = adapter_of (rt);
  g_autoptr (MvProcess) vmm = attach_running (req, error);
  g_autoptr (MvHypervisor) hv = NULL;

  if (!vmm || !(hv = self->starter->connect (self->starter, vmm->socket_path, error)))
    return FALSE;
  return freeze (self, req, vmm, hv, state_dir, error);
}

/* A snapshot whose VMM is ended once the state is written. */
static gboolean
rt_save (MvRuntime *rt, const MvRuntimeRequest *req, const char *state_dir, GError **error)
{
  Adapter *self = adapter_of (rt);
  g_autoptr (MvProcess) vmm = attach_running (req, error);
  g_autoptr (MvHypervisor) hv = NULL;
  g_autoptr (GError) local = NULL;

  if (!vmm || !(hv = self->starter->connect (self->starter, vmm->socket_path, error)) ||
      !freeze (self, req, vmm, hv, state_dir, error))
    return FALSE;

  if (!hv->shutdown (hv, &local) || !mv_process_wait (vmm, QUIT_TIMEOUT_MS))
    mv_log_machine (G_LOG_LEVEL_MESSAGE, req->machine_id, NULL, NULL,
                    "VMM %d did not quit after its guest was saved (%s); ending it", vmm->pid,
                    local ? local->message : "timed out");
  if (!mv_process_kill (vmm, error))
    return FALSE;
  clear_vmm_leftovers (self, req->machine_id, req->runtime_dir);
  return TRUE;
}

static JsonObject *
rt_restore (MvRuntime *rt, const MvRuntimeRequest *req, const char *state_dir, GError **error)
{
  Adapter *self = adapter_of (rt);
  g_auto (Launch) launch = { 0 };
  g_autoptr (MvHypervisor) hv = NULL;
  g_autoptr (MvProcess) vmm = NULL;
  g_autoptr (GBytes) config = NULL, identity = NULL;
  g_autofree char *agent_version = NULL;
  MvReadiness readiness = MV_READINESS_VMM;
  MvRestoreSpec rspec = { 0 };

  /* A guest restored from a template has no identity or workload yet: it
   * is given both and waited for as a boot would be. */
  if (req->from_template)
    {
      if (!mv_runtime_guests_has_agent (self->guests, req->spec))
        {
          mv_error_set (error, MV_ERROR_UNSUPPORTED, "kernel: a warm start needs microvmd's "
                        "agent in the guest, and this one boots without it");
          return NULL;
        }
      readiness = MV_READINESS_AGENT;
      if (!(config = mv_agent_config_frame (req->spec, req->image_config, req->network,
                                            mv_runtime_guests_end (self->guests), error)) ||
          !(identity = mv_runtime_identity_frame (req, error)))
        return NULL;
    }
  launch_init (&launch, self, req);
  /* The guest comes from the snapshot, not from this VM spec: only the
   * socket and what the backend itself needs are checked. */
  if (!mv_check_socket_path ("socket", launch.socket_path, error) ||
      !check_cpu_affinity (self, req->spec, error) ||
      !self->starter->check (self->starter, launch.socket_path, launch.vm, error) ||
      !launch_begin (self, req, &launch, error))
    return NULL;

  /* The machine's own disks, NIC and channels, whichever machine the
   * state was taken of; the backend shows a walled-in VMM the disks. */
  rspec.console.path = g_strdup (launch.vm->console.path);
  rspec.agent_socket = g_strdup (launch.vm->agent.socket_path);
  rspec.tap_device = req->network ? g_strdup (req->network->tap_device) : NULL;
  rspec.mac = req->network ? g_strdup (req->network->mac_address) : NULL;
  rspec.disks = g_ptr_array_ref (launch.vm->disks);
  rspec.jail = launch.jail;
  rspec.cgroup = launch.vm->cgroup;
  rspec.cpu_affinity = g_ptr_array_ref (launch.vm->cpu.affinity);
  hv = self->starter->restore_vm (self->starter, launch.socket_path, state_dir, &rspec, &vmm,
                                  error);
  mv_restore_spec_clear (&rspec);
  if (!hv)
    {
      /* A snapshot refused before any VMM ran has no console to quote. */
      if (g_error_matches (*error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT) ||
          g_error_matches (*error, MV_ERROR, MV_ERROR_UNSUPPORTED))
        abandon (self, req->machine_id, NULL, req->runtime_dir);
      else
        launch_fail (self, req, &launch, NULL, error);
      return NULL;
    }
  register_machine (self, req, vmm);
  if (!hv->resume_vm (hv, error) ||
      !mv_runtime_wait_ready (hv, vmm, launch.vm, readiness, NULL, config, identity,
                              launch.console_offset, self->boot_timeout_s, req->cancellable,
                              req->from_template ? &agent_version : NULL, error))
    {
      launch_fail (self, req, &launch, vmm, error);
      return NULL;
    }
  if (req->from_template)
    mv_runtime_guests_heard_at_start (self->guests, req->machine_id, agent_version);
  return identity_new (self, vmm, NULL);
}

/* @ok, the outcome of the second part of a resize; after the first was
 * taken its failure is no refusal, whatever the hypervisor called it. */
static gboolean
resize_second (gboolean ok, const char *prefix, GError **error)
{
  if (!ok && prefix && error && *error && (*error)->domain == MV_ERROR)
    {
      g_prefix_error (error, "%s", prefix);
      (*error)->code = MV_ERROR_FAILED;
    }
  return ok;
}

/* The VMM's CPU quota follows its vCPUs (@req->spec has the new size). */
static gboolean
update_quota (Adapter *self, const MvRuntimeRequest *req, GError **error)
{
  if (mv_cgroups_update (self->cgroups, req->machine_id, req->spec, error))
    return TRUE;
  g_prefix_error (error, "The guest was resized, its cgroup's CPU quota not: ");
  return FALSE;
}

static gboolean
rt_resize (MvRuntime *rt, const MvRuntimeRequest *req, const MvRuntimeResize *resize,
           GError **error)
{
  Adapter *self = adapter_of (rt);
  MvCapabilities caps = self->starter->capabilities (self->starter);
  gboolean memory = resize->memory_bytes != resize->from_memory_bytes;
  gboolean cpus = resize->vcpus != resize->from_vcpus;
  g_autoptr (MvProcess) vmm = NULL;
  g_autoptr (MvHypervisor) hv = NULL;

  /* What the hypervisor cannot do at all is refused before either part. */
  if (cpus && !caps.hotplug_cpu)
    return mv_error_set (error, MV_ERROR_UNSUPPORTED,
                         "vcpus: %s cannot add or remove vCPUs of a running guest",
                         self->starter->type);
  if (memory && !caps.hotplug_memory)
    return mv_error_set (error, MV_ERROR_UNSUPPORTED,
                         "memory_bytes: %s cannot resize a running guest's memory",
                         self->starter->type);
  if (!(vmm = attach_running (req, error)) ||
      !(hv = self->starter->connect (self->starter, vmm->socket_path, error)))
    return FALSE;
  /* Memory first when vCPUs are added (a guest given more vCPUs has more
   * to feed); vCPUs first when they are taken away, so that a removal the
   * hypervisor refuses outright (QEMU under TCG) changes nothing. */
  if (cpus && resize->vcpus < resize->from_vcpus)
    return hv->resize_vm_cpu (hv, resize->vcpus, error) &&
           (!memory || resize_second (hv->resize_vm_memory (hv, resize->memory_bytes, error),
                                      "The vCPUs were resized, the memory not: ", error)) &&
           update_quota (self, req, error);
  if (memory && !hv->resize_vm_memory (hv, resize->memory_bytes, error))
    return FALSE;
  if (cpus && !resize_second (hv->resize_vm_cpu (hv, resize->vcpus, error),
                              memory ? "The memory was resized, the vCPUs not: " : NULL, error))
    return FALSE;
  /* The vCPUs it was given are pinned as cpu_affinity says, where the
   * VMM does not pin them itself. */
  if (cpus && req->spec->cpu_affinity->len > 0 && hv->pin_vcpus &&
      !resize_second (hv->pin_vcpus (hv, vmm->pid, req->spec->cpu_affinity, error),
                      "The guest was given its vCPUs, but they could not be pinned: ", error))
    return FALSE;
  return !cpus || update_quota (self, req, error);
}

/* VFIO pins the guest's memory for a device's DMA: a VMM that booted
 * without one may lock too little (mv_vm_spec_memlock_bytes()). */
static void
raise_memlock (const MvProcess *vmm, const MvSpec *spec)
{
  g_autoptr (MvVmSpec) sizes = mv_vm_spec_new ();
  g_autoptr (GError) local = NULL;

  sizes->memory.size_bytes = spec->memory_bytes;
  sizes->memory.hotplug_bytes = spec->max_memory_bytes > spec->memory_bytes
                                ? spec->max_memory_bytes - spec->memory_bytes : 0;
  mv_host_devices_add_to (sizes, spec);
  if (!mv_process_raise_memlock (vmm, mv_vm_spec_memlock_bytes (sizes), &local))
    g_warning ("%s", local->message);
}

static gboolean
has_device (const MvVmSpec *vm, const char *id)
{
  for (guint i = 0; i < vm->devices->len; i++)
    if (g_str_equal (((const MvVmDevice *) vm->devices->pdata[i])->id, id))
      return TRUE;
  return FALSE;
}

static gboolean
rt_add_devices (MvRuntime *rt, const MvRuntimeRequest *req, const MvSpec *booted, guint *added,
                GError **error)
{
  Adapter *self = adapter_of (rt);
  MvCapabilities caps = self->starter->capabilities (self->starter);
  g_autoptr (MvVmSpec) had = mv_vm_spec_new ();
  g_autoptr (MvVmSpec) wanted = mv_vm_spec_new ();
  g_autoptr (MvProcess) vmm = NULL;
  g_autoptr (MvHypervisor) hv = NULL;
  gboolean ok = TRUE;
  int pidfd = -1;

  *added = 0;
  if (!caps.hotplug_devices || !caps.gpu_passthrough)
    return mv_error_set (error, MV_ERROR_UNSUPPORTED, "%s: %s cannot add host devices to a "
                         "running guest", req->spec->pci_devices->len ? "pci_devices" : "gpu",
                         self->starter->type);
  if (!check_host_devices (self, req->spec, error) ||
      !(vmm = attach_running (req, error)) ||
      !(hv = self->starter->connect (self->starter, vmm->socket_path, error)))
    return FALSE;
  if (vmm->uid >= 0 && (pidfd = mv_process_open_pidfd (vmm)) < 0)
    return mv_error_set (error, MV_ERROR_INVALID_STATE, "The VMM %d is gone: %s", vmm->pid,
                         g_strerror (errno));
  raise_memlock (vmm, req->spec);
  mv_host_devices_add_to (had, booted);
  mv_host_devices_add_to (wanted, req->spec);
  for (guint i = 0; ok && i < wanted->devices->len; i++)
    {
      const MvVmDevice *device = wanted->devices->pdata[i];

      if (has_device (had, device->id))
        continue;
      ok = (pidfd < 0 || mv_host_devices_give_to_running (pidfd, (uid_t) vmm->uid, device,
                                                          error)) &&
           hv->add_device (hv, device, error);
      if (ok)
        (*added)++;
      else if (pidfd >= 0)
        mv_host_devices_take_from_running (pidfd, device);
    }
  if (pidfd >= 0)
    close (pidfd);
  return ok;
}

static int
rt_open_console (MvRuntime *rt, const MvRuntimeRequest *req, gboolean *writer, GError **error)
{
  g_autofree char *log_path = mv_runtime_console_path (req->runtime_dir);

  return mv_console_attach (log_path, TRUE, writer, error);
}

static gboolean
rt_usage (MvRuntime *rt, const MvRuntimeRequest *req, MvRuntimeUsage *usage, GError **error)
{
  Adapter *self = adapter_of (rt);
  g_autoptr (MvProcess) vmm = attach_running (req, error);
  guint64 cpu_ns;

  if (!vmm || !mv_process_usage (vmm, usage, error))
    return FALSE;
  /* The group counts the VMM's helpers, and threads that have ended. */
  if (mv_cgroups_cpu_usage (self->cgroups, req->machine_id, &cpu_ns))
    usage->cpu_ns = cpu_ns;
  return TRUE;
}

/* ---- watching ---- */

static guint
rt_watch (MvRuntime *rt, const char *machine_id, JsonObject *vmm, MvRuntimeExitFunc func,
          gpointer user_data)
{
  return mv_runtime_watches_add (adapter_of (rt)->watches, machine_id, vmm, func, user_data);
}

static void
rt_unwatch (MvRuntime *rt, guint watch_id)
{
  mv_runtime_watches_remove (adapter_of (rt)->watches, watch_id);
}

/* A guest whose agent reported how its workload ended ended that way,
 * whatever its VMM's end looked like (Firecracker's guests end theirs by
 * rebooting). */
static void
exit_filter (const char *machine_id, gboolean *has_exit_code, int *exit_code, char **reason,
             gpointer data)
{
  Adapter *self = data;
  gboolean has_code;
  int code, sig;

  if (!mv_runtime_guests_take_exit (self->guests, machine_id, &has_code, &code, &sig))
    return;
  *has_exit_code = has_code;
  *exit_code = has_code ? code : 0;
  g_free (*reason);
  *reason = has_code ? g_strdup_printf ("the workload exited with status %d", code)
                     : g_strdup_printf ("the workload was killed by signal %d (%s)", sig,
                                        g_strsignal (sig));
}

static void
rt_attach_guest (MvRuntime *rt, const MvRuntimeRequest *req)
{
  mv_runtime_guests_attach (adapter_of (rt)->guests, req);
}

static gboolean
rt_has_agent (MvRuntime *rt, const MvSpec *spec)
{
  return mv_runtime_guests_has_agent (adapter_of (rt)->guests, spec);
}

static void
rt_detach_guest (MvRuntime *rt, const char *machine_id)
{
  mv_runtime_guests_detach (adapter_of (rt)->guests, machine_id);
}

static gboolean
rt_update_guest (MvRuntime *rt, const MvRuntimeRequest *req, GError **error)
{
  return mv_runtime_guests_update (adapter_of (rt)->guests, req, error);
}

static gboolean
rt_reidentify_guest (MvRuntime *rt, const MvRuntimeRequest *req, GError **error)
{
  return mv_runtime_guests_reidentify (adapter_of (rt)->guests, req, error);
}

static gboolean
rt_exec (MvRuntime *rt, const char *machine_id, const MvRuntimeExec *exec, int fds[4],
         GError **error)
{
  return mv_runtime_guests_exec (adapter_of (rt)->guests, machine_id, exec, fds, error);
}

static void
rt_set_guest_listener (MvRuntime *rt, MvGuestEventFunc func, gpointer data)
{
  mv_runtime_guests_set_listener (adapter_of (rt)->guests, func, data);
}

/* ---- construction ---- */

MvRuntime *
mv_hypervisor_runtime_new (MvStarter *starter, MvSandbox *sandbox, guint boot_timeout_seconds,
                           guint stop_timeout_seconds)
{
  Adapter *self = g_new0 (Adapter, 1);
  MvCapabilities caps;

  self->starter = starter;
  self->sandbox = sandbox ? mv_sandbox_ref (sandbox) : NULL;
  self->boot_timeout_s = boot_timeout_seconds;
  self->stop_timeout_s = stop_timeout_seconds;
  self->watches = mv_runtime_watches_new (starter);
  self->guests = mv_runtime_guests_new (starter);
  mv_runtime_watches_set_filter (self->watches, exit_filter, self);
  self->runtime.type = starter->type;
  caps = starter->capabilities (starter);
  self->runtime.limits_network = caps.net_rate_limit;
  self->capabilities = mv_capabilities_names (&caps);
  self->runtime.capabilities = (const char *const *) self->capabilities;
  self->runtime.data = self;
  self->runtime.version = rt_version;
  self->runtime.warm_inputs = rt_warm_inputs;
  self->runtime.check = rt_check;
  self->runtime.start = rt_start;
  self->runtime.stop = rt_stop;
  self->runtime.pause = rt_pause;
  self->runtime.resume = rt_resume;
  self->runtime.probe = rt_probe;
  self->runtime.destroy = rt_destroy;
  self->runtime.watch = rt_watch;
  self->runtime.unwatch = rt_unwatch;
  self->runtime.save = rt_save;
  self->runtime.snapshot = rt_snapshot;
  self->runtime.restore = rt_restore;
  self->runtime.usage = rt_usage;
  self->runtime.open_console = rt_open_console;
  self->runtime.resize = rt_resize;
  self->runtime.add_devices = rt_add_devices;
  self->runtime.attach_guest = rt_attach_guest;
  self->runtime.has_agent = rt_has_agent;
  self->runtime.detach_guest = rt_detach_guest;
  self->runtime.update_guest = rt_update_guest;
  self->runtime.reidentify_guest = rt_reidentify_guest;
  self->runtime.exec = rt_exec;
  self->runtime.set_guest_listener = rt_set_guest_listener;
  return &self->runtime;
}

void
mv_hypervisor_runtime_free (MvRuntime *runtime)
{
  Adapter *self;

  if (!runtime)
    return;
  self = adapter_of (runtime);
  mv_runtime_watches_free (self->watches);
  mv_runtime_guests_free (self->guests);
  self->starter->free (self->starter);
  g_clear_pointer (&self->sandbox, mv_sandbox_unref);
  g_clear_pointer (&self->shares, mv_shares_unref);
  g_clear_pointer (&self->cgroups, mv_cgroups_unref);
  g_strfreev (self->capabilities);
  g_free (self);
}

void
mv_hypervisor_runtime_set_shares (MvRuntime *runtime, MvShares *shares)
{
  Adapter *self = adapter_of (runtime);

  g_clear_pointer (&self->shares, mv_shares_unref);
  self->shares = shares ? mv_shares_ref (shares) : NULL;
}

void
mv_hypervisor_runtime_set_cgroups (MvRuntime *runtime, MvCgroups *cgroups)
{
  Adapter *self = adapter_of (runtime);

  g_clear_pointer (&self->cgroups, mv_cgroups_unref);
  self->cgroups = cgroups ? mv_cgroups_ref (cgroups) : NULL;
}

MvStarter *
mv_hypervisor_runtime_starter (MvRuntime *runtime)
{
  return adapter_of (runtime)->starter;
}

void
mv_hypervisor_runtime_set_guest_files (MvRuntime *runtime, const char *kernel,
                                       const char *initramfs)
{
  mv_runtime_guests_set_files (adapter_of (runtime)->guests, kernel, initramfs);
}

void
mv_hypervisor_runtime_set_kernels (MvRuntime *runtime, GHashTable *kernels)
{
  mv_runtime_guests_set_kernels (adapter_of (runtime)->guests, kernels);
}

/* ---- built-in runtimes ---- */

static MvStarter *
qemu_from_config (GKeyFile *config, MvVersionCache *versions, GError **error)
{
  g_autofree char *binary = config ? g_key_file_get_string (config, "qemu", "binary", NULL) : NULL;
  g_autofree char *accel = config ? g_key_file_get_string (config, "qemu", "accel", NULL) : NULL;
  MvQemuOptions options = { .binary = binary, .accel = accel, .versions = versions };

  return mv_qemu_starter_new (&options, error);
}

/* The built-in hypervisors, in the order "auto" tries them. */
static const struct {
  const char *type;
  MvStarter *(*new_from_config) (GKeyFile *config, MvVersionCache *versions, GError **error);
} builtin[] = {
  { MV_QEMU_TYPE, qemu_from_config },
};

static gboolean
read_seconds (GKeyFile *config, const char *group, const char *key, guint fallback,
              guint *seconds, GError **error)
{
  g_autoptr (GError) local = NULL;
  guint64 value;

  *seconds = fallback;
  if (!config || !g_key_file_has_key (config, group, key, NULL))
    return TRUE;
  value = g_key_file_get_uint64 (config, group, key, &local);
  if (local || value < 1 || value > MV_TIMEOUT_SECONDS_MAX)
    {
      g_set_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT,
                   "[%s] %s: must be a number of seconds from 1 to %d", group, key,
                   MV_TIMEOUT_SECONDS_MAX);
      return FALSE;
    }
  *seconds = (guint) value;
  return TRUE;
}

/* [kernels]: NAME = /absolute/path/to/vmlinuz, for a spec's kernel_name
 * and [guest] kernel. */
static GHashTable *
read_kernels (GKeyFile *config, GError **error)
{
  g_autoptr (GHashTable) kernels = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  g_auto (GStrv) names = config ? g_key_file_get_keys (config, "kernels", NULL, NULL) : NULL;

  for (char **name = names; name && *name; name++)
    {
      g_autofree char *path = g_key_file_get_string (config, "kernels", *name, NULL);
      g_autoptr (MvSpec) probe = mv_spec_new ();
      g_autoptr (GError) local = NULL;

      /* The same rules as the spec's field. */
      probe->name = g_strdup ("probe");
      probe->kernel_name = g_strdup (*name);
      if (!mv_spec_validate (probe, &local))
        {
          g_set_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT, "[kernels] %s: %s", *name,
                       local->message);
          return NULL;
        }
      if (!path || !g_path_is_absolute (path) || !g_file_test (path, G_FILE_TEST_IS_REGULAR))
        {
          g_set_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT,
                       "[kernels] %s: %s is not an absolute path to a file", *name,
                       path ? path : "");
          return NULL;
        }
      g_hash_table_insert (kernels, g_strdup (*name), g_steal_pointer (&path));
    }
  return g_steal_pointer (&kernels);
}

/* [guest] kernel or initramfs: what is configured (for the kernel, a path
 * or a name of [kernels]), else the installed file if there is one, else
 * NULL. A configured path must exist. */
static gboolean
read_guest_file (GKeyFile *config, const char *key, const char *installed, GHashTable *kernels,
                 char **path, GError **error)
{
  g_autofree char *value = config ? g_key_file_get_string (config, "guest", key, NULL) : NULL;

  *path = NULL;
  if (value && kernels && g_hash_table_contains (kernels, value))
    {
      *path = g_strdup (g_hash_table_lookup (kernels, value));
      return TRUE;
    }
  if (value && *value)
    {
      if (!g_path_is_absolute (value) || !g_file_test (value, G_FILE_TEST_IS_REGULAR))
        {
          g_set_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT,
                       "[guest] %s: %s is neither an absolute path to a file nor a kernel of "
                       "[kernels]", key, value);
          return FALSE;
        }
      *path = g_steal_pointer (&value);
      return TRUE;
    }
  if (g_file_test (installed, G_FILE_TEST_IS_REGULAR))
    *path = g_strdup (installed);
  return TRUE;
}

GPtrArray *
mv_hypervisor_builtin_runtimes (GKeyFile *config, MvVersionCache *versions, GError **error)
{
  g_autofree char *guest_kernel = NULL, *guest_initramfs = NULL;
  g_autoptr (GPtrArray) runtimes =
    g_ptr_array_new_with_free_func ((GDestroyNotify) mv_hypervisor_runtime_free);
  g_autoptr (MvSandbox) sandbox = NULL;
  g_autoptr (GHashTable) kernels = NULL;
  g_autoptr (MvShares) shares = NULL;
  g_autoptr (MvCgroups) cgroups = NULL;
  guint boot_timeout, stop_timeout;
  GHashTableIter iter;
  gpointer path;

  if (!(kernels = read_kernels (config, error)) ||
      !(sandbox = mv_sandbox_new_from_config (config, error)) ||
      !(shares = mv_shares_new_from_config (config, error)) ||
      !(cgroups = mv_cgroups_new_from_config (config, error)) ||
      !read_seconds (config, "lifecycle", "boot-timeout-seconds", MV_DEFAULT_BOOT_TIMEOUT_SECONDS,
                     &boot_timeout, error) ||
      !read_seconds (config, "lifecycle", "stop-timeout-seconds", MV_DEFAULT_STOP_TIMEOUT_SECONDS,
                     &stop_timeout, error) ||
      !read_guest_file (config, "kernel", GUESTDIR "/" MV_GUEST_KERNEL_NAME, kernels,
                        &guest_kernel, error) ||
      !read_guest_file (config, "initramfs", GUESTDIR "/" MV_GUEST_INITRAMFS_NAME, NULL,
                        &guest_initramfs, error))
    return NULL;
  /* The configured kernels are the administrator's choice too. */
  g_hash_table_iter_init (&iter, kernels);
  while (g_hash_table_iter_next (&iter, NULL, &path))
    if (!mv_host_paths_allow_dir_of (mv_sandbox_host_paths (sandbox), path, error))
      return NULL;
  /* The daemon's own guest files are the administrator's choice, wherever
   * they are: the wall around a VMM shows them. */
  if ((guest_kernel && !mv_host_paths_allow_dir_of (mv_sandbox_host_paths (sandbox), guest_kernel,
                                                    error)) ||
      (guest_initramfs && !mv_host_paths_allow_dir_of (mv_sandbox_host_paths (sandbox),
                                                       guest_initramfs, error)))
    return NULL;
  /* Cloud Hypervisor and Firecracker first, each version in its listed
   * order: the first runtime of all is the host's default type. */
  g_autoptr (GPtrArray) rest = mv_http_backends_starters_from_config (config, error);
  if (!rest)
    return NULL;
  for (guint i = 0; i < rest->len; i++)
    g_ptr_array_add (runtimes, mv_hypervisor_runtime_new (g_ptr_array_steal_index (rest, i--),
                                                          sandbox, boot_timeout, stop_timeout));

  for (guint i = 0; i < G_N_ELEMENTS (builtin); i++)
    {
      MvStarter *starter = builtin[i].new_from_config (config, versions, error);

      if (!starter)
        return NULL;
      g_ptr_array_add (runtimes, mv_hypervisor_runtime_new (starter, sandbox, boot_timeout,
                                                            stop_timeout));
    }
  for (guint i = 0; i < runtimes->len; i++)
    {
      mv_hypervisor_runtime_set_guest_files (runtimes->pdata[i], guest_kernel, guest_initramfs);
      mv_hypervisor_runtime_set_kernels (runtimes->pdata[i], kernels);
      mv_hypervisor_runtime_set_shares (runtimes->pdata[i], shares);
      mv_hypervisor_runtime_set_cgroups (runtimes->pdata[i], cgroups);
    }
  if (mv_cgroups_usable (cgroups))
    {
      g_message ("VMMs run in cgroups of their own: %s", mv_cgroups_describe (cgroups));
      /* No VMM has been started yet: an empty group is what an earlier
       * daemon or VMM left. */
      mv_cgroups_sweep (cgroups);
    }
  else
    g_warning ("%s", mv_cgroups_describe (cgroups));
  return g_steal_pointer (&runtimes);
}
