"""hearth_test: the harness of hearth's Python test suites.

Starts a real `hearth serve` (the binary in $HEARTH_BIN) on a free port,
reads its log, and runs test functions, printing one TAP-style line each
("ok - name" / "not ok - name"), which tests/run.sh counts. A failing check
raises AssertionError with a message; the traceback and the server's log
tail are printed to stderr.
"""
import json
import atexit
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback

BIN = os.environ.get("HEARTH_BIN") or os.path.join(os.path.dirname(__file__), "..", "..", "build", "hearth")
SHARED = os.environ.get("HEARTH_SHARED") or os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared")


_started = []
_scratch = []


@atexit.register
def _kill_leftovers():
    """A test that failed half-way must not leave its server running, nor
    its scratch folders behind (a demo model is ~90 MB: a few dozen runs of
    the suite that left theirs filled a disk)."""
    for p in _started:
        if p.poll() is None:
            p.kill()
            p.wait()
    for d in _scratch:
        shutil.rmtree(d, ignore_errors=True)


def scratch_dir(prefix):
    """A fresh folder under $TMPDIR, removed when the suite exits, after its
    servers are stopped. (tests/run.sh also gives each suite a TMPDIR of its
    own and removes it, for a suite killed before its atexit runs.)"""
    d = tempfile.mkdtemp(prefix=prefix)
    _scratch.append(d)
    return d


class Server:
    """A hearth serve process; its stderr is collected in self.log."""

    def __init__(self, *args, env=None, wait_ready=True, timeout=30):
        self.args = [BIN, "serve", "--port", str(free_port()), *args]
        # suites of the server core run without models; those that want the demos pass --demo
        e = dict(os.environ, HEARTH_DEMO="0")
        e.update(env or {})
        self.proc = subprocess.Popen(self.args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=e,
                                     stdin=subprocess.DEVNULL)
        self.lines = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        _started.append(self.proc)
        self.port = int(self.args[3])
        self._reader.start()
        if wait_ready:
            try:
                self.wait_health(timeout)
            except BaseException:
                self.proc.kill()
                self.proc.wait()
                raise

    def _read(self):
        for raw in self.proc.stdout:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            self.lines.append(line)

    @property
    def log(self):
        return "\n".join(self.lines)

    def wait_log(self, pattern, timeout=10):
        deadline = time.time() + timeout
        while time.time() < deadline:
            for line in list(self.lines):
                if re.search(pattern, line):
                    return line
            time.sleep(0.02)
        raise AssertionError("log never matched %r; log tail:\n%s" % (pattern, "\n".join(self.lines[-30:])))

    def wait_health(self, timeout=30):
        deadline = time.time() + timeout
        while time.time() < deadline:
            try:
                status, _, _ = request(self.port, "GET", "/health")
                if status == 200:
                    return
            except OSError:
                pass
            if self.proc.poll() is not None:
                raise AssertionError("server exited with %s; log:\n%s" % (self.proc.returncode, self.log))
            time.sleep(0.05)
        raise AssertionError("server not healthy within %ss; log:\n%s" % (timeout, self.log))

    def stop(self, sig=signal.SIGTERM, timeout=20):
        """Stops the server and returns its exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError("server did not stop within %ss after signal %s" % (timeout, sig))
        self._reader.join(5)
        return self.proc.returncode

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        rc = self.stop()
        # a sanitizer report makes the process exit non-zero: surface it as a failure
        if exc[0] is None and rc != 0:
            raise AssertionError("server exited with status %s; log tail:\n%s" % (rc, "\n".join(self.lines[-40:])))
        return False


def sanitizer_build():
    """True when $HEARTH_BIN was built with ASan (memory figures mean nothing there)."""
    import json
    out = subprocess.run([BIN, "doctor"], capture_output=True, text=True, timeout=20)
    return bool(json.loads(out.stdout)["build"]["sanitizers"])


def free_port():
    """A port that was free a moment ago (the server is told it, so quiet logs still work)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def connect(port, timeout=10):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


class Conn:
    """A client connection that reads responses one at a time, keeping the
    bytes of pipelined responses that arrived early."""

    def __init__(self, port, timeout=10):
        self.sock = connect(port, timeout)
        self.buf = b""

    def send(self, data):
        self.sock.sendall(data)

    def _fill(self):
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionError("connection closed by the server; unread bytes: %r" % self.buf[:200])
        self.buf += chunk

    def _take(self, n):
        while len(self.buf) < n:
            self._fill()
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def _line(self):
        while b"\r\n" not in self.buf:
            self._fill()
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def response(self, head_only=False):
        """Reads one response; returns (status, headers with lower-case names, body bytes)."""
        while b"\r\n\r\n" not in self.buf:
            self._fill()
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        headers = {}
        for line in lines[1:]:
            k, v = line.split(":", 1)
            headers[k.strip().lower()] = v.strip()
        if head_only or status in (100, 204, 304):
            return status, headers, b""
        if "content-length" in headers:
            return status, headers, self._take(int(headers["content-length"]))
        if headers.get("transfer-encoding", "").lower() == "chunked":
            body = b""
            while True:
                size = int(self._line().split(b";")[0], 16)
                if size == 0:
                    while self._line() != b"":  # trailers, then the blank line
                        pass
                    return status, headers, body
                body += self._take(size)
                assert self._take(2) == b"\r\n", "chunk not followed by CRLF"
        while True:  # close-delimited
            try:
                self._fill()
            except ConnectionError:
                body, self.buf = self.buf, b""
                return status, headers, body

    def is_closed(self, timeout=5):
        """True when the server closes the connection (EOF) within timeout."""
        self.sock.settimeout(timeout)
        try:
            while True:
                chunk = self.sock.recv(65536)
                if not chunk:
                    return True
                self.buf += chunk
        except (socket.timeout, TimeoutError):
            return False
        except ConnectionResetError:
            return True

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def request(port, method, path, body=None, headers=None, timeout=10):
    """One request on a fresh connection; returns (status, headers, body)."""
    with Conn(port, timeout) as c:
        h = {"Host": "localhost", "Connection": "close"}
        h.update(headers or {})
        if body is not None:
            h.setdefault("Content-Length", str(len(body)))
        raw = "%s %s HTTP/1.1\r\n" % (method, path) + "".join("%s: %s\r\n" % kv for kv in h.items()) + "\r\n"
        c.send(raw.encode() + (body or b""))
        return c.response(head_only=(method == "HEAD"))


def post(port, path, doc, timeout=120, headers=None):
    """A JSON POST of doc on a fresh connection; returns (status, headers, body)."""
    h = {"Content-Type": "application/json"}
    h.update(headers or {})
    return request(port, "POST", path, body=json.dumps(doc).encode(), headers=h, timeout=timeout)


def post_json(port, path, doc, timeout=120, headers=None):
    """post's status and its body decoded as JSON."""
    st, _, out = post(port, path, doc, timeout, headers)
    return st, json.loads(out)


def get_json(port, path, headers=None, timeout=60):
    """A GET's status and its body decoded as JSON."""
    st, _, out = request(port, "GET", path, headers=headers, timeout=timeout)
    return st, json.loads(out)


def sse_events(body):
    """The data fields of a server-sent-events body, in order (JSON decoded, "[DONE]" kept as a string)."""
    out = []
    for ev in body.decode("utf-8").split("\n\n"):
        if ev.startswith("data: "):
            data = ev[len("data: "):]
            out.append(data if data == "[DONE]" else json.loads(data))
    return out


_results = {"passed": 0, "failed": 0}


def run(tests):
    """Runs each test function; prints ok/not ok lines; exits non-zero if any failed."""
    if not os.path.exists(BIN):
        print("not ok - setup: hearth binary not found at %s (build it with make)" % BIN)
        sys.exit(1)
    only = os.environ.get("HEARTH_TEST_ONLY")
    for t in tests:
        if only and only not in t.__name__:
            continue
        start = time.time()
        try:
            t()
            print("ok - %s (%.1fs)" % (t.__name__, time.time() - start), flush=True)
            _results["passed"] += 1
        except Exception:
            print("not ok - %s" % t.__name__, flush=True)
            traceback.print_exc(file=sys.stdout)
            sys.stdout.flush()
            _results["failed"] += 1
    sys.exit(1 if _results["failed"] else 0)
