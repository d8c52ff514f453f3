/* What the rows share: the daemon under test, calls, /proc figures. */
#include "bench.h"

#include "names.h"

#include <errno.h>
#include <json-glib/json-glib.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <glib/gstdio.h>

gint64
bench_now (void)
{
  return g_get_monotonic_time ();
}

gint64
bench_wall (void)
{
  return g_get_real_time ();
}

void
bench_fail (Bench *bench, const char *format, ...)
{
  va_list args;
  g_autofree char *message = NULL;

  va_start (args, format);
  message = g_strdup_vprintf (format, args);
  va_end (args);
  g_printerr ("microvmd-bench: %s\n", message);
  if (bench->daemon_pid)
    {
      g_autofree char *log = mv_test_env_read_daemon_log (bench->env);
      g_autofree char *tail = g_strdup (strlen (log) > 4000 ? log + strlen (log) - 4000 : log);
      g_printerr ("----- daemon log (end) -----\n%s\n-----\n", tail);
      kill (bench->daemon_pid, SIGKILL);
    }
  if (bench->echo_pid)
    kill (bench->echo_pid, SIGKILL);
  /* What was measured before the failure is still worth keeping. */
  if (bench->report && bench->outdir)
    {
      bench_report_add_not_measured (bench->report, "0", "aborted", "the run was aborted", message);
      bench_report_write (bench->report, bench->outdir, NULL);
    }
  exit (1);
}

sd_bus *
bench_open_bus (Bench *bench)
{
  sd_bus *bus = NULL;
  int r = sd_bus_new (&bus);

  if (r >= 0)
    r = sd_bus_set_address (bus, mv_test_env_bus_address (bench->env));
  if (r >= 0)
    r = sd_bus_set_bus_client (bus, 1);
  if (r >= 0)
    r = sd_bus_start (bus);
  if (r < 0)
    bench_fail (bench, "cannot connect to the private bus: %s", g_strerror (-r));
  return bus;
}

static void
die_with_parent (gpointer user_data)
{
  prctl (PR_SET_PDEATHSIG, SIGKILL);
}

/* Waits for NameOwnerChanged giving @name an owner (or losing it); returns
 * the monotonic time it was seen. */
/* Returns -1 if @watch exited first. */
static gint64
wait_name (Bench *bench, sd_bus *bus, const char *name, gboolean owned, GPid watch,
           guint timeout_s)
{
  gint64 deadline = bench_now () + timeout_s * G_USEC_PER_SEC;

  for (;;)
    {
      g_autoptr (sd_bus_message) reply = NULL;
      sd_bus_error error = SD_BUS_ERROR_NULL;
      int has = 0;

      /* A NameHasOwner round trip is about 0.1 ms: polling every 1 ms
       * resolves start times well below the figures measured. */
      if (sd_bus_call_method (bus, "org.freedesktop.DBus", "/org/freedesktop/DBus",
                              "org.freedesktop.DBus", "NameHasOwner", &error, &reply, "s",
                              name) >= 0)
        sd_bus_message_read (reply, "b", &has);
      sd_bus_error_free (&error);
      if (!!has == !!owned)
        return bench_now ();
      if (watch && waitpid (watch, NULL, WNOHANG) == watch)
        return -1;
      if (bench_now () > deadline)
        bench_fail (bench, "%s %s within %u s", name, owned ? "was not owned" : "stayed owned",
                    timeout_s);
      g_usleep (1000);
    }
}

gboolean
bench_daemon_try_start (Bench *bench, double *us)
{
  g_autofree char *bus_arg = g_strconcat ("--bus=", mv_test_env_bus_address (bench->env), NULL);
  g_autofree char *state_arg = g_strconcat ("--state-dir=", mv_test_env_state_dir (bench->env), NULL);
  g_autofree char *run_arg = g_strconcat ("--runtime-dir=", mv_test_env_runtime_dir (bench->env), NULL);
  g_autofree char *config_arg = g_strconcat ("--config=", mv_test_env_config_path (bench->env), NULL);
  /* ip netns exec enters the namespace and execs: the daemon keeps its PID. */
  const char *argv[] = { "ip", "netns", "exec", bench->daemon_netns, bench->daemon_path, bus_arg,
                         state_arg, run_arg, config_arg, NULL };
  const char *const *command = bench->daemon_netns ? argv : argv + 4;
  g_autoptr (GError) error = NULL;
  int log_fd;
  gint64 t0, t1;

  g_assert (bench->daemon_pid == 0);
  log_fd = open (mv_test_env_daemon_log_path (bench->env), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  t0 = bench_now ();
  if (!g_spawn_async_with_pipes_and_fds (NULL, command, NULL,
                                         G_SPAWN_DO_NOT_REAP_CHILD | G_SPAWN_SEARCH_PATH,
                                         die_with_parent, NULL, -1, log_fd, log_fd, NULL, NULL, 0,
                                         &bench->daemon_pid, NULL, NULL, NULL, &error))
    bench_fail (bench, "cannot start %s: %s", bench->daemon_path, error->message);
  close (log_fd);
  t1 = wait_name (bench, bench->bus, MV_BUS_NAME, TRUE, bench->daemon_pid, 240);
  if (t1 < 0)
    {
      bench->daemon_pid = 0;
      return FALSE;
    }
  *us = (double) (t1 - t0);
  return TRUE;
}

double
bench_daemon_start (Bench *bench)
{
  double us = 0;

  if (!bench_daemon_try_start (bench, &us))
    bench_fail (bench, "the daemon exited before it owned %s", MV_BUS_NAME);
  return us;
}

char *
bench_daemon_last_log_line (Bench *bench)
{
  g_autofree char *log = mv_test_env_read_daemon_log (bench->env);
  g_auto (GStrv) lines = g_strsplit (g_strstrip (log), "\n", -1);
  guint n = g_strv_length (lines);

  return g_strdup (n ? lines[n - 1] : "");
}

void
bench_daemon_stop (Bench *bench)
{
  int status = 0;

  if (!bench->daemon_pid)
    return;
  kill (bench->daemon_pid, SIGTERM);
  while (waitpid (bench->daemon_pid, &status, 0) < 0 && errno == EINTR)
    ;
  bench->daemon_pid = 0;
  wait_name (bench, bench->bus, MV_BUS_NAME, FALSE, 0, 30);
  if (!WIFEXITED (status) || WEXITSTATUS (status) != 0)
    bench_fail (bench, "the daemon did not exit cleanly after SIGTERM (status 0x%x)", status);
}

static void
remove_tree (const char *path)
{
  g_autoptr (GDir) dir = g_dir_open (path, 0, NULL);
  const char *name;

  while (dir && (name = g_dir_read_name (dir)))
    {
      g_autofree char *child = g_build_filename (path, name, NULL);
      if (g_file_test (child, G_FILE_TEST_IS_DIR) && !g_file_test (child, G_FILE_TEST_IS_SYMLINK))
        remove_tree (child);
      else
        g_unlink (child);
    }
  g_rmdir (path);
}

void
bench_clear_state (Bench *bench)
{
  g_autofree char *machines = g_build_filename (mv_test_env_state_dir (bench->env), MV_MACHINES_DIR, NULL);
  g_autofree char *run_machines = g_build_filename (mv_test_env_runtime_dir (bench->env), MV_MACHINES_DIR, NULL);
  g_autofree char *snapshots = g_build_filename (mv_test_env_state_dir (bench->env), MV_SNAPSHOTS_DIR, NULL);

  g_assert (bench->daemon_pid == 0);
  remove_tree (machines);
  remove_tree (run_machines);
  remove_tree (snapshots);
}

sd_bus_message *
bench_call (Bench *bench, sd_bus *bus, const char *dest, const char *path, const char *iface,
            const char *member, const char *types, ...)
{
  g_autoptr (sd_bus_message) m = NULL;
  sd_bus_message *reply = NULL;
  sd_bus_error error = SD_BUS_ERROR_NULL;
  va_list args;
  int r;

  r = sd_bus_message_new_method_call (bus, &m, dest, path, iface, member);
  if (r >= 0 && types)
    {
      va_start (args, types);
      r = sd_bus_message_appendv (m, types, args);
      va_end (args);
    }
  if (r >= 0)
    r = sd_bus_call (bus, m, BENCH_CALL_TIMEOUT_US, &error, &reply);
  if (r < 0)
    bench_fail (bench, "%s.%s on %s failed: %s", iface, member, path,
                error.message ? error.message : g_strerror (-r));
  return reply;
}

char *
bench_create_machine (Bench *bench, sd_bus *bus, const char *extra_json, gboolean start)
{
  g_autofree char *spec = g_strdup_printf ("{\"name\":\"bench-m%05u\",\"hypervisor_type\":\"test\","
                                           "\"kernel\":\"/boot/vmlinuz\",\"labels\":{\"role\":\"bench\"}%s%s}",
                                           ++bench->machine_seq, extra_json ? "," : "",
                                           extra_json ? extra_json : "");
  g_autoptr (sd_bus_message) reply = bench_call (bench, bus, MV_BUS_NAME, MV_MANAGER_PATH,
                                                 MV_MANAGER_IFACE, "CreateMachine", "st", spec,
                                                 (uint64_t) (start ? MV_CREATE_START : 0));
  const char *path = NULL;

  if (sd_bus_message_read (reply, "o", &path) < 0)
    bench_fail (bench, "CreateMachine returned no path");
  return g_strdup (path);
}

char *
bench_get_string (Bench *bench, sd_bus *bus, const char *dest, const char *path,
                  const char *iface, const char *prop)
{
  char *value = NULL;
  sd_bus_error error = SD_BUS_ERROR_NULL;
  int r = sd_bus_get_property_string (bus, dest, path, iface, prop, &error, &value);

  if (r < 0)
    bench_fail (bench, "cannot read %s of %s: %s", prop, path,
                error.message ? error.message : g_strerror (-r));
  return value;
}

/* The VMM's PID, from the status record the daemon wrote. */
GPid
bench_vmm_pid (Bench *bench, const char *id)
{
  g_autofree char *path = g_build_filename (mv_test_env_state_dir (bench->env), MV_MACHINES_DIR,
                                            id, MV_STATUS_RECORD, NULL);
  g_autoptr (JsonParser) parser = json_parser_new ();
  g_autoptr (GError) error = NULL;
  JsonObject *status, *vmm;

  if (!json_parser_load_from_file (parser, path, &error))
    bench_fail (bench, "cannot read %s: %s", path, error->message);
  status = json_node_get_object (json_parser_get_root (parser));
  vmm = json_object_get_object_member (status, "vmm");
  if (!vmm || !json_object_has_member (vmm, "pid"))
    bench_fail (bench, "%s names no VMM PID", path);
  return (GPid) json_object_get_int_member (vmm, "pid");
}

/* The sum of the numbers after each of @keys (NULL-terminated, each a
 * line's start) in /proc/@pid/@file; -1 if one is missing. */
static double
proc_numbers (GPid pid, const char *file, const char *const *keys)
{
  g_autofree char *path = g_strdup_printf ("/proc/%d/%s", pid, file);
  g_autofree char *text = NULL;
  double sum = 0;

  if (!g_file_get_contents (path, &text, NULL, NULL))
    return -1;
  for (; *keys; keys++)
    {
      g_autofree char *line = g_strconcat ("\n", *keys, NULL);
      const char *p = strstr (text, line);

      if (!p)
        return -1;
      sum += g_ascii_strtod (p + strlen (line), NULL);
    }
  return sum;
}

double
bench_proc_private_kib (GPid pid)
{
  const char *const keys[] = { "Private_Clean:", "Private_Dirty:", NULL };

  return proc_numbers (pid, "smaps_rollup", keys);
}

GPid
bench_proc_parent (GPid pid)
{
  const char *const keys[] = { "PPid:", NULL };

  return (GPid) proc_numbers (pid, "status", keys);
}

double
bench_proc_rss_kib (GPid pid)
{
  const char *const keys[] = { "VmRSS:", NULL };

  return proc_numbers (pid, "status", keys);
}

double
bench_proc_cpu_seconds (GPid pid)
{
  g_autofree char *path = g_strdup_printf ("/proc/%d/stat", pid);
  g_autofree char *text = NULL;
  g_auto (GStrv) fields = NULL;
  const char *after;

  if (!g_file_get_contents (path, &text, NULL, NULL) || !(after = strrchr (text, ')')))
    return -1;
  /* Fields after the command: state is 3rd overall; utime 14th, stime 15th. */
  fields = g_strsplit (after + 2, " ", -1);
  if (g_strv_length (fields) < 13)
    return -1;
  return (g_ascii_strtod (fields[11], NULL) + g_ascii_strtod (fields[12], NULL)) /
         (double) sysconf (_SC_CLK_TCK);
}

double
bench_machine_busy_seconds (void)
{
  g_autofree char *text = NULL;
  g_auto (GStrv) fields = NULL;
  double ticks[8] = { 0 };

  /* "cpu  user nice system idle iowait irq softirq steal ..." */
  if (g_file_get_contents ("/proc/stat", &text, NULL, NULL) && g_str_has_prefix (text, "cpu "))
    {
      char *end = strchr (text, '\n');

      if (end)
        *end = '\0';
      fields = g_strsplit_set (text + 4, " ", -1);
      for (guint i = 0, n = 0; fields[i] && n < G_N_ELEMENTS (ticks); i++)
        if (*fields[i])
          ticks[n++] = g_ascii_strtod (fields[i], NULL);
    }
  return (ticks[0] + ticks[1] + ticks[2] + ticks[5] + ticks[6] + ticks[7]) / (double) sysconf (_SC_CLK_TCK);
}

GHashTable *
bench_threads_cpu_us (GPid pid)
{
  g_autofree char *tasks = g_strdup_printf ("/proc/%d/task", pid);
  g_autoptr (GDir) dir = g_dir_open (tasks, 0, NULL);
  GHashTable *cpu = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  const char *name;

  while (dir && (name = g_dir_read_name (dir)))
    {
      g_autofree char *path = g_build_filename (tasks, name, "schedstat", NULL);
      g_autofree char *text = NULL;

      /* "time on CPU (ns) time waiting to run (ns) time slices" */
      if (g_file_get_contents (path, &text, NULL, NULL))
        g_hash_table_insert (cpu, g_strdup (name), g_memdup2 (&(double) { g_ascii_strtod (text, NULL) / 1000 },
                                                              sizeof (double)));
    }
  return cpu;
}

double
bench_threads_cpu_us_since (GPid pid, GHashTable *before)
{
  g_autoptr (GHashTable) now = bench_threads_cpu_us (pid);
  GHashTableIter iter;
  gpointer tid, us;
  double sum = 0;

  g_hash_table_iter_init (&iter, now);
  while (g_hash_table_iter_next (&iter, &tid, &us))
    {
      const double *then = g_hash_table_lookup (before, tid);

      sum += *(const double *) us - (then ? *then : 0);
    }
  return sum;
}

void
bench_pin_process (GPid pid, int cpu)
{
  g_autofree char *tasks = g_strdup_printf ("/proc/%d/task", pid);
  g_autoptr (GDir) dir = g_dir_open (tasks, 0, NULL);
  const char *name;
  cpu_set_t set;

  CPU_ZERO (&set);
  for (int i = 0; i < CPU_SETSIZE; i++)
    if (cpu < 0 ? i < (int) g_get_num_processors () : i == cpu)
      CPU_SET (i, &set);
  while (dir && (name = g_dir_read_name (dir)))
    sched_setaffinity ((pid_t) g_ascii_strtoll (name, NULL, 10), sizeof set, &set);
}

/* GetManagedObjects; µs. *@machines: how many machines it listed, if
 * not NULL (counted outside the time). */
double
bench_timed_managed_objects (Bench *bench, guint *machines)
{
  gint64 t0 = bench_now ();
  g_autoptr (sd_bus_message) reply = bench_call (bench, bench->bus, MV_BUS_NAME, MV_MANAGER_PATH,
                                                 "org.freedesktop.DBus.ObjectManager",
                                                 "GetManagedObjects", NULL);
  double us = (double) (bench_now () - t0);
  const char *path;

  if (!machines)
    return us;
  *machines = 0;
  if (sd_bus_message_enter_container (reply, 'a', "{oa{sa{sv}}}") < 0)
    bench_fail (bench, "GetManagedObjects: unexpected reply");
  while (sd_bus_message_enter_container (reply, 'e', "oa{sa{sv}}") > 0)
    {
      if (sd_bus_message_read (reply, "o", &path) < 0 ||
          sd_bus_message_skip (reply, "a{sa{sv}}") < 0 ||
          sd_bus_message_exit_container (reply) < 0)
        bench_fail (bench, "GetManagedObjects: unexpected reply");
      *machines += g_str_has_prefix (path, MV_MACHINE_PREFIX "/");
    }
  return us;
}

void
bench_stand_in_guest (Bench *bench, char **kernel, char **initrd)
{
  const char *dir = mv_test_env_images_dir (bench->env);

  *kernel = g_build_filename (dir, "bench-vmlinuz", NULL);
  *initrd = g_build_filename (dir, "bench-initrd", NULL);
  if (!g_file_set_contents (*kernel, "kernel", -1, NULL) ||
      !g_file_set_contents (*initrd, "initrd", -1, NULL))
    bench_fail (bench, "cannot write %s", *kernel);
}
