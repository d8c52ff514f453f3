/* Events: what happened to a machine, as the recorder keeps it (one JSON
 * object a line in events.jsonl), the bus tells it (Manager.Event) and the
 * journal catalogues it (a MESSAGE_ID per kind). Pure. */
#pragma once
#include <glib.h>

typedef enum {
  MV_EVENT_CREATED,
  MV_EVENT_STARTED,
  MV_EVENT_READY,              /* its guest agent answered */
  MV_EVENT_PAUSED,
  MV_EVENT_RESUMED,
  MV_EVENT_STOPPED,            /* by a request */
  MV_EVENT_ENDED,              /* by itself, cleanly: exit code 0 */
  MV_EVENT_CRASHED,            /* by itself, not cleanly: another code, or none */
  MV_EVENT_RESTARTED,          /* started again by its restart policy */
  MV_EVENT_FAILED,             /* a step failed */
  MV_EVENT_STANDBY,
  MV_EVENT_WOKEN,              /* from standby */
  MV_EVENT_UPDATED,
  MV_EVENT_RENAMED,
  MV_EVENT_DELETED,
  MV_EVENT_SNAPSHOT_TAKEN,
  MV_EVENT_SNAPSHOT_RESTORED,
  MV_EVENT_SNAPSHOT_DELETED,
  MV_EVENT_FORKED,             /* this machine was made from a snapshot or another machine */
  MV_EVENT_RESIZED,            /* given other vCPUs or memory while it runs */
  MV_EVENT_N_KINDS,
} MvEventKind;

/* Longest message kept; a longer one is cut at a character boundary.
 * Only its first line is kept. */
#define MV_EVENT_MESSAGE_MAX 1024
/* An event's line is at most this long: a message of MV_EVENT_MESSAGE_MAX
 * bytes, each escaped at worst as \uXXXX, and the rest. */
#define MV_EVENT_LINE_MAX_BYTES (6 * MV_EVENT_MESSAGE_MAX + 4096)

typedef struct {
  guint64     sequence;        /* from 1, one more for each event; 0: not yet recorded */
  gint64      time;            /* µs since the epoch */
  MvEventKind kind;
  char       *machine_id;
  char       *machine_name;    /* its name then */
  char       *operation_id;    /* NULL: none */
  char       *message;         /* why, or what; NULL: nothing to say */
  gboolean    has_exit_code;   /* ENDED, CRASHED: the guest said how it ended */
  int         exit_code;
  char       *snapshot_id;     /* SNAPSHOT_*, FORKED from a snapshot; NULL: none */
} MvEvent;

/* "created", "snapshot-taken", ...: what Manager.Event's kind says. */
const char *mv_event_kind_to_string (MvEventKind kind);
gboolean    mv_event_kind_from_string (const char *text, MvEventKind *kind);
/* The journal's MESSAGE_ID of @kind: 32 lowercase hex digits, never
 * changed once released. */
const char *mv_event_kind_message_id (MvEventKind kind);

MvEvent    *mv_event_copy (const MvEvent *event);
void        mv_event_free (MvEvent *event);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (MvEvent, mv_event_free)

/* One line of events.jsonl, without its newline. */
char       *mv_event_to_json (const MvEvent *event);
/* A line read back; MV_ERROR_INVALID_ARGUMENT naming the field if it is
 * not one mv_event_to_json() writes. */
MvEvent    *mv_event_from_json (const char *line, gsize length, GError **error);
