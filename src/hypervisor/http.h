/* A small HTTP/1.1 client over a Unix socket, for the REST APIs of
 * Firecracker and Cloud Hypervisor (both served by micro-http). One
 * connection, kept alive between requests and opened again when the VMM
 * has closed it; one request at a time; every wait bounded by a timeout;
 * responses bounded in size. */
#pragma once
#include <glib.h>
#include <json-glib/json-glib.h>

/* Larger answers are refused: a VMM's replies are a few KiB at most
 * (vm.info with many devices, GET /mmds with the whole document). */
#define MV_HTTP_RESPONSE_MAX_BYTES  (1024 * 1024)
/* How deep a reply's JSON may nest: vm.info's device tree goes about six
 * levels down, the guest metadata document four. */
#define MV_HTTP_JSON_MAX_DEPTH      16
#define MV_HTTP_TIMEOUT_MS          10000

typedef struct _MvHttp MvHttp;

typedef struct {
  guint   status;
  GBytes *body;        /* NULL when the response had none (a 204) */
} MvHttpResponse;

void        mv_http_response_clear (MvHttpResponse *response);
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (MvHttpResponse, mv_http_response_clear)

/* @server_name names the VMM in errors, "Firecracker". Nothing is
 * connected until the first request. */
MvHttp     *mv_http_new (const char *socket_path, const char *server_name);
void        mv_http_free (MvHttp *http);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (MvHttp, mv_http_free)

void        mv_http_set_timeout (MvHttp *http, guint timeout_ms);
void        mv_http_set_max_response (MvHttp *http, gsize max_bytes);
const char *mv_http_server_name (MvHttp *http);
/* How many connections were opened so far (tests watch keep-alive). */
guint       mv_http_connections (MvHttp *http);

/* Sends one request and reads its response, whatever its status.
 * @body (may be NULL) is sent as application/json. Failing to reach the
 * VMM, a reply later than the timeout, a malformed reply or one over the
 * size limit is MV_ERROR_UNAVAILABLE (MV_ERROR_FAILED for a malformed
 * reply); the status is the caller's to judge. */
gboolean    mv_http_request (MvHttp *http, const char *method, const char *path,
                             const char *body, gsize body_length, MvHttpResponse *response,
                             GError **error);

typedef enum {
  MV_HTTP_PARSE_MORE,      /* no whole response yet: read more */
  MV_HTTP_PARSE_DONE,      /* *response was taken off the front */
  MV_HTTP_PARSE_FAILED,    /* malformed, over a limit, or cut short */
} MvHttpParse;

/* Takes the first whole response off the front of @pending, what the
 * connection has delivered so far (@eof: and then its end), skipping
 * interim 1xx responses. A response without Content-Length runs to the
 * end of the stream. *@close: the connection is not to be used again.
 * The client's reading is this on what it reads; it never returns MORE
 * at @eof. A failure is MV_ERROR_UNAVAILABLE saying what was wrong. */
MvHttpParse mv_http_parse_response (GByteArray *pending, gboolean eof, gsize max_response,
                                    MvHttpResponse *response, gboolean *close, GError **error);

/* The VMM's own words in an error body: Firecracker's fault_message,
 * Cloud Hypervisor's error chain joined with ": ", micro-http's "error",
 * or the text itself, shortened. */
char       *mv_http_error_text (GBytes *body);

/* Sends @body (may be NULL) as JSON and parses a 2xx reply's body into
 * *@reply (NULL when it had none; @reply may be NULL), strictly
 * (core/json-strict.h) and at most MV_HTTP_JSON_MAX_DEPTH deep. Another status is
 * an error whose message names the request and quotes the VMM, with the
 * status in *@status (may be NULL) for the caller to refine. */
gboolean    mv_http_call_json (MvHttp *http, const char *method, const char *path,
                               JsonNode *body, JsonNode **reply, guint *status, GError **error);
