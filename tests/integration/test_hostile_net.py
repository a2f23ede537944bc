"""What an adversarial test of the server found (issue 16), each a regression
test that failed before its fix: workers orphaned by a killed supervisor,
connections left hanging during the drain, --max-connections not held,
HTTP/1.1 target and Host rules, streams cut by the drain timeout without an
end, SIGTERM ignored while models load, GET /v1/models/{id}, and CORS
preflights of the official openai client."""
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from hearth_test import SHARED, Conn, Server, connect, request, run, sanitizer_build  # noqa: E402


def raw_exchange(port, raw):
    """Sends raw bytes on a fresh connection and reads one response."""
    with Conn(port) as c:
        c.send(raw)
        return c.response()


def test_http11_target_and_host_rules():
    with Server() as srv:
        # absolute-form (RFC 9112 3.2.2): routed by its path and query
        st, _, body = raw_exchange(srv.port, b"GET http://localhost/health HTTP/1.1\r\nHost: localhost\r\n\r\n")
        assert st == 200 and json.loads(body) == {"status": "ok"}, (st, body)
        st, _, body = raw_exchange(srv.port, b"GET http://example.com:9/health?x=1 HTTP/1.1\r\nHost: a\r\n\r\n")
        assert st == 200, (st, body)
        st, _, _ = raw_exchange(srv.port, b"GET http://localhost/nothing HTTP/1.1\r\nHost: a\r\n\r\n")
        assert st == 404
        # HTTP/1.1 without Host, or with two: 400 and close
        for raw in (b"GET /health HTTP/1.1\r\n\r\n",
                    b"GET /health HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
                    b"GET /health HTTP/1.1\r\nHost: a b\r\n\r\n"):
            c = Conn(srv.port)
            c.send(raw)
            st, h, body = c.response()
            assert st == 400, (raw, st, body)
            err = json.loads(body)["error"]
            assert "Host" in err["message"], err
            assert c.is_closed(), raw
            c.close()
        # HTTP/1.0 without Host stays fine
        st, _, body = raw_exchange(srv.port, b"GET /health HTTP/1.0\r\n\r\n")
        assert st == 200, (st, body)


def held_open(socks, wait=0.5):
    """How many of socks the server still holds after wait seconds (the others got EOF or a reset)."""
    time.sleep(wait)
    n = 0
    for s in socks:
        s.setblocking(False)
        try:
            n += s.recv(1) != b""  # data would be a surprise: counted as open
        except BlockingIOError:
            n += 1
        except OSError:
            pass
    return n


def test_max_connections_holds_at_any_value():
    for extra in ([], ["--io-threads", "2"]):
        with Server("--max-connections", "8", *extra) as srv:
            time.sleep(0.2)  # the readiness probe's connection has gone
            socks = [connect(srv.port) for _ in range(20)]
            held = held_open(socks)
            assert held <= 8, "%d of 20 idle connections held with --max-connections 8 %s" % (held, extra)
            assert held >= 6, held  # and the limit is not far below what was asked
            # closing some makes room again
            for s in socks:
                s.close()
            time.sleep(0.3)
            conns = [Conn(srv.port) for _ in range(8)]
            for c in conns:
                c.send(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
                assert c.response()[0] == 200
            extra_conn = connect(srv.port)
            assert held_open([extra_conn], 0.3) == 0, "a 9th connection was kept"
            extra_conn.close()
            for c in conns:
                c.close()
            srv.wait_log("max-connections 8 reached")
    # per process: two workers hold at most 8 each, whichever accepted and handed over
    with Server("--max-connections", "8", "--workers", "2") as srv:
        time.sleep(0.3)
        socks = [connect(srv.port) for _ in range(30)]
        held = held_open(socks)
        assert 8 < held <= 16, "%d of 30 idle connections held by 2 workers with --max-connections 8" % held
        for s in socks:
            s.close()


def alive(pid):
    """True while pid runs (a zombie waiting for its reaper counts as gone)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def port_bindable(port):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as hearth binds
    try:
        s.bind(("127.0.0.1", port))
        s.listen(1)
        return True
    except OSError:
        return False
    finally:
        s.close()


def test_workers_die_with_a_killed_supervisor():
    for extra in ([], ["--spawn"]):
        srv = Server("--workers", "2", *extra)
        deadline = time.time() + 10
        while True:
            pids = [int(p) for p in subprocess.run(["pgrep", "-P", str(srv.proc.pid)], capture_output=True,
                                                   text=True).stdout.split()]
            if len(pids) == 2 or time.time() > deadline:
                break
            time.sleep(0.05)
        assert len(pids) == 2, pids
        srv.proc.kill()
        srv.proc.wait()
        t0 = time.time()
        while time.time() - t0 < 2 and (any(alive(p) for p in pids) or not port_bindable(srv.port)):
            time.sleep(0.05)
        left = [p for p in pids if alive(p)]
        for p in left:
            os.kill(p, signal.SIGKILL)
        assert not left, "workers %s %s still running 2 s after the supervisor was killed" % (left, extra)
        assert port_bindable(srv.port), "port %d still held" % srv.port
        srv.stop()


def refused_within(port, seconds):
    """Seconds until a new connection is refused or cut without an answer; None if it never is."""
    t0 = time.time()
    while time.time() - t0 < seconds:
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=seconds)
        except (ConnectionRefusedError, ConnectionResetError):
            # reset during the handshake: the listener closed with the SYN queued, a refusal too
            return time.time() - t0
        try:
            s.settimeout(max(0.01, seconds - (time.time() - t0)))
            s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            data = s.recv(4096)
            if not data or (data.startswith(b"HTTP/1.1 503") and b"connection: close" in data.lower()):
                return time.time() - t0
        except (ConnectionResetError, BrokenPipeError):
            return time.time() - t0
        except (socket.timeout, TimeoutError):
            pass
        finally:
            s.close()
        time.sleep(0.01)
    return None


def test_no_connection_hangs_during_the_drain():
    # 200 ms, the bound; the sanitizer build on a busy 2-core machine gets 1 s (before
    # the fix a connect waited for the whole 2.5 s request in flight)
    limit = 1.0 if sanitizer_build() else 0.2
    for extra in ([], ["--io-threads", "2"], ["--workers", "2"]):
        srv = Server("--debug-routes", *extra)
        c = Conn(srv.port)
        c.send(b"GET /debug/sleep?ms=2500 HTTP/1.1\r\nHost: x\r\n\r\n")
        time.sleep(0.2)
        srv.proc.send_signal(signal.SIGTERM)
        took = refused_within(srv.port, limit)
        assert took is not None, "a connect during the drain got no answer within %.0f ms %s" % (limit * 1000, extra)
        # the request in flight still completes
        st, h, body = c.response()
        assert st == 200 and json.loads(body) == {"slept_ms": 2500}, (st, body)
        c.close()
        assert srv.proc.wait(10) == 0, srv.log
        srv.stop()
        print("# %s: refused %.0f ms after SIGTERM" % (extra or "one process", took * 1000))


def test_stop_while_models_load():
    """A loader that blocks (a --model path that is a FIFO opens only once a
    writer comes) must not keep SIGTERM or SIGINT from stopping the process.
    Where the loader refuses a FIFO at once with a clear error, that passes too."""
    with tempfile.TemporaryDirectory() as d:
        fifo = os.path.join(d, "model.gguf")
        os.mkfifo(fifo)
        for sig in (signal.SIGTERM, signal.SIGINT):
            for extra in ([], ["--workers", "2"]):
                srv = Server("--model", fifo, "--drain-timeout", "1000", *extra, wait_ready=False)
                deadline = time.time() + 1.5
                while time.time() < deadline and srv.proc.poll() is None:
                    time.sleep(0.05)
                if srv.proc.poll() is not None:  # refused at once: it must say why
                    assert srv.proc.returncode != 0, srv.log
                    assert "model.gguf" in srv.log, srv.log
                    srv.stop()
                    continue
                # still loading: /health says so, and the signal ends it
                st, _, _ = request(srv.port, "GET", "/health") if not extra else (503, None, None)
                assert st == 503, st
                t0 = time.time()
                srv.proc.send_signal(sig)
                try:
                    srv.proc.wait(3)
                except subprocess.TimeoutExpired:
                    srv.proc.kill()
                    srv.proc.wait()
                    raise AssertionError("still running 3 s after %s while loading %s; log:\n%s" % (sig, extra, srv.log))
                srv.stop()
                assert "still loading" in srv.log, srv.log
                print("# %s while loading %s: stopped in %.2f s" % (signal.Signals(sig).name, extra or "", time.time() - t0))


def read_events(body):
    return [json.loads(line[6:]) for line in body.decode().split("\n") if line.startswith("data: {")]


def test_drain_timeout_ends_streams_properly():
    srv = Server("--debug-routes", "--drain-timeout", "300")
    stream = Conn(srv.port)
    stream.send(b"GET /debug/stream?n=100000&ms=10 HTTP/1.1\r\nHost: x\r\n\r\n")
    waiting = Conn(srv.port)
    waiting.send(b"GET /debug/sleep?ms=20000 HTTP/1.1\r\nHost: x\r\n\r\n")
    time.sleep(0.3)
    srv.proc.send_signal(signal.SIGTERM)
    # the stream ends with an error event and the chunked terminator (response() reads up to it)
    st, h, body = stream.response()
    assert st == 200 and h["transfer-encoding"] == "chunked", (st, h)
    events = read_events(body)
    assert len(events) > 5 and "i" in events[0], events[:3]
    err = events[-1].get("error")
    assert err and err["code"] == 503 and err["type"] == "unavailable_error" and "drain timeout" in err["message"], events[-1]
    assert stream.is_closed(2)
    # a deferred request that had not begun gets a 503 JSON error
    st, h, body = waiting.response()
    assert st == 503 and h.get("connection") == "close", (st, h)
    assert json.loads(body)["error"]["code"] == 503
    rc = srv.proc.wait(10)
    assert rc == 0, "exit status %s; log:\n%s" % (rc, srv.log[-3000:])
    srv.stop()
    assert "closed by the server (drain timeout)" in srv.log, srv.log
    assert "GET /debug/stream closed by client" not in srv.log, srv.log


def test_stop_with_busy_streams_exits_cleanly():
    # Threads writing a stream every millisecond when the drain times out: the
    # process must wait for them before freeing its loops. Before the fix a
    # thread woke into freed queues and the exit status was -11 in about one
    # stop of seven, so ten stops catch it most of the time.
    for k in range(10):
        srv = Server("--debug-routes", "--drain-timeout", "100")
        conns = [Conn(srv.port) for _ in range(16)]
        for c in conns:
            c.send(b"GET /debug/stream?n=100000&ms=1 HTTP/1.1\r\nHost: x\r\n\r\n")
        time.sleep(0.2)
        srv.proc.send_signal(signal.SIGTERM)
        rc = srv.proc.wait(10)
        srv.stop()
        assert rc == 0, "stop %d: exit status %s; log:\n%s" % (k, rc, srv.log[-2000:])


def test_drain_timeout_ends_a_generation_stream():
    srv = Server("--demo", "--drain-timeout", "200", timeout=120)
    c = Conn(srv.port)
    body = json.dumps({"messages": [{"role": "user", "content": "hi"}], "stream": True, "max_tokens": 100000,
                       "ignore_eos": True, "temperature": 0}).encode()
    c.send(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
           b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
    # wait for the head and the first tokens
    while b"data: " not in c.buf:
        c._fill()
    srv.proc.send_signal(signal.SIGTERM)
    st, h, body = c.response()
    assert st == 200, st
    events = read_events(body)
    assert events and "error" in events[-1], body[-300:]
    assert "drain timeout" in events[-1]["error"]["message"], events[-1]
    assert srv.proc.wait(10) == 0
    srv.stop()
    assert "closed by the server (drain timeout)" in srv.log, srv.log[-2000:]


def test_models_retrieve():
    stories = os.path.join(SHARED, "models", "stories260K", "stories260K.gguf")
    # clients percent-encode an id in the path (openai's encodeURIComponent): "tiny 260K+" -> "tiny%20260K%2B"
    with Server("--model", "tiny 260K+=" + stories, "--model", "plain=" + stories, timeout=60) as srv:
        st, _, body = request(srv.port, "GET", "/v1/models")
        assert st == 200, body
        listed = {m["id"]: m for m in json.loads(body)["data"]}
        assert set(listed) == {"tiny 260K+", "plain"}, listed
        for path, want in (("/v1/models/plain", "plain"), ("/v1/models/tiny%20260K%2B", "tiny 260K+"),
                           ("/v1/models/tiny%20260K%2b", "tiny 260K+"), ("http://h/v1/models/plain", "plain")):
            st, h, body = request(srv.port, "GET", path)
            assert st == 200 and h["content-type"].startswith("application/json"), (path, st, body)
            assert json.loads(body) == listed[want], (path, body, listed[want])
        for path in ("/v1/models/nope", "/v1/models/plain%00", "/v1/models/plain/x", "/v1/models/%zz",
                     "/v1/models/" + "x" * 300):
            st, h, body = request(srv.port, "GET", path)
            assert st == 404, (path, st)
            err = json.loads(body)["error"]
            assert err["code"] == 404 and err["type"] == "not_found_error", err
            assert path[len("/v1/models/"):][:100] in err["message"], err
        st, h, _ = request(srv.port, "POST", "/v1/models/plain", body=b"{}")
        assert st == 405 and h["allow"] == "GET, HEAD", (st, h)
        st, h, body = request(srv.port, "HEAD", "/v1/models/plain")
        assert st == 200 and body == b"", (st, body)
        assert request(srv.port, "GET", "/v1/models/")[0] == 404  # no id at all


STAINLESS = ("authorization, content-type, x-stainless-arch, x-stainless-lang, x-stainless-os, "
             "x-stainless-package-version, x-stainless-retry-count, x-stainless-runtime, "
             "x-stainless-runtime-version, x-stainless-timeout")


def preflight(port, path, origin="http://app.test", asked=STAINLESS):
    h = {"Origin": origin, "Access-Control-Request-Method": "POST"}
    if asked is not None:
        h["Access-Control-Request-Headers"] = asked
    return request(port, "OPTIONS", path, headers=h)


def test_cors_preflight_of_the_openai_client():
    for extra in ([], ["--api-key", "s3cret"]):
        with Server("--cors-origin", "http://app.test", *extra) as srv:
            # the browser's preflight for openai's chat.completions.create
            st, h, _ = preflight(srv.port, "/v1/chat/completions")
            assert st == 200, (st, h, extra)
            assert h["access-control-allow-origin"] == "http://app.test", h
            allowed = {x.strip().lower() for x in h["access-control-allow-headers"].split(",")}
            assert allowed >= {x.strip() for x in STAINLESS.split(",")}, h
            assert "POST" in h["access-control-allow-methods"], h
            # never a 401 for a preflight: it carries no credentials, on any path
            for path in ("/v1/models", "/v1/models/x", "/nope"):
                st, h, _ = preflight(srv.port, path)
                assert st != 401, (path, st, extra)
            # a list that is not header names is not echoed
            for bad in ("x-a x-b", "x-a;x-b", "x-\u00e9", "x-a:1"):
                st, h, _ = preflight(srv.port, "/v1/models", asked=bad)
                assert st == 200 and h["access-control-allow-headers"] == "Authorization, Content-Type", (bad, h)
            # nor for another origin
            st, h, _ = preflight(srv.port, "/v1/models", origin="http://evil.test")
            assert h["access-control-allow-headers"] == "Authorization, Content-Type", h
            # the request itself still wants the key (the model list is public, as llama-server's)
            if extra:
                st, _, _ = request(srv.port, "POST", "/v1/chat/completions", body=b"{}",
                                   headers={"Origin": "http://app.test"})
                assert st == 401
    # with a key but CORS off: still no 401 for a preflight
    with Server("--api-key", "s3cret", "--no-cors") as srv:
        st, h, _ = preflight(srv.port, "/v1/models")
        assert st == 204 and "access-control-allow-origin" not in h, (st, h)


if __name__ == "__main__":
    run([
        test_http11_target_and_host_rules,
        test_max_connections_holds_at_any_value,
        test_workers_die_with_a_killed_supervisor,
        test_no_connection_hangs_during_the_drain,
        test_stop_while_models_load,
        test_drain_timeout_ends_streams_properly,
        test_stop_with_busy_streams_exits_cleanly,
        test_drain_timeout_ends_a_generation_stream,
        test_models_retrieve,
        test_cors_preflight_of_the_openai_client,
    ])
