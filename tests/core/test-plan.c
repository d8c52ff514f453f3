/* The reconciler's decisions, row by row: seed 000's table of desired
 * power states and its saved-state rules, seed 002's standby and restart
 * rules, written out here independently of plan.c. */
#include "core/plan.h"
#include "core/restart.h"

#define NOW  (G_GINT64_CONSTANT (1700000000) * G_USEC_PER_SEC)

typedef struct {
  const char *what;
  MvDesired   desired;
  gboolean    standby;          /* config: standby wanted */
  MvState     state;
  gboolean    saved;            /* status: a saved guest exists */
  gboolean    restart_pending;  /* config: a restart was asked for */
  gboolean    failed;           /* status: this wish already failed */
  gint64      restart_in_us;    /* Restarting: due this long from now */
  MvStep      expected;
} PlanRow;

static const PlanRow rows[] = {
  /* running: start, resume or restore */
  { "running from stopped boots", MV_DESIRED_RUNNING, FALSE, MV_STATE_STOPPED, FALSE, FALSE, FALSE, 0, MV_STEP_START },
  { "running from failed boots (new wish)", MV_DESIRED_RUNNING, FALSE, MV_STATE_FAILED, FALSE, FALSE, FALSE, 0, MV_STEP_START },
  { "running from paused resumes", MV_DESIRED_RUNNING, FALSE, MV_STATE_PAUSED, FALSE, FALSE, FALSE, 0, MV_STEP_RESUME },
  { "running from standby restores", MV_DESIRED_RUNNING, FALSE, MV_STATE_STANDBY, TRUE, FALSE, FALSE, 0, MV_STEP_START },
  { "running and running: nothing", MV_DESIRED_RUNNING, FALSE, MV_STATE_RUNNING, FALSE, FALSE, FALSE, 0, MV_STEP_NONE },
  { "running after a failed try: nothing until asked again", MV_DESIRED_RUNNING, FALSE, MV_STATE_FAILED, FALSE, FALSE, TRUE, 0, MV_STEP_NONE },
  { "a restore that failed is not retried by itself", MV_DESIRED_RUNNING, FALSE, MV_STATE_STANDBY, TRUE, FALSE, TRUE, 0, MV_STEP_NONE },
  { "an interrupted start is cleaned up", MV_DESIRED_RUNNING, FALSE, MV_STATE_STARTING, FALSE, FALSE, FALSE, 0, MV_STEP_FORCE_STOP },
  { "an interrupted stop is cleaned up", MV_DESIRED_RUNNING, FALSE, MV_STATE_STOPPING, FALSE, FALSE, FALSE, 0, MV_STEP_FORCE_STOP },
  /* paused: start or restore, then pause */
  { "paused from stopped boots first", MV_DESIRED_PAUSED, FALSE, MV_STATE_STOPPED, FALSE, FALSE, FALSE, 0, MV_STEP_START },
  { "paused from standby restores first", MV_DESIRED_PAUSED, FALSE, MV_STATE_STANDBY, TRUE, FALSE, FALSE, 0, MV_STEP_START },
  { "paused from running pauses", MV_DESIRED_PAUSED, FALSE, MV_STATE_RUNNING, FALSE, FALSE, FALSE, 0, MV_STEP_PAUSE },
  { "paused and paused: nothing", MV_DESIRED_PAUSED, FALSE, MV_STATE_PAUSED, FALSE, FALSE, FALSE, 0, MV_STEP_NONE },
  /* stopped: hard stop and delete saved state */
  { "stopped from running stops", MV_DESIRED_STOPPED, FALSE, MV_STATE_RUNNING, FALSE, FALSE, FALSE, 0, MV_STEP_STOP },
  { "stopped from paused stops", MV_DESIRED_STOPPED, FALSE, MV_STATE_PAUSED, FALSE, FALSE, FALSE, 0, MV_STEP_STOP },
  { "stopped from standby discards the saved guest", MV_DESIRED_STOPPED, FALSE, MV_STATE_STANDBY, TRUE, FALSE, FALSE, 0, MV_STEP_FORCE_STOP },
  { "stopped but a saved guest is left: discard it", MV_DESIRED_STOPPED, FALSE, MV_STATE_STOPPED, TRUE, FALSE, FALSE, 0, MV_STEP_FORCE_STOP },
  { "stopped from restarting cancels the restart", MV_DESIRED_STOPPED, FALSE, MV_STATE_RESTARTING, FALSE, FALSE, FALSE, 0, MV_STEP_FORCE_STOP },
  { "stopped and stopped: nothing", MV_DESIRED_STOPPED, FALSE, MV_STATE_STOPPED, FALSE, FALSE, FALSE, 0, MV_STEP_NONE },
  /* destroyed: remove runtime, network, storage and records */
  { "destroyed from running", MV_DESIRED_DESTROYED, FALSE, MV_STATE_RUNNING, FALSE, FALSE, FALSE, 0, MV_STEP_DESTROY },
  { "destroyed from standby", MV_DESIRED_DESTROYED, FALSE, MV_STATE_STANDBY, TRUE, FALSE, FALSE, 0, MV_STEP_DESTROY },
  { "destroyed from stopped", MV_DESIRED_DESTROYED, FALSE, MV_STATE_STOPPED, FALSE, FALSE, FALSE, 0, MV_STEP_DESTROY },
  { "destroyed is carried on after a failure", MV_DESIRED_DESTROYED, FALSE, MV_STATE_FAILED, FALSE, FALSE, FALSE, 0, MV_STEP_DESTROY },
  /* standby */
  { "standby wanted while running freezes", MV_DESIRED_RUNNING, TRUE, MV_STATE_RUNNING, FALSE, FALSE, FALSE, 0, MV_STEP_STANDBY },
  { "standby wanted while paused freezes", MV_DESIRED_PAUSED, TRUE, MV_STATE_PAUSED, FALSE, FALSE, FALSE, 0, MV_STEP_STANDBY },
  { "standby wanted and on standby: nothing", MV_DESIRED_RUNNING, TRUE, MV_STATE_STANDBY, TRUE, FALSE, FALSE, 0, MV_STEP_NONE },
  /* restarts: a restart deletes the saved state */
  { "a restart of a running guest stops it first", MV_DESIRED_RUNNING, FALSE, MV_STATE_RUNNING, FALSE, TRUE, FALSE, 0, MV_STEP_STOP },
  { "a restart of a frozen guest discards it", MV_DESIRED_RUNNING, FALSE, MV_STATE_STANDBY, TRUE, TRUE, FALSE, 0, MV_STEP_STOP },
  { "a restart of a stopped machine boots it", MV_DESIRED_RUNNING, FALSE, MV_STATE_STOPPED, FALSE, TRUE, FALSE, 0, MV_STEP_START },
  { "a restart that is due starts", MV_DESIRED_RUNNING, FALSE, MV_STATE_RESTARTING, FALSE, FALSE, FALSE, 0, MV_STEP_START },
  { "a restart that is not due waits", MV_DESIRED_RUNNING, FALSE, MV_STATE_RESTARTING, FALSE, FALSE, FALSE, 5 * G_USEC_PER_SEC, MV_STEP_NONE },
};

static void
test_plan_rows (void)
{
  for (guint i = 0; i < G_N_ELEMENTS (rows); i++)
    {
      const PlanRow *row = &rows[i];
      g_autoptr (MvConfig) config = mv_config_new ("0123456789abcdef0123456789abcdef",
                                                   mv_spec_new (), NOW);
      g_autoptr (MvStatus) status = mv_status_new ();
      MvStep step;

      config->desired = row->desired;
      config->desired_generation = 4;
      config->standby = row->standby;
      config->restart_generation = row->restart_pending ? 2 : 1;
      status->observed_restart_generation = 1;
      status->state = row->state;
      status->saved_state = row->saved ? g_strdup ("/var/lib/microvmd/machines/x/saved") : NULL;
      status->failed_generation = row->failed ? 4 : 0;
      status->next_restart_at = NOW + row->restart_in_us;

      step = mv_plan_next_step (config, status, NOW);
      if (step != row->expected)
        g_test_fail_printf ("%s: planned %s, expected %s", row->what, mv_step_to_string (step),
                            mv_step_to_string (row->expected));
    }
}

/* What the reconciler calls reached: the state asked for, on standby if
 * standby is wanted, and a stop leaves no saved guest behind. */
static void
test_desired_reached (void)
{
  g_autoptr (MvConfig) config = mv_config_new ("0123456789abcdef0123456789abcdef",
                                               mv_spec_new (), NOW);
  g_autoptr (MvStatus) status = mv_status_new ();

  config->desired = MV_DESIRED_RUNNING;
  status->state = MV_STATE_RUNNING;
  g_assert_true (mv_machine_desired_reached (config, status));
  config->standby = TRUE;
  g_assert_false (mv_machine_desired_reached (config, status));
  status->state = MV_STATE_STANDBY;
  g_assert_true (mv_machine_desired_reached (config, status));

  config->standby = FALSE;
  config->desired = MV_DESIRED_STOPPED;
  status->state = MV_STATE_STOPPED;
  status->saved_state = g_strdup ("saved");
  g_assert_false (mv_machine_desired_reached (config, status));
  g_clear_pointer (&status->saved_state, g_free);
  g_assert_true (mv_machine_desired_reached (config, status));
}

typedef struct {
  const char   *what;
  MvRestartMode mode;
  guint32       max_retries;
  guint32       restart_count;
  gboolean      clean;
  MvEndOutcome  expected;
  gint64        delay_us;      /* for MV_END_RESTART, with a 1 s first delay */
} RestartRow;

static const RestartRow restart_rows[] = {
  { "no: a clean end stops", MV_RESTART_NO, 0, 0, TRUE, MV_END_STOPPED, 0 },
  { "no: a crash fails", MV_RESTART_NO, 0, 0, FALSE, MV_END_FAILED, 0 },
  { "on-failure: a clean end stops", MV_RESTART_ON_FAILURE, 0, 0, TRUE, MV_END_STOPPED, 0 },
  { "on-failure: a crash restarts after 1 s", MV_RESTART_ON_FAILURE, 0, 0, FALSE, MV_END_RESTART, 1000000 },
  { "on-failure: the third crash in a row waits 4 s", MV_RESTART_ON_FAILURE, 0, 2, FALSE, MV_END_RESTART, 4000000 },
  { "on-failure:2 restarts the second time", MV_RESTART_ON_FAILURE, 2, 1, FALSE, MV_END_RESTART, 2000000 },
  { "on-failure:2 gives up the third time", MV_RESTART_ON_FAILURE, 2, 2, FALSE, MV_END_FAILED, 0 },
  { "unless-stopped: a clean end restarts", MV_RESTART_UNLESS_STOPPED, 0, 0, TRUE, MV_END_RESTART, 1000000 },
  { "always: a crash restarts", MV_RESTART_ALWAYS, 0, 0, FALSE, MV_END_RESTART, 1000000 },
  { "the backoff stops growing at 300 s", MV_RESTART_ALWAYS, 0, 40, FALSE, MV_END_RESTART, 300000000 },
};

static void
test_restart_rows (void)
{
  for (guint i = 0; i < G_N_ELEMENTS (restart_rows); i++)
    {
      const RestartRow *row = &restart_rows[i];
      g_autoptr (MvSpec) spec = mv_spec_new ();
      gint64 at = 0;
      MvEndOutcome outcome;

      spec->restart_mode = row->mode;
      spec->restart_max_retries = row->max_retries;
      outcome = mv_restart_decide (spec, row->restart_count, row->clean, NOW, G_USEC_PER_SEC, &at);
      if (outcome != row->expected)
        g_test_fail_printf ("%s: outcome %d, expected %d", row->what, outcome, row->expected);
      else if (outcome == MV_END_RESTART && at - NOW != row->delay_us)
        g_test_fail_printf ("%s: restart in %" G_GINT64_FORMAT " µs, expected %" G_GINT64_FORMAT,
                            row->what, at - NOW, row->delay_us);
    }
}

static void
test_starts_on_boot (void)
{
  g_autoptr (MvSpec) spec = mv_spec_new ();

  spec->restart_mode = MV_RESTART_NO;
  g_assert_false (mv_restart_starts_on_boot (spec, FALSE));
  spec->restart_mode = MV_RESTART_ON_FAILURE;
  g_assert_false (mv_restart_starts_on_boot (spec, FALSE));
  spec->restart_mode = MV_RESTART_UNLESS_STOPPED;
  g_assert_true (mv_restart_starts_on_boot (spec, FALSE));
  g_assert_false (mv_restart_starts_on_boot (spec, TRUE));
  spec->restart_mode = MV_RESTART_ALWAYS;
  g_assert_true (mv_restart_starts_on_boot (spec, TRUE));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/plan/seed-000-table", test_plan_rows);
  g_test_add_func ("/plan/desired-reached", test_desired_reached);
  g_test_add_func ("/restart/policies", test_restart_rows);
  g_test_add_func ("/restart/starts-on-boot", test_starts_on_boot);
  return g_test_run ();
}
