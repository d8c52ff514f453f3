/* Reconciliation and recovery through the daemon, with the test runtime:
 * standby and waking, sleepy machines, traffic events, restart policies,
 * StartOnBoot, remove_on_exit, the migration guard, and a crash of the
 * daemon at every recorded phase of every operation. */
#include "bus-client.h"
#include "names.h"

#include <glib/gstdio.h>

#define SPEC_WITH(name, extra) \
  "{\"name\":\"" name "\",\"hypervisor_type\":\"test\",\"kernel\":\"/boot/vmlinuz\"" extra "}"
#define SPEC(name) SPEC_WITH (name, "")

/* Short lifecycle periods so that the tests see restarts, idleness and
 * resyncs within seconds; the product defaults are untouched. */
static const char test_config[] =
  "[lifecycle]\n"
  "standby-min-seconds=1\n"
  "idle-sample-seconds=1\n"
  "idle-cpu-percent=10\n"
  "restart-backoff-ms=300\n"
  "resync-seconds=1\n";

static void
assert_state_stays (Client *client, const char *path, const char *state, guint ms)
{
  for (guint waited = 0; waited < ms; waited += 100)
    {
      g_autofree char *now = client_get_string (client, path, "State");
      g_assert_cmpstr (now, ==, state);
      client_settle (client, 100);
    }
}

static gboolean
get_bool (Fixture *f, const char *path, const char *prop)
{
  sd_bus_error error = SD_BUS_ERROR_NULL;
  int value = 0;

  g_assert_cmpint (sd_bus_get_property_trivial (f->client->bus, MV_BUS_NAME, path,
                                                MV_MACHINE_IFACE, prop, &error, 'b', &value),
                   >=, 0);
  return value;
}

static char *
machine_id (Client *client, const char *path)
{
  return client_get_string (client, path, "Id");
}

static char *
machine_file (Fixture *f, const char *path, const char *name)
{
  g_autofree char *id = machine_id (f->client, path);
  return g_build_filename (mv_test_env_state_dir (f->env), "machines", id, name, NULL);
}

static char *
vmm_file (Fixture *f, const char *id)
{
  return g_build_filename (mv_test_env_runtime_dir (f->env), "machines", id,
                           "test-vmm.state", NULL);
}

/* The VMM "crashes" or ends with @how ("crashed", "exited 0"). */
static void
end_vmm (Fixture *f, const char *path, const char *how)
{
  g_autofree char *id = machine_id (f->client, path);
  g_autofree char *file = vmm_file (f, id);

  g_assert_true (g_file_set_contents (file, how, -1, NULL));
}

/* ----- standby ----- */

static void
test_standby_and_start (Fixture *f, gconstpointer data)
{
  g_autofree char *path = client_create_ok (f->client, SPEC ("sleeper"));
  g_autofree char *id = machine_id (f->client, path);
  g_autofree char *saved = machine_file (f, path, "saved");
  g_autofree char *vmm = vmm_file (f, id);
  g_autofree char *status = machine_file (f, path, "status.json");
  g_autofree char *json = NULL;

  client_call_ok (f->client, path, "Start");
  client_call_ok (f->client, path, "Pause");
  client_call_ok (f->client, path, "Standby");

  /* Frozen to disk, the VMM gone. */
  g_autofree char *state = client_get_string (f->client, path, "State");
  g_assert_cmpstr (state, ==, "Standby");
  g_assert_true (g_file_test (saved, G_FILE_TEST_IS_DIR));
  g_assert_false (g_file_test (vmm, G_FILE_TEST_EXISTS));
  g_assert_cmpuint (client_get_u64 (f->client, path, "ObservedGeneration"), ==,
                    client_get_u64 (f->client, path, "DesiredGeneration"));

  /* Standby survives a daemon restart. */
  mv_test_env_stop_daemon (f->env, SIGTERM);
  mv_test_env_start_daemon (f->env, NULL);
  g_free (state);
  state = client_get_string (f->client, path, "State");
  g_assert_cmpstr (state, ==, "Standby");

  /* Start resumes the frozen guest rather than booting afresh, and the
   * saved state, stale once the guest runs on, goes. */
  client_call_ok (f->client, path, "Start");
  g_free (state);
  state = client_get_string (f->client, path, "State");
  g_assert_cmpstr (state, ==, "Running");
  g_assert_true (g_file_get_contents (status, &json, NULL, NULL));
  g_assert_nonnull (strstr (json, "\"restored\" : true"));
  g_assert_false (g_file_test (saved, G_FILE_TEST_EXISTS));

  /* Stop discards what was frozen. */
  client_call_ok (f->client, path, "Standby");
  g_assert_true (g_file_test (saved, G_FILE_TEST_IS_DIR));
  client_call_ok (f->client, path, "Stop");
  g_free (state);
  state = client_get_string (f->client, path, "State");
  g_assert_cmpstr (state, ==, "Stopped");
  g_assert_false (g_file_test (saved, G_FILE_TEST_EXISTS));

  /* A stopped machine cannot go on standby. */
  g_autofree char *msg = NULL;
  g_autofree char *err = client_machine_call (f->client, path, "Standby", &msg);
  g_assert_cmpstr (err, ==, MV_BUS_ERROR_INVALID_STATE);
}

static void
test_restore_failure_keeps_saved_state (Fixture *f, gconstpointer data)
{
  g_autofree char *path = client_create_ok (f->client, SPEC_WITH ("fragile", ",\"kernel_args\":\"test.fail-restore\""));
  g_autofree char *saved = machine_file (f, path, "saved");
  g_autofree char *msg = NULL, *err = NULL, *state = NULL;

  client_call_ok (f->client, path, "Start");
  client_call_ok (f->client, path, "Standby");
  err = client_machine_call (f->client, path, "Start", &msg);
  g_assert_cmpstr (err, ==, MV_BUS_ERROR_INVALID_STATE);
  g_assert_nonnull (strstr (msg, "did not wake"));
  state = client_get_string (f->client, path, "State");
  g_assert_cmpstr (state, ==, "Standby");
  g_assert_true (g_file_test (saved, G_FILE_TEST_IS_DIR));

  /* A change of shape makes the frozen guest useless: it is discarded. */
  g_autoptr (sd_bus_message) r = client_call (
    f->client, path, MV_MACHINE_IFACE, "Update", &err, &msg, "s",
    SPEC_WITH ("fragile", ",\"kernel_args\":\"test.fail-restore\",\"memory_bytes\":536870912"));
  g_assert_nonnull (r);
  g_free (state);
  state = client_get_string (f->client, path, "State");
  g_assert_cmpstr (state, ==, "Stopped");
  g_assert_false (g_file_test (saved, G_FILE_TEST_EXISTS));
}

/* ----- sleepy machines and traffic ----- */

static void
test_idle_goes_on_standby (Fixture *f, gconstpointer data)
{
  g_autofree char *path = client_create_ok (f->client, SPEC_WITH ("sleepy", ",\"standby_after_seconds\":2"));
  g_autofree char *busy = client_create_ok (f->client, SPEC ("insomniac"));

  client_call_ok (f->client, path, "Start");
  client_call_ok (f->client, busy, "Start");
  /* Idle (the test VMM uses no CPU) for 2 s, judged once a second. */
  client_assert_state_soon (f->client, path, "Standby", 8000);
  g_assert_cmpint (client_get_i32 (f->client, path, "ExitCode"), ==, -1);
  /* Without standby_after_seconds a machine is never put to sleep. */
  g_autofree char *state = client_get_string (f->client, busy, "State");
  g_assert_cmpstr (state, ==, "Running");
}

static void
test_busy_stays_awake (Fixture *f, gconstpointer data)
{
  g_autofree char *path = client_create_ok (f->client, SPEC_WITH ("worker", ",\"standby_after_seconds\":2"));
  g_autofree char *id = NULL, *cpu = NULL;
  guint64 used = 0;

  client_call_ok (f->client, path, "Start");
  id = machine_id (f->client, path);
  cpu = g_build_filename (mv_test_env_runtime_dir (f->env), "machines", id, "test-vmm.cpu", NULL);
  /* Half a CPU, well above the 10 % idle threshold, for 5 s. */
  for (guint i = 0; i < 50; i++)
    {
      g_autofree char *text = NULL;
      used += 50 * 1000 * 1000;
      text = g_strdup_printf ("%" G_GUINT64_FORMAT, used);
      g_assert_true (g_file_set_contents (cpu, text, -1, NULL));
      client_settle (f->client, 100);
    }
  g_autofree char *state = client_get_string (f->client, path, "State");
  g_assert_cmpstr (state, ==, "Running");
  /* Once it stops working it sleeps. */
  client_assert_state_soon (f->client, path, "Standby", 8000);
}

static void
test_standby_minimum (Fixture *f, gconstpointer data)
{
  g_autofree char *err = NULL, *msg = NULL;
  g_autofree char *path = client_create (f->client, SPEC_WITH ("restless", ",\"standby_after_seconds\":30"),
                                         0, &err, &msg);

  /* Without configuration the product minimum of 60 s holds. */
  g_assert_null (path);
  g_assert_cmpstr (err, ==, MV_BUS_ERROR_INVALID_ARGUMENT);
  g_assert_nonnull (strstr (msg, "standby_after_seconds"));
  g_assert_nonnull (strstr (msg, "60"));
  g_assert_cmpuint (count_machine_dirs (mv_test_env_state_dir (f->env)), ==, 0);
}

static void
test_traffic_wakes_once (Fixture *f, gconstpointer data)
{
  g_autofree char *path = client_create_ok (f->client, SPEC ("web"));
  g_autofree char *state = NULL;

  client_call_ok (f->client, path, "Start");
  /* Traffic for a machine that is awake changes nothing. */
  g_assert_false (client_traffic (f->client, "web", 1));

  client_call_ok (f->client, path, "Standby");
  g_assert_true (client_traffic (f->client, "web", 5));
  state = client_get_string (f->client, path, "State");
  g_assert_cmpstr (state, ==, "Running");

  client_call_ok (f->client, path, "Standby");
  /* A duplicate and a stale event: no effect. */
  g_assert_false (client_traffic (f->client, "web", 5));
  g_assert_false (client_traffic (f->client, "web", 3));
  assert_state_stays (f->client, path, "Standby", 500);
  /* A newer one wakes it. */
  g_assert_true (client_traffic (f->client, "web", 6));
  g_free (state);
  state = client_get_string (f->client, path, "State");
  g_assert_cmpstr (state, ==, "Running");

  /* An unknown machine. */
  g_autofree char *err = NULL;
  g_autoptr (sd_bus_message) none = client_call (f->client, MV_MANAGER_PATH, MV_MANAGER_IFACE,
                                                 "RestoreAfterTraffic", &err, NULL, "st",
                                                 "nosuch", (guint64) 9);
  g_assert_null (none);
  g_assert_cmpstr (err, ==, MV_BUS_ERROR_NOT_FOUND);
}

/* ----- restart policies ----- */

static void
test_on_failure_backs_off_and_gives_up (Fixture *f, gconstpointer data)
{
  g_autofree char *path = client_create_ok (f->client, SPEC_WITH ("flaky", ",\"restart\":{\"mode\":\"on-failure\",\"max_retries\":2}"));
  guint64 first_delay = 0;

  client_call_ok (f->client, path, "Start");
  for (guint i = 1; i <= 2; i++)
    {
      end_vmm (f, path, "crashed");
      client_assert_state_soon (f->client, path, "Restarting", 5000);
      g_assert_cmpuint (client_get_u32 (f->client, path, "RestartCount"), ==, i);
      guint64 next = client_get_u64 (f->client, path, "NextRestartAt");
      guint64 finished = client_get_u64 (f->client, path, "FinishedAt");
      g_assert_cmpuint (next, >, finished);
      /* Exponential backoff: 300 ms, then 600 ms. */
      if (i == 1)
        first_delay = next - finished;
      else
        g_assert_cmpuint (next - finished, ==, 2 * first_delay);
      client_assert_state_soon (f->client, path, "Running", 5000);
    }
  g_assert_cmpuint (first_delay, ==, 300 * 1000);

  /* The third failure in a row is one too many. */
  end_vmm (f, path, "crashed");
  client_assert_state_soon (f->client, path, "Failed", 5000);
  assert_state_stays (f->client, path, "Failed", 1000);
  g_assert_cmpuint (client_get_u32 (f->client, path, "RestartCount"), ==, 2);

  /* A user's start resets the count. */
  client_call_ok (f->client, path, "Start");
  g_assert_cmpuint (client_get_u32 (f->client, path, "RestartCount"), ==, 0);
}

static void
test_clean_end_by_policy (Fixture *f, gconstpointer data)
{
  g_autofree char *no = client_create_ok (f->client, SPEC ("oneshot"));
  g_autofree char *on_failure = client_create_ok (f->client, SPEC_WITH ("batch", ",\"restart\":{\"mode\":\"on-failure\"}"));
  g_autofree char *always = client_create_ok (f->client, SPEC_WITH ("service", ",\"restart\":{\"mode\":\"always\"}"));
  g_autofree char *desired = NULL;

  client_call_ok (f->client, no, "Start");
  client_call_ok (f->client, on_failure, "Start");
  client_call_ok (f->client, always, "Start");
  end_vmm (f, no, "exited 0");
  end_vmm (f, on_failure, "exited 0");
  end_vmm (f, always, "exited 0");

  client_assert_state_soon (f->client, no, "Stopped", 5000);
  client_assert_state_soon (f->client, on_failure, "Stopped", 5000);
  desired = client_get_string (f->client, no, "DesiredState");
  g_assert_cmpstr (desired, ==, "stopped");
  g_assert_cmpint (client_get_i32 (f->client, no, "ExitCode"), ==, 0);
  /* always restarts whatever the end. */
  client_assert_state_soon (f->client, always, "Restarting", 5000);
  client_assert_state_soon (f->client, always, "Running", 5000);

  /* Stop cancels a pending restart. */
  end_vmm (f, always, "crashed");
  client_assert_state_soon (f->client, always, "Restarting", 5000);
  client_call_ok (f->client, always, "Stop");
  assert_state_stays (f->client, always, "Stopped", 1500);
  g_assert_cmpuint (client_get_u64 (f->client, always, "NextRestartAt"), ==, 0);
}

static void
test_remove_on_exit (Fixture *f, gconstpointer data)
{
  g_autofree char *path = client_create_ok (f->client, SPEC_WITH ("ephemeral", ",\"remove_on_exit\":true"));
  g_autofree char *err = NULL;

  client_call_ok (f->client, path, "Start");
  client_clear_signals (f->client);
  end_vmm (f, path, "exited 0");
  for (guint i = 0; i < 50 && client_count_signals (f->client, MV_MANAGER_PATH, "MachineRemoved") == 0; i++)
    client_settle (f->client, 100);
  g_assert_cmpuint (client_count_signals (f->client, MV_MANAGER_PATH, "MachineRemoved"), ==, 1);
  g_assert_cmpuint (count_machine_dirs (mv_test_env_state_dir (f->env)), ==, 0);
  g_autoptr (sd_bus_message) none = client_call (f->client, MV_MANAGER_PATH, MV_MANAGER_IFACE,
                                                 "GetMachine", &err, NULL, "s", "ephemeral");
  g_assert_null (none);
}

static void
test_start_on_boot (Fixture *f, gconstpointer data)
{
  g_autofree char *user_stopped = client_create_ok (f->client, SPEC_WITH ("kept-down", ",\"restart\":{\"mode\":\"unless-stopped\"}"));
  g_autofree char *never_started = client_create_ok (f->client, SPEC_WITH ("comes-up", ",\"restart\":{\"mode\":\"unless-stopped\"}"));
  g_autofree char *always = client_create_ok (f->client, SPEC_WITH ("always-up", ",\"restart\":{\"mode\":\"always\"}"));
  g_autofree char *plain = client_create_ok (f->client, SPEC ("stays-down"));
  g_autofree char *s4 = NULL;

  client_call_ok (f->client, user_stopped, "Start");
  client_call_ok (f->client, user_stopped, "Stop");
  g_assert_true (get_bool (f, user_stopped, "StoppedByUser"));
  client_call_ok (f->client, always, "Start");
  client_call_ok (f->client, always, "Stop");

  mv_test_env_stop_daemon (f->env, SIGTERM);
  mv_test_env_start_daemon (f->env, NULL);

  client_assert_state_soon (f->client, never_started, "Running", 5000);
  client_assert_state_soon (f->client, always, "Running", 5000);
  assert_state_stays (f->client, user_stopped, "Stopped", 1000);
  s4 = client_get_string (f->client, plain, "State");
  g_assert_cmpstr (s4, ==, "Stopped");
}

/* ----- migration guard ----- */

static void
test_migration_guard (Fixture *f, gconstpointer data)
{
  g_autofree char *dir = g_build_filename (mv_test_env_dir (f->env), "migrating", NULL);
  g_autofree char *moving = NULL, *still = NULL, *id = NULL, *mark = NULL;

  /* The test daemon asks this directory whether a machine migrates. */
  g_assert_cmpint (g_mkdir (dir, 0700), ==, 0);
  g_setenv ("MICROVMD_TEST_MIGRATING_DIR", dir, TRUE);
  mv_test_env_stop_daemon (f->env, SIGTERM);
  mv_test_env_start_daemon (f->env, NULL);
  g_unsetenv ("MICROVMD_TEST_MIGRATING_DIR");

  moving = client_create_ok (f->client, SPEC ("moving"));
  still = client_create_ok (f->client, SPEC ("staying"));
  id = machine_id (f->client, moving);
  mark = g_build_filename (dir, id, NULL);
  g_assert_true (g_file_set_contents (mark, "", 0, NULL));

  g_autoptr (sd_bus_message) r = client_call (f->client, moving, MV_MACHINE_IFACE,
                                              "SetDesiredState", NULL, NULL, "s", "running");
  g_assert_nonnull (r);
  /* A machine that is not migrating is reconciled as usual... */
  client_call_ok (f->client, still, "Start");
  /* ...a migrating one is left alone, through several resyncs. */
  assert_state_stays (f->client, moving, "Stopped", 2500);

  /* Once the migration is over the reconciler catches up. */
  g_assert_cmpint (g_unlink (mark), ==, 0);
  client_assert_state_soon (f->client, moving, "Running", 5000);
}

/* ----- crash safety: a daemon killed at every phase ----- */

typedef enum {
  OP_CREATE, OP_CREATE_START, OP_START, OP_STOP, OP_STANDBY, OP_RESTORE, OP_RESTART, OP_DESTROY,
  OP_VOLUME, OP_NETWORK,
} Operation;

typedef struct {
  const char *fault;
  Operation   op;
  gboolean    image;   /* the machine boots the test image, with an overlay disk */
} FaultCase;

static const FaultCase fault_cases[] = {
  { "create:staged", OP_CREATE },
  { "create:published", OP_CREATE },
  /* A create that starts: its records carry the start's phase, and the
   * worker that wrote them takes the start. */
  { "create:staged", OP_CREATE_START },
  { "create:published", OP_CREATE_START },
  { "start:recorded", OP_CREATE_START },
  { "start:done", OP_CREATE_START },
  { "start:recorded", OP_START },
  { "start:done", OP_START },
  { "stop:recorded", OP_STOP },
  { "stop:done", OP_STOP },
  { "standby:recorded", OP_STANDBY },
  { "standby:done", OP_STANDBY },
  { "restore:recorded", OP_RESTORE },
  { "restore:done", OP_RESTORE },
  /* A restart stops, then boots afresh: a crash in between finishes it. */
  { "stop:recorded", OP_RESTART },
  { "stop:done", OP_RESTART },
  { "destroy-vmm:recorded", OP_DESTROY },
  { "destroy-vmm:done", OP_DESTROY },
  { "destroy-runtime:recorded", OP_DESTROY },
  { "destroy-runtime:done", OP_DESTROY },
  { "destroy-network:recorded", OP_DESTROY },
  { "destroy-network:done", OP_DESTROY },
  { "destroy-saved-state:recorded", OP_DESTROY },
  { "destroy-saved-state:done", OP_DESTROY },
  { "destroy-disks:recorded", OP_DESTROY },
  { "destroy-disks:done", OP_DESTROY },
  { "destroy-records:recorded", OP_DESTROY },
  { "destroy-records:done", OP_DESTROY },
  /* A volume's creation, a network's. */
  { "volume:staged", OP_VOLUME },
  { "network:staged", OP_NETWORK },
  /* A machine booted from an image, with a volume: its pull, its overlay
   * disk, the volume it attaches. */
  { "create:pulling", OP_CREATE, TRUE },
  { "create:published", OP_CREATE, TRUE },
  { "overlay:formatted", OP_START, TRUE },
  { "start:disks", OP_START, TRUE },
  { "start:done", OP_START, TRUE },
  { "destroy-disks:recorded", OP_DESTROY, TRUE },
  { "destroy-disks:done", OP_DESTROY, TRUE },
};

static gboolean
settled (Client *client, gpointer data)
{
  const char *path = data;
  g_autofree char *phase = client_get_string (client, path, "Phase");
  g_autofree char *state = client_get_string (client, path, "State");

  /* Idle, and either what is wanted or given up on. */
  return *phase == '\0' && !g_str_equal (state, "Starting") && !g_str_equal (state, "Stopping") &&
         (g_str_equal (state, "Failed") ||
          client_get_u64 (client, path, "ObservedGeneration") ==
            client_get_u64 (client, path, "DesiredGeneration"));
}

static gboolean
machine_exists (Client *client, const char *name)
{
  g_autofree char *err = NULL;
  g_autoptr (sd_bus_message) r = client_call (client, MV_MANAGER_PATH, MV_MANAGER_IFACE,
                                              "GetMachine", &err, NULL, "s", name);
  if (!r)
    g_assert_cmpstr (err, ==, MV_BUS_ERROR_NOT_FOUND);
  return r != NULL;
}

/* How many saved states, moved aside once stale, and overlay disks left
 * half made are not yet deleted. */
static guint
stale_saved_states (const char *machines)
{
  g_autoptr (GDir) dir = g_dir_open (machines, 0, NULL);
  const char *entry;
  guint n = 0;

  while (dir && (entry = g_dir_read_name (dir)))
    {
      g_autofree char *sub = g_build_filename (machines, entry, NULL);
      g_autoptr (GDir) files = g_dir_open (sub, 0, NULL);
      const char *file;

      while (files && (file = g_dir_read_name (files)))
        n += g_str_has_prefix (file, "saved.stale-") || g_str_equal (file, "overlay.ext4.partial");
    }
  return n;
}

/* Nothing is left that no record accounts for. */
static void
assert_no_orphans (Fixture *f, const char *path)
{
  g_autofree char *machines = g_build_filename (mv_test_env_state_dir (f->env), "machines", NULL);
  g_autoptr (GDir) dir = g_dir_open (machines, 0, NULL);
  const char *entry;

  /* A woken guest's saved state, and what a crash left, is deleted in the
   * background. */
  for (guint i = 0; i < 40 && stale_saved_states (machines) > 0; i++)
    g_usleep (50 * 1000);

  /* No staging or half-removed record, no temporary file. */
  while (dir && (entry = g_dir_read_name (dir)))
    {
      g_autofree char *sub = g_build_filename (machines, entry, NULL);
      g_autoptr (GDir) files = NULL;
      const char *file;

      g_assert_false (entry[0] == '.');
      files = g_dir_open (sub, 0, NULL);
      while (files && (file = g_dir_read_name (files)))
        if (!g_str_equal (file, "config.json") && !g_str_equal (file, "status.json") &&
            !g_str_equal (file, "saved") && !g_str_equal (file, "overlay.ext4"))
          g_error ("%s: unexpected %s", sub, file);
    }

  /* No half-pulled image. */
  {
    g_autofree char *images = g_build_filename (mv_test_env_state_dir (f->env), "images", NULL);
    g_autoptr (GDir) cache = g_dir_open (images, 0, NULL);

    while (cache && (entry = g_dir_read_name (cache)))
      if (g_str_has_prefix (entry, ".staging-"))
        g_error ("%s: a pull left %s", images, entry);
  }

  if (path)
    {
      g_autofree char *id = machine_id (f->client, path);
      g_autofree char *state = client_get_string (f->client, path, "State");
      g_autofree char *vmm = vmm_file (f, id);
      g_autofree char *saved = machine_file (f, path, "saved");
      gboolean active = g_str_equal (state, "Running") || g_str_equal (state, "Paused");

      /* A VMM only where the record says one runs; a frozen guest only on
       * standby. */
      g_assert_cmpint (g_file_test (vmm, G_FILE_TEST_EXISTS), ==, active);
      g_assert_cmpint (g_file_test (saved, G_FILE_TEST_IS_DIR), ==, g_str_equal (state, "Standby"));
    }
}

static void
assert_no_invalid_records (Fixture *f)
{
  g_autoptr (sd_bus_message) r = NULL;
  sd_bus_error error = SD_BUS_ERROR_NULL;

  g_assert_cmpint (sd_bus_get_property (f->client->bus, MV_BUS_NAME, MV_MANAGER_PATH,
                                        MV_MANAGER_IFACE, "InvalidRecords", &error, &r, "a(ss)"),
                   >=, 0);
  g_assert_cmpint (sd_bus_message_enter_container (r, 'a', "(ss)"), >=, 0);
  g_assert_cmpint (sd_bus_message_at_end (r, FALSE), >, 0);
}

#define SWEEP_VOLUME "sweep-data"


static void
delete_volume (Fixture *f, const char *path)
{
  g_autoptr (sd_bus_message) r = client_call (f->client, path, MV_VOLUME_IFACE, "Delete",
                                              NULL, NULL, NULL);
  g_assert_nonnull (r);
}

/* Creates a volume or a network (@network) called @name; its path, or
 * NULL and *@error_name. */
static char *
create_record (Fixture *f, gboolean network, const char *name, char **error_name)
{
  g_autofree char *json = network
    ? g_strdup_printf ("{\"name\":\"%s\",\"subnet\":\"10.77.0.0/24\"}", name)
    : g_strdup_printf ("{\"name\":\"%s\",\"size_bytes\":16777216}", name);
  g_autoptr (sd_bus_message) r = client_call (f->client, MV_MANAGER_PATH, MV_MANAGER_IFACE,
                                              network ? "CreateNetwork" : "CreateVolume",
                                              error_name, NULL, "s", json);
  const char *path = NULL;

  if (!r)
    return NULL;
  g_assert_cmpint (sd_bus_message_read (r, "o", &path), >, 0);
  return g_strdup (path);
}

/* A crash while a volume or a network is made leaves none and nothing of
 * it. */
static void
run_record_fault_case (Fixture *f, const FaultCase *c, guint n)
{
  gboolean network = c->op == OP_NETWORK;
  g_autofree char *name = g_strdup_printf ("crash-%s-%u", network ? "net" : "vol", n);
  g_autofree char *dir = g_build_filename (mv_test_env_state_dir (f->env),
                                           network ? "networks" : "volumes", NULL);
  g_autofree char *err = NULL, *path = NULL;
  g_autoptr (GDir) entries = NULL;
  g_autoptr (sd_bus_message) deleted = NULL;
  const char *entry;

  g_setenv ("MICROVMD_FAULT_POINT", c->fault, TRUE);
  mv_test_env_stop_daemon (f->env, SIGTERM);
  mv_test_env_start_daemon (f->env, NULL);
  g_unsetenv ("MICROVMD_FAULT_POINT");
  g_assert_null (create_record (f, network, name, &err));
  mv_test_env_wait_for_name (f->env, MV_BUS_NAME, FALSE, 20000);
  mv_test_env_stop_daemon (f->env, SIGKILL);
  mv_test_env_start_daemon (f->env, NULL);
  assert_no_invalid_records (f);

  entries = g_dir_open (dir, 0, NULL);
  while (entries && (entry = g_dir_read_name (entries)))
    g_assert_false (entry[0] == '.');
  /* The name is free again: nothing half made holds it. */
  path = create_record (f, network, name, NULL);
  g_assert_nonnull (path);
  deleted = client_call (f->client, path, network ? MV_NETWORK_IFACE : MV_VOLUME_IFACE, "Delete",
                         NULL, NULL, NULL);
  g_assert_nonnull (deleted);
}

static void
run_fault_case (Fixture *f, const FaultCase *c, guint n)
{
  g_autofree char *name = g_strdup_printf ("crash-%u", n);
  g_autofree char *layout = g_build_filename (g_getenv ("MICROVMD_BUILD_DIR"), "tests", "guest",
                                              "oci", NULL);
  g_autofree char *image = g_strdup_printf (",\"image\":\"oci:%s:1\",\"disk_bytes\":67108864,"
                                            "\"mounts\":[{\"type\":\"volume\",\"source\":\""
                                            SWEEP_VOLUME "\",\"target\":\"/data\"}]", layout);
  g_autofree char *spec = g_strdup_printf (SPEC_WITH ("%s", "%s"), name, c->image ? image : "");
  g_autofree char *path = NULL;

  g_test_message ("fault point %s%s", c->fault, c->image ? " (image)" : "");
  if (c->op == OP_VOLUME || c->op == OP_NETWORK)
    {
      run_record_fault_case (f, c, n);
      return;
    }
  if (c->op != OP_CREATE && c->op != OP_CREATE_START)
    {
      path = client_create_ok (f->client, spec);
      if (c->op != OP_START)
        client_call_ok (f->client, path, "Start");
      if (c->op == OP_RESTORE)
        client_call_ok (f->client, path, "Standby");
    }

  /* The daemon dies at the fault point, as a power cut would stop it. */
  g_setenv ("MICROVMD_FAULT_POINT", c->fault, TRUE);
  mv_test_env_stop_daemon (f->env, SIGTERM);
  mv_test_env_start_daemon (f->env, NULL);
  g_unsetenv ("MICROVMD_FAULT_POINT");

  switch (c->op)
    {
    case OP_CREATE:
    case OP_CREATE_START:
      {
        g_autofree char *err = NULL;
        g_autofree char *p = client_create (f->client, spec,
                                            c->op == OP_CREATE_START ? MV_CREATE_START : 0,
                                            &err, NULL);
        g_assert_null (p);
      }
      break;
    case OP_START:
    case OP_RESTORE:
    case OP_STOP:
    case OP_STANDBY:
    case OP_RESTART:
      {
        const char *method = c->op == OP_STOP ? "Stop" : c->op == OP_STANDBY ? "Standby"
                             : c->op == OP_RESTART ? "Restart" : "Start";
        g_autofree char *err = client_machine_call (f->client, path, method, NULL);
        g_assert_nonnull (err);
      }
      break;
    case OP_DESTROY:
      {
        g_autoptr (sd_bus_message) r = client_call (f->client, path, MV_MACHINE_IFACE, "Delete",
                                                    NULL, NULL, "b", 1);
        g_assert_null (r);
      }
      break;
    case OP_VOLUME:
    case OP_NETWORK:
      g_assert_not_reached ();
    }
  mv_test_env_wait_for_name (f->env, MV_BUS_NAME, FALSE, 20000);
  mv_test_env_stop_daemon (f->env, SIGKILL);

  /* The next daemon finishes or undoes what was under way. */
  mv_test_env_start_daemon (f->env, NULL);
  assert_no_invalid_records (f);
  switch (c->op)
    {
    case OP_CREATE:
    case OP_CREATE_START:
      /* All or nothing; if it is there it is whole and can be started. A
       * start under way is finished or undone, as any start is. */
      if (machine_exists (f->client, name))
        {
          g_autoptr (sd_bus_message) r = client_call (f->client, MV_MANAGER_PATH, MV_MANAGER_IFACE,
                                                      "GetMachine", NULL, NULL, "s", name);
          const char *p = NULL;
          g_assert_cmpint (sd_bus_message_read (r, "o", &p), >, 0);
          path = g_strdup (p);
        }
      if (path && c->op == OP_CREATE_START)
        {
          g_autofree char *state = NULL;
          if (!client_wait (f->client, settled, path, 10000))
            g_error ("%s: the machine did not settle", c->fault);
          state = client_get_string (f->client, path, "State");
          g_assert_true (g_str_equal (state, "Running") || g_str_equal (state, "Failed"));
        }
      /* Past its records, the machine is there. */
      if (c->op == OP_CREATE_START && !g_str_equal (c->fault, "create:staged"))
        g_assert_nonnull (path);
      break;
    case OP_DESTROY:
      for (guint i = 0; i < 100 && machine_exists (f->client, name); i++)
        client_settle (f->client, 100);
      g_assert_false (machine_exists (f->client, name));
      g_clear_pointer (&path, g_free);
      break;
    default:
      {
        g_autofree char *state = NULL;
        if (!client_wait (f->client, settled, path, 10000))
          g_error ("%s: the machine did not settle", c->fault);
        state = client_get_string (f->client, path, "State");
        /* Done, or undone to a state the operation started from. */
        switch (c->op)
          {
          case OP_START:
            g_assert_true (g_str_equal (state, "Running") || g_str_equal (state, "Failed"));
            break;
          case OP_STOP:
            g_assert_cmpstr (state, ==, "Stopped");
            break;
          case OP_STANDBY:
            g_assert_cmpstr (state, ==, "Standby");
            break;
          case OP_RESTORE:
          case OP_RESTART:
            g_assert_cmpstr (state, ==, "Running");
            break;
          default:
            g_assert_not_reached ();
          }
      }
      break;
    }
  assert_no_orphans (f, path);

  /* Whatever is left works: it can be deleted cleanly. */
  if (path)
    {
      g_autoptr (sd_bus_message) r = client_call (f->client, path, MV_MACHINE_IFACE, "Delete",
                                                  NULL, NULL, "b", 1);
      g_assert_nonnull (r);
      assert_no_orphans (f, NULL);
    }
  g_assert_cmpuint (count_machine_dirs (mv_test_env_state_dir (f->env)), ==, 0);
}

static void
test_fault_sweep (Fixture *f, gconstpointer data)
{
  g_autofree char *volume = create_record (f, FALSE, SWEEP_VOLUME, NULL);

  g_assert_nonnull (volume);
  for (guint i = 0; i < G_N_ELEMENTS (fault_cases); i++)
    run_fault_case (f, &fault_cases[i], i);
  /* Deleting a machine keeps its volumes. */
  {
    sd_bus_error error = SD_BUS_ERROR_NULL;
    g_autofree char *name = NULL;

    g_assert_cmpint (sd_bus_get_property_string (f->client->bus, MV_BUS_NAME, volume,
                                                 MV_VOLUME_IFACE, "Name", &error, &name),
                     >=, 0);
    g_assert_cmpstr (name, ==, SWEEP_VOLUME);
  }
  delete_volume (f, volume);
  /* The sweep really killed the daemon each time. */
  g_autofree char *log = mv_test_env_read_daemon_log (f->env);
  for (guint i = 0; i < G_N_ELEMENTS (fault_cases); i++)
    {
      g_autofree char *line = g_strdup_printf ("fault point %s reached", fault_cases[i].fault);
      if (!strstr (log, line))
        g_error ("the daemon never reached %s", fault_cases[i].fault);
    }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
#define ADD(name, fn, config) \
  g_test_add ("/reconcile/" name, Fixture, config, fixture_setup_netns, fn, fixture_teardown)
#define SHORT test_config
  ADD ("standby-and-start", test_standby_and_start, SHORT);
  ADD ("restore-failure-keeps-saved-state", test_restore_failure_keeps_saved_state, SHORT);
  ADD ("idle-goes-on-standby", test_idle_goes_on_standby, SHORT);
  ADD ("busy-stays-awake", test_busy_stays_awake, SHORT);
  ADD ("standby-minimum", test_standby_minimum, NULL);
  ADD ("traffic-wakes-once", test_traffic_wakes_once, SHORT);
  ADD ("on-failure-backs-off-and-gives-up", test_on_failure_backs_off_and_gives_up, SHORT);
  ADD ("clean-end-by-policy", test_clean_end_by_policy, SHORT);
  ADD ("remove-on-exit", test_remove_on_exit, SHORT);
  ADD ("start-on-boot", test_start_on_boot, SHORT);
  ADD ("migration-guard", test_migration_guard, SHORT);
  ADD ("fault-sweep", test_fault_sweep, SHORT);
  return g_test_run ();
}
