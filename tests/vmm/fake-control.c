/* The faults a test sets in a running test VMM (fake-control.h). */
#include "fake-control.h"
#include "fake-vmm.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#define DEFAULT_STALL_MS 10000

void
fake_control_init (FakeControl *control, const char *api_socket)
{
  control->dir = g_path_get_dirname (api_socket);
  control->snapshot_failed = FALSE;
}

void
fake_control_clear (FakeControl *control)
{
  g_clear_pointer (&control->dir, g_free);
}

/* The control file's words; "" when there is none. */
static char *
read_words (FakeControl *control)
{
  g_autofree char *path = g_build_filename (control->dir, FAKE_CONTROL_FILE, NULL);
  char *text = NULL;
  gsize len;
  int errnum;

  if (!fake_read_file (path, &text, &len, &errnum))
    return g_strdup ("");
  return text;
}

static void
mark (FakeControl *control, const char *name)
{
  g_autofree char *path = g_build_filename (control->dir, name, NULL);
  g_autofree char *text = g_strdup_printf ("%d %" G_GINT64_FORMAT "\n", getpid (),
                                           g_get_monotonic_time ());

  /* Whole or absent: the test only asks whether it is there. */
  g_file_set_contents (path, text, -1, NULL);
}

int
fake_control_snapshot_error (FakeControl *control)
{
  g_autofree char *words = read_words (control);

  if (!fake_cmdline_has (words, "fail-snapshot"))
    return 0;
  control->snapshot_failed = TRUE;
  return ENOSPC;
}

static void
on_stall_end (gpointer data)
{
  mark (data, FAKE_CONTROL_STALL_END);
}

void
fake_control_probe (FakeControl *control, FakeResponse *response)
{
  g_autofree char *words = NULL;
  g_autofree char *stall = NULL;
  guint64 ms = DEFAULT_STALL_MS;

  if (!control->snapshot_failed)
    return;
  words = read_words (control);
  stall = fake_cmdline_get (words, "stall-probe");
  if (!stall)
    return;
  if (*stall && !g_ascii_string_to_unsigned (stall, 10, 1, G_MAXUINT, &ms, NULL))
    ms = DEFAULT_STALL_MS;
  control->snapshot_failed = FALSE;
  mark (control, FAKE_CONTROL_STALL_BEGIN);
  fake_response_delay (response, (guint) ms, on_stall_end, control);
}

void
fake_control_request (FakeControl *control, const FakeRequest *request)
{
  g_autofree char *words = NULL;
  g_autofree char *path = NULL;
  g_autofree char *log = NULL;
  g_autoptr (GString) line = NULL;
  gsize len = 0;
  const char *body;
  int fd;

  if (!request->body)
    return;
  words = read_words (control);
  if (!fake_cmdline_has (words, "log-requests"))
    return;
  body = g_bytes_get_data (request->body, &len);
  path = fake_request_path (request);
  line = g_string_new (NULL);
  g_string_append_printf (line, "%s %s ", request->method, path);
  g_string_append_len (line, body, (gssize) len);
  g_string_append_c (line, '\n');
  log = g_build_filename (control->dir, FAKE_CONTROL_REQUEST_LOG, NULL);
  fd = open (log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0)
    return;
  fake_write_all (fd, line->str, line->len);
  close (fd);
}
