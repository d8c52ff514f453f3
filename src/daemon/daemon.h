/* The daemon: wires the records, the host layers, the reconciler and the
 * bus together, and runs the main loop. It holds no logic of its own. */
#pragma once
#include "core/host/runtime.h"

typedef struct _MvDaemon MvDaemon;

typedef struct {
  const char *bus_address;     /* "system", "session" or an address */
  const char *state_dir;
  const char *runtime_dir;
  const char *config_path;
} MvDaemonOptions;

/* Without a guard no machine is migrating. Before mv_daemon_run(). */
void        mv_daemon_set_migration_guard (MvDaemon *daemon,
                                           gboolean (*guard) (const char *machine_id, gpointer user_data),
                                           gpointer user_data);

MvDaemon   *mv_daemon_new (const MvDaemonOptions *options, GError **error);
void        mv_daemon_free (MvDaemon *daemon);
/* Loads the records, recovers, serves the bus, reconciles; returns when
 * asked to exit. */
int         mv_daemon_run (MvDaemon *daemon, GError **error);

/* The whole daemon program: parses @argv, runs until SIGTERM or SIGINT.
 * @runtimes (NULL-terminated, may be NULL) are added before the built-in
 * ones. */
int         mv_daemon_main (int argc, char **argv, MvRuntime **runtimes);

/* Called by mv_daemon_main once the daemon exists, before it runs: lets a
 * program (the test daemon) install a migration guard. */
typedef void (*MvDaemonSetupFunc) (MvDaemon *daemon);
void        mv_daemon_set_setup_func (MvDaemonSetupFunc func);
