/* A machine's records written off the main loop: the status before and
 * after each step, the config a lifecycle request changes. The main loop
 * goes on serving while the disk syncs; what changed is announced only
 * once it is on disk (MvObserver.durable), and a machine whose config is
 * being written is not acted on until it is. Writes of one record land in
 * the order they were begun: a write finds a newer one on disk and leaves
 * it be. */
#include "reconciler-private.h"
#include "core/errors.h"

struct _MvRecordWriter {
  gint    refs;
  GMutex  lock;              /* held for each write of either record */
  guint64 status_written;    /* the sequence numbers of what is on disk */
  guint64 config_written;
};

MvRecordWriter *
mv_record_writer_new (void)
{
  MvRecordWriter *writer = g_new0 (MvRecordWriter, 1);

  writer->refs = 1;
  g_mutex_init (&writer->lock);
  return writer;
}

static MvRecordWriter *
record_writer_ref (MvRecordWriter *writer)
{
  g_atomic_int_inc (&writer->refs);
  return writer;
}

void
mv_record_writer_unref (MvRecordWriter *writer)
{
  if (!writer || !g_atomic_int_dec_and_test (&writer->refs))
    return;
  g_mutex_clear (&writer->lock);
  g_free (writer);
}

/* Writes @status or @config as number @seq of its record, unless a newer
 * one is on disk already, which says all this one would. */
static gboolean
write_locked (MvRecords *records, MvRecordWriter *writer, const char *id, const MvStatus *status,
              const MvConfig *config, guint64 seq, GError **error)
{
  guint64 *written = status ? &writer->status_written : &writer->config_written;
  gboolean ok = TRUE;

  g_mutex_lock (&writer->lock);
  if (*written < seq)
    {
      ok = status ? records->save_status (records, id, status, error)
                  : records->save_config (records, config, error);
      if (ok)
        *written = seq;
    }
  g_mutex_unlock (&writer->lock);
  return ok;
}

/* The result of status write @seq, unless a newer one's is known. */
static void
note_status_result (MvMachine *machine, guint64 seq, const GError *error)
{
  if (seq < machine->status_result_seq)
    return;
  machine->status_result_seq = seq;
  machine->status_unsaved = error != NULL;
  if (error)
    mv_machine_log (machine, G_LOG_LEVEL_WARNING, "Machine %s: could not record its status: %s",
                    machine->id, error->message);
}

/* @props: what of the config the write changed. */
static void
note_config_result (MvMachine *machine, guint props, const GError *error)
{
  if (error)
    mv_machine_log (machine, G_LOG_LEVEL_WARNING,
                    "Machine %s: could not record its configuration: %s", machine->id,
                    error->message);
  else
    mv_machine_changed (machine, props);
}

gboolean
mv_machine_save_status (MvMachine *machine, GError **error)
{
  MvRecords *records = machine->reconciler->host->records;
  guint64 seq = ++machine->status_seq;
  g_autoptr (GError) local = NULL;

  write_locked (records, machine->record_writer, machine->id, machine->status, NULL, seq, &local);
  note_status_result (machine, seq, local);
  if (!local)
    return TRUE;
  g_propagate_prefixed_error (error, g_steal_pointer (&local), "Could not record the status: ");
  return FALSE;
}

gboolean
mv_machine_save_config (MvMachine *machine, GError **error)
{
  MvRecords *records = machine->reconciler->host->records;
  g_autoptr (GError) local = NULL;

  write_locked (records, machine->record_writer, machine->id, NULL, machine->config,
                ++machine->config_seq, &local);
  note_config_result (machine, MV_PROP_ALL_CONFIG, local);
  if (!local)
    return TRUE;
  g_propagate_prefixed_error (error, g_steal_pointer (&local), "Could not record the change: ");
  return FALSE;
}

/* Off the main loop ----------------------------------------------------------- */

typedef struct {
  MvReconciler   *rec;
  char           *machine_id;
  MvRecordWriter *writer;
  MvStatus       *status;     /* one of the two: a copy of what is written */
  MvConfig       *config;
  guint           props;      /* config: what of it changed */
  guint64         seq;
  MvRecordSaved   done;
  gpointer        data;
  GDestroyNotify  free;
} RecordWrite;

static void
record_write_free (RecordWrite *write)
{
  if (write->free)
    write->free (write->data);
  g_free (write->machine_id);
  mv_record_writer_unref (write->writer);
  mv_status_free (write->status);
  mv_config_free (write->config);
  g_free (write);
}

static void
write_in_thread (GTask *gtask, gpointer source, gpointer task_data, GCancellable *cancellable)
{
  RecordWrite *write = task_data;
  GError *error = NULL;

  if (write_locked (write->rec->host->records, write->writer, write->machine_id, write->status,
                    write->config, write->seq, &error))
    g_task_return_boolean (gtask, TRUE);
  else
    g_task_return_error (gtask, error);
}

const MvStatus *
mv_machine_shown_status (const MvMachine *machine)
{
  return machine->shown_status ? machine->shown_status : machine->status;
}

const MvConfig *
mv_machine_shown_config (const MvMachine *machine)
{
  return machine->shown_config ? machine->shown_config : machine->config;
}

void
mv_machine_begin_record_write (MvMachine *machine, gboolean config)
{
  machine->record_writes++;
  if (!machine->shown_status)
    machine->shown_status = mv_status_copy (machine->status);
  if (config && !machine->shown_config)
    machine->shown_config = mv_config_copy (machine->config);
}

void
mv_machine_end_record_write (MvMachine *machine)
{
  MvReconciler *rec = machine->reconciler;

  g_return_if_fail (machine->record_writes > 0);
  if (--machine->record_writes > 0)
    return;
  g_clear_pointer (&machine->shown_status, mv_status_free);
  g_clear_pointer (&machine->shown_config, mv_config_free);
  if (rec->observer.durable)
    rec->observer.durable (machine, rec->observer.data);
}

/* Back on the main thread: what came of @write. */
static void
record_write_finish (RecordWrite *write, GError *error_in)
{
  MvReconciler *rec = write->rec;
  MvMachine *machine = mv_reconciler_lookup (rec, write->machine_id);
  g_autoptr (GError) error = error_in;

  /* Only a config write can outlive its machine: a destroy step under way
   * as it began removed it. */
  if (machine == NULL)
    {
      g_autoptr (GError) gone = g_error_new (MV_ERROR, MV_ERROR_NOT_FOUND,
                                             "Machine %s was deleted", write->machine_id);
      if (write->done)
        write->done (NULL, gone, write->data);
      return;
    }
  if (write->status)
    note_status_result (machine, write->seq, error);
  else
    {
      machine->config_writes--;
      note_config_result (machine, write->props, error);
    }
  if (error)
    g_prefix_error (&error, write->status ? "Could not record the status: "
                                          : "Could not record the change: ");
  /* The last write done: what the machine has is on disk, and shown from
   * now on. @done goes before it is announced: what it puts back (after a
   * failed write) is never announced, and what it begins is announced
   * with this once that is on disk too. */
  if (machine->record_writes == 1)
    {
      g_clear_pointer (&machine->shown_status, mv_status_free);
      g_clear_pointer (&machine->shown_config, mv_config_free);
    }
  if (write->done)
    write->done (machine, error, write->data);
  if ((machine = mv_reconciler_lookup (rec, write->machine_id)))
    mv_machine_end_record_write (machine);
}

static void
on_written (GObject *source, GAsyncResult *result, gpointer user_data)
{
  GError *error = NULL;

  g_task_propagate_boolean (G_TASK (result), &error);
  record_write_finish (g_task_get_task_data (G_TASK (result)), error);
}

static RecordWrite *
record_write_new (MvMachine *machine, gboolean status, guint props, MvRecordSaved done,
                  gpointer data, GDestroyNotify free)
{
  RecordWrite *write = g_new0 (RecordWrite, 1);

  write->rec = machine->reconciler;
  write->machine_id = g_strdup (machine->id);
  write->writer = record_writer_ref (machine->record_writer);
  if (status)
    {
      write->status = mv_status_copy (machine->status);
      write->seq = ++machine->status_seq;
    }
  else
    {
      write->config = mv_config_copy (machine->config);
      write->props = props;
      write->seq = ++machine->config_seq;
      machine->config_writes++;
    }
  write->done = done;
  write->data = data;
  write->free = free;
  return write;
}

static void
save_async (MvMachine *machine, gboolean status, guint props, MvRecordSaved done, gpointer data,
            GDestroyNotify free)
{
  g_return_if_fail (machine->record_writes > 0);
  mv_reconciler_run_in_thread (write_in_thread, on_written,
                               record_write_new (machine, status, props, done, data, free),
                               (GDestroyNotify) record_write_free);
}

void
mv_machine_save_status_async (MvMachine *machine, MvRecordSaved done, gpointer data,
                              GDestroyNotify free)
{
  save_async (machine, TRUE, 0, done, data, free);
}

/* A status write and the work that waits for it, in one worker ---------------- */

struct _MvRecordAhead {
  MvRecords      *records;
  MvRecordWriter *writer;
  char           *machine_id;
  guint64         seq;         /* reserved for it when the step was begun */
  MvStatus       *base;        /* the status as the step's phase recorded it */
  MvStatus       *result;      /* what the worker wrote, if it did */
  JsonNode       *result_node;
};

typedef struct {
  RecordWrite    *write;       /* handed to the main thread once on disk */
  GError         *error;       /* what the write came to */
  gboolean        regardless;  /* @then runs even if the write failed */
  GTaskThreadFunc then;
  gpointer        then_data;
  MvRecordAhead  *ahead;       /* given the status written, for @then */
} WriteThen;

static MvRecordAhead *
record_ahead_new (MvRecords *records, MvRecordWriter *writer, const char *machine_id,
                  guint64 seq)
{
  MvRecordAhead *ahead = g_new0 (MvRecordAhead, 1);

  ahead->records = records;
  ahead->writer = record_writer_ref (writer);
  ahead->machine_id = g_strdup (machine_id);
  ahead->seq = seq;
  return ahead;
}

static void
write_then_free (WriteThen *wt)
{
  if (wt->write)
    record_write_free (wt->write);
  g_clear_error (&wt->error);
  g_free (wt);
}

static gboolean
on_written_before (gpointer data)
{
  WriteThen *wt = data;

  record_write_finish (wt->write, g_steal_pointer (&wt->error));
  return G_SOURCE_REMOVE;
}

static void
write_then_in_thread (GTask *gtask, gpointer source, gpointer task_data, GCancellable *cancellable)
{
  WriteThen *wt = task_data;
  RecordWrite *write = wt->write;
  GTaskThreadFunc then = wt->then;        /* @wt is the main thread's once sent */
  gpointer then_data = wt->then_data;
  gboolean go_on = wt->regardless, written;

  written = write_locked (write->rec->host->records, write->writer, write->machine_id,
                          write->status, NULL, write->seq, &wt->error);
  if (written && wt->ahead)
    wt->ahead->base = mv_status_copy (write->status);
  /* The main thread hears of the write now, not when @then is done: a
   * boot takes seconds, and what the write says is announced at once.
   * It hears of the two in the order they are sent. */
  mv_reconciler_send (on_written_before, wt, (GDestroyNotify) write_then_free);
  if (!written && !go_on)
    {
      g_task_return_new_error (gtask, MV_ERROR, MV_ERROR_FAILED, "Not recorded");
      return;
    }
  then (gtask, source, then_data, cancellable);
}

void
mv_machine_save_status_then (MvMachine *machine, MvRecordSaved done, gpointer data,
                             gboolean regardless, GTaskThreadFunc then,
                             GAsyncReadyCallback then_done, gpointer then_data,
                             MvRecordAhead **ahead)
{
  WriteThen *wt = g_new0 (WriteThen, 1);

  g_return_if_fail (machine->record_writes > 0);
  wt->write = record_write_new (machine, TRUE, 0, done, data, NULL);
  wt->regardless = regardless;
  wt->then = then;
  wt->then_data = then_data;
  /* Its number follows the phase's: any status write begun after this
   * one is newer. */
  if (ahead)
    wt->ahead = *ahead = record_ahead_new (machine->reconciler->host->records,
                                           machine->record_writer, machine->id,
                                           ++machine->status_seq);
  mv_reconciler_run_task (write_then_in_thread, wt, NULL, then_done, then_data);
}

/* Written ahead of the main thread ---------------------------------------------- */

MvRecordAhead *
mv_record_ahead_new (MvRecords *records, const char *machine_id)
{
  MvRecordWriter *writer = mv_record_writer_new ();
  /* The machine's first status write: the one its records were made
   * with is not numbered. */
  MvRecordAhead *ahead = record_ahead_new (records, writer, machine_id, 1);

  mv_record_writer_unref (writer);
  return ahead;
}

void
mv_record_ahead_set_base (MvRecordAhead *ahead, const MvStatus *written)
{
  ahead->base = mv_status_copy (written);
}

void
mv_machine_take_record_ahead (MvMachine *machine, const MvRecordAhead *ahead)
{
  g_return_if_fail (machine->status_seq == 0);
  mv_record_writer_unref (machine->record_writer);
  machine->record_writer = record_writer_ref (ahead->writer);
  machine->status_seq = ahead->seq;
}

void
mv_record_ahead_free (MvRecordAhead *ahead)
{
  if (!ahead)
    return;
  mv_record_writer_unref (ahead->writer);
  g_free (ahead->machine_id);
  mv_status_free (ahead->base);
  mv_status_free (ahead->result);
  g_clear_pointer (&ahead->result_node, json_node_unref);
  g_free (ahead);
}

MvStatus *
mv_record_ahead_base (const MvRecordAhead *ahead)
{
  return ahead->base ? mv_status_copy (ahead->base) : NULL;
}

void
mv_record_ahead_write (MvRecordAhead *ahead, MvStatus *status)
{
  g_autoptr (GError) error = NULL;

  /* A failure is not this worker's to report: the main thread writes the
   * status again, and hears of it then. */
  if (!write_locked (ahead->records, ahead->writer, ahead->machine_id, status, NULL, ahead->seq,
                     &error))
    {
      mv_status_free (status);
      return;
    }
  ahead->result = status;
  ahead->result_node = mv_status_to_node (status);
}

gboolean
mv_record_ahead_taken (MvMachine *machine, const MvRecordAhead *ahead)
{
  g_autoptr (JsonNode) now = NULL;

  /* Written, not overtaken by a status write begun since (which lands
   * after it), and the status as the main thread made it. */
  if (!ahead || !ahead->result || machine->status_seq != ahead->seq)
    return FALSE;
  now = mv_status_to_node (machine->status);
  return json_node_equal (now, ahead->result_node);
}

void
mv_machine_status_written_ahead (MvMachine *machine, const MvRecordAhead *ahead,
                                 MvRecordSaved done, gpointer data)
{
  g_autofree char *id = g_strdup (machine->id);
  RecordWrite write = {
    .rec = machine->reconciler,
    .machine_id = id,
    .status = ahead->result,
    .seq = ahead->seq,
    .done = done,
    .data = data,
  };

  /* Taken, and nothing written since (mv_record_ahead_taken() said so). */
  g_return_if_fail (ahead->result && machine->status_seq == ahead->seq);
  record_write_finish (&write, NULL);
}

void
mv_machine_save_config_async (MvMachine *machine, guint props, MvRecordSaved done,
                              gpointer data, GDestroyNotify free)
{
  save_async (machine, FALSE, props, done, data, free);
}
