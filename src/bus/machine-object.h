/* The org.microvmd1.Machine objects. */
#pragma once
#include "service.h"

/* Registers the fallback vtable and node enumerator under the prefix. */
int   mv_machine_object_register (MvBusService *service);
/* Takes the current values of @view's changing properties as the ones
 * clients know: what InterfacesAdded carried, or what was there at start. */
void  mv_machine_object_remember (MvMachineView *view);
/* Emits the coalesced PropertiesChanged and StateChanged of @view now: only the
 * properties whose value differs from the last announced one, and no
 * PropertiesChanged at all when none does. */
void  mv_machine_object_flush (MvMachineView *view);
