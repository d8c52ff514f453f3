/* Connecting to Unix stream sockets: VMM APIs, event channels, vsock
 * proxies and guest agents. */
#pragma once
#include <glib.h>

/* Connects a close-on-exec stream socket to @path and returns its fd, or
 * -1 and a G_IO_ERROR: INVALID_FILENAME if @path does not fit sun_path,
 * TIMED_OUT, or the code of the errno. The message says what failed but
 * not the path: callers name the socket.
 *
 * With @timeout_ms 0 the socket blocks, and so does the connect while
 * the listener's backlog is full. Otherwise the socket is non-blocking
 * and a full backlog is tried again until @timeout_ms have passed. */
int mv_unix_connect (const char *path, guint timeout_ms, GError **error);
