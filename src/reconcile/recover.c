/* Recover at startup (seed 002): every machine whose records say a VMM may
 * run, or an operation was under way, is looked at in a worker thread,
 * many at once; the others are settled from their records alone. What the
 * host calls find is applied on the main thread. */
#include "reconciler-private.h"
#include "util/log.h"
#include "core/restart.h"

typedef enum {
  RECOVER_NOTHING,            /* the records say it all */
  RECOVER_DESTROY,            /* the destroy resumes from status.destroyed */
  RECOVER_START,              /* a start or restore was interrupted */
  RECOVER_STOP,               /* a stop was interrupted */
  RECOVER_STANDBY,            /* a standby was interrupted */
  RECOVER_ADOPT,              /* running or paused: adopt the VMM if it is there */
  RECOVER_RESUME,             /* running, paused for a snapshot: adopt and resume it */
} RecoverCase;

typedef struct {
  MvReconciler *rec;
  char         *machine_id;
  RecoverCase   what;
  MvRuntime    *runtime;
  char         *runtime_dir;
  MvSpec       *spec;
  JsonObject   *vmm;
  gboolean      waking;          /* START: the machine's own frozen guest was being woken */
  /* Found in the worker. */
  MvVmmState    probed;
  gboolean      has_saved;
  char         *kill_error;
} RecoverTask;

static void
recover_task_free (RecoverTask *task)
{
  g_free (task->machine_id);
  g_free (task->runtime_dir);
  mv_spec_free (task->spec);
  g_clear_pointer (&task->vmm, json_object_unref);
  g_free (task->kill_error);
  g_free (task);
}

static RecoverCase
recover_case (const MvConfig *config, const MvStatus *status)
{
  const char *phase = status->phase;

  if (config->desired == MV_DESIRED_DESTROYED || (phase && g_str_has_prefix (phase, "destroy-")))
    return RECOVER_DESTROY;
  if (g_strcmp0 (phase, "start") == 0 || g_strcmp0 (phase, "restore") == 0 ||
      status->state == MV_STATE_STARTING)
    return RECOVER_START;
  if (g_strcmp0 (phase, "stop") == 0 || g_strcmp0 (phase, "force-stop") == 0 ||
      status->state == MV_STATE_STOPPING)
    return RECOVER_STOP;
  if (g_strcmp0 (phase, "standby") == 0)
    return RECOVER_STANDBY;
  if (g_strcmp0 (phase, "snapshot") == 0 && status->state == MV_STATE_RUNNING)
    return RECOVER_RESUME;
  if (status->state == MV_STATE_RUNNING || status->state == MV_STATE_PAUSED)
    return RECOVER_ADOPT;
  return RECOVER_NOTHING;
}

/* Ends whatever an interrupted step may have left serving, recorded or
 * not; the runtime checks each process's identity before it signals. */
static void
kill_leftovers (RecoverTask *task, const MvRuntimeRequest *req)
{
  g_autoptr (GError) error = NULL;

  if (task->runtime && !task->runtime->stop (task->runtime, req, TRUE, &error))
    task->kill_error = g_strdup (error->message);
}

static MvVmmState
probe (RecoverTask *task, const MvRuntimeRequest *req)
{
  return task->runtime && task->vmm ? task->runtime->probe (task->runtime, req) : MV_VMM_GONE;
}

static void
recover_in_thread (GTask *gtask, gpointer source, gpointer task_data, GCancellable *cancellable)
{
  RecoverTask *task = task_data;
  MvStorage *storage = task->rec->host->storage;
  MvRuntimeRequest req = {
    .machine_id = task->machine_id,
    .spec = task->spec,
    .runtime_dir = task->runtime_dir,
    .vmm = task->vmm,
  };

  switch (task->what)
    {
    case RECOVER_START:
      kill_leftovers (task, &req);
      /* A frozen guest beside a start that was no wake is a warm
       * template's, put back for it: it is no guest of this machine's. */
      if (!task->waking)
        storage->discard_saved_state (storage, task->machine_id, NULL);
      break;
    case RECOVER_STOP:
      kill_leftovers (task, &req);
      storage->discard_saved_state (storage, task->machine_id, NULL);
      break;
    case RECOVER_STANDBY:
    case RECOVER_ADOPT:
      task->probed = probe (task, &req);
      /* A frozen guest beside a running VMM is stale; one without a VMM is
       * whole only if it made it to its final name. */
      if (task->probed != MV_VMM_GONE)
        storage->discard_saved_state (storage, task->machine_id, NULL);
      else if (task->what == RECOVER_STANDBY && !storage->has_saved_state (storage, task->machine_id))
        storage->discard_saved_state (storage, task->machine_id, NULL);
      break;
    case RECOVER_RESUME:
      /* A snapshot was being taken of it: it runs on as it did. */
      task->probed = probe (task, &req);
      if (task->probed == MV_VMM_PAUSED && task->runtime->resume (task->runtime, &req, NULL))
        task->probed = MV_VMM_RUNNING;
      break;
    case RECOVER_NOTHING:
    case RECOVER_DESTROY:
      break;
    }
  task->has_saved = storage->has_saved_state (storage, task->machine_id);
  g_task_return_boolean (gtask, TRUE);
}

static void
adopt (MvMachine *machine, RecoverTask *task)
{
  MvStatus *status = machine->status;

  g_clear_pointer (&status->saved_state, g_free);
  mv_machine_set_state (machine, task->probed == MV_VMM_PAUSED ? MV_STATE_PAUSED
                                                                : MV_STATE_RUNNING, NULL);
  mv_reconciler_watch_vmm (machine, task->runtime);
}

/* Returns why the guest ended while nobody watched, or NULL. */
static const char *
apply (MvMachine *machine, RecoverTask *task)
{
  MvStatus *status = machine->status;
  MvConfig *config = machine->config;
  MvStorage *storage = machine->reconciler->host->storage;

  if (task->kill_error)
    mv_machine_log (machine, G_LOG_LEVEL_WARNING,
                    "Machine %s: could not end what an interrupted operation left: %s",
                    machine->id, task->kill_error);
  switch (task->what)
    {
    case RECOVER_START:
      /* A VMM this start may have left was never recorded: it is gone now.
       * A frozen guest is kept for the next try. */
      mv_machine_clear_vmm (machine);
      if (status->saved_state && task->has_saved)
        mv_machine_set_state (machine, MV_STATE_STANDBY, "interrupted while waking from standby");
      else
        mv_machine_set_failed (machine, "interrupted while starting");
      break;
    case RECOVER_STOP:
      mv_machine_clear_vmm (machine);
      g_clear_pointer (&status->saved_state, g_free);
      /* What was asked is what was being done: finish it. A restart
       * stops first, then boots afresh. */
      if (config->desired == MV_DESIRED_STOPPED ||
          status->observed_restart_generation < config->restart_generation)
        mv_machine_set_state (machine, MV_STATE_STOPPED, NULL);
      else
        mv_machine_set_failed (machine, "interrupted while stopping");
      break;
    case RECOVER_STANDBY:
      if (task->probed != MV_VMM_GONE)
        {
          adopt (machine, task);
          break;
        }
      mv_machine_clear_vmm (machine);
      if (task->has_saved)
        {
          g_free (status->saved_state);
          status->saved_state = storage->saved_state_dir (storage, machine->id);
          mv_machine_set_state (machine, MV_STATE_STANDBY, NULL);
        }
      else
        mv_machine_set_failed (machine, "interrupted while going on standby; the guest was lost");
      break;
    case RECOVER_ADOPT:
    case RECOVER_RESUME:
      if (task->probed != MV_VMM_GONE)
        adopt (machine, task);
      else
        return "the VMM ended while the daemon was not running";
      break;
    case RECOVER_NOTHING:
    case RECOVER_DESTROY:
      break;
    }
  return NULL;
}

static void recovered_one (MvReconciler *rec);

/* Written only if recovery changed it: a start with many records reads
 * them all but writes none of them. */
static void
finish (MvMachine *machine, JsonNode *before, RecoverTask *task)
{
  const char *ended = apply (machine, task);
  g_autoptr (JsonNode) after = NULL;

  after = mv_status_to_node (machine->status);
  if (!json_node_equal (before, after))
    mv_machine_save_status (machine, NULL);
  if (ended)
    mv_reconciler_handle_end (machine, FALSE, 0, ended);
}

static void
on_recovered (GObject *source, GAsyncResult *result, gpointer user_data)
{
  RecoverTask *task = g_task_get_task_data (G_TASK (result));
  JsonNode *before = user_data;
  MvMachine *machine = mv_reconciler_lookup (task->rec, task->machine_id);
  MvReconciler *rec = task->rec;

  machine->busy = FALSE;
  finish (machine, before, task);
  json_node_unref (before);
  recovered_one (rec);
}

/* Seed 002, WarnDeprecatedHypervisorVersions: once after Recover, a
 * warning for each machine that names a deprecated hypervisor version or
 * whose guest runs on one, so that it can be moved off it in time. */
static void
warn_deprecated_versions (MvReconciler *rec)
{
  MvRuntimes *runtimes = rec->host->runtimes;
  g_autoptr (GPtrArray) machines = mv_reconciler_list (rec);

  for (guint i = 0; i < machines->len; i++)
    {
      MvMachine *machine = machines->pdata[i];
      const MvSpec *spec = machine->config->spec;
      JsonObject *vmm = machine->status->vmm;
      const char *running = vmm ? json_object_get_string_member_with_default (vmm, "version", NULL)
                                : NULL;
      const char *version =
        mv_runtimes_is_deprecated (runtimes, spec->hypervisor_type, spec->hypervisor_version)
          ? spec->hypervisor_version
          : mv_runtimes_is_deprecated (runtimes, spec->hypervisor_type, running) ? running : NULL;
      MvRuntime *current = mv_runtimes_find (runtimes, spec->hypervisor_type, NULL);

      if (version && current)
        mv_machine_log (machine, G_LOG_LEVEL_WARNING,
                        "Machine %s (%s) uses %s %s, a deprecated version; move it to %s "
                        "before that version is removed", spec->name, machine->id,
                        spec->hypervisor_type, version, mv_runtimes_version (runtimes, current));
    }
}

static void
start_on_boot (MvMachine *machine)
{
  MvConfig *config = machine->config;
  MvState state = machine->status->state;
  gint64 now = mv_reconciler_now (machine->reconciler);

  if ((state != MV_STATE_STOPPED && state != MV_STATE_FAILED) ||
      config->desired == MV_DESIRED_DESTROYED ||
      !mv_restart_starts_on_boot (config->spec, config->stopped_by_user))
    return;
  mv_machine_log (machine, G_LOG_LEVEL_MESSAGE,
                  "Machine %s (%s): started on boot, as its restart policy %s says",
                  config->spec->name, machine->id,
                  mv_restart_mode_to_string (config->spec->restart_mode));
  if (!mv_config_set_desired (config, MV_DESIRED_RUNNING, now))
    mv_config_retry (config, now);
  mv_machine_save_config (machine, NULL);
}

/* Networks.Reconcile: TAPs, ports, rules and addresses of machines that
 * no longer exist go, and the TAPs, ports and rules of those that neither
 * run nor sleep. */
typedef struct {
  MvNetwork  *network;
  GHashTable *defined;
  GHashTable *holding;          /* id → MvNetworkHolder*, its spec a copy */
} NetworkSweep;

static void
network_holder_free (MvNetworkHolder *holder)
{
  mv_spec_free ((MvSpec *) holder->spec);
  g_free (holder);
}

static void
network_sweep_free (NetworkSweep *sweep)
{
  g_hash_table_unref (sweep->defined);
  g_hash_table_unref (sweep->holding);
  g_free (sweep);
}

static void
sweep_networks_in_thread (GTask *gtask, gpointer source, gpointer task_data,
                          GCancellable *cancellable)
{
  NetworkSweep *sweep = task_data;
  g_autoptr (GError) error = NULL;

  if (!sweep->network->reconcile (sweep->network, sweep->defined, sweep->holding, &error))
    g_warning ("Networks: could not give back what gone or stopped machines held: %s",
               error->message);
  g_task_return_boolean (gtask, TRUE);
}

static void finish_recovery (MvReconciler *rec);

static void
on_networks_swept (GObject *source, GAsyncResult *result, gpointer user_data)
{
  MvReconciler *rec = user_data;

  rec->background--;
  finish_recovery (rec);
}

static void
sweep_networks (MvReconciler *rec)
{
  g_autoptr (GPtrArray) machines = mv_reconciler_all (rec);
  NetworkSweep *sweep = g_new0 (NetworkSweep, 1);
  GHashTableIter iter;
  gpointer id;

  sweep->network = rec->host->network;
  sweep->defined = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  sweep->holding = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
                                          (GDestroyNotify) network_holder_free);
  g_hash_table_iter_init (&iter, rec->invalid_ids);
  while (g_hash_table_iter_next (&iter, &id, NULL))
    g_hash_table_add (sweep->defined, g_strdup (id));
  for (guint i = 0; i < machines->len; i++)
    {
      MvMachine *machine = machines->pdata[i];

      if (machine->gone)
        continue;
      g_hash_table_add (sweep->defined, g_strdup (machine->id));
      if (mv_state_holds_reservations (machine->status->state) &&
          machine->config->spec->network_name)
        {
          MvNetworkHolder *holder = g_new0 (MvNetworkHolder, 1);

          holder->spec = mv_spec_copy (machine->config->spec);
          holder->sleeping = machine->status->state == MV_STATE_STANDBY;
          g_hash_table_insert (sweep->holding, g_strdup (machine->id), holder);
        }
    }
  g_autoptr (GTask) gtask = g_task_new (NULL, NULL, on_networks_swept, rec);
  rec->background++;
  g_task_set_task_data (gtask, sweep, (GDestroyNotify) network_sweep_free);
  g_task_run_in_thread (gtask, sweep_networks_in_thread);
}

static void
recovered_one (MvReconciler *rec)
{
  g_return_if_fail (rec->recovering > 0);
  if (--rec->recovering > 0)
    return;
  if (rec->host->network)
    sweep_networks (rec);
  else
    finish_recovery (rec);
}

static void
finish_recovery (MvReconciler *rec)
{
  g_autoptr (GPtrArray) machines = NULL;

  warn_deprecated_versions (rec);
  mv_reconciler_warn_deprecated_snapshots (rec);
  machines = mv_reconciler_list (rec);
  /* A fork not yet whole goes; a restore from a snapshot is done again. */
  for (guint i = 0; i < machines->len; i++)
    {
      MvMachine *machine = machines->pdata[i];

      if (machine->status->forking && machine->config->desired != MV_DESIRED_DESTROYED)
        mv_reconciler_drop_fork (machine);
      else if (machine->status->restoring_snapshot)
        mv_reconciler_finish_restore (machine);
    }
  /* StartOnBoot runs once every machine is recovered. */
  for (guint i = 0; i < machines->len; i++)
    start_on_boot (machines->pdata[i]);
  if (rec->recovered)
    rec->recovered (rec->recovered_data);
}

void
mv_reconciler_recover (MvReconciler *rec, void (*done) (gpointer data), gpointer data)
{
  g_autoptr (GPtrArray) machines = mv_reconciler_all (rec);
  char **ids = g_new0 (char *, machines->len + 1);
  guint n_ids = 0;

  rec->recovered = done;
  rec->recovered_data = data;
  /* One for the loop itself, so that @done runs once, after it. */
  rec->recovering = 1;

  for (guint i = 0; i < machines->len; i++)
    {
      MvMachine *machine = machines->pdata[i];
      MvStatus *status = machine->status;
      MvRecords *records = rec->host->records;
      RecoverCase what = recover_case (machine->config, status);
      gboolean interrupted = status->phase != NULL || status->operation_id != NULL;
      gboolean ask_host = what != RECOVER_NOTHING && what != RECOVER_DESTROY;
      JsonNode *before = NULL;
      RecoverTask *task;

      if (machine->other_files)
        ids[n_ids++] = g_strdup (machine->id);
      if (status->phase)
        mv_machine_log (machine, G_LOG_LEVEL_MESSAGE, "Machine %s (%s): found operation %s interrupted",
                        machine->config->spec->name, machine->id, status->phase);
      /* With nothing to ask of the host, only the step found interrupted
       * changes the record; ten thousand records, and no VMM among them,
       * are checked without a write or a copy. */
      if (ask_host)
        before = mv_status_to_node (status);
      g_clear_pointer (&status->phase, g_free);
      g_clear_pointer (&status->operation_id, g_free);
      if (!ask_host)
        {
          if (status->state == MV_STATE_RESTARTING)
            mv_reconciler_schedule_restart (machine);
          if (interrupted)
            mv_machine_save_status (machine, NULL);
          continue;
        }

      task = g_new0 (RecoverTask, 1);
      task->rec = rec;
      task->machine_id = g_strdup (machine->id);
      task->what = what;
      task->runtime = mv_reconciler_runtime_for (machine, NULL);
      task->runtime_dir = records->runtime_dir (records, machine->id);
      task->spec = mv_spec_copy (machine->config->spec);
      task->vmm = status->vmm ? mv_reconciler_copy_vmm (status->vmm) : NULL;
      task->waking = status->saved_state != NULL;
      machine->busy = TRUE;
      rec->recovering++;
      g_autoptr (GTask) gtask = g_task_new (NULL, NULL, on_recovered, before);
      g_task_set_task_data (gtask, task, (GDestroyNotify) recover_task_free);
      g_task_run_in_thread (gtask, recover_in_thread);
    }
  /* What a crash left of retired frozen guests goes, off the main loop. */
  if (n_ids > 0)
    mv_reconciler_sweep_later (rec, ids);
  else
    g_free (ids);
  recovered_one (rec);
}
