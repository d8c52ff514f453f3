#!/usr/bin/env python3
# Checks the system bus policy of microvmd.
#
#   check-bus-policy.py rules CONF
#       Reads the file: root may own org.microvmd1, everyone may send to
#       it, and nothing else is opened (no other name, no eavesdropping,
#       no receive rules). Deny rules are allowed: they only close.
#
#   check-bus-policy.py daemon CONF
#       Loads the file into a private dbus-daemon that otherwise runs the
#       system bus's own default policy (copied from system.conf), which is
#       the real check that dbus-daemon accepts it (the busconfig DTD
#       lags behind dbus-daemon and refuses send_destination). Then, as
#       root and as uid 65534: the unprivileged user cannot own the name,
#       root can, and the unprivileged user can call it. Needs root,
#       setpriv and busctl; exits 77 (skipped) without root.

import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import xml.etree.ElementTree as ET

BUS_NAME = "org.microvmd1"
NOBODY = 65534

# What the file may open, per policy selector.
ALLOWED = {
    (("user", "root"),): [{"own": BUS_NAME}],
    (("context", "default"),): [{"send_destination": BUS_NAME}],
}


def check_rules(conf):
    failures = []
    root = ET.parse(conf).getroot()
    if root.tag != "busconfig":
        return [f"the root element is <{root.tag}>, not <busconfig>"]
    found = {key: [] for key in ALLOWED}
    for child in root:
        if child.tag is ET.Comment:
            continue
        if child.tag != "policy":
            failures.append(f"<{child.tag}> does not belong in a service's bus policy")
            continue
        selector = tuple(sorted(child.attrib.items()))
        for rule in child:
            if rule.tag is ET.Comment or rule.tag == "deny":
                continue
            attrs = dict(rule.attrib)
            if rule.tag != "allow" or selector not in ALLOWED or attrs not in ALLOWED[selector]:
                failures.append(f"<policy {' '.join(f'{k}={v!r}' for k, v in selector)}> "
                                f"opens <{rule.tag} {attrs}>")
            else:
                found[selector].append(attrs)
    for selector, rules in ALLOWED.items():
        for attrs in rules:
            if attrs not in found[selector]:
                failures.append(f"<policy {' '.join(f'{k}={v!r}' for k, v in selector)}> "
                                f"lacks <allow {attrs}>")
    return failures


# The part of system.conf that makes the system bus deny by default, used
# when system.conf itself is not installed.
FALLBACK_DEFAULT_POLICY = """
<busconfig>
  <type>system</type>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <deny own="*"/>
    <deny send_type="method_call"/>
    <allow send_type="signal"/>
    <allow send_requested_reply="true" send_type="method_return"/>
    <allow send_requested_reply="true" send_type="error"/>
    <allow receive_type="method_call"/>
    <allow receive_type="method_return"/>
    <allow receive_type="error"/>
    <allow receive_type="signal"/>
    <allow send_destination="org.freedesktop.DBus"
           send_interface="org.freedesktop.DBus"/>
    <allow send_destination="org.freedesktop.DBus"
           send_interface="org.freedesktop.DBus.Introspectable"/>
    <allow send_destination="org.freedesktop.DBus"
           send_interface="org.freedesktop.DBus.Properties"/>
  </policy>
</busconfig>
"""

# Elements of system.conf that would make the test bus a second system
# bus (user, pid file, sockets, activation, other services' policies).
DROPPED = {"user", "fork", "pidfile", "listen", "includedir", "include", "servicehelper",
           "standard_system_servicedirs", "servicedir", "syslog", "keep_umask"}


def bus_config(conf, address):
    system_conf = "/usr/share/dbus-1/system.conf"
    if os.path.exists(system_conf):
        root = ET.parse(system_conf).getroot()
    else:
        root = ET.fromstring(FALLBACK_DEFAULT_POLICY)
    for child in list(root):
        if child.tag in DROPPED:
            root.remove(child)
    listen = ET.Element("listen")
    listen.text = address
    root.insert(0, listen)
    include = ET.SubElement(root, "include")
    include.text = os.path.abspath(conf)
    return ET.tostring(root, encoding="unicode")


class Message:
    """The little of the D-Bus wire format this test needs."""

    METHOD_CALL, METHOD_RETURN, ERROR, SIGNAL = 1, 2, 3, 4
    NO_REPLY_EXPECTED = 1

    def __init__(self, mtype, serial, flags=0, fields=None, body=b""):
        self.type = mtype
        self.serial = serial
        self.flags = flags
        self.fields = fields or {}
        self.body = body

    @staticmethod
    def _pad(buf, n):
        buf.extend(b"\0" * (-len(buf) % n))

    @staticmethod
    def _string(buf, s):
        Message._pad(buf, 4)
        data = s.encode()
        buf.extend(struct.pack("<I", len(data)) + data + b"\0")

    def encode(self):
        # fields: code -> (signature, value)
        head = bytearray(struct.pack("<cBBBII", b"l", self.type, self.flags, 1,
                                     len(self.body), self.serial))
        head.extend(b"\0\0\0\0")
        start = len(head)
        for code, (sig, value) in sorted(self.fields.items()):
            self._pad(head, 8)
            head.extend(bytes([code, len(sig)]) + sig.encode() + b"\0")
            if sig in ("s", "o"):
                self._string(head, value)
            elif sig == "g":
                head.extend(bytes([len(value)]) + value.encode() + b"\0")
            elif sig == "u":
                self._pad(head, 4)
                head.extend(struct.pack("<I", value))
        struct.pack_into("<I", head, 12, len(head) - start)
        self._pad(head, 8)
        return bytes(head) + self.body

    @staticmethod
    def read(sock):
        fixed = _recv_exact(sock, 16)
        endian = "<" if fixed[0:1] == b"l" else ">"
        mtype, flags = fixed[1], fixed[2]
        body_len, serial, fields_len = struct.unpack(endian + "III", fixed[4:16])
        rest = _recv_exact(sock, fields_len + (-(16 + fields_len) % 8) + body_len)
        data = fixed + rest
        fields = {}
        pos = 16
        end = 16 + fields_len
        while pos < end:
            pos += -pos % 8
            code, sig_len = data[pos], data[pos + 1]
            sig = data[pos + 2:pos + 2 + sig_len].decode()
            pos += 3 + sig_len
            if sig in ("s", "o"):
                pos += -pos % 4
                (n,) = struct.unpack_from(endian + "I", data, pos)
                fields[code] = data[pos + 4:pos + 4 + n].decode()
                pos += 5 + n
            elif sig == "g":
                n = data[pos]
                fields[code] = data[pos + 1:pos + 1 + n].decode()
                pos += 2 + n
            elif sig == "u":
                pos += -pos % 4
                (fields[code],) = struct.unpack_from(endian + "I", data, pos)
                pos += 4
            else:
                raise ValueError(f"unexpected header field type {sig}")
        body = data[len(data) - body_len:]
        msg = Message(mtype, serial, flags, fields, body)
        msg.endian = endian
        return msg


def _recv_exact(sock, n):
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise EOFError("the bus closed the connection")
        buf += chunk
    return buf


class Connection:
    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(path)
        self.sock.sendall(b"\0AUTH EXTERNAL " + str(os.getuid()).encode().hex().encode() + b"\r\n")
        line = b""
        while not line.endswith(b"\r\n"):
            line += self.sock.recv(1)
        if not line.startswith(b"OK "):
            raise RuntimeError(f"authentication refused: {line!r}")
        self.sock.sendall(b"BEGIN\r\n")
        self.serial = 0
        self.call("Hello")

    def call(self, member, body_sig=None, body=b""):
        self.serial += 1
        fields = {1: ("o", "/org/freedesktop/DBus"), 2: ("s", "org.freedesktop.DBus"),
                  3: ("s", member), 6: ("s", "org.freedesktop.DBus")}
        if body_sig:
            fields[8] = ("g", body_sig)
        self.sock.sendall(Message(Message.METHOD_CALL, self.serial, 0, fields, body).encode())
        while True:
            msg = Message.read(self.sock)
            if msg.type in (Message.METHOD_RETURN, Message.ERROR) and msg.fields.get(5) == self.serial:
                return msg

    def serve(self):
        """Answers every method call with an empty reply, until the bus goes."""
        try:
            while True:
                msg = Message.read(self.sock)
                if msg.type != Message.METHOD_CALL or msg.flags & Message.NO_REPLY_EXPECTED:
                    continue
                self.serial += 1
                fields = {5: ("u", msg.serial)}
                if 7 in msg.fields:
                    fields[6] = ("s", msg.fields[7])
                self.sock.sendall(Message(Message.METHOD_RETURN, self.serial, 0, fields).encode())
        except (EOFError, OSError):
            pass


def request_name_body(name):
    buf = bytearray()
    Message._string(buf, name)
    Message._pad(buf, 4)
    buf.extend(struct.pack("<I", 0))
    return bytes(buf)


def as_nobody(address, *args):
    cmd = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
           "busctl", f"--address={address}", "--timeout=10", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60,
                          env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"})


def check_daemon(conf):
    dbus_daemon = shutil.which("dbus-daemon")
    if not dbus_daemon:
        return ["dbus-daemon is not installed"]
    if os.geteuid() != 0:
        print("SKIP: the bus policy is tried as root and as an unprivileged user; run as root")
        sys.exit(77)
    for tool in ("setpriv", "busctl"):
        if not shutil.which(tool):
            return [f"{tool} is not installed"]

    failures = []
    tmp = tempfile.mkdtemp(prefix="microvmd-bus-policy-")
    os.chmod(tmp, 0o755)
    path = os.path.join(tmp, "bus")
    address = f"unix:path={path}"
    config = os.path.join(tmp, "bus.conf")
    with open(config, "w") as f:
        f.write(bus_config(conf, address))

    daemon = subprocess.Popen([dbus_daemon, f"--config-file={config}", "--nofork",
                               "--print-address=1", "--nopidfile"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        if not daemon.stdout.readline():
            daemon.wait(timeout=10)
            return [f"dbus-daemon refused the configuration: {daemon.stderr.read().strip()}"]
        os.chmod(path, 0o666)

        r = as_nobody(address, "call", "org.freedesktop.DBus", "/org/freedesktop/DBus",
                      "org.freedesktop.DBus", "RequestName", "su", BUS_NAME, "0")
        if r.returncode == 0:
            failures.append(f"uid {NOBODY} could own {BUS_NAME}: {r.stdout.strip()}")
        else:
            print(f"uid {NOBODY} cannot own {BUS_NAME}: {r.stderr.strip()}")

        owner = Connection(path)
        reply = owner.call("RequestName", "su", request_name_body(BUS_NAME))
        if reply.type == Message.ERROR:
            return failures + [f"root could not own {BUS_NAME}: {reply.fields.get(4)}"]
        (result,) = struct.unpack_from(reply.endian + "I", reply.body, 0)
        if result != 1:
            return failures + [f"root did not become the primary owner of {BUS_NAME} ({result})"]
        print(f"root owns {BUS_NAME}")
        threading.Thread(target=owner.serve, daemon=True).start()

        r = as_nobody(address, "call", BUS_NAME, "/org/microvmd1",
                      "org.microvmd1.Manager", "ListMachines")
        if r.returncode != 0:
            failures.append(f"uid {NOBODY} cannot call {BUS_NAME}: {r.stderr.strip()}")
        else:
            print(f"uid {NOBODY} can call {BUS_NAME}")
    finally:
        daemon.terminate()
        daemon.wait(timeout=10)
        shutil.rmtree(tmp, ignore_errors=True)
    return failures


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("rules", "daemon"):
        print("usage: check-bus-policy.py rules|daemon CONF", file=sys.stderr)
        return 2
    mode, conf = sys.argv[1:]
    failures = check_rules(conf) if mode == "rules" else check_daemon(conf)
    for f in failures:
        print(f"FAIL: {f}")
    if failures:
        return 1
    print("the bus policy is as it should be")
    return 0


if __name__ == "__main__":
    sys.exit(main())
