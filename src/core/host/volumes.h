/* Volumes, as the reconciler and the storage layer find them (the host's
 * volume store, src/storage/volumes.c, fills this in; tests use a fake).
 * Every function is cheap and safe from any thread. */
#pragma once
#include "core/volume.h"

#include <gio/gio.h>

typedef struct _MvVolumes MvVolumes;

struct _MvVolumes {
  gpointer data;

  /* The host path of the disk of the volume called @name, or NULL with
   * MV_ERROR_NOT_FOUND. */
  char *(*disk_path) (MvVolumes *volumes, const char *name, GError **error);
};

/* Refuses a spec that mounts a volume @volumes does not have, with
 * MV_ERROR_NOT_FOUND naming mounts[N].source. @volumes may be NULL: a
 * host without volumes, where every volume mount is refused. */
gboolean mv_volumes_check_spec (MvVolumes *volumes, const MvSpec *spec, GError **error);
