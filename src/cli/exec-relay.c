/* The relay of a command started with Machine.Exec. One poll() loop over
 * non-blocking descriptors; each direction has a fixed buffer and reads
 * only once it has written what it holds, so a slow reader on one side
 * holds up the writer on the other instead of filling memory. */
#include "exec-relay.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <termios.h>
#include <unistd.h>

#include <glib/gi18n.h>

#include "exec-status.h"
#include "microvmctl.h"
#include "terminal-text.h"

#define RELAY_BUFFER_SIZE (64 * 1024)

typedef enum {
  CHANNEL_INPUT,    /* ours to the command's: owns `to` */
  CHANNEL_OUTPUT,   /* the command's to ours: owns `from` */
} ChannelKind;

typedef struct {
  ChannelKind kind;
  int from;
  int to;
  gboolean done;
  gsize start, end;
  int escape;           /* input: the byte that ends the relay, or -1 */
  gboolean escaped;     /* it was typed */
  gboolean read_only;   /* input: the other side refused it (EPIPE) */
  char buffer[RELAY_BUFFER_SIZE];
} Channel;

/* What we change on our own descriptors, to be put back. */
typedef struct {
  int flags[3];
  gboolean have_termios;
  struct termios termios;
} SavedTerminal;

static const int relay_signals[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGWINCH };

static void
close_fd (int *fd)
{
  if (*fd >= 0)
    close (*fd);
  *fd = -1;
}

static void
set_nonblocking (int fd)
{
  int flags = fcntl (fd, F_GETFL);

  if (flags >= 0 && !(flags & O_NONBLOCK))
    (void) fcntl (fd, F_SETFL, flags | O_NONBLOCK);
}

static void
save_terminal (SavedTerminal *saved, gboolean raw_terminal)
{
  for (int fd = 0; fd < 3; fd++)
    saved->flags[fd] = fcntl (fd, F_GETFL);

  saved->have_termios = raw_terminal && tcgetattr (STDIN_FILENO, &saved->termios) == 0;
  if (saved->have_termios)
    {
      struct termios raw = saved->termios;

      cfmakeraw (&raw);
      (void) tcsetattr (STDIN_FILENO, TCSANOW, &raw);
    }

  /* All three, so that a reader who is slow on one of our outputs holds
   * up only that one. Our own messages wait until they are restored. */
  for (int fd = 0; fd < 3; fd++)
    set_nonblocking (fd);
}

static void
restore_terminal (const SavedTerminal *saved)
{
  if (saved->have_termios)
    (void) tcsetattr (STDIN_FILENO, TCSANOW, &saved->termios);
  /* In reverse, so that descriptors that share one open file end with the
   * flags it had. */
  for (int fd = 2; fd >= 0; fd--)
    if (saved->flags[fd] >= 0)
      (void) fcntl (fd, F_SETFL, saved->flags[fd]);
}

static void
channel_finish (Channel *channel)
{
  if (channel->kind == CHANNEL_INPUT)
    {
      /* With a tty the socket is also the output's: only our direction
       * ends. */
      (void) shutdown (channel->to, SHUT_WR);
      close_fd (&channel->to);
    }
  else
    {
      /* Our side will not read any more: the command gets EPIPE rather
       * than wait for us, as in a local pipeline. */
      (void) shutdown (channel->from, SHUT_RD);
      close_fd (&channel->from);
    }
  channel->done = TRUE;
}

/* The descriptor and events the channel waits for, or FALSE if none. */
static gboolean
channel_wants (const Channel *channel, struct pollfd *pfd)
{
  if (channel->done)
    return FALSE;
  if (channel->start < channel->end)
    *pfd = (struct pollfd) { .fd = channel->to, .events = POLLOUT };
  else
    *pfd = (struct pollfd) { .fd = channel->from, .events = POLLIN };
  return TRUE;
}

static void
channel_step (Channel *channel)
{
  ssize_t n;

  if (channel->start < channel->end)
    {
      n = write (channel->to, channel->buffer + channel->start, channel->end - channel->start);
      if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
      if (n < 0)
        {
          /* The command stopped reading, or our output went away. */
          channel->read_only = channel->kind == CHANNEL_INPUT && errno == EPIPE;
          channel_finish (channel);
          return;
        }
      channel->start += n;
      if (channel->start == channel->end)
        channel->start = channel->end = 0;
      return;
    }

  n = read (channel->from, channel->buffer, sizeof channel->buffer);
  if (n < 0 && (errno == EAGAIN || errno == EINTR))
    return;
  if (n <= 0)
    {
      channel_finish (channel);
      return;
    }
  if (channel->kind == CHANNEL_INPUT && channel->escape >= 0)
    {
      const char *at = memchr (channel->buffer, channel->escape, n);

      /* What was typed before it still goes. */
      if (at)
        {
          channel->escaped = TRUE;
          n = at - channel->buffer;
        }
    }
  channel->end = n;
}

typedef struct {
  int fd;
  gboolean done;
  gsize length;
  char line[MV_EXEC_STATUS_MAX_LINE + 1];
} StatusReader;

static void
status_step (StatusReader *status)
{
  ssize_t n = read (status->fd, status->line + status->length,
                    sizeof status->line - status->length);

  if (n < 0 && (errno == EAGAIN || errno == EINTR))
    return;
  if (n <= 0)
    {
      status->done = TRUE;
      return;
    }
  status->length += n;
  if (memchr (status->line, '\n', status->length) != NULL ||
      status->length == sizeof status->line)
    status->done = TRUE;
}

static int
status_exit_code (const StatusReader *status)
{
  g_auto(MvExecStatus) parsed = { 0 };
  const char *newline = memchr (status->line, '\n', status->length);
  /* A last line without its newline still counts. */
  gsize length = newline != NULL ? (gsize) (newline - status->line) : status->length;

  if (length == 0)
    {
      fprintf (stderr, _("%s: the command's status was lost: microvmd closed it without a word\n"),
               g_get_prgname ());
      return MV_EXIT_EXEC_ERROR;
    }

  if (!mv_exec_status_parse (status->line, length, &parsed))
    {
      g_autofree char *raw = g_strndup (status->line, length);
      g_autofree char *escaped = g_strescape (raw, NULL);

      fprintf (stderr, _("%s: malformed status line from microvmd: \"%s\"\n"),
               g_get_prgname (), escaped);
      return MV_EXIT_EXEC_ERROR;
    }

  if (parsed.kind == MV_EXEC_STATUS_ERROR)
    {
      /* The agent's words, which the guest controls. */
      g_autofree char *shown = mv_terminal_text (parsed.error, -1);

      fprintf (stderr, "%s: %s\n", g_get_prgname (), shown);
    }
  return mv_exec_status_exit_code (&parsed);
}

static int
open_signal_fd (sigset_t *old_mask)
{
  sigset_t mask;

  sigemptyset (&mask);
  for (gsize i = 0; i < G_N_ELEMENTS (relay_signals); i++)
    sigaddset (&mask, relay_signals[i]);
  if (sigprocmask (SIG_BLOCK, &mask, old_mask) < 0)
    return -errno;
  return signalfd (-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
}

static int
read_signal (int signal_fd)
{
  struct signalfd_siginfo info;

  if (read (signal_fd, &info, sizeof info) != sizeof info)
    return 0;
  return (int) info.ssi_signo;
}

static int relay (const MvExecFds *fds, gboolean raw_terminal, int escape);

/* "resize ROWS COLS" on the status: the size of our terminal. */
static void
tell_size (int status_fd, gboolean raw_terminal)
{
  struct winsize ws;
  char line[64];
  int n;

  if (status_fd < 0 || !raw_terminal || ioctl (STDIN_FILENO, TIOCGWINSZ, &ws) < 0 ||
      ws.ws_row == 0 || ws.ws_col == 0)
    return;
  n = snprintf (line, sizeof line, "resize %u %u\n", ws.ws_row, ws.ws_col);
  (void) !send (status_fd, line, (size_t) n, MSG_NOSIGNAL | MSG_DONTWAIT);
}

int
mv_remote_relay (const MvExecFds *fds, gboolean raw_terminal, char escape)
{
  return relay (fds, raw_terminal, (unsigned char) escape);
}

int
mv_exec_relay (const MvExecFds *fds, gboolean raw_terminal)
{
  return relay (fds, raw_terminal, -1);
}

int
mv_console_relay (int console_fd, gboolean raw_terminal, char escape)
{
  MvExecFds fds = { console_fd, dup (console_fd), -1, -1 };

  return relay (&fds, raw_terminal, (unsigned char) escape);
}

static int
relay (const MvExecFds *fds, gboolean raw_terminal, int escape)
{
  Channel *input = g_new0 (Channel, 1);
  Channel *output = g_new0 (Channel, 1);
  Channel *error_output = g_new0 (Channel, 1);
  Channel *channels[] = { input, output, error_output };
  StatusReader *status = g_new0 (StatusReader, 1);
  SavedTerminal saved = { 0 };
  sigset_t old_mask;
  int signal_fd, caught = 0, exit_code;

  *input = (Channel) { .kind = CHANNEL_INPUT, .from = STDIN_FILENO, .to = fds->stdin_fd,
                       .escape = escape };
  *output = (Channel) { .kind = CHANNEL_OUTPUT, .from = fds->stdout_fd, .to = STDOUT_FILENO };
  *error_output = (Channel) { .kind = CHANNEL_OUTPUT, .from = fds->stderr_fd, .to = STDERR_FILENO,
                              .done = fds->stderr_fd < 0 };
  status->fd = fds->status_fd;
  /* A console has no status: it ends with its output, or at the escape. */
  status->done = fds->status_fd < 0;

  /* A closed output of ours is a write error to handle, not the end. */
  signal (SIGPIPE, SIG_IGN);
  signal_fd = open_signal_fd (&old_mask);

  set_nonblocking (fds->stdin_fd);
  set_nonblocking (fds->stdout_fd);
  if (fds->stderr_fd >= 0)
    set_nonblocking (fds->stderr_fd);
  if (fds->status_fd >= 0)
    set_nonblocking (fds->status_fd);
  save_terminal (&saved, raw_terminal);

  while (!(output->done && error_output->done && status->done))
    {
      struct pollfd pfds[5];
      Channel *owners[5] = { NULL };
      int n_pfds = 0, status_index = -1, signal_index = -1;

      for (gsize i = 0; i < G_N_ELEMENTS (channels); i++)
        if (channel_wants (channels[i], &pfds[n_pfds]))
          owners[n_pfds++] = channels[i];
      if (!status->done)
        {
          status_index = n_pfds;
          pfds[n_pfds++] = (struct pollfd) { .fd = status->fd, .events = POLLIN };
        }
      if (signal_fd >= 0)
        {
          signal_index = n_pfds;
          pfds[n_pfds++] = (struct pollfd) { .fd = signal_fd, .events = POLLIN };
        }

      if (poll (pfds, n_pfds, -1) < 0)
        {
          if (errno == EINTR)
            continue;
          restore_terminal (&saved);
          mv_fail (_("Failed to wait for the command: %s"), g_strerror (errno));
          caught = -1;
          break;
        }

      if (signal_index >= 0 && pfds[signal_index].revents != 0)
        {
          caught = read_signal (signal_fd);
          /* Our terminal's new size is the command's terminal's too. */
          if (caught == SIGWINCH)
            {
              tell_size (fds->status_fd, raw_terminal);
              caught = 0;
            }
          if (caught > 0)
            break;
        }
      for (int i = 0; i < n_pfds; i++)
        if (owners[i] != NULL && pfds[i].revents != 0)
          channel_step (owners[i]);
      if (input->read_only)
        {
          static const char note[] = "\r\n[read-only: another client types into this console]\r\n";
          (void) !write (STDERR_FILENO, note, strlen (note));
          input->read_only = FALSE;
        }
      /* Once what came before the escape is passed on. */
      if (input->escaped && (input->done || input->start == input->end))
        break;
      if (status_index >= 0 && pfds[status_index].revents != 0)
        status_step (status);
    }

  restore_terminal (&saved);

  if (caught == 0 && fds->status_fd < 0)
    exit_code = 0;
  else if (caught == 0)
    exit_code = status_exit_code (status);
  else
    exit_code = caught > 0 ? 128 + caught : MV_EXIT_EXEC_ERROR;

  /* Closing the status ends the command, if it still runs. */
  for (gsize i = 0; i < G_N_ELEMENTS (channels); i++)
    if (!channels[i]->done)
      {
        if (channels[i]->kind == CHANNEL_INPUT)
          close_fd (&channels[i]->to);
        else
          close_fd (&channels[i]->from);
      }
  close_fd (&status->fd);
  close_fd (&signal_fd);
  g_free (input);
  g_free (output);
  g_free (error_output);
  g_free (status);

  if (caught > 0)
    {
      /* End as the signal would have ended us. */
      signal (caught, SIG_DFL);
      raise (caught);
    }
  (void) sigprocmask (SIG_SETMASK, &old_mask, NULL);
  return exit_code;
}
