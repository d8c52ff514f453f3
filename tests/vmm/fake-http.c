/* micro-http over a Unix socket, for the test VMMs. */
#include "fake-http.h"
#include "fake-json.h"
#include "fake-vmm.h"

#include <errno.h>
#include <glib-unix.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_CONNECTIONS 10
/* The longest request or header line micro-http takes. */
#define LINE_MAX_BYTES  1024
/* micro-http answers an eleventh connection with this fixed text, whose
 * Server header does not depend on the application. */
/* How long a refused connection's remaining input is read and dropped. */
#define DRAIN_TIMEOUT_MS 1000
#define SERVER_FULL "HTTP/1.1 503\r\nServer: Firecracker API\r\nConnection: close\r\n" \
                    "Content-Length: 40\r\n\r\n{ \"error\": \"Too many open connections\" }"

struct _FakeHttpServer {
  int          listener;
  guint        source;
  char        *name;
  gsize        payload_limit;
  FakeHandler  handler;
  gpointer     data;
  GList       *connections;
};

typedef struct {
  FakeHttpServer *server;
  int             fd;
  guint           source;
  GString        *input;
  gboolean        continue_sent;
  guint           drain_source;   /* set once the connection only drains */
  FakeResponse    held;           /* a delayed response, until it goes */
  guint           held_source;    /* set while a response is held back */
  gboolean        peer_gone;      /* the client closed while one was held */
} Connection;

typedef enum { PARSE_MORE, PARSE_DONE, PARSE_ERROR } ParseResult;
typedef enum { SERVE_KEEP, SERVE_CLOSE, SERVE_DRAIN } ServeResult;

static void
request_clear (FakeRequest *request)
{
  g_free (request->method);
  g_free (request->uri);
  g_free (request->version);
  g_clear_pointer (&request->body, g_bytes_unref);
}

static void
response_clear (FakeResponse *response)
{
  if (response->body)
    g_string_free (response->body, TRUE);
}

void
fake_response_status (FakeResponse *response, guint status)
{
  response->status = status;
}

void
fake_response_json (FakeResponse *response, guint status, JsonNode *body)
{
  g_autofree char *text = fake_json_text (body);

  response->status = status;
  if (response->body)
    g_string_free (response->body, TRUE);
  response->body = g_string_new (text);
}

void
fake_response_after (FakeResponse *response, FakeAfter after, gpointer data)
{
  response->after = after;
  response->after_data = data;
}

void
fake_response_delay (FakeResponse *response, guint ms, FakeAfter due, gpointer data)
{
  response->delay_ms = ms;
  response->due = due;
  response->due_data = data;
}

char *
fake_request_path (const FakeRequest *request)
{
  const char *uri = request->uri;
  const char *path = "";

  if (g_str_has_prefix (uri, "http://"))
    {
      path = strchr (uri + strlen ("http://"), '/');
      if (!path)
        path = "";
    }
  else if (uri[0] == '/')
    path = uri;
  return g_strndup (path, strcspn (path, "?"));
}

static GString *
encode (const FakeResponse *response, const char *server_name)
{
  GString *out = g_string_new (NULL);

  g_string_append_printf (out, "HTTP/1.1 %u \r\nServer: %s\r\nConnection: keep-alive\r\n",
                          response->status, server_name);
  if (response->status != 100 && response->status != 204)
    g_string_append_printf (out, "Content-Type: application/json\r\nContent-Length: %zu\r\n",
                            response->body ? response->body->len : 0);
  g_string_append (out, "\r\n");
  if (response->body && response->status != 100 && response->status != 204)
    g_string_append_len (out, response->body->str, response->body->len);
  return out;
}

static gboolean
send_response (Connection *conn, const FakeResponse *response)
{
  g_autoptr (GString) bytes = encode (response, conn->server->name);

  return fake_write_all (conn->fd, bytes->str, bytes->len);
}

/* The next CRLF-terminated line at *offset, or NULL for more input. A line
 * over micro-http's buffer is an error. */
static char *
next_line (GString *input, gsize *offset, gboolean *too_long)
{
  const char *start = input->str + *offset;
  const char *end = g_strstr_len (start, input->len - *offset, "\r\n");
  char *line;

  *too_long = FALSE;
  if (!end)
    {
      *too_long = input->len - *offset > LINE_MAX_BYTES;
      return NULL;
    }
  if ((gsize) (end - start) > LINE_MAX_BYTES)
    {
      *too_long = TRUE;
      return NULL;
    }
  line = g_strndup (start, end - start);
  *offset += (end - start) + 2;
  return line;
}

static ParseResult
parse_error (char **message, const char *format, ...) G_GNUC_PRINTF (2, 3);

static ParseResult
parse_error (char **message, const char *format, ...)
{
  va_list args;

  va_start (args, format);
  *message = g_strdup_vprintf (format, args);
  va_end (args);
  return PARSE_ERROR;
}

static const char *const methods[] = { "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", NULL };

static ParseResult
parse_request_line (const char *line, FakeRequest *request, char **message)
{
  const char *sp1, *sp2;

  if (!g_utf8_validate (line, -1, NULL) ||
      strlen (line) < strlen ("GET") + 1 + strlen ("HTTP/1.0") + 2 ||
      !(sp1 = strchr (line, ' ')) || !(sp2 = strchr (sp1 + 1, ' ')))
    return parse_error (message, "Invalid request.");
  request->method = g_strndup (line, sp1 - line);
  request->uri = g_strndup (sp1 + 1, sp2 - sp1 - 1);
  request->version = g_strdup (sp2 + 1);
  if (!g_strv_contains (methods, request->method))
    return parse_error (message, "Invalid HTTP Method: Unsupported HTTP method.");
  if (request->uri[0] == '\0')
    return parse_error (message, "Invalid URI: Empty URI not allowed.");
  if (strcmp (request->version, "HTTP/1.0") != 0 && strcmp (request->version, "HTTP/1.1") != 0)
    return parse_error (message, "Invalid HTTP Version: Unsupported HTTP version.");
  return PARSE_DONE;
}

static gboolean
all_digits (const char *s)
{
  if (!*s)
    return FALSE;
  for (; *s; s++)
    if (!g_ascii_isdigit (*s))
      return FALSE;
  return TRUE;
}

/* One header line; sets *length and *expect_continue as it goes. */
static ParseResult
parse_header (const char *line, guint64 *length, gboolean *expect_continue, char **message)
{
  const char *colon;
  g_autofree char *key = NULL;
  g_autofree char *trimmed = NULL;
  g_autofree char *name = NULL;
  g_autofree char *value = NULL;

  if (!g_utf8_validate (line, -1, NULL))
    return parse_error (message, "Invalid header. Reason: Header contains invalid characters. "
                        "Key: %s", line);
  colon = strchr (line, ':');
  if (!colon)
    return parse_error (message, "Invalid header. Reason: Header is incorrectly formatted. "
                        "Key: %s", line);
  key = g_strndup (line, colon - line);
  trimmed = g_strstrip (g_strdup (key));
  name = g_ascii_strdown (trimmed, -1);
  value = g_strstrip (g_strdup (colon + 1));
  if (strcmp (name, "content-length") == 0)
    {
      if (!all_digits (value) || g_ascii_strtoull (value, NULL, 10) > G_MAXUINT32)
        return parse_error (message, "Invalid header. Reason: Invalid value. Key:%s; Value:%s",
                            key, colon + 1);
      *length = g_ascii_strtoull (value, NULL, 10);
    }
  else if (strcmp (name, "content-type") == 0)
    {
      /* Only the two bare media types: a "; charset=utf-8" parameter makes
       * it another value, which micro-http refuses. */
      if (strcmp (value, "application/json") != 0 && strcmp (value, "text/plain") != 0)
        return parse_error (message, "Invalid header. Reason: Unsupported value. Key:%s; Value:%s",
                            key, colon + 1);
    }
  else if (strcmp (name, "transfer-encoding") == 0)
    {
      if (strcmp (value, "chunked") == 0)
        return parse_error (message, "Invalid header. Reason: Unsupported feature. Key: %s; "
                            "Value: %s", key, colon + 1);
    }
  else if (strcmp (name, "expect") == 0)
    {
      if (strcmp (value, "100-continue") == 0)
        *expect_continue = TRUE;
    }
  else if (strcmp (name, "accept-encoding") == 0)
    {
      g_auto (GStrv) encodings = g_strsplit (value, ",", -1);
      for (char **e = encodings; *e; e++)
        {
          g_strstrip (*e);
          if (strcmp (*e, "identity;q=0") == 0 ||
              (strcmp (*e, "*;q=0") == 0 && !strstr (value, "identity")))
            return parse_error (message, "Invalid header. Reason: Invalid value. "
                                "Key:Accept-Encoding; Value:%s", *e);
        }
    }
  return PARSE_DONE;
}

/* Parses the request at the start of conn->input; on PARSE_DONE it has
 * been removed from the input. */
static ParseResult
parse_request (Connection *conn, FakeRequest *request, char **message)
{
  gsize offset = 0;
  guint64 length = 0;
  gboolean expect_continue = FALSE, too_long;
  g_autofree char *first = next_line (conn->input, &offset, &too_long);

  if (!first)
    return too_long ? parse_error (message, "Invalid request.") : PARSE_MORE;
  if (parse_request_line (first, request, message) == PARSE_ERROR)
    return PARSE_ERROR;
  for (;;)
    {
      g_autofree char *line = next_line (conn->input, &offset, &too_long);

      if (!line)
        return too_long ? parse_error (message, "Invalid request.") : PARSE_MORE;
      if (line[0] == '\0')
        break;
      if (parse_header (line, &length, &expect_continue, message) == PARSE_ERROR)
        return PARSE_ERROR;
    }
  if (length > conn->server->payload_limit)
    return parse_error (message, "Request payload with size %" G_GUINT64_FORMAT " is larger "
                        "than the limit of %zu allowed by server.", length,
                        conn->server->payload_limit);
  if (length > 0)
    {
      if (expect_continue && !conn->continue_sent)
        {
          FakeResponse cont = { .status = 100 };
          conn->continue_sent = send_response (conn, &cont);
        }
      if (conn->input->len - offset < length)
        return PARSE_MORE;
      request->body = g_bytes_new (conn->input->str + offset, length);
      offset += length;
    }
  g_string_erase (conn->input, 0, offset);
  conn->continue_sent = FALSE;
  return PARSE_DONE;
}

static void
connection_free (Connection *conn)
{
  conn->server->connections = g_list_remove (conn->server->connections, conn);
  if (conn->source)
    g_source_remove (conn->source);
  if (conn->drain_source)
    g_source_remove (conn->drain_source);
  if (conn->held_source)
    g_source_remove (conn->held_source);
  response_clear (&conn->held);
  close (conn->fd);
  g_string_free (conn->input, TRUE);
  g_free (conn);
}

/* Sends @response (and frees it); FALSE if it could not be sent. */
static gboolean
deliver (Connection *conn, FakeResponse *response)
{
  gboolean sent = send_response (conn, response);

  response_clear (response);
  if (response->after)
    response->after (response->after_data);
  return sent;
}

static gboolean on_held_due (gpointer data);

/* Answers every complete request in the input, in order, up to one whose
 * response is held back. */
static ServeResult
serve_input (Connection *conn)
{
  for (;;)
    {
      FakeRequest request = { 0 };
      FakeResponse response = { 0 };
      g_autofree char *message = NULL;
      ParseResult result;

      if (conn->held_source)
        return SERVE_KEEP;
      result = parse_request (conn, &request, &message);
      if (result == PARSE_MORE)
        {
          request_clear (&request);
          return SERVE_KEEP;
        }
      if (result == PARSE_ERROR)
        {
          g_autofree char *body = g_strdup_printf ("{ \"error\": \"%s\nAll previous unanswered "
                                                   "requests will be dropped.\" }", message);
          FakeResponse bad = { .status = 400, .body = g_string_new (body) };

          send_response (conn, &bad);
          response_clear (&bad);
          request_clear (&request);
          /* The stream cannot be resynchronised after a bad request. What
           * the client still sends (the rest of an oversized body) is read
           * and dropped, so that it gets to read the answer. */
          return SERVE_DRAIN;
        }
      conn->server->handler (&request, &response, conn->server->data);
      request_clear (&request);
      if (response.delay_ms > 0)
        {
          conn->held = response;
          conn->held_source = g_timeout_add (response.delay_ms, on_held_due, conn);
          return SERVE_KEEP;
        }
      if (!deliver (conn, &response))
        return SERVE_CLOSE;
    }
}

static gboolean
on_drain_timeout (gpointer data)
{
  Connection *conn = data;

  conn->drain_source = 0;
  connection_free (conn);
  return G_SOURCE_REMOVE;
}

/* Acts on what serve_input() gave; FALSE once the connection is freed. */
static gboolean
after_serving (Connection *conn, ServeResult result)
{
  if (result == SERVE_CLOSE)
    {
      connection_free (conn);
      return FALSE;
    }
  if (result == SERVE_DRAIN)
    {
      shutdown (conn->fd, SHUT_WR);
      g_string_truncate (conn->input, 0);
      conn->drain_source = g_timeout_add (DRAIN_TIMEOUT_MS, on_drain_timeout, conn);
    }
  return TRUE;
}

static gboolean
on_held_due (gpointer data)
{
  Connection *conn = data;
  FakeResponse response = conn->held;

  conn->held_source = 0;
  memset (&conn->held, 0, sizeof conn->held);
  if (response.due)
    response.due (response.due_data);
  if (!deliver (conn, &response) || conn->peer_gone)
    connection_free (conn);
  else
    /* What was pipelined behind it. */
    after_serving (conn, serve_input (conn));
  return G_SOURCE_REMOVE;
}

static gboolean
on_readable (int fd, GIOCondition condition, gpointer data)
{
  Connection *conn = data;
  char buf[65536];
  ssize_t n = recv (fd, buf, sizeof buf, 0);
  ServeResult result;

  if (n < 0 && errno == EINTR)
    return G_SOURCE_CONTINUE;
  if (n <= 0)
    {
      conn->source = 0;
      /* A held response still goes when it is due, into the void, as a
       * hung VMM's does once it gets to it. */
      if (conn->held_source)
        conn->peer_gone = TRUE;
      else
        connection_free (conn);
      return G_SOURCE_REMOVE;
    }
  if (conn->drain_source)
    return G_SOURCE_CONTINUE;
  g_string_append_len (conn->input, buf, n);
  result = serve_input (conn);
  if (result == SERVE_CLOSE)
    conn->source = 0;
  return after_serving (conn, result) ? G_SOURCE_CONTINUE : G_SOURCE_REMOVE;
}

static gboolean
on_accept (int listener, GIOCondition condition, gpointer data)
{
  FakeHttpServer *server = data;
  int fd = accept4 (listener, NULL, NULL, SOCK_CLOEXEC);
  Connection *conn;

  if (fd < 0)
    return G_SOURCE_CONTINUE;
  if (g_list_length (server->connections) >= MAX_CONNECTIONS)
    {
      fake_write_all (fd, SERVER_FULL, strlen (SERVER_FULL));
      close (fd);
      return G_SOURCE_CONTINUE;
    }
  conn = g_new0 (Connection, 1);
  conn->server = server;
  conn->fd = fd;
  conn->input = g_string_new (NULL);
  conn->source = g_unix_fd_add (fd, G_IO_IN | G_IO_HUP | G_IO_ERR, on_readable, conn);
  server->connections = g_list_prepend (server->connections, conn);
  return G_SOURCE_CONTINUE;
}

FakeHttpServer *
fake_http_server_new (int listener, const char *server_name, gsize payload_limit,
                      FakeHandler handler, gpointer data)
{
  FakeHttpServer *server = g_new0 (FakeHttpServer, 1);

  server->listener = listener;
  server->name = g_strdup (server_name);
  server->payload_limit = payload_limit;
  server->handler = handler;
  server->data = data;
  server->source = g_unix_fd_add (listener, G_IO_IN, on_accept, server);
  return server;
}

void
fake_http_server_free (FakeHttpServer *server)
{
  if (!server)
    return;
  while (server->connections)
    connection_free (server->connections->data);
  g_source_remove (server->source);
  close (server->listener);
  g_free (server->name);
  g_free (server);
}
