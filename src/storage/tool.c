/* Running the tools of the field and turning what they say into an
 * error a caller can act on. */
#include "tool.h"

#include <string.h>

#define TOOL_OUTPUT_MAX (4 * 1024 * 1024)

/* The last line of a tool's stderr, for a message. */
static char *
last_line (const char *err)
{
  g_autofree char *copy = g_strstrip (g_strdup (err));
  const char *nl = strrchr (copy, '\n');
  g_autofree char *line = g_strdup (nl ? nl + 1 : copy);

  if (strlen (line) > 400)
    line[400] = '\0';
  return g_steal_pointer (&line);
}

gboolean
mv_run_tool (const char *what, const char * const *argv, MvToolClassify classify,
             GCancellable *cancellable, GBytes **out, GError **error)
{
  g_autoptr (GSubprocess) proc = NULL;
  g_autoptr (GBytes) out_bytes = NULL;
  g_autoptr (GBytes) err_bytes = NULL;
  g_autofree char *err_text = NULL;
  g_autoptr (GError) local = NULL;

  proc = g_subprocess_newv (argv, G_SUBPROCESS_FLAGS_STDOUT_PIPE | G_SUBPROCESS_FLAGS_STDERR_PIPE |
                                  G_SUBPROCESS_FLAGS_STDIN_INHERIT, &local);
  if (proc == NULL)
    return mv_error_set (error, MV_ERROR_FAILED, "%s: cannot run %s: %s", what, argv[0], local->message);
  if (!g_subprocess_communicate (proc, NULL, cancellable, &out_bytes, &err_bytes, &local))
    {
      /* Waited for, so that a cancelled tool writes nothing more into
       * what its caller is about to delete. */
      g_subprocess_force_exit (proc);
      g_subprocess_wait (proc, NULL, NULL);
      g_propagate_error (error, g_steal_pointer (&local));
      return FALSE;
    }
  err_text = g_strndup (g_bytes_get_data (err_bytes, NULL), g_bytes_get_size (err_bytes));
  if (!g_subprocess_get_if_exited (proc) || g_subprocess_get_exit_status (proc) != 0)
    {
      g_autofree char *line = last_line (err_text);

      return mv_error_set (error, classify ? classify (err_text) : MV_ERROR_FAILED, "%s: %s failed: %s",
                           what, argv[0], *line ? line : "(no message)");
    }
  if (g_bytes_get_size (out_bytes) > TOOL_OUTPUT_MAX)
    return mv_error_set (error, MV_ERROR_FAILED, "%s: %s printed more than %d bytes", what, argv[0], TOOL_OUTPUT_MAX);
  if (out != NULL)
    *out = g_steal_pointer (&out_bytes);
  return TRUE;
}

