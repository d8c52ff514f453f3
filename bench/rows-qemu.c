/* #7: real guests (QEMU under TCG) through the daemon, against the same
 * guest started and restored with a bare QEMU command line and QMP.
 *
 * The daemon's figures need its qemu backend (Manager.Hypervisors lists
 * "qemu") and, for standby, a Standby method; without them the row says
 * "not measured" and why. The bare-QEMU baselines need only the test guest
 * (tests/guest/build.sh OUTDIR, passed as --guest-dir). */
#include "bare-qemu.h"

#include "names.h"

#include <string.h>
#include <sys/wait.h>

#include <glib/gstdio.h>

/* Bare QEMU: boot to the ready marker; save (stop, migrate to a file,
 * quit); restore (-incoming, wait for paused, cont). */
static void
bare_qemu (Bench *bench, guint runs, BenchSamples *boot, BenchSamples *restore)
{
  g_autofree char *dir = g_build_filename (mv_test_env_dir (bench->env), "bare-qemu", NULL);
  g_autofree char *state = g_build_filename (dir, "saved.state", NULL);
  g_autofree char *save_uri = g_strdup_printf ("{\"execute\":\"migrate\",\"arguments\":{\"uri\":\"exec:cat > %s\"}}", state);
  g_autofree char *incoming = g_strdup_printf ("exec:cat %s", state);
  g_autofree char *console = g_build_filename (dir, "console.log", NULL);
  g_autofree char *qmp_path = g_build_filename (dir, "qmp.sock", NULL);

  g_mkdir_with_parents (dir, 0700);
  for (guint i = 0; i < runs; i++)
    {
      BenchQmp q = { 0 };
      gint64 t0;
      GPid pid;

      g_unlink (console);
      t0 = bench_now ();
      pid = bench_qemu_spawn (bench, dir, 256, NULL);
      bench_vmm_wait_console (bench, dir, pid);
      bench_samples_add (boot, (double) (bench_now () - t0));

      bench_qmp_connect (bench, &q, qmp_path, pid);
      json_node_unref (bench_qmp_execute (bench, &q, "{\"execute\":\"stop\"}"));
      json_node_unref (bench_qmp_execute (bench, &q, save_uri));
      while (!bench_qmp_migration_done (bench, &q))
        g_usleep (5000);
      bench_qemu_end (bench, &q, pid);

      t0 = bench_now ();
      pid = bench_qemu_spawn (bench, dir, 256, incoming);
      bench_qmp_connect (bench, &q, qmp_path, pid);
      while (!bench_qmp_status_is (bench, &q, "paused"))
        g_usleep (2000);
      json_node_unref (bench_qmp_execute (bench, &q, "{\"execute\":\"cont\"}"));
      bench_samples_add (restore, (double) (bench_now () - t0));
      bench_qemu_end (bench, &q, pid);
    }
}

static gboolean
daemon_has_qemu (Bench *bench, char **listed)
{
  g_autoptr (sd_bus_message) reply = NULL;
  sd_bus_error error = SD_BUS_ERROR_NULL;
  g_autoptr (GString) all = g_string_new (NULL);
  gboolean found = FALSE;
  const char *type, *version;

  if (sd_bus_get_property (bench->bus, MV_BUS_NAME, MV_MANAGER_PATH, MV_MANAGER_IFACE,
                           "Hypervisors", &error, &reply, "a(ss)") < 0)
    bench_fail (bench, "cannot read Hypervisors: %s", error.message);
  sd_bus_message_enter_container (reply, 'a', "(ss)");
  while (sd_bus_message_read (reply, "(ss)", &type, &version) > 0)
    {
      g_string_append_printf (all, "%s%s %s", all->len ? ", " : "", type, version);
      found |= g_str_equal (type, "qemu");
    }
  *listed = g_strdup (all->str);
  return found;
}

static gboolean
machine_has_method (Bench *bench, const char *path, const char *method)
{
  g_autoptr (sd_bus_message) reply = bench_call (bench, bench->bus, MV_BUS_NAME, path,
                                                 "org.freedesktop.DBus.Introspectable", "Introspect", NULL);
  const char *xml = NULL;
  g_autofree char *needle = g_strdup_printf ("<method name=\"%s\"", method);

  sd_bus_message_read (reply, "s", &xml);
  return xml && strstr (xml, needle);
}

static void
daemon_qemu (Bench *bench, guint runs, BenchSamples *create, BenchSamples *wake, char **wake_reason)
{
  g_autofree char *kernel = g_build_filename (bench->guest_dir, "vmlinuz", NULL);
  g_autofree char *initrd = g_build_filename (bench->guest_dir, "initrd.img", NULL);

  for (guint i = 0; i < runs; i++)
    {
      g_autofree char *extra = g_strdup_printf ("\"hypervisor_type\":\"qemu\",\"kernel\":\"%s\",\"initrd\":\"%s\","
                                                "\"kernel_args\":\"%s\",\"memory_bytes\":268435456,"
                                                "\"readiness\":\"console:%s\"", kernel, initrd,
                                                BENCH_QEMU_KERNEL_ARGS, BENCH_READY_MARKER);
      g_autofree char *spec = g_strdup_printf ("{\"name\":\"bench-q%05u\",%s}", ++bench->machine_seq, extra);
      g_autoptr (sd_bus_message) reply = NULL;
      g_autofree char *path = NULL;
      const char *p;
      gint64 t0 = bench_now ();

      reply = bench_call (bench, bench->bus, MV_BUS_NAME, MV_MANAGER_PATH, MV_MANAGER_IFACE,
                          "CreateMachine", "st", spec, (uint64_t) MV_CREATE_START);
      bench_samples_add (create, (double) (bench_now () - t0));
      sd_bus_message_read (reply, "o", &p);
      path = g_strdup (p);

      if (!machine_has_method (bench, path, "Standby"))
        {
          if (!*wake_reason)
            *wake_reason = g_strdup ("the daemon's Machine interface has no Standby method yet");
        }
      else
        {
          g_autoptr (sd_bus_message) r1 = bench_call (bench, bench->bus, MV_BUS_NAME, path,
                                                      MV_MACHINE_IFACE, "Standby", NULL);
          g_autoptr (sd_bus_message) r2 = NULL;
          t0 = bench_now ();
          r2 = bench_call (bench, bench->bus, MV_BUS_NAME, path, MV_MACHINE_IFACE, "Start", NULL);
          bench_samples_add (wake, (double) (bench_now () - t0));
        }
      g_clear_pointer (&reply, sd_bus_message_unref);
      reply = bench_call (bench, bench->bus, MV_BUS_NAME, path, MV_MACHINE_IFACE, "Delete", "b", 1);
    }
}

void
bench_row_qemu (Bench *bench)
{
  g_autofree char *hypervisors = NULL;
  g_autofree char *no_daemon = NULL, *no_guest = NULL, *wake_reason = NULL;
  g_autofree char *qemu = g_find_program_in_path (BENCH_QEMU);
  guint runs = 3;
  BenchSamples *boot = NULL, *restore = NULL;
  BenchSamples *create = NULL, *wake = NULL;
  BenchResult *r;

  if (!daemon_has_qemu (bench, &hypervisors))
    no_daemon = g_strdup_printf ("the daemon does not report the qemu hypervisor (Hypervisors: %s)", hypervisors);
  if (bench->smoke)
    no_guest = g_strdup ("smoke mode boots no real guest");
  else if (!qemu)
    no_guest = g_strdup (BENCH_QEMU " is not installed");
  else if (!bench->guest_dir)
    no_guest = g_strdup ("no test guest given (tests/guest/build.sh OUTDIR, then --guest-dir OUTDIR)");
  else
    {
      g_autofree char *k = g_build_filename (bench->guest_dir, "vmlinuz", NULL);
      g_autofree char *i = g_build_filename (bench->guest_dir, "initrd.img", NULL);
      if (!g_file_test (k, G_FILE_TEST_EXISTS) || !g_file_test (i, G_FILE_TEST_EXISTS))
        no_guest = g_strdup_printf ("the test guest is missing from %s", bench->guest_dir);
    }

  if (!no_guest)
    {
      boot = bench_samples_new ();
      restore = bench_samples_new ();
      bare_qemu (bench, runs, boot, restore);
    }
  if (!no_guest && !no_daemon)
    {
      create = bench_samples_new ();
      wake = bench_samples_new ();
      daemon_qemu (bench, runs, create, wake, &wake_reason);
    }

  if (create)
    {
      r = bench_report_add (bench->report, "7", "7-create", "create→Running, real guest (QEMU TCG, microvm), ready marker on the console",
                            "µs", -1, create, "bare QEMU: spawn → ready marker", boot);
      bench_result_set_target (r, BENCH_TARGET_RATIO_AT_MOST, 1.05, "≤ 1.05× bare QEMU");
      boot = NULL;   /* the report has them now */
    }
  else
    {
      r = bench_report_add_not_measured (bench->report, "7", "7-create",
                                         "create→Running, real guest (QEMU TCG, microvm)",
                                         no_guest ? no_guest : no_daemon);
      g_free (r->unit);
      r->unit = g_strdup ("µs");
      r->baseline_what = g_strdup ("bare QEMU: spawn → ready marker");
      r->baseline = boot;
      boot = NULL;
      r->target_text = g_strdup ("≤ 1.05× bare QEMU");
    }
  bench_result_print (r);

  if (wake && bench_samples_count (wake) > 0)
    {
      r = bench_report_add (bench->report, "7", "7-standby", "standby→Running, real guest (Start after Standby)",
                            "µs", -1, wake, "bare QEMU: -incoming from the saved file → cont", restore);
      bench_result_set_target (r, BENCH_TARGET_RATIO_AT_MOST, 1.05, "≤ 1.05× bare QEMU");
      wake = NULL;
      restore = NULL;
    }
  else
    {
      r = bench_report_add_not_measured (bench->report, "7", "7-standby", "standby→Running, real guest",
                                         no_guest ? no_guest : no_daemon ? no_daemon : wake_reason);
      g_free (r->unit);
      r->unit = g_strdup ("µs");
      r->baseline_what = g_strdup ("bare QEMU: -incoming from the saved file → cont");
      r->baseline = restore;
      restore = NULL;
      r->target_text = g_strdup ("≤ 1.05× bare QEMU");
    }
  bench_result_print (r);
  bench_samples_free (wake);
  bench_samples_free (boot);
  bench_samples_free (restore);
}
