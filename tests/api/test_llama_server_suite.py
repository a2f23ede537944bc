"""What llama.cpp's own server test suite (examples/server/tests at c392e50, run
against hearth by tests/compat/llama_server_suite.sh) found where hearth answered
otherwise than llama-server (issue 20), one test per behaviour, each on a
server started with the suite's own flags.

References, none produced by hearth: llama-server built from llama.cpp c392e50
(CPU, see bench/RESULTS.md of 2026-12-03), whose answers with stories260K are
quoted below; llama.cpp's server tests and server.cpp at c392e50 (read, never
copied) for the fields, routes and shapes.
"""
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from hearth_test import SHARED, Server, request, run  # noqa: E402

STORIES = os.path.join(SHARED, "models", "stories260K", "stories260K.gguf")
# ServerPreset.tinyllama2() of the suite: its flags, as llama-server takes them
SUITE_FLAGS = ("--model", STORIES, "--temp", "0.8", "--seed", "42", "--batch-size", "32", "--alias", "tinyllama-2",
               "--ctx-size", "256", "--parallel", "2", "--n-predict", "64")
BOOK = [{"role": "system", "content": "Book"}, {"role": "user", "content": "What is the best book"}]


def post(port, path, doc, timeout=120):
    st, _, out = request(port, "POST", path, body=json.dumps(doc).encode(),
                         headers={"Content-Type": "application/json"}, timeout=timeout)
    return st, out


def post_json(port, path, doc, timeout=120):
    st, out = post(port, path, doc, timeout)
    return st, json.loads(out)


def sse_events(body):
    out = []
    for ev in body.decode("utf-8").split("\n\n"):
        if ev.startswith("data: "):
            data = ev[len("data: "):]
            out.append(data if data == "[DONE]" else json.loads(data))
    return out


class Main:
    srv = None


def srv():
    if Main.srv is None:
        Main.srv = Server(*SUITE_FLAGS, "--log-level", "warn", timeout=120)
    return Main.srv


def test_seeded_texts_are_llama_servers():
    """A seed gives llama-server's text: the same generator (mt19937 drawn as
    libstdc++'s discrete_distribution) over the same sampler chain in the same
    arithmetic. llama-server c392e50 (--temp 0.8 --seed 42, top_k 40, top_p 0.95,
    min_p 0.05) answered these on 2026-12-03; the suite's regexes ("(going|bed)+",
    "(Suddenly)+") match them."""
    port = srv().port
    want = {
        "I believe the meaning of life is": " going to get an adventure. Everywhere she got out, he fell d",
        "Tom and his dog went to the": " store with his mom. They saw a big red croter and said, \"Look, Tom. It's",
    }
    for prompt, text in want.items():
        st, doc = post_json(port, "/completion", {"prompt": prompt, "n_predict": 32, "seed": 42})
        assert st == 200 and doc["content"] == text, (prompt, doc)
        # the server's --seed is the default of a request that names none
        st, doc = post_json(port, "/completion", {"prompt": prompt, "n_predict": 32})
        assert st == 200 and doc["content"] == text and doc["generation_settings"]["seed"] == 42, (prompt, doc)
    st, doc = post_json(port, "/v1/chat/completions", {"messages": BOOK, "max_tokens": 16, "seed": 42})
    assert st == 200 and doc["choices"][0]["message"]["content"] == "Suddenly. He didn't loo", doc
    assert doc["usage"]["prompt_tokens"] == 77, doc
    # top_k 0, top_p 0.9, temperature 1, seed 7: llama-server's first 10 tokens (its 32 are
    # below; the normaliser over a whole vocabulary is summed in another order here, so
    # longer answers may part ways: see sampler.c)
    st, doc = post_json(port, "/completion", {"prompt": "I believe the meaning of life is", "n_predict": 10, "seed": 7,
                                              "temperature": 1.0, "top_k": 0, "top_p": 0.9, "min_p": 0})
    assert st == 200 and doc["content"] == " fun with the sea. W", doc
    assert " fun with the sea. While the temple, Tom found a big race and st".startswith(doc["content"])


if __name__ == "__main__":
    run([test_seeded_texts_are_llama_servers])
