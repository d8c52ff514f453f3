/* JSON helpers shared by the spec and the records. Pure. */
#include "json-util.h"
#include "errors.h"

#include <stdlib.h>
#include <string.h>

/* ---- strict reading ---- */

const char *
mv_json_node_kind (JsonNode *node)
{
  switch (JSON_NODE_TYPE (node))
    {
    case JSON_NODE_OBJECT:
      return "an object";
    case JSON_NODE_ARRAY:
      return "an array";
    case JSON_NODE_NULL:
      return "null";
    case JSON_NODE_VALUE:
      break;
    }
  switch (json_node_get_value_type (node))
    {
    case G_TYPE_STRING:
      return "a string";
    case G_TYPE_BOOLEAN:
      return "a boolean";
    case G_TYPE_INT64:
      return "an integer";
    case G_TYPE_DOUBLE:
      return "a number";
    default:
      return "a value";
    }
}

gboolean
mv_json_wrong_type (JsonNode *node, const char *field, const char *expected, GError **error)
{
  g_set_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT,
               "%s: expected %s, got %s", field, expected, mv_json_node_kind (node));
  return FALSE;
}

JsonNode *
mv_json_member (JsonObject *object, const char *name)
{
  JsonNode *node = json_object_get_member (object, name);

  if (node == NULL || JSON_NODE_HOLDS_NULL (node))
    return NULL;
  return node;
}

JsonNode *
mv_json_required_member (JsonObject *object, const char *name, GError **error)
{
  JsonNode *node = mv_json_member (object, name);

  if (node == NULL)
    g_set_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT, "%s: missing", name);
  return node;
}

gboolean
mv_json_reject_unknown_members (JsonObject *object, const char *where,
                                const char *const *known, GError **error)
{
  g_autoptr(GList) names = json_object_get_members (object);

  for (GList *l = names; l != NULL; l = l->next)
    {
      if (g_strv_contains (known, l->data))
        continue;
      if (where != NULL)
        g_set_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT,
                     "%s: unknown field '%s'", where, (const char *) l->data);
      else
        g_set_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT,
                     "unknown field '%s'", (const char *) l->data);
      return FALSE;
    }
  return TRUE;
}

gboolean
mv_json_read_bool (JsonNode *node, const char *field, gboolean *out, GError **error)
{
  if (!JSON_NODE_HOLDS_VALUE (node) || json_node_get_value_type (node) != G_TYPE_BOOLEAN)
    return mv_json_wrong_type (node, field, "a boolean", error);
  *out = json_node_get_boolean (node);
  return TRUE;
}

gboolean
mv_json_read_string (JsonNode *node, const char *field, const char **out, GError **error)
{
  if (!JSON_NODE_HOLDS_VALUE (node) || json_node_get_value_type (node) != G_TYPE_STRING)
    return mv_json_wrong_type (node, field, "a string", error);
  *out = json_node_get_string (node) != NULL ? json_node_get_string (node) : "";
  return TRUE;
}

gboolean
mv_json_read_string_member (JsonObject *object, const char *name, gboolean empty_is_absent,
                            char **out, GError **error)
{
  JsonNode *node = mv_json_member (object, name);
  const char *value = NULL;

  if (node == NULL)
    return TRUE;
  if (!mv_json_read_string (node, name, &value, error))
    return FALSE;
  g_free (*out);
  *out = (empty_is_absent && *value == '\0') ? NULL : g_strdup (value);
  return TRUE;
}

gboolean
mv_json_read_int (JsonNode *node, const char *field, gint64 min, gint64 max,
                  gint64 *out, GError **error)
{
  gint64 value;

  if (!JSON_NODE_HOLDS_VALUE (node) || json_node_get_value_type (node) != G_TYPE_INT64)
    return mv_json_wrong_type (node, field, "an integer", error);
  value = json_node_get_int (node);
  if (value < min)
    {
      g_set_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT,
                   "%s: %" G_GINT64_FORMAT " is below the minimum of %" G_GINT64_FORMAT,
                   field, value, min);
      return FALSE;
    }
  if (value > max)
    {
      g_set_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT,
                   "%s: %" G_GINT64_FORMAT " is more than the limit of %" G_GINT64_FORMAT,
                   field, value, max);
      return FALSE;
    }
  *out = value;
  return TRUE;
}

gboolean
mv_json_read_integer (JsonNode *node, const char *field, gint64 *out, char **written,
                      GError **error)
{
  double value;

  *written = NULL;
  if (JSON_NODE_HOLDS_VALUE (node) && json_node_get_value_type (node) == G_TYPE_INT64)
    {
      *out = json_node_get_int (node);
      return TRUE;
    }
  if (!JSON_NODE_HOLDS_VALUE (node) || json_node_get_value_type (node) != G_TYPE_DOUBLE)
    return mv_json_wrong_type (node, field, "an integer", error);

  value = json_node_get_double (node);
  /* -2^63 and 2^63 are exact doubles; the integers lie between them.
   * Doubles beyond hold only whole numbers. */
  if (value >= -9223372036854775808.0 && value < 9223372036854775808.0)
    {
      if ((double) (gint64) value != value)
        return mv_json_wrong_type (node, field, "an integer", error);
      *out = (gint64) value;
      return TRUE;
    }
  {
    char text[G_ASCII_DTOSTR_BUF_SIZE];

    *written = g_strdup (g_ascii_formatd (text, sizeof text, "%g", value));
  }
  *out = value < 0 ? G_MININT64 : G_MAXINT64;
  return TRUE;
}

guint
mv_json_node_depth (JsonNode *node)
{
  g_autoptr(GArray) pending = g_array_new (FALSE, FALSE, sizeof (JsonNode *));
  g_autoptr(GArray) depths = g_array_new (FALSE, FALSE, sizeof (guint));
  guint deepest = 0;
  guint zero = 0;

  g_array_append_val (pending, node);
  g_array_append_val (depths, zero);
  while (pending->len > 0)
    {
      JsonNode *current = g_array_index (pending, JsonNode *, pending->len - 1);
      guint depth = g_array_index (depths, guint, depths->len - 1) + 1;
      g_autoptr(GList) members = NULL;

      g_array_set_size (pending, pending->len - 1);
      g_array_set_size (depths, depths->len - 1);
      if (JSON_NODE_HOLDS_OBJECT (current))
        members = json_object_get_values (json_node_get_object (current));
      else if (JSON_NODE_HOLDS_ARRAY (current))
        members = json_array_get_elements (json_node_get_array (current));
      else
        continue;
      deepest = MAX (deepest, depth);
      for (GList *l = members; l != NULL; l = l->next)
        {
          g_array_append_val (pending, l->data);
          g_array_append_val (depths, depth);
        }
    }
  return deepest;
}

/* ---- writing ---- */

void
mv_json_set_optional_string (JsonObject *object, const char *name, const char *value)
{
  if (value != NULL)
    json_object_set_string_member (object, name, value);
}

/* ---- copies ---- */

JsonObject *
mv_json_object_deep_copy (JsonObject *object)
{
  g_autoptr(JsonObject) copy = json_object_new ();
  g_autoptr(GList) names = json_object_get_members (object);

  for (GList *l = names; l != NULL; l = l->next)
    json_object_set_member (copy, l->data,
                            mv_json_deep_copy (json_object_get_member (object, l->data)));
  return g_steal_pointer (&copy);
}

JsonArray *
mv_json_array_deep_copy (JsonArray *array)
{
  g_autoptr(JsonArray) copy = json_array_sized_new (json_array_get_length (array));

  for (guint i = 0; i < json_array_get_length (array); i++)
    json_array_add_element (copy, mv_json_deep_copy (json_array_get_element (array, i)));
  return g_steal_pointer (&copy);
}

JsonNode *
mv_json_deep_copy (JsonNode *node)
{
  switch (JSON_NODE_TYPE (node))
    {
    case JSON_NODE_OBJECT:
      {
        g_autoptr(JsonObject) copy = mv_json_object_deep_copy (json_node_get_object (node));

        return json_node_init_object (json_node_alloc (), copy);
      }
    case JSON_NODE_ARRAY:
      {
        g_autoptr(JsonArray) copy = mv_json_array_deep_copy (json_node_get_array (node));

        return json_node_init_array (json_node_alloc (), copy);
      }
    case JSON_NODE_VALUE:
    case JSON_NODE_NULL:
      break;
    }
  return json_node_copy (node);
}
