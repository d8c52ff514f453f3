/* The qemu backend: qemu-system-x86_64 driven over QMP. */
#pragma once
#include "hypervisor.h"
#include "version-cache.h"

#define MV_QEMU_TYPE            "qemu"
#define MV_QEMU_DEFAULT_BINARY  "qemu-system-x86_64"

typedef struct {
  const char *binary;   /* a path, or a name looked up in PATH; NULL: the default */
  const char *accel;    /* "kvm", "tcg" or "auto"; NULL: auto */
  MvVersionCache *versions;   /* where its version is remembered; NULL: nowhere */
} MvQemuOptions;

/* Fails only for a bad accel setting; a missing binary is reported when a
 * guest is started (and by mv_qemu_starter_binary() returning NULL). */
MvStarter  *mv_qemu_starter_new (const MvQemuOptions *options, GError **error);
/* The binary's path, or NULL if it is not installed. */
const char *mv_qemu_starter_binary (MvStarter *starter);
/* The accelerator guests get, and why it was chosen. */
const char *mv_qemu_starter_accel (MvStarter *starter, const char **why);

/* What "auto" picks on this host: "kvm" where /dev/kvm is usable and is not
 * a PVM-based nested KVM (on which stock guest kernels hang), else "tcg".
 * @sysfs_module_dir, @cpuinfo and @kvm_device are the host paths, given by
 * tests. */
const char *mv_qemu_pick_accel (const char *sysfs_module_dir, const char *cpuinfo,
                                const char *kvm_device, char **why);
