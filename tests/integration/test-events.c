/* Events through the daemon, with the test runtime: the events of a
 * lifecycle with a crash and a restart by the restart policy, a clean
 * end, GetEvents since a sequence, the Event signal, the log kept across
 * a daemon restart, and its rotation at the size cap; and on the
 * Firecracker test VMM, whose simulated guest runs an agent, the guest's
 * ready event. */
#include "bus-client.h"
#include "names.h"

#include <glib/gstdio.h>

#define SPEC_WITH(name, extra) \
  "{\"name\":\"" name "\",\"hypervisor_type\":\"test\",\"kernel\":\"/boot/vmlinuz\"" extra "}"

static const char test_config[] =
  "[lifecycle]\n"
  "restart-backoff-ms=200\n"
  "resync-seconds=1\n";

/* A cap small enough for a test to pass it. */
static const char small_cap_config[] =
  "[events]\n"
  "max-file-bytes=4096\n";

typedef struct {
  guint64 sequence;
  guint64 time;
  char   *kind;
  char   *machine_id;
  char   *machine_name;
  char   *operation_id;
  char   *message;
  gboolean has_exit_code;
  gint32  exit_code;
  char   *snapshot_id;
} Event;

static void
event_free (Event *e)
{
  g_free (e->kind);
  g_free (e->machine_id);
  g_free (e->machine_name);
  g_free (e->operation_id);
  g_free (e->message);
  g_free (e->snapshot_id);
  g_free (e);
}

/* One (ttsssssa{sv}) of @m. */
static Event *
read_event (sd_bus_message *m)
{
  Event *e = g_new0 (Event, 1);
  const char *kind, *id, *name, *op, *msg;

  g_assert_cmpint (sd_bus_message_read (m, "ttsssss", &e->sequence, &e->time, &kind, &id, &name,
                                        &op, &msg), >, 0);
  e->kind = g_strdup (kind);
  e->machine_id = g_strdup (id);
  e->machine_name = g_strdup (name);
  e->operation_id = g_strdup (op);
  e->message = g_strdup (msg);
  g_assert_cmpint (sd_bus_message_enter_container (m, 'a', "{sv}"), >, 0);
  while (sd_bus_message_enter_container (m, 'e', "sv") > 0)
    {
      const char *key = NULL;

      g_assert_cmpint (sd_bus_message_read (m, "s", &key), >, 0);
      if (g_str_equal (key, "exit_code"))
        {
          e->has_exit_code = TRUE;
          g_assert_cmpint (sd_bus_message_read (m, "v", "i", &e->exit_code), >, 0);
        }
      else if (g_str_equal (key, "snapshot_id"))
        {
          const char *s = NULL;
          g_assert_cmpint (sd_bus_message_read (m, "v", "s", &s), >, 0);
          e->snapshot_id = g_strdup (s);
        }
      else
        g_error ("unknown detail %s", key);
      sd_bus_message_exit_container (m);
    }
  sd_bus_message_exit_container (m);
  return e;
}

/* Manager.GetEvents(@since): Event*. */
static GPtrArray *
get_events (Client *client, guint64 since)
{
  g_autofree char *err = NULL, *msg = NULL;
  g_autoptr (sd_bus_message) reply = client_call (client, MV_MANAGER_PATH, MV_MANAGER_IFACE,
                                                  "GetEvents", &err, &msg, "t", since);
  GPtrArray *events = g_ptr_array_new_with_free_func ((GDestroyNotify) event_free);

  if (!reply)
    g_error ("GetEvents: %s: %s", err, msg);
  g_assert_cmpint (sd_bus_message_enter_container (reply, 'a', "(ttsssssa{sv})"), >, 0);
  while (sd_bus_message_enter_container (reply, 'r', "ttsssssa{sv}") > 0)
    {
      g_ptr_array_add (events, read_event (reply));
      sd_bus_message_exit_container (reply);
    }
  return events;
}

/* The kinds of @machine_id's events, joined with spaces. */
static char *
kinds_of (GPtrArray *events, const char *machine_id)
{
  g_autoptr (GString) kinds = g_string_new ("");

  for (guint i = 0; i < events->len; i++)
    {
      Event *e = events->pdata[i];

      if (g_str_equal (e->machine_id, machine_id))
        g_string_append_printf (kinds, "%s%s", kinds->len ? " " : "", e->kind);
    }
  return g_string_free (g_steal_pointer (&kinds), FALSE);
}

static Event *
find_event (GPtrArray *events, const char *machine_id, const char *kind)
{
  for (guint i = 0; i < events->len; i++)
    {
      Event *e = events->pdata[i];

      if (g_str_equal (e->machine_id, machine_id) && g_str_equal (e->kind, kind))
        return e;
    }
  return NULL;
}

/* Waits until @machine_id's events are @kinds. */
static void
assert_kinds_soon (Client *client, const char *machine_id, const char *kinds)
{
  g_autofree char *now = NULL;

  for (guint waited = 0; waited < 10000; waited += 100)
    {
      g_autoptr (GPtrArray) events = get_events (client, 0);

      g_free (now);
      now = kinds_of (events, machine_id);
      if (g_str_equal (now, kinds))
        return;
      client_settle (client, 100);
    }
  g_assert_cmpstr (now, ==, kinds);
}

static void
assert_sequences_rise_by_one (GPtrArray *events)
{
  for (guint i = 1; i < events->len; i++)
    {
      Event *a = events->pdata[i - 1], *b = events->pdata[i];

      g_assert_cmpuint (b->sequence, ==, a->sequence + 1);
      g_assert_cmpuint (b->time, >=, a->time);
    }
}

static char *
machine_id (Client *client, const char *path)
{
  return client_get_string (client, path, "Id");
}

/* The test VMM of @id "crashes" or ends with @how ("crashed", "exited 0"). */
static void
end_vmm (Fixture *f, const char *id, const char *how)
{
  g_autofree char *file = g_build_filename (mv_test_env_runtime_dir (f->env), "machines", id,
                                            "test-vmm.state", NULL);

  g_assert_true (g_file_set_contents (file, how, -1, NULL));
}

/* Event signals seen: "SEQUENCE KIND MACHINE_ID". */
static int
on_event_signal (sd_bus_message *m, void *userdata, sd_bus_error *error)
{
  GPtrArray *seen = userdata;
  g_autoptr (sd_bus_message) ref = sd_bus_message_ref (m);
  Event *e = read_event (m);

  g_ptr_array_add (seen, g_strdup_printf ("%" G_GUINT64_FORMAT " %s %s", e->sequence, e->kind,
                                          e->machine_id));
  event_free (e);
  return 0;
}

static void
test_lifecycle (Fixture *f, gconstpointer data)
{
  g_autoptr (GPtrArray) seen = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (sd_bus_slot) slot = NULL;
  g_autofree char *path = client_create_ok (f->client, SPEC_WITH ("flaky", ",\"restart\":{\"mode\":\"on-failure\",\"max_retries\":3}"));
  g_autofree char *id = machine_id (f->client, path);
  g_autofree char *clean_path = client_create_ok (f->client, SPEC_WITH ("batch", ""));
  g_autofree char *clean_id = machine_id (f->client, clean_path);
  g_autoptr (GPtrArray) events = NULL;
  Event *e;

  g_assert_cmpint (sd_bus_match_signal (f->client->bus, &slot, MV_BUS_NAME, MV_MANAGER_PATH,
                                        MV_MANAGER_IFACE, "Event", on_event_signal, seen),
                   >=, 0);

  client_call_ok (f->client, path, "Start");
  end_vmm (f, id, "crashed");
  client_assert_state_soon (f->client, path, "Restarting", 5000);
  client_assert_state_soon (f->client, path, "Running", 5000);
  end_vmm (f, id, "exited 3");
  client_assert_state_soon (f->client, path, "Restarting", 5000);
  client_assert_state_soon (f->client, path, "Running", 5000);
  client_call_ok (f->client, path, "Stop");
  {
    g_autofree char *err = NULL, *msg = NULL;
    g_autoptr (sd_bus_message) reply = client_call (f->client, path, MV_MACHINE_IFACE, "Delete",
                                                    &err, &msg, "b", 0);
    g_assert_nonnull (reply);
  }
  assert_kinds_soon (f->client, id,
                     "created started crashed restarted crashed restarted stopped deleted");

  /* A guest that ends with 0 ended; nothing restarts it. */
  client_call_ok (f->client, clean_path, "Start");
  end_vmm (f, clean_id, "exited 0");
  client_assert_state_soon (f->client, clean_path, "Stopped", 5000);
  assert_kinds_soon (f->client, clean_id, "created started ended");

  events = get_events (f->client, 0);
  assert_sequences_rise_by_one (events);
  g_assert_cmpuint (((Event *) events->pdata[0])->sequence, ==, 1);
  e = find_event (events, id, "created");
  g_assert_cmpstr (e->machine_name, ==, "flaky");
  g_assert_cmpstr (e->operation_id, ==, "");
  /* What a step did names its operation. */
  e = find_event (events, id, "started");
  g_assert_cmpuint (strlen (e->operation_id), ==, 32);
  g_assert_cmpstr (e->operation_id, !=, find_event (events, id, "stopped")->operation_id);
  /* The crash without a code, the one with a code, the clean end. */
  e = find_event (events, id, "crashed");
  g_assert_false (e->has_exit_code);
  g_assert_cmpstr (e->message, ==, "the VMM crashed");
  for (guint i = 0; i < events->len; i++)
    if (g_str_equal (((Event *) events->pdata[i])->kind, "crashed") && e != events->pdata[i])
      {
        Event *second = events->pdata[i];
        g_assert_true (second->has_exit_code);
        g_assert_cmpint (second->exit_code, ==, 3);
      }
  e = find_event (events, clean_id, "ended");
  g_assert_true (e->has_exit_code);
  g_assert_cmpint (e->exit_code, ==, 0);

  /* Every event after the first two (created before the match) was
   * signalled, in order, with the sequence GetEvents gives. */
  client_settle (f->client, 200);
  g_assert_cmpuint (seen->len, ==, events->len - 2);
  for (guint i = 0; i < seen->len; i++)
    {
      Event *want = events->pdata[i + 2];
      g_autofree char *line = g_strdup_printf ("%" G_GUINT64_FORMAT " %s %s", want->sequence,
                                               want->kind, want->machine_id);
      g_assert_cmpstr (seen->pdata[i], ==, line);
    }

  /* Since a sequence: only what came after it. */
  {
    guint64 middle = ((Event *) events->pdata[4])->sequence;
    g_autoptr (GPtrArray) later = get_events (f->client, middle);
    g_autoptr (GPtrArray) none = get_events (f->client, G_MAXUINT64);

    g_assert_cmpuint (later->len, ==, events->len - 5);
    g_assert_cmpuint (((Event *) later->pdata[0])->sequence, ==, middle + 1);
    g_assert_cmpuint (none->len, ==, 0);
  }
}

/* What a client asks of a machine is told too: pause and resume, standby
 * and the wake from it, an update and a rename. */
static void
test_requests (Fixture *f, gconstpointer data)
{
  g_autofree char *path = client_create_ok (f->client, SPEC_WITH ("asker", ""));
  g_autofree char *id = machine_id (f->client, path);
  g_autoptr (sd_bus_message) updated = NULL, renamed = NULL;
  g_autoptr (GPtrArray) events = NULL;
  Event *rename;

  client_call_ok (f->client, path, "Start");
  client_call_ok (f->client, path, "Pause");
  client_call_ok (f->client, path, "Resume");
  client_call_ok (f->client, path, "Standby");
  client_call_ok (f->client, path, "Start");
  client_call_ok (f->client, path, "Stop");
  updated = client_call (f->client, path, MV_MACHINE_IFACE, "Update", NULL, NULL, "s",
                         "{\"name\":\"asker\",\"hypervisor_type\":\"test\","
                         "\"kernel\":\"/boot/vmlinuz\",\"memory_bytes\":536870912}");
  g_assert_nonnull (updated);
  renamed = client_call (f->client, path, MV_MACHINE_IFACE, "Rename", NULL, NULL, "s", "answerer");
  g_assert_nonnull (renamed);
  assert_kinds_soon (f->client, id, "created started paused resumed standby woken stopped "
                                    "updated renamed");
  events = get_events (f->client, 0);
  rename = find_event (events, id, "renamed");
  g_assert_cmpstr (rename->machine_name, ==, "answerer");
  g_assert_nonnull (strstr (rename->message, "asker"));
}

static void
test_kept_across_restart (Fixture *f, gconstpointer data)
{
  g_autofree char *path = client_create_ok (f->client, SPEC_WITH ("keeper", ""));
  g_autofree char *id = machine_id (f->client, path);
  g_autofree char *log = g_build_filename (mv_test_env_state_dir (f->env), MV_EVENTS_LOG_NAME,
                                           NULL);
  g_autofree char *text = NULL, *kinds = NULL;
  g_autoptr (GPtrArray) before = NULL, after = NULL;

  client_call_ok (f->client, path, "Start");
  client_call_ok (f->client, path, "Stop");
  before = get_events (f->client, 0);
  g_assert_cmpuint (before->len, ==, 3);

  /* Killed: what was appended is in the file all the same. */
  mv_test_env_stop_daemon (f->env, SIGKILL);
  g_assert_true (g_file_get_contents (log, &text, NULL, NULL));
  g_assert_nonnull (strstr (text, "\"kind\":\"stopped\""));
  mv_test_env_start_daemon (f->env, NULL);

  client_call_ok (f->client, path, "Start");
  after = get_events (f->client, 0);
  kinds = kinds_of (after, id);
  g_assert_cmpstr (kinds, ==, "created started stopped started");
  assert_sequences_rise_by_one (after);
  for (guint i = 0; i < before->len; i++)
    {
      Event *a = before->pdata[i], *b = after->pdata[i];
      g_assert_cmpuint (a->sequence, ==, b->sequence);
      g_assert_cmpuint (a->time, ==, b->time);
      g_assert_cmpstr (a->operation_id, ==, b->operation_id);
    }
}

static void
test_rotation (Fixture *f, gconstpointer data)
{
  g_autofree char *log = g_build_filename (mv_test_env_state_dir (f->env), MV_EVENTS_LOG_NAME,
                                           NULL);
  g_autofree char *rotated = g_build_filename (mv_test_env_state_dir (f->env),
                                               MV_EVENTS_ROTATED_NAME, NULL);
  g_autofree char *older = g_strconcat (log, ".2", NULL);
  g_autoptr (GPtrArray) events = NULL;
  GStatBuf st;
  guint64 last = 0;

  /* Each start and stop is about 200 bytes: 60 of them pass the cap
   * twice. */
  g_autofree char *path = client_create_ok (f->client, SPEC_WITH ("busy", ""));
  for (guint i = 0; i < 30; i++)
    {
      client_call_ok (f->client, path, "Start");
      client_call_ok (f->client, path, "Stop");
    }
  g_assert_cmpint (g_stat (log, &st), ==, 0);
  g_assert_cmpint (st.st_size, <=, 4096);
  g_assert_cmpint (g_stat (rotated, &st), ==, 0);
  g_assert_cmpint (st.st_size, <=, 4096);
  g_assert_cmpint (st.st_size, >, 2048);
  g_assert_false (g_file_test (older, G_FILE_TEST_EXISTS));

  /* The oldest went with the first rotated file; the rest are held, and
   * numbering goes on after a restart from what the files hold. */
  events = get_events (f->client, 0);
  assert_sequences_rise_by_one (events);
  g_assert_cmpuint (((Event *) events->pdata[0])->sequence, ==, 1);
  last = ((Event *) events->pdata[events->len - 1])->sequence;
  g_assert_cmpuint (last, ==, 61);
  mv_test_env_stop_daemon (f->env, SIGTERM);
  mv_test_env_start_daemon (f->env, NULL);
  g_ptr_array_unref (events);
  events = get_events (f->client, 0);
  g_assert_cmpuint (((Event *) events->pdata[0])->sequence, >, 1);
  g_assert_cmpuint (((Event *) events->pdata[events->len - 1])->sequence, ==, last);
  client_call_ok (f->client, path, "Start");
  g_ptr_array_unref (events);
  events = get_events (f->client, last);
  g_assert_cmpuint (events->len, ==, 1);
  g_assert_cmpuint (((Event *) events->pdata[0])->sequence, ==, last + 1);
}

/* A guest whose readiness is its agent: ready comes after started, once,
 * and names the start's operation. */
static void
test_ready (Fixture *f, gconstpointer data)
{
  g_autofree char *kernel = g_build_filename (mv_test_env_images_dir (f->env), "vmlinuz", NULL);
  g_autofree char *initrd = g_build_filename (mv_test_env_images_dir (f->env), "initrd", NULL);
  g_autofree char *spec = NULL, *path = NULL, *id = NULL, *first_start = NULL;
  g_autoptr (GPtrArray) events = NULL;
  Event *started, *ready;

  /* The simulated guest needs files, not a kernel. */
  g_assert_true (g_file_set_contents (kernel, "kernel", -1, NULL));
  g_assert_true (g_file_set_contents (initrd, "initrd", -1, NULL));
  spec = g_strdup_printf ("{\"name\":\"greeter\",\"hypervisor_type\":\"firecracker\","
                          "\"kernel\":\"%s\",\"initrd\":\"%s\",\"memory_bytes\":134217728,"
                          "\"kernel_args\":\"console=ttyS0 reboot=k panic=1 microvmd.boot_ms=0\","
                          "\"readiness\":\"agent\"}", kernel, initrd);
  path = client_create_ok (f->client, spec);
  id = machine_id (f->client, path);

  client_call_ok (f->client, path, "Start");
  assert_kinds_soon (f->client, id, "created started ready");
  events = get_events (f->client, 0);
  started = find_event (events, id, "started");
  ready = find_event (events, id, "ready");
  g_assert_cmpuint (ready->sequence, >, started->sequence);
  g_assert_cmpuint (strlen (ready->operation_id), ==, 32);
  g_assert_cmpstr (ready->operation_id, ==, started->operation_id);
  /* The message is the agent's version. */
  g_assert_cmpstr (ready->message, !=, "");

  /* A second run is ready again, under its own start. */
  first_start = g_strdup (started->operation_id);
  client_call_ok (f->client, path, "Stop");
  client_call_ok (f->client, path, "Start");
  assert_kinds_soon (f->client, id, "created started ready stopped started ready");
  g_ptr_array_unref (events);
  events = get_events (f->client, 0);
  {
    Event *second_start = NULL, *second_ready = NULL;

    for (guint i = 0; i < events->len; i++)
      {
        Event *e = events->pdata[i];

        if (!g_str_equal (e->machine_id, id))
          continue;
        if (g_str_equal (e->kind, "started"))
          second_start = e;
        else if (g_str_equal (e->kind, "ready"))
          second_ready = e;
      }
    g_assert_nonnull (second_start);
    g_assert_nonnull (second_ready);
    g_assert_cmpstr (second_ready->operation_id, ==, second_start->operation_id);
    g_assert_cmpstr (second_start->operation_id, !=, first_start);
  }
  client_delete_all (f->client);
}

/* microvmctl events, as any local user: text, and JSON after a sequence. */
static void
test_cli (Fixture *f, gconstpointer data)
{
  g_autofree char *path = client_create_ok (f->client, SPEC_WITH ("shown", ""));
  g_autofree char *ctl = g_build_filename (g_getenv ("MICROVMD_BUILD_DIR"), "src", "cli",
                                           "microvmctl", NULL);
  const char *text_argv[] = { ctl, "events", NULL };
  const char *json_argv[] = { ctl, "--json", "events", "--since", "1", NULL };
  const char *bad_argv[] = { ctl, "events", "--since", "soon", NULL };
  g_autofree char *out = NULL, *err = NULL;
  g_auto (GStrv) lines = NULL;

  client_call_ok (f->client, path, "Start");
  client_call_ok (f->client, path, "Stop");

  g_assert_cmpint (mv_test_env_run_as_nobody (f->env, text_argv, &out, &err), ==, 0);
  lines = g_strsplit (out, "\n", -1);
  g_assert_cmpuint (g_strv_length (lines), ==, 4);
  g_assert_true (g_str_has_prefix (lines[0], "1 "));
  g_assert_nonnull (strstr (lines[0], " created "));
  g_assert_nonnull (strstr (lines[0], " shown"));
  g_assert_nonnull (strstr (lines[2], " stopped "));

  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);
  g_clear_pointer (&lines, g_strfreev);
  g_assert_cmpint (mv_test_env_run_as_nobody (f->env, json_argv, &out, &err), ==, 0);
  lines = g_strsplit (out, "\n", -1);
  g_assert_cmpuint (g_strv_length (lines), ==, 3);
  g_assert_true (g_str_has_prefix (lines[0], "{\"sequence\":2,"));
  g_assert_nonnull (strstr (lines[0], "\"kind\":\"started\""));
  g_assert_nonnull (strstr (lines[1], "\"kind\":\"stopped\""));

  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);
  g_assert_cmpint (mv_test_env_run_as_nobody (f->env, bad_argv, &out, &err), ==, 2);
  g_assert_nonnull (strstr (err, "--since"));
}

int
main (int argc, char **argv)
{
  g_autofree char *ready_config = NULL;

  g_test_init (&argc, &argv, NULL);
  g_test_add ("/events/lifecycle", Fixture, test_config, fixture_setup, test_lifecycle,
              fixture_teardown);
  g_test_add ("/events/requests", Fixture, test_config, fixture_setup, test_requests,
              fixture_teardown);
  g_test_add ("/events/kept-across-restart", Fixture, test_config, fixture_setup,
              test_kept_across_restart, fixture_teardown);
  g_test_add ("/events/rotation", Fixture, small_cap_config, fixture_setup, test_rotation,
              fixture_teardown);
  g_test_add ("/events/cli", Fixture, NULL, fixture_setup, test_cli, fixture_teardown);
  ready_config = guest_config ("firecracker", test_config);
  g_test_add ("/events/ready", Fixture, ready_config, fixture_setup, test_ready, fixture_teardown);
  return g_test_run ();
}
