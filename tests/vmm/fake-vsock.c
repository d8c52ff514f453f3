/* Hybrid vsock for the test VMMs. */
#include "fake-vsock.h"
#include "fake-agent.h"

#include <errno.h>
#include <glib-unix.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

/* Host ports handed out in "OK <port>" start here. */
#define HOST_PORT_BASE       (1u << 30)
#define CONNECT_TIMEOUT_US   (2 * G_USEC_PER_SEC)
#define HANDSHAKE_MAX_BYTES  64

typedef enum {
  CONN_HANDSHAKE,      /* reading "CONNECT <port>\n" */
  CONN_WAITING,        /* for the guest to run and answer */
  CONN_SERVED,         /* the guest's stream */
} ConnState;

/* What the host speaks on the agent port, told by its first byte: a frame
 * of the agent protocol starts with a zero byte (lengths are below
 * 16 MiB), the line protocol of the project's test guest with a letter. */
typedef enum {
  SPEAKS_UNKNOWN,
  SPEAKS_LINES,
  SPEAKS_FRAMES,
} Speaks;

typedef struct {
  int               refs;
  FakeVsock        *vsock;
  int               fd;        /* -1 once closed */
  guint             source;
  ConnState         state;
  FakeGuestService  service;
  guint32           port;
  GString          *input;
  gboolean          eof;
  gint64            deadline;
  Speaks            speaks;
  FakeAgentSession *session;   /* SPEAKS_FRAMES */
  guint             out_source;
} Conn;

struct _FakeVsock {
  char     *uds_path;
  guint32   cid;
  FakeLog  *log;
  int       listener;
  gboolean  bound;
  guint     listen_source;
  FakeGuest *guest;
  GList    *conns;
  guint32   next_port;
};

static Conn *
conn_ref (Conn *conn)
{
  conn->refs++;
  return conn;
}

static void
conn_unref (Conn *conn)
{
  if (--conn->refs > 0)
    return;
  g_string_free (conn->input, TRUE);
  g_free (conn);
}

static gpointer
conn_copy (gconstpointer conn, gpointer data)
{
  return conn_ref ((Conn *) conn);
}

static void
conn_release (gpointer conn)
{
  conn_unref (conn);
}

static void
conn_close (Conn *conn)
{
  if (conn->fd < 0)
    return;
  if (conn->source)
    g_source_remove (conn->source);
  conn->source = 0;
  if (conn->out_source)
    g_source_remove (conn->out_source);
  conn->out_source = 0;
  g_clear_pointer (&conn->session, fake_agent_session_free);
  close (conn->fd);
  conn->fd = -1;
  conn->vsock->conns = g_list_remove (conn->vsock->conns, conn);
  conn_unref (conn);
}

static gboolean
send_text (Conn *conn, const char *data, gsize len)
{
  if (fake_write_all (conn->fd, data, len))
    return TRUE;
  conn_close (conn);
  return FALSE;
}

/* "CONNECT <port>" in any case; FALSE if it is not. */
static gboolean
parse_connect (const char *line, guint32 *port)
{
  g_auto (GStrv) words = g_strsplit_set (line, " \t\r\v\f", -1);
  g_autoptr (GPtrArray) w = g_ptr_array_new ();
  char *end;
  gint64 n;

  for (char **p = words; *p; p++)
    if (**p)
      g_ptr_array_add (w, *p);
  if (w->len != 2 || g_ascii_strcasecmp (w->pdata[0], "connect") != 0)
    return FALSE;
  n = g_ascii_strtoll (w->pdata[1], &end, 10);
  if (*end || n < 0 || n > G_MAXUINT32)
    return FALSE;
  *port = (guint32) n;
  return TRUE;
}

static void
serve_echo (Conn *conn, FakeGuest *guest)
{
  if (conn->input->len > 0)
    {
      FakeGuestReadiness readiness = fake_guest_readiness (guest);

      if (readiness == FAKE_GUEST_CANNOT_ANSWER)
        {
          conn_close (conn);
          return;
        }
      if (readiness == FAKE_GUEST_PAUSED)
        return;
      if (!send_text (conn, conn->input->str, conn->input->len))
        return;
      g_string_truncate (conn->input, 0);
    }
  if (conn->eof)
    conn_close (conn);
}

static gboolean on_writable (int fd, GIOCondition condition, gpointer data);

/* Writes what the session has to say without blocking; the rest waits
 * for the socket to take it. */
static void
flush_frames (Conn *conn)
{
  MvAgentBuf *out = fake_agent_session_output (conn->session);

  while (out->len > 0)
    {
      ssize_t n = send (conn->fd, out->data, out->len, MSG_NOSIGNAL | MSG_DONTWAIT);

      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        {
          if (!conn->out_source)
            conn->out_source = g_unix_fd_add (conn->fd, G_IO_OUT, on_writable, conn);
          return;
        }
      if (n <= 0)
        {
          conn_close (conn);
          return;
        }
      mv_agent_buf_consume (out, (size_t) n);
    }
  if (fake_agent_session_ending (conn->session))
    conn_close (conn);
}

static gboolean
on_writable (int fd, GIOCondition condition, gpointer data)
{
  Conn *conn = conn_ref (data);

  conn->out_source = 0;
  if (conn->fd >= 0)
    flush_frames (conn);
  conn_unref (conn);
  return G_SOURCE_REMOVE;
}

static void
serve_frames (Conn *conn, FakeGuest *guest)
{
  FakeGuestReadiness readiness = fake_guest_readiness (guest);
  gssize taken;

  if (readiness == FAKE_GUEST_CANNOT_ANSWER)
    {
      conn_close (conn);
      return;
    }
  if (readiness == FAKE_GUEST_PAUSED)
    return;
  if (!conn->session)
    conn->session = fake_agent_session_new (fake_guest_agent (guest));
  taken = fake_agent_session_feed (conn->session, (const guint8 *) conn->input->str,
                                   conn->input->len);
  if (taken < 0)
    {
      /* A malformed frame ends the session. */
      fake_log_debug (conn->vsock->log, "vsock: a malformed agent frame; the session ends");
      conn_close (conn);
      return;
    }
  g_string_erase (conn->input, 0, taken);
  flush_frames (conn);
  if (conn->fd >= 0 && conn->eof)
    conn_close (conn);
}

static void
serve_agent (Conn *conn, FakeGuest *guest)
{
  const char *newline;

  if (conn->speaks == SPEAKS_UNKNOWN && conn->input->len > 0)
    conn->speaks = conn->input->str[0] == '\0' ? SPEAKS_FRAMES : SPEAKS_LINES;
  if (conn->speaks == SPEAKS_FRAMES)
    {
      serve_frames (conn, guest);
      return;
    }

  while (conn->fd >= 0 && (newline = memchr (conn->input->str, '\n', conn->input->len)))
    {
      FakeGuestReadiness readiness = fake_guest_readiness (guest);
      g_autofree char *line = NULL;
      g_autofree char *reply = NULL;
      g_autofree char *out = NULL;
      FakeGuestAfter after;

      if (readiness == FAKE_GUEST_CANNOT_ANSWER)
        {
          conn_close (conn);
          return;
        }
      if (readiness == FAKE_GUEST_PAUSED)
        return;
      line = g_strndup (conn->input->str, newline - conn->input->str);
      g_string_erase (conn->input, 0, newline - conn->input->str + 1);
      if (*line && line[strlen (line) - 1] == '\r')
        line[strlen (line) - 1] = '\0';
      reply = fake_guest_agent_command (guest, line, &after);
      out = g_strconcat (reply, "\n", NULL);
      if (!send_text (conn, out, strlen (out)))
        return;
      fake_guest_agent_after (guest, &after);
    }
  if (conn->fd >= 0 && conn->eof)
    conn_close (conn);
}

/* The host asked for a guest port: the guest has to answer, which a
 * paused guest cannot do, and the request times out. */
static void
answer_connect (Conn *conn, FakeGuest *guest)
{
  FakeGuestReadiness readiness = fake_guest_readiness (guest);
  g_autofree char *ok = NULL;

  if (readiness == FAKE_GUEST_CANNOT_ANSWER ||
      (readiness == FAKE_GUEST_PAUSED && g_get_monotonic_time () > conn->deadline))
    {
      conn_close (conn);
      return;
    }
  if (readiness == FAKE_GUEST_PAUSED)
    return;
  conn->service = fake_guest_service_at (guest, conn->port);
  if (conn->service == FAKE_GUEST_NOTHING)
    {
      fake_log_debug (conn->vsock->log, "vsock: nothing listens on guest port %u", conn->port);
      conn_close (conn);
      return;
    }
  ok = g_strdup_printf ("OK %u\n", conn->vsock->next_port++);
  if (send_text (conn, ok, strlen (ok)))
    conn->state = CONN_SERVED;
}

static void
pump (Conn *conn)
{
  FakeGuest *guest = conn->vsock->guest;

  if (conn->fd >= 0 && conn->state == CONN_HANDSHAKE)
    {
      const char *newline = memchr (conn->input->str, '\n', conn->input->len);
      g_autofree char *line = NULL;

      if (!newline)
        {
          if (conn->eof || conn->input->len > HANDSHAKE_MAX_BYTES ||
              g_get_monotonic_time () > conn->deadline)
            conn_close (conn);
          return;
        }
      line = g_strndup (conn->input->str, newline - conn->input->str);
      g_string_erase (conn->input, 0, newline - conn->input->str + 1);
      if (!guest || !parse_connect (line, &conn->port))
        {
          conn_close (conn);
          return;
        }
      conn->state = CONN_WAITING;
      conn->deadline = g_get_monotonic_time () + CONNECT_TIMEOUT_US;
    }
  if (conn->fd >= 0 && conn->state == CONN_WAITING)
    answer_connect (conn, guest);
  if (conn->fd >= 0 && conn->state == CONN_SERVED)
    {
      if (conn->service == FAKE_GUEST_ECHO)
        serve_echo (conn, guest);
      else if (conn->service == FAKE_GUEST_SILENT)
        {
          g_string_truncate (conn->input, 0);
          if (conn->eof)
            conn_close (conn);
        }
      else
        serve_agent (conn, guest);
    }
}

static gboolean
on_readable (int fd, GIOCondition condition, gpointer data)
{
  Conn *conn = conn_ref (data);
  char buf[65536];
  ssize_t n = recv (fd, buf, sizeof buf, 0);
  gboolean keep;

  if (n > 0)
    g_string_append_len (conn->input, buf, n);
  else if (n == 0)
    {
      /* Nothing more to read; what is buffered is still answered. */
      conn->eof = TRUE;
      conn->source = 0;
    }
  else if (errno != EINTR && errno != EAGAIN)
    conn_close (conn);
  if (conn->fd >= 0)
    pump (conn);
  keep = conn->fd >= 0 && conn->source != 0;
  conn_unref (conn);
  return keep ? G_SOURCE_CONTINUE : G_SOURCE_REMOVE;
}

static Conn *
conn_new (FakeVsock *vsock, int fd, ConnState state)
{
  Conn *conn = g_new0 (Conn, 1);

  conn->refs = 1;                      /* the list's */
  conn->vsock = vsock;
  conn->fd = fd;
  conn->state = state;
  conn->input = g_string_new (NULL);
  conn->deadline = g_get_monotonic_time () + CONNECT_TIMEOUT_US;
  conn->source = g_unix_fd_add (fd, G_IO_IN | G_IO_HUP | G_IO_ERR, on_readable, conn);
  vsock->conns = g_list_prepend (vsock->conns, conn);
  return conn;
}

static gboolean
on_accept (int listener, GIOCondition condition, gpointer data)
{
  FakeVsock *vsock = data;
  int fd = accept4 (listener, NULL, NULL, SOCK_CLOEXEC);

  if (fd >= 0)
    conn_new (vsock, fd, CONN_HANDSHAKE);
  return G_SOURCE_CONTINUE;
}

FakeVsock *
fake_vsock_new (const char *uds_path, guint32 cid, FakeLog *log)
{
  FakeVsock *vsock = g_new0 (FakeVsock, 1);

  vsock->uds_path = g_strdup (uds_path);
  vsock->cid = cid;
  vsock->log = log;
  vsock->listener = -1;
  vsock->next_port = HOST_PORT_BASE;
  return vsock;
}

static gboolean
fill_address (struct sockaddr_un *addr, const char *path)
{
  memset (addr, 0, sizeof *addr);
  addr->sun_family = AF_UNIX;
  if (strlen (path) >= sizeof addr->sun_path)
    {
      errno = ENAMETOOLONG;
      return FALSE;
    }
  strcpy (addr->sun_path, path);
  return TRUE;
}

int
fake_vsock_bind (FakeVsock *vsock)
{
  struct sockaddr_un addr;
  int fd, saved;

  if (!fill_address (&addr, vsock->uds_path))
    return errno;
  fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return errno;
  if (bind (fd, (struct sockaddr *) &addr, sizeof addr) < 0 || listen (fd, 128) < 0)
    {
      saved = errno;
      close (fd);
      return saved;
    }
  vsock->listener = fd;
  vsock->bound = TRUE;
  return 0;
}

void
fake_vsock_start (FakeVsock *vsock, FakeGuest *guest)
{
  vsock->guest = guest;
  if (!vsock->listen_source && vsock->listener >= 0)
    vsock->listen_source = g_unix_fd_add (vsock->listener, G_IO_IN, on_accept, vsock);
}

void
fake_vsock_reset_all (FakeVsock *vsock)
{
  while (vsock->conns)
    conn_close (vsock->conns->data);
}

void
fake_vsock_drop_guest_connections (FakeVsock *vsock)
{
  GList *served = NULL;

  for (GList *l = vsock->conns; l; l = l->next)
    if (((Conn *) l->data)->state == CONN_SERVED)
      served = g_list_prepend (served, conn_ref (l->data));
  for (GList *l = served; l; l = l->next)
    conn_close (l->data);
  g_list_free_full (served, conn_release);
}

void
fake_vsock_pump (FakeVsock *vsock)
{
  GList *all = g_list_copy_deep (vsock->conns, conn_copy, NULL);

  for (GList *l = all; l; l = l->next)
    if (((Conn *) l->data)->fd >= 0)
      pump (l->data);
  g_list_free_full (all, conn_release);
}

int
fake_vsock_connect_to_host (FakeVsock *vsock, guint32 port, int *errnum)
{
  g_autofree char *path = g_strdup_printf ("%s_%u", vsock->uds_path, port);
  struct sockaddr_un addr;
  int fd;

  if (!fill_address (&addr, path) ||
      (fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
    {
      *errnum = errno;
      return -1;
    }
  if (connect (fd, (struct sockaddr *) &addr, sizeof addr) < 0)
    {
      *errnum = errno;
      close (fd);
      return -1;
    }
  return fd;
}

void
fake_vsock_adopt (FakeVsock *vsock, int fd, FakeGuestService service)
{
  Conn *conn = conn_new (vsock, fd, CONN_SERVED);

  conn->service = service;
}

void
fake_vsock_free (FakeVsock *vsock)
{
  if (!vsock)
    return;
  if (vsock->listen_source)
    g_source_remove (vsock->listen_source);
  if (vsock->listener >= 0)
    close (vsock->listener);
  /* The device goes with its socket, so that a VM booted again can bind
   * it anew. */
  if (vsock->bound)
    unlink (vsock->uds_path);
  fake_vsock_reset_all (vsock);
  g_free (vsock->uds_path);
  g_free (vsock);
}
