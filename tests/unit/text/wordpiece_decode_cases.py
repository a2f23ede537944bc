"""wordpiece_decode_cases.py: writes wordpiece_decode_cases.h, the decode
goldens, from Hugging Face's tokenizers (the PyPI "tokenizers" package, the
Rust library through its Python binding; pinned in tests/requirements.txt).

    build/venv/bin/python tests/unit/text/wordpiece_decode_cases.py \\
        ../shared/vocab/bert-base-uncased-vocab.txt > tests/unit/text/wordpiece_decode_cases.h
"""
import sys

from tokenizers import Tokenizer, decoders, normalizers, pre_tokenizers
from tokenizers.models import WordPiece

# Texts (encoded, then wrapped in [CLS] ... [SEP]) and raw id lists.
INPUTS = ["Hello, world!", "don't stop", "I'm sure it's fine, we've seen they're here", "what?! no... yes.",
          "e.g. the U.S.A. in 3.14 seconds", "unaffable tokenization embeddings", "caf\u00e9 na\u00efve",
          "\u6211\u662f\u4e2d\u56fd\u4eba", "do not enter", "a ' b", "price: $5,000 (approx.)", "  spaced   out  ", "",
          "xyzzyqqq zzzz", "multi\nline\ttext", "\u00bfQu\u00e9 tal?", "rock'n'roll", "he said \"hi\"",
          "well-known co-operation", "#hashtag ##notprefix", [2023, 2003, 1037, 3231], [4638, 2023],
          [101, 100, 2023, 100, 102], [0, 101, 103, 102, 0], [2023, 1005, 1056], [1005, 1049, 2009, 1005, 1055],
          [2017, 2987, 1005, 1056], [1012, 1012, 1012], [2015, 7592], [2015], [7592, 2015, 2015, 1012], [1029, 999],
          [1000, 1000]]

PRE = """/* wordpiece_decode_cases.h: token ids and the text Hugging Face's tokenizers
 * decodes them to, with skip_special_tokens on and off, for the
 * bert-base-uncased vocabulary (../shared/vocab/bert-base-uncased-vocab.txt,
 * and the same ids in ggml-vocab-bert-bge.gguf). Written by
 * wordpiece_decode_cases.py with PyPI's tokenizers (the Rust library:
 * BertNormalizer, BertPreTokenizer, WordPiece, decoders.WordPiece("##",
 * cleanup), [PAD] [UNK] [CLS] [SEP] [MASK] as special tokens); the ids of a
 * text are its encoding between [CLS] and [SEP]. Included by the text and
 * models tests, after harness.h. */
#ifndef HEARTH_TEST_WORDPIECE_DECODE_CASES_H
#define HEARTH_TEST_WORDPIECE_DECODE_CASES_H

#include "text/wordpiece.h"

#include <stdint.h>

static const struct wordpiece_decode_case {
    int32_t ids[24];
    int n;
    const char *skip;    /* decode(ids, skip_special_tokens = true) */
    const char *keep;    /* decode(ids, false) */
} wordpiece_decode_cases[] = {
"""
POST = """};

/* Decodes every case with wp, skipping specials and keeping them. */
static void check_wordpiece_decode_cases(const hearth_wordpiece *wp)
{
    for (size_t c = 0; c < sizeof wordpiece_decode_cases / sizeof wordpiece_decode_cases[0]; c++) {
        const struct wordpiece_decode_case *k = &wordpiece_decode_cases[c];
        for (int skip = 0; skip < 2; skip++) {
            hearth_buf out;
            hearth_buf_init(&out, 4096);
            hearth_err err = {0};
            int rc = hearth_wordpiece_decode(wp, k->ids, (size_t)k->n, skip, &out, &err);
            const char *want = skip ? k->skip : k->keep;
            const char *got = out.data ? out.data : "";
            CHECK_MSG(rc == HEARTH_OK && out.len == strlen(want) && !memcmp(got, want, out.len),
                      "case %zu (skip %d): rc %d, '%.*s', want '%s' (%s)", c, skip, rc, (int)out.len, got, want, err.msg);
            hearth_buf_deinit(&out);
        }
    }
}

#endif
"""


def cstr(s):
    """A C string literal of s's UTF-8 bytes; a hex escape is closed by "" so
    that a following hex digit is not read into it."""
    out = '"'
    for c in s.encode("utf-8"):
        if c == 34:
            out += '\\"'
        elif c == 92:
            out += "\\\\"
        elif 32 <= c < 127:
            out += chr(c)
        else:
            out += '\\x%02X""' % c
    return out + '"'


def main(vocab_path):
    t = Tokenizer(WordPiece.from_file(vocab_path, unk_token="[UNK]", max_input_chars_per_word=100))
    t.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True, strip_accents=True,
                                              lowercase=True)
    t.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    t.decoder = decoders.WordPiece(prefix="##", cleanup=True)
    t.add_special_tokens(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
    v = t.get_vocab()
    rows = ""
    for s in INPUTS:
        ids = s
        if isinstance(s, str):
            ids = [v["[CLS]"], *t.encode(s, add_special_tokens=False).ids, v["[SEP]"]]
        skip, keep = t.decode(ids, skip_special_tokens=True), t.decode(ids, skip_special_tokens=False)
        rows += "    {{%s}, %d, %s, %s},\n" % (", ".join(map(str, ids)) if ids else "0", len(ids), cstr(skip), cstr(keep))
    sys.stdout.write(PRE + rows + POST)


if __name__ == "__main__":
    main(sys.argv[1])
