/* The org.microvmd1.Machine objects. */
#pragma once
#include "service.h"

/* Registers the fallback vtable and node enumerator under the prefix. */
int   mv_machine_object_register (MvBusService *service);
/* Emits the coalesced PropertiesChanged and StateChanged of @view now. */
void  mv_machine_object_flush (MvMachineView *view);
