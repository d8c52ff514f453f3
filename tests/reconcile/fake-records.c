#include "fake-records.h"
#include "core/errors.h"

static const char *const call_names[FAKE_RECORDS_N_CALLS] = {
  [FAKE_RECORDS_CREATE] = "create",
  [FAKE_RECORDS_SAVE_CONFIG] = "save_config",
  [FAKE_RECORDS_SAVE_STATUS] = "save_status",
  [FAKE_RECORDS_REMOVE] = "remove",
  [FAKE_RECORDS_MAKE_RUNTIME_DIR] = "make_runtime_dir",
  [FAKE_RECORDS_REMOVE_RUNTIME_DIR] = "remove_runtime_dir",
  [FAKE_RECORDS_MARK_DESTROYED] = "mark_destroyed",
};

typedef struct {
  MvConfig *config;
  MvStatus *status;
} Record;

struct _FakeRecords {
  MvRecords   iface;
  FakeLog    *log;
  GMutex      lock;
  GHashTable *records;                        /* machine id -> Record* */
  char       *failures[FAKE_RECORDS_N_CALLS];
  guint       counts[FAKE_RECORDS_N_CALLS];
};

static void
record_free (Record *record)
{
  mv_config_free (record->config);
  mv_status_free (record->status);
  g_free (record);
}

static FakeRecords *
fake_of (MvRecords *records)
{
  return records->data;
}

/* The failure scripted for @call, the thread check and the log entry of a
 * failure; returns FALSE (with @error) if the call is to fail. */
static gboolean
enter (FakeRecords *fake, FakeRecordsCall call, const char *machine_id, gboolean main_thread,
       GError **error)
{
  g_autofree char *failure = NULL;

  if (main_thread != fake_on_main_thread ())
    fake_log_breach (fake->log, "records.%s %s ran %s the main thread", call_names[call],
                     machine_id, main_thread ? "off" : "on");
  g_mutex_lock (&fake->lock);
  failure = g_steal_pointer (&fake->failures[call]);
  if (!failure)
    fake->counts[call]++;
  g_mutex_unlock (&fake->lock);
  if (!failure)
    return TRUE;
  fake_log_add (fake->log, "records.failed %s %s", call_names[call], machine_id);
  g_set_error_literal (error, MV_ERROR, MV_ERROR_FAILED, failure);
  return FALSE;
}

/* Called with the lock held. */
static Record *
existing (FakeRecords *fake, FakeRecordsCall call, const char *machine_id)
{
  Record *record = g_hash_table_lookup (fake->records, machine_id);

  if (!record)
    fake_log_breach (fake->log, "records.%s %s: the machine has no records", call_names[call],
                     machine_id);
  return record;
}

static gboolean
fake_create (MvRecords *records, const MvConfig *config, const MvStatus *status, GError **error)
{
  FakeRecords *fake = fake_of (records);
  gboolean exists;

  /* On the main thread, or in the worker that writes a new machine's
   * records before it joins the table. */
  if (!enter (fake, FAKE_RECORDS_CREATE, config->id, fake_on_main_thread (), error))
    return FALSE;
  g_mutex_lock (&fake->lock);
  exists = g_hash_table_contains (fake->records, config->id);
  g_mutex_unlock (&fake->lock);
  if (exists)
    {
      g_set_error (error, MV_ERROR, MV_ERROR_ALREADY_EXISTS, "%s has records", config->id);
      return FALSE;
    }
  fake_records_put (fake, config, status);
  fake_log_add (fake->log, "records.create %s state=%s phase=%s op=%s", config->id,
                mv_state_to_string (status->state), status->phase ? status->phase : "-",
                status->operation_id ? status->operation_id : "-");
  return TRUE;
}

static gboolean
fake_save_config (MvRecords *records, const MvConfig *config, GError **error)
{
  FakeRecords *fake = fake_of (records);
  Record *record;

  if (!enter (fake, FAKE_RECORDS_SAVE_CONFIG, config->id, fake_on_main_thread (), error))
    return FALSE;
  g_mutex_lock (&fake->lock);
  if ((record = existing (fake, FAKE_RECORDS_SAVE_CONFIG, config->id)))
    {
      mv_config_free (record->config);
      record->config = mv_config_copy (config);
    }
  g_mutex_unlock (&fake->lock);
  fake_log_add (fake->log, "records.save_config %s desired=%s generation=%" G_GUINT64_FORMAT
                " standby=%d", config->id, mv_desired_to_string (config->desired),
                config->desired_generation, config->standby);
  return TRUE;
}

/* As the store's marker: the record says destroyed without a rewrite. */
static gboolean
fake_mark_destroyed (MvRecords *records, const char *id, GError **error)
{
  FakeRecords *fake = fake_of (records);
  Record *record;

  if (!enter (fake, FAKE_RECORDS_MARK_DESTROYED, id, TRUE, error))
    return FALSE;
  g_mutex_lock (&fake->lock);
  if ((record = existing (fake, FAKE_RECORDS_MARK_DESTROYED, id)))
    record->config->desired = MV_DESIRED_DESTROYED;
  g_mutex_unlock (&fake->lock);
  fake_log_add (fake->log, "records.mark_destroyed %s", id);
  return TRUE;
}

static gboolean
fake_save_status (MvRecords *records, const char *id, const MvStatus *status, GError **error)
{
  FakeRecords *fake = fake_of (records);
  Record *record;

  /* On the main thread, or in the worker thread that writes it off the main loop. */
  if (!enter (fake, FAKE_RECORDS_SAVE_STATUS, id, fake_on_main_thread (), error))
    return FALSE;
  g_mutex_lock (&fake->lock);
  if ((record = existing (fake, FAKE_RECORDS_SAVE_STATUS, id)))
    {
      mv_status_free (record->status);
      record->status = mv_status_copy (status);
    }
  g_mutex_unlock (&fake->lock);
  g_autoptr (GString) destroyed = g_string_new (NULL);

  for (guint i = 0; i < status->destroyed->len; i++)
    g_string_append_printf (destroyed, "%s%s", i ? "," : "",
                            (const char *) status->destroyed->pdata[i]);
  /* The operation ID goes last, so that a test can read it to the end. */
  fake_log_add (fake->log, "records.save_status %s state=%s saved=%d destroyed=%s phase=%s op=%s",
                id, mv_state_to_string (status->state), status->saved_state != NULL,
                destroyed->len ? destroyed->str : "-", status->phase ? status->phase : "-",
                status->operation_id ? status->operation_id : "-");
  return TRUE;
}

static gboolean
fake_remove (MvRecords *records, const char *id, GError **error)
{
  FakeRecords *fake = fake_of (records);

  fake_log_add (fake->log, "records.remove %s", id);
  if (!enter (fake, FAKE_RECORDS_REMOVE, id, FALSE, error))
    return FALSE;
  g_mutex_lock (&fake->lock);
  g_hash_table_remove (fake->records, id);
  g_mutex_unlock (&fake->lock);
  return TRUE;
}

static char *
fake_machine_dir (MvRecords *records, const char *id)
{
  return g_build_filename ("/var/lib/fake/machines", id, NULL);
}

static char *
fake_runtime_dir (MvRecords *records, const char *id)
{
  return g_build_filename ("/run/fake/machines", id, NULL);
}

static gboolean
fake_make_runtime_dir (MvRecords *records, const char *id, gboolean *made, GError **error)
{
  FakeRecords *fake = fake_of (records);

  if (made)
    *made = FALSE;
  fake_log_add (fake->log, "records.make_runtime_dir %s", id);
  return enter (fake, FAKE_RECORDS_MAKE_RUNTIME_DIR, id, FALSE, error);
}

static gboolean
fake_remove_runtime_dir (MvRecords *records, const char *id, GError **error)
{
  FakeRecords *fake = fake_of (records);

  fake_log_add (fake->log, "records.remove_runtime_dir %s", id);
  return enter (fake, FAKE_RECORDS_REMOVE_RUNTIME_DIR, id, FALSE, error);
}

FakeRecords *
fake_records_new (FakeLog *log)
{
  FakeRecords *fake = g_new0 (FakeRecords, 1);

  fake->log = log;
  g_mutex_init (&fake->lock);
  fake->records = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
                                         (GDestroyNotify) record_free);
  fake->iface = (MvRecords) {
    .data = fake,
    .create = fake_create,
    .save_config = fake_save_config,
    .save_status = fake_save_status,
    .mark_destroyed = fake_mark_destroyed,
    .remove = fake_remove,
    .machine_dir = fake_machine_dir,
    .runtime_dir = fake_runtime_dir,
    .make_runtime_dir = fake_make_runtime_dir,
    .remove_runtime_dir = fake_remove_runtime_dir,
  };
  return fake;
}

void
fake_records_free (FakeRecords *fake)
{
  if (!fake)
    return;
  for (guint i = 0; i < FAKE_RECORDS_N_CALLS; i++)
    g_free (fake->failures[i]);
  g_hash_table_unref (fake->records);
  g_mutex_clear (&fake->lock);
  g_free (fake);
}

MvRecords *
fake_records_iface (FakeRecords *fake)
{
  return &fake->iface;
}

void
fake_records_fail_next (FakeRecords *fake, FakeRecordsCall call, const char *message)
{
  g_mutex_lock (&fake->lock);
  g_free (fake->failures[call]);
  fake->failures[call] = g_strdup (message);
  g_mutex_unlock (&fake->lock);
}

void
fake_records_put (FakeRecords *fake, const MvConfig *config, const MvStatus *status)
{
  Record *record = g_new0 (Record, 1);

  record->config = mv_config_copy (config);
  record->status = mv_status_copy (status);
  g_mutex_lock (&fake->lock);
  g_hash_table_replace (fake->records, g_strdup (config->id), record);
  g_mutex_unlock (&fake->lock);
}

gboolean
fake_records_exist (FakeRecords *fake, const char *machine_id)
{
  gboolean exist;

  g_mutex_lock (&fake->lock);
  exist = g_hash_table_contains (fake->records, machine_id);
  g_mutex_unlock (&fake->lock);
  return exist;
}

MvConfig *
fake_records_config (FakeRecords *fake, const char *machine_id)
{
  Record *record;
  MvConfig *config = NULL;

  g_mutex_lock (&fake->lock);
  if ((record = g_hash_table_lookup (fake->records, machine_id)))
    config = mv_config_copy (record->config);
  g_mutex_unlock (&fake->lock);
  return config;
}

MvStatus *
fake_records_status (FakeRecords *fake, const char *machine_id)
{
  Record *record;
  MvStatus *status = NULL;

  g_mutex_lock (&fake->lock);
  if ((record = g_hash_table_lookup (fake->records, machine_id)))
    status = mv_status_copy (record->status);
  g_mutex_unlock (&fake->lock);
  return status;
}

guint
fake_records_count (FakeRecords *fake, FakeRecordsCall call)
{
  guint count;

  g_mutex_lock (&fake->lock);
  count = fake->counts[call];
  g_mutex_unlock (&fake->lock);
  return count;
}
