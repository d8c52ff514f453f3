/* Structured logging about a machine: every message names the machine by
 * ID (MICROVMD_MACHINE_ID) and, when one is under way, the operation and
 * its phase, so that `journalctl MICROVMD_MACHINE_ID=…` tells one
 * machine's story. Safe from any thread. */
#pragma once
#include <glib.h>

/* @operation_id and @phase may be NULL. */
void mv_log_machine (GLogLevelFlags level, const char *machine_id, const char *operation_id,
                     const char *phase, const char *format, ...) G_GNUC_PRINTF (5, 6);
void mv_log_machine_valist (GLogLevelFlags level, const char *machine_id,
                            const char *operation_id, const char *phase, const char *format,
                            va_list args) G_GNUC_PRINTF (5, 0);
/* A message of a kind the journal's catalogue knows by @message_id (32
 * hex digits, as MESSAGE_ID), with @n_extra more fields (may be 0, at
 * most 4). */
void mv_log_catalogued (GLogLevelFlags level, const char *message_id, const char *machine_id,
                        const char *operation_id, const GLogField *extra, gsize n_extra,
                        const char *format, ...) G_GNUC_PRINTF (7, 8);
/* The daemon's log writer (g_log_set_writer_func): what GLib's default
 * writer would write, for less. The journal, a terminal, a debug line, a
 * warning or worse, and a line that needs escaping go to the default
 * writer itself. A message or an info line on a file or a pipe is written
 * in the same form, without asking the stream whether it is a terminal,
 * and the time zone for the time of day, for every line. */
GLogWriterOutput mv_log_writer (GLogLevelFlags level, const GLogField *fields, gsize n_fields,
                                gpointer user_data);
