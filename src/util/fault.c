#include "fault.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <signal.h>
#include <unistd.h>

void
mv_fault_point (const char *phase, const char *when)
{
  static const char *configured;
  static gsize initialized;

  if (g_once_init_enter (&initialized))
    {
      configured = g_getenv ("MICROVMD_FAULT_POINT");
      g_once_init_leave (&initialized, 1);
    }
  if (!configured)
    return;

  g_autofree char *name = g_strdup_printf ("%s:%s", phase, when);
  if (g_str_equal (name, configured))
    {
      /* SIGKILL, as a power cut: no handlers, no flushing, no core. */
      g_printerr ("microvmd: fault point %s reached; dying\n", name);
      kill (getpid (), SIGKILL);
    }
}

int
mv_fault_io (const char *step)
{
  static const char *control;
  static gsize initialized;
  g_autofree char *armed = NULL;

  if (g_once_init_enter (&initialized))
    {
      control = g_getenv ("MICROVMD_FAULT_IO_FILE");
      g_once_init_leave (&initialized, 1);
    }
  if (!control || !g_file_get_contents (control, &armed, NULL, NULL) ||
      !g_str_equal (g_strstrip (armed), step) || g_unlink (control) < 0)
    return 0;
  g_printerr ("microvmd: failing a record write at %s, as a test asked\n", step);
  return EIO;
}
