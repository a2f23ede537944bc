"""HTTP/1.1 behaviour of `hearth serve` with real clients: keep-alive,
pipelining, chunked bodies, Expect: 100-continue, HEAD, SSE, errors as JSON.
Each protocol test runs on both pollers (epoll and the portable poll)."""
import http.client
import json
import os
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from hearth_test import Conn, Server, request, run  # noqa: E402

POLLERS = ["epoll", "poll"]


def check_error_json(body, code):
    doc = json.loads(body)
    err = doc["error"]
    assert err["code"] == code, doc
    assert isinstance(err["type"], str) and err["type"], doc
    assert isinstance(err["message"], str) and err["message"], doc
    return err


def test_health_models_and_headers():
    for poller in POLLERS:
        with Server("--poller", poller) as srv:
            st, h, body = request(srv.port, "GET", "/health")
            assert st == 200 and json.loads(body) == {"status": "ok"}, (st, body)
            assert h["content-type"] == "application/json"
            assert "date" in h and h["server"] == "hearth"
            st, h, body = request(srv.port, "GET", "/v1/models")
            assert st == 200 and json.loads(body) == {"object": "list", "data": []}, body
            st, h, body = request(srv.port, "HEAD", "/health")
            assert st == 200 and h["content-length"] == "15", h


def test_404_405_json():
    with Server() as srv:
        st, h, body = request(srv.port, "GET", "/nope")
        assert st == 404, st
        check_error_json(body, 404)
        st, h, body = request(srv.port, "POST", "/health", body=b"{}")
        assert st == 405, st
        assert "GET" in h["allow"], h
        check_error_json(body, 405)


def test_keep_alive_with_http_client():
    for poller in POLLERS:
        with Server("--poller", poller) as srv:
            conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
            for i in range(50):
                conn.request("GET", "/health")
                r = conn.getresponse()
                assert r.status == 200 and r.read() == b'{"status":"ok"}'
            # the same socket served all of them
            assert conn.sock is not None
            conn.close()


def test_keep_alive_with_curl():
    with Server() as srv:
        url = "http://127.0.0.1:%d/health" % srv.port
        out = subprocess.run(["curl", "-sv", url, url, url], capture_output=True, text=True, timeout=20)
        assert out.returncode == 0, out.stderr
        assert out.stdout == '{"status":"ok"}' * 3, out.stdout
        assert "Re-using existing connection" in out.stderr or "Reusing existing connection" in out.stderr, out.stderr


def test_pipelining_keeps_order_across_deferred_replies():
    for poller in POLLERS:
        with Server("--poller", poller, "--debug-routes") as srv:
            s = Conn(srv.port)
            reqs = b""
            for i in range(10):
                if i == 3:
                    reqs += b"GET /debug/sleep?ms=200 HTTP/1.1\r\nHost: x\r\n\r\n"
                else:
                    body = ("body-%d" % i).encode()
                    reqs += b"POST /debug/echo HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
            s.send(reqs)
            for i in range(10):
                st, h, body = s.response()
                assert st == 200, (i, st)
                if i == 3:
                    assert json.loads(body) == {"slept_ms": 200}, body
                else:
                    assert body == ("body-%d" % i).encode(), (i, body)
            s.close()


def test_chunked_request_body():
    for poller in POLLERS:
        with Server("--poller", poller, "--debug-routes") as srv:
            payload = bytes(range(256)) * 40
            s = Conn(srv.port)
            head = b"POST /debug/echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
            enc = b""
            for off in range(0, len(payload), 1000):
                part = payload[off:off + 1000]
                enc += b"%x;ext=1\r\n%s\r\n" % (len(part), part)
            enc += b"0\r\nX-Trailer: yes\r\n\r\n"
            data = head + enc
            for i in range(0, len(data), 777):  # arrive in odd pieces
                s.send(data[i:i + 777])
                time.sleep(0.001)
            st, h, body = s.response()
            assert st == 200 and body == payload, (st, len(body))
            assert h["x-body-length"] == str(len(payload))
            s.close()


def test_chunked_upload_with_curl():
    with Server("--debug-routes") as srv:
        out = subprocess.run(["curl", "-s", "-H", "Transfer-Encoding: chunked", "--data-binary", "@-",
                              "http://127.0.0.1:%d/debug/echo" % srv.port], input=b"x" * 100000,
                             capture_output=True, timeout=20)
        assert out.returncode == 0 and out.stdout == b"x" * 100000, (out.returncode, len(out.stdout))


def test_expect_100_continue():
    with Server("--debug-routes") as srv:
        s = Conn(srv.port)
        s.send(b"POST /debug/echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n")
        st, h, rest = s.response()
        assert st == 100, st
        s.send(b"hello")
        st, h, body = s.response()
        assert st == 200 and body == b"hello", (st, body)
        s.close()


def test_http10_closes_unless_keep_alive():
    with Server() as srv:
        s = Conn(srv.port)
        s.send(b"GET /health HTTP/1.0\r\n\r\n")
        st, h, body = s.response()
        assert st == 200 and h.get("connection", "").lower() == "close", h
        assert s.is_closed()
        s.close()
        s = Conn(srv.port)
        s.send(b"GET /health HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
        st, h, body = s.response()
        assert h.get("connection", "").lower() == "keep-alive", h
        s.send(b"GET /health HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
        st, h, body = s.response()
        assert st == 200
        s.close()


def test_sse_stream():
    for poller in POLLERS:
        with Server("--poller", poller, "--debug-routes") as srv:
            s = Conn(srv.port)
            s.send(b"GET /debug/stream?n=5&ms=5 HTTP/1.1\r\nHost: x\r\n\r\n")
            st, h, body = s.response()
            assert st == 200 and h["content-type"] == "text/event-stream", h
            assert h["transfer-encoding"] == "chunked"
            events = [e for e in body.decode().split("\n\n") if e]
            assert events == ['data: {"i":%d}' % i for i in range(5)] + ["data: [DONE]"], events
            # the connection is still usable afterwards
            s.send(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            st, h, body = s.response()
            assert st == 200
            s.close()


def test_sse_with_curl_no_buffer():
    with Server("--debug-routes") as srv:
        out = subprocess.run(["curl", "-sN", "http://127.0.0.1:%d/debug/stream?n=3&ms=1" % srv.port],
                             capture_output=True, text=True, timeout=20)
        assert out.stdout.count("data: ") == 4 and out.stdout.endswith("data: [DONE]\n\n"), out.stdout


def test_client_disconnect_mid_stream_and_mid_request():
    with Server("--debug-routes") as srv:
        s = Conn(srv.port)
        s.send(b"GET /debug/stream?n=1000&ms=10 HTTP/1.1\r\nHost: x\r\n\r\n")
        s.sock.recv(100)
        s.close()
        srv.wait_log(r"closed by client before the response ended")
        # half a body, then gone
        s = Conn(srv.port)
        s.send(b"POST /debug/echo HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nabc")
        s.close()
        s = Conn(srv.port)
        s.send(b"POST /debug/echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab")
        s.close()
        time.sleep(0.1)
        st, _, _ = request(srv.port, "GET", "/health")
        assert st == 200


def scrape(port):
    st, h, body = request(port, "GET", "/metrics")
    assert st == 200 and h["content-type"].startswith("text/plain"), h
    vals = {}
    for line in body.decode().splitlines():
        if line and not line.startswith("#"):
            k, v = line.rsplit(" ", 1)
            vals[k] = float(v)
    return vals, body.decode()


def test_metrics_prometheus():
    with Server() as srv:
        health = 'hearth_http_requests_total{route="/health",method="GET",status="200"}'
        before, _ = scrape(srv.port)
        for _ in range(7):
            request(srv.port, "GET", "/health")
        request(srv.port, "GET", "/missing")
        vals, text = scrape(srv.port)
        assert vals[health] == before[health] + 7, text
        assert vals['hearth_http_requests_total{route="unmatched",method="",status="404"}'] == 1, text
        assert vals['hearth_http_requests_total{route="/metrics",method="GET",status="200"}'] == 1, text
        assert vals["hearth_http_connections_open"] >= 1
        assert vals["hearth_http_requests_in_flight"] >= 1  # this request
        assert vals['hearth_http_request_duration_seconds_bucket{le="+Inf"}'] == vals["hearth_http_request_duration_seconds_count"]
        assert vals["hearth_http_request_duration_seconds_count"] >= before[health] + 9
        assert "# TYPE hearth_http_request_duration_seconds histogram" in text


def test_wrk_load_no_errors():
    with Server("--io-threads", "2", "--log-level", "warn") as srv:
        out = subprocess.run(["wrk", "-t2", "-c32", "-d2s", "http://127.0.0.1:%d/health" % srv.port],
                             capture_output=True, text=True, timeout=30)
        assert out.returncode == 0, out.stderr
        assert "Non-2xx" not in out.stdout and "Socket errors" not in out.stdout, out.stdout
        reqs = int(out.stdout.split("requests in")[0].split()[-1])
        assert reqs > 1000, out.stdout


if __name__ == "__main__":
    run([test_health_models_and_headers, test_404_405_json, test_keep_alive_with_http_client,
         test_keep_alive_with_curl, test_pipelining_keeps_order_across_deferred_replies, test_chunked_request_body,
         test_chunked_upload_with_curl, test_expect_100_continue, test_http10_closes_unless_keep_alive,
         test_sse_stream, test_sse_with_curl_no_buffer, test_client_disconnect_mid_stream_and_mid_request,
         test_metrics_prometheus, test_wrk_load_no_errors])
