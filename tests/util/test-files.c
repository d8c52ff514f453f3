/* mv_file_read_bounded: a file within its limit, one over it (refused
 * without reading it), one that is not regular, one that is missing. */
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gio/gio.h>
#include <glib/gstdio.h>

#include "util/files.h"

static void
test_read_bounded (void)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *dir = g_dir_make_tmp ("test-files-XXXXXX", &error);
  g_autofree char *path = g_build_filename (dir, "f.json", NULL);
  g_autofree char *fifo = g_build_filename (dir, "fifo", NULL);
  g_autofree char *missing = g_build_filename (dir, "missing", NULL);
  g_autofree char *contents = NULL;
  gsize length = 0;

  g_assert_no_error (error);
  g_assert_true (g_file_set_contents (path, "0123456789", 10, NULL));

  g_assert_true (mv_file_read_bounded (path, 10, "f.json", &contents, &length, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (length, ==, 10);
  g_assert_cmpstr (contents, ==, "0123456789");
  g_clear_pointer (&contents, g_free);

  g_assert_false (mv_file_read_bounded (path, 9, "f.json", &contents, &length, &error));
  g_assert_error (error, G_IO_ERROR, G_IO_ERROR_MESSAGE_TOO_LARGE);
  g_assert_cmpstr (error->message, ==, "f.json: 10 bytes is more than the limit of 9");
  g_assert_null (contents);
  g_clear_error (&error);

  g_assert_true (g_file_set_contents (path, "", 0, NULL));
  g_assert_true (mv_file_read_bounded (path, 0, "f.json", &contents, &length, &error));
  g_assert_cmpuint (length, ==, 0);
  g_assert_cmpstr (contents, ==, "");
  g_clear_pointer (&contents, g_free);

  /* A FIFO without a writer would block a plain read. */
  g_assert_cmpint (mkfifo (fifo, 0600), ==, 0);
  g_assert_false (mv_file_read_bounded (fifo, 100, "fifo", &contents, &length, &error));
  g_assert_error (error, G_IO_ERROR, G_IO_ERROR_NOT_REGULAR_FILE);
  g_clear_error (&error);

  g_assert_false (mv_file_read_bounded (missing, 100, "missing", &contents, &length, &error));
  g_assert_error (error, G_IO_ERROR, G_IO_ERROR_NOT_FOUND);
  g_clear_error (&error);

  g_assert_true (mv_remove_tree (dir, NULL));
}

/* A file whose size says nothing (procfs gives 0) comes back whole, read
 * as many times as it takes. */
static void
test_read_sizeless (void)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *ours = NULL, *theirs = NULL;
  gsize ours_length = 0, theirs_length = 0;

  g_assert_true (g_file_get_contents ("/proc/kallsyms", &theirs, &theirs_length, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (theirs_length, >, 16384);
  g_assert_true (mv_file_read_bounded ("/proc/kallsyms", 256 << 20, "kallsyms", &ours,
                                       &ours_length, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (ours_length, ==, theirs_length);
  g_assert_true (memcmp (ours, theirs, theirs_length) == 0);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);

  g_test_add_func ("/files/read-bounded", test_read_bounded);
  g_test_add_func ("/files/read-sizeless", test_read_sizeless);

  return g_test_run ();
}
