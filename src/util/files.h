/* File system helpers shared by the store and the hypervisor layer. */
#pragma once
#include <glib.h>

/* Sets a G_IO_ERROR for @errsv whose message is @format followed by ": "
 * and the errno's text; returns FALSE. */
gboolean    mv_set_errno_error (GError **error, int errsv, const char *format, ...)
  G_GNUC_PRINTF (3, 4);

/* fsync of the directory @path, so that the names in it (a rename, a
 * new or removed file) last. */
gboolean    mv_fsync_dir (const char *path, GError **error);
/* rename(@from, @to), then mv_fsync_dir() of @to's directory. */
gboolean    mv_rename_durably (const char *from, const char *to, GError **error);

/* Removes @path and everything below it, without following symbolic
 * links; a missing path is not an error. */
gboolean    mv_remove_tree (const char *path, GError **error);
/* The same for @name in the directory @dir_fd; @path names it in errors. */
gboolean    mv_remove_tree_at (int dir_fd, const char *name, const char *path, GError **error);

/* Reads the regular file @path whole, if it holds at most @max_bytes;
 * *@contents is NUL-terminated. A larger file is G_IO_ERROR_MESSAGE_TOO_LARGE
 * ("@what: N bytes is more than the limit of M") without being read; one
 * that is not a regular file (a FIFO that would block) is
 * G_IO_ERROR_NOT_REGULAR_FILE; a missing one G_IO_ERROR_NOT_FOUND. */
gboolean    mv_file_read_bounded (const char *path, gsize max_bytes, const char *what,
                                  char **contents, gsize *length, GError **error);
/* The same for @name in @dir_fd, opened with @flags added (O_NOFOLLOW: a
 * symbolic link is G_IO_ERROR_NOT_REGULAR_FILE); @path names it in
 * messages. */
gboolean    mv_file_read_bounded_at (int dir_fd, const char *name, int flags, const char *path,
                                     gsize max_bytes, const char *what, char **contents,
                                     gsize *length, GError **error);

/* The last @lines non-empty lines of @path, from byte @offset on (and
 * within its last 64 KiB), control characters blanked; "" if unreadable,
 * a symbolic link or not a regular file. */
char       *mv_file_tail (const char *path, goffset offset, guint lines);

/* Copies the regular file @from to @to (created, 0600; it must not exist),
 * then fsyncs it: a reflink (FICLONE) where the file system shares
 * blocks, else a copy of the parts that hold data, with the holes left
 * holes. On failure nothing of @to is left; a full disk is
 * G_IO_ERROR_NO_SPACE. */
gboolean    mv_copy_file (const char *from, const char *to, GError **error);
/* Gives @to_dir (which exists) every regular file directly in @from_dir:
 * a hard link where the file system allows (the same one), else a copy
 * (mv_copy_file()). Anything but a regular file is an error. For files
 * that neither side writes again. The names are not made durable: a
 * caller that keeps them fsyncs @to_dir. */
gboolean    mv_link_dir_files (const char *from_dir, const char *to_dir, GError **error);
/* The space @path and everything below it take on disk (blocks, not
 * lengths: a sparse file counts what it holds). */
guint64     mv_disk_usage (const char *path);
