/* The spec: what a machine is, as clients send it and as config.json
 * keeps it. This header holds all of MvSpec; each section names the file
 * that implements it. Pure (no I/O). */
#pragma once
#include <glib.h>
#include <json-glib/json-glib.h>
#include "json-tree.h"

/* The document as a whole, as spec-json.c reads it: well below a D-Bus
 * message, room for MV_FILE_MOUNT_MAX_BYTES of file contents written as
 * base64 (a third more) beside the other fields, and deep enough for
 * every field. */
#define MV_SPEC_MAX_BYTES                 (2 * 1024 * 1024)
#define MV_SPEC_MAX_DEPTH                 32

/* Limits (seed 000, seed 004 and DESIGN §2a), checked by spec-validate.c. */
#define MV_NAME_MAX_BYTES                 63
#define MV_ID_MAX_BYTES                   63
#define MV_HOSTNAME_MAX_BYTES             253
#define MV_CPU_MILLICORES_MIN             100
#define MV_CPU_MILLICORES_MAX             32000
#define MV_VCPUS_MAX                      32
/* Host PCI devices one machine may be given (pci_devices). */
#define MV_PCI_DEVICES_MAX                8
/* Host CPU numbers a vCPU may be pinned to are below this (cpu_affinity). */
#define MV_HOST_CPUS_MAX                  4096
#define MV_MEMORY_STEP_BYTES              (G_GUINT64_CONSTANT (2) << 20)   /* 2 MiB */
#define MV_MEMORY_MIN_BYTES               (G_GUINT64_CONSTANT (32) << 20)
#define MV_MEMORY_MAX_BYTES               (G_GUINT64_CONSTANT (1) << 40)   /* 1 TiB */
#define MV_DEFAULT_CPU_MILLICORES         1000
#define MV_DEFAULT_MEMORY_BYTES           (G_GUINT64_CONSTANT (256) << 20)
#define MV_DISKS_MAX                      16
#define MV_PATH_MAX_BYTES                 4095
#define MV_HYPERVISOR_VERSION_MAX_BYTES   64
/* An IPv6 address written with an IPv4 tail, and a prefix length. */
#define MV_STATIC_IP_MAX_BYTES            49
#define MV_KERNEL_ARGS_MAX_BYTES          4096
#define MV_METADATA_MAX_ENTRIES           16
#define MV_METADATA_MAX_JSON_BYTES        (48 * 1024)
#define MV_METADATA_KEY_MAX_BYTES         128
#define MV_SSH_KEYS_MAX                   16
#define MV_SSH_KEY_MAX_BYTES              (2 * 1024)
#define MV_USER_DATA_MAX_BYTES            (16 * 1024)
/* The whole guest metadata document (spec-metadata.c); the one place
 * this limit is set, the metadata service is sized from it. */
#define MV_METADATA_DOCUMENT_MAX_BYTES    (248 * 1024)
/* What temporary console keys may add to it, beyond the spec's part
 * (seed 004): the metadata service holds both. */
#define MV_CONSOLE_KEYS_MAX_BYTES         (8 * 1024)
#define MV_LABELS_MAX                     64
#define MV_LABEL_KEY_MAX_BYTES            63
#define MV_LABEL_VALUE_MAX_BYTES          255
#define MV_FIREWALL_RULES_MAX             256
/* One rule as compact JSON, and how deep it nests (the rule itself is 1). */
#define MV_FIREWALL_RULE_MAX_BYTES        1024
#define MV_FIREWALL_RULE_MAX_DEPTH        8
#define MV_STANDBY_AFTER_MIN_SECONDS      60
#define MV_STANDBY_AFTER_MAX_SECONDS      (365 * 24 * 3600)   /* a year */
#define MV_RESTART_MAX_RETRIES_MAX        1000
#define MV_READINESS_TEXT_MAX_BYTES       256
/* The workload (seed 002, Spec: Cmd, Env, User; MaxFileMountBytes). */
#define MV_CMD_MAX_ARGS                   256
#define MV_CMD_MAX_BYTES                  (128 * 1024)   /* all of argv together */
#define MV_ENV_MAX                        256
#define MV_ENV_MAX_BYTES                  (128 * 1024)   /* all "KEY=VALUE" together */
#define MV_USER_MAX_BYTES                 256
#define MV_MOUNTS_MAX                     64
#define MV_FILE_MOUNT_MAX_BYTES           (1024 * 1024)  /* all of a machine's file mounts */
#define MV_HEALTH_EXEC_MAX_ARGS           64
#define MV_HEALTH_INTERVAL_MAX_SECONDS    3600
#define MV_HEALTH_RETRIES_MAX             100
#define MV_HEALTH_START_PERIOD_MAX_SECONDS 3600
#define MV_HEALTH_HTTP_PATH_MAX_BYTES     1024
/* Images and disks (seed 002: DiskBytes, DiskBytesPerSecond, DiskIOPS,
 * MaxVolumeMounts). A guest sees its disks as /dev/vda, /dev/vdb, ... in
 * the order the storage layer gives them: the image, the overlay disk,
 * the spec's disks, then volumes. */
#define MV_KERNEL_NAME_MAX_BYTES          63
#define MV_DEFAULT_DISK_BYTES             (G_GUINT64_CONSTANT (1) << 30)   /* 1 GiB, sparse */
#define MV_DISK_BYTES_MIN                 (G_GUINT64_CONSTANT (64) << 20)
#define MV_DISK_BYTES_MAX                 (G_GUINT64_CONSTANT (16) << 40)  /* 16 TiB */
#define MV_DISK_BYTES_PER_SECOND_MIN      (G_GUINT64_CONSTANT (64) << 10)  /* 64 KiB/s */
#define MV_DISK_BYTES_PER_SECOND_MAX      (G_GUINT64_CONSTANT (1) << 40)
#define MV_NET_BYTES_PER_SECOND_MIN       (G_GUINT64_CONSTANT (16) << 10)  /* 16 KiB/s */
#define MV_NET_BYTES_PER_SECOND_MAX       (G_GUINT64_CONSTANT (100) << 30)
#define MV_DISK_IOPS_MIN                  10
#define MV_DISK_IOPS_MAX                  1000000
#define MV_VOLUME_MOUNTS_MAX              22             /* 'z' - 'e' + 1 */
#define MV_BLOCK_DEVICES_MAX              26             /* /dev/vda to /dev/vdz */

typedef enum {
  MV_RESTART_NO,
  MV_RESTART_ON_FAILURE,
  MV_RESTART_UNLESS_STOPPED,
  MV_RESTART_ALWAYS,
} MvRestartMode;

typedef enum {
  MV_READINESS_AUTO,      /* agent if the guest boots microvmd's initramfs, else vmm */
  MV_READINESS_VMM,       /* the vCPUs run */
  MV_READINESS_AGENT,     /* the guest agent answers */
  MV_READINESS_CONSOLE,   /* readiness_text appears on the console */
} MvReadiness;

typedef struct {
  char     *path;
  gboolean  read_only;
  gboolean  root;          /* the guest's root file system; at most one disk */
} MvDisk;

/* One vCPU pinned to a set of host CPUs (seed 003, CPUAffinity). */
typedef struct {
  guint32  vcpu;
  GArray  *host_cpus;      /* guint32, in the order given; never NULL */
} MvCpuAffinity;

/* A mediated GPU device given to the guest (seed 003, GPUConfig). */
typedef struct {
  char *profile;                 /* its mdev type, as sysfs names it: "nvidia-35" */
  char *mediated_device_uuid;    /* /sys/bus/mdev/devices/<uuid> */
} MvGpu;

/* How the vCPUs are shown to the guest (seed 003, CPUTopology): their
 * product is the most vCPUs the machine can have. */
typedef struct {
  guint32  threads_per_core;
  guint32  cores_per_die;
  guint32  dies_per_package;
  guint32  packages;
} MvCpuTopology;

typedef enum {
  MV_INIT_MODE_AUTO,       /* systemd if cmd is systemd (or /sbin/init), else exec */
  MV_INIT_MODE_EXEC,       /* microvmd-agent is PID 1 and runs cmd */
  MV_INIT_MODE_SYSTEMD,    /* the root's systemd is PID 1, the agent its service */
} MvInitMode;

/* How a start may boot the guest (issue of warm starts): from a warm
 * template that matches, or by booting it. */
typedef enum {
  MV_START_MODE_AUTO,      /* from a template when one matches, else a boot */
  MV_START_MODE_COLD,      /* always a boot */
  MV_START_MODE_WARM,      /* from a template; a start fails if none matches */
} MvStartMode;

typedef enum {
  MV_MOUNT_FILE,           /* content written afresh at every start */
  MV_MOUNT_TMPFS,
  MV_MOUNT_VOLUME,         /* not carried out yet: Unsupported */
  MV_MOUNT_DIRECTORY,      /* not carried out yet: Unsupported */
} MvMountType;

typedef struct {
  MvMountType type;
  char       *source;      /* volume name or host directory; NULL for file, tmpfs */
  char       *target;      /* absolute, normalized, in the guest */
  gboolean    read_only;
  GBytes     *content;     /* file: the decoded bytes ("content" is base64); else NULL */
  guint32     mode;        /* permission bits; file default 0644, tmpfs 01777 */
  guint64     size_bytes;  /* tmpfs; 0 = the guest kernel's default */
} MvMount;

typedef enum {
  MV_HEALTH_CHECK_EXEC,    /* the command exits 0 */
  MV_HEALTH_CHECK_TCP,     /* a connection to 127.0.0.1:port opens */
  MV_HEALTH_CHECK_HTTP,    /* GET path on 127.0.0.1:port answers 2xx or 3xx */
} MvHealthCheckKind;

typedef struct {
  MvHealthCheckKind kind;
  char            **exec;             /* argv, NULL-terminated, for EXEC */
  guint32           port;             /* TCP, HTTP: 1-65535 */
  char             *http_path;        /* HTTP: starts with '/', default "/" */
  guint32           interval_seconds; /* default 30 */
  guint32           timeout_seconds;  /* default 5, at most the interval */
  guint32           retries;          /* default 3 */
  guint32           start_period_seconds;
  gboolean          disabled;
} MvHealthCheck;

typedef struct {
  char          *id;                 /* may be NULL before create */
  char          *name;
  char          *hypervisor_type;    /* NULL = default type */
  char          *hypervisor_version; /* NULL = that type's default */
  char          *kernel;
  char          *initrd;
  char          *kernel_args;        /* NULL = the hypervisor's default */
  guint32        cpu_millicores;
  guint32        max_vcpus;          /* 0 = no room for hot-add */
  GPtrArray     *cpu_affinity;       /* MvCpuAffinity*, never NULL; empty: unpinned */
  MvCpuTopology *cpu_topology;       /* NULL: the hypervisor's (one package of cores) */
  /* Host devices passed through (seed 003, VMSpec.PCIDevices, GPU). */
  GPtrArray     *pci_devices;        /* char*, PCI addresses "0000:01:00.0", never NULL */
  MvGpu         *gpu;                /* NULL: none */
  guint64        memory_bytes;
  guint64        max_memory_bytes;   /* 0 = no room for hot-add */
  GPtrArray     *disks;              /* MvDisk*, never NULL */
  MvReadiness    readiness;
  char          *readiness_text;     /* for MV_READINESS_CONSOLE */
  char          *network_name;
  char          *static_ip;
  char          *hostname;
  GPtrArray     *ssh_keys;           /* char*, never NULL; secret */
  char          *user_data;          /* secret */
  GHashTable    *metadata;           /* char* -> char*, never NULL; values secret */
  JsonArray     *firewall;           /* rules as given (objects), never NULL; core/net-rules.h */
  GPtrArray     *ports;              /* MvPortMapping*, never NULL; core/net-rules.h */
  MvRestartMode  restart_mode;
  guint32        restart_max_retries;
  guint32        standby_after_seconds;  /* 0 = never */
  GHashTable    *labels;             /* char* -> char*, never NULL */
  gboolean       remove_on_exit;
  /* The workload (seed 002). */
  char         **cmd;                /* argv, NULL-terminated; NULL = none */
  GHashTable    *env;                /* char* -> char*, never NULL */
  char          *user;               /* user, uid, user:group, uid:gid; NULL = root */
  char          *working_dir;        /* absolute; NULL = the user's home */
  MvInitMode     init_mode;
  MvStartMode    start_mode;
  GPtrArray     *mounts;             /* MvMount*, never NULL */
  MvHealthCheck *health_check;       /* NULL = none */
  /* Images and disks (seed 002). */
  char          *image;              /* a reference (core/image-ref.h) as given; NULL = none */
  char          *image_digest;       /* what image resolved to at create; pinned */
  char          *kernel_name;        /* a kernel of [kernels] in microvmd.conf; NULL = none */
  guint64        disk_bytes;         /* the overlay disk; 0 = MV_DEFAULT_DISK_BYTES with an image */
  guint64        disk_bytes_per_second;  /* each disk's; 0 = unlimited */
  guint64        disk_iops;          /* each disk's; 0 = unlimited */
  /* Networks (seed 002): the guest's interface, each way; 0 = unlimited. */
  guint64        upload_bytes_per_second;    /* guest to network */
  guint64        download_bytes_per_second;  /* network to guest */
} MvSpec;

/* ---- the model (spec.c) ---- */

MvSpec  *mv_spec_new (void);        /* defaults filled in */
void     mv_spec_free (MvSpec *spec);
MvSpec  *mv_spec_copy (const MvSpec *spec);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (MvSpec, mv_spec_free)

guint    mv_spec_vcpus (const MvSpec *spec);   /* ceil(cpu_millicores / 1000) */
/* The most vCPUs the machine can have: its vCPUs, or max_vcpus when it
 * has room to grow. cpu_affinity may pin vCPUs below this. */
guint    mv_spec_max_vcpus (const MvSpec *spec);

MvGpu         *mv_gpu_new (const char *profile, const char *mediated_device_uuid);
void           mv_gpu_free (MvGpu *gpu);
/* Both NULL, or the same profile and device. */
gboolean       mv_gpu_equal (const MvGpu *a, const MvGpu *b);
MvCpuAffinity *mv_cpu_affinity_new (guint32 vcpu);
void           mv_cpu_affinity_free (MvCpuAffinity *affinity);
MvCpuAffinity *mv_cpu_affinity_copy (const MvCpuAffinity *affinity);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (MvCpuAffinity, mv_cpu_affinity_free)
/* A new list of MvCpuAffinity* that frees them; copies @from's (may be NULL). */
GPtrArray     *mv_cpu_affinity_list_copy (const GPtrArray *from);
/* SHA-256 hex of the canonical document without id, labels excluded;
 * query strings of URLs (signed image URLs) are ignored. */
char    *mv_spec_fingerprint (const MvSpec *spec);
gboolean mv_spec_equal (const MvSpec *a, const MvSpec *b);
/* Whether a and b differ in more than the standby time: a change that
 * raises the specification generation. */
gboolean mv_spec_differs_beyond_standby (const MvSpec *a, const MvSpec *b);
/* vCPUs, memory, disks, image or hypervisor differ: saved state becomes useless. */
gboolean mv_spec_shape_differs (const MvSpec *a, const MvSpec *b);

const char *mv_restart_mode_to_string (MvRestartMode mode);
const char *mv_init_mode_to_string (MvInitMode mode);
const char *mv_start_mode_to_string (MvStartMode mode);
/* The spec a warm template of machines like @spec is built from and
 * recorded with: their image and shape, and nothing of any machine (no
 * name but "warm-" and @key's first 12 digits, no identity, metadata,
 * secrets, workload, mounts, health check, labels, published ports or
 * firewall rules; its network, for a NIC to freeze). */
MvSpec     *mv_spec_warm_template (const MvSpec *spec, const char *key);
gboolean    mv_start_mode_from_string (const char *s, MvStartMode *mode);
const char *mv_mount_type_to_string (MvMountType type);
/* The disk marked root, or NULL. */
const MvDisk *mv_spec_root_disk (const MvSpec *spec);
/* The size of the machine's overlay disk: disk_bytes, or its default for
 * a machine booted from an image; 0 for none (the guest's changes to its
 * root then live in memory). */
guint64     mv_spec_overlay_bytes (const MvSpec *spec);
/* The init mode the guest is told: auto resolved against cmd. */
MvInitMode mv_spec_effective_init_mode (const MvSpec *spec);
/* Whether a and b differ only in hostname, ssh_keys, user_data and
 * metadata (and the standby time): a change applied to a running guest at
 * once, accepted in any state. */
gboolean mv_spec_differs_only_in_guest_metadata (const MvSpec *a, const MvSpec *b);
/* "auto", "vmm", "agent" or "console:TEXT", as the spec document spells it. */
char       *mv_readiness_to_string (MvReadiness readiness, const char *readiness_text);

/* ---- the JSON document (spec-json.c) ---- */

/* Parses a spec document with the strict reader (core/json-strict.h)
 * within MV_SPEC_MAX_BYTES and MV_SPEC_MAX_DEPTH. Unknown fields, wrong
 * types and anything that is not strictly JSON are MV_ERROR_INVALID_ARGUMENT
 * naming the field. Does not validate limits. */
MvSpec  *mv_spec_from_json (const char *json, GError **error);
/* Only the size of @json, without reading past MV_SPEC_MAX_BYTES: what can
 * be refused before anything else is done with a document. */
gboolean mv_spec_json_check_size (const char *json, GError **error);
/* The document's "name" if it reads strictly within the spec's limits and
 * is a valid name, else NULL: what a prompt may show before the caller is
 * authorized, without the spec being read for anything else. */
char    *mv_spec_json_peek_name (const char *json);
MvSpec  *mv_spec_from_node (const MvJson *node, GError **error);
/* What stands in a spec shown without its secrets for each SSH key, the
 * user data and each metadata value. The spec validation refuses it in
 * those fields, so that such a spec sent back to Update wipes nothing. */
#define MV_SPEC_REDACTED "<redacted>"

/* Serializes; without @with_secrets, each SSH key, the user data and each
 * metadata value is MV_SPEC_REDACTED. */
JsonNode *mv_spec_to_node (const MvSpec *spec, gboolean with_secrets);
char     *mv_spec_to_json (const MvSpec *spec, gboolean with_secrets);

/* ---- validation (spec-validate.c) ---- */

/* Checks every limit; the message names the field and the limit:
 * "memory_bytes: 1000 is below the minimum of 33554432 (32 MiB)". The
 * document as a whole, with its secrets, is at most MV_SPEC_MAX_BYTES. */
gboolean mv_spec_validate (const MvSpec *spec, GError **error);
/* The same, with the shortest standby time the daemon accepts set by its
 * configuration rather than MV_STANDBY_AFTER_MIN_SECONDS. */
gboolean mv_spec_validate_with_standby_min (const MvSpec *spec, guint32 standby_min,
                                            GError **error);
/* Names of machines and networks: at most MV_NAME_MAX_BYTES, safe as a
 * path component, and nothing that makes one name display as another
 * (core/text.h: controls, bidirectional and invisible characters, other
 * spaces, not in NFC). */
gboolean mv_name_validate (const char *field, const char *name, GError **error);
/* Whether @spec shares a host directory with its guest (a mount of type
 * directory, over virtio-fs): such a machine cannot be put on standby. */
gboolean mv_spec_has_directory_mount (const MvSpec *spec);
/* Why @spec's guest cannot be frozen (standby, snapshots), or NULL: a
 * directory mount, whose state is virtiofsd's, or a passed-through
 * device, whose state is the device's. */
const char *mv_spec_unfreezable (const MvSpec *spec);
/* Whether @spec is given host devices (pci_devices or gpu). */
gboolean mv_spec_has_host_devices (const MvSpec *spec);
/* Whether @spec mounts a volume. */
gboolean mv_spec_mounts_volumes (const MvSpec *spec);
/* Whether @wanted has every host device @current has, each in the same
 * place (its PCI devices first, in order, and its GPU), and more. */
gboolean mv_spec_adds_host_devices (const MvSpec *current, const MvSpec *wanted);
/* The virtio-fs tag of mounts[@index], a directory mount: "mvfs0" for the
 * first directory mount, "mvfs1" for the next, in mount order; NULL for
 * a mount of another type. */
#define MV_DIRECTORY_TAG_PREFIX "mvfs"
char    *mv_spec_directory_tag (const MvSpec *spec, guint index);

/* ---- the guest metadata document (spec-metadata.c) ---- */

/* What the VMM's metadata service serves the guest:
 * {"latest":{"meta-data":{"hostname","public-keys","attributes"},
 * "user-data"}}, the custom metadata at latest/meta-data/attributes. */
JsonNode *mv_spec_metadata_document (const MvSpec *spec);
/* Its size, compact: what MV_METADATA_DOCUMENT_MAX_BYTES bounds. */
gsize     mv_spec_metadata_document_size (const MvSpec *spec);

/* A temporary console key (seed 004): the public half of a one-time
 * secret that the guest's agent lets open one login session as @user.
 * The secret is 32 random bytes; the key is "sha256:" and the lower-case
 * hexadecimal SHA-256 digest of them. */
typedef struct {
  char   *key;
  char   *user;
  gint64  expires;   /* seconds since the epoch */
} MvConsoleKey;

/* A console key's secret: lower-case hexadecimal digits, as the agent
 * takes it (guest/protocol.h). */
#define MV_CONSOLE_SECRET_CHARS 64

void      mv_console_key_free (MvConsoleKey *key);
/* The document with @keys (MvConsoleKey*; NULL or empty: none) at
 * latest/meta-data/console-keys, as [{"key","user","expires"}, ...]. */
JsonNode *mv_spec_metadata_document_with_keys (const MvSpec *spec, const GPtrArray *keys);
/* What @keys add to the document's size: MV_CONSOLE_KEYS_MAX_BYTES
 * bounds it. */
gsize     mv_console_keys_size (const GPtrArray *keys);
