/* microvmctl resize: Machine.Resize of a running machine; what is not
 * given stays as the machine has it. */
#include "config.h"

#include <glib/gi18n.h>

#include "microvmctl.h"
#include "names.h"

#define DBUS_PROPERTIES "org.freedesktop.DBus.Properties"

/* The machine's property @name, of one basic @type ('u' or 't'). */
static int
get_number (MvCtl *ctl, const char *path, const char *name, char type, guint64 *out)
{
  g_auto(sd_bus_error) error = SD_BUS_ERROR_NULL;
  g_autoptr(sd_bus_message) reply = NULL;
  char signature[2] = { type, '\0' };
  uint32_t u = 0;
  uint64_t t = 0;
  int r;

  r = mv_call (ctl, path, DBUS_PROPERTIES, "Get", 0, &error, &reply, "ss", MV_MACHINE_IFACE,
               name);
  if (r >= 0)
    r = sd_bus_message_enter_container (reply, 'v', signature);
  if (r >= 0)
    r = type == 'u' ? sd_bus_message_read (reply, "u", &u) : sd_bus_message_read (reply, "t", &t);
  if (r < 0)
    return mv_fail_bus (&error, r);
  *out = type == 'u' ? u : t;
  return MV_EXIT_OK;
}

int
mv_cmd_resize (MvCtl *ctl, const char *method, int argc, char **argv)
{
  g_auto(sd_bus_error) error = SD_BUS_ERROR_NULL;
  g_autofree char *path = NULL;
  guint64 vcpus = 0, memory = 0;
  int status, r;

  if (!ctl->vcpus && !ctl->memory)
    return mv_usage_error (_("resize needs --vcpus, --memory or both"));
  /* The daemon says what the limits are; here only that these are numbers. */
  if (ctl->vcpus && !g_ascii_string_to_unsigned (ctl->vcpus, 10, 1, G_MAXUINT32, &vcpus, NULL))
    return mv_usage_error (_("invalid --vcpus '%s': expected a number of vCPUs"), ctl->vcpus);
  if (ctl->memory && !mv_parse_size (ctl->memory, &memory))
    return mv_usage_error (_("invalid --memory '%s': give bytes, or a number with K, M, G or T"),
                           ctl->memory);

  status = mv_resolve_machine (ctl, argv[0], &path);
  if (status != MV_EXIT_OK)
    return status;
  if (!ctl->vcpus && (status = get_number (ctl, path, "VCPUs", 'u', &vcpus)) != MV_EXIT_OK)
    return status;
  if (!ctl->memory && (status = get_number (ctl, path, "MemoryBytes", 't', &memory)) != MV_EXIT_OK)
    return status;

  r = mv_call (ctl, path, MV_MACHINE_IFACE, "Resize", ctl->timeout_usec, &error, NULL, "ut",
               (uint32_t) vcpus, (uint64_t) memory);
  if (r < 0)
    return mv_fail_bus (&error, r);
  return MV_EXIT_OK;
}
