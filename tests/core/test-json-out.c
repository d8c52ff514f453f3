#include <string.h>

#include "core/json-out.h"

/* Writes the same document in all three forms and checks that the text
 * and its length are what json-glib makes of the tree. */
typedef void (*WriteFunc) (MvJsonOut *out, gconstpointer data);

static void
assert_forms_agree (WriteFunc write, gconstpointer data)
{
  MvJsonOut tree, text, count;
  g_autoptr(JsonNode) node = NULL;
  g_autofree char *theirs = NULL, *ours = NULL;

  mv_json_out_init (&tree, MV_JSON_OUT_TREE);
  mv_json_out_init (&text, MV_JSON_OUT_TEXT);
  mv_json_out_init (&count, MV_JSON_OUT_COUNT);
  write (&tree, data);
  write (&text, data);
  write (&count, data);
  node = mv_json_out_steal_node (&tree);
  theirs = json_to_string (node, FALSE);
  ours = mv_json_out_steal_text (&text);
  g_assert_cmpstr (ours, ==, theirs);
  g_assert_cmpuint (mv_json_out_size (&count), ==, strlen (theirs));
  mv_json_out_clear (&tree);
  mv_json_out_clear (&text);
  mv_json_out_clear (&count);
}

/* Every byte a UTF-8 string may hold below 0x80, as a value and as a
 * member's name: json-glib escapes some control characters and not
 * others, and the length must follow it exactly. */
static void
write_bytes (MvJsonOut *out, gconstpointer data)
{
  mv_json_out_begin_object (out);
  for (int c = 1; c < 0x80; c++)
    {
      char name[8], value[4] = { 'x', (char) c, 'y', '\0' };

      g_snprintf (name, sizeof name, "%c%d", (char) c, c);
      mv_json_out_string_member (out, name, value);
    }
  mv_json_out_string_member (out, "utf-8", "\xc3\xa9\xe2\x80\xa8\xf0\x9f\x98\x80");
  mv_json_out_string_member (out, "", "");
  mv_json_out_end_object (out);
}

static void
test_strings (void)
{
  assert_forms_agree (write_bytes, NULL);
}

static void
write_scalars (MvJsonOut *out, gconstpointer data)
{
  static const gint64 ints[] = { 0, 1, -1, 42, G_MININT64, G_MAXINT64 };

  mv_json_out_begin_array (out);
  for (guint i = 0; i < G_N_ELEMENTS (ints); i++)
    mv_json_out_int (out, ints[i]);
  mv_json_out_boolean (out, TRUE);
  mv_json_out_boolean (out, FALSE);
  mv_json_out_begin_array (out);
  mv_json_out_end_array (out);
  mv_json_out_begin_object (out);
  mv_json_out_end_object (out);
  mv_json_out_begin_object (out);
  mv_json_out_int_member (out, "a", 1);
  mv_json_out_boolean_member (out, "b", FALSE);
  mv_json_out_optional_string (out, "absent", NULL);
  mv_json_out_name (out, "c");
  mv_json_out_strv (out, (char *[]) { "one", "two", NULL });
  mv_json_out_name (out, "d");
  mv_json_out_strv (out, NULL);
  mv_json_out_end_object (out);
  mv_json_out_end_array (out);
}

static void
test_scalars (void)
{
  assert_forms_agree (write_scalars, NULL);
}

/* A tree given as it is: deeper than the writer's own nesting, with
 * doubles and nulls, its members in their order. */
static void
write_tree (MvJsonOut *out, gconstpointer data)
{
  mv_json_out_begin_object (out);
  mv_json_out_name (out, "tree");
  mv_json_out_node (out, (JsonNode *) data);
  mv_json_out_string_member (out, "after", "tree");
  mv_json_out_end_object (out);
}

static void
test_trees (void)
{
  g_autoptr(GString) deep = g_string_new ("");
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autoptr(GError) error = NULL;
  const char *documents[] = {
    "{\"z\":1,\"a\":[1.5,-0.25,1e300,null,true,\"s\\u0001\"],\"m\":{\"y\":{},\"x\":[]}}",
    "[]", "0", "\"text\"", "null", NULL,
  };

  for (guint i = 0; i < 3 * MV_JSON_OUT_MAX_DEPTH; i++)
    g_string_append (deep, "{\"k\":[");
  for (guint i = 0; i < 3 * MV_JSON_OUT_MAX_DEPTH; i++)
    g_string_append (deep, "]}");
  documents[G_N_ELEMENTS (documents) - 1] = deep->str;

  for (guint i = 0; i < G_N_ELEMENTS (documents); i++)
    {
      g_test_message ("%s", documents[i]);
      g_assert_true (json_parser_load_from_data (parser, documents[i], -1, &error));
      g_assert_no_error (error);
      assert_forms_agree (write_tree, json_parser_get_root (parser));
    }
}

static void
write_map (MvJsonOut *out, gconstpointer data)
{
  mv_json_out_begin_array (out);
  mv_json_out_string_map (out, (GHashTable *) data, NULL);
  mv_json_out_string_map (out, (GHashTable *) data, "(hidden)");
  mv_json_out_end_array (out);
}

/* Keys in byte order, whatever the hash order; a redaction replaces every
 * value. */
static void
test_string_map (void)
{
  g_autoptr(GHashTable) map = g_hash_table_new (g_str_hash, g_str_equal);
  g_autoptr(JsonNode) node = NULL;
  g_autofree char *text = NULL;

  g_hash_table_insert (map, "b", "2");
  g_hash_table_insert (map, "a\"", "1");
  g_hash_table_insert (map, "B", "3");
  assert_forms_agree (write_map, map);

  node = mv_json_string_map_to_node (map);
  text = json_to_string (node, FALSE);
  g_assert_cmpstr (text, ==, "{\"B\":\"3\",\"a\\\"\":\"1\",\"b\":\"2\"}");
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/json-out/strings", test_strings);
  g_test_add_func ("/json-out/scalars", test_scalars);
  g_test_add_func ("/json-out/trees", test_trees);
  g_test_add_func ("/json-out/string-map", test_string_map);
  return g_test_run ();
}
