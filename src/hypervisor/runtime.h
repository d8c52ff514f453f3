/* Core's MvRuntime on top of any MvStarter: what the reconciler calls to
 * boot, stop, pause, save and watch a machine's guest. */
#pragma once
#include "hypervisor.h"
#include "version-cache.h"
#include "core/host/runtime.h"
#include "names.h"

#define MV_DEFAULT_BOOT_TIMEOUT_SECONDS  120
#define MV_DEFAULT_STOP_TIMEOUT_SECONDS  30
#define MV_TIMEOUT_SECONDS_MAX           3600
/* microvmd's guest kernel and initramfs, as installed (GUESTDIR, from
 * config.h: the prefix's lib/microvmd). */
#define MV_GUEST_KERNEL_NAME             "vmlinuz"
#define MV_GUEST_INITRAMFS_NAME          "initramfs.img"


typedef struct _MvSandbox MvSandbox;
typedef struct _MvShares MvShares;

/* Takes @starter; keeps a reference to @sandbox (NULL: host files are not
 * checked and VMMs are not walled in). Readiness is awaited for
 * @boot_timeout_seconds; a graceful stop waits @stop_timeout_seconds
 * before it ends the VMM. */
MvRuntime *mv_hypervisor_runtime_new (MvStarter *starter, MvSandbox *sandbox,
                                      guint boot_timeout_seconds, guint stop_timeout_seconds);
/* No watch may be live; main thread. */
void       mv_hypervisor_runtime_free (MvRuntime *runtime);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (MvRuntime, mv_hypervisor_runtime_free)

/* The starter behind a runtime made by mv_hypervisor_runtime_new(). */
MvStarter *mv_hypervisor_runtime_starter (MvRuntime *runtime);
/* microvmd's guest kernel and initramfs (with microvmd-agent as its
 * init), booted by specs that name no kernel or no initrd; NULL: none. */
void       mv_hypervisor_runtime_set_guest_files (MvRuntime *runtime, const char *kernel,
                                                  const char *initramfs);
/* The kernels of [kernels] by name (name -> path; referenced). */
void       mv_hypervisor_runtime_set_kernels (MvRuntime *runtime, GHashTable *kernels);

/* The directories machines may share and how (shares.h); keeps a
 * reference. NULL, the default: none may be shared. */
void       mv_hypervisor_runtime_set_shares (MvRuntime *runtime, MvShares *shares);
/* The cgroups the VMMs and their helpers run in (cgroup.h); keeps a
 * reference. NULL, the default: they run in the daemon's. */
void       mv_hypervisor_runtime_set_cgroups (MvRuntime *runtime, MvCgroups *cgroups);

/* A runtime for each built-in hypervisor (MvRuntime*, freed with the
 * array), configured from the daemon's @config (may be NULL: defaults):
 * every configured or installed Cloud Hypervisor and Firecracker version
 * (versions.h), then QEMU from [qemu] binary and accel; [lifecycle]
 * boot-timeout-seconds and stop-timeout-seconds; [guest] kernel and
 * initramfs (default: the installed ones, if any); [paths] and [sandbox]
 * (sandbox.h). A bad value is MV_ERROR_INVALID_ARGUMENT naming the group
 * and key. QEMU's version is remembered in @versions (may be NULL). */
GPtrArray *mv_hypervisor_builtin_runtimes (GKeyFile *config, MvVersionCache *versions,
                                           GError **error);
