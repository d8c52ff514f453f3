/* The host's side of REIDENTIFY (src/guest/): the frame as it is built
 * from a spec and a network attachment, and the session that holds it
 * until the agent answers, sends it again on a new connection, and tells
 * an agent that skipped it (an older one) by the PONG that comes first.
 * The agent is a thread on the far end of a Unix socket. */
#include "guest/agent.h"

#include <gio/gio.h>
#include <glib/gstdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static const guint8 nested[] = { MV_AGENT_F_NET };

static GBytes *
field_bytes (const MvAgentFrame *frame, guint8 tag)
{
  MvAgentField f;

  if (!mv_agent_frame_find (frame, tag, &f))
    return NULL;
  return g_bytes_new (f.value, f.len);
}

static char *
field_string (const guint8 *data, gsize len, guint8 tag)
{
  MvAgentFields fields;
  MvAgentField f;

  mv_agent_fields_init (&fields, data, len);
  while (mv_agent_fields_next (&fields, &f) > 0)
    if (f.tag == tag)
      return g_strndup ((const char *) f.value, f.len);
  return NULL;
}

static MvSpec *
fork_spec (void)
{
  MvSpec *spec = mv_spec_new ();

  spec->name = g_strdup ("fork-1");
  g_ptr_array_add (spec->ssh_keys, g_strdup ("ssh-ed25519 AAAAkey k@host"));
  return spec;
}

static MvNetworkAttachment *
fork_network (void)
{
  MvNetworkAttachment *net = g_new0 (MvNetworkAttachment, 1);

  net->network_id = g_strdup ("n");
  net->tap_device = g_strdup ("tap0");
  net->mac_address = g_strdup ("02:00:00:00:00:2a");
  net->address = g_strdup ("10.1.2.42/24");
  net->gateway = g_strdup ("10.1.2.1");
  net->mtu = 1400;
  return net;
}

static void
test_frame (void)
{
  g_autoptr (MvSpec) spec = fork_spec ();
  g_autoptr (MvNetworkAttachment) net = fork_network ();
  g_autoptr (GError) error = NULL;
  g_autoptr (GBytes) frame_bytes = NULL, bare_bytes = NULL, entropy_got = NULL;
  g_autofree char *hostname = NULL, *key = NULL, *document = NULL;
  g_autofree char *mac = NULL, *address = NULL, *gateway = NULL, *dns = NULL;
  guint8 entropy[MV_AGENT_ENTROPY_MIN_BYTES];
  MvAgentFrame frame;
  MvAgentField net_field;
  const char *why = NULL;
  gsize len;
  const guint8 *data;
  guint32 mtu = 0;

  for (guint i = 0; i < sizeof entropy; i++)
    entropy[i] = (guint8) (i * 7 + 1);
  frame_bytes = mv_agent_reidentify_frame (spec, net, entropy, sizeof entropy, &error);
  g_assert_no_error (error);
  data = g_bytes_get_data (frame_bytes, &len);
  g_assert_cmpint (mv_agent_frame_parse (data, len, &frame, &why), ==, (long) len);
  g_assert_cmpuint (frame.type, ==, MV_AGENT_REIDENTIFY);
  g_assert_cmpuint (frame.channel, ==, 0);
  g_assert_true (mv_agent_fields_valid (frame.payload, frame.payload_len, nested, sizeof nested));

  entropy_got = field_bytes (&frame, MV_AGENT_F_ENTROPY);
  g_assert_nonnull (entropy_got);
  g_assert_cmpmem (g_bytes_get_data (entropy_got, NULL), g_bytes_get_size (entropy_got),
                   entropy, sizeof entropy);
  /* No hostname in the spec: the machine's name. */
  hostname = field_string (frame.payload, frame.payload_len, MV_AGENT_F_HOSTNAME);
  g_assert_cmpstr (hostname, ==, "fork-1");
  key = field_string (frame.payload, frame.payload_len, MV_AGENT_F_SSH_KEY);
  g_assert_cmpstr (key, ==, "ssh-ed25519 AAAAkey k@host");
  document = field_string (frame.payload, frame.payload_len, MV_AGENT_F_DOCUMENT);
  g_assert_nonnull (document);
  g_assert_true (g_str_has_prefix (document, "{"));

  /* NET as CONFIG's: the gateway is the name server too. */
  g_assert_true (mv_agent_frame_find (&frame, MV_AGENT_F_NET, &net_field));
  mac = field_string (net_field.value, net_field.len, MV_AGENT_F_MAC);
  address = field_string (net_field.value, net_field.len, MV_AGENT_F_ADDRESS);
  gateway = field_string (net_field.value, net_field.len, MV_AGENT_F_GATEWAY);
  dns = field_string (net_field.value, net_field.len, MV_AGENT_F_DNS);
  g_assert_cmpstr (mac, ==, "02:00:00:00:00:2a");
  g_assert_cmpstr (address, ==, "10.1.2.42/24");
  g_assert_cmpstr (gateway, ==, "10.1.2.1");
  g_assert_cmpstr (dns, ==, "10.1.2.1");
  {
    MvAgentFrame inner = { .payload = net_field.value, .payload_len = net_field.len };

    g_assert_true (mv_agent_frame_u32 (&inner, MV_AGENT_F_MTU, &mtu));
    g_assert_cmpuint (mtu, ==, 1400);
  }

  /* Without a network, the interface is not named at all. */
  bare_bytes = mv_agent_reidentify_frame (spec, NULL, entropy, sizeof entropy, &error);
  g_assert_no_error (error);
  data = g_bytes_get_data (bare_bytes, &len);
  g_assert_cmpint (mv_agent_frame_parse (data, len, &frame, &why), ==, (long) len);
  g_assert_false (mv_agent_frame_find (&frame, MV_AGENT_F_NET, &net_field));
  g_assert_true (mv_agent_frame_find (&frame, MV_AGENT_F_ENTROPY, &net_field));
}

/* ---- a session against a scripted agent ---- */

typedef enum {
  AGENT_ANSWERS,      /* REIDENTIFIED, then PONG */
  AGENT_OLD,          /* skips REIDENTIFY: PONG only */
  AGENT_DROPS_FIRST,  /* closes after the first REIDENTIFY, answers it on the next connection */
} Script;

typedef struct {
  Script   script;
  int      listen_fd;
  guint    reidentifies;   /* REIDENTIFY frames the agent got */
  guint    connections;
} FakeAgent;

/* The next frame on @fd: its type, its payload in @payload; 0 at the end. */
static guint8
read_frame (int fd, GByteArray *in, GBytes **payload)
{
  for (;;)
    {
      MvAgentFrame frame;
      const char *why = NULL;
      long used = mv_agent_frame_parse (in->data, in->len, &frame, &why);
      guint8 chunk[4096];
      ssize_t n;

      g_assert_cmpint (used, >=, 0);
      if (used > 0)
        {
          guint8 type = frame.type;

          *payload = g_bytes_new (frame.payload, frame.payload_len);
          g_byte_array_remove_range (in, 0, (guint) used);
          return type;
        }
      n = read (fd, chunk, sizeof chunk);
      if (n <= 0)
        return 0;
      g_byte_array_append (in, chunk, (guint) n);
    }
}

static void
write_buf (int fd, MvAgentBuf *b)
{
  g_assert_true (mv_agent_buf_end (b));
  g_assert_cmpint (write (fd, b->data, b->len), ==, (ssize_t) b->len);
  mv_agent_buf_clear (b);
}

static void
serve_connection (FakeAgent *agent, int fd, gboolean drop)
{
  g_autoptr (GByteArray) in = g_byte_array_new ();
  guint8 type;
  GBytes *payload = NULL;
  MvAgentBuf b;

  mv_agent_buf_init (&b);
  while ((type = read_frame (fd, in, &payload)) != 0)
    {
      gsize len;
      const guint8 *data = g_bytes_get_data (payload, &len);
      MvAgentFrame frame = { .type = type, .payload = data, .payload_len = (guint32) len };
      MvAgentField f;

      switch (type)
        {
        case MV_AGENT_HELLO:
          mv_agent_buf_begin (&b, MV_AGENT_HELLO, 0);
          mv_agent_buf_put_u32 (&b, MV_AGENT_F_VERSION, MV_AGENT_PROTOCOL_VERSION);
          mv_agent_buf_put_str (&b, MV_AGENT_F_AGENT_VERSION, "test");
          mv_agent_buf_put_u64 (&b, MV_AGENT_F_INSTANCE, 1);
          mv_agent_buf_put_str (&b, MV_AGENT_F_STATE, "running");
          write_buf (fd, &b);
          break;
        case MV_AGENT_REIDENTIFY:
          g_assert_true (mv_agent_frame_find (&frame, MV_AGENT_F_ENTROPY, &f));
          g_assert_cmpuint (f.len, >=, MV_AGENT_ENTROPY_MIN_BYTES);
          g_atomic_int_inc (&agent->reidentifies);
          if (drop)
            {
              g_bytes_unref (payload);
              return;
            }
          if (agent->script == AGENT_OLD)
            break;
          mv_agent_buf_begin (&b, MV_AGENT_REIDENTIFIED, 0);
          mv_agent_buf_put_str (&b, MV_AGENT_F_CHANGED, "entropy");
          mv_agent_buf_put_str (&b, MV_AGENT_F_CHANGED, "hostname");
          write_buf (fd, &b);
          break;
        case MV_AGENT_PING:
          g_assert_true (mv_agent_frame_find (&frame, MV_AGENT_F_BYTES, &f));
          mv_agent_buf_begin (&b, MV_AGENT_PONG, 0);
          mv_agent_buf_put (&b, MV_AGENT_F_BYTES, f.value, f.len);
          write_buf (fd, &b);
          break;
        default:
          break;
        }
      g_clear_pointer (&payload, g_bytes_unref);
    }
}

static gpointer
fake_agent_thread (gpointer data)
{
  FakeAgent *agent = data;
  guint wanted = agent->script == AGENT_DROPS_FIRST ? 2 : 1;

  for (guint i = 0; i < wanted; i++)
    {
      int fd = accept (agent->listen_fd, NULL, NULL);

      g_assert_cmpint (fd, >=, 0);
      g_atomic_int_inc (&agent->connections);
      serve_connection (agent, fd, agent->script == AGENT_DROPS_FIRST && i == 0);
      close (fd);
    }
  return NULL;
}

typedef struct {
  guint     calls;
  gboolean  known;
  char     *changed;
  char     *message;
} Heard;

static void
on_reidentified (gboolean known, const char *const *changed, const char *message, gpointer data)
{
  Heard *heard = data;

  heard->calls++;
  heard->known = known;
  g_free (heard->changed);
  heard->changed = g_strjoinv (" ", (char **) changed);
  g_free (heard->message);
  heard->message = g_strdup (message);
}

static void
run_script (Script script, Heard *heard, FakeAgent *agent)
{
  g_autofree char *dir = g_dir_make_tmp ("reid-XXXXXX", NULL);
  g_autofree char *path = g_build_filename (dir, "agent.sock", NULL);
  struct sockaddr_un addr = { .sun_family = AF_UNIX };
  MvAgentChannel channel = { .kind = MV_AGENT_CHANNEL_SERIAL, .socket_path = path };
  MvAgentSessionEvents events = { .reidentified = on_reidentified };
  g_autoptr (MvSpec) spec = fork_spec ();
  g_autoptr (GBytes) frame = NULL;
  guint8 entropy[MV_AGENT_ENTROPY_MIN_BYTES] = { 1 };
  MvAgentSession *session;
  GThread *thread;
  gint64 deadline;

  agent->script = script;
  agent->listen_fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  g_assert_cmpint (agent->listen_fd, >=, 0);
  g_strlcpy (addr.sun_path, path, sizeof addr.sun_path);
  g_assert_cmpint (bind (agent->listen_fd, (struct sockaddr *) &addr, sizeof addr), ==, 0);
  g_assert_cmpint (listen (agent->listen_fd, 4), ==, 0);
  thread = g_thread_new ("fake-agent", fake_agent_thread, agent);

  frame = mv_agent_reidentify_frame (spec, NULL, entropy, sizeof entropy, NULL);
  session = mv_agent_session_new (&channel, NULL, &events, heard);
  /* Asked before the agent has answered: held until it does. */
  mv_agent_session_reidentify (session, frame);
  deadline = g_get_monotonic_time () + 20 * G_USEC_PER_SEC;
  while (heard->calls == 0)
    {
      g_assert_cmpint (g_get_monotonic_time (), <, deadline);
      g_main_context_iteration (NULL, FALSE);
      g_usleep (5000);
    }
  /* Anything more that would come (it must not). */
  for (int i = 0; i < 50; i++)
    {
      g_main_context_iteration (NULL, FALSE);
      g_usleep (2000);
    }
  mv_agent_session_free (session);
  g_thread_join (thread);
  close (agent->listen_fd);
  g_unlink (path);
  g_rmdir (dir);
}

static void
heard_clear (Heard *heard)
{
  g_free (heard->changed);
  g_free (heard->message);
}

static void
test_session_answered (void)
{
  Heard heard = { 0 };
  FakeAgent agent = { 0 };

  run_script (AGENT_ANSWERS, &heard, &agent);
  g_assert_cmpuint (heard.calls, ==, 1);
  g_assert_true (heard.known);
  g_assert_cmpstr (heard.changed, ==, "entropy hostname");
  g_assert_null (heard.message);
  g_assert_cmpuint (agent.reidentifies, ==, 1);
  heard_clear (&heard);
}

static void
test_session_old_agent (void)
{
  Heard heard = { 0 };
  FakeAgent agent = { 0 };

  run_script (AGENT_OLD, &heard, &agent);
  g_assert_cmpuint (heard.calls, ==, 1);
  g_assert_false (heard.known);
  g_assert_cmpstr (heard.changed, ==, "");
  g_assert_cmpuint (agent.reidentifies, ==, 1);
  heard_clear (&heard);
}

static void
test_session_again_after_reconnect (void)
{
  Heard heard = { 0 };
  FakeAgent agent = { 0 };

  run_script (AGENT_DROPS_FIRST, &heard, &agent);
  g_assert_cmpuint (agent.connections, ==, 2);
  g_assert_cmpuint (agent.reidentifies, ==, 2);
  g_assert_cmpuint (heard.calls, ==, 1);
  g_assert_true (heard.known);
  g_assert_cmpstr (heard.changed, ==, "entropy hostname");
  heard_clear (&heard);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/agent/reidentify/frame", test_frame);
  g_test_add_func ("/agent/reidentify/session-answered", test_session_answered);
  g_test_add_func ("/agent/reidentify/session-old-agent", test_session_old_agent);
  g_test_add_func ("/agent/reidentify/session-again-after-reconnect",
                   test_session_again_after_reconnect);
  return g_test_run ();
}
