/* The benchmark: what every row shares. One private system bus (with
 * polkitd) carries the daemon under test and every baseline. */
#pragma once
#include <glib.h>
#include <systemd/sd-bus.h>

#include "core/machine.h"
#include "stats.h"
#include "store/store.h"
#include "test-env.h"

#define BENCH_ECHO_NAME   "org.microvmd1.BenchEcho"
#define BENCH_ECHO_PATH   "/org/microvmd1/BenchEcho"
#define BENCH_CALL_TIMEOUT_US (300 * G_USEC_PER_SEC)
/* The kernel command line of a test VMM's simulated guest, booted at once. */
#define BENCH_FAKE_KERNEL_ARGS "console=ttyS0 reboot=k panic=1 microvmd.boot_ms=0"
/* The daemon's configuration between rows that write their own. The rows
 * measure the rest of the daemon with thousands of test machines running
 * on a 2-core host, which admission would refuse; row 18 measures
 * admission with a configuration of its own. */
#define BENCH_BASE_CONFIG \
  "# microvmd test configuration\n" \
  "[resources]\n" \
  "admission=false\n"

G_DEFINE_AUTOPTR_CLEANUP_FUNC (sd_bus_message, sd_bus_message_unref)

typedef struct {
  MvTestEnv   *env;
  sd_bus      *bus;          /* the benchmark's own connection, as root */
  BenchReport *report;
  gboolean     smoke;        /* seconds-long check that everything still works */
  char        *outdir;
  char        *source_dir;
  char        *build_dir;
  char        *daemon_path;
  char        *guest_dir;    /* vmlinuz + initrd.img, or NULL */
  char        *agent_guest_dir; /* microvmd's guest: vmlinuz + initramfs.img, or NULL */
  char        *rootfs;       /* the busybox root disk booted with it, or NULL */
  char       **rows;         /* the rows to run ("7", "10", ...); NULL: all */
  gboolean     with_libvirt;
  char        *daemon_netns; /* the daemon starts in this network namespace; NULL: ours */
  GPid         daemon_pid;
  GPid         echo_pid;
  guint        machine_seq;  /* for unique machine names */
} Bench;

/* Monotonic and wall-clock time in µs. */
gint64   bench_now (void);
gint64   bench_wall (void);

/* Fails the whole benchmark: a broken benchmark must not pass. */
void     bench_fail (Bench *bench, const char *format, ...) G_GNUC_PRINTF (2, 3) G_GNUC_NORETURN;

sd_bus  *bench_open_bus (Bench *bench);

/* Starts the daemon under test on the bench's state directory and returns
 * the µs from spawn until org.microvmd1 was owned. */
double   bench_daemon_start (Bench *bench);
/* The same, but a daemon that exits before it owns the name is a result:
 * FALSE, and the daemon's last log line says why. */
gboolean bench_daemon_try_start (Bench *bench, double *us);
char    *bench_daemon_last_log_line (Bench *bench);
void     bench_daemon_stop (Bench *bench);
/* Removes every machine and snapshot record (the daemon must not be
 * running). */
void     bench_clear_state (Bench *bench);

/* A method call whose reply is checked; fails the bench on error. */
sd_bus_message *bench_call (Bench *bench, sd_bus *bus, const char *dest, const char *path,
                            const char *iface, const char *member, const char *types, ...);
char    *bench_create_machine (Bench *bench, sd_bus *bus, const char *extra_json, gboolean start);
char    *bench_get_string (Bench *bench, sd_bus *bus, const char *dest, const char *path,
                           const char *iface, const char *prop);

/* µs for one GetManagedObjects; with @machines, counts the machines in
 * it (and fails the bench on a reply it cannot read). */
double   bench_timed_managed_objects (Bench *bench, guint *machines);

/* Writes the files a test VMM's simulated guest boots from (it needs
 * files, not a kernel) into the images directory; their paths. */
void     bench_stand_in_guest (Bench *bench, char **kernel, char **initrd);

/* From /proc: resident set in KiB, user+system CPU seconds. */
double   bench_proc_rss_kib (GPid pid);
/* What @pid holds alone (Private_Clean + Private_Dirty), and its parent. */
double   bench_proc_private_kib (GPid pid);
GPid     bench_proc_parent (GPid pid);
/* The PID of machine @id's VMM, from the status record the daemon wrote. */
GPid     bench_vmm_pid (Bench *bench, const char *id);
double   bench_proc_cpu_seconds (GPid pid);
/* The whole machine's busy CPU seconds since boot from /proc/stat, all
 * CPUs summed: user, system, interrupts, stolen; not idle, not waiting
 * for the disk. */
double   bench_machine_busy_seconds (void);
/* The scheduler's nanosecond CPU counts of each thread of @pid
 * (/proc/@pid/task/N/schedstat), by thread ID, in µs. */
GHashTable *bench_threads_cpu_us (GPid pid);
/* The CPU @pid's threads have had since @before (bench_threads_cpu_us),
 * in µs: a thread begun since counts whole, one that has ended is lost
 * for the time it ran since @before, not for its whole life. */
double   bench_threads_cpu_us_since (GPid pid, GHashTable *before);
/* Keeps every thread @pid has now on CPU @cpu; -1: on any CPU again. */
void     bench_pin_process (GPid pid, int cpu);

/* Echo service (echo-service.c): a bare sd-bus service in a child process
 * with the same property set as a machine. */
GPid     bench_echo_start (Bench *bench);
void     bench_echo_stop (Bench *bench);

/* One create → Running's records (rows-create.c): a new machine's
 * config made from @json, and every record the daemon writes for it,
 * written with the store's own code. Row 4's writes alone, and the
 * writes of the echo service's CreateDurable. */
MvConfig *bench_create_config (const char *json, GError **error);
gboolean  bench_write_create_records (MvStore *store, MvConfig *config, GError **error);

/* The rows. Each adds its entries to bench->report. */
void     bench_row_reads (Bench *bench);          /* #1 */
void     bench_row_polkit (Bench *bench);         /* #6 */
void     bench_row_signals (Bench *bench);        /* #8 */
void     bench_row_create (Bench *bench);         /* #4 */
void     bench_row_qemu (Bench *bench);           /* #7 */
/* Restarts the daemon: run it where no other row's daemon is running. */
void     bench_row_sandbox (Bench *bench);        /* #9 */
/* #2, #3 and #5 if @scale; on the largest N, #20's GetManagedObjects
 * under churn if @listing_under_churn. */
void     bench_rows_scale (Bench *bench, gboolean scale, gboolean listing_under_churn);
/* Restarts the daemon with microvmd's guest files, as #9 does. */
void     bench_row_agent (Bench *bench);          /* #10 */
/* Starts a registry and pulls images with the image store; restarts the
 * daemon with microvmd's guest files, as #10 does. */
void     bench_row_images (Bench *bench);         /* #11 */
/* Drives MvDns in the bench process, in a network namespace of the row's
 * own, against dnsmasq there; no daemon. */
void     bench_row_dns (Bench *bench);            /* #12 */
/* Starts NetworkManager in a network namespace of the rows' own and
 * restarts the daemon in it with microvmd's guest files, as #10 does;
 * runs #13 if @attach, #14 if @wake. */
void     bench_rows_network (Bench *bench, gboolean attach, gboolean wake); /* #13, #14 */
/* Restarts the daemon with the QEMU, Cloud Hypervisor and Firecracker
 * test runtimes; real guests need --guest-dir. */
void     bench_row_snapshots (Bench *bench);      /* #15 */
/* Restarts the daemon with the Firecracker test runtime and the
 * Prometheus endpoint; runs #16 if @stats, #17 if @scrape. */
void     bench_rows_observability (Bench *bench, gboolean stats, gboolean scrape); /* #16, #17 */
/* Restarts the daemon with the Cloud Hypervisor test VMM and room for a
 * hundred running test machines; runs #18 if @start, #19 if @resize. */
void     bench_rows_resources (Bench *bench, gboolean start, gboolean resize); /* #18, #19 */
/* Restarts the daemon with the Firecracker test VMM: machines started at
 * once, reads while other machines cycle. */
void     bench_rows_concurrency (Bench *bench);   /* #20 */
/* #20's GetManagedObjects while machines cycle, on the running daemon
 * with its @n machines defined and stopped (rows-scale.c calls it). */
void     bench_row_listing_under_churn (Bench *bench, guint n); /* #20 */
/* Restarts the daemon with microvmd's guest files, as #10 does: warm
 * starts against cold ones of the same image. */
void     bench_row_warm (Bench *bench);           /* #21 */
/* Restarts the daemon with the Firecracker test runtime and the console
 * bridge. */
void     bench_row_console (Bench *bench);        /* #22 */
