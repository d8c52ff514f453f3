/* mv_log_writer writes what GLib's default writer writes, line for line
 * (but for the time of day), and leaves to it what it does not format
 * itself; a machine's line that no one asked for is not made at all. */
#include "util/log.h"

#include <fcntl.h>
#include <glib/gstdio.h>
#include <string.h>
#include <unistd.h>

/* What @writer writes on stderr and stdout for one line at @level with
 * @message, the time of day masked. */
static char *
written (GLogWriterFunc writer, GLogLevelFlags level, const char *message)
{
  g_autofree char *path = NULL;
  g_autoptr (GError) error = NULL;
  g_autoptr (GRegex) time_of_day = g_regex_new ("\\d\\d:\\d\\d:\\d\\d\\.\\d\\d\\d", 0, 0, NULL);
  int fd = g_file_open_tmp ("log-XXXXXX", &path, &error);
  int saved_err = dup (STDERR_FILENO), saved_out = dup (STDOUT_FILENO);
  const GLogField fields[] = {
    { "MESSAGE", message, -1 },
    { "PRIORITY", "5", -1 },
    { "GLIB_DOMAIN", "microvmd", -1 },
    { "MICROVMD_MACHINE_ID", "0123", -1 },
  };
  g_autofree char *text = NULL;

  g_assert_no_error (error);
  fflush (stderr);
  fflush (stdout);
  dup2 (fd, STDERR_FILENO);
  dup2 (fd, STDOUT_FILENO);
  g_assert_cmpint (writer (level, fields, G_N_ELEMENTS (fields), NULL), ==, G_LOG_WRITER_HANDLED);
  fflush (stderr);
  fflush (stdout);
  dup2 (saved_err, STDERR_FILENO);
  dup2 (saved_out, STDOUT_FILENO);
  close (saved_err);
  close (saved_out);
  close (fd);
  g_assert_true (g_file_get_contents (path, &text, NULL, NULL));
  g_unlink (path);
  return g_regex_replace_literal (time_of_day, text, -1, 0, "TT:TT:TT.TTT", 0, NULL);
}

static void
assert_same (GLogLevelFlags level, const char *message)
{
  g_autofree char *ours = written (mv_log_writer, level, message);
  g_autofree char *glibs = written (g_log_writer_default, level, message);

  g_assert_cmpstr (ours, ==, glibs);
}

static void
test_same_lines (void)
{
  g_autofree char *ours = written (mv_log_writer, G_LOG_LEVEL_MESSAGE, "Machine web (0123): Stopped -> Starting");
  g_autofree char *dropped = written (mv_log_writer, G_LOG_LEVEL_INFO, "an event");

  g_assert_cmpstr (ours, ==, "microvmd-Message: TT:TT:TT.TTT: Machine web (0123): Stopped -> Starting\n");
  assert_same (G_LOG_LEVEL_MESSAGE, "Machine web (0123): Stopped -> Starting");
  assert_same (G_LOG_LEVEL_MESSAGE, "two\nlines\tand a tab");
  /* Left to GLib: what needs escaping, and what is not plain ASCII. */
  assert_same (G_LOG_LEVEL_MESSAGE, "a guest wrote \033[2J and \r here");
  assert_same (G_LOG_LEVEL_MESSAGE, "2 CPUs × 4 → 8");
  /* Info and debug lines only with G_MESSAGES_DEBUG, as GLib has it. */
  assert_same (G_LOG_LEVEL_INFO, "an event");
  g_assert_cmpstr (dropped, ==, "");
}

/* What reaches the process's writer, counted, then written as the
 * daemon writes it. */
static guint reached;
static char *last_message;

static GLogWriterOutput
counting_writer (GLogLevelFlags level, const GLogField *fields, gsize n_fields, gpointer data)
{
  reached++;
  for (gsize i = 0; i < n_fields; i++)
    if (g_str_equal (fields[i].key, "MESSAGE"))
      {
        g_free (last_message);
        last_message = g_strdup (fields[i].value);
      }
  return G_LOG_WRITER_HANDLED;
}

/* A line no one asked for is not even made: the writer never sees it. */
static void
test_dropped_not_made (void)
{
  reached = 0;
  mv_log_machine (G_LOG_LEVEL_DEBUG, "0123", NULL, NULL, "Machine %s: %s done", "0123", "start");
  mv_log_catalogued (G_LOG_LEVEL_INFO, "0123456789abcdef0123456789abcdef", "0123", NULL, NULL, 0,
                     "Machine %s: started", "web");
  g_assert_cmpuint (reached, ==, 0);
  mv_log_machine (G_LOG_LEVEL_MESSAGE, "0123", NULL, NULL, "Machine %s: %s", "web", "defined");
  g_assert_cmpuint (reached, ==, 1);
  g_assert_cmpstr (last_message, ==, "Machine web: defined");
}

static void
test_debug_domains (void)
{
  g_setenv ("G_MESSAGES_DEBUG", "microvmd", TRUE);
  {
    g_autofree char *line = written (mv_log_writer, G_LOG_LEVEL_INFO, "an event");

    g_assert_cmpstr (line, ==, "microvmd-INFO: TT:TT:TT.TTT: an event\n");
    assert_same (G_LOG_LEVEL_INFO, "an event");
    assert_same (G_LOG_LEVEL_DEBUG, "a detail");
  }
  /* Asked for: made and written. */
  reached = 0;
  mv_log_machine (G_LOG_LEVEL_DEBUG, "0123", NULL, NULL, "Machine %s: %s done", "0123", "start");
  g_assert_cmpuint (reached, ==, 1);
  g_assert_cmpstr (last_message, ==, "Machine 0123: start done");
  /* Left set: glibc's copy of a variable is lost once it is unset, and
   * this is the last test. */
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_unsetenv ("G_MESSAGES_DEBUG");
  g_unsetenv ("G_MESSAGES_PREFIXED");
  g_log_set_writer_func (counting_writer, NULL, NULL);
  g_test_add_func ("/log/writer/same-lines", test_same_lines);
  g_test_add_func ("/log/writer/dropped-not-made", test_dropped_not_made);
  g_test_add_func ("/log/writer/debug-domains", test_debug_domains);
  return g_test_run ();
}
