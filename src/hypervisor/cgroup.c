/* Cgroups per VMM through the cgroup file system (cgroup.h). */
#include "cgroup.h"
#include "systemd-scope.h"
#include "core/errors.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <string.h>
#include <unistd.h>

/* How long a removal waits for the tasks of a group to be gone. */
#define REMOVE_WAIT_US   (2 * G_USEC_PER_SEC)
#define REMOVE_POLL_US   10000

typedef enum {
  CG_CPU,
  CG_CPUACCT,
  CG_MEMORY,
  CG_PIDS,
  CG_N,
} Controller;

static const char *const controller_names[CG_N] = { "cpu", "cpuacct", "memory", "pids" };

struct _MvCgroups {
  gint       ref_count;
  gboolean   v2;
  gboolean   systemd;            /* the groups are systemd's scopes */
  gboolean   usage_v2;           /* CPU time from cpu.stat, as v2 counts it */
  /* microvmd's parent group of each controller's hierarchy; NULL: none.
   * On v2 all are one directory; on v1 two may share one (cpu,cpuacct). */
  char      *parent[CG_N];
  GPtrArray *parents;            /* char*: the distinct ones */
  MvVmmAllowance allowance;
  char      *description;
};

/* The name of @machine_id's group below the parent: its ID, or under
 * systemd its scope's unit name. */
static char *
leaf (const MvCgroups *self, const char *machine_id)
{
  return self->systemd ? mv_scope_unit_name (machine_id) : g_strdup (machine_id);
}

static char *
group_path (const MvCgroups *self, const char *parent, const char *machine_id)
{
  g_autofree char *name = leaf (self, machine_id);

  return g_build_filename (parent, name, NULL);
}

/* ---- files ---- */

static gboolean
write_file (const char *dir, const char *name, const char *text, GError **error)
{
  g_autofree char *path = g_build_filename (dir, name, NULL);
  size_t len = strlen (text);
  int fd = open (path, O_WRONLY | O_TRUNC | O_CLOEXEC | O_NOFOLLOW);
  ssize_t n;
  int saved;

  if (fd < 0)
    {
      saved = errno;
      return mv_error_set (error, MV_ERROR_FAILED, "Could not open %s: %s", path,
                           g_strerror (saved));
    }
  n = write (fd, text, len);
  saved = errno;
  close (fd);
  if (n != (ssize_t) len)
    return mv_error_set (error, MV_ERROR_FAILED, "Could not write '%s' to %s: %s", text, path,
                         n < 0 ? g_strerror (saved) : "short write");
  return TRUE;
}

static gboolean
write_number (const char *dir, const char *name, guint64 value, GError **error)
{
  g_autofree char *text = g_strdup_printf ("%" G_GUINT64_FORMAT, value);

  return write_file (dir, name, text, error);
}

static gboolean
safe_root (const char *root)
{
  g_auto (GStrv) parts = NULL;

  if (!root || !*root)
    return FALSE;
  parts = g_strsplit (root[0] == '/' ? root + 1 : root, "/", -1);
  for (char **p = parts; *p; p++)
    {
      if (!**p || g_str_equal (*p, ".") || g_str_equal (*p, ".."))
        return FALSE;
      for (const char *c = *p; *c; c++)
        if (!g_ascii_isalnum (*c) && *c != '.' && *c != '_' && *c != '-')
          return FALSE;
    }
  return TRUE;
}

/* The daemon's own group in the hierarchy that /proc/self/cgroup lists
 * with @controllers ("" for v2), as a path from its root; NULL if none. */
static char *
own_group (const char *self_cgroup, const char *controllers)
{
  g_auto (GStrv) lines = g_strsplit (self_cgroup ? self_cgroup : "", "\n", -1);

  for (char **line = lines; *line; line++)
    {
      g_auto (GStrv) fields = g_strsplit (*line, ":", 3);

      if (g_strv_length (fields) == 3 && g_str_equal (fields[1], controllers) &&
          fields[2][0] == '/')
        return g_strdup (fields[2]);
    }
  return NULL;
}

static char *
parent_of (const char *hierarchy, const char *own, const char *root)
{
  return root[0] == '/' ? g_build_filename (hierarchy, root, NULL)
                        : g_build_filename (hierarchy, own, root, NULL);
}

/* ---- finding them ---- */

/* The v1 hierarchies: each line of /proc/self/cgroup names the
 * controllers of one, mounted (as systemd and cgroupfs-mount do) at a
 * directory of @fs_root named by them. */
static gboolean
find_v1 (MvCgroups *self, const char *fs_root, const char *self_cgroup, const char *root,
         GError **error)
{
  g_auto (GStrv) lines = g_strsplit (self_cgroup ? self_cgroup : "", "\n", -1);

  for (char **line = lines; *line; line++)
    {
      g_auto (GStrv) fields = g_strsplit (*line, ":", 3);
      g_auto (GStrv) names = NULL;
      g_autofree char *hierarchy = NULL;
      g_autofree char *parent = NULL;

      if (g_strv_length (fields) != 3 || !fields[1][0] || fields[2][0] != '/')
        continue;
      hierarchy = g_build_filename (fs_root, fields[1], NULL);
      if (!g_file_test (hierarchy, G_FILE_TEST_IS_DIR))
        continue;
      names = g_strsplit (fields[1], ",", -1);
      for (guint c = 0; c < CG_N; c++)
        if (!self->parent[c] && g_strv_contains ((const char *const *) names, controller_names[c]))
          {
            if (!parent)
              parent = parent_of (hierarchy, fields[2], root);
            self->parent[c] = g_strdup (parent);
          }
    }
  if (!self->parent[CG_CPU])
    return mv_error_set (error, MV_ERROR_UNSUPPORTED,
                         "no cpu controller is mounted under %s", fs_root);
  /* systemd makes its slice as the first scope in it starts. */
  for (guint c = 0; c < CG_N && !self->systemd; c++)
    if (self->parent[c] && g_mkdir_with_parents (self->parent[c], 0755) < 0)
      {
        int saved = errno;

        if (c == CG_CPU)
          return mv_error_set (error, MV_ERROR_UNSUPPORTED, "could not make %s: %s",
                               self->parent[c], g_strerror (saved));
        g_clear_pointer (&self->parent[c], g_free);
      }
  return TRUE;
}

/* Gives the groups below @dir each controller @enabled has, where it
 * can; what it could not is cleared in @enabled. */
static void
enable_controllers (const char *dir, gboolean enabled[CG_N])
{
  for (guint c = 0; c < CG_N; c++)
    {
      g_autofree char *text = g_strconcat ("+", controller_names[c], NULL);

      /* cpuacct is v1's: v2 counts CPU time in every group. */
      if (c == CG_CPUACCT || !enabled[c])
        continue;
      if (!write_file (dir, "cgroup.subtree_control", text, NULL))
        enabled[c] = FALSE;
    }
}

/* v2: the parent group, with the controllers given to each group below
 * it on every level down from the daemon's own group (or the root). A
 * group with processes of its own has no controllers below it, so the
 * daemon's group must be the root or hold nothing but groups. */
static gboolean
find_v2 (MvCgroups *self, const char *fs_root, const char *self_cgroup, const char *root,
         GError **error)
{
  g_autofree char *own = own_group (self_cgroup, "");
  g_autofree char *joined = g_build_filename (fs_root, root[0] != '/' && own ? own : "/", NULL);
  g_autofree char *top = g_canonicalize_filename (joined, NULL);
  g_autofree char *available = NULL;
  g_autofree char *path = g_build_filename (top, "cgroup.controllers", NULL);
  g_auto (GStrv) have = NULL;
  g_auto (GStrv) parts = g_strsplit (root[0] == '/' ? root + 1 : root, "/", -1);
  g_autoptr (GString) dir = g_string_new (top);
  gboolean enabled[CG_N];

  if (!g_file_get_contents (path, &available, NULL, NULL))
    return mv_error_set (error, MV_ERROR_UNSUPPORTED, "could not read %s", path);
  have = g_strsplit_set (g_strstrip (available), " ", -1);
  for (guint c = 0; c < CG_N; c++)
    enabled[c] = c == CG_CPUACCT || g_strv_contains ((const char *const *) have,
                                                     controller_names[c]);
  if (!enabled[CG_CPU])
    return mv_error_set (error, MV_ERROR_UNSUPPORTED, "%s has no cpu controller", top);
  for (char **p = parts; *p; p++)
    {
      enable_controllers (dir->str, enabled);
      if (dir->str[dir->len - 1] != '/')
        g_string_append_c (dir, '/');
      g_string_append (dir, *p);
      if (g_mkdir (dir->str, 0755) < 0 && errno != EEXIST)
        {
          int saved = errno;
          return mv_error_set (error, MV_ERROR_UNSUPPORTED, "could not make %s: %s", dir->str,
                               g_strerror (saved));
        }
    }
  enable_controllers (dir->str, enabled);
  if (!enabled[CG_CPU])
    return mv_error_set (error, MV_ERROR_UNSUPPORTED,
                         "could not give the groups below %s the cpu controller (a group "
                         "that holds processes cannot)", top);
  for (guint c = 0; c < CG_N; c++)
    if (enabled[c])
      self->parent[c] = g_strdup (dir->str);
  return TRUE;
}

/* v2 under systemd: its slice, below which systemd gives each scope the
 * controllers its limits need. */
static gboolean
find_v2_systemd (MvCgroups *self, const char *fs_root, GError **error)
{
  g_autofree char *path = g_build_filename (fs_root, "cgroup.controllers", NULL);
  g_autofree char *available = NULL;
  g_autofree char *slice = g_build_filename (fs_root, MV_SCOPE_SLICE, NULL);
  g_auto (GStrv) have = NULL;

  if (!g_file_get_contents (path, &available, NULL, NULL))
    return mv_error_set (error, MV_ERROR_UNSUPPORTED, "could not read %s", path);
  have = g_strsplit_set (g_strstrip (available), " ", -1);
  for (guint c = 0; c < CG_N; c++)
    if (c == CG_CPUACCT || g_strv_contains ((const char *const *) have, controller_names[c]))
      self->parent[c] = g_strdup (slice);
  if (!g_strv_contains ((const char *const *) have, "cpu"))
    return mv_error_set (error, MV_ERROR_UNSUPPORTED, "%s has no cpu controller", fs_root);
  return TRUE;
}

/* v1 under systemd with the v2 tree beside it (the hybrid layout):
 * systemd keeps cpuacct to itself there, but v2 counts every group's CPU
 * time, so the scope's is read from its group in the v2 tree. */
static void
use_hybrid_usage (MvCgroups *self, const char *fs_root)
{
  g_autofree char *unified = g_build_filename (fs_root, "unified", NULL);
  g_autofree char *marker = g_build_filename (unified, "cgroup.controllers", NULL);

  if (!g_file_test (marker, G_FILE_TEST_EXISTS))
    return;
  g_free (self->parent[CG_CPUACCT]);
  self->parent[CG_CPUACCT] = g_build_filename (unified, MV_SCOPE_SLICE, NULL);
  self->usage_v2 = TRUE;
}

static void
describe (MvCgroups *self)
{
  g_autoptr (GString) text = g_string_new (self->systemd ? "systemd scopes, " : "");

  g_string_append (text, self->v2 ? "cgroup v2:" : "cgroup v1:");

  for (guint c = 0; c < CG_N; c++)
    g_string_append_printf (text, " %s %s%s", controller_names[c],
                            self->parent[c] ? self->parent[c] : "(none)",
                            c + 1 < CG_N ? "," : "");
  self->description = g_string_free (g_steal_pointer (&text), FALSE);
}

static MvCgroups *
cgroups_new (const char *fs_root, const char *self_cgroup, const char *root, gboolean systemd,
             const MvVmmAllowance *allowance)
{
  MvCgroups *self = g_new0 (MvCgroups, 1);
  g_autofree char *unified = g_build_filename (fs_root, "cgroup.controllers", NULL);
  g_autoptr (GError) local = NULL;
  gboolean found;

  self->ref_count = 1;
  self->allowance = *allowance;
  self->parents = g_ptr_array_new_with_free_func (g_free);
  self->v2 = g_file_test (unified, G_FILE_TEST_EXISTS);
  self->systemd = systemd;
  if (!safe_root (root))
    found = mv_error_set (&local, MV_ERROR_INVALID_ARGUMENT, "'%s' is not a group's path", root);
  else if (!g_file_test (fs_root, G_FILE_TEST_IS_DIR))
    found = mv_error_set (&local, MV_ERROR_UNSUPPORTED, "%s is not mounted", fs_root);
  else if (systemd && self->v2)
    found = find_v2_systemd (self, fs_root, &local);
  else
    found = self->v2 ? find_v2 (self, fs_root, self_cgroup, root, &local)
                     : find_v1 (self, fs_root, self_cgroup, root, &local);
  self->usage_v2 = self->v2;
  if (found && systemd && !self->v2)
    use_hybrid_usage (self, fs_root);
  if (!found)
    {
      for (guint c = 0; c < CG_N; c++)
        g_clear_pointer (&self->parent[c], g_free);
      self->description = g_strdup_printf ("no usable cgroups (%s): VMMs run without a CPU "
                                           "quota, memory or task limit", local->message);
      return self;
    }
  for (guint c = 0; c < CG_N; c++)
    if (self->parent[c] &&
        !g_ptr_array_find_with_equal_func (self->parents, self->parent[c], g_str_equal, NULL))
      g_ptr_array_add (self->parents, g_strdup (self->parent[c]));
  describe (self);
  return self;
}

MvCgroups *
mv_cgroups_new (const char *fs_root, const char *self_cgroup, const char *root,
                const MvVmmAllowance *allowance)
{
  return cgroups_new (fs_root, self_cgroup, root, FALSE, allowance);
}

MvCgroups *
mv_cgroups_new_systemd (const char *fs_root, const char *self_cgroup,
                        const MvVmmAllowance *allowance)
{
  /* Each hierarchy's own slice, from its root: where systemd puts it. */
  return cgroups_new (fs_root, self_cgroup, "/" MV_SCOPE_SLICE, TRUE, allowance);
}

static gboolean
read_size (GKeyFile *config, const char *key, guint64 min, guint64 max, guint64 *out,
           GError **error)
{
  g_autoptr (GError) local = NULL;
  guint64 v;

  if (!config || !g_key_file_has_key (config, "resources", key, NULL))
    return TRUE;
  v = g_key_file_get_uint64 (config, "resources", key, &local);
  if (local || v < min || v > max)
    return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT,
                         "[resources] %s must be %" G_GUINT64_FORMAT " to %" G_GUINT64_FORMAT,
                         key, min, max);
  *out = v;
  return TRUE;
}

MvCgroups *
mv_cgroups_new_from_config (GKeyFile *config, GError **error)
{
  g_autofree char *root = config ? g_key_file_get_string (config, "resources", "cgroup-root",
                                                          NULL)
                                 : NULL;
  g_autofree char *fs = config ? g_key_file_get_string (config, "resources", "cgroup-fs", NULL)
                               : NULL;
  g_autofree char *manager = config ? g_key_file_get_string (config, "resources",
                                                             "cgroup-manager", NULL)
                                    : NULL;
  gboolean systemd = mv_scope_host_has_systemd ();
  g_autofree char *self_cgroup = NULL;
  MvVmmAllowance allowance = MV_VMM_ALLOWANCE_DEFAULT;

  if (root)
    g_strstrip (root);
  if (root && !safe_root (root))
    {
      mv_error_set (error, MV_ERROR_INVALID_ARGUMENT,
                    "[resources] cgroup-root: '%s' is not a path of names of letters, digits, "
                    "'.', '_' and '-'", root);
      return NULL;
    }
  if (fs && !g_path_is_absolute (g_strstrip (fs)))
    {
      mv_error_set (error, MV_ERROR_INVALID_ARGUMENT,
                    "[resources] cgroup-fs: '%s' is not an absolute path", fs);
      return NULL;
    }
  if (manager && g_str_equal (g_strstrip (manager), "cgroupfs"))
    systemd = FALSE;
  else if (manager && g_str_equal (manager, "systemd") && !systemd)
    {
      mv_error_set (error, MV_ERROR_INVALID_ARGUMENT,
                    "[resources] cgroup-manager: systemd, but PID 1 is not systemd");
      return NULL;
    }
  else if (manager && !g_str_equal (manager, "systemd") && !g_str_equal (manager, "auto"))
    {
      mv_error_set (error, MV_ERROR_INVALID_ARGUMENT,
                    "[resources] cgroup-manager: '%s' is none of auto, systemd and cgroupfs",
                    manager);
      return NULL;
    }
  if (!read_size (config, "vmm-cpu-overhead-percent", 0, MV_VMM_CPU_OVERHEAD_PERCENT_MAX,
                  &allowance.cpu_overhead_percent, error) ||
      !read_size (config, "vmm-memory-overhead-bytes", MV_VMM_MEMORY_OVERHEAD_MIN,
                  MV_VMM_MEMORY_OVERHEAD_MAX, &allowance.memory_overhead_bytes, error) ||
      !read_size (config, "vmm-tasks-max", MV_VMM_TASKS_MAX_MIN, MV_VMM_TASKS_MAX_MAX,
                  &allowance.tasks_max, error))
    return NULL;
  g_file_get_contents ("/proc/self/cgroup", &self_cgroup, NULL, NULL);
  if (systemd)
    return mv_cgroups_new_systemd (fs ? fs : MV_CGROUP_FS_ROOT, self_cgroup, &allowance);
  return mv_cgroups_new (fs ? fs : MV_CGROUP_FS_ROOT, self_cgroup, root ? root : MV_CGROUP_ROOT_DEFAULT,
                         &allowance);
}

MvCgroups *
mv_cgroups_ref (MvCgroups *cgroups)
{
  g_atomic_int_inc (&cgroups->ref_count);
  return cgroups;
}

void
mv_cgroups_unref (MvCgroups *cgroups)
{
  if (!cgroups || !g_atomic_int_dec_and_test (&cgroups->ref_count))
    return;
  for (guint c = 0; c < CG_N; c++)
    g_free (cgroups->parent[c]);
  g_ptr_array_unref (cgroups->parents);
  g_free (cgroups->description);
  g_free (cgroups);
}

gboolean
mv_cgroups_usable (const MvCgroups *cgroups)
{
  return cgroups && cgroups->parent[CG_CPU] != NULL;
}

gboolean
mv_cgroups_by_systemd (const MvCgroups *cgroups)
{
  return mv_cgroups_usable (cgroups) && cgroups->systemd;
}

const char *
mv_cgroups_describe (const MvCgroups *cgroups)
{
  return cgroups->description;
}

char *
mv_cgroups_dir (const MvCgroups *cgroups, const char *controller, const char *machine_id)
{
  for (guint c = 0; cgroups && c < CG_N; c++)
    if (g_str_equal (controller, controller_names[c]) && cgroups->parent[c])
      return group_path (cgroups, cgroups->parent[c], machine_id);
  return NULL;
}

gboolean
mv_cgroups_check (const MvCgroups *cgroups, const MvSpec *spec, GError **error)
{
  if (mv_cgroups_usable (cgroups) || mv_millicores_are_whole_cpus (spec->cpu_millicores))
    return TRUE;
  return mv_error_set (error, MV_ERROR_UNSUPPORTED,
                       "cpu_millicores: %u is not a whole number of CPUs, and this host has no "
                       "usable cgroups to hold a VMM to a CPU quota; give a multiple of 1000",
                       spec->cpu_millicores);
}

char *
mv_cgroups_cpuset (const MvCgroups *cgroups)
{
  g_autofree char *path = NULL;
  char *text = NULL;

  if (!mv_cgroups_usable (cgroups) || !cgroups->v2)
    return NULL;
  path = g_build_filename (cgroups->parent[CG_CPU], "cpuset.cpus.effective", NULL);
  if (!g_file_get_contents (path, &text, NULL, NULL))
    return NULL;
  return g_strstrip (text);
}

/* ---- one machine's group ---- */

static gboolean
write_limits (MvCgroups *self, const char *machine_id, const MvVmmLimits *limits, GError **error)
{
  g_autofree char *cpu = group_path (self, self->parent[CG_CPU], machine_id);
  g_autofree char *memory = self->parent[CG_MEMORY]
                              ? group_path (self, self->parent[CG_MEMORY], machine_id)
                              : NULL;
  g_autofree char *pids = self->parent[CG_PIDS]
                            ? group_path (self, self->parent[CG_PIDS], machine_id)
                            : NULL;

  if (self->v2)
    {
      g_autofree char *max = g_strdup_printf ("%" G_GUINT64_FORMAT " %" G_GUINT64_FORMAT,
                                              limits->cpu_quota_us, limits->cpu_period_us);

      return write_file (cpu, "cpu.max", max, error) &&
             (!memory || write_number (memory, "memory.max", limits->memory_max_bytes, error)) &&
             (!pids || write_number (pids, "pids.max", limits->tasks_max, error));
    }
  /* The period first: a quota is checked against the period in force. */
  return write_number (cpu, "cpu.cfs_period_us", limits->cpu_period_us, error) &&
         write_number (cpu, "cpu.cfs_quota_us", limits->cpu_quota_us, error) &&
         (!memory || write_number (memory, "memory.limit_in_bytes", limits->memory_max_bytes,
                                   error)) &&
         (!pids || write_number (pids, "pids.max", limits->tasks_max, error));
}

gboolean
mv_cgroups_prepare (MvCgroups *cgroups, const char *machine_id, const MvSpec *spec,
                    MvCgroupJoin *join, GError **error)
{
  MvVmmLimits limits;

  mv_cgroup_join_clear (join);
  if (!mv_cgroups_usable (cgroups))
    return TRUE;
  limits = mv_vmm_limits (spec, &cgroups->allowance);
  if (cgroups->systemd)
    {
      /* systemd makes the scope as the first process is put in it. */
      join->unit = mv_scope_unit_name (machine_id);
      join->description = g_strdup_printf ("microvmd machine %s", spec->name);
      join->limits = limits;
      return TRUE;
    }
  for (guint i = 0; i < cgroups->parents->len; i++)
    {
      g_autofree char *dir = g_build_filename (cgroups->parents->pdata[i], machine_id, NULL);

      if (g_mkdir (dir, 0755) < 0 && errno != EEXIST)
        {
          int saved = errno;
          return mv_error_set (error, MV_ERROR_FAILED, "Could not make the VMM's cgroup %s: %s",
                               dir, g_strerror (saved));
        }
    }
  if (!write_limits (cgroups, machine_id, &limits, error))
    return FALSE;
  for (guint i = 0; i < cgroups->parents->len && i < MV_CGROUP_JOIN_MAX; i++)
    {
      g_autofree char *procs = g_build_filename (cgroups->parents->pdata[i], machine_id,
                                                 "cgroup.procs", NULL);
      int fd = open (procs, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);

      if (fd < 0)
        {
          int saved = errno;
          mv_cgroup_join_clear (join);
          return mv_error_set (error, MV_ERROR_FAILED, "Could not open %s: %s", procs,
                               g_strerror (saved));
        }
      join->fds[join->n_fds++] = fd;
    }
  return TRUE;
}

gboolean
mv_cgroups_update (MvCgroups *cgroups, const char *machine_id, const MvSpec *spec,
                   GError **error)
{
  g_autofree char *dir = NULL;
  MvVmmLimits limits;

  if (!mv_cgroups_usable (cgroups) || cgroups->parents->len == 0)
    return TRUE;
  limits = mv_vmm_limits (spec, &cgroups->allowance);
  if (cgroups->systemd)
    {
      g_autofree char *unit = mv_scope_unit_name (machine_id);

      return mv_scope_set_limits (unit, &limits, error);
    }
  dir = g_build_filename (cgroups->parents->pdata[0], machine_id, NULL);
  if (!g_file_test (dir, G_FILE_TEST_IS_DIR))
    return TRUE;
  return write_limits (cgroups, machine_id, &limits, error);
}

int
mv_cgroup_join (const MvCgroupJoin *join)
{
  for (guint i = 0; join && i < join->n_fds; i++)
    /* "0" is the writer itself. */
    if (write (join->fds[i], "0", 1) != 1)
      return -errno;
  return 0;
}

void
mv_cgroup_join_clear (MvCgroupJoin *join)
{
  for (guint i = 0; i < join->n_fds; i++)
    close (join->fds[i]);
  g_free (join->unit);
  g_free (join->description);
  *join = (MvCgroupJoin) MV_CGROUP_JOIN_INIT;
}

gboolean
mv_cgroup_place (const MvCgroupJoin *join, int pid, GError **error)
{
  if (!join || !join->unit)
    return TRUE;
  return mv_scope_place (join->unit, join->description, pid, &join->limits, error);
}

gboolean
mv_cgroups_register (MvCgroups *cgroups, const char *machine_id, const char *name, int pid,
                     GError **error)
{
  g_autofree char *machine_name = NULL;

  if (!mv_cgroups_usable (cgroups) || !cgroups->systemd)
    return TRUE;
  machine_name = mv_scope_machine_name (name, machine_id);
  return mv_scope_register_machine (machine_name, machine_id, pid, error);
}

gboolean
mv_cgroups_remove (MvCgroups *cgroups, const char *machine_id, GError **error)
{
  gint64 deadline = g_get_monotonic_time () + REMOVE_WAIT_US;

  if (!mv_cgroups_usable (cgroups))
    return TRUE;
  if (cgroups->systemd)
    {
      g_autofree char *unit = mv_scope_unit_name (machine_id);

      /* Ends what is left in it (a helper of the VMM's), as removing the
       * group of a VMM that is gone does. */
      return mv_scope_stop (unit, error);
    }
  for (guint i = 0; i < cgroups->parents->len; i++)
    {
      g_autofree char *dir = g_build_filename (cgroups->parents->pdata[i], machine_id, NULL);

      /* A task that was killed leaves its group a moment after its end is
       * seen. */
      while (g_rmdir (dir) < 0 && errno != ENOENT)
        {
          int saved = errno;

          if (saved != EBUSY || g_get_monotonic_time () >= deadline)
            return mv_error_set (error, MV_ERROR_FAILED, "Could not remove the VMM's cgroup %s: %s",
                                 dir, g_strerror (saved));
          g_usleep (REMOVE_POLL_US);
        }
    }
  return TRUE;
}

gboolean
mv_cgroups_cpu_usage (const MvCgroups *cgroups, const char *machine_id, guint64 *cpu_ns)
{
  g_autofree char *dir = NULL;
  g_autofree char *path = NULL;
  g_autofree char *text = NULL;
  const char *line;

  if (!mv_cgroups_usable (cgroups) || !cgroups->parent[CG_CPUACCT])
    return FALSE;
  dir = group_path (cgroups, cgroups->parent[CG_CPUACCT], machine_id);
  path = g_build_filename (dir, cgroups->usage_v2 ? "cpu.stat" : "cpuacct.usage", NULL);
  if (!g_file_get_contents (path, &text, NULL, NULL))
    return FALSE;
  if (!cgroups->usage_v2)
    return g_ascii_string_to_unsigned (g_strstrip (text), 10, 0, G_MAXUINT64, cpu_ns, NULL);
  /* "usage_usec N" is the first line, but nothing promises that. */
  for (line = text; line; line = strchr (line, '\n') ? strchr (line, '\n') + 1 : NULL)
    if (g_str_has_prefix (line, "usage_usec "))
      {
        guint64 us = g_ascii_strtoull (line + strlen ("usage_usec "), NULL, 10);

        *cpu_ns = us * 1000;
        return TRUE;
      }
  return FALSE;
}

void
mv_cgroups_sweep (MvCgroups *cgroups)
{
  /* systemd collects the scopes that nothing is left in. */
  if (!mv_cgroups_usable (cgroups) || cgroups->systemd)
    return;
  for (guint i = 0; i < cgroups->parents->len; i++)
    {
      g_autoptr (GDir) dir = g_dir_open (cgroups->parents->pdata[i], 0, NULL);
      const char *name;

      while (dir && (name = g_dir_read_name (dir)))
        {
          g_autofree char *path = g_build_filename (cgroups->parents->pdata[i], name, NULL);

          /* A group that tasks are in (EBUSY) is a VMM's that runs on; a
           * file is the controller's own. */
          if (g_file_test (path, G_FILE_TEST_IS_DIR) && g_rmdir (path) == 0)
            g_debug ("Removed the cgroup %s, which no VMM was in", path);
        }
    }
}
