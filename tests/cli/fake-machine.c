/* A stand-in for microvmd's Machine.Exec and Machine.Wait on a private
 * bus, for microvmctl's tests: Exec runs the command on this host, with a
 * socket pair for each stream and "exit N" or "signal N" on the status
 * socket once it has ended.
 *
 *   fake-machine ADDRESS
 *
 * prints "ready" once it owns the bus name. Machines exist by name, except
 * "missing". What Exec's options asked for reaches the command as
 * FAKE_TTY, FAKE_ROWS, FAKE_COLUMNS and FAKE_USER; the command
 * "fake-status LINE" runs nothing and sends LINE as the status. Wait
 * answers by the machine's name: "stopped3" stopped with exit code 3,
 * "failed" failed, "slow" stops after two seconds, any other is Stopped;
 * "healthy" is healthy for the "healthy" condition. The result also says
 * what the call asked: seen_condition, seen_id, seen_next_stop. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <glib.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>

#include "names.h"

G_DEFINE_AUTOPTR_CLEANUP_FUNC (sd_bus_message, sd_bus_message_unref)

#define SLOW_WAIT_USEC (2 * G_USEC_PER_SEC)

static int
get_machine (sd_bus_message *m, void *userdata, sd_bus_error *error)
{
  g_autofree char *path = NULL;
  const char *name;
  int r;

  r = sd_bus_message_read (m, "s", &name);
  if (r < 0)
    return r;
  if (g_str_equal (name, "missing"))
    return sd_bus_error_setf (error, MV_BUS_ERROR_NOT_FOUND, "No machine is called '%s'", name);
  r = sd_bus_path_encode (MV_MACHINE_PREFIX, name, &path);
  if (r < 0)
    return r;
  return sd_bus_reply_method_return (m, "o", path);
}

static const sd_bus_vtable manager_vtable[] = {
  SD_BUS_VTABLE_START (0),
  SD_BUS_METHOD ("GetMachine", "s", "o", get_machine, 0),
  SD_BUS_VTABLE_END,
};

typedef struct {
  gboolean tty;
  guint32 rows, columns;
  char *user;
  char *working_dir;
} ExecOptions;

static int
read_exec_options (sd_bus_message *m, ExecOptions *options)
{
  const char *key;
  int r;

  r = sd_bus_message_enter_container (m, 'a', "{sv}");
  if (r < 0)
    return r;
  while ((r = sd_bus_message_enter_container (m, 'e', "sv")) > 0)
    {
      const char *s;
      int b;

      r = sd_bus_message_read (m, "s", &key);
      if (r < 0)
        return r;
      if (g_str_equal (key, "tty"))
        r = sd_bus_message_read (m, "v", "b", &b), options->tty = b;
      else if (g_str_equal (key, "rows"))
        r = sd_bus_message_read (m, "v", "u", &options->rows);
      else if (g_str_equal (key, "columns"))
        r = sd_bus_message_read (m, "v", "u", &options->columns);
      else if (g_str_equal (key, "user"))
        r = sd_bus_message_read (m, "v", "s", &s), options->user = g_strdup (s);
      else if (g_str_equal (key, "working_dir"))
        r = sd_bus_message_read (m, "v", "s", &s), options->working_dir = g_strdup (s);
      else
        r = -EINVAL;
      if (r < 0)
        return r;
      r = sd_bus_message_exit_container (m);
      if (r < 0)
        return r;
    }
  if (r < 0)
    return r;
  return sd_bus_message_exit_container (m);
}

/* In the child: becomes the command. */
static void G_GNUC_NORETURN
run_command (char **argv, char **env, const ExecOptions *options, int in, int out, int err)
{
  if (dup2 (in, 0) < 0 || dup2 (out, 1) < 0 || dup2 (err, 2) < 0)
    _exit (127);
  for (guint i = 0; env[i] != NULL; i += 2)
    setenv (env[i], env[i + 1], 1);
  setenv ("FAKE_TTY", options->tty ? "true" : "false", 1);
  if (options->rows > 0)
    {
      g_autofree char *rows = g_strdup_printf ("%u", options->rows);
      g_autofree char *columns = g_strdup_printf ("%u", options->columns);
      setenv ("FAKE_ROWS", rows, 1);
      setenv ("FAKE_COLUMNS", columns, 1);
    }
  setenv ("FAKE_USER", options->user != NULL ? options->user : "root", 1);
  if (options->working_dir != NULL && chdir (options->working_dir) < 0)
    _exit (126);
  signal (SIGPIPE, SIG_DFL);
  execvp (argv[0], argv);
  _exit (127);
}

/* In the monitor: runs the command and reports its end. */
static void G_GNUC_NORETURN
monitor_command (char **argv, char **env, const ExecOptions *options,
                 int in, int out, int err, int status)
{
  g_autofree char *line = NULL;
  pid_t pid;
  int wstatus;

  /* The server ignores it; we wait for the command. */
  signal (SIGCHLD, SIG_DFL);
  if (g_str_equal (argv[0], "fake-status"))
    {
      line = g_strdup (argv[1] != NULL ? argv[1] : "");
    }
  else
    {
      pid = fork ();
      if (pid < 0)
        _exit (1);
      if (pid == 0)
        run_command (argv, env, options, in, out, err);
      close (in);
      close (out);
      close (err);
      while (waitpid (pid, &wstatus, 0) < 0)
        if (errno != EINTR)
          _exit (1);
      if (WIFSIGNALED (wstatus))
        line = g_strdup_printf ("signal %d\n", WTERMSIG (wstatus));
      else
        line = g_strdup_printf ("exit %d\n", WEXITSTATUS (wstatus));
    }
  if (write (status, line, strlen (line)) < 0)
    _exit (1);
  _exit (0);
}

static int
exec_method (sd_bus_message *m, void *userdata, sd_bus_error *error)
{
  g_auto(GStrv) argv = NULL;
  g_autoptr(GPtrArray) env = g_ptr_array_new_with_free_func (g_free);
  ExecOptions options = { 0 };
  /* [0] ours, [1] the command's. */
  int in[2], out[2], err[2], status[2];
  const char *key, *value;
  pid_t monitor;
  int r;

  r = sd_bus_message_read_strv (m, &argv);
  if (r < 0)
    return r;
  r = sd_bus_message_enter_container (m, 'a', "{ss}");
  if (r < 0)
    return r;
  while ((r = sd_bus_message_read (m, "{ss}", &key, &value)) > 0)
    {
      g_ptr_array_add (env, g_strdup (key));
      g_ptr_array_add (env, g_strdup (value));
    }
  if (r < 0)
    return r;
  g_ptr_array_add (env, NULL);
  r = sd_bus_message_exit_container (m);
  if (r >= 0)
    r = read_exec_options (m, &options);
  if (r < 0)
    return sd_bus_error_setf (error, MV_BUS_ERROR_INVALID_ARGUMENT, "Bad arguments: %s",
                              g_strerror (-r));
  if (argv == NULL || argv[0] == NULL)
    return sd_bus_error_setf (error, MV_BUS_ERROR_INVALID_ARGUMENT, "No command");

  if (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, in) < 0 ||
      socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, err) < 0 ||
      socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, status) < 0)
    return -errno;
  if (options.tty)
    {
      /* One socket for input and output; no error output. */
      out[0] = dup (in[0]);
      out[1] = dup (in[1]);
      close (err[1]);
      err[1] = dup (in[1]);
    }
  else if (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, out) < 0)
    {
      return -errno;
    }

  monitor = fork ();
  if (monitor < 0)
    return -errno;
  if (monitor == 0)
    {
      close (in[0]);
      close (out[0]);
      close (err[0]);
      close (status[0]);
      monitor_command (argv, (char **) env->pdata, &options, in[1], out[1], err[1], status[1]);
    }
  close (in[1]);
  close (out[1]);
  close (err[1]);
  close (status[1]);
  if (options.tty)
    {
      close (err[0]);
      err[0] = open ("/dev/null", O_RDONLY | O_CLOEXEC);
    }

  r = sd_bus_reply_method_return (m, "hhhh", in[0], out[0], err[0], status[0]);
  close (in[0]);
  close (out[0]);
  close (err[0]);
  close (status[0]);
  g_free (options.user);
  g_free (options.working_dir);
  return r;
}

static int
reply_wait (sd_bus_message *m, const char *name, const char *condition,
            const char *id, int next_stop)
{
  g_autoptr(sd_bus_message) reply = NULL;
  int r;

  r = sd_bus_message_new_method_return (m, &reply);
  if (r >= 0)
    r = sd_bus_message_open_container (reply, 'a', "{sv}");
  if (r < 0)
    return r;

  if (g_str_equal (condition, "healthy"))
    r = sd_bus_message_append (reply, "{sv}{sv}", "state", "s", "Running",
                               "health", "s", g_str_equal (name, "healthy") ? "healthy" : "starting");
  else if (g_str_equal (name, "stopped3"))
    r = sd_bus_message_append (reply, "{sv}{sv}", "state", "s", "Stopped", "exit_code", "i", 3);
  else if (g_str_equal (name, "failed"))
    r = sd_bus_message_append (reply, "{sv}{sv}", "state", "s", "Failed",
                               "error", "s", "the VMM crashed");
  else
    r = sd_bus_message_append (reply, "{sv}", "state", "s", "Stopped");
  if (r >= 0)
    r = sd_bus_message_append (reply, "{sv}", "seen_condition", "s", condition);
  if (r >= 0 && id != NULL)
    r = sd_bus_message_append (reply, "{sv}", "seen_id", "s", id);
  if (r >= 0 && next_stop >= 0)
    r = sd_bus_message_append (reply, "{sv}", "seen_next_stop", "b", next_stop);
  if (r >= 0)
    r = sd_bus_message_close_container (reply);
  if (r < 0)
    return r;
  return sd_bus_send (NULL, reply, NULL);
}

static int
reply_slow_wait (sd_event_source *source, uint64_t usec, void *userdata)
{
  sd_bus_message *m = userdata;

  (void) reply_wait (m, "slow", "stopped", NULL, -1);
  sd_bus_message_unref (m);
  sd_event_source_unref (source);
  return 0;
}

static int
wait_method (sd_bus_message *m, void *userdata, sd_bus_error *error)
{
  g_autofree char *name = NULL;
  g_autofree char *id = NULL;
  const char *condition, *key;
  int next_stop = -1;
  int r;

  r = sd_bus_path_decode (sd_bus_message_get_path (m), MV_MACHINE_PREFIX, &name);
  if (r <= 0)
    return sd_bus_error_setf (error, SD_BUS_ERROR_UNKNOWN_OBJECT, "No such machine");

  r = sd_bus_message_read (m, "s", &condition);
  if (r >= 0)
    r = sd_bus_message_enter_container (m, 'a', "{sv}");
  if (r < 0)
    return r;
  while ((r = sd_bus_message_enter_container (m, 'e', "sv")) > 0)
    {
      const char *s;

      r = sd_bus_message_read (m, "s", &key);
      if (r >= 0 && g_str_equal (key, "id"))
        r = sd_bus_message_read (m, "v", "s", &s), id = g_strdup (s);
      else if (r >= 0 && g_str_equal (key, "next_stop"))
        r = sd_bus_message_read (m, "v", "b", &next_stop);
      else if (r >= 0)
        r = -EINVAL;
      if (r < 0)
        return r;
      r = sd_bus_message_exit_container (m);
      if (r < 0)
        return r;
    }
  if (r < 0)
    return r;

  if (g_str_equal (name, "slow"))
    {
      r = sd_event_add_time_relative (sd_bus_get_event (sd_bus_message_get_bus (m)), NULL,
                                      CLOCK_MONOTONIC, SLOW_WAIT_USEC, 0,
                                      reply_slow_wait, sd_bus_message_ref (m));
      /* Handled; the reply comes later. */
      return r < 0 ? r : 1;
    }
  return reply_wait (m, name, condition, id, next_stop);
}

static const sd_bus_vtable machine_vtable[] = {
  SD_BUS_VTABLE_START (0),
  SD_BUS_METHOD ("Exec", "asa{ss}a{sv}", "hhhh", exec_method, 0),
  SD_BUS_METHOD ("Wait", "sa{sv}", "a{sv}", wait_method, 0),
  SD_BUS_VTABLE_END,
};

static int
find_machine (sd_bus *bus, const char *path, const char *interface, void *userdata,
              void **found, sd_bus_error *error)
{
  g_autofree char *name = NULL;

  if (sd_bus_path_decode (path, MV_MACHINE_PREFIX, &name) <= 0 || name[0] == '\0')
    return 0;
  *found = NULL;
  return 1;
}

int
main (int argc, char **argv)
{
  sd_event *event = NULL;
  sd_bus *bus = NULL;
  int r;

  if (argc != 2)
    {
      fprintf (stderr, "usage: fake-machine ADDRESS\n");
      return 2;
    }

  r = sd_event_default (&event);
  if (r >= 0)
    r = sd_bus_new (&bus);
  if (r >= 0)
    r = sd_bus_set_address (bus, argv[1]);
  if (r >= 0)
    r = sd_bus_set_bus_client (bus, 1);
  if (r >= 0)
    r = sd_bus_negotiate_fds (bus, 1);
  if (r >= 0)
    r = sd_bus_start (bus);
  if (r >= 0)
    r = sd_bus_add_object_vtable (bus, NULL, MV_MANAGER_PATH, MV_MANAGER_IFACE,
                                  manager_vtable, NULL);
  if (r >= 0)
    r = sd_bus_add_fallback_vtable (bus, NULL, MV_MACHINE_PREFIX, MV_MACHINE_IFACE,
                                    machine_vtable, find_machine, NULL);
  if (r >= 0)
    r = sd_bus_request_name (bus, MV_BUS_NAME, 0);
  if (r >= 0)
    r = sd_bus_attach_event (bus, event, 0);
  /* Ends when the bus goes. */
  if (r >= 0)
    r = sd_bus_set_exit_on_disconnect (bus, 1);
  if (r < 0)
    {
      fprintf (stderr, "fake-machine: %s\n", g_strerror (-r));
      return 1;
    }

  /* Ended commands' monitors are not waited for. */
  signal (SIGCHLD, SIG_IGN);
  printf ("ready\n");
  fflush (stdout);

  r = sd_event_loop (event);
  sd_bus_flush_close_unref (bus);
  sd_event_unref (event);
  return r < 0 ? 1 : 0;
}
