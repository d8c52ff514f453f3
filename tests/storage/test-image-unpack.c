#include "storage/image-unpack.h"
#include "core/errors.h"
#include "util/files.h"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct {
  char *tmp;
  char *root;
  int   root_fd;
  int   layers;
} Fixture;

/* An entry of a test layer: "d" directory, "f" file with @data, "l"
 * symlink to @data, "h" hard link to @data. */
typedef struct {
  const char *type;
  const char *path;
  const char *data;
  int         mode;
  int         uid;
} Entry;

static void
setup (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;

  f->tmp = g_dir_make_tmp ("test-unpack-XXXXXX", &error);
  g_assert_no_error (error);
  f->root = g_build_filename (f->tmp, "root", NULL);
  g_assert_cmpint (g_mkdir (f->root, 0755), ==, 0);
  f->root_fd = open (f->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  g_assert_cmpint (f->root_fd, >=, 0);
}

static void
teardown (Fixture *f, gconstpointer data)
{
  close (f->root_fd);
  g_assert_true (mv_remove_tree (f->tmp, NULL));
  g_free (f->root);
  g_free (f->tmp);
}

/* Writes a layer with @entries, compressed with @filter ("gzip", "zstd" or NULL). */
static char *
make_layer (Fixture *f, const char *filter, const Entry *entries, gsize n)
{
  g_autofree char *name = g_strdup_printf ("layer%d.tar", f->layers++);
  char *path = g_build_filename (f->tmp, name, NULL);
  struct archive *a = archive_write_new ();

  archive_write_set_format_pax_restricted (a);
  if (g_strcmp0 (filter, "gzip") == 0)
    archive_write_add_filter_gzip (a);
  else if (g_strcmp0 (filter, "zstd") == 0)
    archive_write_add_filter_zstd (a);
  g_assert_cmpint (archive_write_open_filename (a, path), ==, ARCHIVE_OK);
  for (gsize i = 0; i < n; i++)
    {
      struct archive_entry *e = archive_entry_new ();
      const Entry *x = &entries[i];

      archive_entry_set_pathname (e, x->path);
      archive_entry_set_uid (e, x->uid);
      archive_entry_set_gid (e, x->uid);
      archive_entry_set_mtime (e, 1700000000, 0);
      switch (x->type[0])
        {
        case 'd':
          archive_entry_set_filetype (e, AE_IFDIR);
          archive_entry_set_perm (e, x->mode ? x->mode : 0755);
          break;
        case 'l':
          archive_entry_set_filetype (e, AE_IFLNK);
          archive_entry_set_symlink (e, x->data);
          archive_entry_set_perm (e, 0777);
          break;
        case 'h':
          archive_entry_set_filetype (e, AE_IFREG);
          archive_entry_set_hardlink (e, x->data);
          break;
        default:
          archive_entry_set_filetype (e, AE_IFREG);
          archive_entry_set_perm (e, x->mode ? x->mode : 0644);
          archive_entry_set_size (e, x->data ? strlen (x->data) : 0);
        }
      g_assert_cmpint (archive_write_header (a, e), ==, ARCHIVE_OK);
      if (x->type[0] == 'f' && x->data)
        g_assert_cmpint (archive_write_data (a, x->data, strlen (x->data)), ==, (la_ssize_t) strlen (x->data));
      archive_entry_free (e);
    }
  archive_write_close (a);
  archive_write_free (a);
  return path;
}

static gboolean
apply (Fixture *f, const char *filter, const Entry *entries, gsize n, guint64 max, GError **error)
{
  g_autofree char *layer = make_layer (f, filter, entries, n);
  MvUnpackBudget budget = { .max_bytes = max ? max : G_MAXUINT64 };

  return mv_unpack_layer (f->root_fd, layer, &budget, error);
}

static char *
in_root (Fixture *f, const char *rel)
{
  return g_build_filename (f->root, rel, NULL);
}

static gboolean
exists (Fixture *f, const char *rel)
{
  g_autofree char *p = in_root (f, rel);
  struct stat st;

  return lstat (p, &st) == 0;
}

static void
test_layers (Fixture *f, gconstpointer data)
{
  const Entry base[] = {
    { "d", "./bin/" }, { "f", "bin/tool", "#!tool\n", 04755, 0 },
    { "h", "bin/tool2", "bin/tool" }, { "l", "bin/sh", "tool" },
    { "d", "etc" }, { "f", "etc/a", "a" }, { "f", "etc/b", "b" },
    { "d", "var/cache", NULL, 0750, 42 }, { "f", "var/cache/x", "x", 0600, 42 }, { "f", "var/cache/y", "y" },
    { "f", "home/u/file", "deep", 0640, 1000 },
  };
  const Entry upper[] = {
    { "f", "etc/.wh.a" }, { "f", "var/cache/z", "new in this layer" },
    { "f", "var/cache/.wh..wh..opq" }, { "f", "etc/b", "b2" }, { "f", ".wh.home" },
  };
  g_autoptr (GError) error = NULL;
  g_autofree char *tool = in_root (f, "bin/tool");
  g_autofree char *tool2 = in_root (f, "bin/tool2");
  g_autofree char *cache = in_root (f, "var/cache");
  g_autofree char *b = in_root (f, "etc/b");
  g_autofree char *contents = NULL;
  g_autofree char *link = NULL;
  g_autofree char *sh = in_root (f, "bin/sh");
  struct stat st, st2;

  g_assert_true (apply (f, "gzip", base, G_N_ELEMENTS (base), 0, &error));
  g_assert_no_error (error);
  g_assert_cmpint (stat (tool, &st), ==, 0);
  g_assert_cmpint (st.st_mode & 07777, ==, 04755);
  g_assert_cmpint (stat (tool2, &st2), ==, 0);
  g_assert_cmpint (st.st_ino, ==, st2.st_ino);
  link = g_file_read_link (sh, NULL);
  g_assert_cmpstr (link, ==, "tool");
  g_assert_cmpint (stat (cache, &st), ==, 0);
  g_assert_cmpint (st.st_mode & 07777, ==, 0750);
  g_assert_cmpint (st.st_uid, ==, 42);
  g_assert_true (exists (f, "home/u/file"));

  g_assert_true (apply (f, "zstd", upper, G_N_ELEMENTS (upper), 0, &error));
  g_assert_no_error (error);
  g_assert_false (exists (f, "etc/a"));
  g_assert_false (exists (f, "etc/.wh.a"));
  g_assert_true (g_file_get_contents (b, &contents, NULL, NULL));
  g_assert_cmpstr (contents, ==, "b2");
  /* The opaque marker empties what the layers below put there, not what
   * its own layer adds, even when it comes after it in the tar. */
  g_assert_false (exists (f, "var/cache/x"));
  g_assert_false (exists (f, "var/cache/y"));
  g_assert_true (exists (f, "var/cache/z"));
  g_assert_false (exists (f, "var/cache/.wh..wh..opq"));
  g_assert_false (exists (f, "home"));
}

static void
test_escapes (Fixture *f, gconstpointer data)
{
  const Entry dotdot[] = { { "f", "a/../../escaped", "x" } };
  const Entry absolute[] = { { "f", "/escaped", "x" } };
  /* A symlink to / planted first, then a file written through it. */
  const Entry through_link[] = { { "l", "up", "/" }, { "f", "up/escaped-link", "x" },
                                 { "l", "dots", "../../.." }, { "f", "dots/escaped-dots", "x" } };
  const Entry whiteout_out[] = { { "f", "up/.wh.victim" } };
  g_autofree char *victim = g_build_filename (f->tmp, "victim", NULL);
  g_autofree char *outside = g_build_filename (f->tmp, "escaped", NULL);

  g_assert_true (g_file_set_contents (victim, "keep", -1, NULL));
  {
    g_autoptr (GError) error = NULL;
    g_assert_false (apply (f, NULL, dotdot, 1, 0, &error));
    g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
  }
  {
    g_autoptr (GError) error = NULL;
    g_assert_false (apply (f, NULL, absolute, 1, 0, &error));
    g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
  }
  {
    g_autoptr (GError) error = NULL;
    g_assert_true (apply (f, NULL, through_link, G_N_ELEMENTS (through_link), 0, &error));
    g_assert_no_error (error);
    /* They landed inside the root, where / and ../../.. resolve to. */
    g_assert_true (exists (f, "escaped-link"));
    g_assert_true (exists (f, "escaped-dots"));
    g_assert_false (g_file_test ("/escaped-link", G_FILE_TEST_EXISTS));
    g_assert_false (g_file_test (outside, G_FILE_TEST_EXISTS));
  }
  {
    g_autoptr (GError) error = NULL;
    /* up -> / inside the root; the whiteout cannot reach tmp/victim. */
    g_assert_true (apply (f, NULL, whiteout_out, 1, 0, &error));
    g_assert_true (g_file_test (victim, G_FILE_TEST_EXISTS));
  }
}

static void
test_budget (Fixture *f, gconstpointer data)
{
  g_autofree char *big = g_strnfill (100000, 'x');
  const Entry entries[] = { { "f", "big", big } };
  g_autoptr (GError) error = NULL;

  g_assert_false (apply (f, "gzip", entries, 1, 50000, &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_RESOURCE_EXHAUSTED);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add ("/image-unpack/layers", Fixture, NULL, setup, test_layers, teardown);
  g_test_add ("/image-unpack/escapes", Fixture, NULL, setup, test_escapes, teardown);
  g_test_add ("/image-unpack/budget", Fixture, NULL, setup, test_budget, teardown);
  return g_test_run ();
}
