"""The embedding APIs over HTTP, on the demo encoder (MiniLM-L6 shapes, random
weights, written by hearth itself): TEI's /embed and /tokenize, OpenAI's
/v1/embeddings, every bad input and its 4xx, the queue bound (429), and
concurrent requests that must not mix their vectors."""
import base64
import json
import math
import os
import struct
import subprocess
import sys
import threading

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from hearth_test import BIN, Conn, Server, request, run, scratch_dir  # noqa: E402

DEMO_DIR = scratch_dir("hearth-demo-")
DEMO = "demo-minilm-l6"
DIM = 384
SENTENCES = ["the quick brown fox jumps over the lazy dog near the river",
             "a b c",
             "hello world",
             "embedding servers batch requests from many clients into one forward pass"]


def post(port, path, doc, raw=None):
    body = raw if raw is not None else json.dumps(doc).encode()
    st, h, out = request(port, "POST", path, body=body, headers={"Content-Type": "application/json"}, timeout=60)
    return st, (json.loads(out) if out else None)


def norm(v):
    return math.sqrt(sum(x * x for x in v))


def server(*args):
    return Server("--demo", "--demo-dir", DEMO_DIR, "--log-level", "warn", *args, timeout=120)


def run_clients(client, n):
    """client(k) on n threads at once; the exceptions they raised, as text."""
    errors = []

    def guarded(k):
        try:
            client(k)
        except Exception as e:  # noqa: BLE001
            errors.append(repr(e))
    th = [threading.Thread(target=guarded, args=(k,)) for k in range(n)]
    for t in th:
        t.start()
    for t in th:
        t.join()
    return errors


def check_error(st, doc, status, *needles):
    assert st == status, (st, doc)
    err = doc["error"]
    assert err["code"] == status and err["message"], doc
    for n in needles:
        assert n in err["message"], (n, err["message"])


def test_models_lists_the_demo():
    with server() as srv:
        st, _, body = request(srv.port, "GET", "/v1/models")
        data = json.loads(body)["data"]
        by_id = {m["id"]: m for m in data}
        assert set(by_id) == {DEMO, "demo-llama-tiny"}, data  # one demo per model family
        assert by_id[DEMO]["meta"]["demo"] is True and by_id[DEMO]["meta"]["family"] == "embedding"
        assert by_id["demo-llama-tiny"]["meta"]["family"] == "generation"


def test_tei_embed_shapes_normalization_and_batch_invariance():
    with server() as srv:
        st, one = post(srv.port, "/embed", {"inputs": SENTENCES[0]})
        assert st == 200 and len(one) == 1 and len(one[0]) == DIM, (st, one if st != 200 else len(one))
        assert abs(norm(one[0]) - 1) < 1e-5  # normalize defaults to true
        st, raw = post(srv.port, "/embed", {"inputs": SENTENCES[0], "normalize": False})
        assert st == 200 and abs(norm(raw[0]) - 1) > 1e-3
        # the same direction, normalized or not
        n = norm(raw[0])
        assert max(abs(a - b / n) for a, b in zip(one[0], raw[0])) < 1e-5
        st, many = post(srv.port, "/embed", {"inputs": SENTENCES})
        assert st == 200 and len(many) == len(SENTENCES)
        # each sentence gives the same vector in a batch of different lengths as alone
        for i, s in enumerate(SENTENCES):
            st, alone = post(srv.port, "/embed", {"inputs": [s]})
            diff = max(abs(a - b) for a, b in zip(alone[0], many[i]))
            assert diff < 1e-5, (i, diff)


def test_openai_embeddings():
    with server() as srv:
        st, doc = post(srv.port, "/v1/embeddings", {"input": SENTENCES[:2], "model": DEMO})
        assert st == 200, doc
        assert doc["object"] == "list" and doc["model"] == DEMO
        assert [d["index"] for d in doc["data"]] == [0, 1] and doc["data"][0]["object"] == "embedding"
        assert all(abs(norm(d["embedding"]) - 1) < 1e-5 for d in doc["data"])
        assert doc["usage"]["prompt_tokens"] == doc["usage"]["total_tokens"] > 4
        st, b64 = post(srv.port, "/v1/embeddings", {"input": SENTENCES[:2], "encoding_format": "base64"})
        assert st == 200
        for d, f in zip(b64["data"], doc["data"]):
            vals = struct.unpack("<%df" % DIM, base64.b64decode(d["embedding"]))
            assert max(abs(a - b) for a, b in zip(vals, f["embedding"])) < 1e-6
        st, short = post(srv.port, "/v1/embeddings", {"input": "hello world", "dimensions": 64})
        v = short["data"][0]["embedding"]
        assert st == 200 and len(v) == 64 and abs(norm(v) - 1) < 1e-5
        # token ids: the ids /tokenize gives for a text embed like the text itself
        st, toks = post(srv.port, "/tokenize", {"inputs": "hello world", "add_special_tokens": False})
        ids = [t["id"] for t in toks[0]]
        st, by_ids = post(srv.port, "/v1/embeddings", {"input": [ids]})
        st2, by_text = post(srv.port, "/v1/embeddings", {"input": "hello world"})
        assert st == 200 and st2 == 200
        assert max(abs(a - b) for a, b in zip(by_ids["data"][0]["embedding"], by_text["data"][0]["embedding"])) < 1e-6


def test_tokenize():
    with server() as srv:
        st, toks = post(srv.port, "/tokenize", {"inputs": ["hello world", "a"]})
        assert st == 200 and len(toks) == 2
        assert toks[0][0]["special"] and toks[0][-1]["special"] and not toks[0][1]["special"], toks
        st, plain = post(srv.port, "/tokenize", {"inputs": "hello world", "add_special_tokens": False})
        assert [t["id"] for t in plain[0]] == [t["id"] for t in toks[0][1:-1]]
        # TEI's shape: specials with their vocabulary text and null offsets;
        # other tokens with the input's byte range and that slice as text
        # (lowercasing and accent stripping do not show; "##" does not either)
        text = "Hello, café World!"
        st, toks = post(srv.port, "/tokenize", {"inputs": text})
        assert st == 200, toks
        got = [(t["text"], t["special"], t["start"], t["stop"]) for t in toks[0]]
        # (this vocabulary has no "cafe": c ##a ##f ##e, the last from é's two bytes)
        assert got == [("[CLS]", True, None, None), ("Hello", False, 0, 5), (",", False, 5, 6),
                       ("c", False, 7, 8), ("a", False, 8, 9), ("f", False, 9, 10), ("é", False, 10, 12),
                       ("World", False, 13, 18), ("!", False, 18, 19), ("[SEP]", True, None, None)], got
        raw = text.encode()
        for t in toks[0][1:-1]:
            assert raw[t["start"]:t["stop"]].decode() == t["text"], t


def test_embed_all():
    # TEI's /embed_all: every token's last-layer vector, [CLS] and [SEP]
    # included, as many as /tokenize gives; the demo pools by mean, so their
    # mean is /embed's vector before normalization.
    with server() as srv:
        p = srv.port
        texts = [SENTENCES[0], "hello world"]
        st, all_ = post(p, "/embed_all", {"inputs": texts})
        assert st == 200 and len(all_) == 2, (st, all_ if st != 200 else len(all_))
        st, toks = post(p, "/tokenize", {"inputs": texts})
        assert [len(a) for a in all_] == [len(t) for t in toks], ([len(a) for a in all_], [len(t) for t in toks])
        assert all(len(v) == DIM for a in all_ for v in a)
        st, pooled = post(p, "/embed", {"inputs": texts, "normalize": False})
        for a, want in zip(all_, pooled):
            mean = [sum(col) / len(a) for col in zip(*a)]
            assert max(abs(x - y) for x, y in zip(mean, want)) < 1e-5  # f32 sums of ~15 rows, in another order
        st, alone = post(p, "/embed_all", {"inputs": "hello world"})
        assert st == 200 and max(abs(x - y) for u, w in zip(alone[0], all_[1]) for x, y in zip(u, w)) < 1e-6
        check_error(*post(p, "/embed_all", {"inputs": []}), 400, "empty")


def test_similarity():
    # TEI's /similarity: the cosine of the source sentence's embedding and
    # each sentence's, the same as the dot products of /embed's unit vectors
    with server("--max-client-batch", "4") as srv:
        p = srv.port
        src, others = SENTENCES[0], [SENTENCES[0], SENTENCES[1], SENTENCES[3]]
        st, sims = post(p, "/similarity", {"inputs": {"source_sentence": src, "sentences": others}})
        assert st == 200 and len(sims) == 3, sims
        st, vecs = post(p, "/embed", {"inputs": [src] + others})
        want = [sum(a * b for a, b in zip(vecs[0], v)) for v in vecs[1:]]
        assert max(abs(a - b) for a, b in zip(sims, want)) < 1e-5, (sims, want)  # f32 vectors, dots in double
        assert abs(sims[0] - 1) < 1e-5 and sims[1] < 0.9999, sims
        long_text = " ".join(["word"] * 2000)
        body = {"inputs": {"source_sentence": long_text, "sentences": ["a"]}, "parameters": {"truncate": True}}
        assert post(p, "/similarity", body)[0] == 200
        check_error(*post(p, "/similarity", {"inputs": {"source_sentence": long_text, "sentences": ["a"]}}), 413, "at most 256")
        check_error(*post(p, "/similarity", {"inputs": ["a", "b"]}), 400, "source_sentence")
        check_error(*post(p, "/similarity", {"inputs": {"source_sentence": "a"}}), 400, "sentences")
        check_error(*post(p, "/similarity", {"inputs": {"source_sentence": "a", "sentences": []}}), 400, "sentences")
        check_error(*post(p, "/similarity", {"inputs": {"source_sentence": "a", "sentences": ["b", 2]}}), 400, "sentences[1]")
        check_error(*post(p, "/similarity", {"inputs": {"source_sentence": 1, "sentences": ["b"]}}), 400, "source_sentence")
        check_error(*post(p, "/similarity", {"inputs": {"source_sentence": "a", "sentences": ["b"] * 4}}), 413, "at most 4")
        check_error(*post(p, "/similarity", {"inputs": {"source_sentence": "a", "sentences": ["b"]}, "parameters": 3}),
                    400, "parameters")


def test_decode_and_info():
    with server("--max-client-batch", "4") as srv:
        p = srv.port
        # /decode gives back what /tokenize took, as Hugging Face decodes:
        # lowercased, "##" pieces joined, no space before , ! . (but around ')
        text = "Hello, world! It's unaffable."
        st, toks = post(p, "/tokenize", {"inputs": [text, "a b c"]})
        assert st == 200, toks
        ids = [[t["id"] for t in seq] for seq in toks]
        st, texts = post(p, "/decode", {"ids": ids})
        assert st == 200 and texts == ["hello, world! it ' s unaffable.", "a b c"], texts
        st, one = post(p, "/decode", {"ids": ids[1], "skip_special_tokens": False})
        assert st == 200 and one == ["[CLS] a b c [SEP]"], one
        check_error(*post(p, "/decode", {"ids": [1, 30522]}), 400, "30522")
        check_error(*post(p, "/decode", {"ids": "hello"}), 400, "ids")
        check_error(*post(p, "/decode", {"ids": [[1], "x"]}), 400, "ids[1]")
        check_error(*post(p, "/decode", {"ids": []}), 400, "empty")
        check_error(*post(p, "/decode", {"ids": [1], "skip_special_tokens": 1}), 400, "skip_special_tokens")
        check_error(*post(p, "/decode", {"ids": [[1]] * 5}), 413, "at most 4")
        # /info: TEI's shape, with this server's limits
        st, _, body = request(p, "GET", "/info")
        info = json.loads(body)
        assert st == 200, info
        assert info["model_id"] == DEMO and info["model_dtype"] == "float32", info
        assert info["model_type"] == {"embedding": {"pooling": "mean"}}, info
        assert info["max_input_length"] == 256 and info["max_client_batch_size"] == 4, info
        assert info["max_batch_tokens"] > 0 and info["max_concurrent_requests"] > 0 and info["version"], info


def prompt_folder():
    """The demo encoder's folder (written by an earlier test's server) with a
    config_sentence_transformers.json of three prompts, "passage" the
    default: a copy whose weights file is a link to the demo's."""
    src = [os.path.join(DEMO_DIR, d) for d in os.listdir(DEMO_DIR) if d.startswith("demo-minilm")]
    assert src, "no demo encoder folder in %s" % DEMO_DIR
    dst = scratch_dir("hearth-prompts-")
    for root, _, files in os.walk(src[0]):
        rel = os.path.relpath(root, src[0])
        os.makedirs(os.path.join(dst, rel), exist_ok=True)
        for f in files:
            a, b = os.path.join(root, f), os.path.join(dst, rel, f)
            if f == "model.safetensors":
                os.symlink(a, b)
            else:
                with open(a, "rb") as i, open(b, "wb") as o:
                    o.write(i.read())
    with open(os.path.join(dst, "config_sentence_transformers.json"), "w") as f:
        json.dump({"prompts": {"query": "query: ", "passage": "passage: ", "plain": ""},
                   "default_prompt_name": "passage", "similarity_fn_name": "cosine"}, f)
    return dst


def test_prompts():
    # sentence-transformers' prompts: "prompt_name" puts the named prompt
    # before every text input; without one the model's default_prompt_name
    # applies (to OpenAI's API too). "plain" (an empty prompt) gives the text
    # as sent, to compare with.
    with server() as srv:  # writes the demo folder
        check_error(*post(srv.port, "/embed", {"inputs": "hello", "prompt_name": "query"}), 400, "no prompts")
    with Server("--model", "e5=" + prompt_folder(), "--log-level", "warn", timeout=120) as srv:
        p = srv.port

        def emb(text, prompt=None):
            body = {"inputs": text}
            if prompt is not None:
                body["prompt_name"] = prompt
            st, doc = post(p, "/embed", body)
            assert st == 200, doc
            return doc[0]

        def diff(a, b):
            return max(abs(x - y) for x, y in zip(a, b))
        default = emb("hello world")
        assert diff(default, emb("passage: hello world", "plain")) < 1e-6
        query = emb("hello world", "query")
        assert diff(query, emb("query: hello world", "plain")) < 1e-6
        assert diff(query, default) > 1e-3
        st, oa = post(p, "/v1/embeddings", {"input": "hello world"})
        assert st == 200 and diff(oa["data"][0]["embedding"], default) < 1e-6, oa
        # /tokenize: the tokens, offsets and texts of prompt + input
        st, toks = post(p, "/tokenize", {"inputs": "hi", "prompt_name": "query"})
        st2, plain = post(p, "/tokenize", {"inputs": "query: hi", "prompt_name": "plain"})
        assert st == 200 and st2 == 200 and toks == plain and toks[0][-2]["text"] == "i", (toks, plain)
        check_error(*post(p, "/embed", {"inputs": "x", "prompt_name": "nope"}), 400, "nope", "query, passage, plain")
        check_error(*post(p, "/embed", {"inputs": "x", "prompt_name": 3}), 400, "prompt_name")
        ref = {t: emb(t, "plain") for t in ("query: hello world", "search: hello world")}
    folder = prompt_folder()
    # TEI's flags override the model's default; a request's prompt_name still wins
    with Server("--model", "e5=" + folder, "--default-prompt-name", "query", "--log-level", "warn", timeout=120) as srv:
        p = srv.port
        assert diff(emb("hello world"), ref["query: hello world"]) < 1e-6
        assert diff(emb("query: hello world", "plain"), ref["query: hello world"]) < 1e-6
    with Server("--model", "e5=" + folder, "--default-prompt", "search: ", "--log-level", "warn", timeout=120) as srv:
        p = srv.port
        assert diff(emb("hello world"), ref["search: hello world"]) < 1e-6
    bad = subprocess.run([BIN, "serve", "--model", "e5=" + folder, "--default-prompt-name", "nope", "--port", "0"],
                         capture_output=True, text=True, timeout=60, env=dict(os.environ, HEARTH_DEMO="0"))
    assert bad.returncode != 0 and "'nope' is not one of its prompts (query, passage, plain)" in bad.stderr, bad.stderr


def test_bad_inputs():
    with server("--max-client-batch", "4") as srv:
        p = srv.port
        check_error(*post(p, "/embed", None, raw=b""), 400, "empty")
        check_error(*post(p, "/embed", None, raw=b"{not json"), 400, "JSON")
        check_error(*post(p, "/embed", None, raw=b"[1,2]"), 400, "object")
        check_error(*post(p, "/embed", {}), 400, "inputs")
        check_error(*post(p, "/embed", {"inputs": 5}), 400, "inputs")
        check_error(*post(p, "/embed", {"inputs": []}), 400, "empty")
        check_error(*post(p, "/embed", {"inputs": ["ok", 3]}), 400, "inputs[1]")
        check_error(*post(p, "/embed", {"inputs": "x", "normalize": "yes"}), 400, "normalize")
        check_error(*post(p, "/embed", {"inputs": ["a"] * 5}), 413, "at most 4")
        bad_utf8 = b'{"inputs": "caf\xc3"}'
        check_error(*post(p, "/embed", None, raw=bad_utf8), 400, "offset")
        long_text = " ".join(["word"] * 2000)
        st, doc = post(p, "/embed", {"inputs": long_text})
        check_error(st, doc, 413, "tokens", "at most 256")  # names the length and the model's limit
        st, doc = post(p, "/embed", {"inputs": long_text, "truncate": True})
        assert st == 200 and len(doc[0]) == DIM
        # /tokenize counts past the limit, as TEI's: every token, as many as
        # /embed's 413 says the text has
        st, toks = post(p, "/tokenize", {"inputs": long_text})
        assert st == 200 and len(toks[0]) > 256, (st, toks)
        check_error(*post(p, "/embed", {"inputs": long_text}), 413, "is %d tokens" % len(toks[0]))
        check_error(*post(p, "/embed", {"inputs": "x", "truncation_direction": "Up"}), 400, "truncation_direction")
        check_error(*post(p, "/embed", {"inputs": "x", "truncation_direction": 1}), 400, "truncation_direction")
        # the one encoder served answers any name, as llama-server's does (several: a 404 naming it)
        st, doc = post(p, "/v1/embeddings", {"input": "x", "model": "nope"})
        assert st == 200 and doc["model"] == DEMO, doc
        check_error(*post(p, "/v1/embeddings", {"input": "x", "encoding_format": "hex"}), 400, "encoding_format")
        check_error(*post(p, "/v1/embeddings", {"input": "x", "dimensions": 0}), 400, "dimensions")
        check_error(*post(p, "/v1/embeddings", {"input": "x", "dimensions": 385}), 400, "dimensions")
        check_error(*post(p, "/v1/embeddings", {"input": [[1, 2, 99999999]]}), 400, "token")
        check_error(*post(p, "/v1/embeddings", {"input": [[]]}), 400, "empty")
        check_error(*post(p, "/v1/embeddings", {"input": {"a": 1}}), 400, "input")
        check_error(*post(p, "/v1/embeddings", {"input": long_text}), 413, "at most 256")
        # still serving
        assert post(p, "/embed", {"inputs": "fine"})[0] == 200


def test_truncation_direction():
    # The demo takes 256 tokens: 300 words, of which the first 40 or the last
    # 40 differ between the two texts. Cut from the left (TEI's "Left") the
    # texts keep their common tail, so they embed alike; cut from the right
    # they keep their common head. A text that fits is not cut either way.
    head, tail = ["alpha"] * 40, ["omega"] * 40
    common = ["word"] * 260
    texts = {"a_head": " ".join(head + common), "b_head": " ".join(["beta"] * 40 + common),
             "a_tail": " ".join(common + tail), "b_tail": " ".join(common + ["beta"] * 40)}
    with server() as srv:
        def emb(text, direction):
            body = {"inputs": text, "truncate": True}
            if direction:
                body["truncation_direction"] = direction
            st, doc = post(srv.port, "/embed", body)
            assert st == 200, doc
            return doc[0]

        def diff(a, b):
            return max(abs(x - y) for x, y in zip(a, b))
        assert diff(emb(texts["a_head"], "Left"), emb(texts["b_head"], "left")) < 1e-6
        assert diff(emb(texts["a_tail"], "Right"), emb(texts["b_tail"], None)) < 1e-6
        assert diff(emb(texts["a_tail"], "Left"), emb(texts["b_tail"], "Left")) > 1e-3
        assert diff(emb(texts["a_head"], "Right"), emb(texts["b_head"], "Right")) > 1e-3
        assert diff(emb(SENTENCES[0], "Left"), emb(SENTENCES[0], "Right")) < 1e-6


def test_concurrent_requests_keep_their_own_vectors():
    with server() as srv:
        expected = {}
        for s in SENTENCES:
            expected[s] = post(srv.port, "/embed", {"inputs": s})[1][0]

        def client(k):
            for r in range(4):
                s = SENTENCES[(k + r) % len(SENTENCES)]
                st, doc = post(srv.port, "/embed", {"inputs": [s, SENTENCES[0]]})
                assert st == 200, doc
                assert max(abs(a - b) for a, b in zip(doc[0], expected[s])) < 1e-5
                assert max(abs(a - b) for a, b in zip(doc[1], expected[SENTENCES[0]])) < 1e-5
        errors = run_clients(client, 6)
        assert not errors, errors[:3]


def test_engines_give_the_vectors_of_one_engine():
    """Two one-thread engines under concurrent load (narrow passes, lone
    requests run wide) answer what one two-thread engine does. Not bit for
    bit: a sentence alone (under 12 rows) takes the matmul's row dots, in a
    batch the GEMM, which sum in another order (~1e-8 here); a vector of
    another sentence would be ~1e-1 off."""
    texts = SENTENCES + ["sentence number %d of the engine test" % i for i in range(12)]
    with server("--compute-threads", "2", "--embed-engines", "1") as srv:
        want = {t: post(srv.port, "/embed", {"inputs": t})[1][0] for t in texts}
    with server("--compute-threads", "2", "--embed-engines", "2") as srv:
        got = {}

        def client(k):
            for r in range(6):
                batch = [texts[(k * 3 + r + j) % len(texts)] for j in range(1 + r % 3)]
                st, doc = post(srv.port, "/embed", {"inputs": batch})
                assert st == 200, doc
                for t, v in zip(batch, doc):
                    got.setdefault(t, []).append(v)
        errors = run_clients(client, 6)
        assert not errors, errors[:3]
        metrics = request(srv.port, "GET", "/metrics")[2].decode()
    assert len(got) == len(texts)
    for t, vs in got.items():
        for v in vs:
            assert max(abs(a - b) for a, b in zip(v, want[t])) <= 1e-6, t  # float order only
    batches = [ln for ln in metrics.splitlines() if ln.startswith("hearth_embed_batches_total")]
    assert batches and int(batches[0].split()[-1]) > 1, batches


def test_queue_bound_gives_429_and_disconnects_are_harmless():
    with server("--max-concurrent-requests", "1") as srv:
        big = {"inputs": [" ".join(["word"] * 20)] * 16, "truncate": True}
        body = json.dumps(big).encode()
        conns = []
        for _ in range(12):
            c = Conn(srv.port, timeout=60)
            c.send(b"POST /embed HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
            conns.append(c)
        statuses = []
        for c in conns:
            st, h, out = c.response()
            statuses.append(st)
            if st == 429:
                assert json.loads(out)["error"]["code"] == 429
            c.close()
        assert 429 in statuses and 200 in statuses, statuses
        # a client that leaves before its answer does not disturb the next
        for _ in range(5):
            c = Conn(srv.port)
            c.send(b"POST /embed HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
            c.close()
        import time
        deadline = time.time() + 30
        while post(srv.port, "/embed", {"inputs": "still here"})[0] != 200:  # 429 while the queue drains
            assert time.time() < deadline, "the queue never drained"
            time.sleep(0.1)


if __name__ == "__main__":
    run([test_models_lists_the_demo, test_tei_embed_shapes_normalization_and_batch_invariance, test_openai_embeddings,
         test_tokenize, test_embed_all, test_similarity, test_decode_and_info, test_prompts, test_bad_inputs, test_truncation_direction, test_concurrent_requests_keep_their_own_vectors,
         test_engines_give_the_vectors_of_one_engine, test_queue_bound_gives_429_and_disconnects_are_harmless])
