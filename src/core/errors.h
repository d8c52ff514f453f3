/* The error domain of microvmd. Every code has one D-Bus error name
 * (src/bus/bus-errors.c); messages name the field and the limit. */
#pragma once
#include <glib.h>

#define MV_ERROR (mv_error_quark ())
GQuark mv_error_quark (void);

typedef enum {
  MV_ERROR_NOT_FOUND,
  MV_ERROR_INVALID_ARGUMENT,
  MV_ERROR_INVALID_STATE,
  MV_ERROR_ALREADY_EXISTS,
  MV_ERROR_CONFLICT,
  MV_ERROR_RESOURCE_EXHAUSTED,
  MV_ERROR_UNAVAILABLE,
  MV_ERROR_UNSUPPORTED,
  MV_ERROR_FAILED,
} MvError;

/* Sets @error to @code of MV_ERROR with a formatted message; returns FALSE,
 * for `return mv_error_set (error, ...);`. */
gboolean mv_error_set (GError **error, MvError code, const char *format, ...) G_GNUC_PRINTF (3, 4);
