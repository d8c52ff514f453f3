#include "reserved-dirs.h"

#include <stdlib.h>
#include <string.h>

G_LOCK_DEFINE_STATIC (reserved);
static GPtrArray *reserved;

gboolean
mv_path_is_beneath (const char *path, const char *dir)
{
  gsize len = strlen (dir);

  while (len > 1 && dir[len - 1] == '/')
    len--;
  if (len == 1 && dir[0] == '/')
    return path[0] == '/';
  return strncmp (path, dir, len) == 0 && (path[len] == '\0' || path[len] == '/');
}

void
mv_reserved_dirs_add (const char *dir)
{
  char *resolved = realpath (dir, NULL);

  G_LOCK (reserved);
  if (!reserved)
    reserved = g_ptr_array_new_with_free_func (g_free);
  /* malloc'd by realpath; g_free is free in GLib >= 2.46. */
  g_ptr_array_add (reserved, resolved ? resolved : g_strdup (dir));
  G_UNLOCK (reserved);
}

static char *
find (const char *a, gboolean a_in_reserved)
{
  char *found = NULL;

  G_LOCK (reserved);
  for (guint i = 0; reserved && i < reserved->len && !found; i++)
    {
      const char *dir = reserved->pdata[i];

      if (a_in_reserved ? mv_path_is_beneath (a, dir) : mv_path_is_beneath (dir, a))
        found = g_strdup (dir);
    }
  G_UNLOCK (reserved);
  return found;
}

char *
mv_reserved_dirs_holding (const char *path)
{
  return find (path, TRUE);
}

char *
mv_reserved_dirs_within (const char *dir)
{
  return find (dir, FALSE);
}
