/* The host devices a machine is given (the spec's pci_devices and gpu),
 * as sysfs shows them, and what a hypervisor is told of them.
 *
 * A PCI device may be passed through when it exists
 * (/sys/bus/pci/devices/<address>), is bound to vfio-pci, and its IOMMU
 * group is whole: every device of the group is bound to vfio-pci and
 * given to the same machine (VFIO hands a group to one process, and a
 * device left to a host driver would share its DMA with the guest). A
 * GPU is a mediated device (/sys/bus/mdev/devices/<uuid>) whose type is
 * the spec's profile. Each has the VFIO group /dev/vfio/<group>, which
 * the machine's VMM alone is given (with /dev/vfio/vfio).
 *
 * Checked when a spec is recorded and again before every start, since
 * devices are rebound and mediated devices removed. Everything is read
 * below a root, "/" but for tests, which give a tree of their own
 * (mv_host_devices_set_root). */
#pragma once
#include "core/spec.h"
#include "hypervisor/hypervisor.h"

#include <glib.h>

typedef struct {
  char     *name;          /* the spec's: "0000:01:00.0", or the mdev's UUID */
  char     *sysfs_path;    /* the device's sysfs directory, under the root */
  char     *group;         /* its IOMMU group: "12" */
  gboolean  mediated;
} MvHostDevice;

void          mv_host_device_free (MvHostDevice *device);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (MvHostDevice, mv_host_device_free)

/* Reads everything below @root from now on (tests only; NULL: "/"). */
void          mv_host_devices_set_root (const char *root);
/* @path below the root: "/dev/vfio/12" → "<root>/dev/vfio/12". */
char         *mv_host_devices_path (const char *path);

typedef struct _MvJail MvJail;

/* Adds @spec's devices to @vm: each PCI device at its place in
 * pci_devices, the GPU last, with the ID and slot that are its own
 * (MvVmDevice). */
void          mv_host_devices_add_to (MvVmSpec *vm, const MvSpec *spec);

/* Shows the VMM behind @jail @devices (MvVmDevice*; a VM spec's): each
 * sysfs directory read-only, and the VFIO nodes /dev/vfio/vfio and
 * /dev/vfio/<group> of their groups, its alone. */
gboolean      mv_host_devices_give (MvJail *jail, GPtrArray *devices, GError **error);
/* The same for @device, to the running walled-in VMM @pidfd of @uid;
 * and its directory and group node taken back again, once its guest did
 * not take it. */
gboolean      mv_host_devices_give_to_running (int pidfd, uid_t uid, const MvVmDevice *device,
                                               GError **error);
void          mv_host_devices_take_from_running (int pidfd, const MvVmDevice *device);

/* @spec's devices (MvHostDevice*, PCI devices first, in order, then the
 * GPU), each checked as above; MV_ERROR_INVALID_ARGUMENT naming the field
 * and what is wrong. An empty array for a spec with none. */
GPtrArray    *mv_host_devices_resolve (const MvSpec *spec, GError **error);
