#!/usr/bin/python3
"""make_random_bert: a BERT with random weights, as a sentence-transformers folder
and as a llama.cpp GGUF holding the same weights, for benchmarking servers when
no real model is at hand.

Needs (Debian 12): python3-torch, python3-numpy, python3-yaml; and a llama.cpp
checkout (its gguf-py writer, so the GGUF is laid out exactly as llama.cpp's
own converter lays it out).

    /usr/bin/python3 bench/peers/make_random_bert.py OUT_DIR --gguf-py LLAMA_CPP/gguf-py
        [--vocab /work/shared/vocab/bert-base-uncased-vocab.txt] [--layers 6]
        [--hidden 384] [--heads 12] [--ffn 1536] [--outtype f32|f16] [--seed 0]

Writes OUT_DIR/{config.json, model.safetensors, vocab.txt, tokenizer_config.json,
modules.json, 1_Pooling/config.json} and OUT_DIR/model-<outtype>.gguf.
The defaults are all-MiniLM-L6-v2's shapes, so the work per token is that of
the model people serve; the embeddings themselves mean nothing. Speed does not
depend on the weight values, so the comparison stands; correctness must be
checked on a real model.

How: weights ~ N(0, 0.02) as BERT's initializer draws them, LayerNorm gamma 1
and beta 0; the GGUF tensor names come from gguf-py's TensorNameMap for
MODEL_ARCH.BERT (what convert_hf_to_gguf.py uses), metadata as its BertModel
writes it (tokenizer.ggml.model "bert", tokens spelled with llama.cpp's U+2581
word-start prefix and '##' dropped).
Rejected: convert_hf_to_gguf.py itself (needs transformers, not in Debian).
"""
import argparse
import json
import os
import sys
import types

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


def import_gguf(gguf_py):
    # gguf-py's vocab module imports sentencepiece at load time; we never use it
    sys.modules.setdefault("sentencepiece", types.SimpleNamespace(SentencePieceProcessor=None))
    sys.path.insert(0, gguf_py)
    import gguf
    return gguf


def random_weights(a, n_vocab, rng):
    """HF BertModel parameter names (no 'bert.' prefix) -> float32 arrays, (out, in) for linears."""
    h, f = a.hidden, a.ffn
    w = {}

    def normal(*shape):
        return (rng.standard_normal(shape) * 0.02).astype(np.float32)

    def ln(prefix):
        w[prefix + ".weight"] = np.ones(h, np.float32)
        w[prefix + ".bias"] = np.zeros(h, np.float32)

    w["embeddings.word_embeddings.weight"] = normal(n_vocab, h)
    w["embeddings.position_embeddings.weight"] = normal(a.max_pos, h)
    w["embeddings.token_type_embeddings.weight"] = normal(2, h)
    ln("embeddings.LayerNorm")
    for i in range(a.layers):
        p = "encoder.layer.%d." % i
        for name, (n_out, n_in) in (("attention.self.query", (h, h)), ("attention.self.key", (h, h)),
                                    ("attention.self.value", (h, h)), ("attention.output.dense", (h, h)),
                                    ("intermediate.dense", (f, h)), ("output.dense", (h, f))):
            w[p + name + ".weight"] = normal(n_out, n_in)
            w[p + name + ".bias"] = normal(n_out)
        ln(p + "attention.output.LayerNorm")
        ln(p + "output.LayerNorm")
    return w


def write_folder(out, a, tokens, w):
    import torch
    sys.path.insert(0, os.path.join(REPO, "tests", "ref"))
    import safetensors_py
    for sub in ("1_Pooling", "2_Normalize"):
        os.makedirs(os.path.join(out, sub), exist_ok=True)
    cfg = {"architectures": ["BertModel"], "model_type": "bert", "hidden_size": a.hidden,
           "num_hidden_layers": a.layers, "num_attention_heads": a.heads, "intermediate_size": a.ffn,
           "hidden_act": "gelu", "max_position_embeddings": a.max_pos, "type_vocab_size": 2,
           "vocab_size": len(tokens), "layer_norm_eps": 1e-12, "position_embedding_type": "absolute",
           "pad_token_id": 0, "torch_dtype": "float32"}
    files = {
        "config.json": cfg,
        "tokenizer_config.json": {"do_lower_case": True, "tokenizer_class": "BertTokenizer",
                                  "model_max_length": a.max_pos},
        "modules.json": [
            {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
            {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
            {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}],
        "1_Pooling/config.json": {"word_embedding_dimension": a.hidden, "pooling_mode_cls_token": False,
                                  "pooling_mode_mean_tokens": True, "pooling_mode_max_tokens": False,
                                  "pooling_mode_mean_sqrt_len_tokens": False},
    }
    for name, obj in files.items():
        with open(os.path.join(out, name), "w") as fh:
            json.dump(obj, fh, indent=2)
    with open(os.path.join(out, "vocab.txt"), "w", encoding="utf-8") as fh:
        fh.write("".join(t + "\n" for t in tokens))
    safetensors_py.save(os.path.join(out, "model.safetensors"),
                        {k: torch.from_numpy(v) for k, v in w.items()})


def gguf_token(t):
    """vocab.txt spelling -> llama.cpp's: '##x' -> 'x', a word start 'x' -> U+2581 'x', [XXX] unchanged."""
    if t.startswith("##"):
        return t[2:]
    if t.startswith("[") and t.endswith("]"):
        return t
    return "\u2581" + t


def write_gguf(path, gguf, a, tokens, w):
    wr = gguf.GGUFWriter(path, "bert")
    wr.add_name("random-bert-%dL-%d" % (a.layers, a.hidden))
    wr.add_block_count(a.layers)
    wr.add_context_length(a.max_pos)
    wr.add_embedding_length(a.hidden)
    wr.add_feed_forward_length(a.ffn)
    wr.add_head_count(a.heads)
    wr.add_layer_norm_eps(1e-12)
    wr.add_causal_attention(False)
    wr.add_pooling_type(gguf.PoolingType.MEAN)
    wr.add_file_type(gguf.LlamaFileType.ALL_F32 if a.outtype == "f32" else gguf.LlamaFileType.MOSTLY_F16)
    wr.add_tokenizer_model("bert")
    wr.add_tokenizer_pre("default")
    wr.add_token_list([gguf_token(t) for t in tokens])
    types_ = [gguf.TokenType.CONTROL if (t.startswith("[") and t.endswith("]")) else gguf.TokenType.NORMAL
              for t in tokens]
    wr.add_token_types(types_)
    wr.add_token_type_count(2)
    ids = {t: i for i, t in enumerate(tokens)}
    wr.add_unk_token_id(ids["[UNK]"])
    wr.add_sep_token_id(ids["[SEP]"])
    wr.add_pad_token_id(ids["[PAD]"])
    wr.add_bos_token_id(ids["[CLS]"])  # llama.cpp reads BERT's [CLS] as its BOS
    wr.add_mask_token_id(ids["[MASK]"])
    names = gguf.TensorNameMap(gguf.MODEL_ARCH.BERT, a.layers)
    for hf, arr in w.items():
        name = names.get_name(hf, try_suffixes=(".weight", ".bias"))
        if name is None:
            raise ValueError("no GGUF name for %s" % hf)
        # as convert_hf_to_gguf.py: 2-D weights take the out type, 1-D stay f32
        if a.outtype == "f16" and arr.ndim == 2:
            arr = arr.astype(np.float16)
        wr.add_tensor(name, arr)
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()


def main():
    ap = argparse.ArgumentParser(description="random-weight BERT as a sentence-transformers folder + GGUF")
    ap.add_argument("out_dir")
    ap.add_argument("--gguf-py", required=True, help="llama.cpp checkout's gguf-py folder")
    ap.add_argument("--vocab", default="/work/shared/vocab/bert-base-uncased-vocab.txt")
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--hidden", type=int, default=384)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--ffn", type=int, default=1536)
    ap.add_argument("--max-pos", type=int, default=512)
    ap.add_argument("--outtype", choices=("f32", "f16"), default="f32")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    gguf = import_gguf(a.gguf_py)
    with open(a.vocab, encoding="utf-8") as fh:
        tokens = [line.rstrip("\n") for line in fh]
    w = random_weights(a, len(tokens), np.random.default_rng(a.seed))
    write_folder(a.out_dir, a, tokens, w)
    path = os.path.join(a.out_dir, "model-%s.gguf" % a.outtype)
    write_gguf(path, gguf, a, tokens, w)
    print("make_random_bert: wrote %s and %s" % (os.path.join(a.out_dir, "model.safetensors"), path))
    return 0


if __name__ == "__main__":
    sys.exit(main())
