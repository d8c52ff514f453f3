/* Detached VMM processes and their identity. */
#include "process.h"
#include "console.h"
#include "jail.h"
#include "vmm-parent.h"
#include "core/errors.h"
#include "util/fd.h"
#include "util/unix-socket.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <linux/capability.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

#define LOG_TAIL_LINES   10
/* The descriptors the VMM's parent keeps: the socket's directory, the
 * jail's lease, runtime directory and granted files, and the console's
 * three. */
#define KEEP_MAX         (MV_VMM_PARENT_MAX_GRANTS + 6)
/* How often the VMM's socket is looked for when its directory cannot be
 * watched, and once it is there but does not serve yet (between the
 * VMM's bind and its listen). */
#define SOCKET_POLL_MS   20
#define SOCKET_RETRY_MS  1

void
mv_process_free (MvProcess *process)
{
  if (!process)
    return;
  g_free (process->socket_path);
  g_free (process);
}

MvProcess *
mv_process_copy (const MvProcess *process)
{
  MvProcess *copy = g_new0 (MvProcess, 1);

  copy->pid = process->pid;
  copy->start_time = process->start_time;
  copy->socket_path = g_strdup (process->socket_path);
  copy->uid = process->uid;
  return copy;
}

char *
mv_vmm_log_path (const char *socket_path)
{
  g_autofree char *dir = g_path_get_dirname (socket_path);

  return g_build_filename (dir, MV_VMM_LOG_NAME, NULL);
}

char *
mv_vmm_exit_path (const char *socket_path)
{
  g_autofree char *dir = g_path_get_dirname (socket_path);

  return g_build_filename (dir, MV_VMM_EXIT_NAME, NULL);
}

gboolean
mv_vmm_read_exit (const char *socket_path, int *wait_status)
{
  g_autofree char *path = mv_vmm_exit_path (socket_path);
  char text[32];
  char *end = NULL;
  gint64 value;
  ssize_t n;
  /* The directory is shared with the VMM: no link is followed. */
  int fd = open (path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);

  if (fd < 0)
    return FALSE;
  n = read (fd, text, sizeof text - 1);
  close (fd);
  if (n <= 0)
    return FALSE;
  text[n] = '\0';
  value = g_ascii_strtoll (text, &end, 10);
  if (end == text || value < 0 || value > G_MAXINT)
    return FALSE;
  *wait_status = (int) value;
  return TRUE;
}

static int
pidfd_open (int pid)
{
  return (int) syscall (SYS_pidfd_open, pid, 0);
}

static int
pidfd_send_signal (int pidfd, int signo)
{
  return (int) syscall (SYS_pidfd_send_signal, pidfd, signo, NULL, 0);
}

/* State letter and start time of @pid, from /proc/PID/stat. The command
 * name in parentheses may hold anything, so fields count from the last ')'. */
static gboolean
read_stat (int pid, char *state, guint64 *start_time)
{
  g_autofree char *path = g_strdup_printf ("/proc/%d/stat", pid);
  g_autofree char *contents = NULL;
  g_auto (GStrv) fields = NULL;
  const char *p;

  if (!g_file_get_contents (path, &contents, NULL, NULL))
    return FALSE;
  p = strrchr (contents, ')');
  if (!p)
    return FALSE;
  fields = g_strsplit_set (p + 1, " \n", -1);
  /* fields[0] is empty (the space after ')'); then field 3 is the state
   * and field 22 the start time. */
  if (g_strv_length (fields) < 21 || !fields[1][0])
    return FALSE;
  *state = fields[1][0];
  return g_ascii_string_to_unsigned (fields[20], 10, 0, G_MAXUINT64, start_time, NULL);
}

static gboolean
cmdline_has (int pid, const char *socket_path)
{
  g_autofree char *path = g_strdup_printf ("/proc/%d/cmdline", pid);
  g_autofree char *contents = NULL;
  g_autofree char *escaped = NULL;
  g_auto (GStrv) commas = NULL;
  gsize length;

  if (!g_file_get_contents (path, &contents, &length, NULL) || length == 0)
    return FALSE;
  /* QEMU option values double their commas. */
  commas = g_strsplit (socket_path, ",", -1);
  escaped = g_strjoinv (",,", commas);
  for (gsize i = 0; i < length; i += strlen (contents + i) + 1)
    if (strstr (contents + i, socket_path) || strstr (contents + i, escaped))
      return TRUE;
  return FALSE;
}

/* The real UID of @pid, from /proc/PID/status; -1 if it cannot be read. */
static gint64
read_uid (int pid)
{
  g_autofree char *path = g_strdup_printf ("/proc/%d/status", pid);
  g_autofree char *contents = NULL;
  const char *line;

  if (!g_file_get_contents (path, &contents, NULL, NULL) || !(line = strstr (contents, "\nUid:")))
    return -1;
  return g_ascii_strtoll (line + strlen ("\nUid:"), NULL, 10);
}

static gboolean
is_recorded (int pid, guint64 start_time, const char *socket_path, gint64 uid)
{
  guint64 actual = 0;
  char state = 0;

  if (pid <= 1 || !read_stat (pid, &state, &actual))
    return FALSE;
  if (state == 'Z' || state == 'X' || actual != start_time)
    return FALSE;
  if (uid >= 0 && read_uid (pid) != uid)
    return FALSE;
  return socket_path == NULL || cmdline_has (pid, socket_path);
}

MvProcess *
mv_process_attach (int pid, guint64 start_time, const char *socket_path, gint64 uid)
{
  MvProcess *process;

  if (!is_recorded (pid, start_time, socket_path, uid))
    return NULL;
  process = g_new0 (MvProcess, 1);
  process->pid = pid;
  process->start_time = start_time;
  process->socket_path = g_strdup (socket_path);
  process->uid = uid;
  return process;
}

GPtrArray *
mv_process_find_by_socket (const char *socket_path)
{
  GPtrArray *found = g_ptr_array_new_with_free_func ((GDestroyNotify) mv_process_free);
  g_autoptr (GDir) proc = g_dir_open ("/proc", 0, NULL);
  g_autofree char *parent = g_path_get_dirname (socket_path);
  g_autofree char *dir = realpath (parent, NULL);
  g_autofree char *lexical = g_canonicalize_filename (parent, NULL);
  const char *name;

  while (proc && dir && (name = g_dir_read_name (proc)))
    {
      g_autofree char *cwd_link = NULL;
      g_autofree char *cwd = NULL;
      guint64 pid, start_time;
      char state;

      if (!g_ascii_string_to_unsigned (name, 10, 2, G_MAXINT, &pid, NULL) ||
          (int) pid == getpid () || !read_stat ((int) pid, &state, &start_time) ||
          state == 'Z' || state == 'X')
        continue;
      /* A VMM runs in its socket's directory; a process that merely names
       * the socket (a shell, a tail -f) does not. A walled-in VMM's is
       * the directory as its own root shows it, at the path it was given. */
      cwd_link = g_strdup_printf ("/proc/%s/cwd", name);
      cwd = g_file_read_link (cwd_link, NULL);
      if ((g_strcmp0 (cwd, dir) == 0 || g_strcmp0 (cwd, lexical) == 0) &&
          cmdline_has ((int) pid, socket_path))
        {
          MvProcess *process = g_new0 (MvProcess, 1);
          process->pid = (int) pid;
          process->start_time = start_time;
          process->socket_path = g_strdup (socket_path);
          process->uid = -1;
          g_ptr_array_add (found, process);
        }
    }
  return found;
}

gboolean
mv_process_alive (const MvProcess *process)
{
  return is_recorded (process->pid, process->start_time, process->socket_path, process->uid);
}

int
mv_process_open_pidfd (const MvProcess *process)
{
  int fd = pidfd_open (process->pid);

  if (fd < 0)
    return -1;
  /* The pidfd pins whatever process has the PID now; only once it is known
   * to be ours may it be used. */
  if (!is_recorded (process->pid, process->start_time, process->socket_path, process->uid))
    {
      close (fd);
      errno = ESRCH;
      return -1;
    }
  return fd;
}

gboolean
mv_process_signal (const MvProcess *process, int signo, GError **error)
{
  int fd = mv_process_open_pidfd (process);
  int saved;

  if (fd < 0)
    {
      if (errno == ESRCH)
        return TRUE;
      saved = errno;
      g_set_error (error, MV_ERROR, MV_ERROR_FAILED, "Could not reach process %d: %s",
                   process->pid, g_strerror (saved));
      return FALSE;
    }
  if (pidfd_send_signal (fd, signo) < 0 && errno != ESRCH)
    {
      saved = errno;
      close (fd);
      g_set_error (error, MV_ERROR, MV_ERROR_FAILED, "Could not signal process %d: %s",
                   process->pid, g_strerror (saved));
      return FALSE;
    }
  close (fd);
  return TRUE;
}

/* A pidfd for waiting on the process. PID and start time suffice to tell
 * it apart: a process on its way out has no command line left to check,
 * and must still be waited for. */
static int
open_pidfd_to_wait (const MvProcess *process)
{
  int fd = pidfd_open (process->pid);
  guint64 actual = 0;
  char state = 0;

  if (fd < 0)
    return -1;
  if (!read_stat (process->pid, &state, &actual) || actual != process->start_time)
    {
      close (fd);
      return -1;
    }
  return fd;
}

/* How long a VMM's parent may take, once the VMM ended, to write down
 * how it ended. */
#define EXIT_RECORD_WAIT_US  (G_USEC_PER_SEC)

/* Waits until the parent of the VMM that served on @socket_path has
 * finished with its exit file, so that a VMM that is gone is also done
 * writing beside its socket. Only a VMM started with a reaper has one. */
void
mv_vmm_wait_exit_recorded (const char *socket_path)
{
  g_autofree char *path = mv_vmm_exit_path (socket_path);
  g_autofree char *temp = g_strconcat (path, ".tmp", NULL);
  gint64 deadline = g_get_monotonic_time () + EXIT_RECORD_WAIT_US;

  while (g_file_test (temp, G_FILE_TEST_EXISTS) && g_get_monotonic_time () < deadline)
    g_usleep (5000);
}

gboolean
mv_process_wait (const MvProcess *process, guint timeout_ms)
{
  int fd = open_pidfd_to_wait (process);
  gboolean gone;

  if (fd < 0)
    return TRUE;
  gone = mv_fd_wait (fd, POLLIN, g_get_monotonic_time () + (gint64) timeout_ms * 1000);
  close (fd);
  if (gone && process->socket_path)
    mv_vmm_wait_exit_recorded (process->socket_path);
  return gone;
}

gboolean
mv_process_kill (const MvProcess *process, GError **error)
{
  int fd = mv_process_open_pidfd (process);
  gboolean gone;

  if (fd < 0)
    {
      int saved = errno;
      if (saved == ESRCH)
        return TRUE;
      g_set_error (error, MV_ERROR, MV_ERROR_FAILED, "Could not reach process %d: %s",
                   process->pid, g_strerror (saved));
      return FALSE;
    }
  /* Signal and wait through the one pidfd: once the process has begun to
   * exit its identity can no longer be checked by command line. SIGKILL
   * cannot be ignored; a process in uninterruptible sleep still takes a
   * moment to go. */
  if (pidfd_send_signal (fd, SIGKILL) < 0 && errno != ESRCH)
    {
      int saved = errno;
      close (fd);
      g_set_error (error, MV_ERROR, MV_ERROR_FAILED, "Could not signal process %d: %s",
                   process->pid, g_strerror (saved));
      return FALSE;
    }
  gone = mv_fd_wait (fd, POLLIN, g_get_monotonic_time () + 10 * G_USEC_PER_SEC);
  close (fd);
  if (gone && process->socket_path)
    mv_vmm_wait_exit_recorded (process->socket_path);
  if (!gone)
    {
      g_set_error (error, MV_ERROR, MV_ERROR_FAILED,
                   "Process %d did not end within 10 s of SIGKILL", process->pid);
      return FALSE;
    }
  return TRUE;
}

/* read_bytes and write_bytes of /proc/PID/io: what the process made the
 * block layer read and write. */
static void
read_io (const MvProcess *process, MvRuntimeUsage *usage)
{
  g_autofree char *path = g_strdup_printf ("/proc/%d/io", process->pid);
  g_autofree char *contents = NULL;
  g_auto (GStrv) lines = NULL;

  if (!g_file_get_contents (path, &contents, NULL, NULL))
    return;
  lines = g_strsplit (contents, "\n", -1);
  for (guint i = 0; lines[i]; i++)
    {
      if (g_str_has_prefix (lines[i], "read_bytes: "))
        usage->disk_read_bytes = g_ascii_strtoull (lines[i] + 12, NULL, 10);
      else if (g_str_has_prefix (lines[i], "write_bytes: "))
        usage->disk_write_bytes = g_ascii_strtoull (lines[i] + 13, NULL, 10);
    }
}

gboolean
mv_process_usage (const MvProcess *process, MvRuntimeUsage *usage, GError **error)
{
  g_autofree char *path = g_strdup_printf ("/proc/%d/stat", process->pid);
  g_autofree char *contents = NULL;
  g_auto (GStrv) fields = NULL;
  guint64 utime, stime, start_time, rss_pages;
  long ticks = sysconf (_SC_CLK_TCK);
  long page_size = sysconf (_SC_PAGESIZE);
  const char *p;

  *usage = (MvRuntimeUsage) { 0 };
  if (!g_file_get_contents (path, &contents, NULL, NULL) ||
      !(p = strrchr (contents, ')')) ||
      g_strv_length (fields = g_strsplit_set (p + 1, " \n", -1)) < 23 ||
      !g_ascii_string_to_unsigned (fields[20], 10, 0, G_MAXUINT64, &start_time, NULL) ||
      start_time != process->start_time || fields[1][0] == 'Z' ||
      !mv_process_alive (process))
    {
      g_set_error (error, MV_ERROR, MV_ERROR_INVALID_STATE, "The VMM process %d is not running",
                   process->pid);
      return FALSE;
    }
  /* Fields 14, 15 and 24 of stat(5) (utime, stime, rss), counted from the
   * state, field 3, at fields[1]. */
  if (!g_ascii_string_to_unsigned (fields[12], 10, 0, G_MAXUINT64, &utime, NULL) ||
      !g_ascii_string_to_unsigned (fields[13], 10, 0, G_MAXUINT64, &stime, NULL) ||
      !g_ascii_string_to_unsigned (fields[22], 10, 0, G_MAXUINT64, &rss_pages, NULL) ||
      ticks <= 0 || page_size <= 0)
    {
      g_set_error (error, MV_ERROR, MV_ERROR_FAILED, "Could not read the usage of process %d",
                   process->pid);
      return FALSE;
    }
  usage->cpu_ns = (utime + stime) * (G_GUINT64_CONSTANT (1000000000) / (guint64) ticks);
  usage->memory_bytes = rss_pages * (guint64) page_size;
  read_io (process, usage);
  return TRUE;
}

void
mv_process_to_json (const MvProcess *process, JsonObject *object)
{
  json_object_set_int_member (object, "pid", process->pid);
  json_object_set_int_member (object, "start_time", (gint64) process->start_time);
  json_object_set_string_member (object, "socket", process->socket_path);
  if (process->uid >= 0)
    {
      /* One number for the user and the group (jail.h). */
      json_object_set_int_member (object, "uid", process->uid);
      json_object_set_int_member (object, "gid", process->uid);
    }
}

MvProcess *
mv_process_from_json (JsonObject *object, GError **error)
{
  JsonNode *pid = object ? json_object_get_member (object, "pid") : NULL;
  JsonNode *start = object ? json_object_get_member (object, "start_time") : NULL;
  JsonNode *socket = object ? json_object_get_member (object, "socket") : NULL;
  JsonNode *uid = object ? json_object_get_member (object, "uid") : NULL;
  MvProcess *process;

  if (!pid || json_node_get_value_type (pid) != G_TYPE_INT64 ||
      !start || json_node_get_value_type (start) != G_TYPE_INT64 ||
      !socket || json_node_get_value_type (socket) != G_TYPE_STRING)
    {
      g_set_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT,
                   "vmm: the recorded identity lacks pid, start_time or socket");
      return NULL;
    }
  process = g_new0 (MvProcess, 1);
  process->pid = (int) json_node_get_int (pid);
  process->start_time = (guint64) json_node_get_int (start);
  process->socket_path = g_strdup (json_node_get_string (socket));
  /* Older records name no user: the VMM ran as root. */
  process->uid = uid && json_node_get_value_type (uid) == G_TYPE_INT64 ? json_node_get_int (uid)
                                                                        : -1;
  return process;
}

MvProcess *
mv_process_attach_recorded (JsonObject *identity)
{
  g_autoptr (MvProcess) recorded = identity ? mv_process_from_json (identity, NULL) : NULL;

  if (!recorded)
    return NULL;
  return mv_process_attach (recorded->pid, recorded->start_time, recorded->socket_path,
                            recorded->uid);
}

/* ---- starting ---- */

typedef enum {
  READ_ALL,
  WRITE_ALL,
} Transfer;

/* Moves all @len bytes, through EINTR; FALSE at an error or end of file. */
static gboolean
transfer_all (int fd, void *buf, gsize len, Transfer way)
{
  char *p = buf;

  while (len > 0)
    {
      ssize_t n = way == WRITE_ALL ? write (fd, p, len) : read (fd, p, len);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        return FALSE;
      p += n;
      len -= n;
    }
  return TRUE;
}

/* Why the VMM did not get to exec: an errno and, if it was the wall,
 * which step of it (a static string, the same in the daemon). */
typedef struct {
  int         err;
  const char *step;
  gboolean    cgroup;     /* it could not join its cgroup */
} ExecFailure;

/* Runs in the forked grandchild, so only async-signal-safe calls. */
G_GNUC_NORETURN static void
exec_vmm (const int go_pipe[2], int err_fd, int null_fd, int log_fd, int console_fd,
          const char *dir, char *const *argv, char *const *envp, const MvJail *jail,
          const int *passed, guint n_passed, const MvCgroupJoin *cgroup, guint64 memlock)
{
  struct rlimit locked = { memlock, memlock };
  struct sigaction dfl = { .sa_handler = SIG_DFL };
  ExecFailure failure = { 0, NULL, FALSE };
  sigset_t none;
  char go;
  int r;

  /* Park until the parent holds a pidfd for this process; EOF if it died. */
  close (go_pipe[1]);
  if (read (go_pipe[0], &go, 1) != 1)
    _exit (127);
  /* The guest's serial console is the VMM's stdin and stdout, if it has
   * a holder. */
  if (dup2 (console_fd >= 0 ? console_fd : null_fd, 0) < 0 ||
      dup2 (console_fd >= 0 ? console_fd : log_fd, 1) < 0 || dup2 (log_fd, 2) < 0)
    failure.err = errno;
  /* Before the wall, which takes the right to raise it. */
  else if (memlock && setrlimit (RLIMIT_MEMLOCK, &locked) < 0)
    failure.err = errno;
  /* Before the wall, which takes the right to move. */
  else if (cgroup && (r = mv_cgroup_join (cgroup)) < 0)
    {
      failure.err = -r;
      failure.cgroup = TRUE;
    }
  else if (jail && (r = mv_jail_enter (jail, &failure.step)) < 0)
    failure.err = -r;
  else if (chdir (dir) < 0)
    failure.err = errno;
  else
    {
      sigemptyset (&none);
      sigprocmask (SIG_SETMASK, &none, NULL);
      for (int sig = 1; sig < NSIG; sig++)
        if (sig != SIGKILL && sig != SIGSTOP)
          sigaction (sig, &dfl, NULL);
      /* Nothing of the daemon's but stdio and what is passed on purpose
       * crosses exec. */
      syscall (SYS_close_range, 3, ~0U, CLOSE_RANGE_CLOEXEC);
      for (guint i = 0; i < n_passed; i++)
        fcntl (passed[i], F_SETFD, 0);
      /* What the VMM creates is its own alone, whatever the daemon's umask. */
      umask (077);
      execve (argv[0], argv, envp);
      failure.err = errno;
    }
  (void) !write (err_fd, &failure, sizeof failure);
  _exit (127);
}

/* Closes every descriptor from 1 up but the @n in @keep. */
static void
close_all_but (const int *keep, guint n)
{
  int sorted[KEEP_MAX];
  guint count = 0;
  unsigned int next = 1;

  for (guint i = 0; i < n && count < G_N_ELEMENTS (sorted); i++)
    sorted[count++] = keep[i];
  for (guint i = 1; i < count; i++)
    for (guint j = i; j > 0 && sorted[j - 1] > sorted[j]; j--)
      {
        int t = sorted[j];
        sorted[j] = sorted[j - 1];
        sorted[j - 1] = t;
      }
  for (guint i = 0; i < count; i++)
    {
      if ((unsigned int) sorted[i] > next)
        syscall (SYS_close_range, next, (unsigned int) sorted[i] - 1, 0);
      if ((unsigned int) sorted[i] >= next)
        next = (unsigned int) sorted[i] + 1;
    }
  syscall (SYS_close_range, next, ~0U, 0);
}

/* The VMM's parent stays root, so that a walled-in VMM, which runs as
 * another user, can neither signal nor trace it; but it keeps only what
 * taking a jail's ACL entries back needs (CAP_FOWNER), and what giving
 * its TAP devices back to root needs (CAP_NET_ADMIN) if it has any. It
 * gains nothing by exec. */
static void
reaper_drop_privileges (gboolean net_admin)
{
  struct __user_cap_header_struct header = { _LINUX_CAPABILITY_VERSION_3, 0 };
  struct __user_cap_data_struct caps[_LINUX_CAPABILITY_U32S_3] = { { 0 } };
  guint32 kept = 1u << CAP_FOWNER | (net_admin ? 1u << CAP_NET_ADMIN : 0);

  for (int cap = 0; cap < 64; cap++)
    if (cap >= 32 || !(kept & (1u << cap)))
      prctl (PR_CAPBSET_DROP, cap, 0, 0, 0);
  caps[0].effective = caps[0].permitted = kept;
  syscall (SYS_capset, &header, caps);
  prctl (PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
  prctl (PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
}

/* The fork that made the VMM @vmm becomes its parent (vmm-parent.h): it
 * keeps only the descriptors @parent names (in @keep) and the exit file,
 * and execs @argv, or does the parent's work itself if it cannot. Only
 * async-signal-safe calls: this is a fork of a threaded process. */
static void G_GNUC_NORETURN
become_vmm_parent (pid_t vmm, MvVmmParent *parent, char **argv, char *const *envp,
                   const int *keep, guint n_keep)
{
  struct sigaction dfl = { .sa_handler = SIG_DFL };
  sigset_t none;
  int fd;

  /* The exit file is opened now, as descriptor 0 (vmm-parent.h). */
  fd = openat (parent->dir_fd, MV_VMM_EXIT_TEMP_NAME, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW,
               0600);
  if (fd < 0 || dup2 (fd, 0) < 0)
    _exit (1);
  close_all_but (keep, n_keep);
  for (guint i = 0; i < n_keep; i++)
    fcntl (keep[i], F_SETFD, 0);
  sigemptyset (&none);
  sigprocmask (SIG_SETMASK, &none, NULL);
  for (int sig = 1; sig < NSIG; sig++)
    if (sig != SIGKILL && sig != SIGSTOP)
      sigaction (sig, &dfl, NULL);
  reaper_drop_privileges (parent->jailed && parent->grants.n_taps > 0);

  mv_vmm_parent_set_vmm (argv, vmm);
  execve (argv[0], argv, envp);
  parent->vmm = vmm;
  mv_vmm_parent_run (parent);
}

static void
close_pipe (int p[2])
{
  for (int i = 0; i < 2; i++)
    if (p[i] >= 0)
      {
        close (p[i]);
        p[i] = -1;
      }
}

static gboolean
socket_accepts (const char *socket_path)
{
  int fd = mv_unix_connect (socket_path, 0, NULL);

  if (fd < 0)
    return FALSE;
  close (fd);
  return TRUE;
}

/* Whether a socket listens on @socket_path, by /proc/net/unix (the flag
 * __SO_ACCEPTCON, 0x10000), without connecting: a server that serves one
 * peer only would take a probe for it. */
static gboolean
socket_listens (const char *socket_path)
{
  g_autofree char *table = NULL;
  g_auto (GStrv) lines = NULL;

  if (!g_file_get_contents ("/proc/net/unix", &table, NULL, NULL))
    return FALSE;
  lines = g_strsplit (table, "\n", -1);
  for (char **line = lines; *line; line++)
    {
      g_auto (GStrv) fields = g_strsplit_set (*line, " ", -1);
      g_autoptr (GPtrArray) words = g_ptr_array_new ();

      for (char **f = fields; *f; f++)
        if (**f)
          g_ptr_array_add (words, *f);
      /* Num RefCount Protocol Flags Type St Inode Path */
      if (words->len == 8 && g_str_equal (words->pdata[7], socket_path) &&
          (g_ascii_strtoull (words->pdata[3], NULL, 16) & 0x10000) != 0)
        return TRUE;
    }
  return FALSE;
}

static void
fail_with_log (GError **error, const char *log_path, goffset log_offset, const char *format, ...)
  G_GNUC_PRINTF (4, 5);

static void
fail_with_log (GError **error, const char *log_path, goffset log_offset, const char *format, ...)
{
  g_autofree char *what = NULL;
  g_autofree char *tail = mv_file_tail (log_path, log_offset, LOG_TAIL_LINES);
  va_list args;

  va_start (args, format);
  what = g_strdup_vprintf (format, args);
  va_end (args);
  if (*tail)
    g_set_error (error, MV_ERROR, MV_ERROR_FAILED, "%s; its log %s ends with:\n%s",
                 what, log_path, tail);
  else
    g_set_error (error, MV_ERROR, MV_ERROR_FAILED, "%s; its log %s is empty", what, log_path);
}

MvProcess *
mv_process_start (const char *socket_path, const char *const *argv, MvJail *jail,
                  guint timeout_ms, GError **error)
{
  MvProcessOptions options = { .jail = jail };

  return mv_process_start_with (socket_path, argv, &options, timeout_ms, error);
}

/* What the VMM of @binary may be let lock, @wanted at most: the daemon
 * can raise the limit only up to its own hard limit unless it has
 * CAP_SYS_RESOURCE; short of that, as much as it may, and a warning that
 * says how to give more (the unit's LimitMEMLOCK). */
static guint64
memlock_for (const char *binary, guint64 wanted)
{
  struct __user_cap_header_struct header = { _LINUX_CAPABILITY_VERSION_3, 0 };
  struct __user_cap_data_struct caps[_LINUX_CAPABILITY_U32S_3] = { { 0 } };
  struct rlimit now;

  if (!wanted || getrlimit (RLIMIT_MEMLOCK, &now) < 0 || now.rlim_max == RLIM_INFINITY ||
      now.rlim_max >= wanted)
    return wanted;
  if (syscall (SYS_capget, &header, caps) == 0 &&
      (caps[CAP_SYS_RESOURCE / 32].effective & (1u << (CAP_SYS_RESOURCE % 32))))
    return wanted;
  g_warning ("%s may lock only %" G_GUINT64_FORMAT " bytes of memory, not the %" G_GUINT64_FORMAT
             " that VFIO pins for its host devices: give microvmd a higher LimitMEMLOCK",
             binary, (guint64) now.rlim_max, wanted);
  return now.rlim_max;
}

gboolean
mv_process_raise_memlock (const MvProcess *process, guint64 bytes, GError **error)
{
  struct rlimit now, want;
  guint64 allowed;

  if (!bytes || prlimit (process->pid, RLIMIT_MEMLOCK, NULL, &now) < 0)
    return TRUE;
  if (now.rlim_max == RLIM_INFINITY || (now.rlim_cur >= bytes && now.rlim_max >= bytes))
    return TRUE;
  allowed = memlock_for ("The VMM", bytes);
  want.rlim_cur = want.rlim_max = MAX (allowed, now.rlim_max);
  if (want.rlim_cur <= now.rlim_cur)
    return TRUE;
  if (!mv_process_alive (process) || prlimit (process->pid, RLIMIT_MEMLOCK, &want, NULL) < 0)
    {
      int saved = errno;
      g_set_error (error, MV_ERROR, MV_ERROR_FAILED, "The VMM %d may lock %" G_GUINT64_FORMAT
                   " bytes of memory, not the %" G_GUINT64_FORMAT " that VFIO pins for its "
                   "host devices: %s", process->pid, (guint64) now.rlim_cur, bytes,
                   g_strerror (saved));
      return FALSE;
    }
  return TRUE;
}

MvProcess *
mv_process_start_with (const char *socket_path, const char *const *argv,
                       const MvProcessOptions *options, guint timeout_ms, GError **error)
{
  MvJail *jail = options->jail;
  g_autofree char *dir = g_path_get_dirname (socket_path);
  g_autofree char *log_path = mv_vmm_log_path (socket_path);
  g_autofree char *exit_path = mv_vmm_exit_path (socket_path);
  g_autofree char *exit_temp = g_build_filename (dir, MV_VMM_EXIT_TEMP_NAME, NULL);
  g_autofree char *command = g_strjoinv (" ", (char **) argv);
  g_autofree char *header = NULL;
  g_autoptr (GDateTime) now = g_date_time_new_now_utc ();
  g_autofree char *stamp = g_date_time_format_iso8601 (now);
  g_auto (GStrv) envp = g_get_environ ();
  int pid_pipe[2] = { -1, -1 }, go_pipe[2] = { -1, -1 }, err_pipe[2] = { -1, -1 };
  int log_fd, null_fd, dir_fd = -1, pidfd = -1, status;
  ExecFailure failure = { 0, NULL, FALSE };
  MvConsoleFds console = MV_CONSOLE_FDS_INIT;
  const int *jail_keep = NULL, *passed = NULL;
  MvVmmParent parent = { .dir_fd = -1, .console = MV_CONSOLE_FDS_INIT, .jailed = jail != NULL };
  g_auto (GStrv) parent_argv = NULL;
  int keep[KEEP_MAX];
  guint n_keep = 0, n_jail_keep = 0, n_passed = 0;
  guint64 memlock = memlock_for (argv[0], options->memlock_bytes);
  goffset log_offset;
  pid_t intermediate, pid = -1;
  guint64 start_time = 0;
  char state;
  gint64 deadline;
  int watch_fd;
  MvProcess *process;

  if (access (mv_vmm_parent_path (), X_OK) < 0)
    {
      int saved = errno;
      g_set_error (error, MV_ERROR, MV_ERROR_FAILED, "Could not start %s: its parent, %s: %s",
                   argv[0], mv_vmm_parent_path (), g_strerror (saved));
      return NULL;
    }
  if (jail && !mv_jail_prepare (jail, error))
    return NULL;
  if (jail)
    {
      jail_keep = mv_jail_parent_fds (jail, &n_jail_keep);
      passed = mv_jail_passed_fds (jail, &n_passed);
      mv_jail_grants (jail, &parent.grants);
      if (parent.grants.n_granted > MV_VMM_PARENT_MAX_GRANTS ||
          parent.grants.n_taps > MV_VMM_PARENT_MAX_GRANTS || n_jail_keep > KEEP_MAX - 4)
        {
          g_set_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT,
                       "Could not start %s: it was given %u files and %u TAP devices; at most "
                       "%d of each", argv[0], parent.grants.n_granted, parent.grants.n_taps,
                       MV_VMM_PARENT_MAX_GRANTS);
          return NULL;
        }
    }
  else if (options->passed_fds)
    {
      passed = options->passed_fds;
      n_passed = options->n_passed_fds;
    }
  /* No link is followed in a directory the VMM shares. */
  log_fd = mv_fd_above_stdio (g_open (log_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC |
                                        O_NOFOLLOW, 0600));
  if (log_fd < 0)
    {
      int saved = errno;
      g_set_error (error, MV_ERROR, MV_ERROR_FAILED, "Could not open %s: %s", log_path,
                   g_strerror (saved));
      return NULL;
    }
  if (options->console_log && !mv_console_open (&console, options->console_log, error))
    {
      close (log_fd);
      return NULL;
    }
  log_offset = lseek (log_fd, 0, SEEK_END);
  header = g_strdup_printf ("microvmd: %s: starting %s\n", stamp, command);
  transfer_all (log_fd, header, strlen (header), WRITE_ALL);
  log_offset += strlen (header);

  null_fd = mv_fd_above_stdio (g_open ("/dev/null", O_RDONLY | O_CLOEXEC, 0));
  if (null_fd >= 0)
    dir_fd = mv_fd_above_stdio (open (dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (null_fd < 0 || dir_fd < 0 || pipe2 (pid_pipe, O_CLOEXEC) < 0 ||
      pipe2 (go_pipe, O_CLOEXEC) < 0 || pipe2 (err_pipe, O_CLOEXEC) < 0)
    {
      int saved = errno;
      g_set_error (error, MV_ERROR, MV_ERROR_FAILED, "Could not prepare to start %s: %s",
                   argv[0], g_strerror (saved));
      close_pipe (pid_pipe);
      close_pipe (go_pipe);
      close_pipe (err_pipe);
      if (null_fd >= 0)
        close (null_fd);
      if (dir_fd >= 0)
        close (dir_fd);
      close (log_fd);
      mv_console_close (&console);
      return NULL;
    }
  /* What the VMM's parent keeps: the directory, the jail's and the
   * console's. */
  keep[n_keep++] = parent.dir_fd = dir_fd;
  for (guint i = 0; i < n_jail_keep; i++)
    keep[n_keep++] = jail_keep[i];
  if (console.held_end >= 0)
    {
      keep[n_keep++] = console.held_end;
      keep[n_keep++] = console.log;
      keep[n_keep++] = console.listener;
    }
  parent.console = console;
  parent_argv = mv_vmm_parent_argv (&parent);

  /* Three forks: the VMM is neither the daemon's child nor in its session
   * or process group. Its parent stays, only to reap it and write down how
   * it ended (vmm-parent.h); both outlive the daemon. The first child exits at
   * once, so that the reaper is not the daemon's child either. */
  g_unlink (exit_path);
  g_unlink (exit_temp);
  intermediate = fork ();
  if (intermediate == 0)
    {
      pid_t reaper, vmm = -1;

      setsid ();
      reaper = fork ();
      if (reaper == 0)
        {
          vmm = fork ();
          if (vmm == 0)
            exec_vmm (go_pipe, err_pipe[1], null_fd, log_fd, console.vmm_end, dir,
                      (char *const *) argv, envp, jail, passed, n_passed, options->cgroup,
                      memlock);
          if (vmm < 0)
            vmm = -errno;
          (void) !write (pid_pipe[1], &vmm, sizeof vmm);
          if (vmm < 0)
            _exit (0);
          become_vmm_parent (vmm, &parent, parent_argv, envp, keep, n_keep);
        }
      if (reaper < 0)
        {
          vmm = -errno;
          (void) !write (pid_pipe[1], &vmm, sizeof vmm);
        }
      _exit (0);
    }
  if (intermediate < 0)
    {
      int saved = errno;
      g_set_error (error, MV_ERROR, MV_ERROR_FAILED, "Could not start %s: %s", argv[0],
                   g_strerror (saved));
      close_pipe (pid_pipe);
      close_pipe (go_pipe);
      close_pipe (err_pipe);
      close (null_fd);
      close (dir_fd);
      close (log_fd);
      mv_console_close (&console);
      return NULL;
    }

  close (pid_pipe[1]);
  pid_pipe[1] = -1;
  close (go_pipe[0]);
  go_pipe[0] = -1;
  close (err_pipe[1]);
  err_pipe[1] = -1;
  close (null_fd);
  close (dir_fd);
  close (log_fd);
  /* The VMM and its parent have theirs. */
  mv_console_close (&console);
  while (waitpid (intermediate, &status, 0) < 0 && errno == EINTR)
    ;
  if (!transfer_all (pid_pipe[0], &pid, sizeof pid, READ_ALL) || pid <= 0)
    {
      g_set_error (error, MV_ERROR, MV_ERROR_FAILED, "Could not start %s: %s", argv[0],
                   pid < 0 ? g_strerror (-pid) : "the intermediate process failed");
      close_pipe (pid_pipe);
      close_pipe (go_pipe);
      close_pipe (err_pipe);
      return NULL;
    }
  close_pipe (pid_pipe);
  /* The reaper runs: it holds the lease and takes the grants back. */
  if (jail)
    mv_jail_hand_over (jail);

  pidfd = pidfd_open (pid);
  if (pidfd < 0 || !read_stat (pid, &state, &start_time))
    {
      int saved = errno;
      if (pidfd >= 0)
        {
          pidfd_send_signal (pidfd, SIGKILL);
          close (pidfd);
        }
      close_pipe (go_pipe);
      close_pipe (err_pipe);
      g_set_error (error, MV_ERROR, MV_ERROR_FAILED, "Could not follow process %d: %s", pid,
                   g_strerror (saved));
      return NULL;
    }
  /* Under systemd, into its scope before it runs a single instruction of
   * its own. */
  if (!mv_cgroup_place (options->cgroup, pid, error))
    {
      pidfd_send_signal (pidfd, SIGKILL);
      mv_fd_wait (pidfd, POLLIN, g_get_monotonic_time () + 10 * G_USEC_PER_SEC);
      close (pidfd);
      close_pipe (go_pipe);
      close_pipe (err_pipe);
      return NULL;
    }
  (void) !write (go_pipe[1], "g", 1);
  close_pipe (go_pipe);
  /* EOF once exec has closed the pipe; an errno if exec failed. */
  if (transfer_all (err_pipe[0], &failure, sizeof failure, READ_ALL))
    {
      close_pipe (err_pipe);
      mv_fd_wait (pidfd, POLLIN, g_get_monotonic_time () + G_USEC_PER_SEC);
      close (pidfd);
      if (failure.cgroup)
        g_set_error (error, MV_ERROR, MV_ERROR_FAILED, "%s could not join its cgroup: %s",
                     argv[0], g_strerror (failure.err));
      else if (failure.step)
        g_set_error (error, MV_ERROR, MV_ERROR_FAILED, "Could not wall in %s (%s): %s",
                     argv[0], failure.step, g_strerror (failure.err));
      else
        g_set_error (error, MV_ERROR, MV_ERROR_UNAVAILABLE, "Could not run %s: %s", argv[0],
                     g_strerror (failure.err));
      return NULL;
    }
  close_pipe (err_pipe);

  deadline = g_get_monotonic_time () + (gint64) timeout_ms * 1000;
  /* The socket is looked for again as soon as something appears in its
   * directory. */
  watch_fd = mv_fd_watch_directory_of (socket_path, IN_CREATE | IN_MOVED_TO);
  for (;;)
    {
      gint64 until;

      if (options->ready_when_listening ? socket_listens (socket_path)
                                        : socket_accepts (socket_path))
        break;
      /* With a watch, nothing is worth a look before a file appears, but
       * a socket that is there and does not serve yet. */
      if (watch_fd < 0)
        until = g_get_monotonic_time () + SOCKET_POLL_MS * 1000;
      else if (g_file_test (socket_path, G_FILE_TEST_EXISTS))
        until = g_get_monotonic_time () + SOCKET_RETRY_MS * 1000;
      else
        until = deadline;
      if (mv_fd_wait_end_or_change (pidfd, watch_fd, MIN (deadline, until)))
        {
          if (watch_fd >= 0)
            close (watch_fd);
          close (pidfd);
          fail_with_log (error, log_path, log_offset, "%s ended before serving on %s", argv[0],
                         socket_path);
          return NULL;
        }
      if (g_get_monotonic_time () >= deadline)
        {
          pidfd_send_signal (pidfd, SIGKILL);
          mv_fd_wait (pidfd, POLLIN, g_get_monotonic_time () + 10 * G_USEC_PER_SEC);
          if (watch_fd >= 0)
            close (watch_fd);
          close (pidfd);
          fail_with_log (error, log_path, log_offset, "%s did not serve on %s within %u ms",
                         argv[0], socket_path, timeout_ms);
          return NULL;
        }
    }
  if (watch_fd >= 0)
    close (watch_fd);
  close (pidfd);

  process = g_new0 (MvProcess, 1);
  process->pid = pid;
  process->start_time = start_time;
  process->socket_path = g_strdup (socket_path);
  process->uid = jail ? (gint64) mv_jail_uid (jail) : -1;
  return process;
}

/* ---- exit source ---- */

typedef struct {
  GSource   source;
  int       pidfd;     /* -1: the process was gone already */
  gpointer  tag;
} ExitSource;

static gboolean
exit_source_prepare (GSource *source, gint *timeout)
{
  ExitSource *s = (ExitSource *) source;

  *timeout = -1;
  return s->pidfd < 0;
}

static gboolean
exit_source_check (GSource *source)
{
  ExitSource *s = (ExitSource *) source;

  return s->pidfd < 0 || (g_source_query_unix_fd (source, s->tag) & G_IO_IN);
}

static gboolean
exit_source_dispatch (GSource *source, GSourceFunc callback, gpointer user_data)
{
  if (!callback)
    return G_SOURCE_REMOVE;
  return callback (user_data);
}

static void
exit_source_finalize (GSource *source)
{
  ExitSource *s = (ExitSource *) source;

  if (s->pidfd >= 0)
    close (s->pidfd);
}

static GSourceFuncs exit_source_funcs = {
  .prepare = exit_source_prepare,
  .check = exit_source_check,
  .dispatch = exit_source_dispatch,
  .finalize = exit_source_finalize,
};

GSource *
mv_process_exit_source_new (const MvProcess *process)
{
  GSource *source = g_source_new (&exit_source_funcs, sizeof (ExitSource));
  ExitSource *s = (ExitSource *) source;

  g_source_set_static_name (source, "microvmd VMM exit");
  s->pidfd = mv_process_open_pidfd (process);
  if (s->pidfd >= 0)
    s->tag = g_source_add_unix_fd (source, s->pidfd, G_IO_IN);
  return source;
}
