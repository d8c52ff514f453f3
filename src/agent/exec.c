/* Processes: starting them (the workload, EXEC channels, health checks)
 * and the EXEC channels' streams with their flow control. */
#include "agent.h"
#include "guest/sha256.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

/* Output of an exited process is read for this long at most once the
 * host has credit for it: a daemon it left behind may hold the pipe. */
#define DRAIN_AFTER_EXIT_MS 2000

/* ---- starting processes ---- */

static bool
is_executable (const char *path, bool *exists)
{
  struct stat st;

  *exists = stat (path, &st) == 0;
  return *exists && S_ISREG (st.st_mode) && access (path, X_OK) == 0;
}

int
exec_resolve (const char *name, const char *path_list, char *out, size_t out_size,
              char *error, size_t size)
{
  bool exists, seen = false;

  if (!name[0])
    {
      snprintf (error, size, "cmd: an empty command");
      return 127;
    }
  if (strchr (name, '/'))
    {
      if ((size_t) snprintf (out, out_size, "%s", name) >= out_size)
        {
          snprintf (error, size, "cmd: %.64s...: path too long", name);
          return 127;
        }
      if (is_executable (out, &exists))
        return 0;
      snprintf (error, size, exists ? "cmd: %s: not executable" : "cmd: %s: no such file in the guest",
                name);
      return exists ? 126 : 127;
    }
  for (const char *dir = path_list ? path_list : ""; *dir;)
    {
      size_t len = strcspn (dir, ":");

      if (len > 0 && (size_t) snprintf (out, out_size, "%.*s/%s", (int) len, dir, name) < out_size)
        {
          if (is_executable (out, &exists))
            return 0;
          seen = seen || exists;
        }
      dir += len;
      if (*dir == ':')
        dir++;
    }
  if (seen)
    {
      snprintf (error, size, "cmd: %s: not executable", name);
      return 126;
    }
  snprintf (error, size, "cmd: %s: not found in the guest's PATH", name);
  return 127;
}

static void
env_set (StrList *env, const char *item)
{
  size_t klen = strcspn (item, "=");

  for (size_t i = 0; i < env->len; i++)
    if (strncmp (env->items[i], item, klen) == 0 && env->items[i][klen] == '=')
      {
        char *copy = strdup (item);

        if (!copy)
          abort ();
        free (env->items[i]);
        env->items[i] = copy;
        return;
      }
  strlist_add (env, item);
}

void
exec_build_env (const MvUser *user, const StrList *extra, StrList *env)
{
  char home[sizeof user->home + 8];

  snprintf (home, sizeof home, "HOME=%s", user->home);
  strlist_add (env, "PATH=" AGENT_BASE_PATH);
  strlist_add (env, home);
  strlist_add (env, "TERM=linux");
  for (size_t i = 0; extra && i < extra->len; i++)
    if (strchr (extra->items[i], '='))
      env_set (env, extra->items[i]);
}

bool
agent_user_lookup (const char *spec, MvUser *user, char *error, size_t size)
{
  /* The test mode runs as whoever started it, unless told otherwise as
   * root. */
  if (agent.mode == MODE_TEST && (!spec || !spec[0] || getuid () != 0))
    {
      const char *home = getenv ("HOME");

      memset (user, 0, sizeof *user);
      user->uid = getuid ();
      user->gid = getgid ();
      snprintf (user->home, sizeof user->home, "%s", home && home[0] == '/' ? home : "/");
      return true;
    }
  return mv_user_lookup ("/", spec, user, error, size);
}

enum { STAGE_CHDIR = 1, STAGE_IDS, STAGE_EXEC, STAGE_TTY };

static void __attribute__ ((noreturn))
child_fail (int pipe_fd, int stage)
{
  int report[2] = { stage, errno };

  if (write (pipe_fd, report, sizeof report) < 0)
    _exit (127);
  _exit (127);
}

static void
child_setup_fd (int fd, int target, int pipe_fd)
{
  if (fd < 0)
    {
      fd = open ("/dev/null", O_RDWR);
      if (fd < 0)
        child_fail (pipe_fd, STAGE_TTY);
    }
  if (fd == target)
    fcntl (fd, F_SETFD, 0);
  else if (dup2 (fd, target) < 0)
    child_fail (pipe_fd, STAGE_TTY);
}

pid_t
spawn_process (const char *path, char *const argv[], char *const envp[],
               const MvUser *user, const char *workdir,
               int in_fd, int out_fd, int err_fd, const char *tty_slave,
               char *error, size_t size)
{
  int report_pipe[2], report[2];
  ssize_t n;
  pid_t pid;

  if (pipe2 (report_pipe, O_CLOEXEC) < 0)
    {
      snprintf (error, size, "pipe: %s", strerror (errno));
      return -125;
    }
  pid = fork ();
  if (pid < 0)
    {
      snprintf (error, size, "fork: %s", strerror (errno));
      close (report_pipe[0]);
      close (report_pipe[1]);
      return -125;
    }
  if (pid == 0)
    {
      sigset_t none;

      sigemptyset (&none);
      sigprocmask (SIG_SETMASK, &none, NULL);
      signal (SIGPIPE, SIG_DFL);
      setsid ();
      if (tty_slave)
        {
          int fd = open (tty_slave, O_RDWR);

          if (fd < 0 || ioctl (fd, TIOCSCTTY, 0) < 0)
            child_fail (report_pipe[1], STAGE_TTY);
          in_fd = out_fd = err_fd = fd;
        }
      /* stderr first: the workload's out and err may be our own stderr. */
      child_setup_fd (in_fd, STDIN_FILENO, report_pipe[1]);
      child_setup_fd (out_fd, STDOUT_FILENO, report_pipe[1]);
      child_setup_fd (err_fd, STDERR_FILENO, report_pipe[1]);
      if (workdir && workdir[0])
        {
          if (chdir (workdir) < 0)
            child_fail (report_pipe[1], STAGE_CHDIR);
        }
      else if (chdir (user->home) < 0 && chdir ("/") < 0)
        child_fail (report_pipe[1], STAGE_CHDIR);
      if (getuid () == 0)
        {
          if (setgroups (user->n_groups, user->groups) < 0 || setgid (user->gid) < 0 ||
              setuid (user->uid) < 0)
            child_fail (report_pipe[1], STAGE_IDS);
        }
      execve (path, argv, envp);
      child_fail (report_pipe[1], STAGE_EXEC);
    }
  close (report_pipe[1]);
  do
    n = read (report_pipe[0], report, sizeof report);
  while (n < 0 && errno == EINTR);
  close (report_pipe[0]);
  if (n != (ssize_t) sizeof report)
    return pid;
  waitpid (pid, NULL, 0);
  switch (report[0])
    {
    case STAGE_CHDIR:
      snprintf (error, size, "workdir: %s: %s", workdir && workdir[0] ? workdir : user->home,
                strerror (report[1]));
      return -126;
    case STAGE_IDS:
      snprintf (error, size, "user: cannot become uid %u gid %u: %s", (unsigned) user->uid,
                (unsigned) user->gid, strerror (report[1]));
      return -126;
    case STAGE_TTY:
      snprintf (error, size, "tty: %s", strerror (report[1]));
      return -126;
    default:
      snprintf (error, size, "cmd: %s: %s", argv[0], strerror (report[1]));
      return report[1] == ENOENT ? -127 : -126;
    }
}

/* ---- EXEC channels ---- */

size_t
exec_count (void)
{
  size_t n = 0;

  for (size_t i = 0; i < MV_AGENT_EXECS_MAX; i++)
    n += agent.execs[i].used;
  return n;
}

static Exec *
exec_find (const Session *s, uint32_t channel)
{
  for (size_t i = 0; i < MV_AGENT_EXECS_MAX; i++)
    if (agent.execs[i].used && agent.execs[i].session == s && agent.execs[i].channel == channel)
      return &agent.execs[i];
  return NULL;
}

static void
send_exec_exit (Session *s, uint32_t channel, int code, int signal_number, const char *message)
{
  mv_agent_buf_begin (&s->out, MV_AGENT_EXEC_EXIT, channel);
  if (signal_number)
    mv_agent_buf_put_u32 (&s->out, MV_AGENT_F_SIGNAL, (uint32_t) signal_number);
  else
    mv_agent_buf_put_u32 (&s->out, MV_AGENT_F_EXIT_CODE, (uint32_t) code);
  if (message)
    mv_agent_buf_put_str (&s->out, MV_AGENT_F_MESSAGE, message);
  mv_agent_buf_end (&s->out);
}

static void
send_stream (Session *s, uint8_t type, uint32_t channel, uint32_t stream)
{
  mv_agent_buf_begin (&s->out, type, channel);
  mv_agent_buf_put_u32 (&s->out, MV_AGENT_F_STREAM, stream);
  mv_agent_buf_end (&s->out);
}

static void
close_fd (int *fd)
{
  if (*fd >= 0)
    close (*fd);
  *fd = -1;
}

static void
exec_free (Exec *e)
{
  close_fd (&e->in_fd);
  close_fd (&e->out_fd[1]);
  close_fd (&e->out_fd[2]);
  free (e->in_queue);
  memset (e, 0, sizeof *e);
  e->in_fd = e->out_fd[1] = e->out_fd[2] = -1;
}

/* EXEC_EXIT goes once the process is reaped and its output sent. */
static void
exec_maybe_finish (Exec *e)
{
  if (e->pid != 0 || e->out_fd[1] >= 0 || e->out_fd[2] >= 0)
    return;
  if (e->session)
    {
      if (WIFSIGNALED (e->status))
        send_exec_exit (e->session, e->channel, 0, WTERMSIG (e->status), NULL);
      else
        send_exec_exit (e->session, e->channel, WEXITSTATUS (e->status), 0, NULL);
    }
  exec_free (e);
}

typedef struct {
  StrList argv, env;
  char   *workdir, *user;
  uint32_t tty, rows, cols;
  char   *console_key;    /* the secret of a login session's console key */
} ExecRequest;

static void
request_free (ExecRequest *r)
{
  strlist_free (&r->argv);
  strlist_free (&r->env);
  free (r->workdir);
  free (r->user);
  free (r->console_key);
}

static bool
request_parse (const MvAgentFrame *frame, ExecRequest *r)
{
  MvAgentFields fields;
  MvAgentField f;

  mv_agent_fields_init (&fields, frame->payload, frame->payload_len);
  while (mv_agent_fields_next (&fields, &f) > 0)
    {
      char *value = NULL;

      switch (f.tag)
        {
        case MV_AGENT_F_ARGV:
        case MV_AGENT_F_ENV:
        case MV_AGENT_F_WORKDIR:
        case MV_AGENT_F_USER:
        case MV_AGENT_F_CONSOLE_KEY:
          value = mv_agent_field_strdup (&f);
          if (!value)
            return false;
          if (f.tag == MV_AGENT_F_ARGV)
            strlist_add (&r->argv, value);
          else if (f.tag == MV_AGENT_F_ENV)
            strlist_add (&r->env, value);
          else if (f.tag == MV_AGENT_F_WORKDIR)
            r->workdir = value, value = NULL;
          else if (f.tag == MV_AGENT_F_CONSOLE_KEY)
            r->console_key = value, value = NULL;
          else
            r->user = value, value = NULL;
          free (value);
          break;
        case MV_AGENT_F_TTY:
          if (!mv_agent_field_u32 (&f, &r->tty))
            return false;
          break;
        case MV_AGENT_F_ROWS:
          if (!mv_agent_field_u32 (&f, &r->rows))
            return false;
          break;
        case MV_AGENT_F_COLS:
          if (!mv_agent_field_u32 (&f, &r->cols))
            return false;
          break;
        default:
          break;
        }
    }
  return r->argv.len > 0;
}

/* The process's ends: a pty (its master read and written, through two
 * descriptors so that stdin can be closed alone), or three pipes. */
static bool
open_streams (const ExecRequest *r, int child[3], int parent[3], char *slave, size_t slave_size)
{
  int p[3][2] = { { -1, -1 }, { -1, -1 }, { -1, -1 } };

  if (r->tty)
    {
      struct winsize ws = { .ws_row = (unsigned short) (r->rows ? r->rows : 24),
                            .ws_col = (unsigned short) (r->cols ? r->cols : 80) };
      int master = posix_openpt (O_RDWR | O_NOCTTY | O_CLOEXEC);
      const char *name;

      if (master < 0)
        return false;
      name = (grantpt (master) == 0 && unlockpt (master) == 0) ? ptsname (master) : NULL;
      if (!name || strlen (name) >= slave_size)
        {
          close (master);
          return false;
        }
      strcpy (slave, name);
      ioctl (master, TIOCSWINSZ, &ws);
      parent[0] = fcntl (master, F_DUPFD_CLOEXEC, 3);
      parent[1] = master;
      parent[2] = -1;
      child[0] = child[1] = child[2] = -1;
      set_nonblock_cloexec (parent[0]);
      set_nonblock_cloexec (parent[1]);
      return parent[0] >= 0;
    }
  for (int i = 0; i < 3; i++)
    if (pipe2 (p[i], O_CLOEXEC) < 0)
      {
        for (int j = 0; j < i; j++)
          close (p[j][0]), close (p[j][1]);
        return false;
      }
  child[0] = p[0][0], parent[0] = p[0][1];
  child[1] = p[1][1], parent[1] = p[1][0];
  child[2] = p[2][1], parent[2] = p[2][0];
  for (int i = 0; i < 3; i++)
    set_nonblock_cloexec (parent[i]);
  return true;
}

/* Starts what @r asks for in slot @e; false with the EXEC_EXIT sent if
 * it cannot start. */
static bool
exec_launch (Session *s, uint32_t channel, const ExecRequest *r, const MvUser *user,
             const StrList *env, Exec *e)
{
  char error[512], path[4096], slave[128];
  int child[3], parent[3], code;
  pid_t pid;

  code = exec_resolve (r->argv.items[0], strlist_env (env, "PATH"), path, sizeof path,
                       error, sizeof error);
  if (code != 0)
    {
      send_exec_exit (s, channel, code, 0, error);
      return false;
    }
  if (!open_streams (r, child, parent, slave, sizeof slave))
    {
      snprintf (error, sizeof error, "%s: %s", r->tty ? "pty" : "pipe", strerror (errno));
      send_exec_exit (s, channel, 125, 0, error);
      return false;
    }
  pid = spawn_process (path, r->argv.items, env->items, user, r->workdir,
                       child[0], child[1], child[2], r->tty ? slave : NULL, error, sizeof error);
  for (int i = 0; i < 3; i++)
    if (child[i] >= 0)
      close (child[i]);
  if (pid < 0)
    {
      for (int i = 0; i < 3; i++)
        if (parent[i] >= 0)
          close (parent[i]);
      send_exec_exit (s, channel, -pid, 0, error);
      return false;
    }
  memset (e, 0, sizeof *e);
  e->used = true;
  e->session = s;
  e->channel = channel;
  e->pid = pid;
  e->tty = r->tty != 0;
  e->in_fd = parent[0];
  e->out_fd[0] = -1;
  e->out_fd[1] = parent[1];
  e->out_fd[2] = parent[2];
  e->credit[1] = e->credit[2] = MV_AGENT_WINDOW_BYTES;
  /* Not in this round's poll set: a slot used again keeps no old index. */
  e->in_pidx = e->out_pidx[1] = e->out_pidx[2] = -1;
  if (e->tty)
    send_stream (s, MV_AGENT_EOF, channel, MV_AGENT_STREAM_STDERR);
  return true;
}

/* A login session's console key (docs/agent-protocol.md, Console keys):
 * its secret's digest must be in the metadata document as a key of the
 * session's user, and not taken before. */
static bool
console_key_accepted (const ExecRequest *r, char *error, size_t size)
{
  static char used[MV_AGENT_CONSOLE_KEYS_USED_MAX][2 * MV_SHA256_BYTES + 1];
  static size_t n_used, next_used;
  char digest[2 * MV_SHA256_BYTES + 1], entry[512];
  char *document = NULL;
  bool found;

  if (strlen (r->console_key) != MV_AGENT_CONSOLE_SECRET_CHARS || !r->tty)
    {
      snprintf (error, size, "console key: not a %d-digit secret for a terminal",
                MV_AGENT_CONSOLE_SECRET_CHARS);
      return false;
    }
  mv_sha256_hex (r->console_key, strlen (r->console_key), digest);
  for (size_t i = 0; i < n_used; i++)
    if (strcmp (used[i], digest) == 0)
      {
        snprintf (error, size, "console key sha256:%.12s...: taken already", digest);
        return false;
      }
  /* As the host writes it: {"key":"sha256:HEX","user":"USER",...}. */
  snprintf (entry, sizeof entry, "{\"key\":\"sha256:%s\",\"user\":\"%s\",", digest,
            r->user ? r->user : "root");
  document = metadata_document ();
  found = document && strstr (document, "\"console-keys\":[") && strstr (document, entry);
  free (document);
  if (!found)
    {
      snprintf (error, size, "console key sha256:%.12s...: not in the metadata for user %s",
                digest, r->user ? r->user : "root");
      return false;
    }
  snprintf (used[next_used], sizeof used[next_used], "%s", digest);
  next_used = (next_used + 1) % MV_AGENT_CONSOLE_KEYS_USED_MAX;
  if (n_used < MV_AGENT_CONSOLE_KEYS_USED_MAX)
    n_used++;
  agent_log ("console key sha256:%.12s...: a login session as %s", digest,
             r->user ? r->user : "root");
  return true;
}

void
exec_start (Session *s, const MvAgentFrame *frame)
{
  ExecRequest r = { 0 };
  char error[512];
  MvUser user;
  StrList env = { 0 };
  Exec *e = NULL;

  if (frame->channel == 0 || exec_find (s, frame->channel))
    {
      agent_log ("EXEC on channel %u, which is %s", frame->channel,
                 frame->channel == 0 ? "the session's" : "in use");
      send_exec_exit (s, frame->channel, 125, 0, "EXEC on a channel that is 0 or in use");
      return;
    }
  for (size_t i = 0; i < MV_AGENT_EXECS_MAX && !e; i++)
    if (!agent.execs[i].used)
      e = &agent.execs[i];
  if (!e)
    {
      snprintf (error, sizeof error, "at most %d execs run at once in a guest", MV_AGENT_EXECS_MAX);
      send_exec_exit (s, frame->channel, 125, 0, error);
      return;
    }
  if (!request_parse (frame, &r))
    send_exec_exit (s, frame->channel, 125, 0, "EXEC without ARGV, or with a malformed field");
  else if (r.console_key && !console_key_accepted (&r, error, sizeof error))
    send_exec_exit (s, frame->channel, 126, 0, error);
  else if (!agent_user_lookup (r.user, &user, error, sizeof error))
    send_exec_exit (s, frame->channel, 125, 0, error);
  else
    {
      exec_build_env (&user, &r.env, &env);
      exec_launch (s, frame->channel, &r, &user, &env, e);
      strlist_free (&env);
    }
  request_free (&r);
}

static void
grant_stdin (Exec *e, bool force)
{
  if (!e->session || e->in_written == 0 || (!force && e->in_written < MV_AGENT_DATA_MAX_BYTES))
    return;
  mv_agent_buf_begin (&e->session->out, MV_AGENT_WINDOW, e->channel);
  mv_agent_buf_put_u32 (&e->session->out, MV_AGENT_F_STREAM, MV_AGENT_STREAM_STDIN);
  mv_agent_buf_put_u32 (&e->session->out, MV_AGENT_F_GRANT, e->in_written);
  mv_agent_buf_end (&e->session->out);
  e->in_written = 0;
}

/* The host's stdin has ended and all of it is written: the process's
 * stdin closes (a terminal gets its end-of-file character instead). */
static void
close_stdin_if_done (Exec *e)
{
  if (!e->in_eof || e->in_queue_len > 0 || e->in_fd < 0)
    return;
  if (e->tty && write (e->in_fd, "\x04", 1) < 0)
    agent_log ("exec %u: tty EOF: %s", e->channel, strerror (errno));
  close_fd (&e->in_fd);
}

static void
stdin_drop (Exec *e)
{
  e->in_written += (uint32_t) e->in_queue_len;
  e->in_queue_len = 0;
  close_fd (&e->in_fd);
  grant_stdin (e, true);
}

static void
exec_write_stdin (Exec *e)
{
  while (e->in_queue_len > 0 && e->in_fd >= 0)
    {
      ssize_t n = write (e->in_fd, e->in_queue, e->in_queue_len);

      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0 && errno == EAGAIN)
        break;
      if (n < 0)
        {
          /* The process closed its stdin: what is left is dropped, and
           * granted again so that the host is not held. */
          stdin_drop (e);
          return;
        }
      memmove (e->in_queue, e->in_queue + n, e->in_queue_len - (size_t) n);
      e->in_queue_len -= (size_t) n;
      e->in_written += (uint32_t) n;
    }
  grant_stdin (e, e->in_queue_len == 0);
  close_stdin_if_done (e);
}

static bool
frame_stream (const MvAgentFrame *frame, uint32_t *stream)
{
  return mv_agent_frame_u32 (frame, MV_AGENT_F_STREAM, stream) && *stream <= MV_AGENT_STREAM_STDERR;
}

void
exec_frame (Session *s, const MvAgentFrame *frame)
{
  Exec *e = exec_find (s, frame->channel);
  uint32_t stream = 0, value = 0;
  MvAgentField f;

  if (!e)
    return;  /* an exec that has just ended: what was in flight is dropped */
  switch (frame->type)
    {
    case MV_AGENT_DATA:
      if (!frame_stream (frame, &stream) || stream != MV_AGENT_STREAM_STDIN ||
          !mv_agent_frame_find (frame, MV_AGENT_F_BYTES, &f))
        return;
      if (e->in_eof)
        return;
      if (e->in_fd < 0)
        {
          e->in_written += f.len;
          grant_stdin (e, true);
          return;
        }
      if (f.len > MV_AGENT_WINDOW_BYTES - e->in_queue_len)
        {
          agent_log ("exec %u: more stdin than the window granted; dropped", e->channel);
          return;
        }
      if (!e->in_queue)
        {
          e->in_queue = malloc (MV_AGENT_WINDOW_BYTES);
          if (!e->in_queue)
            abort ();
        }
      memcpy (e->in_queue + e->in_queue_len, f.value, f.len);
      e->in_queue_len += f.len;
      exec_write_stdin (e);
      break;
    case MV_AGENT_EOF:
      if (frame_stream (frame, &stream) && stream == MV_AGENT_STREAM_STDIN)
        {
          e->in_eof = true;
          close_stdin_if_done (e);
        }
      break;
    case MV_AGENT_WINDOW:
      if (frame_stream (frame, &stream) && stream != MV_AGENT_STREAM_STDIN &&
          mv_agent_frame_u32 (frame, MV_AGENT_F_GRANT, &value))
        e->credit[stream] = e->credit[stream] > UINT32_MAX - value ? UINT32_MAX
                                                                     : e->credit[stream] + value;
      break;
    case MV_AGENT_SIGNAL:
      if (mv_agent_frame_u32 (frame, MV_AGENT_F_SIGNAL, &value) && value > 0 && value < 65 &&
          e->pid > 0)
        killpg (e->pid, (int) value);
      break;
    case MV_AGENT_RESIZE:
      {
        uint32_t rows = 0, cols = 0;
        struct winsize ws;

        /* The kernel tells the terminal's foreground group (SIGWINCH). */
        if (e->tty && e->out_fd[1] >= 0 && mv_agent_frame_u32 (frame, MV_AGENT_F_ROWS, &rows) &&
            mv_agent_frame_u32 (frame, MV_AGENT_F_COLS, &cols) && rows > 0 && rows <= 0xffff &&
            cols > 0 && cols <= 0xffff)
          {
            ws = (struct winsize) { .ws_row = (unsigned short) rows,
                                    .ws_col = (unsigned short) cols };
            ioctl (e->out_fd[1], TIOCSWINSZ, &ws);
          }
      }
      break;
    default:
      break;
    }
}

void
exec_session_closed (Session *s)
{
  for (size_t i = 0; i < MV_AGENT_EXECS_MAX; i++)
    {
      Exec *e = &agent.execs[i];

      if (!e->used || e->session != s)
        continue;
      if (e->pid > 0)
        killpg (e->pid, SIGKILL);
      e->session = NULL;
      close_fd (&e->in_fd);
      close_fd (&e->out_fd[1]);
      close_fd (&e->out_fd[2]);
      if (e->pid == 0)
        exec_free (e);
    }
}

size_t
exec_poll_add (struct pollfd *fds, size_t n)
{
  for (size_t i = 0; i < MV_AGENT_EXECS_MAX; i++)
    {
      Exec *e = &agent.execs[i];

      e->in_pidx = e->out_pidx[1] = e->out_pidx[2] = -1;
      if (!e->used || !e->session)
        continue;
      if (e->in_fd >= 0 && e->in_queue_len > 0)
        {
          e->in_pidx = (int) n;
          fds[n++] = (struct pollfd) { .fd = e->in_fd, .events = POLLOUT };
        }
      for (int k = 1; k <= 2; k++)
        if (e->out_fd[k] >= 0 && e->credit[k] > 0 && e->session->out.len < AGENT_OUT_HIGH_BYTES)
          {
            e->out_pidx[k] = (int) n;
            fds[n++] = (struct pollfd) { .fd = e->out_fd[k], .events = POLLIN };
          }
    }
  return n;
}

static void
exec_read_output (Exec *e, int k)
{
  static uint8_t chunk[MV_AGENT_DATA_MAX_BYTES];
  size_t want = e->credit[k] < sizeof chunk ? e->credit[k] : sizeof chunk;
  ssize_t n;

  do
    n = read (e->out_fd[k], chunk, want);
  while (n < 0 && errno == EINTR);
  if (n < 0 && errno == EAGAIN)
    return;
  if (n <= 0)
    {
      /* End of the stream; a pty's master reads EIO once the last
       * process holding it has gone. */
      close_fd (&e->out_fd[k]);
      send_stream (e->session, MV_AGENT_EOF, e->channel, (uint32_t) k);
      exec_maybe_finish (e);
      return;
    }
  mv_agent_buf_begin (&e->session->out, MV_AGENT_DATA, e->channel);
  mv_agent_buf_put_u32 (&e->session->out, MV_AGENT_F_STREAM, (uint32_t) k);
  mv_agent_buf_put (&e->session->out, MV_AGENT_F_BYTES, chunk, (size_t) n);
  mv_agent_buf_end (&e->session->out);
  e->credit[k] -= (uint32_t) n;
}

void
exec_poll_dispatch (struct pollfd *fds)
{
  for (size_t i = 0; i < MV_AGENT_EXECS_MAX; i++)
    {
      Exec *e = &agent.execs[i];

      if (!e->used)
        continue;
      if (e->in_pidx >= 0 && fds[e->in_pidx].revents)
        {
          if (fds[e->in_pidx].revents & (POLLERR | POLLHUP))
            stdin_drop (e);
          else
            exec_write_stdin (e);
        }
      for (int k = 1; k <= 2 && e->used; k++)
        if (e->out_pidx[k] >= 0 && fds[e->out_pidx[k]].revents && e->out_fd[k] >= 0)
          exec_read_output (e, k);
    }
}

bool
exec_reaped (pid_t pid, int status)
{
  for (size_t i = 0; i < MV_AGENT_EXECS_MAX; i++)
    {
      Exec *e = &agent.execs[i];

      if (!e->used || e->pid != pid)
        continue;
      e->pid = 0;
      e->status = status;
      e->exited_at = now_ms ();
      if (!e->session)
        exec_free (e);
      else
        exec_maybe_finish (e);
      return true;
    }
  return false;
}

/* Output is open that the host has credit for. */
static bool
draining (const Exec *e)
{
  return (e->out_fd[1] >= 0 && e->credit[1] > 0) || (e->out_fd[2] >= 0 && e->credit[2] > 0);
}

int64_t
exec_next_deadline (void)
{
  int64_t next = 0;

  for (size_t i = 0; i < MV_AGENT_EXECS_MAX; i++)
    {
      Exec *e = &agent.execs[i];
      int64_t at = e->exited_at + DRAIN_AFTER_EXIT_MS;

      if (e->used && e->pid == 0 && e->session && draining (e) && (next == 0 || at < next))
        next = at;
    }
  return next;
}

/* An exited process's output that the host has credit for and that does
 * not end (a child left behind holds it) is ended here. */
void
exec_timers (void)
{
  int64_t now = now_ms ();

  for (size_t i = 0; i < MV_AGENT_EXECS_MAX; i++)
    {
      Exec *e = &agent.execs[i];

      if (!e->used || e->pid != 0 || !e->session || !draining (e) ||
          now < e->exited_at + DRAIN_AFTER_EXIT_MS)
        continue;
      for (int k = 1; k <= 2; k++)
        if (e->out_fd[k] >= 0 && e->credit[k] > 0)
          {
            close_fd (&e->out_fd[k]);
            send_stream (e->session, MV_AGENT_EOF, e->channel, (uint32_t) k);
          }
      exec_maybe_finish (e);
    }
}
