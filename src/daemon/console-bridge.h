/* The console bridge (seed 004): a WebSocket endpoint, /console, served
 * by libsoup on the main loop from microvmd.conf's [console] listen, that
 * turns a token of Machine.RequestConsole into a session of the guest's
 * serial console or of a login shell in it. The Manager's ConsoleURL
 * (introspection/org.microvmd1.Manager.xml) says what a client sends and
 * receives. */
#pragma once
#include "reconcile/reconciler.h"

#include <gio/gio.h>

#define MV_CONSOLE_DEFAULT_LISTEN        "127.0.0.1:9478"
#define MV_CONSOLE_PATH                  "/console"
#define MV_CONSOLE_TOKEN_SECONDS_DEFAULT 60
#define MV_CONSOLE_TOKEN_SECONDS_MAX     3600
/* Sessions open at once, at most; one more is told to try again later. */
#define MV_CONSOLE_SESSIONS_MAX          256
/* A client's message, at most: a terminal's keystrokes, or a paste. */
#define MV_CONSOLE_MESSAGE_MAX_BYTES     (64 * 1024)
/* What a session holds of what its client typed and its console has not
 * taken yet, at most (a console takes what its guest reads). */
#define MV_CONSOLE_INPUT_PENDING_MAX_BYTES (256 * 1024)

typedef struct _MvConsoleBridge MvConsoleBridge;

/* Listens on @address, with TLS if @certificate is given. */
MvConsoleBridge *mv_console_bridge_new (GSocketAddress *address, GTlsCertificate *certificate,
                                        GError **error);
/* Sessions are opened from @reconciler's tokens from now on; before,
 * a client is told to try again. */
void             mv_console_bridge_set_reconciler (MvConsoleBridge *bridge,
                                                   MvReconciler *reconciler);
/* "ws://127.0.0.1:9478/console", as a client reaches it. */
char            *mv_console_bridge_url (MvConsoleBridge *bridge);
/* Ends every session, then stops listening. */
void             mv_console_bridge_free (MvConsoleBridge *bridge);
