/* #9: what the wall around a VMM costs: Start → Running of a machine
 * whose VMM is walled in (a user of its own, its own mount namespace and
 * root, and for QEMU its seccomp filter), against the same with
 * [sandbox] enabled=false; for QEMU under TCG booting the test guest and
 * for the Firecracker test VMM, whose guest is simulated, so that the
 * wall's own cost is not lost in a boot. */
#include "bench.h"

#include "names.h"

#include <string.h>

#define READY_MARKER  "MICROVMD-GUEST-READY"
#define QEMU_ARGS     "console=ttyS0 tsc_early_khz=2000000 reboot=t panic=-1"
/* The simulated guest is ready at once. */

typedef struct {
  const char *type;         /* hypervisor_type */
  const char *what;
  const char *id;
  guint       rounds;       /* each: the daemon walled, and not, in turn */
  guint       runs, smoke_runs; /* per round and side */
} Subject;

static char *
config_for (Bench *bench, const Subject *s, gboolean walled)
{
  g_autofree char *fake = g_build_filename (bench->build_dir, "tests", "vmm", "fake-firecracker",
                                            NULL);

  if (g_str_equal (s->type, "qemu"))
    return g_strdup_printf ("[qemu]\naccel=tcg\n[sandbox]\nenabled=%s\n",
                            walled ? "true" : "false");
  return g_strdup_printf ("[firecracker]\nbinaries=%s\n[sandbox]\nenabled=%s\n", fake,
                          walled ? "true" : "false");
}

/* Start → Running, @runs times, into @samples, with the daemon
 * configured as @walled says. Each machine is created stopped, started,
 * then deleted. */
static void
measure (Bench *bench, const Subject *s, gboolean walled, guint runs, BenchSamples *samples)
{
  gboolean real = g_str_equal (s->type, "qemu");
  const char *dir = real ? bench->guest_dir : mv_test_env_images_dir (bench->env);
  g_autofree char *config = config_for (bench, s, walled);
  g_autofree char *kernel = g_build_filename (dir, real ? "vmlinuz" : "bench-vmlinuz", NULL);
  g_autofree char *initrd = g_build_filename (dir, real ? "initrd.img" : "bench-initrd", NULL);

  /* The simulated guest needs files, not a kernel. */
  if (!real && (!g_file_set_contents (kernel, "kernel", -1, NULL) ||
                !g_file_set_contents (initrd, "initrd", -1, NULL)))
    bench_fail (bench, "cannot write %s", kernel);

  mv_test_env_write_config (bench->env, config);
  bench_daemon_start (bench);
  for (guint i = 0; i < runs; i++)
    {
      g_autofree char *spec = g_strdup_printf (
        "{\"name\":\"bench-w%05u\",\"hypervisor_type\":\"%s\",\"kernel\":\"%s\","
        "\"initrd\":\"%s\",\"kernel_args\":\"%s\",\"memory_bytes\":268435456,"
        "\"readiness\":\"console:" READY_MARKER "\"}",
        ++bench->machine_seq, s->type, kernel, initrd, real ? QEMU_ARGS : BENCH_FAKE_KERNEL_ARGS);
      g_autoptr (sd_bus_message) created = NULL;
      g_autoptr (sd_bus_message) started = NULL;
      g_autoptr (sd_bus_message) deleted = NULL;
      g_autofree char *path = NULL;
      const char *p = NULL;
      gint64 t0;

      created = bench_call (bench, bench->bus, MV_BUS_NAME, MV_MANAGER_PATH, MV_MANAGER_IFACE,
                            "CreateMachine", "st", spec, (uint64_t) 0);
      sd_bus_message_read (created, "o", &p);
      path = g_strdup (p);
      t0 = bench_now ();
      started = bench_call (bench, bench->bus, MV_BUS_NAME, path, MV_MACHINE_IFACE, "Start", NULL);
      bench_samples_add (samples, (double) (bench_now () - t0));
      deleted = bench_call (bench, bench->bus, MV_BUS_NAME, path, MV_MACHINE_IFACE, "Delete", "b",
                            1);
    }
  bench_daemon_stop (bench);
  bench_clear_state (bench);
}

static void
row (Bench *bench, const Subject *s)
{
  g_autofree char *what = g_strdup_printf ("Start→Running, VMM walled in (%s)", s->what);
  g_autofree char *qemu = g_find_program_in_path ("qemu-system-x86_64");
  const char *skip = NULL;
  BenchResult *r;

  if (g_str_equal (s->type, "qemu") && bench->smoke)
    skip = "smoke mode boots no real guest";
  else if (g_str_equal (s->type, "qemu") && !qemu)
    skip = "qemu-system-x86_64 is not installed";
  else if (g_str_equal (s->type, "qemu") && !bench->guest_dir)
    skip = "no test guest given (tests/guest/build.sh OUTDIR, then --guest-dir OUTDIR)";

  if (skip)
    r = bench_report_add_not_measured (bench->report, "9", s->id, what, skip);
  else
    {
      guint runs = bench->smoke ? s->smoke_runs : s->runs;
      guint rounds = bench->smoke ? 1 : s->rounds;
      BenchSamples *open = bench_samples_new (), *walled = bench_samples_new ();

      /* The daemon is restarted between the sides, so they take turns by
       * rounds, in the order A B B A ..., and the i-th start of one side
       * is paired with the i-th of the other: drift hits both. */
      for (guint i = 0; i < rounds; i++)
        {
          measure (bench, s, i % 2 != 0, runs, i % 2 != 0 ? walled : open);
          measure (bench, s, i % 2 == 0, runs, i % 2 == 0 ? walled : open);
        }

      r = bench_report_add (bench->report, "9", s->id, what, "µs", -1, walled,
                            "the same with [sandbox] enabled=false", open);
      if (g_str_equal (s->type, "qemu"))
        {
          bench_result_set_target (r, BENCH_TARGET_RATIO_AT_MOST, 1.05, "≤ 1.05× unwalled");
          bench_result_judge_on_interval (r);
        }
      else
        bench_result_set_target (r, BENCH_TARGET_EXCESS_AT_MOST, 20000,
                                 "≤ 20 ms more than unwalled");
    }
  bench_result_print (r);
}

void
bench_row_sandbox (Bench *bench)
{
  static const Subject subjects[] = {
    { "qemu", "QEMU TCG, microvm, real guest", "9-sandbox-qemu", 4, 4, 1 },
    { "firecracker", "Firecracker test VMM, simulated guest", "9-sandbox-firecracker", 3, 10, 3 },
  };

  for (guint i = 0; i < G_N_ELEMENTS (subjects); i++)
    row (bench, &subjects[i]);
  /* The configuration the other rows expect. */
  mv_test_env_write_config (bench->env, BENCH_BASE_CONFIG);
}
