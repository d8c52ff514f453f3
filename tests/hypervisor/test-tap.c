/* TAP devices given to a walled-in VMM's user by name (jail.h,
 * mv_jail_give_tap()): the leased UID may attach to the TAP while the
 * jail holds it, and not before nor after. The TAPs live in a network
 * namespace of the test's own: run as root. */
#include "hv-test.h"
#include "hypervisor/jail.h"
#include "hypervisor/sandbox.h"
#include "core/errors.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <sched.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define TAP_NAME "mvtaptest0"

/* A persistent TAP owned by root, as the host network makes them: only
 * root may attach. (One without an owner takes anyone.) */
static void
make_tap (const char *name)
{
  struct ifreq ifr = { 0 };
  int fd = open ("/dev/net/tun", O_RDWR | O_CLOEXEC);

  g_assert_cmpint (fd, >=, 0);
  strncpy (ifr.ifr_name, name, IFNAMSIZ - 1);
  ifr.ifr_flags = IFF_TAP | IFF_NO_PI | IFF_VNET_HDR;
  g_assert_cmpint (ioctl (fd, TUNSETIFF, &ifr), ==, 0);
  g_assert_cmpint (ioctl (fd, TUNSETOWNER, 0UL), ==, 0);
  g_assert_cmpint (ioctl (fd, TUNSETPERSIST, 1), ==, 0);
  close (fd);
}

/* 0 if @uid:@gid can attach to the TAP @name as the VMMs do, else the
 * errno. */
static int
attach_as (uid_t uid, gid_t gid, const char *name)
{
  int status;
  pid_t pid = fork ();

  g_assert_cmpint (pid, >=, 0);
  if (pid == 0)
    {
      struct ifreq ifr = { 0 };
      int fd;

      if (syscall (SYS_setgroups, 0, NULL) < 0 || syscall (SYS_setresgid, gid, gid, gid) < 0 ||
          syscall (SYS_setresuid, uid, uid, uid) < 0)
        _exit (100);
      fd = open ("/dev/net/tun", O_RDWR | O_CLOEXEC);
      if (fd < 0)
        _exit (101);
      strncpy (ifr.ifr_name, name, IFNAMSIZ - 1);
      ifr.ifr_flags = IFF_TAP | IFF_NO_PI | IFF_VNET_HDR;
      _exit (ioctl (fd, TUNSETIFF, &ifr) < 0 ? errno : 0);
    }
  g_assert_cmpint (waitpid (pid, &status, 0), ==, pid);
  g_assert_true (WIFEXITED (status));
  g_assert_cmpint (WEXITSTATUS (status), <, 100);
  return WEXITSTATUS (status);
}

static MvSandbox *
test_sandbox (void)
{
  g_autoptr (GKeyFile) config = g_key_file_new ();
  g_autoptr (GError) error = NULL;
  MvSandbox *sandbox;

  /* A range of its own, so that running VMMs do not get in the way. */
  g_key_file_set_string (config, "sandbox", "uid-range", "700100-700101");
  sandbox = mv_sandbox_new_from_config (config, &error);
  g_assert_no_error (error);
  return sandbox;
}

static void
test_give_tap (void)
{
  g_autoptr (MvSandbox) sandbox = NULL;
  g_autofree char *dir = NULL;
  g_autoptr (GError) error = NULL;
  MvJail *jail;
  uid_t uid;
  gid_t gid;

  if (geteuid () != 0)
    {
      g_test_skip ("TAP devices and UID leases need root");
      return;
    }
  g_assert_cmpint (unshare (CLONE_NEWNET), ==, 0);
  make_tap (TAP_NAME);
  sandbox = test_sandbox ();
  dir = hv_test_make_dir ();

  /* Handed over to the VMM's parent: released when the VMM ends. */
  jail = mv_jail_new (sandbox, "tap-machine", dir, &error);
  g_assert_no_error (error);
  uid = mv_jail_uid (jail);
  gid = mv_jail_gid (jail);
  g_assert_cmpint (attach_as (uid, gid, TAP_NAME), ==, EPERM);
  g_assert_true (mv_jail_give_tap (jail, TAP_NAME, &error));
  g_assert_no_error (error);
  g_assert_cmpint (attach_as (uid, gid, TAP_NAME), ==, 0);
  /* Another UID still cannot. */
  g_assert_cmpint (attach_as (uid + 1, gid + 1, TAP_NAME), ==, EPERM);
  mv_jail_hand_over (jail);
  mv_jail_release (jail);
  g_assert_cmpint (attach_as (uid, gid, TAP_NAME), ==, EPERM);
  mv_jail_free (jail);

  /* Freed before a VMM took it: given back all the same. */
  jail = mv_jail_new (sandbox, "tap-machine", dir, &error);
  g_assert_no_error (error);
  uid = mv_jail_uid (jail);
  gid = mv_jail_gid (jail);
  g_assert_true (mv_jail_give_tap (jail, TAP_NAME, &error));
  g_assert_cmpint (attach_as (uid, gid, TAP_NAME), ==, 0);
  mv_jail_free (jail);
  g_assert_cmpint (attach_as (uid, gid, TAP_NAME), ==, EPERM);

  /* No such TAP, or no name a TAP can have: refused, naming it. */
  jail = mv_jail_new (sandbox, "tap-machine", dir, &error);
  g_assert_no_error (error);
  g_assert_false (mv_jail_give_tap (jail, "mvtapnone", &error));
  g_assert_nonnull (error);
  g_assert_nonnull (strstr (error->message, "mvtapnone"));
  g_clear_error (&error);
  g_assert_false (mv_jail_give_tap (jail, "a-name-longer-than-ifnamsiz", &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
  mv_jail_free (jail);

  hv_test_remove_tree (dir);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/jail/give-tap", test_give_tap);
  return g_test_run ();
}
