/* The baseline of a bare sd-bus service: a child process (this program,
 * run with --echo-service) that owns org.microvmd1.BenchEcho and serves an
 * object with the same properties, types and sizes as a machine, from
 * constants. Whatever the daemon takes beyond it is the daemon's own. */
#include "bench.h"

#include "names.h"
#include "store/store.h"

#include <errno.h>
#include <systemd/sd-event.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

static uint64_t started_at;
static char    *status_path;   /* where EmitDurable records the state first */

/* CreateDurable's writers: a pool of threads, and the way back. */
static MvStore     *create_store;
static GThreadPool *create_writers;
static GAsyncQueue *create_written;
static int          create_written_fd = -1;
static gint         create_woken;
static guint64      event_sequence;

static int
get_string (sd_bus *bus, const char *path, const char *interface, const char *property,
            sd_bus_message *reply, void *userdata, sd_bus_error *error)
{
  return sd_bus_message_append (reply, "s", (const char *) userdata);
}

static int
get_u64 (sd_bus *bus, const char *path, const char *interface, const char *property,
         sd_bus_message *reply, void *userdata, sd_bus_error *error)
{
  uint64_t v = strcmp (property, "StartedAt") == 0 ? started_at : (uint64_t) 1700000000000000;
  return sd_bus_message_append (reply, "t", v);
}

static int
get_u32 (sd_bus *bus, const char *path, const char *interface, const char *property,
         sd_bus_message *reply, void *userdata, sd_bus_error *error)
{
  return sd_bus_message_append (reply, "u", (uint32_t) 1000);
}

static int
get_i32 (sd_bus *bus, const char *path, const char *interface, const char *property,
         sd_bus_message *reply, void *userdata, sd_bus_error *error)
{
  return sd_bus_message_append (reply, "i", (int32_t) -1);
}

static int
get_labels (sd_bus *bus, const char *path, const char *interface, const char *property,
            sd_bus_message *reply, void *userdata, sd_bus_error *error)
{
  return sd_bus_message_append (reply, "a{ss}", 1, "role", "bench");
}

/* Sets StartedAt to now and announces it, as the daemon does when a
 * machine starts: the floor for signal delivery on this bus. */
static int
method_emit (sd_bus_message *m, void *userdata, sd_bus_error *error)
{
  sd_bus *bus = sd_bus_message_get_bus (m);
  int r = sd_bus_reply_method_return (m, NULL);

  started_at = (uint64_t) g_get_real_time ();
  if (r >= 0)
    r = sd_bus_emit_properties_changed (bus, BENCH_ECHO_PATH, MV_MACHINE_IFACE, "State",
                                        "StartedAt", NULL);
  return r;
}

/* As Emit, but the state is first written where the daemon's records are
 * kept, the way the daemon writes one (temporary file, fsync, rename,
 * directory fsync): the floor for a state change that is announced only
 * once it is on disk. */
static int
method_emit_durable (sd_bus_message *m, void *userdata, sd_bus_error *error)
{
  sd_bus *bus = sd_bus_message_get_bus (m);
  g_autoptr (GError) local = NULL;
  g_autofree char *record = NULL;
  int r = sd_bus_reply_method_return (m, NULL);

  started_at = (uint64_t) g_get_real_time ();
  record = g_strdup_printf ("{\"format\":1,\"state\":\"Running\",\"started_at\":%" G_GUINT64_FORMAT "}\n",
                            started_at);
  if (!mv_write_file_atomic (status_path, record, strlen (record), &local))
    return sd_bus_error_set_errno (error, EIO);
  if (r >= 0)
    r = sd_bus_emit_properties_changed (bus, BENCH_ECHO_PATH, MV_MACHINE_IFACE, "State",
                                        "StartedAt", NULL);
  return r;
}

/* CreateDurable: a create → Running as a bare sd-bus service with the
 * daemon's API must do it, and nothing more. The records the daemon
 * writes are written with the store's own code on a pool's thread, as
 * many at once as calls are in flight; back on the bus's thread, the
 * signals the daemon sends for a create → Running go out (InterfacesAdded
 * with every property, MachineNew, the created and started events,
 * PropertiesChanged, StateChanged) and the call is answered, in the
 * daemon's order. */
typedef struct {
  sd_bus_message *call;
  MvConfig       *config;
  GError         *error;
} Create;

static void
create_free (Create *c)
{
  sd_bus_message_unref (c->call);
  mv_config_free (c->config);
  g_clear_error (&c->error);
  g_free (c);
}

static void
create_write (gpointer data, gpointer user_data)
{
  Create *c = data;

  bench_write_create_records (create_store, c->config, &c->error);
  g_async_queue_push (create_written, c);
  /* One wake-up for as many results as come before the loop reads them. */
  if (g_atomic_int_compare_and_exchange (&create_woken, 0, 1))
    {
      guint64 one = 1;

      while (write (create_written_fd, &one, sizeof one) < 0 && errno == EINTR)
        ;
    }
}

static int
emit_event (sd_bus *bus, const char *kind, const char *id, const char *name)
{
  return sd_bus_emit_signal (bus, MV_MANAGER_PATH, BENCH_ECHO_NAME, "Event", "ttsssssa{sv}",
                             ++event_sequence, (uint64_t) g_get_real_time (), kind, id, name, "", "", 0);
}

/* The signals of a create → Running of machine @id named @name, and the
 * answer to @call, in the daemon's order. */
static void
answer_create (sd_bus *bus, sd_bus_message *call, const char *id, const char *name)
{
  int r;

  r = sd_bus_emit_object_added (bus, BENCH_ECHO_PATH);
  if (r >= 0)
    r = sd_bus_emit_signal (bus, MV_MANAGER_PATH, BENCH_ECHO_NAME, "MachineNew", "so", id,
                            BENCH_ECHO_PATH);
  if (r >= 0)
    r = emit_event (bus, "created", id, name);
  if (r >= 0)
    r = emit_event (bus, "started", id, name);
  if (r >= 0)
    r = sd_bus_reply_method_return (call, "o", BENCH_ECHO_PATH);
  started_at = (uint64_t) g_get_real_time ();
  if (r >= 0)
    r = sd_bus_emit_properties_changed (bus, BENCH_ECHO_PATH, MV_MACHINE_IFACE, "State",
                                        "ObservedGeneration", "StartedAt", "Phase", NULL);
  if (r >= 0)
    r = sd_bus_emit_signal (bus, BENCH_ECHO_PATH, MV_MACHINE_IFACE, "StateChanged", "sss", "Running",
                            "Stopped", "");
  if (r < 0)
    g_printerr ("echo service: a create's answer: %s\n", g_strerror (-r));
}

static void
create_answer (sd_bus *bus, Create *c)
{
  if (c->error)
    sd_bus_reply_method_errorf (c->call, SD_BUS_ERROR_FAILED, "%s", c->error->message);
  else
    answer_create (bus, c->call, c->config->id, c->config->spec->name);
}

static int
on_written (sd_event_source *source, int fd, uint32_t revents, void *userdata)
{
  sd_bus *bus = userdata;
  guint64 count;
  Create *c;

  while (read (create_written_fd, &count, sizeof count) < 0 && errno == EINTR)
    ;
  g_atomic_int_set (&create_woken, 0);
  while ((c = g_async_queue_try_pop (create_written)))
    {
      create_answer (bus, c);
      create_free (c);
    }
  return 0;
}

static int
method_create_durable (sd_bus_message *m, void *userdata, sd_bus_error *error)
{
  g_autoptr (GError) local = NULL;
  const char *json = NULL;
  uint64_t flags = 0;
  Create *c;
  int r = sd_bus_message_read (m, "st", &json, &flags);

  if (r < 0)
    return r;
  c = g_new0 (Create, 1);
  c->config = bench_create_config (json, &local);
  if (!c->config)
    {
      g_free (c);
      return sd_bus_error_set (error, SD_BUS_ERROR_INVALID_ARGS, local->message);
    }
  c->call = sd_bus_message_ref (m);
  g_thread_pool_push (create_writers, c, NULL);
  /* Answered once its records are written. */
  return 1;
}

/* CreateSignals: CreateDurable without its records. What the bus alone
 * takes for a create → Running with this API: the call, the same
 * signals and the answer. The spec is not parsed (the name is picked
 * out of it): its parsing and its records are what the writes alone
 * are timed doing. */
static int
method_create_signals (sd_bus_message *m, void *userdata, sd_bus_error *error)
{
  const char *json = NULL, *name;
  uint64_t flags = 0;
  g_autofree char *id = NULL, *copy = NULL;
  int r = sd_bus_message_read (m, "st", &json, &flags);

  if (r < 0)
    return r;
  name = strstr (json, "\"name\":\"");
  if (!name)
    return sd_bus_error_set (error, SD_BUS_ERROR_INVALID_ARGS, "no name");
  name += strlen ("\"name\":\"");
  copy = g_strndup (name, strcspn (name, "\""));
  id = mv_id_new ();
  answer_create (sd_bus_message_get_bus (m), m, id, copy);
  return 1;
}

/* A listing of @n machines in ListMachines' shape and sizes (id, name,
 * state, path), from constants: the floor for a listing on this bus. */
static int
method_list (sd_bus_message *m, void *userdata, sd_bus_error *error)
{
  g_autoptr (sd_bus_message) reply = NULL;
  uint32_t n = 0;
  int r = sd_bus_message_read (m, "u", &n);

  if (r >= 0)
    r = sd_bus_message_new_method_return (m, &reply);
  if (r >= 0)
    r = sd_bus_message_open_container (reply, 'a', "(ssso)");
  for (uint32_t i = 0; r >= 0 && i < n; i++)
    {
      char id[33], name[16], path[sizeof MV_MACHINE_PREFIX + 33];

      g_snprintf (id, sizeof id, "%032x", i);
      g_snprintf (name, sizeof name, "bench-m%05u", i);
      g_snprintf (path, sizeof path, MV_MACHINE_PREFIX "/%s", id);
      r = sd_bus_message_append (reply, "(ssso)", id, name, "Stopped", path);
    }
  if (r >= 0)
    r = sd_bus_message_close_container (reply);
  if (r < 0)
    return r;
  return sd_bus_send (NULL, reply, NULL);
}

static const sd_bus_vtable echo_vtable[] = {
  SD_BUS_VTABLE_START (0),
  SD_BUS_PROPERTY ("Id", "s", get_string, 0, SD_BUS_VTABLE_PROPERTY_CONST),
  SD_BUS_PROPERTY ("Name", "s", get_string, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
  SD_BUS_PROPERTY ("State", "s", get_string, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
  SD_BUS_PROPERTY ("StateError", "s", get_string, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
  SD_BUS_PROPERTY ("DesiredState", "s", get_string, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
  SD_BUS_PROPERTY ("DesiredGeneration", "t", get_u64, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
  SD_BUS_PROPERTY ("ObservedGeneration", "t", get_u64, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
  SD_BUS_PROPERTY ("SpecificationGeneration", "t", get_u64, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
  SD_BUS_PROPERTY ("RestartGeneration", "t", get_u64, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
  SD_BUS_PROPERTY ("Hypervisor", "s", get_string, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
  SD_BUS_PROPERTY ("VCPUs", "u", get_u32, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
  SD_BUS_PROPERTY ("CpuMillicores", "u", get_u32, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
  SD_BUS_PROPERTY ("MemoryBytes", "t", get_u64, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
  SD_BUS_PROPERTY ("Labels", "a{ss}", get_labels, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
  SD_BUS_PROPERTY ("Phase", "s", get_string, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
  SD_BUS_PROPERTY ("OperationId", "s", get_string, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
  SD_BUS_PROPERTY ("StartedAt", "t", get_u64, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
  SD_BUS_PROPERTY ("CreatedAt", "t", get_u64, 0, SD_BUS_VTABLE_PROPERTY_CONST),
  SD_BUS_PROPERTY ("UpdatedAt", "t", get_u64, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
  SD_BUS_PROPERTY ("ExitCode", "i", get_i32, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
  SD_BUS_PROPERTY ("RestartCount", "u", get_u32, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
  SD_BUS_PROPERTY ("Spec", "s", get_string, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE | SD_BUS_VTABLE_SENSITIVE),
  SD_BUS_METHOD ("Emit", "", "", method_emit, 0),
  SD_BUS_METHOD ("EmitDurable", "", "", method_emit_durable, 0),
  SD_BUS_METHOD ("List", "u", "a(ssso)", method_list, 0),
  SD_BUS_METHOD ("CreateDurable", "st", "o", method_create_durable, 0),
  SD_BUS_METHOD ("CreateSignals", "st", "o", method_create_signals, 0),
  SD_BUS_VTABLE_END
};

/* The value every string property has: as long as a typical machine's
 * spec document, so both services send messages of the same size. */
static const char echo_string[] =
  "{\"name\":\"bench-m00001\",\"hypervisor_type\":\"test\",\"kernel\":\"/boot/vmlinuz\","
  "\"cpu_millicores\":1000,\"memory_bytes\":268435456,\"labels\":{\"role\":\"bench\"}}";

int bench_echo_main (const char *address, const char *dir);

int
bench_echo_main (const char *address, const char *dir)
{
  sd_bus *bus = NULL;
  sd_event *event = NULL;
  int r;

  prctl (PR_SET_PDEATHSIG, SIGKILL);
  status_path = g_build_filename (dir, "echo-status.json", NULL);
  {
    g_autofree char *state = g_build_filename (dir, "echo-state", NULL);
    g_autofree char *run = g_build_filename (dir, "echo-run", NULL);
    g_autoptr (GError) local = NULL;

    create_store = mv_store_new (state, run, &local);
    if (!create_store)
      {
        g_printerr ("echo service: %s\n", local->message);
        return 1;
      }
  }
  /* As many writers as the daemon's reconciler has. */
  create_writers = g_thread_pool_new (create_write, NULL, 32, FALSE, NULL);
  create_written = g_async_queue_new ();
  create_written_fd = eventfd (0, EFD_CLOEXEC | EFD_NONBLOCK);
  r = create_written_fd < 0 ? -errno : sd_bus_new (&bus);
  if (r >= 0)
    r = sd_bus_set_address (bus, address);
  if (r >= 0)
    r = sd_bus_set_bus_client (bus, 1);
  if (r >= 0)
    r = sd_bus_start (bus);
  if (r >= 0)
    r = sd_bus_add_object_vtable (bus, NULL, BENCH_ECHO_PATH, MV_MACHINE_IFACE, echo_vtable,
                                  (void *) echo_string);
  if (r >= 0)
    r = sd_bus_add_object_manager (bus, NULL, MV_MANAGER_PATH);
  if (r >= 0)
    r = sd_bus_request_name (bus, BENCH_ECHO_NAME, 0);
  /* The bus and the writers' results, on one sd-event loop. */
  if (r >= 0)
    r = sd_event_default (&event);
  if (r >= 0)
    r = sd_bus_attach_event (bus, event, SD_EVENT_PRIORITY_NORMAL);
  if (r >= 0)
    r = sd_event_add_io (event, NULL, create_written_fd, EPOLLIN, on_written, bus);
  if (r >= 0)
    r = sd_event_loop (event);
  if (r < 0)
    g_printerr ("echo service: %s\n", g_strerror (-r));
  return 1;
}

GPid
bench_echo_start (Bench *bench)
{
  const char *argv[] = { "/proc/self/exe", "--echo-service",
                         mv_test_env_bus_address (bench->env), mv_test_env_dir (bench->env), NULL };
  g_autoptr (GError) error = NULL;
  g_autofree char *self = g_file_read_link ("/proc/self/exe", NULL);

  argv[0] = self;
  if (!g_spawn_async (NULL, (char **) argv, NULL, G_SPAWN_DO_NOT_REAP_CHILD, NULL, NULL,
                      &bench->echo_pid, &error))
    bench_fail (bench, "cannot start the echo service: %s", error->message);
  for (int i = 0; i < 5000; i++)
    {
      g_autoptr (sd_bus_message) reply = NULL;
      int has = 0;

      if (sd_bus_call_method (bench->bus, "org.freedesktop.DBus", "/org/freedesktop/DBus",
                              "org.freedesktop.DBus", "NameHasOwner", NULL, &reply, "s",
                              BENCH_ECHO_NAME) >= 0)
        sd_bus_message_read (reply, "b", &has);
      if (has)
        return bench->echo_pid;
      if (waitpid (bench->echo_pid, NULL, WNOHANG) == bench->echo_pid)
        break;
      g_usleep (2000);
    }
  bench->echo_pid = 0;
  bench_fail (bench, "the echo service did not own %s", BENCH_ECHO_NAME);
}

void
bench_echo_stop (Bench *bench)
{
  if (!bench->echo_pid)
    return;
  kill (bench->echo_pid, SIGTERM);
  waitpid (bench->echo_pid, NULL, 0);
  bench->echo_pid = 0;
}
