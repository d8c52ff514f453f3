#include "unix-socket.h"
#include "files.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <gio/gio.h>

/* How often a full backlog is tried again. */
#define RETRY_US (5 * 1000)

int
mv_unix_connect (const char *path, guint timeout_ms, GError **error)
{
  struct sockaddr_un addr = { .sun_family = AF_UNIX };
  gint64 deadline = g_get_monotonic_time () + (gint64) timeout_ms * 1000;
  int type = SOCK_STREAM | SOCK_CLOEXEC | (timeout_ms > 0 ? SOCK_NONBLOCK : 0);
  gsize length = strlen (path);
  int fd;

  if (length >= sizeof addr.sun_path)
    {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_FILENAME,
                   "the socket path is %" G_GSIZE_FORMAT " bytes, over the limit of %"
                   G_GSIZE_FORMAT " (sun_path)", length, sizeof addr.sun_path - 1);
      return -1;
    }
  memcpy (addr.sun_path, path, length + 1);

  fd = socket (AF_UNIX, type, 0);
  if (fd < 0)
    {
      mv_set_errno_error (error, errno, "could not make a socket");
      return -1;
    }
  /* Linux connects Unix sockets at once or not at all: a non-blocking
   * connect to a full backlog fails with EAGAIN rather than going on in
   * the background. */
  while (connect (fd, (struct sockaddr *) &addr, sizeof addr) < 0)
    {
      int errsv = errno;

      if (errsv == EINTR)
        continue;
      if (errsv == EAGAIN && timeout_ms > 0 && g_get_monotonic_time () < deadline)
        {
          g_usleep (RETRY_US);
          continue;
        }
      close (fd);
      if (errsv == EAGAIN && timeout_ms > 0)
        g_set_error (error, G_IO_ERROR, G_IO_ERROR_TIMED_OUT,
                     "could not connect within %u ms", timeout_ms);
      else
        mv_set_errno_error (error, errsv, "could not connect");
      return -1;
    }
  return fd;
}
