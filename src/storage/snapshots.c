/* The host's snapshots (core/host/snapshots.h), under the state
 * directory's snapshots/:
 *   <id>/snapshot.json   the record, written last
 *   <id>/state/          the frozen guest, as Runtime.snapshot() wrote it; a
 *                        machine's frozen guest put back from it shares its
 *                        files (hard links: neither is written again)
 *   <id>/disk.ext4       the machine's overlay disk, if it had one
 * A snapshot is written as .staged-<random>/ and renamed to its ID once
 * durable; one being removed is renamed to .removed-<id> first. Both are
 * swept at startup. */
#include "snapshots.h"
#include "storage-private.h"
#include "core/errors.h"
#include "names.h"
#include "util/fault.h"
#include "util/files.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <sys/statvfs.h>

#define RECORD_NAME     "snapshot.json"
#define STATE_NAME      "state"
#define DISK_NAME       "disk.ext4"
#define REMOVED_PREFIX  ".removed-"

typedef struct {
  char      *dir;
  MvStorage *storage;
} Store;

static Store *
store_of (MvSnapshots *snapshots)
{
  return snapshots->data;
}

/* A full disk is the caller's to report as such; other failures are
 * failures. */
static gboolean
host_failed (GError **error, GError *local, const char *what)
{
  if (g_error_matches (local, G_IO_ERROR, G_IO_ERROR_NO_SPACE))
    g_set_error (error, MV_ERROR, MV_ERROR_RESOURCE_EXHAUSTED, "%s: the disk is full (%s)", what,
                 local->message);
  else
    g_set_error (error, MV_ERROR, MV_ERROR_FAILED, "%s: %s", what, local->message);
  g_error_free (local);
  return FALSE;
}

static char *
stage (MvSnapshots *snapshots, GError **error)
{
  Store *self = store_of (snapshots);
  g_autofree char *id = mv_id_new ();
  g_autofree char *name = g_strconcat (MV_SNAPSHOT_STAGED_PREFIX, id, NULL);
  g_autofree char *dir = g_build_filename (self->dir, name, NULL);
  g_autofree char *state = g_build_filename (dir, STATE_NAME, NULL);
  GError *local = NULL;

  if (g_mkdir_with_parents (self->dir, 0700) < 0 || g_mkdir (dir, 0700) < 0 ||
      g_mkdir (state, 0700) < 0)
    {
      mv_set_errno_error (&local, errno, "Cannot create %s", state);
      mv_remove_tree (dir, NULL);
      host_failed (error, local, "snapshot");
      return NULL;
    }
  return g_steal_pointer (&dir);
}

static char *
state_dir (MvSnapshots *snapshots, const char *dir)
{
  return g_build_filename (dir, STATE_NAME, NULL);
}

static char *
disk_path (MvSnapshots *snapshots, const char *dir)
{
  return g_build_filename (dir, DISK_NAME, NULL);
}

static char *
snapshot_dir (MvSnapshots *snapshots, const char *id)
{
  return g_build_filename (store_of (snapshots)->dir, id, NULL);
}

static gboolean
take_disk (MvSnapshots *snapshots, const char *dir, const char *machine_id, gboolean *had,
           GError **error)
{
  g_autofree char *overlay = mv_storage_path (store_of (snapshots)->storage, machine_id,
                                              MV_OVERLAY_NAME);
  g_autofree char *disk = g_build_filename (dir, DISK_NAME, NULL);
  GError *local = NULL;

  *had = g_file_test (overlay, G_FILE_TEST_IS_REGULAR);
  if (!*had)
    return TRUE;
  if (!mv_copy_file (overlay, disk, &local))
    return host_failed (error, local, "disk");
  mv_fault_point ("snapshot", "disk-copied");
  return TRUE;
}

static gboolean
take_saved_state (MvSnapshots *snapshots, const char *dir, const char *machine_id,
                  GError **error)
{
  MvStorage *storage = store_of (snapshots)->storage;
  g_autofree char *saved = storage->saved_state_dir (storage, machine_id);
  g_autofree char *state = state_dir (snapshots, dir);
  GError *local = NULL;

  /* A frozen guest is never written again: the snapshot shares its files. */
  if (!mv_link_dir_files (saved, state, &local))
    return host_failed (error, local, "frozen guest");
  return TRUE;
}

static gboolean
commit (MvSnapshots *snapshots, const char *dir, MvSnapshot *snapshot, GError **error)
{
  g_autofree char *record = g_build_filename (dir, RECORD_NAME, NULL);
  g_autofree char *target = snapshot_dir (snapshots, snapshot->id);
  g_autofree char *state = state_dir (snapshots, dir);
  g_autofree char *text = NULL;
  GError *local = NULL;

  snapshot->size_bytes = mv_disk_usage (dir);
  text = mv_snapshot_to_json (snapshot);
  if (!g_file_set_contents_full (record, text, -1, G_FILE_SET_CONTENTS_CONSISTENT, 0600, &local))
    return host_failed (error, local, RECORD_NAME);
  if (!mv_fsync_dir (state, &local) || !mv_fsync_dir (dir, &local))
    return host_failed (error, local, "snapshot");
  mv_fault_point ("snapshot", "staged");
  if (!mv_rename_durably (dir, target, &local))
    return host_failed (error, local, "snapshot");
  return TRUE;
}

/* Less than this is no room for a guest's state. */
#define FULL_BYTES  (1024 * 1024)

static gboolean
full (MvSnapshots *snapshots, const char *dir)
{
  struct statvfs st;

  return statvfs (dir, &st) == 0 && (guint64) st.f_bavail * st.f_frsize < FULL_BYTES;
}

static void
discard (MvSnapshots *snapshots, const char *dir)
{
  g_autoptr (GError) error = NULL;

  if (!mv_remove_tree (dir, &error))
    g_warning ("%s (it goes at the next start)", error->message);
}

/* @from becomes @to: renamed, or copied and then renamed into place. */
static gboolean
place (const char *from, const char *to, const char *partial, gboolean move, GError **error)
{
  GError *local = NULL;

  if (move)
    {
      if (!mv_rename_durably (from, to, &local))
        return host_failed (error, local, "disk");
      return TRUE;
    }
  if (g_unlink (partial) < 0 && errno != ENOENT)
    {
      mv_set_errno_error (&local, errno, "Cannot remove %s", partial);
      return host_failed (error, local, "disk");
    }
  if (!mv_copy_file (from, partial, &local) || !mv_rename_durably (partial, to, &local))
    {
      g_unlink (partial);
      return host_failed (error, local, "disk");
    }
  return TRUE;
}

static gboolean
put_back (MvSnapshots *snapshots, const char *dir, const char *machine_id, gboolean state,
          gboolean move, GError **error)
{
  MvStorage *storage = store_of (snapshots)->storage;
  g_autofree char *disk = g_build_filename (dir, DISK_NAME, NULL);
  g_autofree char *overlay = mv_storage_path (storage, machine_id, MV_OVERLAY_NAME);
  g_autofree char *partial = mv_storage_path (storage, machine_id, MV_OVERLAY_PARTIAL_NAME);
  g_autofree char *from = state_dir (snapshots, dir);
  g_autofree char *staged = NULL;
  GError *local = NULL;

  if (g_file_test (disk, G_FILE_TEST_IS_REGULAR) && !place (disk, overlay, partial, move, error))
    return FALSE;
  mv_fault_point ("put-back", "disk");
  if (!state)
    return TRUE;
  staged = storage->stage_saved_state (storage, machine_id, error);
  if (staged == NULL)
    return FALSE;
  if (move)
    {
      /* The staged frozen guest is the directory itself. */
      if (!mv_remove_tree (staged, &local) || !mv_rename_durably (from, staged, &local))
        return host_failed (error, local, "frozen guest");
    }
  else if (!mv_link_dir_files (from, staged, &local) || !mv_fsync_dir (staged, &local))
    {
      storage->discard_saved_state (storage, machine_id, NULL);
      return host_failed (error, local, "frozen guest");
    }
  mv_fault_point ("put-back", "state");
  return storage->commit_saved_state (storage, machine_id, error);
}

static gboolean
remove_snapshot (MvSnapshots *snapshots, const char *id, GError **error)
{
  Store *self = store_of (snapshots);
  g_autofree char *dir = snapshot_dir (snapshots, id);
  g_autofree char *name = g_strconcat (REMOVED_PREFIX, id, NULL);
  g_autofree char *aside = g_build_filename (self->dir, name, NULL);
  GError *local = NULL;

  /* Gone from its name first, so that it is never found half removed. */
  if (!mv_rename_durably (dir, aside, &local))
    {
      if (g_error_matches (local, G_IO_ERROR, G_IO_ERROR_NOT_FOUND))
        {
          g_error_free (local);
          return mv_error_set (error, MV_ERROR_NOT_FOUND, "snapshot %s: no such snapshot", id);
        }
      return host_failed (error, local, "snapshot");
    }
  mv_fault_point ("snapshot-delete", "moved");
  if (!mv_remove_tree (aside, &local))
    g_warning ("%s (it goes at the next start)", local->message), g_error_free (local);
  return TRUE;
}

static GPtrArray *
load (MvSnapshots *snapshots, GHashTable *invalid, GError **error)
{
  Store *self = store_of (snapshots);
  g_autoptr (GPtrArray) found = g_ptr_array_new_with_free_func ((GDestroyNotify) mv_snapshot_free);
  g_autoptr (GDir) dir = g_dir_open (self->dir, 0, NULL);
  const char *name;

  while (dir && (name = g_dir_read_name (dir)))
    {
      g_autofree char *record = NULL;
      g_autofree char *contents = NULL;
      g_autoptr (GError) local = NULL;
      g_autoptr (MvSnapshot) snapshot = NULL;
      gsize length = 0;

      if (name[0] == '.')
        continue;
      record = g_build_filename (self->dir, name, RECORD_NAME, NULL);
      if (found->len >= MV_SNAPSHOTS_MAX)
        mv_error_set (&local, MV_ERROR_RESOURCE_EXHAUSTED,
                      "more than %d snapshots: this one is not loaded", MV_SNAPSHOTS_MAX);
      else if (mv_file_read_bounded (record, MV_SNAPSHOT_RECORD_MAX_BYTES, RECORD_NAME, &contents,
                                     &length, &local))
        {
          snapshot = mv_snapshot_from_json (contents, length, &local);
          if (snapshot && g_strcmp0 (snapshot->id, name) != 0)
            {
              g_clear_pointer (&snapshot, mv_snapshot_free);
              mv_error_set (&local, MV_ERROR_INVALID_ARGUMENT,
                            "id: the record says another ID than its directory's");
            }
        }
      if (snapshot == NULL)
        {
          g_warning ("Snapshot %s is invalid and left as it is: %s", name, local->message);
          if (invalid)
            g_hash_table_insert (invalid, g_strdup (name), g_strdup (local->message));
          continue;
        }
      g_ptr_array_add (found, g_steal_pointer (&snapshot));
    }
  return g_steal_pointer (&found);
}

static gboolean
sweep (MvSnapshots *snapshots, GError **error)
{
  Store *self = store_of (snapshots);
  g_autoptr (GDir) dir = g_dir_open (self->dir, 0, NULL);
  const char *name;

  while (dir && (name = g_dir_read_name (dir)))
    if (g_str_has_prefix (name, MV_SNAPSHOT_STAGED_PREFIX) ||
        g_str_has_prefix (name, REMOVED_PREFIX))
      {
        g_autofree char *path = g_build_filename (self->dir, name, NULL);

        if (!mv_remove_tree (path, error))
          return FALSE;
      }
  return TRUE;
}

MvSnapshots *
mv_snapshot_store_new (const char *dir, MvStorage *storage)
{
  MvSnapshots *snapshots = g_new0 (MvSnapshots, 1);
  Store *self = g_new0 (Store, 1);

  self->dir = g_strdup (dir);
  self->storage = storage;
  snapshots->data = self;
  snapshots->stage = stage;
  snapshots->state_dir = state_dir;
  snapshots->dir = snapshot_dir;
  snapshots->disk_path = disk_path;
  snapshots->take_disk = take_disk;
  snapshots->take_saved_state = take_saved_state;
  snapshots->commit = commit;
  snapshots->full = full;
  snapshots->discard = discard;
  snapshots->put_back = put_back;
  snapshots->remove = remove_snapshot;
  snapshots->load = load;
  snapshots->sweep = sweep;
  return snapshots;
}

void
mv_snapshot_store_free (MvSnapshots *snapshots)
{
  Store *self;

  if (snapshots == NULL)
    return;
  self = snapshots->data;
  g_free (self->dir);
  g_free (self);
  g_free (snapshots);
}
