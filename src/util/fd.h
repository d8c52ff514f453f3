/* Waiting on file descriptors (sockets, pipes, pidfds) against a
 * deadline. */
#pragma once
#include <glib.h>

/* Waits until @fd has one of @events (poll(2) bits), through EINTR; FALSE
 * once @deadline (g_get_monotonic_time() µs) has passed or poll fails. A
 * deadline already past still looks once. */
gboolean mv_fd_wait (int fd, short events, gint64 deadline);
