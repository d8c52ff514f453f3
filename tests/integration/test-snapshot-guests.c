/* Snapshots of real QEMU guests (TCG) booting the test image with
 * microvmd's agent, the daemon in a network namespace of the test's own
 * with a real NetworkManager: a memory snapshot's guest counts on from
 * where it was when it is restored; a file written after a disk snapshot
 * is gone once it is restored; a fork of a running machine is a second
 * running guest with its own hostname, address and random state that
 * counts on and reaches the first; and a snapshot outlives its machine
 * and is forked. No packet leaves the namespace. */
#include "bus-client.h"
#include "names.h"
#include "test-netns.h"

#include <signal.h>

typedef struct {
  Fixture      f;
  MvTestNetns *netns;
} NetFixture;

static char *guest_files;
static char *layout;

static const char config_text[] =
  "[qemu]\naccel=tcg\n"
  "[lifecycle]\n"
  "boot-timeout-seconds=60\n"
  "stop-timeout-seconds=20\n"
  "resync-seconds=600\n";

/* The workload: a counter, one more every fifth of a second, in a file that
 * is replaced whole by a rename, so that neither a reader nor a snapshot
 * ever sees it truncated and not yet written. */
#define COUNTER \
  "\"cmd\":[\"/bin/sh\",\"-c\",\"i=0; while :; do i=$((i+1)); echo $i > /tmp/counter.new; " \
  "mv /tmp/counter.new /tmp/counter; sleep 0.2; done\"]"

static void
setup (NetFixture *nf, gconstpointer data)
{
  Fixture *f = &nf->f;
  g_autofree char *config = g_strconcat (config_text, guest_files, NULL);

  f->env = mv_test_env_new ();
  nf->netns = mv_test_netns_new (f->env);
  mv_test_env_write_config (f->env, config);
  mv_test_env_set_daemon_netns (f->env, mv_test_netns_name (nf->netns));
  mv_test_env_start_daemon (f->env, NULL);
  f->client = client_new (f->env);
}

static void
teardown (NetFixture *nf, gconstpointer data)
{
  Fixture *f = &nf->f;

  client_delete_all (f->client);
  client_free (f->client);
  mv_test_env_stop_daemon (f->env, SIGTERM);
  mv_test_netns_free (nf->netns);
  mv_test_env_free (f->env);
}

/* ---- helpers ---- */

static char *
create_machine (Fixture *f, const char *name, const char *extra)
{
  g_autofree char *spec = g_strdup_printf (
    "{\"name\":\"%s\",\"hypervisor_type\":\"qemu\",\"memory_bytes\":268435456,"
    "\"readiness\":\"agent\",\"image\":\"oci:%s:1\",\"disk_bytes\":67108864%s%s}",
    name, layout, extra ? "," : "", extra ? extra : "");

  return client_create_ok (f->client, spec);
}

static char *
call_path (Fixture *f, const char *path, const char *iface, const char *member,
           const char *types, const char *a, const char *b)
{
  g_autofree char *err = NULL, *msg = NULL;
  g_autoptr (sd_bus_message) reply =
    b ? client_call (f->client, path, iface, member, &err, &msg, types, a, b)
      : client_call (f->client, path, iface, member, &err, &msg, types, a);
  const char *out = NULL;

  if (!reply)
    g_error ("%s %s: %s: %s", member, a, err, msg);
  g_assert_cmpint (sd_bus_message_read (reply, "o", &out), >, 0);
  return g_strdup (out);
}

static char *
take (Fixture *f, const char *machine, const char *name)
{
  return call_path (f, machine, MV_MACHINE_IFACE, "CreateSnapshot", "s", name, NULL);
}

static void
snapshot_call_ok (Fixture *f, const char *snapshot, const char *member)
{
  g_autofree char *err = NULL, *msg = NULL;
  g_autoptr (sd_bus_message) reply = client_call (f->client, snapshot, MV_SNAPSHOT_IFACE, member,
                                                  &err, &msg, NULL);

  if (!reply)
    g_error ("%s %s: %s: %s", member, snapshot, err, msg);
}

static char *
snapshot_kind (Fixture *f, const char *path)
{
  sd_bus_error error = SD_BUS_ERROR_NULL;
  char *value = NULL;

  g_assert_cmpint (sd_bus_get_property_string (f->client->bus, MV_BUS_NAME, path,
                                               MV_SNAPSHOT_IFACE, "Kind", &error, &value), >=, 0);
  return value;
}

static char *
guest_output (Fixture *f, const char *path, const char *script)
{
  const char *argv[] = { "sh", "-c", script, NULL };
  g_autofree char *out = exec_output (f, path, argv);

  return g_strdup (g_strstrip (out));
}

/* The guest's counter now. */
static guint64
counter (Fixture *f, const char *path)
{
  g_autofree char *out = guest_output (f, path, "cat /tmp/counter 2>/dev/null || echo 0");

  return g_ascii_strtoull (out, NULL, 10);
}

/* Waits for the counter to pass @above. */
static guint64
counter_above (Fixture *f, const char *path, guint64 above)
{
  guint64 now = 0;

  for (guint i = 0; i < 100; i++)
    {
      now = counter (f, path);
      if (now > above)
        return now;
      g_usleep (200 * 1000);
    }
  g_error ("The counter of %s stands at %" G_GUINT64_FORMAT, path, now);
}

static char *
state_of (Fixture *f, const char *path)
{
  return client_get_string (f->client, path, "State");
}

/* ---- the tests ---- */

/* Restored from a memory snapshot, the guest counts on from where it was
 * then, not from where it was stopped. */
static void
test_memory_restore (NetFixture *nf, gconstpointer data)
{
  Fixture *f = &nf->f;
  g_autofree char *machine = create_machine (f, "counter", COUNTER);
  g_autofree char *snapshot = NULL, *kind = NULL, *state = NULL;
  guint64 at_snapshot, later, restored, after;

  client_call_ok (f->client, machine, "Start");
  counter_above (f, machine, 3);
  /* Read before the snapshot: the snapshot holds at least this much. */
  at_snapshot = counter (f, machine);
  snapshot = take (f, machine, "then");
  kind = snapshot_kind (f, snapshot);
  g_assert_cmpstr (kind, ==, "memory");
  /* It runs on meanwhile. */
  later = counter_above (f, machine, at_snapshot + 15);

  client_call_ok (f->client, machine, "Stop");
  snapshot_call_ok (f, snapshot, "Restore");
  state = state_of (f, machine);
  g_assert_cmpstr (state, ==, "Running");
  restored = counter (f, machine);
  g_test_message ("counter: %" G_GUINT64_FORMAT " at the snapshot, %" G_GUINT64_FORMAT
                  " before the stop, %" G_GUINT64_FORMAT " once restored", at_snapshot, later,
                  restored);
  g_assert_cmpuint (restored, >=, at_snapshot);
  g_assert_cmpuint (restored, <, later);
  after = counter_above (f, machine, restored);
  g_assert_cmpuint (after, >, restored);
}

/* A disk snapshot of a stopped machine: what is written after it is gone
 * once it is restored; what was there before stays. */
static void
test_disk_restore (NetFixture *nf, gconstpointer data)
{
  Fixture *f = &nf->f;
  g_autofree char *machine = create_machine (f, "disky", NULL);
  g_autofree char *snapshot = NULL, *kind = NULL, *state = NULL, *before = NULL, *gone = NULL;

  client_call_ok (f->client, machine, "Start");
  g_free (guest_output (f, machine, "echo kept > /before && sync"));
  client_call_ok (f->client, machine, "Stop");
  snapshot = take (f, machine, "clean");
  kind = snapshot_kind (f, snapshot);
  g_assert_cmpstr (kind, ==, "disk");

  client_call_ok (f->client, machine, "Start");
  g_free (guest_output (f, machine, "echo later > /after && sync && cat /after"));
  client_call_ok (f->client, machine, "Stop");
  snapshot_call_ok (f, snapshot, "Restore");
  state = state_of (f, machine);
  g_assert_cmpstr (state, ==, "Stopped");

  client_call_ok (f->client, machine, "Start");
  before = guest_output (f, machine, "cat /before");
  gone = guest_output (f, machine, "test -e /after && echo there || echo gone");
  g_assert_cmpstr (before, ==, "kept");
  g_assert_cmpstr (gone, ==, "gone");
}

/* A fork of a running machine: two guests, each counting on, with their
 * own hostname, address and random state, that reach each other. */
static void
test_fork_running (NetFixture *nf, gconstpointer data)
{
  Fixture *f = &nf->f;
  g_autofree char *net = NULL, *origin = NULL, *twin = NULL;
  g_autofree char *origin_addr = NULL, *twin_addr = NULL, *state = NULL;
  g_autofree char *origin_host = NULL, *twin_host = NULL;
  g_autofree char *origin_ip = NULL, *twin_ip = NULL, *ping = NULL;
  g_autofree char *origin_random = NULL, *twin_random = NULL;
  guint64 origin_count, twin_count;

  net = call_path (f, MV_MANAGER_PATH, MV_MANAGER_IFACE, "CreateNetwork", "s",
                   "{\"name\":\"lan\",\"subnet\":\"10.77.0.0/24\"}", NULL);
  origin = create_machine (f, "origin", COUNTER ",\"network_name\":\"lan\","
                           "\"hostname\":\"origin\"");
  client_call_ok (f->client, origin, "Start");
  origin_count = counter_above (f, origin, 3);

  twin = call_path (f, MV_MANAGER_PATH, MV_MANAGER_IFACE, "ForkMachine", "ss", "origin",
                    "{\"name\":\"twin\"}");
  state = state_of (f, twin);
  g_assert_cmpstr (state, ==, "Running");
  g_free (state);
  state = state_of (f, origin);
  g_assert_cmpstr (state, ==, "Running");

  /* Each counts on from where the origin was. */
  twin_count = counter_above (f, twin, origin_count);
  counter_above (f, origin, twin_count);
  counter_above (f, twin, twin_count);

  /* Their own identity, from the agent. */
  origin_addr = client_get_string (f->client, origin, "Address");
  twin_addr = client_get_string (f->client, twin, "Address");
  g_assert_cmpstr (origin_addr, !=, "");
  g_assert_cmpstr (twin_addr, !=, "");
  g_assert_cmpstr (origin_addr, !=, twin_addr);
  for (guint i = 0; i < 50; i++)
    {
      g_clear_pointer (&twin_host, g_free);
      g_clear_pointer (&twin_ip, g_free);
      twin_host = guest_output (f, twin, "hostname");
      twin_ip = guest_output (f, twin, "ip -4 -o addr show dev eth0 | awk '{print $4}'");
      if (g_str_equal (twin_host, "twin") && g_str_has_prefix (twin_ip, twin_addr))
        break;
      g_usleep (200 * 1000);
    }
  origin_host = guest_output (f, origin, "hostname");
  origin_ip = guest_output (f, origin, "ip -4 -o addr show dev eth0 | awk '{print $4}'");
  g_assert_cmpstr (origin_host, ==, "origin");
  g_assert_cmpstr (twin_host, ==, "twin");
  g_assert_true (g_str_has_prefix (origin_ip, origin_addr));
  g_assert_true (g_str_has_prefix (twin_ip, twin_addr));

  /* They reach each other. */
  {
    g_autofree char *script = g_strdup_printf ("ping -c 1 -W 3 %s >/dev/null && echo ok",
                                               origin_addr);
    ping = guest_output (f, twin, script);
    g_assert_cmpstr (ping, ==, "ok");
    g_free (ping);
    g_free (script);
    script = g_strdup_printf ("ping -c 1 -W 3 %s >/dev/null && echo ok", twin_addr);
    ping = guest_output (f, origin, script);
    g_assert_cmpstr (ping, ==, "ok");
  }

  /* The fork's agent mixed fresh entropy from the host into its kernel
   * and had it reseed (both ioctls succeeded), and said so. */
  {
    g_autofree char *log = mv_test_env_read_daemon_log (f->env);

    g_assert_nonnull (strstr (log, "took its identity (changed: entropy"));
  }

  /* Their random number generators do not share a state. */
  origin_random = guest_output (f, origin, "head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \\n'");
  twin_random = guest_output (f, twin, "head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \\n'");
  g_assert_cmpuint (strlen (origin_random), ==, 64);
  g_assert_cmpstr (origin_random, !=, twin_random);
}

/* A snapshot outlives its machine, and a fork of it runs. */
static void
test_fork_orphan (NetFixture *nf, gconstpointer data)
{
  Fixture *f = &nf->f;
  g_autofree char *parent = create_machine (f, "parent", COUNTER);
  g_autofree char *snapshot = NULL, *orphan = NULL, *state = NULL, *host = NULL;
  g_autoptr (sd_bus_message) deleted = NULL;
  guint64 at_snapshot;

  client_call_ok (f->client, parent, "Start");
  counter_above (f, parent, 3);
  snapshot = take (f, parent, "legacy");
  at_snapshot = counter (f, parent);
  deleted = client_call (f->client, parent, MV_MACHINE_IFACE, "Delete", NULL, NULL, "b", 1);
  g_assert_nonnull (deleted);

  orphan = call_path (f, snapshot, MV_SNAPSHOT_IFACE, "Fork", "s", "{\"name\":\"orphan\"}", NULL);
  state = state_of (f, orphan);
  g_assert_cmpstr (state, ==, "Running");
  counter_above (f, orphan, at_snapshot);
  for (guint i = 0; i < 50; i++)
    {
      g_clear_pointer (&host, g_free);
      host = guest_output (f, orphan, "hostname");
      if (g_str_equal (host, "orphan"))
        break;
      g_usleep (200 * 1000);
    }
  g_assert_cmpstr (host, ==, "orphan");
}

int
main (int argc, char **argv)
{
  const char *build = g_getenv ("MICROVMD_BUILD_DIR");

  g_test_init (&argc, &argv, NULL);
  g_assert_nonnull (build);
  layout = g_build_filename (build, "tests", "guest", "oci", NULL);
  guest_files = g_strdup_printf ("[guest]\nkernel=%s/guest/vmlinuz\ninitramfs=%s/guest/initramfs.img\n",
                                 build, build);
#define ADD(name, fn) g_test_add ("/snapshot-guests/qemu/" name, NetFixture, NULL, setup, fn, teardown)
  ADD ("memory-restore", test_memory_restore);
  ADD ("disk-restore", test_disk_restore);
  ADD ("fork-running", test_fork_running);
  ADD ("fork-orphan", test_fork_orphan);
  return g_test_run ();
}
