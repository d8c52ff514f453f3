/* Console and guest text as microvmctl prints it. */
#include "terminal-text.h"

static void
assert_shown (const char *text, const char *shown)
{
  g_autofree char *out = mv_terminal_text (text, -1);

  g_assert_cmpstr (out, ==, shown);
}

static void
test_carriage_returns (void)
{
  assert_shown ("login: \r\n", "login: \n");
  assert_shown ("a\r\nb\r\n", "a\nb\n");
  /* A lone CR would let the rest overwrite what came before. */
  assert_shown ("ok\rFAILED", "okFAILED");
  assert_shown ("\r\r\n", "\n");
  assert_shown ("end\r", "end");
}

static void
test_controls (void)
{
  /* ESC starts every cursor and colour sequence. */
  assert_shown ("\033[2J\033[Hfake prompt$ ", "^[[2J^[[Hfake prompt$ ");
  assert_shown ("bell\a", "bell^G");
  assert_shown ("back\bspace", "back^Hspace");
  assert_shown ("\001\037", "^A^_");
  assert_shown ("del\177", "del^?");
  /* Tabs and newlines are text. */
  assert_shown ("a\tb\nc", "a\tb\nc");
}

static void
test_other_bytes_kept (void)
{
  assert_shown ("", "");
  assert_shown ("plain text ~!", "plain text ~!");
  assert_shown ("gr\303\274\303\237e", "gr\303\274\303\237e");

  /* A length stops before the end. */
  g_autofree char *part = mv_terminal_text ("ab\rcd", 3);
  g_assert_cmpstr (part, ==, "ab");
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/terminal-text/carriage-returns", test_carriage_returns);
  g_test_add_func ("/terminal-text/controls", test_controls);
  g_test_add_func ("/terminal-text/other-bytes-kept", test_other_bytes_kept);
  return g_test_run ();
}
