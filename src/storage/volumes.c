/* The host's volume store (volumes.h). The table is guarded by a mutex:
 * the bus creates and deletes volumes in worker threads, and starts look
 * up their disks in theirs. */
#include "volumes.h"
#include "core/errors.h"
#include "core/machine.h"
#include "tool.h"
#include "util/fault.h"
#include "util/files.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define STAGING_PREFIX   ".staging-"
#define DELETING_PREFIX  ".deleting-"

struct _MvVolumeStore {
  char       *dir;
  GMutex      lock;
  GHashTable *by_id;        /* id → MvVolume* */
  GHashTable *pending;      /* names being created */
};


static MvVolume *
find_locked (MvVolumeStore *store, const char *name_or_id)
{
  GHashTableIter iter;
  MvVolume *volume;

  volume = g_hash_table_lookup (store->by_id, name_or_id);
  if (volume != NULL)
    return volume;
  g_hash_table_iter_init (&iter, store->by_id);
  while (g_hash_table_iter_next (&iter, NULL, (gpointer *) &volume))
    if (g_strcmp0 (volume->name, name_or_id) == 0)
      return volume;
  return NULL;
}

static void
add_invalid (GPtrArray *invalid, const char *path, const char *reason)
{
  MvInvalidRecord *record;

  g_warning ("Volume record %s is invalid and left alone: %s", path, reason);
  if (invalid == NULL)
    return;
  record = g_new0 (MvInvalidRecord, 1);
  record->path = g_strdup (path);
  record->reason = g_strdup (reason);
  g_ptr_array_add (invalid, record);
}

static MvVolume *
load_one (MvVolumeStore *store, const char *name, GError **error)
{
  g_autofree char *path = g_build_filename (store->dir, name, MV_VOLUME_RECORD_NAME, NULL);
  g_autofree char *disk = g_build_filename (store->dir, name, MV_VOLUME_DISK_NAME, NULL);
  g_autofree char *data = NULL;
  g_autoptr (MvVolume) volume = NULL;
  gsize len = 0;
  GStatBuf st;

  if (!mv_file_read_bounded (path, MV_VOLUME_SPEC_MAX_BYTES, MV_VOLUME_RECORD_NAME, &data, &len,
                             error))
    return NULL;
  volume = mv_volume_from_json (data, len, error);
  if (volume == NULL)
    return NULL;
  if (g_strcmp0 (volume->id, name) != 0)
    return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT, "id: %s, but the directory is %s",
                         volume->id, name), NULL;
  if (g_lstat (disk, &st) < 0 || !S_ISREG (st.st_mode))
    return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT, "%s: missing or not a file",
                         MV_VOLUME_DISK_NAME), NULL;
  if (find_locked (store, volume->name) != NULL)
    return mv_error_set (error, MV_ERROR_ALREADY_EXISTS, "name: %s is another volume's",
                         volume->name), NULL;
  return g_steal_pointer (&volume);
}

MvVolumeStore *
mv_volume_store_open (const char *dir, GPtrArray *invalid, GError **error)
{
  g_autoptr (MvVolumeStore) store = g_new0 (MvVolumeStore, 1);
  g_autoptr (GDir) d = NULL;
  const char *name;

  store->dir = g_strdup (dir);
  g_mutex_init (&store->lock);
  store->by_id = g_hash_table_new_full (g_str_hash, g_str_equal, NULL,
                                        (GDestroyNotify) mv_volume_free);
  store->pending = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  if (g_mkdir_with_parents (dir, 0700) < 0)
    return mv_set_errno_error (error, errno, "Cannot create %s", dir), NULL;
  d = g_dir_open (dir, 0, error);
  if (d == NULL)
    return NULL;
  while ((name = g_dir_read_name (d)))
    {
      g_autofree char *path = g_build_filename (dir, name, NULL);
      g_autoptr (GError) local = NULL;
      MvVolume *volume;

      if (g_str_has_prefix (name, STAGING_PREFIX) || g_str_has_prefix (name, DELETING_PREFIX))
        {
          /* A create or a delete that a crash interrupted. */
          if (!mv_remove_tree (path, error))
            return NULL;
          g_message ("Swept %s, left by an interrupted volume create or delete", path);
          continue;
        }
      if (!mv_id_validate (name, NULL))
        {
          add_invalid (invalid, path, "not a volume's directory (its name is not an ID)");
          continue;
        }
      volume = load_one (store, name, &local);
      if (volume == NULL)
        {
          add_invalid (invalid, path, local->message);
          continue;
        }
      g_hash_table_insert (store->by_id, volume->id, volume);
    }
  return g_steal_pointer (&store);
}

void
mv_volume_store_free (MvVolumeStore *store)
{
  if (store == NULL)
    return;
  g_clear_pointer (&store->by_id, g_hash_table_unref);
  g_clear_pointer (&store->pending, g_hash_table_unref);
  g_mutex_clear (&store->lock);
  g_free (store->dir);
  g_free (store);
}

static gboolean
format_disk (const char *path, guint64 bytes, GError **error)
{
  const char *argv[] = { "mkfs.ext4", "-q", "-F", "-E", "root_owner=0:0", "-L", "microvmd-vol",
                         path, NULL };
  int fd = open (path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);

  if (fd < 0)
    return mv_set_errno_error (error, errno, "size_bytes: cannot create %s", path);
  /* Sparse: what the guests write is what the volume takes of the host. */
  if (ftruncate (fd, (off_t) bytes) < 0)
    {
      int errsv = errno;

      close (fd);
      return mv_set_errno_error (error, errsv, "size_bytes: cannot size %s", path);
    }
  close (fd);
  return mv_run_tool ("mkfs.ext4", argv, NULL, NULL, NULL, error);
}

/* Everything of the volume in its staging directory, then renamed. */
static gboolean
make_volume (MvVolumeStore *store, const MvVolume *volume, GError **error)
{
  g_autofree char *staged_name = g_strconcat (STAGING_PREFIX, volume->id, NULL);
  g_autofree char *staged = g_build_filename (store->dir, staged_name, NULL);
  g_autofree char *final = g_build_filename (store->dir, volume->id, NULL);
  g_autofree char *disk = g_build_filename (staged, MV_VOLUME_DISK_NAME, NULL);
  g_autofree char *record = g_build_filename (staged, MV_VOLUME_RECORD_NAME, NULL);
  g_autofree char *json = mv_volume_to_json (volume);

  if (g_mkdir (staged, 0700) < 0)
    return mv_set_errno_error (error, errno, "Cannot create %s", staged);
  if (format_disk (disk, volume->size_bytes, error) &&
      mv_write_file_atomic (record, json, strlen (json), error) &&
      (mv_fault_point ("volume", "staged"), TRUE))
    {
      if (mv_rename_durably (staged, final, error))
        return TRUE;
    }
  mv_remove_tree (staged, NULL);
  return FALSE;
}

MvVolume *
mv_volume_store_create (MvVolumeStore *store, const char *name, guint64 size_bytes,
                        GError **error)
{
  g_autoptr (MvVolume) volume = g_new0 (MvVolume, 1);
  gboolean ok;

  volume->id = mv_id_new ();
  volume->name = g_strdup (name);
  volume->size_bytes = size_bytes;
  volume->created_at = g_get_real_time ();
  if (!mv_volume_validate (volume, error))
    return NULL;

  g_mutex_lock (&store->lock);
  if (find_locked (store, name) != NULL || g_hash_table_contains (store->pending, name))
    ok = mv_error_set (error, MV_ERROR_ALREADY_EXISTS, "name: a volume called %s exists", name);
  else if (g_hash_table_size (store->by_id) + g_hash_table_size (store->pending) >= MV_VOLUMES_MAX)
    ok = mv_error_set (error, MV_ERROR_RESOURCE_EXHAUSTED,
                       "This host has the most volumes it keeps, %d", MV_VOLUMES_MAX);
  else
    ok = (g_hash_table_add (store->pending, g_strdup (name)), TRUE);
  g_mutex_unlock (&store->lock);
  if (!ok)
    return NULL;

  ok = make_volume (store, volume, error);

  g_mutex_lock (&store->lock);
  g_hash_table_remove (store->pending, name);
  if (ok)
    {
      MvVolume *kept = mv_volume_copy (volume);

      g_hash_table_insert (store->by_id, kept->id, kept);
    }
  g_mutex_unlock (&store->lock);
  return ok ? g_steal_pointer (&volume) : NULL;
}

gboolean
mv_volume_store_delete (MvVolumeStore *store, const char *id, GError **error)
{
  g_autofree char *path = g_build_filename (store->dir, id, NULL);
  g_autofree char *aside_name = g_strconcat (DELETING_PREFIX, id, NULL);
  g_autofree char *aside = g_build_filename (store->dir, aside_name, NULL);
  gboolean ok;

  g_mutex_lock (&store->lock);
  ok = g_hash_table_contains (store->by_id, id);
  if (!ok)
    mv_error_set (error, MV_ERROR_NOT_FOUND, "No volume with ID %s", id);
  else if (rename (path, aside) < 0)
    ok = mv_set_errno_error (error, errno, "Cannot move %s aside", path);
  else
    g_hash_table_remove (store->by_id, id);
  g_mutex_unlock (&store->lock);
  return ok && mv_fsync_dir (store->dir, error) && mv_remove_tree (aside, error);
}

MvVolume *
mv_volume_store_find (MvVolumeStore *store, const char *name_or_id)
{
  MvVolume *volume;

  g_mutex_lock (&store->lock);
  volume = find_locked (store, name_or_id);
  volume = volume ? mv_volume_copy (volume) : NULL;
  g_mutex_unlock (&store->lock);
  return volume;
}

static gint
by_name (gconstpointer a, gconstpointer b)
{
  const MvVolume *va = *(const MvVolume *const *) a, *vb = *(const MvVolume *const *) b;

  return g_strcmp0 (va->name, vb->name);
}

GPtrArray *
mv_volume_store_list (MvVolumeStore *store)
{
  GPtrArray *list = g_ptr_array_new_with_free_func ((GDestroyNotify) mv_volume_free);
  GHashTableIter iter;
  MvVolume *volume;

  g_mutex_lock (&store->lock);
  g_hash_table_iter_init (&iter, store->by_id);
  while (g_hash_table_iter_next (&iter, NULL, (gpointer *) &volume))
    g_ptr_array_add (list, mv_volume_copy (volume));
  g_mutex_unlock (&store->lock);
  g_ptr_array_sort (list, by_name);
  return list;
}

char *
mv_volume_store_disk_path (MvVolumeStore *store, const char *id)
{
  return g_build_filename (store->dir, id, MV_VOLUME_DISK_NAME, NULL);
}

/* ---- core's Volumes interface ---- */

static char *
volumes_disk_path (MvVolumes *volumes, const char *name, GError **error)
{
  MvVolumeStore *store = volumes->data;
  g_autoptr (MvVolume) volume = mv_volume_store_find (store, name);

  if (volume == NULL)
    return mv_error_set (error, MV_ERROR_NOT_FOUND, "No volume called %s", name), NULL;
  return mv_volume_store_disk_path (store, volume->id);
}

MvVolumes *
mv_host_volumes_new (MvVolumeStore *store)
{
  MvVolumes *volumes = g_new0 (MvVolumes, 1);

  volumes->data = store;
  volumes->disk_path = volumes_disk_path;
  return volumes;
}

void
mv_host_volumes_free (MvVolumes *volumes)
{
  g_free (volumes);
}
