#include "manager-events.h"
#include "util/log.h"
#include "names.h"

/* Every event travels as (sequence, time, kind, machine_id, machine_name,
 * operation_id, message, details): "" for what it does not have, and the
 * details only what its kind has (exit_code, snapshot_id). */
static int
append_event (sd_bus_message *m, const MvEvent *event)
{
  int r = sd_bus_message_append (m, "ttsssss", event->sequence, (guint64) event->time,
                                 mv_event_kind_to_string (event->kind), event->machine_id,
                                 event->machine_name, event->operation_id ? event->operation_id : "",
                                 event->message ? event->message : "");
  if (r >= 0)
    r = sd_bus_message_open_container (m, 'a', "{sv}");
  if (r >= 0 && event->has_exit_code)
    r = sd_bus_message_append (m, "{sv}", "exit_code", "i", (gint32) event->exit_code);
  if (r >= 0 && event->snapshot_id)
    r = sd_bus_message_append (m, "{sv}", "snapshot_id", "s", event->snapshot_id);
  if (r >= 0)
    r = sd_bus_message_close_container (m);
  return r;
}

static void
emit_event (sd_bus *bus, const MvEvent *event)
{
  g_autoptr (sd_bus_message) signal = NULL;
  int r = sd_bus_message_new_signal (bus, &signal, MV_MANAGER_PATH, MV_MANAGER_IFACE, "Event");

  if (r >= 0)
    r = append_event (signal, event);
  if (r >= 0)
    r = sd_bus_send (bus, signal, NULL);
  if (r < 0)
    g_warning ("Could not emit the Event signal of event %" G_GUINT64_FORMAT ": %s",
               event->sequence, g_strerror (-r));
}

static void
log_event (const MvEvent *event)
{
  g_autofree char *sequence = g_strdup_printf ("%" G_GUINT64_FORMAT, event->sequence);
  const char *kind = mv_event_kind_to_string (event->kind);
  g_autofree char *code = event->has_exit_code ? g_strdup_printf (", exit code %d",
                                                                  event->exit_code)
                                               : NULL;
  const GLogField extra[] = {
    { MV_LOG_FIELD_EVENT, kind, -1 },
    { MV_LOG_FIELD_EVENT_SEQUENCE, sequence, -1 },
  };

  mv_log_catalogued (G_LOG_LEVEL_INFO, mv_event_kind_message_id (event->kind), event->machine_id,
                     event->operation_id, extra, G_N_ELEMENTS (extra), "Machine %s (%s): %s%s%s%s",
                     event->machine_name, event->machine_id, kind, code ? code : "",
                     event->message ? ": " : "", event->message ? event->message : "");
}

void
mv_manager_record_event (MvBusService *service, MvEventLog *log, const MvEvent *event_in)
{
  g_autoptr (MvEvent) event = mv_event_copy (event_in);
  g_autoptr (GError) error = NULL;
  sd_bus *bus = mv_bus_service_bus (service);

  if (!mv_event_log_append (log, event, &error))
    g_warning ("Event %" G_GUINT64_FORMAT " (%s of machine %s) is not on disk: %s",
               event->sequence, mv_event_kind_to_string (event->kind), event->machine_id,
               error->message);
  log_event (event);
  if (bus)
    emit_event (bus, event);
}

int
mv_manager_method_get_events (sd_bus_message *m, void *userdata, sd_bus_error *error)
{
  MvEventLog *log = mv_bus_service_events (userdata);
  g_autoptr (sd_bus_message) reply = NULL;
  g_autoptr (GPtrArray) events = NULL;
  guint64 since = 0;
  int r = sd_bus_message_read (m, "t", &since);

  if (r < 0)
    return r;
  r = sd_bus_message_new_method_return (m, &reply);
  if (r < 0)
    return r;
  r = sd_bus_message_open_container (reply, 'a', "(ttsssssa{sv})");
  events = log ? mv_event_log_since (log, since, MV_EVENTS_PER_CALL) : g_ptr_array_new ();
  for (guint i = 0; r >= 0 && i < events->len; i++)
    {
      r = sd_bus_message_open_container (reply, 'r', "ttsssssa{sv}");
      if (r >= 0)
        r = append_event (reply, events->pdata[i]);
      if (r >= 0)
        r = sd_bus_message_close_container (reply);
    }
  if (r >= 0)
    r = sd_bus_message_close_container (reply);
  if (r < 0)
    return r;
  return sd_bus_send (NULL, reply, NULL);
}
