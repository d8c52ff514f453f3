#include "op-stats.h"

#include <string.h>

const double mv_op_bucket_bounds[MV_OP_BUCKETS] = {
  0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300,
};

void
mv_op_stats_init (MvOpStats *stats)
{
  memset (stats, 0, sizeof *stats);
}

const MvOpKind *
mv_op_stats_lookup (const MvOpStats *stats, const char *kind)
{
  for (guint i = 0; i < stats->n_kinds; i++)
    if (strcmp (stats->kinds[i].kind, kind) == 0)
      return &stats->kinds[i];
  return NULL;
}

static MvOpKind *
kind_entry (MvOpStats *stats, const char *kind)
{
  MvOpKind *entry = (MvOpKind *) mv_op_stats_lookup (stats, kind);

  if (entry)
    return entry;
  /* The last slot is kept for "other", so that the table never overflows. */
  if (strlen (kind) > MV_OP_KIND_MAX_LEN ||
      (stats->n_kinds >= MV_OP_KINDS_MAX - 1 && strcmp (kind, MV_OP_KIND_OTHER) != 0))
    return kind_entry (stats, MV_OP_KIND_OTHER);
  entry = &stats->kinds[stats->n_kinds++];
  g_strlcpy (entry->kind, kind, sizeof entry->kind);
  return entry;
}

void
mv_op_stats_record (MvOpStats *stats, const char *kind, gboolean failed, double seconds)
{
  MvOpKind *entry = kind_entry (stats, kind);

  if (!(seconds > 0))
    seconds = 0;
  entry->total++;
  if (failed)
    entry->failures++;
  entry->seconds_sum += seconds;
  for (guint i = 0; i < MV_OP_BUCKETS; i++)
    if (seconds <= mv_op_bucket_bounds[i])
      entry->buckets[i]++;
}
