/* The --set FIELD=JSON options of the fork commands. */
#include "spec-override.h"

#include <string.h>

/* The spec built from NAME and the options given, NULL-terminated. */
static char *
build (GError **error, const char *name, ...)
{
  g_autoptr(GPtrArray) overrides = g_ptr_array_new ();
  const char *arg;
  va_list ap;

  va_start (ap, name);
  while ((arg = va_arg (ap, const char *)) != NULL)
    g_ptr_array_add (overrides, (gpointer) arg);
  va_end (ap);
  return mv_spec_overrides_build (name, overrides, error);
}

static void
assert_refused (const char *arg, const char *expected)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *json = build (&error, "copy", arg, NULL);

  g_assert_null (json);
  g_assert_nonnull (error);
  g_test_message ("%s: %s", arg, error->message);
  g_assert_nonnull (strstr (error->message, expected));
}

static void
test_builds (void)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *plain = build (&error, "copy", NULL);
  g_autofree char *json = NULL;

  g_assert_no_error (error);
  g_assert_cmpstr (plain, ==, "{\"name\":\"copy\"}");

  json = build (&error, "copy", "memory_bytes=536870912", "labels={\"a\": \"b\"}",
                "hostname=\"copy-1\"", "remove_on_exit=true", "kernel_args=\"a=b c\"", NULL);
  g_assert_no_error (error);
  g_assert_cmpstr (json, ==, "{\"name\":\"copy\",\"memory_bytes\":536870912,"
                             "\"labels\":{\"a\":\"b\"},\"hostname\":\"copy-1\","
                             "\"remove_on_exit\":true,\"kernel_args\":\"a=b c\"}");
}

static void
test_refuses_malformed (void)
{
  assert_refused ("memory_bytes", "expected FIELD=JSON");
  assert_refused ("=1", "is not the name of a spec field");
  assert_refused ("Memory=1", "'Memory' is not the name of a spec field");
  assert_refused ("labels.a=1", "is not the name of a spec field");
  assert_refused ("memory_bytes=", "the value is not JSON");
  assert_refused ("labels={\"a\":", "the value is not JSON");
  assert_refused ("memory_bytes=1 2", "the value is not JSON");
  /* A bare word is not a string, and the message says how to write one. */
  assert_refused ("hostname=web", "a string is quoted: --set 'hostname=\"web\"'");
  assert_refused ("name=\"other\"", "the new machine's name is the NEW-NAME argument");
  assert_refused ("hostname=\"\xff\"", "not UTF-8");
}

static void
test_bounds (void)
{
  g_autoptr(GPtrArray) many = g_ptr_array_new_with_free_func (g_free);
  g_autoptr(GError) error = NULL;
  g_autofree char *json = NULL, *deep = NULL, *in_string = NULL, *big = NULL;
  g_autoptr(GString) nested = g_string_new ("labels=");

  /* A field given twice. */
  json = build (&error, "copy", "memory_bytes=1", "memory_bytes=2", NULL);
  g_assert_null (json);
  g_assert_nonnull (strstr (error->message, "--set memory_bytes is given twice"));
  g_clear_error (&error);

  /* Too many options, even of distinct fields. */
  for (guint i = 0; i <= MV_SPEC_OVERRIDES_MAX; i++)
    g_ptr_array_add (many, g_strdup_printf ("f%u=1", i));
  json = mv_spec_overrides_build ("copy", many, &error);
  g_assert_null (json);
  g_assert_nonnull (strstr (error->message, "at most 64"));
  g_clear_error (&error);
  g_ptr_array_set_size (many, MV_SPEC_OVERRIDES_MAX);
  json = mv_spec_overrides_build ("copy", many, &error);
  g_assert_no_error (error);
  g_assert_nonnull (json);
  g_clear_pointer (&json, g_free);

  /* Nesting, counted before parsing; brackets in strings do not count. */
  for (guint i = 0; i <= MV_SPEC_OVERRIDE_MAX_DEPTH; i++)
    g_string_append_c (nested, '[');
  for (guint i = 0; i <= MV_SPEC_OVERRIDE_MAX_DEPTH; i++)
    g_string_append_c (nested, ']');
  deep = g_strdup (nested->str);
  json = build (&error, "copy", deep, NULL);
  g_assert_null (json);
  g_assert_nonnull (strstr (error->message, "nests more than 32 levels"));
  g_clear_error (&error);
  in_string = g_strdup_printf ("kernel_args=\"%s\\\"\"", nested->str + strlen ("labels="));
  json = build (&error, "copy", in_string, NULL);
  g_assert_no_error (error);
  g_assert_nonnull (json);
  g_clear_pointer (&json, g_free);

  /* The whole document is bounded as the daemon bounds it. */
  big = g_strdup_printf ("user_data=\"%*s\"", MV_SPEC_OVERRIDES_MAX_BYTES, "");
  json = build (&error, "copy", big, NULL);
  g_assert_null (json);
  g_assert_nonnull (strstr (error->message, "more than the limit of 2097152"));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/spec-override/builds", test_builds);
  g_test_add_func ("/spec-override/refuses-malformed", test_refuses_malformed);
  g_test_add_func ("/spec-override/bounds", test_bounds);
  return g_test_run ();
}
