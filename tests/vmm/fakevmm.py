"""Machinery shared by the test VMMs in this directory.

* MicroHttpServer: the small HTTP/1.1 server that Firecracker and Cloud
  Hypervisor both embed (micro-http), as it behaves on the wire: strict
  request parsing, its own 400 shape for requests it cannot parse, its
  response headers, keep-alive, a payload limit and ten connections.
* Serde-style JSON checking (Schema), giving the messages serde_json gives
  for unknown fields, missing fields and wrong types.
* HybridVsock: the Unix-socket face of the virtio-vsock device the two VMMs
  share: "CONNECT <port>\\n" / "OK <hostport>\\n" on the main socket, and
  <uds_path>_<port> for connections the guest opens.
* Small helpers: logging, exit, errno text in Rust's io::Error style.
"""

import errno
import json
import os
import socket
import sys
import threading
import time

# --------------------------------------------------------------------------
# Process helpers


def os_error_text(err):
    """Rust's io::Error Display: 'No such file or directory (os error 2)'."""
    if isinstance(err, OSError) and err.errno:
        return "%s (os error %d)" % (os.strerror(err.errno), err.errno)
    return str(err)


class Log:
    """A line logger with a level threshold, writing to a file or stderr."""

    LEVELS = {"off": 0, "error": 1, "warning": 2, "warn": 2, "info": 3,
              "debug": 4, "trace": 5}

    def __init__(self, prefix_fn, level="warning", path=None):
        self.prefix_fn = prefix_fn
        self.level = self.LEVELS.get(level.lower(), 2)
        self.lock = threading.Lock()
        self.file = None
        if path:
            self.set_path(path)

    def set_path(self, path):
        f = open(path, "a", buffering=1)
        with self.lock:
            self.file = f

    def set_level(self, level):
        self.level = self.LEVELS.get(level.lower(), self.level)

    def _write(self, level_name, level, msg):
        if level > self.level:
            return
        line = "%s %s\n" % (self.prefix_fn(level_name), msg)
        with self.lock:
            try:
                (self.file or sys.stderr).write(line)
                (self.file or sys.stderr).flush()
            except (OSError, ValueError):
                pass

    def error(self, msg):
        self._write("ERROR", 1, msg)

    def warning(self, msg):
        self._write("WARN", 2, msg)

    def info(self, msg):
        self._write("INFO", 3, msg)

    def debug(self, msg):
        self._write("DEBUG", 4, msg)


def hard_exit(code):
    """Ends the process at once from any thread, as a VMM's exit does."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    os._exit(code)


def parse_cmdline(cmdline):
    """Kernel command line -> ordered list of (key, value or None)."""
    out = []
    for tok in (cmdline or "").split():
        if "=" in tok:
            k, v = tok.split("=", 1)
            out.append((k, v))
        else:
            out.append((tok, None))
    return out


def cmdline_get(cmdline, key, default=None):
    """The last value given for key (kernel semantics: later wins)."""
    val = default
    for k, v in parse_cmdline(cmdline):
        if k == key:
            val = v if v is not None else ""
    return val


# --------------------------------------------------------------------------
# JSON checking with serde_json's messages


class SerdeError(Exception):
    """A deserialisation failure; str() is serde_json's message."""

    def __init__(self, msg, key=None):
        super().__init__(msg)
        self.msg = msg
        self.key = key


def _describe(value):
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean `%s`" % ("true" if value else "false")
    if isinstance(value, int):
        return "integer `%d`" % value
    if isinstance(value, float):
        return "floating point `%s`" % repr(value)
    if isinstance(value, str):
        return "string %s" % json.dumps(value)
    if isinstance(value, list):
        return "sequence"
    return "map"


def _one_of(names):
    names = ["`%s`" % n for n in names]
    if not names:
        return "there are no fields"
    if len(names) == 1:
        return "expected %s" % names[0]
    if len(names) == 2:
        return "expected %s or %s" % (names[0], names[1])
    return "expected one of %s" % ", ".join(names)


_INT_RANGES = {
    "u8": (0, 0xFF), "u16": (0, 0xFFFF), "u32": (0, 0xFFFFFFFF),
    "u64": (0, 0xFFFFFFFFFFFFFFFF), "usize": (0, 0xFFFFFFFFFFFFFFFF),
    "i32": (-0x80000000, 0x7FFFFFFF), "i64": (-(1 << 63), (1 << 63) - 1),
}


class Schema:
    """Type descriptions in the manner of serde derives.

    kinds: int types by name ('u8'...), 'bool', 'str', 'any',
    Schema.enum(name, variants), Schema.struct(name, fields, strict),
    Schema.list(of), Schema.opt(of) (null allowed).
    A struct field is (name, type, required[, default]).
    """

    def __init__(self, kind, name=None, fields=None, strict=True, of=None,
                 variants=None, ci=False):
        self.kind = kind
        self.name = name
        self.fields = fields or []
        self.strict = strict
        self.of = of
        self.variants = variants or []
        self.ci = ci

    @classmethod
    def struct(cls, name, fields, strict=True):
        return cls("struct", name=name, fields=fields, strict=strict)

    @classmethod
    def enum(cls, name, variants, ci=False):
        return cls("enum", name=name, variants=variants, ci=ci)

    @classmethod
    def list(cls, of):
        return cls("list", of=of)

    @classmethod
    def opt(cls, of):
        return cls("opt", of=of)


def _expected(t):
    if isinstance(t, str):
        if t in _INT_RANGES:
            return t
        return {"bool": "a boolean", "str": "a string", "any": "any value"}[t]
    if t.kind == "struct":
        return "struct %s" % t.name
    if t.kind == "list":
        return "a sequence"
    if t.kind == "enum":
        return "enum %s" % t.name
    if t.kind == "opt":
        return _expected(t.of)
    return "a value"


def check(t, value, key=None):
    """Checks value against t; returns it with struct defaults filled in."""
    if isinstance(t, str):
        if t == "any":
            return value
        if t in _INT_RANGES:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise SerdeError("invalid type: %s, expected %s"
                                 % (_describe(value), t), key)
            if isinstance(value, float):
                raise SerdeError("invalid type: %s, expected %s"
                                 % (_describe(value), t), key)
            lo, hi = _INT_RANGES[t]
            if value < lo or value > hi:
                raise SerdeError("invalid value: integer `%d`, expected %s"
                                 % (value, t), key)
            return value
        if t == "bool":
            if not isinstance(value, bool):
                raise SerdeError("invalid type: %s, expected a boolean"
                                 % _describe(value), key)
            return value
        if t == "str":
            if not isinstance(value, str):
                raise SerdeError("invalid type: %s, expected a string"
                                 % _describe(value), key)
            return value
        raise ValueError(t)
    if t.kind == "opt":
        if value is None:
            return None
        return check(t.of, value, key)
    if t.kind == "list":
        if not isinstance(value, list):
            raise SerdeError("invalid type: %s, expected a sequence"
                             % _describe(value), key)
        return [check(t.of, v, key) for v in value]
    if t.kind == "enum":
        if not isinstance(value, str):
            raise SerdeError("invalid type: %s, expected %s"
                             % (_describe(value), "variant identifier"), key)
        for v in t.variants:
            if value == v or (t.ci and value.lower() == v.lower()):
                return v
        raise SerdeError("unknown variant `%s`, %s"
                         % (value, _one_of(t.variants)), key)
    if t.kind == "struct":
        if not isinstance(value, dict):
            raise SerdeError("invalid type: %s, expected struct %s"
                             % (_describe(value), t.name), key)
        names = [f[0] for f in t.fields]
        for k in value:
            if k not in names and t.strict:
                raise SerdeError("unknown field `%s`, %s"
                                 % (k, _one_of(names)), k)
        out = {}
        for f in t.fields:
            fname, ftype, required = f[0], f[1], f[2]
            if fname in value:
                out[fname] = check(ftype, value[fname], fname)
            elif required:
                raise SerdeError("missing field `%s`" % fname, None)
            elif len(f) > 3:
                out[fname] = f[3]
            else:
                out[fname] = None
        if not t.strict:
            for k, v in value.items():
                if k not in out:
                    out[k] = v
        return out
    raise ValueError(t.kind)


def _line_col(text, offset):
    line = text.count("\n", 0, offset) + 1
    col = offset - (text.rfind("\n", 0, offset) + 1)
    return line, col


def _no_duplicates(pairs):
    seen = {}
    for k, v in pairs:
        if k in seen:
            raise SerdeError("duplicate field `%s`" % k, k)
        seen[k] = v
    return seen


_PY_TO_SERDE = [
    ("Expecting value", "expected value"),
    ("Expecting property name enclosed in double quotes", "key must be a string"),
    ("Extra data", "trailing characters"),
    ("Unterminated string", "EOF while parsing a string"),
    ("Expecting ',' delimiter", "expected `,` or `}`"),
    ("Expecting ':' delimiter", "expected `:`"),
    ("Invalid control character", "control character (\\u0000-\\u001F) found while parsing a string"),
]


def parse_json(raw, t=None):
    """Parses bytes as JSON and checks it against t.

    Raises SerdeError whose message ends in ' at line L column C' as
    serde_json's do (the position is where this parser noticed the problem,
    which may differ by a few characters from serde's)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise SerdeError("invalid unicode code point at line 1 column %d"
                         % (e.start + 1))
    try:
        value = json.loads(text, object_pairs_hook=_no_duplicates)
    except json.JSONDecodeError as e:
        msg = e.msg
        for py, serde in _PY_TO_SERDE:
            if msg.startswith(py):
                msg = serde
                break
        if e.pos >= len(text.rstrip()) and msg == "expected value":
            msg = "EOF while parsing a value"
        raise SerdeError("%s at line %d column %d" % (msg, e.lineno, e.colno))
    except SerdeError as e:
        line, col = _position_of_key(text, e.key)
        raise SerdeError("%s at line %d column %d" % (e.msg, line, col))
    if t is None:
        return value
    try:
        return check(t, value)
    except SerdeError as e:
        line, col = _position_of_key(text, e.key)
        raise SerdeError("%s at line %d column %d" % (e.msg, line, col))


def _position_of_key(text, key):
    if key is not None:
        needle = json.dumps(key)
        idx = text.find(needle)
        if idx >= 0:
            return _line_col(text, idx + len(needle))
    stripped = text.rstrip()
    return _line_col(text, len(stripped))


# --------------------------------------------------------------------------
# micro-http

HTTP_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")
MAX_CONNECTIONS = 10
BUFFER_SIZE = 1024
DEFAULT_PAYLOAD_LIMIT = 51200
# micro-http answers an eleventh connection with this fixed text, whose
# Server header does not depend on the application.
SERVER_FULL = (b"HTTP/1.1 503\r\nServer: Firecracker API\r\nConnection: close\r\n"
               b"Content-Length: 40\r\n\r\n{ \"error\": \"Too many open connections\" }")


class HttpParseError(Exception):
    pass


class Request:
    def __init__(self, method, uri, version):
        self.method = method
        self.uri = uri
        self.version = version
        self.headers = []
        self.body = None          # None when Content-Length is absent or 0
        self.expect_continue = False

    def abs_path(self):
        """micro-http's Uri::get_abs_path."""
        s = self.uri
        if s.startswith("http://"):
            rest = s[len("http://"):]
            i = rest.find("/")
            return rest[i:] if i >= 0 else ""
        return s if s.startswith("/") else ""


class Response:
    """An HTTP response; after, if set, runs once it has been sent."""

    def __init__(self, status, body=None, after=None):
        self.status = status
        self.body = body
        self.after = after

    @classmethod
    def json(cls, status, obj, after=None):
        return cls(status, json.dumps(obj, separators=(",", ":")).encode(), after)

    def encode(self, server_name):
        head = "HTTP/1.1 %d \r\nServer: %s\r\nConnection: keep-alive\r\n" % (
            self.status, server_name)
        body = b""
        if self.status not in (100, 204):
            body = self.body or b""
            head += "Content-Type: application/json\r\nContent-Length: %d\r\n" % len(body)
        return (head + "\r\n").encode() + body


class MicroHttpServer:
    """Serves requests on a listening Unix socket, one thread a connection.

    handler(request) -> Response is called for each complete request in
    order; requests on one connection are answered in order (keep-alive,
    pipelining allowed)."""

    def __init__(self, listener, server_name, handler, payload_limit=DEFAULT_PAYLOAD_LIMIT,
                 log=None):
        self.listener = listener
        self.server_name = server_name
        self.handler = handler
        self.payload_limit = payload_limit
        self.log = log
        self.lock = threading.Lock()
        self.active = 0
        self.closed = False

    def start(self):
        t = threading.Thread(target=self._accept_loop, name="http-accept", daemon=True)
        t.start()

    def close(self):
        self.closed = True
        try:
            self.listener.close()
        except OSError:
            pass

    def _accept_loop(self):
        while not self.closed:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                if self.closed:
                    return
                time.sleep(0.01)
                continue
            with self.lock:
                full = self.active >= MAX_CONNECTIONS
                if not full:
                    self.active += 1
            if full:
                try:
                    conn.sendall(SERVER_FULL)
                finally:
                    conn.close()
                continue
            t = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            t.start()

    def _serve(self, conn):
        try:
            _Connection(self, conn).run()
        finally:
            with self.lock:
                self.active -= 1
            try:
                conn.close()
            except OSError:
                pass


class _Eof(Exception):
    pass


class _Connection:
    def __init__(self, server, sock):
        self.server = server
        self.sock = sock
        self.buf = bytearray()

    def _fill(self):
        data = self.sock.recv(65536)
        if not data:
            raise _Eof()
        self.buf += data

    def _line(self, what):
        while True:
            i = self.buf.find(b"\r\n")
            if i >= 0:
                line = bytes(self.buf[:i])
                del self.buf[:i + 2]
                if len(line) > BUFFER_SIZE:
                    raise HttpParseError(what)
                return line
            if len(self.buf) > BUFFER_SIZE:
                raise HttpParseError(what)
            self._fill()

    def _send(self, data):
        self.sock.sendall(data)

    def run(self):
        while True:
            try:
                req = self._read_request()
            except _Eof:
                return
            except (ConnectionError, OSError):
                return
            except HttpParseError as e:
                body = ('{ "error": "%s\nAll previous unanswered requests will be dropped." }'
                        % e).encode()
                try:
                    self._send(Response(400, body).encode(self.server.server_name))
                except OSError:
                    pass
                # The stream cannot be resynchronised after a bad request.
                return
            try:
                resp = self.server.handler(req)
            except Exception as e:  # a bug in the test VMM: say so loudly
                if self.server.log:
                    self.server.log.error("internal error: %r" % (e,))
                import traceback
                traceback.print_exc()
                resp = Response.json(500, {"fault_message": "test VMM internal error: %r" % (e,)})
            try:
                self._send(resp.encode(self.server.server_name))
            except OSError:
                if resp.after:
                    resp.after()
                return
            if resp.after:
                resp.after()

    def _read_request(self):
        line = self._line("Invalid request.")
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError:
            raise HttpParseError("Invalid request.")
        if len(line) < len("GET") + 1 + len("HTTP/1.0") + 2:
            raise HttpParseError("Invalid request.")
        parts = text.split(" ", 2)
        if len(parts) != 3:
            raise HttpParseError("Invalid request.")
        method, uri, version = parts
        if method not in HTTP_METHODS:
            raise HttpParseError("Invalid HTTP Method: Unsupported HTTP method.")
        if uri == "":
            raise HttpParseError("Invalid URI: Empty URI not allowed.")
        if version not in ("HTTP/1.0", "HTTP/1.1"):
            raise HttpParseError("Invalid HTTP Version: Unsupported HTTP version.")
        req = Request(method, uri, version)
        length = 0
        while True:
            hline = self._line("Invalid request.")
            if hline == b"":
                break
            try:
                htext = hline.decode("utf-8")
            except UnicodeDecodeError as e:
                raise HttpParseError("Invalid header. Reason: Header contains invalid characters. Key: %s" % e)
            if ":" not in htext:
                raise HttpParseError("Invalid header. Reason: Header is incorrectly formatted. Key: %s" % htext)
            key, value = htext.split(":", 1)
            req.headers.append((key, value))
            name = key.strip().lower()
            v = value.strip()
            if name == "content-length":
                if not v.isdigit() or int(v) > 0xFFFFFFFF:
                    raise HttpParseError("Invalid header. Reason: Invalid value. Key:%s; Value:%s" % (key, value))
                length = int(v)
            elif name == "content-type":
                # Only the two bare media types; a parameter such as
                # '; charset=utf-8' makes it a different, refused value.
                if v not in ("application/json", "text/plain"):
                    raise HttpParseError("Invalid header. Reason: Unsupported value. Key:%s; Value:%s" % (key, value))
            elif name == "transfer-encoding":
                if v == "chunked":
                    raise HttpParseError("Invalid header. Reason: Unsupported feature. Key: %s; Value: %s" % (key, value))
            elif name == "expect":
                if v == "100-continue":
                    req.expect_continue = True
            elif name == "accept-encoding":
                for enc in v.split(","):
                    enc = enc.strip()
                    if enc == "identity;q=0" or (enc == "*;q=0" and "identity" not in v):
                        raise HttpParseError("Invalid header. Reason: Invalid value. Key:Accept-Encoding; Value:%s" % enc)
        if length > self.server.payload_limit:
            raise HttpParseError("Request payload with size %d is larger than the limit of %d allowed by server."
                                 % (length, self.server.payload_limit))
        if length > 0:
            if req.expect_continue:
                self._send(Response(100).encode(self.server.server_name))
            while len(self.buf) < length:
                self._fill()
            req.body = bytes(self.buf[:length])
            del self.buf[:length]
        return req


# --------------------------------------------------------------------------
# Hybrid vsock

VSOCK_HOST_PORT_BASE = 1 << 30
VSOCK_CONNECT_TIMEOUT = 2.0
VSOCK_MAX_HANDSHAKE = 64


class HybridVsock:
    """The host side of a virtio-vsock device proxied through Unix sockets.

    guest is consulted for each host-initiated connection through
    guest.vsock_endpoint(port) -> callable(sock, initial_bytes) or None, and
    guest.wait_running(timeout) -> bool."""

    def __init__(self, uds_path, cid, log=None):
        self.uds_path = uds_path
        self.cid = cid
        self.log = log
        self.listener = None
        self.guest = None
        self.lock = threading.Lock()
        self.next_port = VSOCK_HOST_PORT_BASE
        self.conns = set()
        self.closed = False

    def bind(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.bind(self.uds_path)
            s.listen(128)
        except OSError:
            s.close()
            raise
        self.listener = s

    def start(self, guest):
        self.guest = guest
        t = threading.Thread(target=self._accept_loop, name="vsock-accept", daemon=True)
        t.start()

    def attach(self, guest):
        self.guest = guest

    def close(self):
        self.closed = True
        if self.listener:
            try:
                self.listener.close()
            except OSError:
                pass
        self.reset_all()

    def reset_all(self):
        """Drops every open connection (device reset)."""
        with self.lock:
            conns = list(self.conns)
            self.conns.clear()
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            try:
                c.close()
            except OSError:
                pass

    def track(self, sock):
        with self.lock:
            self.conns.add(sock)

    def untrack(self, sock):
        with self.lock:
            self.conns.discard(sock)

    def _accept_loop(self):
        while not self.closed:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                if self.closed:
                    return
                time.sleep(0.01)
                continue
            self.track(conn)
            threading.Thread(target=self._serve_host, args=(conn,), daemon=True).start()

    def _serve_host(self, conn):
        try:
            self._handshake_and_serve(conn)
        except OSError:
            pass
        finally:
            self.untrack(conn)
            try:
                conn.close()
            except OSError:
                pass

    def _handshake_and_serve(self, conn):
        conn.settimeout(VSOCK_CONNECT_TIMEOUT)
        buf = b""
        try:
            while b"\n" not in buf:
                data = conn.recv(VSOCK_MAX_HANDSHAKE)
                if not data:
                    return
                buf += data
                if len(buf) > VSOCK_MAX_HANDSHAKE and b"\n" not in buf:
                    return
        except socket.timeout:
            return
        line, rest = buf.split(b"\n", 1)
        words = line.decode("ascii", "replace").split()
        if len(words) != 2 or words[0].lower() != "connect":
            return
        try:
            port = int(words[1])
        except ValueError:
            return
        if port < 0 or port > 0xFFFFFFFF:
            return
        guest = self.guest
        if guest is None:
            return
        # The guest has to answer the request: a paused guest cannot, and
        # the request times out.
        if not guest.wait_running(VSOCK_CONNECT_TIMEOUT):
            return
        endpoint = guest.vsock_endpoint(port)
        if endpoint is None:
            if self.log:
                self.log.debug("vsock: nothing listens on guest port %d" % port)
            return
        with self.lock:
            host_port = self.next_port
            self.next_port += 1
        conn.settimeout(None)
        conn.sendall(b"OK %d\n" % host_port)
        endpoint(conn, rest)

    def connect_to_host(self, port):
        """A connection the guest opens to CID 2 port `port`."""
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect("%s_%d" % (self.uds_path, port))
        except OSError:
            s.close()
            raise
        self.track(s)
        return s


# --------------------------------------------------------------------------
# Sizes and option strings (Cloud Hypervisor's command line)


def parse_size(text):
    """'512M' / '1G' / '4096' -> bytes (powers of 1024)."""
    t = text.strip()
    mult = 1
    if t and t[-1] in "KkMmGgTt":
        mult = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}[t[-1].lower()]
        t = t[:-1]
    return int(t) * mult


def parse_options(text):
    """'a=1,b=2' -> {'a': '1', 'b': '2'}; a bare word is {'word': None}.

    Brackets keep commas inside a value (topology=1:2:1:1 or [1,2])."""
    out = {}
    depth = 0
    cur = ""
    items = []
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        if ch == "," and depth == 0:
            items.append(cur)
            cur = ""
        else:
            cur += ch
    if cur:
        items.append(cur)
    for item in items:
        if "=" in item:
            k, v = item.split("=", 1)
            out[k.strip()] = v.strip()
        else:
            out[item.strip()] = None
    return out


def toggle(value):
    if value is None:
        return True
    v = value.lower()
    if v in ("on", "true", "yes", "1"):
        return True
    if v in ("off", "false", "no", "0"):
        return False
    raise ValueError("invalid toggle value %r" % value)


def ensure_errno(err, code):
    return isinstance(err, OSError) and err.errno == code


__all__ = [
    "os_error_text", "Log", "hard_exit", "parse_cmdline", "cmdline_get",
    "SerdeError", "Schema", "check", "parse_json",
    "MicroHttpServer", "Request", "Response", "HttpParseError",
    "HybridVsock", "parse_size", "parse_options", "toggle", "errno",
]
