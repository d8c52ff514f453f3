/* The reconciler: moves each machine towards its desired state, one step
 * at a time, running host calls in worker threads. */
#pragma once
#include "daemon/daemon.h"

/* Waits for @machine to reach what is desired now, then replies to @call
 * (or replies with the error that stopped it). Takes a reference. With
 * @reply_path the reply carries that object path. */
void mv_reconciler_wait (MvMachine *machine, sd_bus_message *call, const char *reply_path);
/* Looks at @machine again soon (after a change of what is desired). */
void mv_reconciler_kick (MvMachine *machine);
/* Recover at startup (seed 002): adopt or clean up what the records say
 * was running, before the bus is served. */
void mv_reconciler_recover (MvMachine *machine);
/* Answers every pending call of @machine that is settled: with @error
 * if set, or as its wish was reached, replaced or deleted. */
void mv_reconciler_settle_waiters (MvMachine *machine, const GError *error);
