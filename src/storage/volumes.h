/* The host's volumes: <state>/volumes/<id>/ holds volume.json and
 * disk.ext4, a sparse ext4 file system of the volume's size. A volume is
 * made in .staging-<id>/ and renamed into place whole; one being deleted
 * is renamed to .deleting-<id>/ first. What a crash leaves of either is
 * swept when the store opens. Every function is safe from any thread. */
#pragma once
#include "core/host/volumes.h"
#include "core/volume.h"
#include "store/store.h"

#include <gio/gio.h>

#define MV_VOLUME_RECORD_NAME  "volume.json"
#define MV_VOLUME_DISK_NAME    "disk.ext4"

typedef struct _MvVolumeStore MvVolumeStore;

/* Opens @dir (made 0700 if missing), sweeps what a crash left, and loads
 * every volume; each invalid one is added to @invalid (may be NULL),
 * logged and left as it is. */
MvVolumeStore *mv_volume_store_open (const char *dir, GPtrArray *invalid /* MvInvalidRecord* */,
                                     GError **error);
void           mv_volume_store_free (MvVolumeStore *store);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (MvVolumeStore, mv_volume_store_free)

/* Blocks (mkfs.ext4): a new volume, whole. MV_ERROR_ALREADY_EXISTS if the
 * name is taken (or being taken), MV_ERROR_RESOURCE_EXHAUSTED past
 * MV_VOLUMES_MAX; on failure nothing of it is left. */
MvVolume      *mv_volume_store_create (MvVolumeStore *store, const char *name,
                                       guint64 size_bytes, GError **error);
/* Blocks: removes the volume with @id; MV_ERROR_NOT_FOUND if none. It
 * is no longer found from the moment this is called. */
gboolean       mv_volume_store_delete (MvVolumeStore *store, const char *id, GError **error);
/* A copy of the volume called (or with the id) @name_or_id, or NULL. */
MvVolume      *mv_volume_store_find (MvVolumeStore *store, const char *name_or_id);
/* Copies of every volume (MvVolume*), by name. */
GPtrArray     *mv_volume_store_list (MvVolumeStore *store);
char          *mv_volume_store_disk_path (MvVolumeStore *store, const char *id);

/* @store as core's Volumes interface; @store outlives it. */
MvVolumes     *mv_host_volumes_new (MvVolumeStore *store);
void           mv_host_volumes_free (MvVolumes *volumes);
