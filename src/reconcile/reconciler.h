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
/* Cancels a pending restart and resets the restart count (a start a user
 * asked for). */
void mv_reconciler_cancel_restart (MvMachine *machine);
/* Judges from the VMM's CPU time whether a running machine with a
 * standby_after_seconds has been idle that long, and if so puts it on
 * standby. Called every idle_sample_seconds. */
void mv_reconciler_sample_idle (MvMachine *machine);
/* A traffic event for a machine: wakes it from standby unless @sequence
 * is not newer than the last one handled. Replies (b) to @call: TRUE once
 * woken, FALSE if there was nothing to do. */
void mv_reconciler_traffic (MvMachine *machine, guint64 sequence, sd_bus_message *call);
/* After Recover: asks a Stopped or Failed machine whose restart policy
 * says so to run. */
void mv_reconciler_start_on_boot (MvMachine *machine);
/* Throws away a machine's frozen guest (its shape changed): a machine on
 * standby becomes Stopped, to boot afresh when next started. */
void mv_reconciler_discard_saved_state (MvMachine *machine);
