/* The console bridge: see console-bridge.h. One session per WebSocket,
 * each a pump between it and a console socket (serial) or an exec's
 * terminal (login). */
#include "console-bridge.h"
#include "core/errors.h"
#include "util/soup-lib.h"

#include <errno.h>
#include <glib-unix.h>
#include <json-glib/json-glib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "config.h"

/* How often a session looks whether its machine still runs. */
#define MACHINE_CHECK_MS 500
/* The close code of the IANA registry that libsoup has no name for: the
 * session cannot be had now (its console could not be opened). */
#define CLOSE_TRY_AGAIN_LATER 1013
/* Login shells' terminals, in rows and columns, at most. */
#define TERMINAL_MAX     1000

struct _MvConsoleBridge {
  SoupServer   *server;
  MvReconciler *reconciler;
  GHashTable   *sessions;     /* id -> Session*, owned */
  guint         next_id;
  gboolean      tls;
};

typedef struct {
  MvConsoleBridge         *bridge;
  guint                    id;
  SoupWebsocketConnection *ws;
  MvConsoleGrant          *grant;
  int                      fd;          /* the console socket, or the terminal */
  int                      status_fd;   /* login: the shell's status; -1 */
  guint                    fd_source;
  guint                    status_source;
  guint                    check_timer;
  GString                 *status;
  GByteArray              *pending;     /* typed, not yet taken by the console */
  guint                    out_source;  /* waiting for the console to take more */
  guint                    rows, cols;
} Session;

static void
free_session (Session *s)
{
  g_clear_handle_id (&s->fd_source, g_source_remove);
  g_clear_handle_id (&s->status_source, g_source_remove);
  g_clear_handle_id (&s->check_timer, g_source_remove);
  g_clear_handle_id (&s->out_source, g_source_remove);
  if (s->fd >= 0)
    close (s->fd);
  /* Closing the status ends the shell, if it still runs. */
  if (s->status_fd >= 0)
    close (s->status_fd);
  if (s->grant && s->bridge->reconciler)
    mv_reconciler_console_ended (s->bridge->reconciler, s->grant);
  mv_console_grant_free (s->grant);
  if (s->status)
    g_string_free (s->status, TRUE);
  g_byte_array_unref (s->pending);
  g_signal_handlers_disconnect_by_data (s->ws, s);
  g_object_unref (s->ws);
  g_free (s);
}

/* Closes the WebSocket (once); the session goes when it is closed. */
static void
close_session (Session *s, gushort code, const char *reason)
{
  g_clear_handle_id (&s->fd_source, g_source_remove);
  g_clear_handle_id (&s->status_source, g_source_remove);
  g_clear_handle_id (&s->check_timer, g_source_remove);
  g_clear_handle_id (&s->out_source, g_source_remove);
  if (mv_soup.websocket_connection_get_state (s->ws) == SOUP_WEBSOCKET_STATE_OPEN)
    mv_soup.websocket_connection_close (s->ws, code, reason);
}

static void
on_closed (SoupWebsocketConnection *ws, gpointer data)
{
  Session *s = data;

  g_hash_table_remove (s->bridge->sessions, GUINT_TO_POINTER (s->id));
}

static gboolean
machine_runs (Session *s)
{
  MvMachine *machine = mv_reconciler_lookup (s->bridge->reconciler, s->grant->machine_id);

  return machine && machine->status->state == MV_STATE_RUNNING;
}

static gboolean
on_check_machine (gpointer data)
{
  Session *s = data;

  if (machine_runs (s))
    return G_SOURCE_CONTINUE;
  s->check_timer = 0;
  close_session (s, SOUP_WEBSOCKET_CLOSE_GOING_AWAY, "the machine stopped");
  return G_SOURCE_REMOVE;
}

static gboolean
on_fd_readable (int fd, GIOCondition cond, gpointer data)
{
  Session *s = data;
  char buf[16 * 1024];
  ssize_t n = read (fd, buf, sizeof buf);

  if (n < 0 && (errno == EINTR || errno == EAGAIN))
    return G_SOURCE_CONTINUE;
  if (n > 0)
    {
      /* What comes while the socket closes is dropped. */
      if (mv_soup.websocket_connection_get_state (s->ws) == SOUP_WEBSOCKET_STATE_OPEN)
        mv_soup.websocket_connection_send_binary (s->ws, buf, (gsize) n);
      return G_SOURCE_CONTINUE;
    }
  s->fd_source = 0;
  /* A login shell's end is told by its status, which follows; a
   * console's, by its machine's state. */
  if (s->status_fd < 0 && machine_runs (s))
    close_session (s, SOUP_WEBSOCKET_CLOSE_NORMAL, "the console ended");
  else if (s->status_fd < 0)
    close_session (s, SOUP_WEBSOCKET_CLOSE_GOING_AWAY, "the machine stopped");
  return G_SOURCE_REMOVE;
}

static gboolean
on_status_readable (int fd, GIOCondition cond, gpointer data)
{
  Session *s = data;
  char buf[256];
  ssize_t n = read (fd, buf, sizeof buf);

  if (n < 0 && (errno == EINTR || errno == EAGAIN))
    return G_SOURCE_CONTINUE;
  if (n > 0 && s->status->len < 1024)
    {
      g_string_append_len (s->status, buf, n);
      if (!strchr (s->status->str, '\n'))
        return G_SOURCE_CONTINUE;
    }
  s->status_source = 0;
  /* "exit 0", "signal 9", "error ...": a WebSocket's reason has room
   * for 123 bytes. */
  *strchrnul (s->status->str, '\n') = '\0';
  if (s->status->len > 120)
    g_string_truncate (s->status, 120);
  close_session (s, SOUP_WEBSOCKET_CLOSE_NORMAL, s->status->len ? s->status->str : "ended");
  return G_SOURCE_REMOVE;
}


static gboolean on_fd_writable (int fd, GIOCondition cond, gpointer data);

/* Gives the console what was typed, as much as it takes now; the rest
 * waits until it takes more, without holding up the main loop. */
static void
flush_input (Session *s)
{
  while (s->fd >= 0 && s->pending->len > 0)
    {
      ssize_t n = send (s->fd, s->pending->data, s->pending->len, MSG_NOSIGNAL | MSG_DONTWAIT);

      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0 && errno == EAGAIN)
        break;
      if (n < 0)
        {
          close_session (s, SOUP_WEBSOCKET_CLOSE_NORMAL, "the console ended");
          return;
        }
      g_byte_array_remove_range (s->pending, 0, (guint) n);
    }
  if (s->fd >= 0 && s->pending->len > 0 && !s->out_source)
    s->out_source = g_unix_fd_add (s->fd, G_IO_OUT, on_fd_writable, s);
}

static gboolean
on_fd_writable (int fd, GIOCondition cond, gpointer data)
{
  Session *s = data;

  s->out_source = 0;
  flush_input (s);
  return G_SOURCE_REMOVE;
}

/* What the client typed: a client that types faster than the console
 * takes it, by more than MV_CONSOLE_INPUT_PENDING_MAX_BYTES, is cut off. */
static void
take_input (Session *s, const char *bytes, gsize len)
{
  if (s->pending->len + len > MV_CONSOLE_INPUT_PENDING_MAX_BYTES)
    {
      close_session (s, SOUP_WEBSOCKET_CLOSE_TOO_BIG, "input comes faster than the console "
                     "takes it");
      return;
    }
  g_byte_array_append (s->pending, (const guint8 *) bytes, (guint) len);
  flush_input (s);
}

/* {"resize":{"rows":R,"cols":C}}: the login shell's terminal's size. */
static void
resize (Session *s, GBytes *message)
{
  g_autoptr (JsonParser) parser = json_parser_new ();
  gsize len = 0;
  const char *text = g_bytes_get_data (message, &len);
  JsonObject *size;
  gint64 rows, cols;
  g_autofree char *line = NULL;

  if (s->status_fd < 0 || !json_parser_load_from_data (parser, text, (gssize) len, NULL) ||
      !JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser)))
    return;
  size = json_object_get_object_member (json_node_get_object (json_parser_get_root (parser)),
                                        "resize");
  if (!size)
    return;
  rows = json_object_get_int_member_with_default (size, "rows", 0);
  cols = json_object_get_int_member_with_default (size, "cols", 0);
  if (rows < 1 || rows > TERMINAL_MAX || cols < 1 || cols > TERMINAL_MAX)
    return;
  line = g_strdup_printf ("resize %" G_GINT64_FORMAT " %" G_GINT64_FORMAT "\n", rows, cols);
  /* A size the session cannot take now is dropped: the next one will do. */
  (void) !send (s->status_fd, line, strlen (line), MSG_NOSIGNAL | MSG_DONTWAIT);
}

static void
on_message (SoupWebsocketConnection *ws, gint type, GBytes *message, gpointer data)
{
  Session *s = data;
  gsize len = 0;
  const char *bytes = g_bytes_get_data (message, &len);

  if (type == SOUP_WEBSOCKET_DATA_TEXT)
    {
      resize (s, message);
      return;
    }
  /* A client types as soon as it is connected: what comes before the
   * console is open waits for it. */
  take_input (s, bytes, len);
}

/* The session's console or terminal is open: its bytes flow. */
static void
pump_session (Session *s)
{
  s->fd_source = g_unix_fd_add (s->fd, G_IO_IN | G_IO_HUP | G_IO_ERR, on_fd_readable, s);
  if (s->status_fd >= 0)
    s->status_source = g_unix_fd_add (s->status_fd, G_IO_IN | G_IO_HUP | G_IO_ERR,
                                      on_status_readable, s);
  s->check_timer = g_timeout_add (MACHINE_CHECK_MS, on_check_machine, s);
  flush_input (s);
}

/* A serial session waiting for its console, by its ID: it may be
 * closed meanwhile. */
typedef struct {
  MvConsoleBridge *bridge;
  guint            id;
} Opening;

static void
on_console_opened (int fd, gboolean writer, const GError *error, gpointer data)
{
  g_autofree Opening *opening = data;
  Session *s = g_hash_table_lookup (opening->bridge->sessions, GUINT_TO_POINTER (opening->id));

  if (!s)
    {
      if (fd >= 0)
        close (fd);
      return;
    }
  if (fd < 0)
    {
      close_session (s, CLOSE_TRY_AGAIN_LATER, error->message);
      return;
    }
  s->fd = fd;
  pump_session (s);
}

static guint
size_param (GHashTable *params, const char *name, guint fallback)
{
  const char *value = params ? g_hash_table_lookup (params, name) : NULL;
  guint64 n = value ? g_ascii_strtoull (value, NULL, 10) : 0;

  return n >= 1 && n <= TERMINAL_MAX ? (guint) n : fallback;
}

static gboolean
open_login (Session *s, MvMachine *machine, GError **error)
{
  static const char *const argv[] = { "/bin/sh", "-l", NULL };
  static const char *const env[] = { "TERM=xterm-256color", NULL };
  MvRuntimeExec exec = {
    .argv = argv,
    .env = env,
    .user = s->grant->user,
    .tty = TRUE,
    .rows = s->rows,
    .columns = s->cols,
    .console_key = s->grant->secret,
  };
  int fds[4];

  if (!mv_reconciler_exec (machine, &exec, fds, error))
    return FALSE;
  s->fd = fds[0];
  close (fds[1]);
  close (fds[2]);
  s->status_fd = fds[3];
  return TRUE;
}

static void
on_websocket (SoupServer *server, SoupServerMessage *msg, const char *path,
              SoupWebsocketConnection *ws, gpointer data)
{
  MvConsoleBridge *bridge = data;
  GUri *uri = mv_soup.server_message_get_uri (msg);
  const char *query = g_uri_get_query (uri);
  g_autoptr (GHashTable) params = query ? g_uri_parse_params (query, -1, "&", G_URI_PARAMS_NONE,
                                                              NULL)
                                        : NULL;
  g_autoptr (GError) error = NULL;
  MvMachine *machine;
  Session *s;

  s = g_new0 (Session, 1);
  s->bridge = bridge;
  s->id = ++bridge->next_id;
  s->ws = g_object_ref (ws);
  s->fd = s->status_fd = -1;
  s->status = g_string_new (NULL);
  s->pending = g_byte_array_new ();
  s->rows = size_param (params, "rows", 24);
  s->cols = size_param (params, "cols", 80);
  g_hash_table_insert (bridge->sessions, GUINT_TO_POINTER (s->id), s);
  g_signal_connect (ws, "closed", G_CALLBACK (on_closed), s);
  g_signal_connect (ws, "message", G_CALLBACK (on_message), s);
  mv_soup.websocket_connection_set_max_incoming_payload_size (ws, MV_CONSOLE_MESSAGE_MAX_BYTES);

  if (!bridge->reconciler)
    {
      close_session (s, CLOSE_TRY_AGAIN_LATER, "the daemon is starting");
      return;
    }
  /* Its token is left unused. */
  if (g_hash_table_size (bridge->sessions) > MV_CONSOLE_SESSIONS_MAX)
    {
      close_session (s, CLOSE_TRY_AGAIN_LATER, "too many console sessions are open");
      return;
    }
  s->grant = mv_reconciler_take_console (bridge->reconciler,
                                         params ? g_hash_table_lookup (params, "token") : NULL,
                                         params ? g_hash_table_lookup (params, "machine") : NULL,
                                         &error);
  if (!s->grant)
    {
      g_info ("Console bridge: a session refused: %s", error->message);
      close_session (s, SOUP_WEBSOCKET_CLOSE_POLICY_VIOLATION, error->message);
      return;
    }
  machine = mv_reconciler_lookup (bridge->reconciler, s->grant->machine_id);
  g_message ("Console bridge: a %s session into machine %s",
          s->grant->mode == MV_CONSOLE_LOGIN ? "login" : "serial", machine->config->spec->name);
  if (s->grant->mode == MV_CONSOLE_LOGIN)
    {
      if (!open_login (s, machine, &error))
        close_session (s, CLOSE_TRY_AGAIN_LATER, error->message);
      else
        pump_session (s);
    }
  else
    {
      Opening *opening = g_new0 (Opening, 1);

      opening->bridge = bridge;
      opening->id = s->id;
      if (!mv_reconciler_open_console (machine, on_console_opened, opening, &error))
        {
          g_free (opening);
          close_session (s, CLOSE_TRY_AGAIN_LATER, error->message);
        }
    }
}

MvConsoleBridge *
mv_console_bridge_new (GSocketAddress *address, GTlsCertificate *certificate, GError **error)
{
  const char *failure = mv_soup_load ();
  MvConsoleBridge *bridge;

  if (failure)
    {
      mv_error_set (error, MV_ERROR_FAILED, "%s", failure);
      return NULL;
    }
  bridge = g_new0 (MvConsoleBridge, 1);
  bridge->server = mv_soup.server_new ("server-header", "microvmd/" PACKAGE_VERSION,
                                       "tls-certificate", certificate, NULL);
  bridge->tls = certificate != NULL;
  bridge->sessions = g_hash_table_new_full (NULL, NULL, NULL, (GDestroyNotify) free_session);
  mv_soup.server_add_websocket_handler (bridge->server, MV_CONSOLE_PATH, NULL, NULL, on_websocket,
                                        bridge, NULL);
  if (!mv_soup.server_listen (bridge->server, address,
                              certificate ? SOUP_SERVER_LISTEN_HTTPS : 0, error))
    {
      mv_console_bridge_free (bridge);
      return NULL;
    }
  return bridge;
}

void
mv_console_bridge_set_reconciler (MvConsoleBridge *bridge, MvReconciler *reconciler)
{
  bridge->reconciler = reconciler;
}

char *
mv_console_bridge_url (MvConsoleBridge *bridge)
{
  GSList *uris = mv_soup.server_get_uris (bridge->server);
  GUri *uri = uris ? uris->data : NULL;
  const char *host;
  char *url;

  if (!uri)
    return g_strdup ("");
  host = g_uri_get_host (uri);
  url = g_strdup_printf ("%s://%s%s%s:%d%s", bridge->tls ? "wss" : "ws",
                         strchr (host, ':') ? "[" : "", host, strchr (host, ':') ? "]" : "",
                         g_uri_get_port (uri), MV_CONSOLE_PATH);
  g_slist_free_full (uris, (GDestroyNotify) g_uri_unref);
  return url;
}

void
mv_console_bridge_free (MvConsoleBridge *bridge)
{
  if (!bridge)
    return;
  /* Sessions end first: each gives its key back while the reconciler is
   * there. */
  g_hash_table_remove_all (bridge->sessions);
  mv_soup.server_disconnect (bridge->server);
  g_object_unref (bridge->server);
  g_hash_table_unref (bridge->sessions);
  g_free (bridge);
}
