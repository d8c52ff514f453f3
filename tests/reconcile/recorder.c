#include "recorder.h"
#include "core/errors.h"

static void
settled_free (Settled *settled)
{
  g_free (settled->machine_id);
  g_clear_error (&settled->failure);
  g_free (settled);
}

static void
waiter_free (Waiter *waiter)
{
  g_free (waiter->machine_id);
  g_clear_error (&waiter->error);
  g_free (waiter);
}

static void
breach (Recorder *recorder, const char *what, const MvMachine *machine)
{
  g_ptr_array_add (recorder->breaches, g_strdup_printf ("%s %s", what, machine->id));
}

static void
finish (Waiter *waiter, GError *error)
{
  waiter->done = TRUE;
  waiter->error = error;
}

/* As settle_waiters() in the bus. */
static void
answer_waiters (Recorder *recorder, MvMachine *machine, const GError *failure,
                guint64 failed_generation)
{
  for (guint i = 0; i < recorder->waiters->len; i++)
    {
      Waiter *w = recorder->waiters->pdata[i];
      MvWishOutcome outcome;

      if (w->done || !g_str_equal (w->machine_id, machine->id))
        continue;
      outcome = mv_machine_wish_outcome (machine, w->target, w->generation);
      if (machine->gone)
        finish (w, w->target == MV_DESIRED_DESTROYED
                     ? NULL
                     : g_error_new (MV_ERROR, MV_ERROR_NOT_FOUND, "Machine %s was deleted",
                                    machine->id));
      else if (outcome == MV_WISH_SUPERSEDED)
        finish (w, g_error_new (MV_ERROR, MV_ERROR_INVALID_STATE, "Superseded"));
      else if (failure && w->generation <= failed_generation)
        finish (w, g_error_copy (failure));
      else if (outcome == MV_WISH_REACHED)
        finish (w, NULL);
    }
}

static void
on_changed (MvMachine *machine, guint props, gpointer data)
{
  Recorder *recorder = data;
  guint bits = GPOINTER_TO_UINT (g_hash_table_lookup (recorder->props, machine->id));

  if (machine->gone)
    breach (recorder, "changed() after removed():", machine);
  g_hash_table_replace (recorder->props, g_strdup (machine->id), GUINT_TO_POINTER (bits | props));
}

static void
on_added (MvMachine *machine, gpointer data)
{
  Recorder *recorder = data;

  g_ptr_array_add (recorder->added, g_strdup (machine->id));
}

static void
on_settled (MvMachine *machine, const GError *failure, guint64 generation, gpointer data)
{
  Recorder *recorder = data;
  Settled *settled = g_new0 (Settled, 1);

  if (machine->gone)
    breach (recorder, "settled() after removed():", machine);
  settled->machine_id = g_strdup (machine->id);
  settled->failure = failure ? g_error_copy (failure) : NULL;
  g_ptr_array_add (recorder->settled, settled);
  answer_waiters (recorder, machine, failure, generation);
}

static void
on_removed (MvMachine *machine, gpointer data)
{
  Recorder *recorder = data;

  if (!machine->gone)
    breach (recorder, "removed() of a machine not gone:", machine);
  if (recorder_was_removed (recorder, machine->id))
    breach (recorder, "removed() twice:", machine);
  g_ptr_array_add (recorder->removed, g_strdup (machine->id));
  answer_waiters (recorder, machine, NULL, 0);
}

Recorder *
recorder_new (void)
{
  Recorder *recorder = g_new0 (Recorder, 1);

  recorder->settled = g_ptr_array_new_with_free_func ((GDestroyNotify) settled_free);
  recorder->added = g_ptr_array_new_with_free_func (g_free);
  recorder->removed = g_ptr_array_new_with_free_func (g_free);
  recorder->props = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  recorder->waiters = g_ptr_array_new_with_free_func ((GDestroyNotify) waiter_free);
  recorder->breaches = g_ptr_array_new_with_free_func (g_free);
  recorder->observer = (MvObserver) {
    .changed = on_changed,
    .added = on_added,
    .settled = on_settled,
    .removed = on_removed,
    .data = recorder,
  };
  return recorder;
}

void
recorder_free (Recorder *recorder)
{
  if (!recorder)
    return;
  g_ptr_array_unref (recorder->settled);
  g_ptr_array_unref (recorder->added);
  g_ptr_array_unref (recorder->removed);
  g_hash_table_unref (recorder->props);
  g_ptr_array_unref (recorder->waiters);
  g_ptr_array_unref (recorder->breaches);
  g_free (recorder);
}

guint
recorder_props (Recorder *recorder, const char *machine_id)
{
  return GPOINTER_TO_UINT (g_hash_table_lookup (recorder->props, machine_id));
}

void
recorder_clear_props (Recorder *recorder, const char *machine_id)
{
  g_hash_table_remove (recorder->props, machine_id);
}

guint
recorder_n_settled (Recorder *recorder, const char *machine_id)
{
  guint n = 0;

  for (guint i = 0; i < recorder->settled->len; i++)
    if (g_str_equal (((Settled *) recorder->settled->pdata[i])->machine_id, machine_id))
      n++;
  return n;
}

Settled *
recorder_last_settled (Recorder *recorder, const char *machine_id)
{
  for (guint i = recorder->settled->len; i > 0; i--)
    {
      Settled *settled = recorder->settled->pdata[i - 1];

      if (g_str_equal (settled->machine_id, machine_id))
        return settled;
    }
  return NULL;
}

gboolean
recorder_was_removed (Recorder *recorder, const char *machine_id)
{
  return g_ptr_array_find_with_equal_func (recorder->removed, machine_id, g_str_equal, NULL);
}

Waiter *
recorder_wait (Recorder *recorder, MvMachine *machine)
{
  Waiter *waiter = g_new0 (Waiter, 1);

  waiter->machine_id = g_strdup (machine->id);
  waiter->target = machine->config->desired;
  waiter->generation = machine->config->desired_generation;
  g_ptr_array_add (recorder->waiters, waiter);
  return waiter;
}
