/* microvmd-bench: measures microvmd side by side with its baselines in one
 * run and writes OUTDIR/results.json and OUTDIR/results.md.
 *
 *   microvmd-bench --out OUTDIR [--smoke] [--no-libvirt] [--guest-dir DIR]
 *                  [--agent-guest-dir DIR --rootfs FILE] [--rows LIST]
 *
 * Runs as root: it starts a private system bus, polkitd, the daemon under
 * test (built with the instant "test" runtime) and the baselines. --smoke
 * runs every row briefly, without the libvirt peer and real guests, to
 * check that the benchmark still works (#7 boots one pair of real guests
 * only if --guest-dir is given; #11 pulls a small image and boots
 * nothing; #12 makes 100 DNS queries of each server; #13 and #14 run once
 * each with the test runtime instead of QEMU; #15 only the Cloud Hypervisor
 * and Firecracker test VMMs, twice each; #18 starts 20 times among 50
 * others and 20 alone; #19 resizes 3 times each way; #20 starts 5
 * machines at once, reads for 0.3 s each way, and lists 20 machines while
 * 5 cycle). --rows 7,10 runs only those rows (#2, #3 and #5 are measured
 * together; #20 fills the daemon with #2's largest N for its listing). */
#include "bench.h"

#include "config.h"

#include <locale.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

int bench_echo_main (const char *address, const char *dir);
int bench_polkit_client_main (const char *address, const char *path, guint runs);

static char *
required_env (const char *name)
{
  const char *v = g_getenv (name);

  if (!v || !*v)
    {
      g_printerr ("microvmd-bench: %s is not set (run through bench/run.sh or meson test)\n", name);
      exit (2);
    }
  return g_strdup (v);
}

/* Whether any of @rows (NULL-terminated) is to be run. */
static gboolean
wanted (const Bench *bench, const char *const *rows)
{
  if (!bench->rows)
    return TRUE;
  for (; *rows; rows++)
    if (g_strv_contains ((const char *const *) bench->rows, *rows))
      return TRUE;
  return FALSE;
}

#define WANTED(...) wanted (&bench, (const char *const[]) { __VA_ARGS__, NULL })

static void
describe_machine (Bench *bench)
{
  struct utsname u;
  g_autofree char *cpus = g_strdup_printf ("%ld", sysconf (_SC_NPROCESSORS_ONLN));
  g_autofree char *cpuinfo = NULL;

  bench_report_set_meta (bench->report, "cores", cpus);
  if (uname (&u) == 0)
    bench_report_set_meta (bench->report, "kernel", u.release);
  if (g_file_get_contents ("/proc/cpuinfo", &cpuinfo, NULL, NULL))
    {
      const char *p = strstr (cpuinfo, "model name");
      if (p && (p = strchr (p, ':')))
        {
          g_autofree char *model = g_strndup (p + 2, strcspn (p + 2, "\n"));
          bench_report_set_meta (bench->report, "cpu", model);
        }
    }
  bench_report_set_meta (bench->report, "microvmd", PACKAGE_VERSION);
  bench_report_set_meta (bench->report, "mode", bench->smoke ? "smoke" : "full");
}

int
main (int argc, char **argv)
{
  g_autofree char *outdir = NULL, *guest_dir = NULL, *agent_guest_dir = NULL, *rootfs = NULL;
  g_autofree char *rows = NULL;
  gboolean smoke = FALSE, no_libvirt = FALSE;
  g_autoptr (GError) error = NULL;
  const GOptionEntry entries[] = {
    { "out", 0, 0, G_OPTION_ARG_FILENAME, &outdir, "Where results.json and results.md go", "DIR" },
    { "smoke", 0, 0, G_OPTION_ARG_NONE, &smoke, "A seconds-long run that checks the benchmark works", NULL },
    { "no-libvirt", 0, 0, G_OPTION_ARG_NONE, &no_libvirt, "Leave out the libvirt peer", NULL },
    { "guest-dir", 0, 0, G_OPTION_ARG_FILENAME, &guest_dir, "The test guest (vmlinuz, initrd.img) for #7", "DIR" },
    { "agent-guest-dir", 0, 0, G_OPTION_ARG_FILENAME, &agent_guest_dir,
      "microvmd's guest (vmlinuz, initramfs.img) for #10 and #11", "DIR" },
    { "rootfs", 0, 0, G_OPTION_ARG_FILENAME, &rootfs, "The root disk booted with it", "FILE" },
    { "rows", 0, 0, G_OPTION_ARG_STRING, &rows, "Run only these rows, e.g. 7,10", "LIST" },
    { NULL }
  };
  g_autoptr (GOptionContext) context = NULL;
  const char *extra_policies[2] = { NULL, NULL };
  g_autofree char *policy = NULL;
  Bench bench = { 0 };
  gint64 t0 = bench_now ();

  setlocale (LC_ALL, "");
  /* Helper modes: this program re-run as a child. */
  if (argc == 4 && g_str_equal (argv[1], "--echo-service"))
    return bench_echo_main (argv[2], argv[3]);
  if (argc == 5 && g_str_equal (argv[1], "--polkit-client"))
    return bench_polkit_client_main (argv[2], argv[3], (guint) atoi (argv[4]));

  context = g_option_context_new ("- benchmark microvmd against its baselines");
  g_option_context_add_main_entries (context, entries, NULL);
  if (!g_option_context_parse (context, &argc, &argv, &error))
    {
      g_printerr ("microvmd-bench: %s\n", error->message);
      return 2;
    }
  if (!outdir)
    {
      g_printerr ("microvmd-bench: --out DIR is required\n");
      return 2;
    }

  bench.smoke = smoke;
  bench.with_libvirt = !smoke && !no_libvirt;
  bench.outdir = outdir;
  bench.source_dir = required_env ("MICROVMD_SOURCE_DIR");
  bench.build_dir = required_env ("MICROVMD_BUILD_DIR");
  /* MICROVMD_BENCH_DAEMON runs the daemon through a wrapper of one's own
   * (a profiler, strace): it is given the daemon's arguments. */
  bench.daemon_path = g_getenv ("MICROVMD_BENCH_DAEMON") && *g_getenv ("MICROVMD_BENCH_DAEMON")
                        ? g_strdup (g_getenv ("MICROVMD_BENCH_DAEMON"))
                        : g_build_filename (bench.build_dir, "tests", "integration", "microvmd-test", NULL);
  /* The daemon takes only absolute paths to its guest files, and the bare
   * QEMUs run in directories of their own. */
  bench.guest_dir = guest_dir ? g_canonicalize_filename (guest_dir, NULL) : NULL;
  bench.agent_guest_dir = agent_guest_dir ? g_canonicalize_filename (agent_guest_dir, NULL) : NULL;
  bench.rootfs = rootfs ? g_canonicalize_filename (rootfs, NULL) : NULL;
  if (rows)
    bench.rows = g_strsplit (rows, ",", -1);
  bench.report = bench_report_new ();
  describe_machine (&bench);
  if (rows)
    bench_report_set_meta (bench.report, "rows", rows);

  policy = g_build_filename (bench.source_dir, "bench", "org.microvmd1.bench.conf", NULL);
  extra_policies[0] = policy;
  bench.env = mv_test_env_new_full ((const char *const *) extra_policies);
  /* The daemon's runtime directory is where a systemd host has /run: in
   * memory. The records stay on the disk the state directory is on. */
  mv_test_env_runtime_on_tmpfs (bench.env);
  bench_report_set_meta (bench.report, "runtime directory", "tmpfs");
  mv_test_env_write_config (bench.env, BENCH_BASE_CONFIG);
  bench.bus = bench_open_bus (&bench);
  bench_echo_start (&bench);

  /* Rows on an empty daemon first; the scale rows fill it later. */
  if (WANTED ("1", "8", "6", "7", "4"))
    {
      bench_daemon_start (&bench);
      if (WANTED ("1"))
        bench_row_reads (&bench);
      if (WANTED ("8"))
        bench_row_signals (&bench);
      if (WANTED ("6"))
        bench_row_polkit (&bench);
      /* Real guests before the create row leaves a thousand test machines
       * running (and watched) in the daemon. */
      if (WANTED ("7"))
        bench_row_qemu (&bench);
      if (WANTED ("4"))
        bench_row_create (&bench);
      bench_daemon_stop (&bench);
      bench_clear_state (&bench);
    }

  if (WANTED ("9"))
    bench_row_sandbox (&bench);
  if (WANTED ("10"))
    bench_row_agent (&bench);
  if (WANTED ("11"))
    bench_row_images (&bench);
  if (WANTED ("12"))
    bench_row_dns (&bench);
  if (WANTED ("13", "14"))
    bench_rows_network (&bench, WANTED ("13"), WANTED ("14"));
  if (WANTED ("15"))
    bench_row_snapshots (&bench);
  if (WANTED ("16", "17"))
    bench_rows_observability (&bench, WANTED ("16"), WANTED ("17"));
  if (WANTED ("18", "19"))
    bench_rows_resources (&bench, WANTED ("18"), WANTED ("19"));

  if (WANTED ("20"))
    bench_rows_concurrency (&bench);
  if (WANTED ("21"))
    bench_row_warm (&bench);
  if (WANTED ("22"))
    bench_row_console (&bench);

  if (WANTED ("2", "3", "5", "20"))
    bench_rows_scale (&bench, WANTED ("2", "3", "5"), WANTED ("20"));

  bench_echo_stop (&bench);
  {
    g_autofree char *took = g_strdup_printf ("%.0f s", (bench_now () - t0) / 1e6);
    bench_report_set_meta (bench.report, "run took", took);
  }
  if (!bench_report_write (bench.report, outdir, &error))
    {
      g_printerr ("microvmd-bench: %s\n", error->message);
      return 1;
    }
  g_print ("Results in %s/results.json and %s/results.md (%.0f s)\n", outdir, outdir,
           (bench_now () - t0) / 1e6);

  sd_bus_flush_close_unref (bench.bus);
  mv_test_env_free (bench.env);
  bench_report_free (bench.report);
  g_free (bench.source_dir);
  g_free (bench.build_dir);
  g_free (bench.daemon_path);
  g_free (bench.guest_dir);
  g_free (bench.agent_guest_dir);
  g_free (bench.rootfs);
  g_free (bench.daemon_netns);
  g_strfreev (bench.rows);
  return 0;
}
