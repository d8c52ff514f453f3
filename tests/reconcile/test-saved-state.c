/* Seed 000's saved-state rules: a valid saved state is authoritative when
 * the VMM is gone; one beside a running VMM is stale and deleted; a
 * restore failure keeps it; a restart or a change of the machine's shape
 * deletes it; a stale or duplicate traffic event has no effect. */
#include "fixture.h"

#include <string.h>

#define SAVED_DIR "/var/lib/fake/machines/m1/saved"

static void
test_authoritative_when_vmm_gone (Fixture *f, gconstpointer data)
{
  MvConfig *config = fixture_config (f, "m1", MV_DESIRED_RUNNING);
  MvStatus *status = mv_status_new ();
  MvMachine *m;

  mv_config_set_standby (config, TRUE, fake_clock_real (f->clock));
  status->state = MV_STATE_STANDBY;
  status->saved_state = g_strdup (SAVED_DIR);
  status->observed_generation = config->desired_generation;
  fake_storage_put (f->storage, "m1", TRUE);
  m = fixture_load (f, config, status);

  fixture_recover (f);
  mv_reconciler_run (f->rec);
  fixture_settle (f);
  g_assert_cmpint (m->status->state, ==, MV_STATE_STANDBY);
  g_assert_cmpstr (m->status->saved_state, ==, SAVED_DIR);
  g_assert_true (fake_storage_has_whole (f->storage, "m1"));
  /* Nothing is booted beside it, and nothing is rewritten. */
  g_assert_cmpuint (fake_log_count (f->log, "runtime.start m1"), ==, 0);
  g_assert_cmpuint (fake_log_count (f->log, "runtime.restore m1"), ==, 0);
  g_assert_cmpuint (fake_log_count (f->log, "storage.discard m1"), ==, 0);
  g_assert_cmpuint (fake_records_count (f->records, FAKE_RECORDS_SAVE_STATUS), ==, 0);

  /* Start wakes the guest from it. */
  g_autoptr (GError) error = fixture_request (f, m, MV_REQUEST_START);
  g_assert_no_error (error);
  g_assert_cmpuint (fake_log_count (f->log, "runtime.restore m1 " SAVED_DIR), ==, 1);
  g_assert_cmpint (m->status->state, ==, MV_STATE_RUNNING);
}

static void
test_stale_beside_running_vmm_is_deleted (Fixture *f, gconstpointer data)
{
  MvConfig *config = fixture_config (f, "m1", MV_DESIRED_RUNNING);
  MvStatus *status = mv_status_new ();
  g_autoptr (MvStatus) recorded = NULL;
  MvMachine *m;
  int discarded;

  status->state = MV_STATE_RUNNING;
  status->vmm = fake_runtime_spawn (f->runtime, "m1", MV_VMM_RUNNING);
  status->saved_state = g_strdup (SAVED_DIR);
  fake_storage_put (f->storage, "m1", TRUE);
  m = fixture_load (f, config, status);

  fixture_recover (f);
  fixture_settle (f);
  /* Asked what the VMM does, then the saved state goes, in the worker. */
  discarded = fake_log_find (f->log, 0, "storage.discard m1");
  g_assert_cmpint (discarded, >, fake_log_find (f->log, 0, "runtime.probe m1"));
  g_assert_false (fake_storage_has_whole (f->storage, "m1"));
  g_assert_cmpint (m->status->state, ==, MV_STATE_RUNNING);
  g_assert_null (m->status->saved_state);
  g_assert_true (fake_runtime_watched (f->runtime, "m1"));
  recorded = fake_records_status (f->records, "m1");
  g_assert_null (recorded->saved_state);
  g_assert_cmpuint (fake_log_count (f->log, "runtime.start m1"), ==, 0);
}

static void
test_restore_failure_keeps_it (Fixture *f, gconstpointer data)
{
  MvMachine *m = fixture_on_standby (f, "m1");
  g_autoptr (GError) error = NULL;
  g_autoptr (MvStatus) recorded = NULL;
  guint mark = fake_log_len (f->log);

  fake_runtime_fail_next (f->runtime, FAKE_RUNTIME_RESTORE, "The frozen guest did not wake",
                          FALSE);
  error = fixture_request (f, m, MV_REQUEST_START);
  g_assert_error (error, MV_ERROR, MV_ERROR_FAILED);
  g_assert_nonnull (strstr (error->message, "did not wake"));
  g_assert_cmpint (m->status->state, ==, MV_STATE_STANDBY);
  g_assert_cmpstr (m->status->state_error, ==, "The frozen guest did not wake");
  g_assert_cmpstr (m->status->saved_state, ==, SAVED_DIR);
  g_assert_true (fake_storage_has_whole (f->storage, "m1"));
  g_assert_cmpint (fake_log_find (f->log, mark, "storage.retire m1"), <, 0);
  g_assert_cmpint (fake_log_find (f->log, mark, "storage.discard m1"), <, 0);
  recorded = fake_records_status (f->records, "m1");
  g_assert_cmpstr (recorded->saved_state, ==, SAVED_DIR);
  g_assert_cmpint (recorded->state, ==, MV_STATE_STANDBY);

  /* It is not tried again by itself... */
  mark = fake_log_len (f->log);
  g_clear_error (&error);
  error = fixture_kick (f, m);
  g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_STATE);
  g_assert_cmpint (fake_log_find (f->log, mark, "runtime.restore m1"), <, 0);

  /* ...but when asked again, from the same saved state. */
  g_clear_error (&error);
  error = fixture_request (f, m, MV_REQUEST_START);
  g_assert_no_error (error);
  g_assert_cmpint (fake_log_find (f->log, mark, "runtime.restore m1 " SAVED_DIR), >=, 0);
  g_assert_cmpint (m->status->state, ==, MV_STATE_RUNNING);
  g_assert_null (m->status->state_error);
}

static void
test_restart_boots_afresh (Fixture *f, gconstpointer data)
{
  MvMachine *m = fixture_running (f, "m1");
  guint64 generation = m->config->restart_generation;
  guint mark = fake_log_len (f->log);
  g_autoptr (GError) error = fixture_request (f, m, MV_REQUEST_RESTART);

  g_assert_no_error (error);
  g_assert_cmpint (fake_log_find (f->log, mark, "runtime.stop m1 graceful"), >=, 0);
  fake_assert_order (f->log, "runtime.stop m1", "storage.discard m1", "runtime.start m1");
  g_assert_cmpuint (m->config->restart_generation, ==, generation + 1);
  g_assert_cmpuint (m->status->observed_restart_generation, ==, generation + 1);
  g_assert_cmpint (m->status->state, ==, MV_STATE_RUNNING);
}

static void
test_restart_from_standby_deletes_it (Fixture *f, gconstpointer data)
{
  MvMachine *m = fixture_on_standby (f, "m1");
  guint64 generation = m->config->restart_generation;
  guint mark = fake_log_len (f->log);
  g_autoptr (GError) error = NULL;

  error = fixture_request (f, m, MV_REQUEST_RESTART);
  g_assert_no_error (error);
  /* The frozen guest goes with the restart; the guest boots afresh. */
  fake_assert_order (f->log, "storage.discard m1", "runtime.start m1");
  g_assert_cmpint (fake_log_find (f->log, mark, "runtime.restore m1"), <, 0);
  g_assert_false (fake_storage_has_whole (f->storage, "m1"));
  g_assert_null (m->status->saved_state);
  g_assert_cmpuint (m->status->observed_restart_generation, ==, generation + 1);
  g_assert_cmpint (m->status->state, ==, MV_STATE_RUNNING);
}

static void
on_updated (MvMachine *machine, const GError *error, gpointer data)
{
  g_assert_no_error (error);
  *(gboolean *) data = TRUE;
}

/* Update with @change applied to a copy of the machine's spec, as the bus
 * does: the reply once it is taken (at once: no devices are plugged in),
 * then a kick. */
static GError *
update (Fixture *f, MvMachine *m, void (*change) (MvSpec *spec))
{
  MvSpec *spec = mv_spec_copy (m->config->spec);
  GError *error = NULL;
  gboolean updated = FALSE;

  change (spec);
  if (!mv_reconciler_update (f->rec, m, spec, on_updated, &updated, &error))
    return error;
  g_assert_true (updated);
  return fixture_kick (f, m);
}

static void
more_memory (MvSpec *spec)
{
  spec->memory_bytes *= 2;
}

static void
more_vcpus (MvSpec *spec)
{
  spec->cpu_millicores = 2000;
}

static void
less_cpu_same_vcpus (MvSpec *spec)
{
  spec->cpu_millicores = 500;
}

static void
a_label (MvSpec *spec)
{
  g_hash_table_insert (spec->labels, g_strdup ("team"), g_strdup ("web"));
}

static void
assert_discarded_by (Fixture *f, void (*change) (MvSpec *spec))
{
  MvMachine *m = fixture_on_standby (f, "m1");
  g_autoptr (GError) error = update (f, m, change);
  g_autoptr (MvStatus) recorded = NULL;
  guint mark;

  g_assert_no_error (error);
  g_assert_cmpint (m->status->state, ==, MV_STATE_STOPPED);
  g_assert_cmpint (m->config->desired, ==, MV_DESIRED_STOPPED);
  g_assert_null (m->status->saved_state);
  WAIT_UNTIL (f, fake_storage_count (f->storage, FAKE_STORAGE_SWEEP) == 1);
  /* The status stops naming it before it is moved aside. */
  fake_assert_order (f->log, "records.save_status m1 state=Stopped saved=0", "storage.retire m1",
                     "storage.sweep m1");
  g_assert_false (fake_storage_has_whole (f->storage, "m1"));
  recorded = fake_records_status (f->records, "m1");
  g_assert_null (recorded->saved_state);

  /* The next start boots the new shape afresh. */
  mark = fake_log_len (f->log);
  g_clear_error (&error);
  error = fixture_request (f, m, MV_REQUEST_START);
  g_assert_no_error (error);
  g_assert_cmpint (fake_log_find (f->log, mark, "runtime.start m1"), >=, 0);
  g_assert_cmpint (fake_log_find (f->log, mark, "runtime.restore m1"), <, 0);
}

static void
test_memory_change_deletes_it (Fixture *f, gconstpointer data)
{
  assert_discarded_by (f, more_memory);
}

static void
test_vcpu_change_deletes_it (Fixture *f, gconstpointer data)
{
  assert_discarded_by (f, more_vcpus);
}

static void
assert_kept_by (Fixture *f, void (*change) (MvSpec *spec))
{
  MvMachine *m = fixture_on_standby (f, "m1");
  g_autoptr (GError) error = update (f, m, change);

  g_assert_no_error (error);
  g_assert_cmpint (m->status->state, ==, MV_STATE_STANDBY);
  g_assert_cmpstr (m->status->saved_state, ==, SAVED_DIR);
  g_assert_true (fake_storage_has_whole (f->storage, "m1"));
  g_assert_cmpuint (fake_log_count (f->log, "storage.retire m1"), ==, 0);
}

static void
test_label_change_keeps_it (Fixture *f, gconstpointer data)
{
  assert_kept_by (f, a_label);
}

static void
test_cpu_share_within_vcpus_keeps_it (Fixture *f, gconstpointer data)
{
  assert_kept_by (f, less_cpu_same_vcpus);
}

static void
test_stale_and_duplicate_traffic (Fixture *f, gconstpointer data)
{
  MvMachine *m = fixture_running (f, "m1");
  g_autoptr (GError) error = NULL;
  gboolean waking = TRUE;
  guint writes, mark;
  guint64 generation;

  /* Traffic to a machine that is awake is noted, and wakes nothing. */
  g_assert_true (mv_reconciler_traffic (f->rec, m, 1, &waking, &error));
  g_assert_false (waking);
  g_assert_cmpuint (m->status->traffic_sequence, ==, 1);

  error = fixture_request (f, m, MV_REQUEST_STANDBY);
  g_assert_no_error (error);
  g_assert_true (mv_reconciler_traffic (f->rec, m, 5, &waking, &error));
  g_assert_true (waking);
  error = fixture_kick (f, m);
  g_assert_no_error (error);
  g_assert_cmpint (m->status->state, ==, MV_STATE_RUNNING);

  error = fixture_request (f, m, MV_REQUEST_STANDBY);
  g_assert_no_error (error);
  WAIT_UNTIL (f, fake_storage_count (f->storage, FAKE_STORAGE_SWEEP) == 1);

  /* The same event again, and an older one: no effect at all. */
  writes = fake_records_count (f->records, FAKE_RECORDS_SAVE_STATUS) +
           fake_records_count (f->records, FAKE_RECORDS_SAVE_CONFIG);
  generation = m->config->desired_generation;
  mark = fake_log_len (f->log);
  for (guint64 sequence = 5; sequence >= 3; sequence -= 2)
    {
      g_assert_true (mv_reconciler_traffic (f->rec, m, sequence, &waking, &error));
      g_assert_false (waking);
      mv_reconciler_kick (m);
    }
  fixture_settle (f);
  g_assert_cmpuint (fake_log_len (f->log), ==, mark);
  g_assert_cmpuint (fake_records_count (f->records, FAKE_RECORDS_SAVE_STATUS) +
                    fake_records_count (f->records, FAKE_RECORDS_SAVE_CONFIG), ==, writes);
  g_assert_cmpuint (m->config->desired_generation, ==, generation);
  g_assert_true (m->config->standby);
  g_assert_cmpint (m->status->state, ==, MV_STATE_STANDBY);
  g_assert_cmpuint (m->status->traffic_sequence, ==, 5);

  /* A newer one wakes it. */
  g_assert_true (mv_reconciler_traffic (f->rec, m, 6, &waking, &error));
  g_assert_true (waking);
  error = fixture_kick (f, m);
  g_assert_no_error (error);
  g_assert_cmpint (m->status->state, ==, MV_STATE_RUNNING);
}

int
main (int argc, char **argv)
{
  fixture_init (&argc, &argv);
  FIXTURE_TEST ("/reconcile/saved-state/authoritative-when-vmm-gone",
                test_authoritative_when_vmm_gone);
  FIXTURE_TEST ("/reconcile/saved-state/stale-beside-running-vmm-is-deleted",
                test_stale_beside_running_vmm_is_deleted);
  FIXTURE_TEST ("/reconcile/saved-state/restore-failure-keeps-it", test_restore_failure_keeps_it);
  FIXTURE_TEST ("/reconcile/saved-state/restart-boots-afresh", test_restart_boots_afresh);
  FIXTURE_TEST ("/reconcile/saved-state/restart-from-standby-deletes-it",
                test_restart_from_standby_deletes_it);
  FIXTURE_TEST ("/reconcile/saved-state/memory-change-deletes-it", test_memory_change_deletes_it);
  FIXTURE_TEST ("/reconcile/saved-state/vcpu-change-deletes-it", test_vcpu_change_deletes_it);
  FIXTURE_TEST ("/reconcile/saved-state/label-change-keeps-it", test_label_change_keeps_it);
  FIXTURE_TEST ("/reconcile/saved-state/cpu-share-within-vcpus-keeps-it",
                test_cpu_share_within_vcpus_keeps_it);
  FIXTURE_TEST ("/reconcile/saved-state/stale-and-duplicate-traffic",
                test_stale_and_duplicate_traffic);
  return g_test_run ();
}
