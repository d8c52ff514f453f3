#include "fd.h"

#include <errno.h>
#include <poll.h>

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
