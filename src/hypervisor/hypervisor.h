/* The hypervisor layer (seed 003): what a guest is given (MvVmSpec), how a
 * VMM of one hypervisor is launched or reached again (MvStarter) and how a
 * running guest is driven (MvHypervisor). Backends fill in the two structs
 * of function pointers; runtime.c adapts any MvStarter to core's MvRuntime.
 *
 * Every operation blocks and is meant for a worker thread. A starter is
 * shared by all machines and must be safe to call from several threads; a
 * hypervisor handle serves one caller at a time. */
#pragma once
#include <glib.h>
#include <json-glib/json-glib.h>

#include "core/errors.h"
#include "core/spec.h"
#include "guest/agent.h"
#include "hypervisor/process.h"

/* The guest's memory is resized in steps of this: the block virtio-mem
 * plugs and unplugs (the spec's MV_MEMORY_STEP_BYTES). */
#define MV_MEMORY_RESIZE_STEP_BYTES  (G_GUINT64_CONSTANT (2) << 20)

/* The kernel argument that lets a guest give back hot-added memory: it
 * onlines that memory where only movable pages go. */
#define MV_MEMORY_RESIZE_KERNEL_ARGS "memory_hotplug.online_policy=auto-movable"

/* The file beside a snapshot that holds the MvVmSpec the guest was booted
 * with (mv_vm_spec_to_node), written by whoever takes the snapshot, so
 * that a backend's restore_vm can rebuild the same machine. */
#define MV_SNAPSHOT_VM_SPEC_NAME     "vm-spec.json"

/* The JSON files beside a snapshot that this layer reads back
 * (vm-spec.json, Firecracker's devices.json, Cloud Hypervisor's
 * config.json): a few KiB each, the guest metadata document (at most
 * 256 KiB) the largest part of any, a handful of levels deep. */
#define MV_SNAPSHOT_JSON_MAX_BYTES   (1024 * 1024)
#define MV_SNAPSHOT_JSON_MAX_DEPTH   16

/* Linux's limits on the names the VMM is given. */
#define MV_UNIX_PATH_MAX_BYTES       107   /* sizeof sun_path, less the NUL */
#define MV_IFNAME_MAX_BYTES          15    /* IFNAMSIZ, less the NUL */

typedef struct {
  char *kernel_path;
  char *kernel_args;
  char *initrd_path;       /* NULL: none */
} MvBootConfig;

typedef struct {
  guint count;
  guint max_count;         /* >= count; more than count leaves room for hot-add */
  /* MvCpuAffinity* (core/spec.h), never NULL; empty: no vCPU is pinned.
   * A vCPU hot-added later is pinned as it comes. */
  GPtrArray *affinity;
  /* How the vCPUs are shown to the guest; all zero: the hypervisor's own
   * way. Its product is max(count, max_count). */
  MvCpuTopology topology;
} MvCpuConfig;

typedef struct {
  guint64 size_bytes;
  guint64 hotplug_bytes;   /* how much more a resize may give; 0 = none */
} MvMemoryConfig;

typedef struct {
  char     *path;
  gboolean  read_only;
  /* Together, reads and writes per second; 0 is unlimited. */
  guint64   rate_limit_bytes_per_second;
  guint64   rate_limit_iops;
  /* The daemon's own file (image, overlay disk, volume) rather than one a
   * spec names: opened without the allowed-directories rules. */
  gboolean  own;
} MvDiskConfig;

typedef struct {
  char    *tap_device;
  char    *mac;                      /* NULL: the hypervisor picks one */
  guint    mtu;                      /* 0: the default */
  /* Each way, from the guest's side; 0 is unlimited. */
  guint64  rx_bytes_per_second;      /* what the guest receives */
  guint64  tx_bytes_per_second;      /* what the guest sends */
} MvNetConfig;

typedef struct {
  char *path;              /* the guest's serial console is appended here */
} MvConsoleConfig;

/* A host directory the guest mounts over virtio-fs: the VMM gives the
 * guest a vhost-user-fs device with @tag, served by the virtiofsd that
 * listens on @socket_path (shares.h starts it before the VMM). Its guest
 * memory must then be shared with virtiofsd. */
typedef struct {
  char     *tag;           /* what the guest mounts: "mvfs0" */
  char     *socket_path;
  char     *source;        /* the host directory, as the spec names it */
  gboolean  read_only;
  guint     mount_index;   /* its place among the spec's mounts, for messages */
} MvShareConfig;

/* A host device passed through: a PCI device or a mediated one, by its
 * sysfs directory. Its ID and slot are the device's own, whatever else
 * the machine has, so that one added to a running guest takes neither
 * from another. */
typedef struct {
  char  *id;      /* "pci-0000-01-00.0", "gpu-<uuid>": valid for every hypervisor */
  char  *path;    /* the sysfs directory */
  guint  slot;    /* where it is plugged, 0 to MV_VM_DEVICE_SLOTS - 1 */
} MvVmDevice;

/* Slots for host devices: one per PCI device a spec may name, and the GPU's. */
#define MV_VM_DEVICE_SLOTS (MV_PCI_DEVICES_MAX + 1)

/* Everything a guest is booted with. Paths may be relative: the VMM runs
 * in the directory holding its API socket. */
typedef struct {
  MvBootConfig    boot;
  MvCpuConfig     cpu;
  /* Host devices passed through (seed 003, PCIDeviceConfig), MvVmDevice*,
   * never NULL. */
  GPtrArray      *devices;
  MvMemoryConfig  memory;
  GPtrArray      *disks;    /* MvDiskConfig*, never NULL */
  GPtrArray      *nets;     /* MvNetConfig*, never NULL */
  GPtrArray      *shares;   /* MvShareConfig*, never NULL; not kept by mv_vm_spec_to_node() */
  MvConsoleConfig console;
  MvAgentChannel  agent;
  /* The guest's metadata document (mv_spec_metadata_document()), served
   * where the hypervisor has a metadata service; NULL: none. A secret: it
   * is not kept by mv_vm_spec_to_node(). */
  JsonNode       *metadata;
  /* The wall the VMM is to run behind (jail.h), the caller's; NULL: none,
   * the VMM opens the paths above itself. The backend shows it the host
   * files it needs, or passes them as descriptors. Not copied, not kept
   * by mv_vm_spec_to_node(). */
  MvJail         *jail;
  /* The cgroup the VMM and its helpers join (cgroup.h), the caller's;
   * NULL: they stay in the daemon's. Not copied, not kept. */
  const MvCgroupJoin *cgroup;
} MvVmSpec;

/* What a guest restored from a snapshot is given afresh rather than taken
 * from the snapshot: a snapshot of another machine (a fork) becomes this
 * one with its own disks, NIC and channels. */
typedef struct {
  MvConsoleConfig console;
  char           *tap_device;     /* NULL: the one it was snapshotted with */
  char           *mac;            /* NULL: the one it was snapshotted with */
  char           *agent_socket;   /* NULL: beside the API socket, as before */
  /* MvDiskConfig*, as many as the snapshot's and in its order, each in
   * place of the disk the guest had there; NULL: the snapshot's own. */
  GPtrArray      *disks;
  MvJail         *jail;           /* as MvVmSpec's; the caller's */
  const MvCgroupJoin *cgroup;     /* as MvVmSpec's */
  /* How the machine's vCPUs are pinned now, whatever they were when the
   * state was taken: MvCpuAffinity*; NULL or empty: none is. */
  GPtrArray      *cpu_affinity;
} MvRestoreSpec;

/* The CPU topologies a hypervisor can show its guests. */
typedef enum {
  /* One package of one die, whose cores have one or two threads
   * (simultaneous multithreading off or on). */
  MV_CPU_TOPOLOGIES_SMT,
  /* Any number of packages, cores and threads, one die per package. */
  MV_CPU_TOPOLOGIES_NO_DIES,
  MV_CPU_TOPOLOGIES_ANY,
} MvCpuTopologies;

typedef struct {
  gboolean snapshot;
  gboolean hotplug_memory;
  gboolean hotplug_cpu;
  gboolean cpu_affinity;
  gboolean pause;
  gboolean vsock;
  gboolean gpu_passthrough;
  gboolean hotplug_devices;  /* host devices added to a running guest */
  gboolean disk_rate_limit;
  gboolean net_rate_limit; /* limits a NIC's traffic itself; else the host's TAP is */
  gboolean net_rate_limit_symmetric; /* ...with one limit for both directions */
  gboolean virtio_fs;      /* directory mounts (vhost-user-fs devices) */
  MvCpuTopologies cpu_topology;
} MvCapabilities;

typedef enum {
  MV_VM_STATE_STOPPED,
  MV_VM_STATE_RUNNING,
  MV_VM_STATE_PAUSED,
} MvVmState;

typedef struct {
  MvVmState state;
  gboolean  has_memory_bytes;
  guint64   memory_bytes;
} MvVmInfo;

/* I/O counters of a running guest, summed over its devices. */
typedef struct {
  guint64 disk_read_bytes;
  guint64 disk_write_bytes;
  guint64 disk_read_ops;
  guint64 disk_write_ops;
  guint64 net_rx_bytes;
  guint64 net_tx_bytes;
  guint64 net_rx_packets;
  guint64 net_tx_packets;
} MvVmStats;

/* How a VMM's end was observed. */
typedef enum {
  MV_VM_END_UNKNOWN,        /* the process went without saying why */
  MV_VM_END_GUEST_POWEROFF, /* the guest powered off: a clean end */
  MV_VM_END_GUEST_RESET,    /* the guest rebooted or panicked */
  MV_VM_END_HOST_REQUEST,   /* something on the host told the VMM to quit */
  MV_VM_END_HOST_SIGNAL,    /* the VMM was sent a terminating signal */
} MvVmEnd;

typedef struct _MvHypervisor MvHypervisor;
typedef struct _MvStarter MvStarter;
typedef struct _MvVmEvents MvVmEvents;

/* One running guest. Each call is bounded by a timeout of the backend's,
 * long enough for anything but snapshot_vm. */
struct _MvHypervisor {
  gpointer  data;

  /* Ends the guest at once, without asking it. */
  gboolean (*destroy_vm) (MvHypervisor *hv, GError **error);
  /* Presses the ACPI power button; the VMM stays until the guest reacts. */
  gboolean (*shutdown_vm) (MvHypervisor *hv, GError **error);
  /* Ends the VMM process itself. */
  gboolean (*shutdown) (MvHypervisor *hv, GError **error);
  gboolean (*vm_info) (MvHypervisor *hv, MvVmInfo *info, GError **error);
  gboolean (*pause_vm) (MvHypervisor *hv, GError **error);
  gboolean (*resume_vm) (MvHypervisor *hv, GError **error);
  /* Writes the guest's state, memory included, into the existing directory
   * @dest_dir. The guest must be paused and stays so. */
  gboolean (*snapshot_vm) (MvHypervisor *hv, const char *dest_dir, GError **error);
  /* Within what the guest booted with and set aside; see
   * mv_check_memory_resize(). */
  gboolean (*resize_vm_memory) (MvHypervisor *hv, guint64 bytes, GError **error);
  gboolean (*resize_vm_cpu) (MvHypervisor *hv, guint count, GError **error);
  void     (*free) (MvHypervisor *hv);

  /* Optional (NULL where the hypervisor has none): */
  /* Replaces the whole metadata document the guest is served. */
  gboolean (*set_metadata) (MvHypervisor *hv, JsonNode *document, GError **error);
  gboolean (*stats) (MvHypervisor *hv, MvVmStats *stats, GError **error);
  /* The version of the VMM that serves this guest, as MvStarter.version
   * gives it: an adopted VMM may be of another version than the default. */
  char    *(*vmm_version) (MvHypervisor *hv, GError **error);
  /* Pins each vCPU of @affinity (MvCpuAffinity*) that the guest has now
   * to its host CPUs, from outside the VMM (process @vmm_pid), for a
   * hypervisor whose VMM does not pin them itself; vCPUs it does not
   * have yet are left for a later call. NULL where the VMM pins them. */
  gboolean (*pin_vcpus) (MvHypervisor *hv, int vmm_pid, const GPtrArray *affinity,
                         GError **error);
  /* Plugs a host device into the running guest, at its slot; where the
   * capability hotplug_devices is set. Whole or not at all. */
  gboolean (*add_device) (MvHypervisor *hv, const MvVmDevice *device, GError **error);
};

/* A channel on which a VMM tells how it ends, read on the main thread
 * without blocking while the VMM lives. */
struct _MvVmEvents {
  int       fd;         /* non-blocking; poll it for input */
  gpointer  data;
  /* Reads what is there; FALSE at end of stream. Sets *end once the VMM
   * has said why it is ending. */
  gboolean (*read) (MvVmEvents *events, MvVmEnd *end);
  void     (*free) (MvVmEvents *events);
};

/* Launches and reaches VMMs of one hypervisor. The VMM runs in the
 * directory holding its API socket and has the socket's path among its
 * arguments, so that mv_process_attach() can tell it apart after a daemon
 * restart. The caller clears stale sockets from that directory. */
struct _MvStarter {
  const char *type;          /* "qemu", "cloud-hypervisor", "firecracker" */
  const char *socket_name;   /* the API socket's name in the VMM's directory */
  /* Whether the VMM opens the guest's files and writes its snapshots by
   * path itself, taking no descriptors: a walled-in one must then be
   * shown the directory a snapshot goes to, and a restored guest's disks. */
  gboolean    opens_paths;
  gpointer    data;

  /* The VMM's version, such as "7.2.22". */
  const char   *(*version) (MvStarter *starter);
  /* Used when a machine sets no kernel arguments of its own. */
  const char   *(*default_kernel_args) (MvStarter *starter);
  /* Whether a guest powering off ends the VMM (otherwise it resets, which
   * the default kernel arguments make end it). */
  gboolean      (*power_off_ends_vm) (MvStarter *starter);
  /* Checks what only the backend knows (its binary, its own sockets)
   * before anything is started. */
  gboolean      (*check) (MvStarter *starter, const char *socket_path, const MvVmSpec *spec,
                          GError **error);
  /* Starts a VMM serving on @socket_path and boots @spec. On success *vmm
   * is the process, which the caller owns from then on. */
  MvHypervisor *(*start_vm) (MvStarter *starter, const char *socket_path, const MvVmSpec *spec,
                             MvProcess **vmm, GError **error);
  /* Starts a VMM that takes the guest from what snapshot_vm wrote into
   * @snapshot_dir, leaving it paused. The snapshot's files are kept. */
  MvHypervisor *(*restore_vm) (MvStarter *starter, const char *socket_path,
                               const char *snapshot_dir, const MvRestoreSpec *spec,
                               MvProcess **vmm, GError **error);
  /* Reaches a VMM already serving on @socket_path. */
  MvHypervisor *(*connect) (MvStarter *starter, const char *socket_path, GError **error);
  MvCapabilities (*capabilities) (MvStarter *starter);
  /* Optional: opens the VMM's event channel without blocking; NULL if the
   * hypervisor has none or it cannot be reached. */
  MvVmEvents   *(*open_events) (MvStarter *starter, const char *socket_path, GError **error);
  /* Once the VMM is gone: removes what it left beside @socket_path (its
   * sockets, the backend's own files), but not the console or its log. */
  void          (*cleanup) (MvStarter *starter, const char *socket_path);
  void          (*free) (MvStarter *starter);
};

/* @caps by name, as the Manager's HypervisorCapabilities shows them. */
GStrv       mv_capabilities_names (const MvCapabilities *caps);

MvVmSpec   *mv_vm_spec_new (void);
void        mv_vm_spec_free (MvVmSpec *spec);
MvVmSpec   *mv_vm_spec_copy (const MvVmSpec *spec);
void        mv_vm_spec_add_disk (MvVmSpec *spec, const char *path, gboolean read_only);
/* Marks the last disk added as the daemon's own file. */
void        mv_vm_spec_set_disk_own (MvVmSpec *spec);
/* Limits the last disk added. */
void        mv_vm_spec_set_disk_rate_limit (MvVmSpec *spec, guint64 bytes_per_second,
                                            guint64 iops);
void        mv_vm_spec_add_device (MvVmSpec *spec, const char *id, const char *path, guint slot);
void        mv_vm_spec_add_net (MvVmSpec *spec, const char *tap_device, const char *mac);
/* The last interface added: its MTU and rate limits. */
void        mv_vm_spec_set_net_limits (MvVmSpec *spec, guint mtu, guint64 rx_bytes_per_second,
                                       guint64 tx_bytes_per_second);
void        mv_vm_spec_add_share (MvVmSpec *spec, const char *tag, const char *socket_path,
                                  const char *source, gboolean read_only, guint mount_index);
/* [{"vcpu": N, "host_cpus": [..]}, ...]: the form of the spec's
 * cpu_affinity, which Cloud Hypervisor's cpus.affinity takes too. */
JsonArray  *mv_cpu_affinity_to_json (const GPtrArray *affinity);
/* {"threads_per_core", "cores_per_die", "dies_per_package", "packages"},
 * as Cloud Hypervisor's cpus.topology takes it. */
JsonObject *mv_cpu_topology_to_json (const MvCpuTopology *topology);
/* What a VMM of @spec must be let lock: with host devices, VFIO pins all
 * of the guest's memory for their DMA, and the device's own mappings
 * besides (1 GiB more, as libvirt allows); without, 0 (the daemon's
 * limit). */
guint64     mv_vm_spec_memlock_bytes (const MvVmSpec *spec);
/* A form that a snapshot can keep, and back. */
JsonNode   *mv_vm_spec_to_node (const MvVmSpec *spec);
MvVmSpec   *mv_vm_spec_from_node (JsonNode *node, GError **error);
/* The checks every backend needs before a VMM starts: the files exist and
 * can be read (disks written, unless read-only), the names fit the
 * kernel's limits. MV_ERROR_INVALID_ARGUMENT naming the field. Relative
 * paths resolve in @dir. */
gboolean    mv_vm_spec_check (const MvVmSpec *spec, const char *dir, GError **error);
/* MV_ERROR_INVALID_ARGUMENT unless @path fits sun_path. */
gboolean    mv_check_socket_path (const char *field, const char *path, GError **error);
/* Reads one of a snapshot's JSON files strictly (core/json-strict.h)
 * within the limits above: MV_ERROR_INVALID_ARGUMENT naming the file for
 * what is not JSON or is over a limit, an I/O error if it cannot be read. */
JsonNode   *mv_snapshot_json_load (const char *path, GError **error);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (MvVmSpec, mv_vm_spec_free)

void        mv_restore_spec_clear (MvRestoreSpec *spec);
/* The MvVmSpec recorded beside a snapshot in @snapshot_dir
 * (MV_SNAPSHOT_VM_SPEC_NAME); MV_ERROR_INVALID_ARGUMENT if it is missing
 * or unusable. */
MvVmSpec   *mv_snapshot_vm_spec_load (const char *snapshot_dir, GError **error);
/* MV_ERROR_INVALID_ARGUMENT unless @spec gives as many disks as the
 * snapshot of @snapshot_disks had (a guest keeps its devices). */
gboolean    mv_restore_spec_check_disks (const MvRestoreSpec *spec, guint snapshot_disks,
                                         GError **error);

/* Whether a guest that booted with @boot_bytes and @hotplug_bytes set
 * aside can be resized to @bytes: MV_ERROR_UNSUPPORTED if none was set
 * aside, MV_ERROR_INVALID_ARGUMENT for a size it cannot have. */
gboolean    mv_check_memory_resize (guint64 bytes, guint64 boot_bytes, guint64 hotplug_bytes,
                                    GError **error);

const char *mv_vm_state_to_string (MvVmState state);

static inline void
mv_hypervisor_free (MvHypervisor *hv)
{
  if (hv)
    hv->free (hv);
}
G_DEFINE_AUTOPTR_CLEANUP_FUNC (MvHypervisor, mv_hypervisor_free)

static inline void
mv_starter_free (MvStarter *starter)
{
  if (starter)
    starter->free (starter);
}
G_DEFINE_AUTOPTR_CLEANUP_FUNC (MvStarter, mv_starter_free)

static inline void
mv_vm_events_free (MvVmEvents *events)
{
  if (events)
    events->free (events);
}
G_DEFINE_AUTOPTR_CLEANUP_FUNC (MvVmEvents, mv_vm_events_free)
