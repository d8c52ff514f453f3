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
