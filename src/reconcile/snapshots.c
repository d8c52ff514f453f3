/* Snapshots (seed 002, CreateSnapshot, RestoreSnapshot, ForkInstance,
 * ForkSnapshot, DeleteSnapshot): the table of them, and the operations
 * that take, put back and fork them. Each holds the machine it works on
 * as a step does (busy), records what it is about before the host is
 * touched, runs the host calls in a worker thread and settles on the
 * main thread. */
#include "reconciler-private.h"
#include "core/errors.h"
#include "util/fault.h"
#include "util/log.h"

typedef enum {
  TAKE_RUNNING,        /* a memory snapshot of a running guest, which runs on */
  TAKE_PAUSED,         /* ...of a paused one, which stays paused */
  TAKE_STANDBY,        /* ...of the frozen guest of a machine on standby */
  TAKE_STOPPED,        /* a disk snapshot */
} TakeFrom;

typedef enum {
  WORK_CREATE,
  WORK_RESTORE,
  WORK_FORK,
} WorkKind;

typedef struct _Work Work;

struct _Work {
  MvReconciler   *rec;
  WorkKind        kind;
  char           *machine_id;     /* the machine worked on (for a fork: the new one) */
  MvRuntime      *runtime;
  char           *runtime_dir;
  MvSpec         *spec;
  MvImageConfig  *image_config;
  JsonObject     *vmm;
  MvSnapshot     *snapshot;       /* CREATE: the one being made; else the one read */
  /* CREATE */
  TakeFrom        from;
  gboolean        keep;           /* a snapshot of its own, not a fork's passing one */
  char           *staged;         /* the staged directory, kept for a fork */
  /* FORK */
  char           *source_id;      /* forking a machine: it, while it is snapshotted */
  char           *fork_json;
  MvDefineFunc    define_func;
  gpointer        define_data;
  /* RESTORE */
  MvSnapshotDoneFunc restore_func;
  gpointer        restore_data;
  /* CREATE */
  MvSnapshotFunc  func;
  gpointer        func_data;
  gboolean        snapshot_in_use; /* counted in rec->snapshot_users */
};

/* A fork waiting for its machine to be running, or gone. */
struct _MvForkWait {
  MvDefineFunc func;
  gpointer     data;
  GError      *error;    /* why it failed: told once the machine is gone */
};

static void
work_free (Work *work)
{
  if (work->snapshot_in_use)
    mv_reconciler_release_snapshot (work->rec, work->snapshot->id);
  g_free (work->machine_id);
  g_free (work->runtime_dir);
  mv_spec_free (work->spec);
  mv_image_config_free (work->image_config);
  g_clear_pointer (&work->vmm, json_object_unref);
  mv_snapshot_free (work->snapshot);
  g_free (work->staged);
  g_free (work->source_id);
  g_free (work->fork_json);
  g_free (work);
}

/* ---- the table ---- */

static gint
by_name (gconstpointer a, gconstpointer b)
{
  const MvSnapshot *x = *(const MvSnapshot **) a, *y = *(const MvSnapshot **) b;

  return g_strcmp0 (x->name, y->name);
}

void
mv_reconciler_add_snapshots (MvReconciler *rec, GPtrArray *snapshots)
{
  for (guint i = 0; i < snapshots->len; i++)
    {
      MvSnapshot *snapshot = snapshots->pdata[i];

      g_hash_table_insert (rec->snapshots, g_strdup (snapshot->id), mv_snapshot_copy (snapshot));
    }
}

GPtrArray *
mv_reconciler_list_snapshots (MvReconciler *rec)
{
  GPtrArray *list = g_ptr_array_new ();
  GHashTableIter iter;
  gpointer value;

  g_hash_table_iter_init (&iter, rec->snapshots);
  while (g_hash_table_iter_next (&iter, NULL, &value))
    g_ptr_array_add (list, value);
  g_ptr_array_sort (list, by_name);
  return list;
}

const MvSnapshot *
mv_reconciler_lookup_snapshot (MvReconciler *rec, const char *id)
{
  return g_hash_table_lookup (rec->snapshots, id);
}

const MvSnapshot *
mv_reconciler_find_snapshot (MvReconciler *rec, const char *name_or_id)
{
  GHashTableIter iter;
  gpointer value;
  const MvSnapshot *found = mv_reconciler_lookup_snapshot (rec, name_or_id);

  if (found)
    return found;
  g_hash_table_iter_init (&iter, rec->snapshots);
  while (g_hash_table_iter_next (&iter, NULL, &value))
    if (g_strcmp0 (((MvSnapshot *) value)->name, name_or_id) == 0)
      return value;
  return NULL;
}

static void
use_snapshot (Work *work)
{
  guint users = GPOINTER_TO_UINT (g_hash_table_lookup (work->rec->snapshot_users,
                                                       work->snapshot->id));

  g_hash_table_insert (work->rec->snapshot_users, g_strdup (work->snapshot->id),
                       GUINT_TO_POINTER (users + 1));
  work->snapshot_in_use = TRUE;
}

void
mv_reconciler_release_snapshot (MvReconciler *rec, const char *id)
{
  guint users = GPOINTER_TO_UINT (g_hash_table_lookup (rec->snapshot_users, id));

  if (users <= 1)
    g_hash_table_remove (rec->snapshot_users, id);
  else
    g_hash_table_insert (rec->snapshot_users, g_strdup (id), GUINT_TO_POINTER (users - 1));
}

static void
snapshot_event (MvReconciler *rec, MvEventKind kind, const char *machine_id,
                const char *machine_name, const char *operation_id, const MvSnapshot *snapshot)
{
  g_autofree char *message = g_strdup_printf ("snapshot %s", snapshot->name);
  MvEvent event = {
    .kind = kind,
    .machine_id = (char *) machine_id,
    .machine_name = (char *) machine_name,
    .operation_id = (char *) operation_id,
    .message = message,
    .snapshot_id = snapshot->id,
  };

  mv_reconciler_event (rec, &event);
}

static void
snapshot_added (MvReconciler *rec, MvSnapshot *snapshot)
{
  g_hash_table_insert (rec->snapshots, g_strdup (snapshot->id), snapshot);
  if (rec->observer.snapshot_added)
    rec->observer.snapshot_added (snapshot, rec->observer.data);
}

/* The images snapshots' guests booted from, beside those machines are
 * pinned to (seed 002, ImagesInUse). */
char **
mv_reconciler_images_in_use (MvReconciler *rec)
{
  g_autoptr (GStrvBuilder) builder = g_strv_builder_new ();
  g_autoptr (GHashTable) seen = g_hash_table_new (g_str_hash, g_str_equal);
  g_autoptr (GPtrArray) machines = mv_reconciler_list (rec);
  GHashTableIter iter;
  gpointer value;

  for (guint i = 0; i < machines->len; i++)
    {
      const char *digest = ((MvMachine *) machines->pdata[i])->config->spec->image_digest;

      if (digest && g_hash_table_add (seen, (gpointer) digest))
        g_strv_builder_add (builder, digest);
    }
  g_hash_table_iter_init (&iter, rec->snapshots);
  while (g_hash_table_iter_next (&iter, NULL, &value))
    {
      const char *digest = ((MvSnapshot *) value)->image_digest;

      if (digest && g_hash_table_add (seen, (gpointer) digest))
        g_strv_builder_add (builder, digest);
    }
  return g_strv_builder_end (builder);
}

/* ---- what every operation shares ---- */

static Work *
work_new (MvReconciler *rec, WorkKind kind, MvMachine *machine)
{
  MvRecords *records = rec->host->records;
  Work *work = g_new0 (Work, 1);

  work->rec = rec;
  work->kind = kind;
  work->machine_id = g_strdup (machine->id);
  work->runtime = mv_reconciler_runtime_for (machine, NULL);
  work->runtime_dir = records->runtime_dir (records, machine->id);
  work->spec = mv_spec_copy (machine->config->spec);
  work->image_config = mv_image_config_copy (machine->config->image_config);
  work->vmm = machine->status->vmm ? mv_reconciler_copy_vmm (machine->status->vmm) : NULL;
  return work;
}

static MvRuntimeRequest
work_request (Work *work)
{
  MvRuntimeRequest req = {
    .machine_id = work->machine_id,
    .spec = work->spec,
    .runtime_dir = work->runtime_dir,
    .vmm = work->vmm,
    .image_config = work->image_config,
  };
  return req;
}

/* A memory snapshot resumes only on the hypervisor, in the version, that
 * froze it. */
static MvRuntime *
runtime_for_snapshot (MvReconciler *rec, const MvSnapshot *snapshot, GError **error)
{
  MvRuntimes *runtimes = rec->host->runtimes;
  MvRuntime *runtime = mv_runtimes_find (runtimes, snapshot->hypervisor_type,
                                         snapshot->hypervisor_version);

  if (snapshot->kind == MV_SNAPSHOT_MEMORY &&
      (!runtime || g_strcmp0 (mv_runtimes_version (runtimes, runtime),
                              snapshot->hypervisor_version) != 0))
    return mv_error_set (error, MV_ERROR_UNAVAILABLE, "hypervisor_version: snapshot %s was taken "
                         "with %s %s, which this host does not have", snapshot->name,
                         snapshot->hypervisor_type, snapshot->hypervisor_version), NULL;
  return runtime;
}

/* ---- CreateSnapshot ---- */

static gboolean
name_taken (MvReconciler *rec, const char *name)
{
  return mv_reconciler_find_snapshot (rec, name) != NULL ||
         g_hash_table_contains (rec->snapshot_names, name);
}

/* What @machine can be snapshotted from now; MV_ERROR_* if nothing. */
static gboolean
take_from (MvMachine *machine, MvRuntime *runtime, TakeFrom *from, GError **error)
{
  const MvSpec *spec = machine->config->spec;
  MvStatus *status = machine->status;

  if (mv_spec_unfreezable (spec))
    return mv_error_set (error, MV_ERROR_UNSUPPORTED, "Machine %s cannot be snapshotted: %s",
                         spec->name, mv_spec_unfreezable (spec));
  switch (status->state)
    {
    case MV_STATE_RUNNING:
    case MV_STATE_PAUSED:
      if (!runtime || !runtime->snapshot)
        return mv_error_set (error, MV_ERROR_UNSUPPORTED, "The %s hypervisor cannot snapshot "
                             "a running guest", runtime ? runtime->type : spec->hypervisor_type);
      *from = status->state == MV_STATE_RUNNING ? TAKE_RUNNING : TAKE_PAUSED;
      return TRUE;
    case MV_STATE_STANDBY:
      if (!status->saved_state)
        break;
      *from = TAKE_STANDBY;
      return TRUE;
    case MV_STATE_STOPPED:
    case MV_STATE_FAILED:
      if (status->vmm)
        break;
      if (!spec->image)
        return mv_error_set (error, MV_ERROR_INVALID_STATE, "Machine %s boots no image, so it "
                             "has no disk of its own to snapshot while it is stopped",
                             spec->name);
      *from = TAKE_STOPPED;
      return TRUE;
    default:
      break;
    }
  return mv_error_set (error, MV_ERROR_INVALID_STATE, "Cannot snapshot machine %s: it is %s",
                       spec->name, mv_state_to_string (status->state));
}

static void
take_in_thread (GTask *gtask, gpointer source, gpointer task_data, GCancellable *cancellable)
{
  Work *work = task_data;
  const MvHost *host = work->rec->host;
  MvSnapshots *snapshots = host->snapshots;
  MvRuntime *rt = work->runtime;
  MvRuntimeRequest req = work_request (work);
  g_autofree char *state = NULL;
  g_autoptr (MvNetworkAttachment) held = NULL;
  g_autoptr (GPtrArray) blocks = NULL;
  g_autoptr (GError) resume_error = NULL;
  GError *error = NULL;
  gboolean ok = FALSE, had = FALSE;

  mv_fault_point ("snapshot", "recorded");
  if (work->spec->network_name && host->network && (held = host->network->held (host->network, &req)))
    {
      work->snapshot->address = g_strdup (held->address);
      work->snapshot->mac_address = g_strdup (held->mac_address);
      req.network = held;
    }
  /* What is frozen records the disks the VMM has. */
  if ((work->from == TAKE_RUNNING || work->from == TAKE_PAUSED) && host->storage->prepare_disks &&
      !(blocks = host->storage->prepare_disks (host->storage, &req, &error)))
    {
      g_task_return_error (gtask, error);
      return;
    }
  req.blocks = blocks;
  work->staged = snapshots->stage (snapshots, &error);
  if (work->staged)
    {
      state = snapshots->state_dir (snapshots, work->staged);
      switch (work->from)
        {
        case TAKE_RUNNING:
        case TAKE_PAUSED:
          /* The disk is copied while the guest is paused: both are of one
           * moment. A running guest runs on whatever happens. */
          ok = rt->snapshot (rt, &req, state, &error);
          mv_fault_point ("snapshot", "state-written");
          ok = ok && snapshots->take_disk (snapshots, work->staged, work->machine_id, &had, &error);
          if (work->from == TAKE_RUNNING && !rt->resume (rt, &req, &resume_error))
            mv_log_machine (G_LOG_LEVEL_WARNING, work->machine_id, NULL, NULL,
                            "Could not resume the guest after its snapshot: %s",
                            resume_error->message);
          mv_fault_point ("snapshot", "resumed");
          break;
        case TAKE_STANDBY:
          ok = snapshots->take_saved_state (snapshots, work->staged, work->machine_id, &error) &&
               snapshots->take_disk (snapshots, work->staged, work->machine_id, &had, &error);
          break;
        case TAKE_STOPPED:
          ok = snapshots->take_disk (snapshots, work->staged, work->machine_id, &had, &error);
          if (ok && !had)
            ok = mv_error_set (&error, MV_ERROR_INVALID_STATE, "Machine %s has no disk yet: it "
                               "has never been started", work->spec->name);
          break;
        }
    }
  work->snapshot->has_disk = had;
  if (ok && work->keep)
    ok = snapshots->commit (snapshots, work->staged, work->snapshot, &error);
  if (!ok && work->staged && !g_error_matches (error, MV_ERROR, MV_ERROR_RESOURCE_EXHAUSTED) &&
      snapshots->full (snapshots, work->staged))
    {
      GError *full = g_error_new (MV_ERROR, MV_ERROR_RESOURCE_EXHAUSTED, "The disk is full: %s",
                                  error->message);

      g_error_free (error);
      error = full;
    }
  if (!ok)
    {
      if (work->staged)
        snapshots->discard (snapshots, work->staged);
      g_clear_pointer (&work->staged, g_free);
      g_task_return_error (gtask, error);
      return;
    }
  mv_fault_point ("snapshot", "done");
  g_task_return_boolean (gtask, TRUE);
}

static void fork_put_back (Work *work, MvSnapshot *snapshot);

static void
on_taken (GObject *source, GAsyncResult *result, gpointer user_data)
{
  GTask *gtask = G_TASK (result);
  Work *work = g_task_get_task_data (gtask);
  MvReconciler *rec = work->rec;
  MvMachine *machine = mv_reconciler_lookup (rec, work->kind == WORK_FORK ? work->source_id
                                                                           : work->machine_id);
  g_autoptr (GError) error = NULL;
  g_autofree char *operation_id = machine ? g_strdup (machine->status->operation_id) : NULL;
  MvSnapshot *snapshot;

  g_task_propagate_boolean (gtask, &error);
  g_hash_table_remove (rec->snapshot_names, work->snapshot->name);
  if (machine)
    {
      mv_machine_release (machine);
      mv_reconciler_reconcile (machine);
    }
  if (work->kind == WORK_FORK)
    {
      /* The passing snapshot is the fork's source now. */
      if (!error)
        {
          fork_put_back (work, NULL);
          return;
        }
      work->define_func (NULL, FALSE, error, work->define_data);
      work_free (work);
      return;
    }
  if (error)
    {
      work->func (NULL, error, work->func_data);
      work_free (work);
      return;
    }
  snapshot = g_steal_pointer (&work->snapshot);
  mv_log_machine (G_LOG_LEVEL_MESSAGE, work->machine_id, NULL, NULL,
                  "Snapshot %s (%s, %s) of machine %s taken", snapshot->name, snapshot->id,
                  mv_snapshot_kind_to_string (snapshot->kind), snapshot->machine_name);
  snapshot_added (rec, snapshot);
  snapshot_event (rec, MV_EVENT_SNAPSHOT_TAKEN, snapshot->machine_id, snapshot->machine_name,
                  operation_id, snapshot);
  work->func (snapshot, NULL, work->func_data);
  work_free (work);
}

/* The snapshot @machine would give now, without its files; a @passing
 * one (a fork's, not kept) is named after its ID, which nothing shares. */
static Work *
take_work (MvReconciler *rec, MvMachine *machine, const char *name, gboolean passing,
           GError **error)
{
  MvRuntime *runtime = mv_reconciler_runtime_for (machine, NULL);
  g_autofree char *chosen = NULL;
  g_autofree char *id = NULL;
  MvSnapshot *snapshot;
  TakeFrom from = TAKE_STOPPED;
  Work *work;

  if (!rec->host->snapshots)
    return mv_error_set (error, MV_ERROR_UNSUPPORTED, "This host keeps no snapshots"), NULL;
  if (!mv_machine_check_not_busy (machine, error) || !take_from (machine, runtime, &from, error))
    return NULL;
  id = mv_id_new ();
  chosen = passing ? g_strdup (id)
           : name && *name ? g_strdup (name)
           : mv_snapshot_default_name (machine->config->spec->name, mv_reconciler_now (rec));
  if (!mv_name_validate ("name", chosen, error))
    return NULL;
  if (!passing && name_taken (rec, chosen))
    return mv_error_set (error, MV_ERROR_ALREADY_EXISTS,
                         "name: a snapshot called %s exists already", chosen), NULL;
  if (!passing && g_hash_table_size (rec->snapshots) + g_hash_table_size (rec->snapshot_names) >=
      MV_SNAPSHOTS_MAX)
    return mv_error_set (error, MV_ERROR_RESOURCE_EXHAUSTED, "This host keeps %d snapshots, "
                         "its limit: delete some first", MV_SNAPSHOTS_MAX), NULL;

  work = work_new (rec, WORK_CREATE, machine);
  work->from = from;
  work->snapshot = snapshot = g_new0 (MvSnapshot, 1);
  snapshot->id = g_steal_pointer (&id);
  snapshot->name = g_steal_pointer (&chosen);
  snapshot->kind = from == TAKE_STOPPED ? MV_SNAPSHOT_DISK : MV_SNAPSHOT_MEMORY;
  snapshot->machine_id = g_strdup (machine->id);
  snapshot->machine_name = g_strdup (machine->config->spec->name);
  snapshot->spec = mv_spec_copy (machine->config->spec);
  snapshot->image_config = mv_image_config_copy (machine->config->image_config);
  snapshot->hypervisor_type = g_strdup (runtime ? runtime->type
                                                : machine->config->spec->hypervisor_type);
  snapshot->hypervisor_version = g_strdup (runtime ? mv_runtimes_version (rec->host->runtimes,
                                                                          runtime) : "");
  snapshot->vcpus = mv_spec_vcpus (machine->config->spec);
  snapshot->memory_bytes = machine->config->spec->memory_bytes;
  /* A frozen guest is what it was admitted with. */
  if (from != TAKE_STOPPED && machine->status->vcpus != 0 && machine->status->memory_bytes != 0)
    {
      snapshot->vcpus = machine->status->vcpus;
      snapshot->memory_bytes = machine->status->memory_bytes;
    }
  snapshot->image_digest = g_strdup (machine->config->spec->image_digest);
  snapshot->created_at = mv_reconciler_now (rec);
  return work;
}

static gboolean
start_take (MvReconciler *rec, MvMachine *machine, Work *work, GError **error)
{
  if (!mv_machine_hold (machine, "snapshot", error))
    return FALSE;
  g_hash_table_add (rec->snapshot_names, g_strdup (work->snapshot->name));
  mv_reconciler_run_in_thread (take_in_thread, on_taken, work, NULL);
  return TRUE;
}

gboolean
mv_reconciler_create_snapshot (MvReconciler *rec, MvMachine *machine, const char *name,
                               MvSnapshotFunc func, gpointer data, GError **error)
{
  Work *work = take_work (rec, machine, name, FALSE, error);

  if (!work)
    return FALSE;
  work->keep = TRUE;
  work->func = func;
  work->func_data = data;
  if (!start_take (rec, machine, work, error))
    {
      work_free (work);
      return FALSE;
    }
  return TRUE;
}

/* ---- Snapshot.Restore ---- */

static void
put_back_in_thread (GTask *gtask, gpointer source, gpointer task_data, GCancellable *cancellable)
{
  Work *work = task_data;
  MvSnapshots *snapshots = work->rec->host->snapshots;
  g_autofree char *dir = work->staged ? g_strdup (work->staged)
                                      : snapshots->dir (snapshots, work->snapshot->id);
  GError *error = NULL;

  mv_fault_point (work->kind == WORK_FORK ? "fork" : "restore-snapshot", "recorded");
  if (!snapshots->put_back (snapshots, dir, work->machine_id,
                            work->snapshot->kind == MV_SNAPSHOT_MEMORY, work->staged != NULL,
                            &error))
    {
      g_task_return_error (gtask, error);
      return;
    }
  mv_fault_point (work->kind == WORK_FORK ? "fork" : "restore-snapshot", "done");
  g_task_return_boolean (gtask, TRUE);
}

/* The machine has the snapshot's disk, and its frozen guest if it held
 * one: it is on standby then, and wakes where the guest was. */
static void
put_back_done (MvMachine *machine, const MvSnapshot *snapshot)
{
  MvStatus *status = machine->status;
  MvStorage *storage = machine->reconciler->host->storage;

  g_clear_pointer (&status->restoring_snapshot, g_free);
  if (snapshot->kind == MV_SNAPSHOT_MEMORY)
    {
      g_free (status->saved_state);
      status->saved_state = storage->saved_state_dir (storage, machine->id);
      /* The guest wakes with the size it was frozen with. */
      status->vcpus = snapshot->vcpus;
      status->memory_bytes = snapshot->memory_bytes;
      mv_machine_set_state (machine, MV_STATE_STANDBY, NULL);
    }
  else
    mv_machine_set_state (machine, MV_STATE_STOPPED, NULL);
  status->failed_generation = 0;
}

static void
on_restored (GObject *source, GAsyncResult *result, gpointer user_data)
{
  Work *work = g_task_get_task_data (G_TASK (result));
  MvMachine *machine = mv_reconciler_lookup (work->rec, work->machine_id);
  g_autoptr (GError) error = NULL;
  g_autofree char *operation_id = NULL;

  g_task_propagate_boolean (G_TASK (result), &error);
  g_return_if_fail (machine != NULL);
  operation_id = g_strdup (machine->status->operation_id);
  if (error)
    {
      /* The disk is the snapshot's or the machine's own, whole either
       * way; what the snapshot is put back on is tried again by a
       * restore, or the machine booted as it is now. */
      g_clear_pointer (&machine->status->restoring_snapshot, g_free);
      mv_machine_set_state (machine, MV_STATE_FAILED, error->message);
      mv_machine_release (machine);
      if (work->restore_func)
        work->restore_func (NULL, error, work->restore_data);
      work_free (work);
      mv_reconciler_reconcile (machine);
      return;
    }
  put_back_done (machine, work->snapshot);
  mv_machine_release (machine);
  mv_log_machine (G_LOG_LEVEL_MESSAGE, machine->id, NULL, NULL,
                  "Machine %s restored from snapshot %s (%s)", machine->config->spec->name,
                  work->snapshot->name, work->snapshot->id);
  snapshot_event (work->rec, MV_EVENT_SNAPSHOT_RESTORED, machine->id,
                  machine->config->spec->name, operation_id, work->snapshot);
  /* A disk snapshot leaves it stopped, to boot from the disk when asked. */
  if (work->snapshot->kind == MV_SNAPSHOT_MEMORY)
    mv_reconciler_request (work->rec, machine, MV_REQUEST_START, NULL);
  else if (mv_config_set_desired (machine->config, MV_DESIRED_STOPPED,
                                  mv_reconciler_now (work->rec)))
    {
      mv_machine_save_config (machine, NULL);
      mv_machine_changed (machine, MV_PROP_DESIRED_STATE | MV_PROP_DESIRED_GENERATION);
    }
  if (work->restore_func)
    work->restore_func (machine, NULL, work->restore_data);
  work_free (work);
  mv_reconciler_kick (machine);
}

static void
start_put_back (Work *work, GAsyncReadyCallback done)
{
  mv_reconciler_run_in_thread (put_back_in_thread, done, work, NULL);
}

/* The spec the snapshot was taken with, as the machine's own: its
 * present name and ID. */
static gboolean
restore_spec (MvReconciler *rec, MvMachine *machine, const MvSnapshot *snapshot, GError **error)
{
  g_autoptr (MvSpec) spec = mv_spec_copy (snapshot->spec);
  const MvSpec *current = machine->config->spec;
  gboolean moves;
  MvConfig *previous;

  g_free (spec->name);
  spec->name = g_strdup (current->name);
  g_free (spec->id);
  spec->id = g_strdup (machine->id);
  if (!mv_reconciler_validate_spec (rec, spec, error))
    return FALSE;
  moves = current->network_name &&
          (g_strcmp0 (current->network_name, spec->network_name) != 0 ||
           g_strcmp0 (current->static_ip, spec->static_ip) != 0);
  previous = mv_config_copy (machine->config);
  if (!mv_config_update_spec (machine->config, g_steal_pointer (&spec), mv_reconciler_now (rec)))
    mv_config_free (previous);
  else if (!mv_reconciler_commit_config (machine, previous, error))
    return FALSE;
  if (moves)
    {
      g_autoptr (GError) local = NULL;

      if (!rec->host->network->forget (rec->host->network, machine->id, &local))
        mv_machine_log (machine, G_LOG_LEVEL_WARNING, "Machine %s: its old address is kept "
                        "until it starts: %s", machine->id, local->message);
    }
  mv_machine_changed (machine, MV_PROP_ALL_CONFIG);
  return TRUE;
}

static Work *
restore_work (MvReconciler *rec, MvMachine *machine, const MvSnapshot *snapshot)
{
  Work *work = work_new (rec, WORK_RESTORE, machine);

  work->snapshot = mv_snapshot_copy (snapshot);
  use_snapshot (work);
  return work;
}

gboolean
mv_reconciler_restore_snapshot (MvReconciler *rec, const char *snapshot_id,
                                MvSnapshotDoneFunc func, gpointer data, GError **error)
{
  const MvSnapshot *snapshot = mv_reconciler_lookup_snapshot (rec, snapshot_id);
  MvMachine *machine;
  MvStatus *status;
  Work *work;

  if (!snapshot)
    return mv_error_set (error, MV_ERROR_NOT_FOUND, "snapshot %s: no such snapshot", snapshot_id);
  machine = mv_reconciler_lookup (rec, snapshot->machine_id);
  if (!machine || machine->gone || machine->config->desired == MV_DESIRED_DESTROYED)
    return mv_error_set (error, MV_ERROR_NOT_FOUND, "Machine %s, which snapshot %s was taken "
                         "of, is gone: fork the snapshot instead", snapshot->machine_name,
                         snapshot->name);
  status = machine->status;
  if (!mv_machine_check_not_busy (machine, error))
    return FALSE;
  if (status->state == MV_STATE_STANDBY)
    return mv_error_set (error, MV_ERROR_INVALID_STATE, "Machine %s is on standby: a restore "
                         "would lose its frozen guest; stop it first",
                         machine->config->spec->name);
  if ((status->state != MV_STATE_STOPPED && status->state != MV_STATE_FAILED) || status->vmm)
    return mv_error_set (error, MV_ERROR_INVALID_STATE, "Machine %s is %s: stop it before it is "
                         "restored", machine->config->spec->name,
                         mv_state_to_string (status->state));
  if (!runtime_for_snapshot (rec, snapshot, error) || !restore_spec (rec, machine, snapshot, error))
    return FALSE;

  /* From here the restore is finished even across a crash (recover). */
  g_free (status->restoring_snapshot);
  status->restoring_snapshot = g_strdup (snapshot->id);
  g_clear_pointer (&status->saved_state, g_free);
  if (!mv_machine_hold (machine, "restore-snapshot", error))
    {
      g_clear_pointer (&status->restoring_snapshot, g_free);
      return FALSE;
    }
  work = restore_work (rec, machine, snapshot);
  work->restore_func = func;
  work->restore_data = data;
  start_put_back (work, on_restored);
  return TRUE;
}

/* After Recover: a restore that was interrupted is done again. */
void
mv_reconciler_finish_restore (MvMachine *machine)
{
  MvReconciler *rec = machine->reconciler;
  const MvSnapshot *snapshot = mv_reconciler_lookup_snapshot (rec,
                                                              machine->status->restoring_snapshot);
  g_autoptr (GError) error = NULL;

  if (!snapshot)
    {
      g_clear_pointer (&machine->status->restoring_snapshot, g_free);
      mv_machine_set_failed (machine, "the snapshot it was being restored from is gone");
      mv_machine_save_status (machine, NULL);
      return;
    }
  if (!mv_machine_hold (machine, "restore-snapshot", &error))
    {
      mv_machine_log (machine, G_LOG_LEVEL_WARNING, "Machine %s: the restore from snapshot %s "
                      "cannot go on: %s", machine->id, snapshot->id, error->message);
      return;
    }
  start_put_back (restore_work (rec, machine, snapshot), on_restored);
}

/* ---- forks ---- */

static void
fork_settled (MvMachine *machine, gboolean reached)
{
  MvForkWait *wait = machine->fork_wait;

  if (reached)
    {
      machine->fork_wait = NULL;
      machine->status->forking = FALSE;
      mv_machine_save_status (machine, NULL);
      wait->func (machine, FALSE, NULL, wait->data);
      g_free (wait);
      return;
    }
  /* A fork that fails leaves no machine behind; its caller hears why once
   * it is gone. */
  mv_config_set_desired (machine->config, MV_DESIRED_DESTROYED, mv_reconciler_now (machine->reconciler));
  mv_machine_save_config (machine, NULL);
  mv_machine_changed (machine, MV_PROP_DESIRED_STATE | MV_PROP_DESIRED_GENERATION);
}

/* Called by mv_machine_settled() for every machine: a fork waited on is
 * whole once its wish is reached, and goes if it cannot be. */
void
mv_reconciler_fork_settled (MvMachine *machine, const GError *failure)
{
  MvForkWait *wait = machine->fork_wait;

  if (!wait || machine->busy || machine->config->desired == MV_DESIRED_DESTROYED)
    return;
  if (failure)
    {
      wait->error = g_error_copy (failure);
      fork_settled (machine, FALSE);
      mv_reconciler_kick (machine);
      return;
    }
  fork_settled (machine, TRUE);
}

/* Called when a machine's records are gone, and when it is freed. */
void
mv_reconciler_fork_gone (MvMachine *machine)
{
  MvForkWait *wait = g_steal_pointer (&machine->fork_wait);
  g_autoptr (GError) error = NULL;

  if (!wait)
    return;
  error = wait->error ? wait->error
                      : g_error_new (MV_ERROR, MV_ERROR_UNAVAILABLE,
                                     "The fork did not finish: it was deleted, or the daemon "
                                     "is stopping");
  wait->func (NULL, FALSE, error, wait->data);
  g_free (wait);
}

/* A fork from a machine names no snapshot: the passing one is gone. */
static void
fork_event (Work *work, MvMachine *machine, const char *operation_id)
{
  const char *from = work->source_id ? work->snapshot->machine_name : work->snapshot->name;
  g_autofree char *message = g_strdup_printf ("from %s %s",
                                              work->source_id ? "machine" : "snapshot", from);
  MvEvent event = {
    .kind = MV_EVENT_FORKED,
    .machine_id = machine->id,
    .machine_name = machine->config->spec->name,
    .operation_id = (char *) operation_id,
    .message = message,
    .snapshot_id = work->source_id ? NULL : work->snapshot->id,
  };

  mv_reconciler_event (work->rec, &event);
}

static void
on_fork_put_back (GObject *source, GAsyncResult *result, gpointer user_data)
{
  Work *work = g_task_get_task_data (G_TASK (result));
  MvReconciler *rec = work->rec;
  MvMachine *machine = mv_reconciler_lookup (rec, work->machine_id);
  g_autoptr (GError) error = NULL;
  g_autofree char *operation_id = NULL;

  g_task_propagate_boolean (G_TASK (result), &error);
  if (work->staged)
    rec->host->snapshots->discard (rec->host->snapshots, work->staged);
  g_return_if_fail (machine != NULL);
  operation_id = g_strdup (machine->status->operation_id);
  mv_machine_release (machine);
  machine->fork_wait = g_new0 (MvForkWait, 1);
  machine->fork_wait->func = work->define_func;
  machine->fork_wait->data = work->define_data;
  if (error)
    {
      machine->fork_wait->error = g_steal_pointer (&error);
      fork_settled (machine, FALSE);
      work_free (work);
      mv_reconciler_kick (machine);
      return;
    }
  put_back_done (machine, work->snapshot);
  mv_machine_save_status (machine, NULL);
  mv_log_machine (G_LOG_LEVEL_MESSAGE, machine->id, NULL, NULL,
                  "Machine %s (%s) forked from %s %s", machine->config->spec->name, machine->id,
                  work->source_id ? "machine" : "snapshot",
                  work->source_id ? work->snapshot->machine_name : work->snapshot->name);
  fork_event (work, machine, operation_id);
  if (work->snapshot->kind == MV_SNAPSHOT_MEMORY)
    mv_reconciler_request (rec, machine, MV_REQUEST_START, NULL);
  work_free (work);
  mv_reconciler_kick (machine);
}

/* Whether the guest frozen with @frozen cannot run as @fork: its own
 * address, network and version pin do not count, since the agent gives it
 * the first two and the version was checked; having a NIC does. */
static gboolean
fork_shape_differs (const MvSpec *frozen, const MvSpec *fork)
{
  g_autoptr (MvSpec) as_frozen = mv_spec_copy (fork);

  if ((frozen->network_name != NULL) != (fork->network_name != NULL))
    return TRUE;
  g_free (as_frozen->network_name);
  as_frozen->network_name = g_strdup (frozen->network_name);
  g_free (as_frozen->static_ip);
  as_frozen->static_ip = g_strdup (frozen->static_ip);
  g_free (as_frozen->hypervisor_version);
  as_frozen->hypervisor_version = g_strdup (frozen->hypervisor_version);
  return mv_spec_shape_differs (frozen, as_frozen);
}

/* The fork's spec, validated, with the hypervisor version its guest
 * needs. */
static MvSpec *
fork_spec (MvReconciler *rec, const MvSnapshot *snapshot, const char *fork_json,
           MvRuntime **runtime, GError **error)
{
  g_autoptr (MvSpec) spec = mv_snapshot_fork_spec (snapshot, fork_json, error);
  MvRuntime *needed;

  if (!spec)
    return NULL;
  if (snapshot->kind == MV_SNAPSHOT_MEMORY)
    {
      if (!(needed = runtime_for_snapshot (rec, snapshot, error)))
        return NULL;
      if (g_strcmp0 (spec->hypervisor_type, snapshot->hypervisor_type) != 0)
        return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT, "hypervisor_type: a fork of a "
                             "running guest runs on %s, which froze it",
                             snapshot->hypervisor_type), NULL;
      if (spec->hypervisor_version && *spec->hypervisor_version &&
          g_strcmp0 (spec->hypervisor_version, snapshot->hypervisor_version) != 0)
        return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT, "hypervisor_version: a fork of "
                             "a running guest runs on %s %s, which froze it",
                             snapshot->hypervisor_type, snapshot->hypervisor_version), NULL;
      /* Pinned to the version only when it is not the host's default. */
      if (mv_runtimes_find (rec->host->runtimes, spec->hypervisor_type, NULL) != needed)
        {
          g_free (spec->hypervisor_version);
          spec->hypervisor_version = g_strdup (snapshot->hypervisor_version);
        }
      if (fork_shape_differs (snapshot->spec, spec))
        return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT, "spec: a fork of a running "
                             "guest keeps its shape (vCPUs, memory, disks, image and hypervisor); "
                             "fork a disk snapshot to change it"), NULL;
    }
  if (!(*runtime = mv_reconciler_validate_spec (rec, spec, error)) ||
      !mv_reconciler_check_name_free (rec, spec, error))
    return NULL;
  return g_steal_pointer (&spec);
}

/* Defines the fork's machine and puts the snapshot in @work (or, with
 * @work->staged, the passing one) back on it. */
static void
fork_put_back (Work *work, MvSnapshot *snapshot_in)
{
  MvReconciler *rec = work->rec;
  g_autoptr (GError) error = NULL;
  g_autoptr (MvSpec) spec = NULL;
  MvRuntime *runtime = NULL;
  MvMachine *machine = NULL;

  if (snapshot_in)
    work->snapshot = mv_snapshot_copy (snapshot_in);
  spec = fork_spec (rec, work->snapshot, work->fork_json, &runtime, &error);
  if (spec)
    {
      g_autofree char *fingerprint = mv_spec_fingerprint (spec);

      machine = mv_reconciler_record_machine (rec, runtime, g_steal_pointer (&spec),
                                              g_steal_pointer (&fingerprint),
                                              mv_image_config_copy (work->snapshot->image_config),
                                              FALSE, TRUE, &error);
    }
  if (error)
    {
      if (work->staged)
        rec->host->snapshots->discard (rec->host->snapshots, work->staged);
      work->define_func (NULL, FALSE, error, work->define_data);
      work_free (work);
      return;
    }
  if (!mv_machine_hold (machine, "fork", &error))
    {
      /* Nothing was put back: the machine goes at once. */
      machine->fork_wait = g_new0 (MvForkWait, 1);
      machine->fork_wait->func = work->define_func;
      machine->fork_wait->data = work->define_data;
      machine->fork_wait->error = g_steal_pointer (&error);
      if (work->staged)
        rec->host->snapshots->discard (rec->host->snapshots, work->staged);
      fork_settled (machine, FALSE);
      mv_reconciler_kick (machine);
      work_free (work);
      return;
    }
  g_free (work->machine_id);
  work->machine_id = g_strdup (machine->id);
  if (!work->staged)
    use_snapshot (work);
  start_put_back (work, on_fork_put_back);
}

void
mv_reconciler_fork_snapshot (MvReconciler *rec, const char *snapshot_id, const char *fork_json,
                             MvDefineFunc func, gpointer data)
{
  const MvSnapshot *snapshot = mv_reconciler_lookup_snapshot (rec, snapshot_id);
  Work *work;

  if (!snapshot)
    {
      g_autoptr (GError) error = g_error_new (MV_ERROR, MV_ERROR_NOT_FOUND,
                                              "snapshot %s: no such snapshot", snapshot_id);
      func (NULL, FALSE, error, data);
      return;
    }
  work = g_new0 (Work, 1);
  work->rec = rec;
  work->kind = WORK_FORK;
  work->fork_json = g_strdup (fork_json);
  work->define_func = func;
  work->define_data = data;
  fork_put_back (work, (MvSnapshot *) snapshot);
}

void
mv_reconciler_fork_machine (MvReconciler *rec, MvMachine *source, const char *fork_json,
                            MvDefineFunc func, gpointer data)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MvSpec) spec = NULL;
  MvRuntime *runtime = NULL;
  Work *work = take_work (rec, source, NULL, TRUE, &error);

  if (!work)
    {
      func (NULL, FALSE, error, data);
      return;
    }
  /* The fork's spec is checked before the source is paused. */
  spec = fork_spec (rec, work->snapshot, fork_json, &runtime, &error);
  if (!spec)
    {
      work_free (work);
      func (NULL, FALSE, error, data);
      return;
    }
  work->kind = WORK_FORK;
  work->source_id = g_strdup (source->id);
  work->fork_json = g_strdup (fork_json);
  work->define_func = func;
  work->define_data = data;
  if (!start_take (rec, source, work, &error))
    {
      work_free (work);
      func (NULL, FALSE, error, data);
    }
}

/* After Recover: a fork that was not whole goes. */
void
mv_reconciler_drop_fork (MvMachine *machine)
{
  mv_machine_log (machine, G_LOG_LEVEL_MESSAGE, "Machine %s (%s) was being forked when the "
                  "daemon stopped; it is removed", machine->config->spec->name, machine->id);
  mv_config_set_desired (machine->config, MV_DESIRED_DESTROYED,
                         mv_reconciler_now (machine->reconciler));
  mv_machine_save_config (machine, NULL);
}

/* ---- Snapshot.Delete ---- */

typedef struct {
  MvReconciler      *rec;
  MvSnapshot        *snapshot;
  MvSnapshotDoneFunc func;
  gpointer           data;
} Removal;

static void
removal_free (Removal *removal)
{
  mv_snapshot_free (removal->snapshot);
  g_free (removal);
}

static void
remove_in_thread (GTask *gtask, gpointer source, gpointer task_data, GCancellable *cancellable)
{
  Removal *removal = task_data;
  MvSnapshots *snapshots = removal->rec->host->snapshots;
  GError *error = NULL;

  if (!snapshots->remove (snapshots, removal->snapshot->id, &error))
    g_task_return_error (gtask, error);
  else
    g_task_return_boolean (gtask, TRUE);
}

static void
on_removed (GObject *source, GAsyncResult *result, gpointer user_data)
{
  Removal *removal = g_task_get_task_data (G_TASK (result));
  MvReconciler *rec = removal->rec;
  g_autoptr (GError) error = NULL;

  rec->background--;
  g_hash_table_remove (rec->snapshot_names, removal->snapshot->name);
  if (!g_task_propagate_boolean (G_TASK (result), &error))
    {
      g_warning ("Snapshot %s (%s) could not be deleted: %s", removal->snapshot->name,
                 removal->snapshot->id, error->message);
      /* Still there: shown again. */
      if (!g_error_matches (error, MV_ERROR, MV_ERROR_NOT_FOUND))
        snapshot_added (rec, g_steal_pointer (&removal->snapshot));
      removal->func (NULL, error, removal->data);
      return;
    }
  g_message ("Snapshot %s (%s) deleted", removal->snapshot->name, removal->snapshot->id);
  snapshot_event (rec, MV_EVENT_SNAPSHOT_DELETED, removal->snapshot->machine_id,
                  removal->snapshot->machine_name, NULL, removal->snapshot);
  removal->func (NULL, NULL, removal->data);
}

gboolean
mv_reconciler_delete_snapshot (MvReconciler *rec, const char *snapshot_id,
                               MvSnapshotDoneFunc func, gpointer data, GError **error)
{
  MvSnapshot *snapshot = g_hash_table_lookup (rec->snapshots, snapshot_id);
  g_autoptr (GTask) gtask = NULL;
  Removal *removal;
  char *key = NULL;

  if (!snapshot)
    return mv_error_set (error, MV_ERROR_NOT_FOUND, "snapshot %s: no such snapshot", snapshot_id);
  if (g_hash_table_contains (rec->snapshot_users, snapshot_id))
    return mv_error_set (error, MV_ERROR_INVALID_STATE, "Snapshot %s is being restored or "
                         "forked; try again once that is done", snapshot->name);
  removal = g_new0 (Removal, 1);
  removal->rec = rec;
  removal->func = func;
  removal->data = data;
  /* Told while it can still be found. */
  if (rec->observer.snapshot_removed)
    rec->observer.snapshot_removed (snapshot, rec->observer.data);
  g_hash_table_steal_extended (rec->snapshots, snapshot_id, (gpointer *) &key,
                               (gpointer *) &removal->snapshot);
  g_free (key);
  /* Its name stays taken until the files are gone. */
  g_hash_table_add (rec->snapshot_names, g_strdup (removal->snapshot->name));
  rec->background++;
  gtask = g_task_new (NULL, NULL, on_removed, NULL);
  g_task_set_task_data (gtask, removal, (GDestroyNotify) removal_free);
  g_task_run_in_thread (gtask, remove_in_thread);
  return TRUE;
}

/* Seed 002, WarnDeprecatedHypervisorVersions, for memory snapshots. */
void
mv_reconciler_warn_deprecated_snapshots (MvReconciler *rec)
{
  MvRuntimes *runtimes = rec->host->runtimes;
  g_autoptr (GPtrArray) list = mv_reconciler_list_snapshots (rec);

  for (guint i = 0; i < list->len; i++)
    {
      const MvSnapshot *snapshot = list->pdata[i];
      MvRuntime *current = mv_runtimes_find (runtimes, snapshot->hypervisor_type, NULL);

      if (snapshot->kind == MV_SNAPSHOT_MEMORY && current &&
          mv_runtimes_is_deprecated (runtimes, snapshot->hypervisor_type,
                                     snapshot->hypervisor_version))
        g_warning ("Snapshot %s (%s) holds a guest frozen by %s %s, a deprecated version; "
                   "restore or fork it before that version is removed (the host's default is %s)",
                   snapshot->name, snapshot->id, snapshot->hypervisor_type,
                   snapshot->hypervisor_version, mv_runtimes_version (runtimes, current));
    }
}
