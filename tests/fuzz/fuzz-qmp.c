/* What QEMU's monitor sends, through the QMP client: the input is the
 * whole stream a server writes on a connection (greeting, replies and
 * events, one JSON object a line), served on a Unix socket by a thread
 * that then ends the stream. The client connects, negotiates and runs the
 * commands the QEMU backend runs, one of them passing a descriptor, until
 * the stream fails it. */
#include "fuzz-common.h"
#include "hypervisor/qmp.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define TIMEOUT_MS 2000

static char *socket_dir;
static char *socket_path;
static int listener = -1;

typedef struct {
  const uint8_t *data;
  size_t         size;
} Stream;

static void
remove_socket (void)
{
  unlink (socket_path);
  rmdir (socket_dir);
}

int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
  g_autoptr (GError) error = NULL;
  struct sockaddr_un addr = { .sun_family = AF_UNIX };

  mv_fuzz_init ();
  socket_dir = g_dir_make_tmp ("fuzz-qmp-XXXXXX", &error);
  g_assert_no_error (error);
  socket_path = g_build_filename (socket_dir, "qmp.sock", NULL);
  g_strlcpy (addr.sun_path, socket_path, sizeof addr.sun_path);
  listener = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listener < 0 || bind (listener, (struct sockaddr *) &addr, sizeof addr) < 0 ||
      listen (listener, 4) < 0)
    mv_fuzz_fail ("cannot serve on %s: %s", socket_path, g_strerror (errno));
  atexit (remove_socket);
  return 0;
}

/* The server's side: everything at once, the end of the stream, and then
 * whatever the client sends is read and dropped until it hangs up. */
static gpointer
serve (gpointer user_data)
{
  const Stream *stream = user_data;
  int fd = accept4 (listener, NULL, NULL, SOCK_CLOEXEC);
  char sink[4096];
  size_t done = 0;

  if (fd < 0)
    return NULL;
  while (done < stream->size)
    {
      ssize_t n = send (fd, stream->data + done, stream->size - done, MSG_NOSIGNAL);

      if (n <= 0)
        break;
      done += n;
    }
  shutdown (fd, SHUT_WR);
  while (read (fd, sink, sizeof sink) > 0)
    ;
  close (fd);
  return NULL;
}

/* json-glib 1.6 leaks on some lines (fuzz-common.h). */
static gboolean
has_leaking_line (const uint8_t *data, size_t size)
{
  const char *p = (const char *) data, *end = p + size;

  while (p < end)
    {
      const char *newline = memchr (p, '\n', end - p);
      const char *stop = newline ? newline : end;

      if (mv_fuzz_json_glib_leaks (p, stop - p))
        return TRUE;
      p = stop + 1;
    }
  return FALSE;
}

static void
check_reply (JsonNode *ret, const GError *error, const char *command)
{
  if (!ret && !error)
    mv_fuzz_fail ("%s failed without saying why", command);
  if (ret && error)
    mv_fuzz_fail ("%s returned and failed", command);
}

static void
talk (MvQmp *qmp)
{
  static const char *const commands[] = { "query-status", "stop", "cont", "query-migrate" };
  g_autoptr (JsonObject) arguments = json_object_new ();
  g_autoptr (GPtrArray) events = NULL;
  int fd;

  for (guint i = 0; i < G_N_ELEMENTS (commands); i++)
    {
      g_autoptr (GError) error = NULL;
      g_autoptr (JsonNode) ret = mv_qmp_execute (qmp, commands[i], NULL, TIMEOUT_MS, &error);

      check_reply (ret, error, commands[i]);
      if (!ret)
        return;
    }

  /* getfd, as a migration to a file starts. */
  fd = open ("/dev/null", O_RDONLY | O_CLOEXEC);
  json_object_set_string_member (arguments, "fdname", "migration");
  {
    g_autoptr (GError) error = NULL;
    g_autoptr (JsonNode) ret = mv_qmp_execute_with_fd (qmp, "getfd", arguments, fd, TIMEOUT_MS,
                                                       &error);

    check_reply (ret, error, "getfd");
  }
  close (fd);

  events = mv_qmp_take_events (qmp);
  for (guint i = 0; i < events->len; i++)
    if (!json_object_has_member (events->pdata[i], "event"))
      mv_fuzz_fail ("an event without its name was kept");
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  Stream stream = { data, size };
  g_autoptr (GError) error = NULL;
  g_autoptr (MvQmp) qmp = NULL;
  GThread *server;

  if (has_leaking_line (data, size))
    return -1;
  server = g_thread_new ("qmp-server", serve, &stream);
  qmp = mv_qmp_connect (socket_path, TIMEOUT_MS, &error);
  if (qmp)
    talk (qmp);
  else if (!error)
    mv_fuzz_fail ("connecting failed without saying why");
  /* The server thread reads until the client hangs up. */
  g_clear_pointer (&qmp, mv_qmp_free);
  g_thread_join (server);
  return 0;
}
