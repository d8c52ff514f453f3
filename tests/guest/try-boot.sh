#!/bin/bash
# Manual check of the test guest: boots OUTDIR/vmlinuz + OUTDIR/initrd.img
# under qemu-system-x86_64 (TCG) and reports what works.
#
#   try-boot.sh OUTDIR [--machines microvm,q35] [--boots N] [--keep]
#
# For each machine type: N timed boots (start to MICROVMD-GUEST-READY), then
# the agent (ping, uptime, errors), pause/resume against the console
# counter, snapshot + restore, power-off through the agent, through
# system_powerdown (ACPI), "exit CODE", microvmd.poweroff_after,
# microvmd.panic and a boot without an agent port.  Needs python3 and
# qemu-system-x86 (installed with apt-get if missing, as root).
set -euo pipefail

if [ $# -lt 1 ]; then
    echo "usage: $0 OUTDIR [--machines microvm,q35] [--boots N] [--keep]" >&2
    exit 2
fi

need() { # need COMMAND PACKAGE
    command -v "$1" >/dev/null 2>&1 && return 0
    echo "try-boot.sh: installing $2" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$2" >&2
}
need qemu-system-x86_64 qemu-system-x86
if [ -x /usr/bin/python3 ]; then py=/usr/bin/python3; else need python3 python3; py=python3; fi

script=$(mktemp /tmp/try-boot.XXXXXX.py)
trap 'rm -f "$script"' EXIT
cat > "$script" <<'PY'
import argparse, json, os, re, shutil, signal, socket, subprocess, sys, tempfile, time

ap = argparse.ArgumentParser()
ap.add_argument("outdir")
ap.add_argument("--machines", default="microvm,q35")
ap.add_argument("--boots", type=int, default=5)
ap.add_argument("--keep", action="store_true")
opt = ap.parse_args()

KERNEL = os.path.join(opt.outdir, "vmlinuz")
INITRD = os.path.join(opt.outdir, "initrd.img")
for f in (KERNEL, INITRD):
    if not os.path.isfile(f):
        sys.exit(f"missing {f}; run build.sh {opt.outdir} first")
WORK = tempfile.mkdtemp(prefix="try-boot.")
AGENT_NAME = "org.microvmd1.agent"
APPEND = "console=ttyS0 tsc_early_khz=2000000 reboot=t panic=-1"

results = []


def report(ok, what, detail=""):
    results.append((ok, what, detail))
    print(f"{'PASS' if ok else 'FAIL'}  {what}{'  -- ' + detail if detail else ''}", flush=True)


class QMP:
    def __init__(self, path, deadline):
        while True:
            try:
                self.sock = socket.socket(socket.AF_UNIX)
                self.sock.connect(path)
                break
            except OSError:
                self.sock.close()
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.02)
        self.buf = b""
        self.events = []
        self.recv(10)                       # greeting
        self.cmd("qmp_capabilities")

    def recv(self, timeout):
        end = time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = end - time.monotonic()
            if left <= 0:
                raise TimeoutError("qmp")
            self.sock.settimeout(left)
            data = self.sock.recv(65536)
            if not data:
                raise EOFError("qmp closed")
            self.buf += data
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def cmd(self, name, timeout=30, **args):
        msg = {"execute": name}
        if args:
            msg["arguments"] = args
        self.sock.sendall(json.dumps(msg).encode() + b"\n")
        while True:
            m = self.recv(timeout)
            if "event" in m:
                self.events.append(m)
                continue
            if "error" in m:
                raise RuntimeError(f"{name}: {m['error']}")
            return m.get("return")

    def wait_event(self, name, timeout):
        end = time.monotonic() + timeout
        while True:
            for e in self.events:
                if e["event"] == name:
                    return e
            try:
                m = self.recv(max(0.01, end - time.monotonic()))
            except (TimeoutError, EOFError):
                return None
            if "event" in m:
                self.events.append(m)


class VM:
    n = 0
    all = []

    def __init__(self, machine, append="", agent=True, incoming=None, console=None):
        VM.n += 1
        self.dir = os.path.join(WORK, f"{VM.n:02d}-{machine}")
        os.makedirs(self.dir)
        self.console = console or os.path.join(self.dir, "console.log")
        self.qmp_path = os.path.join(self.dir, "qmp.sock")
        self.agent_path = os.path.join(self.dir, "agent.sock")
        args = ["qemu-system-x86_64", "-M", machine, "-accel", "tcg",
                "-m", "256", "-smp", "1", "-nodefaults", "-no-user-config",
                "-display", "none", "-no-reboot",
                "-kernel", KERNEL, "-initrd", INITRD,
                "-append", (APPEND + " " + append).strip(),
                "-chardev", f"file,id=con,path={self.console},append=on",
                "-serial", "chardev:con",
                "-qmp", f"unix:{self.qmp_path},server=on,wait=off"]
        if agent:
            bus = "virtio-serial-device" if machine.startswith("microvm") else "virtio-serial-pci"
            args += ["-device", bus,
                     "-chardev", f"socket,id=agent,path={self.agent_path},server=on,wait=off",
                     "-device", f"virtserialport,chardev=agent,name={AGENT_NAME}"]
        if incoming:
            args += ["-incoming", incoming]
        self.args = args
        self.start_offset = os.path.getsize(self.console) if os.path.exists(self.console) else 0
        self.t0 = time.monotonic()
        self.log = open(os.path.join(self.dir, "qemu.log"), "wb")
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=self.log,
                                     stderr=subprocess.STDOUT)
        VM.all.append(self)
        self.qmp = QMP(self.qmp_path, time.monotonic() + 10)
        self.agent = None

    def text(self):
        try:
            with open(self.console, "rb") as f:
                f.seek(self.start_offset)
                return f.read().decode(errors="replace")
        except FileNotFoundError:
            return ""

    def wait_console(self, pattern, timeout):
        rx = re.compile(pattern, re.M)
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            m = rx.search(self.text())
            if m:
                return m
            if self.proc.poll() is not None:
                return rx.search(self.text())
            time.sleep(0.02)
        return None

    def counters(self):
        return [int(x) for x in re.findall(r"^MICROVMD-COUNTER (\d+)\r?$", self.text(), re.M)]

    def ask(self, line, timeout=10):
        if self.agent is None:
            self.agent = socket.socket(socket.AF_UNIX)
            self.agent.connect(self.agent_path)
            self.abuf = b""
        self.agent.sendall(line.encode() + b"\n")
        end = time.monotonic() + timeout
        while b"\n" not in self.abuf:
            left = end - time.monotonic()
            if left <= 0:
                return None
            self.agent.settimeout(left)
            try:
                data = self.agent.recv(4096)
            except socket.timeout:
                return None
            if not data:
                return None
            self.abuf += data
        reply, self.abuf = self.abuf.split(b"\n", 1)
        return reply.decode()

    def wait_exit(self, timeout):
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def shutdown_reason(self):
        e = self.qmp.wait_event("SHUTDOWN", 1)
        return e["data"].get("reason") if e else None

    def kill(self):
        if self.log.closed:
            return
        if self.proc.poll() is None:
            try:
                self.qmp.cmd("quit", timeout=5)
            except Exception:
                pass
            if self.wait_exit(5) is None:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def tail(vm, n=8):
    return " | ".join(vm.text().strip().splitlines()[-n:])


def timed_boots(machine):
    times, kernel_init = [], []
    for i in range(opt.boots):
        vm = VM(machine)
        m = vm.wait_console(r"^MICROVMD-GUEST-READY", 60)
        if m:
            times.append(time.monotonic() - vm.t0)
            k = re.search(r"\[\s*([\d.]+)\] Run /init", vm.text())
            if k:
                kernel_init.append(float(k.group(1)))
        else:
            report(False, f"{machine}: boot {i + 1} reached the marker", tail(vm))
        vm.kill()
    if times:
        s = ", ".join(f"{t:.2f}" for t in times)
        ki = ", ".join(f"{t:.2f}" for t in kernel_init)
        report(len(times) == opt.boots,
               f"{machine}: {len(times)}/{opt.boots} boots reached MICROVMD-GUEST-READY",
               f"start-to-marker s: {s} (min {min(times):.2f}, max {max(times):.2f}); "
               f"kernel 'Run /init' at s: {ki}")


def check_machine(machine):
    print(f"== {machine}", flush=True)
    timed_boots(machine)

    # agent, pause/resume, snapshot, agent power-off
    vm = VM(machine)
    if not vm.wait_console(r"^MICROVMD-GUEST-READY", 60):
        report(False, f"{machine}: boot", tail(vm))
        vm.kill()
        return
    r = vm.ask("ping")
    report(r == "pong", f"{machine}: agent ping", repr(r))
    r = vm.ask("uptime")
    report(bool(r and re.fullmatch(r"[\d.]+ [\d.]+", r)), f"{machine}: agent uptime", repr(r))
    r = vm.ask("hello world")
    report(r == "error unknown command", f"{machine}: agent unknown command", repr(r))
    r = vm.ask("exit nope")
    report(bool(r and r.startswith("error")), f"{machine}: agent bad exit code", repr(r))
    r = vm.ask("ping\r")
    report(r == "pong", f"{machine}: agent CRLF", repr(r))

    vm.wait_console(r"^MICROVMD-COUNTER 2\r?$", 10)
    vm.qmp.cmd("stop")
    time.sleep(0.3)
    c1 = vm.counters()[-1]
    time.sleep(3)
    c2 = vm.counters()[-1]
    st = vm.qmp.cmd("query-status")["status"]
    report(c1 == c2 and st == "paused", f"{machine}: stop freezes the counter",
           f"{c1} -> {c2} over 3 s, status {st}")
    vm.qmp.cmd("cont")
    ok = vm.wait_console(rf"^MICROVMD-COUNTER {c2 + 1}\r?$", 5)
    after = [c for c in vm.counters() if c > c2][:3]
    report(bool(ok) and after[:1] == [c2 + 1], f"{machine}: cont resumes the counter",
           f"next {after}")

    # snapshot (stop, migrate to exec:cat, quit) and restore (-incoming)
    snap = os.path.join(vm.dir, "snapshot")
    vm.qmp.cmd("stop")
    time.sleep(0.3)
    before = vm.counters()[-1]
    t = time.monotonic()
    vm.qmp.cmd("migrate", uri=f"exec:cat > {snap}")
    while True:
        st = vm.qmp.cmd("query-migrate").get("status")
        if st in ("completed", "failed", "cancelled"):
            break
        time.sleep(0.05)
    save_s = time.monotonic() - t
    vm.kill()
    report(st == "completed", f"{machine}: snapshot saved",
           f"{save_s:.2f} s, {os.path.getsize(snap) / 1e6:.0f} MB")
    if st == "completed":
        t = time.monotonic()
        vm = VM(machine, incoming=f"exec:cat {snap}")
        while vm.qmp.cmd("query-status")["status"] != "paused":
            time.sleep(0.02)
            if time.monotonic() - t > 30:
                break
        load_s = time.monotonic() - t
        vm.qmp.cmd("cont")
        ok = vm.wait_console(r"^MICROVMD-COUNTER \d+\r?$", 5)
        got = vm.counters()[:3]
        report(bool(ok) and got[:1] == [before + 1], f"{machine}: restore continues the counter",
               f"saved at {before}, restored prints {got}, restore {load_s:.2f} s")
        r = vm.ask("ping")
        report(r == "pong", f"{machine}: agent after restore", repr(r))

    r = vm.ask("poweroff")
    code = vm.wait_exit(15)
    report(r == "ok" and code == 0, f"{machine}: agent poweroff",
           f"reply {r!r}, exit {code}, SHUTDOWN {vm.shutdown_reason()}")
    vm.kill()

    # ACPI power button
    vm = VM(machine)
    vm.wait_console(r"^MICROVMD-GUEST-READY", 60)
    t = time.monotonic()
    vm.qmp.cmd("system_powerdown")
    code = vm.wait_exit(20)
    took = time.monotonic() - t
    report(code == 0 and "MICROVMD-POWEROFF acpi" in vm.text(),
           f"{machine}: system_powerdown powers the guest off",
           f"exit {code} after {took:.2f} s, SHUTDOWN {vm.shutdown_reason()}"
           + ("" if code is not None else "; " + tail(vm, 3)))
    vm.kill()

    # exit CODE
    vm = VM(machine)
    vm.wait_console(r"^MICROVMD-GUEST-READY", 60)
    r = vm.ask("exit 7")
    code = vm.wait_exit(15)
    report(r == "ok" and code == 0 and re.search(r"^MICROVMD-EXIT 7\r?$", vm.text(), re.M),
           f"{machine}: agent exit 7", f"reply {r!r}, exit {code}")
    vm.kill()

    # powers off by itself, no agent port
    vm = VM(machine, append="microvmd.poweroff_after=2", agent=False)
    ok = vm.wait_console(r"^MICROVMD-GUEST-READY", 60)
    code = vm.wait_exit(20)
    report(bool(ok) and code == 0 and "MICROVMD-POWEROFF timer" in vm.text()
           and "no agent port" in vm.text(),
           f"{machine}: no agent port + microvmd.poweroff_after=2",
           f"exit {code}, SHUTDOWN {vm.shutdown_reason()}")
    vm.kill()

    # cannot boot
    vm = VM(machine, append="microvmd.panic", agent=False)
    code = vm.wait_exit(60)
    report(code == 0 and "Kernel panic" in vm.text() and "MICROVMD-GUEST-READY" not in vm.text(),
           f"{machine}: microvmd.panic", f"exit {code}, SHUTDOWN {vm.shutdown_reason()}")
    vm.kill()


try:
    for machine in opt.machines.split(","):
        check_machine(machine)
finally:
    for vm in VM.all:
        vm.kill()
    failed = [w for ok, w, _ in results if not ok]
    print(f"\n{len(results) - len(failed)}/{len(results)} checks passed"
          + (f"; failed: {', '.join(failed)}" if failed else ""))
    if opt.keep or failed:
        print(f"logs kept in {WORK}")
    else:
        shutil.rmtree(WORK, ignore_errors=True)
sys.exit(1 if failed else 0)
PY
"$py" "$script" "$@"
