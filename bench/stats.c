/* Distributions and the results table (stats.h). */
#include "stats.h"

#include <errno.h>
#include <json-glib/json-glib.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

BenchSamples *
bench_samples_new (void)
{
  BenchSamples *samples = g_new0 (BenchSamples, 1);

  samples->values = g_array_new (FALSE, FALSE, sizeof (double));
  return samples;
}

BenchSamples *
bench_samples_copy (const BenchSamples *samples)
{
  BenchSamples *copy = bench_samples_new ();

  g_array_append_vals (copy->values, samples->values->data, samples->values->len);
  return copy;
}

void
bench_samples_free (BenchSamples *samples)
{
  if (!samples)
    return;
  g_array_unref (samples->values);
  g_free (samples);
}

void
bench_samples_add (BenchSamples *samples, double value)
{
  g_array_append_val (samples->values, value);
}

guint
bench_samples_count (const BenchSamples *samples)
{
  return samples ? samples->values->len : 0;
}

static gint
compare_doubles (gconstpointer a, gconstpointer b)
{
  double x = *(const double *) a, y = *(const double *) b;
  return x < y ? -1 : x > y ? 1 : 0;
}

/* The nearest rank, from 1, of the @p percentile of @n values. */
static guint
nearest_rank (double p, guint n)
{
  guint rank = (guint) ceil (p / 100.0 * n);

  return CLAMP (rank, 1, n);
}

double
bench_samples_percentile (const BenchSamples *samples, double p)
{
  g_autoptr (GArray) sorted = NULL;
  guint n = bench_samples_count (samples);

  if (n == 0)
    return NAN;
  sorted = g_array_copy (samples->values);
  g_array_sort (sorted, compare_doubles);
  return g_array_index (sorted, double, nearest_rank (p, n) - 1);
}

double
bench_samples_mean (const BenchSamples *samples)
{
  guint n = bench_samples_count (samples);
  double sum = 0;

  if (n == 0)
    return NAN;
  for (guint i = 0; i < n; i++)
    sum += g_array_index (samples->values, double, i);
  return sum / n;
}

static void
result_free (BenchResult *result)
{
  g_free (result->row);
  g_free (result->id);
  g_free (result->what);
  g_free (result->unit);
  bench_samples_free (result->figure);
  g_free (result->baseline_what);
  bench_samples_free (result->baseline);
  g_free (result->target_text);
  g_free (result->not_measured);
  g_free (result->note);
  g_free (result);
}

BenchReport *
bench_report_new (void)
{
  BenchReport *report = g_new0 (BenchReport, 1);
  g_autoptr (GDateTime) now = g_date_time_new_now_utc ();

  report->results = g_ptr_array_new_with_free_func ((GDestroyNotify) result_free);
  report->started_at = g_date_time_format_iso8601 (now);
  report->meta = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  return report;
}

void
bench_report_free (BenchReport *report)
{
  if (!report)
    return;
  g_ptr_array_unref (report->results);
  g_hash_table_unref (report->meta);
  g_free (report->started_at);
  g_free (report);
}

void
bench_report_set_meta (BenchReport *report, const char *key, const char *value)
{
  g_hash_table_replace (report->meta, g_strdup (key), g_strdup (value ? value : ""));
}

BenchResult *
bench_report_add (BenchReport *report, const char *row, const char *id, const char *what,
                  const char *unit, gint64 n, BenchSamples *figure,
                  const char *baseline_what, BenchSamples *baseline)
{
  BenchResult *result = g_new0 (BenchResult, 1);

  result->row = g_strdup (row);
  result->id = g_strdup (id);
  result->what = g_strdup (what);
  result->unit = g_strdup (unit);
  result->n = n;
  result->figure = figure;
  result->baseline_what = g_strdup (baseline_what);
  result->baseline = baseline;
  result->seq = (int) report->results->len;
  g_ptr_array_add (report->results, result);
  return result;
}

BenchResult *
bench_report_add_not_measured (BenchReport *report, const char *row, const char *id,
                               const char *what, const char *reason)
{
  BenchResult *result = bench_report_add (report, row, id, what, "", -1, NULL, NULL, NULL);

  result->not_measured = g_strdup (reason);
  return result;
}

void
bench_result_set_target (BenchResult *result, BenchTargetKind kind, double limit,
                         const char *text)
{
  result->target_kind = kind;
  result->target_limit = limit;
  g_free (result->target_text);
  result->target_text = g_strdup (text);
}

void
bench_result_show_p99_ratio (BenchResult *result)
{
  result->shows_p99_ratio = TRUE;
}

void
bench_result_set_note (BenchResult *result, const char *note)
{
  g_free (result->note);
  result->note = g_strdup (note);
}

static double
percentile_ratio (const BenchResult *result, double p)
{
  double f, b;

  if (!result->figure || !result->baseline || bench_samples_count (result->baseline) == 0)
    return NAN;
  f = bench_samples_percentile (result->figure, p);
  b = bench_samples_percentile (result->baseline, p);
  return b != 0 ? f / b : NAN;
}

double
bench_result_ratio (const BenchResult *result)
{
  return percentile_ratio (result, 50);
}

double
bench_result_p99_ratio (const BenchResult *result)
{
  return percentile_ratio (result, 99);
}

/* The percentile whose ratio @kind judges. */
static double
target_percentile (BenchTargetKind kind)
{
  return kind == BENCH_TARGET_P99_RATIO_AT_MOST ? 99 : 50;
}

/* Any fixed value: the resamples only need to be the same every run. */
#define INTERVAL_SEED 20260601

/* The @p percentile of the values of @samples picked by @picks (@n of
 * them, @scratch as long). */
static double
resampled_percentile (const BenchSamples *samples, const guint *picks, guint n, double p,
                      double *scratch)
{
  for (guint i = 0; i < n; i++)
    scratch[i] = g_array_index (samples->values, double, picks[i]);
  qsort (scratch, n, sizeof (double), compare_doubles);
  return scratch[nearest_rank (p, n) - 1];
}

static void
judge_on_interval (BenchResult *result, gboolean paired)
{
  guint n = bench_samples_count (result->figure);
  guint nb = bench_samples_count (result->baseline);
  double p = target_percentile (result->target_kind);
  /* The ratios left out below the interval, and as many above it. */
  guint tail = BENCH_INTERVAL_RESAMPLES * (100 - BENCH_INTERVAL_PERCENT) / 200;
  g_autoptr (GRand) rand = NULL;
  g_autofree guint *picks = NULL, *base_picks = NULL;
  g_autofree double *scratch = NULL;
  g_autofree double *ratios = NULL;

  g_return_if_fail (n > 0 && nb > 0 && (!paired || n == nb));
  rand = g_rand_new_with_seed (INTERVAL_SEED);
  picks = g_new (guint, n);
  base_picks = g_new (guint, nb);
  scratch = g_new (double, MAX (n, nb));
  ratios = g_new (double, BENCH_INTERVAL_RESAMPLES);
  for (guint r = 0; r < BENCH_INTERVAL_RESAMPLES; r++)
    {
      double b;

      for (guint i = 0; i < n; i++)
        picks[i] = (guint) g_rand_int_range (rand, 0, (gint32) n);
      for (guint i = 0; i < nb; i++)
        base_picks[i] = paired ? picks[i] : (guint) g_rand_int_range (rand, 0, (gint32) nb);
      b = resampled_percentile (result->baseline, base_picks, nb, p, scratch);
      /* A baseline of 0 has no ratio, and so no interval. */
      if (b == 0)
        return;
      ratios[r] = resampled_percentile (result->figure, picks, n, p, scratch) / b;
    }
  qsort (ratios, BENCH_INTERVAL_RESAMPLES, sizeof (double), compare_doubles);
  result->has_interval = TRUE;
  result->interval_unpaired = !paired;
  result->interval_percentile = p;
  result->interval_low = ratios[tail];
  result->interval_high = ratios[BENCH_INTERVAL_RESAMPLES - 1 - tail];
}

void
bench_result_judge_on_interval (BenchResult *result)
{
  judge_on_interval (result, TRUE);
}

void
bench_result_judge_on_unpaired_interval (BenchResult *result)
{
  judge_on_interval (result, FALSE);
}

/* Whether @result's interval is of the ratio its target judges. */
static gboolean
interval_judges (const BenchResult *result)
{
  return result->has_interval &&
         result->interval_percentile == target_percentile (result->target_kind);
}

/* A ratio target, "at most @limit": on the interval when there is one. */
static BenchVerdict
ratio_verdict (const BenchResult *result, double ratio, double limit)
{
  if (interval_judges (result))
    return result->interval_high <= limit ? BENCH_VERDICT_MET
         : result->interval_low > limit   ? BENCH_VERDICT_MISSED
                                          : BENCH_VERDICT_INCONCLUSIVE;
  if (isnan (ratio))
    return BENCH_VERDICT_NONE;
  return ratio <= limit ? BENCH_VERDICT_MET : BENCH_VERDICT_MISSED;
}

static BenchVerdict
met_if (gboolean met)
{
  return met ? BENCH_VERDICT_MET : BENCH_VERDICT_MISSED;
}

BenchVerdict
bench_result_verdict (const BenchResult *result)
{
  double p50, ratio;

  if (!result->figure || bench_samples_count (result->figure) == 0)
    return BENCH_VERDICT_NONE;
  p50 = bench_samples_percentile (result->figure, 50);
  ratio = bench_result_ratio (result);
  switch (result->target_kind)
    {
    case BENCH_TARGET_NONE:
      return BENCH_VERDICT_NONE;
    case BENCH_TARGET_RATIO_AT_MOST:
      return ratio_verdict (result, ratio, result->target_limit);
    case BENCH_TARGET_P99_RATIO_AT_MOST:
      return ratio_verdict (result, bench_result_p99_ratio (result), result->target_limit);
    case BENCH_TARGET_RATIO_AT_LEAST:
      if (interval_judges (result))
        return result->interval_low >= result->target_limit ? BENCH_VERDICT_MET
             : result->interval_high < result->target_limit ? BENCH_VERDICT_MISSED
                                                            : BENCH_VERDICT_INCONCLUSIVE;
      if (isnan (ratio))
        return BENCH_VERDICT_NONE;
      return met_if (ratio >= result->target_limit);
    case BENCH_TARGET_SPEEDUP_AT_LEAST:
      /* baseline / figure >= limit is figure / baseline <= 1 / limit. */
      if (ratio == 0)
        return BENCH_VERDICT_NONE;
      return ratio_verdict (result, ratio, 1.0 / result->target_limit);
    case BENCH_TARGET_VALUE_AT_MOST:
      return met_if (p50 <= result->target_limit);
    case BENCH_TARGET_EXCESS_AT_MOST:
      if (!result->baseline || bench_samples_count (result->baseline) == 0)
        return BENCH_VERDICT_NONE;
      return met_if (p50 - bench_samples_percentile (result->baseline, 50) <= result->target_limit);
    case BENCH_TARGET_VALUE_EXACTLY:
      for (guint i = 0; i < bench_samples_count (result->figure); i++)
        if (g_array_index (result->figure->values, double, i) != result->target_limit)
          return BENCH_VERDICT_MISSED;
      return BENCH_VERDICT_MET;
    }
  return BENCH_VERDICT_NONE;
}

static char *
format_value (double v)
{
  if (isnan (v))
    return g_strdup ("–");
  if (fabs (v) >= 100 || v == floor (v))
    return g_strdup_printf ("%.0f", v);
  if (fabs (v) >= 10)
    return g_strdup_printf ("%.1f", v);
  return g_strdup_printf ("%.2f", v);
}

static const char *
verdict (const BenchResult *result)
{
  if (result->not_measured)
    return "not measured";
  switch (bench_result_verdict (result))
    {
    case BENCH_VERDICT_MET:
      return "met";
    case BENCH_VERDICT_MISSED:
      return "MISSED";
    case BENCH_VERDICT_INCONCLUSIVE:
      return "inconclusive";
    case BENCH_VERDICT_NONE:
      break;
    }
  return "";
}

/* "1.02", or "1.02, p99 1.80" where the target is on p99. */
static char *
ratio_text (const BenchResult *result)
{
  g_autofree char *p50 = format_value (bench_result_ratio (result));
  g_autofree char *p99 = NULL;

  if (result->target_kind != BENCH_TARGET_P99_RATIO_AT_MOST && !result->shows_p99_ratio)
    return g_steal_pointer (&p50);
  p99 = format_value (bench_result_p99_ratio (result));
  return g_strdup_printf ("%s, p99 %s", p50, p99);
}

/* "0.97–1.08"; "" without an interval. */
static char *
interval_text (const BenchResult *result)
{
  g_autofree char *low = NULL, *high = NULL;

  if (!result->has_interval)
    return g_strdup ("");
  low = format_value (result->interval_low);
  high = format_value (result->interval_high);
  return g_strdup_printf ("%s–%s", low, high);
}

/* Which ratio the interval is of, where that is not the plain ratio's. */
static const char *
interval_of (const BenchResult *result)
{
  return result->interval_percentile == 99 ? " of the p99 ratio" : "";
}

void
bench_result_print (const BenchResult *result)
{
  g_autofree char *p50 = NULL, *p99 = NULL, *b50 = NULL, *ratio = NULL, *interval = NULL;

  if (result->not_measured)
    {
      g_print ("[%s] %s: not measured: %s", result->row, result->what, result->not_measured);
      if (result->baseline)
        g_print ("; baseline %s p50 %.0f %s (runs %u)", result->baseline_what,
                 bench_samples_percentile (result->baseline, 50), result->unit,
                 bench_samples_count (result->baseline));
      g_print ("\n");
      return;
    }
  p50 = format_value (bench_samples_percentile (result->figure, 50));
  p99 = format_value (bench_samples_percentile (result->figure, 99));
  b50 = format_value (bench_samples_percentile (result->baseline, 50));
  ratio = ratio_text (result);
  interval = interval_text (result);
  g_print ("[%s] %s: p50 %s p99 %s %s (runs %u)", result->row, result->what, p50, p99,
           result->unit, bench_samples_count (result->figure));
  if (result->baseline)
    {
      g_print ("; baseline %s p50 %s", result->baseline_what, b50);
      if (result->target_kind == BENCH_TARGET_P99_RATIO_AT_MOST)
        {
          g_autofree char *b99 = format_value (bench_samples_percentile (result->baseline, 99));
          g_print (" p99 %s", b99);
        }
      g_print (" (runs %u); ratio %s", bench_samples_count (result->baseline), ratio);
    }
  if (result->has_interval && result->interval_unpaired)
    g_print (" (%d%% interval%s %s over %d resamples of each side's runs, apart)",
             BENCH_INTERVAL_PERCENT, interval_of (result), interval, BENCH_INTERVAL_RESAMPLES);
  else if (result->has_interval)
    {
      guint pairs = bench_samples_count (result->figure);

      g_print (" (%d%% interval%s %s over %d resamples of %u %s)", BENCH_INTERVAL_PERCENT,
               interval_of (result), interval, BENCH_INTERVAL_RESAMPLES, pairs,
               pairs == 1 ? "pair" : "pairs");
    }
  if (result->target_text)
    g_print ("; target %s: %s", result->target_text, verdict (result));
  g_print ("\n");
}

static void
add_distribution (JsonBuilder *b, const char *member, const BenchSamples *samples,
                  const char *what)
{
  json_builder_set_member_name (b, member);
  if (!samples)
    {
      json_builder_add_null_value (b);
      return;
    }
  json_builder_begin_object (b);
  if (what)
    {
      json_builder_set_member_name (b, "what");
      json_builder_add_string_value (b, what);
    }
  json_builder_set_member_name (b, "p50");
  json_builder_add_double_value (b, bench_samples_percentile (samples, 50));
  json_builder_set_member_name (b, "p99");
  json_builder_add_double_value (b, bench_samples_percentile (samples, 99));
  json_builder_set_member_name (b, "mean");
  json_builder_add_double_value (b, bench_samples_mean (samples));
  json_builder_set_member_name (b, "runs");
  json_builder_add_int_value (b, bench_samples_count (samples));
  json_builder_end_object (b);
}

static void
add_number_or_null (JsonBuilder *b, const char *member, double v)
{
  json_builder_set_member_name (b, member);
  if (isnan (v))
    json_builder_add_null_value (b);
  else
    json_builder_add_double_value (b, v);
}

/* "ratio_interval": the interval of bench_result_judge_on_interval, or
 * null. */
static void
add_interval (JsonBuilder *b, const BenchResult *r)
{
  json_builder_set_member_name (b, "ratio_interval");
  if (!r->has_interval)
    {
      json_builder_add_null_value (b);
      return;
    }
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "of");
  json_builder_add_string_value (b, r->interval_percentile == 99 ? "p99" : "p50");
  json_builder_set_member_name (b, "low");
  json_builder_add_double_value (b, r->interval_low);
  json_builder_set_member_name (b, "high");
  json_builder_add_double_value (b, r->interval_high);
  json_builder_set_member_name (b, "percent");
  json_builder_add_int_value (b, BENCH_INTERVAL_PERCENT);
  json_builder_set_member_name (b, "resamples");
  json_builder_add_int_value (b, BENCH_INTERVAL_RESAMPLES);
  json_builder_set_member_name (b, "pairs");
  if (r->interval_unpaired)
    json_builder_add_null_value (b);
  else
    json_builder_add_int_value (b, bench_samples_count (r->figure));
  json_builder_end_object (b);
}

static char *
report_json (BenchReport *report)
{
  g_autoptr (JsonBuilder) b = json_builder_new ();
  g_autoptr (JsonGenerator) gen = json_generator_new ();
  g_autoptr (JsonNode) root = NULL;
  GHashTableIter iter;
  gpointer key, value;

  json_builder_begin_object (b);
  json_builder_set_member_name (b, "started_at");
  json_builder_add_string_value (b, report->started_at);
  json_builder_set_member_name (b, "machine");
  json_builder_begin_object (b);
  g_hash_table_iter_init (&iter, report->meta);
  while (g_hash_table_iter_next (&iter, &key, &value))
    {
      json_builder_set_member_name (b, key);
      json_builder_add_string_value (b, value);
    }
  json_builder_end_object (b);
  json_builder_set_member_name (b, "results");
  json_builder_begin_array (b);
  for (guint i = 0; i < report->results->len; i++)
    {
      BenchResult *r = report->results->pdata[i];
      BenchVerdict verdict = bench_result_verdict (r);

      json_builder_begin_object (b);
      json_builder_set_member_name (b, "row");
      json_builder_add_string_value (b, r->row);
      json_builder_set_member_name (b, "id");
      json_builder_add_string_value (b, r->id);
      json_builder_set_member_name (b, "what");
      json_builder_add_string_value (b, r->what);
      json_builder_set_member_name (b, "measured");
      json_builder_add_boolean_value (b, r->not_measured == NULL);
      if (r->not_measured)
        {
          json_builder_set_member_name (b, "not_measured");
          json_builder_add_string_value (b, r->not_measured);
        }
      json_builder_set_member_name (b, "unit");
      json_builder_add_string_value (b, r->unit);
      json_builder_set_member_name (b, "N");
      if (r->n >= 0)
        json_builder_add_int_value (b, r->n);
      else
        json_builder_add_null_value (b);
      json_builder_set_member_name (b, "runs");
      json_builder_add_int_value (b, bench_samples_count (r->figure));
      add_number_or_null (b, "p50", r->figure ? bench_samples_percentile (r->figure, 50) : NAN);
      add_number_or_null (b, "p99", r->figure ? bench_samples_percentile (r->figure, 99) : NAN);
      add_distribution (b, "figure", r->figure, NULL);
      add_distribution (b, "baseline", r->baseline, r->baseline_what);
      add_number_or_null (b, "ratio", bench_result_ratio (r));
      add_number_or_null (b, "ratio_p99", bench_result_p99_ratio (r));
      add_interval (b, r);
      json_builder_set_member_name (b, "target");
      if (r->target_text)
        json_builder_add_string_value (b, r->target_text);
      else
        json_builder_add_null_value (b);
      /* target_met is null when there is no verdict or it is inconclusive;
       * verdict tells which. */
      json_builder_set_member_name (b, "target_met");
      if (verdict == BENCH_VERDICT_MET || verdict == BENCH_VERDICT_MISSED)
        json_builder_add_boolean_value (b, verdict == BENCH_VERDICT_MET);
      else
        json_builder_add_null_value (b);
      json_builder_set_member_name (b, "verdict");
      if (verdict == BENCH_VERDICT_NONE)
        json_builder_add_null_value (b);
      else
        json_builder_add_string_value (b, verdict == BENCH_VERDICT_MET      ? "met"
                                          : verdict == BENCH_VERDICT_MISSED ? "missed"
                                                                            : "inconclusive");
      if (r->note)
        {
          json_builder_set_member_name (b, "note");
          json_builder_add_string_value (b, r->note);
        }
      json_builder_end_object (b);
    }
  json_builder_end_array (b);
  json_builder_end_object (b);

  root = json_builder_get_root (b);
  json_generator_set_root (gen, root);
  json_generator_set_pretty (gen, TRUE);
  return json_generator_to_data (gen, NULL);
}

static char *
md_cell (const char *text)
{
  g_autoptr (GString) s = g_string_new (NULL);

  for (const char *p = text ? text : ""; *p; p++)
    if (*p == '|')
      g_string_append (s, "\\|");
    else if (*p == '\n')
      g_string_append_c (s, ' ');
    else
      g_string_append_c (s, *p);
  return g_string_free (g_steal_pointer (&s), FALSE);
}

static char *
report_markdown (BenchReport *report)
{
  GString *md = g_string_new ("# microvmd benchmark results\n\n");
  g_autoptr (GList) keys = g_hash_table_get_keys (report->meta);

  g_string_append_printf (md, "Run started %s.", report->started_at);
  keys = g_list_sort (keys, (GCompareFunc) g_strcmp0);
  for (GList *l = keys; l; l = l->next)
    g_string_append_printf (md, " %s: %s.", (char *) l->data,
                            (char *) g_hash_table_lookup (report->meta, l->data));
  g_string_append (md, "\n\nFigures and baselines were measured side by side in this run, on "
                       "the same private bus. p50/p99 over the runs shown; the ratio is figure p50 "
                       "/ baseline p50 (and of the p99s where the target is on p99). ");
  g_string_append_printf (md, "Where the runs were taken in pairs, the interval is the middle "
                              "%d%% of the ratio over %d bootstrap resamples of the pairs; a "
                              "target on the ratio is then met only when the whole interval "
                              "meets it, missed only when none of it does, and inconclusive "
                              "otherwise. Where they could not be (two sizes of one thing), figure and "
                              "baseline are resampled each on its own. ", BENCH_INTERVAL_PERCENT,
                              BENCH_INTERVAL_RESAMPLES);
  g_string_append (md, "Targets are goals, not assertions.\n\n");
  g_string_append (md, "| # | what | N | figure p50 | p99 | runs | baseline | baseline p50 | ratio | interval | target | verdict |\n");
  g_string_append (md, "|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (guint i = 0; i < report->results->len; i++)
    {
      BenchResult *r = report->results->pdata[i];
      g_autofree char *what = md_cell (r->what);
      g_autofree char *n = r->n >= 0 ? g_strdup_printf ("%" G_GINT64_FORMAT, r->n) : g_strdup ("");

      if (r->not_measured)
        {
          g_autofree char *reason = md_cell (r->not_measured);
          g_autofree char *target = md_cell (r->target_text);
          g_autofree char *bwhat = md_cell (r->baseline_what);
          g_autofree char *b50 = r->baseline ? format_value (bench_samples_percentile (r->baseline, 50)) : g_strdup ("");
          g_string_append_printf (md, "| %s | %s | %s | not measured: %s | | | %s | %s | | | %s | not measured |\n",
                                  r->row, what, n, reason, bwhat, b50, target);
          continue;
        }
      {
        g_autofree char *p50 = format_value (bench_samples_percentile (r->figure, 50));
        g_autofree char *p99 = format_value (bench_samples_percentile (r->figure, 99));
        g_autofree char *b50 = r->baseline ? format_value (bench_samples_percentile (r->baseline, 50)) : g_strdup ("");
        g_autofree char *ratio = ratio_text (r);
        g_autofree char *range = interval_text (r);
        /* The ratio column shows the p99 ratio after the p50 one. */
        g_autofree char *interval = g_strdup_printf ("%s%s", r->has_interval && r->interval_percentile == 99
                                                               ? "p99 " : "", range);
        g_autofree char *bwhat = md_cell (r->baseline_what);
        g_autofree char *target = md_cell (r->target_text);
        g_autofree char *unit = md_cell (r->unit);

        g_string_append_printf (md, "| %s | %s | %s | %s %s | %s | %u | %s | %s | %s | %s | %s | %s |\n",
                                r->row, what, n, p50, unit, p99, bench_samples_count (r->figure),
                                bwhat, b50, r->baseline ? ratio : "", interval, target, verdict (r));
      }
    }

  g_string_append (md, "\nNotes:\n\n");
  for (guint i = 0; i < report->results->len; i++)
    {
      BenchResult *r = report->results->pdata[i];
      if (r->note)
        {
          g_autofree char *what = md_cell (r->what);
          g_string_append_printf (md, "- #%s %s: %s\n", r->row, what, r->note);
        }
    }
  return g_string_free (md, FALSE);
}

static gint
compare_rows (gconstpointer a, gconstpointer b)
{
  const BenchResult *ra = *(BenchResult *const *) a;
  const BenchResult *rb = *(BenchResult *const *) b;
  int diff = atoi (ra->row) - atoi (rb->row);

  /* Within a row, the order the rows were measured in (seq). */
  return diff != 0 ? diff : ra->seq - rb->seq;
}

gboolean
bench_report_write (BenchReport *report, const char *outdir, GError **error)
{
  g_autofree char *json = NULL;
  g_autofree char *md = NULL;

  /* Rows in their numbers' order. */
  g_ptr_array_sort (report->results, compare_rows);
  json = report_json (report);
  md = report_markdown (report);
  g_autofree char *json_path = g_build_filename (outdir, "results.json", NULL);
  g_autofree char *md_path = g_build_filename (outdir, "results.md", NULL);

  if (g_mkdir_with_parents (outdir, 0755) < 0)
    {
      g_set_error (error, G_FILE_ERROR, g_file_error_from_errno (errno),
                   "Cannot create %s: %s", outdir, g_strerror (errno));
      return FALSE;
    }
  return g_file_set_contents (json_path, json, -1, error) &&
         g_file_set_contents (md_path, md, -1, error);
}

char *
bench_spread_note (const char *what, BenchSamples *figure, const char *baseline_what,
                   BenchSamples *baseline)
{
  return g_strdup_printf ("spread (min–max): %s %.0f–%.0f µs, %s %.0f–%.0f µs",
                          what, bench_samples_percentile (figure, 0.0001),
                          bench_samples_percentile (figure, 100), baseline_what,
                          bench_samples_percentile (baseline, 0.0001),
                          bench_samples_percentile (baseline, 100));
}
