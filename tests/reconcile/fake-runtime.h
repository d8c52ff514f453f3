/* A Runtime that keeps its VMMs in a table in memory, one per machine. A
 * test scripts failures of the next call of a kind, what the next probe
 * answers, and the CPU time a VMM has used; it makes a watched VMM end by
 * itself. The fake notes breaches of the Runtime contract (runtime.h): a
 * blocking call on the main thread, two calls for one machine at once, a
 * start beside a VMM that still runs. */
#pragma once
#include "core/host/runtime.h"
#include "fake-log.h"

typedef enum {
  FAKE_RUNTIME_START,
  FAKE_RUNTIME_STOP,
  FAKE_RUNTIME_PAUSE,
  FAKE_RUNTIME_RESUME,
  FAKE_RUNTIME_SAVE,
  FAKE_RUNTIME_RESTORE,
  FAKE_RUNTIME_DESTROY,
  FAKE_RUNTIME_PROBE,
  FAKE_RUNTIME_USAGE,
  FAKE_RUNTIME_N_CALLS,
} FakeRuntimeCall;

/* For fake_hold_arm(): hold the worker once @call has returned, before
 * the reconciler hears of it. */
#define FAKE_RUNTIME_AFTER(call) ((call) + FAKE_RUNTIME_N_CALLS)

typedef struct _FakeRuntime FakeRuntime;

FakeRuntime *fake_runtime_new (const char *type, FakeLog *log);
void         fake_runtime_free (FakeRuntime *fake);
MvRuntime   *fake_runtime_iface (FakeRuntime *fake);

/* The next @call fails with @message (MV_ERROR_FAILED); with @ends_vmm the
 * machine's VMM is gone afterwards, as when a save kills it. */
void         fake_runtime_fail_next (FakeRuntime *fake, FakeRuntimeCall call, const char *message,
                                     gboolean ends_vmm);
/* The next probe of @machine_id answers @state, whatever the table says. */
void         fake_runtime_script_probe (FakeRuntime *fake, const char *machine_id, MvVmmState state);
/* The thread the last probe ran on, and how many there were. */
GThread     *fake_runtime_probe_thread (FakeRuntime *fake);
guint        fake_runtime_probes (FakeRuntime *fake);
FakeHold    *fake_runtime_hold (FakeRuntime *fake);

/* A VMM of @machine_id in @state, as a daemon before this one left it;
 * returns its identity for the status record (the caller's). */
JsonObject  *fake_runtime_spawn (FakeRuntime *fake, const char *machine_id, MvVmmState state);
MvVmmState   fake_runtime_vmm_state (FakeRuntime *fake, const char *machine_id);
/* The VMM has used @cpu_ns more CPU time; a new VMM starts from 0. */
void         fake_runtime_add_cpu (FakeRuntime *fake, const char *machine_id, guint64 cpu_ns);
/* @machine_id's guest agent says its CPUs have been busy @busy of @total
 * ticks since boot (USAGE), on this (the main) thread. */
void         fake_runtime_guest_usage (FakeRuntime *fake, const char *machine_id, guint64 busy,
                                       guint64 total, guint cpus);
/* Whether the reconciler watches @machine_id's VMM, the one there now or
 * last there. A watch is bound to one VMM, as a real one to its process. */
gboolean     fake_runtime_watched (FakeRuntime *fake, const char *machine_id);
/* @machine_id's VMM ends by itself; the watches on it are told at once, on
 * this (the main) thread. Returns whether anyone watched it. */
gboolean     fake_runtime_end_vmm (FakeRuntime *fake, const char *machine_id,
                                   gboolean has_exit_code, int exit_code, const char *reason);
/* @machine_id's VMM is killed (the OOM killer, say); its watches hear of
 * it once fake_runtime_report_ends() delivers it. */
void         fake_runtime_kill (FakeRuntime *fake, const char *machine_id);
/* A VMM that a host call (a stop, a save, a call that killed it) or a
 * kill ended is reported to the watches still on it only when the test
 * says so, as a real runtime reports it from a later main loop turn.
 * Returns how many were told. */
guint        fake_runtime_report_ends (FakeRuntime *fake);
/* Without save and restore, as a hypervisor that cannot freeze a guest. */
void         fake_runtime_set_can_freeze (FakeRuntime *fake, gboolean can_freeze);
