/* #21: warm starts. create→Running through the daemon (QEMU under TCG,
 * microvmd's kernel and initramfs, readiness by the agent, `sleep
 * 1000000` as the workload) of machines booted from the test image
 * (BUILD/tests/guest/oci): started from the warm template of their shape
 * (start_mode auto, StartedFrom "warm") against the same machine with
 * start_mode cold, runs interleaved. A first machine, not counted, pulls
 * the image and has the template built behind its start; each machine
 * is deleted, forced, after its run.
 *
 *   21-warm-vs-bare  the same warm starts against a bare QEMU restoring
 *                    the template itself: the command line the daemon gave
 *                    the QEMU of one more warm start (with [sandbox]
 *                    enabled=false, so that it names paths, not
 *                    descriptors), read from /proc, its run directory
 *                    moved to a scratch one, its overlay disk a fresh copy
 *                    of the template's (made before the clock starts) and
 *                    its incoming state the template's file; spawn, wait
 *                    for "paused", cont. The limit of a warm start, which
 *                    also copies the overlay disk and waits for the agent
 *                    to be told who it is.
 *
 * --smoke boots no guest. */
#include "bare-qemu.h"

#include "names.h"
#include "util/files.h"

#include <glib/gstdio.h>
#include <string.h>

#define ROW        "21"
#define RUNS       6

static char *
spec (Bench *bench, const char *name, const char *layout, const char *mode)
{
  return g_strdup_printf ("{\"name\":\"%s\",\"hypervisor_type\":\"qemu\","
                          "\"memory_bytes\":268435456,\"image\":\"oci:%s:1\","
                          "\"cmd\":[\"sleep\",\"1000000\"],\"start_mode\":\"%s\"}",
                          name, layout, mode);
}

/* CreateMachine with CREATE_START: µs until it returned, the machine
 * Running and started as @expect_from says (any way if NULL, which
 * *@started_from is then given if not NULL); then Delete, forced. */
static double
create_running_from (Bench *bench, const char *layout, const char *mode, const char *expect_from,
                     char **started_from)
{
  g_autofree char *name = g_strdup_printf ("bench-w%05u", ++bench->machine_seq);
  g_autofree char *text = spec (bench, name, layout, mode);
  g_autoptr (sd_bus_message) created = NULL;
  g_autoptr (sd_bus_message) deleted = NULL;
  g_autofree char *path = NULL, *state = NULL, *from = NULL;
  const char *p = NULL;
  gint64 t0, t1;

  t0 = bench_now ();
  created = bench_call (bench, bench->bus, MV_BUS_NAME, MV_MANAGER_PATH, MV_MANAGER_IFACE,
                        "CreateMachine", "st", text, (uint64_t) MV_CREATE_START);
  t1 = bench_now ();
  if (sd_bus_message_read (created, "o", &p) < 0)
    bench_fail (bench, "CreateMachine returned no path");
  path = g_strdup (p);
  state = bench_get_string (bench, bench->bus, MV_BUS_NAME, path, MV_MACHINE_IFACE, "State");
  from = bench_get_string (bench, bench->bus, MV_BUS_NAME, path, MV_MACHINE_IFACE,
                           "StartedFrom");
  if (!g_str_equal (state, "Running") || (expect_from && !g_str_equal (from, expect_from)))
    bench_fail (bench, "%s is %s, started from \"%s\", after CreateMachine with CREATE_START",
                name, state, from);
  if (started_from)
    *started_from = g_strdup (from);
  deleted = bench_call (bench, bench->bus, MV_BUS_NAME, path, MV_MACHINE_IFACE, "Delete", "b", 1);
  return (double) (t1 - t0);
}

static double
create_running (Bench *bench, const char *layout, const char *mode, const char *expect_from)
{
  return create_running_from (bench, layout, mode, expect_from, NULL);
}

/* The directory of the one warm template there is, or NULL; @count is
 * how many there are. */
static char *
only_template (Bench *bench, guint *count)
{
  g_autofree char *dir = g_build_filename (mv_test_env_state_dir (bench->env), MV_WARM_DIR, NULL);
  g_autoptr (GDir) d = g_dir_open (dir, 0, NULL);
  const char *name;
  char *found = NULL;

  *count = 0;
  while (d && (name = g_dir_read_name (d)))
    if (name[0] != '.')
      {
        (*count)++;
        g_free (found);
        found = g_build_filename (dir, name, NULL);
      }
  return found;
}

static guint
count_templates (Bench *bench)
{
  guint n;

  g_free (only_template (bench, &n));
  return n;
}

/* The command line of the process whose command line names @needle. */
static GPtrArray *
argv_of_process_with (Bench *bench, const char *needle)
{
  g_autoptr (GDir) proc = g_dir_open ("/proc", 0, NULL);
  const char *pid;

  while (proc && (pid = g_dir_read_name (proc)))
    {
      g_autofree char *path = g_build_filename ("/proc", pid, "cmdline", NULL);
      g_autofree char *text = NULL;
      gsize length = 0;
      GPtrArray *argv;

      if (!g_ascii_isdigit (pid[0]) || !g_file_get_contents (path, &text, &length, NULL) ||
          length == 0)
        continue;
      argv = g_ptr_array_new_with_free_func (g_free);
      for (gsize at = 0; at < length; at += strlen (text + at) + 1)
        g_ptr_array_add (argv, g_strdup (text + at));
      for (guint i = 0; i < argv->len; i++)
        if (strstr (argv->pdata[i], needle) && strstr (argv->pdata[0], "qemu"))
          return argv;
      g_ptr_array_unref (argv);
    }
  bench_fail (bench, "no QEMU process names %s", needle);
  return NULL;
}

/* The template directory whose state the QEMU of @daemon_argv was given
 * to restore (-incoming, as a QEMU not walled in is given it). */
static char *
template_restored (Bench *bench, GPtrArray *daemon_argv)
{
  g_autofree char *warm = g_build_filename (mv_test_env_state_dir (bench->env), MV_WARM_DIR, NULL);
  g_autofree char *prefix = g_strconcat (warm, "/", NULL);

  for (guint i = 1; i < daemon_argv->len; i++)
    {
      const char *at;

      if (!g_str_equal (daemon_argv->pdata[i - 1], "-incoming") ||
          !(at = strstr (daemon_argv->pdata[i], prefix)))
        continue;
      at += strlen (prefix);
      return g_strdup_printf ("%s%.*s", prefix, (int) strcspn (at, "/ "), at);
    }
  bench_fail (bench, "the daemon's QEMU restores no template of %s", warm);
  return NULL;
}

/* The daemon's QEMU command line for a warm start of the template in
 * @template, made to run from @scratch: its run directory @scratch, its
 * overlay disk @scratch/disk.ext4, its state the template's. */
static GPtrArray *
bare_argv (Bench *bench, GPtrArray *daemon_argv, const char *template, const char *scratch)
{
  g_autofree char *state = g_build_filename (template, "state", "qemu.state", NULL);
  g_autofree char *quoted = g_shell_quote (state);
  g_autofree char *disk = g_build_filename (scratch, "disk.ext4", NULL);
  g_autofree char *run_dir = NULL;
  GPtrArray *argv = g_ptr_array_new_with_free_func (g_free);

  for (guint i = 0; i < daemon_argv->len; i++)
    {
      const char *arg = daemon_argv->pdata[i];
      const char *qmp = strstr (arg, "id=qmp,path=");

      if (qmp)
        {
          g_autofree char *socket = g_strndup (qmp + strlen ("id=qmp,path="),
                                               strcspn (qmp + strlen ("id=qmp,path="), ","));
          run_dir = g_path_get_dirname (socket);
        }
    }
  if (!run_dir)
    bench_fail (bench, "the daemon's QEMU has no QMP socket on its command line");
  for (guint i = 0; i < daemon_argv->len; i++)
    {
      const char *arg = daemon_argv->pdata[i];
      g_autoptr (GString) moved = g_string_new (arg);

      if (i > 0 && g_str_equal (daemon_argv->pdata[i - 1], "-incoming"))
        {
          g_ptr_array_add (argv, g_strconcat ("exec:cat ", quoted, NULL));
          continue;
        }
      /* The writable drive is the overlay disk. */
      if (g_str_has_prefix (arg, "id=disk") && !strstr (arg, "readonly=on"))
        {
          const char *file = strstr (arg, "file=");
          gsize end = file ? strcspn (file, ",") : 0;

          if (!file)
            bench_fail (bench, "the daemon's QEMU drive %s names no file", arg);
          g_string_printf (moved, "%.*sfile=%s%s", (int) (file - arg), arg, disk, file + end);
        }
      g_string_replace (moved, run_dir, scratch, 0);
      g_ptr_array_add (argv, g_string_free (g_steal_pointer (&moved), FALSE));
    }
  g_ptr_array_add (argv, NULL);
  return argv;
}

/* One bare restore of the template: the overlay disk copied, then timed
 * from spawn to cont. */
static void
bare_restore_template (Bench *bench, GPtrArray *argv, const char *template, const char *scratch,
                       BenchSamples *restore)
{
  g_autofree char *disk = g_build_filename (template, "disk.ext4", NULL);
  g_autofree char *copy = g_build_filename (scratch, "disk.ext4", NULL);
  g_autofree char *qmp = g_build_filename (scratch, "qmp.sock", NULL);
  const char *cp[] = { "cp", "--sparse=always", disk, copy, NULL };
  g_autoptr (GError) error = NULL;
  BenchQmp q = { 0 };
  int status = 0;
  gint64 t0;
  GPid pid;

  if (!g_spawn_sync (NULL, (char **) cp, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL, NULL, NULL,
                     &status, &error) || !g_spawn_check_wait_status (status, &error))
    bench_fail (bench, "cannot copy %s: %s", disk, error->message);
  t0 = bench_now ();
  if (!g_spawn_async (scratch, (char **) argv->pdata, NULL,
                      G_SPAWN_DO_NOT_REAP_CHILD | G_SPAWN_STDOUT_TO_DEV_NULL |
                      G_SPAWN_STDERR_TO_DEV_NULL, bench_vmm_child_setup, NULL, &pid, &error))
    bench_fail (bench, "cannot start QEMU: %s", error->message);
  bench_qmp_connect (bench, &q, qmp, pid);
  while (!bench_qmp_status_is (bench, &q, "paused"))
    g_usleep (2000);
  json_node_unref (bench_qmp_execute (bench, &q, "{\"execute\":\"cont\"}"));
  bench_samples_add (restore, (double) (bench_now () - t0));
  bench_qemu_end (bench, &q, pid);
  g_unlink (copy);
}

/* Restores the template with a bare QEMU @runs times into @restore: the
 * daemon (with [sandbox] enabled=false) starts one more machine warm for
 * its command line. */
static void
bare_template_runs (Bench *bench, const char *layout, const char *config, guint runs,
                    BenchSamples *restore)
{
  g_autofree char *open = g_strconcat (config, "[sandbox]\nenabled=false\n", NULL);
  g_autofree char *name = g_strdup_printf ("bench-w%05u", ++bench->machine_seq);
  g_autofree char *text = spec (bench, name, layout, "warm");
  g_autofree char *scratch = g_build_filename (mv_test_env_dir (bench->env), "bare-warm", NULL);
  g_autoptr (sd_bus_message) created = NULL, deleted = NULL, id_reply = NULL;
  g_autoptr (GPtrArray) daemon_argv = NULL, argv = NULL;
  g_autofree char *template = NULL, *id = NULL;
  const char *path = NULL;
  guint n;

  mv_test_env_write_config (bench->env, open);
  bench_daemon_start (bench);
  g_free (only_template (bench, &n));
  if (n == 0)
    bench_fail (bench, "no warm template to restore");
  created = bench_call (bench, bench->bus, MV_BUS_NAME, MV_MANAGER_PATH, MV_MANAGER_IFACE,
                        "CreateMachine", "st", text, (uint64_t) MV_CREATE_START);
  if (sd_bus_message_read (created, "o", &path) < 0)
    bench_fail (bench, "CreateMachine returned no path");
  id = bench_get_string (bench, bench->bus, MV_BUS_NAME, path, MV_MACHINE_IFACE, "Id");
  daemon_argv = argv_of_process_with (bench, id);
  /* Earlier rows may have left templates of other shapes: this row's is
   * the one its machine was restored from. */
  template = template_restored (bench, daemon_argv);
  deleted = bench_call (bench, bench->bus, MV_BUS_NAME, path, MV_MACHINE_IFACE, "Delete", "b", 1);
  bench_daemon_stop (bench);

  g_mkdir_with_parents (scratch, 0700);
  argv = bare_argv (bench, daemon_argv, template, scratch);
  for (guint i = 0; i < runs; i++)
    bare_restore_template (bench, argv, template, scratch, restore);
  mv_remove_tree (scratch, NULL);
}

void
bench_row_warm (Bench *bench)
{
  g_autofree char *layout = g_build_filename (bench->build_dir, "tests", "guest", "oci", NULL);
  g_autofree char *index = g_build_filename (layout, "index.json", NULL);
  g_autofree char *kernel = NULL, *initramfs = NULL, *config = NULL;
  g_autoptr (BenchSamples) warm = bench_samples_new ();
  g_autoptr (BenchSamples) cold = bench_samples_new ();
  g_autoptr (BenchSamples) bare_restore = bench_samples_new ();
  g_autofree char *qemu = g_find_program_in_path ("qemu-system-x86_64");
  BenchResult *r;
  guint templates;
  g_autofree char *first_from = NULL;

  if (bench->smoke || !qemu || !bench->agent_guest_dir || !g_file_test (index, G_FILE_TEST_EXISTS))
    {
      g_print ("[21] skipped: %s\n", bench->smoke ? "smoke mode boots no real guest"
                                                  : "no QEMU, agent guest (--agent-guest-dir) "
                                                    "or test image");
      return;
    }
  kernel = g_build_filename (bench->agent_guest_dir, "vmlinuz", NULL);
  initramfs = g_build_filename (bench->agent_guest_dir, "initramfs.img", NULL);
  config = g_strdup_printf ("# row 21: warm starts, microvmd's guest under TCG\n"
                            "[qemu]\naccel=tcg\n[guest]\nkernel=%s\ninitramfs=%s\n",
                            kernel, initramfs);
  mv_test_env_write_config (bench->env, config);
  bench_daemon_start (bench);
  /* Not counted: the image pulled, the template built behind the start,
   * unless an earlier row's machines of this shape built it already.
   * Earlier rows may have left templates of other shapes too. */
  templates = count_templates (bench);
  create_running_from (bench, layout, "auto", NULL, &first_from);
  for (guint i = 0; i < 1200 && !g_str_equal (first_from, "warm") &&
                    count_templates (bench) == templates; i++)
    g_usleep (100 * 1000);
  if (!g_str_equal (first_from, "warm") && count_templates (bench) == templates)
    bench_fail (bench, "no warm template was built within 120 s");
  for (guint i = 0; i < RUNS; i++)
    {
      gboolean warm_first = i % 2 == 0;

      if (warm_first)
        bench_samples_add (warm, create_running (bench, layout, "auto", "warm"));
      bench_samples_add (cold, create_running (bench, layout, "cold", "cold"));
      if (!warm_first)
        bench_samples_add (warm, create_running (bench, layout, "auto", "warm"));
      g_print ("[21] run %u of %u: %.2f s warm, %.2f s cold\n", i + 1, RUNS,
               g_array_index (warm->values, double, i) / 1e6,
               g_array_index (cold->values, double, i) / 1e6);
    }
  bench_daemon_stop (bench);
  bare_template_runs (bench, layout, config, RUNS, bare_restore);
  bench_clear_state (bench);
  mv_test_env_write_config (bench->env, BENCH_BASE_CONFIG);

  r = bench_report_add (bench->report, ROW, "21-warm-vs-bare",
                        "create→Running from the warm template (QEMU TCG, image, agent ready)",
                        "µs", -1, bench_samples_copy (warm),
                        "bare QEMU restoring the same template (the daemon's command line, "
                        "-incoming, cont)", g_steal_pointer (&bare_restore));
  bench_result_set_note (r, "the limit of a warm start: the bare side runs the daemon's own "
                            "QEMU command line for the template from a scratch directory, its "
                            "overlay disk copied before the clock starts; it neither tells an "
                            "agent anything nor waits for one");
  bench_result_print (r);
  r = bench_report_add (bench->report, ROW, "21-warm",
                        "create→Running from the warm template (QEMU TCG, image, agent ready)",
                        "µs", -1, g_steal_pointer (&warm),
                        "the same machine with start_mode cold", g_steal_pointer (&cold));
  bench_result_set_note (r, "microvmd's kernel + initramfs, the test image, `sleep 1000000` as "
                            "the workload; the warm side restores the template (its memory "
                            "file and a copy of its overlay disk), then gives the agent the "
                            "machine's identity and workload; runs interleaved, every machine "
                            "deleted, forced, after its run");
  bench_result_print (r);
}
