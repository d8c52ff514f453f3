#include "soup-lib.h"
#include "library.h"

MvSoupLib mv_soup;

#define SYMBOL(field) { "soup_" #field, (void **) &mv_soup.field }
static const MvLibrarySymbol symbols[] = {
  SYMBOL (server_new),
  SYMBOL (server_add_early_handler),
  SYMBOL (server_add_handler),
  SYMBOL (server_add_websocket_handler),
  SYMBOL (server_listen),
  SYMBOL (server_get_uris),
  SYMBOL (server_accept_iostream),
  SYMBOL (server_disconnect),
  SYMBOL (server_message_get_method),
  SYMBOL (server_message_get_uri),
  SYMBOL (server_message_get_response_headers),
  SYMBOL (server_message_get_response_body),
  SYMBOL (server_message_set_status),
  SYMBOL (message_headers_replace),
  SYMBOL (message_body_append_bytes),
  SYMBOL (session_new_with_options),
  SYMBOL (session_websocket_connect_async),
  SYMBOL (session_websocket_connect_finish),
  SYMBOL (message_new),
  SYMBOL (websocket_connection_get_state),
  SYMBOL (websocket_connection_set_max_incoming_payload_size),
  SYMBOL (websocket_connection_send_binary),
  SYMBOL (websocket_connection_send_text),
  SYMBOL (websocket_connection_close),
  SYMBOL (websocket_connection_get_close_code),
  SYMBOL (websocket_connection_get_close_data),
};
#undef SYMBOL

/* The soname the headers are of. Each caller says why it cannot go on. */
static MvLibrary library = { "libsoup-3.0.so.0", symbols, G_N_ELEMENTS (symbols), .quiet = TRUE };

const char *
mv_soup_load (void)
{
  return mv_library_load (&library);
}
