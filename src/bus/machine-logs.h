/* Machine.StreamLogs (machine-logs.c), served by the machine objects
 * (machine-object.c): a machine's console or VMM log written into a
 * socket the caller reads, from its last lines on, and followed while the
 * machine's run lasts. */
#pragma once
#include "machine-guest.h"

/* tail_lines above this is refused; 0 is the whole log. */
#define MV_LOGS_TAIL_LINES_MAX 100000
/* Streams open at once, over every machine. */
#define MV_LOGS_STREAMS_MAX    64

int   mv_machine_method_stream_logs (sd_bus_message *m, MvMachine *machine,
                                     MvMachineAuthorize authorize, sd_bus_error *error);
/* Closes every stream (the service is going). */
void  mv_machine_logs_close_all (void);
