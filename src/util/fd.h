/* Waiting on file descriptors (sockets, pipes, pidfds) against a
 * deadline, and what every writer of them needs. */
#pragma once
#include <glib.h>

/* Waits until @fd has one of @events (poll(2) bits), through EINTR; FALSE
 * once @deadline (g_get_monotonic_time() µs) has passed or poll fails. A
 * deadline already past still looks once. */
gboolean mv_fd_wait (int fd, short events, gint64 deadline);

/* An inotify descriptor, non-blocking, that becomes readable on @mask's
 * events (IN_CREATE, ...) in the directory that holds @path; -1 if none
 * can be had, and whoever waits on it then looks from time to time. */
int      mv_fd_watch_directory_of (const char *path, guint32 mask);

/* Waits until the process of @pidfd ends (TRUE), @watch_fd
 * (mv_fd_watch_directory_of()) has events, which are read and dropped,
 * or @deadline has passed. Either descriptor may be -1. */
gboolean mv_fd_wait_end_or_change (int pidfd, int watch_fd, gint64 deadline);

/* Writes all @length bytes, through EINTR; FALSE at an error or if
 * nothing more can be written. Async-signal-safe. */
gboolean mv_fd_write_all (int fd, const void *data, gsize length);

/* @fd moved above stdio (0 to 2), close-on-exec, if it was there: a
 * descriptor a child's dup2() onto stdio cannot overwrite. Closes @fd if
 * it was moved; -1 if @fd was, or moving failed. Async-signal-safe. */
int      mv_fd_above_stdio (int fd);
