/* Waiting for the agent at boot, in a worker thread: the blocking side
 * of the protocol's opening (docs/agent-protocol.md, A session). */
#include "agent.h"
#include "agent-private.h"
#include "vsock.h"
#include "core/errors.h"
#include "util/fd.h"
#include "util/unix-socket.h"

#include <errno.h>
#include <glib-unix.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define CHECK_EVERY_US   (200 * 1000)
#define DIAL_TIMEOUT_MS  1000

int
mv_agent_channel_dial (MvAgentChannelKind kind, const char *socket_path, guint timeout_ms,
                       GError **error)
{
  g_autoptr (GError) local = NULL;
  int fd;

  switch (kind)
    {
    case MV_AGENT_CHANNEL_VSOCK:
      return mv_vsock_dial (socket_path, MV_AGENT_VSOCK_PORT, timeout_ms, error);
    case MV_AGENT_CHANNEL_SERIAL:
      fd = mv_unix_connect (socket_path, timeout_ms, &local);
      if (fd < 0)
        {
          g_set_error (error, MV_ERROR, MV_ERROR_UNAVAILABLE, "agent: %s: %s", socket_path,
                       local->message);
          return -1;
        }
      if (!g_unix_set_fd_nonblocking (fd, FALSE, NULL))
        {
          close (fd);
          g_set_error (error, MV_ERROR, MV_ERROR_UNAVAILABLE, "agent: %s: %s", socket_path,
                       g_strerror (errno));
          return -1;
        }
      return fd;
    case MV_AGENT_CHANNEL_NONE:
    default:
      g_set_error (error, MV_ERROR, MV_ERROR_UNAVAILABLE, "agent: this guest has no channel");
      return -1;
    }
}

void
mv_agent_ready_clear (MvAgentReady *ready)
{
  g_clear_pointer (&ready->agent_version, g_free);
  memset (ready, 0, sizeof *ready);
}

typedef struct {
  int               fd;
  GByteArray       *in;
  gint64            deadline;
  MvAgentWaitCheck  check;
  gpointer          check_data;
} Conn;

static gboolean
send_all (int fd, const guint8 *data, gsize len)
{
  while (len > 0)
    {
      ssize_t n = send (fd, data, len, MSG_NOSIGNAL);

      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        return FALSE;
      data += n;
      len -= n;
    }
  return TRUE;
}

typedef enum { READ_FRAME, READ_CLOSED, READ_FAILED } ReadResult;

/* The next frame, or READ_CLOSED when the guest closes the connection,
 * or READ_FAILED with @error. Drops the frame returned before. */
static ReadResult
read_frame (Conn *conn, MvAgentFrame *frame, gsize *taken, GError **error)
{
  if (*taken)
    {
      g_byte_array_remove_range (conn->in, 0, *taken);
      *taken = 0;
    }
  for (;;)
    {
      const char *why = NULL;
      long n = mv_agent_frame_parse (conn->in->data, conn->in->len, frame, &why);
      guint8 chunk[16384];
      ssize_t got;
      gint64 wait_until;

      if (n < 0)
        {
          g_set_error (error, MV_ERROR, MV_ERROR_INVALID_STATE,
                       "The guest's agent sent %s", why);
          return READ_FAILED;
        }
      if (n > 0)
        {
          *taken = n;
          return READ_FRAME;
        }
      if (conn->check && !conn->check (conn->check_data, error))
        return READ_FAILED;
      if (g_get_monotonic_time () > conn->deadline)
        {
          g_set_error (error, MV_ERROR, MV_ERROR_UNAVAILABLE, "The guest's agent did not answer in time");
          return READ_FAILED;
        }
      wait_until = MIN (conn->deadline, g_get_monotonic_time () + CHECK_EVERY_US);
      if (!mv_fd_wait (conn->fd, POLLIN, wait_until))
        continue;
      got = recv (conn->fd, chunk, sizeof chunk, 0);
      if (got < 0 && errno == EINTR)
        continue;
      if (got <= 0)
        return READ_CLOSED;
      g_byte_array_append (conn->in, chunk, got);
    }
}

static void
send_exit_ack (int fd)
{
  guint8 frame[MV_AGENT_FRAME_HEADER_BYTES];

  mv_agent_frame_header (frame, MV_AGENT_EXIT_ACK, 0);
  send_all (fd, frame, sizeof frame);
}

/* One connection: TRUE once ready, FALSE with @error, or FALSE without
 * one when the guest closed it (dial again). */
static gboolean
send_bytes (int fd, GBytes *bytes)
{
  return send_all (fd, g_bytes_get_data (bytes, NULL), g_bytes_get_size (bytes));
}

static gboolean
converse (Conn *conn, GBytes *config, GBytes *identity, MvAgentReady *ready, GError **error)
{
  MvAgentBuf hello;
  MvAgentFrame frame;
  gsize taken = 0;
  gboolean sent_config = FALSE, ok;

  mv_agent_buf_init (&hello);
  mv_agent_buf_begin (&hello, MV_AGENT_HELLO, 0);
  mv_agent_buf_put_u32 (&hello, MV_AGENT_F_VERSION, MV_AGENT_PROTOCOL_VERSION);
  ok = mv_agent_buf_end (&hello) && send_all (conn->fd, hello.data, hello.len);
  mv_agent_buf_clear (&hello);
  if (!ok)
    return FALSE;

  for (;;)
    {
      switch (read_frame (conn, &frame, &taken, error))
        {
        case READ_CLOSED:
          return FALSE;
        case READ_FAILED:
          return FALSE;
        case READ_FRAME:
          break;
        }
      if (!mv_agent_fields_valid (frame.payload, frame.payload_len,
                                  MV_AGENT_NESTED_TAGS, sizeof MV_AGENT_NESTED_TAGS))
        {
          g_set_error (error, MV_ERROR, MV_ERROR_INVALID_STATE,
                       "The guest's agent sent a %s frame whose fields are not whole",
                       mv_agent_type_name (frame.type));
          return FALSE;
        }
      switch (frame.type)
        {
        case MV_AGENT_HELLO:
          {
            g_autofree char *state = mv_agent_frame_string (&frame, MV_AGENT_F_STATE);
            guint32 version = 0;

            if (!mv_agent_frame_u32 (&frame, MV_AGENT_F_VERSION, &version) ||
                version != MV_AGENT_PROTOCOL_VERSION)
              {
                g_set_error (error, MV_ERROR, MV_ERROR_INVALID_STATE,
                             "The guest's agent speaks protocol version %u; this microvmd "
                             "speaks %u", version, MV_AGENT_PROTOCOL_VERSION);
                return FALSE;
              }
            g_free (ready->agent_version);
            ready->agent_version = mv_agent_frame_string (&frame, MV_AGENT_F_AGENT_VERSION);
            if (g_strcmp0 (state, "running") == 0)
              return TRUE;
            /* A template being built is ready once it is one; a guest
             * restored from one is told who it is before what to run. */
            if (g_strcmp0 (state, "template") == 0 && !identity)
              return TRUE;
            if (g_strcmp0 (state, "template") == 0 && !sent_config &&
                !send_bytes (conn->fd, identity))
              return FALSE;
            if (g_strcmp0 (state, "exited") == 0)
              {
                mv_agent_frame_exit (&frame, &ready->has_exit_code, &ready->exit_code, &ready->signal);
          ready->exited = TRUE;
                send_exit_ack (conn->fd);
                return TRUE;
              }
            if (!sent_config)
              {
                if (!config)
                  {
                    g_set_error (error, MV_ERROR, MV_ERROR_INVALID_STATE,
                                 "The guest's agent waits for a configuration that this "
                                 "machine has none of");
                    return FALSE;
                  }
                if (!send_bytes (conn->fd, config))
                  return FALSE;
                sent_config = TRUE;
              }
            break;
          }
        case MV_AGENT_READY:
          return TRUE;
        case MV_AGENT_EXIT:
          mv_agent_frame_exit (&frame, &ready->has_exit_code, &ready->exit_code, &ready->signal);
          ready->exited = TRUE;
          send_exit_ack (conn->fd);
          return TRUE;
        case MV_AGENT_FAILED:
          {
            g_autofree char *message = mv_agent_frame_string (&frame, MV_AGENT_F_MESSAGE);

            g_set_error (error, MV_ERROR, MV_ERROR_INVALID_STATE,
                         "The guest's agent could not set the guest up: %s",
                         message && *message ? message : "(it gave no reason)");
            return FALSE;
          }
        default:
          /* HEALTH and whatever else comes early is the session's. */
          break;
        }
    }
}

gboolean
mv_agent_wait_ready (const MvAgentChannel *channel, GBytes *config, GBytes *identity,
                     gint64 deadline, MvAgentWaitCheck check, gpointer check_data,
                     MvAgentReady *ready, GError **error)
{
  g_autoptr (GByteArray) in = g_byte_array_new ();

  for (;;)
    {
      g_autoptr (GError) local = NULL;
      Conn conn = { -1, in, deadline, check, check_data };
      gboolean done;

      conn.fd = mv_agent_channel_dial (channel->kind, channel->socket_path, DIAL_TIMEOUT_MS,
                                       error);
      if (conn.fd < 0)
        return FALSE;
      g_byte_array_set_size (in, 0);
      done = converse (&conn, config, identity, ready, &local);
      close (conn.fd);
      if (done)
        return TRUE;
      if (local)
        {
          g_propagate_error (error, g_steal_pointer (&local));
          return FALSE;
        }
      /* Closed by the guest: an agent handing over to another, or one
       * that is not up yet. Look again shortly. */
      if (check && !check (check_data, error))
        return FALSE;
      if (g_get_monotonic_time () > deadline)
        {
          g_set_error (error, MV_ERROR, MV_ERROR_UNAVAILABLE,
                       "The guest's agent did not answer in time");
          return FALSE;
        }
      g_usleep (CHECK_EVERY_US / 2);
    }
}
