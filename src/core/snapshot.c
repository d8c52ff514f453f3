/* A snapshot's record, its name and the spec of a fork of it. */
#include "snapshot.h"
#include "errors.h"
#include "json-strict.h"
#include "json-util.h"
#include "machine.h"

#include <string.h>

void
mv_snapshot_free (MvSnapshot *snapshot)
{
  if (snapshot == NULL)
    return;
  g_free (snapshot->id);
  g_free (snapshot->name);
  g_free (snapshot->machine_id);
  g_free (snapshot->machine_name);
  mv_spec_free (snapshot->spec);
  mv_image_config_free (snapshot->image_config);
  g_free (snapshot->address);
  g_free (snapshot->mac_address);
  g_free (snapshot->hypervisor_type);
  g_free (snapshot->hypervisor_version);
  g_free (snapshot->image_digest);
  g_free (snapshot);
}

MvSnapshot *
mv_snapshot_copy (const MvSnapshot *snapshot)
{
  MvSnapshot *copy = g_memdup2 (snapshot, sizeof *snapshot);

  copy->id = g_strdup (snapshot->id);
  copy->name = g_strdup (snapshot->name);
  copy->machine_id = g_strdup (snapshot->machine_id);
  copy->machine_name = g_strdup (snapshot->machine_name);
  copy->spec = snapshot->spec ? mv_spec_copy (snapshot->spec) : NULL;
  copy->image_config = mv_image_config_copy (snapshot->image_config);
  copy->address = g_strdup (snapshot->address);
  copy->mac_address = g_strdup (snapshot->mac_address);
  copy->hypervisor_type = g_strdup (snapshot->hypervisor_type);
  copy->hypervisor_version = g_strdup (snapshot->hypervisor_version);
  copy->image_digest = g_strdup (snapshot->image_digest);
  return copy;
}

const char *
mv_snapshot_kind_to_string (MvSnapshotKind kind)
{
  return kind == MV_SNAPSHOT_MEMORY ? "memory" : "disk";
}

static gboolean
kind_from_string (const char *text, MvSnapshotKind *kind)
{
  if (g_strcmp0 (text, "memory") == 0)
    *kind = MV_SNAPSHOT_MEMORY;
  else if (g_strcmp0 (text, "disk") == 0)
    *kind = MV_SNAPSHOT_DISK;
  else
    return FALSE;
  return TRUE;
}

char *
mv_snapshot_default_name (const char *machine_name, gint64 now)
{
  g_autoptr (GDateTime) time = g_date_time_new_from_unix_utc (now / G_USEC_PER_SEC);
  g_autofree char *stamp = g_date_time_format (time, "-%Y%m%d-%H%M%S");
  gsize room = MV_NAME_MAX_BYTES - strlen (stamp);
  gsize keep = strlen (machine_name);

  /* Shortened on a character's boundary, so that it stays UTF-8. */
  if (keep > room)
    keep = g_utf8_find_prev_char (machine_name, machine_name + room + 1) - machine_name;
  return g_strdup_printf ("%.*s%s", (int) keep, machine_name, stamp);
}

gboolean
mv_snapshot_validate (const MvSnapshot *snapshot, GError **error)
{
  if (!mv_id_validate (snapshot->id, error) || !mv_name_validate ("name", snapshot->name, error) ||
      !mv_id_validate (snapshot->machine_id, error))
    return FALSE;
  if (snapshot->spec == NULL)
    return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT, "spec: missing");
  if (snapshot->kind == MV_SNAPSHOT_MEMORY &&
      (!snapshot->hypervisor_type || !*snapshot->hypervisor_type))
    return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT,
                         "hypervisor_type: a memory snapshot names the hypervisor that froze it");
  if (snapshot->kind == MV_SNAPSHOT_DISK && !snapshot->has_disk)
    return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT,
                         "has_disk: a disk snapshot holds a disk");
  return TRUE;
}

static void
set_time (JsonObject *object, const char *name, gint64 usec)
{
  g_autoptr (GDateTime) time = g_date_time_new_from_unix_utc (usec / G_USEC_PER_SEC);
  g_autoptr (GDateTime) exact = g_date_time_add (time, usec % G_USEC_PER_SEC);
  g_autofree char *text = g_date_time_format_iso8601 (exact);

  json_object_set_string_member (object, name, text);
}

char *
mv_snapshot_to_json (const MvSnapshot *snapshot)
{
  g_autoptr (JsonNode) root = json_node_new (JSON_NODE_OBJECT);
  JsonObject *object = json_object_new ();

  json_object_set_int_member (object, "format", MV_SNAPSHOT_RECORD_FORMAT);
  json_object_set_string_member (object, "id", snapshot->id);
  json_object_set_string_member (object, "name", snapshot->name);
  json_object_set_string_member (object, "kind", mv_snapshot_kind_to_string (snapshot->kind));
  json_object_set_string_member (object, "machine_id", snapshot->machine_id);
  json_object_set_string_member (object, "machine_name", snapshot->machine_name);
  json_object_set_member (object, "spec", mv_spec_to_node (snapshot->spec, TRUE));
  if (snapshot->image_config)
    json_object_set_member (object, "image_config",
                            mv_image_config_to_node (snapshot->image_config));
  mv_json_set_optional_string (object, "address", snapshot->address);
  mv_json_set_optional_string (object, "mac_address", snapshot->mac_address);
  mv_json_set_optional_string (object, "hypervisor_type", snapshot->hypervisor_type);
  mv_json_set_optional_string (object, "hypervisor_version", snapshot->hypervisor_version);
  json_object_set_int_member (object, "vcpus", snapshot->vcpus);
  json_object_set_int_member (object, "memory_bytes", (gint64) snapshot->memory_bytes);
  mv_json_set_optional_string (object, "image_digest", snapshot->image_digest);
  json_object_set_boolean_member (object, "has_disk", snapshot->has_disk);
  set_time (object, "created_at", snapshot->created_at);
  json_object_set_int_member (object, "size_bytes", (gint64) snapshot->size_bytes);
  json_node_take_object (root, object);
  return json_to_string (root, TRUE);
}

static gboolean
read_required_string (const MvJson *object, const char *name, char **out, GError **error)
{
  const MvJson *node = mv_json_required_member (object, name, error);
  const char *text = NULL;

  if (node == NULL || !mv_json_read_string (node, name, &text, error))
    return FALSE;
  *out = g_strdup (text);
  return TRUE;
}

static gboolean
read_uint (const MvJson *object, const char *name, gint64 max, guint64 *out, GError **error)
{
  const MvJson *node = mv_json_required_member (object, name, error);
  gint64 value = 0;

  if (node == NULL || !mv_json_read_int (node, name, 0, max, &value, error))
    return FALSE;
  *out = (guint64) value;
  return TRUE;
}

MvSnapshot *
mv_snapshot_from_json (const char *data, gsize len, GError **error)
{
  static const MvJsonLimits limits = {
    .max_bytes = MV_SNAPSHOT_RECORD_MAX_BYTES,
    .max_depth = MV_SPEC_MAX_DEPTH + 1,
  };
  static const char *const known[] = {
    "format", "id", "name", "kind", "machine_id", "machine_name", "spec", "image_config", "address",
    "mac_address", "hypervisor_type", "hypervisor_version", "vcpus", "memory_bytes",
    "image_digest", "has_disk", "created_at", "size_bytes", NULL,
  };
  g_autoptr (MvJsonDoc) doc = mv_json_read (data, (gssize) len, &limits, "snapshot.json", error);
  const MvJson *root = doc ? mv_json_doc_root (doc) : NULL;
  g_autoptr (MvSnapshot) snapshot = g_new0 (MvSnapshot, 1);
  g_autoptr (GDateTime) created = NULL;
  g_autofree char *kind = NULL;
  g_autofree char *created_text = NULL;
  const MvJson *node;
  guint64 format = 0, vcpus = 0;

  if (root == NULL)
    return NULL;
  if (!mv_json_is_object (root))
    return mv_json_wrong_type (root, "snapshot.json", "an object", error), NULL;
  if (!mv_json_reject_unknown_members (root, NULL, known, error) ||
      !read_uint (root, "format", G_MAXINT32, &format, error))
    return NULL;
  if (format != MV_SNAPSHOT_RECORD_FORMAT)
    return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT, "format: %" G_GUINT64_FORMAT
                         " is not the format %d this microvmd reads", format,
                         MV_SNAPSHOT_RECORD_FORMAT), NULL;
  if (!read_required_string (root, "id", &snapshot->id, error) ||
      !read_required_string (root, "name", &snapshot->name, error) ||
      !read_required_string (root, "kind", &kind, error) ||
      !read_required_string (root, "machine_id", &snapshot->machine_id, error) ||
      !read_required_string (root, "machine_name", &snapshot->machine_name, error) ||
      !read_required_string (root, "created_at", &created_text, error))
    return NULL;
  if (!kind_from_string (kind, &snapshot->kind))
    return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT,
                         "kind: \"memory\" or \"disk\", not \"%s\"", kind), NULL;
  if (!(node = mv_json_required_member (root, "spec", error)))
    return NULL;
  snapshot->spec = mv_spec_from_node (node, error);
  if (snapshot->spec == NULL)
    return g_prefix_error (error, "spec: "), NULL;
  if ((node = mv_json_member (root, "image_config")) != NULL &&
      !(snapshot->image_config = mv_image_config_from_node (node, error)))
    return g_prefix_error (error, "image_config: "), NULL;
  if (!mv_json_read_string_member (root, "address", TRUE, &snapshot->address, error) ||
      !mv_json_read_string_member (root, "mac_address", TRUE, &snapshot->mac_address, error) ||
      !mv_json_read_string_member (root, "hypervisor_type", TRUE, &snapshot->hypervisor_type,
                                   error) ||
      !mv_json_read_string_member (root, "hypervisor_version", TRUE,
                                   &snapshot->hypervisor_version, error) ||
      !mv_json_read_string_member (root, "image_digest", TRUE, &snapshot->image_digest, error) ||
      !read_uint (root, "vcpus", G_MAXUINT32, &vcpus, error) ||
      !read_uint (root, "memory_bytes", G_MAXINT64, &snapshot->memory_bytes, error) ||
      !read_uint (root, "size_bytes", G_MAXINT64, &snapshot->size_bytes, error))
    return NULL;
  snapshot->vcpus = (guint) vcpus;
  if (!(node = mv_json_required_member (root, "has_disk", error)) ||
      !mv_json_read_bool (node, "has_disk", &snapshot->has_disk, error))
    return NULL;
  created = g_date_time_new_from_iso8601 (created_text, NULL);
  if (created == NULL)
    return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT,
                         "created_at: not an ISO 8601 time with a time zone"), NULL;
  snapshot->created_at = g_date_time_to_unix (created) * G_USEC_PER_SEC +
                         g_date_time_get_microsecond (created);
  if (!mv_snapshot_validate (snapshot, error))
    return NULL;
  return g_steal_pointer (&snapshot);
}

MvSpec *
mv_snapshot_fork_spec (const MvSnapshot *snapshot, const char *fork_json, GError **error)
{
  static const MvJsonLimits limits = {
    .max_bytes = MV_FORK_SPEC_MAX_BYTES,
    .max_depth = MV_SPEC_MAX_DEPTH,
  };
  static const char *const identity[] = { "id", "static_ip", "hostname" };
  g_autoptr (JsonNode) changes = mv_json_parse (fork_json, -1, &limits, "spec", error);
  g_autoptr (JsonNode) base = NULL;
  g_autoptr (MvJsonDoc) merged = NULL;
  JsonObject *object, *into;
  JsonObjectIter iter;
  const char *member;
  JsonNode *value;

  if (changes == NULL)
    return NULL;
  if (!JSON_NODE_HOLDS_OBJECT (changes))
    return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT, "spec: expected an object"), NULL;
  object = json_node_get_object (changes);
  if (!json_object_has_member (object, "name"))
    return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT,
                         "name: missing; a fork needs a name of its own"), NULL;
  base = mv_spec_to_node (snapshot->spec, TRUE);
  into = json_node_get_object (base);
  for (guint i = 0; i < G_N_ELEMENTS (identity); i++)
    json_object_remove_member (into, identity[i]);
  json_object_iter_init (&iter, object);
  while (json_object_iter_next (&iter, &member, &value))
    json_object_set_member (into, member, json_node_copy (value));
  merged = mv_json_doc_from_node (base);
  return mv_spec_from_node (mv_json_doc_root (merged), error);
}
