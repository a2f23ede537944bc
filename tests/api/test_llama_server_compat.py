"""hearth as a drop-in for llama-server (issue 20): what a client, a script or a
command line written for llama-server sees when it talks to `hearth serve`
instead.

Each test states the llama-server behaviour it checks. References, none produced
by hearth: stories260K's GOLDEN.txt (greedy text from a pure-Python port of
llama2.c), llama-server's documented routes, field names and flags (its
tools/server README and server.cpp at llama.cpp c392e50, read, never copied),
and SentencePiece's rule that only the start of a whole text loses the space
the encoder put before its first word.
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from hearth_test import SHARED, Server, request, run  # noqa: E402

STORIES_DIR = os.path.join(SHARED, "models", "stories260K")
STORIES = os.path.join(STORIES_DIR, "stories260K.gguf")
PROMPT = "Tom and his dog went to the"


def golden_text():
    with open(os.path.join(STORIES_DIR, "GOLDEN.txt")) as f:
        lines = f.read().split("\n")
    return lines[lines.index("decoded text:") + 1]


def post(port, path, doc, timeout=120, headers=None):
    h = {"Content-Type": "application/json"}
    h.update(headers or {})
    st, hd, out = request(port, "POST", path, body=json.dumps(doc).encode(), headers=h, timeout=timeout)
    return st, hd, out


def post_json(port, path, doc, timeout=120, headers=None):
    st, _, out = post(port, path, doc, timeout, headers)
    return st, json.loads(out)


def get_json(port, path, headers=None):
    st, _, out = request(port, "GET", path, headers=headers)
    return st, json.loads(out)


def sse_events(body):
    text = body.decode("utf-8")
    out = []
    for ev in text.split("\n\n"):
        if ev.startswith("data: "):
            data = ev[len("data: "):]
            out.append(data if data == "[DONE]" else json.loads(data))
    return out


class Main:
    """stories260K alone, as llama-server is most often run: one model, no chat template in its GGUF."""
    srv = None


def srv():
    if Main.srv is None:
        Main.srv = Server("--model", STORIES, "--parallel", "2", "--log-level", "info", timeout=120)
    return Main.srv


# ---- 1. the first generated piece keeps its leading space ----

def test_continuation_keeps_its_leading_space():
    """stories260K continues PROMPT with ' park.' (SentencePiece '▁park'): llama-server
    answers " park. ...", so prompt + content reads "...to the park."; only a text's very
    start loses the encoder's space."""
    port = srv().port
    st, doc = post_json(port, "/completion", {"prompt": PROMPT, "n_predict": 4, "temperature": 0})
    assert st == 200, doc
    assert doc["content"].startswith(" park"), doc["content"]
    st, _, body = post(port, "/completion", {"prompt": PROMPT, "n_predict": 4, "temperature": 0, "stream": True})
    assert st == 200
    streamed = "".join(e["content"] for e in sse_events(body))
    assert streamed == doc["content"], (streamed, doc["content"])
    st, doc2 = post_json(port, "/v1/completions", {"prompt": PROMPT, "max_tokens": 4, "temperature": 0})
    assert st == 200, doc2
    assert doc2["choices"][0]["text"] == doc["content"], (doc2, doc["content"])
    assert (PROMPT + doc["content"]).startswith(PROMPT + " park."), PROMPT + doc["content"]


def test_text_from_bos_alone_is_golden():
    """From BOS alone the answer is the golden text; its first word carries SentencePiece's
    space as llama-server's does (clients strip it, as the golden comparisons do)."""
    st, doc = post_json(srv().port, "/completion", {"prompt": "", "n_predict": 60, "temperature": 0})
    assert st == 200, doc
    assert doc["content"].lstrip(" ") == golden_text(), doc["content"]


TESTS = [test_continuation_keeps_its_leading_space, test_text_from_bos_alone_is_golden]

if __name__ == "__main__":
    try:
        run(TESTS)
    finally:
        if Main.srv is not None:
            Main.srv.stop()
