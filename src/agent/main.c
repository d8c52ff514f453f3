/* microvmd-agent's modes, its poll() loop, and how the guest ends. */
#include "agent.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/reboot.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

Agent agent;

void
agent_log (const char *fmt, ...)
{
  char line[1024];
  va_list ap;
  int n;

  memcpy (line, "microvmd-agent: ", 16);
  va_start (ap, fmt);
  n = vsnprintf (line + 16, sizeof line - 17, fmt, ap);
  va_end (ap);
  if (n < 0)
    return;
  n = 16 + (n < (int) sizeof line - 17 ? n : (int) sizeof line - 18);
  line[n++] = '\n';
  if (write (agent.log_fd, line, (size_t) n) < 0)
    return;
}

int64_t
now_ms (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void
strlist_add (StrList *list, const char *item)
{
  char **items = realloc (list->items, (list->len + 2) * sizeof *items);

  if (!items)
    abort ();
  list->items = items;
  list->items[list->len] = strdup (item);
  if (!list->items[list->len])
    abort ();
  list->items[++list->len] = NULL;
}

void
strlist_free (StrList *list)
{
  for (size_t i = 0; i < list->len; i++)
    free (list->items[i]);
  free (list->items);
  list->items = NULL;
  list->len = 0;
}

/* The value of @key in a KEY=VALUE list, the last one winning. */
const char *
strlist_env (const StrList *env, const char *key)
{
  size_t klen = strlen (key);
  const char *value = NULL;

  for (size_t i = 0; i < env->len; i++)
    if (strncmp (env->items[i], key, klen) == 0 && env->items[i][klen] == '=')
      value = env->items[i] + klen + 1;
  return value;
}

bool
mkdir_parents (const char *path, mode_t mode)
{
  char buf[4096];

  if (strlen (path) >= sizeof buf)
    return false;
  strcpy (buf, path);
  for (char *p = buf + 1; *p; p++)
    if (*p == '/')
      {
        *p = '\0';
        if (mkdir (buf, mode) < 0 && errno != EEXIST)
          return false;
        *p = '/';
      }
  return true;
}

/* Writes @path through a temporary file beside it and a rename, so that
 * a reader sees the old file or the new one, never a part. */
bool
write_file_atomic (const char *path, const void *data, size_t len, mode_t mode)
{
  char tmp[4096];
  const uint8_t *p = data;
  int fd;

  if ((size_t) snprintf (tmp, sizeof tmp, "%s.tmp%ld", path, (long) getpid ()) >= sizeof tmp)
    return false;
  fd = open (tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
  if (fd < 0)
    return false;
  while (len > 0)
    {
      ssize_t n = write (fd, p, len);

      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        {
          close (fd);
          unlink (tmp);
          return false;
        }
      p += n;
      len -= (size_t) n;
    }
  if (fchmod (fd, mode) < 0 || fsync (fd) < 0 || close (fd) < 0)
    {
      unlink (tmp);
      return false;
    }
  if (rename (tmp, path) < 0)
    {
      unlink (tmp);
      return false;
    }
  return true;
}

void
set_nonblock_cloexec (int fd)
{
  fcntl (fd, F_SETFL, fcntl (fd, F_GETFL) | O_NONBLOCK);
  fcntl (fd, F_SETFD, FD_CLOEXEC);
}

/* What is queued for the hosts goes out first, for a second at most. */
static void
flush_sessions (int64_t wait_ms)
{
  int64_t deadline = now_ms () + wait_ms;

  for (;;)
    {
      struct pollfd fds[AGENT_SESSIONS_MAX];
      size_t n = 0;
      int64_t left = deadline - now_ms ();

      for (size_t i = 0; i < agent.n_sessions; i++)
        if (agent.sessions[i]->out.len > 0)
          fds[n++] = (struct pollfd) { .fd = agent.sessions[i]->fd, .events = POLLOUT };
      if (n == 0 || left <= 0)
        return;
      if (poll (fds, n, (int) left) <= 0)
        return;
      for (size_t i = agent.n_sessions; i-- > 0;)
        if (agent.sessions[i]->out.len > 0)
          session_flush (agent.sessions[i]);
    }
}

static void
log_workload_end (void)
{
  int status = agent.workload_status;

  if (!agent.workload_ended)
    return;
  if (WIFSIGNALED (status))
    agent_log ("workload killed by signal %d", WTERMSIG (status));
  else
    agent_log ("workload exited with status %d", WEXITSTATUS (status));
}

void
agent_end_guest (void)
{
  bool reboot_it = strcmp (agent.config.end, "reboot") == 0;

  flush_sessions (1000);
  log_workload_end ();
  if (agent.mode != MODE_PID1)
    exit (0);
  agent_log ("%s", reboot_it ? "rebooting" : "powering off");
  boot_release_volumes (&agent.config);
  sync ();
  reboot (reboot_it ? RB_AUTOBOOT : RB_POWER_OFF);
  /* reboot() returns only on an error; PID 1 must not exit. */
  agent_log ("reboot: %s", strerror (errno));
  for (;;)
    pause ();
}

void
agent_poweroff (void)
{
  if (agent.mode == MODE_SERVICE)
    {
      agent_log ("asking systemd to power off");
      kill (1, SIGRTMIN + 4);
      return;
    }
  if (agent.workload_pid > 0 && !agent.workload_ended)
    {
      if (agent.kill_deadline)
        return;
      agent_log ("power-off: SIGTERM to the workload");
      killpg (agent.workload_pid, SIGTERM);
      agent.kill_deadline = now_ms () + AGENT_POWEROFF_KILL_MS;
      return;
    }
  agent.end_now = true;
}

static void
workload_reaped (int status)
{
  agent.workload_ended = true;
  agent.workload_status = status;
  agent.kill_deadline = 0;
  agent.state = STATE_EXITED;
  /* Its last words reach the host before the news of its end. */
  output_drain ();
  sessions_broadcast_exit ();
  agent.exit_deadline = now_ms () + AGENT_EXIT_ACK_WAIT_MS;
}

static void
reap_children (void)
{
  int status;
  pid_t pid;

  while ((pid = waitpid (-1, &status, WNOHANG)) > 0)
    {
      if (pid == agent.workload_pid && !agent.workload_ended)
        workload_reaped (status);
      else if (!exec_reaped (pid, status))
        health_reaped (pid, status);
    }
}

static void
handle_signals (void)
{
  struct signalfd_siginfo si;

  while (read (agent.signal_fd, &si, sizeof si) == (ssize_t) sizeof si)
    {
      if (si.ssi_signo == SIGCHLD)
        continue;
      if (agent.mode == MODE_PID1)
        {
          agent_log ("signal %u: powering off", si.ssi_signo);
          agent_poweroff ();
        }
      else
        exit (0);
    }
  reap_children ();
}

static void
setup_signals (void)
{
  sigset_t set;

  signal (SIGPIPE, SIG_IGN);
  sigemptyset (&set);
  sigaddset (&set, SIGCHLD);
  sigaddset (&set, SIGTERM);
  sigaddset (&set, SIGINT);
  sigaddset (&set, SIGPWR);
  sigprocmask (SIG_BLOCK, &set, NULL);
  agent.signal_fd = signalfd (-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
  if (agent.signal_fd < 0)
    {
      agent_log ("signalfd: %s", strerror (errno));
      agent_end_guest ();
    }
}

static int64_t
earliest (int64_t a, int64_t b)
{
  if (a <= 0)
    return b;
  if (b <= 0)
    return a;
  return a < b ? a : b;
}

/* The serial port reports POLLHUP for as long as no host is connected;
 * being level-triggered, it is looked at again on a timer rather than
 * polled for. */
static void
serial_check (void)
{
  struct pollfd p = { .fd = agent.serial_fd, .events = POLLIN };

  if (poll (&p, 1, 0) < 0 || (p.revents & POLLHUP))
    return;
  agent.serial_hup = false;
  agent_log ("a host connected to %s", agent.serial_path);
  session_send_hello (session_new (agent.serial_fd, true));
}

static void
accept_session (void)
{
  int fd = accept4 (agent.listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

  if (fd < 0)
    return;
  if (agent.n_sessions >= AGENT_SESSIONS_MAX)
    {
      agent_log ("vsock: %d sessions already, refusing another", AGENT_SESSIONS_MAX);
      close (fd);
      return;
    }
  session_new (fd, false);
}

static void
run_loop (void)
{
  for (;;)
    {
      struct pollfd fds[11 + AGENT_SESSIONS_MAX + MV_AGENT_EXECS_MAX * 3];
      size_t n = 0;
      int64_t deadline, now;
      int timeout = -1;

      fds[n++] = (struct pollfd) { .fd = agent.signal_fd, .events = POLLIN };
      agent.listen_pidx = -1;
      if (agent.listen_fd >= 0 && agent.n_sessions < AGENT_SESSIONS_MAX)
        {
          agent.listen_pidx = (int) n;
          fds[n++] = (struct pollfd) { .fd = agent.listen_fd, .events = POLLIN };
        }
      for (size_t i = 0; i < agent.n_sessions; i++)
        {
          Session *s = agent.sessions[i];
          short events = 0;

          if (s->in_len < MV_AGENT_FRAME_MAX_BYTES && s->out.len < AGENT_OUT_HIGH_BYTES)
            events |= POLLIN;
          if (s->out.len > 0)
            events |= POLLOUT;
          s->pidx = (int) n;
          fds[n++] = (struct pollfd) { .fd = s->fd, .events = events };
        }
      n = exec_poll_add (fds, n);
      n = health_poll_add (fds, n);
      n = output_poll_add (fds, n);
      n = cpus_poll_add (fds, n);
      for (size_t i = 0; i < agent.n_buttons; i++)
        {
          agent.button_pidx[i] = (int) n;
          fds[n++] = (struct pollfd) { .fd = agent.button_fds[i], .events = POLLIN };
        }

      deadline = earliest (exec_next_deadline (), health_next_deadline ());
      deadline = earliest (deadline, usage_next_deadline ());
      deadline = earliest (deadline, agent.exit_deadline);
      deadline = earliest (deadline, agent.kill_deadline);
      if (agent.serial_fd >= 0 && agent.serial_hup)
        deadline = earliest (deadline, now_ms () + 200);
      if (deadline > 0)
        {
          int64_t left = deadline - now_ms ();
          timeout = left < 0 ? 0 : (int) (left > 60000 ? 60000 : left);
        }

      if (poll (fds, n, timeout) < 0 && errno != EINTR)
        {
          agent_log ("poll: %s", strerror (errno));
          agent_end_guest ();
        }

      if (fds[0].revents)
        handle_signals ();
      if (agent.listen_pidx >= 0 && fds[agent.listen_pidx].revents)
        accept_session ();
      for (size_t i = agent.n_sessions; i-- > 0;)
        {
          Session *s = agent.sessions[i];
          short revents = s->pidx >= 0 ? fds[s->pidx].revents : 0;

          if (s->serial && (revents & POLLHUP))
            {
              agent_log ("the host left %s", agent.serial_path);
              session_close (s);
              agent.serial_hup = true;
              continue;
            }
          if (revents & POLLOUT)
            if (!session_flush (s))
              continue;
          if (revents & (POLLIN | POLLHUP | POLLERR))
            session_handle_input (s);
        }
      exec_poll_dispatch (fds);
      health_poll_dispatch (fds);
      output_poll_dispatch (fds);
      cpus_poll_dispatch (fds);
      for (size_t i = 0; i < agent.n_buttons; i++)
        if (fds[agent.button_pidx[i]].revents)
          {
            char ev[256];

            while (read (agent.button_fds[i], ev, sizeof ev) > 0)
              ;
            if (!agent.kill_deadline && !agent.end_now)
              agent_log ("power button pressed");
            agent_poweroff ();
          }

      if (agent.serial_fd >= 0 && agent.serial_hup)
        serial_check ();
      exec_timers ();
      health_timers ();
      usage_timers ();
      now = now_ms ();
      if (agent.kill_deadline && now >= agent.kill_deadline)
        {
          agent_log ("power-off: SIGKILL to the workload");
          killpg (agent.workload_pid, SIGKILL);
          agent.kill_deadline = 0;
        }
      if (agent.exit_deadline && now >= agent.exit_deadline)
        {
          agent_log ("no EXIT_ACK within %d s", AGENT_EXIT_ACK_WAIT_MS / 1000);
          agent.end_now = true;
        }
      if (agent.end_now || agent.quit)
        agent_end_guest ();
    }
}

static int
usage (void)
{
  fprintf (stderr,
           "usage: microvmd-agent              (as the guest's /init)\n"
           "       microvmd-agent --service    (under systemd)\n"
           "       microvmd-agent authorized-keys [USER] [--state-dir DIR]\n"
           "       microvmd-agent --serve-fd N --state-dir DIR\n");
  return 2;
}

int
main (int argc, char **argv)
{
  int serve_fd = -1;
  bool service = false, keys = false;

  struct timespec started;

  clock_gettime (CLOCK_BOOTTIME, &started);
  agent.instance = (uint64_t) started.tv_sec * 1000000000u + (uint64_t) started.tv_nsec;
  agent.log_fd = STDERR_FILENO;
  agent.state_dir = AGENT_STATE_DIR;
  agent.listen_fd = agent.serial_fd = -1;
  snprintf (agent.config.end, sizeof agent.config.end, "poweroff");
  for (int i = 1; i < argc; i++)
    {
      if (strcmp (argv[i], "--service") == 0)
        service = true;
      else if (strcmp (argv[i], "authorized-keys") == 0)
        keys = true;
      else if (strcmp (argv[i], "--serve-fd") == 0 && i + 1 < argc)
        serve_fd = atoi (argv[++i]);
      else if (strcmp (argv[i], "--state-dir") == 0 && i + 1 < argc)
        agent.state_dir = argv[++i];
      else if (keys && argv[i][0] != '-')
        ;  /* the user sshd asks for: the keys are the same for every account */
      else if (getpid () != 1)
        return usage ();
    }

  if (keys)
    return authorized_keys_print (agent.state_dir);

  if (serve_fd >= 0)
    {
      agent.mode = MODE_TEST;
      setup_signals ();
      set_nonblock_cloexec (serve_fd);
      session_new (serve_fd, false);
    }
  else if (service)
    {
      agent.mode = MODE_SERVICE;
      agent.state = STATE_RUNNING;
      setup_signals ();
      if (!state_load (&agent.config))
        agent_log ("no saved state in %s: serving without it", agent.state_dir);
      agent.have_config = true;
      if (agent.config.health.configured)
        {
          MvUser user;
          char error[256];

          if (mv_user_lookup ("/", agent.config.user, &user, error, sizeof error))
            health_start (&agent.config.health, &user, &agent.config.env);
          else
            agent_log ("health check: %s", error);
        }
      if (!boot_open_channel (true))
        return 1;
    }
  else if (getpid () == 1)
    {
      agent.mode = MODE_PID1;
      boot_early ();
      setup_signals ();
      boot_open_power_buttons ();
      if (!boot_open_channel (true))
        {
          agent_log ("no agent channel: powering off");
          agent_end_guest ();
        }
    }
  else
    return usage ();

  cpus_start ();
  run_loop ();
  return 0;
}
