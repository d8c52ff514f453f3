/* The guest's serial console, held by the VMM's parent (process.c) for as
 * long as the VMM lives, so that, like the VMM, it outlives the daemon:
 * nothing the guest prints is lost while the daemon is down.
 *
 * The VMM's stdin and stdout are one end of a socket pair; the holder has
 * the other. Everything the guest prints is appended to the console's log
 * and copied to every attached client; what the one writing client sends
 * goes to the guest. Clients attach through a Unix socket beside the log
 * (MV_CONSOLE_SOCKET_NAME) that only root can reach: the daemon connects,
 * asks with one byte, learns with one byte what it got, and hands the
 * connection on to its caller, who then reads and writes it directly.
 *
 *   asked     'w'  to type as well as read     'r'  to read only
 *   answered  'w'  the one writer              'r'  a reader: its writes
 *                                                   fail with EPIPE
 *             'f'  refused: MV_CONSOLE_CLIENTS_MAX are attached
 *
 * A writer that shuts down its sending side goes on reading, and another
 * client may type. A client that does not keep up (MV_CONSOLE_LAG_BYTES unread) is
 * dropped, so that neither the guest nor the other clients wait on it. */
#pragma once
#include "names.h"
#include <glib.h>

#define MV_CONSOLE_CLIENTS_MAX  16
#define MV_CONSOLE_LAG_BYTES    (256 * 1024)

typedef struct {
  int vmm_end;     /* the VMM's stdin and stdout */
  int held_end;    /* the holder's end of the same pair */
  int log;         /* the console's log, appended to */
  int listener;    /* MV_CONSOLE_SOCKET_NAME, listening */
} MvConsoleFds;

#define MV_CONSOLE_FDS_INIT { -1, -1, -1, -1 }

/* The socket beside @log_path through which clients attach. */
char     *mv_console_socket_path (const char *log_path);

/* Opens the log (created 0600 if missing, never through a link), the
 * socket pair and the listening socket, every descriptor above stdio and
 * close-on-exec. */
gboolean  mv_console_open (MvConsoleFds *fds, const char *log_path, GError **error);
/* Closes what is open (idempotent). */
void      mv_console_close (MvConsoleFds *fds);

/* In the VMM's parent, once the VMM runs (it has the VMM's end; this
 * process closes its own copy): serves the console until @pidfd, the
 * VMM's, says it ended, then takes what it printed last and returns.
 * With @pidfd -1, until the VMM closes its end. Async-signal-safe: this
 * runs in a fork of a threaded process, without allocating. */
void      mv_console_hold (MvConsoleFds *fds, int pidfd);

/* Attaches to the console held beside @log_path: a connected socket that
 * reads what the guest prints from now on and, if *@writer came back
 * TRUE, types into it. @want_writer FALSE asks to read only.
 * MV_ERROR_UNSUPPORTED if no holder was ever started there (a VMM started
 * without one), MV_ERROR_INVALID_STATE if it has ended,
 * MV_ERROR_RESOURCE_EXHAUSTED if it holds its most clients already. */
int       mv_console_attach (const char *log_path, gboolean want_writer, gboolean *writer,
                             GError **error);
