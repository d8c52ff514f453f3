/* microvmd-agent driven over a socketpair in its test mode (--serve-fd):
 * sessions, CONFIG, the workload's output, EXEC with its flow control,
 * METADATA, REIDENTIFY, health checks, PING, and a peer that breaks the
 * protocol. */
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "guest/protocol.h"

typedef struct {
  int     fd;
  pid_t   pid;
  char   *dir;
  GByteArray *in;
} Agent;

typedef struct {
  uint8_t  type;
  uint32_t channel;
  GBytes  *payload;
} Frame;

static const char *
agent_path (void)
{
  const char *path = g_getenv ("MICROVMD_AGENT");

  g_assert_nonnull (path);
  return path;
}

static void
agent_start (Agent *a)
{
  int sv[2];

  g_assert_cmpint (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), ==, 0);
  a->dir = g_dir_make_tmp ("agent-test-XXXXXX", NULL);
  g_assert_nonnull (a->dir);
  a->in = g_byte_array_new ();
  a->pid = fork ();
  g_assert_cmpint (a->pid, >=, 0);
  if (a->pid == 0)
    {
      char fd_text[16];
      int fd = dup (sv[1]);   /* without FD_CLOEXEC */

      g_snprintf (fd_text, sizeof fd_text, "%d", fd);
      execl (agent_path (), "microvmd-agent", "--serve-fd", fd_text, "--state-dir", a->dir, NULL);
      _exit (127);
    }
  close (sv[1]);
  a->fd = sv[0];
}

static void
remove_tree (const char *dir)
{
  g_autoptr (GDir) d = g_dir_open (dir, 0, NULL);
  const char *name;

  while (d && (name = g_dir_read_name (d)))
    {
      g_autofree char *path = g_build_filename (dir, name, NULL);

      if (g_file_test (path, G_FILE_TEST_IS_DIR))
        remove_tree (path);
      else
        g_unlink (path);
    }
  g_rmdir (dir);
}

/* Closes the host end; the agent must then exit 0. */
static void
agent_stop (Agent *a)
{
  int status = 0;

  if (a->fd >= 0)
    close (a->fd);
  g_assert_cmpint (waitpid (a->pid, &status, 0), ==, a->pid);
  g_assert_true (WIFEXITED (status));
  g_assert_cmpint (WEXITSTATUS (status), ==, 0);
  remove_tree (a->dir);
  g_free (a->dir);
  g_byte_array_unref (a->in);
}

static void
send_buf (Agent *a, MvAgentBuf *b)
{
  size_t off = 0;

  while (off < b->len)
    {
      ssize_t n = write (a->fd, b->data + off, b->len - off);

      g_assert_cmpint (n, >, 0);
      off += (size_t) n;
    }
  mv_agent_buf_clear (b);
}

/* The next frame within @timeout_ms, or FALSE (the agent closed, or
 * nothing came). */
static gboolean
recv_frame_within (Agent *a, int timeout_ms, Frame *out)
{
  gint64 deadline = g_get_monotonic_time () + (gint64) timeout_ms * 1000;

  for (;;)
    {
      MvAgentFrame frame;
      const char *why = NULL;
      long used = mv_agent_frame_parse (a->in->data, a->in->len, &frame, &why);
      struct pollfd p = { .fd = a->fd, .events = POLLIN };
      guint8 chunk[65536];
      ssize_t n;
      gint64 left;

      g_assert_cmpint (used, >=, 0);
      if (used > 0)
        {
          g_assert_true (mv_agent_fields_valid (frame.payload, frame.payload_len,
                                                (const uint8_t[]) { MV_AGENT_F_MOUNT, MV_AGENT_F_HEALTH_CHECK }, 2));
          out->type = frame.type;
          out->channel = frame.channel;
          out->payload = g_bytes_new (frame.payload, frame.payload_len);
          g_byte_array_remove_range (a->in, 0, (guint) used);
          return TRUE;
        }
      left = (deadline - g_get_monotonic_time ()) / 1000;
      if (left <= 0 || poll (&p, 1, (int) left) <= 0)
        return FALSE;
      n = read (a->fd, chunk, sizeof chunk);
      if (n <= 0)
        return FALSE;
      g_byte_array_append (a->in, chunk, (guint) n);
    }
}

static Frame
recv_frame (Agent *a)
{
  Frame f = { 0 };

  if (!recv_frame_within (a, 20000, &f))
    g_error ("no frame from the agent within 20 s");
  return f;
}

static MvAgentFrame
view (const Frame *f)
{
  gsize len;
  const uint8_t *data = g_bytes_get_data (f->payload, &len);

  return (MvAgentFrame) { .type = f->type, .channel = f->channel, .payload = data,
                          .payload_len = (uint32_t) len };
}

static char *
frame_str (const Frame *f, uint8_t tag)
{
  MvAgentFrame v = view (f);
  MvAgentField field;

  if (!mv_agent_frame_find (&v, tag, &field))
    return NULL;
  return g_strndup ((const char *) field.value, field.len);
}

static gboolean
frame_u32 (const Frame *f, uint8_t tag, uint32_t *out)
{
  MvAgentFrame v = view (f);

  return mv_agent_frame_u32 (&v, tag, out);
}

static void
frame_clear (Frame *f)
{
  g_clear_pointer (&f->payload, g_bytes_unref);
}

/* Skips what the agent sends by itself (HEALTH, USAGE every 2 s, WINDOW)
 * until a frame of @type comes. */
static Frame
expect (Agent *a, uint8_t type)
{
  for (;;)
    {
      Frame f = recv_frame (a);

      if (f.type == type)
        return f;
      if (f.type != MV_AGENT_HEALTH && f.type != MV_AGENT_WINDOW && f.type != MV_AGENT_USAGE)
        g_error ("expected %s, got %s", mv_agent_type_name (type), mv_agent_type_name (f.type));
      frame_clear (&f);
    }
}

static void
hello (Agent *a, const char *state)
{
  MvAgentBuf b;
  Frame f;
  uint32_t version = 0;
  g_autofree char *got_state = NULL, *agent_version = NULL;

  mv_agent_buf_init (&b);
  mv_agent_buf_begin (&b, MV_AGENT_HELLO, 0);
  mv_agent_buf_put_u32 (&b, MV_AGENT_F_VERSION, MV_AGENT_PROTOCOL_VERSION);
  g_assert_true (mv_agent_buf_end (&b));
  send_buf (a, &b);
  f = expect (a, MV_AGENT_HELLO);
  g_assert_true (frame_u32 (&f, MV_AGENT_F_VERSION, &version));
  g_assert_cmpuint (version, ==, MV_AGENT_PROTOCOL_VERSION);
  agent_version = frame_str (&f, MV_AGENT_F_AGENT_VERSION);
  g_assert_nonnull (agent_version);
  g_assert_cmpstr (agent_version, !=, "");
  got_state = frame_str (&f, MV_AGENT_F_STATE);
  g_assert_cmpstr (got_state, ==, state);
  frame_clear (&f);
}

/* CONFIG with what @fill puts, then READY (or the frame that came). */
static Frame
configure (Agent *a, void (*fill) (MvAgentBuf *, gpointer), gpointer data)
{
  MvAgentBuf b;

  mv_agent_buf_init (&b);
  mv_agent_buf_begin (&b, MV_AGENT_CONFIG, 0);
  mv_agent_buf_put_str (&b, MV_AGENT_F_INIT_MODE, "exec");
  if (fill)
    fill (&b, data);
  g_assert_true (mv_agent_buf_end (&b));
  send_buf (a, &b);
  for (;;)
    {
      Frame f = recv_frame (a);

      if (f.type == MV_AGENT_READY || f.type == MV_AGENT_FAILED)
        return f;
      frame_clear (&f);
    }
}

static void
start_configured (Agent *a)
{
  Frame f;

  agent_start (a);
  hello (a, "unconfigured");
  f = configure (a, NULL, NULL);
  g_assert_cmpuint (f.type, ==, MV_AGENT_READY);
  frame_clear (&f);
}

static void
send_exec (Agent *a, uint32_t channel, const char *const *argv)
{
  MvAgentBuf b;

  mv_agent_buf_init (&b);
  mv_agent_buf_begin (&b, MV_AGENT_EXEC, channel);
  for (; *argv; argv++)
    mv_agent_buf_put_str (&b, MV_AGENT_F_ARGV, *argv);
  g_assert_true (mv_agent_buf_end (&b));
  send_buf (a, &b);
}

static void
send_stream_frame (Agent *a, uint8_t type, uint32_t channel, uint32_t stream,
                   uint8_t tag, const void *value, size_t len)
{
  MvAgentBuf b;

  mv_agent_buf_init (&b);
  mv_agent_buf_begin (&b, type, channel);
  mv_agent_buf_put_u32 (&b, MV_AGENT_F_STREAM, stream);
  if (tag)
    mv_agent_buf_put (&b, tag, value, len);
  g_assert_true (mv_agent_buf_end (&b));
  send_buf (a, &b);
}

static void
send_grant (Agent *a, uint32_t channel, uint32_t stream, uint32_t grant)
{
  uint8_t be[4] = { grant >> 24, grant >> 16, grant >> 8, grant };

  send_stream_frame (a, MV_AGENT_WINDOW, channel, stream, MV_AGENT_F_GRANT, be, 4);
}

typedef struct {
  GString *out[3];
  gboolean eof[3];
  gboolean exited;
  uint32_t code;
  char    *message;
} ExecResult;

static void
exec_result_init (ExecResult *r)
{
  memset (r, 0, sizeof *r);
  for (int i = 0; i < 3; i++)
    r->out[i] = g_string_new (NULL);
}

static void
exec_result_clear (ExecResult *r)
{
  for (int i = 0; i < 3; i++)
    g_string_free (r->out[i], TRUE);
  g_free (r->message);
}

/* Takes one frame for the execs of @results (indexed by channel). */
static void
exec_take (Agent *a, ExecResult *results, guint n_results)
{
  Frame f = recv_frame (a);
  MvAgentFrame v = view (&f);
  ExecResult *r;
  uint32_t stream = 0;
  MvAgentField field;

  if (f.type == MV_AGENT_HEALTH || f.type == MV_AGENT_WINDOW || f.type == MV_AGENT_USAGE)
    {
      frame_clear (&f);
      return;
    }
  g_assert_cmpuint (f.channel, >, 0);
  g_assert_cmpuint (f.channel, <, n_results);
  r = &results[f.channel];
  g_assert_false (r->exited);
  switch (f.type)
    {
    case MV_AGENT_DATA:
      g_assert_true (mv_agent_frame_u32 (&v, MV_AGENT_F_STREAM, &stream));
      g_assert_cmpuint (stream, >=, 1);
      g_assert_cmpuint (stream, <=, 2);
      g_assert_false (r->eof[stream]);
      g_assert_true (mv_agent_frame_find (&v, MV_AGENT_F_BYTES, &field));
      g_assert_cmpuint (field.len, <=, MV_AGENT_DATA_MAX_BYTES);
      g_string_append_len (r->out[stream], (const char *) field.value, field.len);
      break;
    case MV_AGENT_EOF:
      g_assert_true (mv_agent_frame_u32 (&v, MV_AGENT_F_STREAM, &stream));
      g_assert_cmpuint (stream, <=, 2);
      r->eof[stream] = TRUE;
      break;
    case MV_AGENT_EXEC_EXIT:
      g_assert_true (mv_agent_frame_u32 (&v, MV_AGENT_F_EXIT_CODE, &r->code));
      r->message = frame_str (&f, MV_AGENT_F_MESSAGE);
      r->exited = TRUE;
      break;
    default:
      g_error ("unexpected %s on channel %u", mv_agent_type_name (f.type), f.channel);
    }
  frame_clear (&f);
}

static void
test_hello (void)
{
  Agent a;

  agent_start (&a);
  hello (&a, "unconfigured");
  /* A second HELLO starts a fresh session and is answered again. */
  hello (&a, "unconfigured");
  agent_stop (&a);
}

static void
fill_identity (MvAgentBuf *b, gpointer data)
{
  mv_agent_buf_put_str (b, MV_AGENT_F_HOSTNAME, "web-1");
  mv_agent_buf_put_str (b, MV_AGENT_F_SSH_KEY, "ssh-ed25519 AAAAone one@host");
  mv_agent_buf_put_str (b, MV_AGENT_F_SSH_KEY, "ssh-ed25519 AAAAtwo two@host");
  mv_agent_buf_put_str (b, MV_AGENT_F_DOCUMENT, "{\"instance-id\":\"i-1\"}");
}

static void
assert_file (const char *dir, const char *name, const char *content, guint mode)
{
  g_autofree char *path = g_build_filename (dir, name, NULL);
  g_autofree char *got = NULL;
  struct stat st;

  g_assert_true (g_file_get_contents (path, &got, NULL, NULL));
  g_assert_cmpstr (got, ==, content);
  g_assert_cmpint (stat (path, &st), ==, 0);
  g_assert_cmpuint (st.st_mode & 07777, ==, mode);
}

static void
test_config (void)
{
  Agent a;
  Frame f;

  agent_start (&a);
  hello (&a, "unconfigured");
  f = configure (&a, fill_identity, NULL);
  g_assert_cmpuint (f.type, ==, MV_AGENT_READY);
  frame_clear (&f);
  assert_file (a.dir, "metadata.json", "{\"instance-id\":\"i-1\"}", 0600);
  assert_file (a.dir, "ssh-authorized-keys",
               "ssh-ed25519 AAAAone one@host\nssh-ed25519 AAAAtwo two@host\n", 0644);
  assert_file (a.dir, "hostname", "web-1\n", 0644);
  hello (&a, "running");
  agent_stop (&a);
}

static void
fill_missing_command (MvAgentBuf *b, gpointer data)
{
  mv_agent_buf_put_str (b, MV_AGENT_F_ARGV, "nosuchcmd-microvmd");
}

static void
test_config_failed (void)
{
  Agent a;
  Frame f;
  g_autofree char *message = NULL;
  char byte;

  agent_start (&a);
  hello (&a, "unconfigured");
  f = configure (&a, fill_missing_command, NULL);
  g_assert_cmpuint (f.type, ==, MV_AGENT_FAILED);
  message = frame_str (&f, MV_AGENT_F_MESSAGE);
  g_assert_cmpstr (message, ==, "cmd: nosuchcmd-microvmd: not found in the guest's PATH");
  frame_clear (&f);
  /* The guest ends: the agent closes and exits. */
  g_assert_cmpint (read (a.fd, &byte, 1), ==, 0);
  agent_stop (&a);
}

static void
fill_workload (MvAgentBuf *b, gpointer data)
{
  mv_agent_buf_put_str (b, MV_AGENT_F_ARGV, "sh");
  mv_agent_buf_put_str (b, MV_AGENT_F_ARGV, "-c");
  mv_agent_buf_put_str (b, MV_AGENT_F_ARGV, "sleep 0.3; exit 7");
}

static void
test_workload_exit (void)
{
  Agent a;
  Frame f;
  uint32_t code = 0;
  MvAgentBuf b;
  char byte;

  agent_start (&a);
  hello (&a, "unconfigured");
  f = configure (&a, fill_workload, NULL);
  g_assert_cmpuint (f.type, ==, MV_AGENT_READY);
  frame_clear (&f);
  f = expect (&a, MV_AGENT_EXIT);
  g_assert_true (frame_u32 (&f, MV_AGENT_F_EXIT_CODE, &code));
  g_assert_cmpuint (code, ==, 7);
  frame_clear (&f);
  hello (&a, "exited");
  f = expect (&a, MV_AGENT_EXIT);
  frame_clear (&f);
  mv_agent_buf_init (&b);
  mv_agent_buf_begin (&b, MV_AGENT_EXIT_ACK, 0);
  g_assert_true (mv_agent_buf_end (&b));
  send_buf (&a, &b);
  g_assert_cmpint (read (a.fd, &byte, 1), ==, 0);
  agent_stop (&a);
}

static void
fill_talking_workload (MvAgentBuf *b, gpointer data)
{
  mv_agent_buf_put_str (b, MV_AGENT_F_ARGV, "sh");
  mv_agent_buf_put_str (b, MV_AGENT_F_ARGV, "-c");
  mv_agent_buf_put_str (b, MV_AGENT_F_ARGV, "echo out; echo err >&2; sleep 0.6; echo late; exit 4");
}

/* The workload's output is held for a host that has not asked for it,
 * given to the first that does, and sent as it comes after that, each
 * stream apart, all before EXIT. */
static void
test_workload_output (void)
{
  GString *got = g_string_new (NULL);
  guint32 last_stream = 0, code = 0;
  Agent a;
  Frame f;
  MvAgentBuf b;

  agent_start (&a);
  hello (&a, "unconfigured");
  f = configure (&a, fill_talking_workload, NULL);
  g_assert_cmpuint (f.type, ==, MV_AGENT_READY);
  frame_clear (&f);
  /* This host did not say WANT_OUTPUT: none comes. */
  while (recv_frame_within (&a, 300, &f))
    {
      g_assert_cmpuint (f.type, !=, MV_AGENT_OUTPUT);
      frame_clear (&f);
    }

  mv_agent_buf_init (&b);
  mv_agent_buf_begin (&b, MV_AGENT_HELLO, 0);
  mv_agent_buf_put_u32 (&b, MV_AGENT_F_VERSION, MV_AGENT_PROTOCOL_VERSION);
  mv_agent_buf_put_u32 (&b, MV_AGENT_F_WANT_OUTPUT, 1);
  g_assert_true (mv_agent_buf_end (&b));
  send_buf (&a, &b);
  f = expect (&a, MV_AGENT_HELLO);
  frame_clear (&f);
  for (;;)
    {
      MvAgentFrame v;
      MvAgentField bytes, dropped;
      guint32 stream = 0;

      f = recv_frame (&a);
      if (f.type == MV_AGENT_EXIT)
        break;
      if (f.type != MV_AGENT_OUTPUT)
        {
          frame_clear (&f);
          continue;
        }
      v = view (&f);
      g_assert_true (frame_u32 (&f, MV_AGENT_F_STREAM, &stream));
      g_assert_true (mv_agent_frame_find (&v, MV_AGENT_F_BYTES, &bytes));
      g_assert_false (mv_agent_frame_find (&v, MV_AGENT_F_DROPPED, &dropped));
      if (stream != last_stream)
        g_string_append_printf (got, "[%u]", stream);
      last_stream = stream;
      g_string_append_len (got, (const char *) bytes.value, bytes.len);
      frame_clear (&f);
    }
  g_assert_cmpstr (got->str, ==, "[1]out\n[2]err\n[1]late\n");
  g_assert_true (frame_u32 (&f, MV_AGENT_F_EXIT_CODE, &code));
  g_assert_cmpuint (code, ==, 4);
  frame_clear (&f);
  g_string_free (got, TRUE);
  agent_stop (&a);
}

static void
test_exec (void)
{
  const char *argv[] = { "sh", "-c", "cat; echo err >&2; exit 3", NULL };
  Agent a;
  ExecResult r[2];

  start_configured (&a);
  exec_result_init (&r[1]);
  send_exec (&a, 1, argv);
  send_stream_frame (&a, MV_AGENT_DATA, 1, MV_AGENT_STREAM_STDIN, MV_AGENT_F_BYTES, "hello\n", 6);
  send_stream_frame (&a, MV_AGENT_EOF, 1, MV_AGENT_STREAM_STDIN, 0, NULL, 0);
  while (!r[1].exited)
    exec_take (&a, r, 2);
  g_assert_cmpstr (r[1].out[1]->str, ==, "hello\n");
  g_assert_cmpstr (r[1].out[2]->str, ==, "err\n");
  g_assert_true (r[1].eof[1]);
  g_assert_true (r[1].eof[2]);
  g_assert_cmpuint (r[1].code, ==, 3);
  exec_result_clear (&r[1]);
  agent_stop (&a);
}

static void
test_exec_two (void)
{
  const char *first[] = { "sh", "-c", "read x; echo one-$x", NULL };
  const char *second[] = { "sh", "-c", "echo two; exit 4", NULL };
  Agent a;
  ExecResult r[3];

  start_configured (&a);
  exec_result_init (&r[1]);
  exec_result_init (&r[2]);
  send_exec (&a, 1, first);
  send_exec (&a, 2, second);
  /* The second ends while the first still waits for its input. */
  while (!r[2].exited)
    exec_take (&a, r, 3);
  g_assert_false (r[1].exited);
  send_stream_frame (&a, MV_AGENT_DATA, 1, MV_AGENT_STREAM_STDIN, MV_AGENT_F_BYTES, "x\n", 2);
  while (!r[1].exited)
    exec_take (&a, r, 3);
  g_assert_cmpstr (r[1].out[1]->str, ==, "one-x\n");
  g_assert_cmpuint (r[1].code, ==, 0);
  g_assert_cmpstr (r[2].out[1]->str, ==, "two\n");
  g_assert_cmpuint (r[2].code, ==, 4);
  exec_result_clear (&r[1]);
  exec_result_clear (&r[2]);
  agent_stop (&a);
}

static void
test_exec_not_found (void)
{
  const char *argv[] = { "nosuchcmd-microvmd", NULL };
  Agent a;
  ExecResult r[2];

  start_configured (&a);
  exec_result_init (&r[1]);
  send_exec (&a, 1, argv);
  exec_take (&a, r, 2);
  g_assert_true (r[1].exited);
  g_assert_cmpuint (r[1].code, ==, 127);
  g_assert_cmpstr (r[1].message, ==, "cmd: nosuchcmd-microvmd: not found in the guest's PATH");
  exec_result_clear (&r[1]);
  agent_stop (&a);
}

/* A command printing 1 MiB is held to the window: never more in flight
 * than has been granted, and nothing while there is no credit. */
static void
test_exec_window (void)
{
  const char *argv[] = { "head", "-c", "1048576", "/dev/zero", NULL };
  Agent a;
  uint64_t received = 0, granted = MV_AGENT_WINDOW_BYTES;
  gboolean exited = FALSE, eof = FALSE, stalled_once = FALSE;

  start_configured (&a);
  send_exec (&a, 1, argv);
  while (!exited)
    {
      Frame f;
      MvAgentFrame v;
      MvAgentField field;

      if (received == granted && !stalled_once)
        {
          /* No credit: nothing may come. */
          g_assert_false (recv_frame_within (&a, 500, &f));
          stalled_once = TRUE;
        }
      if (received + MV_AGENT_DATA_MAX_BYTES > granted && received == granted)
        {
          send_grant (&a, 1, MV_AGENT_STREAM_STDOUT, MV_AGENT_DATA_MAX_BYTES);
          granted += MV_AGENT_DATA_MAX_BYTES;
        }
      f = recv_frame (&a);
      v = view (&f);
      if (f.type == MV_AGENT_DATA)
        {
          g_assert_true (mv_agent_frame_find (&v, MV_AGENT_F_BYTES, &field));
          received += field.len;
          g_assert_cmpuint (received, <=, granted);
        }
      else if (f.type == MV_AGENT_EOF)
        eof = TRUE;
      else if (f.type == MV_AGENT_EXEC_EXIT)
        exited = TRUE;
      frame_clear (&f);
    }
  g_assert_true (stalled_once);
  g_assert_true (eof);
  g_assert_cmpuint (received, ==, 1048576);
  agent_stop (&a);
}

/* 64 execs run at once; the 65th ends at once with 125. Closing the
 * session kills them all: the agent then exits without waiting 30 s. */
static void
test_exec_limit (void)
{
  const char *argv[] = { "sleep", "30", NULL };
  const char *first[] = { "sh", "-c", "echo $$; exec sleep 30", NULL };
  Agent a;
  ExecResult r[MV_AGENT_EXECS_MAX + 2];
  gint64 start;
  long pid;

  start_configured (&a);
  for (guint i = 1; i <= MV_AGENT_EXECS_MAX + 1; i++)
    {
      exec_result_init (&r[i]);
      send_exec (&a, i, i == 1 ? first : argv);
    }
  while (!r[MV_AGENT_EXECS_MAX + 1].exited)
    exec_take (&a, r, MV_AGENT_EXECS_MAX + 2);
  g_assert_cmpuint (r[MV_AGENT_EXECS_MAX + 1].code, ==, 125);
  g_assert_nonnull (r[MV_AGENT_EXECS_MAX + 1].message);
  while (!strchr (r[1].out[1]->str, '\n'))
    exec_take (&a, r, MV_AGENT_EXECS_MAX + 2);
  pid = strtol (r[1].out[1]->str, NULL, 10);
  g_assert_cmpint (pid, >, 1);
  for (guint i = 1; i <= MV_AGENT_EXECS_MAX; i++)
    g_assert_false (r[i].exited);
  for (guint i = 1; i <= MV_AGENT_EXECS_MAX + 1; i++)
    exec_result_clear (&r[i]);
  agent_stop (&a);
  /* The session's execs were killed: gone, or a zombie nobody reaped. */
  start = g_get_monotonic_time ();
  for (;;)
    {
      g_autofree char *stat_path = g_strdup_printf ("/proc/%ld/stat", pid);
      g_autofree char *stat = NULL;
      const char *state;

      if (!g_file_get_contents (stat_path, &stat, NULL, NULL))
        break;
      state = strrchr (stat, ')');
      if (state && state[1] == ' ' && state[2] == 'Z')
        break;
      g_assert_cmpint (g_get_monotonic_time () - start, <, 5 * G_USEC_PER_SEC);
      g_usleep (20000);
    }
}

static char *
run_authorized_keys (const char *dir)
{
  g_autofree char *out = NULL;
  const char *argv[] = { agent_path (), "authorized-keys", "alice", "--state-dir", dir, NULL };
  int status = -1;

  g_assert_true (g_spawn_sync (NULL, (char **) argv, NULL, G_SPAWN_DEFAULT, NULL, NULL, &out, NULL,
                               &status, NULL));
  g_assert_cmpint (status, ==, 0);
  return g_steal_pointer (&out);
}

static void
test_metadata (void)
{
  Agent a;
  Frame f;
  MvAgentBuf b;
  g_autofree char *before = NULL, *after = NULL;
  Frame pong;
  uint32_t grant_dummy;

  agent_start (&a);
  hello (&a, "unconfigured");
  f = configure (&a, fill_identity, NULL);
  frame_clear (&f);
  before = run_authorized_keys (a.dir);
  g_assert_cmpstr (before, ==, "ssh-ed25519 AAAAone one@host\nssh-ed25519 AAAAtwo two@host\n");

  mv_agent_buf_init (&b);
  mv_agent_buf_begin (&b, MV_AGENT_METADATA, 0);
  mv_agent_buf_put_str (&b, MV_AGENT_F_HOSTNAME, "web-2");
  mv_agent_buf_put_str (&b, MV_AGENT_F_SSH_KEY, "ssh-ed25519 AAAAthree three@host");
  mv_agent_buf_put_str (&b, MV_AGENT_F_DOCUMENT, "{\"instance-id\":\"i-2\"}");
  g_assert_true (mv_agent_buf_end (&b));
  /* A PING after it: once PONG is back, METADATA has been applied. */
  mv_agent_buf_begin (&b, MV_AGENT_PING, 0);
  mv_agent_buf_put (&b, MV_AGENT_F_BYTES, "m", 1);
  g_assert_true (mv_agent_buf_end (&b));
  send_buf (&a, &b);
  pong = expect (&a, MV_AGENT_PONG);
  g_assert_false (frame_u32 (&pong, MV_AGENT_F_GRANT, &grant_dummy));
  frame_clear (&pong);

  after = run_authorized_keys (a.dir);
  g_assert_cmpstr (after, ==, "ssh-ed25519 AAAAthree three@host\n");
  assert_file (a.dir, "metadata.json", "{\"instance-id\":\"i-2\"}", 0600);
  assert_file (a.dir, "hostname", "web-2\n", 0644);
  agent_stop (&a);
}

/* REIDENTIFY with web-1's keys and document, @hostname, a NET field and
 * @entropy_len bytes of entropy; the answer, REIDENTIFIED. */
static Frame
reidentify (Agent *a, const char *hostname, const char *mac, size_t entropy_len)
{
  MvAgentBuf b;
  uint8_t entropy[MV_AGENT_ENTROPY_MAX_BYTES + 1];

  g_assert_cmpuint (entropy_len, <=, sizeof entropy);
  for (size_t i = 0; i < entropy_len; i++)
    entropy[i] = (uint8_t) g_random_int ();
  mv_agent_buf_init (&b);
  mv_agent_buf_begin (&b, MV_AGENT_REIDENTIFY, 0);
  mv_agent_buf_put (&b, MV_AGENT_F_ENTROPY, entropy, entropy_len);
  fill_identity (&b, NULL);
  /* The last HOSTNAME is the one the agent takes: fill_identity's first. */
  mv_agent_buf_put_str (&b, MV_AGENT_F_HOSTNAME, hostname);
  mv_agent_buf_open (&b, MV_AGENT_F_NET);
  mv_agent_buf_put_str (&b, MV_AGENT_F_MAC, mac);
  mv_agent_buf_put_str (&b, MV_AGENT_F_ADDRESS, "10.0.0.7/24");
  mv_agent_buf_put_str (&b, MV_AGENT_F_GATEWAY, "10.0.0.1");
  mv_agent_buf_put_str (&b, MV_AGENT_F_DNS, "10.0.0.1");
  mv_agent_buf_put_u32 (&b, MV_AGENT_F_MTU, 1400);
  mv_agent_buf_close (&b);
  g_assert_true (mv_agent_buf_end (&b));
  send_buf (a, &b);
  return expect (a, MV_AGENT_REIDENTIFIED);
}

/* The CHANGED fields of @f, joined by spaces. */
static char *
changed_of (const Frame *f)
{
  MvAgentFrame v = view (f);
  MvAgentFields fields;
  MvAgentField field;
  GString *out = g_string_new (NULL);

  mv_agent_fields_init (&fields, v.payload, v.payload_len);
  while (mv_agent_fields_next (&fields, &field) > 0)
    if (field.tag == MV_AGENT_F_CHANGED)
      g_string_append_printf (out, "%s%.*s", out->len ? " " : "", (int) field.len,
                              (const char *) field.value);
  return g_string_free (out, FALSE);
}

/* The same identity changes nothing; another hostname changes only that
 * (the test mode touches neither the host's kernel nor its interfaces);
 * entropy out of bounds, or a NET that is no MAC, is a MESSAGE and the
 * rest is still applied. */
static void
test_reidentify (void)
{
  Agent a;
  Frame f;
  g_autofree char *changed = NULL, *message = NULL;

  agent_start (&a);
  hello (&a, "unconfigured");
  f = configure (&a, fill_identity, NULL);
  g_assert_cmpuint (f.type, ==, MV_AGENT_READY);
  frame_clear (&f);
  /* The hostname last came from CONFIG's first HOSTNAME: give it the
   * one the REIDENTIFYs below carry. */
  f = reidentify (&a, "web-1", "02:00:00:00:00:07", MV_AGENT_ENTROPY_MIN_BYTES);
  changed = changed_of (&f);
  g_assert_cmpstr (changed, ==, "");
  g_assert_null (frame_str (&f, MV_AGENT_F_MESSAGE));
  frame_clear (&f);
  g_clear_pointer (&changed, g_free);

  f = reidentify (&a, "web-3", "02:00:00:00:00:07", MV_AGENT_ENTROPY_MAX_BYTES);
  changed = changed_of (&f);
  g_assert_cmpstr (changed, ==, "hostname");
  g_assert_null (frame_str (&f, MV_AGENT_F_MESSAGE));
  assert_file (a.dir, "hostname", "web-3\n", 0644);
  assert_file (a.dir, "metadata.json", "{\"instance-id\":\"i-1\"}", 0600);
  frame_clear (&f);
  g_clear_pointer (&changed, g_free);

  f = reidentify (&a, "web-4", "02:00:00:00:00:07", MV_AGENT_ENTROPY_MIN_BYTES - 1);
  changed = changed_of (&f);
  message = frame_str (&f, MV_AGENT_F_MESSAGE);
  g_assert_cmpstr (changed, ==, "hostname");
  g_assert_cmpstr (message, ==, "ENTROPY: 63 bytes, not 64 to 512");
  assert_file (a.dir, "hostname", "web-4\n", 0644);
  frame_clear (&f);
  g_clear_pointer (&changed, g_free);
  g_clear_pointer (&message, g_free);

  f = reidentify (&a, "web-4", "02:00:00:00:00", MV_AGENT_ENTROPY_MAX_BYTES + 1);
  message = frame_str (&f, MV_AGENT_F_MESSAGE);
  g_assert_cmpstr (message, ==, "ENTROPY: 513 bytes, not 64 to 512; "
                                "network: MAC 02:00:00:00:00 is not a MAC address");
  frame_clear (&f);
  agent_stop (&a);
}

static void
fill_template (MvAgentBuf *b, gpointer data)
{
  mv_agent_buf_put_u32 (b, MV_AGENT_F_TEMPLATE, 1);
  /* What a template must not do yet, given or not. */
  fill_identity (b, NULL);
  mv_agent_buf_put_str (b, MV_AGENT_F_ARGV, "touch");
  mv_agent_buf_put_str (b, MV_AGENT_F_ARGV, (const char *) data);
}

/* The machine's own configuration after a restore: its identity, and a
 * workload that shows it ran, with the hostname it ran under. */
static void
fill_restored_workload (MvAgentBuf *b, gpointer data)
{
  const char *dir = data;
  g_autofree char *script = g_strdup_printf ("cat %s/hostname > %s/ran; sleep 60", dir, dir);

  mv_agent_buf_put_str (b, MV_AGENT_F_HOSTNAME, "web-9");
  mv_agent_buf_put_str (b, MV_AGENT_F_ARGV, "sh");
  mv_agent_buf_put_str (b, MV_AGENT_F_ARGV, "-c");
  mv_agent_buf_put_str (b, MV_AGENT_F_ARGV, script);
}

static gboolean
file_exists_within (const char *path, guint ms)
{
  for (guint waited = 0; waited < ms; waited += 20)
    {
      if (g_file_test (path, G_FILE_TEST_EXISTS))
        return TRUE;
      g_usleep (20000);
    }
  return g_file_test (path, G_FILE_TEST_EXISTS);
}

/* A template is set up and READY with no identity, metadata or workload
 * of its own, and says so in its HELLO; the CONFIG that follows its
 * REIDENTIFY (as after a restore) gives it the rest, and its workload
 * starts with the identity in place; a third CONFIG counts for nothing. */
static void
test_template (void)
{
  Agent a;
  Frame f;
  g_autofree char *marker = NULL, *ran = NULL, *hostname = NULL, *changed = NULL;
  g_autofree char *document = NULL;

  agent_start (&a);
  marker = g_build_filename (a.dir, "template-ran", NULL);
  ran = g_build_filename (a.dir, "ran", NULL);
  hostname = g_build_filename (a.dir, "hostname", NULL);
  document = g_build_filename (a.dir, "metadata.json", NULL);
  hello (&a, "unconfigured");
  f = configure (&a, fill_template, marker);
  g_assert_cmpuint (f.type, ==, MV_AGENT_READY);
  frame_clear (&f);
  hello (&a, "template");
  g_assert_false (file_exists_within (marker, 300));
  g_assert_false (g_file_test (hostname, G_FILE_TEST_EXISTS));
  g_assert_false (g_file_test (document, G_FILE_TEST_EXISTS));

  f = reidentify (&a, "web-9", "02:00:00:00:00:07", MV_AGENT_ENTROPY_MIN_BYTES);
  changed = changed_of (&f);
  g_assert_cmpstr (changed, ==, "hostname metadata");
  frame_clear (&f);
  assert_file (a.dir, "hostname", "web-9\n", 0644);

  f = configure (&a, fill_restored_workload, a.dir);
  g_assert_cmpuint (f.type, ==, MV_AGENT_READY);
  frame_clear (&f);
  hello (&a, "running");
  g_assert_true (file_exists_within (ran, 5000));
  g_usleep (100000);
  assert_file (a.dir, "ran", "web-9\n", 0644);
  g_assert_false (g_file_test (marker, G_FILE_TEST_EXISTS));

  /* Only the first CONFIG after the template's counts. */
  {
    MvAgentBuf b;

    mv_agent_buf_init (&b);
    mv_agent_buf_begin (&b, MV_AGENT_CONFIG, 0);
    mv_agent_buf_put_str (&b, MV_AGENT_F_INIT_MODE, "exec");
    mv_agent_buf_put_str (&b, MV_AGENT_F_HOSTNAME, "web-10");
    g_assert_true (mv_agent_buf_end (&b));
    send_buf (&a, &b);
  }
  hello (&a, "running");
  assert_file (a.dir, "hostname", "web-9\n", 0644);
  agent_stop (&a);
}

static void
fill_template_systemd (MvAgentBuf *b, gpointer data)
{
  mv_agent_buf_put_u32 (b, MV_AGENT_F_TEMPLATE, 1);
  mv_agent_buf_put_str (b, MV_AGENT_F_INIT_MODE, "systemd");
}

static void
fill_template_root (MvAgentBuf *b, gpointer data)
{
  mv_agent_buf_put_u32 (b, MV_AGENT_F_TEMPLATE, 1);
}

static void
fill_other_root (MvAgentBuf *b, gpointer data)
{
  mv_agent_buf_put_str (b, MV_AGENT_F_ROOT, "/dev/vdc");
}

static void
fill_template_again (MvAgentBuf *b, gpointer data)
{
  mv_agent_buf_put_u32 (b, MV_AGENT_F_TEMPLATE, 1);
}

/* FAILED, and the agent ends (in its test mode, the process exits 0). */
static void
assert_config_fails (void (*first) (MvAgentBuf *, gpointer), void (*second) (MvAgentBuf *, gpointer),
                     const char *message)
{
  Agent a;
  Frame f;
  g_autofree char *got = NULL;

  agent_start (&a);
  hello (&a, "unconfigured");
  f = configure (&a, first, NULL);
  if (second)
    {
      g_assert_cmpuint (f.type, ==, MV_AGENT_READY);
      frame_clear (&f);
      f = configure (&a, second, NULL);
    }
  g_assert_cmpuint (f.type, ==, MV_AGENT_FAILED);
  got = frame_str (&f, MV_AGENT_F_MESSAGE);
  g_assert_cmpstr (got, ==, message);
  frame_clear (&f);
  agent_stop (&a);
}

/* A template boots in exec mode, and what is restored from it keeps the
 * root it set up: anything else is FAILED. */
static void
test_template_refusals (void)
{
  assert_config_fails (fill_template_systemd, NULL,
                       "CONFIG: a TEMPLATE boots in exec mode, not systemd");
  assert_config_fails (fill_template_root, fill_other_root,
                       "CONFIG: ROOT /dev/vdc differs from the template's (none)");
  assert_config_fails (fill_template_root, fill_template_again,
                       "CONFIG: TEMPLATE again, in a guest restored from a template");
}

static void
fill_health (MvAgentBuf *b, gpointer data)
{
  g_autofree char *argv2 = g_strdup_printf ("%s/ok", (const char *) data);

  mv_agent_buf_open (b, MV_AGENT_F_HEALTH_CHECK);
  mv_agent_buf_put_str (b, MV_AGENT_F_ARGV, "test");
  mv_agent_buf_put_str (b, MV_AGENT_F_ARGV, "-e");
  mv_agent_buf_put_str (b, MV_AGENT_F_ARGV, argv2);
  mv_agent_buf_put_u32 (b, MV_AGENT_F_INTERVAL, 1);
  mv_agent_buf_put_u32 (b, MV_AGENT_F_TIMEOUT, 5);
  mv_agent_buf_put_u32 (b, MV_AGENT_F_RETRIES, 1);
  /* Failures before the file exists do not count. */
  mv_agent_buf_put_u32 (b, MV_AGENT_F_START_PERIOD, 120);
  mv_agent_buf_close (b);
}

static char *
next_health (Agent *a, uint32_t *streak)
{
  Frame f = expect (a, MV_AGENT_HEALTH);
  char *status = frame_str (&f, MV_AGENT_F_HEALTH_STATUS);

  g_assert_true (frame_u32 (&f, MV_AGENT_F_FAILING_STREAK, streak));
  frame_clear (&f);
  return status;
}

static void
test_health (void)
{
  Agent a;
  Frame f;
  g_autofree char *ok = NULL, *s1 = NULL, *s2 = NULL, *s3 = NULL;
  uint32_t streak = 99;
  MvAgentBuf b;
  Frame hello_frame;

  agent_start (&a);
  hello (&a, "unconfigured");
  f = configure (&a, fill_health, a.dir);
  g_assert_cmpuint (f.type, ==, MV_AGENT_READY);
  frame_clear (&f);

  /* A fresh HELLO is followed by the current status. */
  mv_agent_buf_init (&b);
  mv_agent_buf_begin (&b, MV_AGENT_HELLO, 0);
  mv_agent_buf_put_u32 (&b, MV_AGENT_F_VERSION, MV_AGENT_PROTOCOL_VERSION);
  g_assert_true (mv_agent_buf_end (&b));
  send_buf (&a, &b);
  hello_frame = expect (&a, MV_AGENT_HELLO);
  frame_clear (&hello_frame);
  s1 = next_health (&a, &streak);
  g_assert_cmpstr (s1, ==, "starting");
  g_assert_cmpuint (streak, ==, 0);

  ok = g_build_filename (a.dir, "ok", NULL);
  g_assert_true (g_file_set_contents (ok, "", 0, NULL));
  s2 = next_health (&a, &streak);
  g_assert_cmpstr (s2, ==, "healthy");
  g_assert_cmpuint (streak, ==, 0);

  g_assert_cmpint (g_unlink (ok), ==, 0);
  s3 = next_health (&a, &streak);
  g_assert_cmpstr (s3, ==, "unhealthy");
  g_assert_cmpuint (streak, ==, 1);
  agent_stop (&a);
}

static void
test_ping (void)
{
  Agent a;
  MvAgentBuf b;
  Frame f;
  g_autofree char *bytes = NULL;

  agent_start (&a);
  hello (&a, "unconfigured");
  mv_agent_buf_init (&b);
  mv_agent_buf_begin (&b, MV_AGENT_PING, 0);
  mv_agent_buf_put (&b, MV_AGENT_F_BYTES, "nonce-42", 8);
  g_assert_true (mv_agent_buf_end (&b));
  send_buf (&a, &b);
  f = expect (&a, MV_AGENT_PONG);
  bytes = frame_str (&f, MV_AGENT_F_BYTES);
  g_assert_cmpstr (bytes, ==, "nonce-42");
  frame_clear (&f);
  agent_stop (&a);
}

static void
assert_session_ends (const guint8 *bytes, gsize len)
{
  Agent a;
  char byte;

  agent_start (&a);
  hello (&a, "unconfigured");
  g_assert_cmpint (write (a.fd, bytes, len), ==, (gssize) len);
  /* Closed: end of file, or a reset for what the agent left unread. */
  g_assert_cmpint (read (a.fd, &byte, 1), <=, 0);
  agent_stop (&a);
}

static void
test_malformed (void)
{
  /* A length below the header. */
  static const guint8 short_frame[] = { 0, 0, 0, 2, 1, 0 };
  /* A field that claims more bytes than the frame holds. */
  static const guint8 broken_field[] = { 0, 0, 0, 10, MV_AGENT_PING, 0, 0, 0, 0,
                                         MV_AGENT_F_BYTES, 0, 0, 1, 0, };
  /* A length over the limit. */
  static const guint8 huge[] = { 0x7f, 0xff, 0xff, 0xff, 1 };

  assert_session_ends (short_frame, sizeof short_frame);
  assert_session_ends (broken_field, sizeof broken_field);
  assert_session_ends (huge, sizeof huge);
}

int
main (int argc, char **argv)
{
  signal (SIGPIPE, SIG_IGN);
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/agent/session/hello", test_hello);
  g_test_add_func ("/agent/session/config", test_config);
  g_test_add_func ("/agent/session/config-failed", test_config_failed);
  g_test_add_func ("/agent/session/workload-exit", test_workload_exit);
  g_test_add_func ("/agent/session/workload-output", test_workload_output);
  g_test_add_func ("/agent/session/exec", test_exec);
  g_test_add_func ("/agent/session/exec-two", test_exec_two);
  g_test_add_func ("/agent/session/exec-not-found", test_exec_not_found);
  g_test_add_func ("/agent/session/exec-window", test_exec_window);
  g_test_add_func ("/agent/session/exec-limit", test_exec_limit);
  g_test_add_func ("/agent/session/metadata", test_metadata);
  g_test_add_func ("/agent/session/reidentify", test_reidentify);
  g_test_add_func ("/agent/session/template", test_template);
  g_test_add_func ("/agent/session/template-refusals", test_template_refusals);
  g_test_add_func ("/agent/session/health", test_health);
  g_test_add_func ("/agent/session/ping", test_ping);
  g_test_add_func ("/agent/session/malformed", test_malformed);
  return g_test_run ();
}
