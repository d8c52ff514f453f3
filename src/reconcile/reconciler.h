/* The reconciler: owns the table of machines and moves each towards what
 * is desired of it, one step at a time, driving the host through core's
 * interfaces (core/host/) in worker threads. It knows no bus: what
 * happens is reported to an observer, on the main thread. */
#pragma once
#include "machine.h"
#include "core/host/host.h"
#include "core/metrics.h"
#include "core/snapshot.h"
#include "core/event.h"
#include "core/op-stats.h"
#include "core/capacity.h"

/* How the reconciler tells time and waits; tests inject their own. */
typedef struct {
  gint64 (*real_time) (gpointer data);        /* µs since the epoch; also read by workers */
  gint64 (*monotonic_time) (gpointer data);   /* µs */
  guint  (*timeout_add) (guint ms, GSourceFunc func, gpointer func_data, gpointer data);
  void   (*source_remove) (guint id, gpointer data);
  gpointer data;
} MvClock;

/* GLib's clocks and main context. */
const MvClock *mv_clock_default (void);

/* Told of everything that happens to machines, on the main thread. */
typedef struct {
  /* @props (MvMachineProp bits) of @machine changed. */
  void (*changed) (MvMachine *machine, guint props, gpointer data);
  /* What changed of @machine while its status was being written off
   * the main loop is on disk now, and may be announced: until this is
   * called, changes reported while machine->record_writes is not zero are
   * the reconciler's, not yet the world's. */
  void (*durable) (MvMachine *machine, gpointer data);
  /* A machine was defined (not called for those loaded at startup). */
  void (*added) (MvMachine *machine, gpointer data);
  /* @machine is at rest for now: its wish reached (@failure NULL) or
   * given up on (@failure says why). A failure is about what was desired
   * up to @generation (the desired generation); a wish made since is still
   * pending. Whoever waits on it may be answered. */
  void (*settled) (MvMachine *machine, const GError *failure, guint64 generation,
                   gpointer data);
  /* @machine's records are gone; it is freed when this returns. */
  void (*removed) (MvMachine *machine, gpointer data);
  /* A snapshot was taken (not called for those loaded at startup), or is
   * about to be deleted: it is found until this returns, then no more. */
  void (*snapshot_added) (const MvSnapshot *snapshot, gpointer data);
  void (*snapshot_removed) (const MvSnapshot *snapshot, gpointer data);
  /* A warm template was built (not called for those loaded at startup),
   * or is gone: found until this returns, then no more. */
  void (*warm_added) (const MvSnapshot *template, gpointer data);
  void (*warm_removed) (const MvSnapshot *template, gpointer data);
  /* Something happened to a machine (core/event.h): @event is filled in
   * but for its sequence, which is the recorder's to give; it is the
   * caller's, and valid only during the call. */
  void (*event) (const MvEvent *event, gpointer data);
  gpointer data;
} MvObserver;

typedef struct {
  guint  standby_min_seconds;   /* shortest standby_after_seconds accepted */
  guint  idle_sample_seconds;   /* how often idleness is judged */
  guint  idle_cpu_percent;      /* below this share of one CPU, a guest is idle */
  guint  restart_backoff_ms;    /* first restart delay; doubles each time */
  guint  resync_seconds;        /* how often every machine is looked at again */
  /* Whether a machine is being migrated; such machines are left alone. */
  gboolean (*migration_guard) (const char *machine_id, gpointer user_data);
  gpointer migration_guard_data;
  /* What machines may be given of the host; zero limits nothing. */
  MvCapacity capacity;
  /* How long a console token lives; 0: no console bridge, none is given. */
  guint  console_token_seconds;
  /* Login sessions run as root rather than as the workload's user. */
  gboolean console_login_root;
} MvReconcilerOptions;

/* @host, @observer and @clock (NULL: the default) outlive the reconciler. */
MvReconciler *mv_reconciler_new (const MvHost *host, const MvReconcilerOptions *options,
                                 const MvObserver *observer, const MvClock *clock);
/* Machines still waited on are settled with MV_ERROR_UNAVAILABLE first. */
void          mv_reconciler_free (MvReconciler *reconciler);

/* Adds a machine loaded at startup; @config and @status are taken. */
MvMachine    *mv_reconciler_add_loaded (MvReconciler *reconciler, MvConfig *config,
                                        MvStatus *status);
/* A machine whose records were found invalid at startup: it is not
 * loaded, and what it holds on the host (its network address) is left
 * alone. */
void          mv_reconciler_add_invalid (MvReconciler *reconciler, const char *machine_id);
/* Recovers every loaded machine (seed 002, Recover): adopts what runs,
 * finishes or undoes interrupted operations, probing VMMs in worker
 * threads, in parallel; then gives back what the host's networks hold
 * for machines that are gone or do not run (seed 002, Networks.Reconcile),
 * warns of deprecated hypervisor versions and applies StartOnBoot. @done runs on the main thread once all is done. */
void          mv_reconciler_recover (MvReconciler *reconciler, void (*done) (gpointer data),
                                     gpointer data);
/* Looks at every machine, and keeps looking now and then (resync and
 * idle sampling timers). */
void          mv_reconciler_run (MvReconciler *reconciler);
/* Whether a step is under way for any machine, or anything else the
 * reconciler runs off the main loop (a saved state's deletion): until it
 * is not, the host layers are still in use. */
gboolean      mv_reconciler_busy (MvReconciler *reconciler);

/* The table. */
MvMachine    *mv_reconciler_lookup (MvReconciler *reconciler, const char *id);
MvMachine    *mv_reconciler_find (MvReconciler *reconciler, const char *name_or_id);
/* Seed 002, LookupHost: the addresses (char*, dotted quads) of the
 * machines on network @network (a name) whose name or hostname is @name,
 * compared without regard to case, among those that hold resources
 * (starting, running, paused). */
GPtrArray    *mv_reconciler_lookup_host (MvReconciler *reconciler, const char *network,
                                         const char *name);
/* LookupAddr: the name of the machine on @network holding @address, and
 * its hostname if that is another, if it holds resources. */
GPtrArray    *mv_reconciler_lookup_addr (MvReconciler *reconciler, const char *network,
                                         const char *address);
/* Every machine (not gone), sorted by name; free the array only. */
GPtrArray    *mv_reconciler_list (MvReconciler *reconciler);
guint         mv_reconciler_count (MvReconciler *reconciler);
/* The reconciler's monotonic clock, µs. */
gint64        mv_reconciler_monotonic (MvReconciler *reconciler);
/* The IDs (char*) of the machines whose logs may have grown since @since
 * (mv_reconciler_monotonic(); 0: ever): those that hold a VMM or have a
 * step under way, those whose step began or ended, or whose VMM's end
 * was heard, since, and those whose records are invalid (left alone). */
GPtrArray    *mv_reconciler_active_since (MvReconciler *reconciler, gint64 since);
const MvHost *mv_reconciler_host (MvReconciler *reconciler);

/* Requests. Each checks and records the change of what is desired; it
 * returns FALSE with an error of MV_ERROR (and changes nothing) if the
 * request cannot be taken. Then the caller notes what it waits for (the
 * desired state and generation) and calls mv_reconciler_kick(): the
 * outcome may be settled() at once. */
void          mv_reconciler_kick (MvMachine *machine);


/* CreateMachine: @spec is parsed; it is validated here. A spec with the
 * ID of an existing machine and the same fingerprint is that machine
 * (*@existed); with another one, MV_ERROR_CONFLICT. */
MvMachine    *mv_reconciler_define (MvReconciler *reconciler, MvSpec *spec /* owned */,
                                    gboolean start, gboolean *existed, GError **error);

/* Told on the main thread how a create ended: @machine, or @error. */
typedef void (*MvDefineFunc) (MvMachine *machine, gboolean existed, const GError *error,
                              gpointer user_data);

/* CreateMachine of a spec that may name an image (seed 002, Create): the
 * spec is validated, and its name (and ID) checked, before anything is
 * pulled; then the image is had as @policy says, in a worker thread, and
 * the machine is recorded pinned to its digest, with its config. Nothing
 * is recorded if the image cannot be had. A spec without an image is
 * checked as mv_reconciler_define() does, and its records are written in
 * a worker thread, its name held meanwhile; @func may be called before
 * this returns (a refusal, a retry of an existing machine).
 * @progress (may be NULL) is called from the pulling thread. */
void          mv_reconciler_define_async (MvReconciler *reconciler, MvSpec *spec /* owned */,
                                          gboolean start, MvPullPolicy policy,
                                          MvPullProgressFunc progress, gpointer progress_data,
                                          MvDefineFunc func, gpointer user_data);
/* Gives up every pull under way (the daemon is leaving): their creates
 * fail with G_IO_ERROR_CANCELLED, soon. */
void          mv_reconciler_cancel_pulls (MvReconciler *reconciler);

typedef enum {
  MV_REQUEST_START,
  MV_REQUEST_STOP,
  MV_REQUEST_PAUSE,
  MV_REQUEST_RESUME,
  MV_REQUEST_RESTART,
  MV_REQUEST_STANDBY,
  MV_REQUEST_DELETE,          /* refused while the machine is active */
  MV_REQUEST_FORCE_DELETE,    /* also gives up a step under way */
} MvRequest;

gboolean      mv_reconciler_request (MvReconciler *reconciler, MvMachine *machine,
                                     MvRequest request, GError **error);
/* The same, with what the request changes written off the main loop: a
 * request refused at once returns FALSE with @error, and @done is not
 * called; otherwise @done is called on the main thread once the change
 * is on disk (@error NULL) or could not be written (the machine left as
 * it was), and only then is the machine acted on. @machine is NULL if a
 * step under way deleted it meanwhile. While a request's change is being
 * written, take no other request for that machine: wait for @done. */
typedef void (*MvRequestDone) (MvMachine *machine, const GError *error, gpointer data);
gboolean      mv_reconciler_request_async (MvReconciler *reconciler, MvMachine *machine,
                                           MvRequest request, MvRequestDone done, gpointer data,
                                           GError **error);
/* SetDesiredState: running, paused or stopped. */
gboolean      mv_reconciler_set_desired (MvReconciler *reconciler, MvMachine *machine,
                                         MvDesired desired, GError **error);
/* ---- remote consoles (console.c) ---- */

/* Console tokens not used yet, at most, per machine and per caller. */
#define MV_CONSOLE_TOKENS_PER_MACHINE 128
#define MV_CONSOLE_TOKENS_PER_CALLER  128

typedef enum {
  MV_CONSOLE_SERIAL,   /* the guest's serial console */
  MV_CONSOLE_LOGIN,    /* a login shell through the guest's agent */
} MvConsoleMode;

/* What a token opens, once taken. */
typedef struct {
  char          *machine_id;
  MvConsoleMode  mode;
  char          *user;     /* login: who the session runs as */
  char          *secret;   /* login: its console key's secret, for the agent */
  char          *key;      /* login: the key, "sha256:..." */
} MvConsoleGrant;

void          mv_console_grant_free (MvConsoleGrant *grant);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (MvConsoleGrant, mv_console_grant_free)

/* Machine.RequestConsole: a token for one @mode session into running
 * @machine for the caller @uid, and when it expires (µs since the epoch);
 * MV_ERROR_RESOURCE_EXHAUSTED past the bounds or with no room for the
 * console key, nothing changed. */
gboolean      mv_reconciler_request_console (MvMachine *machine, MvConsoleMode mode, guint32 uid,
                                             char **token, gint64 *expires_at, GError **error);
/* The console bridge takes @token for a session: it is used from then on.
 * MV_ERROR_INVALID_ARGUMENT for a token that is forged, used or expired
 * (the message says which), or of another machine than @machine (its ID
 * or name; NULL: whichever the token's is), which leaves it unused;
 * MV_ERROR_INVALID_STATE if its machine does not run. */
MvConsoleGrant *mv_reconciler_take_console (MvReconciler *reconciler, const char *token,
                                            const char *machine, GError **error);
/* The session @grant opened has ended: its console key goes. */
void          mv_reconciler_console_ended (MvReconciler *reconciler, const MvConsoleGrant *grant);

/* A change to a running machine (Update, Resize): called with @machine
 * (NULL if it was deleted meanwhile) once it is made, or with its error. */
typedef void (*MvLiveChangeFunc) (MvMachine *machine, const GError *error, gpointer user_data);
/* Update: @spec is parsed; validated here. A frozen guest that cannot
 * wake into the new shape is discarded. Host devices added to a running
 * machine are plugged into its guest (device-adds.c), and @func is
 * called once they are; otherwise before this returns. FALSE, @func not
 * called and nothing changed if it is refused at once. */
gboolean      mv_reconciler_update (MvReconciler *reconciler, MvMachine *machine,
                                    MvSpec *spec /* owned */, MvLiveChangeFunc func,
                                    gpointer data, GError **error);
/* Runs @exec in @machine's running guest through its agent (fds as
 * MvRuntime.exec gives them). MV_ERROR_INVALID_STATE unless it runs. */
gboolean      mv_reconciler_exec (MvMachine *machine, const MvRuntimeExec *exec, int fds[4],
                                  GError **error);
/* Resizes running @machine to @vcpus and @memory_bytes (resize.c says
 * how); FALSE and nothing changed if it is refused at once. */
gboolean      mv_reconciler_resize (MvReconciler *reconciler, MvMachine *machine, guint32 vcpus,
                                    guint64 memory_bytes, MvLiveChangeFunc func, gpointer data,
                                    GError **error);
/* Whether @machine's guest has microvmd's agent, as its spec and its
 * hypervisor say: what StreamLogs's source "workload" needs. */
gboolean      mv_reconciler_has_agent (MvMachine *machine);
/* Called with the console's socket (the callee's to close) and whether
 * it may type, or -1 and the error. */
typedef void (*MvConsoleFunc) (int fd, gboolean writer, const GError *error,
                               gpointer user_data);
/* Attaches to @machine's serial console (MvRuntime.open_console) in a
 * worker; FALSE at once (MV_ERROR_INVALID_STATE unless the guest runs or
 * is paused, MV_ERROR_UNSUPPORTED without a console), else @func later. */
gboolean      mv_reconciler_open_console (MvMachine *machine, MvConsoleFunc func, gpointer data,
                                          GError **error);
gboolean      mv_reconciler_rename (MvReconciler *reconciler, MvMachine *machine,
                                    const char *name, GError **error);
/* A traffic event (RestoreAfterTraffic): *@waking is TRUE if it woke the
 * machine from standby; FALSE if it was stale or there was nothing to do. */
gboolean      mv_reconciler_traffic (MvReconciler *reconciler, MvMachine *machine,
                                     guint64 sequence, gboolean *waking, GError **error);

/* Whether the reconciliation of @machine is done with what was desired at
 * @generation: reached, superseded (another wish since), or gone. */
typedef enum {
  MV_WISH_PENDING,
  MV_WISH_REACHED,
  MV_WISH_SUPERSEDED,
} MvWishOutcome;

MvWishOutcome mv_machine_wish_outcome (const MvMachine *machine, MvDesired target,
                                       guint64 generation);

/* Snapshots (seed 002). Each operation below holds the machine it works on
 * as a step does: a machine busy with one is refused (INVALID_STATE). */

/* Adds the snapshots loaded at startup (MvSnapshot*, copied). */
void          mv_reconciler_add_snapshots (MvReconciler *reconciler, GPtrArray *snapshots);
/* Every snapshot, by name; free the array only. */
GPtrArray    *mv_reconciler_list_snapshots (MvReconciler *reconciler);
const MvSnapshot *mv_reconciler_lookup_snapshot (MvReconciler *reconciler, const char *id);
const MvSnapshot *mv_reconciler_find_snapshot (MvReconciler *reconciler, const char *name_or_id);
/* The digests of the images machines are pinned to and snapshots' guests
 * booted from (seed 002, ImagesInUse): what PruneImages keeps. */
char        **mv_reconciler_images_in_use (MvReconciler *reconciler);
/* The keys of the warm templates booted from an image whose digest is
 * not in @keep_digests: what PruneImages removes with the images. */
char        **mv_reconciler_warm_unused (MvReconciler *reconciler,
                                         const char *const *keep_digests);
/* Blocks, any thread: removes the files of the warm template @key. */
gboolean      mv_reconciler_remove_warm (MvReconciler *reconciler, const char *key,
                                         GError **error);
/* Main thread: the templates @keys (char*) are removed: the table
 * follows, and the observer hears of each one gone. */
void          mv_reconciler_forget_warm (MvReconciler *reconciler, GPtrArray *keys);
/* Warm templates (warm.c), each a snapshot of no machine whose ID is its
 * key. Builds the template of @spec's shape (taken; validated as a
 * create's, its image pulled if the host has none of that reference) and
 * calls @done on the main thread with its key, also when one of that key
 * was there already, or with why it could not be built. */
typedef void (*MvWarmBuilt) (const char *key, const GError *error, gpointer data);
/* How many templates a host keeps, built and being built: past it, a
 * first start builds none and BuildWarmImage is RESOURCE_EXHAUSTED. */
#define MV_WARM_TEMPLATES_MAX 64
void          mv_reconciler_build_warm_image (MvReconciler *reconciler, MvSpec *spec,
                                              MvWarmBuilt done, gpointer data);
/* The templates loaded at startup (copied). */
void          mv_reconciler_add_warm (MvReconciler *reconciler, GPtrArray *templates);
const MvSnapshot *mv_reconciler_lookup_warm (MvReconciler *reconciler, const char *key);
/* Every known template (borrowed), in no order; free the array. */
GPtrArray    *mv_reconciler_list_warm (MvReconciler *reconciler);
/* Blocks: removes, with a warning, the warm templates among @templates
 * (as MvSnapshots.load() gives them) of a hypervisor version the host no
 * longer has or has deprecated, from the disk and from @templates. */
void          mv_warm_keep_runnable (MvSnapshots *warm, MvRuntimes *runtimes,
                                     GPtrArray *templates);

/* Told on the main thread how a snapshot operation ended: @snapshot (the
 * table's) or @error. */
typedef void (*MvSnapshotFunc) (const MvSnapshot *snapshot, const GError *error,
                                gpointer user_data);
/* ...or, for one that ends with a machine (a restore: @machine, NULL for
 * a delete), @error. */
typedef void (*MvSnapshotDoneFunc) (MvMachine *machine, const GError *error, gpointer user_data);

/* CreateSnapshot: a memory snapshot of a running, paused or standby
 * machine, a disk snapshot of a stopped one; @name "" for one after the
 * machine and the time. FALSE with an error (and nothing done) if it
 * cannot be taken; else @func is called once it is. */
gboolean      mv_reconciler_create_snapshot (MvReconciler *reconciler, MvMachine *machine,
                                             const char *name, MvSnapshotFunc func,
                                             gpointer user_data, GError **error);
/* RestoreSnapshot: puts the stopped machine a snapshot was taken of back
 * as it was; @func is called once its disk (and frozen guest) are back:
 * a memory snapshot's machine is then being started, and settles as a
 * Start does. */
gboolean      mv_reconciler_restore_snapshot (MvReconciler *reconciler, const char *snapshot_id,
                                              MvSnapshotDoneFunc func, gpointer user_data,
                                              GError **error);
/* ForkSnapshot and ForkInstance: defines a machine from the snapshot (or
 * from one of @source taken now and not kept) with the spec changes in
 * @fork_json, and calls @func once it is running (from memory) or stopped
 * (from a disk), or with the error once a failed fork is gone. */
void          mv_reconciler_fork_snapshot (MvReconciler *reconciler, const char *snapshot_id,
                                           const char *fork_json, MvDefineFunc func,
                                           gpointer user_data);
void          mv_reconciler_fork_machine (MvReconciler *reconciler, MvMachine *source,
                                          const char *fork_json, MvDefineFunc func,
                                          gpointer user_data);
/* DeleteSnapshot: gone from the table at once (snapshot_removed), its
 * files in a worker thread; @func is called once they are (with a NULL
 * machine). Refused while a restore or fork reads it. */
gboolean      mv_reconciler_delete_snapshot (MvReconciler *reconciler, const char *snapshot_id,
                                             MvSnapshotDoneFunc func, gpointer user_data,
                                             GError **error);

/* Capacity and admission (seed 002; reconcile/admission.c). Every start
 * (a boot, a restart by the restart policy, a wake from standby, a
 * restored or forked memory snapshot) is admitted first: one that does
 * not fit is refused with MV_ERROR_RESOURCE_EXHAUSTED and changes
 * nothing; a restart refused so is a failed start. */
const MvCapacity *mv_reconciler_capacity (MvReconciler *reconciler);
/* What @machine holds: its admitted size while it is starting, running
 * or paused, else nothing. */
MvResources   mv_machine_held (const MvMachine *machine);
/* What every machine holds between them. */
MvResources   mv_reconciler_held (MvReconciler *reconciler);
/* CheckResources: MV_ERROR_INVALID_ARGUMENT unless a machine of @wanted
 * could ever start here; else *@fits_now says whether it would now. */
gboolean      mv_reconciler_check_resources (MvReconciler *reconciler, const MvResources *wanted,
                                             gboolean *fits_now, GError **error);

/* The health statuses a guest's agent reports, in this order. */
#define MV_HEALTH_STATUS_COUNT 3
extern const char *const mv_health_statuses[MV_HEALTH_STATUS_COUNT + 1];

/* Seed 002, Usage: computed when asked. */
typedef struct {
  guint        by_state[MV_STATE_COUNT];
  guint        by_health[MV_HEALTH_STATUS_COUNT];  /* of machines whose health is checked */
  MvCapacity   capacity;
  MvResources  allocatable;
  MvResources  held;       /* by the holders between them */
  GPtrArray   *holders;    /* MvMachine*, borrowed: those that hold resources, by name */
} MvUsage;

MvUsage      *mv_reconciler_usage (MvReconciler *reconciler);
void          mv_usage_free (MvUsage *usage);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (MvUsage, mv_usage_free)

/* Stats (seed 002, Stats; reconcile/stats.c): what a machine's VMM uses
 * of the host, read at one moment. Totals are since the VMM started. */
typedef struct {
  gint64            started_at;    /* µs since the epoch: when the VMM started */
  gint64            read_at;       /* µs since the epoch */
  guint             vcpus;         /* held */
  guint64           memory_bytes;  /* held: the guest's memory */
  MvRuntimeUsage    usage;
  gboolean          has_network;   /* on a network, with its interface up */
  MvNetworkCounters network;
} MvMachineStats;

/* Main thread, cheap (reads /proc and the TAP's counters).
 * MV_ERROR_INVALID_STATE for a machine without a VMM; the runtime's error
 * if it cannot be read. */
gboolean      mv_reconciler_read_stats (MvMachine *machine, MvMachineStats *stats,
                                        GError **error);

/* Daily metrics (reconcile/metrics.c): a sample of every machine with a
 * VMM every @sample_seconds of the reconciler's clock, handed to @write
 * in a worker thread, one round at a time (a round still writing when
 * the next is due makes that one skipped). @write is given the machine's
 * state directory and the sample, and must not create that directory. */
typedef gboolean (*MvMetricsWriteFunc) (const char *machine_dir, const MvMetricsSample *sample,
                                        guint sample_seconds, gpointer data, GError **error);
typedef struct _MvMetricsSampler MvMetricsSampler;

MvMetricsSampler *mv_metrics_sampler_new (MvReconciler *reconciler, guint sample_seconds,
                                          MvMetricsWriteFunc write, gpointer data);
/* Stops sampling; a round still writing finishes in its thread. */
void              mv_metrics_sampler_free (MvMetricsSampler *sampler);
/* Whether a round is being written. */
gboolean          mv_metrics_sampler_busy (MvMetricsSampler *sampler);

/* What every step taken since the daemon started came to, by kind (its
 * phase), for the metrics endpoint; recorded as each step ends. */
const MvOpStats  *mv_reconciler_op_stats (MvReconciler *reconciler);
