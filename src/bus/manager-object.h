/* The org.microvmd1.Manager object at /org/microvmd1. */
#pragma once
#include "daemon/daemon.h"

int  mv_manager_object_register (MvDaemon *daemon);
/* Announces a new machine: InterfacesAdded, then MachineNew. */
void mv_manager_announce_machine (MvDaemon *daemon, MvMachine *machine);
/* Announces a machine gone (its records already removed). */
void mv_manager_announce_removed (MvDaemon *daemon, MvMachine *machine);
