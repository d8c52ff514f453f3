/* The daemon: reads its configuration, loads the records, builds the host
 * layers and the reconciler, and serves the bus once every machine is
 * recovered. VMMs are left running when it exits; the next daemon adopts
 * them. */
#include "daemon.h"
#include "bus/service.h"
#include "console-bridge.h"
#include "core/errors.h"
#include "hypervisor/runtime.h"
#include "names.h"
#include "network/dns.h"
#include "network/host-network.h"
#include "prometheus.h"
#include "reconcile/reconciler.h"
#include "storage/images.h"
#include "storage/networks.h"
#include "storage/snapshots.h"
#include "storage/storage.h"
#include "storage/volumes.h"
#include "store/event-log.h"
#include "store/log-rotation.h"
#include "store/metrics.h"
#include "store/store.h"
#include "util/log.h"

#include "config.h"

#include <glib-unix.h>
#include <glib/gi18n.h>
#include <locale.h>
#include <systemd/sd-daemon.h>
#include <string.h>
#include <unistd.h>

struct _MvDaemon {
  char               *bus_address;
  sd_bus             *bus;             /* connected once every machine is recovered */
  GSource            *bus_source;
  MvStore            *store;
  GPtrArray          *invalid;         /* MvInvalidRecord* found at startup */
  GPtrArray          *runtimes;        /* MvRuntime*, in the order offered */
  GPtrArray          *builtin_runtimes; /* owns the built-in ones among them */
  GThread            *version_probe;   /* asks them their versions while records load */
  char               *default_type;    /* [daemon] default-hypervisor; NULL = the first */
  MvHost              host;
  MvReconcilerOptions options;
  MvEventLog         *events;          /* what happened to machines */
  MvReconciler       *reconciler;
  guint               metrics_sample_seconds; /* [metrics] sample-seconds */
  MvMetricsSampler   *metrics;
  guint64             logs_max_bytes;      /* [logs] max-bytes */
  guint               logs_check_seconds;  /* [logs] check-seconds */
  MvLogRotator       *logs;
  GSocketAddress     *prometheus_address; /* [prometheus] listen; NULL: not served */
  guint               prometheus_max_connections; /* [prometheus] max-connections */
  MvPrometheus       *prometheus;
  GSocketAddress     *console_address;  /* [console] listen; NULL: no bridge */
  GTlsCertificate    *console_tls;      /* [console] tls-certificate and tls-key */
  MvConsoleBridge    *console;
  MvBusService       *service;
  MvImageStore       *images;          /* the cache of images machines boot */
  MvVolumeStore      *volumes;         /* the volumes machines mount */
  MvNetworkStore     *networks;        /* the networks' records */
  GDBusConnection    *nm_bus;          /* where NetworkManager is found */
  MvNm               *nm;
  MvHostNetwork      *host_network;
  MvDns              *dns;             /* on every network's gateway */
  MvNetworkHooks      network_hooks;
  GMainLoop          *loop;
  char               *config_path;
  GKeyFile           *config;
  gboolean            recovered;
  gboolean            bus_lost;
};

static GPtrArray *registered_runtimes;

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
  gsize       offset;             /* of the guint in MvReconcilerOptions */
} LifecycleSetting;

/* The [lifecycle] group the reconciler needs; data/microvmd.conf documents
 * each key. The hypervisor layer reads its own (timeouts). */
static const LifecycleSetting lifecycle_settings[] = {
  { "standby-min-seconds", 1, 86400, MV_STANDBY_AFTER_MIN_SECONDS,
    G_STRUCT_OFFSET (MvReconcilerOptions, standby_min_seconds) },
  { "idle-sample-seconds", 1, 3600, 60, G_STRUCT_OFFSET (MvReconcilerOptions, idle_sample_seconds) },
  { "idle-cpu-percent", 1, 100, 5, G_STRUCT_OFFSET (MvReconcilerOptions, idle_cpu_percent) },
  { "restart-backoff-ms", 1, 600000, 1000, G_STRUCT_OFFSET (MvReconcilerOptions, restart_backoff_ms) },
  { "resync-seconds", 1, 3600, 30, G_STRUCT_OFFSET (MvReconcilerOptions, resync_seconds) },
};

/* [metrics] sample-seconds; data/microvmd.conf documents it. */
static gboolean
load_metrics_config (MvDaemon *daemon, const char *path, GError **error)
{
  g_autoptr (GError) local = NULL;
  guint64 v;

  daemon->metrics_sample_seconds = 60;
  if (!g_key_file_has_key (daemon->config, "metrics", "sample-seconds", NULL))
    return TRUE;
  v = g_key_file_get_uint64 (daemon->config, "metrics", "sample-seconds", &local);
  if (local || v < MV_METRICS_SAMPLE_MIN_S || v > MV_METRICS_SAMPLE_MAX_S)
    {
      g_set_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT,
                   "%s: [metrics] sample-seconds must be %u to %u", path,
                   MV_METRICS_SAMPLE_MIN_S, MV_METRICS_SAMPLE_MAX_S);
      return FALSE;
    }
  daemon->metrics_sample_seconds = (guint) v;
  return TRUE;
}

/* [logs] max-bytes and check-seconds; data/microvmd.conf documents them. */
static gboolean
load_logs_config (MvDaemon *daemon, const char *path, GError **error)
{
  g_autoptr (GError) local = NULL;
  guint64 v;

  daemon->logs_max_bytes = MV_LOGS_MAX_BYTES_DEFAULT;
  daemon->logs_check_seconds = MV_LOGS_CHECK_SECONDS_DEFAULT;
  if (g_key_file_has_key (daemon->config, "logs", "max-bytes", NULL))
    {
      v = g_key_file_get_uint64 (daemon->config, "logs", "max-bytes", &local);
      if (local || v < MV_LOGS_MAX_BYTES_MIN || v > MV_LOGS_MAX_BYTES_MAX)
        return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT,
                             "%s: [logs] max-bytes must be %" G_GUINT64_FORMAT " to %"
                             G_GUINT64_FORMAT, path, MV_LOGS_MAX_BYTES_MIN,
                             MV_LOGS_MAX_BYTES_MAX);
      daemon->logs_max_bytes = v;
    }
  if (g_key_file_has_key (daemon->config, "logs", "check-seconds", NULL))
    {
      v = g_key_file_get_uint64 (daemon->config, "logs", "check-seconds", &local);
      if (local || v < MV_LOGS_CHECK_SECONDS_MIN || v > MV_LOGS_CHECK_SECONDS_MAX)
        return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT,
                             "%s: [logs] check-seconds must be %u to %u", path,
                             MV_LOGS_CHECK_SECONDS_MIN, MV_LOGS_CHECK_SECONDS_MAX);
      daemon->logs_check_seconds = (guint) v;
    }
  return TRUE;
}

/* One size key of [resources]: absent leaves *@out as it is. */
static gboolean
resources_size (MvDaemon *daemon, const char *key, guint64 min, guint64 max, guint64 *out,
                GError **error)
{
  g_autoptr (GError) local = NULL;
  guint64 v;

  if (!g_key_file_has_key (daemon->config, "resources", key, NULL))
    return TRUE;
  v = g_key_file_get_uint64 (daemon->config, "resources", key, &local);
  if (local || v < min || v > max)
    return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT,
                         "%s: [resources] %s must be %" G_GUINT64_FORMAT " to %" G_GUINT64_FORMAT,
                         daemon->config_path, key, min, max);
  *out = v;
  return TRUE;
}

static gboolean
resources_factor (MvDaemon *daemon, const char *key, double *out, GError **error)
{
  g_autoptr (GError) local = NULL;
  double v;

  if (!g_key_file_has_key (daemon->config, "resources", key, NULL))
    return TRUE;
  v = g_key_file_get_double (daemon->config, "resources", key, &local);
  if (local)
    return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT,
                         "%s: [resources] %s: not a number (1 to %g)", daemon->config_path, key,
                         MV_OVERCOMMIT_MAX);
  *out = v;
  return TRUE;
}

/* [resources]: the host as it is measured, unless told it is smaller
 * (host-cpus, host-memory-bytes: part of it is kept for other work), and
 * what machines may be given of it; data/microvmd.conf documents each. */
static gboolean
load_resources_config (MvDaemon *daemon, GError **error)
{
  long cpus = sysconf (_SC_NPROCESSORS_ONLN);
  guint64 host_cpus = cpus > 0 ? (guint64) cpus : 1;
  guint64 host_memory = (guint64) sysconf (_SC_PHYS_PAGES) * (guint64) sysconf (_SC_PAGESIZE);
  MvCapacity capacity;

  if (!resources_size (daemon, "host-cpus", 1, host_cpus, &host_cpus, error) ||
      !resources_size (daemon, "host-memory-bytes", 1, host_memory, &host_memory, error))
    return FALSE;
  capacity = mv_capacity_default ((MvResources) { (guint) host_cpus, host_memory });
  if (!resources_size (daemon, "reserved-memory-bytes", 0, G_MAXUINT64,
                       &capacity.reserved_memory_bytes, error) ||
      !resources_factor (daemon, "cpu-overcommit", &capacity.cpu_overcommit, error) ||
      !resources_factor (daemon, "memory-overcommit", &capacity.memory_overcommit, error))
    return FALSE;
  if (g_key_file_has_key (daemon->config, "resources", "admission", NULL))
    {
      g_autoptr (GError) local = NULL;

      capacity.admission = g_key_file_get_boolean (daemon->config, "resources", "admission",
                                                   &local);
      if (local)
        return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT,
                             "%s: [resources] admission must be true or false",
                             daemon->config_path);
      if (!capacity.admission)
        g_message ("[resources] admission=false: every start is admitted, whatever it holds");
    }
  if (!mv_capacity_validate (&capacity, error))
    {
      g_prefix_error (error, "%s: ", daemon->config_path);
      return FALSE;
    }
  daemon->options.capacity = capacity;
  {
    MvResources allocatable = mv_capacity_allocatable (&capacity);

    g_message ("Machines may be given %u vCPUs and %" G_GUINT64_FORMAT " bytes of memory: "
               "%u CPUs × %g, (%" G_GUINT64_FORMAT " − %" G_GUINT64_FORMAT " reserved) × %g",
               allocatable.vcpus, allocatable.memory_bytes, capacity.host.vcpus,
               capacity.cpu_overcommit, capacity.host.memory_bytes,
               capacity.reserved_memory_bytes, capacity.memory_overcommit);
  }
  return TRUE;
}

/* [prometheus] listen and max-connections; data/microvmd.conf documents
 * them. */
static gboolean
load_prometheus_config (MvDaemon *daemon, const char *path, GError **error)
{
  g_autofree char *listen = g_key_file_get_string (daemon->config, "prometheus", "listen", NULL);
  g_autoptr (GError) local = NULL;

  daemon->prometheus_max_connections = MV_PROMETHEUS_MAX_CONNECTIONS_DEFAULT;
  if (g_key_file_has_key (daemon->config, "prometheus", "max-connections", NULL))
    {
      guint64 v = g_key_file_get_uint64 (daemon->config, "prometheus", "max-connections", &local);

      if (local || v < 1 || v > MV_PROMETHEUS_MAX_CONNECTIONS_MAX)
        {
          g_set_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT,
                       "%s: [prometheus] max-connections must be 1 to %u", path,
                       MV_PROMETHEUS_MAX_CONNECTIONS_MAX);
          return FALSE;
        }
      daemon->prometheus_max_connections = (guint) v;
    }
  if (!listen)
    listen = g_strdup (MV_PROMETHEUS_DEFAULT_LISTEN);
  g_strstrip (listen);
  if (!*listen)
    return TRUE;
  daemon->prometheus_address = mv_listen_address_parse ("prometheus", listen, FALSE, &local);
  if (!daemon->prometheus_address)
    {
      g_set_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT, "%s: %s", path, local->message);
      return FALSE;
    }
  return TRUE;
}

/* [console] listen, token-seconds, login-user, tls-certificate and
 * tls-key; data/microvmd.conf documents them. */
static gboolean
load_console_config (MvDaemon *daemon, const char *path, GError **error)
{
  GKeyFile *config = daemon->config;
  g_autofree char *listen = g_key_file_get_string (config, "console", "listen", NULL);
  g_autofree char *user = g_key_file_get_string (config, "console", "login-user", NULL);
  g_autofree char *cert = g_key_file_get_string (config, "console", "tls-certificate", NULL);
  g_autofree char *key = g_key_file_get_string (config, "console", "tls-key", NULL);
  g_autoptr (GError) local = NULL;
  guint64 seconds = MV_CONSOLE_TOKEN_SECONDS_DEFAULT;
  static const char *const bridge_keys[] = { "token-seconds", "login-user", "tls-certificate",
                                             "tls-key", NULL };

  if (!listen)
    listen = g_strdup (MV_CONSOLE_DEFAULT_LISTEN);
  g_strstrip (listen);
  /* Without the bridge, what it would be told is told to nothing. */
  for (guint i = 0; !*listen && bridge_keys[i]; i++)
    if (g_key_file_has_key (config, "console", bridge_keys[i], NULL))
      return mv_error_set (error, MV_ERROR_UNSUPPORTED, "%s: [console] %s has no effect: listen "
                           "is empty, and no console bridge is served", path, bridge_keys[i]);

  if (g_key_file_has_key (config, "console", "token-seconds", NULL))
    {
      seconds = g_key_file_get_uint64 (config, "console", "token-seconds", &local);
      if (local || seconds < 1 || seconds > MV_CONSOLE_TOKEN_SECONDS_MAX)
        return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT, "%s: [console] token-seconds "
                             "must be 1 to %u", path, MV_CONSOLE_TOKEN_SECONDS_MAX);
    }
  if (user && !g_str_equal (g_strstrip (user), "workload") && !g_str_equal (user, "root"))
    return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT, "%s: [console] login-user must be "
                         "workload or root, not '%s'", path, user);
  daemon->options.console_login_root = user && g_str_equal (user, "root");
  if ((cert == NULL) != (key == NULL))
    return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT, "%s: [console] tls-certificate and "
                         "tls-key go together", path);
  if (cert)
    {
      daemon->console_tls = g_tls_certificate_new_from_files (g_strstrip (cert), g_strstrip (key),
                                                              &local);
      if (!daemon->console_tls)
        return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT, "%s: [console] tls-certificate: "
                             "%s", path, local->message);
    }
  if (!*listen)
    return TRUE;
  daemon->console_address = mv_listen_address_parse ("console", listen, TRUE, &local);
  if (!daemon->console_address)
    return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT, "%s: %s", path, local->message);
  daemon->options.console_token_seconds = (guint) seconds;
  return TRUE;
}

/* The bridge is not worth failing the daemon for either: without it, no
 * console token is given. */
static void
serve_console (MvDaemon *daemon)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *where = NULL, *url = NULL;

  if (!daemon->console_address)
    return;
  where = g_socket_connectable_to_string (G_SOCKET_CONNECTABLE (daemon->console_address));
  daemon->console = mv_console_bridge_new (daemon->console_address, daemon->console_tls, &error);
  if (!daemon->console)
    {
      g_warning ("Not serving consoles on %s: %s", where, error->message);
      daemon->options.console_token_seconds = 0;
      return;
    }
  url = mv_console_bridge_url (daemon->console);
  mv_bus_service_set_console_url (daemon->service, url);
  g_message ("Serving consoles on %s", url);
}

/* The machines whose logs a rotation round looks at. */
static GPtrArray *
pick_logs (gint64 since, gint64 *now, gpointer data)
{
  MvDaemon *daemon = data;

  *now = mv_reconciler_monotonic (daemon->reconciler);
  return mv_reconciler_active_since (daemon->reconciler, since);
}

/* Metrics are not worth failing the daemon for: an address in use is
 * warned about, and the bus is served all the same. */
static void
serve_prometheus (MvDaemon *daemon)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *where = NULL;

  if (!daemon->prometheus_address)
    return;
  where = g_socket_connectable_to_string (G_SOCKET_CONNECTABLE (daemon->prometheus_address));
  daemon->prometheus = mv_prometheus_new (daemon->reconciler, daemon->prometheus_address,
                                          daemon->prometheus_max_connections, &error);
  if (!daemon->prometheus)
    g_warning ("Not serving metrics on %s: %s", where, error->message);
  else
    g_message ("Serving metrics on http://%s%s", where, MV_PROMETHEUS_PATH);
}

/* The sampler's writer: a worker thread, the machine's files only. */
static gboolean
write_metrics (const char *machine_dir, const MvMetricsSample *sample, guint sample_seconds,
               gpointer data, GError **error)
{
  return mv_metrics_append (machine_dir, sample, sample_seconds, error);
}

static gboolean
load_config (MvDaemon *daemon, const char *path, gboolean explicit, GError **error)
{
  g_autoptr (GError) local = NULL;

  daemon->config = g_key_file_new ();
  for (guint i = 0; i < G_N_ELEMENTS (lifecycle_settings); i++)
    G_STRUCT_MEMBER (guint, &daemon->options, lifecycle_settings[i].offset) =
      lifecycle_settings[i].fallback;

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
      G_STRUCT_MEMBER (guint, &daemon->options, s->offset) = (guint) v;
    }
  return TRUE;
}

void
mv_daemon_set_migration_guard (MvDaemon *daemon,
                               gboolean (*guard) (const char *machine_id, gpointer user_data),
                               gpointer user_data)
{
  daemon->options.migration_guard = guard;
  daemon->options.migration_guard_data = user_data;
}

static MvDaemonSetupFunc setup_func;

void
mv_daemon_set_setup_func (MvDaemonSetupFunc func)
{
  setup_func = func;
}

static const char *const hypervisor_types[] = { "cloud-hypervisor", "firecracker", "qemu" };

static gboolean
has_runtime_type (MvDaemon *daemon, const char *type)
{
  for (guint i = 0; i < daemon->runtimes->len; i++)
    if (g_strcmp0 (((MvRuntime *) daemon->runtimes->pdata[i])->type, type) == 0)
      return TRUE;
  return FALSE;
}

static gboolean
add_builtin_runtimes (MvDaemon *daemon, GError **error)
{
  g_autofree char *type = g_key_file_get_string (daemon->config, "daemon", "default-hypervisor",
                                                 NULL);
  g_autofree char *versions_path = g_build_filename (mv_store_runtime_dir (daemon->store),
                                                     MV_VERSIONS_FILE, NULL);
  g_autoptr (MvVersionCache) versions = mv_version_cache_new (versions_path);

  if (type && !g_str_equal (type, "auto"))
    {
      if (!g_strv_contains ((const char *const *) hypervisor_types, type) &&
          !has_runtime_type (daemon, type))
        {
          g_set_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT,
                       "%s: [daemon] default-hypervisor: '%s' is not one of auto, "
                       "cloud-hypervisor, firecracker, qemu", daemon->config_path, type);
          return FALSE;
        }
      daemon->default_type = g_steal_pointer (&type);
    }

  daemon->builtin_runtimes = mv_hypervisor_builtin_runtimes (daemon->config, versions, error);
  if (!daemon->builtin_runtimes)
    {
      g_prefix_error (error, "%s: ", daemon->config_path);
      return FALSE;
    }
  for (guint i = 0; i < daemon->builtin_runtimes->len; i++)
    g_ptr_array_add (daemon->runtimes, daemon->builtin_runtimes->pdata[i]);
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
  daemon->invalid = g_ptr_array_new_with_free_func ((GDestroyNotify) mv_invalid_record_free);
  daemon->runtimes = g_ptr_array_new ();
  daemon->loop = g_main_loop_new (NULL, FALSE);
  daemon->config_path = g_strdup (config_path);
  if (registered_runtimes)
    g_ptr_array_extend (daemon->runtimes, registered_runtimes, NULL, NULL);

  if (!load_config (daemon, config_path, options->config_path != NULL, error) ||
      !load_metrics_config (daemon, config_path, error) ||
      !load_logs_config (daemon, config_path, error) ||
      !load_prometheus_config (daemon, config_path, error) ||
      !load_console_config (daemon, config_path, error) ||
      !load_resources_config (daemon, error) ||
      !add_builtin_runtimes (daemon, error))
    {
      mv_daemon_free (daemon);
      return NULL;
    }
  daemon->bus_address = g_strdup (options->bus_address);
  return daemon;
}

static void take_runtime_versions (MvDaemon *daemon);

void
mv_daemon_free (MvDaemon *daemon)
{
  if (!daemon)
    return;
  take_runtime_versions (daemon);
  /* The reconciler answers what still waits, through the bus, first. */
  g_clear_pointer (&daemon->prometheus, mv_prometheus_free);
  g_clear_object (&daemon->prometheus_address);
  g_clear_pointer (&daemon->console, mv_console_bridge_free);
  g_clear_object (&daemon->console_address);
  g_clear_object (&daemon->console_tls);
  g_clear_pointer (&daemon->metrics, mv_metrics_sampler_free);
  g_clear_pointer (&daemon->logs, mv_log_rotator_free);
  g_clear_pointer (&daemon->reconciler, mv_reconciler_free);
  g_clear_pointer (&daemon->service, mv_bus_service_free);
  g_clear_pointer (&daemon->events, mv_event_log_free);
  if (daemon->bus_source)
    {
      g_source_destroy (daemon->bus_source);
      g_source_unref (daemon->bus_source);
    }
  if (daemon->bus)
    sd_bus_flush_close_unref (daemon->bus);
  g_clear_pointer (&daemon->host.runtimes, mv_runtimes_free);
  g_clear_pointer (&daemon->host.snapshots, mv_snapshot_store_free);
  g_clear_pointer (&daemon->host.warm, mv_snapshot_store_free);
  g_clear_pointer (&daemon->host.storage, mv_storage_free);
  g_clear_pointer (&daemon->host.images, mv_host_images_free);
  g_clear_pointer (&daemon->images, mv_image_store_free);
  g_clear_pointer (&daemon->host.volumes, mv_host_volumes_free);
  g_clear_pointer (&daemon->volumes, mv_volume_store_free);
  g_clear_pointer (&daemon->dns, mv_dns_free);
  g_clear_pointer (&daemon->host_network, mv_host_network_free);
  g_clear_object (&daemon->nm);
  g_clear_object (&daemon->nm_bus);
  g_clear_pointer (&daemon->networks, mv_network_store_free);
  g_clear_pointer (&daemon->host.records, g_free);
  g_clear_pointer (&daemon->invalid, g_ptr_array_unref);
  g_clear_pointer (&daemon->runtimes, g_ptr_array_unref);
  g_clear_pointer (&daemon->builtin_runtimes, g_ptr_array_unref);
  g_free (daemon->default_type);
  g_free (daemon->bus_address);
  g_clear_pointer (&daemon->loop, g_main_loop_unref);
  g_clear_pointer (&daemon->config, g_key_file_unref);
  g_free (daemon->config_path);
  mv_store_free (daemon->store);
  g_free (daemon);
}

/* The runtimes with the versions they report, asked once at startup. */
static gpointer
runtimes_new (gpointer data)
{
  MvDaemon *daemon = data;
  MvRuntimes *runtimes = mv_runtimes_new (daemon->default_type);

  for (guint i = 0; i < daemon->runtimes->len; i++)
    {
      MvRuntime *rt = daemon->runtimes->pdata[i];
      g_autoptr (GError) error = NULL;
      g_autofree char *version = rt->version ? rt->version (rt, &error) : NULL;

      if (!version && error)
        g_warning ("Hypervisor %s: could not read its version: %s", rt->type, error->message);
      mv_runtimes_add (runtimes, rt, version);
    }
  return runtimes;
}

/* QEMU tells its version only by running, which takes as long as
 * loading some thousand records: it is asked on a thread of its own, and
 * the runtimes are taken once the records are read, before the
 * reconciler is made. Nothing before that needs them. */
static void
ask_runtime_versions (MvDaemon *daemon)
{
  daemon->version_probe = g_thread_new ("microvmd-versions", runtimes_new, daemon);
}

static void
take_runtime_versions (MvDaemon *daemon)
{
  if (daemon->version_probe)
    daemon->host.runtimes = g_thread_join (g_steal_pointer (&daemon->version_probe));
}

static void
on_recovered (gpointer user_data)
{
  MvDaemon *daemon = user_data;

  daemon->recovered = TRUE;
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
  daemon->bus_lost = TRUE;
  g_main_loop_quit (daemon->loop);
  return G_SOURCE_REMOVE;
}

/* The image cache, with what a crashed pull left swept away: [images]
 * insecure-registries and max-size-bytes. */
static gboolean
open_images (MvDaemon *daemon, GError **error)
{
  g_auto (GStrv) insecure = g_key_file_get_string_list (daemon->config, "images",
                                                        "insecure-registries", NULL, NULL);
  g_autoptr (GError) local = NULL;
  guint64 max_size = 0;
  MvImageStoreOptions options = { 0 };

  if (g_key_file_has_key (daemon->config, "images", "max-size-bytes", NULL))
    {
      max_size = g_key_file_get_uint64 (daemon->config, "images", "max-size-bytes", &local);
      if (local != NULL || max_size == 0)
        {
          g_set_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT,
                       "%s: [images] max-size-bytes: not a positive number of bytes",
                       daemon->config_path);
          return FALSE;
        }
    }
  options.insecure_hosts = (const char * const *) insecure;
  options.max_size = max_size;
  daemon->images = mv_image_store_new (mv_store_state_dir (daemon->store), &options, error);
  if (daemon->images == NULL)
    return FALSE;
  if (!mv_image_store_sweep (daemon->images, &local))
    g_warning ("Images: could not sweep what failed pulls left: %s", local->message);
  return TRUE;
}

/* One key of [events]; data/microvmd.conf documents each. */
static gboolean
events_setting (MvDaemon *daemon, const char *key, guint64 min, guint64 max, guint64 fallback,
                guint64 *out, GError **error)
{
  g_autoptr (GError) local = NULL;

  *out = fallback;
  if (!g_key_file_has_key (daemon->config, "events", key, NULL))
    return TRUE;
  *out = g_key_file_get_uint64 (daemon->config, "events", key, &local);
  if (local || *out < min || *out > max)
    return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT,
                         "%s: [events] %s must be %" G_GUINT64_FORMAT " to %" G_GUINT64_FORMAT,
                         daemon->config_path, key, min, max);
  return TRUE;
}

static gboolean
open_events (MvDaemon *daemon, GError **error)
{
  guint64 max_file_bytes, max_kept, sync_seconds;
  MvEventLogOptions options;

  if (!events_setting (daemon, "max-file-bytes", 4096, G_GUINT64_CONSTANT (1) << 30,
                       4 * 1024 * 1024, &max_file_bytes, error) ||
      !events_setting (daemon, "kept-in-memory", 1, 1000000, 10000, &max_kept, error) ||
      !events_setting (daemon, "sync-seconds", 1, 3600, 5, &sync_seconds, error))
    return FALSE;
  options = (MvEventLogOptions) {
    .max_file_bytes = max_file_bytes,
    .max_kept = (guint) max_kept,
    .sync_seconds = (guint) sync_seconds,
  };
  daemon->events = mv_event_log_open (mv_store_state_dir (daemon->store), &options, error);
  return daemon->events != NULL;
}

/* The volumes, with what a crashed create or delete left swept away;
 * an invalid one is among the invalid records and left alone. */
static gboolean
open_volumes (MvDaemon *daemon, GError **error)
{
  g_autofree char *dir = g_build_filename (mv_store_state_dir (daemon->store), MV_VOLUMES_DIR, NULL);

  daemon->volumes = mv_volume_store_open (dir, daemon->invalid, error);
  if (daemon->volumes == NULL)
    return FALSE;
  daemon->host.volumes = mv_host_volumes_new (daemon->volumes);
  mv_storage_set_volumes (daemon->host.storage, daemon->host.volumes);
  return TRUE;
}

/* A template build the daemon did not see to its end may have left its
 * VMM running in the build's directory: whichever hypervisor it was of
 * ends it. */
static void
end_interrupted_builds (MvDaemon *daemon, const char *dir)
{
  g_autoptr (GDir) d = g_dir_open (dir, 0, NULL);
  const char *name;

  while (d && (name = g_dir_read_name (d)))
    {
      g_autofree char *run = g_build_filename (dir, name, "run", NULL);
      const char *id = name + strlen (MV_SNAPSHOT_STAGED_PREFIX);

      if (!g_str_has_prefix (name, MV_SNAPSHOT_STAGED_PREFIX) ||
          !g_file_test (run, G_FILE_TEST_IS_DIR))
        continue;
      for (guint i = 0; i < mv_runtimes_count (daemon->host.runtimes); i++)
        {
          MvRuntime *rt = mv_runtimes_get (daemon->host.runtimes, i);
          MvRuntimeRequest req = { .machine_id = id, .runtime_dir = run };
          g_autoptr (GError) local = NULL;

          if (!rt->stop (rt, &req, TRUE, &local))
            g_warning ("Warm templates: could not end what the build in %s left: %s", run,
                       local->message);
        }
    }
}

/* Warm templates are built whole under another name and moved into
 * place: what an interrupted build left is ended and swept, never used.
 * Returns the templates the host's hypervisors can restore. */
static GPtrArray *
open_warm (MvDaemon *daemon)
{
  GPtrArray *templates;
  g_autofree char *dir = g_build_filename (mv_store_state_dir (daemon->store), MV_WARM_DIR,
                                           NULL);
  g_autoptr (GError) local = NULL;

  end_interrupted_builds (daemon, dir);
  daemon->host.warm = mv_snapshot_store_new (dir, daemon->host.storage);
  if (!daemon->host.warm->sweep (daemon->host.warm, &local))
    g_warning ("Warm templates: could not sweep what was left of interrupted builds: %s",
               local->message);
  templates = daemon->host.warm->load (daemon->host.warm, NULL, NULL);
  mv_warm_keep_runnable (daemon->host.warm, daemon->host.runtimes, templates);
  return templates;
}

/* The snapshots, with what crashed creates and deletes left swept away;
 * an invalid one is among the invalid records and left alone. */
static GPtrArray *
open_snapshots (MvDaemon *daemon)
{
  g_autofree char *dir = g_build_filename (mv_store_state_dir (daemon->store), MV_SNAPSHOTS_DIR,
                                           NULL);
  g_autoptr (GHashTable) invalid = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
                                                          g_free);
  g_autoptr (GError) local = NULL;
  GHashTableIter iter;
  gpointer id, reason;
  GPtrArray *loaded;

  daemon->host.snapshots = mv_snapshot_store_new (dir, daemon->host.storage);
  if (!daemon->host.snapshots->sweep (daemon->host.snapshots, &local))
    g_warning ("Snapshots: could not sweep what was left of interrupted ones: %s",
               local->message);
  loaded = daemon->host.snapshots->load (daemon->host.snapshots, invalid, NULL);

  g_hash_table_iter_init (&iter, invalid);
  while (g_hash_table_iter_next (&iter, &id, &reason))
    {
      MvInvalidRecord *record = g_new0 (MvInvalidRecord, 1);

      record->path = g_build_filename (dir, id, NULL);
      record->reason = g_strdup (reason);
      g_ptr_array_add (daemon->invalid, record);
    }
  return loaded;
}

/* The networks' records, with what a crashed create or delete left swept
 * away; an invalid one is among the invalid records and left alone. */
static void
on_async_result (GObject *source, GAsyncResult *result, gpointer user_data)
{
  *(GAsyncResult **) user_data = g_object_ref (result);
}

/* Seed 000: the traffic listener passes each event to RestoreAfterTraffic;
 * a stale or duplicate one changes nothing. */
static void
on_machine_traffic (const char *machine_id, guint64 sequence, gpointer data)
{
  MvDaemon *daemon = data;
  MvMachine *machine = daemon->reconciler ? mv_reconciler_lookup (daemon->reconciler, machine_id)
                                          : NULL;
  g_autoptr (GError) error = NULL;
  gboolean waking = FALSE;

  if (!machine)
    return;
  if (!mv_reconciler_traffic (daemon->reconciler, machine, sequence, &waking, &error))
    g_message ("Traffic for machine %s: %s", machine_id, error->message);
  /* At once, not at the next resync: the client's connection waits. */
  else if (waking)
    mv_reconciler_kick (machine);
}

/* The network DNS: names of machines that hold resources (seed 002,
 * LookupHost and LookupAddr). */
static GPtrArray *
dns_lookup_host (const char *network_id, const char *name, gpointer data)
{
  MvDaemon *daemon = data;
  g_autoptr (MvNetworkSpec) network = mv_network_store_find (daemon->networks, network_id);

  return network && daemon->reconciler
         ? mv_reconciler_lookup_host (daemon->reconciler, network->name, name) : NULL;
}

static GPtrArray *
dns_lookup_addr (const char *network_id, guint32 address, gpointer data)
{
  MvDaemon *daemon = data;
  g_autoptr (MvNetworkSpec) network = mv_network_store_find (daemon->networks, network_id);
  g_autofree char *dotted = mv_ipv4_to_string (address);

  return network && daemon->reconciler
         ? mv_reconciler_lookup_addr (daemon->reconciler, network->name, dotted) : NULL;
}

static void
serve_dns (MvDaemon *daemon, const MvNetworkSpec *network)
{
  g_autoptr (GError) error = NULL;

  if (daemon->dns && !mv_dns_serve (daemon->dns, network->id, network->gateway, 53, &error))
    g_warning ("Network %s: no DNS on its gateway: %s", network->name, error->message);
}

/* [network] dns-domain (default "microvm") and dns-upstreams (default:
 * the host's resolv.conf, less the networks' gateways). */
static gboolean
open_dns (MvDaemon *daemon, GError **error)
{
  g_autofree char *domain = g_key_file_get_string (daemon->config, "network", "dns-domain", NULL);
  g_auto (GStrv) upstreams = g_key_file_get_string_list (daemon->config, "network",
                                                         "dns-upstreams", NULL, NULL);
  g_autoptr (GPtrArray) networks = mv_network_store_list (daemon->networks);
  g_autoptr (GPtrArray) gateways = g_ptr_array_new_with_free_func (g_free);
  MvDnsOptions options = { 0 };

  if (!domain)
    domain = g_strdup (MV_DEFAULT_DNS_DOMAIN);
  if (!mv_dns_domain_validate (domain, error))
    {
      g_prefix_error (error, "%s: [network] dns-domain: ", daemon->config_path);
      return FALSE;
    }
  for (guint i = 0; upstreams && upstreams[i]; i++)
    if (!mv_dns_upstream_validate (upstreams[i], error))
      {
        g_prefix_error (error, "%s: [network] dns-upstreams: ", daemon->config_path);
        return FALSE;
      }
  if (!g_key_file_has_key (daemon->config, "network", "dns-upstreams", NULL))
    {
      for (guint i = 0; i < networks->len; i++)
        g_ptr_array_add (gateways,
                         mv_ipv4_to_string (((MvNetworkSpec *) networks->pdata[i])->gateway));
      g_ptr_array_add (gateways, NULL);
      upstreams = mv_dns_host_upstreams ("/etc/resolv.conf",
                                         (const char *const *) gateways->pdata);
    }
  options.domain = domain;
  options.upstreams = (const char *const *) upstreams;
  daemon->dns = mv_dns_new (&options, dns_lookup_host, dns_lookup_addr, daemon);
  for (guint i = 0; i < networks->len; i++)
    serve_dns (daemon, networks->pdata[i]);
  return TRUE;
}

static void
on_network_created (const MvNetworkSpec *network, gpointer data)
{
  MvDaemon *daemon = data;

  mv_host_network_added (daemon->host_network, network);
  serve_dns (daemon, network);
}

static void
on_network_deleted (const MvNetworkSpec *network, gpointer data)
{
  MvDaemon *daemon = data;

  mv_host_network_removed (daemon->host_network, network);
  if (daemon->dns)
    mv_dns_stop (daemon->dns, network->id);
}

static gboolean
open_networks (MvDaemon *daemon, GError **error)
{
  g_autofree char *dir = g_build_filename (mv_store_state_dir (daemon->store), MV_NETWORKS_DIR,
                                           NULL);

  g_autoptr (GAsyncResult) result = NULL;
  g_autoptr (GError) local = NULL;

  daemon->networks = mv_network_store_open (dir, daemon->invalid, error);
  if (daemon->networks == NULL)
    return FALSE;

  /* NetworkManager on the daemon's bus. A bus that cannot be reached
   * leaves the host without networks: machines on one are refused. */
  if (!daemon->bus_address || g_str_equal (daemon->bus_address, "system"))
    daemon->nm_bus = g_bus_get_sync (G_BUS_TYPE_SYSTEM, NULL, &local);
  else if (g_str_equal (daemon->bus_address, "session"))
    daemon->nm_bus = g_bus_get_sync (G_BUS_TYPE_SESSION, NULL, &local);
  else
    daemon->nm_bus = g_dbus_connection_new_for_address_sync (
      daemon->bus_address,
      G_DBUS_CONNECTION_FLAGS_AUTHENTICATION_CLIENT | G_DBUS_CONNECTION_FLAGS_MESSAGE_BUS_CONNECTION,
      NULL, NULL, &local);
  if (daemon->nm_bus)
    {
      mv_nm_new_async (daemon->nm_bus, NULL, on_async_result, &result);
      while (!result)
        g_main_context_iteration (NULL, TRUE);
      daemon->nm = mv_nm_new_finish (result, &local);
    }
  if (!daemon->nm)
    {
      g_warning ("Networks: NetworkManager cannot be reached (%s); machines on a network "
                 "will not start", local->message);
      return TRUE;
    }
  daemon->host_network = mv_host_network_new (daemon->networks, daemon->nm);
  mv_host_network_set_traffic_func (daemon->host_network, on_machine_traffic, daemon);
  daemon->host.network = mv_host_network_iface (daemon->host_network);
  daemon->network_hooks = (MvNetworkHooks) {
    .created = on_network_created,
    .deleted = on_network_deleted,
    .data = daemon,
  };
  return open_dns (daemon, error);
}

/* The machine whose record @path is (or is in), if it is one. */
static char *
invalid_machine_id (MvDaemon *daemon, const char *path)
{
  g_autofree char *machines = g_build_filename (mv_store_state_dir (daemon->store),
                                                MV_MACHINES_DIR, NULL);
  const char *rest;
  size_t n = strlen (machines);

  if (strncmp (path, machines, n) != 0 || path[n] != '/')
    return NULL;
  rest = path + n + 1;
  return *rest ? g_strndup (rest, strcspn (rest, "/")) : NULL;
}

int
mv_daemon_run (MvDaemon *daemon, GError **error)
{
  g_autoptr (GPtrArray) records = NULL;
  g_autoptr (GPtrArray) snapshots = NULL;
  g_autoptr (GPtrArray) templates = NULL;
  int r;

  ask_runtime_versions (daemon);
  daemon->host.memory_bytes = (guint64) sysconf (_SC_PHYS_PAGES) * (guint64) sysconf (_SC_PAGESIZE);
  daemon->host.records = mv_store_records_new (daemon->store);
  if (!open_images (daemon, error))
    return 1;
  daemon->host.images = mv_host_images_new (daemon->images);
  daemon->host.storage = mv_storage_new (daemon->host.records, daemon->images);
  if (!open_volumes (daemon, error) || !open_networks (daemon, error) ||
      !open_events (daemon, error))
    return 1;
  snapshots = open_snapshots (daemon);
  records = mv_store_load_machines (daemon->store, daemon->invalid);
  /* The reconciler listens to the runtimes' guests from its start. */
  take_runtime_versions (daemon);
  templates = open_warm (daemon);
  daemon->service = mv_bus_service_new ();
  mv_bus_service_set_events (daemon->service, daemon->events);
  mv_bus_service_set_images (daemon->service, daemon->images, daemon->host.images);
  mv_bus_service_set_volumes (daemon->service, daemon->volumes);
  mv_bus_service_set_networks (daemon->service, daemon->networks,
                               daemon->host_network ? &daemon->network_hooks : NULL);
  serve_console (daemon);
  daemon->reconciler = mv_reconciler_new (&daemon->host, &daemon->options,
                                          mv_bus_service_observer (daemon->service), NULL);
  if (daemon->console)
    mv_console_bridge_set_reconciler (daemon->console, daemon->reconciler);

  mv_reconciler_add_snapshots (daemon->reconciler, snapshots);
  mv_reconciler_add_warm (daemon->reconciler, templates);
  for (guint i = 0; i < daemon->invalid->len; i++)
    {
      MvInvalidRecord *invalid = daemon->invalid->pdata[i];
      g_autofree char *id = invalid_machine_id (daemon, invalid->path);

      if (id)
        mv_reconciler_add_invalid (daemon->reconciler, id);
    }
  for (guint i = 0; i < records->len; i++)
    {
      MvRecord *record = records->pdata[i];

      MvMachine *machine = mv_reconciler_add_loaded (daemon->reconciler,
                                                     g_steal_pointer (&record->config),
                                                     g_steal_pointer (&record->status));

      machine->other_files = record->other_files;
    }
  g_clear_pointer (&records, g_ptr_array_unref);
  mv_reconciler_recover (daemon->reconciler, on_recovered, daemon);
  while (!daemon->recovered)
    g_main_context_iteration (NULL, TRUE);
  g_message ("Loaded %u machines, %u invalid records", mv_reconciler_count (daemon->reconciler),
             daemon->invalid->len);

  /* Connected only now: a bus does not wait for a client that loads ten
   * thousand records before it reads its first message. */
  daemon->bus = open_bus (daemon->bus_address, error);
  if (!daemon->bus)
    return 1;

  /* Before the name is taken: whoever sees it may at once ask the daemon
   * to stop, and must find it ready to exit cleanly. */
  g_unix_signal_add (SIGTERM, on_quit_signal, daemon);
  g_unix_signal_add (SIGINT, on_quit_signal, daemon);

  r = mv_bus_service_start (daemon->service, daemon->bus, daemon->reconciler, daemon->invalid);
  if (r < 0)
    {
      g_set_error (error, G_IO_ERROR, g_io_error_from_errno (-r),
                   "Could not serve %s on the bus: %s", MV_BUS_NAME, g_strerror (-r));
      return 1;
    }
  daemon->bus_source = mv_bus_source_attach (daemon->bus);
  g_source_set_callback (daemon->bus_source, on_bus_failed, daemon, NULL);

  mv_reconciler_run (daemon->reconciler);
  daemon->metrics = mv_metrics_sampler_new (daemon->reconciler, daemon->metrics_sample_seconds,
                                            write_metrics, NULL);
  {
    g_autofree char *machines_dir = g_build_filename (mv_store_runtime_dir (daemon->store),
                                                      MV_MACHINES_DIR, NULL);

    daemon->logs = mv_log_rotator_new (machines_dir, daemon->logs_max_bytes,
                                       daemon->logs_check_seconds, pick_logs, daemon);
  }
  serve_prometheus (daemon);

  sd_notify (0, "READY=1");
  g_message ("microvmd %s serving %s", PACKAGE_VERSION, MV_BUS_NAME);
  g_main_loop_run (daemon->loop);

  /* Let operations under way finish writing their records, and the
   * metrics round its day files; pulls give up. */
  mv_reconciler_cancel_pulls (daemon->reconciler);
  while (mv_reconciler_busy (daemon->reconciler) || mv_metrics_sampler_busy (daemon->metrics))
    g_main_context_iteration (NULL, TRUE);
  if (daemon->bus_lost)
    {
      /* A failure, so that a service manager starts it again. */
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_BROKEN_PIPE, "Lost the bus connection");
      return 1;
    }
  sd_bus_release_name (daemon->bus, MV_BUS_NAME);
  return 0;
}

/* Messages in the user's language, always written as UTF-8: that is
 * what the journal takes, and a daemon started without a locale (the C
 * locale's ASCII) would otherwise have GLib convert every line it logs,
 * opening a converter each time, and lose every character past ASCII in
 * machine names. Numbers stay in the C locale: the daemon writes them
 * into records and VMM command lines. */
static void
set_locale (void)
{
  setlocale (LC_ALL, "");
  if (!g_get_charset (NULL))
    setlocale (LC_CTYPE, "C.UTF-8");
  setlocale (LC_NUMERIC, "C");
  bindtextdomain (GETTEXT_PACKAGE, LOCALEDIR);
  bind_textdomain_codeset (GETTEXT_PACKAGE, "UTF-8");
  textdomain (GETTEXT_PACKAGE);
}

int
mv_daemon_main (int argc, char **argv, MvRuntime **runtimes)
{
  g_autofree char *bus = NULL, *state_dir = NULL, *runtime_dir = NULL, *config = NULL;
  gboolean verbose = FALSE, version = FALSE;
  g_autoptr (GError) error = NULL;
  /* The texts with a default path spliced in stay English: gettext looks
   * up whole literals. */
  const GOptionEntry entries[] = {
    { "bus", 0, 0, G_OPTION_ARG_STRING, &bus, N_("system, session or a bus address"), "BUS" },
    { "state-dir", 0, 0, G_OPTION_ARG_FILENAME, &state_dir, "Where records are kept (" MV_DEFAULT_STATE_DIR ")", "DIR" },
    { "runtime-dir", 0, 0, G_OPTION_ARG_FILENAME, &runtime_dir, "Where sockets and logs live (" MV_DEFAULT_RUNTIME_DIR ")", "DIR" },
    { "config", 0, 0, G_OPTION_ARG_FILENAME, &config, "Configuration file (" MV_DEFAULT_CONFIG_FILE ")", "FILE" },
    { "verbose", 'v', 0, G_OPTION_ARG_NONE, &verbose, N_("Log debug messages"), NULL },
    { "version", 0, 0, G_OPTION_ARG_NONE, &version, N_("Print the version and exit"), NULL },
    { NULL }
  };
  g_autoptr (GOptionContext) context = NULL;

  set_locale ();
  g_log_set_writer_func (mv_log_writer, NULL, NULL);
  context = g_option_context_new (N_("- run microVMs on this host"));
  g_option_context_add_main_entries (context, entries, GETTEXT_PACKAGE);
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
