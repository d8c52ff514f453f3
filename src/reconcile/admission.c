/* Admission (seed 002): a machine starts only if the CPU and memory it
 * asks for fit beside what the machines that hold resources (starting,
 * running, paused) hold. It is judged on the main thread just before a
 * start step is recorded, and the step makes the machine Starting in the
 * same turn: the next start in that turn counts it, so two never share
 * the last slot. What a machine holds is given back when its state stops
 * holding (a stop, a failure, a standby), with nothing more to do. */
#include "reconciler-private.h"
#include "core/errors.h"

const char *const mv_health_statuses[MV_HEALTH_STATUS_COUNT + 1] = {
  "starting", "healthy", "unhealthy", NULL,
};

const MvCapacity *
mv_reconciler_capacity (MvReconciler *rec)
{
  return &rec->options.capacity;
}

static MvResources
spec_size (const MvSpec *spec)
{
  return (MvResources) { mv_spec_vcpus (spec), spec->memory_bytes };
}

/* What a start of @machine asks for: the frozen guest's own size when it
 * wakes one (the spec may have been edited since), else its spec's. */
static MvResources
wanted (const MvMachine *machine)
{
  const MvStatus *status = machine->status;

  if (status->saved_state && status->vcpus != 0 && status->memory_bytes != 0)
    return (MvResources) { status->vcpus, status->memory_bytes };
  return spec_size (machine->config->spec);
}

MvResources
mv_machine_held (const MvMachine *machine)
{
  const MvStatus *status = machine->status;

  if (machine->gone || !mv_state_holds_resources (status->state))
    return (MvResources) { 0, 0 };
  /* A VMM adopted from a daemon that did not record its size runs with
   * its spec's: a spec does not change while its machine runs. */
  if (status->vcpus != 0 && status->memory_bytes != 0)
    return (MvResources) { status->vcpus, status->memory_bytes };
  return spec_size (machine->config->spec);
}

MvResources
mv_reconciler_held (MvReconciler *rec)
{
  /* A template being built runs a guest as a machine does (warm.c). */
  MvResources held = rec->warm_held;
  GHashTableIter iter;
  MvMachine *machine;

  g_hash_table_iter_init (&iter, rec->machines);
  while (g_hash_table_iter_next (&iter, NULL, (gpointer *) &machine))
    {
      MvResources one = mv_machine_held (machine);

      mv_resources_add (&held, &one);
    }
  return held;
}

/* Admits @want for @name beside what is held now. */
static gboolean
admit (MvReconciler *rec, const char *name, const MvResources *want, GError **error)
{
  MvResources held;

  if (!mv_capacity_is_limited (&rec->options.capacity))
    return TRUE;
  held = mv_reconciler_held (rec);
  return mv_capacity_admit (&rec->options.capacity, name, want, &held, error);
}

gboolean
mv_reconciler_admit (MvMachine *machine, MvResources *admitted, GError **error)
{
  MvResources want = wanted (machine);

  if (!admit (machine->reconciler, machine->config->spec->name, &want, error))
    return FALSE;
  *admitted = want;
  return TRUE;
}

gboolean
mv_reconciler_admit_warm_build (MvReconciler *rec, const MvSpec *spec, GError **error)
{
  MvResources want = spec_size (spec);

  if (!admit (rec, "(a warm template)", &want, error))
    return FALSE;
  mv_resources_add (&rec->warm_held, &want);
  return TRUE;
}

void
mv_reconciler_release_warm_build (MvReconciler *rec, const MvSpec *spec)
{
  MvResources size = spec_size (spec);

  rec->warm_held.vcpus -= MIN (size.vcpus, rec->warm_held.vcpus);
  rec->warm_held.memory_bytes -= MIN (size.memory_bytes, rec->warm_held.memory_bytes);
}

gboolean
mv_reconciler_check_resources (MvReconciler *rec, const MvResources *wanted_size,
                               gboolean *fits_now, GError **error)
{
  MvResources held;

  if (!mv_capacity_check_ever (&rec->options.capacity, wanted_size, error))
    return FALSE;
  held = mv_reconciler_held (rec);
  *fits_now = mv_capacity_fits (&rec->options.capacity, wanted_size, &held);
  return TRUE;
}

gboolean
mv_reconciler_check_spec_size (MvReconciler *rec, const MvSpec *spec, GError **error)
{
  MvResources size = spec_size (spec);

  return mv_capacity_check_ever (&rec->options.capacity, &size, error);
}

static gint
compare_by_name (gconstpointer a, gconstpointer b)
{
  const MvMachine *ma = *(MvMachine *const *) a;
  const MvMachine *mb = *(MvMachine *const *) b;

  return g_strcmp0 (ma->config->spec->name, mb->config->spec->name);
}

MvUsage *
mv_reconciler_usage (MvReconciler *rec)
{
  MvUsage *usage = g_new0 (MvUsage, 1);
  GHashTableIter iter;
  MvMachine *machine;

  usage->capacity = rec->options.capacity;
  usage->allocatable = mv_capacity_allocatable (&rec->options.capacity);
  usage->holders = g_ptr_array_new ();
  g_hash_table_iter_init (&iter, rec->machines);
  while (g_hash_table_iter_next (&iter, NULL, (gpointer *) &machine))
    {
      MvResources held;

      if (machine->gone)
        continue;
      usage->by_state[machine->status->state]++;
      for (guint i = 0; machine->health && i < MV_HEALTH_STATUS_COUNT; i++)
        if (g_str_equal (machine->health, mv_health_statuses[i]))
          usage->by_health[i]++;
      if (!mv_state_holds_resources (machine->status->state))
        continue;
      held = mv_machine_held (machine);
      mv_resources_add (&usage->held, &held);
      g_ptr_array_add (usage->holders, machine);
    }
  g_ptr_array_sort (usage->holders, compare_by_name);
  return usage;
}

void
mv_usage_free (MvUsage *usage)
{
  if (!usage)
    return;
  g_ptr_array_unref (usage->holders);
  g_free (usage);
}
