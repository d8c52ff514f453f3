/* A cgroup per VMM on the cgroup v1 hierarchies these hosts have: the
 * Cloud Hypervisor test VMM's group carries the quota of its millicores
 * and the memory and task limits, holds the VMM but not its parent, is
 * found again by a restarted daemon and goes with Stop; empty groups are
 * swept at start; a host without cgroups refuses millicores that need a
 * quota; and a QEMU guest under TCG burning its vCPU with 500 millicores
 * is held near half a CPU. */
#include "bus-client.h"
#include "names.h"

#include <json-glib/json-glib.h>
#include <glib/gstdio.h>
#include <signal.h>
#include <string.h>

#define MiB (G_GUINT64_CONSTANT (1) << 20)

static char *guest_kernel, *guest_initrd;
static char *root_name;          /* the tests' own parent group, beside any other daemon's */
static char *chv_config, *nocgroup_config, *qemu_config;

/* The group @machine_id's VMM should be in, in the v1 hierarchy of
 * @controller: inside the daemon's own group there, which is the test's. */
static char *
group_dir (const char *controller, const char *machine_id)
{
  g_autofree char *self = NULL;
  g_auto (GStrv) lines = NULL;

  g_assert_true (g_file_get_contents ("/proc/self/cgroup", &self, NULL, NULL));
  lines = g_strsplit (self, "\n", -1);
  for (char **line = lines; *line; line++)
    {
      g_auto (GStrv) fields = g_strsplit (*line, ":", 3);

      if (g_strv_length (fields) == 3 && g_str_equal (fields[1], controller))
        return g_build_filename ("/sys/fs/cgroup", controller, fields[2], root_name, machine_id,
                                 NULL);
    }
  g_error ("no %s hierarchy in /proc/self/cgroup", controller);
}

static guint64
read_number (const char *dir, const char *name)
{
  g_autofree char *path = g_build_filename (dir, name, NULL);
  g_autofree char *text = NULL;
  guint64 v = 0;

  g_assert_true (g_file_get_contents (path, &text, NULL, NULL));
  g_assert_true (g_ascii_string_to_unsigned (g_strstrip (text), 10, 0, G_MAXUINT64, &v, NULL));
  return v;
}

/* The group of @pid in the hierarchy of @controller, from /proc. */
static char *
group_of (int pid, const char *controller)
{
  g_autofree char *file = g_strdup_printf ("/proc/%d/cgroup", pid);

  return cgroup_in_file (file, controller);
}

static int
parent_pid (int pid)
{
  g_autofree char *file = g_strdup_printf ("/proc/%d/stat", pid);

  return parent_in_stat_file (file);
}

/* The VMM's PID as status.json records it. */
static int
vmm_pid (Fixture *f, const char *id)
{
  g_autofree char *file = g_build_filename (mv_test_env_state_dir (f->env), "machines", id,
                                            "status.json", NULL);
  g_autoptr (JsonParser) parser = json_parser_new ();
  JsonObject *root;

  g_assert_true (json_parser_load_from_file (parser, file, NULL));
  root = json_node_get_object (json_parser_get_root (parser));
  return (int) json_object_get_int_member (json_object_get_object_member (root, "vmm"), "pid");
}

static guint64
stats_cpu_ns (Fixture *f, const char *path)
{
  g_autofree char *err = NULL, *msg = NULL;
  g_autoptr (sd_bus_message) reply = client_call (f->client, path, MV_MACHINE_IFACE, "GetStats",
                                                  &err, &msg, "");

  if (!reply)
    g_error ("GetStats: %s: %s", err, msg);
  return stats_reply_cpu_time_ns (reply);
}

static void
teardown (Fixture *f, gconstpointer data)
{
  client_delete_all (f->client);
  fixture_teardown (f, data);
}

static void
assert_in_group (int pid, const char *id)
{
  const char *controllers[] = { "cpu", "cpuacct", "memory", "pids" };

  for (guint i = 0; i < G_N_ELEMENTS (controllers); i++)
    {
      g_autofree char *group = group_of (pid, controllers[i]);
      g_autofree char *tail = g_strdup_printf ("/%s/%s", root_name, id);

      g_test_message ("process %d: %s:%s", pid, controllers[i], group);
      g_assert_nonnull (group);
      g_assert_true (g_str_has_suffix (group, tail));
    }
}

static void
test_limits (Fixture *f, gconstpointer data)
{
  g_autofree char *spec = guest_spec_json ("cloud-hypervisor", "quota", guest_kernel,
                                           guest_initrd, "\"cpu_millicores\":1500");
  g_autofree char *path = client_create_ok (f->client, spec);
  g_autofree char *id = client_get_string (f->client, path, "Id");
  g_autofree char *cpu = group_dir ("cpu", id);
  g_autofree char *cpuacct = group_dir ("cpuacct", id);
  g_autofree char *memory = group_dir ("memory", id);
  g_autofree char *pids = group_dir ("pids", id);
  g_autofree char *reaper_group = NULL;
  g_autofree char *stray = NULL;
  int pid;

  client_call_ok (f->client, path, "Start");
  pid = vmm_pid (f, id);
  g_assert_cmpint (pid, >, 1);
  /* 1500 millicores: one and a half CPUs of time, not two, and the
   * configured fifth more for the VMM's own threads. */
  g_assert_cmpuint (read_number (cpu, "cpu.cfs_period_us"), ==, 100000);
  g_assert_cmpuint (read_number (cpu, "cpu.cfs_quota_us"), ==, 180000);
  /* The guest's 256 MiB and the configured 64 MiB for the VMM. */
  g_assert_cmpuint (read_number (memory, "memory.limit_in_bytes"), ==, 320 * MiB);
  g_assert_cmpuint (read_number (pids, "pids.max"), ==, 100);
  assert_in_group (pid, id);
  /* Its parent only reaps it: not the guest's load. */
  reaper_group = group_of (parent_pid (pid), "cpu");
  g_assert_false (g_str_has_suffix (reaper_group, id));
  /* The stats read the group's own count, which the daemon reads as well. */
  g_assert_cmpuint (stats_cpu_ns (f, path), <=, read_number (cpuacct, "cpuacct.usage"));

  /* A daemon that went down finds the group again by its name. */
  mv_test_env_stop_daemon (f->env, SIGKILL);
  stray = group_dir ("cpu", "stray");
  g_assert_cmpint (g_mkdir (stray, 0755), ==, 0);
  mv_test_env_start_daemon (f->env, NULL);
  client_free (f->client);
  f->client = client_new (f->env);
  client_assert_state_soon (f->client, path, "Running", 20000);
  g_assert_true (g_file_test (cpu, G_FILE_TEST_IS_DIR));
  /* An empty group is what an earlier daemon left: swept at start. */
  g_assert_false (g_file_test (stray, G_FILE_TEST_EXISTS));
  g_assert_cmpuint (stats_cpu_ns (f, path), >, 0);

  /* Resized to one vCPU: one CPU of time, and a fifth more. */
  {
    g_autofree char *err = NULL, *msg = NULL;
    g_autoptr (sd_bus_message) reply = client_call (f->client, path, MV_MACHINE_IFACE, "Resize",
                                                    &err, &msg, "ut", 1, 256 * MiB);
    if (!reply)
      g_error ("Resize: %s: %s", err, msg);
  }
  g_assert_cmpuint (read_number (cpu, "cpu.cfs_quota_us"), ==, 120000);

  client_call_ok (f->client, path, "Stop");
  g_assert_false (g_file_test (cpu, G_FILE_TEST_EXISTS));
  g_assert_false (g_file_test (cpuacct, G_FILE_TEST_EXISTS));
  g_assert_false (g_file_test (memory, G_FILE_TEST_EXISTS));
  g_assert_false (g_file_test (pids, G_FILE_TEST_EXISTS));

  /* Started again, and deleted while running: Delete takes the group. */
  client_call_ok (f->client, path, "Start");
  g_assert_true (g_file_test (cpu, G_FILE_TEST_IS_DIR));
  {
    g_autofree char *err = NULL, *msg = NULL;
    g_autoptr (sd_bus_message) reply = client_call (f->client, path, MV_MACHINE_IFACE, "Delete",
                                                    &err, &msg, "b", 1);
    if (!reply)
      g_error ("Delete: %s: %s", err, msg);
  }
  g_assert_false (g_file_test (cpu, G_FILE_TEST_EXISTS));
  g_assert_false (g_file_test (memory, G_FILE_TEST_EXISTS));
}

static void
test_no_cgroups (Fixture *f, gconstpointer data)
{
  g_autofree char *half = guest_spec_json ("cloud-hypervisor", "half", guest_kernel, guest_initrd,
                                           "\"cpu_millicores\":1500");
  g_autofree char *whole = guest_spec_json ("cloud-hypervisor", "whole", guest_kernel,
                                            guest_initrd, "\"cpu_millicores\":2000");
  g_autofree char *err = NULL, *msg = NULL;
  g_autofree char *path = client_create (f->client, half, 0, &err, &msg);
  g_autofree char *log = NULL;
  g_autofree char *whole_path = NULL;

  g_assert_null (path);
  g_assert_cmpstr (err, ==, "org.microvmd1.Error.Unsupported");
  g_assert_true (g_str_has_prefix (msg, "cpu_millicores: 1500 "));
  /* Whole CPUs need no quota; said once at start. */
  whole_path = client_create_ok (f->client, whole);
  client_call_ok (f->client, whole_path, "Start");
  log = mv_test_env_read_daemon_log (f->env);
  g_assert_nonnull (strstr (log, "no usable cgroups"));
}

/* Seconds of CPU of @machine_id's group, as its cpuacct counts. */
static double
group_cpu_s (const char *machine_id)
{
  g_autofree char *dir = group_dir ("cpuacct", machine_id);

  return read_number (dir, "cpuacct.usage") / 1e9;
}

static void
test_half_a_cpu (Fixture *f, gconstpointer data)
{
  g_autofree char *build_rootfs = g_build_filename (g_getenv ("MICROVMD_BUILD_DIR"), "tests",
                                                    "guest", "rootfs.ext4", NULL);
  g_autofree char *spec = g_strdup_printf ("{\"name\":\"burner\",\"hypervisor_type\":\"qemu\","
                                           "\"cpu_millicores\":500,\"memory_bytes\":268435456,"
                                           "\"disks\":[{\"path\":\"%s\",\"read_only\":true,"
                                           "\"root\":true}]}", build_rootfs);
  g_autofree char *path = client_create_ok (f->client, spec);
  g_autofree char *id = client_get_string (f->client, path, "Id");
  g_autofree char *memory = group_dir ("memory", id);
  const char *burn[] = { "sh", "-c", "while :; do :; done </dev/null >/dev/null 2>&1 &", NULL };
  g_auto (ExecResult) result = { 0 };
  gint64 t0, t1;
  double c0, c1, share;

  client_call_ok (f->client, path, "Start");
  assert_in_group (vmm_pid (f, id), id);
  exec_run (f, path, burn, NULL, &result);
  g_assert_cmpstr (result.status, ==, "exit 0");
  /* A spinning vCPU under TCG keeps a host thread busy: a whole CPU
   * unless the quota holds it. */
  g_usleep (G_USEC_PER_SEC);
  t0 = g_get_monotonic_time ();
  c0 = group_cpu_s (id);
  g_usleep (5 * G_USEC_PER_SEC);
  t1 = g_get_monotonic_time ();
  c1 = group_cpu_s (id);
  share = (c1 - c0) / ((t1 - t0) / 1e6);
  g_test_message ("500 millicores burning: %.3f CPUs; memory peak %" G_GUINT64_FORMAT " MiB",
                  share, read_number (memory, "memory.max_usage_in_bytes") / MiB);
  g_assert_cmpfloat (share, >, 0.3);
  g_assert_cmpfloat (share, <, 0.7);
}

int
main (int argc, char **argv)
{
  const char *build = g_getenv ("MICROVMD_BUILD_DIR");
  g_autofree char *resources = NULL, *kernel = NULL, *initramfs = NULL, *guest = NULL;
  int status;

  g_test_init (&argc, &argv, NULL);
  g_assert_nonnull (build);
  guest_kernel = g_build_filename (build, "tests", "guest", "vmlinuz", NULL);
  guest_initrd = g_build_filename (build, "tests", "guest", "initrd.img", NULL);
  root_name = g_strdup_printf ("microvmd-test-%d", (int) getpid ());
  resources = g_strdup_printf ("[resources]\ncgroup-root=%s\nvmm-memory-overhead-bytes=%"
                               G_GUINT64_FORMAT "\nvmm-tasks-max=100\n"
                               "vmm-cpu-overhead-percent=20\n"
                               "[lifecycle]\nboot-timeout-seconds=20\nstop-timeout-seconds=5\n",
                               root_name, 64 * MiB);
  chv_config = guest_config ("cloud-hypervisor", resources);
  nocgroup_config = guest_config ("cloud-hypervisor",
                                  "[resources]\ncgroup-fs=/nonexistent/cgroup\n");
  kernel = g_build_filename (build, "guest", "vmlinuz", NULL);
  initramfs = g_build_filename (build, "guest", "initramfs.img", NULL);
  guest = g_strdup_printf ("[guest]\nkernel=%s\ninitramfs=%s\n"
                           "[resources]\ncgroup-root=%s\n"
                           "[lifecycle]\nboot-timeout-seconds=60\nstop-timeout-seconds=20\n",
                           kernel, initramfs, root_name);
  qemu_config = guest_config ("qemu", guest);

  g_test_add ("/cgroups/cloud-hypervisor/limits-recover-stop", Fixture, chv_config,
              fixture_setup, test_limits, teardown);
  g_test_add ("/cgroups/cloud-hypervisor/no-cgroups", Fixture, nocgroup_config, fixture_setup,
              test_no_cgroups, teardown);
  g_test_add ("/cgroups/qemu/half-a-cpu", Fixture, qemu_config, fixture_setup, test_half_a_cpu,
              teardown);
  status = g_test_run ();

  /* The tests' parent groups; each is empty once its daemon's machines
   * are gone. */
  for (guint i = 0; i < 4; i++)
    {
      const char *controllers[] = { "cpu", "cpuacct", "memory", "pids" };
      g_autofree char *dir = group_dir (controllers[i], "x");
      g_autofree char *parent = g_path_get_dirname (dir);

      g_rmdir (parent);
    }
  return status;
}
