/* ACL entries given to a VMM's user and taken back (hypervisor/acl.h):
 * the file's mode and other entries come out as they went in. Needs a
 * file system with POSIX ACLs where the test's temporary files live. */
#include "hv-test.h"
#include "hypervisor/acl.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#define XATTR "system.posix_acl_access"

static mode_t
mode_of (int fd)
{
  struct stat st;

  g_assert_cmpint (fstat (fd, &st), ==, 0);
  return st.st_mode & 07777;
}

static gssize
acl_size (int fd)
{
  char buf[1024];

  return fgetxattr (fd, XATTR, buf, sizeof buf);
}

static void
test_grant_revoke (void)
{
  g_autofree char *dir = hv_test_make_dir ();
  g_autofree char *path = g_build_filename (dir, "disk", NULL);
  int fd, r;

  g_assert_true (g_file_set_contents_full (path, "", 0, G_FILE_SET_CONTENTS_NONE, 0640, NULL));
  fd = open (path, O_RDONLY | O_CLOEXEC);
  g_assert_cmpint (fd, >=, 0);

  r = mv_acl_grant (fd, 600001, MV_ACL_READ | MV_ACL_WRITE);
  if (r == -EOPNOTSUPP)
    {
      g_test_skip ("the temporary directory's file system has no POSIX ACLs");
      close (fd);
      hv_test_remove_tree (dir);
      return;
    }
  g_assert_cmpint (r, ==, 0);
  g_assert_cmpint (acl_size (fd), >, 0);
  /* The group bits show the mask now: rw for the named user. */
  g_assert_cmpuint (mode_of (fd), ==, 0660);

  /* A second user, granted and taken back, leaves the first alone. */
  g_assert_cmpint (mv_acl_grant (fd, 600002, MV_ACL_READ), ==, 0);
  g_assert_cmpint (mv_acl_revoke (fd, 600002), ==, 0);
  g_assert_cmpint (acl_size (fd), >, 0);
  g_assert_cmpuint (mode_of (fd), ==, 0660);
  /* Granting again replaces, not adds. */
  g_assert_cmpint (mv_acl_grant (fd, 600001, MV_ACL_READ | MV_ACL_WRITE), ==, 0);

  /* The last entry gone: no ACL, the mode as it was. */
  g_assert_cmpint (mv_acl_revoke (fd, 600001), ==, 0);
  g_assert_cmpint (acl_size (fd), <, 0);
  g_assert_cmpint (errno, ==, ENODATA);
  g_assert_cmpuint (mode_of (fd), ==, 0640);
  /* Taking back what is not there is no error. */
  g_assert_cmpint (mv_acl_revoke (fd, 600001), ==, 0);
  g_assert_cmpuint (mode_of (fd), ==, 0640);

  close (fd);
  hv_test_remove_tree (dir);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/acl/grant-revoke", test_grant_revoke);
  return g_test_run ();
}
