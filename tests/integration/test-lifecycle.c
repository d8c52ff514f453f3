/* The daemon on a private system bus with real polkitd, driven as a client:
 * objects appear and vanish with their signals, lifecycle methods change
 * State, bad input changes nothing, records survive a restart, and a
 * corrupted record is reported and left alone. */
#include "bus-client.h"
#include "names.h"

#include <glib/gstdio.h>

#define SPEC(name) "{\"name\":\"" name "\",\"hypervisor_type\":\"test\",\"kernel\":\"/boot/vmlinuz\"}"

static void
test_create_announces_object (Fixture *f, gconstpointer data)
{
  g_autofree char *path = client_create (f->client, SPEC ("alpha"), 0, NULL, NULL);
  g_autofree char *name = NULL, *state = NULL, *desired = NULL, *id = NULL;
  g_autofree char *encoded = NULL;

  g_assert_nonnull (path);
  client_settle (f->client, 200);
  g_assert_cmpuint (client_count_signals (f->client, MV_MANAGER_PATH, "InterfacesAdded"), ==, 1);
  g_assert_cmpuint (client_count_signals (f->client, MV_MANAGER_PATH, "MachineNew"), ==, 1);

  name = client_get_string (f->client, path, "Name");
  state = client_get_string (f->client, path, "State");
  desired = client_get_string (f->client, path, "DesiredState");
  id = client_get_string (f->client, path, "Id");
  g_assert_cmpstr (name, ==, "alpha");
  g_assert_cmpstr (state, ==, "Stopped");
  g_assert_cmpstr (desired, ==, "stopped");
  g_assert_cmpuint (client_get_u32 (f->client, path, "VCPUs"), ==, 1);
  g_assert_cmpuint (client_get_u64 (f->client, path, "MemoryBytes"), ==, 256u << 20);
  g_assert_cmpuint (client_get_u64 (f->client, path, "DesiredGeneration"), ==, 1);
  /* Born as it is wanted: observed, and recorded so from the start. */
  g_assert_cmpuint (client_get_u64 (f->client, path, "ObservedGeneration"), ==, 1);
  g_assert_cmpint (client_get_i32 (f->client, path, "ExitCode"), ==, -1);

  /* The path is the encoded ID, never the name. */
  g_assert_cmpint (sd_bus_path_encode (MV_MACHINE_PREFIX, id, &encoded), >=, 0);
  g_assert_cmpstr (path, ==, encoded);

  /* Found by name and by ID, and listed. */
  g_autoptr (sd_bus_message) r1 = client_call (f->client, MV_MANAGER_PATH, MV_MANAGER_IFACE,
                                               "GetMachine", NULL, NULL, "s", "alpha");
  g_autoptr (sd_bus_message) r2 = client_call (f->client, MV_MANAGER_PATH, MV_MANAGER_IFACE,
                                               "GetMachine", NULL, NULL, "s", id);
  const char *p1 = NULL, *p2 = NULL;
  g_assert_cmpint (sd_bus_message_read (r1, "o", &p1), >=, 0);
  g_assert_cmpint (sd_bus_message_read (r2, "o", &p2), >=, 0);
  g_assert_cmpstr (p1, ==, path);
  g_assert_cmpstr (p2, ==, path);

  g_autoptr (sd_bus_message) list = client_call (f->client, MV_MANAGER_PATH, MV_MANAGER_IFACE,
                                                 "ListMachines", NULL, NULL, NULL);
  const char *lid, *lname, *lstate, *lpath;
  g_assert_cmpint (sd_bus_message_enter_container (list, 'a', "(ssso)"), >=, 0);
  g_assert_cmpint (sd_bus_message_read (list, "(ssso)", &lid, &lname, &lstate, &lpath), >, 0);
  g_assert_cmpstr (lid, ==, id);
  g_assert_cmpstr (lname, ==, "alpha");
  g_assert_cmpstr (lstate, ==, "Stopped");
  g_assert_cmpstr (lpath, ==, path);
  g_assert_cmpint (sd_bus_message_read (list, "(ssso)", &lid, &lname, &lstate, &lpath), ==, 0);

  /* The record is on disk. */
  g_autofree char *config = g_build_filename (mv_test_env_state_dir (f->env), "machines", id,
                                              "config.json", NULL);
  g_assert_true (g_file_test (config, G_FILE_TEST_IS_REGULAR));
  g_autofree char *status_path = g_build_filename (mv_test_env_state_dir (f->env), "machines", id,
                                                   "status.json", NULL);
  g_autofree char *status = NULL;
  g_assert_true (g_file_get_contents (status_path, &status, NULL, NULL));
  g_assert_nonnull (strstr (status, "\"observed_generation\" : 1,"));

  /* A name that is taken. */
  g_autofree char *err = NULL, *msg = NULL;
  g_autofree char *again = client_create (f->client, SPEC ("alpha"), 0, &err, &msg);
  g_assert_null (again);
  g_assert_cmpstr (err, ==, MV_BUS_ERROR_ALREADY_EXISTS);

  /* An unknown machine. */
  g_autofree char *err2 = NULL;
  g_autoptr (sd_bus_message) none = client_call (f->client, MV_MANAGER_PATH, MV_MANAGER_IFACE,
                                                 "GetMachine", &err2, NULL, "s", "nosuch");
  g_assert_null (none);
  g_assert_cmpstr (err2, ==, MV_BUS_ERROR_NOT_FOUND);
}

static void
test_start_stop_signals (Fixture *f, gconstpointer data)
{
  g_autofree char *path = client_create (f->client, SPEC ("beta"), 0, NULL, NULL);
  g_autofree char *err = NULL;

  client_settle (f->client, 100);
  client_clear_signals (f->client);

  err = client_machine_call (f->client, path, "Start", NULL);
  g_assert_null (err);
  /* The reply comes once the machine runs. */
  g_autofree char *state = client_get_string (f->client, path, "State");
  g_assert_cmpstr (state, ==, "Running");
  g_assert_cmpuint (client_get_u64 (f->client, path, "StartedAt"), >, 0);
  g_assert_cmpuint (client_get_u64 (f->client, path, "ObservedGeneration"), ==,
                    client_get_u64 (f->client, path, "DesiredGeneration"));
  client_settle (f->client, 200);
  g_assert_cmpuint (client_count_signals (f->client, path, "StateChanged"), >=, 1);
  g_assert_cmpuint (client_count_signals (f->client, path, "PropertiesChanged"), >=, 1);

  gboolean saw_running = FALSE, saw_state_property = FALSE;
  for (guint i = 0; i < f->client->signals->len; i++)
    {
      RecordedSignal *s = f->client->signals->pdata[i];
      if (g_str_equal (s->member, "StateChanged") && g_str_has_prefix (s->args, "Running<-"))
        saw_running = TRUE;
      if (g_str_has_prefix (s->member, "PropertiesChanged") && (strstr (s->member, ":State,") || strstr (s->member, ",State,")))
        saw_state_property = TRUE;
    }
  g_assert_true (saw_running);
  g_assert_true (saw_state_property);

  /* Pause and resume. */
  g_clear_pointer (&err, g_free);
  err = client_machine_call (f->client, path, "Pause", NULL);
  g_assert_null (err);
  g_free (state);
  state = client_get_string (f->client, path, "State");
  g_assert_cmpstr (state, ==, "Paused");
  err = client_machine_call (f->client, path, "Resume", NULL);
  g_assert_null (err);
  g_free (state);
  state = client_get_string (f->client, path, "State");
  g_assert_cmpstr (state, ==, "Running");

  client_clear_signals (f->client);
  err = client_machine_call (f->client, path, "Stop", NULL);
  g_assert_null (err);
  g_free (state);
  state = client_get_string (f->client, path, "State");
  g_assert_cmpstr (state, ==, "Stopped");
  client_settle (f->client, 200);
  g_assert_cmpuint (client_count_signals (f->client, path, "StateChanged"), >=, 1);

  /* Stopping a stopped machine is not an error; pausing it is. */
  err = client_machine_call (f->client, path, "Stop", NULL);
  g_assert_null (err);
  err = client_machine_call (f->client, path, "Pause", NULL);
  g_assert_cmpstr (err, ==, MV_BUS_ERROR_INVALID_STATE);
}

static void
test_changes_coalesced (Fixture *f, gconstpointer data)
{
  g_autofree char *path = client_create (f->client, SPEC ("gamma"), 0, NULL, NULL);
  client_settle (f->client, 100);
  client_clear_signals (f->client);

  /* One declarative change touches DesiredState and DesiredGeneration in
   * the same turn: one PropertiesChanged carries both. */
  g_autoptr (sd_bus_message) r = client_call (f->client, path, MV_MACHINE_IFACE,
                                              "SetDesiredState", NULL, NULL, "s", "running");
  g_assert_nonnull (r);
  client_assert_state_soon (f->client, path, "Running", 10000);
  client_settle (f->client, 300);

  gboolean both = FALSE;
  for (guint i = 0; i < f->client->signals->len; i++)
    {
      RecordedSignal *s = f->client->signals->pdata[i];
      if (strstr (s->member, "DesiredState,") && strstr (s->member, "DesiredGeneration,"))
        both = TRUE;
    }
  g_assert_true (both);
  g_assert_cmpuint (client_get_u64 (f->client, path, "ObservedGeneration"), ==, 2);
  g_assert_cmpuint (client_get_u64 (f->client, path, "DesiredGeneration"), ==, 2);

  /* Asking for what is already wanted is no change. */
  g_autoptr (sd_bus_message) r2 = client_call (f->client, path, MV_MACHINE_IFACE,
                                               "SetDesiredState", NULL, NULL, "s", "running");
  g_assert_nonnull (r2);
  g_assert_cmpuint (client_get_u64 (f->client, path, "DesiredGeneration"), ==, 2);

  g_autofree char *err = NULL;
  g_autoptr (sd_bus_message) r3 = client_call (f->client, path, MV_MACHINE_IFACE,
                                               "SetDesiredState", &err, NULL, "s", "flying");
  g_assert_null (r3);
  g_assert_cmpstr (err, ==, MV_BUS_ERROR_INVALID_ARGUMENT);
}

/* Whether a PropertiesChanged of @path since the last clear named @prop. */
static gboolean
announced_property (Client *client, const char *path, const char *prop)
{
  g_autofree char *first = g_strdup_printf (":%s,", prop);
  g_autofree char *later = g_strdup_printf (",%s,", prop);

  for (guint i = 0; i < client->signals->len; i++)
    {
      RecordedSignal *s = client->signals->pdata[i];
      if (g_strcmp0 (s->path, path) == 0 && g_str_has_prefix (s->member, "PropertiesChanged:") &&
          (strstr (s->member, first) || strstr (s->member, later)))
        return TRUE;
    }
  return FALSE;
}

/* What only one feature needs is opened when that feature is first used,
 * not loaded with the daemon or by a create: unpacking images
 * (libarchive), answering DNS queries (ldns) and serving HTTP (libsoup). */
static void
test_start_maps_no_feature_library (Fixture *f, gconstpointer data)
{
  g_autofree char *path = g_strdup_printf ("/proc/%d/maps", (int) mv_test_env_daemon_pid (f->env));
  g_autofree char *maps = NULL;
  g_autofree char *created = client_create_ok (f->client, SPEC ("plain"));

  g_assert_true (g_file_get_contents (path, &maps, NULL, NULL));
  g_assert_null (strstr (maps, "/libarchive.so"));
  g_assert_null (strstr (maps, "/libldns.so"));
  /* Nor libsoup, with neither the metrics endpoint nor the console
   * bridge to serve (both are on by default). */
  g_assert_null (strstr (maps, "/libsoup-3.0.so"));
  /* What the daemon does link is there, so the maps were read right. */
  g_assert_nonnull (strstr (maps, "/libsystemd.so"));
}

/* PropertiesChanged names only the properties whose value changed since
 * the last announcement, and a request that changes nothing sends none. */
static void
test_changes_only_what_changed (Fixture *f, gconstpointer data)
{
#define DELTA_SPEC(labels) \
  "{\"name\":\"delta\",\"hypervisor_type\":\"test\",\"kernel\":\"/boot/vmlinuz\"," \
  "\"labels\":{" labels "}}"
  static const char *const unchanged_by_start[] = {
    "Name", "Labels", "Spec", "Hypervisor", "VCPUs", "CpuMillicores", "MemoryBytes",
    "SpecificationGeneration", NULL,
  };
  g_autofree char *path = client_create_ok (f->client, DELTA_SPEC ("\"tier\":\"front\""));
  g_autofree char *err = NULL;

  client_settle (f->client, 200);
  client_clear_signals (f->client);
  client_call_ok (f->client, path, "Start");
  client_settle (f->client, 300);
  g_assert_true (announced_property (f->client, path, "State"));
  g_assert_true (announced_property (f->client, path, "StartedAt"));
  for (guint i = 0; unchanged_by_start[i]; i++)
    {
      if (announced_property (f->client, path, unchanged_by_start[i]))
        g_error ("Start announced %s, which it did not change", unchanged_by_start[i]);
    }

  client_call_ok (f->client, path, "Stop");
  client_settle (f->client, 300);
  client_clear_signals (f->client);

  /* A stopped machine asked to stop, and a spec updated to itself. */
  client_call_ok (f->client, path, "Stop");
  g_autoptr (sd_bus_message) same = client_call (f->client, path, MV_MACHINE_IFACE, "Update",
                                                 &err, NULL, "s",
                                                 DELTA_SPEC ("\"tier\":\"front\""));
  g_assert_nonnull (same);
  client_settle (f->client, 300);
  g_assert_cmpuint (client_count_signals (f->client, path, "PropertiesChanged"), ==, 0);
  g_assert_cmpuint (client_count_signals (f->client, path, "StateChanged"), ==, 0);

  /* A new label: the spec and the labels, not what the spec kept. */
  g_autoptr (sd_bus_message) relabel = client_call (f->client, path, MV_MACHINE_IFACE, "Update",
                                                    &err, NULL, "s",
                                                    DELTA_SPEC ("\"tier\":\"back\""));
  g_assert_nonnull (relabel);
  client_settle (f->client, 300);
  g_assert_true (announced_property (f->client, path, "Labels"));
  g_assert_true (announced_property (f->client, path, "Spec"));
  g_assert_false (announced_property (f->client, path, "VCPUs"));
  g_assert_false (announced_property (f->client, path, "MemoryBytes"));
  g_assert_false (announced_property (f->client, path, "Hypervisor"));
  g_assert_false (announced_property (f->client, path, "Name"));
  g_assert_false (announced_property (f->client, path, "State"));
#undef DELTA_SPEC
}

static void
test_invalid_spec_leaves_nothing (Fixture *f, gconstpointer data)
{
  static const struct {
    const char *json;
    const char *field;
  } cases[] = {
    { "{\"name\":\"a\",\"hypervisor_type\":\"test\",\"kernel\":\"/k\",\"cpu_millicores\":32001}", "cpu_millicores" },
    { "{\"name\":\"a\",\"hypervisor_type\":\"test\",\"kernel\":\"/k\",\"cpu_millicores\":99}", "cpu_millicores" },
    { "{\"name\":\"a/b\",\"hypervisor_type\":\"test\",\"kernel\":\"/k\"}", "name" },
    { "{\"name\":\"..\",\"hypervisor_type\":\"test\",\"kernel\":\"/k\"}", "name" },
    { "{\"name\":\"a\",\"hypervisor_type\":\"test\",\"kernel\":\"/k\",\"colour\":\"red\"}", "colour" },
    { "{\"name\":\"a\",\"hypervisor_type\":\"test\",\"kernel\":\"/k\",\"user_data\":\"" },
    { "{\"name\":\"a\",\"hypervisor_type\":\"test\",\"kernel\":\"/k\",\"ssh_keys\":[1]}", "ssh_keys" },
    { "{\"name\":\"a\",\"hypervisor_type\":\"test\",\"kernel\":\"/k\",\"memory_bytes\":1048576}", "memory_bytes" },
  };

  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *err = NULL, *msg = NULL;
      g_autofree char *path = client_create (f->client, cases[i].json, 0, &err, &msg);
      g_assert_null (path);
      g_assert_cmpstr (err, ==, MV_BUS_ERROR_INVALID_ARGUMENT);
      if (cases[i].field)
        g_assert_nonnull (strstr (msg, cases[i].field));
    }

  /* Unknown flag bits are refused too. */
  g_autofree char *err = NULL, *msg = NULL;
  g_autofree char *path = client_create (f->client, SPEC ("flags"), 0x80, &err, &msg);
  g_assert_null (path);
  g_assert_cmpstr (err, ==, MV_BUS_ERROR_INVALID_ARGUMENT);
  g_assert_nonnull (strstr (msg, "flags"));

  client_settle (f->client, 200);
  g_assert_cmpuint (count_machine_dirs (mv_test_env_state_dir (f->env)), ==, 0);
  g_assert_cmpuint (client_count_signals (f->client, NULL, "InterfacesAdded"), ==, 0);
}

/* Network fields that cannot be had are refused by name, on create and
 * on update, and leave nothing behind: a network that does not exist, and
 * what only a machine on a network may have. (Machines on networks:
 * test-net-guests.c.) */
static void
test_unimplemented_fields_refused (Fixture *f, gconstpointer data)
{
  static const struct {
    const char *field;
    const char *error;
    const char *json;
  } cases[] = {
    { "network_name", MV_BUS_ERROR_NOT_FOUND, "\"network_name\":\"lan\"" },
    { "static_ip", MV_BUS_ERROR_INVALID_ARGUMENT, "\"static_ip\":\"10.0.0.5\"" },
    { "ports", MV_BUS_ERROR_INVALID_ARGUMENT, "\"ports\":[{\"host_port\":8080}]" },
    { "firewall", MV_BUS_ERROR_INVALID_ARGUMENT, "\"firewall\":[{\"action\":\"allow\"}]" },
    { "network_name", MV_BUS_ERROR_NOT_FOUND,
      "\"network_name\":\"lan\",\"ports\":[{\"host_port\":8080}]" },
  };
  g_autofree char *kept = client_create_ok (f->client, SPEC ("kept"));

  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *create = g_strdup_printf ("{\"name\":\"refused\",\"hypervisor_type\":\"test\","
                                                 "\"kernel\":\"/boot/vmlinuz\",%s}", cases[i].json);
      g_autofree char *update = g_strdup_printf ("{\"name\":\"kept\",\"hypervisor_type\":\"test\","
                                                 "\"kernel\":\"/boot/vmlinuz\",%s}", cases[i].json);
      g_autofree char *err = NULL, *msg = NULL, *update_err = NULL, *update_msg = NULL;
      g_autofree char *path = client_create (f->client, create, 0, &err, &msg);
      g_autoptr (sd_bus_message) reply = NULL;

      g_assert_null (path);
      g_assert_cmpstr (err, ==, cases[i].error);
      g_assert_true (g_str_has_prefix (msg, cases[i].field));

      reply = client_call (f->client, kept, MV_MACHINE_IFACE, "Update", &update_err, &update_msg,
                           "s", update);
      g_assert_null (reply);
      g_assert_cmpstr (update_err, ==, cases[i].error);
      g_assert_true (g_str_has_prefix (update_msg, cases[i].field));
    }
  g_assert_cmpuint (count_machine_dirs (mv_test_env_state_dir (f->env)), ==, 1);
  g_autofree char *spec = client_get_string (f->client, kept, "Spec");
  g_assert_null (strstr (spec, "box"));

  /* The guest's identity and metadata are carried out, so accepted. */
  g_autofree char *named = client_create_ok (f->client,
                                             "{\"name\":\"named\",\"hypervisor_type\":\"test\","
                                             "\"kernel\":\"/boot/vmlinuz\",\"hostname\":\"box\","
                                             "\"ssh_keys\":[\"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI k\"],"
                                             "\"user_data\":\"#cloud-config\","
                                             "\"metadata\":{\"role\":\"db\"}}");
  g_autofree char *named_spec = client_get_string (f->client, named, "Spec");
  g_assert_nonnull (strstr (named_spec, "\"hostname\":\"box\""));
}

static void
test_idempotent_create (Fixture *f, gconstpointer data)
{
  const char *spec = "{\"id\":\"retry-1\",\"name\":\"idem\",\"hypervisor_type\":\"test\",\"kernel\":\"/k\"}";
  const char *other = "{\"id\":\"retry-1\",\"name\":\"idem\",\"hypervisor_type\":\"test\",\"kernel\":\"/k2\"}";
  g_autofree char *p1 = client_create (f->client, spec, 0, NULL, NULL);
  g_autofree char *p2 = client_create (f->client, spec, 0, NULL, NULL);
  g_autofree char *err = NULL, *msg = NULL;
  g_autofree char *p3 = client_create (f->client, other, 0, &err, &msg);

  g_assert_nonnull (p1);
  g_assert_cmpstr (p1, ==, p2);
  g_assert_null (p3);
  g_assert_cmpstr (err, ==, MV_BUS_ERROR_CONFLICT);
  g_assert_cmpuint (count_machine_dirs (mv_test_env_state_dir (f->env)), ==, 1);
}

typedef struct {
  guint created;
  guint refused;      /* AlreadyExists */
  guint answered;
} CreatesAtOnce;

static int
on_create_answered (sd_bus_message *reply, void *userdata, sd_bus_error *ret_error)
{
  CreatesAtOnce *at_once = userdata;
  const sd_bus_error *error = sd_bus_message_get_error (reply);

  at_once->answered++;
  if (!error)
    at_once->created++;
  else if (g_strcmp0 (error->name, MV_BUS_ERROR_ALREADY_EXISTS) == 0)
    at_once->refused++;
  else
    g_test_message ("create failed: %s: %s", error->name, error->message);
  return 1;
}

/* Creates sent at once, all before the first is answered, are recorded
 * side by side: each name is had by one of them only, whichever comes
 * first, and the others are refused; every record is whole. */
static void
test_creates_at_once (Fixture *f, gconstpointer data)
{
  CreatesAtOnce at_once = { 0 };
  const guint sent = 12;

  for (guint i = 0; i < sent; i++)
    {
      /* Half of them want the same name. */
      g_autofree char *name = i % 2 ? g_strdup_printf ("many-%u", i) : g_strdup ("shared");
      g_autofree char *spec = g_strdup_printf ("{\"name\":\"%s\",\"hypervisor_type\":\"test\","
                                               "\"kernel\":\"/k\"}", name);

      g_assert_cmpint (sd_bus_call_method_async (f->client->bus, NULL, MV_BUS_NAME, MV_MANAGER_PATH,
                                                 MV_MANAGER_IFACE, "CreateMachine",
                                                 on_create_answered, &at_once, "st", spec,
                                                 (uint64_t) MV_CREATE_START), >=, 0);
    }
  while (at_once.answered < sent)
    {
      if (sd_bus_process (f->client->bus, NULL) == 0)
        sd_bus_wait (f->client->bus, 100 * 1000);
    }

  g_assert_cmpuint (at_once.created, ==, sent / 2 + 1);
  g_assert_cmpuint (at_once.refused, ==, sent / 2 - 1);
  g_assert_cmpuint (client_count_listed (f->client, "ListMachines"), ==, sent / 2 + 1);
  g_assert_cmpuint (count_machine_dirs (mv_test_env_state_dir (f->env)), ==, sent / 2 + 1);
}

static void
test_failed_start (Fixture *f, gconstpointer data)
{
  const char *spec = "{\"name\":\"broken\",\"hypervisor_type\":\"test\",\"kernel\":\"/k\",\"kernel_args\":\"test.fail-start\"}";
  g_autofree char *path = client_create (f->client, spec, 0, NULL, NULL);
  g_autofree char *msg = NULL;
  g_autofree char *err = client_machine_call (f->client, path, "Start", &msg);
  g_autofree char *state = NULL, *why = NULL;

  g_assert_cmpstr (err, ==, MV_BUS_ERROR_INVALID_STATE);
  g_assert_nonnull (strstr (msg, "Kernel panic"));
  state = client_get_string (f->client, path, "State");
  why = client_get_string (f->client, path, "StateError");
  g_assert_cmpstr (state, ==, "Failed");
  /* Everyone reads StateError: the reason, without the console. */
  g_assert_cmpstr (why, ==, "The guest did not boot");

  /* A failed wish is not retried by itself. */
  guint64 gen = client_get_u64 (f->client, path, "DesiredGeneration");
  client_settle (f->client, 300);
  g_free (state);
  state = client_get_string (f->client, path, "State");
  g_assert_cmpstr (state, ==, "Failed");
  g_assert_cmpuint (client_get_u64 (f->client, path, "DesiredGeneration"), ==, gen);

  /* Stop clears it. */
  g_free (err);
  err = client_machine_call (f->client, path, "Stop", NULL);
  g_assert_null (err);
  g_free (state);
  state = client_get_string (f->client, path, "State");
  g_assert_cmpstr (state, ==, "Stopped");
}

static gboolean
reply_arrived (Client *client, gpointer data)
{
  return *(sd_bus_message **) data != NULL;
}

static int
on_async_reply (sd_bus_message *m, void *userdata, sd_bus_error *error)
{
  *(sd_bus_message **) userdata = sd_bus_message_ref (m);
  return 1;
}

/* ListMachines as one line per machine: "name:state", in its order. */
static char *
listing_text (Fixture *f)
{
  g_autoptr (sd_bus_message) list = client_call (f->client, MV_MANAGER_PATH, MV_MANAGER_IFACE,
                                                 "ListMachines", NULL, NULL, NULL);
  g_autoptr (GString) text = g_string_new (NULL);
  const char *id, *name, *state, *path;
  int r;

  g_assert_cmpint (sd_bus_message_enter_container (list, 'a', "(ssso)"), >=, 0);
  while ((r = sd_bus_message_read (list, "(ssso)", &id, &name, &state, &path)) > 0)
    {
      g_autofree char *expected = NULL;

      g_assert_cmpint (sd_bus_path_encode (MV_MACHINE_PREFIX, id, &expected), >=, 0);
      g_assert_cmpstr (path, ==, expected);
      g_string_append_printf (text, "%s%s:%s", text->len ? " " : "", name, state);
    }
  g_assert_cmpint (r, ==, 0);
  return g_string_free (g_steal_pointer (&text), FALSE);
}

#define assert_listing(f, expected)                  \
  G_STMT_START {                                     \
    g_autofree char *listed_ = listing_text (f);     \
    g_assert_cmpstr (listed_, ==, (expected));       \
  } G_STMT_END

/* The listing, asked for after each change, follows every kind of change:
 * a machine created, started, stopped, renamed and deleted. */
static void
test_listing_follows (Fixture *f, gconstpointer data)
{
  g_autofree char *c = client_create_ok (f->client, SPEC ("c"));
  g_autofree char *a = client_create_ok (f->client, SPEC ("a"));
  g_autofree char *b = NULL;
  g_autoptr (sd_bus_message) renamed = NULL;
  g_autoptr (sd_bus_message) deleted = NULL;

  assert_listing (f, "a:Stopped c:Stopped");
  b = client_create_ok (f->client, SPEC ("b"));
  assert_listing (f, "a:Stopped b:Stopped c:Stopped");
  client_call_ok (f->client, b, "Start");
  assert_listing (f, "a:Stopped b:Running c:Stopped");
  renamed = client_call (f->client, a, MV_MACHINE_IFACE, "Rename", NULL, NULL, "s", "d");
  g_assert_nonnull (renamed);
  assert_listing (f, "b:Running c:Stopped d:Stopped");
  client_call_ok (f->client, b, "Stop");
  assert_listing (f, "b:Stopped c:Stopped d:Stopped");
  deleted = client_call (f->client, c, MV_MACHINE_IFACE, "Delete", NULL, NULL, "b", 0);
  g_assert_nonnull (deleted);
  assert_listing (f, "b:Stopped d:Stopped");
}

/* The path GetMachine gives for @name, or NULL with the error's name in
 * @err. */
static char *
machine_by_name (Fixture *f, const char *name, char **err)
{
  g_autoptr (sd_bus_message) reply = client_call (f->client, MV_MANAGER_PATH, MV_MANAGER_IFACE,
                                                  "GetMachine", err, NULL, "s", name);
  const char *path = NULL;

  if (!reply)
    return NULL;
  g_assert_cmpint (sd_bus_message_read (reply, "o", &path), >=, 0);
  return g_strdup (path);
}

#define assert_no_machine_called(f, name)                      \
  G_STMT_START {                                               \
    g_autofree char *err_ = NULL;                              \
    g_autofree char *path_ = machine_by_name ((f), (name), &err_); \
    g_assert_null (path_);                                     \
    g_assert_cmpstr (err_, ==, MV_BUS_ERROR_NOT_FOUND);        \
  } G_STMT_END

/* A machine is found by the name it has now: after a rename by its new
 * name and not its old one, which is free again; after a delete not at
 * all; and the same after the daemon starts again from the records. */
static void
test_names_follow (Fixture *f, gconstpointer data)
{
  g_autofree char *a = client_create_ok (f->client, SPEC ("first"));
  g_autofree char *b = client_create_ok (f->client, SPEC ("second"));
  g_autofree char *err = NULL;
  g_autofree char *found = NULL, *again = NULL, *reborn = NULL, *clash = NULL;
  g_autoptr (sd_bus_message) renamed = NULL, deleted = NULL;

  renamed = client_call (f->client, a, MV_MACHINE_IFACE, "Rename", NULL, NULL, "s", "third");
  g_assert_nonnull (renamed);
  assert_no_machine_called (f, "first");
  found = machine_by_name (f, "third", NULL);
  g_assert_cmpstr (found, ==, a);
  clash = client_create (f->client, SPEC ("third"), 0, &err, NULL);
  g_assert_null (clash);
  g_assert_cmpstr (err, ==, MV_BUS_ERROR_ALREADY_EXISTS);
  reborn = client_create_ok (f->client, SPEC ("first"));
  g_assert_cmpstr (reborn, !=, a);

  deleted = client_call (f->client, b, MV_MACHINE_IFACE, "Delete", NULL, NULL, "b", 0);
  g_assert_nonnull (deleted);
  assert_no_machine_called (f, "second");

  client_free (f->client);
  mv_test_env_stop_daemon (f->env, SIGTERM);
  mv_test_env_start_daemon (f->env, NULL);
  f->client = client_new (f->env);
  g_clear_pointer (&found, g_free);
  found = machine_by_name (f, "third", NULL);
  g_assert_cmpstr (found, ==, a);
  again = machine_by_name (f, "first", NULL);
  g_assert_cmpstr (again, ==, reborn);
  assert_no_machine_called (f, "second");
  g_free (client_create_ok (f->client, SPEC ("second")));
}

static void
test_bus_serves_while_starting (Fixture *f, gconstpointer data)
{
  const char *spec = "{\"name\":\"slow\",\"hypervisor_type\":\"test\",\"kernel\":\"/k\",\"kernel_args\":\"test.start-delay-ms=1500\"}";
  g_autofree char *path = client_create (f->client, spec, 0, NULL, NULL);
  sd_bus_message *start_reply = NULL;

  g_assert_cmpint (sd_bus_call_method_async (f->client->bus, NULL, MV_BUS_NAME, path,
                                             MV_MACHINE_IFACE, "Start", on_async_reply,
                                             &start_reply, NULL), >=, 0);
  client_settle (f->client, 100);

  /* While the start is under way, reads and other calls are answered. */
  g_autoptr (sd_bus_message) list = client_call (f->client, MV_MANAGER_PATH, MV_MANAGER_IFACE,
                                                 "ListMachines", NULL, NULL, NULL);
  g_assert_nonnull (list);
  g_autofree char *state = client_get_string (f->client, path, "State");
  g_autofree char *phase = client_get_string (f->client, path, "Phase");
  g_autofree char *op = client_get_string (f->client, path, "OperationId");
  g_assert_null (start_reply);
  g_assert_cmpstr (state, ==, "Starting");
  g_assert_cmpstr (phase, ==, "start");
  g_assert_cmpuint (strlen (op), >, 0);

  g_assert_true (client_wait (f->client, reply_arrived, &start_reply, 20000));
  g_assert_false (sd_bus_message_is_method_error (start_reply, NULL));
  sd_bus_message_unref (start_reply);
  g_free (state);
  state = client_get_string (f->client, path, "State");
  g_assert_cmpstr (state, ==, "Running");
  g_free (phase);
  phase = client_get_string (f->client, path, "Phase");
  g_assert_cmpstr (phase, ==, "");
}

static char *
vmm_state_file (Fixture *f, const char *path)
{
  g_autofree char *id = client_get_string (f->client, path, "Id");
  return g_build_filename (mv_test_env_runtime_dir (f->env), "machines", id, "test-vmm.state", NULL);
}

static void
test_vmm_ends_by_itself (Fixture *f, gconstpointer data)
{
  g_autofree char *p1 = client_create (f->client, SPEC ("ends"), 1, NULL, NULL);
  g_autofree char *p2 = client_create (f->client, SPEC ("crashes"), 1, NULL, NULL);
  g_autofree char *s1 = vmm_state_file (f, p1);
  g_autofree char *s2 = vmm_state_file (f, p2);
  g_autofree char *state = client_get_string (f->client, p1, "State");

  /* CREATE_START replies once the machine runs. */
  g_assert_cmpstr (state, ==, "Running");

  g_assert_true (g_file_set_contents (s1, "exited 0", -1, NULL));
  g_assert_true (g_file_set_contents (s2, "crashed", -1, NULL));
  client_assert_state_soon (f->client, p1, "Stopped", 10000);
  client_assert_state_soon (f->client, p2, "Failed", 10000);
  g_assert_cmpint (client_get_i32 (f->client, p1, "ExitCode"), ==, 0);
  g_autofree char *desired = client_get_string (f->client, p1, "DesiredState");
  g_assert_cmpstr (desired, ==, "stopped");
  g_autofree char *why = client_get_string (f->client, p2, "StateError");
  g_assert_nonnull (strstr (why, "crashed"));
}

static void
test_delete (Fixture *f, gconstpointer data)
{
  g_autofree char *path = client_create (f->client, SPEC ("doomed"), 1, NULL, NULL);
  g_autofree char *id = client_get_string (f->client, path, "Id");
  g_autofree char *dir = g_build_filename (mv_test_env_state_dir (f->env), "machines", id, NULL);
  g_autofree char *err = NULL, *msg = NULL;
  g_autoptr (sd_bus_message) r1 = client_call (f->client, path, MV_MACHINE_IFACE, "Delete",
                                               &err, &msg, "b", 0);

  /* A running machine is not deleted without force. */
  g_assert_null (r1);
  g_assert_cmpstr (err, ==, MV_BUS_ERROR_INVALID_STATE);
  g_assert_true (g_file_test (dir, G_FILE_TEST_IS_DIR));

  client_clear_signals (f->client);
  g_autoptr (sd_bus_message) r2 = client_call (f->client, path, MV_MACHINE_IFACE, "Delete",
                                               NULL, NULL, "b", 1);
  g_assert_nonnull (r2);
  g_assert_false (g_file_test (dir, G_FILE_TEST_EXISTS));
  client_settle (f->client, 200);
  g_assert_cmpuint (client_count_signals (f->client, MV_MANAGER_PATH, "InterfacesRemoved"), ==, 1);
  /* It names the machine's interface, so that an ObjectManager client
   * knows the machine is gone. */
  g_assert_cmpuint (client_count_removed (f->client, path, MV_MACHINE_IFACE), ==, 1);
  g_assert_cmpuint (client_count_signals (f->client, MV_MANAGER_PATH, "MachineRemoved"), ==, 1);

  g_autofree char *err2 = NULL;
  g_autoptr (sd_bus_message) r3 = client_call (f->client, MV_MANAGER_PATH, MV_MANAGER_IFACE,
                                               "GetMachine", &err2, NULL, "s", "doomed");
  g_assert_null (r3);
  g_assert_cmpstr (err2, ==, MV_BUS_ERROR_NOT_FOUND);
  g_autofree char *rundir = g_build_filename (mv_test_env_runtime_dir (f->env), "machines", id, NULL);
  g_assert_false (g_file_test (rundir, G_FILE_TEST_EXISTS));
}

static void
test_update_and_rename (Fixture *f, gconstpointer data)
{
  g_autofree char *path = client_create (f->client, SPEC ("upd"), 0, NULL, NULL);
  guint64 spec_gen = client_get_u64 (f->client, path, "SpecificationGeneration");
  g_autofree char *err = NULL;

  /* A standby time alone does not raise the specification generation. */
  g_autoptr (sd_bus_message) r1 = client_call (f->client, path, MV_MACHINE_IFACE, "Update", &err, NULL, "s",
    "{\"name\":\"upd\",\"hypervisor_type\":\"test\",\"kernel\":\"/boot/vmlinuz\",\"standby_after_seconds\":120}");
  g_assert_nonnull (r1);
  g_assert_cmpuint (client_get_u64 (f->client, path, "SpecificationGeneration"), ==, spec_gen);

  g_autoptr (sd_bus_message) r2 = client_call (f->client, path, MV_MACHINE_IFACE, "Update", &err, NULL, "s",
    "{\"name\":\"upd\",\"hypervisor_type\":\"test\",\"kernel\":\"/boot/vmlinuz\",\"standby_after_seconds\":120,\"cpu_millicores\":1500}");
  g_assert_nonnull (r2);
  g_assert_cmpuint (client_get_u64 (f->client, path, "SpecificationGeneration"), ==, spec_gen + 1);
  g_assert_cmpuint (client_get_u32 (f->client, path, "VCPUs"), ==, 2);

  /* A bad update changes nothing. */
  g_autoptr (sd_bus_message) r3 = client_call (f->client, path, MV_MACHINE_IFACE, "Update", &err, NULL, "s",
    "{\"name\":\"upd\",\"hypervisor_type\":\"test\",\"kernel\":\"/boot/vmlinuz\",\"cpu_millicores\":0}");
  g_assert_null (r3);
  g_assert_cmpstr (err, ==, MV_BUS_ERROR_INVALID_ARGUMENT);
  g_assert_cmpuint (client_get_u32 (f->client, path, "VCPUs"), ==, 2);

  g_autoptr (sd_bus_message) r4 = client_call (f->client, path, MV_MACHINE_IFACE, "Rename", NULL, NULL, "s", "renamed");
  g_assert_nonnull (r4);
  g_autofree char *name = client_get_string (f->client, path, "Name");
  g_assert_cmpstr (name, ==, "renamed");

  g_clear_pointer (&err, g_free);
  g_autoptr (sd_bus_message) r5 = client_call (f->client, path, MV_MACHINE_IFACE, "Rename", &err, NULL, "s", "no/slash");
  g_assert_null (r5);
  g_assert_cmpstr (err, ==, MV_BUS_ERROR_INVALID_ARGUMENT);

  /* A running machine keeps its shape. */
  g_free (client_machine_call (f->client, path, "Start", NULL));
  g_clear_pointer (&err, g_free);
  g_autoptr (sd_bus_message) r6 = client_call (f->client, path, MV_MACHINE_IFACE, "Update", &err, NULL, "s",
    "{\"name\":\"renamed\",\"hypervisor_type\":\"test\",\"kernel\":\"/boot/vmlinuz\",\"cpu_millicores\":1000}");
  g_assert_null (r6);
  g_assert_cmpstr (err, ==, MV_BUS_ERROR_INVALID_STATE);
}

static void
test_restart_finds_machines (Fixture *f, gconstpointer data)
{
  g_autofree char *p1 = client_create (f->client, SPEC ("keep-running"), 1, NULL, NULL);
  g_autofree char *p2 = client_create (f->client, SPEC ("keep-stopped"), 0, NULL, NULL);
  g_autofree char *p3 = client_create (f->client, SPEC ("keep-paused"), 1, NULL, NULL);
  g_free (client_machine_call (f->client, p3, "Pause", NULL));
  g_autofree char *started = g_strdup_printf ("%" G_GUINT64_FORMAT,
                                              client_get_u64 (f->client, p1, "StartedAt"));

  client_free (f->client);
  mv_test_env_stop_daemon (f->env, SIGTERM);
  mv_test_env_start_daemon (f->env, NULL);
  f->client = client_new (f->env);

  g_autofree char *s1 = client_get_string (f->client, p1, "State");
  g_autofree char *s2 = client_get_string (f->client, p2, "State");
  g_autofree char *s3 = client_get_string (f->client, p3, "State");
  g_assert_cmpstr (s1, ==, "Running");
  g_assert_cmpstr (s2, ==, "Stopped");
  g_assert_cmpstr (s3, ==, "Paused");
  /* Adopted, not booted again. */
  g_autofree char *again = g_strdup_printf ("%" G_GUINT64_FORMAT,
                                            client_get_u64 (f->client, p1, "StartedAt"));
  g_assert_cmpstr (started, ==, again);

  /* After a crash of the daemon too, and a VMM that ended meanwhile is Failed. */
  g_autofree char *vmm = vmm_state_file (f, p3);
  client_free (f->client);
  mv_test_env_stop_daemon (f->env, SIGKILL);
  g_assert_cmpint (g_unlink (vmm), ==, 0);
  mv_test_env_start_daemon (f->env, NULL);
  f->client = client_new (f->env);
  g_free (s1);
  s1 = client_get_string (f->client, p1, "State");
  g_assert_cmpstr (s1, ==, "Running");
  g_free (s3);
  s3 = client_get_string (f->client, p3, "State");
  g_assert_cmpstr (s3, ==, "Failed");
  g_free (client_machine_call (f->client, p1, "Stop", NULL));
  g_free (s1);
  s1 = client_get_string (f->client, p1, "State");
  g_assert_cmpstr (s1, ==, "Stopped");
}

static void
test_invalid_record_reported (Fixture *f, gconstpointer data)
{
  g_autofree char *good = client_create (f->client, SPEC ("good"), 0, NULL, NULL);
  g_autofree char *bad = client_create (f->client, SPEC ("bad"), 0, NULL, NULL);
  g_autofree char *bad_id = client_get_string (f->client, bad, "Id");
  g_autofree char *config = g_build_filename (mv_test_env_state_dir (f->env), "machines", bad_id,
                                              "config.json", NULL);
  const char *corrupt = "{\"format\": 2, \"id\": \"";
  GStatBuf before, after;

  client_free (f->client);
  mv_test_env_stop_daemon (f->env, SIGTERM);
  g_assert_true (g_file_set_contents (config, corrupt, -1, NULL));
  g_assert_cmpint (g_stat (config, &before), ==, 0);

  mv_test_env_start_daemon (f->env, NULL);
  f->client = client_new (f->env);

  g_autoptr (sd_bus_message) reply = NULL;
  sd_bus_error error = SD_BUS_ERROR_NULL;
  g_assert_cmpint (sd_bus_get_property (f->client->bus, MV_BUS_NAME, MV_MANAGER_PATH,
                                        MV_MANAGER_IFACE, "InvalidRecords", &error, &reply,
                                        "a(ss)"), >=, 0);
  const char *rpath, *reason;
  g_assert_cmpint (sd_bus_message_enter_container (reply, 'a', "(ss)"), >=, 0);
  g_assert_cmpint (sd_bus_message_read (reply, "(ss)", &rpath, &reason), >, 0);
  g_assert_nonnull (strstr (rpath, bad_id));
  g_assert_cmpuint (strlen (reason), >, 0);
  g_assert_cmpint (sd_bus_message_read (reply, "(ss)", &rpath, &reason), ==, 0);

  /* Untouched, and the rest of the host works. */
  g_autofree char *contents = NULL;
  g_assert_true (g_file_get_contents (config, &contents, NULL, NULL));
  g_assert_cmpstr (contents, ==, corrupt);
  g_assert_cmpint (g_stat (config, &after), ==, 0);
  g_assert_cmpint (before.st_mtime, ==, after.st_mtime);
  g_autofree char *err = client_machine_call (f->client, good, "Start", NULL);
  g_assert_null (err);
  g_autofree char *err2 = NULL;
  g_autoptr (sd_bus_message) r = client_call (f->client, MV_MANAGER_PATH, MV_MANAGER_IFACE,
                                              "GetMachine", &err2, NULL, "s", "bad");
  g_assert_cmpstr (err2, ==, MV_BUS_ERROR_NOT_FOUND);
}

/* The version the manager's Hypervisors lists for qemu; NULL: none. */
static char *
listed_qemu_version (Fixture *f)
{
  g_autoptr (sd_bus_message) r = NULL;
  sd_bus_error error = SD_BUS_ERROR_NULL;
  const char *type, *version;

  g_assert_cmpint (sd_bus_get_property (f->client->bus, MV_BUS_NAME, MV_MANAGER_PATH,
                                        MV_MANAGER_IFACE, "Hypervisors", &error, &r, "a(ss)"),
                   >=, 0);
  g_assert_cmpint (sd_bus_message_enter_container (r, 'a', "(ss)"), >, 0);
  while (sd_bus_message_read (r, "(ss)", &type, &version) > 0)
    if (g_str_equal (type, "qemu"))
      return g_strdup (version);
  return NULL;
}

/* A stand-in for qemu-system-x86_64 at @path that says it is @version and
 * adds a line to @asked each time it is run; put in place whole, as a
 * package upgrade does. */
static void
write_qemu_stand_in (const char *path, const char *asked, const char *version)
{
  g_autofree char *script = g_strdup_printf ("#!/bin/sh\necho run >> '%s'\n"
                                             "echo 'QEMU emulator version %s (stand-in)'\n",
                                             asked, version);
  g_autofree char *next = g_strconcat (path, ".new", NULL);

  g_assert_true (g_file_set_contents (next, script, -1, NULL));
  g_assert_cmpint (g_chmod (next, 0755), ==, 0);
  g_assert_cmpint (g_rename (next, path), ==, 0);
}

static guint
times_asked (const char *asked)
{
  g_autofree char *text = NULL;
  guint lines = 0;

  if (!g_file_get_contents (asked, &text, NULL, NULL))
    return 0;
  for (const char *p = text; *p; p++)
    lines += *p == '\n';
  return lines;
}

/* QEMU is asked its version once per binary: a restarted daemon takes it
 * from the runtime directory, and asks again once the binary is another. */
static void
test_qemu_version_remembered (Fixture *f, gconstpointer data)
{
  const char *dir = mv_test_env_dir (f->env);
  g_autofree char *qemu = g_build_filename (dir, "qemu-stand-in", NULL);
  g_autofree char *asked = g_build_filename (dir, "qemu-asked", NULL);
  g_autoptr (GKeyFile) config = g_key_file_new ();
  g_autofree char *text = NULL, *first = NULL, *again = NULL, *upgraded = NULL;

  write_qemu_stand_in (qemu, asked, "9.9.1");
  g_assert_true (g_key_file_load_from_file (config, mv_test_env_config_path (f->env),
                                            G_KEY_FILE_NONE, NULL));
  g_key_file_set_string (config, "qemu", "binary", qemu);
  text = g_key_file_to_data (config, NULL, NULL);
  mv_test_env_stop_daemon (f->env, SIGTERM);
  mv_test_env_write_config (f->env, text);

  mv_test_env_start_daemon (f->env, NULL);
  first = listed_qemu_version (f);
  g_assert_cmpstr (first, ==, "9.9.1");
  g_assert_cmpuint (times_asked (asked), ==, 1);

  mv_test_env_stop_daemon (f->env, SIGTERM);
  mv_test_env_start_daemon (f->env, NULL);
  again = listed_qemu_version (f);
  g_assert_cmpstr (again, ==, "9.9.1");
  g_assert_cmpuint (times_asked (asked), ==, 1);

  mv_test_env_stop_daemon (f->env, SIGTERM);
  write_qemu_stand_in (qemu, asked, "9.9.2");
  mv_test_env_start_daemon (f->env, NULL);
  upgraded = listed_qemu_version (f);
  g_assert_cmpstr (upgraded, ==, "9.9.2");
  g_assert_cmpuint (times_asked (asked), ==, 2);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);

#define ADD(name, fn) g_test_add ("/lifecycle/" name, Fixture, NULL, fixture_setup, fn, fixture_teardown)
  ADD ("create-announces-object", test_create_announces_object);
  ADD ("start-stop-signals", test_start_stop_signals);
  ADD ("changes-coalesced", test_changes_coalesced);
  ADD ("changes-only-what-changed", test_changes_only_what_changed);
  g_test_add ("/lifecycle/start-maps-no-feature-library", Fixture,
              "[prometheus]\nlisten=\n[console]\nlisten=\n", fixture_setup,
              test_start_maps_no_feature_library, fixture_teardown);
  ADD ("invalid-spec-leaves-nothing", test_invalid_spec_leaves_nothing);
  ADD ("unimplemented-fields-refused", test_unimplemented_fields_refused);
  ADD ("idempotent-create", test_idempotent_create);
  ADD ("creates-at-once", test_creates_at_once);
  ADD ("failed-start", test_failed_start);
  ADD ("bus-serves-while-starting", test_bus_serves_while_starting);
  ADD ("listing-follows", test_listing_follows);
  ADD ("names-follow", test_names_follow);
  ADD ("vmm-ends-by-itself", test_vmm_ends_by_itself);
  ADD ("delete", test_delete);
  ADD ("update-and-rename", test_update_and_rename);
  ADD ("restart-finds-machines", test_restart_finds_machines);
  ADD ("invalid-record-reported", test_invalid_record_reported);
  ADD ("qemu-version-remembered", test_qemu_version_remembered);
  return g_test_run ();
}
