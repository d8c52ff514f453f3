/* What the tests of the REST backends share: a scratch directory with a
 * kernel and a disk, the test VMMs' paths, and waiting for the guest's
 * console. */
#pragma once
#include <glib.h>

#include "hypervisor/hypervisor.h"

typedef struct {
  char *dir;           /* scratch, removed at the end */
  char *vm_dir;        /* <dir>/vm: the VMM's directory */
  char *socket_path;   /* <vm_dir>/api.sock */
  char *console_path;  /* <vm_dir>/console.log */
  char *kernel;
  char *disk;
} VmmFixture;

/* The test VMM built as tests/vmm/fake-@name, standing in for @name
 * ("firecracker", "cloud-hypervisor"). */
char     *vmm_fixture_binary (const char *name);
/* A script that runs the test VMM @name reporting @version. */
char     *vmm_fixture_versioned_binary (VmmFixture *fixture, const char *name,
                                        const char *version);

void      vmm_fixture_setup (VmmFixture *fixture, gconstpointer data);
void      vmm_fixture_teardown (VmmFixture *fixture, gconstpointer data);

/* A spec booting the fixture's kernel with one disk, one TAP (MTU 1400,
 * 1 MiB/s each way), the console and a vsock agent socket in the VMM
 * directory. */
MvVmSpec *vmm_fixture_spec (VmmFixture *fixture);

/* Waits up to @timeout_ms for @text on the console at @path. */
gboolean  vmm_fixture_wait_console (const char *path, const char *text, guint timeout_ms);
/* The highest MICROVMD-COUNTER on the console, or -1. */
int       vmm_fixture_last_counter (const char *path);
/* Kills what is still running on the fixture's socket. */
void      vmm_fixture_kill (VmmFixture *fixture);

/* How long a test VMM's guest may take to print a console marker. */
#define VMM_FIXTURE_CONSOLE_TIMEOUT_MS 5000

/* The backend's starter for the test VMM @name ("firecracker",
 * "cloud-hypervisor"); fails the test if it cannot be made. */
MvStarter    *vmm_fixture_starter (const char *name);
/* Boots the fixture's spec and waits for the guest's ready marker. */
MvHypervisor *vmm_fixture_boot (VmmFixture *fixture, MvStarter *starter, MvProcess **vmm);
/* Fails the test unless vm_info reports @state. */
void          vmm_fixture_assert_state (MvHypervisor *hv, MvVmState state);

/* A guest snapshotted and restored into a second VMM directory. */
typedef struct {
  char          *snapshot;      /* <dir>/snapshot, kept */
  char          *dir;           /* <dir>/vm2 */
  char          *socket_path;   /* <dir>/vm2/api.sock */
  MvRestoreSpec  spec;          /* <dir>/vm2/console.log, TAP mvtap9, <dir>/vm2/vsock.sock */
  int            counter;       /* the guest's last counter when it was paused */
  MvProcess     *vmm;
  MvHypervisor  *hv;
} VmmRestored;

/* Pauses @hv's guest once it counts, snapshots it and shuts @vmm down;
 * then restores it with @starter into <dir>/vm2, given TAP mvtap9 and a
 * console and agent socket of its own. The restored guest is paused. */
void          vmm_fixture_snapshot_restore (VmmFixture *fixture, MvStarter *starter,
                                            MvHypervisor *hv, MvProcess *vmm,
                                            VmmRestored *restored);
/* Resumes the restored guest and waits for it to count on from where it
 * was; then shuts its VMM down. */
void          vmm_fixture_resume_restored (VmmRestored *restored);
void          vmm_restored_clear (VmmRestored *restored);
