/* wordpiece_decode_cases.h: token ids and the text Hugging Face's tokenizers
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
    {{101, 7592, 1010, 2088, 999, 102}, 6, "hello, world!", "[CLS] hello, world! [SEP]"},
    {{101, 2123, 1005, 1056, 2644, 102}, 6, "don ' t stop", "[CLS] don ' t stop [SEP]"},
    {{101, 1045, 1005, 1049, 2469, 2009, 1005, 1055, 2986, 1010, 2057, 1005, 2310, 2464, 2027, 1005, 2128, 2182, 102}, 19, "i ' m sure it ' s fine, we ' ve seen they ' re here", "[CLS] i ' m sure it ' s fine, we ' ve seen they ' re here [SEP]"},
    {{101, 2054, 1029, 999, 2053, 1012, 1012, 1012, 2748, 1012, 102}, 11, "what?! no... yes.", "[CLS] what?! no... yes. [SEP]"},
    {{101, 1041, 1012, 1043, 1012, 1996, 1057, 1012, 1055, 1012, 1037, 1012, 1999, 1017, 1012, 2403, 3823, 102}, 18, "e. g. the u. s. a. in 3. 14 seconds", "[CLS] e. g. the u. s. a. in 3. 14 seconds [SEP]"},
    {{101, 14477, 20961, 3468, 19204, 3989, 7861, 8270, 4667, 2015, 102}, 11, "unaffable tokenization embeddings", "[CLS] unaffable tokenization embeddings [SEP]"},
    {{101, 7668, 15743, 102}, 4, "cafe naive", "[CLS] cafe naive [SEP]"},
    {{101, 1855, 100, 1746, 1799, 1756, 102}, 7, "\xE6""\x88""\x91"" \xE4""\xB8""\xAD"" \xE5""\x9B""\xBD"" \xE4""\xBA""\xBA""", "[CLS] \xE6""\x88""\x91"" [UNK] \xE4""\xB8""\xAD"" \xE5""\x9B""\xBD"" \xE4""\xBA""\xBA"" [SEP]"},
    {{101, 2079, 2025, 4607, 102}, 5, "do not enter", "[CLS] do not enter [SEP]"},
    {{101, 1037, 1005, 1038, 102}, 5, "a ' b", "[CLS] a ' b [SEP]"},
    {{101, 3976, 1024, 1002, 1019, 1010, 2199, 1006, 22480, 1012, 1007, 102}, 12, "price : $ 5, 000 ( approx. )", "[CLS] price : $ 5, 000 ( approx. ) [SEP]"},
    {{101, 19835, 2041, 102}, 4, "spaced out", "[CLS] spaced out [SEP]"},
    {{101, 102}, 2, "", "[CLS] [SEP]"},
    {{101, 1060, 2100, 28753, 4160, 4160, 4160, 1062, 13213, 2480, 102}, 11, "xyzzyqqq zzzz", "[CLS] xyzzyqqq zzzz [SEP]"},
    {{101, 4800, 2240, 3793, 102}, 5, "multi line text", "[CLS] multi line text [SEP]"},
    {{101, 1094, 10861, 21368, 1029, 102}, 6, "\xC2""\xBF"" que tal?", "[CLS] \xC2""\xBF"" que tal? [SEP]"},
    {{101, 2600, 1005, 1050, 1005, 4897, 102}, 7, "rock ' n ' roll", "[CLS] rock ' n ' roll [SEP]"},
    {{101, 2002, 2056, 1000, 7632, 1000, 102}, 7, "he said \" hi \"", "[CLS] he said \" hi \" [SEP]"},
    {{101, 2092, 1011, 2124, 2522, 1011, 3169, 102}, 8, "well - known co - operation", "[CLS] well - known co - operation [SEP]"},
    {{101, 1001, 23325, 15900, 1001, 1001, 2025, 28139, 8873, 2595, 102}, 11, "# hashtag # # notprefix", "[CLS] # hashtag # # notprefix [SEP]"},
    {{2023, 2003, 1037, 3231}, 4, "this is a test", "this is a test"},
    {{4638, 2023}, 2, "check this", "check this"},
    {{101, 100, 2023, 100, 102}, 5, "this", "[CLS] [UNK] this [UNK] [SEP]"},
    {{0, 101, 103, 102, 0}, 5, "", "[PAD] [CLS] [MASK] [SEP] [PAD]"},
    {{2023, 1005, 1056}, 3, "this ' t", "this ' t"},
    {{1005, 1049, 2009, 1005, 1055}, 5, "' m it ' s", "' m it ' s"},
    {{2017, 2987, 1005, 1056}, 4, "you doesn ' t", "you doesn ' t"},
    {{1012, 1012, 1012}, 3, "...", "..."},
    {{2015, 7592}, 2, "##s hello", "##s hello"},
    {{2015}, 1, "##s", "##s"},
    {{7592, 2015, 2015, 1012}, 4, "helloss.", "helloss."},
    {{1029, 999}, 2, "?!", "?!"},
    {{1000, 1000}, 2, "\" \"", "\" \""},
};

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
