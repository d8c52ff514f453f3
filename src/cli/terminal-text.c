/* The console and guest-supplied strings go to a terminal that obeys
 * escape sequences; a guest must not be able to rewrite what the operator
 * sees, so control characters are shown rather than sent. */
#include "terminal-text.h"

#include <string.h>

char *
mv_terminal_text (const char *text, gssize length)
{
  gsize len = length < 0 ? strlen (text) : (gsize) length;
  GString *out = g_string_sized_new (len);

  for (gsize i = 0; i < len; i++)
    {
      guchar c = text[i];

      if (c == '\r')
        continue;   /* CR LF keeps its LF; a lone CR would overwrite the line */
      if (c == '\t' || c == '\n' || (c >= 0x20 && c != 0x7f))
        g_string_append_c (out, c);
      else
        {
          g_string_append_c (out, '^');
          g_string_append_c (out, c == 0x7f ? '?' : c + 0x40);
        }
    }
  return g_string_free (out, FALSE);
}
