/* The org.microvmd1.Manager object at /org/microvmd1. */
#pragma once
#include "polkit.h"
#include "service.h"

int  mv_manager_object_register (MvBusService *service);
/* Announces a new machine: InterfacesAdded, then MachineNew. */
void mv_manager_announce_machine (sd_bus *bus, MvMachineView *view);
/* Announces a machine gone (its records already removed). */
void mv_manager_announce_removed (sd_bus *bus, MvMachineView *view);
/* For a call whose first argument is a spec document (CreateMachine,
 * BuildWarmImage): refuses an oversized one at once, then asks polkit
 * for org.microvmd1.machine.create with the spec's name and @verb as
 * details, and runs @func once the caller is authorized. */
int  mv_manager_authorize_spec_call (sd_bus_message *m, const char *verb, MvAuthorizedFunc func,
                                     gpointer userdata, sd_bus_error *error);
