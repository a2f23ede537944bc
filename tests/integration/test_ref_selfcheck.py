"""Self-checks of the Python references in tests/ref/, against which hearth's C
forward passes are compared. A reference is only worth what it was checked
against, so each check here uses something independent of the code under test:

- stories260K: greedy ids and position-0 logits from GOLDEN.txt (produced by a
  separate port of llama2.c, matching llama2.c's published sample);
- GGUF dequantization: a slow scalar decoder written here from ggml's block
  layouts, on random blocks in a GGUF file written here by a throwaway writer;
- RoPE: NORM rope on llama.cpp-permuted Q/K must equal NEOX rope on the
  unpermuted weights (the identity llama.cpp's converter relies on);
- BERT: an encoder stack built from torch.nn.TransformerEncoderLayer with the
  same weights; batched == alone; the padding mask is finite.

Needs only /usr/bin/python3 with torch and numpy (no hearth binary); prints
"ok - name" / "not ok - name" lines as tests/run.sh expects.
"""
import atexit
import json
import math
import os
import shutil
import struct
import sys
import tempfile
import time
import traceback

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "ref"))
import bert_ref  # noqa: E402
import gguf_py  # noqa: E402
import safetensors_py  # noqa: E402
from llama_ref import LlamaRef  # noqa: E402

torch.set_num_threads(2)
SHARED = os.environ.get("HEARTH_SHARED") or os.path.join(HERE, "..", "..", "..", "shared")
STORIES = os.path.join(SHARED, "models", "stories260K")
TMP = tempfile.mkdtemp(prefix="hearth-ref-")
atexit.register(shutil.rmtree, TMP, ignore_errors=True)


# -- a throwaway GGUF v3 writer ------------------------------------------------

def _gstr(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def _gval(v):
    """(gguf type, bytes) for a Python value; ints are written as i32 unless tagged."""
    if isinstance(v, tuple):  # (struct format, gguf type id, value)
        fmt, t, x = v
        return t, struct.pack(fmt, x)
    if isinstance(v, bool):
        return 7, struct.pack("<?", v)
    if isinstance(v, int):
        return 5, struct.pack("<i", v)
    if isinstance(v, float):
        return 6, struct.pack("<f", v)
    if isinstance(v, str):
        return 8, _gstr(v)
    if isinstance(v, list):
        items = [_gval(x) for x in v]
        et = items[0][0] if items else 8
        return 9, struct.pack("<IQ", et, len(items)) + b"".join(b for _, b in items)
    raise TypeError(v)


def write_gguf(path, metadata, tensors, alignment=32):
    """tensors: list of (name, ne list, ggml type, raw bytes)."""
    out = [b"GGUF", struct.pack("<IQQ", 3, len(tensors), len(metadata))]
    for k, v in metadata.items():
        t, b = _gval(v)
        out += [_gstr(k), struct.pack("<I", t), b]
    off = 0
    offsets = []
    for name, ne, t, raw in tensors:
        offsets.append(off)
        out += [_gstr(name), struct.pack("<I", len(ne)), struct.pack("<%dQ" % len(ne), *ne),
                struct.pack("<IQ", t, off)]
        off += len(raw) + (-len(raw) % alignment)
    head = b"".join(out)
    head += b"\0" * (-len(head) % alignment)
    with open(path, "wb") as f:
        f.write(head)
        for (_, _, _, raw), o in zip(tensors, offsets):
            f.write(raw + b"\0" * (-len(raw) % alignment))


def f32_tensor(name, a):
    a = np.ascontiguousarray(a, dtype="<f4")
    return (name, list(reversed(a.shape)), gguf_py.F32, a.tobytes())


# -- scalar dequantizers written from the block layouts -------------------------

def _half(b, off):
    return struct.unpack_from("<e", b, off)[0]


def scalar_q8_0(b):
    d = _half(b, 0)
    return [d * struct.unpack_from("<b", b, 2 + j)[0] for j in range(32)]


def scalar_q4_0(b):
    d = _half(b, 0)
    y = [0.0] * 32
    for j in range(16):
        y[j] = ((b[2 + j] & 0x0F) - 8) * d
        y[j + 16] = ((b[2 + j] >> 4) - 8) * d
    return y


def scalar_q4_k(b):
    d, dmin = _half(b, 0), _half(b, 2)
    sc = b[4:16]
    qs = b[16:144]

    def scale_min(j):
        if j < 4:
            return sc[j] & 63, sc[j + 4] & 63
        return (sc[j + 4] & 0xF) | ((sc[j - 4] >> 6) << 4), (sc[j + 4] >> 4) | ((sc[j] >> 6) << 4)

    y = []
    for c in range(4):
        s1, m1 = scale_min(2 * c)
        s2, m2 = scale_min(2 * c + 1)
        q = qs[32 * c:32 * c + 32]
        y += [d * s1 * (x & 0xF) - dmin * m1 for x in q]
        y += [d * s2 * (x >> 4) - dmin * m2 for x in q]
    return y


def scalar_q6_k(b):
    ql, qh = b[0:128], b[128:192]
    sc = struct.unpack_from("<16b", b, 192)
    d = _half(b, 208)
    y = [0.0] * 256
    for n in range(2):
        for l in range(32):
            is_ = l // 16
            lq, hq, s = ql[64 * n:], qh[32 * n:], sc[8 * n:]
            q1 = ((lq[l] & 0xF) | (((hq[l] >> 0) & 3) << 4)) - 32
            q2 = ((lq[l + 32] & 0xF) | (((hq[l] >> 2) & 3) << 4)) - 32
            q3 = ((lq[l] >> 4) | (((hq[l] >> 4) & 3) << 4)) - 32
            q4 = ((lq[l + 32] >> 4) | (((hq[l] >> 6) & 3) << 4)) - 32
            base = 128 * n + l
            y[base] = d * s[is_] * q1
            y[base + 32] = d * s[is_ + 2] * q2
            y[base + 64] = d * s[is_ + 4] * q3
            y[base + 96] = d * s[is_ + 6] * q4
    return y


# (type, elements per block, block bytes, offsets of f16 fields, scalar decoder)
QUANTS = {
    "Q8_0": (gguf_py.Q8_0, 32, 34, [0], scalar_q8_0),
    "Q4_0": (gguf_py.Q4_0, 32, 18, [0], scalar_q4_0),
    "Q4_K": (gguf_py.Q4_K, 256, 144, [0, 2], scalar_q4_k),
    "Q6_K": (gguf_py.Q6_K, 256, 210, [208], scalar_q6_k),
}


def random_blocks(rng, nblocks, size, half_offsets):
    raw = bytearray(rng.integers(0, 256, nblocks * size, dtype=np.uint8).tobytes())
    for i in range(nblocks):
        for o in half_offsets:  # random bytes could be NaN/Inf halves: put real scales there
            struct.pack_into("<e", raw, i * size + o, float(rng.uniform(-2, 2)))
    return bytes(raw)


def check_quant(tname):
    t, blck, size, halves, scalar = QUANTS[tname]
    rng = np.random.default_rng(sorted(QUANTS).index(tname))  # fixed: str hash() is salted per run
    ne = [2 * blck, 3]  # 2 blocks per row, 3 rows
    raw = random_blocks(rng, 6, size, halves)
    path = os.path.join(TMP, "q_%s.gguf" % tname)
    write_gguf(path, {"general.architecture": "test", "general.alignment": (("<I", 4, 32))},
               [("pad", [3], gguf_py.F32, np.ones(3, "<f4").tobytes()), ("w", ne, t, raw)])
    g = gguf_py.GGUF(path)
    got = g.tensor("w")
    assert got.shape == (3, 2 * blck) and got.dtype == np.float32, got.shape
    want = np.array([v for i in range(6) for v in scalar(raw[i * size:(i + 1) * size])]).reshape(3, 2 * blck)
    scale = np.abs(want).max()
    err = np.abs(got.astype(np.float64) - want).max()
    assert err <= 1e-6 * scale, "%s: max error %g (scale %g)" % (tname, err, scale)


def test_gguf_dequant_q8_0():
    check_quant("Q8_0")


def test_gguf_dequant_q4_0():
    check_quant("Q4_0")


def test_gguf_dequant_q4_k():
    check_quant("Q4_K")


def test_gguf_dequant_q6_k():
    check_quant("Q6_K")


def test_gguf_float_types_metadata_and_dims():
    rng = np.random.default_rng(1)
    a32 = rng.standard_normal((2, 3, 4)).astype("<f4")
    a16 = rng.standard_normal((3, 7)).astype("<f2")
    abf = rng.standard_normal((2, 5)).astype("<f4")
    bf_bits = (abf.view("<u4") >> 16).astype("<u2")   # truncation gives exact bf16 values
    md = {"general.architecture": "test", "s": "héllo", "i": -7, "f": 0.5, "b": True,
          "u64": ("<Q", 10, 2**40), "arr": ["a", "bc"], "ints": [1, -2, 3], "d": ("<d", 12, 0.125)}
    path = os.path.join(TMP, "floats.gguf")
    write_gguf(path, md, [f32_tensor("a32", a32), ("a16", [7, 3], gguf_py.F16, a16.tobytes()),
                          ("abf", [5, 2], gguf_py.BF16, bf_bits.tobytes())])
    g = gguf_py.GGUF(path)
    for k in ("s", "i", "f", "b", "arr", "ints"):
        assert g.metadata[k] == md[k], (k, g.metadata[k])
    assert g.metadata["u64"] == 2**40 and g.metadata["d"] == 0.125
    assert np.array_equal(g.tensor("a32"), a32)
    assert np.array_equal(g.tensor("a16"), a16.astype(np.float32))
    want_bf = (bf_bits.astype(np.uint32) << 16).view(np.float32)
    assert np.array_equal(g.tensor("abf"), want_bf) and np.abs(want_bf - abf).max() < 0.02


def test_gguf_rejects_v1():
    v1 = os.path.join(SHARED, "models", "stories260K-gguf-v1", "tinyllamas-stories-260k-f32.gguf")
    try:
        gguf_py.GGUF(v1)
    except ValueError as e:
        assert "version 1" in str(e), e
        return
    raise AssertionError("a GGUF v1 file was accepted")


# -- llama ----------------------------------------------------------------------

def read_golden():
    with open(os.path.join(STORIES, "GOLDEN.txt")) as f:
        lines = f.read().splitlines()
    logits_line = next(ln for ln in lines if ln.startswith("logits at position 0"))
    logits = json.loads(logits_line[logits_line.index("["):logits_line.index("]") + 1])
    ids_at = lines.index("first 60 generated ids:") + 1
    ids = [int(x) for x in lines[ids_at].split()]
    assert len(ids) == 60 and len(logits) == 5
    return ids, logits


_stories = {}


def stories():
    if "m" not in _stories:
        _stories["m"] = LlamaRef(os.path.join(STORIES, "stories260K.gguf"))
    return _stories["m"]


def test_stories260k_greedy_golden():
    ids, logits = read_golden()
    m = stories()
    first = m.forward([1])[0]
    assert np.abs(first[:5].numpy() - np.array(logits)).max() < 1e-4, first[:5]
    got = m.greedy([1], 60)
    assert got == ids, "greedy ids differ at %d: %s" % (next(i for i in range(60) if got[i] != ids[i]), got)


def test_stories260k_incremental_equals_full():
    m = stories()
    ids = [1] + read_golden()[0][:23]
    full = m.forward(ids)
    cache = m.new_cache()
    steps = torch.cat([m.forward(ids[:5], cache)] + [m.forward([t], cache) for t in ids[5:]])
    assert (full - steps).abs().max() < 1e-9, (full - steps).abs().max()


def tiny_decoder(rng, arch, wq, wk, extra=None, n_embd=32, n_head=4, n_kv=2, n_layer=2, n_ff=48, n_vocab=40,
                 eps=1e-5):
    """Writes a random decoder GGUF; wq/wk: per-layer Q/K weights (HF row order or permuted)."""
    hd = n_embd // n_head
    md = {"general.architecture": arch, arch + ".embedding_length": n_embd, arch + ".block_count": n_layer,
          arch + ".feed_forward_length": n_ff, arch + ".attention.head_count": n_head,
          arch + ".attention.head_count_kv": n_kv, arch + ".attention.layer_norm_rms_epsilon": eps,
          arch + ".rope.freq_base": 10000.0, arch + ".rope.dimension_count": hd, arch + ".context_length": 64}
    r = np.random.default_rng(rng)
    ts = [f32_tensor("token_embd.weight", r.standard_normal((n_vocab, n_embd))),
          f32_tensor("output_norm.weight", 1 + 0.1 * r.standard_normal(n_embd))]
    for i in range(n_layer):
        p = "blk.%d." % i
        ts += [f32_tensor(p + "attn_norm.weight", 1 + 0.1 * r.standard_normal(n_embd)),
               f32_tensor(p + "attn_q.weight", wq[i]), f32_tensor(p + "attn_k.weight", wk[i]),
               f32_tensor(p + "attn_v.weight", 0.3 * r.standard_normal((n_kv * hd, n_embd))),
               f32_tensor(p + "attn_output.weight", 0.3 * r.standard_normal((n_embd, n_embd))),
               f32_tensor(p + "ffn_norm.weight", 1 + 0.1 * r.standard_normal(n_embd)),
               f32_tensor(p + "ffn_gate.weight", 0.3 * r.standard_normal((n_ff, n_embd))),
               f32_tensor(p + "ffn_up.weight", 0.3 * r.standard_normal((n_ff, n_embd))),
               f32_tensor(p + "ffn_down.weight", 0.3 * r.standard_normal((n_embd, n_ff)))]
        for name, a in (extra or {}).get(i, {}).items():
            ts.append(f32_tensor(p + name, a))
    path = os.path.join(TMP, "%s_%d.gguf" % (arch, len(os.listdir(TMP))))
    write_gguf(path, md, ts)
    return path


def permute_rows(w, n_head):
    """llama.cpp convert_hf_to_gguf's Q/K permutation: per head, rows [0..hd/2) and
    [hd/2..hd) are interleaved so rotate-half pairs become adjacent pairs."""
    w = np.asarray(w)
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, -1).swapaxes(1, 2).reshape(w.shape)


def test_rope_norm_on_permuted_equals_neox():
    r = np.random.default_rng(5)
    wq = [0.4 * r.standard_normal((32, 32)) for _ in range(2)]
    wk = [0.4 * r.standard_normal((16, 32)) for _ in range(2)]
    neox = LlamaRef(tiny_decoder(9, "qwen2", wq, wk))
    norm = LlamaRef(tiny_decoder(9, "llama", [permute_rows(w, 4) for w in wq], [permute_rows(w, 2) for w in wk]))
    assert neox.rope_mode == "neox" and norm.rope_mode == "norm"
    ids = [3, 17, 5, 39, 0, 22, 8, 8, 31, 2, 14, 27]
    a, b = neox.forward(ids), norm.forward(ids)
    assert (a - b).abs().max() < 1e-10, (a - b).abs().max()
    # and without the permutation the two modes must disagree, or the check proves nothing
    same = LlamaRef(tiny_decoder(9, "llama", wq, wk)).forward(ids)
    assert (a - same).abs().max() > 1e-3


def test_qwen3_qk_norm_is_per_head():
    r = np.random.default_rng(6)
    wq = [0.4 * r.standard_normal((32, 32)) for _ in range(2)]
    wk = [0.4 * r.standard_normal((16, 32)) for _ in range(2)]
    norms = {i: {"attn_q_norm.weight": 1 + 0.2 * r.standard_normal(8),
                 "attn_k_norm.weight": 1 + 0.2 * r.standard_normal(8)} for i in range(2)}
    # RMSNorm over each head's head_dim makes every head's scale irrelevant (up to eps,
    # made negligible here, and the float32 rounding of the rescaled weights)
    hq = np.repeat([3.0, 0.5, 7.0, 0.2], 8)[:, None]
    hk = np.repeat([0.25, 4.0], 8)[:, None]
    ids = [1, 9, 4, 33, 12, 7]
    a = LlamaRef(tiny_decoder(11, "qwen3", wq, wk, norms, eps=1e-12)).forward(ids)
    b = LlamaRef(tiny_decoder(11, "qwen3", [w * hq for w in wq], [w * hk for w in wk], norms, eps=1e-12)).forward(ids)
    assert (a - b).abs().max() < 1e-5, (a - b).abs().max()
    # the same rescaling without QK-norm (qwen2 path) changes the logits
    c = LlamaRef(tiny_decoder(11, "qwen2", wq, wk)).forward(ids)
    d = LlamaRef(tiny_decoder(11, "qwen2", [w * hq for w in wq], [w * hk for w in wk])).forward(ids)
    assert (c - d).abs().max() > 1e-2


# -- BERT -----------------------------------------------------------------------

def write_safetensors(path, tensors):
    """Throwaway writer (F32 only), independent of safetensors_py.save."""
    header, blobs, off = {}, [], 0
    for name, a in tensors.items():
        b = np.ascontiguousarray(a, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(np.shape(a)), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    hj = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hj)) + hj + b"".join(blobs))


def tiny_bert(seed, pooling, normalize, prefix, hidden=24, heads=3, layers=2, inter=40, vocab=50, max_pos=32):
    r = np.random.default_rng(seed)
    d = os.path.join(TMP, "bert_%d" % seed)
    os.makedirs(os.path.join(d, "1_Pooling"), exist_ok=True)
    cfg = {"hidden_size": hidden, "num_hidden_layers": layers, "num_attention_heads": heads,
           "intermediate_size": inter, "vocab_size": vocab, "max_position_embeddings": max_pos,
           "type_vocab_size": 2, "layer_norm_eps": 1e-12, "hidden_act": "gelu"}
    json.dump(cfg, open(os.path.join(d, "config.json"), "w"))
    json.dump({"pooling_mode_%s" % pooling: True, "word_embedding_dimension": hidden},
              open(os.path.join(d, "1_Pooling", "config.json"), "w"))
    mods = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
            {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]
    if normalize:
        mods.append({"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"})
    json.dump(mods, open(os.path.join(d, "modules.json"), "w"))

    def n(*shape, s=0.3):
        return s * r.standard_normal(shape)

    t = {"embeddings.word_embeddings.weight": n(vocab, hidden, s=1), "embeddings.position_embeddings.weight":
         n(max_pos, hidden), "embeddings.token_type_embeddings.weight": n(2, hidden),
         "embeddings.LayerNorm.weight": 1 + n(hidden, s=0.1), "embeddings.LayerNorm.bias": n(hidden, s=0.1)}
    for i in range(layers):
        p = "encoder.layer.%d." % i
        for name, (o, k) in {"attention.self.query": (hidden, hidden), "attention.self.key": (hidden, hidden),
                             "attention.self.value": (hidden, hidden), "attention.output.dense": (hidden, hidden),
                             "intermediate.dense": (inter, hidden), "output.dense": (hidden, inter)}.items():
            t[p + name + ".weight"] = n(o, k)
            t[p + name + ".bias"] = n(o, s=0.1)
        for ln in ("attention.output.LayerNorm", "output.LayerNorm"):
            t[p + ln + ".weight"] = 1 + n(hidden, s=0.1)
            t[p + ln + ".bias"] = n(hidden, s=0.1)
    write_safetensors(os.path.join(d, "model.safetensors"), {prefix + k: v for k, v in t.items()})
    return d, t


BATCH = [[2, 7, 9, 3], [2, 11, 4, 4, 8, 19, 33, 3], [2, 3], [2, 40, 41, 42, 43, 44, 45, 46, 47, 48, 3]]


def test_bert_batched_equals_alone():
    for seed, pooling, normalize, prefix in ((1, "mean_tokens", True, "bert."), (2, "cls_token", False, ""),
                                             (3, "lasttoken", False, "bert."), (4, "max_tokens", True, "")):
        m = bert_ref.BertRef(tiny_bert(seed, pooling, normalize, prefix)[0])
        batched = m.embed(BATCH)
        alone = torch.cat([m.embed([s]) for s in BATCH])
        assert batched.dtype == torch.float64 and batched.shape == (4, 24)
        assert (batched - alone).abs().max() < 1e-6, (pooling, (batched - alone).abs().max())
        if normalize:
            assert (batched.norm(dim=1) - 1).abs().max() < 1e-12


def test_bert_mask_finite():
    m = bert_ref.BertRef(tiny_bert(1, "mean_tokens", True, "bert.")[0])
    add = m.additive_mask(torch.tensor([[1, 1, 0, 0]]))
    assert torch.isfinite(add).all() and add[0, 0, 0, 0] == 0 and add[0, 0, 0, 3] < -1e38
    ids = torch.tensor([[2, 5, 3, 0, 0], [2, 5, 6, 7, 3]])
    mask = (torch.arange(5)[None] < torch.tensor([[3], [5]])).long()
    assert torch.isfinite(m.hidden_states(ids, mask)).all()


def test_bert_matches_torch_transformer_encoder():
    d, t = tiny_bert(7, "mean_tokens", False, "")
    m = bert_ref.BertRef(d)
    # the file holds float32: give torch the same rounded values
    T = {k: torch.tensor(np.float32(v), dtype=torch.float64) for k, v in t.items()}
    layers = []
    for i in range(2):
        p = "encoder.layer.%d." % i
        L = torch.nn.TransformerEncoderLayer(24, 3, 40, dropout=0.0, activation="gelu", layer_norm_eps=1e-12,
                                             batch_first=True, norm_first=False, dtype=torch.float64)
        with torch.no_grad():
            L.self_attn.in_proj_weight.copy_(torch.cat([T[p + "attention.self.%s.weight" % x]
                                                        for x in ("query", "key", "value")]))
            L.self_attn.in_proj_bias.copy_(torch.cat([T[p + "attention.self.%s.bias" % x]
                                                      for x in ("query", "key", "value")]))
            for dst, src in ((L.self_attn.out_proj, "attention.output.dense"), (L.linear1, "intermediate.dense"),
                             (L.linear2, "output.dense"), (L.norm1, "attention.output.LayerNorm"),
                             (L.norm2, "output.LayerNorm")):
                dst.weight.copy_(T[p + src + ".weight"])
                dst.bias.copy_(T[p + src + ".bias"])
        layers.append(L.eval())
    ids = torch.tensor([[2, 11, 4, 4, 8, 3], [2, 9, 3, 0, 0, 0]])
    mask = (torch.arange(6)[None] < torch.tensor([[6], [3]])).long()
    x = torch.nn.functional.layer_norm(T["embeddings.word_embeddings.weight"][ids]
                                       + T["embeddings.position_embeddings.weight"][:6]
                                       + T["embeddings.token_type_embeddings.weight"][0], (24,),
                                       T["embeddings.LayerNorm.weight"], T["embeddings.LayerNorm.bias"], 1e-12)
    with torch.no_grad():
        for L in layers:
            x = L(x, src_key_padding_mask=(mask == 0))
    got = m.hidden_states(ids, mask)
    real = mask.bool()
    assert (got[real] - x[real]).abs().max() < 1e-10, (got[real] - x[real]).abs().max()


def test_safetensors_reader_f16_bf16_and_prefix():
    r = np.random.default_rng(3)
    a16 = r.standard_normal((3, 4)).astype("<f2")
    bf = (r.standard_normal((2, 3)).astype("<f4").view("<u4") >> 16).astype("<u2")
    a32 = r.standard_normal(5).astype("<f4")
    header = {"__metadata__": {"format": "pt"},
              "h": {"dtype": "F16", "shape": [3, 4], "data_offsets": [0, 24]},
              "b": {"dtype": "BF16", "shape": [2, 3], "data_offsets": [24, 36]},
              "f": {"dtype": "F32", "shape": [5], "data_offsets": [36, 56]}}
    hj = json.dumps(header).encode()
    path = os.path.join(TMP, "mixed.safetensors")
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hj)) + hj + a16.tobytes() + bf.tobytes() + a32.tobytes())
    t = safetensors_py.load(path)
    assert set(t) == {"h", "b", "f"}
    assert t["h"].dtype == torch.float16 and np.array_equal(t["h"].numpy(), a16)
    assert t["b"].dtype == torch.bfloat16
    assert np.array_equal(t["b"].float().numpy(), (bf.astype(np.uint32) << 16).view(np.float32))
    assert np.array_equal(t["f"].numpy(), a32)


def test_bert_cli_writes_batched_and_alone():
    d, _ = tiny_bert(8, "mean_tokens", True, "bert.")
    ids, out = os.path.join(TMP, "ids.json"), os.path.join(TMP, "out.json")
    json.dump(BATCH[:2], open(ids, "w"))
    assert bert_ref.main([d, ids, out, "--dtype", "float32"]) == 0
    doc = json.load(open(out))
    assert len(doc["batched"]) == 2 and len(doc["alone"][0]) == 24
    diff = np.abs(np.array(doc["batched"]) - np.array(doc["alone"])).max()
    assert diff < 1e-5, diff


TESTS = [test_stories260k_greedy_golden, test_stories260k_incremental_equals_full,
         test_gguf_dequant_q8_0, test_gguf_dequant_q4_0, test_gguf_dequant_q4_k, test_gguf_dequant_q6_k,
         test_gguf_float_types_metadata_and_dims, test_gguf_rejects_v1, test_rope_norm_on_permuted_equals_neox,
         test_qwen3_qk_norm_is_per_head, test_bert_batched_equals_alone, test_bert_mask_finite,
         test_bert_matches_torch_transformer_encoder, test_safetensors_reader_f16_bf16_and_prefix,
         test_bert_cli_writes_batched_and_alone]


def main():
    # hearth_test.run needs the hearth binary; these checks do not, so they run themselves
    failed = 0
    only = os.environ.get("HEARTH_TEST_ONLY")
    for t in TESTS:
        if only and only not in t.__name__:
            continue
        start = time.time()
        try:
            t()
            print("ok - %s (%.1fs)" % (t.__name__, time.time() - start), flush=True)
        except Exception:
            failed += 1
            print("not ok - %s" % t.__name__, flush=True)
            traceback.print_exc(file=sys.stdout)
            sys.stdout.flush()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
