#include "state.h"
#include "enum-names.h"

static const char *const state_names[MV_STATE_COUNT] = {
  [MV_STATE_STOPPED] = "Stopped",
  [MV_STATE_STARTING] = "Starting",
  [MV_STATE_RUNNING] = "Running",
  [MV_STATE_PAUSED] = "Paused",
  [MV_STATE_STANDBY] = "Standby",
  [MV_STATE_STOPPING] = "Stopping",
  [MV_STATE_RESTARTING] = "Restarting",
  [MV_STATE_FAILED] = "Failed",
};

static const char *const desired_names[MV_DESIRED_COUNT] = {
  [MV_DESIRED_RUNNING] = "running",
  [MV_DESIRED_PAUSED] = "paused",
  [MV_DESIRED_STOPPED] = "stopped",
  [MV_DESIRED_DESTROYED] = "destroyed",
};

#define BIT(s) (1u << (s))

/* Row: from; bits: the states it may move to. Failed is reachable from
 * every state, since any host call can fail. Stopping is entered from any
 * state a stop step may find: a stop also ends what an interrupted step
 * left and removes a frozen guest. The reconciler checks every move it
 * makes against this table. */
static const guint transitions[MV_STATE_COUNT] = {
  /* Standby: a memory snapshot put back (a restore, a fork). */
  [MV_STATE_STOPPED] = BIT (MV_STATE_STARTING) | BIT (MV_STATE_STANDBY) |
                       BIT (MV_STATE_STOPPING) | BIT (MV_STATE_FAILED),
  /* Standby: a restore that failed keeps the frozen guest; Restarting: a
   * start by the restart policy that failed is another end. */
  [MV_STATE_STARTING] = BIT (MV_STATE_RUNNING) | BIT (MV_STATE_PAUSED) |
                        BIT (MV_STATE_STANDBY) | BIT (MV_STATE_STOPPING) |
                        BIT (MV_STATE_STOPPED) | BIT (MV_STATE_RESTARTING) |
                        BIT (MV_STATE_FAILED),
  [MV_STATE_RUNNING] = BIT (MV_STATE_PAUSED) | BIT (MV_STATE_STANDBY) |
                       BIT (MV_STATE_STOPPING) | BIT (MV_STATE_STOPPED) |
                       BIT (MV_STATE_RESTARTING) | BIT (MV_STATE_FAILED),
  [MV_STATE_PAUSED] = BIT (MV_STATE_RUNNING) | BIT (MV_STATE_STANDBY) |
                      BIT (MV_STATE_STOPPING) | BIT (MV_STATE_STOPPED) |
                      BIT (MV_STATE_RESTARTING) | BIT (MV_STATE_FAILED),
  [MV_STATE_STANDBY] = BIT (MV_STATE_STARTING) | BIT (MV_STATE_STOPPING) |
                       BIT (MV_STATE_STOPPED) | BIT (MV_STATE_FAILED),
  [MV_STATE_STOPPING] = BIT (MV_STATE_STOPPED) | BIT (MV_STATE_FAILED),
  [MV_STATE_RESTARTING] = BIT (MV_STATE_STARTING) | BIT (MV_STATE_STOPPING) |
                          BIT (MV_STATE_STOPPED) | BIT (MV_STATE_FAILED),
  [MV_STATE_FAILED] = BIT (MV_STATE_STARTING) | BIT (MV_STATE_STANDBY) |
                      BIT (MV_STATE_STOPPING) | BIT (MV_STATE_STOPPED) |
                      BIT (MV_STATE_RESTARTING),
};

const char *
mv_state_to_string (MvState state)
{
  return mv_enum_to_name (state_names, MV_STATE_COUNT, state, "Failed");
}

gboolean
mv_state_from_string (const char *s, MvState *out)
{
  guint value;

  if (!mv_enum_from_name (state_names, MV_STATE_COUNT, s, &value))
    return FALSE;
  *out = value;
  return TRUE;
}

gboolean
mv_state_can_transition (MvState from, MvState to)
{
  if (from >= MV_STATE_COUNT || to >= MV_STATE_COUNT)
    return FALSE;
  return (transitions[from] & BIT (to)) != 0;
}

gboolean
mv_state_holds_resources (MvState state)
{
  return state == MV_STATE_STARTING || state == MV_STATE_RUNNING ||
         state == MV_STATE_PAUSED;
}

gboolean
mv_state_holds_reservations (MvState state)
{
  return mv_state_holds_resources (state) || state == MV_STATE_STOPPING ||
         state == MV_STATE_STANDBY;
}

const char *
mv_desired_to_string (MvDesired desired)
{
  return mv_enum_to_name (desired_names, MV_DESIRED_COUNT, desired, "stopped");
}

gboolean
mv_desired_from_string (const char *s, MvDesired *out)
{
  guint value;

  if (!mv_enum_from_name (desired_names, MV_DESIRED_COUNT, s, &value))
    return FALSE;
  *out = value;
  return TRUE;
}

gboolean
mv_desired_reached (MvDesired desired, MvState state)
{
  switch (desired)
    {
    case MV_DESIRED_RUNNING:
      return state == MV_STATE_RUNNING;
    case MV_DESIRED_PAUSED:
      return state == MV_STATE_PAUSED;
    case MV_DESIRED_STOPPED:
      return state == MV_STATE_STOPPED;
    case MV_DESIRED_DESTROYED:
    case MV_DESIRED_COUNT:
      break;
    }
  return FALSE;
}
