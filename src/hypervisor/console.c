/* The serial console's holder and how the daemon attaches to it
 * (console.h). */
#include "console.h"
#include "core/errors.h"
#include "util/fd.h"
#include "util/files.h"
#include "util/unix-socket.h"

#include <errno.h>
#include <fcntl.h>
#include <gio/gio.h>
#include <glib/gstdio.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

/* One read of what the guest prints, and of what the writer types. */
#define CHUNK_BYTES        4096
/* How long the daemon waits for the holder's answer. */
#define ATTACH_TIMEOUT_MS  1000
/* A guest prints its console a character at a time, each a write of the
 * VMM's: after taking all there was, the holder lets this long pass
 * before it looks again, so that the writes meanwhile gather in the
 * socket rather than each wake it (and, through the log, whoever
 * watches the log). Output that comes faster than a chunk at a time is
 * taken as fast as it comes. */
#define GATHER_MS          2
/* Room in the socket for what gathers: the kernel counts each write of
 * one character as a buffer of its own, of about a kilobyte. */
#define VMM_SEND_BYTES     (4 * 1024 * 1024)

char *
mv_console_socket_path (const char *log_path)
{
  g_autofree char *dir = g_path_get_dirname (log_path);

  return g_build_filename (dir, MV_CONSOLE_SOCKET_NAME, NULL);
}

/* ---- set up, in the daemon ---- */

static int
listen_at (const char *path)
{
  struct sockaddr_un addr = { .sun_family = AF_UNIX };
  mode_t mask;
  int fd, r;

  if (strlen (path) >= sizeof addr.sun_path)
    {
      errno = ENAMETOOLONG;
      return -1;
    }
  strcpy (addr.sun_path, path);
  fd = mv_fd_above_stdio (socket (AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (fd < 0)
    return -1;
  /* A socket left by an earlier VMM of the machine is stale: its holder
   * ended with it. */
  unlink (path);
  /* Only its owner, root, may connect. */
  mask = umask (077);
  r = bind (fd, (struct sockaddr *) &addr, sizeof addr);
  umask (mask);
  if (r < 0 || listen (fd, MV_CONSOLE_CLIENTS_MAX) < 0)
    {
      int saved = errno;
      close (fd);
      errno = saved;
      return -1;
    }
  return fd;
}

gboolean
mv_console_open (MvConsoleFds *fds, const char *log_path, GError **error)
{
  g_autofree char *socket_path = mv_console_socket_path (log_path);
  int pair[2];

  fds->log = mv_fd_above_stdio (open (log_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC |
                                O_NOFOLLOW | O_NOCTTY, 0600));
  if (fds->log < 0)
    {
      int saved = errno;
      mv_console_close (fds);
      return mv_set_errno_error (error, saved, "Could not open the console's log %s", log_path);
    }
  if (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) < 0)
    {
      int saved = errno;
      mv_console_close (fds);
      return mv_set_errno_error (error, saved, "Could not make the console's socket pair");
    }
  fds->vmm_end = mv_fd_above_stdio (pair[0]);
  fds->held_end = mv_fd_above_stdio (pair[1]);
  fds->listener = listen_at (socket_path);
  if (fds->vmm_end < 0 || fds->held_end < 0 || fds->listener < 0)
    {
      int saved = errno;
      mv_console_close (fds);
      return mv_set_errno_error (error, saved, "Could not listen on %s", socket_path);
    }
  /* Typing never blocks the holder: what the guest does not take yet
   * waits in the holder's buffer. */
  fcntl (fds->held_end, F_SETFL, fcntl (fds->held_end, F_GETFL) | O_NONBLOCK);
  /* Nor does printing block the VMM while the holder gathers (GATHER_MS):
   * a daemon without CAP_NET_ADMIN gets what the host's maximum allows. */
  if (setsockopt (fds->vmm_end, SOL_SOCKET, SO_SNDBUFFORCE, &(int) { VMM_SEND_BYTES },
                  sizeof (int)) < 0)
    (void) setsockopt (fds->vmm_end, SOL_SOCKET, SO_SNDBUF, &(int) { VMM_SEND_BYTES },
                       sizeof (int));
  return TRUE;
}

void
mv_console_close (MvConsoleFds *fds)
{
  int *all[] = { &fds->vmm_end, &fds->held_end, &fds->log, &fds->listener };

  for (gsize i = 0; i < G_N_ELEMENTS (all); i++)
    if (*all[i] >= 0)
      {
        close (*all[i]);
        *all[i] = -1;
      }
}

/* ---- the holder, in the VMM's parent: async-signal-safe only ---- */

typedef enum {
  CLIENT_FREE,
  CLIENT_ASKING,     /* connected, its one byte not read yet */
  CLIENT_WRITER,
  CLIENT_READER,
} ClientRole;

typedef struct {
  int        fd;
  ClientRole role;
} Client;

typedef struct {
  MvConsoleFds *fds;
  Client        clients[MV_CONSOLE_CLIENTS_MAX];
  /* What the writer typed that the VMM has not taken yet. */
  char          typed[CHUNK_BYTES];
  size_t        typed_start, typed_end;
} Holder;

static void
drop (Client *client)
{
  close (client->fd);
  client->fd = -1;
  client->role = CLIENT_FREE;
}

/* What the guest printed: to the log and to every attached client; one
 * that cannot take all of it now is dropped. */
static void
fan_out (Holder *h, const char *data, size_t len)
{
  /* A full disk loses the log's copy, not the clients'. */
  (void) mv_fd_write_all (h->fds->log, data, len);
  for (guint i = 0; i < MV_CONSOLE_CLIENTS_MAX; i++)
    {
      Client *c = &h->clients[i];
      ssize_t n;

      if (c->role != CLIENT_WRITER && c->role != CLIENT_READER)
        continue;
      do
        n = send (c->fd, data, len, MSG_NOSIGNAL | MSG_DONTWAIT);
      while (n < 0 && errno == EINTR);
      if (n != (ssize_t) len)
        drop (c);
    }
}

/* Reads once what the VMM printed and passes it on: the bytes read, 0
 * once the VMM's end is closed, -1 if nothing is there now. */
static ssize_t
take_output (Holder *h)
{
  char chunk[CHUNK_BYTES];
  ssize_t n;

  do
    n = read (h->fds->held_end, chunk, sizeof chunk);
  while (n < 0 && errno == EINTR);
  if (n > 0)
    fan_out (h, chunk, (size_t) n);
  if (n < 0 && errno != EAGAIN)
    return 0;
  return n;
}

static void
pass_typed (Holder *h)
{
  ssize_t n;

  do
    n = send (h->fds->held_end, h->typed + h->typed_start, h->typed_end - h->typed_start,
              MSG_NOSIGNAL | MSG_DONTWAIT);
  while (n < 0 && errno == EINTR);
  if (n > 0)
    h->typed_start += (size_t) n;
  else if (n < 0 && errno != EAGAIN)
    h->typed_start = h->typed_end;        /* the VMM is going: nobody reads it */
  if (h->typed_start == h->typed_end)
    h->typed_start = h->typed_end = 0;
}

static void
accept_client (Holder *h)
{
  Client *free_slot = NULL;
  int fd;

  fd = accept4 (h->fds->listener, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd < 0)
    return;
  for (guint i = 0; i < MV_CONSOLE_CLIENTS_MAX && !free_slot; i++)
    if (h->clients[i].role == CLIENT_FREE)
      free_slot = &h->clients[i];
  if (!free_slot)
    {
      (void) !send (fd, "f", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
      close (fd);
      return;
    }
  /* About MV_CONSOLE_LAG_BYTES may wait unread (the kernel doubles it). */
  setsockopt (fd, SOL_SOCKET, SO_SNDBUF, &(int) { MV_CONSOLE_LAG_BYTES / 2 }, sizeof (int));
  free_slot->fd = fd;
  free_slot->role = CLIENT_ASKING;
}

static gboolean
has_writer (Holder *h)
{
  for (guint i = 0; i < MV_CONSOLE_CLIENTS_MAX; i++)
    if (h->clients[i].role == CLIENT_WRITER)
      return TRUE;
  return FALSE;
}

static void
answer (Holder *h, Client *c)
{
  char asked;
  ssize_t n;

  do
    n = recv (c->fd, &asked, 1, 0);
  while (n < 0 && errno == EINTR);
  if (n < 0 && errno == EAGAIN)
    return;
  if (n != 1 || (asked != 'w' && asked != 'r'))
    {
      drop (c);
      return;
    }
  c->role = asked == 'w' && !has_writer (h) ? CLIENT_WRITER : CLIENT_READER;
  if (send (c->fd, c->role == CLIENT_WRITER ? "w" : "r", 1, MSG_NOSIGNAL | MSG_DONTWAIT) != 1)
    {
      drop (c);
      return;
    }
  /* A reader's writes fail at its end, rather than vanish here. */
  if (c->role == CLIENT_READER)
    shutdown (c->fd, SHUT_RD);
}

/* Takes what the writer typed, while the buffer has room. */
static void
take_typed (Holder *h, Client *c)
{
  ssize_t n;

  do
    n = recv (c->fd, h->typed + h->typed_end, sizeof h->typed - h->typed_end, 0);
  while (n < 0 && errno == EINTR);
  if (n > 0)
    h->typed_end += (size_t) n;
  else if (n == 0)
    c->role = CLIENT_READER;      /* done typing; still reading */
  else if (errno != EAGAIN)
    drop (c);
}

enum { POLL_PIDFD, POLL_OUTPUT, POLL_LISTENER, POLL_CLIENTS };

static gint64
now_ms (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (gint64) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void
mv_console_hold (MvConsoleFds *fds, int pidfd)
{
  Holder h = { .fds = fds };
  struct pollfd pfd[POLL_CLIENTS + MV_CONSOLE_CLIENTS_MAX];
  gboolean output_open = TRUE;
  gint64 gather_until = 0;

  for (guint i = 0; i < MV_CONSOLE_CLIENTS_MAX; i++)
    h.clients[i].fd = -1;
  if (fds->vmm_end >= 0)
    close (fds->vmm_end);
  fds->vmm_end = -1;

  for (;;)
    {
      gboolean typing = h.typed_end > h.typed_start;
      gint64 gather_left = gather_until - now_ms ();
      short output_events = (gather_left > 0 ? 0 : POLLIN) | (typing ? POLLOUT : 0);

      pfd[POLL_PIDFD] = (struct pollfd) { .fd = pidfd, .events = POLLIN };
      /* poll() passes over negative descriptors. */
      pfd[POLL_OUTPUT] = (struct pollfd) { .fd = output_open && output_events ? fds->held_end : -1,
                                           .events = output_events };
      pfd[POLL_LISTENER] = (struct pollfd) { .fd = fds->listener, .events = POLLIN };
      for (guint i = 0; i < MV_CONSOLE_CLIENTS_MAX; i++)
        {
          Client *c = &h.clients[i];
          short events = 0;

          if (c->role == CLIENT_ASKING || (c->role == CLIENT_WRITER && !typing))
            events = POLLIN;
          /* A reader is watched only for its end (POLLHUP). */
          pfd[POLL_CLIENTS + i] = (struct pollfd) { .fd = c->fd, .events = events };
        }
      if (poll (pfd, G_N_ELEMENTS (pfd), gather_left > 0 ? (int) gather_left : -1) < 0)
        {
          if (errno == EINTR)
            continue;
          break;
        }

      if (pfd[POLL_PIDFD].revents)
        {
          /* The VMM has gone: what it printed last is taken, then no more. */
          while (output_open && take_output (&h) > 0)
            ;
          break;
        }
      if (pfd[POLL_OUTPUT].revents & (POLLIN | POLLHUP | POLLERR))
        {
          ssize_t taken = take_output (&h);

          /* A full chunk: more is likely waiting, and is taken at once. */
          if (taken > 0 && taken < CHUNK_BYTES)
            gather_until = now_ms () + GATHER_MS;
          else if (taken == 0)
            {
              output_open = FALSE;
              /* Without a pidfd, the VMM's end closing is its end. */
              if (pidfd < 0)
                break;
            }
        }
      if (output_open && typing && (pfd[POLL_OUTPUT].revents & POLLOUT))
        pass_typed (&h);
      if (pfd[POLL_LISTENER].revents & POLLIN)
        accept_client (&h);
      for (guint i = 0; i < MV_CONSOLE_CLIENTS_MAX; i++)
        {
          Client *c = &h.clients[i];
          short revents = pfd[POLL_CLIENTS + i].revents;

          /* A slot dropped and taken again in this turn was not polled. */
          if (c->role == CLIENT_FREE || !revents || c->fd != pfd[POLL_CLIENTS + i].fd)
            continue;
          if (c->role == CLIENT_ASKING)
            answer (&h, c);
          else if (c->role == CLIENT_WRITER && (revents & POLLIN))
            take_typed (&h, c);
          else if (revents & (POLLHUP | POLLERR | POLLNVAL))
            drop (c);
        }
    }

  for (guint i = 0; i < MV_CONSOLE_CLIENTS_MAX; i++)
    if (h.clients[i].role != CLIENT_FREE)
      drop (&h.clients[i]);
  mv_console_close (fds);
}

/* ---- attaching, in the daemon ---- */

static gboolean
set_timeout (int fd, guint ms)
{
  struct timeval tv = { .tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000 };

  return setsockopt (fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) == 0 &&
         setsockopt (fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) == 0;
}

int
mv_console_attach (const char *log_path, gboolean want_writer, gboolean *writer, GError **error)
{
  g_autofree char *socket_path = mv_console_socket_path (log_path);
  g_autoptr (GError) local = NULL;
  char got = 0;
  ssize_t n, sent = -1;
  int fd;

  *writer = FALSE;
  fd = mv_unix_connect (socket_path, 0, &local);
  if (fd < 0)
    {
      if (g_error_matches (local, G_IO_ERROR, G_IO_ERROR_NOT_FOUND))
        g_set_error (error, MV_ERROR, MV_ERROR_UNSUPPORTED,
                     "The machine's VMM runs without a console holder (it was started by an "
                     "earlier microvmd); the console opens once the machine is restarted");
      else if (g_error_matches (local, G_IO_ERROR, G_IO_ERROR_CONNECTION_REFUSED))
        g_set_error (error, MV_ERROR, MV_ERROR_INVALID_STATE, "The machine's console has ended");
      else
        g_set_error (error, MV_ERROR, MV_ERROR_FAILED, "Could not reach the console at %s: %s",
                     socket_path, local->message);
      return -1;
    }
  /* A holder with no room answers before it is asked, and closes: its
   * answer is read even if the question could not be sent. */
  if (set_timeout (fd, ATTACH_TIMEOUT_MS))
    sent = send (fd, want_writer ? "w" : "r", 1, MSG_NOSIGNAL);
  n = recv (fd, &got, 1, 0);
  if (n == 1 && got == 'f')
    {
      close (fd);
      g_set_error (error, MV_ERROR, MV_ERROR_RESOURCE_EXHAUSTED,
                   "%d clients are attached to the console already, the most it takes",
                   MV_CONSOLE_CLIENTS_MAX);
      return -1;
    }
  if (sent != 1 || n != 1 || (got != 'w' && got != 'r'))
    {
      int saved = errno;
      close (fd);
      /* Closed without an answer: it is ending with its VMM. */
      if (n == 0)
        g_set_error (error, MV_ERROR, MV_ERROR_INVALID_STATE, "The machine's console has ended");
      else
        g_set_error (error, MV_ERROR, MV_ERROR_FAILED,
                     "The console at %s did not answer: %s", socket_path,
                     n < 0 ? g_strerror (saved) : "an unknown reply");
      return -1;
    }
  /* The caller's socket from here on: blocking, without our timeouts. */
  set_timeout (fd, 0);
  *writer = got == 'w';
  return fd;
}
