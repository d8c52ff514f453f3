/* The reconciler's decision, as a pure function: given what is desired and
 * what is observed, the one step to take next (seed 000, Reconciliation). */
#pragma once
#include "machine.h"

typedef enum {
  MV_STEP_NONE,
  MV_STEP_START,        /* boot, or restore the saved guest */
  MV_STEP_STOP,         /* graceful, then hard; discards a saved guest */
  MV_STEP_FORCE_STOP,   /* hard stop at once; discards a saved guest */
  MV_STEP_PAUSE,
  MV_STEP_RESUME,
  MV_STEP_STANDBY,      /* freeze the guest to disk and end its VMM */
  MV_STEP_DESTROY,      /* remove the next resource: VMM, runtime, saved guest, records */
} MvStep;

/* @now (µs since the epoch) decides whether a pending restart is due. */
MvStep      mv_plan_next_step (const MvConfig *config, const MvStatus *status, gint64 now);
const char *mv_step_to_string (MvStep step);
