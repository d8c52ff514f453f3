/* The daemon's bus methods, called as root would call them, with
 * arguments from the fuzzer. The daemon's own pieces run in this process
 * as microvmd-test wires them (records in a scratch directory, the test
 * runtime as the only hypervisor, the reconciler, the bus service) and
 * serve one end of a socket pair; the other end is the caller, and also
 * answers what the daemon asks the bus driver (the caller's uid is 0, so
 * polkit is never asked).
 *
 * The input is a list of calls, each [op][length][argument bytes]: the
 * op's low bits pick the method (methods[] below), its high bit sends the
 * next call without waiting for this one's answer. Within the arguments
 * a first byte picks the machine (one of those there are, or none that
 * exists) where the method needs one. Afterwards every machine is deleted
 * with force, through the bus too, and by then every call must have been
 * answered and every machine be gone. */
#include "fuzz-common.h"
#include "bus/service.h"
#include "names.h"
#include "storage/storage.h"
#include "store/store.h"
#include "test-runtime.h"
#include "util/files.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_CALLS        16
#define CALL_TIMEOUT_US  (30 * G_USEC_PER_SEC)
/* Long enough for the test runtime; calls still waiting then (a restart
 * policy retrying) are answered by the deletes. */
#define SETTLE_MS        200
#define CLEANUP_MS       5000
#define CALLER           ":1.1"

typedef enum {
  ARGS_NONE,
  ARGS_CREATE,          /* (st): flags byte, spec */
  ARGS_NAME_OR_ID,      /* (s): a machine's ID or name, or the bytes */
  ARGS_TRAFFIC,         /* (st): as above, then a sequence byte */
  ARGS_BOOLEAN,         /* (b) */
  ARGS_SPEC,            /* (s): a spec document */
  ARGS_STRING,          /* (s): the bytes */
  ARGS_UINT32,          /* (u) */
  ARGS_IFACE,           /* (s): the object's interface */
  ARGS_IFACE_PROPERTY,  /* (ss): the object's interface, then the bytes */
} ArgsKind;

typedef struct {
  gboolean    on_machine;
  const char *iface;
  const char *member;
  ArgsKind    args;
} Method;

#define PROPERTIES "org.freedesktop.DBus.Properties"
#define INTROSPECTABLE "org.freedesktop.DBus.Introspectable"
#define OBJECT_MANAGER "org.freedesktop.DBus.ObjectManager"

static const Method methods[] = {
  { FALSE, MV_MANAGER_IFACE, "CreateMachine", ARGS_CREATE },
  { FALSE, MV_MANAGER_IFACE, "GetMachine", ARGS_NAME_OR_ID },
  { FALSE, MV_MANAGER_IFACE, "ListMachines", ARGS_NONE },
  { FALSE, MV_MANAGER_IFACE, "RestoreAfterTraffic", ARGS_TRAFFIC },
  { FALSE, PROPERTIES, "GetAll", ARGS_IFACE },
  { FALSE, OBJECT_MANAGER, "GetManagedObjects", ARGS_NONE },
  { FALSE, INTROSPECTABLE, "Introspect", ARGS_NONE },
  { TRUE, MV_MACHINE_IFACE, "Start", ARGS_NONE },
  { TRUE, MV_MACHINE_IFACE, "Stop", ARGS_NONE },
  { TRUE, MV_MACHINE_IFACE, "Pause", ARGS_NONE },
  { TRUE, MV_MACHINE_IFACE, "Resume", ARGS_NONE },
  { TRUE, MV_MACHINE_IFACE, "Restart", ARGS_NONE },
  { TRUE, MV_MACHINE_IFACE, "Standby", ARGS_NONE },
  { TRUE, MV_MACHINE_IFACE, "Delete", ARGS_BOOLEAN },
  { TRUE, MV_MACHINE_IFACE, "Update", ARGS_SPEC },
  { TRUE, MV_MACHINE_IFACE, "Rename", ARGS_STRING },
  { TRUE, MV_MACHINE_IFACE, "SetDesiredState", ARGS_STRING },
  { TRUE, MV_MACHINE_IFACE, "GetConsoleLog", ARGS_UINT32 },
  { TRUE, MV_MACHINE_IFACE, "GetSpec", ARGS_NONE },
  { TRUE, PROPERTIES, "GetAll", ARGS_IFACE },
  { TRUE, PROPERTIES, "Get", ARGS_IFACE_PROPERTY },
  { TRUE, INTROSPECTABLE, "Introspect", ARGS_NONE },
};

/* The daemon's pieces, made once. */
static char *scratch;
static MvHost host;
static MvReconciler *reconciler;
static sd_bus *daemon_bus;
static sd_bus *caller;
static guint pending;           /* calls not answered yet */

static const MvReconcilerOptions options = {
  .standby_min_seconds = MV_STANDBY_AFTER_MIN_SECONDS,
  .idle_sample_seconds = 60,
  .idle_cpu_percent = 5,
  /* Restart policies retry at once, so that a run does not wait on them. */
  .restart_backoff_ms = 1,
  .resync_seconds = 30,
};

/* The bus driver, as far as the daemon asks it: the caller is root. */
static int
driver_unix_user (sd_bus_message *m, void *userdata, sd_bus_error *error)
{
  return sd_bus_reply_method_return (m, "u", (uint32_t) 0);
}

static int
driver_name_has_owner (sd_bus_message *m, void *userdata, sd_bus_error *error)
{
  return sd_bus_reply_method_return (m, "b", 1);
}

static const sd_bus_vtable driver_vtable[] = {
  SD_BUS_VTABLE_START (0),
  SD_BUS_METHOD ("GetConnectionUnixUser", "s", "u", driver_unix_user, 0),
  SD_BUS_METHOD ("NameHasOwner", "s", "b", driver_name_has_owner, 0),
  SD_BUS_VTABLE_END
};

static void
check (int r, const char *what)
{
  if (r < 0)
    mv_fuzz_fail ("%s: %s", what, g_strerror (-r));
}

static char *
scratch_dir (void)
{
  /* Records are written with fsync: in memory it costs nothing. */
  char *dir = g_strdup ("/dev/shm/fuzz-bus-XXXXXX");

  if (g_mkdtemp (dir) == NULL)
    {
      g_autoptr (GError) error = NULL;

      g_free (dir);
      dir = g_dir_make_tmp ("fuzz-bus-XXXXXX", &error);
      g_assert_no_error (error);
    }
  return dir;
}

static void
remove_scratch (void)
{
  mv_remove_tree (scratch, NULL);
}

static void
on_recovered (gpointer data)
{
  *(gboolean *) data = TRUE;
}

static void
connect_pair (void)
{
  sd_id128_t id;
  int fds[2];

  if (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, fds) < 0)
    mv_fuzz_fail ("socketpair: %s", g_strerror (errno));
  check (sd_id128_randomize (&id), "sd_id128_randomize");

  check (sd_bus_new (&daemon_bus), "sd_bus_new");
  check (sd_bus_set_fd (daemon_bus, fds[0], fds[0]), "sd_bus_set_fd");
  check (sd_bus_set_anonymous (daemon_bus, 1), "sd_bus_set_anonymous");
  check (sd_bus_start (daemon_bus), "sd_bus_start");

  check (sd_bus_new (&caller), "sd_bus_new");
  check (sd_bus_set_fd (caller, fds[1], fds[1]), "sd_bus_set_fd");
  check (sd_bus_set_server (caller, 1, id), "sd_bus_set_server");
  check (sd_bus_set_anonymous (caller, 1), "sd_bus_set_anonymous");
  check (sd_bus_start (caller), "sd_bus_start");
  check (sd_bus_add_object_vtable (caller, NULL, "/org/freedesktop/DBus", "org.freedesktop.DBus",
                                   driver_vtable, NULL),
         "the bus driver");

  mv_bus_source_attach (daemon_bus);
  mv_bus_source_attach (caller);
}

int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *state = NULL;
  g_autofree char *runtime = NULL;
  MvStore *store;
  MvBusService *service;
  gboolean recovered = FALSE;
  int r;

  mv_fuzz_init ();
  scratch = scratch_dir ();
  atexit (remove_scratch);
  state = g_build_filename (scratch, "state", NULL);
  runtime = g_build_filename (scratch, "run", NULL);
  store = mv_store_new (state, runtime, &error);
  g_assert_no_error (error);

  host.runtimes = mv_runtimes_new (NULL);
  mv_runtimes_add (host.runtimes, mv_test_runtime_new (), "1.0.0");
  host.records = mv_store_records_new (store);
  host.storage = mv_storage_new (host.records, NULL);
  service = mv_bus_service_new ();
  reconciler = mv_reconciler_new (&host, &options, mv_bus_service_observer (service), NULL);
  mv_reconciler_recover (reconciler, on_recovered, &recovered);
  while (!recovered)
    g_main_context_iteration (NULL, TRUE);

  connect_pair ();
  /* A peer connection has no names: everything is served, the name alone
   * cannot be taken. */
  r = mv_bus_service_start (service, daemon_bus, reconciler, g_ptr_array_new ());
  if (r < 0 && r != -EINVAL)
    check (r, "mv_bus_service_start");
  mv_reconciler_run (reconciler);
  return 0;
}

/* ---- the calls ---- */

typedef struct {
  const uint8_t *data;
  size_t         size;
} Reader;

static guint8
take_byte (Reader *r)
{
  guint8 b = 0;

  if (r->size > 0)
    {
      b = r->data[0];
      r->data++;
      r->size--;
    }
  return b;
}

static guint32
take_uint32 (Reader *r)
{
  guint32 v = 0;

  for (guint i = 0; i < 4; i++)
    v = v << 8 | take_byte (r);
  return v;
}

/* The rest, as D-Bus can carry it: up to a NUL, made UTF-8. */
static char *
take_string (Reader *r)
{
  g_autofree char *raw = g_strndup ((const char *) r->data, r->size);

  r->data += r->size;
  r->size = 0;
  return g_utf8_make_valid (raw, -1);
}

/* A spec document, in ASCII and without escapes: the parser's message
 * about a malformed one quotes the bad token, cut at a byte count that
 * can split a UTF-8 sequence, or decoded from a lone surrogate (\ud800)
 * into bytes that are not UTF-8; a reply with that message is never
 * sent, and the call waits for ever. Until replies are made UTF-8, spec
 * documents here keep clear of that, so that other failures show. */
static char *
take_spec (Reader *r)
{
  char *text = take_string (r);

  for (char *p = text; *p; p++)
    if ((guchar) *p >= 0x80 || *p == '\\')
      *p = '?';
  return text;
}

static MvMachine *
pick_machine (GPtrArray *machines, guint8 selector)
{
  guint i = selector % (machines->len + 1);

  return i < machines->len ? machines->pdata[i] : NULL;
}

static int
on_reply (sd_bus_message *reply, void *userdata, sd_bus_error *ret_error)
{
  pending--;
  return 0;
}

/* Appends the arguments of @method read from @r; FALSE to leave the call
 * out (an input json-glib would leak on, or that would only stall). */
static gboolean
append_args (sd_bus_message *call, const Method *method, Reader *r, GPtrArray *machines)
{
  g_autofree char *text = NULL;
  MvMachine *machine;
  guint8 b;

  switch (method->args)
    {
    case ARGS_NONE:
      return TRUE;
    case ARGS_CREATE:
      b = take_byte (r);
      text = take_spec (r);
      if (mv_fuzz_json_glib_leaks (text, strlen (text)) ||
          strstr (text, "start-delay") != NULL)
        return FALSE;
      /* Bit 0 is MV_CREATE_START; bit 7 an unknown flag. */
      check (sd_bus_message_append (call, "st", text,
                                    (uint64_t) ((b & 1) | ((b & 0x80) ? 1u << 8 : 0))),
             "CreateMachine");
      return TRUE;
    case ARGS_NAME_OR_ID:
    case ARGS_TRAFFIC:
      b = take_byte (r);
      machine = pick_machine (machines, b & 0x7f);
      if (machine && !(b & 0x80))
        text = g_strdup (machine->id);
      else if (machine)
        text = g_strdup (machine->config->spec->name);
      else
        text = take_string (r);
      if (method->args == ARGS_NAME_OR_ID)
        check (sd_bus_message_append (call, "s", text), method->member);
      else
        check (sd_bus_message_append (call, "st", text, (uint64_t) take_byte (r)),
               method->member);
      return TRUE;
    case ARGS_BOOLEAN:
      check (sd_bus_message_append (call, "b", take_byte (r) & 1), method->member);
      return TRUE;
    case ARGS_SPEC:
      text = take_spec (r);
      if (mv_fuzz_json_glib_leaks (text, strlen (text)) ||
          strstr (text, "start-delay") != NULL)
        return FALSE;
      check (sd_bus_message_append (call, "s", text), method->member);
      return TRUE;
    case ARGS_STRING:
      text = take_string (r);
      check (sd_bus_message_append (call, "s", text), method->member);
      return TRUE;
    case ARGS_UINT32:
      check (sd_bus_message_append (call, "u", take_uint32 (r)), method->member);
      return TRUE;
    case ARGS_IFACE:
      check (sd_bus_message_append (call, "s", method->on_machine ? MV_MACHINE_IFACE
                                                                  : MV_MANAGER_IFACE),
             method->member);
      return TRUE;
    case ARGS_IFACE_PROPERTY:
      text = take_string (r);
      check (sd_bus_message_append (call, "ss", MV_MACHINE_IFACE, text), method->member);
      return TRUE;
    }
  return FALSE;
}

static void
send_call (const Method *method, const char *path, Reader *r, GPtrArray *machines)
{
  g_autoptr (sd_bus_message) call = NULL;

  check (sd_bus_message_new_method_call (caller, &call, MV_BUS_NAME, path, method->iface,
                                         method->member),
         method->member);
  check (sd_bus_message_set_sender (call, CALLER), "sd_bus_message_set_sender");
  if (!append_args (call, method, r, machines))
    return;
  check (sd_bus_call_async (caller, NULL, call, on_reply, NULL, CALL_TIMEOUT_US),
         method->member);
  pending++;
}

static gboolean
on_deadline (gpointer data)
{
  *(gboolean *) data = TRUE;
  return G_SOURCE_REMOVE;
}

/* Runs the main loop until @done says so or @ms have passed; whether
 * @done said so. */
static gboolean
run_until (gboolean (*done) (void), guint ms)
{
  gboolean late = FALSE;
  guint timer = g_timeout_add (ms, on_deadline, &late);

  while (!done () && !late)
    g_main_context_iteration (NULL, TRUE);
  if (!late)
    g_source_remove (timer);
  /* What the loop has ready now goes too: signals, flushes. */
  while (g_main_context_iteration (NULL, FALSE))
    ;
  return done ();
}

static gboolean
all_answered (void)
{
  return pending == 0;
}

static gboolean
all_gone (void)
{
  return pending == 0 && mv_reconciler_count (reconciler) == 0 &&
         !mv_reconciler_busy (reconciler);
}

static void
delete_everything (void)
{
  g_autoptr (GPtrArray) machines = mv_reconciler_list (reconciler);
  static const Method delete = { TRUE, MV_MACHINE_IFACE, "Delete", ARGS_BOOLEAN };
  static const uint8_t force = 1;

  for (guint i = 0; i < machines->len; i++)
    {
      MvMachine *machine = machines->pdata[i];
      g_autofree char *path = mv_machine_object_path (machine->id);
      Reader r = { &force, 1 };

      send_call (&delete, path, &r, machines);
    }
  if (!run_until (all_gone, CLEANUP_MS))
    mv_fuzz_fail ("after deleting every machine with force, %u calls are unanswered and "
                  "%u machines are left%s", pending, mv_reconciler_count (reconciler),
                  mv_reconciler_busy (reconciler) ? ", one of them busy" : "");
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  Reader input = { data, size };

  for (guint n = 0; n < MAX_CALLS && input.size >= 2; n++)
    {
      guint8 op = take_byte (&input);
      gsize length = take_byte (&input);
      const Method *method = &methods[(op & 0x7f) % G_N_ELEMENTS (methods)];
      Reader args = { input.data, length };
      g_autoptr (GPtrArray) machines = mv_reconciler_list (reconciler);
      g_autofree char *path = NULL;

      length = MIN (length, input.size);
      args.size = length;
      input.data += length;
      input.size -= length;
      if (method->on_machine)
        {
          MvMachine *machine = pick_machine (machines, take_byte (&args));

          path = machine ? mv_machine_object_path (machine->id)
                         : g_strdup (MV_MACHINE_PREFIX "/nothing");
        }
      else
        path = g_strdup (MV_MANAGER_PATH);
      send_call (method, path, &args, machines);
      if (!(op & 0x80))
        run_until (all_answered, SETTLE_MS);
    }
  run_until (all_answered, SETTLE_MS);
  delete_everything ();
  return 0;
}
