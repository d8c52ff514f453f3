/* The event log read back at start (store/event-log.h): the newest events
 * are kept, oldest first, across the rotated file; sequence numbers go on
 * from the newest; what is not an event (a line a crash cut short, a
 * stray line) is passed over. */
#include "store-test.h"
#include "store/event-log.h"
#include "names.h"

#include <glib/gstdio.h>
#include <string.h>

/* Appends to @path the events @first to @last, one line each, and @tail
 * after them as it is. */
static void
write_events (const char *dir, const char *name, guint64 first, guint64 last, const char *tail)
{
  g_autofree char *path = g_build_filename (dir, name, NULL);
  g_autoptr (GString) text = g_string_new (NULL);
  g_autofree char *old = NULL;

  if (g_file_get_contents (path, &old, NULL, NULL))
    g_string_append (text, old);
  for (guint64 s = first; s <= last; s++)
    {
      MvEvent event = { .sequence = s, .time = 1765000000000000 + (gint64) s,
                        .kind = MV_EVENT_STARTED, .machine_id = (char *) "m1",
                        .machine_name = (char *) "web1", .message = (char *) "started" };
      g_autofree char *json = mv_event_to_json (&event);

      g_string_append_printf (text, "%s\n", json);
    }
  g_string_append (text, tail);
  g_assert_true (g_file_set_contents (path, text->str, text->len, NULL));
}

static MvEventLog *
open_log (const char *dir, guint max_kept)
{
  MvEventLogOptions options = { .max_file_bytes = 1 << 20, .max_kept = max_kept,
                                .sync_seconds = 1 };
  g_autoptr (GError) error = NULL;
  MvEventLog *log = mv_event_log_open (dir, &options, &error);

  g_assert_no_error (error);
  return log;
}

/* The sequences of the events kept, oldest first, as "4 5 6". */
static char *
kept_sequences (MvEventLog *log)
{
  g_autoptr (GPtrArray) events = mv_event_log_since (log, 0, G_MAXUINT);
  g_autoptr (GString) text = g_string_new (NULL);

  for (guint i = 0; i < events->len; i++)
    g_string_append_printf (text, "%s%" G_GUINT64_FORMAT, i ? " " : "",
                            ((MvEvent *) events->pdata[i])->sequence);
  return g_string_free (g_steal_pointer (&text), FALSE);
}

static char *
scratch (void)
{
  g_autoptr (GError) error = NULL;
  char *dir = g_dir_make_tmp ("mv-event-log-XXXXXX", &error);

  g_assert_no_error (error);
  return dir;
}

static void
test_newest_kept (void)
{
  g_autofree char *dir = scratch ();
  g_autofree char *seqs = NULL, *after = NULL;
  MvEventLog *log;
  MvEvent next = { .kind = MV_EVENT_STOPPED, .machine_id = (char *) "m1",
                   .machine_name = (char *) "web1" };

  /* 1-6 rotated, 7-9 current: the newest five are the rotated file's
   * last two and the current three. */
  write_events (dir, MV_EVENTS_ROTATED_NAME, 1, 6, "");
  write_events (dir, MV_EVENTS_LOG_NAME, 7, 9, "");
  log = open_log (dir, 5);
  seqs = kept_sequences (log);
  g_assert_cmpstr (seqs, ==, "5 6 7 8 9");
  g_assert_cmpuint (mv_event_log_last_sequence (log), ==, 9);
  g_assert_true (mv_event_log_append (log, &next, NULL));
  g_assert_cmpuint (next.sequence, ==, 10);
  after = kept_sequences (log);
  g_assert_cmpstr (after, ==, "6 7 8 9 10");
  mv_event_log_free (log);

  /* Room for all: every one, oldest first, the appended one too. */
  log = open_log (dir, 100);
  g_free (seqs);
  seqs = kept_sequences (log);
  g_assert_cmpstr (seqs, ==, "1 2 3 4 5 6 7 8 9 10");
  mv_event_log_free (log);
  store_test_remove_all (dir);
}

static void
test_not_events_passed_over (void)
{
  g_autofree char *dir = scratch ();
  g_autofree char *seqs = NULL;
  MvEventLog *log;

  /* A stray line amid the events, and a last line a crash cut short. */
  write_events (dir, MV_EVENTS_LOG_NAME, 1, 3, "not an event\n\n");
  write_events (dir, MV_EVENTS_LOG_NAME, 4, 5, "{\"sequence\":6,\"time\":17650");
  log = open_log (dir, 4);
  seqs = kept_sequences (log);
  g_assert_cmpstr (seqs, ==, "2 3 4 5");
  g_assert_cmpuint (mv_event_log_last_sequence (log), ==, 5);
  mv_event_log_free (log);
  store_test_remove_all (dir);
}

/* A line that begins as an event does but is not one, among older
 * events: read back as a line, it is let go when the events are asked
 * for, and the others come. */
static void
test_bad_line_let_go (void)
{
  g_autofree char *dir = scratch ();
  g_autofree char *seqs = NULL, *again = NULL;
  MvEventLog *log;

  write_events (dir, MV_EVENTS_LOG_NAME, 1, 3, "{\"sequence\":4,\"time\":\"then\"}\n");
  write_events (dir, MV_EVENTS_LOG_NAME, 5, 6, "");
  log = open_log (dir, 10);
  g_assert_cmpuint (mv_event_log_last_sequence (log), ==, 6);
  seqs = kept_sequences (log);
  g_assert_cmpstr (seqs, ==, "1 2 3 5 6");
  again = kept_sequences (log);
  g_assert_cmpstr (again, ==, "1 2 3 5 6");
  mv_event_log_free (log);
  store_test_remove_all (dir);
}

static void
test_just_rotated (void)
{
  g_autofree char *dir = scratch ();
  g_autofree char *seqs = NULL;
  MvEventLog *log;

  /* The current file empty (rotated a moment before the daemon ended). */
  write_events (dir, MV_EVENTS_ROTATED_NAME, 1, 4, "");
  write_events (dir, MV_EVENTS_LOG_NAME, 1, 0, "");
  log = open_log (dir, 3);
  seqs = kept_sequences (log);
  g_assert_cmpstr (seqs, ==, "2 3 4");
  g_assert_cmpuint (mv_event_log_last_sequence (log), ==, 4);
  mv_event_log_free (log);
  store_test_remove_all (dir);
}

static void
test_no_files (void)
{
  g_autofree char *dir = scratch ();
  MvEventLog *log = open_log (dir, 3);

  /* Nothing, and the first event is 1. */
  g_assert_cmpuint (mv_event_log_last_sequence (log), ==, 0);
  mv_event_log_free (log);
  store_test_remove_all (dir);
}

/* A start reads the newest lines only, as many as it keeps, however long
 * the files are: a line before them is not even looked at. (Written in
 * order, only the newest lines hold the highest sequence; this one, out
 * of order, shows which lines were read.) */
static void
test_reads_only_what_it_keeps (void)
{
  g_autofree char *dir = scratch ();
  g_autofree char *seqs = NULL;
  MvEventLog *log;

  write_events (dir, MV_EVENTS_ROTATED_NAME, 1000, 1000, "");
  write_events (dir, MV_EVENTS_ROTATED_NAME, 1, 3, "");
  write_events (dir, MV_EVENTS_LOG_NAME, 4, 6, "");
  log = open_log (dir, 4);
  seqs = kept_sequences (log);
  g_assert_cmpstr (seqs, ==, "3 4 5 6");
  g_assert_cmpuint (mv_event_log_last_sequence (log), ==, 6);
  mv_event_log_free (log);
  store_test_remove_all (dir);
}

/* Files many times longer than what a start reads at once: every line
 * read back whole, whichever piece of the file it began in, in order,
 * across both files. A line longer than any event may be (and than a
 * piece) is let go as it is read, never held or kept, and its neighbours
 * are whole. */
static void
test_long_files_read_back (void)
{
  g_autofree char *dir = scratch ();
  g_autoptr (GString) expected = g_string_new (NULL);
  g_autoptr (GString) long_message = g_string_new (NULL);
  g_autofree char *seqs = NULL, *long_line = NULL;
  MvEvent event = { .sequence = 2501, .time = 1765000000000000, .kind = MV_EVENT_STARTED,
                    .machine_id = (char *) "m1", .machine_name = (char *) "web1" };
  MvEventLog *log;

  write_events (dir, MV_EVENTS_ROTATED_NAME, 1, 2500, "");
  /* A message of 200 KiB: its line spans several pieces. */
  for (guint i = 0; i < 200 * 1024 / 8; i++)
    g_string_append (long_message, "abcdefg ");
  event.message = long_message->str;
  long_line = mv_event_to_json (&event);
  write_events (dir, MV_EVENTS_LOG_NAME, 1, 0, long_line);
  write_events (dir, MV_EVENTS_LOG_NAME, 1, 0, "\n");
  write_events (dir, MV_EVENTS_LOG_NAME, 2502, 5000, "");
  log = open_log (dir, 4000);
  /* 4000 events kept; the long line is not one of them. */
  for (guint64 s = 1000; s <= 5000; s++)
    if (s != 2501)
      g_string_append_printf (expected, "%s%" G_GUINT64_FORMAT, s > 1000 ? " " : "", s);
  seqs = kept_sequences (log);
  g_assert_cmpstr (seqs, ==, expected->str);
  g_assert_cmpuint (mv_event_log_last_sequence (log), ==, 5000);
  mv_event_log_free (log);
  store_test_remove_all (dir);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/event-log/newest-kept", test_newest_kept);
  g_test_add_func ("/event-log/not-events-passed-over", test_not_events_passed_over);
  g_test_add_func ("/event-log/bad-line-let-go", test_bad_line_let_go);
  g_test_add_func ("/event-log/just-rotated", test_just_rotated);
  g_test_add_func ("/event-log/no-files", test_no_files);
  g_test_add_func ("/event-log/reads-only-what-it-keeps", test_reads_only_what_it_keeps);
  g_test_add_func ("/event-log/long-files-read-back", test_long_files_read_back);
  return g_test_run ();
}
