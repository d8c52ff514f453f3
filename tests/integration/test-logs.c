/* Machine.StreamLogs through the daemon, with the test runtime: the test
 * writes the "guest's" console into console.log itself. The tail of a
 * log, a follow that ends when the machine stops, arguments refused, and
 * rotation at a small [logs] max-bytes that StreamLogs reads across (of
 * the workload's log too). */
#include "bus-client.h"
#include "names.h"

#include <fcntl.h>
#include <glib/gstdio.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define SPEC(name) \
  "{\"name\":\"" name "\",\"hypervisor_type\":\"test\",\"kernel\":\"/boot/vmlinuz\"," \
  "\"cpu_millicores\":1000,\"memory_bytes\":268435456}"

#define MAX_BYTES 65536

static const char test_config[] =
  "[logs]\n"
  "max-bytes=65536\n"
  "check-seconds=1\n";

static void
append (Fixture *f, const char *path, const char *text)
{
  g_autofree char *file = fixture_runtime_file (f, path, MV_CONSOLE_LOG_NAME);
  FILE *console = fopen (file, "a");

  g_assert_nonnull (console);
  fputs (text, console);
  g_assert_cmpint (fclose (console), ==, 0);
}

/* StreamLogs; the caller's end of the stream, or -1 with *@err. */
static int
stream_logs (Fixture *f, const char *path, const char *source, guint32 tail, gboolean follow,
             char **err, char **msg)
{
  g_autoptr (sd_bus_message) reply = client_call (f->client, path, MV_MACHINE_IFACE,
                                                  "StreamLogs", err, msg, "sub", source, tail,
                                                  (int) follow);
  int fd = -1;

  if (!reply)
    return -1;
  g_assert_cmpint (sd_bus_message_read (reply, "h", &fd), >, 0);
  fd = fcntl (fd, F_DUPFD_CLOEXEC, 3);
  g_assert_cmpint (fd, >=, 0);
  return fd;
}

static int
stream_ok (Fixture *f, const char *path, guint32 tail, gboolean follow)
{
  g_autofree char *err = NULL, *msg = NULL;
  int fd = stream_logs (f, path, "console", tail, follow, &err, &msg);

  if (fd < 0)
    g_error ("StreamLogs: %s: %s", err, msg);
  return fd;
}

/* Reads from @fd until @text has come, within 10 s; what came. */
static char *
read_until (int fd, const char *text)
{
  GString *got = g_string_new (NULL);
  gint64 deadline = g_get_monotonic_time () + 10 * G_USEC_PER_SEC;

  while (!strstr (got->str, text))
    {
      struct pollfd p = { .fd = fd, .events = POLLIN };
      char buffer[4096];
      ssize_t n;

      if (g_get_monotonic_time () > deadline)
        g_error ("'%s' did not come; got '%s'", text, got->str);
      if (poll (&p, 1, 100) <= 0)
        continue;
      n = read (fd, buffer, sizeof buffer);
      g_assert_cmpint (n, >, 0);
      g_string_append_len (got, buffer, n);
    }
  return g_string_free (got, FALSE);
}

static void
test_tail (Fixture *f, gconstpointer data)
{
  g_autofree char *path = client_create_ok (f->client, SPEC ("tail"));
  g_autofree char *three = NULL, *all = NULL, *none = NULL;

  /* Never booted: no log, an empty stream. */
  none = read_all (stream_ok (f, path, 10, FALSE));
  g_assert_cmpstr (none, ==, "");

  client_call_ok (f->client, path, "Start");
  append (f, path, "one\ntwo\nthree\nfour\nfive\n");
  three = read_all (stream_ok (f, path, 3, FALSE));
  g_assert_cmpstr (three, ==, "three\nfour\nfive\n");
  all = read_all (stream_ok (f, path, 0, FALSE));
  g_assert_cmpstr (all, ==, "one\ntwo\nthree\nfour\nfive\n");

  /* Stopped: the last run's log is still read. */
  client_call_ok (f->client, path, "Stop");
  g_clear_pointer (&three, g_free);
  three = read_all (stream_ok (f, path, 2, TRUE));
  g_assert_cmpstr (three, ==, "four\nfive\n");
}

static void
test_follow_until_stop (Fixture *f, gconstpointer data)
{
  g_autofree char *path = client_create_ok (f->client, SPEC ("follow"));
  g_autofree char *first = NULL, *rest = NULL;
  int fd;

  client_call_ok (f->client, path, "Start");
  append (f, path, "booting\n");
  fd = stream_ok (f, path, 0, TRUE);
  first = read_until (fd, "booting\n");
  g_assert_cmpstr (first, ==, "booting\n");

  /* Followed: what the guest prints next comes too. */
  append (f, path, "login: ");
  g_clear_pointer (&first, g_free);
  first = read_until (fd, "login: ");
  g_assert_cmpstr (first, ==, "login: ");

  /* The run ends: the stream ends, with what came last. */
  append (f, path, "powering off\n");
  client_call_ok (f->client, path, "Stop");
  rest = read_all (fd);
  g_assert_cmpstr (rest, ==, "powering off\n");
}

static void
test_refused (Fixture *f, gconstpointer data)
{
  g_autofree char *path = client_create_ok (f->client, SPEC ("refused"));
  struct {
    const char *source;
    guint32 tail;
    const char *error;
    const char *says;
  } cases[] = {
    { "dmesg", 0, MV_BUS_ERROR_INVALID_ARGUMENT, "source: 'dmesg' is not one of console, vmm" },
    { "console", 100001, MV_BUS_ERROR_INVALID_ARGUMENT, "tail_lines: 100001 is more than the limit of 100000" },
    /* The test runtime's guests have no agent of microvmd's. */
    { "workload", 0, MV_BUS_ERROR_UNSUPPORTED, "no microvmd agent" },
  };

  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *err = NULL, *msg = NULL;

      g_assert_cmpint (stream_logs (f, path, cases[i].source, cases[i].tail, FALSE, &err, &msg),
                       ==, -1);
      g_assert_cmpstr (err, ==, cases[i].error);
      g_assert_nonnull (strstr (msg, cases[i].says));
    }
  /* The limit itself is taken. */
  {
    g_autofree char *empty = read_all (stream_ok (f, path, 100000, FALSE));

    g_assert_cmpstr (empty, ==, "");
  }
}

/* The first line of @text, with its newline, kept until the next call. */
static const char *
strndup_line (const char *text)
{
  static char *line;

  g_free (line);
  line = g_strndup (text, strchr (text, '\n') + 1 - text);
  return line;
}

static void
test_rotation (Fixture *f, gconstpointer data)
{
  g_autofree char *path = client_create_ok (f->client, SPEC ("rotated"));
  g_autofree char *log = NULL, *rotated = NULL, *all = NULL, *tail = NULL, *follow = NULL;
  g_autofree char *workload = NULL, *workload_rotated = NULL;
  GString *written = g_string_new (NULL);
  g_autofree char *expected = NULL;
  gint64 deadline;
  GStatBuf st;
  int fd;

  client_call_ok (f->client, path, "Start");
  log = fixture_runtime_file (f, path, MV_CONSOLE_LOG_NAME);
  rotated = g_strconcat (log, ".1", NULL);
  workload = fixture_runtime_file (f, path, MV_WORKLOAD_LOG_NAME);
  workload_rotated = g_strconcat (workload, ".1", NULL);
  for (guint i = 0; written->len <= MAX_BYTES + 4096; i++)
    g_string_append_printf (written, "line %06u of the console\n", i);
  /* The workload's log is rotated as the others are. */
  g_assert_true (g_file_set_contents (workload, written->str, -1, NULL));
  append (f, path, written->str);
  fd = stream_ok (f, path, 1, TRUE);

  /* Over the cap: copied to console.log.1 and emptied within a check or two. */
  deadline = g_get_monotonic_time () + 10 * G_USEC_PER_SEC;
  while (!g_file_test (rotated, G_FILE_TEST_EXISTS) && g_get_monotonic_time () < deadline)
    g_usleep (100000);
  g_assert_true (g_file_test (rotated, G_FILE_TEST_EXISTS));
  g_assert_cmpint (g_stat (log, &st), ==, 0);
  g_assert_cmpint (st.st_size, ==, 0);
  g_assert_cmpint (g_stat (rotated, &st), ==, 0);
  g_assert_cmpint (st.st_size, ==, written->len);
  while (!g_file_test (workload_rotated, G_FILE_TEST_EXISTS) && g_get_monotonic_time () < deadline)
    g_usleep (100000);
  g_assert_cmpint (g_stat (workload_rotated, &st), ==, 0);
  g_assert_cmpint (st.st_size, ==, written->len);
  g_assert_cmpint (g_stat (workload, &st), ==, 0);
  g_assert_cmpint (st.st_size, ==, 0);

  /* A follow begun before the rotation goes on in the emptied file. */
  append (f, path, "after the rotation\n");
  follow = read_until (fd, "after the rotation\n");
  g_assert_true (g_str_has_prefix (follow, "line "));
  g_assert_true (g_str_has_suffix (follow, "of the console\nafter the rotation\n"));
  close (fd);

  /* The whole log is the rotated file, then the current one. */
  expected = g_strconcat (written->str, "after the rotation\n", NULL);
  all = read_all (stream_ok (f, path, 0, FALSE));
  g_assert_cmpstr (all, ==, expected);
  /* A tail reaches back into the rotated file. */
  tail = read_all (stream_ok (f, path, 2, FALSE));
  g_assert_true (g_str_has_suffix (written->str, strndup_line (tail)));
  g_assert_cmpstr (strchr (tail, '\n') + 1, ==, "after the rotation\n");
  g_assert_true (g_str_has_prefix (tail, "line "));
  g_string_free (written, TRUE);

  client_call_ok (f->client, path, "Stop");
  g_assert_cmpint (g_unlink (log), ==, 0);
  g_assert_cmpint (g_unlink (rotated), ==, 0);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add ("/logs/tail", Fixture, test_config, fixture_setup, test_tail, fixture_teardown);
  g_test_add ("/logs/follow-until-stop", Fixture, test_config, fixture_setup,
              test_follow_until_stop, fixture_teardown);
  g_test_add ("/logs/refused", Fixture, test_config, fixture_setup, test_refused,
              fixture_teardown);
  g_test_add ("/logs/rotation", Fixture, test_config, fixture_setup, test_rotation,
              fixture_teardown);
  return g_test_run ();
}
