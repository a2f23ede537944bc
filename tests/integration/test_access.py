"""--api-key (Bearer; /health, /metrics and the model list stay public, as
llama-server's /health, /models and /v1/models) and CORS
(on for any origin by default, as llama-server's; --cors-origin names one,
--no-cors turns it off; preflights and the allow-origin header when on)."""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from hearth_test import Server, request, run  # noqa: E402


def test_api_key():
    with Server("--api-key", "s3cret", "--debug-routes") as srv:
        assert request(srv.port, "GET", "/health")[0] == 200
        assert request(srv.port, "GET", "/metrics")[0] == 200
        assert request(srv.port, "GET", "/v1/models")[0] == 200 and request(srv.port, "GET", "/models")[0] == 200
        st, h, body = request(srv.port, "POST", "/debug/echo", body=b"x")
        assert st == 401 and h["www-authenticate"] == "Bearer", (st, h)
        assert json.loads(body)["error"]["type"] == "authentication_error"
        st, _, _ = request(srv.port, "POST", "/debug/echo", body=b"x", headers={"Authorization": "Bearer wrong"})
        assert st == 401
        st, _, _ = request(srv.port, "POST", "/debug/echo", body=b"x", headers={"Authorization": "Bearer s3cre"})
        assert st == 401  # a prefix of the key is not the key
        st, _, _ = request(srv.port, "POST", "/debug/echo", body=b"x", headers={"Authorization": "Bearer s3cret"})
        assert st == 200
        st, _, _ = request(srv.port, "POST", "/debug/echo", body=b"x", headers={"Authorization": "bearer s3cret"})
        assert st == 200
        # unknown paths do not reveal themselves to an unauthenticated client
        assert request(srv.port, "GET", "/nope")[0] == 401


def test_cors_on_by_default_off_when_asked():
    # llama-server answers CORS for every origin by default (its web UI and browser clients)
    with Server() as srv:
        st, h, _ = request(srv.port, "GET", "/health", headers={"Origin": "http://example.test"})
        assert st == 200 and h["access-control-allow-origin"] == "*", h
        st, h, _ = request(srv.port, "OPTIONS", "/v1/chat/completions", headers={
            "Origin": "http://example.test", "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "content-type"})
        # a preflight's answer names the origin (llama-server's), other answers say "*"
        assert st == 200 and h["access-control-allow-origin"] == "http://example.test", (st, h)
        assert h["access-control-allow-credentials"] == "true", h
        # any origin: llama-server's "*" (an origin named with --cors-origin gets the names, below)
        assert "POST" in h["access-control-allow-methods"] and h["access-control-allow-headers"] == "*", h
    for off in (["--no-cors"], ["--cors-origin", ""]):
        with Server(*off) as srv:
            st, h, _ = request(srv.port, "GET", "/health", headers={"Origin": "http://example.test"})
            assert "access-control-allow-origin" not in h, (off, h)
            assert request(srv.port, "OPTIONS", "/v1/models")[0] == 405, off
    # a preflight is never a 401, with the default CORS and a key
    with Server("--api-key", "s3cret") as srv:
        st, h, _ = request(srv.port, "OPTIONS", "/v1/chat/completions", headers={
            "Origin": "http://example.test", "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization, content-type"})
        assert st == 200 and h["access-control-allow-origin"] == "http://example.test", (st, h)
        assert h["access-control-allow-headers"] == "*", h
        st, h, _ = request(srv.port, "POST", "/v1/chat/completions", body=b"{}", headers={"Origin": "http://x.test"})
        assert st == 401 and h["access-control-allow-origin"] == "*", (st, h)
    with Server("--cors-origin", "http://app.test") as srv:
        st, h, _ = request(srv.port, "GET", "/v1/models", headers={"Origin": "http://app.test"})
        assert st == 200 and h["access-control-allow-origin"] == "http://app.test", h
        st, h, _ = request(srv.port, "OPTIONS", "/v1/models", headers={"Origin": "http://app.test",
                                                                     "Access-Control-Request-Method": "POST"})
        assert st == 200 and "POST" in h["access-control-allow-methods"], (st, h)
        assert h["access-control-allow-origin"] == "http://app.test", h
        assert "Authorization" in h["access-control-allow-headers"]


if __name__ == "__main__":
    run([test_api_key, test_cors_on_by_default_off_when_asked])
