/* Shared state of microvmctl: the parsed options, the bus connection and the
 * helpers every command uses to call microvmd. */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>
#include <systemd/sd-bus.h>

#include "polkit-agent.h"

#if __has_include ("sd-bus-autoptr.h")
# include "sd-bus-autoptr.h"
#else
G_DEFINE_AUTOPTR_CLEANUP_FUNC (sd_bus, sd_bus_flush_close_unref)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (sd_bus_message, sd_bus_message_unref)
#endif
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (sd_bus_error, sd_bus_error_free)

/* Exit statuses, as documented in microvmctl(1). */
enum {
  MV_EXIT_OK = 0,
  MV_EXIT_FAILURE = 1,
  MV_EXIT_USAGE = 2,
};

/* exec's -t and -T. */
typedef enum {
  MV_TTY_AUTO,   /* a tty when our standard input and output are terminals */
  MV_TTY_YES,
  MV_TTY_NO,
} MvTtyMode;

typedef struct {
  /* Global options. */
  gboolean json;
  gboolean session;
  const char *address;
  gboolean ask_password;
  guint64 timeout_usec;   /* for calls that change things; UINT64_MAX waits forever */

  gboolean timeout_given;

  /* Options of single commands. */
  const char *file;
  gboolean start;
  gboolean force;
  MvTtyMode tty;
  GPtrArray *env;          /* "KEY=VALUE" of -e, checked, in their order */
  const char *user;
  const char *workdir;
  gboolean healthy;
  gboolean next_stop;
  const char *wait_id;
  GPtrArray *labels;       /* list's --label selectors, in their order */
  gboolean names;
  const char *policy;      /* pull's --policy */
  const char *gateway;     /* network create's --gateway */
  gboolean no_nat;
  const char *mtu;         /* network create's --mtu, as given */
  GPtrArray *sets;         /* the fork commands' --set FIELD=JSON, in their order */
  gboolean follow;         /* events' --follow */
  const char *since;       /* events' and metrics' --since, as given */
  const char *until;       /* metrics' --until, as given */
  const char *interval;    /* top's --interval, as given */
  const char *iterations;  /* top's --iterations, as given */
  const char *tail;        /* logs' --tail, as given */
  const char *source;      /* logs' --source */
  const char *vcpus;       /* resize's --vcpus, as given */
  const char *memory;      /* resize's --memory, as given */
  const char *remote;      /* console's --remote URL */
  const char *request;     /* console's --request MODE */

  /* Set up on the first call, so usage errors come before any of it. */
  sd_bus *bus;
  gboolean want_agent;
  MvPolkitAgent *agent;
} MvCtl;

/* Calls METHOD on microvmd and waits up to TIMEOUT_USEC (0: the bus default).
 * TYPES and the arguments after it are appended as sd_bus_message_append()
 * does; TYPES may be NULL for no arguments. REPLY may be NULL. */
int mv_call (MvCtl *ctl,
             const char *path,
             const char *interface,
             const char *method,
             guint64 timeout_usec,
             sd_bus_error *error,
             sd_bus_message **reply,
             const char *types,
             ...);

/* A method call on microvmd for arguments that mv_call() cannot append,
 * such as arrays of a length known only at run time; send it with
 * sd_bus_call (ctl->bus, ...). */
int mv_new_call (MvCtl *ctl,
                 const char *path,
                 const char *interface,
                 const char *method,
                 sd_bus_error *error,
                 sd_bus_message **m);

/* Prints a failed call the one way microvmctl prints them and returns the
 * exit status for it. */
int mv_fail_bus (const sd_bus_error *error, int r);

/* Prints "microvmctl: MESSAGE" to stderr and returns MV_EXIT_FAILURE. */
int mv_fail (const char *format, ...) G_GNUC_PRINTF (1, 2);

/* Prints a usage error with a hint to stderr and returns MV_EXIT_USAGE. */
int mv_usage_error (const char *format, ...) G_GNUC_PRINTF (1, 2);

/* Finds a machine's object path by its name or ID; prints what went wrong
 * and returns its exit status if there is none. */
int mv_resolve_machine (MvCtl *ctl, const char *name_or_id, char **path);

/* Every object of the manager's ObjectManager that has @interface: its
 * properties (GPtrArray of MvProperty, with "path") added to @objects,
 * sorted by Name. On failure prints that @what (plural, "the volumes")
 * cannot be read and returns its exit status. */
int mv_read_objects (MvCtl *ctl, const char *interface, const char *what, GPtrArray *objects);

/* Prints @root as indented JSON and a newline on stdout. */
void mv_print_json (JsonNode *root);

/* Prints an object's properties as show does: one "Key: value" line each
 * and the spec last, or one JSON object with --json. */
void mv_print_properties (MvCtl *ctl, const char *path, GPtrArray *props);

/* Prints the machine at PATH that a command has just made, as create
 * does. */
void mv_print_created_machine (MvCtl *ctl, const char *path);

/* The commands, in src/cli/commands.c. ARGV holds the command's own
 * arguments, without the command name. METHOD is the table's method name for
 * commands that share one implementation. */
typedef int (*MvCommandFunc) (MvCtl *ctl, const char *method, int argc, char **argv);

int mv_cmd_list (MvCtl *ctl, const char *method, int argc, char **argv);
int mv_cmd_show (MvCtl *ctl, const char *method, int argc, char **argv);
int mv_cmd_create (MvCtl *ctl, const char *method, int argc, char **argv);
int mv_cmd_lifecycle (MvCtl *ctl, const char *method, int argc, char **argv);
int mv_cmd_delete (MvCtl *ctl, const char *method, int argc, char **argv);
int mv_cmd_update (MvCtl *ctl, const char *method, int argc, char **argv);
int mv_cmd_rename (MvCtl *ctl, const char *method, int argc, char **argv);
int mv_cmd_set_desired (MvCtl *ctl, const char *method, int argc, char **argv);
int mv_cmd_exec (MvCtl *ctl, const char *method, int argc, char **argv);
int mv_cmd_shell (MvCtl *ctl, const char *method, int argc, char **argv);
int mv_cmd_wait (MvCtl *ctl, const char *method, int argc, char **argv);
int mv_cmd_pull (MvCtl *ctl, const char *method, int argc, char **argv);
int mv_cmd_image (MvCtl *ctl, const char *method, int argc, char **argv);
int mv_cmd_warm (MvCtl *ctl, const char *method, int argc, char **argv);
/* Reads a spec document (@file, or "-" for standard input) and checks
 * that it is a JSON object, so a typo is reported with its line and
 * column before the daemon is asked. */
int mv_read_spec (const char *file, char **out);
int mv_cmd_volume (MvCtl *ctl, const char *method, int argc, char **argv);
int mv_cmd_network (MvCtl *ctl, const char *method, int argc, char **argv);
int mv_cmd_snapshot (MvCtl *ctl, const char *method, int argc, char **argv);
int mv_cmd_fork (MvCtl *ctl, const char *method, int argc, char **argv);
int mv_cmd_events (MvCtl *ctl, const char *method, int argc, char **argv);
int mv_cmd_stats (MvCtl *ctl, const char *method, int argc, char **argv);
int mv_cmd_usage (MvCtl *ctl, const char *method, int argc, char **argv);
int mv_cmd_top (MvCtl *ctl, const char *method, int argc, char **argv);
int mv_cmd_metrics (MvCtl *ctl, const char *method, int argc, char **argv);
int mv_cmd_logs (MvCtl *ctl, const char *method, int argc, char **argv);
int mv_cmd_console (MvCtl *ctl, const char *method, int argc, char **argv);
int mv_cmd_resize (MvCtl *ctl, const char *method, int argc, char **argv);

/* "64M", "1G", "1073741824": bytes, with K, M, G, T as powers of 1024
 * (KiB, KB and the like too). */
gboolean mv_parse_size (const char *text, guint64 *out);
