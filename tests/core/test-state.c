#include "core/state.h"

/* The transition table, written out independently of state.c: row is
 * the state moved from, column the state moved to, in enum order
 * (Stopped, Starting, Running, Paused, Standby, Stopping, Restarting,
 * Failed). */
static const gboolean expected_transitions[MV_STATE_COUNT][MV_STATE_COUNT] = {
  /*                       Stp Sta Run Pau Sby Sto Rst Fai */
  [MV_STATE_STOPPED]    = { 0,  1,  0,  0,  1,  1,  0,  1 },
  [MV_STATE_STARTING]   = { 1,  0,  1,  1,  1,  1,  1,  1 },
  [MV_STATE_RUNNING]    = { 1,  0,  0,  1,  1,  1,  1,  1 },
  [MV_STATE_PAUSED]     = { 1,  0,  1,  0,  1,  1,  1,  1 },
  [MV_STATE_STANDBY]    = { 1,  1,  0,  0,  0,  1,  0,  1 },
  [MV_STATE_STOPPING]   = { 1,  0,  0,  0,  0,  0,  0,  1 },
  [MV_STATE_RESTARTING] = { 1,  1,  0,  0,  0,  1,  0,  1 },
  [MV_STATE_FAILED]     = { 1,  1,  0,  0,  1,  1,  1,  0 },
};

static const char *const expected_state_names[MV_STATE_COUNT] = {
  "Stopped", "Starting", "Running", "Paused", "Standby", "Stopping",
  "Restarting", "Failed",
};

static const char *const expected_desired_names[MV_DESIRED_COUNT] = {
  "running", "paused", "stopped", "destroyed",
};

static void
test_transitions (void)
{
  for (guint from = 0; from < MV_STATE_COUNT; from++)
    for (guint to = 0; to < MV_STATE_COUNT; to++)
      {
        gboolean allowed = mv_state_can_transition (from, to);

        if (allowed != expected_transitions[from][to])
          g_test_fail_printf ("%s -> %s: table says %s, expected %s",
                              mv_state_to_string (from), mv_state_to_string (to),
                              allowed ? "allowed" : "refused",
                              expected_transitions[from][to] ? "allowed" : "refused");
      }
}

static void
test_transitions_out_of_range (void)
{
  g_assert_false (mv_state_can_transition (MV_STATE_COUNT, MV_STATE_STOPPED));
  g_assert_false (mv_state_can_transition (MV_STATE_STOPPED, MV_STATE_COUNT));
  g_assert_false (mv_state_can_transition (MV_STATE_COUNT + 5, MV_STATE_COUNT + 5));
}

/* Failed must be reachable from every other state: any host call fails. */
static void
test_failed_reachable (void)
{
  for (guint from = 0; from < MV_STATE_COUNT; from++)
    if (from != MV_STATE_FAILED)
      g_assert_true (mv_state_can_transition (from, MV_STATE_FAILED));
}

static void
test_state_strings (void)
{
  MvState state;

  for (guint i = 0; i < MV_STATE_COUNT; i++)
    {
      g_assert_cmpstr (mv_state_to_string (i), ==, expected_state_names[i]);
      g_assert_true (mv_state_from_string (expected_state_names[i], &state));
      g_assert_cmpuint (state, ==, i);
    }

  state = MV_STATE_RUNNING;
  g_assert_false (mv_state_from_string ("running", &state));
  g_assert_false (mv_state_from_string ("", &state));
  g_assert_false (mv_state_from_string ("Stopped ", &state));
  g_assert_false (mv_state_from_string (NULL, &state));
  g_assert_cmpuint (state, ==, MV_STATE_RUNNING);
}

static void
test_desired_strings (void)
{
  MvDesired desired;

  for (guint i = 0; i < MV_DESIRED_COUNT; i++)
    {
      g_assert_cmpstr (mv_desired_to_string (i), ==, expected_desired_names[i]);
      g_assert_true (mv_desired_from_string (expected_desired_names[i], &desired));
      g_assert_cmpuint (desired, ==, i);
    }

  desired = MV_DESIRED_PAUSED;
  g_assert_false (mv_desired_from_string ("Running", &desired));
  g_assert_false (mv_desired_from_string ("deleted", &desired));
  g_assert_false (mv_desired_from_string ("", &desired));
  g_assert_false (mv_desired_from_string (NULL, &desired));
  g_assert_cmpuint (desired, ==, MV_DESIRED_PAUSED);
}

static void
test_holds_resources (void)
{
  for (guint i = 0; i < MV_STATE_COUNT; i++)
    {
      gboolean expected = i == MV_STATE_STARTING || i == MV_STATE_RUNNING ||
                          i == MV_STATE_PAUSED;
      g_assert_cmpint (mv_state_holds_resources (i), ==, expected);
    }
}

/* Seed 002, State.HoldsReservations: one that holds resources, is
 * stopping, or is on standby. */
static void
test_holds_reservations (void)
{
  static const struct { MvState state; gboolean holds; } table[] = {
    { MV_STATE_STOPPED, FALSE },
    { MV_STATE_STARTING, TRUE },
    { MV_STATE_RUNNING, TRUE },
    { MV_STATE_PAUSED, TRUE },
    { MV_STATE_STANDBY, TRUE },
    { MV_STATE_STOPPING, TRUE },
    { MV_STATE_RESTARTING, FALSE },
    { MV_STATE_FAILED, FALSE },
  };

  g_assert_cmpuint (G_N_ELEMENTS (table), ==, MV_STATE_COUNT);
  for (guint i = 0; i < G_N_ELEMENTS (table); i++)
    g_assert_cmpint (mv_state_holds_reservations (table[i].state), ==, table[i].holds);
}

static void
test_desired_reached (void)
{
  for (guint s = 0; s < MV_STATE_COUNT; s++)
    {
      g_assert_cmpint (mv_desired_reached (MV_DESIRED_RUNNING, s), ==, s == MV_STATE_RUNNING);
      g_assert_cmpint (mv_desired_reached (MV_DESIRED_PAUSED, s), ==, s == MV_STATE_PAUSED);
      g_assert_cmpint (mv_desired_reached (MV_DESIRED_STOPPED, s), ==, s == MV_STATE_STOPPED);
      /* Destroyed is reached when the machine is gone, not in a state. */
      g_assert_false (mv_desired_reached (MV_DESIRED_DESTROYED, s));
    }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);

  g_test_add_func ("/state/transitions", test_transitions);
  g_test_add_func ("/state/transitions-out-of-range", test_transitions_out_of_range);
  g_test_add_func ("/state/failed-reachable", test_failed_reachable);
  g_test_add_func ("/state/strings", test_state_strings);
  g_test_add_func ("/state/desired-strings", test_desired_strings);
  g_test_add_func ("/state/holds-resources", test_holds_resources);
  g_test_add_func ("/state/holds-reservations", test_holds_reservations);
  g_test_add_func ("/state/desired-reached", test_desired_reached);

  return g_test_run ();
}
