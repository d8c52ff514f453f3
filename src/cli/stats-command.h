/* What stats, top and metrics share: reading every machine's stats. */
#pragma once

#include "microvmctl.h"
#include "stats-sample.h"

void mv_top_row_free (gpointer row);

/* Fills ROWS with an MvTopRow for each machine the daemon has stats of
 * (Manager.GetAllStats), with its name and state, in name order. */
int mv_read_all_stats (MvCtl *ctl, GPtrArray *rows, sd_bus_error *error);

/* "12.34s": a CPU time in ns as seconds. */
char *mv_format_cpu_time (guint64 ns);

/* top's --interval (seconds) and --iterations, at most. */
#define MV_TOP_INTERVAL_MAX   3600
#define MV_TOP_ITERATIONS_MAX 1000000
