/* What the daemon waits for before it frees the host layers:
 * mv_reconciler_busy() holds while any work the reconciler started runs
 * in a worker thread, whether a step, a recovery, or the deletion of a
 * saved state moved aside. */
#include "fixture.h"

static void
test_busy_during_a_step (Fixture *f, gconstpointer data)
{
  MvMachine *m = fixture_machine (f, "m1");
  FakeHold *hold = fake_runtime_hold (f->runtime);
  g_autoptr (GError) error = NULL;

  fake_hold_arm (hold, FAKE_RUNTIME_START);
  g_assert_true (mv_reconciler_request (f->rec, m, MV_REQUEST_START, &error));
  mv_reconciler_kick (m);
  WAIT_UNTIL (f, fake_hold_holding (hold));
  g_assert_true (mv_reconciler_busy (f->rec));
  g_assert_cmpint (m->status->state, ==, MV_STATE_STARTING);
  fake_hold_release (hold);
  fixture_settle (f);
  g_assert_cmpint (m->status->state, ==, MV_STATE_RUNNING);
}

static void
test_busy_during_recovery (Fixture *f, gconstpointer data)
{
  MvConfig *config = fixture_config (f, "m1", MV_DESIRED_RUNNING);
  MvStatus *status = mv_status_new ();
  FakeHold *hold = fake_runtime_hold (f->runtime);

  status->state = MV_STATE_RUNNING;
  status->vmm = fake_runtime_spawn (f->runtime, "m1", MV_VMM_RUNNING);
  fixture_load (f, config, status);
  fake_hold_arm (hold, FAKE_RUNTIME_PROBE);
  mv_reconciler_recover (f->rec, NULL, NULL);
  WAIT_UNTIL (f, fake_hold_holding (hold));
  g_assert_true (mv_reconciler_busy (f->rec));
  fake_hold_release (hold);
  fixture_settle (f);
}

static void
test_busy_while_a_woken_guest_is_swept (Fixture *f, gconstpointer data)
{
  MvMachine *m = fixture_on_standby (f, "m1");
  FakeHold *hold = fake_storage_hold (f->storage);
  g_autoptr (GError) error = NULL;

  fake_hold_arm (hold, FAKE_STORAGE_SWEEP);
  error = fixture_request (f, m, MV_REQUEST_START);
  g_assert_no_error (error);
  WAIT_UNTIL (f, fake_hold_holding (hold));
  /* The step is over, but the storage layer is still in use. */
  g_assert_false (m->busy);
  g_assert_true (mv_reconciler_busy (f->rec));
  fake_hold_release (hold);
  fixture_settle (f);
  g_assert_cmpuint (fake_storage_count (f->storage, FAKE_STORAGE_SWEEP), ==, 1);
}

static void
test_busy_while_recovery_sweeps (Fixture *f, gconstpointer data)
{
  FakeHold *hold = fake_storage_hold (f->storage);

  MvMachine *m = fixture_load (f, fixture_config (f, "m1", MV_DESIRED_STOPPED), mv_status_new ());

  /* Its directory holds more than its records: a crash may have left
   * something there. */
  m->other_files = TRUE;
  fake_hold_arm (hold, FAKE_STORAGE_SWEEP);
  fixture_recover (f);
  WAIT_UNTIL (f, fake_hold_holding (hold));
  g_assert_true (mv_reconciler_busy (f->rec));
  fake_hold_release (hold);
  fixture_settle (f);
  g_assert_cmpuint (fake_storage_count (f->storage, FAKE_STORAGE_SWEEP), ==, 1);
}

static void
test_shutdown_answers_waiters (Fixture *f, gconstpointer data)
{
  MvMachine *m = fixture_machine (f, "m1");
  g_autoptr (GError) error = NULL;
  Waiter *waiter;

  /* A wish the reconciler does not get to before it is freed. */
  g_hash_table_add (f->migrating, g_strdup ("m1"));
  g_assert_true (mv_reconciler_set_desired (f->rec, m, MV_DESIRED_RUNNING, &error));
  waiter = recorder_wait (f->recorder, m);
  mv_reconciler_kick (m);
  fixture_settle (f);
  g_assert_false (waiter->done);

  mv_reconciler_free (f->rec);
  g_assert_true (waiter->done);
  g_assert_error (waiter->error, MV_ERROR, MV_ERROR_UNAVAILABLE);
  f->rec = mv_reconciler_new (&f->host, &f->options, &f->recorder->observer,
                              fake_clock_iface (f->clock));
}

static gboolean
named (GPtrArray *ids, const char *id)
{
  return g_ptr_array_find_with_equal_func (ids, id, g_str_equal, NULL);
}

/* The next rotation round's look, a while after the last, which was a
 * while after the one before: *@since is when the last looked. */
static GPtrArray *
look_again (Fixture *f, gint64 *since)
{
  fake_clock_advance (f->clock, 1000);
  *since = mv_reconciler_monotonic (f->rec);
  fake_clock_advance (f->clock, 1000);
  return mv_reconciler_active_since (f->rec, *since);
}

/* Whose logs a rotation round looks at (mv_reconciler_active_since):
 * every machine the first time; then the machines that hold a VMM, and
 * those whose step or VMM ended since the last look, but not one that
 * has been still since. */
static void
test_active_since (Fixture *f, gconstpointer data)
{
  MvMachine *stopped = fixture_running (f, "m4");
  g_autoptr (GPtrArray) first = NULL, quiet = NULL, after = NULL, later = NULL;
  g_autoptr (GError) error = NULL;
  gint64 since;

  fixture_machine (f, "m1");
  fixture_running (f, "m2");
  fixture_running (f, "m3");
  first = mv_reconciler_active_since (f->rec, 0);
  g_assert_cmpuint (first->len, ==, 4);

  quiet = look_again (f, &since);
  g_assert_cmpuint (quiet->len, ==, 3);
  g_assert_false (named (quiet, "m1"));

  /* m4 is stopped and m3's VMM ends by itself: both stop writing, after
   * the last look. */
  error = fixture_request (f, stopped, MV_REQUEST_STOP);
  g_assert_no_error (error);
  g_assert_null (stopped->status->vmm);
  g_assert_true (fake_runtime_end_vmm (f->runtime, "m3", TRUE, 0, "the guest powered off"));
  fixture_settle (f);
  g_assert_null (mv_reconciler_lookup (f->rec, "m3")->status->vmm);
  after = mv_reconciler_active_since (f->rec, since);
  g_assert_cmpuint (after->len, ==, 3);
  g_assert_true (named (after, "m2") && named (after, "m3") && named (after, "m4"));

  later = look_again (f, &since);
  g_assert_cmpuint (later->len, ==, 1);
  g_assert_true (named (later, "m2"));
}

int
main (int argc, char **argv)
{
  fixture_init (&argc, &argv);
  FIXTURE_TEST ("/reconcile/busy/during-a-step", test_busy_during_a_step);
  FIXTURE_TEST ("/reconcile/busy/during-recovery", test_busy_during_recovery);
  FIXTURE_TEST ("/reconcile/busy/while-a-woken-guest-is-swept",
                test_busy_while_a_woken_guest_is_swept);
  FIXTURE_TEST ("/reconcile/busy/while-recovery-sweeps", test_busy_while_recovery_sweeps);
  FIXTURE_TEST ("/reconcile/busy/shutdown-answers-waiters", test_shutdown_answers_waiters);
  FIXTURE_TEST ("/reconcile/busy/active-since", test_active_since);
  return g_test_run ();
}
