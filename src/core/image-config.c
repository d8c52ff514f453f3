#include "image-config.h"
#include "core/errors.h"
#include "core/json-strict.h"

#include <json-glib/json-glib.h>
#include <string.h>

void
mv_image_config_free (MvImageConfig *config)
{
  if (config == NULL)
    return;
  g_free (config->architecture);
  g_free (config->os);
  g_free (config->created);
  g_strfreev (config->entrypoint);
  g_strfreev (config->cmd);
  g_strfreev (config->env);
  g_free (config->user);
  g_free (config->working_dir);
  if (config->healthcheck != NULL)
    g_strfreev (config->healthcheck->test);
  g_free (config->healthcheck);
  g_free (config);
}

static gboolean
bad (GError **error, const char *field, const char *why)
{
  return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT, "image config: %s %s", field, why);
}

/* A string member, or NULL when absent or null. */
static gboolean
get_string (const MvJson *obj, const char *name, const char *field, char **out, GError **error)
{
  const MvJson *node = mv_json_member (obj, name);

  if (node == NULL)
    return TRUE;
  if (node->kind != MV_JSON_STRING)
    return bad (error, field, "is not a string");
  *out = g_strdup (node->string);
  return TRUE;
}

static gboolean
get_strv (const MvJson *obj, const char *name, const char *field, char ***out, GError **error)
{
  const MvJson *node = mv_json_member (obj, name);
  g_autoptr (GStrvBuilder) builder = NULL;

  if (node == NULL)
    return TRUE;
  if (!mv_json_is_array (node))
    return bad (error, field, "is not an array of strings");
  if (node->count > MV_IMAGE_CONFIG_LIST_MAX)
    return bad (error, field, "has more than " G_STRINGIFY (MV_IMAGE_CONFIG_LIST_MAX) " entries");
  builder = g_strv_builder_new ();
  mv_json_each (element, node)
    {
      if (element->kind != MV_JSON_STRING)
        return bad (error, field, "holds something other than a string");
      g_strv_builder_add (builder, element->string);
    }
  *out = g_strv_builder_end (builder);
  return TRUE;
}

static gboolean
get_int (const MvJson *obj, const char *name, const char *field, gint64 *out, GError **error)
{
  const MvJson *node = mv_json_member (obj, name);

  if (node == NULL)
    return TRUE;
  if (node->kind != MV_JSON_INTEGER)
    return bad (error, field, "is not an integer");
  *out = node->integer;
  if (*out < 0)
    return bad (error, field, "is negative");
  return TRUE;
}

static gboolean
parse_healthcheck (const MvJson *obj, MvImageConfig *config, GError **error)
{
  const MvJson *h = mv_json_member (obj, "Healthcheck");
  g_autofree MvImageHealthcheck *hc = NULL;

  if (h == NULL)
    return TRUE;
  if (!mv_json_is_object (h))
    return bad (error, "config.Healthcheck", "is not an object");
  hc = g_new0 (MvImageHealthcheck, 1);
  if (!get_strv (h, "Test", "config.Healthcheck.Test", &hc->test, error))
    return FALSE;
  if (!get_int (h, "Interval", "config.Healthcheck.Interval", &hc->interval_ns, error) ||
      !get_int (h, "Timeout", "config.Healthcheck.Timeout", &hc->timeout_ns, error) ||
      !get_int (h, "StartPeriod", "config.Healthcheck.StartPeriod", &hc->start_period_ns, error) ||
      !get_int (h, "Retries", "config.Healthcheck.Retries", &hc->retries, error))
    {
      g_strfreev (hc->test);
      return FALSE;
    }
  config->healthcheck = g_steal_pointer (&hc);
  return TRUE;
}

MvImageConfig *
mv_image_config_from_node (const MvJson *root, GError **error)
{
  g_autoptr (MvImageConfig) config = g_new0 (MvImageConfig, 1);
  const MvJson *obj;

  if (!mv_json_is_object (root))
    return bad (error, "JSON", "is not an object"), NULL;
  if (!get_string (root, "architecture", "architecture", &config->architecture, error) ||
      !get_string (root, "os", "os", &config->os, error) ||
      !get_string (root, "created", "created", &config->created, error))
    return NULL;

  obj = mv_json_member (root, "config");
  if (obj == NULL)
    return g_steal_pointer (&config);
  if (!mv_json_is_object (obj))
    return bad (error, "config", "is not an object"), NULL;
  if (!get_strv (obj, "Entrypoint", "config.Entrypoint", &config->entrypoint, error) ||
      !get_strv (obj, "Cmd", "config.Cmd", &config->cmd, error) ||
      !get_strv (obj, "Env", "config.Env", &config->env, error) ||
      !get_string (obj, "User", "config.User", &config->user, error) ||
      !get_string (obj, "WorkingDir", "config.WorkingDir", &config->working_dir, error) ||
      !parse_healthcheck (obj, config, error))
    return NULL;
  for (char **e = config->env; e && *e; e++)
    if (strchr (*e, '=') == NULL || **e == '=')
      return bad (error, "config.Env", "holds an entry that is not NAME=value"), NULL;
  return g_steal_pointer (&config);
}

MvImageConfig *
mv_image_config_parse (const char *json, gssize length, GError **error)
{
  static const MvJsonLimits limits = {
    .max_bytes = MV_IMAGE_CONFIG_MAX,
    .max_depth = MV_IMAGE_CONFIG_MAX_DEPTH,
  };
  g_autoptr (MvJsonDoc) doc = mv_json_read (json, length, &limits, "image config", error);

  return doc != NULL ? mv_image_config_from_node (mv_json_doc_root (doc), error) : NULL;
}

static void
set_strv (JsonObject *obj, const char *name, char **strv)
{
  g_autoptr (JsonArray) array = NULL;

  if (strv == NULL)
    return;
  array = json_array_new ();
  for (char **s = strv; *s; s++)
    json_array_add_string_element (array, *s);
  json_object_set_array_member (obj, name, g_steal_pointer (&array));
}

static void
set_string (JsonObject *obj, const char *name, const char *value)
{
  if (value != NULL)
    json_object_set_string_member (obj, name, value);
}

JsonNode *
mv_image_config_to_node (const MvImageConfig *config)
{
  g_autoptr (JsonObject) obj = json_object_new ();
  g_autoptr (JsonObject) inner = json_object_new ();

  set_string (obj, "architecture", config->architecture);
  set_string (obj, "os", config->os);
  set_string (obj, "created", config->created);
  set_strv (inner, "Entrypoint", config->entrypoint);
  set_strv (inner, "Cmd", config->cmd);
  set_strv (inner, "Env", config->env);
  set_string (inner, "User", config->user);
  set_string (inner, "WorkingDir", config->working_dir);
  if (config->healthcheck != NULL)
    {
      const MvImageHealthcheck *hc = config->healthcheck;
      g_autoptr (JsonObject) h = json_object_new ();

      set_strv (h, "Test", hc->test);
      json_object_set_int_member (h, "Interval", hc->interval_ns);
      json_object_set_int_member (h, "Timeout", hc->timeout_ns);
      json_object_set_int_member (h, "StartPeriod", hc->start_period_ns);
      json_object_set_int_member (h, "Retries", hc->retries);
      json_object_set_object_member (inner, "Healthcheck", g_steal_pointer (&h));
    }
  json_object_set_object_member (obj, "config", g_steal_pointer (&inner));
  return json_node_init_object (json_node_alloc (), obj);
}

MvImageConfig *
mv_image_config_copy (const MvImageConfig *config)
{
  MvImageConfig *copy;

  if (config == NULL)
    return NULL;
  copy = g_new0 (MvImageConfig, 1);
  copy->architecture = g_strdup (config->architecture);
  copy->os = g_strdup (config->os);
  copy->created = g_strdup (config->created);
  copy->entrypoint = g_strdupv (config->entrypoint);
  copy->cmd = g_strdupv (config->cmd);
  copy->env = g_strdupv (config->env);
  copy->user = g_strdup (config->user);
  copy->working_dir = g_strdup (config->working_dir);
  if (config->healthcheck != NULL)
    {
      copy->healthcheck = g_memdup2 (config->healthcheck, sizeof *config->healthcheck);
      copy->healthcheck->test = g_strdupv (config->healthcheck->test);
    }
  return copy;
}
