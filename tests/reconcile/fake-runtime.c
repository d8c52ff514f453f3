#include "fake-runtime.h"
#include "core/errors.h"

static const char *const call_names[FAKE_RUNTIME_N_CALLS] = {
  [FAKE_RUNTIME_START] = "start",
  [FAKE_RUNTIME_STOP] = "stop",
  [FAKE_RUNTIME_PAUSE] = "pause",
  [FAKE_RUNTIME_RESUME] = "resume",
  [FAKE_RUNTIME_SAVE] = "save",
  [FAKE_RUNTIME_RESTORE] = "restore",
  [FAKE_RUNTIME_DESTROY] = "destroy",
  [FAKE_RUNTIME_PROBE] = "probe",
  [FAKE_RUNTIME_USAGE] = "usage",
};

typedef struct {
  MvVmmState state;
  guint      serial;         /* of the VMM now or last there; 0 none yet */
  guint64    cpu_ns;
  int        probe_answer;   /* scripted, or -1 */
  gboolean   in_call;
} Vmm;

typedef struct {
  char     *message;
  gboolean  ends_vmm;
} Failure;

/* Bound to one VMM, as a real watch is bound to its process. */
typedef struct {
  char             *machine_id;
  guint             serial;
  gboolean          ended;      /* its VMM is gone; not reported yet */
  MvRuntimeExitFunc func;
  gpointer          user_data;
} Watch;

struct _FakeRuntime {
  MvRuntime   iface;
  FakeLog    *log;
  FakeHold    hold;
  GMutex      lock;
  GHashTable *vmms;                          /* machine id -> Vmm* */
  Failure    *failures[FAKE_RUNTIME_N_CALLS];
  guint       next_serial;
  GHashTable *watches;                       /* watch id -> Watch* */
  guint       next_watch;
  GThread    *probe_thread;
  guint       probes;
  MvGuestEventFunc guest_func;
  gpointer    guest_data;
};

static void
failure_free (Failure *failure)
{
  if (!failure)
    return;
  g_free (failure->message);
  g_free (failure);
}

static void
watch_free (Watch *watch)
{
  g_free (watch->machine_id);
  g_free (watch);
}

static FakeRuntime *
fake_of (MvRuntime *rt)
{
  return rt->data;
}

/* Called with the lock held. */
static Vmm *
vmm_of (FakeRuntime *fake, const char *machine_id)
{
  Vmm *vmm = g_hash_table_lookup (fake->vmms, machine_id);

  if (!vmm)
    {
      vmm = g_new0 (Vmm, 1);
      vmm->state = MV_VMM_GONE;
      vmm->probe_answer = -1;
      g_hash_table_insert (fake->vmms, g_strdup (machine_id), vmm);
    }
  return vmm;
}

/* @vmm has ended: its watches will report that, once delivered. Called
 * with the lock held. */
static void
vmm_ended (FakeRuntime *fake, const char *machine_id, Vmm *vmm)
{
  GHashTableIter iter;
  Watch *watch;

  vmm->state = MV_VMM_GONE;
  g_hash_table_iter_init (&iter, fake->watches);
  while (g_hash_table_iter_next (&iter, NULL, (gpointer *) &watch))
    if (watch->serial == vmm->serial && g_str_equal (watch->machine_id, machine_id))
      watch->ended = TRUE;
}

static JsonObject *
identity (guint serial, gboolean restored)
{
  JsonObject *object = json_object_new ();

  json_object_set_string_member (object, "type", "fake");
  json_object_set_int_member (object, "serial", serial);
  if (restored)
    json_object_set_boolean_member (object, "restored", TRUE);
  return object;
}

/* The start of every blocking call: the contract checks, the log entry, a
 * hold the test asked for; then the failure scripted for it, if any. */
static Failure *
enter (FakeRuntime *fake, FakeRuntimeCall call, const MvRuntimeRequest *req, const char *details)
{
  Failure *failure;
  Vmm *vmm;

  if (fake_on_main_thread ())
    fake_log_breach (fake->log, "runtime.%s %s ran on the main thread", call_names[call],
                     req->machine_id);
  g_mutex_lock (&fake->lock);
  vmm = vmm_of (fake, req->machine_id);
  if (vmm->in_call)
    fake_log_breach (fake->log, "runtime.%s %s while another call for it was under way",
                     call_names[call], req->machine_id);
  vmm->in_call = TRUE;
  g_mutex_unlock (&fake->lock);

  fake_log_add (fake->log, "runtime.%s %s%s%s", call_names[call], req->machine_id,
                details ? " " : "", details ? details : "");
  fake_hold_point (&fake->hold, call);

  g_mutex_lock (&fake->lock);
  failure = g_steal_pointer (&fake->failures[call]);
  if (failure && failure->ends_vmm)
    vmm_ended (fake, req->machine_id, vmm);
  g_mutex_unlock (&fake->lock);
  return failure;
}

static void
leave (FakeRuntime *fake, FakeRuntimeCall call, const MvRuntimeRequest *req)
{
  fake_hold_point (&fake->hold, FAKE_RUNTIME_AFTER (call));
  g_mutex_lock (&fake->lock);
  vmm_of (fake, req->machine_id)->in_call = FALSE;
  g_mutex_unlock (&fake->lock);
}

static gboolean
fail (Failure *failure, GError **error)
{
  g_set_error_literal (error, MV_ERROR, MV_ERROR_FAILED, failure->message);
  failure_free (failure);
  return FALSE;
}

static char *
fake_version (MvRuntime *rt, GError **error)
{
  return g_strdup ("1.0.0");
}

/* A new VMM for @req's machine; called with the lock held. */
static JsonObject *
boot (FakeRuntime *fake, const MvRuntimeRequest *req, gboolean restored)
{
  Vmm *vmm = vmm_of (fake, req->machine_id);

  if (vmm->state != MV_VMM_GONE)
    fake_log_breach (fake->log, "runtime %s: a new VMM beside one that still runs",
                     req->machine_id);
  vmm->state = MV_VMM_RUNNING;
  vmm->serial = ++fake->next_serial;
  vmm->cpu_ns = 0;
  return identity (vmm->serial, restored);
}

static JsonObject *
fake_start (MvRuntime *rt, const MvRuntimeRequest *req, GError **error)
{
  FakeRuntime *fake = fake_of (rt);
  Failure *failure = enter (fake, FAKE_RUNTIME_START, req, NULL);
  JsonObject *vmm = NULL;

  if (failure)
    fail (failure, error);
  else
    {
      g_mutex_lock (&fake->lock);
      vmm = boot (fake, req, FALSE);
      g_mutex_unlock (&fake->lock);
    }
  leave (fake, FAKE_RUNTIME_START, req);
  return vmm;
}

static gboolean
fake_stop (MvRuntime *rt, const MvRuntimeRequest *req, gboolean force, GError **error)
{
  FakeRuntime *fake = fake_of (rt);
  Failure *failure = enter (fake, FAKE_RUNTIME_STOP, req, force ? "force" : "graceful");
  gboolean ok = failure ? fail (failure, error) : TRUE;

  if (ok)
    {
      g_mutex_lock (&fake->lock);
      vmm_ended (fake, req->machine_id, vmm_of (fake, req->machine_id));
      g_mutex_unlock (&fake->lock);
    }
  leave (fake, FAKE_RUNTIME_STOP, req);
  return ok;
}

/* Pause, resume and save need a VMM that runs. */
static gboolean
set_live_state (FakeRuntime *fake, const MvRuntimeRequest *req, MvVmmState state, GError **error)
{
  gboolean ok;
  Vmm *vmm;

  g_mutex_lock (&fake->lock);
  vmm = vmm_of (fake, req->machine_id);
  ok = vmm->state != MV_VMM_GONE;
  if (ok && state == MV_VMM_GONE)
    vmm_ended (fake, req->machine_id, vmm);
  else if (ok)
    vmm->state = state;
  g_mutex_unlock (&fake->lock);
  if (!ok)
    g_set_error (error, MV_ERROR, MV_ERROR_INVALID_STATE, "The VMM of %s is not running",
                 req->machine_id);
  return ok;
}

static gboolean
fake_pause (MvRuntime *rt, const MvRuntimeRequest *req, GError **error)
{
  FakeRuntime *fake = fake_of (rt);
  Failure *failure = enter (fake, FAKE_RUNTIME_PAUSE, req, NULL);
  gboolean ok = failure ? fail (failure, error) : set_live_state (fake, req, MV_VMM_PAUSED, error);

  leave (fake, FAKE_RUNTIME_PAUSE, req);
  return ok;
}

static gboolean
fake_resume (MvRuntime *rt, const MvRuntimeRequest *req, GError **error)
{
  FakeRuntime *fake = fake_of (rt);
  Failure *failure = enter (fake, FAKE_RUNTIME_RESUME, req, NULL);
  gboolean ok = failure ? fail (failure, error) : set_live_state (fake, req, MV_VMM_RUNNING, error);

  leave (fake, FAKE_RUNTIME_RESUME, req);
  return ok;
}

static MvVmmState
fake_probe (MvRuntime *rt, const MvRuntimeRequest *req)
{
  FakeRuntime *fake = fake_of (rt);
  Failure *failure = enter (fake, FAKE_RUNTIME_PROBE, req, NULL);
  MvVmmState state;
  Vmm *vmm;

  failure_free (failure);
  g_mutex_lock (&fake->lock);
  vmm = vmm_of (fake, req->machine_id);
  state = vmm->probe_answer >= 0 ? (MvVmmState) vmm->probe_answer : vmm->state;
  vmm->probe_answer = -1;
  fake->probe_thread = g_thread_self ();
  fake->probes++;
  g_mutex_unlock (&fake->lock);
  leave (fake, FAKE_RUNTIME_PROBE, req);
  return state;
}

static gboolean
fake_destroy (MvRuntime *rt, const MvRuntimeRequest *req, GError **error)
{
  FakeRuntime *fake = fake_of (rt);
  Failure *failure = enter (fake, FAKE_RUNTIME_DESTROY, req, NULL);
  gboolean ok = failure ? fail (failure, error) : TRUE;

  leave (fake, FAKE_RUNTIME_DESTROY, req);
  return ok;
}

static gboolean
fake_save (MvRuntime *rt, const MvRuntimeRequest *req, const char *state_dir, GError **error)
{
  FakeRuntime *fake = fake_of (rt);
  Failure *failure = enter (fake, FAKE_RUNTIME_SAVE, req, state_dir);
  gboolean ok = failure ? fail (failure, error) : set_live_state (fake, req, MV_VMM_GONE, error);

  leave (fake, FAKE_RUNTIME_SAVE, req);
  return ok;
}

static JsonObject *
fake_restore (MvRuntime *rt, const MvRuntimeRequest *req, const char *state_dir, GError **error)
{
  FakeRuntime *fake = fake_of (rt);
  Failure *failure = enter (fake, FAKE_RUNTIME_RESTORE, req, state_dir);
  JsonObject *vmm = NULL;

  if (failure)
    fail (failure, error);
  else
    {
      g_mutex_lock (&fake->lock);
      vmm = boot (fake, req, TRUE);
      g_mutex_unlock (&fake->lock);
    }
  leave (fake, FAKE_RUNTIME_RESTORE, req);
  return vmm;
}

/* Called with the lock held. */
static Watch *
live_watch (FakeRuntime *fake, const char *machine_id, guint serial)
{
  GHashTableIter iter;
  Watch *watch;

  g_hash_table_iter_init (&iter, fake->watches);
  while (g_hash_table_iter_next (&iter, NULL, (gpointer *) &watch))
    if (watch->serial == serial && !watch->ended && g_str_equal (watch->machine_id, machine_id))
      return watch;
  return NULL;
}

static guint
fake_watch (MvRuntime *rt, const char *machine_id, JsonObject *vmm, MvRuntimeExitFunc func,
            gpointer user_data)
{
  FakeRuntime *fake = fake_of (rt);
  Watch *watch = g_new0 (Watch, 1);
  Vmm *current;
  guint id;

  if (!fake_on_main_thread ())
    fake_log_breach (fake->log, "runtime.watch %s off the main thread", machine_id);
  watch->machine_id = g_strdup (machine_id);
  watch->serial = (guint) json_object_get_int_member_with_default (vmm, "serial", 0);
  watch->func = func;
  watch->user_data = user_data;
  g_mutex_lock (&fake->lock);
  if (live_watch (fake, machine_id, watch->serial))
    fake_log_breach (fake->log, "runtime.watch %s: watched twice", machine_id);
  current = vmm_of (fake, machine_id);
  /* A VMM that is gone already is reported gone, like any other end. */
  watch->ended = current->serial != watch->serial || current->state == MV_VMM_GONE;
  id = ++fake->next_watch;
  g_hash_table_insert (fake->watches, GUINT_TO_POINTER (id), watch);
  g_mutex_unlock (&fake->lock);
  fake_log_add (fake->log, "runtime.watch %s", machine_id);
  return id;
}

static void
fake_unwatch (MvRuntime *rt, guint watch_id)
{
  FakeRuntime *fake = fake_of (rt);
  g_autofree char *machine_id = NULL;
  Watch *watch;

  if (!fake_on_main_thread ())
    fake_log_breach (fake->log, "runtime.unwatch off the main thread");
  g_mutex_lock (&fake->lock);
  watch = g_hash_table_lookup (fake->watches, GUINT_TO_POINTER (watch_id));
  if (watch)
    {
      machine_id = g_strdup (watch->machine_id);
      g_hash_table_remove (fake->watches, GUINT_TO_POINTER (watch_id));
    }
  g_mutex_unlock (&fake->lock);
  if (machine_id)
    fake_log_add (fake->log, "runtime.unwatch %s", machine_id);
}

static gboolean
fake_usage (MvRuntime *rt, const MvRuntimeRequest *req, MvRuntimeUsage *usage, GError **error)
{
  FakeRuntime *fake = fake_of (rt);
  Failure *failure;

  if (!fake_on_main_thread ())
    fake_log_breach (fake->log, "runtime.usage %s off the main thread", req->machine_id);
  fake_log_add (fake->log, "runtime.usage %s", req->machine_id);
  g_mutex_lock (&fake->lock);
  failure = g_steal_pointer (&fake->failures[FAKE_RUNTIME_USAGE]);
  *usage = (MvRuntimeUsage) { .cpu_ns = vmm_of (fake, req->machine_id)->cpu_ns };
  g_mutex_unlock (&fake->lock);
  return failure ? fail (failure, error) : TRUE;
}

static void
fake_set_guest_listener (MvRuntime *rt, MvGuestEventFunc func, gpointer data)
{
  FakeRuntime *fake = fake_of (rt);

  fake->guest_func = func;
  fake->guest_data = data;
}

void
fake_runtime_guest_usage (FakeRuntime *fake, const char *machine_id, guint64 busy,
                          guint64 total, guint cpus)
{
  MvGuestEvent event = {
    .usage = TRUE,
    .cpu_busy_ticks = busy,
    .cpu_total_ticks = total,
    .cpus = cpus,
  };

  g_assert_nonnull (fake->guest_func);
  fake->guest_func (machine_id, &event, fake->guest_data);
}

FakeRuntime *
fake_runtime_new (const char *type, FakeLog *log)
{
  FakeRuntime *fake = g_new0 (FakeRuntime, 1);

  fake->log = log;
  fake_hold_init (&fake->hold);
  g_mutex_init (&fake->lock);
  fake->vmms = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  fake->watches = g_hash_table_new_full (NULL, NULL, NULL, (GDestroyNotify) watch_free);
  fake->iface = (MvRuntime) {
    .type = type,
    .data = fake,
    .version = fake_version,
    .start = fake_start,
    .stop = fake_stop,
    .pause = fake_pause,
    .resume = fake_resume,
    .probe = fake_probe,
    .destroy = fake_destroy,
    .watch = fake_watch,
    .unwatch = fake_unwatch,
    .save = fake_save,
    .restore = fake_restore,
    .usage = fake_usage,
    .set_guest_listener = fake_set_guest_listener,
  };
  return fake;
}

void
fake_runtime_free (FakeRuntime *fake)
{
  if (!fake)
    return;
  for (guint i = 0; i < FAKE_RUNTIME_N_CALLS; i++)
    failure_free (fake->failures[i]);
  g_hash_table_unref (fake->vmms);
  g_hash_table_unref (fake->watches);
  g_mutex_clear (&fake->lock);
  fake_hold_clear (&fake->hold);
  g_free (fake);
}

MvRuntime *
fake_runtime_iface (FakeRuntime *fake)
{
  return &fake->iface;
}

void
fake_runtime_fail_next (FakeRuntime *fake, FakeRuntimeCall call, const char *message,
                        gboolean ends_vmm)
{
  Failure *failure = g_new0 (Failure, 1);

  failure->message = g_strdup (message);
  failure->ends_vmm = ends_vmm;
  g_mutex_lock (&fake->lock);
  failure_free (fake->failures[call]);
  fake->failures[call] = failure;
  g_mutex_unlock (&fake->lock);
}

void
fake_runtime_script_probe (FakeRuntime *fake, const char *machine_id, MvVmmState state)
{
  g_mutex_lock (&fake->lock);
  vmm_of (fake, machine_id)->probe_answer = state;
  g_mutex_unlock (&fake->lock);
}

GThread *
fake_runtime_probe_thread (FakeRuntime *fake)
{
  GThread *thread;

  g_mutex_lock (&fake->lock);
  thread = fake->probe_thread;
  g_mutex_unlock (&fake->lock);
  return thread;
}

guint
fake_runtime_probes (FakeRuntime *fake)
{
  guint probes;

  g_mutex_lock (&fake->lock);
  probes = fake->probes;
  g_mutex_unlock (&fake->lock);
  return probes;
}

FakeHold *
fake_runtime_hold (FakeRuntime *fake)
{
  return &fake->hold;
}

JsonObject *
fake_runtime_spawn (FakeRuntime *fake, const char *machine_id, MvVmmState state)
{
  Vmm *vmm;

  g_mutex_lock (&fake->lock);
  vmm = vmm_of (fake, machine_id);
  vmm->state = state;
  vmm->serial = ++fake->next_serial;
  g_mutex_unlock (&fake->lock);
  return identity (vmm->serial, FALSE);
}

MvVmmState
fake_runtime_vmm_state (FakeRuntime *fake, const char *machine_id)
{
  MvVmmState state;

  g_mutex_lock (&fake->lock);
  state = vmm_of (fake, machine_id)->state;
  g_mutex_unlock (&fake->lock);
  return state;
}

void
fake_runtime_add_cpu (FakeRuntime *fake, const char *machine_id, guint64 cpu_ns)
{
  g_mutex_lock (&fake->lock);
  vmm_of (fake, machine_id)->cpu_ns += cpu_ns;
  g_mutex_unlock (&fake->lock);
}

gboolean
fake_runtime_watched (FakeRuntime *fake, const char *machine_id)
{
  GHashTableIter iter;
  Watch *watch;
  gboolean watched = FALSE;
  guint serial;

  g_mutex_lock (&fake->lock);
  serial = vmm_of (fake, machine_id)->serial;
  g_hash_table_iter_init (&iter, fake->watches);
  while (g_hash_table_iter_next (&iter, NULL, (gpointer *) &watch))
    watched |= watch->serial == serial && g_str_equal (watch->machine_id, machine_id);
  g_mutex_unlock (&fake->lock);
  return watched;
}

/* Takes the watches that @take says are to report now; they fire once,
 * so they are gone before anyone is told, as the real runtimes drop
 * theirs. */
static GPtrArray *
take_watches (FakeRuntime *fake, gboolean (*take) (Watch *watch, gpointer data), gpointer data)
{
  GPtrArray *taken = g_ptr_array_new_with_free_func ((GDestroyNotify) watch_free);
  GHashTableIter iter;
  Watch *watch;

  g_mutex_lock (&fake->lock);
  g_hash_table_iter_init (&iter, fake->watches);
  while (g_hash_table_iter_next (&iter, NULL, (gpointer *) &watch))
    if (take (watch, data))
      {
        g_ptr_array_add (taken, watch);
        g_hash_table_iter_steal (&iter);
      }
  g_mutex_unlock (&fake->lock);
  return taken;
}

typedef struct {
  const char *machine_id;
  guint       serial;
} Which;

static gboolean
is_of (Watch *watch, gpointer data)
{
  Which *which = data;

  return watch->serial == which->serial && g_str_equal (watch->machine_id, which->machine_id);
}

static gboolean
has_ended (Watch *watch, gpointer data)
{
  return watch->ended;
}

gboolean
fake_runtime_end_vmm (FakeRuntime *fake, const char *machine_id, gboolean has_exit_code,
                      int exit_code, const char *reason)
{
  g_autoptr (GPtrArray) taken = NULL;
  Which which = { machine_id, 0 };
  Vmm *vmm;

  g_mutex_lock (&fake->lock);
  vmm = vmm_of (fake, machine_id);
  which.serial = vmm->serial;
  vmm_ended (fake, machine_id, vmm);
  g_mutex_unlock (&fake->lock);
  fake_log_add (fake->log, "vmm.ended %s", machine_id);
  taken = take_watches (fake, is_of, &which);
  for (guint i = 0; i < taken->len; i++)
    {
      Watch *watch = taken->pdata[i];

      watch->func (watch->machine_id, has_exit_code, exit_code, reason, watch->user_data);
    }
  return taken->len > 0;
}

void
fake_runtime_kill (FakeRuntime *fake, const char *machine_id)
{
  g_mutex_lock (&fake->lock);
  vmm_ended (fake, machine_id, vmm_of (fake, machine_id));
  g_mutex_unlock (&fake->lock);
  fake_log_add (fake->log, "vmm.killed %s", machine_id);
}

guint
fake_runtime_report_ends (FakeRuntime *fake)
{
  g_autoptr (GPtrArray) taken = take_watches (fake, has_ended, NULL);

  for (guint i = 0; i < taken->len; i++)
    {
      Watch *watch = taken->pdata[i];

      fake_log_add (fake->log, "vmm.reported %s", watch->machine_id);
      watch->func (watch->machine_id, FALSE, 0, "the VMM process ended unexpectedly",
                   watch->user_data);
    }
  return taken->len;
}

void
fake_runtime_set_can_freeze (FakeRuntime *fake, gboolean can_freeze)
{
  fake->iface.save = can_freeze ? fake_save : NULL;
  fake->iface.restore = can_freeze ? fake_restore : NULL;
}
