/* The KEY=VALUE of exec's -e/--env. */
#pragma once

#include <glib.h>

/* Splits TEXT at its first '=': the key before it must not be empty, the
 * value after it may be. Returns FALSE, setting nothing, when there is no
 * '=' or no key. */
gboolean mv_env_assignment_parse (const char *text, char **key, char **value);
