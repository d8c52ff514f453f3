#include "fuzz-common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A critical stops the run with SIGABRT, which libFuzzer catches to save
 * the input; GLib's own way, a breakpoint trap, would kill it unsaved. */
static GLogWriterOutput
quiet_writer (GLogLevelFlags level, const GLogField *fields, gsize n_fields, gpointer data)
{
  if (!(level & (G_LOG_LEVEL_ERROR | G_LOG_LEVEL_CRITICAL | G_LOG_FLAG_FATAL)))
    return G_LOG_WRITER_HANDLED;
  g_log_writer_default (level & ~G_LOG_FLAG_FATAL, fields, n_fields, data);
  abort ();
}

void
mv_fuzz_init (void)
{
  g_log_set_always_fatal (G_LOG_FATAL_MASK | G_LOG_LEVEL_CRITICAL);
  g_log_set_writer_func (quiet_writer, NULL, NULL);
}

static gboolean
has_second_value (const char *data, gsize size)
{
  gboolean seen = FALSE;   /* anything but white space at depth 0 */
  char quote = 0;
  int depth = 0;

  for (gsize i = 0; i < size; i++)
    {
      char c = data[i];

      if (quote)
        {
          if (c == '\\')
            i++;
          else if (c == quote)
            quote = 0;
          continue;
        }
      if (c == '/' && i + 1 < size && data[i + 1] == '*')
        {
          const char *end = memmem (data + i + 2, size - i - 2, "*/", 2);

          if (!end)
            return FALSE;
          i = end + 1 - data;
          seen = seen || depth == 0;
          continue;
        }
      switch (c)
        {
        case ' ': case '\t': case '\n': case '\r':
          break;
        case '"': case '\'':
          quote = c;
          seen = seen || depth == 0;
          break;
        case '{': case '[':
          if (depth == 0 && seen)
            return TRUE;
          depth++;
          break;
        case '}': case ']':
          if (depth > 0)
            depth--;
          seen = seen || depth == 0;
          break;
        default:
          seen = seen || depth == 0;
          break;
        }
    }
  return FALSE;
}

/* \uD800 to \uDBFF: after one, json-glib's scanner reads on in ways of
 * its own (a quote may not end the string), and leaks on a malformed
 * pair. */
static gboolean
has_high_surrogate (const char *data, gsize size)
{
  for (gsize i = 0; i + 4 <= size; i++)
    if (data[i] == '\\' && data[i + 1] == 'u' && g_ascii_tolower (data[i + 2]) == 'd' &&
        data[i + 3] != '\0' && strchr ("89abAB", data[i + 3]) != NULL)
      return TRUE;
  return FALSE;
}

gboolean
mv_fuzz_json_glib_leaks (const char *data, gsize size)
{
  return has_second_value (data, size) || has_high_surrogate (data, size);
}

void
mv_fuzz_fail (const char *format, ...)
{
  va_list args;

  fputs ("invariant: ", stderr);
  va_start (args, format);
  vfprintf (stderr, format, args);
  va_end (args);
  fputc ('\n', stderr);
  abort ();
}
