/* Steps: one host call for a machine, taken in a worker thread. The phase
 * and a fresh operation ID are written before it, so that a crash leaves
 * enough to finish or undo it (recover.c); a step whose phase cannot be
 * written is not taken. What came of it is recorded on the main thread,
 * and the machine is looked at again. */
#include "reconciler-private.h"
#include "core/errors.h"
#include "core/json-util.h"
#include "core/plan.h"
#include "util/fault.h"

typedef MvStepTask StepTask;

struct _MvStepTask {
  MvReconciler *rec;
  char         *machine_id;
  MvRuntime    *runtime;         /* NULL only for a destroy of a type gone from the host */
  MvStep        step;
  char         *phase;           /* as recorded; also names the fault points */
  char         *operation_id;    /* as recorded: what its event names */
  char         *runtime_dir;
  MvSpec       *spec;            /* copies: nothing here is shared with the main thread */
  MvImageConfig *image_config;
  JsonObject   *vmm;
  GCancellable *cancellable;
  gboolean      restore;         /* START: from the saved guest */
  gboolean      first_start;     /* START: the machine has never run: its disk is as made */
  gboolean      restarting;      /* START: by the restart policy */
  const MvHostResource *resource; /* DESTROY: the one resource this step releases */
  guint64       generation;      /* the desired generation the step works towards */
  MvStatus     *before;          /* the status before the phase was recorded, until it is */
  gboolean      not_taken;       /* the phase could not be recorded: the step was not taken */
  gint64        started_at;      /* µs, the reconciler's monotonic clock */
  /* Results, read on the main thread once the task is done. */
  JsonObject   *started_vmm;     /* START */
  MvNetworkAttachment *attachment; /* START: the interface the guest was given */
  MvVmmState    probed;          /* STANDBY that failed: what the VMM does now */
  gboolean      warm;            /* START: from a warm template */
  char         *warm_key;        /* START: its machine's key, NULL if it has none */
  gboolean      warm_missing;    /* START: no template had that key */
  gint64        finished_real;   /* START: when it was done, the reconciler's clock */
  /* START: its outcome, recorded by the worker ahead of the main thread
   * (record_started_ahead), from what the config said as it was begun. */
  MvRecordAhead *ahead;
  guint64       restart_generation;
  gboolean      reaches_desired; /* running is what is desired */
  /* START planned with the machine's create: what it was admitted with,
   * held by the reconciler until the machine joins (mv_reconciler_plan_first_start). */
  MvResources   admitted;
  gboolean      joining;
};

/* Steps, in a worker thread ---------------------------------------------------- */

/* A copy that shares nothing with @object: the worker gets its own. */
JsonObject *
mv_reconciler_copy_vmm (JsonObject *object)
{
  g_autoptr (JsonNode) node = json_node_init_object (json_node_alloc (), object);
  g_autoptr (JsonNode) copy = mv_json_deep_copy (node);

  return json_object_ref (json_node_get_object (copy));
}

static void step_task_free (StepTask *task);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (StepTask, step_task_free)

static void
step_task_free (StepTask *task)
{
  if (task->joining)
    mv_reconciler_release_first_start (task->rec, &task->admitted);
  g_free (task->machine_id);
  g_free (task->phase);
  g_free (task->operation_id);
  g_free (task->runtime_dir);
  g_free (task->warm_key);
  mv_spec_free (task->spec);
  mv_image_config_free (task->image_config);
  g_clear_pointer (&task->vmm, json_object_unref);
  g_clear_pointer (&task->started_vmm, json_object_unref);
  g_clear_pointer (&task->attachment, mv_network_attachment_free);
  g_clear_object (&task->cancellable);
  mv_status_free (task->before);
  mv_record_ahead_free (task->ahead);
  g_free (task);
}

/* Freezes the guest into a staged directory, then makes it the machine's
 * frozen guest in one rename. If that fails, what the VMM does now is
 * asked here too: the VMM may be slow to answer. */
static gboolean
standby_in_thread (StepTask *task, const MvRuntimeRequest *req_in, GError **error)
{
  MvStorage *storage = task->rec->host->storage;
  MvNetwork *net = task->rec->host->network;
  MvRuntime *rt = task->runtime;
  g_autofree char *staged = NULL;
  g_autoptr (MvNetworkAttachment) held = NULL;
  g_autoptr (GPtrArray) blocks = NULL;
  MvRuntimeRequest request = *req_in;
  const MvRuntimeRequest *req = &request;

  /* What is frozen records the interface and the disks the VMM was
   * given. */
  if (task->spec->network_name && net)
    request.network = held = net->held (net, req_in);
  if (storage->prepare_disks && !(blocks = storage->prepare_disks (storage, req_in, error)))
    {
      task->probed = rt->probe (rt, req);
      return FALSE;
    }
  request.blocks = blocks;

  if (!rt->save)
    g_set_error (error, MV_ERROR, MV_ERROR_UNSUPPORTED,
                 "The %s hypervisor cannot freeze a guest to disk", rt->type);
  else if ((staged = storage->stage_saved_state (storage, task->machine_id, error)) &&
           rt->save (rt, req, staged, error) &&
           storage->commit_saved_state (storage, task->machine_id, error))
    {
      MvNetwork *network = task->rec->host->network;
      g_autoptr (GError) local = NULL;

      /* Traffic to it wakes it. If that cannot be arranged the guest is
       * still frozen, and a Start wakes it. */
      if (task->spec->network_name && network && !network->sleep (network, req, &local))
        g_warning ("Machine %s is on standby, but traffic will not wake it: %s",
                   task->machine_id, local->message);
      return TRUE;
    }

  if (staged)
    storage->discard_saved_state (storage, task->machine_id, NULL);
  task->probed = rt->probe (rt, req);
  return FALSE;
}

/* Starts the guest from the warm template its key names, where the spec
 * lets it and one matches: TRUE with task->started_vmm set, or TRUE with
 * it NULL (boot it), or FALSE with @error (start_mode warm and none can
 * be had, or the template did not wake where it had to). */
static gboolean
start_warm (StepTask *task, MvRuntimeRequest *req, GError **error)
{
  const MvHost *host = task->rec->host;
  MvRuntime *rt = task->runtime;
  gboolean must = task->spec->start_mode == MV_START_MODE_WARM;
  g_autofree char *dir = NULL, *saved = NULL;
  g_autoptr (GError) local = NULL;

  if (task->spec->start_mode == MV_START_MODE_COLD)
    return TRUE;
  if (!host->warm)
    return !must || mv_error_set (error, MV_ERROR_UNSUPPORTED,
                                  "start_mode: this host keeps no warm templates");
  task->warm_key = mv_reconciler_warm_key (rt, req, &local);
  if (!task->warm_key)
    {
      if (!must)
        return TRUE;
      g_propagate_prefixed_error (error, g_steal_pointer (&local), "start_mode: warm: ");
      return FALSE;
    }
  dir = host->warm->dir (host->warm, task->warm_key);
  /* A template is whole once it has its name: never one half built. */
  if (!g_file_test (dir, G_FILE_TEST_IS_DIR))
    {
      task->warm_missing = TRUE;
      return !must || mv_error_set (error, MV_ERROR_NOT_FOUND, "start_mode: warm, and no warm "
                                    "template matches this machine (key %s)", task->warm_key);
    }
  /* What the machine's own disk holds is its own: only a disk as made
   * gives way to the template's. */
  if (!task->first_start)
    return !must || mv_error_set (error, MV_ERROR_INVALID_STATE, "start_mode: warm, but the "
                                  "machine has run before: only its first start can be warm");
  mv_fault_point (task->phase, "warm-found");
  /* The template's disk becomes the machine's own. Its frozen guest is
   * read where it is, as the VMM restores it: a VMM only reads what it
   * restores (QEMU is handed the file open for reading), and a template
   * goes only with its image, which a machine starting from it holds. */
  if (!host->warm->put_back (host->warm, dir, task->machine_id, FALSE, FALSE, error))
    return FALSE;
  mv_fault_point (task->phase, "warm-put-back");
  saved = host->warm->state_dir (host->warm, dir);
  req->from_template = TRUE;
  task->started_vmm = rt->restore (rt, req, saved, &local);
  req->from_template = FALSE;
  if (task->started_vmm)
    {
      task->warm = TRUE;
      return TRUE;
    }
  if (must)
    {
      g_propagate_prefixed_error (error, g_steal_pointer (&local), "start_mode: warm: ");
      return FALSE;
    }
  g_warning ("Machine %s: its warm template %s did not wake (%s); booting it", task->machine_id,
             task->warm_key, local->message);
  return TRUE;
}

static gboolean
start_in_thread (StepTask *task, const MvRuntimeRequest *req_in, GError **error)
{
  const MvHost *host = task->rec->host;
  MvStorage *storage = host->storage;
  MvRuntime *rt = task->runtime;
  g_autofree char *saved = NULL;
  g_autoptr (GPtrArray) blocks = NULL;
  g_autoptr (MvNetworkAttachment) attachment = NULL;
  MvRuntimeRequest request = *req_in;
  const MvRuntimeRequest *req = &request;

  if (!host->records->make_runtime_dir (host->records, task->machine_id,
                                        &request.runtime_dir_new, error))
    return FALSE;
  /* The disks first: the image it is pinned to, its overlay disk. */
  if (storage->prepare_disks)
    {
      blocks = storage->prepare_disks (storage, req_in, error);
      if (!blocks)
        return FALSE;
      request.blocks = blocks;
    }
  else if (task->spec->image)
    return mv_error_set (error, MV_ERROR_UNSUPPORTED, "image: this host boots no images");
  mv_fault_point (task->phase, "disks");
  /* Then its place on its network: the VMM is handed the TAP. */
  if (task->spec->network_name)
    {
      if (!host->network)
        return mv_error_set (error, MV_ERROR_UNSUPPORTED,
                             "network_name: this host has no networks");
      request.host_limits_network = !rt->limits_network;
      attachment = host->network->attach (host->network, &request, error);
      if (!attachment)
        return FALSE;
      request.network = attachment;
      mv_fault_point (task->phase, "network");
    }
  if (!task->restore)
    {
      if (start_warm (task, &request, error) && !task->started_vmm)
        task->started_vmm = rt->start (rt, req, error);
    }
  else if (!rt->restore)
    g_set_error (error, MV_ERROR, MV_ERROR_UNSUPPORTED,
                 "The %s hypervisor cannot restore a frozen guest", rt->type);
  else
    {
      saved = host->storage->saved_state_dir (host->storage, task->machine_id);
      task->started_vmm = rt->restore (rt, req, saved, error);
    }
  /* A guest that did not come up gives its TAP back; a frozen one that
   * did not wake keeps it, as it keeps its ports. */
  if (!task->started_vmm && attachment && !task->restore)
    host->network->detach (host->network, req_in, NULL);
  task->attachment = g_steal_pointer (&attachment);
  return task->started_vmm != NULL;
}

/* A stopped machine boots afresh next time: what was frozen goes, and
 * its TAP, ports and rules with it; it keeps its address. */
static gboolean
stop_in_thread (StepTask *task, const MvRuntimeRequest *req, GError **error)
{
  const MvHost *host = task->rec->host;
  MvRuntime *rt = task->runtime;

  return rt->stop (rt, req, task->step == MV_STEP_FORCE_STOP, error) &&
         host->storage->discard_saved_state (host->storage, task->machine_id, error) &&
         (!task->spec->network_name || !host->network ||
          host->network->detach (host->network, req, error));
}

/* What a start that succeeded makes of @status, whoever records it:
 * step_succeeded() on the main thread, record_started_ahead() before it.
 * Takes @vmm. */
static void
apply_started (MvStatus *status, const StepTask *task, JsonObject *vmm,
               guint64 restart_generation)
{
  g_clear_pointer (&status->vmm, json_object_unref);
  status->vmm = vmm;
  status->started_at = task->finished_real;
  g_free (status->started_from);
  status->started_from = g_strdup (task->restore ? MV_STARTED_SAVED_STATE
                                   : task->warm  ? MV_STARTED_WARM
                                                 : MV_STARTED_COLD);
  if (task->warm)
    {
      g_free (status->warm_template);
      status->warm_template = g_strdup (task->warm_key);
    }
  status->has_exit_code = FALSE;
  status->observed_restart_generation = restart_generation;
  status->next_restart_at = 0;
  /* The guest runs on from it: the saved state is stale now. */
  if (task->restore)
    g_clear_pointer (&status->saved_state, g_free);
}

/* The start's outcome, recorded here rather than after a trip to the main
 * thread and back to a worker: the main thread makes the same of it
 * (on_step_done), and writes it again only if what it made differs. */
static void
record_started_ahead (StepTask *task)
{
  MvStatus *after = mv_record_ahead_base (task->ahead);

  if (!after)
    return;
  apply_started (after, task, mv_json_object_deep_copy (task->started_vmm),
                 task->restart_generation);
  g_clear_pointer (&after->phase, g_free);
  g_clear_pointer (&after->operation_id, g_free);
  after->state = MV_STATE_RUNNING;
  g_clear_pointer (&after->state_error, g_free);
  if (task->reaches_desired)
    after->observed_generation = task->generation;
  mv_record_ahead_write (task->ahead, after);
}

static void
run_step_in_thread (GTask *gtask, gpointer source, gpointer task_data, GCancellable *cancellable)
{
  StepTask *task = task_data;
  const MvHost *host = task->rec->host;
  MvRuntime *rt = task->runtime;
  MvRuntimeRequest req = {
    .machine_id = task->machine_id,
    .spec = task->spec,
    .runtime_dir = task->runtime_dir,
    .vmm = task->vmm,
    .cancellable = task->cancellable,
    .image_config = task->image_config,
  };
  GError *error = NULL;
  gboolean ok = FALSE;

  mv_fault_point (task->phase, "recorded");

  switch (task->step)
    {
    case MV_STEP_START:
      ok = start_in_thread (task, &req, &error);
      break;
    case MV_STEP_STOP:
    case MV_STEP_FORCE_STOP:
      ok = stop_in_thread (task, &req, &error);
      break;
    case MV_STEP_PAUSE:
      ok = rt->pause (rt, &req, &error);
      break;
    case MV_STEP_RESUME:
      ok = rt->resume (rt, &req, &error);
      break;
    case MV_STEP_STANDBY:
      ok = standby_in_thread (task, &req, &error);
      break;
    case MV_STEP_DESTROY:
      ok = task->resource->release (host, rt, &req, &error);
      break;
    case MV_STEP_NONE:
      ok = TRUE;
      break;
    }

  if (!ok)
    {
      g_task_return_error (gtask, error);
      return;
    }
  mv_fault_point (task->phase, "done");
  if (task->step == MV_STEP_START)
    {
      task->finished_real = mv_reconciler_now (task->rec);
      if (task->ahead)
        record_started_ahead (task);
    }
  g_task_return_boolean (gtask, TRUE);
}

/* Back on the main thread ------------------------------------------------------ */

/* What is left to do once the step's result is on disk. */
typedef struct {
  StepTask *task;
  GError   *reported;    /* the failure to answer with; NULL if it succeeded */
  gboolean  retire;      /* the saved state goes now that the status no longer names it */
  gboolean  started;     /* a start: told of (told_started) once its write is under way */
} StepResult;

static void
step_result_free (StepResult *result)
{
  step_task_free (result->task);
  g_clear_error (&result->reported);
  g_free (result);
}

static void
step_failed (MvMachine *machine, StepTask *task, GError *error, StepResult *result)
{
  MvStatus *status = machine->status;

  if (error->domain == MV_ERROR)
    result->reported = g_error_copy (error);
  else
    result->reported = g_error_new (MV_ERROR, MV_ERROR_FAILED, "%s", error->message);

  mv_machine_event (machine, MV_EVENT_FAILED, task->operation_id, error->message);
  if (task->step == MV_STEP_START)
    mv_machine_clear_vmm (machine);
  if (task->step == MV_STEP_START && task->restore)
    {
      /* A restore failure keeps the saved guest, to be tried again. */
      status->failed_generation = task->generation;
      mv_machine_set_state (machine, MV_STATE_STANDBY, error->message);
    }
  else if (task->step == MV_STEP_STANDBY)
    {
      /* Nothing was frozen; the guest runs on if its VMM still does. */
      status->failed_generation = task->generation;
      if (task->probed == MV_VMM_GONE)
        {
          mv_reconciler_unwatch_vmm (machine);
          mv_machine_clear_vmm (machine);
          mv_machine_set_state (machine, MV_STATE_FAILED, error->message);
        }
      else
        mv_machine_set_state (machine,
                              task->probed == MV_VMM_PAUSED ? MV_STATE_PAUSED : MV_STATE_RUNNING,
                              error->message);
    }
  else
    {
      /* The failure is that of the wish the step worked for; one made
       * since (a Delete, say) is tried next. */
      mv_machine_set_state (machine, MV_STATE_FAILED, error->message);
      status->failed_generation = task->generation;
    }
}

/* The desired generation, reached, becomes the observed one; TRUE if
 * that changed the status, which the caller writes. */
static gboolean
observe_desired (MvMachine *machine)
{
  guint64 desired = machine->config->desired_generation;

  if (machine->status->observed_generation == desired)
    return FALSE;
  machine->status->observed_generation = desired;
  mv_machine_changed (machine, MV_PROP_OBSERVED_GENERATION);
  return TRUE;
}

/* Returns FALSE if the machine is gone (freed) once its records are. */
static gboolean
step_succeeded (MvMachine *machine, StepTask *task, StepResult *result)
{
  MvReconciler *rec = machine->reconciler;
  MvStatus *status = machine->status;

  switch (task->step)
    {
    case MV_STEP_START:
      apply_started (status, task, g_steal_pointer (&task->started_vmm),
                     machine->config->restart_generation);
      mv_machine_changed (machine, MV_PROP_STARTED_AT | MV_PROP_EXIT_CODE);
      /* The saved state goes once the status no longer names it, off the
       * main loop. */
      result->retire = task->restore;
      mv_machine_set_state (machine, MV_STATE_RUNNING, NULL);
      g_free (machine->run_operation_id);
      machine->run_operation_id = g_strdup (task->operation_id);
      result->started = TRUE;
      break;
    case MV_STEP_STOP:
    case MV_STEP_FORCE_STOP:
      mv_reconciler_unwatch_vmm (machine);
      mv_machine_clear_vmm (machine);
      g_clear_pointer (&status->saved_state, g_free);
      mv_machine_set_state (machine, MV_STATE_STOPPED, NULL);
      machine->stopped_now = TRUE;
      mv_machine_event (machine, MV_EVENT_STOPPED, task->operation_id,
                        task->step == MV_STEP_FORCE_STOP ? "forced" : NULL);
      break;
    case MV_STEP_PAUSE:
      mv_machine_set_state (machine, MV_STATE_PAUSED, NULL);
      mv_machine_event (machine, MV_EVENT_PAUSED, task->operation_id, NULL);
      break;
    case MV_STEP_RESUME:
      mv_machine_set_state (machine, MV_STATE_RUNNING, NULL);
      mv_machine_event (machine, MV_EVENT_RESUMED, task->operation_id, NULL);
      break;
    case MV_STEP_STANDBY:
      mv_reconciler_unwatch_vmm (machine);
      mv_machine_clear_vmm (machine);
      g_free (status->saved_state);
      status->saved_state = rec->host->storage->saved_state_dir (rec->host->storage, machine->id);
      mv_machine_set_state (machine, MV_STATE_STANDBY, NULL);
      mv_machine_event (machine, MV_EVENT_STANDBY, task->operation_id, NULL);
      break;
    case MV_STEP_DESTROY:
      switch (task->resource->role)
        {
        case MV_RESOURCE_RECORDS:
          mv_machine_log (machine, G_LOG_LEVEL_MESSAGE, "Machine %s (%s) deleted",
                          machine->config->spec->name, machine->id);
          mv_machine_event (machine, MV_EVENT_DELETED, task->operation_id, NULL);
          machine->gone = TRUE;
          mv_reconciler_fork_gone (machine);
          if (rec->observer.removed)
            rec->observer.removed (machine, rec->observer.data);
          mv_reconciler_name_removed (rec, machine);
          g_hash_table_remove (rec->machines, machine->id);
          return FALSE;
        case MV_RESOURCE_VMM:
          mv_reconciler_unwatch_vmm (machine);
          mv_machine_clear_vmm (machine);
          if (status->state != MV_STATE_STANDBY)
            mv_machine_set_state (machine, MV_STATE_STOPPED, NULL);
          break;
        case MV_RESOURCE_SAVED_STATE:
          g_clear_pointer (&status->saved_state, g_free);
          break;
        case MV_RESOURCE_OTHER:
          break;
        }
      g_ptr_array_add (status->destroyed, g_strdup (task->resource->name));
      break;
    case MV_STEP_NONE:
      break;
    }
  /* The step that reaches what is desired is observed in the same write,
   * as the reconcile that follows would otherwise write it at once. */
  if (!machine->end_heard &&
      mv_plan_next_step (machine->config, status, mv_reconciler_now (rec)) == MV_STEP_NONE &&
      mv_machine_desired_reached (machine->config, status))
    observe_desired (machine);
  return TRUE;
}

/* What follows a start that is being recorded, none of which the record
 * holds: the event, the watch on the VMM, the guest's identity, the
 * template for the next start like it. Done once the write is under way,
 * and after what the results handed back with this one begin, so that
 * the disk is not kept waiting for it. @data: the StepResult, which
 * lives until the write is done, in a later dispatch. */
static gboolean
told_started (gpointer data)
{
  StepTask *task = ((StepResult *) data)->task;
  MvReconciler *rec = task->rec;
  MvMachine *machine = mv_reconciler_lookup (rec, task->machine_id);

  g_return_val_if_fail (machine != NULL, G_SOURCE_REMOVE);

  mv_machine_event (machine,
                    task->restarting ? MV_EVENT_RESTARTED
                    : task->restore  ? MV_EVENT_WOKEN
                                     : MV_EVENT_STARTED,
                    task->operation_id, NULL);
  mv_reconciler_watch_vmm (machine, task->runtime);
  /* A frozen guest may be another machine's (a fork): it is told whose
   * it is now, with fresh entropy either way. */
  if (task->restore)
    mv_reconciler_reidentify_guest (machine, task->runtime, task->attachment);
  /* The next machine like it starts warm: its template is built now, in
   * the background, from its spec. */
  if (task->warm_missing && task->spec->start_mode == MV_START_MODE_AUTO)
    mv_reconciler_build_warm (rec, task->runtime, machine->config->spec,
                              machine->config->image_config, task->warm_key);
  return G_SOURCE_REMOVE;
}

/* The VMM's end, heard while the machine was busy, is handled now unless
 * what the machine did since accounted for it; TRUE if it was. */
static gboolean
handle_heard_end (MvMachine *machine)
{
  g_autofree char *reason = NULL;

  if (!machine->end_heard)
    return FALSE;
  reason = g_steal_pointer (&machine->end_reason);
  machine->end_heard = FALSE;
  /* A step kept a VMM that has ended since (a pause, say). */
  if (!machine->status->vmm || machine->watch_id != 0)
    return FALSE;
  mv_reconciler_handle_end (machine, machine->end_has_exit_code, machine->end_exit_code, reason);
  return TRUE;
}

static void
on_result_recorded (MvMachine *machine, const GError *error, gpointer data)
{
  StepResult *result = data;

  machine->busy = FALSE;
  if (result->retire)
    mv_reconciler_retire_saved_state (machine);
  if (result->reported)
    mv_machine_settled (machine, result->reported, result->task->generation);
  if (!handle_heard_end (machine))
    mv_reconciler_reconcile (machine);
}

/* A start whose outcome its worker recorded as this thread made it: what
 * follows it, then what follows its record, as if written now. */
static gboolean
started_written_ahead (gpointer data)
{
  StepResult *done = data;
  MvMachine *machine = mv_reconciler_lookup (done->task->rec, done->task->machine_id);

  g_return_val_if_fail (machine != NULL, G_SOURCE_REMOVE);
  told_started (done);
  mv_machine_status_written_ahead (machine, done->task->ahead, on_result_recorded, done);
  return G_SOURCE_REMOVE;
}

static void
on_step_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  /* The step's task is this callback's: it goes with the step's result. */
  g_autoptr (StepTask) owned = user_data;
  StepTask *task = owned;
  MvMachine *machine = mv_reconciler_lookup (task->rec, task->machine_id);
  g_autoptr (GError) error = NULL;
  gint64 ended_at = mv_reconciler_monotonic (task->rec);
  StepResult *done;
  MvStatus *status;

  g_task_propagate_boolean (G_TASK (result), &error);
  /* Its phase could not be written: on_recorded said so. */
  if (task->not_taken)
    return;
  mv_op_stats_record (&task->rec->op_stats, task->phase, error != NULL,
                      (ended_at - task->started_at) / (double) G_USEC_PER_SEC);
  g_return_if_fail (machine != NULL);
  status = machine->status;
  machine->active_at = ended_at;
  g_clear_object (&machine->step_cancellable);
  mv_machine_log (machine, G_LOG_LEVEL_DEBUG, "Machine %s: %s %s%s%s", machine->id,
                  task->phase, error ? "failed" : "done", error ? ": " : "",
                  error ? error->message : "");
  if (error && task->step == MV_STEP_START && task->restarting)
    {
      /* The restart policy tried and failed: that is another end. */
      machine->busy = FALSE;
      g_clear_pointer (&status->phase, g_free);
      g_clear_pointer (&status->operation_id, g_free);
      mv_machine_changed (machine, MV_PROP_PHASE);
      mv_reconciler_handle_end (machine, FALSE, 0, error->message);
      if (!handle_heard_end (machine))
        mv_reconciler_reconcile (machine);
      return;
    }

  /* The result is announced, and answered, once it is on disk; the
   * machine stays busy until then. */
  mv_machine_begin_record_write (machine, FALSE);
  g_clear_pointer (&status->phase, g_free);
  g_clear_pointer (&status->operation_id, g_free);
  mv_machine_changed (machine, MV_PROP_PHASE);
  done = g_new0 (StepResult, 1);
  if (error)
    step_failed (machine, task, error, done);
  else if (!step_succeeded (machine, task, done))
    {
      g_free (done);
      return;
    }
  done->task = g_steal_pointer (&owned);
  if (done->started && mv_record_ahead_taken (machine, task->ahead))
    {
      mv_reconciler_later (started_written_ahead, done, (GDestroyNotify) step_result_free);
      return;
    }
  mv_machine_save_status_async (machine, on_result_recorded, done,
                                (GDestroyNotify) step_result_free);
  /* @done is the write's now, but it is answered in a later dispatch. */
  if (done->started)
    mv_reconciler_later (told_started, done, NULL);
}

static MvState
transitional_state (MvStep step, MvState current)
{
  switch (step)
    {
    case MV_STEP_START:
      return MV_STATE_STARTING;
    case MV_STEP_STOP:
    case MV_STEP_FORCE_STOP:
      return MV_STATE_STOPPING;
    default:
      return current;
    }
}

/* The phase is on disk, or could not be written: the host is touched only
 * if it is (the worker that wrote it takes the step). Every destroy step
 * can be repeated, so one whose phase cannot be written (a full disk)
 * goes on, since what it removes is what frees the disk. @data: the
 * step's task, owned by on_step_done, which hears of the step after
 * this. */
static void
on_recorded (MvMachine *machine, const GError *error, gpointer data)
{
  StepTask *task = data;

  if (error && task->step != MV_STEP_DESTROY)
    {
      task->not_taken = TRUE;
      /* Left as it was, and not tried again until something new is asked. */
      mv_status_free (machine->status);
      machine->status = g_steal_pointer (&task->before);
      machine->status->failed_generation = machine->config->desired_generation;
      machine->busy = FALSE;
      g_clear_object (&machine->step_cancellable);
      mv_machine_changed (machine, MV_PROP_ALL_STATUS);
      mv_machine_failed_now (machine, error);
      handle_heard_end (machine);
      return;
    }
  g_clear_pointer (&task->before, mv_status_free);
}

static const MvHostResource *
next_destroy_resource (const MvStatus *status)
{
  guint n = 0;
  const MvHostResource *order = mv_host_destroy_order (&n);

  for (guint i = 0; i < n; i++)
    if (!g_ptr_array_find_with_equal_func (status->destroyed, order[i].name, g_str_equal, NULL))
      return &order[i];
  return &order[n - 1];
}

/* The task of @step for machine @id, whose records are @config and
 * @status as they are before the step's phase. */
static StepTask *
step_task_new (MvReconciler *rec, MvRuntime *runtime, MvStep step, const char *id,
               const MvConfig *config, const MvStatus *status)
{
  MvRecords *records = rec->host->records;
  StepTask *task = g_new0 (StepTask, 1);

  task->rec = rec;
  task->runtime = runtime;
  task->step = step;
  task->machine_id = g_strdup (id);
  task->runtime_dir = records->runtime_dir (records, id);
  task->spec = mv_spec_copy (config->spec);
  task->image_config = mv_image_config_copy (config->image_config);
  task->vmm = status->vmm ? mv_reconciler_copy_vmm (status->vmm) : NULL;
  task->restore = step == MV_STEP_START && status->saved_state != NULL;
  task->first_start = status->started_from == NULL && status->finished_at == 0;
  task->restarting = step == MV_STEP_START && status->state == MV_STATE_RESTARTING;
  task->generation = config->desired_generation;
  task->cancellable = g_cancellable_new ();
  if (step == MV_STEP_DESTROY)
    {
      task->resource = next_destroy_resource (status);
      task->phase = g_strconcat ("destroy-", task->resource->name, NULL);
    }
  else
    task->phase = g_strdup (task->restore ? "restore" : mv_step_to_string (step));
  if (step == MV_STEP_START)
    {
      task->restart_generation = config->restart_generation;
      task->reaches_desired = config->desired == MV_DESIRED_RUNNING;
    }
  return task;
}

/* @status gets @task's phase and a fresh operation ID; a start holds
 * @admitted from now on, in this turn: the next start counts it. */
static void
put_phase (MvStatus *status, StepTask *task, const MvResources *admitted)
{
  g_free (status->phase);
  status->phase = g_strdup (task->phase);
  g_free (status->operation_id);
  status->operation_id = mv_id_new ();
  task->operation_id = g_strdup (status->operation_id);
  if (task->step == MV_STEP_START)
    {
      status->vcpus = admitted->vcpus;
      status->memory_bytes = admitted->memory_bytes;
    }
}

static void
run_step (MvMachine *machine, MvStep step)
{
  MvReconciler *rec = machine->reconciler;
  MvStatus *status = machine->status;
  g_autoptr (GError) error = NULL;
  MvRuntime *runtime = mv_reconciler_runtime_for (machine, &error);
  MvResources admitted = { 0, 0 };
  MvAdmit admit;
  StepTask *task;

  if (!runtime && step != MV_STEP_DESTROY)
    {
      mv_machine_set_failed (machine, error->message);
      mv_machine_save_status (machine, NULL);
      mv_machine_failed_now (machine, error);
      return;
    }
  g_clear_error (&error);
  /* Refused before anything is recorded: the machine stays as it is,
   * and is not tried again until something new is asked. */
  if (step == MV_STEP_START && (!mv_reconciler_check_volume_holds (machine, &error) ||
                                !mv_reconciler_check_device_holds (machine, machine->config->spec,
                                                                  &error)))
    {
      status->failed_generation = machine->config->desired_generation;
      mv_machine_failed_now (machine, error);
      return;
    }
  admit = step == MV_STEP_START ? mv_reconciler_admit (machine, &admitted, &error)
                                 : MV_ADMIT_YES;
  machine->waits_for_room = admit == MV_ADMIT_WAIT;
  if (admit == MV_ADMIT_WAIT)
    {
      mv_machine_log (machine, G_LOG_LEVEL_MESSAGE, "Machine %s (%s) waits for warm templates "
                      "being built to give way to its start", machine->config->spec->name,
                      machine->id);
      return;
    }
  if (admit == MV_ADMIT_NO)
    {
      mv_machine_log (machine, G_LOG_LEVEL_MESSAGE, "Machine %s (%s) is not started: %s",
                      machine->config->spec->name, machine->id, error->message);
      /* The restart policy's start that cannot be had is another end. */
      if (status->state == MV_STATE_RESTARTING)
        {
          mv_reconciler_handle_end (machine, FALSE, 0, error->message);
          return;
        }
      status->failed_generation = machine->config->desired_generation;
      mv_machine_failed_now (machine, error);
      return;
    }

  task = step_task_new (rec, runtime, step, machine->id, machine->config, status);

  /* Record what is about to happen before the host is touched (on_recorded):
   * the machine is busy from now on, and what changes is announced once it
   * is on disk. */
  MvState next = transitional_state (step, status->state);
  if (step == MV_STEP_DESTROY && task->resource->role == MV_RESOURCE_VMM &&
      mv_state_holds_resources (status->state))
    next = MV_STATE_STOPPING;
  mv_machine_begin_record_write (machine, FALSE);
  task->before = mv_status_copy (status);
  put_phase (status, task, &admitted);
  mv_machine_set_state (machine, next, NULL);
  mv_machine_changed (machine, MV_PROP_PHASE);
  machine->busy = TRUE;
  machine->step_cancellable = g_object_ref (task->cancellable);
  mv_machine_log (machine, G_LOG_LEVEL_DEBUG, "Machine %s: %s", machine->id, task->phase);
  /* Timed from here: the phase's write is part of the step. */
  task->started_at = mv_reconciler_monotonic (rec);
  machine->active_at = task->started_at;
  mv_machine_save_status_then (machine, on_recorded, task, step == MV_STEP_DESTROY,
                               run_step_in_thread, on_step_done, task,
                               step == MV_STEP_START ? &task->ahead : NULL);
}

/* A first start, planned with its machine's create ---------------------------- */

MvStepTask *
mv_reconciler_plan_first_start (MvReconciler *rec, MvRuntime *runtime, const MvConfig *config,
                                MvStatus *status)
{
  const MvSpec *spec = config->spec;
  MvResources admitted;
  StepTask *task;

  /* Volumes and host devices are checked against every machine in the
   * table (volume-holds.c, device-holds.c), which a create in flight is
   * not in; a start that does not fit now may wait for room. */
  if (mv_spec_mounts_volumes (spec) || mv_spec_has_host_devices (spec) ||
      mv_plan_next_step (config, status, mv_reconciler_now (rec)) != MV_STEP_START ||
      !mv_reconciler_admit_first_start (rec, spec, &admitted))
    return NULL;
  task = step_task_new (rec, runtime, MV_STEP_START, config->id, config, status);
  task->admitted = admitted;
  task->joining = TRUE;
  put_phase (status, task, &admitted);
  status->state = MV_STATE_STARTING;
  task->ahead = mv_record_ahead_new (rec->host->records, config->id);
  /* Timed from here: the records' write is part of the step. */
  task->started_at = mv_reconciler_monotonic (rec);
  return task;
}

void
mv_reconciler_first_start_in_thread (MvStepTask *task, const MvStatus *written, GTask *gtask,
                                     GSourceFunc joined, gpointer joined_data)
{
  mv_record_ahead_set_base (task->ahead, written);
  mv_reconciler_send (joined, joined_data, NULL);
  run_step_in_thread (gtask, NULL, task, NULL);
}

void
mv_reconciler_first_start_joined (MvMachine *machine, MvStepTask *task)
{
  task->joining = FALSE;
  mv_reconciler_release_first_start (machine->reconciler, &task->admitted);
  mv_machine_take_record_ahead (machine, task->ahead);
  machine->busy = TRUE;
  machine->step_cancellable = g_object_ref (task->cancellable);
  machine->active_at = task->started_at;
  mv_machine_log (machine, G_LOG_LEVEL_MESSAGE, "Machine %s (%s): %s -> %s",
                  machine->config->spec->name, machine->id,
                  mv_state_to_string (MV_STATE_STOPPED), mv_state_to_string (MV_STATE_STARTING));
  mv_machine_log (machine, G_LOG_LEVEL_DEBUG, "Machine %s: %s", machine->id, task->phase);
}

void
mv_reconciler_first_start_done (GAsyncResult *result, MvStepTask *task)
{
  on_step_done (NULL, result, task);
}

void
mv_step_task_free (MvStepTask *task)
{
  step_task_free (task);
}

/* Whoever waited for the wish hears that it is reached once that is on
 * disk, as after a step. */
static void
on_observed_recorded (MvMachine *machine, const GError *error, gpointer data)
{
  if (machine != NULL)
    mv_machine_settled (machine, NULL, 0);
}

void
mv_reconciler_reconcile (MvMachine *machine)
{
  MvReconciler *rec = machine->reconciler;
  MvConfig *config = machine->config;
  MvStatus *status = machine->status;
  MvStep step;

  /* A wish is acted on once it is on disk (requests.c). */
  if (machine->busy || machine->gone || machine->config_writes > 0 ||
      mv_reconciler_is_migrating (machine))
    return;

  step = mv_plan_next_step (config, status, mv_reconciler_now (rec));
  if (step != MV_STEP_NONE)
    {
      run_step (machine, step);
      return;
    }

  if (mv_machine_desired_reached (config, status))
    {
      gboolean stopped_now = machine->stopped_now;

      machine->stopped_now = FALSE;
      /* Off the main loop, as a step's writes are: after a restart every
       * machine whose record lags is written, and the calls of that
       * moment must not wait for ten thousand fsyncs. */
      if (status->observed_generation != config->desired_generation)
        {
          mv_machine_begin_record_write (machine, FALSE);
          observe_desired (machine);
          mv_machine_save_status_async (machine, on_observed_recorded, NULL, NULL);
        }
      else
        mv_machine_settled (machine, NULL, 0);
      /* Stopped by a user (seed 002, RemoveOnExit: "once it stops"): the
       * Stop is answered first, then the machine goes. */
      if (stopped_now && status->state == MV_STATE_STOPPED &&
          config->desired == MV_DESIRED_STOPPED && config->spec->remove_on_exit)
        {
          mv_machine_log (machine, G_LOG_LEVEL_MESSAGE,
                          "Machine %s (%s) was stopped and is removed, as it asked",
                          config->spec->name, machine->id);
          mv_config_set_desired (config, MV_DESIRED_DESTROYED, mv_reconciler_now (rec));
          mv_machine_save_config (machine, NULL);
          mv_machine_changed (machine, MV_PROP_DESIRED_STATE | MV_PROP_DESIRED_GENERATION);
          mv_reconciler_kick (machine);
        }
    }
  else if (status->state == MV_STATE_RESTARTING)
    {
      if (machine->restart_timer == 0)
        mv_reconciler_schedule_restart (machine);
    }
  else
    {
      /* Nothing more will be tried for this wish: say why. */
      g_autoptr (GError) error =
        g_error_new (MV_ERROR, MV_ERROR_INVALID_STATE, "Machine %s is %s%s%s",
                     config->spec->name, mv_state_to_string (status->state),
                     status->state_error ? ": " : "",
                     status->state_error ? status->state_error : "");
      mv_machine_failed_now (machine, error);
    }
}

