#include "patches.h"

#include "core/errors.h"
#include "core/machine.h"

/* The latest time a format-1 timestamp may hold: 9999-12-31T23:59:59Z,
 * the last second an ISO 8601 year of four digits can say. */
#define MAX_EPOCH_SECONDS G_GINT64_CONSTANT (253402300799)

static gboolean
get_format (JsonObject *record, gint64 *format, GError **error)
{
  JsonNode *node = json_object_get_member (record, "format");

  if (node == NULL)
    {
      g_set_error_literal (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT,
                           "format: missing; every record carries its format number");
      return FALSE;
    }
  if (!JSON_NODE_HOLDS_VALUE (node) || json_node_get_value_type (node) != G_TYPE_INT64)
    {
      g_set_error_literal (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT,
                           "format: expected an integer");
      return FALSE;
    }
  *format = json_node_get_int (node);
  return TRUE;
}

gboolean
mv_patches_apply (JsonObject *record, const MvPatch *patches, gsize n_patches,
                  gint64 current, gboolean *changed, GError **error)
{
  gint64 format;

  if (changed != NULL)
    *changed = FALSE;

  if (!get_format (record, &format, error))
    return FALSE;

  if (format > current)
    {
      g_set_error (error, MV_ERROR, MV_ERROR_UNSUPPORTED,
                   "format %" G_GINT64_FORMAT " is newer than this daemon supports (%"
                   G_GINT64_FORMAT ")", format, current);
      return FALSE;
    }

  while (format < current)
    {
      const MvPatch *patch = NULL;
      gint64 upgraded;

      for (gsize i = 0; i < n_patches && patch == NULL; i++)
        if (patches[i].from == format)
          patch = &patches[i];

      if (patch == NULL)
        {
          g_set_error (error, MV_ERROR, MV_ERROR_UNSUPPORTED,
                       "format %" G_GINT64_FORMAT " is older than any this daemon can upgrade",
                       format);
          return FALSE;
        }

      if (!patch->apply (record, error))
        {
          g_prefix_error (error, "upgrading from format %" G_GINT64_FORMAT ": ", format);
          return FALSE;
        }

      /* A patch that does not land exactly on the next format would make
       * the loop skip a patch or run one twice. */
      if (!get_format (record, &upgraded, NULL) || upgraded != format + 1)
        {
          g_set_error (error, MV_ERROR, MV_ERROR_FAILED,
                       "the patch from format %" G_GINT64_FORMAT " did not set format %"
                       G_GINT64_FORMAT, format, format + 1);
          return FALSE;
        }

      format = upgraded;
      if (changed != NULL)
        *changed = TRUE;
    }

  return TRUE;
}

/* Format 1 kept times as integer seconds since the epoch; format 2 keeps
 * ISO 8601 UTC strings with microseconds. */
static char *
iso8601_from_seconds (JsonObject *record, const char *field, GError **error)
{
  JsonNode *node = json_object_get_member (record, field);
  g_autoptr(GDateTime) time = NULL;
  gint64 seconds;

  if (node == NULL)
    {
      g_set_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT, "%s: missing", field);
      return NULL;
    }
  if (!JSON_NODE_HOLDS_VALUE (node) || json_node_get_value_type (node) != G_TYPE_INT64)
    {
      g_set_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT,
                   "%s: expected integer seconds since the epoch", field);
      return NULL;
    }

  seconds = json_node_get_int (node);
  if (seconds < 0 || seconds > MAX_EPOCH_SECONDS)
    {
      g_set_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT,
                   "%s: %" G_GINT64_FORMAT " is outside 0 to %" G_GINT64_FORMAT,
                   field, seconds, MAX_EPOCH_SECONDS);
      return NULL;
    }

  time = g_date_time_new_from_unix_utc (seconds);
  return g_date_time_format (time, "%Y-%m-%dT%H:%M:%S.%fZ");
}

static gboolean
config_1_to_2 (JsonObject *record, GError **error)
{
  g_autofree char *created = NULL;
  g_autofree char *updated = NULL;

  /* Both fields are converted before either is replaced, so a failure
   * leaves the object as it was. */
  created = iso8601_from_seconds (record, "created_at", error);
  if (created == NULL)
    return FALSE;
  /* Format 1 wrote updated_at only once a machine had been changed. */
  if (json_object_has_member (record, "updated_at"))
    {
      updated = iso8601_from_seconds (record, "updated_at", error);
      if (updated == NULL)
        return FALSE;
    }

  json_object_set_string_member (record, "created_at", created);
  json_object_set_string_member (record, "updated_at", updated != NULL ? updated : created);
  json_object_set_int_member (record, "format", 2);
  return TRUE;
}

static const MvPatch config_patches[] = {
  { 1, config_1_to_2 },
};

gboolean
mv_patches_upgrade_config (JsonObject *record, gboolean *changed, GError **error)
{
  G_STATIC_ASSERT (G_N_ELEMENTS (config_patches) == MV_CONFIG_FORMAT - 1);

  return mv_patches_apply (record, config_patches, G_N_ELEMENTS (config_patches),
                           MV_CONFIG_FORMAT, changed, error);
}

gboolean
mv_patches_upgrade_status (JsonObject *record, gboolean *changed, GError **error)
{
  /* status.json has had one format so far; its first patch goes here. */
  return mv_patches_apply (record, NULL, 0, MV_STATUS_FORMAT, changed, error);
}
