/* Restart policies (seed 002, RestartPolicy): what happens when a guest
 * ends without being asked to. Pure. */
#pragma once
#include "machine.h"

#define MV_RESTART_BACKOFF_MAX_US  (G_GINT64_CONSTANT (300) * G_USEC_PER_SEC)

typedef enum {
  MV_END_STOPPED,       /* leave it Stopped: it ended cleanly, nothing restarts it */
  MV_END_FAILED,        /* leave it Failed */
  MV_END_RESTART,       /* Restarting, due at *restart_at */
} MvEndOutcome;

/* Decides what becomes of a machine whose guest ended: @clean when it
 * reported exit code 0. Restarts back off exponentially from @backoff_us,
 * doubling with each restart in a row, up to MV_RESTART_BACKOFF_MAX_US. */
MvEndOutcome mv_restart_decide (const MvSpec *spec, guint32 restart_count, gboolean clean,
                                gint64 now, gint64 backoff_us, gint64 *restart_at);

/* Whether the machine is started when the daemon starts. */
gboolean     mv_restart_starts_on_boot (const MvSpec *spec, gboolean stopped_by_user);
