/* QMP client. Each server message is one JSON object on a line of its own;
 * events may come before the reply to the command that caused them. */
#include "qmp.h"
#include "hypervisor.h"
#include "core/json-strict.h"
#include "core/json-util.h"
#include "core/errors.h"
#include "util/fd.h"
#include "util/unix-socket.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define READ_CHUNK 4096

struct _MvQmp {
  int        fd;
  char      *socket_path;
  GString   *buffer;
  GPtrArray *events;    /* JsonObject* */
  char      *version;
  guint64    next_id;
};

void
mv_qmp_free (MvQmp *qmp)
{
  if (!qmp)
    return;
  if (qmp->fd >= 0)
    close (qmp->fd);
  g_free (qmp->socket_path);
  g_string_free (qmp->buffer, TRUE);
  g_ptr_array_unref (qmp->events);
  g_free (qmp->version);
  g_free (qmp);
}

const char *
mv_qmp_version (MvQmp *qmp)
{
  return qmp->version;
}

GPtrArray *
mv_qmp_take_events (MvQmp *qmp)
{
  GPtrArray *events = qmp->events;

  qmp->events = g_ptr_array_new_with_free_func ((GDestroyNotify) json_object_unref);
  return events;
}

JsonObject *
mv_qmp_parse_line (const char *line, gsize length)
{
  static const MvJsonLimits limits = {
    .max_bytes = MV_QMP_MESSAGE_MAX_BYTES,
    .max_depth = MV_QMP_JSON_MAX_DEPTH,
  };
  g_autoptr (JsonNode) root = mv_json_parse (line, (gssize) length, &limits, "QMP", NULL);

  if (!root || !JSON_NODE_HOLDS_OBJECT (root))
    return NULL;
  return json_object_ref (json_node_get_object (root));
}

/* The next message, waiting until @deadline_us (monotonic) at most. */
static JsonObject *
read_message (MvQmp *qmp, gint64 deadline_us, GError **error)
{
  for (;;)
    {
      char *newline = memchr (qmp->buffer->str, '\n', qmp->buffer->len);
      char chunk[READ_CHUNK];
      ssize_t n;

      if (newline)
        {
          gsize length = newline - qmp->buffer->str;
          JsonObject *message = mv_qmp_parse_line (qmp->buffer->str, length);

          g_string_erase (qmp->buffer, 0, length + 1);
          if (message)
            return message;
          continue;   /* a blank line, or noise */
        }

      /* Without a newline in sight, the monitor would have the buffer grow
       * for as long as it talks. */
      if (qmp->buffer->len > MV_QMP_MESSAGE_MAX_BYTES)
        {
          g_set_error (error, MV_ERROR, MV_ERROR_FAILED,
                       "QMP %s: a message of more than %d bytes", qmp->socket_path,
                       MV_QMP_MESSAGE_MAX_BYTES);
          return NULL;
        }
      if (!mv_fd_wait (qmp->fd, POLLIN, deadline_us))
        {
          g_set_error (error, MV_ERROR, MV_ERROR_UNAVAILABLE, "QMP %s: no answer in time",
                       qmp->socket_path);
          return NULL;
        }
      n = read (qmp->fd, chunk, sizeof chunk);
      if (n < 0 && (errno == EINTR || errno == EAGAIN))
        continue;
      if (n <= 0)
        {
          int saved = errno;
          g_set_error (error, MV_ERROR, MV_ERROR_UNAVAILABLE, "QMP %s: %s", qmp->socket_path,
                       n == 0 ? "the VMM closed the connection" : g_strerror (saved));
          return NULL;
        }
      g_string_append_len (qmp->buffer, chunk, n);
    }
}

/* Sends @data; @pass_fd (unless -1) travels with its first byte, as QEMU's
 * getfd expects. */
static gboolean
send_all (MvQmp *qmp, const char *data, gsize length, int pass_fd, GError **error)
{
  while (length > 0)
    {
      ssize_t n;

      if (pass_fd >= 0)
        {
          struct iovec iov = { .iov_base = (char *) data, .iov_len = length };
          union {
            char buf[CMSG_SPACE (sizeof (int))];
            struct cmsghdr align;
          } control;
          struct msghdr msg = {
            .msg_iov = &iov, .msg_iovlen = 1,
            .msg_control = control.buf, .msg_controllen = sizeof control.buf,
          };
          struct cmsghdr *cmsg = CMSG_FIRSTHDR (&msg);

          memset (&control, 0, sizeof control);
          cmsg->cmsg_level = SOL_SOCKET;
          cmsg->cmsg_type = SCM_RIGHTS;
          cmsg->cmsg_len = CMSG_LEN (sizeof (int));
          memcpy (CMSG_DATA (cmsg), &pass_fd, sizeof (int));
          n = sendmsg (qmp->fd, &msg, MSG_NOSIGNAL);
          if (n > 0)
            pass_fd = -1;
        }
      else
        n = send (qmp->fd, data, length, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        {
          int saved = errno;
          g_set_error (error, MV_ERROR, MV_ERROR_UNAVAILABLE, "QMP %s: %s", qmp->socket_path,
                       g_strerror (saved));
          return FALSE;
        }
      data += n;
      length -= n;
    }
  return TRUE;
}

JsonNode *
mv_qmp_execute (MvQmp *qmp, const char *command, JsonObject *arguments, guint timeout_ms,
                GError **error)
{
  return mv_qmp_execute_with_fd (qmp, command, arguments, -1, timeout_ms, error);
}

JsonNode *
mv_qmp_execute_with_fd (MvQmp *qmp, const char *command, JsonObject *arguments, int fd,
                        guint timeout_ms, GError **error)
{
  gint64 deadline = g_get_monotonic_time () + (gint64) timeout_ms * 1000;
  g_autoptr (JsonObject) request = json_object_new ();
  g_autoptr (JsonNode) node = json_node_new (JSON_NODE_OBJECT);
  g_autofree char *text = NULL;
  g_autofree char *line = NULL;
  guint64 id = ++qmp->next_id;

  json_object_set_string_member (request, "execute", command);
  if (arguments)
    json_object_set_object_member (request, "arguments", json_object_ref (arguments));
  json_object_set_int_member (request, "id", (gint64) id);
  json_node_set_object (node, request);
  text = json_to_string (node, FALSE);
  line = g_strconcat (text, "\n", NULL);
  if (!send_all (qmp, line, strlen (line), fd, error))
    return NULL;

  for (;;)
    {
      g_autoptr (JsonObject) message = read_message (qmp, deadline, error);
      JsonNode *member;

      if (!message)
        {
          g_prefix_error (error, "%s: ", command);
          return NULL;
        }
      if (json_object_has_member (message, "event"))
        {
          g_ptr_array_add (qmp->events, g_steal_pointer (&message));
          continue;
        }
      /* A reply to an earlier command that timed out is not this one's. */
      member = json_object_get_member (message, "id");
      if (member && JSON_NODE_HOLDS_VALUE (member) && (guint64) json_node_get_int (member) != id)
        continue;
      if ((member = json_object_get_member (message, "error")) && JSON_NODE_HOLDS_OBJECT (member))
        {
          JsonObject *e = json_node_get_object (member);
          const char *class = mv_json_get_string (e, "class");
          const char *desc = mv_json_get_string (e, "desc");

          g_set_error (error, MV_ERROR, MV_ERROR_FAILED, "QMP %s failed: %s: %s", command,
                       class ? class : "Error", desc ? desc : "(no description)");
          return NULL;
        }
      if ((member = json_object_get_member (message, "return")))
        return json_node_copy (member);
    }
}

MvQmp *
mv_qmp_connect (const char *socket_path, guint timeout_ms, GError **error)
{
  gint64 deadline = g_get_monotonic_time () + (gint64) timeout_ms * 1000;
  g_autoptr (MvQmp) qmp = NULL;
  g_autoptr (JsonObject) greeting = NULL;
  g_autoptr (JsonNode) ret = NULL;
  g_autoptr (GError) local = NULL;
  JsonObject *q, *version;

  if (!mv_check_socket_path ("QMP socket", socket_path, error))
    return NULL;

  qmp = g_new0 (MvQmp, 1);
  qmp->socket_path = g_strdup (socket_path);
  qmp->buffer = g_string_new (NULL);
  qmp->events = g_ptr_array_new_with_free_func ((GDestroyNotify) json_object_unref);
  qmp->fd = mv_unix_connect (socket_path, 0, &local);
  if (qmp->fd < 0)
    {
      g_set_error (error, MV_ERROR, MV_ERROR_UNAVAILABLE, "QMP %s: %s", socket_path,
                   local->message);
      return NULL;
    }

  /* QEMU serves one client per monitor: a busy monitor accepts the
   * connection but says nothing until the other client leaves. */
  greeting = read_message (qmp, deadline, error);
  if (!greeting)
    {
      g_prefix_error (error, "No QMP greeting (is another client connected?): ");
      return NULL;
    }
  if (!(q = mv_json_get_object (greeting, "QMP")))
    {
      g_set_error (error, MV_ERROR, MV_ERROR_FAILED, "QMP %s: the greeting is not QMP's",
                   socket_path);
      return NULL;
    }
  version = mv_json_get_object (q, "version");
  version = version ? mv_json_get_object (version, "qemu") : NULL;
  if (version)
    qmp->version = g_strdup_printf ("%" G_GUINT64_FORMAT ".%" G_GUINT64_FORMAT ".%" G_GUINT64_FORMAT,
                                    mv_json_get_uint (version, "major"),
                                    mv_json_get_uint (version, "minor"),
                                    mv_json_get_uint (version, "micro"));

  ret = mv_qmp_execute (qmp, "qmp_capabilities", NULL,
                        (guint) MAX (1, (deadline - g_get_monotonic_time ()) / 1000), error);
  if (!ret)
    return NULL;
  return g_steal_pointer (&qmp);
}
