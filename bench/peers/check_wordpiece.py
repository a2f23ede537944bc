#!/usr/bin/python3
"""check_wordpiece: checks bench/peers/wordpiece.py against llama.cpp's golden
bert-bge tokenizations (produced with Hugging Face's tokenizer for
BAAI/bge-small-en-v1.5, whose vocab is bert-base-uncased's).

    /usr/bin/python3 bench/peers/check_wordpiece.py [SHARED_VOCAB_DIR]

SHARED_VOCAB_DIR (default /work/shared/vocab) holds bert-base-uncased-vocab.txt,
ggml-vocab-bert-bge.gguf.inp (inputs split by "\\n__ggml_vocab_test__\\n") and
.out (one line of ids per input, no [CLS]/[SEP]). Exit 0 when all match.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import wordpiece  # noqa: E402


def main():
    d = sys.argv[1] if len(sys.argv) > 1 else "/work/shared/vocab"
    tok = wordpiece.Tokenizer(os.path.join(d, "bert-base-uncased-vocab.txt"))
    with open(os.path.join(d, "ggml-vocab-bert-bge.gguf.inp"), encoding="utf-8") as f:
        inputs = f.read().split("\n__ggml_vocab_test__\n")
    with open(os.path.join(d, "ggml-vocab-bert-bge.gguf.out")) as f:
        outputs = f.read().split("\n")
    bad = 0
    for text, line in zip(inputs, outputs):
        want = [int(x) for x in line.split()]
        got = tok.tokenize(text)
        if got != want:
            bad += 1
            print("MISMATCH %r\n  want %s\n  got  %s" % (text, want, got))
    n = min(len(inputs), len(outputs))
    print("check_wordpiece: %d of %d inputs match" % (n - bad, n))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
