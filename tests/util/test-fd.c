/* mv_fd_wait on a pipe: readiness, the deadline, and a deadline already
 * past. */
#include <poll.h>
#include <unistd.h>

#include <glib.h>

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

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/fd/wait", test_wait);
  return g_test_run ();
}
