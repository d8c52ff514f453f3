/* Seed 000's Reconciliation table, row by row, through the reconciler:
 * what each desired power state does from each state it can be reached
 * from, and what the host is asked to do on the way. */
#include "fixture.h"

#define SAVED_DIR "/var/lib/fake/machines/m1/saved"

/* running ----------------------------------------------------------------- */

static void
test_running_from_stopped_starts (Fixture *f, gconstpointer data)
{
  MvMachine *m = fixture_machine (f, "m1");
  g_autoptr (GError) error = NULL;
  g_autoptr (MvStatus) recorded = NULL;
  guint props;

  recorder_clear_props (f->recorder, "m1");
  error = fixture_request (f, m, MV_REQUEST_START);

  g_assert_no_error (error);
  fake_assert_order (f->log, "records.make_runtime_dir m1", "runtime.start m1",
                     "runtime.watch m1");
  g_assert_cmpint (m->status->state, ==, MV_STATE_RUNNING);
  g_assert_cmpint (fake_runtime_vmm_state (f->runtime, "m1"), ==, MV_VMM_RUNNING);
  g_assert_true (fake_runtime_watched (f->runtime, "m1"));
  g_assert_nonnull (m->status->vmm);
  g_assert_cmpint (m->status->started_at, ==, fake_clock_real (f->clock));
  g_assert_cmpuint (m->status->observed_generation, ==, m->config->desired_generation);
  g_assert_null (m->status->phase);
  g_assert_null (m->status->operation_id);

  /* What is on disk is what the reconciler holds. */
  recorded = fake_records_status (f->records, "m1");
  g_assert_cmpint (recorded->state, ==, MV_STATE_RUNNING);
  g_assert_null (recorded->phase);
  g_assert_cmpuint (recorded->observed_generation, ==, m->config->desired_generation);

  props = recorder_props (f->recorder, "m1");
  g_assert_cmpuint (props & MV_PROP_STATE, !=, 0);
  g_assert_cmpuint (props & MV_PROP_PHASE, !=, 0);
  g_assert_cmpuint (props & MV_PROP_OBSERVED_GENERATION, !=, 0);
  g_assert_cmpuint (props & MV_PROP_STARTED_AT, !=, 0);
  g_assert_null (recorder_last_settled (f->recorder, "m1")->failure);
}

static void
test_running_when_running_does_nothing (Fixture *f, gconstpointer data)
{
  MvMachine *m = fixture_running (f, "m1");
  guint calls = fake_log_len (f->log);
  g_autoptr (GError) error = fixture_request (f, m, MV_REQUEST_START);

  g_assert_no_error (error);
  g_assert_cmpuint (fake_log_len (f->log), ==, calls + 1);   /* the config write */
  g_assert_cmpint (fake_log_find (f->log, calls, "records.save_config m1"), ==, (int) calls);
  g_assert_cmpint (m->status->state, ==, MV_STATE_RUNNING);
}

static void
test_running_from_paused_resumes (Fixture *f, gconstpointer data)
{
  MvMachine *m = fixture_running (f, "m1");
  g_autoptr (GError) paused = fixture_request (f, m, MV_REQUEST_PAUSE);
  g_autoptr (GError) error = NULL;
  guint mark;

  g_assert_no_error (paused);
  g_assert_cmpint (m->status->state, ==, MV_STATE_PAUSED);
  g_assert_cmpint (fake_runtime_vmm_state (f->runtime, "m1"), ==, MV_VMM_PAUSED);

  mark = fake_log_len (f->log);
  error = fixture_set_desired (f, m, MV_DESIRED_RUNNING);
  g_assert_no_error (error);
  g_assert_cmpint (fake_log_find (f->log, mark, "runtime.resume m1"), >=, 0);
  g_assert_cmpint (fake_log_find (f->log, mark, "runtime.start m1"), <, 0);
  g_assert_cmpint (m->status->state, ==, MV_STATE_RUNNING);
  g_assert_cmpint (fake_runtime_vmm_state (f->runtime, "m1"), ==, MV_VMM_RUNNING);
}

static void
test_running_from_standby_restores (Fixture *f, gconstpointer data)
{
  MvMachine *m = fixture_on_standby (f, "m1");
  g_autoptr (GError) error = NULL;
  g_autoptr (MvStatus) recorded = NULL;
  guint mark;

  g_assert_cmpstr (m->status->saved_state, ==, SAVED_DIR);
  g_assert_true (fake_storage_has_whole (f->storage, "m1"));
  g_assert_cmpint (fake_runtime_vmm_state (f->runtime, "m1"), ==, MV_VMM_GONE);

  mark = fake_log_len (f->log);
  error = fixture_request (f, m, MV_REQUEST_START);
  g_assert_no_error (error);
  g_assert_cmpint (fake_log_find (f->log, mark, "runtime.start m1"), <, 0);
  g_assert_cmpint (fake_log_find (f->log, mark, "runtime.restore m1 " SAVED_DIR), >=, 0);
  g_assert_cmpint (m->status->state, ==, MV_STATE_RUNNING);
  g_assert_true (json_object_get_boolean_member_with_default (m->status->vmm, "restored", FALSE));
  g_assert_true (fake_runtime_watched (f->runtime, "m1"));

  /* The guest runs on from its saved state, which is stale now: the status
   * stops naming it first, then it is moved aside and deleted. */
  g_assert_null (m->status->saved_state);
  WAIT_UNTIL (f, fake_storage_count (f->storage, FAKE_STORAGE_SWEEP) == 1);
  fake_assert_order (f->log, "runtime.restore m1", "records.save_status m1", "storage.retire m1",
                     "storage.sweep m1");
  g_assert_false (fake_storage_has_whole (f->storage, "m1"));
  g_assert_cmpuint (fake_storage_retired (f->storage, "m1"), ==, 0);
  recorded = fake_records_status (f->records, "m1");
  g_assert_null (recorded->saved_state);
}

/* paused ------------------------------------------------------------------ */

static void
test_paused_from_stopped_starts_then_pauses (Fixture *f, gconstpointer data)
{
  MvMachine *m = fixture_machine (f, "m1");
  g_autoptr (GError) error = fixture_set_desired (f, m, MV_DESIRED_PAUSED);

  g_assert_no_error (error);
  fake_assert_order (f->log, "runtime.start m1", "runtime.pause m1");
  g_assert_cmpint (m->status->state, ==, MV_STATE_PAUSED);
  g_assert_cmpint (fake_runtime_vmm_state (f->runtime, "m1"), ==, MV_VMM_PAUSED);
  g_assert_cmpuint (m->status->observed_generation, ==, m->config->desired_generation);
}

static void
test_paused_from_standby_restores_then_pauses (Fixture *f, gconstpointer data)
{
  MvMachine *m = fixture_running (f, "m1");
  g_autoptr (GError) paused = fixture_request (f, m, MV_REQUEST_PAUSE);
  g_autoptr (GError) standby = fixture_request (f, m, MV_REQUEST_STANDBY);
  g_autoptr (GError) error = NULL;
  gboolean waking = FALSE;
  guint mark;

  g_assert_no_error (paused);
  g_assert_no_error (standby);
  g_assert_cmpint (m->status->state, ==, MV_STATE_STANDBY);
  g_assert_cmpint (m->config->desired, ==, MV_DESIRED_PAUSED);

  /* Traffic wakes it into what it is wanted: paused. */
  mark = fake_log_len (f->log);
  g_assert_true (mv_reconciler_traffic (f->rec, m, 1, &waking, &error));
  g_assert_true (waking);
  error = fixture_kick (f, m);
  g_assert_no_error (error);
  g_assert_cmpint (fake_log_find (f->log, mark, "runtime.start m1"), <, 0);
  fake_assert_order (f->log, "runtime.restore m1", "runtime.pause m1");
  g_assert_cmpint (m->status->state, ==, MV_STATE_PAUSED);
  WAIT_UNTIL (f, fake_storage_count (f->storage, FAKE_STORAGE_SWEEP) == 1);
}

/* stopped ----------------------------------------------------------------- */

static void
test_stopped_from_running_stops (Fixture *f, gconstpointer data)
{
  MvMachine *m = fixture_running (f, "m1");
  guint mark = fake_log_len (f->log);
  g_autoptr (GError) error = fixture_request (f, m, MV_REQUEST_STOP);

  g_assert_no_error (error);
  g_assert_cmpint (fake_log_find (f->log, mark, "runtime.stop m1 graceful"), >=, 0);
  fake_assert_order (f->log, "runtime.stop m1", "storage.discard m1", "runtime.unwatch m1");
  g_assert_cmpint (m->status->state, ==, MV_STATE_STOPPED);
  g_assert_null (m->status->vmm);
  g_assert_cmpint (m->status->started_at, ==, 0);
  g_assert_false (fake_runtime_watched (f->runtime, "m1"));
  g_assert_cmpint (fake_runtime_vmm_state (f->runtime, "m1"), ==, MV_VMM_GONE);
  g_assert_true (m->config->stopped_by_user);
}

static void
test_stopped_from_paused_stops (Fixture *f, gconstpointer data)
{
  MvMachine *m = fixture_running (f, "m1");
  g_autoptr (GError) paused = fixture_request (f, m, MV_REQUEST_PAUSE);
  g_autoptr (GError) error = fixture_request (f, m, MV_REQUEST_STOP);

  g_assert_no_error (paused);
  g_assert_no_error (error);
  g_assert_cmpint (fake_log_find (f->log, 0, "runtime.stop m1 graceful"), >=, 0);
  g_assert_cmpint (m->status->state, ==, MV_STATE_STOPPED);
  g_assert_cmpint (fake_runtime_vmm_state (f->runtime, "m1"), ==, MV_VMM_GONE);
}

static void
test_stopped_from_standby_deletes_saved_state (Fixture *f, gconstpointer data)
{
  MvMachine *m = fixture_on_standby (f, "m1");
  guint mark = fake_log_len (f->log);
  g_autoptr (GError) error = NULL;
  g_autoptr (MvStatus) recorded = NULL;

  error = fixture_request (f, m, MV_REQUEST_STOP);
  g_assert_no_error (error);
  /* Nothing runs, so the stop is a hard one; the saved state goes. */
  fake_assert_order (f->log, "runtime.stop m1 force", "storage.discard m1");
  g_assert_cmpint (fake_log_find (f->log, mark, "runtime.restore m1"), <, 0);
  g_assert_cmpint (m->status->state, ==, MV_STATE_STOPPED);
  g_assert_null (m->status->saved_state);
  g_assert_false (fake_storage_has_whole (f->storage, "m1"));
  recorded = fake_records_status (f->records, "m1");
  g_assert_null (recorded->saved_state);
  g_assert_false (m->config->standby);

  /* The next start boots afresh. */
  mark = fake_log_len (f->log);
  g_clear_error (&error);
  error = fixture_request (f, m, MV_REQUEST_START);
  g_assert_no_error (error);
  g_assert_cmpint (fake_log_find (f->log, mark, "runtime.start m1"), >=, 0);
  g_assert_cmpint (fake_log_find (f->log, mark, "runtime.restore m1"), <, 0);
}

/* destroyed ---------------------------------------------------------------- */

static const char *const destroy_phases[] = {
  "destroy-vmm", "destroy-runtime", "destroy-network", "destroy-saved-state", "destroy-disks",
  "destroy-records",
};

static void
test_destroyed_releases_in_order (Fixture *f, gconstpointer data)
{
  MvMachine *m = fixture_running (f, "m1");
  g_autofree char *snapshot = fake_snapshots_add (f->snapshots, "m1", "before");
  g_autoptr (GError) error = NULL;
  guint mark = fake_log_len (f->log);
  /* The host call that opens each resource's step, in the host's order
   * (src/core/host/host.c). */
  const char *const first_calls[] = {
    "runtime.stop", "runtime.destroy", "network.release", "storage.discard",
    "storage.remove_disks", "records.remove",
  };
  int at = (int) mark;

  error = fixture_request (f, m, MV_REQUEST_FORCE_DELETE);
  g_assert_no_error (error);

  fake_assert_order (f->log, "runtime.stop m1 force", "runtime.unwatch m1", "runtime.destroy m1",
                     "records.remove_runtime_dir m1", "network.release m1", "storage.discard m1",
                     "storage.sweep m1", "storage.remove_disks m1", "records.remove m1");
  for (guint i = 0; i < G_N_ELEMENTS (first_calls); i++)
    at = fixture_assert_recorded_before (f, (guint) at, "m1", first_calls[i], destroy_phases[i],
                                         NULL);
  /* Progress is recorded per resource: the last write names all but the
   * records themselves. */
  g_assert_cmpint (fake_log_find (f->log, mark,
                                  "records.save_status m1 state=Stopped saved=0 "
                                  "destroyed=vmm,runtime,network,saved-state,disks phase=destroy-records"),
                   >=, 0);

  g_assert_true (recorder_was_removed (f->recorder, "m1"));
  g_assert_null (mv_reconciler_lookup (f->rec, "m1"));
  g_assert_false (fake_records_exist (f->records, "m1"));
  g_assert_false (fake_runtime_watched (f->runtime, "m1"));
  /* A machine's destroy keeps its snapshots. */
  g_assert_cmpuint (fake_snapshots_count (f->snapshots), ==, 1);
  g_assert_cmpuint (fake_log_count (f->log, "snapshots.remove"), ==, 0);
}

static void
test_destroyed_from_standby (Fixture *f, gconstpointer data)
{
  MvMachine *m = fixture_on_standby (f, "m1");
  g_autoptr (GError) error = fixture_request (f, m, MV_REQUEST_FORCE_DELETE);

  g_assert_no_error (error);
  fake_assert_order (f->log, "runtime.stop m1 force", "runtime.destroy m1", "network.release m1",
                     "storage.discard m1", "storage.sweep m1", "records.remove m1");
  g_assert_false (fake_storage_has_whole (f->storage, "m1"));
  g_assert_true (recorder_was_removed (f->recorder, "m1"));
}

static void
test_destroyed_from_stopped (Fixture *f, gconstpointer data)
{
  MvMachine *m = fixture_machine (f, "m1");
  g_autoptr (GError) error = fixture_request (f, m, MV_REQUEST_FORCE_DELETE);

  g_assert_no_error (error);
  g_assert_true (recorder_was_removed (f->recorder, "m1"));
  g_assert_cmpuint (mv_reconciler_count (f->rec), ==, 0);
  g_assert_cmpuint (f->recorder->added->len, ==, 1);
}

static void
test_destroyed_carries_on_when_asked_again (Fixture *f, gconstpointer data)
{
  MvMachine *m = fixture_running (f, "m1");
  g_autoptr (GError) error = NULL;
  guint mark;

  fake_network_fail_next_release (f->network, "The bridge is busy");
  error = fixture_request (f, m, MV_REQUEST_FORCE_DELETE);
  g_assert_error (error, MV_ERROR, MV_ERROR_FAILED);
  g_assert_cmpstr (error->message, ==, "The bridge is busy");
  g_assert_true (mv_reconciler_lookup (f->rec, "m1") == m);
  g_assert_cmpint (m->status->state, ==, MV_STATE_FAILED);
  g_assert_cmpuint (m->status->destroyed->len, ==, 2);

  /* Asked again, the destroy goes on from the resource that failed. */
  mark = fake_log_len (f->log);
  g_clear_error (&error);
  error = fixture_request (f, m, MV_REQUEST_FORCE_DELETE);
  g_assert_no_error (error);
  g_assert_cmpint (fake_log_find (f->log, mark, "runtime.stop m1"), <, 0);
  g_assert_cmpint (fake_log_find (f->log, mark, "runtime.destroy m1"), <, 0);
  g_assert_cmpint (fake_log_find (f->log, mark, "network.release m1"), >=, 0);
  g_assert_cmpint (fake_log_find (f->log, mark, "records.remove m1"), >=, 0);
  g_assert_true (recorder_was_removed (f->recorder, "m1"));
}

/* A wish whose generation is the one observed is reached, even when
 * something else was wanted since (a workload that ended as its Start was
 * being recorded); one overtaken before it was observed is superseded. */
static void
test_wish_reached_then_replaced (Fixture *f, gconstpointer data)
{
  MvMachine *m = fixture_running (f, "m1");
  MvConfig *config = m->config;
  guint64 started = config->desired_generation;
  MvDesired desired = config->desired;

  g_assert_cmpuint (m->status->observed_generation, ==, started);
  g_assert_cmpint (mv_machine_wish_outcome (m, MV_DESIRED_RUNNING, started), ==, MV_WISH_REACHED);

  /* Wanted stopped since, and not observed yet. */
  config->desired = MV_DESIRED_STOPPED;
  config->desired_generation = started + 1;
  g_assert_cmpint (mv_machine_wish_outcome (m, MV_DESIRED_RUNNING, started), ==, MV_WISH_REACHED);
  g_assert_cmpint (mv_machine_wish_outcome (m, MV_DESIRED_STOPPED, started + 1), ==,
                   MV_WISH_PENDING);
  g_assert_cmpint (mv_machine_wish_outcome (m, MV_DESIRED_RUNNING, started - 1), ==,
                   MV_WISH_SUPERSEDED);

  config->desired = desired;
  config->desired_generation = started;
}

int
main (int argc, char **argv)
{
  fixture_init (&argc, &argv);
  FIXTURE_TEST ("/reconcile/table/running/from-stopped-starts", test_running_from_stopped_starts);
  FIXTURE_TEST ("/reconcile/table/running/when-running-does-nothing",
                test_running_when_running_does_nothing);
  FIXTURE_TEST ("/reconcile/table/running/from-paused-resumes", test_running_from_paused_resumes);
  FIXTURE_TEST ("/reconcile/table/running/from-standby-restores",
                test_running_from_standby_restores);
  FIXTURE_TEST ("/reconcile/table/paused/from-stopped-starts-then-pauses",
                test_paused_from_stopped_starts_then_pauses);
  FIXTURE_TEST ("/reconcile/table/paused/from-standby-restores-then-pauses",
                test_paused_from_standby_restores_then_pauses);
  FIXTURE_TEST ("/reconcile/table/stopped/from-running-stops", test_stopped_from_running_stops);
  FIXTURE_TEST ("/reconcile/table/stopped/from-paused-stops", test_stopped_from_paused_stops);
  FIXTURE_TEST ("/reconcile/table/stopped/from-standby-deletes-saved-state",
                test_stopped_from_standby_deletes_saved_state);
  FIXTURE_TEST ("/reconcile/table/destroyed/releases-in-order", test_destroyed_releases_in_order);
  FIXTURE_TEST ("/reconcile/table/destroyed/from-standby", test_destroyed_from_standby);
  FIXTURE_TEST ("/reconcile/table/destroyed/from-stopped", test_destroyed_from_stopped);
  FIXTURE_TEST ("/reconcile/table/destroyed/carries-on-when-asked-again",
                test_destroyed_carries_on_when_asked_again);
  FIXTURE_TEST ("/reconcile/wish/reached-then-replaced", test_wish_reached_then_replaced);
  return g_test_run ();
}
