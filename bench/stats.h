/* Samples, their distribution, and the results table: one entry per row
 * (or sub-row) of the benchmark, written as results.json and results.md. */
#pragma once
#include <glib.h>

/* A set of durations or values, in one unit. */
typedef struct {
  GArray *values;   /* double */
} BenchSamples;

BenchSamples *bench_samples_new (void);
BenchSamples *bench_samples_copy (const BenchSamples *samples);
void          bench_samples_free (BenchSamples *samples);
void          bench_samples_add (BenchSamples *samples, double value);
guint         bench_samples_count (const BenchSamples *samples);
/* Nearest-rank percentile, 0 < @p <= 100; NAN when empty. */
double        bench_samples_percentile (const BenchSamples *samples, double p);
double        bench_samples_mean (const BenchSamples *samples);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (BenchSamples, bench_samples_free)

/* How a figure is judged against its target. */
typedef enum {
  BENCH_TARGET_NONE,          /* informational */
  BENCH_TARGET_RATIO_AT_MOST, /* figure p50 / baseline p50 <= limit */
  BENCH_TARGET_SPEEDUP_AT_LEAST, /* baseline p50 / figure p50 >= limit */
  BENCH_TARGET_VALUE_AT_MOST, /* figure p50 <= limit */
  BENCH_TARGET_VALUE_EXACTLY, /* every sample == limit */
  BENCH_TARGET_EXCESS_AT_MOST, /* figure p50 - baseline p50 <= limit */
  BENCH_TARGET_P99_RATIO_AT_MOST, /* figure p99 / baseline p99 <= limit */
  BENCH_TARGET_RATIO_AT_LEAST, /* figure p50 / baseline p50 >= limit (a rate) */
} BenchTargetKind;

typedef enum {
  BENCH_VERDICT_NONE,         /* no target, or nothing measured */
  BENCH_VERDICT_MET,
  BENCH_VERDICT_MISSED,
  BENCH_VERDICT_INCONCLUSIVE, /* the ratio's interval holds the target */
} BenchVerdict;

/* A ratio's interval: BENCH_INTERVAL_RESAMPLES bootstrap resamples of the
 * pairs, drawn from a fixed seed so that the same samples give the same
 * interval, and the middle BENCH_INTERVAL_PERCENT % of the ratios they
 * give. */
#define BENCH_INTERVAL_RESAMPLES  1000
#define BENCH_INTERVAL_PERCENT    95

typedef struct {
  char          *row;          /* "1", "2", ... */
  char          *id;           /* unique, e.g. "2-managed-objects-n1000" */
  char          *what;
  char          *unit;
  gint64         n;            /* machines defined; -1 = not applicable */
  BenchSamples  *figure;       /* NULL = not measured */
  char          *baseline_what;
  BenchSamples  *baseline;     /* NULL = no baseline figure */
  BenchTargetKind target_kind;
  double         target_limit;
  char          *target_text;
  char          *not_measured; /* the reason, when figure is NULL */
  char          *note;
  int            seq;          /* order of measurement */
  /* With an interval (bench_result_judge_on_interval), a ratio target is
   * judged on it rather than on the ratio alone. */
  gboolean       has_interval;
  double         interval_percentile; /* the ratio is of these: 50 or 99 */
  double         interval_low;
  double         interval_high;
  gboolean       interval_unpaired; /* figure and baseline resampled each on its own */
  gboolean       shows_p99_ratio; /* the ratio of the p99s is shown without a target on it */
} BenchResult;

typedef struct {
  GPtrArray *results;          /* BenchResult* */
  char      *started_at;       /* ISO 8601 */
  GHashTable *meta;            /* string -> string: machine, versions */
} BenchReport;

BenchReport *bench_report_new (void);
void         bench_report_free (BenchReport *report);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (BenchReport, bench_report_free)
void         bench_report_set_meta (BenchReport *report, const char *key, const char *value);

/* Adds an entry; takes ownership of @figure and @baseline (either may be
 * NULL). Returns the entry for notes. */
BenchResult *bench_report_add (BenchReport *report, const char *row, const char *id,
                               const char *what, const char *unit, gint64 n,
                               BenchSamples *figure, const char *baseline_what,
                               BenchSamples *baseline);
BenchResult *bench_report_add_not_measured (BenchReport *report, const char *row,
                                            const char *id, const char *what,
                                            const char *reason);
void         bench_result_set_target (BenchResult *result, BenchTargetKind kind,
                                      double limit, const char *text);
void         bench_result_set_note (BenchResult *result, const char *note);
/* Shows the ratio of the p99s beside that of the p50s, as a p99 target does. */
void         bench_result_show_p99_ratio (BenchResult *result);

/* Figure p50 / baseline p50; NAN when there is no ratio. */
double       bench_result_ratio (const BenchResult *result);
/* Figure p99 / baseline p99; NAN when there is no ratio. */
double       bench_result_p99_ratio (const BenchResult *result);

/* Computes the interval of @result's ratio (of p99s for a p99 target, of
 * p50s otherwise) and judges a ratio or speed-up target on it from then
 * on: met only when the whole interval meets the target, missed only
 * when none of it does, inconclusive otherwise. Other kinds of target
 * keep their verdict on the figure. Its figure and baseline must be
 * pairs, as many of each, the i-th of each measured side by side (one
 * after the other, or interleaved), so that what drifted in between hit
 * both and a resample keeps them together. Call it once the target is
 * set. */
void         bench_result_judge_on_interval (BenchResult *result);
/* As bench_result_judge_on_interval(), for a figure and a baseline that
 * cannot be measured in pairs (two sizes of one thing, each measured in
 * a phase of its own): each is resampled on its own, so the interval
 * holds the spread within each phase, not what drifted between them. */
void         bench_result_judge_on_unpaired_interval (BenchResult *result);
BenchVerdict bench_result_verdict (const BenchResult *result);

/* Prints one line about @result on stdout, target beside the figure. */
void         bench_result_print (const BenchResult *result);

gboolean     bench_report_write (BenchReport *report, const char *outdir, GError **error);

/* "spread (min–max): WHAT a–b µs, BASELINE_WHAT c–d µs", for a row's note. */
char *bench_spread_note (const char *what, BenchSamples *figure, const char *baseline_what,
                         BenchSamples *baseline);
