/* The mapping between microvmd's error codes and their D-Bus names. */
#include "bus-util.h"
#include "core/errors.h"
#include "names.h"

#include <errno.h>

static const char *const error_names[] = {
  [MV_ERROR_NOT_FOUND] = MV_BUS_ERROR_NOT_FOUND,
  [MV_ERROR_INVALID_ARGUMENT] = MV_BUS_ERROR_INVALID_ARGUMENT,
  [MV_ERROR_INVALID_STATE] = MV_BUS_ERROR_INVALID_STATE,
  [MV_ERROR_ALREADY_EXISTS] = MV_BUS_ERROR_ALREADY_EXISTS,
  [MV_ERROR_CONFLICT] = MV_BUS_ERROR_CONFLICT,
  [MV_ERROR_RESOURCE_EXHAUSTED] = MV_BUS_ERROR_RESOURCE_EXHAUSTED,
  [MV_ERROR_UNAVAILABLE] = MV_BUS_ERROR_UNAVAILABLE,
  [MV_ERROR_UNSUPPORTED] = MV_BUS_ERROR_UNSUPPORTED,
  [MV_ERROR_FAILED] = MV_BUS_ERROR_FAILED,
};

static const sd_bus_error_map error_map[] = {
  SD_BUS_ERROR_MAP (MV_BUS_ERROR_NOT_FOUND, ENOENT),
  SD_BUS_ERROR_MAP (MV_BUS_ERROR_INVALID_ARGUMENT, EINVAL),
  SD_BUS_ERROR_MAP (MV_BUS_ERROR_INVALID_STATE, EBUSY),
  SD_BUS_ERROR_MAP (MV_BUS_ERROR_ALREADY_EXISTS, EEXIST),
  SD_BUS_ERROR_MAP (MV_BUS_ERROR_CONFLICT, EADDRINUSE),
  SD_BUS_ERROR_MAP (MV_BUS_ERROR_RESOURCE_EXHAUSTED, ENOSPC),
  SD_BUS_ERROR_MAP (MV_BUS_ERROR_UNAVAILABLE, EAGAIN),
  SD_BUS_ERROR_MAP (MV_BUS_ERROR_UNSUPPORTED, EOPNOTSUPP),
  SD_BUS_ERROR_MAP (MV_BUS_ERROR_FAILED, EIO),
  SD_BUS_ERROR_MAP_END
};

void
mv_bus_errors_register (void)
{
  sd_bus_error_add_map (error_map);
}

int
mv_bus_error_from_gerror (sd_bus_error *ret, const GError *error)
{
  const char *name = MV_BUS_ERROR_FAILED;

  if (error->domain == MV_ERROR && error->code >= 0 &&
      (gsize) error->code < G_N_ELEMENTS (error_names))
    name = error_names[error->code];
  /* sd-bus sends only UTF-8: a message quoting a VMM's or a caller's
   * stray bytes would leave the call unanswered. */
  if (!g_utf8_validate (error->message, -1, NULL))
    {
      g_autofree char *valid = g_utf8_make_valid (error->message, -1);
      return sd_bus_error_set (ret, name, valid);
    }
  return sd_bus_error_set (ret, name, error->message);
}

void
mv_bus_reply_gerror (sd_bus_message *call, const GError *error)
{
  sd_bus_error e = SD_BUS_ERROR_NULL;

  mv_bus_error_from_gerror (&e, error);
  if (sd_bus_reply_method_error (call, &e) < 0)
    sd_bus_reply_method_errorf (call, e.name, "The error could not be sent as it was");
  sd_bus_error_free (&e);
}
