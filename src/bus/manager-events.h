/* The manager's events: Manager.GetEvents and the Manager.Event signal,
 * served from the event log (store/event-log.h), and each event's
 * journal message. */
#pragma once
#include "service.h"
#include "store/event-log.h"

/* Records @event in @log, logs it with its kind's MESSAGE_ID, and, once
 * the bus is served, emits Event. A log that cannot be written is warned
 * of; the event is still told. */
void mv_manager_record_event (MvBusService *service, MvEventLog *log, const MvEvent *event);

/* GetEvents(t since) → a(ttsssssa{sv}) events. */
int  mv_manager_method_get_events (sd_bus_message *m, void *userdata, sd_bus_error *error);
