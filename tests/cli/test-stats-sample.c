/* top's arithmetic: rates from two samples, nothing across two VMMs, and
 * the busiest machine first. */
#include <glib.h>

#include "stats-sample.h"

static MvStatsSample
sample (gint64 read_at, guint64 cpu_ns)
{
  MvStatsSample s = {
    .started_at = 1000,
    .read_at = read_at,
    .cpu_time_ns = cpu_ns,
    .resident_memory_bytes = 64 << 20,
    .disk_read_bytes = 4096,
    .disk_written_bytes = 8192,
  };
  return s;
}

static void
test_rates (void)
{
  MvStatsSample before = sample (10 * G_USEC_PER_SEC, 5000000000);
  /* Two seconds later, 1.5 s more CPU: 75 % of one CPU. */
  MvStatsSample after = sample (12 * G_USEC_PER_SEC, 6500000000);
  MvStatsRates rates;

  after.disk_read_bytes += 2 * 1024 * 1024;
  after.disk_written_bytes += 1000;
  g_assert_true (mv_stats_rates (&before, &after, &rates));
  g_assert_cmpfloat_with_epsilon (rates.cpu_percent, 75.0, 1e-9);
  g_assert_cmpfloat_with_epsilon (rates.disk_read_per_sec, 1024 * 1024, 1e-6);
  g_assert_cmpfloat_with_epsilon (rates.disk_written_per_sec, 500, 1e-6);
  g_assert_false (rates.has_network);
}

static void
test_rates_many_cpus (void)
{
  /* Four vCPUs busy for half a second: 400 %. */
  MvStatsSample before = sample (0, 0);
  MvStatsSample after = sample (G_USEC_PER_SEC / 2, 2000000000);
  MvStatsRates rates;

  g_assert_true (mv_stats_rates (&before, &after, &rates));
  g_assert_cmpfloat_with_epsilon (rates.cpu_percent, 400.0, 1e-9);
}

static void
test_rates_network (void)
{
  MvStatsSample before = sample (0, 0), after = sample (4 * G_USEC_PER_SEC, 0);
  MvStatsRates rates;

  before.has_network = after.has_network = TRUE;
  before.network_receive_bytes = 100;
  after.network_receive_bytes = 100 + 4000;
  after.network_transmit_bytes = 400;
  g_assert_true (mv_stats_rates (&before, &after, &rates));
  g_assert_true (rates.has_network);
  g_assert_cmpfloat_with_epsilon (rates.network_receive_per_sec, 1000, 1e-9);
  g_assert_cmpfloat_with_epsilon (rates.network_transmit_per_sec, 100, 1e-9);

  /* A machine that joined a network since: no network rates, the rest. */
  before.has_network = FALSE;
  g_assert_true (mv_stats_rates (&before, &after, &rates));
  g_assert_false (rates.has_network);
}

static void
test_new_vmm (void)
{
  MvStatsSample before = sample (10 * G_USEC_PER_SEC, 9000000000);
  MvStatsSample after = sample (11 * G_USEC_PER_SEC, 9500000000);
  MvStatsRates rates;

  /* Another VMM, by its start time. */
  after.started_at = before.started_at + 1;
  g_assert_false (mv_stats_rates (&before, &after, &rates));

  /* The same start time, but totals that went backwards. */
  after = sample (11 * G_USEC_PER_SEC, 100);
  g_assert_false (mv_stats_rates (&before, &after, &rates));
  after = sample (11 * G_USEC_PER_SEC, 9500000000);
  after.disk_read_bytes = 0;
  g_assert_false (mv_stats_rates (&before, &after, &rates));
  after = sample (11 * G_USEC_PER_SEC, 9500000000);
  after.disk_written_bytes = 0;
  g_assert_false (mv_stats_rates (&before, &after, &rates));
  after = sample (11 * G_USEC_PER_SEC, 9500000000);
  before.has_network = after.has_network = TRUE;
  before.network_transmit_bytes = 10;
  g_assert_false (mv_stats_rates (&before, &after, &rates));
  before.network_transmit_bytes = 0;
  before.network_receive_bytes = 10;
  g_assert_false (mv_stats_rates (&before, &after, &rates));
}

static void
test_no_time_passed (void)
{
  MvStatsSample before = sample (10 * G_USEC_PER_SEC, 0);
  MvStatsSample same = sample (10 * G_USEC_PER_SEC, 10);
  MvStatsSample earlier = sample (9 * G_USEC_PER_SEC, 10);
  MvStatsRates rates;

  g_assert_false (mv_stats_rates (&before, &same, &rates));
  g_assert_false (mv_stats_rates (&before, &earlier, &rates));
}

static MvTopRow *
row (const char *name, gboolean has_rates, double cpu)
{
  MvTopRow *r = g_new0 (MvTopRow, 1);

  r->name = g_strdup (name);
  r->has_rates = has_rates;
  r->rates.cpu_percent = cpu;
  return r;
}

static void
row_free (gpointer p)
{
  MvTopRow *r = p;

  g_free (r->name);
  g_free (r);
}

static void
test_sort (void)
{
  g_autoptr (GPtrArray) rows = g_ptr_array_new_with_free_func (row_free);
  static const char *const expected[] = { "busy", "a-idle", "b-idle", "fresh", "new" };

  g_ptr_array_add (rows, row ("new", FALSE, 0));
  g_ptr_array_add (rows, row ("b-idle", TRUE, 0.5));
  g_ptr_array_add (rows, row ("fresh", FALSE, 0));
  g_ptr_array_add (rows, row ("busy", TRUE, 180.0));
  g_ptr_array_add (rows, row ("a-idle", TRUE, 0.5));
  g_ptr_array_sort (rows, mv_top_row_compare);
  for (guint i = 0; i < G_N_ELEMENTS (expected); i++)
    g_assert_cmpstr (((MvTopRow *) rows->pdata[i])->name, ==, expected[i]);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/stats-sample/rates", test_rates);
  g_test_add_func ("/stats-sample/rates-many-cpus", test_rates_many_cpus);
  g_test_add_func ("/stats-sample/rates-network", test_rates_network);
  g_test_add_func ("/stats-sample/new-vmm", test_new_vmm);
  g_test_add_func ("/stats-sample/no-time-passed", test_no_time_passed);
  g_test_add_func ("/stats-sample/sort", test_sort);
  return g_test_run ();
}
