#include "host-paths.h"
#include "core/errors.h"
#include "util/reserved-dirs.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

struct _MvHostPaths {
  GPtrArray *dirs;         /* char*, absolute, without a trailing '/' */
  char      *described;
  char      *key;          /* where they are configured: "[paths] allowed-directories" */
};

#define PATHS_KEY  "[paths] allowed-directories"


/* File systems whose files are the kernel's, not data: /proc/self/mem is
 * a regular file too. */
static const char *const kernel_trees[] = { "/proc", "/sys", "/dev", NULL };

#define invalid(error, ...) mv_error_set ((error), MV_ERROR_INVALID_ARGUMENT, __VA_ARGS__)

const char *
mv_host_path_below (const char *path, const char *dir)
{
  gsize len = strlen (dir);

  while (len > 1 && dir[len - 1] == '/')
    len--;
  if (strncmp (path, dir, len) != 0)
    return NULL;
  if (len == 1 && dir[0] == '/')
    len = 0;
  else if (path[len] != '\0' && path[len] != '/')
    return NULL;
  while (path[len] == '/')
    len++;
  return path + len;
}

/* data/microvmd.service.in: PrivateTmp=yes and ProtectHome=read-only. */
static const char *const private_tmp_trees[] = { "/tmp", "/var/tmp", NULL };
static const char *const protected_home_trees[] = { "/home", "/root", "/run/user", NULL };

static gboolean
in_one_of (const char *path, const char *const *trees)
{
  for (guint i = 0; trees[i]; i++)
    if (mv_host_path_below (path, trees[i]))
      return TRUE;
  return FALSE;
}

const char *
mv_host_path_sandbox_hint (const char *path, int err)
{
  if ((err == ENOENT || err == ENOTDIR) && in_one_of (path, private_tmp_trees))
    return "; note that microvmd.service runs the daemon with PrivateTmp=yes, which gives it "
           "a /tmp and /var/tmp of its own: keep images elsewhere, e.g. in /var/lib/microvmd/images";
  if ((err == EROFS || err == EACCES) && in_one_of (path, protected_home_trees))
    return "; note that microvmd.service runs the daemon with ProtectHome=read-only, which "
           "makes /home, /root and /run/user read-only to it: keep disks that are written "
           "elsewhere, e.g. in /var/lib/microvmd/images";
  return "";
}

static gboolean
check_dir (const char *key, const char *dir, GError **error)
{
  g_autofree char *resolved = NULL;
  g_autofree char *reserved = NULL;

  if (!g_path_is_absolute (dir))
    return invalid (error, "%s: %s is not an absolute path", key, dir);
  if (strspn (dir, "/") == strlen (dir))
    return invalid (error, "%s: / would let machines use every file of the host", key);
  resolved = realpath (dir, NULL);
  for (guint i = 0; kernel_trees[i]; i++)
    if (mv_path_is_beneath (dir, kernel_trees[i]) ||
        (resolved && mv_path_is_beneath (resolved, kernel_trees[i])))
      return invalid (error, "%s: %s lies in %s, whose files are the kernel's", key, dir,
                      kernel_trees[i]);
  if ((reserved = mv_reserved_dirs_within (resolved ? resolved : dir)) ||
      (reserved = mv_reserved_dirs_holding (resolved ? resolved : dir)))
    return invalid (error, "%s: %s overlaps %s, which microvmd keeps for its own records and "
                    "runtime files", key, dir, reserved);
  return TRUE;
}

MvHostPaths *
mv_host_paths_new (const char *const *dirs, GError **error)
{
  return mv_host_paths_new_for_key (PATHS_KEY, dirs, error);
}

MvHostPaths *
mv_host_paths_new_for_key (const char *key, const char *const *dirs, GError **error)
{
  g_autoptr (MvHostPaths) paths = g_new0 (MvHostPaths, 1);

  paths->key = g_strdup (key);
  paths->dirs = g_ptr_array_new_with_free_func (g_free);
  for (guint i = 0; dirs && dirs[i]; i++)
    {
      g_autofree char *dir = g_strstrip (g_strdup (dirs[i]));
      gsize len = strlen (dir);

      if (len == 0)
        continue;
      if (!check_dir (key, dir, error))
        return NULL;
      while (len > 1 && dir[len - 1] == '/')
        dir[--len] = '\0';
      g_ptr_array_add (paths->dirs, g_steal_pointer (&dir));
    }
  g_ptr_array_add (paths->dirs, NULL);
  paths->described = paths->dirs->len > 1 ? g_strjoinv (", ", (char **) paths->dirs->pdata)
                                          : g_strdup ("none");
  g_ptr_array_remove_index (paths->dirs, paths->dirs->len - 1);
  return g_steal_pointer (&paths);
}

MvHostPaths *
mv_host_paths_new_from_config (GKeyFile *config, GError **error)
{
  g_auto (GStrv) dirs = NULL;
  g_autoptr (GError) local = NULL;

  if (config && g_key_file_has_key (config, "paths", "allowed-directories", NULL))
    {
      dirs = g_key_file_get_string_list (config, "paths", "allowed-directories", NULL, &local);
      if (!dirs)
        {
          invalid (error, "[paths] allowed-directories: %s", local->message);
          return NULL;
        }
    }
  else
    dirs = g_strsplit (MV_DEFAULT_ALLOWED_DIRECTORIES, ";", -1);
  return mv_host_paths_new ((const char *const *) dirs, error);
}

void
mv_host_paths_free (MvHostPaths *paths)
{
  if (!paths)
    return;
  g_ptr_array_unref (paths->dirs);
  g_free (paths->described);
  g_free (paths->key);
  g_free (paths);
}

const char *
mv_host_paths_describe (MvHostPaths *paths)
{
  return paths->described;
}

static const char *
kind_of (mode_t mode)
{
  switch (mode & S_IFMT)
    {
    case S_IFBLK:
      return "a block device";
    case S_IFCHR:
      return "a character device";
    case S_IFDIR:
      return "a directory";
    case S_IFIFO:
      return "a FIFO";
    case S_IFSOCK:
      return "a socket";
    default:
      return "not a regular file";
    }
}

/* The file's path as the kernel resolved it, for the reserved check. */
static char *
path_of_fd (int fd)
{
  g_autofree char *link = g_strdup_printf ("/proc/self/fd/%d", fd);

  return g_file_read_link (link, NULL);
}

/* Checks what @fd, opened as @path for @field, turned out to be: a
 * regular file, or a directory if @want_dir. */
static gboolean
check_opened (int fd, const char *field, const char *path, gboolean want_dir, GError **error)
{
  g_autofree char *real = path_of_fd (fd);
  g_autofree char *reserved = NULL;
  struct statfs sfs;
  struct stat st;

  if (fstat (fd, &st) < 0 || fstatfs (fd, &sfs) < 0)
    {
      int saved = errno;
      return invalid (error, "%s: %s cannot be examined: %s", field, path, g_strerror (saved));
    }
  if (want_dir && !S_ISDIR (st.st_mode))
    return invalid (error, "%s: %s is %s; only a directory can be shared", field, path,
                    S_ISREG (st.st_mode) ? "a regular file" : kind_of (st.st_mode));
  if (!want_dir && !S_ISREG (st.st_mode))
    return invalid (error, "%s: %s is %s; only regular files can be used", field, path,
                    kind_of (st.st_mode));
  if (sfs.f_type == PROC_SUPER_MAGIC || sfs.f_type == SYSFS_MAGIC)
    return invalid (error, "%s: %s is a file of the kernel's (/proc or /sys)", field, path);
  if (real && (reserved = mv_reserved_dirs_holding (real)))
    return invalid (error, "%s: %s lies in %s, which microvmd keeps for its own records and "
                    "runtime files", field, path, reserved);
  if (want_dir && real && (reserved = mv_reserved_dirs_within (real)))
    return invalid (error, "%s: %s holds %s, which microvmd keeps for its own records and "
                    "runtime files", field, path, reserved);
  return TRUE;
}

static int
open_beneath (const char *dir, const char *below, int flags, int *err)
{
  /* openat2 refuses with O_PATH any flag but O_CLOEXEC. */
  struct open_how how = {
    .flags = (guint64) (flags | O_CLOEXEC | ((flags & O_PATH) ? 0 : O_NOCTTY | O_NONBLOCK)),
    .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS,
  };
  int dir_fd = open (dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
  int fd;

  if (dir_fd < 0)
    {
      *err = errno;
      return -1;
    }
  fd = (int) syscall (SYS_openat2, dir_fd, *below ? below : ".", &how, sizeof how);
  *err = fd < 0 ? errno : 0;
  close (dir_fd);
  /* O_NONBLOCK kept a FIFO from blocking the open; reads block as usual. */
  if (fd >= 0 && !(flags & O_PATH))
    fcntl (fd, F_SETFL, fcntl (fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

static int
open_checked (MvHostPaths *paths, const char *field, const char *path, int flags,
              gboolean want_dir, GError **error)
{
  int err = ENOENT;
  const char *escaping = NULL;

  if (!g_path_is_absolute (path))
    {
      invalid (error, "%s: %s is not an absolute path", field, path);
      return -1;
    }
  for (guint i = 0; i < paths->dirs->len; i++)
    {
      const char *dir = paths->dirs->pdata[i];
      const char *below = mv_host_path_below (path, dir);
      int fd;

      if (!below)
        continue;
      fd = open_beneath (dir, below, flags, &err);
      if (fd >= 0)
        {
          if (!check_opened (fd, field, path, want_dir, error))
            {
              close (fd);
              return -1;
            }
          return fd;
        }
      if (err == EXDEV || err == ELOOP)
        escaping = dir;
      else if (err != ENOENT && err != ENOTDIR)
        break;
    }
  if (escaping)
    invalid (error, "%s: %s leads out of %s (through a symbolic link, '..' or a /proc link); "
             "only files beneath an allowed directory can be used", field, path, escaping);
  else if (err == ENOENT || err == ENOTDIR)
    {
      gboolean under = FALSE;

      for (guint i = 0; i < paths->dirs->len && !under; i++)
        under = mv_host_path_below (path, paths->dirs->pdata[i]) != NULL;
      if (under)
        invalid (error, "%s: %s does not exist%s", field, path,
                 mv_host_path_sandbox_hint (path, err));
      else
        invalid (error, "%s: %s is not under an allowed directory (%s: %s)", field, path,
                 paths->key, paths->described);
    }
  else
    invalid (error, "%s: %s cannot be opened: %s%s", field, path, g_strerror (err),
             mv_host_path_sandbox_hint (path, err));
  return -1;
}

int
mv_host_paths_open (MvHostPaths *paths, const char *field, const char *path, int flags,
                    GError **error)
{
  return open_checked (paths, field, path, flags, FALSE, error);
}

int
mv_host_paths_open_dir (MvHostPaths *paths, const char *field, const char *path, GError **error)
{
  return open_checked (paths, field, path, O_PATH, TRUE, error);
}

gboolean
mv_host_paths_allow_dir_of (MvHostPaths *paths, const char *file, GError **error)
{
  g_autofree char *dir = g_path_get_dirname (file);

  for (guint i = 0; i < paths->dirs->len; i++)
    if (mv_host_path_below (dir, paths->dirs->pdata[i]))
      return TRUE;
  if (!check_dir (paths->key, dir, error))
    return FALSE;
  g_ptr_array_add (paths->dirs, g_steal_pointer (&dir));
  g_free (paths->described);
  g_ptr_array_add (paths->dirs, NULL);
  paths->described = g_strjoinv (", ", (char **) paths->dirs->pdata);
  g_ptr_array_remove_index (paths->dirs, paths->dirs->len - 1);
  return TRUE;
}

gboolean
mv_host_paths_check (MvHostPaths *paths, const char *field, const char *path, GError **error)
{
  int fd = mv_host_paths_open (paths, field, path, O_PATH, error);

  if (fd < 0)
    return FALSE;
  close (fd);
  return TRUE;
}
