/* Daily metrics: which file a sample goes to, which files go, and the
 * day file's JSON. */
#include "metrics.h"
#include "errors.h"
#include "json-strict.h"

#include <stdio.h>
#include <string.h>

#define USEC_PER_DAY  ((gint64) 86400 * G_USEC_PER_SEC)

/* Floor division: a time before the epoch is in a negative day. */
static gint64
day_of (gint64 time)
{
  return time >= 0 ? time / USEC_PER_DAY : -((-time - 1) / USEC_PER_DAY) - 1;
}

char *
mv_metrics_file_name (gint64 time)
{
  g_autoptr (GDateTime) utc = g_date_time_new_from_unix_utc (day_of (time) * 86400);

  if (!utc)
    return NULL;
  return g_strdup_printf ("%04d-%02d-%02d.json", g_date_time_get_year (utc),
                          g_date_time_get_month (utc), g_date_time_get_day_of_month (utc));
}

gint64
mv_metrics_file_day (const char *name)
{
  int year, month, day;
  char tail;
  g_autoptr (GDateTime) utc = NULL;
  g_autofree char *again = NULL;

  /* Exactly "DDDD-DD-DD.json": sscanf alone would take "+1-2-3.json". */
  if (strlen (name) != 15 || !g_str_has_suffix (name, ".json"))
    return -1;
  for (guint i = 0; i < 10; i++)
    if (i == 4 || i == 7 ? name[i] != '-' : !g_ascii_isdigit (name[i]))
      return -1;
  if (sscanf (name, "%4d-%2d-%2d.json%c", &year, &month, &day, &tail) != 3)
    return -1;
  utc = g_date_time_new_utc (year, month, day, 0, 0, 0);
  if (!utc)
    return -1;
  /* 2026-02-30 is no day. */
  if (g_date_time_get_month (utc) != month || g_date_time_get_day_of_month (utc) != day)
    return -1;
  again = mv_metrics_file_name (g_date_time_to_unix (utc) * G_USEC_PER_SEC);
  if (g_strcmp0 (again, name) != 0)
    return -1;
  return day_of (g_date_time_to_unix (utc) * G_USEC_PER_SEC);
}

GPtrArray *
mv_metrics_files_to_prune (const char *const *names, guint n_names, gint64 now)
{
  GPtrArray *prune = g_ptr_array_new_with_free_func (g_free);
  gint64 today = day_of (now);

  for (guint i = 0; i < n_names; i++)
    {
      gint64 day = mv_metrics_file_day (names[i]);

      if (day < 0)
        continue;
      if (day <= today - MV_METRICS_KEEP_DAYS || day > today)
        g_ptr_array_add (prune, g_strdup (names[i]));
    }
  return prune;
}

guint
mv_metrics_samples_per_day (guint sample_seconds)
{
  sample_seconds = CLAMP (sample_seconds, MV_METRICS_SAMPLE_MIN_S, MV_METRICS_SAMPLE_MAX_S);
  return (86400 + sample_seconds - 1) / sample_seconds;
}

/* The fields of a sample, in the order they are written. */
static const char *const sample_fields[] = {
  "time", "started_at", "cpu_ns", "memory_bytes", "disk_read_bytes", "disk_written_bytes",
  "network_rx_bytes", "network_tx_bytes", NULL,
};

static guint64 *
sample_field (MvMetricsSample *sample, guint i)
{
  guint64 *fields[] = {
    (guint64 *) &sample->time, (guint64 *) &sample->started_at, &sample->cpu_ns,
    &sample->memory_bytes, &sample->disk_read_bytes, &sample->disk_written_bytes,
    &sample->network_rx_bytes, &sample->network_tx_bytes,
  };
  return fields[i];
}

char *
mv_metrics_day_to_json (const MvMetricsSample *samples, guint n_samples)
{
  GString *out = g_string_new (NULL);

  g_string_append_printf (out, "{\"format\":%d,\"samples\":[", MV_METRICS_FORMAT);
  for (guint i = 0; i < n_samples; i++)
    {
      MvMetricsSample s = samples[i];

      g_string_append (out, i ? ",\n{" : "\n{");
      for (guint f = 0; sample_fields[f]; f++)
        {
          /* time and started_at are signed; the rest are counters. */
          if (f < 2)
            g_string_append_printf (out, "%s\"%s\":%" G_GINT64_FORMAT, f ? "," : "",
                                    sample_fields[f], (gint64) *sample_field (&s, f));
          else
            g_string_append_printf (out, ",\"%s\":%" G_GUINT64_FORMAT, sample_fields[f],
                                    *sample_field (&s, f));
        }
      g_string_append_c (out, '}');
    }
  g_string_append (out, "]}\n");
  return g_string_free (out, FALSE);
}

static gboolean
read_sample (const MvJson *node, guint index, MvMetricsSample *sample, GError **error)
{
  g_autofree char *where = g_strdup_printf ("samples[%u]", index);

  if (!mv_json_is_object (node))
    return mv_json_wrong_type (node, where, "an object", error);
  if (!mv_json_reject_unknown_members (node, where, sample_fields, error))
    return FALSE;
  for (guint f = 0; sample_fields[f]; f++)
    {
      g_autofree char *field = g_strdup_printf ("%s.%s", where, sample_fields[f]);
      const MvJson *member = mv_json_required_member (node, sample_fields[f], error);
      gint64 v;

      if (!member)
        return FALSE;
      /* Counters past 2^63 are not reached by anything a VMM does. */
      if (!mv_json_read_int (member, field, 0, G_MAXINT64, &v, error))
        return FALSE;
      *sample_field (sample, f) = (guint64) v;
    }
  return TRUE;
}

GArray *
mv_metrics_day_from_json (const char *json, gsize length, guint max, GError **error)
{
  static const char *const known[] = { "format", "samples", NULL };
  const MvJsonLimits limits = { MV_METRICS_FILE_MAX_BYTES, 8 };
  g_autoptr (MvJsonDoc) doc = mv_json_read (json, (gssize) length, &limits, "metrics", error);
  const MvJson *root = doc ? mv_json_doc_root (doc) : NULL;
  g_autoptr (GArray) samples = g_array_new (FALSE, TRUE, sizeof (MvMetricsSample));
  const MvJson *member;
  const MvJson *array;
  gint64 format;

  if (!root)
    return NULL;
  if (!mv_json_is_object (root))
    {
      mv_json_wrong_type (root, "metrics", "an object", error);
      return NULL;
    }
  if (!mv_json_reject_unknown_members (root, NULL, known, error))
    return NULL;
  if (!(member = mv_json_required_member (root, "format", error)) ||
      !mv_json_read_int (member, "format", MV_METRICS_FORMAT, MV_METRICS_FORMAT, &format, error))
    return NULL;
  if (!(member = mv_json_required_member (root, "samples", error)))
    return NULL;
  if (!mv_json_is_array (member))
    {
      mv_json_wrong_type (member, "samples", "an array", error);
      return NULL;
    }
  array = member;
  if (array->count > max)
    {
      g_set_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT,
                   "samples: %u samples is more than the limit of %u",
                   array->count, max);
      return NULL;
    }
  g_array_set_size (samples, array->count);
  mv_json_each (element, array)
    if (!read_sample (element, element->index,
                      &g_array_index (samples, MvMetricsSample, element->index), error))
      return NULL;
  return g_steal_pointer (&samples);
}
