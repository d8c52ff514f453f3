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
/* Frees a lifecycle call held in MvMachineView.held_requests. */
void  mv_machine_held_request_free (gpointer held);
/* Answers the calls held for @view's machine: it was deleted. */
void  mv_machine_held_requests_gone (MvMachineView *view);
