/* MvRuntime over an MvStarter. A machine's runtime directory holds the
 * VMM's API socket (the starter's socket_name), whatever the starter puts
 * beside it, the VMM's log, console.log and the agent's socket. */
#include "runtime.h"
#include "qemu.h"
#include "versions.h"
#include "vsock.h"
#include "core/spec.h"
#include "util/unix-socket.h"

#include <errno.h>
#include <fcntl.h>
#include <glib-unix.h>
#include <glib/gstdio.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define VSOCK_SOCKET_NAME      "vsock.sock"
#define VSOCK_GUEST_CID        3
#define READY_POLL_US          (100 * 1000)
#define AGENT_REPLY_MS         1000
#define QUIT_TIMEOUT_MS        10000
#define CONSOLE_QUOTE_LINES    10
#define LOG_QUOTE_LINES        5
#define CONSOLE_SCAN_MAX       (16 * 1024 * 1024)

typedef struct {
  MvRuntime   runtime;
  MvStarter  *starter;
  guint       boot_timeout_s;
  guint       stop_timeout_s;
  GHashTable *watches;         /* main thread only: id -> Watch* */
  guint       next_watch_id;
} Adapter;

typedef struct {
  Adapter           *adapter;
  guint              id;
  char              *machine_id;
  MvProcess         *vmm;
  MvVmEvents        *events;
  MvVmEnd            end;
  GSource           *exit_source;
  GSource           *events_source;
  GSource           *gone_source;
  char              *socket_path;   /* as recorded, even once the VMM is gone */
  guint              exit_poll;     /* waiting for the exit status */
  guint              exit_polls;
  MvRuntimeExitFunc  func;
  gpointer           user_data;
} Watch;

static Adapter *
adapter_of (MvRuntime *rt)
{
  return (Adapter *) rt;
}

/* ---- paths ---- */

static char *
api_socket_path (Adapter *self, const char *runtime_dir)
{
  return g_build_filename (runtime_dir, self->starter->socket_name, NULL);
}

static char *
console_path (const char *runtime_dir)
{
  return g_build_filename (runtime_dir, MV_CONSOLE_LOG_NAME, NULL);
}

static MvAgentChannelKind
agent_kind (Adapter *self)
{
  return self->starter->capabilities (self->starter).vsock ? MV_AGENT_CHANNEL_VSOCK
                                                           : MV_AGENT_CHANNEL_SERIAL;
}

static char *
agent_socket_path (Adapter *self, const char *runtime_dir)
{
  return g_build_filename (runtime_dir, agent_kind (self) == MV_AGENT_CHANNEL_VSOCK
                                          ? VSOCK_SOCKET_NAME : MV_AGENT_SOCKET_NAME, NULL);
}

static goffset
file_size (const char *path)
{
  GStatBuf st;

  return g_stat (path, &st) == 0 ? st.st_size : 0;
}

/* ---- the VM spec ---- */

static MvVmSpec *
build_vm_spec (Adapter *self, const MvRuntimeRequest *req)
{
  const MvSpec *spec = req->spec;
  MvVmSpec *vm = mv_vm_spec_new ();

  vm->boot.kernel_path = g_strdup (spec->kernel);
  vm->boot.initrd_path = g_strdup (spec->initrd);
  vm->boot.kernel_args = g_strdup (spec->kernel_args && *spec->kernel_args
                                   ? spec->kernel_args
                                   : self->starter->default_kernel_args (self->starter));
  vm->cpu.count = mv_spec_vcpus (spec);
  vm->cpu.max_count = MAX (spec->max_vcpus, vm->cpu.count);
  vm->memory.size_bytes = spec->memory_bytes;
  vm->memory.hotplug_bytes = spec->max_memory_bytes > spec->memory_bytes
                             ? spec->max_memory_bytes - spec->memory_bytes : 0;
  for (guint i = 0; i < spec->disks->len; i++)
    {
      MvDisk *disk = spec->disks->pdata[i];
      mv_vm_spec_add_disk (vm, disk->path, disk->read_only);
    }
  /* spec->network_name is for the network layer, which will hand over a
   * TAP device; until then guests have no NIC. */
  vm->console.path = console_path (req->runtime_dir);
  vm->agent.kind = agent_kind (self);
  vm->agent.socket_path = agent_socket_path (self, req->runtime_dir);
  vm->agent.cid = vm->agent.kind == MV_AGENT_CHANNEL_VSOCK ? VSOCK_GUEST_CID : 0;
  return vm;
}

/* Everything that can be checked before a process starts or a file is
 * made; MV_ERROR_INVALID_ARGUMENT naming the field. */
static gboolean
check_before_start (Adapter *self, const char *socket_path, const MvVmSpec *vm,
                    const char *runtime_dir, GError **error)
{
  return mv_check_socket_path ("socket", socket_path, error) &&
         mv_vm_spec_check (vm, runtime_dir, error) &&
         self->starter->check (self->starter, socket_path, vm, error);
}

/* ---- processes ---- */

static void
remove_sockets (Adapter *self, const char *runtime_dir)
{
  g_autofree char *socket_path = api_socket_path (self, runtime_dir);
  g_autofree char *agent = g_build_filename (runtime_dir, MV_AGENT_SOCKET_NAME, NULL);
  g_autofree char *vsock = g_build_filename (runtime_dir, VSOCK_SOCKET_NAME, NULL);

  g_autofree char *exit_path = mv_vmm_exit_path (socket_path);
  g_autofree char *exit_temp = g_strconcat (exit_path, ".tmp", NULL);

  self->starter->cleanup (self->starter, socket_path);
  g_unlink (agent);
  g_unlink (vsock);
  g_unlink (exit_temp);
  g_unlink (exit_path);
}

/* Ends every process that serves @socket_path: what an interrupted start
 * left behind without recording it. */
static gboolean
kill_by_socket (const char *socket_path, GError **error)
{
  g_autoptr (GPtrArray) found = mv_process_find_by_socket (socket_path);

  for (guint i = 0; i < found->len; i++)
    {
      MvProcess *process = found->pdata[i];

      g_message ("Ending VMM process %d, left serving %s", process->pid, socket_path);
      if (!mv_process_kill (process, error))
        return FALSE;
    }
  return TRUE;
}

/* The recorded VMM if it still runs; NULL (without error) if it is gone.
 * A recorded PID that now belongs to another process is not ours. */
static MvProcess *
attach_recorded (JsonObject *vmm)
{
  g_autoptr (MvProcess) recorded = vmm ? mv_process_from_json (vmm, NULL) : NULL;

  if (!recorded)
    return NULL;
  return mv_process_attach (recorded->pid, recorded->start_time, recorded->socket_path);
}

static MvProcess *
attach_running (const MvRuntimeRequest *req, GError **error)
{
  MvProcess *process = attach_recorded (req->vmm);

  if (!process)
    g_set_error (error, MV_ERROR, MV_ERROR_INVALID_STATE,
                 "The guest's VMM is not running");
  return process;
}

static JsonObject *
identity_new (Adapter *self, const MvProcess *vmm)
{
  JsonObject *identity = json_object_new ();
  const char *version = self->starter->version (self->starter);

  mv_process_to_json (vmm, identity);
  json_object_set_string_member (identity, "type", self->starter->type);
  json_object_set_string_member (identity, "version", version ? version : "");
  return identity;
}

/* What the VMM itself wrote to its log after @offset, without the lines
 * microvmd adds there. */
static char *
vmm_output (const char *log, goffset offset)
{
  g_autofree char *tail = mv_file_tail (log, offset, LOG_QUOTE_LINES + 1);
  g_auto (GStrv) lines = g_strsplit (tail, "\n", -1);
  GString *out = g_string_new (NULL);

  for (char **line = lines; *line; line++)
    if (**line && !g_str_has_prefix (*line, "microvmd: "))
      g_string_append_printf (out, "%s\n", *line);
  return g_string_free (out, FALSE);
}

/* Adds the end of the console and of the VMM's log to @error. */
static void
quote_output (GError **error, const char *console, goffset console_offset, const char *log,
              goffset log_offset)
{
  g_autofree char *console_tail = mv_file_tail (console, console_offset, CONSOLE_QUOTE_LINES);
  g_autofree char *log_tail = vmm_output (log, log_offset);
  GString *message;

  if (!error || !*error)
    return;
  message = g_string_new ((*error)->message);
  g_string_append (message, "\nThe console's last lines:\n");
  g_string_append (message, *console_tail ? console_tail : "(nothing)");
  if (message->str[message->len - 1] != '\n')
    g_string_append_c (message, '\n');
  if (*log_tail && !strstr ((*error)->message, log_tail))
    g_string_append_printf (message, "The VMM's log:\n%s", log_tail);
  g_free ((*error)->message);
  (*error)->message = g_string_free (message, FALSE);
}

/* ---- readiness ---- */

static gboolean
console_has (const char *path, goffset offset, const char *text)
{
  g_autofree char *buf = NULL;
  goffset size;
  gssize n;
  int fd;

  if (!text || !*text)
    return TRUE;
  fd = g_open (path, O_RDONLY | O_CLOEXEC, 0);
  if (fd < 0)
    return FALSE;
  size = lseek (fd, 0, SEEK_END);
  if (size <= offset)
    {
      close (fd);
      return FALSE;
    }
  size = MIN (size - offset, CONSOLE_SCAN_MAX);
  buf = g_malloc (size);
  n = pread (fd, buf, size, offset);
  close (fd);
  return n > 0 && memmem (buf, n, text, strlen (text)) != NULL;
}

/* Reads until @expect is in what came, or @timeout_ms passes. */
static gboolean
read_until (int fd, const char *expect, guint timeout_ms)
{
  gint64 deadline = g_get_monotonic_time () + (gint64) timeout_ms * 1000;
  g_autoptr (GString) got = g_string_new (NULL);

  for (;;)
    {
      struct pollfd pfd = { .fd = fd, .events = POLLIN };
      gint64 left = deadline - g_get_monotonic_time ();
      char chunk[256];
      ssize_t n;

      if (left <= 0)
        return FALSE;
      if (poll (&pfd, 1, (int) ((left + 999) / 1000)) <= 0)
        continue;
      n = read (fd, chunk, sizeof chunk);
      if (n <= 0)
        return FALSE;
      g_string_append_len (got, chunk, n);
      if (strstr (got->str, expect))
        return TRUE;
    }
}

/* One exchange with the guest agent: "ping" answered by "pong". Over
 * vsock the VMM first wants to know the guest port. */
static gboolean
agent_answers (const MvVmSpec *vm)
{
  int fd = vm->agent.kind == MV_AGENT_CHANNEL_VSOCK
           ? mv_vsock_dial (vm->agent.socket_path, MV_AGENT_VSOCK_PORT, AGENT_REPLY_MS, NULL)
           : mv_unix_connect (vm->agent.socket_path, 0, NULL);
  gboolean ok = FALSE;

  if (fd < 0)
    return FALSE;
  if (send (fd, "ping\n", 5, MSG_NOSIGNAL) == 5)
    ok = read_until (fd, "pong", AGENT_REPLY_MS);
  close (fd);
  return ok;
}

static gboolean
vcpus_run (MvHypervisor *hv)
{
  MvVmInfo info;

  return hv->vm_info (hv, &info, NULL) && info.state == MV_VM_STATE_RUNNING;
}

static char *
readiness_label (const MvSpec *spec)
{
  switch (spec->readiness)
    {
    case MV_READINESS_AGENT:
      return g_strdup ("agent");
    case MV_READINESS_CONSOLE:
      return g_strdup_printf ("console:%s", spec->readiness_text ? spec->readiness_text : "");
    case MV_READINESS_VMM:
    default:
      return g_strdup ("vmm");
    }
}

static gboolean
is_ready (MvReadiness readiness, const MvSpec *spec, MvHypervisor *hv, const MvVmSpec *vm,
          goffset console_offset)
{
  switch (readiness)
    {
    case MV_READINESS_AGENT:
      return agent_answers (vm);
    case MV_READINESS_CONSOLE:
      return console_has (vm->console.path, console_offset, spec->readiness_text);
    case MV_READINESS_VMM:
    default:
      return vcpus_run (hv);
    }
}

/* Waits for @readiness; on failure the VMM is still there for the caller
 * to end. */
static gboolean
wait_ready (Adapter *self, const MvSpec *spec, MvReadiness readiness, MvHypervisor *hv,
            const MvProcess *vmm, const MvVmSpec *vm, goffset console_offset, GError **error)
{
  gint64 deadline = g_get_monotonic_time () + (gint64) self->boot_timeout_s * G_USEC_PER_SEC;
  g_autofree char *label = readiness == MV_READINESS_VMM ? g_strdup ("vmm")
                                                         : readiness_label (spec);

  for (;;)
    {
      if (is_ready (readiness, spec, hv, vm, console_offset))
        return TRUE;
      if (!mv_process_alive (vmm))
        {
          g_set_error (error, MV_ERROR, MV_ERROR_INVALID_STATE,
                       "The VMM ended before the guest was ready (readiness %s)", label);
          return FALSE;
        }
      if (g_get_monotonic_time () > deadline)
        {
          g_set_error (error, MV_ERROR, MV_ERROR_INVALID_STATE,
                       "The guest was not ready (readiness %s) within %u s", label,
                       self->boot_timeout_s);
          return FALSE;
        }
      g_usleep (READY_POLL_US);
    }
}

/* ---- MvRuntime ---- */

static char *
rt_version (MvRuntime *rt, GError **error)
{
  Adapter *self = adapter_of (rt);
  const char *version = self->starter->version (self->starter);

  if (!version)
    {
      g_set_error (error, MV_ERROR, MV_ERROR_UNAVAILABLE, "%s is not installed",
                   self->starter->type);
      return NULL;
    }
  return g_strdup (version);
}

/* Ends a VMM that failed to come up and removes its sockets. */
static void
abandon (Adapter *self, const MvProcess *vmm, const char *runtime_dir)
{
  g_autoptr (GError) local = NULL;

  if (vmm && !mv_process_kill (vmm, &local))
    g_warning ("Could not end VMM process %d: %s", vmm->pid, local->message);
  remove_sockets (self, runtime_dir);
}

static JsonObject *
rt_start (MvRuntime *rt, const MvRuntimeRequest *req, GError **error)
{
  Adapter *self = adapter_of (rt);
  g_autofree char *socket_path = api_socket_path (self, req->runtime_dir);
  g_autofree char *log_path = mv_vmm_log_path (socket_path);
  g_autoptr (MvVmSpec) vm = build_vm_spec (self, req);
  g_autoptr (MvHypervisor) hv = NULL;
  g_autoptr (MvProcess) vmm = NULL;
  goffset console_offset, log_offset;

  if (!check_before_start (self, socket_path, vm, req->runtime_dir, error))
    return NULL;
  if (!kill_by_socket (socket_path, error))
    return NULL;
  remove_sockets (self, req->runtime_dir);

  console_offset = file_size (vm->console.path);
  log_offset = file_size (log_path);
  hv = self->starter->start_vm (self->starter, socket_path, vm, &vmm, error);
  if (!hv)
    {
      remove_sockets (self, req->runtime_dir);
      return NULL;
    }
  if (!wait_ready (self, req->spec, req->spec->readiness, hv, vmm, vm, console_offset, error))
    {
      quote_output (error, vm->console.path, console_offset, log_path, log_offset);
      abandon (self, vmm, req->runtime_dir);
      return NULL;
    }
  return identity_new (self, vmm);
}

/* Asks the guest to power off and waits for the VMM to end. FALSE if it
 * did not within the stop timeout. */
static gboolean
stop_gracefully (Adapter *self, const MvProcess *vmm)
{
  g_autoptr (GError) local = NULL;
  g_autoptr (MvHypervisor) hv = self->starter->connect (self->starter, vmm->socket_path, &local);
  MvVmInfo info;

  if (!hv)
    {
      g_message ("Could not reach VMM %d to shut its guest down: %s", vmm->pid, local->message);
      return FALSE;
    }
  /* A paused guest cannot see the power button. */
  if (hv->vm_info (hv, &info, NULL) && info.state == MV_VM_STATE_PAUSED &&
      !hv->resume_vm (hv, &local))
    {
      g_message ("Could not resume VMM %d's guest to shut it down: %s", vmm->pid, local->message);
      return FALSE;
    }
  if (!hv->shutdown_vm (hv, &local))
    {
      g_message ("Could not ask VMM %d's guest to shut down: %s", vmm->pid, local->message);
      return FALSE;
    }
  return mv_process_wait (vmm, self->stop_timeout_s * 1000);
}

static gboolean
rt_stop (MvRuntime *rt, const MvRuntimeRequest *req, gboolean force, GError **error)
{
  Adapter *self = adapter_of (rt);
  g_autofree char *socket_path = api_socket_path (self, req->runtime_dir);
  g_autoptr (MvProcess) vmm = NULL;

  if (!req->vmm)
    {
      /* Never recorded: a start was interrupted. Nothing to shut down
       * gracefully; end whatever it left. */
      if (!kill_by_socket (socket_path, error))
        return FALSE;
      remove_sockets (self, req->runtime_dir);
      return TRUE;
    }

  vmm = attach_recorded (req->vmm);
  if (!vmm)
    {
      g_autoptr (GPtrArray) others = mv_process_find_by_socket (socket_path);

      if (others->len > 0)
        {
          g_set_error (error, MV_ERROR, MV_ERROR_CONFLICT,
                       "vmm: the recorded VMM is gone, but process %d, which is not the "
                       "recorded one, serves %s; it was left alone",
                       ((MvProcess *) others->pdata[0])->pid, socket_path);
          return FALSE;
        }
      remove_sockets (self, req->runtime_dir);
      return TRUE;
    }

  if (!force && !stop_gracefully (self, vmm))
    g_message ("VMM %d did not end within %u s of a graceful stop; ending it", vmm->pid,
               self->stop_timeout_s);
  if (!mv_process_kill (vmm, error))
    return FALSE;
  remove_sockets (self, req->runtime_dir);
  return TRUE;
}

static MvHypervisor *
connect_running (Adapter *self, const MvRuntimeRequest *req, GError **error)
{
  g_autoptr (MvProcess) vmm = attach_running (req, error);

  if (!vmm)
    return NULL;
  return self->starter->connect (self->starter, vmm->socket_path, error);
}

static gboolean
rt_pause (MvRuntime *rt, const MvRuntimeRequest *req, GError **error)
{
  g_autoptr (MvHypervisor) hv = connect_running (adapter_of (rt), req, error);

  return hv && hv->pause_vm (hv, error);
}

static gboolean
rt_resume (MvRuntime *rt, const MvRuntimeRequest *req, GError **error)
{
  g_autoptr (MvHypervisor) hv = connect_running (adapter_of (rt), req, error);

  return hv && hv->resume_vm (hv, error);
}

static MvVmmState
rt_probe (MvRuntime *rt, const MvRuntimeRequest *req)
{
  Adapter *self = adapter_of (rt);
  g_autoptr (MvProcess) vmm = attach_recorded (req->vmm);
  g_autoptr (MvHypervisor) hv = NULL;
  g_autoptr (GError) local = NULL;
  MvVmInfo info;

  if (!vmm)
    return MV_VMM_GONE;
  hv = self->starter->connect (self->starter, vmm->socket_path, &local);
  if (!hv || !hv->vm_info (hv, &info, &local))
    {
      /* The process is ours and alive: calling it gone would leave it
       * running unmanaged. */
      g_warning ("VMM %d runs but does not answer: %s", vmm->pid, local->message);
      return MV_VMM_RUNNING;
    }
  switch (info.state)
    {
    case MV_VM_STATE_RUNNING:
      return MV_VMM_RUNNING;
    case MV_VM_STATE_PAUSED:
      return MV_VMM_PAUSED;
    case MV_VM_STATE_STOPPED:
    default:
      return MV_VMM_GONE;
    }
}

static gboolean
rt_destroy (MvRuntime *rt, const MvRuntimeRequest *req, GError **error)
{
  Adapter *self = adapter_of (rt);
  g_autofree char *socket_path = api_socket_path (self, req->runtime_dir);
  g_autofree char *log_path = mv_vmm_log_path (socket_path);
  g_autofree char *console = console_path (req->runtime_dir);
  g_autoptr (MvProcess) vmm = attach_recorded (req->vmm);

  if (vmm && !mv_process_kill (vmm, error))
    return FALSE;
  if (!kill_by_socket (socket_path, error))
    return FALSE;
  remove_sockets (self, req->runtime_dir);
  g_unlink (log_path);
  g_unlink (console);
  return TRUE;
}

/* ---- save and restore ---- */

static gboolean
write_vm_spec (const MvVmSpec *vm, const char *state_dir, GError **error)
{
  g_autofree char *path = g_build_filename (state_dir, MV_SNAPSHOT_VM_SPEC_NAME, NULL);
  g_autoptr (JsonNode) node = mv_vm_spec_to_node (vm);
  g_autofree char *text = json_to_string (node, TRUE);
  g_autoptr (GError) local = NULL;

  if (!g_file_set_contents_full (path, text, -1, G_FILE_SET_CONTENTS_CONSISTENT, 0600, &local))
    {
      g_set_error (error, MV_ERROR, MV_ERROR_FAILED, "Could not write %s: %s", path,
                   local->message);
      return FALSE;
    }
  return TRUE;
}

static gboolean
rt_save (MvRuntime *rt, const MvRuntimeRequest *req, const char *state_dir, GError **error)
{
  Adapter *self = adapter_of (rt);
  g_autoptr (MvVmSpec) vm = build_vm_spec (self, req);
  g_autoptr (MvProcess) vmm = attach_running (req, error);
  g_autoptr (MvHypervisor) hv = NULL;
  g_autoptr (GError) local = NULL;
  MvVmInfo info;
  gboolean was_running;

  if (!vmm || !(hv = self->starter->connect (self->starter, vmm->socket_path, error)))
    return FALSE;
  was_running = hv->vm_info (hv, &info, NULL) && info.state == MV_VM_STATE_RUNNING;
  if (!hv->pause_vm (hv, error))
    return FALSE;
  if (!hv->snapshot_vm (hv, state_dir, error) || !write_vm_spec (vm, state_dir, error))
    {
      /* Nothing is lost: the guest goes on as it was. */
      if (was_running && !hv->resume_vm (hv, &local))
        g_warning ("Could not resume VMM %d's guest after a failed save: %s", vmm->pid,
                   local->message);
      return FALSE;
    }

  if (!hv->shutdown (hv, &local) || !mv_process_wait (vmm, QUIT_TIMEOUT_MS))
    g_message ("VMM %d did not quit after its guest was saved (%s); ending it", vmm->pid,
               local ? local->message : "timed out");
  if (!mv_process_kill (vmm, error))
    return FALSE;
  remove_sockets (self, req->runtime_dir);
  return TRUE;
}

static JsonObject *
rt_restore (MvRuntime *rt, const MvRuntimeRequest *req, const char *state_dir, GError **error)
{
  Adapter *self = adapter_of (rt);
  g_autofree char *socket_path = api_socket_path (self, req->runtime_dir);
  g_autofree char *log_path = mv_vmm_log_path (socket_path);
  g_autoptr (MvVmSpec) vm = build_vm_spec (self, req);
  g_autoptr (MvHypervisor) hv = NULL;
  g_autoptr (MvProcess) vmm = NULL;
  MvRestoreSpec rspec = { 0 };
  goffset console_offset, log_offset;

  if (!mv_check_socket_path ("socket", socket_path, error) ||
      !self->starter->check (self->starter, socket_path, vm, error))
    return NULL;
  if (!kill_by_socket (socket_path, error))
    return NULL;
  remove_sockets (self, req->runtime_dir);

  rspec.console.path = g_strdup (vm->console.path);
  rspec.agent_socket = g_strdup (vm->agent.socket_path);
  console_offset = file_size (vm->console.path);
  log_offset = file_size (log_path);
  hv = self->starter->restore_vm (self->starter, socket_path, state_dir, &rspec, &vmm, error);
  mv_restore_spec_clear (&rspec);
  if (!hv)
    {
      /* A snapshot refused before any VMM ran has no console to quote. */
      if (!g_error_matches (*error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT))
        quote_output (error, vm->console.path, console_offset, log_path, log_offset);
      abandon (self, NULL, req->runtime_dir);
      return NULL;
    }
  if (!hv->resume_vm (hv, error) ||
      !wait_ready (self, req->spec, MV_READINESS_VMM, hv, vmm, vm, console_offset, error))
    {
      quote_output (error, vm->console.path, console_offset, log_path, log_offset);
      abandon (self, vmm, req->runtime_dir);
      return NULL;
    }
  return identity_new (self, vmm);
}

static gboolean
rt_usage (MvRuntime *rt, const MvRuntimeRequest *req, guint64 *cpu_ns, GError **error)
{
  g_autoptr (MvProcess) vmm = attach_running (req, error);

  return vmm && mv_process_cpu_time (vmm, cpu_ns, error);
}

/* ---- watching ---- */

static gboolean on_vmm_exit (gpointer user_data);

static gboolean
on_vmm_exit_poll (gpointer user_data)
{
  Watch *w = user_data;

  w->exit_poll = 0;
  on_vmm_exit (w);
  return G_SOURCE_REMOVE;
}

static void
watch_free (Watch *w)
{
  g_clear_handle_id (&w->exit_poll, g_source_remove);
  if (w->exit_source)
    {
      g_source_destroy (w->exit_source);
      g_source_unref (w->exit_source);
    }
  if (w->events_source)
    {
      g_source_destroy (w->events_source);
      g_source_unref (w->events_source);
    }
  if (w->gone_source)
    {
      g_source_destroy (w->gone_source);
      g_source_unref (w->gone_source);
    }
  mv_vm_events_free (w->events);
  mv_process_free (w->vmm);
  g_free (w->socket_path);
  g_free (w->machine_id);
  g_free (w);
}

/* Tells the watcher, once, and forgets the watch. */
static void
watch_report (Watch *w)
{
  gboolean has_exit_code = TRUE;
  int exit_code = 0, status = 0;
  g_autofree char *reason = NULL;

  switch (w->end)
    {
    case MV_VM_END_GUEST_POWEROFF:
      reason = g_strdup ("the guest powered off");
      break;
    case MV_VM_END_GUEST_RESET:
      exit_code = 1;
      reason = g_strdup ("the guest rebooted or panicked, which ends its VMM");
      break;
    case MV_VM_END_HOST_REQUEST:
      reason = g_strdup ("the VMM was told to quit");
      break;
    case MV_VM_END_HOST_SIGNAL:
      has_exit_code = FALSE;
      reason = g_strdup ("the VMM was ended by a signal");
      break;
    case MV_VM_END_UNKNOWN:
    default:
      /* The VMM said nothing; its parent wrote down how it ended. A VMM
       * whose guest powers off exits with status 0. */
      if (!w->socket_path || !mv_vmm_read_exit (w->socket_path, &status))
        {
          has_exit_code = FALSE;
          reason = g_strdup ("the VMM process ended unexpectedly");
        }
      else if (WIFEXITED (status) && WEXITSTATUS (status) == 0)
        reason = g_strdup ("the guest ended itself: its VMM exited with status 0");
      else if (WIFEXITED (status))
        {
          exit_code = WEXITSTATUS (status);
          reason = g_strdup_printf ("the VMM exited with status %d", exit_code);
        }
      else
        {
          has_exit_code = FALSE;
          reason = g_strdup_printf ("the VMM was killed by signal %d (%s)", WTERMSIG (status),
                                    g_strsignal (WTERMSIG (status)));
        }
      break;
    }
  g_hash_table_steal (w->adapter->watches, GUINT_TO_POINTER (w->id));
  w->func (w->machine_id, has_exit_code, exit_code, reason, w->user_data);
  watch_free (w);
}

/* How long the VMM's parent may take to write down how it ended. */
#define EXIT_STATUS_WAIT_MS  1000
#define EXIT_STATUS_POLL_MS  20

static gboolean
on_vmm_exit (gpointer user_data)
{
  Watch *w = user_data;
  int status;

  /* The VMM said why before it went; what it said may still be unread. */
  if (w->events)
    w->events->read (w->events, &w->end);
  if (w->end == MV_VM_END_UNKNOWN && w->socket_path &&
      !mv_vmm_read_exit (w->socket_path, &status) &&
      w->exit_polls++ < EXIT_STATUS_WAIT_MS / EXIT_STATUS_POLL_MS)
    {
      /* The pidfd fires as the VMM ends, before its parent reaps it. */
      if (!w->exit_poll)
        w->exit_poll = g_timeout_add (EXIT_STATUS_POLL_MS, on_vmm_exit_poll, w);
      return G_SOURCE_REMOVE;
    }
  watch_report (w);
  return G_SOURCE_REMOVE;
}

static gboolean
on_vmm_event (int fd, GIOCondition condition, gpointer user_data)
{
  Watch *w = user_data;

  if (w->events->read (w->events, &w->end))
    return G_SOURCE_CONTINUE;
  g_clear_pointer (&w->events_source, g_source_unref);
  return G_SOURCE_REMOVE;
}

static guint
rt_watch (MvRuntime *rt, const char *machine_id, JsonObject *vmm, MvRuntimeExitFunc func,
          gpointer user_data)
{
  Adapter *self = adapter_of (rt);
  Watch *w = g_new0 (Watch, 1);
  g_autoptr (GError) local = NULL;

  w->adapter = self;
  w->id = ++self->next_watch_id;
  w->machine_id = g_strdup (machine_id);
  w->func = func;
  w->user_data = user_data;
  w->end = MV_VM_END_UNKNOWN;
  w->vmm = attach_recorded (vmm);
  w->socket_path = g_strdup (json_object_get_string_member_with_default (vmm, "socket", NULL));
  g_hash_table_insert (self->watches, GUINT_TO_POINTER (w->id), w);

  if (!w->vmm)
    {
      /* Gone already: say so from the main loop, as for any other end. */
      w->gone_source = g_idle_source_new ();
      g_source_set_callback (w->gone_source, on_vmm_exit, w, NULL);
      g_source_attach (w->gone_source, NULL);
      return w->id;
    }

  w->exit_source = mv_process_exit_source_new (w->vmm);
  g_source_set_callback (w->exit_source, on_vmm_exit, w, NULL);
  g_source_attach (w->exit_source, NULL);

  if (self->starter->open_events)
    w->events = self->starter->open_events (self->starter, w->vmm->socket_path, &local);
  if (w->events)
    {
      w->events_source = g_unix_fd_source_new (w->events->fd, G_IO_IN | G_IO_HUP | G_IO_ERR);
      g_source_set_callback (w->events_source, G_SOURCE_FUNC (on_vmm_event), w, NULL);
      g_source_attach (w->events_source, NULL);
    }
  else if (local)
    g_debug ("No events from VMM %d: %s", w->vmm->pid, local->message);
  return w->id;
}

static void
rt_unwatch (MvRuntime *rt, guint watch_id)
{
  Adapter *self = adapter_of (rt);
  Watch *w = g_hash_table_lookup (self->watches, GUINT_TO_POINTER (watch_id));

  if (!w)
    return;
  g_hash_table_steal (self->watches, GUINT_TO_POINTER (watch_id));
  watch_free (w);
}

/* ---- construction ---- */

MvRuntime *
mv_hypervisor_runtime_new (MvStarter *starter, guint boot_timeout_seconds,
                           guint stop_timeout_seconds)
{
  Adapter *self = g_new0 (Adapter, 1);

  self->starter = starter;
  self->boot_timeout_s = boot_timeout_seconds;
  self->stop_timeout_s = stop_timeout_seconds;
  self->watches = g_hash_table_new_full (NULL, NULL, NULL, (GDestroyNotify) watch_free);
  self->runtime.type = starter->type;
  self->runtime.data = self;
  self->runtime.version = rt_version;
  self->runtime.start = rt_start;
  self->runtime.stop = rt_stop;
  self->runtime.pause = rt_pause;
  self->runtime.resume = rt_resume;
  self->runtime.probe = rt_probe;
  self->runtime.destroy = rt_destroy;
  self->runtime.watch = rt_watch;
  self->runtime.unwatch = rt_unwatch;
  self->runtime.save = rt_save;
  self->runtime.restore = rt_restore;
  self->runtime.usage = rt_usage;
  return &self->runtime;
}

void
mv_hypervisor_runtime_free (MvRuntime *runtime)
{
  Adapter *self;

  if (!runtime)
    return;
  self = adapter_of (runtime);
  g_hash_table_unref (self->watches);
  self->starter->free (self->starter);
  g_free (self);
}

MvStarter *
mv_hypervisor_runtime_starter (MvRuntime *runtime)
{
  return adapter_of (runtime)->starter;
}

/* ---- built-in runtimes ---- */

static MvStarter *
qemu_from_config (GKeyFile *config, GError **error)
{
  g_autofree char *binary = config ? g_key_file_get_string (config, "qemu", "binary", NULL) : NULL;
  g_autofree char *accel = config ? g_key_file_get_string (config, "qemu", "accel", NULL) : NULL;
  MvQemuOptions options = { .binary = binary, .accel = accel };

  return mv_qemu_starter_new (&options, error);
}

/* The built-in hypervisors, in the order "auto" tries them. */
static const struct {
  const char *type;
  MvStarter *(*new_from_config) (GKeyFile *config, GError **error);
} builtin[] = {
  { MV_QEMU_TYPE, qemu_from_config },
};

static gboolean
read_seconds (GKeyFile *config, const char *group, const char *key, guint fallback,
              guint *seconds, GError **error)
{
  g_autoptr (GError) local = NULL;
  guint64 value;

  *seconds = fallback;
  if (!config || !g_key_file_has_key (config, group, key, NULL))
    return TRUE;
  value = g_key_file_get_uint64 (config, group, key, &local);
  if (local || value < 1 || value > MV_TIMEOUT_SECONDS_MAX)
    {
      g_set_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT,
                   "[%s] %s: must be a number of seconds from 1 to %d", group, key,
                   MV_TIMEOUT_SECONDS_MAX);
      return FALSE;
    }
  *seconds = (guint) value;
  return TRUE;
}

GPtrArray *
mv_hypervisor_builtin_runtimes (GKeyFile *config, GError **error)
{
  g_autoptr (GPtrArray) runtimes =
    g_ptr_array_new_with_free_func ((GDestroyNotify) mv_hypervisor_runtime_free);
  guint boot_timeout, stop_timeout;

  if (!read_seconds (config, "lifecycle", "boot-timeout-seconds", MV_DEFAULT_BOOT_TIMEOUT_SECONDS,
                     &boot_timeout, error) ||
      !read_seconds (config, "lifecycle", "stop-timeout-seconds", MV_DEFAULT_STOP_TIMEOUT_SECONDS,
                     &stop_timeout, error))
    return NULL;
  /* Cloud Hypervisor and Firecracker first, each version in its listed
   * order: the first runtime of all is the host's default type. */
  g_autoptr (GPtrArray) rest = mv_http_backends_starters_from_config (config, error);
  if (!rest)
    return NULL;
  for (guint i = 0; i < rest->len; i++)
    g_ptr_array_add (runtimes, mv_hypervisor_runtime_new (g_ptr_array_steal_index (rest, i--),
                                                          boot_timeout, stop_timeout));

  for (guint i = 0; i < G_N_ELEMENTS (builtin); i++)
    {
      MvStarter *starter = builtin[i].new_from_config (config, error);

      if (!starter)
        return NULL;
      g_ptr_array_add (runtimes, mv_hypervisor_runtime_new (starter, boot_timeout, stop_timeout));
    }
  return g_steal_pointer (&runtimes);
}
