/* MvJsonOut: see json-out.h. The text is byte for byte what json-glib 1.6
 * generates, compact: the core tests and the spec fuzzer compare the two. */
#include "json-out.h"
#include "json-util.h"

#include <string.h>

void
mv_json_out_init (MvJsonOut *out, MvJsonOutMode mode)
{
  memset (out, 0, sizeof *out);
  out->mode = mode;
  if (mode == MV_JSON_OUT_TREE)
    out->builder = json_builder_new ();
  else if (mode == MV_JSON_OUT_TEXT)
    out->text = g_string_sized_new (1024);
}

void
mv_json_out_clear (MvJsonOut *out)
{
  g_clear_object (&out->builder);
  if (out->text != NULL)
    g_string_free (g_steal_pointer (&out->text), TRUE);
}

JsonNode *
mv_json_out_steal_node (MvJsonOut *out)
{
  g_return_val_if_fail (out->mode == MV_JSON_OUT_TREE && out->depth == 0, NULL);
  return json_builder_get_root (out->builder);
}

char *
mv_json_out_steal_text (MvJsonOut *out)
{
  g_return_val_if_fail (out->mode == MV_JSON_OUT_TEXT && out->depth == 0, NULL);
  return g_string_free (g_steal_pointer (&out->text), FALSE);
}

gsize
mv_json_out_size (const MvJsonOut *out)
{
  g_return_val_if_fail (out->mode != MV_JSON_OUT_TREE, 0);
  return out->size;
}

/* ---- text ---- */

static void
put (MvJsonOut *out, const char *data, gsize len)
{
  out->size += len;
  if (out->text != NULL)
    g_string_append_len (out->text, data, (gssize) len);
}

static void
put_char (MvJsonOut *out, char c)
{
  out->size++;
  if (out->text != NULL)
    g_string_append_c (out->text, c);
}

/* How json-glib 1.6 escapes each byte: 0 for as it is, the letter of a
 * two-letter escape, or 'u' for \u00XX (the other control characters
 * from 1 to 0x1e, and DEL). */
static const char escapes[256] = {
  [0x01] = 'u', [0x02] = 'u', [0x03] = 'u', [0x04] = 'u', [0x05] = 'u', [0x06] = 'u',
  [0x07] = 'u', ['\b'] = 'b', ['\t'] = 't', ['\n'] = 'n', [0x0b] = 'u', ['\f'] = 'f',
  ['\r'] = 'r', [0x0e] = 'u', [0x0f] = 'u', [0x10] = 'u', [0x11] = 'u', [0x12] = 'u',
  [0x13] = 'u', [0x14] = 'u', [0x15] = 'u', [0x16] = 'u', [0x17] = 'u', [0x18] = 'u',
  [0x19] = 'u', [0x1a] = 'u', [0x1b] = 'u', [0x1c] = 'u', [0x1d] = 'u', [0x1e] = 'u',
  ['"'] = '"', ['\\'] = '\\', [0x7f] = 'u',
};

static void
put_quoted (MvJsonOut *out, const char *s)
{
  const char *run = s;

  put_char (out, '"');
  for (const guchar *p = (const guchar *) s; *p != '\0'; p++)
    {
      char two = escapes[*p];

      if (two == 0)
        continue;
      if (two == 'u')
        two = 0;
      put (out, run, (gsize) ((const char *) p - run));
      run = (const char *) p + 1;
      if (two != 0)
        {
          char escape[2] = { '\\', two };

          put (out, escape, 2);
        }
      else
        {
          char escape[7];

          g_snprintf (escape, sizeof escape, "\\u%04x", *p);
          put (out, escape, 6);
        }
    }
  put (out, run, strlen (run));
  put_char (out, '"');
}

/* The comma before a value that follows another in its container. */
static void
before_value (MvJsonOut *out)
{
  if (out->after_name)
    {
      out->after_name = FALSE;
      return;
    }
  if (out->depth > 0)
    {
      if (out->has_items[out->depth - 1])
        put_char (out, ',');
      out->has_items[out->depth - 1] = TRUE;
    }
}

static void
open_container (MvJsonOut *out, char c)
{
  before_value (out);
  g_return_if_fail (out->depth < MV_JSON_OUT_MAX_DEPTH);
  put_char (out, c);
  out->has_items[out->depth++] = FALSE;
}

static void
close_container (MvJsonOut *out, char c)
{
  g_return_if_fail (out->depth > 0);
  out->depth--;
  put_char (out, c);
}

/* ---- the calls ---- */

void
mv_json_out_begin_object (MvJsonOut *out)
{
  if (out->builder != NULL)
    json_builder_begin_object (out->builder);
  else
    open_container (out, '{');
}

void
mv_json_out_end_object (MvJsonOut *out)
{
  if (out->builder != NULL)
    json_builder_end_object (out->builder);
  else
    close_container (out, '}');
}

void
mv_json_out_begin_array (MvJsonOut *out)
{
  if (out->builder != NULL)
    json_builder_begin_array (out->builder);
  else
    open_container (out, '[');
}

void
mv_json_out_end_array (MvJsonOut *out)
{
  if (out->builder != NULL)
    json_builder_end_array (out->builder);
  else
    close_container (out, ']');
}

void
mv_json_out_name (MvJsonOut *out, const char *name)
{
  if (out->builder != NULL)
    {
      json_builder_set_member_name (out->builder, name);
      return;
    }
  before_value (out);
  put_quoted (out, name);
  put_char (out, ':');
  out->after_name = TRUE;
}

void
mv_json_out_string (MvJsonOut *out, const char *value)
{
  if (out->builder != NULL)
    {
      json_builder_add_string_value (out->builder, value);
      return;
    }
  before_value (out);
  put_quoted (out, value);
}

static void
put_int (MvJsonOut *out, gint64 value)
{
  char digits[24];
  char *end = digits + sizeof digits;
  char *first = end;
  guint64 magnitude = value < 0 ? -(guint64) value : (guint64) value;

  do
    {
      *--first = (char) ('0' + magnitude % 10);
      magnitude /= 10;
    }
  while (magnitude > 0);
  if (value < 0)
    *--first = '-';
  put (out, first, (gsize) (end - first));
}

static void
put_boolean (MvJsonOut *out, gboolean value)
{
  if (value)
    put (out, "true", 4);
  else
    put (out, "false", 5);
}

void
mv_json_out_int (MvJsonOut *out, gint64 value)
{
  if (out->builder != NULL)
    {
      json_builder_add_int_value (out->builder, value);
      return;
    }
  before_value (out);
  put_int (out, value);
}

void
mv_json_out_boolean (MvJsonOut *out, gboolean value)
{
  if (out->builder != NULL)
    {
      json_builder_add_boolean_value (out->builder, value);
      return;
    }
  before_value (out);
  put_boolean (out, value);
}

/* A tree of any depth (deeper than the container stack) in text: its own
 * commas are placed here. A value of any other type (a double) is
 * written by json-glib itself, so that its digits are json-glib's. */
static void
put_tree (MvJsonOut *out, JsonNode *node)
{
  switch (json_node_get_node_type (node))
    {
    case JSON_NODE_OBJECT:
      {
        JsonObjectIter iter;
        const char *name;
        JsonNode *member;
        gboolean first = TRUE;

        put_char (out, '{');
        json_object_iter_init_ordered (&iter, json_node_get_object (node));
        while (json_object_iter_next_ordered (&iter, &name, &member))
          {
            if (!first)
              put_char (out, ',');
            first = FALSE;
            put_quoted (out, name);
            put_char (out, ':');
            put_tree (out, member);
          }
        put_char (out, '}');
      }
      return;
    case JSON_NODE_ARRAY:
      {
        JsonArray *array = json_node_get_array (node);

        put_char (out, '[');
        for (guint i = 0; i < json_array_get_length (array); i++)
          {
            if (i > 0)
              put_char (out, ',');
            put_tree (out, json_array_get_element (array, i));
          }
        put_char (out, ']');
      }
      return;
    case JSON_NODE_NULL:
      put (out, "null", 4);
      return;
    case JSON_NODE_VALUE:
      break;
    }

  switch (json_node_get_value_type (node))
    {
    case G_TYPE_INT64:
      put_int (out, json_node_get_int (node));
      return;
    case G_TYPE_BOOLEAN:
      put_boolean (out, json_node_get_boolean (node));
      return;
    case G_TYPE_STRING:
      put_quoted (out, json_node_get_string (node));
      return;
    default:
      {
        g_autofree char *text = json_to_string (node, FALSE);

        put (out, text, strlen (text));
      }
      return;
    }
}

void
mv_json_out_node (MvJsonOut *out, JsonNode *node)
{
  if (out->builder != NULL)
    {
      json_builder_add_value (out->builder, mv_json_deep_copy (node));
      return;
    }
  before_value (out);
  put_tree (out, node);
}

void
mv_json_out_array (MvJsonOut *out, JsonArray *array)
{
  if (out->builder != NULL)
    {
      JsonNode *node = json_node_new (JSON_NODE_ARRAY);

      json_node_take_array (node, mv_json_array_deep_copy (array));
      json_builder_add_value (out->builder, node);
    }
  else
    {
      g_autoptr(JsonNode) node = json_node_new (JSON_NODE_ARRAY);

      json_node_set_array (node, array);
      mv_json_out_node (out, node);
    }
}

/* ---- members ---- */

void
mv_json_out_string_member (MvJsonOut *out, const char *name, const char *value)
{
  mv_json_out_name (out, name);
  mv_json_out_string (out, value);
}

void
mv_json_out_optional_string (MvJsonOut *out, const char *name, const char *value)
{
  if (value != NULL)
    mv_json_out_string_member (out, name, value);
}

void
mv_json_out_int_member (MvJsonOut *out, const char *name, gint64 value)
{
  mv_json_out_name (out, name);
  mv_json_out_int (out, value);
}

void
mv_json_out_boolean_member (MvJsonOut *out, const char *name, gboolean value)
{
  mv_json_out_name (out, name);
  mv_json_out_boolean (out, value);
}

void
mv_json_out_strv (MvJsonOut *out, char **strings)
{
  mv_json_out_begin_array (out);
  for (char **s = strings; s != NULL && *s != NULL; s++)
    mv_json_out_string (out, *s);
  mv_json_out_end_array (out);
}

void
mv_json_out_string_array (MvJsonOut *out, GPtrArray *strings, const char *value)
{
  mv_json_out_begin_array (out);
  for (guint i = 0; i < strings->len; i++)
    mv_json_out_string (out, value != NULL ? value : g_ptr_array_index (strings, i));
  mv_json_out_end_array (out);
}

static int
compare_strings (gconstpointer a, gconstpointer b)
{
  return strcmp (*(const char *const *) a, *(const char *const *) b);
}

void
mv_json_out_string_map (MvJsonOut *out, GHashTable *map, const char *value)
{
  g_autofree const char **keys = NULL;
  guint n_keys;

  keys = (const char **) g_hash_table_get_keys_as_array (map, &n_keys);
  qsort (keys, n_keys, sizeof (char *), compare_strings);
  mv_json_out_begin_object (out);
  for (guint i = 0; i < n_keys; i++)
    mv_json_out_string_member (out, keys[i],
                               value != NULL ? value : g_hash_table_lookup (map, keys[i]));
  mv_json_out_end_object (out);
}

JsonNode *
mv_json_string_map_to_node (GHashTable *map)
{
  MvJsonOut out;
  JsonNode *node;

  mv_json_out_init (&out, MV_JSON_OUT_TREE);
  mv_json_out_string_map (&out, map, NULL);
  node = mv_json_out_steal_node (&out);
  mv_json_out_clear (&out);
  return node;
}
