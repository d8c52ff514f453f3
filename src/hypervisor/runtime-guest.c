/* The agents of a runtime's running guests: one session each while the
 * machine is attached, what each said about how its workload ended, and
 * what the rest of the runtime asks of them (runtime-private.h). */
#include "runtime-private.h"
#include "metadata.h"
#include "util/log.h"
#include "core/errors.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

/* What a restored guest is given of the host's random bytes. */
#define REIDENTIFY_ENTROPY_BYTES  64

typedef struct {
  MvRuntimeGuests *guests;
  char            *machine_id;
  char            *api_socket;      /* the VMM's, for its metadata service */
  MvAgentSession  *session;
  char            *workload_log;    /* where the workload's output goes */
  int              workload_fd;     /* it, opened at the first output; -1 before */
  gboolean         workload_failed; /* it could not be written: said once */
  gboolean         answered;        /* its agent answered the start: it is up */
  gboolean         exited;
  gboolean         has_exit_code;
  int              exit_code;
  int              exit_signal;
} Guest;

struct _MvRuntimeGuests {
  MvStarter        *starter;
  GHashTable       *table;          /* machine ID -> Guest */
  MvGuestEventFunc  func;
  gpointer          func_data;
  MvGuestFiles      files;
  GMutex            heard_lock;
  GHashTable       *heard;          /* machine ID -> the version its agent gave at start */
};

static void
guest_free (Guest *guest)
{
  mv_agent_session_free (guest->session);
  if (guest->workload_fd >= 0)
    close (guest->workload_fd);
  g_free (guest->workload_log);
  g_free (guest->api_socket);
  g_free (guest->machine_id);
  g_free (guest);
}

MvRuntimeGuests *
mv_runtime_guests_new (MvStarter *starter)
{
  MvRuntimeGuests *guests = g_new0 (MvRuntimeGuests, 1);

  guests->starter = starter;
  guests->table = g_hash_table_new_full (g_str_hash, g_str_equal, NULL,
                                         (GDestroyNotify) guest_free);
  g_mutex_init (&guests->heard_lock);
  guests->heard = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  return guests;
}

void
mv_runtime_guests_free (MvRuntimeGuests *guests)
{
  if (!guests)
    return;
  g_hash_table_unref (guests->table);
  g_hash_table_unref (guests->heard);
  g_mutex_clear (&guests->heard_lock);
  g_free (guests->files.kernel);
  g_free (guests->files.initramfs);
  g_clear_pointer (&guests->files.kernels, g_hash_table_unref);
  g_free (guests);
}

void
mv_runtime_guests_set_files (MvRuntimeGuests *guests, const char *kernel, const char *initramfs)
{
  g_free (guests->files.kernel);
  g_free (guests->files.initramfs);
  guests->files.kernel = g_strdup (kernel);
  guests->files.initramfs = g_strdup (initramfs);
}

void
mv_runtime_guests_set_kernels (MvRuntimeGuests *guests, GHashTable *kernels)
{
  g_clear_pointer (&guests->files.kernels, g_hash_table_unref);
  guests->files.kernels = kernels ? g_hash_table_ref (kernels) : NULL;
}

const MvGuestFiles *
mv_runtime_guests_files (MvRuntimeGuests *guests)
{
  return &guests->files;
}

gboolean
mv_runtime_guests_has_agent (MvRuntimeGuests *guests, const MvSpec *spec)
{
  if (spec->readiness == MV_READINESS_AGENT)
    return TRUE;
  return (!spec->initrd || !*spec->initrd) && guests->files.initramfs != NULL;
}

MvReadiness
mv_runtime_guests_readiness (MvRuntimeGuests *guests, const MvSpec *spec)
{
  if (spec->readiness != MV_READINESS_AUTO)
    return spec->readiness;
  return mv_runtime_guests_has_agent (guests, spec) ? MV_READINESS_AGENT : MV_READINESS_VMM;
}

MvAgentEnd
mv_runtime_guests_end (MvRuntimeGuests *guests)
{
  /* Firecracker's VMM goes on after its guest powers off, and ends when
   * the guest reboots. */
  return strcmp (guests->starter->type, "firecracker") == 0 ? MV_AGENT_END_REBOOT
                                                            : MV_AGENT_END_POWEROFF;
}

/* ---- the session's events ---- */

static void
on_hello (const char *agent_version, gpointer data)
{
  Guest *guest = data;
  MvGuestEvent event = { .agent_version = agent_version };

  if (guest->guests->func)
    guest->guests->func (guest->machine_id, &event, guest->guests->func_data);
}

static void
on_exited (gboolean has_exit_code, int exit_code, int signal, const char *message, gpointer data)
{
  Guest *guest = data;

  guest->exited = TRUE;
  guest->has_exit_code = has_exit_code;
  guest->exit_code = exit_code;
  guest->exit_signal = signal;
  mv_log_machine (G_LOG_LEVEL_MESSAGE, guest->machine_id, NULL, NULL,
                  has_exit_code ? "The guest's workload exited with status %d"
                                : "The guest's workload was killed by signal %d",
                  has_exit_code ? exit_code : signal);
}

static void
on_health (const char *status, guint failing_streak, const char *output, gpointer data)
{
  Guest *guest = data;
  MvGuestEvent event = {
    .health = status,
    .health_failing_streak = failing_streak,
    .health_output = output,
  };

  if (guest->guests->func)
    guest->guests->func (guest->machine_id, &event, guest->guests->func_data);
}

static void
on_usage (guint64 cpu_busy_ticks, guint64 cpu_total_ticks, guint cpus, gpointer data)
{
  Guest *guest = data;
  MvGuestEvent event = {
    .usage = TRUE,
    .cpu_busy_ticks = cpu_busy_ticks,
    .cpu_total_ticks = cpu_total_ticks,
    .cpus = cpus,
  };

  if (guest->guests->func)
    guest->guests->func (guest->machine_id, &event, guest->guests->func_data);
}

static void
on_reidentified (gboolean known, const char *const *changed, const char *message, gpointer data)
{
  Guest *guest = data;
  g_autofree char *list = g_strjoinv (", ", (char **) changed);

  if (!known)
    mv_log_machine (G_LOG_LEVEL_WARNING, guest->machine_id, NULL, NULL,
                    "The restored guest's agent does not know REIDENTIFY (an older agent): "
                    "it keeps the hostname, address and random state it was frozen with");
  else if (message)
    mv_log_machine (G_LOG_LEVEL_WARNING, guest->machine_id, NULL, NULL,
                    "The restored guest could not take all of its identity: %s (changed: %s)",
                    message, *list ? list : "nothing");
  else
    mv_log_machine (G_LOG_LEVEL_MESSAGE, guest->machine_id, NULL, NULL,
                    "The restored guest took its identity (changed: %s)",
                    *list ? list : "nothing");
}

static gboolean
write_all (int fd, const void *data, gsize len)
{
  const guint8 *p = data;

  while (len > 0)
    {
      ssize_t n = write (fd, p, len);

      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        return FALSE;
      p += n;
      len -= (gsize) n;
    }
  return TRUE;
}

/* Appended as it comes, stdout and stderr alike: small writes to a local
 * file, on the main loop. Rotation copies and truncates it under the
 * open descriptor (store/log-rotation.h). */
static void
on_output (guint stream, const guint8 *bytes, gsize len, guint64 dropped, gpointer data)
{
  Guest *guest = data;
  gboolean ok = TRUE;

  if (guest->workload_fd < 0 && !guest->workload_failed)
    {
      guest->workload_fd = open (guest->workload_log, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW |
                                 O_NOCTTY | O_CLOEXEC, 0600);
      if (guest->workload_fd < 0)
        ok = FALSE;
    }
  if (guest->workload_fd >= 0 && dropped > 0)
    {
      g_autofree char *note = g_strdup_printf ("\n[microvmd: %" G_GUINT64_FORMAT " bytes of the "
                                               "workload's output were dropped here; the "
                                               "console has them]\n", dropped);

      ok = write_all (guest->workload_fd, note, strlen (note));
    }
  if (ok && guest->workload_fd >= 0 && len > 0)
    ok = write_all (guest->workload_fd, bytes, len);
  if (!ok && !guest->workload_failed)
    {
      guest->workload_failed = TRUE;
      mv_log_machine (G_LOG_LEVEL_WARNING, guest->machine_id, NULL, NULL,
                      "Cannot write the workload's output to %s: %s (it is on the console)",
                      guest->workload_log, g_strerror (errno));
    }
}

static const MvAgentSessionEvents session_events = {
  .hello = on_hello,
  .exited = on_exited,
  .health = on_health,
  .usage = on_usage,
  .reidentified = on_reidentified,
  .output = on_output,
};

/* ---- attaching ---- */

void
mv_runtime_guests_set_listener (MvRuntimeGuests *guests, MvGuestEventFunc func, gpointer data)
{
  guests->func = func;
  guests->func_data = data;
}

static gboolean
frames_for (MvRuntimeGuests *guests, const MvRuntimeRequest *req, GBytes **config,
            GBytes **metadata, GError **error)
{
  *config = mv_agent_config_frame (req->spec, req->image_config, req->network, mv_runtime_guests_end (guests),
                                   error);
  if (!*config)
    return FALSE;
  *metadata = mv_agent_metadata_frame (req->spec, req->console_keys, error);
  if (!*metadata)
    {
      g_clear_pointer (config, g_bytes_unref);
      return FALSE;
    }
  return TRUE;
}

void
mv_runtime_guests_heard_at_start (MvRuntimeGuests *guests, const char *machine_id,
                                  const char *agent_version)
{
  g_mutex_lock (&guests->heard_lock);
  if (agent_version)
    g_hash_table_insert (guests->heard, g_strdup (machine_id), g_strdup (agent_version));
  else
    g_hash_table_remove (guests->heard, machine_id);
  g_mutex_unlock (&guests->heard_lock);
}

/* What the agent said when the machine started, once. */
static char *
take_heard (MvRuntimeGuests *guests, const char *machine_id)
{
  gpointer key = NULL, version = NULL;

  g_mutex_lock (&guests->heard_lock);
  if (g_hash_table_steal_extended (guests->heard, machine_id, &key, &version))
    g_free (key);
  g_mutex_unlock (&guests->heard_lock);
  return version;
}

void
mv_runtime_guests_attach (MvRuntimeGuests *guests, const MvRuntimeRequest *req)
{
  g_autoptr (MvVmSpec) vm = NULL;
  g_autoptr (GBytes) config = NULL, metadata = NULL;
  g_autoptr (GError) local = NULL;
  g_autofree char *heard = take_heard (guests, req->machine_id);
  Guest *guest;

  if (g_hash_table_contains (guests->table, req->machine_id) ||
      !mv_runtime_guests_has_agent (guests, req->spec))
    return;
  if (!frames_for (guests, req, &config, &metadata, &local))
    {
      mv_log_machine (G_LOG_LEVEL_WARNING, req->machine_id, NULL, NULL,
                      "Cannot talk to the guest's agent: %s", local->message);
      return;
    }
  vm = mv_runtime_vm_spec_new (guests->starter, &guests->files, req);
  guest = g_new0 (Guest, 1);
  guest->guests = guests;
  guest->machine_id = g_strdup (req->machine_id);
  guest->api_socket = mv_runtime_api_socket_path (guests->starter, req->runtime_dir);
  guest->workload_log = g_build_filename (req->runtime_dir, MV_WORKLOAD_LOG_NAME, NULL);
  guest->workload_fd = -1;
  g_hash_table_insert (guests->table, guest->machine_id, guest);
  guest->session = mv_agent_session_new (&vm->agent, config, &session_events, guest);
  mv_agent_session_set_guest (guest->session, config, metadata);
  /* The session's own HELLO comes later; the start already heard one. */
  if (heard)
    {
      guest->answered = TRUE;
      on_hello (heard, guest);
    }
}

void
mv_runtime_guests_detach (MvRuntimeGuests *guests, const char *machine_id)
{
  g_hash_table_remove (guests->table, machine_id);
}

gboolean
mv_runtime_guests_take_exit (MvRuntimeGuests *guests, const char *machine_id,
                             gboolean *has_exit_code, int *exit_code, int *signal)
{
  Guest *guest = g_hash_table_lookup (guests->table, machine_id);

  if (!guest || !guest->exited)
    return FALSE;
  *has_exit_code = guest->has_exit_code;
  *exit_code = guest->exit_code;
  *signal = guest->exit_signal;
  guest->exited = FALSE;
  return TRUE;
}

/* ---- updates ---- */

typedef struct {
  MvStarter *starter;
  char      *api_socket;
  char      *machine_id;
  JsonNode  *document;
} MetadataPut;

static void
metadata_put_free (gpointer data)
{
  MetadataPut *put = data;

  g_free (put->api_socket);
  g_free (put->machine_id);
  json_node_unref (put->document);
  g_free (put);
}

static void
metadata_put_thread (GTask *task, gpointer source, gpointer task_data, GCancellable *cancellable)
{
  MetadataPut *put = task_data;
  g_autoptr (GError) local = NULL;
  g_autoptr (MvHypervisor) hv = put->starter->connect (put->starter, put->api_socket, &local);

  if (!hv || (hv->set_metadata && !hv->set_metadata (hv, put->document, &local)))
    mv_log_machine (G_LOG_LEVEL_WARNING, put->machine_id, NULL, NULL,
                    "Could not update the guest's metadata service: %s", local->message);
  g_task_return_boolean (task, TRUE);
}

static void
update_metadata_service (MvRuntimeGuests *guests, const MvRuntimeRequest *req)
{
  if (mv_runtime_guests_end (guests) == MV_AGENT_END_REBOOT && req->vmm)
    {
      /* Firecracker's guests also read it from the VMM's metadata
       * service: an HTTP call, off the main thread. */
      g_autoptr (GTask) task = g_task_new (NULL, NULL, NULL, NULL);
      MetadataPut *put = g_new0 (MetadataPut, 1);

      put->starter = guests->starter;
      put->api_socket = mv_runtime_api_socket_path (guests->starter, req->runtime_dir);
      put->machine_id = g_strdup (req->machine_id);
      put->document = mv_spec_metadata_document_with_keys (req->spec, req->console_keys);
      g_task_set_task_data (task, put, metadata_put_free);
      g_task_run_in_thread (task, metadata_put_thread);
    }
}

gboolean
mv_runtime_guests_update (MvRuntimeGuests *guests, const MvRuntimeRequest *req, GError **error)
{
  Guest *guest = g_hash_table_lookup (guests->table, req->machine_id);
  g_autoptr (GBytes) config = NULL, metadata = NULL;

  update_metadata_service (guests, req);
  if (!guest)
    return TRUE;
  if (!frames_for (guests, req, &config, &metadata, error))
    return FALSE;
  mv_agent_session_set_guest (guest->session, config, metadata);
  return TRUE;
}

GBytes *
mv_runtime_identity_frame (const MvRuntimeRequest *req, GError **error)
{
  guint8 entropy[REIDENTIFY_ENTROPY_BYTES];
  GBytes *frame;
  ssize_t n;

  /* The kernel's CSPRNG, initialised long before any guest runs: it does
   * not block here. */
  do
    n = getrandom (entropy, sizeof entropy, 0);
  while (n < 0 && errno == EINTR);
  if (n != (ssize_t) sizeof entropy)
    {
      mv_error_set (error, MV_ERROR_FAILED, "Could not read %zu random bytes for the restored "
                    "guest: %s", sizeof entropy, n < 0 ? g_strerror (errno) : "short read");
      return NULL;
    }
  frame = mv_agent_reidentify_frame (req->spec, req->network, entropy, sizeof entropy, error);
  explicit_bzero (entropy, sizeof entropy);
  return frame;
}

gboolean
mv_runtime_guests_reidentify (MvRuntimeGuests *guests, const MvRuntimeRequest *req,
                              GError **error)
{
  Guest *guest = g_hash_table_lookup (guests->table, req->machine_id);
  g_autoptr (GBytes) frame = NULL, config = NULL, metadata = NULL;

  update_metadata_service (guests, req);
  if (!guest)
    return TRUE;   /* no agent of microvmd's: nothing in the guest can be told */
  frame = mv_runtime_identity_frame (req, error);
  if (!frame || !frames_for (guests, req, &config, &metadata, error))
    return FALSE;
  /* Identity first; the metadata that follows it is the same. */
  mv_agent_session_reidentify (guest->session, frame);
  mv_agent_session_set_guest (guest->session, config, metadata);
  return TRUE;
}

gboolean
mv_runtime_guests_exec (MvRuntimeGuests *guests, const char *machine_id,
                        const MvRuntimeExec *exec, int fds[4], GError **error)
{
  Guest *guest = g_hash_table_lookup (guests->table, machine_id);
  MvAgentExec request = {
    .argv = exec->argv,
    .env = exec->env,
    .user = exec->user,
    .working_dir = exec->working_dir,
    .tty = exec->tty,
    .rows = exec->rows,
    .columns = exec->columns,
    .console_key = exec->console_key,
  };

  if (!guest)
    {
      g_set_error (error, MV_ERROR, MV_ERROR_INVALID_STATE,
                   "This guest has no microvmd agent to run commands with");
      return FALSE;
    }
  return mv_agent_session_exec (guest->session, &request, fds, error);
}

/* ---- power-off, from a worker thread ---- */

typedef struct {
  MvRuntimeGuests *guests;
  char            *machine_id;
  MvGuestAsked     answer;
  gboolean         done;
  GMutex           lock;
  GCond            cond;
} Ask;

static gboolean
ask_on_main (gpointer data)
{
  Ask *ask = data;
  Guest *guest = g_hash_table_lookup (ask->guests->table, ask->machine_id);
  MvGuestAsked answer = MV_GUEST_NO_AGENT;

  if (guest)
    answer = mv_agent_session_poweroff (guest->session, guest->answered) ? MV_GUEST_ASKED
                                                                         : MV_GUEST_NOT_ANSWERING;
  g_mutex_lock (&ask->lock);
  ask->answer = answer;
  ask->done = TRUE;
  g_cond_signal (&ask->cond);
  g_mutex_unlock (&ask->lock);
  return G_SOURCE_REMOVE;
}

/* How long a worker waits for the main loop to pass the request on. */
#define ASK_TIMEOUT_US  (2 * G_USEC_PER_SEC)

MvGuestAsked
mv_runtime_guests_ask_poweroff (MvRuntimeGuests *guests, const char *machine_id)
{
  Ask *ask = g_new0 (Ask, 1);
  gint64 deadline = g_get_monotonic_time () + ASK_TIMEOUT_US;
  MvGuestAsked answer;
  gboolean done;

  ask->guests = guests;
  ask->machine_id = g_strdup (machine_id);
  ask->answer = MV_GUEST_NO_AGENT;
  g_mutex_init (&ask->lock);
  g_cond_init (&ask->cond);
  g_main_context_invoke (NULL, ask_on_main, ask);
  g_mutex_lock (&ask->lock);
  while (!ask->done)
    if (!g_cond_wait_until (&ask->cond, &ask->lock, deadline))
      break;
  done = ask->done;
  answer = ask->answer;
  g_mutex_unlock (&ask->lock);
  if (!done)
    {
      /* The main loop is not turning (the daemon is ending); the request
       * stays with it and is freed never: a few bytes, once. */
      return MV_GUEST_NO_AGENT;
    }
  g_mutex_clear (&ask->lock);
  g_cond_clear (&ask->cond);
  g_free (ask->machine_id);
  g_free (ask);
  return answer;
}
