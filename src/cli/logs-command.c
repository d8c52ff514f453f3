/* microvmctl logs: a machine's console or VMM log (Machine.StreamLogs),
 * copied to standard output as the daemon writes it. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include <glib/gi18n.h>

#include "microvmctl.h"
#include "names.h"
#include "terminal-text.h"

#define READ_BYTES (64 * 1024)

/* Copies @fd to standard output until its end; on a terminal what could
 * move the cursor or change the terminal is shown instead of obeyed. */
static int
copy_out (int fd)
{
  g_autofree char *buffer = g_malloc (READ_BYTES);
  gboolean terminal = isatty (STDOUT_FILENO);

  for (;;)
    {
      ssize_t n = read (fd, buffer, READ_BYTES);

      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        return mv_fail (_("Failed to read the log: %s"), g_strerror (errno));
      if (n == 0)
        return MV_EXIT_OK;
      if (terminal)
        {
          g_autofree char *shown = mv_terminal_text (buffer, n);

          fputs (shown, stdout);
        }
      else
        fwrite (buffer, 1, (size_t) n, stdout);
      if (fflush (stdout) != 0)
        return mv_fail (_("Failed to write the output: %s"), g_strerror (errno));
    }
}

int
mv_cmd_logs (MvCtl *ctl, const char *method, int argc, char **argv)
{
  g_auto(sd_bus_error) error = SD_BUS_ERROR_NULL;
  g_autoptr(sd_bus_message) reply = NULL;
  g_autofree char *path = NULL;
  guint64 tail = 0;
  int fd = -1, own, status, r;

  /* The daemon says what the limit is; here only that it is a number. */
  if (ctl->tail && !g_ascii_string_to_unsigned (ctl->tail, 10, 0, G_MAXUINT32, &tail, NULL))
    return mv_usage_error (_("invalid --tail '%s': expected a number of lines"), ctl->tail);

  status = mv_resolve_machine (ctl, argv[0], &path);
  if (status != MV_EXIT_OK)
    return status;

  r = mv_call (ctl, path, MV_MACHINE_IFACE, "StreamLogs", 0, &error, &reply, "sub",
               ctl->source ? ctl->source : "console", (uint32_t) tail, (int) ctl->follow);
  if (r >= 0)
    r = sd_bus_message_read (reply, "h", &fd);
  if (r < 0)
    return mv_fail_bus (&error, r);
  own = fcntl (fd, F_DUPFD_CLOEXEC, 3);
  if (own < 0)
    return mv_fail (_("Failed to read the log: %s"), g_strerror (errno));
  /* Nothing more is asked of the daemon while the log is read. */
  g_clear_pointer (&reply, sd_bus_message_unref);
  status = copy_out (own);
  close (own);
  return status;
}
