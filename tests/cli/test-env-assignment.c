/* exec's -e KEY=VALUE. */
#include "env-assignment.h"

static void
assert_splits (const char *text, const char *key, const char *value)
{
  g_autofree char *k = NULL, *v = NULL;

  g_assert_true (mv_env_assignment_parse (text, &k, &v));
  g_assert_cmpstr (k, ==, key);
  g_assert_cmpstr (v, ==, value);
}

static void
assert_refused (const char *text)
{
  char *k = NULL, *v = NULL;

  g_assert_false (mv_env_assignment_parse (text, &k, &v));
  g_assert_null (k);
  g_assert_null (v);
}

static void
test_split (void)
{
  assert_splits ("FOO=bar", "FOO", "bar");
  assert_splits ("FOO=", "FOO", "");
  /* The first '=' splits; the value keeps the rest. */
  assert_splits ("URL=a=b=c", "URL", "a=b=c");
  assert_splits ("X= spaced out ", "X", " spaced out ");
  assert_splits ("lower_case1=v", "lower_case1", "v");
}

static void
test_refused (void)
{
  assert_refused ("");
  assert_refused ("FOO");
  assert_refused ("=bar");
  assert_refused ("=");
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/env-assignment/split", test_split);
  g_test_add_func ("/env-assignment/refused", test_refused);
  return g_test_run ();
}
