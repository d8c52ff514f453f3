/* Guests through the daemon, one suite for every hypervisor type: QEMU
 * under TCG booting the project's test guest (tests/guest), and the test
 * VMMs that stand in for Cloud Hypervisor and Firecracker (tests/vmm),
 * whose simulated guest prints the same markers. Driven over the private
 * system bus like any client would. Covers the lifecycle, the console,
 * standby and restore, guests that end by themselves or crash, adoption
 * after a daemon crash, restart policies, sleepy guests, and a crash of the
 * daemon in the middle of each host operation on a real VMM process. */
#include "bus-client.h"
#include "names.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <unistd.h>

static char *guest_kernel;
static char *guest_initrd;

/* One hypervisor type, and the daemon configuration that runs it. */
typedef struct {
  const char *type;
  char       *config;
} GuestCase;

static const char lifecycle_config[] =
  "[lifecycle]\n"
  "boot-timeout-seconds=20\n"
  "stop-timeout-seconds=20\n"
  "standby-min-seconds=1\n"
  "idle-sample-seconds=1\n"
  "idle-cpu-percent=60\n"
  "restart-backoff-ms=500\n"
  "resync-seconds=1\n";

static void
guest_fixture_teardown (Fixture *f, gconstpointer data)
{
  /* No guest outlives its test. */
  client_delete_all (f->client);
  fixture_teardown (f, data);
}

/* A spec for the test guest; @extra is more JSON members. */
static char *
guest_spec (const GuestCase *c, const char *name, const char *extra)
{
  return guest_spec_json (c->type, name, guest_kernel, guest_initrd, extra);
}

static void
guest_fixture_setup (Fixture *f, gconstpointer data)
{
  const GuestCase *c = data;
  fixture_setup (f, c->config);
}

static char *
create (Fixture *f, gconstpointer data, const char *name, const char *extra)
{
  g_autofree char *spec = guest_spec (data, name, extra);
  return client_create_ok (f->client, spec);
}

static char *
get_state (Fixture *f, const char *path)
{
  return client_get_string (f->client, path, "State");
}

/* The last counter the guest printed, -1 if none yet. */
static gint64
last_counter (Fixture *f, const char *path)
{
  g_autofree char *text = console_text (f, path);
  const char *p = text, *hit = NULL;

  while ((p = strstr (p, "MICROVMD-COUNTER ")))
    hit = p++;
  return hit ? g_ascii_strtoll (hit + strlen ("MICROVMD-COUNTER "), NULL, 10) : -1;
}

static gint64
wait_counter_at_least (Fixture *f, const char *path, gint64 n, guint timeout_ms)
{
  gint64 c = -1;

  for (guint waited = 0; waited < timeout_ms; waited += 200)
    {
      c = last_counter (f, path);
      if (c >= n)
        return c;
      client_settle (f->client, 200);
    }
  g_error ("the guest's counter did not reach %" G_GINT64_FORMAT " (it is %" G_GINT64_FORMAT ")",
           n, c);
}

/* The VMM's PID as status.json records it; 0 if none. */
static int
vmm_pid (Fixture *f, const char *path)
{
  g_autofree char *id = client_get_string (f->client, path, "Id");
  g_autofree char *file = g_build_filename (mv_test_env_state_dir (f->env), "machines", id,
                                            "status.json", NULL);
  g_autoptr (JsonParser) parser = json_parser_new ();
  JsonObject *root, *vmm;

  if (!json_parser_load_from_file (parser, file, NULL))
    return 0;
  root = json_node_get_object (json_parser_get_root (parser));
  if (!json_object_has_member (root, "vmm") || json_object_get_null_member (root, "vmm"))
    return 0;
  vmm = json_object_get_object_member (root, "vmm");
  return json_object_has_member (vmm, "pid") ? (int) json_object_get_int_member (vmm, "pid") : 0;
}

/* The number of QEMU processes serving this machine. */
static guint
vmm_count (Fixture *f, const char *path)
{
  g_autofree char *id = client_get_string (f->client, path, "Id");
  g_autofree char *dir = g_build_filename (mv_test_env_runtime_dir (f->env), "machines", id, NULL);
  return count_processes_with (dir);
}

/* Whether @pid runs; a zombie that nobody reaped has ended. */
static gboolean
pid_alive (int pid)
{
  g_autofree char *file = g_strdup_printf ("/proc/%d/stat", pid);
  g_autofree char *stat = NULL;
  const char *end;

  if (pid <= 0 || !g_file_get_contents (file, &stat, NULL, NULL) ||
      !(end = strrchr (stat, ')')))
    return FALSE;
  return end[1] == ' ' && end[2] != 'Z' && end[2] != 'X';
}

/* No socket is left in @dir (which may not exist). */
static void
assert_no_sockets (const char *dir)
{
  g_autoptr (GDir) d = g_dir_open (dir, 0, NULL);
  const char *name;

  while (d && (name = g_dir_read_name (d)))
    {
      g_autofree char *file = g_build_filename (dir, name, NULL);
      GStatBuf st;
      if (g_lstat (file, &st) == 0 && S_ISSOCK (st.st_mode))
        g_error ("a socket was left behind: %s", file);
    }
}

/* ----- lifecycle ----- */

static void
test_boot_console_pause_resume (Fixture *f, gconstpointer data)
{
  g_autofree char *path = create (f, data, "first", NULL);
  g_autofree char *state = NULL, *log = NULL;
  gint64 before, after;

  client_call_ok (f->client, path, "Start");
  state = get_state (f, path);
  g_assert_cmpstr (state, ==, "Running");
  g_assert_cmpuint (vmm_count (f, path), ==, 1);

  /* The console log, on disk and through the API. */
  g_autofree char *text = console_text (f, path);
  g_assert_nonnull (strstr (text, "MICROVMD-GUEST-READY"));
  g_autoptr (sd_bus_message) r = client_call (f->client, path, MV_MACHINE_IFACE, "GetConsoleLog",
                                              NULL, NULL, "u", 20);
  const char *tail = NULL;
  g_assert_nonnull (r);
  g_assert_cmpint (sd_bus_message_read (r, "s", &tail), >, 0);
  g_assert_nonnull (strstr (tail, "MICROVMD-"));

  /* Paused, the guest prints nothing; resumed, it goes on. */
  wait_counter_at_least (f, path, 1, 30000);
  client_call_ok (f->client, path, "Pause");
  g_free (state);
  state = get_state (f, path);
  g_assert_cmpstr (state, ==, "Paused");
  before = last_counter (f, path);
  client_settle (f->client, 3000);
  g_assert_cmpint (last_counter (f, path), ==, before);
  client_call_ok (f->client, path, "Resume");
  after = wait_counter_at_least (f, path, before + 1, 30000);
  g_assert_cmpint (after, >, before);

  /* Stop asks the guest to power off, and it does. */
  int pid = vmm_pid (f, path);
  g_assert_true (pid_alive (pid));
  client_call_ok (f->client, path, "Stop");
  g_free (state);
  state = get_state (f, path);
  g_assert_cmpstr (state, ==, "Stopped");
  g_free (text);
  text = console_text (f, path);
  /* Firecracker has no power button: it sends Ctrl-Alt-Del, on which the
   * guest restarts, which ends Firecracker. */
  if (g_str_equal (((const GuestCase *) data)->type, "firecracker"))
    g_assert_nonnull (strstr (text, "ctrl-alt-del"));
  else
    g_assert_nonnull (strstr (text, "MICROVMD-POWEROFF acpi"));
  g_assert_false (pid_alive (pid));
  g_assert_cmpuint (vmm_count (f, path), ==, 0);
}

static void
test_guest_powers_off_by_itself (Fixture *f, gconstpointer data)
{
  /* Where powering off leaves the VMM running (Firecracker: the guest
   * halts), a guest ends itself by restarting, which ends the VMM. */
  const GuestCase *c = data;
  const char *args = g_str_equal (c->type, "firecracker")
    ? "\"kernel_args\":\"console=ttyS0 reboot=k panic=1 microvmd.reboot_after=3\""
    : "\"kernel_args\":\"console=ttyS0 tsc_early_khz=2000000 reboot=t panic=-1 microvmd.poweroff_after=3\"";
  g_autofree char *path = create (f, data, "short-lived", args);
  g_autofree char *why = NULL;

  client_call_ok (f->client, path, "Start");
  client_assert_state_soon (f->client, path, "Stopped", 60000);
  g_assert_cmpint (client_get_i32 (f->client, path, "ExitCode"), ==, 0);
  why = client_get_string (f->client, path, "StateError");
  g_test_message ("reason: %s", why);
  g_assert_nonnull (strstr (why, "status 0") ? why : strstr (why, "powered off"));
  g_assert_cmpuint (vmm_count (f, path), ==, 0);
}

static void
test_vmm_killed (Fixture *f, gconstpointer data)
{
  g_autofree char *path = create (f, data, "victim", NULL);
  g_autofree char *why = NULL;
  int pid;

  client_call_ok (f->client, path, "Start");
  pid = vmm_pid (f, path);
  g_assert_cmpint (kill (pid, SIGKILL), ==, 0);
  /* Noticed at once, not at the next resync. */
  client_assert_state_soon (f->client, path, "Failed", 5000);
  why = client_get_string (f->client, path, "StateError");
  g_assert_cmpstr (why, !=, "");
  g_test_message ("reason: %s", why);
}

static void
test_unbootable_quotes_console (Fixture *f, gconstpointer data)
{
  g_autofree char *path = create (f, data, "broken",
                                  "\"kernel_args\":\"console=ttyS0 tsc_early_khz=2000000 reboot=t panic=-1 microvmd.panic\"");
  g_autofree char *msg = NULL, *err = NULL;

  err = client_machine_call (f->client, path, "Start", &msg);
  g_test_message ("Start: %s", msg);
  g_assert_cmpstr (err, ==, MV_BUS_ERROR_INVALID_STATE);
  /* The error quotes what the guest said on its console. */
  g_autofree char *console = console_text (f, path);
  const char *quoted = strstr (msg, "last lines:\n");
  g_assert_nonnull (strstr (console, "MICROVMD-PANIC"));
  g_assert_nonnull (quoted);
  g_auto (GStrv) lines = g_strsplit (quoted + strlen ("last lines:\n"), "\n", 2);
  g_assert_cmpstr (lines[0], !=, "");
  g_assert_nonnull (strstr (console, lines[0]));
  g_assert_cmpuint (vmm_count (f, path), ==, 0);
}

/* A kernel or initrd that was there when the machine was created and is
 * gone when it starts. */
static void
test_missing_files (Fixture *f, gconstpointer data)
{
  const GuestCase *c = data;
  g_autofree char *gone = g_build_filename (mv_test_env_images_dir (f->env), "gone", NULL);
  g_autofree char *spec = g_strdup_printf ("{\"name\":\"nokernel\",\"hypervisor_type\":\"%s\","
                                           "\"kernel\":\"%s\",\"initrd\":\"%s\"}",
                                           c->type, gone, guest_initrd);
  g_autofree char *spec2 = g_strdup_printf ("{\"name\":\"noinitrd\",\"hypervisor_type\":\"%s\","
                                            "\"kernel\":\"%s\",\"initrd\":\"%s\"}",
                                            c->type, guest_kernel, gone);
  const char *specs[] = { spec, spec2 };
  const char *fields[] = { "kernel", "initrd" };

  for (guint i = 0; i < G_N_ELEMENTS (specs); i++)
    {
      g_autofree char *path = NULL;
      g_autofree char *msg = NULL, *err = NULL, *dir = NULL;

      g_assert_true (g_file_set_contents (gone, "", 0, NULL));
      path = client_create (f->client, specs[i], 0, NULL, NULL);
      g_assert_nonnull (path);
      g_assert_cmpint (g_unlink (gone), ==, 0);
      err = client_machine_call (f->client, path, "Start", &msg);
      g_assert_cmpstr (err, ==, MV_BUS_ERROR_INVALID_ARGUMENT);
      g_assert_nonnull (strstr (msg, fields[i]));
      /* Nothing was started, nothing is left. */
      g_assert_cmpuint (vmm_count (f, path), ==, 0);
      dir = fixture_runtime_file (f, path, ".");
      assert_no_sockets (dir);
    }
}

/* ----- outliving the daemon ----- */

static void
test_daemon_crash_adopts_guest (Fixture *f, gconstpointer data)
{
  g_autofree char *path = create (f, data, "survivor", NULL);
  g_autofree char *state = NULL;
  gint64 before;
  int pid;

  client_call_ok (f->client, path, "Start");
  pid = vmm_pid (f, path);
  before = wait_counter_at_least (f, path, 1, 30000);

  mv_test_env_stop_daemon (f->env, SIGKILL);
  g_assert_true (pid_alive (pid));
  mv_test_env_start_daemon (f->env, NULL);

  /* The same VMM, adopted; the guest ran on all along. */
  state = get_state (f, path);
  g_assert_cmpstr (state, ==, "Running");
  g_assert_cmpint (vmm_pid (f, path), ==, pid);
  g_assert_cmpuint (vmm_count (f, path), ==, 1);
  wait_counter_at_least (f, path, before + 2, 30000);

  /* And it is watched again: Stop works, a crash would be seen. */
  client_call_ok (f->client, path, "Stop");
  g_assert_false (pid_alive (pid));
}

/* ----- the serial console ----- */

/* OpenConsole; the caller's socket, or -1 with *@err. */
static int
open_console (Fixture *f, const char *path, char **err)
{
  g_autofree char *msg = NULL;
  g_autoptr (sd_bus_message) reply = client_call (f->client, path, MV_MACHINE_IFACE, "OpenConsole",
                                                  err, &msg, "");
  int fd = -1;

  if (!reply)
    return -1;
  g_assert_cmpint (sd_bus_message_read (reply, "h", &fd), >, 0);
  fd = fcntl (fd, F_DUPFD_CLOEXEC, 3);
  g_assert_cmpint (fd, >=, 0);
  return fd;
}

static void
type_line (int fd, const char *line)
{
  g_autofree char *text = g_strconcat (line, "\n", NULL);
  g_assert_cmpint (send (fd, text, strlen (text), MSG_NOSIGNAL), ==, (gssize) strlen (text));
}

/* Reads @fd into @got until it holds @text; FALSE at its end, or after
 * @timeout_ms. */
static gboolean
read_until (int fd, GString *got, const char *text, guint timeout_ms)
{
  gint64 deadline = g_get_monotonic_time () + (gint64) timeout_ms * 1000;

  while (!strstr (got->str, text))
    {
      struct pollfd pfd = { .fd = fd, .events = POLLIN };
      gint64 left = (deadline - g_get_monotonic_time ()) / 1000;
      char buf[4096];
      ssize_t n;

      if (left <= 0 || poll (&pfd, 1, (int) left) <= 0)
        return FALSE;
      n = read (fd, buf, sizeof buf);
      if (n <= 0)
        return FALSE;
      g_string_append_len (got, buf, n);
    }
  return TRUE;
}

/* `microvmctl console NAME` with pipes for its stdin, stdout and stderr. */
static GPid
spawn_console_cli (Fixture *f, const char *name, int *in, int *out, int *err)
{
  g_autofree char *ctl = g_build_filename (g_getenv ("MICROVMD_BUILD_DIR"), "src", "cli",
                                           "microvmctl", NULL);
  const char *argv[] = { ctl, "console", name, NULL };
  g_auto (GStrv) envp = g_environ_setenv (g_get_environ (), "DBUS_SYSTEM_BUS_ADDRESS",
                                          mv_test_env_bus_address (f->env), TRUE);
  g_autoptr (GError) error = NULL;
  GPid pid;

  g_assert_true (g_spawn_async_with_pipes (NULL, (char **) argv, envp, G_SPAWN_DO_NOT_REAP_CHILD,
                                           NULL, NULL, &pid, in, out, err, &error));
  return pid;
}

static int
wait_pid (GPid pid)
{
  int status;

  g_assert_cmpint (waitpid (pid, &status, 0), ==, pid);
  return status;
}

/* microvmctl types a command and shows its output; the escape key ends
 * it. The holder may not have seen the last writer go yet: a console
 * that says it is read-only is tried again. */
static void
check_console_cli (Fixture *f, const char *name)
{
  for (guint attempt = 0; attempt < 20; attempt++)
    {
      static const char line[] = "echo CLI-$((2*21))\n";
      g_autoptr (GString) out_text = g_string_new (NULL);
      g_autoptr (GString) err_text = g_string_new (NULL);
      int in, out, err;
      GPid pid = spawn_console_cli (f, name, &in, &out, &err);

      g_assert_cmpint (write (in, line, strlen (line)), ==, (gssize) strlen (line));
      if (read_until (out, out_text, "CLI-42", 10000))
        {
          g_assert_cmpint (write (in, "\x1d", 1), ==, 1);
          g_assert_cmpint (wait_pid (pid), ==, 0);
          close (in);
          close (out);
          close (err);
          return;
        }
      /* Not the writer: it said so. */
      g_assert_true (read_until (err, err_text, "read-only", 1000));
      kill (pid, SIGTERM);
      wait_pid (pid);
      close (in);
      close (out);
      close (err);
      g_usleep (100000);
    }
  g_error ("microvmctl console never got to type");
}

/* Every counter from @from to @to is in the console log, once each. */
static void
assert_counters_whole (Fixture *f, const char *path, gint64 from, gint64 to)
{
  g_autofree char *text = console_text (f, path);

  for (gint64 n = from; n <= to; n++)
    {
      g_autofree char *line = g_strdup_printf ("MICROVMD-COUNTER %" G_GINT64_FORMAT, n);
      guint count = 0;

      /* A terminal ends its lines with CR LF. */
      for (const char *hit = text; (hit = strstr (hit, line)); hit++)
        count += hit[strlen (line)] == '\r' || hit[strlen (line)] == '\n';
      if (count != 1)
        g_error ("the console log has %s %u times", line, count);
    }
}

static void
test_console (Fixture *f, gconstpointer data)
{
  g_autofree char *path = create (f, data, "typist", NULL);
  g_autoptr (GString) seen_a = g_string_new (NULL);
  g_autoptr (GString) seen_b = g_string_new (NULL);
  g_autoptr (GString) seen_c = g_string_new (NULL);
  g_autofree char *err = NULL;
  gint64 before, after;
  int a, b, c, pid;

  /* Nothing to attach to before the guest runs. */
  g_assert_cmpint (open_console (f, path, &err), <, 0);
  g_assert_cmpstr (err, ==, MV_BUS_ERROR_INVALID_STATE);
  g_clear_pointer (&err, g_free);

  client_call_ok (f->client, path, "Start");
  wait_counter_at_least (f, path, 1, 30000);

  /* The first types, the second reads the same; a command typed runs in
   * the guest, and its output (worked out there) comes back to both. */
  a = open_console (f, path, NULL);
  b = open_console (f, path, NULL);
  g_assert_cmpint (a, >=, 0);
  g_assert_cmpint (b, >=, 0);
  type_line (a, "echo CONSOLE-$((6*7))");
  g_assert_true (read_until (a, seen_a, "CONSOLE-42", 30000));
  g_assert_true (read_until (b, seen_b, "CONSOLE-42", 30000));
  g_assert_true (read_until (b, seen_b, "MICROVMD-COUNTER", 5000));
  /* The reader cannot type. */
  g_assert_cmpint (send (b, "x\n", 2, MSG_NOSIGNAL), ==, -1);
  g_assert_cmpint (errno, ==, EPIPE);

  /* Once the writer is gone, the next to attach types. */
  close (a);
  for (guint i = 0; i < 50; i++)
    {
      static const char line[] = "echo SECOND-$((7*6))\n";

      /* The holder may not have seen the writer go yet. */
      c = open_console (f, path, NULL);
      if (send (c, line, strlen (line), MSG_NOSIGNAL) == (gssize) strlen (line))
        break;
      close (c);
      c = -1;
      g_usleep (100000);
    }
  g_assert_cmpint (c, >=, 0);
  g_assert_true (read_until (c, seen_c, "SECOND-42", 30000));
  close (c);

  /* The daemon killed: the console goes on, to the attached reader and to
   * the log, and nothing the guest printed meanwhile is lost. */
  pid = vmm_pid (f, path);
  before = wait_counter_at_least (f, path, 1, 5000);
  mv_test_env_stop_daemon (f->env, SIGKILL);
  g_string_truncate (seen_b, 0);
  {
    g_autofree char *next = g_strdup_printf ("MICROVMD-COUNTER %" G_GINT64_FORMAT, before + 3);
    g_assert_true (read_until (b, seen_b, next, 30000));
  }
  mv_test_env_start_daemon (f->env, NULL);
  g_assert_cmpint (vmm_pid (f, path), ==, pid);
  after = wait_counter_at_least (f, path, before + 4, 30000);
  assert_counters_whole (f, path, 0, after);
  /* And it is attached to again through the new daemon. */
  a = open_console (f, path, NULL);
  g_assert_cmpint (a, >=, 0);
  g_string_truncate (seen_a, 0);
  type_line (a, "echo THIRD-$((3*3))");
  g_assert_true (read_until (a, seen_a, "THIRD-9", 30000));
  close (a);
  check_console_cli (f, "typist");
  a = open_console (f, path, NULL);

  /* The VMM's end is every socket's end. */
  client_call_ok (f->client, path, "Stop");
  g_assert_false (read_until (b, seen_b, "never printed", 30000));
  g_assert_false (read_until (a, seen_a, "never printed", 30000));
  close (a);
  close (b);
  g_assert_cmpint (open_console (f, path, &err), <, 0);
  g_assert_cmpstr (err, ==, MV_BUS_ERROR_INVALID_STATE);
}

/* ----- standby and restore ----- */

static void
test_standby_resumes_counter (Fixture *f, gconstpointer data)
{
  g_autofree char *path = create (f, data, "napper", NULL);
  g_autofree char *state = NULL;
  gint64 before;
  int pid;

  client_call_ok (f->client, path, "Start");
  pid = vmm_pid (f, path);
  wait_counter_at_least (f, path, 3, 30000);
  client_call_ok (f->client, path, "Standby");
  before = last_counter (f, path);
  state = get_state (f, path);
  g_assert_cmpstr (state, ==, "Standby");
  /* No VMM holds CPU or memory for it now. */
  g_assert_false (pid_alive (pid));
  g_assert_cmpuint (vmm_count (f, path), ==, 0);

  /* A duplicate traffic event does nothing; the first one wakes it. */
  g_assert_true (client_traffic (f->client, "napper", 7));
  g_free (state);
  state = get_state (f, path);
  g_assert_cmpstr (state, ==, "Running");
  /* The guest goes on where it was, not from 0. */
  gint64 after = wait_counter_at_least (f, path, before + 1, 30000);
  g_assert_cmpint (after, >, before);
  g_assert_cmpint (vmm_pid (f, path), !=, pid);

  client_call_ok (f->client, path, "Standby");
  g_assert_false (client_traffic (f->client, "napper", 7));
  client_settle (f->client, 1000);
  g_free (state);
  state = get_state (f, path);
  g_assert_cmpstr (state, ==, "Standby");
  g_assert_cmpuint (vmm_count (f, path), ==, 0);
}

/* A memory snapshot of a running guest, which counts on; a fork of it is
 * a second guest with its own VMM counting on from there; the snapshot
 * restored onto the stopped machine counts on from where it was. */
static void
test_snapshot_fork_restore (Fixture *f, gconstpointer data)
{
  g_autofree char *path = create (f, data, "origin", NULL);
  g_autofree char *snapshot = NULL, *copy = NULL, *state = NULL;
  g_autofree char *err = NULL, *msg = NULL;
  const char *out = NULL;
  gint64 at_snapshot, later;
  int pid;

  client_call_ok (f->client, path, "Start");
  pid = vmm_pid (f, path);
  wait_counter_at_least (f, path, 3, 30000);
  {
    g_autoptr (sd_bus_message) reply = client_call (f->client, path, MV_MACHINE_IFACE,
                                                    "CreateSnapshot", &err, &msg, "s", "then");
    if (!reply)
      g_error ("CreateSnapshot: %s: %s", err, msg);
    g_assert_cmpint (sd_bus_message_read (reply, "o", &out), >, 0);
    snapshot = g_strdup (out);
  }
  at_snapshot = last_counter (f, path);
  /* The same VMM runs on. */
  g_assert_cmpint (vmm_pid (f, path), ==, pid);
  later = wait_counter_at_least (f, path, at_snapshot + 2, 30000);

  {
    g_autoptr (sd_bus_message) reply = client_call (f->client, snapshot, MV_SNAPSHOT_IFACE, "Fork",
                                                    &err, &msg, "s", "{\"name\":\"copy\"}");
    if (!reply)
      g_error ("Fork: %s: %s", err, msg);
    g_assert_cmpint (sd_bus_message_read (reply, "o", &out), >, 0);
    copy = g_strdup (out);
  }
  state = get_state (f, copy);
  g_assert_cmpstr (state, ==, "Running");
  g_assert_cmpint (vmm_pid (f, copy), !=, pid);
  wait_counter_at_least (f, copy, at_snapshot + 1, 30000);

  client_call_ok (f->client, path, "Stop");
  {
    g_autoptr (sd_bus_message) reply = client_call (f->client, snapshot, MV_SNAPSHOT_IFACE,
                                                    "Restore", &err, &msg, NULL);
    if (!reply)
      g_error ("Restore: %s: %s", err, msg);
  }
  g_free (state);
  state = get_state (f, path);
  g_assert_cmpstr (state, ==, "Running");
  g_assert_cmpint (wait_counter_at_least (f, path, later + 1, 30000), >, later);
}

static void
test_idle_guest_sleeps (Fixture *f, gconstpointer data)
{
  g_autofree char *path = create (f, data, "drowsy", "\"standby_after_seconds\":3");

  client_call_ok (f->client, path, "Start");
  /* The test guest only prints a line a second: idle by the configured
   * threshold, so on standby after 3 s of it. */
  client_assert_state_soon (f->client, path, "Standby", 60000);
  g_assert_cmpuint (vmm_count (f, path), ==, 0);
  client_call_ok (f->client, path, "Start");
  g_assert_cmpuint (vmm_count (f, path), ==, 1);
}

/* ----- restart policies ----- */

static void
test_on_failure_restarts_real_guest (Fixture *f, gconstpointer data)
{
  g_autofree char *path = create (f, data, "phoenix", "\"restart\":{\"mode\":\"on-failure\",\"max_retries\":1}");
  int pid, pid2;

  client_call_ok (f->client, path, "Start");
  pid = vmm_pid (f, path);
  g_assert_cmpint (kill (pid, SIGKILL), ==, 0);
  client_assert_state_soon (f->client, path, "Restarting", 5000);
  client_assert_state_soon (f->client, path, "Running", 60000);
  pid2 = vmm_pid (f, path);
  g_assert_cmpint (pid2, !=, pid);
  g_assert_true (pid_alive (pid2));
  g_assert_cmpuint (client_get_u32 (f->client, path, "RestartCount"), ==, 1);

  /* max_retries=1: the second crash in a row is left Failed. */
  g_assert_cmpint (kill (pid2, SIGKILL), ==, 0);
  client_assert_state_soon (f->client, path, "Failed", 5000);
  client_settle (f->client, 1500);
  g_autofree char *state = get_state (f, path);
  g_assert_cmpstr (state, ==, "Failed");
  g_assert_cmpuint (vmm_count (f, path), ==, 0);
}

static void
test_unless_stopped_after_user_stop (Fixture *f, gconstpointer data)
{
  g_autofree char *path = create (f, data, "resting", "\"restart\":{\"mode\":\"unless-stopped\"}");
  g_autofree char *state = NULL;

  client_call_ok (f->client, path, "Start");
  client_call_ok (f->client, path, "Stop");
  mv_test_env_stop_daemon (f->env, SIGTERM);
  mv_test_env_start_daemon (f->env, NULL);
  client_settle (f->client, 2000);
  state = get_state (f, path);
  g_assert_cmpstr (state, ==, "Stopped");
  g_assert_cmpuint (vmm_count (f, path), ==, 0);
}

/* ----- a daemon killed in the middle of a host operation ----- */

static const char *const real_faults[] = {
  "start:recorded", "start:done",
  "stop:recorded", "stop:done",
  "standby:recorded", "standby:done",
  "restore:recorded", "restore:done",
  "destroy-vmm:recorded", "destroy-vmm:done",
};

static void
test_fault_sweep_real (Fixture *f, gconstpointer data)
{
  for (guint i = 0; i < G_N_ELEMENTS (real_faults); i++)
    {
      const char *fault = real_faults[i];
      g_autofree char *name = g_strdup_printf ("crash-%u", i);
      g_autofree char *path = create (f, data, name, NULL);
      g_autofree char *sock_dir = NULL;
      const char *method = "Start";

      g_test_message ("fault point %s", fault);
      if (!g_str_has_prefix (fault, "start"))
        client_call_ok (f->client, path, "Start");
      if (g_str_has_prefix (fault, "restore"))
        client_call_ok (f->client, path, "Standby");
      if (g_str_has_prefix (fault, "stop"))
        method = "Stop";
      else if (g_str_has_prefix (fault, "standby"))
        method = "Standby";

      g_setenv ("MICROVMD_FAULT_POINT", fault, TRUE);
      mv_test_env_stop_daemon (f->env, SIGTERM);
      mv_test_env_start_daemon (f->env, NULL);
      g_unsetenv ("MICROVMD_FAULT_POINT");

      if (g_str_has_prefix (fault, "destroy"))
        {
          g_autoptr (sd_bus_message) r = client_call (f->client, path, MV_MACHINE_IFACE, "Delete",
                                                      NULL, NULL, "b", 1);
          g_assert_null (r);
        }
      else
        {
          g_autofree char *err = client_machine_call (f->client, path, method, NULL);
          g_assert_nonnull (err);
        }
      mv_test_env_wait_for_name (f->env, MV_BUS_NAME, FALSE, 60000);
      mv_test_env_stop_daemon (f->env, SIGKILL);
      mv_test_env_start_daemon (f->env, NULL);

      if (g_str_has_prefix (fault, "destroy"))
        {
          g_autofree char *id = g_path_get_basename (path);
          for (guint w = 0; w < 300; w++)
            {
              g_autofree char *err = NULL;
              g_autoptr (sd_bus_message) r = client_call (f->client, MV_MANAGER_PATH, MV_MANAGER_IFACE,
                                                          "GetMachine", &err, NULL, "s", name);
              if (!r)
                break;
              client_settle (f->client, 100);
            }
          g_assert_cmpuint (count_machine_dirs (mv_test_env_state_dir (f->env)), ==, 0);
          /* No VMM is left behind for the machine that is gone. */
          sock_dir = g_build_filename (mv_test_env_runtime_dir (f->env), "machines", NULL);
          g_assert_cmpuint (count_processes_with (sock_dir), ==, 0);
          continue;
        }

      /* Settled, and exactly as many VMMs as the state says: no orphan,
       * no duplicate. */
      for (guint w = 0; w < 600; w++)
        {
          g_autofree char *phase = client_get_string (f->client, path, "Phase");
          g_autofree char *state = get_state (f, path);
          if (*phase == '\0' && !g_str_equal (state, "Starting") && !g_str_equal (state, "Stopping"))
            break;
          client_settle (f->client, 100);
        }
      g_autofree char *state = get_state (f, path);
      gboolean active = g_str_equal (state, "Running") || g_str_equal (state, "Paused");
      g_test_message ("after %s: %s", fault, state);
      g_assert_cmpuint (vmm_count (f, path), ==, active ? 1 : 0);
      if (active)
        g_assert_true (pid_alive (vmm_pid (f, path)));

      g_autoptr (sd_bus_message) r = client_call (f->client, path, MV_MACHINE_IFACE, "Delete",
                                                  NULL, NULL, "b", 1);
      g_assert_nonnull (r);
      g_assert_cmpuint (count_machine_dirs (mv_test_env_state_dir (f->env)), ==, 0);
    }
}

/* ----- several versions of one hypervisor ----- */

/* The Cloud Hypervisor test VMM as @version: a link whose name ends in
 * it (a walled-in VMM is shown its binary and nothing a script would run). */
static char *
versioned_binary (Fixture *f, const char *version)
{
  g_autofree char *fake = g_build_filename (g_getenv ("MICROVMD_BUILD_DIR"), "tests", "vmm",
                                            "fake-cloud-hypervisor", NULL);
  g_autofree char *name = g_strdup_printf ("cloud-hypervisor-%s", version);
  char *path = g_build_filename (mv_test_env_dir (f->env), name, NULL);

  g_assert_cmpint (symlink (fake, path), ==, 0);
  return path;
}

static void
test_deprecated_version (Fixture *f, gconstpointer data)
{
  g_autofree char *current = versioned_binary (f, "41.0.0");
  g_autofree char *old = versioned_binary (f, "40.0.0");
  /* A listed binary that is not there takes only itself away. */
  g_autofree char *config = g_strdup_printf ("[cloud-hypervisor]\nbinaries=%s;%s;/nonexistent/ch\n%s",
                                             current, old, lifecycle_config);
  g_autofree char *log = NULL, *msg = NULL, *err = NULL;

  mv_test_env_stop_daemon (f->env, SIGTERM);
  mv_test_env_write_config (f->env, config);
  mv_test_env_start_daemon (f->env, NULL);

  /* Both versions are offered, the first as the default. */
  g_autoptr (sd_bus_message) r = NULL;
  sd_bus_error error = SD_BUS_ERROR_NULL;
  const char *type, *version;
  g_assert_cmpint (sd_bus_get_property (f->client->bus, MV_BUS_NAME, MV_MANAGER_PATH,
                                        MV_MANAGER_IFACE, "Hypervisors", &error, &r, "a(ss)"), >=, 0);
  g_autoptr (GString) listed = g_string_new (NULL);
  g_assert_cmpint (sd_bus_message_enter_container (r, 'a', "(ss)"), >, 0);
  while (sd_bus_message_read (r, "(ss)", &type, &version) > 0)
    g_string_append_printf (listed, "%s %s;", type, version);
  g_assert_nonnull (strstr (listed->str, "cloud-hypervisor 41.0.0;cloud-hypervisor 40.0.0;"));
  log = mv_test_env_read_daemon_log (f->env);
  g_assert_nonnull (strstr (log, "/nonexistent/ch"));
  g_clear_pointer (&log, g_free);

  /* A machine pinned to the old one gets exactly it, and still starts. */
  g_autofree char *path = create (f, data, "pinned", "\"hypervisor_version\":\"40.0.0\"");
  client_call_ok (f->client, path, "Start");
  g_autofree char *id = client_get_string (f->client, path, "Id");
  g_autofree char *status_path = g_build_filename (mv_test_env_state_dir (f->env), "machines", id,
                                                   "status.json", NULL);
  g_autofree char *status = NULL;
  g_assert_true (g_file_get_contents (status_path, &status, NULL, NULL));
  g_assert_nonnull (strstr (status, "40.0.0"));

  /* A memory snapshot of its guest is of that version too. */
  {
    g_autoptr (sd_bus_message) taken = client_call (f->client, path, MV_MACHINE_IFACE,
                                                    "CreateSnapshot", NULL, NULL, "s", "old-guest");
    g_assert_nonnull (taken);
  }

  /* Once after Recover, a warning names it and the version to move to,
   * and one the snapshot. */
  mv_test_env_stop_daemon (f->env, SIGTERM);
  mv_test_env_start_daemon (f->env, NULL);
  log = mv_test_env_read_daemon_log (f->env);
  g_assert_nonnull (strstr (log, "uses cloud-hypervisor 40.0.0, a deprecated version; move it to 41.0.0"));
  g_assert_nonnull (strstr (log, "Snapshot old-guest"));
  g_assert_nonnull (strstr (log, "frozen by cloud-hypervisor 40.0.0, a deprecated version"));

  /* A version the host does not have is refused, naming the field. */
  g_autofree char *spec = guest_spec (data, "unpinnable", "\"hypervisor_version\":\"39.0.0\"");
  g_autofree char *none = client_create (f->client, spec, 0, &err, &msg);
  g_assert_null (none);
  g_assert_cmpstr (err, ==, MV_BUS_ERROR_UNSUPPORTED);
  g_assert_nonnull (strstr (msg, "hypervisor_version"));
  g_assert_nonnull (strstr (msg, "41.0.0, 40.0.0"));
}

/* A guest that ignores the power button is ended by force once the stop
 * timeout has passed. */
static void
test_stop_times_out_to_hard_stop (Fixture *f, gconstpointer data)
{
  const GuestCase *c = data;
  g_autofree char *config = g_strconcat (c->config, "stop-timeout-seconds=2\n", NULL);
  g_autofree char *path = NULL, *state = NULL, *text = NULL;
  int pid;

  mv_test_env_stop_daemon (f->env, SIGTERM);
  mv_test_env_write_config (f->env, config);
  mv_test_env_start_daemon (f->env, NULL);

  path = create (f, data, "stubborn", "\"kernel_args\":\"console=ttyS0 microvmd.ignore_acpi\"");
  client_call_ok (f->client, path, "Start");
  pid = vmm_pid (f, path);
  client_call_ok (f->client, path, "Stop");
  state = get_state (f, path);
  g_assert_cmpstr (state, ==, "Stopped");
  g_assert_false (pid_alive (pid));
  text = console_text (f, path);
  g_assert_null (strstr (text, "MICROVMD-POWEROFF"));
  g_assert_cmpuint (vmm_count (f, path), ==, 0);
}

static GuestCase cases[] = {
  { "qemu", NULL },
  { "cloud-hypervisor", NULL },
  { "firecracker", NULL },
};

int
main (int argc, char **argv)
{
  const char *build = g_getenv ("MICROVMD_BUILD_DIR");
  const char *only = g_getenv ("MICROVMD_TEST_HYPERVISOR");

  g_test_init (&argc, &argv, NULL);
  g_assert_nonnull (build);
  guest_kernel = g_build_filename (build, "tests", "guest", "vmlinuz", NULL);
  guest_initrd = g_build_filename (build, "tests", "guest", "initrd.img", NULL);

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      GuestCase *c = &cases[i];

      if (only && !g_str_equal (only, c->type))
        continue;
      c->config = guest_config (c->type, lifecycle_config);
#define ADD(name, fn)                                                                   \
      do {                                                                              \
        g_autofree char *test_path = g_strdup_printf ("/guests/%s/%s", c->type, name);   \
        g_test_add (test_path, Fixture, c, guest_fixture_setup, fn, guest_fixture_teardown); \
      } while (0)
      ADD ("boot-console-pause-resume-stop", test_boot_console_pause_resume);
      ADD ("guest-powers-off-by-itself", test_guest_powers_off_by_itself);
      ADD ("vmm-killed", test_vmm_killed);
      ADD ("unbootable-quotes-console", test_unbootable_quotes_console);
      ADD ("missing-files", test_missing_files);
      ADD ("daemon-crash-adopts-guest", test_daemon_crash_adopts_guest);
      ADD ("console", test_console);
      ADD ("standby-resumes-counter", test_standby_resumes_counter);
      ADD ("snapshot-fork-restore", test_snapshot_fork_restore);
      ADD ("idle-guest-sleeps", test_idle_guest_sleeps);
      ADD ("on-failure-restarts-real-guest", test_on_failure_restarts_real_guest);
      ADD ("unless-stopped-after-user-stop", test_unless_stopped_after_user_stop);
      ADD ("fault-sweep-real", test_fault_sweep_real);
      if (g_str_equal (c->type, "cloud-hypervisor"))
        {
          ADD ("deprecated-version", test_deprecated_version);
          ADD ("stop-times-out-to-hard-stop", test_stop_times_out_to_hard_stop);
        }
#undef ADD
    }
  int status = g_test_run ();
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    g_free (cases[i].config);
  g_free (guest_kernel);
  g_free (guest_initrd);
  return status;
}
