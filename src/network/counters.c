/* TAP counters from sysfs. See counters.h. */
#include "counters.h"

#include "core/errors.h"
#include "nm.h"


#define SYS_CLASS_NET "/sys/class/net"

static gboolean
read_counter (const char  *ifname,
              const char  *name,
              guint64     *value,
              GError     **error)
{
  g_autofree char *path = g_build_filename (SYS_CLASS_NET, ifname, "statistics", name, NULL);
  g_autofree char *text = NULL;
  g_autoptr(GError) local_error = NULL;

  if (!g_file_get_contents (path, &text, NULL, &local_error))
    {
      /* The interface went away between two files. */
      if (g_error_matches (local_error, G_FILE_ERROR, G_FILE_ERROR_NOENT))
        return mv_error_set (error, MV_ERROR_NOT_FOUND, "there is no network interface %s",
                             ifname);
      return mv_error_set (error, MV_ERROR_FAILED, "cannot read %s: %s", path,
                           local_error->message);
    }
  g_strchomp (text);
  if (!g_ascii_string_to_unsigned (text, 10, 0, G_MAXUINT64, value, NULL))
    return mv_error_set (error, MV_ERROR_FAILED, "%s holds \"%s\", not a counter", path, text);
  return TRUE;
}

gboolean
mv_net_counters_read (const char     *ifname,
                      MvNetCounters  *counters,
                      GError        **error)
{
  g_autofree char *dir = NULL;
  MvNetCounters read = { 0 };

  if (!mv_nm_check_ifname (ifname, error))
    return FALSE;
  dir = g_build_filename (SYS_CLASS_NET, ifname, NULL);
  if (!g_file_test (dir, G_FILE_TEST_IS_DIR))
    return mv_error_set (error, MV_ERROR_NOT_FOUND, "there is no network interface %s", ifname);

  /* The guest is on the far side of the TAP: what the TAP transmits
   * reaches the guest, what it receives came from the guest. */
  if (!read_counter (ifname, "tx_bytes", &read.rx_bytes, error)
      || !read_counter (ifname, "tx_packets", &read.rx_packets, error)
      || !read_counter (ifname, "tx_dropped", &read.rx_dropped, error)
      || !read_counter (ifname, "tx_errors", &read.rx_errors, error)
      || !read_counter (ifname, "rx_bytes", &read.tx_bytes, error)
      || !read_counter (ifname, "rx_packets", &read.tx_packets, error)
      || !read_counter (ifname, "rx_dropped", &read.tx_dropped, error)
      || !read_counter (ifname, "rx_errors", &read.tx_errors, error))
    return FALSE;
  *counters = read;
  return TRUE;
}
