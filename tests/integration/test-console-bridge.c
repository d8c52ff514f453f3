/* Remote consoles through the daemon's console bridge, with real QEMU
 * guests under TCG and Python's WebSocket client (ws-console.py): a
 * serial session in which a typed command's output comes back, and the
 * same through `microvmctl console --remote`; a login session through
 * microvmd's agent as the configured user, whose terminal takes a new
 * size and whose console key is in the guest's metadata only while it is
 * needed; used, forged and expired tokens refused; the bounds on tokens
 * and the 8 KiB reserve of console keys, filled; and a session that ends
 * when its machine stops. */
#include "bus-client.h"
#include "names.h"

#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Tokens expire soon here, so that the test sees it. */
#define TOKEN_SECONDS 8

static char *agent_kernel, *agent_initramfs, *rootfs;
static char *line_kernel, *line_initrd;
static char *client_script, *microvmctl;

/* A certificate of the test's own for 127.0.0.1, and its key. */
static char *tls_dir, *tls_cert, *tls_key;

static void
make_certificate (void)
{
  g_autofree char *subject = NULL;
  const char *argv[] = { "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                         "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                         "-keyout", NULL, "-out", NULL, NULL };
  g_autoptr (GError) error = NULL;
  int status = 0;

  tls_dir = g_dir_make_tmp ("microvmd-console-tls-XXXXXX", &error);
  g_assert_no_error (error);
  tls_cert = g_build_filename (tls_dir, "cert.pem", NULL);
  tls_key = g_build_filename (tls_dir, "key.pem", NULL);
  argv[13] = tls_key;
  argv[15] = tls_cert;
  g_assert_true (g_spawn_sync (NULL, (char **) argv, NULL, G_SPAWN_SEARCH_PATH |
                               G_SPAWN_STDOUT_TO_DEV_NULL | G_SPAWN_STDERR_TO_DEV_NULL, NULL, NULL,
                               NULL, NULL, &status, &error));
  g_assert_no_error (error);
  g_assert_true (g_spawn_check_wait_status (status, NULL));
}

static void
setup (Fixture *f, gconstpointer data)
{
  gboolean tls = data != NULL;
  g_autofree char *tls_lines = tls ? g_strdup_printf ("tls-certificate=%s\ntls-key=%s\n",
                                                      tls_cert, tls_key)
                                   : g_strdup ("");
  g_autofree char *more = g_strdup_printf ("[guest]\nkernel=%s\ninitramfs=%s\n"
                                           "[lifecycle]\nboot-timeout-seconds=60\n"
                                           "stop-timeout-seconds=20\n"
                                           "[console]\nlisten=127.0.0.1:0\n"
                                           "token-seconds=%d\n%s", agent_kernel, agent_initramfs,
                                           TOKEN_SECONDS, tls_lines);
  g_autofree char *text = guest_config ("qemu", more);

  fixture_setup (f, text);
}

static void
teardown (Fixture *f, gconstpointer data)
{
  client_delete_all (f->client);
  fixture_teardown (f, data);
}

static char *
console_url (Fixture *f)
{
  g_autofree char *url = NULL;
  sd_bus_error error = SD_BUS_ERROR_NULL;

  g_assert_cmpint (sd_bus_get_property_string (f->client->bus, MV_BUS_NAME, MV_MANAGER_PATH,
                                               MV_MANAGER_IFACE, "ConsoleURL", &error, &url),
                   >=, 0);
  g_assert_true (g_str_has_prefix (url, "ws://127.0.0.1:") ||
                 g_str_has_prefix (url, "wss://127.0.0.1:"));
  g_assert_true (g_str_has_suffix (url, "/console"));
  return g_steal_pointer (&url);
}

/* RequestConsole(@mode): the token, or NULL with *@err and *@message. */
static char *
request (Fixture *f, const char *path, const char *mode, char **err, char **message)
{
  g_autoptr (sd_bus_message) r = client_call (f->client, path, MV_MACHINE_IFACE,
                                              "RequestConsole", err, message, "s", mode);
  const char *token = NULL;
  guint64 expires_at = 0;
  gint64 now = g_get_real_time ();

  if (!r)
    return NULL;
  g_assert_cmpint (sd_bus_message_read (r, "st", &token, &expires_at), >, 0);
  g_assert_cmpuint (strlen (token), ==, 64);
  g_assert_cmpint ((gint64) expires_at, >, now + (TOKEN_SECONDS - 2) * G_USEC_PER_SEC);
  g_assert_cmpint ((gint64) expires_at, <=, now + (TOKEN_SECONDS + 1) * G_USEC_PER_SEC);
  return g_strdup (token);
}

static char *
request_ok (Fixture *f, const char *path, const char *mode)
{
  g_autofree char *err = NULL, *message = NULL;
  char *token = request (f, path, mode, &err, &message);

  if (!token)
    g_error ("RequestConsole %s: %s: %s", mode, err, message);
  return token;
}

/* Runs ws-console.py with @args after the URL and token; its output, and
 * its exit status in *@status. */
static char *
ws_client (const char *url, const char *token, const char *const *args, int *status)
{
  g_autoptr (GPtrArray) argv = g_ptr_array_new ();
  g_autofree char *out = NULL;
  g_autoptr (GError) error = NULL;
  int wait_status = 0;

  g_ptr_array_add (argv, (gpointer) "/usr/bin/python3");
  g_ptr_array_add (argv, client_script);
  g_ptr_array_add (argv, (gpointer) url);
  g_ptr_array_add (argv, (gpointer) token);
  for (guint i = 0; args && args[i]; i++)
    g_ptr_array_add (argv, (gpointer) args[i]);
  g_ptr_array_add (argv, NULL);
  if (!g_spawn_sync (NULL, (char **) argv->pdata, NULL, G_SPAWN_DEFAULT, NULL, NULL, &out, NULL,
                     &wait_status, &error))
    g_error ("ws-console.py: %s", error->message);
  g_assert_true (WIFEXITED (wait_status));
  *status = WEXITSTATUS (wait_status);
  g_test_message ("ws-console.py: %d: %s", *status, out);
  return g_steal_pointer (&out);
}

/* The client is refused with code 1008 and @words. */
static void
assert_refused (const char *url, const char *token, const char *words)
{
  const char *args[] = { "--wait-close", "--timeout", "10", NULL };
  int status = 0;
  g_autofree char *out = ws_client (url, token, args, &status);
  g_autofree char *want = g_strdup_printf ("closed 1008 token: %s", words);

  g_assert_cmpint (status, ==, 0);
  if (!strstr (out, want))
    g_error ("'%s' does not say '%s'", out, want);
}

/* The guest's metadata document, as its agent has it. */
static char *
guest_document (Fixture *f, const char *path)
{
  static const char *const cat[] = { "cat", "/run/microvmd/metadata.json", NULL };

  return exec_output (f, path, cat);
}

/* The console keys of the guest's document, as JSON; "" if it has none. */
static char *
guest_keys (Fixture *f, const char *path)
{
  g_autofree char *doc = guest_document (f, path);
  g_autoptr (JsonNode) node = json_from_string (doc, NULL);
  JsonObject *meta;

  g_assert_nonnull (node);
  meta = json_object_get_object_member (
    json_object_get_object_member (json_node_get_object (node), "latest"), "meta-data");
  if (!json_object_has_member (meta, "console-keys"))
    return g_strdup ("");
  return json_to_string (json_object_get_member (meta, "console-keys"), FALSE);
}

/* Waits until the guest's console keys are @want ("": none). */
static void
wait_keys (Fixture *f, const char *path, gboolean some)
{
  for (guint i = 0; i < 100; i++)
    {
      g_autofree char *keys = guest_keys (f, path);

      if ((*keys != '\0') == some)
        return;
      client_settle (f->client, 200);
    }
  g_error ("the guest's metadata %s console keys", some ? "never had" : "kept its");
}

/* Whether @needle is in any file below @dir. */
static gboolean
found_below (const char *dir, const char *needle)
{
  g_autoptr (GDir) d = g_dir_open (dir, 0, NULL);
  const char *name;

  while (d && (name = g_dir_read_name (d)))
    {
      g_autofree char *path = g_build_filename (dir, name, NULL);
      g_autofree char *text = NULL;
      gsize len = 0;
      GStatBuf st;

      /* Disk images are not where a daemon would write a token. */
      if (g_lstat (path, &st) < 0 || S_ISLNK (st.st_mode) ||
          (S_ISREG (st.st_mode) && st.st_size > 16 << 20))
        continue;
      if (g_file_test (path, G_FILE_TEST_IS_DIR) ? found_below (path, needle)
          : (g_file_get_contents (path, &text, &len, NULL) &&
             g_strstr_len (text, (gssize) len, needle)))
        return TRUE;
    }
  return FALSE;
}

/* `microvmctl console --remote URL TOKEN`, typing @input: what it printed
 * until @expect, and its exit status once its input ended. */
static char *
remote_cli (const char *url, const char *token, const char *input, const char *expect,
            int *status)
{
  /* Bounded, so that a hang fails the test with what it printed. */
  const char *argv[] = { "timeout", "30", microvmctl, "console", "--remote", url, token, NULL };
  g_autoptr (GSubprocessLauncher) launcher = g_subprocess_launcher_new (
    G_SUBPROCESS_FLAGS_STDIN_PIPE | G_SUBPROCESS_FLAGS_STDOUT_PIPE |
    G_SUBPROCESS_FLAGS_STDERR_MERGE);
  g_autoptr (GSubprocess) child = NULL;
  g_autoptr (GError) error = NULL;
  g_autoptr (GString) out = g_string_new (NULL);
  GInputStream *from;

  child = g_subprocess_launcher_spawnv (launcher, argv, &error);
  g_assert_no_error (error);
  g_assert_true (g_output_stream_write_all (g_subprocess_get_stdin_pipe (child), input,
                                            strlen (input), NULL, NULL, &error));
  from = g_subprocess_get_stdout_pipe (child);
  while (!strstr (out->str, expect))
    {
      char buf[4096];
      gssize n = g_input_stream_read (from, buf, sizeof buf, NULL, &error);

      g_assert_no_error (error);
      if (n <= 0)
        break;
      g_string_append_len (out, buf, n);
    }
  g_test_message ("microvmctl console --remote: %s", out->str);
  /* The end of its input ends the session. */
  g_assert_true (g_output_stream_close (g_subprocess_get_stdin_pipe (child), NULL, &error));
  g_assert_true (g_subprocess_wait (child, NULL, &error));
  *status = g_subprocess_get_exit_status (child);
  return g_string_free (g_steal_pointer (&out), FALSE);
}

static void
test_sessions (Fixture *f, gconstpointer data)
{
  g_autofree char *line_spec = guest_spec_json ("qemu", "serial", line_kernel, line_initrd, NULL);
  g_autofree char *agent_spec = g_strdup_printf (
    "{\"name\":\"login\",\"hypervisor_type\":\"qemu\",\"memory_bytes\":268435456,"
    "\"start_mode\":\"cold\",\"cmd\":[\"sleep\",\"100000\"],"
    "\"disks\":[{\"path\":\"%s\",\"read_only\":true,\"root\":true}]}", rootfs);
  g_autofree char *serial = client_create_ok (f->client, line_spec);
  g_autofree char *login = client_create_ok (f->client, agent_spec);
  g_autofree char *url = console_url (f);
  g_autofree char *token = NULL, *out = NULL, *err = NULL, *message = NULL, *keys = NULL;
  g_autoptr (GPtrArray) filled = g_ptr_array_new_with_free_func (g_free);
  int status = 0;

  client_call_ok (f->client, serial, "Start");
  client_call_ok (f->client, login, "Start");

  /* Bad input, before any token. */
  g_assert_null (request (f, serial, "vnc", &err, &message));
  g_assert_cmpstr (err, ==, MV_BUS_ERROR_INVALID_ARGUMENT);
  g_assert_nonnull (strstr (message, "mode: 'vnc' is not one of serial, login"));
  g_clear_pointer (&err, g_free);
  g_clear_pointer (&message, g_free);
  g_assert_null (request (f, serial, "login", &err, &message));
  g_assert_cmpstr (err, ==, MV_BUS_ERROR_UNSUPPORTED);
  g_clear_pointer (&err, g_free);
  g_clear_pointer (&message, g_free);
  assert_refused (url, "0000000000000000000000000000000000000000000000000000000000000000", "not one this daemon gave");

  /* A serial session: a command typed, its output back. Named for
   * another machine, its token is refused and stays unused. */
  token = request_ok (f, serial, "serial");
  {
    const char *args[] = { "--query", "&machine=login", "--wait-close", "--timeout", "10", NULL };
    g_autofree char *refused = ws_client (url, token, args, &status);

    g_assert_cmpint (status, ==, 0);
    g_assert_nonnull (strstr (refused, "closed 1008 token: for another machine than login"));
  }
  {
    const char *args[] = { "--query", "&machine=serial", "--send", "echo BRIDGE-$((6*7))\\n",
                           "--expect", "BRIDGE-42", NULL };
    out = ws_client (url, token, args, &status);
    g_assert_cmpint (status, ==, 0);
  }
  /* One session per token. */
  assert_refused (url, token, "used already");

  /* The same through microvmctl. */
  g_free (token);
  token = request_ok (f, serial, "serial");
  g_free (out);
  out = remote_cli (url, token, "echo CLI-$((3*3))\n", "CLI-9", &status);
  g_assert_cmpint (status, ==, 0);
  g_assert_nonnull (strstr (out, "CLI-9"));

  /* A login session, as root (the workload's user): its key is in the
   * guest's metadata from the request, and gone once the session ends;
   * its terminal takes a new size; the shell's end ends the session. */
  g_free (token);
  token = request_ok (f, login, "login");
  wait_keys (f, login, TRUE);
  keys = guest_keys (f, login);
  g_assert_nonnull (strstr (keys, "\"key\":\"sha256:"));
  g_assert_nonnull (strstr (keys, "\"user\":\"root\""));
  {
    const char *args[] = { "--resize", "40", "100", "--send",
                           "id -u; stty size; echo LOGIN-$((6*7)); exit 3\\n",
                           "--wait-close", NULL };
    g_free (out);
    out = ws_client (url, token, args, &status);
    g_assert_cmpint (status, ==, 0);
    g_assert_nonnull (strstr (out, "LOGIN-42"));
    g_assert_nonnull (strstr (out, "40 100"));
    g_assert_nonnull (strstr (out, "\r\n0\r\n40 100\r\n"));
    g_assert_nonnull (strstr (out, "closed 1000 exit 3"));
  }
  wait_keys (f, login, FALSE);
  assert_refused (url, token, "used already");

  /* A client that types far faster than its shell reads is cut off, and
   * the daemon answers others meanwhile. */
  g_free (token);
  token = request_ok (f, login, "login");
  {
    const char *args[] = { "--send", "sleep 30\\n", "--flood", "24", "--wait-close", NULL };
    g_autofree char *state = NULL;

    g_free (out);
    out = ws_client (url, token, args, &status);
    g_assert_cmpint (status, ==, 0);
    g_assert_nonnull (strstr (out, "closed 1009 input comes faster than the console takes it"));
    state = client_get_string (f->client, login, "State");
    g_assert_cmpstr (state, ==, "Running");
  }
  wait_keys (f, login, FALSE);

  /* The reserve of console keys fills; a request past it changes
   * nothing. */
  for (guint i = 0; i < 128; i++)
    {
      char *t = request (f, login, "login", &err, &message);

      if (!t)
        break;
      g_ptr_array_add (filled, t);
    }
  g_test_message ("%u login tokens fill the reserve", filled->len);
  g_assert_cmpstr (err, ==, MV_BUS_ERROR_RESOURCE_EXHAUSTED);
  g_assert_nonnull (strstr (message, "console keys: machine login's metadata keeps 8192 bytes"));
  g_assert_cmpuint (filled->len, >=, 40);
  wait_keys (f, login, TRUE);
  g_free (keys);
  keys = guest_keys (f, login);
  g_assert_cmpuint (strlen (keys), <=, 8192);
  g_assert_cmpuint (strlen (keys), >, 8192 - 160);
  g_clear_pointer (&err, g_free);
  g_clear_pointer (&message, g_free);

  /* Tokens per machine, then per caller. */
  for (guint i = filled->len; i < 200; i++)
    {
      char *t = request (f, login, "serial", &err, &message);

      if (!t)
        break;
      g_ptr_array_add (filled, t);
    }
  g_assert_cmpuint (filled->len, ==, 128);
  g_assert_cmpstr (err, ==, MV_BUS_ERROR_RESOURCE_EXHAUSTED);
  g_assert_nonnull (strstr (message, "Machine login has 128 console tokens"));
  g_clear_pointer (&err, g_free);
  g_clear_pointer (&message, g_free);
  g_assert_null (request (f, serial, "serial", &err, &message));
  g_assert_cmpstr (err, ==, MV_BUS_ERROR_RESOURCE_EXHAUSTED);
  g_assert_nonnull (strstr (message, "The caller (UID 0) has 128 console tokens"));

  /* No token reaches the disk, nor the daemon's log. */
  for (guint i = 0; i < filled->len; i += 16)
    {
      g_autofree char *log = mv_test_env_read_daemon_log (f->env);

      g_assert_false (found_below (mv_test_env_state_dir (f->env), filled->pdata[i]));
      g_assert_false (found_below (mv_test_env_runtime_dir (f->env), filled->pdata[i]));
      g_assert_null (strstr (log, filled->pdata[i]));
    }

  /* They expire, their keys with them. */
  g_usleep ((TOKEN_SECONDS + 1) * G_USEC_PER_SEC);
  wait_keys (f, login, FALSE);
  assert_refused (url, filled->pdata[0], "expired");

  /* A session ends when its machine stops. */
  g_free (token);
  token = request_ok (f, serial, "serial");
  {
    const char *args[] = { "--wait-close", "--timeout", "60", NULL };
    g_autoptr (GSubprocessLauncher) launcher = g_subprocess_launcher_new (
      G_SUBPROCESS_FLAGS_STDOUT_PIPE);
    const char *argv[] = { "/usr/bin/python3", client_script, url, token, args[0], args[1],
                           args[2], NULL };
    g_autoptr (GSubprocess) child = g_subprocess_launcher_spawnv (launcher, argv, NULL);
    g_autoptr (GBytes) stdout_bytes = NULL;
    g_autofree char *text = NULL;

    g_assert_nonnull (child);
    client_settle (f->client, 1500);
    client_call_ok (f->client, serial, "Stop");
    g_assert_true (g_subprocess_communicate (child, NULL, NULL, &stdout_bytes, NULL, NULL));
    text = g_strndup (g_bytes_get_data (stdout_bytes, NULL), g_bytes_get_size (stdout_bytes));
    g_test_message ("%s", text);
    g_assert_nonnull (strstr (text, "closed 1001 the machine stopped"));
  }
}

/* With a certificate, the bridge speaks TLS (wss://), and a session
 * works through it. */
static void
test_tls (Fixture *f, gconstpointer data)
{
  g_autofree char *spec = guest_spec_json ("qemu", "secure", line_kernel, line_initrd, NULL);
  g_autofree char *path = client_create_ok (f->client, spec);
  g_autofree char *url = console_url (f), *token = NULL, *out = NULL;
  const char *args[] = { "--ca", tls_cert, "--send", "echo TLS-$((5*5))\\n", "--expect", "TLS-25",
                         NULL };
  int status = 0;

  g_assert_true (g_str_has_prefix (url, "wss://"));
  client_call_ok (f->client, path, "Start");
  token = request_ok (f, path, "serial");
  out = ws_client (url, token, args, &status);
  g_assert_cmpint (status, ==, 0);
  g_assert_nonnull (strstr (out, "TLS-25"));
}

/* A [console] the daemon cannot act on stops it at startup, naming the
 * key: a bridge's key with no bridge, a value out of its range. */
static void
test_bad_config (void)
{
  g_autofree char *tls = g_strdup_printf ("tls-certificate=%s\ntls-key=%s\n", tls_cert, tls_key);
  g_autofree char *tls_off = g_strconcat ("[console]\nlisten=\n", tls, NULL);
  const struct {
    const char *text;
    const char *message;
  } rows[] = {
    { "[console]\nlisten=\ntoken-seconds=30\n",
      "[console] token-seconds has no effect: listen is empty, and no console bridge is served" },
    { "[console]\nlisten=\nlogin-user=root\n",
      "[console] login-user has no effect: listen is empty" },
    { tls_off, "[console] tls-certificate has no effect: listen is empty" },
    { "[console]\nlisten=127.0.0.1:0\ntoken-seconds=0\n", "[console] token-seconds must be 1 to" },
    { "[console]\nlisten=127.0.0.1:0\nlogin-user=admin\n",
      "[console] login-user must be workload or root, not 'admin'" },
    { "[console]\nlisten=127.0.0.1:0\ntls-key=/nonexistent\n",
      "[console] tls-certificate and tls-key go together" },
  };

  for (guint i = 0; i < G_N_ELEMENTS (rows); i++)
    mv_test_env_assert_config_refused (rows[i].text, rows[i].message);
}

int
main (int argc, char **argv)
{
  const char *build = g_getenv ("MICROVMD_BUILD_DIR");
  const char *source = g_getenv ("MICROVMD_SOURCE_DIR");
  int status;

  g_test_init (&argc, &argv, NULL);
  g_assert_nonnull (build);
  g_assert_nonnull (source);
  agent_kernel = g_build_filename (build, "guest", "vmlinuz", NULL);
  agent_initramfs = g_build_filename (build, "guest", "initramfs.img", NULL);
  rootfs = g_build_filename (build, "tests", "guest", "rootfs.ext4", NULL);
  line_kernel = g_build_filename (build, "tests", "guest", "vmlinuz", NULL);
  line_initrd = g_build_filename (build, "tests", "guest", "initrd.img", NULL);
  microvmctl = g_build_filename (build, "src", "cli", "microvmctl", NULL);
  client_script = g_build_filename (source, "tests", "integration", "ws-console.py", NULL);
  make_certificate ();
  g_test_add ("/console-bridge/qemu/sessions", Fixture, NULL, setup, test_sessions, teardown);
  g_test_add ("/console-bridge/qemu/tls", Fixture, "tls", setup, test_tls, teardown);
  g_test_add_func ("/console-bridge/bad-config", test_bad_config);
  status = g_test_run ();
  {
    const char *argv_rm[] = { "rm", "-rf", tls_dir, NULL };
    g_spawn_sync (NULL, (char **) argv_rm, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL, NULL, NULL,
                  NULL, NULL);
  }
  return status;
}
