/* list --label. */
#include "label-filter.h"

#include <string.h>

gboolean
mv_label_selector_valid (const char *selector)
{
  return selector[0] != '\0' && selector[0] != '=';
}

static gboolean
matches_one (JsonObject *labels, const char *selector)
{
  const char *equals = strchr (selector, '=');
  g_autofree char *key = equals ? g_strndup (selector, equals - selector) : g_strdup (selector);
  JsonNode *value;

  if (labels == NULL || !json_object_has_member (labels, key))
    return FALSE;
  if (equals == NULL)
    return TRUE;
  value = json_object_get_member (labels, key);
  return JSON_NODE_HOLDS_VALUE (value) && json_node_get_value_type (value) == G_TYPE_STRING &&
         g_str_equal (json_node_get_string (value), equals + 1);
}

gboolean
mv_labels_match (JsonObject *labels, GPtrArray *selectors)
{
  for (guint i = 0; selectors != NULL && i < selectors->len; i++)
    if (!matches_one (labels, g_ptr_array_index (selectors, i)))
      return FALSE;
  return TRUE;
}
