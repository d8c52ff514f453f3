/* The result of Machine.Wait as microvmctl prints it. */
#include "wait-result.h"

#include <string.h>

#include "microvmctl.h"
#include "properties.h"

#define MAX_EXIT_CODE 255

static gboolean
needs_quoting (const char *text)
{
  if (text[0] == '\0')
    return TRUE;
  for (const char *p = text; *p != '\0'; p++)
    if (!g_ascii_isalnum (*p) && strchr ("_.,:/@+-", *p) == NULL)
      return TRUE;
  return FALSE;
}

char *
mv_wait_result_format_text (GPtrArray *result)
{
  GString *out = g_string_new (NULL);

  for (guint i = 0; i < result->len; i++)
    {
      const MvProperty *entry = g_ptr_array_index (result, i);
      g_autofree char *value = NULL;

      /* Strings as they are: the property formatter shows "" as "-". */
      if (g_str_equal (entry->signature, "s"))
        value = g_strdup (mv_properties_get_string (result, entry->name));
      else
        value = mv_property_format (entry);

      if (i > 0)
        g_string_append_c (out, ' ');
      g_string_append_printf (out, "%s=", entry->name);
      if (needs_quoting (value))
        {
          g_autofree char *quoted = g_shell_quote (value);
          g_string_append (out, quoted);
        }
      else
        {
          g_string_append (out, value);
        }
    }
  return g_string_free (out, FALSE);
}

JsonNode *
mv_wait_result_to_json (GPtrArray *result)
{
  g_autoptr(JsonObject) object = json_object_new ();
  JsonNode *root = json_node_alloc ();

  for (guint i = 0; i < result->len; i++)
    {
      const MvProperty *entry = g_ptr_array_index (result, i);

      json_object_set_member (object, entry->name,
                              entry->value != NULL ? json_node_copy (entry->value)
                                                   : json_node_new (JSON_NODE_NULL));
    }
  return json_node_init_object (root, object);
}

int
mv_wait_result_exit_status (const char *condition, GPtrArray *result)
{
  const MvProperty *exit_code;

  if (g_str_equal (condition, "healthy"))
    return g_str_equal (mv_properties_get_string (result, "health"), "healthy")
           ? MV_EXIT_OK : MV_EXIT_FAILURE;

  exit_code = mv_properties_lookup (result, "exit_code");
  if (exit_code != NULL && exit_code->value != NULL &&
      JSON_NODE_HOLDS_VALUE (exit_code->value) &&
      json_node_get_value_type (exit_code->value) == G_TYPE_INT64)
    {
      gint64 code = json_node_get_int (exit_code->value);

      if (code >= 0 && code <= MAX_EXIT_CODE)
        return (int) code;
    }

  if (g_str_equal (mv_properties_get_string (result, "state"), "Failed") ||
      mv_properties_get_string (result, "error")[0] != '\0')
    return MV_EXIT_FAILURE;
  return MV_EXIT_OK;
}
