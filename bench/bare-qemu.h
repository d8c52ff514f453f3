/* A bare QEMU for the baselines: the test guest on a plain command line,
 * driven over QMP. Rows 7 and 15 compare the daemon's QEMU with it. */
#pragma once
#include "bench.h"

#include <gio/gio.h>
#include <json-glib/json-glib.h>

#define BENCH_QEMU              "qemu-system-x86_64"
#define BENCH_READY_MARKER      "MICROVMD-GUEST-READY"
#define BENCH_QEMU_KERNEL_ARGS  "console=ttyS0 tsc_early_khz=2000000 reboot=t panic=-1"

typedef struct {
  GSocketConnection *conn;
  GDataInputStream  *in;
} BenchQmp;

/* Connects to the QMP socket at @path of the QEMU @pid, which may still be
 * starting, and leaves capabilities negotiation done. */
void      bench_qmp_connect (Bench *bench, BenchQmp *q, const char *path, GPid pid);
void      bench_qmp_close (BenchQmp *q);
/* Sends @command and returns the "return" member of its answer; events in
 * between are skipped; an error answer fails the bench. */
JsonNode *bench_qmp_execute (Bench *bench, BenchQmp *q, const char *command);
/* query-migrate says "completed"; "failed" fails the bench. */
gboolean  bench_qmp_migration_done (Bench *bench, BenchQmp *q);
gboolean  bench_qmp_status_is (Bench *bench, BenchQmp *q, const char *want);

/* The test guest with @memory_mib of memory, in @dir (console.log,
 * qmp.sock, agent.sock there); @incoming (may be NULL) is a migration
 * source, and the guest then waits, paused, for a "cont". */
GPid      bench_qemu_spawn (Bench *bench, const char *dir, guint memory_mib, const char *incoming);
/* Waits for the ready marker on @dir's console.log, which the VMM @pid
 * writes. */
void      bench_vmm_wait_console (Bench *bench, const char *dir, GPid pid);
/* One bare QEMU run of the test guest with 256 MiB (--guest-dir): boot
 * to the ready marker into @boot; save (stop, migrate to a file, quit);
 * restore (-incoming, wait for paused, cont) into @restore. */
void      bench_bare_qemu_run (Bench *bench, BenchSamples *boot, BenchSamples *restore);
/* quit, and waits for the process. */
void      bench_qemu_end (Bench *bench, BenchQmp *q, GPid pid);

/* For a VMM the bench starts: a session of its own, as the daemon gives
 * its VMMs, and it dies with the bench. */
void      bench_vmm_child_setup (gpointer data);
