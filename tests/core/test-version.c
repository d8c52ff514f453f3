#include "core/version.h"

static void
test_at_least (void)
{
  static const struct {
    const char *version;
    guint       major, minor;
    gboolean    at_least;
  } cases[] = {
    { "1.16.0", 1, 16, TRUE },
    { "v1.16.0", 1, 16, TRUE },
    { "1.16", 1, 16, TRUE },
    { "1.17.2", 1, 16, TRUE },
    { "2.0.0", 1, 16, TRUE },
    { "2", 1, 16, TRUE },
    { "1.15.9", 1, 16, FALSE },
    { "1.9.0", 1, 16, FALSE },
    { "1", 1, 16, FALSE },
    { "0.99.0", 1, 16, FALSE },
    { "53.0.0", 52, 0, TRUE },
    { "", 1, 0, FALSE },
    { "v", 1, 0, FALSE },
    { "1.x", 1, 0, FALSE },
    { "dev", 0, 0, FALSE },
    { NULL, 0, 0, FALSE },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_test_message ("%s >= %u.%u", cases[i].version, cases[i].major, cases[i].minor);
      g_assert_cmpint (mv_version_at_least (cases[i].version, cases[i].major, cases[i].minor),
                       ==, cases[i].at_least);
    }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/version/at-least", test_at_least);
  return g_test_run ();
}
