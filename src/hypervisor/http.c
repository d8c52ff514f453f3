/* HTTP/1.1 over a Unix socket, as micro-http serves it. */
#include "http.h"
#include "core/errors.h"
#include "core/json-strict.h"
#include "core/text.h"
#include "util/fd.h"
#include "util/unix-socket.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* micro-http's lines are at most 1 KiB; a head this size is broken. */
#define HEAD_MAX_BYTES       (16 * 1024)
#define ERROR_TEXT_MAX_BYTES 1024

struct _MvHttp {
  char   *socket_path;
  char   *server_name;
  int     fd;              /* -1: not connected */
  guint   timeout_ms;
  gsize   max_response;
  guint   connections;
  GByteArray *pending;     /* bytes read past the last response */
};

void
mv_http_response_clear (MvHttpResponse *response)
{
  g_clear_pointer (&response->body, g_bytes_unref);
  response->status = 0;
}

MvHttp *
mv_http_new (const char *socket_path, const char *server_name)
{
  MvHttp *http = g_new0 (MvHttp, 1);

  http->socket_path = g_strdup (socket_path);
  http->server_name = g_strdup (server_name);
  http->fd = -1;
  http->timeout_ms = MV_HTTP_TIMEOUT_MS;
  http->max_response = MV_HTTP_RESPONSE_MAX_BYTES;
  http->pending = g_byte_array_new ();
  return http;
}

static void
disconnect (MvHttp *http)
{
  if (http->fd >= 0)
    close (http->fd);
  http->fd = -1;
  g_byte_array_set_size (http->pending, 0);
}

void
mv_http_free (MvHttp *http)
{
  if (!http)
    return;
  disconnect (http);
  g_byte_array_unref (http->pending);
  g_free (http->socket_path);
  g_free (http->server_name);
  g_free (http);
}

void
mv_http_set_timeout (MvHttp *http, guint timeout_ms)
{
  http->timeout_ms = timeout_ms;
}

void
mv_http_set_max_response (MvHttp *http, gsize max_bytes)
{
  http->max_response = max_bytes;
}

const char *
mv_http_server_name (MvHttp *http)
{
  return http->server_name;
}

guint
mv_http_connections (MvHttp *http)
{
  return http->connections;
}

static gboolean
unavailable (MvHttp *http, GError **error, const char *format, ...) G_GNUC_PRINTF (3, 4);

static gboolean
unavailable (MvHttp *http, GError **error, const char *format, ...)
{
  g_autofree char *what = NULL;
  va_list args;

  va_start (args, format);
  what = g_strdup_vprintf (format, args);
  va_end (args);
  g_set_error (error, MV_ERROR, MV_ERROR_UNAVAILABLE, "%s on %s: %s", http->server_name,
               http->socket_path, what);
  disconnect (http);
  return FALSE;
}

/* Whether the VMM closed the kept-alive connection while it was idle. */
static gboolean
peer_closed (int fd)
{
  struct pollfd pfd = { .fd = fd, .events = POLLIN };
  char c;

  if (poll (&pfd, 1, 0) <= 0)
    return FALSE;
  if (pfd.revents & (POLLHUP | POLLERR))
    return TRUE;
  /* Readable while idle: end of stream, or bytes nobody asked for. */
  return recv (fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) >= 0;
}

/* The first step of a request, so the whole timeout is the connect's;
 * the socket is non-blocking, as sending and reading expect. */
static gboolean
ensure_connected (MvHttp *http, GError **error)
{
  g_autoptr (GError) local = NULL;
  int fd;

  if (http->fd >= 0 && !peer_closed (http->fd))
    return TRUE;
  disconnect (http);
  fd = mv_unix_connect (http->socket_path, MAX (http->timeout_ms, 1), &local);
  if (fd < 0)
    return unavailable (http, error, "%s", local->message);
  http->fd = fd;
  http->connections++;
  return TRUE;
}

static gboolean
send_all (MvHttp *http, const char *data, gsize length, gint64 deadline, GError **error)
{
  while (length > 0)
    {
      ssize_t n = send (http->fd, data, length, MSG_NOSIGNAL);

      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0 && errno == EAGAIN)
        {
          if (!mv_fd_wait (http->fd, POLLOUT, deadline))
            return unavailable (http, error, "could not send the request within %u ms",
                                http->timeout_ms);
          continue;
        }
      if (n < 0)
        return unavailable (http, error, "could not send the request: %s", g_strerror (errno));
      data += n;
      length -= n;
    }
  return TRUE;
}

/* Reads more into http->pending; FALSE with *eof at end of stream. */
static gboolean
read_more (MvHttp *http, gint64 deadline, gboolean *eof, GError **error)
{
  char buf[16384];

  *eof = FALSE;
  for (;;)
    {
      ssize_t n = recv (http->fd, buf, sizeof buf, 0);

      if (n > 0)
        {
          g_byte_array_append (http->pending, (guint8 *) buf, n);
          return TRUE;
        }
      if (n == 0)
        {
          *eof = TRUE;
          return FALSE;
        }
      if (errno == EINTR)
        continue;
      if (errno != EAGAIN)
        return unavailable (http, error, "could not read the response: %s", g_strerror (errno));
      if (!mv_fd_wait (http->fd, POLLIN, deadline))
        return unavailable (http, error, "no response within %u ms", http->timeout_ms);
    }
}

static const guint8 *
find_head_end (GByteArray *bytes)
{
  for (guint i = 0; i + 3 < bytes->len; i++)
    if (memcmp (bytes->data + i, "\r\n\r\n", 4) == 0)
      return bytes->data + i;
  return NULL;
}

typedef struct {
  guint    status;
  gboolean has_length;
  guint64  length;
  gboolean close;
  gboolean chunked;
} Head;

static gboolean
parse_head (const char *text, Head *head)
{
  g_auto (GStrv) lines = g_strsplit (text, "\r\n", -1);
  guint64 status;

  memset (head, 0, sizeof *head);
  if (!lines[0] || !g_str_has_prefix (lines[0], "HTTP/1.") || strlen (lines[0]) < 12 ||
      lines[0][8] != ' ')
    return FALSE;
  {
    g_autofree char *code = g_strndup (lines[0] + 9, 3);
    if (!g_ascii_string_to_unsigned (code, 10, 100, 599, &status, NULL))
      return FALSE;
  }
  head->status = (guint) status;
  for (guint i = 1; lines[i]; i++)
    {
      char *colon = strchr (lines[i], ':');
      g_autofree char *name = NULL;
      const char *value;

      if (!colon)
        return FALSE;
      name = g_ascii_strdown (lines[i], colon - lines[i]);
      g_strstrip (name);
      value = colon + 1;
      while (*value == ' ' || *value == '\t')
        value++;
      if (strcmp (name, "content-length") == 0)
        {
          g_autofree char *v = g_strstrip (g_strdup (value));
          if (!g_ascii_string_to_unsigned (v, 10, 0, G_MAXUINT64, &head->length, NULL))
            return FALSE;
          head->has_length = TRUE;
        }
      else if (strcmp (name, "connection") == 0)
        head->close = g_ascii_strncasecmp (value, "close", 5) == 0;
      else if (strcmp (name, "transfer-encoding") == 0)
        head->chunked = g_ascii_strncasecmp (value, "chunked", 7) == 0;
    }
  return TRUE;
}

static MvHttpParse
parse_failed (GError **error, const char *format, ...) G_GNUC_PRINTF (2, 3);

static MvHttpParse
parse_failed (GError **error, const char *format, ...)
{
  g_autofree char *what = NULL;
  va_list args;

  va_start (args, format);
  what = g_strdup_vprintf (format, args);
  va_end (args);
  g_set_error_literal (error, MV_ERROR, MV_ERROR_UNAVAILABLE, what);
  return MV_HTTP_PARSE_FAILED;
}

MvHttpParse
mv_http_parse_response (GByteArray *pending, gboolean eof, gsize max_response,
                        MvHttpResponse *response, gboolean *close, GError **error)
{
  for (;;)
    {
      const guint8 *end = find_head_end (pending);
      gsize head_length, available;
      Head head;

      if (!end)
        {
          if (pending->len > HEAD_MAX_BYTES)
            return parse_failed (error, "the response's header is over %d bytes", HEAD_MAX_BYTES);
          if (eof)
            return parse_failed (error, "the connection closed before a response");
          return MV_HTTP_PARSE_MORE;
        }
      head_length = end - pending->data + 4;
      {
        g_autofree char *text = g_strndup ((char *) pending->data, head_length - 4);
        if (!parse_head (text, &head))
          {
            g_autofree char *shown = mv_text_excerpt (text, -1, MV_EXCERPT_MAX_BYTES);

            return parse_failed (error, "a malformed response: \"%s\"", shown);
          }
      }

      /* Expect: 100-continue is never sent, but an interim reply is
       * harmless to skip. */
      if (head.status >= 100 && head.status < 200)
        {
          g_byte_array_remove_range (pending, 0, head_length);
          continue;
        }
      if (head.chunked)
        return parse_failed (error, "a chunked response, which micro-http never sends");

      if (head.status == 204 || head.status == 304)
        {
          head.has_length = TRUE;
          head.length = 0;
        }
      if (head.has_length && head.length > max_response)
        return parse_failed (error, "a response of %" G_GUINT64_FORMAT " bytes, over the "
                             "limit of %" G_GSIZE_FORMAT, head.length, max_response);
      available = pending->len - head_length;
      if (head.has_length && available < head.length)
        return eof ? parse_failed (error, "the connection closed within a response")
                   : MV_HTTP_PARSE_MORE;
      if (!head.has_length)
        {
          /* No length: the body runs to the end of the stream. */
          if (available > max_response)
            return parse_failed (error, "a response over the limit of %" G_GSIZE_FORMAT
                                 " bytes", max_response);
          if (!eof)
            return MV_HTTP_PARSE_MORE;
          head.length = available;
          head.close = TRUE;
        }

      response->status = head.status;
      response->body = head.length > 0 ? g_bytes_new (pending->data + head_length, head.length)
                                       : NULL;
      g_byte_array_remove_range (pending, 0, head_length + head.length);
      *close = head.close;
      return MV_HTTP_PARSE_DONE;
    }
}

static gboolean
read_response (MvHttp *http, gint64 deadline, MvHttpResponse *response, GError **error)
{
  gboolean eof = FALSE;

  for (;;)
    {
      g_autoptr (GError) local = NULL;
      gboolean close = FALSE;

      switch (mv_http_parse_response (http->pending, eof, http->max_response, response, &close,
                                      &local))
        {
        case MV_HTTP_PARSE_DONE:
          if (close)
            disconnect (http);
          return TRUE;
        case MV_HTTP_PARSE_FAILED:
          return unavailable (http, error, "%s", local->message);
        case MV_HTTP_PARSE_MORE:
          break;
        }
      /* The parser always decides once the stream has ended. */
      if (!read_more (http, deadline, &eof, error) && !eof)
        return FALSE;
    }
}

gboolean
mv_http_request (MvHttp *http, const char *method, const char *path, const char *body,
                 gsize body_length, MvHttpResponse *response, GError **error)
{
  gint64 deadline = g_get_monotonic_time () + (gint64) http->timeout_ms * 1000;
  g_autoptr (GString) request = g_string_new (NULL);

  memset (response, 0, sizeof *response);
  if (!ensure_connected (http, error))
    return FALSE;
  /* micro-http accepts exactly "application/json", no parameters, and
   * needs Content-Length for a body. */
  g_string_append_printf (request, "%s %s HTTP/1.1\r\nHost: localhost\r\n"
                          "Accept: application/json\r\n", method, path);
  if (body)
    g_string_append (request, "Content-Type: application/json\r\n");
  g_string_append_printf (request, "Content-Length: %" G_GSIZE_FORMAT "\r\n\r\n",
                          body ? body_length : 0);
  if (!send_all (http, request->str, request->len, deadline, error) ||
      (body && !send_all (http, body, body_length, deadline, error)))
    return FALSE;
  if (!read_response (http, deadline, response, error))
    {
      mv_http_response_clear (response);
      return FALSE;
    }
  return TRUE;
}

static char *
shorten (const char *text, gsize length)
{
  g_autofree char *valid = g_utf8_make_valid (text, length);

  if (strlen (valid) > ERROR_TEXT_MAX_BYTES)
    {
      const char *end = g_utf8_find_prev_char (valid, valid + ERROR_TEXT_MAX_BYTES);
      g_autofree char *cut = g_strndup (valid, end - valid);
      return g_strdup_printf ("%s…", cut);
    }
  return g_strstrip (g_steal_pointer (&valid));
}

static const MvJsonLimits reply_limits = {
  .max_bytes = MV_HTTP_RESPONSE_MAX_BYTES,
  .max_depth = MV_HTTP_JSON_MAX_DEPTH,
};

char *
mv_http_error_text (GBytes *body)
{
  g_autoptr (JsonNode) root = NULL;
  const char *data;
  gsize length;

  if (!body || g_bytes_get_size (body) == 0)
    return g_strdup ("(no message)");
  data = g_bytes_get_data (body, &length);
  if ((root = mv_json_parse (data, (gssize) length, &reply_limits, "body", NULL)))
    {
      if (JSON_NODE_HOLDS_OBJECT (root))
        {
          JsonObject *o = json_node_get_object (root);
          const char *names[] = { "fault_message", "error" };
          for (guint i = 0; i < G_N_ELEMENTS (names); i++)
            {
              JsonNode *m = json_object_get_member (o, names[i]);
              const char *text, *newline;
              if (!m || json_node_get_value_type (m) != G_TYPE_STRING)
                continue;
              /* micro-http's own "error" goes on with a line about
               * dropped requests. */
              text = json_node_get_string (m);
              newline = strchr (text, '\n');
              return shorten (text, newline ? (gsize) (newline - text) : strlen (text));
            }
        }
      else if (JSON_NODE_HOLDS_ARRAY (root))
        {
          JsonArray *a = json_node_get_array (root);
          g_autoptr (GString) chain = g_string_new (NULL);
          for (guint i = 0; i < json_array_get_length (a); i++)
            {
              JsonNode *m = json_array_get_element (a, i);
              if (json_node_get_value_type (m) != G_TYPE_STRING)
                continue;
              if (chain->len)
                g_string_append (chain, ": ");
              g_string_append (chain, json_node_get_string (m));
            }
          if (chain->len)
            return shorten (chain->str, chain->len);
        }
    }
  /* micro-http's own 400 puts a raw newline in its JSON; take its text. */
  {
    g_autofree char *text = shorten (data, length);
    const char *start = strstr (text, "\"error\": \"");
    if (start)
      {
        g_autofree char *inner = g_strdup (start + strlen ("\"error\": \""));
        char *newline = strchr (inner, '\n');
        char *quote = strrchr (inner, '"');
        if (newline)
          *newline = '\0';
        else if (quote)
          *quote = '\0';
        return g_strdup (inner);
      }
    return g_steal_pointer (&text);
  }
}

static MvError
error_for_status (guint status)
{
  switch (status)
    {
    case 400:
      return MV_ERROR_INVALID_ARGUMENT;
    case 404:
      return MV_ERROR_NOT_FOUND;
    case 413:
      return MV_ERROR_RESOURCE_EXHAUSTED;
    case 429:
    case 503:
      return MV_ERROR_UNAVAILABLE;
    default:
      return MV_ERROR_FAILED;
    }
}

gboolean
mv_http_call_json (MvHttp *http, const char *method, const char *path, JsonNode *body,
                   JsonNode **reply, guint *status, GError **error)
{
  g_auto (MvHttpResponse) response = { 0 };
  g_autofree char *text = body ? json_to_string (body, FALSE) : NULL;

  if (reply)
    *reply = NULL;
  if (status)
    *status = 0;
  if (!mv_http_request (http, method, path, text, text ? strlen (text) : 0, &response, error))
    return FALSE;
  if (status)
    *status = response.status;
  if (response.status < 200 || response.status > 299)
    {
      g_autofree char *message = mv_http_error_text (response.body);
      g_set_error (error, MV_ERROR, error_for_status (response.status), "%s refused %s %s (%u): %s",
                   http->server_name, method, path, response.status, message);
      return FALSE;
    }
  if (reply && response.body)
    {
      MvJsonLimits limits = { .max_bytes = http->max_response, .max_depth = MV_HTTP_JSON_MAX_DEPTH };
      g_autoptr (GError) local = NULL;
      gsize length;
      const char *data = g_bytes_get_data (response.body, &length);

      /* A VMM that says what is not JSON misbehaves: FAILED, not the
       * caller's invalid argument. */
      *reply = mv_json_parse (data, (gssize) length, &limits, "body", &local);
      if (*reply == NULL)
        {
          g_set_error (error, MV_ERROR, MV_ERROR_FAILED, "%s answered %s %s with malformed JSON: %s",
                       http->server_name, method, path, local->message);
          return FALSE;
        }
    }
  return TRUE;
}
