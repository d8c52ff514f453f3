/* Client-side helpers for the integration tests: calls, properties and
 * signal recording against the daemon on the test's private bus. */
#pragma once
#include "bus/bus-util.h"
#include "test-env.h"

typedef struct {
  char *path;
  char *member;       /* signal name, or "PropertiesChanged:<prop>,<prop>" */
  char *args;         /* a short text form of the interesting arguments */
  char *interfaces;   /* InterfacesRemoved: the interfaces it names, each
                       * followed by a comma */
} RecordedSignal;

typedef struct {
  sd_bus    *bus;
  GPtrArray *signals;   /* RecordedSignal* */
} Client;

Client *client_new (MvTestEnv *env);
void    client_free (Client *client);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (Client, client_free)

/* Processes the bus until @pred returns TRUE or @timeout_ms passes. */
gboolean client_wait (Client *client, gboolean (*pred) (Client *, gpointer), gpointer data,
                      guint timeout_ms);
/* Runs the bus for a moment so pending signals arrive. */
void     client_settle (Client *client, guint ms);

/* Calls a method; on error returns NULL and fills @error_name/@error_message. */
sd_bus_message *client_call (Client *client, const char *path, const char *iface,
                             const char *member, char **error_name, char **error_message,
                             const char *types, ...);
char    *client_create (Client *client, const char *spec_json, guint64 flags,
                        char **error_name, char **error_message);
char    *client_get_string (Client *client, const char *path, const char *prop);
guint64  client_get_u64 (Client *client, const char *path, const char *prop);
guint32  client_get_u32 (Client *client, const char *path, const char *prop);
gint32   client_get_i32 (Client *client, const char *path, const char *prop);
/* Calls a no-argument machine method; returns the D-Bus error name or NULL. */
char    *client_machine_call (Client *client, const char *path, const char *member,
                              char **error_message);

/* Calls a no-argument machine method and fails the test on an error. */
void     client_call_ok (Client *client, const char *path, const char *member);
/* Creates a machine and fails the test on an error; returns its path. */
char    *client_create_ok (Client *client, const char *spec_json);
/* Manager.RestoreAfterTraffic; fails the test on an error, returns woken. */
gboolean client_traffic (Client *client, const char *name_or_id, guint64 sequence);
/* Fails the test unless @path reaches State @state within @timeout_ms. */
void     client_assert_state_soon (Client *client, const char *path, const char *state,
                                   guint timeout_ms);

guint    client_count_signals (Client *client, const char *path, const char *member_prefix);
/* How many InterfacesAdded or InterfacesRemoved (@member) told of the
 * object at @object_path. */
guint    client_count_announced (Client *client, const char *member, const char *object_path);
/* How many InterfacesRemoved told of the object at @object_path going,
 * naming @interface among its interfaces. */
guint    client_count_removed (Client *client, const char *object_path, const char *interface);
void     client_clear_signals (Client *client);
/* The daemon's configuration for guests of @type: QEMU under TCG, or the
 * test VMM of $MICROVMD_BUILD_DIR as the only binary of its type; then
 * @more. */
char    *guest_config (const char *type, const char *more);
/* A spec for the test guest of @type called @name, booting @kernel and
 * @initrd, ready when its console says so; @extra is more JSON members
 * (may be NULL). */
char    *guest_spec_json (const char *type, const char *name, const char *kernel,
                          const char *initrd, const char *extra);

/* How many processes other than the test itself have @needle among their
 * arguments (a machine's runtime directory names its VMM's). */
guint    count_processes_with (const char *needle);
/* The first process but this one that names @needle on its command line;
 * fails the test if there is none. */
GPid     process_with (const char *needle);

/* How many entries the manager's @member lists (ListMachines or
 * ListSnapshots: an a(ssso)). */
guint    client_count_listed (Client *client, const char *member);
/* cpu_time_ns of a Machine.GetStats reply (an a{sv}), 0 if it has none. */
guint64  stats_reply_cpu_time_ns (sd_bus_message *reply);
/* The group listed for @controller in the /proc/PID/cgroup file at
 * @path; NULL if there is none, or no such file. */
char    *cgroup_in_file (const char *path, const char *controller);
/* The parent PID in the /proc/PID/stat file at @path. */
int      parent_in_stat_file (const char *path);

/* Whether the machines dir of @state_dir holds no entries. */
guint    count_machine_dirs (const char *state_dir);
/* The whole warm templates under @state_dir's warm/; fails the test on a
 * build's staging left there, unless @staged_ok (a build may be under way). */
guint    count_warm_templates (const char *state_dir, gboolean staged_ok);

/* The usual integration-test fixture: an environment, the daemon and a
 * client. fixture_setup writes @data, if not NULL, as the daemon's
 * configuration first. */
typedef struct {
  MvTestEnv *env;
  Client    *client;
} Fixture;

void fixture_setup (Fixture *f, gconstpointer data);
void fixture_teardown (Fixture *f, gconstpointer data);
/* fixture_setup() with the daemon in a network namespace of the
 * environment's own (mv_test_env_use_private_netns()). */
void fixture_setup_netns (Fixture *f, gconstpointer data);
/* Deletes every machine, forced: a test's teardown, so that no guest
 * outlives its test. */
void client_delete_all (Client *client);
/* The file @name in the runtime directory of the machine at @path (where
 * its VMM's socket and console log are). */
char *fixture_runtime_file (Fixture *f, const char *path, const char *name);

/* What the machine at @path's guest has printed on its console. */
char *console_text (Fixture *f, const char *path);

/* Exec through the bus: what a command printed and how it ended
 * ("exit N" or "signal N"). */
typedef struct {
  char *out;
  char *err;
  char *status;
} ExecResult;

void     exec_result_clear (ExecResult *r);
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (ExecResult, exec_result_clear)
/* Calls Exec; fds[0..3] are the caller's ends (stdin, stdout, stderr,
 * status). FALSE, with *@error_name (may be NULL), if it is refused. */
gboolean exec_start (Fixture *f, const char *path, const char *const *argv, int fds[4],
                     char **error_name);
/* Reads @fd to its end (within 30 s) and closes it. */
char    *read_all (int fd);
/* Runs @argv with @input (may be NULL) on its stdin, to its end. */
void     exec_run (Fixture *f, const char *path, const char *const *argv, const char *input,
                   ExecResult *result);
/* The standard output of @argv, which must succeed. */
char    *exec_output (Fixture *f, const char *path, const char *const *argv);

/* GET @resource over HTTP/1.1 on the VMM API socket @socket_path; fails
 * the test unless it answers 200; the body. */
char    *http_get_unix (const char *socket_path, const char *resource);
