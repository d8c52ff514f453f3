/* microvmd-vmm-parent: the parent of one VMM (vmm-parent.h), exec'd by
 * microvmd as it starts the VMM; not for running by hand. */
#include "vmm-parent.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

int
main (int argc, char **argv)
{
  int granted[MV_VMM_PARENT_MAX_GRANTS];
  MvTapName taps[MV_VMM_PARENT_MAX_GRANTS];
  g_autofree char *why = NULL;
  MvVmmParent parent;
  int fd;

  /* microvmd runs it with stdout and stderr closed: whatever it opens
   * later (a TAP device) must not take their numbers, where a message
   * could go. */
  while ((fd = open ("/dev/null", O_RDWR | O_CLOEXEC)) >= 0 && fd <= 2)
    ;
  if (fd > 2)
    close (fd);
  if (!mv_vmm_parent_parse (argv, &parent, granted, taps, &why))
    {
      /* For a person who runs it by hand. */
      g_printerr ("%s\n", why);
      /* Whatever child it has is reaped all the same. */
      while (wait (NULL) > 0 || errno == EINTR)
        ;
      return 2;
    }
  mv_vmm_parent_run (&parent);
}
