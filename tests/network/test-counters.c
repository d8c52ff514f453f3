/* mv_net_counters_read() on a real TAP, with this process as its guest,
 * and on a veth pair, in a network namespace of the test's own
 * (private-netns.h). */
#include "network/counters.h"
#include "core/errors.h"
#include "private-netns.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <linux/if_tun.h>

#define TAP          "mvctap0"
#define TAP_HOST     "10.78.0.1"
#define TAP_GUEST    "10.78.0.2"
#define GUEST_MAC    "02:00:00:00:00:02"
#define VETH_A       "mvcv0"
#define VETH_B       "mvcv1"
#define VETH_A_ADDR  "10.79.0.1"
#define VETH_PEER    "10.79.0.2"
#define FRAME_LEN    120
#define COUNT        17
#define DATAGRAM_LEN 200
/* An IPv4 datagram of DATAGRAM_LEN bytes of UDP payload in a frame. */
#define FRAME_OF_DATAGRAM (14 + 20 + 8 + DATAGRAM_LEN)

static MvNetCounters
read_counters (const char *ifname)
{
  g_autoptr(GError) error = NULL;
  MvNetCounters counters;

  memset (&counters, 0xff, sizeof counters);
  g_assert_true (mv_net_counters_read (ifname, &counters, &error));
  g_assert_no_error (error);
  return counters;
}

static void
send_datagrams (const char *address,
                guint       count)
{
  struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons (9) };
  char payload[DATAGRAM_LEN] = { 0 };
  int fd = socket (AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

  g_assert_cmpint (fd, >=, 0);
  g_assert_cmpint (inet_pton (AF_INET, address, &to.sin_addr), ==, 1);
  for (guint i = 0; i < count; i++)
    g_assert_cmpint (sendto (fd, payload, sizeof payload, 0, (struct sockaddr *) &to, sizeof to),
                     ==, sizeof payload);
  close (fd);
}

/* Opens the TAP as its guest would (a VMM holds this descriptor). */
static int
open_tap (const char *name)
{
  struct ifreq ifr = { .ifr_flags = IFF_TAP | IFF_NO_PI };
  int fd = open ("/dev/net/tun", O_RDWR | O_CLOEXEC | O_NONBLOCK);

  g_assert_cmpint (fd, >=, 0);
  g_strlcpy (ifr.ifr_name, name, sizeof ifr.ifr_name);
  g_assert_cmpint (ioctl (fd, TUNSETIFF, &ifr), ==, 0);
  return fd;
}

/* Frames the guest received, read off the TAP. */
static guint
drain (int fd)
{
  char frame[2048];
  guint frames = 0;

  while (read (fd, frame, sizeof frame) > 0)
    frames++;
  g_assert_cmpint (errno, ==, EAGAIN);
  return frames;
}

static void
test_tap (void)
{
  int fd = open_tap (TAP);
  guint8 frame[FRAME_LEN] = {
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0, 0, 0, 0, 0x02,
    0x88, 0xb5,     /* the local experimental EtherType: nobody's */
  };
  MvNetCounters before, after;

  mv_test_cmd ("ip", "addr", "add", TAP_HOST "/24", "dev", TAP, NULL);
  mv_test_cmd ("ip", "link", "set", "dev", TAP, "up", NULL);
  mv_test_wait_link_up (TAP);
  mv_test_cmd ("ip", "neigh", "replace", TAP_GUEST, "lladdr", GUEST_MAC, "dev", TAP,
               "nud", "permanent", NULL);
  drain (fd);

  /* The guest sends: the TAP receives. */
  before = read_counters (TAP);
  for (guint i = 0; i < COUNT; i++)
    g_assert_cmpint (write (fd, frame, sizeof frame), ==, sizeof frame);
  after = read_counters (TAP);
  g_assert_cmpuint (after.tx_packets - before.tx_packets, ==, COUNT);
  g_assert_cmpuint (after.tx_bytes - before.tx_bytes, ==, COUNT * FRAME_LEN);
  g_assert_cmpuint (after.rx_packets, ==, before.rx_packets);
  g_assert_cmpuint (after.rx_bytes, ==, before.rx_bytes);
  g_assert_cmpuint (after.tx_bytes, ==, mv_test_sysfs_counter (TAP, "rx_bytes"));

  /* The host sends to the guest: the TAP transmits. */
  before = after;
  send_datagrams (TAP_GUEST, COUNT);
  g_assert_cmpuint (drain (fd), ==, COUNT);
  after = read_counters (TAP);
  g_assert_cmpuint (after.rx_packets - before.rx_packets, ==, COUNT);
  g_assert_cmpuint (after.rx_bytes - before.rx_bytes, ==, COUNT * FRAME_OF_DATAGRAM);
  g_assert_cmpuint (after.tx_packets, ==, before.tx_packets);
  g_assert_cmpuint (after.rx_bytes, ==, mv_test_sysfs_counter (TAP, "tx_bytes"));
  g_assert_cmpuint (after.rx_dropped, ==, 0);

  /* A guest that does not read loses what its queue cannot hold: the
   * TAP drops on transmit, the guest did not receive. */
  mv_test_cmd ("ip", "link", "set", "dev", TAP, "txqueuelen", "4", NULL);
  before = after;
  send_datagrams (TAP_GUEST, COUNT);
  after = read_counters (TAP);
  g_assert_cmpuint (after.rx_dropped - before.rx_dropped, >=, COUNT - 4);
  g_assert_cmpuint (after.rx_dropped, ==, mv_test_sysfs_counter (TAP, "tx_dropped"));
  g_assert_cmpuint (after.tx_dropped, ==, before.tx_dropped);
  g_assert_cmpuint (drain (fd), <=, 4);

  close (fd);
}

static void
test_veth (void)
{
  g_autofree char *peer_mac = NULL;
  MvNetCounters a_before, b_before, a_after, b_after;

  mv_test_cmd ("ip", "link", "add", VETH_A, "type", "veth", "peer", "name", VETH_B, NULL);
  mv_test_cmd ("ip", "addr", "add", VETH_A_ADDR "/24", "dev", VETH_A, NULL);
  mv_test_cmd ("ip", "link", "set", "dev", VETH_A, "up", NULL);
  mv_test_cmd ("ip", "link", "set", "dev", VETH_B, "up", NULL);
  mv_test_wait_link_up (VETH_A);
  mv_test_wait_link_up (VETH_B);
  {
    g_autofree char *path = g_build_filename ("/sys/class/net", VETH_B, "address", NULL);

    g_assert_true (g_file_get_contents (path, &peer_mac, NULL, NULL));
    g_strchomp (peer_mac);
  }
  mv_test_cmd ("ip", "neigh", "replace", VETH_PEER, "lladdr", peer_mac, "dev", VETH_A,
               "nud", "permanent", NULL);

  /* What A transmits, B receives: from a guest's side, A's guest
   * received it and B's guest sent it. */
  a_before = read_counters (VETH_A);
  b_before = read_counters (VETH_B);
  send_datagrams (VETH_PEER, COUNT);
  a_after = read_counters (VETH_A);
  b_after = read_counters (VETH_B);
  g_assert_cmpuint (a_after.rx_packets - a_before.rx_packets, ==, COUNT);
  g_assert_cmpuint (a_after.rx_bytes - a_before.rx_bytes, ==, COUNT * FRAME_OF_DATAGRAM);
  g_assert_cmpuint (b_after.tx_packets - b_before.tx_packets, ==, COUNT);
  g_assert_cmpuint (b_after.tx_bytes - b_before.tx_bytes, ==, COUNT * FRAME_OF_DATAGRAM);
  g_assert_cmpuint (a_after.tx_packets, ==, a_before.tx_packets);
  g_assert_cmpuint (b_after.rx_packets, ==, b_before.rx_packets);
}

static void
test_errors (void)
{
  g_autoptr(GError) error = NULL;
  MvNetCounters counters = { 0 };

  g_assert_false (mv_net_counters_read ("mvcnone0", &counters, &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_NOT_FOUND);
  g_assert_nonnull (strstr (error->message, "mvcnone0"));
  g_clear_error (&error);

  /* Names that would reach other files of sysfs. */
  g_assert_false (mv_net_counters_read ("..", &counters, &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  g_assert_false (mv_net_counters_read ("lo/../lo", &counters, &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  g_assert_false (mv_net_counters_read ("", &counters, &error));
  g_assert_error (error, MV_ERROR, MV_ERROR_INVALID_ARGUMENT);
}

int
main (int    argc,
      char **argv)
{
  mv_test_private_netns_enter ();
  g_test_init (&argc, &argv, NULL);

  g_test_add_func ("/counters/tap", test_tap);
  g_test_add_func ("/counters/veth", test_veth);
  g_test_add_func ("/counters/errors", test_errors);
  return g_test_run ();
}
