/* Hybrid vsock through both test VMMs: host to guest with the CONNECT
 * handshake, guest to host on <uds_path>_<port>. */
#include "vmm-fixture.h"
#include "hypervisor/cloud-hypervisor.h"
#include "hypervisor/firecracker.h"
#include "guest/vsock.h"
#include "core/errors.h"

#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define ECHO_PORT   1025
#define AGENT_PORT  1024
#define HOST_PORT   7000

static void
send_line (int fd, const char *line)
{
  g_assert_cmpint (send (fd, line, strlen (line), MSG_NOSIGNAL), ==, (ssize_t) strlen (line));
}

static char *
read_line (int fd)
{
  GString *line = g_string_new (NULL);
  char c;

  for (;;)
    {
      struct pollfd pfd = { .fd = fd, .events = POLLIN };
      g_assert_cmpint (poll (&pfd, 1, 5000), ==, 1);
      g_assert_cmpint (read (fd, &c, 1), ==, 1);
      if (c == '\n')
        return g_string_free (line, FALSE);
      g_string_append_c (line, c);
    }
}

static void
run (VmmFixture *fixture, MvStarter *starter)
{
  g_autoptr (MvVmSpec) spec = vmm_fixture_spec (fixture);
  g_autoptr (MvProcess) vmm = NULL;
  g_autoptr (MvHypervisor) hv = NULL;
  g_autoptr (GError) error = NULL;
  g_autofree char *reply = NULL;
  g_autofree char *hello = NULL;
  g_autofree char *pong = NULL;
  g_autofree char *ok = NULL;
  g_autofree char *listen_path = NULL;
  int fd, agent, listener, incoming;

  hv = starter->start_vm (starter, fixture->socket_path, spec, &vmm, &error);
  g_assert_no_error (error);
  g_assert_true (vmm_fixture_wait_console (fixture->console_path, "MICROVMD-GUEST-READY", 5000));

  /* Host to guest: the handshake, then the guest's own bytes. */
  fd = mv_vsock_dial (spec->agent.socket_path, ECHO_PORT, 5000, &error);
  g_assert_no_error (error);
  g_assert_cmpint (fd, >=, 0);
  send_line (fd, "through the handshake\n");
  reply = read_line (fd);
  g_assert_cmpstr (reply, ==, "through the handshake");
  close (fd);

  /* Nothing listens on this guest port: the VMM closes the connection. */
  g_assert_cmpint (mv_vsock_dial (spec->agent.socket_path, 4000, 5000, &error), ==, -1);
  g_assert_error (error, MV_ERROR, MV_ERROR_UNAVAILABLE);
  g_assert_nonnull (strstr (error->message, "nothing listens there"));
  g_clear_error (&error);

  /* Guest to host: the VMM connects to <uds_path>_<port>. */
  listen_path = mv_vsock_listen_path (spec->agent.socket_path, HOST_PORT);
  g_assert_true (g_str_has_suffix (listen_path, "vsock.sock_7000"));
  listener = mv_vsock_listen (spec->agent.socket_path, HOST_PORT, &error);
  g_assert_no_error (error);
  agent = mv_vsock_dial (spec->agent.socket_path, AGENT_PORT, 5000, &error);
  g_assert_no_error (error);
  send_line (agent, "connect 7000\n");
  ok = read_line (agent);
  g_assert_cmpstr (ok, ==, "ok");
  incoming = accept (listener, NULL, NULL);
  g_assert_cmpint (incoming, >=, 0);
  hello = read_line (incoming);
  g_assert_cmpstr (hello, ==, "hello");
  send_line (incoming, "ping\n");
  pong = read_line (incoming);
  g_assert_cmpstr (pong, ==, "pong");
  close (incoming);
  close (agent);
  close (listener);

  g_assert_true (hv->destroy_vm (hv, &error));
  g_assert_no_error (error);
}

static void
test_cloud_hypervisor (VmmFixture *fixture, gconstpointer data)
{
  g_autofree char *binary = vmm_fixture_binary ("cloud-hypervisor");
  g_autoptr (GError) error = NULL;
  g_autoptr (MvStarter) starter = mv_cloud_hypervisor_starter_new (binary, &error);

  g_assert_no_error (error);
  run (fixture, starter);
}

static void
test_firecracker (VmmFixture *fixture, gconstpointer data)
{
  g_autofree char *binary = vmm_fixture_binary ("firecracker");
  g_autoptr (GError) error = NULL;
  g_autoptr (MvStarter) starter = mv_firecracker_starter_new (binary, &error);

  g_assert_no_error (error);
  run (fixture, starter);
}

static void
test_nothing_there (void)
{
  g_autoptr (GError) error = NULL;

  g_assert_cmpint (mv_vsock_dial ("/nonexistent/vsock.sock", 1024, 1000, &error), ==, -1);
  g_assert_error (error, MV_ERROR, MV_ERROR_UNAVAILABLE);
}

#define VMM_TEST(name, func) \
  g_test_add (name, VmmFixture, NULL, vmm_fixture_setup, func, vmm_fixture_teardown)

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  VMM_TEST ("/vsock/cloud-hypervisor", test_cloud_hypervisor);
  VMM_TEST ("/vsock/firecracker", test_firecracker);
  g_test_add_func ("/vsock/nothing-there", test_nothing_there);
  return g_test_run ();
}
