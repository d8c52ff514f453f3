/* Machine.StreamLogs: the log's files are opened, and where its last lines
 * start found, in a worker thread; then the main loop copies them into a
 * non-blocking socket a chunk at a time, and only as fast as the reader
 * takes them. A reader that falls too far behind, or takes nothing for a
 * minute, is dropped with a note; the daemon and the guest never wait on
 * it. A log rotated while it is read (store/log-rotation.h) is followed
 * into its rotated copy, which holds the old file's bytes at the same
 * offsets. */
#include "machine-logs.h"
#include "core/errors.h"
#include "names.h"

#include <errno.h>
#include <fcntl.h>
#include <gio/gio.h>
#include <glib-unix.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

/* What one read from a file and one send hold at most. */
#define CHUNK_BYTES       (32 * 1024)
/* How often a followed log is looked at for new output and the run for
 * its end. */
#define FOLLOW_TICK_MS    200
/* Output written since the stream began that a reader may leave unread. */
#define LAG_MAX_BYTES     (G_GINT64_CONSTANT (1) << 20)
/* How long a reader may take nothing while something waits for it. */
#define STALL_USEC        (60 * G_USEC_PER_SEC)
/* How long the note of a dropped stream waits for its reader. */
#define NOTE_USEC         (5 * G_USEC_PER_SEC)

static const struct {
  const char *name;
  const char *file;
  gboolean    agent;      /* written from what the guest's agent sends */
} sources[] = {
  { "console", MV_CONSOLE_LOG_NAME, FALSE },
  { "vmm", MV_VMM_LOG_NAME, FALSE },
  /* The agent copies the workload's stdout and stderr to the console and
   * sends them to the daemon (agent/output.c, hypervisor/runtime-guest.c). */
  { "workload", MV_WORKLOAD_LOG_NAME, TRUE },
};

typedef struct {
  MvBusService *service;
  char         *machine_id;
  char         *path;          /* the log */
  char         *rotated_path;  /* its rotated copy */
  int           sock;          /* the daemon's end, non-blocking */
  int           file_fd;       /* the log, -1 until it is there */
  goffset       offset;        /* next byte of it to send */
  goffset       initial_end;   /* its size when the stream began */
  int           rotated_fd;    /* a rotated copy being sent first, or -1 */
  goffset       rotated_offset, rotated_end;
  char         *chunk;         /* CHUNK_BYTES: read, not yet sent */
  gsize         chunk_start, chunk_end;
  gboolean      follow;        /* new output goes on being sent */
  gint64        started_at;    /* the run followed */
  gboolean      dropping;      /* only the note is left to send */
  gint64        progress_at;   /* monotonic µs: last byte the reader took */
  gint64        drop_deadline;
  guint         tick_id, out_id, hup_id;
} LogStream;

static GList *streams;
static guint n_streams;

static void
stream_close (LogStream *stream)
{
  g_clear_handle_id (&stream->tick_id, g_source_remove);
  g_clear_handle_id (&stream->out_id, g_source_remove);
  g_clear_handle_id (&stream->hup_id, g_source_remove);
  if (stream->file_fd >= 0)
    close (stream->file_fd);
  if (stream->rotated_fd >= 0)
    close (stream->rotated_fd);
  close (stream->sock);
  streams = g_list_remove (streams, stream);
  n_streams--;
  g_free (stream->chunk);
  g_free (stream->machine_id);
  g_free (stream->path);
  g_free (stream->rotated_path);
  g_free (stream);
}

void
mv_machine_logs_close_all (void)
{
  while (streams)
    stream_close (streams->data);
}

/* A regular file at @path (not a link the VMM's user may have put there),
 * or -1. */
static int
open_log (const char *path, goffset *size)
{
  int fd = open (path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  struct stat st;

  if (fd < 0)
    return -1;
  if (fstat (fd, &st) < 0 || !S_ISREG (st.st_mode))
    {
      close (fd);
      return -1;
    }
  *size = st.st_size;
  return fd;
}

static goffset
file_size (int fd)
{
  struct stat st;

  return fstat (fd, &st) < 0 ? 0 : st.st_size;
}

/* Whether the machine's run that the stream follows goes on. */
static gboolean
run_goes_on (LogStream *stream)
{
  MvMachine *machine = mv_reconciler_lookup (mv_bus_service_reconciler (stream->service),
                                             stream->machine_id);
  MvState state;

  if (!machine || machine->gone)
    return FALSE;
  state = machine->status->state;
  if (state != MV_STATE_STARTING && state != MV_STATE_RUNNING && state != MV_STATE_PAUSED &&
      state != MV_STATE_STOPPING)
    return FALSE;
  /* Followed from before the run had a start time: this run is the one. */
  if (stream->started_at == 0)
    stream->started_at = machine->status->started_at;
  return machine->status->started_at == stream->started_at;
}

static void
stream_drop (LogStream *stream, const char *why)
{
  g_autofree char *note = g_strdup_printf ("\n[microvmd: log stream dropped: %s]\n", why);
  gsize length = MIN (strlen (note), CHUNK_BYTES);

  g_debug ("Logs: stream of %s dropped: %s", stream->machine_id, why);
  memcpy (stream->chunk, note, length);
  stream->chunk_start = 0;
  stream->chunk_end = length;
  stream->dropping = TRUE;
  stream->follow = FALSE;
  stream->drop_deadline = g_get_monotonic_time () + NOTE_USEC;
}

/* Reads the next chunk into the empty buffer; FALSE if there is nothing
 * to read now. */
static gboolean
fill_chunk (LogStream *stream)
{
  ssize_t n;

  if (stream->rotated_fd >= 0)
    {
      n = pread (stream->rotated_fd, stream->chunk,
                 MIN (CHUNK_BYTES, stream->rotated_end - stream->rotated_offset),
                 stream->rotated_offset);
      if (n > 0)
        {
          stream->rotated_offset += n;
          stream->chunk_start = 0;
          stream->chunk_end = (gsize) n;
          return TRUE;
        }
      /* Its end, or it cannot be read: on to the log itself. */
      close (stream->rotated_fd);
      stream->rotated_fd = -1;
    }
  if (stream->file_fd < 0)
    {
      goffset size = 0;

      if (!stream->follow)
        return FALSE;
      /* The run had not written it yet when the stream began. */
      stream->file_fd = open_log (stream->path, &size);
      if (stream->file_fd < 0)
        return FALSE;
      stream->offset = 0;
      stream->initial_end = 0;
    }
  n = pread (stream->file_fd, stream->chunk, CHUNK_BYTES, stream->offset);
  if (n > 0)
    {
      stream->offset += n;
      stream->chunk_start = 0;
      stream->chunk_end = (gsize) n;
      return TRUE;
    }
  if (n == 0 && file_size (stream->file_fd) < stream->offset)
    {
      /* Rotated: what was left of the old file is in the rotated copy at
       * the same offsets (unless it was rotated twice meanwhile). */
      goffset size = 0;
      int fd = open_log (stream->rotated_path, &size);

      if (fd >= 0 && size > stream->offset)
        {
          stream->rotated_fd = fd;
          stream->rotated_offset = stream->offset;
          stream->rotated_end = size;
        }
      else if (fd >= 0)
        close (fd);
      stream->offset = 0;
      stream->initial_end = 0;
      return fill_chunk (stream);
    }
  return FALSE;
}

static gboolean on_writable (gint fd, GIOCondition condition, gpointer user_data);

/* Sends what can be sent now; FALSE once the stream is closed. */
static gboolean
pump (LogStream *stream)
{
  for (;;)
    {
      ssize_t n;

      if (stream->chunk_start == stream->chunk_end &&
          (stream->dropping || !fill_chunk (stream)))
        {
          /* Everything there is was sent. */
          if (stream->follow)
            return TRUE;
          stream_close (stream);
          return FALSE;
        }
      n = send (stream->sock, stream->chunk + stream->chunk_start,
                stream->chunk_end - stream->chunk_start, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0 && errno == EAGAIN)
        {
          if (stream->out_id == 0)
            stream->out_id = g_unix_fd_add (stream->sock, G_IO_OUT, on_writable, stream);
          return TRUE;
        }
      if (n < 0)
        {
          /* The reader is gone. */
          stream_close (stream);
          return FALSE;
        }
      stream->chunk_start += (gsize) n;
      stream->progress_at = g_get_monotonic_time ();
    }
}

static gboolean
on_writable (gint fd, GIOCondition condition, gpointer user_data)
{
  LogStream *stream = user_data;

  stream->out_id = 0;
  pump (stream);
  return G_SOURCE_REMOVE;
}

static gboolean
on_hangup (gint fd, GIOCondition condition, gpointer user_data)
{
  LogStream *stream = user_data;

  stream->hup_id = 0;
  stream_close (stream);
  return G_SOURCE_REMOVE;
}

static gboolean
on_tick (gpointer user_data)
{
  LogStream *stream = user_data;
  gint64 now = g_get_monotonic_time ();
  gboolean waiting = stream->chunk_start < stream->chunk_end;

  if (stream->dropping)
    {
      if (now >= stream->drop_deadline)
        {
          stream->tick_id = 0;
          stream_close (stream);
          return G_SOURCE_REMOVE;
        }
      return G_SOURCE_CONTINUE;
    }
  if (waiting && now - stream->progress_at > STALL_USEC)
    stream_drop (stream, "the reader took nothing for 60 seconds");
  else if (stream->follow && stream->file_fd >= 0 &&
           file_size (stream->file_fd) - MAX (stream->offset, stream->initial_end) > LAG_MAX_BYTES)
    stream_drop (stream, "the reader fell more than 1 MiB behind the log");
  else if (stream->follow && !run_goes_on (stream))
    /* What the run wrote last goes out, then the stream ends. */
    stream->follow = FALSE;
  if (!waiting || stream->dropping)
    {
      /* pump() may close the stream, and with it this timer. */
      guint id = stream->tick_id;

      stream->tick_id = 0;
      if (!pump (stream))
        return G_SOURCE_REMOVE;
      stream->tick_id = id;
    }
  return G_SOURCE_CONTINUE;
}

/* ---- opening, in a worker thread ---- */

typedef struct {
  char    *path, *rotated_path;
  guint    tail_lines;
  /* Results. */
  int      file_fd, rotated_fd;
  goffset  file_start, file_size, rotated_start, rotated_size;
} OpenJob;

static void
open_job_free (OpenJob *job)
{
  if (job->file_fd >= 0)
    close (job->file_fd);
  if (job->rotated_fd >= 0)
    close (job->rotated_fd);
  g_free (job->path);
  g_free (job->rotated_path);
  g_free (job);
}

/* Walks @fd's first @size bytes backwards for where the last *@lines
 * lines start, counting on from what later files had (*@lines left,
 * *@seen: whether a byte was met at all, so that the log's last newline
 * ends its last line rather than starting another). TRUE with *@start
 * once found. */
static gboolean
find_tail (int fd, goffset size, guint *lines, gboolean *seen, goffset *start)
{
  g_autofree char *buffer = g_malloc (CHUNK_BYTES);
  goffset end = size;

  while (end > 0)
    {
      goffset from = MAX (end - CHUNK_BYTES, 0);
      ssize_t n = pread (fd, buffer, (gsize) (end - from), from);

      if (n <= 0)
        break;
      for (ssize_t i = n - 1; i >= 0; i--)
        {
          if (buffer[i] == '\n' && *seen && --*lines == 0)
            {
              *start = from + i + 1;
              return TRUE;
            }
          *seen = TRUE;
        }
      end = from;
    }
  return FALSE;
}

static void
open_thread (GTask *task, gpointer source, gpointer task_data, GCancellable *cancellable)
{
  OpenJob *job = task_data;
  guint lines = job->tail_lines;
  gboolean seen = FALSE;

  job->file_fd = open_log (job->path, &job->file_size);
  job->rotated_fd = open_log (job->rotated_path, &job->rotated_size);
  job->file_start = 0;
  job->rotated_start = 0;
  if (lines > 0 && job->file_fd >= 0 &&
      find_tail (job->file_fd, job->file_size, &lines, &seen, &job->file_start))
    {
      /* All of it is in the log itself. */
      if (job->rotated_fd >= 0)
        close (g_steal_fd (&job->rotated_fd));
    }
  else if (lines > 0 && job->rotated_fd >= 0)
    find_tail (job->rotated_fd, job->rotated_size, &lines, &seen, &job->rotated_start);
  g_task_return_boolean (task, TRUE);
}

typedef struct {
  MvBusService   *service;
  char           *machine_id;
  sd_bus_message *call;
  gboolean        follow;
} OpenCall;

static void
open_call_free (OpenCall *open_call)
{
  sd_bus_message_unref (open_call->call);
  g_free (open_call->machine_id);
  g_free (open_call);
}

static void
open_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  OpenCall *open_call = user_data;
  OpenJob *job = g_task_get_task_data (G_TASK (result));
  LogStream *stream;
  int pair[2];
  int r;

  if (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) < 0)
    {
      sd_bus_reply_method_errorf (open_call->call, MV_BUS_ERROR_FAILED,
                                  "Could not make the log's socket: %s", g_strerror (errno));
      open_call_free (open_call);
      return;
    }
  /* The caller's end only reads; the daemon's only writes. */
  shutdown (pair[0], SHUT_WR);
  shutdown (pair[1], SHUT_RD);
  r = sd_bus_reply_method_return (open_call->call, "h", pair[0]);
  close (pair[0]);
  if (r < 0)
    {
      close (pair[1]);
      open_call_free (open_call);
      return;
    }

  stream = g_new0 (LogStream, 1);
  stream->service = open_call->service;
  stream->machine_id = g_strdup (open_call->machine_id);
  stream->path = g_strdup (job->path);
  stream->rotated_path = g_strdup (job->rotated_path);
  stream->sock = pair[1];
  stream->file_fd = g_steal_fd (&job->file_fd);
  stream->offset = job->file_start;
  stream->initial_end = job->file_size;
  stream->rotated_fd = g_steal_fd (&job->rotated_fd);
  stream->rotated_offset = job->rotated_start;
  stream->rotated_end = job->rotated_size;
  stream->chunk = g_malloc (CHUNK_BYTES);
  stream->follow = open_call->follow;
  stream->progress_at = g_get_monotonic_time ();
  streams = g_list_prepend (streams, stream);
  n_streams++;
  open_call_free (open_call);

  /* A machine stopped (or gone) while the files were opened is not
   * followed. */
  if (stream->follow && !run_goes_on (stream))
    stream->follow = FALSE;
  stream->hup_id = g_unix_fd_add (stream->sock, G_IO_HUP | G_IO_ERR, on_hangup, stream);
  stream->tick_id = g_timeout_add (FOLLOW_TICK_MS, on_tick, stream);
  pump (stream);
}

/* 0, or a negative errno with @error set. A guest without microvmd's
 * agent has no workload output apart from its console: the source is a
 * valid one that this machine cannot give, so Unsupported. */
static int
read_arguments (sd_bus_message *m, MvMachine *machine, const char **file, uint32_t *tail,
                int *follow, sd_bus_error *error)
{
  const char *source = NULL;

  if (sd_bus_message_read (m, "sub", &source, tail, follow) < 0)
    return sd_bus_error_setf (error, SD_BUS_ERROR_INVALID_ARGS,
                              "Expected a source, tail_lines and follow (sub)");
  if (*tail > MV_LOGS_TAIL_LINES_MAX)
    return sd_bus_error_setf (error, MV_BUS_ERROR_INVALID_ARGUMENT,
                              "tail_lines: %u is more than the limit of %u (0 is the whole log)",
                              *tail, MV_LOGS_TAIL_LINES_MAX);
  for (gsize i = 0; i < G_N_ELEMENTS (sources); i++)
    if (strcmp (source, sources[i].name) == 0)
      {
        *file = sources[i].file;
        if (!sources[i].agent || mv_reconciler_has_agent (machine))
          return 0;
        return sd_bus_error_setf (error, MV_BUS_ERROR_UNSUPPORTED,
                                  "source: this machine's guest has no microvmd agent to send "
                                  "its workload's output; read the source 'console'");
      }
  return sd_bus_error_setf (error, MV_BUS_ERROR_INVALID_ARGUMENT,
                            "source: '%.64s' is not one of console, vmm, workload", source);
}

static void
do_stream_logs (MvMachine *machine, sd_bus_message *call, gboolean root)
{
  sd_bus_error error = SD_BUS_ERROR_NULL;
  const char *file = NULL;
  uint32_t tail = 0;
  int follow = 0;
  MvRecords *records = mv_reconciler_host (machine->reconciler)->records;
  MvMachineView *view = machine->view;
  g_autofree char *dir = NULL;
  g_autoptr (GTask) task = NULL;
  OpenCall *open_call;
  OpenJob *job;

  sd_bus_message_rewind (call, TRUE);
  if (read_arguments (call, machine, &file, &tail, &follow, &error) < 0)
    {
      sd_bus_reply_method_error (call, &error);
      sd_bus_error_free (&error);
      return;
    }
  /* Counted again here: others may have been opened meanwhile. */
  if (n_streams >= MV_LOGS_STREAMS_MAX)
    {
      sd_bus_reply_method_errorf (call, MV_BUS_ERROR_RESOURCE_EXHAUSTED,
                                  "%u log streams are open, the limit: close one first",
                                  MV_LOGS_STREAMS_MAX);
      return;
    }
  /* The last run's logs stay in the runtime directory until the machine
   * is deleted or the host restarts. */
  dir = records->runtime_dir (records, machine->id);
  job = g_new0 (OpenJob, 1);
  job->path = g_build_filename (dir, file, NULL);
  job->rotated_path = g_strconcat (job->path, MV_LOG_ROTATED_SUFFIX, NULL);
  job->tail_lines = tail;
  job->file_fd = job->rotated_fd = -1;
  open_call = g_new0 (OpenCall, 1);
  open_call->service = view->service;
  open_call->machine_id = g_strdup (machine->id);
  open_call->call = sd_bus_message_ref (call);
  open_call->follow = follow;
  task = g_task_new (NULL, NULL, open_done, open_call);
  g_task_set_task_data (task, job, (GDestroyNotify) open_job_free);
  g_task_run_in_thread (task, open_thread);
}

int
mv_machine_method_stream_logs (sd_bus_message *m, MvMachine *machine,
                               MvMachineAuthorize authorize, sd_bus_error *error)
{
  const char *file = NULL;
  uint32_t tail = 0;
  int follow = 0;
  /* Refused on its arguments before anyone is asked; read again once
   * authorized. */
  int r = read_arguments (m, machine, &file, &tail, &follow, error);

  if (r < 0)
    return r;
  if (n_streams >= MV_LOGS_STREAMS_MAX)
    return sd_bus_error_setf (error, MV_BUS_ERROR_RESOURCE_EXHAUSTED,
                              "%u log streams are open, the limit: close one first",
                              MV_LOGS_STREAMS_MAX);
  sd_bus_message_rewind (m, TRUE);
  return authorize (machine, m, MV_ACTION_MACHINE_CONSOLE, "read-logs", do_stream_logs);
}
