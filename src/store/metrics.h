/* Daily metrics files (seed 000): machines/<id>/metrics/YYYY-MM-DD.json.
 * Blocking; safe from any thread, as they touch only the machine's
 * metrics directory. */
#pragma once
#include "core/metrics.h"

#include <gio/gio.h>

/* Appends @sample to its UTC day's file (rewritten whole, atomically),
 * keeping at most the day's share of samples at one every
 * @sample_seconds (the oldest go first), and removes the files of days
 * mv_metrics_files_to_prune() names at @sample->time. A machine whose
 * directory is gone (being destroyed) is left alone: TRUE, nothing
 * written. A day's file that cannot be read as ours is replaced. */
gboolean mv_metrics_append (const char *machine_dir, const MvMetricsSample *sample,
                            guint sample_seconds, GError **error);
/* The samples taken from @since to @until (µs since the epoch, both
 * included), oldest first, at most @max (MV_METRICS_REPLY_MAX): the
 * earliest ones. A day's file that cannot be read is skipped with a
 * warning. MvMetricsSample array. */
GArray  *mv_metrics_read (const char *machine_dir, gint64 since, gint64 until, guint max,
                          GError **error);
