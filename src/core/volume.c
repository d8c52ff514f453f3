/* A volume's spec and record. */
#include "volume.h"
#include "errors.h"
#include "json-strict.h"
#include "machine.h"
#include "text.h"

void
mv_volume_free (MvVolume *volume)
{
  if (volume == NULL)
    return;
  g_free (volume->id);
  g_free (volume->name);
  g_free (volume);
}

MvVolume *
mv_volume_copy (const MvVolume *volume)
{
  MvVolume *copy = g_new0 (MvVolume, 1);

  copy->id = g_strdup (volume->id);
  copy->name = g_strdup (volume->name);
  copy->size_bytes = volume->size_bytes;
  copy->created_at = volume->created_at;
  return copy;
}

gboolean
mv_volume_validate (const MvVolume *volume, GError **error)
{
  if (!mv_name_validate ("name", volume->name, error))
    return FALSE;
  if (volume->size_bytes < MV_VOLUME_MIN_BYTES || volume->size_bytes > MV_VOLUME_MAX_BYTES)
    return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT,
                         "size_bytes: %" G_GUINT64_FORMAT " is outside %" G_GUINT64_FORMAT
                         " (16 MiB) to %" G_GUINT64_FORMAT " (16 TiB)", volume->size_bytes,
                         MV_VOLUME_MIN_BYTES, MV_VOLUME_MAX_BYTES);
  return TRUE;
}

static gboolean
read_size (const MvJson *object, guint64 *out, GError **error)
{
  const MvJson *node = mv_json_required_member (object, "size_bytes", error);
  g_autofree char *written = NULL;
  gint64 value = 0;

  if (node == NULL || !mv_json_read_integer (node, "size_bytes", &value, &written, error))
    return FALSE;
  if (value < 0 || written != NULL)
    return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT,
                         "size_bytes: %s is outside %" G_GUINT64_FORMAT " (16 MiB) to %"
                         G_GUINT64_FORMAT " (16 TiB)", written ? written : "a negative size",
                         MV_VOLUME_MIN_BYTES, MV_VOLUME_MAX_BYTES);
  *out = (guint64) value;
  return TRUE;
}

static const MvJson *
parse_object (const char *data, gssize len, const char *what, MvJsonDoc **doc, GError **error)
{
  static const MvJsonLimits limits = { .max_bytes = MV_VOLUME_SPEC_MAX_BYTES, .max_depth = 2 };
  const MvJson *root;

  *doc = mv_json_read (data, len, &limits, what, error);
  if (*doc == NULL)
    return NULL;
  root = mv_json_doc_root (*doc);
  if (!mv_json_is_object (root))
    {
      mv_json_wrong_type (root, what, "an object", error);
      return NULL;
    }
  return root;
}

MvVolume *
mv_volume_spec_from_json (const char *json, GError **error)
{
  static const char *const known[] = { "name", "size_bytes", NULL };
  g_autoptr (MvJsonDoc) doc = NULL;
  g_autoptr (MvVolume) volume = g_new0 (MvVolume, 1);
  const MvJson *object = parse_object (json, -1, "spec", &doc, error);
  const MvJson *name;
  const char *text = NULL;

  if (object == NULL || !mv_json_reject_unknown_members (object, NULL, known, error))
    return NULL;
  if (!(name = mv_json_required_member (object, "name", error)) ||
      !mv_json_read_string (name, "name", &text, error))
    return NULL;
  volume->name = g_strdup (text);
  if (!read_size (object, &volume->size_bytes, error) || !mv_volume_validate (volume, error))
    return NULL;
  return g_steal_pointer (&volume);
}

char *
mv_volume_to_json (const MvVolume *volume)
{
  g_autoptr (JsonBuilder) builder = json_builder_new ();
  g_autoptr (GDateTime) created = g_date_time_new_from_unix_utc (volume->created_at / G_USEC_PER_SEC);
  g_autofree char *created_text = g_date_time_format_iso8601 (created);
  g_autoptr (JsonNode) root = NULL;

  json_builder_begin_object (builder);
  json_builder_set_member_name (builder, "format");
  json_builder_add_int_value (builder, MV_VOLUME_RECORD_FORMAT);
  json_builder_set_member_name (builder, "id");
  json_builder_add_string_value (builder, volume->id);
  json_builder_set_member_name (builder, "name");
  json_builder_add_string_value (builder, volume->name);
  json_builder_set_member_name (builder, "size_bytes");
  json_builder_add_int_value (builder, (gint64) volume->size_bytes);
  json_builder_set_member_name (builder, "created_at");
  json_builder_add_string_value (builder, created_text);
  json_builder_end_object (builder);
  root = json_builder_get_root (builder);
  return json_to_string (root, TRUE);
}

MvVolume *
mv_volume_from_json (const char *data, gsize len, GError **error)
{
  static const char *const known[] = { "format", "id", "name", "size_bytes", "created_at", NULL };
  g_autoptr (MvJsonDoc) doc = NULL;
  g_autoptr (MvVolume) volume = g_new0 (MvVolume, 1);
  g_autoptr (GDateTime) created = NULL;
  const MvJson *object = parse_object (data, (gssize) len, "volume.json", &doc, error);
  const MvJson *node;
  const char *text = NULL;
  gint64 format = 0;

  if (object == NULL || !mv_json_reject_unknown_members (object, NULL, known, error))
    return NULL;
  if (!(node = mv_json_required_member (object, "format", error)) ||
      !mv_json_read_int (node, "format", 0, G_MAXINT32, &format, error))
    return NULL;
  if (format != MV_VOLUME_RECORD_FORMAT)
    return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT, "format: %" G_GINT64_FORMAT
                         " is not the format %d this microvmd reads", format,
                         MV_VOLUME_RECORD_FORMAT), NULL;
  if (!(node = mv_json_required_member (object, "id", error)) ||
      !mv_json_read_string (node, "id", &text, error) || !mv_id_validate (text, error))
    return NULL;
  volume->id = g_strdup (text);
  if (!(node = mv_json_required_member (object, "name", error)) ||
      !mv_json_read_string (node, "name", &text, error))
    return NULL;
  volume->name = g_strdup (text);
  if (!read_size (object, &volume->size_bytes, error))
    return NULL;
  if (!(node = mv_json_required_member (object, "created_at", error)) ||
      !mv_json_read_string (node, "created_at", &text, error))
    return NULL;
  created = g_date_time_new_from_iso8601 (text, NULL);
  if (created == NULL)
    return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT,
                         "created_at: not an ISO 8601 time with a time zone"), NULL;
  volume->created_at = g_date_time_to_unix (created) * G_USEC_PER_SEC;
  if (!mv_volume_validate (volume, error))
    return NULL;
  return g_steal_pointer (&volume);
}
