#include "image-unpack.h"
#include "archive-lib.h"
#include "core/errors.h"
#include "util/files.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define WHITEOUT_PREFIX  ".wh."
#define OPAQUE_WHITEOUT  ".wh..wh..opq"
#define ENTRY_OVERHEAD   4096

typedef struct archive MvArchive;
static void mv_archive_free (MvArchive *a) { mv_archive.read_free (a); }
G_DEFINE_AUTOPTR_CLEANUP_FUNC (MvArchive, mv_archive_free)

static int
open_in_root (int root_fd, const char *path, int flags)
{
  struct open_how how = {
    .flags = flags | O_CLOEXEC,
    .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
  };

  return syscall (SYS_openat2, root_fd, path, &how, sizeof how);
}

/* The entry's path made relative and checked: "./a/b/" -> "a/b"; "" for
 * the root itself ("", ".", "/"); NULL (and @error) for an absolute path or one with "..". */
static char *
clean_path (const char *name, GError **error)
{
  g_auto (GStrv) parts = NULL;
  g_autoptr (GPtrArray) kept = g_ptr_array_new ();

  /* "/" alone is the root's own entry (umoci writes one); any other
   * absolute path is refused rather than guessed at. */
  if (name != NULL && name[0] == '/' && name[strspn (name, "/")] == '\0')
    return g_strdup ("");
  if (name == NULL || name[0] == '/')
    return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT, "layer: the path \"%s\" is absolute",
                         name ? name : "(none)"), NULL;
  parts = g_strsplit (name, "/", -1);
  for (char **p = parts; *p; p++)
    {
      if (**p == '\0' || g_str_equal (*p, "."))
        continue;
      if (g_str_equal (*p, ".."))
        return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT,
                             "layer: the path \"%s\" climbs out with \"..\"", name), NULL;
      g_ptr_array_add (kept, *p);
    }
  g_ptr_array_add (kept, NULL);
  return g_strjoinv ("/", (char **) kept->pdata);
}

/* Opens the directory @dir (relative, inside the root), creating it and
 * its parents (mode 0755, root-owned) as needed. */
static int
open_dir (int root_fd, const char *dir, GError **error)
{
  g_auto (GStrv) parts = g_strsplit (dir, "/", -1);
  int fd = open_in_root (root_fd, ".", O_PATH | O_DIRECTORY);

  for (char **p = parts; fd >= 0 && *p; p++)
    {
      int next;

      if (**p == '\0')
        continue;
      next = open_in_root (fd, *p, O_PATH | O_DIRECTORY);
      if (next < 0 && errno == ENOENT && mkdirat (fd, *p, 0755) == 0)
        next = open_in_root (fd, *p, O_PATH | O_DIRECTORY);
      close (fd);
      fd = next;
    }
  if (fd < 0)
    mv_set_errno_error (error, errno, "layer: cannot open the directory \"%s\"", dir);
  return fd;
}

static void
split (const char *path, char **dir, const char **base)
{
  const char *slash = strrchr (path, '/');

  *dir = slash ? g_strndup (path, slash - path) : g_strdup ("");
  *base = slash ? slash + 1 : path;
}

/* Removes everything in the directory @fd (the directory stays). */
static gboolean
empty_dir (int fd, const char *path, GError **error)
{
  int dup_fd = openat (fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  g_autoptr (GPtrArray) names = g_ptr_array_new_with_free_func (g_free);
  struct dirent *entry;
  DIR *d;

  if (dup_fd < 0 || (d = fdopendir (dup_fd)) == NULL)
    {
      int errsv = errno;

      if (dup_fd >= 0)
        close (dup_fd);
      return mv_set_errno_error (error, errsv, "layer: cannot read \"%s\"", path);
    }
  while ((entry = readdir (d)) != NULL)
    if (!g_str_equal (entry->d_name, ".") && !g_str_equal (entry->d_name, ".."))
      g_ptr_array_add (names, g_strdup (entry->d_name));
  for (guint i = 0; i < names->len; i++)
    if (!mv_remove_tree_at (dirfd (d), names->pdata[i], names->pdata[i], error))
      {
        closedir (d);
        return FALSE;
      }
  closedir (d);
  return TRUE;
}

static gboolean
apply_whiteout (int root_fd, const char *path, GError **error)
{
  g_autofree char *dir = NULL;
  const char *base;
  int fd;
  gboolean ok;

  split (path, &dir, &base);
  fd = open_in_root (root_fd, *dir ? dir : ".", O_RDONLY | O_DIRECTORY);
  if (fd < 0)
    return errno == ENOENT || errno == ENOTDIR
           ? TRUE : mv_set_errno_error (error, errno, "layer: cannot open \"%s\"", dir);

  if (g_str_equal (base, OPAQUE_WHITEOUT))
    ok = empty_dir (fd, dir, error);
  else
    ok = mv_remove_tree_at (fd, base + strlen (WHITEOUT_PREFIX), path, error);
  close (fd);
  return ok;
}

static gboolean
write_data (MvArchive *a, int fd, const char *path, GError **error)
{
  const void *buf;
  size_t size;
  la_int64_t offset;
  int r;

  while ((r = mv_archive.read_data_block (a, &buf, &size, &offset)) == ARCHIVE_OK)
    {
      const char *p = buf;

      if (lseek (fd, offset, SEEK_SET) < 0)
        return mv_set_errno_error (error, errno, "layer: cannot seek in \"%s\"", path);
      while (size > 0)
        {
          ssize_t n = write (fd, p, size);

          if (n < 0 && errno == EINTR)
            continue;
          if (n < 0)
            return mv_set_errno_error (error, errno, "layer: cannot write \"%s\"", path);
          p += n;
          size -= n;
        }
    }
  if (r != ARCHIVE_EOF)
    return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT, "layer: reading \"%s\": %s",
                         path, mv_archive.error_string (a));
  return TRUE;
}

/* Sets owner, mode and time of @base in @dir_fd, without following it. */
static gboolean
set_meta (int dir_fd, const char *base, struct archive_entry *entry, gboolean is_link,
          const char *path, GError **error)
{
  struct timespec times[2] = {
    { .tv_sec = mv_archive.entry_mtime (entry), .tv_nsec = 0 },
    { .tv_sec = mv_archive.entry_mtime (entry), .tv_nsec = 0 },
  };

  if (fchownat (dir_fd, base, mv_archive.entry_uid (entry), mv_archive.entry_gid (entry),
                AT_SYMLINK_NOFOLLOW) < 0)
    return mv_set_errno_error (error, errno, "layer: cannot change the owner of \"%s\"", path);
  /* After chown, which clears set-user-ID bits. */
  if (!is_link && fchmodat (dir_fd, base, mv_archive.entry_perm (entry) & 07777, 0) < 0)
    return mv_set_errno_error (error, errno, "layer: cannot change the mode of \"%s\"", path);
  if (utimensat (dir_fd, base, times, AT_SYMLINK_NOFOLLOW) < 0)
    return mv_set_errno_error (error, errno, "layer: cannot set the time of \"%s\"", path);
  return TRUE;
}

/* Makes room for a new @base: anything there goes, except a directory
 * that a directory entry would replace (its contents stay, as in an
 * overlay). */
static gboolean
clear_target (int dir_fd, const char *base, gboolean keep_dir, const char *path, GError **error)
{
  struct stat st;

  if (fstatat (dir_fd, base, &st, AT_SYMLINK_NOFOLLOW) < 0)
    return errno == ENOENT ? TRUE : mv_set_errno_error (error, errno, "layer: cannot stat \"%s\"", path);
  if (keep_dir && S_ISDIR (st.st_mode))
    return TRUE;
  return mv_remove_tree_at (dir_fd, base, path, error);
}

static gboolean
write_entry (int root_fd, MvArchive *a, struct archive_entry *entry, const char *path, GError **error)
{
  mode_t type = mv_archive.entry_filetype (entry);
  g_autofree char *dir = NULL;
  const char *base;
  int dir_fd;
  gboolean ok = TRUE;

  if (*path == '\0')
    return TRUE;  /* the root's own entry: its owner and mode are set by mkfs */
  if (type == AE_IFCHR || type == AE_IFBLK || type == AE_IFIFO || type == AE_IFSOCK)
    return TRUE;

  split (path, &dir, &base);
  dir_fd = open_dir (root_fd, dir, error);
  if (dir_fd < 0)
    return FALSE;
  {
    /* An O_PATH fd cannot be used with the *at calls that write, so the
     * directory is reopened for real once resolved inside the root. */
    int real = openat (dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

    close (dir_fd);
    if (real < 0)
      return mv_set_errno_error (error, errno, "layer: cannot open \"%s\"", dir);
    dir_fd = real;
  }

  if (mv_archive.entry_hardlink (entry) != NULL)
    {
      g_autofree char *target = clean_path (mv_archive.entry_hardlink (entry), error);
      int target_fd = -1;
      g_autofree char *proc = NULL;

      ok = target != NULL && clear_target (dir_fd, base, FALSE, path, error);
      if (ok)
        {
          target_fd = open_in_root (root_fd, target, O_PATH | O_NOFOLLOW);
          if (target_fd < 0)
            ok = mv_set_errno_error (error, errno, "layer: the hard link \"%s\" names \"%s\"", path, target);
        }
      if (ok)
        {
          proc = g_strdup_printf ("/proc/self/fd/%d", target_fd);
          if (linkat (AT_FDCWD, proc, dir_fd, base, AT_SYMLINK_FOLLOW) < 0)
            ok = mv_set_errno_error (error, errno, "layer: cannot link \"%s\"", path);
        }
      if (target_fd >= 0)
        close (target_fd);
    }
  else if (type == AE_IFDIR)
    {
      ok = clear_target (dir_fd, base, TRUE, path, error);
      if (ok && mkdirat (dir_fd, base, 0700) < 0 && errno != EEXIST)
        ok = mv_set_errno_error (error, errno, "layer: cannot create \"%s\"", path);
      ok = ok && set_meta (dir_fd, base, entry, FALSE, path, error);
    }
  else if (type == AE_IFLNK)
    {
      const char *target = mv_archive.entry_symlink (entry);

      ok = clear_target (dir_fd, base, FALSE, path, error);
      if (ok && symlinkat (target ? target : "", dir_fd, base) < 0)
        ok = mv_set_errno_error (error, errno, "layer: cannot create the link \"%s\"", path);
      ok = ok && set_meta (dir_fd, base, entry, TRUE, path, error);
    }
  else if (type == AE_IFREG)
    {
      int fd = -1;

      ok = clear_target (dir_fd, base, FALSE, path, error);
      if (ok)
        {
          fd = openat (dir_fd, base, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
          if (fd < 0)
            ok = mv_set_errno_error (error, errno, "layer: cannot create \"%s\"", path);
        }
      ok = ok && write_data (a, fd, path, error);
      if (ok && ftruncate (fd, mv_archive.entry_size (entry)) < 0)
        ok = mv_set_errno_error (error, errno, "layer: cannot size \"%s\"", path);
      if (fd >= 0)
        close (fd);
      ok = ok && set_meta (dir_fd, base, entry, FALSE, path, error);
    }
  close (dir_fd);
  return ok;
}

static MvArchive *
open_layer (const char *layer_path, GError **error)
{
  g_autoptr (MvArchive) a = mv_archive.read_new ();

  mv_archive.read_support_filter_gzip (a);
  mv_archive.read_support_filter_zstd (a);
  mv_archive.read_support_format_tar (a);
  if (mv_archive.read_open_filename (a, layer_path, 64 * 1024) != ARCHIVE_OK)
    return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT, "layer %s: %s", layer_path,
                         mv_archive.error_string (a)), NULL;
  return g_steal_pointer (&a);
}

/* One pass over the layer: whiteouts only (@whiteouts) or everything else.
 * Whiteouts go first because they hide what the layers below hold, not
 * what this one adds, wherever they stand in its tar. */
static gboolean
pass (int root_fd, const char *layer_path, gboolean whiteouts, MvUnpackBudget *budget, GError **error)
{
  g_autoptr (MvArchive) a = open_layer (layer_path, error);
  struct archive_entry *entry;
  int r;

  if (a == NULL)
    return FALSE;
  while ((r = mv_archive.read_next_header (a, &entry)) == ARCHIVE_OK)
    {
      g_autofree char *path = clean_path (mv_archive.entry_pathname (entry), error);
      const char *base;
      gboolean is_whiteout;

      if (path == NULL)
        return FALSE;
      base = strrchr (path, '/') ? strrchr (path, '/') + 1 : path;
      is_whiteout = g_str_has_prefix (base, WHITEOUT_PREFIX);
      if (is_whiteout != whiteouts)
        continue;
      if (is_whiteout)
        {
          if (g_str_equal (base, WHITEOUT_PREFIX))
            return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT, "layer: the whiteout \"%s\" names nothing", path);
          if (!apply_whiteout (root_fd, path, error))
            return FALSE;
          continue;
        }

      budget->bytes += ENTRY_OVERHEAD + (mv_archive.entry_size_is_set (entry) ? mv_archive.entry_size (entry) : 0);
      if (budget->bytes > budget->max_bytes)
        return mv_error_set (error, MV_ERROR_RESOURCE_EXHAUSTED,
                             "image: it unpacks to more than the limit of %" G_GUINT64_FORMAT " bytes",
                             budget->max_bytes);
      if (!write_entry (root_fd, a, entry, path, error))
        return FALSE;
      budget->entries++;
    }
  if (r != ARCHIVE_EOF)
    return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT, "layer %s: %s", layer_path, mv_archive.error_string (a));
  return TRUE;
}

gboolean
mv_unpack_layer (int root_fd, const char *layer_path, MvUnpackBudget *budget, GError **error)
{
  return mv_archive_load (error) &&
         pass (root_fd, layer_path, TRUE, budget, error) &&
         pass (root_fd, layer_path, FALSE, budget, error);
}
