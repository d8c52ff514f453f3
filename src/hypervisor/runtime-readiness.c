/* Waiting for a booted guest to be ready: its vCPUs run, its agent
 * answers, or its console shows a text. */
#include "runtime-private.h"
#include "util/fd.h"
#include "util/unix-socket.h"

#include <fcntl.h>
#include <glib/gstdio.h>
#include <poll.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define READY_POLL_US     (100 * 1000)
#define CONSOLE_SCAN_MAX  (16 * 1024 * 1024)

/* Whether @path shows @text past @offset, within CONSOLE_SCAN_MAX bytes
 * of it. *@scanned is how far earlier looks have read (@offset at
 * first): each look reads only what was written since, and the bytes
 * before it that could begin @text. */
static gboolean
console_has (const char *path, goffset offset, const char *text, goffset *scanned)
{
  g_autofree char *buf = NULL;
  gsize length = text ? strlen (text) : 0;
  goffset start, end;
  struct stat st;
  gssize n;
  int fd;

  if (length == 0)
    return TRUE;
  /* The VMM writes the console: it could put a link or a FIFO there. */
  fd = g_open (path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0);
  if (fd < 0)
    return FALSE;
  if (fstat (fd, &st) < 0 || !S_ISREG (st.st_mode))
    {
      close (fd);
      return FALSE;
    }
  end = MIN (st.st_size, offset + CONSOLE_SCAN_MAX);
  start = MAX (offset, *scanned - (goffset) (length - 1));
  if (end - start < (goffset) length)
    {
      close (fd);
      return FALSE;
    }
  buf = g_malloc (end - start);
  n = pread (fd, buf, end - start, start);
  close (fd);
  if (n <= 0)
    return FALSE;
  *scanned = start + n;
  return memmem (buf, n, text, length) != NULL;
}

static gboolean
vcpus_run (MvHypervisor *hv)
{
  MvVmInfo info;

  return hv->vm_info (hv, &info, NULL) && info.state == MV_VM_STATE_RUNNING;
}

static gboolean
is_ready (MvReadiness readiness, const char *readiness_text, MvHypervisor *hv,
          const MvVmSpec *vm, goffset console_offset, goffset *scanned)
{
  switch (readiness)
    {
    case MV_READINESS_CONSOLE:
      return console_has (vm->console.path, console_offset, readiness_text, scanned);
    case MV_READINESS_AGENT:   /* waited for by wait_for_agent() */
    case MV_READINESS_AUTO:    /* resolved by the caller */
    case MV_READINESS_VMM:
    default:
      return vcpus_run (hv);
    }
}

typedef struct {
  const MvProcess *vmm;
  /* The VMM's pidfd, readable once it ends; -1 if none could be had, and
   * /proc is read instead. A console is looked at on every write to it:
   * this keeps each look from reading three files of /proc. */
  int              pidfd;
  GCancellable    *cancellable;
  const char      *label;
} Watch;

static gboolean
vmm_alive (const Watch *watch)
{
  if (watch->pidfd < 0)
    return mv_process_alive (watch->vmm);
  return !mv_fd_wait (watch->pidfd, POLLIN, 0);
}

/* FALSE, and why, once waiting is no longer worth it. */
static gboolean
still_worth_it (const Watch *watch, GError **error)
{
  if (!vmm_alive (watch))
    {
      g_set_error (error, MV_ERROR, MV_ERROR_INVALID_STATE,
                   "The VMM ended before the guest was ready (readiness %s)", watch->label);
      return FALSE;
    }
  if (g_cancellable_is_cancelled (watch->cancellable))
    {
      g_set_error (error, MV_ERROR, MV_ERROR_UNAVAILABLE,
                   "Given up waiting for the guest (readiness %s): the machine is being "
                   "deleted", watch->label);
      return FALSE;
    }
  return TRUE;
}

static gboolean
check_watch (gpointer data, GError **error)
{
  return still_worth_it (data, error);
}

/* The agent says it is ready, or that the workload has already ended
 * (the exit is reported again to the session that watches the guest). */
static gboolean
wait_for_agent (const MvVmSpec *vm, GBytes *config, GBytes *identity, Watch *watch,
                gint64 deadline, guint timeout_s, char **agent_version, GError **error)
{
  for (;;)
    {
      g_autoptr (GError) local = NULL;
      MvAgentReady ready = { 0 };
      gboolean ok = mv_agent_wait_ready (&vm->agent, config, identity, deadline, check_watch,
                                         watch, &ready, &local);

      if (ok && agent_version)
        *agent_version = g_strdup (ready.agent_version ? ready.agent_version : "");
      mv_agent_ready_clear (&ready);
      if (ok)
        return TRUE;
      if (!g_error_matches (local, MV_ERROR, MV_ERROR_UNAVAILABLE) ||
          !still_worth_it (watch, error))
        {
          if (local)
            g_propagate_error (error, g_steal_pointer (&local));
          return FALSE;
        }
      if (g_get_monotonic_time () > deadline)
        {
          g_set_error (error, MV_ERROR, MV_ERROR_INVALID_STATE,
                       "The guest was not ready (readiness %s) within %u s: its agent did not "
                       "answer", watch->label, timeout_s);
          return FALSE;
        }
      g_usleep (READY_POLL_US);
    }
}

gboolean
mv_runtime_wait_ready (MvHypervisor *hv, const MvProcess *vmm, const MvVmSpec *vm,
                       MvReadiness readiness, const char *readiness_text, GBytes *agent_config,
                       GBytes *agent_identity, goffset console_offset, guint timeout_s,
                       GCancellable *cancellable, char **agent_version, GError **error)
{
  gint64 deadline = g_get_monotonic_time () + (gint64) timeout_s * G_USEC_PER_SEC;
  g_autofree char *label = mv_readiness_to_string (readiness, readiness_text);
  Watch watch = { vmm, mv_process_open_pidfd (vmm), cancellable, label };
  goffset scanned = console_offset;
  int watch_fd = -1;
  gboolean ready;

  if (readiness == MV_READINESS_AGENT)
    {
      ready = wait_for_agent (vm, agent_config, agent_identity, &watch, deadline, timeout_s,
                              agent_version, error);
      if (watch.pidfd >= 0)
        close (watch.pidfd);
      return ready;
    }
  /* A console is looked at again as soon as it is written to, in the
   * directory where the VMM (or the holder of its console) writes it; and
   * everything as soon as the VMM ends. */
  if (readiness == MV_READINESS_CONSOLE && vm->console.path)
    watch_fd = mv_fd_watch_directory_of (vm->console.path, IN_MODIFY | IN_CREATE | IN_MOVED_TO);
  while (!(ready = is_ready (readiness, readiness_text, hv, vm, console_offset, &scanned)))
    {
      if (!still_worth_it (&watch, error))
        break;
      if (g_get_monotonic_time () > deadline)
        {
          g_set_error (error, MV_ERROR, MV_ERROR_INVALID_STATE,
                       "The guest was not ready (readiness %s) within %u s", label, timeout_s);
          break;
        }
      mv_fd_wait_end_or_change (watch.pidfd, watch_fd, g_get_monotonic_time () + READY_POLL_US);
    }
  if (watch_fd >= 0)
    close (watch_fd);
  if (watch.pidfd >= 0)
    close (watch.pidfd);
  return ready;
}
