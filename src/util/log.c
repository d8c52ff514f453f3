#include "log.h"
#include "names.h"

#include <stdio.h>
#include <time.h>

/* syslog's priorities, as GLib gives them to the journal. */
static const char *
log_priority (GLogLevelFlags level)
{
  if (level & G_LOG_LEVEL_ERROR)
    return "3";
  if (level & (G_LOG_LEVEL_CRITICAL | G_LOG_LEVEL_WARNING))
    return "4";
  if (level & G_LOG_LEVEL_MESSAGE)
    return "5";
  if (level & G_LOG_LEVEL_INFO)
    return "6";
  return "7";
}

void
mv_log_machine_valist (GLogLevelFlags level, const char *machine_id, const char *operation_id,
                       const char *phase, const char *format, va_list args)
{
  g_autofree char *message = NULL;
  GLogField fields[6] = {
    { "MESSAGE", message, -1 },
    { "PRIORITY", log_priority (level), -1 },
    { "GLIB_DOMAIN", G_LOG_DOMAIN, -1 },
    { MV_LOG_FIELD_MACHINE_ID, machine_id, -1 },
  };
  gsize n = 4;

  /* Debug and info lines are left out unless asked for: then they are
   * not even formatted. */
  if (g_log_writer_default_would_drop (level, G_LOG_DOMAIN))
    return;
  message = g_strdup_vprintf (format, args);
  fields[0].value = message;
  if (operation_id)
    fields[n++] = (GLogField) { MV_LOG_FIELD_OPERATION, operation_id, -1 };
  if (phase)
    fields[n++] = (GLogField) { MV_LOG_FIELD_PHASE, phase, -1 };
  g_log_structured_array (level, fields, n);
}

void
mv_log_machine (GLogLevelFlags level, const char *machine_id, const char *operation_id,
                const char *phase, const char *format, ...)
{
  va_list args;

  va_start (args, format);
  mv_log_machine_valist (level, machine_id, operation_id, phase, format, args);
  va_end (args);
}

void
mv_log_catalogued (GLogLevelFlags level, const char *message_id, const char *machine_id,
                   const char *operation_id, const GLogField *extra, gsize n_extra,
                   const char *format, ...)
{
  g_autofree char *message = NULL;
  GLogField fields[10] = {
    { "MESSAGE", NULL, -1 },
    { "PRIORITY", log_priority (level), -1 },
    { "GLIB_DOMAIN", G_LOG_DOMAIN, -1 },
    { MV_LOG_FIELD_MESSAGE_ID, message_id, -1 },
    { MV_LOG_FIELD_MACHINE_ID, machine_id, -1 },
  };
  gsize n = 5;
  va_list args;

  g_return_if_fail (n_extra <= 4);
  if (g_log_writer_default_would_drop (level, G_LOG_DOMAIN))
    return;
  va_start (args, format);
  message = g_strdup_vprintf (format, args);
  va_end (args);
  fields[0].value = message;
  if (operation_id)
    fields[n++] = (GLogField) { MV_LOG_FIELD_OPERATION, operation_id, -1 };
  for (gsize i = 0; i < n_extra; i++)
    fields[n++] = extra[i];
  g_log_structured_array (level, fields, n);
}

/* The writer ------------------------------------------------------------------ */

/* What GLib writes as it is, unescaped: printable ASCII, tabs and line
 * ends. */
static gboolean
is_plain (const char *text)
{
  for (const guchar *p = (const guchar *) text; *p != '\0'; p++)
    if ((*p < 0x20 && *p != '\t' && *p != '\n') || *p > 0x7e)
      return FALSE;
  return TRUE;
}

/* "HH:MM:SS" of @now (µs since the epoch), in local time; worked out
 * again only when the second changes. Per thread: loggers need no lock. */
static const char *
time_of_day (gint64 now)
{
  static __thread gint64 second = -1;
  static __thread char text[16];
  time_t seconds = (time_t) (now / G_USEC_PER_SEC);
  struct tm tm;

  if (seconds == second)
    return text;
  if (localtime_r (&seconds, &tm) == NULL || strftime (text, sizeof text, "%H:%M:%S", &tm) == 0)
    g_strlcpy (text, "??:??:??", sizeof text);
  second = seconds;
  return text;
}

/* Whether GLib's writer would write to @stream in a form of its own: the
 * journal's, a terminal's colours, or with a prefix that names the process. */
static gboolean
needs_default (FILE *stream)
{
  static int special[2] = { -1, -1 };
  int which = stream == stderr;
  int fd = fileno (stream);

  if (g_atomic_int_get (&special[which]) < 0)
    g_atomic_int_set (&special[which], fd < 0 || g_log_writer_is_journald (fileno (stderr)) ||
                                       g_log_writer_supports_color (fd) ||
                                       g_getenv ("G_MESSAGES_PREFIXED") != NULL);
  return g_atomic_int_get (&special[which]);
}

GLogWriterOutput
mv_log_writer (GLogLevelFlags level, const GLogField *fields, gsize n_fields, gpointer user_data)
{
  const char *domain = NULL, *message = NULL;
  g_autofree char *line = NULL;
  gint64 now;
  FILE *stream;

  for (gsize i = 0; i < n_fields && (domain == NULL || message == NULL); i++)
    if (g_strcmp0 (fields[i].key, "MESSAGE") == 0)
      message = fields[i].value;
    else if (g_strcmp0 (fields[i].key, "GLIB_DOMAIN") == 0)
      domain = fields[i].value;
  /* Warnings and worse may be fatal, which the default writer handles. */
  if ((level & G_LOG_LEVEL_MASK & ~(G_LOG_LEVEL_MESSAGE | G_LOG_LEVEL_INFO)) ||
      (level & G_LOG_FLAG_FATAL) || domain == NULL || message == NULL)
    return g_log_writer_default (level, fields, n_fields, user_data);
  if (g_log_writer_default_would_drop (level, domain))
    return G_LOG_WRITER_HANDLED;
  /* Where GLib's writer puts each level. */
  stream = level & G_LOG_LEVEL_MESSAGE ? stderr : stdout;
  if (needs_default (stream) || !is_plain (message))
    return g_log_writer_default (level, fields, n_fields, user_data);

  now = g_get_real_time ();
  line = g_strdup_printf ("%s-%s: %s.%03d: %s\n", domain, level & G_LOG_LEVEL_MESSAGE ? "Message" : "INFO",
                          time_of_day (now), (int) ((now / 1000) % 1000), message);
  fputs (line, stream);
  fflush (stream);
  return G_LOG_WRITER_HANDLED;
}
