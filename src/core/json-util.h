/* Helpers for json-glib's trees: lookups that tolerate a missing or
 * mistyped member (json-glib 1.6 offers them only for scalars), and
 * copies that share nothing. What is read strictly is read from a
 * document of json-tree.h. Pure. */
#pragma once
#include <json-glib/json-glib.h>

/* ---- shape ---- */

/* How deep @node nests: 0 for a value, 1 for [] or {}, and so on; found
 * without recursion, as for a tree of any depth. */
guint       mv_json_node_depth (JsonNode *node);

/* ---- writing ---- */

/* Sets the string member @name unless @value is NULL. */
void        mv_json_set_optional_string (JsonObject *object, const char *name, const char *value);

/* ---- copies ---- */

/* Copies that share nothing with the original (json_node_copy() shares
 * objects and arrays), member order kept. */
JsonNode   *mv_json_deep_copy (JsonNode *node);
JsonObject *mv_json_object_deep_copy (JsonObject *object);
JsonArray  *mv_json_array_deep_copy (JsonArray *array);

/* ---- tolerant lookups ---- */

/* The member @name of @object if it is an object, else NULL. */
static inline JsonObject *
mv_json_get_object (JsonObject *object, const char *name)
{
  JsonNode *node = object ? json_object_get_member (object, name) : NULL;

  return node && JSON_NODE_HOLDS_OBJECT (node) ? json_node_get_object (node) : NULL;
}

/* The member @name of @object if it is an array, else NULL. */
static inline JsonArray *
mv_json_get_array (JsonObject *object, const char *name)
{
  JsonNode *node = object ? json_object_get_member (object, name) : NULL;

  return node && JSON_NODE_HOLDS_ARRAY (node) ? json_node_get_array (node) : NULL;
}

/* The member @name of @object if it is a string, else NULL. */
static inline const char *
mv_json_get_string (JsonObject *object, const char *name)
{
  JsonNode *node = object ? json_object_get_member (object, name) : NULL;

  return node && json_node_get_value_type (node) == G_TYPE_STRING ? json_node_get_string (node)
                                                                 : NULL;
}

/* The member @name of @object if it is a non-negative integer, else 0. */
static inline guint64
mv_json_get_uint (JsonObject *object, const char *name)
{
  JsonNode *node = object ? json_object_get_member (object, name) : NULL;

  if (!node || json_node_get_value_type (node) != G_TYPE_INT64 || json_node_get_int (node) < 0)
    return 0;
  return (guint64) json_node_get_int (node);
}
