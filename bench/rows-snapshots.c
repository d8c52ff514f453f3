/* #15: snapshots through the daemon against the same calls made directly
 * on the VMM.
 *
 * QEMU under TCG with the test guest (kernel + initramfs, no disk, so no
 * disk is copied on either side), 256 MiB and 1 GiB:
 *   create   Machine.CreateSnapshot of a running guest until it returns,
 *            against QMP stop + migrate to "exec:cat > FILE" + wait for
 *            completed + cont;
 *   restore  Snapshot.Restore of the stopped machine until it returns with
 *            the machine Running, against a fresh QEMU with -incoming
 *            "exec:cat FILE" + wait for paused + cont;
 *   fork     Manager.ForkMachine of a running guest until it returns with
 *            the fork Running, against the create above into a file and a
 *            second QEMU restored from it (256 MiB only).
 * The Cloud Hypervisor and Firecracker test VMMs (simulated guest, sparse
 * memory file) the same way, against vm.pause + vm.snapshot + vm.resume /
 * a fresh VMM + vm.restore + vm.resume, and PATCH /vm Paused +
 * PUT /snapshot/create + PATCH /vm Resumed / a fresh VMM +
 * PUT /snapshot/load + PATCH /vm Resumed, on their API sockets.
 *
 * The daemon's VMMs are walled in, as by default. A daemon call that
 * fails leaves the row "not measured" with the call, its error and the
 * machine's spec; the baseline is still measured. */
#include "bare-qemu.h"

#include "hypervisor/http.h"
#include "names.h"

#include <signal.h>
#include <stdarg.h>
#include <string.h>
#include <sys/wait.h>

#include <glib/gstdio.h>

/* The simulated guest is ready at once. */
#define MIB            (G_GUINT64_CONSTANT (1) << 20)
#define VMM_START_S    10

typedef enum {
  VMM_QEMU,
  VMM_CLOUD_HYPERVISOR,
  VMM_FIRECRACKER,
} Vmm;

typedef struct {
  Vmm         vmm;
  const char *type;        /* hypervisor_type */
  const char *what;        /* for the row's text */
  const char *id;          /* the row ids' stem */
  guint       memory_mib;
  guint       runs;
  gboolean    fork;        /* also the fork row */
} Subject;

typedef struct {
  BenchSamples *create, *restore, *fork;
  BenchSamples *bare_create, *bare_restore, *bare_fork;
  BenchSamples *bare_fork_save, *bare_fork_load;  /* the bare fork's two halves */
  guint64       bare_state_bytes;  /* the last saved file's size */
  guint64       snapshot_bytes;    /* the last snapshot's SizeBytes */
  char         *failure;   /* the first daemon call that failed */
} Figures;

/* ---- calls to the daemon that may fail ---- */

/* Records the first failure only: the rest follow from it. */
static void
fail_once (char **failure, const char *format, ...) G_GNUC_PRINTF (2, 3);

static void
fail_once (char **failure, const char *format, ...)
{
  va_list args;

  if (*failure)
    return;
  va_start (args, format);
  *failure = g_strdup_vprintf (format, args);
  va_end (args);
}

/* A daemon call whose failure is a result of the row: NULL, with what
 * failed in *@failure. */
static sd_bus_message *
try_call (Bench *bench, const char *path, const char *iface, const char *member, char **failure,
          const char *types, ...)
{
  g_autoptr (sd_bus_message) m = NULL;
  sd_bus_message *reply = NULL;
  sd_bus_error error = SD_BUS_ERROR_NULL;
  va_list args;
  int r;

  r = sd_bus_message_new_method_call (bench->bus, &m, MV_BUS_NAME, path, iface, member);
  if (r >= 0 && types)
    {
      va_start (args, types);
      r = sd_bus_message_appendv (m, types, args);
      va_end (args);
    }
  if (r >= 0)
    r = sd_bus_call (bench->bus, m, BENCH_CALL_TIMEOUT_US, &error, &reply);
  if (r < 0)
    fail_once (failure, "%s.%s on %s failed: %s: %s", iface, member, path,
               error.name ? error.name : "(no error name)",
               error.message ? error.message : g_strerror (-r));
  sd_bus_error_free (&error);
  return r < 0 ? NULL : reply;
}

static char *
reply_path (sd_bus_message *reply)
{
  const char *path = NULL;

  if (!reply || sd_bus_message_read (reply, "o", &path) < 0)
    return NULL;
  return g_strdup (path);
}

static gboolean
is_running (Bench *bench, const char *path, const char *after, char **failure)
{
  g_autofree char *state = bench_get_string (bench, bench->bus, MV_BUS_NAME, path,
                                             MV_MACHINE_IFACE, "State");

  if (g_str_equal (state, "Running"))
    return TRUE;
  fail_once (failure, "%s returned with machine %s %s, not Running", after, path, state);
  return FALSE;
}

/* ---- the daemon's side ---- */

static char *
kernel_file (Bench *bench, const Subject *s, gboolean initrd)
{
  if (s->vmm == VMM_QEMU)
    return g_build_filename (bench->guest_dir, initrd ? "initrd.img" : "vmlinuz", NULL);
  return g_build_filename (mv_test_env_images_dir (bench->env),
                           initrd ? "bench-initrd" : "bench-vmlinuz", NULL);
}

static char *
machine_spec (Bench *bench, const Subject *s, const char *name)
{
  g_autofree char *kernel = kernel_file (bench, s, FALSE);
  g_autofree char *initrd = kernel_file (bench, s, TRUE);

  return g_strdup_printf ("{\"name\":\"%s\",\"hypervisor_type\":\"%s\",\"kernel\":\"%s\","
                          "\"initrd\":\"%s\",\"kernel_args\":\"%s\",\"memory_bytes\":%" G_GUINT64_FORMAT ","
                          "\"readiness\":\"console:" BENCH_READY_MARKER "\"}",
                          name, s->type, kernel, initrd,
                          s->vmm == VMM_QEMU ? BENCH_QEMU_KERNEL_ARGS : BENCH_FAKE_KERNEL_ARGS,
                          (guint64) s->memory_mib * MIB);
}

/* A running machine of @s's kind; NULL (and *failure) if it cannot be. */
static char *
daemon_machine (Bench *bench, const Subject *s, char **failure)
{
  g_autofree char *name = g_strdup_printf ("bench-s%05u", ++bench->machine_seq);
  g_autofree char *spec = machine_spec (bench, s, name);
  g_autoptr (sd_bus_message) reply = try_call (bench, MV_MANAGER_PATH, MV_MANAGER_IFACE,
                                               "CreateMachine", failure, "st", spec,
                                               (uint64_t) MV_CREATE_START);

  return reply_path (reply);
}

static void
daemon_delete (Bench *bench, const char *path, const char *iface, char **failure)
{
  g_autoptr (sd_bus_message) reply = NULL;

  if (!path)
    return;
  if (g_str_equal (iface, MV_MACHINE_IFACE))
    reply = try_call (bench, path, iface, "Delete", failure, "b", 1);
  else
    reply = try_call (bench, path, iface, "Delete", failure, NULL);
}

/* One machine: CreateSnapshot while it runs, Stop, Restore. FALSE when a
 * call failed. */
static gboolean
daemon_create_restore (Bench *bench, const Subject *s, Figures *f)
{
  g_autofree char *machine = daemon_machine (bench, s, &f->failure);
  g_autofree char *snapshot = NULL;
  g_autofree char *name = NULL;
  gboolean ok = FALSE;
  gint64 t0;

  if (!machine)
    return FALSE;
  name = g_strdup_printf ("bench-snap%05u", ++bench->machine_seq);
  t0 = bench_now ();
  {
    g_autoptr (sd_bus_message) reply = try_call (bench, machine, MV_MACHINE_IFACE, "CreateSnapshot",
                                                 &f->failure, "s", name);
    gint64 t1 = bench_now ();

    snapshot = reply_path (reply);
    if (snapshot)
      {
        sd_bus_error error = SD_BUS_ERROR_NULL;
        uint64_t size = 0;

        bench_samples_add (f->create, (double) (t1 - t0));
        if (sd_bus_get_property_trivial (bench->bus, MV_BUS_NAME, snapshot, MV_SNAPSHOT_IFACE,
                                         "SizeBytes", &error, 't', &size) >= 0)
          f->snapshot_bytes = size;
        sd_bus_error_free (&error);
      }
  }
  if (snapshot)
    {
      g_autoptr (sd_bus_message) stopped = try_call (bench, machine, MV_MACHINE_IFACE, "Stop",
                                                     &f->failure, NULL);
      g_autoptr (sd_bus_message) restored = NULL;
      gint64 t1;

      if (stopped)
        {
          t0 = bench_now ();
          restored = try_call (bench, snapshot, MV_SNAPSHOT_IFACE, "Restore", &f->failure, NULL);
          t1 = bench_now ();
          if (restored && is_running (bench, machine, "Snapshot.Restore", &f->failure))
            {
              bench_samples_add (f->restore, (double) (t1 - t0));
              ok = TRUE;
            }
        }
    }
  daemon_delete (bench, snapshot, MV_SNAPSHOT_IFACE, &f->failure);
  daemon_delete (bench, machine, MV_MACHINE_IFACE, &f->failure);
  return ok;
}

/* ForkMachine of @source; FALSE when it failed. */
static gboolean
daemon_fork (Bench *bench, const char *source, Figures *f)
{
  g_autofree char *source_name = bench_get_string (bench, bench->bus, MV_BUS_NAME, source,
                                                   MV_MACHINE_IFACE, "Name");
  g_autofree char *json = g_strdup_printf ("{\"name\":\"bench-fork%05u\"}", ++bench->machine_seq);
  g_autoptr (sd_bus_message) reply = NULL;
  g_autofree char *fork = NULL;
  gboolean ok = FALSE;
  gint64 t0, t1;

  t0 = bench_now ();
  reply = try_call (bench, MV_MANAGER_PATH, MV_MANAGER_IFACE, "ForkMachine", &f->failure, "ss",
                    source_name, json);
  t1 = bench_now ();
  fork = reply_path (reply);
  if (fork && is_running (bench, fork, "Manager.ForkMachine", &f->failure))
    {
      bench_samples_add (f->fork, (double) (t1 - t0));
      ok = TRUE;
    }
  daemon_delete (bench, fork, MV_MACHINE_IFACE, &f->failure);
  return ok;
}

/* ---- bare QEMU ---- */

static char *
bare_dir (Bench *bench, const char *name)
{
  char *dir = g_build_filename (mv_test_env_dir (bench->env), name, NULL);

  g_mkdir_with_parents (dir, 0700);
  return dir;
}

/* stop, migrate into @state, wait, cont: the guest runs on. */
static void
qemu_save (Bench *bench, BenchQmp *q, const char *state)
{
  g_autofree char *migrate = g_strdup_printf ("{\"execute\":\"migrate\",\"arguments\":"
                                              "{\"uri\":\"exec:cat > %s\"}}", state);

  json_node_unref (bench_qmp_execute (bench, q, "{\"execute\":\"stop\"}"));
  json_node_unref (bench_qmp_execute (bench, q, migrate));
  while (!bench_qmp_migration_done (bench, q))
    g_usleep (1000);
  json_node_unref (bench_qmp_execute (bench, q, "{\"execute\":\"cont\"}"));
}

/* A fresh QEMU in @dir from @state, running; the caller ends it. */
static GPid
qemu_restore (Bench *bench, BenchQmp *q, const char *dir, guint memory_mib, const char *state)
{
  g_autofree char *incoming = g_strdup_printf ("exec:cat %s", state);
  g_autofree char *qmp = g_build_filename (dir, "qmp.sock", NULL);
  GPid pid = bench_qemu_spawn (bench, dir, memory_mib, incoming);

  bench_qmp_connect (bench, q, qmp, pid);
  while (!bench_qmp_status_is (bench, q, "paused"))
    g_usleep (1000);
  json_node_unref (bench_qmp_execute (bench, q, "{\"execute\":\"cont\"}"));
  return pid;
}

static GPid
qemu_boot (Bench *bench, BenchQmp *q, const char *dir, guint memory_mib)
{
  g_autofree char *console = g_build_filename (dir, "console.log", NULL);
  g_autofree char *qmp = g_build_filename (dir, "qmp.sock", NULL);
  GPid pid;

  g_unlink (console);
  pid = bench_qemu_spawn (bench, dir, memory_mib, NULL);
  bench_vmm_wait_console (bench, dir, pid);
  bench_qmp_connect (bench, q, qmp, pid);
  return pid;
}

static void
bare_qemu_create_restore (Bench *bench, const Subject *s, Figures *f)
{
  g_autofree char *dir = bare_dir (bench, "bare-snapshot");
  g_autofree char *state = g_build_filename (dir, "saved.state", NULL);
  BenchQmp q = { 0 };
  GPid pid = qemu_boot (bench, &q, dir, s->memory_mib);
  gint64 t0;

  t0 = bench_now ();
  qemu_save (bench, &q, state);
  bench_samples_add (f->bare_create, (double) (bench_now () - t0));
  bench_qemu_end (bench, &q, pid);
  {
    GStatBuf st;

    if (g_stat (state, &st) == 0)
      f->bare_state_bytes = (guint64) st.st_size;
  }

  t0 = bench_now ();
  pid = qemu_restore (bench, &q, dir, s->memory_mib, state);
  bench_samples_add (f->bare_restore, (double) (bench_now () - t0));
  bench_qemu_end (bench, &q, pid);
}

/* ---- the test VMMs, bare ---- */

typedef struct {
  GPid    pid;
  MvHttp *http;
} BareVmm;

static void
rest (Bench *bench, BareVmm *v, const char *method, const char *path, const char *body)
{
  g_auto (MvHttpResponse) response = { 0 };
  g_autoptr (GError) error = NULL;

  if (!mv_http_request (v->http, method, path, body, body ? strlen (body) : 0, &response, &error))
    bench_fail (bench, "%s %s: %s", method, path, error->message);
  if (response.status < 200 || response.status > 299)
    {
      g_autofree char *text = response.body ? mv_http_error_text (response.body) : g_strdup ("");
      bench_fail (bench, "%s %s: HTTP %u: %s", method, path, response.status, text);
    }
}

static void
bare_vmm_start (Bench *bench, BareVmm *v, const Subject *s, const char *socket)
{
  g_autofree char *binary = g_build_filename (bench->build_dir, "tests", "vmm",
                                              s->vmm == VMM_FIRECRACKER ? "fake-firecracker"
                                                                        : "fake-cloud-hypervisor",
                                              NULL);
  g_autofree char *option = g_strconcat ("path=", socket, NULL);
  const char *fc_argv[] = { binary, "--api-sock", socket, "--id", "bench", "--level", "Warning", NULL };
  const char *ch_argv[] = { binary, "--api-socket", option, NULL };
  const char *probe = s->vmm == VMM_FIRECRACKER ? "/" : "/api/v1/vmm.ping";
  gint64 deadline;
  g_autoptr (GError) error = NULL;

  g_unlink (socket);
  if (!g_spawn_async (NULL, (char **) (s->vmm == VMM_FIRECRACKER ? fc_argv : ch_argv), NULL,
                      G_SPAWN_DO_NOT_REAP_CHILD | G_SPAWN_STDOUT_TO_DEV_NULL |
                      G_SPAWN_STDERR_TO_DEV_NULL, bench_vmm_child_setup, NULL, &v->pid, &error))
    bench_fail (bench, "cannot start %s: %s", binary, error->message);
  v->http = mv_http_new (socket, s->what);
  mv_http_set_timeout (v->http, 1000);
  deadline = bench_now () + VMM_START_S * G_USEC_PER_SEC;
  for (;;)
    {
      g_auto (MvHttpResponse) response = { 0 };

      if (g_file_test (socket, G_FILE_TEST_EXISTS) &&
          mv_http_request (v->http, "GET", probe, NULL, 0, &response, NULL))
        break;
      if (bench_now () > deadline || waitpid (v->pid, NULL, WNOHANG) == v->pid)
        bench_fail (bench, "%s did not serve its API on %s", binary, socket);
      g_usleep (1000);
    }
  mv_http_set_timeout (v->http, MV_HTTP_TIMEOUT_MS);
}

static void
bare_vmm_end (BareVmm *v)
{
  g_clear_pointer (&v->http, mv_http_free);
  kill (v->pid, SIGKILL);
  waitpid (v->pid, NULL, 0);
}

/* The test VMM booted in @dir as the daemon boots it: the same kernel
 * files, arguments, memory and console file. */
static void
bare_vmm_boot (Bench *bench, BareVmm *v, const Subject *s, const char *dir)
{
  g_autofree char *socket = g_build_filename (dir, "api.sock", NULL);
  g_autofree char *console = g_build_filename (dir, "console.log", NULL);
  g_autofree char *kernel = kernel_file (bench, s, FALSE);
  g_autofree char *initrd = kernel_file (bench, s, TRUE);

  g_unlink (console);
  bare_vmm_start (bench, v, s, socket);
  if (s->vmm == VMM_FIRECRACKER)
    {
      g_autofree char *machine = g_strdup_printf ("{\"vcpu_count\":1,\"mem_size_mib\":%u,"
                                                  "\"smt\":false}", s->memory_mib);
      g_autofree char *boot = g_strdup_printf ("{\"kernel_image_path\":\"%s\",\"boot_args\":\""
                                               BENCH_FAKE_KERNEL_ARGS "\",\"initrd_path\":\"%s\"}",
                                               kernel, initrd);
      g_autofree char *serial = g_strdup_printf ("{\"serial_out_path\":\"%s\"}", console);

      rest (bench, v, "PUT", "/machine-config", machine);
      rest (bench, v, "PUT", "/boot-source", boot);
      rest (bench, v, "PUT", "/serial", serial);
      rest (bench, v, "PUT", "/actions", "{\"action_type\":\"InstanceStart\"}");
    }
  else
    {
      g_autofree char *config = g_strdup_printf (
        "{\"payload\":{\"kernel\":\"%s\",\"cmdline\":\"" BENCH_FAKE_KERNEL_ARGS "\",\"initramfs\":\"%s\"},"
        "\"cpus\":{\"boot_vcpus\":1,\"max_vcpus\":1},\"memory\":{\"size\":%" G_GUINT64_FORMAT "},"
        "\"serial\":{\"mode\":\"File\",\"file\":\"%s\"},\"console\":{\"mode\":\"Off\"}}",
        kernel, initrd, (guint64) s->memory_mib * MIB, console);

      rest (bench, v, "PUT", "/api/v1/vm.create", config);
      rest (bench, v, "PUT", "/api/v1/vm.boot", NULL);
    }
  bench_vmm_wait_console (bench, dir, v->pid);
}

static void
bare_vmm_create_restore (Bench *bench, const Subject *s, Figures *f)
{
  g_autofree char *dir = bare_dir (bench, s->vmm == VMM_FIRECRACKER ? "bare-fc" : "bare-ch");
  g_autofree char *snapshot = g_build_filename (dir, "snapshot", NULL);
  g_autofree char *socket = g_build_filename (dir, "api.sock", NULL);
  g_autofree char *state = g_build_filename (snapshot, "vmstate", NULL);
  g_autofree char *memory = g_build_filename (snapshot, "memory", NULL);
  g_autofree char *url = g_strconcat ("file://", snapshot, NULL);
  BareVmm v = { 0 };
  gint64 t0;

  bare_vmm_boot (bench, &v, s, dir);
  t0 = bench_now ();
  g_mkdir_with_parents (snapshot, 0700);
  if (s->vmm == VMM_FIRECRACKER)
    {
      g_autofree char *create = g_strdup_printf ("{\"snapshot_type\":\"Full\",\"snapshot_path\":"
                                                 "\"%s\",\"mem_file_path\":\"%s\"}", state, memory);

      rest (bench, &v, "PATCH", "/vm", "{\"state\":\"Paused\"}");
      rest (bench, &v, "PUT", "/snapshot/create", create);
      rest (bench, &v, "PATCH", "/vm", "{\"state\":\"Resumed\"}");
    }
  else
    {
      g_autofree char *create = g_strdup_printf ("{\"destination_url\":\"%s\"}", url);

      rest (bench, &v, "PUT", "/api/v1/vm.pause", NULL);
      rest (bench, &v, "PUT", "/api/v1/vm.snapshot", create);
      rest (bench, &v, "PUT", "/api/v1/vm.resume", NULL);
    }
  bench_samples_add (f->bare_create, (double) (bench_now () - t0));
  bare_vmm_end (&v);

  t0 = bench_now ();
  bare_vmm_start (bench, &v, s, socket);
  if (s->vmm == VMM_FIRECRACKER)
    {
      g_autofree char *load = g_strdup_printf ("{\"snapshot_path\":\"%s\",\"mem_backend\":"
                                               "{\"backend_type\":\"File\",\"backend_path\":\"%s\"},"
                                               "\"resume_vm\":false}", state, memory);

      rest (bench, &v, "PUT", "/snapshot/load", load);
      rest (bench, &v, "PATCH", "/vm", "{\"state\":\"Resumed\"}");
    }
  else
    {
      g_autofree char *restore = g_strdup_printf ("{\"source_url\":\"%s\"}", url);

      rest (bench, &v, "PUT", "/api/v1/vm.restore", restore);
      rest (bench, &v, "PUT", "/api/v1/vm.resume", NULL);
    }
  bench_samples_add (f->bare_restore, (double) (bench_now () - t0));
  bare_vmm_end (&v);
}

/* ---- the rows ---- */

static void
add_row (Bench *bench, const char *id, const char *what, BenchSamples **figure,
         const char *baseline_what, BenchSamples **baseline, const char *not_measured,
         const char *more)
{
  BenchResult *r;

  if (!not_measured && *figure && bench_samples_count (*figure) > 0)
    {
      g_autofree char *note = NULL;

      r = bench_report_add (bench->report, "15", id, what, "µs", -1, g_steal_pointer (figure),
                            baseline_what, g_steal_pointer (baseline));
      note = g_strdup_printf ("min–max %.1f–%.1f ms through the daemon, %.1f–%.1f ms bare%s%s",
                              bench_samples_percentile (r->figure, 0.001) / 1000,
                              bench_samples_percentile (r->figure, 100) / 1000,
                              bench_samples_percentile (r->baseline, 0.001) / 1000,
                              bench_samples_percentile (r->baseline, 100) / 1000,
                              more ? "; " : "", more ? more : "");
      bench_result_set_note (r, note);
    }
  else
    {
      r = bench_report_add_not_measured (bench->report, "15", id, what,
                                         not_measured ? not_measured : "no run finished");
      g_free (r->unit);
      r->unit = g_strdup ("µs");
      r->baseline_what = g_strdup (baseline_what);
      r->baseline = g_steal_pointer (baseline);
    }
  bench_result_print (r);
}

static void
figures_clear (Figures *f)
{
  g_clear_pointer (&f->create, bench_samples_free);
  g_clear_pointer (&f->restore, bench_samples_free);
  g_clear_pointer (&f->fork, bench_samples_free);
  g_clear_pointer (&f->bare_create, bench_samples_free);
  g_clear_pointer (&f->bare_restore, bench_samples_free);
  g_clear_pointer (&f->bare_fork, bench_samples_free);
  g_clear_pointer (&f->bare_fork_save, bench_samples_free);
  g_clear_pointer (&f->bare_fork_load, bench_samples_free);
  g_clear_pointer (&f->failure, g_free);
}

/* The fork row: one source each way, @runs forks of it. */
static void
measure_fork (Bench *bench, const Subject *s, guint runs, Figures *f)
{
  g_autofree char *dir = bare_dir (bench, "bare-fork-source");
  g_autofree char *copy_dir = bare_dir (bench, "bare-fork-copy");
  g_autofree char *state = g_build_filename (dir, "fork.state", NULL);
  g_autofree char *source = daemon_machine (bench, s, &f->failure);
  BenchQmp q = { 0 };
  GPid pid = qemu_boot (bench, &q, dir, s->memory_mib);

  for (guint i = 0; i < runs; i++)
    {
      BenchQmp copy = { 0 };
      GPid copy_pid;
      gint64 t0, t1, t2;

      if (source && !f->failure && i % 2 == 0)
        daemon_fork (bench, source, f);
      t0 = bench_now ();
      qemu_save (bench, &q, state);
      t1 = bench_now ();
      copy_pid = qemu_restore (bench, &copy, copy_dir, s->memory_mib, state);
      t2 = bench_now ();
      bench_samples_add (f->bare_fork, (double) (t2 - t0));
      bench_samples_add (f->bare_fork_save, (double) (t1 - t0));
      bench_samples_add (f->bare_fork_load, (double) (t2 - t1));
      bench_qemu_end (bench, &copy, copy_pid);
      if (source && !f->failure && i % 2 == 1)
        daemon_fork (bench, source, f);
    }
  bench_qemu_end (bench, &q, pid);
  daemon_delete (bench, source, MV_MACHINE_IFACE, &f->failure);
}

static void
measure_subject (Bench *bench, const Subject *s, const char *skip)
{
  g_autofree char *create_id = g_strdup_printf ("%s-create", s->id);
  g_autofree char *restore_id = g_strdup_printf ("%s-restore", s->id);
  g_autofree char *fork_id = g_strdup_printf ("%s-fork", s->id);
  g_autofree char *create_what = g_strdup_printf ("CreateSnapshot of a running guest until it "
                                                  "returns (%s, %u MiB)", s->what, s->memory_mib);
  g_autofree char *restore_what = g_strdup_printf ("Snapshot.Restore of the stopped machine until "
                                                   "it returns Running (%s, %u MiB)", s->what,
                                                   s->memory_mib);
  g_autofree char *fork_what = g_strdup_printf ("ForkMachine of a running guest until it returns "
                                                "with the fork Running (%s, %u MiB)", s->what,
                                                s->memory_mib);
  const char *bare_create, *bare_restore;
  guint runs = bench->smoke ? 2 : s->runs;
  g_autofree char *not_measured = NULL, *fork_not_measured = NULL;
  g_autofree char *spec = machine_spec (bench, s, "NAME");
  g_autofree char *sizes = NULL, *halves = NULL;
  Figures f = { 0 };

  if (s->vmm == VMM_QEMU)
    {
      bare_create = "bare QEMU: stop + migrate to exec:cat > FILE + completed + cont";
      bare_restore = "a fresh bare QEMU: -incoming exec:cat FILE + paused + cont";
    }
  else if (s->vmm == VMM_CLOUD_HYPERVISOR)
    {
      bare_create = "the same VMM's API: vm.pause + vm.snapshot + vm.resume";
      bare_restore = "a fresh VMM: vm.restore + vm.resume";
    }
  else
    {
      bare_create = "the same VMM's API: PATCH /vm Paused + PUT /snapshot/create + PATCH /vm Resumed";
      bare_restore = "a fresh VMM: PUT /snapshot/load + PATCH /vm Resumed";
    }

  f.create = bench_samples_new ();
  f.restore = bench_samples_new ();
  f.fork = bench_samples_new ();
  f.bare_create = bench_samples_new ();
  f.bare_restore = bench_samples_new ();
  f.bare_fork = bench_samples_new ();
  f.bare_fork_save = bench_samples_new ();
  f.bare_fork_load = bench_samples_new ();
  if (!skip)
    {
      /* Alternating which side goes first spreads the machine's drift
       * over both. */
      for (guint i = 0; i < runs; i++)
        {
          if (i % 2 == 0 && !f.failure)
            daemon_create_restore (bench, s, &f);
          if (s->vmm == VMM_QEMU)
            bare_qemu_create_restore (bench, s, &f);
          else
            bare_vmm_create_restore (bench, s, &f);
          if (i % 2 == 1 && !f.failure)
            daemon_create_restore (bench, s, &f);
        }
      if (f.failure)
        not_measured = g_strdup_printf ("%s (spec: %s)", f.failure, spec);
    }
  if (s->vmm == VMM_QEMU)
    sizes = g_strdup_printf ("the saved file %.1f MiB bare, the snapshot's SizeBytes %.1f MiB",
                             f.bare_state_bytes / (double) MIB, f.snapshot_bytes / (double) MIB);
  add_row (bench, create_id, create_what, &f.create, bare_create, &f.bare_create,
           skip ? skip : not_measured, sizes);
  add_row (bench, restore_id, restore_what, &f.restore, bare_restore, &f.bare_restore,
           skip ? skip : not_measured, NULL);

  if (s->fork)
    {
      g_clear_pointer (&f.failure, g_free);
      if (!skip)
        {
          measure_fork (bench, s, runs, &f);
          if (f.failure)
            fork_not_measured = g_strdup_printf ("%s (source spec: %s, fork: "
                                                 "{\"name\":\"NAME\"})", f.failure, spec);
        }
      if (bench_samples_count (f.bare_fork_save) > 0)
        halves = g_strdup_printf ("bare p50 %.1f ms to save and %.1f ms to restore",
                                  bench_samples_percentile (f.bare_fork_save, 50) / 1000,
                                  bench_samples_percentile (f.bare_fork_load, 50) / 1000);
      add_row (bench, fork_id, fork_what, &f.fork,
               "bare QEMU: the create above into a file, then a second QEMU restored from it",
               &f.bare_fork, skip ? skip : fork_not_measured, halves);
    }
  figures_clear (&f);
}

void
bench_row_snapshots (Bench *bench)
{
  static const Subject subjects[] = {
    { VMM_QEMU, "qemu", "QEMU TCG, microvm, test guest", "15-qemu-256", 256, 5, TRUE },
    { VMM_QEMU, "qemu", "QEMU TCG, microvm, test guest", "15-qemu-1024", 1024, 3, FALSE },
    { VMM_CLOUD_HYPERVISOR, "cloud-hypervisor", "Cloud Hypervisor test VMM, simulated guest",
      "15-cloud-hypervisor", 256, 20, FALSE },
    { VMM_FIRECRACKER, "firecracker", "Firecracker test VMM, simulated guest", "15-firecracker",
      256, 20, FALSE },
  };
  g_autofree char *qemu = g_find_program_in_path (BENCH_QEMU);
  g_autofree char *fc = g_build_filename (bench->build_dir, "tests", "vmm", "fake-firecracker", NULL);
  g_autofree char *ch = g_build_filename (bench->build_dir, "tests", "vmm", "fake-cloud-hypervisor",
                                          NULL);
  g_autofree char *config = g_strdup_printf ("[qemu]\naccel=tcg\n[firecracker]\nbinaries=%s\n"
                                             "[cloud-hypervisor]\nbinaries=%s\n", fc, ch);
  const char *no_qemu = NULL;
  Subject fake = { 0 };

  if (bench->smoke)
    no_qemu = "smoke mode boots no real guest";
  else if (!qemu)
    no_qemu = BENCH_QEMU " is not installed";
  else if (!bench->guest_dir)
    no_qemu = "no test guest given (tests/guest/build.sh OUTDIR, then --guest-dir OUTDIR)";

  /* The simulated guest needs files, not a kernel. */
  fake.vmm = VMM_FIRECRACKER;
  {
    g_autofree char *kernel = kernel_file (bench, &fake, FALSE);
    g_autofree char *initrd = kernel_file (bench, &fake, TRUE);

    if (!g_file_set_contents (kernel, "kernel", -1, NULL) ||
        !g_file_set_contents (initrd, "initrd", -1, NULL))
      bench_fail (bench, "cannot write %s", kernel);
  }

  mv_test_env_write_config (bench->env, config);
  bench_daemon_start (bench);
  for (guint i = 0; i < G_N_ELEMENTS (subjects); i++)
    measure_subject (bench, &subjects[i], subjects[i].vmm == VMM_QEMU ? no_qemu : NULL);
  bench_daemon_stop (bench);
  bench_clear_state (bench);
  /* The configuration the other rows expect. */
  mv_test_env_write_config (bench->env, BENCH_BASE_CONFIG);
}
