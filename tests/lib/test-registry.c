/* A registry for tests: see test-registry.h. */
#include "test-registry.h"

#include <gio/gio.h>
#include <glib/gstdio.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

struct _MvTestRegistry {
  char        *dir;
  guint        port;
  GSubprocess *process;
  GSocket     *slow_listener;
  guint        slow_port;
  guint        slow_rate;
  GThread     *slow_thread;
};

void
mv_test_run_command (const char *cmd)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *err = NULL;
  int status;

  if (!g_spawn_command_line_sync (cmd, NULL, &err, &status, &error) ||
      !g_spawn_check_wait_status (status, NULL))
    g_error ("%s failed: %s", cmd, error ? error->message : err);
}

guint
mv_test_free_port (void)
{
  int fd = socket (AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in addr = { .sin_family = AF_INET, .sin_addr.s_addr = htonl (INADDR_LOOPBACK) };
  socklen_t len = sizeof addr;

  g_assert_cmpint (bind (fd, (struct sockaddr *) &addr, sizeof addr), ==, 0);
  g_assert_cmpint (getsockname (fd, (struct sockaddr *) &addr, &len), ==, 0);
  close (fd);
  return ntohs (addr.sin_port);
}

static void
wait_for_port (guint port)
{
  for (int i = 0; i < 100; i++)
    {
      g_autoptr (GSocketClient) client = g_socket_client_new ();
      g_autoptr (GSocketConnection) conn = g_socket_client_connect_to_host (client, "127.0.0.1", port,
                                                                            NULL, NULL);
      if (conn != NULL)
        return;
      g_usleep (50000);
    }
  g_error ("nothing came up on port %u", port);
}

MvTestRegistry *
mv_test_registry_new (const char *dir)
{
  MvTestRegistry *registry = g_new0 (MvTestRegistry, 1);
  g_autofree char *blobs = g_build_filename (dir, "registry", NULL);
  g_autofree char *config = g_build_filename (dir, "registry.yml", NULL);
  g_autofree char *text = NULL;
  g_autoptr (GError) error = NULL;

  registry->dir = g_strdup (dir);
  registry->port = mv_test_free_port ();
  text = g_strdup_printf ("version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n"
                          "    rootdirectory: %s\nhttp:\n  addr: 127.0.0.1:%u\n", blobs, registry->port);
  g_assert_true (g_file_set_contents (config, text, -1, NULL));
  registry->process = g_subprocess_new (G_SUBPROCESS_FLAGS_STDOUT_SILENCE | G_SUBPROCESS_FLAGS_STDERR_SILENCE,
                                        &error, "docker-registry", "serve", config, NULL);
  g_assert_no_error (error);
  wait_for_port (registry->port);
  return registry;
}

void
mv_test_registry_free (MvTestRegistry *registry)
{
  if (registry == NULL)
    return;
  g_subprocess_force_exit (registry->process);
  g_subprocess_wait (registry->process, NULL, NULL);
  g_clear_object (&registry->process);
  /* The proxy's threads are left to end with the process. */
  g_free (registry->dir);
  g_free (registry);
}

guint
mv_test_registry_port (MvTestRegistry *registry)
{
  return registry->port;
}

char *
mv_test_registry_push (MvTestRegistry *registry, const char *layout_ref, const char *name_tag)
{
  g_autofree char *ref = g_strdup_printf ("127.0.0.1:%u/%s", registry->port, name_tag);
  g_autofree char *cmd = g_strdup_printf ("skopeo copy --quiet --dest-tls-verify=false %s docker://%s",
                                          layout_ref, ref);

  mv_test_run_command (cmd);
  return g_steal_pointer (&ref);
}

/* ---- the slow proxy ---- */

typedef struct {
  GSocket *from, *to;
  guint    rate;     /* bytes per second; 0 is as fast as it comes */
} Pump;

static gpointer
pump_run (gpointer data)
{
  Pump *pump = data;
  char buf[16 * 1024];

  for (;;)
    {
      gssize n = g_socket_receive (pump->from, buf, pump->rate ? MIN (sizeof buf, pump->rate / 10 + 1) : sizeof buf,
                                   NULL, NULL);
      gssize off = 0;

      if (n <= 0)
        break;
      while (off < n)
        {
          gssize w = g_socket_send (pump->to, buf + off, n - off, NULL, NULL);

          if (w <= 0)
            goto done;
          off += w;
        }
      if (pump->rate)
        g_usleep ((gulong) ((guint64) n * G_USEC_PER_SEC / pump->rate));
    }
done:
  g_socket_shutdown (pump->to, FALSE, TRUE, NULL);
  g_socket_shutdown (pump->from, TRUE, FALSE, NULL);
  g_object_unref (pump->from);
  g_object_unref (pump->to);
  g_free (pump);
  return NULL;
}

static void
start_pump (GSocket *from, GSocket *to, guint rate)
{
  Pump *pump = g_new0 (Pump, 1);

  pump->from = g_object_ref (from);
  pump->to = g_object_ref (to);
  pump->rate = rate;
  g_thread_unref (g_thread_new ("pump", pump_run, pump));
}

static gpointer
slow_accept (gpointer data)
{
  MvTestRegistry *registry = data;

  for (;;)
    {
      g_autoptr (GSocket) client = g_socket_accept (registry->slow_listener, NULL, NULL);
      g_autoptr (GSocket) upstream = NULL;
      g_autoptr (GInetAddress) lo = NULL;
      g_autoptr (GSocketAddress) addr = NULL;

      if (client == NULL)
        return NULL;
      upstream = g_socket_new (G_SOCKET_FAMILY_IPV4, G_SOCKET_TYPE_STREAM, G_SOCKET_PROTOCOL_TCP, NULL);
      lo = g_inet_address_new_loopback (G_SOCKET_FAMILY_IPV4);
      addr = g_inet_socket_address_new (lo, registry->port);
      if (upstream == NULL || !g_socket_connect (upstream, addr, NULL, NULL))
        continue;
      start_pump (client, upstream, 0);
      start_pump (upstream, client, registry->slow_rate);
    }
}

guint
mv_test_registry_slow_port (MvTestRegistry *registry, guint bytes_per_second)
{
  g_autoptr (GInetAddress) lo = NULL;
  g_autoptr (GSocketAddress) addr = NULL;
  g_autoptr (GSocketAddress) bound = NULL;
  g_autoptr (GError) error = NULL;

  if (registry->slow_thread != NULL)
    return registry->slow_port;
  registry->slow_rate = bytes_per_second;
  registry->slow_listener = g_socket_new (G_SOCKET_FAMILY_IPV4, G_SOCKET_TYPE_STREAM, G_SOCKET_PROTOCOL_TCP,
                                          &error);
  g_assert_no_error (error);
  lo = g_inet_address_new_loopback (G_SOCKET_FAMILY_IPV4);
  addr = g_inet_socket_address_new (lo, 0);
  g_assert_true (g_socket_bind (registry->slow_listener, addr, TRUE, &error));
  g_assert_true (g_socket_listen (registry->slow_listener, &error));
  bound = g_socket_get_local_address (registry->slow_listener, &error);
  g_assert_no_error (error);
  registry->slow_port = g_inet_socket_address_get_port (G_INET_SOCKET_ADDRESS (bound));
  registry->slow_thread = g_thread_new ("slow-registry", slow_accept, registry);
  return registry->slow_port;
}

/* ---- images ---- */

void
mv_test_build_busybox_image (const char *layout, const char *scratch_dir, guint64 extra_bytes)
{
  g_autofree char *root = g_build_filename (scratch_dir, "src-root", NULL);
  g_autofree char *cmd = NULL;
  const char *applets[] = { "sh", "ls", "cat", "echo" };

  g_autofree char *bin = g_build_filename (root, "bin", NULL);
  g_autofree char *etc = g_build_filename (root, "etc", NULL);
  g_assert_cmpint (g_mkdir_with_parents (bin, 0755), ==, 0);
  g_assert_cmpint (g_mkdir_with_parents (etc, 0755), ==, 0);
  cmd = g_strdup_printf ("cp /bin/busybox %s/busybox", bin);
  mv_test_run_command (cmd);
  for (gsize i = 0; i < G_N_ELEMENTS (applets); i++)
    {
      g_autofree char *link = g_build_filename (bin, applets[i], NULL);

      if (!g_file_test (link, G_FILE_TEST_IS_SYMLINK))
        g_assert_cmpint (symlink ("busybox", link), ==, 0);
    }
  if (extra_bytes > 0)
    {
      g_autofree char *filler = g_build_filename (root, "filler", NULL);

      g_clear_pointer (&cmd, g_free);
      cmd = g_strdup_printf ("head -c %" G_GUINT64_FORMAT " /dev/urandom", extra_bytes);
      {
        g_autofree char *data = NULL;
        gsize len = 0;
        g_autoptr (GError) error = NULL;
        int status;

        g_assert_true (g_spawn_command_line_sync (cmd, &data, NULL, &status, &error));
        g_assert_no_error (error);
        len = extra_bytes;
        g_assert_true (g_file_set_contents (filler, data, len, &error));
      }
    }
  g_clear_pointer (&cmd, g_free);
  cmd = g_strdup_printf ("umoci init --layout %s", layout);
  mv_test_run_command (cmd);
  g_clear_pointer (&cmd, g_free);
  cmd = g_strdup_printf ("umoci new --image %s:1", layout);
  mv_test_run_command (cmd);
  g_clear_pointer (&cmd, g_free);
  cmd = g_strdup_printf ("umoci insert --image %s:1 %s /", layout, root);
  mv_test_run_command (cmd);
  g_clear_pointer (&cmd, g_free);
  cmd = g_strdup_printf ("umoci config --image %s:1 --config.entrypoint /bin/sh --config.cmd -c "
                         "--config.env PATH=/bin --config.user 1000:1000 --config.workingdir /tmp "
                         "--architecture amd64 --os linux", layout);
  mv_test_run_command (cmd);
  if (extra_bytes > 0)
    {
      g_autofree char *filler = g_build_filename (root, "filler", NULL);

      g_unlink (filler);
    }
}

/* Writes @bytes from /dev/urandom to @path. */
static void
write_random_file (const char *path, guint64 bytes)
{
  g_autoptr (GFile) file = g_file_new_for_path (path);
  g_autoptr (GFileOutputStream) out = g_file_replace (file, NULL, FALSE, G_FILE_CREATE_NONE, NULL, NULL);
  g_autoptr (GFile) urandom = g_file_new_for_path ("/dev/urandom");
  g_autoptr (GFileInputStream) in = g_file_read (urandom, NULL, NULL);
  guint8 buf[64 * 1024];

  g_assert_nonnull (out);
  g_assert_nonnull (in);
  while (bytes > 0)
    {
      gsize want = MIN (sizeof buf, bytes), got = 0;

      g_assert_true (g_input_stream_read_all (G_INPUT_STREAM (in), buf, want, &got, NULL, NULL));
      g_assert_cmpuint (got, ==, want);
      g_assert_true (g_output_stream_write_all (G_OUTPUT_STREAM (out), buf, got, NULL, NULL, NULL));
      bytes -= got;
    }
  g_assert_true (g_output_stream_close (G_OUTPUT_STREAM (out), NULL, NULL));
}

void
mv_test_build_layered_image (const char *layout, const char *scratch_dir, guint64 layer_bytes)
{
  g_autofree char *filler = g_build_filename (scratch_dir, "filler", NULL);
  g_autofree char *cmd = NULL;

  g_assert_cmpuint (layer_bytes, >, 0);
  mv_test_build_busybox_image (layout, scratch_dir, 0);
  write_random_file (filler, layer_bytes);
  /* Each insert is a layer of its own. */
  cmd = g_strdup_printf ("umoci insert --image %s:1 %s /filler", layout, filler);
  mv_test_run_command (cmd);
  g_unlink (filler);
}
