#include <string.h>

#include "core/errors.h"
#include "core/json-strict.h"

static const MvJsonLimits limits = { .max_bytes = 1024 * 1024, .max_depth = 32 };

/* The tree is the one json-glib's own parser makes of the text: the same
 * members in the same order, integers as integers and other numbers as
 * doubles, the same strings. */
static void
assert_same_tree (JsonNode *node, const char *text, gssize length)
{
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autoptr(GError) error = NULL;
  g_autofree char *ours = NULL, *theirs = NULL;
  JsonNode *root;

  g_assert_true (json_parser_load_from_data (parser, text, length, &error));
  g_assert_no_error (error);
  root = json_parser_get_root (parser);
  g_assert_true (json_node_equal (node, root));
  ours = json_to_string (node, FALSE);
  theirs = json_to_string (root, FALSE);
  g_assert_cmpstr (ours, ==, theirs);
}

/* Each value of @value's arrays and objects knows its place, its
 * container how many it holds, and only members have names. */
static void
assert_tree_shape (const MvJson *value)
{
  guint count = 0;

  if (value->kind != MV_JSON_ARRAY && value->kind != MV_JSON_OBJECT)
    return;
  mv_json_each (item, value)
    {
      g_assert_cmpuint (item->index, ==, count);
      g_assert_true ((item->name != NULL) == (value->kind == MV_JSON_OBJECT));
      assert_tree_shape (item);
      count++;
    }
  g_assert_cmpuint (value->count, ==, count);
}

/* The daemon's own document of @text holds what json-glib's tree does. */
static void
assert_same_document (const char *text, gssize length)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(MvJsonDoc) doc = mv_json_read (text, length, &limits, "doc", &error);
  g_autoptr(JsonNode) node = NULL;
  g_autoptr(MvJsonDoc) again = NULL;

  g_assert_no_error (error);
  g_assert_nonnull (doc);
  assert_tree_shape (mv_json_doc_root (doc));
  node = mv_json_to_node (mv_json_doc_root (doc));
  assert_same_tree (node, text, length);
  /* A document made of json-glib's tree holds the same again. */
  again = mv_json_doc_from_node (node);
  assert_tree_shape (mv_json_doc_root (again));
  g_clear_pointer (&node, json_node_unref);
  node = mv_json_to_node (mv_json_doc_root (again));
  assert_same_tree (node, text, length);
}

static void
assert_accepted_len (const char *text, gssize length)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonNode) node = mv_json_parse (text, length, &limits, "doc", &error);

  if (error != NULL)
    g_test_message ("refused %s: %s", text, error->message);
  g_assert_no_error (error);
  g_assert_nonnull (node);
  assert_same_tree (node, text, length);
  /* Checking alone takes what parsing takes, and so does reading. */
  g_assert_true (mv_json_check (text, length, &limits, "doc", NULL));
  assert_same_document (text, length);
}

#define assert_accepted(text) assert_accepted_len ((text), -1)

/* Refused with MV_ERROR_INVALID_ARGUMENT, the message holding @needle. */
static char *
refused_len (const char *text, gssize length, const char *needle)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GError) read_error = NULL;
  g_autoptr(GError) check_error = NULL;
  g_autoptr(JsonNode) node = mv_json_parse (text, length, &limits, "doc", &error);
  g_autoptr(MvJsonDoc) doc = mv_json_read (text, length, &limits, "doc", &read_error);

  g_assert_null (node);
  g_assert_null (doc);
  g_assert_false (mv_json_check (text, length, &limits, "doc", &check_error));
  g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
  /* Every way of reading refuses it with the same words. */
  g_assert_cmpstr (read_error->message, ==, error->message);
  g_assert_cmpstr (check_error->message, ==, error->message);
  if (strstr (error->message, needle) == NULL)
    g_assert_cmpstr (error->message, ==, needle);
  g_assert_true (g_str_has_prefix (error->message, "doc: "));
  g_assert_true (g_utf8_validate (error->message, -1, NULL));
  return g_strdup (error->message);
}

#define assert_refused(text, needle) g_free (refused_len ((text), -1, (needle)))

static void
test_accepts_json (void)
{
  static const char *const good[] = {
    "{}", "[]", "0", "-0", "1.5", "-1.5e-3", "2E+10", "\"x\"", "true", "false", "null",
    " \t\r\n{\"a\":[1,{\"b\":null}],\"c\":\"d\"} \n",
    "[\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"]",
    "[\"\\u00e9\\u20AC\"]",
    "[\"\\ud83d\\ude00\"]",                 /* a surrogate pair is one character */
    "[\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"]",
    "[\"\x7f\"]",                           /* DEL is not a JSON control */
    "[9223372036854775807,-9223372036854775808]",
    "[1e-400]",                             /* underflows to 0, which is held */
    "[1.7976931348623157e308]",
    "{\"a\":1,\"b\":{\"a\":2}}",            /* the same key in another object */
    /* A record's shapes: members in their order, every kind of value,
     * nesting both ways, escapes between plain runs. */
    "{\"z\":1,\"a\":-2.5,\"m\":[true,false,null,{\"k\":[[],{}]}],"
    "\"s\":\"a\\\"b\\\\c\\nd\\u0041e\",\"e\":\"\",\"n\":-0,\"f\":1e2,\"g\":0.1}",
    "[[[[[\"deep\"]]]],1,\"\\u00e9x\\u00e9\"]",
    "\"plain\"", "12345678901234567890123456789012345678901234567890123456789012345.5",
  };

  for (guint i = 0; i < G_N_ELEMENTS (good); i++)
    assert_accepted (good[i]);
}

static void
test_refuses_non_json (void)
{
  static const struct {
    const char *text;
    const char *needle;
  } cases[] = {
    { "", "the document is empty" },
    { "  \n ", "the document is empty" },
    { "/* c */ {}", "comments are not allowed" },
    { "{} // c", "comments are not allowed" },
    { "[1] # c", "comments are not allowed" },
    { "{\"a\":1 /* x */}", "comments are not allowed" },
    { "{\"a\"/**/:1}", "comments are not allowed" },
    { "'a'", "single quotes are not allowed" },
    { "{'a':1}", "single quotes are not allowed" },
    { "[\"a\",'b']", "single quotes are not allowed" },
    { "{\"a\":1,}", "trailing commas are not allowed" },
    { "[1,]", "trailing commas are not allowed" },
    { "[1, \n]", "trailing commas are not allowed" },
    { "{}{}", "only one value is allowed" },
    { "1 2", "only one value is allowed" },
    { "{} []", "only one value is allowed" },
    { "\xef\xbb\xbf{}", "a byte order mark is not allowed" },
    { "NaN", "NaN and Infinity are not JSON numbers" },
    { "[Infinity]", "NaN and Infinity are not JSON numbers" },
    { "[-Infinity]", "NaN and Infinity are not JSON numbers" },
    { "undefined", "a bare word is not a JSON value" },
    { "tru", "a bare word is not a JSON value" },
    { "True", "a bare word is not a JSON value" },
    { "{a:1}", "object keys are strings in double quotes" },
    { "[01]", "a number may not have leading zeros" },
    { "[-01]", "a number may not have leading zeros" },
    { "[+1]", "a number may not start with '+'" },
    { "[.5]", "a number must start with a digit" },
    { "[1.]", "a digit must follow '.'" },
    { "[1e]", "a digit must follow the exponent" },
    { "[-]", "a digit must follow '-'" },
    { "[0x10]", "where ',' or ']' should come" },
    { "[\"a\nb\"]", "a raw control character (0x0a) in a string" },
    { "[\"a\tb\"]", "a raw control character (0x09) in a string" },
    { "[\"\\x41\"]", "\\x is not a JSON escape" },
    { "[\"\\u12\"]", "\\u takes four hex digits" },
    { "[\"\\u12g4\"]", "\\u takes four hex digits" },
    { "[\"\xff\"]", "not valid UTF-8" },
    { "[\"\xc0\xaf\"]", "not valid UTF-8" },             /* an overlong '/' */
    { "[\"\xed\xa0\x80\"]", "not valid UTF-8" },         /* a surrogate, encoded */
    { "[\"\xf4\x90\x80\x80\"]", "not valid UTF-8" },     /* past U+10FFFF */
    { "[\"\xe2\x82\"]", "not valid UTF-8" },             /* cut short */
    { "[\xc3\xa9]", "byte 0xc3 where a value should come" },
    { "\x0c[]", "byte 0x0c where a value should come" },  /* form feed is not whitespace */
    { "[\"abc", "a string is not closed" },
    { "[1", "the text ends inside an array" },
    { "{\"a\":1", "the text ends inside an object" },
    { "{\"a\"", "the text ends where ':' after a key should come" },
    { "{\"a\" 1}", "'1' where ':' after a key should come" },
    { "[1 2]", "'2' where ',' or ']' should come" },
    { "{\"a\":1 \"b\":2}", "where ',' or '}' should come" },
    { "[1}", "'}' where ',' or ']' should come" },
    { "[1,,2]", "a value is missing before ','" },
    { "{\"a\":}", "a value is missing before '}'" },
    { "{,}", "a key in double quotes" },
    { "[", "the text ends where a value should come" },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    assert_refused (cases[i].text, cases[i].needle);
}

static void
test_messages (void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonNode) node = NULL;

  node = mv_json_parse ("{/*x*/}", -1, &limits, "spec", &error);
  g_assert_null (node);
  g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
  g_assert_cmpstr (error->message, ==, "spec: not JSON at byte 1: comments are not allowed");
  g_clear_error (&error);

  /* What the text says is refused by the field it is in. */
  node = mv_json_parse ("{\"disks\":[{\"path\":\"/a\"},{\"path\":\"a\\u0000b\"}]}", -1, &limits,
                        "spec", &error);
  g_assert_null (node);
  g_assert_cmpstr (error->message, ==,
                   "spec: disks[1].path: \\u0000 (NUL) is not allowed in a string");
  g_clear_error (&error);

  node = mv_json_parse ("\"\\u0000\"", -1, &limits, "spec", &error);
  g_assert_cmpstr (error->message, ==,
                   "spec: at byte 1: \\u0000 (NUL) is not allowed in a string");
  g_clear_error (&error);

  node = mv_json_parse ("{\"memory_bytes\":18446744073709551617}", -1, &limits, "spec", &error);
  g_assert_cmpstr (error->message, ==,
                   "spec: memory_bytes: the number at byte 16 is too large to hold "
                   "(integers fit in 64 bits, other numbers in a double)");
  g_clear_error (&error);
}

static void
test_nul (void)
{
  /* json-glib would cut "a\u0000b" to "a"; the two are different strings. */
  assert_refused ("[\"a\\u0000b\"]", "\\u0000 (NUL) is not allowed in a string");
  assert_refused ("{\"a\\u0000\":1}", "\\u0000 (NUL) is not allowed in a string");
  /* A raw NUL byte, with the length given. */
  g_free (refused_len ("[\"a\0b\"]", 7, "a raw control character (0x00) in a string"));
  g_free (refused_len ("[1]\0", 4, "only one value is allowed"));
  g_free (refused_len ("[1\0]", 4, "byte 0x00 where ',' or ']' should come"));
}

static void
test_surrogates (void)
{
  assert_refused ("[\"\\ud800\"]", "\\uD800 is a lone surrogate");
  assert_refused ("[\"\\udc00\"]", "\\uDC00 is a lone surrogate");
  assert_refused ("[\"\\ud800x\"]", "\\uD800 is a lone surrogate");
  assert_refused ("[\"\\ud800\\u0041\"]", "\\uD800 is a lone surrogate");
  assert_refused ("[\"\\ud800\\ud800\"]", "\\uD800 is a lone surrogate");
  assert_refused ("[\"\\udfff\\ud800\"]", "\\uDFFF is a lone surrogate");
}

static void
test_numbers (void)
{
  assert_refused ("[9223372036854775808]", "too large to hold");
  assert_refused ("[-9223372036854775809]", "too large to hold");
  assert_refused ("[99999999999999999999]", "too large to hold");
  assert_refused ("[1e400]", "too large to hold");
  assert_refused ("[-1e400]", "too large to hold");

  {
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonNode) node = mv_json_parse ("[9223372036854775807,1e300,-0.5]", -1, &limits,
                                              "doc", &error);
    JsonArray *array;

    g_assert_no_error (error);
    array = json_node_get_array (node);
    g_assert_cmpint (json_array_get_int_element (array, 0), ==, G_MAXINT64);
    g_assert_cmpfloat (json_array_get_double_element (array, 1), ==, 1e300);
    g_assert_cmpfloat (json_array_get_double_element (array, 2), ==, -0.5);
  }
}

static void
test_duplicate_keys (void)
{
  assert_refused ("{\"a\":1,\"a\":2}", "the key \"a\" appears twice");
  /* Escapes are read first: these are one key. */
  assert_refused ("{\"a\":1,\"\\u0061\":2}", "the key \"a\" appears twice");
  assert_refused ("{\"x\":{\"b\":1,\"c\":2,\"b\":3}}", "doc: x: the key \"b\" appears twice");

  /* A large object finds a repeated key by another way than a small
   * one: every member of it, repeated at every place, is found. */
  for (guint n = 1; n <= 70; n += 3)
    for (guint repeated = 0; repeated < n; repeated += 5)
      {
        g_autoptr(GString) text = g_string_new ("{");
        g_autofree char *needle = g_strdup_printf ("the key \"k%u\" appears twice", repeated);
        g_autofree char *unique = NULL;

        for (guint i = 0; i < n; i++)
          g_string_append_printf (text, "\"k%u\":%u,", i, i);
        unique = g_strndup (text->str, text->len - 1);
        /* Without the repeat, it is taken whole. */
        {
          g_autofree char *whole = g_strconcat (unique, "}", NULL);

          assert_accepted (whole);
        }
        g_string_append_printf (text, "\"k%u\":0}", repeated);
        assert_refused (text->str, needle);
      }
}

static char *
nested (guint depth, const char *open, const char *inner, const char *close)
{
  GString *s = g_string_new (NULL);

  for (guint i = 0; i < depth; i++)
    g_string_append (s, open);
  g_string_append (s, inner);
  for (guint i = 0; close != NULL && i < depth; i++)
    g_string_append (s, close);
  return g_string_free (s, FALSE);
}

static void
test_depth (void)
{
  g_autofree char *at_limit = nested (32, "[", "1", "]");
  g_autofree char *objects_at_limit = nested (32, "{\"a\":", "1", "}");
  g_autofree char *over = nested (33, "[", "1", "]");
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonNode) node = NULL;

  assert_accepted (at_limit);
  assert_accepted (objects_at_limit);
  node = mv_json_parse (over, -1, &limits, "spec", &error);
  g_assert_null (node);
  g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
  g_assert_cmpstr (error->message, ==, "spec: nesting depth 33 is more than the limit of 32");
}

/* json-glib recurses once per level and runs out of stack long before
 * this; the check refuses it before json-glib sees it, in one pass. */
static void
test_deep_nesting (void)
{
  static const struct {
    const char *open, *inner, *close;
  } shapes[] = {
    { "[", "1", "]" },
    { "[", "", NULL },                  /* never closed */
    { "{\"a\":", "1", "}" },
    { "{\"a\":[", "1", "]}" },
    { "[{\"\":", "{}", "}]" },
  };

  for (guint i = 0; i < G_N_ELEMENTS (shapes); i++)
    {
      g_autofree char *text = nested (100000, shapes[i].open, shapes[i].inner, shapes[i].close);
      MvJsonLimits big = { .max_bytes = strlen (text), .max_depth = 32 };
      g_autoptr(GError) error = NULL;
      g_autoptr(JsonNode) node = mv_json_parse (text, -1, &big, "doc", &error);

      g_assert_null (node);
      g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
      g_assert_true (g_str_has_prefix (error->message, "doc: nesting depth 33 is more than"));
    }
}

static void
test_size (void)
{
  gsize size = 2000000;
  g_autofree char *text = g_malloc (size + 1);
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonNode) node = NULL;
  MvJsonLimits exact = { .max_bytes = 10, .max_depth = 4 };

  /* A valid document, only too long: whitespace counts as much as values. */
  memset (text, ' ', size);
  text[0] = '[';
  text[size - 1] = ']';
  text[size] = '\0';
  node = mv_json_parse (text, -1, &limits, "spec", &error);
  g_assert_null (node);
  g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
  g_assert_cmpstr (error->message, ==, "spec: 2000000 bytes is more than the limit of 1048576");
  g_clear_error (&error);

  node = mv_json_parse ("[1,2,3,45]", -1, &exact, "doc", &error);
  g_assert_no_error (error);
  g_clear_pointer (&node, json_node_unref);
  node = mv_json_parse ("[1,2,3,456]", -1, &exact, "doc", &error);
  g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
  g_assert_cmpstr (error->message, ==, "doc: 11 bytes is more than the limit of 10");
}

/* Messages quote no more than a short excerpt of what they refuse, and
 * nothing that could change how the message displays. */
static void
test_excerpts (void)
{
  g_autofree char *long_key = g_strnfill (5000, 'k');
  g_autofree char *doc = g_strdup_printf ("{\"%s\":1,\"%s\":2}", long_key, long_key);
  g_autofree char *message = refused_len (doc, -1, "appears twice");
  g_autofree char *bidi = refused_len ("{\"\xe2\x80\xae" "evil\":{\"a\":\"\\u0000\"}}", -1,
                                       "is not allowed in a string");
  g_autofree char *deep_keys = NULL;
  g_autofree char *deep_message = NULL;
  GString *deep = g_string_new ("{");

  g_assert_cmpuint (strlen (message), <, 120);
  g_assert_null (strstr (bidi, "\xe2\x80\xae"));
  g_assert_nonnull (strstr (bidi, "\\u{202E}evil.a"));

  /* A path of long keys keeps its innermost part. */
  for (guint i = 0; i < 20; i++)
    g_string_append_printf (deep, "\"%s%u\":{", long_key, i);
  g_string_append (deep, "\"last\":\"\\u0000\"");
  for (guint i = 0; i < 20; i++)
    g_string_append (deep, "}");
  g_string_append (deep, "}");
  deep_keys = g_string_free (deep, FALSE);
  deep_message = refused_len (deep_keys, -1, ".last: \\u0000 (NUL)");
  g_assert_cmpuint (strlen (deep_message), <, 200);
}

/* The strict readers of a document's values, each refusal naming the
 * field. */
static void
test_readers (void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(MvJsonDoc) doc = mv_json_read ("{\"s\":\"x\",\"n\":-12,\"r\":1000.0,\"h\":0.5,"
                                           "\"b\":true,\"z\":null,\"a\":[1,2],\"o\":{},"
                                           "\"big\":1e300}", -1, &limits, "doc", &error);
  const MvJson *root;
  const char *text = NULL;
  gboolean flag = FALSE;
  gint64 value = 0;
  char *written = NULL;
  char *copy = NULL;

  g_assert_no_error (error);
  root = mv_json_doc_root (doc);
  g_assert_true (mv_json_is_object (root));
  g_assert_cmpuint (root->count, ==, 9);

  /* null stands for a member left out. */
  g_assert_null (mv_json_member (root, "z"));
  g_assert_null (mv_json_member (root, "missing"));
  g_assert_null (mv_json_required_member (root, "z", &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
  g_assert_cmpstr (error->message, ==, "z: missing");
  g_clear_error (&error);

  g_assert_true (mv_json_read_string (mv_json_member (root, "s"), "s", &text, &error));
  g_assert_cmpstr (text, ==, "x");
  g_assert_false (mv_json_read_string (mv_json_member (root, "n"), "n", &text, &error));
  g_assert_cmpstr (error->message, ==, "n: expected a string, got an integer");
  g_clear_error (&error);
  g_assert_true (mv_json_read_bool (mv_json_member (root, "b"), "b", &flag, &error));
  g_assert_true (flag);
  g_assert_false (mv_json_read_bool (mv_json_member (root, "a"), "a", &flag, &error));
  g_assert_cmpstr (error->message, ==, "a: expected a boolean, got an array");
  g_clear_error (&error);

  g_assert_true (mv_json_read_int (mv_json_member (root, "n"), "n", -12, 0, &value, &error));
  g_assert_cmpint (value, ==, -12);
  g_assert_false (mv_json_read_int (mv_json_member (root, "n"), "n", 0, 5, &value, &error));
  g_assert_cmpstr (error->message, ==, "n: -12 is below the minimum of 0");
  g_clear_error (&error);
  g_assert_false (mv_json_read_int (mv_json_member (root, "n"), "n", -20, -13, &value, &error));
  g_assert_cmpstr (error->message, ==, "n: -12 is more than the limit of -13");
  g_clear_error (&error);
  /* Records hold integers written as such; clients may write 1000.0. */
  g_assert_false (mv_json_read_int (mv_json_member (root, "r"), "r", 0, 5000, &value, &error));
  g_assert_cmpstr (error->message, ==, "r: expected an integer, got a number");
  g_clear_error (&error);
  g_assert_true (mv_json_read_integer (mv_json_member (root, "r"), "r", &value, &written, &error));
  g_assert_cmpint (value, ==, 1000);
  g_assert_null (written);
  g_assert_false (mv_json_read_integer (mv_json_member (root, "h"), "h", &value, &written,
                                        &error));
  g_assert_cmpstr (error->message, ==, "h: expected an integer, got a number");
  g_clear_error (&error);
  g_assert_true (mv_json_read_integer (mv_json_member (root, "big"), "big", &value, &written,
                                       &error));
  g_assert_cmpint (value, ==, G_MAXINT64);
  g_assert_cmpstr (written, ==, "1e+300");
  g_free (written);

  g_assert_true (mv_json_read_string_member (root, "s", FALSE, &copy, &error));
  g_assert_cmpstr (copy, ==, "x");
  g_assert_true (mv_json_read_string_member (root, "missing", FALSE, &copy, &error));
  g_assert_cmpstr (copy, ==, "x");
  g_free (copy);

  {
    static const char *const known[] = { "s", "n", "r", "h", "b", "z", "a", "o", NULL };

    g_assert_false (mv_json_reject_unknown_members (root, "top", known, &error));
    g_assert_cmpstr (error->message, ==, "top: unknown field 'big'");
    g_clear_error (&error);
  }
}

/* A document larger than its first block of values spreads over more,
 * and its strings stay whole. */
static void
test_large_document (void)
{
  g_autoptr(GString) text = g_string_new ("[");
  g_autoptr(GError) error = NULL;
  g_autoptr(MvJsonDoc) doc = NULL;
  guint n = 0;

  for (guint i = 0; i < 3000; i++)
    g_string_append_printf (text, "%s\"\\u00e9%u\"", i ? "," : "", i);
  g_string_append (text, "]");
  doc = mv_json_read (text->str, -1, &limits, "doc", &error);
  g_assert_no_error (error);
  mv_json_each (element, mv_json_doc_root (doc))
    {
      g_autofree char *expected = g_strdup_printf ("\xc3\xa9%u", n++);

      g_assert_cmpstr (element->string, ==, expected);
    }
  g_assert_cmpuint (n, ==, 3000);
  assert_same_document (text->str, -1);
}

static void
test_values (void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonNode) node = mv_json_parse ("{\"s\":\"caf\\u00e9\\ud83d\\ude00\",\"n\":-12}",
                                            -1, &limits, "doc", &error);
  JsonObject *object;

  g_assert_no_error (error);
  object = json_node_get_object (node);
  g_assert_cmpstr (json_object_get_string_member (object, "s"), ==,
                   "caf\xc3\xa9\xf0\x9f\x98\x80");
  g_assert_cmpint (json_object_get_int_member (object, "n"), ==, -12);

  /* Only @length bytes are read. */
  g_clear_pointer (&node, json_node_unref);
  node = mv_json_parse ("[1]garbage", 3, &limits, "doc", &error);
  g_assert_no_error (error);
  g_assert_cmpuint (json_array_get_length (json_node_get_array (node)), ==, 1);
  g_assert_true (mv_json_check ("[1]garbage", 3, &limits, "doc", NULL));
  g_assert_false (mv_json_check ("[1]garbage", -1, &limits, "doc", NULL));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);

  g_test_add_func ("/json-strict/accepts-json", test_accepts_json);
  g_test_add_func ("/json-strict/refuses-non-json", test_refuses_non_json);
  g_test_add_func ("/json-strict/messages", test_messages);
  g_test_add_func ("/json-strict/nul", test_nul);
  g_test_add_func ("/json-strict/surrogates", test_surrogates);
  g_test_add_func ("/json-strict/numbers", test_numbers);
  g_test_add_func ("/json-strict/duplicate-keys", test_duplicate_keys);
  g_test_add_func ("/json-strict/depth", test_depth);
  g_test_add_func ("/json-strict/deep-nesting", test_deep_nesting);
  g_test_add_func ("/json-strict/size", test_size);
  g_test_add_func ("/json-strict/excerpts", test_excerpts);
  g_test_add_func ("/json-strict/values", test_values);
  g_test_add_func ("/json-strict/readers", test_readers);
  g_test_add_func ("/json-strict/large-document", test_large_document);

  return g_test_run ();
}
