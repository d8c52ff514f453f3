/* What the reconciler's files share among themselves. */
#pragma once
#include "reconciler.h"

struct _MvReconciler {
  const MvHost        *host;
  MvReconcilerOptions  options;
  MvObserver           observer;
  const MvClock       *clock;
  GHashTable          *machines;     /* id -> MvMachine* */
  GPtrArray           *by_name;      /* the machines sorted by name; NULL when one came or went */
  GHashTable          *names;        /* name -> MvMachine*, every machine not gone */
  guint                resync_timer;
  guint                idle_timer;
  guint                recovering;   /* machines whose recovery is under way */
  guint                background;   /* deletions and pulls running off the main loop */
  GHashTable          *creating;     /* name -> MvCreate*: creates pulling their image
                                      * or writing their records */
  GHashTable          *invalid_ids;  /* machines whose records are invalid: left alone */
  GHashTable          *snapshots;    /* id -> MvSnapshot* */
  GHashTable          *snapshot_names; /* names of snapshots being taken or deleted */
  GHashTable          *snapshot_users; /* id -> how many restores and forks read it */
  GHashTable          *warm_building;  /* keys of the warm templates being built */
  GHashTable          *warm;           /* key -> MvSnapshot*: the templates there are */
  guint                warm_builds;    /* templates being built, keyed or not yet */
  MvResources          warm_held;      /* what the templates being built hold */
  /* Of that, what the templates built behind a start hold: they use room
   * nobody asked for, and give way to a start that needs it (admission.c). */
  MvResources          warm_behind_held;
  GCancellable        *warm_behind_cancel; /* theirs: cancelled when they give way */
  /* What the machines whose create starts them hold until they join the
   * table (steps.c, a first start). */
  MvResources          creates_held;
  MvOpStats            op_stats;     /* what the steps came to (steps.c) */
  GHashTable          *console_tokens; /* digest -> token (console.c); NULL: none yet */
  void               (*recovered) (gpointer data);
  gpointer             recovered_data;
};

gint64     mv_reconciler_now (MvReconciler *rec);
/* Timers on the reconciler's clock; remove sets *@id to 0. */
guint      mv_reconciler_timeout (MvReconciler *rec, guint ms, GSourceFunc func, gpointer data);
void       mv_reconciler_remove_timeout (MvReconciler *rec, guint *id);
/* The name index follows a machine that came, was renamed from @old_name
 * or went (machine.c, requests.c, steps.c). */
void       mv_reconciler_name_added (MvReconciler *rec, MvMachine *machine);
void       mv_reconciler_name_changed (MvReconciler *rec, MvMachine *machine, const char *old_name);
void       mv_reconciler_name_removed (MvReconciler *rec, MvMachine *machine);
/* Warm templates (warm.c). The key of @req's machine (@req->blocks
 * readied): what a template must have been built from to stand for it;
 * NULL with MV_ERROR_UNSUPPORTED where none can. Worker thread. */
char      *mv_reconciler_warm_key (MvRuntime *runtime, const MvRuntimeRequest *req,
                                   GError **error);
/* Builds the warm template @key for machines like @spec in the
 * background, unless one is being built. Main thread. */
void       mv_reconciler_build_warm (MvReconciler *rec, MvRuntime *runtime, const MvSpec *spec,
                                     const MvImageConfig *image_config, const char *key);
/* Every machine in the table, gone or not, in no order; free the array. */
GPtrArray *mv_reconciler_all (MvReconciler *rec);
MvRuntime *mv_reconciler_runtime_for (MvMachine *machine, GError **error);
/* MV_ERROR_CONFLICT naming the volume and its holder if @machine cannot
 * start with the volumes its spec mounts (volume-holds.c). */
gboolean   mv_reconciler_check_volume_holds (MvMachine *machine, GError **error);
/* device-holds.c: a host device is one started machine's. */
gboolean   mv_reconciler_check_device_holds (MvMachine *machine, const MvSpec *spec,
                                             GError **error);
/* device-adds.c: whether host devices may be plugged into running
 * @machine, as @spec adds them; then, with the phase held and @spec
 * recorded, plugs them in and calls @func. */
gboolean   mv_reconciler_check_adding_devices (MvMachine *machine, const MvSpec *spec,
                                               GError **error);
void       mv_reconciler_add_devices (MvMachine *machine, MvSpec *booted /* owned */,
                                      MvLiveChangeFunc func, gpointer data);
gboolean   mv_reconciler_is_migrating (MvMachine *machine);
/* Forgets every console token (console.c). */
void       mv_reconciler_console_free (MvReconciler *rec);
typedef enum {
  MV_ADMIT_NO,
  MV_ADMIT_YES,
  MV_ADMIT_WAIT,    /* once the templates built behind starts have given way */
} MvAdmit;
/* Admits a start of @machine (admission.c): MV_ADMIT_YES with *@admitted
 * the size it starts with, for the caller to note in its status as it
 * becomes Starting; MV_ADMIT_NO with MV_ERROR_RESOURCE_EXHAUSTED and the
 * numbers; or MV_ADMIT_WAIT: it fits once the templates being built
 * behind starts, told to give way now, have let go (the machine is
 * reconciled again then, warm.c). */
MvAdmit    mv_reconciler_admit (MvMachine *machine, MvResources *admitted, GError **error);
/* A warm template of @spec's size is to boot: admitted as a start is,
 * and held until its build lets go of it; or MV_ERROR_RESOURCE_EXHAUSTED.
 * One built @behind a start gives way to a start that needs its room. */
gboolean   mv_reconciler_admit_warm_build (MvReconciler *rec, const MvSpec *spec, gboolean behind,
                                           GError **error);
void       mv_reconciler_release_warm_build (MvReconciler *rec, const MvSpec *spec, gboolean behind);
/* A first start planned with its machine's create: admitted only if it
 * fits now, with nothing to wait for (*@admitted its size); held by the
 * reconciler until released, as the machine joins the table holding it
 * itself, or is not made. */
gboolean   mv_reconciler_admit_first_start (MvReconciler *rec, const MvSpec *spec,
                                            MvResources *admitted);
void       mv_reconciler_release_first_start (MvReconciler *rec, const MvResources *admitted);
/* Whether @want fits beside @held, which counts the templates being
 * built (mv_reconciler_held); else MV_ERROR_RESOURCE_EXHAUSTED naming
 * @name and telling what the machines hold from what the templates do. */
gboolean   mv_reconciler_fits_beside (MvReconciler *rec, const char *name,
                                      const MvResources *want, const MvResources *held,
                                      GError **error);
/* Tells the templates being built behind starts to give way (warm.c). */
void       mv_reconciler_warm_give_way (MvReconciler *rec);
/* MV_ERROR_INVALID_ARGUMENT unless a machine of @spec's size could ever
 * start here. */
gboolean   mv_reconciler_check_spec_size (MvReconciler *rec, const MvSpec *spec, GError **error);

/* Reports to the observer. */
void       mv_machine_changed (MvMachine *machine, guint props);
/* @generation: the desired generation @failure is about (see MvObserver);
 * ignored without a failure. */
void       mv_machine_settled (MvMachine *machine, const GError *failure, guint64 generation);
/* Settled with @failure about what is desired now. */
void       mv_machine_failed_now (MvMachine *machine, const GError *failure);

/* Tells the observer of an event of @kind about @machine (events.c);
 * @operation_id and @message may be NULL. */
void       mv_machine_event (MvMachine *machine, MvEventKind kind, const char *operation_id,
                             const char *message);
/* The same for an event the caller filled in (an exit code, a snapshot):
 * its time is set here. */
void       mv_reconciler_event (MvReconciler *rec, MvEvent *event);

/* Records: a status or config write that fails is logged; the caller that
 * must not go on without it checks the result. */
gboolean   mv_machine_save_status (MvMachine *machine, GError **error);
/* Record writes off the main loop (record-writes.c): one is begun before
 * the record is changed (@config: the config), so that nothing of the
 * change is shown or announced before it is on disk; then the record as it is now is written in a
 * worker thread, and @done called on the main thread with the machine and
 * the failure, if any. A status write's caller keeps the machine busy;
 * a config write holds off every step that has not begun, but one under
 * way may delete the machine: @done is then given NULL and NotFound. What changed is announced
 * once every write begun so far is done. */
typedef void (*MvRecordSaved) (MvMachine *machine, const GError *error, gpointer data);
void       mv_machine_begin_record_write (MvMachine *machine, gboolean config);
/* Ends what was begun without a write after all. */
void       mv_machine_end_record_write (MvMachine *machine);
void       mv_machine_save_status_async (MvMachine *machine, MvRecordSaved done, gpointer data,
                                         GDestroyNotify free);
/* A status write, then @then in the same worker once it is on disk (or,
 * with @regardless, whatever came of it), given @then_data as its task's
 * data; @then_done gets @then_data too, and owns it. @done hears of the
 * write on the main thread before @then_done hears of @then; if the write
 * failed and @then was not run, @then_done gets MV_ERROR_FAILED.
 *
 * With @ahead, *@ahead (the caller's to free, once @then_done has run) lets
 * @then write the status that follows on its own, ahead of the main
 * thread: mv_record_ahead_base() is a copy of the status as written here,
 * which @then changes and gives to mv_record_ahead_write(). Back on the
 * main thread, once the machine's status is what it makes of @then's
 * result, mv_record_ahead_taken() says whether that is what is on disk
 * already; if so, mv_machine_status_written_ahead() finishes it as
 * mv_machine_save_status_async() would have, begun as it is with
 * mv_machine_begin_record_write(). If not, the status is written as
 * usual, after what @then wrote. */
typedef struct _MvRecordAhead MvRecordAhead;
void       mv_machine_save_status_then (MvMachine *machine, MvRecordSaved done, gpointer data,
                                        gboolean regardless, GTaskThreadFunc then,
                                        GAsyncReadyCallback then_done, gpointer then_data,
                                        MvRecordAhead **ahead);
MvStatus  *mv_record_ahead_base (const MvRecordAhead *ahead);
void       mv_record_ahead_write (MvRecordAhead *ahead, MvStatus *status);
gboolean   mv_record_ahead_taken (MvMachine *machine, const MvRecordAhead *ahead);
void       mv_machine_status_written_ahead (MvMachine *machine, const MvRecordAhead *ahead,
                                            MvRecordSaved done, gpointer data);
void       mv_record_ahead_free (MvRecordAhead *ahead);
/* The same for a machine whose records are still to be made (with
 * @status's phase in them: steps.c, a first start): made on the main
 * thread; mv_record_ahead_set_base() on the worker once the records are
 * on disk; mv_machine_take_record_ahead() as the machine joins, before
 * any status write of its own is begun. */
MvRecordAhead *mv_record_ahead_new (MvRecords *records, const char *machine_id);
void       mv_record_ahead_set_base (MvRecordAhead *ahead, const MvStatus *written);
void       mv_machine_take_record_ahead (MvMachine *machine, const MvRecordAhead *ahead);
/* @props: the MvMachineProp bits of what the change touched. */
void       mv_machine_save_config_async (MvMachine *machine, guint props, MvRecordSaved done,
                                         gpointer data, GDestroyNotify free);
MvRecordWriter *mv_record_writer_new (void);
void       mv_record_writer_unref (MvRecordWriter *writer);
gboolean   mv_machine_save_config (MvMachine *machine, GError **error);
void       mv_machine_set_state (MvMachine *machine, MvState state, const char *error);
void       mv_machine_set_failed (MvMachine *machine, const char *why);
void       mv_machine_clear_vmm (MvMachine *machine);
/* The request every host layer is given for @machine: borrowed from the
 * machine, for the main thread only. @runtime_dir is the caller's. */
MvRuntimeRequest mv_machine_request (MvMachine *machine, const char *runtime_dir);

/* An operation beside the steps (a snapshot, a resize) holds @machine:
 * @phase and a new operation ID are recorded before the host is touched
 * (FALSE, the machine left as it was, if they cannot be), and nothing
 * else runs on it until it is released. */
gboolean   mv_machine_hold (MvMachine *machine, const char *phase, GError **error);
void       mv_machine_release (MvMachine *machine);
/* MV_ERROR_INVALID_STATE if @machine is held, gone or migrating. */
gboolean   mv_machine_check_not_busy (MvMachine *machine, GError **error);

/* A copy of a VMM identity that shares nothing with @vmm: what a worker
 * thread is given. */
JsonObject *mv_reconciler_copy_vmm (JsonObject *vmm);

/* Steps and what follows them. */
void       mv_reconciler_reconcile (MvMachine *machine);
/* A machine's first start, planned with its create (steps.c): its phase
 * is put in @status, the status its records are made with, so that one
 * worker writes the records, takes the step and records its outcome,
 * and the main thread hears of each without being waited for. NULL,
 * @status untouched, where the start is planned once the machine has
 * joined the table instead: it mounts volumes or holds host devices,
 * which are checked against every machine in the table, or it does not
 * fit beside what is held now.
 *
 * Once the records are on disk as @written says, the worker calls
 * mv_reconciler_first_start_in_thread(), which sends @joined to the main
 * thread and takes the step in @gtask. @joined adds the machine to the
 * table and calls mv_reconciler_first_start_joined(); the task's
 * callback then hands its result and @task to
 * mv_reconciler_first_start_done(), which goes on as after any step. If
 * the records were not written, mv_step_task_free() gives back what the
 * start held. */
typedef struct _MvStepTask MvStepTask;
MvStepTask *mv_reconciler_plan_first_start (MvReconciler *rec, MvRuntime *runtime,
                                            const MvConfig *config, MvStatus *status);
void       mv_reconciler_first_start_in_thread (MvStepTask *task, const MvStatus *written,
                                                GTask *gtask, GSourceFunc joined,
                                                gpointer joined_data);
void       mv_reconciler_first_start_joined (MvMachine *machine, MvStepTask *task);
void       mv_reconciler_first_start_done (GAsyncResult *result, MvStepTask *task);
void       mv_step_task_free (MvStepTask *task);
void       mv_reconciler_handle_end (MvMachine *machine, gboolean has_exit_code, int exit_code,
                                     const char *reason);
void       mv_reconciler_watch_vmm (MvMachine *machine, MvRuntime *runtime);
void       mv_reconciler_unwatch_vmm (MvMachine *machine);
void       mv_reconciler_schedule_restart (MvMachine *machine);
void       mv_reconciler_cancel_restart (MvMachine *machine);
/* Moves the frozen guest out of the way now and deletes it off the main
 * loop. */
void       mv_reconciler_retire_saved_state (MvMachine *machine);
/* Deletes, off the main loop, what was retired of the storage of the
 * machines @machine_ids (taken). */
void       mv_reconciler_sweep_later (MvReconciler *rec, char **machine_ids);

/* Worker threads (workers.c). */
/* Runs @func on one of the reconciler's workers, as g_task_run_in_thread()
 * would on GLib's, with a task whose data is @data (freed with @free);
 * then @done (@done_data) on the main thread, with that task. */
void       mv_reconciler_run_task (GTaskThreadFunc func, gpointer data, GDestroyNotify free,
                                   GAsyncReadyCallback done, gpointer done_data);
/* From a worker (or the main thread): @func (@data, freed with @free
 * after) runs on the main thread, after everything sent before it and
 * every task that returned before it. */
void       mv_reconciler_send (GSourceFunc func, gpointer data, GDestroyNotify free);
/* On the main thread, while a result handed back from a worker is being
 * handled: @func (@data, freed with @free after) runs once the results
 * handed back with it have been, before anything else the main loop does
 * and before any result handed back later. Otherwise at once. For what
 * only tells of a result, so that what the others begin is not kept
 * waiting for it. */
void       mv_reconciler_later (GSourceFunc func, gpointer data, GDestroyNotify free);
/* mv_reconciler_run_task() with @done given no data of its own. */
void       mv_reconciler_run_in_thread (GTaskThreadFunc func, GAsyncReadyCallback done,
                                        gpointer data, GDestroyNotify free);
/* Runs @func in a worker thread with nobody waiting for it; the reconciler
 * is busy until it is done, so the host layers outlive it. */
void       mv_reconciler_run_in_background (MvReconciler *rec, GTaskThreadFunc func,
                                            gpointer data, GDestroyNotify free);

/* Guest agents (guest.c). */
void       mv_reconciler_listen_to_guests (MvReconciler *rec);
void       mv_reconciler_attach_guest (MvMachine *machine, MvRuntime *runtime);
/* Forgets what the agent said; @runtime may be NULL. */
void       mv_reconciler_detach_guest (MvMachine *machine, MvRuntime *runtime);
/* The guest restored from a frozen state is told its identity. */
void       mv_reconciler_reidentify_guest (MvMachine *machine, MvRuntime *runtime,
                                           const MvNetworkAttachment *network);
/* Gives the running guest its spec's hostname, keys and metadata. */
void       mv_reconciler_update_guest (MvMachine *machine);

/* Idleness (idle.c). */
void       mv_reconciler_sample_idle (MvMachine *machine);
void       mv_machine_reset_idle (MvMachine *machine);

MvMachine *mv_machine_new (MvReconciler *rec, MvConfig *config, MvStatus *status);
void       mv_machine_free (MvMachine *machine);

/* Requests (requests.c) that snapshots share. */
/* Everything a spec must pass before it is recorded; its runtime. */
MvRuntime *mv_reconciler_validate_spec (MvReconciler *rec, MvSpec *spec, GError **error);
gboolean   mv_reconciler_check_name_free (MvReconciler *rec, const MvSpec *spec, GError **error);
/* Records a new machine: @spec validated, its name free; @forking: its
 * status says it is a fork not yet whole. */
MvMachine *mv_reconciler_record_machine (MvReconciler *rec, MvRuntime *runtime, MvSpec *spec,
                                         char *fingerprint, MvImageConfig *image_config,
                                         gboolean start, gboolean forking, GError **error);
/* Writes the changed config; if it cannot be, @previous is what the
 * machine keeps. @previous is taken. */
gboolean   mv_reconciler_commit_config (MvMachine *machine, MvConfig *previous, GError **error);

/* Snapshots (snapshots.c). */
void       mv_reconciler_release_snapshot (MvReconciler *rec, const char *id);
/* A fork's wish settled (mv_machine_settled), or its machine is gone. */
void       mv_reconciler_fork_settled (MvMachine *machine, const GError *failure);
void       mv_reconciler_fork_gone (MvMachine *machine);
/* After Recover: an interrupted restore is done again; an interrupted
 * fork goes. */
void       mv_reconciler_finish_restore (MvMachine *machine);
void       mv_reconciler_drop_fork (MvMachine *machine);
void       mv_reconciler_warn_deprecated_snapshots (MvReconciler *rec);
