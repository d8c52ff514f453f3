#include "spec.h"
#include "json-util.h"

#include <string.h>

#include "errors.h"
#include "machine.h"

/* ---- life cycle ---- */

static void
disk_free (gpointer data)
{
  MvDisk *disk = data;

  g_free (disk->path);
  g_free (disk);
}

static MvDisk *
disk_new (const char *path, gboolean read_only)
{
  MvDisk *disk = g_new0 (MvDisk, 1);

  disk->path = g_strdup (path);
  disk->read_only = read_only;
  return disk;
}

static GHashTable *
string_map_new (void)
{
  return g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
}

MvSpec *
mv_spec_new (void)
{
  MvSpec *spec = g_new0 (MvSpec, 1);

  spec->cpu_millicores = MV_DEFAULT_CPU_MILLICORES;
  spec->memory_bytes = MV_DEFAULT_MEMORY_BYTES;
  spec->disks = g_ptr_array_new_with_free_func (disk_free);
  spec->readiness = MV_READINESS_VMM;
  spec->ssh_keys = g_ptr_array_new_with_free_func (g_free);
  spec->metadata = string_map_new ();
  spec->firewall = json_array_new ();
  spec->restart_mode = MV_RESTART_NO;
  spec->labels = string_map_new ();
  return spec;
}

void
mv_spec_free (MvSpec *spec)
{
  if (spec == NULL)
    return;
  g_free (spec->id);
  g_free (spec->name);
  g_free (spec->hypervisor_type);
  g_free (spec->hypervisor_version);
  g_free (spec->kernel);
  g_free (spec->initrd);
  g_free (spec->kernel_args);
  g_clear_pointer (&spec->disks, g_ptr_array_unref);
  g_free (spec->readiness_text);
  g_free (spec->network_name);
  g_free (spec->static_ip);
  g_free (spec->hostname);
  g_clear_pointer (&spec->ssh_keys, g_ptr_array_unref);
  g_free (spec->user_data);
  g_clear_pointer (&spec->metadata, g_hash_table_unref);
  g_clear_pointer (&spec->firewall, json_array_unref);
  g_clear_pointer (&spec->labels, g_hash_table_unref);
  g_free (spec);
}

static void
copy_string_map (GHashTable *dst, GHashTable *src)
{
  GHashTableIter iter;
  gpointer key, value;

  g_hash_table_iter_init (&iter, src);
  while (g_hash_table_iter_next (&iter, &key, &value))
    g_hash_table_insert (dst, g_strdup (key), g_strdup (value));
}

MvSpec *
mv_spec_copy (const MvSpec *spec)
{
  MvSpec *copy;

  g_return_val_if_fail (spec != NULL, NULL);

  copy = mv_spec_new ();
  copy->id = g_strdup (spec->id);
  copy->name = g_strdup (spec->name);
  copy->hypervisor_type = g_strdup (spec->hypervisor_type);
  copy->hypervisor_version = g_strdup (spec->hypervisor_version);
  copy->kernel = g_strdup (spec->kernel);
  copy->initrd = g_strdup (spec->initrd);
  copy->kernel_args = g_strdup (spec->kernel_args);
  copy->cpu_millicores = spec->cpu_millicores;
  copy->max_vcpus = spec->max_vcpus;
  copy->memory_bytes = spec->memory_bytes;
  copy->max_memory_bytes = spec->max_memory_bytes;
  for (guint i = 0; i < spec->disks->len; i++)
    {
      const MvDisk *disk = g_ptr_array_index (spec->disks, i);
      g_ptr_array_add (copy->disks, disk_new (disk->path, disk->read_only));
    }
  copy->readiness = spec->readiness;
  copy->readiness_text = g_strdup (spec->readiness_text);
  copy->network_name = g_strdup (spec->network_name);
  copy->static_ip = g_strdup (spec->static_ip);
  copy->hostname = g_strdup (spec->hostname);
  for (guint i = 0; i < spec->ssh_keys->len; i++)
    g_ptr_array_add (copy->ssh_keys, g_strdup (g_ptr_array_index (spec->ssh_keys, i)));
  copy->user_data = g_strdup (spec->user_data);
  copy_string_map (copy->metadata, spec->metadata);
  json_array_unref (copy->firewall);
  copy->firewall = mv_json_array_deep_copy (spec->firewall);
  copy->restart_mode = spec->restart_mode;
  copy->restart_max_retries = spec->restart_max_retries;
  copy->standby_after_seconds = spec->standby_after_seconds;
  copy_string_map (copy->labels, spec->labels);
  copy->remove_on_exit = spec->remove_on_exit;
  return copy;
}

/* ---- restart modes and readiness ---- */

static const char *const restart_mode_names[] = {
  [MV_RESTART_NO] = "no",
  [MV_RESTART_ON_FAILURE] = "on-failure",
  [MV_RESTART_UNLESS_STOPPED] = "unless-stopped",
  [MV_RESTART_ALWAYS] = "always",
};

const char *
mv_restart_mode_to_string (MvRestartMode mode)
{
  g_return_val_if_fail ((guint) mode < G_N_ELEMENTS (restart_mode_names), "no");
  return restart_mode_names[mode];
}

static gboolean
restart_mode_from_string (const char *s, MvRestartMode *out)
{
  /* An empty mode is "no", as in the policy's own definition. */
  if (*s == '\0')
    {
      *out = MV_RESTART_NO;
      return TRUE;
    }
  for (guint i = 0; i < G_N_ELEMENTS (restart_mode_names); i++)
    if (strcmp (s, restart_mode_names[i]) == 0)
      {
        *out = i;
        return TRUE;
      }
  return FALSE;
}

#define READINESS_CONSOLE_PREFIX "console:"

static char *
readiness_to_string (const MvSpec *spec)
{
  switch (spec->readiness)
    {
    case MV_READINESS_AGENT:
      return g_strdup ("agent");
    case MV_READINESS_CONSOLE:
      return g_strconcat (READINESS_CONSOLE_PREFIX, spec->readiness_text ? spec->readiness_text : "", NULL);
    case MV_READINESS_VMM:
      break;
    }
  return g_strdup ("vmm");
}

/* ---- parsing ---- */

static gboolean
read_uint32_member (JsonObject *object, const char *name, guint32 *out, GError **error)
{
  JsonNode *node = mv_json_member (object, name);
  guint64 value;

  if (node == NULL)
    return TRUE;
  if (!mv_json_read_uint (node, name, G_MAXUINT32, &value, error))
    return FALSE;
  *out = (guint32) value;
  return TRUE;
}

static gboolean
read_uint64_member (JsonObject *object, const char *name, guint64 *out, GError **error)
{
  JsonNode *node = mv_json_member (object, name);

  if (node == NULL)
    return TRUE;
  return mv_json_read_uint (node, name, G_MAXINT64, out, error);
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
      g_ptr_array_add (spec->disks, disk_new (path, read_only));
    }
  return TRUE;
}

static gboolean
parse_readiness (JsonNode *node, MvSpec *spec, GError **error)
{
  const char *value = NULL;

  if (!mv_json_read_string (node, "readiness", &value, error))
    return FALSE;
  if (strcmp (value, "vmm") == 0)
    spec->readiness = MV_READINESS_VMM;
  else if (strcmp (value, "agent") == 0)
    spec->readiness = MV_READINESS_AGENT;
  else if (g_str_has_prefix (value, READINESS_CONSOLE_PREFIX))
    {
      spec->readiness = MV_READINESS_CONSOLE;
      g_free (spec->readiness_text);
      spec->readiness_text = g_strdup (value + strlen (READINESS_CONSOLE_PREFIX));
    }
  else
    {
      g_set_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT,
                   "readiness: '%s' is not one of vmm, agent, console:TEXT", value);
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
      if (!restart_mode_from_string (mode, &spec->restart_mode))
        {
          g_set_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT,
                       "restart.mode: '%s' is not one of no, on-failure, unless-stopped, always",
                       mode);
          return FALSE;
        }
    }
  if ((field = mv_json_member (object, "max_retries")) != NULL)
    {
      guint64 value;

      if (!mv_json_read_uint (field, "restart.max_retries", G_MAXUINT32, &value, error))
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
  guint64 a = 0, b = 0;

  if (canonical != NULL &&
      !mv_json_read_uint (canonical, "standby_after_seconds", G_MAXUINT32, &a, error))
    return FALSE;
  if (alias != NULL &&
      !mv_json_read_uint (alias, "sleep_after_idle_seconds", G_MAXUINT32, &b, error))
    return FALSE;
  if (canonical != NULL && alias != NULL && a != b)
    {
      g_set_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT,
                   "standby_after_seconds: %" G_GUINT64_FORMAT " differs from "
                   "sleep_after_idle_seconds %" G_GUINT64_FORMAT " (the same field)",
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
      !mv_json_read_string_member (object, "hypervisor_type", TRUE, &spec->hypervisor_type, error) ||
      !mv_json_read_string_member (object, "hypervisor_version", TRUE, &spec->hypervisor_version, error) ||
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
  if ((field = mv_json_member (object, "readiness")) != NULL && !parse_readiness (field, spec, error))
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

MvSpec *
mv_spec_from_json (const char *json, GError **error)
{
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autoptr(GError) local_error = NULL;
  JsonNode *root;

  g_return_val_if_fail (json != NULL, NULL);

  if (!json_parser_load_from_data (parser, json, -1, &local_error))
    {
      g_set_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT,
                   "spec: not valid JSON: %s", local_error->message);
      return NULL;
    }
  root = json_parser_get_root (parser);
  if (root == NULL)
    {
      g_set_error_literal (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT,
                           "spec: empty document");
      return NULL;
    }
  return mv_spec_from_node (root, error);
}

/* ---- serialization ---- */

/* What a fingerprint or a comparison leaves out of the document. */
typedef enum {
  CANON_NO_ID_LABELS = 1 << 0,
  CANON_NO_STANDBY   = 1 << 1,
  CANON_STRIP_QUERY  = 1 << 2,
} CanonFlags;

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
spec_to_node (const MvSpec *spec, gboolean with_secrets, CanonFlags flags)
{
  g_autoptr(JsonObject) object = json_object_new ();
  g_autoptr(JsonArray) disks = json_array_new ();
  g_autoptr(JsonObject) restart = json_object_new ();
  gboolean strip = (flags & CANON_STRIP_QUERY) != 0;
  g_autofree char *kernel = strip ? strip_url_query (spec->kernel) : g_strdup (spec->kernel);
  g_autofree char *initrd = strip ? strip_url_query (spec->initrd) : g_strdup (spec->initrd);
  g_autofree char *readiness = readiness_to_string (spec);

  if (!(flags & CANON_NO_ID_LABELS))
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
  json_object_set_member (object, "metadata", mv_json_string_map_to_node (spec->metadata, with_secrets));
  json_object_set_array_member (object, "firewall", mv_json_array_deep_copy (spec->firewall));

  json_object_set_string_member (restart, "mode", mv_restart_mode_to_string (spec->restart_mode));
  json_object_set_int_member (restart, "max_retries", spec->restart_max_retries);
  json_object_set_object_member (object, "restart", g_steal_pointer (&restart));

  if (!(flags & CANON_NO_STANDBY))
    json_object_set_int_member (object, "standby_after_seconds", spec->standby_after_seconds);
  if (!(flags & CANON_NO_ID_LABELS))
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

static char *
canonical_json (const MvSpec *spec, CanonFlags flags)
{
  g_autoptr(JsonNode) node = spec_to_node (spec, TRUE, flags);

  return json_to_string (node, FALSE);
}

/* ---- comparisons ---- */

guint
mv_spec_vcpus (const MvSpec *spec)
{
  g_return_val_if_fail (spec != NULL, 0);
  return (spec->cpu_millicores + 999u) / 1000u;
}

char *
mv_spec_fingerprint (const MvSpec *spec)
{
  g_autofree char *json = NULL;

  g_return_val_if_fail (spec != NULL, NULL);
  json = canonical_json (spec, CANON_NO_ID_LABELS | CANON_STRIP_QUERY);
  return g_compute_checksum_for_string (G_CHECKSUM_SHA256, json, -1);
}

gboolean
mv_spec_equal (const MvSpec *a, const MvSpec *b)
{
  g_autofree char *ja = NULL;
  g_autofree char *jb = NULL;

  g_return_val_if_fail (a != NULL && b != NULL, FALSE);
  ja = canonical_json (a, 0);
  jb = canonical_json (b, 0);
  return strcmp (ja, jb) == 0;
}

gboolean
mv_spec_differs_beyond_standby (const MvSpec *a, const MvSpec *b)
{
  g_autofree char *ja = NULL;
  g_autofree char *jb = NULL;

  g_return_val_if_fail (a != NULL && b != NULL, FALSE);
  ja = canonical_json (a, CANON_NO_STANDBY);
  jb = canonical_json (b, CANON_NO_STANDBY);
  return strcmp (ja, jb) != 0;
}

gboolean
mv_spec_shape_differs (const MvSpec *a, const MvSpec *b)
{
  g_return_val_if_fail (a != NULL && b != NULL, FALSE);

  if (mv_spec_vcpus (a) != mv_spec_vcpus (b) ||
      a->max_vcpus != b->max_vcpus ||
      a->memory_bytes != b->memory_bytes ||
      a->max_memory_bytes != b->max_memory_bytes ||
      g_strcmp0 (a->hypervisor_type, b->hypervisor_type) != 0 ||
      g_strcmp0 (a->hypervisor_version, b->hypervisor_version) != 0 ||
      a->disks->len != b->disks->len)
    return TRUE;
  for (guint i = 0; i < a->disks->len; i++)
    {
      const MvDisk *da = g_ptr_array_index (a->disks, i);
      const MvDisk *db = g_ptr_array_index (b->disks, i);

      if (g_strcmp0 (da->path, db->path) != 0 || da->read_only != db->read_only)
        return TRUE;
    }
  return FALSE;
}

/* ---- validation ---- */

static gboolean
invalid (GError **error, const char *format, ...) G_GNUC_PRINTF (2, 3);

static gboolean
invalid (GError **error, const char *format, ...)
{
  va_list args;

  va_start (args, format);
  g_propagate_error (error, g_error_new_valist (MV_ERROR, MV_ERROR_INVALID_ARGUMENT,
                                                format, args));
  va_end (args);
  return FALSE;
}

static gboolean
check_utf8 (const char *field, const char *value, GError **error)
{
  if (value != NULL && !g_utf8_validate (value, -1, NULL))
    return invalid (error, "%s: not valid UTF-8", field);
  return TRUE;
}

gboolean
mv_name_validate (const char *field, const char *name, GError **error)
{
  gsize len;

  if (name == NULL)
    return invalid (error, "%s: required", field);
  len = strlen (name);
  if (len == 0)
    return invalid (error, "%s: empty", field);
  if (len > MV_NAME_MAX_BYTES)
    return invalid (error, "%s: longer than %d bytes", field, MV_NAME_MAX_BYTES);
  if (!g_utf8_validate (name, len, NULL))
    return invalid (error, "%s: not valid UTF-8", field);
  /* Names become path components and command-line arguments: no
   * separators, no ".", "..", hidden files or things that look like
   * options. */
  if (name[0] == '-' || name[0] == '.')
    return invalid (error, "%s: starts with '%c'", field, name[0]);
  for (const char *p = name; *p != '\0'; p++)
    {
      if (*p == '/')
        return invalid (error, "%s: contains '/'", field);
      if ((guchar) *p < 0x20 || *p == 0x7f)
        return invalid (error, "%s: contains a control character", field);
    }
  return TRUE;
}

static gboolean
check_path (const char *field, const char *path, gboolean required, GError **error)
{
  if (path == NULL)
    return required ? invalid (error, "%s: required", field) : TRUE;
  if (*path == '\0')
    return invalid (error, "%s: empty", field);
  if (strlen (path) > MV_PATH_MAX_BYTES)
    return invalid (error, "%s: longer than %d bytes", field, MV_PATH_MAX_BYTES);
  if (!check_utf8 (field, path, error))
    return FALSE;
  if (path[0] != '/')
    return invalid (error, "%s: '%s' is not an absolute path", field, path);
  return TRUE;
}

static gboolean
valid_dns_name (const char *name)
{
  const char *label = name;

  for (;;)
    {
      gsize len = strcspn (label, ".");

      if (len < 1 || len > 63 || label[0] == '-' || label[len - 1] == '-')
        return FALSE;
      for (gsize i = 0; i < len; i++)
        if (!g_ascii_isalnum (label[i]) && label[i] != '-')
          return FALSE;
      if (label[len] == '\0')
        return TRUE;
      label += len + 1;
    }
}

static gboolean
validate_hypervisor (const MvSpec *spec, GError **error)
{
  /* "test" is the runtime the daemon's own tests run machines on. */
  static const char *const types[] = {
    "cloud-hypervisor", "firecracker", "qemu", "test", NULL
  };

  if (spec->hypervisor_type != NULL && !g_strv_contains (types, spec->hypervisor_type))
    {
      if (!check_utf8 ("hypervisor_type", spec->hypervisor_type, error))
        return FALSE;
      return invalid (error, "hypervisor_type: '%s' is not one of "
                      "cloud-hypervisor, firecracker, qemu",
                      spec->hypervisor_type);
    }
  return check_utf8 ("hypervisor_version", spec->hypervisor_version, error);
}

static gboolean
validate_boot (const MvSpec *spec, GError **error)
{
  if (!check_path ("kernel", spec->kernel, TRUE, error) ||
      !check_path ("initrd", spec->initrd, FALSE, error))
    return FALSE;
  if (spec->kernel_args != NULL)
    {
      if (strlen (spec->kernel_args) > MV_KERNEL_ARGS_MAX_BYTES)
        return invalid (error, "kernel_args: longer than %d bytes", MV_KERNEL_ARGS_MAX_BYTES);
      if (!check_utf8 ("kernel_args", spec->kernel_args, error))
        return FALSE;
      if (strpbrk (spec->kernel_args, "\r\n") != NULL)
        return invalid (error, "kernel_args: contains a newline");
    }
  return TRUE;
}

static gboolean
validate_resources (const MvSpec *spec, GError **error)
{
  guint vcpus = mv_spec_vcpus (spec);

  if (spec->cpu_millicores < MV_CPU_MILLICORES_MIN || spec->cpu_millicores > MV_CPU_MILLICORES_MAX)
    return invalid (error, "cpu_millicores: %u is outside %d–%d",
                    spec->cpu_millicores, MV_CPU_MILLICORES_MIN, MV_CPU_MILLICORES_MAX);
  if (spec->max_vcpus != 0 && (spec->max_vcpus < vcpus || spec->max_vcpus > MV_VCPUS_MAX))
    return invalid (error, "max_vcpus: %u is outside %u–%d "
                    "(from the vCPUs of cpu_millicores to the maximum)",
                    spec->max_vcpus, vcpus, MV_VCPUS_MAX);

  if (spec->memory_bytes < MV_MEMORY_MIN_BYTES)
    return invalid (error, "memory_bytes: %" G_GUINT64_FORMAT " is below the minimum of %"
                    G_GUINT64_FORMAT, spec->memory_bytes, MV_MEMORY_MIN_BYTES);
  if (spec->memory_bytes > MV_MEMORY_MAX_BYTES)
    return invalid (error, "memory_bytes: %" G_GUINT64_FORMAT " is above the maximum of %"
                    G_GUINT64_FORMAT, spec->memory_bytes, MV_MEMORY_MAX_BYTES);
  if (spec->memory_bytes % MV_MEMORY_STEP_BYTES != 0)
    return invalid (error, "memory_bytes: %" G_GUINT64_FORMAT " is not a multiple of %"
                    G_GUINT64_FORMAT " (2 MiB)", spec->memory_bytes, MV_MEMORY_STEP_BYTES);

  if (spec->max_memory_bytes != 0)
    {
      if (spec->max_memory_bytes < spec->memory_bytes)
        return invalid (error, "max_memory_bytes: %" G_GUINT64_FORMAT " is below "
                        "memory_bytes %" G_GUINT64_FORMAT,
                        spec->max_memory_bytes, spec->memory_bytes);
      if (spec->max_memory_bytes > MV_MEMORY_MAX_BYTES)
        return invalid (error, "max_memory_bytes: %" G_GUINT64_FORMAT " is above the maximum of %"
                        G_GUINT64_FORMAT, spec->max_memory_bytes, MV_MEMORY_MAX_BYTES);
      if (spec->max_memory_bytes % MV_MEMORY_STEP_BYTES != 0)
        return invalid (error, "max_memory_bytes: %" G_GUINT64_FORMAT " is not a multiple of %"
                        G_GUINT64_FORMAT " (2 MiB)", spec->max_memory_bytes, MV_MEMORY_STEP_BYTES);
    }
  return TRUE;
}

static gboolean
validate_disks (const MvSpec *spec, GError **error)
{
  if (spec->disks->len > MV_DISKS_MAX)
    return invalid (error, "disks: %u disks, more than the limit of %d",
                    spec->disks->len, MV_DISKS_MAX);
  for (guint i = 0; i < spec->disks->len; i++)
    {
      const MvDisk *disk = g_ptr_array_index (spec->disks, i);
      g_autofree char *field = g_strdup_printf ("disks[%u].path", i);

      if (!check_path (field, disk->path, TRUE, error))
        return FALSE;
    }
  return TRUE;
}

static gboolean
validate_readiness (const MvSpec *spec, GError **error)
{
  switch (spec->readiness)
    {
    case MV_READINESS_VMM:
    case MV_READINESS_AGENT:
      return TRUE;
    case MV_READINESS_CONSOLE:
      if (spec->readiness_text == NULL || *spec->readiness_text == '\0')
        return invalid (error, "readiness: the console text is empty");
      if (strlen (spec->readiness_text) > MV_READINESS_TEXT_MAX_BYTES)
        return invalid (error, "readiness: the console text is longer than %d bytes",
                        MV_READINESS_TEXT_MAX_BYTES);
      return check_utf8 ("readiness", spec->readiness_text, error);
    }
  return invalid (error, "readiness: unknown kind %d", (int) spec->readiness);
}

static gboolean
validate_hostname (const MvSpec *spec, GError **error)
{
  /* Empty is the machine's name. */
  if (spec->hostname == NULL || *spec->hostname == '\0')
    return TRUE;
  if (strlen (spec->hostname) > MV_HOSTNAME_MAX_BYTES)
    return invalid (error, "hostname: longer than %d bytes", MV_HOSTNAME_MAX_BYTES);
  if (!valid_dns_name (spec->hostname))
    {
      if (!check_utf8 ("hostname", spec->hostname, error))
        return FALSE;
      return invalid (error, "hostname: '%s' is not a DNS name (labels of 1–63 letters, "
                      "digits and '-', not starting or ending with '-')", spec->hostname);
    }
  return TRUE;
}

static gsize
string_map_json_size (GHashTable *map)
{
  g_autoptr(JsonNode) node = mv_json_string_map_to_node (map, TRUE);
  g_autofree char *json = json_to_string (node, FALSE);

  return strlen (json);
}

static gboolean
validate_guest_metadata (const MvSpec *spec, GError **error)
{
  GHashTableIter iter;
  gpointer key, value;
  gsize size;

  if (spec->ssh_keys->len > MV_SSH_KEYS_MAX)
    return invalid (error, "ssh_keys: %u keys, more than the limit of %d",
                    spec->ssh_keys->len, MV_SSH_KEYS_MAX);
  for (guint i = 0; i < spec->ssh_keys->len; i++)
    {
      const char *key_text = g_ptr_array_index (spec->ssh_keys, i);
      g_autofree char *field = g_strdup_printf ("ssh_keys[%u]", i);
      gsize len = key_text != NULL ? strlen (key_text) : 0;

      if (len == 0)
        return invalid (error, "%s: empty", field);
      if (len > MV_SSH_KEY_MAX_BYTES)
        return invalid (error, "%s: longer than %d bytes", field, MV_SSH_KEY_MAX_BYTES);
      if (!check_utf8 (field, key_text, error))
        return FALSE;
      if (strpbrk (key_text, "\r\n") != NULL)
        return invalid (error, "%s: contains a newline (one key per entry)", field);
    }

  if (spec->user_data != NULL)
    {
      if (strlen (spec->user_data) > MV_USER_DATA_MAX_BYTES)
        return invalid (error, "user_data: longer than %d bytes", MV_USER_DATA_MAX_BYTES);
      if (!check_utf8 ("user_data", spec->user_data, error))
        return FALSE;
    }

  if (g_hash_table_size (spec->metadata) > MV_METADATA_MAX_ENTRIES)
    return invalid (error, "metadata: %u entries, more than the limit of %d",
                    g_hash_table_size (spec->metadata), MV_METADATA_MAX_ENTRIES);
  g_hash_table_iter_init (&iter, spec->metadata);
  while (g_hash_table_iter_next (&iter, &key, &value))
    {
      gsize len = strlen (key);

      if (len == 0)
        return invalid (error, "metadata: empty key");
      if (len > MV_METADATA_KEY_MAX_BYTES)
        return invalid (error, "metadata: a key is longer than %d bytes",
                        MV_METADATA_KEY_MAX_BYTES);
      if (!check_utf8 ("metadata", key, error) || !check_utf8 ("metadata", value, error))
        return FALSE;
    }
  size = string_map_json_size (spec->metadata);
  if (size > MV_METADATA_MAX_JSON_BYTES)
    return invalid (error, "metadata: %" G_GSIZE_FORMAT " bytes of JSON, more than the limit of %d",
                    size, MV_METADATA_MAX_JSON_BYTES);

  size = mv_spec_metadata_document_size (spec);
  if (size > MV_METADATA_DOCUMENT_MAX_BYTES)
    return invalid (error, "metadata: the guest metadata document (hostname, ssh_keys, "
                    "user_data and metadata) is %" G_GSIZE_FORMAT " bytes, "
                    "more than the limit of %d", size, MV_METADATA_DOCUMENT_MAX_BYTES);
  return TRUE;
}

static gboolean
validate_labels (const MvSpec *spec, GError **error)
{
  GHashTableIter iter;
  gpointer key, value;

  if (g_hash_table_size (spec->labels) > MV_LABELS_MAX)
    return invalid (error, "labels: %u labels, more than the limit of %d",
                    g_hash_table_size (spec->labels), MV_LABELS_MAX);
  g_hash_table_iter_init (&iter, spec->labels);
  while (g_hash_table_iter_next (&iter, &key, &value))
    {
      gsize len = strlen (key);

      if (len == 0)
        return invalid (error, "labels: empty key");
      if (len > MV_LABEL_KEY_MAX_BYTES)
        return invalid (error, "labels: a key is longer than %d bytes", MV_LABEL_KEY_MAX_BYTES);
      if (!check_utf8 ("labels", key, error))
        return FALSE;
      if (strlen (value) > MV_LABEL_VALUE_MAX_BYTES)
        return invalid (error, "labels.%s: value longer than %d bytes",
                        (const char *) key, MV_LABEL_VALUE_MAX_BYTES);
      if (!check_utf8 ("labels", value, error))
        return FALSE;
    }
  return TRUE;
}

static gboolean
validate_policies (const MvSpec *spec, guint32 standby_min, GError **error)
{
  guint n_rules = json_array_get_length (spec->firewall);

  if (n_rules > MV_FIREWALL_RULES_MAX)
    return invalid (error, "firewall: %u rules, more than the limit of %d",
                    n_rules, MV_FIREWALL_RULES_MAX);
  for (guint i = 0; i < n_rules; i++)
    if (!JSON_NODE_HOLDS_OBJECT (json_array_get_element (spec->firewall, i)))
      return invalid (error, "firewall[%u]: expected an object", i);

  if ((guint) spec->restart_mode >= G_N_ELEMENTS (restart_mode_names))
    return invalid (error, "restart.mode: unknown mode %d", (int) spec->restart_mode);
  if (spec->restart_max_retries > MV_RESTART_MAX_RETRIES_MAX)
    return invalid (error, "restart.max_retries: %u is above the maximum of %d",
                    spec->restart_max_retries, MV_RESTART_MAX_RETRIES_MAX);
  if (spec->restart_max_retries != 0 && spec->restart_mode != MV_RESTART_ON_FAILURE)
    return invalid (error, "restart.max_retries: only applies to mode on-failure, not %s",
                    mv_restart_mode_to_string (spec->restart_mode));

  if (spec->standby_after_seconds != 0 && spec->standby_after_seconds < standby_min)
    return invalid (error, "standby_after_seconds: %u is below the minimum of %u "
                    "(0 turns standby off)",
                    spec->standby_after_seconds, standby_min);
  return TRUE;
}

gboolean
mv_spec_validate (const MvSpec *spec, GError **error)
{
  return mv_spec_validate_with_standby_min (spec, MV_STANDBY_AFTER_MIN_SECONDS, error);
}

gboolean
mv_spec_validate_with_standby_min (const MvSpec *spec, guint32 standby_min, GError **error)
{
  g_return_val_if_fail (spec != NULL, FALSE);

  if (spec->id != NULL && !mv_id_validate (spec->id, error))
    return FALSE;
  return mv_name_validate ("name", spec->name, error) &&
         validate_hypervisor (spec, error) &&
         validate_boot (spec, error) &&
         validate_resources (spec, error) &&
         validate_disks (spec, error) &&
         validate_readiness (spec, error) &&
         check_utf8 ("network_name", spec->network_name, error) &&
         check_utf8 ("static_ip", spec->static_ip, error) &&
         validate_hostname (spec, error) &&
         validate_guest_metadata (spec, error) &&
         validate_labels (spec, error) &&
         validate_policies (spec, standby_min, error);
}

/* The document as the metadata service serves it:
 * {"latest":{"meta-data":{...},"user-data":"..."}}. */
JsonNode *
mv_spec_metadata_document (const MvSpec *spec)
{
  g_autoptr(JsonObject) meta = json_object_new ();
  g_autoptr(JsonObject) latest = json_object_new ();
  g_autoptr(JsonObject) root = json_object_new ();
  g_autoptr(JsonArray) keys = json_array_new ();
  const char *hostname;

  g_return_val_if_fail (spec != NULL, NULL);

  /* The guest is called after the machine when no hostname is given. */
  hostname = spec->hostname != NULL && *spec->hostname != '\0' ? spec->hostname : spec->name;
  json_object_set_string_member (meta, "hostname", hostname != NULL ? hostname : "");
  for (guint i = 0; i < spec->ssh_keys->len; i++)
    json_array_add_string_element (keys, g_ptr_array_index (spec->ssh_keys, i));
  json_object_set_array_member (meta, "public-keys", g_steal_pointer (&keys));
  json_object_set_member (meta, "attributes", mv_json_string_map_to_node (spec->metadata, TRUE));
  json_object_set_object_member (latest, "meta-data", g_steal_pointer (&meta));
  json_object_set_string_member (latest, "user-data",
                                 spec->user_data != NULL ? spec->user_data : "");
  json_object_set_object_member (root, "latest", g_steal_pointer (&latest));

  return json_node_init_object (json_node_alloc (), root);
}

/* Its size, compact. */
gsize
mv_spec_metadata_document_size (const MvSpec *spec)
{
  g_autoptr(JsonNode) node = mv_spec_metadata_document (spec);
  g_autofree char *json = json_to_string (node, FALSE);

  return strlen (json);
}
