// wordpiece_decode_cases.js: writes wordpiece_decode_cases.h, the decode
// goldens, from Hugging Face's tokenizers (npm's "tokenizers" package, 0.23.2:
// the Rust library through its Node binding).
//
//   npm install tokenizers@0.23.2 && node wordpiece_decode_cases.js \
//       ../shared/vocab/bert-base-uncased-vocab.txt > wordpiece_decode_cases.h
const { Tokenizer, WordPiece, bertNormalizer, bertPreTokenizer, wordPieceDecoder } = require('tokenizers');

// Texts (encoded, then wrapped in [CLS] ... [SEP]) and raw id lists.
const INPUTS = ["Hello, world!", "don't stop", "I'm sure it's fine, we've seen they're here", "what?! no... yes.", "e.g. the U.S.A. in 3.14 seconds", "unaffable tokenization embeddings", "caf\u00e9 na\u00efve", "\u6211\u662f\u4e2d\u56fd\u4eba", "do not enter", "a ' b", "price: $5,000 (approx.)", "  spaced   out  ", "", "xyzzyqqq zzzz", "multi\nline\ttext", "\u00bfQu\u00e9 tal?", "rock'n'roll", "he said \"hi\"", "well-known co-operation", "#hashtag ##notprefix", [2023, 2003, 1037, 3231], [4638, 2023], [101, 100, 2023, 100, 102], [0, 101, 103, 102, 0], [2023, 1005, 1056], [1005, 1049, 2009, 1005, 1055], [2017, 2987, 1005, 1056], [1012, 1012, 1012], [2015, 7592], [2015], [7592, 2015, 2015, 1012], [1029, 999], [1000, 1000]];

const PRE = "/* wordpiece_decode_cases.h: token ids and the text Hugging Face's tokenizers\n * decodes them to, with skip_special_tokens on and off, for the\n * bert-base-uncased vocabulary (../shared/vocab/bert-base-uncased-vocab.txt,\n * and the same ids in ggml-vocab-bert-bge.gguf). Written by\n * wordpiece_decode_cases.js with npm's tokenizers 0.23.2 (the Rust library:\n * BertNormalizer, BertPreTokenizer, WordPiece, decoders.WordPiece(\"##\",\n * cleanup), [PAD] [UNK] [CLS] [SEP] [MASK] as special tokens); the ids of a\n * text are its encoding between [CLS] and [SEP]. Included by the text and\n * models tests, after harness.h. */\n#ifndef HEARTH_TEST_WORDPIECE_DECODE_CASES_H\n#define HEARTH_TEST_WORDPIECE_DECODE_CASES_H\n\n#include \"text/wordpiece.h\"\n\n#include <stdint.h>\n\nstatic const struct wordpiece_decode_case {\n    int32_t ids[24];\n    int n;\n    const char *skip;    /* decode(ids, skip_special_tokens = true) */\n    const char *keep;    /* decode(ids, false) */\n} wordpiece_decode_cases[] = {\n";
const POST = "};\n\n/* Decodes every case with wp, skipping specials and keeping them. */\nstatic void check_wordpiece_decode_cases(const hearth_wordpiece *wp)\n{\n    for (size_t c = 0; c < sizeof wordpiece_decode_cases / sizeof wordpiece_decode_cases[0]; c++) {\n        const struct wordpiece_decode_case *k = &wordpiece_decode_cases[c];\n        for (int skip = 0; skip < 2; skip++) {\n            hearth_buf out;\n            hearth_buf_init(&out, 4096);\n            hearth_err err = {0};\n            int rc = hearth_wordpiece_decode(wp, k->ids, (size_t)k->n, skip, &out, &err);\n            const char *want = skip ? k->skip : k->keep;\n            const char *got = out.data ? out.data : \"\";\n            CHECK_MSG(rc == HEARTH_OK && out.len == strlen(want) && !memcmp(got, want, out.len),\n                      \"case %zu (skip %d): rc %d, '%.*s', want '%s' (%s)\", c, skip, rc, (int)out.len, got, want, err.msg);\n            hearth_buf_deinit(&out);\n        }\n    }\n}\n\n#endif\n";

function cstr(s) {
  let out = '"';
  for (const c of Buffer.from(s, 'utf8')) {
    if (c === 34) out += '\\"';
    else if (c === 92) out += '\\\\';
    else if (c >= 32 && c < 127) out += String.fromCharCode(c);
    else out += '\\x' + c.toString(16).toUpperCase().padStart(2, '0') + '""';
  }
  return out + '"';
}

(async () => {
  const model = await WordPiece.fromFile(process.argv[2], { unkToken: '[UNK]', maxInputCharsPerWord: 100 });
  const t = new Tokenizer(model);
  t.setNormalizer(bertNormalizer({ cleanText: true, handleChineseChars: true, stripAccents: true, lowercase: true }));
  t.setPreTokenizer(bertPreTokenizer());
  t.setDecoder(wordPieceDecoder('##', true));
  t.addSpecialTokens(['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]']);
  const v = t.getVocab();
  let rows = '';
  for (const s of INPUTS) {
    let ids = s;
    if (typeof s === 'string') {
      const e = await t.encode(s, null, { addSpecialTokens: false });
      ids = [v['[CLS]'], ...e.getIds(), v['[SEP]']];
    }
    const skip = await t.decode(ids, true), keep = await t.decode(ids, false);
    rows += `    {{${ids.length ? ids.join(', ') : '0'}}, ${ids.length}, ${cstr(skip)}, ${cstr(keep)}},\n`;
  }
  process.stdout.write(PRE + rows + POST);
})();
