/* The session with a running guest's agent, on the main loop: dialled in
 * a worker thread, then read and written without blocking. Execs are
 * relayed between the caller's sockets and their channel, never holding
 * more of a stream than the window the protocol grants. */
#include "agent.h"
#include "agent-private.h"
#include "core/errors.h"
#include "util/log.h"

#include <errno.h>
#include <fcntl.h>
#include <gio/gio.h>
#include <glib-unix.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define DIAL_TIMEOUT_MS   1000
#define REDIAL_MS         1000
#define READ_CHUNK        (64 * 1024)
/* How long an exec asked for before the agent has answered waits for it
 * (a guest that was just started, or a daemon that was just restarted). */
#define EXEC_WAIT_S       20

typedef struct _Exec Exec;

struct _MvAgentSession {
  MvAgentChannel        channel;
  GBytes               *config;
  GBytes               *metadata;
  MvAgentSessionEvents  events;
  gpointer              data;

  int                   fd;            /* -1: not connected */
  guint                 fd_source;
  GIOCondition          fd_cond;
  GByteArray           *in;
  GByteArray           *out;           /* frames not yet written */
  gboolean              ready;         /* the agent said HELLO on this connection */
  guint64               instance;      /* the agent process that said it */
  GCancellable         *dialling;      /* of the dial under way, or NULL */
  guint                 redial_source;

  GHashTable           *execs;         /* channel -> Exec */
  guint32               next_channel;
  GQueue                pings;         /* Ping */
  gboolean              poweroff_unsent; /* POWEROFF, once the agent answers */
  GBytes               *reidentify;    /* REIDENTIFY, until the agent answers it */
  gboolean              reidentify_sent; /* on this connection */
};

typedef struct {
  void     (*done) (GBytes *pong, gpointer data);
  gpointer   data;
} Ping;

/* One relayed stream of an exec, from the guest to the caller. */
typedef struct {
  int         fd;                /* the caller's socket, our end; -1: none */
  guint       source;            /* watching it for room to write */
  GByteArray *pending;           /* from the guest, not yet written */
  gboolean    eof;               /* the guest sent EOF */
  gboolean    discard;           /* the caller went away: drop, and grant */
} Out;

struct _Exec {
  MvAgentSession *session;
  guint32         channel;
  gboolean        tty;
  int             in_fd;         /* the caller's stdin, our end (with tty, out[0].fd too) */
  guint           in_source;
  guint32         in_credit;     /* stdin bytes the guest will take */
  gboolean        in_done;
  Out             out[2];        /* stdout, stderr */
  int             status_fd;
  guint           status_source;
  gboolean        exited;
  char           *status_line;
  GString        *status_in;     /* what the caller wrote on the status, to a line's end */
  GBytes         *unsent;        /* its EXEC, until the agent answers */
  guint           unsent_timer;
};

static void session_send (MvAgentSession *session, const MvAgentBuf *frame);
static void session_close (MvAgentSession *session, const char *why);
static void exec_update_in (Exec *exec);
static void exec_try_finish (Exec *exec);

/* ---- the connection ---- */

static void
queue_header_frame (MvAgentSession *session, guint8 type, guint32 channel)
{
  guint8 frame[MV_AGENT_FRAME_HEADER_BYTES];

  mv_agent_frame_header (frame, type, channel);
  g_byte_array_append (session->out, frame, sizeof frame);
  session_send (session, NULL);
}

static void
queue_bytes (MvAgentSession *session, GBytes *frame)
{
  g_byte_array_append (session->out, g_bytes_get_data (frame, NULL), g_bytes_get_size (frame));
  session_send (session, NULL);
}

static gboolean on_fd (int fd, GIOCondition cond, gpointer data);

static void
watch_fd (MvAgentSession *session)
{
  GIOCondition cond = G_IO_IN | G_IO_HUP | G_IO_ERR;

  if (session->out->len > 0)
    cond |= G_IO_OUT;
  if (session->fd_source && cond == session->fd_cond)
    return;
  g_clear_handle_id (&session->fd_source, g_source_remove);
  session->fd_cond = cond;
  session->fd_source = g_unix_fd_add (session->fd, cond, on_fd, session);
}

/* Writes what is queued, as far as the socket takes it. @frame, if not
 * NULL, is queued first. */
static void
session_send (MvAgentSession *session, const MvAgentBuf *frame)
{
  if (frame)
    g_byte_array_append (session->out, frame->data, frame->len);
  if (session->fd < 0)
    {
      g_byte_array_set_size (session->out, 0);
      return;
    }
  while (session->out->len > 0)
    {
      ssize_t n = send (session->fd, session->out->data, session->out->len,
                        MSG_NOSIGNAL | MSG_DONTWAIT);

      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        break;
      if (n <= 0)
        {
          /* Closed where it is read (on_fd), never here: the caller may
           * be an exec's callback, which the close would free under it.
           * What is queued cannot go anywhere. */
          g_debug ("agent session on %s: %s", session->channel.socket_path, g_strerror (errno));
          g_byte_array_set_size (session->out, 0);
          break;
        }
      g_byte_array_remove_range (session->out, 0, n);
    }
  watch_fd (session);
}

static void
send_hello (MvAgentSession *session)
{
  MvAgentBuf buf;

  mv_agent_buf_init (&buf);
  mv_agent_buf_begin (&buf, MV_AGENT_HELLO, 0);
  mv_agent_buf_put_u32 (&buf, MV_AGENT_F_VERSION, MV_AGENT_PROTOCOL_VERSION);
  /* An older agent skips the field, and sends no OUTPUT. */
  if (session->events.output)
    mv_agent_buf_put_u32 (&buf, MV_AGENT_F_WANT_OUTPUT, 1);
  if (mv_agent_buf_end (&buf))
    session_send (session, &buf);
  mv_agent_buf_clear (&buf);
}

static void dial (MvAgentSession *session);

static gboolean
on_redial (gpointer data)
{
  MvAgentSession *session = data;

  session->redial_source = 0;
  dial (session);
  return G_SOURCE_REMOVE;
}

static void
dial_thread (GTask *task, gpointer source, gpointer task_data, GCancellable *cancellable)
{
  const MvAgentChannel *channel = task_data;
  GError *error = NULL;
  int fd = mv_agent_channel_dial (channel->kind, channel->socket_path, DIAL_TIMEOUT_MS, &error);

  if (fd < 0)
    g_task_return_error (task, error);
  else
    g_task_return_int (task, fd);
}

static void
channel_free (gpointer data)
{
  MvAgentChannel *channel = data;

  g_free (channel->socket_path);
  g_free (channel);
}

static void
on_dialled (GObject *source, GAsyncResult *result, gpointer data)
{
  GTask *task = G_TASK (result);
  GCancellable *cancellable = g_task_get_cancellable (task);
  g_autoptr (GError) error = NULL;
  MvAgentSession *session;
  int fd = (int) g_task_propagate_int (task, &error);

  if (g_cancellable_is_cancelled (cancellable))
    {
      /* The session is gone. */
      if (fd >= 0)
        close (fd);
      return;
    }
  session = data;
  g_clear_object (&session->dialling);
  if (fd < 0)
    {
      session->redial_source = g_timeout_add (REDIAL_MS, on_redial, session);
      return;
    }
  g_unix_set_fd_nonblocking (fd, TRUE, NULL);
  session->fd = fd;
  g_byte_array_set_size (session->in, 0);
  send_hello (session);
  watch_fd (session);
}

static void
dial (MvAgentSession *session)
{
  g_autoptr (GTask) task = NULL;
  MvAgentChannel *channel = g_new0 (MvAgentChannel, 1);

  channel->kind = session->channel.kind;
  channel->socket_path = g_strdup (session->channel.socket_path);
  session->dialling = g_cancellable_new ();
  task = g_task_new (NULL, session->dialling, on_dialled, session);
  g_task_set_task_data (task, channel, channel_free);
  g_task_run_in_thread (task, dial_thread);
}

/* ---- execs ---- */

static void
out_clear (Out *out)
{
  g_clear_handle_id (&out->source, g_source_remove);
  g_clear_pointer (&out->pending, g_byte_array_unref);
}

static void
exec_free (Exec *exec)
{
  g_clear_handle_id (&exec->in_source, g_source_remove);
  g_clear_handle_id (&exec->status_source, g_source_remove);
  g_clear_handle_id (&exec->unsent_timer, g_source_remove);
  g_clear_pointer (&exec->unsent, g_bytes_unref);
  for (guint i = 0; i < G_N_ELEMENTS (exec->out); i++)
    {
      out_clear (&exec->out[i]);
      if (exec->out[i].fd >= 0 && exec->out[i].fd != exec->in_fd)
        close (exec->out[i].fd);
    }
  if (exec->in_fd >= 0)
    close (exec->in_fd);
  if (exec->status_fd >= 0)
    close (exec->status_fd);
  g_free (exec->status_line);
  if (exec->status_in)
    g_string_free (exec->status_in, TRUE);
  g_free (exec);
}

/* Ends @exec with @line on its status (unless it has one) and forgets it. */
static void
exec_end (Exec *exec, const char *line)
{
  if (exec->status_fd >= 0)
    {
      g_autofree char *text = g_strdup_printf ("%s\n", exec->status_line ? exec->status_line : line);
      /* The status socket is fresh and the line short: it fits. */
      (void) send (exec->status_fd, text, strlen (text), MSG_NOSIGNAL | MSG_DONTWAIT);
    }
  g_hash_table_remove (exec->session->execs, GUINT_TO_POINTER (exec->channel));
}

static void
send_stream_frame (MvAgentSession *session, guint8 type, guint32 channel, guint32 stream,
                   guint8 tag, guint32 value)
{
  MvAgentBuf buf;

  mv_agent_buf_init (&buf);
  mv_agent_buf_begin (&buf, type, channel);
  mv_agent_buf_put_u32 (&buf, MV_AGENT_F_STREAM, stream);
  if (tag)
    mv_agent_buf_put_u32 (&buf, tag, value);
  if (mv_agent_buf_end (&buf))
    session_send (session, &buf);
  mv_agent_buf_clear (&buf);
}

static gboolean on_out_writable (int fd, GIOCondition cond, gpointer data);

/* Writes what the guest sent of stream @i to the caller, grants the guest
 * as much again, and passes the guest's EOF on once all is written. */
static void
exec_flush (Exec *exec, guint i)
{
  Out *out = &exec->out[i];
  guint32 written = 0;

  while (out->pending->len > 0 && !out->discard)
    {
      ssize_t n = send (out->fd, out->pending->data, out->pending->len,
                        MSG_NOSIGNAL | MSG_DONTWAIT);

      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        break;
      if (n <= 0)
        {
          /* The caller stopped reading for good: what comes is dropped,
           * so that the command is not held back. */
          out->discard = TRUE;
          break;
        }
      g_byte_array_remove_range (out->pending, 0, n);
      written += n;
    }
  if (out->discard)
    {
      written += out->pending->len;
      g_byte_array_set_size (out->pending, 0);
    }
  if (written > 0 && !out->eof)
    send_stream_frame (exec->session, MV_AGENT_WINDOW, exec->channel, i + 1, MV_AGENT_F_GRANT,
                       written);
  if (out->pending->len > 0)
    {
      if (!out->source)
        out->source = g_unix_fd_add (out->fd, G_IO_OUT | G_IO_ERR | G_IO_HUP, on_out_writable,
                                     exec);
      return;
    }
  g_clear_handle_id (&out->source, g_source_remove);
  if (out->eof && out->fd >= 0)
    {
      if (out->fd == exec->in_fd)
        shutdown (out->fd, SHUT_WR);
      else
        {
          close (out->fd);
        }
      if (out->fd != exec->in_fd)
        out->fd = -1;
      else
        out->discard = TRUE;
    }
}

static gboolean
on_out_writable (int fd, GIOCondition cond, gpointer data)
{
  Exec *exec = data;
  guint i = exec->out[0].fd == fd && exec->out[0].source ? 0 : 1;

  exec->out[i].source = 0;
  exec_flush (exec, i);
  exec_try_finish (exec);
  return G_SOURCE_REMOVE;
}

static void
exec_try_finish (Exec *exec)
{
  for (guint i = 0; i < G_N_ELEMENTS (exec->out); i++)
    if (exec->out[i].pending && exec->out[i].pending->len > 0)
      return;
  if (exec->exited)
    exec_end (exec, exec->status_line);
}

static gboolean
on_in_readable (int fd, GIOCondition cond, gpointer data)
{
  Exec *exec = data;
  guint8 chunk[MV_AGENT_DATA_MAX_BYTES];
  gsize want = MIN (sizeof chunk, exec->in_credit);
  ssize_t n = recv (fd, chunk, want, MSG_DONTWAIT);

  if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))
    return G_SOURCE_CONTINUE;
  if (n <= 0)
    {
      exec->in_source = 0;
      exec->in_done = TRUE;
      send_stream_frame (exec->session, MV_AGENT_EOF, exec->channel, MV_AGENT_STREAM_STDIN, 0, 0);
      return G_SOURCE_REMOVE;
    }
  {
    MvAgentBuf buf;

    mv_agent_buf_init (&buf);
    mv_agent_buf_begin (&buf, MV_AGENT_DATA, exec->channel);
    mv_agent_buf_put_u32 (&buf, MV_AGENT_F_STREAM, MV_AGENT_STREAM_STDIN);
    mv_agent_buf_put (&buf, MV_AGENT_F_BYTES, chunk, n);
    if (mv_agent_buf_end (&buf))
      session_send (exec->session, &buf);
    mv_agent_buf_clear (&buf);
  }
  exec->in_credit -= n;
  if (exec->in_credit == 0)
    {
      exec->in_source = 0;
      return G_SOURCE_REMOVE;
    }
  return G_SOURCE_CONTINUE;
}

/* Reads the caller's stdin while the guest has room for it. */
static void
exec_update_in (Exec *exec)
{
  if (exec->in_done || exec->in_credit == 0 || exec->in_source)
    return;
  exec->in_source = g_unix_fd_add (exec->in_fd, G_IO_IN | G_IO_HUP | G_IO_ERR, on_in_readable,
                                   exec);
}

/* "resize ROWS COLS" from the caller, on the status: the terminal's new
 * size, for the guest. */
static void
status_command (Exec *exec, const char *line)
{
  guint rows = 0, cols = 0;
  MvAgentBuf buf;

  if (!exec->tty || exec->unsent || sscanf (line, "resize %u %u", &rows, &cols) != 2 ||
      rows == 0 || cols == 0 || rows > G_MAXUINT16 || cols > G_MAXUINT16)
    return;
  mv_agent_buf_init (&buf);
  mv_agent_buf_begin (&buf, MV_AGENT_RESIZE, exec->channel);
  mv_agent_buf_put_u32 (&buf, MV_AGENT_F_ROWS, rows);
  mv_agent_buf_put_u32 (&buf, MV_AGENT_F_COLS, cols);
  if (mv_agent_buf_end (&buf))
    session_send (exec->session, &buf);
  mv_agent_buf_clear (&buf);
}

/* Lines the caller writes, each at most this long; a longer one is
 * dropped whole. */
#define STATUS_LINE_MAX 64

static gboolean
on_status_event (int fd, GIOCondition cond, gpointer data)
{
  Exec *exec = data;
  MvAgentBuf buf;
  char chunk[256];
  ssize_t n = (cond & G_IO_IN) ? recv (fd, chunk, sizeof chunk, MSG_DONTWAIT) : 0;

  if (n > 0 || (n < 0 && (errno == EAGAIN || errno == EINTR)))
    {
      if (!exec->status_in)
        exec->status_in = g_string_new (NULL);
      for (ssize_t i = 0; i < n; i++)
        {
          if (chunk[i] != '\n')
            {
              if (exec->status_in->len <= STATUS_LINE_MAX)
                g_string_append_c (exec->status_in, chunk[i]);
              continue;
            }
          if (exec->status_in->len <= STATUS_LINE_MAX)
            status_command (exec, exec->status_in->str);
          g_string_truncate (exec->status_in, 0);
        }
      return G_SOURCE_CONTINUE;
    }
  /* The caller closed the status: the command is not wanted any more. */
  exec->status_source = 0;
  if (exec->unsent)
    {
      exec_end (exec, "error abandoned");
      return G_SOURCE_REMOVE;
    }
  mv_agent_buf_init (&buf);
  mv_agent_buf_begin (&buf, MV_AGENT_SIGNAL, exec->channel);
  mv_agent_buf_put_u32 (&buf, MV_AGENT_F_SIGNAL, SIGKILL);
  if (mv_agent_buf_end (&buf))
    session_send (exec->session, &buf);
  mv_agent_buf_clear (&buf);
  return G_SOURCE_REMOVE;
}

/* Ends the execs the agent was running (and, with @unsent too, those
 * still waiting for it to answer). */
static void
end_execs (MvAgentSession *session, const char *line, gboolean unsent)
{
  GHashTableIter iter;
  gpointer value;

  g_hash_table_iter_init (&iter, session->execs);
  while (g_hash_table_iter_next (&iter, NULL, &value))
    {
      Exec *exec = value;

      if (exec->unsent && !unsent)
        continue;
      if (exec->status_fd >= 0)
        {
          g_autofree char *text = g_strdup_printf ("%s\n", line);
          (void) send (exec->status_fd, text, strlen (text), MSG_NOSIGNAL | MSG_DONTWAIT);
        }
      g_hash_table_iter_remove (&iter);
    }
}

static void
on_reidentify_probe (GBytes *pong, gpointer data)
{
  MvAgentSession *session = data;
  const char *const none[] = { NULL };

  /* NULL: the connection closed, and REIDENTIFY goes again on the next. */
  if (!pong || !session->reidentify || !session->reidentify_sent)
    return;
  /* The agent answers frames in order: a PONG before REIDENTIFIED is an
   * agent that skipped the frame. */
  g_clear_pointer (&session->reidentify, g_bytes_unref);
  session->reidentify_sent = FALSE;
  if (session->events.reidentified)
    session->events.reidentified (FALSE, none, NULL, session->data);
}

static void
send_reidentify (MvAgentSession *session)
{
  g_autoptr (GBytes) probe = g_bytes_new_static ("reidentify", 10);

  if (!session->reidentify || session->reidentify_sent)
    return;
  queue_bytes (session, session->reidentify);
  session->reidentify_sent = TRUE;
  mv_agent_session_ping (session, probe, on_reidentify_probe, session);
}

/* The agent has answered: the execs asked for before go out. */
static void
send_unsent (MvAgentSession *session)
{
  GHashTableIter iter;
  gpointer value;

  /* Before anything runs in a restored guest: its identity. */
  send_reidentify (session);

  if (session->poweroff_unsent)
    {
      session->poweroff_unsent = FALSE;
      queue_header_frame (session, MV_AGENT_POWEROFF, 0);
    }

  g_hash_table_iter_init (&iter, session->execs);
  while (g_hash_table_iter_next (&iter, NULL, &value))
    {
      Exec *exec = value;

      if (!exec->unsent)
        continue;
      queue_bytes (session, exec->unsent);
      g_clear_pointer (&exec->unsent, g_bytes_unref);
      g_clear_handle_id (&exec->unsent_timer, g_source_remove);
      exec_update_in (exec);
    }
}

static gboolean
on_unsent_timeout (gpointer data)
{
  Exec *exec = data;

  exec->unsent_timer = 0;
  exec_end (exec, "error the guest's agent did not answer");
  return G_SOURCE_REMOVE;
}

/* ---- frames from the guest ---- */

static void
fail_ping (MvAgentSession *session)
{
  Ping *ping;

  while ((ping = g_queue_pop_head (&session->pings)))
    {
      ping->done (NULL, ping->data);
      g_free (ping);
    }
}

static gboolean
handle_hello (MvAgentSession *session, const MvAgentFrame *frame)
{
  g_autofree char *state = mv_agent_frame_string (frame, MV_AGENT_F_STATE);
  g_autofree char *version = mv_agent_frame_string (frame, MV_AGENT_F_AGENT_VERSION);
  guint32 protocol = 0;
  guint64 instance = 0;
  MvAgentField field;

  if (!mv_agent_frame_u32 (frame, MV_AGENT_F_VERSION, &protocol) ||
      protocol != MV_AGENT_PROTOCOL_VERSION)
    return FALSE;
  if (mv_agent_frame_find (frame, MV_AGENT_F_INSTANCE, &field))
    mv_agent_field_u64 (&field, &instance);
  /* Another agent process (one that took over from the initramfs's) has
   * none of the execs of the one before; the same one says HELLO twice
   * when it notices the host as the host greets it. */
  if (session->ready && instance != session->instance)
    end_execs (session, "error the guest's agent started again", FALSE);
  session->instance = instance;
  if (g_strcmp0 (state, "unconfigured") == 0)
    {
      if (session->config)
        queue_bytes (session, session->config);
      return TRUE;
    }
  session->ready = TRUE;
  if (session->events.hello)
    session->events.hello (version ? version : "", session->data);
  send_unsent (session);
  if (g_strcmp0 (state, "exited") == 0)
    {
      gboolean has_code;
      int code, sig;

      mv_agent_frame_exit (frame, &has_code, &code, &sig);
      if (session->events.exited)
        session->events.exited (has_code, code, sig, NULL, session->data);
      queue_header_frame (session, MV_AGENT_EXIT_ACK, 0);
    }
  /* A template holds nothing of any one machine (docs/agent-protocol.md). */
  else if (session->metadata && g_strcmp0 (state, "template") != 0)
    queue_bytes (session, session->metadata);
  return TRUE;
}

static gboolean
handle_data (MvAgentSession *session, Exec *exec, const MvAgentFrame *frame)
{
  MvAgentField bytes;
  guint32 stream;
  Out *out;

  if (!mv_agent_frame_u32 (frame, MV_AGENT_F_STREAM, &stream) ||
      (stream != MV_AGENT_STREAM_STDOUT && stream != MV_AGENT_STREAM_STDERR) ||
      !mv_agent_frame_find (frame, MV_AGENT_F_BYTES, &bytes))
    return FALSE;
  out = &exec->out[stream - 1];
  if (out->fd < 0 || out->eof)
    return FALSE;
  /* Never more than the window is in flight: more is a broken agent. */
  if (out->pending->len + bytes.len > MV_AGENT_WINDOW_BYTES)
    return FALSE;
  g_byte_array_append (out->pending, bytes.value, bytes.len);
  exec_flush (exec, stream - 1);
  exec_try_finish (exec);
  return TRUE;
}

static gboolean
handle_exec_frame (MvAgentSession *session, const MvAgentFrame *frame)
{
  Exec *exec = g_hash_table_lookup (session->execs, GUINT_TO_POINTER (frame->channel));
  guint32 stream, grant;

  if (!exec)
    return TRUE;   /* one that the host has already given up on */
  switch (frame->type)
    {
    case MV_AGENT_DATA:
      return handle_data (session, exec, frame);
    case MV_AGENT_EOF:
      if (!mv_agent_frame_u32 (frame, MV_AGENT_F_STREAM, &stream) ||
          (stream != MV_AGENT_STREAM_STDOUT && stream != MV_AGENT_STREAM_STDERR))
        return FALSE;
      exec->out[stream - 1].eof = TRUE;
      if (exec->out[stream - 1].fd >= 0)
        exec_flush (exec, stream - 1);
      exec_try_finish (exec);
      return TRUE;
    case MV_AGENT_WINDOW:
      if (!mv_agent_frame_u32 (frame, MV_AGENT_F_STREAM, &stream) ||
          stream != MV_AGENT_STREAM_STDIN ||
          !mv_agent_frame_u32 (frame, MV_AGENT_F_GRANT, &grant) ||
          grant > MV_AGENT_WINDOW_BYTES - exec->in_credit)
        return FALSE;
      exec->in_credit += grant;
      exec_update_in (exec);
      return TRUE;
    case MV_AGENT_EXEC_EXIT:
      {
        gboolean has_code;
        int code, sig;
        g_autofree char *message = mv_agent_frame_string (frame, MV_AGENT_F_MESSAGE);

        mv_agent_frame_exit (frame, &has_code, &code, &sig);
        exec->exited = TRUE;
        g_free (exec->status_line);
        if (has_code)
          exec->status_line = g_strdup_printf ("exit %d", code);
        else if (sig)
          exec->status_line = g_strdup_printf ("signal %d", sig);
        else
          exec->status_line = g_strdup_printf ("error %s", message ? message : "the command ended");
        if (has_code && message && *message && exec->out[1].fd >= 0 && !exec->out[1].eof &&
            exec->out[1].pending->len < MV_AGENT_WINDOW_BYTES - strlen (message) - 1)
          {
            /* Why it could not start, where the caller looks for it. */
            g_byte_array_append (exec->out[1].pending, (const guint8 *) message, strlen (message));
            g_byte_array_append (exec->out[1].pending, (const guint8 *) "\n", 1);
          }
        for (guint i = 0; i < G_N_ELEMENTS (exec->out); i++)
          {
            exec->out[i].eof = TRUE;
            if (exec->out[i].fd >= 0)
              exec_flush (exec, i);
          }
        exec_try_finish (exec);
        return TRUE;
      }
    default:
      return TRUE;
    }
}

static gboolean
handle_frame (MvAgentSession *session, const MvAgentFrame *frame)
{
  if (!mv_agent_fields_valid (frame->payload, frame->payload_len, MV_AGENT_NESTED_TAGS,
                              sizeof MV_AGENT_NESTED_TAGS))
    return FALSE;
  if (frame->channel != 0)
    return handle_exec_frame (session, frame);
  switch (frame->type)
    {
    case MV_AGENT_HELLO:
      return handle_hello (session, frame);
    case MV_AGENT_READY:
      if (!session->ready && session->metadata)
        queue_bytes (session, session->metadata);
      session->ready = TRUE;
      send_unsent (session);
      return TRUE;
    case MV_AGENT_EXIT:
      {
        gboolean has_code;
        int code, sig;
        g_autofree char *message = mv_agent_frame_string (frame, MV_AGENT_F_MESSAGE);

        mv_agent_frame_exit (frame, &has_code, &code, &sig);
        if (session->events.exited)
          session->events.exited (has_code, code, sig, message, session->data);
        queue_header_frame (session, MV_AGENT_EXIT_ACK, 0);
        return TRUE;
      }
    case MV_AGENT_HEALTH:
      {
        g_autofree char *status = mv_agent_frame_string (frame, MV_AGENT_F_HEALTH_STATUS);
        g_autofree char *output = mv_agent_frame_string (frame, MV_AGENT_F_OUTPUT);
        guint32 streak = 0;

        if (!status)
          return FALSE;
        mv_agent_frame_u32 (frame, MV_AGENT_F_FAILING_STREAK, &streak);
        if (session->events.health)
          session->events.health (status, streak, output ? output : "", session->data);
        return TRUE;
      }
    case MV_AGENT_USAGE:
      {
        MvAgentField busy_field, total_field;
        guint64 busy = 0, total = 0;
        guint32 cpus = 1;

        if (!mv_agent_frame_find (frame, MV_AGENT_F_CPU_BUSY, &busy_field) ||
            !mv_agent_field_u64 (&busy_field, &busy) ||
            !mv_agent_frame_find (frame, MV_AGENT_F_CPU_TOTAL, &total_field) ||
            !mv_agent_field_u64 (&total_field, &total) || busy > total)
          return FALSE;
        mv_agent_frame_u32 (frame, MV_AGENT_F_CPUS, &cpus);
        if (session->events.usage)
          session->events.usage (busy, total, MAX (cpus, 1), session->data);
        return TRUE;
      }
    case MV_AGENT_PONG:
      {
        Ping *ping = g_queue_pop_head (&session->pings);
        MvAgentField bytes;

        if (ping)
          {
            g_autoptr (GBytes) pong = mv_agent_frame_find (frame, MV_AGENT_F_BYTES, &bytes)
                                      ? g_bytes_new (bytes.value, bytes.len)
                                      : g_bytes_new (NULL, 0);
            ping->done (pong, ping->data);
            g_free (ping);
          }
        return TRUE;
      }
    case MV_AGENT_REIDENTIFIED:
      {
        g_autoptr (GPtrArray) changed = g_ptr_array_new_with_free_func (g_free);
        g_autofree char *message = mv_agent_frame_string (frame, MV_AGENT_F_MESSAGE);
        MvAgentFields fields;
        MvAgentField field;

        mv_agent_fields_init (&fields, frame->payload, frame->payload_len);
        while (mv_agent_fields_next (&fields, &field) > 0)
          if (field.tag == MV_AGENT_F_CHANGED && !memchr (field.value, '\0', field.len))
            g_ptr_array_add (changed, g_utf8_make_valid ((const char *) field.value, field.len));
        g_ptr_array_add (changed, NULL);
        /* A repeat's answer (the connection closed before this one came)
         * has been heard. */
        if (!session->reidentify)
          return TRUE;
        g_clear_pointer (&session->reidentify, g_bytes_unref);
        session->reidentify_sent = FALSE;
        if (session->events.reidentified)
          session->events.reidentified (TRUE, (const char *const *) changed->pdata,
                                        message && *message ? message : NULL, session->data);
        return TRUE;
      }
    case MV_AGENT_OUTPUT:
      {
        MvAgentField bytes, dropped_field;
        guint64 dropped = 0;
        guint32 stream;

        if (!mv_agent_frame_u32 (frame, MV_AGENT_F_STREAM, &stream) ||
            (stream != MV_AGENT_STREAM_STDOUT && stream != MV_AGENT_STREAM_STDERR) ||
            !mv_agent_frame_find (frame, MV_AGENT_F_BYTES, &bytes))
          return FALSE;
        if (mv_agent_frame_find (frame, MV_AGENT_F_DROPPED, &dropped_field) &&
            !mv_agent_field_u64 (&dropped_field, &dropped))
          return FALSE;
        if (session->events.output)
          session->events.output (stream, bytes.value, bytes.len, dropped, session->data);
        return TRUE;
      }
    case MV_AGENT_FAILED:
    default:
      /* FAILED is the boot's to report (agent-ready.c); unknown types
       * are skipped. */
      return TRUE;
    }
}

static void
session_read (MvAgentSession *session)
{
  for (;;)
    {
      guint8 chunk[READ_CHUNK];
      ssize_t n = recv (session->fd, chunk, sizeof chunk, MSG_DONTWAIT);
      gsize at = 0;

      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        return;
      if (n <= 0)
        {
          session_close (session, n == 0 ? "the guest closed the channel" : g_strerror (errno));
          return;
        }
      g_byte_array_append (session->in, chunk, n);
      for (;;)
        {
          const char *why = NULL;
          MvAgentFrame frame;
          long taken = mv_agent_frame_parse (session->in->data + at, session->in->len - at,
                                             &frame, &why);
          if (taken == 0)
            break;
          if (taken < 0 || !handle_frame (session, &frame))
            {
              session_close (session, taken < 0 ? why : "a frame that breaks the protocol");
              return;
            }
          /* handle_frame() may have closed the session. */
          if (session->fd < 0)
            return;
          at += taken;
        }
      g_byte_array_remove_range (session->in, 0, at);
    }
}

static gboolean
on_fd (int fd, GIOCondition cond, gpointer data)
{
  MvAgentSession *session = data;

  if (cond & G_IO_OUT)
    session_send (session, NULL);
  if (session->fd >= 0 && (cond & (G_IO_IN | G_IO_HUP | G_IO_ERR)))
    session_read (session);
  if (session->fd < 0)
    return G_SOURCE_REMOVE;
  return G_SOURCE_CONTINUE;
}

static void
session_close (MvAgentSession *session, const char *why)
{
  if (session->fd < 0)
    return;
  g_debug ("agent session on %s closed: %s", session->channel.socket_path, why);
  g_clear_handle_id (&session->fd_source, g_source_remove);
  session->fd_source = 0;
  close (session->fd);
  session->fd = -1;
  session->ready = FALSE;
  session->reidentify_sent = FALSE;
  g_byte_array_set_size (session->out, 0);
  end_execs (session, "error the connection to the guest's agent was lost", FALSE);
  fail_ping (session);
  if (!session->redial_source)
    session->redial_source = g_timeout_add (REDIAL_MS, on_redial, session);
}

/* ---- the API ---- */

MvAgentSession *
mv_agent_session_new (const MvAgentChannel *channel, GBytes *config,
                      const MvAgentSessionEvents *events, gpointer data)
{
  MvAgentSession *session = g_new0 (MvAgentSession, 1);

  session->channel.kind = channel->kind;
  session->channel.socket_path = g_strdup (channel->socket_path);
  session->channel.cid = channel->cid;
  session->config = config ? g_bytes_ref (config) : NULL;
  if (events)
    session->events = *events;
  session->data = data;
  session->fd = -1;
  session->in = g_byte_array_new ();
  session->out = g_byte_array_new ();
  session->execs = g_hash_table_new_full (NULL, NULL, NULL, (GDestroyNotify) exec_free);
  session->next_channel = 1;
  g_queue_init (&session->pings);
  dial (session);
  return session;
}

void
mv_agent_session_free (MvAgentSession *session)
{
  if (!session)
    return;
  if (session->dialling)
    {
      g_cancellable_cancel (session->dialling);
      g_clear_object (&session->dialling);
    }
  g_clear_handle_id (&session->redial_source, g_source_remove);
  end_execs (session, "error the machine stopped", TRUE);
  if (session->fd >= 0)
    {
      g_clear_handle_id (&session->fd_source, g_source_remove);
      close (session->fd);
    }
  fail_ping (session);
  g_hash_table_unref (session->execs);
  g_byte_array_unref (session->in);
  g_byte_array_unref (session->out);
  g_clear_pointer (&session->config, g_bytes_unref);
  g_clear_pointer (&session->metadata, g_bytes_unref);
  g_clear_pointer (&session->reidentify, g_bytes_unref);
  g_free (session->channel.socket_path);
  g_free (session);
}

gboolean
mv_agent_session_ready (MvAgentSession *session)
{
  return session->ready;
}

void
mv_agent_session_set_guest (MvAgentSession *session, GBytes *config, GBytes *metadata)
{
  g_clear_pointer (&session->config, g_bytes_unref);
  session->config = config ? g_bytes_ref (config) : NULL;
  g_clear_pointer (&session->metadata, g_bytes_unref);
  session->metadata = metadata ? g_bytes_ref (metadata) : NULL;
  if (session->ready && metadata)
    queue_bytes (session, metadata);
}

void
mv_agent_session_reidentify (MvAgentSession *session, GBytes *frame)
{
  g_clear_pointer (&session->reidentify, g_bytes_unref);
  session->reidentify = g_bytes_ref (frame);
  session->reidentify_sent = FALSE;
  if (session->ready)
    send_reidentify (session);
}

gboolean
mv_agent_session_poweroff (MvAgentSession *session, gboolean when_ready)
{
  if (!session->ready)
    {
      session->poweroff_unsent = when_ready;
      return when_ready;
    }
  queue_header_frame (session, MV_AGENT_POWEROFF, 0);
  return TRUE;
}

gboolean
mv_agent_session_ping (MvAgentSession *session, GBytes *payload,
                       void (*done) (GBytes *pong, gpointer data), gpointer data)
{
  MvAgentBuf buf;
  Ping *ping;

  if (!session->ready)
    return FALSE;
  mv_agent_buf_init (&buf);
  mv_agent_buf_begin (&buf, MV_AGENT_PING, 0);
  mv_agent_buf_put (&buf, MV_AGENT_F_BYTES, g_bytes_get_data (payload, NULL),
                    g_bytes_get_size (payload));
  if (!mv_agent_buf_end (&buf))
    {
      mv_agent_buf_clear (&buf);
      return FALSE;
    }
  ping = g_new0 (Ping, 1);
  ping->done = done;
  ping->data = data;
  g_queue_push_tail (&session->pings, ping);
  session_send (session, &buf);
  mv_agent_buf_clear (&buf);
  return TRUE;
}

guint
mv_agent_session_exec_count (MvAgentSession *session)
{
  return g_hash_table_size (session->execs);
}

/* A connected pair: [0] ours, non-blocking, [1] the caller's. */
static gboolean
socket_pair (int pair[2], GError **error)
{
  if (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) < 0)
    {
      g_set_error (error, MV_ERROR, MV_ERROR_RESOURCE_EXHAUSTED, "exec: %s", g_strerror (errno));
      return FALSE;
    }
  g_unix_set_fd_nonblocking (pair[0], TRUE, NULL);
  return TRUE;
}

static guint32
free_channel (MvAgentSession *session)
{
  while (session->next_channel == 0 ||
         g_hash_table_contains (session->execs, GUINT_TO_POINTER (session->next_channel)))
    session->next_channel++;
  return session->next_channel++;
}

gboolean
mv_agent_session_exec (MvAgentSession *session, const MvAgentExec *request, int fds[4],
                       GError **error)
{
  int in_pair[2] = { -1, -1 }, out_pair[2] = { -1, -1 }, err_pair[2] = { -1, -1 };
  int status_pair[2] = { -1, -1 };
  MvAgentBuf buf;
  Exec *exec;

  if (g_hash_table_size (session->execs) >= MV_AGENT_EXECS_MAX)
    {
      g_set_error (error, MV_ERROR, MV_ERROR_RESOURCE_EXHAUSTED,
                   "exec: %u commands already run in this guest, the most there can be",
                   MV_AGENT_EXECS_MAX);
      return FALSE;
    }
  mv_agent_buf_init (&buf);
  mv_agent_buf_begin (&buf, MV_AGENT_EXEC, 0);   /* the channel is patched below */
  for (const char *const *arg = request->argv; *arg; arg++)
    mv_agent_buf_put_str (&buf, MV_AGENT_F_ARGV, *arg);
  for (const char *const *pair = request->env; pair && *pair; pair++)
    mv_agent_buf_put_str (&buf, MV_AGENT_F_ENV, *pair);
  if (request->working_dir)
    mv_agent_buf_put_str (&buf, MV_AGENT_F_WORKDIR, request->working_dir);
  if (request->user)
    mv_agent_buf_put_str (&buf, MV_AGENT_F_USER, request->user);
  mv_agent_buf_put_u32 (&buf, MV_AGENT_F_TTY, request->tty ? 1 : 0);
  if (request->console_key)
    mv_agent_buf_put_str (&buf, MV_AGENT_F_CONSOLE_KEY, request->console_key);
  if (request->tty)
    {
      mv_agent_buf_put_u32 (&buf, MV_AGENT_F_ROWS, request->rows ? request->rows : 24);
      mv_agent_buf_put_u32 (&buf, MV_AGENT_F_COLS, request->columns ? request->columns : 80);
    }
  if (!mv_agent_buf_end (&buf))
    {
      mv_agent_buf_clear (&buf);
      g_set_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT,
                   "exec: the command and its environment are over the agent's frame limit "
                   "of %u bytes", MV_AGENT_FRAME_MAX_BYTES);
      return FALSE;
    }
  if (!socket_pair (in_pair, error) || !socket_pair (status_pair, error) ||
      (!request->tty && (!socket_pair (out_pair, error) || !socket_pair (err_pair, error))))
    {
      int all[] = { in_pair[0], in_pair[1], out_pair[0], out_pair[1], err_pair[0], err_pair[1],
                    status_pair[0], status_pair[1] };
      for (guint i = 0; i < G_N_ELEMENTS (all); i++)
        if (all[i] >= 0)
          close (all[i]);
      mv_agent_buf_clear (&buf);
      return FALSE;
    }

  exec = g_new0 (Exec, 1);
  exec->session = session;
  exec->channel = free_channel (session);
  exec->tty = request->tty;
  exec->in_fd = in_pair[0];
  exec->in_credit = MV_AGENT_WINDOW_BYTES;
  exec->out[0].fd = request->tty ? in_pair[0] : out_pair[0];
  exec->out[1].fd = request->tty ? -1 : err_pair[0];
  exec->out[0].pending = g_byte_array_new ();
  exec->out[1].pending = g_byte_array_new ();
  exec->status_fd = status_pair[0];
  g_hash_table_insert (session->execs, GUINT_TO_POINTER (exec->channel), exec);

  /* The channel number sits after the length and the type. */
  buf.data[5] = exec->channel >> 24;
  buf.data[6] = exec->channel >> 16;
  buf.data[7] = exec->channel >> 8;
  buf.data[8] = exec->channel;
  if (session->ready)
    {
      session_send (session, &buf);
      exec_update_in (exec);
    }
  else
    {
      exec->unsent = g_bytes_new (buf.data, buf.len);
      exec->unsent_timer = g_timeout_add_seconds (EXEC_WAIT_S, on_unsent_timeout, exec);
    }
  mv_agent_buf_clear (&buf);

  exec->status_source = g_unix_fd_add (exec->status_fd, G_IO_IN | G_IO_HUP | G_IO_ERR,
                                       on_status_event, exec);

  fds[0] = in_pair[1];
  fds[1] = request->tty ? dup (in_pair[1]) : out_pair[1];
  if (request->tty)
    {
      /* Nothing comes on a terminal's stderr: the caller's end is closed
       * at once, so that it reads end of file. */
      int none[2];

      if (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, none) == 0)
        {
          close (none[0]);
          fds[2] = none[1];
        }
      else
        fds[2] = -1;
    }
  else
    fds[2] = err_pair[1];
  fds[3] = status_pair[1];
  return TRUE;
}
