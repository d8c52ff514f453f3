/* What a VMM's REST API sends back on its socket, through the HTTP
 * client's response parser. The first byte steers the client: its low six
 * bits are how many bytes each read returns (0: all at once), bit 6 a
 * response limit of 64 bytes instead of the real one. The rest is the
 * stream: responses are taken off it as the client would, keep-alive
 * included, until it fails, closes or ends. */
#include "fuzz-common.h"
#include "hypervisor/http.h"

#include <string.h>

#define SMALL_LIMIT 64

int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
  mv_fuzz_init ();
  return 0;
}

static void
check_response (const MvHttpResponse *response, gsize max_response)
{
  g_autofree char *text = NULL;
  gsize size = response->body ? g_bytes_get_size (response->body) : 0;
  const char *body = response->body ? g_bytes_get_data (response->body, NULL) : NULL;

  if (response->status < 200 || response->status > 599)
    mv_fuzz_fail ("a response came out with status %u", response->status);
  if (response->body && size == 0)
    mv_fuzz_fail ("an empty body is not NULL");
  if (size > max_response)
    mv_fuzz_fail ("a body of %zu bytes passed the limit of %zu", size, max_response);
  if ((response->status == 204 || response->status == 304) && response->body)
    mv_fuzz_fail ("a %u response has a body", response->status);

  /* The VMM's words end up in a D-Bus error, which must be UTF-8. */
  if (body && mv_fuzz_json_glib_leaks (body, size))
    return;
  text = mv_http_error_text (response->body);
  if (!g_utf8_validate (text, -1, NULL))
    mv_fuzz_fail ("the error text of a response is not UTF-8: %s", text);
}

/* Takes every whole response off @pending; FALSE once the client would
 * stop reading this connection. */
static gboolean
take_responses (GByteArray *pending, gboolean eof, gsize max_response)
{
  for (;;)
    {
      g_auto (MvHttpResponse) response = { 0 };
      g_autoptr (GError) error = NULL;
      gboolean close = FALSE;

      switch (mv_http_parse_response (pending, eof, max_response, &response, &close, &error))
        {
        case MV_HTTP_PARSE_MORE:
          if (eof)
            mv_fuzz_fail ("the parser asks for more after the end of the stream");
          return TRUE;
        case MV_HTTP_PARSE_FAILED:
          g_assert (error != NULL);
          return FALSE;
        case MV_HTTP_PARSE_DONE:
          check_response (&response, max_response);
          if (close)
            return FALSE;
          break;
        }
    }
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  g_autoptr (GByteArray) pending = g_byte_array_new ();
  gsize chunk, max_response, offset = 1;

  if (size < 1)
    return -1;
  chunk = data[0] & 0x3f;
  max_response = (data[0] & 0x40) ? SMALL_LIMIT : MV_HTTP_RESPONSE_MAX_BYTES;

  while (offset < size)
    {
      gsize n = chunk ? MIN (chunk, size - offset) : size - offset;

      g_byte_array_append (pending, data + offset, n);
      offset += n;
      if (!take_responses (pending, FALSE, max_response))
        return 0;
    }
  take_responses (pending, TRUE, max_response);
  return 0;
}
