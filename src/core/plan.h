/* The reconciler's decision, as a pure function: given what is desired and
 * what is observed, the one step to take next (seed 000, Reconciliation). */
#pragma once
#include "machine.h"

typedef enum {
  MV_STEP_NONE,
  MV_STEP_START,        /* boot, or resume from standby */
  MV_STEP_STOP,         /* graceful, then hard; discards saved state */
  MV_STEP_FORCE_STOP,   /* hard stop at once */
  MV_STEP_PAUSE,
  MV_STEP_RESUME,
  MV_STEP_DESTROY,      /* remove runtime, storage and records */
} MvStep;

MvStep      mv_plan_next_step (const MvConfig *config, const MvStatus *status);
const char *mv_step_to_string (MvStep step);
