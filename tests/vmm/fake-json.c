/* serde-style JSON checking for the test VMMs. */
#include "fake-json.h"

#include <stdlib.h>
#include <string.h>

#define PRIMITIVE(var, k, opt) const FakeType var = { .kind = k, .nullable = opt }
PRIMITIVE (fake_u8, FAKE_U8, FALSE);
PRIMITIVE (fake_u16, FAKE_U16, FALSE);
PRIMITIVE (fake_u32, FAKE_U32, FALSE);
PRIMITIVE (fake_u64, FAKE_U64, FALSE);
PRIMITIVE (fake_usize, FAKE_USIZE, FALSE);
PRIMITIVE (fake_i64, FAKE_I64, FALSE);
PRIMITIVE (fake_bool, FAKE_BOOL, FALSE);
PRIMITIVE (fake_str, FAKE_STR, FALSE);
PRIMITIVE (fake_any, FAKE_ANY, FALSE);
PRIMITIVE (fake_opt_u8, FAKE_U8, TRUE);
PRIMITIVE (fake_opt_u16, FAKE_U16, TRUE);
PRIMITIVE (fake_opt_u64, FAKE_U64, TRUE);
PRIMITIVE (fake_opt_usize, FAKE_USIZE, TRUE);
PRIMITIVE (fake_opt_i64, FAKE_I64, TRUE);
PRIMITIVE (fake_opt_bool, FAKE_BOOL, TRUE);
PRIMITIVE (fake_opt_str, FAKE_STR, TRUE);

G_DEFINE_QUARK (fake-json-error-quark, fake_json_error)

/* A failed check: serde's message, and the key it happened at (borrowed
 * from the schema or the parsed document) for the position. */
typedef struct {
  char       *message;
  const char *key;
} Failure;

static const char *
int_name (FakeKind kind)
{
  switch (kind)
    {
    case FAKE_U8: return "u8";
    case FAKE_U16: return "u16";
    case FAKE_U32: return "u32";
    case FAKE_U64: return "u64";
    case FAKE_USIZE: return "usize";
    case FAKE_I64: return "i64";
    default: return NULL;
    }
}

static char *
describe (JsonNode *value)
{
  if (JSON_NODE_HOLDS_NULL (value))
    return g_strdup ("null");
  if (JSON_NODE_HOLDS_ARRAY (value))
    return g_strdup ("sequence");
  if (JSON_NODE_HOLDS_OBJECT (value))
    return g_strdup ("map");
  switch (json_node_get_value_type (value))
    {
    case G_TYPE_BOOLEAN:
      return g_strdup_printf ("boolean `%s`", json_node_get_boolean (value) ? "true" : "false");
    case G_TYPE_INT64:
      return g_strdup_printf ("integer `%" G_GINT64_FORMAT "`", json_node_get_int (value));
    case G_TYPE_DOUBLE:
      {
        char buf[G_ASCII_DTOSTR_BUF_SIZE];
        g_ascii_dtostr (buf, sizeof buf, json_node_get_double (value));
        /* serde writes a float that is whole as "2.0". */
        return g_strdup_printf ("floating point `%s%s`", buf, strpbrk (buf, ".eEn") ? "" : ".0");
      }
    default:
      {
        g_autofree char *quoted = json_to_string (value, FALSE);
        return g_strdup_printf ("string %s", quoted);
      }
    }
}

static char *
one_of (const char *const *names, gsize n)
{
  g_autoptr (GString) text = g_string_new (NULL);

  if (n == 0)
    return g_strdup ("there are no fields");
  if (n == 1)
    return g_strdup_printf ("expected `%s`", names[0]);
  if (n == 2)
    return g_strdup_printf ("expected `%s` or `%s`", names[0], names[1]);
  g_string_append (text, "expected one of ");
  for (gsize i = 0; i < n; i++)
    g_string_append_printf (text, "%s`%s`", i ? ", " : "", names[i]);
  return g_strdup (text->str);
}

static gboolean
fail (Failure *failure, const char *key, const char *format, ...) G_GNUC_PRINTF (3, 4);

static gboolean
fail (Failure *failure, const char *key, const char *format, ...)
{
  va_list args;

  va_start (args, format);
  failure->message = g_strdup_vprintf (format, args);
  va_end (args);
  failure->key = key;
  return FALSE;
}

static gboolean
wrong_type (Failure *failure, const char *key, JsonNode *value, const char *expected)
{
  g_autofree char *what = describe (value);

  return fail (failure, key, "invalid type: %s, expected %s", what, expected);
}

static JsonNode *check (const FakeType *type, JsonNode *value, const char *key, Failure *failure);

static JsonNode *
check_int (const FakeType *type, JsonNode *value, const char *key, Failure *failure)
{
  const char *name = int_name (type->kind);
  gint64 n, lo = 0, hi = G_MAXINT64;

  if (!JSON_NODE_HOLDS_VALUE (value) || json_node_get_value_type (value) != G_TYPE_INT64)
    {
      wrong_type (failure, key, value, name);
      return NULL;
    }
  n = json_node_get_int (value);
  switch (type->kind)
    {
    case FAKE_U8: hi = G_MAXUINT8; break;
    case FAKE_U16: hi = G_MAXUINT16; break;
    case FAKE_U32: hi = G_MAXUINT32; break;
    case FAKE_I64: lo = G_MININT64; break;
    default: break;
    }
  if (n < lo || n > hi)
    {
      fail (failure, key, "invalid value: integer `%" G_GINT64_FORMAT "`, expected %s", n, name);
      return NULL;
    }
  return json_node_copy (value);
}

static JsonNode *
check_enum (const FakeType *type, JsonNode *value, const char *key, Failure *failure)
{
  const char *text;
  gsize n = 0;
  g_autofree char *expected = NULL;

  if (!JSON_NODE_HOLDS_VALUE (value) || json_node_get_value_type (value) != G_TYPE_STRING)
    {
      wrong_type (failure, key, value, "variant identifier");
      return NULL;
    }
  text = json_node_get_string (value);
  for (; type->variants[n]; n++)
    if (strcmp (text, type->variants[n]) == 0 ||
        (type->any_case && g_ascii_strcasecmp (text, type->variants[n]) == 0))
      {
        JsonNode *canonical = json_node_new (JSON_NODE_VALUE);
        json_node_set_string (canonical, type->variants[n]);
        return canonical;
      }
  expected = one_of (type->variants, n);
  fail (failure, key, "unknown variant `%s`, %s", text, expected);
  return NULL;
}

static JsonNode *
check_struct (const FakeType *type, JsonNode *value, const char *key, Failure *failure)
{
  g_autoptr (JsonObject) out = json_object_new ();
  g_autoptr (GPtrArray) names = g_ptr_array_new ();
  JsonObject *in;
  JsonObjectIter iter;
  const char *member;
  JsonNode *node;

  if (!JSON_NODE_HOLDS_OBJECT (value))
    {
      g_autofree char *expected = g_strdup_printf ("struct %s", type->name);
      wrong_type (failure, key, value, expected);
      return NULL;
    }
  in = json_node_get_object (value);
  for (const FakeField *f = type->fields; f->name; f++)
    g_ptr_array_add (names, (gpointer) f->name);
  if (!type->lenient)
    {
      json_object_iter_init (&iter, in);
      while (json_object_iter_next (&iter, &member, &node))
        if (!g_ptr_array_find_with_equal_func (names, member, g_str_equal, NULL))
          {
            g_autofree char *expected = one_of ((const char *const *) names->pdata, names->len);
            fail (failure, member, "unknown field `%s`, %s", member, expected);
            return NULL;
          }
    }
  for (const FakeField *f = type->fields; f->name; f++)
    {
      JsonNode *given = json_object_get_member (in, f->name);

      if (given)
        {
          JsonNode *checked = check (f->type, given, f->name, failure);
          if (!checked)
            return NULL;
          json_object_set_member (out, f->name, checked);
        }
      else if (f->required)
        {
          fail (failure, NULL, "missing field `%s`", f->name);
          return NULL;
        }
      else if (f->fallback)
        json_object_set_member (out, f->name, json_from_string (f->fallback, NULL));
      else
        json_object_set_null_member (out, f->name);
    }
  /* Cloud Hypervisor ignores what it does not know; it is kept here so
   * that a config reads back as it was given. */
  json_object_iter_init (&iter, in);
  while (json_object_iter_next (&iter, &member, &node))
    if (!json_object_has_member (out, member))
      json_object_set_member (out, member, json_node_copy (node));
  node = json_node_new (JSON_NODE_OBJECT);
  json_node_set_object (node, out);
  return node;
}

static JsonNode *
check (const FakeType *type, JsonNode *value, const char *key, Failure *failure)
{
  if (type->nullable && JSON_NODE_HOLDS_NULL (value))
    return json_node_new (JSON_NODE_NULL);
  switch (type->kind)
    {
    case FAKE_ANY:
      return json_node_copy (value);
    case FAKE_BOOL:
      if (!JSON_NODE_HOLDS_VALUE (value) || json_node_get_value_type (value) != G_TYPE_BOOLEAN)
        {
          wrong_type (failure, key, value, "a boolean");
          return NULL;
        }
      return json_node_copy (value);
    case FAKE_STR:
      if (!JSON_NODE_HOLDS_VALUE (value) || json_node_get_value_type (value) != G_TYPE_STRING)
        {
          wrong_type (failure, key, value, "a string");
          return NULL;
        }
      return json_node_copy (value);
    case FAKE_ENUM:
      return check_enum (type, value, key, failure);
    case FAKE_STRUCT:
      return check_struct (type, value, key, failure);
    case FAKE_LIST:
      {
        g_autoptr (JsonArray) out = NULL;
        JsonArray *in;
        JsonNode *node;

        if (!JSON_NODE_HOLDS_ARRAY (value))
          {
            wrong_type (failure, key, value, "a sequence");
            return NULL;
          }
        in = json_node_get_array (value);
        out = json_array_new ();
        for (guint i = 0; i < json_array_get_length (in); i++)
          {
            JsonNode *checked = check (type->of, json_array_get_element (in, i), key, failure);
            if (!checked)
              return NULL;
            json_array_add_element (out, checked);
          }
        node = json_node_new (JSON_NODE_ARRAY);
        json_node_set_array (node, out);
        return node;
      }
    default:
      return check_int (type, value, key, failure);
    }
}

/* serde's position: just past the key the problem is at, or the end. */
static void
position (const char *text, gsize len, const char *key, guint *line, guint *column)
{
  gsize offset = len;
  const char *found = NULL;

  if (key)
    {
      g_autofree char *needle = g_strdup_printf ("\"%s\"", key);
      found = g_strstr_len (text, len, needle);
      if (found)
        offset = (found - text) + strlen (needle);
    }
  if (!found)
    while (offset > 0 && g_ascii_isspace (text[offset - 1]))
      offset--;
  *line = 1;
  *column = 0;
  for (gsize i = 0; i < offset; i++)
    {
      if (text[i] == '\n')
        {
          (*line)++;
          *column = 0;
        }
      else
        (*column)++;
    }
}

static JsonNode *
finish_check (JsonNode *root, const char *text, gsize len, const FakeType *type, GError **error)
{
  Failure failure = { 0 };
  JsonNode *checked;
  guint line, column;

  if (!type)
    return json_node_copy (root);
  checked = check (type, root, NULL, &failure);
  if (checked)
    return checked;
  position (text, len, failure.key, &line, &column);
  g_set_error (error, fake_json_error_quark (), 0, "%s at line %u column %u", failure.message,
               line, column);
  g_free (failure.message);
  return NULL;
}

/* json-glib's words for a syntax error, as serde_json says them. */
static const char *
serde_syntax_message (const GError *error)
{
  const char *m = error->message;

  switch (error->code)
    {
    case JSON_PARSER_ERROR_TRAILING_COMMA:
      return "trailing comma";
    case JSON_PARSER_ERROR_MISSING_COMMA:
      return "expected `,` or `}`";
    case JSON_PARSER_ERROR_MISSING_COLON:
      return "expected `:`";
    default:
      if (strstr (m, "expected end of file"))
        return "trailing characters";
      if (strstr (m, "expected string constant"))
        return "key must be a string";
      if (strstr (m, "unterminated string"))
        return "EOF while parsing a string";
      return "expected value";
    }
}

/* json-glib keeps the last of two members with one name; serde refuses
 * the second. The signal comes once per member parsed. */
static void
on_member (JsonParser *parser, JsonObject *object, const char *name, gpointer data)
{
  GHashTable *seen = data;
  g_autofree char *id = g_strdup_printf ("%p/%s", (void *) object, name);
  const char *first_duplicate = g_object_get_data (G_OBJECT (parser), "duplicate");

  if (g_hash_table_contains (seen, id) && !first_duplicate)
    g_object_set_data_full (G_OBJECT (parser), "duplicate", g_strdup (name), g_free);
  g_hash_table_add (seen, g_steal_pointer (&id));
}

JsonNode *
fake_json_parse (const char *data, gsize len, const FakeType *type, GError **error)
{
  g_autoptr (JsonParser) parser = json_parser_new ();
  g_autoptr (GHashTable) seen = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  g_autoptr (GError) local = NULL;
  const char *bad, *duplicate;
  guint line, column;

  if (!g_utf8_validate (data, len, &bad))
    {
      g_set_error (error, fake_json_error_quark (), 0,
                   "invalid unicode code point at line 1 column %zu", (gsize) (bad - data) + 1);
      return NULL;
    }
  g_signal_connect (parser, "object-member", G_CALLBACK (on_member), seen);
  if (!json_parser_load_from_data (parser, data, len, &local))
    {
      /* "<data>:LINE:COLUMN: Parse error: ..." */
      const char *p = strchr (local->message, ':');
      line = p ? strtoul (p + 1, (char **) &p, 10) : 1;
      column = p && *p == ':' ? strtoul (p + 1, NULL, 10) : 0;
      g_set_error (error, fake_json_error_quark (), 0, "%s at line %u column %u",
                   serde_syntax_message (local), line, column);
      return NULL;
    }
  if (!json_parser_get_root (parser))
    {
      position (data, len, NULL, &line, &column);
      g_set_error (error, fake_json_error_quark (), 0,
                   "EOF while parsing a value at line %u column %u", line, column);
      return NULL;
    }
  duplicate = g_object_get_data (G_OBJECT (parser), "duplicate");
  if (duplicate)
    {
      position (data, len, duplicate, &line, &column);
      g_set_error (error, fake_json_error_quark (), 0, "duplicate field `%s` at line %u column %u",
                   duplicate, line, column);
      return NULL;
    }
  return finish_check (json_parser_get_root (parser), data, len, type, error);
}

JsonNode *
fake_json_check (JsonNode *value, const FakeType *type, GError **error)
{
  g_autofree char *text = fake_json_text (value);

  return finish_check (value, text, strlen (text), type, error);
}

char *
fake_json_text (JsonNode *node)
{
  return json_to_string (node, FALSE);
}

JsonNode *
fake_json_merge_patch (JsonNode *target, JsonNode *patch)
{
  JsonObjectIter iter;
  const char *name;
  JsonNode *value;
  JsonObject *out;

  if (!JSON_NODE_HOLDS_OBJECT (patch))
    {
      if (target)
        json_node_unref (target);
      return json_node_copy (patch);
    }
  if (!target || !JSON_NODE_HOLDS_OBJECT (target))
    {
      if (target)
        json_node_unref (target);
      target = json_node_new (JSON_NODE_OBJECT);
      json_node_take_object (target, json_object_new ());
    }
  out = json_node_get_object (target);
  json_object_iter_init (&iter, json_node_get_object (patch));
  while (json_object_iter_next (&iter, &name, &value))
    {
      if (JSON_NODE_HOLDS_NULL (value))
        json_object_remove_member (out, name);
      else
        {
          JsonNode *old = json_object_get_member (out, name);
          json_object_set_member (out, name,
                                  fake_json_merge_patch (old ? json_node_copy (old) : NULL, value));
        }
    }
  return target;
}

gint64
fake_json_int (JsonObject *object, const char *name)
{
  JsonNode *node = object ? json_object_get_member (object, name) : NULL;

  return node && JSON_NODE_HOLDS_VALUE (node) ? json_node_get_int (node) : 0;
}

const char *
fake_json_str (JsonObject *object, const char *name)
{
  JsonNode *node = object ? json_object_get_member (object, name) : NULL;

  return node && JSON_NODE_HOLDS_VALUE (node) &&
         json_node_get_value_type (node) == G_TYPE_STRING ? json_node_get_string (node) : NULL;
}

gboolean
fake_json_bool (JsonObject *object, const char *name)
{
  JsonNode *node = object ? json_object_get_member (object, name) : NULL;

  return node && JSON_NODE_HOLDS_VALUE (node) && json_node_get_boolean (node);
}

JsonObject *
fake_json_obj (JsonObject *object, const char *name)
{
  JsonNode *node = object ? json_object_get_member (object, name) : NULL;

  return node && JSON_NODE_HOLDS_OBJECT (node) ? json_node_get_object (node) : NULL;
}

JsonArray *
fake_json_arr (JsonObject *object, const char *name)
{
  JsonNode *node = object ? json_object_get_member (object, name) : NULL;

  return node && JSON_NODE_HOLDS_ARRAY (node) ? json_node_get_array (node) : NULL;
}

gboolean
fake_json_is_null (JsonObject *object, const char *name)
{
  JsonNode *node = object ? json_object_get_member (object, name) : NULL;

  return !node || JSON_NODE_HOLDS_NULL (node);
}

JsonObject *
fake_json_object_copy (JsonObject *object)
{
  g_autoptr (JsonNode) node = json_node_new (JSON_NODE_OBJECT);
  g_autoptr (JsonNode) copy = NULL;

  json_node_set_object (node, object);
  copy = json_node_copy (node);
  return json_object_ref (json_node_get_object (copy));
}
