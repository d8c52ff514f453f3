/* Waiting for a booted guest to be ready: its vCPUs run, its agent
 * answers, or its console shows a text. */
#include "runtime-private.h"
#include "vsock.h"
#include "util/fd.h"
#include "util/unix-socket.h"

#include <fcntl.h>
#include <glib/gstdio.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define READY_POLL_US     (100 * 1000)
#define AGENT_REPLY_MS    1000
#define CONSOLE_SCAN_MAX  (16 * 1024 * 1024)

static gboolean
console_has (const char *path, goffset offset, const char *text)
{
  g_autofree char *buf = NULL;
  struct stat st;
  goffset size;
  gssize n;
  int fd;

  if (!text || !*text)
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
  size = lseek (fd, 0, SEEK_END);
  if (size <= offset)
    {
      close (fd);
      return FALSE;
    }
  size = MIN (size - offset, CONSOLE_SCAN_MAX);
  buf = g_malloc (size);
  n = pread (fd, buf, size, offset);
  close (fd);
  return n > 0 && memmem (buf, n, text, strlen (text)) != NULL;
}

/* Reads until @expect is in what came, or @timeout_ms passes. */
static gboolean
read_until (int fd, const char *expect, guint timeout_ms)
{
  gint64 deadline = g_get_monotonic_time () + (gint64) timeout_ms * 1000;
  g_autoptr (GString) got = g_string_new (NULL);

  for (;;)
    {
      char chunk[256];
      ssize_t n;

      if (!mv_fd_wait (fd, POLLIN, deadline))
        return FALSE;
      n = read (fd, chunk, sizeof chunk);
      if (n <= 0)
        return FALSE;
      g_string_append_len (got, chunk, n);
      if (strstr (got->str, expect))
        return TRUE;
    }
}

/* One exchange with the guest agent: "ping" answered by "pong". Over
 * vsock the VMM first wants to know the guest port. */
static gboolean
agent_answers (const MvVmSpec *vm)
{
  int fd = vm->agent.kind == MV_AGENT_CHANNEL_VSOCK
           ? mv_vsock_dial (vm->agent.socket_path, MV_AGENT_VSOCK_PORT, AGENT_REPLY_MS, NULL)
           : mv_unix_connect (vm->agent.socket_path, 0, NULL);
  gboolean ok = FALSE;

  if (fd < 0)
    return FALSE;
  if (send (fd, "ping\n", 5, MSG_NOSIGNAL) == 5)
    ok = read_until (fd, "pong", AGENT_REPLY_MS);
  close (fd);
  return ok;
}

static gboolean
vcpus_run (MvHypervisor *hv)
{
  MvVmInfo info;

  return hv->vm_info (hv, &info, NULL) && info.state == MV_VM_STATE_RUNNING;
}

static gboolean
is_ready (MvReadiness readiness, const char *readiness_text, MvHypervisor *hv,
          const MvVmSpec *vm, goffset console_offset)
{
  switch (readiness)
    {
    case MV_READINESS_AGENT:
      return agent_answers (vm);
    case MV_READINESS_CONSOLE:
      return console_has (vm->console.path, console_offset, readiness_text);
    case MV_READINESS_VMM:
    default:
      return vcpus_run (hv);
    }
}

gboolean
mv_runtime_wait_ready (MvHypervisor *hv, const MvProcess *vmm, const MvVmSpec *vm,
                       MvReadiness readiness, const char *readiness_text,
                       goffset console_offset, guint timeout_s, GCancellable *cancellable,
                       GError **error)
{
  gint64 deadline = g_get_monotonic_time () + (gint64) timeout_s * G_USEC_PER_SEC;
  g_autofree char *label = mv_readiness_to_string (readiness, readiness_text);

  for (;;)
    {
      if (is_ready (readiness, readiness_text, hv, vm, console_offset))
        return TRUE;
      if (!mv_process_alive (vmm))
        {
          g_set_error (error, MV_ERROR, MV_ERROR_INVALID_STATE,
                       "The VMM ended before the guest was ready (readiness %s)", label);
          return FALSE;
        }
      if (g_cancellable_is_cancelled (cancellable))
        {
          g_set_error (error, MV_ERROR, MV_ERROR_UNAVAILABLE,
                       "Given up waiting for the guest (readiness %s): the machine is being "
                       "deleted", label);
          return FALSE;
        }
      if (g_get_monotonic_time () > deadline)
        {
          g_set_error (error, MV_ERROR, MV_ERROR_INVALID_STATE,
                       "The guest was not ready (readiness %s) within %u s", label, timeout_s);
          return FALSE;
        }
      g_usleep (READY_POLL_US);
    }
}
