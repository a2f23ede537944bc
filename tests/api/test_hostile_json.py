"""Hostile JSON bodies against every JSON API, on the demo models (issue 16):
a NUL in a string (escaped or raw) must be refused, never cut the text
there; text after the JSON value must be refused; invalid JSON gets the same
"not valid JSON (at byte N)" on every API. Also TEI's root routes (POST /,
POST /invocations as /embed; GET /ping as /health)."""
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from hearth_test import Server, request, run, scratch_dir  # noqa: E402

DEMO_DIR = scratch_dir("hearth-demo-")
GEN = "demo-llama-tiny"

# Each JSON API with a body it answers 200 to; "TEXT" marks a text field.
APIS = [
    ("/completion", '{"prompt": "TEXT", "n_predict": 2}'),
    ("/v1/completions", '{"prompt": "TEXT", "max_tokens": 2}'),
    ("/v1/chat/completions", '{"messages": [{"role": "user", "content": "TEXT"}], "max_tokens": 2}'),
    ("/tokenize", '{"content": "TEXT"}'),
    ("/detokenize", '{"tokens": [1, 2], "model": "%s", "user": "TEXT"}' % GEN),
    ("/tokenize", '{"inputs": "TEXT"}'),
    ("/decode", '{"ids": [101, 102], "user": "TEXT"}'),
    ("/embed", '{"inputs": "TEXT"}'),
    ("/embed_all", '{"inputs": ["TEXT"]}'),
    ("/similarity", '{"inputs": {"source_sentence": "TEXT", "sentences": ["a b"]}}'),
    ("/v1/embeddings", '{"input": ["a", "TEXT"]}'),
]


def server(*args):
    return Server("--demo", "--demo-dir", DEMO_DIR, "--log-level", "warn", *args, timeout=120)


def post(port, path, raw):
    st, _, out = request(port, "POST", path, body=raw, headers={"Content-Type": "application/json"}, timeout=60)
    return st, (json.loads(out) if out else None)


def check_error(st, doc, needles, what):
    assert st == 400, (what, st, repr(doc)[:300])
    msg = doc["error"]["message"]
    assert doc["error"]["code"] == 400, (what, doc)
    for n in needles:
        assert n in msg, (what, n, msg)


def test_every_api_answers_the_plain_bodies():
    """The bodies below are fine: the refusals in the other tests are for what was added to them."""
    with server() as srv:
        for path, body in APIS:
            st, doc = post(srv.port, path, body.replace("TEXT", "Once upon a time").encode())
            assert st == 200, (path, st, doc)


def test_escaped_nul_is_refused_on_every_api():
    with server() as srv:
        for path, body in APIS:
            st, doc = post(srv.port, path, body.replace("TEXT", "Once\\u0000 upon a time").encode())
            check_error(st, doc, ["NUL"], path)


def test_nul_error_names_the_field_and_the_byte():
    with server() as srv:
        body = '{"messages": [{"role": "system", "content": "x"}, {"role": "user", "content": "Hi\\u0000 there"}]}'
        st, doc = post(srv.port, "/v1/chat/completions", body.encode())
        check_error(st, doc, ["'messages[1].content'", "at byte %d" % body.index("\\u0000")], "chat")
        body = '{"inputs": ["a", "b\\u0000"]}'
        st, doc = post(srv.port, "/embed", body.encode())
        check_error(st, doc, ["'inputs[1]'", "at byte %d" % body.index("\\u0000")], "embed")
        # in a key: "mod\u0000el" would otherwise be read as "mod"
        st, doc = post(srv.port, "/v1/embeddings", b'{"input": "a", "nested": {"mod\\u0000el": 1}}')
        check_error(st, doc, ["a key in 'nested'", "NUL"], "key")


def test_nul_scanner_follows_strings_escapes_and_nesting():
    """Brackets, commas and escaped quotes inside strings do not move the path;
    an escaped backslash then \\u0000 is a NUL; deep paths are named."""
    cases = [
        (r'{"x": "{,[\"", "inputs": "a\u0000"}', "'inputs'"),
        (r'{"inputs": "a\\\u0000"}', "'inputs'"),
        (r'{"a\"b": 1, "inputs": ["x", "y", "\u0000"]}', "'inputs[2]'"),
        (r'{"a": [[{"b": 1}, {"b": 2, "c": "\u0000"}]], "inputs": "a"}', "'a[0][1].c'"),
        (r'{"inputs": "a", "a": [{"ok": 1}, {"k\u0000": 1}]}', "a key in 'a[1]'"),
    ]
    with server() as srv:
        for raw, where in cases:
            st, doc = post(srv.port, "/embed", raw.encode())
            check_error(st, doc, [where, "NUL", "at byte %d" % raw.index("\\u0000")], raw)
        # nested past what a message names: still refused
        deep = '{"inputs": "a", "d": ' + "[" * 100 + '"\\u0000"' + "]" * 100 + "}"
        st, doc = post(srv.port, "/embed", deep.encode())
        check_error(st, doc, ["NUL", "..."], "deep")
        # the same texts without the NUL are fine
        for raw in (r'{"x": "{,[\"", "inputs": "a\\u0000"}', r'{"inputs": "a\\\\u0000"}'):
            st, doc = post(srv.port, "/embed", raw.encode())
            assert st == 200, (raw, st, doc)


def test_nul_in_the_model_name_is_not_served_as_the_model():
    """"stories\\u0000evil" was served as "stories": the name must not be cut."""
    with server() as srv:
        body = '{"prompt": "Once", "max_tokens": 2, "model": "%s\\u0000evil"}' % GEN
        st, doc = post(srv.port, "/v1/completions", body.encode())
        check_error(st, doc, ["'model'", "NUL"], "model")
        st, doc = post(srv.port, "/v1/embeddings", b'{"input": "a", "model": "demo-minilm-l6\\u0000evil"}')
        check_error(st, doc, ["'model'", "NUL"], "embeddings model")


def test_raw_nul_byte_in_a_string_is_refused():
    with server() as srv:
        st, doc = post(srv.port, "/embed", b'{"inputs": "Once\x00 upon a time"}')
        check_error(st, doc, ["'inputs'", "NUL"], "embed")
        st, doc = post(srv.port, "/completion", b'{"prompt": "Once\x00 upon", "n_predict": 2}')
        check_error(st, doc, ["'prompt'", "NUL"], "completion")


def test_escaped_backslash_before_u0000_is_text():
    """"\\\\u0000" is a backslash and "u0000": six characters of text, not a NUL."""
    text = "Once\\u0000 upon a time"  # as sent: Once\\u0000 ... (JSON), the text Once\u0000 ...
    with server() as srv:
        raw = json.dumps({"inputs": text}).encode()
        assert b"\\\\u0000" in raw
        st, doc = post(srv.port, "/tokenize", raw)
        assert st == 200, (st, doc)
        words = [t for t in doc[0] if not t["special"]]
        assert words[-1]["stop"] == len(text), words  # tokenized to its end, not cut
        st, doc = post(srv.port, "/tokenize", json.dumps({"content": text}).encode())
        assert st == 200, (st, doc)
        st, back = post(srv.port, "/detokenize", json.dumps({"tokens": doc["tokens"]}).encode())
        assert st == 200 and back["content"].strip() == text, (st, back)
        for path, body in APIS:
            st, doc = post(srv.port, path, body.replace("TEXT", "Once\\\\u0000 upon").encode())
            assert st == 200, (path, st, doc)


def test_text_after_the_json_is_refused():
    with server() as srv:
        for path, body in APIS:
            plain = body.replace("TEXT", "Once")
            for extra in (" xyz", "{}", plain, "\x00", " ,"):
                raw = (plain + extra).encode()
                st, doc = post(srv.port, path, raw)
                check_error(st, doc, ["at byte %d" % (len(plain) + (1 if extra[0] == " " else 0))], (path, extra))
            # whitespace after the value is fine
            st, doc = post(srv.port, path, (plain + " \r\n\t").encode())
            assert st == 200, (path, st, doc)


def test_invalid_json_says_so_with_the_offset_on_every_api():
    """A lone surrogate said "not a JSON object" on the generation APIs."""
    with server() as srv:
        for path, body in APIS:
            raw = body.replace("TEXT", "x\\ud800").encode()
            st, doc = post(srv.port, path, raw)
            check_error(st, doc, ["the request body is not valid JSON (at byte "], (path, "surrogate"))
            st, doc = post(srv.port, path, b'{"a": ')
            check_error(st, doc, ["the request body is not valid JSON (at byte "], (path, "truncated"))
            st, doc = post(srv.port, path, b'[1, 2]')
            check_error(st, doc, ["the request body is not a JSON object"], (path, "array"))


def test_tei_root_routes_embed():
    """@huggingface/inference posts to an endpoint's root, SageMaker to /invocations."""
    with server() as srv:
        body = json.dumps({"inputs": ["hello world", "a b c"]}).encode()
        st, want = post(srv.port, "/embed", body)
        assert st == 200 and len(want) == 2, (st, want)
        for path in ("/", "/invocations"):
            st, got = post(srv.port, path, body)
            assert st == 200, (path, st, got)
            assert len(got) == 2 and all(abs(a - b) < 1e-6 for u, v in zip(got, want) for a, b in zip(u, v)), path
        st, doc = post(srv.port, "/invocations", b'{"inputs": "a"} b')
        check_error(st, doc, ["at byte"], "invocations trailing")


def test_ping_is_public_and_follows_health():
    srv = Server("--demo", "--demo-dir", scratch_dir("hearth-demo-"), "--log-level", "warn",
                 "--api-key", "sekrit", wait_ready=False)
    seen = set()
    deadline = time.time() + 120
    try:
        while time.time() < deadline:
            try:
                st, _, body = request(srv.port, "GET", "/ping")
            except OSError:
                time.sleep(0.01)
                continue
            seen.add(st)
            if st == 503:
                assert json.loads(body)["status"] == "loading", body
            else:
                assert st == 200 and json.loads(body)["status"] == "ok", (st, body)
                break
            time.sleep(0.01)
        # a fresh demo folder takes about a second to write and load: long enough to be seen loading
        assert seen == {503, 200}, seen
        # a health check: no key needed, where the APIs want one
        assert request(srv.port, "GET", "/health")[0] == 200
        assert request(srv.port, "POST", "/embed", body=b'{"inputs": "a"}')[0] == 401
        st, _, _ = request(srv.port, "HEAD", "/ping")
        assert st == 200, st
    finally:
        assert srv.stop() == 0


if __name__ == "__main__":
    run([test_every_api_answers_the_plain_bodies,
         test_escaped_nul_is_refused_on_every_api,
         test_nul_error_names_the_field_and_the_byte,
         test_nul_scanner_follows_strings_escapes_and_nesting,
         test_nul_in_the_model_name_is_not_served_as_the_model,
         test_raw_nul_byte_in_a_string_is_refused,
         test_escaped_backslash_before_u0000_is_text,
         test_text_after_the_json_is_refused,
         test_invalid_json_says_so_with_the_offset_on_every_api,
         test_tei_root_routes_embed,
         test_ping_is_public_and_follows_health])
