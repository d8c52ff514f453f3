/* One reading of a machine's stats (Machine.GetStats, Manager.GetAllStats)
 * and the rates between two of them, for stats, top and metrics. */
#pragma once

#include <glib.h>
#include <systemd/sd-bus.h>

typedef struct {
  gint64  started_at;   /* µs since the epoch: which VMM the totals are of */
  gint64  read_at;      /* µs since the epoch */
  guint32 vcpus;
  guint64 memory_bytes; /* guest memory held */
  guint64 cpu_time_ns;
  guint64 resident_memory_bytes;
  guint64 disk_read_bytes;
  guint64 disk_written_bytes;
  gboolean has_network;
  guint64 network_receive_bytes;
  guint64 network_transmit_bytes;
} MvStatsSample;

/* What a machine used per second between two samples. */
typedef struct {
  double cpu_percent;             /* 100 = one CPU all the time */
  double disk_read_per_sec;       /* bytes */
  double disk_written_per_sec;
  gboolean has_network;
  double network_receive_per_sec;
  double network_transmit_per_sec;
} MvStatsRates;

/* Reads an a{sv} of stats (or of a GetMetrics sample) from M into SAMPLE;
 * keys it does not know are skipped, missing ones stay 0. */
int mv_stats_sample_read (sd_bus_message *m, MvStatsSample *sample);

/* The rates from BEFORE to AFTER. FALSE when there are none to give: the
 * samples are of different VMMs (started_at differs, or a total went
 * backwards, as after a restart) or AFTER is not later than BEFORE. */
gboolean mv_stats_rates (const MvStatsSample *before,
                         const MvStatsSample *after,
                         MvStatsRates *rates);

/* A row of top: a machine, its last sample and the rates to it, if any. */
typedef struct {
  char *id;
  char *name;
  char *state;
  MvStatsSample sample;
  gboolean has_rates;
  MvStatsRates rates;
} MvTopRow;

/* For g_ptr_array_sort() of MvTopRow pointers: the busiest first, rows
 * without rates last, then by name. */
int mv_top_row_compare (gconstpointer a, gconstpointer b);
