/* The bare QEMU of the baselines (bare-qemu.h). */
#include "bare-qemu.h"

#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gio/gunixsocketaddress.h>

#define BOOT_TIMEOUT_S 60

void
bench_qmp_close (BenchQmp *q)
{
  g_clear_object (&q->in);
  g_clear_object (&q->conn);
}

JsonNode *
bench_qmp_execute (Bench *bench, BenchQmp *q, const char *command)
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

void
bench_qmp_connect (Bench *bench, BenchQmp *q, const char *path, GPid pid)
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
  json_node_unref (bench_qmp_execute (bench, q, "{\"execute\":\"qmp_capabilities\"}"));
}

gboolean
bench_qmp_migration_done (Bench *bench, BenchQmp *q)
{
  g_autoptr (JsonNode) r = bench_qmp_execute (bench, q, "{\"execute\":\"query-migrate\"}");
  const char *status = json_object_get_string_member_with_default (json_node_get_object (r), "status", "");

  if (g_str_equal (status, "failed"))
    bench_fail (bench, "QEMU's migration to a file failed");
  return g_str_equal (status, "completed");
}

gboolean
bench_qmp_status_is (Bench *bench, BenchQmp *q, const char *want)
{
  g_autoptr (JsonNode) r = bench_qmp_execute (bench, q, "{\"execute\":\"query-status\"}");
  return g_strcmp0 (json_object_get_string_member_with_default (json_node_get_object (r), "status", ""), want) == 0;
}

/* With the kernel's autogroup scheduling, a session of its own gives the
 * VMM a CPU share of its own, as the daemon's VMMs have. */
void
bench_vmm_child_setup (gpointer data)
{
  setsid ();
  prctl (PR_SET_PDEATHSIG, SIGKILL);
}

GPid
bench_qemu_spawn (Bench *bench, const char *dir, guint memory_mib, const char *incoming)
{
  g_autofree char *kernel = g_build_filename (bench->guest_dir, "vmlinuz", NULL);
  g_autofree char *initrd = g_build_filename (bench->guest_dir, "initrd.img", NULL);
  g_autofree char *memory = g_strdup_printf ("%u", memory_mib);
  g_autofree char *console = g_strdup_printf ("file,id=con,path=%s/console.log", dir);
  g_autofree char *qmp = g_strdup_printf ("unix:%s/qmp.sock,server=on,wait=off", dir);
  g_autofree char *agent = g_strdup_printf ("socket,id=agent,path=%s/agent.sock,server=on,wait=off", dir);
  g_autoptr (GPtrArray) argv = g_ptr_array_new ();
  g_autoptr (GError) error = NULL;
  GPid pid = 0;
  const char *fixed[] = {
    BENCH_QEMU, "-M", "microvm", "-accel", "tcg", "-m", memory, "-smp", "1", "-nodefaults",
    "-no-user-config", "-display", "none", "-no-reboot", "-kernel", kernel, "-initrd", initrd,
    "-append", BENCH_QEMU_KERNEL_ARGS, "-chardev", console, "-serial", "chardev:con",
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
                      G_SPAWN_STDERR_TO_DEV_NULL, bench_vmm_child_setup, NULL, &pid, &error))
    bench_fail (bench, "cannot start QEMU: %s", error->message);
  return pid;
}

void
bench_vmm_wait_console (Bench *bench, const char *dir, GPid pid)
{
  g_autofree char *path = g_build_filename (dir, "console.log", NULL);
  gint64 deadline = bench_now () + BOOT_TIMEOUT_S * G_USEC_PER_SEC;

  for (;;)
    {
      g_autofree char *text = NULL;

      if (g_file_get_contents (path, &text, NULL, NULL) && strstr (text, BENCH_READY_MARKER))
        return;
      if (bench_now () > deadline || waitpid (pid, NULL, WNOHANG) == pid)
        bench_fail (bench, "the guest did not print %s (console: %s)", BENCH_READY_MARKER, path);
      g_usleep (2000);
    }
}

void
bench_qemu_end (Bench *bench, BenchQmp *q, GPid pid)
{
  json_node_unref (bench_qmp_execute (bench, q, "{\"execute\":\"quit\"}"));
  bench_qmp_close (q);
  waitpid (pid, NULL, 0);
}
