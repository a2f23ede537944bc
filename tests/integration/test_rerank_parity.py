"""Reranking: hearth serve's cross-encoder scores against transformers.

A random-weight BertForSequenceClassification folder (MiniLM-L6 shapes, one
label, the real bert-base-uncased vocab) is written by `hearth convert --demo
--reranker`, and converted to llama.cpp's RANK GGUF by `hearth convert`. The
reference (tests/ref/rerank_ref.py) loads the folder with transformers'
BertForSequenceClassification and BertTokenizer, so hearth's pair
tokenization, token types and head are all checked against code that is not
hearth's. Checks, with the tolerances beside them:
  - /rerank (folder): each relevance_score within 1e-4 of the reference
    logit (fp32 both; the logits are ~0.1-1), results sorted, usage tokens
    equal to the reference's ids (truncation included);
  - token type 1 is used: the reference's type-0-only logits differ from the
    right ones by > 1e-3 for every pair, 10x the tolerance;
  - the GGUF: its metadata and head tensors, and scores within 1e-4 of the
    reference at its own limit (512 positions; the folder's is 256);
  - every route alias, top_n, return_documents, TEI's shape (sigmoid scores,
    raw_scores, return_text), the error cases, --reranking on an encoder.
"""
import json
import math
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
sys.path.insert(0, os.path.join(HERE, "..", "ref"))
import gguf_py  # noqa: E402
import hearth_test  # noqa: E402
from hearth_test import BIN, Server, post_json, request, scratch_dir  # noqa: E402

VOCAB = os.path.join(hearth_test.SHARED, "vocab", "bert-base-uncased-vocab.txt")
REF = os.path.join(HERE, "..", "ref", "rerank_ref.py")
TMP = scratch_dir("hearth-rerank-")
XENC = os.path.join(TMP, "xenc")
ENC = os.path.join(TMP, "enc")
TOL = 1e-4  # |hearth - transformers| per logit, fp32

QUERY = "What is machine learning?"
DOCS = [
    "Machine learning is a field of study in artificial intelligence.",
    "Paris, capitale de la France, est une grande ville européenne.",
    "a",
    "Learning is the process of acquiring new understanding, knowledge, behaviors and skills.",
    # ~600 tokens: cut to fit both the folder's 256 and the GGUF's 512
    " ".join(["statistical algorithms learn from data and generalize to unseen data"] * 60),
]

_cache = {}


def sh(*args, timeout=300):
    p = subprocess.run(list(args), capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        raise AssertionError("%s failed (%d):\n%s" % (" ".join(args), p.returncode, p.stderr[-3000:]))
    return p.stdout


def xenc():
    if not os.path.exists(XENC):
        sh(BIN, "convert", "--demo", XENC, "--seed", "11", "--vocab", VOCAB, "--reranker")
    return XENC


def gguf():
    path = os.path.join(TMP, "xenc.gguf")
    if not os.path.exists(path):
        sh(BIN, "convert", xenc(), path)
    return path


def reference(max_length):
    if max_length not in _cache:
        pairs = os.path.join(TMP, "pairs.json")
        out = os.path.join(TMP, "ref-%d.json" % max_length)
        with open(pairs, "w") as f:
            json.dump([[QUERY, d] for d in DOCS], f)
        try:
            import transformers  # noqa: F401
        except ImportError:
            raise AssertionError("the reference needs transformers: run scripts/deps.sh (build/venv)")
        sh(sys.executable, REF, xenc(), pairs, out, "--max-length", str(max_length))
        with open(out) as f:
            _cache[max_length] = json.load(f)
    return _cache[max_length]


def serve(*models, extra=()):
    args = []
    for m in models:
        args += ["-m", m]
    return Server(*args, "--log-level", "warn", *extra, timeout=120)


def check_scores(results, ref, what):
    assert sorted(r["index"] for r in results) == list(range(len(DOCS))), results
    got = [r["relevance_score"] for r in results]
    assert got == sorted(got, reverse=True), "%s: not sorted: %s" % (what, got)
    for r in results:
        want = ref["scores"][r["index"]]
        assert abs(r["relevance_score"] - want) <= TOL, "%s: doc %d: %r vs reference %r (tol %g)" % (
            what, r["index"], r["relevance_score"], want, TOL)


def test_folder_matches_reference():
    ref = reference(256)
    assert len(ref["ids"][4]) == 256, len(ref["ids"][4])  # the long document was cut
    with serve(xenc()) as s:
        st, out = post_json(s.port, "/rerank", {"query": QUERY, "documents": DOCS})
    assert st == 200, out
    assert out["object"] == "list" and out["model"] == "xenc", out
    check_scores(out["results"], ref, "folder")
    n = sum(len(i) for i in ref["ids"])
    assert out["usage"] == {"prompt_tokens": n, "total_tokens": n}, (out["usage"], n)


def test_token_type_one_is_used():
    ref = reference(256)
    for i, (a, b) in enumerate(zip(ref["scores"], ref["scores_type0"])):
        assert abs(a - b) > 10 * TOL, "doc %d: type 1 changes the logit by only %g" % (i, abs(a - b))
    # and hearth's scores are the type-1 ones (test_folder_matches_reference), within TOL


def test_gguf_contents_and_scores():
    g = gguf_py.GGUF(gguf())
    md = g.metadata
    assert md["general.architecture"] == "bert" and md["bert.pooling_type"] == 4, md.get("bert.pooling_type")
    assert g.tensor("cls.weight").shape == (384, 384) and g.tensor("cls.bias").shape == (384,)
    assert g.tensor("cls.output.weight").shape == (1, 384) and g.tensor("cls.output.bias").shape == (1,)
    with serve(gguf()) as s:
        st, out = post_json(s.port, "/v1/rerank", {"query": QUERY, "documents": DOCS})
    assert st == 200, out
    check_scores(out["results"], reference(512), "gguf")


def test_routes_top_n_and_documents():
    ref = reference(256)
    order = sorted(range(len(DOCS)), key=lambda i: -ref["scores"][i])
    with serve(xenc()) as s:
        for path in ("/rerank", "/reranking", "/v1/rerank", "/v1/reranking"):
            st, out = post_json(s.port, path, {"query": QUERY, "documents": DOCS, "top_n": 2, "model": "xenc"})
            assert st == 200, (path, out)
            assert [r["index"] for r in out["results"]] == order[:2], (path, out["results"], order)
        st, out = post_json(s.port, "/rerank", {"query": QUERY, "documents": DOCS, "top_n": 0})
        assert st == 200 and out["results"] == [], out
        st, out = post_json(s.port, "/rerank", {"query": QUERY, "documents": DOCS[:2], "return_documents": True})
        assert st == 200, out
        for r in out["results"]:
            assert r["document"] == {"text": DOCS[r["index"]]}, r
        st, out = post_json(s.port, "/rerank", {"query": QUERY, "documents": DOCS[:2]})
        assert "document" not in out["results"][0], out
        st, info = hearth_test.get_json(s.port, "/info")
        assert st == 200 and "reranker" in info["model_type"], info  # TEI's clients read the model type here


def test_tei_shape():
    ref = reference(256)
    with serve(xenc()) as s:
        st, out = post_json(s.port, "/rerank", {"query": QUERY, "texts": DOCS})
        assert st == 200 and isinstance(out, list) and len(out) == len(DOCS), out
        scores = [r["score"] for r in out]
        assert scores == sorted(scores, reverse=True), scores
        for r in out:
            want = 1 / (1 + math.exp(-ref["scores"][r["index"]]))
            assert abs(r["score"] - want) <= TOL and "text" not in r, (r, want)
        st, out = post_json(s.port, "/rerank", {"query": QUERY, "texts": DOCS, "raw_scores": True, "return_text": True})
        assert st == 200, out
        for r in out:
            assert abs(r["score"] - ref["scores"][r["index"]]) <= TOL and r["text"] == DOCS[r["index"]], r


def check_error(st, out, status, *needles):
    assert st == status, (st, out)
    msg = out["error"]["message"]
    for n in needles:
        assert n in msg, (n, msg)


def test_errors():
    sh(BIN, "convert", "--demo", ENC, "--seed", "3", "--vocab", VOCAB) if not os.path.exists(ENC) else None
    with serve(xenc(), ENC) as s:
        p = s.port
        check_error(*post_json(p, "/rerank", {"documents": ["a"]}), 400, "query")
        check_error(*post_json(p, "/rerank", {"query": 1, "documents": ["a"]}), 400, "query")
        for docs in ([], None, 123, [1, 2, 3], ["a", None]):
            check_error(*post_json(p, "/rerank", {"query": "q", "documents": docs}), 400, "documents")
        check_error(*post_json(p, "/rerank", {"query": "q", "texts": []}), 400, "texts")
        for top_n in (-1, "2", 1.5):
            check_error(*post_json(p, "/rerank", {"query": "q", "documents": ["a"], "top_n": top_n}), 400, "top_n")
        check_error(*post_json(p, "/rerank", {"query": "q", "documents": ["a"], "return_documents": "yes"}), 400,
                    "return_documents")
        check_error(*post_json(p, "/rerank", {"query": "q", "documents": ["d"] * 1001}), 413, "documents", "1000")
        check_error(*post_json(p, "/rerank", {"query": "q", "documents": ["a"], "model": "enc"}), 400, "enc",
                    "classification head")
        check_error(*post_json(p, "/rerank", {"query": "word " * 300, "documents": ["a"]}), 413, "query", "256")
        st, _, body = request(p, "POST", "/rerank", body=b"{not json", headers={"Content-Type": "application/json"})
        assert st == 400, body
        # a long document alone is cut, not refused
        st, out = post_json(p, "/rerank", {"query": "q", "documents": ["word " * 2000]})
        assert st == 200 and len(out["results"]) == 1, out
        # the encoder still embeds; the reranker refuses to
        st, out = post_json(p, "/embed", {"inputs": "hello"})
        assert st == 200 and len(out[0]) == 384, out
        check_error(*post_json(p, "/v1/embeddings", {"input": "hello", "model": "xenc"}), 400, "xenc", "reranker")
        assert s.proc.poll() is None, "the server died"


def test_reranking_flag_refuses_an_encoder():
    sh(BIN, "convert", "--demo", ENC, "--seed", "3", "--vocab", VOCAB) if not os.path.exists(ENC) else None
    p = subprocess.run([BIN, "serve", "--port", str(hearth_test.free_port()), "--reranking", "-m", ENC],
                       capture_output=True, text=True, timeout=120, env=dict(os.environ, HEARTH_DEMO="0"))
    assert p.returncode != 0, p.stderr
    assert "--reranking" in p.stderr and "classification head" in p.stderr, p.stderr[-2000:]
    with serve(xenc(), extra=("--rerank",)) as s:  # the alias, with a reranker: serves
        st, out = post_json(s.port, "/rerank", {"query": "q", "documents": ["a"]})
        assert st == 200, out


if __name__ == "__main__":
    hearth_test.run([test_folder_matches_reference, test_token_type_one_is_used, test_gguf_contents_and_scores,
                     test_routes_top_n_and_documents, test_tei_shape, test_errors,
                     test_reranking_flag_refuses_an_encoder])
