/* The status line of Machine.Exec. */
#include "exec-status.h"

#include <string.h>

#define MAX_EXIT_CODE 255
/* So that 128 + N stays an exit status. */
#define MAX_SIGNAL 127

static gboolean
parse_number (const char *text, gsize length, guint64 min, guint64 max, int *out)
{
  g_autofree char *copy = NULL;
  guint64 value;

  /* g_ascii_string_to_unsigned() refuses signs and blanks, but takes
   * leading zeros, which no status line has. */
  if (length == 0 || length > 3 || (text[0] == '0' && length > 1))
    return FALSE;
  copy = g_strndup (text, length);
  if (!g_ascii_string_to_unsigned (copy, 10, min, max, &value, NULL))
    return FALSE;
  *out = (int) value;
  return TRUE;
}

static gboolean
is_printable_text (const char *text, gsize length)
{
  if (length == 0 || !g_utf8_validate_len (text, length, NULL))
    return FALSE;
  for (gsize i = 0; i < length; i++)
    {
      guchar c = (guchar) text[i];
      if (c < 0x20 || c == 0x7f)
        return FALSE;
    }
  return TRUE;
}

gboolean
mv_exec_status_parse (const char *line, gsize length, MvExecStatus *status)
{
  static const char exit_word[] = "exit ";
  static const char signal_word[] = "signal ";
  static const char error_word[] = "error ";
  MvExecStatus parsed = { 0 };

  if (length > MV_EXEC_STATUS_MAX_LINE || memchr (line, '\0', length) != NULL)
    return FALSE;

  if (length > strlen (exit_word) && strncmp (line, exit_word, strlen (exit_word)) == 0)
    {
      parsed.kind = MV_EXEC_STATUS_EXIT;
      if (!parse_number (line + strlen (exit_word), length - strlen (exit_word),
                         0, MAX_EXIT_CODE, &parsed.code))
        return FALSE;
    }
  else if (length > strlen (signal_word) && strncmp (line, signal_word, strlen (signal_word)) == 0)
    {
      parsed.kind = MV_EXEC_STATUS_SIGNAL;
      if (!parse_number (line + strlen (signal_word), length - strlen (signal_word),
                         1, MAX_SIGNAL, &parsed.code))
        return FALSE;
    }
  else if (length > strlen (error_word) && strncmp (line, error_word, strlen (error_word)) == 0)
    {
      const char *text = line + strlen (error_word);
      gsize text_length = length - strlen (error_word);

      if (!is_printable_text (text, text_length))
        return FALSE;
      parsed.kind = MV_EXEC_STATUS_ERROR;
      parsed.error = g_strndup (text, text_length);
    }
  else
    {
      return FALSE;
    }

  *status = parsed;
  return TRUE;
}

void
mv_exec_status_clear (MvExecStatus *status)
{
  g_clear_pointer (&status->error, g_free);
}

int
mv_exec_status_exit_code (const MvExecStatus *status)
{
  switch (status->kind)
    {
    case MV_EXEC_STATUS_EXIT:
      return status->code;
    case MV_EXEC_STATUS_SIGNAL:
      return 128 + status->code;
    case MV_EXEC_STATUS_ERROR:
    default:
      return MV_EXIT_EXEC_ERROR;
    }
}
