/* The cgroup files a VMM's group is given, on stand-in trees of plain
 * directories laid out as the cgroup file systems are: cgroup v2 (which
 * these hosts do not run with controllers) and v1, inside the daemon's
 * own groups or from the hierarchies' roots; and a host without any. */
#include "hypervisor/cgroup.h"
#include "core/errors.h"

#include <glib/gstdio.h>
#include <string.h>

#define MiB (G_GUINT64_CONSTANT (1) << 20)
#define ID  "0123456789abcdef0123456789abcdef"

static void
touch (const char *dir, const char *name, const char *text)
{
  g_autofree char *path = g_build_filename (dir, name, NULL);

  g_assert_cmpint (g_mkdir_with_parents (dir, 0755), ==, 0);
  g_assert_true (g_file_set_contents (path, text, -1, NULL));
}

static char *
contents (const char *dir, const char *name)
{
  g_autofree char *path = g_build_filename (dir, name, NULL);
  char *text = NULL;

  g_assert_true (g_file_get_contents (path, &text, NULL, NULL));
  return text;
}

static MvSpec *
spec_of (guint32 millicores, guint64 memory)
{
  MvSpec *spec = mv_spec_new ();

  spec->cpu_millicores = millicores;
  spec->memory_bytes = memory;
  return spec;
}

static void
remove_tree (const char *path)
{
  g_autofree char *quoted = g_shell_quote (path);
  g_autofree char *command = g_strconcat ("rm -rf ", quoted, NULL);

  g_assert_true (g_spawn_command_line_sync (command, NULL, NULL, NULL, NULL));
}

static void
test_v2 (void)
{
  g_autofree char *fs = g_dir_make_tmp ("cgroup-v2-XXXXXX", NULL);
  g_autofree char *parent = g_build_filename (fs, "microvmd", NULL);
  g_autofree char *group = g_build_filename (parent, ID, NULL);
  g_autoptr (MvSpec) spec = spec_of (1500, 256 * MiB);
  g_autoptr (MvCgroups) cgroups = NULL;
  g_autofree char *text = NULL, *dir = NULL;
  MvCgroupJoin join = MV_CGROUP_JOIN_INIT;
  guint64 ns = 0;

  touch (fs, "cgroup.controllers", "cpuset cpu io memory pids\n");
  touch (fs, "cgroup.subtree_control", "");
  /* What the kernel makes with each group. */
  touch (parent, "cgroup.subtree_control", "");
  for (const char *const *f = (const char *[]) { "cpu.max", "memory.max", "pids.max",
                                                  "cgroup.procs", NULL }; *f; f++)
    touch (group, *f, "");

  cgroups = mv_cgroups_new (fs, "0::/\n", "microvmd", &(MvVmmAllowance) { 20, 64 * MiB, 100 });
  g_test_message ("%s", mv_cgroups_describe (cgroups));
  g_assert_true (mv_cgroups_usable (cgroups));
  g_assert_true (g_str_has_prefix (mv_cgroups_describe (cgroups), "cgroup v2:"));
  /* The controllers are given to the groups below, level by level. */
  text = contents (parent, "cgroup.subtree_control");
  g_assert_cmpstr (text, ==, "+pids");
  dir = mv_cgroups_dir (cgroups, "memory", ID);
  g_assert_cmpstr (dir, ==, group);

  g_assert_true (mv_cgroups_prepare (cgroups, ID, spec, &join, NULL));
  g_assert_cmpuint (join.n_fds, ==, 1);
  g_clear_pointer (&text, g_free);
  /* 1500 millicores and a fifth more for the VMM's own threads. */
  text = contents (group, "cpu.max");
  g_assert_cmpstr (text, ==, "180000 100000");
  g_clear_pointer (&text, g_free);
  text = contents (group, "memory.max");
  g_assert_cmpstr (text, ==, "335544320");
  g_clear_pointer (&text, g_free);
  text = contents (group, "pids.max");
  g_assert_cmpstr (text, ==, "100");
  g_assert_cmpint (mv_cgroup_join (&join), ==, 0);
  g_clear_pointer (&text, g_free);
  text = contents (group, "cgroup.procs");
  g_assert_cmpstr (text, ==, "0");
  mv_cgroup_join_clear (&join);
  g_assert_cmpuint (join.n_fds, ==, 0);

  /* CPU time from cpu.stat, in whichever line it is. */
  touch (group, "cpu.stat", "user_usec 5\nusage_usec 1234\nsystem_usec 6\n");
  g_assert_true (mv_cgroups_cpu_usage (cgroups, ID, &ns));
  g_assert_cmpuint (ns, ==, 1234000);

  /* The CPUs the VMMs' parent group may use, once it has a cpuset. */
  g_clear_pointer (&text, g_free);
  text = mv_cgroups_cpuset (cgroups);
  g_assert_null (text);
  touch (parent, "cpuset.cpus.effective", "0-3,6\n");
  text = mv_cgroups_cpuset (cgroups);
  g_assert_cmpstr (text, ==, "0-3,6");
  remove_tree (fs);
}

static void
test_v1 (void)
{
  g_autofree char *fs = g_dir_make_tmp ("cgroup-v1-XXXXXX", NULL);
  const char *self = "12:pids:/\n4:memory:/outer/inner\n2:cpu,cpuacct:/\n1:name=systemd:/\n0::/\n";
  g_autofree char *cpu = g_build_filename (fs, "cpu,cpuacct", "microvmd", ID, NULL);
  g_autofree char *memory = g_build_filename (fs, "memory", "outer", "inner", "microvmd", ID, NULL);
  g_autofree char *pids = g_build_filename (fs, "pids", "microvmd", ID, NULL);
  g_autoptr (MvSpec) spec = spec_of (250, 128 * MiB);
  g_autoptr (MvCgroups) cgroups = NULL;
  g_autoptr (MvCgroups) absolute = NULL;
  g_autofree char *text = NULL, *dir = NULL;
  MvCgroupJoin join = MV_CGROUP_JOIN_INIT;
  guint64 ns = 0;

  touch (cpu, "cpu.cfs_period_us", "");
  touch (cpu, "cpu.cfs_quota_us", "");
  touch (cpu, "cgroup.procs", "");
  touch (memory, "memory.limit_in_bytes", "");
  touch (memory, "cgroup.procs", "");
  touch (pids, "pids.max", "");
  touch (pids, "cgroup.procs", "");

  cgroups = mv_cgroups_new (fs, self, "microvmd", &(MvVmmAllowance) { 0, 32 * MiB, 64 });
  g_test_message ("%s", mv_cgroups_describe (cgroups));
  g_assert_true (mv_cgroups_usable (cgroups));
  /* Inside the daemon's own group of each hierarchy. */
  dir = mv_cgroups_dir (cgroups, "memory", ID);
  g_assert_cmpstr (dir, ==, memory);
  g_clear_pointer (&dir, g_free);
  dir = mv_cgroups_dir (cgroups, "cpuacct", ID);
  g_assert_cmpstr (dir, ==, cpu);

  g_assert_true (mv_cgroups_prepare (cgroups, ID, spec, &join, NULL));
  /* cpu and cpuacct share a hierarchy: three groups to join. */
  g_assert_cmpuint (join.n_fds, ==, 3);
  mv_cgroup_join_clear (&join);
  text = contents (cpu, "cpu.cfs_quota_us");
  g_assert_cmpstr (text, ==, "25000");
  g_clear_pointer (&text, g_free);
  text = contents (cpu, "cpu.cfs_period_us");
  g_assert_cmpstr (text, ==, "100000");
  g_clear_pointer (&text, g_free);
  text = contents (memory, "memory.limit_in_bytes");
  g_assert_cmpstr (text, ==, "167772160");
  g_clear_pointer (&text, g_free);
  text = contents (pids, "pids.max");
  g_assert_cmpstr (text, ==, "64");
  touch (cpu, "cpuacct.usage", "987654321\n");
  g_assert_true (mv_cgroups_cpu_usage (cgroups, ID, &ns));
  g_assert_cmpuint (ns, ==, 987654321);
  g_assert_false (mv_cgroups_cpu_usage (cgroups, "another", &ns));
  /* v1 VMMs stay in the daemon's cpuset: nothing more narrows their CPUs. */
  g_assert_null (mv_cgroups_cpuset (cgroups));

  /* An absolute root starts at each hierarchy's own. */
  absolute = mv_cgroups_new (fs, self, "/vmms/microvmd", &(MvVmmAllowance) { 0, 32 * MiB, 64 });
  g_clear_pointer (&dir, g_free);
  dir = mv_cgroups_dir (absolute, "memory", ID);
  g_clear_pointer (&text, g_free);
  text = g_build_filename (fs, "memory", "vmms", "microvmd", ID, NULL);
  g_assert_cmpstr (dir, ==, text);
  remove_tree (fs);
}

/* Under systemd the groups are its scopes in machine.slice: nothing is
 * made or written in the file system, the join holds the scope to start
 * with the limits instead of files, and CPU time is read from the
 * scope's group in the v2 tree beside v1 hierarchies (the hybrid layout)
 * or in v2 alone. */
static void
test_systemd (void)
{
  g_autofree char *fs = g_dir_make_tmp ("cgroup-systemd-XXXXXX", NULL);
  const char *self = "4:memory:/system.slice/microvmd.service\n"
                     "2:cpu,cpuacct:/system.slice/microvmd.service\n"
                     "1:name=systemd:/system.slice/microvmd.service\n"
                     "0::/system.slice/microvmd.service\n";
  g_autofree char *unified = g_build_filename (fs, "unified", NULL);
  g_autofree char *scope = g_build_filename (fs, "unified", "machine.slice",
                                             "microvmd-" ID ".scope", NULL);
  g_autofree char *v2 = g_build_filename (fs, "v2", NULL);
  g_autofree char *v2_scope = g_build_filename (v2, "machine.slice", "microvmd-" ID ".scope",
                                                NULL);
  g_autofree char *cpu = g_build_filename (fs, "cpu,cpuacct", NULL);
  g_autofree char *cpu_slice = g_build_filename (cpu, "machine.slice", NULL);
  g_autofree char *memory = g_build_filename (fs, "memory", NULL);
  g_autofree char *subtree = g_build_filename (v2, "cgroup.subtree_control", NULL);
  g_autoptr (MvSpec) spec = spec_of (1500, 256 * MiB);
  g_autoptr (MvCgroups) hybrid = NULL;
  g_autoptr (MvCgroups) only_v2 = NULL;
  g_autofree char *dir = NULL, *expected = NULL;
  MvCgroupJoin join = MV_CGROUP_JOIN_INIT;
  guint64 ns = 0;

  g_assert_cmpint (g_mkdir_with_parents (memory, 0755), ==, 0);
  touch (cpu, "cpu.cfs_quota_us", "");
  touch (unified, "cgroup.controllers", "");
  hybrid = mv_cgroups_new_systemd (fs, self, &(MvVmmAllowance) { 0, 64 * MiB, 100 });
  g_test_message ("%s", mv_cgroups_describe (hybrid));
  g_assert_true (mv_cgroups_usable (hybrid));
  g_assert_true (mv_cgroups_by_systemd (hybrid));
  /* systemd's slice at each hierarchy's root, not the daemon's group. */
  dir = mv_cgroups_dir (hybrid, "cpu", ID);
  expected = g_build_filename (cpu_slice, "microvmd-" ID ".scope", NULL);
  g_assert_cmpstr (dir, ==, expected);
  /* Nothing made: systemd makes the slice with its first scope. */
  g_assert_false (g_file_test (cpu_slice, G_FILE_TEST_EXISTS));

  g_assert_true (mv_cgroups_prepare (hybrid, ID, spec, &join, NULL));
  g_assert_cmpuint (join.n_fds, ==, 0);
  g_assert_cmpstr (join.unit, ==, "microvmd-" ID ".scope");
  g_assert_cmpuint (join.limits.cpu_quota_us, ==, 150000);
  g_assert_cmpuint (join.limits.memory_max_bytes, ==, 320 * MiB);
  g_assert_cmpuint (join.limits.tasks_max, ==, 100);
  g_assert_false (g_file_test (cpu_slice, G_FILE_TEST_EXISTS));
  mv_cgroup_join_clear (&join);
  g_assert_null (join.unit);

  touch (scope, "cpu.stat", "usage_usec 42\nuser_usec 40\n");
  g_assert_true (mv_cgroups_cpu_usage (hybrid, ID, &ns));
  g_assert_cmpuint (ns, ==, 42000);

  touch (v2, "cgroup.controllers", "cpu memory pids\n");
  only_v2 = mv_cgroups_new_systemd (v2, "0::/system.slice/microvmd.service\n",
                                    &(MvVmmAllowance) { 0, 64 * MiB, 100 });
  g_assert_true (mv_cgroups_by_systemd (only_v2));
  touch (v2_scope, "cpu.stat", "usage_usec 7\n");
  g_assert_true (mv_cgroups_cpu_usage (only_v2, ID, &ns));
  g_assert_cmpuint (ns, ==, 7000);
  /* No subtree_control written: the tree is systemd's. */
  g_assert_false (g_file_test (subtree, G_FILE_TEST_EXISTS));
  remove_tree (fs);
}

static void
test_none (void)
{
  g_autofree char *fs = g_dir_make_tmp ("cgroup-none-XXXXXX", NULL);
  g_autofree char *missing = g_build_filename (fs, "missing", NULL);
  g_autofree char *memory_dir = NULL;
  g_autoptr (MvCgroups) unmounted = mv_cgroups_new (missing, "0::/\n", "microvmd",
                                                    &(MvVmmAllowance) { 0, MiB, 16 });
  /* v1 without a cpu controller: no quota can be set. */
  g_autoptr (MvCgroups) no_cpu = NULL;
  g_autoptr (MvSpec) half = spec_of (1500, 256 * MiB);
  g_autoptr (MvSpec) whole = spec_of (2000, 256 * MiB);
  g_autoptr (GError) error = NULL;
  MvCgroupJoin join = MV_CGROUP_JOIN_INIT;

  g_assert_false (mv_cgroups_usable (unmounted));
  g_assert_nonnull (strstr (mv_cgroups_describe (unmounted), "no usable cgroups"));
  g_assert_false (mv_cgroups_check (unmounted, half, &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_UNSUPPORTED);
  g_assert_true (g_str_has_prefix (error->message, "cpu_millicores: 1500 "));
  g_assert_true (mv_cgroups_check (unmounted, whole, NULL));
  /* Machines still start, in the daemon's group. */
  g_assert_true (mv_cgroups_prepare (unmounted, ID, whole, &join, NULL));
  g_assert_cmpuint (join.n_fds, ==, 0);
  g_assert_true (mv_cgroups_remove (unmounted, ID, NULL));

  memory_dir = g_build_filename (fs, "memory", NULL);
  g_assert_cmpint (g_mkdir (memory_dir, 0755), ==, 0);
  no_cpu = mv_cgroups_new (fs, "4:memory:/\n", "microvmd", &(MvVmmAllowance) { 0, MiB, 16 });
  g_assert_false (mv_cgroups_usable (no_cpu));
  g_assert_true (mv_cgroups_check (no_cpu, whole, NULL));
  remove_tree (fs);
}

/* A share out of its range is refused, naming its key, before any group
 * is looked for. */
static void
test_config_range (void)
{
  g_autoptr (GKeyFile) config = g_key_file_new ();
  g_autoptr (GError) error = NULL;
  g_autoptr (MvCgroups) cgroups = NULL;

  g_assert_true (g_key_file_load_from_data (config, "[resources]\ncgroup-manager=cgroupfs\n"
                                                    "vmm-cpu-overhead-percent=101\n",
                                            -1, G_KEY_FILE_NONE, NULL));
  cgroups = mv_cgroups_new_from_config (config, &error);
  g_assert_null (cgroups);
  g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
  g_assert_cmpstr (error->message, ==, "[resources] vmm-cpu-overhead-percent must be 0 to 100");
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/cgroup/v2", test_v2);
  g_test_add_func ("/cgroup/v1", test_v1);
  g_test_add_func ("/cgroup/none", test_none);
  g_test_add_func ("/cgroup/systemd", test_systemd);
  g_test_add_func ("/cgroup/config-range", test_config_range);
  return g_test_run ();
}
