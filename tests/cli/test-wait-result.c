/* The result of Machine.Wait: text, JSON and the exit status. */
#include "wait-result.h"

#include "microvmctl.h"
#include "properties.h"

static void
add_entry (GPtrArray *result, const char *name, const char *signature, JsonNode *value)
{
  MvProperty *entry = g_new0 (MvProperty, 1);

  entry->name = g_strdup (name);
  entry->signature = g_strdup (signature);
  entry->value = value;
  g_ptr_array_add (result, entry);
}

static void
add_int (GPtrArray *result, const char *name, gint64 value)
{
  add_entry (result, name, "i", json_node_init_int (json_node_alloc (), value));
}

static void
add_string (GPtrArray *result, const char *name, const char *value)
{
  mv_properties_add_string (result, name, value);
}

static void
assert_text (GPtrArray *result, const char *expected)
{
  g_autofree char *text = mv_wait_result_format_text (result);
  g_assert_cmpstr (text, ==, expected);
}

static void
test_text (void)
{
  g_autoptr(GPtrArray) result = mv_properties_new ();

  assert_text (result, "");

  add_string (result, "state", "Stopped");
  assert_text (result, "state=Stopped");

  add_int (result, "exit_code", 3);
  assert_text (result, "state=Stopped exit_code=3");

  /* The daemon's order, not sorted. */
  g_ptr_array_set_size (result, 0);
  add_int (result, "exit_code", 0);
  add_string (result, "state", "Restarting");
  assert_text (result, "exit_code=0 state=Restarting");
}

static void
test_text_quoting (void)
{
  g_autoptr(GPtrArray) result = mv_properties_new ();

  add_string (result, "state", "Failed");
  add_string (result, "error", "the VMM exited: code 1");
  add_string (result, "health", "");
  add_string (result, "path", "/var/lib/x_y-z.img:a@b+c,d");
  add_string (result, "quote", "it's");
  add_entry (result, "ok", "b", json_node_init_boolean (json_node_alloc (), TRUE));
  assert_text (result,
               "state=Failed error='the VMM exited: code 1' health='' "
               "path=/var/lib/x_y-z.img:a@b+c,d quote='it'\\''s' ok=yes");
}

static void
test_json (void)
{
  g_autoptr(GPtrArray) result = mv_properties_new ();
  g_autoptr(JsonNode) root = NULL;
  g_autoptr(JsonGenerator) generator = json_generator_new ();
  g_autofree char *text = NULL;

  add_string (result, "state", "Stopped");
  add_int (result, "exit_code", 3);
  add_string (result, "error", "it's \"bad\"");

  root = mv_wait_result_to_json (result);
  json_generator_set_root (generator, root);
  text = json_generator_to_data (generator, NULL);
  g_assert_cmpstr (text, ==, "{\"state\":\"Stopped\",\"exit_code\":3,\"error\":\"it's \\\"bad\\\"\"}");
}

static int
exit_status (const char *condition, const char *first_name, ...)
{
  g_autoptr(GPtrArray) result = mv_properties_new ();
  va_list ap;

  va_start (ap, first_name);
  for (const char *name = first_name; name != NULL; name = va_arg (ap, const char *))
    {
      if (g_str_equal (name, "exit_code"))
        add_int (result, name, va_arg (ap, int));
      else
        add_string (result, name, va_arg (ap, const char *));
    }
  va_end (ap);
  return mv_wait_result_exit_status (condition, result);
}

static void
test_exit_status_stopped (void)
{
  g_assert_cmpint (exit_status ("stopped", "state", "Stopped", NULL), ==, 0);
  g_assert_cmpint (exit_status ("stopped", "state", "Failed", NULL), ==, 1);
  g_assert_cmpint (exit_status ("stopped", "state", "Failed", "error", "boom", NULL), ==, 1);
  g_assert_cmpint (exit_status ("stopped", "state", "Restarting", "error", "boom", NULL), ==, 1);
  g_assert_cmpint (exit_status ("stopped", "state", "Restarting", "error", "", NULL), ==, 0);
  g_assert_cmpint (exit_status ("stopped", "state", "Restarting", NULL), ==, 0);

  /* The guest's own exit code wins, whatever the state. */
  g_assert_cmpint (exit_status ("stopped", "state", "Stopped", "exit_code", 3, NULL), ==, 3);
  g_assert_cmpint (exit_status ("stopped", "state", "Failed", "exit_code", 0, NULL), ==, 0);
  g_assert_cmpint (exit_status ("stopped", "state", "Stopped", "exit_code", 255, NULL), ==, 255);
  g_assert_cmpint (exit_status ("stopped", "state", "Failed", "exit_code", 42,
                                "error", "x", NULL), ==, 42);

  /* One that is no exit status is not passed on. */
  g_assert_cmpint (exit_status ("stopped", "state", "Stopped", "exit_code", -1, NULL), ==, 0);
  g_assert_cmpint (exit_status ("stopped", "state", "Failed", "exit_code", 256, NULL), ==, 1);
}

static void
test_exit_status_healthy (void)
{
  g_assert_cmpint (exit_status ("healthy", "state", "Running", "health", "healthy", NULL), ==, 0);
  g_assert_cmpint (exit_status ("healthy", "state", "Running", "health", "unhealthy", NULL), ==, 1);
  g_assert_cmpint (exit_status ("healthy", "state", "Running", NULL), ==, 1);
  /* An exit code does not count for health. */
  g_assert_cmpint (exit_status ("healthy", "health", "starting", "exit_code", 0, NULL), ==, 1);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/wait-result/text", test_text);
  g_test_add_func ("/wait-result/text-quoting", test_text_quoting);
  g_test_add_func ("/wait-result/json", test_json);
  g_test_add_func ("/wait-result/exit-status/stopped", test_exit_status_stopped);
  g_test_add_func ("/wait-result/exit-status/healthy", test_exit_status_healthy);
  return g_test_run ();
}
