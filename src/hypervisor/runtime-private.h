/* The parts of the runtime adapter (runtime.c) that stand in files of
 * their own; nothing outside the adapter uses them. */
#pragma once
#include "runtime.h"

/* ---- the VM spec (runtime-vm-spec.c) ---- */

/* The agent's host end where the starter's VMM proxies vsock; where it
 * does not, the agent has MV_AGENT_SOCKET_NAME. */
#define MV_RUNTIME_VSOCK_SOCKET_NAME  "vsock.sock"

/* Where the starter's VMM serves its API in @runtime_dir. */
char     *mv_runtime_api_socket_path (MvStarter *starter, const char *runtime_dir);
char     *mv_runtime_console_path (const char *runtime_dir);
typedef struct _MvRuntimeGuests MvRuntimeGuests;

/* microvmd's own guest kernel and initramfs; NULL where not installed.
 * The kernels of [kernels] by name, for a spec's kernel_name. */
typedef struct {
  char       *kernel;
  char       *initramfs;
  GHashTable *kernels;     /* name -> path; NULL: none configured */
} MvGuestFiles;

/* What @req->spec boots as on @starter, its files in @req->runtime_dir;
 * @files where the spec names no kernel or initrd. */
MvVmSpec *mv_runtime_vm_spec_new (MvStarter *starter, const MvGuestFiles *files,
                                  const MvRuntimeRequest *req);

/* ---- guest agents (runtime-guest.c), main thread unless said ---- */

MvRuntimeGuests *mv_runtime_guests_new (MvStarter *starter);
void             mv_runtime_guests_free (MvRuntimeGuests *guests);
/* microvmd's guest kernel and initramfs (NULL: none installed). */
/* @kernels (name -> path, may be NULL) is referenced. */
void             mv_runtime_guests_set_kernels (MvRuntimeGuests *guests, GHashTable *kernels);
void             mv_runtime_guests_set_files (MvRuntimeGuests *guests, const char *kernel,
                                              const char *initramfs);
const MvGuestFiles *mv_runtime_guests_files (MvRuntimeGuests *guests);
/* Whether @spec's guest runs microvmd's agent: it boots microvmd's
 * initramfs, or says its readiness is the agent's. Any thread. */
gboolean         mv_runtime_guests_has_agent (MvRuntimeGuests *guests, const MvSpec *spec);
/* @spec's readiness with "auto" resolved. Any thread. */
MvReadiness      mv_runtime_guests_readiness (MvRuntimeGuests *guests, const MvSpec *spec);
MvAgentEnd       mv_runtime_guests_end (MvRuntimeGuests *guests);
void             mv_runtime_guests_set_listener (MvRuntimeGuests *guests, MvGuestEventFunc func,
                                                 gpointer data);
void             mv_runtime_guests_attach (MvRuntimeGuests *guests, const MvRuntimeRequest *req);
void             mv_runtime_guests_detach (MvRuntimeGuests *guests, const char *machine_id);
gboolean         mv_runtime_guests_update (MvRuntimeGuests *guests, const MvRuntimeRequest *req,
                                           GError **error);
/* The attached guest was restored: its agent is told @req's identity
 * with fresh entropy, once it answers (MvRuntime.reidentify_guest). */
gboolean         mv_runtime_guests_reidentify (MvRuntimeGuests *guests,
                                               const MvRuntimeRequest *req, GError **error);
/* The REIDENTIFY frame for @req's machine, with fresh entropy; any thread. */
GBytes          *mv_runtime_identity_frame (const MvRuntimeRequest *req, GError **error);
gboolean         mv_runtime_guests_exec (MvRuntimeGuests *guests, const char *machine_id,
                                         const MvRuntimeExec *exec, int fds[4], GError **error);
/* Any thread: the agent of @machine_id answered its start with
 * @agent_version (NULL: the start did not wait for an agent). The
 * machine's next attach reports it at once, so that the version is known
 * when the start is. */
void             mv_runtime_guests_heard_at_start (MvRuntimeGuests *guests,
                                                   const char *machine_id,
                                                   const char *agent_version);
/* What the agent of @machine_id said of its workload's end, once. */
gboolean         mv_runtime_guests_take_exit (MvRuntimeGuests *guests, const char *machine_id,
                                              gboolean *has_exit_code, int *exit_code,
                                              int *signal);

typedef enum {
  MV_GUEST_NO_AGENT,         /* the guest has no agent of microvmd's */
  MV_GUEST_NOT_ANSWERING,    /* it has, but the agent has not answered: still booting */
  MV_GUEST_ASKED,            /* the agent was asked to power the guest off */
} MvGuestAsked;

/* From a worker thread: asks @machine_id's agent to power its guest off,
 * through the main loop. */
MvGuestAsked     mv_runtime_guests_ask_poweroff (MvRuntimeGuests *guests, const char *machine_id);

/* ---- readiness (runtime-readiness.c) ---- */

/* Waits up to @timeout_s until the guest of @vm is ready as @readiness
 * (and @readiness_text, for the console) says, looking at the console
 * from @console_offset on. MV_ERROR_INVALID_STATE if @vmm ends first or
 * time runs out, MV_ERROR_UNAVAILABLE once @cancellable is cancelled; the VMM is then left for the caller to end.
 * With the agent's readiness, @agent_version (if not NULL) is set to the
 * version the agent gave ("" for none), and a guest restored from a
 * template is given @agent_identity, then @agent_config
 * (mv_agent_wait_ready()). */
gboolean  mv_runtime_wait_ready (MvHypervisor *hv, const MvProcess *vmm, const MvVmSpec *vm,
                                 MvReadiness readiness, const char *readiness_text,
                                 GBytes *agent_config, GBytes *agent_identity,
                                 goffset console_offset, guint timeout_s,
                                 GCancellable *cancellable, char **agent_version,
                                 GError **error);

/* ---- exit watches (runtime-watch.c) ---- */

/* The watches of one runtime over its VMMs' ends. Main thread only. */
typedef struct _MvRuntimeWatches MvRuntimeWatches;

MvRuntimeWatches *mv_runtime_watches_new (MvStarter *starter);
/* Drops every watch left, without calling them. */
void              mv_runtime_watches_free (MvRuntimeWatches *watches);
/* Calls @func once, from the main loop, when the VMM that @vmm records
 * ends (at once if it already has); returns the watch's ID. */
guint             mv_runtime_watches_add (MvRuntimeWatches *watches, const char *machine_id,
                                          JsonObject *vmm, MvRuntimeExitFunc func,
                                          gpointer user_data);
/* Called before a watch reports, to replace what the VMM's end says with
 * what the guest itself reported (its workload's exit). */
typedef void (*MvRuntimeExitFilter) (const char *machine_id, gboolean *has_exit_code,
                                     int *exit_code, char **reason, gpointer data);
void              mv_runtime_watches_set_filter (MvRuntimeWatches *watches,
                                                 MvRuntimeExitFilter filter, gpointer data);
/* A watch that has fired or was removed is ignored. */
void              mv_runtime_watches_remove (MvRuntimeWatches *watches, guint watch_id);
