/* Taking back what a walled-in VMM was given (grants.h). */
#include "grants.h"
#include "acl.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/if_tun.h>
#include <net/if.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

G_STATIC_ASSERT (MV_TAP_NAME_SIZE == IFNAMSIZ);

int
mv_tap_set_owner (const char *name, uid_t uid)
{
  struct ifreq ifr = { 0 };
  int fd = open ("/dev/net/tun", O_RDWR | O_CLOEXEC);
  int err = 0;

  if (fd < 0)
    return errno;
  /* Attaching to an existing TAP: the flags are the ones the VMMs open
   * it with. */
  strncpy (ifr.ifr_name, name, IFNAMSIZ - 1);
  ifr.ifr_flags = IFF_TAP | IFF_NO_PI | IFF_VNET_HDR;
  if (ioctl (fd, TUNSETIFF, &ifr) < 0 || ioctl (fd, TUNSETOWNER, (unsigned long) uid) < 0)
    err = errno;
  close (fd);
  return err;
}

void
mv_grants_release (const MvGrants *grants)
{
  for (guint i = 0; i < grants->n_granted; i++)
    mv_acl_revoke (grants->granted[i], grants->uid);
  /* A UID leased to another machine later cannot attach to them. */
  for (guint i = 0; i < grants->n_taps; i++)
    (void) mv_tap_set_owner (grants->taps[i].name, 0);
  if (grants->runtime_fd >= 0)
    {
      (void) !fchown (grants->runtime_fd, 0, 0);
      (void) !fchmod (grants->runtime_fd, 0700);
    }
}
