/* Stats and daily metrics through the daemon, with the test runtime,
 * whose VMM's CPU time is what its runtime directory's test-vmm.cpu
 * says: GetStats grows as it does, GetAllStats lists the machines with a
 * VMM in name order, GetMetrics returns the samples written to the
 * machine's metrics directory, which goes with the machine. */
#include "bus-client.h"
#include "names.h"

#include <glib/gstdio.h>
#include <string.h>

#define SPEC(name) \
  "{\"name\":\"" name "\",\"hypervisor_type\":\"test\",\"kernel\":\"/boot/vmlinuz\"," \
  "\"cpu_millicores\":2000,\"memory_bytes\":268435456}"

static const char test_config[] =
  "[metrics]\n"
  "sample-seconds=1\n";

static void
set_cpu (Fixture *f, const char *path, guint64 ns)
{
  g_autofree char *file = fixture_runtime_file (f, path, "test-vmm.cpu");
  g_autofree char *text = g_strdup_printf ("%" G_GUINT64_FORMAT, ns);

  g_assert_true (g_file_set_contents (file, text, -1, NULL));
}

/* The a{sv} at the reader's position as a table of key -> GVariant-ish
 * integers (every value here is an integer). */
static GHashTable *
read_stats (sd_bus_message *m)
{
  GHashTable *table = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  const char *key, *type;

  g_assert_cmpint (sd_bus_message_enter_container (m, 'a', "{sv}"), >, 0);
  while (sd_bus_message_enter_container (m, 'e', "sv") > 0)
    {
      guint64 *value = g_new0 (guint64, 1);

      g_assert_cmpint (sd_bus_message_read (m, "s", &key), >, 0);
      g_assert_cmpint (sd_bus_message_peek_type (m, NULL, &type), >, 0);
      g_assert_cmpint (sd_bus_message_enter_container (m, 'v', type), >, 0);
      if (g_str_equal (type, "u"))
        {
          guint32 u;
          g_assert_cmpint (sd_bus_message_read (m, "u", &u), >, 0);
          *value = u;
        }
      else
        {
          g_assert_true (g_str_equal (type, "t") || g_str_equal (type, "x"));
          g_assert_cmpint (sd_bus_message_read_basic (m, type[0], value), >, 0);
        }
      g_assert_cmpint (sd_bus_message_exit_container (m), >, 0);
      g_assert_cmpint (sd_bus_message_exit_container (m), >, 0);
      g_hash_table_insert (table, g_strdup (key), value);
    }
  g_assert_cmpint (sd_bus_message_exit_container (m), >, 0);
  return table;
}

static guint64
stat_of (GHashTable *stats, const char *key)
{
  guint64 *value = g_hash_table_lookup (stats, key);

  if (!value)
    g_error ("stats have no %s", key);
  return *value;
}

static GHashTable *
get_stats (Fixture *f, const char *path)
{
  g_autofree char *err = NULL, *msg = NULL;
  g_autoptr (sd_bus_message) reply = client_call (f->client, path, MV_MACHINE_IFACE, "GetStats",
                                                  &err, &msg, "");

  if (!reply)
    g_error ("GetStats: %s: %s", err, msg);
  return read_stats (reply);
}

static void
test_stats_grow (Fixture *f, gconstpointer data)
{
  g_autofree char *path = client_create_ok (f->client, SPEC ("counter"));
  g_autofree char *err = NULL, *msg = NULL;
  g_autoptr (sd_bus_message) none = NULL;
  g_autoptr (GHashTable) first = NULL, second = NULL;
  gint64 before = g_get_real_time ();

  /* Without a VMM there is nothing to read. */
  none = client_call (f->client, path, MV_MACHINE_IFACE, "GetStats", &err, &msg, "");
  g_assert_null (none);
  g_assert_cmpstr (err, ==, MV_BUS_ERROR_INVALID_STATE);
  g_assert_nonnull (strstr (msg, "counter"));

  client_call_ok (f->client, path, "Start");
  set_cpu (f, path, 1000000);
  first = get_stats (f, path);
  g_assert_cmpuint (stat_of (first, "cpu_time_ns"), ==, 1000000);
  g_assert_cmpuint (stat_of (first, "vcpus"), ==, 2);
  g_assert_cmpuint (stat_of (first, "memory_bytes"), ==, 268435456);
  g_assert_cmpint ((gint64) stat_of (first, "read_at"), >=, before);
  g_assert_cmpint ((gint64) stat_of (first, "started_at"), >, 0);
  g_assert_cmpint ((gint64) stat_of (first, "started_at"), <=, (gint64) stat_of (first, "read_at"));
  g_assert_true (g_hash_table_contains (first, "resident_memory_bytes"));
  g_assert_true (g_hash_table_contains (first, "disk_read_bytes"));
  g_assert_true (g_hash_table_contains (first, "disk_written_bytes"));
  /* Not on a network: no network counters. */
  g_assert_false (g_hash_table_contains (first, "network_receive_bytes"));

  set_cpu (f, path, 5000000000);
  second = get_stats (f, path);
  g_assert_cmpuint (stat_of (second, "cpu_time_ns"), ==, 5000000000);
  g_assert_cmpint ((gint64) stat_of (second, "read_at"), >=, (gint64) stat_of (first, "read_at"));
  g_assert_cmpuint (stat_of (second, "started_at"), ==, stat_of (first, "started_at"));

  client_call_ok (f->client, path, "Stop");
  g_clear_pointer (&err, g_free);
  g_clear_pointer (&msg, g_free);
  g_clear_pointer (&none, sd_bus_message_unref);
  none = client_call (f->client, path, MV_MACHINE_IFACE, "GetStats", &err, &msg, "");
  g_assert_null (none);
  g_assert_cmpstr (err, ==, MV_BUS_ERROR_INVALID_STATE);
}

static void
test_all_stats (Fixture *f, gconstpointer data)
{
  g_autofree char *b = client_create_ok (f->client, SPEC ("bravo"));
  g_autofree char *a = client_create_ok (f->client, SPEC ("alpha"));
  g_autofree char *c = client_create_ok (f->client, SPEC ("charlie"));
  g_autofree char *id_a = client_get_string (f->client, a, "Id");
  g_autofree char *id_b = client_get_string (f->client, b, "Id");
  g_autofree char *err = NULL, *msg = NULL;
  g_autoptr (sd_bus_message) reply = NULL;
  const char *id;
  guint n = 0;

  client_call_ok (f->client, b, "Start");
  client_call_ok (f->client, a, "Start");
  /* charlie stays stopped: it has no VMM and is left out. */
  set_cpu (f, a, 111);
  set_cpu (f, b, 222);
  reply = client_call (f->client, MV_MANAGER_PATH, MV_MANAGER_IFACE, "GetAllStats", &err, &msg,
                       "");
  g_assert_nonnull (reply);
  g_assert_cmpint (sd_bus_message_enter_container (reply, 'a', "(sa{sv})"), >, 0);
  while (sd_bus_message_enter_container (reply, 'r', "sa{sv}") > 0)
    {
      g_autoptr (GHashTable) stats = NULL;

      g_assert_cmpint (sd_bus_message_read (reply, "s", &id), >, 0);
      stats = read_stats (reply);
      g_assert_cmpint (sd_bus_message_exit_container (reply), >, 0);
      /* Name order: alpha, then bravo. */
      g_assert_cmpstr (id, ==, n == 0 ? id_a : id_b);
      g_assert_cmpuint (stat_of (stats, "cpu_time_ns"), ==, n == 0 ? 111 : 222);
      n++;
    }
  g_assert_cmpuint (n, ==, 2);
}

typedef struct {
  guint64 time;
  guint64 cpu_ns;
} Sample;

static GArray *
get_metrics (Fixture *f, const char *path, guint64 since, guint64 until)
{
  g_autofree char *err = NULL, *msg = NULL;
  g_autoptr (sd_bus_message) reply = client_call (f->client, path, MV_MACHINE_IFACE, "GetMetrics",
                                                  &err, &msg, "tt", since, until);
  GArray *samples = g_array_new (FALSE, TRUE, sizeof (Sample));
  Sample s;

  if (!reply)
    g_error ("GetMetrics: %s: %s", err, msg);
  g_assert_cmpint (sd_bus_message_enter_container (reply, 'a', "(ta{sv})"), >, 0);
  while (sd_bus_message_enter_container (reply, 'r', "ta{sv}") > 0)
    {
      g_autoptr (GHashTable) fields = NULL;

      g_assert_cmpint (sd_bus_message_read (reply, "t", &s.time), >, 0);
      fields = read_stats (reply);
      s.cpu_ns = stat_of (fields, "cpu_time_ns");
      g_assert_true (g_hash_table_contains (fields, "resident_memory_bytes"));
      g_assert_true (g_hash_table_contains (fields, "network_receive_bytes"));
      g_assert_cmpint (sd_bus_message_exit_container (reply), >, 0);
      g_array_append_val (samples, s);
    }
  return samples;
}

static gboolean
has_samples (Client *client, gpointer data)
{
  const char *dir = data;
  g_autoptr (GDir) d = g_dir_open (dir, 0, NULL);
  const char *name;

  if (!d)
    return FALSE;
  while ((name = g_dir_read_name (d)) != NULL)
    if (g_str_has_suffix (name, ".json"))
      {
        g_autofree char *path = g_build_filename (dir, name, NULL);
        g_autofree char *text = NULL;

        /* Three samples in the day's file. */
        if (g_file_get_contents (path, &text, NULL, NULL) &&
            g_strstr_len (text, -1, "\"time\"") &&
            strstr (strstr (strstr (text, "\"time\"") + 1, "\"time\"") + 1, "\"time\""))
          return TRUE;
      }
  return FALSE;
}

static void
test_metrics_files (Fixture *f, gconstpointer data)
{
  g_autofree char *path = client_create_ok (f->client, SPEC ("sampled"));
  g_autofree char *id = client_get_string (f->client, path, "Id");
  g_autofree char *machine_dir = g_build_filename (mv_test_env_state_dir (f->env), "machines",
                                                   id, NULL);
  g_autofree char *metrics = g_build_filename (machine_dir, "metrics", NULL);
  g_autofree char *err = NULL, *msg = NULL;
  g_autoptr (sd_bus_message) bad = NULL;
  g_autoptr (GArray) samples = NULL;
  g_autoptr (GArray) window = NULL;

  /* A stopped machine has no samples. */
  samples = get_metrics (f, path, 0, G_MAXINT64);
  g_assert_cmpuint (samples->len, ==, 0);
  g_clear_pointer (&samples, g_array_unref);

  client_call_ok (f->client, path, "Start");
  set_cpu (f, path, 42);
  g_assert_true (client_wait (f->client, has_samples, metrics, 15000));

  g_assert_true (g_file_test (metrics, G_FILE_TEST_IS_DIR));

  samples = get_metrics (f, path, 0, G_MAXINT64);
  g_assert_cmpuint (samples->len, >=, 3);
  for (guint i = 1; i < samples->len; i++)
    g_assert_cmpuint (g_array_index (samples, Sample, i).time, >,
                      g_array_index (samples, Sample, i - 1).time);
  g_assert_cmpuint (g_array_index (samples, Sample, samples->len - 1).cpu_ns, ==, 42);

  /* A window of one sample's time holds that sample alone. */
  window = get_metrics (f, path, g_array_index (samples, Sample, 1).time,
                        g_array_index (samples, Sample, 1).time);
  g_assert_cmpuint (window->len, ==, 1);

  bad = client_call (f->client, path, MV_MACHINE_IFACE, "GetMetrics", &err, &msg, "tt",
                     (guint64) 10, (guint64) 5);
  g_assert_null (bad);
  g_assert_cmpstr (err, ==, MV_BUS_ERROR_INVALID_ARGUMENT);
  g_assert_nonnull (strstr (msg, "until"));

  /* The files go with the machine. */
  client_call_ok (f->client, path, "Stop");
  {
    /* The test runtime removes only its own state file, not the test's. */
    g_autofree char *cpu = fixture_runtime_file (f, path, "test-vmm.cpu");
    g_unlink (cpu);
  }
  g_assert_true (g_file_test (metrics, G_FILE_TEST_IS_DIR));
  g_clear_pointer (&err, g_free);
  g_clear_pointer (&msg, g_free);
  {
    g_autoptr (sd_bus_message) r = client_call (f->client, path, MV_MACHINE_IFACE, "Delete", &err,
                                                &msg, "b", FALSE);
    if (!r)
      g_error ("Delete: %s: %s", err, msg);
  }
  g_assert_false (g_file_test (machine_dir, G_FILE_TEST_EXISTS));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add ("/stats/grow", Fixture, test_config, fixture_setup, test_stats_grow,
              fixture_teardown);
  g_test_add ("/stats/all", Fixture, test_config, fixture_setup, test_all_stats,
              fixture_teardown);
  g_test_add ("/stats/metrics-files", Fixture, test_config, fixture_setup, test_metrics_files,
              fixture_teardown);
  return g_test_run ();
}
