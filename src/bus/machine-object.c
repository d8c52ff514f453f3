/* org.microvmd1.Machine: one object per machine at
 * /org/microvmd1/machine/<encoded id>. Methods are authorized with polkit,
 * turn into a change of the desired record, and reply once reconciliation
 * has reached it. */
#include "machine-object.h"
#include "machine-guest.h"
#include "machine-logs.h"
#include "machine-stats.h"
#include "core/errors.h"
#include "core/image-ref.h"
#include "names.h"
#include "polkit.h"
#include "snapshot-object.h"
#include "util/files.h"

#include <errno.h>
#include <string.h>

static int
machine_find (sd_bus *bus, const char *path, const char *interface, void *userdata,
              void **found, sd_bus_error *error)
{
  MvBusService *service = userdata;
  g_autofree char *id = NULL;
  MvMachine *machine;

  if (sd_bus_path_decode (path, MV_MACHINE_PREFIX, &id) <= 0 || !id)
    return 0;
  machine = mv_bus_service_find_machine (service, id);
  if (!machine)
    return 0;
  *found = machine;
  return 1;
}

static int
machine_enumerate (sd_bus *bus, const char *prefix, void *userdata, char ***nodes,
                   sd_bus_error *error)
{
  MvBusService *service = userdata;
  g_autoptr (GPtrArray) machines = mv_reconciler_list (mv_bus_service_reconciler (service));
  char **list = calloc (machines->len + 1, sizeof (char *));

  if (!list)
    return -ENOMEM;
  for (guint i = 0; i < machines->len; i++)
    list[i] = strdup (mv_bus_view (service, machines->pdata[i])->path);
  *nodes = list;
  return 1;
}

/* ---- properties ---- */

#define STRING_PROPERTY(fn, expr)                                                 \
  static int fn (sd_bus *bus, const char *path, const char *interface,           \
                 const char *property, sd_bus_message *reply, void *userdata,     \
                 sd_bus_error *error)                                             \
  {                                                                               \
    MvMachine *machine = userdata;                                                \
    const MvStatus *status G_GNUC_UNUSED = mv_machine_shown_status (machine);     \
    const MvConfig *config G_GNUC_UNUSED = mv_machine_shown_config (machine);     \
    const char *value = (expr);                                                   \
    return sd_bus_message_append (reply, "s", value ? value : "");               \
  }

#define NUMBER_PROPERTY(fn, sig, ctype, expr)                                     \
  static int fn (sd_bus *bus, const char *path, const char *interface,           \
                 const char *property, sd_bus_message *reply, void *userdata,     \
                 sd_bus_error *error)                                             \
  {                                                                               \
    MvMachine *machine = userdata;                                                \
    const MvStatus *status G_GNUC_UNUSED = mv_machine_shown_status (machine);     \
    const MvConfig *config G_GNUC_UNUSED = mv_machine_shown_config (machine);     \
    ctype value = (expr);                                                         \
    return sd_bus_message_append (reply, sig, value);                            \
  }

STRING_PROPERTY (get_id, machine->id)
STRING_PROPERTY (get_name, config->spec->name)
STRING_PROPERTY (get_state, mv_state_to_string (status->state))
STRING_PROPERTY (get_state_error, status->state_error)
STRING_PROPERTY (get_desired_state, mv_desired_to_string (config->desired))
STRING_PROPERTY (get_phase, status->phase)
STRING_PROPERTY (get_operation_id, status->operation_id)
STRING_PROPERTY (get_started_from, status->started_from)
NUMBER_PROPERTY (get_desired_generation, "t", uint64_t, config->desired_generation)
NUMBER_PROPERTY (get_observed_generation, "t", uint64_t, status->observed_generation)
NUMBER_PROPERTY (get_specification_generation, "t", uint64_t, config->specification_generation)
NUMBER_PROPERTY (get_restart_generation, "t", uint64_t, config->restart_generation)
NUMBER_PROPERTY (get_vcpus, "u", uint32_t, mv_spec_vcpus (config->spec))
NUMBER_PROPERTY (get_cpu_millicores, "u", uint32_t, config->spec->cpu_millicores)
NUMBER_PROPERTY (get_memory_bytes, "t", uint64_t, config->spec->memory_bytes)
NUMBER_PROPERTY (get_started_at, "t", uint64_t, (uint64_t) MAX (status->started_at, 0))
NUMBER_PROPERTY (get_created_at, "t", uint64_t, (uint64_t) MAX (config->created_at, 0))
NUMBER_PROPERTY (get_updated_at, "t", uint64_t, (uint64_t) MAX (config->updated_at, 0))
NUMBER_PROPERTY (get_exit_code, "i", int32_t,
                 status->has_exit_code ? status->exit_code : -1)
NUMBER_PROPERTY (get_restart_count, "u", uint32_t, status->restart_count)
NUMBER_PROPERTY (get_next_restart_at, "t", uint64_t, (uint64_t) MAX (status->next_restart_at, 0))
NUMBER_PROPERTY (get_finished_at, "t", uint64_t, (uint64_t) MAX (status->finished_at, 0))
NUMBER_PROPERTY (get_stopped_by_user, "b", int, config->stopped_by_user)
NUMBER_PROPERTY (get_standby_requested, "b", int, config->standby)
STRING_PROPERTY (get_health, machine->health)
NUMBER_PROPERTY (get_health_failing_streak, "u", uint32_t, machine->health_failing_streak)
STRING_PROPERTY (get_agent_version, machine->agent_version)

static int
get_hypervisor (sd_bus *bus, const char *path, const char *interface, const char *property,
                sd_bus_message *reply, void *userdata, sd_bus_error *error)
{
  MvMachine *machine = userdata;
  const char *type = machine->config->spec->hypervisor_type;
  MvRuntimes *runtimes = mv_reconciler_host (machine->reconciler)->runtimes;
  MvRuntime *runtime = type ? NULL : mv_runtimes_find (runtimes, NULL, NULL);

  /* An unnamed type is the host's default; say which one that is. */
  return sd_bus_message_append (reply, "s", type ? type : runtime ? runtime->type : "");
}

static int
get_image (sd_bus *bus, const char *path, const char *interface, const char *property,
           sd_bus_message *reply, void *userdata, sd_bus_error *error)
{
  MvMachine *machine = userdata;
  const MvSpec *spec = machine->config->spec;
  g_autofree char *image = NULL;

  if (!g_str_equal (property, "Image"))
    return sd_bus_message_append (reply, "s", spec->image_digest ? spec->image_digest : "");
  /* Without a signed URL's token, which is a secret. */
  image = spec->image && strstr (spec->image, "://") ? mv_url_strip_query (spec->image)
                                                     : g_strdup (spec->image);
  return sd_bus_message_append (reply, "s", image ? image : "");
}

static int
get_address (sd_bus *bus, const char *path, const char *interface, const char *property,
             sd_bus_message *reply, void *userdata, sd_bus_error *error)
{
  MvMachine *machine = userdata;
  MvNetwork *network = mv_reconciler_host (machine->reconciler)->network;
  const MvSpec *spec = machine->config->spec;
  g_autofree char *address = spec->network_name && network
                             ? network->address_of (network, machine->id, spec) : NULL;

  return sd_bus_message_append (reply, "s", address ? address : "");
}

static int
get_labels (sd_bus *bus, const char *path, const char *interface, const char *property,
            sd_bus_message *reply, void *userdata, sd_bus_error *error)
{
  MvMachine *machine = userdata;
  g_autoptr (GList) keys = g_hash_table_get_keys (machine->config->spec->labels);
  int r;

  keys = g_list_sort (keys, (GCompareFunc) g_strcmp0);
  r = sd_bus_message_open_container (reply, 'a', "{ss}");
  for (GList *l = keys; r >= 0 && l; l = l->next)
    r = sd_bus_message_append (reply, "{ss}", l->data,
                               g_hash_table_lookup (machine->config->spec->labels, l->data));
  if (r < 0)
    return r;
  return sd_bus_message_close_container (reply);
}

static int
get_spec (sd_bus *bus, const char *path, const char *interface, const char *property,
          sd_bus_message *reply, void *userdata, sd_bus_error *error)
{
  MvMachine *machine = userdata;
  g_autofree char *json = mv_spec_to_json (machine->config->spec, FALSE);

  return sd_bus_message_append (reply, "s", json);
}

/* ---- methods ---- */


typedef struct {
  MvBusService *service;
  char         *id;
  MvMachineAction action;
} PendingCall;

static void
pending_call_free (PendingCall *pending)
{
  g_free (pending->id);
  g_free (pending);
}

static void
on_authorized (sd_bus_message *call, gboolean root, gpointer user_data)
{
  PendingCall *pending = user_data;
  MvMachine *machine = mv_reconciler_lookup (mv_bus_service_reconciler (pending->service),
                                             pending->id);

  /* The machine may have gone while the caller was being authorized. */
  if (!machine)
    {
      sd_bus_reply_method_errorf (call, MV_BUS_ERROR_NOT_FOUND, "Machine %s was deleted",
                                  pending->id);
      return;
    }
  pending->action (machine, call, root);
}

static int
authorize (MvMachine *machine, sd_bus_message *call, const char *action_id, const char *verb,
           MvMachineAction action)
{
  PendingCall *pending = g_new0 (PendingCall, 1);
  MvMachineView *view = machine->view;
  const char *details[] = {
    "machine", machine->config->spec->name,
    "machine_id", machine->id,
    "verb", verb,
    NULL,
  };

  pending->service = view->service;
  pending->id = g_strdup (machine->id);
  pending->action = action;
  mv_polkit_check (call, action_id, details, on_authorized, pending,
                   (GDestroyNotify) pending_call_free);
  return 1;
}

/* A lifecycle request taken while the one before it is being written:
 * it is taken once that one is on disk. */
typedef struct {
  sd_bus_message *call;
  gboolean        root;
  MvRequest       request;
} HeldRequest;

void
mv_machine_held_request_free (gpointer data)
{
  HeldRequest *held = data;

  sd_bus_message_unref (held->call);
  g_free (held);
}

void
mv_machine_held_requests_gone (MvMachineView *view)
{
  HeldRequest *held;

  while ((held = g_queue_pop_head (&view->held_requests)))
    {
      sd_bus_reply_method_errorf (held->call, MV_BUS_ERROR_NOT_FOUND, "Machine %s was deleted",
                                  view->machine->id);
      mv_machine_held_request_free (held);
    }
}

static void take_request (MvMachine *machine, sd_bus_message *call, gboolean root,
                          MvRequest request);

/* Takes the calls held for @machine, in order, until one of them has a
 * write in flight again. */
static void
take_held_requests (MvMachine *machine)
{
  MvMachineView *view = machine->view;
  HeldRequest *held;

  while (machine->config_writes == 0 && (held = g_queue_pop_head (&view->held_requests)))
    {
      take_request (machine, held->call, held->root, held->request);
      mv_machine_held_request_free (held);
    }
}

typedef struct {
  sd_bus_message *call;
  gboolean        root;
} RequestCall;

static void
on_request_recorded (MvMachine *machine, const GError *error, gpointer data)
{
  RequestCall *rc = data;

  if (error)
    mv_bus_reply_gerror (rc->call, error);
  else
    mv_bus_wait (machine->view, rc->call, MV_REPLY_EMPTY, rc->root);
  sd_bus_message_unref (rc->call);
  g_free (rc);
  if (machine)
    take_held_requests (machine);
}

static void
take_request (MvMachine *machine, sd_bus_message *call, gboolean root, MvRequest request)
{
  g_autoptr (GError) error = NULL;
  RequestCall *rc = g_new0 (RequestCall, 1);

  rc->call = sd_bus_message_ref (call);
  rc->root = root;
  if (!mv_reconciler_request_async (machine->reconciler, machine, request, on_request_recorded,
                                    rc, &error))
    {
      sd_bus_message_unref (rc->call);
      g_free (rc);
      mv_bus_reply_gerror (call, error);
    }
}

/* Asks the reconciler and waits for the outcome; after the call before
 * it, if that one's change is still being written. */
static void
request_and_wait (MvMachine *machine, sd_bus_message *call, gboolean root, MvRequest request)
{
  MvMachineView *view = machine->view;
  HeldRequest *held;

  if (machine->config_writes == 0 && g_queue_is_empty (&view->held_requests))
    {
      take_request (machine, call, root, request);
      return;
    }
  held = g_new0 (HeldRequest, 1);
  held->call = sd_bus_message_ref (call);
  held->root = root;
  held->request = request;
  g_queue_push_tail (&view->held_requests, held);
}

#define REQUEST_ACTION(fn, request)                                           \
  static void fn (MvMachine *machine, sd_bus_message *call, gboolean root)   \
  {                                                                           \
    request_and_wait (machine, call, root, request);                          \
  }

REQUEST_ACTION (do_start, MV_REQUEST_START)
REQUEST_ACTION (do_stop, MV_REQUEST_STOP)
REQUEST_ACTION (do_pause, MV_REQUEST_PAUSE)
REQUEST_ACTION (do_resume, MV_REQUEST_RESUME)
REQUEST_ACTION (do_restart, MV_REQUEST_RESTART)
REQUEST_ACTION (do_standby, MV_REQUEST_STANDBY)
REQUEST_ACTION (do_delete, MV_REQUEST_DELETE)
REQUEST_ACTION (do_force_delete, MV_REQUEST_FORCE_DELETE)

#define LIFECYCLE_METHOD(fn, verb, action)                                          \
  static int fn (sd_bus_message *m, void *userdata, sd_bus_error *error)            \
  {                                                                                  \
    return authorize (userdata, m, MV_ACTION_MACHINE_LIFECYCLE, verb, action);       \
  }

LIFECYCLE_METHOD (method_start, "start", do_start)
LIFECYCLE_METHOD (method_stop, "stop", do_stop)
LIFECYCLE_METHOD (method_pause, "pause", do_pause)
LIFECYCLE_METHOD (method_resume, "resume", do_resume)
LIFECYCLE_METHOD (method_standby, "standby", do_standby)
LIFECYCLE_METHOD (method_restart, "restart", do_restart)

static int
method_delete (sd_bus_message *m, void *userdata, sd_bus_error *error)
{
  MvMachine *machine = userdata;
  int force = 0;
  int r = sd_bus_message_read (m, "b", &force);

  if (r < 0)
    return r;
  /* The action asked for follows the state now; the request made once the
   * caller is authorized is only as strong as that action, and checks the
   * state again. */
  if (mv_machine_is_active (machine))
    {
      if (!force)
        return sd_bus_error_setf (error, MV_BUS_ERROR_INVALID_STATE,
                                  "Machine %s is %s: stop it first, or delete with force",
                                  machine->config->spec->name,
                                  mv_state_to_string (machine->status->state));
      return authorize (machine, m, MV_ACTION_MACHINE_FORCE, "delete", do_force_delete);
    }
  return authorize (machine, m, MV_ACTION_MACHINE_DELETE, "delete", do_delete);
}

static void
on_updated (MvMachine *machine, const GError *error, gpointer data)
{
  sd_bus_message *call = data;

  if (error)
    mv_bus_reply_gerror (call, error);
  else
    sd_bus_reply_method_return (call, NULL);
  if (machine)
    mv_reconciler_kick (machine);
  sd_bus_message_unref (call);
}

/* Update: the spec arrives as an argument, so it is parsed after the
 * caller is authorized, from the message itself. */
static void
do_update (MvMachine *machine, sd_bus_message *call, gboolean root)
{
  const char *json = NULL;
  g_autoptr (GError) error = NULL;
  MvSpec *spec;

  sd_bus_message_rewind (call, TRUE);
  if (sd_bus_message_read (call, "s", &json) < 0)
    {
      sd_bus_reply_method_errorf (call, SD_BUS_ERROR_INVALID_ARGS, "Expected a spec document");
      return;
    }
  spec = mv_spec_from_json (json, &error);
  if (!spec || !mv_reconciler_update (machine->reconciler, machine, spec, on_updated,
                                      sd_bus_message_ref (call), &error))
    {
      mv_bus_reply_gerror (call, error);
      /* Refused at once: the reference taken for on_updated() is not. */
      if (spec)
        sd_bus_message_unref (call);
    }
}

static int
method_update (sd_bus_message *m, void *userdata, sd_bus_error *error)
{
  const char *json = NULL;
  g_autoptr (GError) local = NULL;
  int r = sd_bus_message_read (m, "s", &json);

  if (r < 0)
    return r;
  /* Refused on its size before anyone is asked; read once authorized. */
  if (!mv_spec_json_check_size (json, &local))
    return mv_bus_error_from_gerror (error, local);
  sd_bus_message_rewind (m, TRUE);
  return authorize (userdata, m, MV_ACTION_MACHINE_MODIFY, "update", do_update);
}

static void
do_rename (MvMachine *machine, sd_bus_message *call, gboolean root)
{
  const char *name = NULL;
  g_autoptr (GError) error = NULL;

  sd_bus_message_rewind (call, TRUE);
  if (sd_bus_message_read (call, "s", &name) < 0)
    {
      sd_bus_reply_method_errorf (call, SD_BUS_ERROR_INVALID_ARGS, "Expected a name");
      return;
    }
  if (!mv_reconciler_rename (machine->reconciler, machine, name, &error))
    mv_bus_reply_gerror (call, error);
  else
    sd_bus_reply_method_return (call, NULL);
}

static int
method_rename (sd_bus_message *m, void *userdata, sd_bus_error *error)
{
  return authorize (userdata, m, MV_ACTION_MACHINE_MODIFY, "rename", do_rename);
}

static void
do_set_desired (MvMachine *machine, sd_bus_message *call, gboolean root)
{
  const char *value = NULL;
  g_autoptr (GError) error = NULL;
  MvDesired desired = MV_DESIRED_COUNT;

  sd_bus_message_rewind (call, TRUE);
  if (sd_bus_message_read (call, "s", &value) < 0 || !mv_desired_from_string (value, &desired) ||
      desired == MV_DESIRED_DESTROYED)
    {
      sd_bus_reply_method_errorf (call, MV_BUS_ERROR_INVALID_ARGUMENT,
                                  "state: '%s' is not one of running, paused, stopped (use Delete to destroy)",
                                  value ? value : "");
      return;
    }
  if (!mv_reconciler_set_desired (machine->reconciler, machine, desired, &error))
    {
      mv_bus_reply_gerror (call, error);
      return;
    }
  sd_bus_reply_method_return (call, NULL);
  mv_reconciler_kick (machine);
}

#define CONSOLE_TAIL_LINES_MAX 10000

static void
do_get_console_log (MvMachine *machine, sd_bus_message *call, gboolean root)
{
  uint32_t lines = 0;
  g_autofree char *dir = NULL, *path = NULL, *text = NULL;

  sd_bus_message_rewind (call, TRUE);
  if (sd_bus_message_read (call, "u", &lines) < 0 || lines == 0 || lines > CONSOLE_TAIL_LINES_MAX)
    {
      sd_bus_reply_method_errorf (call, MV_BUS_ERROR_INVALID_ARGUMENT,
                                  "tail_lines: %u is not from 1 to %u", lines,
                                  CONSOLE_TAIL_LINES_MAX);
      return;
    }
  MvRecords *records = mv_reconciler_host (machine->reconciler)->records;
  dir = records->runtime_dir (records, machine->id);
  path = g_build_filename (dir, MV_CONSOLE_LOG_NAME, NULL);
  text = mv_file_tail (path, 0, lines);
  sd_bus_reply_method_return (call, "s", text);
}

static int
method_get_console_log (sd_bus_message *m, void *userdata, sd_bus_error *error)
{
  return authorize (userdata, m, MV_ACTION_MACHINE_CONSOLE, "read-console", do_get_console_log);
}

static void
on_resized (MvMachine *machine, const GError *error, gpointer user_data)
{
  g_autoptr (sd_bus_message) call = user_data;

  if (error)
    mv_bus_reply_gerror (call, error);
  else
    sd_bus_reply_method_return (call, NULL);
}

static void
do_resize (MvMachine *machine, sd_bus_message *call, gboolean root)
{
  g_autoptr (GError) error = NULL;
  uint32_t vcpus = 0;
  uint64_t memory_bytes = 0;

  sd_bus_message_rewind (call, TRUE);
  if (sd_bus_message_read (call, "ut", &vcpus, &memory_bytes) < 0)
    {
      sd_bus_reply_method_errorf (call, SD_BUS_ERROR_INVALID_ARGS, "Expected vCPUs and memory");
      return;
    }
  if (!mv_reconciler_resize (machine->reconciler, machine, vcpus, memory_bytes, on_resized,
                             sd_bus_message_ref (call), &error))
    {
      mv_bus_reply_gerror (call, error);
      sd_bus_message_unref (call);
    }
}

static int
method_resize (sd_bus_message *m, void *userdata, sd_bus_error *error)
{
  return authorize (userdata, m, MV_ACTION_MACHINE_MODIFY, "resize", do_resize);
}

static void
on_console_opened (int fd, gboolean writer, const GError *error, gpointer user_data)
{
  g_autoptr (sd_bus_message) call = user_data;

  if (fd < 0)
    {
      mv_bus_reply_gerror (call, error);
      return;
    }
  g_info ("%s attached to a console%s", sd_bus_message_get_sender (call),
          writer ? "" : " read-only: another client holds its input");
  /* sd-bus sends a duplicate: ours is closed either way. */
  sd_bus_reply_method_return (call, "h", fd);
  close (fd);
}

static void
do_open_console (MvMachine *machine, sd_bus_message *call, gboolean root)
{
  g_autoptr (GError) error = NULL;

  if (!mv_reconciler_open_console (machine, on_console_opened, sd_bus_message_ref (call),
                                   &error))
    {
      mv_bus_reply_gerror (call, error);
      sd_bus_message_unref (call);
    }
}

static int
method_open_console (sd_bus_message *m, void *userdata, sd_bus_error *error)
{
  return authorize (userdata, m, MV_ACTION_MACHINE_CONSOLE, "console", do_open_console);
}

static void
do_request_console (MvMachine *machine, sd_bus_message *call, gboolean root)
{
  sd_bus_creds *creds = NULL;
  g_autoptr (GError) error = NULL;
  g_autofree char *token = NULL;
  const char *mode = NULL;
  int r;
  MvConsoleMode which;
  gint64 expires_at = 0;
  uid_t uid = 0;

  sd_bus_message_rewind (call, TRUE);
  if (sd_bus_message_read (call, "s", &mode) < 0)
    {
      sd_bus_reply_method_errorf (call, SD_BUS_ERROR_INVALID_ARGS, "Expected a mode");
      return;
    }
  if (g_strcmp0 (mode, "serial") == 0)
    which = MV_CONSOLE_SERIAL;
  else if (g_strcmp0 (mode, "login") == 0)
    which = MV_CONSOLE_LOGIN;
  else
    {
      sd_bus_reply_method_errorf (call, MV_BUS_ERROR_INVALID_ARGUMENT,
                                  "mode: '%.64s' is not one of serial, login", mode);
      return;
    }
  /* Tokens are counted per caller: its UID, as the bus knows it. */
  r = sd_bus_query_sender_creds (call, SD_BUS_CREDS_EUID, &creds);
  if (r >= 0)
    r = sd_bus_creds_get_euid (creds, &uid);
  sd_bus_creds_unref (creds);
  if (r < 0)
    {
      sd_bus_reply_method_errorf (call, MV_BUS_ERROR_FAILED, "The caller's UID is not known");
      return;
    }
  if (!mv_reconciler_request_console (machine, which, (guint32) uid, &token, &expires_at, &error))
    mv_bus_reply_gerror (call, error);
  else
    sd_bus_reply_method_return (call, "st", token, (guint64) expires_at);
}

static int
method_request_console (sd_bus_message *m, void *userdata, sd_bus_error *error)
{
  return authorize (userdata, m, MV_ACTION_MACHINE_CONSOLE, "console", do_request_console);
}

static void
do_get_spec (MvMachine *machine, sd_bus_message *call, gboolean root)
{
  g_autofree char *json = mv_spec_to_json (machine->config->spec, TRUE);

  sd_bus_reply_method_return (call, "s", json);
}

static int
method_stream_logs (sd_bus_message *m, void *userdata, sd_bus_error *error)
{
  return mv_machine_method_stream_logs (m, userdata, authorize, error);
}

static int
method_get_spec (sd_bus_message *m, void *userdata, sd_bus_error *error)
{
  return authorize (userdata, m, MV_ACTION_MACHINE_READ_SECRETS, "read-secrets", do_get_spec);
}

static int
method_exec (sd_bus_message *m, void *userdata, sd_bus_error *error)
{
  return mv_machine_method_exec (m, userdata, authorize, error);
}

static int
method_wait (sd_bus_message *m, void *userdata, sd_bus_error *error)
{
  return mv_machine_method_wait (m, userdata, error);
}

static int
method_get_stats (sd_bus_message *m, void *userdata, sd_bus_error *error)
{
  return mv_machine_method_get_stats (m, userdata, error);
}

static int
method_get_metrics (sd_bus_message *m, void *userdata, sd_bus_error *error)
{
  return mv_machine_method_get_metrics (m, userdata, error);
}

static int
method_set_desired_state (sd_bus_message *m, void *userdata, sd_bus_error *error)
{
  return authorize (userdata, m, MV_ACTION_MACHINE_LIFECYCLE, "set-desired-state",
                    do_set_desired);
}

static const sd_bus_vtable machine_vtable[] = {
  SD_BUS_VTABLE_START (0),
  SD_BUS_PROPERTY ("Id", "s", get_id, 0, SD_BUS_VTABLE_PROPERTY_CONST),
  SD_BUS_PROPERTY ("Name", "s", get_name, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
  SD_BUS_PROPERTY ("State", "s", get_state, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
  SD_BUS_PROPERTY ("StateError", "s", get_state_error, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
  SD_BUS_PROPERTY ("DesiredState", "s", get_desired_state, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
  SD_BUS_PROPERTY ("DesiredGeneration", "t", get_desired_generation, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
  SD_BUS_PROPERTY ("ObservedGeneration", "t", get_observed_generation, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
  SD_BUS_PROPERTY ("SpecificationGeneration", "t", get_specification_generation, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
  SD_BUS_PROPERTY ("RestartGeneration", "t", get_restart_generation, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
  SD_BUS_PROPERTY ("Hypervisor", "s", get_hypervisor, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
  SD_BUS_PROPERTY ("VCPUs", "u", get_vcpus, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
  SD_BUS_PROPERTY ("CpuMillicores", "u", get_cpu_millicores, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
  SD_BUS_PROPERTY ("MemoryBytes", "t", get_memory_bytes, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
  SD_BUS_PROPERTY ("Labels", "a{ss}", get_labels, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
  SD_BUS_PROPERTY ("Image", "s", get_image, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
  SD_BUS_PROPERTY ("ImageDigest", "s", get_image, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
  SD_BUS_PROPERTY ("Address", "s", get_address, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
  SD_BUS_PROPERTY ("Phase", "s", get_phase, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
  SD_BUS_PROPERTY ("OperationId", "s", get_operation_id, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
  SD_BUS_PROPERTY ("StartedAt", "t", get_started_at, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
  SD_BUS_PROPERTY ("StartedFrom", "s", get_started_from, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
  SD_BUS_PROPERTY ("CreatedAt", "t", get_created_at, 0, SD_BUS_VTABLE_PROPERTY_CONST),
  SD_BUS_PROPERTY ("UpdatedAt", "t", get_updated_at, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
  SD_BUS_PROPERTY ("ExitCode", "i", get_exit_code, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
  SD_BUS_PROPERTY ("RestartCount", "u", get_restart_count, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
  SD_BUS_PROPERTY ("NextRestartAt", "t", get_next_restart_at, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
  SD_BUS_PROPERTY ("FinishedAt", "t", get_finished_at, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
  SD_BUS_PROPERTY ("StoppedByUser", "b", get_stopped_by_user, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
  SD_BUS_PROPERTY ("StandbyRequested", "b", get_standby_requested, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
  SD_BUS_PROPERTY ("Health", "s", get_health, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
  SD_BUS_PROPERTY ("HealthFailingStreak", "u", get_health_failing_streak, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
  SD_BUS_PROPERTY ("AgentVersion", "s", get_agent_version, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
  /* Explicit: left out of GetAll and GetManagedObjects, which would
   * otherwise carry every machine's whole spec in one message; a change
   * invalidates it rather than sending it. */
  SD_BUS_PROPERTY ("Spec", "s", get_spec, 0,
                   SD_BUS_VTABLE_PROPERTY_EMITS_INVALIDATION | SD_BUS_VTABLE_PROPERTY_EXPLICIT |
                   SD_BUS_VTABLE_SENSITIVE),
  SD_BUS_METHOD_WITH_ARGS ("Start", SD_BUS_NO_ARGS, SD_BUS_NO_RESULT, method_start,
                           SD_BUS_VTABLE_UNPRIVILEGED),
  SD_BUS_METHOD_WITH_ARGS ("Stop", SD_BUS_NO_ARGS, SD_BUS_NO_RESULT, method_stop,
                           SD_BUS_VTABLE_UNPRIVILEGED),
  SD_BUS_METHOD_WITH_ARGS ("Pause", SD_BUS_NO_ARGS, SD_BUS_NO_RESULT, method_pause,
                           SD_BUS_VTABLE_UNPRIVILEGED),
  SD_BUS_METHOD_WITH_ARGS ("Resume", SD_BUS_NO_ARGS, SD_BUS_NO_RESULT, method_resume,
                           SD_BUS_VTABLE_UNPRIVILEGED),
  SD_BUS_METHOD_WITH_ARGS ("Restart", SD_BUS_NO_ARGS, SD_BUS_NO_RESULT, method_restart,
                           SD_BUS_VTABLE_UNPRIVILEGED),
  SD_BUS_METHOD_WITH_ARGS ("Standby", SD_BUS_NO_ARGS, SD_BUS_NO_RESULT, method_standby,
                           SD_BUS_VTABLE_UNPRIVILEGED),
  SD_BUS_METHOD_WITH_ARGS ("CreateSnapshot", SD_BUS_ARGS ("s", name),
                           SD_BUS_RESULT ("o", snapshot), mv_snapshot_method_create,
                           SD_BUS_VTABLE_UNPRIVILEGED),
  SD_BUS_METHOD_WITH_ARGS ("Delete", SD_BUS_ARGS ("b", force), SD_BUS_NO_RESULT,
                           method_delete, SD_BUS_VTABLE_UNPRIVILEGED),
  SD_BUS_METHOD_WITH_ARGS ("Update", SD_BUS_ARGS ("s", spec_json), SD_BUS_NO_RESULT,
                           method_update, SD_BUS_VTABLE_UNPRIVILEGED),
  SD_BUS_METHOD_WITH_ARGS ("Rename", SD_BUS_ARGS ("s", name), SD_BUS_NO_RESULT,
                           method_rename, SD_BUS_VTABLE_UNPRIVILEGED),
  SD_BUS_METHOD_WITH_ARGS ("SetDesiredState", SD_BUS_ARGS ("s", state), SD_BUS_NO_RESULT,
                           method_set_desired_state, SD_BUS_VTABLE_UNPRIVILEGED),
  SD_BUS_METHOD_WITH_ARGS ("GetConsoleLog", SD_BUS_ARGS ("u", tail_lines),
                           SD_BUS_RESULT ("s", text), method_get_console_log,
                           SD_BUS_VTABLE_UNPRIVILEGED),
  SD_BUS_METHOD_WITH_ARGS ("Resize", SD_BUS_ARGS ("u", vcpus, "t", memory_bytes),
                           SD_BUS_NO_RESULT, method_resize, SD_BUS_VTABLE_UNPRIVILEGED),
  SD_BUS_METHOD_WITH_ARGS ("OpenConsole", SD_BUS_NO_ARGS, SD_BUS_RESULT ("h", console),
                           method_open_console, SD_BUS_VTABLE_UNPRIVILEGED),
  SD_BUS_METHOD_WITH_ARGS ("RequestConsole", SD_BUS_ARGS ("s", mode),
                           SD_BUS_RESULT ("s", token, "t", expires_at), method_request_console,
                           SD_BUS_VTABLE_UNPRIVILEGED | SD_BUS_VTABLE_SENSITIVE),
  SD_BUS_METHOD_WITH_ARGS ("StreamLogs", SD_BUS_ARGS ("s", source, "u", tail_lines, "b", follow),
                           SD_BUS_RESULT ("h", log), method_stream_logs,
                           SD_BUS_VTABLE_UNPRIVILEGED),
  SD_BUS_METHOD_WITH_ARGS ("GetSpec", SD_BUS_NO_ARGS, SD_BUS_RESULT ("s", spec_json),
                           method_get_spec, SD_BUS_VTABLE_UNPRIVILEGED | SD_BUS_VTABLE_SENSITIVE),
  SD_BUS_METHOD_WITH_ARGS ("Exec", SD_BUS_ARGS ("as", argv, "a{ss}", env, "a{sv}", options),
                           SD_BUS_RESULT ("h", stdin, "h", stdout, "h", stderr, "h", status),
                           method_exec, SD_BUS_VTABLE_UNPRIVILEGED),
  SD_BUS_METHOD_WITH_ARGS ("Wait", SD_BUS_ARGS ("s", condition, "a{sv}", options),
                           SD_BUS_RESULT ("a{sv}", result), method_wait,
                           SD_BUS_VTABLE_UNPRIVILEGED),
  SD_BUS_METHOD_WITH_ARGS ("GetStats", SD_BUS_NO_ARGS, SD_BUS_RESULT ("a{sv}", stats),
                           method_get_stats, SD_BUS_VTABLE_UNPRIVILEGED),
  SD_BUS_METHOD_WITH_ARGS ("GetMetrics", SD_BUS_ARGS ("t", since, "t", until),
                           SD_BUS_RESULT ("a(ta{sv})", samples), method_get_metrics,
                           SD_BUS_VTABLE_UNPRIVILEGED),
  SD_BUS_SIGNAL_WITH_ARGS ("StateChanged", SD_BUS_ARGS ("s", state, "s", previous, "s", error), 0),
  SD_BUS_VTABLE_END
};

int
mv_machine_object_register (MvBusService *service)
{
  sd_bus *bus = mv_bus_service_bus (service);
  int r = sd_bus_add_fallback_vtable (bus, NULL, MV_MACHINE_PREFIX, MV_MACHINE_IFACE,
                                      machine_vtable, machine_find, service);
  if (r >= 0)
    r = sd_bus_add_node_enumerator (bus, NULL, MV_MACHINE_PREFIX, machine_enumerate, service);
  return r;
}

static const struct {
  guint bit;
  const char *names[9];     /* NULL-terminated */
} prop_names[] = {
  { MV_PROP_NAME, { "Name" } },
  /* A machine is given its address as it starts. */
  { MV_PROP_STATE, { "State", "Address" } },
  { MV_PROP_STATE_ERROR, { "StateError" } },
  { MV_PROP_DESIRED_STATE, { "DesiredState", "StoppedByUser", "StandbyRequested" } },
  { MV_PROP_DESIRED_GENERATION, { "DesiredGeneration" } },
  { MV_PROP_OBSERVED_GENERATION, { "ObservedGeneration" } },
  { MV_PROP_SPECIFICATION_GENERATION, { "SpecificationGeneration" } },
  { MV_PROP_RESTART_GENERATION, { "RestartGeneration" } },
  { MV_PROP_SPEC, { "Spec", "Hypervisor", "VCPUs", "CpuMillicores", "MemoryBytes", "Labels",
                    "Image", "ImageDigest" } },
  { MV_PROP_PHASE, { "Phase", "OperationId" } },
  { MV_PROP_STARTED_AT, { "StartedAt", "StartedFrom" } },
  { MV_PROP_UPDATED_AT, { "UpdatedAt" } },
  { MV_PROP_EXIT_CODE, { "ExitCode", "FinishedAt" } },
  { MV_PROP_RESTART_COUNT, { "RestartCount", "NextRestartAt" } },
  { MV_PROP_GUEST, { "Health", "HealthFailingStreak", "AgentVersion" } },
};

/* What announcing a property needs: its vtable entry, found by name. */
static const sd_bus_vtable *
find_property (const char *name)
{
  for (const sd_bus_vtable *v = machine_vtable; v->type != _SD_BUS_VTABLE_END; v++)
    if (v->type == _SD_BUS_VTABLE_PROPERTY && g_str_equal (v->x.property.member, name))
      return v;
  return NULL;
}

/* find_property() of prop_names[@group].names[@j], looked up once. */
static const sd_bus_vtable *
group_property (gsize group, guint j)
{
  static const sd_bus_vtable *found[G_N_ELEMENTS (prop_names)][G_N_ELEMENTS (prop_names[0].names)];

  if (found[group][j] == NULL)
    found[group][j] = find_property (prop_names[group].names[j]);
  return found[group][j];
}

static gboolean
is_announced (const sd_bus_vtable *v)
{
  return v->flags & (SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE | SD_BUS_VTABLE_PROPERTY_EMITS_INVALIDATION);
}

static gsize
basic_size (char type)
{
  switch (type)
    {
    case SD_BUS_TYPE_BYTE:
      return 1;
    case SD_BUS_TYPE_INT16: case SD_BUS_TYPE_UINT16:
      return 2;
    case SD_BUS_TYPE_INT32: case SD_BUS_TYPE_UINT32: case SD_BUS_TYPE_BOOLEAN:
    case SD_BUS_TYPE_UNIX_FD:
      return 4;
    case SD_BUS_TYPE_INT64: case SD_BUS_TYPE_UINT64: case SD_BUS_TYPE_DOUBLE:
      return 8;
    default:
      return 0;   /* strings, or a container */
    }
}

/* Appends @type and the basic value of that type read from @m to @out;
 * 1 once done, 0 if @type is not a basic type, or an error. */
static int
serialize_basic (sd_bus_message *m, char type, GByteArray *out)
{
  int r;

  if (type == SD_BUS_TYPE_STRING || type == SD_BUS_TYPE_OBJECT_PATH || type == SD_BUS_TYPE_SIGNATURE)
    {
      const char *text = NULL;
      guint32 length;

      r = sd_bus_message_read_basic (m, type, &text);
      if (r < 0)
        return r;
      length = strlen (text);
      g_byte_array_append (out, (const guint8 *) &type, 1);
      g_byte_array_append (out, (const guint8 *) &length, sizeof length);
      g_byte_array_append (out, (const guint8 *) text, length);
      return 1;
    }
  if (basic_size (type) > 0)
    {
      guint64 value = 0;

      r = sd_bus_message_read_basic (m, type, &value);
      if (r < 0)
        return r;
      g_byte_array_append (out, (const guint8 *) &type, 1);
      g_byte_array_append (out, (const guint8 *) &value, basic_size (type));
      return 1;
    }
  return 0;
}

/* Appends one complete value read from @m to @out in a form where two
 * values are equal exactly when their bytes are. */
static int
serialize_value (sd_bus_message *m, GByteArray *out)
{
  const char *contents = NULL;
  char type;
  int r;

  r = sd_bus_message_peek_type (m, &type, &contents);
  if (r <= 0)
    return r < 0 ? r : -EBADMSG;
  r = serialize_basic (m, type, out);
  if (r != 0)
    return r < 0 ? r : 0;

  /* A container: its type and signature, then its elements, then an end
   * mark. */
  g_byte_array_append (out, (const guint8 *) &type, 1);
  g_byte_array_append (out, (const guint8 *) contents, strlen (contents) + 1);
  r = sd_bus_message_enter_container (m, type, contents);
  if (r < 0)
    return r;
  while ((r = sd_bus_message_at_end (m, FALSE)) == 0)
    {
      r = serialize_value (m, out);
      if (r < 0)
        return r;
    }
  if (r < 0)
    return r;
  g_byte_array_append (out, (const guint8 *) ")", 1);
  return sd_bus_message_exit_container (m);
}

/* Reads the next value, of the complete type @signature, from @m into
 * @out as serialize_value() does; a basic one without asking @m its type. */
static int
serialize_typed (sd_bus_message *m, const char *signature, GByteArray *out)
{
  int r = signature[1] == '\0' ? serialize_basic (m, signature[0], out) : 0;

  if (r != 0)
    return r < 0 ? r : 0;
  return serialize_value (m, out);
}

/* The values of the properties @props (their vtable entries, NULL for
 * one not found) of @view's machine as their getters put them on the bus,
 * serialized, one GBytes each; all NULL if a getter failed, and each then
 * counts as changed. The getters write one after another into one
 * message, which is read back by the types their entries declare. */
static GPtrArray *
serialize_properties (MvMachineView *view, const sd_bus_vtable *const *props, guint n)
{
  sd_bus *bus = mv_bus_service_bus (view->service);
  GPtrArray *values = g_ptr_array_new_with_free_func ((GDestroyNotify) g_bytes_unref);
  g_autoptr (sd_bus_message) m = NULL;
  g_autoptr (GByteArray) bytes = g_byte_array_sized_new (512);
  const sd_bus_vtable *const *found = props;
  int r;

  r = sd_bus_message_new_signal (bus, &m, view->path, MV_MACHINE_IFACE, "Values");
  for (guint i = 0; r >= 0 && i < n; i++)
    {
      sd_bus_error error = SD_BUS_ERROR_NULL;

      if (found[i] == NULL)
        continue;
      r = found[i]->x.property.get (bus, view->path, MV_MACHINE_IFACE,
                                    found[i]->x.property.member, m, view->machine, &error);
      sd_bus_error_free (&error);
    }
  if (r >= 0)
    r = sd_bus_message_seal (m, 1, 0);
  if (r >= 0)
    r = sd_bus_message_rewind (m, TRUE);

  for (guint i = 0; i < n; i++)
    {
      if (r >= 0 && found[i] != NULL)
        {
          g_byte_array_set_size (bytes, 0);
          r = serialize_typed (m, found[i]->x.property.signature, bytes);
        }
      if (r >= 0 && found[i] != NULL)
        g_ptr_array_add (values, g_bytes_new (bytes->data, bytes->len));
      else
        g_ptr_array_add (values, NULL);
    }
  /* A value read wrong puts every later one in doubt. */
  if (r < 0)
    for (guint i = 0; i < n; i++)
      g_clear_pointer (&values->pdata[i], g_bytes_unref);
  return values;
}

void
mv_machine_object_remember (MvMachineView *view)
{
  g_autoptr (GPtrArray) props = g_ptr_array_new ();
  g_autoptr (GPtrArray) values = NULL;

  for (const sd_bus_vtable *v = machine_vtable; v->type != _SD_BUS_VTABLE_END; v++)
    if (v->type == _SD_BUS_VTABLE_PROPERTY && is_announced (v))
      g_ptr_array_add (props, (gpointer) v);

  values = serialize_properties (view, (const sd_bus_vtable *const *) props->pdata, props->len);
  g_clear_pointer (&view->announced_values, g_hash_table_unref);
  view->announced_values = g_hash_table_new_full (g_str_hash, g_str_equal, NULL,
                                                  (GDestroyNotify) g_bytes_unref);
  for (guint i = 0; i < values->len; i++)
    if (values->pdata[i] != NULL)
      g_hash_table_insert (view->announced_values,
                           (gpointer) ((const sd_bus_vtable *) props->pdata[i])->x.property.member,
                           g_bytes_ref (values->pdata[i]));
}

void
mv_machine_object_flush (MvMachineView *view)
{
  MvMachine *machine = view->machine;
  sd_bus *bus = mv_bus_service_bus (view->service);
  g_autoptr (GPtrArray) dirty = g_ptr_array_new ();
  g_autoptr (GPtrArray) props = g_ptr_array_new ();
  g_autoptr (GPtrArray) changed = g_ptr_array_new ();
  g_autoptr (GPtrArray) values = NULL;
  MvState state = machine->status->state;

  if (view->dirty == 0 || !view->announced)
    {
      view->dirty = 0;
      return;
    }
  for (gsize i = 0; i < G_N_ELEMENTS (prop_names); i++)
    if (view->dirty & prop_names[i].bit)
      for (guint j = 0; prop_names[i].names[j]; j++)
        {
          g_ptr_array_add (dirty, (gpointer) prop_names[i].names[j]);
          g_ptr_array_add (props, (gpointer) group_property (i, j));
        }
  view->dirty = 0;

  /* A change may touch a group and leave most of its values as they were
   * (a Stop of a stopped machine, an Update that repeats the spec): only
   * what differs from the last announcement goes out. */
  if (view->announced_values == NULL)
    view->announced_values = g_hash_table_new_full (g_str_hash, g_str_equal, NULL,
                                                    (GDestroyNotify) g_bytes_unref);
  values = serialize_properties (view, (const sd_bus_vtable *const *) props->pdata, props->len);
  for (guint i = 0; i < values->len; i++)
    {
      const char *name = dirty->pdata[i];
      GBytes *value = values->pdata[i];
      GBytes *before = g_hash_table_lookup (view->announced_values, name);

      if (value != NULL && before != NULL && g_bytes_equal (value, before))
        continue;
      g_ptr_array_add (changed, (gpointer) name);
      if (value != NULL)
        g_hash_table_insert (view->announced_values, (gpointer) name, g_bytes_ref (value));
      else
        g_hash_table_remove (view->announced_values, name);
    }
  g_ptr_array_add (changed, NULL);

  if (changed->len > 1)
    sd_bus_emit_properties_changed_strv (bus, view->path, MV_MACHINE_IFACE,
                                         (char **) changed->pdata);
  if (state != view->announced_state)
    {
      sd_bus_emit_signal (bus, view->path, MV_MACHINE_IFACE, "StateChanged", "sss",
                          mv_state_to_string (state), mv_state_to_string (view->announced_state),
                          machine->status->state_error ? machine->status->state_error : "");
      view->announced_state = state;
    }
}
