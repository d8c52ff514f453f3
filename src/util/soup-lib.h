/* libsoup, opened when HTTP is first spoken rather than with the process:
 * with its chain (GIO's TLS, Kerberos, nghttp2, SQLite) it was most of
 * what a run of microvmctl spent before its first instruction, and a
 * good part of a daemon's start, for a metrics endpoint and a console
 * bridge that are off unless configured and a remote console that few
 * runs use. */
#pragma once
#include <glib.h>
#include <libsoup/soup.h>

/* Every function of libsoup the daemon and microvmctl call, by its name
 * there. */
typedef struct {
  typeof (soup_server_new) *server_new;
  typeof (soup_server_add_early_handler) *server_add_early_handler;
  typeof (soup_server_add_handler) *server_add_handler;
  typeof (soup_server_add_websocket_handler) *server_add_websocket_handler;
  typeof (soup_server_listen) *server_listen;
  typeof (soup_server_get_uris) *server_get_uris;
  typeof (soup_server_accept_iostream) *server_accept_iostream;
  typeof (soup_server_disconnect) *server_disconnect;
  typeof (soup_server_message_get_method) *server_message_get_method;
  typeof (soup_server_message_get_uri) *server_message_get_uri;
  typeof (soup_server_message_get_response_headers) *server_message_get_response_headers;
  typeof (soup_server_message_get_response_body) *server_message_get_response_body;
  typeof (soup_server_message_set_status) *server_message_set_status;
  typeof (soup_message_headers_replace) *message_headers_replace;
  typeof (soup_message_body_append_bytes) *message_body_append_bytes;
  typeof (soup_session_new_with_options) *session_new_with_options;
  typeof (soup_session_websocket_connect_async) *session_websocket_connect_async;
  typeof (soup_session_websocket_connect_finish) *session_websocket_connect_finish;
  typeof (soup_message_new) *message_new;
  typeof (soup_websocket_connection_get_state) *websocket_connection_get_state;
  typeof (soup_websocket_connection_set_max_incoming_payload_size)
    *websocket_connection_set_max_incoming_payload_size;
  typeof (soup_websocket_connection_send_binary) *websocket_connection_send_binary;
  typeof (soup_websocket_connection_send_text) *websocket_connection_send_text;
  typeof (soup_websocket_connection_close) *websocket_connection_close;
  typeof (soup_websocket_connection_get_close_code) *websocket_connection_get_close_code;
  typeof (soup_websocket_connection_get_close_data) *websocket_connection_get_close_data;
} MvSoupLib;

/* The table, filled by mv_soup_load(): call it, and see it succeed,
 * before anything in it. Macros of libsoup's headers that name its
 * variables (SOUP_METHOD_GET) or its types' functions (SOUP_SESSION ())
 * are not for use: they would link it again. */
extern MvSoupLib mv_soup;

/* Opens the library on the first call, from any thread; NULL once it is
 * open, otherwise why not, for the caller to say. */
const char *mv_soup_load (void);
