"""Every limit of the HTTP server and its status code, with JSON error bodies:
request line (431), head size (431), header count (431), body (413), malformed
and conflicting framing (400 and close), slow clients (408 and close), idle
keep-alive timeout. Limits are lowered by flags (and one by an environment
variable) so the tests stay fast; the defaults are checked too."""
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from hearth_test import Conn, Server, request, run  # noqa: E402


def expect_error(c, status):
    st, h, body = c.response()
    assert st == status, (st, body)
    assert h["content-type"] == "application/json", h
    err = json.loads(body)["error"]
    assert err["code"] == status and err["message"], err
    return err


def send_expect_close(port, raw, status):
    c = Conn(port)
    c.send(raw)
    err = expect_error(c, status)
    assert c.is_closed(), "connection left open after %d" % status
    c.close()
    return err


def test_default_limits():
    with Server() as srv:
        # request line: 8 KiB
        send_expect_close(srv.port, b"GET /" + b"a" * 8200 + b" HTTP/1.1\r\nHost: x\r\n\r\n", 431)
        st, _, _ = request(srv.port, "GET", "/health?" + "a" * 8000)
        assert st == 200
        # head: 64 KiB
        big = b"".join(b"X-Pad-%d: %s\r\n" % (i, b"v" * 1000) for i in range(70))
        send_expect_close(srv.port, b"GET /health HTTP/1.1\r\nHost: x\r\n" + big + b"\r\n", 431)
        # fields: 100
        many = b"".join(b"X-H%d: 1\r\n" % i for i in range(101))
        send_expect_close(srv.port, b"GET /health HTTP/1.1\r\n" + many + b"\r\n", 431)
        ok = b"".join(b"X-H%d: 1\r\n" % i for i in range(99))
        c = Conn(srv.port)
        c.send(b"GET /health HTTP/1.1\r\nHost: x\r\n" + ok + b"\r\n")
        assert c.response()[0] == 200
        c.close()
        # body: 16 MiB by Content-Length is refused before the body is read
        err = send_expect_close(srv.port, b"POST /health HTTP/1.1\r\nHost: x\r\nContent-Length: 16777217\r\n\r\n", 413)
        assert "16777216" in err["message"], err


def test_lowered_limits_by_flag_and_env():
    with Server("--max-request-line", "256", "--max-headers", "5", "--debug-routes",
                env={"HEARTH_MAX_BODY": "1K"}) as srv:
        send_expect_close(srv.port, b"GET /" + b"a" * 300 + b" HTTP/1.1\r\n\r\n", 431)
        send_expect_close(srv.port, b"GET /health HTTP/1.1\r\n" + b"".join(b"A%d: 1\r\n" % i for i in range(6)) + b"\r\n", 431)
        st, _, body = request(srv.port, "POST", "/debug/echo", body=b"x" * 1024)
        assert st == 200 and len(body) == 1024
        st, _, _ = request(srv.port, "POST", "/debug/echo", body=b"x" * 1025)
        assert st == 413, st
        # chunked bodies are held to the same limit while they stream in
        c = Conn(srv.port)
        c.send(b"POST /debug/echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" + b"200\r\n" + b"y" * 512 + b"\r\n")
        c.send(b"300\r\n" + b"y" * 768 + b"\r\n0\r\n\r\n")
        expect_error(c, 413)
        assert c.is_closed()
        c.close()


def test_malformed_and_conflicting_framing():
    with Server("--debug-routes") as srv:
        cases = [
            b"GET /health HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
            b"POST /debug/echo HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!",
            b"POST /debug/echo HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
            b"GET /health HTTP/1.1\r\nBad Header: x\r\n\r\n",
            b"GET /health HTTP/1.1\r\n folded: x\r\n\r\n",
            b"NOT A REQUEST\r\n\r\n",
            b"GET /health HTTP/1.1\nHost: x\n\n",
            b"POST /debug/echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        ]
        for raw in cases:
            send_expect_close(srv.port, raw, 400)
        send_expect_close(srv.port, b"GET /health HTTP/2.0\r\n\r\n", 505)
        send_expect_close(srv.port, b"POST /debug/echo HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", 501)
        # the server is unharmed
        assert request(srv.port, "GET", "/health")[0] == 200


def test_slow_client_gets_408_and_close():
    with Server("--header-timeout", "400", "--debug-routes") as srv:
        c = Conn(srv.port)
        t0 = time.time()
        c.send(b"GET /health HTTP/1.1\r\nHost: x\r\n")  # never finishes its head
        expect_error(c, 408)
        assert c.is_closed()
        assert 0.3 < time.time() - t0 < 3, time.time() - t0
        c.close()
        # a body that stalls is timed out too
        c = Conn(srv.port)
        c.send(b"POST /debug/echo HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc")
        expect_error(c, 408)
        c.close()
        # trickling bytes does not extend the deadline (slowloris)
        c = Conn(srv.port)
        t0 = time.time()
        try:
            for ch in b"GET /health HTTP/1.1\r\nX-Slow: " + b"a" * 200:  # 4.5 s if never cut off
                c.send(bytes([ch]))
                time.sleep(0.02)
        except (BrokenPipeError, ConnectionResetError):
            pass
        assert time.time() - t0 < 2.5, time.time() - t0


def test_idle_keep_alive_timeout():
    with Server("--idle-timeout", "300") as srv:
        c = Conn(srv.port)
        c.send(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        assert c.response()[0] == 200
        t0 = time.time()
        assert c.is_closed(timeout=5)
        assert 0.2 < time.time() - t0 < 3, time.time() - t0
        c.close()


if __name__ == "__main__":
    run([test_default_limits, test_lowered_limits_by_flag_and_env, test_malformed_and_conflicting_framing,
         test_slow_client_gets_408_and_close, test_idle_keep_alive_timeout])
