/* The status line of Machine.Exec and the exit status made of it. */
#include "exec-status.h"

#include <string.h>

static void
assert_parses (const char *line, MvExecStatusKind kind, int code, int exit_code)
{
  g_auto(MvExecStatus) status = { 0 };

  if (!mv_exec_status_parse (line, strlen (line), &status))
    g_error ("\"%s\" was refused", line);
  g_assert_cmpint (status.kind, ==, kind);
  g_assert_cmpint (status.code, ==, code);
  g_assert_cmpint (mv_exec_status_exit_code (&status), ==, exit_code);
}

static void
assert_refused (const char *line, gsize length)
{
  MvExecStatus status = { .kind = MV_EXEC_STATUS_EXIT, .code = 77, .error = NULL };

  if (mv_exec_status_parse (line, length, &status))
    g_error ("\"%s\" was taken", line);
  /* Nothing was set. */
  g_assert_cmpint (status.code, ==, 77);
  g_assert_null (status.error);
}

static void
test_exit (void)
{
  assert_parses ("exit 0", MV_EXEC_STATUS_EXIT, 0, 0);
  assert_parses ("exit 1", MV_EXEC_STATUS_EXIT, 1, 1);
  assert_parses ("exit 42", MV_EXEC_STATUS_EXIT, 42, 42);
  assert_parses ("exit 255", MV_EXEC_STATUS_EXIT, 255, 255);
}

static void
test_signal (void)
{
  assert_parses ("signal 9", MV_EXEC_STATUS_SIGNAL, 9, 137);
  assert_parses ("signal 15", MV_EXEC_STATUS_SIGNAL, 15, 143);
  assert_parses ("signal 1", MV_EXEC_STATUS_SIGNAL, 1, 129);
  assert_parses ("signal 127", MV_EXEC_STATUS_SIGNAL, 127, 255);
}

static void
test_error (void)
{
  g_auto(MvExecStatus) status = { 0 };
  const char *line = "error the guest went away: agent closed";

  g_assert_true (mv_exec_status_parse (line, strlen (line), &status));
  g_assert_cmpint (status.kind, ==, MV_EXEC_STATUS_ERROR);
  g_assert_cmpstr (status.error, ==, "the guest went away: agent closed");
  g_assert_cmpint (mv_exec_status_exit_code (&status), ==, MV_EXIT_EXEC_ERROR);
  g_assert_cmpint (MV_EXIT_EXEC_ERROR, ==, 255);

  mv_exec_status_clear (&status);
  line = "error ümlaut ✓";
  g_assert_true (mv_exec_status_parse (line, strlen (line), &status));
  g_assert_cmpstr (status.error, ==, "ümlaut ✓");
}

/* The length given counts, not a NUL: the reader hands over the line as
 * it came, without its newline. */
static void
test_length (void)
{
  g_auto(MvExecStatus) status = { 0 };
  const char buffer[] = "exit 3\nexit 4";

  g_assert_true (mv_exec_status_parse (buffer, 6, &status));
  g_assert_cmpint (status.code, ==, 3);
  assert_refused (buffer, 7);
  assert_refused (buffer, sizeof buffer - 1);
}

static void
test_malformed (void)
{
  static const char *const lines[] = {
    "", "exit", "exit ", "exit  3", " exit 3", "exit 3 ", "exit 3\n", "exit 3\r",
    "exit -1", "exit +3", "exit 256", "exit 1000", "exit 03", "exit 00", "exit 3x",
    "exit 0x10", "Exit 3", "EXIT 3", "exited 3", "exit\t3",
    "signal", "signal ", "signal 0", "signal 128", "signal -9", "signal 09",
    "signal KILL", "signal 9 ",
    "error", "error ", "error\ttext", "error bell\a", "error esc\033[2J", "error del\x7f",
    "error \xff\xfe", "status 0", "ok", "0", "3",
  };

  for (gsize i = 0; i < G_N_ELEMENTS (lines); i++)
    assert_refused (lines[i], strlen (lines[i]));

  /* A NUL inside the line. */
  assert_refused ("exit 3\0", 7);
  assert_refused ("error a\0b", 9);
}

static void
test_too_long (void)
{
  g_autofree char *line = NULL;
  g_auto(MvExecStatus) status = { 0 };
  gsize text = MV_EXEC_STATUS_MAX_LINE - strlen ("error ");

  line = g_malloc (MV_EXEC_STATUS_MAX_LINE + 2);
  memcpy (line, "error ", 6);
  memset (line + 6, 'x', text + 1);
  line[MV_EXEC_STATUS_MAX_LINE + 1] = '\0';

  g_assert_true (mv_exec_status_parse (line, MV_EXEC_STATUS_MAX_LINE, &status));
  g_assert_cmpuint (strlen (status.error), ==, text);
  assert_refused (line, MV_EXEC_STATUS_MAX_LINE + 1);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/exec-status/exit", test_exit);
  g_test_add_func ("/exec-status/signal", test_signal);
  g_test_add_func ("/exec-status/error", test_error);
  g_test_add_func ("/exec-status/length", test_length);
  g_test_add_func ("/exec-status/malformed", test_malformed);
  g_test_add_func ("/exec-status/too-long", test_too_long);
  return g_test_run ();
}
