/* Rows over many defined machines: #2 listing (GetManagedObjects,
 * ListMachines) against libvirt-dbus listing and reading each domain the
 * way an admin page does, #3 start until the first answer, #5 memory and
 * CPU per defined machine. Records only: nothing runs.
 *
 * The daemon's records are copies of one that the daemon itself wrote,
 * with new IDs and names; libvirt's domains are XML files in the private
 * libvirtd's configuration directory. Both are loaded at start, as after a
 * reboot.
 *
 * On the largest N the daemon, filled already, also serves #20's
 * GetManagedObjects while some of its machines start and stop
 * (rows-concurrency.c). */
#include "bench.h"

#include "names.h"
#include "core/event.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <glib/gstdio.h>

#define LIBVIRT_NAME   "org.libvirt"
#define LIBVIRT_PATH   "/org/libvirt/QEMU"
#define LIBVIRT_CONNECT "org.libvirt.Connect"
#define LIBVIRT_DOMAIN  "org.libvirt.Domain"
#define PIPELINE_WINDOW 32     /* below the system bus's limit on pending replies */
/* The event log's cap per file: [events] max-file-bytes by default. */
#define EVENT_LOG_FILE_BYTES (4 << 20)

typedef struct {
  Bench *bench;
  char  *template_id;
  char  *template_config;
  char  *template_status;
  guint  records;           /* defined for the daemon */
  char  *peer_dir;
  guint  domains;           /* defined for libvirt */
  GPid   peer_pid;
} Scale;

/* ---- the daemon's records ---- */

static void
make_template (Scale *s)
{
  Bench *bench = s->bench;
  g_autofree char *path = NULL;
  g_autofree char *dir = NULL, *config = NULL, *status = NULL;
  g_autoptr (GError) error = NULL;
  g_autoptr (sd_bus_message) reply = NULL;
  const char *spec = "{\"name\":\"bench-template\",\"hypervisor_type\":\"test\","
                     "\"kernel\":\"/boot/vmlinuz\",\"cpu_millicores\":1000,"
                     "\"memory_bytes\":268435456,\"labels\":{\"role\":\"bench\"}}";
  const char *p;

  bench_daemon_start (bench);
  reply = bench_call (bench, bench->bus, MV_BUS_NAME, MV_MANAGER_PATH, MV_MANAGER_IFACE,
                      "CreateMachine", "st", spec, (uint64_t) 0);
  sd_bus_message_read (reply, "o", &p);
  path = g_strdup (p);
  s->template_id = bench_get_string (bench, bench->bus, MV_BUS_NAME, path, MV_MACHINE_IFACE, "Id");
  bench_daemon_stop (bench);

  dir = g_build_filename (mv_test_env_state_dir (bench->env), MV_MACHINES_DIR, s->template_id, NULL);
  config = g_build_filename (dir, MV_CONFIG_RECORD, NULL);
  status = g_build_filename (dir, MV_STATUS_RECORD, NULL);
  if (!g_file_get_contents (config, &s->template_config, NULL, &error) ||
      !g_file_get_contents (status, &s->template_status, NULL, &error))
    bench_fail (bench, "cannot read the template record: %s", error->message);
  bench_clear_state (bench);
}

static char *
substitute (const char *text, const char *from1, const char *to1, const char *from2, const char *to2)
{
  g_auto (GStrv) a = g_strsplit (text, from1, -1);
  g_autofree char *t = g_strjoinv (to1, a);
  g_auto (GStrv) b = g_strsplit (t, from2, -1);
  return g_strjoinv (to2, b);
}

/* Copies of the template up to @n machines. Not synced: setting up is
 * not what is measured. */
static void
define_records (Scale *s, guint n)
{
  g_autofree char *machines = g_build_filename (mv_test_env_state_dir (s->bench->env), MV_MACHINES_DIR, NULL);

  g_mkdir_with_parents (machines, 0700);
  for (guint i = s->records; i < n; i++)
    {
      g_autofree char *id = g_strdup_printf ("beec%028x", i + 1);
      g_autofree char *name = g_strdup_printf ("bench-%06u", i + 1);
      g_autofree char *dir = g_build_filename (machines, id, NULL);
      g_autofree char *config = substitute (s->template_config, s->template_id, id, "bench-template", name);
      g_autofree char *status = substitute (s->template_status, s->template_id, id, "bench-template", name);
      g_autofree char *cpath = g_build_filename (dir, MV_CONFIG_RECORD, NULL);
      g_autofree char *spath = g_build_filename (dir, MV_STATUS_RECORD, NULL);

      if (g_mkdir (dir, 0700) < 0 ||
          !g_file_set_contents_full (cpath, config, -1, G_FILE_SET_CONTENTS_NONE, 0600, NULL) ||
          !g_file_set_contents_full (spath, status, -1, G_FILE_SET_CONTENTS_NONE, 0600, NULL))
        bench_fail (s->bench, "cannot write the record %s", dir);
    }
  s->records = n;
}

static guint
list_machines_count (Bench *bench)
{
  g_autoptr (sd_bus_message) reply = bench_call (bench, bench->bus, MV_BUS_NAME, MV_MANAGER_PATH,
                                                 MV_MANAGER_IFACE, "ListMachines", NULL);
  guint n = 0;

  if (sd_bus_message_enter_container (reply, 'a', "(ssso)") < 0)
    bench_fail (bench, "ListMachines: unexpected reply");
  while (sd_bus_message_skip (reply, "(ssso)") > 0)
    n++;
  return n;
}

/* ---- the libvirt peer ---- */

static void
define_domains (Scale *s, guint n)
{
  g_autofree char *qemu_dir = g_build_filename (s->peer_dir, "etc", "qemu", NULL);

  g_mkdir_with_parents (qemu_dir, 0755);
  for (guint i = s->domains; i < n; i++)
    {
      g_autofree char *name = g_strdup_printf ("bench-%06u", i + 1);
      g_autofree char *path = g_strdup_printf ("%s/%s.xml", qemu_dir, name);
      g_autofree char *xml = g_strdup_printf (
        "<domain type='qemu'>\n"
        "  <name>%s</name>\n"
        "  <uuid>beec0000-0000-4000-8000-%012x</uuid>\n"
        "  <memory unit='KiB'>262144</memory>\n"
        "  <vcpu>1</vcpu>\n"
        "  <os><type arch='x86_64' machine='pc'>hvm</type><kernel>/boot/vmlinuz</kernel></os>\n"
        "  <devices><emulator>/usr/bin/qemu-system-x86_64</emulator></devices>\n"
        "</domain>\n", name, i + 1);

      if (!g_file_set_contents (path, xml, -1, NULL))
        bench_fail (s->bench, "cannot write %s", path);
    }
  s->domains = n;
}

static void
die_with_parent (gpointer data)
{
  prctl (PR_SET_PDEATHSIG, SIGTERM);
}

static gboolean
name_owned (Bench *bench, const char *name)
{
  g_autoptr (sd_bus_message) reply = NULL;
  int has = 0;

  if (sd_bus_call_method (bench->bus, "org.freedesktop.DBus", "/org/freedesktop/DBus",
                          "org.freedesktop.DBus", "NameHasOwner", NULL, &reply, "s", name) >= 0)
    sd_bus_message_read (reply, "b", &has);
  return has;
}

/* Starts libvirtd + libvirt-dbus and returns the µs until ListDomains
 * first answered with every defined domain. */
static double
peer_start (Scale *s)
{
  Bench *bench = s->bench;
  g_autofree char *script = g_build_filename (bench->source_dir, "bench", "libvirt-peer.sh", NULL);
  const char *argv[] = { script, s->peer_dir, NULL };
  g_autoptr (GError) error = NULL;
  gint64 t0 = bench_now (), deadline = t0 + 300 * G_USEC_PER_SEC;

  if (!g_spawn_async (NULL, (char **) argv, NULL, G_SPAWN_DO_NOT_REAP_CHILD, die_with_parent, NULL,
                      &s->peer_pid, &error))
    bench_fail (bench, "cannot start the libvirt peer: %s", error->message);
  for (;;)
    {
      if (bench_now () > deadline)
        bench_fail (bench, "libvirt-dbus did not list %u domains within 300 s", s->domains);
      if (waitpid (s->peer_pid, NULL, WNOHANG) == s->peer_pid)
        bench_fail (bench, "the libvirt peer exited; see %s/log", s->peer_dir);
      if (name_owned (bench, LIBVIRT_NAME))
        {
          g_autoptr (sd_bus_message) reply = NULL;
          sd_bus_error e = SD_BUS_ERROR_NULL;
          guint n = 0;

          if (sd_bus_call_method (bench->bus, LIBVIRT_NAME, LIBVIRT_PATH, LIBVIRT_CONNECT,
                                  "ListDomains", &e, &reply, "u", 0) >= 0)
            {
              const char *p;
              sd_bus_message_enter_container (reply, 'a', "o");
              while (sd_bus_message_read (reply, "o", &p) > 0)
                n++;
              if (n == s->domains)
                return (double) (bench_now () - t0);
            }
          sd_bus_error_free (&e);
        }
      g_usleep (1000);
    }
}

static void
peer_stop (Scale *s)
{
  if (!s->peer_pid)
    return;
  kill (s->peer_pid, SIGTERM);
  waitpid (s->peer_pid, NULL, 0);
  s->peer_pid = 0;
  for (int i = 0; i < 10000 && name_owned (s->bench, LIBVIRT_NAME); i++)
    g_usleep (1000);
}

/* libvirtd and libvirt-dbus: the peer script's children. */
static void
peer_usage (Scale *s, double *rss_kib, double *cpu_s)
{
  g_autoptr (GDir) proc = g_dir_open ("/proc", 0, NULL);
  const char *name;

  *rss_kib = 0;
  *cpu_s = 0;
  while (proc && (name = g_dir_read_name (proc)))
    {
      g_autofree char *stat_path = g_strdup_printf ("/proc/%s/stat", name);
      g_autofree char *stat = NULL;
      const char *after;
      int ppid = 0;

      if (!g_ascii_isdigit (*name) || !g_file_get_contents (stat_path, &stat, NULL, NULL) ||
          !(after = strrchr (stat, ')')) || sscanf (after + 2, "%*c %d", &ppid) != 1 ||
          ppid != s->peer_pid)
        continue;
      *rss_kib += bench_proc_rss_kib (atoi (name));
      *cpu_s += bench_proc_cpu_seconds (atoi (name));
    }
}

/* ---- what an admin page does ---- */

static double
timed_list_machines (Bench *bench)
{
  gint64 t0 = bench_now ();
  g_autoptr (sd_bus_message) reply = bench_call (bench, bench->bus, MV_BUS_NAME, MV_MANAGER_PATH,
                                                 MV_MANAGER_IFACE, "ListMachines", NULL);
  return (double) (bench_now () - t0);
}

/* The same listing from the bare sd-bus service: what the bus itself
 * takes to carry N entries of this shape. */
static double
timed_bare_list (Bench *bench, guint n)
{
  gint64 t0 = bench_now ();
  g_autoptr (sd_bus_message) reply = bench_call (bench, bench->bus, BENCH_ECHO_NAME, BENCH_ECHO_PATH,
                                                 MV_MACHINE_IFACE, "List", "u", (uint32_t) n);
  return (double) (bench_now () - t0);
}

static double
timed_list_domains (Bench *bench)
{
  gint64 t0 = bench_now ();
  g_autoptr (sd_bus_message) reply = bench_call (bench, bench->bus, LIBVIRT_NAME, LIBVIRT_PATH,
                                                 LIBVIRT_CONNECT, "ListDomains", "u", 0);
  return (double) (bench_now () - t0);
}

/* Where a ListMachines of @n machines spends its time: batches of
 * listings, with the CPU each party had over the batch (the daemon's
 * threads and the bus daemon from the scheduler's counts, this thread,
 * which reads the answer, from its own clock), per listing; and what is
 * left of the wall time once the daemon's CPU is taken away, which any
 * service sending this listing over this bus would pay too. */
static void
report_listing_cost (Bench *bench, guint n, const BenchSamples *libvirt)
{
  guint batches = bench->smoke ? 1 : 7, per_batch = bench->smoke ? 2 : 10;
  GPid bus_pid = mv_test_env_bus_pid (bench->env);
  BenchSamples *wall = bench_samples_new (), *daemon = bench_samples_new ();
  BenchSamples *bus = bench_samples_new (), *client = bench_samples_new ();
  BenchSamples *rest = bench_samples_new ();
  g_autofree char *id = NULL, *note = NULL;
  BenchResult *r;

  for (guint b = 0; b < batches; b++)
    {
      g_autoptr (GHashTable) d0 = bench_threads_cpu_us (bench->daemon_pid);
      g_autoptr (GHashTable) b0 = bench_threads_cpu_us (bus_pid);
      double c1, d1, b1;
      struct timespec ts0, ts1;
      double elapsed = 0;

      clock_gettime (CLOCK_THREAD_CPUTIME_ID, &ts0);
      for (guint k = 0; k < per_batch; k++)
        elapsed += timed_list_machines (bench);
      clock_gettime (CLOCK_THREAD_CPUTIME_ID, &ts1);
      d1 = bench_threads_cpu_us_since (bench->daemon_pid, d0);
      b1 = bench_threads_cpu_us_since (bus_pid, b0);
      c1 = ((ts1.tv_sec - ts0.tv_sec) * 1e9 + (ts1.tv_nsec - ts0.tv_nsec)) / 1000;
      bench_samples_add (wall, elapsed / per_batch);
      bench_samples_add (daemon, d1 / per_batch);
      bench_samples_add (bus, b1 / per_batch);
      bench_samples_add (client, c1 / per_batch);
      bench_samples_add (rest, (elapsed - d1) / per_batch);
    }

  id = g_strdup_printf ("2-list-machines-cpu-n%u", n);
  r = bench_report_add (bench->report, "2", id, "ListMachines: the daemon's CPU per listing (all its threads)",
                        "µs", n, daemon, "the listing's time, the same listings", bench_samples_copy (wall));
  note = g_strdup_printf ("%u batches of %u listings; CPU from the scheduler's counts "
                          "(/proc/PID/task/*/schedstat) over each batch", batches, per_batch);
  bench_result_set_note (r, note);
  bench_result_judge_on_interval (r);
  bench_result_print (r);
  g_free (id);
  id = g_strdup_printf ("2-list-machines-cpu-bus-n%u", n);
  r = bench_report_add (bench->report, "2", id, "ListMachines: the bus daemon's CPU per listing (as above)",
                        "µs", n, bus, "the listing's time (as above)", bench_samples_copy (wall));
  bench_result_judge_on_interval (r);
  bench_result_print (r);
  g_free (id);
  id = g_strdup_printf ("2-list-machines-cpu-client-n%u", n);
  r = bench_report_add (bench->report, "2", id,
                        "ListMachines: the client's CPU per listing, reading the answer (as above)", "µs", n,
                        client, "the listing's time (as above)", wall);
  bench_result_judge_on_interval (r);
  bench_result_print (r);
  g_free (id);
  id = g_strdup_printf ("2-list-machines-floor-n%u", n);
  r = bench_report_add (bench->report, "2", id,
                        "ListMachines: the listing's time less the daemon's CPU, what the bus and the "
                        "client take to carry it (as above)", "µs", n, rest,
                        libvirt ? "libvirt-dbus ListDomains (as above)" : NULL,
                        libvirt ? bench_samples_copy (libvirt) : NULL);
  bench_result_set_note (r, "a service that took no CPU at all to answer would still take this long; "
                            "a ratio above 0.10 here means that no service sending this listing on this "
                            "bus is 10× faster than libvirt-dbus");
  bench_result_print (r);
}

typedef struct {
  Bench *bench;
  guint  pending;
  guint  failed;
} Pipeline;

static int
on_getall_reply (sd_bus_message *reply, void *userdata, sd_bus_error *ret_error)
{
  Pipeline *p = userdata;

  p->pending--;
  if (sd_bus_message_is_method_error (reply, NULL))
    p->failed++;
  return 1;
}

/* ListDomains, then GetAll on every domain with up to PIPELINE_WINDOW
 * calls in flight: the admin page's listing at its quickest. */
static double
timed_libvirt_admin_page (Bench *bench, guint expected)
{
  gint64 t0 = bench_now ();
  g_autoptr (sd_bus_message) list = bench_call (bench, bench->bus, LIBVIRT_NAME, LIBVIRT_PATH,
                                                LIBVIRT_CONNECT, "ListDomains", "u", 0);
  g_autoptr (GPtrArray) paths = g_ptr_array_new_with_free_func (g_free);
  Pipeline p = { bench, 0, 0 };
  const char *path;
  guint next = 0;

  sd_bus_message_enter_container (list, 'a', "o");
  while (sd_bus_message_read (list, "o", &path) > 0)
    g_ptr_array_add (paths, g_strdup (path));
  if (paths->len != expected)
    bench_fail (bench, "libvirt listed %u domains, %u defined", paths->len, expected);

  while (next < paths->len || p.pending > 0)
    {
      while (next < paths->len && p.pending < PIPELINE_WINDOW)
        {
          if (sd_bus_call_method_async (bench->bus, NULL, LIBVIRT_NAME, paths->pdata[next],
                                        "org.freedesktop.DBus.Properties", "GetAll",
                                        on_getall_reply, &p, "s", LIBVIRT_DOMAIN) < 0)
            bench_fail (bench, "cannot send GetAll");
          next++;
          p.pending++;
        }
      if (sd_bus_process (bench->bus, NULL) == 0)
        sd_bus_wait (bench->bus, UINT64_MAX);
    }
  if (p.failed)
    bench_fail (bench, "%u of %u GetAll calls to libvirt-dbus failed", p.failed, paths->len);
  return (double) (bench_now () - t0);
}

/* ---- the rows ---- */

typedef struct {
  double rss0, cpu0;          /* the daemon with no machines, after one listing */
  double peer_rss0, peer_cpu0;
  BenchSamples *gmo_per_machine_1000; /* µs, each GetManagedObjects at N = 1,000 */
} Reference;

/* Each of @samples (one call each, of @n machines) per machine. */
static BenchSamples *
per_machine (const BenchSamples *samples, guint n)
{
  BenchSamples *each = bench_samples_new ();

  for (guint i = 0; i < bench_samples_count (samples); i++)
    bench_samples_add (each, g_array_index (samples->values, double, i) / n);
  return each;
}

static void
report_start_rows (Scale *s, guint n, BenchSamples *name, BenchSamples *list, BenchSamples *peer)
{
  BenchResult *r;
  g_autofree char *id1 = g_strdup_printf ("3-name-n%u", n);
  g_autofree char *id2 = g_strdup_printf ("3-first-list-n%u", n);

  r = bench_report_add (s->bench->report, "3", id1,
                        "daemon start → bus name owned (every record loaded and validated first)",
                        "µs", n, name, NULL, NULL);
  if (n >= 10000)
    bench_result_set_target (r, BENCH_TARGET_VALUE_AT_MOST, 5e5, "< 0.5 s for 10,000 records");
  bench_result_print (r);
  r = bench_report_add (s->bench->report, "3", id2, "daemon start → first ListMachines answered",
                        "µs", n, list, peer ? "libvirtd + libvirt-dbus start → first ListDomains answered" : NULL, peer);
  if (n >= 10000)
    bench_result_set_target (r, BENCH_TARGET_VALUE_AT_MOST, 5e5, "< 0.5 s for 10,000 records");
  bench_result_print (r);
}

static void
scale_step (Scale *s, guint n, Reference *ref)
{
  Bench *bench = s->bench;
  guint start_runs = bench->smoke ? 1 : 3;
  double budget_s = bench->smoke ? 1 : n >= 10000 ? 40 : 15;
  guint max_runs = bench->smoke ? 3 : n >= 10000 ? 10 : n >= 1000 ? 20 : 50;
  guint per_page = n >= 10000 ? 3 : 10;
  BenchSamples *name = bench_samples_new (), *first = bench_samples_new ();
  BenchSamples *peer_first = s->peer_dir ? bench_samples_new () : NULL;
  BenchSamples *gmo = bench_samples_new (), *lm = bench_samples_new ();
  BenchSamples *lm2 = bench_samples_new (), *bare_list = bench_samples_new ();
  BenchSamples *page = s->peer_dir ? bench_samples_new () : NULL;
  BenchSamples *ld = s->peer_dir ? bench_samples_new () : NULL;
  g_autofree char *id = NULL;
  gboolean usage_row = n >= 10000 || bench->smoke;
  double cpu_started = 0, peer_cpu_started = 0, unused_rss;
  BenchResult *r;
  gint64 t0;

  define_records (s, n);
  if (s->peer_dir)
    define_domains (s, n);
  /* Setting up is not what is measured: its writes reach the disk first. */
  sync ();
  for (guint i = 0; i < start_runs; i++)
    {
      gint64 spawn = bench_now ();
      double owned = 0;
      guint listed;

      if (!bench_daemon_try_start (bench, &owned))
        {
          g_autofree char *line = bench_daemon_last_log_line (bench);
          g_autofree char *reason = g_strdup_printf ("the daemon exited %.1f s after it was started with %u machines defined: %s",
                                                     (bench_now () - spawn) / 1e6, n, line);
          g_autofree char *rid = g_strdup_printf ("2-3-5-n%u", n);
          bench_report_add_not_measured (bench->report, "3", rid,
                                         "start, listings and usage at this N (#3, #2, #5)", reason);
          g_print ("[3] N = %u: not measured: %s\n", n, reason);
          bench_samples_free (name);
          bench_samples_free (first);
          bench_samples_free (peer_first);
          bench_samples_free (gmo);
          bench_samples_free (lm);
          bench_samples_free (lm2);
          bench_samples_free (bare_list);
          bench_samples_free (page);
          bench_samples_free (ld);
          return;
        }
      listed = list_machines_count (bench);

      bench_samples_add (first, (double) (bench_now () - spawn));
      bench_samples_add (name, owned);
      if (listed != n)
        bench_fail (bench, "the daemon listed %u machines, %u defined (see InvalidRecords)", listed, n);
      cpu_started = bench_proc_cpu_seconds (bench->daemon_pid);
      if (i + 1 < start_runs)
        bench_daemon_stop (bench);
    }
  if (s->peer_dir)
    {
      for (guint i = 0; i < start_runs; i++)
        {
          bench_samples_add (peer_first, peer_start (s));
          peer_usage (s, &unused_rss, &peer_cpu_started);
          if (i + 1 < start_runs)
            peer_stop (s);
        }
    }
  report_start_rows (s, n, name, first, peer_first);

  /* #2: alternate so that both see the same machine. */
  t0 = bench_now ();
  for (guint i = 0; i < max_runs; i++)
    {
      /* The daemon's calls are quick: several of each per libvirt page,
       * still interleaved, so both distributions have enough runs. */
      for (guint k = 0; k < (page ? per_page : 1); k++)
        {
          bench_samples_add (gmo, bench_timed_managed_objects (bench, NULL));
          double listed_in = timed_list_machines (bench);

          bench_samples_add (lm, listed_in);
          bench_samples_add (lm2, listed_in);
          bench_samples_add (bare_list, timed_bare_list (bench, n));
        }
      if (page)
        bench_samples_add (page, timed_libvirt_admin_page (bench, n));
      if (ld)
        bench_samples_add (ld, timed_list_domains (bench));
      if (i >= 2 && bench_now () - t0 > budget_s * G_USEC_PER_SEC)
        break;
    }

  /* Linear in N: the time per machine at 10,000 against that at 1,000.
   * The two sizes are measured minutes apart, with a daemon each: the
   * interval resamples each side's runs on its own. */
  if (n == 1000)
    {
      g_clear_pointer (&ref->gmo_per_machine_1000, bench_samples_free);
      ref->gmo_per_machine_1000 = per_machine (gmo, n);
    }
  if (n >= 10000 && ref->gmo_per_machine_1000)
    {
      r = bench_report_add (bench->report, "2", "2-linearity",
                            "GetManagedObjects time per machine at N = 10,000 against at N = 1,000",
                            "µs", n, per_machine (gmo, n), "the same at N = 1,000",
                            g_steal_pointer (&ref->gmo_per_machine_1000));
      bench_result_set_target (r, BENCH_TARGET_RATIO_AT_MOST, 1.5, "≤ 1.5 (linear in N)");
      bench_result_set_note (r, "1.0 is exactly linear; the 1.5 bound is this benchmark's reading of \"growing linearly\"");
      bench_result_judge_on_unpaired_interval (r);
      bench_result_print (r);
    }

  /* #5 at the largest N, against the same processes with none defined. */
  if (usage_row)
    {
      double rss = bench_proc_rss_kib (bench->daemon_pid);
      double cpu_before_idle = bench_proc_cpu_seconds (bench->daemon_pid);
      double peer_rss = 0, peer_cpu_before_idle = 0, peer_cpu_after_idle = 0;
      double idle_s = bench->smoke ? 0.5 : 3.0, cpu_after_idle;
      BenchSamples *rss_pm = bench_samples_new (), *cpu_pm = bench_samples_new ();
      BenchSamples *idle = bench_samples_new ();
      BenchSamples *peer_rss_pm = NULL, *peer_cpu_pm = NULL, *peer_idle = NULL;
      g_autofree char *note = NULL;

      if (s->peer_dir)
        peer_usage (s, &peer_rss, &peer_cpu_before_idle);
      g_usleep ((gulong) (idle_s * G_USEC_PER_SEC));
      cpu_after_idle = bench_proc_cpu_seconds (bench->daemon_pid);
      bench_samples_add (rss_pm, (rss - ref->rss0) / n);
      bench_samples_add (cpu_pm, (cpu_started - ref->cpu0) * 1e6 / n);
      bench_samples_add (idle, (cpu_after_idle - cpu_before_idle) / idle_s * 100);
      if (s->peer_dir)
        {
          peer_usage (s, &unused_rss, &peer_cpu_after_idle);
          peer_rss_pm = bench_samples_new ();
          peer_cpu_pm = bench_samples_new ();
          peer_idle = bench_samples_new ();
          bench_samples_add (peer_rss_pm, (peer_rss - ref->peer_rss0) / n);
          bench_samples_add (peer_cpu_pm, (peer_cpu_started - ref->peer_cpu0) * 1e6 / n);
          bench_samples_add (peer_idle, (peer_cpu_after_idle - peer_cpu_before_idle) / idle_s * 100);
          note = g_strdup_printf ("daemon RSS %.0f KiB with %u machines, %.0f KiB with none; "
                                  "libvirtd + libvirt-dbus %.0f KiB and %.0f KiB; after start and the #2 listings",
                                  rss, n, ref->rss0, peer_rss, ref->peer_rss0);
        }
      else
        note = g_strdup_printf ("daemon RSS %.0f KiB with %u machines, %.0f KiB with none", rss, n, ref->rss0);
      r = bench_report_add (bench->report, "5", "5-rss", "daemon RSS per defined machine",
                            "KiB", n, rss_pm, peer_rss_pm ? "libvirtd + libvirt-dbus" : NULL, peer_rss_pm);
      bench_result_set_target (r, BENCH_TARGET_VALUE_AT_MOST, 16, "< 16 KiB per machine");
      bench_result_set_note (r, note);
      bench_result_print (r);
      r = bench_report_add (bench->report, "5", "5-cpu-start", "daemon CPU per defined machine to start and answer the first list",
                            "µs", n, cpu_pm, peer_cpu_pm ? "libvirtd + libvirt-dbus" : NULL, peer_cpu_pm);
      bench_result_set_note (r, "user + system CPU from /proc, less the same with no machines defined, divided by N");
      bench_result_print (r);
      r = bench_report_add (bench->report, "5", "5-cpu-idle", "daemon CPU while idle with N machines defined",
                            "% of one CPU", n, idle, peer_idle ? "libvirtd + libvirt-dbus" : NULL, peer_idle);
      bench_result_print (r);
    }

  if (usage_row)
    report_listing_cost (bench, n, ld);

  id = g_strdup_printf ("2-managed-objects-n%u", n);
  r = bench_report_add (bench->report, "2", id, "GetManagedObjects (every machine with its properties)",
                        "µs", n, gmo, page ? "libvirt-dbus: ListDomains + GetAll on each domain, 32 in flight" : NULL, page);
  if (n >= 10000)
    bench_result_set_target (r, BENCH_TARGET_SPEEDUP_AT_LEAST, 10, "≥ 10× faster than libvirt-dbus");
  bench_result_print (r);
  g_free (id);
  id = g_strdup_printf ("2-list-machines-n%u", n);
  r = bench_report_add (bench->report, "2", id, "ListMachines",
                        "µs", n, lm, ld ? "libvirt-dbus ListDomains" : NULL, ld);
  if (n >= 10000)
    bench_result_set_target (r, BENCH_TARGET_SPEEDUP_AT_LEAST, 10, "≥ 10× faster than libvirt-dbus");
  bench_result_print (r);
  g_free (id);
  id = g_strdup_printf ("2-list-machines-bare-n%u", n);
  r = bench_report_add (bench->report, "2", id, "ListMachines (as above)", "µs", n, lm2,
                        "bare sd-bus service: the same number of entries of the same shape, from constants",
                        bare_list);
  if (n >= 10000)
    bench_result_set_note (r, "what the bus itself takes to carry the listing: the daemon's share is the rest");
  bench_result_print (r);
}

/* The daemon started on @n records, for #20 when #2, #3 and #5 are not
 * run. */
static void
load_records (Scale *s, guint n)
{
  define_records (s, n);
  sync ();
  bench_daemon_start (s->bench);
}

/* ---- #3: a start beside a full event log ---- */

/* The event log's two files (MV_EVENTS_LOG_NAME, MV_EVENTS_ROTATED_NAME)
 * filled to their cap as a long-lived daemon leaves them: 4 MiB each of
 * machines' events. Returns how many. */
static guint64
fill_event_log (Bench *bench)
{
  const char *names[] = { MV_EVENTS_ROTATED_NAME, MV_EVENTS_LOG_NAME };
  guint64 sequence = 0;

  for (guint f = 0; f < G_N_ELEMENTS (names); f++)
    {
      g_autofree char *path = g_build_filename (mv_test_env_state_dir (bench->env), names[f], NULL);
      g_autoptr (GString) text = g_string_new (NULL);

      while (text->len < EVENT_LOG_FILE_BYTES - 512)
        {
          g_autofree char *id = g_strdup_printf ("beec%028" G_GINT64_MODIFIER "x", sequence % 1000);
          g_autofree char *name = g_strdup_printf ("bench-%06" G_GUINT64_FORMAT, sequence % 1000);
          g_autofree char *message = g_strdup_printf ("Machine %s started", name);
          MvEvent event = { .sequence = ++sequence, .time = g_get_real_time (),
                            .kind = MV_EVENT_STARTED, .machine_id = id, .machine_name = name,
                            .operation_id = (char *) "0f3c2a1b9d8e7f6a5b4c3d2e1f0a9b8c",
                            .message = message };
          g_autofree char *json = mv_event_to_json (&event);

          g_string_append_printf (text, "%s\n", json);
        }
      if (!g_file_set_contents (path, text->str, text->len, NULL))
        bench_fail (bench, "cannot write %s", path);
    }
  return sequence;
}

static void
remove_event_log (Bench *bench)
{
  const char *names[] = { MV_EVENTS_ROTATED_NAME, MV_EVENTS_LOG_NAME };

  for (guint f = 0; f < G_N_ELEMENTS (names); f++)
    {
      g_autofree char *path = g_build_filename (mv_test_env_state_dir (bench->env), names[f], NULL);
      g_unlink (path);
    }
}

/* Daemon start → name owned with the event log full (as a daemon that has
 * run a while leaves it), against the same start with none; no machines,
 * interleaved. */
static void
row_start_with_event_log (Bench *bench)
{
  guint pairs = bench->smoke ? 1 : 7;
  BenchSamples *figure = bench_samples_new (), *baseline = bench_samples_new ();
  g_autofree char *what = NULL, *spread = NULL, *note = NULL;
  guint64 events = 0;
  BenchResult *r;

  for (guint i = 0; i < pairs; i++)
    for (guint side = 0; side < 2; side++)
      {
        gboolean full = (side == 0) == (i % 2 == 0);
        double owned = 0;

        if (full)
          events = fill_event_log (bench);
        else
          remove_event_log (bench);
        sync ();
        if (!bench_daemon_try_start (bench, &owned))
          bench_fail (bench, "the daemon did not start beside %s event log",
                      full ? "a full" : "no");
        bench_daemon_stop (bench);
        bench_samples_add (full ? figure : baseline, owned);
      }
  remove_event_log (bench);

  what = g_strdup_printf ("daemon start → bus name owned, no machines, the event log full "
                          "(%s and %s, %d MiB each, %" G_GUINT64_FORMAT " events)",
                          MV_EVENTS_LOG_NAME, MV_EVENTS_ROTATED_NAME,
                          EVENT_LOG_FILE_BYTES >> 20, events);
  spread = bench_spread_note ("with the log", figure, "without", baseline);
  note = g_strdup_printf ("%u pairs, alternating which goes first; the daemon keeps its newest "
                          "10,000 events in memory ([events] kept-in-memory); %s", pairs, spread);
  r = bench_report_add (bench->report, "3", "3-start-event-log", what, "µs", (gint64) events,
                        figure, "the same start with no event log", baseline);
  bench_result_judge_on_interval (r);
  bench_result_set_note (r, note);
  bench_result_print (r);
}

void
bench_rows_scale (Bench *bench, gboolean scale, gboolean listing_under_churn)
{
  static const guint full_sizes[] = { 100, 1000, 10000 };
  static const guint smoke_sizes[] = { 20 };
  const guint *sizes = bench->smoke ? smoke_sizes : full_sizes;
  guint n_sizes = bench->smoke ? G_N_ELEMENTS (smoke_sizes) : G_N_ELEMENTS (full_sizes);
  Scale s = { .bench = bench };
  Reference ref = { 0 };

  if (scale)
    row_start_with_event_log (bench);
  /* References with nothing defined: the daemon, then the peer (whose
   * first start also fills libvirt's cache of QEMU's capabilities). */
  if (scale)
    {
      bench_daemon_start (bench);
      bench_timed_managed_objects (bench, NULL);
      ref.rss0 = bench_proc_rss_kib (bench->daemon_pid);
      ref.cpu0 = bench_proc_cpu_seconds (bench->daemon_pid);
      bench_daemon_stop (bench);
    }
  make_template (&s);

  if (scale && bench->with_libvirt)
    {
      s.peer_dir = g_build_filename (mv_test_env_dir (bench->env), "libvirt", NULL);
      peer_start (&s);
      timed_libvirt_admin_page (bench, 0);
      peer_usage (&s, &ref.peer_rss0, &ref.peer_cpu0);
      peer_stop (&s);
    }
  else if (scale)
    {
      bench_report_add_not_measured (bench->report, "2", "2-libvirt", "libvirt-dbus baselines of #2, #3, #5",
                                     bench->smoke ? "smoke mode leaves out the libvirt peer"
                                                  : "--no-libvirt was given");
    }

  for (guint i = 0; i < n_sizes; i++)
    {
      gboolean largest = i + 1 == n_sizes;

      if (scale)
        scale_step (&s, sizes[i], &ref);
      else if (largest)
        load_records (&s, sizes[i]);
      /* The daemon is up with every record loaded: filling it is the slow
       * part of listing N machines under churn. */
      if (listing_under_churn && largest)
        {
          if (bench->daemon_pid)
            bench_row_listing_under_churn (bench, sizes[i]);
          else
            bench_report_add_not_measured (bench->report, "20", "20-managed-objects-under-churn",
                                           "GetManagedObjects while machines cycle Start/Stop",
                                           "the daemon did not start with the machines defined (see #3)");
        }
      bench_daemon_stop (bench);
      peer_stop (&s);
    }
  bench_clear_state (bench);
  g_clear_pointer (&ref.gmo_per_machine_1000, bench_samples_free);
  g_free (s.template_id);
  g_free (s.template_config);
  g_free (s.template_status);
  g_free (s.peer_dir);
}
