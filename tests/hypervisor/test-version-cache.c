/* Versions remembered by binary identity (hypervisor/version-cache.h):
 * asked once per file, across caches on one file (daemon restarts), and
 * asked again once the binary is another file or was rewritten, even to
 * the same size and modification time. */
#include "hv-test.h"
#include "hypervisor/version-cache.h"

#include <fcntl.h>
#include <glib/gstdio.h>
#include <sys/stat.h>
#include <unistd.h>

/* What the stand-in probe says, and how often it was asked. */
static const char *probe_says;
static guint probe_asked;

static char *
probe (const char *binary)
{
  probe_asked++;
  return g_strdup (probe_says);
}

typedef struct {
  char *dir;
  char *binary;
  char *file;
} Fixture;

static void
fixture_setup (Fixture *f, gconstpointer data)
{
  f->dir = hv_test_make_dir ();
  f->binary = g_build_filename (f->dir, "qemu-stand-in", NULL);
  f->file = g_build_filename (f->dir, "versions", NULL);
  g_assert_true (g_file_set_contents (f->binary, "version one", -1, NULL));
  probe_says = "7.2.22";
  probe_asked = 0;
}

static void
fixture_teardown (Fixture *f, gconstpointer data)
{
  hv_test_remove_tree (f->dir);
  g_free (f->dir);
  g_free (f->binary);
  g_free (f->file);
}

/* The version through a cache of its own on @f's file: a daemon's start. */
static char *
version_after_restart (Fixture *f)
{
  g_autoptr (MvVersionCache) cache = mv_version_cache_new (f->file);

  return mv_version_cache_get (cache, f->binary, probe);
}

static void
test_remembered (Fixture *f, gconstpointer data)
{
  g_autofree char *first = version_after_restart (f);
  g_autofree char *second = NULL, *third = NULL;

  g_assert_cmpstr (first, ==, "7.2.22");
  g_assert_cmpuint (probe_asked, ==, 1);
  /* The binary says otherwise now, but it is the same file: not asked. */
  probe_says = "8.0.0";
  second = version_after_restart (f);
  third = version_after_restart (f);
  g_assert_cmpstr (second, ==, "7.2.22");
  g_assert_cmpstr (third, ==, "7.2.22");
  g_assert_cmpuint (probe_asked, ==, 1);
}

static void
test_another_file (Fixture *f, gconstpointer data)
{
  g_autofree char *before = version_after_restart (f);
  g_autofree char *replaced = NULL, *rewritten = NULL, *same_size = NULL;
  g_autofree char *next = g_strconcat (f->binary, ".new", NULL);
  struct stat st;
  int fd;

  g_assert_cmpstr (before, ==, "7.2.22");
  /* Replaced, as a package upgrade does: another inode. */
  probe_says = "8.0.0";
  g_assert_true (g_file_set_contents (next, "version two", -1, NULL));
  g_assert_cmpint (g_rename (next, f->binary), ==, 0);
  replaced = version_after_restart (f);
  g_assert_cmpstr (replaced, ==, "8.0.0");
  g_assert_cmpuint (probe_asked, ==, 2);

  /* Rewritten in place to the same size, its modification time put back:
   * the change time still tells. */
  probe_says = "8.0.1";
  g_assert_cmpint (g_stat (f->binary, &st), ==, 0);
  g_usleep (10 * 1000);
  fd = open (f->binary, O_WRONLY);
  g_assert_cmpint (fd, >=, 0);
  g_assert_cmpint (pwrite (fd, "VERSION TWO", 11, 0), ==, 11);
  g_assert_cmpint (futimens (fd, (struct timespec[]) { st.st_atim, st.st_mtim }), ==, 0);
  close (fd);
  same_size = version_after_restart (f);
  g_assert_cmpstr (same_size, ==, "8.0.1");
  g_assert_cmpuint (probe_asked, ==, 3);

  rewritten = version_after_restart (f);
  g_assert_cmpstr (rewritten, ==, "8.0.1");
  g_assert_cmpuint (probe_asked, ==, 3);
}

static void
test_nothing_to_remember (Fixture *f, gconstpointer data)
{
  g_autoptr (MvVersionCache) nowhere = mv_version_cache_new (NULL);
  g_autofree char *a = NULL, *b = NULL, *c = NULL, *d = NULL;
  g_autofree char *missing = g_build_filename (f->dir, "not-there", NULL);

  /* No version said: nothing remembered, asked again next time. */
  probe_says = NULL;
  a = version_after_restart (f);
  g_assert_null (a);
  probe_says = "7.2.22";
  b = version_after_restart (f);
  g_assert_cmpstr (b, ==, "7.2.22");
  g_assert_cmpuint (probe_asked, ==, 2);
  /* A cache with no file, or no cache, asks every time. */
  c = mv_version_cache_get (nowhere, f->binary, probe);
  g_free (c);
  c = mv_version_cache_get (NULL, f->binary, probe);
  g_assert_cmpstr (c, ==, "7.2.22");
  g_assert_cmpuint (probe_asked, ==, 4);
  /* A file that is not a key file is written anew. */
  g_assert_true (g_file_set_contents (f->file, "\x01 not a key file [", -1, NULL));
  d = version_after_restart (f);
  g_assert_cmpstr (d, ==, "7.2.22");
  g_assert_cmpuint (probe_asked, ==, 5);
  g_free (d);
  d = version_after_restart (f);
  g_assert_cmpuint (probe_asked, ==, 5);
  /* A binary that is not there is asked (and fails there). */
  g_free (d);
  {
    g_autoptr (MvVersionCache) cache = mv_version_cache_new (f->file);
    d = mv_version_cache_get (cache, missing, probe);
  }
  g_assert_cmpuint (probe_asked, ==, 6);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add ("/version-cache/remembered", Fixture, NULL, fixture_setup, test_remembered,
              fixture_teardown);
  g_test_add ("/version-cache/another-file", Fixture, NULL, fixture_setup, test_another_file,
              fixture_teardown);
  g_test_add ("/version-cache/nothing-to-remember", Fixture, NULL, fixture_setup,
              test_nothing_to_remember, fixture_teardown);
  return g_test_run ();
}
