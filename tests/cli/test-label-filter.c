/* list --label KEY=VALUE and --label KEY. */
#include "label-filter.h"

static JsonObject *
labels_of (const char *json)
{
  g_autoptr(JsonParser) parser = json_parser_new ();

  g_assert_true (json_parser_load_from_data (parser, json, -1, NULL));
  return json_object_ref (json_node_get_object (json_parser_get_root (parser)));
}

static gboolean
picks (const char *labels_json, ...)
{
  g_autoptr(JsonObject) labels = labels_json ? labels_of (labels_json) : NULL;
  g_autoptr(GPtrArray) selectors = g_ptr_array_new ();
  const char *selector;
  va_list ap;

  va_start (ap, labels_json);
  while ((selector = va_arg (ap, const char *)))
    g_ptr_array_add (selectors, (gpointer) selector);
  va_end (ap);
  return mv_labels_match (labels, selectors);
}

static void
test_match (void)
{
  const char *web = "{\"tier\":\"front\",\"team\":\"a=b\",\"empty\":\"\"}";

  g_assert_true (picks (web, NULL));
  g_assert_true (picks (web, "tier=front", NULL));
  g_assert_false (picks (web, "tier=back", NULL));
  g_assert_false (picks (web, "tier=fron", NULL));
  /* A key alone: any value. */
  g_assert_true (picks (web, "tier", NULL));
  g_assert_false (picks (web, "zone", NULL));
  /* Every selector must match. */
  g_assert_true (picks (web, "tier=front", "team", NULL));
  g_assert_false (picks (web, "tier=front", "zone", NULL));
  /* The first '=' splits; an empty value is a value. */
  g_assert_true (picks (web, "team=a=b", NULL));
  g_assert_true (picks (web, "empty=", NULL));
  g_assert_false (picks (web, "tier=", NULL));
  /* A machine without labels matches only no selector. */
  g_assert_true (picks (NULL, NULL));
  g_assert_false (picks (NULL, "tier", NULL));
  g_assert_false (picks ("{}", "tier", NULL));
}

static void
test_valid (void)
{
  g_assert_true (mv_label_selector_valid ("tier=front"));
  g_assert_true (mv_label_selector_valid ("tier"));
  g_assert_true (mv_label_selector_valid ("tier="));
  g_assert_false (mv_label_selector_valid (""));
  g_assert_false (mv_label_selector_valid ("=front"));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/label-filter/match", test_match);
  g_test_add_func ("/label-filter/valid", test_valid);
  return g_test_run ();
}
