/* Reading stats off the bus, and the rates between two readings. */
#include "stats-sample.h"

#include <string.h>

static int
read_u64 (sd_bus_message *m, guint64 *value)
{
  return sd_bus_message_read (m, "v", "t", value);
}

int
mv_stats_sample_read (sd_bus_message *m, MvStatsSample *sample)
{
  int r;

  memset (sample, 0, sizeof *sample);
  if ((r = sd_bus_message_enter_container (m, 'a', "{sv}")) < 0)
    return r;
  while ((r = sd_bus_message_enter_container (m, 'e', "sv")) > 0)
    {
      const char *key;

      if ((r = sd_bus_message_read (m, "s", &key)) < 0)
        return r;
      if (g_str_equal (key, "started_at"))
        r = sd_bus_message_read (m, "v", "x", &sample->started_at);
      else if (g_str_equal (key, "read_at"))
        r = sd_bus_message_read (m, "v", "x", &sample->read_at);
      else if (g_str_equal (key, "vcpus"))
        r = sd_bus_message_read (m, "v", "u", &sample->vcpus);
      else if (g_str_equal (key, "memory_bytes"))
        r = read_u64 (m, &sample->memory_bytes);
      else if (g_str_equal (key, "cpu_time_ns"))
        r = read_u64 (m, &sample->cpu_time_ns);
      else if (g_str_equal (key, "resident_memory_bytes"))
        r = read_u64 (m, &sample->resident_memory_bytes);
      else if (g_str_equal (key, "disk_read_bytes"))
        r = read_u64 (m, &sample->disk_read_bytes);
      else if (g_str_equal (key, "disk_written_bytes"))
        r = read_u64 (m, &sample->disk_written_bytes);
      else if (g_str_equal (key, "network_receive_bytes"))
        {
          r = read_u64 (m, &sample->network_receive_bytes);
          sample->has_network = TRUE;
        }
      else if (g_str_equal (key, "network_transmit_bytes"))
        {
          r = read_u64 (m, &sample->network_transmit_bytes);
          sample->has_network = TRUE;
        }
      else
        r = sd_bus_message_skip (m, "v");
      if (r < 0)
        return r;
      if ((r = sd_bus_message_exit_container (m)) < 0)
        return r;
    }
  if (r < 0)
    return r;
  return sd_bus_message_exit_container (m);
}

gboolean
mv_stats_rates (const MvStatsSample *before, const MvStatsSample *after, MvStatsRates *rates)
{
  gboolean network = before->has_network && after->has_network;
  double seconds;

  memset (rates, 0, sizeof *rates);
  if (before->started_at != after->started_at || after->read_at <= before->read_at)
    return FALSE;
  /* The other sign of a new VMM: its totals start again from nothing. */
  if (after->cpu_time_ns < before->cpu_time_ns ||
      after->disk_read_bytes < before->disk_read_bytes ||
      after->disk_written_bytes < before->disk_written_bytes ||
      (network && (after->network_receive_bytes < before->network_receive_bytes ||
                   after->network_transmit_bytes < before->network_transmit_bytes)))
    return FALSE;

  seconds = (double) (after->read_at - before->read_at) / G_USEC_PER_SEC;
  rates->cpu_percent = (double) (after->cpu_time_ns - before->cpu_time_ns) / 1e9 / seconds * 100.0;
  rates->disk_read_per_sec = (double) (after->disk_read_bytes - before->disk_read_bytes) / seconds;
  rates->disk_written_per_sec =
    (double) (after->disk_written_bytes - before->disk_written_bytes) / seconds;
  rates->has_network = network;
  if (network)
    {
      rates->network_receive_per_sec =
        (double) (after->network_receive_bytes - before->network_receive_bytes) / seconds;
      rates->network_transmit_per_sec =
        (double) (after->network_transmit_bytes - before->network_transmit_bytes) / seconds;
    }
  return TRUE;
}

int
mv_top_row_compare (gconstpointer a, gconstpointer b)
{
  const MvTopRow *x = *(const MvTopRow *const *) a;
  const MvTopRow *y = *(const MvTopRow *const *) b;

  if (x->has_rates != y->has_rates)
    return x->has_rates ? -1 : 1;
  if (x->has_rates && x->rates.cpu_percent != y->rates.cpu_percent)
    return x->rates.cpu_percent > y->rates.cpu_percent ? -1 : 1;
  return g_strcmp0 (x->name, y->name);
}
