/* The event log: every machine's events (core/event.h), appended one JSON
 * object a line to events.jsonl in the state directory, rotated to
 * events.jsonl.1 at a size cap (one rotated file kept), and read back at
 * start so that sequence numbers go on from where they were. The newest
 * events are also held in memory, for Manager.GetEvents.
 *
 * What is appended reaches the kernel at once, so a daemon that is killed
 * loses nothing; it reaches the disk within sync_seconds (an fsync off
 * the main loop), so a host that loses power loses at most that much.
 * Main thread only. */
#pragma once
#include "core/event.h"

typedef struct _MvEventLog MvEventLog;

typedef struct {
  guint64 max_file_bytes;  /* events.jsonl is rotated before it grows past this */
  guint   max_kept;        /* events held in memory */
  guint   sync_seconds;    /* how long an event may wait for its fsync */
} MvEventLogOptions;

/* Reads what @dir's files hold (a line that is not an event, such as one
 * a crash cut short, is skipped) and opens events.jsonl for appending. */
MvEventLog *mv_event_log_open (const char *dir, const MvEventLogOptions *options,
                               GError **error);
/* Syncs what is unsynced, then closes. */
void        mv_event_log_free (MvEventLog *log);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (MvEventLog, mv_event_log_free)

/* Records a copy of @event with the next sequence number, which is set in
 * @event too. The copy is kept in memory even if it cannot be written:
 * then FALSE says why (a full disk, say). */
gboolean    mv_event_log_append (MvEventLog *log, MvEvent *event, GError **error);
/* The events held with a sequence number above @since, oldest first, at
 * most @max (MvEvent*, the log's: valid until the next append). */
GPtrArray  *mv_event_log_since (MvEventLog *log, guint64 since, guint max);
/* The last sequence number given; 0 before the first event. */
guint64     mv_event_log_last_sequence (MvEventLog *log);
