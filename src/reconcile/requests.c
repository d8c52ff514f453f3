/* What clients ask of machines: each request is checked, becomes a change
 * of the desired record (written before anything else happens, or nothing
 * happens), and wakes the reconciler. */
#include "reconciler-private.h"
#include "core/errors.h"
#include "core/image-ref.h"
#include "core/json-util.h"
#include "core/text.h"
#include "util/fault.h"

#include <stdarg.h>


/* Writes the changed config; if it cannot be written, @previous is what
 * the machine keeps: nothing changes unless it is on disk. */
gboolean
mv_reconciler_commit_config (MvMachine *machine, MvConfig *previous, GError **error)
{
  if (mv_machine_save_config (machine, error))
    {
      mv_config_free (previous);
      return TRUE;
    }
  mv_config_free (machine->config);
  machine->config = previous;
  return FALSE;
}

#define STATES(...) (state_bits ((const MvState[]) { __VA_ARGS__, MV_STATE_COUNT }))

static guint
state_bits (const MvState *states)
{
  guint bits = 0;

  for (; *states != MV_STATE_COUNT; states++)
    bits |= 1u << *states;
  return bits;
}

static gboolean
check_state (MvMachine *machine, const char *verb, guint allowed, GError **error)
{
  if (allowed & (1u << machine->status->state))
    return TRUE;
  return mv_error_set (error, MV_ERROR_INVALID_STATE, "Cannot %s machine %s: it is %s", verb,
                       machine->config->spec->name, mv_state_to_string (machine->status->state));
}

/* A machine that could never run here is refused at once. */
static gboolean
fits_host (const MvHost *host, const MvSpec *spec, GError **error)
{
  g_autofree char *have = mv_text_bytes (host->memory_bytes);
  g_autofree char *wanted = NULL;
  const char *field = "memory_bytes";
  guint64 bytes = spec->memory_bytes;

  if (spec->max_memory_bytes > bytes)
    {
      field = "max_memory_bytes";
      bytes = spec->max_memory_bytes;
    }
  if (host->memory_bytes == 0 || bytes <= host->memory_bytes)
    return TRUE;
  wanted = mv_text_bytes (bytes);
  return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT,
                       "%s: %s is more than this host's memory (%s)", field, wanted, have);
}

/* The network the spec names exists here, and its static_ip can be had. */
static gboolean
check_network (const MvHost *host, const MvSpec *spec, GError **error)
{
  if (!spec->network_name)
    return TRUE;
  if (!host->network)
    return mv_error_set (error, MV_ERROR_UNSUPPORTED, "network_name: this host has no networks");
  return host->network->check (host->network, spec->id, spec, error);
}

/* Everything a spec must pass before it is recorded: its own limits,
 * this daemon's features, and the runtime that is to run it; with
 * @check_size, that a machine of its size could ever start here. */
static MvRuntime *
validate_spec (MvReconciler *rec, MvSpec *spec, gboolean check_size, GError **error)
{
  MvRuntime *runtime;

  if (!mv_spec_validate_with_standby_min (spec, rec->options.standby_min_seconds, error) ||
      !fits_host (rec->host, spec, error) ||
      (check_size && !mv_reconciler_check_spec_size (rec, spec, error)) ||
      !mv_volumes_check_spec (rec->host->volumes, spec, error) ||
      !check_network (rec->host, spec, error) ||
      !(runtime = mv_runtimes_for_spec (rec->host->runtimes, spec, error)))
    return NULL;
  if (runtime->check && !runtime->check (runtime, spec, error))
    return NULL;
  return runtime;
}

MvRuntime *
mv_reconciler_validate_spec (MvReconciler *rec, MvSpec *spec, GError **error)
{
  return validate_spec (rec, spec, TRUE, error);
}

/* A client retrying with the same ID gets the same machine: *@existed
 * and that machine, or MV_ERROR_CONFLICT; NULL without error if there is
 * none. */
static MvMachine *
find_retried (MvReconciler *rec, const MvSpec *spec, const char *fingerprint, gboolean start,
              gboolean *existed, GError **error)
{
  MvMachine *machine;
  MvConfig *previous;

  if (!spec->id || !(machine = mv_reconciler_lookup (rec, spec->id)))
    return NULL;
  if (g_strcmp0 (machine->config->fingerprint, fingerprint) != 0)
    {
      mv_error_set (error, MV_ERROR_CONFLICT, "id: machine %s exists with a different spec",
                    spec->id);
      return NULL;
    }
  *existed = TRUE;
  previous = mv_config_copy (machine->config);
  if (start && mv_config_set_desired (machine->config, MV_DESIRED_RUNNING, mv_reconciler_now (rec)))
    {
      if (!mv_reconciler_commit_config (machine, previous, error))
        return NULL;
    }
  else
    mv_config_free (previous);
  return machine;
}

gboolean
mv_reconciler_check_name_free (MvReconciler *rec, const MvSpec *spec, GError **error)
{
  if (mv_reconciler_find (rec, spec->name) || g_hash_table_contains (rec->creating, spec->name))
    return mv_error_set (error, MV_ERROR_ALREADY_EXISTS, "name: a machine called %s exists already",
                         spec->name);
  return TRUE;
}

/* The records of a new machine, not yet written: @spec validated, its
 * name free. */
static void
new_records (MvReconciler *rec, MvRuntime *runtime, MvSpec *spec_in, char *fingerprint_in,
             MvImageConfig *image_config_in, gboolean start, gboolean forking,
             MvConfig **config_out, MvStatus **status_out)
{
  g_autoptr (MvSpec) spec = spec_in;
  g_autofree char *fingerprint = fingerprint_in;
  g_autoptr (MvImageConfig) image_config = image_config_in;
  MvConfig *config;
  MvStatus *status;
  gint64 now = mv_reconciler_now (rec);

  /* A machine keeps the hypervisor it was created with, even when the
   * host's default changes; its fingerprint stays that of what was sent. */
  if (!spec->hypervisor_type)
    spec->hypervisor_type = g_strdup (runtime->type);
  if (!spec->id)
    spec->id = mv_id_new ();
  g_autofree char *id = g_strdup (spec->id);
  config = mv_config_new_fingerprinted (id, g_steal_pointer (&spec), g_steal_pointer (&fingerprint),
                                        now);
  config->image_config = g_steal_pointer (&image_config);
  if (start)
    mv_config_set_desired (config, MV_DESIRED_RUNNING, config->created_at);
  status = mv_status_new ();
  status->forking = forking;
  /* Born stopped and wanted stopped, with nothing on the host: what is
   * asked is already so, and recorded so, not left for the next start of
   * the daemon to write. */
  if (!start && !forking)
    status->observed_generation = config->desired_generation;
  *config_out = config;
  *status_out = status;
}

/* A machine whose records were just written joins the daemon; it is told
 * of with announce_added(). One wanted running is started once whoever
 * asked for it has been told of it: a start refused at once (no room,
 * a volume held) is refused to them, with its reason. */
static MvMachine *
join_recorded (MvReconciler *rec, MvConfig *config, MvStatus *status)
{
  mv_fault_point ("create", "published");
  return mv_reconciler_add_loaded (rec, config, status);
}

static void
announce_added (MvMachine *machine)
{
  MvReconciler *rec = machine->reconciler;

  mv_machine_log (machine, G_LOG_LEVEL_MESSAGE, "Machine %s (%s) defined",
                  machine->config->spec->name, machine->id);
  if (rec->observer.added)
    rec->observer.added (machine, rec->observer.data);
  mv_machine_event (machine, MV_EVENT_CREATED, NULL, NULL);
}

/* Records a new machine, @spec validated and its name free, and tells of
 * it; the caller starts it, if it is wanted running. */
static MvMachine *
record_new (MvReconciler *rec, MvRuntime *runtime, MvSpec *spec_in, char *fingerprint_in,
            MvImageConfig *image_config_in, gboolean start, gboolean forking, GError **error)
{
  g_autoptr (MvConfig) config = NULL;
  g_autoptr (MvStatus) status = NULL;
  MvMachine *machine;

  new_records (rec, runtime, spec_in, fingerprint_in, image_config_in, start, forking, &config,
               &status);
  if (!rec->host->records->create (rec->host->records, config, status, error))
    return NULL;
  machine = join_recorded (rec, g_steal_pointer (&config), g_steal_pointer (&status));
  announce_added (machine);
  return machine;
}

MvMachine *
mv_reconciler_record_machine (MvReconciler *rec, MvRuntime *runtime, MvSpec *spec_in,
                              char *fingerprint_in, MvImageConfig *image_config_in,
                              gboolean start, gboolean forking, GError **error)
{
  MvMachine *machine = record_new (rec, runtime, spec_in, fingerprint_in, image_config_in, start,
                                   forking, error);

  if (machine && start)
    mv_reconciler_reconcile (machine);
  return machine;
}

/* Everything a create checks before it records: NULL with @error set if
 * refused, or with *@existed and the machine if it is a retry. On a
 * go-ahead, NULL with no error and *@runtime set. */
static MvMachine *
check_define (MvReconciler *rec, MvSpec *spec, const char *fingerprint, gboolean start,
              gboolean *existed, MvRuntime **runtime, GError **error)
{
  g_autoptr (GError) local = NULL;
  MvMachine *machine;

  *existed = FALSE;
  if (!(*runtime = mv_reconciler_validate_spec (rec, spec, error)))
    return NULL;
  if ((machine = find_retried (rec, spec, fingerprint, start, existed, &local)) || local)
    return local ? (g_propagate_error (error, g_steal_pointer (&local)), NULL) : machine;
  if (spec->image)
    return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT,
                         "image: a machine booted from an image is created with its pull"), NULL;
  mv_reconciler_check_name_free (rec, spec, error);
  return NULL;
}

MvMachine *
mv_reconciler_define (MvReconciler *rec, MvSpec *spec_in, gboolean start, gboolean *existed,
                      GError **error)
{
  g_autoptr (MvSpec) spec = spec_in;
  g_autofree char *fingerprint = mv_spec_fingerprint (spec);
  g_autoptr (GError) local = NULL;
  MvRuntime *runtime = NULL;
  MvMachine *machine = check_define (rec, spec, fingerprint, start, existed, &runtime, &local);

  if (machine || local)
    return local ? (g_propagate_error (error, g_steal_pointer (&local)), NULL) : machine;
  return mv_reconciler_record_machine (rec, runtime, g_steal_pointer (&spec),
                                       g_steal_pointer (&fingerprint), NULL, start, FALSE, error);
}

/* ---- creates that pull ---- */

typedef struct {
  MvReconciler       *rec;
  MvSpec             *spec;
  char               *fingerprint;
  char               *reference;     /* what is pulled: the spec's image, at its digest if given */
  gboolean            start;
  MvPullPolicy        policy;
  MvPullProgressFunc  progress;
  gpointer            progress_data;
  MvDefineFunc        func;
  gpointer            func_data;
  GCancellable       *cancellable;
  /* Results, read on the main thread. */
  char               *digest;
  MvImageConfig      *image_config;
  /* A create without an image: its records, written on a worker thread,
   * and the start it begins with them, if it was planned with them. */
  MvConfig           *config;
  MvStatus           *status;
  MvStepTask         *first_start;
  gboolean            joined;        /* the records are on disk, the machine in the table */
} MvCreate;

static void
create_free (MvCreate *create)
{
  mv_spec_free (create->spec);
  g_free (create->fingerprint);
  g_free (create->reference);
  g_clear_object (&create->cancellable);
  g_free (create->digest);
  mv_image_config_free (create->image_config);
  mv_config_free (create->config);
  mv_status_free (create->status);
  g_clear_pointer (&create->first_start, mv_step_task_free);
  g_free (create);
}

/* Holds @name for @create and runs @func on a worker thread; @done, back
 * on the main thread, lets go of both with release_create(). */
static void
run_create (MvCreate *create, const char *name, GTaskThreadFunc func, GAsyncReadyCallback done)
{
  g_hash_table_insert (create->rec->creating, g_strdup (name), create);
  create->rec->background++;
  mv_reconciler_run_task (func, create, (GDestroyNotify) create_free, done, NULL);
}

static void
release_create (MvCreate *create, const char *name)
{
  create->rec->background--;
  g_hash_table_remove (create->rec->creating, name);
}

static void
write_in_thread (GTask *gtask, gpointer source, gpointer task_data, GCancellable *cancellable)
{
  MvCreate *create = task_data;
  MvRecords *records = create->rec->host->records;
  GError *error = NULL;

  if (records->create (records, create->config, create->status, &error))
    g_task_return_boolean (gtask, TRUE);
  else
    g_task_return_error (gtask, error);
}

/* A create written on a worker, to be told of (tell_joined). */
typedef struct {
  MvReconciler *rec;
  char         *machine_id;
  MvDefineFunc  func;
  gpointer      func_data;
} Joined;

static void
joined_free (Joined *joined)
{
  g_free (joined->machine_id);
  g_free (joined);
}

static gboolean
tell_joined (gpointer data)
{
  Joined *joined = data;
  MvMachine *machine = mv_reconciler_lookup (joined->rec, joined->machine_id);
  g_autoptr (GError) error = NULL;

  if (machine)
    announce_added (machine);
  else
    mv_error_set (&error, MV_ERROR_NOT_FOUND, "Machine %s was deleted", joined->machine_id);
  joined->func (machine, FALSE, error, joined->func_data);
  /* A machine wanted running, and not started with its records (join_recorded). */
  if ((machine = mv_reconciler_lookup (joined->rec, joined->machine_id)) &&
      machine->config->desired == MV_DESIRED_RUNNING)
    mv_reconciler_reconcile (machine);
  return G_SOURCE_REMOVE;
}

/* @create's caller is told of @machine, which has just joined, once the
 * other results handed back with it have been handled. */
static void
tell_joined_later (MvCreate *create, MvMachine *machine)
{
  Joined *joined = g_new (Joined, 1);

  *joined = (Joined) {
    .rec = create->rec,
    .machine_id = g_strdup (machine->id),
    .func = create->func,
    .func_data = create->func_data,
  };
  mv_reconciler_later (tell_joined, joined, (GDestroyNotify) joined_free);
}

static void
on_written (GObject *source, GAsyncResult *result, gpointer user_data)
{
  MvCreate *create = g_task_get_task_data (G_TASK (result));
  MvReconciler *rec = create->rec;
  g_autoptr (GError) error = NULL;
  MvMachine *machine;

  release_create (create, create->config->spec->name);
  if (!g_task_propagate_boolean (G_TASK (result), &error))
    {
      create->func (NULL, FALSE, error, create->func_data);
      return;
    }
  /* The machine is told of, and the caller answered, once the creates
   * written with it have begun what follows their records. */
  machine = join_recorded (rec, g_steal_pointer (&create->config),
                           g_steal_pointer (&create->status));
  tell_joined_later (create, machine);
}

/* A create that starts its machine: the machine joins the table once its
 * records are on disk, while the worker that wrote them takes the start
 * (mv_reconciler_plan_first_start). */

static gboolean
join_starting (gpointer data)
{
  MvCreate *create = data;
  MvReconciler *rec = create->rec;
  MvMachine *machine;

  release_create (create, create->config->spec->name);
  create->joined = TRUE;
  machine = mv_reconciler_add_loaded (rec, g_steal_pointer (&create->config),
                                      g_steal_pointer (&create->status));
  mv_reconciler_first_start_joined (machine, create->first_start);
  tell_joined_later (create, machine);
  return G_SOURCE_REMOVE;
}

static void
write_and_start_in_thread (GTask *gtask, gpointer source, gpointer task_data,
                           GCancellable *cancellable)
{
  MvCreate *create = task_data;
  MvRecords *records = create->rec->host->records;
  GError *error = NULL;

  if (!records->create (records, create->config, create->status, &error))
    {
      g_task_return_error (gtask, error);
      return;
    }
  mv_fault_point ("create", "published");
  /* @create's records are the main thread's from here on. */
  mv_reconciler_first_start_in_thread (create->first_start, create->status, gtask,
                                       join_starting, create);
}

static void
on_started (GObject *source, GAsyncResult *result, gpointer user_data)
{
  MvCreate *create = g_task_get_task_data (G_TASK (result));
  g_autoptr (GError) error = NULL;

  if (create->joined)
    {
      mv_reconciler_first_start_done (result, g_steal_pointer (&create->first_start));
      return;
    }
  release_create (create, create->config->spec->name);
  g_clear_pointer (&create->first_start, mv_step_task_free);
  g_task_propagate_boolean (G_TASK (result), &error);
  create->func (NULL, FALSE, error, create->func_data);
}

/* A create without an image, checked: its records are written on a
 * worker thread, so that the creates of many clients reach the disk
 * together rather than one after another on the main loop. The name is
 * held meanwhile, as during a pull. */
static void
define_in_thread (MvReconciler *rec, MvSpec *spec_in, gboolean start, MvDefineFunc func,
                  gpointer user_data)
{
  g_autoptr (MvSpec) spec = spec_in;
  g_autofree char *fingerprint = mv_spec_fingerprint (spec);
  g_autoptr (GError) error = NULL;
  gboolean existed = FALSE;
  MvRuntime *runtime = NULL;
  MvMachine *machine = check_define (rec, spec, fingerprint, start, &existed, &runtime, &error);
  MvCreate *create;

  if (machine || error)
    {
      func (machine, existed, error, user_data);
      return;
    }
  create = g_new0 (MvCreate, 1);
  create->rec = rec;
  create->func = func;
  create->func_data = user_data;
  new_records (rec, runtime, g_steal_pointer (&spec), g_steal_pointer (&fingerprint), NULL,
               start, FALSE, &create->config, &create->status);
  if (start)
    create->first_start = mv_reconciler_plan_first_start (rec, runtime, create->config,
                                                          create->status);
  if (create->first_start)
    run_create (create, create->config->spec->name, write_and_start_in_thread, on_started);
  else
    run_create (create, create->config->spec->name, write_in_thread, on_written);
}

static void
pull_in_thread (GTask *gtask, gpointer source, gpointer task_data, GCancellable *cancellable)
{
  MvCreate *create = task_data;
  MvImages *images = create->rec->host->images;
  GError *error = NULL;

  mv_fault_point ("create", "pulling");
  create->digest = images->ensure (images, create->reference, create->policy, create->progress,
                                   create->progress_data, create->cancellable,
                                   &create->image_config, &error);
  if (!create->digest)
    g_task_return_error (gtask, error);
  else
    g_task_return_boolean (gtask, TRUE);
}

static void
on_pulled (GObject *source, GAsyncResult *result, gpointer user_data)
{
  MvCreate *create = g_task_get_task_data (G_TASK (result));
  MvReconciler *rec = create->rec;
  g_autoptr (GError) error = NULL;
  MvMachine *machine = NULL;
  MvRuntime *runtime = NULL;

  release_create (create, create->spec->name);
  if (g_task_propagate_boolean (G_TASK (result), &error))
    {
      if (create->spec->image_digest &&
          g_strcmp0 (create->spec->image_digest, create->digest) != 0)
        mv_error_set (&error, MV_ERROR_FAILED, "image: %s resolved to %s, not image_digest %s",
                      create->reference, create->digest, create->spec->image_digest);
      else
        {
          g_free (create->spec->image_digest);
          create->spec->image_digest = g_steal_pointer (&create->digest);
          /* What may have changed while it pulled: the hypervisors. */
          runtime = mv_reconciler_validate_spec (rec, create->spec, &error);
        }
    }
  if (runtime)
    machine = record_new (rec, runtime, g_steal_pointer (&create->spec),
                          g_steal_pointer (&create->fingerprint),
                          g_steal_pointer (&create->image_config), create->start, FALSE, &error);
  if (!machine && create->spec)
    g_message ("Machine %s not created: %s", create->spec->name, error->message);
  create->func (machine, FALSE, error, create->func_data);
  if (machine && create->start && !machine->gone)
    mv_reconciler_reconcile (machine);
}

void
mv_reconciler_define_async (MvReconciler *rec, MvSpec *spec_in, gboolean start,
                            MvPullPolicy policy, MvPullProgressFunc progress,
                            gpointer progress_data, MvDefineFunc func, gpointer user_data)
{
  g_autoptr (MvSpec) spec = spec_in;
  g_autoptr (GError) error = NULL;
  g_autoptr (MvImageRef) ref = NULL;
  gboolean existed = FALSE;
  MvImages *images = rec->host->images;
  MvMachine *machine;
  MvRuntime *runtime;
  MvCreate *create;

  if (!spec->image)
    {
      define_in_thread (rec, g_steal_pointer (&spec), start, func, user_data);
      return;
    }
  /* Everything that can be refused is, before anything is pulled. */
  if (!(runtime = mv_reconciler_validate_spec (rec, spec, &error)))
    goto refused;
  create = g_new0 (MvCreate, 1);
  create->fingerprint = mv_spec_fingerprint (spec);
  if ((machine = find_retried (rec, spec, create->fingerprint, start, &existed, &error)) || error)
    {
      create_free (create);
      func (machine, existed, error, user_data);
      return;
    }
  if (!images)
    mv_error_set (&error, MV_ERROR_UNSUPPORTED, "image: this microvmd boots no images");
  if (error || !images->check (images, spec->image, &error) || !mv_reconciler_check_name_free (rec, spec, &error))
    {
      create_free (create);
      goto refused;
    }
  if (spec->image_digest)
    {
      ref = mv_image_ref_parse (spec->image, NULL, NULL);
      if (ref && ref->kind == MV_IMAGE_REF_REGISTRY)
        create->reference = g_strdup_printf ("%s/%s@%s", ref->host, ref->repository,
                                             spec->image_digest);
    }
  if (!create->reference)
    create->reference = g_strdup (spec->image);
  create->rec = rec;
  create->spec = g_steal_pointer (&spec);
  create->start = start;
  create->policy = policy;
  create->progress = progress;
  create->progress_data = progress_data;
  create->func = func;
  create->func_data = user_data;
  create->cancellable = g_cancellable_new ();
  /* The name is taken while the image is pulled: a second create of it
   * is refused rather than racing this one. */
  run_create (create, create->spec->name, pull_in_thread, on_pulled);
  return;

refused:
  func (NULL, FALSE, error, user_data);
}

void
mv_reconciler_cancel_pulls (MvReconciler *rec)
{
  GHashTableIter iter;
  MvCreate *create;

  g_hash_table_iter_init (&iter, rec->creating);
  while (g_hash_table_iter_next (&iter, NULL, (gpointer *) &create))
    if (create->cancellable)
      g_cancellable_cancel (create->cancellable);
}

/* A request for what is already wanted, after it failed, asks for it
 * again: the plan leaves a failed wish alone until then. */
static void
retry_if_unchanged (MvMachine *machine, gboolean changed, gint64 now)
{
  if (!changed && machine->status->failed_generation == machine->config->desired_generation &&
      !mv_machine_desired_reached (machine->config, machine->status))
    mv_config_retry (machine->config, now);
}

/* Sets what is desired (or asks again after a failure), in memory: the
 * caller records it. */
static void
request_desired (MvMachine *machine, MvDesired desired, gboolean restart, gboolean by_user_stop)
{
  MvConfig *config = machine->config;
  gint64 now = mv_reconciler_now (machine->reconciler);
  gboolean changed;

  if (restart)
    mv_config_request_restart (config, now);
  /* Any of these wakes a guest on standby (Stop by discarding it). */
  changed = mv_config_set_standby (config, FALSE, now);
  changed |= mv_config_set_desired (config, desired, now);
  retry_if_unchanged (machine, changed || restart, now);
  config->stopped_by_user = by_user_stop;
}

static gboolean
request_standby (MvMachine *machine, GError **error)
{
  gint64 now = mv_reconciler_now (machine->reconciler);

  if (!check_state (machine, "put on standby",
                    STATES (MV_STATE_RUNNING, MV_STATE_PAUSED, MV_STATE_STANDBY), error))
    return FALSE;
  if (mv_spec_unfreezable (machine->config->spec))
    return mv_error_set (error, MV_ERROR_UNSUPPORTED, "%s; stop it instead",
                         mv_spec_unfreezable (machine->config->spec));
  retry_if_unchanged (machine, mv_config_set_standby (machine->config, TRUE, now), now);
  return TRUE;
}

/* Checked when the change is made, not when the call came: a machine
 * may have started while its caller was being authorized. */
static gboolean
request_delete (MvMachine *machine, gboolean force, GError **error)
{
  MvConfig *previous;
  gint64 now = mv_reconciler_now (machine->reconciler);

  if (!force && mv_machine_is_active (machine))
    return mv_error_set (error, MV_ERROR_INVALID_STATE,
                         "Machine %s is %s: stop it first, or delete with force",
                         machine->config->spec->name, mv_state_to_string (machine->status->state));
  previous = mv_config_copy (machine->config);
  /* A delete that failed is tried again when asked again. */
  retry_if_unchanged (machine, mv_config_set_desired (machine->config, MV_DESIRED_DESTROYED, now),
                      now);
  if (!mv_machine_save_config (machine, NULL))
    {
      MvRecords *records = machine->reconciler->host->records;

      /* Deleting is how space is freed: on a full disk it is noted where
       * it takes none, and the destroy goes on. */
      if (!records->mark_destroyed (records, machine->id, error))
        {
          mv_config_free (machine->config);
          machine->config = previous;
          g_prefix_error (error, "Could not record the change: ");
          return FALSE;
        }
      mv_machine_changed (machine, MV_PROP_ALL_CONFIG);
    }
  mv_config_free (previous);
  /* What is under way (a start waiting for its guest) gives up. */
  if (force && machine->step_cancellable)
    g_cancellable_cancel (machine->step_cancellable);
  return TRUE;
}

/* Takes @request: checks it and changes the config in memory, *@previous
 * what it was, for the caller to record; or, for a delete, records it
 * here (*@previous NULL). */
static gboolean
take_request (MvMachine *machine, MvRequest request, MvConfig **previous, GError **error)
{
  g_autoptr (MvConfig) before = mv_config_copy (machine->config);

  *previous = NULL;
  switch (request)
    {
    case MV_REQUEST_START:
      request_desired (machine, MV_DESIRED_RUNNING, FALSE, FALSE);
      break;
    case MV_REQUEST_STOP:
      request_desired (machine, MV_DESIRED_STOPPED, FALSE, TRUE);
      break;
    case MV_REQUEST_PAUSE:
      if (!check_state (machine, "pause",
                        STATES (MV_STATE_RUNNING, MV_STATE_PAUSED, MV_STATE_STARTING), error))
        return FALSE;
      request_desired (machine, MV_DESIRED_PAUSED, FALSE, FALSE);
      break;
    case MV_REQUEST_RESUME:
      /* Resume is for a paused guest; a frozen one wakes with Start, and
       * its callers are told so rather than only that it cannot. */
      if (machine->status->state == MV_STATE_STANDBY)
        return mv_error_set (error, MV_ERROR_INVALID_STATE,
                             "Machine %s is on standby: Start resumes it",
                             machine->config->spec->name);
      if (!check_state (machine, "resume",
                        STATES (MV_STATE_PAUSED, MV_STATE_RUNNING, MV_STATE_STARTING), error))
        return FALSE;
      request_desired (machine, MV_DESIRED_RUNNING, FALSE, FALSE);
      break;
    case MV_REQUEST_RESTART:
      /* A machine that does not run is simply started; a frozen one is
       * restarted too, which deletes its saved state. */
      request_desired (machine, MV_DESIRED_RUNNING,
                       mv_state_holds_resources (machine->status->state) ||
                         machine->status->state == MV_STATE_STANDBY,
                       FALSE);
      break;
    case MV_REQUEST_STANDBY:
      if (!request_standby (machine, error))
        return FALSE;
      break;
    case MV_REQUEST_DELETE:
    case MV_REQUEST_FORCE_DELETE:
      return request_delete (machine, request == MV_REQUEST_FORCE_DELETE, error);
    }
  *previous = g_steal_pointer (&before);
  return TRUE;
}

/* What follows a request once it is recorded: a user's start or stop
 * ends what the restart policy had pending. */
static void
request_recorded (MvMachine *machine, MvRequest request)
{
  if (request == MV_REQUEST_START || request == MV_REQUEST_STOP ||
      request == MV_REQUEST_RESUME || request == MV_REQUEST_RESTART)
    mv_reconciler_cancel_restart (machine);
}

gboolean
mv_reconciler_request (MvReconciler *rec, MvMachine *machine, MvRequest request, GError **error)
{
  MvConfig *previous;

  if (!take_request (machine, request, &previous, error))
    return FALSE;
  if (previous && !mv_reconciler_commit_config (machine, previous, error))
    return FALSE;
  if (previous)
    request_recorded (machine, request);
  return TRUE;
}

typedef struct {
  MvConfig      *previous;
  MvRequest      request;
  MvRequestDone  done;
  gpointer       data;
} RequestWrite;

static void
request_write_free (RequestWrite *write)
{
  mv_config_free (write->previous);
  g_free (write);
}

static void
on_request_recorded (MvMachine *machine, const GError *error, gpointer data)
{
  RequestWrite *write = data;

  if (machine && error)
    {
      /* Left as it was. */
      mv_config_free (machine->config);
      machine->config = g_steal_pointer (&write->previous);
      mv_machine_changed (machine, MV_PROP_ALL_CONFIG);
    }
  else if (machine)
    request_recorded (machine, write->request);
  write->done (machine, error, write->data);
  if (machine)
    mv_reconciler_reconcile (machine);
}

gboolean
mv_reconciler_request_async (MvReconciler *rec, MvMachine *machine, MvRequest request,
                             MvRequestDone done, gpointer data, GError **error)
{
  RequestWrite *write;
  MvConfig *previous;

  /* Nothing of it is shown or announced until it is on disk. */
  mv_machine_begin_record_write (machine, TRUE);
  if (!take_request (machine, request, &previous, error))
    {
      mv_machine_end_record_write (machine);
      return FALSE;
    }
  if (!previous)
    {
      /* Recorded already (a delete). */
      mv_machine_end_record_write (machine);
      done (machine, NULL, data);
      return TRUE;
    }
  write = g_new0 (RequestWrite, 1);
  write->previous = previous;
  write->request = request;
  write->done = done;
  write->data = data;
  mv_machine_save_config_async (machine,
                                MV_PROP_DESIRED_STATE | MV_PROP_DESIRED_GENERATION |
                                  MV_PROP_RESTART_GENERATION | MV_PROP_UPDATED_AT,
                                on_request_recorded, write,
                                (GDestroyNotify) request_write_free);
  return TRUE;
}

gboolean
mv_reconciler_set_desired (MvReconciler *rec, MvMachine *machine, MvDesired desired,
                           GError **error)
{
  MvConfig *previous;

  if (desired == MV_DESIRED_DESTROYED || desired >= MV_DESIRED_COUNT)
    return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT,
                         "state: '%s' is not one of running, paused, stopped (use Delete to destroy)",
                         desired < MV_DESIRED_COUNT ? mv_desired_to_string (desired) : "");
  previous = mv_config_copy (machine->config);
  if (mv_config_set_desired (machine->config, desired, mv_reconciler_now (rec)))
    {
      machine->config->stopped_by_user = desired == MV_DESIRED_STOPPED;
      if (!mv_reconciler_commit_config (machine, previous, error))
        return FALSE;
    }
  else
    mv_config_free (previous);
  return TRUE;
}

static void
copy_strings (GPtrArray *to, GPtrArray *from)
{
  g_ptr_array_set_size (to, 0);
  for (guint i = 0; i < from->len; i++)
    g_ptr_array_add (to, g_strdup (from->pdata[i]));
}

static void
copy_map (GHashTable *to, GHashTable *from)
{
  GHashTableIter iter;
  gpointer k, v;

  g_hash_table_remove_all (to);
  g_hash_table_iter_init (&iter, from);
  while (g_hash_table_iter_next (&iter, &k, &v))
    g_hash_table_insert (to, g_strdup (k), g_strdup (v));
}

/* @wanted with what the guest is told at once (its hostname, keys, user
 * data and metadata) as @current has them. */
static MvSpec *
without_guest_metadata (const MvSpec *current, const MvSpec *wanted)
{
  MvSpec *masked = mv_spec_copy (wanted);

  g_free (masked->hostname);
  masked->hostname = g_strdup (current->hostname);
  g_free (masked->user_data);
  masked->user_data = g_strdup (current->user_data);
  copy_strings (masked->ssh_keys, current->ssh_keys);
  copy_map (masked->metadata, current->metadata);
  return masked;
}

/* What may change while the machine runs: restart policy, labels, the
 * standby time, remove_on_exit, and the guest's hostname, keys, user data
 * and metadata, which a running guest is given at once; and, if
 * @devices_live, host devices added after those it has (device-adds.c).
 * Everything else needs it stopped. */
static gboolean
only_live_fields_differ (const MvSpec *current, const MvSpec *wanted, gboolean devices_live)
{
  g_autoptr (MvSpec) masked = without_guest_metadata (current, wanted);

  if (devices_live && mv_spec_adds_host_devices (current, wanted))
    {
      g_ptr_array_set_size (masked->pci_devices, 0);
      for (guint i = 0; i < current->pci_devices->len; i++)
        g_ptr_array_add (masked->pci_devices, g_strdup (current->pci_devices->pdata[i]));
      g_clear_pointer (&masked->gpu, mv_gpu_free);
      if (current->gpu)
        masked->gpu = mv_gpu_new (current->gpu->profile, current->gpu->mediated_device_uuid);
    }

  masked->restart_mode = current->restart_mode;
  masked->restart_max_retries = current->restart_max_retries;
  masked->standby_after_seconds = current->standby_after_seconds;
  masked->remove_on_exit = current->remove_on_exit;
  copy_map (masked->labels, current->labels);
  json_array_unref (masked->firewall);
  masked->firewall = mv_json_array_deep_copy (current->firewall);
  return mv_spec_equal (current, masked);
}

static gboolean
firewall_differs (const MvSpec *current, const MvSpec *wanted)
{
  g_autoptr (JsonNode) a = json_node_init_array (json_node_alloc (), current->firewall);
  g_autoptr (JsonNode) b = json_node_init_array (json_node_alloc (), wanted->firewall);

  return !json_node_equal (a, b);
}

/* A firewall change to a machine that holds its place on its network is
 * made at once (seed 000), off the main thread. */
typedef struct {
  MvNetwork *network;
  char      *machine_id;
  MvSpec    *spec;
  gboolean   sleeping;
  gboolean   detach;     /* its place is given up (TAP, ports, rules), not changed */
} RulesTask;

static void
rules_task_free (RulesTask *task)
{
  g_free (task->machine_id);
  mv_spec_free (task->spec);
  g_free (task);
}

static void
update_rules_in_thread (GTask *gtask, gpointer source, gpointer task_data,
                        GCancellable *cancellable)
{
  RulesTask *task = task_data;
  g_autoptr (GError) error = NULL;
  MvRuntimeRequest req = { .machine_id = task->machine_id, .spec = task->spec };

  if (task->detach)
    {
      if (!task->network->detach (task->network, &req, &error))
        g_warning ("Machine %s: its TAP, ports and rules are left to the next start: %s",
                   task->machine_id, error->message);
    }
  else if (!task->network->update_rules (task->network, task->machine_id, task->spec,
                                         task->sleeping, &error))
    g_warning ("Machine %s: its new firewall rules are not in force: %s", task->machine_id,
               error->message);
  g_task_return_boolean (gtask, TRUE);
}

static void
network_later (MvMachine *machine, gboolean detach)
{
  MvReconciler *rec = machine->reconciler;
  RulesTask *task;

  task = g_new0 (RulesTask, 1);
  task->network = rec->host->network;
  task->machine_id = g_strdup (machine->id);
  task->spec = mv_spec_copy (machine->config->spec);
  task->sleeping = machine->status->state == MV_STATE_STANDBY;
  task->detach = detach;
  mv_reconciler_run_in_background (rec, update_rules_in_thread, task,
                                   (GDestroyNotify) rules_task_free);
}

static void
update_network_rules (MvMachine *machine)
{
  if (machine->reconciler->host->network && machine->config->spec->network_name &&
      mv_state_holds_reservations (machine->status->state))
    network_later (machine, FALSE);
}

static gboolean
guest_metadata_differs (const MvSpec *current, const MvSpec *wanted)
{
  g_autoptr (MvSpec) masked = without_guest_metadata (current, wanted);

  return !mv_spec_equal (masked, wanted);
}

/* The frozen guest cannot wake into another shape: it is thrown away, and
 * a machine on standby becomes Stopped, to boot afresh when next started. */
static void
discard_saved_state (MvMachine *machine, gboolean on_network)
{
  MvReconciler *rec = machine->reconciler;

  g_clear_pointer (&machine->status->saved_state, g_free);
  if (machine->status->state == MV_STATE_STANDBY)
    {
      gint64 now = mv_reconciler_now (rec);
      gboolean changed = mv_config_set_standby (machine->config, FALSE, now);

      changed |= mv_config_set_desired (machine->config, MV_DESIRED_STOPPED, now);
      if (changed)
        mv_machine_save_config (machine, NULL);
      mv_machine_set_state (machine, MV_STATE_STOPPED, NULL);
      /* Stopped now: it gives up its place on its network as a stop does. */
      if (on_network && rec->host->network)
        network_later (machine, TRUE);
    }
  /* The status no longer names it before it goes. */
  mv_machine_save_status (machine, NULL);
  mv_reconciler_retire_saved_state (machine);
}

/* A machine boots the image it was created with, at the digest pinned
 * then (a spec that leaves image_digest out keeps it); its overlay disk
 * may grow, never shrink (seed 002, Update). */
static gboolean
check_image_and_disk (const MvSpec *current, MvSpec *spec, GError **error)
{
  guint64 have = mv_spec_overlay_bytes (current);
  guint64 want = mv_spec_overlay_bytes (spec);

  /* A spec shown without secrets carries the image URL without its query
   * string: sent back, it names the same image. */
  if (current->image && spec->image && !g_str_equal (current->image, spec->image) &&
      strstr (spec->image, "://") && !strchr (spec->image, '?'))
    {
      g_autofree char *shown = mv_url_strip_query (current->image);

      if (g_str_equal (shown, spec->image))
        {
          g_free (spec->image);
          spec->image = g_strdup (current->image);
        }
    }
  if (g_strcmp0 (current->image, spec->image) != 0)
    return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT, "image: a machine boots the image it "
                         "was created with (%s); create another machine for another image",
                         current->image ? current->image : "none");
  if (spec->image && !spec->image_digest)
    spec->image_digest = g_strdup (current->image_digest);
  if (g_strcmp0 (current->image_digest, spec->image_digest) != 0)
    return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT, "image_digest: the machine is pinned "
                         "to %s", current->image_digest);
  if (have > 0 && want < have)
    {
      g_autofree char *want_text = mv_text_bytes (want);
      g_autofree char *have_text = mv_text_bytes (have);

      return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT, "disk_bytes: %s is smaller than the "
                           "machine's overlay disk of %s; a disk grows, it does not shrink",
                           want_text, have_text);
    }
  return TRUE;
}

/* A stopped machine is given new host devices at its next start; a
 * running one (or one on its way) has them plugged in at once. */
static gboolean
adds_devices_live (MvMachine *machine, const MvSpec *wanted)
{
  MvState state = machine->status->state;

  return state != MV_STATE_STOPPED && state != MV_STATE_FAILED && state != MV_STATE_STANDBY &&
         mv_spec_adds_host_devices (machine->config->spec, wanted);
}

gboolean
mv_reconciler_update (MvReconciler *rec, MvMachine *machine, MvSpec *spec_in,
                      MvLiveChangeFunc func, gpointer data, GError **error)
{
  g_autoptr (MvSpec) spec = spec_in;
  g_autoptr (MvSpec) booted = NULL;
  MvSpec *current = machine->config->spec;
  MvConfig *previous;
  gboolean discard, tell_guest, moves, rules, was_on_network, plug;

  /* A machine keeps the hypervisor it was created with unless the new
   * spec names another: the host's default is only for new machines. */
  if (!spec->hypervisor_type)
    {
      spec->hypervisor_type = g_strdup (current->hypervisor_type);
      g_free (spec->hypervisor_version);
      spec->hypervisor_version = g_strdup (current->hypervisor_version);
    }
  if (spec->id && g_strcmp0 (spec->id, machine->id) != 0)
    return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT, "id: %s is not this machine's ID (%s)",
                         spec->id, machine->id);
  g_free (spec->id);
  spec->id = g_strdup (current->id);
  /* A machine the host has become too small for may still have its
   * labels changed; a new size must be one it could start with. */
  if (!validate_spec (rec, spec,
                      mv_spec_vcpus (spec) != mv_spec_vcpus (current) ||
                        spec->memory_bytes != current->memory_bytes,
                      error))
    return FALSE;
  if (g_strcmp0 (spec->name, current->name) != 0)
    return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT,
                         "name: %s differs from the machine's name %s; use Rename", spec->name,
                         current->name);
  if (!check_image_and_disk (current, spec, error))
    return FALSE;
  plug = adds_devices_live (machine, spec);
  if (!only_live_fields_differ (current, spec, plug) &&
      !check_state (machine, "update", STATES (MV_STATE_STOPPED, MV_STATE_FAILED, MV_STATE_STANDBY),
                    error))
    return FALSE;
  if (plug)
    {
      if (!mv_reconciler_check_adding_devices (machine, spec, error) ||
          !mv_machine_hold (machine, "add-devices", error))
        return FALSE;
      booted = mv_spec_copy (current);
    }

  discard = machine->status->saved_state && mv_spec_shape_differs (current, spec);
  tell_guest = guest_metadata_differs (current, spec);
  rules = firewall_differs (current, spec);
  was_on_network = current->network_name != NULL;
  moves = current->network_name &&
          (g_strcmp0 (current->network_name, spec->network_name) != 0 ||
           g_strcmp0 (current->static_ip, spec->static_ip) != 0);
  previous = mv_config_copy (machine->config);
  if (mv_config_update_spec (machine->config, g_steal_pointer (&spec), mv_reconciler_now (rec)))
    {
      if (!mv_reconciler_commit_config (machine, previous, error))
        {
          if (plug)
            mv_machine_release (machine);
          return FALSE;
        }
      mv_machine_event (machine, MV_EVENT_UPDATED, NULL, NULL);
    }
  else
    mv_config_free (previous);
  /* The devices are the machine's from here, before any is plugged in. */
  if (plug)
    mv_fault_point ("add-devices", "recorded");
  if (discard)
    discard_saved_state (machine, was_on_network);
  /* Its address on the network it leaves, or the one it had before a
   * static_ip, is free for others at once (seed 002, Update). */
  if (moves)
    {
      g_autoptr (GError) local = NULL;

      if (!rec->host->network->forget (rec->host->network, machine->id, &local))
        mv_machine_log (machine, G_LOG_LEVEL_WARNING, "Machine %s (%s): its old address is "
                        "kept until it starts: %s", machine->config->spec->name, machine->id,
                        local->message);
    }
  if (tell_guest)
    mv_reconciler_update_guest (machine);
  if (rules)
    update_network_rules (machine);
  if (plug)
    mv_reconciler_add_devices (machine, g_steal_pointer (&booted), func, data);
  else
    func (machine, NULL, data);
  return TRUE;
}

gboolean
mv_reconciler_rename (MvReconciler *rec, MvMachine *machine, const char *name, GError **error)
{
  g_autoptr (MvSpec) spec = NULL;
  MvMachine *other;
  MvConfig *previous;

  if (!mv_name_validate ("name", name, error))
    return FALSE;
  if (g_strcmp0 (name, machine->config->spec->name) == 0)
    return TRUE;
  other = mv_reconciler_find (rec, name);
  if (other && other != machine)
    return mv_error_set (error, MV_ERROR_ALREADY_EXISTS,
                         "name: a machine called %s exists already", name);
  if (!check_state (machine, "rename", STATES (MV_STATE_STOPPED, MV_STATE_FAILED), error))
    return FALSE;

  previous = mv_config_copy (machine->config);
  spec = mv_spec_copy (machine->config->spec);
  g_free (spec->name);
  spec->name = g_strdup (name);
  g_autofree char *old_name = g_strdup (machine->config->spec->name);
  g_autofree char *was = g_strdup_printf ("was %s", old_name);
  mv_config_update_spec (machine->config, g_steal_pointer (&spec), mv_reconciler_now (rec));
  if (!mv_reconciler_commit_config (machine, previous, error))
    return FALSE;
  mv_reconciler_name_changed (rec, machine, old_name);
  mv_machine_event (machine, MV_EVENT_RENAMED, NULL, was);
  return TRUE;
}

gboolean
mv_reconciler_traffic (MvReconciler *rec, MvMachine *machine, guint64 sequence, gboolean *waking,
                       GError **error)
{
  MvStatus *status = machine->status;
  MvConfig *previous;

  *waking = FALSE;
  /* Events are handled in order, each once: an older or repeated one is
   * stale and changes nothing. */
  if (sequence <= status->traffic_sequence)
    return TRUE;
  status->traffic_sequence = sequence;
  mv_machine_save_status (machine, NULL);
  if (!machine->config->standby)
    return TRUE;

  mv_machine_log (machine, G_LOG_LEVEL_MESSAGE, "Machine %s (%s): traffic, waking it",
                  machine->config->spec->name, machine->id);
  previous = mv_config_copy (machine->config);
  mv_config_set_standby (machine->config, FALSE, mv_reconciler_now (rec));
  if (!mv_reconciler_commit_config (machine, previous, error))
    return FALSE;
  *waking = TRUE;
  return TRUE;
}

void
mv_reconciler_kick (MvMachine *machine)
{
  mv_reconciler_reconcile (machine);
}
