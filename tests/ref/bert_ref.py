"""bert_ref: a reference BERT sentence-embedding forward pass, in PyTorch.

What: BertRef(model_dir) loads a sentence-transformers folder (config.json,
model.safetensors with or without a "bert." name prefix, 1_Pooling/config.json
or the Pooling module named in modules.json, and a Normalize module if
modules.json lists one); .embed(batch) runs a list of token-id lists (already
tokenized, [CLS] ... [SEP]) as one right-padded batch and returns the pooled
(and optionally L2-normalized) embeddings, (batch, hidden).

Math, as Hugging Face transformers' BertModel (eager attention) computes it:
    x = LayerNorm(word[ids] + position[0..L-1] + token_type[0])      eps = layer_norm_eps
    per layer:
        q, k, v = x Wq^T + bq, ...  split into heads of head_dim = hidden / heads
        scores  = q k^T / sqrt(head_dim) + mask, mask = 0 for real keys and
                  torch.finfo(float32).min (large but finite) for padding keys
        x = LayerNorm(x + softmax(scores) v Wo^T + bo)
        x = LayerNorm(x + W2 gelu(W1 x + b1) + b2)                   gelu = exact (erf)
    pooling over non-padding tokens: mean, cls (token 0), last token, max,
    or mean * sqrt(len); then x / max(||x||_2, 1e-12) if Normalize is listed.
The BertPooler (tanh dense) is not used: sentence-transformers ignores it.

Spec sources: transformers' modeling_bert.py (BertEmbeddings, BertSelfAttention,
BertSelfOutput, BertIntermediate, BertOutput, get_extended_attention_mask),
sentence-transformers' Pooling and Normalize modules. Written independently of
hearth's C code.

Known differences from hearth: none intended beyond float rounding (this file
computes in float64 by default; --dtype float32 for a like-for-like run).
Supported hidden_act: "gelu" (erf); "gelu_new"/"gelu_pytorch_tanh" (tanh form)
for completeness. Only absolute position embeddings and token_type 0.

CLI:
    python3 tests/ref/bert_ref.py MODEL_DIR IDS_JSON OUT_JSON [--dtype float32]
IDS_JSON is a list of token-id lists; writes {"batched": [[...]], "alone": [[...]]}:
the embeddings of all inputs run as one padded batch, and of each run by itself
(float32 values).
"""
import argparse
import json
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_py  # noqa: E402

MASK_MIN = torch.finfo(torch.float32).min
POOL_MODES = ("cls", "mean", "max", "mean_sqrt_len", "lasttoken")


def _read_json(path, default=None):
    if not os.path.exists(path):
        return default
    with open(path) as f:
        return json.load(f)


def _pooling_config(model_dir):
    """(pooling mode, normalize) from modules.json / 1_Pooling/config.json; mean if none given."""
    modules = _read_json(os.path.join(model_dir, "modules.json"), [])
    pool_dir = "1_Pooling"
    normalize = False
    for m in modules:
        t = m.get("type", "")
        if t.endswith("models.Pooling"):
            pool_dir = m.get("path", pool_dir)
        elif t.endswith("models.Normalize"):
            normalize = True
    cfg = _read_json(os.path.join(model_dir, pool_dir, "config.json"), {"pooling_mode_mean_tokens": True})
    modes = [mode for mode in POOL_MODES
             if cfg.get("pooling_mode_%s_token" % mode) or cfg.get("pooling_mode_%s_tokens" % mode)
             or cfg.get("pooling_mode_%s" % mode)]
    if len(modes) != 1:
        raise ValueError("%s: exactly one pooling mode supported, config has %s" % (model_dir, modes or "none"))
    return modes[0], normalize


class BertRef:
    def __init__(self, model_dir, dtype=torch.float64):
        torch.set_num_threads(2)
        self.dtype = dtype
        cfg = _read_json(os.path.join(model_dir, "config.json"))
        if cfg is None:
            raise ValueError("%s: config.json missing" % model_dir)
        self.hidden = int(cfg["hidden_size"])
        self.n_layer = int(cfg["num_hidden_layers"])
        self.n_head = int(cfg["num_attention_heads"])
        self.head_dim = self.hidden // self.n_head
        self.eps = float(cfg.get("layer_norm_eps", 1e-12))
        self.act = cfg.get("hidden_act", "gelu")
        if self.act not in ("gelu", "gelu_new", "gelu_pytorch_tanh"):
            raise ValueError("%s: hidden_act %r not supported" % (model_dir, self.act))
        if cfg.get("position_embedding_type", "absolute") != "absolute":
            raise ValueError("%s: only absolute position embeddings are supported" % model_dir)
        self.pooling, self.normalize = _pooling_config(model_dir)

        raw = safetensors_py.load(os.path.join(model_dir, "model.safetensors"))
        w = {}
        for name, t in raw.items():
            name = name[len("bert."):] if name.startswith("bert.") else name
            # old TF-converted checkpoints name LayerNorm parameters gamma/beta
            name = name.replace("LayerNorm.gamma", "LayerNorm.weight").replace("LayerNorm.beta", "LayerNorm.bias")
            w[name] = t.to(dtype)
        self.w = w

        def need(name):
            if name not in w:
                raise ValueError("%s: tensor %r missing from model.safetensors" % (model_dir, name))
            return w[name]

        for i in range(self.n_layer):
            p = "encoder.layer.%d." % i
            for sub in ("attention.self.query", "attention.self.key", "attention.self.value",
                        "attention.output.dense", "attention.output.LayerNorm", "intermediate.dense",
                        "output.dense", "output.LayerNorm"):
                need(p + sub + ".weight")
                need(p + sub + ".bias")
        for sub in ("word_embeddings.weight", "position_embeddings.weight", "token_type_embeddings.weight",
                    "LayerNorm.weight", "LayerNorm.bias"):
            need("embeddings." + sub)

    def layernorm(self, x, prefix):
        return torch.nn.functional.layer_norm(x, (self.hidden,), self.w[prefix + ".weight"],
                                              self.w[prefix + ".bias"], self.eps)

    def linear(self, x, prefix):
        return x @ self.w[prefix + ".weight"].T + self.w[prefix + ".bias"]

    def gelu(self, x):
        if self.act == "gelu":
            return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x.pow(3))))

    def additive_mask(self, mask):
        """(B, L) 0/1 attention mask -> (B, 1, 1, L) additive mask: 0 or a large finite negative."""
        return ((1.0 - mask.to(self.dtype)) * MASK_MIN)[:, None, None, :]

    @torch.no_grad()
    def hidden_states(self, ids, mask):
        """ids, mask: (B, L) long -> last hidden states (B, L, hidden)."""
        B, L = ids.shape
        e = self.w
        x = (e["embeddings.word_embeddings.weight"][ids]
             + e["embeddings.position_embeddings.weight"][:L][None]
             + e["embeddings.token_type_embeddings.weight"][0][None, None])
        x = self.layernorm(x, "embeddings.LayerNorm")
        add = self.additive_mask(mask)
        for i in range(self.n_layer):
            p = "encoder.layer.%d." % i

            def heads(t):
                return t.view(B, L, self.n_head, self.head_dim).transpose(1, 2)  # (B, H, L, hd)

            q = heads(self.linear(x, p + "attention.self.query"))
            k = heads(self.linear(x, p + "attention.self.key"))
            v = heads(self.linear(x, p + "attention.self.value"))
            scores = q @ k.transpose(-1, -2) / math.sqrt(self.head_dim) + add
            ctx = (torch.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(B, L, self.hidden)
            x = self.layernorm(x + self.linear(ctx, p + "attention.output.dense"), p + "attention.output.LayerNorm")
            h = self.gelu(self.linear(x, p + "intermediate.dense"))
            x = self.layernorm(x + self.linear(h, p + "output.dense"), p + "output.LayerNorm")
        return x

    def pool(self, x, mask):
        m = mask.to(x.dtype)[:, :, None]                                  # (B, L, 1)
        n = m.sum(1)                                                       # (B, 1)
        if self.pooling == "cls":
            out = x[:, 0]
        elif self.pooling in ("mean", "mean_sqrt_len"):
            denom = n.clamp(min=1e-9)
            out = (x * m).sum(1) / (denom if self.pooling == "mean" else torch.sqrt(denom))
        elif self.pooling == "max":
            out = x.masked_fill(m == 0, -1e9).max(1).values
        else:  # lasttoken: right padding, so the last real token is at len - 1
            out = x[torch.arange(x.shape[0]), mask.sum(1).long() - 1]
        if self.normalize:
            out = torch.nn.functional.normalize(out, p=2.0, dim=1, eps=1e-12)
        return out

    def embed(self, batch):
        """batch: list of token-id lists -> (B, hidden) embeddings, run as one right-padded batch."""
        if not batch or any(len(s) == 0 for s in batch):
            raise ValueError("embed needs non-empty sequences")
        L = max(len(s) for s in batch)
        ids = torch.zeros(len(batch), L, dtype=torch.long)
        mask = torch.zeros(len(batch), L, dtype=torch.long)
        for i, s in enumerate(batch):
            ids[i, :len(s)] = torch.as_tensor(s, dtype=torch.long)
            mask[i, :len(s)] = 1
        return self.pool(self.hidden_states(ids, mask), mask)


def main(argv=None):
    ap = argparse.ArgumentParser(description="BERT sentence-embedding reference")
    ap.add_argument("model_dir")
    ap.add_argument("ids_json", help="file with a JSON list of token-id lists")
    ap.add_argument("out_json")
    ap.add_argument("--dtype", choices=("float64", "float32"), default="float64")
    a = ap.parse_args(argv)
    with open(a.ids_json) as f:
        batch = json.load(f)
    model = BertRef(a.model_dir, getattr(torch, a.dtype))
    batched = model.embed(batch).to(torch.float32)
    alone = torch.cat([model.embed([s]) for s in batch]).to(torch.float32)
    with open(a.out_json, "w") as f:
        json.dump({"batched": batched.tolist(), "alone": alone.tolist()}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
