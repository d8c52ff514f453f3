/* #7: real guests (QEMU under TCG) through the daemon, against the same
 * guest started and restored with a bare QEMU command line and QMP.
 *
 * The daemon's figures need its qemu backend (Manager.Hypervisors lists
 * "qemu") and, for standby, a Standby method; without them the row says
 * "not measured" and why. The bare-QEMU baselines need only the test guest
 * (tests/guest/build.sh OUTDIR, passed as --guest-dir). */
#include "bench.h"

#include "names.h"

#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gio/gio.h>
#include <gio/gunixsocketaddress.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>

#define QEMU           "qemu-system-x86_64"
#define READY_MARKER   "MICROVMD-GUEST-READY"
#define KERNEL_ARGS    "console=ttyS0 tsc_early_khz=2000000 reboot=t panic=-1"
#define BOOT_TIMEOUT_S 60

typedef struct {
  GSocketConnection *conn;
  GDataInputStream  *in;
} Qmp;

static void
qmp_close (Qmp *q)
{
  g_clear_object (&q->in);
  g_clear_object (&q->conn);
}

/* Sends @command and returns the "return" member of its answer; events in
 * between are skipped. */
static JsonNode *
qmp_execute (Bench *bench, Qmp *q, const char *command)
{
  GOutputStream *out = g_io_stream_get_output_stream (G_IO_STREAM (q->conn));
  g_autoptr (GError) error = NULL;
  g_autofree char *line = g_strconcat (command, "\n", NULL);

  if (!g_output_stream_write_all (out, line, strlen (line), NULL, NULL, &error))
    bench_fail (bench, "QMP write: %s", error->message);
  for (;;)
    {
      g_autofree char *answer = g_data_input_stream_read_line_utf8 (q->in, NULL, NULL, &error);
      g_autoptr (JsonNode) node = NULL;
      JsonObject *obj;

      if (!answer)
        bench_fail (bench, "QMP: connection closed during %s", command);
      node = json_from_string (answer, NULL);
      if (!node || !JSON_NODE_HOLDS_OBJECT (node))
        continue;
      obj = json_node_get_object (node);
      if (json_object_has_member (obj, "error"))
        bench_fail (bench, "QMP %s: %s", command, answer);
      if (json_object_has_member (obj, "return"))
        return json_node_copy (json_object_get_member (obj, "return"));
    }
}

static void
qmp_connect (Bench *bench, Qmp *q, const char *path, GPid pid)
{
  g_autoptr (GSocketClient) client = g_socket_client_new ();
  g_autoptr (GSocketAddress) addr = g_unix_socket_address_new (path);
  gint64 deadline = bench_now () + 20 * G_USEC_PER_SEC;
  g_autoptr (GError) error = NULL;
  g_autofree char *greeting = NULL;

  while (!(q->conn = g_socket_client_connect (client, G_SOCKET_CONNECTABLE (addr), NULL, NULL)))
    {
      if (bench_now () > deadline || waitpid (pid, NULL, WNOHANG) == pid)
        bench_fail (bench, "cannot reach QEMU's QMP socket %s", path);
      g_usleep (2000);
    }
  q->in = g_data_input_stream_new (g_io_stream_get_input_stream (G_IO_STREAM (q->conn)));
  greeting = g_data_input_stream_read_line_utf8 (q->in, NULL, NULL, &error);
  if (!greeting)
    bench_fail (bench, "no QMP greeting");
  json_node_unref (qmp_execute (bench, q, "{\"execute\":\"qmp_capabilities\"}"));
}

/* A session of its own, as the daemon gives its VMMs: with the kernel's
 * autogroup scheduling, a CPU share of its own like theirs. */
static void
child_setup (gpointer data)
{
  setsid ();
  prctl (PR_SET_PDEATHSIG, SIGKILL);
}

static GPid
spawn_qemu (Bench *bench, const char *dir, const char *incoming)
{
  g_autofree char *kernel = g_build_filename (bench->guest_dir, "vmlinuz", NULL);
  g_autofree char *initrd = g_build_filename (bench->guest_dir, "initrd.img", NULL);
  g_autofree char *console = g_strdup_printf ("file,id=con,path=%s/console.log", dir);
  g_autofree char *qmp = g_strdup_printf ("unix:%s/qmp.sock,server=on,wait=off", dir);
  g_autofree char *agent = g_strdup_printf ("socket,id=agent,path=%s/agent.sock,server=on,wait=off", dir);
  g_autofree char *log = g_build_filename (dir, "qemu.log", NULL);
  g_autoptr (GPtrArray) argv = g_ptr_array_new ();
  g_autoptr (GError) error = NULL;
  GPid pid = 0;
  const char *fixed[] = {
    QEMU, "-M", "microvm", "-accel", "tcg", "-m", "256", "-smp", "1", "-nodefaults",
    "-no-user-config", "-display", "none", "-no-reboot", "-kernel", kernel, "-initrd", initrd,
    "-append", KERNEL_ARGS, "-chardev", console, "-serial", "chardev:con",
    "-device", "virtio-serial-device", "-chardev", agent,
    "-device", "virtserialport,chardev=agent,name=org.microvmd1.agent", "-qmp", qmp,
  };

  for (gsize i = 0; i < G_N_ELEMENTS (fixed); i++)
    g_ptr_array_add (argv, (gpointer) fixed[i]);
  if (incoming)
    {
      g_ptr_array_add (argv, (gpointer) "-incoming");
      g_ptr_array_add (argv, (gpointer) incoming);
    }
  g_ptr_array_add (argv, NULL);
  if (!g_spawn_async (dir, (char **) argv->pdata, NULL,
                      G_SPAWN_DO_NOT_REAP_CHILD | G_SPAWN_SEARCH_PATH | G_SPAWN_STDOUT_TO_DEV_NULL |
                      G_SPAWN_STDERR_TO_DEV_NULL, child_setup, NULL, &pid, &error))
    bench_fail (bench, "cannot start QEMU: %s", error->message);
  (void) log;
  return pid;
}

static void
wait_console (Bench *bench, const char *dir, GPid pid)
{
  g_autofree char *path = g_build_filename (dir, "console.log", NULL);
  gint64 deadline = bench_now () + BOOT_TIMEOUT_S * G_USEC_PER_SEC;

  for (;;)
    {
      g_autofree char *text = NULL;

      if (g_file_get_contents (path, &text, NULL, NULL) && strstr (text, READY_MARKER))
        return;
      if (bench_now () > deadline || waitpid (pid, NULL, WNOHANG) == pid)
        bench_fail (bench, "the guest did not print %s (console: %s)", READY_MARKER, path);
      g_usleep (2000);
    }
}

static gboolean
migration_done (Bench *bench, Qmp *q)
{
  g_autoptr (JsonNode) r = qmp_execute (bench, q, "{\"execute\":\"query-migrate\"}");
  const char *status = json_object_get_string_member_with_default (json_node_get_object (r), "status", "");

  if (g_str_equal (status, "failed"))
    bench_fail (bench, "QEMU's migration to a file failed");
  return g_str_equal (status, "completed");
}

static gboolean
vm_status_is (Bench *bench, Qmp *q, const char *want)
{
  g_autoptr (JsonNode) r = qmp_execute (bench, q, "{\"execute\":\"query-status\"}");
  return g_strcmp0 (json_object_get_string_member_with_default (json_node_get_object (r), "status", ""), want) == 0;
}

static void
end_qemu (Bench *bench, Qmp *q, GPid pid)
{
  json_node_unref (qmp_execute (bench, q, "{\"execute\":\"quit\"}"));
  qmp_close (q);
  waitpid (pid, NULL, 0);
}

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
      Qmp q = { 0 };
      gint64 t0;
      GPid pid;

      g_unlink (console);
      t0 = bench_now ();
      pid = spawn_qemu (bench, dir, NULL);
      wait_console (bench, dir, pid);
      bench_samples_add (boot, (double) (bench_now () - t0));

      qmp_connect (bench, &q, qmp_path, pid);
      json_node_unref (qmp_execute (bench, &q, "{\"execute\":\"stop\"}"));
      json_node_unref (qmp_execute (bench, &q, save_uri));
      while (!migration_done (bench, &q))
        g_usleep (5000);
      end_qemu (bench, &q, pid);

      t0 = bench_now ();
      pid = spawn_qemu (bench, dir, incoming);
      qmp_connect (bench, &q, qmp_path, pid);
      while (!vm_status_is (bench, &q, "paused"))
        g_usleep (2000);
      json_node_unref (qmp_execute (bench, &q, "{\"execute\":\"cont\"}"));
      bench_samples_add (restore, (double) (bench_now () - t0));
      end_qemu (bench, &q, pid);
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
                                                KERNEL_ARGS, READY_MARKER);
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
  g_autofree char *qemu = g_find_program_in_path (QEMU);
  guint runs = 3;
  BenchSamples *boot = NULL, *restore = NULL;
  BenchSamples *create = NULL, *wake = NULL;
  BenchResult *r;

  if (!daemon_has_qemu (bench, &hypervisors))
    no_daemon = g_strdup_printf ("the daemon does not report the qemu hypervisor (Hypervisors: %s)", hypervisors);
  if (bench->smoke)
    no_guest = g_strdup ("smoke mode boots no real guest");
  else if (!qemu)
    no_guest = g_strdup (QEMU " is not installed");
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
