/* microvmctl console: the guest's serial console (Machine.OpenConsole),
 * interactive until the escape key, Ctrl+] as in virsh console, or until
 * the console ends with the VMM. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include <glib/gi18n.h>

#include "exec-relay.h"
#include "microvmctl.h"
#include "names.h"

/* Ctrl+] */
#define ESCAPE_KEY 0x1d

int
mv_cmd_console (MvCtl *ctl, const char *method, int argc, char **argv)
{
  g_auto(sd_bus_error) error = SD_BUS_ERROR_NULL;
  g_autoptr(sd_bus_message) reply = NULL;
  g_autofree char *path = NULL;
  gboolean terminal = isatty (STDIN_FILENO);
  int fd = -1, own, status, r;

  status = mv_resolve_machine (ctl, argv[0], &path);
  if (status != MV_EXIT_OK)
    return status;
  r = mv_call (ctl, path, MV_MACHINE_IFACE, "OpenConsole", 0, &error, &reply, NULL);
  if (r >= 0)
    r = sd_bus_message_read (reply, "h", &fd);
  if (r < 0)
    return mv_fail_bus (&error, r);
  own = fcntl (fd, F_DUPFD_CLOEXEC, 3);
  if (own < 0)
    return mv_fail (_("Failed to open the console: %s"), g_strerror (errno));
  /* The console is the holder's, not the daemon's: nothing more is asked
   * of the daemon. */
  g_clear_pointer (&reply, sd_bus_message_unref);

  if (terminal)
    fprintf (stderr, _("Connected to the console of %s (escape character is ^])\n"), argv[0]);
  status = mv_console_relay (own, terminal, ESCAPE_KEY);
  if (terminal)
    fputc ('\n', stderr);
  return status;
}
