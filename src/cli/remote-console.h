/* microvmctl console --remote: a session of the console bridge
 * (Machine.RequestConsole's token at the Manager's ConsoleURL), relayed
 * to our terminal as a local console is. */
#pragma once

#include <glib.h>

/* Opens @token's session at @url and relays it until it ends or @escape
 * is typed; the exit status: a login shell's, 0 when a serial console
 * ends, 1 (having said why) when the bridge refuses or fails. */
int mv_remote_console (const char *url, const char *token, gboolean raw_terminal, char escape);
