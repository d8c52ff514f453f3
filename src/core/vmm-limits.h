/* What a VMM's cgroup holds it to (seeds 000 and 004: cpu_millicores is
 * a CPU quota): a share of CPU time from the spec's millicores plus what
 * the VMM's own threads need, its guest's memory plus what the VMM itself
 * needs, and a number of tasks. Pure arithmetic; hypervisor/cgroup.c
 * writes the numbers. */
#pragma once
#include "core/spec.h"

#include <glib.h>

/* The scheduler's accounting period the quota is a share of (cgroup v2
 * cpu.max, v1 cpu.cfs_period_us): 100 ms, the kernel's own default. */
#define MV_CPU_PERIOD_US                    G_GUINT64_CONSTANT (100000)

/* [resources] vmm-cpu-overhead-percent: beyond the guest's millicores,
 * the share more that the VMM's own threads (its device emulation, I/O
 * and monitor) may take, from 0 to 100 percent. The guest's vCPUs are
 * the VMM's threads too: without it, a guest that keeps its vCPUs busy
 * would lose to its own VMM's work the time its millicores promise. */
#define MV_VMM_CPU_OVERHEAD_PERCENT_DEFAULT 10
#define MV_VMM_CPU_OVERHEAD_PERCENT_MAX     100

/* [resources] vmm-memory-overhead-bytes: beyond the guest's memory, what
 * a VMM and its helpers (virtiofsd) may take, from 16 MiB to 64 GiB. */
#define MV_VMM_MEMORY_OVERHEAD_DEFAULT      (G_GUINT64_CONSTANT (256) << 20)
#define MV_VMM_MEMORY_OVERHEAD_MIN          (G_GUINT64_CONSTANT (16) << 20)
#define MV_VMM_MEMORY_OVERHEAD_MAX          (G_GUINT64_CONSTANT (64) << 30)

/* [resources] vmm-tasks-max: the VMM's and its helpers' processes and
 * threads together, from 16 to 65536. */
#define MV_VMM_TASKS_MAX_DEFAULT            256
#define MV_VMM_TASKS_MAX_MIN                16
#define MV_VMM_TASKS_MAX_MAX                65536

/* What [resources] allows each VMM beyond its guest's own share. */
typedef struct {
  guint64 cpu_overhead_percent;
  guint64 memory_overhead_bytes;
  guint64 tasks_max;
} MvVmmAllowance;
#define MV_VMM_ALLOWANCE_DEFAULT { MV_VMM_CPU_OVERHEAD_PERCENT_DEFAULT, \
                                   MV_VMM_MEMORY_OVERHEAD_DEFAULT, MV_VMM_TASKS_MAX_DEFAULT }

typedef struct {
  guint64 cpu_quota_us;        /* CPU time per period, all CPUs together */
  guint64 cpu_period_us;
  guint64 memory_max_bytes;
  guint64 tasks_max;
} MvVmmLimits;

/* CPU time per @period_us that @millicores buy: 1000 millicores are one
 * CPU for the whole period, 1500 one and a half. */
guint64     mv_cpu_quota_us (guint32 millicores, guint64 period_us);

/* Whether @millicores is a whole number of CPUs, which vCPUs alone give
 * without a quota. */
gboolean    mv_millicores_are_whole_cpus (guint32 millicores);

/* The limits of the VMM that runs @spec: its millicores and the
 * allowance's percent more, as a quota of MV_CPU_PERIOD_US; the largest
 * memory its guest may have (its boot size, or the room for hot-add if
 * that is larger) plus the allowance's overhead; the allowance's tasks. */
MvVmmLimits mv_vmm_limits (const MvSpec *spec, const MvVmmAllowance *allowance);
