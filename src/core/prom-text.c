#include "prom-text.h"

#include <math.h>

static void
append_escaped (GString *out, const char *text, gboolean quote)
{
  for (const char *p = text; *p; p++)
    switch (*p)
      {
      case '\\':
        g_string_append (out, "\\\\");
        break;
      case '\n':
        g_string_append (out, "\\n");
        break;
      case '"':
        g_string_append (out, quote ? "\\\"" : "\"");
        break;
      default:
        g_string_append_c (out, *p);
      }
}

void
mv_prom_family (GString *out, const char *name, const char *type, const char *help)
{
  g_string_append_printf (out, "# HELP %s ", name);
  append_escaped (out, help, FALSE);
  g_string_append_printf (out, "\n# TYPE %s %s\n", name, type);
}

void
mv_prom_escape_label (GString *out, const char *value)
{
  append_escaped (out, value, TRUE);
}

static void
append_name (GString *out, const char *name, const char *const *labels)
{
  g_string_append (out, name);
  if (!labels || !labels[0])
    return;
  g_string_append_c (out, '{');
  for (guint i = 0; labels[i] && labels[i + 1]; i += 2)
    {
      if (i > 0)
        g_string_append_c (out, ',');
      g_string_append_printf (out, "%s=\"", labels[i]);
      mv_prom_escape_label (out, labels[i + 1]);
      g_string_append_c (out, '"');
    }
  g_string_append_c (out, '}');
}

void
mv_prom_append_double (GString *out, double value)
{
  char buf[G_ASCII_DTOSTR_BUF_SIZE];

  if (isinf (value))
    g_string_append (out, value > 0 ? "+Inf" : "-Inf");
  else if (isnan (value))
    g_string_append (out, "NaN");
  else
    {
      /* The shortest of these that reads back as @value: 0.025, not
       * 0.025000000000000001. */
      g_ascii_formatd (buf, sizeof buf, "%.15g", value);
      if (g_ascii_strtod (buf, NULL) != value)
        g_ascii_formatd (buf, sizeof buf, "%.17g", value);
      g_string_append (out, buf);
    }
}

void
mv_prom_sample_u64 (GString *out, const char *name, const char *const *labels, guint64 value)
{
  append_name (out, name, labels);
  g_string_append_printf (out, " %" G_GUINT64_FORMAT "\n", value);
}

void
mv_prom_sample_double (GString *out, const char *name, const char *const *labels, double value)
{
  append_name (out, name, labels);
  g_string_append_c (out, ' ');
  mv_prom_append_double (out, value);
  g_string_append_c (out, '\n');
}
