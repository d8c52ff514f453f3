#include "storage.h"
#include "storage-private.h"
#include "core/machine.h"
#include "names.h"
#include "util/files.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <stdio.h>

#define STALE_PREFIX  MV_SAVED_STATE_NAME ".stale-"

char *
mv_storage_path (MvStorage *storage, const char *machine_id, const char *name)
{
  MvStorageData *data = storage->data;
  g_autofree char *dir = data->records->machine_dir (data->records, machine_id);

  return g_build_filename (dir, name, NULL);
}

#define path_of mv_storage_path

static char *
saved_state_dir (MvStorage *storage, const char *machine_id)
{
  return path_of (storage, machine_id, MV_SAVED_STATE_NAME);
}

static gboolean
discard_saved_state (MvStorage *storage, const char *machine_id, GError **error)
{
  g_autofree char *saved = path_of (storage, machine_id, MV_SAVED_STATE_NAME);
  g_autofree char *partial = path_of (storage, machine_id, MV_SAVED_PARTIAL_NAME);

  return mv_remove_tree (partial, error) && mv_remove_tree (saved, error);
}

static char *
stage_saved_state (MvStorage *storage, const char *machine_id, GError **error)
{
  g_autofree char *partial = path_of (storage, machine_id, MV_SAVED_PARTIAL_NAME);

  if (!discard_saved_state (storage, machine_id, error))
    return NULL;
  if (g_mkdir_with_parents (partial, 0700) < 0)
    {
      mv_set_errno_error (error, errno, "Could not create %s", partial);
      return NULL;
    }
  return g_steal_pointer (&partial);
}

/* A directory called saved is always whole: it gets that name in one
 * rename, once everything in it is written. */
static gboolean
commit_saved_state (MvStorage *storage, const char *machine_id, GError **error)
{
  g_autofree char *saved = path_of (storage, machine_id, MV_SAVED_STATE_NAME);
  g_autofree char *partial = path_of (storage, machine_id, MV_SAVED_PARTIAL_NAME);

  if (rename (partial, saved) < 0)
    return mv_set_errno_error (error, errno, "Could not rename %s", partial);
  return TRUE;
}

static gboolean
retire_one (MvStorage *storage, const char *machine_id, const char *name, GError **error)
{
  g_autofree char *path = path_of (storage, machine_id, name);
  g_autofree char *id = mv_id_new ();
  g_autofree char *stale = path_of (storage, machine_id, STALE_PREFIX);
  g_autofree char *target = g_strconcat (stale, id, NULL);

  if (rename (path, target) < 0 && errno != ENOENT)
    return mv_set_errno_error (error, errno, "Could not move %s aside", path);
  return TRUE;
}

static gboolean
retire_saved_state (MvStorage *storage, const char *machine_id, GError **error)
{
  return retire_one (storage, machine_id, MV_SAVED_STATE_NAME, error) &&
         retire_one (storage, machine_id, MV_SAVED_PARTIAL_NAME, error);
}

static gboolean
sweep (MvStorage *storage, const char *machine_id, GError **error)
{
  MvStorageData *data = storage->data;
  g_autofree char *dir = data->records->machine_dir (data->records, machine_id);
  g_autoptr (GDir) d = g_dir_open (dir, 0, NULL);
  const char *name;

  /* What a crash left: retired frozen guests, an overlay disk being made. */
  while (d && (name = g_dir_read_name (d)))
    if (g_str_has_prefix (name, STALE_PREFIX) || g_str_equal (name, MV_OVERLAY_PARTIAL_NAME))
      {
        g_autofree char *path = g_build_filename (dir, name, NULL);

        if (!mv_remove_tree (path, error))
          return FALSE;
      }
  return TRUE;
}

static gboolean
has_saved_state (MvStorage *storage, const char *machine_id)
{
  g_autofree char *saved = path_of (storage, machine_id, MV_SAVED_STATE_NAME);

  return g_file_test (saved, G_FILE_TEST_IS_DIR);
}

static gboolean
has_staged_state (MvStorage *storage, const char *machine_id)
{
  g_autofree char *partial = path_of (storage, machine_id, MV_SAVED_PARTIAL_NAME);

  return g_file_test (partial, G_FILE_TEST_IS_DIR);
}

MvStorage *
mv_storage_new (MvRecords *records, MvImageStore *images)
{
  MvStorage *storage = g_new0 (MvStorage, 1);
  MvStorageData *data = g_new0 (MvStorageData, 1);

  data->records = records;
  data->images = images;
  storage->data = data;
  if (images != NULL)
    {
      storage->prepare_disks = mv_storage_prepare_disks;
      storage->prepare_template_disks = mv_storage_prepare_template_disks;
      storage->remove_disks = mv_storage_remove_disks;
    }
  storage->saved_state_dir = saved_state_dir;
  storage->stage_saved_state = stage_saved_state;
  storage->commit_saved_state = commit_saved_state;
  storage->discard_saved_state = discard_saved_state;
  storage->retire_saved_state = retire_saved_state;
  storage->sweep = sweep;
  storage->has_saved_state = has_saved_state;
  storage->has_staged_state = has_staged_state;
  return storage;
}

void
mv_storage_set_volumes (MvStorage *storage, MvVolumes *volumes)
{
  MvStorageData *data = storage->data;

  data->volumes = volumes;
}

void
mv_storage_free (MvStorage *storage)
{
  if (storage == NULL)
    return;
  g_free (storage->data);
  g_free (storage);
}
