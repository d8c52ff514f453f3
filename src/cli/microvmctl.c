/* microvmctl: the command-line client of microvmd. It talks to the daemon
 * only over D-Bus; this file holds the options, the command table and the
 * bus connection. The commands themselves are in commands.c. */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <locale.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <glib/gi18n.h>

#include "env-assignment.h"
#include "label-filter.h"
#include "microvmctl.h"
#include "names.h"
#include "terminal-text.h"

#define MV_DEFAULT_CALL_TIMEOUT_SEC 600

/* Usage lines longer than this do not widen the column of --help. */
#define HELP_USAGE_MAX_WIDTH 44

/* Options that belong to single commands; any other command refuses them. */
typedef enum {
  MV_OPT_FILE  = 1 << 0,   /* -f FILE, required where accepted */
  MV_OPT_START = 1 << 1,
  MV_OPT_FORCE = 1 << 2,
  MV_OPT_TTY   = 1 << 3,   /* -t/--tty, -T/--no-tty */
  MV_OPT_ENV   = 1 << 4,
  MV_OPT_USER  = 1 << 5,
  MV_OPT_WORKDIR   = 1 << 6,
  MV_OPT_HEALTHY   = 1 << 7,
  MV_OPT_NEXT_STOP = 1 << 8,
  MV_OPT_ID        = 1 << 9,
  MV_OPT_LABEL     = 1 << 10,
  MV_OPT_NAMES     = 1 << 11,
  MV_OPT_POLICY    = 1 << 12,
  MV_OPT_GATEWAY   = 1 << 13,
  MV_OPT_NO_NAT    = 1 << 14,
  MV_OPT_MTU       = 1 << 15,
  MV_OPT_SET       = 1 << 16,
  MV_OPT_FOLLOW    = 1 << 17,
  MV_OPT_SINCE     = 1 << 18,
  MV_OPT_UNTIL      = 1 << 19,
  MV_OPT_INTERVAL   = 1 << 20,
  MV_OPT_ITERATIONS = 1 << 21,
  MV_OPT_TAIL       = 1 << 22,
  MV_OPT_SOURCE     = 1 << 23,
  MV_OPT_VCPUS      = 1 << 24,
  MV_OPT_MEMORY     = 1 << 25,
  MV_OPT_REMOTE     = 1 << 26,
  MV_OPT_REQUEST    = 1 << 27,
} MvCommandOptions;

#define MV_OPTS_EXEC (MV_OPT_TTY | MV_OPT_ENV | MV_OPT_USER | MV_OPT_WORKDIR)
#define MV_OPTS_WAIT (MV_OPT_HEALTHY | MV_OPT_NEXT_STOP | MV_OPT_ID)

typedef struct {
  const char *name;
  MvCommandFunc func;
  int min_args;
  int max_args;
  MvCommandOptions options;
  gboolean changes;         /* gated by polkit, so a password may be asked */
  const char *method;       /* for commands that share one implementation */
  const char *synopsis;
  const char *help;
} MvCommand;

static const MvCommand commands[] = {
  { "list",        mv_cmd_list,        0, 0, MV_OPT_LABEL | MV_OPT_NAMES, FALSE, NULL,
    "[--label KEY[=VALUE]...] [--names]", N_("List all machines") },
  { "show",        mv_cmd_show,        1, 1, 0,            FALSE, NULL,
    "NAME|ID",                         N_("Show every property of a machine") },
  { "create",      mv_cmd_create,      0, 0, MV_OPT_FILE | MV_OPT_START | MV_OPT_POLICY, TRUE, NULL,
    "-f FILE [--start] [--policy P]",   N_("Define a machine from a spec file") },
  { "start",       mv_cmd_lifecycle,   1, 1, 0,            TRUE,  "Start",
    "NAME|ID",                         N_("Boot a machine, or wake it from standby") },
  { "stop",        mv_cmd_lifecycle,   1, 1, 0,            TRUE,  "Stop",
    "NAME|ID",                         N_("Shut a machine down") },
  { "pause",       mv_cmd_lifecycle,   1, 1, 0,            TRUE,  "Pause",
    "NAME|ID",                         N_("Halt the vCPUs of a running machine") },
  { "resume",      mv_cmd_lifecycle,   1, 1, 0,            TRUE,  "Resume",
    "NAME|ID",                         N_("Let a paused machine run again") },
  { "restart",     mv_cmd_lifecycle,   1, 1, 0,            TRUE,  "Restart",
    "NAME|ID",                         N_("Stop a machine and boot it afresh") },
  { "standby",     mv_cmd_lifecycle,   1, 1, 0,            TRUE,  "Standby",
    "NAME|ID",                         N_("Freeze a machine to disk; start wakes it") },
  { "delete",      mv_cmd_delete,      1, 1, MV_OPT_FORCE, TRUE,  NULL,
    "[--force] NAME|ID",               N_("Delete a machine and its records") },
  { "update",      mv_cmd_update,      1, 1, MV_OPT_FILE,  TRUE,  NULL,
    "NAME|ID -f FILE",                 N_("Replace the spec of a machine") },
  { "rename",      mv_cmd_rename,      2, 2, 0,            TRUE,  NULL,
    "NAME|ID NEWNAME",                 N_("Give a machine a new name") },
  { "set-desired", mv_cmd_set_desired, 2, 2, 0,            TRUE,  NULL,
    "NAME|ID running|paused|stopped",  N_("Record the wanted power state, return at once") },
  { "exec",        mv_cmd_exec,        2, G_MAXINT, MV_OPTS_EXEC, TRUE, NULL,
    "[OPTIONS] NAME|ID -- CMD [ARG...]", N_("Run a command in a running machine") },
  { "shell",       mv_cmd_shell,       1, 1, MV_OPT_USER,  TRUE,  NULL,
    "[-u USER] NAME|ID",               N_("Open a login shell in a running machine") },
  { "wait",        mv_cmd_wait,        1, 1, MV_OPTS_WAIT, FALSE, NULL,
    "[--healthy|--next-stop] NAME|ID", N_("Wait until a machine stops, or is healthy") },
  { "pull",        mv_cmd_pull,        1, 1, MV_OPT_POLICY, TRUE, NULL,
    "[--policy missing|always|never] REF", N_("Cache an image on the host, showing progress") },
  { "image",       mv_cmd_image,       1, 2, 0,            TRUE,  NULL,
    "list | rm DIGEST|REF | prune",    N_("List, remove or prune the cached images") },
  { "warm",        mv_cmd_warm,        1, 2, 0,            TRUE,  NULL,
    "list | build SPEC-FILE",          N_("List the warm templates, or build one for a spec") },
  { "volume",      mv_cmd_volume,      1, 3, MV_OPT_NAMES, TRUE,  NULL,
    "create NAME SIZE | list [--names] | rm NAME", N_("Create, list or remove volumes") },
  { "network",     mv_cmd_network,     1, 3, MV_OPT_NAMES | MV_OPT_GATEWAY | MV_OPT_NO_NAT | MV_OPT_MTU,
    TRUE, NULL,
    "create NAME SUBNET [--gateway G] [--no-nat] [--mtu N] | list [--names] | rm NAME",
    N_("Create, list or remove networks") },
  { "snapshot",    mv_cmd_snapshot,    1, 3, MV_OPT_NAMES | MV_OPT_SET, TRUE, NULL,
    "create MACHINE [NAME] | list [--names] [MACHINE] | show|restore|rm NAME | fork NAME NEWNAME",
    N_("Take, list, restore, fork or delete snapshots") },
  { "fork",        mv_cmd_fork,        2, 2, MV_OPT_SET,   TRUE,  NULL,
    "NAME|ID NEWNAME [--set FIELD=JSON...]", N_("Copy a machine; the copy runs if it runs") },
  { "events",      mv_cmd_events,      0, 0, MV_OPT_FOLLOW | MV_OPT_SINCE, FALSE, NULL,
    "[--follow] [--since SEQ]", N_("Show what happened to machines, and what happens") },
  { "stats",       mv_cmd_stats,       0, 256, 0,          FALSE, NULL,
    "[NAME|ID...]",                    N_("Show what machines use of the host: CPU, memory, I/O") },
  { "usage",       mv_cmd_usage,       0, 0, 0,            FALSE, NULL,
    "",                                N_("Show what machines may be given of the host, and hold") },
  { "top",         mv_cmd_top,         0, 0, MV_OPT_INTERVAL | MV_OPT_ITERATIONS, FALSE, NULL,
    "[--interval S] [--iterations N]", N_("Show each machine's CPU, memory and I/O rates, live") },
  { "metrics",     mv_cmd_metrics,     1, 1, MV_OPT_SINCE | MV_OPT_UNTIL, FALSE, NULL,
    "NAME|ID [--since T] [--until T]", N_("Show a machine's samples of the last days") },
  { "logs",        mv_cmd_logs,        1, 1, MV_OPT_FOLLOW | MV_OPT_TAIL | MV_OPT_SOURCE, TRUE, NULL,
    "[-f] [--tail N] [--source console|vmm|workload] NAME|ID",
    N_("Print a machine's log; with -f, go on while it runs") },
  { "resize",      mv_cmd_resize,      1, 1, MV_OPT_VCPUS | MV_OPT_MEMORY, TRUE, NULL,
    "NAME|ID [--vcpus N] [--memory SIZE]", N_("Give a running machine other vCPUs or memory") },
  { "console",     mv_cmd_console,     1, 1, MV_OPT_REMOTE | MV_OPT_REQUEST, TRUE, NULL,
    "NAME|ID | --request serial|login NAME|ID | --remote URL TOKEN",
    N_("Attach to a machine's console (Ctrl+] leaves), here or through a console bridge") },
};

static const struct {
  MvCommandOptions flag;
  const char *spelling;
} command_option_names[] = {
  { MV_OPT_FILE,  "-f/--file" },
  { MV_OPT_START, "--start" },
  { MV_OPT_FORCE, "--force" },
  { MV_OPT_TTY,   "-t/--tty or -T/--no-tty" },
  { MV_OPT_ENV,   "-e/--env" },
  { MV_OPT_USER,  "-u/--user" },
  { MV_OPT_WORKDIR,   "-w/--workdir" },
  { MV_OPT_HEALTHY,   "--healthy" },
  { MV_OPT_NEXT_STOP, "--next-stop" },
  { MV_OPT_ID,        "--id" },
  { MV_OPT_LABEL,     "--label" },
  { MV_OPT_NAMES,     "--names" },
  { MV_OPT_POLICY,    "--policy" },
  { MV_OPT_GATEWAY,   "--gateway" },
  { MV_OPT_NO_NAT,    "--no-nat" },
  { MV_OPT_MTU,       "--mtu" },
  { MV_OPT_SET,       "--set" },
  { MV_OPT_FOLLOW,    "--follow" },
  { MV_OPT_SINCE,     "--since" },
  { MV_OPT_UNTIL,      "--until" },
  { MV_OPT_INTERVAL,   "--interval" },
  { MV_OPT_ITERATIONS, "--iterations" },
  { MV_OPT_TAIL,      "--tail" },
  { MV_OPT_SOURCE,    "--source" },
  { MV_OPT_VCPUS,     "--vcpus" },
  { MV_OPT_MEMORY,    "--memory" },
  { MV_OPT_REMOTE,    "--remote" },
  { MV_OPT_REQUEST,   "--request" },
};

enum {
  ARG_VERSION = 0x100,
  ARG_JSON,
  ARG_SESSION,
  ARG_ADDRESS,
  ARG_NO_ASK_PASSWORD,
  ARG_TIMEOUT,
  ARG_START,
  ARG_FORCE,
  ARG_HEALTHY,
  ARG_NEXT_STOP,
  ARG_ID,
  ARG_LABEL,
  ARG_NAMES,
  ARG_POLICY,
  ARG_GATEWAY,
  ARG_NO_NAT,
  ARG_MTU,
  ARG_SET,
  ARG_FOLLOW,
  ARG_SINCE,
  ARG_UNTIL,
  ARG_INTERVAL,
  ARG_ITERATIONS,
  ARG_VCPUS,
  ARG_MEMORY,
  ARG_TAIL,
  ARG_SOURCE,
  ARG_REMOTE,
  ARG_REQUEST,
};

static const struct option long_options[] = {
  { "help",            no_argument,       NULL, 'h' },
  { "version",         no_argument,       NULL, ARG_VERSION },
  { "json",            no_argument,       NULL, ARG_JSON },
  { "session",         no_argument,       NULL, ARG_SESSION },
  { "address",         required_argument, NULL, ARG_ADDRESS },
  { "no-ask-password", no_argument,       NULL, ARG_NO_ASK_PASSWORD },
  { "timeout",         required_argument, NULL, ARG_TIMEOUT },
  { "file",            required_argument, NULL, 'f' },
  { "start",           no_argument,       NULL, ARG_START },
  { "force",           no_argument,       NULL, ARG_FORCE },
  { "tty",             no_argument,       NULL, 't' },
  { "no-tty",          no_argument,       NULL, 'T' },
  { "env",             required_argument, NULL, 'e' },
  { "user",            required_argument, NULL, 'u' },
  { "workdir",         required_argument, NULL, 'w' },
  { "healthy",         no_argument,       NULL, ARG_HEALTHY },
  { "next-stop",       no_argument,       NULL, ARG_NEXT_STOP },
  { "id",              required_argument, NULL, ARG_ID },
  { "label",           required_argument, NULL, ARG_LABEL },
  { "names",           no_argument,       NULL, ARG_NAMES },
  { "policy",          required_argument, NULL, ARG_POLICY },
  { "gateway",         required_argument, NULL, ARG_GATEWAY },
  { "no-nat",          no_argument,       NULL, ARG_NO_NAT },
  { "mtu",             required_argument, NULL, ARG_MTU },
  { "set",             required_argument, NULL, ARG_SET },
  { "follow",          no_argument,       NULL, ARG_FOLLOW },
  { "since",           required_argument, NULL, ARG_SINCE },
  { "until",           required_argument, NULL, ARG_UNTIL },
  { "interval",        required_argument, NULL, ARG_INTERVAL },
  { "iterations",      required_argument, NULL, ARG_ITERATIONS },
  { "vcpus",           required_argument, NULL, ARG_VCPUS },
  { "memory",          required_argument, NULL, ARG_MEMORY },
  { "tail",            required_argument, NULL, ARG_TAIL },
  { "source",          required_argument, NULL, ARG_SOURCE },
  { "remote",          required_argument, NULL, ARG_REMOTE },
  { "request",         required_argument, NULL, ARG_REQUEST },
  { NULL, 0, NULL, 0 },
};

static void
print_help (void)
{
  int width = 0;

  printf (_("Usage: %s [OPTIONS...] COMMAND [ARGS...]\n\n"
            "Define, run and inspect the microVMs of microvmd.\n\n"
            "Commands:\n"), g_get_prgname ());

  for (gsize i = 0; i < G_N_ELEMENTS (commands); i++)
    {
      int length = (int) (strlen (commands[i].name) + 1 + strlen (commands[i].synopsis));

      if (length <= HELP_USAGE_MAX_WIDTH)
        width = MAX (width, length);
    }

  for (gsize i = 0; i < G_N_ELEMENTS (commands); i++)
    {
      g_autofree char *usage = g_strdup_printf ("%s %s", commands[i].name, commands[i].synopsis);

      /* A long usage line has its help on the next line, in the column. */
      if ((int) strlen (usage) > width)
        printf ("  %s\n  %-*s  %s\n", usage, width, "", _(commands[i].help));
      else
        printf ("  %-*s  %s\n", width, usage, _(commands[i].help));
    }

  /* TRANSLATORS: keep the options and their arguments (--timeout=SECONDS,
     KEY=VALUE, ...) as they are, and the columns aligned. */
  printf (_("\nOptions:\n"
            "  -h --help              Show this help and exit\n"
            "     --version           Show the version and exit\n"
            "     --json              Print JSON instead of text\n"
            "     --session           Talk to microvmd on the session bus\n"
            "     --address=ADDRESS   Talk to microvmd on the bus at ADDRESS\n"
            "     --no-ask-password   Do not ask for a password when authorizing\n"
            "     --timeout=SECONDS   Wait that long for changes (default: %d; 0: forever)\n"
            "  -f --file=FILE         Read the spec from FILE (- for standard input)\n"
            "     --start             create: start the machine once it is defined\n"
            "     --force             delete: hard-stop a machine that still runs\n"
            "  -t --tty               exec: run the command on a terminal (default when\n"
            "                         standard input and output are terminals)\n"
            "  -T --no-tty            exec: run it without one\n"
            "  -e --env=KEY=VALUE     exec: set an environment variable; may be repeated\n"
            "  -u --user=USER         exec, shell: run as USER (default root)\n"
            "  -w --workdir=DIR       exec: run in DIR (default the user's home)\n"
            "     --healthy           wait: until the health check passes, not a stop\n"
            "     --next-stop         wait: for the next stop, even if stopped now\n"
            "     --id=ID             wait: fail if NAME is no longer the machine ID\n"
            "     --label=KEY[=VALUE] list: only machines with that label (any value\n"
            "                         for KEY alone); may be repeated, all must match\n"
            "     --names             list: only the names, one a line\n"
            "     --policy=POLICY     pull, create: missing (default), always or never\n"
            "     --gateway=ADDRESS   network create: the host's address on the subnet\n"
            "                         (default: its first)\n"
            "     --no-nat            network create: do not masquerade the guests\n"
            "     --mtu=BYTES         network create: the MTU (default 1500)\n"
            "     --set=FIELD=JSON    fork, snapshot fork: a field of the copy's spec\n"
            "                         that differs, its value JSON; may be repeated\n"
            "     --follow            events: then print each event as it happens\n"
            "     --since=SEQ         events: only those after sequence number SEQ\n"
            "     --since=TIME        metrics: from TIME, ISO 8601 or how long ago\n"
            "                         (90s, 30m, 12h, 2d; default 1d)\n"
            "     --until=TIME        metrics: up to TIME (default now)\n"
            "     --interval=SECONDS  top: between frames, 1 to 3600 (default 1)\n"
            "     --iterations=N      top: print N frames, then exit (default 1 when\n"
            "                         standard output is not a terminal)\n"
            "  -f --follow            logs: go on printing while the machine runs\n"
            "     --tail=N            logs: from the last N lines (default all)\n"
            "     --source=SOURCE     logs: console (default) or vmm\n"
            "     --request=MODE      console: print a token and the URL of the console\n"
            "                         bridge for one serial or login session\n"
            "     --remote=URL        console: open the session of TOKEN at the bridge URL\n"
            "\nexec and shell exit with the command's exit status, 128+N if signal N\n"
            "ended it, 255 if it could not run or its end is unknown. wait exits with\n"
            "the machine's exit code, else 0 when it stopped cleanly or is healthy.\n"
            "\nSee microvmctl(1) for more.\n"),
          MV_DEFAULT_CALL_TIMEOUT_SEC);
}

static int
vusage_error (const char *format, va_list ap)
{
  fprintf (stderr, "%s: ", g_get_prgname ());
  vfprintf (stderr, format, ap);
  fputc ('\n', stderr);
  fprintf (stderr, _("Try '%s --help' for more information.\n"), g_get_prgname ());
  return MV_EXIT_USAGE;
}

int
mv_usage_error (const char *format, ...)
{
  va_list ap;
  int status;

  va_start (ap, format);
  status = vusage_error (format, ap);
  va_end (ap);
  return status;
}

int
mv_fail (const char *format, ...)
{
  g_autofree char *message = NULL, *shown = NULL;
  va_list ap;

  va_start (ap, format);
  message = g_strdup_vprintf (format, ap);
  va_end (ap);
  /* Messages quote the daemon, which quotes guests and their consoles. */
  shown = mv_terminal_text (message, -1);
  fprintf (stderr, "%s: %s\n", g_get_prgname (), shown);
  return MV_EXIT_FAILURE;
}

int
mv_fail_bus (const sd_bus_error *error, int r)
{
  if (!sd_bus_error_is_set (error))
    return mv_fail ("%s", g_strerror (r < 0 ? -r : r));

  if (error->message != NULL && error->message[0] != '\0')
    mv_fail ("%s (%s)", error->message, error->name);
  else
    mv_fail ("%s", error->name);

  if (sd_bus_error_has_names (error, SD_BUS_ERROR_TIMEOUT,
                              SD_BUS_ERROR_NO_REPLY))
    fprintf (stderr, "%s\n", _("The daemon may still be working on it; --timeout=SECONDS waits longer."));
  else if (sd_bus_error_has_names (error, SD_BUS_ERROR_SERVICE_UNKNOWN, SD_BUS_ERROR_NAME_HAS_NO_OWNER))
    fprintf (stderr, "%s\n", _("Is microvmd running?"));
  return MV_EXIT_FAILURE;
}

/* Connects on first use, so that usage errors are reported before any bus
 * or password agent is involved. */
static int
ensure_bus (MvCtl *ctl, sd_bus_error *error)
{
  g_autoptr(sd_bus) bus = NULL;
  g_autofree char *failure = NULL;
  int r;

  if (ctl->bus != NULL)
    return 0;

  if (ctl->address != NULL)
    {
      r = sd_bus_new (&bus);
      if (r >= 0)
        r = sd_bus_set_address (bus, ctl->address);
      if (r >= 0)
        r = sd_bus_set_bus_client (bus, 1);
      if (r >= 0)
        r = sd_bus_start (bus);
      if (r < 0)
        failure = g_strdup_printf (_("Failed to connect to the bus at %s: %s"),
                                   ctl->address, g_strerror (-r));
    }
  else if (ctl->session)
    {
      r = sd_bus_open_user (&bus);
      if (r < 0)
        failure = g_strdup_printf (_("Failed to connect to the session bus: %s"), g_strerror (-r));
    }
  else
    {
      r = sd_bus_open_system (&bus);
      if (r < 0)
        failure = g_strdup_printf (_("Failed to connect to the system bus: %s"), g_strerror (-r));
    }
  if (r < 0)
    return sd_bus_error_set (error, SD_BUS_ERROR_NO_SERVER, failure);

  /* Applies to every method call created from now on. */
  r = sd_bus_set_allow_interactive_authorization (bus, ctl->ask_password);
  if (r < 0)
    return sd_bus_error_set_errno (error, r);

  ctl->bus = g_steal_pointer (&bus);

  if (ctl->want_agent)
    ctl->agent = mv_polkit_agent_open ();
  return 0;
}

int
mv_new_call (MvCtl *ctl,
             const char *path,
             const char *interface,
             const char *method,
             sd_bus_error *error,
             sd_bus_message **m)
{
  int r;

  r = ensure_bus (ctl, error);
  if (r < 0)
    return r;

  r = sd_bus_message_new_method_call (ctl->bus, m, MV_BUS_NAME, path, interface, method);
  if (r < 0)
    return sd_bus_error_set_errno (error, r);
  return 0;
}

int
mv_call (MvCtl *ctl,
         const char *path,
         const char *interface,
         const char *method,
         guint64 timeout_usec,
         sd_bus_error *error,
         sd_bus_message **reply,
         const char *types,
         ...)
{
  g_autoptr(sd_bus_message) m = NULL;
  int r;

  r = mv_new_call (ctl, path, interface, method, error, &m);
  if (r < 0)
    return r;

  if (types != NULL)
    {
      va_list ap;

      va_start (ap, types);
      r = sd_bus_message_appendv (m, types, ap);
      va_end (ap);
      if (r < 0)
        return sd_bus_error_set_errno (error, r);
    }

  return sd_bus_call (ctl->bus, m, timeout_usec, error, reply);
}

static const MvCommand *
find_command (const char *name)
{
  for (gsize i = 0; i < G_N_ELEMENTS (commands); i++)
    if (g_str_equal (commands[i].name, name))
      return &commands[i];
  return NULL;
}

static gboolean
parse_timeout (const char *text, guint64 *usec)
{
  guint64 seconds;

  if (!g_ascii_string_to_unsigned (text, 10, 0, G_MAXUINT64 / G_USEC_PER_SEC, &seconds, NULL))
    return FALSE;
  /* sd_bus_call() takes 0 as "the default", so "forever" is spelled out. */
  *usec = seconds == 0 ? G_MAXUINT64 : seconds * G_USEC_PER_SEC;
  return TRUE;
}

/* The command word of @argv, looked for before the options are parsed:
 * "-f" means --file to every command but logs, where it is --follow. */
static const char *
command_word (int argc, char **argv)
{
  for (int i = 1; i < argc; i++)
    {
      const char *arg = argv[i];

      if (strcmp (arg, "--") == 0)
        return i + 1 < argc ? argv[i + 1] : NULL;
      if (g_str_has_prefix (arg, "--"))
        {
          for (const struct option *o = long_options; o->name; o++)
            if (strcmp (arg + 2, o->name) == 0 && o->has_arg == required_argument)
              i++;
          continue;
        }
      if (arg[0] == '-' && arg[1] != '\0')
        {
          /* A short option that takes a value takes the rest, or the next. */
          const char *value = strpbrk (arg + 1, "feuw");

          if (value && value[1] == '\0')
            i++;
          continue;
        }
      return arg;
    }
  return NULL;
}

int
main (int argc, char **argv)
{
  MvCtl ctl = {
    .ask_password = TRUE,
    .timeout_usec = MV_DEFAULT_CALL_TIMEOUT_SEC * G_USEC_PER_SEC,
  };
  g_autoptr(GPtrArray) env = g_ptr_array_new ();
  g_autoptr(GPtrArray) labels = g_ptr_array_new ();
  g_autoptr(GPtrArray) sets = g_ptr_array_new ();
  MvCommandOptions given = 0;
  const MvCommand *command;
  int n_args, status, c;
  const char *word;
  gboolean logs;

  setlocale (LC_ALL, "");
  bindtextdomain (GETTEXT_PACKAGE, LOCALEDIR);
  bind_textdomain_codeset (GETTEXT_PACKAGE, "UTF-8");
  textdomain (GETTEXT_PACKAGE);
  g_set_prgname ("microvmctl");

  word = command_word (argc, argv);
  logs = word && strcmp (word, "logs") == 0;
  while ((c = getopt_long (argc, argv, logs ? "hftTe:u:w:" : "hf:tTe:u:w:", long_options,
                           NULL)) >= 0)
    {
      if (logs && c == 'f')
        c = ARG_FOLLOW;
      switch (c)
        {
        case 'h':
          print_help ();
          return MV_EXIT_OK;
        case ARG_VERSION:
          printf ("microvmctl %s\n", PACKAGE_VERSION);
          return MV_EXIT_OK;
        case ARG_JSON:
          ctl.json = TRUE;
          break;
        case ARG_SESSION:
          ctl.session = TRUE;
          break;
        case ARG_ADDRESS:
          ctl.address = optarg;
          break;
        case ARG_NO_ASK_PASSWORD:
          ctl.ask_password = FALSE;
          break;
        case ARG_TIMEOUT:
          if (!parse_timeout (optarg, &ctl.timeout_usec))
            return mv_usage_error (_("invalid --timeout '%s': expected whole seconds"), optarg);
          ctl.timeout_given = TRUE;
          break;
        case 'f':
          ctl.file = optarg;
          given |= MV_OPT_FILE;
          break;
        case ARG_START:
          ctl.start = TRUE;
          given |= MV_OPT_START;
          break;
        case ARG_FORCE:
          ctl.force = TRUE;
          given |= MV_OPT_FORCE;
          break;
        case 't':
          ctl.tty = MV_TTY_YES;
          given |= MV_OPT_TTY;
          break;
        case 'T':
          ctl.tty = MV_TTY_NO;
          given |= MV_OPT_TTY;
          break;
        case 'e':
          {
            g_autofree char *key = NULL, *value = NULL;

            if (!mv_env_assignment_parse (optarg, &key, &value))
              return mv_usage_error (_("invalid --env '%s': expected KEY=VALUE"), optarg);
            g_ptr_array_add (env, optarg);
            given |= MV_OPT_ENV;
            break;
          }
        case 'u':
          ctl.user = optarg;
          given |= MV_OPT_USER;
          break;
        case 'w':
          ctl.workdir = optarg;
          given |= MV_OPT_WORKDIR;
          break;
        case ARG_HEALTHY:
          ctl.healthy = TRUE;
          given |= MV_OPT_HEALTHY;
          break;
        case ARG_NEXT_STOP:
          ctl.next_stop = TRUE;
          given |= MV_OPT_NEXT_STOP;
          break;
        case ARG_ID:
          ctl.wait_id = optarg;
          given |= MV_OPT_ID;
          break;
        case ARG_LABEL:
          if (!mv_label_selector_valid (optarg))
            return mv_usage_error ("invalid --label '%s': expected KEY=VALUE or KEY", optarg);
          g_ptr_array_add (labels, optarg);
          given |= MV_OPT_LABEL;
          break;
        case ARG_NAMES:
          ctl.names = TRUE;
          given |= MV_OPT_NAMES;
          break;
        case ARG_POLICY:
          ctl.policy = optarg;
          given |= MV_OPT_POLICY;
          break;
        case ARG_GATEWAY:
          ctl.gateway = optarg;
          given |= MV_OPT_GATEWAY;
          break;
        case ARG_NO_NAT:
          ctl.no_nat = TRUE;
          given |= MV_OPT_NO_NAT;
          break;
        case ARG_MTU:
          ctl.mtu = optarg;
          given |= MV_OPT_MTU;
          break;
        case ARG_FOLLOW:
          ctl.follow = TRUE;
          given |= MV_OPT_FOLLOW;
          break;
        case ARG_SINCE:
          ctl.since = optarg;
          given |= MV_OPT_SINCE;
          break;
        case ARG_UNTIL:
          ctl.until = optarg;
          given |= MV_OPT_UNTIL;
          break;
        case ARG_INTERVAL:
          ctl.interval = optarg;
          given |= MV_OPT_INTERVAL;
          break;
        case ARG_ITERATIONS:
          ctl.iterations = optarg;
          given |= MV_OPT_ITERATIONS;
          break;
        case ARG_VCPUS:
          ctl.vcpus = optarg;
          given |= MV_OPT_VCPUS;
          break;
        case ARG_MEMORY:
          ctl.memory = optarg;
          given |= MV_OPT_MEMORY;
          break;
        case ARG_TAIL:
          ctl.tail = optarg;
          given |= MV_OPT_TAIL;
          break;
        case ARG_SOURCE:
          ctl.source = optarg;
          given |= MV_OPT_SOURCE;
          break;
        case ARG_REMOTE:
          ctl.remote = optarg;
          given |= MV_OPT_REMOTE;
          break;
        case ARG_REQUEST:
          ctl.request = optarg;
          given |= MV_OPT_REQUEST;
          break;
        case ARG_SET:
          /* Checked by the command, before it calls the daemon. */
          g_ptr_array_add (sets, optarg);
          given |= MV_OPT_SET;
          break;
        default:
          /* getopt_long() has said what was wrong. */
          fprintf (stderr, _("Try '%s --help' for more information.\n"), g_get_prgname ());
          return MV_EXIT_USAGE;
        }
    }

  ctl.env = env;
  ctl.labels = labels;
  ctl.sets = sets;

  if (ctl.names && ctl.json)
    return mv_usage_error ("--names and --json cannot be used together");

  if (ctl.healthy && ctl.next_stop)
    return mv_usage_error (_("--healthy and --next-stop cannot be used together"));

  if (ctl.session && ctl.address != NULL)
    return mv_usage_error (_("--session and --address cannot be used together"));

  if (optind >= argc)
    return mv_usage_error (_("no command given"));

  command = find_command (argv[optind]);
  if (command == NULL)
    return mv_usage_error (_("unknown command '%s'"), argv[optind]);

  for (gsize i = 0; i < G_N_ELEMENTS (command_option_names); i++)
    if ((given & command_option_names[i].flag) && !(command->options & command_option_names[i].flag))
      return mv_usage_error (_("%s does not apply to '%s'"), command_option_names[i].spelling, command->name);

  if ((command->options & MV_OPT_FILE) && ctl.file == NULL)
    return mv_usage_error (_("'%s' needs a spec: -f FILE (- for standard input)"), command->name);

  n_args = argc - optind - 1;
  if (n_args < command->min_args || n_args > command->max_args)
    /* TRANSLATORS: the first %s is "missing argument" or "too many
       arguments", the rest the command's synopsis. */
    return mv_usage_error (_("%s; usage: %s %s%s%s"),
                           n_args < command->min_args ? _("missing argument")
                                                      : _("too many arguments"),
                           g_get_prgname (), command->name,
                           command->synopsis[0] != '\0' ? " " : "", command->synopsis);

  /* Only the local system bus shares the caller's polkit session. */
  ctl.want_agent = command->changes && ctl.ask_password && !ctl.session && ctl.address == NULL;

  status = command->func (&ctl, command->method, n_args, argv + optind + 1);

  g_clear_pointer (&ctl.bus, sd_bus_flush_close_unref);
  g_clear_pointer (&ctl.agent, mv_polkit_agent_close);
  if (fflush (stdout) != 0 && status == MV_EXIT_OK)
    status = mv_fail (_("Failed to write the output: %s"), g_strerror (errno));
  return status;
}
