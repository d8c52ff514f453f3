/* What a guest may send to the DNS server on its gateway (network/dns.h).
 * The first byte of the input says how: even, the rest is one UDP
 * datagram; odd, the rest is a TCP stream (length-prefixed messages, or
 * anything). The server runs on 127.0.0.1 with no upstreams; after each
 * input a well-formed query must still be answered, on the same TCP
 * connection unless the server closed it, and every answer must be a
 * response that carries a header. */
#include "fuzz-common.h"
#include "network/dns.h"

#include <arpa/inet.h>
#include <errno.h>
#include <glib-unix.h>
#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define NETWORK     "fuzz"
#define PROBE_ID    0xbeef
#define WAIT_US     (5 * G_USEC_PER_SEC)

static MvDns *dns;
static guint16 port;

/* web.microvm. A, with PROBE_ID. */
static const guint8 probe[] = {
  0xbe, 0xef, 0x01, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
  3, 'w', 'e', 'b', 7, 'm', 'i', 'c', 'r', 'o', 'v', 'm', 0,
  0x00, 0x01, 0x00, 0x01,
};

static GPtrArray *
lookup_host (const char *network_id, const char *name, gpointer data)
{
  GPtrArray *array = g_ptr_array_new_with_free_func (g_free);

  if (g_str_equal (name, "web"))
    g_ptr_array_add (array, g_strdup ("10.0.0.5"));
  return array;
}

static GPtrArray *
lookup_addr (const char *network_id, guint32 address, gpointer data)
{
  GPtrArray *array = g_ptr_array_new_with_free_func (g_free);

  if (address == 0x0a000005)
    g_ptr_array_add (array, g_strdup ("web"));
  return array;
}

int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
  MvDnsOptions options = { .domain = "microvm" };

  mv_fuzz_init ();
  dns = mv_dns_new (&options, lookup_host, lookup_addr, NULL);
  /* A free port on loopback for both UDP and TCP. */
  for (port = 20053; port < 20553; port++)
    if (mv_dns_serve (dns, NETWORK, INADDR_LOOPBACK, port, NULL))
      return 0;
  mv_fuzz_fail ("no port to serve on between 20053 and 20552");
}

static int
client (int type)
{
  struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons (port),
                             .sin_addr.s_addr = htonl (INADDR_LOOPBACK) };
  int fd = socket (AF_INET, type | SOCK_CLOEXEC, 0);

  if (fd < 0)
    mv_fuzz_fail ("cannot make a socket: %s", g_strerror (errno));
  if (connect (fd, (struct sockaddr *) &sin, sizeof sin) < 0)
    {
      struct pollfd pfd = { .fd = fd, .events = POLLOUT };
      int err = errno;
      socklen_t len = sizeof err;

      /* A signal (libFuzzer's own timers) interrupted the connect, which
       * goes on by itself: wait for it to end and ask how it ended. */
      if (err == EINTR)
        {
          while (poll (&pfd, 1, -1) < 0 && errno == EINTR)
            ;
          if (getsockopt (fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
            err = errno;
        }
      if (err != 0)
        mv_fuzz_fail ("cannot reach the server: %s", g_strerror (err));
    }
  return fd;
}

static void
check_answer (const guint8 *data, gsize len)
{
  if (len < 12 || !(data[2] & 0x80))
    mv_fuzz_fail ("invariant: an answer of %zu bytes that is not a response", len);
}

/* Reads from @fd, running the server, until the probe's answer came (TRUE)
 * or the server closed the connection (FALSE). */
static gboolean
await_probe (int fd, gboolean tcp)
{
  g_autoptr (GByteArray) in = g_byte_array_new ();
  gint64 deadline = g_get_monotonic_time () + WAIT_US;

  while (g_get_monotonic_time () < deadline)
    {
      guint8 buf[65536];
      ssize_t n;

      while (g_main_context_iteration (NULL, FALSE))
        ;
      n = recv (fd, buf, sizeof buf, MSG_DONTWAIT);
      /* Closed with the probe unread, the server's side resets. */
      if (tcp && (n == 0 || (n < 0 && errno == ECONNRESET)))
        return FALSE;
      if (n < 0)
        {
          if (errno != EAGAIN)
            mv_fuzz_fail ("cannot read an answer: %s", g_strerror (errno));
          g_usleep (50);
          continue;
        }
      if (!tcp)
        {
          check_answer (buf, n);
          if (buf[0] == 0xbe && buf[1] == 0xef && n > 12 && buf[7] == 1)
            return TRUE;
          continue;
        }
      g_byte_array_append (in, buf, n);
      while (in->len >= 2 && in->len >= 2u + ((in->data[0] << 8) | in->data[1]))
        {
          gsize len = (in->data[0] << 8) | in->data[1];
          gboolean is_probe;

          check_answer (in->data + 2, len);
          is_probe = in->data[2] == 0xbe && in->data[3] == 0xef && in->data[9] == 1;
          g_byte_array_remove_range (in, 0, 2 + len);
          if (is_probe)
            return TRUE;
        }
    }
  mv_fuzz_fail ("invariant: the server did not answer a well-formed query within 5 s");
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  gboolean tcp;
  int fd;

  if (size < 1 || size > 65000)
    return 0;
  tcp = data[0] & 1;
  data++;
  size--;
  fd = client (tcp ? SOCK_STREAM : SOCK_DGRAM);
  if (tcp)
    {
      guint8 prefix[2] = { sizeof probe >> 8, sizeof probe & 0xff };

      /* Small enough for the socket's buffer: the server reads it later. */
      if (send (fd, data, size, MSG_NOSIGNAL) < 0 || send (fd, prefix, 2, MSG_NOSIGNAL) < 0 ||
          send (fd, probe, sizeof probe, MSG_NOSIGNAL) < 0)
        {
          close (fd);
          return 0;
        }
      /* A message the input left unfinished would swallow the probe: at
       * the end of the stream the server closes instead of waiting. */
      shutdown (fd, SHUT_WR);
    }
  else
    {
      send (fd, data, size, 0);
      send (fd, probe, sizeof probe, 0);
    }
  if (!await_probe (fd, tcp))
    {
      /* The server dropped the connection: it must still serve others. */
      close (fd);
      fd = client (SOCK_DGRAM);
      send (fd, probe, sizeof probe, 0);
      await_probe (fd, FALSE);
    }
  close (fd);
  /* Let the server see the close before the next input. */
  while (g_main_context_iteration (NULL, FALSE))
    ;
  return 0;
}
