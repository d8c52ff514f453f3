/* Unit tests of the hypervisor layer that need no VMM: the accelerator
 * choice, memory resize checks, QMP messages, the VM spec's JSON. */
#include "hv-test.h"
#include "hypervisor/hypervisor.h"
#include "hypervisor/qemu.h"
#include "hypervisor/qmp.h"
#include "hypervisor/runtime-private.h"

#include <errno.h>
#include <gio/gio.h>
#include <glib/gstdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define MiB (G_GUINT64_CONSTANT (1) << 20)

/* ---- accelerator ---- */

typedef struct {
  char *dir;
  char *modules;
  char *cpuinfo;
  char *kvm;
} FakeHost;

static void
fake_host_init (FakeHost *host, gboolean kvm_device, gboolean pvm, const char *cpu_flags)
{
  g_autofree char *cpuinfo = g_strdup_printf ("processor\t: 0\nvendor_id\t: Fake\n"
                                              "flags\t\t: fpu vme de pse tsc msr %s hypervisor\n\n",
                                              cpu_flags);

  host->dir = hv_test_make_dir ();
  host->modules = g_build_filename (host->dir, "module", NULL);
  host->cpuinfo = g_build_filename (host->dir, "cpuinfo", NULL);
  host->kvm = g_build_filename (host->dir, "kvm", NULL);
  g_assert_cmpint (g_mkdir (host->modules, 0700), ==, 0);
  {
    g_autofree char *kvm_module = g_build_filename (host->modules, "kvm", NULL);
    g_assert_cmpint (g_mkdir (kvm_module, 0700), ==, 0);
  }
  if (pvm)
    {
      g_autofree char *pvm_module = g_build_filename (host->modules, "kvm_pvm", NULL);
      g_assert_cmpint (g_mkdir (pvm_module, 0700), ==, 0);
    }
  g_assert_true (g_file_set_contents (host->cpuinfo, cpuinfo, -1, NULL));
  if (kvm_device)
    g_assert_true (g_file_set_contents (host->kvm, "", 0, NULL));
}

static void
fake_host_clear (FakeHost *host)
{
  hv_test_remove_tree (host->dir);
  g_free (host->dir);
  g_free (host->modules);
  g_free (host->cpuinfo);
  g_free (host->kvm);
}

static const char *
pick (FakeHost *host, char **why)
{
  return mv_qemu_pick_accel (host->modules, host->cpuinfo, host->kvm, why);
}

static void
test_accel_no_kvm (void)
{
  FakeHost host;
  g_autofree char *why = NULL;

  fake_host_init (&host, FALSE, FALSE, "vmx");
  g_assert_cmpstr (pick (&host, &why), ==, "tcg");
  g_assert_nonnull (strstr (why, "cannot be opened"));
  fake_host_clear (&host);
}

static void
test_accel_pvm (void)
{
  FakeHost host;
  g_autofree char *why = NULL;
  g_autofree char *why2 = NULL;

  /* This machine: /dev/kvm works, kvm_pvm is loaded, no vmx/svm. */
  fake_host_init (&host, TRUE, TRUE, "sse4_2 avx2");
  g_assert_cmpstr (pick (&host, &why), ==, "tcg");
  g_assert_nonnull (strstr (why, "PVM"));
  fake_host_clear (&host);

  /* kvm_pvm decides even where the CPU claims virtualization. */
  fake_host_init (&host, TRUE, TRUE, "svm");
  g_assert_cmpstr (pick (&host, &why2), ==, "tcg");
  fake_host_clear (&host);
}

static void
test_accel_no_virtualization_flags (void)
{
  FakeHost host;
  g_autofree char *why = NULL;

  fake_host_init (&host, TRUE, FALSE, "sse4_2 vmxfake svmlike");
  g_assert_cmpstr (pick (&host, &why), ==, "tcg");
  g_assert_nonnull (strstr (why, "neither vmx nor svm"));
  fake_host_clear (&host);
}

static void
test_accel_plain_kvm (void)
{
  FakeHost host;
  g_autofree char *why = NULL;
  g_autofree char *why2 = NULL;

  fake_host_init (&host, TRUE, FALSE, "vmx sse4_2");
  g_assert_cmpstr (pick (&host, &why), ==, "kvm");
  fake_host_clear (&host);
  fake_host_init (&host, TRUE, FALSE, "svm");
  g_assert_cmpstr (pick (&host, &why2), ==, "kvm");
  fake_host_clear (&host);
}

static void
test_accel_option (void)
{
  g_autoptr (GError) error = NULL;
  MvQemuOptions tcg = { .accel = "tcg" };
  MvQemuOptions bad = { .accel = "hvf" };
  MvStarter *starter;
  const char *why = NULL;

  g_assert_null (mv_qemu_starter_new (&bad, &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
  g_assert_nonnull (strstr (error->message, "[qemu] accel"));

  starter = mv_qemu_starter_new (&tcg, NULL);
  g_assert_cmpstr (mv_qemu_starter_accel (starter, &why), ==, "tcg");
  g_assert_nonnull (why);
  /* TCG guests get the TSC rate, without which microvm often hangs. */
  g_assert_nonnull (strstr (starter->default_kernel_args (starter), "tsc_early_khz="));
  starter->free (starter);
}

/* ---- memory resize ---- */

static void
test_memory_resize (void)
{
  g_autoptr (GError) error = NULL;
  guint64 boot = 256 * MiB, room = 256 * MiB;

  g_assert_false (mv_check_memory_resize (boot + 2 * MiB, boot, 0, &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_UNSUPPORTED);
  g_clear_error (&error);

  g_assert_false (mv_check_memory_resize (boot + MiB, boot, room, &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
  g_assert_nonnull (strstr (error->message, "2 MiB"));
  g_clear_error (&error);

  g_assert_false (mv_check_memory_resize (boot - 2 * MiB, boot, room, &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);

  g_assert_false (mv_check_memory_resize (boot + room + 2 * MiB, boot, room, &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);

  g_assert_true (mv_check_memory_resize (boot, boot, room, &error));
  g_assert_true (mv_check_memory_resize (boot + 2 * MiB, boot, room, &error));
  g_assert_true (mv_check_memory_resize (boot + room, boot, room, &error));
  g_assert_no_error (error);
}

/* ---- QMP ---- */

static void
test_qmp_parse_line (void)
{
  const char *greeting = "{\"QMP\": {\"version\": {\"qemu\": {\"micro\": 22, \"minor\": 2, "
                         "\"major\": 7}, \"package\": \"Debian\"}, \"capabilities\": [\"oob\"]}}\r";
  const char *event = "{\"timestamp\": {\"seconds\": 1, \"microseconds\": 2}, \"event\": "
                      "\"SHUTDOWN\", \"data\": {\"guest\": true, \"reason\": \"guest-shutdown\"}}";
  g_autoptr (JsonObject) g = mv_qmp_parse_line (greeting, strlen (greeting));
  g_autoptr (JsonObject) e = mv_qmp_parse_line (event, strlen (event));

  g_assert_nonnull (g);
  g_assert_true (json_object_has_member (g, "QMP"));
  g_assert_nonnull (e);
  g_assert_cmpstr (json_object_get_string_member (e, "event"), ==, "SHUTDOWN");
  g_assert_null (mv_qmp_parse_line ("[1, 2]", 6));
  g_assert_null (mv_qmp_parse_line ("{\"return\": ", 11));
  g_assert_null (mv_qmp_parse_line ("", 0));

  /* Only strict JSON, within the limits, is a message. */
  {
    static const char *const refused[] = {
      "{\"return\": {}} /* and more */",
      "{'return': {}}",
      "{\"return\": {}}{\"return\": {}}",
      "{\"return\": {\"status\": \"run\\u0000ning\"}}",
      "{\"return\": {},}",
      "\xef\xbb\xbf{\"return\": {}}",
    };
    GString *deep = g_string_new ("{\"return\": ");

    for (guint i = 0; i < G_N_ELEMENTS (refused); i++)
      g_assert_null (mv_qmp_parse_line (refused[i], strlen (refused[i])));
    for (guint i = 0; i < 100000; i++)
      g_string_append_c (deep, '[');
    for (guint i = 0; i < 100000; i++)
      g_string_append_c (deep, ']');
    g_string_append_c (deep, '}');
    g_assert_null (mv_qmp_parse_line (deep->str, deep->len));
    g_string_free (deep, TRUE);
  }
}

/* A monitor that never ends its line: refused once the line is past the
 * limit, rather than read for as long as it talks. */
static gpointer
endless_line_serve (gpointer data)
{
  int listener = GPOINTER_TO_INT (data);
  int fd = accept (listener, NULL, NULL);
  g_autofree char *chunk = g_strnfill (64 * 1024, 'x');
  char c;

  g_assert_cmpint (fd, >=, 0);
  for (gsize sent = 0; sent <= MV_QMP_MESSAGE_MAX_BYTES;)
    {
      ssize_t n = send (fd, chunk, 64 * 1024, MSG_NOSIGNAL);

      if (n <= 0)
        break;
      sent += (gsize) n;
    }
  /* Until the client hangs up. */
  while (read (fd, &c, 1) > 0)
    ;
  close (fd);
  return NULL;
}

static void
test_qmp_endless_line (void)
{
  g_autofree char *dir = hv_test_make_dir ();
  g_autofree char *path = g_build_filename (dir, "qmp.sock", NULL);
  struct sockaddr_un addr = { .sun_family = AF_UNIX };
  int listener = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  g_autoptr (GError) error = NULL;
  GThread *thread;
  MvQmp *qmp;

  strcpy (addr.sun_path, path);
  g_assert_cmpint (bind (listener, (struct sockaddr *) &addr, sizeof addr), ==, 0);
  g_assert_cmpint (listen (listener, 1), ==, 0);
  thread = g_thread_new ("endless-line", endless_line_serve, GINT_TO_POINTER (listener));

  qmp = mv_qmp_connect (path, 10000, &error);
  g_assert_null (qmp);
  g_assert_error (error, MV_ERROR, MV_ERROR_FAILED);
  g_assert_nonnull (strstr (error->message, "a message of more than 1048576 bytes"));

  g_thread_join (thread);
  close (listener);
  hv_test_remove_tree (dir);
}

/* ---- snapshot files ---- */

static void
test_snapshot_json_load (void)
{
  g_autofree char *dir = hv_test_make_dir ();
  g_autofree char *path = g_build_filename (dir, MV_SNAPSHOT_VM_SPEC_NAME, NULL);
  g_autofree char *missing = g_build_filename (dir, "devices.json", NULL);
  g_autofree char *expected = NULL;
  g_autoptr (GError) error = NULL;
  g_autoptr (JsonNode) node = NULL;
  GString *deep = g_string_new (NULL);
  g_autofree char *large = NULL;

  g_assert_true (g_file_set_contents (path, "{\"boot\":{\"kernel\":\"/k\"}}\n", -1, NULL));
  node = mv_snapshot_json_load (path, &error);
  g_assert_no_error (error);
  g_assert_true (JSON_NODE_HOLDS_OBJECT (node));
  g_clear_pointer (&node, json_node_unref);

  for (guint i = 0; i < 100000; i++)
    g_string_append (deep, "{\"a\":");
  g_string_append (deep, "1");
  for (guint i = 0; i < 100000; i++)
    g_string_append_c (deep, '}');
  g_assert_true (g_file_set_contents (path, deep->str, deep->len, NULL));
  g_string_free (deep, TRUE);
  node = mv_snapshot_json_load (path, &error);
  g_assert_null (node);
  g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
  g_assert_cmpstr (error->message, ==, "vm-spec.json: nesting depth 17 is more than the limit of 16");
  g_clear_error (&error);

  large = g_strnfill (MV_SNAPSHOT_JSON_MAX_BYTES + 1, ' ');
  large[0] = '1';
  g_assert_true (g_file_set_contents (path, large, -1, NULL));
  node = mv_snapshot_json_load (path, &error);
  g_assert_null (node);
  g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
  expected = g_strdup_printf ("vm-spec.json: %d bytes is more than the limit of %d",
                              MV_SNAPSHOT_JSON_MAX_BYTES + 1, MV_SNAPSHOT_JSON_MAX_BYTES);
  g_assert_cmpstr (error->message, ==, expected);
  g_clear_error (&error);

  g_assert_true (g_file_set_contents (path, "{\"boot\":1} // edited", -1, NULL));
  node = mv_snapshot_json_load (path, &error);
  g_assert_null (node);
  g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);

  node = mv_snapshot_json_load (missing, &error);
  g_assert_null (node);
  g_assert_error (error, G_IO_ERROR, G_IO_ERROR_NOT_FOUND);

  hv_test_remove_tree (dir);
}

/* A QMP server in a thread that answers as QEMU does: a greeting, then
 * for "stop" a STOP event before the reply, then for "quit" a SHUTDOWN
 * event and the end of the connection. */
typedef struct {
  int       listen_fd;
  char     *path;
  GThread  *thread;
} FakeQmp;

static void
send_line (int fd, const char *line)
{
  g_autofree char *text = g_strconcat (line, "\r\n", NULL);
  g_assert_cmpint (send (fd, text, strlen (text), MSG_NOSIGNAL), ==, (gssize) strlen (text));
}

static gpointer
fake_qmp_serve (gpointer data)
{
  FakeQmp *fake = data;
  int fd = accept (fake->listen_fd, NULL, NULL);
  g_autoptr (GString) buffer = g_string_new (NULL);
  char chunk[512];
  ssize_t n;

  g_assert_cmpint (fd, >=, 0);
  send_line (fd, "{\"QMP\": {\"version\": {\"qemu\": {\"micro\": 22, \"minor\": 2, \"major\": 7}, "
                 "\"package\": \"\"}, \"capabilities\": [\"oob\"]}}");
  while ((n = read (fd, chunk, sizeof chunk)) > 0)
    {
      char *newline;

      g_string_append_len (buffer, chunk, n);
      while ((newline = strchr (buffer->str, '\n')))
        {
          g_autofree char *line = g_strndup (buffer->str, newline - buffer->str);
          g_autoptr (JsonObject) request = mv_qmp_parse_line (line, strlen (line));
          const char *command = json_object_get_string_member (request, "execute");
          gint64 id = json_object_get_int_member_with_default (request, "id", 0);
          g_autofree char *reply = g_strdup_printf ("{\"return\": {}, \"id\": %" G_GINT64_FORMAT "}",
                                                    id);

          g_string_erase (buffer, 0, newline - buffer->str + 1);
          if (g_str_equal (command, "stop"))
            send_line (fd, "{\"timestamp\": {\"seconds\": 1, \"microseconds\": 0}, "
                           "\"event\": \"STOP\"}");
          if (g_str_equal (command, "query-nothing"))
            {
              g_autofree char *err = g_strdup_printf (
                "{\"error\": {\"class\": \"CommandNotFound\", \"desc\": \"The command "
                "query-nothing has not been found\"}, \"id\": %" G_GINT64_FORMAT "}", id);
              send_line (fd, err);
              continue;
            }
          if (g_str_equal (command, "quit"))
            {
              send_line (fd, "{\"timestamp\": {\"seconds\": 2, \"microseconds\": 0}, "
                             "\"event\": \"SHUTDOWN\", \"data\": {\"guest\": false, "
                             "\"reason\": \"host-qmp-quit\"}}");
              close (fd);
              return NULL;
            }
          send_line (fd, reply);
        }
    }
  close (fd);
  return NULL;
}

static void
fake_qmp_start (FakeQmp *fake, const char *dir)
{
  struct sockaddr_un addr = { .sun_family = AF_UNIX };

  fake->path = g_build_filename (dir, "qmp.sock", NULL);
  strcpy (addr.sun_path, fake->path);
  fake->listen_fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  g_assert_cmpint (bind (fake->listen_fd, (struct sockaddr *) &addr, sizeof addr), ==, 0);
  g_assert_cmpint (listen (fake->listen_fd, 1), ==, 0);
  fake->thread = g_thread_new ("fake-qmp", fake_qmp_serve, fake);
}

static void
fake_qmp_stop (FakeQmp *fake)
{
  g_thread_join (fake->thread);
  close (fake->listen_fd);
  g_free (fake->path);
}

static void
test_qmp_exchange (void)
{
  g_autofree char *dir = hv_test_make_dir ();
  g_autoptr (GError) error = NULL;
  g_autoptr (GPtrArray) events = NULL;
  g_autoptr (JsonNode) ret = NULL;
  FakeQmp fake;
  MvQmp *qmp;

  fake_qmp_start (&fake, dir);
  qmp = mv_qmp_connect (fake.path, 5000, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (mv_qmp_version (qmp), ==, "7.2.22");

  /* The event that comes before the reply is kept, not taken for it. */
  ret = mv_qmp_execute (qmp, "stop", NULL, 5000, &error);
  g_assert_no_error (error);
  g_assert_true (JSON_NODE_HOLDS_OBJECT (ret));
  events = mv_qmp_take_events (qmp);
  g_assert_cmpuint (events->len, ==, 1);
  g_assert_cmpstr (json_object_get_string_member (events->pdata[0], "event"), ==, "STOP");

  g_assert_null (mv_qmp_execute (qmp, "query-nothing", NULL, 5000, &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_FAILED);
  g_assert_nonnull (strstr (error->message, "CommandNotFound"));
  g_clear_error (&error);

  /* quit: the connection ends before any reply. */
  g_assert_null (mv_qmp_execute (qmp, "quit", NULL, 5000, &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_UNAVAILABLE);
  mv_qmp_free (qmp);
  fake_qmp_stop (&fake);
  hv_test_remove_tree (dir);
}

/* The events channel of the qemu starter reads QMP lines and learns the
 * SHUTDOWN reason. */
static gpointer
fake_events_serve (gpointer data)
{
  FakeQmp *fake = data;
  int fd = accept (fake->listen_fd, NULL, NULL);
  char chunk[512];

  g_assert_cmpint (fd, >=, 0);
  send_line (fd, "{\"QMP\": {\"version\": {\"qemu\": {\"micro\": 22, \"minor\": 2, \"major\": 7}, "
                 "\"package\": \"\"}, \"capabilities\": [\"oob\"]}}");
  g_assert_cmpint (read (fd, chunk, sizeof chunk), >, 0);   /* qmp_capabilities */
  send_line (fd, "{\"return\": {}}");
  send_line (fd, "{\"timestamp\": {\"seconds\": 1, \"microseconds\": 0}, \"event\": \"POWERDOWN\"}");
  send_line (fd, "{\"timestamp\": {\"seconds\": 2, \"microseconds\": 0}, \"event\": \"SHUTDOWN\", "
                 "\"data\": {\"guest\": true, \"reason\": \"guest-shutdown\"}}");
  close (fd);
  return NULL;
}

static void
test_events_reason (void)
{
  g_autofree char *dir = hv_test_make_dir ();
  g_autofree char *api = g_build_filename (dir, "qmp.sock", NULL);
  g_autoptr (GError) error = NULL;
  MvQemuOptions options = { .accel = "tcg" };
  MvStarter *starter = mv_qemu_starter_new (&options, NULL);
  struct sockaddr_un addr = { .sun_family = AF_UNIX };
  MvVmEvents *events;
  MvVmEnd end = MV_VM_END_UNKNOWN;
  FakeQmp fake = { 0 };
  gint64 deadline;

  /* The events monitor sits beside the API socket. */
  fake.path = g_build_filename (dir, "qmp-events.sock", NULL);
  strcpy (addr.sun_path, fake.path);
  fake.listen_fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  g_assert_cmpint (bind (fake.listen_fd, (struct sockaddr *) &addr, sizeof addr), ==, 0);
  g_assert_cmpint (listen (fake.listen_fd, 1), ==, 0);
  fake.thread = g_thread_new ("fake-events", fake_events_serve, &fake);

  events = starter->open_events (starter, api, &error);
  g_assert_no_error (error);
  g_assert_nonnull (events);
  deadline = g_get_monotonic_time () + 5 * G_USEC_PER_SEC;
  while (events->read (events, &end))
    {
      g_assert_cmpint (g_get_monotonic_time (), <, deadline);
      g_usleep (10000);
    }
  g_assert_cmpint (end, ==, MV_VM_END_GUEST_POWEROFF);

  mv_vm_events_free (events);
  fake_qmp_stop (&fake);
  starter->free (starter);
  hv_test_remove_tree (dir);
}

/* ---- the VM spec ---- */

static void
test_vm_spec_json (void)
{
  g_autoptr (MvVmSpec) spec = mv_vm_spec_new ();
  g_autoptr (MvVmSpec) back = NULL;
  g_autoptr (JsonNode) node = NULL;
  g_autoptr (JsonNode) again = NULL;
  g_autoptr (JsonNode) empty = json_node_new (JSON_NODE_OBJECT);
  g_autoptr (GError) error = NULL;
  g_autofree char *text = NULL;
  g_autofree char *text2 = NULL;
  MvDiskConfig *disk;

  spec->boot.kernel_path = g_strdup ("/boot/vmlinuz");
  spec->boot.kernel_args = g_strdup ("console=ttyS0 quiet");
  spec->boot.initrd_path = g_strdup ("initrd.img");
  spec->cpu.count = 2;
  spec->cpu.max_count = 4;
  spec->memory.size_bytes = 256 * MiB;
  spec->memory.hotplug_bytes = 128 * MiB;
  mv_vm_spec_add_disk (spec, "/var/lib/a.img", TRUE);
  mv_vm_spec_add_disk (spec, "b.img", FALSE);
  mv_vm_spec_add_net (spec, "tap0", "52:54:00:12:34:56");
  spec->console.path = g_strdup ("console.log");
  spec->agent.kind = MV_AGENT_CHANNEL_SERIAL;
  spec->agent.socket_path = g_strdup ("agent.sock");
  {
    MvCpuAffinity *pin = mv_cpu_affinity_new (3);
    guint32 cpus[] = { 5, 1 };

    g_array_append_vals (pin->host_cpus, cpus, G_N_ELEMENTS (cpus));
    g_ptr_array_add (spec->cpu.affinity, pin);
  }

  node = mv_vm_spec_to_node (spec);
  back = mv_vm_spec_from_node (node, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (back->boot.kernel_path, ==, "/boot/vmlinuz");
  g_assert_cmpstr (back->boot.kernel_args, ==, "console=ttyS0 quiet");
  g_assert_cmpstr (back->boot.initrd_path, ==, "initrd.img");
  g_assert_cmpuint (back->cpu.count, ==, 2);
  g_assert_cmpuint (back->cpu.max_count, ==, 4);
  g_assert_cmpuint (back->cpu.affinity->len, ==, 1);
  {
    const MvCpuAffinity *pin = back->cpu.affinity->pdata[0];
    g_autoptr (MvVmSpec) copy = mv_vm_spec_copy (back);

    g_assert_cmpuint (pin->vcpu, ==, 3);
    g_assert_cmpuint (pin->host_cpus->len, ==, 2);
    g_assert_cmpuint (g_array_index (pin->host_cpus, guint32, 0), ==, 5);
    g_assert_cmpuint (g_array_index (pin->host_cpus, guint32, 1), ==, 1);
    /* A copy's list is its own. */
    g_assert_true (copy->cpu.affinity != back->cpu.affinity);
    g_assert_cmpuint (copy->cpu.affinity->len, ==, 1);
  }
  g_assert_cmpuint (back->memory.size_bytes, ==, 256 * MiB);
  g_assert_cmpuint (back->memory.hotplug_bytes, ==, 128 * MiB);
  g_assert_cmpuint (back->disks->len, ==, 2);
  disk = back->disks->pdata[0];
  g_assert_cmpstr (disk->path, ==, "/var/lib/a.img");
  g_assert_true (disk->read_only);
  disk = back->disks->pdata[1];
  g_assert_false (disk->read_only);
  g_assert_cmpuint (back->nets->len, ==, 1);
  g_assert_cmpstr (((MvNetConfig *) back->nets->pdata[0])->mac, ==, "52:54:00:12:34:56");
  g_assert_cmpstr (back->console.path, ==, "console.log");
  g_assert_cmpint (back->agent.kind, ==, MV_AGENT_CHANNEL_SERIAL);
  g_assert_cmpstr (back->agent.socket_path, ==, "agent.sock");

  again = mv_vm_spec_to_node (back);
  text = json_to_string (node, FALSE);
  text2 = json_to_string (again, FALSE);
  g_assert_cmpstr (text, ==, text2);

  json_node_take_object (empty, json_object_new ());
  g_assert_null (mv_vm_spec_from_node (empty, &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
}

/* ---- readiness on the console ---- */

#define READY_TEXT "MICROVMD-GUEST-READY"

/* This process, as a VMM that runs. */
static MvProcess *
this_process (void)
{
  g_autofree char *stat = NULL;
  g_auto (GStrv) fields = NULL;
  const char *after;

  g_assert_true (g_file_get_contents ("/proc/self/stat", &stat, NULL, NULL));
  after = strrchr (stat, ')');
  g_assert_nonnull (after);
  fields = g_strsplit (after + 2, " ", -1);
  /* Field 22, the start time; fields[0] is field 3, the state. */
  return mv_process_attach (getpid (), g_ascii_strtoull (fields[19], NULL, 10), NULL, -1);
}

typedef struct {
  char *path;
  const char *const *pieces;
} Printer;

/* Appends each piece to the console in turn, 50 ms apart, as a guest's
 * console is written in bursts. */
static gpointer
print_slowly (gpointer data)
{
  Printer *printer = data;

  for (guint i = 0; printer->pieces[i]; i++)
    {
      FILE *f;

      g_usleep (50 * 1000);
      f = fopen (printer->path, "a");
      g_assert_nonnull (f);
      fputs (printer->pieces[i], f);
      fclose (f);
    }
  return NULL;
}

static gboolean
wait_console (const char *path, goffset offset, const char *const *pieces, guint timeout_s,
              GError **error)
{
  g_autoptr (MvProcess) vmm = this_process ();
  MvVmSpec vm = { 0 };
  Printer printer = { (char *) path, pieces };
  GThread *thread = g_thread_new ("printer", print_slowly, &printer);
  gboolean ready;

  g_assert_nonnull (vmm);
  vm.console.path = (char *) path;
  ready = mv_runtime_wait_ready (NULL, vmm, &vm, MV_READINESS_CONSOLE, READY_TEXT, NULL, NULL,
                                 offset, timeout_s, NULL, NULL, error);
  g_thread_join (thread);
  return ready;
}

/* The text is found however the console's writes cut it, and only past
 * the offset where this boot's output begins. */
static void
test_console_readiness (void)
{
  g_autofree char *dir = hv_test_make_dir ();
  g_autofree char *path = g_build_filename (dir, "console.log", NULL);
  const char *before = "the last boot: " READY_TEXT "\n";
  const char *split[] = { "[    0.1] booting\n", "MICROVMD-GU", "EST-RE", "ADY\n", NULL };
  const char *never[] = { "[    0.1] booting\n", "MICROVMD-GUEST-\n", NULL };
  g_autoptr (GError) error = NULL;
  gint64 t0;

  g_assert_true (g_file_set_contents (path, before, -1, NULL));
  g_assert_true (wait_console (path, strlen (before), split, 5, &error));
  g_assert_no_error (error);

  g_assert_true (g_file_set_contents (path, before, -1, NULL));
  t0 = g_get_monotonic_time ();
  g_assert_false (wait_console (path, strlen (before), never, 1, &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_STATE);
  g_assert_nonnull (strstr (error->message, "console:" READY_TEXT));
  g_assert_cmpint (g_get_monotonic_time () - t0, >=, G_USEC_PER_SEC);
  hv_test_remove_tree (dir);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/hypervisor/accel/no-kvm", test_accel_no_kvm);
  g_test_add_func ("/hypervisor/accel/pvm", test_accel_pvm);
  g_test_add_func ("/hypervisor/accel/no-virtualization-flags", test_accel_no_virtualization_flags);
  g_test_add_func ("/hypervisor/accel/plain-kvm", test_accel_plain_kvm);
  g_test_add_func ("/hypervisor/accel/option", test_accel_option);
  g_test_add_func ("/hypervisor/memory-resize", test_memory_resize);
  g_test_add_func ("/hypervisor/qmp/parse-line", test_qmp_parse_line);
  g_test_add_func ("/hypervisor/qmp/exchange", test_qmp_exchange);
  g_test_add_func ("/hypervisor/qmp/endless-line", test_qmp_endless_line);
  g_test_add_func ("/hypervisor/snapshot-json-load", test_snapshot_json_load);
  g_test_add_func ("/hypervisor/qmp/events-reason", test_events_reason);
  g_test_add_func ("/hypervisor/vm-spec-json", test_vm_spec_json);
  g_test_add_func ("/hypervisor/readiness/console", test_console_readiness);
  return g_test_run ();
}
