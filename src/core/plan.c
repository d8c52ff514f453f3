#include "plan.h"
#include "enum-names.h"

static const char *const step_names[] = {
  [MV_STEP_NONE] = "none",
  [MV_STEP_START] = "start",
  [MV_STEP_STOP] = "stop",
  [MV_STEP_FORCE_STOP] = "force-stop",
  [MV_STEP_PAUSE] = "pause",
  [MV_STEP_RESUME] = "resume",
  [MV_STEP_STANDBY] = "standby",
  [MV_STEP_DESTROY] = "destroy",
};

const char *
mv_step_to_string (MvStep step)
{
  return mv_enum_to_name (step_names, G_N_ELEMENTS (step_names), step, "none");
}

static gboolean
has_vmm (MvState state)
{
  return mv_state_holds_resources (state) || state == MV_STATE_STOPPING;
}

/* Running or paused, as asked: the table's "running" and "paused" rows. */
static MvStep
plan_active (const MvConfig *config, const MvStatus *status, gint64 now)
{
  MvState state = status->state;
  gboolean restart_pending = status->observed_restart_generation < config->restart_generation;

  if (state == MV_STATE_STARTING || state == MV_STATE_STOPPING)
    return MV_STEP_FORCE_STOP;   /* left over from an interrupted step */

  /* A restart boots afresh: whatever was frozen goes with the VMM. */
  if (restart_pending && (has_vmm (state) || state == MV_STATE_STANDBY))
    return MV_STEP_STOP;

  if (config->standby)
    switch (state)
      {
      case MV_STATE_RUNNING:
      case MV_STATE_PAUSED:
        return MV_STEP_STANDBY;
      case MV_STATE_STANDBY:
        return MV_STEP_NONE;
      default:
        break;   /* nothing runs that could be frozen: start as asked */
      }

  switch (state)
    {
    case MV_STATE_RESTARTING:
      return now >= status->next_restart_at ? MV_STEP_START : MV_STEP_NONE;
    case MV_STATE_STOPPED:
    case MV_STATE_FAILED:
    case MV_STATE_STANDBY:
      return MV_STEP_START;
    case MV_STATE_RUNNING:
      return config->desired == MV_DESIRED_PAUSED ? MV_STEP_PAUSE : MV_STEP_NONE;
    case MV_STATE_PAUSED:
      return config->desired == MV_DESIRED_RUNNING ? MV_STEP_RESUME : MV_STEP_NONE;
    default:
      return MV_STEP_NONE;
    }
}

MvStep
mv_plan_next_step (const MvConfig *config, const MvStatus *status, gint64 now)
{
  /* A wish that already failed is not retried until something new is
   * asked: otherwise a guest that cannot boot would be booted forever. */
  if (status->failed_generation != 0 &&
      status->failed_generation == config->desired_generation)
    return MV_STEP_NONE;

  /* Destroy removes one resource per step, the VMM first. */
  if (config->desired == MV_DESIRED_DESTROYED)
    return MV_STEP_DESTROY;

  switch (config->desired)
    {
    case MV_DESIRED_RUNNING:
    case MV_DESIRED_PAUSED:
      return plan_active (config, status, now);
    case MV_DESIRED_STOPPED:
      /* Stopped means no VMM and no saved guest either. */
      if (status->state == MV_STATE_STOPPED && status->saved_state == NULL)
        return MV_STEP_NONE;
      return has_vmm (status->state) ? MV_STEP_STOP : MV_STEP_FORCE_STOP;
    case MV_DESIRED_DESTROYED:
    case MV_DESIRED_COUNT:
      break;
    }
  return MV_STEP_NONE;
}
