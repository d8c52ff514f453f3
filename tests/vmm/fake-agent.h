/* microvmd-agent as the simulated guest runs it: the agent protocol of
 * docs/agent-protocol.md (src/guest/protocol.h) over the guest's vsock
 * agent port, one session per connection, several at once. CONFIG sets
 * the guest up and starts its workload; EXEC runs commands with DATA,
 * EOF and WINDOW flow control; HEALTH, METADATA, SIGNAL, POWEROFF and
 * PING as the document says. The commands are fake-shell's. */
#pragma once
#include <glib.h>
#include <json-glib/json-glib.h>

#include "guest/protocol.h"

typedef struct _FakeAgent FakeAgent;
typedef struct _FakeAgentSession FakeAgentSession;

/* What the agent does to its guest. end() powers it off or resets it
 * (@reboot); it is not called from inside fake_agent_free(). */
typedef struct {
  void     (*console) (gpointer data, const char *line);
  void     (*end) (gpointer data, gboolean reboot, const char *why);
  gpointer data;
} FakeAgentHooks;

/* @state: what fake_agent_snapshot_state() gave, or NULL; @clock: the
 * guest's clock now. */
FakeAgent *fake_agent_new (const FakeAgentHooks *hooks, JsonObject *state, double clock);
void       fake_agent_free (FakeAgent *agent);
/* The guest's clock moved on to @clock (seconds): processes, health
 * checks and timeouts move with it. */
void       fake_agent_tick (FakeAgent *agent, double clock);
/* FALSE while no agent listens (systemd is taking over). */
gboolean   fake_agent_listening (FakeAgent *agent);
/* Open sessions are not part of it. */
JsonNode  *fake_agent_snapshot_state (FakeAgent *agent);

FakeAgentSession *fake_agent_session_new (FakeAgent *agent);
/* The connection is gone: its execs are killed. */
void              fake_agent_session_free (FakeAgentSession *session);
/* Takes the whole frames at the start of @data; returns the bytes taken,
 * or -1 when the session is to end (a malformed frame). */
gssize            fake_agent_session_feed (FakeAgentSession *session, const guint8 *data,
                                           gsize len);
/* Frames to write out; the caller consumes what it wrote. */
MvAgentBuf       *fake_agent_session_output (FakeAgentSession *session);
/* The guest closes this session once its output is written. */
gboolean          fake_agent_session_ending (FakeAgentSession *session);
