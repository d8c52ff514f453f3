/* The KEY=VALUE of exec's -e/--env. Which names the guest accepts is the
 * daemon's to say; this only splits. */
#include "env-assignment.h"

#include <string.h>

gboolean
mv_env_assignment_parse (const char *text, char **key, char **value)
{
  const char *equals = strchr (text, '=');

  if (equals == NULL || equals == text)
    return FALSE;

  *key = g_strndup (text, equals - text);
  *value = g_strdup (equals + 1);
  return TRUE;
}
