/* The simulated guest inside the test VMMs. There is no CPU and no kernel:
 * a guest clock runs on the main loop while the VM runs, and the console
 * gets what the project's test guest (tests/guest/init) writes:
 *
 *     [    0.000000] Linux version ...   kernel lines
 *     microvmd-guest: ...                 informational
 *     MICROVMD-GUEST-READY                booted, agent listening
 *     MICROVMD-COUNTER <n>                once a guest second from 0
 *     MICROVMD-EXIT <code>                the agent was told "exit <code>"
 *     MICROVMD-POWEROFF <why>             agent, exit, acpi, timer
 *     MICROVMD-REBOOT timer               microvmd.reboot_after=N was given
 *     MICROVMD-PANIC                      microvmd.panic was given
 *
 * It is steered by its kernel command line (microvmd.boot_ms,
 * microvmd.no_ready, microvmd.agent_silent: the agent port takes
 * connections and never answers, as a guest without microvmd's agent
 * would; microvmd.ignore_acpi, microvmd.agent_port,
 * microvmd.echo_port, microvmd.vsock_hello, microvmd.poweroff_after,
 * microvmd.panic, panic=) and answers on vsock as the guest agent does:
 * on the agent port, microvmd's agent protocol (fake-agent.h), or, when
 * the host's first byte is not a frame's zero, the line protocol of the
 * project's test guest (ping, uptime, poweroff, exit N, echo, counter,
 * cmdline, reboot, panic, connect PORT); and an echo port. */
#pragma once
#include <glib.h>
#include <json-glib/json-glib.h>

typedef struct _FakeGuest FakeGuest;
typedef struct _FakeVsock FakeVsock;
typedef struct _FakeAgent FakeAgent;

/* What the VMM does when the guest powers off or resets. Called from the
 * main loop, never from inside a guest call; reset may free the guest. */
typedef struct {
  void     (*power_off) (gpointer data, const char *why);
  void     (*reset) (gpointer data, const char *why);
  gpointer data;
} FakeGuestHooks;

typedef enum {
  FAKE_GUEST_CANNOT_ANSWER,    /* gone, halted, hung or resetting */
  FAKE_GUEST_PAUSED,
  FAKE_GUEST_RUNNING,
} FakeGuestReadiness;

typedef enum {
  FAKE_GUEST_NOTHING,
  FAKE_GUEST_AGENT,
  FAKE_GUEST_ECHO,
  FAKE_GUEST_SILENT,           /* takes what comes and answers nothing */
} FakeGuestService;

/* What an agent command does once its reply has been sent. */
typedef struct {
  int kind;
  int code;
} FakeGuestAfter;

/* @console: an fd the guest's console writes to (taken over), or -1 when
 * the console the kernel was told to use does not exist. @state: what
 * fake_guest_snapshot_state() gave, to go on from there. */
FakeGuest *fake_guest_new (const char *cmdline, const FakeGuestHooks *hooks, int console,
                           JsonObject *state, FakeVsock *vsock);
void       fake_guest_start (FakeGuest *guest, gboolean paused);
/* The serial console's input comes from @fd (the VMM's stdin): a line
 * `echo WORDS` (with $((A*B)) worked out) prints WORDS, any other line
 * that its command is not found, once the guest has booted and while it
 * runs. */
void       fake_guest_take_console_input (FakeGuest *guest, int fd);
/* The VM is gone: the clock stops and guest connections drop. */
void       fake_guest_free (FakeGuest *guest);

void       fake_guest_set_paused (FakeGuest *guest, gboolean paused);
gboolean   fake_guest_is_up (FakeGuest *guest);
double     fake_guest_uptime (FakeGuest *guest);
/* ACPI power button and Ctrl-Alt-Del: the guest reacts once booted, when
 * it next runs. */
void       fake_guest_power_button (FakeGuest *guest);
void       fake_guest_ctrl_alt_del (FakeGuest *guest);
JsonNode  *fake_guest_snapshot_state (FakeGuest *guest);

/* For the vsock device. */
FakeGuestReadiness fake_guest_readiness (FakeGuest *guest);
FakeGuestService   fake_guest_service_at (FakeGuest *guest, guint32 port);
char              *fake_guest_agent_command (FakeGuest *guest, const char *line,
                                             FakeGuestAfter *after);
void               fake_guest_agent_after (FakeGuest *guest, const FakeGuestAfter *after);
/* The agent serving the agent protocol on the agent port. */
FakeAgent         *fake_guest_agent (FakeGuest *guest);
