"""hearth's OpenAI APIs driven by the official `openai` Python client, as users
will: chat and text completions, streamed and not, usage and include_usage,
finish_reason, stop sequences, embeddings as floats and as base64, and
errors raised as the client's own exception classes.

Needs the client: `scripts/deps.sh` installs it, pinned in tests/requirements.txt,
into build/venv, and tests/run.sh runs the Python suites with that venv's
interpreter. Without it this suite fails at once, naming the fix.

References, none produced by hearth: stories260K's GOLDEN.txt (greedy text from
BOS, made by a pure-Python port of llama2.c), the requests' own inputs, and for
embeddings the server's own float answer (base64 must decode to the same
floats) and the unit norm that normalize asks for.
"""
import base64
import math
import os
import struct
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from hearth_test import BIN, SHARED, Server, run, scratch_dir  # noqa: E402

try:
    import openai
except ImportError as e:
    print("not ok - setup: the `openai` Python package is missing (%s); run scripts/deps.sh, which installs "
          "tests/requirements.txt into build/venv, and run the suite with build/venv/bin/python" % e)
    sys.exit(1)

BUILD = os.environ.get("HEARTH_BUILD") or os.path.join(os.path.dirname(__file__), "..", "..", "build")
DEMO_TOOL = os.path.join(BUILD, "tests", "models", "test_llama_demo_tool")
STORIES_DIR = os.path.join(SHARED, "models", "stories260K")
STORIES = os.path.join(STORIES_DIR, "stories260K.gguf")
MSGS = [{"role": "system", "content": "You tell short stories."}, {"role": "user", "content": "Once upon a time"}]
TMP = scratch_dir("hearth-oai-")
_server = []


def golden():
    with open(os.path.join(STORIES_DIR, "GOLDEN.txt")) as f:
        lines = f.read().split("\n")
    return lines[lines.index("decoded text:") + 1]


def client_for(srv, **kw):
    return openai.OpenAI(base_url="http://127.0.0.1:%d/v1" % srv.port, api_key="none", max_retries=0,
                         timeout=120, **kw)


def server():
    """One server for the suite: stories (golden), a random-weight llama, the demo encoder."""
    if not _server:
        if not os.path.exists(STORIES):
            raise AssertionError("shared model missing: %s (set HEARTH_SHARED)" % STORIES)
        rand = os.path.join(TMP, "rand.gguf")
        w = subprocess.run([DEMO_TOOL, "write", rand, "llama", "f32", STORIES], capture_output=True, text=True)
        assert w.returncode == 0, "cannot write the random-weight model: %s" % w.stderr
        enc = os.path.join(TMP, "minilm")
        w = subprocess.run([BIN, "convert", "--demo", enc], capture_output=True, text=True)
        assert w.returncode == 0, "cannot write the demo encoder: %s" % w.stderr
        srv = Server("--model", "stories=" + STORIES, "--model", "rand=" + rand, "--model", "minilm=" + enc,
                     "--parallel", "4", "--chat-template", "chatml", timeout=120)
        _server.append(srv)
    return _server[0]


def client():
    return client_for(server())


def test_chat_whole():
    r = client().chat.completions.create(model="stories", messages=MSGS, max_tokens=12, temperature=0)
    assert r.id.startswith("chatcmpl-") and r.object == "chat.completion", r
    assert r.model == "stories" and isinstance(r.created, int), r
    c = r.choices[0]
    assert c.index == 0 and c.message.role == "assistant" and isinstance(c.message.content, str), c
    assert c.finish_reason in ("stop", "length"), c
    u = r.usage
    assert u.prompt_tokens > 0 and 0 < u.completion_tokens <= 12, u
    assert u.total_tokens == u.prompt_tokens + u.completion_tokens, u
    return r


def test_chat_stream_include_usage():
    whole = test_chat_whole()
    chunks = list(client().chat.completions.create(model="stories", messages=MSGS, max_tokens=12, temperature=0,
                                                   stream=True, stream_options={"include_usage": True}))
    assert chunks[0].choices[0].delta.role == "assistant", chunks[0]
    usage = chunks[-1]
    assert usage.choices == [] and usage.usage.completion_tokens == whole.usage.completion_tokens, usage
    assert usage.usage.prompt_tokens == whole.usage.prompt_tokens, usage
    fin = chunks[-2].choices[0]
    assert fin.finish_reason == whole.choices[0].finish_reason, fin
    text = "".join((c.choices[0].delta.content or "") for c in chunks if c.choices)
    assert text == whole.choices[0].message.content, (text, whole.choices[0].message.content)
    assert all(c.object == "chat.completion.chunk" for c in chunks), "chunk objects"
    assert len({c.id for c in chunks}) == 1, "one id per stream"
    # without include_usage there is no usage chunk; the finishing chunk carries the usage as
    # llama-server's does (the client parses it as the chunk's optional usage)
    plain = list(client().chat.completions.create(model="stories", messages=MSGS, max_tokens=3, temperature=0,
                                                  stream=True))
    assert all(len(c.choices) == 1 for c in plain) and all(not c.usage for c in plain[:-1]), plain
    assert plain[-1].usage.completion_tokens == 3, plain[-1]
    assert plain[-1].choices[0].finish_reason == "length", plain[-1]


def test_completions_golden_whole_and_streamed():
    text = golden()
    # an empty prompt is BOS alone, where the golden run starts
    r = client().completions.create(model="stories", prompt="", max_tokens=60, temperature=0)
    assert r.object == "text_completion" and r.id.startswith("cmpl-"), r
    assert r.choices[0].text.lstrip() == text, (r.choices[0].text, text)
    assert r.choices[0].finish_reason == "length", r.choices[0]
    assert r.usage.completion_tokens == 60 and r.usage.prompt_tokens == 1 and r.usage.total_tokens == 61, r.usage
    chunks = list(client().completions.create(model="stories", prompt="", max_tokens=60, temperature=0, stream=True,
                                              stream_options={"include_usage": True}))
    streamed = "".join(c.choices[0].text for c in chunks if c.choices)
    assert streamed == r.choices[0].text, (streamed, r.choices[0].text)
    assert chunks[-1].usage.total_tokens == 61, chunks[-1]


def test_stop_sequences():
    text = golden()
    want = text[:text.index("girl")]
    r = client().completions.create(model="stories", prompt="", max_tokens=60, temperature=0, stop="girl")
    assert r.choices[0].text.lstrip() == want and r.choices[0].finish_reason == "stop", r.choices[0]
    chunks = list(client().completions.create(model="stories", prompt="", max_tokens=60, temperature=0,
                                              stop=["zebra", "girl"], stream=True))
    streamed = "".join(c.choices[0].text for c in chunks)
    assert streamed.lstrip() == want, (streamed, want)
    assert chunks[-1].choices[0].finish_reason == "stop", chunks[-1]
    # chat: the stop string never shows, even split over tokens
    c = client().chat.completions.create(model="stories", messages=MSGS, max_tokens=40, temperature=0)
    content = c.choices[0].message.content
    assert len(content) > 6, content
    cut = content[3:6]
    s = client().chat.completions.create(model="stories", messages=MSGS, max_tokens=40, temperature=0, stop=[cut])
    assert s.choices[0].message.content == content[:content.index(cut)], (s.choices[0], cut, content)
    assert s.choices[0].finish_reason == "stop", s.choices[0]


def test_default_and_other_model():
    # no model: the first generation model; the random-weight one by name
    r = client().completions.create(model=openai.omit, prompt="Once", max_tokens=4, temperature=0)
    assert r.model == "stories", r
    q = client().chat.completions.create(model="rand", messages=MSGS, max_tokens=5, seed=7)
    assert q.model == "rand" and q.usage.completion_tokens <= 5, q
    ids = [m.id for m in client().models.list()]
    assert "stories" in ids and "rand" in ids and "minilm" in ids, ids


def f32(v):
    """The float32 values nearest to a list of doubles."""
    return list(struct.unpack("<%df" % len(v), struct.pack("<%df" % len(v), *v)))


def embedding_floats(r):
    """The vectors in index order; a base64 one (the client hands it over as the string
    it got) decoded as little-endian float32, as OpenAI documents it."""
    out = []
    for d in sorted(r.data, key=lambda d: d.index):
        v = d.embedding
        if isinstance(v, str):
            blob = base64.b64decode(v)
            v = list(struct.unpack("<%df" % (len(blob) // 4), blob))
        out.append(v)
    return out


def test_embeddings_float_and_base64():
    texts = ["a sentence", "another one, longer than the first"]
    f = client().embeddings.create(model="minilm", input=texts, encoding_format="float")
    assert f.object == "list" and f.model == "minilm" and len(f.data) == 2, f
    vecs = embedding_floats(f)
    assert all(len(v) == 384 for v in vecs), [len(v) for v in vecs]
    # the server normalizes by default: unit length within float32 rounding (1e-5)
    for v in vecs:
        assert abs(math.sqrt(sum(x * x for x in v)) - 1) < 1e-5, sum(x * x for x in v)
    assert vecs[0] != vecs[1], "two texts, one vector"
    assert f.usage.prompt_tokens > 0 and f.usage.total_tokens == f.usage.prompt_tokens, f.usage
    # base64: the same floats, bit for bit
    # the JSON floats are float32 values printed to round-trip (so parsed as doubles they
    # may differ from the float32's exact value: compare both as float32)
    b = client().embeddings.create(model="minilm", input=texts, encoding_format="base64")
    assert embedding_floats(b) == [f32(v) for v in vecs], "base64 floats differ from the float answer"
    assert all(isinstance(d.embedding, str) for d in b.data), "base64 asked, floats sent"
    # dimensions cuts (and renormalizes, as OpenAI's text-embedding-3 do)
    d = client().embeddings.create(model="minilm", input=texts[0], dimensions=64)
    v = d.data[0].embedding
    assert len(v) == 64 and abs(math.sqrt(sum(x * x for x in v)) - 1) < 1e-5, len(v)


def expect_error(cls, status, needle, fn, **kw):
    try:
        fn(**kw)
    except openai.APIStatusError as e:
        assert isinstance(e, cls), "expected %s, got %s: %s" % (cls.__name__, type(e).__name__, e)
        assert e.status_code == status, (e.status_code, e)
        assert needle in str(e), "%r not in %r" % (needle, str(e))
        return
    raise AssertionError("expected %s, the request succeeded" % cls.__name__)


def test_errors_are_client_exception_classes():
    c = client()
    chat, comp, emb = c.chat.completions.create, c.completions.create, c.embeddings.create
    expect_error(openai.NotFoundError, 404, "nope", chat, model="nope", messages=MSGS)
    expect_error(openai.NotFoundError, 404, "gpt-x", comp, model="gpt-x", prompt="a")
    expect_error(openai.BadRequestError, 400, "n", chat, model="stories", messages=MSGS, n=2)
    expect_error(openai.BadRequestError, 400, "logprobs", chat, model="stories", messages=MSGS, top_logprobs=2)
    expect_error(openai.BadRequestError, 400, "temperature", chat, model="stories", messages=MSGS, temperature=-1)
    expect_error(openai.BadRequestError, 400, "text", chat, model="stories",
                 messages=[{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}])
    expect_error(openai.BadRequestError, 400, "context", comp, model="stories", prompt="x" * 5000)
    expect_error(openai.BadRequestError, 400, "input", emb, model="minilm", input=[])
    # a stream that cannot start is an error before any chunk, not a broken stream
    expect_error(openai.NotFoundError, 404, "nope", chat, model="nope", messages=MSGS, stream=True)


def test_server_exits_cleanly():
    srv = server()
    _server.clear()
    rc = srv.stop()
    assert rc == 0, "server exited with %s; log tail:\n%s" % (rc, "\n".join(srv.lines[-40:]))


def test_chat_without_template():
    # stories260K's GGUF has no chat template: chat falls back to chatml, as llama-server's does
    with Server("--model", STORIES, timeout=60) as srv:
        r = client_for(srv).chat.completions.create(model=openai.omit, messages=MSGS, max_tokens=3)
        assert r.choices[0].message.role == "assistant" and r.usage.completion_tokens <= 3, r
        srv.wait_log(r"no chat template.*chatml")


if __name__ == "__main__":
    run([test_chat_whole, test_chat_stream_include_usage, test_completions_golden_whole_and_streamed,
         test_stop_sequences, test_default_and_other_model, test_embeddings_float_and_base64,
         test_errors_are_client_exception_classes, test_server_exits_cleanly, test_chat_without_template])
