/* The agent protocol: how microvmd and microvmd-agent talk over the
 * guest's agent channel (a virtio-serial port, or a vsock port). The
 * format is described in docs/agent-protocol.md; this file is its one
 * implementation, used by both ends.
 *
 * Plain C with the C library only: the agent is a static program in the
 * guest and links this file as it is. Nothing here allocates but the
 * builder, and every length read from the wire is checked against the
 * bytes that hold it. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The version both ends speak; a HELLO of another major version is
 * refused by the host. */
#define MV_AGENT_PROTOCOL_VERSION   1

/* A frame on the wire: its length (u32, big-endian, counting what follows
 * it), then its type (u8), its channel (u32 big-endian) and its fields. */
#define MV_AGENT_FRAME_HEADER_BYTES 9
/* The largest frame either end sends or takes: room for a CONFIG with
 * 1 MiB of file mounts (base64 is decoded on the host), the 256 KiB
 * metadata document, and the command line and environment. */
#define MV_AGENT_FRAME_MAX_BYTES    (4u * 1024 * 1024)
/* Fields nest (a mount inside a CONFIG); this deep at most. */
#define MV_AGENT_NEST_MAX_DEPTH     4
/* DATA carries at most this much of a stream, and a stream may have this
 * much in flight before its reader grants more with WINDOW. */
#define MV_AGENT_DATA_MAX_BYTES     (64u * 1024)
#define MV_AGENT_WINDOW_BYTES       (256u * 1024)
/* How often the agent says what the guest's CPUs have done (USAGE). */
#define MV_AGENT_USAGE_INTERVAL_MS  2000
/* Execs running at once in one guest, over all sessions. */
#define MV_AGENT_EXECS_MAX          64
/* REIDENTIFY's ENTROPY: the host's random bytes for the guest kernel's
 * generator, at least enough to reseed it wholly, at most this many. */
#define MV_AGENT_ENTROPY_MIN_BYTES  64
#define MV_AGENT_ENTROPY_MAX_BYTES  512
/* A console key's secret: this many lower-case hexadecimal digits (the
 * host's MV_CONSOLE_SECRET_CHARS). */
#define MV_AGENT_CONSOLE_SECRET_CHARS 64
/* Console keys an agent remembers having taken, so that each opens one
 * session however long the host leaves it in the document. */
#define MV_AGENT_CONSOLE_KEYS_USED_MAX 256
/* The workload's output the agent holds for a host that has not asked for
 * it yet (or is away); what does not fit is dropped, and counted. */
#define MV_AGENT_OUTPUT_PENDING_BYTES (256u * 1024)

typedef enum {
  /* guest -> host */
  MV_AGENT_HELLO        = 1,   /* VERSION, AGENT_VERSION, INSTANCE, STATE [, EXIT_CODE | SIGNAL, MESSAGE]; the host's: VERSION */
  MV_AGENT_READY        = 3,   /* the workload started (or there is none) */
  MV_AGENT_FAILED       = 4,   /* MESSAGE: the guest could not be set up as CONFIG said */
  MV_AGENT_EXIT         = 5,   /* EXIT_CODE | SIGNAL [, MESSAGE]: the workload ended */
  MV_AGENT_EXEC_EXIT    = 9,   /* channel: EXIT_CODE | SIGNAL [, MESSAGE] */
  MV_AGENT_HEALTH       = 15,  /* HEALTH_STATUS, FAILING_STREAK [, OUTPUT] */
  MV_AGENT_PONG         = 19,  /* BYTES: PING's */
  MV_AGENT_USAGE        = 20,  /* CPU_BUSY, CPU_TOTAL, CPUS: what the guest's CPUs have done */
  MV_AGENT_REIDENTIFIED = 22,  /* CHANGED... [, MESSAGE]: REIDENTIFY done (MESSAGE: what failed) */
  MV_AGENT_OUTPUT       = 23,  /* STREAM, BYTES [, DROPPED]: the workload's stdout or stderr, to a host whose HELLO had WANT_OUTPUT */
  /* host -> guest */
  MV_AGENT_CONFIG       = 2,   /* the guest's whole configuration, see docs */
  MV_AGENT_EXIT_ACK     = 6,   /* the host has recorded EXIT */
  MV_AGENT_EXEC         = 7,   /* channel (host's choice, > 0): ARGV..., ENV..., WORKDIR, USER, TTY, ROWS, COLS */
  MV_AGENT_SIGNAL       = 13,  /* channel: SIGNAL, to the exec's process group */
  MV_AGENT_METADATA     = 14,  /* HOSTNAME, SSH_KEY..., DOCUMENT: replaces what CONFIG gave */
  MV_AGENT_POWEROFF     = 16,  /* end the workload and power the guest off */
  MV_AGENT_PING         = 18,  /* BYTES, echoed in PONG */
  MV_AGENT_REIDENTIFY   = 21,  /* HOSTNAME, NET, SSH_KEY..., DOCUMENT, ENTROPY: a restored guest's new identity */
  MV_AGENT_RESIZE       = 24,  /* channel: ROWS, COLS: an exec's terminal's new size */
  /* both ways */
  MV_AGENT_DATA         = 10,  /* channel: STREAM, BYTES */
  MV_AGENT_EOF          = 11,  /* channel: STREAM: no more of it */
  MV_AGENT_WINDOW       = 12,  /* channel: STREAM, GRANT: the sender may send GRANT more bytes */
} MvAgentType;

typedef enum {
  MV_AGENT_F_VERSION        = 1,   /* u32 */
  MV_AGENT_F_AGENT_VERSION  = 2,   /* str */
  MV_AGENT_F_STATE          = 3,   /* str: "unconfigured", "running", "exited" */
  MV_AGENT_F_EXIT_CODE      = 4,   /* u32, 0-255 */
  MV_AGENT_F_SIGNAL         = 5,   /* u32 */
  MV_AGENT_F_MESSAGE        = 6,   /* str */
  MV_AGENT_F_INIT_MODE      = 7,   /* str: "exec", "systemd" (never "auto": the host resolves it) */
  MV_AGENT_F_END            = 8,   /* str: "poweroff" or "reboot": how the guest ends its VMM */
  MV_AGENT_F_ARGV           = 10,  /* str, repeated, in order */
  MV_AGENT_F_ENV            = 11,  /* str "KEY=VALUE", repeated */
  MV_AGENT_F_WORKDIR        = 12,  /* str */
  MV_AGENT_F_USER           = 13,  /* str: user, uid, user:group, uid:gid */
  MV_AGENT_F_TTY            = 14,  /* u32 0/1 */
  MV_AGENT_F_ROWS           = 15,  /* u32 */
  MV_AGENT_F_COLS           = 16,  /* u32 */
  MV_AGENT_F_STREAM         = 17,  /* u32: 0 stdin, 1 stdout, 2 stderr */
  MV_AGENT_F_BYTES          = 18,  /* raw */
  MV_AGENT_F_GRANT          = 19,  /* u32 */
  MV_AGENT_F_HOSTNAME       = 20,  /* str */
  MV_AGENT_F_SSH_KEY        = 21,  /* str, repeated */
  MV_AGENT_F_DOCUMENT       = 22,  /* str: the metadata document, JSON */
  MV_AGENT_F_ROOT           = 23,  /* str: the root disk's device, "/dev/vda" */
  MV_AGENT_F_MOUNT          = 24,  /* nested: MOUNT_TYPE, TARGET [, CONTENT, MODE, SIZE, READ_ONLY] */
  MV_AGENT_F_HEALTH_CHECK   = 25,  /* nested: ARGV... | PORT [, PATH], INTERVAL, TIMEOUT, RETRIES, START_PERIOD */
  MV_AGENT_F_MOUNT_TYPE     = 26,  /* str: "file", "tmpfs", "volume" */
  MV_AGENT_F_TARGET         = 27,  /* str: an absolute path in the guest */
  MV_AGENT_F_CONTENT        = 28,  /* raw: a file mount's bytes */
  MV_AGENT_F_MODE           = 29,  /* u32: permission bits */
  MV_AGENT_F_SIZE           = 30,  /* u64: a tmpfs's size in bytes, 0 = the kernel's default */
  MV_AGENT_F_READ_ONLY      = 31,  /* u32 0/1 */
  MV_AGENT_F_PORT           = 32,  /* u32: tcp or http health check port */
  MV_AGENT_F_PATH           = 33,  /* str: http health check path */
  MV_AGENT_F_INTERVAL       = 34,  /* u32 seconds */
  MV_AGENT_F_TIMEOUT        = 35,  /* u32 seconds */
  MV_AGENT_F_RETRIES        = 36,  /* u32 */
  MV_AGENT_F_START_PERIOD   = 37,  /* u32 seconds */
  MV_AGENT_F_HEALTH_STATUS  = 38,  /* str: "starting", "healthy", "unhealthy" */
  MV_AGENT_F_FAILING_STREAK = 39,  /* u32 */
  MV_AGENT_F_OUTPUT         = 40,  /* str: the last check's output, at most 4 KiB */
  MV_AGENT_F_CPU_BUSY       = 41,  /* u64: clock ticks the guest's CPUs were busy, since boot */
  MV_AGENT_F_INSTANCE       = 42,  /* u64: this agent process, unlike any other of the boot */
  MV_AGENT_F_CPU_TOTAL      = 43,  /* u64: clock ticks of the guest's CPUs in all, since boot */
  MV_AGENT_F_CPUS           = 44,  /* u32: the guest's online CPUs */
  MV_AGENT_F_SOURCE         = 46,  /* str: a mount's source in the guest: a virtio-fs tag or a block device */
  MV_AGENT_F_OVERLAY        = 47,  /* str: the overlay disk's device, "/dev/vdb": the root's upper layer */
  MV_AGENT_F_NET            = 48,  /* nested: MAC, ADDRESS, GATEWAY [, MTU, DNS...] */
  MV_AGENT_F_MAC            = 49,  /* str: "02:xx:xx:xx:xx:xx", which interface */
  MV_AGENT_F_ADDRESS        = 50,  /* str: IPv4 address with prefix length, "10.0.0.2/24" */
  MV_AGENT_F_GATEWAY        = 51,  /* str: IPv4 address, the default route */
  MV_AGENT_F_MTU            = 52,  /* u32 */
  MV_AGENT_F_DNS            = 53,  /* str, repeated: name servers */
  MV_AGENT_F_ENTROPY        = 54,  /* raw: MV_AGENT_ENTROPY_MIN_BYTES to _MAX_BYTES from the host's getrandom() */
  MV_AGENT_F_CHANGED        = 55,  /* str, repeated: what REIDENTIFY changed: "hostname", "mac", ... */
  MV_AGENT_F_WANT_OUTPUT    = 56,  /* u32 0/1, in the host's HELLO: send this session OUTPUT */
  MV_AGENT_F_DROPPED        = 57,  /* u64: the workload's bytes dropped before this OUTPUT's */
  MV_AGENT_F_TEMPLATE       = 58,  /* u32 0/1, in CONFIG: boot a warm template: the root only */
  MV_AGENT_F_CONSOLE_KEY    = 59,  /* str, in EXEC: a console key's secret: a login session (docs) */
} MvAgentTag;

typedef enum {
  MV_AGENT_STREAM_STDIN  = 0,
  MV_AGENT_STREAM_STDOUT = 1,
  MV_AGENT_STREAM_STDERR = 2,
} MvAgentStream;

/* A frame as parsed: its fields are payload[0 .. payload_len), pointing
 * into the buffer it was parsed from. */
typedef struct {
  uint8_t        type;
  uint32_t       channel;
  const uint8_t *payload;
  uint32_t       payload_len;
} MvAgentFrame;

typedef struct {
  uint8_t        tag;
  uint32_t       len;
  const uint8_t *value;
} MvAgentField;

typedef struct {
  const uint8_t *next;
  const uint8_t *end;
} MvAgentFields;

/* Parses the frame at the start of @buf. Returns the bytes it takes, 0 if
 * @buf holds only part of it, and -1 if it cannot be a frame (a length
 * below the header or above MV_AGENT_FRAME_MAX_BYTES), with *@why saying
 * so. Fields are not looked at. */
long  mv_agent_frame_parse (const uint8_t *buf, size_t len, MvAgentFrame *frame, const char **why);

void  mv_agent_fields_init (MvAgentFields *fields, const uint8_t *data, size_t len);
/* 1 and the next field, 0 at the end, -1 if what is left is not a whole
 * field. */
int   mv_agent_fields_next (MvAgentFields *fields, MvAgentField *field);
/* Checks that every field of @data, nested ones to MV_AGENT_NEST_MAX_DEPTH
 * (@nested says which tags nest), is whole: what a reader does once per
 * frame before it trusts mv_agent_fields_next(). */
bool  mv_agent_fields_valid (const uint8_t *data, size_t len, const uint8_t *nested,
                             size_t n_nested);

/* A field's value as a number (4 bytes, or 8 for u64) or a string (no NUL
 * in it; copied into @out of @size bytes, NUL-terminated, false if it
 * does not fit). */
bool  mv_agent_field_u32 (const MvAgentField *field, uint32_t *out);
bool  mv_agent_field_u64 (const MvAgentField *field, uint64_t *out);
bool  mv_agent_field_str (const MvAgentField *field, char *out, size_t size);
/* The value as a NUL-free string of its own (malloc), or NULL. */
char *mv_agent_field_strdup (const MvAgentField *field);

/* The first field of @frame tagged @tag, or false. */
bool  mv_agent_frame_find (const MvAgentFrame *frame, uint8_t tag, MvAgentField *field);
bool  mv_agent_frame_u32 (const MvAgentFrame *frame, uint8_t tag, uint32_t *out);

/* Builds frames into a growing buffer. A builder that could not grow, or
 * whose frame went over MV_AGENT_FRAME_MAX_BYTES, is failed: its calls do
 * nothing and mv_agent_buf_end() says false. */
typedef struct {
  uint8_t *data;
  size_t   len;
  size_t   cap;
  size_t   frame_start;
  size_t   nest[MV_AGENT_NEST_MAX_DEPTH];
  int      depth;
  bool     failed;
} MvAgentBuf;

void  mv_agent_buf_init (MvAgentBuf *buf);
void  mv_agent_buf_clear (MvAgentBuf *buf);
/* Drops the first @n bytes (what has been written out). */
void  mv_agent_buf_consume (MvAgentBuf *buf, size_t n);

void  mv_agent_buf_begin (MvAgentBuf *buf, uint8_t type, uint32_t channel);
void  mv_agent_buf_put (MvAgentBuf *buf, uint8_t tag, const void *value, size_t len);
void  mv_agent_buf_put_str (MvAgentBuf *buf, uint8_t tag, const char *value);
void  mv_agent_buf_put_u32 (MvAgentBuf *buf, uint8_t tag, uint32_t value);
void  mv_agent_buf_put_u64 (MvAgentBuf *buf, uint8_t tag, uint64_t value);
/* A nested field: its fields are what is put until mv_agent_buf_close(). */
void  mv_agent_buf_open (MvAgentBuf *buf, uint8_t tag);
void  mv_agent_buf_close (MvAgentBuf *buf);
/* Ends the frame begun last; false (and the frame dropped) if the builder
 * failed on the way. */
bool  mv_agent_buf_end (MvAgentBuf *buf);

/* Names, for logs and errors. */
const char *mv_agent_type_name (uint8_t type);
