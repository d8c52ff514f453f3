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
/* What @req->spec boots as on @starter, its files in @req->runtime_dir. */
MvVmSpec *mv_runtime_vm_spec_new (MvStarter *starter, const MvRuntimeRequest *req);

/* ---- readiness (runtime-readiness.c) ---- */

/* Waits up to @timeout_s until the guest of @vm is ready as @readiness
 * (and @readiness_text, for the console) says, looking at the console
 * from @console_offset on. MV_ERROR_INVALID_STATE if @vmm ends first or
 * time runs out, MV_ERROR_UNAVAILABLE once @cancellable is cancelled; the VMM is then left for the caller to end. */
gboolean  mv_runtime_wait_ready (MvHypervisor *hv, const MvProcess *vmm, const MvVmSpec *vm,
                                 MvReadiness readiness, const char *readiness_text,
                                 goffset console_offset, guint timeout_s,
                                 GCancellable *cancellable, GError **error);

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
/* A watch that has fired or was removed is ignored. */
void              mv_runtime_watches_remove (MvRuntimeWatches *watches, guint watch_id);
