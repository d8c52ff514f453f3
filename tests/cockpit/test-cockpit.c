/* The Cockpit page in a real browser through a real cockpit-ws: Debian's
 * cockpit-ws on a loopback port with a local session (no login, no TLS),
 * its cockpit-bridge on the test's private system bus with the real
 * daemon and polkitd behind it, and headless Chromium driven by
 * playwright-core (browser.mjs) loading the page built in the build tree.
 *
 * The page's own checks are in browser.mjs; this program sets the world
 * up, runs it, and counts from outside (dbus-monitor on the bus) the
 * calls the page makes to the daemon. Screenshots are kept in
 * $MICROVMD_BUILD_DIR/tests/cockpit/artifacts/. */
#include "bus-client.h"
#include "names.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <glib/gstdio.h>

#define COCKPIT_WS     "/usr/lib/cockpit/cockpit-ws"
#define COCKPIT_BRIDGE "/usr/bin/cockpit-bridge"
#define THOUSAND       1000
#define WAIT_MS        20000

typedef struct {
  MvTestEnv *env;
  Client    *client;
  GPid       ws_pid;
  guint16    port;
  char      *url;
  GPid       monitor_pid;
  char      *monitor_log;
  char      *nobody_dir;
} CockpitFixture;

static const char *
build_dir (void)
{
  const char *dir = g_getenv ("MICROVMD_BUILD_DIR");

  g_assert_nonnull (dir);
  return dir;
}

/* Children of the test: a process group of their own (ended whole), and
 * ended with the test if it dies first. */
static void
child_setup (gpointer data)
{
  setpgid (0, 0);
  prctl (PR_SET_PDEATHSIG, SIGTERM);
}

/* A file in the environment's directory for a child's output: a child
 * holding the test's own output open would keep meson waiting. */
static int
log_file (CockpitFixture *f, const char *name)
{
  g_autofree char *path = g_build_filename (mv_test_env_dir (f->env), name, NULL);
  int fd = open (path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);

  g_assert_cmpint (fd, >=, 0);
  return fd;
}

/* A loopback port that was free a moment ago. */
static guint16
free_port (void)
{
  struct sockaddr_in addr = { .sin_family = AF_INET, .sin_addr.s_addr = htonl (INADDR_LOOPBACK) };
  socklen_t len = sizeof addr;
  int fd = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

  g_assert_cmpint (fd, >=, 0);
  g_assert_cmpint (bind (fd, (struct sockaddr *) &addr, sizeof addr), ==, 0);
  g_assert_cmpint (getsockname (fd, (struct sockaddr *) &addr, &len), ==, 0);
  close (fd);
  return ntohs (addr.sin_port);
}

static gboolean
port_answers (guint16 port)
{
  struct sockaddr_in addr = { .sin_family = AF_INET, .sin_port = htons (port),
                              .sin_addr.s_addr = htonl (INADDR_LOOPBACK) };
  int fd = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  gboolean ok = connect (fd, (struct sockaddr *) &addr, sizeof addr) == 0;

  close (fd);
  return ok;
}

static gboolean
exited (GPid pid)
{
  int status;

  return waitpid (pid, &status, WNOHANG) == pid;
}

/* Ends a process group started here and reaps its leader. */
static void
stop_group (GPid *pid)
{
  int status;

  if (*pid <= 0)
    return;
  kill (-*pid, SIGTERM);
  for (guint i = 0; i < 100 && waitpid (*pid, &status, WNOHANG) == 0; i++)
    g_usleep (50000);
  if (waitpid (*pid, &status, WNOHANG) == 0)
    {
      kill (-*pid, SIGKILL);
      waitpid (*pid, &status, 0);
    }
  *pid = 0;
}

/* The package as built (build/cockpit/microvmd), where cockpit-bridge
 * looks first: $XDG_DATA_HOME/cockpit, the place for packages being
 * worked on, which Cockpit never caches. Nothing is installed on the
 * host. */
static void
link_package (const char *data_home)
{
  g_autofree char *package = g_build_filename (build_dir (), "cockpit", "microvmd", NULL);
  g_autofree char *manifest = g_build_filename (package, "manifest.json", NULL);
  g_autofree char *cockpit_dir = g_build_filename (data_home, "cockpit", NULL);
  g_autofree char *link = g_build_filename (cockpit_dir, "microvmd", NULL);

  if (!g_file_test (manifest, G_FILE_TEST_EXISTS))
    g_error ("%s is not built: ninja -C %s", manifest, build_dir ());
  g_assert_cmpint (g_mkdir_with_parents (cockpit_dir, 0755), ==, 0);
  g_assert_cmpint (symlink (package, link), ==, 0);
}

/* cockpit-ws with a local session: the bridge it starts inherits this
 * environment, so it is on the test's bus (DBUS_SYSTEM_BUS_ADDRESS, set by
 * the environment) and finds the build tree's microvmctl first in PATH.
 * The session is root's, or, @as_nobody, that of uid 65534, which polkit
 * gives nothing without authentication (its home is a directory of its
 * own outside the environment's, which only root may enter). */
static void
start_cockpit_ws (CockpitFixture *f, gboolean as_nobody)
{
  g_autofree char *session = NULL, *data_home = NULL, *home = NULL;
  g_autofree char *cli_dir = g_build_filename (build_dir (), "src", "cli", NULL);
  g_autofree char *path = g_strconcat (cli_dir, ":", g_getenv ("PATH"), NULL);
  g_auto (GStrv) envp = g_get_environ ();
  g_autoptr (GPtrArray) argv = g_ptr_array_new ();

  if (as_nobody)
    {
      g_autoptr (GError) error = NULL;

      session = g_dir_make_tmp ("microvmd-cockpit-XXXXXX", &error);
      g_assert_no_error (error);
      f->nobody_dir = g_strdup (session);
    }
  else
    session = g_build_filename (mv_test_env_dir (f->env), "session", NULL);
  data_home = g_build_filename (session, "data", NULL);
  home = g_build_filename (session, "home", NULL);
  g_assert_cmpint (g_mkdir_with_parents (home, 0700), ==, 0);
  link_package (data_home);
  if (as_nobody)
    {
      const char *const dirs[] = { session, data_home, home, NULL };

      g_assert_cmpint (chmod (session, 0755), ==, 0);
      for (guint i = 0; dirs[i]; i++)
        g_assert_cmpint (chown (dirs[i], 65534, 65534), ==, 0);
      g_ptr_array_add (argv, "setpriv");
      g_ptr_array_add (argv, "--reuid=65534");
      g_ptr_array_add (argv, "--regid=65534");
      g_ptr_array_add (argv, "--clear-groups");
      g_ptr_array_add (argv, "--");
      envp = g_environ_setenv (envp, "USER", "nobody", TRUE);
      envp = g_environ_setenv (envp, "LOGNAME", "nobody", TRUE);
    }
  envp = g_environ_setenv (envp, "XDG_DATA_HOME", data_home, TRUE);
  envp = g_environ_setenv (envp, "HOME", home, TRUE);
  envp = g_environ_setenv (envp, "PATH", path, TRUE);
  envp = g_environ_setenv (envp, "XDG_RUNTIME_DIR", home, TRUE);
  envp = g_environ_unsetenv (envp, "G_DEBUG");
  g_ptr_array_add (argv, COCKPIT_WS);
  g_ptr_array_add (argv, "--local-session=" COCKPIT_BRIDGE);
  g_ptr_array_add (argv, "--port");
  g_ptr_array_add (argv, NULL);   /* the port, below */
  g_ptr_array_add (argv, "--address");
  g_ptr_array_add (argv, "127.0.0.1");
  g_ptr_array_add (argv, NULL);

  for (guint attempt = 0; attempt < 5; attempt++)
    {
      g_autofree char *port = NULL;
      g_autoptr (GError) error = NULL;
      gint64 deadline;
      int out = log_file (f, "cockpit-ws.log");

      f->port = free_port ();
      port = g_strdup_printf ("%u", f->port);
      argv->pdata[argv->len - 4] = port;
      g_assert_true (g_spawn_async_with_fds (NULL, (char **) argv->pdata, envp,
                                             G_SPAWN_SEARCH_PATH | G_SPAWN_DO_NOT_REAP_CHILD,
                                             child_setup, NULL, &f->ws_pid, -1, out, out, &error));
      close (out);
      deadline = g_get_monotonic_time () + WAIT_MS * G_TIME_SPAN_MILLISECOND;
      while (!port_answers (f->port) && !exited (f->ws_pid) && g_get_monotonic_time () < deadline)
        g_usleep (20000);
      if (port_answers (f->port))
        {
          f->url = g_strdup_printf ("http://127.0.0.1:%u/cockpit/@localhost/microvmd/index.html",
                                    f->port);
          g_test_message ("cockpit-ws serves the page at %s", f->url);
          return;
        }
      /* The port was taken meanwhile: another one. */
      stop_group (&f->ws_pid);
    }
  g_error ("cockpit-ws did not come up");
}

/* dbus-monitor on the test's bus (root may become a monitor), writing
 * every message to a file for count_page_calls(). */
static void
start_monitor (CockpitFixture *f)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *address = g_strdup (mv_test_env_bus_address (f->env));
  const char *argv[] = { "dbus-monitor", "--address", address, NULL };
  int out;
  g_autoptr (GString) got = g_string_new (NULL);

  f->monitor_log = g_build_filename (mv_test_env_dir (f->env), "monitor.log", NULL);
  out = open (f->monitor_log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  g_assert_cmpint (out, >=, 0);
  g_assert_true (g_spawn_async_with_fds (NULL, (char **) argv, NULL,
                                         G_SPAWN_SEARCH_PATH | G_SPAWN_DO_NOT_REAP_CHILD,
                                         child_setup, NULL, &f->monitor_pid, -1, out, out,
                                         &error));
  close (out);
  /* It has become a monitor once it has lost its own name (it says so). */
  for (guint i = 0; i < 500; i++)
    {
      g_autofree char *text = NULL;

      if (g_file_get_contents (f->monitor_log, &text, NULL, NULL) && strstr (text, "member=NameLost"))
        return;
      g_usleep (10000);
    }
  g_error ("dbus-monitor did not start");
}

static void
setup (CockpitFixture *f, gconstpointer data)
{
  f->env = mv_test_env_new ();
  mv_test_env_write_config (f->env, data);
  mv_test_env_start_daemon (f->env, NULL);
  f->client = client_new (f->env);
}

static void
teardown (CockpitFixture *f, gconstpointer data)
{
  stop_group (&f->ws_pid);
  stop_group (&f->monitor_pid);
  client_delete_all (f->client);
  client_free (f->client);
  mv_test_env_free (f->env);
  if (f->nobody_dir)
    {
      const char *argv[] = { "rm", "-rf", f->nobody_dir, NULL };

      g_assert_true (g_spawn_sync (NULL, (char **) argv, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL,
                                   NULL, NULL, NULL, NULL));
      g_free (f->nobody_dir);
    }
  g_free (f->url);
  g_free (f->monitor_log);
}

/* Runs browser.mjs SCENARIO against the page; it exits 0 when every check
 * of that scenario passed. */
static void
run_browser (CockpitFixture *f, const char *scenario, const char *const *extra_env)
{
  g_autofree char *script = g_build_filename (g_getenv ("MICROVMD_SOURCE_DIR"), "tests", "cockpit",
                                              "browser.mjs", NULL);
  g_autofree char *modules = g_build_filename (build_dir (), "cockpit", "node_modules", NULL);
  g_autofree char *artifacts = g_build_filename (build_dir (), "tests", "cockpit", "artifacts", NULL);
  g_autofree char *microvmctl = g_build_filename (build_dir (), "src", "cli", "microvmctl", NULL);
  g_autofree char *profile = g_build_filename (mv_test_env_dir (f->env), "chromium", NULL);
  const char *argv[] = { "node", script, scenario, NULL };

  g_assert_cmpint (g_mkdir_with_parents (artifacts, 0755), ==, 0);
  g_setenv ("MV_COCKPIT_URL", f->url, TRUE);
  g_setenv ("MV_NODE_MODULES", modules, TRUE);
  g_setenv ("MV_ARTIFACTS", artifacts, TRUE);
  g_setenv ("MV_MICROVMCTL", microvmctl, TRUE);
  g_setenv ("MV_BROWSER_PROFILE", profile, TRUE);
  for (guint i = 0; extra_env && extra_env[i]; i += 2)
    g_setenv (extra_env[i], extra_env[i + 1], TRUE);
  g_assert_cmpint (mv_test_env_run (f->env, argv, NULL, NULL), ==, 0);
}

/* ---- a machine's life in the page ---- */

static void
test_machine (CockpitFixture *f, gconstpointer data)
{
  g_autofree char *kernel = g_build_filename (build_dir (), "tests", "guest", "vmlinuz", NULL);
  g_autofree char *initrd = g_build_filename (build_dir (), "tests", "guest", "initrd.img", NULL);
  g_autofree char *spec = guest_spec_json ("cloud-hypervisor", "web", kernel, initrd,
                                           "\"cpu_millicores\":1000,\"labels\":{\"tier\":\"front\"}");
  g_autofree char *spec_file = g_build_filename (mv_test_env_dir (f->env), "web.json", NULL);
  const char *extra[] = { "MV_SPEC_FILE", spec_file, "MV_KERNEL", kernel, NULL };

  g_autofree char *log = NULL;

  g_assert_true (g_file_set_contents (spec_file, spec, -1, NULL));
  start_cockpit_ws (f, FALSE);
  run_browser (f, "machine", extra);
  /* The page's console came through the console bridge, as a remote
   * client's does. */
  log = mv_test_env_read_daemon_log (f->env);
  g_assert_nonnull (strstr (log, "Console bridge: a serial session into machine web"));
}

/* ---- a thousand machines ---- */

static char *
substitute (const char *text, const char *from1, const char *to1, const char *from2, const char *to2)
{
  g_auto (GStrv) a = g_strsplit (text, from1, -1);
  g_autofree char *t = g_strjoinv ((char *) to1, a);
  g_auto (GStrv) b = g_strsplit (t, from2, -1);

  return g_strjoinv ((char *) to2, b);
}

/* One machine made through the bus, its records copied to @n machines
 * while the daemon is down (as bench/ does: creating them one by one is
 * not what is tested), then the daemon started on them. They boot cold:
 * a first start's warm template would be a new object, announced, and
 * cockpit's bridge answers an object it has not seen by listing the
 * manager's objects itself, which is not the page's listing. */
static void
define_machines (CockpitFixture *f, guint n)
{
  g_autofree char *path = client_create_ok (f->client,
    "{\"name\":\"template\",\"hypervisor_type\":\"test\",\"kernel\":\"/boot/vmlinuz\","
    "\"cpu_millicores\":1000,\"memory_bytes\":268435456,\"start_mode\":\"cold\","
    "\"labels\":{\"role\":\"scale\"}}");
  g_autofree char *id = client_get_string (f->client, path, "Id");
  g_autofree char *machines = g_build_filename (mv_test_env_state_dir (f->env), MV_MACHINES_DIR, NULL);
  g_autofree char *dir = g_build_filename (machines, id, NULL);
  g_autofree char *config_path = g_build_filename (dir, MV_CONFIG_RECORD, NULL);
  g_autofree char *status_path = g_build_filename (dir, MV_STATUS_RECORD, NULL);
  g_autofree char *config = NULL, *status = NULL;

  client_free (g_steal_pointer (&f->client));
  mv_test_env_stop_daemon (f->env, SIGTERM);
  g_assert_true (g_file_get_contents (config_path, &config, NULL, NULL));
  g_assert_true (g_file_get_contents (status_path, &status, NULL, NULL));
  g_assert_cmpint (unlink (config_path), ==, 0);
  g_assert_cmpint (unlink (status_path), ==, 0);
  g_assert_cmpint (g_rmdir (dir), ==, 0);

  for (guint i = 0; i < n; i++)
    {
      g_autofree char *new_id = g_strdup_printf ("c0c0%028x", i + 1);
      g_autofree char *name = g_strdup_printf ("\"machine-%04u\"", i + 1);
      g_autofree char *new_dir = g_build_filename (machines, new_id, NULL);
      g_autofree char *c = substitute (config, id, new_id, "\"template\"", name);
      g_autofree char *s = substitute (status, id, new_id, "\"template\"", name);
      g_autofree char *cpath = g_build_filename (new_dir, MV_CONFIG_RECORD, NULL);
      g_autofree char *spath = g_build_filename (new_dir, MV_STATUS_RECORD, NULL);

      g_assert_cmpint (g_mkdir (new_dir, 0700), ==, 0);
      g_assert_true (g_file_set_contents_full (cpath, c, -1, G_FILE_SET_CONTENTS_NONE, 0600, NULL));
      g_assert_true (g_file_set_contents_full (spath, s, -1, G_FILE_SET_CONTENTS_NONE, 0600, NULL));
    }
  mv_test_env_start_daemon (f->env, NULL);
  f->client = client_new (f->env);
}

/* The method calls each sender made to the daemon, from the monitor's
 * log: sender -> "interface.member path" -> count. */
static GHashTable *
calls_by_sender (CockpitFixture *f, const char *daemon_unique)
{
  g_autofree char *text = NULL;
  g_auto (GStrv) lines = NULL;
  GHashTable *senders = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
                                               (GDestroyNotify) g_hash_table_unref);

  g_assert_true (g_file_get_contents (f->monitor_log, &text, NULL, NULL));
  lines = g_strsplit (text, "\n", -1);
  for (guint i = 0; lines[i]; i++)
    {
      const char *l = lines[i];
      g_autofree char *sender = NULL, *dest = NULL, *path = NULL, *iface = NULL, *member = NULL;
      GHashTable *calls;
      char *key;

      if (!g_str_has_prefix (l, "method call "))
        continue;
#define FIELD(name, var)                                                    \
      {                                                                     \
        const char *at = strstr (l, " " name "=");                          \
        if (at)                                                             \
          var = g_strndup (at + strlen (name) + 2,                          \
                           strcspn (at + strlen (name) + 2, " ;"));         \
      }
      FIELD ("sender", sender);
      FIELD ("destination", dest);
      FIELD ("path", path);
      FIELD ("interface", iface);
      FIELD ("member", member);
#undef FIELD
      if (!sender || !dest || !member)
        continue;
      if (!g_str_equal (dest, MV_BUS_NAME) && !g_str_equal (dest, daemon_unique))
        continue;
      calls = g_hash_table_lookup (senders, sender);
      if (!calls)
        {
          calls = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
          g_hash_table_insert (senders, g_strdup (sender), calls);
        }
      key = g_strdup_printf ("%s.%s %s", iface ? iface : "", member, path ? path : "");
      g_hash_table_insert (calls, key,
                           GUINT_TO_POINTER (GPOINTER_TO_UINT (g_hash_table_lookup (calls, key)) + 1));
    }
  return senders;
}

static char *
daemon_unique_name (CockpitFixture *f)
{
  const char *owner = NULL;
  sd_bus_error error = SD_BUS_ERROR_NULL;
  sd_bus_message *m = NULL;
  char *name;

  g_assert_cmpint (sd_bus_call_method (f->client->bus, "org.freedesktop.DBus", "/org/freedesktop/DBus",
                                       "org.freedesktop.DBus", "GetNameOwner", &error, &m, "s",
                                       MV_BUS_NAME), >=, 0);
  g_assert_cmpint (sd_bus_message_read (m, "s", &owner), >, 0);
  name = g_strdup (owner);
  sd_bus_message_unref (m);
  return name;
}

/* The page lists a thousand machines from one GetManagedObjects and
 * follows a state change of one of them from its signals. Counted from
 * outside: the page's connection (the one that asked for the listing)
 * made exactly one GetManagedObjects and read no machine, nor any
 * property, on its own; the only other call it may make is the stats
 * poll of the list (Manager.GetAllStats). */
static void
test_thousand (CockpitFixture *f, gconstpointer data)
{
  g_autofree char *daemon = NULL;
  g_autoptr (GHashTable) senders = NULL;
  GHashTableIter iter;
  gpointer sender, calls;
  const char *page = NULL;
  guint listings = 0;

  define_machines (f, THOUSAND);
  daemon = daemon_unique_name (f);
  start_monitor (f);
  start_cockpit_ws (f, FALSE);
  run_browser (f, "thousand", NULL);

  senders = calls_by_sender (f, daemon);
  g_hash_table_iter_init (&iter, senders);
  while (g_hash_table_iter_next (&iter, &sender, &calls))
    {
      guint n = GPOINTER_TO_UINT (g_hash_table_lookup (calls,
        "org.freedesktop.DBus.ObjectManager.GetManagedObjects /org/microvmd1"));
      if (n > 0)
        {
          page = sender;
          listings += n;
        }
    }
  g_assert_nonnull (page);
  g_assert_cmpuint (listings, ==, 1);

  calls = g_hash_table_lookup (senders, page);
  g_hash_table_iter_init (&iter, calls);
  while (g_hash_table_iter_next (&iter, &sender, NULL))
    {
      const char *call = sender;
      guint n = GPOINTER_TO_UINT (g_hash_table_lookup (calls, call));

      g_test_message ("the page called %s %u times", call, n);
      if (g_str_equal (call, "org.freedesktop.DBus.ObjectManager.GetManagedObjects /org/microvmd1") ||
          g_str_equal (call, MV_MANAGER_IFACE ".GetAllStats /org/microvmd1"))
        continue;
      g_error ("the page called %s (%u times): nothing but the one listing and the stats "
               "poll may be read", call, n);
    }
}

/* ---- limited access ---- */

/* A user whom polkit gives nothing: the page says it runs in limited
 * access mode and offers Cockpit's administrative access prompt; asked to
 * start a machine, it gets the daemon's refusal, and the machine stays as
 * it was. */
static void
test_limited (CockpitFixture *f, gconstpointer data)
{
  g_autofree char *path = client_create_ok (f->client,
    "{\"name\":\"guarded\",\"hypervisor_type\":\"test\",\"kernel\":\"/boot/vmlinuz\"}");

  g_autofree char *state = NULL;

  start_cockpit_ws (f, TRUE);
  run_browser (f, "limited", NULL);
  state = client_get_string (f->client, path, "State");
  g_assert_cmpstr (state, ==, "Stopped");
}

int
main (int argc, char **argv)
{
  g_autofree char *machine_config = NULL;

  g_test_init (&argc, &argv, NULL);
  machine_config = guest_config ("cloud-hypervisor",
                                 "[lifecycle]\nboot-timeout-seconds=20\nstop-timeout-seconds=2\n"
                                 "[console]\nlisten=127.0.0.1:0\n");
  g_test_add ("/cockpit/machine", CockpitFixture, machine_config, setup, test_machine, teardown);
  g_test_add ("/cockpit/thousand", CockpitFixture, "", setup, test_thousand, teardown);
  g_test_add ("/cockpit/limited-access", CockpitFixture, "", setup, test_limited, teardown);
  return g_test_run ();
}
