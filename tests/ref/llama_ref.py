"""llama_ref: a reference llama-family decoder forward pass, from a GGUF file, in PyTorch.

What: LlamaRef(path) loads hyperparameters and weights (dequantized by gguf_py)
for general.architecture in {llama, qwen2, qwen3}; .forward(ids, cache) returns
the logits of every given position, using and extending a KV cache, so a prompt
can be run at once or token by token; .greedy(prompt, n) decodes by argmax.
Computes in float64 by default (a clean oracle), float32 on request.

Math (per layer, x is (T, n_embd)):
    h  = rmsnorm(x) * attn_norm
    q  = h Wq^T (+bq), k = h Wk^T (+bk), v = h Wv^T (+bv)     [qwen2 has the biases]
    qwen3: q, k = rmsnorm over head_dim per head * attn_q_norm / attn_k_norm
    q, k = rope(q), rope(k) at absolute positions
    attention: softmax(q k^T / sqrt(head_dim) + causal mask) v, kv head h serving
               q heads h*group .. h*group+group-1 (GQA)
    x  = x + attn Wo^T
    x  = x + Wdown (silu(Wgate h2) * Wup h2), h2 = rmsnorm(x) * ffn_norm
logits = rmsnorm(x) * output_norm, times output.weight^T (token_embd.weight if
output.weight is absent: tied embeddings).

RoPE: theta_i = pos * freq_base^(-2i/n_rot) (* freq_scale, / rope_freqs[i] when the
file has rope_freqs.weight), i < n_rot/2. llama uses llama.cpp's NORM mode: pairs
(2i, 2i+1); qwen2/qwen3 use NEOX mode: pairs (i, i + n_rot/2). Dimensions past
n_rot are left alone. llama.cpp's converter permutes llama's Q/K rows so that NORM
rope on the file's weights equals the original model's rotate-half rope; this file
uses the stored weights as they are (the self-check verifies the identity).

Spec sources: llama.cpp's llama architecture graphs (build_llama / qwen2 / qwen3:
which tensors, where the norms and biases go), ggml_rope's NORM/NEOX definitions,
the GGUF metadata key names of ggml docs/gguf.md, and llama2.c's run.c (stories260K).
Written independently of hearth's C code.

Known differences from hearth: none intended beyond float rounding (hearth runs
float32, possibly with quantized dot products; compare with a tolerance).
Not implemented: rope scaling types other than none/linear (yarn), sliding
windows, MoE, and architectures other than the three named.

CLI:
    python3 tests/ref/llama_ref.py MODEL.gguf IDS_JSON OUT.npy [--dtype float32]
        writes float32 logits [n_tokens, n_vocab] for the ids (a JSON list of ints,
        given as a file path or inline)
    python3 tests/ref/llama_ref.py MODEL.gguf IDS_JSON --greedy N
        prints N greedily generated ids continuing the ids, space-separated
"""
import argparse
import json
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gguf_py import GGUF  # noqa: E402

ARCHS = ("llama", "qwen2", "qwen3")
ROPE_NORM, ROPE_NEOX = "norm", "neox"


class LlamaRef:
    def __init__(self, path, dtype=torch.float64):
        torch.set_num_threads(2)
        self.dtype = dtype
        g = GGUF(path)
        md = g.metadata
        arch = md.get("general.architecture")
        if arch not in ARCHS:
            raise ValueError("%s: architecture %r not supported (%s)" % (path, arch, ", ".join(ARCHS)))
        self.arch = arch

        def key(name, default=None):
            v = md.get("%s.%s" % (arch, name), default)
            if v is None:
                raise ValueError("%s: metadata %s.%s missing" % (path, arch, name))
            return v

        self.n_embd = int(key("embedding_length"))
        self.n_layer = int(key("block_count"))
        self.n_ff = int(key("feed_forward_length"))
        self.n_head = int(key("attention.head_count"))
        self.n_head_kv = int(key("attention.head_count_kv", self.n_head))
        self.eps = float(key("attention.layer_norm_rms_epsilon"))
        self.head_dim = int(key("attention.key_length", self.n_embd // self.n_head))
        self.head_dim_v = int(key("attention.value_length", self.head_dim))
        self.n_rot = int(key("rope.dimension_count", self.head_dim))
        self.freq_base = float(key("rope.freq_base", 10000.0))
        self.n_ctx_train = int(key("context_length", 0))
        scaling = md.get("%s.rope.scaling.type" % arch, "none")
        self.freq_scale = 1.0
        if scaling == "linear":
            self.freq_scale = 1.0 / float(key("rope.scaling.factor", 1.0))
        elif scaling not in ("none", None):
            raise ValueError("%s: rope scaling %r not supported" % (path, scaling))
        self.rope_mode = ROPE_NORM if arch == "llama" else ROPE_NEOX
        if self.n_head % self.n_head_kv or self.n_rot % 2 or self.n_rot > self.head_dim:
            raise ValueError("%s: inconsistent heads %d/%d or n_rot %d" % (path, self.n_head, self.n_head_kv,
                                                                           self.n_rot))

        def w(name):
            return torch.from_numpy(g.tensor(name)).to(dtype)

        def opt(name):
            return w(name) if name in g.tensors else None

        self.tok_embd = w("token_embd.weight")                        # (n_vocab, n_embd)
        self.n_vocab = self.tok_embd.shape[0]
        self.output_norm = w("output_norm.weight")                    # (n_embd,)
        out = opt("output.weight")                                    # (n_vocab, n_embd)
        self.output = self.tok_embd if out is None else out
        ff = opt("rope_freqs.weight")                                 # (n_rot/2,)
        self.layers = []
        for i in range(self.n_layer):
            p = "blk.%d." % i
            L = {k: w(p + k + ".weight") for k in ("attn_norm", "attn_q", "attn_k", "attn_v", "attn_output",
                                                   "ffn_norm", "ffn_gate", "ffn_up", "ffn_down")}
            for k in ("attn_q", "attn_k", "attn_v"):
                L[k + ".bias"] = opt(p + k + ".bias")
            L["attn_q_norm"] = opt(p + "attn_q_norm.weight")           # (head_dim,) qwen3
            L["attn_k_norm"] = opt(p + "attn_k_norm.weight")
            self.layers.append(L)

        # theta_i for i < n_rot/2, in float64 whatever the compute dtype
        i = torch.arange(self.n_rot // 2, dtype=torch.float64)
        self.inv_freq = self.freq_scale * self.freq_base ** (-2.0 * i / self.n_rot)
        if ff is not None:
            self.inv_freq = self.inv_freq / ff.to(torch.float64)

    # -- building blocks ---------------------------------------------------

    def rmsnorm(self, x, weight):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * weight

    def rope(self, x, pos):
        """x: (T, heads, head_dim); pos: (T,) absolute positions."""
        ang = pos.to(torch.float64)[:, None] * self.inv_freq[None, :]    # (T, n_rot/2)
        cos = torch.cos(ang).to(x.dtype)[:, None, :]
        sin = torch.sin(ang).to(x.dtype)[:, None, :]
        r, rest = x[..., :self.n_rot], x[..., self.n_rot:]
        if self.rope_mode == ROPE_NORM:
            a, b = r[..., 0::2], r[..., 1::2]
            rot = torch.stack([a * cos - b * sin, a * sin + b * cos], dim=-1).flatten(-2)
        else:
            half = self.n_rot // 2
            a, b = r[..., :half], r[..., half:]
            rot = torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1)
        return torch.cat([rot, rest], dim=-1)

    def new_cache(self):
        """Per layer [K, V], each (positions, n_head_kv, head_dim) or None when empty."""
        return [[None, None] for _ in range(self.n_layer)]

    def attention(self, L, h, pos, kv):
        T = h.shape[0]
        q = h @ L["attn_q"].T
        k = h @ L["attn_k"].T
        v = h @ L["attn_v"].T
        if L["attn_q.bias"] is not None:
            q, k, v = q + L["attn_q.bias"], k + L["attn_k.bias"], v + L["attn_v.bias"]
        q = q.view(T, self.n_head, self.head_dim)
        k = k.view(T, self.n_head_kv, self.head_dim)
        v = v.view(T, self.n_head_kv, self.head_dim_v)
        if L["attn_q_norm"] is not None:
            q = self.rmsnorm(q, L["attn_q_norm"])
            k = self.rmsnorm(k, L["attn_k_norm"])
        q, k = self.rope(q, pos), self.rope(k, pos)
        kv[0] = k if kv[0] is None else torch.cat([kv[0], k])
        kv[1] = v if kv[1] is None else torch.cat([kv[1], v])
        group = self.n_head // self.n_head_kv
        K = kv[0].repeat_interleave(group, dim=1)                        # (S, n_head, hd)
        V = kv[1].repeat_interleave(group, dim=1)
        S = K.shape[0]
        scores = torch.einsum("thd,shd->hts", q, K) / math.sqrt(self.head_dim)
        visible = torch.arange(S)[None, :] <= pos[:, None]                # (T, S) causal
        scores = scores.masked_fill(~visible[None], float("-inf"))
        p = torch.softmax(scores, dim=-1)
        ctx = torch.einsum("hts,shd->thd", p, V).reshape(T, self.n_head * self.head_dim_v)
        return ctx @ L["attn_output"].T

    # -- public ------------------------------------------------------------

    @torch.no_grad()
    def forward(self, ids, cache=None):
        """Logits (len(ids), n_vocab) for ids placed after what the cache holds."""
        if cache is None:
            cache = self.new_cache()
        start = 0 if cache[0][0] is None else cache[0][0].shape[0]
        ids_t = torch.as_tensor(list(ids), dtype=torch.long)
        if ids_t.numel() == 0 or int(ids_t.min()) < 0 or int(ids_t.max()) >= self.n_vocab:
            raise ValueError("token ids must be non-empty and in [0, %d)" % self.n_vocab)
        pos = torch.arange(start, start + ids_t.numel())
        x = self.tok_embd[ids_t]                                        # (T, n_embd)
        for L, kv in zip(self.layers, cache):
            x = x + self.attention(L, self.rmsnorm(x, L["attn_norm"]), pos, kv)
            h = self.rmsnorm(x, L["ffn_norm"])
            x = x + (torch.nn.functional.silu(h @ L["ffn_gate"].T) * (h @ L["ffn_up"].T)) @ L["ffn_down"].T
        return self.rmsnorm(x, self.output_norm) @ self.output.T

    def greedy(self, prompt, n):
        """n ids decoded by argmax after the prompt (ties go to the lowest id)."""
        cache = self.new_cache()
        logits = self.forward(prompt, cache)
        out = []
        for _ in range(n):
            nxt = int(torch.argmax(logits[-1]))
            out.append(nxt)
            logits = self.forward([nxt], cache)
        return out


def _load_ids(arg):
    if os.path.exists(arg):
        with open(arg) as f:
            ids = json.load(f)
    else:
        ids = json.loads(arg)
    if not isinstance(ids, list) or not all(isinstance(i, int) for i in ids):
        raise SystemExit("IDS_JSON must be a JSON list of token ids")
    return ids


def main(argv=None):
    ap = argparse.ArgumentParser(description="llama-family reference forward pass from GGUF")
    ap.add_argument("model")
    ap.add_argument("ids", help="JSON list of token ids: a file path or the JSON text itself")
    ap.add_argument("out", nargs="?", help="output .npy for the logits [n_tokens, n_vocab] (float32)")
    ap.add_argument("--greedy", type=int, metavar="N", help="print N greedily generated ids instead")
    ap.add_argument("--dtype", choices=("float64", "float32"), default="float64")
    a = ap.parse_args(argv)
    model = LlamaRef(a.model, getattr(torch, a.dtype))
    ids = _load_ids(a.ids)
    if a.greedy is not None:
        print(" ".join(str(i) for i in model.greedy(ids, a.greedy)))
        return 0
    if not a.out:
        ap.error("OUT.npy is required unless --greedy is given")
    np.save(a.out, model.forward(ids).to(torch.float32).numpy())
    return 0


if __name__ == "__main__":
    sys.exit(main())
