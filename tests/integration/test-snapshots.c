/* Snapshots through the daemon, on the test runtime: the objects and
 * their properties, memory snapshots of running, paused and standby
 * machines, restore and fork with their refusals, snapshots outliving
 * their machine, deletion, records across a restart and an invalid one
 * left alone, a full disk, and a crash at every phase of taking,
 * restoring, forking and deleting one. */
#include "bus-client.h"
#include "names.h"

#include <errno.h>
#include <sys/mount.h>
#include <glib/gstdio.h>

#define SPEC(name) "{\"name\":\"" name "\",\"hypervisor_type\":\"test\",\"kernel\":\"/boot/vmlinuz\"}"
#define SPEC_ARGS(name, args) "{\"name\":\"" name "\",\"hypervisor_type\":\"test\"," \
  "\"kernel\":\"/boot/vmlinuz\",\"kernel_args\":\"" args "\"}"

/* ---- helpers ---- */

static char *
snapshot_string (Fixture *f, const char *path, const char *prop)
{
  sd_bus_error error = SD_BUS_ERROR_NULL;
  char *value = NULL;

  g_assert_cmpint (sd_bus_get_property_string (f->client->bus, MV_BUS_NAME, path,
                                               MV_SNAPSHOT_IFACE, prop, &error, &value), >=, 0);
  return value;
}

/* CreateSnapshot: its path, or NULL with the error's name. */
static char *
take (Fixture *f, const char *machine, const char *name, char **error_name)
{
  g_autofree char *message = NULL;
  g_autoptr (sd_bus_message) reply = client_call (f->client, machine, MV_MACHINE_IFACE,
                                                  "CreateSnapshot", error_name, &message, "s",
                                                  name);
  const char *path = NULL;

  if (!reply)
    {
      g_test_message ("CreateSnapshot %s: %s", name, message);
      return NULL;
    }
  g_assert_cmpint (sd_bus_message_read (reply, "o", &path), >, 0);
  return g_strdup (path);
}

static char *
take_ok (Fixture *f, const char *machine, const char *name)
{
  g_autofree char *err = NULL;
  char *path = take (f, machine, name, &err);

  g_assert_cmpstr (err, ==, NULL);
  return path;
}

/* A no-argument Snapshot method; the error's name or NULL. */
static char *
snapshot_call (Fixture *f, const char *path, const char *member)
{
  char *error_name = NULL;
  g_autofree char *message = NULL;
  g_autoptr (sd_bus_message) reply = client_call (f->client, path, MV_SNAPSHOT_IFACE, member,
                                                  &error_name, &message, NULL);

  if (!reply)
    g_test_message ("%s %s: %s", member, path, message);
  return error_name;
}

/* Snapshot.Fork, or ForkMachine with @source: the new machine's path. */
static char *
fork_from (Fixture *f, const char *snapshot, const char *source, const char *json,
           char **error_name)
{
  g_autofree char *message = NULL;
  g_autoptr (sd_bus_message) reply =
    snapshot ? client_call (f->client, snapshot, MV_SNAPSHOT_IFACE, "Fork", error_name, &message,
                            "s", json)
             : client_call (f->client, MV_MANAGER_PATH, MV_MANAGER_IFACE, "ForkMachine",
                            error_name, &message, "ss", source, json);
  const char *path = NULL;

  if (!reply)
    {
      g_test_message ("Fork %s: %s", json, message);
      return NULL;
    }
  g_assert_cmpint (sd_bus_message_read (reply, "o", &path), >, 0);
  return g_strdup (path);
}

static guint
count_snapshots (Fixture *f)
{
  return client_count_listed (f->client, "ListSnapshots");
}

static guint
count_machines (Fixture *f)
{
  return client_count_listed (f->client, "ListMachines");
}

static char *
snapshots_dir (Fixture *f)
{
  return g_build_filename (mv_test_env_state_dir (f->env), MV_SNAPSHOTS_DIR, NULL);
}

/* What is in the snapshots directory: the whole ones, and nothing staged
 * or half removed. */
static guint
count_snapshot_dirs (Fixture *f)
{
  g_autofree char *dir = snapshots_dir (f);
  g_autoptr (GDir) d = g_dir_open (dir, 0, NULL);
  const char *name;
  guint n = 0;

  while (d && (name = g_dir_read_name (d)))
    {
      g_autofree char *record = g_build_filename (dir, name, "snapshot.json", NULL);

      g_assert_false (name[0] == '.');
      g_assert_true (g_file_test (record, G_FILE_TEST_IS_REGULAR));
      n++;
    }
  return n;
}

static char *
get_path (Fixture *f, const char *member, const char *name)
{
  g_autoptr (sd_bus_message) reply = client_call (f->client, MV_MANAGER_PATH, MV_MANAGER_IFACE,
                                                  member, NULL, NULL, "s", name);
  const char *path = NULL;

  if (!reply)
    return NULL;
  g_assert_cmpint (sd_bus_message_read (reply, "o", &path), >, 0);
  return g_strdup (path);
}

/* The kinds of the events told of the machine called @name, in order,
 * one per line. */
static char *
events_of (Fixture *f, const char *name)
{
  g_autoptr (sd_bus_message) reply = client_call (f->client, MV_MANAGER_PATH, MV_MANAGER_IFACE,
                                                  "GetEvents", NULL, NULL, "t", (guint64) 0);
  GString *kinds = g_string_new (NULL);
  const char *kind, *id, *machine, *operation, *message;
  guint64 sequence, time;

  g_assert_nonnull (reply);
  g_assert_cmpint (sd_bus_message_enter_container (reply, 'a', "(ttsssssa{sv})"), >, 0);
  while (sd_bus_message_enter_container (reply, 'r', "ttsssssa{sv}") > 0)
    {
      g_assert_cmpint (sd_bus_message_read (reply, "ttsssss", &sequence, &time, &kind, &id,
                                            &machine, &operation, &message), >, 0);
      g_assert_cmpint (sd_bus_message_skip (reply, "a{sv}"), >=, 0);
      g_assert_cmpint (sd_bus_message_exit_container (reply), >=, 0);
      if (g_str_equal (machine, name))
        g_string_append_printf (kinds, "%s\n", kind);
    }
  return g_string_free (kinds, FALSE);
}

static void
snapshot_teardown (Fixture *f, gconstpointer data)
{
  client_delete_all (f->client);
  fixture_teardown (f, data);
}

/* ---- the tests ---- */

/* A running machine gives a memory snapshot and runs on; the object is
 * announced, and its properties say what it is. */
static void
test_running (Fixture *f, gconstpointer data)
{
  g_autofree char *machine = client_create_ok (f->client, SPEC ("web"));
  g_autofree char *path = NULL, *kind = NULL, *name = NULL, *mid = NULL, *mname = NULL;
  g_autofree char *id = NULL, *spec = NULL, *type = NULL, *state = NULL, *found = NULL;
  g_autofree char *record = NULL, *frozen = NULL;

  {
    sd_bus_error error = SD_BUS_ERROR_NULL;
    g_auto (GStrv) features = NULL;

    g_assert_cmpint (sd_bus_get_property_strv (f->client->bus, MV_BUS_NAME, MV_MANAGER_PATH,
                                               MV_MANAGER_IFACE, "Features", &error, &features),
                     >=, 0);
    g_assert_true (g_strv_contains ((const char *const *) features, "snapshots"));
  }
  client_call_ok (f->client, machine, "Start");
  client_clear_signals (f->client);
  path = take_ok (f, machine, "before");
  client_settle (f->client, 200);
  g_assert_cmpuint (client_count_announced (f->client, "InterfacesAdded", path), ==, 1);

  kind = snapshot_string (f, path, "Kind");
  name = snapshot_string (f, path, "Name");
  mid = snapshot_string (f, path, "MachineId");
  mname = snapshot_string (f, path, "MachineName");
  id = snapshot_string (f, path, "Id");
  spec = snapshot_string (f, path, "Spec");
  type = snapshot_string (f, path, "HypervisorType");
  g_assert_cmpstr (kind, ==, "memory");
  g_assert_cmpstr (name, ==, "before");
  g_autofree char *machine_id = client_get_string (f->client, machine, "Id");
  g_assert_cmpstr (mid, ==, machine_id);
  g_assert_cmpstr (mname, ==, "web");
  g_assert_cmpstr (type, ==, "test");
  g_assert_nonnull (strstr (spec, "\"name\":\"web\""));

  /* The guest runs on; the snapshot is whole on disk. */
  state = client_get_string (f->client, machine, "State");
  g_assert_cmpstr (state, ==, "Running");
  g_autofree char *vmm_state = fixture_runtime_file (f, machine, "test-vmm.state");
  g_autofree char *contents = NULL;
  g_assert_true (g_file_get_contents (vmm_state, &contents, NULL, NULL));
  g_assert_cmpstr (g_strstrip (contents), ==, "running");
  record = g_build_filename (mv_test_env_state_dir (f->env), MV_SNAPSHOTS_DIR, id,
                             "snapshot.json", NULL);
  frozen = g_build_filename (mv_test_env_state_dir (f->env), MV_SNAPSHOTS_DIR, id, "state",
                             "guest.frozen", NULL);
  g_assert_true (g_file_test (record, G_FILE_TEST_IS_REGULAR));
  g_assert_true (g_file_test (frozen, G_FILE_TEST_IS_REGULAR));
  g_assert_cmpuint (count_snapshot_dirs (f), ==, 1);

  /* Found by name and by ID, listed. */
  found = get_path (f, "GetSnapshot", "before");
  g_assert_cmpstr (found, ==, path);
  g_free (found);
  found = get_path (f, "GetSnapshot", id);
  g_assert_cmpstr (found, ==, path);
  g_assert_null (get_path (f, "GetSnapshot", "nosuch"));
  g_assert_cmpuint (count_snapshots (f), ==, 1);

  /* A name given to none gets the machine's and the time. */
  g_autofree char *unnamed = take_ok (f, machine, "");
  g_autofree char *unnamed_name = snapshot_string (f, unnamed, "Name");
  g_assert_true (g_str_has_prefix (unnamed_name, "web-2"));
  g_assert_cmpuint (strlen (unnamed_name), ==, strlen ("web-20261201-221500"));
}

/* A paused machine stays paused; one on standby gives a snapshot of its
 * frozen guest without waking. */
static void
test_paused_and_standby (Fixture *f, gconstpointer data)
{
  g_autofree char *machine = client_create_ok (f->client, SPEC ("sleepy"));
  g_autofree char *a = NULL, *b = NULL, *state = NULL, *kind = NULL;

  client_call_ok (f->client, machine, "Start");
  client_call_ok (f->client, machine, "Pause");
  a = take_ok (f, machine, "paused");
  state = client_get_string (f->client, machine, "State");
  g_assert_cmpstr (state, ==, "Paused");
  g_autofree char *vmm_state = fixture_runtime_file (f, machine, "test-vmm.state");
  g_autofree char *contents = NULL;
  g_assert_true (g_file_get_contents (vmm_state, &contents, NULL, NULL));
  g_assert_cmpstr (g_strstrip (contents), ==, "paused");

  client_call_ok (f->client, machine, "Standby");
  b = take_ok (f, machine, "frozen");
  g_free (state);
  state = client_get_string (f->client, machine, "State");
  g_assert_cmpstr (state, ==, "Standby");
  kind = snapshot_string (f, b, "Kind");
  g_assert_cmpstr (kind, ==, "memory");
}

/* Each refusal changes nothing: no snapshot, nothing staged, the guest
 * as it was. */
static void
test_refusals (Fixture *f, gconstpointer data)
{
  g_autofree char *machine = client_create_ok (f->client, SPEC ("picky"));
  g_autofree char *busy = client_create_ok (f->client, SPEC_ARGS ("busy", "test.snapshot-busy"));
  g_autofree char *broken = client_create_ok (f->client,
                                              SPEC_ARGS ("broken", "test.fail-snapshot"));
  g_autofree char *err = NULL, *state = NULL;
  g_autofree char *long_name = g_strnfill (64, 'x');

  /* A stopped machine that boots no image has no disk of its own. */
  g_assert_null (take (f, machine, "cold", &err));
  g_assert_cmpstr (err, ==, MV_BUS_ERROR_INVALID_STATE);
  g_clear_pointer (&err, g_free);

  client_call_ok (f->client, machine, "Start");
  g_assert_null (take (f, machine, long_name, &err));
  g_assert_cmpstr (err, ==, MV_BUS_ERROR_INVALID_ARGUMENT);
  g_clear_pointer (&err, g_free);
  g_assert_null (take (f, machine, "a/b", &err));
  g_assert_cmpstr (err, ==, MV_BUS_ERROR_INVALID_ARGUMENT);
  g_clear_pointer (&err, g_free);

  g_autofree char *first = take_ok (f, machine, "once");
  g_assert_null (take (f, machine, "once", &err));
  g_assert_cmpstr (err, ==, MV_BUS_ERROR_ALREADY_EXISTS);
  g_clear_pointer (&err, g_free);

  /* Not yet: try again. */
  client_call_ok (f->client, busy, "Start");
  g_assert_null (take (f, busy, "early", &err));
  g_assert_cmpstr (err, ==, MV_BUS_ERROR_UNAVAILABLE);
  g_clear_pointer (&err, g_free);
  state = client_get_string (f->client, busy, "State");
  g_assert_cmpstr (state, ==, "Running");

  /* A failed snapshot leaves the guest running. */
  client_call_ok (f->client, broken, "Start");
  g_assert_null (take (f, broken, "never", &err));
  g_assert_cmpstr (err, ==, MV_BUS_ERROR_FAILED);
  g_clear_pointer (&err, g_free);
  g_free (state);
  state = client_get_string (f->client, broken, "State");
  g_assert_cmpstr (state, ==, "Running");
  g_autofree char *vmm_state = fixture_runtime_file (f, broken, "test-vmm.state");
  g_autofree char *contents = NULL;
  g_assert_true (g_file_get_contents (vmm_state, &contents, NULL, NULL));
  g_assert_cmpstr (g_strstrip (contents), ==, "running");

  /* A shared directory is not part of a frozen guest. */
  {
    g_autofree char *shared = client_create_ok (f->client,
      "{\"name\":\"sharing\",\"hypervisor_type\":\"test\",\"kernel\":\"/boot/vmlinuz\","
      "\"mounts\":[{\"type\":\"directory\",\"source\":\"/srv\",\"target\":\"/srv\"}]}");

    client_call_ok (f->client, shared, "Start");
    g_assert_null (take (f, shared, "shared", &err));
    g_assert_cmpstr (err, ==, MV_BUS_ERROR_UNSUPPORTED);
    g_clear_pointer (&err, g_free);
    g_assert_null (fork_from (f, NULL, "sharing", "{\"name\":\"sharing-copy\"}", &err));
    g_assert_cmpstr (err, ==, MV_BUS_ERROR_UNSUPPORTED);
    g_clear_pointer (&err, g_free);
  }

  g_assert_cmpuint (count_snapshots (f), ==, 1);
  g_assert_cmpuint (count_snapshot_dirs (f), ==, 1);
  /* The name of a refused one is free. */
  g_autofree char *later = take_ok (f, machine, "early");
  g_assert_nonnull (later);
}

/* Restore puts the spec and the guest back; it is refused unless the
 * machine is stopped. */
static void
test_restore (Fixture *f, gconstpointer data)
{
  g_autofree char *machine = client_create_ok (f->client, SPEC ("back"));
  g_autofree char *snapshot = NULL, *err = NULL, *state = NULL;
  g_autoptr (sd_bus_message) updated = NULL;

  client_call_ok (f->client, machine, "Start");
  snapshot = take_ok (f, machine, "good");

  err = snapshot_call (f, snapshot, "Restore");
  g_assert_cmpstr (err, ==, MV_BUS_ERROR_INVALID_STATE);
  g_clear_pointer (&err, g_free);
  client_call_ok (f->client, machine, "Standby");
  err = snapshot_call (f, snapshot, "Restore");
  g_assert_cmpstr (err, ==, MV_BUS_ERROR_INVALID_STATE);
  g_clear_pointer (&err, g_free);
  state = client_get_string (f->client, machine, "State");
  g_assert_cmpstr (state, ==, "Standby");

  /* Changed since, then put back. */
  client_call_ok (f->client, machine, "Stop");
  updated = client_call (f->client, machine, MV_MACHINE_IFACE, "Update", NULL, NULL, "s",
                         "{\"name\":\"back\",\"hypervisor_type\":\"test\","
                         "\"kernel\":\"/boot/vmlinuz\",\"memory_bytes\":536870912}");
  g_assert_nonnull (updated);
  g_assert_cmpuint (client_get_u64 (f->client, machine, "MemoryBytes"), ==, 512u << 20);
  err = snapshot_call (f, snapshot, "Restore");
  g_assert_cmpstr (err, ==, NULL);
  g_free (state);
  state = client_get_string (f->client, machine, "State");
  g_assert_cmpstr (state, ==, "Running");
  g_assert_cmpuint (client_get_u64 (f->client, machine, "MemoryBytes"), ==, 256u << 20);
  /* Woken from the snapshot's guest, not booted. */
  g_autofree char *vmm_state = fixture_runtime_file (f, machine, "test-vmm.state");
  g_assert_true (g_file_test (vmm_state, G_FILE_TEST_IS_REGULAR));
  g_autofree char *status_path = NULL;
  g_autofree char *id = client_get_string (f->client, machine, "Id");
  g_autofree char *status = NULL;
  status_path = g_build_filename (mv_test_env_state_dir (f->env), "machines", id, "status.json",
                                  NULL);
  g_assert_true (g_file_get_contents (status_path, &status, NULL, NULL));
  g_assert_nonnull (strstr (status, "\"restored\" : true"));
  g_assert_null (strstr (status, "restoring_snapshot"));

  /* A snapshot whose hypervisor version this host no longer has is
   * neither restored nor forked. */
  {
    g_autofree char *old = take_ok (f, machine, "old");
    g_autofree char *old_id = snapshot_string (f, old, "Id");
    g_autofree char *record = g_build_filename (mv_test_env_state_dir (f->env), MV_SNAPSHOTS_DIR,
                                                old_id, "snapshot.json", NULL);
    g_autofree char *text = NULL, *version = NULL, *changed = NULL, *pattern = NULL;
    g_autofree char *copy = NULL;

    version = snapshot_string (f, old, "HypervisorVersion");
    g_assert_true (g_file_get_contents (record, &text, NULL, NULL));
    pattern = g_strdup_printf ("\"hypervisor_version\" : \"%s\"", version);
    g_assert_nonnull (strstr (text, pattern));
    {
      g_auto (GStrv) parts = g_strsplit (text, pattern, 2);
      changed = g_strjoin ("\"hypervisor_version\" : \"0.0.1\"", parts[0], parts[1], NULL);
    }
    mv_test_env_stop_daemon (f->env, SIGTERM);
    g_assert_true (g_file_set_contents (record, changed, -1, NULL));
    mv_test_env_start_daemon (f->env, NULL);
    client_call_ok (f->client, machine, "Stop");
    g_free (err);
    err = snapshot_call (f, old, "Restore");
    g_assert_cmpstr (err, ==, MV_BUS_ERROR_UNAVAILABLE);
    g_clear_pointer (&err, g_free);
    copy = fork_from (f, old, NULL, "{\"name\":\"copy\"}", &err);
    g_assert_null (copy);
    g_assert_cmpstr (err, ==, MV_BUS_ERROR_UNAVAILABLE);
    g_free (state);
    state = client_get_string (f->client, machine, "State");
    g_assert_cmpstr (state, ==, "Stopped");
    g_assert_cmpuint (count_machines (f), ==, 1);
  }
}

/* Forks: their own machine, running; refused specs leave none behind. */
static void
test_fork (Fixture *f, gconstpointer data)
{
  g_autofree char *machine = client_create_ok (f->client, SPEC ("origin"));
  g_autofree char *snapshot = NULL, *err = NULL, *copy = NULL, *copy2 = NULL;
  g_autofree char *state = NULL, *id = NULL, *origin_id = NULL, *name = NULL, *origin_state = NULL;

  client_call_ok (f->client, machine, "Start");
  snapshot = take_ok (f, machine, "seed");

  g_assert_null (fork_from (f, snapshot, NULL, "{\"memory_bytes\":536870912}", &err));
  g_assert_cmpstr (err, ==, MV_BUS_ERROR_INVALID_ARGUMENT);
  g_clear_pointer (&err, g_free);
  g_assert_null (fork_from (f, snapshot, NULL, "{\"name\":\"origin\"}", &err));
  g_assert_cmpstr (err, ==, MV_BUS_ERROR_ALREADY_EXISTS);
  g_clear_pointer (&err, g_free);
  /* A running guest keeps its shape. */
  g_assert_null (fork_from (f, snapshot, NULL, "{\"name\":\"big\",\"memory_bytes\":536870912}",
                            &err));
  g_assert_cmpstr (err, ==, MV_BUS_ERROR_INVALID_ARGUMENT);
  g_clear_pointer (&err, g_free);
  /* ...and the hypervisor version that froze it. */
  g_assert_null (fork_from (f, snapshot, NULL, "{\"name\":\"other\",\"hypervisor_version\":"
                            "\"9.9.9\"}", &err));
  g_assert_cmpstr (err, ==, MV_BUS_ERROR_INVALID_ARGUMENT);
  g_clear_pointer (&err, g_free);
  g_assert_null (fork_from (f, snapshot, NULL, "[1]", &err));
  g_assert_cmpstr (err, ==, MV_BUS_ERROR_INVALID_ARGUMENT);
  g_clear_pointer (&err, g_free);
  g_assert_cmpuint (count_machines (f), ==, 1);

  copy = fork_from (f, snapshot, NULL, "{\"name\":\"copy\",\"labels\":{\"fork\":\"yes\"}}", &err);
  g_assert_cmpstr (err, ==, NULL);
  state = client_get_string (f->client, copy, "State");
  g_assert_cmpstr (state, ==, "Running");
  id = client_get_string (f->client, copy, "Id");
  origin_id = client_get_string (f->client, machine, "Id");
  g_assert_cmpstr (id, !=, origin_id);

  /* From the machine itself: the source runs on, no snapshot is kept,
   * and none it has (one named after it and this second) is in the way. */
  g_autofree char *same_second = take_ok (f, machine, "");
  copy2 = fork_from (f, NULL, "origin", "{\"name\":\"copy2\"}", &err);
  g_assert_cmpstr (err, ==, NULL);
  g_free (state);
  state = client_get_string (f->client, copy2, "State");
  g_assert_cmpstr (state, ==, "Running");
  origin_state = client_get_string (f->client, machine, "State");
  g_assert_cmpstr (origin_state, ==, "Running");
  g_assert_cmpuint (count_snapshots (f), ==, 2);
  g_assert_cmpuint (count_snapshot_dirs (f), ==, 2);
  g_assert_cmpuint (count_machines (f), ==, 3);

  /* A fork whose guest does not wake leaves no machine behind. */
  g_autofree char *bad = fork_from (f, snapshot, NULL, "{\"name\":\"bad\",\"kernel_args\":"
                                    "\"test.fail-restore\"}", &err);
  g_assert_null (bad);
  g_assert_nonnull (err);
  g_assert_cmpuint (count_machines (f), ==, 3);
  g_assert_cmpuint (count_machine_dirs (mv_test_env_state_dir (f->env)), ==, 3);
  name = client_get_string (f->client, copy, "Name");
  g_assert_cmpstr (name, ==, "copy");

  /* What happened is told: the source's snapshots, each fork made and
   * woken, the failed one gone. */
  {
    g_autofree char *origin_events = events_of (f, "origin");
    g_autofree char *copy_events = events_of (f, "copy");
    g_autofree char *bad_events = events_of (f, "bad");

    g_test_message ("origin: %s\ncopy: %s\nbad: %s", origin_events, copy_events, bad_events);
    g_assert_nonnull (strstr (origin_events, "snapshot-taken\n"));
    g_assert_nonnull (strstr (copy_events, "created\n"));
    g_assert_nonnull (strstr (copy_events, "forked\n"));
    g_assert_nonnull (strstr (bad_events, "deleted\n"));
  }
}

/* Snapshots outlive their machine; a restore then is refused, a fork
 * works; Delete removes one, announced. */
static void
test_outlive_and_delete (Fixture *f, gconstpointer data)
{
  g_autofree char *machine = client_create_ok (f->client, SPEC ("gone"));
  g_autofree char *snapshot = NULL, *err = NULL, *copy = NULL;
  g_autoptr (sd_bus_message) deleted = NULL;

  client_call_ok (f->client, machine, "Start");
  snapshot = take_ok (f, machine, "keep");
  deleted = client_call (f->client, machine, MV_MACHINE_IFACE, "Delete", NULL, NULL, "b", 1);
  g_assert_nonnull (deleted);
  g_assert_cmpuint (count_snapshots (f), ==, 1);

  err = snapshot_call (f, snapshot, "Restore");
  g_assert_cmpstr (err, ==, MV_BUS_ERROR_NOT_FOUND);
  g_clear_pointer (&err, g_free);
  copy = fork_from (f, snapshot, NULL, "{\"name\":\"heir\"}", &err);
  g_assert_cmpstr (err, ==, NULL);
  g_assert_nonnull (copy);

  client_clear_signals (f->client);
  err = snapshot_call (f, snapshot, "Delete");
  g_assert_cmpstr (err, ==, NULL);
  client_settle (f->client, 200);
  {
    g_autofree char *events = events_of (f, "gone");

    g_assert_nonnull (strstr (events, "snapshot-taken\n"));
    g_assert_nonnull (strstr (events, "snapshot-deleted\n"));
  }
  g_assert_cmpuint (client_count_announced (f->client, "InterfacesRemoved", snapshot), ==, 1);
  g_assert_cmpuint (count_snapshots (f), ==, 0);
  g_assert_cmpuint (count_snapshot_dirs (f), ==, 0);
  err = snapshot_call (f, snapshot, "Delete");
  g_assert_nonnull (err);
}

/* Records survive a restart; an invalid one is reported and left as it
 * is, byte for byte. */
static void
test_restart_and_invalid (Fixture *f, gconstpointer data)
{
  g_autofree char *machine = client_create_ok (f->client, SPEC ("lasting"));
  g_autofree char *snapshot = NULL, *id = NULL, *dir = NULL, *bad = NULL, *record = NULL;
  g_autofree char *after = NULL, *name = NULL, *invalid = NULL;
  sd_bus_error error = SD_BUS_ERROR_NULL;
  g_autoptr (sd_bus_message) reply = NULL;
  const char *rpath, *reason;
  guint n_invalid = 0;

  client_call_ok (f->client, machine, "Start");
  snapshot = take_ok (f, machine, "durable");
  id = snapshot_string (f, snapshot, "Id");

  dir = snapshots_dir (f);
  bad = g_build_filename (dir, "0123456789abcdef0123456789abcdef", NULL);
  g_assert_cmpint (g_mkdir (bad, 0700), ==, 0);
  record = g_build_filename (bad, "snapshot.json", NULL);
  g_assert_true (g_file_set_contents (record, "{\"format\":1,\"id\":", -1, NULL));

  mv_test_env_stop_daemon (f->env, SIGTERM);
  mv_test_env_start_daemon (f->env, NULL);
  after = get_path (f, "GetSnapshot", "durable");
  g_assert_cmpstr (after, ==, snapshot);
  name = snapshot_string (f, after, "MachineName");
  g_assert_cmpstr (name, ==, "lasting");
  g_assert_cmpuint (count_snapshots (f), ==, 1);

  g_assert_cmpint (sd_bus_get_property (f->client->bus, MV_BUS_NAME, MV_MANAGER_PATH,
                                        MV_MANAGER_IFACE, "InvalidRecords", &error, &reply,
                                        "a(ss)"), >=, 0);
  g_assert_cmpint (sd_bus_message_enter_container (reply, 'a', "(ss)"), >, 0);
  while (sd_bus_message_read (reply, "(ss)", &rpath, &reason) > 0)
    if (strstr (rpath, "0123456789abcdef0123456789abcdef"))
      n_invalid++;
  g_assert_cmpuint (n_invalid, ==, 1);
  g_assert_true (g_file_get_contents (record, &invalid, NULL, NULL));
  g_assert_cmpstr (invalid, ==, "{\"format\":1,\"id\":");
  g_assert_cmpint (g_unlink (record), ==, 0);
  g_assert_cmpint (g_rmdir (bad), ==, 0);
}

/* With the disk full, a snapshot is refused as such, nothing is left of
 * it, and the guest runs on. */
static void
test_full_disk (Fixture *f, gconstpointer data)
{
  g_autofree char *machine = client_create_ok (f->client, SPEC ("stuffed"));
  g_autofree char *dir = snapshots_dir (f);
  g_autofree char *filler = g_build_filename (dir, "filler", NULL);
  g_autofree char *err = NULL, *state = NULL;
  g_autofree char *block = g_malloc0 (4096);
  FILE *out;

  client_call_ok (f->client, machine, "Start");
  g_mkdir_with_parents (dir, 0700);
  g_assert_cmpint (mount ("tmpfs", dir, "tmpfs", 0, "size=64k,mode=0700"), ==, 0);
  out = fopen (filler, "w");
  g_assert_nonnull (out);
  while (fwrite (block, 1, 4096, out) == 4096 && fflush (out) == 0)
    ;
  fclose (out);

  g_assert_null (take (f, machine, "nospace", &err));
  g_assert_cmpstr (err, ==, MV_BUS_ERROR_RESOURCE_EXHAUSTED);
  state = client_get_string (f->client, machine, "State");
  g_assert_cmpstr (state, ==, "Running");
  g_assert_cmpuint (count_snapshots (f), ==, 0);
  {
    g_autoptr (GDir) d = g_dir_open (dir, 0, NULL);
    const char *name;

    while ((name = g_dir_read_name (d)))
      g_assert_cmpstr (name, ==, "filler");
  }
  g_assert_cmpint (umount (dir), ==, 0);
  g_autofree char *later = take_ok (f, machine, "nospace");
  g_assert_nonnull (later);
}

/* ---- a crash at every phase ---- */

typedef enum { OP_TAKE, OP_RESTORE, OP_FORK, OP_FORK_MACHINE, OP_DELETE } SweepOp;

typedef struct {
  const char *fault;
  SweepOp     op;
  gboolean    image;      /* a machine booted from an image: with a disk to copy */
} SweepCase;

static const SweepCase sweep_cases[] = {
  { "snapshot:recorded", OP_TAKE },
  { "snapshot:state-written", OP_TAKE },
  { "snapshot:resumed", OP_TAKE },
  { "snapshot:staged", OP_TAKE },
  { "snapshot:done", OP_TAKE },
  { "restore-snapshot:recorded", OP_RESTORE },
  { "put-back:disk", OP_RESTORE },
  { "put-back:state", OP_RESTORE },
  { "restore-snapshot:done", OP_RESTORE },
  { "restore:recorded", OP_RESTORE },
  { "fork:recorded", OP_FORK },
  { "put-back:state", OP_FORK },
  { "fork:done", OP_FORK },
  { "restore:done", OP_FORK },
  { "snapshot:state-written", OP_FORK_MACHINE },
  { "fork:done", OP_FORK_MACHINE },
  { "snapshot-delete:moved", OP_DELETE },
  { "snapshot:disk-copied", OP_TAKE, TRUE },
  { "snapshot:staged", OP_TAKE, TRUE },
  { "put-back:disk", OP_RESTORE, TRUE },
  { "restore-snapshot:done", OP_RESTORE, TRUE },
  { "put-back:disk", OP_FORK, TRUE },
  { "snapshot:disk-copied", OP_FORK_MACHINE, TRUE },
};

static gboolean
vmm_state_is (Fixture *f, const char *machine, const char *wanted)
{
  g_autofree char *file = fixture_runtime_file (f, machine, "test-vmm.state");
  g_autofree char *contents = NULL;

  return g_file_get_contents (file, &contents, NULL, NULL) &&
         g_str_equal (g_strstrip (contents), wanted);
}

static gboolean
idle (Client *client, gpointer data)
{
  g_autofree char *phase = client_get_string (client, data, "Phase");

  return *phase == '\0';
}

static void
run_sweep_case (Fixture *f, const SweepCase *c, guint n)
{
  g_autofree char *name = g_strdup_printf ("crash-%u", n);
  g_autofree char *layout = g_build_filename (g_getenv ("MICROVMD_BUILD_DIR"), "tests", "guest",
                                              "oci", NULL);
  g_autofree char *image = g_strdup_printf (",\"image\":\"oci:%s:1\",\"disk_bytes\":67108864",
                                            layout);
  g_autofree char *spec = g_strdup_printf ("{\"name\":\"%s\",\"hypervisor_type\":\"test\","
                                           "\"kernel\":\"/boot/vmlinuz\"%s}", name,
                                           c->image ? image : "");
  g_autofree char *fork_json = g_strdup_printf ("{\"name\":\"%s-fork\"}", name);
  g_autofree char *fork_name = g_strdup_printf ("%s-fork", name);
  g_autofree char *machine = client_create_ok (f->client, spec);
  g_autofree char *snapshot = NULL, *state = NULL, *err = NULL;
  guint snapshots_before;

  g_test_message ("fault point %s (%u%s)", c->fault, c->op, c->image ? ", image" : "");
  client_call_ok (f->client, machine, "Start");
  if (c->op != OP_TAKE && c->op != OP_FORK_MACHINE)
    snapshot = take_ok (f, machine, name);
  if (c->op == OP_RESTORE)
    client_call_ok (f->client, machine, "Stop");
  snapshots_before = count_snapshots (f);

  g_setenv ("MICROVMD_FAULT_POINT", c->fault, TRUE);
  mv_test_env_stop_daemon (f->env, SIGTERM);
  mv_test_env_start_daemon (f->env, NULL);
  g_unsetenv ("MICROVMD_FAULT_POINT");
  switch (c->op)
    {
    case OP_TAKE:
      g_assert_null (take (f, machine, name, &err));
      break;
    case OP_RESTORE:
      err = snapshot_call (f, snapshot, "Restore");
      break;
    case OP_FORK:
      g_assert_null (fork_from (f, snapshot, NULL, fork_json, &err));
      break;
    case OP_FORK_MACHINE:
      g_assert_null (fork_from (f, NULL, name, fork_json, &err));
      break;
    case OP_DELETE:
      err = snapshot_call (f, snapshot, "Delete");
      break;
    }
  g_assert_nonnull (err);
  mv_test_env_wait_for_name (f->env, MV_BUS_NAME, FALSE, 20000);
  mv_test_env_stop_daemon (f->env, SIGKILL);
  mv_test_env_start_daemon (f->env, NULL);

  if (!client_wait (f->client, idle, machine, 10000))
    g_error ("%s: the machine did not settle", c->fault);
  /* Nothing staged or half removed; every snapshot whole. */
  count_snapshot_dirs (f);
  switch (c->op)
    {
    case OP_TAKE:
    case OP_FORK_MACHINE:
      /* The source runs on as it did; a snapshot is whole or absent. */
      state = client_get_string (f->client, machine, "State");
      g_assert_cmpstr (state, ==, "Running");
      g_assert_true (vmm_state_is (f, machine, "running"));
      g_assert_cmpuint (count_snapshots (f), <=, snapshots_before + 1);
      if (c->op == OP_FORK_MACHINE)
        g_assert_cmpuint (count_snapshots (f), ==, snapshots_before);
      break;
    case OP_RESTORE:
      /* Finished: the guest is back. */
      for (guint i = 0; i < 100; i++)
        {
          g_free (state);
          state = client_get_string (f->client, machine, "State");
          if (g_str_equal (state, "Running"))
            break;
          client_settle (f->client, 100);
        }
      g_assert_cmpstr (state, ==, "Running");
      break;
    case OP_FORK:
      {
        g_autofree char *source_state = client_get_string (f->client, machine, "State");
        g_assert_cmpstr (source_state, ==, "Running");
      }
      break;
    case OP_DELETE:
      g_assert_cmpuint (count_snapshots (f), ==, snapshots_before - 1);
      break;
    }
  if (c->op == OP_FORK || c->op == OP_FORK_MACHINE)
    {
      /* A fork is whole or gone. */
      g_autofree char *copy = NULL;

      for (guint i = 0; i < 100 && (copy = get_path (f, "GetMachine", fork_name)); i++)
        {
          sd_bus_error error = SD_BUS_ERROR_NULL;
          g_autofree char *copy_state = NULL;

          /* It may go between the two calls. */
          if (sd_bus_get_property_string (f->client->bus, MV_BUS_NAME, copy, MV_MACHINE_IFACE,
                                          "State", &error, &copy_state) >= 0 &&
              g_str_equal (copy_state, "Running"))
            break;
          sd_bus_error_free (&error);
          g_clear_pointer (&copy, g_free);
          client_settle (f->client, 100);
        }
      g_assert_null (copy);
    }
  client_delete_all (f->client);
  g_assert_cmpuint (count_machine_dirs (mv_test_env_state_dir (f->env)), ==, 0);
  {
    g_autofree char *machines = g_build_filename (mv_test_env_runtime_dir (f->env),
                                                  MV_MACHINES_DIR, NULL);
    g_assert_cmpuint (count_processes_with (machines), ==, 0);
  }
}

static void
test_crash_sweep (Fixture *f, gconstpointer data)
{
  for (guint i = 0; i < G_N_ELEMENTS (sweep_cases); i++)
    run_sweep_case (f, &sweep_cases[i], i);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
#define ADD(name, fn) g_test_add ("/snapshots/" name, Fixture, NULL, fixture_setup, fn, snapshot_teardown)
  ADD ("running", test_running);
  ADD ("paused-and-standby", test_paused_and_standby);
  ADD ("refusals", test_refusals);
  ADD ("restore", test_restore);
  ADD ("fork", test_fork);
  ADD ("outlive-and-delete", test_outlive_and_delete);
  ADD ("restart-and-invalid", test_restart_and_invalid);
  ADD ("full-disk", test_full_disk);
  ADD ("crash-sweep", test_crash_sweep);
  return g_test_run ();
}
