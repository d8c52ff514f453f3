/* micro-http, the HTTP/1.1 server Firecracker and Cloud Hypervisor both
 * embed, as it behaves on the wire: strict request parsing with its own
 * 400 shape, its response headers, keep-alive and pipelining, a payload
 * limit and at most ten connections. Runs on the default main context. */
#pragma once
#include <glib.h>
#include <json-glib/json-glib.h>

#define FAKE_HTTP_DEFAULT_PAYLOAD_LIMIT 51200

typedef struct {
  char   *method;
  char   *uri;
  char   *version;
  GBytes *body;        /* NULL when Content-Length is absent or 0 */
} FakeRequest;

typedef void (*FakeAfter) (gpointer data);

typedef struct {
  guint      status;
  GString   *body;         /* NULL: none */
  FakeAfter  after;        /* runs once the response has been sent */
  gpointer   after_data;
  guint      delay_ms;     /* 0: sent at once */
  FakeAfter  due;          /* runs as a delayed response is about to go */
  gpointer   due_data;
} FakeResponse;

typedef void (*FakeHandler) (const FakeRequest *request, FakeResponse *response, gpointer data);

typedef struct _FakeHttpServer FakeHttpServer;

/* Serves on @listener (bound and listening; taken over). */
FakeHttpServer *fake_http_server_new (int listener, const char *server_name, gsize payload_limit,
                                      FakeHandler handler, gpointer data);
void            fake_http_server_free (FakeHttpServer *server);

/* micro-http's Uri::get_abs_path, without a query. Newly allocated. */
char *fake_request_path (const FakeRequest *request);

void  fake_response_status (FakeResponse *response, guint status);
void  fake_response_json (FakeResponse *response, guint status, JsonNode *body);
void  fake_response_after (FakeResponse *response, FakeAfter after, gpointer data);
/* Holds the response back for @ms, as a VMM that hangs on a request;
 * @due (may be NULL) runs just before it is sent. Meanwhile its
 * connection answers nothing else (HTTP answers in order, so later
 * requests on it wait, and a client that gives up closes it); every other
 * connection is served as usual. */
void  fake_response_delay (FakeResponse *response, guint ms, FakeAfter due, gpointer data);
