/* The world an integration test runs in: a temporary directory, a private
 * system bus (dbus-daemon with a copy of the system configuration plus the
 * project's bus policy), a real polkitd that knows the project's actions,
 * and the daemon under test.
 *
 * Every function asserts: a set-up step that fails ends the test with a
 * message that says what went wrong (and, for the daemon, its log).
 *
 * polkitd reads actions and rules only from fixed system directories, so an
 * environment installs files there and takes them away again at free. Only
 * one environment exists in a process at a time, and environments in
 * different processes wait for one another (an flock on a lock file). */
#pragma once

#include <glib.h>
#include <systemd/sd-bus.h>

G_BEGIN_DECLS

typedef struct _MvTestEnv MvTestEnv;

/* Creates the temporary directory (with state/ and run/ in it and an empty
 * microvmd.conf), starts the bus and polkitd, and exports
 * DBUS_SYSTEM_BUS_ADDRESS so that child processes find the bus.
 * Set MICROVMD_TEST_KEEP=1 to keep the directory after the test. */
MvTestEnv  *mv_test_env_new                  (void);
/* The same, with more bus policy files (absolute paths, may be NULL)
 * included after the project's: for peers that need a name of their own
 * on the test bus. */
MvTestEnv  *mv_test_env_new_full             (const char *const *extra_bus_policies);
/* Stops the daemon, polkitd and dbus-daemon, removes the polkit files the
 * environment installed and the temporary directory. */
void        mv_test_env_free                 (MvTestEnv *env);

const char *mv_test_env_dir                  (MvTestEnv *env);
const char *mv_test_env_state_dir            (MvTestEnv *env);
const char *mv_test_env_runtime_dir          (MvTestEnv *env);
/* Mounts a tmpfs on the runtime directory, as /run is on a systemd host;
 * before the daemon starts. Unmounted at teardown. */
void        mv_test_env_runtime_on_tmpfs     (MvTestEnv *env);
/* A directory for the test's own kernels and disks, among [paths]
 * allowed-directories with the build tree's test guest (tests/guest):
 * mv_test_env_write_config() adds that group to a text without one. */
const char *mv_test_env_images_dir           (MvTestEnv *env);
/* The file passed to the daemon as --config. */
const char *mv_test_env_config_path          (MvTestEnv *env);
/* Where the daemon's stdout and stderr go (appended across restarts). */
const char *mv_test_env_daemon_log_path      (MvTestEnv *env);
const char *mv_test_env_bus_address          (MvTestEnv *env);

/* A new client connection to the private bus as the current user (root).
 * The caller owns it. */
sd_bus     *mv_test_env_open_bus             (MvTestEnv *env);

/* Waits until @name has an owner on the bus (TRUE) or has none (FALSE),
 * for at most @timeout_ms; asserts that it happened. */
void        mv_test_env_wait_for_name        (MvTestEnv  *env,
                                              const char *name,
                                              gboolean    owned,
                                              guint       timeout_ms);

/* polkitd is running after mv_test_env_new(). Stopping it sends SIGTERM
 * and waits until org.freedesktop.PolicyKit1 has left the bus; the bus
 * does not activate services, so it stays gone until started again. */
void        mv_test_env_start_polkit         (MvTestEnv *env);
void        mv_test_env_stop_polkit          (MvTestEnv *env);
gboolean    mv_test_env_polkit_running       (MvTestEnv *env);
/* Writes @js as /etc/polkit-1/rules.d/NN-microvmd-test-@name.rules, NN
 * counting up from 10 so rules are consulted in the order they were added
 * (and before the stock rules); adding an existing @name replaces its text.
 * Restarts polkitd if it is running so that the rule is in force when this
 * returns. The file is removed at free. */
void        mv_test_env_add_polkit_rule      (MvTestEnv  *env,
                                              const char *name,
                                              const char *js);

/* Replaces the text of the daemon's configuration file; see
 * mv_test_env_images_dir() for the [paths] group it adds. */
void        mv_test_env_write_config         (MvTestEnv  *env,
                                              const char *keyfile_text);

/* Spawns the daemon ($MICROVMD_TEST_DAEMON, or
 * $MICROVMD_BUILD_DIR/tests/integration/microvmd-test) with --bus,
 * --state-dir, --runtime-dir and --config pointing into the environment,
 * followed by @extra_args (may be NULL), and waits up to 20 s until it owns
 * org.microvmd1. */
void        mv_test_env_start_daemon         (MvTestEnv         *env,
                                              const char *const *extra_args);
/* The daemon started from now on runs in a network namespace of the
 * environment's own, with only its loopback up, which goes with the
 * environment: what the daemon does to networks (nftables, its wake log)
 * stays there. */
void        mv_test_env_use_private_netns    (MvTestEnv *env);
/* The daemon started from now on runs in the network namespace @netns
 * (ip netns exec), with the VMMs it starts; NULL: the test's own. */
void        mv_test_env_set_daemon_netns     (MvTestEnv  *env,
                                              const char *netns);
/* 0 when the daemon is not running. */
GPid        mv_test_env_daemon_pid           (MvTestEnv *env);
/* The private bus's dbus-daemon. */
GPid        mv_test_env_bus_pid              (MvTestEnv *env);
/* Sends @signo and waits up to 20 s for the daemon to exit and for
 * org.microvmd1 to leave the bus. After SIGTERM the daemon must exit with
 * status 0. */
void        mv_test_env_stop_daemon          (MvTestEnv *env,
                                              int        signo);
/* The daemon log so far. */
char       *mv_test_env_read_daemon_log      (MvTestEnv *env);

/* Run @argv (searched in PATH) to completion, as uid/gid 65534 with no
 * supplementary groups or as root. DBUS_SYSTEM_BUS_ADDRESS points at the
 * private bus. As nobody (through setpriv), the working directory is /,
 * HOME is /nonexistent, USER and LOGNAME are nobody, and XDG_RUNTIME_DIR
 * and DBUS_SESSION_BUS_ADDRESS are unset. Returns the exit
 * status, or 128 + the signal number if the command was killed. Output
 * not captured through @out or @err goes to the test's stderr. */
int         mv_test_env_run_as_nobody        (MvTestEnv          *env,
                                              const char *const  *argv,
                                              char              **out,
                                              char              **err);
int         mv_test_env_run                  (MvTestEnv          *env,
                                              const char *const  *argv,
                                              char              **out,
                                              char              **err);
/* In an environment of its own, the daemon given @config must end at
 * startup, saying @message on stderr; the test fails otherwise. */
void        mv_test_env_assert_config_refused (const char        *config,
                                               const char        *message);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (MvTestEnv, mv_test_env_free)

G_END_DECLS
