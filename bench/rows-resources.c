/* #18 and #19: what admitting machines against the host's capacity and
 * resizing them cost through the daemon.
 *
 *   #18  Start of a stopped machine on the test runtime until it returns
 *        Running, with 1,000 other machines defined (100 of them running
 *        on the test runtime), against the same Start with no other
 *        machine defined: before the others are created and after they
 *        are deleted, on the same daemon. Admission sums what every
 *        machine holds, so the difference is its per-machine cost and
 *        anything else that grows with the machines.
 *   #19  Machine.Resize of a running machine on the Cloud Hypervisor test
 *        VMM, alternating between two sizes, against the bench sending the
 *        same PUT /api/v1/vm.resize to the VMM's API socket itself, on a
 *        connection of its own for each request as the daemon opens one
 *        for each resize, alternating the same way.
 *
 * A daemon call that fails is a result: the row says what failed, and
 * the run goes on. */
#include "bench.h"

#include "hypervisor/http.h"
#include "names.h"

#include <json-glib/json-glib.h>
#include <stdarg.h>
#include <string.h>

/* The simulated guest is ready at once. */
#define MIB            (G_GUINT64_CONSTANT (1) << 20)
#define OTHERS         1000
#define OTHERS_RUNNING 100

/* A Machine method call whose failure is returned, not fatal: FALSE,
 * with the call and the error's name and message in @why. */
static gboolean
try_call (Bench *bench, const char *path, const char *member, char **why, const char *types, ...)
{
  g_autoptr (sd_bus_message) m = NULL;
  g_autoptr (sd_bus_message) reply = NULL;
  sd_bus_error error = SD_BUS_ERROR_NULL;
  va_list args;
  int r;

  r = sd_bus_message_new_method_call (bench->bus, &m, MV_BUS_NAME, path, MV_MACHINE_IFACE, member);
  if (r >= 0 && types)
    {
      va_start (args, types);
      r = sd_bus_message_appendv (m, types, args);
      va_end (args);
    }
  if (r >= 0)
    r = sd_bus_call (bench->bus, m, BENCH_CALL_TIMEOUT_US, &error, &reply);
  if (r < 0)
    {
      g_free (*why);
      *why = g_strdup_printf ("%s.%s on %s failed: %s: %s", MV_MACHINE_IFACE, member, path,
                              error.name ? error.name : "errno",
                              error.message ? error.message : g_strerror (-r));
      g_printerr ("microvmd-bench: %s\n", *why);
      sd_bus_error_free (&error);
      return FALSE;
    }
  return TRUE;
}

static char *
failed_call_reason (const char *why, const char *reproduce)
{
  return g_strdup_printf ("%s; reproduce with %s", why, reproduce);
}

/* ---- #18 ---- */

/* The others are created and deleted by this many clients at once: the
 * records' fsyncs dominate, and the disk takes them together. */
#define POPULATE_CLIENTS 8

typedef struct {
  Bench     *bench;
  guint      first, count, running;
  gboolean   delete;
  GPtrArray *paths;          /* this client's share, in order */
} Populate;

static gpointer
populate_worker (gpointer data)
{
  Populate *w = data;
  sd_bus *bus = bench_open_bus (w->bench);

  for (guint i = 0; i < w->count; i++)
    {
      guint n = w->first + i;

      if (w->delete)
        {
          g_autoptr (sd_bus_message) deleted = bench_call (w->bench, bus, MV_BUS_NAME,
                                                           w->paths->pdata[i], MV_MACHINE_IFACE,
                                                           "Delete", "b", 1);
        }
      else
        {
          g_autofree char *spec = g_strdup_printf ("{\"name\":\"bench-a%05u\",\"hypervisor_type\":"
                                                   "\"test\",\"kernel\":\"/boot/vmlinuz\"}", n);
          g_autoptr (sd_bus_message) reply = bench_call (w->bench, bus, MV_BUS_NAME, MV_MANAGER_PATH,
                                                         MV_MANAGER_IFACE, "CreateMachine", "st", spec,
                                                         (uint64_t) (n < w->running ? MV_CREATE_START : 0));
          const char *path = NULL;

          if (sd_bus_message_read (reply, "o", &path) < 0)
            bench_fail (w->bench, "CreateMachine returned no path");
          g_ptr_array_add (w->paths, g_strdup (path));
        }
    }
  sd_bus_flush_close_unref (bus);
  return NULL;
}

/* Creates @others test machines, the first @running of them started,
 * with @clients[] keeping their paths; or, with @delete, deletes them. */
static void
populate (Bench *bench, Populate *clients, guint others, guint running, gboolean delete)
{
  GThread *threads[POPULATE_CLIENTS];
  guint share = (others + POPULATE_CLIENTS - 1) / POPULATE_CLIENTS;

  for (guint c = 0; c < POPULATE_CLIENTS; c++)
    {
      Populate *w = &clients[c];

      w->bench = bench;
      w->first = c * share;
      w->count = MIN (share, others - MIN (others, w->first));
      /* Running ones spread over the clients: the first of each share. */
      w->running = w->first + running / POPULATE_CLIENTS + (c < running % POPULATE_CLIENTS);
      w->delete = delete;
      if (!w->paths)
        w->paths = g_ptr_array_new_with_free_func (g_free);
      /* Deleted: what it created, if anything. */
      if (delete)
        w->count = w->paths->len;
      threads[c] = g_thread_new ("bench-populate", populate_worker, w);
    }
  for (guint c = 0; c < POPULATE_CLIENTS; c++)
    g_thread_join (threads[c]);
}

/* Start (timed) and Stop of @path, @runs times, after two unmeasured;
 * each Start is checked to have left the machine Running. */
static gboolean
start_block (Bench *bench, const char *path, guint runs, BenchSamples *samples,
             BenchSamples *block, char **why)
{
  for (guint i = 0; i < runs + 2; i++)
    {
      gint64 t0 = bench_now ();
      double us;

      if (!try_call (bench, path, "Start", why, NULL))
        return FALSE;
      us = (double) (bench_now () - t0);
      if (i == 2)
        {
          g_autofree char *state = bench_get_string (bench, bench->bus, MV_BUS_NAME, path,
                                                     MV_MACHINE_IFACE, "State");
          if (!g_str_equal (state, "Running"))
            bench_fail (bench, "Start of %s returned with the machine %s, not Running", path, state);
        }
      if (i >= 2)
        {
          bench_samples_add (samples, us);
          bench_samples_add (block, us);
        }
      if (!try_call (bench, path, "Stop", why, NULL))
        return FALSE;
    }
  return TRUE;
}

static void
row_start_admitted (Bench *bench)
{
  /* The figure's block is as long as both of the baseline's. */
  guint runs = bench->smoke ? 10 : 100;
  guint others = bench->smoke ? 50 : OTHERS, running = bench->smoke ? 5 : OTHERS_RUNNING;
  const char *id = "18-start-admitted";
  g_autofree char *what = g_strdup_printf ("Start→Running of a stopped machine (test runtime), "
                                           "%u others defined, %u of them running", others, running);
  g_autofree char *subject = bench_create_machine (bench, bench->bus, NULL, FALSE);
  Populate clients[POPULATE_CLIENTS] = { 0 };
  g_autoptr (BenchSamples) before = bench_samples_new ();
  g_autoptr (BenchSamples) after = bench_samples_new ();
  g_autoptr (BenchSamples) full = bench_samples_new ();
  BenchSamples *figure = bench_samples_new (), *baseline = bench_samples_new ();
  g_autofree char *note = NULL, *spread = NULL, *why = NULL;
  gboolean ok;
  BenchResult *r;
  double diff;

  /* Alone, then among the others, then alone again once they are gone:
   * the baseline brackets the figure in time. */
  ok = start_block (bench, subject, runs, baseline, before, &why);
  if (ok)
    {
      populate (bench, clients, others, running, FALSE);
      ok = start_block (bench, subject, 2 * runs, figure, full, &why);
    }
  populate (bench, clients, others, running, TRUE);
  for (guint c = 0; c < POPULATE_CLIENTS; c++)
    g_ptr_array_unref (clients[c].paths);
  if (ok)
    ok = start_block (bench, subject, runs, baseline, after, &why);
  if (!ok)
    {
      g_autofree char *reason = failed_call_reason (why, "microvmd-bench --rows 18");
      bench_samples_free (figure);
      bench_samples_free (baseline);
      bench_report_add_not_measured (bench->report, "18", id, what, reason);
      return;
    }

  diff = bench_samples_percentile (figure, 50) - bench_samples_percentile (baseline, 50);
  spread = bench_spread_note ("among the others", figure, "alone", baseline);
  note = g_strdup_printf ("figure p50 − baseline p50: %.0f µs per start (%.2f µs per other machine); "
                          "p10 %.0f µs among the others, %.0f µs alone; the baseline's p50 was %.0f µs "
                          "before the others were created and %.0f µs after they were deleted; %s; "
                          "[resources] cpu-overcommit=64, memory-overcommit=4 so that the running "
                          "ones fit",
                          diff, diff / others, bench_samples_percentile (figure, 10),
                          bench_samples_percentile (baseline, 10), bench_samples_percentile (before, 50),
                          bench_samples_percentile (after, 50), spread);
  r = bench_report_add (bench->report, "18", id, what, "µs", others, figure,
                        "the same Start with no other machine defined, same daemon, before and after",
                        baseline);
  bench_result_set_note (r, note);
  bench_result_print (r);
  {
    g_autoptr (sd_bus_message) deleted = bench_call (bench, bench->bus, MV_BUS_NAME, subject,
                                                     MV_MACHINE_IFACE, "Delete", "b", 1);
  }
}

/* ---- #19 ---- */

typedef struct {
  guint32 vcpus;
  guint64 memory_bytes;
} Size;

/* Boots with the smaller, with room for the larger. */
static const Size sizes[2] = {
  { 2, 512 * MIB },
  { 1, 256 * MIB },
};

static char *
resize_body (const Size *size)
{
  return g_strdup_printf ("{\"desired_vcpus\":%u,\"desired_ram\":%" G_GUINT64_FORMAT "}",
                          size->vcpus, size->memory_bytes);
}

/* One PUT /api/v1/vm.resize on a connection of its own; µs. */
static double
direct_resize (Bench *bench, const char *socket, const Size *size)
{
  g_autofree char *body = resize_body (size);
  g_auto (MvHttpResponse) response = { 0 };
  g_autoptr (GError) error = NULL;
  gint64 t0 = bench_now ();
  g_autoptr (MvHttp) http = mv_http_new (socket, "Cloud Hypervisor");
  double us;

  if (!mv_http_request (http, "PUT", "/api/v1/vm.resize", body, strlen (body), &response, &error))
    bench_fail (bench, "PUT /api/v1/vm.resize on %s: %s", socket, error->message);
  us = (double) (bench_now () - t0);
  if (response.status < 200 || response.status > 299)
    {
      g_autofree char *text = response.body ? mv_http_error_text (response.body) : g_strdup ("");
      bench_fail (bench, "PUT /api/v1/vm.resize %s: HTTP %u: %s", body, response.status, text);
    }
  return us;
}

/* What the VMM says the guest has now: its vCPUs and memory. */
static void
vmm_size (Bench *bench, const char *socket, Size *size)
{
  g_autoptr (MvHttp) http = mv_http_new (socket, "Cloud Hypervisor");
  g_auto (MvHttpResponse) response = { 0 };
  g_autoptr (GError) error = NULL;
  g_autoptr (JsonParser) parser = json_parser_new ();
  JsonObject *config, *cpus, *memory;
  gsize length = 0;
  const char *data;

  if (!mv_http_request (http, "GET", "/api/v1/vm.info", NULL, 0, &response, &error))
    bench_fail (bench, "GET /api/v1/vm.info on %s: %s", socket, error->message);
  data = response.body ? g_bytes_get_data (response.body, &length) : NULL;
  if (response.status != 200 || !data || !json_parser_load_from_data (parser, data, length, NULL))
    bench_fail (bench, "GET /api/v1/vm.info on %s: HTTP %u, no JSON", socket, response.status);
  config = json_object_get_object_member (json_node_get_object (json_parser_get_root (parser)),
                                          "config");
  cpus = config ? json_object_get_object_member (config, "cpus") : NULL;
  memory = config ? json_object_get_object_member (config, "memory") : NULL;
  if (!cpus || !memory)
    bench_fail (bench, "GET /api/v1/vm.info on %s: no config.cpus or config.memory", socket);
  size->vcpus = (guint32) json_object_get_int_member (cpus, "boot_vcpus");
  size->memory_bytes = (guint64) json_object_get_int_member (memory, "size") +
                       (guint64) json_object_get_int_member_with_default (memory, "hotplugged_size", 0);
}

static void
expect_size (Bench *bench, const char *socket, const Size *want, const char *by)
{
  Size now;

  vmm_size (bench, socket, &now);
  if (now.vcpus != want->vcpus || now.memory_bytes != want->memory_bytes)
    bench_fail (bench, "after a resize %s to %u vCPUs and %" G_GUINT64_FORMAT " bytes the VMM "
                "has %u and %" G_GUINT64_FORMAT, by, want->vcpus, want->memory_bytes, now.vcpus,
                now.memory_bytes);
}

static char *
machine_socket (Bench *bench, const char *path)
{
  g_autofree char *id = bench_get_string (bench, bench->bus, MV_BUS_NAME, path, MV_MACHINE_IFACE,
                                          "Id");
  char *socket = g_build_filename (mv_test_env_runtime_dir (bench->env), MV_MACHINES_DIR, id,
                                   "api.sock", NULL);

  if (!g_file_test (socket, G_FILE_TEST_EXISTS))
    bench_fail (bench, "the running machine %s has no API socket at %s", path, socket);
  return socket;
}

static void
row_resize (Bench *bench)
{
  guint rounds = bench->smoke ? 3 : 100;
  const char *id = "19-resize";
  const char *what = "Machine.Resize of a running machine (Cloud Hypervisor test VMM), "
                     "1 vCPU 256 MiB ↔ 2 vCPUs 512 MiB";
  g_autofree char *kernel = NULL, *initrd = NULL;
  g_autofree char *spec = NULL, *path = NULL, *socket = NULL, *note = NULL, *spread = NULL;
  g_autofree char *why = NULL;
  g_autoptr (sd_bus_message) created = NULL;
  BenchSamples *figure = bench_samples_new (), *baseline = bench_samples_new ();
  const char *p = NULL;
  BenchResult *r;

  bench_stand_in_guest (bench, &kernel, &initrd);
  spec = g_strdup_printf ("{\"name\":\"bench-r%05u\",\"hypervisor_type\":\"cloud-hypervisor\","
                          "\"kernel\":\"%s\",\"initrd\":\"%s\",\"kernel_args\":\"" BENCH_FAKE_KERNEL_ARGS "\","
                          "\"cpu_millicores\":%u,\"max_vcpus\":%u,\"memory_bytes\":%" G_GUINT64_FORMAT
                          ",\"max_memory_bytes\":%" G_GUINT64_FORMAT "}",
                          ++bench->machine_seq, kernel, initrd, sizes[1].vcpus * 1000, sizes[0].vcpus,
                          sizes[1].memory_bytes, sizes[0].memory_bytes);
  created = bench_call (bench, bench->bus, MV_BUS_NAME, MV_MANAGER_PATH, MV_MANAGER_IFACE,
                        "CreateMachine", "st", spec, (uint64_t) 0);
  if (sd_bus_message_read (created, "o", &p) < 0)
    bench_fail (bench, "CreateMachine returned no path");
  path = g_strdup (p);
  if (!try_call (bench, path, "Start", &why, NULL))
    {
      g_autofree char *reason = failed_call_reason (why, "microvmd-bench --rows 19");
      bench_report_add_not_measured (bench->report, "19", id, what, reason);
      bench_samples_free (figure);
      bench_samples_free (baseline);
      return;
    }
  socket = machine_socket (bench, path);
  expect_size (bench, socket, &sizes[1], "at boot");

  /* Each round both sides go to the larger and back; who goes first
   * alternates. The first round is not measured. */
  for (guint round = 0; round <= rounds; round++)
    {
      for (guint side = 0; side < 2; side++)
        {
          gboolean daemon = (side == 0) == (round % 2 == 0);

          for (guint s = 0; s < G_N_ELEMENTS (sizes); s++)
            {
              gint64 t0 = bench_now ();
              double us;

              if (daemon)
                {
                  if (!try_call (bench, path, "Resize", &why, "ut", sizes[s].vcpus,
                                 (uint64_t) sizes[s].memory_bytes))
                    {
                      g_autofree char *reproduce = g_strdup_printf (
                        "microvmd-bench --rows 19, or microvmctl resize on a running "
                        "cloud-hypervisor machine with max_vcpus %u and max_memory_bytes %"
                        G_GUINT64_FORMAT, sizes[0].vcpus, sizes[0].memory_bytes);
                      g_autofree char *reason = failed_call_reason (why, reproduce);

                      bench_report_add_not_measured (bench->report, "19", id, what, reason);
                      bench_samples_free (figure);
                      bench_samples_free (baseline);
                      try_call (bench, path, "Delete", &why, "b", 1);
                      return;
                    }
                  us = (double) (bench_now () - t0);
                }
              else
                us = direct_resize (bench, socket, &sizes[s]);
              /* Checked once each way, outside the timing. */
              if (round == 0)
                expect_size (bench, socket, &sizes[s], daemon ? "through the daemon" : "by the bench");
              else
                bench_samples_add (daemon ? figure : baseline, us);
            }
        }
    }

  spread = bench_spread_note ("Resize", figure, "the direct PUT", baseline);
  note = g_strdup_printf ("figure p50 − baseline p50: %.0f µs per resize; the daemon admits and "
                          "records the larger size (status.json, config.json), connects, and asks "
                          "vm.info, vm.resize (memory), vm.info until it has it, vm.info, vm.resize "
                          "(vCPUs); the bench sends one vm.resize with both on a fresh connection; "
                          "the VMM walled in, as by default; %s",
                          bench_samples_percentile (figure, 50) - bench_samples_percentile (baseline, 50),
                          spread);
  r = bench_report_add (bench->report, "19", id, what, "µs", 1, figure,
                        "PUT /api/v1/vm.resize {desired_vcpus, desired_ram} sent by the bench to "
                        "the VMM's api.sock, same sizes, same alternation", baseline);
  bench_result_set_note (r, note);
  bench_result_print (r);
  /* A daemon that stops leaves its VMMs running: this one goes first. */
  {
    g_autoptr (sd_bus_message) deleted = bench_call (bench, bench->bus, MV_BUS_NAME, path,
                                                     MV_MACHINE_IFACE, "Delete", "b", 1);
  }
}

void
bench_rows_resources (Bench *bench, gboolean start, gboolean resize)
{
  g_autofree char *ch = g_build_filename (bench->build_dir, "tests", "vmm", "fake-cloud-hypervisor",
                                          NULL);
  g_autofree char *config = g_strdup_printf ("[cloud-hypervisor]\nbinaries=%s\n"
                                             "[resources]\ncpu-overcommit=64\nmemory-overcommit=4\n",
                                             ch);

  mv_test_env_write_config (bench->env, config);
  bench_daemon_start (bench);
  if (start)
    row_start_admitted (bench);
  if (resize)
    row_resize (bench);
  bench_daemon_stop (bench);
  bench_clear_state (bench);
  /* The configuration the other rows expect. */
  mv_test_env_write_config (bench->env, BENCH_BASE_CONFIG);
}
