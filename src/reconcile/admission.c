/* Admission (seed 002): a machine starts only if the CPU and memory it
 * asks for fit beside what the machines that hold resources (starting,
 * running, paused) hold. It is judged on the main thread just before a
 * start step is recorded, and the step makes the machine Starting in the
 * same turn: the next start in that turn counts it, so two never share
 * the last slot. What a machine holds is given back when its state stops
 * holding (a stop, a failure, a standby), with nothing more to do. A warm
 * template being built holds its size too; one the daemon builds on its
 * own, behind a start, gives way to a start that needs its room. */
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
  /* A template being built runs a guest as a machine does (warm.c); a
   * machine whose create starts it holds its size before it joins. */
  MvResources held = rec->warm_held;
  GHashTableIter iter;
  MvMachine *machine;

  mv_resources_add (&held, &rec->creates_held);
  g_hash_table_iter_init (&iter, rec->machines);
  while (g_hash_table_iter_next (&iter, NULL, (gpointer *) &machine))
    {
      MvResources one = mv_machine_held (machine);

      mv_resources_add (&held, &one);
    }
  return held;
}

/* MV_ERROR_RESOURCE_EXHAUSTED for @want beside @held, which counts the
 * templates being built: the message tells the machines' share from
 * theirs. FALSE. */
static gboolean
refuse (MvReconciler *rec, const char *name, const MvResources *want, const MvResources *held,
        GError **error)
{
  MvResources by_machines = *held;

  mv_resources_take (&by_machines, &rec->warm_held);
  return mv_capacity_refuse (&rec->options.capacity, name, want, &by_machines, &rec->warm_held,
                             error);
}

gboolean
mv_reconciler_fits_beside (MvReconciler *rec, const char *name, const MvResources *want,
                           const MvResources *held, GError **error)
{
  return mv_capacity_fits (&rec->options.capacity, want, held) ||
         refuse (rec, name, want, held, error);
}

/* Admits @want for @name beside what is held now. Templates built behind
 * a start use room nobody asked for: a start that fits without them
 * (@may_wait) tells them to give way, and waits until they have. */
static MvAdmit
admit (MvReconciler *rec, const char *name, const MvResources *want, gboolean may_wait,
       GError **error)
{
  const MvCapacity *capacity = &rec->options.capacity;
  MvResources held, without_behind;

  if (!mv_capacity_is_limited (capacity))
    return MV_ADMIT_YES;
  held = mv_reconciler_held (rec);
  if (mv_capacity_fits (capacity, want, &held))
    return MV_ADMIT_YES;
  without_behind = held;
  mv_resources_take (&without_behind, &rec->warm_behind_held);
  if (may_wait && rec->warm_behind_held.vcpus != 0 &&
      mv_capacity_fits (capacity, want, &without_behind))
    {
      mv_reconciler_warm_give_way (rec);
      return MV_ADMIT_WAIT;
    }
  refuse (rec, name, want, &held, error);
  return MV_ADMIT_NO;
}

MvAdmit
mv_reconciler_admit (MvMachine *machine, MvResources *admitted, GError **error)
{
  MvResources want = wanted (machine);
  MvAdmit admitted_now = admit (machine->reconciler, machine->config->spec->name, &want, TRUE,
                                error);

  if (admitted_now == MV_ADMIT_YES)
    *admitted = want;
  return admitted_now;
}

gboolean
mv_reconciler_admit_first_start (MvReconciler *rec, const MvSpec *spec, MvResources *admitted)
{
  MvResources want = spec_size (spec);

  /* Nothing to wait for: a start that would wait is planned once its
   * machine has joined (mv_reconciler_admit), which says why. */
  if (admit (rec, spec->name, &want, FALSE, NULL) != MV_ADMIT_YES)
    return FALSE;
  mv_resources_add (&rec->creates_held, &want);
  *admitted = want;
  return TRUE;
}

void
mv_reconciler_release_first_start (MvReconciler *rec, const MvResources *admitted)
{
  mv_resources_take (&rec->creates_held, admitted);
}

gboolean
mv_reconciler_admit_warm_build (MvReconciler *rec, const MvSpec *spec, gboolean behind,
                                GError **error)
{
  MvResources want = spec_size (spec);

  if (admit (rec, "(a warm template)", &want, FALSE, error) != MV_ADMIT_YES)
    return FALSE;
  mv_resources_add (&rec->warm_held, &want);
  if (behind)
    mv_resources_add (&rec->warm_behind_held, &want);
  return TRUE;
}

void
mv_reconciler_release_warm_build (MvReconciler *rec, const MvSpec *spec, gboolean behind)
{
  MvResources size = spec_size (spec);

  mv_resources_take (&rec->warm_held, &size);
  if (behind)
    mv_resources_take (&rec->warm_behind_held, &size);
}

gboolean
mv_reconciler_check_resources (MvReconciler *rec, const MvResources *wanted_size,
                               gboolean *fits_now, GError **error)
{
  MvResources held;

  if (!mv_capacity_check_ever (&rec->options.capacity, wanted_size, error))
    return FALSE;
  held = mv_reconciler_held (rec);
  /* Templates built behind a start would give way to this one (admit). */
  mv_resources_take (&held, &rec->warm_behind_held);
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
