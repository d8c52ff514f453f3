/* The daemon: opens the bus, loads and recovers the records, serves the
 * manager and machine objects, and runs the main loop until told to stop.
 * VMMs are left running when it exits; the next daemon adopts them. */
#include "daemon.h"
#include "bus/machine-object.h"
#include "bus/manager-object.h"
#include "core/errors.h"
#include "names.h"
#include "reconcile/reconciler.h"
#include "hypervisor/runtime.h"

#include "config.h"

#include <glib-unix.h>
#include <systemd/sd-daemon.h>

static GPtrArray *registered_runtimes;

void
mv_daemon_add_runtime (MvDaemon *daemon, MvRuntime *runtime)
{
  g_ptr_array_add (daemon->runtimes, runtime);
}

const char *
mv_daemon_runtime_version (MvDaemon *daemon, MvRuntime *runtime)
{
  const char *version = g_hash_table_lookup (daemon->runtime_versions, runtime);
  return version ? version : "";
}

static gboolean
version_equal (const char *a, const char *b)
{
  /* "v1.16.0" and "1.16.0" are one version. */
  if (a[0] == 'v')
    a++;
  if (b[0] == 'v')
    b++;
  return g_str_equal (a, b);
}

MvRuntime *
mv_daemon_find_runtime (MvDaemon *daemon, const char *type, const char *version)
{
  if (!type || !*type)
    type = daemon->default_type;
  for (guint i = 0; i < daemon->runtimes->len; i++)
    {
      MvRuntime *rt = daemon->runtimes->pdata[i];

      if (type && g_strcmp0 (rt->type, type) != 0)
        continue;
      if (!version || !*version || version_equal (mv_daemon_runtime_version (daemon, rt), version))
        return rt;
    }
  return NULL;
}

MvRuntime *
mv_daemon_runtime_for_spec (MvDaemon *daemon, const MvSpec *spec, GError **error)
{
  MvRuntime *rt = mv_daemon_find_runtime (daemon, spec->hypervisor_type, spec->hypervisor_version);
  g_autoptr (GString) have = NULL;

  if (rt)
    return rt;
  if (!spec->hypervisor_version || !mv_daemon_find_runtime (daemon, spec->hypervisor_type, NULL))
    {
      g_set_error (error, MV_ERROR, MV_ERROR_UNSUPPORTED,
                   "hypervisor_type: %s is not available on this host",
                   spec->hypervisor_type ? spec->hypervisor_type : "no hypervisor");
      return NULL;
    }
  have = g_string_new (NULL);
  for (guint i = 0; i < daemon->runtimes->len; i++)
    {
      MvRuntime *other = daemon->runtimes->pdata[i];
      if (g_strcmp0 (other->type, spec->hypervisor_type) == 0)
        g_string_append_printf (have, "%s%s", have->len ? ", " : "",
                                mv_daemon_runtime_version (daemon, other));
    }
  g_set_error (error, MV_ERROR, MV_ERROR_UNSUPPORTED,
               "hypervisor_version: %s %s is not available on this host (it has %s)",
               spec->hypervisor_type, spec->hypervisor_version, have->str);
  return NULL;
}

MvMachine *
mv_daemon_find_machine (MvDaemon *daemon, const char *name_or_id)
{
  MvMachine *machine = g_hash_table_lookup (daemon->machines, name_or_id);
  GHashTableIter iter;

  if (machine && !machine->gone)
    return machine;
  g_hash_table_iter_init (&iter, daemon->machines);
  while (g_hash_table_iter_next (&iter, NULL, (gpointer *) &machine))
    if (!machine->gone && g_strcmp0 (machine->config->spec->name, name_or_id) == 0)
      return machine;
  return NULL;
}

MvMachine *
mv_daemon_find_machine_by_path (MvDaemon *daemon, const char *path)
{
  g_autofree char *id = NULL;
  MvMachine *machine;

  if (sd_bus_path_decode (path, MV_MACHINE_PREFIX, &id) <= 0 || !id)
    return NULL;
  machine = g_hash_table_lookup (daemon->machines, id);
  return machine && !machine->gone ? machine : NULL;
}

static gboolean
flush_machine (gpointer user_data)
{
  MvMachine *machine = user_data;

  machine->flush_id = 0;
  mv_machine_object_flush (machine);
  return G_SOURCE_REMOVE;
}

void
mv_machine_changed (MvMachine *machine, guint props)
{
  if (props == 0)
    return;
  machine->dirty |= props;
  /* One announcement per object per main loop turn, however many changes. */
  if (machine->flush_id == 0)
    machine->flush_id = g_idle_add (flush_machine, machine);
}

MvMachine *
mv_machine_new (MvDaemon *daemon, MvConfig *config, MvStatus *status)
{
  MvMachine *machine = g_new0 (MvMachine, 1);

  machine->daemon = daemon;
  machine->id = g_strdup (config->id);
  machine->path = mv_machine_object_path (config->id);
  machine->config = config;
  machine->status = status;
  machine->announced_state = status->state;
  g_queue_init (&machine->waiters);
  g_hash_table_insert (daemon->machines, machine->id, machine);
  return machine;
}

void
mv_machine_free (MvMachine *machine)
{
  g_autoptr (GError) error = g_error_new (MV_ERROR, MV_ERROR_UNAVAILABLE,
                                           "The daemon is shutting down");

  /* Calls still waiting get an answer rather than a timeout. */
  mv_reconciler_settle_waiters (machine, error);
  g_clear_handle_id (&machine->flush_id, g_source_remove);
  g_clear_handle_id (&machine->restart_timer, g_source_remove);
  mv_config_free (machine->config);
  mv_status_free (machine->status);
  g_free (machine->path);
  g_free (machine->id);
  g_free (machine);
}

void
mv_daemon_drop_machine (MvDaemon *daemon, MvMachine *machine)
{
  g_log_structured (G_LOG_DOMAIN, G_LOG_LEVEL_MESSAGE, MV_LOG_FIELD_MACHINE_ID, machine->id,
                    "MESSAGE", "Machine %s (%s) deleted", machine->config->spec->name, machine->id);
  /* Pending changes go out first, then the removal, while the object can
   * still be found; only then is it gone for everyone. */
  g_clear_handle_id (&machine->flush_id, g_source_remove);
  mv_machine_object_flush (machine);
  mv_manager_announce_removed (daemon, machine);
  machine->gone = TRUE;
  mv_reconciler_settle_waiters (machine, NULL);
  g_hash_table_remove (daemon->machines, machine->id);
}

static sd_bus *
open_bus (const char *address, GError **error)
{
  g_autoptr (sd_bus) bus = NULL;
  int r;

  if (!address || g_str_equal (address, "system"))
    r = sd_bus_open_system (&bus);
  else if (g_str_equal (address, "session"))
    r = sd_bus_open_user (&bus);
  else
    {
      r = sd_bus_new (&bus);
      if (r >= 0)
        r = sd_bus_set_address (bus, address);
      if (r >= 0)
        r = sd_bus_set_bus_client (bus, 1);
      if (r >= 0)
        r = sd_bus_start (bus);
    }
  if (r < 0)
    {
      g_set_error (error, G_IO_ERROR, g_io_error_from_errno (-r),
                   "Could not connect to the %s bus: %s", address ? address : "system",
                   g_strerror (-r));
      return NULL;
    }
  return g_steal_pointer (&bus);
}

typedef struct {
  const char *key;
  guint       min, max, fallback;
  gsize       offset;             /* of the guint in MvDaemon */
} LifecycleSetting;

/* The [lifecycle] group; data/microvmd.conf documents each key. */
static const LifecycleSetting lifecycle_settings[] = {
  { "stop-timeout-seconds", 1, 3600, 30, G_STRUCT_OFFSET (MvDaemon, stop_timeout_seconds) },
  { "standby-min-seconds", 1, 86400, MV_STANDBY_AFTER_MIN_SECONDS,
    G_STRUCT_OFFSET (MvDaemon, standby_min_seconds) },
  { "idle-sample-seconds", 1, 3600, 60, G_STRUCT_OFFSET (MvDaemon, idle_sample_seconds) },
  { "idle-cpu-percent", 1, 100, 5, G_STRUCT_OFFSET (MvDaemon, idle_cpu_percent) },
  { "restart-backoff-ms", 1, 600000, 1000, G_STRUCT_OFFSET (MvDaemon, restart_backoff_ms) },
  { "resync-seconds", 1, 3600, 30, G_STRUCT_OFFSET (MvDaemon, resync_seconds) },
};

static gboolean
load_config (MvDaemon *daemon, const char *path, gboolean explicit, GError **error)
{
  g_autoptr (GError) local = NULL;

  daemon->config = g_key_file_new ();
  for (guint i = 0; i < G_N_ELEMENTS (lifecycle_settings); i++)
    G_STRUCT_MEMBER (guint, daemon, lifecycle_settings[i].offset) = lifecycle_settings[i].fallback;

  if (!g_key_file_load_from_file (daemon->config, path, G_KEY_FILE_NONE, &local))
    {
      if (!explicit && g_error_matches (local, G_FILE_ERROR, G_FILE_ERROR_NOENT))
        return TRUE;
      g_propagate_prefixed_error (error, g_steal_pointer (&local), "%s: ", path);
      return FALSE;
    }
  for (guint i = 0; i < G_N_ELEMENTS (lifecycle_settings); i++)
    {
      const LifecycleSetting *s = &lifecycle_settings[i];
      guint64 v;

      if (!g_key_file_has_key (daemon->config, "lifecycle", s->key, NULL))
        continue;
      v = g_key_file_get_uint64 (daemon->config, "lifecycle", s->key, &local);
      if (local || v < s->min || v > s->max)
        {
          g_set_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT,
                       "%s: [lifecycle] %s must be %u to %u", path, s->key, s->min, s->max);
          return FALSE;
        }
      G_STRUCT_MEMBER (guint, daemon, s->offset) = (guint) v;
    }
  return TRUE;
}

void
mv_daemon_set_migration_guard (MvDaemon *daemon,
                               gboolean (*guard) (const char *machine_id, gpointer user_data),
                               gpointer user_data)
{
  daemon->migration_guard = guard;
  daemon->migration_guard_data = user_data;
}

static MvDaemonSetupFunc setup_func;

void
mv_daemon_set_setup_func (MvDaemonSetupFunc func)
{
  setup_func = func;
}

static const char *const hypervisor_types[] = { "cloud-hypervisor", "firecracker", "qemu" };

static gboolean
add_builtin_runtimes (MvDaemon *daemon, GError **error)
{
  g_autofree char *type = g_key_file_get_string (daemon->config, "daemon", "default-hypervisor",
                                                 NULL);

  if (type && !g_str_equal (type, "auto"))
    {
      if (!g_strv_contains ((const char *const *) hypervisor_types, type) &&
          !mv_daemon_find_runtime (daemon, type, NULL))
        {
          g_set_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT,
                       "%s: [daemon] default-hypervisor: '%s' is not one of auto, "
                       "cloud-hypervisor, firecracker, qemu", daemon->config_path, type);
          return FALSE;
        }
      daemon->default_type = g_steal_pointer (&type);
    }

  daemon->builtin_runtimes = mv_hypervisor_builtin_runtimes (daemon->config, error);
  if (!daemon->builtin_runtimes)
    {
      g_prefix_error (error, "%s: ", daemon->config_path);
      return FALSE;
    }
  for (guint i = 0; i < daemon->builtin_runtimes->len; i++)
    mv_daemon_add_runtime (daemon, daemon->builtin_runtimes->pdata[i]);
  return TRUE;
}

MvDaemon *
mv_daemon_new (const MvDaemonOptions *options, GError **error)
{
  g_autoptr (MvStore) store = NULL;
  MvDaemon *daemon;
  const char *config_path = options->config_path ? options->config_path : MV_DEFAULT_CONFIG_FILE;

  store = mv_store_new (options->state_dir ? options->state_dir : MV_DEFAULT_STATE_DIR,
                        options->runtime_dir ? options->runtime_dir : MV_DEFAULT_RUNTIME_DIR,
                        error);
  if (!store)
    return NULL;

  daemon = g_new0 (MvDaemon, 1);
  daemon->store = g_steal_pointer (&store);
  daemon->machines = g_hash_table_new_full (g_str_hash, g_str_equal, NULL,
                                            (GDestroyNotify) mv_machine_free);
  daemon->invalid = g_ptr_array_new_with_free_func ((GDestroyNotify) mv_invalid_record_free);
  daemon->runtimes = g_ptr_array_new ();
  daemon->runtime_versions = g_hash_table_new_full (NULL, NULL, NULL, g_free);
  daemon->loop = g_main_loop_new (NULL, FALSE);
  daemon->config_path = g_strdup (config_path);
  if (registered_runtimes)
    for (guint i = 0; i < registered_runtimes->len; i++)
      mv_daemon_add_runtime (daemon, registered_runtimes->pdata[i]);

  if (!load_config (daemon, config_path, options->config_path != NULL, error) ||
      !add_builtin_runtimes (daemon, error))
    {
      mv_daemon_free (daemon);
      return NULL;
    }

  daemon->bus_address = g_strdup (options->bus_address);
  return daemon;
}

void
mv_daemon_free (MvDaemon *daemon)
{
  if (!daemon)
    return;
  g_clear_pointer (&daemon->machines, g_hash_table_unref);
  if (daemon->bus_source)
    {
      g_source_destroy (daemon->bus_source);
      g_source_unref (daemon->bus_source);
    }
  if (daemon->bus)
    sd_bus_flush_close_unref (daemon->bus);
  g_clear_pointer (&daemon->invalid, g_ptr_array_unref);
  g_clear_pointer (&daemon->runtimes, g_ptr_array_unref);
  g_clear_pointer (&daemon->builtin_runtimes, g_ptr_array_unref);
  g_clear_pointer (&daemon->runtime_versions, g_hash_table_unref);
  g_free (daemon->default_type);
  g_free (daemon->bus_address);
  g_clear_pointer (&daemon->loop, g_main_loop_unref);
  g_clear_pointer (&daemon->config, g_key_file_unref);
  g_free (daemon->config_path);
  mv_store_free (daemon->store);
  g_free (daemon);
}

static void
read_runtime_versions (MvDaemon *daemon)
{
  for (guint i = 0; i < daemon->runtimes->len; i++)
    {
      MvRuntime *rt = daemon->runtimes->pdata[i];
      g_autoptr (GError) error = NULL;
      char *version = rt->version ? rt->version (rt, &error) : NULL;

      if (!version && error)
        g_warning ("Hypervisor %s: could not read its version: %s", rt->type, error->message);
      g_hash_table_insert (daemon->runtime_versions, rt, version ? version : g_strdup (""));
    }
}

/* The runtime of @type in @version, if it is not its type's default. */
static MvRuntime *
deprecated_runtime (MvDaemon *daemon, const char *type, const char *version)
{
  MvRuntime *rt = version && *version ? mv_daemon_find_runtime (daemon, type, version) : NULL;

  return rt && rt != mv_daemon_find_runtime (daemon, type, NULL) ? rt : NULL;
}

/* Seed 002, WarnDeprecatedHypervisorVersions: once after Recover, a
 * warning for each machine that names a deprecated hypervisor version or
 * whose guest runs on one, so that it can be moved off it in time. */
static void
warn_deprecated_versions (MvDaemon *daemon)
{
  GHashTableIter iter;
  MvMachine *machine;

  g_hash_table_iter_init (&iter, daemon->machines);
  while (g_hash_table_iter_next (&iter, NULL, (gpointer *) &machine))
    {
      const MvSpec *spec = machine->config->spec;
      JsonObject *vmm = machine->status->vmm;
      const char *running = vmm ? json_object_get_string_member_with_default (vmm, "version", NULL)
                                : NULL;
      const char *version = deprecated_runtime (daemon, spec->hypervisor_type, spec->hypervisor_version)
                              ? spec->hypervisor_version
                              : deprecated_runtime (daemon, spec->hypervisor_type, running)
                              ? running : NULL;
      MvRuntime *current = mv_daemon_find_runtime (daemon, spec->hypervisor_type, NULL);

      if (version && current)
        g_log_structured (G_LOG_DOMAIN, G_LOG_LEVEL_WARNING, MV_LOG_FIELD_MACHINE_ID, machine->id,
                          "MESSAGE", "Machine %s (%s) uses %s %s, a deprecated version; move it "
                          "to %s before that version is removed", spec->name, machine->id,
                          spec->hypervisor_type, version,
                          mv_daemon_runtime_version (daemon, current));
    }
}

static void
load_machines (MvDaemon *daemon)
{
  g_autoptr (GPtrArray) records = mv_store_load_machines (daemon->store, daemon->invalid);
  GHashTableIter iter;
  MvMachine *machine;

  for (guint i = 0; i < records->len; i++)
    {
      MvRecord *record = records->pdata[i];
      machine = mv_machine_new (daemon, g_steal_pointer (&record->config),
                                           g_steal_pointer (&record->status));
      mv_reconciler_recover (machine);
    }
  warn_deprecated_versions (daemon);
  /* StartOnBoot runs once every machine is recovered. */
  g_hash_table_iter_init (&iter, daemon->machines);
  while (g_hash_table_iter_next (&iter, NULL, (gpointer *) &machine))
    {
      mv_reconciler_start_on_boot (machine);
      machine->dirty = 0;
      machine->announced_state = machine->status->state;
    }
  g_message ("Loaded %u machines%s%u invalid records", g_hash_table_size (daemon->machines),
             daemon->invalid->len ? ", " : ", ", daemon->invalid->len);
}

static gboolean
on_quit_signal (gpointer user_data)
{
  MvDaemon *daemon = user_data;

  g_message ("Exiting; virtual machines keep running");
  sd_notify (0, "STOPPING=1");
  g_main_loop_quit (daemon->loop);
  return G_SOURCE_CONTINUE;
}

static gboolean
on_bus_failed (gpointer user_data)
{
  MvDaemon *daemon = user_data;

  g_warning ("Lost the bus connection; exiting");
  g_main_loop_quit (daemon->loop);
  return G_SOURCE_REMOVE;
}

static void
for_each_machine (MvDaemon *daemon, void (*func) (MvMachine *machine))
{
  GHashTableIter iter;
  MvMachine *machine;

  g_hash_table_iter_init (&iter, daemon->machines);
  while (g_hash_table_iter_next (&iter, NULL, (gpointer *) &machine))
    func (machine);
}

/* Looks at every machine again now and then: catches what no event
 * reported (a migration that ended, a clock that jumped). */
static gboolean
on_resync (gpointer user_data)
{
  for_each_machine (user_data, mv_reconciler_kick);
  return G_SOURCE_CONTINUE;
}

static gboolean
on_idle_sample (gpointer user_data)
{
  for_each_machine (user_data, mv_reconciler_sample_idle);
  return G_SOURCE_CONTINUE;
}

int
mv_daemon_run (MvDaemon *daemon, GError **error)
{
  GHashTableIter iter;
  MvMachine *machine;
  int r;

  read_runtime_versions (daemon);
  load_machines (daemon);

  /* Connected only now: a bus does not wait for a client that loads ten
   * thousand records before it reads its first message. */
  daemon->bus = open_bus (daemon->bus_address, error);
  if (!daemon->bus)
    return 1;

  /* Before the name is taken: whoever sees it may at once ask the daemon
   * to stop, and must find it ready to exit cleanly. */
  g_unix_signal_add (SIGTERM, on_quit_signal, daemon);
  g_unix_signal_add (SIGINT, on_quit_signal, daemon);

  mv_bus_errors_register ();
  r = mv_manager_object_register (daemon);
  if (r >= 0)
    r = mv_machine_object_register (daemon);
  if (r >= 0)
    r = sd_bus_request_name (daemon->bus, MV_BUS_NAME, 0);
  if (r < 0)
    {
      g_set_error (error, G_IO_ERROR, g_io_error_from_errno (-r),
                   "Could not serve %s on the bus: %s", MV_BUS_NAME, g_strerror (-r));
      return 1;
    }

  daemon->bus_source = mv_bus_source_attach (daemon->bus);
  g_source_set_callback (daemon->bus_source, on_bus_failed, daemon, NULL);

  g_hash_table_iter_init (&iter, daemon->machines);
  while (g_hash_table_iter_next (&iter, NULL, (gpointer *) &machine))
    {
      machine->announced = TRUE;
      mv_reconciler_kick (machine);
    }

  daemon->resync_timer = g_timeout_add_seconds (daemon->resync_seconds, on_resync, daemon);
  daemon->idle_timer = g_timeout_add_seconds (daemon->idle_sample_seconds, on_idle_sample, daemon);

  sd_notify (0, "READY=1");
  g_message ("microvmd %s serving %s", PACKAGE_VERSION, MV_BUS_NAME);
  g_main_loop_run (daemon->loop);

  /* Let operations under way finish writing their records. */
  for (gboolean busy = TRUE; busy;)
    {
      busy = FALSE;
      g_hash_table_iter_init (&iter, daemon->machines);
      while (g_hash_table_iter_next (&iter, NULL, (gpointer *) &machine))
        busy |= machine->busy;
      if (busy)
        g_main_context_iteration (NULL, TRUE);
    }
  g_clear_handle_id (&daemon->resync_timer, g_source_remove);
  g_clear_handle_id (&daemon->idle_timer, g_source_remove);
  sd_bus_release_name (daemon->bus, MV_BUS_NAME);
  return 0;
}

int
mv_daemon_main (int argc, char **argv, MvRuntime **runtimes)
{
  g_autofree char *bus = NULL, *state_dir = NULL, *runtime_dir = NULL, *config = NULL;
  gboolean verbose = FALSE, version = FALSE;
  g_autoptr (GError) error = NULL;
  const GOptionEntry entries[] = {
    { "bus", 0, 0, G_OPTION_ARG_STRING, &bus, "system, session or a bus address", "BUS" },
    { "state-dir", 0, 0, G_OPTION_ARG_FILENAME, &state_dir, "Where records are kept (" MV_DEFAULT_STATE_DIR ")", "DIR" },
    { "runtime-dir", 0, 0, G_OPTION_ARG_FILENAME, &runtime_dir, "Where sockets and logs live (" MV_DEFAULT_RUNTIME_DIR ")", "DIR" },
    { "config", 0, 0, G_OPTION_ARG_FILENAME, &config, "Configuration file (" MV_DEFAULT_CONFIG_FILE ")", "FILE" },
    { "verbose", 'v', 0, G_OPTION_ARG_NONE, &verbose, "Log debug messages", NULL },
    { "version", 0, 0, G_OPTION_ARG_NONE, &version, "Print the version and exit", NULL },
    { NULL }
  };
  g_autoptr (GOptionContext) context = g_option_context_new ("- run microVMs on this host");

  g_option_context_add_main_entries (context, entries, NULL);
  if (!g_option_context_parse (context, &argc, &argv, &error))
    {
      g_printerr ("microvmd: %s\n", error->message);
      return 2;
    }
  if (version)
    {
      g_print ("microvmd %s\n", PACKAGE_VERSION);
      return 0;
    }
  if (verbose)
    g_setenv ("G_MESSAGES_DEBUG", "all", TRUE);

  registered_runtimes = g_ptr_array_new ();
  for (guint i = 0; runtimes && runtimes[i]; i++)
    g_ptr_array_add (registered_runtimes, runtimes[i]);

  MvDaemonOptions options = {
    .bus_address = bus,
    .state_dir = state_dir,
    .runtime_dir = runtime_dir,
    .config_path = config,
  };
  MvDaemon *daemon = mv_daemon_new (&options, &error);
  int status = 1;

  if (daemon && setup_func)
    setup_func (daemon);
  if (daemon && mv_daemon_run (daemon, &error) == 0)
    status = 0;
  if (error)
    g_printerr ("microvmd: %s\n", error->message);
  mv_daemon_free (daemon);
  g_clear_pointer (&registered_runtimes, g_ptr_array_unref);
  return status;
}
