/* The HTTP client against a scripted server on a Unix socket. */
#include "hypervisor/http.h"
#include "core/errors.h"

#include <gio/gio.h>
#include <glib/gstdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

typedef enum {
  REPLY_NO_CONTENT,    /* 204, no body, keep-alive */
  REPLY_JSON,          /* 200 with a JSON body */
  REPLY_FAULT,         /* 400 with Firecracker's fault_message */
  REPLY_CHAIN,         /* 500 with Cloud Hypervisor's error chain */
  REPLY_HUGE,          /* announces a body over the client's cap */
  REPLY_STALL,         /* never answers */
  REPLY_CLOSE,         /* 204, then closes the connection */
  REPLY_BODY,          /* 200 with the test's own body */
} Reply;

typedef struct {
  char      *dir;
  char      *path;
  int        listener;
  GThread   *thread;
  Reply      reply;
  GMutex     lock;
  GPtrArray *requests;     /* raw text of each request */
  char      *body;         /* REPLY_BODY's, set before the request */
  guint      accepted;
  gboolean   stop;
} Server;

static gboolean
read_request (int fd, GString *request)
{
  char buf[4096];
  const char *end;
  gsize length = 0, head;

  while (!(end = strstr (request->str, "\r\n\r\n")))
    {
      ssize_t n = read (fd, buf, sizeof buf);
      if (n <= 0)
        return FALSE;
      g_string_append_len (request, buf, n);
    }
  /* An offset, not a pointer: the string moves as it grows. */
  head = end - request->str + 4;
  {
    const char *cl = strstr (request->str, "Content-Length: ");
    if (cl && cl < end)
      length = strtoul (cl + strlen ("Content-Length: "), NULL, 10);
  }
  while (request->len < head + length)
    {
      ssize_t n = read (fd, buf, sizeof buf);
      if (n <= 0)
        return FALSE;
      g_string_append_len (request, buf, n);
    }
  return TRUE;
}

static void
send_text (int fd, const char *text)
{
  g_assert_cmpint (send (fd, text, strlen (text), MSG_NOSIGNAL), ==, (ssize_t) strlen (text));
}

static gpointer
serve (gpointer data)
{
  Server *server = data;

  for (;;)
    {
      int fd = accept (server->listener, NULL, NULL);

      if (fd < 0 || server->stop)
        {
          if (fd >= 0)
            close (fd);
          return NULL;
        }
      g_mutex_lock (&server->lock);
      server->accepted++;
      g_mutex_unlock (&server->lock);
      for (;;)
        {
          g_autoptr (GString) request = g_string_new (NULL);
          const char *body;

          if (!read_request (fd, request))
            break;
          g_mutex_lock (&server->lock);
          g_ptr_array_add (server->requests, g_strdup (request->str));
          g_mutex_unlock (&server->lock);
          switch (server->reply)
            {
            case REPLY_NO_CONTENT:
            case REPLY_CLOSE:
              send_text (fd, "HTTP/1.1 204 \r\nServer: Firecracker API\r\nConnection: keep-alive\r\n\r\n");
              break;
            case REPLY_JSON:
              body = "{\"state\":\"Running\"}";
              send_text (fd, "HTTP/1.1 200 \r\nServer: Firecracker API\r\nConnection: keep-alive\r\n"
                         "Content-Type: application/json\r\nContent-Length: 19\r\n\r\n");
              send_text (fd, body);
              break;
            case REPLY_FAULT:
              body = "{\"fault_message\":\"The requested operation is not supported after starting the microVM.\"}";
              {
                g_autofree char *head = g_strdup_printf ("HTTP/1.1 400 \r\nContent-Type: application/json\r\n"
                                                         "Content-Length: %zu\r\n\r\n", strlen (body));
                send_text (fd, head);
                send_text (fd, body);
              }
              break;
            case REPLY_CHAIN:
              body = "[\"Error pausing the VM\",\"Invalid VM state transition: Paused to Paused\"]";
              {
                g_autofree char *head = g_strdup_printf ("HTTP/1.1 500 \r\nContent-Type: application/json\r\n"
                                                         "Content-Length: %zu\r\n\r\n", strlen (body));
                send_text (fd, head);
                send_text (fd, body);
              }
              break;
            case REPLY_HUGE:
              send_text (fd, "HTTP/1.1 200 \r\nContent-Type: application/json\r\n"
                         "Content-Length: 2000000\r\n\r\n{\"a\":");
              break;
            case REPLY_STALL:
              break;
            case REPLY_BODY:
              {
                g_autofree char *own = NULL;
                g_autofree char *head = NULL;

                /* The test sets the next body as soon as it has this one. */
                g_mutex_lock (&server->lock);
                own = g_strdup (server->body);
                g_mutex_unlock (&server->lock);
                head = g_strdup_printf ("HTTP/1.1 200 \r\nContent-Type: application/json\r\n"
                                        "Content-Length: %zu\r\n\r\n", strlen (own));
                send_text (fd, head);
                send_text (fd, own);
              }
              break;
            }
          if (server->reply == REPLY_CLOSE)
            break;
        }
      close (fd);
    }
}

static void
server_start (Server *server, gconstpointer data)
{
  struct sockaddr_un addr = { .sun_family = AF_UNIX };
  g_autoptr (GError) error = NULL;

  server->dir = g_dir_make_tmp ("mv-http-XXXXXX", &error);
  g_assert_no_error (error);
  server->path = g_build_filename (server->dir, "api.sock", NULL);
  strcpy (addr.sun_path, server->path);
  server->listener = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  g_assert_cmpint (bind (server->listener, (struct sockaddr *) &addr, sizeof addr), ==, 0);
  g_assert_cmpint (listen (server->listener, 8), ==, 0);
  server->requests = g_ptr_array_new_with_free_func (g_free);
  g_mutex_init (&server->lock);
  server->reply = GPOINTER_TO_INT (data);
  server->thread = g_thread_new ("server", serve, server);
}

static void
server_stop (Server *server, gconstpointer data)
{
  int fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_un addr = { .sun_family = AF_UNIX };

  /* Wake the accept with one last connection. */
  server->stop = TRUE;
  strcpy (addr.sun_path, server->path);
  g_assert_cmpint (connect (fd, (struct sockaddr *) &addr, sizeof addr), ==, 0);
  close (fd);
  g_thread_join (server->thread);
  close (server->listener);
  unlink (server->path);
  g_rmdir (server->dir);
  g_free (server->path);
  g_free (server->dir);
  g_ptr_array_unref (server->requests);
  g_free (server->body);
  g_mutex_clear (&server->lock);
}

static void
test_no_body_keep_alive (Server *server, gconstpointer data)
{
  g_autoptr (MvHttp) http = mv_http_new (server->path, "Firecracker");
  g_autoptr (GError) error = NULL;
  const char *request;

  for (int i = 0; i < 3; i++)
    {
      g_auto (MvHttpResponse) response = { 0 };
      g_assert_true (mv_http_request (http, "PUT", "/vm", "{\"state\":\"Paused\"}", 18, &response,
                                      &error));
      g_assert_no_error (error);
      g_assert_cmpuint (response.status, ==, 204);
      g_assert_null (response.body);
    }
  /* Three requests, one connection. */
  g_assert_cmpuint (mv_http_connections (http), ==, 1);
  g_assert_cmpuint (server->accepted, ==, 1);
  g_assert_cmpuint (server->requests->len, ==, 3);
  request = server->requests->pdata[0];
  g_assert_true (g_str_has_prefix (request, "PUT /vm HTTP/1.1\r\n"));
  g_assert_nonnull (strstr (request, "\r\nContent-Type: application/json\r\n"));
  g_assert_nonnull (strstr (request, "\r\nContent-Length: 18\r\n"));
  g_assert_true (g_str_has_suffix (request, "\r\n\r\n{\"state\":\"Paused\"}"));
}

static void
test_get_sends_length_without_type (Server *server, gconstpointer data)
{
  g_autoptr (MvHttp) http = mv_http_new (server->path, "Firecracker");
  g_autoptr (GError) error = NULL;
  g_autoptr (JsonNode) reply = NULL;
  const char *request;

  g_assert_true (mv_http_call_json (http, "GET", "/", NULL, &reply, NULL, &error));
  g_assert_no_error (error);
  g_assert_cmpstr (json_object_get_string_member (json_node_get_object (reply), "state"), ==,
                   "Running");
  request = server->requests->pdata[0];
  g_assert_nonnull (strstr (request, "\r\nContent-Length: 0\r\n"));
  g_assert_null (strstr (request, "Content-Type"));
}

static void
test_reconnect (Server *server, gconstpointer data)
{
  g_autoptr (MvHttp) http = mv_http_new (server->path, "Firecracker");
  g_autoptr (GError) error = NULL;

  for (int i = 0; i < 2; i++)
    {
      g_auto (MvHttpResponse) response = { 0 };
      g_assert_true (mv_http_request (http, "PUT", "/actions", NULL, 0, &response, &error));
      g_assert_no_error (error);
      g_assert_cmpuint (response.status, ==, 204);
      /* Let the server's close arrive before the next request. */
      g_usleep (50 * 1000);
    }
  g_assert_cmpuint (mv_http_connections (http), ==, 2);
  g_assert_cmpuint (server->requests->len, ==, 2);
}

static void
test_fault_message (Server *server, gconstpointer data)
{
  g_autoptr (MvHttp) http = mv_http_new (server->path, "Firecracker");
  g_autoptr (GError) error = NULL;
  guint status = 0;

  g_assert_false (mv_http_call_json (http, "PUT", "/machine-config", NULL, NULL, &status, &error));
  g_assert_cmpuint (status, ==, 400);
  g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
  g_assert_nonnull (strstr (error->message, "Firecracker refused PUT /machine-config (400): "
                            "The requested operation is not supported after starting the microVM."));
}

static void
test_error_chain (Server *server, gconstpointer data)
{
  g_autoptr (MvHttp) http = mv_http_new (server->path, "Cloud Hypervisor");
  g_autoptr (GError) error = NULL;

  g_assert_false (mv_http_call_json (http, "PUT", "/api/v1/vm.pause", NULL, NULL, NULL, &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_FAILED);
  g_assert_nonnull (strstr (error->message, "(500): Error pausing the VM: Invalid VM state "
                            "transition: Paused to Paused"));
}

static void
test_over_cap (Server *server, gconstpointer data)
{
  g_autoptr (MvHttp) http = mv_http_new (server->path, "Firecracker");
  g_autoptr (GError) error = NULL;
  g_auto (MvHttpResponse) response = { 0 };

  mv_http_set_max_response (http, 64 * 1024);
  g_assert_false (mv_http_request (http, "GET", "/mmds", NULL, 0, &response, &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_UNAVAILABLE);
  g_assert_nonnull (strstr (error->message, "2000000 bytes, over the limit of 65536"));
  g_assert_null (response.body);
}

static void
test_stall_times_out (Server *server, gconstpointer data)
{
  g_autoptr (MvHttp) http = mv_http_new (server->path, "Firecracker");
  g_autoptr (GError) error = NULL;
  g_auto (MvHttpResponse) response = { 0 };
  gint64 start = g_get_monotonic_time ();

  mv_http_set_timeout (http, 300);
  g_assert_false (mv_http_request (http, "GET", "/", NULL, 0, &response, &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_UNAVAILABLE);
  g_assert_nonnull (strstr (error->message, "no response within 300 ms"));
  g_assert_cmpint (g_get_monotonic_time () - start, >=, 290 * 1000);
  g_assert_cmpint (g_get_monotonic_time () - start, <, 5 * G_USEC_PER_SEC);
}

static void
test_nothing_listens (void)
{
  g_autoptr (MvHttp) http = mv_http_new ("/nonexistent/api.sock", "Firecracker");
  g_autoptr (GError) error = NULL;
  g_auto (MvHttpResponse) response = { 0 };

  g_assert_false (mv_http_request (http, "GET", "/", NULL, 0, &response, &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_UNAVAILABLE);
  g_assert_nonnull (strstr (error->message, "could not connect"));
}

static void
test_error_text (void)
{
  struct { const char *body; const char *text; } cases[] = {
    { "{\"fault_message\":\"Invalid request method and/or path: PUT foo.\"}",
      "Invalid request method and/or path: PUT foo." },
    { "[\"Failed to create the VM\",\"The VM is already created\"]",
      "Failed to create the VM: The VM is already created" },
    /* micro-http's own, with a raw newline inside its JSON. */
    { "{ \"error\": \"Request payload with size 60000 is larger than the limit of 51200 allowed by "
      "server.\nAll previous unanswered requests will be dropped.\" }",
      "Request payload with size 60000 is larger than the limit of 51200 allowed by server." },
    { "plain words", "plain words" },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr (GBytes) body = g_bytes_new_static (cases[i].body, strlen (cases[i].body));
      g_autofree char *text = mv_http_error_text (body);
      g_assert_cmpstr (text, ==, cases[i].text);
    }
}

static char *
nested (guint depth)
{
  GString *s = g_string_new (NULL);

  for (guint i = 0; i < depth; i++)
    g_string_append_c (s, '[');
  for (guint i = 0; i < depth; i++)
    g_string_append_c (s, ']');
  return g_string_free (s, FALSE);
}

static void
set_body (Server *server, const char *body)
{
  g_mutex_lock (&server->lock);
  g_free (server->body);
  server->body = g_strdup (body);
  g_mutex_unlock (&server->lock);
}

/* A reply that json-glib would recurse through, or take though it is not
 * JSON, is a VMM misbehaving: FAILED, quickly, the reason named. */
static void
test_reply_not_strict (Server *server, gconstpointer data)
{
  g_autofree char *deep = nested (100000);
  g_autofree char *at_limit = nested (MV_HTTP_JSON_MAX_DEPTH);
  g_autofree char *depth_reason = g_strdup_printf ("nesting depth %d is more than the limit of %d",
                                                   MV_HTTP_JSON_MAX_DEPTH + 1,
                                                   MV_HTTP_JSON_MAX_DEPTH);
  const struct {
    const char *body;
    const char *reason;
  } cases[] = {
    { deep, depth_reason },
    { "{\"state\":\"Running\"} // fine", "comments are not allowed" },
    { "{'state':'Running'}", "single quotes are not allowed" },
    { "{\"state\":\"Running\"}{}", "only one value is allowed" },
    { "{\"state\":\"Run\\u0000ning\"}", "state: \\u0000 (NUL) is not allowed in a string" },
    { "{\"memory\":1e400}", "memory: the number at byte 10 is too large" },
  };
  g_autoptr (MvHttp) http = mv_http_new (server->path, "Firecracker");

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr (GError) error = NULL;
      g_autoptr (JsonNode) reply = NULL;

      set_body (server, cases[i].body);
      g_assert_false (mv_http_call_json (http, "GET", "/vm/config", NULL, &reply, NULL, &error));
      g_assert_null (reply);
      g_assert_error (error, MV_ERROR, MV_ERROR_FAILED);
      g_test_message ("%s", error->message);
      g_assert_true (g_str_has_prefix (error->message, "Firecracker answered GET /vm/config with "
                                       "malformed JSON: body: "));
      g_assert_nonnull (strstr (error->message, cases[i].reason));
      g_assert_cmpuint (strlen (error->message), <, 300);
    }

  /* As deep as a reply may be is a reply. */
  {
    g_autoptr (GError) error = NULL;
    g_autoptr (JsonNode) reply = NULL;

    set_body (server, at_limit);
    g_assert_true (mv_http_call_json (http, "GET", "/vm/config", NULL, &reply, NULL, &error));
    g_assert_no_error (error);
    g_assert_true (JSON_NODE_HOLDS_ARRAY (reply));
  }
}

/* An error body that is not strictly JSON is quoted as text, shortened. */
static void
test_error_text_not_strict (void)
{
  g_autofree char *deep = nested (100000);
  g_autoptr (GBytes) deep_body = g_bytes_new_static (deep, strlen (deep));
  g_autoptr (GBytes) quoted = g_bytes_new_static ("{'fault_message':'x'}", 21);
  g_autofree char *deep_text = mv_http_error_text (deep_body);
  g_autofree char *quoted_text = mv_http_error_text (quoted);

  g_assert_cmpuint (strlen (deep_text), <=, 1024 + strlen ("…"));
  g_assert_cmpstr (quoted_text, ==, "{'fault_message':'x'}");
}

#define SERVER_TEST(name, reply, func) \
  g_test_add (name, Server, GINT_TO_POINTER (reply), server_start, func, server_stop)

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  SERVER_TEST ("/http/no-body-keep-alive", REPLY_NO_CONTENT, test_no_body_keep_alive);
  SERVER_TEST ("/http/get-length-no-type", REPLY_JSON, test_get_sends_length_without_type);
  SERVER_TEST ("/http/reconnect", REPLY_CLOSE, test_reconnect);
  SERVER_TEST ("/http/fault-message", REPLY_FAULT, test_fault_message);
  SERVER_TEST ("/http/error-chain", REPLY_CHAIN, test_error_chain);
  SERVER_TEST ("/http/over-cap", REPLY_HUGE, test_over_cap);
  SERVER_TEST ("/http/stall-times-out", REPLY_STALL, test_stall_times_out);
  g_test_add_func ("/http/nothing-listens", test_nothing_listens);
  g_test_add_func ("/http/error-text", test_error_text);
  g_test_add_func ("/http/error-text-not-strict", test_error_text_not_strict);
  SERVER_TEST ("/http/reply-not-strict", REPLY_BODY, test_reply_not_strict);
  return g_test_run ();
}
