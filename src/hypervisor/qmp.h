/* A small synchronous QMP client: one connection to a QEMU monitor socket,
 * one command at a time, events kept aside for whoever wants them. */
#pragma once
#include <glib.h>
#include <json-glib/json-glib.h>

/* QEMU's messages to the daemon (the greeting, replies to the queries it
 * makes, events) are a few KiB and a handful of levels deep; a line
 * longer than this is a broken monitor. */
#define MV_QMP_MESSAGE_MAX_BYTES  (1024 * 1024)
#define MV_QMP_JSON_MAX_DEPTH     16

typedef struct _MvQmp MvQmp;

/* Connects, reads the greeting and leaves capabilities negotiation mode.
 * MV_ERROR_UNAVAILABLE if nothing serves on @socket_path. */
MvQmp      *mv_qmp_connect (const char *socket_path, guint timeout_ms, GError **error);
void        mv_qmp_free (MvQmp *qmp);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (MvQmp, mv_qmp_free)

/* The QEMU version from the greeting, "7.2.22". */
const char *mv_qmp_version (MvQmp *qmp);

/* Runs @command with @arguments (may be NULL) and returns what it
 * returned. A QMP error is MV_ERROR_FAILED quoting its class and text;
 * end of stream or no reply within @timeout_ms is MV_ERROR_UNAVAILABLE.
 * Events that arrive meanwhile are kept. */
JsonNode   *mv_qmp_execute (MvQmp *qmp, const char *command, JsonObject *arguments,
                            guint timeout_ms, GError **error);

/* The same, passing @fd along (SCM_RIGHTS), as getfd and add-fd want. */
JsonNode   *mv_qmp_execute_with_fd (MvQmp *qmp, const char *command, JsonObject *arguments,
                                    int fd, guint timeout_ms, GError **error);

/* Events received so far, oldest first (JsonObject*); the caller owns
 * the array. */
GPtrArray  *mv_qmp_take_events (MvQmp *qmp);

/* Parses one line a QMP server sent, strictly and within the limits
 * above; NULL if it is not a JSON object. */
JsonObject *mv_qmp_parse_line (const char *line, gsize length);
