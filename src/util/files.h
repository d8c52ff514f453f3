/* File system helpers shared by the store and the hypervisor layer. */
#pragma once
#include <glib.h>

/* Sets a G_IO_ERROR for @errsv whose message is @format followed by ": "
 * and the errno's text; returns FALSE. */
gboolean    mv_set_errno_error (GError **error, int errsv, const char *format, ...)
  G_GNUC_PRINTF (3, 4);

/* Removes @path and everything below it, without following symbolic
 * links; a missing path is not an error. */
gboolean    mv_remove_tree (const char *path, GError **error);

/* The last @lines non-empty lines of @path, from byte @offset on (and
 * within its last 64 KiB), control characters blanked; "" if unreadable,
 * a symbolic link or not a regular file. */
char       *mv_file_tail (const char *path, goffset offset, guint lines);
