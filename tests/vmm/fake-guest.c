/* The simulated guest of the test VMMs. */
#include "fake-guest.h"
#include "fake-agent.h"
#include "fake-json.h"
#include "fake-vsock.h"
#include "fake-vmm.h"

#include <glib-unix.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TICK_MS            20
#define DEFAULT_BOOT_MS    50
#define DEFAULT_AGENT_PORT 1024
#define DEFAULT_ECHO_PORT  1025
#define KERNEL_VERSION     "6.1.0-microvmd-test"

typedef enum { PHASE_BOOTING, PHASE_UP, PHASE_HALTED, PHASE_HUNG, PHASE_RESETTING } Phase;

static const char *const phase_names[] = { "booting", "up", "halted", "hung", "resetting", NULL };

typedef enum { ACTION_POWER_OFF, ACTION_RESET, ACTION_DROP, ACTION_HELLO } ActionKind;

typedef struct {
  ActionKind  kind;
  const char *why;
  guint32     port;
} Action;

enum { AFTER_NOTHING, AFTER_POWER_OFF, AFTER_EXIT, AFTER_REBOOT, AFTER_PANIC };

struct _FakeGuest {
  char          *cmdline;
  FakeGuestHooks hooks;
  int            console;
  FakeVsock     *vsock;
  FakeAgent     *agent;
  gboolean       paused;
  gboolean       stopped;
  gint64         last;
  guint          tick_source;
  GArray        *actions;          /* Action, run from an idle */
  guint          action_source;

  /* From the command line. */
  double         boot_s;
  gboolean       no_ready;
  gboolean       agent_silent;
  gboolean       ignore_acpi;
  guint32        agent_port;
  guint32        echo_port;
  gint64         hello_port;       /* -1: none */
  double         poweroff_after;   /* < 0: never */
  double         reboot_after;     /* < 0: never */
  gboolean       want_panic;
  int            panic_timeout;

  /* Guest-visible state; all of it goes into a snapshot. */
  double         clock;
  Phase          phase;
  gboolean       kernel_printed;
  gint64         counter_next;
  gboolean       counting;
  double         next_counter_at;
  gboolean       resetting_later;
  double         reset_at;
  GPtrArray     *pending;          /* "acpi", "cad": requests not yet seen */
  gboolean       hello_done;
  gint64         ticks;            /* counter lines printed, ever */

  /* The serial console's input, when it is the VMM's stdin. */
  guint          typed_source;
  GString       *typed;            /* received, not yet read by the guest */
};

/* ---- command line ---- */

static gint64
int_param (const char *cmdline, const char *key, gint64 fallback)
{
  g_autofree char *value = fake_cmdline_get (cmdline, key);
  char *end;
  gint64 n;

  if (!value || !*value)
    return fallback;
  n = g_ascii_strtoll (value, &end, 10);
  return *end ? fallback : n;
}

static double
double_param (const char *cmdline, const char *key, double fallback)
{
  g_autofree char *value = fake_cmdline_get (cmdline, key);
  char *end;
  double d;

  if (!value || !*value)
    return fallback;
  d = g_ascii_strtod (value, &end);
  return *end ? fallback : d;
}

static void
read_params (FakeGuest *guest)
{
  const char *c = guest->cmdline;
  g_autofree char *panic = fake_cmdline_get (c, "microvmd.panic");

  guest->boot_s = int_param (c, "microvmd.boot_ms", DEFAULT_BOOT_MS) / 1000.0;
  guest->no_ready = fake_cmdline_has (c, "microvmd.no_ready");
  guest->agent_silent = fake_cmdline_has (c, "microvmd.agent_silent");
  guest->ignore_acpi = fake_cmdline_has (c, "microvmd.ignore_acpi");
  guest->agent_port = int_param (c, "microvmd.agent_port", DEFAULT_AGENT_PORT);
  guest->echo_port = int_param (c, "microvmd.echo_port", DEFAULT_ECHO_PORT);
  guest->hello_port = int_param (c, "microvmd.vsock_hello", -1);
  guest->poweroff_after = double_param (c, "microvmd.poweroff_after", -1);
  guest->reboot_after = double_param (c, "microvmd.reboot_after", -1);
  guest->want_panic = panic && (!*panic || strcmp (panic, "1") == 0 || strcmp (panic, "y") == 0);
  guest->panic_timeout = int_param (c, "panic", 0);
}

/* ---- snapshots ---- */

static double
double_member (JsonObject *o, const char *name, double fallback)
{
  JsonNode *node = json_object_get_member (o, name);

  return node && JSON_NODE_HOLDS_VALUE (node) ? json_node_get_double (node) : fallback;
}

static gboolean
bool_member (JsonObject *o, const char *name, gboolean fallback)
{
  JsonNode *node = json_object_get_member (o, name);

  return node && JSON_NODE_HOLDS_VALUE (node) ? json_node_get_boolean (node) : fallback;
}

static void
load_state (FakeGuest *guest, JsonObject *state)
{
  const char *phase = json_object_get_string_member_with_default (state, "phase", "booting");
  JsonNode *next = json_object_get_member (state, "next_counter_in");
  JsonNode *reset = json_object_get_member (state, "reset_in");
  JsonArray *pending = fake_json_arr (state, "pending");

  guest->clock = double_member (state, "clock", 0);
  guest->phase = PHASE_BOOTING;
  for (int i = 0; phase_names[i]; i++)
    if (strcmp (phase, phase_names[i]) == 0)
      guest->phase = i;
  /* A reset under way when the snapshot was taken does not finish. */
  if (guest->phase == PHASE_RESETTING)
    guest->phase = PHASE_HUNG;
  guest->kernel_printed = bool_member (state, "kernel_printed", TRUE);
  guest->counter_next = json_object_get_int_member_with_default (state, "counter_next", 0);
  guest->counting = next && JSON_NODE_HOLDS_VALUE (next);
  guest->next_counter_at = guest->counting ? guest->clock + json_node_get_double (next) : 0;
  guest->resetting_later = reset && JSON_NODE_HOLDS_VALUE (reset);
  guest->reset_at = guest->resetting_later ? guest->clock + json_node_get_double (reset) : 0;
  for (guint i = 0; pending && i < json_array_get_length (pending); i++)
    g_ptr_array_add (guest->pending,
                     g_strcmp0 (json_array_get_string_element (pending, i), "acpi") == 0
                       ? "acpi" : "cad");
  guest->hello_done = bool_member (state, "hello_done", TRUE);
  guest->ticks = json_object_get_int_member_with_default (state, "ticks", 0);
}

JsonNode *
fake_guest_snapshot_state (FakeGuest *guest)
{
  g_autoptr (JsonBuilder) b = json_builder_new ();

  json_builder_begin_object (b);
  json_builder_set_member_name (b, "cmdline");
  json_builder_add_string_value (b, guest->cmdline);
  json_builder_set_member_name (b, "clock");
  json_builder_add_double_value (b, guest->clock);
  json_builder_set_member_name (b, "phase");
  json_builder_add_string_value (b, phase_names[guest->phase]);
  json_builder_set_member_name (b, "kernel_printed");
  json_builder_add_boolean_value (b, guest->kernel_printed);
  json_builder_set_member_name (b, "counter_next");
  json_builder_add_int_value (b, guest->counter_next);
  json_builder_set_member_name (b, "next_counter_in");
  if (guest->counting)
    json_builder_add_double_value (b, guest->next_counter_at - guest->clock);
  else
    json_builder_add_null_value (b);
  json_builder_set_member_name (b, "reset_in");
  if (guest->resetting_later)
    json_builder_add_double_value (b, guest->reset_at - guest->clock);
  else
    json_builder_add_null_value (b);
  json_builder_set_member_name (b, "pending");
  json_builder_begin_array (b);
  for (guint i = 0; i < guest->pending->len; i++)
    json_builder_add_string_value (b, guest->pending->pdata[i]);
  json_builder_end_array (b);
  json_builder_set_member_name (b, "hello_done");
  json_builder_add_boolean_value (b, guest->hello_done);
  json_builder_set_member_name (b, "ticks");
  json_builder_add_int_value (b, guest->ticks);
  json_builder_set_member_name (b, "agent");
  json_builder_add_value (b, fake_agent_snapshot_state (guest->agent));
  json_builder_end_object (b);
  return json_builder_get_root (b);
}

/* ---- the console ---- */

static void
say (FakeGuest *guest, const char *format, ...) G_GNUC_PRINTF (2, 3);

static void
say (FakeGuest *guest, const char *format, ...)
{
  g_autofree char *text = NULL;
  g_autofree char *line = NULL;
  va_list args;

  if (guest->console < 0)
    return;
  va_start (args, format);
  text = g_strdup_vprintf (format, args);
  va_end (args);
  line = g_strconcat (text, "\n", NULL);
  fake_write_all (guest->console, line, strlen (line));
}

static void
klog (FakeGuest *guest, const char *message)
{
  int secs = (int) guest->clock;
  int usecs = (int) ((guest->clock - secs) * 1e6);

  say (guest, "[%5d.%06d] %s", secs, usecs, message);
}

/* ---- what happens after a step, from the main loop ---- */

static void hello (FakeGuest *guest, guint32 port, char **error);

static gboolean
run_actions (gpointer data)
{
  FakeGuest *guest = data;
  g_autoptr (GArray) actions = g_steal_pointer (&guest->actions);

  guest->actions = g_array_new (FALSE, FALSE, sizeof (Action));
  guest->action_source = 0;
  for (guint i = 0; i < actions->len; i++)
    {
      Action *a = &g_array_index (actions, Action, i);

      switch (a->kind)
        {
        case ACTION_POWER_OFF:
          guest->hooks.power_off (guest->hooks.data, a->why);
          break;
        case ACTION_DROP:
          if (guest->vsock)
            fake_vsock_drop_guest_connections (guest->vsock);
          break;
        case ACTION_HELLO:
          hello (guest, a->port, NULL);
          break;
        case ACTION_RESET:
          /* The VMM may replace the guest: nothing of it is used after. */
          {
            const char *why = a->why;
            FakeGuestHooks hooks = guest->hooks;
            g_clear_pointer (&actions, g_array_unref);
            hooks.reset (hooks.data, why);
            return G_SOURCE_REMOVE;
          }
        }
    }
  return G_SOURCE_REMOVE;
}

static void
defer (FakeGuest *guest, ActionKind kind, const char *why, guint32 port)
{
  Action a = { .kind = kind, .why = why, .port = port };

  g_array_append_val (guest->actions, a);
  if (!guest->action_source)
    guest->action_source = g_idle_add (run_actions, guest);
}

/* ---- the guest's life ---- */

static void
panic_after (FakeGuest *guest)
{
  guest->phase = PHASE_HUNG;
  guest->counting = FALSE;
  if (guest->panic_timeout > 0)
    {
      g_autofree char *line = g_strdup_printf ("Rebooting in %d seconds..", guest->panic_timeout);
      klog (guest, line);
      guest->resetting_later = TRUE;
      guest->reset_at = guest->clock + guest->panic_timeout;
    }
  else if (guest->panic_timeout < 0)
    {
      guest->resetting_later = TRUE;
      guest->reset_at = guest->clock;
    }
}

static void
power_off (FakeGuest *guest, const char *why)
{
  say (guest, "MICROVMD-POWEROFF %s", why);
  klog (guest, "reboot: Power down");
  guest->phase = PHASE_HALTED;
  guest->counting = FALSE;
  defer (guest, ACTION_POWER_OFF, why, 0);
  defer (guest, ACTION_DROP, NULL, 0);
}

static void
reset (FakeGuest *guest, const char *why)
{
  klog (guest, "reboot: Restarting system");
  guest->phase = PHASE_RESETTING;
  guest->counting = FALSE;
  defer (guest, ACTION_DROP, NULL, 0);
  defer (guest, ACTION_RESET, why, 0);
}

static void
step (FakeGuest *guest)
{
  if (!guest->kernel_printed)
    {
      g_autofree char *cmdline = g_strdup_printf ("Command line: %s", guest->cmdline);

      guest->kernel_printed = TRUE;
      klog (guest, "Linux version " KERNEL_VERSION " (microvmd test guest) #1 SMP PREEMPT_DYNAMIC");
      klog (guest, cmdline);
      klog (guest, "Memory: guest memory is simulated");
      if (guest->want_panic)
        {
          say (guest, "MICROVMD-PANIC");
          klog (guest, "sysrq: Trigger a crash");
          klog (guest, "Kernel panic - not syncing: sysrq triggered crash");
          panic_after (guest);
          return;
        }
    }
  if (guest->phase == PHASE_HUNG)
    {
      if (guest->resetting_later && guest->clock >= guest->reset_at)
        {
          guest->resetting_later = FALSE;
          reset (guest, "panic");
        }
      return;
    }
  if (guest->phase == PHASE_BOOTING)
    {
      if (guest->clock < guest->boot_s || guest->no_ready)
        return;
      guest->phase = PHASE_UP;
      say (guest, "microvmd-guest: agent on vsock port %u", guest->agent_port);
      say (guest, "MICROVMD-GUEST-READY");
      guest->counter_next = 0;
      guest->counting = TRUE;
      guest->next_counter_at = guest->clock;
      if (guest->hello_port >= 0 && !guest->hello_done)
        {
          guest->hello_done = TRUE;
          defer (guest, ACTION_HELLO, NULL, (guint32) guest->hello_port);
        }
    }
  if (guest->phase != PHASE_UP)
    return;
  while (guest->counting && guest->clock >= guest->next_counter_at)
    {
      say (guest, "MICROVMD-COUNTER %" G_GINT64_FORMAT, guest->counter_next);
      guest->counter_next++;
      guest->ticks++;
      guest->next_counter_at += 1.0;
    }
  fake_agent_tick (guest->agent, guest->clock);
  if (guest->phase != PHASE_UP)
    return;
  if (guest->pending->len > 0)
    {
      const char *what = g_ptr_array_steal_index (guest->pending, 0);

      if (strcmp (what, "acpi") == 0)
        power_off (guest, "acpi");
      else
        {
          say (guest, "microvmd-guest: ctrl-alt-del");
          reset (guest, "ctrl-alt-del");
        }
      return;
    }
  if (guest->poweroff_after >= 0 && guest->clock >= guest->poweroff_after)
    power_off (guest, "timer");
  else if (guest->reboot_after >= 0 && guest->clock >= guest->reboot_after)
    {
      say (guest, "MICROVMD-REBOOT timer");
      reset (guest, "timer");
    }
}

/* The guest clock runs only while the VM runs. */
static void
advance (FakeGuest *guest)
{
  gint64 now = g_get_monotonic_time ();

  if (!guest->paused)
    guest->clock += (now - guest->last) / 1e6;
  guest->last = now;
}

/* ---- the shell on the serial console ---- */

/* @word with each $((A*B)) in it worked out, as the shell does. */
static char *
expand (const char *word)
{
  GString *out = g_string_new (NULL);
  const char *p = word;

  while (*p)
    {
      const char *close;
      char *end;
      gint64 a, b;

      if (g_str_has_prefix (p, "$((") && (close = strstr (p, "))")))
        {
          a = g_ascii_strtoll (p + 3, &end, 10);
          if (*end == '*')
            {
              b = g_ascii_strtoll (end + 1, &end, 10);
              if (end == close)
                {
                  g_string_append_printf (out, "%" G_GINT64_FORMAT, a * b);
                  p = close + 2;
                  continue;
                }
            }
        }
      g_string_append_c (out, *p++);
    }
  return g_string_free (out, FALSE);
}

/* One line typed on the console: `echo WORDS` prints them, anything else
 * is not found, as a shell there would say. */
static void
run_typed_line (FakeGuest *guest, const char *line)
{
  g_auto (GStrv) words = g_strsplit_set (line, " \t", -1);

  if (!words[0] || !*words[0])
    return;
  if (g_str_equal (words[0], "echo"))
    {
      g_autofree char *rest = g_strjoinv (" ", words + 1);
      g_autofree char *expanded = expand (rest);
      say (guest, "%s", expanded);
    }
  else
    say (guest, "sh: %s: not found", words[0]);
}

/* What was typed, line by line, once the guest runs and has booted. A
 * line ends at a newline or at a carriage return, which is what a
 * terminal's Enter key sends: a serial tty in the guest takes either
 * (icrnl), and so does this one; an empty line is nothing. */
static void
read_typed (FakeGuest *guest)
{
  gsize end;

  if (!guest->typed || guest->paused || guest->phase != PHASE_UP)
    return;
  while ((end = strcspn (guest->typed->str, "\r\n")) < guest->typed->len)
    {
      g_autofree char *line = g_strndup (guest->typed->str, end);
      g_string_erase (guest->typed, 0, end + 1);
      g_strchomp (line);
      run_typed_line (guest, line);
    }
}

static gboolean
on_typed (int fd, GIOCondition condition, gpointer data)
{
  FakeGuest *guest = data;
  char buf[1024];
  ssize_t n = read (fd, buf, sizeof buf);

  if (n <= 0)
    {
      guest->typed_source = 0;
      return G_SOURCE_REMOVE;
    }
  /* A serial port's input is small: what nobody reads is dropped. */
  if (guest->typed->len < 64 * 1024)
    g_string_append_len (guest->typed, buf, n);
  read_typed (guest);
  return G_SOURCE_CONTINUE;
}

void
fake_guest_take_console_input (FakeGuest *guest, int fd)
{
  if (!guest->typed)
    guest->typed = g_string_new (NULL);
  guest->typed_source = g_unix_fd_add (fd, G_IO_IN | G_IO_HUP | G_IO_ERR, on_typed, guest);
}

static gboolean
tick (gpointer data)
{
  FakeGuest *guest = data;

  advance (guest);
  if (!guest->paused)
    step (guest);
  read_typed (guest);
  if (guest->vsock)
    fake_vsock_pump (guest->vsock);
  return G_SOURCE_CONTINUE;
}

static void
agent_console (gpointer data, const char *line)
{
  say (data, "%s", line);
}

static void
agent_end (gpointer data, gboolean reboot, const char *why)
{
  if (reboot)
    reset (data, why);
  else
    power_off (data, why);
}

FakeGuest *
fake_guest_new (const char *cmdline, const FakeGuestHooks *hooks, int console, JsonObject *state,
                FakeVsock *vsock)
{
  FakeGuest *guest = g_new0 (FakeGuest, 1);
  FakeAgentHooks agent_hooks = { agent_console, agent_end, guest };
  JsonNode *agent_state = state ? json_object_get_member (state, "agent") : NULL;

  guest->cmdline = g_strdup (cmdline ? cmdline : "");
  guest->hooks = *hooks;
  guest->console = console;
  guest->vsock = vsock;
  guest->actions = g_array_new (FALSE, FALSE, sizeof (Action));
  guest->pending = g_ptr_array_new ();
  guest->phase = PHASE_BOOTING;
  read_params (guest);
  if (state)
    load_state (guest, state);
  guest->agent = fake_agent_new (&agent_hooks,
                                 agent_state && JSON_NODE_HOLDS_OBJECT (agent_state)
                                   ? json_node_get_object (agent_state) : NULL,
                                 guest->clock);
  return guest;
}

void
fake_guest_start (FakeGuest *guest, gboolean paused)
{
  guest->paused = paused;
  guest->last = g_get_monotonic_time ();
  guest->tick_source = g_timeout_add (TICK_MS, tick, guest);
  tick (guest);
}

void
fake_guest_free (FakeGuest *guest)
{
  if (!guest)
    return;
  guest->stopped = TRUE;
  if (guest->vsock)
    fake_vsock_drop_guest_connections (guest->vsock);
  if (guest->tick_source)
    g_source_remove (guest->tick_source);
  if (guest->action_source)
    g_source_remove (guest->action_source);
  if (guest->typed_source)
    g_source_remove (guest->typed_source);
  if (guest->typed)
    g_string_free (guest->typed, TRUE);
  if (guest->console > STDERR_FILENO)
    close (guest->console);
  fake_agent_free (guest->agent);
  g_array_unref (guest->actions);
  g_ptr_array_unref (guest->pending);
  g_free (guest->cmdline);
  g_free (guest);
}

void
fake_guest_set_paused (FakeGuest *guest, gboolean paused)
{
  advance (guest);
  guest->paused = paused;
  if (!paused && guest->vsock)
    fake_vsock_pump (guest->vsock);
}

gboolean
fake_guest_is_up (FakeGuest *guest)
{
  return guest->phase == PHASE_UP && !guest->stopped;
}

double
fake_guest_uptime (FakeGuest *guest)
{
  return guest->clock;
}

static void
request (FakeGuest *guest, const char *what)
{
  /* No driver yet, or a guest that does not listen. */
  if (guest->phase != PHASE_UP || guest->ignore_acpi)
    return;
  g_ptr_array_add (guest->pending, (gpointer) what);
}

void
fake_guest_power_button (FakeGuest *guest)
{
  request (guest, "acpi");
}

void
fake_guest_ctrl_alt_del (FakeGuest *guest)
{
  request (guest, "cad");
}

/* ---- vsock ---- */

FakeGuestReadiness
fake_guest_readiness (FakeGuest *guest)
{
  if (guest->stopped || guest->phase == PHASE_HALTED || guest->phase == PHASE_HUNG ||
      guest->phase == PHASE_RESETTING)
    return FAKE_GUEST_CANNOT_ANSWER;
  return guest->paused ? FAKE_GUEST_PAUSED : FAKE_GUEST_RUNNING;
}

FakeGuestService
fake_guest_service_at (FakeGuest *guest, guint32 port)
{
  if (!fake_guest_is_up (guest))
    return FAKE_GUEST_NOTHING;
  if (port == guest->agent_port && guest->agent_silent)
    return FAKE_GUEST_SILENT;
  if (port == guest->agent_port)
    return fake_agent_listening (guest->agent) ? FAKE_GUEST_AGENT : FAKE_GUEST_NOTHING;
  if (port == guest->echo_port)
    return FAKE_GUEST_ECHO;
  return FAKE_GUEST_NOTHING;
}

/* Opens a connection to the host's vsock port @port, says hello, then
 * serves the agent protocol on it. */
static void
hello (FakeGuest *guest, guint32 port, char **error)
{
  int fd, errnum = 0;

  if (!guest->vsock)
    {
      say (guest, "microvmd-guest: no vsock device");
      if (error)
        *error = g_strdup ("no vsock device");
      return;
    }
  fd = fake_vsock_connect_to_host (guest->vsock, port, &errnum);
  if (fd < 0)
    {
      g_autofree char *text = fake_os_error_text (errnum);
      say (guest, "microvmd-guest: vsock connection to host port %u refused", port);
      if (error)
        *error = g_strdup_printf ("connection refused (%s)", text);
      return;
    }
  if (!fake_write_all (fd, "hello\n", strlen ("hello\n")))
    {
      close (fd);
      if (error)
        *error = g_strdup ("connection reset");
      return;
    }
  fake_vsock_adopt (guest->vsock, fd, FAKE_GUEST_AGENT);
}

static gboolean
all_digits (const char *s)
{
  if (!*s)
    return FALSE;
  for (; *s; s++)
    if (!g_ascii_isdigit (*s))
      return FALSE;
  return TRUE;
}

char *
fake_guest_agent_command (FakeGuest *guest, const char *line, FakeGuestAfter *after)
{
  g_auto (GStrv) words = g_strsplit_set (line, " \t\r\n", -1);
  g_autoptr (GPtrArray) w = g_ptr_array_new ();
  const char *cmd;

  for (char **p = words; *p; p++)
    if (**p)
      g_ptr_array_add (w, *p);
  cmd = w->len ? w->pdata[0] : "";
  after->kind = AFTER_NOTHING;
  if (strcmp (cmd, "ping") == 0 && w->len == 1)
    return g_strdup ("pong");
  if (strcmp (cmd, "uptime") == 0 && w->len == 1)
    return g_strdup_printf ("%.2f %.2f", guest->clock, guest->clock * 0.9);
  if (strcmp (cmd, "poweroff") == 0 && w->len == 1)
    {
      after->kind = AFTER_POWER_OFF;
      return g_strdup ("ok");
    }
  if (strcmp (cmd, "exit") == 0 && w->len == 2)
    {
      const char *code = w->pdata[1];
      if (!all_digits (code) || strlen (code) > 3 || atoi (code) > 255)
        return g_strdup ("error bad exit code");
      after->kind = AFTER_EXIT;
      after->code = atoi (code);
      return g_strdup ("ok");
    }
  /* The commands below are the test VMMs' guest's only. */
  if (strcmp (cmd, "echo") == 0)
    {
      const char *rest = strstr (line, "echo") + strlen ("echo");
      while (*rest == ' ')
        rest++;
      return g_strdup (rest);
    }
  if (strcmp (cmd, "counter") == 0 && w->len == 1)
    return g_strdup_printf ("%" G_GINT64_FORMAT, guest->counter_next - 1);
  if (strcmp (cmd, "cmdline") == 0 && w->len == 1)
    return g_strdup (guest->cmdline);
  if (strcmp (cmd, "reboot") == 0 && w->len == 1)
    {
      after->kind = AFTER_REBOOT;
      return g_strdup ("ok");
    }
  if (strcmp (cmd, "panic") == 0 && w->len == 1)
    {
      after->kind = AFTER_PANIC;
      return g_strdup ("ok");
    }
  if (strcmp (cmd, "connect") == 0 && w->len == 2 && all_digits (w->pdata[1]))
    {
      g_autofree char *error = NULL;
      hello (guest, (guint32) g_ascii_strtoull (w->pdata[1], NULL, 10), &error);
      return error ? g_strdup_printf ("error %s", error) : g_strdup ("ok");
    }
  return g_strdup ("error unknown command");
}

FakeAgent *
fake_guest_agent (FakeGuest *guest)
{
  return guest->agent;
}

void
fake_guest_agent_after (FakeGuest *guest, const FakeGuestAfter *after)
{
  /* Only a guest that is up acts on what it was told. */
  if (after->kind == AFTER_NOTHING || !fake_guest_is_up (guest))
    return;
  switch (after->kind)
    {
    case AFTER_POWER_OFF:
      power_off (guest, "agent");
      break;
    case AFTER_EXIT:
      say (guest, "MICROVMD-EXIT %d", after->code);
      power_off (guest, "exit");
      break;
    case AFTER_REBOOT:
      reset (guest, "agent");
      break;
    case AFTER_PANIC:
      say (guest, "MICROVMD-PANIC");
      klog (guest, "Kernel panic - not syncing: sysrq triggered crash");
      panic_after (guest);
      defer (guest, ACTION_DROP, NULL, 0);
      break;
    default:
      break;
    }
}
