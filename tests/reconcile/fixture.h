/* What every reconciler test starts from: a reconciler on a host made of
 * fakes (one runtime, of the type "test" that specs may name), a fake
 * clock and a recording observer; helpers that ask for something and
 * wait, on the default main context, until the reconciler has settled it;
 * and checks at teardown that no fake saw its contract broken and no
 * warning went unexpected. */
#pragma once
#include "fake-clock.h"
#include "fake-log.h"
#include "fake-network.h"
#include "fake-records.h"
#include "fake-runtime.h"
#include "fake-snapshots.h"
#include "fake-storage.h"
#include "recorder.h"
#include "core/errors.h"
#include "reconcile/reconciler.h"

#define FIXTURE_BACKOFF_MS       300
#define FIXTURE_RESYNC_SECONDS   30

typedef struct {
  FakeLog             *log;
  FakeRuntime         *runtime;
  FakeRecords         *records;
  FakeStorage         *storage;
  FakeNetwork         *network;
  FakeSnapshots       *snapshots;
  FakeClock           *clock;
  Recorder            *recorder;
  MvRuntimes          *runtimes;
  MvHost               host;
  MvReconcilerOptions  options;
  MvReconciler        *rec;
  GHashTable          *migrating;     /* machine ids the migration guard names */
  gboolean             recovered;
  gboolean             timed_out;
} Fixture;

/* g_test_init(), and warnings that fail the test unless expected. */
void        fixture_init (int *argc, char ***argv);
void        fixture_setup (Fixture *f, gconstpointer data);
void        fixture_teardown (Fixture *f, gconstpointer data);
#define FIXTURE_TEST(path, func) \
  g_test_add (path, Fixture, NULL, fixture_setup, func, fixture_teardown)
#define FIXTURE_TEST_DATA(path, data, func) \
  g_test_add (path, Fixture, data, fixture_setup, func, fixture_teardown)

/* A warning containing @text is expected before the test ends. */
void        fixture_expect_warning (Fixture *f, const char *text);

/* Iterates the default main context until @cond holds; fails the test
 * after a generous number of iterations or seconds instead of hanging. */
#define WAIT_UNTIL(f, cond)                                                   \
  G_STMT_START {                                                              \
    guint wait_watchdog_ = fixture_wait_begin (f);                            \
    for (guint wait_n_ = 0; !(cond); wait_n_++)                               \
      if (!fixture_iterate (f, wait_n_))                                      \
        fixture_gave_up (f, __FILE__, __LINE__, #cond);                       \
    fixture_wait_end (f, wait_watchdog_);                                     \
  } G_STMT_END
guint       fixture_wait_begin (Fixture *f);
gboolean    fixture_iterate (Fixture *f, guint iterations);
void        fixture_wait_end (Fixture *f, guint watchdog);
G_NORETURN void fixture_gave_up (Fixture *f, const char *file, int line, const char *cond);

/* Nothing under way: no step, recovery or deletion in a worker. */
void        fixture_settle (Fixture *f);

/* A valid spec with ID @id and name "vm-@id". */
MvSpec     *fixture_spec (const char *id);
MvMachine  *fixture_define (Fixture *f, MvSpec *spec);
MvMachine  *fixture_machine (Fixture *f, const char *id);
/* Asks as the bus does (request, note the wish, kick) and waits for the
 * answer; returns the error it settled with, or NULL. */
GError     *fixture_request (Fixture *f, MvMachine *machine, MvRequest request);
GError     *fixture_set_desired (Fixture *f, MvMachine *machine, MvDesired desired);
/* Notes the wish as it is now, kicks, and waits. */
GError     *fixture_kick (Fixture *f, MvMachine *machine);
/* A new machine, started (Running) or put on standby after that. */
MvMachine  *fixture_running (Fixture *f, const char *id);
MvMachine  *fixture_on_standby (Fixture *f, const char *id);

/* Records a daemon before this one left: a config of @id wanted @desired,
 * and a status the caller fills in. */
MvConfig   *fixture_config (Fixture *f, const char *id, MvDesired desired);
/* Puts the records into the fake store and adds the machine as loaded;
 * both are taken. */
MvMachine  *fixture_load (Fixture *f, MvConfig *config, MvStatus *status);
/* mv_reconciler_recover(), waited for. */
void        fixture_recover (Fixture *f);
/* Fails unless the status last written for @machine is its status now. */
void        fixture_assert_status_recorded (Fixture *f, MvMachine *machine);

/* Fails unless the last status written for @machine_id before the first
 * @call of it at or after log entry @from carried @phase and an operation
 * ID; returns the index of the call, and the ID in *@operation_id. */
#define fixture_assert_recorded_before(f, from, machine_id, call, phase, operation_id)     \
  fixture_assert_recorded_before_impl (f, __FILE__, __LINE__, from, machine_id, call, phase, \
                                       operation_id)
int         fixture_assert_recorded_before_impl (Fixture *f, const char *file, int line,
                                                 guint from, const char *machine_id,
                                                 const char *call, const char *phase,
                                                 char **operation_id);
