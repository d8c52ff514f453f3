#include "vmm-limits.h"

guint64
mv_cpu_quota_us (guint32 millicores, guint64 period_us)
{
  return (guint64) millicores * period_us / 1000;
}

gboolean
mv_millicores_are_whole_cpus (guint32 millicores)
{
  return millicores % 1000 == 0;
}

MvVmmLimits
mv_vmm_limits (const MvSpec *spec, const MvVmmAllowance *allowance)
{
  guint64 guest = MAX (spec->memory_bytes, spec->max_memory_bytes);
  guint64 overhead = allowance->memory_overhead_bytes;

  /* At most 32,000 millicores and 100 percent more: no overflow. */
  return (MvVmmLimits) {
    .cpu_quota_us = mv_cpu_quota_us (spec->cpu_millicores, MV_CPU_PERIOD_US) *
                    (100 + allowance->cpu_overhead_percent) / 100,
    .cpu_period_us = MV_CPU_PERIOD_US,
    .memory_max_bytes = guest > G_MAXUINT64 - overhead ? G_MAXUINT64 : guest + overhead,
    .tasks_max = allowance->tasks_max,
  };
}
