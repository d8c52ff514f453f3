/* The steps' counts and histogram, and the text exposition format's
 * escaping and number spelling. */
#include "core/op-stats.h"
#include "core/prom-text.h"

#include <math.h>

static void
test_op_stats_counts (void)
{
  MvOpStats stats;
  const MvOpKind *start;

  mv_op_stats_init (&stats);
  g_assert_null (mv_op_stats_lookup (&stats, "start"));
  mv_op_stats_record (&stats, "start", FALSE, 0.003);
  mv_op_stats_record (&stats, "start", TRUE, 2.0);
  mv_op_stats_record (&stats, "start", FALSE, 1000.0);
  mv_op_stats_record (&stats, "stop", FALSE, -1.0);

  start = mv_op_stats_lookup (&stats, "start");
  g_assert_nonnull (start);
  g_assert_cmpuint (start->total, ==, 3);
  g_assert_cmpuint (start->failures, ==, 1);
  g_assert_cmpfloat_with_epsilon (start->seconds_sum, 1002.003, 1e-9);
  /* Cumulative buckets: 0.005 holds the first; 2.5 the first two; the
   * last bound (300) not the 1000 s one, which only +Inf (total) holds. */
  g_assert_cmpfloat (mv_op_bucket_bounds[0], ==, 0.005);
  g_assert_cmpuint (start->buckets[0], ==, 1);
  for (guint i = 0; i < MV_OP_BUCKETS; i++)
    if (mv_op_bucket_bounds[i] == 2.5)
      g_assert_cmpuint (start->buckets[i], ==, 2);
  g_assert_cmpuint (start->buckets[MV_OP_BUCKETS - 1], ==, 2);
  for (guint i = 1; i < MV_OP_BUCKETS; i++)
    g_assert_cmpfloat (mv_op_bucket_bounds[i], >, mv_op_bucket_bounds[i - 1]);

  /* A negative duration (a clock that went back) counts as 0. */
  g_assert_cmpuint (mv_op_stats_lookup (&stats, "stop")->buckets[0], ==, 1);
  g_assert_cmpfloat (mv_op_stats_lookup (&stats, "stop")->seconds_sum, ==, 0);
  g_assert_cmpuint (stats.n_kinds, ==, 2);
}

static void
test_op_stats_bounded (void)
{
  MvOpStats stats;
  const MvOpKind *other;

  mv_op_stats_init (&stats);
  for (guint i = 0; i < 100; i++)
    {
      g_autofree char *kind = g_strdup_printf ("kind-%u", i);
      mv_op_stats_record (&stats, kind, FALSE, 1);
    }
  mv_op_stats_record (&stats, "a-kind-whose-name-is-longer-than-thirty-two", FALSE, 1);
  g_assert_cmpuint (stats.n_kinds, ==, MV_OP_KINDS_MAX);
  other = mv_op_stats_lookup (&stats, MV_OP_KIND_OTHER);
  g_assert_nonnull (other);
  g_assert_cmpuint (other->total, ==, 100 - (MV_OP_KINDS_MAX - 1) + 1);
  g_assert_nonnull (mv_op_stats_lookup (&stats, "kind-0"));
  g_assert_null (mv_op_stats_lookup (&stats, "kind-99"));
}

static void
test_text_format (void)
{
  g_autoptr (GString) out = g_string_new (NULL);
  const char *labels[] = { "id", "a\\b\"c\nd", "name", "web", NULL };

  mv_prom_family (out, "microvmd_x_total", "counter", "Help with \\ and\nnewline \"quoted\".");
  mv_prom_sample_u64 (out, "microvmd_x_total", labels, G_MAXUINT64);
  mv_prom_sample_u64 (out, "microvmd_y", NULL, 0);
  mv_prom_sample_double (out, "microvmd_z", NULL, 1.5);
  mv_prom_sample_double (out, "microvmd_z", NULL, INFINITY);
  mv_prom_sample_double (out, "microvmd_z", NULL, 42);
  g_assert_cmpstr (out->str, ==,
                   "# HELP microvmd_x_total Help with \\\\ and\\nnewline \"quoted\".\n"
                   "# TYPE microvmd_x_total counter\n"
                   "microvmd_x_total{id=\"a\\\\b\\\"c\\nd\",name=\"web\"} 18446744073709551615\n"
                   "microvmd_y 0\n"
                   "microvmd_z 1.5\n"
                   "microvmd_z +Inf\n"
                   "microvmd_z 42\n");
}

static void
test_number_spelling (void)
{
  g_autoptr (GString) out = g_string_new (NULL);

  /* Whatever the locale, a decimal point. */
  mv_prom_append_double (out, 0.025);
  g_string_append_c (out, ' ');
  mv_prom_append_double (out, 300);
  g_string_append_c (out, ' ');
  mv_prom_append_double (out, -INFINITY);
  g_assert_cmpstr (out->str, ==, "0.025 300 -Inf");
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/prom/op-stats/counts", test_op_stats_counts);
  g_test_add_func ("/prom/op-stats/bounded", test_op_stats_bounded);
  g_test_add_func ("/prom/text/format", test_text_format);
  g_test_add_func ("/prom/text/numbers", test_number_spelling);
  return g_test_run ();
}
