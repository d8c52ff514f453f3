/* What the reconciler's steps came to, for the metrics endpoint: how many
 * of each kind ran, how many failed, and a histogram of how long they took.
 * Pure: the reconciler records into it on the main thread and readers look
 * at it there. Kinds are the steps' phases (start, restore, stop,
 * destroy-vmm, ...), a short fixed set; a kind beyond MV_OP_KINDS_MAX is
 * counted as "other". */
#pragma once
#include <glib.h>

#define MV_OP_KINDS_MAX     32
#define MV_OP_KIND_MAX_LEN  32
#define MV_OP_KIND_OTHER    "other"

/* Upper bounds, in seconds, of the step duration histogram's buckets
 * (docs/metrics.md): from a pause (milliseconds) to a boot under TCG or
 * a large snapshot (minutes). +Inf is implied. */
#define MV_OP_BUCKETS       14
extern const double mv_op_bucket_bounds[MV_OP_BUCKETS];

typedef struct {
  char    kind[MV_OP_KIND_MAX_LEN + 1];
  guint64 total;
  guint64 failures;
  guint64 buckets[MV_OP_BUCKETS];  /* cumulative: steps that took <= the bound */
  double  seconds_sum;
} MvOpKind;

typedef struct {
  MvOpKind kinds[MV_OP_KINDS_MAX];
  guint    n_kinds;                /* in the order first seen */
} MvOpStats;

void            mv_op_stats_init (MvOpStats *stats);
/* A step of @kind ended after @seconds (negative counts as 0). */
void            mv_op_stats_record (MvOpStats *stats, const char *kind, gboolean failed,
                                    double seconds);
/* The entry of @kind, or NULL if none ran. */
const MvOpKind *mv_op_stats_lookup (const MvOpStats *stats, const char *kind);
