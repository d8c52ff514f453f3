/* A network namespace of the test's own. See private-netns.h. */
#include "private-netns.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

/* Not g_file_set_contents(): a file of /proc is written in place. */
static gboolean
write_sysctl (const char *path,
              const char *value)
{
  int fd = open (path, O_WRONLY | O_CLOEXEC);
  gboolean written;

  if (fd < 0)
    return FALSE;
  written = write (fd, value, strlen (value)) == (ssize_t) strlen (value);
  close (fd);
  return written;
}

void
mv_test_private_netns_enter (void)
{
  if (geteuid () != 0)
    {
      g_printerr ("network namespaces and netfilter need root\n");
      exit (77);
    }
  if (unshare (CLONE_NEWNET | CLONE_NEWNS) < 0)
    g_error ("cannot enter a new network namespace: %s", g_strerror (errno));
  if (mount (NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0
      || umount2 ("/sys", MNT_DETACH) < 0
      || mount ("sysfs", "/sys", "sysfs", 0, NULL) < 0)
    g_error ("cannot mount a sysfs of the new network namespace: %s", g_strerror (errno));
  /* No IPv6 on the devices the test makes: no router solicitations or
   * reports that would move the counters the test looks at. */
  if (!write_sysctl ("/proc/sys/net/ipv6/conf/default/disable_ipv6", "1"))
    g_printerr ("cannot turn IPv6 off for new devices; counters may move by themselves\n");
  mv_test_cmd ("ip", "link", "set", "dev", "lo", "up", NULL);
}

char *
mv_test_cmd_out (const char *program,
                 ...)
{
  g_autoptr(GPtrArray) argv = g_ptr_array_new ();
  g_autoptr(GError) error = NULL;
  g_autofree char *command = NULL;
  g_autofree char *err = NULL;
  char *out = NULL;
  const char *arg;
  int wait_status = 0;
  va_list args;

  g_ptr_array_add (argv, (char *) program);
  va_start (args, program);
  while ((arg = va_arg (args, const char *)) != NULL)
    g_ptr_array_add (argv, (char *) arg);
  va_end (args);
  g_ptr_array_add (argv, NULL);

  command = g_strjoinv (" ", (char **) argv->pdata);
  if (!g_spawn_sync (NULL, (char **) argv->pdata, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL, &out,
                     &err, &wait_status, &error))
    g_error ("cannot run %s: %s", command, error->message);
  if (!g_spawn_check_wait_status (wait_status, &error))
    g_error ("`%s` failed: %s\n%s", command, error->message, err);
  return out;
}

guint64
mv_test_sysfs_counter (const char *ifname,
                       const char *name)
{
  g_autofree char *path = g_build_filename ("/sys/class/net", ifname, "statistics", name, NULL);
  g_autofree char *text = NULL;
  g_autoptr(GError) error = NULL;
  guint64 value = 0;

  g_file_get_contents (path, &text, NULL, &error);
  g_assert_no_error (error);
  g_assert_true (g_ascii_string_to_unsigned (g_strchomp (text), 10, 0, G_MAXUINT64, &value,
                                             NULL));
  return value;
}

void
mv_test_wait_link_up (const char *ifname)
{
  g_autofree char *path = g_build_filename ("/sys/class/net", ifname, "operstate", NULL);
  gint64 deadline = g_get_monotonic_time () + 5 * G_TIME_SPAN_SECOND;

  for (;;)
    {
      g_autofree char *state = NULL;

      if (g_file_get_contents (path, &state, NULL, NULL)
          && (g_str_equal (g_strchomp (state), "up") || g_str_equal (state, "unknown")))
        return;
      if (g_get_monotonic_time () >= deadline)
        g_error ("%s is not up after 5 s (operstate %s)", ifname, state);
      g_usleep (10 * G_TIME_SPAN_MILLISECOND);
    }
}
