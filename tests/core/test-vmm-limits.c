#include "core/vmm-limits.h"

#define MiB (G_GUINT64_CONSTANT (1) << 20)

static const struct {
  guint32 millicores;
  guint64 period_us;
  guint64 quota_us;
  gboolean whole;
} quota_rows[] = {
  { 100, 100000, 10000, FALSE },        /* the smallest a spec may ask: 10 ms per 100 ms */
  { 500, 100000, 50000, FALSE },
  { 1000, 100000, 100000, TRUE },
  { 1500, 100000, 150000, FALSE },      /* one and a half CPUs, not two */
  { 2000, 100000, 200000, TRUE },
  { 32000, 100000, 3200000, TRUE },     /* the largest */
  { 250, 1000000, 250000, FALSE },      /* another period: the same share */
  { 1, 100000, 100, FALSE },
};

static void
test_quota (void)
{
  for (guint i = 0; i < G_N_ELEMENTS (quota_rows); i++)
    {
      g_test_message ("%u millicores", quota_rows[i].millicores);
      g_assert_cmpuint (mv_cpu_quota_us (quota_rows[i].millicores, quota_rows[i].period_us), ==,
                        quota_rows[i].quota_us);
      g_assert_cmpint (mv_millicores_are_whole_cpus (quota_rows[i].millicores), ==,
                       quota_rows[i].whole);
    }
}

static void
test_limits (void)
{
  g_autoptr (MvSpec) spec = mv_spec_new ();
  MvVmmAllowance allowance = { 0, 128 * MiB, 300 };
  MvVmmLimits limits;

  spec->cpu_millicores = 1500;
  spec->memory_bytes = 256 * MiB;
  limits = mv_vmm_limits (spec, &allowance);
  g_assert_cmpuint (limits.cpu_period_us, ==, MV_CPU_PERIOD_US);
  g_assert_cmpuint (limits.cpu_period_us, ==, 100000);
  g_assert_cmpuint (limits.cpu_quota_us, ==, 150000);
  g_assert_cmpuint (limits.memory_max_bytes, ==, 384 * MiB);
  g_assert_cmpuint (limits.tasks_max, ==, 300);

  /* Room for hot-add: the VMM may come to hold the larger size. */
  spec->max_memory_bytes = 1024 * MiB;
  limits = mv_vmm_limits (spec, &allowance);
  g_assert_cmpuint (limits.memory_max_bytes, ==, 1152 * MiB);

  /* No wrap-around. */
  spec->max_memory_bytes = G_MAXUINT64 - MiB;
  limits = mv_vmm_limits (spec, &allowance);
  g_assert_cmpuint (limits.memory_max_bytes, ==, G_MAXUINT64);

  /* The VMM's own threads' share, on top of the guest's. */
  allowance.cpu_overhead_percent = 10;
  limits = mv_vmm_limits (spec, &allowance);
  g_assert_cmpuint (limits.cpu_quota_us, ==, 165000);
  spec->cpu_millicores = 100;
  allowance.cpu_overhead_percent = MV_VMM_CPU_OVERHEAD_PERCENT_MAX;
  limits = mv_vmm_limits (spec, &allowance);
  g_assert_cmpuint (limits.cpu_quota_us, ==, 20000);
  spec->cpu_millicores = MV_CPU_MILLICORES_MAX;
  limits = mv_vmm_limits (spec, &allowance);
  g_assert_cmpuint (limits.cpu_quota_us, ==, 6400000);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/vmm-limits/quota", test_quota);
  g_test_add_func ("/vmm-limits/limits", test_limits);
  return g_test_run ();
}
