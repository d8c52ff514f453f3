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

/* What the control file says now, stripped; NULL if there is none. */
static char *
read_control (const char *control)
{
  char *armed = NULL;

  if (!g_file_get_contents (control, &armed, NULL, NULL))
    return NULL;
  return g_strstrip (armed);
}

int
mv_fault_io (const char *step)
{
  static const char *control;
  static gsize initialized;
  g_autofree char *armed = NULL;
  g_autofree char *held = NULL;

  if (g_once_init_enter (&initialized))
    {
      control = g_getenv ("MICROVMD_FAULT_IO_FILE");
      g_once_init_leave (&initialized, 1);
    }
  if (!control || !(armed = read_control (control)))
    return 0;
  held = g_strconcat ("hold:", step, NULL);
  if (g_str_equal (armed, held))
    {
      g_printerr ("microvmd: holding a record write at %s, as a test asked\n", step);
      do
        {
          g_free (armed);
          g_usleep (5 * 1000);
        }
      while ((armed = read_control (control)) && g_str_equal (armed, held));
      return 0;
    }
  if (!g_str_equal (armed, step) || g_unlink (control) < 0)
    return 0;
  g_printerr ("microvmd: failing a record write at %s, as a test asked\n", step);
  return EIO;
}
