#include "files.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include <gio/gio.h>

gboolean
mv_set_errno_error (GError **error, int errsv, const char *format, ...)
{
  g_autofree char *message = NULL;
  va_list args;

  va_start (args, format);
  message = g_strdup_vprintf (format, args);
  va_end (args);

  g_set_error (error, G_IO_ERROR, g_io_error_from_errno (errsv), "%s: %s",
               message, g_strerror (errsv));
  return FALSE;
}

/* Removes @name under @dir_fd and everything below it, without following
 * symbolic links. A missing entry is not an error. @path names it in
 * messages. */
static gboolean
remove_tree_at (int dir_fd, const char *name, const char *path, GError **error)
{
  int fd;
  DIR *dir;
  struct dirent *entry;
  gboolean ok = TRUE;

  if (unlinkat (dir_fd, name, 0) == 0 || errno == ENOENT)
    return TRUE;
  if (errno != EISDIR)
    return mv_set_errno_error (error, errno, "Cannot remove %s", path);

  fd = openat (dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT)
    return TRUE;   /* someone else removed it meanwhile */
  if (fd < 0)
    return mv_set_errno_error (error, errno, "Cannot open directory %s", path);

  dir = fdopendir (fd);
  if (dir == NULL)
    {
      int errsv = errno;

      close (fd);
      return mv_set_errno_error (error, errsv, "Cannot read directory %s", path);
    }

  while (ok)
    {
      g_autofree char *child = NULL;

      errno = 0;
      entry = readdir (dir);
      if (entry == NULL)
        {
          if (errno != 0)
            ok = mv_set_errno_error (error, errno, "Cannot read directory %s", path);
          break;
        }
      if (g_str_equal (entry->d_name, ".") || g_str_equal (entry->d_name, ".."))
        continue;

      child = g_build_filename (path, entry->d_name, NULL);
      ok = remove_tree_at (dirfd (dir), entry->d_name, child, error);
    }
  closedir (dir);

  if (!ok)
    return FALSE;
  if (unlinkat (dir_fd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
    return mv_set_errno_error (error, errno, "Cannot remove directory %s", path);
  return TRUE;
}

gboolean
mv_remove_tree (const char *path, GError **error)
{
  return remove_tree_at (AT_FDCWD, path, path, error);
}
