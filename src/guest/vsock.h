/* Hybrid vsock: the guest's vsock device reached through the Unix socket
 * of Firecracker or Cloud Hypervisor. */
#pragma once
#include <glib.h>

/* Connects to guest port @port through the VMM's vsock socket: sends
 * "CONNECT <port>\n" and reads "OK <host port>\n". Returns the connected
 * stream's fd (blocking, close-on-exec), or -1: MV_ERROR_UNAVAILABLE if
 * nothing answers within @timeout_ms or the guest has nothing on the
 * port (the VMM then closes the connection). */
int   mv_vsock_dial (const char *socket_path, guint32 port, guint timeout_ms, GError **error);

/* Where the VMM connects when the guest opens a connection to host port
 * @port: "<socket_path>_<port>". */
char *mv_vsock_listen_path (const char *socket_path, guint32 port);

/* Listens there (replacing a stale socket) and returns the listening fd,
 * or -1 and an error. */
int   mv_vsock_listen (const char *socket_path, guint32 port, GError **error);
