/* The daemon: the bus connection, the records, the runtimes and the set of
 * machines. Everything here runs on the main thread. */
#pragma once
#include "bus/bus-util.h"
#include "core/machine.h"
#include "core/host/runtime.h"
#include "store/store.h"

typedef struct _MvDaemon MvDaemon;
typedef struct _MvMachine MvMachine;

/* Properties of a machine object, as bits for change coalescing. */
typedef enum {
  MV_PROP_NAME                     = 1 << 0,
  MV_PROP_STATE                    = 1 << 1,
  MV_PROP_STATE_ERROR              = 1 << 2,
  MV_PROP_DESIRED_STATE            = 1 << 3,
  MV_PROP_DESIRED_GENERATION       = 1 << 4,
  MV_PROP_OBSERVED_GENERATION      = 1 << 5,
  MV_PROP_SPECIFICATION_GENERATION = 1 << 6,
  MV_PROP_RESTART_GENERATION       = 1 << 7,
  MV_PROP_SPEC                     = 1 << 8,  /* Spec and everything derived from it */
  MV_PROP_PHASE                    = 1 << 9,  /* Phase and OperationId */
  MV_PROP_STARTED_AT               = 1 << 10,
  MV_PROP_UPDATED_AT               = 1 << 11,
  MV_PROP_EXIT_CODE                = 1 << 12,
  MV_PROP_RESTART_COUNT            = 1 << 13,
  MV_PROP_ALL_CONFIG               = MV_PROP_NAME | MV_PROP_DESIRED_STATE |
                                     MV_PROP_DESIRED_GENERATION |
                                     MV_PROP_SPECIFICATION_GENERATION |
                                     MV_PROP_RESTART_GENERATION | MV_PROP_SPEC |
                                     MV_PROP_UPDATED_AT,
  MV_PROP_ALL_STATUS               = MV_PROP_STATE | MV_PROP_STATE_ERROR |
                                     MV_PROP_OBSERVED_GENERATION | MV_PROP_PHASE |
                                     MV_PROP_STARTED_AT | MV_PROP_EXIT_CODE |
                                     MV_PROP_RESTART_COUNT,
} MvMachineProp;

struct _MvMachine {
  MvDaemon  *daemon;
  char      *id;
  char      *path;
  MvConfig  *config;
  MvStatus  *status;

  /* Reconciliation: one operation at a time per machine. */
  gboolean   busy;
  GQueue     waiters;          /* MvWaiter*: calls answered when a state is reached */
  guint      watch_id;
  gboolean   gone;             /* records removed; the object is going */

  /* Restart policy and idleness, kept in memory only. */
  guint      restart_timer;
  guint64    idle_cpu_ns;      /* the VMM's CPU time at the last sample */
  gint64     idle_sampled_at;  /* µs, monotonic; 0 = not sampled yet */
  gint64     idle_since;       /* µs, monotonic; 0 = busy */

  /* Bus: changes are collected and announced once per main loop turn. */
  gboolean   announced;
  guint      dirty;
  guint      flush_id;
  MvState    announced_state;
};

struct _MvDaemon {
  sd_bus      *bus;            /* connected once the records are loaded */
  char        *bus_address;
  GSource     *bus_source;
  MvStore     *store;
  GHashTable  *machines;       /* id -> MvMachine* */
  GPtrArray   *invalid;        /* MvInvalidRecord* found at startup */
  GPtrArray   *runtimes;       /* MvRuntime*, the default first */
  GPtrArray   *builtin_runtimes; /* owns the built-in ones among them */
  GHashTable  *runtime_versions; /* MvRuntime* -> version, read once at startup */
  char        *default_type;   /* [daemon] default-hypervisor; NULL = the first runtime */
  GMainLoop   *loop;
  char        *config_path;
  GKeyFile    *config;

  /* [lifecycle] settings */
  guint        stop_timeout_seconds;
  guint        standby_min_seconds;    /* shortest standby_after_seconds accepted */
  guint        idle_sample_seconds;    /* how often idleness is judged */
  guint        idle_cpu_percent;       /* below this share of one CPU, a guest is idle */
  guint        restart_backoff_ms;     /* first restart delay; doubles each time */
  guint        resync_seconds;         /* how often every machine is looked at again */
  guint        resync_timer;
  guint        idle_timer;

  /* Whether a machine is being migrated; such machines are left alone. */
  gboolean   (*migration_guard) (const char *machine_id, gpointer user_data);
  gpointer     migration_guard_data;
};

typedef struct {
  const char *bus_address;     /* "system", "session" or an address */
  const char *state_dir;
  const char *runtime_dir;
  const char *config_path;
} MvDaemonOptions;

/* Without a guard no machine is migrating. */
void        mv_daemon_set_migration_guard (MvDaemon *daemon,
                                           gboolean (*guard) (const char *machine_id, gpointer user_data),
                                           gpointer user_data);

/* Runtimes a daemon is built with; the test daemon adds its own. */
void        mv_daemon_add_runtime (MvDaemon *daemon, MvRuntime *runtime);

MvDaemon   *mv_daemon_new (const MvDaemonOptions *options, GError **error);
void        mv_daemon_free (MvDaemon *daemon);
/* Loads the records, serves the bus, reconciles; returns when asked to exit. */
int         mv_daemon_run (MvDaemon *daemon, GError **error);

/* The runtime of @type (NULL: the default type) in @version (NULL or "":
 * that type's default version), or NULL. */
MvRuntime  *mv_daemon_find_runtime (MvDaemon *daemon, const char *type, const char *version);
/* The runtime @spec asks for; MV_ERROR_UNSUPPORTED naming the field if the
 * host has no such hypervisor or version. */
MvRuntime  *mv_daemon_runtime_for_spec (MvDaemon *daemon, const MvSpec *spec, GError **error);
/* The version @runtime reported at startup; "" if unknown. */
const char *mv_daemon_runtime_version (MvDaemon *daemon, MvRuntime *runtime);
MvMachine  *mv_daemon_find_machine (MvDaemon *daemon, const char *name_or_id);
MvMachine  *mv_daemon_find_machine_by_path (MvDaemon *daemon, const char *path);

/* Called whenever a machine's records changed: persists nothing, only
 * schedules the announcement of @props. */
void        mv_machine_changed (MvMachine *machine, guint props);
MvMachine  *mv_machine_new (MvDaemon *daemon, MvConfig *config, MvStatus *status);
void        mv_machine_free (MvMachine *machine);
/* Removes the machine from the daemon after its records are gone: the
 * object is announced removed, then freed. */
void        mv_daemon_drop_machine (MvDaemon *daemon, MvMachine *machine);

/* The whole daemon program: parses @argv, runs until SIGTERM or SIGINT.
 * @runtimes (NULL-terminated, may be NULL) are added before the built-in
 * ones. */
int         mv_daemon_main (int argc, char **argv, MvRuntime **runtimes);

/* Called by mv_daemon_main once the daemon exists, before it runs: lets a
 * program (the test daemon) install a migration guard. */
typedef void (*MvDaemonSetupFunc) (MvDaemon *daemon);
void        mv_daemon_set_setup_func (MvDaemonSetupFunc func);
