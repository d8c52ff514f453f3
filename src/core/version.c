#include "version.h"

const char *
mv_version_without_v (const char *version)
{
  return version && version[0] == 'v' ? version + 1 : version;
}

gboolean
mv_version_equal (const char *a, const char *b)
{
  return g_strcmp0 (mv_version_without_v (a), mv_version_without_v (b)) == 0;
}

/* A decimal number at *@p, moving past it; FALSE if there is none. */
static gboolean
read_number (const char **p, guint64 *out)
{
  char *end = NULL;

  if (!g_ascii_isdigit (**p))
    return FALSE;
  *out = g_ascii_strtoull (*p, &end, 10);
  *p = end;
  return TRUE;
}

gboolean
mv_version_at_least (const char *version, guint major, guint minor)
{
  const char *p = mv_version_without_v (version);
  guint64 have_major, have_minor = 0;

  if (!p || !read_number (&p, &have_major))
    return FALSE;
  if (*p == '.')
    {
      p++;
      if (!read_number (&p, &have_minor))
        return FALSE;
    }
  return have_major > major || (have_major == major && have_minor >= minor);
}
