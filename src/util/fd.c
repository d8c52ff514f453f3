#include "fd.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/inotify.h>
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

int
mv_fd_watch_directory_of (const char *path, guint32 mask)
{
  g_autofree char *dir = g_path_get_dirname (path);
  int fd = inotify_init1 (IN_CLOEXEC | IN_NONBLOCK);

  if (fd >= 0 && inotify_add_watch (fd, dir, mask) < 0)
    {
      close (fd);
      fd = -1;
    }
  return fd;
}

gboolean
mv_fd_wait_end_or_change (int pidfd, int watch_fd, gint64 deadline)
{
  struct pollfd pfd[] = { { .fd = pidfd, .events = POLLIN }, { .fd = watch_fd, .events = POLLIN } };
  char events[4096];
  int r;

  /* As mv_fd_wait(): what is left of the wait is taken again after a
   * signal, not the whole of it. */
  do
    {
      gint64 left = MAX (deadline - g_get_monotonic_time (), 0);

      r = poll (pfd, G_N_ELEMENTS (pfd), (int) MIN ((left + 999) / 1000, G_MAXINT));
    }
  while (r < 0 && errno == EINTR);
  if (r > 0 && pfd[1].revents)
    while (read (watch_fd, events, sizeof events) > 0)
      ;
  return r > 0 && pfd[0].revents != 0;
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
