/* Resize (seed 002): a running machine is given other vCPUs and memory
 * without a restart, within its maximums.
 *
 * The larger of what it held and what it wants is admitted and recorded
 * first (status.json, with the phase), and the new size goes into its
 * spec (config.json), so that its next start keeps it; then a worker
 * asks the hypervisor. A size the hypervisor refuses before it changes
 * anything is put back as it was. One it fails after taking a part of
 * leaves the machine holding the larger until its next start, which
 * starts with the new size; so does a daemon that crashes meanwhile
 * (Recover clears the phase and keeps both records). */
#include "reconciler-private.h"
#include "core/errors.h"

typedef struct {
  MvReconciler    *rec;
  char            *machine_id;
  MvRuntime       *runtime;
  char            *runtime_dir;
  MvSpec          *spec;
  JsonObject      *vmm;
  MvRuntimeResize  resize;
  MvResources      held_before;   /* status's admitted size before */
  MvSpec          *old_spec;      /* the spec before, put back if refused */
  MvLiveChangeFunc     func;
  gpointer         func_data;
} ResizeWork;

static void
resize_work_free (ResizeWork *work)
{
  g_free (work->machine_id);
  g_free (work->runtime_dir);
  mv_spec_free (work->spec);
  g_clear_pointer (&work->vmm, json_object_unref);
  mv_spec_free (work->old_spec);
  g_free (work);
}

static void
resize_in_thread (GTask *gtask, gpointer source, gpointer task_data, GCancellable *cancellable)
{
  ResizeWork *work = task_data;
  GError *error = NULL;
  MvRuntimeRequest req = {
    .machine_id = work->machine_id,
    .spec = work->spec,
    .runtime_dir = work->runtime_dir,
    .vmm = work->vmm,
  };

  if (!work->runtime->resize (work->runtime, &req, &work->resize, &error))
    g_task_return_error (gtask, error);
  else
    g_task_return_boolean (gtask, TRUE);
}

/* The hypervisor's refusal of a size, before it took any of it. */
static gboolean
refused_before_change (const GError *error)
{
  return g_error_matches (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT) ||
         g_error_matches (error, MV_ERROR, MV_ERROR_UNSUPPORTED);
}

static void
on_resized (GObject *source, GAsyncResult *result, gpointer user_data)
{
  ResizeWork *work = g_task_get_task_data (G_TASK (result));
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
  if (!error)
    {
      /* It holds what it has now. */
      machine->status->vcpus = work->resize.vcpus;
      machine->status->memory_bytes = work->resize.memory_bytes;
      mv_machine_event (machine, MV_EVENT_RESIZED, NULL, NULL);
      mv_machine_log (machine, G_LOG_LEVEL_INFO, "Machine %s resized to %u vCPUs and %"
                      G_GUINT64_FORMAT " bytes of memory", machine->config->spec->name,
                      work->resize.vcpus, work->resize.memory_bytes);
    }
  else if (refused_before_change (error))
    {
      g_autoptr (GError) local = NULL;

      /* Nothing changed: neither does the record. */
      MvConfig *previous = mv_config_copy (machine->config);

      machine->status->vcpus = work->held_before.vcpus;
      machine->status->memory_bytes = work->held_before.memory_bytes;
      /* As a new generation: generations only go forward. */
      mv_config_update_spec (machine->config, g_steal_pointer (&work->old_spec),
                             mv_reconciler_now (work->rec));
      if (!mv_reconciler_commit_config (machine, previous, &local))
        mv_machine_log (machine, G_LOG_LEVEL_WARNING, "Machine %s: its old size could not be "
                        "put back in its spec: %s", machine->config->spec->name, local->message);
    }
  else
    mv_machine_log (machine, G_LOG_LEVEL_WARNING, "Machine %s: the resize failed after the "
                    "hypervisor took it; it holds %u vCPUs and %" G_GUINT64_FORMAT " bytes until "
                    "it next starts, with the new size: %s", machine->config->spec->name,
                    machine->status->vcpus, machine->status->memory_bytes, error->message);
  mv_machine_changed (machine, MV_PROP_SPEC | MV_PROP_ALL_CONFIG);
  mv_machine_release (machine);
  mv_reconciler_reconcile (machine);
  work->func (machine, error, work->func_data);
}

/* What @machine may be resized to: within its maximums (none: its boot
 * size, no room), memory in whole steps. */
static gboolean
check_size (const MvSpec *spec, guint32 vcpus, guint64 memory_bytes, GError **error)
{
  guint max_vcpus = MAX (spec->max_vcpus, mv_spec_vcpus (spec));
  guint64 max_memory = MAX (spec->max_memory_bytes, spec->memory_bytes);

  if (vcpus < 1 || vcpus > max_vcpus)
    return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT,
                         "vcpus: %u is outside 1 to %u (max_vcpus%s)", vcpus, max_vcpus,
                         spec->max_vcpus ? "" : " is not set: the machine has no room to grow");
  if (memory_bytes == 0 || memory_bytes % MV_MEMORY_STEP_BYTES != 0)
    return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT,
                         "memory_bytes: %" G_GUINT64_FORMAT " is not a whole number of %"
                         G_GUINT64_FORMAT "-byte steps", memory_bytes,
                         MV_MEMORY_STEP_BYTES);
  if (memory_bytes > max_memory)
    return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT,
                         "memory_bytes: %" G_GUINT64_FORMAT " is above %" G_GUINT64_FORMAT
                         " (max_memory_bytes%s)", memory_bytes, max_memory,
                         spec->max_memory_bytes ? ""
                                                : " is not set: the machine has no room to grow");
  return TRUE;
}

gboolean
mv_reconciler_resize (MvReconciler *rec, MvMachine *machine, guint32 vcpus,
                      guint64 memory_bytes, MvLiveChangeFunc func, gpointer data, GError **error)
{
  const MvSpec *spec = machine->config->spec;
  MvRecords *records = rec->host->records;
  MvResources held = mv_machine_held (machine);
  MvResources want = { vcpus, memory_bytes };
  MvResources reserve = { MAX (held.vcpus, vcpus), MAX (held.memory_bytes, memory_bytes) };
  MvResources others;
  g_autoptr (MvSpec) resized = NULL;
  g_autoptr (MvSpec) old_spec = NULL;
  MvConfig *previous;
  MvRuntime *runtime;
  ResizeWork *work;

  if (!mv_machine_check_not_busy (machine, error) || !check_size (spec, vcpus, memory_bytes, error))
    return FALSE;
  if (machine->status->state != MV_STATE_RUNNING || !machine->status->vmm)
    return mv_error_set (error, MV_ERROR_INVALID_STATE,
                         "Machine %s is %s: only a running machine is resized (a stopped one "
                         "takes a new size with Update)", spec->name,
                         mv_state_to_string (machine->status->state));
  if (!(runtime = mv_reconciler_runtime_for (machine, error)))
    return FALSE;
  if (!runtime->resize)
    return mv_error_set (error, MV_ERROR_UNSUPPORTED, "%s machines cannot be resized",
                         runtime->type);
  /* Never more vCPUs than the host has CPUs, overcommitted or not. */
  if (!mv_capacity_check_ever (&rec->options.capacity, &want, error))
    return FALSE;
  if (vcpus == held.vcpus && memory_bytes == held.memory_bytes)
    {
      func (machine, NULL, data);
      return TRUE;
    }
  /* Growing needs room beside the others; the larger is reserved. */
  others = mv_reconciler_held (rec);
  mv_resources_take (&others, &held);
  if (!mv_reconciler_fits_beside (rec, spec->name, &reserve, &others, error))
    return FALSE;

  old_spec = mv_spec_copy (spec);
  resized = mv_spec_copy (spec);
  /* Whole vCPUs; a quota of part of one is kept while the count stays. */
  if (vcpus != mv_spec_vcpus (spec))
    resized->cpu_millicores = vcpus * 1000;
  resized->memory_bytes = memory_bytes;
  machine->status->vcpus = reserve.vcpus;
  machine->status->memory_bytes = reserve.memory_bytes;
  if (!mv_machine_hold (machine, "resize", error))
    {
      machine->status->vcpus = held.vcpus;
      machine->status->memory_bytes = held.memory_bytes;
      return FALSE;
    }
  previous = mv_config_copy (machine->config);
  mv_config_update_spec (machine->config, g_steal_pointer (&resized), mv_reconciler_now (rec));
  if (!mv_reconciler_commit_config (machine, previous, error))
    {
      machine->status->vcpus = held.vcpus;
      machine->status->memory_bytes = held.memory_bytes;
      mv_machine_release (machine);
      return FALSE;
    }
  mv_machine_changed (machine, MV_PROP_ALL_CONFIG);

  work = g_new0 (ResizeWork, 1);
  work->rec = rec;
  work->machine_id = g_strdup (machine->id);
  work->runtime = runtime;
  work->runtime_dir = records->runtime_dir (records, machine->id);
  work->spec = mv_spec_copy (machine->config->spec);
  work->vmm = mv_reconciler_copy_vmm (machine->status->vmm);
  work->resize = (MvRuntimeResize) { held.vcpus, want.vcpus, held.memory_bytes,
                                     want.memory_bytes };
  work->held_before = held;
  work->old_spec = g_steal_pointer (&old_spec);
  work->func = func;
  work->func_data = data;
  mv_reconciler_run_in_thread (resize_in_thread, on_resized, work,
                               (GDestroyNotify) resize_work_free);
  return TRUE;
}
