#include "log.h"
#include "names.h"

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
  g_autofree char *message = g_strdup_vprintf (format, args);
  GLogField fields[6] = {
    { "MESSAGE", message, -1 },
    { "PRIORITY", log_priority (level), -1 },
    { "GLIB_DOMAIN", G_LOG_DOMAIN, -1 },
    { MV_LOG_FIELD_MACHINE_ID, machine_id, -1 },
  };
  gsize n = 4;

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
