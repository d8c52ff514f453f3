/* Events as events.jsonl holds them: a line read back is the event
 * written; what is not an event is refused; messages are bounded. */
#include "core/event.h"
#include "core/errors.h"

#include <string.h>

static void
test_round_trip (void)
{
  MvEvent event = {
    .sequence = 42, .time = 1700000000123456, .kind = MV_EVENT_CRASHED,
    .machine_id = "0123456789abcdef0123456789abcdef", .machine_name = "web",
    .operation_id = "fedcba9876543210fedcba9876543210", .message = "the VMM \"crashed\"",
    .has_exit_code = TRUE, .exit_code = -3, .snapshot_id = "snap",
  };
  g_autofree char *line = mv_event_to_json (&event);
  g_autoptr (GError) error = NULL;
  g_autoptr (MvEvent) back = mv_event_from_json (line, strlen (line), &error);

  g_assert_no_error (error);
  g_assert_null (strchr (line, '\n'));
  g_assert_cmpuint (back->sequence, ==, 42);
  g_assert_cmpint (back->time, ==, 1700000000123456);
  g_assert_cmpint (back->kind, ==, MV_EVENT_CRASHED);
  g_assert_cmpstr (back->machine_id, ==, event.machine_id);
  g_assert_cmpstr (back->machine_name, ==, "web");
  g_assert_cmpstr (back->operation_id, ==, event.operation_id);
  g_assert_cmpstr (back->message, ==, event.message);
  g_assert_true (back->has_exit_code);
  g_assert_cmpint (back->exit_code, ==, -3);
  g_assert_cmpstr (back->snapshot_id, ==, "snap");

  /* What an event does not have is left out, and read back as absent. */
  MvEvent bare = { .sequence = 1, .time = 1, .kind = MV_EVENT_CREATED, .machine_id = "a",
                   .machine_name = "b" };
  g_autofree char *bare_line = mv_event_to_json (&bare);
  g_autoptr (MvEvent) bare_back = mv_event_from_json (bare_line, strlen (bare_line), &error);
  g_assert_no_error (error);
  g_assert_null (bare_back->operation_id);
  g_assert_null (bare_back->message);
  g_assert_false (bare_back->has_exit_code);
  g_assert_null (strstr (bare_line, "exit_code"));
}

static void
test_refused (void)
{
  static const char *const bad[] = {
    "",
    "{\"sequence\":1,\"time\":1,\"kind\":\"created\",\"machine_id\":\"a\",\"machine_nam",
    "{\"sequence\":0,\"time\":1,\"kind\":\"created\",\"machine_id\":\"a\",\"machine_name\":\"b\"}",
    "{\"sequence\":1,\"time\":1,\"kind\":\"exploded\",\"machine_id\":\"a\",\"machine_name\":\"b\"}",
    "{\"sequence\":1,\"time\":1,\"kind\":\"created\",\"machine_name\":\"b\"}",
    "{\"sequence\":1,\"time\":1,\"kind\":\"created\",\"machine_id\":\"a\",\"machine_name\":\"b\",\"extra\":1}",
    "[1]",
  };

  for (guint i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      g_autoptr (GError) error = NULL;
      g_autoptr (MvEvent) event = mv_event_from_json (bad[i], strlen (bad[i]), &error);

      g_assert_null (event);
      g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
    }
}

static void
test_kinds (void)
{
  g_autoptr (GHashTable) ids = g_hash_table_new (g_str_hash, g_str_equal);

  for (guint i = 0; i < MV_EVENT_N_KINDS; i++)
    {
      const char *id = mv_event_kind_message_id (i);
      MvEventKind back;

      g_assert_true (mv_event_kind_from_string (mv_event_kind_to_string (i), &back));
      g_assert_cmpint (back, ==, i);
      g_assert_cmpuint (strlen (id), ==, 32);
      g_assert_cmpuint (strspn (id, "0123456789abcdef"), ==, 32);
      /* Each kind its own. */
      g_assert_true (g_hash_table_add (ids, (gpointer) id));
    }
}

static void
test_message_bounded (void)
{
  g_autofree char *long_text = g_strnfill (3000, 'x');
  g_autofree char *text = g_strconcat ("é", long_text, NULL);
  MvEvent event = { .kind = MV_EVENT_FAILED, .machine_id = "a", .machine_name = "b",
                    .message = "first line\nconsole: secret" };
  g_autoptr (MvEvent) one_line = mv_event_copy (&event);
  g_autoptr (MvEvent) cut = NULL;

  g_assert_cmpstr (one_line->message, ==, "first line");
  event.message = text;
  cut = mv_event_copy (&event);
  g_assert_cmpuint (strlen (cut->message), <=, MV_EVENT_MESSAGE_MAX);
  g_assert_cmpuint (strlen (cut->message), >=, MV_EVENT_MESSAGE_MAX - 1);
  g_assert_true (g_utf8_validate (cut->message, -1, NULL));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/event/round-trip", test_round_trip);
  g_test_add_func ("/event/refused", test_refused);
  g_test_add_func ("/event/kinds", test_kinds);
  g_test_add_func ("/event/message-bounded", test_message_bounded);
  return g_test_run ();
}
