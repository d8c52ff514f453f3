/* mv_fd_wait on a pipe: readiness, the deadline, and a deadline already
 * past; waiting for a process's end or a file in a directory. */
#include <poll.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <glib.h>
#include <glib/gstdio.h>

#include "util/fd.h"

static void
test_wait (void)
{
  int p[2];
  gint64 start;

  g_assert_cmpint (pipe (p), ==, 0);

  /* Nothing to read: FALSE once the deadline has come, not before. */
  start = g_get_monotonic_time ();
  g_assert_false (mv_fd_wait (p[0], POLLIN, start + 100 * 1000));
  g_assert_cmpint (g_get_monotonic_time () - start, >=, 100 * 1000);
  g_assert_cmpint (g_get_monotonic_time () - start, <, 5 * G_USEC_PER_SEC);

  /* Writable at once. */
  g_assert_true (mv_fd_wait (p[1], POLLOUT, g_get_monotonic_time () + G_USEC_PER_SEC));

  /* Readable, and seen so even with a deadline in the past. */
  g_assert_cmpint (write (p[1], "x", 1), ==, 1);
  g_assert_true (mv_fd_wait (p[0], POLLIN, g_get_monotonic_time () + G_USEC_PER_SEC));
  g_assert_true (mv_fd_wait (p[0], POLLIN, g_get_monotonic_time () - G_USEC_PER_SEC));

  close (p[0]);
  close (p[1]);
}

/* A file made in the watched directory wakes the wait (FALSE: no end),
 * and its events are taken; a process's end wakes it with TRUE. */
static void
test_end_or_change (void)
{
  g_autofree char *dir = g_dir_make_tmp ("microvmd-fd-XXXXXX", NULL);
  g_autofree char *sock = g_build_filename (dir, "api.sock", NULL);
  g_autofree char *made = g_build_filename (dir, "made", NULL);
  int watch = mv_fd_watch_directory_of (sock, IN_CREATE | IN_MOVED_TO);
  gint64 start;
  int pidfd;
  pid_t pid;

  g_assert_cmpint (watch, >=, 0);
  pid = fork ();
  if (pid == 0)
    {
      pause ();
      _exit (0);
    }
  pidfd = (int) syscall (SYS_pidfd_open, pid, 0);
  g_assert_cmpint (pidfd, >=, 0);

  /* Nothing happens: the deadline ends it. */
  start = g_get_monotonic_time ();
  g_assert_false (mv_fd_wait_end_or_change (pidfd, watch, start + 50 * 1000));
  g_assert_cmpint (g_get_monotonic_time () - start, >=, 50 * 1000);

  /* A file appears: woken long before the deadline, events taken. */
  g_assert_true (g_file_set_contents (made, "", 0, NULL));
  start = g_get_monotonic_time ();
  g_assert_false (mv_fd_wait_end_or_change (pidfd, watch, start + 10 * G_USEC_PER_SEC));
  g_assert_cmpint (g_get_monotonic_time () - start, <, 5 * G_USEC_PER_SEC);
  g_assert_false (mv_fd_wait (watch, POLLIN, g_get_monotonic_time ()));

  /* The process ends. */
  kill (pid, SIGKILL);
  g_assert_true (mv_fd_wait_end_or_change (pidfd, watch,
                                           g_get_monotonic_time () + 10 * G_USEC_PER_SEC));
  g_assert_cmpint (waitpid (pid, NULL, 0), ==, pid);

  /* Without a directory to watch. */
  g_assert_cmpint (mv_fd_watch_directory_of ("/nonexistent/dir/api.sock", IN_CREATE), ==, -1);
  close (pidfd);
  close (watch);
  g_unlink (made);
  g_rmdir (dir);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/fd/wait", test_wait);
  g_test_add_func ("/fd/end-or-change", test_end_or_change);
  return g_test_run ();
}
