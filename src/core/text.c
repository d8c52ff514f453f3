/* Excerpts for messages and the characters of names. Pure. */
#include "text.h"
#include "errors.h"

#include <string.h>

/* Unicode's Default_Ignorable_Code_Point: drawn as nothing at all, so a
 * name holding one looks like the name without it. The formatting
 * characters among them are also caught by their category; the rest
 * (fillers, variation selectors) are letters or marks that show nothing. */
static const struct {
  gunichar first, last;
} invisible[] = {
  { 0x00AD, 0x00AD }, { 0x034F, 0x034F }, { 0x061C, 0x061C }, { 0x115F, 0x1160 },
  { 0x17B4, 0x17B5 }, { 0x180B, 0x180F }, { 0x200B, 0x200F }, { 0x202A, 0x202E },
  { 0x2060, 0x206F }, { 0x3164, 0x3164 }, { 0xFE00, 0xFE0F }, { 0xFEFF, 0xFEFF },
  { 0xFFA0, 0xFFA0 }, { 0xFFF0, 0xFFF8 }, { 0x1BCA0, 0x1BCA3 }, { 0x1D173, 0x1D17A },
  { 0xE0000, 0xE0FFF },
};

static gboolean
is_bidi_control (gunichar c)
{
  return (c >= 0x202A && c <= 0x202E) || (c >= 0x2066 && c <= 0x2069) ||
         c == 0x200E || c == 0x200F || c == 0x061C;
}

static gboolean
is_invisible (gunichar c)
{
  for (guint i = 0; i < G_N_ELEMENTS (invisible); i++)
    if (c >= invisible[i].first && c <= invisible[i].last)
      return TRUE;
  return FALSE;
}

const char *
mv_text_name_char_problem (gunichar c)
{
  if (c < 0x20 || c == 0x7F)
    return "a control character";
  if (c >= 0x80 && c <= 0x9F)
    return "a C1 control character";
  if (is_bidi_control (c))
    return "a bidirectional control";
  if (is_invisible (c))
    return "an invisible character";
  switch (g_unichar_type (c))
    {
    case G_UNICODE_CONTROL:
    case G_UNICODE_FORMAT:
      return "an invisible formatting character";
    case G_UNICODE_PRIVATE_USE:
      return "a private-use character";
    case G_UNICODE_UNASSIGNED:
    case G_UNICODE_SURROGATE:
      return "not an assigned character";
    case G_UNICODE_LINE_SEPARATOR:
    case G_UNICODE_PARAGRAPH_SEPARATOR:
      return "a line or paragraph separator";
    case G_UNICODE_SPACE_SEPARATOR:
      return c == ' ' ? NULL : "a space other than U+0020";
    default:
      return NULL;
    }
}

static gboolean
is_mark (gunichar c)
{
  GUnicodeType type = g_unichar_type (c);

  return type == G_UNICODE_NON_SPACING_MARK || type == G_UNICODE_SPACING_MARK ||
         type == G_UNICODE_ENCLOSING_MARK;
}

gboolean
mv_text_check_name_chars (const char *field, const char *noun, const char *name, GError **error)
{
  g_autofree char *nfc = NULL;
  gboolean ascii = TRUE;
  gsize len;

  g_return_val_if_fail (g_utf8_validate (name, -1, NULL), FALSE);

  for (const char *p = name; *p != '\0'; p = g_utf8_next_char (p))
    {
      gunichar c = g_utf8_get_char (p);
      const char *problem = mv_text_name_char_problem (c);

      ascii = ascii && c < 0x80;

      if (problem != NULL)
        {
          g_set_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT,
                       "%s: U+%04X is not allowed in a %s (%s)", field, c, noun, problem);
          return FALSE;
        }
    }
  if (*name != '\0' && is_mark (g_utf8_get_char (name)))
    {
      g_set_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT,
                   "%s: starts with the combining mark U+%04X", field, g_utf8_get_char (name));
      return FALSE;
    }
  len = strlen (name);
  if (len > 0 && (name[0] == ' ' || name[len - 1] == ' '))
    {
      g_set_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT,
                   "%s: starts or ends with a space", field);
      return FALSE;
    }
  /* "é" as one character or as "e" and a combining accent look the same.
   * ASCII is its own normal form. */
  if (ascii)
    return TRUE;
  nfc = g_utf8_normalize (name, -1, G_NORMALIZE_NFC);
  if (nfc == NULL || strcmp (nfc, name) != 0)
    {
      g_set_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT,
                   "%s: not in Unicode normalization form C (write composed characters)",
                   field);
      return FALSE;
    }
  return TRUE;
}

/* Appends the escaped form of one character or byte to @out. */
static void
append_escaped (GString *out, const char *p, gsize n, gunichar c, gboolean valid)
{
  if (!valid)
    {
      for (gsize i = 0; i < n; i++)
        g_string_append_printf (out, "\\x%02x", (guchar) p[i]);
      return;
    }
  switch (c)
    {
    case '"':
      g_string_append (out, "\\\"");
      return;
    case '\\':
      g_string_append (out, "\\\\");
      return;
    case '\n':
      g_string_append (out, "\\n");
      return;
    case '\t':
      g_string_append (out, "\\t");
      return;
    case '\r':
      g_string_append (out, "\\r");
      return;
    default:
      break;
    }
  if (c == ' ' || (g_unichar_isprint (c) && mv_text_name_char_problem (c) == NULL))
    g_string_append_len (out, p, n);
  else
    g_string_append_printf (out, "\\u{%04X}", c);
}

char *
mv_text_excerpt (const char *text, gssize length, gsize max_bytes)
{
  g_autoptr(GString) out = g_string_new (NULL);
  const char *end;
  const char *p;

  if (text == NULL)
    return g_strdup ("");
  end = text + (length < 0 ? strlen (text) : (gsize) length);
  for (p = text; p < end;)
    {
      /* GLib takes a NUL byte for a truncated sequence. */
      gunichar c = *p == '\0' ? 0 : g_utf8_get_char_validated (p, end - p);
      gboolean valid = c != (gunichar) -1 && c != (gunichar) -2;
      gsize n = valid ? (gsize) (g_utf8_next_char (p) - p) : 1;
      gsize before = out->len;

      append_escaped (out, p, n, c, valid);
      if (out->len > max_bytes)
        {
          g_string_truncate (out, before);
          break;
        }
      p += n;
    }
  if (p < end)
    g_string_append (out, "…");
  return g_string_free (g_steal_pointer (&out), FALSE);
}

char *
mv_text_bytes (guint64 value)
{
  static const struct {
    guint shift;
    const char *unit;
  } units[] = { { 40, "TiB" }, { 30, "GiB" }, { 20, "MiB" }, { 10, "KiB" } };

  if (value < 1024)
    return g_strdup_printf ("%" G_GUINT64_FORMAT, value);
  /* Exact where the number stays short, else the largest unit, rounded. */
  for (guint i = 0; i < G_N_ELEMENTS (units); i++)
    {
      guint64 size = G_GUINT64_CONSTANT (1) << units[i].shift;

      if (value % size == 0 && value / size < 1024)
        return g_strdup_printf ("%" G_GUINT64_FORMAT " (%" G_GUINT64_FORMAT " %s)",
                                value, value / size, units[i].unit);
    }
  for (guint i = 0;; i++)
    {
      guint64 size = G_GUINT64_CONSTANT (1) << units[i].shift;

      char number[G_ASCII_DTOSTR_BUF_SIZE];

      if (value >= size)
        return g_strdup_printf ("%" G_GUINT64_FORMAT " (%s %s)", value,
                                g_ascii_formatd (number, sizeof number, "%.1f",
                                                 (double) value / (double) size),
                                units[i].unit);
    }
}
