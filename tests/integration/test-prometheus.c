/* The metrics endpoint through the daemon, with the test runtime, whose
 * VMM's CPU time is what its runtime directory's test-vmm.cpu says:
 * /metrics carries the machine's series and the daemon's, promtool
 * accepts it, and Debian's real Prometheus, scraping it every second,
 * answers a query with the machine's series. */
#include "bus-client.h"
#include "names.h"

#include <libsoup/soup.h>
#include <json-glib/json-glib.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>

#define SPEC(name) \
  "{\"name\":\"" name "\",\"hypervisor_type\":\"test\",\"kernel\":\"/boot/vmlinuz\"," \
  "\"cpu_millicores\":1000,\"memory_bytes\":268435456}"

static guint16 metrics_port;

/* How long the daemon answers with the last scrape's text (docs/metrics.md). */
#define CACHE_USEC G_USEC_PER_SEC
/* The connections it serves at once, in the test's configuration. */
#define MAX_CONNECTIONS 2

/* A port nobody listens on now, on loopback. */
static guint16
free_port (void)
{
  g_autoptr (GSocket) socket = g_socket_new (G_SOCKET_FAMILY_IPV4, G_SOCKET_TYPE_STREAM,
                                             G_SOCKET_PROTOCOL_TCP, NULL);
  g_autoptr (GInetAddress) loopback = g_inet_address_new_loopback (G_SOCKET_FAMILY_IPV4);
  g_autoptr (GSocketAddress) any = g_inet_socket_address_new (loopback, 0);
  g_autoptr (GSocketAddress) bound = NULL;

  g_assert_nonnull (socket);
  g_assert_true (g_socket_bind (socket, any, FALSE, NULL));
  bound = g_socket_get_local_address (socket, NULL);
  return g_inet_socket_address_get_port (G_INET_SOCKET_ADDRESS (bound));
}

/* @method of http://127.0.0.1:@port@resource: its status and body. */
static char *
http (const char *method, guint16 port, const char *resource, guint *status, char **content_type)
{
  g_autoptr (SoupSession) session = soup_session_new ();
  g_autofree char *uri = g_strdup_printf ("http://127.0.0.1:%u%s", port, resource);
  g_autoptr (SoupMessage) msg = soup_message_new (method, uri);
  g_autoptr (GError) error = NULL;
  g_autoptr (GBytes) body = soup_session_send_and_read (session, msg, NULL, &error);

  if (!body)
    {
      *status = 0;
      return NULL;
    }
  *status = soup_message_get_status (msg);
  if (content_type)
    *content_type = g_strdup (soup_message_headers_get_content_type (
                                soup_message_get_response_headers (msg), NULL));
  return g_strndup (g_bytes_get_data (body, NULL), g_bytes_get_size (body));
}

static char *
scrape (void)
{
  guint status;
  char *body = http ("GET", metrics_port, "/metrics", &status, NULL);

  g_assert_cmpuint (status, ==, 200);
  return body;
}

static void
set_cpu (Fixture *f, const char *path, guint64 ns)
{
  g_autofree char *file = fixture_runtime_file (f, path, "test-vmm.cpu");
  g_autofree char *text = g_strdup_printf ("%" G_GUINT64_FORMAT, ns);

  g_assert_true (g_file_set_contents (file, text, -1, NULL));
}

static void
assert_has_line (const char *text, const char *line)
{
  g_autofree char *with_newline = g_strconcat ("\n", line, "\n", NULL);

  if (!strstr (text, with_newline))
    g_error ("no line \"%s\" in:\n%s", line, text);
}

static void
test_endpoint (Fixture *f, gconstpointer data)
{
  g_autofree char *path = client_create_ok (f->client, SPEC ("scraped"));
  g_autofree char *id = client_get_string (f->client, path, "Id");
  g_autofree char *body = NULL, *content_type = NULL, *other = NULL, *posted = NULL;
  g_autofree char *line = NULL, *out = NULL;
  g_autoptr (GError) error = NULL;
  guint status;

  /* Defined, not running: its state and health, no usage. */
  body = http ("GET", metrics_port, "/metrics", &status, &content_type);
  g_assert_cmpuint (status, ==, 200);
  g_assert_cmpstr (content_type, ==, "text/plain");
  assert_has_line (body, "microvmd_machines{state=\"Stopped\"} 1");
  assert_has_line (body, "microvmd_machines{state=\"Running\"} 0");
  assert_has_line (body, "microvmd_machines_by_health{health=\"none\"} 1");
  line = g_strdup_printf ("microvmd_machine_state{id=\"%s\",name=\"scraped\",state=\"Stopped\"} 1",
                          id);
  assert_has_line (body, line);
  g_assert_null (strstr (body, "microvmd_machine_cpu_seconds_total{"));
  g_clear_pointer (&body, g_free);

  client_call_ok (f->client, path, "Start");
  set_cpu (f, path, 3500000000);
  /* Past the second in which a scrape is answered with the last one's text. */
  g_usleep (CACHE_USEC + 100000);
  body = scrape ();
  g_clear_pointer (&line, g_free);
  line = g_strdup_printf ("microvmd_machine_cpu_seconds_total{id=\"%s\",name=\"scraped\"} 3.5", id);
  assert_has_line (body, line);
  g_clear_pointer (&line, g_free);
  line = g_strdup_printf ("microvmd_machine_state{id=\"%s\",name=\"scraped\",state=\"Running\"} 1",
                          id);
  assert_has_line (body, line);
  g_clear_pointer (&line, g_free);
  line = g_strdup_printf ("microvmd_machine_restarts_total{id=\"%s\",name=\"scraped\"} 0", id);
  assert_has_line (body, line);
  g_assert_nonnull (strstr (body, "\nmicrovmd_machine_resident_memory_bytes{id=\""));
  g_assert_nonnull (strstr (body, "\nmicrovmd_machine_disk_read_bytes_total{id=\""));
  g_assert_nonnull (strstr (body, "\nmicrovmd_machine_disk_written_bytes_total{id=\""));
  assert_has_line (body, "microvmd_machines{state=\"Running\"} 1");
  /* The start step was counted and timed. */
  assert_has_line (body, "# TYPE microvmd_reconcile_step_duration_seconds histogram");
  assert_has_line (body, "microvmd_operations_total{kind=\"start\"} 1");
  assert_has_line (body, "microvmd_operation_failures_total{kind=\"start\"} 0");
  assert_has_line (body, "microvmd_reconcile_step_duration_seconds_bucket{kind=\"start\",le=\"+Inf\"} 1");
  assert_has_line (body, "microvmd_reconcile_step_duration_seconds_count{kind=\"start\"} 1");
  assert_has_line (body, "# TYPE microvmd_machine_cpu_seconds_total counter");

  /* Debian's promtool finds nothing wrong with it. */
  {
    const char *argv[] = { "promtool", "check", "metrics", NULL };
    g_autoptr (GSubprocess) promtool =
      g_subprocess_newv (argv, G_SUBPROCESS_FLAGS_STDIN_PIPE | G_SUBPROCESS_FLAGS_STDOUT_PIPE |
                         G_SUBPROCESS_FLAGS_STDERR_MERGE, &error);

    g_assert_no_error (error);
    g_assert_true (g_subprocess_communicate_utf8 (promtool, body, NULL, &out, NULL, &error));
    g_assert_no_error (error);
    if (!g_subprocess_get_if_exited (promtool) || g_subprocess_get_exit_status (promtool) != 0)
      g_error ("promtool check metrics: %s", out);
  }

  /* Only GET and HEAD of /metrics. */
  other = http ("GET", metrics_port, "/metrics/more", &status, NULL);
  g_assert_cmpuint (status, ==, 404);
  g_clear_pointer (&other, g_free);
  other = http ("GET", metrics_port, "/", &status, NULL);
  g_assert_cmpuint (status, ==, 404);
  posted = http ("POST", metrics_port, "/metrics", &status, NULL);
  g_assert_cmpuint (status, ==, 405);
}

static gboolean
series_found (const char *json, const char *id, double *value)
{
  g_autoptr (JsonParser) parser = json_parser_new ();
  JsonObject *root, *data;
  JsonArray *result;

  if (!json || !json_parser_load_from_data (parser, json, -1, NULL))
    return FALSE;
  root = json_node_get_object (json_parser_get_root (parser));
  if (g_strcmp0 (json_object_get_string_member_with_default (root, "status", ""), "success") != 0 ||
      !(data = json_object_get_object_member (root, "data")) ||
      !(result = json_object_get_array_member (data, "result")))
    return FALSE;
  for (guint i = 0; i < json_array_get_length (result); i++)
    {
      JsonObject *series = json_array_get_object_element (result, i);
      JsonObject *metric = json_object_get_object_member (series, "metric");
      JsonArray *sample = json_object_get_array_member (series, "value");

      if (g_strcmp0 (json_object_get_string_member_with_default (metric, "id", ""), id) == 0)
        {
          *value = g_ascii_strtod (json_array_get_string_element (sample, 1), NULL);
          return TRUE;
        }
    }
  return FALSE;
}

static void
test_prometheus_scrapes (Fixture *f, gconstpointer data)
{
  g_autofree char *path = client_create_ok (f->client, SPEC ("watched"));
  g_autofree char *id = client_get_string (f->client, path, "Id");
  g_autofree char *dir = g_build_filename (mv_test_env_dir (f->env), "prometheus", NULL);
  g_autofree char *config = g_build_filename (dir, "prometheus.yml", NULL);
  g_autofree char *storage = g_build_filename (dir, "data", NULL);
  g_autofree char *log = g_build_filename (dir, "prometheus.log", NULL);
  guint16 port = free_port ();
  g_autofree char *config_text = g_strdup_printf (
    "global:\n"
    "  scrape_interval: 1s\n"
    "  evaluation_interval: 1s\n"
    "scrape_configs:\n"
    "  - job_name: microvmd\n"
    "    static_configs:\n"
    "      - targets: ['127.0.0.1:%u']\n", metrics_port);
  g_autofree char *config_arg = g_strconcat ("--config.file=", config, NULL);
  g_autofree char *storage_arg = g_strconcat ("--storage.tsdb.path=", storage, NULL);
  g_autofree char *listen_arg = g_strdup_printf ("--web.listen-address=127.0.0.1:%u", port);
  const char *argv[] = { "/usr/bin/prometheus", config_arg, storage_arg, listen_arg, NULL };
  g_autoptr (GSubprocessLauncher) launcher = g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_NONE);
  g_autoptr (GSubprocess) prometheus = NULL;
  g_autoptr (GError) error = NULL;
  gint64 deadline;
  double value = -1;
  gboolean found = FALSE;

  client_call_ok (f->client, path, "Start");
  set_cpu (f, path, 7250000000);

  g_assert_cmpint (g_mkdir_with_parents (storage, 0700), ==, 0);
  g_assert_true (g_file_set_contents (config, config_text, -1, NULL));
  g_subprocess_launcher_set_stdout_file_path (launcher, log);
  g_subprocess_launcher_set_stderr_file_path (launcher, log);
  prometheus = g_subprocess_launcher_spawnv (launcher, argv, &error);
  g_assert_no_error (error);

  /* The first scrape is within a second or two of its start. */
  deadline = g_get_monotonic_time () + 60 * G_USEC_PER_SEC;
  while (!found && g_get_monotonic_time () < deadline)
    {
      guint status;
      g_autofree char *json =
        http ("GET", port, "/api/v1/query?query=microvmd_machine_cpu_seconds_total", &status,
              NULL);

      found = status == 200 && series_found (json, id, &value);
      if (!found)
        g_usleep (250 * 1000);
    }
  g_subprocess_send_signal (prometheus, SIGTERM);
  g_subprocess_wait (prometheus, NULL, NULL);
  if (!found)
    {
      g_autofree char *text = NULL;

      g_file_get_contents (log, &text, NULL, NULL);
      g_error ("Prometheus has no microvmd_machine_cpu_seconds_total{id=\"%s\"}; its log:\n%s",
               id, text ? text : "");
    }
  g_assert_cmpfloat_with_epsilon (value, 7.25, 1e-9);
}

/* Scrapes within a second are one rendering: a machine defined between
 * them shows only once the second is over. */
static void
test_cached (Fixture *f, gconstpointer data)
{
  g_autofree char *first = NULL, *again = NULL, *later = NULL, *path = NULL;
  gint64 t0 = g_get_monotonic_time ();

  first = scrape ();
  assert_has_line (first, "microvmd_machines{state=\"Stopped\"} 0");
  path = client_create_ok (f->client, SPEC ("late"));
  again = scrape ();
  if (g_get_monotonic_time () - t0 < CACHE_USEC)
    g_assert_cmpstr (again, ==, first);
  g_usleep (CACHE_USEC + 100000);
  later = scrape ();
  assert_has_line (later, "microvmd_machines{state=\"Stopped\"} 1");
}

static GSocketConnection *
connect_to_metrics (void)
{
  g_autoptr (GSocketClient) client = g_socket_client_new ();
  g_autoptr (GError) error = NULL;
  GSocketConnection *connection = g_socket_client_connect_to_host (client, "127.0.0.1",
                                                                   metrics_port, NULL, &error);

  g_assert_no_error (error);
  return connection;
}

/* What a connection says before it is closed, or "" if nothing. */
static char *
read_until_closed (GSocketConnection *connection)
{
  GSocket *socket = g_socket_connection_get_socket (connection);
  GString *got = g_string_new (NULL);
  char buffer[512];
  gssize n;

  g_socket_set_timeout (socket, 10);
  while ((n = g_socket_receive (socket, buffer, sizeof buffer, NULL, NULL)) > 0)
    g_string_append_len (got, buffer, n);
  g_assert_cmpint (n, ==, 0);
  return g_string_free (got, FALSE);
}

/* Connections beyond [prometheus] max-connections are answered 503 and
 * closed at once; once one closes, a scrape goes through again. */
static void
test_connection_cap (Fixture *f, gconstpointer data)
{
  GSocketConnection *open[MAX_CONNECTIONS];
  g_autoptr (GSocketConnection) over = NULL;
  g_autofree char *refused = NULL, *body = NULL;

  for (guint i = 0; i < MAX_CONNECTIONS; i++)
    open[i] = connect_to_metrics ();
  /* The daemon has taken them before the next is made. */
  client_settle (f->client, 200);
  over = connect_to_metrics ();
  refused = read_until_closed (over);
  g_assert_true (g_str_has_prefix (refused, "HTTP/1.1 503 "));

  g_object_unref (open[0]);
  client_settle (f->client, 200);
  body = scrape ();
  assert_has_line (body, "microvmd_machines{state=\"Stopped\"} 0");
  for (guint i = 1; i < MAX_CONNECTIONS; i++)
    g_object_unref (open[i]);
}

int
main (int argc, char **argv)
{
  g_autofree char *config = NULL, *capped = NULL;

  g_test_init (&argc, &argv, NULL);
  metrics_port = free_port ();
  config = g_strdup_printf ("[prometheus]\nlisten=127.0.0.1:%u\n", metrics_port);
  g_test_add ("/prometheus/endpoint", Fixture, config, fixture_setup, test_endpoint,
              fixture_teardown);
  g_test_add ("/prometheus/scraped", Fixture, config, fixture_setup, test_prometheus_scrapes,
              fixture_teardown);
  g_test_add ("/prometheus/cached", Fixture, config, fixture_setup, test_cached,
              fixture_teardown);
  capped = g_strdup_printf ("[prometheus]\nlisten=127.0.0.1:%u\nmax-connections=%u\n",
                            metrics_port, MAX_CONNECTIONS);
  g_test_add ("/prometheus/connection-cap", Fixture, capped, fixture_setup, test_connection_cap,
              fixture_teardown);
  return g_test_run ();
}
