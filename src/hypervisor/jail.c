#include "jail.h"
#include "acl.h"
#include "grants.h"
#include "process.h"
#include "core/errors.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <net/if.h>
#include <sched.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

/* The root's entries that lead into /usr on a merged-/usr system, or are
 * directories of binaries and libraries on an older one. */
static const char *const root_entries[] = { "bin", "sbin", "lib", "lib32", "lib64", "libx32",
                                            NULL };

/* Device nodes every VMM gets, readable and writable by anyone, as on the
 * host. */
static const struct {
  const char *name;
  unsigned    major, minor;
} common_devices[] = {
  { "null", 1, 3 },
  { "zero", 1, 5 },
  { "full", 1, 7 },
  { "random", 1, 8 },
  { "urandom", 1, 9 },
};

typedef struct {
  char     *path;       /* relative to the new root */
  int       tree;       /* a detached mount, its attributes set */
  gboolean  is_file;
} Mount;

typedef struct {
  char *path;
  char *target;
} Link;

typedef struct {
  char    *path;        /* relative to the new root */
  mode_t   mode;
  dev_t    dev;
  gboolean owned;       /* the VMM's own: 0600 and its UID's */
} Device;

struct _MvJail {
  MvSandbox  *sandbox;
  char       *runtime_dir;
  uid_t       uid;
  int         lease;
  int         runtime_fd;
  gboolean    prepared;
  gboolean    handed_over;

  GPtrArray  *dirs;       /* char*, relative, parents before children */
  GHashTable *seen;       /* relative paths already in dirs or mounts */
  GArray     *mounts;     /* Mount */
  GArray     *links;      /* Link */
  GArray     *devices;    /* Device */
  GArray     *passed;     /* int: descriptors the VMM gets */
  GArray     *granted;    /* int: files with an ACL entry of the VMM's UID */
  GArray     *taps;       /* MvTapName: TAP devices the VMM's UID owns */
  GArray     *parent_fds; /* int: what the VMM's parent keeps */
  GArray     *owned;      /* int: every descriptor to close at free */
  GHashTable *userns;     /* "uid:gid" of a file owner -> user namespace fd */
};

static gboolean
set_errno (GError **error, int errsv, const char *format, ...) G_GNUC_PRINTF (3, 4);

static gboolean
set_errno (GError **error, int errsv, const char *format, ...)
{
  g_autofree char *what = NULL;
  va_list args;

  va_start (args, format);
  what = g_strdup_vprintf (format, args);
  va_end (args);
  g_set_error (error, MV_ERROR, MV_ERROR_FAILED, "Could not wall in the VMM: %s: %s", what,
               g_strerror (errsv));
  return FALSE;
}

static int
keep_fd (MvJail *jail, int fd)
{
  if (fd >= 0)
    g_array_append_val (jail->owned, fd);
  return fd;
}

static void
mount_clear (gpointer data)
{
  g_free (((Mount *) data)->path);
}

static void
link_clear (gpointer data)
{
  Link *link = data;

  g_free (link->path);
  g_free (link->target);
}

static void
device_clear (gpointer data)
{
  g_free (((Device *) data)->path);
}

/* What the jail gave, for whoever takes it back; @runtime_dir: whether
 * the runtime directory is given back to root too. */
static MvGrants
grants_of (const MvJail *jail, gboolean runtime_dir)
{
  return (MvGrants) {
    .uid = jail->uid,
    .runtime_fd = runtime_dir ? jail->runtime_fd : -1,
    .granted = (const int *) (gpointer) jail->granted->data,
    .n_granted = jail->granted->len,
    .taps = (const MvTapName *) (gpointer) jail->taps->data,
    .n_taps = jail->taps->len,
  };
}

MvJail *
mv_jail_new (MvSandbox *sandbox, const char *machine_id, const char *runtime_dir,
             GError **error)
{
  g_autoptr (MvJail) jail = g_new0 (MvJail, 1);

  jail->sandbox = mv_sandbox_ref (sandbox);
  jail->runtime_dir = g_canonicalize_filename (runtime_dir, NULL);
  jail->lease = -1;
  jail->runtime_fd = -1;
  jail->dirs = g_ptr_array_new_with_free_func (g_free);
  jail->seen = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  jail->mounts = g_array_new (FALSE, TRUE, sizeof (Mount));
  g_array_set_clear_func (jail->mounts, mount_clear);
  jail->links = g_array_new (FALSE, TRUE, sizeof (Link));
  g_array_set_clear_func (jail->links, link_clear);
  jail->devices = g_array_new (FALSE, TRUE, sizeof (Device));
  g_array_set_clear_func (jail->devices, device_clear);
  jail->passed = g_array_new (FALSE, FALSE, sizeof (int));
  jail->granted = g_array_new (FALSE, FALSE, sizeof (int));
  jail->taps = g_array_new (FALSE, TRUE, sizeof (MvTapName));
  jail->parent_fds = g_array_new (FALSE, FALSE, sizeof (int));
  jail->owned = g_array_new (FALSE, FALSE, sizeof (int));
  jail->userns = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);

  jail->runtime_fd = keep_fd (jail, open (jail->runtime_dir,
                                          O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (jail->runtime_fd < 0)
    {
      set_errno (error, errno, "%s", jail->runtime_dir);
      return NULL;
    }
  jail->lease = keep_fd (jail, mv_sandbox_lease_uid (sandbox, machine_id, &jail->uid, error));
  if (jail->lease < 0)
    return NULL;
  g_array_append_val (jail->parent_fds, jail->lease);
  g_array_append_val (jail->parent_fds, jail->runtime_fd);
  return g_steal_pointer (&jail);
}

void
mv_jail_free (MvJail *jail)
{
  if (!jail)
    return;
  if (!jail->handed_over)
    {
      MvGrants grants = grants_of (jail, FALSE);

      /* No VMM's parent took the grants over: take them back now. */
      mv_grants_release (&grants);
      if (jail->prepared)
        mv_jail_reclaim_runtime_dir (jail->runtime_dir);
    }
  for (guint i = 0; i < jail->owned->len; i++)
    close (g_array_index (jail->owned, int, i));
  g_array_unref (jail->owned);
  g_array_unref (jail->parent_fds);
  g_array_unref (jail->granted);
  g_array_unref (jail->taps);
  g_array_unref (jail->passed);
  g_array_unref (jail->devices);
  g_array_unref (jail->links);
  g_array_unref (jail->mounts);
  g_hash_table_unref (jail->seen);
  g_hash_table_unref (jail->userns);
  g_ptr_array_unref (jail->dirs);
  g_free (jail->runtime_dir);
  mv_sandbox_unref (jail->sandbox);
  g_free (jail);
}

uid_t
mv_jail_uid (MvJail *jail)
{
  return jail->uid;
}

gid_t
mv_jail_gid (MvJail *jail)
{
  /* One number for both: the group is the VMM's alone too. */
  return (gid_t) jail->uid;
}

/* ---- the tree ---- */

/* @path relative to the new root ("usr/bin"), from an absolute one. */
static char *
relative (const char *path)
{
  g_autofree char *canonical = g_canonicalize_filename (path, "/");
  const char *p = canonical;

  while (*p == '/')
    p++;
  return g_strdup (*p ? p : ".");
}

/* Adds every directory leading to @rel (not @rel itself). */
static void
add_parents (MvJail *jail, const char *rel)
{
  g_auto (GStrv) parts = g_strsplit (rel, "/", -1);
  GString *prefix = g_string_new (NULL);

  for (guint i = 0; parts[i] && parts[i + 1]; i++)
    {
      if (prefix->len)
        g_string_append_c (prefix, '/');
      g_string_append (prefix, parts[i]);
      if (!g_hash_table_contains (jail->seen, prefix->str))
        {
          g_hash_table_add (jail->seen, g_strdup (prefix->str));
          g_ptr_array_add (jail->dirs, g_strdup (prefix->str));
        }
    }
  g_string_free (prefix, TRUE);
}

static void
add_dir (MvJail *jail, const char *rel)
{
  g_autofree char *child = g_build_filename (rel, "x", NULL);

  add_parents (jail, child);
}

/* Shows @tree (taken) at @abs_path; a second one at the same place is
 * dropped: the first already shows it. */
static void
add_mount (MvJail *jail, const char *abs_path, int tree, gboolean is_file)
{
  g_autofree char *rel = relative (abs_path);
  Mount m = { NULL, tree, is_file };

  keep_fd (jail, tree);
  if (g_hash_table_contains (jail->seen, rel))
    return;
  add_parents (jail, rel);
  g_hash_table_add (jail->seen, g_strdup (rel));
  m.path = g_steal_pointer (&rel);
  g_array_append_val (jail->mounts, m);
}

/* A user namespace that maps @owner_uid and @owner_gid to the VMM's IDs,
 * for an idmapped mount. Made by a child that creates it and waits while
 * its maps are written. */
static int
idmap_userns (MvJail *jail, uid_t owner_uid, gid_t owner_gid, GError **error)
{
  g_autofree char *key = g_strdup_printf ("%u:%u", (unsigned) owner_uid, (unsigned) owner_gid);
  int ready[2] = { -1, -1 }, hold[2] = { -1, -1 };
  gpointer found;
  int ns = -1, saved = 0, status;
  char c;
  pid_t pid;

  if (g_hash_table_lookup_extended (jail->userns, key, NULL, &found))
    return GPOINTER_TO_INT (found);
  if (pipe2 (ready, O_CLOEXEC) < 0 || pipe2 (hold, O_CLOEXEC) < 0)
    {
      saved = errno;
      for (int i = 0; i < 2; i++)
        if (ready[i] >= 0)
          close (ready[i]);
      set_errno (error, saved, "a pipe");
      return -1;
    }
  pid = fork ();
  if (pid == 0)
    {
      close (ready[0]);
      close (hold[1]);
      if (unshare (CLONE_NEWUSER) < 0)
        _exit (1);
      (void) !write (ready[1], "u", 1);
      (void) !read (hold[0], &c, 1);
      _exit (0);
    }
  close (ready[1]);
  close (hold[0]);
  if (pid < 0)
    saved = errno;
  else if (read (ready[0], &c, 1) != 1)
    saved = EPERM;
  else
    {
      g_autofree char *uid_map = g_strdup_printf ("/proc/%d/uid_map", pid);
      g_autofree char *gid_map = g_strdup_printf ("/proc/%d/gid_map", pid);
      g_autofree char *ns_path = g_strdup_printf ("/proc/%d/ns/user", pid);
      g_autofree char *uid_line = g_strdup_printf ("%u %u 1\n", (unsigned) owner_uid,
                                                   (unsigned) jail->uid);
      g_autofree char *gid_line = g_strdup_printf ("%u %u 1\n", (unsigned) owner_gid,
                                                   (unsigned) mv_jail_gid (jail));
      const char *paths[] = { uid_map, gid_map };
      const char *lines[] = { uid_line, gid_line };

      for (guint i = 0; i < 2 && !saved; i++)
        {
          int fd = open (paths[i], O_WRONLY | O_CLOEXEC);
          if (fd < 0 || write (fd, lines[i], strlen (lines[i])) < 0)
            saved = errno;
          if (fd >= 0)
            close (fd);
        }
      if (!saved && (ns = open (ns_path, O_RDONLY | O_CLOEXEC)) < 0)
        saved = errno;
    }
  close (ready[0]);
  close (hold[1]);
  if (pid > 0)
    while (waitpid (pid, &status, 0) < 0 && errno == EINTR)
      ;
  if (saved)
    {
      set_errno (error, saved, "a user namespace to map the owner of its files");
      return -1;
    }
  keep_fd (jail, ns);
  g_hash_table_insert (jail->userns, g_steal_pointer (&key), GINT_TO_POINTER (ns));
  return ns;
}

/* A detached copy of what @fd is, with @attr set; mapped to the VMM's
 * owner if it could not read it otherwise and @idmap allows. */
static int
tree_of (MvJail *jail, int fd, guint64 attr, gboolean idmap, const char *what, GError **error)
{
  struct mount_attr ma = { .attr_set = attr, .propagation = MS_PRIVATE };
  struct stat st;
  int tree = open_tree (fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);

  if (tree < 0)
    {
      set_errno (error, errno, "a mount of %s", what);
      return -1;
    }
  if (idmap && fstat (fd, &st) == 0 && st.st_uid != jail->uid &&
      !(st.st_mode & (S_ISDIR (st.st_mode) ? S_IXOTH : S_IROTH)))
    {
      int ns = idmap_userns (jail, st.st_uid, st.st_gid, error);

      if (ns < 0)
        {
          close (tree);
          return -1;
        }
      ma.attr_set |= MOUNT_ATTR_IDMAP;
      ma.userns_fd = (guint64) ns;
    }
  if (mount_setattr (tree, "", AT_EMPTY_PATH, &ma, sizeof ma) < 0)
    {
      int saved = errno;

      /* A file system without idmapped mounts: the VMM may still be able
       * to read the file by its mode; if not, it says so. */
      if ((ma.attr_set & MOUNT_ATTR_IDMAP) && (saved == EINVAL || saved == EPERM))
        {
          g_debug ("%s cannot be idmapped (%s); shown as it is", what, g_strerror (saved));
          ma.attr_set &= ~MOUNT_ATTR_IDMAP;
          ma.userns_fd = 0;
          if (mount_setattr (tree, "", AT_EMPTY_PATH, &ma, sizeof ma) == 0)
            return tree;
          saved = errno;
        }
      close (tree);
      set_errno (error, saved, "the mount of %s", what);
      return -1;
    }
  return tree;
}

#define RO_ATTRS  (MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC)
#define RW_ATTRS  (MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC)

static int
open_file (MvJail *jail, const char *field, const char *path, gboolean writable, gboolean own,
           GError **error)
{
  int flags = (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC | O_NOCTTY;
  int fd;

  if (!own)
    return keep_fd (jail, mv_host_paths_open (mv_sandbox_host_paths (jail->sandbox), field, path,
                                              flags & O_ACCMODE, error));
  /* The daemon's own file (an image, an overlay disk): its path is the
   * daemon's choice, not a caller's, and lies where no link is. */
  fd = open (path, flags | O_NOFOLLOW);
  if (fd < 0)
    {
      set_errno (error, errno, "%s: %s", field, path);
      return -1;
    }
  return keep_fd (jail, fd);
}

int
mv_jail_open_host_file (MvJail *jail, const char *field, const char *path, gboolean writable,
                        GError **error)
{
  return open_file (jail, field, path, writable, FALSE, error);
}

int
mv_jail_open_own_file (MvJail *jail, const char *field, const char *path, gboolean writable,
                       GError **error)
{
  return open_file (jail, field, path, writable, TRUE, error);
}

/* Shows @path at @at in the VMM's root. */
static gboolean
show_file (MvJail *jail, const char *field, const char *path, const char *at, gboolean writable,
           gboolean own, GError **error)
{
  g_autofree char *rel = relative (at);
  int fd, tree, r;

  /* Another file shown there first would be what the VMM opens. */
  if (g_strcmp0 (at, path) != 0 && g_hash_table_contains (jail->seen, rel))
    return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT,
                         "%s: %s cannot be shown to the VMM at %s, where it is shown something "
                         "else", field, path, at);
  fd = open_file (jail, field, path, writable, own, error);
  if (fd < 0)
    return FALSE;
  if (writable && (r = mv_acl_grant (fd, jail->uid, MV_ACL_READ | MV_ACL_WRITE)) < 0)
    {
      g_set_error (error, MV_ERROR, MV_ERROR_FAILED,
                   "%s: %s cannot be made writable for the VMM's user %u: %s%s", field, path,
                   (unsigned) jail->uid, g_strerror (-r),
                   r == -EOPNOTSUPP ? " (its file system has no POSIX ACLs)" : "");
      return FALSE;
    }
  if (writable)
    {
      g_array_append_val (jail->granted, fd);
      g_array_append_val (jail->parent_fds, fd);
    }
  tree = tree_of (jail, fd, writable ? RW_ATTRS : RO_ATTRS, !writable, path, error);
  if (tree < 0)
    return FALSE;
  add_mount (jail, at, tree, TRUE);
  return TRUE;
}

gboolean
mv_jail_show_host_file (MvJail *jail, const char *field, const char *path, gboolean writable,
                        GError **error)
{
  return show_file (jail, field, path, path, writable, FALSE, error);
}

gboolean
mv_jail_show_own_file (MvJail *jail, const char *field, const char *path, gboolean writable,
                       GError **error)
{
  return show_file (jail, field, path, path, writable, TRUE, error);
}

gboolean
mv_jail_show_file_at (MvJail *jail, const char *field, const char *path, gboolean own,
                      const char *at, gboolean writable, GError **error)
{
  if (!g_path_is_absolute (at))
    return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT,
                         "%s: %s cannot be shown to the VMM at %s, which is not an absolute path",
                         field, path, at);
  return show_file (jail, field, path, at, writable, own, error);
}

gboolean
mv_jail_show_dir (MvJail *jail, const char *path, GError **error)
{
  int fd = keep_fd (jail, open (path, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  int tree;

  if (fd < 0)
    return set_errno (error, errno, "%s", path);
  tree = tree_of (jail, fd, RO_ATTRS, TRUE, path, error);
  if (tree < 0)
    return FALSE;
  add_mount (jail, path, tree, FALSE);
  return TRUE;
}

gboolean
mv_jail_show_binary (MvJail *jail, const char *path, GError **error)
{
  g_autofree char *real = realpath (path, NULL);
  int fd, tree;

  if (!real)
    return set_errno (error, errno, "%s", path);
  if (g_str_has_prefix (real, "/usr/"))
    return TRUE;
  fd = keep_fd (jail, open (real, O_PATH | O_NOFOLLOW | O_CLOEXEC));
  if (fd < 0)
    return set_errno (error, errno, "%s", real);
  tree = tree_of (jail, fd, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, FALSE,
                  real, error);
  if (tree < 0)
    return FALSE;
  /* The VMM is started by the path it was given; a link to it needs the
   * path's own place too. */
  add_mount (jail, real, tree, TRUE);
  if (strcmp (real, path) != 0)
    {
      Link link = { relative (path), g_strdup (real) };

      add_parents (jail, link.path);
      g_array_append_val (jail->links, link);
    }
  return TRUE;
}

gboolean
mv_jail_add_device (MvJail *jail, const char *path, GError **error)
{
  return mv_jail_add_device_at (jail, path, path, error);
}

gboolean
mv_jail_show_sysfs_dir (MvJail *jail, const char *path, GError **error)
{
  int fd = keep_fd (jail, open (path, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  int tree;

  if (fd < 0)
    return set_errno (error, errno, "%s", path);
  /* sysfs has no idmapped mounts; what the VMM reads there is world
   * readable. */
  tree = tree_of (jail, fd, RO_ATTRS, FALSE, path, error);
  if (tree < 0)
    return FALSE;
  add_mount (jail, path, tree, FALSE);
  return TRUE;
}

gboolean
mv_jail_add_device_at (MvJail *jail, const char *path, const char *at, GError **error)
{
  g_autofree char *rel = relative (at);
  struct stat st;
  Device d;

  /* Asked for by each user of it (every TAP, every NIC): made once. */
  for (guint i = 0; i < jail->devices->len; i++)
    if (strcmp (g_array_index (jail->devices, Device, i).path, rel) == 0)
      return TRUE;
  if (stat (path, &st) < 0 || !S_ISCHR (st.st_mode))
    return set_errno (error, errno ? errno : ENODEV, "the device %s", path);
  d.path = g_steal_pointer (&rel);
  d.mode = S_IFCHR | 0600;
  d.dev = st.st_rdev;
  d.owned = TRUE;
  add_parents (jail, d.path);
  g_array_append_val (jail->devices, d);
  return TRUE;
}

gboolean
mv_jail_give_tap (MvJail *jail, const char *name, GError **error)
{
  MvTapName tap = { { 0 } };
  int err;

  if (!name || !*name || strlen (name) >= IFNAMSIZ)
    {
      g_set_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT,
                   "network: \"%s\" is not a TAP device name", name ? name : "");
      return FALSE;
    }
  /* Attaching by name would make a TAP that is not there. */
  if (if_nametoindex (name) == 0)
    return set_errno (error, errno, "the TAP device %s", name);
  if (!mv_jail_add_device (jail, "/dev/net/tun", error))
    return FALSE;
  /* Recorded first: a failure half way is given back too. */
  memcpy (tap.name, name, strlen (name));
  g_array_append_val (jail->taps, tap);
  err = mv_tap_set_owner (name, jail->uid);
  if (err)
    return set_errno (error, err, "giving the TAP device %s to the VMM's user", name);
  return TRUE;
}

int
mv_jail_take_fd (MvJail *jail, int fd)
{
  return keep_fd (jail, fd);
}

int
mv_jail_pass_fd (MvJail *jail, int fd)
{
  g_array_append_val (jail->passed, fd);
  return fd;
}

/* ---- preparing ---- */

/* The host's binaries and libraries, read-only. */
static gboolean
add_system (MvJail *jail, GError **error)
{
  struct mount_attr ma = { .attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
                           .propagation = MS_PRIVATE };
  int tree = open_tree (AT_FDCWD, "/usr", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);

  if (tree < 0 || mount_setattr (tree, "", AT_EMPTY_PATH | AT_RECURSIVE, &ma, sizeof ma) < 0)
    {
      int saved = errno;
      if (tree >= 0)
        close (tree);
      return set_errno (error, saved, "a read-only /usr");
    }
  add_mount (jail, "/usr", tree, FALSE);

  for (guint i = 0; root_entries[i]; i++)
    {
      g_autofree char *abs = g_strconcat ("/", root_entries[i], NULL);
      struct stat st;

      if (lstat (abs, &st) < 0)
        continue;
      if (S_ISLNK (st.st_mode))
        {
          Link link = { g_strdup (root_entries[i]), g_file_read_link (abs, NULL) };

          if (link.target)
            g_array_append_val (jail->links, link);
          else
            g_free (link.path);
        }
      else if (S_ISDIR (st.st_mode))
        {
          tree = open_tree (AT_FDCWD, abs, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
          if (tree < 0 ||
              mount_setattr (tree, "", AT_EMPTY_PATH | AT_RECURSIVE, &ma, sizeof ma) < 0)
            {
              int saved = errno;
              if (tree >= 0)
                close (tree);
              return set_errno (error, saved, "a read-only %s", abs);
            }
          add_mount (jail, abs, tree, FALSE);
        }
    }

  /* Where the dynamic loader finds libraries; nothing else of /etc. */
  if (g_file_test ("/etc/ld.so.cache", G_FILE_TEST_IS_REGULAR))
    {
      int fd = keep_fd (jail, open ("/etc/ld.so.cache", O_RDONLY | O_CLOEXEC | O_NOFOLLOW));

      if (fd < 0 || (tree = tree_of (jail, fd, RO_ATTRS, FALSE, "/etc/ld.so.cache", error)) < 0)
        return fd < 0 ? set_errno (error, errno, "/etc/ld.so.cache") : FALSE;
      add_mount (jail, "/etc/ld.so.cache", tree, TRUE);
    }

  add_dir (jail, "dev");
  add_dir (jail, "proc");
  for (guint i = 0; i < G_N_ELEMENTS (common_devices); i++)
    {
      Device d = {
        g_strconcat ("dev/", common_devices[i].name, NULL), S_IFCHR | 0666,
        makedev (common_devices[i].major, common_devices[i].minor), FALSE,
      };
      g_array_append_val (jail->devices, d);
    }
  return TRUE;
}

static gboolean
is_daemons (const char *name)
{
  /* The rotated logs too: what an earlier run printed is not the next
   * VMM's to rewrite. The console's log and socket are its holder's; the
   * workload's log is written by the daemon from what the agent sends. */
  return strcmp (name, MV_VMM_LOG_NAME) == 0 || strcmp (name, MV_VMM_EXIT_NAME) == 0 ||
         strcmp (name, MV_CONSOLE_LOG_NAME) == 0 || strcmp (name, MV_CONSOLE_SOCKET_NAME) == 0 ||
         strcmp (name, MV_VMM_EXIT_TEMP_NAME) == 0 ||
         strcmp (name, MV_VMM_LOG_NAME MV_LOG_ROTATED_SUFFIX) == 0 ||
         strcmp (name, MV_CONSOLE_LOG_NAME MV_LOG_ROTATED_SUFFIX) == 0 ||
         strcmp (name, MV_WORKLOAD_LOG_NAME) == 0 ||
         strcmp (name, MV_WORKLOAD_LOG_NAME MV_LOG_ROTATED_SUFFIX) == 0;
}

/* Gives what lies in @dir_fd (and below) to @uid, without following a
 * link; the daemon's own files stay root's. */
static void
chown_entries (int dir_fd, uid_t uid, gid_t gid, gboolean top)
{
  int fd = dup (dir_fd);
  DIR *dir = fd >= 0 ? fdopendir (fd) : NULL;
  struct dirent *entry;

  if (!dir)
    {
      if (fd >= 0)
        close (fd);
      return;
    }
  while ((entry = readdir (dir)))
    {
      int child;

      if (strcmp (entry->d_name, ".") == 0 || strcmp (entry->d_name, "..") == 0 ||
          (top && is_daemons (entry->d_name)))
        continue;
      fchownat (dir_fd, entry->d_name, uid, gid, AT_SYMLINK_NOFOLLOW);
      if (entry->d_type == DT_DIR &&
          (child = openat (dir_fd, entry->d_name,
                           O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) >= 0)
        {
          chown_entries (child, uid, gid, FALSE);
          close (child);
        }
    }
  closedir (dir);
}

static guint
depth (const char *path)
{
  guint n = 1;

  for (const char *p = path; *p; p++)
    n += *p == '/';
  return n;
}

/* Parents are mounted before what they hold, which would hide it. */
static gint
by_depth (gconstpointer a, gconstpointer b)
{
  guint da = depth (((const Mount *) a)->path), db = depth (((const Mount *) b)->path);

  return da < db ? -1 : da > db;
}

gboolean
mv_jail_prepare (MvJail *jail, GError **error)
{
  int tree;

  g_return_val_if_fail (!jail->prepared, FALSE);
  if (!add_system (jail, error))
    return FALSE;
  tree = tree_of (jail, jail->runtime_fd, RW_ATTRS, FALSE, jail->runtime_dir, error);
  if (tree < 0)
    return FALSE;
  add_mount (jail, jail->runtime_dir, tree, FALSE);
  g_array_sort (jail->mounts, by_depth);

  /* The VMM makes its sockets and console here; the sticky bit keeps it
   * from the daemon's files. */
  jail->prepared = TRUE;
  if (fchown (jail->runtime_fd, 0, mv_jail_gid (jail)) < 0 ||
      fchmod (jail->runtime_fd, 01770) < 0)
    return set_errno (error, errno, "giving %s to the VMM's group", jail->runtime_dir);
  chown_entries (jail->runtime_fd, jail->uid, mv_jail_gid (jail), TRUE);
  return TRUE;
}

const int *
mv_jail_parent_fds (MvJail *jail, guint *n)
{
  *n = jail->parent_fds->len;
  return (const int *) (gpointer) jail->parent_fds->data;
}

const int *
mv_jail_passed_fds (MvJail *jail, guint *n)
{
  *n = jail->passed->len;
  return (const int *) (gpointer) jail->passed->data;
}

void
mv_jail_hand_over (MvJail *jail)
{
  jail->handed_over = TRUE;
}

/* ---- in the child ---- */

#define FAIL(what)  do { *step = (what); return -errno; } while (0)

static int
drop_privileges (uid_t uid, gid_t gid, const char **step)
{
  struct __user_cap_header_struct header = { _LINUX_CAPABILITY_VERSION_3, 0 };
  struct __user_cap_data_struct none[_LINUX_CAPABILITY_U32S_3] = { { 0 } };

  for (int cap = 0; cap < 64; cap++)
    if (prctl (PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL)
      FAIL ("dropping the capability bounding set");
  /* Raw system calls: glibc's wrappers would signal threads this forked
   * child does not have. */
  if (syscall (SYS_setgroups, 0, NULL) < 0)
    FAIL ("setgroups");
  if (syscall (SYS_setresgid, gid, gid, gid) < 0)
    FAIL ("setresgid");
  if (syscall (SYS_setresuid, uid, uid, uid) < 0)
    FAIL ("setresuid");
  if (syscall (SYS_capset, &header, none) < 0)
    FAIL ("clearing the capabilities");
  if (prctl (PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
    FAIL ("clearing the ambient capabilities");
  if (prctl (PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
    FAIL ("NoNewPrivs");
  return 0;
}

/* mkdir -p of @path's directory, in the forked child: no allocation. */
static int
make_parents (const char *path)
{
  char buf[PATH_MAX];
  size_t n = strlen (path);

  if (n >= sizeof buf)
    return -1;
  memcpy (buf, path, n + 1);
  for (char *p = buf + 1; *p; p++)
    if (*p == '/')
      {
        *p = '\0';
        if (mkdir (buf, 0755) < 0 && errno != EEXIST)
          return -1;
        *p = '/';
      }
  return 0;
}

int
mv_jail_enter (const MvJail *jail, const char **step)
{
  umask (0);
  if (unshare (CLONE_NEWNS | CLONE_NEWIPC) < 0)
    FAIL ("unshare");
  if (mount (NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
    FAIL ("making the mounts private");
  /* The new root covers the runtime directory, whose mount was taken
   * before; it is the one place the daemon knows to be the VMM's. */
  if (mount ("tmpfs", jail->runtime_dir, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
             "mode=0755,size=1m,nr_inodes=4096") < 0)
    FAIL ("mounting the new root");
  if (chdir (jail->runtime_dir) < 0)
    FAIL ("entering the new root");
  for (guint i = 0; i < jail->dirs->len; i++)
    if (mkdir (jail->dirs->pdata[i], 0755) < 0 && errno != EEXIST)
      FAIL ("making the new root's directories");
  for (guint i = 0; i < jail->links->len; i++)
    {
      const Link *l = &g_array_index (jail->links, Link, i);
      if (symlink (l->target, l->path) < 0 && errno != EEXIST)
        FAIL ("linking in the new root");
    }
  if (mount ("tmpfs", "dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=64k,nr_inodes=64") < 0)
    FAIL ("mounting /dev");
  for (guint i = 0; i < jail->devices->len; i++)
    {
      const Device *d = &g_array_index (jail->devices, Device, i);
      /* Its directory (dev/net) is made on the fresh /dev, not before. */
      if (make_parents (d->path) < 0)
        FAIL ("making a device node's directory");
      if (mknod (d->path, d->mode, d->dev) < 0)
        FAIL ("making a device node");
      if (d->owned && chown (d->path, jail->uid, (gid_t) jail->uid) < 0)
        FAIL ("giving a device node to the VMM");
    }
  for (guint i = 0; i < jail->mounts->len; i++)
    {
      const Mount *m = &g_array_index (jail->mounts, Mount, i);
      int fd;

      if (m->is_file && (fd = open (m->path, O_WRONLY | O_CREAT | O_CLOEXEC, 0400)) >= 0)
        close (fd);
      else if (!m->is_file && mkdir (m->path, 0755) < 0 && errno != EEXIST)
        FAIL ("making a mount point");
      if (move_mount (m->tree, "", AT_FDCWD, m->path, MOVE_MOUNT_F_EMPTY_PATH) < 0)
        FAIL ("mounting into the new root");
    }
  if (syscall (SYS_pivot_root, ".", ".") < 0)
    FAIL ("pivot_root");
  if (umount2 (".", MNT_DETACH) < 0)
    FAIL ("detaching the host's root");
  if (chdir ("/") < 0)
    FAIL ("chdir");
  if (mount ("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC,
             "hidepid=invisible,subset=pid") < 0)
    FAIL ("mounting /proc");
  if (drop_privileges (jail->uid, (gid_t) jail->uid, step) < 0)
    return -errno;
  umask (077);
  return 0;
}

void
mv_jail_grants (const MvJail *jail, MvGrants *grants)
{
  *grants = grants_of (jail, TRUE);
}


/* ---- a running VMM ---- */

/* Runs @func in a child that entered @pidfd's mount namespace; its errno
 * comes back through a pipe. */
typedef int (*InNamespaceFunc) (gpointer data);

static int
in_namespace (int pidfd, InNamespaceFunc func, gpointer data)
{
  int p[2], err = 0, status;
  pid_t pid;

  if (pipe2 (p, O_CLOEXEC) < 0)
    return errno;
  pid = fork ();
  if (pid == 0)
    {
      close (p[0]);
      if (setns (pidfd, CLONE_NEWNS) < 0)
        err = errno;
      else
        err = func (data);
      (void) !write (p[1], &err, sizeof err);
      _exit (0);
    }
  close (p[1]);
  if (pid < 0)
    err = errno;
  else if (read (p[0], &err, sizeof err) != sizeof err)
    err = EPIPE;
  close (p[0]);
  if (pid > 0)
    while (waitpid (pid, &status, 0) < 0 && errno == EINTR)
      ;
  return err;
}

typedef struct {
  char   **prefixes;   /* "/a", "/a/b", ... the directory itself last */
  int      tree;
  gboolean skip_if_there;
} ShowDir;

static int
show_in_namespace (gpointer data)
{
  ShowDir *s = data;
  guint last = 0;
  struct stat there, parent;

  /* In a forked child: nothing is allocated. */
  for (guint i = 0; s->prefixes[i]; i++)
    {
      if (mkdir (s->prefixes[i], 0755) < 0 && errno != EEXIST)
        return errno;
      last = i;
    }
  /* A mount point is on another device than its parent. */
  if (s->skip_if_there && stat (s->prefixes[last], &there) == 0 &&
      stat (last ? s->prefixes[last - 1] : "/", &parent) == 0 && there.st_dev != parent.st_dev)
    return 0;
  if (move_mount (s->tree, "", AT_FDCWD, s->prefixes[last], MOVE_MOUNT_F_EMPTY_PATH) < 0)
    return errno;
  return 0;
}

static char **
prefixes_of (const char *dir)
{
  g_auto (GStrv) parts = g_strsplit (dir, "/", -1);
  GPtrArray *out = g_ptr_array_new ();
  GString *prefix = g_string_new (NULL);

  for (guint i = 0; parts[i]; i++)
    {
      if (!*parts[i])
        continue;
      g_string_append_printf (prefix, "/%s", parts[i]);
      g_ptr_array_add (out, g_strdup (prefix->str));
    }
  g_string_free (prefix, TRUE);
  g_ptr_array_add (out, NULL);
  return (char **) g_ptr_array_free (out, FALSE);
}

/* Mounts a clone of @canonical, with @attrs, at its own path in the
 * namespace of @pidfd; 0 or an errno. */
static int
show_tree_to_running (int pidfd, const char *canonical, guint64 attrs, gboolean skip_if_there)
{
  g_auto (GStrv) prefixes = prefixes_of (canonical);
  struct mount_attr ma = { .attr_set = attrs, .propagation = MS_PRIVATE };
  ShowDir s = { prefixes, -1, skip_if_there };
  int err;

  if (!prefixes[0])
    return EINVAL;
  s.tree = open_tree (AT_FDCWD, canonical, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
  if (s.tree < 0 || mount_setattr (s.tree, "", AT_EMPTY_PATH, &ma, sizeof ma) < 0)
    err = errno;
  else
    err = in_namespace (pidfd, show_in_namespace, &s);
  if (s.tree >= 0)
    close (s.tree);
  return err;
}

gboolean
mv_jail_show_dir_to_running (int pidfd, uid_t uid, const char *dir, GError **error)
{
  g_autofree char *canonical = g_canonicalize_filename (dir, NULL);
  int err;

  if (chown (canonical, uid, (gid_t) uid) < 0 || chmod (canonical, 0700) < 0)
    return set_errno (error, errno, "giving %s to the VMM", canonical);
  err = show_tree_to_running (pidfd, canonical, RW_ATTRS, FALSE);
  if (err)
    {
      (void) !chown (canonical, 0, 0);
      return set_errno (error, err, "showing %s to the VMM", canonical);
    }
  return TRUE;
}

gboolean
mv_jail_show_sysfs_dir_to_running (int pidfd, const char *path, GError **error)
{
  g_autofree char *canonical = g_canonicalize_filename (path, NULL);
  int err = show_tree_to_running (pidfd, canonical, RO_ATTRS, TRUE);

  if (err)
    return set_errno (error, err, "showing %s to the VMM", canonical);
  return TRUE;
}

typedef struct {
  const char *at;
  dev_t       dev;
  uid_t       uid;
} AddDevice;

static int
add_device_in_namespace (gpointer data)
{
  AddDevice *d = data;
  struct stat st;

  if (make_parents (d->at) < 0)
    return errno;
  if (stat (d->at, &st) == 0 && S_ISCHR (st.st_mode) && st.st_rdev == d->dev)
    return 0;
  if (mknod (d->at, S_IFCHR | 0600, d->dev) < 0 ||
      chown (d->at, d->uid, (gid_t) d->uid) < 0)
    return errno;
  return 0;
}

gboolean
mv_jail_add_device_to_running (int pidfd, uid_t uid, const char *path, const char *at,
                               GError **error)
{
  struct stat st;
  AddDevice d = { at, 0, uid };
  int err;

  if (stat (path, &st) < 0 || !S_ISCHR (st.st_mode))
    return set_errno (error, errno ? errno : ENODEV, "the device %s", path);
  d.dev = st.st_rdev;
  err = in_namespace (pidfd, add_device_in_namespace, &d);
  if (err)
    return set_errno (error, err, "giving the VMM the device %s", at);
  return TRUE;
}

static int
hide_in_namespace (gpointer data)
{
  if (umount2 (data, MNT_DETACH) < 0 && errno != EINVAL && errno != ENOENT)
    return errno;
  return 0;
}

gboolean
mv_jail_hide_dir_from_running (int pidfd, const char *dir, GError **error)
{
  g_autofree char *canonical = g_canonicalize_filename (dir, NULL);
  int fd = open (canonical, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  int err = pidfd >= 0 ? in_namespace (pidfd, hide_in_namespace, canonical) : 0;

  /* What the VMM wrote is root's again, whether or not it still runs. */
  if (fd >= 0)
    {
      (void) !fchown (fd, 0, 0);
      chown_entries (fd, 0, 0, FALSE);
      close (fd);
    }
  if (err && err != ESRCH)
    return set_errno (error, err, "hiding %s from the VMM", canonical);
  return TRUE;
}

typedef struct {
  const char *mount;
  const char *node;
} TakeBack;

static int
take_back_in_namespace (gpointer data)
{
  TakeBack *t = data;

  if (umount2 (t->mount, MNT_DETACH) < 0 && errno != EINVAL && errno != ENOENT)
    return errno;
  /* The mount point goes too, so that nothing is left to be seen. */
  if (rmdir (t->mount) < 0 && errno != ENOENT && errno != ENOTEMPTY)
    return errno;
  if (unlink (t->node) < 0 && errno != ENOENT)
    return errno;
  return 0;
}

void
mv_jail_take_from_running (int pidfd, const char *path, const char *at)
{
  g_autofree char *canonical = g_canonicalize_filename (path, NULL);
  TakeBack t = { canonical, at };
  int err = in_namespace (pidfd, take_back_in_namespace, &t);

  if (err && err != ESRCH)
    g_warning ("Taking %s and %s back from the VMM: %s", canonical, at, g_strerror (err));
}

void
mv_jail_reclaim_runtime_dir (const char *runtime_dir)
{
  int fd = open (runtime_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

  if (fd < 0)
    return;
  (void) !fchown (fd, 0, 0);
  (void) !fchmod (fd, 0700);
  close (fd);
}
