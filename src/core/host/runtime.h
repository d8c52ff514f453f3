/* Runtime: how core drives a hypervisor. Declared here, filled in by the
 * backends (src/hypervisor/) and by test runtimes. Every operation but
 * watch/unwatch blocks and is called from a worker thread, at most one at
 * a time per machine. */
#pragma once
#include "core/spec.h"
#include "core/state.h"

typedef struct _MvRuntime MvRuntime;

typedef struct {
  const char   *machine_id;
  const MvSpec *spec;
  const char   *runtime_dir;   /* <runtime>/machines/<id>, exists, 0700 */
  JsonObject   *vmm;           /* identity recorded at start, or NULL */
} MvRuntimeRequest;

typedef enum {
  MV_VMM_GONE,
  MV_VMM_RUNNING,
  MV_VMM_PAUSED,
} MvVmmState;

/* Called on the main thread when a watched VMM ends by itself. */
typedef void (*MvRuntimeExitFunc) (const char *machine_id, gboolean has_exit_code,
                                   int exit_code, const char *reason, gpointer user_data);

struct _MvRuntime {
  const char *type;
  gpointer    data;

  char       *(*version) (MvRuntime *rt, GError **error);
  /* Boots the guest as @req->spec says; returns the VMM identity to record. */
  JsonObject *(*start) (MvRuntime *rt, const MvRuntimeRequest *req, GError **error);
  /* Graceful unless @force; when it returns TRUE the VMM is gone. */
  gboolean    (*stop) (MvRuntime *rt, const MvRuntimeRequest *req, gboolean force, GError **error);
  gboolean    (*pause) (MvRuntime *rt, const MvRuntimeRequest *req, GError **error);
  gboolean    (*resume) (MvRuntime *rt, const MvRuntimeRequest *req, GError **error);
  /* What the recorded VMM is doing now (used by recovery). */
  MvVmmState  (*probe) (MvRuntime *rt, const MvRuntimeRequest *req);
  /* Releases everything the runtime holds for the machine. */
  gboolean    (*destroy) (MvRuntime *rt, const MvRuntimeRequest *req, GError **error);
  /* Main thread only: notice the VMM ending by itself. */
  guint       (*watch) (MvRuntime *rt, const char *machine_id, JsonObject *vmm,
                        MvRuntimeExitFunc func, gpointer user_data);
  void        (*unwatch) (MvRuntime *rt, guint watch_id);
  /* Freezes the guest into files in @state_dir and ends its VMM. */
  gboolean    (*save) (MvRuntime *rt, const MvRuntimeRequest *req, const char *state_dir,
                       GError **error);
  /* Starts a fresh VMM from what save() wrote and lets the guest run on;
   * the files are kept if it fails. Returns the new VMM's identity. */
  JsonObject *(*restore) (MvRuntime *rt, const MvRuntimeRequest *req, const char *state_dir,
                          GError **error);
  /* The CPU time, in ns, the VMM has used so far (main thread; cheap). */
  gboolean    (*usage) (MvRuntime *rt, const MvRuntimeRequest *req, guint64 *cpu_ns,
                        GError **error);
};
