#include "errors.h"
#include <stdarg.h>

G_DEFINE_QUARK (microvmd-error-quark, mv_error)

gboolean
mv_error_set (GError **error, MvError code, const char *format, ...)
{
  va_list args;

  va_start (args, format);
  g_propagate_error (error, g_error_new_valist (MV_ERROR, code, format, args));
  va_end (args);
  return FALSE;
}
