/* Who may have a host device (the spec's pci_devices and gpu): one
 * machine while it holds reservations (mv_state_holds_reservations), from
 * its start until it stops. A device's IOMMU group goes whole to one
 * machine (hypervisor/host-devices.h), so two machines that hold no
 * device in common hold no group in common either. Checked on the main
 * thread before a start is recorded, across every machine, so that two
 * starts never both pass; nothing is recorded, so nothing outlives the
 * state that holds it, a crash included. */
#include "reconciler-private.h"
#include "core/errors.h"

/* The field of @spec that names @device (a PCI address or a mediated
 * device's UUID), or NULL. */
static char *
field_naming (const MvSpec *spec, const char *device)
{
  for (guint i = 0; i < spec->pci_devices->len; i++)
    if (g_str_equal (spec->pci_devices->pdata[i], device))
      return g_strdup_printf ("pci_devices[%u]", i);
  if (spec->gpu && g_str_equal (spec->gpu->mediated_device_uuid, device))
    return g_strdup ("gpu.mediated_device_uuid");
  return NULL;
}

static gboolean
check_device (MvMachine *machine, const MvSpec *spec, GPtrArray *all, const char *device,
              GError **error)
{
  for (guint j = 0; j < all->len; j++)
    {
      MvMachine *other = all->pdata[j];
      g_autofree char *theirs = NULL, *mine = NULL;

      if (other == machine || other->gone ||
          !mv_state_holds_reservations (other->status->state) ||
          !(theirs = field_naming (other->config->spec, device)))
        continue;
      mine = field_naming (spec, device);
      return mv_error_set (error, MV_ERROR_CONFLICT, "%s: %s is passed through to machine %s "
                           "(%s), which is %s; it holds the device until it stops", mine,
                           device, other->config->spec->name, other->id,
                           mv_state_to_string (other->status->state));
    }
  return TRUE;
}

gboolean
mv_reconciler_check_device_holds (MvMachine *machine, const MvSpec *spec, GError **error)
{
  g_autoptr (GPtrArray) all = NULL;

  if (!mv_spec_has_host_devices (spec))
    return TRUE;
  all = mv_reconciler_all (machine->reconciler);
  for (guint i = 0; i < spec->pci_devices->len; i++)
    if (!check_device (machine, spec, all, spec->pci_devices->pdata[i], error))
      return FALSE;
  return !spec->gpu || check_device (machine, spec, all, spec->gpu->mediated_device_uuid, error);
}
