/* Reading the host's side of frames (agent-private.h). */
#include "agent-private.h"

#include <string.h>

char *
mv_agent_frame_string (const MvAgentFrame *frame, guint8 tag)
{
  MvAgentField field;

  if (!mv_agent_frame_find (frame, tag, &field) || memchr (field.value, '\0', field.len))
    return NULL;
  return g_utf8_make_valid ((const char *) field.value, field.len);
}

void
mv_agent_frame_exit (const MvAgentFrame *frame, gboolean *has_exit_code, int *exit_code,
                     int *signal)
{
  guint32 value;

  *has_exit_code = FALSE;
  *exit_code = 0;
  *signal = 0;
  if (mv_agent_frame_u32 (frame, MV_AGENT_F_EXIT_CODE, &value) && value <= 255)
    {
      *has_exit_code = TRUE;
      *exit_code = (int) value;
    }
  else if (mv_agent_frame_u32 (frame, MV_AGENT_F_SIGNAL, &value) && value > 0 && value < 128)
    *signal = (int) value;
}

void
mv_agent_frame_header (guint8 out[MV_AGENT_FRAME_HEADER_BYTES], guint8 type, guint32 channel)
{
  const guint32 body = MV_AGENT_FRAME_HEADER_BYTES - 4;

  out[0] = body >> 24;
  out[1] = body >> 16;
  out[2] = body >> 8;
  out[3] = body;
  out[4] = type;
  out[5] = channel >> 24;
  out[6] = channel >> 16;
  out[7] = channel >> 8;
  out[8] = channel;
}
