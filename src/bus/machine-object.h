/* The org.microvmd1.Machine objects. */
#pragma once
#include "daemon/daemon.h"

/* Registers the fallback vtable and node enumerator under the prefix. */
int   mv_machine_object_register (MvDaemon *daemon);
/* Emits the coalesced PropertiesChanged and StateChanged of @machine now. */
void  mv_machine_object_flush (MvMachine *machine);
char *mv_machine_object_path (const char *id);
