/* The guest side through the daemon: microvmd's initramfs and agent in
 * QEMU guests under TCG (with a busybox root disk), and the test VMMs'
 * simulated guest speaking the same protocol over their hybrid vsock.
 * Workloads and their exit codes, exec, mounts (read-only ones too), the
 * hostname, metadata and SSH keys (and Firecracker's metadata service),
 * health checks, Wait, Stop through the agent, idle standby, bad input
 * through the bus, and a guest whose agent never answers; on QEMU, a
 * Debian guest whose systemd takes PID 1 over from the agent, and a
 * guest given vCPUs and memory while it runs. */
#include "bus-client.h"
#include "names.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

static char *agent_kernel;
static char *agent_initramfs;
static char *rootfs;
static char *debian_image;
/* The project's older test guest: a busybox /init that answers a line
 * protocol on the agent port, not frames. */
static char *line_kernel;
static char *line_initrd;

typedef struct {
  const char *type;
  char       *config;
} AgentCase;

static const char lifecycle_config[] =
  "[lifecycle]\n"
  "boot-timeout-seconds=25\n"
  "stop-timeout-seconds=20\n"
  "restart-backoff-ms=300\n"
  "resync-seconds=1\n";

/* systemd under TCG takes tens of seconds to boot and to power off. */
static const char systemd_lifecycle_config[] =
  "[lifecycle]\n"
  "boot-timeout-seconds=120\n"
  "stop-timeout-seconds=120\n"
  "restart-backoff-ms=300\n"
  "resync-seconds=1\n";

/* For a guest that is never ready: the boot gives up sooner. */
static const char short_boot_config[] =
  "[lifecycle]\n"
  "boot-timeout-seconds=8\n"
  "stop-timeout-seconds=20\n"
  "restart-backoff-ms=300\n"
  "resync-seconds=1\n";

static void
agent_fixture_setup (Fixture *f, gconstpointer data)
{
  const AgentCase *c = data;
  fixture_setup (f, c->config);
}

static void
agent_fixture_teardown (Fixture *f, gconstpointer data)
{
  client_delete_all (f->client);
  fixture_teardown (f, data);
}

/* A machine booting microvmd's kernel and initramfs (the daemon's [guest]
 * files: the spec names neither) from the busybox root disk. */
static char *
spec_text (gconstpointer data, const char *name, const char *extra)
{
  const AgentCase *c = data;

  return g_strdup_printf ("{\"name\":\"%s\",\"hypervisor_type\":\"%s\","
                          "\"memory_bytes\":268435456,"
                          "\"disks\":[{\"path\":\"%s\",\"read_only\":true,"
                          "\"root\":true}]%s%s}",
                          name, c->type, rootfs, extra ? "," : "", extra ? extra : "");
}

static char *
create (Fixture *f, gconstpointer data, const char *name, const char *extra)
{
  g_autofree char *spec = spec_text (data, name, extra);

  return client_create_ok (f->client, spec);
}

static guint
count (const char *haystack, const char *needle)
{
  guint n = 0;

  for (const char *p = haystack; (p = strstr (p, needle)); p += strlen (needle))
    n++;
  return n;
}

/* @path's string property @prop is @want. */
static void
assert_property (Fixture *f, const char *path, const char *prop, const char *want)
{
  g_autofree char *value = client_get_string (f->client, path, prop);

  g_assert_cmpstr (value, ==, want);
}

/* Machine.StreamLogs of @source, the whole log: the caller's end. */
static int
stream_logs (Fixture *f, const char *path, const char *source, gboolean follow)
{
  g_autofree char *err = NULL, *msg = NULL;
  g_autoptr (sd_bus_message) reply = client_call (f->client, path, MV_MACHINE_IFACE,
                                                  "StreamLogs", &err, &msg, "sub", source,
                                                  (guint32) 0, (int) follow);
  int fd = -1;

  if (!reply)
    g_error ("StreamLogs %s: %s: %s", source, err, msg);
  g_assert_cmpint (sd_bus_message_read (reply, "h", &fd), >, 0);
  fd = fcntl (fd, F_DUPFD_CLOEXEC, 3);
  g_assert_cmpint (fd, >=, 0);
  return fd;
}

/* Reads @fd until @text has come, within 30 s; what came. */
static char *
read_until (int fd, const char *text)
{
  GString *got = g_string_new (NULL);
  gint64 deadline = g_get_monotonic_time () + 30 * G_USEC_PER_SEC;

  while (!strstr (got->str, text))
    {
      struct pollfd p = { .fd = fd, .events = POLLIN };
      char buffer[4096];
      ssize_t n;

      if (g_get_monotonic_time () > deadline)
        g_error ("'%s' did not come; got '%s'", text, got->str);
      if (poll (&p, 1, 200) <= 0)
        continue;
      n = read (fd, buffer, sizeof buffer);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        g_error ("the stream ended before '%s'; got '%s'", text, got->str);
      g_string_append_len (got, buffer, n);
    }
  return g_string_free (got, FALSE);
}

/* ---- the tests ---- */

/* The workload runs as the user, in the directory, with the environment
 * it was given, and its exit code is the machine's; on-failure starts it
 * again. Its stdout and stderr are on the console, and alone in the
 * workload's log, both runs of it. */
static void
test_workload_exit_code (Fixture *f, gconstpointer data)
{
  g_autofree char *path = create (f, data, "job",
                                  "\"cmd\":[\"sh\",\"-c\",\"id -u; pwd; env; wlog-missing; exit 3\"],"
                                  "\"user\":\"tester\",\"working_dir\":\"/tmp\","
                                  "\"env\":{\"FOO\":\"bar-value\"},"
                                  "\"restart\":{\"mode\":\"on-failure\",\"max_retries\":1}");
  g_autofree char *console = NULL, *why = NULL, *workload = NULL, *file = NULL;
  GStatBuf st;

  client_call_ok (f->client, path, "Start");
  client_assert_state_soon (f->client, path, "Failed", 90000);
  g_assert_cmpint (client_get_i32 (f->client, path, "ExitCode"), ==, 3);
  g_assert_cmpuint (client_get_u32 (f->client, path, "RestartCount"), ==, 1);
  why = client_get_string (f->client, path, "StateError");
  g_test_message ("reason: %s", why);
  g_assert_nonnull (strstr (why, "status 3"));
  console = console_text (f, path);
  g_assert_cmpuint (count (console, "workload exited with status 3"), ==, 2);
  g_assert_nonnull (strstr (console, "\n1000"));
  g_assert_nonnull (strstr (console, "\n/tmp"));
  g_assert_nonnull (strstr (console, "FOO=bar-value"));
  g_assert_cmpuint (count (console, "sh: wlog-missing: not found"), ==, 2);

  workload = read_all (stream_logs (f, path, "workload", FALSE));
  g_test_message ("workload.log: %s", workload);
  g_assert_true (g_str_has_prefix (workload, "1000\n/tmp\n"));
  g_assert_nonnull (strstr (workload, "\nFOO=bar-value\n"));
  g_assert_cmpuint (count (workload, "\nsh: wlog-missing: not found\n"), ==, 2);
  /* Neither the kernel's lines nor the agent's. */
  g_assert_null (strstr (workload, "microvmd-agent"));
  g_assert_null (strstr (workload, "Linux version"));
  file = fixture_runtime_file (f, path, MV_WORKLOAD_LOG_NAME);
  g_assert_cmpint (g_stat (file, &st), ==, 0);
  g_assert_cmpint (st.st_mode & 07777, ==, 0600);
  g_assert_cmpint (st.st_uid, ==, getuid ());
}

/* A followed workload log has the output as it comes, and ends when the
 * machine stops. */
static void
test_workload_log_follow (Fixture *f, gconstpointer data)
{
  g_autofree char *path = create (f, data, "talker",
                                  "\"cmd\":[\"sh\",\"-c\",\"echo out; wlog-missing; sleep 600\"]");
  g_autofree char *first = NULL, *rest = NULL;
  int fd;

  client_call_ok (f->client, path, "Start");
  fd = stream_logs (f, path, "workload", TRUE);
  first = read_until (fd, "wlog-missing: not found\n");
  g_assert_cmpstr (first, ==, "out\nsh: wlog-missing: not found\n");
  client_call_ok (f->client, path, "Stop");
  rest = read_all (fd);
  g_assert_null (strstr (rest, "microvmd-agent"));
  client_assert_state_soon (f->client, path, "Stopped", 30000);
}

static void
test_workload_clean_exit (Fixture *f, gconstpointer data)
{
  g_autofree char *path = create (f, data, "clean", "\"cmd\":[\"true\"]");

  /* Start returns once the workload has ended, however it ended. */
  client_call_ok (f->client, path, "Start");
  client_assert_state_soon (f->client, path, "Stopped", 30000);
  g_assert_cmpint (client_get_i32 (f->client, path, "ExitCode"), ==, 0);
}

static void
test_exec (Fixture *f, gconstpointer data)
{
  g_autofree char *path = create (f, data, "shell", NULL);
  g_auto (ExecResult) cat = { 0 }, code = { 0 }, missing = { 0 };
  const char *cat_argv[] = { "cat", NULL };
  const char *exit_argv[] = { "sh", "-c", "exit 7", NULL };
  const char *missing_argv[] = { "no-such-command", NULL };
  int a[4], b[4];

  client_call_ok (f->client, path, "Start");
  /* At once after Start: the exec waits for the agent's session. */
  exec_run (f, path, cat_argv, "hello through the agent\n", &cat);
  g_assert_cmpstr (cat.status, ==, "exit 0");
  g_assert_cmpstr (cat.out, ==, "hello through the agent\n");

  exec_run (f, path, exit_argv, NULL, &code);
  g_assert_cmpstr (code.status, ==, "exit 7");

  exec_run (f, path, missing_argv, NULL, &missing);
  g_assert_cmpstr (missing.status, ==, "exit 127");
  g_autofree char *version = client_get_string (f->client, path, "AgentVersion");
  g_assert_cmpstr (version, !=, "");

  /* Two at once: each hears only its own input. */
  g_assert_true (exec_start (f, path, cat_argv, a, NULL));
  g_assert_true (exec_start (f, path, cat_argv, b, NULL));
  g_assert_cmpint (write (b[0], "second\n", 7), ==, 7);
  g_assert_cmpint (write (a[0], "first\n", 6), ==, 6);
  close (a[0]);
  close (b[0]);
  g_autofree char *a_out = read_all (a[1]), *b_out = read_all (b[1]);
  g_autofree char *a_status = read_all (a[3]), *b_status = read_all (b[3]);
  close (a[2]);
  close (b[2]);
  g_assert_cmpstr (a_out, ==, "first\n");
  g_assert_cmpstr (b_out, ==, "second\n");
  g_assert_cmpstr (a_status, ==, "exit 0\n");
  g_assert_cmpstr (b_status, ==, "exit 0\n");
}

/* microvmctl exec passes stdin through and exits with the command's
 * status. */
static void
test_microvmctl_exec (Fixture *f, gconstpointer data)
{
  g_autofree char *path = create (f, data, "cli", NULL);
  g_autofree char *ctl = g_build_filename (g_getenv ("MICROVMD_BUILD_DIR"), "src", "cli",
                                           "microvmctl", NULL);
  g_autofree char *cmd = NULL, *cmd2 = NULL, *out = NULL, *out2 = NULL;
  int status = 0;

  client_call_ok (f->client, path, "Start");
  cmd = g_strdup_printf ("sh -c 'echo piped-in | %s exec cli -- cat'", ctl);
  g_assert_true (g_spawn_command_line_sync (cmd, &out, NULL, &status, NULL));
  g_assert_true (g_spawn_check_wait_status (status, NULL));
  g_assert_cmpstr (out, ==, "piped-in\n");
  cmd2 = g_strdup_printf ("%s exec cli -- sh -c 'exit 5'", ctl);
  g_assert_true (g_spawn_command_line_sync (cmd2, &out2, NULL, &status, NULL));
  g_assert_true (WIFEXITED (status));
  g_assert_cmpint (WEXITSTATUS (status), ==, 5);
}

static void
test_mounts_and_hostname (Fixture *f, gconstpointer data)
{
  /* "aGVsbG8gZmlsZQo=" is "hello file\n". */
  g_autofree char *path = create (f, data, "mounts",
                                  "\"hostname\":\"guest-host\","
                                  "\"mounts\":[{\"type\":\"file\",\"target\":\"/etc/greeting\","
                                  "\"content\":\"aGVsbG8gZmlsZQo=\",\"mode\":\"0640\"},"
                                  "{\"type\":\"tmpfs\",\"target\":\"/scratch\"}]");
  const char *greeting[] = { "cat", "/etc/greeting", NULL };
  const char *mounts[] = { "cat", "/proc/mounts", NULL };
  const char *hostname[] = { "hostname", NULL };

  client_call_ok (f->client, path, "Start");
  g_autofree char *text = exec_output (f, path, greeting);
  g_assert_cmpstr (text, ==, "hello file\n");
  g_autofree char *table = exec_output (f, path, mounts);
  g_assert_nonnull (strstr (table, " /scratch tmpfs "));
  g_autofree char *name = exec_output (f, path, hostname);
  g_assert_cmpstr (name, ==, "guest-host\n");
}

/* The first machine of a shape boots, and the template of that shape is
 * built behind it; the next starts from it, and is then given its own
 * hostname and mounts before its workload runs. */
static void
test_warm_start (Fixture *f, gconstpointer data)
{
  g_autofree char *first = create (f, data, "first", NULL);
  g_autofree char *second = create (f, data, "second",
                                    "\"hostname\":\"warm-host\","
                                    "\"mounts\":[{\"type\":\"file\",\"target\":\"/etc/greeting\","
                                    "\"content\":\"aGVsbG8gZmlsZQo=\"}],"
                                    "\"cmd\":[\"sleep\",\"100000\"]");
  const char *greeting[] = { "cat", "/etc/greeting", NULL };
  const char *hostname[] = { "hostname", NULL };
  g_autofree char *from = NULL, *text = NULL, *name = NULL;

  client_call_ok (f->client, first, "Start");
  from = client_get_string (f->client, first, "StartedFrom");
  g_assert_cmpstr (from, ==, "cold");
  for (guint i = 0; i < 1200 && count_warm_templates (mv_test_env_state_dir (f->env), TRUE) == 0; i++)
    client_settle (f->client, 100);
  g_assert_cmpuint (count_warm_templates (mv_test_env_state_dir (f->env), TRUE), ==, 1);

  client_call_ok (f->client, second, "Start");
  g_free (from);
  from = client_get_string (f->client, second, "StartedFrom");
  g_assert_cmpstr (from, ==, "warm");

  /* A shape no template can stand for is refused start_mode warm when
   * it is given, not at every start. */
  {
    g_autofree char *spec = spec_text (data, "never-warm",
                                       "\"start_mode\":\"warm\",\"init_mode\":\"systemd\"");
    g_autofree char *err = NULL, *message = NULL;
    g_autofree char *path = client_create (f->client, spec, 0, &err, &message);

    g_assert_null (path);
    g_assert_cmpstr (err, ==, MV_BUS_ERROR_UNSUPPORTED);
    g_assert_nonnull (strstr (message, "start_mode: warm: init_mode:"));
  }
  name = exec_output (f, second, hostname);
  g_assert_cmpstr (name, ==, "warm-host\n");
  text = exec_output (f, second, greeting);
  g_assert_cmpstr (text, ==, "hello file\n");
}

/* The metadata document is in the guest, and a key change reaches the
 * login command of the running guest, without a restart. */
static void
test_metadata_and_keys (Fixture *f, gconstpointer data)
{
  g_autofree char *path = create (f, data, "meta",
                                  "\"metadata\":{\"role\":\"database\"},"
                                  "\"user_data\":\"#cloud-config\","
                                  "\"ssh_keys\":[\"ssh-ed25519 AAAAfirst first@example\"]");
  const char *document[] = { "cat", "/run/microvmd/metadata.json", NULL };
  const char *keys[] = { "/run/microvmd/microvmd-agent", "authorized-keys", "root", NULL };
  const char *hostname[] = { "hostname", NULL };
  guint64 started;

  client_call_ok (f->client, path, "Start");
  started = client_get_u64 (f->client, path, "StartedAt");
  g_autofree char *doc = exec_output (f, path, document);
  g_assert_nonnull (strstr (doc, "\"role\":\"database\""));
  g_assert_nonnull (strstr (doc, "#cloud-config"));
  g_autofree char *before = exec_output (f, path, keys);
  g_assert_cmpstr (before, ==, "ssh-ed25519 AAAAfirst first@example\n");
  g_autofree char *name = exec_output (f, path, hostname);
  g_assert_cmpstr (name, ==, "meta\n");

  /* The whole spec with its secrets, the key replaced. */
  g_autoptr (sd_bus_message) r = client_call (f->client, path, MV_MACHINE_IFACE, "GetSpec",
                                              NULL, NULL, NULL);
  const char *json = NULL;
  g_assert_nonnull (r);
  g_assert_cmpint (sd_bus_message_read (r, "s", &json), >, 0);
  g_autoptr (GString) spec = g_string_new (json);
  g_assert_cmpuint (g_string_replace (spec, "AAAAfirst first@example", "AAAAsecond second@example",
                                      0), ==, 1);
  g_autoptr (sd_bus_message) u = client_call (f->client, path, MV_MACHINE_IFACE, "Update", NULL,
                                              NULL, "s", spec->str);
  g_assert_nonnull (u);

  g_autofree char *after = NULL;
  for (guint i = 0; i < 50; i++)
    {
      g_free (after);
      after = exec_output (f, path, keys);
      if (strstr (after, "second"))
        break;
      client_settle (f->client, 200);
    }
  g_assert_cmpstr (after, ==, "ssh-ed25519 AAAAsecond second@example\n");
  g_assert_cmpuint (client_get_u64 (f->client, path, "StartedAt"), ==, started);
}

static gboolean
health_is (Client *client, gpointer data)
{
  const char *const *want = data;
  g_autofree char *health = client_get_string (client, want[0], "Health");
  return g_strcmp0 (health, want[1]) == 0;
}

static void
assert_health_soon (Fixture *f, const char *path, const char *health)
{
  const char *want[] = { path, health };

  if (!client_wait (f->client, health_is, want, 30000))
    {
      g_autofree char *now = client_get_string (f->client, path, "Health");
      g_error ("Health did not become %s (it is %s)", health, now);
    }
}

static void
test_health_and_wait (Fixture *f, gconstpointer data)
{
  g_autofree char *path = create (f, data, "checked",
                                  "\"health_check\":{\"exec\":[\"test\",\"-e\",\"/tmp/ok\"],"
                                  "\"interval_seconds\":1,\"timeout_seconds\":1,\"retries\":1}");
  const char *touch[] = { "touch", "/tmp/ok", NULL };
  const char *rm[] = { "rm", "/tmp/ok", NULL };
  g_autofree char *err = NULL;

  client_call_ok (f->client, path, "Start");
  assert_health_soon (f, path, "unhealthy");
  g_free (exec_output (f, path, touch));
  g_autoptr (sd_bus_message) w = client_call (f->client, path, MV_MACHINE_IFACE, "Wait", &err,
                                              NULL, "sa{sv}", "healthy", 0);
  g_assert_nonnull (w);
  assert_property (f, path, "Health", "healthy");
  g_free (exec_output (f, path, rm));
  assert_health_soon (f, path, "unhealthy");
  g_assert_cmpuint (client_get_u32 (f->client, path, "HealthFailingStreak"), >=, 1);
}

static int
on_wait_reply (sd_bus_message *m, void *userdata, sd_bus_error *ret_error)
{
  sd_bus_message **out = userdata;

  *out = sd_bus_message_ref (m);
  return 0;
}

static gboolean
has_reply (Client *client, gpointer data)
{
  return *(sd_bus_message **) data != NULL;
}

/* A Wait made before the Start hears how the run ends, though the machine
 * is deleted as it stops. */
static void
test_wait_removed_on_exit (Fixture *f, gconstpointer data)
{
  g_autofree char *path = create (f, data, "once", "\"cmd\":[\"sh\",\"-c\",\"exit 4\"],"
                                  "\"remove_on_exit\":true");
  g_autofree char *id = client_get_string (f->client, path, "Id");
  g_autoptr (sd_bus_message) call = NULL;
  sd_bus_message *reply = NULL;
  const char *key, *state = NULL;
  int32_t exit_code = -1;

  g_assert_cmpint (sd_bus_message_new_method_call (f->client->bus, &call, MV_BUS_NAME, path,
                                                   MV_MACHINE_IFACE, "Wait"), >=, 0);
  g_assert_cmpint (sd_bus_message_append (call, "sa{sv}", "stopped", 2, "id", "s", id,
                                          "next_stop", "b", 1), >=, 0);
  g_assert_cmpint (sd_bus_call_async (f->client->bus, NULL, call, on_wait_reply, &reply,
                                      120 * G_USEC_PER_SEC), >=, 0);
  client_settle (f->client, 200);
  g_assert_null (reply);

  /* The workload exits at once: the Start may be answered after the
   * machine is already wanted destroyed, and then says so. */
  {
    g_autofree char *message = NULL;
    g_autofree char *err = client_machine_call (f->client, path, "Start", &message);

    if (err)
      {
        g_assert_cmpstr (err, ==, MV_BUS_ERROR_INVALID_STATE);
        g_assert_nonnull (strstr (message, "is now wanted destroyed"));
      }
  }
  g_assert_true (client_wait (f->client, has_reply, &reply, 60000));
  g_assert_false (sd_bus_message_is_method_error (reply, NULL));
  g_assert_cmpint (sd_bus_message_enter_container (reply, 'a', "{sv}"), >, 0);
  while (sd_bus_message_enter_container (reply, 'e', "sv") > 0)
    {
      g_assert_cmpint (sd_bus_message_read (reply, "s", &key), >, 0);
      if (g_str_equal (key, "state"))
        g_assert_cmpint (sd_bus_message_read (reply, "v", "s", &state), >, 0);
      else if (g_str_equal (key, "exit_code"))
        g_assert_cmpint (sd_bus_message_read (reply, "v", "i", &exit_code), >, 0);
      else
        g_assert_cmpint (sd_bus_message_skip (reply, "v"), >, 0);
      sd_bus_message_exit_container (reply);
    }
  g_assert_cmpstr (state, ==, "Failed");
  g_assert_cmpint (exit_code, ==, 4);
  sd_bus_message_unref (reply);
}

static void
test_stop_through_agent (Fixture *f, gconstpointer data)
{
  g_autofree char *path = create (f, data, "polite", NULL);
  g_autofree char *log = NULL;

  client_call_ok (f->client, path, "Start");
  client_call_ok (f->client, path, "Stop");
  assert_property (f, path, "State", "Stopped");
  log = mv_test_env_read_daemon_log (f->env);
  g_assert_nonnull (strstr (log, "The guest powered off at its agent's request"));
  g_assert_null (strstr (log, "pressing its power button"));
}

static void
test_bad_workloads (Fixture *f, gconstpointer data)
{
  const struct {
    const char *name;
    const char *extra;
    const char *said;
  } cases[] = {
    { "nouser", "\"cmd\":[\"true\"],\"user\":\"alice\"", "user: alice" },
    { "nocmd", "\"cmd\":[\"no-such-program\"]", "no-such-program" },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *path = create (f, data, cases[i].name, cases[i].extra);
      g_autofree char *msg = NULL, *err = NULL, *dir = NULL;

      err = client_machine_call (f->client, path, "Start", &msg);
      g_test_message ("Start: %s", msg);
      g_assert_cmpstr (err, ==, MV_BUS_ERROR_INVALID_STATE);
      g_assert_nonnull (strstr (msg, "agent"));
      g_assert_nonnull (strstr (msg, cases[i].said));
      assert_property (f, path, "State", "Failed");
    }
}

/* An idle guest goes on standby with the shipped defaults (5 % of a CPU),
 * only the sample interval shortened: its agent's view of its CPUs
 * decides, not what its VMM spends under emulation. */
static void
test_idle_standby_with_defaults (Fixture *f, gconstpointer data)
{
  g_autofree char *path = create (f, data, "sleepy", "\"standby_after_seconds\":60");
  g_autofree char *log = NULL;

  client_call_ok (f->client, path, "Start");
  client_assert_state_soon (f->client, path, "Standby", 120000);
  log = mv_test_env_read_daemon_log (f->env);
  g_assert_nonnull (strstr (log, "idle for 60 s: going on standby"));
  /* And it wakes where it was: its agent answers again. */
  client_call_ok (f->client, path, "Start");
  const char *hostname[] = { "hostname", NULL };
  g_autofree char *name = exec_output (f, path, hostname);
  g_assert_cmpstr (name, ==, "sleepy\n");
}

/* A read-only file can be neither written nor removed and stays
 * readable, a writable one can be removed, and a read-only tmpfs is
 * mounted ro. touch and rm behave alike in busybox and the simulated
 * guest. */
static void
test_read_only_mounts (Fixture *f, gconstpointer data)
{
  const AgentCase *c = data;
  /* "c2VhbGVkCg==" is "sealed\n". */
  g_autofree char *path = create (f, data, "readonly",
                                  "\"mounts\":[{\"type\":\"file\",\"target\":\"/etc/ro-file\","
                                  "\"content\":\"c2VhbGVkCg==\",\"read_only\":true},"
                                  "{\"type\":\"file\",\"target\":\"/etc/rw-file\","
                                  "\"content\":\"c2VhbGVkCg==\"},"
                                  "{\"type\":\"tmpfs\",\"target\":\"/ro-scratch\","
                                  "\"read_only\":true},"
                                  "{\"type\":\"tmpfs\",\"target\":\"/rw-scratch\"}]");
  const char *touch_ro[] = { "touch", "/etc/ro-file", NULL };
  const char *rm_ro[] = { "rm", "/etc/ro-file", NULL };
  const char *cat_ro[] = { "cat", "/etc/ro-file", NULL };
  const char *touch_in_ro[] = { "touch", "/ro-scratch/new", NULL };
  const char *touch_in_rw[] = { "touch", "/rw-scratch/new", NULL };
  const char *rm_rw[] = { "rm", "/etc/rw-file", NULL };
  const char *test_rw[] = { "test", "-e", "/etc/rw-file", NULL };
  const char *mounts[] = { "cat", "/proc/mounts", NULL };
  g_auto (ExecResult) touched = { 0 }, removed = { 0 }, in_ro = { 0 }, gone = { 0 };

  client_call_ok (f->client, path, "Start");
  exec_run (f, path, touch_ro, NULL, &touched);
  g_assert_cmpstr (touched.status, ==, "exit 1");
  g_assert_nonnull (strstr (touched.err, "Read-only file system"));
  exec_run (f, path, rm_ro, NULL, &removed);
  g_assert_cmpstr (removed.status, ==, "exit 1");
  g_autofree char *text = exec_output (f, path, cat_ro);
  g_assert_cmpstr (text, ==, "sealed\n");

  g_free (exec_output (f, path, rm_rw));
  exec_run (f, path, test_rw, NULL, &gone);
  g_assert_cmpstr (gone.status, ==, "exit 1");

  exec_run (f, path, touch_in_ro, NULL, &in_ro);
  g_assert_cmpstr (in_ro.status, ==, "exit 1");
  g_assert_nonnull (strstr (in_ro.err, "Read-only file system"));
  g_free (exec_output (f, path, touch_in_rw));
  g_autofree char *table = exec_output (f, path, mounts);
  g_assert_nonnull (strstr (table, " /ro-scratch tmpfs ro"));
  g_assert_nonnull (strstr (table, " /rw-scratch tmpfs rw"));

  /* The simulated shell has no redirections; busybox's has. */
  if (g_str_equal (c->type, "qemu"))
    {
      const char *overwrite[] = { "sh", "-c", "echo x > /etc/ro-file", NULL };
      g_auto (ExecResult) written = { 0 };

      exec_run (f, path, overwrite, NULL, &written);
      g_assert_cmpstr (written.status, !=, "exit 0");
      g_assert_nonnull (strstr (written.err, "Read-only file system"));
      g_free (text);
      text = exec_output (f, path, cat_ro);
      g_assert_cmpstr (text, ==, "sealed\n");
    }
}

/* ---- bad input ---- */

/* No machine is left on disk, in the runtime directory or on the bus. */
static void
assert_no_machines (Fixture *f)
{
  g_autoptr (sd_bus_message) reply = NULL;
  int r;

  g_assert_cmpuint (count_machine_dirs (mv_test_env_state_dir (f->env)), ==, 0);
  g_assert_cmpuint (count_machine_dirs (mv_test_env_runtime_dir (f->env)), ==, 0);
  reply = client_call (f->client, MV_MANAGER_PATH, MV_MANAGER_IFACE, "ListMachines", NULL, NULL,
                       NULL);
  g_assert_nonnull (reply);
  g_assert_cmpint (sd_bus_message_enter_container (reply, 'a', NULL), >=, 0);
  r = sd_bus_message_at_end (reply, FALSE);
  g_assert_cmpint (r, >, 0);
}

/* Exec with @argv and, if @option is not NULL, that one option (a
 * string): the D-Bus error's name, with its message in @message. */
static char *
exec_error (Fixture *f, const char *path, const char *const *argv, const char *option,
            char **message)
{
  g_autoptr (sd_bus_message) m = NULL, reply = NULL;
  sd_bus_error error = SD_BUS_ERROR_NULL;
  char *name;
  int r;

  r = sd_bus_message_new_method_call (f->client->bus, &m, MV_BUS_NAME, path, MV_MACHINE_IFACE,
                                      "Exec");
  g_assert_cmpint (r, >=, 0);
  g_assert_cmpint (sd_bus_message_append_strv (m, (char **) argv), >=, 0);
  g_assert_cmpint (sd_bus_message_append (m, "a{ss}", 0), >=, 0);
  if (option)
    g_assert_cmpint (sd_bus_message_append (m, "a{sv}", 1, option, "s", "x"), >=, 0);
  else
    g_assert_cmpint (sd_bus_message_append (m, "a{sv}", 0), >=, 0);
  r = sd_bus_call (f->client->bus, m, 30 * G_USEC_PER_SEC, &error, &reply);
  g_assert_cmpint (r, <, 0);
  g_test_message ("Exec: %s: %s", error.name, error.message);
  name = g_strdup (error.name);
  *message = g_strdup (error.message);
  sd_bus_error_free (&error);
  return name;
}

/* Each bad request fails with its own error, a message that names what
 * was wrong, and leaves nothing behind. */
static void
test_bad_input (Fixture *f, gconstpointer data)
{
  /* Two files of 540000 bytes: over 1 MiB together. */
  g_autofree guchar *bytes = g_malloc0 (540000);
  g_autofree char *big = g_base64_encode (bytes, 540000);
  g_autofree char *too_big = g_strdup_printf ("\"mounts\":["
                                              "{\"type\":\"file\",\"target\":\"/a\",\"content\":\"%s\"},"
                                              "{\"type\":\"file\",\"target\":\"/b\",\"content\":\"%s\"}]",
                                              big, big);
  const struct {
    const char *extra;
    const char *said;
  } creates[] = {
    { "\"mounts\":[{\"type\":\"tmpfs\",\"target\":\"scratch\"}]", "mounts[0].target" },
    { "\"mounts\":[{\"type\":\"tmpfs\",\"target\":\"/scratch\"},"
      "{\"type\":\"file\",\"target\":\"/scratch\",\"content\":\"eAo=\"}]", "mounts[1].target" },
    { too_big, "1 MiB" },
  };
  const char *empty_argv[] = { NULL };
  const char *true_argv[] = { "true", NULL };
  g_autofree char *path = NULL, *id = NULL;

  for (guint i = 0; i < G_N_ELEMENTS (creates); i++)
    {
      g_autofree char *spec = spec_text (data, "bad", creates[i].extra);
      g_autofree char *err = NULL, *msg = NULL, *made = NULL;

      made = client_create (f->client, spec, 0, &err, &msg);
      g_test_message ("CreateMachine: %s: %s", err, msg);
      g_assert_null (made);
      g_assert_cmpstr (err, ==, MV_BUS_ERROR_INVALID_ARGUMENT);
      g_assert_nonnull (strstr (msg, creates[i].said));
      assert_no_machines (f);
    }

  /* Stopped: no exec, no health to wait for, and Wait checks the id. */
  path = create (f, data, "target", NULL);
  id = client_get_string (f->client, path, "Id");
  {
    g_autofree char *msg = NULL;
    g_autofree char *err = exec_error (f, path, true_argv, NULL, &msg);

    g_assert_cmpstr (err, ==, MV_BUS_ERROR_INVALID_STATE);
    g_assert_nonnull (strstr (msg, "Stopped"));
  }
  {
    g_autofree char *err = NULL, *msg = NULL;
    g_autoptr (sd_bus_message) r = client_call (f->client, path, MV_MACHINE_IFACE, "Wait", &err,
                                                &msg, "sa{sv}", "healthy", 0);

    g_test_message ("Wait: %s: %s", err, msg);
    g_assert_null (r);
    g_assert_cmpstr (err, ==, MV_BUS_ERROR_INVALID_STATE);
    g_assert_nonnull (strstr (msg, "health check"));
  }
  {
    g_autofree char *err = NULL, *msg = NULL;
    g_autoptr (sd_bus_message) r = client_call (f->client, path, MV_MACHINE_IFACE, "Wait", &err,
                                                &msg, "sa{sv}", "stopped", 1, "id", "s",
                                                "0123456789abcdef");

    g_test_message ("Wait: %s: %s", err, msg);
    g_assert_null (r);
    g_assert_cmpstr (err, ==, MV_BUS_ERROR_NOT_FOUND);
    g_assert_nonnull (strstr (msg, "0123456789abcdef"));
  }
  /* Wait is open to everyone, so a machine holds a bounded number. */
  {
    g_autofree char *err = NULL, *msg = NULL;
    g_autoptr (sd_bus_message) r = NULL;

    for (guint i = 0; i < 256; i++)
      {
        g_autoptr (sd_bus_message) call = NULL;

        g_assert_cmpint (sd_bus_message_new_method_call (f->client->bus, &call, MV_BUS_NAME, path,
                                                         MV_MACHINE_IFACE, "Wait"), >=, 0);
        g_assert_cmpint (sd_bus_message_append (call, "sa{sv}", "stopped", 1, "next_stop", "b",
                                                1), >=, 0);
        g_assert_cmpint (sd_bus_call_async (f->client->bus, NULL, call, NULL, NULL,
                                            120 * G_USEC_PER_SEC), >=, 0);
      }
    client_settle (f->client, 500);
    r = client_call (f->client, path, MV_MACHINE_IFACE, "Wait", &err, &msg, "sa{sv}", "stopped",
                     1, "next_stop", "b", 1);
    g_test_message ("Wait: %s: %s", err, msg);
    g_assert_null (r);
    g_assert_cmpstr (err, ==, MV_BUS_ERROR_RESOURCE_EXHAUSTED);
    g_assert_nonnull (strstr (msg, "256"));
  }

  /* Running: an exec of nothing, or with an option Exec does not have,
   * is refused and the guest goes on as before. */
  client_call_ok (f->client, path, "Start");
  {
    g_autofree char *msg = NULL;
    g_autofree char *err = exec_error (f, path, empty_argv, NULL, &msg);

    g_assert_cmpstr (err, ==, MV_BUS_ERROR_INVALID_ARGUMENT);
    g_assert_nonnull (strstr (msg, "argv"));
  }
  {
    g_autofree char *msg = NULL;
    g_autofree char *err = exec_error (f, path, true_argv, "no_such_option", &msg);

    g_assert_cmpstr (err, ==, MV_BUS_ERROR_UNSUPPORTED);
    g_assert_nonnull (strstr (msg, "no_such_option"));
  }
  g_free (exec_output (f, path, true_argv));
  assert_property (f, path, "State", "Running");
  assert_property (f, path, "Id", id);
}

/* ---- a guest whose agent never answers ---- */

/* Calls @member on the machine with a D-Bus timeout of 180 s: NULL, or
 * the error's name with @message set. */
static char *
machine_call_slow (Fixture *f, const char *path, const char *member, char **message)
{
  g_autoptr (sd_bus_message) m = NULL, reply = NULL;
  sd_bus_error error = SD_BUS_ERROR_NULL;
  char *name;

  g_assert_cmpint (sd_bus_message_new_method_call (f->client->bus, &m, MV_BUS_NAME, path,
                                                   MV_MACHINE_IFACE, member), >=, 0);
  if (sd_bus_call (f->client->bus, m, 180 * G_USEC_PER_SEC, &error, &reply) >= 0)
    return NULL;
  name = g_strdup (error.name);
  *message = g_strdup (error.message);
  sd_bus_error_free (&error);
  return name;
}

/* The Debian guest: the agent hands PID 1 over to systemd, comes back as
 * its service, and Start returns when that service answers; execs run
 * through it, and Stop asks it to have systemd power the guest off. */
static void
test_systemd (Fixture *f, gconstpointer data)
{
  const AgentCase *c = data;
  g_autofree char *spec = g_strdup_printf ("{\"name\":\"debian\",\"hypervisor_type\":\"%s\","
                                           "\"memory_bytes\":536870912,"
                                           "\"init_mode\":\"systemd\","
                                           "\"disks\":[{\"path\":\"%s\",\"read_only\":true,"
                                           "\"root\":true}]}",
                                           c->type, debian_image);
  g_autofree char *path = client_create_ok (f->client, spec);
  g_autofree char *id = client_get_string (f->client, path, "Id");
  g_autofree char *dir = g_build_filename (mv_test_env_runtime_dir (f->env), MV_MACHINES_DIR,
                                           id, NULL);
  const char *comm[] = { "cat", "/proc/1/comm", NULL };
  const char *active[] = { "systemctl", "is-active", "microvmd-agent.service", NULL };
  g_autofree char *err = NULL, *msg = NULL, *state = NULL, *version = NULL;
  g_autofree char *init = NULL, *unit = NULL, *log = NULL;
  gint64 started = g_get_monotonic_time ();

  err = machine_call_slow (f, path, "Start", &msg);
  if (err)
    {
      g_autofree char *console = console_text (f, path);
      g_test_message ("console:\n%s", console);
      g_error ("Start: %s: %s", err, msg);
    }
  g_test_message ("Start took %.1f s", (g_get_monotonic_time () - started) / 1e6);
  state = client_get_string (f->client, path, "State");
  g_assert_cmpstr (state, ==, "Running");
  version = client_get_string (f->client, path, "AgentVersion");
  g_assert_cmpstr (version, !=, "");
  g_assert_cmpuint (count_processes_with (dir), ==, 1);

  init = exec_output (f, path, comm);
  g_assert_cmpstr (init, ==, "systemd\n");
  unit = exec_output (f, path, active);
  g_assert_cmpstr (unit, ==, "active\n");

  started = g_get_monotonic_time ();
  g_free (err);
  g_free (msg);
  err = machine_call_slow (f, path, "Stop", &msg);
  if (err)
    g_error ("Stop: %s: %s", err, msg);
  g_test_message ("Stop took %.1f s", (g_get_monotonic_time () - started) / 1e6);
  g_free (state);
  state = client_get_string (f->client, path, "State");
  g_assert_cmpstr (state, ==, "Stopped");
  log = mv_test_env_read_daemon_log (f->env);
  g_assert_nonnull (strstr (log, "The guest powered off at its agent's request"));
  g_assert_null (strstr (log, "pressing its power button"));
  g_assert_cmpuint (count_processes_with (dir), ==, 0);
}

/* The number of VMM processes serving the machine at @path. */
static guint
vmm_count (Fixture *f, const char *path)
{
  g_autofree char *id = client_get_string (f->client, path, "Id");
  g_autofree char *dir = g_build_filename (mv_test_env_runtime_dir (f->env), MV_MACHINES_DIR, id,
                                           NULL);
  return count_processes_with (dir);
}

/* No socket is left in @dir (which may not exist). */
static void
assert_no_sockets (const char *dir)
{
  g_autoptr (GDir) d = g_dir_open (dir, 0, NULL);
  const char *name;

  while (d && (name = g_dir_read_name (d)))
    {
      g_autofree char *file = g_build_filename (dir, name, NULL);
      GStatBuf st;

      if (g_lstat (file, &st) == 0 && S_ISSOCK (st.st_mode))
        g_error ("a socket was left behind: %s", file);
    }
}

/* A guest without microvmd's agent, though its spec waits for one: on
 * QEMU the older test guest (its agent answers lines, never a frame), on
 * the test VMMs a guest whose agent port answers nothing. */
static void
test_agent_silent (Fixture *f, gconstpointer data)
{
  const AgentCase *c = data;
  g_autofree char *spec = NULL, *path = NULL, *err = NULL, *msg = NULL;
  g_autofree char *id = NULL, *dir = NULL, *console = NULL;
  g_auto (GStrv) lines = NULL;
  const char *quoted;
  guint found = 0;

  if (g_str_equal (c->type, "qemu"))
    spec = g_strdup_printf ("{\"name\":\"silent\",\"hypervisor_type\":\"qemu\","
                            "\"kernel\":\"%s\",\"initrd\":\"%s\",\"memory_bytes\":268435456,"
                            "\"readiness\":\"agent\"}", line_kernel, line_initrd);
  else
    spec = spec_text (data, "silent", "\"readiness\":\"agent\","
                      "\"kernel_args\":\"console=ttyS0 reboot=k panic=1 microvmd.agent_silent\"");
  path = client_create_ok (f->client, spec);
  id = client_get_string (f->client, path, "Id");
  dir = g_build_filename (mv_test_env_runtime_dir (f->env), MV_MACHINES_DIR, id, NULL);

  err = client_machine_call (f->client, path, "Start", &msg);
  g_test_message ("Start: %s: %s", err, msg);
  g_assert_cmpstr (err, ==, MV_BUS_ERROR_INVALID_STATE);
  g_assert_nonnull (strstr (msg, "agent did not answer"));
  /* The console is quoted: lines of its log are in the message (the
   * guest may have said more while the VMM was being ended). */
  quoted = strstr (msg, "The console's last lines:\n");
  g_assert_nonnull (quoted);
  console = console_text (f, path);
  g_test_message ("console.log: %zu bytes", strlen (console));
  lines = g_strsplit (console, "\n", -1);
  for (char **line = lines; *line; line++)
    if (*g_strchomp (*line))
      {
        g_autofree char *whole = g_strdup_printf ("\n%s\n", *line);
        found += strstr (quoted, whole) != NULL;
      }
  g_assert_cmpuint (found, >=, 1);
  assert_property (f, path, "State", "Failed");
  g_assert_cmpuint (vmm_count (f, path), ==, 0);
  assert_no_sockets (dir);
}

/* ---- Firecracker's metadata service ---- */

/* latest/meta-data/attributes/role of the MMDS document behind
 * @api_socket. */
static char *
mmds_role (const char *api_socket)
{
  g_autofree char *body = http_get_unix (api_socket, "/mmds");
  g_autoptr (JsonNode) root = json_from_string (body, NULL);
  JsonObject *o;

  g_test_message ("GET /mmds: %s", body);
  g_assert_nonnull (root);
  o = json_node_get_object (root);
  o = json_object_get_object_member (o, "latest");
  g_assert_nonnull (o);
  o = json_object_get_object_member (o, "meta-data");
  g_assert_nonnull (o);
  o = json_object_get_object_member (o, "attributes");
  g_assert_nonnull (o);
  return g_strdup (json_object_get_string_member_with_default (o, "role", ""));
}

/* The VMM's metadata service has the document once the guest runs, and
 * follows an Update of the running machine. */
static void
test_mmds_follows (Fixture *f, gconstpointer data)
{
  g_autofree char *path = create (f, data, "served", "\"metadata\":{\"role\":\"database\"}");
  g_autofree char *api_socket = NULL, *before = NULL, *after = NULL;
  const char *json = NULL;
  guint64 started;

  client_call_ok (f->client, path, "Start");
  started = client_get_u64 (f->client, path, "StartedAt");
  api_socket = fixture_runtime_file (f, path, "api.sock");
  before = mmds_role (api_socket);
  g_assert_cmpstr (before, ==, "database");

  g_autoptr (sd_bus_message) r = client_call (f->client, path, MV_MACHINE_IFACE, "GetSpec",
                                              NULL, NULL, NULL);
  g_assert_nonnull (r);
  g_assert_cmpint (sd_bus_message_read (r, "s", &json), >, 0);
  g_autoptr (GString) spec = g_string_new (json);
  g_assert_cmpuint (g_string_replace (spec, "\"database\"", "\"cache\"", 0), ==, 1);
  g_autoptr (sd_bus_message) u = client_call (f->client, path, MV_MACHINE_IFACE, "Update", NULL,
                                              NULL, "s", spec->str);
  g_assert_nonnull (u);
  for (guint i = 0; i < 25; i++)
    {
      g_free (after);
      after = mmds_role (api_socket);
      if (g_str_equal (after, "cache"))
        break;
      client_settle (f->client, 200);
    }
  g_assert_cmpstr (after, ==, "cache");
  g_assert_cmpuint (client_get_u64 (f->client, path, "StartedAt"), ==, started);
}

/* ---- resizing a running QEMU guest ---- */

#define MiB (G_GUINT64_CONSTANT (1) << 20)

/* The guest's own view: its online vCPUs and MemTotal in bytes. */
static void
guest_size (Fixture *f, const char *path, char **online, guint64 *mem_total)
{
  const char *online_argv[] = { "cat", "/sys/devices/system/cpu/online", NULL };
  const char *mem_argv[] = { "sh", "-c", "grep MemTotal /proc/meminfo", NULL };
  g_autofree char *cpus = exec_output (f, path, online_argv);
  g_autofree char *mem = exec_output (f, path, mem_argv);
  const char *digits = mem + strcspn (mem, "0123456789");

  *online = g_strstrip (g_steal_pointer (&cpus));
  *mem_total = g_ascii_strtoull (digits, NULL, 10) * 1024;
}

/* Waits (a guest under TCG is slow) until the guest sees @want_online
 * vCPUs and a MemTotal from @min_total to @max_total. */
static void
wait_guest_size (Fixture *f, const char *path, const char *want_online, guint64 min_total,
                 guint64 max_total)
{
  gint64 deadline = g_get_monotonic_time () + 30 * G_USEC_PER_SEC;

  for (;;)
    {
      g_autofree char *online = NULL;
      guint64 mem_total;

      guest_size (f, path, &online, &mem_total);
      if (g_str_equal (online, want_online) && mem_total >= min_total && mem_total <= max_total)
        return;
      if (g_get_monotonic_time () > deadline)
        g_error ("the guest has vCPUs %s and MemTotal %" G_GUINT64_FORMAT " MiB; wanted %s and "
                 "%" G_GUINT64_FORMAT " to %" G_GUINT64_FORMAT " MiB", online, mem_total / MiB,
                 want_online, min_total / MiB, max_total / MiB);
      g_usleep (500 * 1000);
    }
}

static void
resize (Fixture *f, const char *path, guint32 vcpus, guint64 memory_bytes)
{
  g_autofree char *err = NULL, *msg = NULL;
  g_autoptr (sd_bus_message) reply = client_call (f->client, path, MV_MACHINE_IFACE, "Resize",
                                                  &err, &msg, "ut", vcpus, memory_bytes);

  if (!reply)
    g_error ("Resize: %s: %s", err, msg);
  g_assert_cmpuint (client_get_u32 (f->client, path, "VCPUs"), ==, vcpus);
  g_assert_cmpuint (client_get_u64 (f->client, path, "MemoryBytes"), ==, memory_bytes);
}

/* Room for 2 vCPUs and 512 MiB: Resize gives them to the running guest,
 * whose agent brings the new vCPU online and whose kernel takes the
 * virtio-mem memory; the memory is taken back and given again while it
 * runs (a vCPU under TCG is not), and the next start keeps the size. Standby of such a machine is refused, and it runs on. */
static void
test_resize_running (Fixture *f, gconstpointer data)
{
  g_autofree char *path = create (f, data, "grower",
                                  "\"cpu_millicores\":1000,\"max_vcpus\":2,"
                                  "\"max_memory_bytes\":536870912");
  g_autofree char *online = NULL, *err = NULL, *msg = NULL;
  g_autoptr (sd_bus_message) reply = NULL;
  guint64 boot_total, grown;

  client_call_ok (f->client, path, "Start");
  guest_size (f, path, &online, &boot_total);
  g_assert_cmpstr (online, ==, "0");
  g_assert_cmpuint (boot_total, <, 256 * MiB);

  resize (f, path, 2, 512 * MiB);
  /* All 256 MiB added, less nothing but rounding: virtio-mem's memory
   * needs no memory map of its own out of the boot memory. */
  grown = boot_total + 250 * MiB;
  wait_guest_size (f, path, "0-1", grown, G_MAXUINT64);

  /* Under TCG a vCPU is not given back (QEMU would abort when it is
   * plugged again): refused before the memory is touched. */
  reply = client_call (f->client, path, MV_MACHINE_IFACE, "Resize", &err, &msg, "ut",
                       (guint32) 1, (guint64) (256 * MiB));
  g_assert_null (reply);
  g_assert_cmpstr (err, ==, MV_BUS_ERROR_UNSUPPORTED);
  if (!strstr (msg, "vcpus: ") || !strstr (msg, "TCG"))
    g_error ("'%s' does not name vcpus and TCG", msg);
  g_assert_cmpuint (client_get_u32 (f->client, path, "VCPUs"), ==, 2);
  g_assert_cmpuint (client_get_u64 (f->client, path, "MemoryBytes"), ==, 512 * MiB);
  wait_guest_size (f, path, "0-1", grown, G_MAXUINT64);
  g_clear_pointer (&err, g_free);
  g_clear_pointer (&msg, g_free);

  /* The memory is: unplugged from the running guest, and plugged again. */
  resize (f, path, 2, 256 * MiB);
  wait_guest_size (f, path, "0-1", 0, boot_total);
  resize (f, path, 2, 512 * MiB);
  wait_guest_size (f, path, "0-1", grown, G_MAXUINT64);

  /* The standby is refused before anything is frozen, saying why. */
  reply = client_call (f->client, path, MV_MACHINE_IFACE, "Standby", &err, &msg, "");
  g_assert_null (reply);
  g_assert_cmpstr (err, ==, MV_BUS_ERROR_UNSUPPORTED);
  if (!strstr (msg, "room to grow"))
    g_error ("'%s' does not say why", msg);
  assert_property (f, path, "State", "Running");
  wait_guest_size (f, path, "0-1", grown, G_MAXUINT64);

  client_call_ok (f->client, path, "Stop");
  client_call_ok (f->client, path, "Start");
  wait_guest_size (f, path, "0-1", grown, G_MAXUINT64);
  client_call_ok (f->client, path, "Stop");
}

/* ---- registration ---- */

static void
add_with (const char *type, const char *name, void (*func) (Fixture *, gconstpointer),
          const char *lifecycle)
{
  AgentCase *c = g_new0 (AgentCase, 1);
  g_autofree char *guest = g_strdup_printf ("[guest]\nkernel=%s\ninitramfs=%s\n%s", agent_kernel,
                                            agent_initramfs, lifecycle);
  g_autofree char *test_path = g_strdup_printf ("/agent/%s/%s", type, name);

  c->type = type;
  c->config = guest_config (type, guest);
  g_test_add (test_path, Fixture, c, agent_fixture_setup, func, agent_fixture_teardown);
}

static void
add (const char *type, const char *name, void (*func) (Fixture *, gconstpointer))
{
  add_with (type, name, func, lifecycle_config);
}

int
main (int argc, char **argv)
{
  const char *types[] = { "qemu", "cloud-hypervisor", "firecracker" };
  const char *build = g_getenv ("MICROVMD_BUILD_DIR");

  g_test_init (&argc, &argv, NULL);
  g_assert_nonnull (build);
  agent_kernel = g_build_filename (build, "guest", "vmlinuz", NULL);
  agent_initramfs = g_build_filename (build, "guest", "initramfs.img", NULL);
  rootfs = g_build_filename (build, "tests", "guest", "rootfs.ext4", NULL);
  debian_image = g_build_filename (build, "tests", "guest", "debian-systemd.ext4", NULL);
  line_kernel = g_build_filename (build, "tests", "guest", "vmlinuz", NULL);
  line_initrd = g_build_filename (build, "tests", "guest", "initrd.img", NULL);

  for (guint i = 0; i < G_N_ELEMENTS (types); i++)
    {
      add (types[i], "workload-exit-code", test_workload_exit_code);
      add (types[i], "workload-clean-exit", test_workload_clean_exit);
      add (types[i], "exec", test_exec);
      add (types[i], "microvmctl-exec", test_microvmctl_exec);
      add (types[i], "mounts-and-hostname", test_mounts_and_hostname);
      add (types[i], "warm-start", test_warm_start);
      add (types[i], "metadata-and-keys", test_metadata_and_keys);
      add (types[i], "health-and-wait", test_health_and_wait);
      add (types[i], "wait-removed-on-exit", test_wait_removed_on_exit);
      add (types[i], "stop-through-agent", test_stop_through_agent);
      add (types[i], "bad-workloads", test_bad_workloads);
      add (types[i], "read-only-mounts", test_read_only_mounts);
      add (types[i], "bad-input", test_bad_input);
      add_with (types[i], "agent-silent", test_agent_silent, short_boot_config);
    }
  add_with ("qemu", "idle-standby-with-defaults", test_idle_standby_with_defaults,
            "[lifecycle]\nidle-sample-seconds=1\n");
  /* The test VMMs only simulate the hand-over to systemd. */
  add_with ("qemu", "systemd", test_systemd, systemd_lifecycle_config);
  add ("qemu", "resize-running", test_resize_running);
  add ("firecracker", "mmds-follows-updates", test_mmds_follows);
  /* The real agent's follow is the same code as any log's: the test VMMs
   * show it, and workload-exit-code reads a real guest's log. */
  add ("cloud-hypervisor", "workload-log-follow", test_workload_log_follow);
  add ("firecracker", "workload-log-follow", test_workload_log_follow);
  return g_test_run ();
}
