/* Events: what happened to machines, told to the observer, which records
 * and publishes them; the reconciler only says what and when. */
#include "reconciler-private.h"

void
mv_reconciler_event (MvReconciler *rec, MvEvent *event)
{
  event->time = mv_reconciler_now (rec);
  if (rec->observer.event)
    rec->observer.event (event, rec->observer.data);
}

void
mv_machine_event (MvMachine *machine, MvEventKind kind, const char *operation_id,
                  const char *message)
{
  MvEvent event = {
    .kind = kind,
    .machine_id = machine->id,
    .machine_name = machine->config->spec->name,
    .operation_id = (char *) operation_id,
    .message = (char *) message,
  };

  mv_reconciler_event (machine->reconciler, &event);
}
