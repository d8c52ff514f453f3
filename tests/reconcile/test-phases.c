/* The phase and a fresh operation ID are written before each host call;
 * if that write fails, the host is not touched and the request is
 * answered with the error. A failed host call is answered with its own. */
#include "fixture.h"

#include <string.h>

typedef struct {
  const char *call;     /* a host call the step makes */
  const char *phase;    /* recorded before it */
} Expected;

/* Runs @request and checks every @expected call against the phase
 * recorded before it; returns the step's operation ID. */
static char *
assert_step (Fixture *f, MvMachine *m, MvRequest request, const Expected *expected, guint n)
{
  guint mark = fake_log_len (f->log);
  g_autoptr (GError) error = fixture_request (f, m, request);
  g_autofree char *first = NULL;
  g_autofree char *write = NULL;

  g_assert_no_error (error);
  for (guint i = 0; i < n; i++)
    {
      g_autofree char *operation = NULL;

      fixture_assert_recorded_before (f, mark, "m1", expected[i].call, expected[i].phase,
                                           &operation);
      /* One step, one operation, however many host calls it makes. */
      if (first)
        g_assert_cmpstr (operation, ==, first);
      else
        first = g_steal_pointer (&operation);
    }
  /* Once the step is done, the phase is cleared on disk too. */
  write = fake_log_get (f->log, (guint) fake_log_rfind (f->log, G_MAXINT, "records.save_status m1"));
  g_assert_true (g_str_has_suffix (write, " phase=- op=-"));
  g_assert_null (m->status->phase);
  g_assert_null (m->status->operation_id);
  return g_steal_pointer (&first);
}

static void
test_recorded_before_each_host_call (Fixture *f, gconstpointer data)
{
  static const Expected start[] = {
    { "records.make_runtime_dir", "start" }, { "runtime.start", "start" },
  };
  static const Expected pause[] = { { "runtime.pause", "pause" } };
  static const Expected resume[] = { { "runtime.resume", "resume" } };
  static const Expected standby[] = {
    { "storage.stage", "standby" }, { "runtime.save", "standby" }, { "storage.commit", "standby" },
  };
  static const Expected restore[] = {
    { "records.make_runtime_dir", "restore" }, { "runtime.restore", "restore" },
  };
  static const Expected stop[] = { { "runtime.stop", "stop" }, { "storage.discard", "stop" } };
  MvMachine *m = fixture_machine (f, "m1");
  g_autoptr (GPtrArray) operations = g_ptr_array_new_with_free_func (g_free);

  g_ptr_array_add (operations, assert_step (f, m, MV_REQUEST_START, start, G_N_ELEMENTS (start)));
  g_ptr_array_add (operations, assert_step (f, m, MV_REQUEST_PAUSE, pause, G_N_ELEMENTS (pause)));
  g_ptr_array_add (operations, assert_step (f, m, MV_REQUEST_RESUME, resume,
                                            G_N_ELEMENTS (resume)));
  g_ptr_array_add (operations, assert_step (f, m, MV_REQUEST_STANDBY, standby,
                                            G_N_ELEMENTS (standby)));
  g_ptr_array_add (operations, assert_step (f, m, MV_REQUEST_START, restore,
                                            G_N_ELEMENTS (restore)));
  g_ptr_array_add (operations, assert_step (f, m, MV_REQUEST_STOP, stop, G_N_ELEMENTS (stop)));

  /* A fresh operation ID for each step. */
  for (guint i = 0; i < operations->len; i++)
    for (guint j = i + 1; j < operations->len; j++)
      g_assert_cmpstr (operations->pdata[i], !=, operations->pdata[j]);
  WAIT_UNTIL (f, fake_storage_count (f->storage, FAKE_STORAGE_SWEEP) == 1);
}

static void
test_recorded_with_the_transitional_state (Fixture *f, gconstpointer data)
{
  MvMachine *m = fixture_machine (f, "m1");
  FakeHold *hold = fake_runtime_hold (f->runtime);
  g_autoptr (GError) error = NULL;
  g_autoptr (MvStatus) recorded = NULL;

  fake_hold_arm (hold, FAKE_RUNTIME_START);
  recorder_clear_props (f->recorder, "m1");
  g_assert_true (mv_reconciler_request (f->rec, m, MV_REQUEST_START, &error));
  mv_reconciler_kick (m);
  WAIT_UNTIL (f, fake_hold_holding (hold));

  /* While the VMM boots, the records say what is being done. */
  recorded = fake_records_status (f->records, "m1");
  g_assert_cmpstr (recorded->phase, ==, "start");
  g_assert_nonnull (recorded->operation_id);
  g_assert_cmpstr (recorded->operation_id, ==, m->status->operation_id);
  g_assert_cmpint (recorded->state, ==, MV_STATE_STARTING);
  g_assert_cmpint (m->status->state, ==, MV_STATE_STARTING);
  g_assert_cmpuint (recorder_props (f->recorder, "m1") & MV_PROP_PHASE, !=, 0);
  g_assert_cmpuint (recorder_n_settled (f->recorder, "m1"), ==, 0);

  fake_hold_release (hold);
  fixture_settle (f);
  g_assert_cmpint (m->status->state, ==, MV_STATE_RUNNING);
}

/* A request whose first step cannot be recorded. */
typedef struct {
  const char *name;
  gboolean    on_standby;     /* start from standby, else from Running */
  gboolean    from_stopped;   /* start from Stopped */
  MvRequest   request;
  const char *forbidden[3];   /* host calls that must not be made */
  gboolean    retried;        /* asking again tries again */
} WriteCase;

static const WriteCase write_cases[] = {
  { "start", FALSE, TRUE, MV_REQUEST_START,
    { "records.make_runtime_dir m1", "runtime.start m1" }, TRUE },
  { "stop", FALSE, FALSE, MV_REQUEST_STOP, { "runtime.stop m1", "storage.discard m1" }, TRUE },
  { "pause", FALSE, FALSE, MV_REQUEST_PAUSE, { "runtime.pause m1" }, TRUE },
  { "standby", FALSE, FALSE, MV_REQUEST_STANDBY, { "storage.stage m1", "runtime.save m1" }, TRUE },
  { "restore", TRUE, FALSE, MV_REQUEST_START,
    { "records.make_runtime_dir m1", "runtime.restore m1" }, TRUE },
};

/* A destroy is the exception: each of its steps can be repeated, and what
 * it removes is what frees a full disk, so it goes on without its phase
 * written and removes the machine. */
static void
test_destroy_goes_on_unrecorded (Fixture *f, gconstpointer data)
{
  MvMachine *m = fixture_running (f, "m1");
  g_autoptr (GError) error = NULL;

  fixture_expect_warning (f, "could not record its status: No space left on device");
  fake_records_fail_next (f->records, FAKE_RECORDS_SAVE_STATUS, "No space left on device");
  error = fixture_request (f, m, MV_REQUEST_FORCE_DELETE);
  g_assert_no_error (error);
  g_assert_true (recorder_was_removed (f->recorder, "m1"));
  g_assert_false (fake_records_exist (f->records, "m1"));
  g_assert_cmpint (fake_runtime_vmm_state (f->runtime, "m1"), ==, MV_VMM_GONE);
}

/* A failure belongs to the wish it was tried for: a start that fails
 * after a Delete was asked does not answer the Delete, which goes on. */
static void
test_failure_answers_its_own_wish (Fixture *f, gconstpointer data)
{
  MvMachine *m = fixture_machine (f, "m1");
  FakeHold *hold = fake_runtime_hold (f->runtime);
  g_autoptr (GError) error = NULL;
  Waiter *start, *delete;

  fake_runtime_fail_next (f->runtime, FAKE_RUNTIME_START, "The guest did not boot", FALSE);
  fake_hold_arm (hold, FAKE_RUNTIME_START);
  g_assert_true (mv_reconciler_request (f->rec, m, MV_REQUEST_START, &error));
  start = recorder_wait (f->recorder, m);
  mv_reconciler_kick (m);
  WAIT_UNTIL (f, fake_hold_holding (hold));

  g_assert_true (mv_reconciler_request (f->rec, m, MV_REQUEST_FORCE_DELETE, &error));
  delete = recorder_wait (f->recorder, m);
  mv_reconciler_kick (m);
  fake_hold_release (hold);
  WAIT_UNTIL (f, start->done && delete->done);

  g_assert_nonnull (start->error);
  g_assert_no_error (delete->error);
  g_assert_true (recorder_was_removed (f->recorder, "m1"));
}

/* A plain Delete is checked against the state when it is made: a machine
 * that runs by then needs force. */
static void
test_plain_delete_of_active_is_refused (Fixture *f, gconstpointer data)
{
  MvMachine *m = fixture_running (f, "m1");
  g_autoptr (GError) error = NULL;
  guint mark = fake_log_len (f->log);

  g_assert_false (mv_reconciler_request (f->rec, m, MV_REQUEST_DELETE, &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_STATE);
  g_assert_nonnull (strstr (error->message, "delete with force"));
  g_assert_cmpint (m->config->desired, ==, MV_DESIRED_RUNNING);
  g_assert_cmpint (fake_log_find (f->log, mark, "runtime.stop m1"), <, 0);
  g_assert_true (mv_reconciler_lookup (f->rec, "m1") == m);
}

static void
test_failed_write_keeps_host_untouched (Fixture *f, gconstpointer data)
{
  const WriteCase *c = data;
  MvMachine *m = c->on_standby ? fixture_on_standby (f, "m1")
                 : c->from_stopped ? fixture_machine (f, "m1")
                 : fixture_running (f, "m1");
  MvState before = m->status->state;
  MvVmmState vmm_before = fake_runtime_vmm_state (f->runtime, "m1");
  g_autoptr (MvStatus) on_disk = fake_records_status (f->records, "m1");
  g_autoptr (MvStatus) after = NULL;
  g_autoptr (GError) error = NULL;
  guint mark;

  fixture_expect_warning (f, "could not record its status: No space left on device");
  fake_records_fail_next (f->records, FAKE_RECORDS_SAVE_STATUS, "No space left on device");
  mark = fake_log_len (f->log);
  error = fixture_request (f, m, c->request);

  g_assert_error (error, MV_ERROR, MV_ERROR_FAILED);
  g_assert_nonnull (strstr (error->message, "Could not record the status"));
  g_assert_nonnull (strstr (error->message, "No space left on device"));
  for (guint i = 0; i < G_N_ELEMENTS (c->forbidden) && c->forbidden[i]; i++)
    g_assert_cmpint (fake_log_find (f->log, mark, c->forbidden[i]), <, 0);
  fixture_settle (f);
  g_assert_false (m->busy);
  g_assert_cmpint (m->status->state, ==, before);
  g_assert_null (m->status->phase);
  g_assert_null (m->status->operation_id);
  g_assert_cmpint (fake_runtime_vmm_state (f->runtime, "m1"), ==, vmm_before);
  g_assert_cmpint (fake_runtime_watched (f->runtime, "m1"), ==, vmm_before != MV_VMM_GONE);
  after = fake_records_status (f->records, "m1");
  g_assert_cmpint (after->state, ==, on_disk->state);
  g_assert_null (after->phase);

  /* Nothing is tried again by itself... */
  mark = fake_log_len (f->log);
  mv_reconciler_kick (m);
  fixture_settle (f);
  for (guint i = 0; i < G_N_ELEMENTS (c->forbidden) && c->forbidden[i]; i++)
    g_assert_cmpint (fake_log_find (f->log, mark, c->forbidden[i]), <, 0);

  /* ...until it is asked for again. */
  if (!c->retried)
    return;
  g_clear_error (&error);
  error = fixture_request (f, m, c->request);
  g_assert_no_error (error);
  g_assert_cmpint (fake_log_find (f->log, mark, c->forbidden[0]), >=, 0);
  if (c->on_standby)
    WAIT_UNTIL (f, fake_storage_count (f->storage, FAKE_STORAGE_SWEEP) == 1);
}

static void
test_failed_host_call_answers_with_its_error (Fixture *f, gconstpointer data)
{
  MvMachine *m = fixture_machine (f, "m1");
  g_autoptr (GError) error = NULL;
  g_autoptr (MvStatus) recorded = NULL;
  guint mark;

  fake_runtime_fail_next (f->runtime, FAKE_RUNTIME_START,
                          "The guest did not boot: Kernel panic - not syncing", FALSE);
  error = fixture_request (f, m, MV_REQUEST_START);
  g_assert_error (error, MV_ERROR, MV_ERROR_FAILED);
  g_assert_cmpstr (error->message, ==, "The guest did not boot: Kernel panic - not syncing");
  g_assert_cmpint (m->status->state, ==, MV_STATE_FAILED);
  g_assert_cmpstr (m->status->state_error, ==, error->message);
  g_assert_null (m->status->vmm);
  g_assert_false (fake_runtime_watched (f->runtime, "m1"));
  recorded = fake_records_status (f->records, "m1");
  g_assert_cmpint (recorded->state, ==, MV_STATE_FAILED);
  g_assert_null (recorded->phase);

  /* A guest that cannot boot is not booted again and again. */
  mark = fake_log_len (f->log);
  g_clear_error (&error);
  error = fixture_kick (f, m);
  g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_STATE);
  g_assert_cmpint (fake_log_find (f->log, mark, "runtime.start m1"), <, 0);

  /* Asked again, it is tried again. */
  g_clear_error (&error);
  error = fixture_request (f, m, MV_REQUEST_START);
  g_assert_no_error (error);
  g_assert_cmpint (m->status->state, ==, MV_STATE_RUNNING);
  g_assert_null (m->status->state_error);
}

static void
test_failed_config_write_changes_nothing (Fixture *f, gconstpointer data)
{
  MvMachine *m = fixture_running (f, "m1");
  g_autoptr (MvConfig) before = mv_config_copy (m->config);
  g_autoptr (GError) error = NULL;
  guint mark = fake_log_len (f->log);

  fixture_expect_warning (f, "could not record its configuration: Read-only file system");
  fake_records_fail_next (f->records, FAKE_RECORDS_SAVE_CONFIG, "Read-only file system");
  g_assert_false (mv_reconciler_request (f->rec, m, MV_REQUEST_STOP, &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_FAILED);
  g_assert_nonnull (strstr (error->message, "Could not record the change"));
  /* What is wanted changes only once it is on disk. */
  g_assert_cmpint (m->config->desired, ==, before->desired);
  g_assert_cmpuint (m->config->desired_generation, ==, before->desired_generation);
  g_assert_false (m->config->stopped_by_user);
  mv_reconciler_kick (m);
  fixture_settle (f);
  g_assert_cmpint (fake_log_find (f->log, mark, "runtime.stop m1"), <, 0);
  g_assert_cmpint (m->status->state, ==, MV_STATE_RUNNING);
}

static void
test_failed_create_leaves_no_machine (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  gboolean existed = TRUE;

  fake_records_fail_next (f->records, FAKE_RECORDS_CREATE, "Quota exceeded");
  g_assert_null (mv_reconciler_define (f->rec, fixture_spec ("m1"), TRUE, &existed, &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_FAILED);
  g_assert_false (existed);
  g_assert_cmpuint (mv_reconciler_count (f->rec), ==, 0);
  g_assert_cmpuint (f->recorder->added->len, ==, 0);
  g_assert_false (fake_records_exist (f->records, "m1"));
  g_assert_cmpuint (fake_log_count (f->log, "runtime.start"), ==, 0);

  /* The same spec again makes the machine. */
  g_clear_error (&error);
  g_assert_nonnull (mv_reconciler_define (f->rec, fixture_spec ("m1"), FALSE, &existed, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (f->recorder->added->len, ==, 1);
}

static void
test_failed_records_removal_is_carried_on (Fixture *f, gconstpointer data)
{
  MvMachine *m = fixture_running (f, "m1");
  g_autoptr (GError) error = NULL;
  guint mark;

  fake_records_fail_next (f->records, FAKE_RECORDS_REMOVE, "Device or resource busy");
  error = fixture_request (f, m, MV_REQUEST_FORCE_DELETE);
  g_assert_error (error, MV_ERROR, MV_ERROR_FAILED);
  g_assert_true (mv_reconciler_lookup (f->rec, "m1") == m);
  g_assert_false (recorder_was_removed (f->recorder, "m1"));
  g_assert_cmpuint (m->status->destroyed->len, ==, 5);

  mark = fake_log_len (f->log);
  g_clear_error (&error);
  error = fixture_request (f, m, MV_REQUEST_FORCE_DELETE);
  g_assert_no_error (error);
  g_assert_cmpint (fake_log_find (f->log, mark, "network.release m1"), <, 0);
  g_assert_cmpint (fake_log_find (f->log, mark, "records.remove m1"), >=, 0);
  g_assert_true (recorder_was_removed (f->recorder, "m1"));
  g_assert_false (fake_records_exist (f->records, "m1"));
}

/* The status writes of m1 from @from on, each as "STATE PHASE". */
static char *
status_writes (Fixture *f, guint from)
{
  GString *writes = g_string_new (NULL);

  for (int i = fake_log_find (f->log, from, "records.save_status m1"); i >= 0;
       i = fake_log_find (f->log, i + 1, "records.save_status m1"))
    {
      g_autofree char *line = fake_log_get (f->log, i);
      g_autofree char *state = g_strndup (strstr (line, "state=") + 6,
                                          strcspn (strstr (line, "state=") + 6, " "));
      g_autofree char *phase = g_strndup (strstr (line, "phase=") + 6,
                                          strcspn (strstr (line, "phase=") + 6, " "));

      g_string_append_printf (writes, "%s%s %s", writes->len ? ", " : "", state, phase);
    }
  return g_string_free (writes, FALSE);
}

/* Starts m1 and waits until its worker is held once the host call has
 * returned, before anything of the start's outcome is recorded. */
static MvMachine *
start_held (Fixture *f, FakeHold *hold)
{
  MvMachine *m = fixture_machine (f, "m1");
  g_autoptr (GError) error = NULL;

  fake_hold_arm (hold, FAKE_RUNTIME_AFTER (FAKE_RUNTIME_START));
  g_assert_true (mv_reconciler_request (f->rec, m, MV_REQUEST_START, &error));
  mv_reconciler_kick (m);
  WAIT_UNTIL (f, fake_hold_holding (hold));
  return m;
}

/* The worker that took a start records what came of it before the main
 * thread hears of it, as the main thread would have: one trip between
 * threads fewer, and the same record. */
static void
test_start_outcome_recorded_by_its_worker (Fixture *f, gconstpointer data)
{
  FakeHold *hold = fake_runtime_hold (f->runtime);
  guint mark = fake_log_len (f->log);
  MvMachine *m = start_held (f, hold);
  g_autofree char *writes = NULL;
  gint64 deadline;
  gboolean running = FALSE;

  fake_hold_release (hold);

  /* The main loop is left alone: only the worker can write it. */
  deadline = g_get_monotonic_time () + 10 * G_USEC_PER_SEC;
  while (!running && g_get_monotonic_time () < deadline)
    {
      g_autoptr (MvStatus) recorded = fake_records_status (f->records, "m1");

      running = recorded->state == MV_STATE_RUNNING;
      if (!running)
        g_usleep (1000);
    }
  g_assert_true (running);
  g_assert_cmpint (m->status->state, ==, MV_STATE_STARTING);

  fixture_settle (f);
  g_assert_cmpint (m->status->state, ==, MV_STATE_RUNNING);
  g_assert_cmpuint (m->status->observed_generation, ==, m->config->desired_generation);
  /* Written once, by the worker: the phase, then the outcome. */
  writes = status_writes (f, mark);
  g_assert_cmpstr (writes, ==, "Starting start, Running -");
  fixture_assert_status_recorded (f, m);
}

/* A wish changed while the machine started: what its worker recorded is
 * not what the main thread makes of the start, which writes it again. */
static void
test_start_outcome_written_again_if_it_changed (Fixture *f, gconstpointer data)
{
  FakeHold *hold = fake_runtime_hold (f->runtime);
  guint mark = fake_log_len (f->log);
  MvMachine *m = start_held (f, hold);
  g_autoptr (GError) error = NULL;
  g_autofree char *writes = NULL;

  /* Stopped is wished for now: the start no longer reaches the wish. */
  g_assert_true (mv_reconciler_request (f->rec, m, MV_REQUEST_STOP, &error));
  WAIT_UNTIL (f, m->config_writes == 0);
  fake_hold_arm (hold, FAKE_RUNTIME_STOP);
  fake_hold_release (hold);
  WAIT_UNTIL (f, fake_hold_holding (hold));

  /* The worker's record said the wish it worked for was reached; the
   * main thread's does not, and went to disk after it. */
  writes = status_writes (f, mark);
  g_assert_cmpstr (writes, ==, "Starting start, Running -, Running -, Stopping stop");
  fake_hold_release (hold);
  fixture_settle (f);
  g_assert_cmpint (m->status->state, ==, MV_STATE_STOPPED);
  fixture_assert_status_recorded (f, m);
}

typedef struct {
  gboolean   done;
  MvMachine *machine;
  GError    *error;
} Defined;

static void
on_defined (MvMachine *machine, gboolean existed, const GError *error, gpointer data)
{
  Defined *defined = data;

  defined->done = TRUE;
  defined->machine = machine;
  defined->error = error ? g_error_copy (error) : NULL;
}

/* A create that starts its machine makes its records with the start's
 * phase and operation ID in them, and the worker that wrote them takes
 * the start and records its outcome: one status write after the
 * records, not two. */
static void
test_create_records_its_start (Fixture *f, gconstpointer data)
{
  guint mark = fake_log_len (f->log);
  Defined defined = { 0 };
  g_autofree char *writes = NULL, *line = NULL;
  int created, started;

  mv_reconciler_define_async (f->rec, fixture_spec ("m1"), TRUE, MV_PULL_MISSING, NULL, NULL,
                              on_defined, &defined);
  WAIT_UNTIL (f, defined.done);
  g_assert_no_error (defined.error);
  fixture_settle (f);
  g_assert_cmpint (defined.machine->status->state, ==, MV_STATE_RUNNING);
  g_assert_cmpuint (defined.machine->status->observed_generation, ==,
                    defined.machine->config->desired_generation);

  created = fake_log_find (f->log, mark, "records.create m1");
  started = fake_log_find (f->log, mark, "runtime.start m1");
  g_assert_cmpint (created, >=, 0);
  g_assert_cmpint (created, <, started);
  line = fake_log_get (f->log, created);
  g_assert_nonnull (strstr (line, " state=Starting phase=start op="));
  g_assert_null (strstr (line, " op=-"));
  writes = status_writes (f, mark);
  g_assert_cmpstr (writes, ==, "Running -");
  fixture_assert_status_recorded (f, defined.machine);
}

/* A create that starts, whose records cannot be written: no machine,
 * and nothing started. */
static void
test_create_start_unrecorded (Fixture *f, gconstpointer data)
{
  Defined defined = { 0 };

  fake_records_fail_next (f->records, FAKE_RECORDS_CREATE, "Quota exceeded");
  mv_reconciler_define_async (f->rec, fixture_spec ("m1"), TRUE, MV_PULL_MISSING, NULL, NULL,
                              on_defined, &defined);
  WAIT_UNTIL (f, defined.done);
  g_assert_error (defined.error, MV_ERROR, MV_ERROR_FAILED);
  g_clear_error (&defined.error);
  g_assert_null (defined.machine);
  fixture_settle (f);
  g_assert_cmpuint (mv_reconciler_count (f->rec), ==, 0);
  g_assert_cmpuint (f->recorder->added->len, ==, 0);
  g_assert_cmpuint (fake_log_count (f->log, "runtime.start"), ==, 0);
  g_assert_cmpuint (fake_log_count (f->log, "records.make_runtime_dir"), ==, 0);
}

int
main (int argc, char **argv)
{
  fixture_init (&argc, &argv);
  FIXTURE_TEST ("/reconcile/phases/create-records-its-start", test_create_records_its_start);
  FIXTURE_TEST ("/reconcile/phases/create-start-unrecorded", test_create_start_unrecorded);
  FIXTURE_TEST ("/reconcile/phases/recorded-before-each-host-call",
                test_recorded_before_each_host_call);
  FIXTURE_TEST ("/reconcile/phases/start-outcome-recorded-by-its-worker",
                test_start_outcome_recorded_by_its_worker);
  FIXTURE_TEST ("/reconcile/phases/start-outcome-written-again-if-it-changed",
                test_start_outcome_written_again_if_it_changed);
  FIXTURE_TEST ("/reconcile/phases/recorded-with-the-transitional-state",
                test_recorded_with_the_transitional_state);
  for (guint i = 0; i < G_N_ELEMENTS (write_cases); i++)
    {
      g_autofree char *path = g_strdup_printf ("/reconcile/phases/failed-write-keeps-host-untouched/%s",
                                               write_cases[i].name);
      FIXTURE_TEST_DATA (path, &write_cases[i], test_failed_write_keeps_host_untouched);
    }
  FIXTURE_TEST ("/reconcile/phases/failed-host-call-answers-with-its-error",
                test_failed_host_call_answers_with_its_error);
  FIXTURE_TEST ("/reconcile/phases/failed-config-write-changes-nothing",
                test_failed_config_write_changes_nothing);
  FIXTURE_TEST ("/reconcile/phases/failed-create-leaves-no-machine",
                test_failed_create_leaves_no_machine);
  FIXTURE_TEST ("/reconcile/phases/failed-records-removal-is-carried-on",
                test_failed_records_removal_is_carried_on);
  FIXTURE_TEST ("/reconcile/phases/destroy-goes-on-unrecorded", test_destroy_goes_on_unrecorded);
  FIXTURE_TEST ("/reconcile/phases/failure-answers-its-own-wish", test_failure_answers_its_own_wish);
  FIXTURE_TEST ("/reconcile/phases/plain-delete-of-active-is-refused",
                test_plain_delete_of_active_is_refused);
  return g_test_run ();
}
