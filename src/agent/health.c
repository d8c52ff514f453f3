/* The health check: a command, a TCP connect or an HTTP GET on
 * 127.0.0.1, run every INTERVAL in the poll loop, never two at once. */
#include "agent.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

typedef enum { HEALTH_STARTING, HEALTH_HEALTHY, HEALTH_UNHEALTHY } HealthStatus;

static struct {
  bool         active;
  HealthCheck  check;
  MvUser       user;
  StrList      env;
  HealthStatus status;
  uint32_t     streak;
  int64_t      started_at;
  int64_t      next_run;

  /* The run in progress. */
  bool         running;
  int64_t      deadline;
  pid_t        pid;           /* exec check, until reaped */
  int          status_code;   /* its wait status */
  int          fd;            /* its output pipe, or the socket */
  bool         connected;     /* tcp / http */
  char         output[AGENT_HEALTH_OUTPUT_MAX + 1];
  size_t       output_len;
  char         last_output[AGENT_HEALTH_OUTPUT_MAX + 1];
  int          pidx;
} health = { .fd = -1, .pidx = -1 };

static const char *
status_name (HealthStatus status)
{
  switch (status)
    {
    case HEALTH_HEALTHY: return "healthy";
    case HEALTH_UNHEALTHY: return "unhealthy";
    default: return "starting";
    }
}

bool
health_put (MvAgentBuf *buf)
{
  if (!health.active)
    return false;
  mv_agent_buf_begin (buf, MV_AGENT_HEALTH, 0);
  mv_agent_buf_put_str (buf, MV_AGENT_F_HEALTH_STATUS, status_name (health.status));
  mv_agent_buf_put_u32 (buf, MV_AGENT_F_FAILING_STREAK, health.streak);
  mv_agent_buf_put_str (buf, MV_AGENT_F_OUTPUT, health.last_output);
  return mv_agent_buf_end (buf);
}

void
health_start (const HealthCheck *check, const MvUser *user, const StrList *env)
{
  health.active = true;
  health.check = *check;
  if (!health.check.interval)
    health.check.interval = 30;
  if (!health.check.timeout)
    health.check.timeout = 30;
  if (!health.check.retries)
    health.check.retries = 3;
  health.user = *user;
  exec_build_env (user, env, &health.env);
  health.status = HEALTH_STARTING;
  health.started_at = now_ms ();
  health.next_run = health.started_at;
  agent_log ("health check every %u s", health.check.interval);
}

static void
output_printf (const char *fmt, ...) __attribute__ ((format (printf, 1, 2)));

static void
output_printf (const char *fmt, ...)
{
  va_list ap;
  int n;

  va_start (ap, fmt);
  n = vsnprintf (health.output, sizeof health.output, fmt, ap);
  va_end (ap);
  health.output_len = n < 0 ? 0 : ((size_t) n < sizeof health.output ? (size_t) n : sizeof health.output - 1);
}

static void
finish_run (bool passed)
{
  HealthStatus next = health.status;
  int64_t now = now_ms ();

  if (health.fd >= 0)
    close (health.fd);
  health.fd = -1;
  health.running = false;
  health.connected = false;
  health.output[health.output_len] = '\0';
  /* Only valid UTF-8 would do for a string field; what the check printed
   * is kept to printable ASCII and whitespace. */
  for (size_t i = 0; i < health.output_len; i++)
    {
      unsigned char c = (unsigned char) health.output[i];

      if ((c < 0x20 && c != '\n' && c != '\t') || c >= 0x7f)
        health.output[i] = '?';
    }
  memcpy (health.last_output, health.output, health.output_len + 1);
  if (passed)
    {
      health.streak = 0;
      next = HEALTH_HEALTHY;
    }
  else if (health.status != HEALTH_STARTING ||
           now >= health.started_at + (int64_t) health.check.start_period * 1000)
    {
      health.streak++;
      if (health.streak >= health.check.retries)
        next = HEALTH_UNHEALTHY;
    }
  if (next != health.status)
    {
      health.status = next;
      agent_log ("health: %s (%u failing)", status_name (next), health.streak);
      sessions_broadcast_health ();
    }
}

static void
run_exec (void)
{
  char path[4096], error[512];
  int p[2];
  pid_t pid;

  if (exec_resolve (health.check.argv.items[0], strlist_env (&health.env, "PATH"), path,
                    sizeof path, error, sizeof error) != 0)
    {
      output_printf ("%s", error);
      finish_run (false);
      return;
    }
  if (pipe2 (p, O_CLOEXEC) < 0)
    {
      output_printf ("pipe: %s", strerror (errno));
      finish_run (false);
      return;
    }
  pid = spawn_process (path, health.check.argv.items, health.env.items, &health.user, NULL,
                       -1, p[1], p[1], NULL, error, sizeof error);
  close (p[1]);
  if (pid < 0)
    {
      close (p[0]);
      output_printf ("%s", error);
      finish_run (false);
      return;
    }
  set_nonblock_cloexec (p[0]);
  health.pid = pid;
  health.fd = p[0];
}

static void
run_connect (void)
{
  struct sockaddr_in addr = { .sin_family = AF_INET, .sin_port = htons ((uint16_t) health.check.port),
                              .sin_addr.s_addr = htonl (INADDR_LOOPBACK) };

  health.fd = socket (AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (health.fd < 0)
    {
      output_printf ("socket: %s", strerror (errno));
      finish_run (false);
      return;
    }
  if (connect (health.fd, (struct sockaddr *) &addr, sizeof addr) < 0 && errno != EINPROGRESS)
    {
      output_printf ("connect to 127.0.0.1:%u: %s", health.check.port, strerror (errno));
      finish_run (false);
    }
}

static void
run_start (void)
{
  health.running = true;
  health.output_len = 0;
  health.pid = 0;
  health.status_code = 0;
  health.deadline = now_ms () + (int64_t) health.check.timeout * 1000;
  health.next_run = now_ms () + (int64_t) health.check.interval * 1000;
  if (health.check.argv.len > 0)
    run_exec ();
  else
    run_connect ();
}

size_t
health_poll_add (struct pollfd *fds, size_t n)
{
  health.pidx = -1;
  if (!health.running || health.fd < 0)
    return n;
  health.pidx = (int) n;
  fds[n++] = (struct pollfd) { .fd = health.fd,
                               .events = (health.check.argv.len == 0 && !health.connected) ? POLLOUT
                                                                                          : POLLIN };
  return n;
}

/* An exec check ends when its process is reaped and its output closed. */
static void
exec_check_done (void)
{
  if (health.pid != 0 || health.fd >= 0 || !health.running)
    return;
  if (WIFEXITED (health.status_code) && health.output_len == 0)
    output_printf ("exit status %d", WEXITSTATUS (health.status_code));
  finish_run (WIFEXITED (health.status_code) && WEXITSTATUS (health.status_code) == 0);
}

static void
read_exec_output (void)
{
  char chunk[4096];
  ssize_t n;

  while ((n = read (health.fd, chunk, sizeof chunk)) > 0)
    {
      size_t room = AGENT_HEALTH_OUTPUT_MAX - health.output_len;
      size_t take = (size_t) n < room ? (size_t) n : room;

      memcpy (health.output + health.output_len, chunk, take);
      health.output_len += take;
    }
  if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
    {
      close (health.fd);
      health.fd = -1;
      exec_check_done ();
    }
}

/* The HTTP status line "HTTP/1.x NNN ...": 2xx and 3xx pass. */
static void
read_http (void)
{
  ssize_t n = read (health.fd, health.output + health.output_len,
                    AGENT_HEALTH_OUTPUT_MAX - health.output_len);
  char *eol;
  int code = 0;

  if (n < 0 && (errno == EAGAIN || errno == EINTR))
    return;
  if (n > 0)
    health.output_len += (size_t) n;
  health.output[health.output_len] = '\0';
  eol = strstr (health.output, "\r\n");
  if (!eol && n > 0 && health.output_len < AGENT_HEALTH_OUTPUT_MAX)
    return;
  if (eol)
    *eol = '\0';
  health.output_len = strlen (health.output);
  if (sscanf (health.output, "HTTP/%*d.%*d %d", &code) != 1)
    {
      if (n < 0)
        output_printf ("read: %s", strerror (errno));
      else if (health.output_len == 0)
        output_printf ("no HTTP answer from 127.0.0.1:%u", health.check.port);
    }
  finish_run (code >= 200 && code < 400);
}

static void
connected (void)
{
  int err = 0;
  socklen_t len = sizeof err;
  char request[4096];
  int n;

  getsockopt (health.fd, SOL_SOCKET, SO_ERROR, &err, &len);
  if (err)
    {
      output_printf ("connect to 127.0.0.1:%u: %s", health.check.port, strerror (err));
      finish_run (false);
      return;
    }
  if (!health.check.path)
    {
      output_printf ("connected to 127.0.0.1:%u", health.check.port);
      finish_run (true);
      return;
    }
  health.connected = true;
  n = snprintf (request, sizeof request,
                "GET %s HTTP/1.0\r\nHost: 127.0.0.1:%u\r\nUser-Agent: microvmd-agent\r\nConnection: close\r\n\r\n",
                health.check.path[0] == '/' ? health.check.path : "/", health.check.port);
  /* A request this small fits in a fresh socket's buffer. */
  if (n < 0 || (size_t) n >= sizeof request || write (health.fd, request, (size_t) n) != n)
    {
      output_printf ("could not send the request to 127.0.0.1:%u", health.check.port);
      finish_run (false);
    }
}

void
health_poll_dispatch (struct pollfd *fds)
{
  if (health.pidx < 0 || !fds[health.pidx].revents || health.fd < 0)
    return;
  if (health.check.argv.len > 0)
    read_exec_output ();
  else if (!health.connected)
    connected ();
  else
    read_http ();
}

bool
health_reaped (pid_t pid, int status)
{
  if (!health.active || pid != health.pid || pid == 0)
    return false;
  health.pid = 0;
  health.status_code = status;
  exec_check_done ();
  return true;
}

int64_t
health_next_deadline (void)
{
  if (!health.active)
    return 0;
  return health.running ? health.deadline : health.next_run;
}

void
health_timers (void)
{
  int64_t now = now_ms ();

  if (!health.active)
    return;
  if (health.running && now >= health.deadline)
    {
      if (health.pid > 0)
        killpg (health.pid, SIGKILL);
      /* Reaped later; that pid no longer counts. */
      health.pid = 0;
      output_printf ("timed out after %u s", health.check.timeout);
      finish_run (false);
    }
  if (!health.running && now >= health.next_run)
    run_start ();
}
