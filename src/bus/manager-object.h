/* The org.microvmd1.Manager object at /org/microvmd1. */
#pragma once
#include "service.h"

int  mv_manager_object_register (MvBusService *service);
/* Announces a new machine: InterfacesAdded, then MachineNew. */
void mv_manager_announce_machine (sd_bus *bus, MvMachineView *view);
/* Announces a machine gone (its records already removed). */
void mv_manager_announce_removed (sd_bus *bus, MvMachineView *view);
