/* vCPUs the host hot-adds come up offline (no udev in the initramfs to
 * bring them online): the agent onlines each CPU the kernel announces,
 * and at its start any present CPU still offline. */
#include "agent.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <linux/netlink.h>

#define CPU_DIR "/sys/devices/system/cpu"

static int uevent_fd = -1;
static int uevent_pidx = -1;

static void
online_cpu (const char *name)
{
  char path[128], state[4] = "";
  int fd;

  snprintf (path, sizeof path, CPU_DIR "/%s/online", name);
  fd = open (path, O_RDWR | O_CLOEXEC);
  if (fd < 0)
    return;   /* cpu0 has no online switch */
  if (read (fd, state, sizeof state - 1) > 0 && state[0] == '0')
    {
      if (pwrite (fd, "1", 1, 0) == 1)
        agent_log ("vCPU %s is online", name + 3);
      else
        agent_log ("vCPU %s: cannot bring it online: %s", name + 3, strerror (errno));
    }
  close (fd);
}

static bool
is_cpu_name (const char *name)
{
  if (strncmp (name, "cpu", 3) != 0 || !name[3])
    return false;
  for (const char *p = name + 3; *p; p++)
    if (*p < '0' || *p > '9')
      return false;
  return true;
}

void
cpus_start (void)
{
  struct sockaddr_nl addr = { .nl_family = AF_NETLINK, .nl_groups = 1 };
  DIR *d;
  struct dirent *de;

  /* Listen first, so that a CPU added during the scan is not missed. */
  uevent_fd = socket (AF_NETLINK, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
                      NETLINK_KOBJECT_UEVENT);
  if (uevent_fd >= 0 && bind (uevent_fd, (struct sockaddr *) &addr, sizeof addr) < 0)
    {
      agent_log ("vCPUs: cannot listen for kernel events: %s", strerror (errno));
      close (uevent_fd);
      uevent_fd = -1;
    }
  d = opendir (CPU_DIR);
  if (!d)
    return;
  while ((de = readdir (d)))
    if (is_cpu_name (de->d_name))
      online_cpu (de->d_name);
  closedir (d);
}

size_t
cpus_poll_add (struct pollfd *fds, size_t n)
{
  uevent_pidx = -1;
  if (uevent_fd < 0)
    return n;
  uevent_pidx = (int) n;
  fds[n++] = (struct pollfd) { .fd = uevent_fd, .events = POLLIN };
  return n;
}

/* A kernel uevent is "ACTION@DEVPATH" then NUL-separated KEY=VALUEs;
 * the first part says all that is needed here. */
void
cpus_poll_dispatch (struct pollfd *fds)
{
  static const char prefix[] = "add@/devices/system/cpu/";
  char message[4096];
  ssize_t len;

  if (uevent_pidx < 0 || !fds[uevent_pidx].revents)
    return;
  while ((len = recv (uevent_fd, message, sizeof message - 1, 0)) > 0)
    {
      const char *name;

      message[len] = '\0';
      if (strncmp (message, prefix, sizeof prefix - 1) != 0)
        continue;
      name = message + sizeof prefix - 1;
      if (is_cpu_name (name))
        online_cpu (name);
    }
}
