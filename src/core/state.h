/* The lifecycle states of a machine (observed) and the power states a
 * client may ask for (desired), with the transitions between them. */
#pragma once
#include <glib.h>

typedef enum {
  MV_STATE_STOPPED,
  MV_STATE_STARTING,
  MV_STATE_RUNNING,
  MV_STATE_PAUSED,
  MV_STATE_STANDBY,
  MV_STATE_STOPPING,
  MV_STATE_RESTARTING,
  MV_STATE_FAILED,
  MV_STATE_COUNT,
} MvState;

typedef enum {
  MV_DESIRED_RUNNING,
  MV_DESIRED_PAUSED,
  MV_DESIRED_STOPPED,
  MV_DESIRED_DESTROYED,
  MV_DESIRED_COUNT,
} MvDesired;

const char *mv_state_to_string (MvState state);
gboolean    mv_state_from_string (const char *s, MvState *out);
gboolean    mv_state_can_transition (MvState from, MvState to);
/* Starting, running or paused: the VMM holds CPU and memory. */
gboolean    mv_state_holds_resources (MvState state);
/* Those, stopping or on standby: the machine keeps its writable volumes
 * to itself, to run or resume with them. */
gboolean    mv_state_holds_reservations (MvState state);

const char *mv_desired_to_string (MvDesired desired);
gboolean    mv_desired_from_string (const char *s, MvDesired *out);
/* Whether @state is what @desired asks for, so reconciliation is done. */
gboolean    mv_desired_reached (MvDesired desired, MvState state);
