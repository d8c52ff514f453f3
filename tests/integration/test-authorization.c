/* Authorization with a real polkitd: root may do everything, uid 65534
 * may read everything and change nothing, a polkit rule can open exactly
 * one action on one machine, no polkit means no access for non-root, and a
 * caller who leaves before it is authorized gets nothing done. */
#include "bus-client.h"
#include "names.h"

#define SPEC(name) "{\"name\":\"" name "\",\"hypervisor_type\":\"test\",\"kernel\":\"/k\"}"

/* Calls METHOD on PATH as uid 65534 with gdbus; returns its exit status
 * and its output (stdout, or the error on stderr). */
static int
call_as_nobody (Fixture *f, const char *path, const char *method, const char *const *args,
                char **output)
{
  g_autoptr (GPtrArray) argv = g_ptr_array_new ();
  g_autofree char *full = g_strdup_printf ("%s", method);
  g_autofree char *out = NULL, *err = NULL;
  int status;

  g_ptr_array_add (argv, "gdbus");
  g_ptr_array_add (argv, "call");
  g_ptr_array_add (argv, "--system");
  g_ptr_array_add (argv, "--dest");
  g_ptr_array_add (argv, MV_BUS_NAME);
  g_ptr_array_add (argv, "--object-path");
  g_ptr_array_add (argv, (gpointer) path);
  g_ptr_array_add (argv, "--method");
  g_ptr_array_add (argv, full);
  for (guint i = 0; args && args[i]; i++)
    g_ptr_array_add (argv, (gpointer) args[i]);
  g_ptr_array_add (argv, NULL);

  status = mv_test_env_run_as_nobody (f->env, (const char *const *) argv->pdata, &out, &err);
  if (output)
    *output = g_strconcat (out ? out : "", err ? err : "", NULL);
  return status;
}

static void
assert_refused (Fixture *f, const char *path, const char *method, const char *const *args)
{
  g_autofree char *output = NULL;
  int status = call_as_nobody (f, path, method, args, &output);

  g_assert_cmpint (status, !=, 0);
  if (!strstr (output, "org.freedesktop.DBus.Error.AccessDenied") &&
      !strstr (output, "org.freedesktop.DBus.Error.InteractiveAuthorizationRequired"))
    g_error ("%s %s: expected a refusal, got: %s", path, method, output);
}

static void
assert_allowed (Fixture *f, const char *path, const char *method, const char *const *args)
{
  g_autofree char *output = NULL;
  int status = call_as_nobody (f, path, method, args, &output);

  if (status != 0)
    g_error ("%s %s as nobody: expected success, got: %s", path, method, output);
}

typedef struct {
  char   *state;
  char   *desired;
  guint64 generation;
  char   *name;
  char   *spec;
} Snapshot;

static Snapshot
snapshot_machine (Fixture *f, const char *path)
{
  return (Snapshot) {
    .state = client_get_string (f->client, path, "State"),
    .desired = client_get_string (f->client, path, "DesiredState"),
    .generation = client_get_u64 (f->client, path, "DesiredGeneration"),
    .name = client_get_string (f->client, path, "Name"),
    .spec = client_get_string (f->client, path, "Spec"),
  };
}

static void
assert_unchanged (Fixture *f, const char *path, Snapshot *before)
{
  Snapshot after = snapshot_machine (f, path);
  g_assert_cmpstr (before->state, ==, after.state);
  g_assert_cmpstr (before->desired, ==, after.desired);
  g_assert_cmpuint (before->generation, ==, after.generation);
  g_assert_cmpstr (before->name, ==, after.name);
  g_assert_cmpstr (before->spec, ==, after.spec);
  g_free (after.state);
  g_free (after.desired);
  g_free (after.name);
  g_free (after.spec);
}

static void
snapshot_clear (Snapshot *s)
{
  g_free (s->state);
  g_free (s->desired);
  g_free (s->name);
  g_free (s->spec);
}

static void
test_nobody_reads_but_changes_nothing (Fixture *f, gconstpointer data)
{
  g_autofree char *stopped = client_create (f->client, SPEC ("stopped-one"), 0, NULL, NULL);
  g_autofree char *running = client_create (f->client, SPEC ("running-one"), MV_CREATE_START, NULL, NULL);
  Snapshot s1 = snapshot_machine (f, stopped), s2 = snapshot_machine (f, running);
  const char *const create_args[] = { SPEC ("intruder"), "0", NULL };
  const char *const false_arg[] = { "false", NULL };
  const char *const true_arg[] = { "true", NULL };
  const char *const rename_arg[] = { "renamed", NULL };
  const char *const state_arg[] = { "running", NULL };
  const char *const update_arg[] = { SPEC ("stopped-one"), NULL };
  const char *const traffic_args[] = { "running-one", "5", NULL };
  const char *const lines_arg[] = { "10", NULL };
  const char *const warm_arg[] = { "{\"name\":\"intruder\",\"hypervisor_type\":\"test\","
                                   "\"kernel\":\"/boot/vmlinuz\",\"kernel_args\":\"intruder-shape\"}",
                                   NULL };
  g_autofree char *warm = g_build_filename (mv_test_env_state_dir (f->env), MV_WARM_DIR, NULL);

  g_assert_cmpstr (s2.state, ==, "Running");

  /* Every gated method is refused. */
  assert_refused (f, MV_MANAGER_PATH, MV_MANAGER_IFACE ".CreateMachine", create_args);
  assert_refused (f, stopped, MV_MACHINE_IFACE ".Start", NULL);
  assert_refused (f, running, MV_MACHINE_IFACE ".Stop", NULL);
  assert_refused (f, running, MV_MACHINE_IFACE ".Pause", NULL);
  assert_refused (f, running, MV_MACHINE_IFACE ".Resume", NULL);
  assert_refused (f, running, MV_MACHINE_IFACE ".Restart", NULL);
  assert_refused (f, running, MV_MACHINE_IFACE ".Standby", NULL);
  assert_refused (f, MV_MANAGER_PATH, MV_MANAGER_IFACE ".RestoreAfterTraffic", traffic_args);
  assert_refused (f, stopped, MV_MACHINE_IFACE ".Delete", false_arg);
  assert_refused (f, running, MV_MACHINE_IFACE ".Delete", true_arg);
  assert_refused (f, stopped, MV_MACHINE_IFACE ".Update", update_arg);
  assert_refused (f, stopped, MV_MACHINE_IFACE ".Rename", rename_arg);
  assert_refused (f, stopped, MV_MACHINE_IFACE ".SetDesiredState", state_arg);
  assert_refused (f, stopped, MV_MACHINE_IFACE ".GetSpec", NULL);
  assert_refused (f, running, MV_MACHINE_IFACE ".GetConsoleLog", lines_arg);
  assert_refused (f, MV_MANAGER_PATH, MV_MANAGER_IFACE ".BuildWarmImage", warm_arg);

  /* ... and nothing changed. */
  assert_unchanged (f, stopped, &s1);
  assert_unchanged (f, running, &s2);
  g_assert_cmpuint (count_machine_dirs (mv_test_env_state_dir (f->env)), ==, 2);
  /* The running machine's first start builds the template of its shape;
   * the refused build made none of its own. */
  {
    g_autoptr (GDir) d = g_dir_open (warm, 0, NULL);
    const char *entry;

    while (d && (entry = g_dir_read_name (d)))
      {
        g_autofree char *record = g_build_filename (warm, entry, "snapshot.json", NULL);
        g_autofree char *text = NULL;

        if (g_file_get_contents (record, &text, NULL, NULL))
          g_assert_null (strstr (text, "intruder-shape"));
      }
  }

  /* Every read works. */
  const char *const name_arg[] = { "stopped-one", NULL };
  const char *const get_state[] = { MV_MACHINE_IFACE, "State", NULL };
  const char *const get_spec[] = { MV_MACHINE_IFACE, "Spec", NULL };
  const char *const get_all[] = { MV_MACHINE_IFACE, NULL };
  const char *const get_invalid[] = { MV_MANAGER_IFACE, "InvalidRecords", NULL };
  assert_allowed (f, MV_MANAGER_PATH, MV_MANAGER_IFACE ".GetMachine", name_arg);
  assert_allowed (f, MV_MANAGER_PATH, MV_MANAGER_IFACE ".ListMachines", NULL);
  assert_allowed (f, MV_MANAGER_PATH, "org.freedesktop.DBus.ObjectManager.GetManagedObjects", NULL);
  assert_allowed (f, MV_MANAGER_PATH, "org.freedesktop.DBus.Properties.Get", get_invalid);
  assert_allowed (f, stopped, "org.freedesktop.DBus.Properties.Get", get_state);
  assert_allowed (f, stopped, "org.freedesktop.DBus.Introspectable.Introspect", NULL);

  g_autofree char *all = NULL, *spec = NULL;
  g_assert_cmpint (call_as_nobody (f, stopped, "org.freedesktop.DBus.Properties.GetAll", get_all, &all), ==, 0);
  g_assert_cmpint (call_as_nobody (f, stopped, "org.freedesktop.DBus.Properties.Get", get_spec, &spec), ==, 0);
  g_assert_nonnull (strstr (all, "stopped-one"));
  g_assert_nonnull (strstr (spec, "stopped-one"));

  /* Root gets the whole spec through GetSpec. */
  g_autoptr (sd_bus_message) reply = client_call (f->client, stopped, MV_MACHINE_IFACE, "GetSpec",
                                                  NULL, NULL, NULL);
  const char *full = NULL;
  g_assert_nonnull (reply);
  g_assert_cmpint (sd_bus_message_read (reply, "s", &full), >=, 0);
  g_assert_nonnull (strstr (full, "stopped-one"));

  snapshot_clear (&s1);
  snapshot_clear (&s2);
}

static void
test_rule_opens_one_action_on_one_machine (Fixture *f, gconstpointer data)
{
  g_autofree char *allowed = client_create (f->client, SPEC ("allowed"), 0, NULL, NULL);
  g_autofree char *other = client_create (f->client, SPEC ("other"), 0, NULL, NULL);
  const char *const false_arg[] = { "false", NULL };

  mv_test_env_add_polkit_rule (f->env, "lifecycle-allowed",
    "polkit.addRule(function(action, subject) {\n"
    "  if (action.id == \"" MV_ACTION_MACHINE_LIFECYCLE "\" &&\n"
    "      subject.user == \"nobody\" && action.lookup(\"machine\") == \"allowed\")\n"
    "    return polkit.Result.YES;\n"
    "});\n");

  assert_allowed (f, allowed, MV_MACHINE_IFACE ".Start", NULL);
  g_autofree char *state = client_get_string (f->client, allowed, "State");
  g_assert_cmpstr (state, ==, "Running");

  /* The same action on another machine, and another action on this one. */
  assert_refused (f, other, MV_MACHINE_IFACE ".Start", NULL);
  g_autofree char *other_state = client_get_string (f->client, other, "State");
  g_assert_cmpstr (other_state, ==, "Stopped");
  assert_allowed (f, allowed, MV_MACHINE_IFACE ".Stop", NULL);
  assert_refused (f, allowed, MV_MACHINE_IFACE ".Delete", false_arg);
  assert_refused (f, allowed, MV_MACHINE_IFACE ".GetSpec", NULL);
  g_assert_cmpuint (count_machine_dirs (mv_test_env_state_dir (f->env)), ==, 2);
}

/* A failed boot's console lines go to those allowed to read the console:
 * a caller allowed only to start gets the reason and where to look;
 * StateError, which everyone reads, carries the reason only. */
static void
test_console_quote_only_for_console_readers (Fixture *f, gconstpointer data)
{
  g_autofree char *path = client_create (f->client,
    "{\"name\":\"broken\",\"hypervisor_type\":\"test\",\"kernel\":\"/k\","
    "\"kernel_args\":\"test.fail-start\"}", 0, NULL, NULL);
  g_autofree char *output = NULL, *why = NULL, *root_msg = NULL, *root_err = NULL;

  mv_test_env_add_polkit_rule (f->env, "lifecycle-only",
    "polkit.addRule(function(action, subject) {\n"
    "  if (action.id == \"" MV_ACTION_MACHINE_LIFECYCLE "\" && subject.user == \"nobody\")\n"
    "    return polkit.Result.YES;\n"
    "});\n");

  g_assert_cmpint (call_as_nobody (f, path, MV_MACHINE_IFACE ".Start", NULL, &output), !=, 0);
  g_assert_nonnull (strstr (output, "The guest did not boot"));
  g_assert_nonnull (strstr (output, "GetConsoleLog"));
  g_assert_null (strstr (output, "Kernel panic"));

  why = client_get_string (f->client, path, "StateError");
  g_assert_cmpstr (why, ==, "The guest did not boot");

  /* Root may read the console, and is told what it said. */
  root_err = client_machine_call (f->client, path, "Start", &root_msg);
  g_assert_nonnull (root_err);
  g_assert_nonnull (strstr (root_msg, "Kernel panic"));
}

static void
test_no_polkit_denies_non_root (Fixture *f, gconstpointer data)
{
  g_autofree char *path = client_create (f->client, SPEC ("lonely"), 0, NULL, NULL);

  mv_test_env_add_polkit_rule (f->env, "lifecycle-all",
    "polkit.addRule(function(action, subject) {\n"
    "  if (action.id == \"" MV_ACTION_MACHINE_LIFECYCLE "\" && subject.user == \"nobody\")\n"
    "    return polkit.Result.YES;\n"
    "});\n");
  mv_test_env_stop_polkit (f->env);

  /* Even a rule that would allow it does not help while polkit is away. */
  assert_refused (f, path, MV_MACHINE_IFACE ".Start", NULL);
  g_autofree char *state = client_get_string (f->client, path, "State");
  g_assert_cmpstr (state, ==, "Stopped");

  /* Root still may. */
  g_autofree char *err = client_machine_call (f->client, path, "Start", NULL);
  g_assert_null (err);

  mv_test_env_start_polkit (f->env);
  assert_allowed (f, path, MV_MACHINE_IFACE ".Stop", NULL);
}

static void
test_caller_leaving_gets_nothing_done (Fixture *f, gconstpointer data)
{
  g_autofree char *path = client_create (f->client, SPEC ("survivor"), 0, NULL, NULL);
  g_autofree char *id = client_get_string (f->client, path, "Id");
  g_autofree char *out = NULL, *err = NULL;
  /* The caller waits half a second for its answer, then gives up and
   * leaves: while polkit is still deciding. */
  const char *argv[] = {
    "timeout", "0.5", "busctl", "--system", "call", MV_BUS_NAME, path, MV_MACHINE_IFACE,
    "Delete", "b", "false", NULL,
  };

  /* The rule takes a second before it says yes. */
  mv_test_env_add_polkit_rule (f->env, "slow-delete",
    "polkit.addRule(function(action, subject) {\n"
    "  if (action.id == \"" MV_ACTION_MACHINE_DELETE "\" && subject.user == \"nobody\") {\n"
    "    polkit.spawn([\"/bin/sleep\", \"1\"]);\n"
    "    return polkit.Result.YES;\n"
    "  }\n"
    "});\n");

  /* timeout(1) exits 124 when it had to end the command. */
  g_assert_cmpint (mv_test_env_run_as_nobody (f->env, argv, &out, &err), ==, 124);
  client_settle (f->client, 2500);

  g_autofree char *state = client_get_string (f->client, path, "State");
  g_assert_cmpstr (state, ==, "Stopped");
  g_autofree char *dir = g_build_filename (mv_test_env_state_dir (f->env), "machines", id, NULL);
  g_assert_true (g_file_test (dir, G_FILE_TEST_IS_DIR));
  g_assert_cmpuint (client_count_signals (f->client, NULL, "MachineRemoved"), ==, 0);

  /* The same call from a caller that waits for its answer does delete:
   * the rule really allows it. */
  const char *const false_arg[] = { "false", NULL };
  assert_allowed (f, path, MV_MACHINE_IFACE ".Delete", false_arg);
  g_assert_false (g_file_test (dir, G_FILE_TEST_EXISTS));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
#define ADD(name, fn) g_test_add ("/authorization/" name, Fixture, NULL, fixture_setup, fn, fixture_teardown)
  ADD ("nobody-reads-but-changes-nothing", test_nobody_reads_but_changes_nothing);
  ADD ("rule-opens-one-action-on-one-machine", test_rule_opens_one_action_on_one_machine);
  ADD ("no-polkit-denies-non-root", test_no_polkit_denies_non_root);
  ADD ("console-quote-only-for-console-readers", test_console_quote_only_for_console_readers);
  ADD ("caller-leaving-gets-nothing-done", test_caller_leaving_gets_nothing_done);
  return g_test_run ();
}
