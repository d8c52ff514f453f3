/* Versions of a hypervisor, and which of them are deprecated. */
#include "versions.h"
#include "cloud-hypervisor.h"
#include "firecracker.h"
#include "core/errors.h"

#include <string.h>

char *
mv_binary_version (const char *binary, const char *prefix, GError **error)
{
  const char *argv[] = { binary, "--version", NULL };
  g_autofree char *out = NULL;
  g_autofree char *err = NULL;
  g_autoptr (GError) local = NULL;
  g_autofree char *expected = g_strdup_printf ("%s v", prefix);
  g_auto (GStrv) lines = NULL;
  int status;

  if (!g_spawn_sync (NULL, (char **) argv, NULL, G_SPAWN_DEFAULT, NULL, NULL, &out, &err,
                     &status, &local))
    {
      g_set_error (error, MV_ERROR, MV_ERROR_UNAVAILABLE, "Could not run %s: %s", binary,
                   local->message);
      return NULL;
    }
  if (!g_spawn_check_wait_status (status, &local))
    {
      g_set_error (error, MV_ERROR, MV_ERROR_UNAVAILABLE, "%s --version failed (%s): %s", binary,
                   local->message, g_strstrip (err));
      return NULL;
    }
  lines = g_strsplit (out, "\n", 2);
  if (!lines[0] || !g_str_has_prefix (lines[0], expected) || !lines[0][strlen (expected)])
    {
      g_set_error (error, MV_ERROR, MV_ERROR_UNAVAILABLE,
                   "%s --version did not say \"%s<version>\" but: %s", binary, expected,
                   lines[0] ? lines[0] : "");
      return NULL;
    }
  return g_strstrip (g_strdup (lines[0] + strlen (expected)));
}

typedef MvStarter *(*StarterNew) (const char *binary, GError **error);

static gboolean
add_type (GPtrArray *starters, GKeyFile *config, const char *type, const char *default_binary,
          StarterNew starter_new, GError **error)
{
  g_auto (GStrv) binaries = NULL;
  guint first = starters->len;

  if (config && g_key_file_has_key (config, type, "binaries", NULL))
    {
      binaries = g_key_file_get_string_list (config, type, "binaries", NULL, error);
      if (!binaries)
        return FALSE;
    }
  else
    {
      g_autofree char *found = g_find_program_in_path (default_binary);
      /* Not installed and not configured: the type is not offered. */
      if (!found)
        return TRUE;
      binaries = g_new0 (char *, 2);
      binaries[0] = g_steal_pointer (&found);
    }

  for (guint i = 0; binaries[i]; i++)
    {
      g_autoptr (GError) local = NULL;
      MvStarter *starter;

      g_strstrip (binaries[i]);
      if (!*binaries[i])
        continue;
      starter = starter_new (binaries[i], &local);
      if (!starter && g_error_matches (local, MV_ERROR, MV_ERROR_UNAVAILABLE))
        {
          /* A binary that is missing takes only itself away: the daemon
           * serves everything else, and its machines fail to start with
           * an error that says why. */
          g_warning ("[%s] binaries: %s; that version is not offered", type, local->message);
          continue;
        }
      if (!starter)
        {
          g_set_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT, "[%s] binaries: %s", type,
                       local->message);
          return FALSE;
        }
      for (guint j = first; j < starters->len; j++)
        {
          MvStarter *other = starters->pdata[j];
          if (mv_version_equal (other->version (other), starter->version (starter)))
            {
              g_set_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT,
                           "[%s] binaries: %s and another binary are both version %s; "
                           "list each version once", type, binaries[i],
                           starter->version (starter));
              starter->free (starter);
              return FALSE;
            }
        }
      g_ptr_array_add (starters, starter);
    }
  return TRUE;
}

GPtrArray *
mv_http_backends_starters_from_config (GKeyFile *config, GError **error)
{
  g_autoptr (GPtrArray) starters = g_ptr_array_new_with_free_func ((GDestroyNotify) mv_starter_free);

  if (!add_type (starters, config, MV_CLOUD_HYPERVISOR_TYPE, MV_CLOUD_HYPERVISOR_BINARY,
                 mv_cloud_hypervisor_starter_new, error) ||
      !add_type (starters, config, MV_FIRECRACKER_TYPE, MV_FIRECRACKER_BINARY,
                 mv_firecracker_starter_new, error))
    return NULL;
  return g_steal_pointer (&starters);
}

MvStarter *
mv_starters_pick (GPtrArray *starters, const char *type, const char *version,
                  gboolean *deprecated, GError **error)
{
  g_autoptr (GString) known = g_string_new (NULL);
  gboolean first = TRUE;

  for (guint i = 0; i < starters->len; i++)
    {
      MvStarter *s = starters->pdata[i];

      if (strcmp (s->type, type) != 0)
        continue;
      if (!version || !*version || mv_version_equal (s->version (s), version))
        {
          if (deprecated)
            *deprecated = !first;
          return s;
        }
      g_string_append_printf (known, "%s%s", known->len ? ", " : "", s->version (s));
      first = FALSE;
    }
  if (known->len == 0)
    g_set_error (error, MV_ERROR, MV_ERROR_UNAVAILABLE, "hypervisor_type: %s is not installed "
                 "or not configured", type);
  else
    g_set_error (error, MV_ERROR, MV_ERROR_UNAVAILABLE, "hypervisor_version: %s %s is not "
                 "configured; there is only %s", type, version, known->str);
  return NULL;
}

GStrv
mv_starters_deprecated_versions (GPtrArray *starters, const char *type)
{
  g_autoptr (GStrvBuilder) builder = g_strv_builder_new ();
  gboolean first = TRUE;

  for (guint i = 0; i < starters->len; i++)
    {
      MvStarter *s = starters->pdata[i];

      if (strcmp (s->type, type) != 0)
        continue;
      if (!first)
        g_strv_builder_add (builder, s->version (s));
      first = FALSE;
    }
  return g_strv_builder_end (builder);
}

gboolean
mv_starters_is_deprecated (GPtrArray *starters, const char *type, const char *version)
{
  g_auto (GStrv) deprecated = NULL;

  if (!version || !*version)
    return FALSE;
  deprecated = mv_starters_deprecated_versions (starters, type);
  for (guint i = 0; deprecated[i]; i++)
    if (mv_version_equal (deprecated[i], version))
      return TRUE;
  return FALSE;
}

gboolean
mv_starters_warn_if_deprecated (GPtrArray *starters, const char *type, const char *version,
                                const char *what)
{
  MvStarter *current = NULL;

  if (!mv_starters_is_deprecated (starters, type, version))
    return FALSE;
  current = mv_starters_pick (starters, type, NULL, NULL, NULL);
  g_warning ("%s uses %s %s, which is deprecated: move it to %s %s before a release "
             "removes %s", what, type, version, type, current ? current->version (current) : "?",
             version);
  return TRUE;
}
