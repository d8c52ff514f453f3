#include "event-log.h"
#include "names.h"
#include "util/fault.h"

#include <errno.h>
#include <fcntl.h>
#include <gio/gio.h>
#include <glib/gstdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct _MvEventLog {
  MvEventLogOptions options;
  char    *path;             /* events.jsonl */
  char    *rotated_path;     /* events.jsonl.1 */
  int      fd;               /* -1: could not be opened; tried again at each append */
  guint64  size;             /* of events.jsonl */
  guint64  last_sequence;
  GQueue   kept;             /* Kept*, oldest first, at most options.max_kept */
  gboolean unsynced;
  guint    sync_timer;
};

/* An event held in memory. One read back at start stays the line it was
 * until someone asks for it (mv_event_log_since()): a start reads the
 * newest events' sequence numbers and parses no more than the newest. */
typedef struct {
  guint64  sequence;
  MvEvent *event;            /* NULL: not parsed yet */
  char    *line;             /* until it is */
} Kept;

static void
kept_free (Kept *kept)
{
  mv_event_free (kept->event);
  g_free (kept->line);
  g_free (kept);
}

static void
keep (MvEventLog *log, MvEvent *event)
{
  Kept *kept = g_new0 (Kept, 1);

  kept->sequence = event->sequence;
  kept->event = event;
  g_queue_push_tail (&log->kept, kept);
  while (log->kept.length > log->options.max_kept)
    kept_free (g_queue_pop_head (&log->kept));
}

/* The sequence number a line as mv_event_to_json() writes it begins with,
 * {"sequence":N,...}, without parsing the rest; FALSE if it does not look
 * so. */
static gboolean
sequence_of (const char *line, gsize length, guint64 *sequence)
{
  static const char prefix[] = "{\"sequence\":";
  char digits[24];
  gsize n = 0;

  if (length < sizeof prefix + 1 || memcmp (line, prefix, sizeof prefix - 1) != 0 ||
      line[length - 1] != '}')
    return FALSE;
  for (line += sizeof prefix - 1; n < sizeof digits - 1 && g_ascii_isdigit (line[n]); n++)
    digits[n] = line[n];
  digits[n] = '\0';
  return line[n] == ',' &&
         g_ascii_string_to_unsigned (digits, 10, 1, G_MAXINT64, sequence, NULL);
}

/* How much of a file a start reads at a time, from its end back. */
#define READ_BACK_BYTES (64 * 1024)

/* Takes the line @line (@length bytes, no newline) as the next older one
 * read back: until the newest whole event is found, each line is parsed,
 * since it gives the last sequence (a line a crash cut short is passed
 * over); the older ones are kept as lines. */
static void
keep_read_back (MvEventLog *log, const char *line, gsize length)
{
  Kept *kept = g_new0 (Kept, 1);

  if (length == 0)
    ;
  else if (log->last_sequence > 0 && sequence_of (line, length, &kept->sequence))
    kept->line = g_strndup (line, length);
  else if ((kept->event = mv_event_from_json (line, length, NULL)))
    {
      kept->sequence = kept->event->sequence;
      log->last_sequence = MAX (log->last_sequence, kept->sequence);
    }
  if (kept->line || kept->event)
    g_queue_push_head (&log->kept, kept);
  else
    g_free (kept);
}

/* The newest events of @path, read from its end back until the log keeps
 * as many as it may: a start reads what it keeps and no more, however
 * long the files are, a piece at a time into one buffer. They go before
 * those kept already, which are newer. */
static void
read_newest (MvEventLog *log, const char *path)
{
  g_autoptr (GByteArray) buffer = NULL;
  gboolean too_long = FALSE;  /* the line being read is longer than an event's */
  struct stat st;
  off_t offset;
  int fd;

  if (log->kept.length >= log->options.max_kept)
    return;
  fd = open (path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0)
    return;
  if (fstat (fd, &st) < 0 || !S_ISREG (st.st_mode))
    {
      close (fd);
      return;
    }
  /* The buffer holds the piece just read, then the start of the line
   * that the piece after it began in the middle of. A line longer than
   * any event can be is not one: it is let go as it is read, so the
   * buffer never holds more than a piece and one event's line. */
  buffer = g_byte_array_sized_new (READ_BACK_BYTES + MV_EVENT_LINE_MAX_BYTES);
  offset = st.st_size;
  while (offset > 0 && log->kept.length < log->options.max_kept)
    {
      gsize piece = (gsize) MIN ((off_t) READ_BACK_BYTES, offset);
      gsize carried = buffer->len;
      const char *text, *end, *newline;
      ssize_t got;

      offset -= (off_t) piece;
      g_byte_array_set_size (buffer, piece + carried);
      memmove (buffer->data + piece, buffer->data, carried);
      do
        got = pread (fd, buffer->data, piece, offset);
      while (got < 0 && errno == EINTR);
      if (got != (ssize_t) piece)
        break;
      /* Each line is what lies between its end and the newline before
       * it; what precedes the first newline belongs to an older piece,
       * unless this is the file's start. */
      text = (const char *) buffer->data;
      end = text + buffer->len;
      if (too_long)
        {
          newline = memrchr (text, '\n', end - text);
          end = newline ? newline : text;
          too_long = newline == NULL;
        }
      while (log->kept.length < log->options.max_kept &&
             ((newline = memrchr (text, '\n', end - text)) || offset == 0))
        {
          const char *line = newline ? newline + 1 : text;

          keep_read_back (log, line, end - line);
          if (newline == NULL)
            break;
          end = newline;
        }
      g_byte_array_set_size (buffer, end - text);
      if (buffer->len > MV_EVENT_LINE_MAX_BYTES)
        {
          g_byte_array_set_size (buffer, 0);
          too_long = TRUE;
        }
    }
  close (fd);
}

static gboolean
open_current (MvEventLog *log, GError **error)
{
  struct stat st;
  int fd = open (log->path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY, 0640);

  if (fd < 0 || fstat (fd, &st) < 0)
    {
      int saved = errno;

      if (fd >= 0)
        close (fd);
      g_set_error (error, G_IO_ERROR, g_io_error_from_errno (saved), "%s: %s", log->path,
                   g_strerror (saved));
      return FALSE;
    }
  log->fd = fd;
  log->size = (guint64) st.st_size;
  /* A line a crash cut short ends here, so the next one starts afresh. */
  if (st.st_size > 0)
    {
      char last = '\n';

      if (pread (fd, &last, 1, st.st_size - 1) == 1 && last != '\n' &&
          write (fd, "\n", 1) == 1)
        log->size++;
    }
  return TRUE;
}

MvEventLog *
mv_event_log_open (const char *dir, const MvEventLogOptions *options, GError **error)
{
  g_autoptr (MvEventLog) log = g_new0 (MvEventLog, 1);

  g_return_val_if_fail (options->max_kept > 0 && options->sync_seconds > 0, NULL);
  log->options = *options;
  log->fd = -1;
  log->path = g_build_filename (dir, MV_EVENTS_LOG_NAME, NULL);
  log->rotated_path = g_build_filename (dir, MV_EVENTS_ROTATED_NAME, NULL);
  g_queue_init (&log->kept);
  read_newest (log, log->path);
  read_newest (log, log->rotated_path);
  if (!open_current (log, error))
    return NULL;
  return g_steal_pointer (&log);
}

/* fsync in a worker thread ------------------------------------------------- */

static void
sync_in_thread (GTask *gtask, gpointer source, gpointer task_data, GCancellable *cancellable)
{
  int fd = GPOINTER_TO_INT (task_data);

  fdatasync (fd);
  close (fd);
  g_task_return_boolean (gtask, TRUE);
}

/* Syncs (a duplicate of) @fd and closes it, off the main loop. */
static void
sync_later (int fd)
{
  g_autoptr (GTask) gtask = NULL;

  if (fd < 0)
    return;
  gtask = g_task_new (NULL, NULL, NULL, NULL);
  g_task_set_task_data (gtask, GINT_TO_POINTER (fd), NULL);
  g_task_run_in_thread (gtask, sync_in_thread);
}

static gboolean
on_sync_due (gpointer data)
{
  MvEventLog *log = data;

  log->sync_timer = 0;
  if (log->unsynced && log->fd >= 0)
    sync_later (fcntl (log->fd, F_DUPFD_CLOEXEC, 3));
  log->unsynced = FALSE;
  return G_SOURCE_REMOVE;
}

void
mv_event_log_free (MvEventLog *log)
{
  if (!log)
    return;
  if (log->sync_timer)
    g_source_remove (log->sync_timer);
  if (log->fd >= 0)
    {
      if (log->unsynced)
        fdatasync (log->fd);
      close (log->fd);
    }
  g_queue_clear_full (&log->kept, (GDestroyNotify) kept_free);
  g_free (log->path);
  g_free (log->rotated_path);
  g_free (log);
}

/* Appending ------------------------------------------------------------------- */

/* events.jsonl becomes events.jsonl.1 (the one there goes) and a new one
 * is begun. The old one is synced off the main loop. */
static gboolean
rotate (MvEventLog *log, GError **error)
{
  if (g_rename (log->path, log->rotated_path) < 0)
    {
      int saved = errno;

      g_set_error (error, G_IO_ERROR, g_io_error_from_errno (saved), "%s: %s", log->path,
                   g_strerror (saved));
      return FALSE;
    }
  mv_fault_point ("event-log", "rotated");
  sync_later (log->fd);
  log->fd = -1;
  return open_current (log, error);
}

static gboolean
write_line (MvEventLog *log, const char *line, gsize length, GError **error)
{
  gsize done = 0;

  if (log->fd < 0 && !open_current (log, error))
    return FALSE;
  if (log->size > 0 && log->size + length > log->options.max_file_bytes &&
      !rotate (log, error))
    return FALSE;
  while (done < length)
    {
      ssize_t n = write (log->fd, line + done, length - done);

      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        {
          int saved = errno;

          /* What a short write left is ended by the next open's newline. */
          close (log->fd);
          log->fd = -1;
          g_set_error (error, G_IO_ERROR, g_io_error_from_errno (saved), "%s: %s", log->path,
                       g_strerror (saved));
          return FALSE;
        }
      done += (gsize) n;
    }
  mv_fault_point ("event-log", "written");
  log->size += length;
  log->unsynced = TRUE;
  if (!log->sync_timer)
    log->sync_timer = g_timeout_add_seconds (log->options.sync_seconds, on_sync_due, log);
  return TRUE;
}

gboolean
mv_event_log_append (MvEventLog *log, MvEvent *event, GError **error)
{
  MvEvent *kept;
  g_autofree char *json = NULL;
  g_autofree char *line = NULL;

  event->sequence = ++log->last_sequence;
  kept = mv_event_copy (event);
  keep (log, kept);
  json = mv_event_to_json (kept);
  line = g_strconcat (json, "\n", NULL);
  return write_line (log, line, strlen (line), error);
}

GPtrArray *
mv_event_log_since (MvEventLog *log, guint64 since, guint max)
{
  GPtrArray *events = g_ptr_array_new ();
  GList *l, *next;

  /* From the newest back to the first one after @since. */
  for (l = log->kept.tail; l && ((Kept *) l->data)->sequence > since; l = l->prev)
    ;
  for (l = l ? l->next : log->kept.head; l && events->len < max; l = next)
    {
      Kept *kept = l->data;

      next = l->next;
      /* Read back as a line: parsed now, or let go if it was not an event
       * after all. */
      if (!kept->event && !(kept->event = mv_event_from_json (kept->line, strlen (kept->line),
                                                              NULL)))
        {
          g_queue_delete_link (&log->kept, l);
          kept_free (kept);
          continue;
        }
      g_clear_pointer (&kept->line, g_free);
      g_ptr_array_add (events, kept->event);
    }
  return events;
}

guint64
mv_event_log_last_sequence (MvEventLog *log)
{
  return log->last_sequence;
}
