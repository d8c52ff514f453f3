#include "files.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gio/gio.h>
#include <glib/gstdio.h>

/* How much of a file's end mv_file_tail() reads. */
#define TAIL_MAX_BYTES (64 * 1024)

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
gboolean
mv_remove_tree_at (int dir_fd, const char *name, const char *path, GError **error)
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
      ok = mv_remove_tree_at (dirfd (dir), entry->d_name, child, error);
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
  return mv_remove_tree_at (AT_FDCWD, path, path, error);
}

static gboolean
too_large (GError **error, const char *what, guint64 size, gsize max_bytes)
{
  g_set_error (error, G_IO_ERROR, G_IO_ERROR_MESSAGE_TOO_LARGE,
               "%s: %" G_GUINT64_FORMAT " bytes is more than the limit of %" G_GSIZE_FORMAT,
               what, size, max_bytes);
  return FALSE;
}

gboolean
mv_file_read_bounded (const char *path, gsize max_bytes, const char *what, char **contents,
                      gsize *length, GError **error)
{
  return mv_file_read_bounded_at (AT_FDCWD, path, 0, path, max_bytes, what, contents, length,
                                  error);
}

gboolean
mv_file_read_bounded_at (int dir_fd, const char *name, int flags, const char *path,
                         gsize max_bytes, const char *what, char **contents, gsize *length,
                         GError **error)
{
  g_autofree char *buf = NULL;
  gsize capacity, used = 0;
  struct stat st;
  int fd;

  /* Non-blocking, so that opening a FIFO does not wait for a writer. */
  fd = openat (dir_fd, name, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | flags);
  if (fd < 0 && errno == ELOOP && (flags & O_NOFOLLOW))
    {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_NOT_REGULAR_FILE,
                   "%s is a symbolic link, not a regular file", path);
      return FALSE;
    }
  if (fd < 0)
    return mv_set_errno_error (error, errno, "Cannot open %s", path);
  if (fstat (fd, &st) < 0)
    {
      int errsv = errno;

      close (fd);
      return mv_set_errno_error (error, errsv, "Cannot read %s", path);
    }
  if (!S_ISREG (st.st_mode))
    {
      close (fd);
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_NOT_REGULAR_FILE, "%s is not a regular file",
                   path);
      return FALSE;
    }
  if ((guint64) st.st_size > max_bytes)
    {
      close (fd);
      return too_large (error, what, (guint64) st.st_size, max_bytes);
    }

  /* The file may grow while it is read: never past one byte over. */
  capacity = (gsize) st.st_size + 1;
  buf = g_malloc (capacity + 1);
  for (;;)
    {
      gssize n = read (fd, buf + used, capacity - used);

      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        {
          int errsv = errno;

          close (fd);
          return mv_set_errno_error (error, errsv, "Cannot read %s", path);
        }
      if (n == 0)
        break;
      used += (gsize) n;
      if (used > max_bytes)
        {
          close (fd);
          return too_large (error, what, used, max_bytes);
        }
      /* All the size fstat() gave, and short of what was asked: the read
       * that would only find the end is saved (a start reads twenty
       * thousand records). A file whose size says nothing (procfs) is
       * read until a read finds the end. */
      if (used == (gsize) st.st_size && used < capacity)
        break;
      if (used == capacity)
        {
          capacity = MIN (capacity * 2, max_bytes + 1);
          buf = g_realloc (buf, capacity + 1);
        }
    }
  close (fd);
  buf[used] = '\0';
  *contents = g_steal_pointer (&buf);
  *length = used;
  return TRUE;
}

char *
mv_file_tail (const char *path, goffset offset, guint lines)
{
  g_autofree char *buf = NULL;
  g_auto (GStrv) split = NULL;
  g_autoptr (GPtrArray) kept = g_ptr_array_new ();
  GStatBuf st;
  goffset from;
  gssize n;
  int fd;
  guint total;

  /* The file may lie where a VMM writes too: no link is followed, and
   * a FIFO put in its place neither blocks nor is read. */
  fd = g_open (path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0);
  if (fd < 0)
    return g_strdup ("");
  if (fstat (fd, &st) < 0 || !S_ISREG (st.st_mode) || st.st_size <= offset)
    {
      close (fd);
      return g_strdup ("");
    }
  from = MAX (offset, st.st_size - TAIL_MAX_BYTES);
  buf = g_malloc0 (st.st_size - from + 1);
  n = pread (fd, buf, st.st_size - from, from);
  close (fd);
  if (n <= 0)
    return g_strdup ("");
  buf[n] = '\0';

  /* Consoles carry CRs and the odd control byte; keep printable text. */
  for (gssize i = 0; i < n; i++)
    if (buf[i] == '\r' || buf[i] == '\0' || ((guchar) buf[i] < 0x20 && buf[i] != '\n' && buf[i] != '\t'))
      buf[i] = ' ';
  split = g_strsplit (buf, "\n", -1);
  total = g_strv_length (split);
  for (guint i = 0; i < total; i++)
    {
      g_strchomp (split[i]);
      if (split[i][0])
        g_ptr_array_add (kept, split[i]);
    }
  if (kept->len > lines)
    g_ptr_array_remove_range (kept, 0, kept->len - lines);
  g_ptr_array_add (kept, NULL);
  return g_strjoinv ("\n", (char **) kept->pdata);
}

gboolean
mv_fsync_dir (const char *path, GError **error)
{
  int fd = open (path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  int errsv;

  if (fd < 0)
    return mv_set_errno_error (error, errno, "Cannot open directory %s", path);
  if (fsync (fd) < 0)
    {
      errsv = errno;
      close (fd);
      return mv_set_errno_error (error, errsv, "Cannot sync directory %s", path);
    }
  close (fd);
  return TRUE;
}

gboolean
mv_rename_durably (const char *from, const char *to, GError **error)
{
  g_autofree char *dir = g_path_get_dirname (to);

  if (rename (from, to) < 0)
    return mv_set_errno_error (error, errno, "Cannot rename %s to %s", from, to);
  return mv_fsync_dir (dir, error);
}

/* The data of @in to @out, extent by extent: holes stay holes. */
static gboolean
copy_data (int in, int out, off_t size, const char *from, GError **error)
{
  off_t data = 0;

  while (data < size)
    {
      off_t hole, at;

      data = lseek (in, data, SEEK_DATA);
      if (data < 0 && errno == ENXIO)
        break;          /* nothing but a hole to the end */
      if (data < 0)
        return mv_set_errno_error (error, errno, "Cannot read %s", from);
      hole = lseek (in, data, SEEK_HOLE);
      if (hole < 0)
        return mv_set_errno_error (error, errno, "Cannot read %s", from);
      at = data;
      while (at < hole)
        {
          off_t out_at = at;
          ssize_t n = copy_file_range (in, &at, out, &out_at, (size_t) (hole - at), 0);

          if (n < 0 && errno == EINTR)
            continue;
          if (n < 0)
            return mv_set_errno_error (error, errno, "Cannot copy %s", from);
          if (n == 0)
            break;      /* the file shrank meanwhile */
        }
      data = hole;
    }
  if (ftruncate (out, size) < 0)
    return mv_set_errno_error (error, errno, "Cannot copy %s", from);
  return TRUE;
}

gboolean
mv_copy_file (const char *from, const char *to, GError **error)
{
  int in = open (from, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  int out;
  struct stat st = { 0 };
  gboolean ok = FALSE;

  if (in < 0)
    return mv_set_errno_error (error, errno, "Cannot open %s", from);
  if (fstat (in, &st) < 0 || !S_ISREG (st.st_mode))
    {
      int errsv = S_ISREG (st.st_mode) ? errno : EINVAL;

      close (in);
      return mv_set_errno_error (error, errsv, "Cannot copy %s", from);
    }
  out = open (to, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (out < 0)
    {
      mv_set_errno_error (error, errno, "Cannot create %s", to);
      close (in);
      return FALSE;
    }
  if (ioctl (out, FICLONE, in) == 0 || copy_data (in, out, st.st_size, from, error))
    {
      if (fsync (out) == 0)
        ok = TRUE;
      else
        mv_set_errno_error (error, errno, "Cannot write %s", to);
    }
  close (in);
  close (out);
  if (!ok)
    g_unlink (to);
  return ok;
}

gboolean
mv_link_dir_files (const char *from_dir, const char *to_dir, GError **error)
{
  g_autoptr (GDir) dir = g_dir_open (from_dir, 0, error);
  const char *name;

  if (dir == NULL)
    return FALSE;
  while ((name = g_dir_read_name (dir)))
    {
      g_autofree char *from = g_build_filename (from_dir, name, NULL);
      g_autofree char *to = g_build_filename (to_dir, name, NULL);
      struct stat st = { 0 };
      int errsv;

      if (lstat (from, &st) < 0)
        return mv_set_errno_error (error, errno, "Cannot link %s", from);
      if (!S_ISREG (st.st_mode))
        return mv_set_errno_error (error, EINVAL, "Cannot link %s", from);
      if (link (from, to) == 0)
        continue;
      errsv = errno;
      /* Another file system, or one without links: a copy. */
      if (errsv != EXDEV && errsv != EPERM && errsv != EMLINK)
        return mv_set_errno_error (error, errsv, "Cannot link %s", to);
      if (!mv_copy_file (from, to, error))
        return FALSE;
    }
  return TRUE;
}

guint64
mv_disk_usage (const char *path)
{
  struct stat st;
  g_autoptr (GDir) dir = NULL;
  const char *name;
  guint64 total;

  if (lstat (path, &st) < 0)
    return 0;
  total = (guint64) st.st_blocks * 512;
  if (!S_ISDIR (st.st_mode) || !(dir = g_dir_open (path, 0, NULL)))
    return total;
  while ((name = g_dir_read_name (dir)))
    {
      g_autofree char *child = g_build_filename (path, name, NULL);

      total += mv_disk_usage (child);
    }
  return total;
}
