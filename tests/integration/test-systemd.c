/* VMMs in systemd scopes, registered with machined, under a real systemd.
 *
 * These hosts' PID 1 is not systemd, so the test boots one: systemd as
 * PID 1 of a container (systemd-nspawn, the host's /usr and /etc read-only,
 * a private network), with its own system bus, machined and polkitd. The
 * daemon runs there as a transient service, with the Cloud Hypervisor
 * test VMM; the test talks to it from outside over the container's bus
 * and reads the container's /proc and cgroup files through its root.
 *
 * It checks that each VMM runs in microvmd-<id>.scope in machine.slice
 * with the quota of its millicores, its memory and task limits (in
 * systemd's properties and in the cgroup files), its parent outside;
 * that machinectl lists the machine as a vm led by its VMM; that a resize
 * changes the scope's quota; that a restarted daemon finds the scope and
 * reads its CPU time; and that Stop and Delete leave no scope or machine.
 * A [resources] cgroup-manager the host cannot honour stops the daemon
 * with the key named. */
#include "names.h"
#include "bus/bus-util.h"
#include "bus-client.h"

#include <fcntl.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <signal.h>
#include <stdarg.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#define MiB (G_GUINT64_CONSTANT (1) << 20)

/* The v1 hierarchies of these hosts, and the v2 one beside them; not
 * cpuset, whose new groups have no CPUs to run a task on until given. */
static const char *const hierarchies[] = { "cpu", "cpuacct", "memory", "pids", "blkio",
                                           "devices", "freezer", "systemd", "unified" };
/* Those that systemd writes limits to: nspawn gives a container of a
 * host without systemd read-only mounts of them. */
static const char *const limited[] = { "cpu", "cpuacct", "memory", "pids" };

typedef struct {
  char  *dir;             /* the test's own: state, runtime, config, logs */
  char  *group;           /* the container's group in each hierarchy */
  char  *policy_dir;      /* the bus policy the container's bus reads */
  GPid   nspawn;
  int    leader;          /* the container's PID 1, as the host sees it */
  char  *bus_address;
  guint  daemons;         /* transient services started so far */
  sd_bus *bus;
} Container;

static Container ct;

static char *
container_path (const char *path)
{
  return g_strdup_printf ("/proc/%d/root%s", ct.leader, path);
}

/* Runs @argv in the container's namespaces; its exit status. */
static int
container_run (const char *const *argv, char **out)
{
  g_autoptr (GPtrArray) full = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (GError) error = NULL;
  g_autofree char *err = NULL;
  int status = 0;

  g_ptr_array_add (full, g_strdup ("nsenter"));
  g_ptr_array_add (full, g_strdup ("-t"));
  g_ptr_array_add (full, g_strdup_printf ("%d", ct.leader));
  g_ptr_array_add (full, g_strdup ("-a"));
  /* The host's bus is no business of the container's commands. */
  g_ptr_array_add (full, g_strdup ("env"));
  g_ptr_array_add (full, g_strdup ("-u"));
  g_ptr_array_add (full, g_strdup ("DBUS_SYSTEM_BUS_ADDRESS"));
  for (guint i = 0; argv[i]; i++)
    g_ptr_array_add (full, g_strdup (argv[i]));
  g_ptr_array_add (full, NULL);
  if (!g_spawn_sync (NULL, (char **) full->pdata, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL, out,
                     &err, &status, &error))
    g_error ("nsenter: %s", error->message);
  if (err && *err)
    g_test_message ("%s: %s", argv[0], err);
  return WIFEXITED (status) ? WEXITSTATUS (status) : 128 + WTERMSIG (status);
}

static char *
container_output (const char *const *argv)
{
  char *out = NULL;
  int status = container_run (argv, &out);

  if (status != 0)
    g_error ("%s in the container exited with %d", argv[0], status);
  return g_strstrip (out);
}

/* systemctl show -p @property --value @unit */
static char *
unit_property (const char *unit, const char *property)
{
  const char *argv[] = { "systemctl", "show", "-p", property, "--value", unit, NULL };

  return container_output (argv);
}

static guint64
read_number (const char *path)
{
  g_autofree char *text = NULL;
  guint64 v = 0;

  if (!g_file_get_contents (path, &text, NULL, NULL))
    g_error ("could not read %s", path);
  g_assert_true (g_ascii_string_to_unsigned (g_strstrip (text), 10, 0, G_MAXUINT64, &v, NULL));
  return v;
}

/* The container's cgroup file @name of @unit in machine.slice of the
 * hierarchy of @controller. */
static char *
scope_file (const char *controller, const char *unit, const char *name)
{
  g_autofree char *inside = g_strdup_printf ("/sys/fs/cgroup/%s/machine.slice/%s/%s", controller,
                                             unit, name);

  return container_path (inside);
}

/* The group of the container's process @pid in @controller's hierarchy,
 * as the host sees it. */
static char *
group_of (int pid, const char *controller)
{
  g_autofree char *inside = g_strdup_printf ("/proc/%d/cgroup", pid);
  g_autofree char *path = container_path (inside);

  return cgroup_in_file (path, controller);
}

static int
parent_of (int pid)
{
  g_autofree char *inside = g_strdup_printf ("/proc/%d/stat", pid);
  g_autofree char *path = container_path (inside);

  return parent_in_stat_file (path);
}

/* Removes @dir and every group below it, deepest first. */
static void
remove_groups (const char *dir)
{
  g_autoptr (GDir) d = g_dir_open (dir, 0, NULL);
  const char *name;

  while (d && (name = g_dir_read_name (d)))
    {
      g_autofree char *path = g_build_filename (dir, name, NULL);

      if (g_file_test (path, G_FILE_TEST_IS_DIR) && !g_file_test (path, G_FILE_TEST_IS_SYMLINK))
        remove_groups (path);
    }
  g_rmdir (dir);
}

/* ---- the container ---- */

/* In nspawn's process before exec: into the container's groups, and
 * gone with the test, should it end without stopping the container. */
static void
join_groups (gpointer data)
{
  GArray *fds = data;

  prctl (PR_SET_PDEATHSIG, SIGTERM);

  for (guint i = 0; i < fds->len; i++)
    if (write (g_array_index (fds, int, i), "0", 1) != 1)
      _exit (126);
}

static void
copy_file (const char *from, const char *to)
{
  g_autofree char *text = NULL;
  gsize len = 0;

  g_assert_true (g_file_get_contents (from, &text, &len, NULL));
  g_assert_true (g_file_set_contents (to, text, (gssize) len, NULL));
}

/* The host's bus policy files and the project's, for the container's
 * bus, which reads /etc/dbus-1/system.d. */
static void
make_policy_dir (void)
{
  g_autoptr (GDir) dir = g_dir_open ("/etc/dbus-1/system.d", 0, NULL);
  g_autofree char *ours = g_build_filename (g_getenv ("MICROVMD_SOURCE_DIR"), "policy",
                                            "org.microvmd1.conf", NULL);
  g_autofree char *target = NULL;
  const char *name;

  ct.policy_dir = g_build_filename (ct.dir, "system.d", NULL);
  g_assert_cmpint (g_mkdir (ct.policy_dir, 0755), ==, 0);
  while (dir && (name = g_dir_read_name (dir)))
    {
      g_autofree char *from = g_build_filename ("/etc/dbus-1/system.d", name, NULL);
      g_autofree char *to = g_build_filename (ct.policy_dir, name, NULL);

      if (g_file_test (from, G_FILE_TEST_IS_REGULAR))
        copy_file (from, to);
    }
  target = g_build_filename (ct.policy_dir, "org.microvmd1.conf", NULL);
  copy_file (ours, target);
}

/* Waits until the container's systemd has booted (the default target
 * reached, whether or not a unit failed on the way). */
static gboolean
booted (void)
{
  const char *argv[] = { "systemctl", "is-system-running", "--wait", NULL };
  gint64 deadline = g_get_monotonic_time () + 60 * G_USEC_PER_SEC;

  while (g_get_monotonic_time () < deadline)
    {
      g_autofree char *out = NULL;

      /* Before its bus is up, systemctl cannot tell ("offline"). */
      container_run (argv, &out);
      g_strstrip (out);
      if (g_str_equal (out, "running") || g_str_equal (out, "degraded"))
        return TRUE;
      g_usleep (200000);
    }
  return FALSE;
}

/* The container's PID 1, once nspawn's child has become systemd. */
static void
find_leader (void)
{
  gint64 deadline = g_get_monotonic_time () + 30 * G_USEC_PER_SEC;

  while (g_get_monotonic_time () < deadline)
    {
      g_autofree char *path = g_strdup_printf ("/proc/%d/task/%d/children", ct.nspawn,
                                               ct.nspawn);
      g_autofree char *text = NULL;
      g_autofree char *comm_path = NULL;
      g_autofree char *comm = NULL;
      int pid;

      if (g_file_get_contents (path, &text, NULL, NULL) && *g_strstrip (text))
        {
          pid = (int) g_ascii_strtoll (text, NULL, 10);
          comm_path = g_strdup_printf ("/proc/%d/comm", pid);
          if (g_file_get_contents (comm_path, &comm, NULL, NULL) &&
              g_str_equal (g_strstrip (comm), "systemd"))
            {
              ct.leader = pid;
              return;
            }
        }
      g_usleep (50000);
    }
  g_error ("systemd-nspawn started no systemd within 30 s");
}

static void
container_start (void)
{
  const char *source = g_getenv ("MICROVMD_SOURCE_DIR");
  const char *build = g_getenv ("MICROVMD_BUILD_DIR");
  g_autoptr (GArray) fds = g_array_new (FALSE, FALSE, sizeof (int));
  g_autoptr (GError) error = NULL;
  g_autofree char *bind_dir = NULL, *bind_source = NULL, *bind_build = NULL;
  g_autofree char *bind_policy = NULL, *log = NULL, *socket = NULL;
  int log_fd;

  ct.dir = g_dir_make_tmp ("microvmd-systemd-XXXXXX", &error);
  g_assert_no_error (error);
  make_policy_dir ();

  /* The container's groups are the test's own, below which its systemd
   * makes its slices, and which go with the test. */
  ct.group = g_strdup_printf ("microvmd-test-systemd-%d", (int) getpid ());
  for (guint i = 0; i < G_N_ELEMENTS (hierarchies); i++)
    {
      g_autofree char *top = g_build_filename ("/sys/fs/cgroup", hierarchies[i], NULL);
      g_autoptr (GDir) d = g_dir_open (top, 0, NULL);
      const char *name;

      /* What a test that ended before its container left, if empty. */
      while (d && (name = g_dir_read_name (d)))
        if (g_str_has_prefix (name, "microvmd-test-systemd-"))
          {
            g_autofree char *stale = g_build_filename (top, name, NULL);
            remove_groups (stale);
          }
    }
  for (guint i = 0; i < G_N_ELEMENTS (hierarchies); i++)
    {
      g_autofree char *dir = g_build_filename ("/sys/fs/cgroup", hierarchies[i], ct.group, NULL);
      g_autofree char *procs = g_build_filename (dir, "cgroup.procs", NULL);
      int fd;

      if (g_mkdir (dir, 0755) < 0 || (fd = open (procs, O_WRONLY | O_CLOEXEC)) < 0)
        g_error ("could not make the container's group %s", dir);
      g_array_append_val (fds, fd);
    }

  bind_dir = g_strdup_printf ("--bind=%s", ct.dir);
  bind_source = g_strdup_printf ("--bind-ro=%s", source);
  bind_build = g_strdup_printf ("--bind-ro=%s", build);
  bind_policy = g_strdup_printf ("--bind-ro=%s:/etc/dbus-1/system.d", ct.policy_dir);
  {
    const char *argv[] = {
      "systemd-nspawn", "--quiet", "--directory=/", "--volatile=yes", "--bind-ro=/etc",
      bind_policy, bind_dir, bind_source, bind_build, "--register=no", "--keep-unit",
      "--private-network", "--console=pipe", "--boot", "--", "systemd.unit=basic.target", NULL
    };

    log = g_build_filename (ct.dir, "container.log", NULL);
    log_fd = open (log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    g_assert_cmpint (log_fd, >=, 0);
    if (!g_spawn_async_with_fds (NULL, (char **) argv, NULL,
                                 G_SPAWN_SEARCH_PATH | G_SPAWN_DO_NOT_REAP_CHILD, join_groups,
                                 fds, &ct.nspawn, -1, log_fd, log_fd, &error))
      g_error ("systemd-nspawn: %s", error->message);
    close (log_fd);
  }
  for (guint i = 0; i < fds->len; i++)
    close (g_array_index (fds, int, i));

  find_leader ();
  if (!booted ())
    g_error ("the container's systemd did not finish booting");
  /* A host's systemd writes the limits to its hierarchies; make them
   * writable to the container's, and have it look at them again. */
  for (guint i = 0; i < G_N_ELEMENTS (limited); i++)
    {
      g_autofree char *target = g_build_filename ("/sys/fs/cgroup", limited[i], NULL);
      const char *argv[] = { "mount", "-o", "remount,bind,rw", target, NULL };

      g_assert_cmpint (container_run (argv, NULL), ==, 0);
    }
  {
    const char *argv[] = { "systemctl", "daemon-reexec", NULL };

    g_assert_cmpint (container_run (argv, NULL), ==, 0);
  }
  g_assert_true (booted ());

  socket = container_path ("/run/dbus/system_bus_socket");
  ct.bus_address = g_strdup_printf ("unix:path=%s", socket);
}

static void
remove_tree (const char *path)
{
  const char *argv[] = { "rm", "-rf", path, NULL };

  g_spawn_sync (NULL, (char **) argv, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL, NULL, NULL, NULL,
                NULL);
}

static void
container_stop (void)
{
  gint64 deadline = g_get_monotonic_time () + 30 * G_USEC_PER_SEC;
  int status = 0;

  g_clear_pointer (&ct.bus, sd_bus_flush_close_unref);
  /* nspawn shuts the container's systemd down as a power-off would. */
  kill (ct.nspawn, SIGTERM);
  while (waitpid (ct.nspawn, &status, WNOHANG) == 0)
    {
      if (g_get_monotonic_time () >= deadline)
        {
          kill (ct.nspawn, SIGKILL);
          waitpid (ct.nspawn, &status, 0);
          break;
        }
      g_usleep (100000);
    }
  for (guint i = 0; i < G_N_ELEMENTS (hierarchies); i++)
    {
      g_autofree char *dir = g_build_filename ("/sys/fs/cgroup", hierarchies[i], ct.group, NULL);

      remove_groups (dir);
    }
  if (!g_getenv ("MICROVMD_TEST_KEEP"))
    remove_tree (ct.dir);
  g_free (ct.dir);
  g_free (ct.group);
  g_free (ct.policy_dir);
  g_free (ct.bus_address);
}

/* ---- the daemon in it ---- */

static char *
config_path (void)
{
  return g_build_filename (ct.dir, "microvmd.conf", NULL);
}

static void
write_config (void)
{
  g_autofree char *guests = g_build_filename (g_getenv ("MICROVMD_BUILD_DIR"), "tests", "guest",
                                              NULL);
  g_autofree char *share = g_build_filename (ct.dir, "share", NULL);
  g_autofree char *more = g_strdup_printf ("[resources]\ncgroup-manager=systemd\n"
                                           "vmm-memory-overhead-bytes=%" G_GUINT64_FORMAT "\n"
                                           "vmm-tasks-max=100\n"
                                           "vmm-cpu-overhead-percent=20\n"
                                           "[paths]\nallowed-directories=%s\n"
                                           "[storage]\nallowed-directories=%s\n",
                                           64 * MiB, guests, share);
  g_autofree char *text = guest_config ("cloud-hypervisor", more);
  g_autofree char *path = config_path ();

  g_assert_cmpint (g_mkdir_with_parents (share, 0755), ==, 0);
  g_assert_true (g_file_set_contents (path, text, -1, NULL));
}

static gboolean
name_owned (sd_bus *bus)
{
  sd_bus_error error = SD_BUS_ERROR_NULL;
  g_autoptr (sd_bus_message) reply = NULL;
  int r = sd_bus_call_method (bus, "org.freedesktop.DBus", "/org/freedesktop/DBus",
                              "org.freedesktop.DBus", "NameHasOwner", &error, &reply, "s",
                              MV_BUS_NAME);
  int owned = 0;

  sd_bus_error_free (&error);
  return r >= 0 && sd_bus_message_read (reply, "b", &owned) >= 0 && owned;
}

/* Starts the daemon as a transient service of the container's systemd,
 * as its own unit would run it, and connects the test's client. */
static char *
start_daemon (void)
{
  g_autofree char *unit = g_strdup_printf ("microvmd-test-%u.service", ++ct.daemons);
  g_autofree char *config = config_path ();
  g_autofree char *state = g_build_filename (ct.dir, "state", NULL);
  g_autofree char *runtime = g_build_filename (ct.dir, "run", NULL);
  g_autofree char *log = g_build_filename (ct.dir, "daemon.log", NULL);
  g_autofree char *output = g_strdup_printf ("StandardOutput=append:%s", log);
  g_autofree char *errors = g_strdup_printf ("StandardError=append:%s", log);
  g_autofree char *daemon = g_build_filename (g_getenv ("MICROVMD_BUILD_DIR"), "tests",
                                              "integration", "microvmd-test", NULL);
  g_autofree char *state_arg = g_strdup_printf ("--state-dir=%s", state);
  g_autofree char *runtime_arg = g_strdup_printf ("--runtime-dir=%s", runtime);
  g_autofree char *config_arg = g_strdup_printf ("--config=%s", config);
  gint64 deadline = g_get_monotonic_time () + 20 * G_USEC_PER_SEC;
  const char *argv[] = { "systemd-run", "--quiet", "--unit", unit, "-p", "KillMode=process",
                         "-p", output, "-p", errors, "-E", "G_DEBUG=fatal-criticals", daemon,
                         state_arg, runtime_arg, config_arg, NULL };

  g_mkdir_with_parents (state, 0700);
  g_mkdir_with_parents (runtime, 0700);
  g_assert_cmpint (container_run (argv, NULL), ==, 0);
  g_clear_pointer (&ct.bus, sd_bus_flush_close_unref);
  g_assert_cmpint (sd_bus_new (&ct.bus), >=, 0);
  g_assert_cmpint (sd_bus_set_address (ct.bus, ct.bus_address), >=, 0);
  g_assert_cmpint (sd_bus_set_bus_client (ct.bus, 1), >=, 0);
  g_assert_cmpint (sd_bus_start (ct.bus), >=, 0);
  while (!name_owned (ct.bus))
    {
      if (g_get_monotonic_time () >= deadline)
        {
          g_autofree char *text = NULL;
          g_file_get_contents (log, &text, NULL, NULL);
          g_error ("the daemon did not come up on the container's bus:\n%s", text);
        }
      g_usleep (50000);
    }
  return g_steal_pointer (&unit);
}

static void
kill_daemon (const char *unit)
{
  const char *argv[] = { "systemctl", "kill", "--signal=SIGKILL", unit, NULL };
  gint64 deadline = g_get_monotonic_time () + 20 * G_USEC_PER_SEC;

  g_assert_cmpint (container_run (argv, NULL), ==, 0);
  while (name_owned (ct.bus))
    {
      g_assert_cmpint (g_get_monotonic_time (), <, deadline);
      g_usleep (50000);
    }
}

static sd_bus_message *
callv (const char *path, const char *iface, const char *member, const char *types, va_list ap)
{
  sd_bus_error error = SD_BUS_ERROR_NULL;
  g_autoptr (sd_bus_message) m = NULL;
  sd_bus_message *reply = NULL;
  int r;

  g_assert_cmpint (sd_bus_message_new_method_call (ct.bus, &m, MV_BUS_NAME, path, iface, member),
                   >=, 0);
  if (types)
    g_assert_cmpint (sd_bus_message_appendv (m, types, ap), >=, 0);
  r = sd_bus_call (ct.bus, m, 60 * G_USEC_PER_SEC, &error, &reply);
  if (r < 0)
    g_error ("%s: %s: %s", member, error.name, error.message);
  return reply;
}

/* A call to the daemon that must succeed; its reply. */
static sd_bus_message *
call (const char *path, const char *iface, const char *member, const char *types, ...)
{
  sd_bus_message *reply;
  va_list ap;

  va_start (ap, types);
  reply = callv (path, iface, member, types, ap);
  va_end (ap);
  return reply;
}

/* A machine method that must succeed. */
static void
machine_call (const char *path, const char *member, const char *types, ...)
{
  va_list ap;

  va_start (ap, types);
  sd_bus_message_unref (callv (path, MV_MACHINE_IFACE, member, types, ap));
  va_end (ap);
}

/* Creates a machine from @spec (taken); its path. */
static char *
create (char *spec)
{
  g_autoptr (sd_bus_message) reply = call (MV_MANAGER_PATH, MV_MANAGER_IFACE, "CreateMachine",
                                           "st", spec, (guint64) 0);
  const char *path = NULL;

  g_free (spec);
  g_assert_cmpint (sd_bus_message_read (reply, "o", &path), >, 0);
  return g_strdup (path);
}

static char *
machine_id (const char *path)
{
  sd_bus_error error = SD_BUS_ERROR_NULL;
  char *id = NULL;

  g_assert_cmpint (sd_bus_get_property_string (ct.bus, MV_BUS_NAME, path, MV_MACHINE_IFACE, "Id",
                                               &error, &id), >=, 0);
  return id;
}

static int
vmm_pid (const char *id)
{
  g_autofree char *file = g_build_filename (ct.dir, "state", "machines", id, "status.json",
                                            NULL);
  g_autoptr (JsonParser) parser = json_parser_new ();
  JsonObject *root;

  g_assert_true (json_parser_load_from_file (parser, file, NULL));
  root = json_node_get_object (json_parser_get_root (parser));
  return (int) json_object_get_int_member (json_object_get_object_member (root, "vmm"), "pid");
}

static guint64
stats_cpu_ns (const char *path)
{
  g_autoptr (sd_bus_message) reply = call (path, MV_MACHINE_IFACE, "GetStats", NULL);

  return stats_reply_cpu_time_ns (reply);
}

static gboolean
unit_gone (const char *unit)
{
  g_autofree char *state = unit_property (unit, "ActiveState");

  return g_str_equal (state, "inactive") || g_str_equal (state, "");
}

static gboolean
machined_lists (const char *name)
{
  const char *argv[] = { "machinectl", "list", "--no-legend", "--no-pager", NULL };
  g_autofree char *out = container_output (argv);
  g_auto (GStrv) lines = g_strsplit (out, "\n", -1);

  for (char **line = lines; *line; line++)
    {
      g_auto (GStrv) fields = g_strsplit_set (g_strstrip (*line), " \t", -1);
      g_autoptr (GPtrArray) words = g_ptr_array_new ();

      for (char **f = fields; *f; f++)
        if (**f)
          g_ptr_array_add (words, *f);
      if (words->len >= 3 && g_str_equal (words->pdata[0], name))
        {
          g_assert_cmpstr (words->pdata[1], ==, "vm");
          g_assert_cmpstr (words->pdata[2], ==, "microvmd");
          return TRUE;
        }
    }
  return FALSE;
}

static void
test_scope (void)
{
  g_autofree char *build = g_strdup (g_getenv ("MICROVMD_BUILD_DIR"));
  g_autofree char *kernel = g_build_filename (build, "tests", "guest", "vmlinuz", NULL);
  g_autofree char *initrd = g_build_filename (build, "tests", "guest", "initrd.img", NULL);
  g_autofree char *spec = guest_spec_json ("cloud-hypervisor", "scoped", kernel, initrd,
                                           "\"cpu_millicores\":1500");
  g_autofree char *daemon = NULL, *path = NULL, *id = NULL, *unit = NULL;
  g_autofree char *pid_text = NULL;
  int pid;

  write_config ();
  daemon = start_daemon ();
  path = create (g_steal_pointer (&spec));
  id = machine_id (path);
  unit = g_strdup_printf ("microvmd-%s.scope", id);
  machine_call (path, "Start", NULL);

  /* The VMM runs in its scope, in machine.slice, which systemd holds to
   * the quota of 1500 millicores and a fifth more for the VMM's own
   * threads, the guest's 256 MiB and 64 MiB more, and 100 tasks. */
  pid = vmm_pid (id);
  pid_text = g_strdup_printf ("%d", pid);
  {
    g_autofree char *state = unit_property (unit, "ActiveState");
    g_autofree char *slice = unit_property (unit, "Slice");
    g_autofree char *quota = unit_property (unit, "CPUQuotaPerSecUSec");
    g_autofree char *memory = unit_property (unit, "MemoryMax");
    g_autofree char *tasks = unit_property (unit, "TasksMax");
    g_autofree char *expected_group = g_strdup_printf ("/machine.slice/%s", unit);
    g_autofree char *cpu_group = group_of (pid, "cpu");
    g_autofree char *tracked = group_of (pid, "name=systemd");
    g_autofree char *parent_group = group_of (parent_of (pid), "name=systemd");
    g_autofree char *period = scope_file ("cpu", unit, "cpu.cfs_period_us");
    g_autofree char *cfs_quota = scope_file ("cpu", unit, "cpu.cfs_quota_us");
    g_autofree char *limit = scope_file ("memory", unit, "memory.limit_in_bytes");
    g_autofree char *pids_max = scope_file ("pids", unit, "pids.max");

    g_assert_cmpstr (state, ==, "active");
    g_assert_cmpstr (slice, ==, "machine.slice");
    g_assert_cmpstr (quota, ==, "1.800000s");
    g_assert_cmpuint (g_ascii_strtoull (memory, NULL, 10), ==, 320 * MiB);
    g_assert_cmpstr (tasks, ==, "100");
    /* Seen from the host, below the container's own group. */
    g_test_message ("VMM %d: cpu:%s name=systemd:%s; its parent: %s", pid, cpu_group, tracked,
                    parent_group);
    g_assert_true (g_str_has_suffix (cpu_group, expected_group));
    g_assert_true (g_str_has_suffix (tracked, expected_group));
    /* Its parent only reaps it: not the guest's load. */
    g_assert_false (g_str_has_suffix (parent_group, expected_group));
    g_assert_cmpuint (read_number (period), ==, 100000);
    g_assert_cmpuint (read_number (cfs_quota), ==, 180000);
    g_assert_cmpuint (read_number (limit), ==, 320 * MiB);
    g_assert_cmpuint (read_number (pids_max), ==, 100);
  }

  /* machined knows it as a vm led by its VMM, in that scope. */
  g_assert_true (machined_lists ("scoped"));
  {
    const char *leader_argv[] = { "machinectl", "show", "scoped", "-p", "Leader", "--value",
                                  NULL };
    const char *unit_argv[] = { "machinectl", "show", "scoped", "-p", "Unit", "--value", NULL };
    g_autofree char *leader = container_output (leader_argv);
    g_autofree char *machine_unit = container_output (unit_argv);

    g_assert_cmpstr (leader, ==, pid_text);
    g_assert_cmpstr (machine_unit, ==, unit);
  }

  /* The stats read the scope's own count: v2's, beside the v1
   * hierarchies, where systemd keeps cpuacct to itself. */
  {
    g_autofree char *stat = scope_file ("unified", unit, "cpu.stat");
    g_autofree char *text = NULL;
    /* Read before the file: the guest runs on between the two reads. */
    guint64 stats_ns = stats_cpu_ns (path), usage_ns;

    g_assert_cmpuint (stats_ns, >, 0);
    g_assert_true (g_file_get_contents (stat, &text, NULL, NULL));
    g_assert_true (g_str_has_prefix (text, "usage_usec "));
    usage_ns = g_ascii_strtoull (text + strlen ("usage_usec "), NULL, 10) * 1000;
    g_assert_cmpuint (stats_ns, <=, usage_ns);
  }

  /* Resized to one vCPU: systemd is told, and holds it to one CPU and a
   * fifth. */
  machine_call (path, "Resize", "ut", 1, 256 * MiB);
  {
    g_autofree char *quota = unit_property (unit, "CPUQuotaPerSecUSec");
    g_autofree char *cfs_quota = scope_file ("cpu", unit, "cpu.cfs_quota_us");

    g_assert_cmpstr (quota, ==, "1.200000s");
    g_assert_cmpuint (read_number (cfs_quota), ==, 120000);
  }

  /* A daemon that was killed adopts the VMM, still in its scope. */
  kill_daemon (daemon);
  {
    g_autofree char *state = unit_property (unit, "ActiveState");

    g_assert_cmpstr (state, ==, "active");
  }
  g_free (daemon);
  daemon = start_daemon ();
  {
    gint64 deadline = g_get_monotonic_time () + 20 * G_USEC_PER_SEC;
    g_autofree char *state = NULL;

    for (;;)
      {
        sd_bus_error error = SD_BUS_ERROR_NULL;

        g_clear_pointer (&state, g_free);
        if (sd_bus_get_property_string (ct.bus, MV_BUS_NAME, path, MV_MACHINE_IFACE, "State",
                                        &error, &state) >= 0 &&
            g_str_equal (state, "Running"))
          break;
        sd_bus_error_free (&error);
        g_assert_cmpint (g_get_monotonic_time (), <, deadline);
        g_usleep (100000);
      }
  }
  g_assert_cmpint (vmm_pid (id), ==, pid);
  g_assert_cmpuint (stats_cpu_ns (path), >, 0);

  /* Stop ends the scope, and machined forgets the machine. */
  machine_call (path, "Stop", NULL);
  g_assert_true (unit_gone (unit));
  g_assert_false (machined_lists ("scoped"));

  /* Started again and deleted while running: no scope is left. */
  machine_call (path, "Start", NULL);
  g_assert_true (machined_lists ("scoped"));
  g_assert_cmpint (vmm_pid (id), !=, pid);
  machine_call (path, "Delete", "b", 1);
  g_assert_true (unit_gone (unit));
  g_assert_false (machined_lists ("scoped"));

  /* A machine with a shared directory: its virtiofsd starts the scope,
   * and the VMM joins it there. */
  {
    g_autofree char *rootfs = g_build_filename (build, "tests", "guest", "rootfs.ext4", NULL);
    g_autofree char *share = g_build_filename (ct.dir, "share", NULL);
    g_autofree char *sharer = NULL, *sharer_id = NULL, *sharer_unit = NULL;
    g_autofree char *procs = NULL, *text = NULL;
    g_auto (GStrv) pids = NULL;
    guint virtiofsd = 0;
    gboolean has_vmm = FALSE;
    int sharer_vmm;

    sharer = create (g_strdup_printf ("{\"name\":\"sharer\",\"hypervisor_type\":"
                                      "\"cloud-hypervisor\",\"memory_bytes\":268435456,"
                                      "\"kernel\":\"%s\",\"initrd\":\"%s\","
                                      "\"disks\":[{\"path\":\"%s\",\"read_only\":true,"
                                      "\"root\":true}],\"mounts\":[{\"type\":\"directory\","
                                      "\"source\":\"%s\",\"target\":\"/share\"}]}",
                                      kernel, initrd, rootfs, share));
    sharer_id = machine_id (sharer);
    sharer_unit = g_strdup_printf ("microvmd-%s.scope", sharer_id);
    machine_call (sharer, "Start", NULL);
    sharer_vmm = vmm_pid (sharer_id);
    /* Read in the container, for its PIDs. */
    procs = g_strdup_printf ("/sys/fs/cgroup/systemd/machine.slice/%s/cgroup.procs",
                             sharer_unit);
    text = container_output ((const char *[]) { "cat", procs, NULL });
    pids = g_strsplit (text, "\n", -1);
    for (char **p = pids; *p; p++)
      {
        int member = (int) g_ascii_strtoll (*p, NULL, 10);
        g_autofree char *inside = g_strdup_printf ("/proc/%d/comm", member);
        g_autofree char *comm_path = container_path (inside);
        g_autofree char *comm = NULL;

        has_vmm |= member == sharer_vmm;
        if (g_file_get_contents (comm_path, &comm, NULL, NULL) &&
            g_str_has_prefix (comm, "virtiofsd"))
          virtiofsd++;
      }
    g_assert_true (has_vmm);
    g_assert_cmpuint (virtiofsd, >=, 1);
    machine_call (sharer, "Delete", "b", 1);
    g_assert_true (unit_gone (sharer_unit));
  }
  kill_daemon (daemon);
}

/* cgroup-manager values this host cannot honour stop the daemon at start,
 * naming the key. */
static void
test_bad_manager (void)
{
  const char *values[] = { "systemd", "upstart" };
  g_autofree char *daemon = g_build_filename (g_getenv ("MICROVMD_BUILD_DIR"), "tests",
                                              "integration", "microvmd-test", NULL);
  g_autoptr (GError) error = NULL;
  g_autofree char *dir = g_dir_make_tmp ("microvmd-manager-XXXXXX", &error);

  g_assert_no_error (error);
  for (guint i = 0; i < G_N_ELEMENTS (values); i++)
    {
      g_autofree char *config = g_build_filename (dir, "microvmd.conf", NULL);
      g_autofree char *text = g_strdup_printf ("[resources]\ncgroup-manager=%s\n", values[i]);
      g_autofree char *state = g_build_filename (dir, "state", NULL);
      g_autofree char *runtime = g_build_filename (dir, "run", NULL);
      g_autofree char *config_arg = g_strdup_printf ("--config=%s", config);
      g_autofree char *state_arg = g_strdup_printf ("--state-dir=%s", state);
      g_autofree char *runtime_arg = g_strdup_printf ("--runtime-dir=%s", runtime);
      /* A bus nobody serves: the configuration is read before it. */
      const char *argv[] = { daemon, config_arg, state_arg, runtime_arg,
                             "--bus=unix:path=/nonexistent/bus", NULL };
      g_autofree char *out = NULL, *err = NULL;
      int status = 0;

      g_assert_true (g_file_set_contents (config, text, -1, NULL));
      g_assert_true (g_spawn_sync (NULL, (char **) argv, NULL, 0, NULL, NULL, &out, &err,
                                   &status, NULL));
      g_test_message ("%s", err);
      g_assert_false (WIFEXITED (status) && WEXITSTATUS (status) == 0);
      g_assert_nonnull (strstr (err, "[resources] cgroup-manager"));
    }
  remove_tree (dir);
}

int
main (int argc, char **argv)
{
  int status;

  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/systemd/bad-cgroup-manager", test_bad_manager);
  g_test_add_func ("/systemd/cloud-hypervisor/scope-machined-resize-recover", test_scope);
  container_start ();
  status = g_test_run ();
  container_stop ();
  return status;
}
