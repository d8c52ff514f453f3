#include "runtimes.h"
#include "core/errors.h"
#include "core/version.h"

typedef struct {
  MvRuntime *runtime;
  char      *version;
} Entry;

struct _MvRuntimes {
  GArray *entries;       /* Entry, in the order added */
  char   *default_type;
};

static void
entry_clear (Entry *entry)
{
  g_free (entry->version);
}

MvRuntimes *
mv_runtimes_new (const char *default_type)
{
  MvRuntimes *runtimes = g_new0 (MvRuntimes, 1);

  runtimes->entries = g_array_new (FALSE, TRUE, sizeof (Entry));
  g_array_set_clear_func (runtimes->entries, (GDestroyNotify) entry_clear);
  runtimes->default_type = g_strdup (default_type);
  return runtimes;
}

void
mv_runtimes_free (MvRuntimes *runtimes)
{
  if (!runtimes)
    return;
  g_array_unref (runtimes->entries);
  g_free (runtimes->default_type);
  g_free (runtimes);
}

void
mv_runtimes_add (MvRuntimes *runtimes, MvRuntime *runtime, const char *version)
{
  Entry entry = { runtime, g_strdup (version ? version : "") };

  g_array_append_val (runtimes->entries, entry);
}

guint
mv_runtimes_count (MvRuntimes *runtimes)
{
  return runtimes->entries->len;
}

MvRuntime *
mv_runtimes_get (MvRuntimes *runtimes, guint index)
{
  g_return_val_if_fail (index < runtimes->entries->len, NULL);
  return g_array_index (runtimes->entries, Entry, index).runtime;
}

static const Entry *
find (MvRuntimes *runtimes, const char *type, const char *version)
{
  if (!type || !*type)
    type = runtimes->default_type;
  for (guint i = 0; i < runtimes->entries->len; i++)
    {
      const Entry *e = &g_array_index (runtimes->entries, Entry, i);

      if (type && g_strcmp0 (e->runtime->type, type) != 0)
        continue;
      if (!version || !*version || mv_version_equal (e->version, version))
        return e;
    }
  return NULL;
}

MvRuntime *
mv_runtimes_find (MvRuntimes *runtimes, const char *type, const char *version)
{
  const Entry *e = find (runtimes, type, version);

  return e ? e->runtime : NULL;
}

MvRuntime *
mv_runtimes_for_spec (MvRuntimes *runtimes, const MvSpec *spec, GError **error)
{
  MvRuntime *rt = mv_runtimes_find (runtimes, spec->hypervisor_type, spec->hypervisor_version);
  g_autoptr (GString) have = NULL;

  if (rt)
    return rt;
  if (!spec->hypervisor_version || !mv_runtimes_find (runtimes, spec->hypervisor_type, NULL))
    {
      g_set_error (error, MV_ERROR, MV_ERROR_UNSUPPORTED,
                   "hypervisor_type: %s is not available on this host",
                   spec->hypervisor_type ? spec->hypervisor_type : "no hypervisor");
      return NULL;
    }
  have = g_string_new (NULL);
  for (guint i = 0; i < runtimes->entries->len; i++)
    {
      const Entry *e = &g_array_index (runtimes->entries, Entry, i);

      if (g_strcmp0 (e->runtime->type, spec->hypervisor_type) == 0)
        g_string_append_printf (have, "%s%s", have->len ? ", " : "", e->version);
    }
  g_set_error (error, MV_ERROR, MV_ERROR_UNSUPPORTED,
               "hypervisor_version: %s %s is not available on this host (it has %s)",
               spec->hypervisor_type, spec->hypervisor_version, have->str);
  return NULL;
}

const char *
mv_runtimes_version (MvRuntimes *runtimes, MvRuntime *runtime)
{
  for (guint i = 0; i < runtimes->entries->len; i++)
    {
      const Entry *e = &g_array_index (runtimes->entries, Entry, i);

      if (e->runtime == runtime)
        return e->version;
    }
  return "";
}

gboolean
mv_runtimes_is_deprecated (MvRuntimes *runtimes, const char *type, const char *version)
{
  const Entry *e = version && *version ? find (runtimes, type, version) : NULL;

  return e && e != find (runtimes, type, NULL);
}
