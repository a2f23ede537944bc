"""rerank_ref: reference cross-encoder scores, from Hugging Face transformers.

What: loads a BertForSequenceClassification folder (config.json with one
label, model.safetensors with "bert."-prefixed encoder and pooler tensors and
an unprefixed classifier, vocab.txt) with transformers itself
(BertForSequenceClassification.from_pretrained, BertTokenizer), tokenizes
each (query, document) pair as transformers does ([CLS] q [SEP] d [SEP],
token_type_ids 0 then 1, truncation="only_second" to max_length), and writes
the classifier's logit per pair. Nothing of hearth's code or tokenizer is
used: this checks hearth's pair tokenization, its token-type rows and its
head together.

Also written, to show the token types matter: the logits with every
token_type_id forced to 0 (what a server that ignores types, as llama.cpp's
bert graph does, would compute).

Needs transformers (build/venv: 4.46.3) and torch.

CLI:
    python tests/ref/rerank_ref.py MODEL_DIR PAIRS_JSON OUT_JSON --max-length N
PAIRS_JSON: [[query, document], ...]; writes {"ids": [[int]], "scores":
[float], "scores_type0": [float]}.
"""
import argparse
import json
import os
import sys

import torch


def main(argv=None):
    ap = argparse.ArgumentParser(description="cross-encoder reference scores")
    ap.add_argument("model_dir")
    ap.add_argument("pairs_json")
    ap.add_argument("out_json")
    ap.add_argument("--max-length", type=int, required=True)
    a = ap.parse_args(argv)
    from transformers import BertForSequenceClassification, BertTokenizer

    torch.set_num_threads(2)
    with open(a.pairs_json) as f:
        pairs = json.load(f)
    tok = BertTokenizer(os.path.join(a.model_dir, "vocab.txt"), do_lower_case=True)
    model = BertForSequenceClassification.from_pretrained(a.model_dir, torch_dtype=torch.float32)
    model.eval()
    if model.config.num_labels != 1:
        raise SystemExit("%s: %d labels, want 1" % (a.model_dir, model.config.num_labels))
    ids, scores, scores0 = [], [], []
    with torch.no_grad():
        for q, d in pairs:  # one pair at a time: no padding to reason about
            enc = tok(q, d, truncation="only_second", max_length=a.max_length, return_tensors="pt")
            ids.append(enc["input_ids"][0].tolist())
            scores.append(float(model(**enc).logits[0, 0]))
            enc["token_type_ids"] = torch.zeros_like(enc["token_type_ids"])
            scores0.append(float(model(**enc).logits[0, 0]))
    with open(a.out_json, "w") as f:
        json.dump({"ids": ids, "scores": scores, "scores_type0": scores0}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
