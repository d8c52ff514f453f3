#include "core/image-config.h"
#include "core/errors.h"

#include <string.h>

static void
test_full (void)
{
  const char *json =
    "{\"architecture\":\"amd64\",\"os\":\"linux\",\"created\":\"2024-01-02T03:04:05Z\","
    "\"config\":{\"Entrypoint\":[\"/bin/sh\",\"-c\"],\"Cmd\":[\"echo hi\"],"
    "\"Env\":[\"PATH=/bin\",\"A=b=c\"],\"User\":\"1000:1000\",\"WorkingDir\":\"/srv\","
    "\"Labels\":{\"x\":\"y\"},"
    "\"Healthcheck\":{\"Test\":[\"CMD-SHELL\",\"true\"],\"Interval\":30000000000,\"Retries\":3}},"
    "\"rootfs\":{\"type\":\"layers\",\"diff_ids\":[]}}";
  g_autoptr (GError) error = NULL;
  g_autoptr (MvImageConfig) c = mv_image_config_parse (json, -1, &error);

  g_assert_no_error (error);
  g_assert_cmpstr (c->architecture, ==, "amd64");
  g_assert_cmpstr (c->os, ==, "linux");
  g_assert_cmpstr (c->created, ==, "2024-01-02T03:04:05Z");
  g_assert_cmpuint (g_strv_length (c->entrypoint), ==, 2);
  g_assert_cmpstr (c->entrypoint[1], ==, "-c");
  g_assert_cmpstr (c->cmd[0], ==, "echo hi");
  g_assert_cmpstr (c->env[1], ==, "A=b=c");
  g_assert_cmpstr (c->user, ==, "1000:1000");
  g_assert_cmpstr (c->working_dir, ==, "/srv");
  g_assert_nonnull (c->healthcheck);
  g_assert_cmpstr (c->healthcheck->test[0], ==, "CMD-SHELL");
  g_assert_cmpint (c->healthcheck->interval_ns, ==, G_GINT64_CONSTANT (30000000000));
  g_assert_cmpint (c->healthcheck->retries, ==, 3);
  g_assert_cmpint (c->healthcheck->timeout_ns, ==, 0);

  /* A copy holds the same and shares nothing. */
  {
    g_autoptr (MvImageConfig) copy = mv_image_config_copy (c);
    g_autoptr (JsonNode) a = mv_image_config_to_node (c);
    g_autoptr (JsonNode) b = mv_image_config_to_node (copy);

    g_assert_true (json_node_equal (a, b));
    g_assert_true (copy->entrypoint != c->entrypoint && copy->healthcheck != c->healthcheck &&
                   copy->healthcheck->test != c->healthcheck->test);
    g_assert_null (mv_image_config_copy (NULL));
  }
}

static void
test_minimal (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MvImageConfig) a = mv_image_config_parse ("{}", -1, &error);
  g_autoptr (MvImageConfig) b = mv_image_config_parse ("{\"config\":{\"Cmd\":null,\"Entrypoint\":[]}}", -1, &error);

  g_assert_no_error (error);
  g_assert_null (a->entrypoint);
  g_assert_null (a->cmd);
  g_assert_null (a->healthcheck);
  g_assert_null (b->cmd);
  g_assert_nonnull (b->entrypoint);
  g_assert_cmpuint (g_strv_length (b->entrypoint), ==, 0);
}

static void
test_bad (void)
{
  const char *bad[] = {
    "", "[]", "{", "{\"config\":[]}", "{\"config\":{\"Cmd\":\"sh\"}}", "{\"config\":{\"Cmd\":[1]}}",
    "{\"config\":{\"Env\":[\"NOEQUALS\"]}}", "{\"config\":{\"Env\":[\"=x\"]}}", "{\"config\":{\"User\":5}}",
    "{\"config\":{\"Healthcheck\":{\"Interval\":\"5s\"}}}", "{\"config\":{\"Healthcheck\":{\"Retries\":-1}}}",
    "{\"architecture\":7}",
    /* Read strictly: no comments, no key twice. */
    "{/* x */}", "{\"os\":\"linux\",\"os\":\"other\"}",
  };

  for (gsize i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      g_autoptr (GError) error = NULL;
      g_autoptr (MvImageConfig) c = mv_image_config_parse (bad[i], -1, &error);

      if (c != NULL)
        g_error ("\"%s\" was accepted", bad[i]);
      g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
    }

  /* Nested past its limit, in a field it does not read. */
  {
    g_autoptr (GString) deep = g_string_new ("{\"history\":");
    g_autoptr (GError) error = NULL;
    g_autoptr (MvImageConfig) c = NULL;

    for (guint i = 0; i < MV_IMAGE_CONFIG_MAX_DEPTH; i++)
      g_string_append_c (deep, '[');
    for (guint i = 0; i < MV_IMAGE_CONFIG_MAX_DEPTH; i++)
      g_string_append_c (deep, ']');
    g_string_append_c (deep, '}');
    c = mv_image_config_parse (deep->str, -1, &error);
    g_assert_null (c);
    g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
    g_assert_nonnull (strstr (error->message, "nesting depth"));
  }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/image-config/full", test_full);
  g_test_add_func ("/image-config/minimal", test_minimal);
  g_test_add_func ("/image-config/bad", test_bad);
  return g_test_run ();
}
