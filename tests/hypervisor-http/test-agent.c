/* The agent protocol against the test VMMs' simulated guest, through
 * their hybrid vsock: what microvmd's daemon does with a guest's agent,
 * done by hand, frame by frame. */
#include "vmm-fixture.h"
#include "guest/protocol.h"
#include "guest/vsock.h"

#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define AGENT_PORT  1024
#define BIG_BYTES   (1024 * 1024)
#define READ_MS     5000

static const uint8_t nested_tags[] = { MV_AGENT_F_MOUNT, MV_AGENT_F_HEALTH_CHECK };

typedef struct {
  int         fd;
  GByteArray *in;
  guint8     *frame_bytes;   /* the last frame read; its fields point here */
  MvAgentBuf  out;
} Client;

typedef struct {
  guint8  type;
  guint32 channel;
  MvAgentFrame frame;
} Got;

static Client *
client_connect (const char *vsock_path)
{
  g_autoptr (GError) error = NULL;
  Client *c = g_new0 (Client, 1);

  c->fd = mv_vsock_dial (vsock_path, AGENT_PORT, READ_MS, &error);
  g_assert_no_error (error);
  g_assert_cmpint (c->fd, >=, 0);
  c->in = g_byte_array_new ();
  mv_agent_buf_init (&c->out);
  return c;
}

static void
client_free (Client *c)
{
  if (c->fd >= 0)
    close (c->fd);
  g_byte_array_unref (c->in);
  g_free (c->frame_bytes);
  mv_agent_buf_clear (&c->out);
  g_free (c);
}

G_DEFINE_AUTOPTR_CLEANUP_FUNC (Client, client_free)

/* Ends the frame being built and sends it. */
static void
client_send (Client *c)
{
  gsize off = 0;

  g_assert_true (mv_agent_buf_end (&c->out));
  while (off < c->out.len)
    {
      ssize_t n = send (c->fd, c->out.data + off, c->out.len - off, MSG_NOSIGNAL);
      g_assert_cmpint (n, >, 0);
      off += (gsize) n;
    }
  mv_agent_buf_consume (&c->out, c->out.len);
}

/* The next frame, or FALSE if none came within @timeout_ms (or the
 * guest closed the session: *@closed). */
static gboolean
client_read (Client *c, MvAgentFrame *frame, guint timeout_ms, gboolean *closed)
{
  gint64 deadline = g_get_monotonic_time () + (gint64) timeout_ms * 1000;

  *closed = FALSE;
  for (;;)
    {
      const char *why = NULL;
      long n = mv_agent_frame_parse (c->in->data, c->in->len, frame, &why);
      struct pollfd pfd = { .fd = c->fd, .events = POLLIN };
      guint8 chunk[65536];
      gint64 left = (deadline - g_get_monotonic_time ()) / 1000;
      ssize_t got;

      g_assert_cmpint (n, >=, 0);
      if (n > 0)
        {
          g_free (c->frame_bytes);
          c->frame_bytes = g_memdup2 (c->in->data, (gsize) n);
          g_byte_array_remove_range (c->in, 0, (guint) n);
          g_assert_true (mv_agent_frame_parse (c->frame_bytes, (size_t) n, frame, &why) == n);
          g_assert_true (mv_agent_fields_valid (frame->payload, frame->payload_len, nested_tags,
                                                G_N_ELEMENTS (nested_tags)));
          return TRUE;
        }
      if (left <= 0 || poll (&pfd, 1, (int) left) != 1)
        return FALSE;
      got = recv (c->fd, chunk, sizeof chunk, 0);
      if (got <= 0)
        {
          *closed = TRUE;
          return FALSE;
        }
      g_byte_array_append (c->in, chunk, (guint) got);
    }
}

static void
client_expect (Client *c, guint8 type, guint32 channel, MvAgentFrame *frame)
{
  gboolean closed;

  g_assert_true (client_read (c, frame, READ_MS, &closed));
  g_assert_cmpstr (mv_agent_type_name (frame->type), ==, mv_agent_type_name (type));
  g_assert_cmpuint (frame->channel, ==, channel);
}

static char *
frame_str (const MvAgentFrame *frame, guint8 tag)
{
  MvAgentField field;

  if (!mv_agent_frame_find (frame, tag, &field))
    return NULL;
  return g_strndup ((const char *) field.value, field.len);
}

static guint32
frame_u32 (const MvAgentFrame *frame, guint8 tag)
{
  guint32 value = G_MAXUINT32;

  g_assert_true (mv_agent_frame_u32 (frame, tag, &value));
  return value;
}

/* HELLO both ways; returns the guest's state. */
static char *
client_hello (Client *c)
{
  MvAgentFrame frame;
  g_autofree char *agent_version = NULL;

  mv_agent_buf_begin (&c->out, MV_AGENT_HELLO, 0);
  mv_agent_buf_put_u32 (&c->out, MV_AGENT_F_VERSION, MV_AGENT_PROTOCOL_VERSION);
  client_send (c);
  client_expect (c, MV_AGENT_HELLO, 0, &frame);
  g_assert_cmpuint (frame_u32 (&frame, MV_AGENT_F_VERSION), ==, MV_AGENT_PROTOCOL_VERSION);
  agent_version = frame_str (&frame, MV_AGENT_F_AGENT_VERSION);
  g_assert_nonnull (agent_version);
  return frame_str (&frame, MV_AGENT_F_STATE);
}

typedef struct {
  GString *out[3];
  int      code;        /* -1 if killed */
  int      signum;
  char    *message;
  gsize    granted;     /* stdout bytes the guest was let send */
} ExecResult;

static void
exec_result_clear (ExecResult *r)
{
  for (int i = 1; i < 3; i++)
    if (r->out[i])
      g_string_free (r->out[i], TRUE);
  g_free (r->message);
}

G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (ExecResult, exec_result_clear)

static void
exec_start (Client *c, guint32 channel, const char *user, const char *const *argv)
{
  mv_agent_buf_begin (&c->out, MV_AGENT_EXEC, channel);
  for (; *argv; argv++)
    mv_agent_buf_put_str (&c->out, MV_AGENT_F_ARGV, *argv);
  if (user)
    mv_agent_buf_put_str (&c->out, MV_AGENT_F_USER, user);
  client_send (c);
}

static void
exec_stdin (Client *c, guint32 channel, const char *text)
{
  if (text)
    {
      mv_agent_buf_begin (&c->out, MV_AGENT_DATA, channel);
      mv_agent_buf_put_u32 (&c->out, MV_AGENT_F_STREAM, MV_AGENT_STREAM_STDIN);
      mv_agent_buf_put (&c->out, MV_AGENT_F_BYTES, text, strlen (text));
      client_send (c);
    }
  mv_agent_buf_begin (&c->out, MV_AGENT_EOF, channel);
  mv_agent_buf_put_u32 (&c->out, MV_AGENT_F_STREAM, MV_AGENT_STREAM_STDIN);
  client_send (c);
}

static void
grant (Client *c, guint32 channel, guint32 stream, guint32 bytes)
{
  mv_agent_buf_begin (&c->out, MV_AGENT_WINDOW, channel);
  mv_agent_buf_put_u32 (&c->out, MV_AGENT_F_STREAM, stream);
  mv_agent_buf_put_u32 (&c->out, MV_AGENT_F_GRANT, bytes);
  client_send (c);
}

/* Reads @channel's frames until its EXEC_EXIT, granting what it reads. */
static void
exec_wait (Client *c, guint32 channel, ExecResult *r)
{
  gboolean eof[3] = { TRUE, FALSE, FALSE };

  for (int i = 1; i < 3; i++)
    r->out[i] = g_string_new (NULL);
  for (;;)
    {
      MvAgentFrame frame;
      MvAgentField field;
      gboolean closed;
      guint32 stream;

      g_assert_true (client_read (c, &frame, READ_MS, &closed));
      if (frame.channel != channel || frame.type == MV_AGENT_WINDOW)
        continue;
      if (frame.type == MV_AGENT_EXEC_EXIT)
        {
          guint32 v;

          r->code = mv_agent_frame_u32 (&frame, MV_AGENT_F_EXIT_CODE, &v) ? (int) v : -1;
          r->signum = mv_agent_frame_u32 (&frame, MV_AGENT_F_SIGNAL, &v) ? (int) v : 0;
          r->message = frame_str (&frame, MV_AGENT_F_MESSAGE);
          /* Output and its ends come before the exit. */
          if (r->code != 125 && r->code != 126 && r->code != 127)
            g_assert_true (eof[1] && eof[2]);
          return;
        }
      stream = frame_u32 (&frame, MV_AGENT_F_STREAM);
      g_assert_cmpuint (stream, >=, 1);
      g_assert_cmpuint (stream, <=, 2);
      if (frame.type == MV_AGENT_EOF)
        {
          eof[stream] = TRUE;
          continue;
        }
      g_assert_cmpuint (frame.type, ==, MV_AGENT_DATA);
      g_assert_false (eof[stream]);
      g_assert_true (mv_agent_frame_find (&frame, MV_AGENT_F_BYTES, &field));
      g_assert_cmpuint (field.len, <=, MV_AGENT_DATA_MAX_BYTES);
      g_string_append_len (r->out[stream], (const char *) field.value, field.len);
      grant (c, channel, stream, field.len);
    }
}

static void
run_exec (Client *c, guint32 channel, const char *user, const char *const *argv,
          const char *input, ExecResult *r)
{
  exec_start (c, channel, user, argv);
  exec_stdin (c, channel, input);
  exec_wait (c, channel, r);
}

/* ---- tests ---- */

typedef struct {
  const char *vmm;          /* "firecracker", "cloud-hypervisor" */
  const char *end;          /* how its guest ends the VMM */
  gboolean    poweroff_ends;
} Kind;

static const Kind firecracker = { "firecracker", "reboot", FALSE };
static const Kind cloud_hypervisor = { "cloud-hypervisor", "poweroff", TRUE };

/* CONFIG runs `sh -c 'exit 3'`: READY, EXIT 3, and once acknowledged
 * the guest ends its VMM. */
static void
test_workload_exit (VmmFixture *fixture, gconstpointer data)
{
  const Kind *kind = data;
  g_autoptr (MvStarter) starter = vmm_fixture_starter (kind->vmm);
  g_autoptr (MvProcess) vmm = NULL;
  g_autoptr (MvHypervisor) hv = vmm_fixture_boot (fixture, starter, &vmm);
  g_autoptr (MvVmSpec) spec = vmm_fixture_spec (fixture);
  g_autoptr (Client) c = client_connect (spec->agent.socket_path);
  g_autofree char *state = client_hello (c);
  g_autofree char *later = NULL;
  MvAgentFrame frame;

  g_assert_cmpstr (state, ==, "unconfigured");
  mv_agent_buf_begin (&c->out, MV_AGENT_CONFIG, 0);
  mv_agent_buf_put_str (&c->out, MV_AGENT_F_INIT_MODE, "exec");
  mv_agent_buf_put_str (&c->out, MV_AGENT_F_END, kind->end);
  mv_agent_buf_put_str (&c->out, MV_AGENT_F_ARGV, "sh");
  mv_agent_buf_put_str (&c->out, MV_AGENT_F_ARGV, "-c");
  mv_agent_buf_put_str (&c->out, MV_AGENT_F_ARGV, "exit 3");
  client_send (c);
  client_expect (c, MV_AGENT_READY, 0, &frame);
  client_expect (c, MV_AGENT_EXIT, 0, &frame);
  g_assert_cmpuint (frame_u32 (&frame, MV_AGENT_F_EXIT_CODE), ==, 3);

  /* A second session sees the state, and the exit. */
  {
    g_autoptr (Client) other = client_connect (spec->agent.socket_path);
    later = client_hello (other);
  }
  g_assert_cmpstr (later, ==, "exited");
  g_assert_true (mv_process_alive (vmm));

  mv_agent_buf_begin (&c->out, MV_AGENT_EXIT_ACK, 0);
  client_send (c);
  g_assert_true (mv_process_wait (vmm, 5000));
  g_assert_true (vmm_fixture_wait_console (fixture->console_path,
                                           "microvmd-agent: workload exited with status 3", 1000));
}

/* A workload that is not in the guest's PATH: FAILED saying so. */
static void
test_workload_not_found (VmmFixture *fixture, gconstpointer data)
{
  const Kind *kind = data;
  g_autoptr (MvStarter) starter = vmm_fixture_starter (kind->vmm);
  g_autoptr (MvProcess) vmm = NULL;
  g_autoptr (MvHypervisor) hv = vmm_fixture_boot (fixture, starter, &vmm);
  g_autoptr (MvVmSpec) spec = vmm_fixture_spec (fixture);
  g_autoptr (Client) c = client_connect (spec->agent.socket_path);
  g_autofree char *state = client_hello (c);
  g_autofree char *message = NULL;
  MvAgentFrame frame;

  g_assert_cmpstr (state, ==, "unconfigured");
  mv_agent_buf_begin (&c->out, MV_AGENT_CONFIG, 0);
  mv_agent_buf_put_str (&c->out, MV_AGENT_F_END, kind->end);
  mv_agent_buf_put_str (&c->out, MV_AGENT_F_ARGV, "nginx");
  client_send (c);
  client_expect (c, MV_AGENT_FAILED, 0, &frame);
  message = frame_str (&frame, MV_AGENT_F_MESSAGE);
  g_assert_cmpstr (message, ==, "cmd: nginx: not found in the guest's PATH");
  g_assert_true (mv_process_wait (vmm, 5000));
}

static void
config_idle (Client *c)
{
  g_autofree guint8 *big = g_malloc (BIG_BYTES);
  MvAgentFrame frame;

  for (gsize i = 0; i < BIG_BYTES; i++)
    big[i] = (guint8) ('a' + i % 26);
  mv_agent_buf_begin (&c->out, MV_AGENT_CONFIG, 0);
  mv_agent_buf_put_str (&c->out, MV_AGENT_F_INIT_MODE, "exec");
  mv_agent_buf_put_str (&c->out, MV_AGENT_F_END, "poweroff");
  mv_agent_buf_put_str (&c->out, MV_AGENT_F_ROOT, "/dev/vda");
  mv_agent_buf_put_str (&c->out, MV_AGENT_F_HOSTNAME, "web-1");
  mv_agent_buf_put_str (&c->out, MV_AGENT_F_SSH_KEY, "ssh-ed25519 AAAAold old@host");
  mv_agent_buf_put_str (&c->out, MV_AGENT_F_DOCUMENT, "{\"role\":\"web\"}");
  mv_agent_buf_open (&c->out, MV_AGENT_F_MOUNT);
  mv_agent_buf_put_str (&c->out, MV_AGENT_F_MOUNT_TYPE, "file");
  mv_agent_buf_put_str (&c->out, MV_AGENT_F_TARGET, "/data/big");
  mv_agent_buf_put (&c->out, MV_AGENT_F_CONTENT, big, BIG_BYTES);
  mv_agent_buf_put_u32 (&c->out, MV_AGENT_F_MODE, 0644);
  mv_agent_buf_close (&c->out);
  mv_agent_buf_open (&c->out, MV_AGENT_F_MOUNT);
  mv_agent_buf_put_str (&c->out, MV_AGENT_F_MOUNT_TYPE, "tmpfs");
  mv_agent_buf_put_str (&c->out, MV_AGENT_F_TARGET, "/tmp");
  mv_agent_buf_close (&c->out);
  mv_agent_buf_open (&c->out, MV_AGENT_F_HEALTH_CHECK);
  mv_agent_buf_put_str (&c->out, MV_AGENT_F_ARGV, "test");
  mv_agent_buf_put_str (&c->out, MV_AGENT_F_ARGV, "-e");
  mv_agent_buf_put_str (&c->out, MV_AGENT_F_ARGV, "/tmp/ok");
  mv_agent_buf_put_u32 (&c->out, MV_AGENT_F_INTERVAL, 1);
  mv_agent_buf_put_u32 (&c->out, MV_AGENT_F_TIMEOUT, 1);
  mv_agent_buf_put_u32 (&c->out, MV_AGENT_F_RETRIES, 1);
  mv_agent_buf_put_u32 (&c->out, MV_AGENT_F_START_PERIOD, 60);
  mv_agent_buf_close (&c->out);
  client_send (c);
  client_expect (c, MV_AGENT_READY, 0, &frame);
}

/* Skips to the next HEALTH frame; its status. */
static char *
wait_health (Client *c)
{
  gint64 deadline = g_get_monotonic_time () + 10 * G_USEC_PER_SEC;

  while (g_get_monotonic_time () < deadline)
    {
      MvAgentFrame frame;
      gboolean closed;

      g_assert_true (client_read (c, &frame, READ_MS, &closed));
      if (frame.type == MV_AGENT_HEALTH)
        return frame_str (&frame, MV_AGENT_F_HEALTH_STATUS);
    }
  g_assert_not_reached ();
}

static void
test_execs (VmmFixture *fixture, gconstpointer data)
{
  const Kind *kind = data;
  g_autoptr (MvStarter) starter = vmm_fixture_starter (kind->vmm);
  g_autoptr (MvProcess) vmm = NULL;
  g_autoptr (MvHypervisor) hv = vmm_fixture_boot (fixture, starter, &vmm);
  g_autoptr (MvVmSpec) spec = vmm_fixture_spec (fixture);
  g_autoptr (Client) c = client_connect (spec->agent.socket_path);
  g_autoptr (Client) h = NULL;
  g_autofree char *state = client_hello (c);
  g_autofree char *status = NULL;
  const char *const cat[] = { "cat", NULL };
  const char *const id[] = { "id", "-u", NULL };
  const char *const echo[] = { "echo", "two", NULL };
  const char *const unknown[] = { "nosuch", NULL };
  const char *const keys[] = { "/run/microvmd/microvmd-agent", "authorized-keys", "tester", NULL };
  const char *const mounts[] = { "cat", "/proc/mounts", NULL };
  const char *const uname[] = { "uname", "-a", NULL };
  const char *const big[] = { "cat", "/data/big", NULL };
  const char *const touch[] = { "touch", "/tmp/ok", NULL };
  const char *const rm[] = { "rm", "/tmp/ok", NULL };
  const char *const doc[] = { "cat", "/run/microvmd/metadata.json", NULL };
  MvAgentFrame frame;

  g_assert_cmpstr (state, ==, "unconfigured");
  config_idle (c);

  /* cat echoes its stdin. */
  {
    g_auto (ExecResult) r = { 0 };
    run_exec (c, 1, NULL, cat, "through the guest\n", &r);
    g_assert_cmpint (r.code, ==, 0);
    g_assert_cmpstr (r.out[1]->str, ==, "through the guest\n");
  }
  /* As tester, uid 1000. */
  {
    g_auto (ExecResult) r = { 0 };
    run_exec (c, 2, "tester", id, NULL, &r);
    g_assert_cmpint (r.code, ==, 0);
    g_assert_cmpstr (r.out[1]->str, ==, "1000\n");
  }
  /* Two at once: cat waits for its stdin while echo runs and ends. */
  {
    g_auto (ExecResult) first = { 0 };
    g_auto (ExecResult) second = { 0 };

    exec_start (c, 3, NULL, cat);
    run_exec (c, 4, NULL, echo, NULL, &second);
    g_assert_cmpint (second.code, ==, 0);
    g_assert_cmpstr (second.out[1]->str, ==, "two\n");
    exec_stdin (c, 3, "first\n");
    exec_wait (c, 3, &first);
    g_assert_cmpint (first.code, ==, 0);
    g_assert_cmpstr (first.out[1]->str, ==, "first\n");
  }
  /* Not in PATH. */
  {
    g_auto (ExecResult) r = { 0 };
    run_exec (c, 5, NULL, unknown, NULL, &r);
    g_assert_cmpint (r.code, ==, 127);
    g_assert_cmpstr (r.message, ==, "nosuch: not found");
  }
  /* The root, the mounts, the hostname and the document as CONFIG said. */
  {
    g_auto (ExecResult) r = { 0 };
    g_auto (ExecResult) u = { 0 };
    g_auto (ExecResult) d = { 0 };
    run_exec (c, 6, NULL, mounts, NULL, &r);
    g_assert_cmpstr (r.out[1]->str, ==, "overlay / overlay rw 0 0\ntmpfs /tmp tmpfs rw 0 0\n");
    run_exec (c, 7, NULL, uname, NULL, &u);
    g_assert_cmpstr (u.out[1]->str, ==, "Linux web-1 6.1.0-microvmd-test #1 SMP x86_64 GNU/Linux\n");
    run_exec (c, 8, NULL, doc, NULL, &d);
    g_assert_cmpstr (d.out[1]->str, ==, "{\"role\":\"web\"}");
  }
  /* METADATA replaces the keys. */
  {
    g_auto (ExecResult) before = { 0 };
    g_auto (ExecResult) after = { 0 };

    run_exec (c, 9, NULL, keys, NULL, &before);
    g_assert_cmpstr (before.out[1]->str, ==, "ssh-ed25519 AAAAold old@host\n");
    mv_agent_buf_begin (&c->out, MV_AGENT_METADATA, 0);
    mv_agent_buf_put_str (&c->out, MV_AGENT_F_HOSTNAME, "web-1");
    mv_agent_buf_put_str (&c->out, MV_AGENT_F_SSH_KEY, "ssh-ed25519 AAAAone one@host");
    mv_agent_buf_put_str (&c->out, MV_AGENT_F_SSH_KEY, "ssh-ed25519 AAAAtwo two@host");
    mv_agent_buf_put_str (&c->out, MV_AGENT_F_DOCUMENT, "{}");
    client_send (c);
    run_exec (c, 10, NULL, keys, NULL, &after);
    g_assert_cmpint (after.code, ==, 0);
    g_assert_cmpstr (after.out[1]->str, ==,
                     "ssh-ed25519 AAAAone one@host\nssh-ed25519 AAAAtwo two@host\n");
  }
  /* Without grants the guest stops at the first window of 256 KiB. */
  {
    gsize got = 0;
    gboolean closed;

    exec_start (c, 11, NULL, big);
    exec_stdin (c, 11, NULL);
    while (client_read (c, &frame, 1000, &closed))
      {
        MvAgentField field;

        g_assert_cmpuint (frame.channel, ==, 11);
        g_assert_cmpuint (frame.type, !=, MV_AGENT_EXEC_EXIT);
        if (frame.type == MV_AGENT_DATA)
          {
            g_assert_true (mv_agent_frame_find (&frame, MV_AGENT_F_BYTES, &field));
            got += field.len;
          }
      }
    g_assert_false (closed);
    g_assert_cmpuint (got, ==, MV_AGENT_WINDOW_BYTES);
    /* With grants, the rest. */
    {
      g_auto (ExecResult) r = { 0 };
      grant (c, 11, MV_AGENT_STREAM_STDOUT, MV_AGENT_WINDOW_BYTES);
      exec_wait (c, 11, &r);
      g_assert_cmpint (r.code, ==, 0);
      g_assert_cmpuint (got + r.out[1]->len, ==, BIG_BYTES);
    }
  }

  /* A new session hears the health check's status after HELLO; it turns
   * healthy when the file is there and unhealthy when it is gone. */
  h = client_connect (spec->agent.socket_path);
  g_free (client_hello (h));
  client_expect (h, MV_AGENT_HEALTH, 0, &frame);
  status = frame_str (&frame, MV_AGENT_F_HEALTH_STATUS);
  g_assert_cmpstr (status, ==, "starting");
  g_clear_pointer (&status, g_free);
  {
    g_auto (ExecResult) r = { 0 };
    run_exec (c, 12, NULL, touch, NULL, &r);
    g_assert_cmpint (r.code, ==, 0);
  }
  status = wait_health (h);
  g_assert_cmpstr (status, ==, "healthy");
  g_clear_pointer (&status, g_free);
  {
    g_auto (ExecResult) r = { 0 };
    run_exec (c, 13, NULL, rm, NULL, &r);
    g_assert_cmpint (r.code, ==, 0);
  }
  status = wait_health (h);
  g_assert_cmpstr (status, ==, "unhealthy");

  /* PING is answered; a malformed frame ends that session only. */
  mv_agent_buf_begin (&h->out, MV_AGENT_PING, 0);
  mv_agent_buf_put (&h->out, MV_AGENT_F_BYTES, "beat", 4);
  client_send (h);
  client_expect (h, MV_AGENT_PONG, 0, &frame);
  g_assert_true (mv_agent_frame_find (&frame, MV_AGENT_F_BYTES, &(MvAgentField) { 0 }));
  {
    const guint8 bad[] = { 0, 0, 0, 9, MV_AGENT_PING, 0, 0, 0, 0, MV_AGENT_F_BYTES, 0, 0, 0 };
    gboolean closed;

    g_assert_cmpint (send (h->fd, bad, sizeof bad, MSG_NOSIGNAL), ==, (ssize_t) sizeof bad);
    while (client_read (h, &frame, READ_MS, &closed))
      ;
    g_assert_true (closed);
  }
  {
    g_auto (ExecResult) r = { 0 };
    run_exec (c, 14, NULL, echo, NULL, &r);
    g_assert_cmpstr (r.out[1]->str, ==, "two\n");
  }

  /* POWEROFF: the guest powers off, which ends Cloud Hypervisor; a
   * halted Firecracker stays until it is killed. */
  mv_agent_buf_begin (&c->out, MV_AGENT_POWEROFF, 0);
  client_send (c);
  g_assert_true (vmm_fixture_wait_console (fixture->console_path, "MICROVMD-POWEROFF agent", 5000));
  if (kind->poweroff_ends)
    g_assert_true (mv_process_wait (vmm, 5000));
  else
    g_assert_true (hv->destroy_vm (hv, NULL));
}

/* With INIT_MODE systemd the agent that took CONFIG hands over: its
 * session closes, and a new agent answers HELLO as running. */
static void
test_systemd (VmmFixture *fixture, gconstpointer data)
{
  const Kind *kind = data;
  g_autoptr (MvStarter) starter = vmm_fixture_starter (kind->vmm);
  g_autoptr (MvProcess) vmm = NULL;
  g_autoptr (MvHypervisor) hv = vmm_fixture_boot (fixture, starter, &vmm);
  g_autoptr (MvVmSpec) spec = vmm_fixture_spec (fixture);
  g_autoptr (Client) c = client_connect (spec->agent.socket_path);
  g_autoptr (Client) again = NULL;
  g_autofree char *state = client_hello (c);
  g_autofree char *running = NULL;
  const char *const echo[] = { "echo", "up", NULL };
  g_auto (ExecResult) r = { 0 };
  MvAgentFrame frame;
  gboolean closed;
  int fd = -1;

  g_assert_cmpstr (state, ==, "unconfigured");
  mv_agent_buf_begin (&c->out, MV_AGENT_CONFIG, 0);
  mv_agent_buf_put_str (&c->out, MV_AGENT_F_INIT_MODE, "systemd");
  mv_agent_buf_put_str (&c->out, MV_AGENT_F_END, kind->end);
  mv_agent_buf_put_str (&c->out, MV_AGENT_F_ROOT, "/dev/vda");
  client_send (c);
  g_assert_false (client_read (c, &frame, READ_MS, &closed));
  g_assert_true (closed);

  for (int i = 0; i < 100 && fd < 0; i++)
    {
      g_autoptr (GError) error = NULL;

      fd = mv_vsock_dial (spec->agent.socket_path, AGENT_PORT, READ_MS, &error);
      if (fd < 0)
        g_usleep (20 * 1000);
    }
  g_assert_cmpint (fd, >=, 0);
  again = g_new0 (Client, 1);
  again->fd = fd;
  again->in = g_byte_array_new ();
  mv_agent_buf_init (&again->out);
  running = client_hello (again);
  g_assert_cmpstr (running, ==, "running");
  run_exec (again, 1, NULL, echo, NULL, &r);
  g_assert_cmpstr (r.out[1]->str, ==, "up\n");
  g_assert_true (hv->destroy_vm (hv, NULL));
}

G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (VmmRestored, vmm_restored_clear)

/* A snapshot keeps the guest's state: its files, its hostname and its
 * workload, which goes on where it was. Sessions are not kept. */
static void
test_snapshot (VmmFixture *fixture, gconstpointer data)
{
  const Kind *kind = data;
  g_autoptr (MvStarter) starter = vmm_fixture_starter (kind->vmm);
  g_autoptr (MvProcess) vmm = NULL;
  g_autoptr (MvHypervisor) hv = vmm_fixture_boot (fixture, starter, &vmm);
  g_autoptr (MvVmSpec) spec = vmm_fixture_spec (fixture);
  g_autoptr (Client) c = client_connect (spec->agent.socket_path);
  g_autoptr (Client) after = NULL;
  g_autofree char *state = client_hello (c);
  g_autofree char *restored_state = NULL;
  const char *const touch[] = { "touch", "/tmp/kept", NULL };
  const char *const hostname[] = { "hostname", NULL };
  const char *const kept[] = { "test", "-e", "/tmp/kept", NULL };
  g_auto (VmmRestored) restored = { 0 };
  g_autoptr (GError) error = NULL;
  MvAgentFrame frame;
  gboolean closed;

  g_assert_cmpstr (state, ==, "unconfigured");
  mv_agent_buf_begin (&c->out, MV_AGENT_CONFIG, 0);
  mv_agent_buf_put_str (&c->out, MV_AGENT_F_END, kind->end);
  mv_agent_buf_put_str (&c->out, MV_AGENT_F_HOSTNAME, "snap-1");
  mv_agent_buf_put_str (&c->out, MV_AGENT_F_ARGV, "sh");
  mv_agent_buf_put_str (&c->out, MV_AGENT_F_ARGV, "-c");
  mv_agent_buf_put_str (&c->out, MV_AGENT_F_ARGV, "sleep 4; exit 4");
  client_send (c);
  client_expect (c, MV_AGENT_READY, 0, &frame);
  {
    g_auto (ExecResult) r = { 0 };
    run_exec (c, 1, NULL, touch, NULL, &r);
    g_assert_cmpint (r.code, ==, 0);
  }

  vmm_fixture_snapshot_restore (fixture, starter, hv, vmm, &restored);
  /* The session did not survive. */
  g_assert_false (client_read (c, &frame, READ_MS, &closed));
  g_assert_true (closed);
  g_assert_true (restored.hv->resume_vm (restored.hv, &error));
  g_assert_no_error (error);

  after = client_connect (restored.spec.agent_socket);
  restored_state = client_hello (after);
  g_assert_cmpstr (restored_state, ==, "running");
  {
    g_auto (ExecResult) name = { 0 };
    g_auto (ExecResult) file = { 0 };

    run_exec (after, 1, NULL, hostname, NULL, &name);
    g_assert_cmpstr (name.out[1]->str, ==, "snap-1\n");
    run_exec (after, 2, NULL, kept, NULL, &file);
    g_assert_cmpint (file.code, ==, 0);
  }
  /* The workload sleeps on, on the guest's clock, and exits 4. */
  do
    g_assert_true (client_read (after, &frame, 10000, &closed));
  while (frame.type != MV_AGENT_EXIT);
  g_assert_cmpuint (frame_u32 (&frame, MV_AGENT_F_EXIT_CODE), ==, 4);
  mv_agent_buf_begin (&after->out, MV_AGENT_EXIT_ACK, 0);
  client_send (after);
  g_assert_true (mv_process_wait (restored.vmm, 5000));
}

/* Begins a CONFIG on @c's output: TEMPLATE 1 if @template_boot,
 * @init_mode (NULL: none), @kind's END and @root; the caller adds the
 * rest and sends it. */
static void
begin_config (Client *c, const Kind *kind, gboolean template_boot, const char *init_mode,
              const char *root)
{
  mv_agent_buf_begin (&c->out, MV_AGENT_CONFIG, 0);
  if (template_boot)
    mv_agent_buf_put_u32 (&c->out, MV_AGENT_F_TEMPLATE, 1);
  if (init_mode)
    mv_agent_buf_put_str (&c->out, MV_AGENT_F_INIT_MODE, init_mode);
  mv_agent_buf_put_str (&c->out, MV_AGENT_F_END, kind->end);
  mv_agent_buf_put_str (&c->out, MV_AGENT_F_ROOT, root);
}

/* A CONFIG with TEMPLATE 1 sets up the root and nothing else: READY, no
 * hostname, no workload, and HELLO says template. Frozen and restored,
 * the guest is still one, and takes the machine's CONFIG after its
 * REIDENTIFY as a first one; later ones are ignored. */
static void
test_template (VmmFixture *fixture, gconstpointer data)
{
  const Kind *kind = data;
  g_autoptr (MvStarter) starter = vmm_fixture_starter (kind->vmm);
  g_autoptr (MvProcess) vmm = NULL;
  g_autoptr (MvHypervisor) hv = vmm_fixture_boot (fixture, starter, &vmm);
  g_autoptr (MvVmSpec) spec = vmm_fixture_spec (fixture);
  g_autoptr (Client) c = client_connect (spec->agent.socket_path);
  g_autoptr (Client) after = NULL;
  g_autofree char *state = client_hello (c);
  g_autofree char *template_state = NULL;
  g_autofree char *restored_state = NULL;
  g_autofree char *running = NULL;
  const char *const hostname[] = { "hostname", NULL };
  g_auto (VmmRestored) restored = { 0 };
  g_autoptr (GError) error = NULL;
  MvAgentFrame frame;
  gboolean closed;

  g_assert_cmpstr (state, ==, "unconfigured");
  begin_config (c, kind, TRUE, "exec", "/dev/vda");
  mv_agent_buf_put_str (&c->out, MV_AGENT_F_HOSTNAME, "template-1");
  mv_agent_buf_put_str (&c->out, MV_AGENT_F_ARGV, "sh");
  mv_agent_buf_put_str (&c->out, MV_AGENT_F_ARGV, "-c");
  mv_agent_buf_put_str (&c->out, MV_AGENT_F_ARGV, "exit 3");
  client_send (c);
  client_expect (c, MV_AGENT_READY, 0, &frame);
  {
    g_auto (ExecResult) name = { 0 };

    /* The exec's exit comes, and no EXIT: no workload ran. */
    run_exec (c, 1, NULL, hostname, NULL, &name);
    g_assert_cmpstr (name.out[1]->str, ==, "localhost\n");
  }
  {
    g_autoptr (Client) other = client_connect (spec->agent.socket_path);
    template_state = client_hello (other);
  }
  g_assert_cmpstr (template_state, ==, "template");

  vmm_fixture_snapshot_restore (fixture, starter, hv, vmm, &restored);
  g_assert_false (client_read (c, &frame, READ_MS, &closed));
  g_assert_true (closed);
  g_assert_true (restored.hv->resume_vm (restored.hv, &error));
  g_assert_no_error (error);

  after = client_connect (restored.spec.agent_socket);
  restored_state = client_hello (after);
  g_assert_cmpstr (restored_state, ==, "template");
  /* The host's REIDENTIFY comes first; the simulated agent skips it, and
   * answers the PING behind it. */
  mv_agent_buf_begin (&after->out, MV_AGENT_REIDENTIFY, 0);
  mv_agent_buf_put_str (&after->out, MV_AGENT_F_HOSTNAME, "web-2");
  client_send (after);
  mv_agent_buf_begin (&after->out, MV_AGENT_PING, 0);
  client_send (after);
  client_expect (after, MV_AGENT_PONG, 0, &frame);
  begin_config (after, kind, FALSE, "exec", "/dev/vda");
  mv_agent_buf_put_str (&after->out, MV_AGENT_F_HOSTNAME, "web-2");
  mv_agent_buf_put_str (&after->out, MV_AGENT_F_ARGV, "sh");
  mv_agent_buf_put_str (&after->out, MV_AGENT_F_ARGV, "-c");
  mv_agent_buf_put_str (&after->out, MV_AGENT_F_ARGV, "sleep 1; exit 3");
  client_send (after);
  client_expect (after, MV_AGENT_READY, 0, &frame);
  {
    g_autoptr (Client) other = client_connect (restored.spec.agent_socket);
    running = client_hello (other);
  }
  g_assert_cmpstr (running, ==, "running");
  /* Only that one counts: this one would fail on its ROOT. */
  mv_agent_buf_begin (&after->out, MV_AGENT_CONFIG, 0);
  mv_agent_buf_put_str (&after->out, MV_AGENT_F_ROOT, "/dev/vdc");
  mv_agent_buf_put_str (&after->out, MV_AGENT_F_HOSTNAME, "web-3");
  client_send (after);
  {
    g_auto (ExecResult) name = { 0 };

    run_exec (after, 1, NULL, hostname, NULL, &name);
    g_assert_cmpstr (name.out[1]->str, ==, "web-2\n");
  }
  do
    g_assert_true (client_read (after, &frame, 10000, &closed));
  while (frame.type != MV_AGENT_EXIT);
  g_assert_cmpuint (frame_u32 (&frame, MV_AGENT_F_EXIT_CODE), ==, 3);
  mv_agent_buf_begin (&after->out, MV_AGENT_EXIT_ACK, 0);
  client_send (after);
  g_assert_true (mv_process_wait (restored.vmm, 5000));
}

/* Sends @c a CONFIG with @root (and TEMPLATE 1 if @template_boot) in
 * @init_mode; expects FAILED saying @message, and the guest to end. */
static void
template_refused (Client *c, MvProcess *vmm, const Kind *kind, gboolean template_boot,
                  const char *init_mode, const char *root, const char *message)
{
  g_autofree char *got = NULL;
  MvAgentFrame frame;

  begin_config (c, kind, template_boot, init_mode, root);
  mv_agent_buf_put_str (&c->out, MV_AGENT_F_ARGV, "true");
  client_send (c);
  client_expect (c, MV_AGENT_FAILED, 0, &frame);
  got = frame_str (&frame, MV_AGENT_F_MESSAGE);
  g_assert_cmpstr (got, ==, message);
  g_assert_true (mv_process_wait (vmm, 5000));
}

/* A template boots in exec mode. */
static void
test_template_systemd (VmmFixture *fixture, gconstpointer data)
{
  const Kind *kind = data;
  g_autoptr (MvStarter) starter = vmm_fixture_starter (kind->vmm);
  g_autoptr (MvProcess) vmm = NULL;
  g_autoptr (MvHypervisor) hv = vmm_fixture_boot (fixture, starter, &vmm);
  g_autoptr (MvVmSpec) spec = vmm_fixture_spec (fixture);
  g_autoptr (Client) c = client_connect (spec->agent.socket_path);
  g_autofree char *state = client_hello (c);

  g_assert_cmpstr (state, ==, "unconfigured");
  template_refused (c, vmm, kind, TRUE, "systemd", "/dev/vda",
                    "CONFIG: a TEMPLATE boots in exec mode, not systemd");
}

/* The CONFIG after a template's names the template's root. */
static void
test_template_other_root (VmmFixture *fixture, gconstpointer data)
{
  const Kind *kind = data;
  g_autoptr (MvStarter) starter = vmm_fixture_starter (kind->vmm);
  g_autoptr (MvProcess) vmm = NULL;
  g_autoptr (MvHypervisor) hv = vmm_fixture_boot (fixture, starter, &vmm);
  g_autoptr (MvVmSpec) spec = vmm_fixture_spec (fixture);
  g_autoptr (Client) c = client_connect (spec->agent.socket_path);
  g_autofree char *state = client_hello (c);
  MvAgentFrame frame;

  g_assert_cmpstr (state, ==, "unconfigured");
  begin_config (c, kind, TRUE, NULL, "/dev/vda");
  client_send (c);
  client_expect (c, MV_AGENT_READY, 0, &frame);
  template_refused (c, vmm, kind, FALSE, "exec", "/dev/vdc",
                    "CONFIG: ROOT /dev/vdc differs from the template's /dev/vda");
}

#define VMM_TEST(name, kind, func) \
  g_test_add (name, VmmFixture, kind, vmm_fixture_setup, func, vmm_fixture_teardown)

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  VMM_TEST ("/agent/firecracker/workload-exit", &firecracker, test_workload_exit);
  VMM_TEST ("/agent/firecracker/workload-not-found", &firecracker, test_workload_not_found);
  VMM_TEST ("/agent/firecracker/execs", &firecracker, test_execs);
  VMM_TEST ("/agent/firecracker/systemd", &firecracker, test_systemd);
  VMM_TEST ("/agent/firecracker/snapshot", &firecracker, test_snapshot);
  VMM_TEST ("/agent/firecracker/template", &firecracker, test_template);
  VMM_TEST ("/agent/firecracker/template-systemd", &firecracker, test_template_systemd);
  VMM_TEST ("/agent/firecracker/template-other-root", &firecracker, test_template_other_root);
  VMM_TEST ("/agent/cloud-hypervisor/workload-exit", &cloud_hypervisor, test_workload_exit);
  VMM_TEST ("/agent/cloud-hypervisor/workload-not-found", &cloud_hypervisor,
            test_workload_not_found);
  VMM_TEST ("/agent/cloud-hypervisor/execs", &cloud_hypervisor, test_execs);
  VMM_TEST ("/agent/cloud-hypervisor/systemd", &cloud_hypervisor, test_systemd);
  VMM_TEST ("/agent/cloud-hypervisor/snapshot", &cloud_hypervisor, test_snapshot);
  VMM_TEST ("/agent/cloud-hypervisor/template", &cloud_hypervisor, test_template);
  VMM_TEST ("/agent/cloud-hypervisor/template-systemd", &cloud_hypervisor,
            test_template_systemd);
  VMM_TEST ("/agent/cloud-hypervisor/template-other-root", &cloud_hypervisor,
            test_template_other_root);
  return g_test_run ();
}
