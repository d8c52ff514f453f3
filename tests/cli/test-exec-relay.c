/* microvmctl exec and wait through a bus, against fake-machine: exit
 * statuses, standard input to its end, large output both ways, a closed
 * output of ours, the options sent, the terminal in raw mode and restored,
 * and Wait's result and timeout.
 *
 *   test-exec-relay MICROVMCTL FAKE_MACHINE */
#include <errno.h>
#include <fcntl.h>
#include <pty.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <gio/gio.h>

static const char *microvmctl_path;
static const char *fake_machine_path;

typedef struct {
  GSubprocess *bus;
  GSubprocess *fake;
  char *address;
} Fixture;

static char *
read_line (GSubprocess *process)
{
  g_autoptr(GDataInputStream) in =
    g_data_input_stream_new (g_subprocess_get_stdout_pipe (process));
  g_autoptr(GError) error = NULL;
  char *line;

  /* Unbuffered enough: each process writes this one line and no more. */
  line = g_data_input_stream_read_line (in, NULL, NULL, &error);
  g_assert_no_error (error);
  g_assert_nonnull (line);
  return line;
}

/* So that a failed assertion leaves no bus or server behind. */
static void
die_with_parent (gpointer data)
{
  prctl (PR_SET_PDEATHSIG, SIGKILL);
}

static GSubprocess *
spawn_helper (const char *const *argv)
{
  g_autoptr(GSubprocessLauncher) launcher =
    g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_STDOUT_PIPE);
  g_autoptr(GError) error = NULL;
  GSubprocess *process;

  g_subprocess_launcher_set_child_setup (launcher, die_with_parent, NULL, NULL);
  process = g_subprocess_launcher_spawnv (launcher, argv, &error);
  g_assert_no_error (error);
  return process;
}

static void
fixture_setup (Fixture *f, gconstpointer data)
{
  g_autofree char *ready = NULL;

  f->bus = spawn_helper ((const char *const[]) { "dbus-daemon", "--session", "--nofork",
                                                 "--nopidfile", "--print-address=1", NULL });
  f->address = read_line (f->bus);

  f->fake = spawn_helper ((const char *const[]) { fake_machine_path, f->address, NULL });
  ready = read_line (f->fake);
  g_assert_cmpstr (ready, ==, "ready");
}

static void
fixture_teardown (Fixture *f, gconstpointer data)
{
  g_subprocess_force_exit (f->fake);
  g_subprocess_wait (f->fake, NULL, NULL);
  g_subprocess_force_exit (f->bus);
  g_subprocess_wait (f->bus, NULL, NULL);
  g_clear_object (&f->fake);
  g_clear_object (&f->bus);
  g_free (f->address);
}

static GPtrArray *
ctl_argv (Fixture *f, const char *const *args)
{
  GPtrArray *argv = g_ptr_array_new_with_free_func (g_free);

  g_ptr_array_add (argv, g_strdup (microvmctl_path));
  g_ptr_array_add (argv, g_strdup_printf ("--address=%s", f->address));
  g_ptr_array_add (argv, g_strdup ("--no-ask-password"));
  for (gsize i = 0; args[i] != NULL; i++)
    g_ptr_array_add (argv, g_strdup (args[i]));
  g_ptr_array_add (argv, NULL);
  return argv;
}

/* Runs microvmctl with INPUT on its standard input (none: /dev/null) and
 * returns its exit status, or 128 + the signal that ended it. */
static int
run_ctl_full (Fixture *f, GBytes *input, const char *bus_timeout, GBytes **out, char **err,
              const char *const *args)
{
  g_autoptr(GPtrArray) argv = ctl_argv (f, args);
  g_autoptr(GSubprocessLauncher) launcher =
    g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_STDOUT_PIPE | G_SUBPROCESS_FLAGS_STDERR_PIPE |
                               (input != NULL ? G_SUBPROCESS_FLAGS_STDIN_PIPE : 0));
  g_autoptr(GSubprocess) process = NULL;
  g_autoptr(GBytes) err_bytes = NULL;
  g_autoptr(GError) error = NULL;

  if (bus_timeout != NULL)
    g_subprocess_launcher_setenv (launcher, "SYSTEMD_BUS_TIMEOUT", bus_timeout, TRUE);
  process = g_subprocess_launcher_spawnv (launcher, (const char *const *) argv->pdata, &error);
  g_assert_no_error (error);
  g_subprocess_communicate (process, input, NULL, out, &err_bytes, &error);
  g_assert_no_error (error);
  *err = g_strndup (g_bytes_get_size (err_bytes) > 0 ? g_bytes_get_data (err_bytes, NULL) : "",
                    g_bytes_get_size (err_bytes));
  g_subprocess_wait (process, NULL, &error);
  g_assert_no_error (error);
  if (g_subprocess_get_if_signaled (process))
    return 128 + g_subprocess_get_term_sig (process);
  return g_subprocess_get_exit_status (process);
}

static int
run_ctl (Fixture *f, const char *input, char **out, char **err, const char *const *args)
{
  g_autoptr(GBytes) in = input != NULL ? g_bytes_new (input, strlen (input)) : NULL;
  g_autoptr(GBytes) out_bytes = NULL;
  int status = run_ctl_full (f, in, NULL, &out_bytes, err, args);

  *out = g_strndup (g_bytes_get_size (out_bytes) > 0 ? g_bytes_get_data (out_bytes, NULL) : "",
                    g_bytes_get_size (out_bytes));
  return status;
}

#define ARGS(...) ((const char *const[]) { __VA_ARGS__, NULL })

static void
test_exit_status (Fixture *f, gconstpointer data)
{
  g_autofree char *out = NULL, *err = NULL;

  g_assert_cmpint (run_ctl (f, NULL, &out, &err, ARGS ("exec", "vm", "--", "true")), ==, 0);
  g_assert_cmpstr (out, ==, "");
  g_assert_cmpstr (err, ==, "");
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);

  g_assert_cmpint (run_ctl (f, NULL, &out, &err, ARGS ("exec", "vm", "--", "sh", "-c", "exit 7")), ==, 7);
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);

  /* signal N: 128 + N, as a shell says it. */
  g_assert_cmpint (run_ctl (f, NULL, &out, &err,
                            ARGS ("exec", "vm", "--", "sh", "-c", "kill -TERM $$")), ==, 128 + SIGTERM);
}

static void
test_output_streams (Fixture *f, gconstpointer data)
{
  g_autofree char *out = NULL, *err = NULL;

  g_assert_cmpint (run_ctl (f, NULL, &out, &err,
                            ARGS ("exec", "vm", "--", "sh", "-c",
                                  "echo out; echo err >&2; echo more; exit 3")), ==, 3);
  g_assert_cmpstr (out, ==, "out\nmore\n");
  g_assert_cmpstr (err, ==, "err\n");
}

static void
test_stdin (Fixture *f, gconstpointer data)
{
  g_autofree char *out = NULL, *err = NULL;

  g_assert_cmpint (run_ctl (f, "hi\n", &out, &err, ARGS ("exec", "vm", "--", "cat")), ==, 0);
  g_assert_cmpstr (out, ==, "hi\n");
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);

  /* The command sees the end of its input, and ends only after it. */
  g_assert_cmpint (run_ctl (f, "a\nb\nc\n", &out, &err,
                            ARGS ("exec", "vm", "--", "sh", "-c", "wc -l; echo done")), ==, 0);
  g_assert_cmpstr (out, ==, "3\ndone\n");
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);

  /* No input at all (/dev/null). */
  g_assert_cmpint (run_ctl (f, NULL, &out, &err, ARGS ("exec", "vm", "--", "wc", "-c")), ==, 0);
  g_assert_cmpstr (g_strstrip (out), ==, "0");
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);

  /* A command that ends without reading its input ends the relay. */
  g_assert_cmpint (run_ctl (f, "unread\n", &out, &err, ARGS ("exec", "vm", "--", "true")), ==, 0);
}

/* Far more than any buffer on the way, in both directions at once. */
static void
test_large (Fixture *f, gconstpointer data)
{
  const gsize size = 8 * 1024 * 1024;
  g_autofree guint8 *data_in = g_malloc (size);
  g_autoptr(GBytes) in = NULL;
  g_autoptr(GBytes) out = NULL;
  g_autofree char *err = NULL;
  GRand *rand = g_rand_new_with_seed (7);

  for (gsize i = 0; i < size; i += 4)
    {
      guint32 v = g_rand_int (rand);
      memcpy (data_in + i, &v, 4);
    }
  g_rand_free (rand);
  in = g_bytes_new (data_in, size);

  g_assert_cmpint (run_ctl_full (f, in, NULL, &out, &err, ARGS ("exec", "vm", "--", "cat")), ==, 0);
  g_assert_cmpstr (err, ==, "");
  g_assert_cmpuint (g_bytes_get_size (out), ==, size);
  g_assert_true (memcmp (g_bytes_get_data (out, NULL), data_in, size) == 0);
  g_clear_pointer (&out, g_bytes_unref);
  g_clear_pointer (&err, g_free);

  /* Both outputs large at once. */
  g_assert_cmpint (run_ctl_full (f, NULL, NULL, &out, &err,
                                 ARGS ("exec", "vm", "--", "sh", "-c",
                                       "head -c 3000000 /dev/zero >&2 & head -c 5000000 /dev/zero; wait")),
                   ==, 0);
  g_assert_cmpuint (g_bytes_get_size (out), ==, 5000000);
  g_assert_cmpuint (strlen (err), ==, 0);
}

/* Our standard output closed: the command's writes fail, as in a local
 * pipeline, and its exit status still comes through. */
static void
test_closed_stdout (Fixture *f, gconstpointer data)
{
  g_autoptr(GPtrArray) argv = ctl_argv (f, ARGS ("exec", "vm", "--", "sh", "-c",
                                                 "yes; echo still here >&2; exit 5"));
  g_autoptr(GSubprocessLauncher) launcher =
    g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_STDERR_PIPE);
  g_autoptr(GSubprocess) process = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *err = NULL;
  int pipe_fds[2];

  g_assert_no_errno (pipe2 (pipe_fds, O_CLOEXEC));
  close (pipe_fds[0]);
  g_subprocess_launcher_take_stdout_fd (launcher, pipe_fds[1]);
  process = g_subprocess_launcher_spawnv (launcher, (const char *const *) argv->pdata, &error);
  g_assert_no_error (error);
  g_subprocess_communicate_utf8 (process, NULL, NULL, NULL, &err, &error);
  g_assert_no_error (error);
  g_subprocess_wait (process, NULL, &error);
  g_assert_no_error (error);
  g_assert_true (g_subprocess_get_if_exited (process));
  g_assert_cmpint (g_subprocess_get_exit_status (process), ==, 5);
  /* yes may say why it stopped (EPIPE or a reset socket) or die of SIGPIPE. */
  g_assert_true (g_str_has_suffix (err, "still here\n"));
}

static void
test_options (Fixture *f, gconstpointer data)
{
  g_autofree char *out = NULL, *err = NULL;

  g_assert_cmpint (run_ctl (f, NULL, &out, &err,
                            ARGS ("exec", "-e", "A=1", "-e", "B=x=y", "--env=C=", "-e", "A=2",
                                  "-u", "nobody", "-w", "/tmp", "vm", "--",
                                  "sh", "-c", "echo \"$A $B [$C] $FAKE_USER $FAKE_TTY\"; pwd")), ==, 0);
  g_assert_cmpstr (out, ==, "2 x=y [] nobody false\n/tmp\n");
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);

  /* -t asks for a tty even off a terminal: one socket, no error output. */
  g_assert_cmpint (run_ctl (f, NULL, &out, &err,
                            ARGS ("exec", "-t", "vm", "--", "sh", "-c",
                                  "echo $FAKE_TTY; echo to-err >&2")), ==, 0);
  g_assert_cmpstr (out, ==, "true\nto-err\n");
  g_assert_cmpstr (err, ==, "");
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);

  /* Arguments after "--" are the command's, options or not. */
  g_assert_cmpint (run_ctl (f, NULL, &out, &err,
                            ARGS ("exec", "vm", "--", "printf", "%s|", "-e", "--tty", "-u")), ==, 0);
  g_assert_cmpstr (out, ==, "-e|--tty|-u|");
}

static void
test_errors (Fixture *f, gconstpointer data)
{
  g_autofree char *out = NULL, *err = NULL;

  g_assert_cmpint (run_ctl (f, NULL, &out, &err,
                            ARGS ("exec", "vm", "--", "fake-status", "error the guest went away")),
                   ==, 255);
  g_assert_cmpstr (err, ==, "microvmctl: the guest went away\n");
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);

  g_assert_cmpint (run_ctl (f, NULL, &out, &err,
                            ARGS ("exec", "vm", "--", "fake-status", "exit 300\n")), ==, 255);
  g_assert_nonnull (strstr (err, "malformed status line"));
  g_assert_nonnull (strstr (err, "exit 300"));
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);

  /* Closed without a line. */
  g_assert_cmpint (run_ctl (f, NULL, &out, &err,
                            ARGS ("exec", "vm", "--", "fake-status", "")), ==, 255);
  g_assert_nonnull (strstr (err, "status was lost"));
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);

  /* A refused call is microvmctl's failure, not the command's status. */
  g_assert_cmpint (run_ctl (f, NULL, &out, &err, ARGS ("exec", "missing", "--", "true")), ==, 255);
  g_assert_nonnull (strstr (err, "org.microvmd1.Error.NotFound"));
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);

  g_assert_cmpint (run_ctl (f, NULL, &out, &err, ARGS ("exec", "-e", "NOEQUALS", "vm", "--", "true")),
                   ==, 2);
  g_assert_nonnull (strstr (err, "NOEQUALS"));
}

static void
test_wait (Fixture *f, gconstpointer data)
{
  g_autofree char *out = NULL, *err = NULL;

  g_assert_cmpint (run_ctl (f, NULL, &out, &err, ARGS ("wait", "stopped3")), ==, 3);
  g_assert_cmpstr (out, ==, "state=Stopped exit_code=3 seen_condition=stopped\n");
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);

  g_assert_cmpint (run_ctl (f, NULL, &out, &err, ARGS ("wait", "vm")), ==, 0);
  g_assert_cmpstr (out, ==, "state=Stopped seen_condition=stopped\n");
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);

  g_assert_cmpint (run_ctl (f, NULL, &out, &err,
                            ARGS ("wait", "--next-stop", "--id", "abc", "failed")), ==, 1);
  g_assert_cmpstr (out, ==, "state=Failed error='the VMM crashed' seen_condition=stopped "
                            "seen_id=abc seen_next_stop=yes\n");
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);

  g_assert_cmpint (run_ctl (f, NULL, &out, &err, ARGS ("--json", "wait", "stopped3")), ==, 3);
  g_assert_nonnull (strstr (out, "\"exit_code\" : 3"));
  g_assert_nonnull (strstr (out, "\"state\" : \"Stopped\""));
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);

  g_assert_cmpint (run_ctl (f, NULL, &out, &err, ARGS ("wait", "--healthy", "healthy")), ==, 0);
  g_assert_cmpstr (out, ==, "state=Running health=healthy seen_condition=healthy\n");
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);

  g_assert_cmpint (run_ctl (f, NULL, &out, &err, ARGS ("wait", "--healthy", "vm")), ==, 1);
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);

  g_assert_cmpint (run_ctl (f, NULL, &out, &err, ARGS ("wait", "missing")), ==, 1);
  g_assert_nonnull (strstr (err, "org.microvmd1.Error.NotFound"));
}

/* Wait is not bound by the bus default timeout: with it at one second, a
 * reply after two still arrives. */
static void
test_wait_outlasts_bus_timeout (Fixture *f, gconstpointer data)
{
  g_autoptr(GBytes) out = NULL;
  g_autofree char *err = NULL;

  g_assert_cmpint (run_ctl_full (f, NULL, "1", &out, &err, ARGS ("wait", "slow")), ==, 0);
  g_assert_cmpstr (err, ==, "");
  g_assert_cmpmem (g_bytes_get_data (out, NULL), g_bytes_get_size (out),
                   "state=Stopped seen_condition=stopped\n", 37);
}

typedef struct {
  int master;
  int slave;
  struct termios cooked;
  GSubprocess *process;
} Pty;

static void
pty_start (Pty *pty, Fixture *f, const char *const *args)
{
  g_autoptr(GPtrArray) argv = ctl_argv (f, args);
  g_autoptr(GSubprocessLauncher) launcher = g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_NONE);
  g_autoptr(GError) error = NULL;
  struct winsize size = { .ws_row = 33, .ws_col = 111 };

  g_assert_no_errno (openpty (&pty->master, &pty->slave, NULL, NULL, &size));
  g_assert_no_errno (tcgetattr (pty->slave, &pty->cooked));
  g_assert_true (pty->cooked.c_lflag & ICANON);
  g_subprocess_launcher_take_stdin_fd (launcher, dup (pty->slave));
  g_subprocess_launcher_take_stdout_fd (launcher, dup (pty->slave));
  g_subprocess_launcher_take_stderr_fd (launcher, dup (pty->slave));
  pty->process = g_subprocess_launcher_spawnv (launcher, (const char *const *) argv->pdata, &error);
  g_assert_no_error (error);
}

/* Reads from the terminal until TEXT has come. */
static void
pty_expect (Pty *pty, const char *text)
{
  g_autoptr(GString) seen = g_string_new (NULL);

  while (strstr (seen->str, text) == NULL)
    {
      char buffer[256];
      ssize_t n = read (pty->master, buffer, sizeof buffer);

      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        g_error ("the terminal ended before \"%s\"; it showed \"%s\"", text, seen->str);
      g_string_append_len (seen, buffer, n);
    }
}

static void
pty_assert_restored (Pty *pty)
{
  struct termios now;

  g_assert_no_errno (tcgetattr (pty->slave, &now));
  g_assert_cmpint (now.c_lflag, ==, pty->cooked.c_lflag);
  g_assert_cmpint (now.c_iflag, ==, pty->cooked.c_iflag);
  g_assert_cmpint (now.c_oflag, ==, pty->cooked.c_oflag);
  g_assert_false (fcntl (pty->slave, F_GETFL) & O_NONBLOCK);
}

static void
pty_finish (Pty *pty)
{
  g_clear_object (&pty->process);
  close (pty->master);
  close (pty->slave);
}

static void
test_tty (Fixture *f, gconstpointer data)
{
  g_autoptr(GError) error = NULL;
  Pty pty = { 0 };
  struct termios during;

  /* On a terminal, a tty is the default; its size goes along. */
  pty_start (&pty, f, ARGS ("exec", "vm", "--", "sh", "-c",
                            "echo tty=$FAKE_TTY size=${FAKE_ROWS}x$FAKE_COLUMNS; read line; "
                            "echo got=$line; exit 4"));
  pty_expect (&pty, "tty=true size=33x111\n");

  /* Raw meanwhile: no echo, no line editing, no signals from keys. */
  g_assert_no_errno (tcgetattr (pty.slave, &during));
  g_assert_false (during.c_lflag & (ICANON | ECHO | ISIG));
  g_assert_true (fcntl (pty.slave, F_GETFL) & O_NONBLOCK);

  g_assert_cmpint (write (pty.master, "typed\n", 6), ==, 6);
  pty_expect (&pty, "got=typed\n");

  g_subprocess_wait (pty.process, NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpint (g_subprocess_get_exit_status (pty.process), ==, 4);
  pty_assert_restored (&pty);
  pty_finish (&pty);
}

/* Ended by a signal while raw: the terminal is put back all the same, and
 * the signal ends microvmctl. */
static void
test_tty_signal (Fixture *f, gconstpointer data)
{
  g_autoptr(GError) error = NULL;
  Pty pty = { 0 };

  pty_start (&pty, f, ARGS ("exec", "vm", "--", "sh", "-c", "echo started; sleep 5"));
  pty_expect (&pty, "started\n");
  g_subprocess_send_signal (pty.process, SIGTERM);
  g_subprocess_wait (pty.process, NULL, &error);
  g_assert_no_error (error);
  g_assert_true (g_subprocess_get_if_signaled (pty.process));
  g_assert_cmpint (g_subprocess_get_term_sig (pty.process), ==, SIGTERM);
  pty_assert_restored (&pty);
  pty_finish (&pty);
}

/* -T on a terminal: no tty, and the terminal is left as it is. */
static void
test_no_tty_on_terminal (Fixture *f, gconstpointer data)
{
  g_autoptr(GError) error = NULL;
  Pty pty = { 0 };
  struct termios during;

  pty_start (&pty, f, ARGS ("exec", "-T", "vm", "--", "sh", "-c", "echo tty=$FAKE_TTY; sleep 0.5"));
  pty_expect (&pty, "tty=false");
  g_assert_no_errno (tcgetattr (pty.slave, &during));
  g_assert_true (during.c_lflag & ICANON);
  g_subprocess_wait (pty.process, NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpint (g_subprocess_get_exit_status (pty.process), ==, 0);
  pty_assert_restored (&pty);
  pty_finish (&pty);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  if (argc != 3)
    {
      g_printerr ("usage: %s MICROVMCTL FAKE_MACHINE\n", argv[0]);
      return 2;
    }
  microvmctl_path = argv[1];
  fake_machine_path = argv[2];

#define ADD(path, func) g_test_add (path, Fixture, NULL, fixture_setup, func, fixture_teardown)
  ADD ("/cli/exec/exit-status", test_exit_status);
  ADD ("/cli/exec/output-streams", test_output_streams);
  ADD ("/cli/exec/stdin", test_stdin);
  ADD ("/cli/exec/large", test_large);
  ADD ("/cli/exec/closed-stdout", test_closed_stdout);
  ADD ("/cli/exec/options", test_options);
  ADD ("/cli/exec/errors", test_errors);
  ADD ("/cli/exec/tty", test_tty);
  ADD ("/cli/exec/tty-signal", test_tty_signal);
  ADD ("/cli/exec/no-tty-on-terminal", test_no_tty_on_terminal);
  ADD ("/cli/wait/result", test_wait);
  ADD ("/cli/wait/outlasts-bus-timeout", test_wait_outlasts_bus_timeout);
  return g_test_run ();
}
