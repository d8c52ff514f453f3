/* JSON helpers: typed member lookups that tolerate a missing or mistyped
 * member (json-glib 1.6 offers them only for scalars), and the checks the
 * spec and record parsers share. */
#pragma once
#include <json-glib/json-glib.h>

/* "an object", "a string", ...: what @node holds, for error messages. */
const char *mv_json_node_kind (JsonNode *node);
/* Sets MV_ERROR_INVALID_ARGUMENT "@field: expected @expected, got ..."
 * and returns FALSE. */
gboolean    mv_json_wrong_type (JsonNode *node, const char *field, const char *expected,
                                GError **error);
gboolean    mv_json_read_bool (JsonNode *node, const char *field, gboolean *out, GError **error);
/* A copy that shares nothing with @node. */
JsonNode   *mv_json_deep_copy (JsonNode *node);

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
