/* Runtime: how a machine's guest is booted, stopped, frozen and watched.
 * Filled in by the hypervisor backends (src/hypervisor/) and by test
 * runtimes. Contract:
 * - every operation but watch, unwatch and usage blocks and is called from
 *   a worker thread, at most one at a time per machine, never two for one
 *   machine at once;
 * - @req and what it points to belong to the caller and are not shared
 *   with any other thread for the duration of the call (the VMM identity
 *   is a deep copy);
 * - a failed operation returns FALSE (or NULL) with a GError of MV_ERROR
 *   saying what went wrong; it leaves no process it started behind, except
 *   where an operation says otherwise. */
#pragma once
#include "core/image-config.h"
#include "core/spec.h"
#include "core/state.h"

#include <gio/gio.h>

typedef struct _MvRuntime MvRuntime;

/* One of a guest's virtio-blk disks. A guest sees them as /dev/vda,
 * /dev/vdb, ... in the order mv_spec_blocks() gives (core/host/blocks.c):
 * the image, the overlay disk, the spec's disks, then its volumes. */
typedef enum {
  MV_BLOCK_IMAGE,      /* the image's root file system: read-only, shared */
  MV_BLOCK_OVERLAY,    /* the machine's own disk, where its changes to the root go */
  MV_BLOCK_DISK,       /* spec->disks[index] */
  MV_BLOCK_VOLUME,     /* the volume spec->mounts[index] names */
} MvBlockRole;

typedef struct {
  MvBlockRole role;
  guint       index;       /* DISK: in spec->disks; VOLUME: in spec->mounts */
  char       *path;        /* on the host; NULL until the storage layer fills it in */
  gboolean    read_only;
} MvBlock;

/* What a machine holds on its network (network.h), for the VMM and for
 * the guest to be configured with. */
typedef struct {
  char  *network_id;
  char  *tap_device;           /* the TAP the VMM is given */
  char  *mac_address;
  char  *address;              /* the guest's address, CIDR notation */
  char  *gateway;              /* dotted quad; also the guest's DNS server */
  guint  mtu;                  /* 0: the default, 1500 */
} MvNetworkAttachment;

void mv_network_attachment_free (MvNetworkAttachment *attachment);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (MvNetworkAttachment, mv_network_attachment_free)

/* One machine, as every host layer is told of it. */
typedef struct {
  const char   *machine_id;
  const MvSpec *spec;
  const char   *runtime_dir;   /* <runtime>/machines/<id>, exists, 0700 */
  /* start and restore: @runtime_dir was made for this start, so no
   * process (an interrupted start's VMM) can be at work in it. */
  gboolean      runtime_dir_new;
  JsonObject   *vmm;           /* identity recorded at start, or NULL */
  /* Cancelled when the machine is deleted by force: a start that waits
   * for its guest gives up (and ends what it started). May be NULL. */
  GCancellable *cancellable;
  /* The config of the image the spec is pinned to: the workload's
   * defaults, which the spec's fields override. NULL: none. */
  const MvImageConfig *image_config;
  /* start and restore: the guest's disks as the storage layer readied
   * them (MvBlock*, in the guest's order). NULL elsewhere. */
  GPtrArray    *blocks;
  /* start and restore: the machine's interface on its network, NULL if
   * it is on none. NULL elsewhere. */
  const MvNetworkAttachment *network;
  /* start and restore: the VMM has no network rate limiter of its own;
   * the network layer limits its TAP. */
  gboolean      host_limits_network;
  /* The machine's temporary console keys (MvConsoleKey*), which its
   * guest's metadata document carries; NULL: none. */
  const GPtrArray *console_keys;
  /* start: boots a warm template for machines like @spec's, with its
   * root alone and nothing of the machine (docs/agent-protocol.md,
   * Templates), ready once its agent is. Needs microvmd's agent in the
   * guest: MV_ERROR_UNSUPPORTED otherwise. */
  gboolean      build_template;
  /* restore: the state is a template's: the guest is told who it is,
   * then given its configuration, and waited for as a start waits. */
  gboolean      from_template;
} MvRuntimeRequest;

typedef enum {
  MV_VMM_GONE,
  MV_VMM_RUNNING,
  MV_VMM_PAUSED,
} MvVmmState;

/* What a machine's VMM has used so far (seed 000, RuntimeUsage), for the
 * idle judgement and the metrics sampler. A field it cannot tell is 0. */
typedef struct {
  guint64 cpu_ns;              /* CPU time of the VMM and its threads */
  guint64 memory_bytes;        /* resident memory now */
  guint64 disk_read_bytes;
  guint64 disk_write_bytes;
} MvRuntimeUsage;

/* A failure's message: its first line is the reason, shown to everyone
 * (StateError); what follows it (the console's and the VMM's last lines)
 * only to callers allowed to read the machine's console. */

/* A command to run in a running guest, through its agent. */
/* A resize of a running guest: what it has, what it is to have. */
typedef struct {
  guint   from_vcpus, vcpus;
  guint64 from_memory_bytes, memory_bytes;
} MvRuntimeResize;

typedef struct {
  const char *const *argv;       /* at least one */
  const char *const *env;        /* "KEY=VALUE", NULL-terminated; may be NULL */
  const char        *user;       /* NULL: root */
  const char        *working_dir;
  gboolean           tty;
  guint              rows, columns;
  const char        *console_key;  /* a login session's console key secret; NULL: none */
} MvRuntimeExec;

/* What a guest's agent says, as it says it: one of the three is set. */
typedef struct {
  const char *agent_version;     /* the agent answered; "" if it gave no version */
  const char *health;            /* the health check's status changed: "starting", ... */
  guint       health_failing_streak;
  const char *health_output;
  gboolean    usage;             /* what the guest's CPUs have done since it booted */
  guint64     cpu_busy_ticks;
  guint64     cpu_total_ticks;   /* of all its CPUs */
  guint       cpus;
} MvGuestEvent;

/* Called on the main thread for what the guests' agents say. */
typedef void (*MvGuestEventFunc) (const char *machine_id, const MvGuestEvent *event,
                                  gpointer user_data);

/* Called on the main thread when a watched VMM ends by itself. */
typedef void (*MvRuntimeExitFunc) (const char *machine_id, gboolean has_exit_code,
                                   int exit_code, const char *reason, gpointer user_data);

struct _MvRuntime {
  const char *type;
  gpointer    data;
  /* The VMM limits a guest's network traffic itself (its rate limiters on
   * the wire); otherwise the network layer does, on the TAP. */
  gboolean    limits_network;
  /* What the hypervisor can do beyond booting a guest, by name (seed 003,
   * Capabilities; introspection/org.microvmd1.Manager.xml lists them),
   * NULL-terminated; NULL: nothing. */
  const char *const *capabilities;

  /* The hypervisor's version, asked once at startup. */
  char       *(*version) (MvRuntime *rt, GError **error);
  /* Main thread, cheap (a few stat calls); may be NULL: refuses a spec
   * this runtime will not run on this host, such as a host path outside
   * the directories machines may use, with MV_ERROR_INVALID_ARGUMENT (or
   * MV_ERROR_UNSUPPORTED) naming the field. Called at create and update,
   * before anything is recorded. */
  gboolean    (*check) (MvRuntime *rt, const MvSpec *spec, GError **error);
  /* Boots the guest as @req->spec says and waits for its readiness;
   * returns the VMM identity to record. */
  JsonObject *(*start) (MvRuntime *rt, const MvRuntimeRequest *req, GError **error);
  /* Graceful unless @force; when it returns TRUE the VMM is gone. Ends
   * whatever an interrupted start left serving, recorded or not. */
  gboolean    (*stop) (MvRuntime *rt, const MvRuntimeRequest *req, gboolean force, GError **error);
  gboolean    (*pause) (MvRuntime *rt, const MvRuntimeRequest *req, GError **error);
  gboolean    (*resume) (MvRuntime *rt, const MvRuntimeRequest *req, GError **error);
  /* What the recorded VMM is doing now (recovery, and after a failed
   * standby). May wait for a VMM that is slow to answer. */
  MvVmmState  (*probe) (MvRuntime *rt, const MvRuntimeRequest *req);
  /* Releases everything the runtime holds for the machine but its VMM. */
  gboolean    (*destroy) (MvRuntime *rt, const MvRuntimeRequest *req, GError **error);
  /* Main thread only, never blocks: notice the VMM ending by itself. */
  guint       (*watch) (MvRuntime *rt, const char *machine_id, JsonObject *vmm,
                        MvRuntimeExitFunc func, gpointer user_data);
  void        (*unwatch) (MvRuntime *rt, guint watch_id);
  /* Freezes the guest into files in @state_dir (empty, exists) and ends
   * its VMM. On failure the VMM may still run: the caller probes it. */
  gboolean    (*save) (MvRuntime *rt, const MvRuntimeRequest *req, const char *state_dir,
                       GError **error);
  /* Writes the running or paused guest's state (its memory and devices)
   * into @state_dir (empty, exists) in the form save() writes, but keeps
   * the VMM: the guest is left paused, so that the caller can copy its
   * disks as they are at the same moment, then resume it (or not).
   * MV_ERROR_UNAVAILABLE if it cannot be taken yet but can in a moment
   * (a guest restored moments ago whose memory is still being loaded);
   * on any failure the guest is left as it was, running or paused.
   * May be NULL: the runtime cannot snapshot a guest it keeps. */
  gboolean    (*snapshot) (MvRuntime *rt, const MvRuntimeRequest *req, const char *state_dir,
                           GError **error);
  /* What a warm template for @req's machine (@req->blocks readied)
   * depends on, as text that is the same for two machines exactly when a
   * template of one can stand for the other: the hypervisor and its
   * version, the guest's kernel and initramfs (by path, size, change time
   * and inode), command line, vCPUs and memory, and its devices' shape
   * (each disk's role and, for a shared one, which file). Never a
   * machine's own name, address, disk or workload. MV_ERROR_UNSUPPORTED,
   * naming the field, for a machine no template can stand for (one on a
   * network, a writable root disk, directory or volume mounts, a guest
   * without microvmd's agent or whose init is systemd). Worker thread.
   * NULL: none can. */
  char       *(*warm_inputs) (MvRuntime *rt, const MvRuntimeRequest *req, GError **error);
  /* Starts a fresh VMM from what save() or snapshot() wrote and lets the
   * guest run on; the files are kept if it fails. The state may be of
   * another machine (a fork): the VMM is given @req's disks, TAP, MAC,
   * console and agent channel in place of those the state was taken
   * with. Returns the new VMM's identity. */
  JsonObject *(*restore) (MvRuntime *rt, const MvRuntimeRequest *req, const char *state_dir,
                          GError **error);
  /* What the VMM has used so far. Main thread; cheap (reads /proc). */
  gboolean    (*usage) (MvRuntime *rt, const MvRuntimeRequest *req, MvRuntimeUsage *usage,
                        GError **error);
  /* Gives the running guest @resize's vCPUs and memory (seed 003,
   * ResizeVMMemory and ResizeVMCPU), each only if it differs from what
   * the guest has; memory in MV_MEMORY_STEP_BYTES steps within what it
   * booted with and set aside. MV_ERROR_INVALID_ARGUMENT or
   * MV_ERROR_UNSUPPORTED: refused before anything changed; any other
   * error may come after a part was taken. Worker thread. NULL: the
   * runtime cannot resize. */
  gboolean    (*resize) (MvRuntime *rt, const MvRuntimeRequest *req,
                         const MvRuntimeResize *resize, GError **error);
  /* Gives the running guest the host devices @req->spec has and @booted
   * (the spec it runs with) lacks, which follow those in order, one at a
   * time; *@added counts those it took, before any error (0: nothing
   * changed). Worker thread. NULL: the runtime cannot. */
  gboolean    (*add_devices) (MvRuntime *rt, const MvRuntimeRequest *req, const MvSpec *booted,
                              guint *added, GError **error);
  /* Attaches to the running guest's serial console: a connected socket
   * that reads what the guest prints from now on and, if *@writer came
   * back TRUE, types into it (one writer at a time: whoever asks while
   * another types is given a reader, whose writes fail with EPIPE).
   * Worker thread (only @req's machine_id and runtime_dir are set);
   * answered by the console's holder, which outlives the daemon, within
   * a second (hypervisor/console.h). NULL: the runtime has no console. */
  int         (*open_console) (MvRuntime *rt, const MvRuntimeRequest *req, gboolean *writer,
                               GError **error);

  /* The guest's agent (docs/agent-protocol.md); all may be NULL for a
   * runtime whose guests have none. Main thread, never blocking. */
  /* Keeps in touch with the agent of the running guest of @req (copied)
   * until detach_guest(): hears its exit report (which the watch's end
   * then carries), its health, and gives it @req->spec's configuration
   * if it asks. A guest without microvmd's agent is left alone. */
  void        (*attach_guest) (MvRuntime *rt, const MvRuntimeRequest *req);
  /* Whether @spec's guest boots with microvmd's agent (which sends the
   * workload's output, among the rest). NULL: none does. */
  gboolean    (*has_agent) (MvRuntime *rt, const MvSpec *spec);
  void        (*detach_guest) (MvRuntime *rt, const char *machine_id);
  /* @req->spec's hostname, keys or metadata changed: the running guest
   * is told at once (and its metadata service, where it has one). */
  gboolean    (*update_guest) (MvRuntime *rt, const MvRuntimeRequest *req, GError **error);
  /* The attached guest was restored from a frozen state, maybe another
   * machine's: its agent is given @req's identity (hostname, the network
   * interface's MAC, address, gateway, MTU and DNS, the metadata) and
   * fresh entropy from the host for the guest kernel's random number
   * generator, which reseeds, so that no two guests restored from one
   * state share random state. Queued until the agent answers; a guest
   * without microvmd's agent is left alone. */
  gboolean    (*reidentify_guest) (MvRuntime *rt, const MvRuntimeRequest *req, GError **error);
  /* Starts @exec in the attached guest; @fds as mv_agent_session_exec()
   * gives them: stdin, stdout, stderr, status. MV_ERROR_INVALID_STATE if
   * its agent has not answered. */
  gboolean    (*exec) (MvRuntime *rt, const char *machine_id, const MvRuntimeExec *exec,
                       int fds[4], GError **error);
  /* Who hears the agents' events; set once, before any attach_guest(). */
  void        (*set_guest_listener) (MvRuntime *rt, MvGuestEventFunc func, gpointer user_data);
};
