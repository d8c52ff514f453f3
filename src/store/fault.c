#include "fault.h"

#include <stdlib.h>

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
      g_printerr ("microvmd: fault point %s reached; aborting\n", name);
      abort ();
    }
}
