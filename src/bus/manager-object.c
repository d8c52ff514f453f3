/* org.microvmd1.Manager: defines machines, finds them, lists them, and
 * tells what the host offers. */
#include "manager-object.h"
#include "core/errors.h"
#include "machine-object.h"
#include "names.h"
#include "store/fault.h"
#include "polkit.h"
#include "reconcile/reconciler.h"

#include "config.h"


static const char *const features[] = {
  "idempotent-create",
  "async-lifecycle",
  "desired-state",
  "standby",
  "restart-policies",
  NULL,
};

void
mv_manager_announce_machine (MvDaemon *daemon, MvMachine *machine)
{
  machine->announced = TRUE;
  machine->announced_state = machine->status->state;
  sd_bus_emit_object_added (daemon->bus, machine->path);
  sd_bus_emit_signal (daemon->bus, MV_MANAGER_PATH, MV_MANAGER_IFACE, "MachineNew", "so",
                      machine->id, machine->path);
}

void
mv_manager_announce_removed (MvDaemon *daemon, MvMachine *machine)
{
  if (!machine->announced)
    return;
  /* The object must still be found while its removal is announced. */
  sd_bus_emit_object_removed (daemon->bus, machine->path);
  sd_bus_emit_signal (daemon->bus, MV_MANAGER_PATH, MV_MANAGER_IFACE, "MachineRemoved", "so",
                      machine->id, machine->path);
  machine->announced = FALSE;
}

static int
create_reply_existing (MvMachine *machine, sd_bus_message *call, guint64 flags)
{
  if (flags & MV_CREATE_START)
    {
      MvConfig *config = machine->config;
      if (mv_config_set_desired (config, MV_DESIRED_RUNNING, g_get_real_time ()))
        {
          g_autoptr (GError) error = NULL;
          if (!mv_store_save_config (machine->daemon->store, config, &error))
            {
              mv_bus_reply_gerror (call, error);
              return 1;
            }
          mv_machine_changed (machine, MV_PROP_ALL_CONFIG);
        }
      mv_reconciler_wait (machine, call, machine->path);
      return 1;
    }
  return sd_bus_reply_method_return (call, "o", machine->path);
}

static void
do_create (sd_bus_message *call, gpointer user_data)
{
  MvDaemon *daemon = user_data;
  const char *json = NULL;
  uint64_t flags = 0;
  g_autoptr (GError) error = NULL;
  g_autoptr (MvSpec) spec = NULL;
  g_autoptr (MvConfig) config = NULL;
  g_autoptr (MvStatus) status = NULL;
  g_autofree char *fingerprint = NULL;
  MvMachine *existing, *machine;
  MvRuntime *runtime;

  if (sd_bus_message_read (call, "st", &json, &flags) < 0)
    {
      sd_bus_reply_method_errorf (call, SD_BUS_ERROR_INVALID_ARGS, "Expected (st)");
      return;
    }
  if (flags & ~MV_CREATE_KNOWN_FLAGS)
    {
      sd_bus_reply_method_errorf (call, MV_BUS_ERROR_INVALID_ARGUMENT,
                                  "flags: unknown bits 0x%" G_GINT64_MODIFIER "x (known: 0x%" G_GINT64_MODIFIER "x)",
                                  (guint64) (flags & ~MV_CREATE_KNOWN_FLAGS),
                                  (guint64) MV_CREATE_KNOWN_FLAGS);
      return;
    }
  spec = mv_spec_from_json (json, &error);
  if (!spec || !mv_spec_validate_with_standby_min (spec, daemon->standby_min_seconds, &error))
    {
      mv_bus_reply_gerror (call, error);
      return;
    }

  /* A client retrying with the same ID gets the same machine. */
  fingerprint = mv_spec_fingerprint (spec);
  if (spec->id && (existing = g_hash_table_lookup (daemon->machines, spec->id)) && !existing->gone)
    {
      if (g_strcmp0 (existing->config->fingerprint, fingerprint) != 0)
        {
          sd_bus_reply_method_errorf (call, MV_BUS_ERROR_CONFLICT,
                                      "id: machine %s exists with a different spec", spec->id);
          return;
        }
      create_reply_existing (existing, call, flags);
      return;
    }
  existing = mv_daemon_find_machine (daemon, spec->name);
  if (existing)
    {
      sd_bus_reply_method_errorf (call, MV_BUS_ERROR_ALREADY_EXISTS,
                                  "name: a machine called %s exists already", spec->name);
      return;
    }
  if (!(runtime = mv_daemon_runtime_for_spec (daemon, spec, &error)))
    {
      mv_bus_reply_gerror (call, error);
      return;
    }

  /* A machine keeps the hypervisor it was created with, even when the
   * host's default changes; its fingerprint stays that of what was sent. */
  if (!spec->hypervisor_type)
    spec->hypervisor_type = g_strdup (runtime->type);
  if (!spec->id)
    spec->id = mv_id_new ();
  g_autofree char *id = g_strdup (spec->id);
  config = mv_config_new (id, g_steal_pointer (&spec), g_get_real_time ());
  g_free (config->fingerprint);
  config->fingerprint = g_steal_pointer (&fingerprint);
  if (flags & MV_CREATE_START)
    mv_config_set_desired (config, MV_DESIRED_RUNNING, config->created_at);
  status = mv_status_new ();
  if (!mv_store_create_machine (daemon->store, config, status, &error))
    {
      mv_bus_reply_gerror (call, error);
      return;
    }
  mv_fault_point ("create", "published");

  machine = mv_machine_new (daemon, g_steal_pointer (&config), g_steal_pointer (&status));
  g_log_structured (G_LOG_DOMAIN, G_LOG_LEVEL_MESSAGE, MV_LOG_FIELD_MACHINE_ID, machine->id,
                    "MESSAGE", "Machine %s (%s) defined", machine->config->spec->name, machine->id);
  mv_manager_announce_machine (daemon, machine);
  if (flags & MV_CREATE_START)
    mv_reconciler_wait (machine, call, machine->path);
  else
    sd_bus_reply_method_return (call, "o", machine->path);
}

static int
method_create_machine (sd_bus_message *m, void *userdata, sd_bus_error *error)
{
  const char *json = NULL;
  g_autoptr (MvSpec) spec = NULL;

  /* The name is only for polkit's rules and prompt; the spec is parsed
   * again, and checked, once the caller is authorized. */
  if (sd_bus_message_read (m, "s", &json) >= 0)
    spec = mv_spec_from_json (json, NULL);
  sd_bus_message_rewind (m, TRUE);

  const char *details[] = {
    "machine", spec && spec->name ? spec->name : "",
    "verb", "create",
    NULL,
  };
  mv_polkit_check (m, MV_ACTION_MACHINE_CREATE, details, do_create, userdata, NULL);
  return 1;
}

static int
method_get_machine (sd_bus_message *m, void *userdata, sd_bus_error *error)
{
  MvDaemon *daemon = userdata;
  const char *name_or_id = NULL;
  MvMachine *machine;
  int r = sd_bus_message_read (m, "s", &name_or_id);

  if (r < 0)
    return r;
  machine = mv_daemon_find_machine (daemon, name_or_id);
  if (!machine)
    return sd_bus_error_setf (error, MV_BUS_ERROR_NOT_FOUND, "No machine called %s", name_or_id);
  return sd_bus_reply_method_return (m, "o", machine->path);
}

typedef struct {
  MvDaemon *daemon;
  char     *name_or_id;
  guint64   sequence;
} TrafficCall;

static void
traffic_call_free (TrafficCall *t)
{
  g_free (t->name_or_id);
  g_free (t);
}

static void
do_restore_after_traffic (sd_bus_message *call, gpointer user_data)
{
  TrafficCall *t = user_data;
  MvMachine *machine = mv_daemon_find_machine (t->daemon, t->name_or_id);

  if (!machine)
    {
      sd_bus_reply_method_errorf (call, MV_BUS_ERROR_NOT_FOUND, "No machine called %s",
                                  t->name_or_id);
      return;
    }
  mv_reconciler_traffic (machine, t->sequence, call);
}

/* The network layer reports traffic for a machine; one on standby wakes. */
static int
method_restore_after_traffic (sd_bus_message *m, void *userdata, sd_bus_error *error)
{
  MvDaemon *daemon = userdata;
  const char *name_or_id = NULL;
  uint64_t sequence = 0;
  MvMachine *machine;
  TrafficCall *t;
  int r = sd_bus_message_read (m, "st", &name_or_id, &sequence);

  if (r < 0)
    return r;
  machine = mv_daemon_find_machine (daemon, name_or_id);
  if (!machine)
    return sd_bus_error_setf (error, MV_BUS_ERROR_NOT_FOUND, "No machine called %s", name_or_id);

  const char *details[] = {
    "machine", machine->config->spec->name,
    "machine_id", machine->id,
    "verb", "restore-after-traffic",
    NULL,
  };
  t = g_new0 (TrafficCall, 1);
  t->daemon = daemon;
  t->name_or_id = g_strdup (machine->id);
  t->sequence = sequence;
  mv_polkit_check (m, MV_ACTION_MACHINE_LIFECYCLE, details, do_restore_after_traffic, t,
                   (GDestroyNotify) traffic_call_free);
  return 1;
}

static gint
compare_by_name (gconstpointer a, gconstpointer b)
{
  const MvMachine *ma = *(MvMachine *const *) a;
  const MvMachine *mb = *(MvMachine *const *) b;
  return g_strcmp0 (ma->config->spec->name, mb->config->spec->name);
}

static int
method_list_machines (sd_bus_message *m, void *userdata, sd_bus_error *error)
{
  MvDaemon *daemon = userdata;
  g_autoptr (sd_bus_message) reply = NULL;
  g_autoptr (GPtrArray) sorted = g_ptr_array_sized_new (g_hash_table_size (daemon->machines));
  GHashTableIter iter;
  MvMachine *machine;
  int r;

  g_hash_table_iter_init (&iter, daemon->machines);
  while (g_hash_table_iter_next (&iter, NULL, (gpointer *) &machine))
    if (!machine->gone)
      g_ptr_array_add (sorted, machine);
  g_ptr_array_sort (sorted, compare_by_name);

  r = sd_bus_message_new_method_return (m, &reply);
  if (r >= 0)
    r = sd_bus_message_open_container (reply, 'a', "(ssso)");
  for (guint i = 0; r >= 0 && i < sorted->len; i++)
    {
      machine = sorted->pdata[i];
      r = sd_bus_message_append (reply, "(ssso)", machine->id, machine->config->spec->name,
                                 mv_state_to_string (machine->status->state), machine->path);
    }
  if (r >= 0)
    r = sd_bus_message_close_container (reply);
  if (r < 0)
    return r;
  return sd_bus_send (NULL, reply, NULL);
}

static int
get_version (sd_bus *bus, const char *path, const char *interface, const char *property,
             sd_bus_message *reply, void *userdata, sd_bus_error *error)
{
  return sd_bus_message_append (reply, "s", PACKAGE_VERSION);
}

static int
get_api_version (sd_bus *bus, const char *path, const char *interface, const char *property,
                 sd_bus_message *reply, void *userdata, sd_bus_error *error)
{
  return sd_bus_message_append (reply, "u", (uint32_t) MV_API_VERSION);
}

static int
get_features (sd_bus *bus, const char *path, const char *interface, const char *property,
              sd_bus_message *reply, void *userdata, sd_bus_error *error)
{
  return sd_bus_message_append_strv (reply, (char **) features);
}

static int
get_hypervisors (sd_bus *bus, const char *path, const char *interface, const char *property,
                 sd_bus_message *reply, void *userdata, sd_bus_error *error)
{
  MvDaemon *daemon = userdata;
  int r = sd_bus_message_open_container (reply, 'a', "(ss)");

  for (guint i = 0; r >= 0 && i < daemon->runtimes->len; i++)
    {
      MvRuntime *rt = daemon->runtimes->pdata[i];
      r = sd_bus_message_append (reply, "(ss)", rt->type, mv_daemon_runtime_version (daemon, rt));
    }
  if (r < 0)
    return r;
  return sd_bus_message_close_container (reply);
}

static int
get_invalid_records (sd_bus *bus, const char *path, const char *interface, const char *property,
                     sd_bus_message *reply, void *userdata, sd_bus_error *error)
{
  MvDaemon *daemon = userdata;
  int r = sd_bus_message_open_container (reply, 'a', "(ss)");

  for (guint i = 0; r >= 0 && i < daemon->invalid->len; i++)
    {
      MvInvalidRecord *rec = daemon->invalid->pdata[i];
      r = sd_bus_message_append (reply, "(ss)", rec->path, rec->reason);
    }
  if (r < 0)
    return r;
  return sd_bus_message_close_container (reply);
}

static const sd_bus_vtable manager_vtable[] = {
  SD_BUS_VTABLE_START (0),
  SD_BUS_PROPERTY ("Version", "s", get_version, 0, SD_BUS_VTABLE_PROPERTY_CONST),
  SD_BUS_PROPERTY ("APIVersion", "u", get_api_version, 0, SD_BUS_VTABLE_PROPERTY_CONST),
  SD_BUS_PROPERTY ("Features", "as", get_features, 0, SD_BUS_VTABLE_PROPERTY_CONST),
  SD_BUS_PROPERTY ("Hypervisors", "a(ss)", get_hypervisors, 0, SD_BUS_VTABLE_PROPERTY_CONST),
  SD_BUS_PROPERTY ("InvalidRecords", "a(ss)", get_invalid_records, 0, SD_BUS_VTABLE_PROPERTY_CONST),
  SD_BUS_METHOD_WITH_ARGS ("CreateMachine", SD_BUS_ARGS ("s", spec_json, "t", flags),
                           SD_BUS_RESULT ("o", machine), method_create_machine,
                           SD_BUS_VTABLE_UNPRIVILEGED),
  SD_BUS_METHOD_WITH_ARGS ("GetMachine", SD_BUS_ARGS ("s", name_or_id),
                           SD_BUS_RESULT ("o", machine), method_get_machine,
                           SD_BUS_VTABLE_UNPRIVILEGED),
  SD_BUS_METHOD_WITH_ARGS ("ListMachines", SD_BUS_NO_ARGS,
                           SD_BUS_RESULT ("a(ssso)", machines), method_list_machines,
                           SD_BUS_VTABLE_UNPRIVILEGED),
  SD_BUS_METHOD_WITH_ARGS ("RestoreAfterTraffic", SD_BUS_ARGS ("s", name_or_id, "t", sequence),
                           SD_BUS_RESULT ("b", woken), method_restore_after_traffic,
                           SD_BUS_VTABLE_UNPRIVILEGED),
  SD_BUS_SIGNAL_WITH_ARGS ("MachineNew", SD_BUS_ARGS ("s", id, "o", machine), 0),
  SD_BUS_SIGNAL_WITH_ARGS ("MachineRemoved", SD_BUS_ARGS ("s", id, "o", machine), 0),
  SD_BUS_VTABLE_END
};

int
mv_manager_object_register (MvDaemon *daemon)
{
  int r = sd_bus_add_object_vtable (daemon->bus, NULL, MV_MANAGER_PATH, MV_MANAGER_IFACE,
                                    manager_vtable, daemon);
  if (r >= 0)
    r = sd_bus_add_object_manager (daemon->bus, NULL, MV_MANAGER_PATH);
  return r;
}
