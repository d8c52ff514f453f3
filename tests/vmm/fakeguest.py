"""The simulated guest inside the test VMMs.

There is no CPU and no kernel: a thread keeps a guest clock that only runs
while the VM runs, and writes to the guest's console what the project's
test guest (tests/guest/init) writes:

    [    0.000000] Linux version ... (kernel lines)
    microvmd-guest: ...            informational
    MICROVMD-GUEST-READY           booted, agent listening
    MICROVMD-COUNTER <n>           once a guest second from 0
    MICROVMD-EXIT <code>           the agent was told "exit <code>"
    MICROVMD-POWEROFF <why>        agent, exit, acpi, timer
    MICROVMD-PANIC                 microvmd.panic was given

It answers on vsock like the guest agent would (see README.md for the
ports and the commands) and is steered by its kernel command line.
"""

import socket
import threading
import time

import fakevmm

TICK = 0.02
DEFAULT_BOOT_MS = 50
DEFAULT_AGENT_PORT = 1024
DEFAULT_ECHO_PORT = 1025
KERNEL_VERSION = "6.1.0-microvmd-test"


class Guest:
    """hooks: on_poweroff(why), on_reset(why), vsock (HybridVsock|None), log.

    console: callable(str) writing to the guest's console device, or None
    when the console the kernel was told to use does not exist."""

    def __init__(self, cmdline, hooks, console=None, state=None):
        self.cmdline = cmdline or ""
        self.hooks = hooks
        self.console = console
        self.cond = threading.Condition()
        self.paused = False
        self.stopped = False
        self.sockets = set()
        p = self._params(self.cmdline)
        self.boot_s = p["boot_ms"] / 1000.0
        self.no_ready = p["no_ready"]
        self.ignore_acpi = p["ignore_acpi"]
        self.agent_port = p["agent_port"]
        self.echo_port = p["echo_port"]
        self.hello_port = p["hello_port"]
        self.poweroff_after = p["poweroff_after"]
        self.want_panic = p["panic"]
        self.panic_timeout = p["panic_timeout"]
        # Guest-visible state; all of it goes into a snapshot.
        self.clock = 0.0
        self.phase = "booting"        # booting, up, halted, hung, resetting
        self.kernel_printed = False
        self.counter_next = 0
        self.next_counter_at = None
        self.reset_at = None
        self.pending = []             # 'acpi', 'cad' requests not yet seen
        self.hello_done = False
        self.ticks = 0                # counter lines printed, ever
        if state:
            self._load(state)
        self.thread = None

    # ----------------------------------------------------------------------
    @staticmethod
    def _params(cmdline):
        def num(key, default, conv=int):
            v = fakevmm.cmdline_get(cmdline, key)
            if v is None or v == "":
                return default
            try:
                return conv(v)
            except ValueError:
                return default
        flags = dict(fakevmm.parse_cmdline(cmdline))
        panic_timeout = num("panic", 0)
        return {
            "boot_ms": num("microvmd.boot_ms", DEFAULT_BOOT_MS),
            "no_ready": "microvmd.no_ready" in flags,
            "ignore_acpi": "microvmd.ignore_acpi" in flags,
            "agent_port": num("microvmd.agent_port", DEFAULT_AGENT_PORT),
            "echo_port": num("microvmd.echo_port", DEFAULT_ECHO_PORT),
            "hello_port": num("microvmd.vsock_hello", None),
            "poweroff_after": num("microvmd.poweroff_after", None, float),
            "panic": fakevmm.cmdline_get(cmdline, "microvmd.panic") in ("", "1", "y"),
            "panic_timeout": panic_timeout,
        }

    def snapshot_state(self):
        with self.cond:
            nxt = None
            if self.next_counter_at is not None:
                nxt = self.next_counter_at - self.clock
            rst = None
            if self.reset_at is not None:
                rst = self.reset_at - self.clock
            return {
                "cmdline": self.cmdline, "clock": self.clock, "phase": self.phase,
                "kernel_printed": self.kernel_printed,
                "counter_next": self.counter_next, "next_counter_in": nxt,
                "reset_in": rst, "pending": list(self.pending),
                "hello_done": self.hello_done, "ticks": self.ticks,
            }

    def _load(self, st):
        self.clock = st.get("clock", 0.0)
        self.phase = st.get("phase", "booting")
        if self.phase == "resetting":
            self.phase = "hung"
        self.kernel_printed = st.get("kernel_printed", True)
        self.counter_next = st.get("counter_next", 0)
        nxt = st.get("next_counter_in")
        self.next_counter_at = None if nxt is None else self.clock + nxt
        rst = st.get("reset_in")
        self.reset_at = None if rst is None else self.clock + rst
        self.pending = list(st.get("pending", []))
        self.hello_done = st.get("hello_done", True)
        self.ticks = st.get("ticks", 0)

    # ----------------------------------------------------------------------
    def start(self, paused=False):
        self.paused = paused
        self.thread = threading.Thread(target=self._run, name="guest", daemon=True)
        self.thread.start()

    def stop(self):
        """The VM is gone: the clock stops and guest connections drop."""
        with self.cond:
            self.stopped = True
            self.cond.notify_all()
            socks = list(self.sockets)
            self.sockets.clear()
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def set_paused(self, paused):
        with self.cond:
            self.paused = paused
            self.cond.notify_all()

    def is_up(self):
        with self.cond:
            return self.phase == "up" and not self.stopped

    def uptime(self):
        with self.cond:
            return self.clock

    def last_counter(self):
        with self.cond:
            return self.counter_next - 1

    def wait_running(self, timeout=None):
        """Blocks while the VM is paused. False once the guest cannot answer."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self.cond:
            while True:
                if self.stopped or self.phase in ("halted", "hung", "resetting"):
                    return False
                if not self.paused:
                    return True
                if deadline is None:
                    self.cond.wait()
                else:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return False
                    self.cond.wait(left)

    def power_button(self):
        """ACPI power button (or Ctrl-Alt-Del with cad=True): the guest
        reacts once booted, when it next runs."""
        self._request("acpi")

    def ctrl_alt_del(self):
        self._request("cad")

    def _request(self, what):
        with self.cond:
            if self.phase != "up" or self.ignore_acpi:
                return      # no driver yet, or a guest that does not listen
            self.pending.append(what)
            self.cond.notify_all()

    # ----------------------------------------------------------------------
    def _say(self, line):
        if self.console is not None:
            try:
                self.console(line + "\n")
            except OSError:
                pass

    def _klog(self, msg):
        secs = int(self.clock)
        usecs = int((self.clock - secs) * 1e6)
        self._say("[%5d.%06d] %s" % (secs, usecs, msg))

    def _run(self):
        last = time.monotonic()
        while True:
            actions = []
            with self.cond:
                if self.stopped:
                    return
                now = time.monotonic()
                if not self.paused:
                    self.clock += now - last
                last = now
                if not self.paused:
                    self._step(actions)
                if not actions:
                    self.cond.wait(TICK)
            for act in actions:
                act()

    def _step(self, actions):
        if not self.kernel_printed:
            self.kernel_printed = True
            self._klog("Linux version %s (microvmd test guest) #1 SMP PREEMPT_DYNAMIC" % KERNEL_VERSION)
            self._klog("Command line: %s" % self.cmdline)
            self._klog("Memory: guest memory is simulated")
            if self.want_panic:
                self._say("MICROVMD-PANIC")
                self._klog("sysrq: Trigger a crash")
                self._klog("Kernel panic - not syncing: sysrq triggered crash")
                self._panic_after()
                return
        if self.phase == "hung":
            if self.reset_at is not None and self.clock >= self.reset_at:
                self.reset_at = None
                self._reset("panic", actions)
            return
        if self.phase == "booting":
            if self.clock >= self.boot_s and not self.no_ready:
                self.phase = "up"
                self._say("microvmd-guest: agent on vsock port %d" % self.agent_port)
                self._say("MICROVMD-GUEST-READY")
                self.counter_next = 0
                self.next_counter_at = self.clock
                if self.hello_port is not None and not self.hello_done:
                    self.hello_done = True
                    port = self.hello_port
                    actions.append(lambda: self._hello(port))
            else:
                return
        if self.phase != "up":
            return
        while self.next_counter_at is not None and self.clock >= self.next_counter_at:
            self._say("MICROVMD-COUNTER %d" % self.counter_next)
            self.counter_next += 1
            self.ticks += 1
            self.next_counter_at += 1.0
        if self.pending:
            what = self.pending.pop(0)
            if what == "acpi":
                self._poweroff("acpi", actions)
            else:
                self._say("microvmd-guest: ctrl-alt-del")
                self._reset("ctrl-alt-del", actions)
            return
        if self.poweroff_after is not None and self.clock >= self.poweroff_after:
            self._poweroff("timer", actions)

    def _panic_after(self):
        self.phase = "hung"
        self.next_counter_at = None
        if self.panic_timeout > 0:
            self._klog("Rebooting in %d seconds.." % self.panic_timeout)
            self.reset_at = self.clock + self.panic_timeout
        elif self.panic_timeout < 0:
            self.reset_at = self.clock

    def _poweroff(self, why, actions):
        self._say("MICROVMD-POWEROFF %s" % why)
        self._klog("reboot: Power down")
        self.phase = "halted"
        self.next_counter_at = None
        self.cond.notify_all()
        actions.append(lambda: self.hooks.on_poweroff(why))
        actions.append(self._drop_sockets)

    def _reset(self, why, actions):
        self._klog("reboot: Restarting system")
        self.phase = "resetting"
        self.next_counter_at = None
        self.cond.notify_all()
        actions.append(self._drop_sockets)
        actions.append(lambda: self.hooks.on_reset(why))

    def _drop_sockets(self):
        with self.cond:
            socks = list(self.sockets)
            self.sockets.clear()
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    # Called from agent threads, outside the lock.
    def _do(self, fn):
        actions = []
        with self.cond:
            if self.phase == "up" and not self.stopped:
                fn(actions)
        for act in actions:
            act()

    # ----------------------------------------------------------------------
    # vsock endpoints

    def vsock_endpoint(self, port):
        with self.cond:
            if self.phase != "up" or self.stopped:
                return None
        if port == self.agent_port:
            return self.serve_agent
        if port == self.echo_port:
            return self.serve_echo
        return None

    def _track(self, sock):
        with self.cond:
            if self.stopped:
                return False
            self.sockets.add(sock)
            return True

    def _untrack(self, sock):
        with self.cond:
            self.sockets.discard(sock)

    def serve_echo(self, sock, initial=b""):
        if not self._track(sock):
            return
        try:
            data = initial
            while True:
                if data:
                    if not self.wait_running():
                        return
                    sock.sendall(data)
                data = sock.recv(65536)
                if not data:
                    return
        except OSError:
            return
        finally:
            self._untrack(sock)

    def serve_agent(self, sock, initial=b""):
        if not self._track(sock):
            return
        buf = initial
        try:
            while True:
                while b"\n" not in buf:
                    data = sock.recv(4096)
                    if not data:
                        return
                    buf += data
                line, buf = buf.split(b"\n", 1)
                text = line.decode("utf-8", "replace").rstrip("\r")
                if not self.wait_running():
                    return
                reply, after = self._agent_command(text)
                sock.sendall((reply + "\n").encode())
                if after:
                    after()
        except OSError:
            return
        finally:
            self._untrack(sock)

    def _agent_command(self, line):
        words = line.split()
        cmd = words[0] if words else ""
        if cmd == "ping" and len(words) == 1:
            return "pong", None
        if cmd == "uptime" and len(words) == 1:
            up = self.uptime()
            return "%.2f %.2f" % (up, up * 0.9), None
        if cmd == "poweroff" and len(words) == 1:
            return "ok", lambda: self._do(lambda a: self._poweroff("agent", a))
        if cmd == "exit" and len(words) == 2:
            code = words[1]
            if not code.isdigit() or len(code) > 3 or int(code) > 255:
                return "error bad exit code", None

            def ex(actions, code=int(code)):
                self._say("MICROVMD-EXIT %d" % code)
                self._poweroff("exit", actions)
            return "ok", lambda: self._do(ex)
        # Commands of the test VMMs' guest only.
        if cmd == "echo":
            return line[len("echo"):].lstrip(" "), None
        if cmd == "counter" and len(words) == 1:
            return str(self.last_counter()), None
        if cmd == "cmdline" and len(words) == 1:
            return self.cmdline, None
        if cmd == "reboot" and len(words) == 1:
            return "ok", lambda: self._do(lambda a: self._reset("agent", a))
        if cmd == "panic" and len(words) == 1:
            def pn(actions):
                self._say("MICROVMD-PANIC")
                self._klog("Kernel panic - not syncing: sysrq triggered crash")
                self._panic_after()
                self.cond.notify_all()
                actions.append(self._drop_sockets)
            return "ok", lambda: self._do(pn)
        if cmd == "connect" and len(words) == 2 and words[1].isdigit():
            err = self._hello(int(words[1]))
            return ("ok" if err is None else "error %s" % err), None
        return "error unknown command", None

    def _hello(self, port):
        """Opens a connection to the host's vsock port `port`, says hello,
        then serves the agent protocol on it. Returns None or an error."""
        vsock = getattr(self.hooks, "vsock", None)
        if vsock is None:
            self._say("microvmd-guest: no vsock device")
            return "no vsock device"
        try:
            s = vsock.connect_to_host(port)
        except OSError as e:
            self._say("microvmd-guest: vsock connection to host port %d refused" % port)
            return "connection refused (%s)" % fakevmm.os_error_text(e)
        try:
            s.sendall(b"hello\n")
        except OSError:
            vsock.untrack(s)
            return "connection reset"

        def serve():
            try:
                self.serve_agent(s)
            finally:
                vsock.untrack(s)
                try:
                    s.close()
                except OSError:
                    pass
        threading.Thread(target=serve, daemon=True).start()
        return None
