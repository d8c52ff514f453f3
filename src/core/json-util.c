/* JSON helpers shared by the spec and the records. Pure. */
#include "json-util.h"

#include <stdlib.h>
#include <string.h>

/* ---- shape ---- */

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
