/* The serial console's holder (hypervisor/console.h) around a stand-in
 * VMM (console-vmm.c) started as the daemon starts VMMs: readers and the
 * one writer, a reader that never reads, output a character at a time,
 * the most clients, a writer that stops typing, and the end of the VMM. */
#include "hv-test.h"
#include "core/errors.h"
#include "hypervisor/console.h"
#include "hypervisor/process.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct {
  char      *dir;
  char      *socket_path;
  char      *log_path;
  MvProcess *vmm;
} Fixture;

static void
fixture_setup (Fixture *f, gconstpointer data)
{
  const char *vmm = g_getenv ("MICROVMD_TEST_CONSOLE_VMM");
  g_autoptr (GError) error = NULL;

  g_assert_nonnull (vmm);
  f->dir = hv_test_make_dir ();
  f->socket_path = g_build_filename (f->dir, "api.sock", NULL);
  f->log_path = g_build_filename (f->dir, MV_CONSOLE_LOG_NAME, NULL);
  {
    const char *argv[] = { vmm, f->socket_path, NULL };
    MvProcessOptions options = { .console_log = f->log_path };

    f->vmm = mv_process_start_with (f->socket_path, argv, &options, 10000, &error);
  }
  g_assert_no_error (error);
  g_assert_true (hv_test_wait_file_has (f->log_path, 0, "console-vmm up", 10));
}

static void
fixture_teardown (Fixture *f, gconstpointer data)
{
  if (f->vmm)
    mv_process_kill (f->vmm, NULL);
  mv_vmm_wait_exit_recorded (f->socket_path);
  g_clear_pointer (&f->vmm, mv_process_free);
  hv_test_remove_tree (f->dir);
  g_free (f->dir);
  g_free (f->socket_path);
  g_free (f->log_path);
}

static int
attach (Fixture *f, gboolean want_writer, gboolean *writer)
{
  g_autoptr (GError) error = NULL;
  gboolean got = FALSE;
  int fd = mv_console_attach (f->log_path, want_writer, &got, &error);

  g_assert_no_error (error);
  g_assert_cmpint (fd, >=, 0);
  if (writer)
    *writer = got;
  return fd;
}

static void
type_line (int fd, const char *line)
{
  g_autofree char *text = g_strconcat (line, "\n", NULL);
  g_assert_cmpint (send (fd, text, strlen (text), MSG_NOSIGNAL), ==, (gssize) strlen (text));
}

/* Reads what @fd has, as soon as it has it, onto @got: the bytes read; 0
 * at its end, or once @deadline has passed. */
static gssize
read_piece (int fd, GString *got, gint64 deadline)
{
  struct pollfd pfd = { .fd = fd, .events = POLLIN };
  gint64 left = (deadline - g_get_monotonic_time ()) / 1000;
  char buf[65536];
  ssize_t n;

  if (left <= 0 || poll (&pfd, 1, (int) left) <= 0)
    return 0;
  n = read (fd, buf, sizeof buf);
  if (n <= 0)
    return 0;
  g_string_append_len (got, buf, n);
  return n;
}

/* Reads @fd into @got until it holds @text; FALSE at its end, or after
 * @timeout_ms. */
static gboolean
read_until (int fd, GString *got, const char *text, guint timeout_ms)
{
  gint64 deadline = g_get_monotonic_time () + (gint64) timeout_ms * 1000;

  while (!strstr (got->str, text))
    if (read_piece (fd, got, deadline) == 0)
      return FALSE;
  return TRUE;
}

/* A writer that the holder has taken: the line it types is answered. */
static int
attach_writer (Fixture *f)
{
  for (guint i = 0; i < 100; i++)
    {
      gboolean writer;
      int fd = attach (f, TRUE, &writer);

      if (writer)
        return fd;
      /* The holder has not seen the last writer go yet. */
      close (fd);
      g_usleep (20000);
    }
  g_error ("the console never took a writer");
}

static void
test_readers_and_writer (Fixture *f, gconstpointer data)
{
  g_autoptr (GString) seen_a = g_string_new (NULL);
  g_autoptr (GString) seen_b = g_string_new (NULL);
  g_autoptr (GString) seen_c = g_string_new (NULL);
  g_autofree char *log = NULL;
  gboolean writer = FALSE;
  int a, b, c;

  a = attach (f, TRUE, &writer);
  g_assert_true (writer);
  /* Another who asks to type while A does reads only. */
  b = attach (f, TRUE, &writer);
  g_assert_false (writer);
  c = attach (f, FALSE, &writer);
  g_assert_false (writer);

  type_line (a, "hello");
  g_assert_true (read_until (a, seen_a, "echo: hello\n", 5000));
  g_assert_true (read_until (b, seen_b, "echo: hello\n", 5000));
  g_assert_true (read_until (c, seen_c, "echo: hello\n", 5000));
  g_assert_cmpint (send (b, "x\n", 2, MSG_NOSIGNAL), ==, -1);
  g_assert_cmpint (errno, ==, EPIPE);
  g_assert_true (g_file_get_contents (f->log_path, &log, NULL, NULL));
  g_assert_nonnull (strstr (log, "echo: hello\n"));
  /* Only what was printed reached the guest: B's refused line did not. */
  g_assert_null (strstr (log, "echo: x\n"));

  /* A writer that stops typing goes on reading; someone else types. */
  g_assert_cmpint (shutdown (a, SHUT_WR), ==, 0);
  close (b);
  b = attach_writer (f);
  type_line (b, "second");
  g_assert_true (read_until (b, seen_b, "echo: second\n", 5000));
  g_assert_true (read_until (a, seen_a, "echo: second\n", 5000));
  g_assert_true (read_until (c, seen_c, "echo: second\n", 5000));
  close (a);
  close (b);
  close (c);
}

static void
test_reader_that_never_reads (Fixture *f, gconstpointer data)
{
  g_autoptr (GString) seen = g_string_new (NULL);
  g_autoptr (GString) stalled_seen = g_string_new (NULL);
  int stalled = attach (f, FALSE, NULL);
  int w = attach (f, TRUE, NULL);

  /* 4 MiB, sixteen times what a reader may leave unread. The log has it
   * all (a reader as slow as this test may be let go too: it is not
   * waited for either). */
  type_line (w, "flood 65536");
  g_assert_true (hv_test_wait_file_has (f->log_path, 0, "flood done\n", 60));
  g_assert_cmpint (hv_test_file_size (f->log_path), >=, 65536 * 64);
  /* The one that never read was let go, having got only a part. */
  g_assert_false (read_until (stalled, stalled_seen, "flood done\n", 5000));
  g_assert_cmpuint (stalled_seen->len, <, 65536 * 64);
  close (stalled);
  close (w);
  /* And the console still answers. */
  w = attach_writer (f);
  type_line (w, "after");
  g_assert_true (read_until (w, seen, "echo: after\n", 5000));
  close (w);
}

static void
test_most_clients (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  int fds[MV_CONSOLE_CLIENTS_MAX];
  gboolean writer;

  for (guint i = 0; i < G_N_ELEMENTS (fds); i++)
    fds[i] = attach (f, FALSE, NULL);
  g_assert_cmpint (mv_console_attach (f->log_path, TRUE, &writer, &error), ==, -1);
  g_assert_error (error, MV_ERROR, MV_ERROR_RESOURCE_EXHAUSTED);
  g_assert_nonnull (strstr (error->message, "16 clients"));
  g_clear_error (&error);
  /* One gone, one more may come. */
  close (fds[0]);
  for (guint i = 0; i < 100 && (fds[0] = mv_console_attach (f->log_path, FALSE, &writer,
                                                            &error)) < 0; i++)
    {
      g_clear_error (&error);
      g_usleep (20000);
    }
  g_assert_cmpint (fds[0], >=, 0);
  for (guint i = 0; i < G_N_ELEMENTS (fds); i++)
    close (fds[i]);
}

/* A console printed a character at a time reaches a reader whole, in
 * gathered pieces rather than a piece per character: each piece the
 * holder takes is a wake-up of the holder and of whoever watches the
 * log. */
static void
test_trickle_gathered (Fixture *f, gconstpointer data)
{
  g_autoptr (GString) seen = g_string_new (NULL);
  g_autofree char *expected = g_strnfill (400, 't');
  int reader = attach (f, FALSE, NULL);
  int w = attach_writer (f);
  gint64 deadline = g_get_monotonic_time () + 30 * G_USEC_PER_SEC;
  guint pieces = 0;
  const char *start;

  type_line (w, "trickle 400");
  /* Each piece read as soon as it comes. */
  while (!strstr (seen->str, "trickle done\n"))
    {
      gsize before = seen->len;

      g_assert_cmpint (read_piece (reader, seen, deadline), >, 0);
      if (memchr (seen->str + before, 't', seen->len - before))
        pieces++;
    }
  start = strchr (seen->str, 't');
  g_assert_nonnull (start);
  g_assert_true (g_str_has_prefix (start, expected));
  g_assert_cmpstr (start + 400, ==, "\ntrickle done\n");
  g_test_message ("400 characters, 250 µs apart, came in %u pieces", pieces);
  g_assert_cmpuint (pieces, <, 100);
  close (reader);
  close (w);
}

static void
test_end_of_the_vmm (Fixture *f, gconstpointer data)
{
  g_autoptr (GString) seen = g_string_new (NULL);
  g_autoptr (GString) reader_seen = g_string_new (NULL);
  g_autoptr (GError) error = NULL;
  g_autofree char *log = NULL;
  int reader = attach (f, FALSE, NULL);
  int w = attach (f, TRUE, NULL);
  gboolean writer;
  int status;

  /* What the VMM printed last is in the log and reaches the clients,
   * then every client reads its end. */
  type_line (w, "last words");
  type_line (w, "exit");
  g_assert_true (read_until (reader, reader_seen, "echo: last words\n", 5000));
  g_assert_false (read_until (reader, reader_seen, "never printed", 10000));
  g_assert_false (read_until (w, seen, "never printed", 10000));
  g_assert_nonnull (strstr (seen->str, "echo: last words\n"));
  g_assert_true (mv_process_wait (f->vmm, 10000));
  mv_vmm_wait_exit_recorded (f->socket_path);
  g_assert_true (mv_vmm_read_exit (f->socket_path, &status));
  g_assert_true (WIFEXITED (status) && WEXITSTATUS (status) == 0);
  g_assert_true (g_file_get_contents (f->log_path, &log, NULL, NULL));
  g_assert_nonnull (strstr (log, "echo: last words\n"));

  g_assert_cmpint (mv_console_attach (f->log_path, TRUE, &writer, &error), ==, -1);
  g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_STATE);
  close (reader);
  close (w);
}

static void
test_no_holder (void)
{
  g_autofree char *dir = hv_test_make_dir ();
  g_autofree char *log_path = g_build_filename (dir, MV_CONSOLE_LOG_NAME, NULL);
  g_autoptr (GError) error = NULL;
  gboolean writer;

  g_assert_cmpint (mv_console_attach (log_path, TRUE, &writer, &error), ==, -1);
  g_assert_error (error, MV_ERROR, MV_ERROR_UNSUPPORTED);
  hv_test_remove_tree (dir);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add ("/console/readers-and-writer", Fixture, NULL, fixture_setup,
              test_readers_and_writer, fixture_teardown);
  g_test_add ("/console/reader-that-never-reads", Fixture, NULL, fixture_setup,
              test_reader_that_never_reads, fixture_teardown);
  g_test_add ("/console/trickle-gathered", Fixture, NULL, fixture_setup,
              test_trickle_gathered, fixture_teardown);
  g_test_add ("/console/most-clients", Fixture, NULL, fixture_setup, test_most_clients,
              fixture_teardown);
  g_test_add ("/console/end-of-the-vmm", Fixture, NULL, fixture_setup, test_end_of_the_vmm,
              fixture_teardown);
  g_test_add_func ("/console/no-holder", test_no_holder);
  return g_test_run ();
}
