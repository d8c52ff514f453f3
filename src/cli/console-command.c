/* microvmctl console: the guest's serial console (Machine.OpenConsole),
 * interactive until the escape key, Ctrl+] as in virsh console, or until
 * the console ends with the VMM. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include <glib/gi18n.h>

#include "exec-relay.h"
#include "microvmctl.h"
#include "names.h"
#include "remote-console.h"

/* Ctrl+] */
#define ESCAPE_KEY 0x1d

/* --request MODE: a token of Machine.RequestConsole, with the bridge's
 * URL, for a client elsewhere. */
static int
request_console (MvCtl *ctl, const char *name)
{
  g_auto(sd_bus_error) error = SD_BUS_ERROR_NULL;
  g_autoptr(sd_bus_message) reply = NULL;
  g_autofree char *path = NULL, *url = NULL;
  const char *token = NULL;
  guint64 expires_at = 0;
  int status, r;

  status = mv_resolve_machine (ctl, name, &path);
  if (status != MV_EXIT_OK)
    return status;
  r = mv_call (ctl, path, MV_MACHINE_IFACE, "RequestConsole", 0, &error, &reply, "s",
               ctl->request);
  if (r >= 0)
    r = sd_bus_message_read (reply, "st", &token, &expires_at);
  if (r >= 0)
    r = sd_bus_get_property_string (ctl->bus, MV_BUS_NAME, MV_MANAGER_PATH, MV_MANAGER_IFACE,
                                    "ConsoleURL", &error, &url);
  if (r < 0)
    return mv_fail_bus (&error, r);
  if (ctl->json)
    {
      g_autoptr (JsonBuilder) b = json_builder_new ();
      g_autoptr (JsonNode) root = NULL;

      json_builder_begin_object (b);
      json_builder_set_member_name (b, "url");
      json_builder_add_string_value (b, url);
      json_builder_set_member_name (b, "token");
      json_builder_add_string_value (b, token);
      json_builder_set_member_name (b, "expires_at");
      json_builder_add_int_value (b, (gint64) expires_at);
      json_builder_end_object (b);
      root = json_builder_get_root (b);
      mv_print_json (root);
    }
  else
    {
      g_autoptr (GDateTime) when = g_date_time_new_from_unix_utc ((gint64) (expires_at / G_USEC_PER_SEC));
      g_autofree char *shown = when ? g_date_time_format_iso8601 (when) : g_strdup ("?");

      printf ("%s %s\n", url, token);
      fprintf (stderr, _("One %s session until %s: microvmctl console --remote %s TOKEN\n"),
               ctl->request, shown, url);
    }
  return MV_EXIT_OK;
}

int
mv_cmd_console (MvCtl *ctl, const char *method, int argc, char **argv)
{
  g_auto(sd_bus_error) error = SD_BUS_ERROR_NULL;
  g_autoptr(sd_bus_message) reply = NULL;
  g_autofree char *path = NULL;
  gboolean terminal = isatty (STDIN_FILENO);
  int fd = -1, own, status, r;

  if (ctl->remote && ctl->request)
    return mv_usage_error (_("console: --remote and --request go apart"));
  if (ctl->request)
    return request_console (ctl, argv[0]);
  if (ctl->remote)
    {
      if (terminal)
        fprintf (stderr, _("Connected to %s (escape character is ^])\n"), ctl->remote);
      status = mv_remote_console (ctl->remote, argv[0], terminal, ESCAPE_KEY);
      if (terminal)
        fputc ('\n', stderr);
      return status;
    }
  status = mv_resolve_machine (ctl, argv[0], &path);
  if (status != MV_EXIT_OK)
    return status;
  r = mv_call (ctl, path, MV_MACHINE_IFACE, "OpenConsole", 0, &error, &reply, NULL);
  if (r >= 0)
    r = sd_bus_message_read (reply, "h", &fd);
  if (r < 0)
    return mv_fail_bus (&error, r);
  own = fcntl (fd, F_DUPFD_CLOEXEC, 3);
  if (own < 0)
    return mv_fail (_("Failed to open the console: %s"), g_strerror (errno));
  /* The console is the holder's, not the daemon's: nothing more is asked
   * of the daemon. */
  g_clear_pointer (&reply, sd_bus_message_unref);

  if (terminal)
    fprintf (stderr, _("Connected to the console of %s (escape character is ^])\n"), argv[0]);
  status = mv_console_relay (own, terminal, ESCAPE_KEY);
  if (terminal)
    fputc ('\n', stderr);
  return status;
}
