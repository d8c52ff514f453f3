/* Daily metrics files: written atomically per day, bounded, pruned after
 * seven days by the sample's own time, read back by window. */
#include "store/metrics.h"
#include "util/files.h"

#include <glib/gstdio.h>
#include <string.h>
#include <sys/stat.h>

#define DAY_US  ((gint64) 86400 * G_USEC_PER_SEC)

/* Warnings are counted, not fatal: a test that expects none checks it. */
static guint warnings;
static char last_warning[512];

static GLogWriterOutput
count_warnings (GLogLevelFlags level, const GLogField *fields, gsize n_fields, gpointer data)
{
  if (level & (G_LOG_LEVEL_WARNING | G_LOG_LEVEL_CRITICAL | G_LOG_LEVEL_ERROR))
    {
      for (gsize i = 0; i < n_fields; i++)
        if (g_str_equal (fields[i].key, "MESSAGE"))
          g_strlcpy (last_warning, fields[i].value, sizeof last_warning);
      warnings++;
      return G_LOG_WRITER_HANDLED;
    }
  return g_log_writer_default (level, fields, n_fields, data);
}

typedef struct {
  char *root;
  char *machine_dir;
  char *metrics_dir;
} Fixture;

static void
setup (Fixture *f, gconstpointer data)
{
  f->root = g_dir_make_tmp ("test-metrics-XXXXXX", NULL);
  g_assert_nonnull (f->root);
  f->machine_dir = g_build_filename (f->root, "m1", NULL);
  g_assert_cmpint (g_mkdir (f->machine_dir, 0700), ==, 0);
  f->metrics_dir = g_build_filename (f->machine_dir, MV_METRICS_DIR, NULL);
}

static void
teardown (Fixture *f, gconstpointer data)
{
  if (!g_str_has_suffix (g_test_get_path (), "corrupt-day-replaced"))
    g_assert_cmpuint (warnings, ==, 0);
  mv_remove_tree (f->root, NULL);
  g_free (f->root);
  g_free (f->machine_dir);
  g_free (f->metrics_dir);
}

static gint64
utc (int year, int month, int day, int hour)
{
  g_autoptr (GDateTime) t = g_date_time_new_utc (year, month, day, hour, 0, 0);

  return g_date_time_to_unix (t) * G_USEC_PER_SEC;
}

static MvMetricsSample
sample_at (gint64 time, guint64 cpu_ns)
{
  return (MvMetricsSample) { .time = time, .started_at = 1, .cpu_ns = cpu_ns,
                             .memory_bytes = 1 << 20, .network_rx_bytes = 7 };
}

static void
append (Fixture *f, gint64 time, guint64 cpu_ns, guint sample_seconds)
{
  g_autoptr (GError) error = NULL;
  MvMetricsSample s = sample_at (time, cpu_ns);

  g_assert_true (mv_metrics_append (f->machine_dir, &s, sample_seconds, &error));
  g_assert_no_error (error);
}

static int
compare_names (gconstpointer a, gconstpointer b)
{
  return strcmp (*(const char *const *) a, *(const char *const *) b);
}

static char **
list (Fixture *f)
{
  g_autoptr (GDir) d = g_dir_open (f->metrics_dir, 0, NULL);
  g_autoptr (GPtrArray) names = g_ptr_array_new ();
  const char *name;

  g_assert_nonnull (d);
  while ((name = g_dir_read_name (d)) != NULL)
    g_ptr_array_add (names, g_strdup (name));
  g_ptr_array_sort (names, compare_names);
  g_ptr_array_add (names, NULL);
  return (char **) g_ptr_array_free (g_steal_pointer (&names), FALSE);
}

static void
test_append_and_read (Fixture *f, gconstpointer data)
{
  gint64 t0 = utc (2026, 12, 1, 23);
  g_autoptr (GArray) got = NULL;
  g_autoptr (GError) error = NULL;
  g_auto (GStrv) names = NULL;
  g_autofree char *path = NULL;
  GStatBuf st;

  for (guint i = 0; i < 3; i++)
    append (f, t0 + i * (gint64) 60 * G_USEC_PER_SEC, i * 1000, 60);
  /* An hour later is the next UTC day: another file. */
  append (f, t0 + (gint64) 3600 * G_USEC_PER_SEC, 5000, 60);

  names = list (f);
  g_assert_cmpuint (g_strv_length (names), ==, 2);
  g_assert_cmpstr (names[0], ==, "2026-12-01.json");
  g_assert_cmpstr (names[1], ==, "2026-12-02.json");
  path = g_build_filename (f->metrics_dir, names[0], NULL);
  g_assert_cmpint (g_stat (path, &st), ==, 0);
  g_assert_cmpint (st.st_mode & 0777, ==, 0600);
  g_assert_cmpint (g_stat (f->metrics_dir, &st), ==, 0);
  g_assert_cmpint (st.st_mode & 0777, ==, 0700);

  got = mv_metrics_read (f->machine_dir, 0, G_MAXINT64, MV_METRICS_REPLY_MAX, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (got->len, ==, 4);
  for (guint i = 0; i < 3; i++)
    g_assert_cmpuint (g_array_index (got, MvMetricsSample, i).cpu_ns, ==, i * 1000);
  g_assert_cmpuint (g_array_index (got, MvMetricsSample, 3).cpu_ns, ==, 5000);
  g_assert_cmpuint (g_array_index (got, MvMetricsSample, 3).network_rx_bytes, ==, 7);

  /* A window, both ends included; and the bound. */
  g_clear_pointer (&got, g_array_unref);
  got = mv_metrics_read (f->machine_dir, t0 + (gint64) 60 * G_USEC_PER_SEC, t0 + (gint64) 3600 * G_USEC_PER_SEC,
                         MV_METRICS_REPLY_MAX, &error);
  g_assert_cmpuint (got->len, ==, 3);
  g_assert_cmpuint (g_array_index (got, MvMetricsSample, 0).cpu_ns, ==, 1000);
  g_clear_pointer (&got, g_array_unref);
  got = mv_metrics_read (f->machine_dir, 0, G_MAXINT64, 2, &error);
  g_assert_cmpuint (got->len, ==, 2);
  g_assert_cmpuint (g_array_index (got, MvMetricsSample, 1).cpu_ns, ==, 1000);
}

static void
test_day_bounded (Fixture *f, gconstpointer data)
{
  gint64 t0 = utc (2026, 12, 1, 0);
  g_autoptr (GArray) got = NULL;

  /* At one sample an hour a day holds 24; the 25th pushes out the first. */
  for (guint i = 0; i < 25; i++)
    append (f, t0 + i * G_USEC_PER_SEC, i, 3600);
  got = mv_metrics_read (f->machine_dir, 0, G_MAXINT64, MV_METRICS_REPLY_MAX, NULL);
  g_assert_cmpuint (got->len, ==, 24);
  g_assert_cmpuint (g_array_index (got, MvMetricsSample, 0).cpu_ns, ==, 1);
  g_assert_cmpuint (g_array_index (got, MvMetricsSample, 23).cpu_ns, ==, 24);
}

static void
test_pruned_after_seven_days (Fixture *f, gconstpointer data)
{
  gint64 t0 = utc (2026, 12, 1, 12);
  g_autofree char *stale = g_build_filename (f->metrics_dir, ".2026-12-01.json.AbC123", NULL);
  g_autofree char *other = g_build_filename (f->metrics_dir, "notes", NULL);
  g_auto (GStrv) names = NULL;

  append (f, t0, 0, 60);
  g_assert_true (g_file_set_contents (stale, "x", 1, NULL));
  g_assert_true (g_file_set_contents (other, "x", 1, NULL));
  for (guint day = 1; day < 7; day++)
    append (f, t0 + day * DAY_US, day, 60);
  names = list (f);
  /* Seven days: all kept; the crash's litter is gone, others' files stay. */
  g_assert_cmpuint (g_strv_length (names), ==, 8);
  g_assert_cmpstr (names[0], ==, "2026-12-01.json");
  g_assert_false (g_file_test (stale, G_FILE_TEST_EXISTS));
  g_assert_true (g_file_test (other, G_FILE_TEST_EXISTS));

  append (f, t0 + 7 * DAY_US, 7, 60);
  g_strfreev (names);
  names = list (f);
  g_assert_cmpuint (g_strv_length (names), ==, 8);
  g_assert_cmpstr (names[0], ==, "2026-12-02.json");
  g_assert_cmpstr (names[6], ==, "2026-12-08.json");
  g_assert_cmpstr (names[7], ==, "notes");
}

static void
test_machine_gone (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  MvMetricsSample s = sample_at (utc (2026, 12, 1, 0), 1);
  g_autoptr (GArray) got = NULL;

  mv_remove_tree (f->machine_dir, NULL);
  g_assert_true (mv_metrics_append (f->machine_dir, &s, 60, &error));
  g_assert_no_error (error);
  g_assert_false (g_file_test (f->machine_dir, G_FILE_TEST_EXISTS));
  got = mv_metrics_read (f->machine_dir, 0, G_MAXINT64, 10, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (got->len, ==, 0);
}

static void
test_corrupt_day_replaced (Fixture *f, gconstpointer data)
{
  gint64 t0 = utc (2026, 12, 1, 0);
  g_autofree char *path = NULL;
  g_autoptr (GArray) got = NULL;

  append (f, t0, 1, 60);
  path = g_build_filename (f->metrics_dir, "2026-12-01.json", NULL);
  g_assert_true (g_file_set_contents (path, "{\"format\":1,", -1, NULL));
  warnings = 0;
  got = mv_metrics_read (f->machine_dir, 0, G_MAXINT64, 10, NULL);
  g_assert_cmpuint (warnings, ==, 1);
  g_assert_nonnull (strstr (last_warning, "Cannot read"));
  g_assert_cmpuint (got->len, ==, 0);

  append (f, t0 + (gint64) 60 * G_USEC_PER_SEC, 2, 60);
  g_assert_cmpuint (warnings, ==, 2);
  g_assert_nonnull (strstr (last_warning, "Replacing"));
  g_clear_pointer (&got, g_array_unref);
  got = mv_metrics_read (f->machine_dir, 0, G_MAXINT64, 10, NULL);
  g_assert_cmpuint (got->len, ==, 1);
  g_assert_cmpuint (g_array_index (got, MvMetricsSample, 0).cpu_ns, ==, 2);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_log_set_writer_func (count_warnings, NULL, NULL);
  g_test_add ("/metrics/append-and-read", Fixture, NULL, setup, test_append_and_read, teardown);
  g_test_add ("/metrics/day-bounded", Fixture, NULL, setup, test_day_bounded, teardown);
  g_test_add ("/metrics/pruned-after-seven-days", Fixture, NULL, setup,
              test_pruned_after_seven_days, teardown);
  g_test_add ("/metrics/machine-gone", Fixture, NULL, setup, test_machine_gone, teardown);
  g_test_add ("/metrics/corrupt-day-replaced", Fixture, NULL, setup, test_corrupt_day_replaced,
              teardown);
  return g_test_run ();
}
