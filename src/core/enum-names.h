/* Enumerations written as names: a table of names indexed by value, read
 * both ways. Pure. */
#pragma once
#include <glib.h>

/* The name of @value in @names, or @fallback (a bug) if it has none. */
static inline const char *
mv_enum_to_name (const char *const *names, guint n_names, guint value, const char *fallback)
{
  g_return_val_if_fail (value < n_names && names[value] != NULL, fallback);
  return names[value];
}

/* The value whose name in @names is @name; FALSE if there is none. */
static inline gboolean
mv_enum_from_name (const char *const *names, guint n_names, const char *name, guint *value)
{
  for (guint i = 0; i < n_names; i++)
    if (names[i] != NULL && g_strcmp0 (name, names[i]) == 0)
      {
        *value = i;
        return TRUE;
      }
  return FALSE;
}
