/* #21: warm starts. create→Running through the daemon (QEMU under TCG,
 * microvmd's kernel and initramfs, readiness by the agent, `sleep
 * 1000000` as the workload) of machines booted from the test image
 * (BUILD/tests/guest/oci): started from the warm template of their shape
 * (start_mode auto, StartedFrom "warm") against the same machine with
 * start_mode cold, runs interleaved. A first machine, not counted, pulls
 * the image and has the template built behind its start; each machine
 * is deleted, forced, after its run.
 *
 *   21-warm-vs-bare  the same warm starts against a bare QEMU restoring a
 *                    frozen guest of the same memory (256 MiB): spawn with
 *                    -incoming from a file, then cont (bare-qemu.h). The
 *                    frozen guest is the test guest (--guest-dir), not the
 *                    template: a bare QEMU would need the daemon's device
 *                    layout to take the template itself. The limit of a
 *                    warm start, which also copies the overlay disk and
 *                    waits for the agent to be told who it is.
 *
 * --smoke boots no guest. */
#include "bare-qemu.h"

#include "names.h"

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
 * Running and started as @mode says; then Delete, forced. */
static double
create_running (Bench *bench, const char *layout, const char *mode, const char *expect_from)
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
  deleted = bench_call (bench, bench->bus, MV_BUS_NAME, path, MV_MACHINE_IFACE, "Delete", "b", 1);
  return (double) (t1 - t0);
}

static guint
count_templates (Bench *bench)
{
  g_autofree char *dir = g_build_filename (mv_test_env_state_dir (bench->env), MV_WARM_DIR, NULL);
  g_autoptr (GDir) d = g_dir_open (dir, 0, NULL);
  const char *name;
  guint n = 0;

  while (d && (name = g_dir_read_name (d)))
    n += name[0] != '.';
  return n;
}

void
bench_row_warm (Bench *bench)
{
  g_autofree char *layout = g_build_filename (bench->build_dir, "tests", "guest", "oci", NULL);
  g_autofree char *index = g_build_filename (layout, "index.json", NULL);
  g_autofree char *kernel = NULL, *initramfs = NULL, *config = NULL;
  g_autoptr (BenchSamples) warm = bench_samples_new ();
  g_autoptr (BenchSamples) cold = bench_samples_new ();
  g_autoptr (BenchSamples) bare_boot = bench_samples_new ();
  g_autoptr (BenchSamples) bare_restore = bench_samples_new ();
  g_autofree char *qemu = g_find_program_in_path ("qemu-system-x86_64");
  BenchResult *r;

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
  /* Not counted: the image pulled, the template built behind the start. */
  create_running (bench, layout, "auto", "cold");
  for (guint i = 0; i < 1200 && count_templates (bench) == 0; i++)
    g_usleep (100 * 1000);
  if (count_templates (bench) == 0)
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
  bench_clear_state (bench);
  mv_test_env_write_config (bench->env, BENCH_BASE_CONFIG);
  if (bench->guest_dir)
    for (guint i = 0; i < RUNS; i++)
      bench_bare_qemu_run (bench, bare_boot, bare_restore);

  if (bench_samples_count (bare_restore) > 0)
    {
      r = bench_report_add (bench->report, ROW, "21-warm-vs-bare",
                            "create→Running from the warm template (QEMU TCG, image, agent ready)",
                            "µs", -1, bench_samples_copy (warm),
                            "bare QEMU restoring a frozen 256 MiB guest (-incoming, cont)",
                            g_steal_pointer (&bare_restore));
      bench_result_set_note (r, "the limit of a warm start: the bare side restores the test "
                                "guest (--guest-dir) of the same memory, not the template, and "
                                "neither copies a disk nor tells an agent anything");
      bench_result_print (r);
    }
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
