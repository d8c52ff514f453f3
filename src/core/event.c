#include "event.h"
#include "json-out.h"
#include <string.h>
#include "errors.h"
#include "json-strict.h"

typedef struct {
  const char *name;
  const char *message_id;
} KindInfo;

static const KindInfo kinds[MV_EVENT_N_KINDS] = {
  [MV_EVENT_CREATED]           = { "created",           "c9a2e01885e54bb4a54a164f0165f86a" },
  [MV_EVENT_STARTED]           = { "started",           "13cadb73b1164b1896c1eed17b63e740" },
  [MV_EVENT_READY]             = { "ready",             "99604b6ffb92456faa9f96341aba6fe4" },
  [MV_EVENT_PAUSED]            = { "paused",            "0e0581cbdb0c413e869d7c56ed07e43e" },
  [MV_EVENT_RESUMED]           = { "resumed",           "edf580865113459892a2d98750e13e14" },
  [MV_EVENT_STOPPED]           = { "stopped",           "599937f5a07e4de294cc2084cdb41e8d" },
  [MV_EVENT_ENDED]             = { "ended",             "6d93b94f9b8543f38a4d48dd66c56e23" },
  [MV_EVENT_CRASHED]           = { "crashed",           "4c123009aa2d4106b7b8af03ac796eec" },
  [MV_EVENT_RESTARTED]         = { "restarted",         "cdae276a38b14774aa67d076596e0d53" },
  [MV_EVENT_FAILED]            = { "failed",            "a4c5e19412ed4692bc61e2ebf29c9c36" },
  [MV_EVENT_STANDBY]           = { "standby",           "38f526b9ff764757bceb63698b265b54" },
  [MV_EVENT_WOKEN]             = { "woken",             "24930f2bb5b54565bc6bb2c5c997cca9" },
  [MV_EVENT_UPDATED]           = { "updated",           "4dee251df27540b38e006eb8628e3ab3" },
  [MV_EVENT_RENAMED]           = { "renamed",           "7c6812cb16534f9ba9ca84f998892d92" },
  [MV_EVENT_DELETED]           = { "deleted",           "04fc13c9443b44e9b50ca5490f0f16da" },
  [MV_EVENT_SNAPSHOT_TAKEN]    = { "snapshot-taken",    "91239ab976894fa897436bbf7816b3f3" },
  [MV_EVENT_SNAPSHOT_RESTORED] = { "snapshot-restored", "4e96ba15c6174f79939a9fcd6cdceb31" },
  [MV_EVENT_SNAPSHOT_DELETED]  = { "snapshot-deleted",  "319587a8a8e7466fb2df752021b60801" },
  [MV_EVENT_FORKED]            = { "forked",            "39489e2d7b28453cb2e1ad29ec49b482" },
  [MV_EVENT_RESIZED]           = { "resized",           "2317637773b04ce9925e51b5b7e7de68" },
};

const char *
mv_event_kind_to_string (MvEventKind kind)
{
  g_return_val_if_fail (kind < MV_EVENT_N_KINDS, "unknown");
  return kinds[kind].name;
}

gboolean
mv_event_kind_from_string (const char *text, MvEventKind *kind)
{
  for (guint i = 0; i < MV_EVENT_N_KINDS; i++)
    if (g_strcmp0 (kinds[i].name, text) == 0)
      {
        *kind = i;
        return TRUE;
      }
  return FALSE;
}

const char *
mv_event_kind_message_id (MvEventKind kind)
{
  g_return_val_if_fail (kind < MV_EVENT_N_KINDS, NULL);
  return kinds[kind].message_id;
}

/* A message's first line (what follows a failure's first line may quote
 * the console, which not everyone may read), cut to MV_EVENT_MESSAGE_MAX
 * bytes, keeping whole characters; invalid UTF-8 is made valid, since it
 * goes on the bus. */
static char *
bounded_text (const char *text)
{
  g_autofree char *valid = NULL;
  const char *end;

  if (!text)
    return NULL;
  valid = g_utf8_make_valid (text, strcspn (text, "\n"));
  if (strlen (valid) <= MV_EVENT_MESSAGE_MAX)
    return g_steal_pointer (&valid);
  end = g_utf8_find_prev_char (valid, valid + MV_EVENT_MESSAGE_MAX + 1);
  return g_strndup (valid, end - valid);
}

MvEvent *
mv_event_copy (const MvEvent *event)
{
  MvEvent *copy = g_new0 (MvEvent, 1);

  *copy = *event;
  copy->machine_id = g_strdup (event->machine_id);
  copy->machine_name = g_strdup (event->machine_name);
  copy->operation_id = g_strdup (event->operation_id);
  copy->message = bounded_text (event->message);
  copy->snapshot_id = g_strdup (event->snapshot_id);
  return copy;
}

void
mv_event_free (MvEvent *event)
{
  if (!event)
    return;
  g_free (event->machine_id);
  g_free (event->machine_name);
  g_free (event->operation_id);
  g_free (event->message);
  g_free (event->snapshot_id);
  g_free (event);
}

char *
mv_event_to_json (const MvEvent *event)
{
  MvJsonOut out;

  mv_json_out_init (&out, MV_JSON_OUT_TEXT);
  mv_json_out_begin_object (&out);
  mv_json_out_int_member (&out, "sequence", (gint64) event->sequence);
  mv_json_out_int_member (&out, "time", event->time);
  mv_json_out_string_member (&out, "kind", mv_event_kind_to_string (event->kind));
  mv_json_out_string_member (&out, "machine_id", event->machine_id);
  mv_json_out_string_member (&out, "machine_name", event->machine_name);
  mv_json_out_optional_string (&out, "operation_id", event->operation_id);
  mv_json_out_optional_string (&out, "message", event->message);
  if (event->has_exit_code)
    mv_json_out_int_member (&out, "exit_code", event->exit_code);
  mv_json_out_optional_string (&out, "snapshot_id", event->snapshot_id);
  mv_json_out_end_object (&out);
  return mv_json_out_steal_text (&out);
}

static const char *const known_members[] = {
  "sequence", "time", "kind", "machine_id", "machine_name", "operation_id", "message",
  "exit_code", "snapshot_id", NULL,
};

MvEvent *
mv_event_from_json (const char *line, gsize length, GError **error)
{
  static const MvJsonLimits limits = { .max_bytes = MV_EVENT_LINE_MAX_BYTES, .max_depth = 1 };
  g_autoptr (MvJsonDoc) doc = mv_json_read (line, length, &limits, "event", error);
  const MvJson *root = doc ? mv_json_doc_root (doc) : NULL;
  g_autoptr (MvEvent) event = g_new0 (MvEvent, 1);
  const char *kind = NULL;
  gint64 sequence = 0, time = 0, exit_code = 0;
  const MvJson *node;

  if (!root)
    return NULL;
  if (!mv_json_is_object (root))
    return mv_json_wrong_type (root, "event", "an object", error), NULL;
  if (!mv_json_reject_unknown_members (root, NULL, known_members, error))
    return NULL;
  if (!(node = mv_json_required_member (root, "sequence", error)) ||
      !mv_json_read_int (node, "sequence", 1, G_MAXINT64, &sequence, error) ||
      !(node = mv_json_required_member (root, "time", error)) ||
      !mv_json_read_int (node, "time", 0, G_MAXINT64, &time, error) ||
      !(node = mv_json_required_member (root, "kind", error)) ||
      !mv_json_read_string (node, "kind", &kind, error))
    return NULL;
  if (!mv_event_kind_from_string (kind, &event->kind))
    return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT, "kind: unknown kind %s", kind), NULL;
  if (!mv_json_read_string_member (root, "machine_id", FALSE, &event->machine_id, error) ||
      !mv_json_read_string_member (root, "machine_name", FALSE, &event->machine_name, error) ||
      !mv_json_read_string_member (root, "operation_id", TRUE, &event->operation_id, error) ||
      !mv_json_read_string_member (root, "message", FALSE, &event->message, error) ||
      !mv_json_read_string_member (root, "snapshot_id", TRUE, &event->snapshot_id, error))
    return NULL;
  if (!event->machine_id || !event->machine_name)
    return mv_error_set (error, MV_ERROR_INVALID_ARGUMENT, "%s: missing",
                         event->machine_id ? "machine_name" : "machine_id"), NULL;
  if ((node = mv_json_member (root, "exit_code")))
    {
      if (!mv_json_read_int (node, "exit_code", G_MININT, G_MAXINT, &exit_code, error))
        return NULL;
      event->has_exit_code = TRUE;
      event->exit_code = (int) exit_code;
    }
  event->sequence = (guint64) sequence;
  event->time = time;
  return g_steal_pointer (&event);
}
