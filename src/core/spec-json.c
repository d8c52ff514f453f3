/* The spec as a JSON document: reading what clients send and config.json
 * keeps, and writing it back. Reading checks types, not limits. Pure. */
#include "spec.h"
#include "spec-private.h"
#include "json-strict.h"
#include "json-util.h"
#include "text.h"

#include <string.h>

#include "errors.h"

/* ---- reading ---- */

/* An integer that the spec's field of type up to @type_max holds. What
 * the type cannot hold is refused here with the field's own bounds,
 * which lie within it; the rest is for validation to judge. */
static gboolean
read_number (JsonNode *node, const char *field, gint64 type_max, gint64 *out, GError **error)
{
  g_autofree char *written = NULL;
  gint64 value;

  if (!mv_json_read_integer (node, field, &value, &written, error))
    return FALSE;
  if (value < 0 || value > type_max || written != NULL)
    {
      gboolean in_bounds = mv_spec_check_number (field, value, written, error);

      g_return_val_if_fail (!in_bounds, FALSE);
      return FALSE;
    }
  *out = value;
  return TRUE;
}

static gboolean
read_uint32_member (JsonObject *object, const char *name, guint32 *out, GError **error)
{
  JsonNode *node = mv_json_member (object, name);
  gint64 value;

  if (node == NULL)
    return TRUE;
  if (!read_number (node, name, G_MAXUINT32, &value, error))
    return FALSE;
  *out = (guint32) value;
  return TRUE;
}

static gboolean
read_uint64_member (JsonObject *object, const char *name, guint64 *out, GError **error)
{
  JsonNode *node = mv_json_member (object, name);
  gint64 value;

  if (node == NULL)
    return TRUE;
  if (!read_number (node, name, G_MAXINT64, &value, error))
    return FALSE;
  *out = (guint64) value;
  return TRUE;
}

static gboolean
read_string_map (JsonNode *node, const char *field, GHashTable *into, GError **error)
{
  JsonObject *object;
  g_autoptr(GList) names = NULL;

  if (!JSON_NODE_HOLDS_OBJECT (node))
    return mv_json_wrong_type (node, field, "an object of strings", error);
  object = json_node_get_object (node);
  names = json_object_get_members (object);
  for (GList *l = names; l != NULL; l = l->next)
    {
      JsonNode *value = json_object_get_member (object, l->data);
      g_autofree char *where = g_strdup_printf ("%s.%s", field, (const char *) l->data);
      const char *s = NULL;

      if (!mv_json_read_string (value, where, &s, error))
        return FALSE;
      g_hash_table_insert (into, g_strdup (l->data), g_strdup (s));
    }
  return TRUE;
}

static gboolean
parse_disks (JsonNode *node, MvSpec *spec, GError **error)
{
  static const char *const known[] = { "path", "read_only", NULL };
  JsonArray *array;

  if (!JSON_NODE_HOLDS_ARRAY (node))
    return mv_json_wrong_type (node, "disks", "an array", error);
  array = json_node_get_array (node);
  for (guint i = 0; i < json_array_get_length (array); i++)
    {
      JsonNode *element = json_array_get_element (array, i);
      g_autofree char *where = g_strdup_printf ("disks[%u]", i);
      g_autofree char *path_field = g_strdup_printf ("disks[%u].path", i);
      g_autofree char *ro_field = g_strdup_printf ("disks[%u].read_only", i);
      JsonObject *object;
      JsonNode *field;
      const char *path = NULL;
      gboolean read_only = FALSE;

      if (!JSON_NODE_HOLDS_OBJECT (element))
        return mv_json_wrong_type (element, where, "an object", error);
      object = json_node_get_object (element);
      if (!mv_json_reject_unknown_members (object, where, known, error))
        return FALSE;
      if ((field = mv_json_member (object, "path")) != NULL &&
          !mv_json_read_string (field, path_field, &path, error))
        return FALSE;
      if ((field = mv_json_member (object, "read_only")) != NULL &&
          !mv_json_read_bool (field, ro_field, &read_only, error))
        return FALSE;
      g_ptr_array_add (spec->disks, mv_disk_new (path, read_only));
    }
  return TRUE;
}

static gboolean
parse_readiness (JsonNode *node, MvSpec *spec, GError **error)
{
  const char *value = NULL;

  if (!mv_json_read_string (node, "readiness", &value, error))
    return FALSE;
  if (!mv_readiness_from_string (value, &spec->readiness, &spec->readiness_text))
    {
      g_autofree char *shown = mv_text_excerpt (value, -1, MV_EXCERPT_MAX_BYTES);

      g_set_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT,
                   "readiness: \"%s\" is not one of vmm, agent, console:TEXT", shown);
      return FALSE;
    }
  return TRUE;
}

static gboolean
parse_ssh_keys (JsonNode *node, MvSpec *spec, GError **error)
{
  JsonArray *array;

  if (!JSON_NODE_HOLDS_ARRAY (node))
    return mv_json_wrong_type (node, "ssh_keys", "an array of strings", error);
  array = json_node_get_array (node);
  for (guint i = 0; i < json_array_get_length (array); i++)
    {
      g_autofree char *where = g_strdup_printf ("ssh_keys[%u]", i);
      const char *key = NULL;

      if (!mv_json_read_string (json_array_get_element (array, i), where, &key, error))
        return FALSE;
      g_ptr_array_add (spec->ssh_keys, g_strdup (key));
    }
  return TRUE;
}

static gboolean
parse_firewall (JsonNode *node, MvSpec *spec, GError **error)
{
  JsonArray *array;

  if (!JSON_NODE_HOLDS_ARRAY (node))
    return mv_json_wrong_type (node, "firewall", "an array of objects", error);
  array = json_node_get_array (node);
  for (guint i = 0; i < json_array_get_length (array); i++)
    {
      JsonNode *rule = json_array_get_element (array, i);

      if (!JSON_NODE_HOLDS_OBJECT (rule))
        {
          g_autofree char *where = g_strdup_printf ("firewall[%u]", i);
          return mv_json_wrong_type (rule, where, "an object", error);
        }
    }
  json_array_unref (spec->firewall);
  spec->firewall = mv_json_array_deep_copy (array);
  return TRUE;
}

static gboolean
parse_restart (JsonNode *node, MvSpec *spec, GError **error)
{
  static const char *const known[] = { "mode", "max_retries", NULL };
  JsonObject *object;
  JsonNode *field;

  if (!JSON_NODE_HOLDS_OBJECT (node))
    return mv_json_wrong_type (node, "restart", "an object", error);
  object = json_node_get_object (node);
  if (!mv_json_reject_unknown_members (object, "restart", known, error))
    return FALSE;
  if ((field = mv_json_member (object, "mode")) != NULL)
    {
      const char *mode = NULL;

      if (!mv_json_read_string (field, "restart.mode", &mode, error))
        return FALSE;
      if (!mv_restart_mode_from_string (mode, &spec->restart_mode))
        {
          g_autofree char *shown = mv_text_excerpt (mode, -1, MV_EXCERPT_MAX_BYTES);

          g_set_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT,
                       "restart.mode: \"%s\" is not one of no, on-failure, unless-stopped, always",
                       shown);
          return FALSE;
        }
    }
  if ((field = mv_json_member (object, "max_retries")) != NULL)
    {
      gint64 value;

      if (!read_number (field, "restart.max_retries", G_MAXUINT32, &value, error))
        return FALSE;
      spec->restart_max_retries = (guint32) value;
    }
  return TRUE;
}

/* standby_after_seconds also goes by sleep_after_idle_seconds; giving
 * both is fine as long as they agree. */
static gboolean
parse_standby (JsonObject *object, MvSpec *spec, GError **error)
{
  JsonNode *canonical = mv_json_member (object, "standby_after_seconds");
  JsonNode *alias = mv_json_member (object, "sleep_after_idle_seconds");
  gint64 a = 0, b = 0;

  if (canonical != NULL &&
      !read_number (canonical, "standby_after_seconds", G_MAXUINT32, &a, error))
    return FALSE;
  if (alias != NULL &&
      !read_number (alias, "sleep_after_idle_seconds", G_MAXUINT32, &b, error))
    return FALSE;
  if (canonical != NULL && alias != NULL && a != b)
    {
      g_set_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT,
                   "standby_after_seconds: %" G_GINT64_FORMAT " differs from "
                   "sleep_after_idle_seconds %" G_GINT64_FORMAT " (the same field)",
                   a, b);
      return FALSE;
    }
  if (canonical != NULL || alias != NULL)
    spec->standby_after_seconds = (guint32) (canonical != NULL ? a : b);
  return TRUE;
}

static const char *const spec_fields[] = {
  "id", "name", "hypervisor_type", "hypervisor_version", "kernel", "initrd",
  "kernel_args", "cpu_millicores", "max_vcpus", "memory_bytes",
  "max_memory_bytes", "disks", "readiness", "network_name", "static_ip",
  "hostname", "ssh_keys", "user_data", "metadata", "firewall", "restart",
  "standby_after_seconds", "sleep_after_idle_seconds", "labels",
  "remove_on_exit", NULL
};

MvSpec *
mv_spec_from_node (JsonNode *node, GError **error)
{
  g_autoptr(MvSpec) spec = mv_spec_new ();
  JsonObject *object;
  JsonNode *field;

  g_return_val_if_fail (node != NULL, NULL);

  if (!JSON_NODE_HOLDS_OBJECT (node))
    {
      mv_json_wrong_type (node, "spec", "an object", error);
      return NULL;
    }
  object = json_node_get_object (node);
  if (!mv_json_reject_unknown_members (object, NULL, spec_fields, error))
    return NULL;

  /* Empty strings of optional fields mean "the default", as absent ones
   * do; keeping one spelling makes equal specs compare equal. */
  if (!mv_json_read_string_member (object, "id", TRUE, &spec->id, error) ||
      !mv_json_read_string_member (object, "name", FALSE, &spec->name, error) ||
      !mv_json_read_string_member (object, "hypervisor_type", TRUE, &spec->hypervisor_type,
                                   error) ||
      !mv_json_read_string_member (object, "hypervisor_version", TRUE,
                                   &spec->hypervisor_version, error) ||
      !mv_json_read_string_member (object, "kernel", FALSE, &spec->kernel, error) ||
      !mv_json_read_string_member (object, "initrd", TRUE, &spec->initrd, error) ||
      !mv_json_read_string_member (object, "kernel_args", TRUE, &spec->kernel_args, error) ||
      !read_uint32_member (object, "cpu_millicores", &spec->cpu_millicores, error) ||
      !read_uint32_member (object, "max_vcpus", &spec->max_vcpus, error) ||
      !read_uint64_member (object, "memory_bytes", &spec->memory_bytes, error) ||
      !read_uint64_member (object, "max_memory_bytes", &spec->max_memory_bytes, error))
    return NULL;

  /* "auto" is the documented name of the default type. */
  if (g_strcmp0 (spec->hypervisor_type, "auto") == 0)
    g_clear_pointer (&spec->hypervisor_type, g_free);

  if ((field = mv_json_member (object, "disks")) != NULL && !parse_disks (field, spec, error))
    return NULL;
  if ((field = mv_json_member (object, "readiness")) != NULL &&
      !parse_readiness (field, spec, error))
    return NULL;

  if (!mv_json_read_string_member (object, "network_name", TRUE, &spec->network_name, error) ||
      !mv_json_read_string_member (object, "static_ip", TRUE, &spec->static_ip, error) ||
      !mv_json_read_string_member (object, "hostname", TRUE, &spec->hostname, error))
    return NULL;

  if ((field = mv_json_member (object, "ssh_keys")) != NULL && !parse_ssh_keys (field, spec, error))
    return NULL;
  if (!mv_json_read_string_member (object, "user_data", TRUE, &spec->user_data, error))
    return NULL;
  if ((field = mv_json_member (object, "metadata")) != NULL &&
      !read_string_map (field, "metadata", spec->metadata, error))
    return NULL;
  if ((field = mv_json_member (object, "firewall")) != NULL && !parse_firewall (field, spec, error))
    return NULL;
  if ((field = mv_json_member (object, "restart")) != NULL && !parse_restart (field, spec, error))
    return NULL;
  if (!parse_standby (object, spec, error))
    return NULL;
  if ((field = mv_json_member (object, "labels")) != NULL &&
      !read_string_map (field, "labels", spec->labels, error))
    return NULL;
  if ((field = mv_json_member (object, "remove_on_exit")) != NULL &&
      !mv_json_read_bool (field, "remove_on_exit", &spec->remove_on_exit, error))
    return NULL;

  return g_steal_pointer (&spec);
}

static const MvJsonLimits spec_limits = {
  .max_bytes = MV_SPEC_MAX_BYTES,
  .max_depth = MV_SPEC_MAX_DEPTH,
};

MvSpec *
mv_spec_from_json (const char *json, GError **error)
{
  g_autoptr(JsonNode) root = NULL;

  g_return_val_if_fail (json != NULL, NULL);

  root = mv_json_parse (json, -1, &spec_limits, "spec", error);
  if (root == NULL)
    return NULL;
  return mv_spec_from_node (root, error);
}

gboolean
mv_spec_json_check_size (const char *json, GError **error)
{
  g_return_val_if_fail (json != NULL, FALSE);

  if (strnlen (json, MV_SPEC_MAX_BYTES + 1) <= MV_SPEC_MAX_BYTES)
    return TRUE;
  /* Refused on its size alone, with the reader's own message. */
  return mv_json_check (json, -1, &spec_limits, "spec", error);
}

char *
mv_spec_json_peek_name (const char *json)
{
  g_autoptr (JsonNode) root = mv_json_parse (json, -1, &spec_limits, "spec", NULL);
  JsonObject *object = root && JSON_NODE_HOLDS_OBJECT (root) ? json_node_get_object (root) : NULL;
  JsonNode *name = object ? json_object_get_member (object, "name") : NULL;
  const char *text = name && json_node_get_value_type (name) == G_TYPE_STRING
                     ? json_node_get_string (name) : NULL;

  return text && mv_name_validate ("name", text, NULL) ? g_strdup (text) : NULL;
}

/* ---- writing ---- */

/* Signed image URLs carry a fresh signature in their query each time;
 * the location is what identifies the image. */
static char *
strip_url_query (const char *location)
{
  const char *query;

  if (location == NULL || strstr (location, "://") == NULL)
    return g_strdup (location);
  query = strchr (location, '?');
  return query != NULL ? g_strndup (location, query - location) : g_strdup (location);
}

static JsonNode *
spec_to_node (const MvSpec *spec, gboolean with_secrets, MvSpecCanonFlags flags)
{
  g_autoptr(JsonObject) object = json_object_new ();
  g_autoptr(JsonArray) disks = json_array_new ();
  g_autoptr(JsonObject) restart = json_object_new ();
  gboolean strip = (flags & MV_SPEC_CANON_STRIP_QUERY) != 0;
  g_autofree char *kernel = strip ? strip_url_query (spec->kernel) : g_strdup (spec->kernel);
  g_autofree char *initrd = strip ? strip_url_query (spec->initrd) : g_strdup (spec->initrd);
  g_autofree char *readiness = mv_readiness_to_string (spec->readiness, spec->readiness_text);

  if (!(flags & MV_SPEC_CANON_NO_ID_LABELS))
    mv_json_set_optional_string (object, "id", spec->id);
  mv_json_set_optional_string (object, "name", spec->name);
  mv_json_set_optional_string (object, "hypervisor_type", spec->hypervisor_type);
  mv_json_set_optional_string (object, "hypervisor_version", spec->hypervisor_version);
  mv_json_set_optional_string (object, "kernel", kernel);
  mv_json_set_optional_string (object, "initrd", initrd);
  mv_json_set_optional_string (object, "kernel_args", spec->kernel_args);
  json_object_set_int_member (object, "cpu_millicores", spec->cpu_millicores);
  json_object_set_int_member (object, "max_vcpus", spec->max_vcpus);
  json_object_set_int_member (object, "memory_bytes", (gint64) spec->memory_bytes);
  json_object_set_int_member (object, "max_memory_bytes", (gint64) spec->max_memory_bytes);

  for (guint i = 0; i < spec->disks->len; i++)
    {
      const MvDisk *disk = g_ptr_array_index (spec->disks, i);
      g_autoptr(JsonObject) d = json_object_new ();
      g_autofree char *path = strip ? strip_url_query (disk->path) : g_strdup (disk->path);

      mv_json_set_optional_string (d, "path", path);
      json_object_set_boolean_member (d, "read_only", disk->read_only);
      json_array_add_object_element (disks, g_steal_pointer (&d));
    }
  json_object_set_array_member (object, "disks", g_steal_pointer (&disks));

  json_object_set_string_member (object, "readiness", readiness);

  mv_json_set_optional_string (object, "network_name", spec->network_name);
  mv_json_set_optional_string (object, "static_ip", spec->static_ip);
  mv_json_set_optional_string (object, "hostname", spec->hostname);
  if (with_secrets)
    {
      g_autoptr(JsonArray) keys = json_array_new ();

      for (guint i = 0; i < spec->ssh_keys->len; i++)
        json_array_add_string_element (keys, g_ptr_array_index (spec->ssh_keys, i));
      json_object_set_array_member (object, "ssh_keys", g_steal_pointer (&keys));
      mv_json_set_optional_string (object, "user_data", spec->user_data);
    }
  json_object_set_member (object, "metadata",
                          mv_json_string_map_to_node (spec->metadata, with_secrets));
  json_object_set_array_member (object, "firewall", mv_json_array_deep_copy (spec->firewall));

  json_object_set_string_member (restart, "mode", mv_restart_mode_to_string (spec->restart_mode));
  json_object_set_int_member (restart, "max_retries", spec->restart_max_retries);
  json_object_set_object_member (object, "restart", g_steal_pointer (&restart));

  if (!(flags & MV_SPEC_CANON_NO_STANDBY))
    json_object_set_int_member (object, "standby_after_seconds", spec->standby_after_seconds);
  if (!(flags & MV_SPEC_CANON_NO_ID_LABELS))
    json_object_set_member (object, "labels", mv_json_string_map_to_node (spec->labels, TRUE));
  json_object_set_boolean_member (object, "remove_on_exit", spec->remove_on_exit);

  return json_node_init_object (json_node_alloc (), object);
}

JsonNode *
mv_spec_to_node (const MvSpec *spec, gboolean with_secrets)
{
  g_return_val_if_fail (spec != NULL, NULL);
  return spec_to_node (spec, with_secrets, 0);
}

char *
mv_spec_to_json (const MvSpec *spec, gboolean with_secrets)
{
  g_autoptr(JsonNode) node = NULL;

  g_return_val_if_fail (spec != NULL, NULL);
  node = spec_to_node (spec, with_secrets, 0);
  return json_to_string (node, FALSE);
}

char *
mv_spec_canonical_json (const MvSpec *spec, MvSpecCanonFlags flags)
{
  g_autoptr(JsonNode) node = spec_to_node (spec, TRUE, flags);

  return json_to_string (node, FALSE);
}
