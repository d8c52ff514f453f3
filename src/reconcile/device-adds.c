/* Host devices added to a running machine (Update): plugged into its
 * guest without a restart, as they would be given at boot.
 *
 * The devices are checked against the host and against every other
 * machine's holds, then the phase "add-devices" is recorded and the new
 * spec with it (config.json): from then on the devices are this
 * machine's, and no other start can take them. A worker gives the VMM
 * each new device in turn (its sysfs directory and VFIO group, then the
 * hypervisor's hot-add). Those it did not take are taken out of the spec
 * again, as a new generation, and the Update fails with the reason. A
 * daemon that crashes meanwhile leaves the spec with all of them: the
 * machine holds them, Recover clears the phase, and the guest has them
 * all from its next start. */
#include "reconciler-private.h"
#include "core/errors.h"

typedef struct {
  MvReconciler     *rec;
  char             *machine_id;
  MvRuntime        *runtime;
  char             *runtime_dir;
  MvSpec           *spec;       /* with the devices */
  MvSpec           *booted;     /* the spec it ran with before */
  JsonObject       *vmm;
  guint             added;
  MvLiveChangeFunc  func;
  gpointer          func_data;
} AddWork;

static void
add_work_free (AddWork *work)
{
  g_free (work->machine_id);
  g_free (work->runtime_dir);
  mv_spec_free (work->spec);
  mv_spec_free (work->booted);
  g_clear_pointer (&work->vmm, json_object_unref);
  g_free (work);
}

static void
add_in_thread (GTask *gtask, gpointer source, gpointer task_data, GCancellable *cancellable)
{
  AddWork *work = task_data;
  GError *error = NULL;
  MvRuntimeRequest req = {
    .machine_id = work->machine_id,
    .spec = work->spec,
    .runtime_dir = work->runtime_dir,
    .vmm = work->vmm,
  };

  if (!work->runtime->add_devices (work->runtime, &req, work->booted, &work->added, &error))
    g_task_return_error (gtask, error);
  else
    g_task_return_boolean (gtask, TRUE);
}

/* @spec with the devices @booted had and the first @added of those it
 * adds: its PCI devices in order, then its GPU. */
static MvSpec *
with_devices_taken (const MvSpec *spec, const MvSpec *booted, guint added)
{
  MvSpec *taken = mv_spec_copy (spec);
  guint new_pci = spec->pci_devices->len - booted->pci_devices->len;

  g_ptr_array_set_size (taken->pci_devices, booted->pci_devices->len + MIN (added, new_pci));
  if (!booted->gpu && added <= new_pci)
    g_clear_pointer (&taken->gpu, mv_gpu_free);
  return taken;
}

static void
on_added (GObject *source, GAsyncResult *result, gpointer user_data)
{
  AddWork *work = g_task_get_task_data (G_TASK (result));
  MvMachine *machine = mv_reconciler_lookup (work->rec, work->machine_id);
  g_autoptr (GError) error = NULL;

  g_task_propagate_boolean (G_TASK (result), &error);
  if (!machine)
    {
      if (!error)
        g_set_error (&error, MV_ERROR, MV_ERROR_NOT_FOUND, "The machine was deleted");
      work->func (NULL, error, work->func_data);
      return;
    }
  if (error)
    {
      g_autoptr (GError) local = NULL;
      MvConfig *previous = mv_config_copy (machine->config);

      /* As a new generation: generations only go forward. */
      mv_config_update_spec (machine->config,
                             with_devices_taken (machine->config->spec, work->booted,
                                                 work->added),
                             mv_reconciler_now (work->rec));
      if (!mv_reconciler_commit_config (machine, previous, &local))
        mv_machine_log (machine, G_LOG_LEVEL_WARNING, "Machine %s: the devices its guest did "
                        "not take could not be taken out of its spec; it holds them, and "
                        "has them from its next start: %s", machine->config->spec->name,
                        local->message);
      g_prefix_error (&error, "%u of the devices added were plugged in: ", work->added);
    }
  else
    mv_machine_log (machine, G_LOG_LEVEL_INFO, "Machine %s: %u host devices plugged into its "
                    "guest", machine->config->spec->name, work->added);
  mv_machine_changed (machine, MV_PROP_SPEC | MV_PROP_ALL_CONFIG);
  mv_machine_release (machine);
  mv_reconciler_reconcile (machine);
  work->func (machine, error, work->func_data);
}

gboolean
mv_reconciler_check_adding_devices (MvMachine *machine, const MvSpec *spec, GError **error)
{
  MvRuntime *runtime;

  if (machine->status->state != MV_STATE_RUNNING || !machine->status->vmm)
    return mv_error_set (error, MV_ERROR_INVALID_STATE, "Machine %s is %s: host devices are "
                         "plugged into a running machine, or given to a stopped one at its "
                         "next start", machine->config->spec->name,
                         mv_state_to_string (machine->status->state));
  if (!mv_machine_check_not_busy (machine, error) ||
      !(runtime = mv_reconciler_runtime_for (machine, error)))
    return FALSE;
  if (!runtime->add_devices)
    return mv_error_set (error, MV_ERROR_UNSUPPORTED, "%s: %s machines cannot be given host "
                         "devices while they run", spec->pci_devices->len ? "pci_devices" : "gpu",
                         runtime->type);
  return mv_reconciler_check_device_holds (machine, spec, error);
}

void
mv_reconciler_add_devices (MvMachine *machine, MvSpec *booted, MvLiveChangeFunc func,
                           gpointer data)
{
  MvReconciler *rec = machine->reconciler;
  AddWork *work = g_new0 (AddWork, 1);

  work->rec = rec;
  work->machine_id = g_strdup (machine->id);
  work->runtime = mv_reconciler_runtime_for (machine, NULL);
  work->runtime_dir = rec->host->records->runtime_dir (rec->host->records, machine->id);
  work->spec = mv_spec_copy (machine->config->spec);
  work->booted = booted;
  work->vmm = mv_reconciler_copy_vmm (machine->status->vmm);
  work->func = func;
  work->func_data = data;
  mv_reconciler_run_in_thread (add_in_thread, on_added, work, (GDestroyNotify) add_work_free);
}
