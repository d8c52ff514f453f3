/* Daily metrics files: one JSON document a UTC day, rewritten whole with
 * each sample, so that a crash leaves the day as it was or with the new
 * sample, never half a file. */
#include "metrics.h"
#include "store.h"
#include "util/fault.h"
#include "util/files.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <string.h>
#include <sys/stat.h>

#define USEC_PER_DAY  ((gint64) 86400 * G_USEC_PER_SEC)

static GArray *
read_day (const char *path, guint max, GError **error)
{
  g_autofree char *text = NULL;
  gsize length;

  if (!mv_file_read_bounded (path, MV_METRICS_FILE_MAX_BYTES, path, &text, &length, error))
    return NULL;
  return mv_metrics_day_from_json (text, length, max, error);
}

static void
prune (const char *dir, gint64 now)
{
  g_autoptr (GDir) d = g_dir_open (dir, 0, NULL);
  g_autoptr (GPtrArray) names = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (GPtrArray) gone = NULL;
  const char *name;

  if (!d)
    return;
  while ((name = g_dir_read_name (d)) != NULL)
    {
      /* One round writes at a time: a temporary file here is what a
       * crash left of an earlier write. */
      if (name[0] == '.' && strstr (name, ".json."))
        {
          g_autofree char *path = g_build_filename (dir, name, NULL);

          g_unlink (path);
          continue;
        }
      g_ptr_array_add (names, g_strdup (name));
    }
  gone = mv_metrics_files_to_prune ((const char *const *) names->pdata, names->len, now);
  for (guint i = 0; i < gone->len; i++)
    {
      g_autofree char *path = g_build_filename (dir, gone->pdata[i], NULL);

      if (g_unlink (path) < 0 && errno != ENOENT)
        g_warning ("Cannot remove %s: %s", path, g_strerror (errno));
    }
}

gboolean
mv_metrics_append (const char *machine_dir, const MvMetricsSample *sample, guint sample_seconds,
                   GError **error)
{
  g_autofree char *dir = g_build_filename (machine_dir, MV_METRICS_DIR, NULL);
  g_autofree char *name = mv_metrics_file_name (sample->time);
  g_autofree char *path = NULL;
  g_autofree char *json = NULL;
  g_autoptr (GArray) samples = NULL;
  g_autoptr (GError) local = NULL;
  guint max = mv_metrics_samples_per_day (sample_seconds);

  if (!name)
    return TRUE;
  /* The directory of a machine being destroyed is not made again. */
  if (!g_file_test (machine_dir, G_FILE_TEST_IS_DIR))
    return TRUE;
  if (g_mkdir (dir, 0700) < 0 && errno != EEXIST)
    return mv_set_errno_error (error, errno, "Cannot create %s", dir);
  path = g_build_filename (dir, name, NULL);

  samples = read_day (path, max, &local);
  if (!samples)
    {
      if (!g_error_matches (local, G_IO_ERROR, G_IO_ERROR_NOT_FOUND))
        g_warning ("Replacing %s: %s", path, local->message);
      samples = g_array_new (FALSE, TRUE, sizeof (MvMetricsSample));
    }
  /* A day holds its share of samples; after a change of interval, or a
   * clock set back, the oldest make room. */
  while (samples->len >= max)
    g_array_remove_index (samples, 0);
  g_array_append_val (samples, *sample);

  json = mv_metrics_day_to_json ((MvMetricsSample *) samples->data, samples->len);
  if (!mv_write_file_atomic (path, json, strlen (json), error))
    return FALSE;
  mv_fault_point ("metrics", "written");
  prune (dir, sample->time);
  return TRUE;
}

static int
compare_names (gconstpointer a, gconstpointer b)
{
  return strcmp (*(const char *const *) a, *(const char *const *) b);
}

GArray *
mv_metrics_read (const char *machine_dir, gint64 since, gint64 until, guint max, GError **error)
{
  g_autofree char *dir = g_build_filename (machine_dir, MV_METRICS_DIR, NULL);
  g_autoptr (GArray) out = g_array_new (FALSE, TRUE, sizeof (MvMetricsSample));
  g_autoptr (GPtrArray) names = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (GDir) d = NULL;
  g_autoptr (GError) local = NULL;
  const char *name;

  d = g_dir_open (dir, 0, &local);
  if (!d)
    {
      if (g_error_matches (local, G_FILE_ERROR, G_FILE_ERROR_NOENT))
        return g_steal_pointer (&out);
      g_propagate_error (error, g_steal_pointer (&local));
      return NULL;
    }
  while ((name = g_dir_read_name (d)) != NULL)
    {
      gint64 day = mv_metrics_file_day (name);

      /* Only the days the window touches are read. */
      if (day < 0 || (day + 1) * USEC_PER_DAY <= since || day * USEC_PER_DAY > until)
        continue;
      g_ptr_array_add (names, g_strdup (name));
    }
  /* YYYY-MM-DD sorts as the days do. */
  g_ptr_array_sort (names, compare_names);

  for (guint i = 0; i < names->len && out->len < max; i++)
    {
      g_autofree char *path = g_build_filename (dir, names->pdata[i], NULL);
      g_autoptr (GArray) day = read_day (path, mv_metrics_samples_per_day (1), &local);

      if (!day)
        {
          g_warning ("Cannot read %s: %s", path, local->message);
          g_clear_error (&local);
          continue;
        }
      for (guint j = 0; j < day->len && out->len < max; j++)
        {
          MvMetricsSample *s = &g_array_index (day, MvMetricsSample, j);

          if (s->time >= since && s->time <= until)
            g_array_append_val (out, *s);
        }
    }
  return g_steal_pointer (&out);
}
