/* The remote console: a thread of its own speaks WebSocket (libsoup,
 * opened only here: soup-lib.h) to
 * the bridge, and hands the bytes to the relay of exec-relay.c through two
 * socket pairs, one for the terminal and one for the status line, as a
 * command started with Machine.Exec gives them. */
#include "config.h"
#include "remote-console.h"

#include <errno.h>
#include <glib-unix.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <glib/gi18n.h>

#include "exec-relay.h"
#include "microvmctl.h"
#include "util/soup-lib.h"

typedef struct {
  char                    *url;
  GMainContext            *context;
  GMainLoop               *loop;
  SoupWebsocketConnection *ws;
  int                      data_fd;     /* our end of the terminal's pair */
  int                      status_fd;   /* our end of the status pair */
  GString                 *commands;    /* what the relay wrote on the status */
  gboolean                 told;        /* the status line is written */
} Remote;

static void
tell (Remote *r, const char *line)
{
  g_autofree char *text = g_strdup_printf ("%s\n", line);

  if (r->told)
    return;
  r->told = TRUE;
  (void) !send (r->status_fd, text, strlen (text), MSG_NOSIGNAL);
}

static gboolean
on_data (int fd, GIOCondition cond, gpointer data)
{
  Remote *r = data;
  char buf[16 * 1024];
  ssize_t n = read (fd, buf, sizeof buf);

  if (n < 0 && (errno == EINTR || errno == EAGAIN))
    return G_SOURCE_CONTINUE;
  if (mv_soup.websocket_connection_get_state (r->ws) != SOUP_WEBSOCKET_STATE_OPEN)
    return n > 0 ? G_SOURCE_CONTINUE : G_SOURCE_REMOVE;
  if (n > 0)
    {
      mv_soup.websocket_connection_send_binary (r->ws, buf, (gsize) n);
      return G_SOURCE_CONTINUE;
    }
  /* The relay is done (the escape key): the session ends. */
  mv_soup.websocket_connection_close (r->ws, SOUP_WEBSOCKET_CLOSE_NORMAL, NULL);
  return G_SOURCE_REMOVE;
}

/* "resize ROWS COLS" from the relay becomes the bridge's message. */
static gboolean
on_status (int fd, GIOCondition cond, gpointer data)
{
  Remote *r = data;
  char buf[256];
  ssize_t n = read (fd, buf, sizeof buf);
  char *newline;

  if (n < 0 && (errno == EINTR || errno == EAGAIN))
    return G_SOURCE_CONTINUE;
  if (n <= 0)
    return G_SOURCE_REMOVE;
  g_string_append_len (r->commands, buf, n);
  while ((newline = strchr (r->commands->str, '\n')))
    {
      guint rows, cols;

      *newline = '\0';
      if (sscanf (r->commands->str, "resize %u %u", &rows, &cols) == 2)
        {
          g_autofree char *message = g_strdup_printf ("{\"resize\":{\"rows\":%u,\"cols\":%u}}",
                                                      rows, cols);
          if (mv_soup.websocket_connection_get_state (r->ws) == SOUP_WEBSOCKET_STATE_OPEN)
            mv_soup.websocket_connection_send_text (r->ws, message);
        }
      g_string_erase (r->commands, 0, newline - r->commands->str + 1);
    }
  if (r->commands->len > 256)
    g_string_truncate (r->commands, 0);
  return G_SOURCE_CONTINUE;
}

static void
on_message (SoupWebsocketConnection *ws, gint type, GBytes *message, gpointer data)
{
  Remote *r = data;
  gsize len = 0;
  const char *bytes = g_bytes_get_data (message, &len);

  if (type != SOUP_WEBSOCKET_DATA_BINARY)
    return;
  while (len > 0)
    {
      ssize_t n = send (r->data_fd, bytes, len, MSG_NOSIGNAL);

      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        return;
      bytes += n;
      len -= (gsize) n;
    }
}

static void
on_closed (SoupWebsocketConnection *ws, gpointer data)
{
  Remote *r = data;
  gushort code = mv_soup.websocket_connection_get_close_code (ws);
  const char *reason = mv_soup.websocket_connection_get_close_data (ws);
  g_autofree char *line = NULL;

  /* A login shell's end is its status; a console's end is a clean one. */
  if (code == SOUP_WEBSOCKET_CLOSE_NORMAL && reason &&
      (g_str_has_prefix (reason, "exit ") || g_str_has_prefix (reason, "signal ") ||
       g_str_has_prefix (reason, "error ")))
    line = g_strdup (reason);
  else if (code == SOUP_WEBSOCKET_CLOSE_NORMAL || code == SOUP_WEBSOCKET_CLOSE_NO_STATUS)
    line = g_strdup ("exit 0");
  else
    line = g_strdup_printf ("error the console bridge closed the session (%u): %s", code,
                            reason && *reason ? reason : "no reason given");
  tell (r, line);
  g_main_loop_quit (r->loop);
}

static void
watch (Remote *r, int fd, GUnixFDSourceFunc func)
{
  g_autoptr (GSource) source = g_unix_fd_source_new (fd, G_IO_IN | G_IO_HUP | G_IO_ERR);

  g_source_set_callback (source, (GSourceFunc) (void (*) (void)) func, r, NULL);
  g_source_attach (source, r->context);
}

static void
on_connected (GObject *source, GAsyncResult *result, gpointer data)
{
  Remote *r = data;
  g_autoptr (GError) error = NULL;

  r->ws = mv_soup.session_websocket_connect_finish ((SoupSession *) source, result, &error);
  if (!r->ws)
    {
      g_autofree char *line = g_strdup_printf ("error %s: %s", r->url, error->message);

      tell (r, line);
      g_main_loop_quit (r->loop);
      return;
    }
  g_signal_connect (r->ws, "message", G_CALLBACK (on_message), r);
  g_signal_connect (r->ws, "closed", G_CALLBACK (on_closed), r);
  watch (r, r->data_fd, on_data);
  watch (r, r->status_fd, on_status);
}

static gpointer
run (gpointer data)
{
  Remote *r = data;
  g_autoptr (SoupSession) session = NULL;
  g_autoptr (SoupMessage) message = NULL;

  g_main_context_push_thread_default (r->context);
  session = mv_soup.session_new_with_options ("user-agent", "microvmctl/" PACKAGE_VERSION, NULL);
  message = mv_soup.message_new ("GET", r->url);
  if (!message)
    tell (r, "error the console bridge's URL is not one");
  else
    {
      mv_soup.session_websocket_connect_async (session, message, NULL, NULL, G_PRIORITY_DEFAULT,
                                                  NULL, on_connected, r);
      g_main_loop_run (r->loop);
    }
  g_clear_object (&r->ws);
  g_main_context_pop_thread_default (r->context);
  /* The relay reads the end of both. */
  close (r->data_fd);
  close (r->status_fd);
  return NULL;
}

int
mv_remote_console (const char *url, const char *token, gboolean raw_terminal, char escape)
{
  Remote r = { 0 };
  int data[2], status[2], exit_code;
  g_autofree char *escaped = g_uri_escape_string (token, NULL, FALSE);
  struct winsize ws;
  const char *failure;
  GThread *thread;

  if (!g_str_has_prefix (url, "ws://") && !g_str_has_prefix (url, "wss://"))
    return mv_usage_error (_("--remote: %s is not a ws:// or wss:// URL"), url);
  if ((failure = mv_soup_load ()))
    return mv_fail (_("Failed to open the console: %s"), failure);
  if (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, data) < 0 ||
      socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, status) < 0)
    return mv_fail (_("Failed to open the console: %s"), g_strerror (errno));
  if (raw_terminal && ioctl (STDIN_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row && ws.ws_col)
    r.url = g_strdup_printf ("%s%stoken=%s&rows=%u&cols=%u", url, strchr (url, '?') ? "&" : "?",
                             escaped, ws.ws_row, ws.ws_col);
  else
    r.url = g_strdup_printf ("%s%stoken=%s", url, strchr (url, '?') ? "&" : "?", escaped);
  r.context = g_main_context_new ();
  r.loop = g_main_loop_new (r.context, FALSE);
  r.commands = g_string_new (NULL);
  r.data_fd = data[1];
  r.status_fd = status[1];
  thread = g_thread_new ("remote-console", run, &r);

  {
    MvExecFds fds = { data[0], dup (data[0]), -1, status[0] };

    exit_code = mv_remote_relay (&fds, raw_terminal, escape);
  }
  /* The escape key: the thread sees the end of our side and closes. */
  g_thread_join (thread);
  g_main_loop_unref (r.loop);
  g_main_context_unref (r.context);
  g_string_free (r.commands, TRUE);
  g_free (r.url);
  return exit_code;
}
