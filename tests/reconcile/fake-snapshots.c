#include "fake-snapshots.h"
#include "core/errors.h"

struct _FakeSnapshots {
  MvSnapshots  iface;
  FakeLog     *log;
  GMutex       lock;
  GHashTable  *snapshots;    /* snapshot id -> machine id */
  guint        next_id;
};

static FakeSnapshots *
fake_of (MvSnapshots *snapshots)
{
  return snapshots->data;
}

static char *
fake_stage (MvSnapshots *snapshots, GError **error)
{
  FakeSnapshots *fake = fake_of (snapshots);
  char *dir;

  g_mutex_lock (&fake->lock);
  dir = g_strdup_printf ("/var/lib/fake/snapshots/.staged-%u", ++fake->next_id);
  g_mutex_unlock (&fake->lock);
  fake_log_add (fake->log, "snapshots.stage %s", dir);
  return dir;
}

static char *
fake_state_dir (MvSnapshots *snapshots, const char *dir)
{
  return g_build_filename (dir, "state", NULL);
}

static char *
fake_dir (MvSnapshots *snapshots, const char *id)
{
  return g_build_filename ("/var/lib/fake/snapshots", id, NULL);
}

static gboolean
fake_take_disk (MvSnapshots *snapshots, const char *dir, const char *machine_id, gboolean *had,
                GError **error)
{
  fake_log_add (fake_of (snapshots)->log, "snapshots.take_disk %s", machine_id);
  *had = TRUE;
  return TRUE;
}

static gboolean
fake_take_saved_state (MvSnapshots *snapshots, const char *dir, const char *machine_id,
                       GError **error)
{
  fake_log_add (fake_of (snapshots)->log, "snapshots.take_saved_state %s", machine_id);
  return TRUE;
}

static gboolean
fake_commit (MvSnapshots *snapshots, const char *dir, MvSnapshot *snapshot, GError **error)
{
  FakeSnapshots *fake = fake_of (snapshots);

  fake_log_add (fake->log, "snapshots.commit %s %s", snapshot->machine_id, snapshot->name);
  g_mutex_lock (&fake->lock);
  g_hash_table_insert (fake->snapshots, g_strdup (snapshot->id), g_strdup (snapshot->machine_id));
  g_mutex_unlock (&fake->lock);
  return TRUE;
}

static gboolean
fake_full (MvSnapshots *snapshots, const char *dir)
{
  return FALSE;
}

static void
fake_discard (MvSnapshots *snapshots, const char *dir)
{
  fake_log_add (fake_of (snapshots)->log, "snapshots.discard %s", dir);
}

static gboolean
fake_put_back (MvSnapshots *snapshots, const char *dir, const char *machine_id, gboolean state,
               gboolean move, GError **error)
{
  fake_log_add (fake_of (snapshots)->log, "snapshots.put_back %s %s", machine_id,
                state ? "state" : "disk");
  return TRUE;
}

static gboolean
fake_remove (MvSnapshots *snapshots, const char *snapshot_id, GError **error)
{
  FakeSnapshots *fake = fake_of (snapshots);
  gboolean removed;

  fake_log_add (fake->log, "snapshots.remove %s", snapshot_id);
  g_mutex_lock (&fake->lock);
  removed = g_hash_table_remove (fake->snapshots, snapshot_id);
  g_mutex_unlock (&fake->lock);
  if (!removed)
    g_set_error (error, MV_ERROR, MV_ERROR_NOT_FOUND, "No snapshot %s", snapshot_id);
  return removed;
}

static GPtrArray *
fake_load (MvSnapshots *snapshots, GHashTable *invalid, GError **error)
{
  return g_ptr_array_new_with_free_func ((GDestroyNotify) mv_snapshot_free);
}

static gboolean
fake_sweep (MvSnapshots *snapshots, GError **error)
{
  fake_log_add (fake_of (snapshots)->log, "snapshots.sweep -");
  return TRUE;
}

FakeSnapshots *
fake_snapshots_new (FakeLog *log)
{
  FakeSnapshots *fake = g_new0 (FakeSnapshots, 1);

  fake->log = log;
  g_mutex_init (&fake->lock);
  fake->snapshots = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  fake->iface = (MvSnapshots) {
    .data = fake,
    .stage = fake_stage,
    .state_dir = fake_state_dir,
    .dir = fake_dir,
    .take_disk = fake_take_disk,
    .take_saved_state = fake_take_saved_state,
    .commit = fake_commit,
    .full = fake_full,
    .discard = fake_discard,
    .put_back = fake_put_back,
    .remove = fake_remove,
    .load = fake_load,
    .sweep = fake_sweep,
  };
  return fake;
}

void
fake_snapshots_free (FakeSnapshots *fake)
{
  if (!fake)
    return;
  g_hash_table_unref (fake->snapshots);
  g_mutex_clear (&fake->lock);
  g_free (fake);
}

MvSnapshots *
fake_snapshots_iface (FakeSnapshots *fake)
{
  return &fake->iface;
}

char *
fake_snapshots_add (FakeSnapshots *fake, const char *machine_id, const char *name)
{
  char *id;

  g_mutex_lock (&fake->lock);
  id = g_strdup_printf ("snap%u", ++fake->next_id);
  g_hash_table_insert (fake->snapshots, g_strdup (id), g_strdup (machine_id));
  g_mutex_unlock (&fake->lock);
  return id;
}

guint
fake_snapshots_count (FakeSnapshots *fake)
{
  guint count;

  g_mutex_lock (&fake->lock);
  count = g_hash_table_size (fake->snapshots);
  g_mutex_unlock (&fake->lock);
  return count;
}
