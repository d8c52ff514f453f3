/* Host devices: see host-devices.h. */
#include "host-devices.h"
#include "jail.h"
#include "core/errors.h"

#include <string.h>

static char *host_root;

void
mv_host_devices_set_root (const char *root)
{
  g_free (host_root);
  host_root = root && *root ? g_strdup (root) : NULL;
}

char *
mv_host_devices_path (const char *path)
{
  return host_root ? g_build_filename (host_root, path, NULL) : g_strdup (path);
}

void
mv_host_device_free (MvHostDevice *device)
{
  if (!device)
    return;
  g_free (device->name);
  g_free (device->sysfs_path);
  g_free (device->group);
  g_free (device);
}

/* The last component of the link @dir/@name points to, or NULL. */
static char *
link_name (const char *dir, const char *name)
{
  g_autofree char *path = g_build_filename (dir, name, NULL);
  g_autofree char *target = g_file_read_link (path, NULL);

  return target ? g_path_get_basename (target) : NULL;
}

/* Every device of IOMMU group @group is bound to vfio-pci and among
 * @given; else MV_ERROR_INVALID_ARGUMENT for @field. */
static gboolean
check_group_whole (const char *field, const char *group, GPtrArray *given, GError **error)
{
  g_autofree char *rel = g_build_filename ("/sys/kernel/iommu_groups", group, "devices", NULL);
  g_autofree char *dir = mv_host_devices_path (rel);
  g_autoptr (GDir) d = g_dir_open (dir, 0, NULL);
  const char *member;

  if (!d)
    return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT, "%s: IOMMU group %s has no device "
                         "list (%s)", field, group, dir);
  while ((member = g_dir_read_name (d)))
    {
      g_autofree char *link = g_build_filename (member, "driver", NULL);
      g_autofree char *driver = link_name (dir, link);
      gboolean listed = FALSE;

      for (guint i = 0; i < given->len && !listed; i++)
        listed = g_str_equal (given->pdata[i], member);
      if (g_strcmp0 (driver, "vfio-pci") != 0)
        return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT, "%s: IOMMU group %s also holds "
                             "%s, bound to %s: every device of the group must be bound to "
                             "vfio-pci", field, group, member, driver ? driver : "no driver");
      if (!listed)
        return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT, "%s: IOMMU group %s also holds "
                             "%s, which the spec does not list: a group goes to one machine "
                             "whole; add it to pci_devices", field, group, member);
    }
  return TRUE;
}

static MvHostDevice *
resolve_pci (const MvSpec *spec, guint i, GError **error)
{
  const char *address = spec->pci_devices->pdata[i];
  g_autofree char *field = g_strdup_printf ("pci_devices[%u]", i);
  g_autofree char *rel = g_build_filename ("/sys/bus/pci/devices", address, NULL);
  g_autoptr (MvHostDevice) device = g_new0 (MvHostDevice, 1);
  g_autofree char *driver = NULL;

  device->name = g_strdup (address);
  device->sysfs_path = mv_host_devices_path (rel);
  if (!g_file_test (device->sysfs_path, G_FILE_TEST_IS_DIR))
    return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT, "%s: this host has no PCI device "
                         "%s", field, address), NULL;
  driver = link_name (device->sysfs_path, "driver");
  if (g_strcmp0 (driver, "vfio-pci") != 0)
    return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT, "%s: %s is bound to %s, not "
                         "vfio-pci; bind it to vfio-pci to pass it through", field, address,
                         driver ? driver : "no driver"), NULL;
  device->group = link_name (device->sysfs_path, "iommu_group");
  if (!device->group)
    return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT, "%s: %s is in no IOMMU group: "
                         "this host has no IOMMU turned on", field, address), NULL;
  if (!check_group_whole (field, device->group, spec->pci_devices, error))
    return NULL;
  return g_steal_pointer (&device);
}

static MvHostDevice *
resolve_gpu (const MvGpu *gpu, GError **error)
{
  g_autofree char *rel = g_build_filename ("/sys/bus/mdev/devices", gpu->mediated_device_uuid,
                                           NULL);
  g_autoptr (MvHostDevice) device = g_new0 (MvHostDevice, 1);
  g_autofree char *type = NULL;

  device->name = g_strdup (gpu->mediated_device_uuid);
  device->sysfs_path = mv_host_devices_path (rel);
  device->mediated = TRUE;
  if (!g_file_test (device->sysfs_path, G_FILE_TEST_IS_DIR))
    return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT, "gpu.mediated_device_uuid: this "
                         "host has no mediated device %s", gpu->mediated_device_uuid), NULL;
  type = link_name (device->sysfs_path, "mdev_type");
  if (g_strcmp0 (type, gpu->profile) != 0)
    return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT, "gpu.profile: mediated device %s is "
                         "of type %s, not %s", gpu->mediated_device_uuid,
                         type ? type : "(none)", gpu->profile), NULL;
  device->group = link_name (device->sysfs_path, "iommu_group");
  if (!device->group)
    return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT, "gpu.mediated_device_uuid: %s is in "
                         "no IOMMU group", gpu->mediated_device_uuid), NULL;
  return g_steal_pointer (&device);
}

GPtrArray *
mv_host_devices_resolve (const MvSpec *spec, GError **error)
{
  g_autoptr (GPtrArray) devices = g_ptr_array_new_with_free_func ((GDestroyNotify) mv_host_device_free);

  for (guint i = 0; i < spec->pci_devices->len; i++)
    {
      MvHostDevice *device = resolve_pci (spec, i, error);

      if (!device)
        return NULL;
      g_ptr_array_add (devices, device);
    }
  if (spec->gpu)
    {
      MvHostDevice *device = resolve_gpu (spec->gpu, error);

      if (!device)
        return NULL;
      g_ptr_array_add (devices, device);
    }
  return g_steal_pointer (&devices);
}

/* An ID that every hypervisor takes (QEMU's: a letter, then letters,
 * digits, '-', '.' and '_'), naming the device itself. */
static char *
device_id (const char *prefix, const char *name)
{
  g_autofree char *id = g_strconcat (prefix, name, NULL);

  return g_strdelimit (g_steal_pointer (&id), ":", '-');
}

void
mv_host_devices_add_to (MvVmSpec *vm, const MvSpec *spec)
{
  for (guint i = 0; i < spec->pci_devices->len; i++)
    {
      const char *address = spec->pci_devices->pdata[i];
      g_autofree char *rel = g_build_filename ("/sys/bus/pci/devices", address, NULL);
      g_autofree char *path = mv_host_devices_path (rel);
      g_autofree char *id = device_id ("pci-", address);

      mv_vm_spec_add_device (vm, id, path, i);
    }
  if (spec->gpu)
    {
      const char *uuid = spec->gpu->mediated_device_uuid;
      g_autofree char *rel = g_build_filename ("/sys/bus/mdev/devices", uuid, NULL);
      g_autofree char *path = mv_host_devices_path (rel);
      g_autofree char *id = device_id ("gpu-", uuid);

      mv_vm_spec_add_device (vm, id, path, MV_VM_DEVICE_SLOTS - 1);
    }
}

/* The VFIO nodes of @device: its group's, as the host has it and where
 * the VMM finds it, and the container's. */
static gboolean
vfio_nodes (const MvVmDevice *device, char **host_node, char **node, char **container,
            GError **error)
{
  g_autofree char *group = link_name (device->path, "iommu_group");

  if (!group)
    return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT, "the device %s is in no IOMMU "
                         "group", device->path);
  *node = g_build_filename ("/dev/vfio", group, NULL);
  *host_node = mv_host_devices_path (*node);
  *container = mv_host_devices_path ("/dev/vfio/vfio");
  return TRUE;
}

gboolean
mv_host_devices_give (MvJail *jail, GPtrArray *devices, GError **error)
{
  for (guint i = 0; devices && i < devices->len; i++)
    {
      const MvVmDevice *device = devices->pdata[i];
      g_autofree char *node = NULL, *host_node = NULL, *container = NULL;

      if (!vfio_nodes (device, &host_node, &node, &container, error) ||
          !mv_jail_show_sysfs_dir (jail, device->path, error) ||
          !mv_jail_add_device_at (jail, container, "/dev/vfio/vfio", error) ||
          !mv_jail_add_device_at (jail, host_node, node, error))
        return FALSE;
    }
  return TRUE;
}

gboolean
mv_host_devices_give_to_running (int pidfd, uid_t uid, const MvVmDevice *device,
                                 GError **error)
{
  g_autofree char *node = NULL, *host_node = NULL, *container = NULL;

  return vfio_nodes (device, &host_node, &node, &container, error) &&
         mv_jail_show_sysfs_dir_to_running (pidfd, device->path, error) &&
         mv_jail_add_device_to_running (pidfd, uid, container, "/dev/vfio/vfio", error) &&
         mv_jail_add_device_to_running (pidfd, uid, host_node, node, error);
}

void
mv_host_devices_take_from_running (int pidfd, const MvVmDevice *device)
{
  g_autofree char *node = NULL, *host_node = NULL, *container = NULL;

  if (vfio_nodes (device, &host_node, &node, &container, NULL))
    mv_jail_take_from_running (pidfd, device->path, node);
}
