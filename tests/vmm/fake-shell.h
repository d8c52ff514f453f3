/* The simulated guest's user space: a small in-memory file system, a
 * fixed /etc/passwd and /etc/group, and the commands on its PATH, run as
 * simulated processes with busybox's output for the uses the tests make
 * of them. There are no real processes: a process is a script of simple
 * commands stepped by its owner, on the guest's clock.
 *
 *     root    0:0       /root
 *     tester  1000:1000 /home/tester   groups tester(1000), extra(2000)
 *
 * Commands: true, false, echo, cat, printenv, id, pwd, hostname, touch,
 * rm, test -e, sleep, uname, listen PORT (serves PORT until it is
 * signalled), sh -c 'A; B; exit N', and
 * /run/microvmd/microvmd-agent authorized-keys [USER]. */
#pragma once
#include <glib.h>
#include <json-glib/json-glib.h>

#define FAKE_SHELL_METADATA_PATH "/run/microvmd/metadata.json"
#define FAKE_SHELL_KEYS_PATH     "/run/microvmd/ssh-authorized-keys"
#define FAKE_SHELL_AGENT_PATH    "/run/microvmd/microvmd-agent"

typedef struct {
  GBytes  *content;
  guint32  mode;
} FakeFile;

/* What the processes see; the agent owns it. */
typedef struct {
  GHashTable *files;       /* absolute path -> FakeFile */
  GPtrArray  *tmpfs;       /* mount targets, in order */
  GPtrArray  *read_only;   /* targets of the read-only file and tmpfs mounts */
  gboolean    root;        /* an overlay root is mounted */
  char       *hostname;
  GPtrArray  *keys;        /* the ssh keys, strings */
  double      now;         /* the guest's clock, seconds */
} FakeSystem;

#define FAKE_SHELL_GROUPS_MAX 4

typedef struct {
  char    *name;
  guint32  uid;
  guint32  gid;
  guint32  groups[FAKE_SHELL_GROUPS_MAX];   /* supplementary, the primary first */
  guint    n_groups;
  char    *home;
} FakeCreds;

typedef struct _FakeProc FakeProc;

void      fake_system_init (FakeSystem *sys);
void      fake_system_clear (FakeSystem *sys);
void      fake_system_put_file (FakeSystem *sys, const char *path, GBytes *content, guint32 mode);
/* Whether @path is on a read-only mount: a read-only file mount, or a
 * read-only tmpfs or what is under it. */
gboolean  fake_system_read_only (FakeSystem *sys, const char *path);
JsonNode *fake_system_save (FakeSystem *sys);
void      fake_system_load (FakeSystem *sys, JsonObject *state);

/* "user", "uid", "user:group" or "uid:gid" (NULL or empty: root) against
 * the fixed passwd and group; FALSE with *@message set (g_free) if a
 * name is not there. */
gboolean  fake_creds_resolve (const char *spec, FakeCreds *creds, char **message);
void      fake_creds_clear (FakeCreds *creds);
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (FakeCreds, fake_creds_clear)

/* The command @name names ("cat", "/bin/cat"), or NULL if PATH has none. */
const char *fake_shell_find (const char *name);

/* A process running @argv (whose command fake_shell_find() knows) with
 * @env (the whole environment), in @workdir. With @tty its stderr is its
 * stdout. */
FakeProc *fake_proc_new (FakeSystem *sys, char **argv, char **env, const char *workdir,
                         const FakeCreds *creds, gboolean tty);
void      fake_proc_free (FakeProc *proc);
/* Runs it as far as it goes now; TRUE if anything moved. */
gboolean  fake_proc_run (FakeProc *proc);
/* A signal to its process group: it ends killed by it, unless it is one
 * a process ignores by default. */
void      fake_proc_signal (FakeProc *proc, int signum);

/* Its stdin (the owner appends and ends it) and what it has taken from
 * it since the owner last looked (then zeroed). */
GByteArray *fake_proc_stdin (FakeProc *proc);
void        fake_proc_close_stdin (FakeProc *proc);
gsize       fake_proc_take_consumed (FakeProc *proc);
/* Its output on @stream (1 or 2), which the owner drains. */
GByteArray *fake_proc_output (FakeProc *proc, int stream);

gboolean  fake_proc_done (FakeProc *proc);
/* Once done: its exit code, or the signal that killed it (0: none). */
int       fake_proc_exit_code (FakeProc *proc);
int       fake_proc_signal_number (FakeProc *proc);
/* The port it serves, 0 if none. */
guint32   fake_proc_listening (FakeProc *proc);

/* A running process as a snapshot keeps it (not its pending I/O). */
JsonNode *fake_proc_save (FakeProc *proc);
FakeProc *fake_proc_load (FakeSystem *sys, JsonObject *state);
