#include "store-test.h"
#include "util/files.h"

#include <string.h>

static GPtrArray *warnings;

static GLogWriterOutput
capture_warnings (GLogLevelFlags level, const GLogField *fields, gsize n_fields,
                  gpointer user_data)
{
  if ((level & G_LOG_LEVEL_MASK) != G_LOG_LEVEL_WARNING)
    return g_log_writer_default (level, fields, n_fields, user_data);

  for (gsize i = 0; i < n_fields; i++)
    if (g_str_equal (fields[i].key, "MESSAGE"))
      {
        const char *message = fields[i].value;

        g_test_message ("warning: %s", message);
        g_ptr_array_add (warnings, g_strdup (message));
      }
  return G_LOG_WRITER_HANDLED;
}

GPtrArray *
store_test_capture_warnings (void)
{
  warnings = g_ptr_array_new_with_free_func (g_free);
  g_log_set_writer_func (capture_warnings, NULL, NULL);
  return warnings;
}

gboolean
store_test_warned_about (const char *text)
{
  for (guint i = 0; i < warnings->len; i++)
    if (strstr (g_ptr_array_index (warnings, i), text) != NULL)
      return TRUE;
  return FALSE;
}

void
store_test_remove_all (const char *path)
{
  g_autoptr(GError) error = NULL;

  mv_remove_tree (path, &error);
  g_assert_no_error (error);
}
