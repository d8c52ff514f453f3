/* A cgroup per VMM, through the cgroup file system: each machine's VMM
 * and its helpers (virtiofsd) run in a group named by the machine's ID,
 * inside microvmd's own parent group, held to the limits of
 * core/vmm-limits.h (a CPU quota from the spec's millicores, its memory
 * plus an overhead, a number of tasks).
 *
 * Which file system is found once, at daemon start: cgroup v2 when the
 * file system root holds cgroup.controllers (the unified hierarchy), else
 * the v1 hierarchies of the cpu, cpuacct, memory and pids controllers
 * (each may be mounted alone or beside others, as cpu,cpuacct). The
 * parent group is [resources] cgroup-root: a relative path is inside the
 * daemon's own group of each hierarchy (so that whatever limits the
 * daemon bounds its VMMs too), an absolute one from the hierarchy's root.
 * Where no cpu controller can be written (nothing mounted, read-only, a v2
 * group of the daemon's that holds processes and so can have no
 * controllers below it), the host has no usable cgroups: VMMs run
 * without, and a spec whose millicores are not whole CPUs is refused.
 *
 * A machine's group is found again by its name: nothing is recorded, and
 * a restarted daemon reads and removes the groups of the VMMs it adopts.
 *
 * On a host whose PID 1 is systemd ([resources] cgroup-manager, "auto"
 * or "systemd"), systemd owns the tree: the group is the transient scope
 * microvmd-<id>.scope in machine.slice (systemd-scope.h), which systemd
 * makes, limits, and removes; the daemon puts each process in it before
 * the process goes on to exec, registers the VMM with machined, and reads
 * the scope's own files for CPU time. */
#pragma once
#include "core/spec.h"
#include "core/vmm-limits.h"

#include <glib.h>

#define MV_CGROUP_FS_ROOT        "/sys/fs/cgroup"
#define MV_CGROUP_ROOT_DEFAULT   "microvmd"

typedef struct _MvCgroups MvCgroups;

/* The cgroup.procs files of one machine's group, one per hierarchy,
 * opened before the VMM is forked: the VMM writes itself into each. */
#define MV_CGROUP_JOIN_MAX       4
typedef struct {
  int   fds[MV_CGROUP_JOIN_MAX];
  guint n_fds;
  /* Under systemd, no files: the scope the daemon puts the process in
   * (mv_cgroup_place()) while it waits to exec, and what the scope is
   * started with. NULL: none. */
  char       *unit;
  char       *description;
  MvVmmLimits limits;
} MvCgroupJoin;
#define MV_CGROUP_JOIN_INIT      { { -1, -1, -1, -1 }, 0, NULL, NULL, { 0, 0, 0, 0 } }

/* The cgroups under @fs_root (MV_CGROUP_FS_ROOT), the daemon's own groups
 * as @self_cgroup lists them (the text of /proc/self/cgroup), the parent
 * group @root (a relative or absolute path of safe names), and the
 * limits' configured parts. Makes the parent group in each hierarchy.
 * Never NULL: a host without usable cgroups gives an object that says why
 * (mv_cgroups_describe()). */
MvCgroups  *mv_cgroups_new (const char *fs_root, const char *self_cgroup, const char *root,
                            const MvVmmAllowance *allowance);
/* The same, for a host whose groups systemd makes: the scopes in
 * machine.slice of each hierarchy under @fs_root. */
MvCgroups  *mv_cgroups_new_systemd (const char *fs_root, const char *self_cgroup,
                                    const MvVmmAllowance *allowance);
/* [resources] cgroup-manager, cgroup-fs, cgroup-root,
 * vmm-cpu-overhead-percent, vmm-memory-overhead-bytes and vmm-tasks-max
 * of @config (may be NULL),
 * on this host. MV_ERROR_INVALID_ARGUMENT naming the key for a value out
 * of its range, or cgroup-manager=systemd where PID 1 is not systemd; a
 * host without usable cgroups is no error. */
MvCgroups  *mv_cgroups_new_from_config (GKeyFile *config, GError **error);
MvCgroups  *mv_cgroups_ref (MvCgroups *cgroups);
void        mv_cgroups_unref (MvCgroups *cgroups);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (MvCgroups, mv_cgroups_unref)

gboolean    mv_cgroups_usable (const MvCgroups *cgroups);
/* Whether systemd makes the groups (scopes), rather than the daemon. */
gboolean    mv_cgroups_by_systemd (const MvCgroups *cgroups);
/* One line for the log: the version and the parent groups, or why the
 * host's cgroups cannot be used. */
const char *mv_cgroups_describe (const MvCgroups *cgroups);
/* The directory of @machine_id's group in the hierarchy of @controller
 * ("cpu", "cpuacct", "memory", "pids"), made or not; NULL if there is
 * none for that controller. */
char       *mv_cgroups_dir (const MvCgroups *cgroups, const char *controller,
                            const char *machine_id);

/* On cgroup v2, the CPUs the VMMs' parent group may use
 * (cpuset.cpus.effective) as a CPU list, where that group has a cpuset;
 * else NULL (on v1 the VMMs stay in the daemon's cpuset, whose CPUs its
 * own affinity already shows). */
char       *mv_cgroups_cpuset (const MvCgroups *cgroups);

/* MV_ERROR_UNSUPPORTED naming cpu_millicores for a spec whose millicores
 * are not whole CPUs on a host where no quota can be set. */
gboolean    mv_cgroups_check (const MvCgroups *cgroups, const MvSpec *spec, GError **error);

/* Makes @machine_id's group (or takes the one there), writes @spec's
 * limits and opens its cgroup.procs files into @join. Without usable
 * cgroups, @join stays empty and this succeeds. */
gboolean    mv_cgroups_prepare (MvCgroups *cgroups, const char *machine_id, const MvSpec *spec,
                                MvCgroupJoin *join, GError **error);
/* Writes @spec's limits into @machine_id's group again, as a resize of
 * its running guest changes them; nothing without usable cgroups or
 * without the group. */
gboolean    mv_cgroups_update (MvCgroups *cgroups, const char *machine_id, const MvSpec *spec,
                               GError **error);
/* Moves the calling process into the group of @join: 0, or a negative
 * errno. Async-signal-safe: for a child forked from a threaded process. */
int         mv_cgroup_join (const MvCgroupJoin *join);
/* Has systemd put @pid, which waits to exec, into the scope of @join
 * (starting the scope if it does not run yet); nothing without a scope. */
gboolean    mv_cgroup_place (const MvCgroupJoin *join, int pid, GError **error);
/* Registers @machine_id's VMM @pid, already in its scope, with machined
 * under @name (or a name made from the ID where machined refuses @name);
 * nothing unless systemd makes the groups. */
gboolean    mv_cgroups_register (MvCgroups *cgroups, const char *machine_id, const char *name,
                                 int pid, GError **error);
void        mv_cgroup_join_clear (MvCgroupJoin *join);

/* Removes @machine_id's group once its tasks are gone, waiting a moment
 * for those on their way out; one that is not there is no error. */
gboolean    mv_cgroups_remove (MvCgroups *cgroups, const char *machine_id, GError **error);

/* The CPU time of every task that has run in @machine_id's group, in ns;
 * FALSE if there is no such group or no controller that counts it. */
gboolean    mv_cgroups_cpu_usage (const MvCgroups *cgroups, const char *machine_id,
                                  guint64 *cpu_ns);

/* Removes every group under the parent that no task is in: what VMMs
 * that ended while no daemon ran, or a crash, left. For daemon start,
 * before any VMM is started. */
void        mv_cgroups_sweep (MvCgroups *cgroups);
