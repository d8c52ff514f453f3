/* Machines' logs bounded on disk: console.log, vmm.log and workload.log
 * in each machine's runtime directory, each kept to a size cap with one
 * rotated file beside it (console.log.1, vmm.log.1, workload.log.1). */
#pragma once
#include <glib.h>

#define MV_LOGS_MAX_BYTES_MIN     (G_GUINT64_CONSTANT (64) * 1024)
#define MV_LOGS_MAX_BYTES_MAX     (G_GUINT64_CONSTANT (1) << 30)
#define MV_LOGS_MAX_BYTES_DEFAULT (G_GUINT64_CONSTANT (8) * 1024 * 1024)
#define MV_LOGS_CHECK_SECONDS_MIN     1
#define MV_LOGS_CHECK_SECONDS_MAX     3600
#define MV_LOGS_CHECK_SECONDS_DEFAULT 10

/* If the regular file @path holds more than @max_bytes, copies it to
 * @rotated (replacing it) and truncates it to nothing, in place: the VMM
 * holds it open with O_APPEND, so its next write lands at the start.
 * What it writes between the end of the copy and the truncation is lost.
 * *@done says whether it was rotated; a missing @path is not an error. */
gboolean mv_log_rotate (const char *path, const char *rotated, guint64 max_bytes,
                        gboolean *done, GError **error);

/* mv_log_rotate() of the logs of the machines @ids (char*) under
 * @machines_dir (<runtime>/machines); a failure is a warning and the
 * others go on. Blocking: a worker thread's. */
void     mv_logs_rotate_machines (const char *machines_dir, GPtrArray *ids, guint64 max_bytes);

typedef struct _MvLogRotator MvLogRotator;

/* The IDs (char*) of the machines whose logs may have grown since @since
 * (0 the first time: every machine), and in *@now the time of this pick on
 * the same clock, from which the next round looks back. Main thread. */
typedef GPtrArray *(*MvLogsPick) (gint64 since, gint64 *now, gpointer data);

/* Every @check_seconds, mv_logs_rotate_machines() of what @pick names, in
 * a worker thread, one round at a time (a round still under way when the
 * next is due skips it). Only machines that may have written to their
 * logs are looked at: with thousands defined, few run. */
MvLogRotator *mv_log_rotator_new (const char *machines_dir, guint64 max_bytes,
                                  guint check_seconds, MvLogsPick pick, gpointer pick_data);
/* Stops; a round under way finishes in its thread. */
void          mv_log_rotator_free (MvLogRotator *rotator);
