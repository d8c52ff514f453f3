/* Daily metrics (seed 000, machines/<id>/metrics/): what a machine's VMM
 * used, sampled now and then, one file a UTC day, seven days kept. Pure:
 * file names, what to prune, and the day file's JSON; the store does
 * the I/O (store/metrics.c). */
#pragma once
#include <glib.h>

#define MV_METRICS_DIR            "metrics"
#define MV_METRICS_FORMAT         1
#define MV_METRICS_KEEP_DAYS      7
#define MV_METRICS_SAMPLE_MIN_S   1
#define MV_METRICS_SAMPLE_MAX_S   3600
/* What one GetMetrics call returns at most: a week at the default of a
 * sample a minute. A wider window is read in pages. */
#define MV_METRICS_REPLY_MAX      10080
/* A day's file at one sample a second is about 15 MB; larger is not ours. */
#define MV_METRICS_FILE_MAX_BYTES (32 * 1024 * 1024)

/* One sample; totals are since the VMM started (started_at tells VMMs
 * apart). */
typedef struct {
  gint64  time;                 /* µs since the epoch */
  gint64  started_at;           /* µs since the epoch */
  guint64 cpu_ns;
  guint64 memory_bytes;         /* resident */
  guint64 disk_read_bytes;
  guint64 disk_written_bytes;
  guint64 network_rx_bytes;
  guint64 network_tx_bytes;
} MvMetricsSample;

/* "YYYY-MM-DD.json" of the UTC day @time (µs since the epoch) falls in. */
char      *mv_metrics_file_name (gint64 time);
/* The UTC day (days since the epoch) a file name names, or -1 if @name is
 * not one of ours. */
gint64     mv_metrics_file_day (const char *name);
/* Of @names (a directory's entries), those to remove at @now: our files
 * of days more than MV_METRICS_KEEP_DAYS - 1 before today (today and the
 * six days before it are kept), and of days after today (a clock that
 * was set back would otherwise keep them for ever). Other names are left
 * alone. Returns a new array of copies. */
GPtrArray *mv_metrics_files_to_prune (const char *const *names, guint n_names, gint64 now);
/* The most samples a day's file keeps at one every @sample_seconds. */
guint      mv_metrics_samples_per_day (guint sample_seconds);

/* A day's file: {"format":1,"samples":[{...},...]}. */
char      *mv_metrics_day_to_json (const MvMetricsSample *samples, guint n_samples);
/* Parses a day's file; at most @max samples (more is an error), each
 * field checked. MvMetricsSample array. */
GArray    *mv_metrics_day_from_json (const char *json, gsize length, guint max,
                                     GError **error);
