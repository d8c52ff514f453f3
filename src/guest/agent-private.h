/* What the host's files of the agent share (agent-ready.c,
 * agent-session.c, agent-frames.c). */
#pragma once
#include "agent.h"

/* The tags whose values are fields themselves. */
static const guint8 MV_AGENT_NESTED_TAGS[] = { MV_AGENT_F_MOUNT, MV_AGENT_F_HEALTH_CHECK };

/* A string field of @frame, made valid UTF-8, or NULL if it is missing
 * or holds a NUL. */
char *mv_agent_frame_string (const MvAgentFrame *frame, guint8 tag);
/* How EXIT, EXEC_EXIT or an exited HELLO says the process ended. */
void  mv_agent_frame_exit (const MvAgentFrame *frame, gboolean *has_exit_code, int *exit_code,
                           int *signal);
/* A frame without fields: its header, written to @out. */
void  mv_agent_frame_header (guint8 out[MV_AGENT_FRAME_HEADER_BYTES], guint8 type,
                             guint32 channel);
