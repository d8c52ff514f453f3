/* A crash at each fault point of the daemon's own files besides the
 * records, with the test runtime: the daily metrics file, the event log
 * (an append and its rotation) and the rotation of a machine's console
 * log. Each file is whole afterwards, with its old content or its new,
 * and the daemon restarts clean: the machine runs on and the next write
 * of each kind goes through. */
#include "bus-client.h"
#include "names.h"

#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#define SPEC \
  "{\"name\":\"writer\",\"hypervisor_type\":\"test\",\"kernel\":\"/boot/vmlinuz\"," \
  "\"cpu_millicores\":1000,\"memory_bytes\":268435456}"

#define LOG_CAP 65536

static const char test_config[] =
  "[metrics]\n"
  "sample-seconds=1\n"
  "[logs]\n"
  "max-bytes=65536\n"
  "check-seconds=1\n"
  "[events]\n"
  "max-file-bytes=4096\n";

typedef enum { WRITE_METRICS, WRITE_EVENTS, WRITE_CONSOLE_LOG } Writer;

typedef struct {
  const char *fault;
  Writer      writer;
} CrashCase;

static const CrashCase cases[] = {
  { "metrics:written", WRITE_METRICS },
  { "event-log:written", WRITE_EVENTS },
  { "event-log:rotated", WRITE_EVENTS },
  { "log-rotation:copied", WRITE_CONSOLE_LOG },
  { "log-rotation:renamed", WRITE_CONSOLE_LOG },
};

typedef struct {
  Fixture          f;
  const CrashCase *c;
  char            *path;
  char            *id;
} Crash;

static char *
metrics_dir (Crash *x)
{
  return g_build_filename (mv_test_env_state_dir (x->f.env), MV_MACHINES_DIR, x->id,
                           "metrics", NULL);
}

/* Every entry of @dir is a day file holding a whole document; returns the
 * samples in them all. */
static guint
assert_metrics_whole (const char *dir)
{
  g_autoptr (GDir) d = g_dir_open (dir, 0, NULL);
  const char *name;
  guint samples = 0;

  g_assert_nonnull (d);
  while ((name = g_dir_read_name (d)))
    {
      g_autofree char *file = g_build_filename (dir, name, NULL);
      g_autoptr (JsonParser) parser = json_parser_new ();
      g_autoptr (GError) error = NULL;
      JsonObject *root;

      g_assert_true (g_str_has_suffix (name, ".json"));
      g_assert_cmpint (name[0], !=, '.');
      json_parser_load_from_file (parser, file, &error);
      g_assert_no_error (error);
      root = json_node_get_object (json_parser_get_root (parser));
      samples += json_array_get_length (json_object_get_array_member (root, "samples"));
    }
  return samples;
}

/* Every line of the event log and its rotated file is a whole event;
 * returns how many there are. */
static guint
assert_events_whole (Crash *x)
{
  const char *names[] = { MV_EVENTS_ROTATED_NAME, MV_EVENTS_LOG_NAME };
  guint n = 0;

  for (guint i = 0; i < G_N_ELEMENTS (names); i++)
    {
      g_autofree char *file = g_build_filename (mv_test_env_state_dir (x->f.env), names[i], NULL);
      g_autofree char *text = NULL;
      g_auto (GStrv) lines = NULL;

      if (!g_file_get_contents (file, &text, NULL, NULL))
        continue;
      g_assert_true (*text == '\0' || g_str_has_suffix (text, "\n"));
      lines = g_strsplit (text, "\n", -1);
      for (guint l = 0; lines[l] && *lines[l]; l++)
        {
          g_autoptr (JsonParser) parser = json_parser_new ();
          g_autoptr (GError) error = NULL;

          json_parser_load_from_data (parser, lines[l], -1, &error);
          g_assert_no_error (error);
          g_assert_true (JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser)));
          n++;
        }
    }
  return n;
}

/* GetEvents: the sequences rise by one, none lost or told twice, and the
 * last one is @kind. */
static void
assert_events_follow_on (Crash *x, const char *kind)
{
  g_autofree char *err = NULL, *msg = NULL, *last_kind = NULL;
  g_autoptr (sd_bus_message) reply = client_call (x->f.client, MV_MANAGER_PATH, MV_MANAGER_IFACE,
                                                  "GetEvents", &err, &msg, "t", (guint64) 0);
  guint64 previous = 0;
  guint n = 0;

  if (!reply)
    g_error ("GetEvents: %s: %s", err, msg);
  g_assert_cmpint (sd_bus_message_enter_container (reply, 'a', "(ttsssssa{sv})"), >, 0);
  while (sd_bus_message_enter_container (reply, 'r', "ttsssssa{sv}") > 0)
    {
      guint64 sequence, time;
      const char *k, *id, *name, *op, *message;

      g_assert_cmpint (sd_bus_message_read (reply, "ttsssss", &sequence, &time, &k, &id, &name,
                                            &op, &message), >, 0);
      g_assert_cmpint (sd_bus_message_skip (reply, "a{sv}"), >=, 0);
      if (n++ > 0)
        g_assert_cmpuint (sequence, ==, previous + 1);
      previous = sequence;
      g_free (last_kind);
      last_kind = g_strdup (k);
      sd_bus_message_exit_container (reply);
    }
  g_assert_cmpuint (n, >, 0);
  g_assert_cmpstr (last_kind, ==, kind);
}

static char *
console_file (Crash *x, const char *suffix)
{
  g_autofree char *name = g_strconcat (MV_CONSOLE_LOG_NAME, suffix, NULL);

  /* Read while the daemon is down too: by ID, not over the bus. */
  return g_build_filename (mv_test_env_runtime_dir (x->f.env), MV_MACHINES_DIR, x->id, name,
                           NULL);
}

static void
append_console (Crash *x, const char *text)
{
  g_autofree char *file = console_file (x, "");
  FILE *console = fopen (file, "a");

  g_assert_nonnull (console);
  fputs (text, console);
  g_assert_cmpint (fclose (console), ==, 0);
}


static gboolean
daemon_gone (Client *client, gpointer data)
{
  g_autofree char *err = NULL, *msg = NULL;
  g_autoptr (sd_bus_message) reply = client_call (client, MV_MANAGER_PATH, MV_MANAGER_IFACE,
                                                  "ListMachines", &err, &msg, NULL);
  return reply == NULL;
}

static void
crash_setup (Crash *x, gconstpointer data)
{
  fixture_setup (&x->f, test_config);
  x->c = data;
  x->path = client_create_ok (x->f.client, SPEC);
  x->id = client_get_string (x->f.client, x->path, "Id");
  client_call_ok (x->f.client, x->path, "Start");
}

static void
crash_teardown (Crash *x, gconstpointer data)
{
  client_delete_all (x->f.client);
  fixture_teardown (&x->f, data);
  g_free (x->path);
  g_free (x->id);
}

static void
test_crash (Crash *x, gconstpointer data)
{
  const CrashCase *c = x->c;
  g_autofree char *dir = metrics_dir (x);
  g_autoptr (GString) written = g_string_new (NULL);
  g_autofree char *state = NULL;
  guint samples_before = 0, events_before = 0;

  g_test_message ("fault point %s", c->fault);
  /* Something to keep: a sample on disk, and for a rotation of the event
   * log a file near its cap. */
  if (c->writer == WRITE_METRICS)
    for (guint i = 0; i < 50 && !g_file_test (dir, G_FILE_TEST_IS_DIR); i++)
      client_settle (x->f.client, 100);
  if (g_str_equal (c->fault, "event-log:rotated"))
    for (guint i = 0; i < 4; i++)
      {
        client_call_ok (x->f.client, x->path, "Pause");
        client_call_ok (x->f.client, x->path, "Resume");
      }

  g_setenv ("MICROVMD_FAULT_POINT", c->fault, TRUE);
  mv_test_env_stop_daemon (x->f.env, SIGTERM);
  if (c->writer == WRITE_METRICS)
    samples_before = assert_metrics_whole (dir);
  events_before = assert_events_whole (x);
  mv_test_env_start_daemon (x->f.env, NULL);
  g_unsetenv ("MICROVMD_FAULT_POINT");

  switch (c->writer)
    {
    case WRITE_METRICS:
      /* The next round writes within a second. */
      break;
    case WRITE_EVENTS:
      for (guint i = 0; i < 100 && !daemon_gone (x->f.client, NULL); i++)
        {
          g_autofree char *err = NULL, *msg = NULL, *err2 = NULL, *msg2 = NULL;
          g_autoptr (sd_bus_message) paused = client_call (x->f.client, x->path, MV_MACHINE_IFACE,
                                                           "Pause", &err, &msg, NULL);
          g_autoptr (sd_bus_message) resumed = client_call (x->f.client, x->path,
                                                            MV_MACHINE_IFACE, "Resume", &err2,
                                                            &msg2, NULL);
        }
      break;
    case WRITE_CONSOLE_LOG:
      for (guint i = 0; written->len <= LOG_CAP + 4096; i++)
        g_string_append_printf (written, "line %06u of the console\n", i);
      append_console (x, written->str);
      break;
    }
  for (guint waited = 0; !daemon_gone (x->f.client, NULL); waited += 50)
    {
      if (waited >= 20000)
        g_error ("%s: the daemon did not reach its fault point", c->fault);
      g_usleep (50000);
    }
  mv_test_env_stop_daemon (x->f.env, SIGKILL);

  /* Whole, old or new, before the daemon is back. */
  switch (c->writer)
    {
    case WRITE_METRICS:
      g_assert_cmpuint (assert_metrics_whole (dir), >=, samples_before);
      break;
    case WRITE_EVENTS:
      g_assert_cmpuint (assert_events_whole (x), >, events_before);
      break;
    case WRITE_CONSOLE_LOG:
      {
        g_autofree char *log = console_file (x, ""), *rotated = console_file (x, ".1");
        g_autofree char *now = NULL, *old = NULL, *both = NULL;

        g_assert_true (g_file_get_contents (log, &now, NULL, NULL));
        if (!g_file_get_contents (rotated, &old, NULL, NULL))
          old = g_strdup ("");
        /* Every line is still there, once or (between the copy's rename
         * and the emptying) twice. */
        both = g_strconcat (old, now, NULL);
        g_assert_true (g_str_equal (now, written->str) || g_str_equal (both, written->str));
        g_assert_true (g_str_equal (old, "") || g_str_equal (old, written->str));
      }
      break;
    }

  mv_test_env_start_daemon (x->f.env, NULL);
  state = client_get_string (x->f.client, x->path, "State");
  /* A crash as a pause was told leaves the pause done. */
  if (c->writer != WRITE_EVENTS || !g_str_equal (state, "Paused"))
    g_assert_cmpstr (state, ==, "Running");

  /* And the next write goes through. */
  switch (c->writer)
    {
    case WRITE_METRICS:
      {
        guint after = 0;

        for (guint i = 0; i < 50 && (after = assert_metrics_whole (dir)) <= samples_before + 1; i++)
          client_settle (x->f.client, 100);
        g_assert_cmpuint (after, >, samples_before + 1);
      }
      break;
    case WRITE_EVENTS:
      {
        gboolean paused = g_str_equal (state, "Paused");

        client_call_ok (x->f.client, x->path, paused ? "Resume" : "Pause");
        assert_events_whole (x);
        assert_events_follow_on (x, paused ? "resumed" : "paused");
      }
      break;
    case WRITE_CONSOLE_LOG:
      {
        g_autofree char *log = console_file (x, ""), *rotated = console_file (x, ".1");
        g_autofree char *partial = console_file (x, ".1.tmp");
        g_autofree char *now = NULL, *old = NULL;
        gint64 deadline = g_get_monotonic_time () + 10 * G_USEC_PER_SEC;

        /* The check after the restart finishes the rotation. */
        do
          {
            g_clear_pointer (&now, g_free);
            g_clear_pointer (&old, g_free);
            client_settle (x->f.client, 100);
            g_assert_true (g_file_get_contents (log, &now, NULL, NULL));
            g_file_get_contents (rotated, &old, NULL, NULL);
          }
        while ((*now || !old) && g_get_monotonic_time () < deadline);
        g_assert_cmpstr (now, ==, "");
        g_assert_nonnull (old);
        g_assert_true (g_str_equal (old, written->str));
        g_assert_false (g_file_test (partial, G_FILE_TEST_EXISTS));
      }
      break;
    }
}

/* Whether @dir holds what a write under way makes: a file named as a
 * day file's temporary copy. */
static gboolean
metrics_write_under_way (const char *dir)
{
  g_autoptr (GDir) d = g_dir_open (dir, 0, NULL);
  const char *name;

  while (d && (name = g_dir_read_name (d)))
    if (name[0] == '.' && strstr (name, ".json."))
      return TRUE;
  return FALSE;
}

static gpointer
release_after (gpointer control)
{
  g_usleep (500 * 1000);
  g_assert_true (g_file_set_contents (control, "", -1, NULL));
  return NULL;
}

/* A daemon told to stop while a round of metrics is being written lets
 * it finish: no day file's temporary copy is left behind. */
static void
test_metrics_on_stop (Crash *x, gconstpointer data)
{
  g_autofree char *dir = metrics_dir (x);
  g_autofree char *control = g_build_filename (mv_test_env_dir (x->f.env), "fault-io", NULL);
  g_autoptr (GThread) releaser = NULL;

  mv_test_env_stop_daemon (x->f.env, SIGTERM);
  g_setenv ("MICROVMD_FAULT_IO_FILE", control, TRUE);
  mv_test_env_start_daemon (x->f.env, NULL);
  g_unsetenv ("MICROVMD_FAULT_IO_FILE");

  /* The next round is held as it syncs its file. */
  g_assert_true (g_file_set_contents (control, "hold:fsync", -1, NULL));
  for (guint i = 0; i < 100 && !metrics_write_under_way (dir); i++)
    g_usleep (50 * 1000);
  g_assert_true (metrics_write_under_way (dir));

  releaser = g_thread_new ("release", release_after, control);
  mv_test_env_stop_daemon (x->f.env, SIGTERM);
  g_thread_join (g_steal_pointer (&releaser));
  g_assert_false (metrics_write_under_way (dir));
  assert_metrics_whole (dir);
  mv_test_env_start_daemon (x->f.env, NULL);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *name = g_strdup_printf ("/crash-writes/%s", cases[i].fault);

      g_test_add (name, Crash, &cases[i], crash_setup, test_crash, crash_teardown);
    }
  g_test_add ("/crash-writes/metrics-on-stop", Crash, NULL, crash_setup, test_metrics_on_stop,
              crash_teardown);
  return g_test_run ();
}
