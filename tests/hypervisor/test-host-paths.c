/* The rules for host files a machine names (hypervisor/host-paths.h):
 * beneath an allowed directory, not through a link out of it, regular,
 * never the daemon's own records. Needs root only for the block device. */
#include "hv-test.h"
#include "hypervisor/host-paths.h"
#include "util/reserved-dirs.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

static void
test_below (void)
{
  g_assert_cmpstr (mv_host_path_below ("/a/b/c", "/a/b"), ==, "c");
  g_assert_cmpstr (mv_host_path_below ("/a/b/c", "/a/b/"), ==, "c");
  g_assert_cmpstr (mv_host_path_below ("/a/b//c", "/a/b"), ==, "c");
  g_assert_cmpstr (mv_host_path_below ("/a/b", "/a/b"), ==, "");
  g_assert_cmpstr (mv_host_path_below ("/a/b/../x", "/a/b"), ==, "../x");
  g_assert_cmpstr (mv_host_path_below ("/etc/passwd", "/"), ==, "etc/passwd");
  g_assert_null (mv_host_path_below ("/a/bc", "/a/b"));
  g_assert_null (mv_host_path_below ("/etc/shadow", "/a/b"));
  g_assert_true (mv_path_is_beneath ("/a/b", "/a"));
  g_assert_true (mv_path_is_beneath ("/a", "/a/"));
  g_assert_false (mv_path_is_beneath ("/ab", "/a"));
}

typedef struct {
  char        *dir;       /* allowed */
  char        *outside;   /* not */
  MvHostPaths *paths;
} Tree;

static void
tree_init (Tree *t)
{
  g_autofree char *root = hv_test_make_dir ();
  const char *dirs[2] = { NULL, NULL };
  g_autoptr (GError) error = NULL;

  t->dir = g_build_filename (root, "images", NULL);
  t->outside = g_build_filename (root, "secret", NULL);
  g_assert_cmpint (g_mkdir (t->dir, 0700), ==, 0);
  g_assert_true (g_file_set_contents (t->outside, "secret", -1, NULL));
  dirs[0] = t->dir;
  t->paths = mv_host_paths_new (dirs, &error);
  g_assert_no_error (error);
}

static void
tree_clear (Tree *t)
{
  g_autofree char *root = g_path_get_dirname (t->dir);

  mv_host_paths_free (t->paths);
  hv_test_remove_tree (root);
  g_free (t->dir);
  g_free (t->outside);
}

static char *
put (Tree *t, const char *name)
{
  char *path = g_build_filename (t->dir, name, NULL);

  g_assert_true (g_file_set_contents (path, "data", -1, NULL));
  return path;
}

/* The check's message for @path, which must be refused. */
static char *
refusal (Tree *t, const char *field, const char *path)
{
  g_autoptr (GError) error = NULL;

  g_assert_false (mv_host_paths_check (t->paths, field, path, &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
  g_assert_true (g_str_has_prefix (error->message, field));
  g_test_message ("%s", error->message);
  return g_strdup (error->message);
}

static void
test_allowed (void)
{
  Tree t;
  g_autofree char *file = NULL, *sub = NULL, *nested = NULL, *inner_link = NULL;
  g_autoptr (GError) error = NULL;
  int fd;

  tree_init (&t);
  file = put (&t, "vmlinuz");
  g_assert_true (mv_host_paths_check (t.paths, "kernel", file, &error));
  g_assert_no_error (error);

  /* A link that stays inside is followed. */
  sub = g_build_filename (t.dir, "sub", NULL);
  g_assert_cmpint (g_mkdir (sub, 0700), ==, 0);
  nested = g_build_filename (sub, "disk", NULL);
  g_assert_true (g_file_set_contents (nested, "disk", -1, NULL));
  inner_link = g_build_filename (t.dir, "current", NULL);
  g_assert_cmpint (symlink ("sub/disk", inner_link), ==, 0);
  fd = mv_host_paths_open (t.paths, "disks[0].path", inner_link, O_RDWR, &error);
  g_assert_no_error (error);
  g_assert_cmpint (fd, >=, 0);
  g_assert_cmpint (write (fd, "x", 1), ==, 1);
  close (fd);
  tree_clear (&t);
}

/* Directories to share: the directory itself or one beneath, not a file,
 * not through a link out; the messages name the key the rules came from. */
static void
test_directories (void)
{
  g_autofree char *root = hv_test_make_dir ();
  g_autofree char *dir = g_build_filename (root, "shared", NULL);
  g_autofree char *sub = g_build_filename (dir, "sub", NULL);
  g_autofree char *file = g_build_filename (dir, "file", NULL);
  g_autofree char *outside = g_build_filename (root, "outside", NULL);
  g_autofree char *link = g_build_filename (dir, "out", NULL);
  const char *dirs[2] = { dir, NULL };
  const char *none[1] = { NULL };
  g_autoptr (MvHostPaths) paths = NULL;
  g_autoptr (MvHostPaths) empty = NULL;
  g_autoptr (GError) error = NULL;
  int fd;

  g_assert_cmpint (g_mkdir (dir, 0700), ==, 0);
  g_assert_cmpint (g_mkdir (sub, 0700), ==, 0);
  g_assert_cmpint (g_mkdir (outside, 0700), ==, 0);
  g_assert_true (g_file_set_contents (file, "x", -1, NULL));
  g_assert_cmpint (symlink (outside, link), ==, 0);
  paths = mv_host_paths_new_for_key ("[storage] allowed-directories", dirs, &error);
  g_assert_no_error (error);

  fd = mv_host_paths_open_dir (paths, "mounts[0].source", dir, &error);
  g_assert_no_error (error);
  close (fd);
  fd = mv_host_paths_open_dir (paths, "mounts[0].source", sub, &error);
  g_assert_no_error (error);
  close (fd);

  g_assert_cmpint (mv_host_paths_open_dir (paths, "mounts[1].source", file, &error), <, 0);
  g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
  g_assert_nonnull (strstr (error->message, "only a directory can be shared"));
  g_clear_error (&error);
  g_assert_cmpint (mv_host_paths_open_dir (paths, "mounts[1].source", link, &error), <, 0);
  g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
  g_assert_nonnull (strstr (error->message, "leads out of"));
  g_clear_error (&error);
  g_assert_cmpint (mv_host_paths_open_dir (paths, "mounts[1].source", outside, &error), <, 0);
  g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
  g_assert_nonnull (strstr (error->message, "([storage] allowed-directories: "));
  g_clear_error (&error);

  empty = mv_host_paths_new_for_key ("[storage] allowed-directories", none, &error);
  g_assert_no_error (error);
  g_assert_cmpint (mv_host_paths_open_dir (empty, "mounts[0].source", dir, &error), <, 0);
  g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
  g_assert_nonnull (strstr (error->message, "([storage] allowed-directories: none)"));
  g_clear_error (&error);

  g_assert_null (mv_host_paths_new_for_key ("[storage] allowed-directories",
                                            (const char *[]) { "/", NULL }, &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
  g_assert_true (g_str_has_prefix (error->message, "[storage] allowed-directories: "));
  hv_test_remove_tree (root);
}

static void
test_refused (void)
{
  Tree t;
  g_autofree char *link = NULL, *dotdot = NULL, *fifo = NULL, *msg = NULL, *blk = NULL;
  g_autofree char *dir_link = NULL, *through = NULL, *proc_link = NULL;

  tree_init (&t);

  msg = refusal (&t, "disks[0].path", "/etc/shadow");
  g_assert_nonnull (strstr (msg, "disks[0].path: /etc/shadow is not under an allowed directory"));
  g_assert_nonnull (strstr (msg, t.dir));
  g_clear_pointer (&msg, g_free);

  msg = refusal (&t, "kernel", "/proc/self/mem");
  g_assert_nonnull (strstr (msg, "not under an allowed directory"));
  g_clear_pointer (&msg, g_free);

  /* A link out of the directory, whole or in the middle, and "..". */
  link = g_build_filename (t.dir, "shadow", NULL);
  g_assert_cmpint (symlink (t.outside, link), ==, 0);
  msg = refusal (&t, "disks[1].path", link);
  g_assert_nonnull (strstr (msg, "leads out of"));
  g_clear_pointer (&msg, g_free);
  dir_link = g_build_filename (t.dir, "etc", NULL);
  g_assert_cmpint (symlink ("/etc", dir_link), ==, 0);
  through = g_build_filename (dir_link, "shadow", NULL);
  msg = refusal (&t, "initrd", through);
  g_assert_nonnull (strstr (msg, "leads out of"));
  g_clear_pointer (&msg, g_free);
  dotdot = g_strconcat (t.dir, "/../secret", NULL);
  msg = refusal (&t, "kernel", dotdot);
  g_assert_nonnull (strstr (msg, "leads out of"));
  g_clear_pointer (&msg, g_free);
  /* /proc's magic links are refused even where they would stay inside. */
  proc_link = g_build_filename (t.dir, "self-mem", NULL);
  g_assert_cmpint (symlink ("/proc/self/mem", proc_link), ==, 0);
  msg = refusal (&t, "kernel", proc_link);
  g_assert_nonnull (strstr (msg, "leads out of"));
  g_clear_pointer (&msg, g_free);

  /* Not regular files. */
  fifo = g_build_filename (t.dir, "fifo", NULL);
  g_assert_cmpint (mkfifo (fifo, 0600), ==, 0);
  msg = refusal (&t, "disks[0].path", fifo);
  g_assert_nonnull (strstr (msg, "a FIFO"));
  g_clear_pointer (&msg, g_free);
  msg = refusal (&t, "kernel", t.dir);
  g_assert_nonnull (strstr (msg, "a directory"));
  g_clear_pointer (&msg, g_free);
  if (geteuid () == 0)
    {
      blk = g_build_filename (t.dir, "loop", NULL);
      g_assert_cmpint (mknod (blk, S_IFBLK | 0600, makedev (7, 0)), ==, 0);
      msg = refusal (&t, "disks[0].path", blk);
      g_assert_nonnull (strstr (msg, "a block device"));
      g_clear_pointer (&msg, g_free);
    }

  msg = refusal (&t, "kernel", "relative/vmlinuz");
  g_assert_nonnull (strstr (msg, "not an absolute path"));
  g_clear_pointer (&msg, g_free);
  tree_clear (&t);
}

static void
test_missing (void)
{
  Tree t;
  g_autofree char *gone = NULL, *msg = NULL;

  tree_init (&t);
  gone = g_build_filename (t.dir, "gone", NULL);
  msg = refusal (&t, "initrd", gone);
  g_assert_nonnull (strstr (msg, "does not exist"));
  tree_clear (&t);
}

/* The message of a refused @path, with only @dir allowed. */
static char *
refusal_in (const char *dir, const char *path, int flags)
{
  const char *dirs[] = { dir, NULL };
  g_autoptr (MvHostPaths) paths = NULL;
  g_autoptr (GError) error = NULL;

  paths = mv_host_paths_new (dirs, &error);
  g_assert_no_error (error);
  g_assert_cmpint (mv_host_paths_open (paths, "disk", path, flags, &error), ==, -1);
  g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
  g_test_message ("%s", error->message);
  return g_strdup (error->message);
}

/* A file under /tmp or /var/tmp that the daemon does not find may sit in
 * the host's /tmp, which microvmd.service's PrivateTmp= hides; one under
 * /home that it cannot write is behind ProtectHome=read-only. The message
 * says so, and says nothing of it elsewhere. */
static void
test_sandbox_hint (void)
{
  g_autofree char *name = g_strdup_printf ("mvhv-absent-%d-%u", (int) getpid (), g_random_int ());
  const char *const private_trees[] = { "/tmp", "/var/tmp" };

  for (guint i = 0; i < G_N_ELEMENTS (private_trees); i++)
    {
      g_autofree char *dir = g_build_filename (private_trees[i], name, NULL);
      g_autofree char *disk = g_build_filename (dir, "disk.img", NULL);
      g_autofree char *msg = refusal_in (dir, disk, O_RDONLY);

      g_assert_nonnull (strstr (msg, "does not exist"));
      g_assert_nonnull (strstr (msg, "microvmd.service"));
      g_assert_nonnull (strstr (msg, "PrivateTmp=yes"));
    }

  {
    g_autofree char *dir = g_build_filename ("/var/lib", name, NULL);
    g_autofree char *disk = g_build_filename (dir, "disk.img", NULL);
    g_autofree char *msg = refusal_in (dir, disk, O_RDONLY);

    g_assert_nonnull (strstr (msg, "does not exist"));
    g_assert_null (strstr (msg, "microvmd.service"));
  }

  /* Writing under ProtectHome=read-only fails with EROFS, which a test
   * cannot bring about in /home without remounting it. */
  g_assert_nonnull (strstr (mv_host_path_sandbox_hint ("/home/alice/disk.img", EROFS),
                            "ProtectHome=read-only"));
  g_assert_nonnull (strstr (mv_host_path_sandbox_hint ("/root/disk.img", EACCES),
                            "ProtectHome=read-only"));
  g_assert_nonnull (strstr (mv_host_path_sandbox_hint ("/var/tmp/vm/disk.img", ENOENT),
                            "PrivateTmp=yes"));
  /* A file missing from /home is missing: ProtectHome=read-only hides nothing. */
  g_assert_cmpstr (mv_host_path_sandbox_hint ("/home/alice/disk.img", ENOENT), ==, "");
  g_assert_cmpstr (mv_host_path_sandbox_hint ("/tmpfiles/disk.img", ENOENT), ==, "");
  g_assert_cmpstr (mv_host_path_sandbox_hint ("/srv/vm/disk.img", EROFS), ==, "");
}

/* The daemon's records are never a machine's file, even beneath an
 * allowed directory; and an allowed directory may not hold them. */
static void
test_reserved (void)
{
  g_autofree char *root = hv_test_make_dir ();
  g_autofree char *records = g_build_filename (root, "machines", NULL);
  g_autofree char *record = g_build_filename (records, "config.json", NULL);
  g_autofree char *images = g_build_filename (root, "images", NULL);
  g_autofree char *link = g_build_filename (images, "config", NULL);
  const char *holding[] = { root, NULL };
  const char *inside[] = { records, NULL };
  const char *fine[] = { images, NULL };
  g_autoptr (GError) error = NULL;
  g_autoptr (MvHostPaths) paths = NULL;

  g_assert_cmpint (g_mkdir (records, 0700), ==, 0);
  g_assert_cmpint (g_mkdir (images, 0700), ==, 0);
  g_assert_true (g_file_set_contents (record, "{}", -1, NULL));
  mv_reserved_dirs_add (records);

  g_assert_null (mv_host_paths_new (holding, &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
  g_assert_nonnull (strstr (error->message, "[paths] allowed-directories"));
  g_clear_error (&error);
  g_assert_null (mv_host_paths_new (inside, &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  {
    const char *root_dir[] = { "/", NULL };
    const char *proc[] = { "/proc/self", NULL };
    g_assert_null (mv_host_paths_new (root_dir, &error));
    g_clear_error (&error);
    g_assert_null (mv_host_paths_new (proc, &error));
    g_clear_error (&error);
  }

  /* A hard link into the records can be had only by root; a symbolic
   * link leads out of the directory. */
  g_assert_cmpint (symlink (record, link), ==, 0);
  paths = mv_host_paths_new (fine, &error);
  g_assert_no_error (error);
  g_assert_false (mv_host_paths_check (paths, "kernel", link, &error));
  g_assert_nonnull (strstr (error->message, "leads out of"));
  g_clear_error (&error);
  hv_test_remove_tree (root);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/host-paths/below", test_below);
  g_test_add_func ("/host-paths/allowed", test_allowed);
  g_test_add_func ("/host-paths/refused", test_refused);
  g_test_add_func ("/host-paths/directories", test_directories);
  g_test_add_func ("/host-paths/missing", test_missing);
  g_test_add_func ("/host-paths/reserved", test_reserved);
  g_test_add_func ("/host-paths/sandbox-hint", test_sandbox_hint);
  return g_test_run ();
}
