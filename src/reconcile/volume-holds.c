/* Who may have a volume: any number of machines read-only, or one
 * writable, while they hold reservations (mv_state_holds_reservations).
 * Checked on the main thread before a start is recorded, across every
 * machine, so that two starts never both pass. */
#include "reconciler-private.h"
#include "core/errors.h"

static const MvMount *
volume_mount (const MvSpec *spec, const char *name)
{
  for (guint i = 0; i < spec->mounts->len; i++)
    {
      const MvMount *mount = g_ptr_array_index (spec->mounts, i);

      if (mount->type == MV_MOUNT_VOLUME && g_strcmp0 (mount->source, name) == 0)
        return mount;
    }
  return NULL;
}

gboolean
mv_reconciler_check_volume_holds (MvMachine *machine, GError **error)
{
  const MvSpec *spec = machine->config->spec;
  g_autoptr (GPtrArray) all = NULL;

  for (guint i = 0; i < spec->mounts->len; i++)
    {
      const MvMount *mount = g_ptr_array_index (spec->mounts, i);

      if (mount->type != MV_MOUNT_VOLUME)
        continue;
      if (all == NULL)
        all = mv_reconciler_all (machine->reconciler);
      for (guint j = 0; j < all->len; j++)
        {
          MvMachine *other = all->pdata[j];
          const MvMount *theirs;

          if (other == machine || other->gone ||
              !mv_state_holds_reservations (other->status->state))
            continue;
          theirs = volume_mount (other->config->spec, mount->source);
          if (theirs == NULL || (mount->read_only && theirs->read_only))
            continue;
          return mv_error_set (error, MV_ERROR_CONFLICT,
                               "mounts[%u].source: volume %s is mounted %s by machine %s (%s), "
                               "which is %s; %s", i, mount->source,
                               theirs->read_only ? "read-only" : "writable",
                               other->config->spec->name, other->id,
                               mv_state_to_string (other->status->state),
                               theirs->read_only
                               ? "a writable mount needs it to itself"
                               : "it holds the volume to itself until it stops");
        }
    }
  return TRUE;
}
