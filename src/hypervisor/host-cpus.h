/* The host CPUs a machine's vCPUs may be pinned to (the spec's
 * cpu_affinity), and pinning a VMM's vCPU thread from outside it.
 *
 * A host CPU may be named when it is online
 * (/sys/devices/system/cpu/online) and the daemon may run on it itself
 * (its own sched_getaffinity(), which a cpuset cgroup of the daemon's
 * narrows; the VMMs it forks inherit that mask), and, on cgroup v2, when
 * the cpuset of the VMMs' parent group allows it (cgroup.h). Checked
 * when a spec is recorded and again before every start and restore, since
 * CPUs go offline and cpusets change. */
#pragma once
#include "core/spec.h"

#include <glib.h>
#include <sys/types.h>

#define MV_HOST_CPUS_ONLINE_PATH  "/sys/devices/system/cpu/online"

/* A set of host CPU numbers below MV_HOST_CPUS_MAX. */
typedef struct {
  guint64 words[MV_HOST_CPUS_MAX / 64];
} MvCpuSet;

void      mv_cpu_set_clear (MvCpuSet *set);
void      mv_cpu_set_add (MvCpuSet *set, guint cpu);
gboolean  mv_cpu_set_has (const MvCpuSet *set, guint cpu);
guint     mv_cpu_set_count (const MvCpuSet *set);
/* Keeps in @set only what @other has too. */
void      mv_cpu_set_intersect (MvCpuSet *set, const MvCpuSet *other);
/* Reads a CPU list as the kernel writes one ("0-3,8-11", "" for none,
 * spaces and a newline around it); FALSE for anything else, or a CPU at
 * or above MV_HOST_CPUS_MAX. */
gboolean  mv_cpu_set_parse (MvCpuSet *set, const char *text);
/* The same form back: "0-3,8". */
char     *mv_cpu_set_to_string (const MvCpuSet *set);

/* What this host lets a vCPU be pinned to. */
typedef struct {
  MvCpuSet online;      /* online CPUs */
  MvCpuSet allowed;     /* of those, the ones the daemon and its VMMs may use */
} MvHostCpus;

/* Reads the online CPUs from @online_path (MV_HOST_CPUS_ONLINE_PATH), the
 * daemon's own affinity, and @cpuset_text (may be NULL: none), a further
 * CPU list that narrows them. MV_ERROR_FAILED if the host cannot be read. */
gboolean  mv_host_cpus_read (const char *online_path, const char *cpuset_text,
                             MvHostCpus *host, GError **error);
/* Each host CPU of @affinity (MvCpuAffinity*) is online and allowed in
 * @host: MV_ERROR_INVALID_ARGUMENT naming cpu_affinity[i].host_cpus, the
 * CPU, and what this host has. Pure. */
gboolean  mv_host_cpus_check (const MvHostCpus *host, const GPtrArray *affinity, GError **error);

/* Pins thread @tid of process @pid to @host_cpus (guint32): it must be a
 * thread of @pid (MV_ERROR_INVALID_STATE if it is not, or is gone). The
 * caller needs the right to (root, or CAP_SYS_NICE, or the same user). */
gboolean  mv_host_cpus_pin_thread (pid_t pid, pid_t tid, const GArray *host_cpus,
                                   GError **error);
/* The CPUs thread @tid of process @pid may run on, as the kernel has it. */
gboolean  mv_host_cpus_thread_affinity (pid_t pid, pid_t tid, MvCpuSet *set, GError **error);
