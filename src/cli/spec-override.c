/* The --set FIELD=JSON options of the fork commands. Which fields a fork
 * may change, and to what, is the daemon's to say; this only checks that
 * each option is a field and a JSON value, so a typo is reported before
 * anyone is asked. */
#include "spec-override.h"

#include <string.h>

#include <glib/gi18n.h>
#include <json-glib/json-glib.h>

static gboolean
field_name_valid (const char *field, gsize length)
{
  if (length == 0 || !g_ascii_islower (field[0]))
    return FALSE;
  for (gsize i = 0; i < length; i++)
    if (!g_ascii_islower (field[i]) && !g_ascii_isdigit (field[i]) && field[i] != '_')
      return FALSE;
  return TRUE;
}

/* The deepest nesting of arrays and objects in TEXT, counted before it is
 * parsed, so that a value nested thousands deep never reaches the parser's
 * recursion. Brackets inside strings do not count. */
static guint
nesting_depth (const char *text)
{
  gboolean in_string = FALSE, escaped = FALSE;
  guint depth = 0, deepest = 0;

  for (const char *p = text; *p != '\0'; p++)
    {
      if (in_string)
        {
          if (escaped)
            escaped = FALSE;
          else if (*p == '\\')
            escaped = TRUE;
          else if (*p == '"')
            in_string = FALSE;
          continue;
        }
      if (*p == '"')
        in_string = TRUE;
      else if (*p == '[' || *p == '{')
        deepest = MAX (deepest, ++depth);
      else if ((*p == ']' || *p == '}') && depth > 0)
        depth--;
    }
  return deepest;
}

/* Whether TEXT looks like a word meant as a string: it is not JSON, but
 * the same in double quotes would be. */
static gboolean
looks_like_bare_word (const char *text)
{
  return text[0] != '\0' && strchr ("{[\"-0123456789", text[0]) == NULL &&
         !g_str_equal (text, "true") && !g_str_equal (text, "false") &&
         !g_str_equal (text, "null") && strchr (text, '"') == NULL;
}

/* One "FIELD=JSON": its field and its value. */
static gboolean
parse_override (const char *text, char **field, JsonNode **value, GError **error)
{
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autoptr(GError) json_error = NULL;
  const char *equals = strchr (text, '=');
  const char *json;

  if (equals == NULL)
    {
      g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                   _("invalid --set '%s': expected FIELD=JSON"), text);
      return FALSE;
    }
  if (!field_name_valid (text, equals - text))
    {
      g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                   _("invalid --set '%s': '%.*s' is not the name of a spec field (lower-case "
                     "letters, digits and _)"), text, (int) (equals - text), text);
      return FALSE;
    }
  json = equals + 1;
  if (!g_utf8_validate (json, -1, NULL))
    {
      g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                   _("invalid --set '%.*s=...': the value is not UTF-8 text"),
                   (int) (equals - text), text);
      return FALSE;
    }
  if (nesting_depth (json) > MV_SPEC_OVERRIDE_MAX_DEPTH)
    {
      g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                   _("invalid --set '%.*s=...': the value nests more than %d levels deep"),
                   (int) (equals - text), text, MV_SPEC_OVERRIDE_MAX_DEPTH);
      return FALSE;
    }
  if (!json_parser_load_from_data (parser, json, -1, &json_error) ||
      json_parser_get_root (parser) == NULL)
    {
      g_autofree char *hint = NULL;
      const char *reason = json_error ? json_error->message : _("it is empty");

      if (g_str_has_prefix (reason, "<data>:"))
        reason += strlen ("<data>:");
      if (looks_like_bare_word (json))
        /* TRANSLATORS: keep --set and the quoting as they are. */
        hint = g_strdup_printf (_("; a string is quoted: --set '%.*s=\"%s\"'"),
                                (int) (equals - text), text, json);
      g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                   _("invalid --set '%s': the value is not JSON: %s%s"), text, reason,
                   hint ? hint : "");
      return FALSE;
    }

  *field = g_strndup (text, equals - text);
  *value = json_node_copy (json_parser_get_root (parser));
  return TRUE;
}

char *
mv_spec_overrides_build (const char *name, GPtrArray *overrides, GError **error)
{
  g_autoptr(JsonObject) object = json_object_new ();
  g_autoptr(JsonNode) root = json_node_alloc ();
  g_autofree char *json = NULL;
  guint n = overrides ? overrides->len : 0;

  if (n > MV_SPEC_OVERRIDES_MAX)
    {
      g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                   _("%u --set options: at most %d are taken"), n, MV_SPEC_OVERRIDES_MAX);
      return NULL;
    }
  json_object_set_string_member (object, "name", name);
  for (guint i = 0; i < n; i++)
    {
      g_autofree char *field = NULL;
      JsonNode *value = NULL;

      if (!parse_override (overrides->pdata[i], &field, &value, error))
        return NULL;
      if (json_object_has_member (object, field))
        {
          json_node_unref (value);
          if (g_str_equal (field, "name"))
            g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                         _("--set name: the new machine's name is the NEW-NAME argument"));
          else
            g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                         _("--set %s is given twice"), field);
          return NULL;
        }
      json_object_set_member (object, field, value);
    }

  json_node_init_object (root, object);
  json = json_to_string (root, FALSE);
  if (strlen (json) > MV_SPEC_OVERRIDES_MAX_BYTES)
    {
      g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                   _("the new machine's spec would be %zu bytes, more than the limit of %d"),
                   strlen (json), MV_SPEC_OVERRIDES_MAX_BYTES);
      return NULL;
    }
  return g_steal_pointer (&json);
}
