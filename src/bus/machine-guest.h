/* Machine.Exec and Machine.Wait (machine-guest.c), served by the machine
 * objects (machine-object.c). */
#pragma once
#include "service.h"

typedef void (*MvMachineAction) (MvMachine *machine, sd_bus_message *call, gboolean root);
/* How machine-object.c has a call authorized, then acted on. */
typedef int  (*MvMachineAuthorize) (MvMachine *machine, sd_bus_message *call,
                                    const char *action_id, const char *verb,
                                    MvMachineAction action);

int   mv_machine_method_exec (sd_bus_message *m, MvMachine *machine, MvMachineAuthorize authorize,
                              sd_bus_error *error);
int   mv_machine_method_wait (sd_bus_message *m, MvMachine *machine, sd_bus_error *error);

/* The Waits on @view hear of @props changing, of the machine going, or
 * are dropped unanswered (the service is going). */
void  mv_machine_waits_changed (MvMachineView *view, guint props);
void  mv_machine_waits_removed (MvMachineView *view);
void  mv_machine_waits_clear (MvMachineView *view);
