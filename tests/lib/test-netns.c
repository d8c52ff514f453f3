/* A network namespace with NetworkManager in it. See test-netns.h. */
#include "test-netns.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gio/gio.h>
#include <glib/gstdio.h>

#define NETNS_PREFIX   "mvtest-"
#define NETNS_DIR      "/run/netns"
#define WAIT_MS        20000

struct _MvTestNetns
{
  MvTestEnv       *env;
  char            *name;
  char            *dir;            /* in the environment's directory */
  char            *keyfile_dir;
  char            *log_path;
  GDBusConnection *bus;
  GPid             nm_pid;
};

static const char nm_config[] =
  "# NetworkManager for a microvmd test: it makes what it is asked to and\n"
  "# touches nothing of the machine's.\n"
  "[main]\n"
  "plugins=keyfile\n"
  "no-auto-default=*\n"
  "dns=none\n"
  "rc-manager=unmanaged\n"
  "hostname-mode=none\n"
  "firewall-backend=none\n"
  "auth-polkit=root-only\n"
  "\n"
  "[keyfile]\n"
  "path=%s\n"
  "unmanaged-devices=interface-name:lo\n"
  "\n"
  "[logging]\n"
  "level=INFO\n";

/* Mounts come first, in the namespace's own mount namespace that
 * ip netns exec made; "$1" is the fixture's directory. */
static const char nm_script[] =
  "mount -t tmpfs -o mode=0755 tmpfs /run && "
  "mount -t tmpfs -o mode=0700 tmpfs /var/lib/NetworkManager && "
  "exec NetworkManager --no-daemon --debug "
  "--config=\"$1/NetworkManager.conf\" --config-dir=\"$1/conf.d\" "
  "--system-config-dir=\"$1/conf.d\" --state-file=\"$1/NetworkManager.state\" "
  "--intern-config=\"$1/NetworkManager-intern.conf\" --pid-file=/run/NetworkManager.pid";

static void
print_file (const char *path)
{
  g_autofree char *contents = NULL;

  if (g_file_get_contents (path, &contents, NULL, NULL))
    g_printerr ("----- %s -----\n%s\n----- end of %s -----\n", path, contents, path);
}

static int
run_quiet (const char *const *argv,
           char             **err)
{
  g_autoptr(GError) error = NULL;
  int wait_status = 0;

  if (!g_spawn_sync (NULL, (char **) argv, NULL, G_SPAWN_SEARCH_PATH | G_SPAWN_STDOUT_TO_DEV_NULL,
                     NULL, NULL, NULL, err, &wait_status, &error))
    g_error ("test netns: cannot run %s: %s", argv[0], error->message);
  return WIFEXITED (wait_status) ? WEXITSTATUS (wait_status) : 128;
}

static void
delete_netns (const char *name)
{
  const char *argv[] = { "ip", "netns", "delete", name, NULL };
  g_autofree char *err = NULL;

  if (run_quiet (argv, &err) != 0)
    g_printerr ("test netns: cannot delete network namespace %s: %s", name, err);
}

/* A test that aborted left its namespace and the devices in it. */
static void
delete_stale_namespaces (void)
{
  g_autoptr(GDir) dir = g_dir_open (NETNS_DIR, 0, NULL);
  const char *base;

  while (dir != NULL && (base = g_dir_read_name (dir)) != NULL)
    {
      guint64 pid = 0;
      g_auto(GStrv) parts = NULL;

      if (!g_str_has_prefix (base, NETNS_PREFIX))
        continue;
      parts = g_strsplit (base + strlen (NETNS_PREFIX), "-", 2);
      if (parts[0] == NULL
          || !g_ascii_string_to_unsigned (parts[0], 10, 1, G_MAXINT32, &pid, NULL)
          || kill ((pid_t) pid, 0) == 0 || errno != ESRCH)
        continue;
      delete_netns (base);
    }
}

static gboolean
nm_owns_name (MvTestNetns *netns)
{
  g_autoptr(GVariant) reply = NULL;
  g_autoptr(GError) error = NULL;
  gboolean owned = FALSE;

  reply = g_dbus_connection_call_sync (netns->bus, "org.freedesktop.DBus", "/org/freedesktop/DBus",
                                       "org.freedesktop.DBus", "NameHasOwner",
                                       g_variant_new ("(s)", MV_TEST_NM_BUS_NAME),
                                       G_VARIANT_TYPE ("(b)"), G_DBUS_CALL_FLAGS_NONE, -1,
                                       NULL, &error);
  if (reply == NULL)
    g_error ("test netns: NameHasOwner failed: %s", error->message);
  g_variant_get (reply, "(b)", &owned);
  return owned;
}

static gboolean
nm_exited (MvTestNetns *netns,
           int         *wait_status)
{
  pid_t r;

  if (netns->nm_pid == 0)
    return TRUE;
  do
    r = waitpid (netns->nm_pid, wait_status, WNOHANG);
  while (r < 0 && errno == EINTR);
  if (r == 0)
    return FALSE;
  netns->nm_pid = 0;
  return TRUE;
}

static void
die_with_parent (gpointer user_data)
{
  if (prctl (PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid () != GPOINTER_TO_INT (user_data))
    _exit (127);
}

void
mv_test_netns_start_nm (MvTestNetns *netns)
{
  const char *argv[] = { "ip", "netns", "exec", netns->name, "sh", "-c", nm_script, "sh",
                         netns->dir, NULL };
  g_autoptr(GError) error = NULL;
  gint64 deadline;
  int log_fd;

  g_assert_cmpint (netns->nm_pid, ==, 0);
  g_assert_false (nm_owns_name (netns));

  log_fd = open (netns->log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  g_assert_cmpint (log_fd, >=, 0);
  if (!g_spawn_async_with_pipes_and_fds (NULL, argv, NULL,
                                         G_SPAWN_DO_NOT_REAP_CHILD | G_SPAWN_SEARCH_PATH,
                                         die_with_parent, GINT_TO_POINTER (getpid ()),
                                         -1, log_fd, log_fd, NULL, NULL, 0,
                                         &netns->nm_pid, NULL, NULL, NULL, &error))
    g_error ("test netns: cannot start NetworkManager: %s", error->message);
  close (log_fd);

  deadline = g_get_monotonic_time () + WAIT_MS * G_TIME_SPAN_MILLISECOND;
  while (!nm_owns_name (netns))
    {
      int wait_status = 0;

      if (nm_exited (netns, &wait_status))
        {
          print_file (netns->log_path);
          g_error ("test netns: NetworkManager exited (wait status 0x%x) before it owned %s",
                   (unsigned) wait_status, MV_TEST_NM_BUS_NAME);
        }
      if (g_get_monotonic_time () >= deadline)
        {
          print_file (netns->log_path);
          g_error ("test netns: NetworkManager did not own %s within %d s",
                   MV_TEST_NM_BUS_NAME, WAIT_MS / 1000);
        }
      g_usleep (20 * G_TIME_SPAN_MILLISECOND);
    }
}

static gboolean
stop_nm (MvTestNetns *netns,
         int          signo)
{
  gint64 deadline = g_get_monotonic_time () + WAIT_MS * G_TIME_SPAN_MILLISECOND;

  if (netns->nm_pid == 0)
    return TRUE;
  /* The shell exec'd NetworkManager: the pid is NetworkManager's. */
  kill (netns->nm_pid, signo);
  while (!nm_exited (netns, NULL))
    {
      if (g_get_monotonic_time () >= deadline)
        {
          kill (netns->nm_pid, SIGKILL);
          while (waitpid (netns->nm_pid, NULL, 0) < 0 && errno == EINTR)
            ;
          netns->nm_pid = 0;
          return FALSE;
        }
      g_usleep (10 * G_TIME_SPAN_MILLISECOND);
    }
  return TRUE;
}

void
mv_test_netns_stop_nm (MvTestNetns *netns,
                       int          signo)
{
  gint64 deadline;

  g_assert_cmpint (netns->nm_pid, !=, 0);
  if (!stop_nm (netns, signo))
    {
      print_file (netns->log_path);
      g_error ("test netns: NetworkManager did not exit within %d s of signal %d",
               WAIT_MS / 1000, signo);
    }
  deadline = g_get_monotonic_time () + WAIT_MS * G_TIME_SPAN_MILLISECOND;
  while (nm_owns_name (netns))
    {
      if (g_get_monotonic_time () >= deadline)
        g_error ("test netns: %s still has an owner after NetworkManager exited",
                 MV_TEST_NM_BUS_NAME);
      g_usleep (10 * G_TIME_SPAN_MILLISECOND);
    }
}

gboolean
mv_test_netns_nm_running (MvTestNetns *netns)
{
  return netns->nm_pid != 0;
}

int
mv_test_netns_run (MvTestNetns        *netns,
                   const char *const  *argv,
                   char              **out,
                   char              **err)
{
  g_autoptr(GPtrArray) full = g_ptr_array_new ();

  g_ptr_array_add (full, (char *) "ip");
  g_ptr_array_add (full, (char *) "netns");
  g_ptr_array_add (full, (char *) "exec");
  g_ptr_array_add (full, netns->name);
  for (gsize i = 0; argv[i] != NULL; i++)
    g_ptr_array_add (full, (char *) argv[i]);
  g_ptr_array_add (full, NULL);
  return mv_test_env_run (netns->env, (const char *const *) full->pdata, out, err);
}

const char *
mv_test_netns_name (MvTestNetns *netns)
{
  return netns->name;
}

const char *
mv_test_netns_keyfile_dir (MvTestNetns *netns)
{
  return netns->keyfile_dir;
}

MvTestNetns *
mv_test_netns_new (MvTestEnv *env)
{
  static guint counter;
  MvTestNetns *netns = g_new0 (MvTestNetns, 1);
  g_autofree char *config = NULL;
  g_autofree char *config_path = NULL;
  g_autofree char *conf_d = NULL;
  g_autofree char *err = NULL;
  g_autoptr(GError) error = NULL;

  netns->env = env;
  netns->name = g_strdup_printf (NETNS_PREFIX "%d-%u", (int) getpid (), counter++);
  netns->dir = g_build_filename (mv_test_env_dir (env), netns->name, NULL);
  netns->keyfile_dir = g_build_filename (netns->dir, "system-connections", NULL);
  netns->log_path = g_build_filename (netns->dir, "NetworkManager.log", NULL);
  conf_d = g_build_filename (netns->dir, "conf.d", NULL);
  config_path = g_build_filename (netns->dir, "NetworkManager.conf", NULL);

  g_assert_cmpint (g_mkdir_with_parents (netns->keyfile_dir, 0700), ==, 0);
  g_assert_cmpint (g_mkdir_with_parents (conf_d, 0755), ==, 0);
  config = g_strdup_printf (nm_config, netns->keyfile_dir);
  if (!g_file_set_contents (config_path, config, -1, &error))
    g_error ("test netns: cannot write %s: %s", config_path, error->message);

  netns->bus = g_dbus_connection_new_for_address_sync (mv_test_env_bus_address (env),
                                                       G_DBUS_CONNECTION_FLAGS_AUTHENTICATION_CLIENT
                                                       | G_DBUS_CONNECTION_FLAGS_MESSAGE_BUS_CONNECTION,
                                                       NULL, NULL, &error);
  if (netns->bus == NULL)
    g_error ("test netns: cannot connect to the test bus: %s", error->message);

  delete_stale_namespaces ();
  {
    const char *argv[] = { "ip", "netns", "add", netns->name, NULL };

    if (run_quiet (argv, &err) != 0)
      g_error ("test netns: cannot add network namespace %s: %s", netns->name, err);
  }
  g_test_message ("network namespace %s, NetworkManager log in %s", netns->name,
                  netns->log_path);

  mv_test_netns_start_nm (netns);
  return netns;
}

void
mv_test_netns_free (MvTestNetns *netns)
{
  if (netns == NULL)
    return;

  stop_nm (netns, SIGTERM);
  if (g_test_failed ())
    print_file (netns->log_path);
  delete_netns (netns->name);

  g_clear_object (&netns->bus);
  g_free (netns->name);
  g_free (netns->dir);
  g_free (netns->keyfile_dir);
  g_free (netns->log_path);
  g_free (netns);
}
