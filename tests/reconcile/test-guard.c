/* The migration guard leaves a machine alone, and a standby that fails
 * asks the VMM, in the worker, what became of the guest. */
#include "fixture.h"

#include <string.h>

static void
test_migration_guard_leaves_machine_alone (Fixture *f, gconstpointer data)
{
  MvMachine *moving = fixture_machine (f, "m1");
  MvMachine *staying = fixture_machine (f, "m2");
  g_autoptr (GError) error = NULL;
  Waiter *waiter;

  g_hash_table_add (f->migrating, g_strdup ("m1"));
  mv_reconciler_run (f->rec);
  g_assert_true (mv_reconciler_set_desired (f->rec, moving, MV_DESIRED_RUNNING, &error));
  waiter = recorder_wait (f->recorder, moving);
  mv_reconciler_kick (moving);

  /* Another machine is reconciled as usual... */
  error = fixture_request (f, staying, MV_REQUEST_START);
  g_assert_no_error (error);
  g_assert_cmpint (staying->status->state, ==, MV_STATE_RUNNING);

  /* ...the migrating one is left alone, through resyncs. */
  for (guint i = 0; i < 3; i++)
    {
      fake_clock_advance (f->clock, FIXTURE_RESYNC_SECONDS * 1000);
      fixture_settle (f);
    }
  g_assert_cmpint (fake_log_find (f->log, 0, "runtime.start m1"), <, 0);
  g_assert_cmpint (fake_log_find (f->log, 0, "records.save_status m1"), <, 0);
  g_assert_false (waiter->done);
  g_assert_cmpint (moving->status->state, ==, MV_STATE_STOPPED);

  /* Once the migration is over, the next resync catches up. */
  g_hash_table_remove (f->migrating, "m1");
  fake_clock_advance (f->clock, FIXTURE_RESYNC_SECONDS * 1000);
  WAIT_UNTIL (f, waiter->done);
  g_assert_no_error (waiter->error);
  g_assert_cmpint (moving->status->state, ==, MV_STATE_RUNNING);
}

static void
test_migration_guard_stops_idle_sampling (Fixture *f, gconstpointer data)
{
  MvSpec *spec = fixture_spec ("m1");
  MvMachine *m;
  g_autoptr (GError) error = NULL;

  spec->standby_after_seconds = 2;
  m = fixture_define (f, spec);
  error = fixture_request (f, m, MV_REQUEST_START);
  g_assert_no_error (error);
  g_hash_table_add (f->migrating, g_strdup ("m1"));
  mv_reconciler_run (f->rec);
  for (guint i = 0; i < 10; i++)
    {
      fake_clock_advance (f->clock, 1000);
      fixture_settle (f);
    }
  g_assert_cmpint (m->status->state, ==, MV_STATE_RUNNING);
  g_assert_cmpuint (fake_log_count (f->log, "runtime.usage m1"), ==, 0);
  g_assert_cmpuint (fake_log_count (f->log, "runtime.save m1"), ==, 0);
}

/* A Standby of a guest whose save fails with @message; @ends_vmm: the
 * VMM is gone afterwards. */
static GError *
failed_standby (Fixture *f, MvMachine *m, const char *message, gboolean ends_vmm)
{
  fake_runtime_fail_next (f->runtime, FAKE_RUNTIME_SAVE, message, ends_vmm);
  return fixture_request (f, m, MV_REQUEST_STANDBY);
}

static void
assert_probed_in_worker (Fixture *f)
{
  g_assert_cmpuint (fake_runtime_probes (f->runtime), ==, 1);
  g_assert_nonnull (fake_runtime_probe_thread (f->runtime));
  g_assert_false (fake_runtime_probe_thread (f->runtime) == g_thread_self ());
  /* What was staged for the frozen guest does not stay. */
  fake_assert_order (f->log, "storage.stage m1", "runtime.save m1", "storage.discard m1",
                     "runtime.probe m1");
  g_assert_false (fake_storage_has_staged (f->storage, "m1"));
  g_assert_false (fake_storage_has_whole (f->storage, "m1"));
}

static void
test_failed_standby_vmm_runs_on (Fixture *f, gconstpointer data)
{
  MvMachine *m = fixture_running (f, "m1");
  g_autoptr (GError) error = failed_standby (f, m, "Could not write the guest's memory", FALSE);
  g_autoptr (MvStatus) recorded = NULL;

  g_assert_error (error, MV_ERROR, MV_ERROR_FAILED);
  g_assert_cmpstr (error->message, ==, "Could not write the guest's memory");
  assert_probed_in_worker (f);
  g_assert_cmpint (m->status->state, ==, MV_STATE_RUNNING);
  g_assert_cmpstr (m->status->state_error, ==, "Could not write the guest's memory");
  g_assert_nonnull (m->status->vmm);
  g_assert_null (m->status->saved_state);
  g_assert_true (fake_runtime_watched (f->runtime, "m1"));
  recorded = fake_records_status (f->records, "m1");
  g_assert_cmpint (recorded->state, ==, MV_STATE_RUNNING);
  g_assert_null (recorded->phase);
}

static void
test_failed_standby_vmm_stays_paused (Fixture *f, gconstpointer data)
{
  MvMachine *m = fixture_running (f, "m1");
  g_autoptr (GError) paused = fixture_request (f, m, MV_REQUEST_PAUSE);
  g_autoptr (GError) error = NULL;

  g_assert_no_error (paused);
  error = failed_standby (f, m, "Could not write the guest's memory", FALSE);
  g_assert_nonnull (error);
  assert_probed_in_worker (f);
  g_assert_cmpint (m->status->state, ==, MV_STATE_PAUSED);
  g_assert_cmpint (fake_runtime_vmm_state (f->runtime, "m1"), ==, MV_VMM_PAUSED);
}

static void
test_failed_standby_vmm_gone (Fixture *f, gconstpointer data)
{
  MvMachine *m = fixture_running (f, "m1");
  g_autoptr (GError) error = failed_standby (f, m, "The VMM died while saving", TRUE);

  g_assert_error (error, MV_ERROR, MV_ERROR_FAILED);
  assert_probed_in_worker (f);
  g_assert_cmpint (m->status->state, ==, MV_STATE_FAILED);
  g_assert_cmpstr (m->status->state_error, ==, "The VMM died while saving");
  g_assert_null (m->status->vmm);
  g_assert_null (m->status->saved_state);
  g_assert_false (fake_runtime_watched (f->runtime, "m1"));

  /* The next VMM is watched, and the end of the one that died while
   * saving, reported late, is not taken for its end. */
  g_clear_error (&error);
  error = fixture_request (f, m, MV_REQUEST_START);
  g_assert_no_error (error);
  g_assert_true (fake_runtime_watched (f->runtime, "m1"));
  fake_runtime_report_ends (f->runtime);
  fixture_settle (f);
  g_assert_cmpint (m->status->state, ==, MV_STATE_RUNNING);
  g_assert_nonnull (m->status->vmm);
  g_assert_cmpint (fake_runtime_vmm_state (f->runtime, "m1"), ==, MV_VMM_RUNNING);
  g_assert_true (fake_runtime_end_vmm (f->runtime, "m1", FALSE, 0, "the VMM crashed"));
  g_assert_cmpint (m->status->state, ==, MV_STATE_FAILED);
  g_assert_cmpstr (m->status->state_error, ==, "the VMM crashed");
}

static void
test_standby_unsupported (Fixture *f, gconstpointer data)
{
  MvMachine *m = fixture_running (f, "m1");
  g_autoptr (GError) error = NULL;

  fake_runtime_set_can_freeze (f->runtime, FALSE);
  error = fixture_request (f, m, MV_REQUEST_STANDBY);
  g_assert_error (error, MV_ERROR, MV_ERROR_UNSUPPORTED);
  g_assert_nonnull (strstr (error->message, "cannot freeze"));
  g_assert_cmpuint (fake_log_count (f->log, "storage.stage m1"), ==, 0);
  g_assert_cmpint (m->status->state, ==, MV_STATE_RUNNING);
  g_assert_true (fake_runtime_watched (f->runtime, "m1"));
}

int
main (int argc, char **argv)
{
  fixture_init (&argc, &argv);
  FIXTURE_TEST ("/reconcile/guard/migration-leaves-machine-alone",
                test_migration_guard_leaves_machine_alone);
  FIXTURE_TEST ("/reconcile/guard/migration-stops-idle-sampling",
                test_migration_guard_stops_idle_sampling);
  FIXTURE_TEST ("/reconcile/standby-failure/vmm-runs-on", test_failed_standby_vmm_runs_on);
  FIXTURE_TEST ("/reconcile/standby-failure/vmm-stays-paused", test_failed_standby_vmm_stays_paused);
  FIXTURE_TEST ("/reconcile/standby-failure/vmm-gone", test_failed_standby_vmm_gone);
  FIXTURE_TEST ("/reconcile/standby-failure/unsupported", test_standby_unsupported);
  return g_test_run ();
}
