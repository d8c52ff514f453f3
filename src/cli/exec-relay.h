/* Relays a command started with Machine.Exec, or a console opened with
 * Machine.OpenConsole: our standard input to its input, its output (and
 * error output) to ours, until it has ended. */
#pragma once

#include <glib.h>

typedef struct {
  int stdin_fd;    /* its input; closed at the end of ours */
  int stdout_fd;   /* with a tty, the same socket as stdin_fd */
  int stderr_fd;   /* -1 with a tty */
  int status_fd;   /* its one status line */
} MvExecFds;

/* Takes the descriptors in FDS and closes them. With RAW_TERMINAL, our
 * terminal is put in raw mode meanwhile, so that keys reach the command
 * as they are typed. Whatever ends the relay (the command's end, or
 * SIGINT, SIGTERM, SIGHUP or SIGQUIT, which are then raised again), the
 * terminal and the flags of our standard descriptors are restored.
 * Returns the exit status for the command's status line, having printed
 * what went wrong. */
int mv_exec_relay (const MvExecFds *fds, gboolean raw_terminal);

/* The same for the socket of Machine.OpenConsole (taken and closed),
 * until the console ends or @escape is typed (what came before it is
 * passed on). A read-only console's refusal of input is noted once on
 * stderr; its output goes on. Returns 0, having restored the terminal. */
int mv_console_relay (int console_fd, gboolean raw_terminal, char escape);

/* The same for a remote console (remote-console.c): FDS as for a command,
 * until it ends or @escape is typed. SIGWINCH writes "resize ROWS COLS"
 * on its status (as for a command's terminal, which then takes the new
 * size). */
int mv_remote_relay (const MvExecFds *fds, gboolean raw_terminal, char escape);
