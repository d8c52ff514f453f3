/* Users and groups of a guest's root (src/guest/users.c). */
#include <glib.h>
#include <glib/gstdio.h>
#include <string.h>

#include "guest/users.h"

static char *
make_root (void)
{
  char *root = g_dir_make_tmp ("users-test-XXXXXX", NULL);
  g_autofree char *etc = g_build_filename (root, "etc", NULL);
  g_autofree char *passwd = g_build_filename (etc, "passwd", NULL);
  g_autofree char *group = g_build_filename (etc, "group", NULL);

  g_assert_cmpint (g_mkdir (etc, 0755), ==, 0);
  g_assert_true (g_file_set_contents (passwd,
    "root:x:0:0:root:/root:/bin/sh\n"
    "# a comment\n"
    "broken line\n"
    "bad:x:notanumber:1:bad:/home/bad:/bin/sh\n"
    "short:x:5:5\n"
    "alice:x:1000:1000:Alice:/home/alice:/bin/sh\n"
    "nohome:x:1001:1001::relative:/bin/sh\n", -1, NULL));
  g_assert_true (g_file_set_contents (group,
    "root:x:0:\n"
    "garbage\n"
    "alice:x:1000:\n"
    "wheel:x:10:bob,alice\n"
    "staff:x:50:alice\n"
    "audio:x:29:bob\n", -1, NULL));
  return root;
}

static void
remove_root (char *root)
{
  g_autofree char *passwd = g_build_filename (root, "etc", "passwd", NULL);
  g_autofree char *group = g_build_filename (root, "etc", "group", NULL);
  g_autofree char *etc = g_build_filename (root, "etc", NULL);

  g_unlink (passwd);
  g_unlink (group);
  g_rmdir (etc);
  g_rmdir (root);
  g_free (root);
}

static gboolean
has_group (const MvUser *u, gid_t gid)
{
  for (size_t i = 0; i < u->n_groups; i++)
    if (u->groups[i] == gid)
      return TRUE;
  return FALSE;
}

static void
test_forms (void)
{
  char *root = make_root ();
  char error[256] = "";
  MvUser u;

  g_assert_true (mv_user_lookup (root, "alice", &u, error, sizeof error));
  g_assert_cmpuint (u.uid, ==, 1000);
  g_assert_cmpuint (u.gid, ==, 1000);
  g_assert_cmpstr (u.home, ==, "/home/alice");
  g_assert_cmpstr (u.name, ==, "alice");
  g_assert_cmpuint (u.n_groups, ==, 3);
  g_assert_cmpuint (u.groups[0], ==, 1000);
  g_assert_true (has_group (&u, 10));
  g_assert_true (has_group (&u, 50));
  g_assert_false (has_group (&u, 29));

  /* A uid in passwd is that user. */
  g_assert_true (mv_user_lookup (root, "1000", &u, error, sizeof error));
  g_assert_cmpstr (u.name, ==, "alice");
  g_assert_cmpstr (u.home, ==, "/home/alice");
  g_assert_true (has_group (&u, 50));

  g_assert_true (mv_user_lookup (root, "alice:wheel", &u, error, sizeof error));
  g_assert_cmpuint (u.uid, ==, 1000);
  g_assert_cmpuint (u.gid, ==, 10);
  g_assert_cmpuint (u.groups[0], ==, 10);
  g_assert_true (has_group (&u, 50));

  /* Numbers not listed are taken as they are. */
  g_assert_true (mv_user_lookup (root, "4242:4343", &u, error, sizeof error));
  g_assert_cmpuint (u.uid, ==, 4242);
  g_assert_cmpuint (u.gid, ==, 4343);
  g_assert_cmpstr (u.home, ==, "/");
  g_assert_cmpuint (u.n_groups, ==, 1);
  g_assert_cmpuint (u.groups[0], ==, 4343);

  g_assert_true (mv_user_lookup (root, "4242", &u, error, sizeof error));
  g_assert_cmpuint (u.uid, ==, 4242);
  g_assert_cmpuint (u.gid, ==, 0);

  /* Empty is root. */
  g_assert_true (mv_user_lookup (root, "", &u, error, sizeof error));
  g_assert_cmpuint (u.uid, ==, 0);
  g_assert_cmpstr (u.home, ==, "/root");
  g_assert_true (mv_user_lookup (root, NULL, &u, error, sizeof error));
  g_assert_cmpuint (u.uid, ==, 0);

  /* A home that is not absolute is "/". */
  g_assert_true (mv_user_lookup (root, "nohome", &u, error, sizeof error));
  g_assert_cmpstr (u.home, ==, "/");
  remove_root (root);
}

static void
test_unknown (void)
{
  char *root = make_root ();
  char error[256] = "";
  MvUser u;

  g_assert_false (mv_user_lookup (root, "mallory", &u, error, sizeof error));
  g_assert_cmpstr (error, ==, "user: mallory: not in the guest's /etc/passwd");
  g_assert_false (mv_user_lookup (root, "alice:nogroup", &u, error, sizeof error));
  g_assert_cmpstr (error, ==, "group: nogroup: not in the guest's /etc/group");
  /* Malformed lines are skipped, so their names are unknown. */
  g_assert_false (mv_user_lookup (root, "bad", &u, error, sizeof error));
  g_assert_false (mv_user_lookup (root, "short", &u, error, sizeof error));
  g_assert_false (mv_user_lookup (root, "garbage:garbage", &u, error, sizeof error));
  g_assert_false (mv_user_lookup (root, "alice:", &u, error, sizeof error));
  g_assert_false (mv_user_lookup (root, ":wheel", &u, error, sizeof error));
  remove_root (root);
}

static void
test_no_files (void)
{
  g_autofree char *root = g_dir_make_tmp ("users-empty-XXXXXX", NULL);
  char error[256] = "";
  MvUser u;

  g_assert_true (mv_user_lookup (root, "0", &u, error, sizeof error));
  g_assert_cmpuint (u.uid, ==, 0);
  g_assert_cmpstr (u.home, ==, "/");
  g_assert_false (mv_user_lookup (root, "alice", &u, error, sizeof error));
  g_rmdir (root);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/agent/users/forms", test_forms);
  g_test_add_func ("/agent/users/unknown", test_unknown);
  g_test_add_func ("/agent/users/no-files", test_no_files);
  return g_test_run ();
}
