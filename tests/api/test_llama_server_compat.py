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
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from hearth_test import BIN, SHARED, Server, connect, get_json, post, post_json, run, scratch_dir, sse_events  # noqa: E402

STORIES_DIR = os.path.join(SHARED, "models", "stories260K")
STORIES = os.path.join(STORIES_DIR, "stories260K.gguf")
PROMPT = "Tom and his dog went to the"


def golden_text():
    with open(os.path.join(STORIES_DIR, "GOLDEN.txt")) as f:
        lines = f.read().split("\n")
    return lines[lines.index("decoded text:") + 1]


DEMO_DIR = scratch_dir("hearth-compat-demo-")


class Demo:
    """The demo models (one encoder, one generator): the encoder's routes."""
    srv = None


def demo():
    if Demo.srv is None:
        Demo.srv = Server("--demo", "--demo-dir", DEMO_DIR, "--log-level", "warn", timeout=120)
    return Demo.srv


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


# ---- 2. model names ----

def test_lone_model_answers_any_name():
    """Stock OpenAI clients send gpt-3.5-turbo: llama-server answers with its one model,
    and so does hearth. OpenAI answers echo the name asked for, as llama-server's do
    (its suite checks it); the X-Hearth-Model header says which model answered."""
    port = srv().port
    st, h, out = post(port, "/v1/completions", {"model": "gpt-3.5-turbo", "prompt": PROMPT, "max_tokens": 2})
    doc = json.loads(out)
    assert st == 200 and doc["model"] == "gpt-3.5-turbo" and h["x-hearth-model"] == "stories260K", (h, doc)
    for path in ("/v1/chat/completions", "/chat/completions"):
        body = {"model": "codellama70b", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
        st, h, out = post(port, path, body)
        doc = json.loads(out)
        assert st == 200 and doc["model"] == "codellama70b" and h["x-hearth-model"] == "stories260K", (path, h, doc)
        st, h, out = post(port, path, dict(body, stream=True))
        events = [e for e in sse_events(out) if e != "[DONE]"]
        assert st == 200 and h["x-hearth-model"] == "stories260K", h
        assert events and all(e["model"] == "codellama70b" for e in events), events
    # without a name, llama-server's default name (its suite checks "gpt-3.5" in every streamed chunk) while
    # the operator named the model neither (test_several_models_route_by_name and test_alias_... have names)
    st, h, out = post(port, "/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2})
    assert st == 200 and json.loads(out)["model"] == "gpt-3.5-turbo" and h["x-hearth-model"] == "stories260K", out
    st, h, out = post(port, "/v1/completions", {"prompt": PROMPT, "max_tokens": 2, "stream": True})
    events = [e for e in sse_events(out) if e != "[DONE]"]
    assert st == 200 and events and all(e["model"] == "gpt-3.5-turbo" for e in events), events
    st, doc = post_json(port, "/completion", {"model": "nope", "prompt": PROMPT, "n_predict": 2})
    assert st == 200 and doc["model"] == "stories260K", doc
    # the same for the one encoder, under OpenAI's embedding model's name
    st, doc = post_json(demo().port, "/v1/embeddings", {"model": "text-embedding-3-small", "input": "a cat"})
    assert st == 200 and doc["model"] == "demo-minilm-l6" and len(doc["data"][0]["embedding"]) == 384, doc


def test_several_models_route_by_name():
    """With two generation models a name is routing (vLLM's and Ollama's rule): a name
    that matches neither stays a 404 naming it; each name reaches its model."""
    with Server("--model", "a=" + STORIES, "--model", "b=" + STORIES, "--log-level", "warn", timeout=120) as s:
        st, doc = post_json(s.port, "/v1/completions", {"model": "gpt-3.5-turbo", "prompt": PROMPT, "max_tokens": 2})
        assert st == 404 and "gpt-3.5-turbo" in doc["error"]["message"], doc
        st, h, out = post(s.port, "/v1/completions", {"model": "b", "prompt": PROMPT, "max_tokens": 2})
        assert st == 200 and json.loads(out)["model"] == "b" and h["x-hearth-model"] == "b", (h, out)
        # no name asked: the first model answers under the name the operator gave it
        st, h, out = post(s.port, "/v1/completions", {"prompt": PROMPT, "max_tokens": 2})
        assert st == 200 and json.loads(out)["model"] == "a" and h["x-hearth-model"] == "a", (h, out)


def test_alias_names_the_served_model():
    """llama-server's --alias: the name /v1/models lists and answers carry."""
    with Server("--model", STORIES, "--alias", "tiny-stories", "--log-level", "warn", timeout=120) as s:
        st, doc = get_json(s.port, "/v1/models")
        assert st == 200 and [m["id"] for m in doc["data"]] == ["tiny-stories"], doc
        st, doc = post_json(s.port, "/completion", {"prompt": PROMPT, "n_predict": 2})
        assert st == 200 and doc["model"] == "tiny-stories", doc
        st, doc = post_json(s.port, "/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2})
        assert st == 200 and doc["model"] == "tiny-stories", doc
    r = subprocess.run([BIN, "serve", "--model", "a=" + STORIES, "--model", STORIES, "--alias", "x", "--port", "0"],
                       capture_output=True, text=True, timeout=60, env=dict(os.environ, HEARTH_DEMO="0"))
    assert r.returncode == 2 and "--alias" in r.stderr and "NAME=PATH" in r.stderr, (r.returncode, r.stderr)


# ---- 3. no chat template in the GGUF ----

def test_chat_falls_back_to_chatml():
    """stories260K's GGUF has no chat template: llama-server chats with chatml and says so
    at load; /props names the template (and shows its source, as llama-server's does)."""
    s = srv()
    s.wait_log(r"warn.*stories260K.*no chat template.*chatml")
    st, doc = post_json(s.port, "/v1/chat/completions",
                        {"messages": [{"role": "user", "content": "Tell a story"}], "max_tokens": 4, "temperature": 0})
    assert st == 200 and doc["choices"][0]["message"]["role"] == "assistant", doc
    # the prompt is chatml's: its tokens are those of the rendered text (BOS first, as the vocabulary asks)
    rendered = "<|im_start|>user\nTell a story<|im_end|>\n<|im_start|>assistant\n"
    st, toks = post_json(s.port, "/tokenize", {"content": rendered, "add_special": True})
    assert doc["usage"]["prompt_tokens"] == len(toks["tokens"]), (doc["usage"], len(toks["tokens"]))
    st, props = get_json(s.port, "/props")
    assert props["chat_template_name"] == "chatml" and props["chat_template_source"] == "fallback", props
    assert "<|im_start|>" in props["chat_template"], props["chat_template"]


# ---- 4. llama-server's routes ----

def test_models_route():
    """GET /models is llama-server's name for /v1/models."""
    port = srv().port
    st, a = get_json(port, "/models")
    st2, b = get_json(port, "/v1/models")
    assert st == st2 == 200 and a == b and a["data"][0]["id"] == "stories260K", (a, b)


def test_completions_route_is_completion():
    """POST /completions is llama-server's /completion (its shape: "content"), not OpenAI's."""
    port = srv().port
    req = {"prompt": PROMPT, "n_predict": 6, "temperature": 0}
    st, a = post_json(port, "/completions", req)
    st2, b = post_json(port, "/completion", req)
    assert st == st2 == 200 and "choices" not in a, a
    assert a["content"] == b["content"] and a["tokens_predicted"] == 6, (a, b)
    # with no n_predict, llama-server reads OpenAI's max_tokens
    st, c = post_json(port, "/completions", {"prompt": PROMPT, "max_tokens": 3, "temperature": 0})
    assert st == 200 and c["tokens_predicted"] == 3, c


def norm(v):
    return sum(x * x for x in v) ** 0.5


def test_embedding_routes_llama_shape():
    """llama-server's POST /embedding and /embeddings: a list of {"index", "embedding": [[float]]}
    (the pooled vector, normalized, as the one row of a matrix), "content" or "input" naming
    the texts; the vectors are the OpenAI route's."""
    port = demo().port
    st, oai = post_json(port, "/v1/embeddings", {"input": ["a cat", "a dog"]})
    assert st == 200, oai
    for path, doc in (("/embedding", {"content": "a cat"}), ("/embeddings", {"input": "a cat"}),
                      ("/embeddings", {"content": ["a cat", "a dog"]})):
        st, got = post_json(port, path, doc)
        assert st == 200 and isinstance(got, list), (path, got)
        texts = doc.get("content", doc.get("input"))
        n = 1 if isinstance(texts, str) else len(texts)
        assert [e["index"] for e in got] == list(range(n)), got
        for e in got:
            assert len(e["embedding"]) == 1 and len(e["embedding"][0]) == 384, (path, e)
            v, want = e["embedding"][0], oai["data"][e["index"]]["embedding"]
            assert abs(norm(v) - 1) < 1e-4 and max(abs(x - y) for x, y in zip(v, want)) < 1e-5, path
    st, doc = post_json(port, "/embedding", {"text": "a cat"})
    assert st == 400 and "content" in doc["error"]["message"], doc


# ---- 5. response fields ----

def test_completion_fields():
    """llama-server's /completion answer: tokens ([] unless return_tokens), has_new_line,
    tokens_predicted, tokens_evaluated, truncated, timings (prompt_n, predicted_n)."""
    port = srv().port
    st, toks = post_json(port, "/tokenize", {"content": PROMPT, "add_special": True})
    n_prompt = len(toks["tokens"])
    st, doc = post_json(port, "/completion", {"prompt": PROMPT, "n_predict": 8, "temperature": 0, "cache_prompt": False})
    assert st == 200 and doc["tokens"] == [], doc
    assert doc["has_new_line"] is False and doc["truncated"] is False, doc
    assert doc["tokens_predicted"] == 8 and doc["tokens_evaluated"] == n_prompt, doc
    assert doc["timings"]["prompt_n"] == n_prompt and doc["timings"]["predicted_n"] == 8, doc["timings"]
    st, doc2 = post_json(port, "/completion", {"prompt": PROMPT, "n_predict": 8, "temperature": 0, "return_tokens": True})
    ids = doc2["tokens"]
    assert len(ids) == 8 and all(type(t) == int for t in ids), doc2
    # the ids are the text's: detokenized after the prompt's (BOS left out: /detokenize shows it) they read as the content
    assert toks["tokens"][0] == 1, toks
    st, back = post_json(port, "/detokenize", {"tokens": toks["tokens"][1:] + ids})
    assert back["content"] == PROMPT + doc2["content"], (back, doc2["content"])
    # a text that runs past a line end says so
    st, doc3 = post_json(port, "/completion", {"prompt": "", "n_predict": 200, "temperature": 0})
    assert doc3["has_new_line"] == ("\n" in doc3["content"]), doc3
    st, doc = post_json(port, "/completion", {"prompt": "x", "return_tokens": "yes"})
    assert st == 400 and "return_tokens" in doc["error"]["message"], doc


def test_completion_stream_fields():
    """Each streamed event lists its ids ("tokens"), tokens_predicted so far and
    tokens_evaluated; the last ("stop": true) has timings, truncated, has_new_line."""
    port = srv().port
    st, _, body = post(port, "/completion", {"prompt": PROMPT, "n_predict": 8, "temperature": 0, "stream": True})
    ev = sse_events(body)
    parts, last = ev[:-1], ev[-1]
    assert parts and all(e["stop"] is False and len(e["tokens"]) >= 1 for e in parts), parts
    assert sum(len(e["tokens"]) for e in parts) <= 8 and parts[-1]["tokens_predicted"] <= 8, parts
    assert [e["tokens_predicted"] for e in parts] == sorted(e["tokens_predicted"] for e in parts), parts
    assert all(e["tokens_evaluated"] == parts[0]["tokens_evaluated"] > 0 for e in parts), parts
    assert last["stop"] is True and last["tokens"] == [] and last["truncated"] is False, last
    assert last["timings"]["predicted_n"] == 8 and type(last["has_new_line"]) == bool, last
    st, whole = post_json(port, "/completion", {"prompt": PROMPT, "n_predict": 8, "temperature": 0, "return_tokens": True})
    assert [t for e in parts for t in e["tokens"]] == whole["tokens"], (parts, whole["tokens"])


def test_chat_stream_last_chunk():
    """The finishing chat chunk carries llama-server's timings and usage (llama.cpp's
    test_chat_completion_stream reads it there without asking); with
    stream_options.include_usage OpenAI's usage chunk follows."""
    port = srv().port
    req = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 5, "temperature": 0, "stream": True}
    st, _, body = post(port, "/v1/chat/completions", dict(req, stream_options={"include_usage": True}))
    ev = sse_events(body)
    assert ev[-1] == "[DONE]" and ev[-2]["choices"] == [], ev[-3:]
    fin = ev[-3]
    assert fin["choices"][0]["finish_reason"] == "length", fin
    assert fin["usage"] == {k: ev[-2]["usage"][k] for k in fin["usage"]} and fin["usage"]["completion_tokens"] == 5, fin
    assert fin["timings"]["predicted_n"] == 5, fin
    st, _, body = post(port, "/v1/chat/completions", req)
    ev = sse_events(body)
    fin = ev[-2]
    assert "timings" in fin and fin["usage"]["completion_tokens"] == 5, fin
    assert all(e["choices"] for e in ev[:-1]), ev  # no usage chunk unasked


def test_response_fields_and_props():
    """response_fields keeps only the fields named, keyed by their paths (llama-server's
    json_get_nested_values); /props names the EOS token as it names BOS."""
    port = srv().port
    st, doc = post_json(port, "/completion", {"prompt": PROMPT, "n_predict": 3, "temperature": 0,
                                              "response_fields": ["content", "generation_settings/n_predict", "prompt",
                                                                  "no/such"]})
    assert st == 200 and set(doc) == {"content", "generation_settings/n_predict", "prompt"}, doc
    assert doc["prompt"] == "<s> " + PROMPT, doc  # the prompt as llama-server shows it, BOS and all
    assert doc["generation_settings/n_predict"] == 3 and doc["content"].startswith(" park"), doc
    st, doc = post_json(port, "/completion", {"prompt": PROMPT, "response_fields": "content"})
    assert st == 400 and "response_fields" in doc["error"]["message"], doc
    st, props = get_json(port, "/props")
    assert props["bos_token"] == "<s>" and props["eos_token"] == "</s>", props
    # /slots: what llama-server started without --slots answers
    st, doc = get_json(port, "/slots")
    assert st == 501 and doc["error"]["type"] == "not_supported_error", doc


# ---- several prompts in one request ----

def test_several_prompts():
    """A list of prompts (strings or id lists) gets llama-server's answer: a JSON array,
    one whole answer per prompt in order, each with its "index", each what the prompt
    alone gets (greedy); /v1/completions the same with its completion objects."""
    port = srv().port
    prompts = [PROMPT, "Once upon a time", [1, 403, 407]]
    alone = []
    for p in prompts:
        st, doc = post_json(port, "/completion", {"prompt": p, "n_predict": 6, "temperature": 0})
        alone.append(doc["content"])
    st, docs = post_json(port, "/completion", {"prompt": prompts, "n_predict": 6, "temperature": 0})
    assert st == 200 and isinstance(docs, list) and len(docs) == 3, docs
    assert [d["index"] for d in docs] == [0, 1, 2] and [d["content"] for d in docs] == alone, (docs, alone)
    st, docs = post_json(port, "/v1/completions", {"prompt": prompts[:2], "max_tokens": 6, "temperature": 0})
    assert st == 200 and len(docs) == 2, docs
    assert [d["choices"][0]["index"] for d in docs] == [0, 1], docs
    assert [d["choices"][0]["text"] for d in docs] == alone[:2], docs
    # what cannot be answered is refused before any work, naming the prompt
    st, doc = post_json(port, "/completion", {"prompt": [PROMPT, [1] + [403] * 3000], "n_predict": 2})
    assert st == 400 and "3001 tokens" in doc["error"]["message"], doc
    # streamed: one stream, every event naming its prompt ("index"), each prompt's pieces
    # reading as its whole answer, one last event ("stop": true) per prompt
    st, _, body = post(port, "/completion", {"prompt": prompts, "n_predict": 6, "temperature": 0, "stream": True})
    ev = sse_events(body)
    assert st == 200 and sorted({e["index"] for e in ev}) == [0, 1, 2], ev
    for i in range(3):
        mine = [e for e in ev if e["index"] == i]
        assert [e["stop"] for e in mine].count(True) == 1 and mine[-1]["stop"] is True, mine
        assert "".join(e["content"] for e in mine) == alone[i], (i, mine, alone[i])
        assert mine[-1]["tokens_predicted"] == 6 and mine[-1]["truncated"] is False, mine[-1]
    st, _, body = post(port, "/v1/completions", {"prompt": prompts[:2], "max_tokens": 6, "temperature": 0, "stream": True})
    ev = sse_events(body)
    assert st == 200 and ev[-1] == "[DONE]" and ev.count("[DONE]") == 1, ev
    for i in range(2):
        text = "".join(e["choices"][0]["text"] for e in ev[:-1] if e["choices"] and e["choices"][0]["index"] == i)
        assert text == alone[i], (i, text, alone[i])
    # a streamed list refused before any work is a plain error, not a stream
    st, doc = post_json(port, "/completion", {"prompt": [PROMPT, [1] + [403] * 3000], "stream": True})
    assert st == 400 and "3001 tokens" in doc["error"]["message"], doc
    st, doc = post_json(port, "/completion", {"prompt": ["a"] * 65})
    assert st == 400 and "65" in doc["error"]["message"], doc
    # ids and text mixed are one prompt (llama-server's): BOS then the text is the text alone
    st, doc = post_json(port, "/completion", {"prompt": [1, PROMPT], "n_predict": 6, "temperature": 0})
    assert st == 200 and doc["content"] == alone[0], (doc, alone[0])
    st, docs = post_json(port, "/completion", {"prompt": [[1, PROMPT], PROMPT], "n_predict": 6, "temperature": 0})
    assert st == 200 and [d["content"] for d in docs] == [alone[0]] * 2, docs
    st, doc = post_json(port, "/completion", {"prompt": [1, True]})
    assert st == 400 and "'prompt'[1]" in doc["error"]["message"], doc
    # a client that leaves mid-answer cancels every prompt of it; the server goes on
    body = json.dumps({"prompt": [[1] + [403] * 50] * 4, "n_predict": 1500}).encode()
    sock = connect(port)
    sock.sendall(b"POST /completion HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                 % (len(body), body))
    sock.close()
    st, doc = post_json(port, "/completion", {"prompt": [PROMPT, PROMPT], "n_predict": 2, "temperature": 0})
    assert st == 200 and len(doc) == 2, doc


def test_servers_exit_cleanly():
    """Last: the shared servers stop with status 0 (under ASan, no leak)."""
    for held in (Main, Demo):
        if held.srv is not None:
            rc = held.srv.stop()
            assert rc == 0, "exit status %s; log tail:\n%s" % (rc, "\n".join(held.srv.lines[-30:]))
            held.srv = None


# ---- OpenAI logprobs, as llama-server gives them ----

def test_openai_logprobs():
    """Chat's logprobs + top_logprobs and completions' logprobs: N come back as llama-server
    gives them, {"content": [{token, logprob, bytes, top_logprobs}]} per choice (per chunk
    streamed); greedy, each token is its own top candidate; the numbers are /completion's n_probs'."""
    port = srv().port
    st, ref = post_json(port, "/completion", {"prompt": PROMPT, "n_predict": 4, "temperature": 0, "n_probs": 2})
    want = [(p["token"], round(p["logprob"], 4)) for p in ref["completion_probabilities"]]
    st, doc = post_json(port, "/v1/completions", {"prompt": PROMPT, "max_tokens": 4, "temperature": 0, "logprobs": 2})
    assert st == 200, doc
    got = doc["choices"][0]["logprobs"]["content"]
    assert [(p["token"], round(p["logprob"], 4)) for p in got] == want, (got, want)
    assert all(len(p["top_logprobs"]) == 2 and p["top_logprobs"][0]["token"] == p["token"] for p in got), got
    assert "".join(p["token"] for p in got) == doc["choices"][0]["text"], doc
    msgs = [{"role": "user", "content": "hi"}]
    st, doc = post_json(port, "/v1/chat/completions", {"messages": msgs, "max_tokens": 4, "temperature": 0,
                                                       "logprobs": True, "top_logprobs": 3})
    assert st == 200, doc
    content = doc["choices"][0]["logprobs"]["content"]
    assert len(content) == 4 and all(len(p["top_logprobs"]) == 3 and p["logprob"] <= 0 for p in content), content
    st, _, body = post(port, "/v1/chat/completions", {"messages": msgs, "max_tokens": 4, "temperature": 0,
                                                      "logprobs": True, "top_logprobs": 3, "stream": True})
    chunks = [e for e in sse_events(body)[1:-2]]
    streamed = [p for e in chunks for p in e["choices"][0]["logprobs"]["content"]]
    assert [p["token"] for p in streamed] == [p["token"] for p in content], (streamed, content)
    st, doc = post_json(port, "/v1/chat/completions", {"messages": msgs, "max_tokens": 2})
    assert doc["choices"][0]["logprobs"] is None, doc
    st, doc = post_json(port, "/v1/chat/completions", {"messages": msgs, "logprobs": True, "top_logprobs": 21})
    assert st == 400 and "top_logprobs" in doc["error"]["message"], doc


# ---- 6. llama-server's command line ----

def test_llama_server_command_line():
    """A llama-server command line, unchanged, means the same: -c is the context of all
    -np slots together, -n caps every answer, --seed and --temp are the defaults of requests
    that give none, -a names the model, --api-key guards the APIs; -ub, --metrics,
    --no-context-shift and --jinja are accepted, -ngl is ignored with a note."""
    key = {"Authorization": "Bearer sekret"}
    args = ["-m", STORIES, "-c", "256", "-np", "2", "-b", "64", "-ub", "32", "-n", "5", "--seed", "42", "--temp", "0",
            "--top-k", "1", "-a", "tiny", "-ngl", "99", "--metrics", "--no-context-shift", "--jinja", "--api-key", "sekret",
            "--cont-batching", "--no-webui", "--no-slots"]
    with Server(*args, "--log-level", "info", timeout=120) as s:
        s.wait_log(r"--gpu-layers 99 is ignored")
        st, props = get_json(s.port, "/props", headers=key)
        assert st == 200 and props["total_slots"] == 2 and props["model"] == "tiny", props
        d = props["default_generation_settings"]
        assert d["n_ctx"] == 128, d  # 256 over 2 slots, as llama-server splits -c
        assert d["params"]["n_predict"] == 5 and d["params"]["seed"] == 42 and d["params"]["temperature"] == 0, d
        assert d["params"]["top_k"] == 1, d
        assert post(s.port, "/completion", {"prompt": PROMPT})[0] == 401
        # the model list is public, as llama-server's /models and /v1/models
        for path in ("/models", "/v1/models"):
            st, doc = get_json(s.port, path)
            assert st == 200 and doc["data"][0]["id"] == "tiny", (path, doc)
        for ask in ({}, {"n_predict": 50}, {"n_predict": -1}):
            st, doc = post_json(s.port, "/completion", dict(ask, prompt=PROMPT), headers=key)
            assert st == 200 and doc["tokens_predicted"] == 5 and doc["model"] == "tiny", (ask, doc)
            assert doc["generation_settings"]["seed"] == 42, doc["generation_settings"]
        st, doc = post_json(s.port, "/completion", {"prompt": PROMPT, "n_predict": 3}, headers=key)
        assert doc["tokens_predicted"] == 3, doc
        # a prompt that fits the whole -c but not a slot's share is refused naming the share
        st, doc = post_json(s.port, "/completion", {"prompt": [1] + [403] * 140}, headers=key)
        assert st == 400 and "128" in doc["error"]["message"], doc


def test_pooling_flag():
    """llama-server's --pooling: every embedding model pools as it says. The demo encoder pools
    by mean; with --pooling cls /embed's vector (unnormalized) is /embed_all's [CLS] row, with
    last its [SEP] row, with mean the rows' mean (1e-5: f32 sums in another order). rank is
    --reranking (the demo has no head: refused at load); none and unknown names are refused."""
    text = "the cat sat on the mat"
    for pooling, pick in (("cls", lambda rows: rows[0]), ("last", lambda rows: rows[-1]),
                          ("mean", lambda rows: [sum(c) / len(rows) for c in zip(*rows)])):
        with Server("--demo", "--demo-dir", DEMO_DIR, "--pooling", pooling, "--log-level", "warn", timeout=120) as s:
            st, _, out = post(s.port, "/embed_all", {"inputs": text})
            rows = json.loads(out)[0]
            st2, _, out2 = post(s.port, "/embed", {"inputs": text, "normalize": False})
            got, want = json.loads(out2)[0], pick(rows)
            assert st == 200 and st2 == 200 and max(abs(a - b) for a, b in zip(got, want)) < 1e-5, (pooling, got[:4],
                                                                                                   want[:4])
            # and it is not the mean unless asked
            mean = [sum(c) / len(rows) for c in zip(*rows)]
            assert pooling == "mean" or max(abs(a - b) for a, b in zip(got, mean)) > 1e-3, pooling
    env = dict(os.environ, HEARTH_DEMO="0")
    for val, want in (("none", "/embed_all"), ("max", "mean, cls, last or rank")):
        r = subprocess.run([BIN, "serve", "--demo", "--demo-dir", DEMO_DIR, "--pooling", val, "--port", "0"],
                           capture_output=True, text=True, timeout=60, env=env)
        assert r.returncode == 2 and want in r.stderr, (val, r.returncode, r.stderr)
    r = subprocess.run([BIN, "serve", "--demo", "--demo-dir", DEMO_DIR, "--pooling", "rank", "--port", "0"],
                       capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode != 0 and "--reranking" in r.stderr, (r.returncode, r.stderr[-400:])


def test_threads_are_compute_threads():
    """llama-server's -t/--threads is the compute threads (hearth's I/O threads are --io-threads);
    -tb is the same pool in hearth, so it may only agree with -t."""
    with Server("-m", STORIES, "-t", "1", "--io-threads", "2", "--log-level", "info", timeout=120) as s:
        s.wait_log(r"compute pool: 1 threads")
        s.wait_log(r"1 worker x 2 I/O threads")
    with Server("-m", STORIES, "-tb", "1", "--log-level", "info", timeout=120) as s:
        s.wait_log(r"compute pool: 1 threads")
    assert "--threads-batch" in serve_fails("-m", STORIES, "-t", "2", "-tb", "1")
    assert "--io-threads" in serve_fails("-m", STORIES, "--io-threads", "0")


def serve_fails(*args):
    r = subprocess.run([BIN, "serve", "--port", "0", *args], capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, HEARTH_DEMO="0"))
    assert r.returncode != 0, (args, r.stdout, r.stderr)
    return r.stdout + r.stderr


# ---- context shift (--context-shift, off by default as in newer llama-server) ----

def truncated_len(n, n_ctx, n_keep):
    """The length llama-server truncates a prompt of n tokens to (server.cpp at c392e50):
    keep n_keep (at most n_ctx - 4), then drop blocks of (n_ctx - n_keep) / 2 from the middle."""
    keep = n if n_keep < 0 else n_keep
    keep = min(keep, n_ctx - 4)
    block = (n_ctx - keep) // 2
    erased = (n - keep - block) // block
    return n - erased * block


def test_context_shift():
    """With --context-shift (-c 256 over 2 slots: 128 each): a prompt past the context is
    truncated as llama-server truncates it; an answer that fills the context drops half of
    it after n_keep (and the BOS) and goes on, and the text after a shift is what the
    shifted history gives computed afresh; "truncated" says so. Without it, the 400 names
    llama-server's words, and an answer that fills the context ends there, truncated."""
    long_ids = [1] + [403 + (k % 50) for k in range(300)]
    with Server("-m", STORIES, "-c", "256", "-np", "2", "--context-shift", "--log-level", "info", timeout=120) as s:
        st, doc = post_json(s.port, "/completion", {"prompt": long_ids, "n_predict": 64, "temperature": 0})
        assert st == 200, doc
        assert doc["timings"]["prompt_n"] == truncated_len(301, 128, 0) == 109, doc["timings"]
        assert doc["tokens_evaluated"] == 109 and doc["timings"]["predicted_n"] == 64 and doc["truncated"] is True, doc
        st, doc = post_json(s.port, "/completion", {"prompt": long_ids, "n_predict": 4, "n_keep": 10, "temperature": 0})
        assert st == 200 and doc["tokens_evaluated"] == truncated_len(301, 128, 10), doc
        s.wait_log(r"prompt truncated")
        # a short prompt runs past the context: 200 tokens, more than one shift
        st, toks = post_json(s.port, "/tokenize", {"content": PROMPT, "add_special": True})
        p = toks["tokens"]
        n_keep = 3
        st, doc = post_json(s.port, "/completion", {"prompt": PROMPT, "n_predict": 200, "temperature": 0, "n_keep": n_keep,
                                                    "return_tokens": True, "cache_prompt": False, "n_probs": 3})
        assert st == 200 and doc["tokens_predicted"] == 200 and doc["truncated"] is True, doc
        assert doc["stop_type"] == "limit", doc
        gen = doc["tokens"]
        assert len(gen) == 200, gen
        s.wait_log(r"context shift: kept %d, dropped" % (n_keep + 1))
        # the first shift: the cache held 128 = prompt + gen[:k] when gen[k] was sampled; it
        # keeps BOS + n_keep, drops half the rest, then takes gen[k] at its new place
        k = 128 - len(p)
        hist = p + gen[:k]
        keep = n_keep + 1
        d = (128 - keep) // 2
        shifted = hist[:keep] + hist[keep + d:] + [gen[k]]
        st, fresh = post_json(s.port, "/completion", {"prompt": shifted, "n_predict": 3, "temperature": 0,
                                                      "return_tokens": True, "cache_prompt": False, "n_probs": 3})
        assert st == 200 and fresh["tokens"] == gen[k + 1:k + 4], (fresh["tokens"], gen[k + 1:k + 4])
        # stories260K repeats itself, so the ids alone hardly depend on what was dropped; the
        # numbers do: dropping one position more or less moved them by 0.096 (d + 1) and 0.71
        # (d - 1). The shifted cache is not the fresh one bit for bit (its K re-rotated in f16):
        # 1.7e-3 apart on an AVX2 machine (AMD EPYC, 2026-12-06), under 3e-4 on AVX-512 ones
        def tops(entries):
            return [t["logprob"] for e in entries for t in e["top_logprobs"]]
        got, want = tops(doc["completion_probabilities"][k + 1:k + 4]), tops(fresh["completion_probabilities"])
        assert len(got) == len(want) == 9 and max(abs(a - b) for a, b in zip(got, want)) < 1e-2, (got, want)
        # streamed: the last event says truncated
        st, _, body = post(s.port, "/completion", {"prompt": PROMPT, "n_predict": 150, "temperature": 0, "stream": True})
        ev = sse_events(body)
        assert ev[-1]["stop"] is True and ev[-1]["truncated"] is True and ev[-1]["tokens_predicted"] == 150, ev[-1]
        # an answer that fits is not truncated
        st, doc = post_json(s.port, "/completion", {"prompt": PROMPT, "n_predict": 8, "temperature": 0})
        assert doc["truncated"] is False, doc
    # off (the default; --no-context-shift says so): llama-server's 400, and an answer ends at the context
    with Server("-m", STORIES, "-c", "256", "-np", "2", "--no-context-shift", "--log-level", "warn", timeout=120) as s:
        st, doc = post_json(s.port, "/completion", {"prompt": long_ids, "n_predict": 4})
        assert st == 400 and "exceeds the available context size" in doc["error"]["message"], doc
        st, doc = post_json(s.port, "/completion", {"prompt": PROMPT, "n_predict": -1, "temperature": 0, "ignore_eos": True})
        assert st == 200 and doc["tokens_predicted"] == 128 - len(p) and doc["truncated"] is True, doc
        st, doc = post_json(s.port, "/completion", {"prompt": PROMPT, "n_predict": 8, "temperature": 0})
        assert doc["truncated"] is False, doc


# ---- post_sampling_probs ----

def test_post_sampling_probs():
    """n_probs with post_sampling_probs (llama-server's): the probabilities after the sampler
    chain, as "prob" and "top_probs" (no "logprob"): greedy, the chosen token has 1 and the
    others 0; sampled, the candidates that survived top-k/top-p/min-p, summing to 1."""
    port = srv().port
    st, doc = post_json(port, "/completion", {"prompt": PROMPT, "n_predict": 5, "temperature": 0, "n_probs": 10,
                                              "post_sampling_probs": True})
    assert st == 200 and len(doc["completion_probabilities"]) == 5, doc
    for tok in doc["completion_probabilities"]:
        assert "logprob" not in tok and "top_logprobs" not in tok, tok
        assert tok["prob"] == 1.0 and len(tok["top_probs"]) == 10, tok
        assert tok["top_probs"][0]["id"] == tok["id"] and tok["top_probs"][0]["prob"] == 1.0, tok
        assert all(p["prob"] == 0.0 and type(p["bytes"]) == list for p in tok["top_probs"][1:]), tok
    # without it, the same request gives log-probabilities before sampling
    st, pre = post_json(port, "/completion", {"prompt": PROMPT, "n_predict": 5, "temperature": 0, "n_probs": 10})
    assert all("logprob" in t and len(t["top_logprobs"]) == 10 for t in pre["completion_probabilities"]), pre
    assert [t["id"] for t in pre["completion_probabilities"]] == [t["id"] for t in doc["completion_probabilities"]]
    st, doc = post_json(port, "/completion", {"prompt": PROMPT, "n_predict": 8, "temperature": 1.0, "top_k": 5,
                                              "top_p": 1.0, "min_p": 0.0, "seed": 7, "n_probs": 10,
                                              "post_sampling_probs": True})
    for tok in doc["completion_probabilities"]:
        tops = tok["top_probs"]
        assert 1 <= len(tops) <= 5 and abs(sum(p["prob"] for p in tops) - 1.0) < 1e-4, tok
        assert 0.0 < tok["prob"] <= 1.0 and tok["id"] in [p["id"] for p in tops], tok
        assert [p["prob"] for p in tops] == sorted((p["prob"] for p in tops), reverse=True), tok
    st, _, body = post(port, "/completion", {"prompt": PROMPT, "n_predict": 3, "temperature": 0, "n_probs": 2,
                                             "post_sampling_probs": True, "stream": True})
    parts = [e for e in sse_events(body) if not e["stop"]]
    assert parts and all(p["prob"] == 1.0 and len(p["top_probs"]) == 2
                         for e in parts for p in e["completion_probabilities"]), parts
    st, doc = post_json(port, "/completion", {"prompt": PROMPT, "post_sampling_probs": 1})
    assert st == 400 and "post_sampling_probs" in doc["error"]["message"], doc
    # the context-shift fields refuse what they cannot mean, naming themselves
    for field, bad in (("n_keep", -2), ("n_keep", "all"), ("n_discard", -1), ("n_discard", 1.5)):
        st, doc = post_json(port, "/completion", {"prompt": PROMPT, "n_predict": 1, field: bad})
        assert st == 400 and field in doc["error"]["message"], (field, bad, doc)


# ---- /infill ----

def gguf_with_keys(src, dst, keys):
    """Copies the GGUF at src to dst with keys (name -> uint32) added to its metadata: the
    tensor data moves by the added bytes, padded again to the file's alignment (32: stories260K
    names none). A few lines of the GGUF v3 layout, so the test needs no converter."""
    import struct
    f = open(src, "rb").read()
    magic, version, n_tensors, n_kv = struct.unpack_from("<IIQQ", f, 0)
    assert magic == 0x46554747 and version == 3
    sizes = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}

    def skip_str(o):
        return o + 8 + struct.unpack_from("<Q", f, o)[0]

    def skip_val(t, o):
        if t == 8:
            return skip_str(o)
        if t == 9:
            at, n = struct.unpack_from("<IQ", f, o)
            o += 12
            for _ in range(n):
                o = skip_val(at, o)
            return o
        return o + sizes[t]
    o = 24
    for _ in range(n_kv):
        o = skip_str(o)
        t = struct.unpack_from("<I", f, o)[0]
        o = skip_val(t, o + 4)
    kv_end = o
    for _ in range(n_tensors):
        o = skip_str(o)
        n_dims = struct.unpack_from("<I", f, o)[0]
        o += 4 + 8 * n_dims + 4 + 8
    align = 32
    data = f[(o + align - 1) // align * align:]
    added = b"".join(struct.pack("<Q", len(k)) + k.encode() + struct.pack("<II", 4, v) for k, v in keys.items())
    head = struct.pack("<IIQQ", magic, version, n_tensors, n_kv + len(keys)) + f[24:kv_end] + added + f[kv_end:o]
    head += b"\0" * ((-len(head)) % align)
    with open(dst, "wb") as out:
        out.write(head + data)


def test_infill():
    """POST /infill as llama-server's: the prompt is [extra] BOS FIM_PRE prefix prompt FIM_SUF
    suffix FIM_MID (its format_infill's order and shares, here -b 64: the prefix's last 48
    ids, the suffix's first 16 - 2 - the prompt's), from the GGUF's fim_* keys or the older
    prefix/suffix/middle ones; the answer is /completion's, streamed too, the same as the
    built ids sent to /completion. A model without FIM tokens gets llama-server's 501."""
    PRE, SUF, MID, REP, SEP = 400, 401, 402, 403, 404
    d = scratch_dir("hearth-fim-")
    new = os.path.join(d, "fim.gguf")
    old = os.path.join(d, "fim-old.gguf")
    gguf_with_keys(STORIES, new, {"tokenizer.ggml.fim_pre_token_id": PRE, "tokenizer.ggml.fim_suf_token_id": SUF,
                                  "tokenizer.ggml.fim_mid_token_id": MID, "tokenizer.ggml.fim_rep_token_id": REP,
                                  "tokenizer.ggml.fim_sep_token_id": SEP})
    gguf_with_keys(STORIES, old, {"tokenizer.ggml.prefix_token_id": PRE, "tokenizer.ggml.suffix_token_id": SUF,
                                  "tokenizer.ggml.middle_token_id": MID})
    prefix = "Once upon a time, there was a little girl named Lily. She loved to play outside in the sun. " * 2
    suffix = "They were happy.\nThe end."
    body = {"input_prefix": prefix, "input_suffix": suffix, "prompt": "One day",
            "input_extra": [{"filename": "a.txt", "text": "Tom had a red ball."}, {"text": "The sky was blue."}],
            "n_predict": 6, "temperature": 0, "n_probs": 2}
    try:
        for path, has_sep in ((new, True), (old, False)):
            with Server("-m", path, "-c", "256", "-np", "1", "-b", "64", "--log-level", "warn", timeout=120) as s:
                def ids(text, special=False):
                    st, doc = post_json(s.port, "/tokenize", {"content": text, "add_special": False,
                                                              "parse_special": special})
                    return doc["tokens"]
                extra = []
                if has_sep:
                    extra = [REP] + ids("myproject\n")
                for chunk in body["input_extra"]:
                    extra += [SEP] + ids(chunk.get("filename", "tmp") + "\n") if has_sep else ids("\n\n--- snippet ---\n\n")
                    extra += ids(chunk["text"])
                if has_sep:
                    extra += [SEP] + ids("filename\n")
                pre, suf, prm = ids(prefix), ids(suffix), ids("One day", True)
                assert len(pre) > 48, len(pre)
                n_extra = min(256 - 64 + 2, len(extra))
                want = extra[len(extra) - n_extra:] + [1, PRE] + pre[-48:] + prm + [SUF] + suf[:max(0, 16 - 2 - len(prm))] + [MID]
                st, doc = post_json(s.port, "/infill", body)
                assert st == 200 and doc["tokens_evaluated"] == len(want), (doc, len(want))
                st, ref = post_json(s.port, "/completion", dict(body, prompt=want, input_extra=None))
                assert doc["content"] == ref["content"] and doc["tokens_predicted"] == 6, (doc, ref)
                assert doc["prompt"] == ref["prompt"], (doc["prompt"], ref["prompt"])
                def tops(d):  # ids exact, numbers to 1e-4 (the second run reuses the cached prompt)
                    return [(t["id"], round(t["logprob"], 4)) for p in d["completion_probabilities"] for t in p["top_logprobs"]]
                assert tops(doc) == tops(ref), (tops(doc), tops(ref))
                st, _, raw = post(s.port, "/infill", dict(body, stream=True))
                ev = sse_events(raw)
                assert st == 200 and ev[-1]["stop"] is True, ev
                assert "".join(e["content"] for e in ev) == doc["content"], ev
                # llama-server's 400s
                for bad in ([{}], [{"filename": "ok"}], [{"filename": 123, "text": "abc"}], "x"):
                    st, e = post_json(s.port, "/infill", dict(body, input_extra=bad))
                    assert st == 400 and "error" in e, (bad, e)
                st, e = post_json(s.port, "/infill", {"input_prefix": "a"})
                assert st == 400 and "input_suffix" in e["error"]["message"], e
                st, e = post_json(s.port, "/infill", dict(body, prompt=[1, 2]))
                assert st == 400 and "prompt" in e["error"]["message"], e
    finally:
        shutil.rmtree(d, ignore_errors=True)
    st, e = post_json(srv().port, "/infill", body)
    assert st == 501 and e["error"]["type"] == "not_supported_error", e
    assert e["error"]["message"] == ("Infill is not supported by this model: prefix token is missing. "
                                     "suffix token is missing. middle token is missing. "), e


def test_flags_hearth_cannot_honour_are_refused():
    """A llama-server flag hearth cannot honour stops the start with a message naming it."""
    assert "/embed_all" in serve_fails("-m", STORIES, "--pooling", "none")
    assert "Jinja" in serve_fails("-m", STORIES, "--chat-template", "{% for m in messages %}{{ m.content }}{% endfor %}")
    assert "BERT" in serve_fails("-m", STORIES, "--embedding")
    assert "--ctx-size" in serve_fails("-m", STORIES, "-c", "3", "-np", "4")
    assert "--seed" in serve_fails("-m", STORIES, "--seed", "x")
    assert "--temp" in serve_fails("-m", STORIES, "--temp", "hot")
    assert "--webui" in serve_fails("-m", STORIES, "--webui")
    assert "--no-cont-batching" in serve_fails("-m", STORIES, "--no-cont-batching")
    assert "--hf-repo" in serve_fails("--hf-repo", "ggml-org/models")


TESTS = [test_continuation_keeps_its_leading_space, test_text_from_bos_alone_is_golden,
         test_lone_model_answers_any_name, test_several_models_route_by_name, test_alias_names_the_served_model,
         test_chat_falls_back_to_chatml, test_models_route, test_completions_route_is_completion,
         test_embedding_routes_llama_shape, test_completion_fields, test_completion_stream_fields,
         test_chat_stream_last_chunk, test_response_fields_and_props, test_several_prompts,
         test_openai_logprobs, test_llama_server_command_line, test_context_shift, test_post_sampling_probs,
         test_infill,
         test_flags_hearth_cannot_honour_are_refused, test_pooling_flag, test_threads_are_compute_threads, test_servers_exit_cleanly]

if __name__ == "__main__":
    try:
        run(TESTS)
    finally:
        for held in (Main, Demo):
            if held.srv is not None:
                held.srv.stop()
