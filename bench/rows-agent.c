/* #10: microvmd's own guest (its kernel, its initramfs whose /init is
 * microvmd-agent, a busybox root disk) through the daemon, against the
 * same guest under a bare QEMU whose agent channel the benchmark serves
 * itself: boot until the agent is READY, an exec of `true`, and the end of
 * the guest.
 *
 * On the bare QEMU the benchmark is the agent's host, frame by frame:
 * HELLO, the CONFIG the daemon would send for the same spec
 * (mv_agent_config_frame), READY; PING/PONG and EXEC on that session; then
 * POWEROFF, or SIGKILL. That is the same boot and handshake without the
 * daemon, and the daemon's Exec is that EXEC plus D-Bus, polkit, passing
 * the descriptors and the relay. */
#include "bench.h"

#include "names.h"
#include "core/spec.h"
#include "guest/agent.h"
#include "guest/protocol.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <glib/gstdio.h>

#define QEMU            "qemu-system-x86_64"
/* The daemon's default command line under TCG (src/hypervisor/qemu.c). */
#define KERNEL_ARGS     "console=ttyS0 reboot=t panic=-1 tsc_early_khz=2000000"
/* What the agent writes to the console just before it sends READY to a
 * guest without a workload (src/agent/session.c). */
#define SET_UP_LINE     "microvmd-agent: no workload"
#define POWERED_OFF     "The guest powered off at its agent's request"
#define RUNS            5
#define ROUND_TRIPS     200       /* over all runs */
#define PING_BYTES      64
#define BOOT_TIMEOUT_S  120
#define FRAME_TIMEOUT_S 60

typedef struct {
  char *kernel;
  char *initramfs;
  char *rootfs;
} GuestFiles;

/* A session on a bare QEMU's agent socket. */
typedef struct {
  int         fd;
  GByteArray *in;
  gsize       taken;          /* bytes of the frame returned last */
  guint32     last_channel;
  GPid        qemu;
  char       *dir;
} Bare;

/* A session of its own, as the daemon gives its VMMs (src/hypervisor/
 * process.c): with the kernel's autogroup scheduling that is a CPU share
 * of its own, and without it the bare QEMU would share the benchmark's
 * with whatever else runs in that session. */
static void
child_setup (gpointer data)
{
  setsid ();
  prctl (PR_SET_PDEATHSIG, SIGKILL);
}

/* Cold: a warm template, built behind the first run's start, would wake
 * the later ones from a guest whose agent has set up already; the row
 * is the agent's boot, as bare QEMU's is. */
static char *
spec_json (const char *name, const GuestFiles *files)
{
  return g_strdup_printf ("{\"name\":\"%s\",\"hypervisor_type\":\"qemu\","
                          "\"memory_bytes\":268435456,\"start_mode\":\"cold\","
                          "\"disks\":[{\"path\":\"%s\",\"read_only\":true,\"root\":true}]}",
                          name, files->rootfs);
}

static BenchSamples *
samples_copy (const BenchSamples *samples)
{
  BenchSamples *copy = bench_samples_new ();

  for (guint i = 0; i < bench_samples_count (samples); i++)
    bench_samples_add (copy, g_array_index (samples->values, double, i));
  return copy;
}

/* ---- the bare QEMU and its agent session ---- */

static void
send_bytes (Bench *bench, int fd, const guint8 *data, gsize len)
{
  while (len > 0)
    {
      ssize_t n = send (fd, data, len, MSG_NOSIGNAL);

      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        bench_fail (bench, "writing to the bare guest's agent channel: %s", g_strerror (errno));
      data += n;
      len -= n;
    }
}

/* Sends what @buf holds (one frame or more, each ended) and empties it. */
static void
send_buf (Bench *bench, Bare *bare, MvAgentBuf *buf)
{
  if (buf->failed)
    bench_fail (bench, "could not build a frame for the bare guest");
  send_bytes (bench, bare->fd, buf->data, buf->len);
  mv_agent_buf_clear (buf);
}

/* The next frame from the guest; its payload lives until the next call. */
static void
next_frame (Bench *bench, Bare *bare, MvAgentFrame *frame)
{
  gint64 deadline = bench_now () + FRAME_TIMEOUT_S * G_USEC_PER_SEC;

  if (bare->taken)
    {
      g_byte_array_remove_range (bare->in, 0, bare->taken);
      bare->taken = 0;
    }
  for (;;)
    {
      const char *why = NULL;
      long n = mv_agent_frame_parse (bare->in->data, bare->in->len, frame, &why);
      struct pollfd p = { .fd = bare->fd, .events = POLLIN };
      guint8 chunk[16384];
      gint64 left;
      ssize_t got;

      if (n < 0)
        bench_fail (bench, "the bare guest's agent sent %s", why);
      if (n > 0)
        {
          bare->taken = (gsize) n;
          return;
        }
      left = deadline - bench_now ();
      if (left <= 0)
        bench_fail (bench, "the bare guest's agent was silent for %d s (console: %s/console.log)",
                    FRAME_TIMEOUT_S, bare->dir);
      if (poll (&p, 1, (int) (left / 1000) + 1) <= 0)
        continue;
      got = recv (bare->fd, chunk, sizeof chunk, 0);
      if (got < 0 && errno == EINTR)
        continue;
      if (got <= 0)
        bench_fail (bench, "the bare guest's agent channel closed (console: %s/console.log)",
                    bare->dir);
      g_byte_array_append (bare->in, chunk, (guint) got);
    }
}

/* The same VMM as the daemon's (src/hypervisor/qemu.c, build_argv) for a
 * spec with one read-only disk, less its two QMP monitors and its wall. */
static GPid
spawn_qemu (Bench *bench, const char *dir, const GuestFiles *files)
{
  g_autofree char *console = g_strdup_printf ("file,id=console,path=%s/console.log,append=on", dir);
  g_autofree char *agent = g_strdup_printf ("socket,id=agent,path=%s/agent.sock,server=on,wait=off", dir);
  g_autofree char *drive = g_strdup_printf ("id=disk0,file=%s,format=raw,if=none,readonly=on",
                                            files->rootfs);
  g_autofree char *log = g_build_filename (dir, "qemu.log", NULL);
  const char *argv[] = {
    QEMU, "-name", "microvmd", "-M", "microvm", "-accel", "tcg", "-cpu", "qemu64", "-smp", "1",
    "-m", "256M", "-nodefaults", "-no-user-config", "-nographic", "-no-reboot",
    "-kernel", files->kernel, "-initrd", files->initramfs, "-append", KERNEL_ARGS,
    "-chardev", console, "-serial", "chardev:console",
    "-device", "virtio-serial-device,id=vserial0", "-chardev", agent,
    "-device", "virtserialport,chardev=agent,name=" MV_AGENT_PORT_NAME,
    "-drive", drive, "-device", "virtio-blk-device,drive=disk0",
    NULL
  };
  g_autoptr (GError) error = NULL;
  int log_fd = open (log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  GPid pid = 0;

  if (!g_spawn_async_with_pipes_and_fds (dir, argv, NULL,
                                         G_SPAWN_DO_NOT_REAP_CHILD | G_SPAWN_SEARCH_PATH |
                                         G_SPAWN_STDIN_FROM_DEV_NULL,
                                         child_setup, NULL, -1, log_fd, log_fd, NULL, NULL, 0,
                                         &pid, NULL, NULL, NULL, &error))
    bench_fail (bench, "cannot start QEMU: %s", error->message);
  if (log_fd >= 0)
    close (log_fd);
  return pid;
}

/* Connects to QEMU's end of the agent port as soon as it listens. */
static int
dial_agent (Bench *bench, const char *dir, GPid pid)
{
  struct sockaddr_un addr = { .sun_family = AF_UNIX };
  gint64 deadline = bench_now () + 20 * G_USEC_PER_SEC;

  g_snprintf (addr.sun_path, sizeof addr.sun_path, "%s/agent.sock", dir);
  for (;;)
    {
      int fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

      if (fd < 0)
        bench_fail (bench, "socket: %s", g_strerror (errno));
      if (connect (fd, (struct sockaddr *) &addr, sizeof addr) == 0)
        return fd;
      close (fd);
      if (bench_now () > deadline || waitpid (pid, NULL, WNOHANG) == pid)
        bench_fail (bench, "cannot reach the bare QEMU's agent socket %s", addr.sun_path);
      g_usleep (1000);
    }
}

/* Boots a bare QEMU and plays the host until the agent says READY:
 * returns the µs from spawn to READY. */
static double
bare_boot (Bench *bench, Bare *bare, const char *dir, const GuestFiles *files, GBytes *config)
{
  g_autofree char *console = g_build_filename (dir, "console.log", NULL);
  g_autofree char *text = NULL;
  gboolean sent_config = FALSE;
  MvAgentFrame frame;
  MvAgentBuf buf;
  gint64 t0, t1, deadline;

  g_unlink (console);
  bare->dir = g_strdup (dir);
  bare->in = g_byte_array_new ();
  t0 = bench_now ();
  bare->qemu = spawn_qemu (bench, dir, files);
  bare->fd = dial_agent (bench, dir, bare->qemu);

  mv_agent_buf_init (&buf);
  mv_agent_buf_begin (&buf, MV_AGENT_HELLO, 0);
  mv_agent_buf_put_u32 (&buf, MV_AGENT_F_VERSION, MV_AGENT_PROTOCOL_VERSION);
  mv_agent_buf_end (&buf);
  send_buf (bench, bare, &buf);
  /* Up to the boot timeout: the first frame comes once the guest has
   * booted and opened its port. */
  deadline = bench_now () + BOOT_TIMEOUT_S * G_USEC_PER_SEC;
  for (;;)
    {
      next_frame (bench, bare, &frame);
      if (frame.type == MV_AGENT_READY)
        break;
      if (frame.type == MV_AGENT_FAILED)
        {
          MvAgentField f = { 0 };
          g_autofree char *why = NULL;

          if (mv_agent_frame_find (&frame, MV_AGENT_F_MESSAGE, &f))
            why = g_strndup ((const char *) f.value, f.len);
          bench_fail (bench, "the bare guest's agent could not set it up: %s", why ? why : "");
        }
      /* The agent answers the HELLO held for it while its port was shut,
       * and says HELLO itself as it opens the port: CONFIG once. */
      if (frame.type == MV_AGENT_HELLO && !sent_config)
        {
          send_bytes (bench, bare->fd, g_bytes_get_data (config, NULL), g_bytes_get_size (config));
          sent_config = TRUE;
        }
      if (bench_now () > deadline)
        bench_fail (bench, "the bare guest was not READY within %d s", BOOT_TIMEOUT_S);
    }
  t1 = bench_now ();
  /* READY follows the set-up line: a READY without it is not this agent. */
  if (!g_file_get_contents (console, &text, NULL, NULL) || !strstr (text, SET_UP_LINE))
    bench_fail (bench, "READY came, but %s has no \"%s\"", console, SET_UP_LINE);
  return (double) (t1 - t0);
}

static double
bare_ping (Bench *bench, Bare *bare)
{
  guint8 payload[PING_BYTES];
  MvAgentFrame frame;
  MvAgentField f = { 0 };
  MvAgentBuf buf;
  gint64 t0;

  for (gsize i = 0; i < sizeof payload; i++)
    payload[i] = (guint8) g_random_int ();
  t0 = bench_now ();
  mv_agent_buf_init (&buf);
  mv_agent_buf_begin (&buf, MV_AGENT_PING, 0);
  mv_agent_buf_put (&buf, MV_AGENT_F_BYTES, payload, sizeof payload);
  mv_agent_buf_end (&buf);
  send_buf (bench, bare, &buf);
  do
    next_frame (bench, bare, &frame);
  while (frame.type != MV_AGENT_PONG);
  if (!mv_agent_frame_find (&frame, MV_AGENT_F_BYTES, &f) || f.len != sizeof payload ||
      memcmp (f.value, payload, sizeof payload) != 0)
    bench_fail (bench, "the bare guest's PONG does not carry the PING's bytes");
  return (double) (bench_now () - t0);
}

/* EXEC `true` with its stdin ended at once, as the daemon's relay does
 * when the caller closes it; done at EXEC_EXIT after both outputs' EOF. */
static double
bare_exec_true (Bench *bench, Bare *bare)
{
  guint32 channel = ++bare->last_channel;
  gboolean out_done = FALSE, err_done = FALSE, exited = FALSE;
  MvAgentFrame frame;
  MvAgentBuf buf;
  gint64 t0;

  t0 = bench_now ();
  mv_agent_buf_init (&buf);
  mv_agent_buf_begin (&buf, MV_AGENT_EXEC, channel);
  mv_agent_buf_put_str (&buf, MV_AGENT_F_ARGV, "true");
  mv_agent_buf_put_u32 (&buf, MV_AGENT_F_TTY, 0);
  mv_agent_buf_end (&buf);
  mv_agent_buf_begin (&buf, MV_AGENT_EOF, channel);
  mv_agent_buf_put_u32 (&buf, MV_AGENT_F_STREAM, MV_AGENT_STREAM_STDIN);
  mv_agent_buf_end (&buf);
  send_buf (bench, bare, &buf);
  while (!(out_done && err_done && exited))
    {
      guint32 value = 0;

      next_frame (bench, bare, &frame);
      if (frame.channel != channel)
        continue;
      if (frame.type == MV_AGENT_EOF && mv_agent_frame_u32 (&frame, MV_AGENT_F_STREAM, &value))
        {
          out_done |= value == MV_AGENT_STREAM_STDOUT;
          err_done |= value == MV_AGENT_STREAM_STDERR;
        }
      else if (frame.type == MV_AGENT_EXEC_EXIT)
        {
          if (!mv_agent_frame_u32 (&frame, MV_AGENT_F_EXIT_CODE, &value) || value != 0)
            bench_fail (bench, "`true` in the bare guest did not exit 0");
          exited = TRUE;
        }
    }
  return (double) (bench_now () - t0);
}

static void
bare_close (Bare *bare)
{
  if (bare->fd >= 0)
    close (bare->fd);
  bare->fd = -1;
  g_clear_pointer (&bare->in, g_byte_array_unref);
  g_clear_pointer (&bare->dir, g_free);
  bare->qemu = 0;
}

static void
reap (GPid pid)
{
  while (waitpid (pid, NULL, 0) < 0 && errno == EINTR)
    ;
}

/* POWEROFF by hand: µs until QEMU has exited. */
static double
bare_poweroff (Bench *bench, Bare *bare)
{
  MvAgentBuf buf;
  gint64 t0 = bench_now ();

  mv_agent_buf_init (&buf);
  mv_agent_buf_begin (&buf, MV_AGENT_POWEROFF, 0);
  mv_agent_buf_end (&buf);
  send_buf (bench, bare, &buf);
  reap (bare->qemu);
  return (double) (bench_now () - t0);
}

static double
bare_kill (Bare *bare)
{
  gint64 t0 = bench_now ();

  kill (bare->qemu, SIGKILL);
  reap (bare->qemu);
  return (double) (bench_now () - t0);
}

/* ---- the same through the daemon ---- */

/* Reads @fd to its end into @into (may be NULL), then closes it. */
static void
drain (Bench *bench, int fd, GString *into)
{
  gint64 deadline = bench_now () + FRAME_TIMEOUT_S * G_USEC_PER_SEC;

  for (;;)
    {
      struct pollfd p = { .fd = fd, .events = POLLIN };
      char chunk[4096];
      ssize_t n;

      if (bench_now () > deadline)
        bench_fail (bench, "an Exec's descriptor stayed open for %d s", FRAME_TIMEOUT_S);
      if (poll (&p, 1, 200) <= 0)
        continue;
      n = read (fd, chunk, sizeof chunk);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        break;
      if (into)
        g_string_append_len (into, chunk, n);
    }
  close (fd);
}

/* Machine.Exec of `true`: µs until the status said "exit 0" and every
 * descriptor it gave has come to its end. */
static double
daemon_exec_true (Bench *bench, const char *path)
{
  const char *argv[] = { "true", NULL };
  g_autoptr (sd_bus_message) m = NULL;
  g_autoptr (sd_bus_message) reply = NULL;
  g_autoptr (GString) status = g_string_new (NULL);
  sd_bus_error error = SD_BUS_ERROR_NULL;
  int fds[4], mine[4];
  gint64 t0 = bench_now ();
  int r;

  r = sd_bus_message_new_method_call (bench->bus, &m, MV_BUS_NAME, path, MV_MACHINE_IFACE, "Exec");
  if (r >= 0)
    r = sd_bus_message_append_strv (m, (char **) argv);
  if (r >= 0)
    r = sd_bus_message_append (m, "a{ss}a{sv}", 0, 0);
  if (r >= 0)
    r = sd_bus_call (bench->bus, m, BENCH_CALL_TIMEOUT_US, &error, &reply);
  if (r < 0)
    bench_fail (bench, "Exec on %s failed: %s", path, error.message ? error.message : g_strerror (-r));
  if (sd_bus_message_read (reply, "hhhh", &fds[0], &fds[1], &fds[2], &fds[3]) < 0)
    bench_fail (bench, "Exec returned no descriptors");
  /* The reply owns its descriptors: copies of our own, so that closing
   * them ends the streams. */
  for (int i = 0; i < 4; i++)
    mine[i] = fcntl (fds[i], F_DUPFD_CLOEXEC, 3);
  g_clear_pointer (&reply, sd_bus_message_unref);
  close (mine[0]);
  drain (bench, mine[1], NULL);
  drain (bench, mine[2], NULL);
  drain (bench, mine[3], status);
  if (!g_str_equal (status->str, "exit 0\n"))
    bench_fail (bench, "Exec of `true` ended \"%s\", not \"exit 0\"", status->str);
  return (double) (bench_now () - t0);
}

/* Whether @path holds @line, now or within a second. */
static gboolean
console_shows_soon (const char *path, const char *line)
{
  gint64 deadline = g_get_monotonic_time () + G_USEC_PER_SEC;

  for (;;)
    {
      g_autofree char *text = NULL;

      if (g_file_get_contents (path, &text, NULL, NULL) && strstr (text, line))
        return TRUE;
      if (g_get_monotonic_time () > deadline)
        return FALSE;
      g_usleep (1000);
    }
}

typedef struct {
  BenchSamples *boot, *exec, *stop;             /* the daemon's */
  BenchSamples *bare_boot, *ping, *raw_exec, *poweroff, *kill;
} Figures;

static void
daemon_run (Bench *bench, const GuestFiles *files, guint rounds, Figures *fig)
{
  g_autofree char *name = g_strdup_printf ("bench-a%05u", ++bench->machine_seq);
  g_autofree char *spec = spec_json (name, files);
  g_autoptr (sd_bus_message) created = NULL;
  g_autoptr (sd_bus_message) reply = NULL;
  g_autofree char *path = NULL, *id = NULL, *console = NULL;
  const char *p = NULL;
  gint64 t0;

  created = bench_call (bench, bench->bus, MV_BUS_NAME, MV_MANAGER_PATH, MV_MANAGER_IFACE,
                        "CreateMachine", "st", spec, (uint64_t) 0);
  sd_bus_message_read (created, "o", &p);
  path = g_strdup (p);
  id = bench_get_string (bench, bench->bus, MV_BUS_NAME, path, MV_MACHINE_IFACE, "Id");
  console = g_build_filename (mv_test_env_runtime_dir (bench->env), MV_MACHINES_DIR, id,
                              "console.log", NULL);

  t0 = bench_now ();
  reply = bench_call (bench, bench->bus, MV_BUS_NAME, path, MV_MACHINE_IFACE, "Start", NULL);
  bench_samples_add (fig->boot, (double) (bench_now () - t0));
  g_clear_pointer (&reply, sd_bus_message_unref);
  /* Start returns at READY, which the agent sends once it has printed
   * the set-up line: readiness "agent", not the VMM's. The line travels
   * apart from READY (the serial console, through the console's holder,
   * which gathers what trickles), so it is given a moment to reach the
   * log. */
  if (!console_shows_soon (console, SET_UP_LINE))
    bench_fail (bench, "Start returned, and %s had no \"%s\" a second later", console,
                SET_UP_LINE);

  /* The first exec also waits for the daemon's session to the agent. */
  daemon_exec_true (bench, path);
  for (guint i = 0; i < rounds; i++)
    bench_samples_add (fig->exec, daemon_exec_true (bench, path));

  t0 = bench_now ();
  reply = bench_call (bench, bench->bus, MV_BUS_NAME, path, MV_MACHINE_IFACE, "Stop", NULL);
  bench_samples_add (fig->stop, (double) (bench_now () - t0));
  g_clear_pointer (&reply, sd_bus_message_unref);
  reply = bench_call (bench, bench->bus, MV_BUS_NAME, path, MV_MACHINE_IFACE, "Delete", "b", 1);
}

/* A bare boot; with @rounds, PING and EXEC round trips and a POWEROFF,
 * else a SIGKILL. */
static void
bare_run (Bench *bench, const GuestFiles *files, guint rounds, gboolean poweroff, Figures *fig)
{
  g_autofree char *dir = g_build_filename (mv_test_env_dir (bench->env), "bare-agent", NULL);
  g_autofree char *name = g_strdup_printf ("bench-b%05u", ++bench->machine_seq);
  g_autofree char *json = spec_json (name, files);
  g_autoptr (GError) error = NULL;
  g_autoptr (MvSpec) spec = mv_spec_from_json (json, &error);
  g_autoptr (GBytes) config = NULL;
  Bare bare = { .fd = -1 };

  if (!spec || !(config = mv_agent_config_frame (spec, NULL, NULL, MV_AGENT_END_POWEROFF, &error)))
    bench_fail (bench, "no CONFIG for %s: %s", json, error->message);
  g_mkdir_with_parents (dir, 0700);
  bench_samples_add (fig->bare_boot, bare_boot (bench, &bare, dir, files, config));
  if (rounds)
    {
      bare_ping (bench, &bare);
      bare_exec_true (bench, &bare);
    }
  for (guint i = 0; i < rounds; i++)
    {
      bench_samples_add (fig->ping, bare_ping (bench, &bare));
      bench_samples_add (fig->raw_exec, bare_exec_true (bench, &bare));
    }
  if (poweroff)
    bench_samples_add (fig->poweroff, bare_poweroff (bench, &bare));
  else
    bench_samples_add (fig->kill, bare_kill (&bare));
  bare_close (&bare);
}

static guint
count (const char *haystack, const char *needle)
{
  guint n = 0;

  for (const char *p = haystack; (p = strstr (p, needle)); p += strlen (needle))
    n++;
  return n;
}

static double
last (const BenchSamples *samples)
{
  return g_array_index (samples->values, double, samples->values->len - 1);
}

static double
last_but_one (const BenchSamples *samples)
{
  return g_array_index (samples->values, double, samples->values->len - 2);
}

static void
measure (Bench *bench, const GuestFiles *files, Figures *fig)
{
  g_autofree char *config = g_strdup_printf ("# row 10: microvmd's guest under TCG\n"
                                             "[qemu]\naccel=tcg\n"
                                             "[guest]\nkernel=%s\ninitramfs=%s\n",
                                             files->kernel, files->initramfs);
  g_autofree char *before = mv_test_env_read_daemon_log (bench->env);
  g_autofree char *after = NULL;
  guint rounds = ROUND_TRIPS / RUNS, stopped;

  mv_test_env_write_config (bench->env, config);
  bench_daemon_start (bench);
  /* Interleaved, so that the machine's drift over the row falls on both
   * sides alike. */
  for (guint i = 0; i < RUNS; i++)
    {
      daemon_run (bench, files, rounds, fig);
      bare_run (bench, files, rounds, TRUE, fig);
      bare_run (bench, files, 0, FALSE, fig);
      g_print ("[10] run %u of %u: boot %.2f s through the daemon, %.2f s and %.2f s bare\n",
               i + 1, RUNS, last (fig->boot) / 1e6, last_but_one (fig->bare_boot) / 1e6,
               last (fig->bare_boot) / 1e6);
    }
  after = mv_test_env_read_daemon_log (bench->env);
  stopped = count (after, POWERED_OFF) - count (before, POWERED_OFF);
  if (stopped < RUNS)
    bench_fail (bench, "%u of %u Stops ended the guest through its agent (\"%s\" in the log)",
                stopped, RUNS, POWERED_OFF);
  bench_daemon_stop (bench);
  bench_clear_state (bench);
  /* The configuration the other rows expect. */
  mv_test_env_write_config (bench->env, BENCH_BASE_CONFIG);
}

static char *
range_note (const char *what, const BenchSamples *figure, const BenchSamples *baseline)
{
  return g_strdup_printf ("%s; spread (min–max, µs): figure %.0f–%.0f, baseline %.0f–%.0f",
                          what, bench_samples_percentile (figure, 0.001),
                          bench_samples_percentile (figure, 100),
                          bench_samples_percentile (baseline, 0.001),
                          bench_samples_percentile (baseline, 100));
}

static void
add (Bench *bench, const char *id, const char *what, BenchSamples *figure,
     const char *baseline_what, BenchSamples *baseline, const char *note)
{
  g_autofree char *full = range_note (note, figure, baseline);
  BenchResult *r = bench_report_add (bench->report, "10", id, what, "µs", -1, figure,
                                     baseline_what, baseline);

  bench_result_set_note (r, full);
  bench_result_print (r);
}

static const struct {
  const char *id, *what;
} entries[] = {
  { "10-boot", "Start→agent ready, microvmd's kernel + initramfs + busybox root disk (QEMU TCG, microvm)" },
  { "10-exec-ping", "Exec of `true`: call → \"exit 0\", every descriptor at its end" },
  { "10-exec-raw", "Exec of `true` (as above)" },
  { "10-stop-kill", "Stop of a running agent guest, until it returns" },
  { "10-stop-poweroff", "Stop of a running agent guest (as above)" },
};

static void
not_measured (Bench *bench, const char *reason)
{
  for (guint i = 0; i < G_N_ELEMENTS (entries); i++)
    bench_result_print (bench_report_add_not_measured (bench->report, "10", entries[i].id,
                                                       entries[i].what, reason));
}

void
bench_row_agent (Bench *bench)
{
  g_autofree char *qemu = g_find_program_in_path (QEMU);
  g_autofree char *skip = NULL;
  GuestFiles files = { 0 };
  Figures fig = { 0 };

  if (bench->agent_guest_dir && bench->rootfs)
    {
      files.kernel = g_build_filename (bench->agent_guest_dir, "vmlinuz", NULL);
      files.initramfs = g_build_filename (bench->agent_guest_dir, "initramfs.img", NULL);
      files.rootfs = g_strdup (bench->rootfs);
    }
  if (bench->smoke)
    skip = g_strdup ("smoke mode boots no real guest");
  else if (!qemu)
    skip = g_strdup (QEMU " is not installed");
  else if (!files.kernel)
    skip = g_strdup ("no agent guest given (build guest-image and test-rootfs, then "
                     "--agent-guest-dir BUILD/guest --rootfs BUILD/tests/guest/rootfs.ext4)");
  else if (!g_file_test (files.kernel, G_FILE_TEST_EXISTS) ||
           !g_file_test (files.initramfs, G_FILE_TEST_EXISTS) ||
           !g_file_test (files.rootfs, G_FILE_TEST_EXISTS))
    skip = g_strdup_printf ("the agent guest is missing (%s, %s, %s)", files.kernel,
                            files.initramfs, files.rootfs);

  if (skip)
    not_measured (bench, skip);
  else
    {
      fig.boot = bench_samples_new ();
      fig.exec = bench_samples_new ();
      fig.stop = bench_samples_new ();
      fig.bare_boot = bench_samples_new ();
      fig.ping = bench_samples_new ();
      fig.raw_exec = bench_samples_new ();
      fig.poweroff = bench_samples_new ();
      fig.kill = bench_samples_new ();
      measure (bench, &files, &fig);

      add (bench, entries[0].id, entries[0].what, fig.boot,
           "bare QEMU, the bench as the agent's host: spawn → HELLO, CONFIG → READY", fig.bare_boot,
           "the same kernel, initramfs, disk and command line; the daemon's QEMU is walled in "
           "([sandbox] default) and has its QMP monitors, the bare one neither; the agent writes "
           "\"" SET_UP_LINE "\" to the console just before READY, checked on both sides");
      add (bench, entries[1].id, entries[1].what, fig.exec,
           "raw PING → PONG (64 bytes) on the bare guest's agent session", fig.ping,
           "after one exec unmeasured; the daemon adds D-Bus, polkit, passing 4 descriptors and "
           "the relay to what the EXEC costs");
      add (bench, entries[2].id, entries[2].what, samples_copy (fig.exec),
           "raw EXEC `true` + stdin EOF → EOF ×2 + EXEC_EXIT, frames by hand on the bare session",
           fig.raw_exec, "the same exec without the daemon");
      add (bench, entries[3].id, entries[3].what, fig.stop,
           "SIGKILL to the bare QEMU → waitpid", fig.kill,
           "Stop asks the agent to power off and waits for the VMM to end (\"" POWERED_OFF "\" "
           "checked in the log for every run)");
      add (bench, entries[4].id, entries[4].what, samples_copy (fig.stop),
           "POWEROFF by hand on the bare session → QEMU exited", fig.poweroff,
           "the same power-off without the daemon");
    }
  g_free (files.kernel);
  g_free (files.initramfs);
  g_free (files.rootfs);
}
