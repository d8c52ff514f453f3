/* Hybrid vsock over a Unix socket. */
#include "vsock.h"
#include "agent.h"
#include "core/errors.h"
#include "util/fd.h"
#include "util/unix-socket.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

/* "OK 4294967295\n" and then some. */
#define HANDSHAKE_MAX_BYTES 32

static int
fail (int fd, GError **error, const char *format, ...) G_GNUC_PRINTF (3, 4);

static int
fail (int fd, GError **error, const char *format, ...)
{
  va_list args;

  if (fd >= 0)
    close (fd);
  va_start (args, format);
  if (error)
    *error = g_error_new_valist (MV_ERROR, MV_ERROR_UNAVAILABLE, format, args);
  va_end (args);
  return -1;
}

int
mv_vsock_dial (const char *socket_path, guint32 port, guint timeout_ms, GError **error)
{
  gint64 deadline = g_get_monotonic_time () + (gint64) timeout_ms * 1000;
  char request[32], reply[HANDSHAKE_MAX_BYTES + 1];
  g_autoptr (GError) local = NULL;
  gsize got = 0;
  guint64 host_port;
  int fd, n;

  fd = mv_unix_connect (socket_path, 0, &local);
  if (fd < 0)
    return fail (-1, error, "vsock: %s: %s", socket_path, local->message);
  n = g_snprintf (request, sizeof request, "CONNECT %u\n", port);
  if (send (fd, request, n, MSG_NOSIGNAL) != n)
    return fail (fd, error, "vsock: could not send the handshake to %s", socket_path);

  /* One byte at a time: what follows the reply's newline is the guest's. */
  while (got < HANDSHAKE_MAX_BYTES)
    {
      ssize_t r;

      if (!mv_fd_wait (fd, POLLIN, deadline))
        return fail (fd, error, "vsock: guest port %u did not answer within %u ms", port,
                     timeout_ms);
      r = recv (fd, reply + got, 1, 0);
      if (r < 0 && errno == EINTR)
        continue;
      if (r <= 0)
        return fail (fd, error, "vsock: the connection to guest port %u was closed: "
                     "nothing listens there, or the guest is not up", port);
      if (reply[got++] == '\n')
        break;
    }
  reply[got] = '\0';
  if (got < 5 || reply[got - 1] != '\n' || strncmp (reply, "OK ", 3) != 0)
    return fail (fd, error, "vsock: unexpected handshake reply from %s: %s", socket_path,
                 g_strchomp (reply));
  reply[got - 1] = '\0';
  if (!g_ascii_string_to_unsigned (reply + 3, 10, 0, G_MAXUINT32, &host_port, NULL))
    return fail (fd, error, "vsock: unexpected handshake reply from %s: %s", socket_path, reply);
  return fd;
}

char *
mv_vsock_listen_path (const char *socket_path, guint32 port)
{
  return g_strdup_printf ("%s_%u", socket_path, port);
}

int
mv_vsock_listen (const char *socket_path, guint32 port, GError **error)
{
  g_autofree char *path = mv_vsock_listen_path (socket_path, port);
  struct sockaddr_un addr = { .sun_family = AF_UNIX };
  int fd;

  if (strlen (path) >= sizeof addr.sun_path)
    return fail (-1, error, "vsock: the socket path %s is over the limit of %zu bytes (sun_path)",
                 path, sizeof addr.sun_path - 1);
  strcpy (addr.sun_path, path);
  fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return fail (-1, error, "vsock: %s", g_strerror (errno));
  if (unlink (path) < 0 && errno != ENOENT)
    {
      int saved = errno;
      return fail (fd, error, "vsock: could not remove the stale %s: %s", path,
                   g_strerror (saved));
    }
  if (bind (fd, (struct sockaddr *) &addr, sizeof addr) < 0 || listen (fd, 16) < 0)
    {
      int saved = errno;
      return fail (fd, error, "vsock: could not listen on %s: %s", path, g_strerror (saved));
    }
  return fd;
}
