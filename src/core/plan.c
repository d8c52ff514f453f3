#include "plan.h"

static const char *const step_names[] = {
  [MV_STEP_NONE] = "none",
  [MV_STEP_START] = "start",
  [MV_STEP_STOP] = "stop",
  [MV_STEP_FORCE_STOP] = "force-stop",
  [MV_STEP_PAUSE] = "pause",
  [MV_STEP_RESUME] = "resume",
  [MV_STEP_DESTROY] = "destroy",
};

const char *
mv_step_to_string (MvStep step)
{
  g_return_val_if_fail (step < G_N_ELEMENTS (step_names), "none");
  return step_names[step];
}

static gboolean
has_vmm_or_saved_guest (MvState state)
{
  return mv_state_holds_resources (state) || state == MV_STATE_STANDBY ||
         state == MV_STATE_STOPPING;
}

MvStep
mv_plan_next_step (const MvConfig *config, const MvStatus *status)
{
  MvState state = status->state;

  if (config->desired == MV_DESIRED_DESTROYED)
    return has_vmm_or_saved_guest (state) ? MV_STEP_FORCE_STOP : MV_STEP_DESTROY;

  /* A wish that already failed is not retried until something new is
   * asked: otherwise a guest that cannot boot would be booted forever. */
  if (status->failed_generation != 0 &&
      status->failed_generation == config->desired_generation)
    return MV_STEP_NONE;

  switch (config->desired)
    {
    case MV_DESIRED_RUNNING:
    case MV_DESIRED_PAUSED:
      if (mv_state_holds_resources (state) &&
          status->observed_restart_generation < config->restart_generation)
        return MV_STEP_STOP;
      switch (state)
        {
        case MV_STATE_STOPPED:
        case MV_STATE_FAILED:
        case MV_STATE_STANDBY:
        case MV_STATE_RESTARTING:
          return MV_STEP_START;
        case MV_STATE_RUNNING:
          return config->desired == MV_DESIRED_PAUSED ? MV_STEP_PAUSE : MV_STEP_NONE;
        case MV_STATE_PAUSED:
          return config->desired == MV_DESIRED_RUNNING ? MV_STEP_RESUME : MV_STEP_NONE;
        case MV_STATE_STARTING:
        case MV_STATE_STOPPING:
          /* Left over from an operation that did not finish: clean up. */
          return MV_STEP_FORCE_STOP;
        case MV_STATE_COUNT:
          break;
        }
      return MV_STEP_NONE;

    case MV_DESIRED_STOPPED:
      return state == MV_STATE_STOPPED ? MV_STEP_NONE : MV_STEP_STOP;

    case MV_DESIRED_DESTROYED:
    case MV_DESIRED_COUNT:
      break;
    }
  return MV_STEP_NONE;
}
