/* A polkit text agent on the caller's terminal, so that a call the daemon
 * authorizes interactively can ask for a password (systemctl does the same). */
#pragma once

#include <glib.h>

typedef struct _MvPolkitAgent MvPolkitAgent;

/* Starts pkttyagent when stdin is a terminal and waits until it has
 * registered. Returns NULL when no agent is needed or none could start: the
 * call then goes ahead and polkit decides without asking. */
MvPolkitAgent *mv_polkit_agent_open (void);
void mv_polkit_agent_close (MvPolkitAgent *agent);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (MvPolkitAgent, mv_polkit_agent_close)
