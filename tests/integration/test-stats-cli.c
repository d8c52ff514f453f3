/* microvmctl stats, top and metrics against the daemon and the test
 * runtime, whose VMM's CPU time is what test-vmm.cpu in its runtime
 * directory says: the totals printed are the daemon's, top's CPU % is
 * the growth between its two reads and shows nothing across a counter
 * that went backwards, metrics prints the samples of a window. */
#include "bus-client.h"
#include "names.h"

#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <string.h>
#include <sys/wait.h>

#define SPEC(name) \
  "{\"name\":\"" name "\",\"hypervisor_type\":\"test\",\"kernel\":\"/boot/vmlinuz\"," \
  "\"cpu_millicores\":2000,\"memory_bytes\":268435456}"

static const char test_config[] =
  "[metrics]\n"
  "sample-seconds=1\n";

static char *
microvmctl_path (void)
{
  return g_build_filename (g_getenv ("MICROVMD_BUILD_DIR"), "src", "cli", "microvmctl", NULL);
}

static int
ctl (Fixture *f, char **out, char **err, ...)
{
  g_autoptr (GPtrArray) argv = g_ptr_array_new_with_free_func (g_free);
  va_list ap;
  const char *arg;

  g_ptr_array_add (argv, microvmctl_path ());
  va_start (ap, err);
  while ((arg = va_arg (ap, const char *)))
    g_ptr_array_add (argv, g_strdup (arg));
  va_end (ap);
  g_ptr_array_add (argv, NULL);
  g_clear_pointer (out, g_free);
  g_clear_pointer (err, g_free);
  return mv_test_env_run (f->env, (const char *const *) argv->pdata, out, err);
}

static void
set_cpu (Fixture *f, const char *path, guint64 ns)
{
  g_autofree char *file = fixture_runtime_file (f, path, "test-vmm.cpu");
  g_autofree char *text = g_strdup_printf ("%" G_GUINT64_FORMAT, ns);

  g_assert_true (g_file_set_contents (file, text, -1, NULL));
}

/* The whitespace-separated cells of the lines of OUT that start with
 * NAME and a space, in order. */
static GPtrArray *
rows_of (const char *out, const char *name)
{
  g_auto (GStrv) lines = g_strsplit (out, "\n", -1);
  g_autofree char *prefix = g_strconcat (name, " ", NULL);
  GPtrArray *rows = g_ptr_array_new_with_free_func ((GDestroyNotify) g_strfreev);

  for (guint i = 0; lines[i]; i++)
    if (g_str_has_prefix (lines[i], prefix))
      g_ptr_array_add (rows, g_regex_split_simple ("\\s+", lines[i], 0, 0));
  return rows;
}

static JsonArray *
parse_array (JsonParser *parser, const char *text)
{
  g_assert_true (json_parser_load_from_data (parser, text, -1, NULL));
  g_assert_true (JSON_NODE_HOLDS_ARRAY (json_parser_get_root (parser)));
  return json_node_get_array (json_parser_get_root (parser));
}

static void
test_stats (Fixture *f, gconstpointer data)
{
  g_autofree char *b = client_create_ok (f->client, SPEC ("bravo"));
  g_autofree char *a = client_create_ok (f->client, SPEC ("alpha"));
  g_autofree char *c = client_create_ok (f->client, SPEC ("charlie"));
  g_autofree char *id_a = client_get_string (f->client, a, "Id");
  g_autofree char *out = NULL, *err = NULL;
  g_autoptr (GPtrArray) alpha = NULL, bravo = NULL, charlie = NULL;
  g_autoptr (JsonParser) parser = json_parser_new ();
  JsonArray *array;
  JsonObject *first;

  client_call_ok (f->client, a, "Start");
  client_call_ok (f->client, b, "Start");
  set_cpu (f, a, 1500000000);
  set_cpu (f, b, 2000000000);

  g_assert_cmpint (ctl (f, &out, &err, "stats", NULL), ==, 0);
  g_assert_true (g_str_has_prefix (out, "NAME"));
  g_assert_nonnull (strstr (out, "CPU-TIME"));
  g_assert_nonnull (strstr (out, "DISK-WRITTEN"));
  alpha = rows_of (out, "alpha");
  bravo = rows_of (out, "bravo");
  charlie = rows_of (out, "charlie");
  g_assert_cmpuint (alpha->len, ==, 1);
  g_assert_cmpuint (bravo->len, ==, 1);
  /* Stopped: no VMM, not listed. */
  g_assert_cmpuint (charlie->len, ==, 0);
  g_assert_cmpstr (((char **) alpha->pdata[0])[1], ==, "Running");
  g_assert_cmpstr (((char **) alpha->pdata[0])[2], ==, "1.50s");
  g_assert_cmpstr (((char **) bravo->pdata[0])[2], ==, "2.00s");
  /* Off a network: no network counters. */
  g_assert_cmpstr (((char **) alpha->pdata[0])[6], ==, "-");
  /* Name order. */
  g_assert_true (strstr (out, "alpha") < strstr (out, "bravo"));

  g_assert_cmpint (ctl (f, &out, &err, "--json", "stats", NULL), ==, 0);
  array = parse_array (parser, out);
  g_assert_cmpuint (json_array_get_length (array), ==, 2);
  first = json_array_get_object_element (array, 0);
  g_assert_cmpstr (json_object_get_string_member (first, "name"), ==, "alpha");
  g_assert_cmpstr (json_object_get_string_member (first, "id"), ==, id_a);
  g_assert_cmpstr (json_object_get_string_member (first, "state"), ==, "Running");
  g_assert_cmpint (json_object_get_int_member (first, "cpu_time_ns"), ==, 1500000000);
  g_assert_cmpint (json_object_get_int_member (first, "vcpus"), ==, 2);
  g_assert_cmpint (json_object_get_int_member (first, "memory_bytes"), ==, 268435456);
  g_assert_cmpint (json_object_get_int_member (first, "read_at"), >, 0);
  g_assert_true (json_object_has_member (first, "resident_memory_bytes"));
  g_assert_false (json_object_has_member (first, "network_receive_bytes"));

  /* Named ones in the order given; one without a VMM shows dashes. */
  g_assert_cmpint (ctl (f, &out, &err, "stats", "charlie", "bravo", NULL), ==, 0);
  g_clear_pointer (&charlie, g_ptr_array_unref);
  g_clear_pointer (&alpha, g_ptr_array_unref);
  charlie = rows_of (out, "charlie");
  alpha = rows_of (out, "alpha");
  g_assert_cmpuint (charlie->len, ==, 1);
  g_assert_cmpuint (alpha->len, ==, 0);
  g_assert_cmpstr (((char **) charlie->pdata[0])[1], ==, "Stopped");
  g_assert_cmpstr (((char **) charlie->pdata[0])[2], ==, "-");
  g_assert_true (strstr (out, "charlie") < strstr (out, "bravo"));

  g_assert_cmpint (ctl (f, &out, &err, "stats", "nosuch", NULL), ==, 1);
  g_assert_nonnull (strstr (err, "nosuch"));
}

typedef struct {
  Fixture    *f;
  const char *path;
  guint64     ns;
} CpuChange;

static gboolean
change_cpu (gpointer data)
{
  CpuChange *change = data;

  set_cpu (change->f, change->path, change->ns);
  return G_SOURCE_REMOVE;
}

static double
cpu_percent (char **cells)
{
  g_assert_true (g_str_has_suffix (cells[2], "%"));
  return g_ascii_strtod (cells[2], NULL);
}

/* Two frames three seconds apart, with the counters changed halfway
 * through each (so that top's first read may come up to 1.5 s late on a
 * loaded host): bravo ~333 % then a counter that went back (shown as
 * "-", last), alpha ~67 % then ~33 %, the busiest first. */
static void
test_top (Fixture *f, gconstpointer data)
{
  g_autofree char *a = client_create_ok (f->client, SPEC ("alpha"));
  g_autofree char *b = client_create_ok (f->client, SPEC ("bravo"));
  g_autofree char *program = microvmctl_path ();
  const char *argv[] = { program, "--address", mv_test_env_bus_address (f->env), "top",
                         "--interval", "3", "--iterations", "2", NULL };
  CpuChange changes[] = {
    { f, a, 2000000000 }, { f, b, 10000000000 },  /* at 1.5 s */
    { f, a, 3000000000 }, { f, b, 0 },            /* at 4.5 s */
  };
  g_autoptr (GError) error = NULL;
  g_autoptr (GPtrArray) alpha = NULL, bravo = NULL;
  g_autofree char *out = NULL;
  g_autoptr (GIOChannel) channel = NULL;
  const char *second;
  gint64 end;
  int out_fd, status;
  GPid pid;

  client_call_ok (f->client, a, "Start");
  client_call_ok (f->client, b, "Start");
  set_cpu (f, a, 0);
  set_cpu (f, b, 0);

  g_assert_true (g_spawn_async_with_pipes (NULL, (char **) argv, NULL, G_SPAWN_DO_NOT_REAP_CHILD,
                                           NULL, NULL, &pid, NULL, &out_fd, NULL, &error));
  g_assert_no_error (error);
  for (guint i = 0; i < G_N_ELEMENTS (changes); i++)
    g_timeout_add (i < 2 ? 1500 : 4500, change_cpu, &changes[i]);
  end = g_get_monotonic_time () + 5000 * G_TIME_SPAN_MILLISECOND;
  while (g_get_monotonic_time () < end)
    {
      g_main_context_iteration (NULL, FALSE);
      g_usleep (10000);
    }
  channel = g_io_channel_unix_new (out_fd);
  g_io_channel_set_close_on_unref (channel, TRUE);
  g_assert_cmpint (g_io_channel_read_to_end (channel, &out, NULL, &error), ==, G_IO_STATUS_NORMAL);
  g_assert_cmpint (waitpid (pid, &status, 0), ==, pid);
  g_spawn_close_pid (pid);
  g_test_message ("top printed:\n%s", out);
  g_assert_true (WIFEXITED (status));
  g_assert_cmpint (WEXITSTATUS (status), ==, 0);

  g_assert_nonnull (strstr (out, "2 machines with a VMM"));
  alpha = rows_of (out, "alpha");
  bravo = rows_of (out, "bravo");
  g_assert_cmpuint (alpha->len, ==, 2);
  g_assert_cmpuint (bravo->len, ==, 2);
  g_assert_cmpfloat (cpu_percent (alpha->pdata[0]), >, 50);
  g_assert_cmpfloat (cpu_percent (alpha->pdata[0]), <, 84);
  g_assert_cmpfloat (cpu_percent (bravo->pdata[0]), >, 266);
  g_assert_cmpfloat (cpu_percent (bravo->pdata[0]), <, 400);
  g_assert_cmpfloat (cpu_percent (alpha->pdata[1]), >, 26);
  g_assert_cmpfloat (cpu_percent (alpha->pdata[1]), <, 40);
  g_assert_cmpstr (((char **) bravo->pdata[1])[2], ==, "-");
  /* Frame one: bravo first; frame two: alpha first. */
  second = strstr (strstr (out, "machines with a VMM") + 1, "machines with a VMM");
  g_assert_nonnull (second);
  g_assert_true (strstr (out, "\nbravo ") < strstr (out, "\nalpha "));
  g_assert_true (strstr (second, "\nalpha ") < strstr (second, "\nbravo "));
}

static void
test_metrics (Fixture *f, gconstpointer data)
{
  g_autofree char *a = client_create_ok (f->client, SPEC ("alpha"));
  g_autofree char *out = NULL, *err = NULL;
  g_autoptr (JsonParser) parser = json_parser_new ();
  JsonArray *array = NULL;
  JsonObject *sample;
  gint64 end;

  client_call_ok (f->client, a, "Start");
  set_cpu (f, a, 4000000000);
  /* One sample a second: wait for two. */
  end = g_get_monotonic_time () + 20 * G_TIME_SPAN_SECOND;
  do
    {
      g_usleep (500000);
      g_assert_cmpint (ctl (f, &out, &err, "--json", "metrics", "alpha", "--since", "1h", NULL),
                       ==, 0);
      array = parse_array (parser, out);
    }
  while (json_array_get_length (array) < 2 && g_get_monotonic_time () < end);
  g_assert_cmpuint (json_array_get_length (array), >=, 2);
  sample = json_array_get_object_element (array, 0);
  g_assert_cmpint (json_object_get_int_member (sample, "cpu_time_ns"), ==, 4000000000);
  g_assert_cmpint (json_object_get_int_member (sample, "time_usec"), >, 0);
  /* ISO 8601 with the zone's offset. */
  g_assert_true (g_regex_match_simple ("^\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d[+-]\\d\\d:\\d\\d$",
                                       json_object_get_string_member (sample, "time"), 0, 0));

  g_assert_cmpint (ctl (f, &out, &err, "metrics", "alpha", NULL), ==, 0);
  g_assert_true (g_str_has_prefix (out, "TIME"));
  g_assert_nonnull (strstr (out, "4.00s"));
  /* The CPU did not move between samples. */
  g_assert_nonnull (strstr (out, " 0.0%"));

  /* A window of long ago has nothing; one the wrong way round is refused
   * before the daemon is asked. */
  g_assert_cmpint (ctl (f, &out, &err, "metrics", "alpha", "--since", "2020-01-01T00:00:00Z",
                        "--until", "2020-01-02T00:00:00Z", NULL), ==, 0);
  g_assert_nonnull (strstr (out, "No samples"));
  g_assert_cmpint (ctl (f, &out, &err, "metrics", "alpha", "--since", "1h", "--until", "2h",
                        NULL), ==, 2);
  g_assert_nonnull (strstr (err, "--until"));
  g_assert_cmpint (ctl (f, &out, &err, "metrics", "alpha", "--since", "soon", NULL), ==, 2);
  g_assert_nonnull (strstr (err, "soon"));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add ("/stats-cli/stats", Fixture, test_config, fixture_setup, test_stats,
              fixture_teardown);
  g_test_add ("/stats-cli/top", Fixture, test_config, fixture_setup, test_top, fixture_teardown);
  g_test_add ("/stats-cli/metrics", Fixture, test_config, fixture_setup, test_metrics,
              fixture_teardown);
  return g_test_run ();
}
