/* mv_unix_connect against listeners of its own: connecting, refusing, a
 * path too long for sun_path and a backlog that stays full. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <gio/gio.h>
#include <glib/gstdio.h>

#include "util/unix-socket.h"

typedef struct {
  char *dir;
  char *path;
  int   listener;
} Fixture;

/* Listens on @f->path with @backlog and does not accept. */
static void
listen_on (Fixture *f, int backlog)
{
  struct sockaddr_un addr = { .sun_family = AF_UNIX };

  g_assert_cmpuint (strlen (f->path), <, sizeof addr.sun_path);
  strcpy (addr.sun_path, f->path);
  f->listener = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  g_assert_cmpint (f->listener, >=, 0);
  g_assert_cmpint (bind (f->listener, (struct sockaddr *) &addr, sizeof addr), ==, 0);
  g_assert_cmpint (listen (f->listener, backlog), ==, 0);
}

static void
fixture_set_up (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;

  f->dir = g_dir_make_tmp ("microvmd-unix-XXXXXX", &error);
  g_assert_no_error (error);
  f->path = g_build_filename (f->dir, "api.sock", NULL);
  f->listener = -1;
}

static void
fixture_tear_down (Fixture *f, gconstpointer data)
{
  if (f->listener >= 0)
    close (f->listener);
  g_unlink (f->path);
  g_rmdir (f->dir);
  g_free (f->path);
  g_free (f->dir);
}

static void
test_connects (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  int blocking, nonblocking;

  listen_on (f, 4);
  blocking = mv_unix_connect (f->path, 0, &error);
  g_assert_no_error (error);
  g_assert_cmpint (blocking, >=, 0);
  g_assert_false (fcntl (blocking, F_GETFL) & O_NONBLOCK);
  g_assert_true (fcntl (blocking, F_GETFD) & FD_CLOEXEC);

  nonblocking = mv_unix_connect (f->path, 1000, &error);
  g_assert_no_error (error);
  g_assert_cmpint (nonblocking, >=, 0);
  g_assert_true (fcntl (nonblocking, F_GETFL) & O_NONBLOCK);
  close (blocking);
  close (nonblocking);
}

static void
test_nothing_listens (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;

  g_assert_cmpint (mv_unix_connect (f->path, 0, &error), ==, -1);
  g_assert_error (error, G_IO_ERROR, G_IO_ERROR_NOT_FOUND);
  g_assert_nonnull (strstr (error->message, "could not connect"));
  g_clear_error (&error);

  /* A socket file left by a listener that is gone. */
  listen_on (f, 4);
  close (f->listener);
  f->listener = -1;
  g_assert_cmpint (mv_unix_connect (f->path, 100, &error), ==, -1);
  g_assert_error (error, G_IO_ERROR, G_IO_ERROR_CONNECTION_REFUSED);
}

static void
test_path_too_long (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *name = g_strnfill (sizeof ((struct sockaddr_un *) NULL)->sun_path, 'a');
  g_autofree char *path = g_build_filename (f->dir, name, NULL);

  g_assert_cmpint (mv_unix_connect (path, 0, &error), ==, -1);
  g_assert_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_FILENAME);
  g_assert_nonnull (strstr (error->message, "over the limit of 107"));
}

/* A listener that never accepts fills its backlog; a non-blocking
 * connect then waits out its timeout rather than hanging. */
static void
test_full_backlog_times_out (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (GArray) held = g_array_new (FALSE, FALSE, sizeof (int));
  gint64 start;
  int fd;

  listen_on (f, 0);
  for (;;)
    {
      fd = mv_unix_connect (f->path, 1, &error);
      if (fd < 0)
        break;
      g_array_append_val (held, fd);
      g_assert_cmpuint (held->len, <, 64);
    }
  g_assert_error (error, G_IO_ERROR, G_IO_ERROR_TIMED_OUT);
  g_clear_error (&error);

  start = g_get_monotonic_time ();
  g_assert_cmpint (mv_unix_connect (f->path, 200, &error), ==, -1);
  g_assert_error (error, G_IO_ERROR, G_IO_ERROR_TIMED_OUT);
  g_assert_nonnull (strstr (error->message, "within 200 ms"));
  g_assert_cmpint (g_get_monotonic_time () - start, >=, 190 * 1000);
  g_assert_cmpint (g_get_monotonic_time () - start, <, 5 * G_USEC_PER_SEC);

  for (guint i = 0; i < held->len; i++)
    close (g_array_index (held, int, i));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add ("/unix-socket/connects", Fixture, NULL, fixture_set_up, test_connects,
              fixture_tear_down);
  g_test_add ("/unix-socket/nothing-listens", Fixture, NULL, fixture_set_up,
              test_nothing_listens, fixture_tear_down);
  g_test_add ("/unix-socket/path-too-long", Fixture, NULL, fixture_set_up, test_path_too_long,
              fixture_tear_down);
  g_test_add ("/unix-socket/full-backlog-times-out", Fixture, NULL, fixture_set_up,
              test_full_backlog_times_out, fixture_tear_down);
  return g_test_run ();
}
