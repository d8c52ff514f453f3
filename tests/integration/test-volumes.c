/* Volumes through the daemon: CreateVolume and its refusals, Delete
 * refused while a machine's spec mounts one, the limits of a spec's
 * volume mounts, and, in QEMU guests under TCG booting microvmd's agent,
 * a file written to a volume that outlives its machine and is read by
 * the next one, read-only mounts shared, and a writable one held. */
#include "bus-client.h"
#include "names.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

static char *agent_kernel;
static char *agent_initramfs;
static char *rootfs;

static const char lifecycle_config[] =
  "[lifecycle]\n"
  "boot-timeout-seconds=40\n"
  "stop-timeout-seconds=20\n"
  "resync-seconds=1\n";

static void
volume_fixture_setup (Fixture *f, gconstpointer data)
{
  fixture_setup (f, data);
}

static void
volume_fixture_teardown (Fixture *f, gconstpointer data)
{
  client_delete_all (f->client);
  fixture_teardown (f, data);
}

/* CreateVolume: the path, or NULL with the error's name in @error_name. */
static char *
create_volume (Fixture *f, const char *json, char **error_name)
{
  g_autofree char *message = NULL;
  g_autoptr (sd_bus_message) reply = client_call (f->client, MV_MANAGER_PATH, MV_MANAGER_IFACE,
                                                  "CreateVolume", error_name, &message, "s", json);
  const char *path = NULL;

  if (reply == NULL)
    {
      g_test_message ("CreateVolume %s: %s", json, message);
      return NULL;
    }
  g_assert_cmpint (sd_bus_message_read (reply, "o", &path), >, 0);
  return g_strdup (path);
}

static char *
volume_string (Fixture *f, const char *path, const char *prop, const char *type)
{
  sd_bus_error error = SD_BUS_ERROR_NULL;
  g_autoptr (sd_bus_message) reply = NULL;
  const char *value = NULL;
  int r = sd_bus_get_property (f->client->bus, MV_BUS_NAME, path, MV_VOLUME_IFACE, prop, &error,
                               &reply, type);

  if (r < 0)
    {
      g_test_message ("%s.%s: %s", path, prop, error.message);
      sd_bus_error_free (&error);
      return NULL;
    }
  g_assert_cmpint (sd_bus_message_read (reply, type, &value), >, 0);
  return g_strdup (value);
}

static guint
count_attached (Fixture *f, const char *path)
{
  sd_bus_error error = SD_BUS_ERROR_NULL;
  g_autoptr (sd_bus_message) reply = NULL;
  const char *machine;
  guint n = 0;

  g_assert_cmpint (sd_bus_get_property (f->client->bus, MV_BUS_NAME, path, MV_VOLUME_IFACE,
                                        "AttachedTo", &error, &reply, "ao"), >=, 0);
  g_assert_cmpint (sd_bus_message_enter_container (reply, 'a', "o"), >, 0);
  while (sd_bus_message_read (reply, "o", &machine) > 0)
    n++;
  return n;
}

static char *
volume_call (Fixture *f, const char *path, const char *member)
{
  char *error_name = NULL;
  g_autofree char *message = NULL;
  g_autoptr (sd_bus_message) reply = client_call (f->client, path, MV_VOLUME_IFACE, member,
                                                  &error_name, &message, NULL);

  if (reply == NULL)
    g_test_message ("%s %s: %s", member, path, message);
  return error_name;
}

static guint
count_volume_dirs (Fixture *f)
{
  g_autofree char *dir = g_build_filename (mv_test_env_state_dir (f->env), MV_VOLUMES_DIR, NULL);
  g_autoptr (GDir) d = g_dir_open (dir, 0, NULL);
  guint n = 0;

  while (d && g_dir_read_name (d))
    n++;
  return n;
}

/* A machine booting microvmd's kernel and initramfs from the busybox
 * root disk, with @mounts. */
static char *
spec_json (const char *name, const char *mounts)
{
  return g_strdup_printf ("{\"name\":\"%s\",\"hypervisor_type\":\"qemu\","
                          "\"memory_bytes\":268435456,"
                          "\"disks\":[{\"path\":\"%s\",\"read_only\":true,\"root\":true}],"
                          "\"mounts\":[%s]}", name, rootfs, mounts);
}

static char *
create_machine (Fixture *f, const char *name, const char *mounts, char **error_name,
                char **error_message)
{
  g_autofree char *spec = spec_json (name, mounts);

  return client_create (f->client, spec, 0, error_name, error_message);
}

static void
assert_error (const char *name, const char *message, const char *want_name, const char *want_text)
{
  g_assert_cmpstr (name, ==, want_name);
  if (want_text)
    g_assert_nonnull (strstr (message, want_text));
}

static void
test_create_and_refusals (Fixture *f, gconstpointer data)
{
  g_autofree char *err = NULL, *msg = NULL;
  g_autofree char *path = create_volume (f, "{\"name\":\"data\",\"size_bytes\":33554432}", NULL);
  g_autofree char *name = NULL, *held = NULL, *machine = NULL, *deleted = NULL;
  GString *many = g_string_new (NULL);
  g_autofree char *many_text = NULL;
  g_autofree char *other = NULL;

  g_assert_nonnull (path);
  g_assert_true (g_str_has_prefix (path, MV_VOLUME_PREFIX "/"));
  name = volume_string (f, path, "Name", "s");
  g_assert_cmpstr (name, ==, "data");
  g_assert_cmpuint (count_volume_dirs (f), ==, 1);
  client_settle (f->client, 200);
  g_assert_cmpuint (client_count_signals (f->client, MV_MANAGER_PATH, "InterfacesAdded"), >=, 1);

  /* Taken, malformed, unknown, out of range: refused, nothing new on disk. */
  g_assert_null (create_volume (f, "{\"name\":\"data\",\"size_bytes\":16777216}", &err));
  g_assert_cmpstr (err, ==, MV_BUS_ERROR_ALREADY_EXISTS);
  g_clear_pointer (&err, g_free);
  g_assert_null (create_volume (f, "{\"name\":\"x\",\"size_bytes\":", &err));
  g_assert_cmpstr (err, ==, MV_BUS_ERROR_INVALID_ARGUMENT);
  g_clear_pointer (&err, g_free);
  g_assert_null (create_volume (f, "{\"name\":\"x\",\"size_bytes\":16777216,\"fs\":\"xfs\"}", &err));
  g_assert_cmpstr (err, ==, MV_BUS_ERROR_INVALID_ARGUMENT);
  g_clear_pointer (&err, g_free);
  g_assert_null (create_volume (f, "{\"name\":\"x\",\"size_bytes\":1048576}", &err));
  g_assert_cmpstr (err, ==, MV_BUS_ERROR_INVALID_ARGUMENT);
  g_clear_pointer (&err, g_free);
  g_assert_cmpuint (count_volume_dirs (f), ==, 1);

  /* A mount of a volume the host does not have. */
  g_assert_null (create_machine (f, "m0", "{\"type\":\"volume\",\"source\":\"nope\","
                                 "\"target\":\"/data\"}", &err, &msg));
  assert_error (err, msg, MV_BUS_ERROR_NOT_FOUND, "mounts[0].source");
  g_clear_pointer (&err, g_free);
  g_clear_pointer (&msg, g_free);

  /* 23 volume mounts: over the limit, whether the volumes exist or not. */
  for (guint i = 0; i < 23; i++)
    g_string_append_printf (many, "%s{\"type\":\"volume\",\"source\":\"v%u\",\"target\":\"/v%u\"}",
                            i ? "," : "", i, i);
  many_text = g_string_free (many, FALSE);
  g_assert_null (create_machine (f, "m23", many_text, &err, &msg));
  assert_error (err, msg, MV_BUS_ERROR_INVALID_ARGUMENT, "limit of 22 volume mounts");
  g_clear_pointer (&err, g_free);
  g_clear_pointer (&msg, g_free);

  /* Mounted by a machine's spec: Delete is refused, and the volume shows it. */
  machine = create_machine (f, "m1", "{\"type\":\"volume\",\"source\":\"data\","
                            "\"target\":\"/data\"}", &err, &msg);
  g_assert_nonnull (machine);
  client_settle (f->client, 100);
  g_assert_cmpuint (count_attached (f, path), ==, 1);
  held = volume_string (f, path, "HeldBy", "o");
  g_assert_cmpstr (held, ==, "/");
  deleted = volume_call (f, path, "Delete");
  g_assert_cmpstr (deleted, ==, MV_BUS_ERROR_INVALID_STATE);
  g_assert_cmpuint (count_volume_dirs (f), ==, 1);

  /* Deleting the machine keeps the volume; then it can go. */
  g_clear_pointer (&deleted, g_free);
  g_autoptr (sd_bus_message) gone = client_call (f->client, machine, MV_MACHINE_IFACE, "Delete",
                                                 NULL, NULL, "b", 0);
  g_assert_nonnull (gone);
  g_assert_cmpuint (count_attached (f, path), ==, 0);
  g_assert_cmpuint (count_volume_dirs (f), ==, 1);
  deleted = volume_call (f, path, "Delete");
  g_assert_null (deleted);
  g_assert_cmpuint (count_volume_dirs (f), ==, 0);
  other = volume_string (f, path, "Name", "s");
  g_assert_null (other);
}

/* ---- exec through the agent ---- */

/* Runs sh -c @script in the guest; its stdout, and *@status ("exit 0"). */
static char *
guest_sh (Fixture *f, const char *path, const char *script, char **status)
{
  const char *argv[] = { "sh", "-c", script, NULL };
  g_auto (ExecResult) r = { 0 };

  exec_run (f, path, argv, NULL, &r);
  *status = g_steal_pointer (&r.status);
  return g_steal_pointer (&r.out);
}

static char *
guest_sh_ok (Fixture *f, const char *path, const char *script)
{
  g_autofree char *status = NULL;
  char *out = guest_sh (f, path, script, &status);

  g_assert_cmpstr (status, ==, "exit 0");
  return out;
}

static const char rw_mount[] = "{\"type\":\"volume\",\"source\":\"shared\",\"target\":\"/data\"}";
static const char ro_mount[] = "{\"type\":\"volume\",\"source\":\"shared\",\"target\":\"/data\","
                               "\"read_only\":true}";

static void
test_guests (Fixture *f, gconstpointer data)
{
  g_autofree char *volume = create_volume (f, "{\"name\":\"shared\",\"size_bytes\":67108864}", NULL);
  g_autofree char *writer = NULL, *reader1 = NULL, *reader2 = NULL, *writer2 = NULL;
  g_autofree char *err = NULL, *msg = NULL, *status = NULL;
  g_autofree char *held = NULL, *writer_id = NULL, *mounts = NULL, *read1 = NULL, *read2 = NULL;
  g_autofree char *refused = NULL;

  g_assert_nonnull (volume);

  /* A writer: what it writes stays on the volume. */
  writer = create_machine (f, "writer", rw_mount, &err, &msg);
  g_assert_nonnull (writer);
  client_call_ok (f->client, writer, "Start");
  client_settle (f->client, 200);
  held = volume_string (f, volume, "HeldBy", "o");
  g_assert_cmpstr (held, ==, writer);
  mounts = guest_sh_ok (f, writer, "grep ' /data ' /proc/mounts");
  g_assert_nonnull (strstr (mounts, "/dev/vdb /data ext4 rw"));
  g_free (guest_sh_ok (f, writer, "echo written-by-writer > /data/file && sync"));

  /* A second machine wanting it writable, or read-only, while it is held. */
  writer2 = create_machine (f, "writer2", rw_mount, &err, &msg);
  g_assert_nonnull (writer2);
  refused = client_machine_call (f->client, writer2, "Start", &msg);
  g_assert_cmpstr (refused, ==, MV_BUS_ERROR_CONFLICT);
  g_assert_nonnull (strstr (msg, "shared"));
  g_assert_nonnull (strstr (msg, "writer"));
  g_clear_pointer (&refused, g_free);
  g_clear_pointer (&msg, g_free);
  client_assert_state_soon (f->client, writer2, "Stopped", 1000);

  /* The writer stopped (its agent unmounts the volume) and deleted: the
   * volume stays, with what it wrote. */
  client_call_ok (f->client, writer, "Stop");
  g_autoptr (sd_bus_message) gone = client_call (f->client, writer, MV_MACHINE_IFACE, "Delete",
                                                 NULL, NULL, "b", 0);
  g_assert_nonnull (gone);
  client_settle (f->client, 200);
  g_clear_pointer (&held, g_free);
  held = volume_string (f, volume, "HeldBy", "o");
  g_assert_cmpstr (held, ==, "/");

  /* Two readers at once read it. */
  reader1 = create_machine (f, "reader1", ro_mount, &err, &msg);
  reader2 = create_machine (f, "reader2", ro_mount, &err, &msg);
  g_assert_nonnull (reader1);
  g_assert_nonnull (reader2);
  client_call_ok (f->client, reader1, "Start");
  client_call_ok (f->client, reader2, "Start");
  read1 = guest_sh_ok (f, reader1, "cat /data/file");
  read2 = guest_sh_ok (f, reader2, "cat /data/file");
  g_assert_cmpstr (read1, ==, "written-by-writer\n");
  g_assert_cmpstr (read2, ==, "written-by-writer\n");
  g_free (guest_sh (f, reader1, "echo no > /data/other", &status));
  g_assert_cmpstr (status, !=, "exit 0");

  /* A writable start while readers run. */
  refused = client_machine_call (f->client, writer2, "Start", &msg);
  g_assert_cmpstr (refused, ==, MV_BUS_ERROR_CONFLICT);
  g_assert_nonnull (strstr (msg, "read-only"));
}

int
main (int argc, char **argv)
{
  const char *build = g_getenv ("MICROVMD_BUILD_DIR");
  g_autofree char *guest = NULL;
  g_autofree char *config = NULL;

  g_test_init (&argc, &argv, NULL);
  g_assert_nonnull (build);
  agent_kernel = g_build_filename (build, "guest", "vmlinuz", NULL);
  agent_initramfs = g_build_filename (build, "guest", "initramfs.img", NULL);
  rootfs = g_build_filename (build, "tests", "guest", "rootfs.ext4", NULL);
  guest = g_strdup_printf ("[guest]\nkernel=%s\ninitramfs=%s\n%s", agent_kernel, agent_initramfs,
                           lifecycle_config);
  config = guest_config ("qemu", guest);

  g_test_add ("/volumes/create-and-refusals", Fixture, config, volume_fixture_setup,
              test_create_and_refusals, volume_fixture_teardown);
  g_test_add ("/volumes/guests", Fixture, config, volume_fixture_setup, test_guests,
              volume_fixture_teardown);
  return g_test_run ();
}
