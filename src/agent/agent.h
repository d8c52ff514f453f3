/* microvmd-agent: microvmd's program inside the guest. One process, one
 * poll() loop, the state in one place (the Agent below); the files split
 * it by concern:
 *
 *   main.c      modes, the loop, signals, how the guest ends
 *   boot.c      PID 1's work: file systems, modules, the channel, the root
 *   session.c   sessions: frames in and out, HELLO, CONFIG, EXIT
 *   exec.c      processes: the workload, EXEC channels and their streams
 *   health.c    the health check
 *   metadata.c  hostname, keys and document; the state saved for --service
 *   network.c   the interface on the guest's network
 *   identity.c  REIDENTIFY: a restored guest's new identity and entropy
 *   output.c    the workload's stdout and stderr, to the console and the hosts
 *
 * Plain C and the C library only: it runs in an initramfs as /init. */
#pragma once
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "guest/protocol.h"
#include "guest/users.h"

#define AGENT_VERSION            "0.1.0"
#define AGENT_STATE_DIR          "/run/microvmd"
#define AGENT_CHANNEL_NAME       "org.microvmd1.agent"
#define AGENT_VSOCK_PORT         1024
#define AGENT_SESSIONS_MAX       16
/* A session whose host does not read stops being read from once this much
 * waits to be written to it. */
#define AGENT_OUT_HIGH_BYTES     (1024u * 1024)
#define AGENT_BASE_PATH          "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#define AGENT_EXIT_ACK_WAIT_MS   5000
#define AGENT_POWEROFF_KILL_MS   10000
#define AGENT_HEALTH_OUTPUT_MAX  4096

typedef enum { MODE_PID1, MODE_SERVICE, MODE_TEST } AgentMode;
typedef enum { STATE_UNCONFIGURED, STATE_TEMPLATE, STATE_RUNNING, STATE_EXITED } AgentState;

/* A NULL-terminated, growing list of strings (argv, env, keys). */
typedef struct {
  char  **items;
  size_t  len;
} StrList;

typedef struct {
  bool     configured;
  StrList  argv;          /* exec check */
  uint32_t port;          /* tcp or http */
  char    *path;          /* http */
  uint32_t interval, timeout, retries, start_period;
} HealthCheck;

/* The guest's interface on its network. */
typedef struct {
  bool     configured;
  char    *mac;           /* which interface */
  char    *address;       /* "10.0.0.2/24" */
  char    *gateway;       /* NULL: no default route */
  uint32_t mtu;           /* 0: leave it */
  StrList  dns;
} NetConfig;

/* What REIDENTIFY changed, for its answer's CHANGED fields. */
typedef enum {
  CHANGED_HOSTNAME = 1u << 0,
  CHANGED_METADATA = 1u << 1,   /* the keys or the document */
  CHANGED_MAC      = 1u << 2,
  CHANGED_ADDRESS  = 1u << 3,
  CHANGED_ROUTE    = 1u << 4,
  CHANGED_MTU      = 1u << 5,
  CHANGED_DNS      = 1u << 6,
  CHANGED_ENTROPY  = 1u << 7,   /* mixed into the kernel's pool, which reseeded */
} Changed;

/* What CONFIG said, kept for the whole boot. */
typedef struct {
  uint8_t    *raw;        /* the frame's fields as received: saved for --service */
  size_t      raw_len;
  char        init_mode[16];
  char        end[16];
  bool        template_boot; /* TEMPLATE: the root only; a later CONFIG gives the rest */
  char       *root;
  char       *overlay;     /* the disk the root's changes go to; NULL: memory */
  char       *hostname;
  StrList     keys;
  char       *document;
  StrList     argv, env;
  char       *workdir;
  char       *user;
  HealthCheck health;
  NetConfig   net;
} Config;

typedef struct Session Session;

struct Session {
  int        fd;
  bool       serial;        /* the virtio-serial port: not closed, only reset */
  bool       hello;         /* the host said HELLO */
  bool       want_output;   /* ... with WANT_OUTPUT: it gets the workload's OUTPUT */
  uint64_t   output_dropped; /* the workload's bytes it missed, not yet told */
  uint8_t   *in;            /* up to MV_AGENT_FRAME_MAX_BYTES */
  size_t     in_len;
  MvAgentBuf out;
  int        pidx;
};

typedef struct {
  bool      used;
  Session  *session;        /* NULL once its session closed */
  uint32_t  channel;
  pid_t     pid;            /* 0 once reaped */
  int       status;
  bool      tty;
  int       in_fd;          /* stdin (the pty master for a tty), -1 closed */
  int       out_fd[3];      /* [1] stdout (or the pty), [2] stderr; -1 closed */
  uint8_t  *in_queue;       /* stdin bytes not yet written */
  size_t    in_queue_len;
  bool      in_eof;         /* the host sent EOF of stdin */
  uint32_t  in_written;     /* written to the process, not yet granted again */
  uint32_t  credit[3];      /* what we may still send of stdout, stderr */
  int64_t   exited_at;      /* ms, once reaped: how long output may drain */
  int       in_pidx, out_pidx[3];
} Exec;

typedef struct {
  AgentMode   mode;
  AgentState  state;
  const char *state_dir;
  int         log_fd;
  int         signal_fd;
  bool        quit;           /* test mode: the process ends */

  /* The channel. */
  int         listen_fd;      /* vsock, or -1 */
  int         listen_pidx;
  char        serial_path[64];
  int         serial_fd;      /* the port, open for the whole boot, or -1 */
  bool        serial_hup;     /* no host connected */
  Session    *sessions[AGENT_SESSIONS_MAX];
  size_t      n_sessions;

  Config      config;
  bool        have_config;

  /* The workload (exec mode). */
  pid_t       workload_pid;
  int         workload_status;
  bool        workload_ended;
  int64_t     exit_deadline;  /* waiting for EXIT_ACK until then; 0 not waiting */
  int64_t     kill_deadline;  /* POWEROFF: SIGKILL then; 0 none */
  bool        ending;         /* end the guest once the workload is gone */
  bool        end_now;

  Exec        execs[MV_AGENT_EXECS_MAX];

  /* ACPI power button inputs. */
  int         button_fds[4];
  size_t      n_buttons;
  int         button_pidx[4];

  uint64_t    instance;       /* HELLO's INSTANCE: when this process started */
} Agent;

extern Agent agent;

/* main.c */
void    agent_log (const char *fmt, ...) __attribute__ ((format (printf, 1, 2)));
int64_t now_ms (void);
void    strlist_add (StrList *list, const char *item);
void    strlist_free (StrList *list);
const char *strlist_env (const StrList *env, const char *key);
bool    mkdir_parents (const char *path, mode_t mode);
bool    write_file_atomic (const char *path, const void *data, size_t len, mode_t mode);
void    set_nonblock_cloexec (int fd);
/* Ends the guest as END says (in test mode: the process exits 0). */
void    agent_end_guest (void) __attribute__ ((noreturn));
void    agent_poweroff (void);

/* boot.c */
void    boot_early (void);
bool    boot_open_channel (bool wait_for_ports);
bool    boot_setup_root (const Config *config, char *error, size_t size);
bool    boot_apply_mounts (const Config *config, char *error, size_t size);
void    boot_release_volumes (const Config *config);
void    boot_open_power_buttons (void);
/* Returns only when it could not hand over (false, @error set). */
bool    boot_handoff_to_systemd (const Config *config, char *error, size_t size);

/* session.c */
Session *session_new (int fd, bool serial);
void    session_close (Session *session);
void    session_reset (Session *session);
void    session_send_hello (Session *session);
void    session_handle_input (Session *session);
bool    session_flush (Session *session);
void    sessions_broadcast_exit (void);
void    sessions_broadcast_health (void);
bool    config_parse (const uint8_t *data, size_t len, Config *config, char *error, size_t size);
/* A NET field's value (nested fields) into @net. */
bool    config_parse_net (const MvAgentField *outer, NetConfig *net, char *error, size_t size);
void    net_config_clear (NetConfig *net);
void    agent_apply_config (Session *from, const MvAgentFrame *frame);

/* exec.c */
/* Resolves @name against @path_list (a PATH). 0 and @out, or 127 (not
 * found) / 126 (not executable) with @error set. */
int     exec_resolve (const char *name, const char *path_list,
                      char *out, size_t out_size, char *error, size_t size);
/* USER as a process runs as it: mv_user_lookup() in the guest's root
 * (the test mode keeps its own ids unless it is root and USER is set). */
bool    agent_user_lookup (const char *spec, MvUser *user, char *error, size_t size);
void    exec_build_env (const MvUser *user, const StrList *extra, StrList *env);
/* Forks @path: its own session, the ids of @user, @workdir (or the
 * user's home). stdin/out/err are the given fds (-1: /dev/null). The
 * pid, or minus an exit code (125, 126, 127) with @error set. */
pid_t   spawn_process (const char *path, char *const argv[], char *const envp[],
                       const MvUser *user, const char *workdir,
                       int in_fd, int out_fd, int err_fd, const char *tty_slave,
                       char *error, size_t size);
void    exec_start (Session *session, const MvAgentFrame *frame);
void    exec_frame (Session *session, const MvAgentFrame *frame);
void    exec_session_closed (Session *session);
size_t  exec_poll_add (struct pollfd *fds, size_t n);
void    exec_poll_dispatch (struct pollfd *fds);
bool    exec_reaped (pid_t pid, int status);
int64_t exec_next_deadline (void);
void    exec_timers (void);
size_t  exec_count (void);

/* health.c */
void    health_start (const HealthCheck *check, const MvUser *user, const StrList *env);
size_t  health_poll_add (struct pollfd *fds, size_t n);
void    health_poll_dispatch (struct pollfd *fds);
bool    health_reaped (pid_t pid, int status);
int64_t health_next_deadline (void);
void    health_timers (void);
bool    health_put (MvAgentBuf *buf);

/* output.c */
/* Pipes for the workload's stdout and stderr: @child_fds[1] and [2] are
 * its ends ([0] is -1), for the caller to close once it has started. */
bool    output_open (int child_fds[3], char *error, size_t size);
/* @session's host asked for OUTPUT: what was held for it is queued. */
void    output_session_greeted (Session *session);
/* Reads what the pipes hold now, to their end or until they are empty:
 * before EXIT, so that the host has the output before the end. */
void    output_drain (void);
size_t  output_poll_add (struct pollfd *fds, size_t n);
void    output_poll_dispatch (struct pollfd *fds);

/* cpus.c */
/* Onlines hot-added vCPUs: any present one offline now, then each the
 * kernel announces (a uevent socket, polled in the loop). */
void    cpus_start (void);
size_t  cpus_poll_add (struct pollfd *fds, size_t n);
void    cpus_poll_dispatch (struct pollfd *fds);

/* usage.c */
int64_t usage_next_deadline (void);
void    usage_timers (void);

/* metadata.c */
/* Applies HOSTNAME, SSH_KEY... and DOCUMENT of @data (a CONFIG's,
 * METADATA's or REIDENTIFY's fields), leaving alone what is so already;
 * @changed (may be NULL) gets CHANGED_HOSTNAME and CHANGED_METADATA for
 * what was not. */
/* The metadata document the guest has now (malloc, NUL-terminated), or NULL. */
char   *metadata_document (void);
bool    metadata_apply (const uint8_t *data, size_t len, unsigned *changed, char *error,
                        size_t size);

/* network.c */
bool    network_apply (const NetConfig *net, char *error, size_t size);
/* Gives the interface @had configured (or the one with @want's MAC, or
 * the guest's only one) @want's MAC, address, MTU, default route and
 * name servers, each only if it differs; @changed gets what did. */
bool    network_reidentify (const NetConfig *want, const NetConfig *had, unsigned *changed,
                            char *error, size_t size);

/* identity.c */
/* REIDENTIFY from @from: applied, and answered with REIDENTIFIED. */
void    identity_apply (Session *from, const MvAgentFrame *frame);
bool    state_save (const Config *config);
bool    state_load (Config *config);
int     authorized_keys_print (const char *state_dir);
