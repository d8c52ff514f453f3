/* Recovery at startup (recover.c): records a daemon left mid-operation
 * are finished or undone from what the host calls find, in workers; the
 * phase stays on disk until that is done, so a second crash finds it
 * again. */
#include "fixture.h"

#define SAVED_DIR "/var/lib/fake/machines/m1/saved"

/* A status a daemon wrote before the host call of @phase, in @state. */
static MvStatus *
interrupted (MvState state, const char *phase)
{
  MvStatus *status = mv_status_new ();

  status->state = state;
  status->phase = g_strdup (phase);
  status->operation_id = mv_id_new ();
  return status;
}

static void
assert_recorded (Fixture *f, MvMachine *m)
{
  g_autoptr (MvStatus) recorded = fake_records_status (f->records, m->id);

  fixture_assert_status_recorded (f, m);
  g_assert_null (recorded->phase);
  g_assert_null (recorded->operation_id);
}

static void
test_interrupted_start (Fixture *f, gconstpointer data)
{
  MvConfig *config = fixture_config (f, "m1", MV_DESIRED_RUNNING);
  MvStatus *status = interrupted (MV_STATE_STARTING, "start");
  FakeHold *hold = fake_runtime_hold (f->runtime);
  g_autoptr (JsonObject) unrecorded = fake_runtime_spawn (f->runtime, "m1", MV_VMM_RUNNING);
  g_autoptr (MvStatus) during = NULL;
  MvMachine *m = fixture_load (f, config, status);

  /* Until what the start left is ended, the records still say so. */
  fake_hold_arm (hold, FAKE_RUNTIME_STOP);
  mv_reconciler_recover (f->rec, NULL, NULL);
  WAIT_UNTIL (f, fake_hold_holding (hold));
  during = fake_records_status (f->records, "m1");
  g_assert_cmpstr (during->phase, ==, "start");
  g_assert_cmpint (during->state, ==, MV_STATE_STARTING);
  fake_hold_release (hold);
  fixture_settle (f);

  /* The VMM the start may have left, recorded or not, is ended. */
  g_assert_cmpuint (fake_log_count (f->log, "runtime.stop m1 force"), ==, 1);
  g_assert_cmpint (fake_runtime_vmm_state (f->runtime, "m1"), ==, MV_VMM_GONE);
  g_assert_cmpint (m->status->state, ==, MV_STATE_FAILED);
  g_assert_cmpstr (m->status->state_error, ==, "interrupted while starting");
  assert_recorded (f, m);

  /* It is not started again until asked. */
  mv_reconciler_run (f->rec);
  fixture_settle (f);
  g_assert_cmpuint (fake_log_count (f->log, "runtime.start m1"), ==, 0);
}

static void
test_interrupted_restore (Fixture *f, gconstpointer data)
{
  MvConfig *config = fixture_config (f, "m1", MV_DESIRED_RUNNING);
  MvStatus *status = interrupted (MV_STATE_STARTING, "restore");
  MvMachine *m;

  status->saved_state = g_strdup (SAVED_DIR);
  fake_storage_put (f->storage, "m1", TRUE);
  m = fixture_load (f, config, status);
  fixture_recover (f);

  /* The saved state is kept: the guest is on standby, as before. */
  g_assert_cmpuint (fake_log_count (f->log, "runtime.stop m1 force"), ==, 1);
  g_assert_cmpint (m->status->state, ==, MV_STATE_STANDBY);
  g_assert_cmpstr (m->status->state_error, ==, "interrupted while waking from standby");
  g_assert_cmpstr (m->status->saved_state, ==, SAVED_DIR);
  g_assert_true (fake_storage_has_whole (f->storage, "m1"));
  assert_recorded (f, m);

  /* It is still wanted running, so the wake is tried again from it. */
  mv_reconciler_run (f->rec);
  fixture_settle (f);
  g_assert_cmpuint (fake_log_count (f->log, "runtime.restore m1 " SAVED_DIR), ==, 1);
  g_assert_cmpint (m->status->state, ==, MV_STATE_RUNNING);
}

static void
test_interrupted_restore_without_saved_state (Fixture *f, gconstpointer data)
{
  MvConfig *config = fixture_config (f, "m1", MV_DESIRED_RUNNING);
  MvStatus *status = interrupted (MV_STATE_STARTING, "restore");
  MvMachine *m;

  status->saved_state = g_strdup (SAVED_DIR);
  m = fixture_load (f, config, status);
  fixture_recover (f);
  g_assert_cmpint (m->status->state, ==, MV_STATE_FAILED);
  g_assert_cmpstr (m->status->state_error, ==, "interrupted while starting");
  assert_recorded (f, m);
}

static void
test_interrupted_stop_is_finished (Fixture *f, gconstpointer data)
{
  MvConfig *config = fixture_config (f, "m1", MV_DESIRED_STOPPED);
  MvStatus *status = interrupted (MV_STATE_STOPPING, "stop");
  MvMachine *m;

  status->vmm = fake_runtime_spawn (f->runtime, "m1", MV_VMM_RUNNING);
  status->saved_state = g_strdup (SAVED_DIR);
  fake_storage_put (f->storage, "m1", TRUE);
  m = fixture_load (f, config, status);
  fixture_recover (f);

  fake_assert_order (f->log, "runtime.stop m1 force", "storage.discard m1");
  g_assert_cmpint (fake_runtime_vmm_state (f->runtime, "m1"), ==, MV_VMM_GONE);
  g_assert_false (fake_storage_has_whole (f->storage, "m1"));
  g_assert_cmpint (m->status->state, ==, MV_STATE_STOPPED);
  g_assert_null (m->status->state_error);
  g_assert_null (m->status->vmm);
  g_assert_null (m->status->saved_state);
  g_assert_false (fake_runtime_watched (f->runtime, "m1"));
  assert_recorded (f, m);
}

static void
test_interrupted_stop_of_a_restart_fails (Fixture *f, gconstpointer data)
{
  MvConfig *config = fixture_config (f, "m1", MV_DESIRED_RUNNING);
  MvStatus *status = interrupted (MV_STATE_STOPPING, "force-stop");
  MvMachine *m;

  status->vmm = fake_runtime_spawn (f->runtime, "m1", MV_VMM_RUNNING);
  m = fixture_load (f, config, status);
  fixture_recover (f);
  g_assert_cmpint (fake_runtime_vmm_state (f->runtime, "m1"), ==, MV_VMM_GONE);
  g_assert_cmpint (m->status->state, ==, MV_STATE_FAILED);
  g_assert_cmpstr (m->status->state_error, ==, "interrupted while stopping");
  assert_recorded (f, m);
}

/* A standby interrupted after the VMM is gone, the frozen guest made
 * whole (@whole) or only staged. */
static MvMachine *
load_interrupted_standby (Fixture *f, MvVmmState vmm, gboolean whole)
{
  MvConfig *config = fixture_config (f, "m1", MV_DESIRED_RUNNING);
  MvStatus *status = interrupted (MV_STATE_RUNNING, "standby");

  mv_config_set_standby (config, TRUE, fake_clock_real (f->clock));
  status->vmm = fake_runtime_spawn (f->runtime, "m1", vmm);
  fake_storage_put (f->storage, "m1", whole);
  return fixture_load (f, config, status);
}

static void
test_interrupted_standby_made_whole (Fixture *f, gconstpointer data)
{
  MvMachine *m = load_interrupted_standby (f, MV_VMM_GONE, TRUE);

  fixture_recover (f);
  g_assert_cmpuint (fake_runtime_probes (f->runtime), ==, 1);
  g_assert_false (fake_runtime_probe_thread (f->runtime) == g_thread_self ());
  g_assert_cmpuint (fake_log_count (f->log, "storage.discard m1"), ==, 0);
  g_assert_cmpint (m->status->state, ==, MV_STATE_STANDBY);
  g_assert_null (m->status->state_error);
  g_assert_cmpstr (m->status->saved_state, ==, SAVED_DIR);
  g_assert_null (m->status->vmm);
  g_assert_true (fake_storage_has_whole (f->storage, "m1"));
  assert_recorded (f, m);

  /* Standby is what was wanted: nothing more to do. */
  mv_reconciler_run (f->rec);
  fixture_settle (f);
  g_assert_cmpuint (fake_log_count (f->log, "runtime.restore m1"), ==, 0);
  g_assert_cmpuint (fake_log_count (f->log, "runtime.start m1"), ==, 0);
}

static void
test_interrupted_standby_only_staged (Fixture *f, gconstpointer data)
{
  MvMachine *m = load_interrupted_standby (f, MV_VMM_GONE, FALSE);

  fixture_recover (f);
  /* Half a frozen guest is no guest: it goes, and the machine failed. */
  g_assert_cmpuint (fake_log_count (f->log, "storage.discard m1"), ==, 1);
  g_assert_false (fake_storage_has_staged (f->storage, "m1"));
  g_assert_cmpint (m->status->state, ==, MV_STATE_FAILED);
  g_assert_cmpstr (m->status->state_error, ==,
                   "interrupted while going on standby; the guest was lost");
  g_assert_null (m->status->saved_state);
  assert_recorded (f, m);
}

static void
test_interrupted_standby_vmm_still_runs (Fixture *f, gconstpointer data)
{
  MvMachine *m = load_interrupted_standby (f, MV_VMM_RUNNING, FALSE);

  fixture_recover (f);
  /* The guest was never frozen: it runs on, and what was staged goes. */
  g_assert_cmpuint (fake_log_count (f->log, "storage.discard m1"), ==, 1);
  g_assert_false (fake_storage_has_staged (f->storage, "m1"));
  g_assert_cmpint (m->status->state, ==, MV_STATE_RUNNING);
  g_assert_nonnull (m->status->vmm);
  g_assert_true (fake_runtime_watched (f->runtime, "m1"));
  assert_recorded (f, m);
}

static void
test_adopts_what_runs (Fixture *f, gconstpointer data)
{
  MvConfig *running = fixture_config (f, "m1", MV_DESIRED_RUNNING);
  MvConfig *paused = fixture_config (f, "m2", MV_DESIRED_PAUSED);
  MvStatus *s1 = mv_status_new ();
  MvStatus *s2 = mv_status_new ();
  MvMachine *m1, *m2;

  s1->state = MV_STATE_RUNNING;
  s1->vmm = fake_runtime_spawn (f->runtime, "m1", MV_VMM_RUNNING);
  s1->observed_generation = running->desired_generation;
  /* A pause was under way: the VMM says what came of it. */
  s2->state = MV_STATE_RUNNING;
  s2->phase = g_strdup ("pause");
  s2->operation_id = mv_id_new ();
  s2->vmm = fake_runtime_spawn (f->runtime, "m2", MV_VMM_PAUSED);
  m1 = fixture_load (f, running, s1);
  m2 = fixture_load (f, paused, s2);

  fixture_recover (f);
  g_assert_cmpint (m1->status->state, ==, MV_STATE_RUNNING);
  g_assert_cmpint (m2->status->state, ==, MV_STATE_PAUSED);
  g_assert_true (fake_runtime_watched (f->runtime, "m1"));
  g_assert_true (fake_runtime_watched (f->runtime, "m2"));
  g_assert_cmpuint (fake_log_count (f->log, "runtime.stop"), ==, 0);
  assert_recorded (f, m2);
  /* Nothing changed for m1, so nothing was written. */
  g_assert_cmpint (fake_log_find (f->log, 0, "records.save_status m1"), <, 0);

  mv_reconciler_run (f->rec);
  fixture_settle (f);
  g_assert_cmpuint (fake_log_count (f->log, "runtime.start"), ==, 0);
  g_assert_cmpuint (fake_log_count (f->log, "runtime.pause"), ==, 0);
}

static void
test_vmm_ended_while_away (Fixture *f, gconstpointer data)
{
  MvConfig *plain = fixture_config (f, "m1", MV_DESIRED_RUNNING);
  MvConfig *restarted = fixture_config (f, "m2", MV_DESIRED_RUNNING);
  MvStatus *s1 = mv_status_new ();
  MvStatus *s2 = mv_status_new ();
  MvMachine *m1, *m2;

  restarted->spec->restart_mode = MV_RESTART_ON_FAILURE;
  s1->state = s2->state = MV_STATE_RUNNING;
  s1->vmm = fake_runtime_spawn (f->runtime, "m1", MV_VMM_GONE);
  s2->vmm = fake_runtime_spawn (f->runtime, "m2", MV_VMM_GONE);
  m1 = fixture_load (f, plain, s1);
  m2 = fixture_load (f, restarted, s2);

  fixture_recover (f);
  g_assert_cmpint (m1->status->state, ==, MV_STATE_FAILED);
  g_assert_cmpstr (m1->status->state_error, ==, "the VMM ended while the daemon was not running");
  g_assert_false (m1->status->has_exit_code);
  g_assert_null (m1->status->vmm);
  assert_recorded (f, m1);

  /* Its restart policy applies, as to any end. */
  g_assert_cmpint (m2->status->state, ==, MV_STATE_RESTARTING);
  g_assert_cmpuint (m2->status->restart_count, ==, 1);
  g_assert_true (fake_clock_has_timer (f->clock, FIXTURE_BACKOFF_MS));
  assert_recorded (f, m2);
  fake_clock_advance (f->clock, FIXTURE_BACKOFF_MS);
  WAIT_UNTIL (f, m2->status->state == MV_STATE_RUNNING);
  fixture_settle (f);
}

static void
test_interrupted_destroy_resumes (Fixture *f, gconstpointer data)
{
  MvConfig *config = fixture_config (f, "m1", MV_DESIRED_DESTROYED);
  MvStatus *status = interrupted (MV_STATE_STOPPED, "destroy-network");

  g_ptr_array_add (status->destroyed, g_strdup ("vmm"));
  g_ptr_array_add (status->destroyed, g_strdup ("runtime"));
  fixture_load (f, config, status);

  fixture_recover (f);
  mv_reconciler_run (f->rec);
  WAIT_UNTIL (f, recorder_was_removed (f->recorder, "m1"));
  /* What was given back already is left alone; the rest goes in order. */
  g_assert_cmpuint (fake_log_count (f->log, "runtime.stop m1"), ==, 0);
  g_assert_cmpuint (fake_log_count (f->log, "runtime.destroy m1"), ==, 0);
  g_assert_cmpuint (fake_log_count (f->log, "records.remove_runtime_dir m1"), ==, 0);
  fake_assert_order (f->log, "network.release m1", "storage.discard m1", "storage.sweep m1",
                     "records.remove m1");
  fixture_assert_recorded_before (f, 0, "m1", "network.release", "destroy-network", NULL);
  g_assert_false (fake_records_exist (f->records, "m1"));
  g_assert_null (mv_reconciler_lookup (f->rec, "m1"));
}

static void
test_at_rest_is_not_rewritten (Fixture *f, gconstpointer data)
{
  MvStatus *standby = mv_status_new ();
  MvConfig *asleep = fixture_config (f, "m2", MV_DESIRED_RUNNING);

  mv_config_set_standby (asleep, TRUE, fake_clock_real (f->clock));
  standby->state = MV_STATE_STANDBY;
  standby->saved_state = g_strdup ("/var/lib/fake/machines/m2/saved");
  fake_storage_put (f->storage, "m2", TRUE);
  fixture_load (f, fixture_config (f, "m1", MV_DESIRED_STOPPED), mv_status_new ());
  /* Its frozen guest is in its directory beside the records. */
  fixture_load (f, asleep, standby)->other_files = TRUE;

  fixture_recover (f);
  fixture_settle (f);
  g_assert_cmpuint (fake_records_count (f->records, FAKE_RECORDS_SAVE_STATUS), ==, 0);
  g_assert_cmpuint (fake_records_count (f->records, FAKE_RECORDS_SAVE_CONFIG), ==, 0);
  g_assert_cmpuint (fake_runtime_probes (f->runtime), ==, 0);
  /* What a crash left of retired saved states is swept where there may
   * be some: not in a directory that held only records. */
  g_assert_cmpuint (fake_log_count (f->log, "storage.sweep m1"), ==, 0);
  g_assert_cmpuint (fake_log_count (f->log, "storage.sweep m2"), ==, 1);
}

int
main (int argc, char **argv)
{
  fixture_init (&argc, &argv);
  FIXTURE_TEST ("/reconcile/recover/interrupted-start", test_interrupted_start);
  FIXTURE_TEST ("/reconcile/recover/interrupted-restore", test_interrupted_restore);
  FIXTURE_TEST ("/reconcile/recover/interrupted-restore-without-saved-state",
                test_interrupted_restore_without_saved_state);
  FIXTURE_TEST ("/reconcile/recover/interrupted-stop-is-finished",
                test_interrupted_stop_is_finished);
  FIXTURE_TEST ("/reconcile/recover/interrupted-stop-of-a-restart-fails",
                test_interrupted_stop_of_a_restart_fails);
  FIXTURE_TEST ("/reconcile/recover/interrupted-standby-made-whole",
                test_interrupted_standby_made_whole);
  FIXTURE_TEST ("/reconcile/recover/interrupted-standby-only-staged",
                test_interrupted_standby_only_staged);
  FIXTURE_TEST ("/reconcile/recover/interrupted-standby-vmm-still-runs",
                test_interrupted_standby_vmm_still_runs);
  FIXTURE_TEST ("/reconcile/recover/adopts-what-runs", test_adopts_what_runs);
  FIXTURE_TEST ("/reconcile/recover/vmm-ended-while-away", test_vmm_ended_while_away);
  FIXTURE_TEST ("/reconcile/recover/interrupted-destroy-resumes", test_interrupted_destroy_resumes);
  FIXTURE_TEST ("/reconcile/recover/at-rest-is-not-rewritten", test_at_rest_is_not_rewritten);
  return g_test_run ();
}
