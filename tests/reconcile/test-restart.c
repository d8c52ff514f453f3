/* Restart policies (seed 002): what becomes of a guest that ends by
 * itself, restarts backing off exponentially from restart_backoff_ms on
 * the injected clock, StartOnBoot through recovery, remove_on_exit. */
#include "fixture.h"

#include <string.h>

static MvMachine *
running_with (Fixture *f, const char *id, MvRestartMode mode, guint32 max_retries,
              gboolean remove_on_exit)
{
  MvSpec *spec = fixture_spec (id);
  MvMachine *m;
  g_autoptr (GError) error = NULL;

  spec->restart_mode = mode;
  spec->restart_max_retries = max_retries;
  spec->remove_on_exit = remove_on_exit;
  m = fixture_define (f, spec);
  error = fixture_request (f, m, MV_REQUEST_START);
  g_assert_no_error (error);
  return m;
}

static void
crash (Fixture *f, const char *id)
{
  g_assert_true (fake_runtime_end_vmm (f->runtime, id, FALSE, 0, "the VMM crashed"));
}

/* The restart is due exactly @ms after the end: not a millisecond before. */
static void
assert_restarts_after (Fixture *f, MvMachine *m, guint ms)
{
  guint starts = fake_log_count (f->log, "runtime.start m1");

  g_assert_cmpint (m->status->state, ==, MV_STATE_RESTARTING);
  g_assert_cmpint (m->status->next_restart_at - m->status->finished_at, ==,
                   (gint64) ms * 1000);
  g_assert_true (fake_clock_has_timer (f->clock, ms));
  g_assert_cmpint (fake_clock_next_due (f->clock), ==, ms);
  fake_clock_advance (f->clock, ms - 1);
  fixture_settle (f);
  g_assert_cmpuint (fake_log_count (f->log, "runtime.start m1"), ==, starts);
  g_assert_cmpint (m->status->state, ==, MV_STATE_RESTARTING);
  fake_clock_advance (f->clock, 1);
  WAIT_UNTIL (f, m->status->state == MV_STATE_RUNNING);
  fixture_settle (f);
  g_assert_cmpuint (fake_log_count (f->log, "runtime.start m1"), ==, starts + 1);
  g_assert_true (fake_runtime_watched (f->runtime, "m1"));
  g_assert_cmpuint (fake_clock_n_timers (f->clock), ==, 0);
}

static void
test_on_failure_backs_off_and_gives_up (Fixture *f, gconstpointer data)
{
  MvMachine *m = running_with (f, "m1", MV_RESTART_ON_FAILURE, 2, FALSE);
  g_autoptr (GError) error = NULL;
  Settled *settled;

  crash (f, "m1");
  g_assert_cmpuint (m->status->restart_count, ==, 1);
  g_assert_false (m->status->has_exit_code);
  assert_restarts_after (f, m, FIXTURE_BACKOFF_MS);
  crash (f, "m1");
  g_assert_cmpuint (m->status->restart_count, ==, 2);
  assert_restarts_after (f, m, 2 * FIXTURE_BACKOFF_MS);

  /* The third end in a row is one too many. */
  crash (f, "m1");
  fixture_settle (f);
  g_assert_cmpint (m->status->state, ==, MV_STATE_FAILED);
  g_assert_cmpstr (m->status->state_error, ==, "the VMM crashed");
  g_assert_cmpuint (m->status->restart_count, ==, 2);
  g_assert_cmpuint (fake_clock_n_timers (f->clock), ==, 0);
  settled = recorder_last_settled (f->recorder, "m1");
  g_assert_nonnull (settled->failure);
  g_assert_nonnull (strstr (settled->failure->message, "the VMM crashed"));
  fake_clock_advance (f->clock, 60 * 1000);
  fixture_settle (f);
  g_assert_cmpuint (fake_log_count (f->log, "runtime.start m1"), ==, 3);

  /* A user's start begins again from the first backoff. */
  error = fixture_request (f, m, MV_REQUEST_START);
  g_assert_no_error (error);
  g_assert_cmpuint (m->status->restart_count, ==, 0);
  crash (f, "m1");
  assert_restarts_after (f, m, FIXTURE_BACKOFF_MS);
}

static void
test_failed_restart_is_another_end (Fixture *f, gconstpointer data)
{
  MvMachine *m = running_with (f, "m1", MV_RESTART_ON_FAILURE, 0, FALSE);

  crash (f, "m1");
  fake_runtime_fail_next (f->runtime, FAKE_RUNTIME_START, "The guest did not boot", FALSE);
  fake_clock_advance (f->clock, FIXTURE_BACKOFF_MS);
  WAIT_UNTIL (f, m->status->restart_count == 2);
  fixture_settle (f);
  g_assert_cmpstr (m->status->state_error, ==, "The guest did not boot");
  assert_restarts_after (f, m, 2 * FIXTURE_BACKOFF_MS);
}

static void
test_clean_exit_with_on_failure_ends_stopped (Fixture *f, gconstpointer data)
{
  MvMachine *m = running_with (f, "m1", MV_RESTART_ON_FAILURE, 0, FALSE);

  g_assert_true (fake_runtime_end_vmm (f->runtime, "m1", TRUE, 0, "the guest powered off"));
  fixture_settle (f);
  g_assert_cmpint (m->status->state, ==, MV_STATE_STOPPED);
  g_assert_cmpint (m->config->desired, ==, MV_DESIRED_STOPPED);
  g_assert_true (m->status->has_exit_code);
  g_assert_cmpint (m->status->exit_code, ==, 0);
  g_assert_cmpuint (m->status->observed_generation, ==, m->config->desired_generation);
  g_assert_cmpuint (m->status->restart_count, ==, 0);
  g_assert_cmpuint (fake_clock_n_timers (f->clock), ==, 0);
  g_assert_null (recorder_last_settled (f->recorder, "m1")->failure);
  g_assert_false (fake_runtime_watched (f->runtime, "m1"));
}

static void
test_failing_exit_code_with_on_failure_restarts (Fixture *f, gconstpointer data)
{
  MvMachine *m = running_with (f, "m1", MV_RESTART_ON_FAILURE, 0, FALSE);

  g_assert_true (fake_runtime_end_vmm (f->runtime, "m1", TRUE, 3, "the guest powered off"));
  g_assert_cmpint (m->status->exit_code, ==, 3);
  assert_restarts_after (f, m, FIXTURE_BACKOFF_MS);
}

static void
test_always_restarts_a_clean_exit (Fixture *f, gconstpointer data)
{
  MvMachine *m = running_with (f, "m1", MV_RESTART_ALWAYS, 0, FALSE);

  g_assert_true (fake_runtime_end_vmm (f->runtime, "m1", TRUE, 0, "the guest powered off"));
  assert_restarts_after (f, m, FIXTURE_BACKOFF_MS);
}

static void
test_no_policy_crash_fails (Fixture *f, gconstpointer data)
{
  MvMachine *m = running_with (f, "m1", MV_RESTART_NO, 0, FALSE);

  crash (f, "m1");
  fixture_settle (f);
  g_assert_cmpint (m->status->state, ==, MV_STATE_FAILED);
  g_assert_cmpuint (fake_clock_n_timers (f->clock), ==, 0);
  g_assert_nonnull (recorder_last_settled (f->recorder, "m1")->failure);
}

static void
test_stop_cancels_a_pending_restart (Fixture *f, gconstpointer data)
{
  MvMachine *m = running_with (f, "m1", MV_RESTART_ALWAYS, 0, FALSE);
  g_autoptr (GError) error = NULL;

  crash (f, "m1");
  g_assert_cmpuint (fake_clock_n_timers (f->clock), ==, 1);
  error = fixture_request (f, m, MV_REQUEST_STOP);
  g_assert_no_error (error);
  g_assert_cmpint (m->status->state, ==, MV_STATE_STOPPED);
  g_assert_cmpuint (fake_clock_n_timers (f->clock), ==, 0);
  g_assert_cmpuint (m->status->restart_count, ==, 0);
  g_assert_cmpint (m->status->next_restart_at, ==, 0);
  fake_clock_advance (f->clock, 60 * 1000);
  fixture_settle (f);
  g_assert_cmpuint (fake_log_count (f->log, "runtime.start m1"), ==, 1);
}

static void
test_end_during_a_step_is_left_to_it (Fixture *f, gconstpointer data)
{
  MvMachine *m = running_with (f, "m1", MV_RESTART_ALWAYS, 0, FALSE);
  FakeHold *hold = fake_runtime_hold (f->runtime);
  g_autoptr (GError) error = NULL;
  Waiter *waiter;

  /* The guest powers off while it is being stopped: that is the stop. */
  fake_hold_arm (hold, FAKE_RUNTIME_STOP);
  g_assert_true (mv_reconciler_request (f->rec, m, MV_REQUEST_STOP, &error));
  waiter = recorder_wait (f->recorder, m);
  mv_reconciler_kick (m);
  WAIT_UNTIL (f, fake_hold_holding (hold));
  g_assert_true (fake_runtime_end_vmm (f->runtime, "m1", TRUE, 0, "the guest powered off"));
  g_assert_cmpint (m->status->state, ==, MV_STATE_STOPPING);
  fake_hold_release (hold);
  WAIT_UNTIL (f, waiter->done);
  g_assert_no_error (waiter->error);
  g_assert_cmpint (m->status->state, ==, MV_STATE_STOPPED);
  g_assert_cmpuint (m->status->restart_count, ==, 0);
  g_assert_cmpuint (fake_clock_n_timers (f->clock), ==, 0);
}

/* The VMM is killed just after it paused (or resumed) the guest, and its
 * end reaches the reconciler before the step's result does. */
static void
assert_end_after_call_is_noticed (Fixture *f, MvRequest request, FakeRuntimeCall call)
{
  MvMachine *m = fixture_running (f, "m1");
  FakeHold *hold = fake_runtime_hold (f->runtime);
  g_autoptr (GError) error = NULL;

  if (request == MV_REQUEST_RESUME)
    {
      error = fixture_request (f, m, MV_REQUEST_PAUSE);
      g_assert_no_error (error);
    }
  fake_hold_arm (hold, FAKE_RUNTIME_AFTER (call));
  g_assert_true (mv_reconciler_request (f->rec, m, request, &error));
  mv_reconciler_kick (m);
  WAIT_UNTIL (f, fake_hold_holding (hold));
  fake_runtime_kill (f->runtime, "m1");
  g_assert_cmpuint (fake_runtime_report_ends (f->runtime), ==, 1);
  fake_hold_release (hold);
  fixture_settle (f);

  /* The guest is known to be gone, and its restart policy applied. */
  g_assert_cmpint (m->status->state, ==, MV_STATE_FAILED);
  g_assert_null (m->status->vmm);
  g_assert_cmpstr (m->status->state_error, ==, "the VMM process ended unexpectedly");
}

static void
test_end_just_after_a_pause_is_noticed (Fixture *f, gconstpointer data)
{
  assert_end_after_call_is_noticed (f, MV_REQUEST_PAUSE, FAKE_RUNTIME_PAUSE);
}

static void
test_end_just_after_a_resume_is_noticed (Fixture *f, gconstpointer data)
{
  assert_end_after_call_is_noticed (f, MV_REQUEST_RESUME, FAKE_RUNTIME_RESUME);
}

static MvMachine *
load_stopped (Fixture *f, const char *id, MvRestartMode mode, gboolean stopped_by_user,
              MvState state)
{
  MvConfig *config = fixture_config (f, id, MV_DESIRED_STOPPED);
  MvStatus *status = mv_status_new ();

  config->spec->restart_mode = mode;
  config->stopped_by_user = stopped_by_user;
  status->state = state;
  status->observed_generation = config->desired_generation;
  if (state == MV_STATE_FAILED)
    {
      mv_config_set_desired (config, MV_DESIRED_RUNNING, fake_clock_real (f->clock));
      status->failed_generation = config->desired_generation;
      status->state_error = g_strdup ("interrupted while starting");
    }
  return fixture_load (f, config, status);
}

static void
test_start_on_boot (Fixture *f, gconstpointer data)
{
  MvMachine *always = load_stopped (f, "m1", MV_RESTART_ALWAYS, TRUE, MV_STATE_STOPPED);
  MvMachine *unless = load_stopped (f, "m2", MV_RESTART_UNLESS_STOPPED, FALSE, MV_STATE_STOPPED);
  MvMachine *user_stopped = load_stopped (f, "m3", MV_RESTART_UNLESS_STOPPED, TRUE,
                                          MV_STATE_STOPPED);
  MvMachine *plain = load_stopped (f, "m4", MV_RESTART_NO, FALSE, MV_STATE_STOPPED);
  MvMachine *on_failure = load_stopped (f, "m5", MV_RESTART_ON_FAILURE, FALSE, MV_STATE_STOPPED);
  MvMachine *failed = load_stopped (f, "m6", MV_RESTART_ALWAYS, FALSE, MV_STATE_FAILED);

  fixture_recover (f);
  /* What is wanted is recorded first; the reconciler acts on it once run. */
  g_assert_cmpuint (fake_log_count (f->log, "runtime.start"), ==, 0);
  g_assert_cmpint (fake_log_find (f->log, 0, "records.save_config m1 desired=running"), >=, 0);
  g_assert_cmpint (fake_log_find (f->log, 0, "records.save_config m2 desired=running"), >=, 0);
  g_assert_cmpint (fake_log_find (f->log, 0, "records.save_config m6"), >=, 0);

  mv_reconciler_run (f->rec);
  fixture_settle (f);
  g_assert_cmpint (always->status->state, ==, MV_STATE_RUNNING);
  g_assert_cmpint (unless->status->state, ==, MV_STATE_RUNNING);
  g_assert_cmpint (failed->status->state, ==, MV_STATE_RUNNING);
  g_assert_cmpint (user_stopped->status->state, ==, MV_STATE_STOPPED);
  g_assert_cmpint (plain->status->state, ==, MV_STATE_STOPPED);
  g_assert_cmpint (on_failure->status->state, ==, MV_STATE_STOPPED);
  g_assert_cmpuint (fake_log_count (f->log, "runtime.start m3"), ==, 0);
  g_assert_cmpuint (fake_log_count (f->log, "runtime.start m4"), ==, 0);
  g_assert_cmpuint (fake_log_count (f->log, "runtime.start m5"), ==, 0);
}

static void
test_pending_restart_survives_daemon_restart (Fixture *f, gconstpointer data)
{
  MvConfig *config = fixture_config (f, "m1", MV_DESIRED_RUNNING);
  MvStatus *status = mv_status_new ();
  MvMachine *m;

  config->spec->restart_mode = MV_RESTART_ON_FAILURE;
  status->state = MV_STATE_RESTARTING;
  status->restart_count = 1;
  status->finished_at = fake_clock_real (f->clock) - G_USEC_PER_SEC;
  status->next_restart_at = fake_clock_real (f->clock) + 5 * G_USEC_PER_SEC;
  m = fixture_load (f, config, status);

  fixture_recover (f);
  mv_reconciler_run (f->rec);
  fixture_settle (f);
  g_assert_true (fake_clock_has_timer (f->clock, 5000));
  fake_clock_advance (f->clock, 4999);
  fixture_settle (f);
  g_assert_cmpint (m->status->state, ==, MV_STATE_RESTARTING);
  fake_clock_advance (f->clock, 1);
  WAIT_UNTIL (f, m->status->state == MV_STATE_RUNNING);
  fixture_settle (f);
  g_assert_cmpuint (fake_log_count (f->log, "runtime.start m1"), ==, 1);
}

static void
test_remove_on_exit (Fixture *f, gconstpointer data)
{
  running_with (f, "m1", MV_RESTART_NO, 0, TRUE);
  running_with (f, "m2", MV_RESTART_NO, 0, TRUE);

  g_assert_true (fake_runtime_end_vmm (f->runtime, "m1", TRUE, 0, "the guest powered off"));
  crash (f, "m2");
  WAIT_UNTIL (f, recorder_was_removed (f->recorder, "m1") &&
                 recorder_was_removed (f->recorder, "m2"));
  g_assert_false (fake_records_exist (f->records, "m1"));
  g_assert_false (fake_records_exist (f->records, "m2"));
  g_assert_cmpuint (mv_reconciler_count (f->rec), ==, 0);
  fake_assert_order (f->log, "vmm.ended m1", "runtime.destroy m1", "network.release m1",
                     "records.remove m1");
}

static void
test_remove_on_exit_waits_for_restarts (Fixture *f, gconstpointer data)
{
  MvMachine *m = running_with (f, "m1", MV_RESTART_ON_FAILURE, 0, TRUE);

  crash (f, "m1");
  assert_restarts_after (f, m, FIXTURE_BACKOFF_MS);
  g_assert_false (recorder_was_removed (f->recorder, "m1"));
  g_assert_true (fake_runtime_end_vmm (f->runtime, "m1", TRUE, 0, "the guest powered off"));
  WAIT_UNTIL (f, recorder_was_removed (f->recorder, "m1"));
}

/* Seed 002: "deletes the instance once it stops": a user's Stop too. The
 * Stop is answered as reached before the machine goes; a machine merely
 * defined with the flag stays. */
static void
test_remove_on_exit_after_stop (Fixture *f, gconstpointer data)
{
  MvMachine *m = running_with (f, "m1", MV_RESTART_ALWAYS, 0, TRUE);
  MvSpec *idle = fixture_spec ("m2");
  g_autoptr (GError) error = NULL;
  Waiter *stop;

  idle->remove_on_exit = TRUE;
  fixture_define (f, idle);
  WAIT_UNTIL (f, m->status->state == MV_STATE_RUNNING);
  error = fixture_request (f, m, MV_REQUEST_STOP);
  g_assert_no_error (error);
  /* As the bus's waiting Stop call. */
  stop = recorder_wait (f->recorder, m);
  WAIT_UNTIL (f, recorder_was_removed (f->recorder, "m1"));
  g_assert_true (stop->done);
  g_assert_no_error (stop->error);
  fake_assert_order (f->log, "runtime.stop m1", "runtime.destroy m1", "records.remove m1");
  fixture_settle (f);
  g_assert_false (recorder_was_removed (f->recorder, "m2"));
  g_assert_true (fake_records_exist (f->records, "m2"));
}

int
main (int argc, char **argv)
{
  fixture_init (&argc, &argv);
  FIXTURE_TEST ("/reconcile/restart/on-failure-backs-off-and-gives-up",
                test_on_failure_backs_off_and_gives_up);
  FIXTURE_TEST ("/reconcile/restart/failed-restart-is-another-end",
                test_failed_restart_is_another_end);
  FIXTURE_TEST ("/reconcile/restart/clean-exit-with-on-failure-ends-stopped",
                test_clean_exit_with_on_failure_ends_stopped);
  FIXTURE_TEST ("/reconcile/restart/failing-exit-code-with-on-failure-restarts",
                test_failing_exit_code_with_on_failure_restarts);
  FIXTURE_TEST ("/reconcile/restart/always-restarts-a-clean-exit",
                test_always_restarts_a_clean_exit);
  FIXTURE_TEST ("/reconcile/restart/no-policy-crash-fails", test_no_policy_crash_fails);
  FIXTURE_TEST ("/reconcile/restart/stop-cancels-a-pending-restart",
                test_stop_cancels_a_pending_restart);
  FIXTURE_TEST ("/reconcile/restart/end-during-a-step-is-left-to-it",
                test_end_during_a_step_is_left_to_it);
  FIXTURE_TEST ("/reconcile/restart/end-just-after-a-pause-is-noticed",
                test_end_just_after_a_pause_is_noticed);
  FIXTURE_TEST ("/reconcile/restart/end-just-after-a-resume-is-noticed",
                test_end_just_after_a_resume_is_noticed);
  FIXTURE_TEST ("/reconcile/restart/start-on-boot", test_start_on_boot);
  FIXTURE_TEST ("/reconcile/restart/pending-restart-survives-daemon-restart",
                test_pending_restart_survives_daemon_restart);
  FIXTURE_TEST ("/reconcile/restart/remove-on-exit", test_remove_on_exit);
  FIXTURE_TEST ("/reconcile/restart/remove-on-exit-after-stop", test_remove_on_exit_after_stop);
  FIXTURE_TEST ("/reconcile/restart/remove-on-exit-waits-for-restarts",
                test_remove_on_exit_waits_for_restarts);
  return g_test_run ();
}
