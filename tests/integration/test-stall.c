/* A VMM that stalls its answer holds up only its own machine: while one
 * machine's VMM hangs on the probe that follows a failed standby, the
 * daemon goes on answering about every other machine. Two guests on the
 * test VMM standing in for Cloud Hypervisor, steered through its control
 * file (tests/vmm/fake-control.h), driven over the private system bus. */
#include "bus-client.h"
#include "fake-control.h"
#include "hypervisor/http.h"
#include "names.h"

/* How long the stalled VMM keeps its answer back: well past the bystander's
 * read, and short of the daemon's own HTTP timeout, so that the probe
 * ends with the VMM's answer rather than by giving up on it. */
#define STALL_MS             6000
/* The bystander's read: a daemon that is not held up answers at once. */
#define READ_TIMEOUT_MS      3000
#define STALL_BEGIN_WAIT_MS  30000
#define STANDBY_REPLY_MS     30000
#define FILE_POLL_MS         20

G_STATIC_ASSERT (READ_TIMEOUT_MS * 2 <= STALL_MS);
G_STATIC_ASSERT (STALL_MS < MV_HTTP_TIMEOUT_MS);

/* What the test VMM fails the snapshot with, as Cloud Hypervisor says it. */
#define SNAPSHOT_FAILURE "Error creating VM snapshot"

static const char config_format[] =
  "[cloud-hypervisor]\n"
  "binaries=%s\n"
  "[lifecycle]\n"
  "boot-timeout-seconds=20\n"
  "stop-timeout-seconds=5\n";

/* The reply to a call made asynchronously. */
typedef struct {
  gboolean  replied;
  char     *error_name;     /* NULL: it succeeded */
  char     *error_message;
} Reply;

static void
reply_clear (Reply *reply)
{
  g_clear_pointer (&reply->error_name, g_free);
  g_clear_pointer (&reply->error_message, g_free);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (Reply, reply_clear)

static int
on_reply (sd_bus_message *m, void *userdata, sd_bus_error *ret_error)
{
  Reply *reply = userdata;
  const sd_bus_error *error = sd_bus_message_get_error (m);

  reply->replied = TRUE;
  if (error)
    {
      reply->error_name = g_strdup (error->name);
      reply->error_message = g_strdup (error->message);
    }
  return 0;
}

static gboolean
replied (Client *client, gpointer data)
{
  return ((Reply *) data)->replied;
}

/* Waits up to @timeout_ms for @file while the bus runs, looking often:
 * nothing on the bus says when a test VMM writes a file. Stops early once
 * @reply (may be NULL) has come. Whether the file is there. */
static gboolean
wait_for_file (Client *client, const char *file, const Reply *reply, guint timeout_ms)
{
  for (guint waited = 0; waited < timeout_ms; waited += FILE_POLL_MS)
    {
      if (g_file_test (file, G_FILE_TEST_EXISTS) || (reply && reply->replied))
        break;
      client_settle (client, FILE_POLL_MS);
    }
  return g_file_test (file, G_FILE_TEST_EXISTS);
}

/* The State of the machine at @path, or NULL with @error set if no answer
 * came within @timeout_ms. */
static char *
read_state_within (Client *client, const char *path, guint timeout_ms, sd_bus_error *error)
{
  g_autoptr (sd_bus_message) call = NULL;
  g_autoptr (sd_bus_message) reply = NULL;
  const char *state = NULL;

  g_assert_cmpint (sd_bus_message_new_method_call (client->bus, &call, MV_BUS_NAME, path,
                                                   "org.freedesktop.DBus.Properties", "Get"), >=, 0);
  g_assert_cmpint (sd_bus_message_append (call, "ss", MV_MACHINE_IFACE, "State"), >=, 0);
  if (sd_bus_call (client->bus, call, (uint64_t) timeout_ms * 1000, error, &reply) < 0)
    return NULL;
  g_assert_cmpint (sd_bus_message_read (reply, "v", "s", &state), >, 0);
  return g_strdup (state);
}

static char *
machine_spec (const char *name, const char *kernel, const char *initrd)
{
  return g_strdup_printf ("{\"name\":\"%s\",\"hypervisor_type\":\"cloud-hypervisor\","
                          "\"kernel\":\"%s\",\"initrd\":\"%s\",\"memory_bytes\":268435456,"
                          "\"kernel_args\":\"console=ttyS0 reboot=k panic=1 microvmd.boot_ms=100\","
                          "\"readiness\":\"console:MICROVMD-GUEST-READY\"}",
                          name, kernel, initrd);
}

static void
stall_fixture_setup (Fixture *f, gconstpointer data)
{
  g_autofree char *fake = g_build_filename (g_getenv ("MICROVMD_BUILD_DIR"), "tests", "vmm",
                                            "fake-cloud-hypervisor", NULL);
  g_autofree char *config = g_strdup_printf (config_format, fake);

  fixture_setup (f, config);
}

static void
stall_fixture_teardown (Fixture *f, gconstpointer data)
{
  client_delete_all (f->client);
  fixture_teardown (f, data);
}

static void
test_stalled_probe_holds_up_nobody_else (Fixture *f, gconstpointer data)
{
  /* The test VMM never reads the guest's files; they only have to be. */
  g_autofree char *kernel = g_build_filename (mv_test_env_images_dir (f->env), "vmlinuz", NULL);
  g_autofree char *initrd = g_build_filename (mv_test_env_images_dir (f->env), "initrd.img", NULL);
  g_autofree char *spec_a = machine_spec ("stalling", kernel, initrd);
  g_autofree char *spec_b = machine_spec ("bystander", kernel, initrd);
  g_autofree char *a = NULL, *b = NULL;
  g_autofree char *control = NULL, *begin = NULL, *end = NULL, *arm = NULL;
  g_autofree char *state_b = NULL, *why = NULL;
  sd_bus_error read_error = SD_BUS_ERROR_NULL;
  g_autoptr (sd_bus_slot) slot = NULL;
  g_auto (Reply) standby = { 0 };
  gint64 read_started, read_ms;
  gboolean ended_before_answer;

  g_assert_true (g_file_set_contents (kernel, "", 0, NULL));
  g_assert_true (g_file_set_contents (initrd, "", 0, NULL));
  a = client_create_ok (f->client, spec_a);
  b = client_create_ok (f->client, spec_b);
  client_call_ok (f->client, a, "Start");
  client_call_ok (f->client, b, "Start");

  /* A's VMM fails the snapshot, then hangs on the probe after it. */
  control = fixture_runtime_file (f, a, FAKE_CONTROL_FILE);
  begin = fixture_runtime_file (f, a, FAKE_CONTROL_STALL_BEGIN);
  end = fixture_runtime_file (f, a, FAKE_CONTROL_STALL_END);
  arm = g_strdup_printf ("fail-snapshot stall-probe=%d\n", STALL_MS);
  g_assert_true (g_file_set_contents (control, arm, -1, NULL));

  g_assert_cmpint (sd_bus_call_method_async (f->client->bus, &slot, MV_BUS_NAME, a,
                                             MV_MACHINE_IFACE, "Standby", on_reply, &standby,
                                             NULL), >=, 0);
  if (!wait_for_file (f->client, begin, &standby, STALL_BEGIN_WAIT_MS))
    {
      g_test_fail_printf ("A's VMM was not probed after its failed snapshot (Standby: %s: %s)",
                          standby.replied ? standby.error_name : "no reply yet",
                          standby.error_message ? standby.error_message : "");
      return;
    }

  /* While A's VMM stalls, the daemon answers about B. */
  read_started = g_get_monotonic_time ();
  state_b = read_state_within (f->client, b, READ_TIMEOUT_MS, &read_error);
  ended_before_answer = g_file_test (end, G_FILE_TEST_EXISTS);
  read_ms = (g_get_monotonic_time () - read_started) / 1000;
  g_test_message ("B's State read took %" G_GINT64_FORMAT " ms", read_ms);
  if (!state_b)
    g_test_fail_printf ("reading B's State while A's VMM stalled got no answer within %d ms "
                        "(%s: %s): the daemon's main loop waits on A's VMM",
                        READ_TIMEOUT_MS, read_error.name ? read_error.name : "no error name",
                        read_error.message ? read_error.message : "no message");
  else if (ended_before_answer)
    g_test_fail_printf ("B's State came only once A's VMM had stopped stalling: the daemon's "
                        "main loop waited on A's VMM");
  else
    g_assert_cmpstr (state_b, ==, "Running");
  sd_bus_error_free (&read_error);

  /* The stall ends; A's failed standby leaves its guest running, and says
   * why, to the caller and in StateError. */
  g_assert_true (wait_for_file (f->client, end, NULL, STALL_MS + 10000));
  g_assert_true (client_wait (f->client, replied, &standby, STANDBY_REPLY_MS));
  g_assert_nonnull (standby.error_name);
  g_test_message ("Standby: %s: %s", standby.error_name, standby.error_message);
  g_assert_true (standby.error_message && strstr (standby.error_message, SNAPSHOT_FAILURE));
  client_assert_state_soon (f->client, a, "Running", 10000);
  why = client_get_string (f->client, a, "StateError");
  g_test_message ("A's StateError: %s", why);
  g_assert_nonnull (strstr (why, SNAPSHOT_FAILURE));
  g_free (state_b);
  state_b = client_get_string (f->client, b, "State");
  g_assert_cmpstr (state_b, ==, "Running");
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_assert_nonnull (g_getenv ("MICROVMD_BUILD_DIR"));
  g_test_add ("/stall/stalled-probe-holds-up-nobody-else", Fixture, NULL, stall_fixture_setup,
              test_stalled_probe_holds_up_nobody_else, stall_fixture_teardown);
  return g_test_run ();
}
