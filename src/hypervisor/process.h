/* VMM processes: started detached from the daemon so that they outlive it,
 * identified afterwards by PID, start time and API socket, so that a PID
 * the kernel has since given to another process is never signalled. */
#pragma once
#include "names.h"
#include <glib.h>
#include <json-glib/json-glib.h>

/* mv_file_tail() reads the end of a VMM's log (mv_vmm_log_path()). */
#include "util/files.h"
#include "core/host/runtime.h"
#include "hypervisor/cgroup.h"

typedef struct _MvJail MvJail;

typedef struct {
  int      pid;
  guint64  start_time;    /* /proc/PID/stat field 22, in clock ticks after boot */
  char    *socket_path;   /* the API socket; it is among the VMM's arguments */
  gint64   uid;           /* the user it runs as if walled in (jail.h); -1 if not */
} MvProcess;

/* Beside the API socket: what the VMM writes to its stdout and stderr
 * (MV_VMM_LOG_NAME), and the wait status its parent writes when it ends. The daemon's files:
 * a walled-in VMM cannot replace them. */
#define MV_VMM_EXIT_NAME       "vmm.exit"
/* The same, while it is written. */
#define MV_VMM_EXIT_TEMP_NAME  MV_VMM_EXIT_NAME ".tmp"

void        mv_process_free (MvProcess *process);
MvProcess  *mv_process_copy (const MvProcess *process);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (MvProcess, mv_process_free)

/* The file the VMM serving on @socket_path writes its own output to,
 * beside the socket. */
char       *mv_vmm_log_path (const char *socket_path);

/* The file in which the VMM's parent, which only reaps it, writes its wait
 * status when it ends, beside the socket. */
char       *mv_vmm_exit_path (const char *socket_path);
/* The wait status of the VMM that served on @socket_path, once it ended
 * and its parent wrote it down; FALSE until then, or if it never will
 * (the parent was killed too). */
gboolean    mv_vmm_read_exit (const char *socket_path, int *wait_status);

/* Waits, up to a second, until the parent of the VMM that served on
 * @socket_path has written down how it ended, once the VMM is gone: after
 * that nothing more is written beside the socket. */
void        mv_vmm_wait_exit_recorded (const char *socket_path);

/* Starts @argv (argv[0] a path) in its own session, reparented away from
 * the daemon, with stdin on /dev/null, stdout and stderr appended to
 * mv_vmm_log_path(), umask 077, in the directory holding @socket_path,
 * behind @jail's wall if @jail is not NULL (it is prepared here and handed
 * over to the VMM's parent once that runs), and waits up to @timeout_ms
 * for the socket to accept a connection. On failure the process is killed
 * and the error quotes the end of its log. */
MvProcess  *mv_process_start (const char *socket_path, const char *const *argv, MvJail *jail,
                              guint timeout_ms, GError **error);

typedef struct {
  MvJail    *jail;               /* as above; NULL: none */
  /* Without a jail: descriptors the process gets under the same numbers
   * (they stay the caller's). */
  const int *passed_fds;
  guint      n_passed_fds;
  /* Ready once a socket listens on @socket_path, rather than once it
   * accepts a connection: for a server that serves its first peer only. */
  gboolean   ready_when_listening;
  /* The guest's serial console: the VMM's stdin and stdout, held by its
   * parent, which appends it to this log and serves it on the socket
   * beside it (console.h). NULL: stdin is /dev/null, stdout the VMM's
   * log. */
  const char *console_log;
  /* The cgroup the process joins before exec (its parent stays where the
   * daemon is); NULL: the daemon's. */
  const MvCgroupJoin *cgroup;
  /* The memory it may lock (RLIMIT_MEMLOCK, soft and hard), set before
   * the wall; 0: the daemon's limit. */
  guint64    memlock_bytes;
} MvProcessOptions;

MvProcess  *mv_process_start_with (const char *socket_path, const char *const *argv,
                                   const MvProcessOptions *options, guint timeout_ms,
                                   GError **error);

/* The process recorded as @pid, @start_time, @socket_path (and running
 * as @uid, unless that is -1), if that process still runs; NULL otherwise
 * (and for a PID reused since). */
MvProcess  *mv_process_attach (int pid, guint64 start_time, const char *socket_path,
                               gint64 uid);
/* Every running process with @socket_path among its arguments: what an
 * interrupted start may have left without recording it. */
GPtrArray  *mv_process_find_by_socket (const char *socket_path);
/* Whether the process is still the one recorded, and alive. */
gboolean    mv_process_alive (const MvProcess *process);
/* A pidfd for the process, checked to be the recorded one; -1 if it is
 * gone (errno ESRCH) or cannot be opened. */
int         mv_process_open_pidfd (const MvProcess *process);
/* Lets the running process lock @bytes of memory, if it may lock less;
 * as far as the daemon may give (see MvProcessOptions.memlock_bytes). */
gboolean    mv_process_raise_memlock (const MvProcess *process, guint64 bytes, GError **error);
/* Sends @signo, but only to the recorded process; TRUE if it was sent or
 * the process is already gone. */
gboolean    mv_process_signal (const MvProcess *process, int signo, GError **error);
/* Waits up to @timeout_ms for the process to end; TRUE once it is gone. */
gboolean    mv_process_wait (const MvProcess *process, guint timeout_ms);
/* SIGKILL and wait for the end, checking identity first. */
gboolean    mv_process_kill (const MvProcess *process, GError **error);

/* What @process has used so far: CPU time, resident memory, block I/O.
 * MV_ERROR_INVALID_STATE if it is not running. */
gboolean    mv_process_usage (const MvProcess *process, MvRuntimeUsage *usage, GError **error);

/* The process's identity as recorded in status.json, and back. */
void        mv_process_to_json (const MvProcess *process, JsonObject *object);
MvProcess  *mv_process_from_json (JsonObject *object, GError **error);
/* The process @identity records, if it still runs; NULL (no error: a VMM
 * may well be gone) if it does not, if its PID is another's now, or if
 * @identity is NULL or incomplete. */
MvProcess  *mv_process_attach_recorded (JsonObject *identity);

/* A main-thread source that fires once when the process ends (for any
 * process, not only children), or at once if it already has. The callback
 * is a GSourceFunc. */
GSource    *mv_process_exit_source_new (const MvProcess *process);
