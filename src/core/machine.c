#include "machine.h"
#include "json-util.h"
#include "text.h"

#include <string.h>

#include "errors.h"

/* ---- IDs ---- */

char *
mv_id_new (void)
{
  g_autofree char *uuid = g_uuid_string_random ();
  GString *id = g_string_sized_new (32);

  for (const char *p = uuid; *p != '\0'; p++)
    if (*p != '-')
      g_string_append_c (id, g_ascii_tolower (*p));
  return g_string_free (id, FALSE);
}

gboolean
mv_id_validate (const char *id, GError **error)
{
  gsize len;

  if (id == NULL || *id == '\0')
    {
      g_set_error_literal (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT, "id: empty");
      return FALSE;
    }
  len = strlen (id);
  if (len > MV_ID_MAX_BYTES)
    {
      g_set_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT,
                   "id: longer than %d bytes", MV_ID_MAX_BYTES);
      return FALSE;
    }
  /* IDs name directories, units and D-Bus paths: keep them to a set that
   * is safe in all of those. */
  if (!g_ascii_islower (id[0]) && !g_ascii_isdigit (id[0]))
    {
      g_set_error_literal (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT,
                           "id: must start with a lowercase letter or a digit");
      return FALSE;
    }
  for (const char *p = id; *p != '\0'; p++)
    if (!g_ascii_islower (*p) && !g_ascii_isdigit (*p) && *p != '_' && *p != '-')
      {
        g_set_error_literal (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT,
                             "id: may hold only a-z, 0-9, '_' and '-'");
        return FALSE;
      }
  return TRUE;
}

/* ---- life cycle ---- */

MvConfig *
mv_config_new (const char *id, MvSpec *spec, gint64 now)
{
  g_return_val_if_fail (spec != NULL, NULL);
  return mv_config_new_fingerprinted (id, spec, mv_spec_fingerprint (spec), now);
}

MvConfig *
mv_config_new_fingerprinted (const char *id, MvSpec *spec, char *fingerprint, gint64 now)
{
  MvConfig *config;

  g_return_val_if_fail (id != NULL, NULL);
  g_return_val_if_fail (spec != NULL, NULL);
  g_return_val_if_fail (fingerprint != NULL, NULL);
  g_warn_if_fail (spec->id == NULL || strcmp (spec->id, id) == 0);

  /* The spec carries its machine's ID, so a spec read back from the bus
   * or config.json is complete on its own. */
  g_free (spec->id);
  spec->id = g_strdup (id);

  config = g_new0 (MvConfig, 1);
  config->id = g_strdup (id);
  config->spec = spec;
  config->desired = MV_DESIRED_STOPPED;
  config->desired_generation = 1;
  config->specification_generation = 1;
  config->restart_generation = 0;
  config->fingerprint = fingerprint;
  config->created_at = now;
  config->updated_at = now;
  return config;
}

void
mv_config_free (MvConfig *config)
{
  if (config == NULL)
    return;
  g_free (config->id);
  mv_spec_free (config->spec);
  g_free (config->fingerprint);
  mv_image_config_free (config->image_config);
  g_free (config);
}

MvConfig *
mv_config_copy (const MvConfig *config)
{
  MvConfig *copy;

  g_return_val_if_fail (config != NULL, NULL);

  copy = g_memdup2 (config, sizeof *config);
  copy->id = g_strdup (config->id);
  copy->spec = mv_spec_copy (config->spec);
  copy->fingerprint = g_strdup (config->fingerprint);
  copy->image_config = mv_image_config_copy (config->image_config);
  return copy;
}

MvStatus *
mv_status_new (void)
{
  MvStatus *status = g_new0 (MvStatus, 1);

  status->state = MV_STATE_STOPPED;
  status->destroyed = g_ptr_array_new_with_free_func (g_free);
  return status;
}

void
mv_status_free (MvStatus *status)
{
  if (status == NULL)
    return;
  g_free (status->state_error);
  g_free (status->phase);
  g_free (status->operation_id);
  g_clear_pointer (&status->vmm, json_object_unref);
  g_free (status->saved_state);
  g_free (status->restoring_snapshot);
  g_free (status->started_from);
  g_free (status->warm_template);
  g_ptr_array_unref (status->destroyed);
  g_free (status);
}

MvStatus *
mv_status_copy (const MvStatus *status)
{
  MvStatus *copy;

  g_return_val_if_fail (status != NULL, NULL);

  copy = g_memdup2 (status, sizeof *status);
  copy->state_error = g_strdup (status->state_error);
  copy->phase = g_strdup (status->phase);
  copy->operation_id = g_strdup (status->operation_id);
  copy->vmm = status->vmm != NULL ? mv_json_object_deep_copy (status->vmm) : NULL;
  copy->saved_state = g_strdup (status->saved_state);
  copy->restoring_snapshot = g_strdup (status->restoring_snapshot);
  copy->started_from = g_strdup (status->started_from);
  copy->warm_template = g_strdup (status->warm_template);
  copy->forking = status->forking;
  copy->destroyed = g_ptr_array_new_with_free_func (g_free);
  for (guint i = 0; i < status->destroyed->len; i++)
    g_ptr_array_add (copy->destroyed, g_strdup (status->destroyed->pdata[i]));
  return copy;
}

/* ---- generations ---- */

gboolean
mv_config_set_standby (MvConfig *config, gboolean standby, gint64 now)
{
  if (config->standby == !!standby)
    return FALSE;
  config->standby = !!standby;
  config->desired_generation++;
  config->updated_at = now;
  return TRUE;
}

gboolean
mv_machine_desired_reached (const MvConfig *config, const MvStatus *status)
{
  switch (config->desired)
    {
    case MV_DESIRED_RUNNING:
    case MV_DESIRED_PAUSED:
      if (config->standby)
        return status->state == MV_STATE_STANDBY;
      return mv_desired_reached (config->desired, status->state);
    case MV_DESIRED_STOPPED:
      return status->state == MV_STATE_STOPPED && status->saved_state == NULL;
    case MV_DESIRED_DESTROYED:
    case MV_DESIRED_COUNT:
      break;
    }
  return FALSE;
}

gboolean
mv_config_set_desired (MvConfig *config, MvDesired desired, gint64 now)
{
  g_return_val_if_fail (config != NULL, FALSE);
  g_return_val_if_fail (desired < MV_DESIRED_COUNT, FALSE);

  if (config->desired == desired)
    return FALSE;
  config->desired = desired;
  config->desired_generation++;
  config->updated_at = now;
  return TRUE;
}

void
mv_config_request_restart (MvConfig *config, gint64 now)
{
  g_return_if_fail (config != NULL);

  config->restart_generation++;
  config->desired_generation++;
  config->updated_at = now;
}

void
mv_config_retry (MvConfig *config, gint64 now)
{
  g_return_if_fail (config != NULL);

  config->desired_generation++;
  config->updated_at = now;
}

gboolean
mv_config_update_spec (MvConfig *config, MvSpec *spec, gint64 now)
{
  g_autoptr(MvSpec) owned = spec;

  g_return_val_if_fail (config != NULL, FALSE);
  g_return_val_if_fail (spec != NULL, FALSE);

  /* The ID is fixed for the machine's life. The name may change (that
   * is a rename, which callers check); a spec without one keeps it. */
  g_free (owned->id);
  owned->id = g_strdup (config->id);
  if (owned->name == NULL)
    owned->name = g_strdup (config->spec->name);

  if (mv_spec_equal (config->spec, owned))
    return FALSE;

  if (mv_spec_differs_beyond_standby (config->spec, owned))
    config->specification_generation++;
  config->desired_generation++;
  mv_spec_free (config->spec);
  config->spec = g_steal_pointer (&owned);
  config->updated_at = now;
  return TRUE;
}

/* ---- record fields ---- */

/* A generation counts from @min on. */
static gboolean
read_optional_generation (const MvJson *object, const char *name, gint64 min, guint64 *out,
                          GError **error)
{
  const MvJson *node = mv_json_member (object, name);
  gint64 value;

  if (node == NULL)
    return TRUE;
  if (!mv_json_read_int (node, name, min, G_MAXINT64, &value, error))
    return FALSE;
  *out = (guint64) value;
  return TRUE;
}

static gboolean
read_generation (const MvJson *object, const char *name, gint64 min, guint64 *out, GError **error)
{
  return mv_json_required_member (object, name, error) != NULL &&
         read_optional_generation (object, name, min, out, error);
}

static gboolean
check_format (const MvJson *object, gint64 current, GError **error)
{
  const MvJson *node = mv_json_required_member (object, "format", error);
  gint64 format;

  if (node == NULL || !mv_json_read_int (node, "format", G_MININT64, G_MAXINT64, &format, error))
    return FALSE;
  if (format != current)
    {
      g_set_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT,
                   "format: %" G_GINT64_FORMAT " is not the current format %" G_GINT64_FORMAT,
                   format, current);
      return FALSE;
    }
  return TRUE;
}

/* Timestamps are ISO 8601 in UTC with microseconds:
 * 2026-11-29T10:00:00.123456Z. GDateTime covers years 1 to 9999. */
#define UNIX_SECONDS_MIN  G_GINT64_CONSTANT (-62135596800)
#define UNIX_SECONDS_MAX  G_GINT64_CONSTANT (253402300799)

static char *
timestamp_to_string (gint64 usec)
{
  gint64 seconds = usec / G_USEC_PER_SEC;
  gint64 micro = usec % G_USEC_PER_SEC;
  g_autoptr(GDateTime) dt = NULL;
  g_autofree char *base = NULL;

  if (micro < 0)
    {
      micro += G_USEC_PER_SEC;
      seconds--;
    }
  seconds = CLAMP (seconds, UNIX_SECONDS_MIN, UNIX_SECONDS_MAX);
  dt = g_date_time_new_from_unix_utc (seconds);
  base = g_date_time_format (dt, "%C%y-%m-%dT%H:%M:%S");   /* %Y has no padding */
  return g_strdup_printf ("%s.%06dZ", base, (int) micro);
}

static gboolean
read_timestamp (const MvJson *node, const char *field, gint64 *out, GError **error)
{
  const char *text = NULL;
  g_autoptr(GDateTime) dt = NULL;

  if (!mv_json_read_string (node, field, &text, error))
    return FALSE;
  dt = g_date_time_new_from_iso8601 (text, NULL);
  if (dt == NULL)
    {
      g_autofree char *shown = mv_text_excerpt (text, -1, MV_EXCERPT_MAX_BYTES);

      g_set_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT,
                   "%s: '%s' is not an ISO 8601 time with a time zone", field, shown);
      return FALSE;
    }
  *out = g_date_time_to_unix (dt) * G_USEC_PER_SEC + g_date_time_get_microsecond (dt);
  return TRUE;
}

static void
set_timestamp (JsonObject *object, const char *name, gint64 usec)
{
  g_autofree char *text = timestamp_to_string (usec);

  json_object_set_string_member (object, name, text);
}

static gboolean
valid_fingerprint (const char *text)
{
  gsize len = 0;

  for (const char *p = text; *p != '\0'; p++, len++)
    if (!g_ascii_isdigit (*p) && !(*p >= 'a' && *p <= 'f'))
      return FALSE;
  return len == 64;
}

/* ---- config.json ---- */

JsonNode *
mv_config_to_node (const MvConfig *config)
{
  g_autoptr(JsonObject) object = json_object_new ();

  g_return_val_if_fail (config != NULL, NULL);

  json_object_set_int_member (object, "format", MV_CONFIG_FORMAT);
  json_object_set_string_member (object, "id", config->id);
  json_object_set_string_member (object, "desired_state", mv_desired_to_string (config->desired));
  json_object_set_int_member (object, "desired_generation", (gint64) config->desired_generation);
  json_object_set_int_member (object, "specification_generation",
                              (gint64) config->specification_generation);
  json_object_set_int_member (object, "restart_generation", (gint64) config->restart_generation);
  if (config->fingerprint != NULL)
    json_object_set_string_member (object, "fingerprint", config->fingerprint);
  set_timestamp (object, "created_at", config->created_at);
  set_timestamp (object, "updated_at", config->updated_at);
  json_object_set_boolean_member (object, "stopped_by_user", config->stopped_by_user);
  if (config->standby)
    json_object_set_boolean_member (object, "standby", TRUE);
  json_object_set_member (object, "spec", mv_spec_to_node (config->spec, TRUE));
  if (config->image_config != NULL)
    json_object_set_member (object, "image_config", mv_image_config_to_node (config->image_config));
  return json_node_init_object (json_node_alloc (), object);
}

MvConfig *
mv_config_from_node (const MvJson *node, GError **error)
{
  static const char *const known[] = {
    "format", "id", "desired_state", "desired_generation",
    "specification_generation", "restart_generation", "fingerprint",
    "created_at", "updated_at", "stopped_by_user", "standby", "spec", "image_config", NULL
  };
  g_autoptr(MvConfig) config = g_new0 (MvConfig, 1);
  g_autoptr(GError) local_error = NULL;
  const char *text = NULL;
  const MvJson *field;

  g_return_val_if_fail (node != NULL, NULL);

  if (!mv_json_is_object (node))
    {
      mv_json_wrong_type (node, "config", "an object", error);
      return NULL;
    }
  /* The format first: another format may have other fields. */
  if (!check_format (node, MV_CONFIG_FORMAT, error) ||
      !mv_json_reject_unknown_members (node, NULL, known, error))
    return NULL;

  if ((field = mv_json_required_member (node, "id", error)) == NULL ||
      !mv_json_read_string (field, "id", &text, error) ||
      !mv_id_validate (text, error))
    return NULL;
  config->id = g_strdup (text);

  if ((field = mv_json_required_member (node, "desired_state", error)) == NULL ||
      !mv_json_read_string (field, "desired_state", &text, error))
    return NULL;
  if (!mv_desired_from_string (text, &config->desired))
    {
      g_autofree char *shown = mv_text_excerpt (text, -1, MV_EXCERPT_MAX_BYTES);

      g_set_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT,
                   "desired_state: '%s' is not one of running, paused, stopped, destroyed",
                   shown);
      return NULL;
    }

  /* Creation sets the desired and specification generations to 1. */
  if (!read_generation (node, "desired_generation", 1, &config->desired_generation, error) ||
      !read_generation (node, "specification_generation", 1,
                        &config->specification_generation, error) ||
      !read_generation (node, "restart_generation", 0, &config->restart_generation, error))
    return NULL;

  if (!mv_json_read_string_member (node, "fingerprint", FALSE, &config->fingerprint, error))
    return NULL;
  if (config->fingerprint != NULL && !valid_fingerprint (config->fingerprint))
    {
      g_set_error_literal (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT,
                           "fingerprint: not 64 lowercase hex digits (SHA-256)");
      return NULL;
    }

  if ((field = mv_json_required_member (node, "created_at", error)) == NULL ||
      !read_timestamp (field, "created_at", &config->created_at, error))
    return NULL;
  config->updated_at = config->created_at;
  if ((field = mv_json_member (node, "updated_at")) != NULL &&
      !read_timestamp (field, "updated_at", &config->updated_at, error))
    return NULL;
  if ((field = mv_json_member (node, "standby")) != NULL &&
      !mv_json_read_bool (field, "standby", &config->standby, error))
    return NULL;
  if ((field = mv_json_member (node, "stopped_by_user")) != NULL &&
      !mv_json_read_bool (field, "stopped_by_user", &config->stopped_by_user, error))
    return NULL;

  if ((field = mv_json_required_member (node, "spec", error)) == NULL)
    return NULL;
  config->spec = mv_spec_from_node (field, &local_error);
  /* The shortest standby time is the daemon's policy when a change is
   * made, not a property of a record. */
  if (config->spec == NULL ||
      !mv_spec_validate_with_standby_min (config->spec, 1, &local_error))
    {
      g_set_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT, "spec: %s", local_error->message);
      return NULL;
    }
  if ((field = mv_json_member (node, "image_config")) != NULL)
    {
      config->image_config = mv_image_config_from_node (field, &local_error);
      if (config->image_config == NULL)
        {
          g_propagate_error (error, g_steal_pointer (&local_error));
          return NULL;
        }
      if (config->spec->image == NULL)
        {
          g_set_error_literal (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT,
                               "image_config: the spec names no image");
          return NULL;
        }
    }

  /* As mv_config_new() does, the spec carries the record's ID. */
  if (config->spec->id == NULL)
    config->spec->id = g_strdup (config->id);
  else if (strcmp (config->spec->id, config->id) != 0)
    {
      /* Both IDs are valid by now, and short. */
      g_set_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT,
                   "spec: id '%s' differs from the record's id '%s'",
                   config->spec->id, config->id);
      return NULL;
    }

  return g_steal_pointer (&config);
}

/* ---- status.json ---- */

JsonNode *
mv_status_to_node (const MvStatus *status)
{
  g_autoptr(JsonObject) object = json_object_new ();

  g_return_val_if_fail (status != NULL, NULL);

  json_object_set_int_member (object, "format", MV_STATUS_FORMAT);
  json_object_set_string_member (object, "state", mv_state_to_string (status->state));
  if (status->state_error != NULL)
    {
      /* A message for people that may quote a VMM's output: bytes that
       * are not UTF-8 would make the record unreadable, so they go. */
      g_autofree char *text = g_utf8_make_valid (status->state_error, -1);

      json_object_set_string_member (object, "state_error", text);
    }
  if (status->phase != NULL)
    json_object_set_string_member (object, "phase", status->phase);
  if (status->operation_id != NULL)
    json_object_set_string_member (object, "operation_id", status->operation_id);
  json_object_set_int_member (object, "observed_generation", (gint64) status->observed_generation);
  json_object_set_int_member (object, "observed_restart_generation",
                              (gint64) status->observed_restart_generation);
  if (status->failed_generation != 0)
    json_object_set_int_member (object, "failed_generation", (gint64) status->failed_generation);
  if (status->started_at != 0)
    set_timestamp (object, "started_at", status->started_at);
  if (status->finished_at != 0)
    set_timestamp (object, "finished_at", status->finished_at);
  if (status->next_restart_at != 0)
    set_timestamp (object, "next_restart_at", status->next_restart_at);
  if (status->has_exit_code)
    json_object_set_int_member (object, "exit_code", status->exit_code);
  json_object_set_int_member (object, "restart_count", status->restart_count);
  if (status->vmm != NULL)
    json_object_set_object_member (object, "vmm", mv_json_object_deep_copy (status->vmm));
  if (status->saved_state != NULL)
    json_object_set_string_member (object, "saved_state", status->saved_state);
  if (status->traffic_sequence != 0)
    json_object_set_int_member (object, "traffic_sequence", (gint64) status->traffic_sequence);
  if (status->restoring_snapshot != NULL)
    json_object_set_string_member (object, "restoring_snapshot", status->restoring_snapshot);
  if (status->started_from != NULL)
    json_object_set_string_member (object, "started_from", status->started_from);
  if (status->warm_template != NULL)
    json_object_set_string_member (object, "warm_template", status->warm_template);
  if (status->forking)
    json_object_set_boolean_member (object, "forking", TRUE);
  if (status->vcpus != 0)
    json_object_set_int_member (object, "vcpus", status->vcpus);
  if (status->memory_bytes != 0)
    json_object_set_int_member (object, "memory_bytes", (gint64) status->memory_bytes);
  if (status->destroyed->len > 0)
    {
      JsonArray *done = json_array_new ();
      for (guint i = 0; i < status->destroyed->len; i++)
        json_array_add_string_element (done, status->destroyed->pdata[i]);
      json_object_set_array_member (object, "destroyed", done);
    }
  return json_node_init_object (json_node_alloc (), object);
}

static gboolean
read_optional_timestamp (const MvJson *object, const char *name, gint64 *out, GError **error)
{
  const MvJson *node = mv_json_member (object, name);

  return node == NULL || read_timestamp (node, name, out, error);
}

MvStatus *
mv_status_from_node (const MvJson *node, GError **error)
{
  static const char *const known[] = {
    "format", "state", "state_error", "phase", "operation_id",
    "observed_generation", "observed_restart_generation", "failed_generation", "started_at", "finished_at", "next_restart_at",
    "exit_code", "restart_count", "vmm", "saved_state", "traffic_sequence", "destroyed",
    "restoring_snapshot", "forking", "vcpus", "memory_bytes", "started_from", "warm_template", NULL
  };
  g_autoptr(MvStatus) status = mv_status_new ();
  const char *state = NULL;
  const MvJson *field;
  gint64 value;

  g_return_val_if_fail (node != NULL, NULL);

  if (!mv_json_is_object (node))
    {
      mv_json_wrong_type (node, "status", "an object", error);
      return NULL;
    }
  if (!check_format (node, MV_STATUS_FORMAT, error) ||
      !mv_json_reject_unknown_members (node, NULL, known, error))
    return NULL;

  if ((field = mv_json_required_member (node, "state", error)) == NULL ||
      !mv_json_read_string (field, "state", &state, error))
    return NULL;
  if (!mv_state_from_string (state, &status->state))
    {
      g_autofree char *shown = mv_text_excerpt (state, -1, MV_EXCERPT_MAX_BYTES);

      g_set_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT,
                   "state: '%s' is not a machine state", shown);
      return NULL;
    }

  if (!mv_json_read_string_member (node, "state_error", FALSE, &status->state_error, error) ||
      !mv_json_read_string_member (node, "phase", FALSE, &status->phase, error) ||
      !mv_json_read_string_member (node, "operation_id", FALSE, &status->operation_id, error) ||
      !read_generation (node, "observed_generation", 0, &status->observed_generation, error) ||
      !read_optional_generation (node, "observed_restart_generation", 0,
                                 &status->observed_restart_generation, error) ||
      !read_optional_generation (node, "failed_generation", 0, &status->failed_generation,
                                 error) ||
      !read_optional_timestamp (node, "started_at", &status->started_at, error) ||
      !read_optional_timestamp (node, "finished_at", &status->finished_at, error) ||
      !read_optional_timestamp (node, "next_restart_at", &status->next_restart_at, error) ||
      !read_optional_generation (node, "traffic_sequence", 0, &status->traffic_sequence,
                                 error) ||
      !mv_json_read_string_member (node, "restoring_snapshot", FALSE,
                                   &status->restoring_snapshot, error) ||
      !mv_json_read_string_member (node, "started_from", FALSE, &status->started_from, error) ||
      !mv_json_read_string_member (node, "warm_template", FALSE, &status->warm_template, error))
    return NULL;
  /* A template's key has an ID's form. */
  if (status->warm_template && !mv_id_validate (status->warm_template, error))
    return g_prefix_error (error, "warm_template: "), NULL;
  if (status->started_from && !g_str_equal (status->started_from, MV_STARTED_COLD) &&
      !g_str_equal (status->started_from, MV_STARTED_WARM) &&
      !g_str_equal (status->started_from, MV_STARTED_SAVED_STATE))
    return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT, "started_from: not cold, warm or "
                         "saved-state"), NULL;
  if ((field = mv_json_member (node, "forking")) != NULL &&
      !mv_json_read_bool (field, "forking", &status->forking, error))
    return NULL;
  if (status->restoring_snapshot && !mv_id_validate (status->restoring_snapshot, error))
    return g_prefix_error (error, "restoring_snapshot: "), NULL;

  if ((field = mv_json_member (node, "destroyed")) != NULL)
    {
      if (!mv_json_is_array (field))
        {
          mv_json_wrong_type (field, "destroyed", "an array of strings", error);
          return NULL;
        }
      mv_json_each (element, field)
        {
          const char *name = NULL;

          if (!mv_json_read_string (element, "destroyed", &name, error))
            return NULL;
          g_ptr_array_add (status->destroyed, g_strdup (name));
        }
    }

  if ((field = mv_json_member (node, "exit_code")) != NULL)
    {
      if (!mv_json_read_int (field, "exit_code", G_MININT32, G_MAXINT32, &value, error))
        return NULL;
      status->has_exit_code = TRUE;
      status->exit_code = (gint32) value;
    }
  if ((field = mv_json_member (node, "vcpus")) != NULL)
    {
      if (!mv_json_read_int (field, "vcpus", 0, G_MAXUINT32, &value, error))
        return NULL;
      status->vcpus = (guint32) value;
    }
  if (!read_optional_generation (node, "memory_bytes", 0, &status->memory_bytes, error))
    return NULL;
  if ((field = mv_json_member (node, "restart_count")) != NULL)
    {
      if (!mv_json_read_int (field, "restart_count", 0, G_MAXUINT32, &value, error))
        return NULL;
      status->restart_count = (guint32) value;
    }
  if ((field = mv_json_member (node, "vmm")) != NULL)
    {
      if (!mv_json_is_object (field))
        {
          mv_json_wrong_type (field, "vmm", "an object", error);
          return NULL;
        }
      g_autoptr(JsonNode) vmm = mv_json_to_node (field);

      status->vmm = json_object_ref (json_node_get_object (vmm));
    }
  if (!mv_json_read_string_member (node, "saved_state", FALSE, &status->saved_state, error))
    return NULL;

  return g_steal_pointer (&status);
}
