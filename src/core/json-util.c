/* JSON helpers shared by the spec and the records. Pure. */
#include "json-util.h"
#include "errors.h"

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

gboolean
mv_json_read_bool (JsonNode *node, const char *field, gboolean *out, GError **error)
{
  if (!JSON_NODE_HOLDS_VALUE (node) || json_node_get_value_type (node) != G_TYPE_BOOLEAN)
    return mv_json_wrong_type (node, field, "a boolean", error);
  *out = json_node_get_boolean (node);
  return TRUE;
}

JsonNode *
mv_json_deep_copy (JsonNode *node)
{
  switch (JSON_NODE_TYPE (node))
    {
    case JSON_NODE_OBJECT:
      {
        JsonObject *src = json_node_get_object (node);
        g_autoptr(JsonObject) dst = json_object_new ();
        g_autoptr(GList) names = json_object_get_members (src);

        for (GList *l = names; l != NULL; l = l->next)
          json_object_set_member (dst, l->data,
                                  mv_json_deep_copy (json_object_get_member (src, l->data)));
        return json_node_init_object (json_node_alloc (), dst);
      }
    case JSON_NODE_ARRAY:
      {
        JsonArray *src = json_node_get_array (node);
        g_autoptr(JsonArray) dst = json_array_sized_new (json_array_get_length (src));

        for (guint i = 0; i < json_array_get_length (src); i++)
          json_array_add_element (dst, mv_json_deep_copy (json_array_get_element (src, i)));
        return json_node_init_array (json_node_alloc (), dst);
      }
    case JSON_NODE_VALUE:
    case JSON_NODE_NULL:
      break;
    }
  return json_node_copy (node);
}
