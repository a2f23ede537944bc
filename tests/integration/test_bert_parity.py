"""BERT parity: hearth's encoder against the PyTorch reference (tests/ref/bert_ref.py).

A random-weight folder with all-MiniLM-L6-v2's shapes (6 layers, 384 hidden,
12 heads, 1536 FFN, vocab 30522 from the real bert-base-uncased vocab.txt in
$HEARTH_SHARED) is written to a temp dir by `hearth convert --demo`. hearth
tokenizes mixed-length sentences and embeds them (`hearth embed`, batched and
--alone); the reference runs on the very ids hearth printed. Checks, with the
tolerances beside them:
  - fp32, batched and alone: cosine >= 0.99999 and max |diff| <= 1e-4 per vector;
  - batched == alone inside hearth: max |diff| <= 1e-5;
  - bf16 and int8 weights: cosine >= 0.999 against the fp32 reference;
  - the GGUF converted from the folder: same tokens, max |diff| <= 1e-5 against
    the folder's vectors; its tensors and vocab as read by an independent
    Python GGUF reader (tests/ref/gguf_py.py) match the safetensors and
    llama.cpp's spelling; the f16 GGUF: cosine >= 0.9999;
  - cls pooling on a second folder.
"""
import json
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
sys.path.insert(0, os.path.join(HERE, "..", "ref"))
import gguf_py  # noqa: E402
import hearth_test  # noqa: E402
import safetensors_py  # noqa: E402

BIN = hearth_test.BIN
VOCAB = os.path.join(hearth_test.SHARED, "vocab", "bert-base-uncased-vocab.txt")
REF = os.path.join(HERE, "..", "ref", "bert_ref.py")
TMP = hearth_test.scratch_dir("hearth-bert-parity-")
MODEL = os.path.join(TMP, "minilm")

SENTENCES = [
    "Hello world.",
    "The quick brown fox jumps over the lazy dog, twice, before breakfast on a Sunday morning.",
    "a",
    "Café crème brûlée: naïve résumé façade!",
    "Embeddings map sentences of different lengths into one vector space; padding must never leak into them.",
    "東京 is a city",
    "unbelievably hyper-parameterized transformers",
]

_cache = {}


def sh(*args, timeout=300):
    p = subprocess.run(list(args), capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        raise AssertionError("%s failed (%d):\n%s" % (" ".join(args), p.returncode, p.stderr[-3000:]))
    return p.stdout


def demo(path, *extra):
    if not os.path.exists(path):
        sh(BIN, "convert", "--demo", path, "--seed", "7", "--vocab", VOCAB, *extra)
    return path


def embed(model, *flags):
    key = (model,) + flags
    if key not in _cache:
        out = json.loads(sh(BIN, "embed", "-m", model, "--normalize", "on", *flags, *SENTENCES))
        _cache[key] = (out["tokens"], np.array(out["embeddings"], dtype=np.float64))
    return _cache[key]


def reference(model):
    key = ("ref", model)
    if key not in _cache:
        tokens, _ = embed(model)
        ids = os.path.join(TMP, "ids.json")
        out = os.path.join(TMP, "ref.json")
        with open(ids, "w") as f:
            json.dump(tokens, f)
        sh("/usr/bin/python3", REF, model, ids, out, "--dtype", "float32")
        with open(out) as f:
            r = json.load(f)
        _cache[key] = (np.array(r["batched"]), np.array(r["alone"]))
    return _cache[key]


def cosines(a, b):
    return [float(np.dot(x, y) / (np.linalg.norm(x) * np.linalg.norm(y))) for x, y in zip(a, b)]


def check_close(got, want, min_cos, max_abs, what):
    cos = cosines(got, want)
    diff = float(np.abs(got - want).max())
    assert min(cos) >= min_cos, "%s: cosines %s, want >= %s" % (what, cos, min_cos)
    if max_abs is not None:
        assert diff <= max_abs, "%s: max |diff| %.3g > %.3g" % (what, diff, max_abs)


def test_tokens_have_cls_and_sep():
    tokens, vecs = embed(demo(MODEL))
    assert len(tokens) == len(SENTENCES) and vecs.shape == (len(SENTENCES), 384)
    assert len({len(t) for t in tokens}) >= 5, "want mixed lengths, got %s" % [len(t) for t in tokens]
    for t in tokens:
        assert t[0] == 101 and t[-1] == 102, t  # [CLS], [SEP] in bert-base-uncased
    assert tokens[0] == [101, 7592, 2088, 1012, 102], tokens[0]  # hello world .


def test_fp32_batched_matches_reference():
    _, got = embed(demo(MODEL))
    want, _ = reference(MODEL)
    check_close(got, want, 0.99999, 1e-4, "fp32 batched")


def test_fp32_alone_matches_reference():
    _, got = embed(demo(MODEL), "--alone")
    _, want = reference(MODEL)
    check_close(got, want, 0.99999, 1e-4, "fp32 alone")


def test_batched_equals_alone():
    _, batched = embed(demo(MODEL))
    _, alone = embed(demo(MODEL), "--alone")
    check_close(batched, alone, 0.999999, 1e-5, "batched vs alone")


def test_thread_counts_same_vectors():
    # attention tasks are whole sequences or groups of heads depending on
    # sequences per thread: 1 thread (7 sequences, 4 tasks wanted) takes
    # whole sequences, 3 threads split the heads in 2 groups, --alone with 3
    # threads in 12 single heads; each must give the reference's vectors
    want, want_alone = reference(MODEL)
    for flags, ref in ((("-t", "1"), want), (("-t", "3"), want), (("-t", "3", "--alone"), want_alone)):
        _, got = embed(demo(MODEL), *flags)
        check_close(got, ref, 0.99999, 1e-4, "fp32 " + " ".join(flags))


def test_bf16_weights():
    _, got = embed(demo(MODEL), "--dtype", "bf16")
    want, _ = reference(MODEL)
    check_close(got, want, 0.999, None, "bf16")


def test_int8_weights():
    _, got = embed(demo(MODEL), "--dtype", "int8")
    want, _ = reference(MODEL)
    check_close(got, want, 0.999, None, "int8")


def gguf_path(kind):
    path = os.path.join(TMP, "minilm-%s.gguf" % kind)
    if not os.path.exists(path):
        sh(BIN, "convert", "--type", kind, demo(MODEL), path)
    return path


def test_gguf_same_vectors():
    tokens, folder = embed(demo(MODEL))
    gtokens, got = embed(gguf_path("f32"))
    assert gtokens == tokens, "GGUF tokenization differs:\n%s\n%s" % (gtokens, tokens)
    check_close(got, folder, 0.999999, 1e-5, "gguf f32 vs folder")


def test_gguf_f16():
    _, folder = embed(demo(MODEL))
    _, got = embed(gguf_path("f16"))
    check_close(got, folder, 0.9999, None, "gguf f16 vs folder")


def test_gguf_contents():
    g = gguf_py.GGUF(gguf_path("f32"))
    st = safetensors_py.load(os.path.join(MODEL, "model.safetensors"))
    md = g.metadata
    assert md["general.architecture"] == "bert"
    for key, want in (("bert.block_count", 6), ("bert.embedding_length", 384), ("bert.attention.head_count", 12),
                      ("bert.feed_forward_length", 1536), ("bert.context_length", 512), ("bert.pooling_type", 1),
                      ("tokenizer.ggml.model", "bert"), ("tokenizer.ggml.cls_token_id", 101),
                      ("tokenizer.ggml.seperator_token_id", 102), ("tokenizer.ggml.unknown_token_id", 100),
                      ("tokenizer.ggml.padding_token_id", 0), ("tokenizer.ggml.mask_token_id", 103),
                      ("tokenizer.ggml.token_type_count", 2)):
        assert md.get(key) == want, "%s = %r, want %r" % (key, md.get(key), want)
    assert abs(md["bert.attention.layer_norm_epsilon"] - 1e-12) < 1e-18
    toks = md["tokenizer.ggml.tokens"]
    assert len(toks) == 30522
    assert toks[101] == "[CLS]" and toks[1996] == "\u2581the" and toks[2075] == "ing", (toks[101], toks[1996], toks[2075])
    assert md["tokenizer.ggml.token_type"][101] == 3 and md["tokenizer.ggml.token_type"][1996] == 1
    pairs = {"token_embd.weight": "embeddings.word_embeddings.weight",
             "position_embd.weight": "embeddings.position_embeddings.weight",
             "token_types.weight": "embeddings.token_type_embeddings.weight",
             "token_embd_norm.bias": "embeddings.LayerNorm.bias",
             "blk.0.attn_q.weight": "encoder.layer.0.attention.self.query.weight",
             "blk.3.attn_v.bias": "encoder.layer.3.attention.self.value.bias",
             "blk.5.attn_output.weight": "encoder.layer.5.attention.output.dense.weight",
             "blk.2.attn_output_norm.weight": "encoder.layer.2.attention.output.LayerNorm.weight",
             "blk.1.ffn_up.weight": "encoder.layer.1.intermediate.dense.weight",
             "blk.4.ffn_down.weight": "encoder.layer.4.output.dense.weight",
             "blk.5.layer_output_norm.bias": "encoder.layer.5.output.LayerNorm.bias"}
    for gname, sname in pairs.items():
        a, b = g.tensor(gname), st[sname].numpy()
        assert a.shape == b.shape and np.array_equal(a, b), "%s != %s" % (gname, sname)
    assert len(g.tensors) == 5 + 6 * 16, len(g.tensors)


def test_cls_pooling():
    model = demo(os.path.join(TMP, "minilm-cls"), "--pooling", "cls")
    _, got = embed(model)
    want, _ = reference(model)
    check_close(got, want, 0.99999, 1e-4, "cls pooling")


def test_too_long_text():
    text = " ".join(["word"] * 300)  # 302 tokens against max_seq_length 256
    p = subprocess.run([BIN, "embed", "-m", demo(MODEL), text], capture_output=True, text=True, timeout=120)
    assert p.returncode != 0 and "302" in p.stderr and "256" in p.stderr, p.stderr
    out = json.loads(sh(BIN, "embed", "-m", demo(MODEL), "--truncate", text))
    assert len(out["tokens"][0]) == 256 and out["tokens"][0][-1] == 102


if __name__ == "__main__":
    hearth_test.run([test_tokens_have_cls_and_sep, test_fp32_batched_matches_reference,
                     test_fp32_alone_matches_reference, test_batched_equals_alone, test_thread_counts_same_vectors,
                     test_bf16_weights,
                     test_int8_weights, test_gguf_same_vectors, test_gguf_f16, test_gguf_contents,
                     test_cls_pooling, test_too_long_text])
