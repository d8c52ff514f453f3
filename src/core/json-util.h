/* Typed member lookups that tolerate a missing or mistyped member, which
 * json-glib 1.6 offers only for scalars. */
#pragma once
#include <json-glib/json-glib.h>

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

/* The member @name of @object if it is a non-negative integer, else 0. */
static inline guint64
mv_json_get_uint (JsonObject *object, const char *name)
{
  JsonNode *node = object ? json_object_get_member (object, name) : NULL;

  if (!node || json_node_get_value_type (node) != G_TYPE_INT64 || json_node_get_int (node) < 0)
    return 0;
  return (guint64) json_node_get_int (node);
}
