/* A private system bus, polkitd and the daemon under test, for integration
 * tests. See test-env.h. */
#include "test-env.h"

#include "names.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gio/gio.h>
#include <glib-unix.h>
#include <glib/gstdio.h>

#define DBUS_SERVICE            "org.freedesktop.DBus"
#define DBUS_PATH               "/org/freedesktop/DBus"
#define DBUS_INTERFACE          "org.freedesktop.DBus"
#define POLKIT_BUS_NAME         "org.freedesktop.PolicyKit1"

#define SYSTEM_BUS_CONFIG       "/usr/share/dbus-1/system.conf"
#define POLKITD                 "/usr/lib/polkit-1/polkitd"
#define POLKIT_ACTIONS_DIR      "/usr/share/polkit-1/actions"
#define POLKIT_RULES_DIR        "/etc/polkit-1/rules.d"
#define POLICY_FILE             "org.microvmd1.policy"
#define BUS_POLICY_FILE         "org.microvmd1.conf"
#define LOCK_FILE               "/run/lock/microvmd-test-env.lock"

#define RULE_MARK               "-microvmd-test-"
#define FIRST_RULE_NUMBER       10
#define NOBODY_ID               "65534"

#define WAIT_MS                 20000
#define LOCK_WAIT_MS            (10 * 60 * 1000)
#define POLL_INTERVAL_US        (20 * G_TIME_SPAN_MILLISECOND)

G_DEFINE_AUTOPTR_CLEANUP_FUNC (sd_bus_message, sd_bus_message_unref)
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (sd_bus_error, sd_bus_error_free)

struct _MvTestEnv
{
  char      *dir;
  char      *state_dir;
  char      *runtime_dir;
  gboolean   runtime_tmpfs;    /* a tmpfs is mounted on it */
  char      *images_dir;
  char      *config_path;
  char      *daemon_log_path;
  gboolean   daemon_log_printed;
  char      *bus_address;
  gboolean   keep_dir;

  /* DBUS_SYSTEM_BUS_ADDRESS as it was before the environment set it. */
  char      *saved_address_env;

  /* The environment's own connection, for watching names. */
  sd_bus    *bus;

  GPid       bus_pid;
  GPid       polkit_pid;
  GPid       daemon_pid;
  char      *daemon_netns;         /* the daemon runs in this namespace; NULL: ours */
  char      *private_netns;        /* made by the environment, deleted at free */

  int        lock_fd;

  gboolean   policy_installed;
  char      *policy_original;      /* NULL if there was none */
  gsize      policy_original_len;

  /* Rule names in the order they were added; index i is number 10 + i. */
  GPtrArray *rule_names;

  /* Bus policy files included after the project's (mv_test_env_new_full). */
  char     **extra_bus_policies;
};

typedef enum
{
  WAIT_DONE,
  WAIT_TIMEOUT,
  WAIT_EXITED,
} WaitResult;

/* Environment variables, a process-wide bus address and polkit's global
 * directories make more than one environment per process meaningless. */
static MvTestEnv *live_env;

static void env_teardown (MvTestEnv *env);
static void end_leftovers (MvTestEnv *env);

static void G_GNUC_NORETURN G_GNUC_PRINTF (2, 3)
env_fail (MvTestEnv  *env,
          const char *format,
          ...)
{
  va_list args;
  g_autofree char *message = NULL;

  va_start (args, format);
  message = g_strdup_vprintf (format, args);
  va_end (args);

  /* Tear down first: g_error() aborts, and neither atexit handlers nor the
   * test's own cleanup run after that. */
  if (env != NULL)
    env_teardown (env);
  g_error ("test environment: %s", message);
}

static const char *
require_env (const char *name)
{
  const char *value = g_getenv (name);

  if (value == NULL || *value == '\0')
    env_fail (live_env, "%s is not set; run the test through 'meson test'", name);
  return value;
}

static char *
describe_wait_status (int wait_status)
{
  if (WIFEXITED (wait_status))
    return g_strdup_printf ("exit status %d", WEXITSTATUS (wait_status));
  if (WIFSIGNALED (wait_status))
    return g_strdup_printf ("signal %d (%s)", WTERMSIG (wait_status),
                            g_strsignal (WTERMSIG (wait_status)));
  return g_strdup_printf ("wait status 0x%x", (unsigned) wait_status);
}

static void
print_log (const char *path)
{
  g_autofree char *contents = NULL;

  if (!g_file_get_contents (path, &contents, NULL, NULL))
    return;
  g_printerr ("----- %s -----\n%s%s----- end of %s -----\n", path, contents,
              g_str_has_suffix (contents, "\n") || *contents == '\0' ? "" : "\n",
              path);
}

static void
print_daemon_log (MvTestEnv *env)
{
  print_log (env->daemon_log_path);
  env->daemon_log_printed = TRUE;
}

/* Children die with the test process even when it aborts. The check after
 * prctl() catches a parent that died before the signal was armed. */
static void
die_with_parent (gpointer user_data)
{
  pid_t parent = GPOINTER_TO_INT (user_data);

  if (prctl (PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid () != parent)
    _exit (127);
}

static int
open_log (MvTestEnv  *env,
          const char *path)
{
  int fd = open (path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);

  if (fd < 0)
    env_fail (env, "cannot open %s: %s", path, g_strerror (errno));
  return fd;
}

static GPid
spawn_child (MvTestEnv         *env,
             const char *const *argv,
             int                log_fd,
             const int         *source_fds,
             const int         *target_fds,
             gsize              n_fds)
{
  g_autoptr(GError) error = NULL;
  GPid pid = 0;

  if (!g_spawn_async_with_pipes_and_fds (NULL, argv, NULL,
                                         G_SPAWN_DO_NOT_REAP_CHILD | G_SPAWN_SEARCH_PATH,
                                         die_with_parent, GINT_TO_POINTER (getpid ()),
                                         -1, log_fd, log_fd,
                                         source_fds, target_fds, n_fds,
                                         &pid, NULL, NULL, NULL, &error))
    env_fail (env, "cannot start %s: %s", argv[0], error->message);
  return pid;
}

/* Reaps @pid if it has exited. A child someone else already reaped counts
 * as exited with status 0. */
static gboolean
child_exited (GPid  pid,
              int  *wait_status)
{
  int status = 0;
  pid_t r;

  do
    r = waitpid (pid, &status, WNOHANG);
  while (r < 0 && errno == EINTR);

  if (r == 0)
    return FALSE;
  if (wait_status != NULL)
    *wait_status = r == pid ? status : 0;
  return TRUE;
}

static gboolean
wait_for_exit (GPid  pid,
               guint timeout_ms,
               int  *wait_status)
{
  gint64 deadline = g_get_monotonic_time () + timeout_ms * G_TIME_SPAN_MILLISECOND;

  while (!child_exited (pid, wait_status))
    {
      if (g_get_monotonic_time () >= deadline)
        return FALSE;
      g_usleep (10 * G_TIME_SPAN_MILLISECOND);
    }
  return TRUE;
}

/* Sends @signo, waits, and falls back to SIGKILL. Returns whether the child
 * exited within @timeout_ms of @signo. Clears *@pid in every case. */
static gboolean
stop_child (GPid  *pid,
            int    signo,
            guint  timeout_ms,
            int   *wait_status)
{
  gboolean in_time;

  if (*pid == 0)
    return TRUE;

  kill (*pid, signo);
  in_time = wait_for_exit (*pid, timeout_ms, wait_status);
  if (!in_time)
    {
      kill (*pid, SIGKILL);
      while (waitpid (*pid, NULL, 0) < 0 && errno == EINTR)
        ;
    }
  *pid = 0;
  return in_time;
}

static gboolean
name_has_owner (MvTestEnv  *env,
                const char *name)
{
  g_auto(sd_bus_error) error = SD_BUS_ERROR_NULL;
  g_autoptr(sd_bus_message) reply = NULL;
  int has_owner = 0;
  int r;

  r = sd_bus_call_method (env->bus, DBUS_SERVICE, DBUS_PATH, DBUS_INTERFACE,
                          "NameHasOwner", &error, &reply, "s", name);
  if (r >= 0)
    r = sd_bus_message_read (reply, "b", &has_owner);
  if (r < 0)
    {
      g_autofree char *reason = g_strdup (error.message ? error.message : g_strerror (-r));
      env_fail (env, "NameHasOwner(%s) on the test bus failed: %s", name, reason);
    }
  return has_owner != 0;
}

/* Polls until @name is or is not owned. With @watch, also stops early if
 * that child exits; it is then reaped and *@watch cleared. */
static WaitResult
wait_for_name_state (MvTestEnv  *env,
                     const char *name,
                     gboolean    owned,
                     guint       timeout_ms,
                     GPid       *watch,
                     int        *wait_status)
{
  gint64 deadline = g_get_monotonic_time () + timeout_ms * G_TIME_SPAN_MILLISECOND;

  for (;;)
    {
      if (name_has_owner (env, name) == owned)
        return WAIT_DONE;
      if (watch != NULL && *watch != 0 && child_exited (*watch, wait_status))
        {
          *watch = 0;
          return WAIT_EXITED;
        }
      if (g_get_monotonic_time () >= deadline)
        return WAIT_TIMEOUT;
      g_usleep (POLL_INTERVAL_US);
    }
}

static char *
log_path (MvTestEnv  *env,
          const char *name)
{
  return g_build_filename (env->dir, name, NULL);
}

static void
write_file (MvTestEnv  *env,
            const char *path,
            const char *contents,
            gssize      length)
{
  g_autoptr(GError) error = NULL;

  if (!g_file_set_contents_full (path, contents, length,
                                 G_FILE_SET_CONTENTS_CONSISTENT, 0644, &error))
    env_fail (env, "cannot write %s: %s", path, error->message);
}

static void
remove_tree (const char *path)
{
  GStatBuf st;

  if (g_lstat (path, &st) < 0)
    return;

  if (S_ISDIR (st.st_mode))
    {
      g_autoptr(GDir) dir = g_dir_open (path, 0, NULL);
      const char *name;

      while (dir != NULL && (name = g_dir_read_name (dir)) != NULL)
        {
          g_autofree char *child = g_build_filename (path, name, NULL);
          remove_tree (child);
        }
      if (g_rmdir (path) < 0)
        g_printerr ("test environment: cannot remove %s: %s\n", path, g_strerror (errno));
    }
  else if (g_unlink (path) < 0)
    {
      g_printerr ("test environment: cannot remove %s: %s\n", path, g_strerror (errno));
    }
}

/* ----- the lock ----- */

/* polkitd's directories are shared by every process on the machine:
 * environments in different processes take turns. */
static void
take_lock (MvTestEnv *env)
{
  gint64 deadline = g_get_monotonic_time () + LOCK_WAIT_MS * G_TIME_SPAN_MILLISECOND;
  gboolean told = FALSE;

  env->lock_fd = open (LOCK_FILE, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (env->lock_fd < 0)
    env_fail (env, "cannot open %s: %s", LOCK_FILE, g_strerror (errno));

  while (flock (env->lock_fd, LOCK_EX | LOCK_NB) < 0)
    {
      if (errno != EWOULDBLOCK && errno != EINTR)
        env_fail (env, "cannot lock %s: %s", LOCK_FILE, g_strerror (errno));
      if (!told)
        {
          g_printerr ("test environment: waiting for another test environment "
                      "to release %s\n", LOCK_FILE);
          told = TRUE;
        }
      if (g_get_monotonic_time () >= deadline)
        env_fail (env, "another test environment held %s for %d minutes",
                  LOCK_FILE, LOCK_WAIT_MS / 60000);
      g_usleep (100 * G_TIME_SPAN_MILLISECOND);
    }
}

static void
release_lock (MvTestEnv *env)
{
  if (env->lock_fd >= 0)
    {
      close (env->lock_fd);
      env->lock_fd = -1;
    }
}

/* ----- polkit files ----- */

static char *
rule_path (guint       index,
           const char *name)
{
  g_autofree char *base = g_strdup_printf ("%02u" RULE_MARK "%s.rules",
                                           FIRST_RULE_NUMBER + index, name);
  return g_build_filename (POLKIT_RULES_DIR, base, NULL);
}

static gboolean
is_test_rule (const char *base)
{
  return strlen (base) > 2 && g_ascii_isdigit (base[0]) && g_ascii_isdigit (base[1])
         && g_str_has_prefix (base + 2, RULE_MARK) && g_str_has_suffix (base, ".rules");
}

/* An environment that aborted left its rules behind; they would change
 * every later answer. */
static void
remove_stale_rules (void)
{
  g_autoptr(GDir) dir = g_dir_open (POLKIT_RULES_DIR, 0, NULL);
  const char *base;

  while (dir != NULL && (base = g_dir_read_name (dir)) != NULL)
    {
      g_autofree char *path = NULL;

      if (!is_test_rule (base))
        continue;
      path = g_build_filename (POLKIT_RULES_DIR, base, NULL);
      g_unlink (path);
    }
}

static void
remove_rules (MvTestEnv *env)
{
  for (guint i = 0; i < env->rule_names->len; i++)
    {
      g_autofree char *path = rule_path (i, env->rule_names->pdata[i]);
      g_unlink (path);
    }
  g_ptr_array_set_size (env->rule_names, 0);
}

static void
install_policy (MvTestEnv *env)
{
  const char *build_dir = require_env ("MICROVMD_BUILD_DIR");
  g_autofree char *built = g_build_filename (build_dir, "policy", POLICY_FILE, NULL);
  g_autofree char *installed = g_build_filename (POLKIT_ACTIONS_DIR, POLICY_FILE, NULL);
  g_autofree char *contents = NULL;
  g_autoptr(GError) error = NULL;
  gsize length = 0;

  if (!g_file_get_contents (built, &contents, &length, &error))
    env_fail (env, "the project's polkit policy is not built (%s); "
              "build the project before running integration tests", error->message);

  g_clear_error (&error);
  if (!g_file_get_contents (installed, &env->policy_original,
                            &env->policy_original_len, &error)
      && !g_error_matches (error, G_FILE_ERROR, G_FILE_ERROR_NOENT))
    env_fail (env, "cannot read %s: %s", installed, error->message);

  write_file (env, installed, contents, length);
  env->policy_installed = TRUE;
}

static void
restore_policy (MvTestEnv *env)
{
  g_autofree char *installed = NULL;

  if (!env->policy_installed)
    return;

  installed = g_build_filename (POLKIT_ACTIONS_DIR, POLICY_FILE, NULL);
  if (env->policy_original != NULL)
    g_file_set_contents_full (installed, env->policy_original, env->policy_original_len,
                              G_FILE_SET_CONTENTS_CONSISTENT, 0644, NULL);
  else
    g_unlink (installed);
  env->policy_installed = FALSE;
}

/* ----- the bus ----- */

/* Relative includes are relative to the file that names them; the copy
 * lives elsewhere, so they are made absolute. */
static gboolean
make_include_absolute (const GMatchInfo *match,
                       GString          *result,
                       gpointer          user_data)
{
  g_autofree char *open_tag = g_match_info_fetch (match, 1);
  g_autofree char *path = g_match_info_fetch (match, 2);
  g_autofree char *close_tag = g_match_info_fetch (match, 3);
  g_autofree char *base = g_path_get_dirname (SYSTEM_BUS_CONFIG);
  g_autofree char *absolute = g_build_filename (base, path, NULL);
  g_autofree char *escaped = g_markup_escape_text (absolute, -1);

  g_string_append_printf (result, "%s%s%s", open_tag, escaped, close_tag);
  return FALSE;
}

static char *
replace (MvTestEnv  *env,
         const char *text,
         const char *pattern,
         const char *replacement)
{
  g_autoptr(GRegex) regex = g_regex_new (pattern, G_REGEX_DEFAULT, G_REGEX_MATCH_DEFAULT, NULL);
  g_autoptr(GError) error = NULL;
  char *result;

  g_assert (regex != NULL);
  result = g_regex_replace_literal (regex, text, -1, 0, replacement, 0, &error);
  if (result == NULL)
    env_fail (env, "cannot rewrite the bus configuration: %s", error->message);
  return result;
}

/* The stock system bus configuration with these changes: it listens on a
 * socket of ours; it does not fork, write a pid file, switch to the
 * messagebus user (a credential change clears the parent-death signal, and
 * the bus must die with the test) or activate services (an activated
 * polkitd would defeat tests that stop it); relative includes are absolute;
 * and the project's bus policy is included last. */
static char *
build_bus_config (MvTestEnv  *env,
                  const char *socket_path,
                  const char *project_policy)
{
  g_autoptr(GString) includes_text = g_string_new (NULL);
  g_autofree char *stock = NULL;
  g_autofree char *text = NULL;
  g_autofree char *address = g_dbus_address_escape_value (socket_path);
  g_autofree char *address_escaped = g_markup_escape_text (address, -1);
  g_autofree char *policy_escaped = g_markup_escape_text (project_policy, -1);
  g_autofree char *listen = NULL;
  g_autofree char *include = NULL;
  g_autoptr(GRegex) includes = NULL;
  g_autoptr(GError) error = NULL;
  static const char *const removed[] = {
    "<user>[^<]*</user>",
    "<fork\\s*/>",
    "<pidfile>[^<]*</pidfile>",
    "<standard_system_servicedirs\\s*/>",
    "<servicedir>[^<]*</servicedir>",
    "<servicehelper>[^<]*</servicehelper>",
  };

  if (!g_file_get_contents (SYSTEM_BUS_CONFIG, &stock, NULL, &error))
    env_fail (env, "cannot read %s: %s", SYSTEM_BUS_CONFIG, error->message);
  if (!g_regex_match_simple ("<listen>[^<]*</listen>", stock, 0, 0))
    env_fail (env, "%s has no <listen> element", SYSTEM_BUS_CONFIG);

  listen = g_strdup_printf ("<listen>unix:path=%s</listen>", address_escaped);
  text = replace (env, stock, "<listen>[^<]*</listen>", listen);

  for (gsize i = 0; i < G_N_ELEMENTS (removed); i++)
    {
      char *next = replace (env, text, removed[i], "");
      g_free (text);
      text = next;
    }

  /* Only includes without conditions: the SELinux one is relative to the
   * SELinux root by design. */
  includes = g_regex_new ("(<include(?:dir)?(?:\\s+ignore_missing=\"[^\"]*\")?\\s*>)"
                          "\\s*([^/<\\s][^<]*?)\\s*"
                          "(</include(?:dir)?>)",
                          G_REGEX_DEFAULT, G_REGEX_MATCH_DEFAULT, NULL);
  g_assert (includes != NULL);
  {
    char *next = g_regex_replace_eval (includes, text, -1, 0, 0,
                                       make_include_absolute, NULL, &error);
    if (next == NULL)
      env_fail (env, "cannot rewrite the bus configuration: %s", error->message);
    g_free (text);
    text = next;
  }

  for (gsize i = 0; env->extra_bus_policies != NULL && env->extra_bus_policies[i] != NULL; i++)
    {
      g_autofree char *extra_escaped = g_markup_escape_text (env->extra_bus_policies[i], -1);
      g_string_append_printf (includes_text, "  <include>%s</include>\n", extra_escaped);
    }
  include = g_strdup_printf ("  <!-- The project's bus policy. -->\n"
                             "  <include>%s</include>\n"
                             "%s"
                             "</busconfig>",
                             policy_escaped, includes_text->str);
  {
    char *next = replace (env, text, "</busconfig>", include);
    g_free (text);
    text = next;
  }

  return g_steal_pointer (&text);
}

static char *
read_address (int fd)
{
  g_autoptr(GString) line = g_string_new (NULL);
  gint64 deadline = g_get_monotonic_time () + WAIT_MS * G_TIME_SPAN_MILLISECOND;

  while (strchr (line->str, '\n') == NULL)
    {
      struct pollfd pfd = { .fd = fd, .events = POLLIN };
      gint64 remaining = (deadline - g_get_monotonic_time ()) / G_TIME_SPAN_MILLISECOND;
      char buf[256];
      ssize_t n;
      int r;

      if (remaining <= 0)
        return NULL;
      r = poll (&pfd, 1, (int) remaining);
      if (r < 0 && errno == EINTR)
        continue;
      if (r <= 0)
        return NULL;
      n = read (fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        return NULL;
      g_string_append_len (line, buf, n);
    }

  *strchr (line->str, '\n') = '\0';
  return g_strdup (line->str);
}

static sd_bus *
open_bus (MvTestEnv *env)
{
  sd_bus *bus = NULL;
  int r;

  r = sd_bus_new (&bus);
  if (r >= 0)
    r = sd_bus_set_address (bus, env->bus_address);
  if (r >= 0)
    r = sd_bus_set_bus_client (bus, 1);
  if (r >= 0)
    r = sd_bus_start (bus);
  if (r < 0)
    {
      sd_bus_unref (bus);
      env_fail (env, "cannot connect to the test bus %s: %s", env->bus_address, g_strerror (-r));
    }
  return bus;
}

static void
start_bus (MvTestEnv *env)
{
  const char *source_dir = require_env ("MICROVMD_SOURCE_DIR");
  g_autofree char *project_policy = g_build_filename (source_dir, "policy", BUS_POLICY_FILE, NULL);
  g_autofree char *config_path = g_build_filename (env->dir, "system.conf", NULL);
  g_autofree char *socket_path = g_build_filename (env->dir, "system_bus_socket", NULL);
  g_autofree char *config_arg = NULL;
  g_autofree char *config = NULL;
  g_autofree char *dbus_log = log_path (env, "dbus-daemon.log");
  g_autoptr(GError) error = NULL;
  int pipe_fds[2];
  int log_fd;
  int target_fd = 3;

  if (!g_file_test (project_policy, G_FILE_TEST_IS_REGULAR))
    env_fail (env, "the project's bus policy %s does not exist", project_policy);

  config = build_bus_config (env, socket_path, project_policy);
  write_file (env, config_path, config, -1);
  config_arg = g_strconcat ("--config-file=", config_path, NULL);

  if (!g_unix_open_pipe (pipe_fds, FD_CLOEXEC, &error))
    env_fail (env, "cannot create a pipe: %s", error->message);

  {
    const char *argv[] = { "dbus-daemon", config_arg, "--nofork", "--nosyslog",
                           "--print-address=3", NULL };

    log_fd = open_log (env, dbus_log);
    env->bus_pid = spawn_child (env, argv, log_fd, &pipe_fds[1], &target_fd, 1);
    close (log_fd);
    close (pipe_fds[1]);
  }

  env->bus_address = read_address (pipe_fds[0]);
  close (pipe_fds[0]);
  if (env->bus_address == NULL)
    {
      print_log (dbus_log);
      env_fail (env, "dbus-daemon did not print its address within %d s", WAIT_MS / 1000);
    }

  env->saved_address_env = g_strdup (g_getenv ("DBUS_SYSTEM_BUS_ADDRESS"));
  g_setenv ("DBUS_SYSTEM_BUS_ADDRESS", env->bus_address, TRUE);

  env->bus = open_bus (env);
}

/* ----- polkitd ----- */

gboolean
mv_test_env_polkit_running (MvTestEnv *env)
{
  return env->polkit_pid != 0;
}

void
mv_test_env_start_polkit (MvTestEnv *env)
{
  g_autofree char *polkit_log = log_path (env, "polkitd.log");
  const char *argv[] = { POLKITD, "--no-debug", NULL };
  int wait_status = 0;
  int log_fd;

  g_assert_cmpint (env->polkit_pid, ==, 0);
  if (name_has_owner (env, POLKIT_BUS_NAME))
    env_fail (env, "%s already has an owner on the test bus", POLKIT_BUS_NAME);

  log_fd = open_log (env, polkit_log);
  env->polkit_pid = spawn_child (env, argv, log_fd, NULL, NULL, 0);
  close (log_fd);

  switch (wait_for_name_state (env, POLKIT_BUS_NAME, TRUE, WAIT_MS,
                               &env->polkit_pid, &wait_status))
    {
    case WAIT_DONE:
      return;
    case WAIT_EXITED:
      {
        g_autofree char *status = describe_wait_status (wait_status);
        print_log (polkit_log);
        env_fail (env, "polkitd exited (%s) before it owned %s", status, POLKIT_BUS_NAME);
      }
    case WAIT_TIMEOUT:
    default:
      print_log (polkit_log);
      env_fail (env, "polkitd did not own %s within %d s", POLKIT_BUS_NAME, WAIT_MS / 1000);
    }
}

void
mv_test_env_stop_polkit (MvTestEnv *env)
{
  g_assert_cmpint (env->polkit_pid, !=, 0);

  if (!stop_child (&env->polkit_pid, SIGTERM, WAIT_MS, NULL))
    env_fail (env, "polkitd did not exit within %d s of SIGTERM", WAIT_MS / 1000);
  if (wait_for_name_state (env, POLKIT_BUS_NAME, FALSE, WAIT_MS, NULL, NULL) != WAIT_DONE)
    env_fail (env, "%s still has an owner %d s after polkitd exited",
              POLKIT_BUS_NAME, WAIT_MS / 1000);
}

static gboolean
is_rule_name (const char *name)
{
  if (*name == '\0')
    return FALSE;
  for (const char *p = name; *p != '\0'; p++)
    if (!g_ascii_isalnum (*p) && *p != '-' && *p != '_')
      return FALSE;
  return TRUE;
}

void
mv_test_env_add_polkit_rule (MvTestEnv  *env,
                             const char *name,
                             const char *js)
{
  g_autofree char *path = NULL;
  guint index;

  g_assert_true (is_rule_name (name));

  if (!g_ptr_array_find_with_equal_func (env->rule_names, name, g_str_equal, &index))
    {
      index = env->rule_names->len;
      g_ptr_array_add (env->rule_names, g_strdup (name));
    }
  g_assert_cmpuint (FIRST_RULE_NUMBER + index, <, 100);

  path = rule_path (index, name);
  write_file (env, path, js, -1);

  /* polkitd notices new rules through inotify, but only some time later;
   * a restart makes the rule certain to be in force. */
  if (env->polkit_pid != 0)
    {
      mv_test_env_stop_polkit (env);
      mv_test_env_start_polkit (env);
    }
}

/* ----- the daemon ----- */

void
mv_test_env_write_config (MvTestEnv  *env,
                          const char *keyfile_text)
{
  g_autofree char *guests = NULL;
  g_autofree char *text = NULL;

  if (strstr (keyfile_text, "[paths]"))
    {
      write_file (env, env->config_path, keyfile_text, -1);
      return;
    }
  /* Machines may use the test guest and what tests put in images/. */
  guests = g_build_filename (g_getenv ("MICROVMD_BUILD_DIR") ? g_getenv ("MICROVMD_BUILD_DIR")
                                                             : ".", "tests", "guest", NULL);
  text = g_strdup_printf ("%s\n[paths]\nallowed-directories=%s;%s\n", keyfile_text, guests,
                          env->images_dir);
  write_file (env, env->config_path, text, -1);
}

char *
mv_test_env_read_daemon_log (MvTestEnv *env)
{
  char *contents = NULL;

  if (!g_file_get_contents (env->daemon_log_path, &contents, NULL, NULL))
    return g_strdup ("");
  return contents;
}

static void
append_log_line (MvTestEnv  *env,
                 int         fd,
                 const char *line)
{
  g_autofree char *text = g_strconcat (line, "\n", NULL);
  gsize length = strlen (text);

  if (write (fd, text, length) != (gssize) length)
    env_fail (env, "cannot write to %s: %s", env->daemon_log_path, g_strerror (errno));
}

void
mv_test_env_use_private_netns (MvTestEnv *env)
{
  static guint counter;
  g_autofree char *name = NULL;

  g_assert_null (env->private_netns);
  /* mvtest-PID-...: test-netns.c sweeps those of test processes that are gone. */
  name = g_strdup_printf ("mvtest-%d-env%u", (int) getpid (), counter++);
  {
    const char *add[] = { "ip", "netns", "add", name, NULL };
    const char *up[] = { "ip", "-n", name, "link", "set", "lo", "up", NULL };

    if (mv_test_env_run (env, add, NULL, NULL) != 0 || mv_test_env_run (env, up, NULL, NULL) != 0)
      env_fail (env, "could not make the network namespace %s", name);
  }
  env->private_netns = g_steal_pointer (&name);
  mv_test_env_set_daemon_netns (env, env->private_netns);
}

void
mv_test_env_set_daemon_netns (MvTestEnv  *env,
                              const char *netns)
{
  g_free (env->daemon_netns);
  env->daemon_netns = g_strdup (netns);
}

/* The daemon's command line in @env, NULL-terminated. */
static GPtrArray *
daemon_argv (MvTestEnv *env, const char *const *extra_args)
{
  const char *daemon = g_getenv ("MICROVMD_TEST_DAEMON");
  g_autofree char *default_daemon = NULL;
  GPtrArray *argv = g_ptr_array_new_with_free_func (g_free);

  if (daemon == NULL || *daemon == '\0')
    {
      default_daemon = g_build_filename (require_env ("MICROVMD_BUILD_DIR"),
                                         "tests", "integration", "microvmd-test", NULL);
      daemon = default_daemon;
    }
  if (!g_file_test (daemon, G_FILE_TEST_IS_EXECUTABLE))
    env_fail (env, "the daemon %s is missing or not executable; build the project first", daemon);
  if (name_has_owner (env, MV_BUS_NAME))
    env_fail (env, "%s already has an owner on the test bus", MV_BUS_NAME);

  /* ip netns exec enters the namespace and execs: the daemon keeps the
   * PID the environment watches. */
  if (env->daemon_netns)
    {
      g_ptr_array_add (argv, g_strdup ("ip"));
      g_ptr_array_add (argv, g_strdup ("netns"));
      g_ptr_array_add (argv, g_strdup ("exec"));
      g_ptr_array_add (argv, g_strdup (env->daemon_netns));
    }
  g_ptr_array_add (argv, g_strdup (daemon));
  g_ptr_array_add (argv, g_strconcat ("--bus=", env->bus_address, NULL));
  g_ptr_array_add (argv, g_strconcat ("--state-dir=", env->state_dir, NULL));
  g_ptr_array_add (argv, g_strconcat ("--runtime-dir=", env->runtime_dir, NULL));
  g_ptr_array_add (argv, g_strconcat ("--config=", env->config_path, NULL));
  for (gsize i = 0; extra_args != NULL && extra_args[i] != NULL; i++)
    g_ptr_array_add (argv, g_strdup (extra_args[i]));
  g_ptr_array_add (argv, NULL);
  return argv;
}

/* Runs the daemon as mv_test_env_start_daemon() would, in the foreground,
 * until it ends (a configuration it refuses): its exit status, and what
 * it wrote to stderr in @err. */
static int
run_daemon (MvTestEnv *env, char **err)
{
  g_autoptr (GPtrArray) argv = daemon_argv (env, NULL);

  g_assert_cmpint (env->daemon_pid, ==, 0);
  return mv_test_env_run (env, (const char *const *) argv->pdata, NULL, err);
}

void
mv_test_env_assert_config_refused (const char *config, const char *message)
{
  g_autoptr (MvTestEnv) env = mv_test_env_new ();
  g_autofree char *err = NULL;

  mv_test_env_write_config (env, config);
  g_assert_cmpint (run_daemon (env, &err), !=, 0);
  if (!strstr (err, message))
    g_test_fail_printf ("the daemon refused %s with: %s", config, err);
}

void
mv_test_env_start_daemon (MvTestEnv         *env,
                          const char *const *extra_args)
{
  g_autoptr(GPtrArray) argv = NULL;
  g_autofree char *command_line = NULL;
  g_autofree char *header = NULL;
  int wait_status = 0;
  int log_fd;

  g_assert_cmpint (env->daemon_pid, ==, 0);
  argv = daemon_argv (env, extra_args);

  /* A marker line tells one run from the next in the appended log. */
  log_fd = open_log (env, env->daemon_log_path);
  command_line = g_strjoinv (" ", (char **) argv->pdata);
  header = g_strdup_printf ("### test environment: starting %s", command_line);
  append_log_line (env, log_fd, header);
  env->daemon_pid = spawn_child (env, (const char *const *) argv->pdata, log_fd, NULL, NULL, 0);
  close (log_fd);

  switch (wait_for_name_state (env, MV_BUS_NAME, TRUE, WAIT_MS, &env->daemon_pid, &wait_status))
    {
    case WAIT_DONE:
      return;
    case WAIT_EXITED:
      {
        g_autofree char *status = describe_wait_status (wait_status);
        print_daemon_log (env);
        env_fail (env, "the daemon exited (%s) before it owned %s", status, MV_BUS_NAME);
      }
    case WAIT_TIMEOUT:
    default:
      print_daemon_log (env);
      env_fail (env, "the daemon did not own %s within %d s", MV_BUS_NAME, WAIT_MS / 1000);
    }
}

GPid
mv_test_env_daemon_pid (MvTestEnv *env)
{
  return env->daemon_pid;
}

GPid
mv_test_env_bus_pid (MvTestEnv *env)
{
  return env->bus_pid;
}

void
mv_test_env_stop_daemon (MvTestEnv *env,
                         int        signo)
{
  int wait_status = 0;

  g_assert_cmpint (env->daemon_pid, !=, 0);

  if (!stop_child (&env->daemon_pid, signo, WAIT_MS, &wait_status))
    {
      print_daemon_log (env);
      env_fail (env, "the daemon did not exit within %d s of signal %d (%s)",
                WAIT_MS / 1000, signo, g_strsignal (signo));
    }

  if (signo == SIGTERM && !(WIFEXITED (wait_status) && WEXITSTATUS (wait_status) == 0))
    {
      g_autofree char *status = describe_wait_status (wait_status);
      print_daemon_log (env);
      env_fail (env, "the daemon ended with %s after SIGTERM, not exit status 0", status);
    }

  /* The bus drops the name only once it has seen the connection close; a
   * daemon started right after must not find it still taken. */
  if (wait_for_name_state (env, MV_BUS_NAME, FALSE, WAIT_MS, NULL, NULL) != WAIT_DONE)
    env_fail (env, "%s still has an owner %d s after the daemon exited",
              MV_BUS_NAME, WAIT_MS / 1000);
}

/* ----- running commands ----- */

static int
run_command (MvTestEnv          *env,
             gboolean            as_nobody,
             const char *const  *argv,
             char              **out,
             char              **err)
{
  g_auto(GStrv) envp = g_environ_setenv (g_get_environ (), "DBUS_SYSTEM_BUS_ADDRESS",
                                         env->bus_address, TRUE);
  const char *working_directory = NULL;
  g_autofree char *captured_out = NULL;
  g_autofree char *captured_err = NULL;
  g_autoptr(GError) error = NULL;
  int wait_status = 0;

  /* Nobody gets a user's view of its own: root's home, runtime directory
   * and session bus are not its to use. The test's working directory may be
   * closed to it. */
  if (as_nobody)
    {
      envp = g_environ_setenv (envp, "HOME", "/nonexistent", TRUE);
      envp = g_environ_setenv (envp, "USER", "nobody", TRUE);
      envp = g_environ_setenv (envp, "LOGNAME", "nobody", TRUE);
      envp = g_environ_unsetenv (envp, "XDG_RUNTIME_DIR");
      envp = g_environ_unsetenv (envp, "DBUS_SESSION_BUS_ADDRESS");
      working_directory = "/";
    }

  /* Output is always captured: the test's own stdout may carry TAP. */
  if (!g_spawn_sync (working_directory, (char **) argv, envp, G_SPAWN_SEARCH_PATH,
                     NULL, NULL, &captured_out, &captured_err, &wait_status, &error))
    env_fail (env, "cannot run %s: %s", argv[0], error->message);

  if (out != NULL)
    *out = g_steal_pointer (&captured_out);
  else if (*captured_out != '\0')
    g_printerr ("%s", captured_out);

  if (err != NULL)
    *err = g_steal_pointer (&captured_err);
  else if (*captured_err != '\0')
    g_printerr ("%s", captured_err);

  if (WIFEXITED (wait_status))
    return WEXITSTATUS (wait_status);
  if (WIFSIGNALED (wait_status))
    return 128 + WTERMSIG (wait_status);
  return -1;
}

int
mv_test_env_run (MvTestEnv          *env,
                 const char *const  *argv,
                 char              **out,
                 char              **err)
{
  g_assert_nonnull (argv);
  g_assert_nonnull (argv[0]);
  return run_command (env, FALSE, argv, out, err);
}

int
mv_test_env_run_as_nobody (MvTestEnv          *env,
                           const char *const  *argv,
                           char              **out,
                           char              **err)
{
  g_autoptr(GPtrArray) full = g_ptr_array_new ();

  g_assert_nonnull (argv);
  g_assert_nonnull (argv[0]);

  g_ptr_array_add (full, (char *) "setpriv");
  g_ptr_array_add (full, (char *) "--reuid=" NOBODY_ID);
  g_ptr_array_add (full, (char *) "--regid=" NOBODY_ID);
  g_ptr_array_add (full, (char *) "--clear-groups");
  g_ptr_array_add (full, (char *) "--");
  for (gsize i = 0; argv[i] != NULL; i++)
    g_ptr_array_add (full, (char *) argv[i]);
  g_ptr_array_add (full, NULL);

  return run_command (env, TRUE, (const char *const *) full->pdata, out, err);
}

/* ----- the environment ----- */

const char *
mv_test_env_dir (MvTestEnv *env)
{
  return env->dir;
}

const char *
mv_test_env_state_dir (MvTestEnv *env)
{
  return env->state_dir;
}

void
mv_test_env_runtime_on_tmpfs (MvTestEnv *env)
{
  if (env->runtime_tmpfs)
    return;
  if (mount ("microvmd-test-run", env->runtime_dir, "tmpfs", MS_NOSUID | MS_NODEV,
             "mode=0755,size=1g") < 0)
    env_fail (env, "cannot mount a tmpfs on %s: %s", env->runtime_dir, g_strerror (errno));
  env->runtime_tmpfs = TRUE;
}

const char *
mv_test_env_runtime_dir (MvTestEnv *env)
{
  return env->runtime_dir;
}

const char *
mv_test_env_images_dir (MvTestEnv *env)
{
  return env->images_dir;
}

const char *
mv_test_env_config_path (MvTestEnv *env)
{
  return env->config_path;
}

const char *
mv_test_env_daemon_log_path (MvTestEnv *env)
{
  return env->daemon_log_path;
}

const char *
mv_test_env_bus_address (MvTestEnv *env)
{
  return env->bus_address;
}

sd_bus *
mv_test_env_open_bus (MvTestEnv *env)
{
  return open_bus (env);
}

void
mv_test_env_wait_for_name (MvTestEnv  *env,
                           const char *name,
                           gboolean    owned,
                           guint       timeout_ms)
{
  if (wait_for_name_state (env, name, owned, timeout_ms, NULL, NULL) != WAIT_DONE)
    env_fail (env, "%s %s an owner on the test bus within %u ms",
              name, owned ? "did not get" : "still had", timeout_ms);
}

/* Stops everything the environment started and undoes what it installed.
 * Safe to call more than once; leaves the struct to be freed. */
static void
env_teardown (MvTestEnv *env)
{
  stop_child (&env->daemon_pid, SIGTERM, WAIT_MS, NULL);
  if (g_test_failed () && env->daemon_log_path != NULL && !env->daemon_log_printed)
    print_daemon_log (env);

  if (env->private_netns)
    {
      const char *del[] = { "ip", "netns", "delete", env->private_netns, NULL };

      mv_test_env_run (env, del, NULL, NULL);
      g_clear_pointer (&env->private_netns, g_free);
    }
  g_clear_pointer (&env->bus, sd_bus_flush_close_unref);
  stop_child (&env->polkit_pid, SIGTERM, WAIT_MS, NULL);
  stop_child (&env->bus_pid, SIGTERM, WAIT_MS, NULL);
  if (env->dir != NULL)
    end_leftovers (env);

  if (env->rule_names != NULL)
    remove_rules (env);
  restore_policy (env);

  if (env->bus_address != NULL)
    {
      if (env->saved_address_env != NULL)
        g_setenv ("DBUS_SYSTEM_BUS_ADDRESS", env->saved_address_env, TRUE);
      else
        g_unsetenv ("DBUS_SYSTEM_BUS_ADDRESS");
      g_clear_pointer (&env->saved_address_env, g_free);
      g_clear_pointer (&env->bus_address, g_free);
    }

  if (env->runtime_tmpfs && umount2 (env->runtime_dir, MNT_DETACH) < 0)
    g_printerr ("test environment: cannot unmount %s: %s\n", env->runtime_dir, g_strerror (errno));
  env->runtime_tmpfs = FALSE;
  if (env->dir != NULL && !env->keep_dir)
    remove_tree (env->dir);
  else if (env->dir != NULL)
    g_printerr ("test environment: kept %s\n", env->dir);
  g_clear_pointer (&env->dir, g_free);

  release_lock (env);
}

/* The pids of the processes whose command line names @dir: the
 * machines' VMMs and their console holders, which outlive the daemon by
 * design, and anything else a test started there. */
static GArray *
processes_naming (const char *dir)
{
  GArray *pids = g_array_new (FALSE, FALSE, sizeof (GPid));
  g_autoptr (GDir) proc = g_dir_open ("/proc", 0, NULL);
  const char *name;

  while (proc && (name = g_dir_read_name (proc)))
    {
      g_autofree char *path = NULL, *cmdline = NULL;
      gsize length = 0;
      GPid pid = (GPid) g_ascii_strtoll (name, NULL, 10);

      if (pid <= 0 || pid == getpid ())
        continue;
      path = g_strdup_printf ("/proc/%d/cmdline", pid);
      if (!g_file_get_contents (path, &cmdline, &length, NULL) || length == 0)
        continue;
      for (gsize i = 0; i + 1 < length; i++)
        if (cmdline[i] == '\0')
          cmdline[i] = ' ';
      if (strstr (cmdline, dir))
        g_array_append_val (pids, pid);
    }
  return pids;
}

/* Ends what the machines of this environment left running, so that no
 * test leaves a VMM behind, whatever it did with its machines. */
static void
end_leftovers (MvTestEnv *env)
{
  for (guint round = 0; round < 50; round++)
    {
      g_autoptr (GArray) pids = processes_naming (env->dir);

      if (pids->len == 0)
        return;
      for (guint i = 0; i < pids->len; i++)
        kill (g_array_index (pids, GPid, i), SIGKILL);
      g_usleep (20 * 1000);
    }
  g_printerr ("test environment: processes of %s did not end\n", env->dir);
}

static void
teardown_at_exit (void)
{
  if (live_env != NULL)
    env_teardown (live_env);
}

MvTestEnv *
mv_test_env_new (void)
{
  return mv_test_env_new_full (NULL);
}

MvTestEnv *
mv_test_env_new_full (const char *const *extra_bus_policies)
{
  static gboolean atexit_registered;
  g_autoptr(GError) error = NULL;
  MvTestEnv *env;
  const char *keep;

  if (live_env != NULL)
    g_error ("test environment: only one environment may exist in a process at a time");

  env = g_new0 (MvTestEnv, 1);
  env->lock_fd = -1;
  env->rule_names = g_ptr_array_new_with_free_func (g_free);
  env->extra_bus_policies = g_strdupv ((char **) extra_bus_policies);
  keep = g_getenv ("MICROVMD_TEST_KEEP");
  env->keep_dir = keep != NULL && *keep != '\0' && g_strcmp0 (keep, "0") != 0;
  live_env = env;

  if (!atexit_registered)
    {
      atexit (teardown_at_exit);
      atexit_registered = TRUE;
    }

  if (geteuid () != 0)
    env_fail (env, "integration tests run as root: polkitd and its directories need it");

  take_lock (env);

  env->dir = g_dir_make_tmp ("microvmd-test-XXXXXX", &error);
  if (env->dir == NULL)
    env_fail (env, "cannot create a temporary directory: %s", error->message);
  /* polkitd and commands run as nobody reach the bus socket through it. */
  if (chmod (env->dir, 0755) < 0)
    env_fail (env, "cannot chmod %s: %s", env->dir, g_strerror (errno));
  g_test_message ("test environment in %s", env->dir);

  env->state_dir = g_build_filename (env->dir, "state", NULL);
  env->runtime_dir = g_build_filename (env->dir, "run", NULL);
  env->images_dir = g_build_filename (env->dir, "images", NULL);
  env->config_path = g_build_filename (env->dir, "microvmd.conf", NULL);
  env->daemon_log_path = g_build_filename (env->dir, "daemon.log", NULL);

  if (g_mkdir (env->state_dir, 0755) < 0 || g_mkdir (env->runtime_dir, 0755) < 0 ||
      g_mkdir (env->images_dir, 0755) < 0)
    env_fail (env, "cannot create directories in %s: %s", env->dir, g_strerror (errno));
  mv_test_env_write_config (env, "# microvmd test configuration\n");

  remove_stale_rules ();
  install_policy (env);
  start_bus (env);
  mv_test_env_start_polkit (env);

  return env;
}

void
mv_test_env_free (MvTestEnv *env)
{
  if (env == NULL)
    return;

  env_teardown (env);
  if (live_env == env)
    live_env = NULL;

  g_free (env->state_dir);
  g_free (env->runtime_dir);
  g_free (env->images_dir);
  g_free (env->config_path);
  g_free (env->daemon_log_path);
  g_free (env->daemon_netns);
  g_free (env->policy_original);
  g_ptr_array_unref (env->rule_names);
  g_strfreev (env->extra_bus_policies);
  g_free (env);
}
