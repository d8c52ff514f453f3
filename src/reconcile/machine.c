/* A machine as the reconciler keeps it: how it logs, records itself and
 * tells the observer what changed. */
#include "reconciler-private.h"
#include "core/errors.h"
#include "names.h"
#include "util/log.h"

#include <stdarg.h>
#include <string.h>

void
mv_machine_log (const MvMachine *machine, GLogLevelFlags level, const char *format, ...)
{
  va_list args;

  va_start (args, format);
  mv_log_machine_valist (level, machine->id, machine->status->operation_id,
                         machine->status->phase, format, args);
  va_end (args);
}

gboolean
mv_machine_is_active (const MvMachine *machine)
{
  MvState s = machine->status->state;

  return mv_state_holds_resources (s) || s == MV_STATE_STANDBY || s == MV_STATE_STOPPING ||
         machine->busy;
}

void
mv_machine_changed (MvMachine *machine, guint props)
{
  MvReconciler *rec = machine->reconciler;

  if (props && rec->observer.changed)
    rec->observer.changed (machine, props, rec->observer.data);
}

void
mv_machine_settled (MvMachine *machine, const GError *failure, guint64 generation)
{
  MvReconciler *rec = machine->reconciler;

  mv_reconciler_fork_settled (machine, failure);
  if (rec->observer.settled)
    rec->observer.settled (machine, failure, generation, rec->observer.data);
}

void
mv_machine_failed_now (MvMachine *machine, const GError *failure)
{
  mv_machine_settled (machine, failure, machine->config->desired_generation);
}

void
mv_machine_set_state (MvMachine *machine, MvState state, const char *why)
{
  MvStatus *status = machine->status;
  guint props = 0;
  /* Everyone reads StateError: it keeps a failure's reason, its first
   * line, and not the console's lines that may follow. */
  g_autofree char *error = why ? g_strndup (why, strcspn (why, "\n")) : NULL;

  if (status->state != state)
    {
      /* A move the state machine does not know is a bug here. */
      if (!mv_state_can_transition (status->state, state))
        mv_machine_log (machine, G_LOG_LEVEL_CRITICAL, "Machine %s: unexpected move from %s to %s",
                        machine->id, mv_state_to_string (status->state),
                        mv_state_to_string (state));
      mv_machine_log (machine, G_LOG_LEVEL_MESSAGE, "Machine %s (%s): %s -> %s%s%s",
                      machine->config->spec->name, machine->id,
                      mv_state_to_string (status->state), mv_state_to_string (state),
                      error ? ": " : "", error ? error : "");
      status->state = state;
      props |= MV_PROP_STATE;
    }
  if (g_strcmp0 (status->state_error, error) != 0)
    {
      g_free (status->state_error);
      status->state_error = g_strdup (error);
      props |= MV_PROP_STATE_ERROR;
    }
  mv_machine_changed (machine, props);
}

void
mv_machine_set_failed (MvMachine *machine, const char *why)
{
  machine->status->failed_generation = machine->config->desired_generation;
  mv_machine_set_state (machine, MV_STATE_FAILED, why);
}

void
mv_machine_clear_vmm (MvMachine *machine)
{
  MvStatus *status = machine->status;

  g_clear_pointer (&status->vmm, json_object_unref);
  status->started_at = 0;
  mv_machine_reset_idle (machine);
  mv_machine_changed (machine, MV_PROP_STARTED_AT);
}

MvRuntimeRequest
mv_machine_request (MvMachine *machine, const char *runtime_dir)
{
  MvRuntimeRequest req = {
    .machine_id = machine->id,
    .spec = machine->config->spec,
    .runtime_dir = runtime_dir,
    .vmm = machine->status->vmm,
    .image_config = machine->config->image_config,
    .console_keys = machine->console_keys,
  };
  return req;
}

MvRuntime *
mv_reconciler_runtime_for (MvMachine *machine, GError **error)
{
  return mv_runtimes_for_spec (machine->reconciler->host->runtimes, machine->config->spec, error);
}

gboolean
mv_reconciler_is_migrating (MvMachine *machine)
{
  MvReconcilerOptions *o = &machine->reconciler->options;

  return o->migration_guard && o->migration_guard (machine->id, o->migration_guard_data);
}

void
mv_machine_free (MvMachine *machine)
{
  MvReconciler *rec = machine->reconciler;

  mv_reconciler_remove_timeout (rec, &machine->restart_timer);
  /* A fork still waited on (the daemon is leaving): its caller is told. */
  mv_reconciler_fork_gone (machine);
  mv_reconciler_unwatch_vmm (machine);
  g_clear_object (&machine->step_cancellable);
  g_free (machine->end_reason);
  g_free (machine->agent_version);
  g_free (machine->run_operation_id);
  g_free (machine->health);
  g_clear_pointer (&machine->console_keys, g_ptr_array_unref);
  mv_record_writer_unref (machine->record_writer);
  mv_status_free (machine->shown_status);
  mv_config_free (machine->shown_config);
  mv_config_free (machine->config);
  mv_status_free (machine->status);
  g_free (machine->id);
  g_free (machine);
}

MvMachine *
mv_machine_new (MvReconciler *rec, MvConfig *config, MvStatus *status)
{
  MvMachine *machine = g_new0 (MvMachine, 1);

  machine->reconciler = rec;
  machine->id = g_strdup (config->id);
  machine->config = config;
  machine->status = status;
  machine->record_writer = mv_record_writer_new ();
  g_hash_table_insert (rec->machines, machine->id, machine);
  mv_reconciler_name_added (rec, machine);
  g_clear_pointer (&rec->by_name, g_ptr_array_unref);
  return machine;
}

/* Holds @machine for an operation, with @phase recorded before the host
 * is touched; FALSE (the machine left as it was) if it cannot be. */
gboolean
mv_machine_hold (MvMachine *machine, const char *phase, GError **error)
{
  MvStatus *status = machine->status;
  g_autofree char *old_phase = g_strdup (status->phase);
  g_autofree char *old_operation = g_strdup (status->operation_id);

  g_free (status->phase);
  status->phase = g_strdup (phase);
  g_free (status->operation_id);
  status->operation_id = mv_id_new ();
  if (!mv_machine_save_status (machine, error))
    {
      g_free (status->phase);
      status->phase = g_steal_pointer (&old_phase);
      g_free (status->operation_id);
      status->operation_id = g_steal_pointer (&old_operation);
      return FALSE;
    }
  machine->busy = TRUE;
  mv_machine_changed (machine, MV_PROP_PHASE);
  mv_machine_log (machine, G_LOG_LEVEL_DEBUG, "Machine %s: %s", machine->id, phase);
  return TRUE;
}

/* The operation on @machine is over: the phase goes, and the machine is
 * looked at again. */
void
mv_machine_release (MvMachine *machine)
{
  MvStatus *status = machine->status;

  machine->busy = FALSE;
  g_clear_pointer (&status->phase, g_free);
  g_clear_pointer (&status->operation_id, g_free);
  mv_machine_changed (machine, MV_PROP_PHASE);
  mv_machine_save_status (machine, NULL);
}

gboolean
mv_machine_check_not_busy (MvMachine *machine, GError **error)
{
  if (machine->busy || machine->gone || mv_reconciler_is_migrating (machine))
    return mv_error_set (error, MV_ERROR_INVALID_STATE,
                         "Machine %s is busy with another operation; try again once it is done",
                         machine->config->spec->name);
  return TRUE;
}

