/* Checks the integration-test environment itself: the private bus, polkitd
 * with the project's actions and test rules, starting and stopping a daemon,
 * running commands as root and as nobody, and a teardown that leaves
 * nothing behind.
 *
 * Started with --bus=ADDRESS as its first argument, this program is instead
 * a stand-in daemon: it owns org.microvmd1 until SIGTERM and logs its
 * arguments and configuration, so the environment is tested without the
 * real daemon. */
#include "test-env.h"

#include "names.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include <glib/gstdio.h>

#define POLKIT_BUS_NAME  "org.freedesktop.PolicyKit1"
#define ACTIONS_POLICY   "/usr/share/polkit-1/actions/org.microvmd1.policy"
#define RULES_DIR        "/etc/polkit-1/rules.d"

G_DEFINE_AUTOPTR_CLEANUP_FUNC (sd_bus, sd_bus_flush_close_unref)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (sd_bus_message, sd_bus_message_unref)
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (sd_bus_error, sd_bus_error_free)

/* ----- the stand-in daemon ----- */

static volatile sig_atomic_t stand_in_quit;

static void
on_sigterm (int signo)
{
  stand_in_quit = 1;
}

static int
stand_in_daemon (int argc, char **argv)
{
  const char *address = argv[1] + strlen ("--bus=");
  g_autoptr(sd_bus) bus = NULL;
  struct sigaction action = { .sa_handler = on_sigterm };
  int r;

  sigaction (SIGTERM, &action, NULL);

  for (int i = 0; i < argc; i++)
    {
      g_autofree char *contents = NULL;

      g_printerr ("stand-in: arg %s\n", argv[i]);
      if (g_str_has_prefix (argv[i], "--config=")
          && g_file_get_contents (argv[i] + strlen ("--config="), &contents, NULL, NULL))
        g_printerr ("stand-in: config %s", contents);
    }

  r = sd_bus_new (&bus);
  if (r >= 0)
    r = sd_bus_set_address (bus, address);
  if (r >= 0)
    r = sd_bus_set_bus_client (bus, 1);
  if (r >= 0)
    r = sd_bus_start (bus);
  if (r >= 0)
    r = sd_bus_request_name (bus, MV_BUS_NAME, 0);
  if (r < 0)
    {
      g_printerr ("stand-in: cannot own %s: %s\n", MV_BUS_NAME, g_strerror (-r));
      return 1;
    }

  /* A SIGTERM that lands just before the wait is seen within 100 ms. */
  while (!stand_in_quit)
    {
      r = sd_bus_process (bus, NULL);
      if (r < 0)
        return 1;
      if (r == 0)
        sd_bus_wait (bus, 100 * 1000);
    }

  g_printerr ("stand-in: stopping\n");
  return 0;
}

/* ----- helpers ----- */

static GStrv
list_names (sd_bus *bus)
{
  g_auto(sd_bus_error) error = SD_BUS_ERROR_NULL;
  g_autoptr(sd_bus_message) reply = NULL;
  char **names = NULL;
  int r;

  r = sd_bus_call_method (bus, "org.freedesktop.DBus", "/org/freedesktop/DBus",
                          "org.freedesktop.DBus", "ListNames", &error, &reply, "");
  g_assert_cmpint (r, >=, 0);
  r = sd_bus_message_read_strv (reply, &names);
  g_assert_cmpint (r, >=, 0);
  return names;
}

static pid_t
owner_pid (sd_bus     *bus,
           const char *name)
{
  g_auto(sd_bus_error) error = SD_BUS_ERROR_NULL;
  g_autoptr(sd_bus_message) reply = NULL;
  uint32_t pid = 0;
  int r;

  r = sd_bus_call_method (bus, "org.freedesktop.DBus", "/org/freedesktop/DBus",
                          "org.freedesktop.DBus", "GetConnectionUnixProcessID",
                          &error, &reply, "s", name);
  g_assert_cmpint (r, >=, 0);
  r = sd_bus_message_read (reply, "u", &pid);
  g_assert_cmpint (r, >=, 0);
  return (pid_t) pid;
}

/* pkcheck on its own process: exec keeps the shell's pid. */
static const char *const pkcheck_create[] = {
  "sh", "-c", "exec pkcheck --action-id " MV_ACTION_MACHINE_CREATE " --process $$", NULL
};

static char *
read_file_or_null (const char *path)
{
  char *contents = NULL;

  if (!g_file_get_contents (path, &contents, NULL, NULL))
    return NULL;
  return contents;
}

static guint
count_test_rules (void)
{
  g_autoptr(GDir) dir = g_dir_open (RULES_DIR, 0, NULL);
  const char *name;
  guint count = 0;

  g_assert_nonnull (dir);
  while ((name = g_dir_read_name (dir)) != NULL)
    if (strstr (name, "-microvmd-test-") != NULL)
      count++;
  return count;
}

static void
use_stand_in_daemon (void)
{
  g_autofree char *self = g_file_read_link ("/proc/self/exe", NULL);

  g_assert_nonnull (self);
  g_setenv ("MICROVMD_TEST_DAEMON", self, TRUE);
}

/* ----- tests ----- */

static void
test_bus_and_polkit (void)
{
  g_autoptr(MvTestEnv) env = mv_test_env_new ();
  g_autoptr(sd_bus) bus = NULL;
  g_auto(GStrv) names = NULL;
  g_autofree char *out = NULL;
  g_autofree char *err = NULL;
  int status;

  g_assert_true (g_file_test (mv_test_env_state_dir (env), G_FILE_TEST_IS_DIR));
  g_assert_true (g_file_test (mv_test_env_runtime_dir (env), G_FILE_TEST_IS_DIR));
  g_assert_true (g_file_test (mv_test_env_config_path (env), G_FILE_TEST_IS_REGULAR));
  g_assert_true (g_str_has_prefix (mv_test_env_state_dir (env), mv_test_env_dir (env)));
  g_assert_cmpstr (g_getenv ("DBUS_SYSTEM_BUS_ADDRESS"), ==, mv_test_env_bus_address (env));
  g_assert_true (g_file_test (ACTIONS_POLICY, G_FILE_TEST_IS_REGULAR));

  bus = mv_test_env_open_bus (env);
  names = list_names (bus);
  g_assert_true (g_strv_contains ((const char *const *) names, POLKIT_BUS_NAME));
  g_assert_true (mv_test_env_polkit_running (env));

  status = mv_test_env_run (env, pkcheck_create, &out, &err);
  g_assert_cmpint (status, ==, 0);
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);

  status = mv_test_env_run_as_nobody (env, pkcheck_create, &out, &err);
  g_assert_cmpint (status, !=, 0);
  g_assert_cmpstr (err, !=, "");
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);

  status = mv_test_env_run (env, (const char *const[]) { "id", "-u", NULL }, &out, NULL);
  g_assert_cmpint (status, ==, 0);
  g_assert_cmpstr (out, ==, "0\n");
  g_clear_pointer (&out, g_free);

  status = mv_test_env_run_as_nobody (env, (const char *const[]) { "id", "-u", NULL }, &out, NULL);
  g_assert_cmpint (status, ==, 0);
  g_assert_cmpstr (out, ==, "65534\n");
  g_clear_pointer (&out, g_free);

  status = mv_test_env_run_as_nobody (env, (const char *const[]) { "id", "-G", NULL }, &out, NULL);
  g_assert_cmpint (status, ==, 0);
  g_assert_cmpstr (out, ==, "65534\n");
  g_clear_pointer (&out, g_free);

  status = mv_test_env_run_as_nobody (env,
    (const char *const[]) { "sh", "-c", "echo \"$HOME $USER ${XDG_RUNTIME_DIR-unset} $(pwd)\"", NULL },
    &out, NULL);
  g_assert_cmpint (status, ==, 0);
  g_assert_cmpstr (out, ==, "/nonexistent nobody unset /\n");
  g_clear_pointer (&out, g_free);

  status = mv_test_env_run (env, (const char *const[]) { "sh", "-c", "exit 7", NULL }, NULL, NULL);
  g_assert_cmpint (status, ==, 7);
  status = mv_test_env_run (env, (const char *const[]) { "sh", "-c", "kill -KILL $$", NULL }, NULL, NULL);
  g_assert_cmpint (status, ==, 128 + SIGKILL);
}

static void
test_polkit_rules (void)
{
  g_autoptr(MvTestEnv) env = mv_test_env_new ();
  int status;

  g_assert_cmpuint (count_test_rules (), ==, 0);

  mv_test_env_add_polkit_rule (env, "nobody-creates",
    "polkit.addRule(function(action, subject) {\n"
    "  if (action.id == \"" MV_ACTION_MACHINE_CREATE "\" && subject.user == \"nobody\")\n"
    "    return polkit.Result.YES;\n"
    "});\n");
  g_assert_cmpuint (count_test_rules (), ==, 1);
  status = mv_test_env_run_as_nobody (env, pkcheck_create, NULL, NULL);
  g_assert_cmpint (status, ==, 0);

  /* Replacing the text of a rule keeps one file. */
  mv_test_env_add_polkit_rule (env, "nobody-creates",
    "polkit.addRule(function(action, subject) {\n"
    "  if (action.id == \"" MV_ACTION_MACHINE_CREATE "\" && subject.user == \"nobody\")\n"
    "    return polkit.Result.NO;\n"
    "});\n");
  g_assert_cmpuint (count_test_rules (), ==, 1);
  status = mv_test_env_run_as_nobody (env, pkcheck_create, NULL, NULL);
  g_assert_cmpint (status, !=, 0);

  /* Without polkitd nothing answers: the bus does not activate it. */
  mv_test_env_stop_polkit (env);
  g_assert_false (mv_test_env_polkit_running (env));
  {
    g_autoptr(sd_bus) bus = mv_test_env_open_bus (env);
    g_auto(GStrv) names = list_names (bus);
    g_assert_false (g_strv_contains ((const char *const *) names, POLKIT_BUS_NAME));
  }
  status = mv_test_env_run (env, pkcheck_create, NULL, NULL);
  g_assert_cmpint (status, !=, 0);
  g_assert_false (mv_test_env_polkit_running (env));

  /* A rule changed while polkitd is stopped is read when it starts. */
  mv_test_env_add_polkit_rule (env, "nobody-creates",
    "polkit.addRule(function(action, subject) {\n"
    "  if (action.id == \"" MV_ACTION_MACHINE_CREATE "\" && subject.user == \"nobody\")\n"
    "    return polkit.Result.YES;\n"
    "});\n");
  g_assert_false (mv_test_env_polkit_running (env));
  mv_test_env_start_polkit (env);
  status = mv_test_env_run_as_nobody (env, pkcheck_create, NULL, NULL);
  g_assert_cmpint (status, ==, 0);
  status = mv_test_env_run (env, pkcheck_create, NULL, NULL);
  g_assert_cmpint (status, ==, 0);

  mv_test_env_add_polkit_rule (env, "second", "/* consulted after nobody-creates */\n");
  g_assert_cmpuint (count_test_rules (), ==, 2);
}

static void
test_daemon (void)
{
  g_autoptr(MvTestEnv) env = mv_test_env_new ();
  g_autoptr(sd_bus) bus = NULL;
  g_autofree char *log = NULL;
  const char *const extra[] = { "--stand-in-extra", NULL };
  GPid pid;

  use_stand_in_daemon ();
  bus = mv_test_env_open_bus (env);

  mv_test_env_write_config (env, "[Daemon]\nStandInKey=42\n");
  mv_test_env_start_daemon (env, extra);
  pid = mv_test_env_daemon_pid (env);
  g_assert_cmpint (pid, >, 0);
  g_assert_cmpint (owner_pid (bus, MV_BUS_NAME), ==, pid);
  mv_test_env_stop_daemon (env, SIGTERM);
  g_assert_cmpint (mv_test_env_daemon_pid (env), ==, 0);
  g_assert_cmpint (kill (pid, 0), ==, -1);

  log = mv_test_env_read_daemon_log (env);
  g_assert_nonnull (strstr (log, "stand-in: config [Daemon]\nStandInKey=42\n"));
  g_assert_nonnull (strstr (log, "stand-in: arg --stand-in-extra\n"));
  {
    g_autofree char *bus_arg = g_strdup_printf ("stand-in: arg --bus=%s\n",
                                                mv_test_env_bus_address (env));
    g_autofree char *state_arg = g_strdup_printf ("stand-in: arg --state-dir=%s\n",
                                                  mv_test_env_state_dir (env));
    g_autofree char *runtime_arg = g_strdup_printf ("stand-in: arg --runtime-dir=%s\n",
                                                    mv_test_env_runtime_dir (env));
    g_assert_nonnull (strstr (log, bus_arg));
    g_assert_nonnull (strstr (log, state_arg));
    g_assert_nonnull (strstr (log, runtime_arg));
  }
  g_assert_nonnull (strstr (log, "stand-in: stopping\n"));

  /* Right after a stop, the name is free for the next start. */
  mv_test_env_start_daemon (env, NULL);
  g_assert_cmpint (mv_test_env_daemon_pid (env), !=, pid);
  mv_test_env_stop_daemon (env, SIGKILL);
  mv_test_env_start_daemon (env, NULL);
  /* Left running: free stops it. */
  g_unsetenv ("MICROVMD_TEST_DAEMON");
}

static void
test_teardown (void)
{
  g_autofree char *policy_before = read_file_or_null (ACTIONS_POLICY);
  g_autofree char *policy_after = NULL;
  g_autofree char *dir = NULL;
  g_autofree char *address_before = g_strdup (g_getenv ("DBUS_SYSTEM_BUS_ADDRESS"));
  MvTestEnv *env = mv_test_env_new ();
  pid_t bus_pid, polkit_pid, daemon_pid;

  use_stand_in_daemon ();
  mv_test_env_add_polkit_rule (env, "anything", "/* nothing */\n");
  mv_test_env_start_daemon (env, NULL);
  {
    g_autoptr(sd_bus) bus = mv_test_env_open_bus (env);
    bus_pid = owner_pid (bus, "org.freedesktop.DBus");
    polkit_pid = owner_pid (bus, POLKIT_BUS_NAME);
    daemon_pid = owner_pid (bus, MV_BUS_NAME);
  }
  dir = g_strdup (mv_test_env_dir (env));
  g_assert_cmpuint (count_test_rules (), ==, 1);

  mv_test_env_free (env);

  /* Reaped children are gone for good (until their pids are reused). */
  g_assert_cmpint (kill (bus_pid, 0), ==, -1);
  g_assert_cmpint (errno, ==, ESRCH);
  g_assert_cmpint (kill (polkit_pid, 0), ==, -1);
  g_assert_cmpint (errno, ==, ESRCH);
  g_assert_cmpint (kill (daemon_pid, 0), ==, -1);
  g_assert_cmpint (errno, ==, ESRCH);

  g_assert_false (g_file_test (dir, G_FILE_TEST_EXISTS));
  g_assert_cmpuint (count_test_rules (), ==, 0);
  g_assert_cmpstr (g_getenv ("DBUS_SYSTEM_BUS_ADDRESS"), ==, address_before);

  policy_after = read_file_or_null (ACTIONS_POLICY);
  g_assert_cmpstr (policy_after, ==, policy_before);

  /* A new environment after the old one starts cleanly. */
  env = mv_test_env_new ();
  mv_test_env_free (env);
  g_unsetenv ("MICROVMD_TEST_DAEMON");
}

int
main (int argc, char **argv)
{
  if (argc > 1 && g_str_has_prefix (argv[1], "--bus="))
    return stand_in_daemon (argc, argv);

  g_test_init (&argc, &argv, NULL);

  g_test_add_func ("/test-env/bus-and-polkit", test_bus_and_polkit);
  g_test_add_func ("/test-env/polkit-rules", test_polkit_rules);
  g_test_add_func ("/test-env/daemon", test_daemon);
  g_test_add_func ("/test-env/teardown", test_teardown);

  return g_test_run ();
}
