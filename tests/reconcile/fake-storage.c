#include "fake-storage.h"
#include "core/errors.h"

static const char *const call_names[FAKE_STORAGE_N_CALLS] = {
  [FAKE_STORAGE_STAGE] = "stage",
  [FAKE_STORAGE_COMMIT] = "commit",
  [FAKE_STORAGE_DISCARD] = "discard",
  [FAKE_STORAGE_RETIRE] = "retire",
  [FAKE_STORAGE_SWEEP] = "sweep",
  [FAKE_STORAGE_REMOVE_DISKS] = "remove_disks",
};

/* Which calls block, and so belong in worker threads. */
static const gboolean blocks[FAKE_STORAGE_N_CALLS] = {
  [FAKE_STORAGE_STAGE] = TRUE,
  [FAKE_STORAGE_DISCARD] = TRUE,
  [FAKE_STORAGE_SWEEP] = TRUE,
  [FAKE_STORAGE_REMOVE_DISKS] = TRUE,
};

typedef struct {
  gboolean staged;
  gboolean whole;
  guint    retired;
} Saved;

struct _FakeStorage {
  MvStorage   iface;
  FakeLog    *log;
  FakeHold    hold;
  GMutex      lock;
  GHashTable *saved;                          /* machine id -> Saved* */
  char       *failures[FAKE_STORAGE_N_CALLS];
  guint       counts[FAKE_STORAGE_N_CALLS];
};

static FakeStorage *
fake_of (MvStorage *storage)
{
  return storage->data;
}

/* Called with the lock held. */
static Saved *
saved_of (FakeStorage *fake, const char *machine_id)
{
  Saved *saved = g_hash_table_lookup (fake->saved, machine_id);

  if (!saved)
    {
      saved = g_new0 (Saved, 1);
      g_hash_table_insert (fake->saved, g_strdup (machine_id), saved);
    }
  return saved;
}

/* Logs the call, holds it if asked, and returns with the lock held and
 * the machine's frozen guests, or NULL (unlocked, @error set) if the call
 * is scripted to fail. */
static Saved *
enter (FakeStorage *fake, FakeStorageCall call, const char *machine_id, GError **error)
{
  g_autofree char *failure = NULL;

  if (blocks[call] && fake_on_main_thread ())
    fake_log_breach (fake->log, "storage.%s %s ran on the main thread", call_names[call],
                     machine_id);
  fake_log_add (fake->log, "storage.%s %s", call_names[call], machine_id);
  fake_hold_point (&fake->hold, call);
  g_mutex_lock (&fake->lock);
  fake->counts[call]++;
  failure = g_steal_pointer (&fake->failures[call]);
  if (!failure)
    return saved_of (fake, machine_id);
  g_mutex_unlock (&fake->lock);
  g_set_error_literal (error, MV_ERROR, MV_ERROR_FAILED, failure);
  return NULL;
}

static gboolean
fake_remove_disks (MvStorage *storage, const char *machine_id, GError **error)
{
  FakeStorage *fake = fake_of (storage);

  if (!enter (fake, FAKE_STORAGE_REMOVE_DISKS, machine_id, error))
    return FALSE;
  g_mutex_unlock (&fake->lock);
  return TRUE;
}

static char *
fake_saved_state_dir (MvStorage *storage, const char *machine_id)
{
  return g_build_filename ("/var/lib/fake/machines", machine_id, "saved", NULL);
}

static char *
fake_stage (MvStorage *storage, const char *machine_id, GError **error)
{
  FakeStorage *fake = fake_of (storage);
  Saved *saved = enter (fake, FAKE_STORAGE_STAGE, machine_id, error);

  if (!saved)
    return NULL;
  saved->whole = FALSE;
  saved->staged = TRUE;
  g_mutex_unlock (&fake->lock);
  return g_build_filename ("/var/lib/fake/machines", machine_id, "saved.staged", NULL);
}

static gboolean
fake_commit (MvStorage *storage, const char *machine_id, GError **error)
{
  FakeStorage *fake = fake_of (storage);
  Saved *saved = enter (fake, FAKE_STORAGE_COMMIT, machine_id, error);
  gboolean ok;

  if (!saved)
    return FALSE;
  ok = saved->staged;
  saved->whole = saved->whole || saved->staged;
  saved->staged = FALSE;
  g_mutex_unlock (&fake->lock);
  if (!ok)
    g_set_error (error, MV_ERROR, MV_ERROR_NOT_FOUND, "No staged frozen guest of %s", machine_id);
  return ok;
}

static gboolean
fake_discard (MvStorage *storage, const char *machine_id, GError **error)
{
  FakeStorage *fake = fake_of (storage);
  Saved *saved = enter (fake, FAKE_STORAGE_DISCARD, machine_id, error);

  if (!saved)
    return FALSE;
  saved->whole = saved->staged = FALSE;
  g_mutex_unlock (&fake->lock);
  return TRUE;
}

static gboolean
fake_retire (MvStorage *storage, const char *machine_id, GError **error)
{
  FakeStorage *fake = fake_of (storage);
  Saved *saved = enter (fake, FAKE_STORAGE_RETIRE, machine_id, error);

  if (!saved)
    return FALSE;
  if (saved->whole)
    saved->retired++;
  saved->whole = FALSE;
  g_mutex_unlock (&fake->lock);
  return TRUE;
}

static gboolean
fake_sweep (MvStorage *storage, const char *machine_id, GError **error)
{
  FakeStorage *fake = fake_of (storage);
  Saved *saved = enter (fake, FAKE_STORAGE_SWEEP, machine_id, error);

  if (!saved)
    return FALSE;
  saved->retired = 0;
  g_mutex_unlock (&fake->lock);
  return TRUE;
}

static gboolean
fake_has_saved_state (MvStorage *storage, const char *machine_id)
{
  return fake_storage_has_whole (fake_of (storage), machine_id);
}

static gboolean
fake_has_staged_state (MvStorage *storage, const char *machine_id)
{
  return fake_storage_has_staged (fake_of (storage), machine_id);
}

FakeStorage *
fake_storage_new (FakeLog *log)
{
  FakeStorage *fake = g_new0 (FakeStorage, 1);

  fake->log = log;
  fake_hold_init (&fake->hold);
  g_mutex_init (&fake->lock);
  fake->saved = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  fake->iface = (MvStorage) {
    .data = fake,
    .saved_state_dir = fake_saved_state_dir,
    .stage_saved_state = fake_stage,
    .commit_saved_state = fake_commit,
    .discard_saved_state = fake_discard,
    .retire_saved_state = fake_retire,
    .sweep = fake_sweep,
    .remove_disks = fake_remove_disks,
    .has_saved_state = fake_has_saved_state,
    .has_staged_state = fake_has_staged_state,
  };
  return fake;
}

void
fake_storage_free (FakeStorage *fake)
{
  if (!fake)
    return;
  for (guint i = 0; i < FAKE_STORAGE_N_CALLS; i++)
    g_free (fake->failures[i]);
  g_hash_table_unref (fake->saved);
  g_mutex_clear (&fake->lock);
  fake_hold_clear (&fake->hold);
  g_free (fake);
}

MvStorage *
fake_storage_iface (FakeStorage *fake)
{
  return &fake->iface;
}

void
fake_storage_fail_next (FakeStorage *fake, FakeStorageCall call, const char *message)
{
  g_mutex_lock (&fake->lock);
  g_free (fake->failures[call]);
  fake->failures[call] = g_strdup (message);
  g_mutex_unlock (&fake->lock);
}

FakeHold *
fake_storage_hold (FakeStorage *fake)
{
  return &fake->hold;
}

void
fake_storage_put (FakeStorage *fake, const char *machine_id, gboolean whole)
{
  Saved *saved;

  g_mutex_lock (&fake->lock);
  saved = saved_of (fake, machine_id);
  saved->whole = whole;
  saved->staged = !whole;
  g_mutex_unlock (&fake->lock);
}

gboolean
fake_storage_has_whole (FakeStorage *fake, const char *machine_id)
{
  gboolean whole;

  g_mutex_lock (&fake->lock);
  whole = saved_of (fake, machine_id)->whole;
  g_mutex_unlock (&fake->lock);
  return whole;
}

gboolean
fake_storage_has_staged (FakeStorage *fake, const char *machine_id)
{
  gboolean staged;

  g_mutex_lock (&fake->lock);
  staged = saved_of (fake, machine_id)->staged;
  g_mutex_unlock (&fake->lock);
  return staged;
}

guint
fake_storage_retired (FakeStorage *fake, const char *machine_id)
{
  guint retired;

  g_mutex_lock (&fake->lock);
  retired = saved_of (fake, machine_id)->retired;
  g_mutex_unlock (&fake->lock);
  return retired;
}

guint
fake_storage_count (FakeStorage *fake, FakeStorageCall call)
{
  guint count;

  g_mutex_lock (&fake->lock);
  count = fake->counts[call];
  g_mutex_unlock (&fake->lock);
  return count;
}
