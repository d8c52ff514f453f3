/* Daily metrics: the file a sample goes to, what is pruned, the day's JSON. */
#include "core/errors.h"
#include "core/metrics.h"

#include <string.h>

#define DAY_US  ((gint64) 86400 * G_USEC_PER_SEC)

static gint64
utc (int year, int month, int day, int hour, int minute, int second)
{
  g_autoptr (GDateTime) t = g_date_time_new_utc (year, month, day, hour, minute, second);

  return g_date_time_to_unix (t) * G_USEC_PER_SEC;
}

static void
test_file_name (void)
{
  static const struct {
    int y, mo, d, h, mi, s;
    gint64 extra_us;
    const char *name;
  } cases[] = {
    { 2026, 12, 1, 0, 0, 0, 0, "2026-12-01.json" },
    { 2026, 12, 1, 23, 59, 59, 999999, "2026-12-01.json" },
    { 2026, 12, 2, 0, 0, 0, 0, "2026-12-02.json" },
    { 2024, 2, 29, 12, 0, 0, 0, "2024-02-29.json" },
    { 1970, 1, 1, 0, 0, 0, 0, "1970-01-01.json" },
    { 1969, 12, 31, 23, 59, 59, 0, "1969-12-31.json" },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      gint64 t = utc (cases[i].y, cases[i].mo, cases[i].d, cases[i].h, cases[i].mi, cases[i].s) +
                 cases[i].extra_us;
      g_autofree char *name = mv_metrics_file_name (t);

      g_assert_cmpstr (name, ==, cases[i].name);
    }
}

static void
test_file_day (void)
{
  static const struct {
    const char *name;
    gboolean ours;
  } cases[] = {
    { "2026-12-01.json", TRUE },
    { "2024-02-29.json", TRUE },
    { "2026-02-29.json", FALSE },
    { "2026-02-30.json", FALSE },
    { "2026-13-01.json", FALSE },
    { "2026-12-1.json", FALSE },
    { "+026-12-01.json", FALSE },
    { "2026-12-01.json.tmp", FALSE },
    { ".2026-12-01.json.AbC123", FALSE },
    { "2026-12-01.txt", FALSE },
    { "notes", FALSE },
    { "", FALSE },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      gint64 day = mv_metrics_file_day (cases[i].name);

      if (cases[i].ours)
        g_assert_cmpint (day, >=, 0);
      else
        g_assert_cmpint (day, ==, -1);
    }
  g_assert_cmpint (mv_metrics_file_day ("1970-01-02.json"), ==, 1);
  g_assert_cmpint (mv_metrics_file_day ("2026-12-02.json") -
                   mv_metrics_file_day ("2026-12-01.json"), ==, 1);
}

static void
test_prune (void)
{
  const char *names[] = {
    "2026-11-24.json",     /* eight days before: goes */
    "2026-11-25.json",     /* seven days before: goes */
    "2026-11-26.json",     /* six days before: kept */
    "2026-11-30.json",
    "2026-12-02.json",     /* today */
    "2026-12-03.json",     /* tomorrow: the clock was set back; goes */
    "2025-01-01.json",
    "README",              /* not ours: left alone */
    ".2026-11-01.json.x1", /* a temporary file: the writer's to clean */
  };
  static const struct {
    int hour;
    const char *pruned;
  } cases[] = {
    { 0, "2026-11-24.json 2026-11-25.json 2026-12-03.json 2025-01-01.json" },
    { 23, "2026-11-24.json 2026-11-25.json 2026-12-03.json 2025-01-01.json" },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      gint64 now = utc (2026, 12, 2, cases[i].hour, 30, 0);
      g_autoptr (GPtrArray) prune = mv_metrics_files_to_prune (names, G_N_ELEMENTS (names), now);
      g_autofree char *joined = NULL;

      g_ptr_array_add (prune, NULL);
      joined = g_strjoinv (" ", (char **) prune->pdata);
      g_assert_cmpstr (joined, ==, cases[i].pruned);
    }
  {
    /* A day later, the oldest kept day goes too. */
    g_autoptr (GPtrArray) prune =
      mv_metrics_files_to_prune (names, 4, utc (2026, 12, 2, 0, 0, 0) + DAY_US);
    g_assert_cmpuint (prune->len, ==, 3);
    g_assert_cmpstr (prune->pdata[2], ==, "2026-11-26.json");
  }
}

static void
test_samples_per_day (void)
{
  g_assert_cmpuint (mv_metrics_samples_per_day (60), ==, 1440);
  g_assert_cmpuint (mv_metrics_samples_per_day (1), ==, 86400);
  g_assert_cmpuint (mv_metrics_samples_per_day (3600), ==, 24);
  g_assert_cmpuint (mv_metrics_samples_per_day (7), ==, 12343);
  g_assert_cmpuint (mv_metrics_samples_per_day (0), ==, 86400);
}

static void
test_json_round_trip (void)
{
  MvMetricsSample in[2] = {
    { 1796083200000000, 1796083100000000, 1500000000, 268435456, 4096, 8192, 100, 200 },
    { 1796083260000000, 1796083100000000, G_MAXINT64, 0, 0, 0, 0, 0 },
  };
  g_autofree char *json = mv_metrics_day_to_json (in, 2);
  g_autoptr (GError) error = NULL;
  g_autoptr (GArray) out = mv_metrics_day_from_json (json, strlen (json), 10, &error);

  g_assert_no_error (error);
  g_assert_cmpuint (out->len, ==, 2);
  g_assert_cmpmem (out->data, sizeof in, in, sizeof in);

  /* More samples than the day may hold is not ours. */
  g_clear_pointer (&out, g_array_unref);
  out = mv_metrics_day_from_json (json, strlen (json), 1, &error);
  g_assert_null (out);
  g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
  g_assert_nonnull (strstr (error->message, "limit of 1"));
}

static void
test_json_invalid (void)
{
  static const char *const docs[] = {
    "",
    "[]",
    "{\"format\":2,\"samples\":[]}",
    "{\"samples\":[]}",
    "{\"format\":1}",
    "{\"format\":1,\"samples\":[],\"extra\":1}",
    "{\"format\":1,\"samples\":[1]}",
    "{\"format\":1,\"samples\":[{\"time\":1}]}",
    "{\"format\":1,\"samples\":[{\"time\":1,\"started_at\":0,\"cpu_ns\":-1,\"memory_bytes\":0,"
    "\"disk_read_bytes\":0,\"disk_written_bytes\":0,\"network_rx_bytes\":0,"
    "\"network_tx_bytes\":0}]}",
  };

  for (guint i = 0; i < G_N_ELEMENTS (docs); i++)
    {
      g_autoptr (GError) error = NULL;
      g_autoptr (GArray) out = mv_metrics_day_from_json (docs[i], strlen (docs[i]), 10, &error);

      g_assert_null (out);
      g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
    }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/metrics/file-name", test_file_name);
  g_test_add_func ("/metrics/file-day", test_file_day);
  g_test_add_func ("/metrics/prune", test_prune);
  g_test_add_func ("/metrics/samples-per-day", test_samples_per_day);
  g_test_add_func ("/metrics/json-round-trip", test_json_round_trip);
  g_test_add_func ("/metrics/json-invalid", test_json_invalid);
  return g_test_run ();
}
