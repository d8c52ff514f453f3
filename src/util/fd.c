#include "fd.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

gboolean
mv_fd_wait (int fd, short events, gint64 deadline)
{
  for (;;)
    {
      struct pollfd pfd = { .fd = fd, .events = events };
      gint64 left = MAX (deadline - g_get_monotonic_time (), 0);
      int r;

      /* Rounded up, so that a poll that times out has seen the deadline;
       * one past it still looks once. */
      r = poll (&pfd, 1, (int) MIN ((left + 999) / 1000, G_MAXINT));
      if (r > 0)
        return TRUE;
      if (r == 0 || errno != EINTR)
        return FALSE;
    }
}

gboolean
mv_fd_write_all (int fd, const void *data, gsize length)
{
  const char *p = data;

  while (length > 0)
    {
      ssize_t n = write (fd, p, length);

      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        return FALSE;
      p += n;
      length -= (gsize) n;
    }
  return TRUE;
}

int
mv_fd_above_stdio (int fd)
{
  int moved;

  if (fd < 0 || fd > 2)
    return fd;
  moved = fcntl (fd, F_DUPFD_CLOEXEC, 3);
  close (fd);
  return moved;
}
