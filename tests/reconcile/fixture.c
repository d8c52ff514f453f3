#include "fixture.h"

#include <string.h>

/* Waiting gives up after this many iterations of the main context, or
 * this many seconds: far beyond what any case needs, even under a
 * sanitizer, so that a broken case fails instead of hanging. */
#define MAX_ITERATIONS     100000
#define WATCHDOG_SECONDS   20

/* Warnings are judged by the writer, which any thread may call. */
static GMutex      warnings_lock;
static GPtrArray  *expected_warnings;     /* char*: substrings expected */
static GHashTable *seen_warnings;         /* expected substring -> count */
static GPtrArray  *unexpected_warnings;   /* char*: messages */

static const char *
message_of (const GLogField *fields, gsize n_fields, char **owned)
{
  for (gsize i = 0; i < n_fields; i++)
    if (g_str_equal (fields[i].key, "MESSAGE"))
      {
        if (fields[i].length < 0)
          return fields[i].value;
        return *owned = g_strndup (fields[i].value, fields[i].length);
      }
  return "";
}

static GLogWriterOutput
test_writer (GLogLevelFlags level, const GLogField *fields, gsize n_fields, gpointer data)
{
  g_autofree char *owned = NULL;
  const char *message;
  gboolean expected = FALSE;

  if (level & (G_LOG_LEVEL_ERROR | G_LOG_LEVEL_CRITICAL))
    return g_log_writer_default (level, fields, n_fields, data);
  if (!(level & G_LOG_LEVEL_WARNING))
    return g_test_verbose () ? g_log_writer_default (level, fields, n_fields, data)
                             : G_LOG_WRITER_HANDLED;

  message = message_of (fields, n_fields, &owned);
  g_mutex_lock (&warnings_lock);
  for (guint i = 0; expected_warnings && i < expected_warnings->len; i++)
    if (strstr (message, expected_warnings->pdata[i]))
      {
        gpointer key = expected_warnings->pdata[i];

        g_hash_table_replace (seen_warnings, key,
                              GUINT_TO_POINTER (GPOINTER_TO_UINT (
                                g_hash_table_lookup (seen_warnings, key)) + 1));
        expected = TRUE;
        break;
      }
  if (!expected && unexpected_warnings)
    g_ptr_array_add (unexpected_warnings, g_strdup (message));
  g_mutex_unlock (&warnings_lock);
  if (g_test_verbose ())
    g_test_message ("%s warning: %s", expected ? "expected" : "UNEXPECTED", message);
  return G_LOG_WRITER_HANDLED;
}

void
fixture_init (int *argc, char ***argv)
{
  g_test_init (argc, argv, NULL);
  /* Warnings are judged by test_writer(); criticals stay fatal. */
  g_log_set_always_fatal (G_LOG_FATAL_MASK | G_LOG_LEVEL_CRITICAL);
  g_log_set_writer_func (test_writer, NULL, NULL);
  fake_set_main_thread ();
}

void
fixture_expect_warning (Fixture *f, const char *text)
{
  g_mutex_lock (&warnings_lock);
  g_ptr_array_add (expected_warnings, g_strdup (text));
  g_mutex_unlock (&warnings_lock);
}

static gboolean
migration_guard (const char *machine_id, gpointer user_data)
{
  Fixture *f = user_data;

  return g_hash_table_contains (f->migrating, machine_id);
}

void
fixture_setup (Fixture *f, gconstpointer data)
{
  g_mutex_lock (&warnings_lock);
  expected_warnings = g_ptr_array_new_with_free_func (g_free);
  seen_warnings = g_hash_table_new (NULL, NULL);
  unexpected_warnings = g_ptr_array_new_with_free_func (g_free);
  g_mutex_unlock (&warnings_lock);

  f->log = fake_log_new ();
  f->runtime = fake_runtime_new ("test", f->log);
  f->records = fake_records_new (f->log);
  f->storage = fake_storage_new (f->log);
  f->network = fake_network_new (f->log);
  f->snapshots = fake_snapshots_new (f->log);
  f->clock = fake_clock_new ();
  f->recorder = recorder_new ();
  f->runtimes = mv_runtimes_new (NULL);
  mv_runtimes_add (f->runtimes, fake_runtime_iface (f->runtime), "1.0.0");
  f->host = (MvHost) {
    .runtimes = f->runtimes,
    .records = fake_records_iface (f->records),
    .storage = fake_storage_iface (f->storage),
    .network = fake_network_iface (f->network),
    .snapshots = fake_snapshots_iface (f->snapshots),
  };
  f->migrating = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  f->options = (MvReconcilerOptions) {
    .standby_min_seconds = 1,
    .idle_sample_seconds = 1,
    .idle_cpu_percent = 10,
    .restart_backoff_ms = FIXTURE_BACKOFF_MS,
    .resync_seconds = FIXTURE_RESYNC_SECONDS,
    .migration_guard = migration_guard,
    .migration_guard_data = f,
  };
  f->rec = mv_reconciler_new (&f->host, &f->options, &f->recorder->observer,
                              fake_clock_iface (f->clock));
}

static void
assert_nothing_odd (Fixture *f)
{
  g_autofree char *breaches = fake_log_breaches (f->log);
  g_autoptr (GString) warnings = g_string_new (NULL);

  if (breaches)
    g_test_fail_printf ("The fakes saw their contracts broken:\n%s", breaches);
  for (guint i = 0; i < f->recorder->breaches->len; i++)
    g_test_fail_printf ("Observer: %s", (const char *) f->recorder->breaches->pdata[i]);

  g_mutex_lock (&warnings_lock);
  for (guint i = 0; i < unexpected_warnings->len; i++)
    g_string_append_printf (warnings, "  unexpected: %s\n",
                            (const char *) unexpected_warnings->pdata[i]);
  for (guint i = 0; i < expected_warnings->len; i++)
    if (!g_hash_table_lookup (seen_warnings, expected_warnings->pdata[i]))
      g_string_append_printf (warnings, "  expected, not seen: %s\n",
                              (const char *) expected_warnings->pdata[i]);
  g_mutex_unlock (&warnings_lock);
  if (warnings->len)
    g_test_fail_printf ("Warnings:\n%s", warnings->str);
}

void
fixture_teardown (Fixture *f, gconstpointer data)
{
  g_assert_false (fake_hold_holding (fake_runtime_hold (f->runtime)));
  g_assert_false (fake_hold_holding (fake_storage_hold (f->storage)));
  fixture_settle (f);
  assert_nothing_odd (f);

  mv_reconciler_free (f->rec);
  g_hash_table_unref (f->migrating);
  mv_runtimes_free (f->runtimes);
  recorder_free (f->recorder);
  fake_clock_free (f->clock);
  fake_snapshots_free (f->snapshots);
  fake_network_free (f->network);
  fake_storage_free (f->storage);
  fake_records_free (f->records);
  fake_runtime_free (f->runtime);
  fake_log_free (f->log);

  g_mutex_lock (&warnings_lock);
  g_clear_pointer (&expected_warnings, g_ptr_array_unref);
  g_clear_pointer (&seen_warnings, g_hash_table_unref);
  g_clear_pointer (&unexpected_warnings, g_ptr_array_unref);
  g_mutex_unlock (&warnings_lock);
}

/* Waiting ----------------------------------------------------------------- */

static gboolean
on_watchdog (gpointer user_data)
{
  Fixture *f = user_data;

  f->timed_out = TRUE;
  return G_SOURCE_REMOVE;
}

guint
fixture_wait_begin (Fixture *f)
{
  f->timed_out = FALSE;
  return g_timeout_add_seconds (WATCHDOG_SECONDS, on_watchdog, f);
}

gboolean
fixture_iterate (Fixture *f, guint iterations)
{
  if (f->timed_out || iterations >= MAX_ITERATIONS)
    return FALSE;
  g_main_context_iteration (NULL, TRUE);
  return TRUE;
}

void
fixture_wait_end (Fixture *f, guint watchdog)
{
  if (!f->timed_out)
    g_source_remove (watchdog);
}

void
fixture_gave_up (Fixture *f, const char *file, int line, const char *cond)
{
  g_autofree char *dump = fake_log_dump (f->log);
  g_autofree char *msg = g_strdup_printf ("gave up waiting for %s; host calls:\n%s", cond, dump);

  g_assertion_message (G_LOG_DOMAIN, file, line, G_STRFUNC, msg);
  g_abort ();
}

void
fixture_settle (Fixture *f)
{
  WAIT_UNTIL (f, !mv_reconciler_busy (f->rec));
}

/* Machines ---------------------------------------------------------------- */

MvSpec *
fixture_spec (const char *id)
{
  MvSpec *spec = mv_spec_new ();

  spec->id = g_strdup (id);
  spec->name = g_strdup_printf ("vm-%s", id);
  spec->kernel = g_strdup ("/boot/vmlinuz");
  return spec;
}

MvMachine *
fixture_define (Fixture *f, MvSpec *spec)
{
  g_autoptr (GError) error = NULL;
  gboolean existed = TRUE;
  MvMachine *machine = mv_reconciler_define (f->rec, spec, FALSE, &existed, &error);

  g_assert_no_error (error);
  g_assert_nonnull (machine);
  g_assert_false (existed);
  return machine;
}

MvMachine *
fixture_machine (Fixture *f, const char *id)
{
  return fixture_define (f, fixture_spec (id));
}

static GError *
wait_for (Fixture *f, Waiter *waiter, MvMachine *machine)
{
  mv_reconciler_kick (machine);
  WAIT_UNTIL (f, waiter->done);
  return waiter->error ? g_error_copy (waiter->error) : NULL;
}

GError *
fixture_request (Fixture *f, MvMachine *machine, MvRequest request)
{
  g_autoptr (GError) error = NULL;

  if (!mv_reconciler_request (f->rec, machine, request, &error))
    g_error ("The request was refused: %s", error->message);
  return wait_for (f, recorder_wait (f->recorder, machine), machine);
}

GError *
fixture_set_desired (Fixture *f, MvMachine *machine, MvDesired desired)
{
  g_autoptr (GError) error = NULL;

  if (!mv_reconciler_set_desired (f->rec, machine, desired, &error))
    g_error ("SetDesiredState was refused: %s", error->message);
  return wait_for (f, recorder_wait (f->recorder, machine), machine);
}

GError *
fixture_kick (Fixture *f, MvMachine *machine)
{
  return wait_for (f, recorder_wait (f->recorder, machine), machine);
}

MvMachine *
fixture_running (Fixture *f, const char *id)
{
  MvMachine *machine = fixture_machine (f, id);
  g_autoptr (GError) error = fixture_request (f, machine, MV_REQUEST_START);

  g_assert_no_error (error);
  g_assert_cmpint (machine->status->state, ==, MV_STATE_RUNNING);
  return machine;
}

MvMachine *
fixture_on_standby (Fixture *f, const char *id)
{
  MvMachine *machine = fixture_running (f, id);
  g_autoptr (GError) error = fixture_request (f, machine, MV_REQUEST_STANDBY);

  g_assert_no_error (error);
  g_assert_cmpint (machine->status->state, ==, MV_STATE_STANDBY);
  return machine;
}

MvConfig *
fixture_config (Fixture *f, const char *id, MvDesired desired)
{
  MvSpec *spec = fixture_spec (id);
  MvConfig *config;

  spec->hypervisor_type = g_strdup ("test");
  config = mv_config_new (id, spec, fake_clock_real (f->clock));
  mv_config_set_desired (config, desired, fake_clock_real (f->clock));
  return config;
}

MvMachine *
fixture_load (Fixture *f, MvConfig *config, MvStatus *status)
{
  fake_records_put (f->records, config, status);
  return mv_reconciler_add_loaded (f->rec, config, status);
}

static void
on_recovered (gpointer user_data)
{
  Fixture *f = user_data;

  f->recovered = TRUE;
}

void
fixture_recover (Fixture *f)
{
  f->recovered = FALSE;
  mv_reconciler_recover (f->rec, on_recovered, f);
  WAIT_UNTIL (f, f->recovered);
}

void
fixture_assert_status_recorded (Fixture *f, MvMachine *machine)
{
  g_autoptr (MvStatus) recorded = fake_records_status (f->records, machine->id);
  g_autoptr (JsonNode) on_disk = mv_status_to_node (recorded);
  g_autoptr (JsonNode) in_memory = mv_status_to_node (machine->status);

  g_assert_true (json_node_equal (on_disk, in_memory));
}

int
fixture_assert_recorded_before_impl (Fixture *f, const char *file, int line, guint from,
                                     const char *machine_id, const char *call,
                                     const char *phase, char **operation_id)
{
  g_autofree char *host_call = g_strdup_printf ("%s %s", call, machine_id);
  g_autofree char *write = g_strdup_printf ("records.save_status %s", machine_id);
  g_autofree char *want = g_strdup_printf (" phase=%s op=", phase);
  g_autofree char *entry = NULL;
  g_autofree char *dump = NULL;
  const char *op;
  int at = fake_log_find (f->log, from, host_call);
  int written = at >= 0 ? fake_log_rfind (f->log, at, write) : -1;

  entry = written >= 0 ? fake_log_get (f->log, written) : NULL;
  op = entry ? strstr (entry, want) : NULL;
  if (op && !g_str_equal (op + strlen (want), "-"))
    {
      if (operation_id)
        *operation_id = g_strdup (op + strlen (want));
      return at;
    }
  dump = fake_log_dump (f->log);
  g_autofree char *msg = g_strdup_printf ("%s (from entry %u) was not preceded by a status "
                                          "written with phase %s and an operation ID:\n%s",
                                          host_call, from, phase, dump);
  g_assertion_message (G_LOG_DOMAIN, file, line, G_STRFUNC, msg);
  return -1;
}
