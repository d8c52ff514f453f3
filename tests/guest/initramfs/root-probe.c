/* A stand-in /init for microvmd's initramfs (guest/build-initramfs.sh):
 * it does what the agent does before a workload can start, so that a boot
 * shows whether the initramfs carries every module that needs.
 *
 * It loads the modules listed in /lib/modules/$(uname -r)/microvmd.load,
 * mounts /dev/vda read-only as ext4 on /mnt and an overlay of it with a
 * tmpfs upper on /newroot, checks that the overlay is writable, and prints
 * MICROVMD-ROOT-OK (or MICROVMD-ROOT-FAIL and the step) on the console.
 * Then it powers off, or, with root_probe.exec on the kernel command line,
 * makes /newroot the root and executes /sbin/init there.
 *
 * Built static: the initramfs has no C library. */

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

static void
fail (const char *fmt, ...)
{
  va_list ap;

  printf ("MICROVMD-ROOT-FAIL ");
  va_start (ap, fmt);
  vprintf (fmt, ap);
  va_end (ap);
  printf ("\n");
  fflush (stdout);
  sync ();
  reboot (RB_POWER_OFF);
  _exit (1);
}

static void
must_mount (const char *source, const char *target, const char *type,
            unsigned long flags, const char *data)
{
  if (mkdir (target, 0755) < 0 && errno != EEXIST)
    fail ("mkdir %s: %s", target, strerror (errno));
  if (mount (source, target, type, flags, data) < 0)
    fail ("mount %s (%s) on %s: %s", source, type, target, strerror (errno));
}

static void
load_modules (void)
{
  struct utsname u;
  char dir[256], path[512], line[256];
  FILE *list;
  int count = 0;

  if (uname (&u) < 0)
    fail ("uname: %s", strerror (errno));
  snprintf (dir, sizeof dir, "/lib/modules/%s", u.release);
  snprintf (path, sizeof path, "%s/microvmd.load", dir);
  list = fopen (path, "re");
  if (list == NULL)
    fail ("open %s: %s", path, strerror (errno));

  while (fgets (line, sizeof line, list) != NULL)
    {
      int fd;

      line[strcspn (line, "\n")] = '\0';
      if (line[0] == '\0')
        continue;
      snprintf (path, sizeof path, "%s/%s", dir, line);
      fd = open (path, O_RDONLY | O_CLOEXEC);
      if (fd < 0)
        fail ("open %s: %s", path, strerror (errno));
      if (syscall (SYS_finit_module, fd, "", 0) < 0 && errno != EEXIST)
        fail ("load %s: %s", line, strerror (errno));
      close (fd);
      count++;
    }
  fclose (list);
  printf ("root-probe: loaded %d modules\n", count);
}

/* The disk's node appears once devtmpfs has caught up with the probe. */
static void
wait_for (const char *path, int seconds)
{
  struct timespec tick = { 0, 50 * 1000 * 1000 };

  for (int i = 0; i < seconds * 20; i++)
    {
      if (access (path, F_OK) == 0)
        return;
      nanosleep (&tick, NULL);
    }
  fail ("%s did not appear in %d s", path, seconds);
}

static void
check_overlay (void)
{
  struct stat st;
  int fd;

  /* lstat: the root's links point into the root, not into the initramfs. */
  if (lstat ("/newroot/bin/busybox", &st) < 0 && lstat ("/newroot/sbin/init", &st) < 0)
    fail ("the root has neither /bin/busybox nor /sbin/init");
  fd = open ("/newroot/root-probe-written", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0)
    fail ("write to the overlay: %s", strerror (errno));
  close (fd);
  if (access ("/mnt/root-probe-written", F_OK) == 0)
    fail ("a write to the overlay reached the read-only disk");
  unlink ("/newroot/root-probe-written");
}

static int
cmdline_has (const char *word)
{
  char buf[4096];
  ssize_t n;
  int fd = open ("/proc/cmdline", O_RDONLY | O_CLOEXEC);

  if (fd < 0)
    return 0;
  n = read (fd, buf, sizeof buf - 1);
  close (fd);
  if (n <= 0)
    return 0;
  buf[n] = '\0';
  for (char *tok = strtok (buf, " \n"); tok != NULL; tok = strtok (NULL, " \n"))
    if (strcmp (tok, word) == 0)
      return 1;
  return 0;
}

static void
switch_root (void)
{
  static const char *const moved[] = { "/dev", "/proc", "/sys" };
  char target[64];

  for (size_t i = 0; i < sizeof moved / sizeof moved[0]; i++)
    {
      snprintf (target, sizeof target, "/newroot%s", moved[i]);
      if (mount (moved[i], target, NULL, MS_MOVE, NULL) < 0)
        fail ("move %s: %s", moved[i], strerror (errno));
    }
  if (chdir ("/newroot") < 0 || mount (".", "/", NULL, MS_MOVE, NULL) < 0 || chroot (".") < 0 ||
      chdir ("/") < 0)
    fail ("switch to /newroot: %s", strerror (errno));
  fflush (stdout);
  execl ("/sbin/init", "/sbin/init", (char *) NULL);
  fail ("exec /sbin/init: %s", strerror (errno));
}

int
main (void)
{
  setvbuf (stdout, NULL, _IOLBF, 0);
  must_mount ("proc", "/proc", "proc", 0, NULL);
  must_mount ("sysfs", "/sys", "sysfs", 0, NULL);
  must_mount ("devtmpfs", "/dev", "devtmpfs", 0, NULL);

  load_modules ();
  wait_for ("/dev/vda", 10);
  must_mount ("/dev/vda", "/mnt", "ext4", MS_RDONLY, NULL);
  must_mount ("tmpfs", "/tmp", "tmpfs", 0, "mode=0755");
  if (mkdir ("/tmp/upper", 0755) < 0 || mkdir ("/tmp/work", 0755) < 0)
    fail ("mkdir upper: %s", strerror (errno));
  must_mount ("overlay", "/newroot", "overlay", 0,
              "lowerdir=/mnt,upperdir=/tmp/upper,workdir=/tmp/work");
  check_overlay ();
  printf ("MICROVMD-ROOT-OK\n");

  if (cmdline_has ("root_probe.exec"))
    switch_root ();
  sync ();
  reboot (RB_POWER_OFF);
  return 1;
}
