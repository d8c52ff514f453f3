/* TAP devices given to a walled-in VMM's user by name (jail.h,
 * mv_jail_give_tap()): the leased UID may attach to the TAP while the
 * jail holds it, and not before nor after. The TAPs live in a network
 * namespace of the test's own: run as root. */
#include "hv-test.h"
#include "hypervisor/jail.h"
#include "hypervisor/process.h"
#include "hypervisor/vmm-parent.h"
#include "hypervisor/sandbox.h"
#include "core/errors.h"

#include <errno.h>
#include <stdlib.h>
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
  MvGrants grants;
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
  mv_jail_grants (jail, &grants);
  mv_grants_release (&grants);
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

/* The line @key of /proc/@pid/status, without the key. */
static char *
proc_status (int pid, const char *key)
{
  g_autofree char *path = g_strdup_printf ("/proc/%d/status", pid);
  g_autofree char *text = NULL;
  g_auto (GStrv) lines = NULL;
  g_autofree char *prefix = g_strconcat (key, ":", NULL);

  g_assert_true (g_file_get_contents (path, &text, NULL, NULL));
  lines = g_strsplit (text, "\n", -1);
  for (char **line = lines; *line; line++)
    if (g_str_has_prefix (*line, prefix))
      return g_strstrip (g_strdup (*line + strlen (prefix)));
  g_assert_not_reached ();
}

/* A walled-in VMM that was given a TAP, started as the daemon starts
 * them: its parent is microvmd-vmm-parent (vmm-parent.h), not a copy of
 * this process, with no privilege but the two it needs; and once the VMM
 * ends, the parent has given the TAP back to root. */
static void
test_parent_gives_back (void)
{
  const char *stand_in = g_getenv ("MICROVMD_TEST_CONSOLE_VMM");
  g_autoptr (MvSandbox) sandbox = NULL;
  g_autoptr (GError) error = NULL;
  g_autoptr (MvProcess) vmm = NULL;
  g_autofree char *dir = NULL, *socket_path = NULL, *ppid = NULL, *exe_link = NULL;
  g_autofree char *exe = NULL, *caps = NULL, *bounding = NULL, *nnp = NULL;
  MvJail *jail;
  uid_t uid;
  gid_t gid;

  if (geteuid () != 0)
    {
      g_test_skip ("TAP devices and UID leases need root");
      return;
    }
  g_assert_nonnull (stand_in);
  g_assert_cmpint (unshare (CLONE_NEWNET), ==, 0);
  make_tap (TAP_NAME);
  sandbox = test_sandbox ();
  dir = hv_test_make_dir ();
  socket_path = g_build_filename (dir, "api.sock", NULL);

  jail = mv_jail_new (sandbox, "tap-machine", dir, &error);
  g_assert_no_error (error);
  uid = mv_jail_uid (jail);
  gid = mv_jail_gid (jail);
  g_assert_true (mv_jail_give_tap (jail, TAP_NAME, &error));
  g_assert_true (mv_jail_show_binary (jail, stand_in, &error));
  g_assert_no_error (error);
  {
    const char *argv[] = { stand_in, socket_path, NULL };
    vmm = mv_process_start (socket_path, argv, jail, 10000, &error);
  }
  g_assert_no_error (error);
  g_assert_cmpint (attach_as (uid, gid, TAP_NAME), ==, 0);

  ppid = proc_status (vmm->pid, "PPid");
  exe_link = g_strdup_printf ("/proc/%s/exe", ppid);
  exe = g_file_read_link (exe_link, NULL);
  g_assert_cmpstr (exe, ==, mv_vmm_parent_path ());
  /* CAP_FOWNER and CAP_NET_ADMIN, nothing more, nor to be had. */
  caps = proc_status (atoi (ppid), "CapEff");
  bounding = proc_status (atoi (ppid), "CapBnd");
  nnp = proc_status (atoi (ppid), "NoNewPrivs");
  g_assert_cmpstr (caps, ==, "0000000000001008");
  g_assert_cmpstr (bounding, ==, "0000000000001008");
  g_assert_cmpstr (nnp, ==, "1");

  g_assert_true (mv_process_kill (vmm, &error));
  g_assert_no_error (error);
  mv_vmm_wait_exit_recorded (socket_path);
  g_assert_cmpint (attach_as (uid, gid, TAP_NAME), ==, EPERM);
  mv_jail_free (jail);
  hv_test_remove_tree (dir);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/jail/give-tap", test_give_tap);
  g_test_add_func ("/jail/parent-gives-back", test_parent_gives_back);
  return g_test_run ();
}
