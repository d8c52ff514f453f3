/* microvmctl events: what happened to machines (Manager.GetEvents), and
 * with --follow what happens from now on (Manager.Event). */
#include "config.h"

#include <errno.h>
#include <stdio.h>

#include <glib/gi18n.h>
#include <json-glib/json-glib.h>

#include "microvmctl.h"
#include "names.h"
#include "terminal-text.h"

#define EVENT_TYPE "ttsssssa{sv}"

typedef struct {
  MvCtl   *ctl;
  guint64  last;        /* the last sequence printed */
  gboolean behind;      /* a signal skipped some: GetEvents fills the gap */
  int      failure;     /* a negative errno */
} Follow;

static void
print_json (guint64 sequence, guint64 time, const char *kind, const char *id, const char *name,
            const char *operation, const char *message, gboolean has_code, gint32 code,
            const char *snapshot)
{
  g_autoptr (JsonBuilder) b = json_builder_new ();
  g_autoptr (JsonGenerator) gen = json_generator_new ();
  g_autoptr (JsonNode) root = NULL;
  g_autofree char *text = NULL;

  json_builder_begin_object (b);
  json_builder_set_member_name (b, "sequence");
  json_builder_add_int_value (b, (gint64) sequence);
  json_builder_set_member_name (b, "time");
  json_builder_add_int_value (b, (gint64) time);
  json_builder_set_member_name (b, "kind");
  json_builder_add_string_value (b, kind);
  json_builder_set_member_name (b, "machine_id");
  json_builder_add_string_value (b, id);
  json_builder_set_member_name (b, "machine_name");
  json_builder_add_string_value (b, name);
  json_builder_set_member_name (b, "operation_id");
  json_builder_add_string_value (b, operation);
  json_builder_set_member_name (b, "message");
  json_builder_add_string_value (b, message);
  if (has_code)
    {
      json_builder_set_member_name (b, "exit_code");
      json_builder_add_int_value (b, code);
    }
  if (snapshot)
    {
      json_builder_set_member_name (b, "snapshot_id");
      json_builder_add_string_value (b, snapshot);
    }
  json_builder_end_object (b);
  root = json_builder_get_root (b);
  json_generator_set_root (gen, root);
  text = json_generator_to_data (gen, NULL);
  printf ("%s\n", text);
}

static void
print_text (guint64 sequence, guint64 time, const char *kind, const char *name,
            const char *message, gboolean has_code, gint32 code)
{
  g_autoptr (GDateTime) when = g_date_time_new_from_unix_local ((gint64) (time / G_USEC_PER_SEC));
  g_autofree char *stamp = when ? g_date_time_format (when, "%Y-%m-%d %H:%M:%S") : g_strdup ("?");
  g_autofree char *shown_name = mv_terminal_text (name, -1);
  g_autofree char *shown_message = mv_terminal_text (message, -1);
  g_autofree char *exit = has_code ? g_strdup_printf (_("exit code %d"), code) : NULL;

  printf ("%-8" G_GUINT64_FORMAT " %s  %-17s %-20s %s%s%s\n", sequence, stamp, kind, shown_name,
          exit ? exit : "", exit && *message ? "; " : "", shown_message);
}

/* Reads one event of @m and prints it, unless it was printed already. */
static int
print_event (Follow *follow, sd_bus_message *m)
{
  guint64 sequence, time;
  const char *kind, *id, *name, *operation, *message, *snapshot = NULL;
  gboolean has_code = FALSE;
  gint32 code = 0;
  int r = sd_bus_message_read (m, "ttsssss", &sequence, &time, &kind, &id, &name, &operation,
                               &message);

  if (r >= 0)
    r = sd_bus_message_enter_container (m, 'a', "{sv}");
  while (r > 0 && (r = sd_bus_message_enter_container (m, 'e', "sv")) > 0)
    {
      const char *key;

      r = sd_bus_message_read (m, "s", &key);
      if (r >= 0 && g_str_equal (key, "exit_code"))
        {
          r = sd_bus_message_read (m, "v", "i", &code);
          has_code = r >= 0;
        }
      else if (r >= 0 && g_str_equal (key, "snapshot_id"))
        r = sd_bus_message_read (m, "v", "s", &snapshot);
      else if (r >= 0)
        r = sd_bus_message_skip (m, "v");
      if (r >= 0)
        r = sd_bus_message_exit_container (m);
    }
  if (r >= 0)
    r = sd_bus_message_exit_container (m);
  if (r < 0)
    return r;
  if (sequence <= follow->last)
    return 0;
  if (follow->ctl->json)
    print_json (sequence, time, kind, id, name, operation, message, has_code, code, snapshot);
  else
    print_text (sequence, time, kind, name, message, has_code, code);
  follow->last = sequence;
  return 0;
}

/* Prints every event after follow->last that the daemon holds, a page at
 * a time. */
static int
catch_up (Follow *follow, sd_bus_error *error)
{
  for (;;)
    {
      g_autoptr (sd_bus_message) reply = NULL;
      guint n = 0;
      int r = mv_call (follow->ctl, MV_MANAGER_PATH, MV_MANAGER_IFACE, "GetEvents", 0, error,
                       &reply, "t", follow->last);

      if (r >= 0)
        r = sd_bus_message_enter_container (reply, 'a', "(" EVENT_TYPE ")");
      while (r >= 0 && (r = sd_bus_message_enter_container (reply, 'r', EVENT_TYPE)) > 0)
        {
          r = print_event (follow, reply);
          if (r >= 0)
            r = sd_bus_message_exit_container (reply);
          n++;
        }
      if (r < 0)
        return r;
      fflush (stdout);
      if (n < MV_EVENTS_PER_CALL)
        return 0;
    }
}

static int
on_event (sd_bus_message *m, void *userdata, sd_bus_error *ret_error)
{
  Follow *follow = userdata;
  guint64 sequence = 0;
  int r = sd_bus_message_peek_type (m, NULL, NULL);

  if (r >= 0)
    r = sd_bus_message_read (m, "t", &sequence);
  if (r >= 0)
    r = sd_bus_message_rewind (m, TRUE);
  if (r >= 0 && sequence > follow->last + 1)
    follow->behind = TRUE;
  else if (r >= 0)
    r = print_event (follow, m);
  if (r < 0)
    follow->failure = r;
  fflush (stdout);
  return 0;
}

static gboolean
parse_since (const char *text, guint64 *since)
{
  return g_ascii_string_to_unsigned (text, 10, 0, G_MAXUINT64, since, NULL);
}

int
mv_cmd_events (MvCtl *ctl, const char *method, int argc, char **argv)
{
  g_auto (sd_bus_error) error = SD_BUS_ERROR_NULL;
  Follow follow = { .ctl = ctl };
  int r;

  if (ctl->since && !parse_since (ctl->since, &follow.last))
    return mv_usage_error (_("invalid --since '%s': expected a sequence number"), ctl->since);
  r = catch_up (&follow, &error);
  if (r < 0 || !ctl->follow)
    return r < 0 ? mv_fail_bus (&error, r) : MV_EXIT_OK;

  /* Listening first, then what came in between. */
  r = sd_bus_match_signal (ctl->bus, NULL, MV_BUS_NAME, MV_MANAGER_PATH, MV_MANAGER_IFACE, "Event",
                           on_event, &follow);
  if (r >= 0)
    r = catch_up (&follow, &error);
  while (r >= 0)
    {
      if (follow.behind)
        {
          follow.behind = FALSE;
          r = catch_up (&follow, &error);
          continue;
        }
      if (follow.failure < 0)
        r = follow.failure;
      else if ((r = sd_bus_process (ctl->bus, NULL)) == 0)
        r = sd_bus_wait (ctl->bus, UINT64_MAX);
    }
  if (r == -ECONNRESET || r == -ENOTCONN)
    return mv_fail (_("The bus connection was lost"));
  return mv_fail_bus (&error, r);
}
