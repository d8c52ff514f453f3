/* The host's side of the guest agent (docs/agent-protocol.md): reaching
 * the agent's channel, telling it what the guest is to be, waiting for it
 * to be ready, and a session that lives on the main loop for as long as
 * the guest runs: exit reports, health, metadata, exec and power-off.
 *
 * Below the hypervisor layer: it knows channels, not VMMs. */
#pragma once
#include <glib.h>

#include "core/host/runtime.h"
#include "core/image-config.h"
#include "core/spec.h"
#include "guest/protocol.h"

/* The channel: a virtio-serial port of this name, or this vsock port
 * where the hypervisor offers vsock. */
#define MV_AGENT_PORT_NAME           "org.microvmd1.agent"
#define MV_AGENT_VSOCK_PORT          1024

typedef enum {
  MV_AGENT_CHANNEL_NONE,
  MV_AGENT_CHANNEL_SERIAL,   /* a virtio-serial port named MV_AGENT_PORT_NAME */
  MV_AGENT_CHANNEL_VSOCK,    /* vsock proxied through a Unix socket */
} MvAgentChannelKind;

typedef struct {
  MvAgentChannelKind kind;
  char              *socket_path;  /* the host end */
  guint32            cid;          /* vsock only, >= 3 */
} MvAgentChannel;

/* Connects to the agent's channel within @timeout_ms: the blocking,
 * close-on-exec fd of a stream on which the protocol starts, or -1 and
 * MV_ERROR_UNAVAILABLE. */
int       mv_agent_channel_dial (MvAgentChannelKind kind, const char *socket_path,
                                 guint timeout_ms, GError **error);

/* ---- what the guest is told (agent-config.c) ---- */

/* How the guest ends its VMM: Firecracker's VMM ends on a reboot, the
 * others on a power-off. */
typedef enum {
  MV_AGENT_END_POWEROFF,
  MV_AGENT_END_REBOOT,
} MvAgentEnd;

/* The CONFIG frame for @spec, whole, with the guest's interface on
 * @network (NULL: none; its gateway is its name server too); NULL and
 * MV_ERROR_INVALID_ARGUMENT if it would be over MV_AGENT_FRAME_MAX_BYTES. */
GBytes   *mv_agent_config_frame (const MvSpec *spec, const MvImageConfig *image,
                                 const MvNetworkAttachment *network, MvAgentEnd end,
                                 GError **error);
/* The CONFIG frame that boots a warm template for machines like @spec
 * (docs/agent-protocol.md, Templates): its root alone, nothing of any
 * one machine. MV_ERROR_UNSUPPORTED for a guest whose init is systemd. */
GBytes   *mv_agent_template_frame (const MvSpec *spec, const MvImageConfig *image,
                                   MvAgentEnd end, GError **error);
/* The METADATA frame for @spec: hostname (the machine's name unless the
 * spec names one), keys and the metadata document, with @console_keys
 * (MvConsoleKey*; may be NULL) in it. */
GBytes   *mv_agent_metadata_frame (const MvSpec *spec, const GPtrArray *console_keys,
                                   GError **error);
/* The REIDENTIFY frame telling a restored guest that it is @spec's
 * machine on @network (NULL: its interface is left as it is; the gateway
 * is its name server too), with @entropy (MV_AGENT_ENTROPY_MIN_BYTES to
 * _MAX_BYTES) for its kernel's random number generator. NULL and
 * MV_ERROR_INVALID_ARGUMENT if it would be over the frame limit. */
GBytes   *mv_agent_reidentify_frame (const MvSpec *spec, const MvNetworkAttachment *network,
                                     const guint8 *entropy, gsize entropy_len, GError **error);
/* The hostname the guest is given. */
const char *mv_agent_hostname (const MvSpec *spec);

/* ---- waiting for the agent at boot (agent-ready.c) ---- */

typedef struct {
  char     *agent_version;
  gboolean  exited;          /* the workload had already ended */
  gboolean  has_exit_code;
  int       exit_code;
  int       signal;          /* when it was killed; 0 otherwise */
} MvAgentReady;

void      mv_agent_ready_clear (MvAgentReady *ready);

/* Whether to go on waiting: FALSE with an error stops the wait. */
typedef gboolean (*MvAgentWaitCheck) (gpointer data, GError **error);

/* One attempt, in a worker thread: connects, says HELLO, gives an
 * unconfigured guest @config, and waits until the agent is ready (READY,
 * or a HELLO of a running guest) or its workload has ended. A guest
 * restored from a template (HELLO in state template) is given @identity
 * (its REIDENTIFY frame), then @config; without @identity such a guest
 * counts as ready: it is a template being built. A closed
 * connection is dialled again (a guest whose agent hands over to systemd
 * closes it). Returns TRUE and fills @ready; FALSE with MV_ERROR_UNAVAILABLE
 * if the channel cannot be reached yet (the caller tries again),
 * MV_ERROR_INVALID_STATE if the agent said FAILED (the message quotes it)
 * or spoke nonsense, or whatever @check said. @check is called at least
 * every 200 ms while waiting; @deadline is monotonic µs. */
gboolean  mv_agent_wait_ready (const MvAgentChannel *channel, GBytes *config, GBytes *identity,
                               gint64 deadline, MvAgentWaitCheck check, gpointer check_data,
                               MvAgentReady *ready, GError **error);

/* ---- the session (agent-session.c), main thread only ---- */

typedef struct _MvAgentSession MvAgentSession;

typedef struct {
  /* The agent answered (again): it runs @agent_version. */
  void (*hello) (const char *agent_version, gpointer data);
  /* The workload ended (the guest is about to end). */
  void (*exited) (gboolean has_exit_code, int exit_code, int signal, const char *message,
                  gpointer data);
  /* The health check's status changed. */
  void (*health) (const char *status, guint failing_streak, const char *output, gpointer data);
  /* What the guest's CPUs have done since boot (USAGE), every 2 s. */
  void (*usage) (guint64 cpu_busy_ticks, guint64 cpu_total_ticks, guint cpus, gpointer data);
  /* The agent answered REIDENTIFY: what it changed ("hostname", "mac",
   * ..., NULL-terminated) and what it could not do (NULL: nothing
   * failed). @known is FALSE for an agent that skipped the frame as one
   * it does not know (an older agent): nothing was changed. */
  void (*reidentified) (gboolean known, const char *const *changed, const char *message,
                        gpointer data);
  /* What the workload wrote to @stream (MV_AGENT_STREAM_STDOUT or
   * _STDERR), in the order it came, after @dropped bytes of it that the
   * agent could not keep for the host (0: none). @len may be 0 for a
   * drop alone. Asked for in the session's HELLO (WANT_OUTPUT) only
   * when this is set. */
  void (*output) (guint stream, const guint8 *bytes, gsize len, guint64 dropped,
                  gpointer data);
} MvAgentSessionEvents;

/* Keeps a session to the agent on @channel (copied), dialling again
 * while it cannot be reached or after it closes. @config (may be NULL) is
 * given to a guest that asks for it. */
MvAgentSession *mv_agent_session_new (const MvAgentChannel *channel, GBytes *config,
                                      const MvAgentSessionEvents *events, gpointer data);
/* Ends every exec relayed through it ("error" on their status). */
void      mv_agent_session_free (MvAgentSession *session);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (MvAgentSession, mv_agent_session_free)

/* Whether the agent has answered on the current connection. */
gboolean  mv_agent_session_ready (MvAgentSession *session);
/* Replaces the config given to a guest that asks, and sends @metadata
 * (may be NULL) now if the agent is ready, and at every reconnection. */
void      mv_agent_session_set_guest (MvAgentSession *session, GBytes *config, GBytes *metadata);
/* Sends @frame (mv_agent_reidentify_frame()) once the agent answers, or
 * now if it has; again on each new connection until the agent says
 * REIDENTIFIED (it applies the same identity twice as once). A PING after
 * it tells an agent that skipped it: its PONG comes first. */
void      mv_agent_session_reidentify (MvAgentSession *session, GBytes *frame);
/* Asks the agent to end the workload and power off; FALSE if it has not
 * answered. With @when_ready, one that has not answered yet is asked as
 * soon as it does (for a guest known to have an agent up: its session is
 * still connecting), and the answer is TRUE. */
gboolean  mv_agent_session_poweroff (MvAgentSession *session, gboolean when_ready);
/* PING with @payload, @done called with the PONG (or NULL if the session
 * closes first). */
gboolean  mv_agent_session_ping (MvAgentSession *session, GBytes *payload,
                                 void (*done) (GBytes *pong, gpointer data), gpointer data);

typedef struct {
  const char *const *argv;
  const char *const *env;      /* "KEY=VALUE", NULL-terminated; may be NULL */
  const char        *user;     /* NULL: root */
  const char        *working_dir;
  gboolean           tty;
  guint              rows, columns;
  /* A login session's: the secret of a console key in the guest's
   * metadata (MvConsoleKey), which its agent takes once; NULL: none. */
  const char        *console_key;
} MvAgentExec;

/* Starts @exec in the guest. Returns the caller's ends: @fds[0] stdin,
 * [1] stdout, [2] stderr (with tty, [0] and [1] are one socket and [2] is
 * closed at once), [3] the status (one line, "exit N", "signal N" or
 * "error TEXT", then end of file). Closing [3] kills the command; the
 * line "resize ROWS COLS" written to it gives a terminal a new size. An exec
 * asked for before the agent has answered waits for it, up to 20 s.
 * MV_ERROR_RESOURCE_EXHAUSTED at MV_AGENT_EXECS_MAX. */
gboolean  mv_agent_session_exec (MvAgentSession *session, const MvAgentExec *exec, int fds[4],
                                 GError **error);
guint     mv_agent_session_exec_count (MvAgentSession *session);
