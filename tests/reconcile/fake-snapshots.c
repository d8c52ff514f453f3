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
fake_create (MvSnapshots *snapshots, const MvRuntimeRequest *req, const char *name,
             const char *state_dir, GError **error)
{
  FakeSnapshots *fake = fake_of (snapshots);

  fake_log_add (fake->log, "snapshots.create %s %s", req->machine_id, name);
  return fake_snapshots_add (fake, req->machine_id, name);
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

static char *
fake_state_dir (MvSnapshots *snapshots, const char *snapshot_id)
{
  return g_build_filename ("/var/lib/fake/snapshots", snapshot_id, NULL);
}

static gboolean
fake_sweep_staging (MvSnapshots *snapshots, GError **error)
{
  fake_log_add (fake_of (snapshots)->log, "snapshots.sweep_staging -");
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
    .create = fake_create,
    .remove = fake_remove,
    .state_dir = fake_state_dir,
    .sweep_staging = fake_sweep_staging,
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
