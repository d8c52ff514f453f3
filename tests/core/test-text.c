#include <string.h>

#include "core/errors.h"
#include "core/text.h"

static void
assert_excerpt (const char *text, gssize length, gsize max, const char *expected)
{
  g_autofree char *excerpt = mv_text_excerpt (text, length, max);

  g_assert_cmpstr (excerpt, ==, expected);
  g_assert_true (g_utf8_validate (excerpt, -1, NULL));
}

static void
test_excerpt (void)
{
  g_autofree char *long_text = g_strnfill (1000, 'a');
  g_autofree char *cut = NULL;

  assert_excerpt ("web", -1, 40, "web");
  assert_excerpt ("caf\xc3\xa9", -1, 40, "caf\xc3\xa9");
  assert_excerpt ("a\"b\\c\nd\te", -1, 40, "a\\\"b\\\\c\\nd\\te");
  assert_excerpt ("\x01\x7f", -1, 40, "\\u{0001}\\u{007F}");
  assert_excerpt ("\xc2\x85", -1, 40, "\\u{0085}");                    /* C1 */
  assert_excerpt ("\xe2\x80\xae" "abc", -1, 40, "\\u{202E}abc");        /* RLO */
  assert_excerpt ("\xe2\x80\x8b", -1, 40, "\\u{200B}");                 /* zero width */
  assert_excerpt ("a\xffz", -1, 40, "a\\xffz");
  assert_excerpt ("ab\0cd", 5, 40, "ab\\u{0000}cd");
  assert_excerpt (NULL, -1, 40, "");

  cut = mv_text_excerpt (long_text, -1, MV_EXCERPT_MAX_BYTES);
  g_assert_true (g_str_has_suffix (cut, "…"));
  g_assert_cmpuint (strlen (cut), ==, MV_EXCERPT_MAX_BYTES + strlen ("…"));
  /* An escape is not cut in the middle, nor a character. */
  assert_excerpt ("abc\x01", -1, 6, "abc…");
  assert_excerpt ("ab\xc3\xa9", -1, 3, "ab…");
}

static void
test_name_chars (void)
{
  static const gunichar refused[] = {
    0x00, 0x09, 0x1F, 0x7F,                   /* C0 and DEL */
    0x80, 0x85, 0x9F,                         /* C1 */
    0x202A, 0x202B, 0x202C, 0x202D, 0x202E,   /* bidirectional embeddings and overrides */
    0x2066, 0x2067, 0x2068, 0x2069,           /* bidirectional isolates */
    0x200E, 0x200F, 0x061C,                   /* bidirectional marks */
    0x200B, 0x200C, 0x200D, 0x2060, 0xFEFF,   /* zero width */
    0x00AD, 0x034F, 0x115F, 0x3164, 0xFFA0,   /* soft hyphen, joiner, fillers */
    0xFE0F, 0xE0041, 0xE0100,                 /* variation selectors, tags */
    0x00A0, 0x2002, 0x3000,                   /* spaces that look like U+0020 */
    0x2028, 0x2029,                           /* line and paragraph separators */
    0xE000, 0xF0000,                          /* private use */
    0xFFFE, 0xFFFF, 0x0378,                   /* not characters, unassigned */
  };
  static const gunichar allowed[] = { 'a', 'Z', '0', '-', '_', '.', ' ', 0xE9, 0x4E2D, 0x1F600 };

  for (guint i = 0; i < G_N_ELEMENTS (refused); i++)
    {
      if (mv_text_name_char_problem (refused[i]) == NULL)
        g_error ("U+%04X is allowed in names", refused[i]);
    }
  for (guint i = 0; i < G_N_ELEMENTS (allowed); i++)
    g_assert_null (mv_text_name_char_problem (allowed[i]));
  g_assert_cmpstr (mv_text_name_char_problem (0x202E), ==, "a bidirectional control");
  g_assert_cmpstr (mv_text_name_char_problem (0x85), ==, "a C1 control character");
}

static void
test_check_name (void)
{
  static const struct {
    const char *name;
    const char *message;
  } bad[] = {
    { "web\xe2\x80\xae" "gpj.exe", "name: U+202E is not allowed in a name (a bidirectional control)" },
    { "\xe2\x81\xa6web", "name: U+2066 is not allowed in a name (a bidirectional control)" },
    { "we\xc2\x85" "b", "name: U+0085 is not allowed in a name (a C1 control character)" },
    { "we\xe2\x80\x8b" "b", "name: U+200B is not allowed in a name (an invisible character)" },
    { "web\xc2\xa0" "1", "name: U+00A0 is not allowed in a name (a space other than U+0020)" },
    { "cafe\xcc\x81", "name: not in Unicode normalization form C (write composed characters)" },
    { "\xcc\x81" "a", "name: starts with the combining mark U+0301" },
    { " web", "name: starts or ends with a space" },
    { "web ", "name: starts or ends with a space" },
  };
  static const char *const good[] = { "web", "Web 1", "caf\xc3\xa9", "\xe4\xb8\xad\xe6\x96\x87" };

  for (guint i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      g_autoptr(GError) error = NULL;

      g_assert_false (mv_text_check_name_chars ("name", "name", bad[i].name, &error));
      g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
      g_assert_cmpstr (error->message, ==, bad[i].message);
    }
  {
    g_autoptr(GError) error = NULL;

    g_assert_false (mv_text_check_name_chars ("labels", "key", "a\xe2\x80\xae", &error));
    g_assert_cmpstr (error->message, ==,
                     "labels: U+202E is not allowed in a key (a bidirectional control)");
  }
  for (guint i = 0; i < G_N_ELEMENTS (good); i++)
    {
      g_autoptr(GError) error = NULL;

      g_assert_true (mv_text_check_name_chars ("name", "name", good[i], &error));
      g_assert_no_error (error);
    }
}

static void
test_bytes (void)
{
  static const struct {
    guint64 value;
    const char *text;
  } cases[] = {
    { 0, "0" },
    { 1000, "1000" },
    { 1024, "1024 (1 KiB)" },
    { 33554432, "33554432 (32 MiB)" },
    { G_GUINT64_CONSTANT (1) << 40, "1099511627776 (1 TiB)" },
    { (G_GUINT64_CONSTANT (2) << 40) + (2 << 20), "2199025352704 (2.0 TiB)" },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *text = mv_text_bytes (cases[i].value);

      g_assert_cmpstr (text, ==, cases[i].text);
    }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);

  g_test_add_func ("/text/excerpt", test_excerpt);
  g_test_add_func ("/text/name-chars", test_name_chars);
  g_test_add_func ("/text/check-name", test_check_name);
  g_test_add_func ("/text/bytes", test_bytes);

  return g_test_run ();
}
