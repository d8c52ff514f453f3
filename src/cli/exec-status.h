/* The status line of Machine.Exec (introspection/org.microvmd1.Machine.xml):
 * "exit N", "signal N" or "error TEXT", and the exit status microvmctl
 * passes on for each. */
#pragma once

#include <glib.h>

/* The longest status line accepted; the real ones are far shorter. */
#define MV_EXEC_STATUS_MAX_LINE 4096

/* What microvmctl exits with when the command did not end on its own. */
#define MV_EXIT_EXEC_ERROR 255

typedef enum {
  MV_EXEC_STATUS_EXIT,     /* the command exited with code */
  MV_EXEC_STATUS_SIGNAL,   /* a signal, number code, ended it */
  MV_EXEC_STATUS_ERROR,    /* it was lost: error says why */
} MvExecStatusKind;

typedef struct {
  MvExecStatusKind kind;
  int code;
  char *error;
} MvExecStatus;

/* Parses LINE of LENGTH bytes, without its newline. Returns FALSE for
 * anything but the three forms: an exit code above 255, a signal outside
 * 1 to 127, signs, blanks around numbers, an empty error text, NUL or
 * control characters, text that is not UTF-8. */
gboolean mv_exec_status_parse (const char *line, gsize length, MvExecStatus *status);

void mv_exec_status_clear (MvExecStatus *status);

/* "exit N" → N, "signal N" → 128 + N, as a shell reports them;
 * "error TEXT" → MV_EXIT_EXEC_ERROR. */
int mv_exec_status_exit_code (const MvExecStatus *status);

G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (MvExecStatus, mv_exec_status_clear)
