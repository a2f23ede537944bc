/* fuzz_tokenizers: the tokenizers hearth runs on every client's text, over
 * arbitrary bytes, with the real vocabularies of ../shared/vocab (or
 * $HEARTH_SHARED/vocab): WordPiece for encoders (vocab.txt and GGUF
 * spellings), SentencePiece (phi-3) and byte-level BPE (gpt-2) for
 * generation. Each input must be tokenized or refused with a status, never
 * crash, leak or read past the bytes; and what comes out must hold together:
 * WordPiece spans inside the input and in order, every id in the vocabulary,
 * every id list decoding without error, and SPM and BPE giving back valid
 * UTF-8 input exactly (their round trip; special tokens not parsed). SPM's
 * round trip is checked on text without U+2581 (the character it writes
 * spaces as, so it decodes as a space) and without user-defined tokens'
 * texts (matched even unparsed, and followed by the space SPM puts before
 * each run of text after a token, as llama.cpp does). */
#include "base/buf.h"
#include "models/gguf.h"
#include "models/gguf_vocab.h"
#include "text/tokenizer.h"
#include "text/unicode.h"
#include "text/vocab_txt.h"
#include "text/wordpiece.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static hearth_vocab wp_txt_vocab, wp_gguf_vocab, spm_vocab, bpe_vocab;
static hearth_wordpiece wp_txt, wp_gguf;
static hearth_tokenizer spm, bpe;

static void need(int rc, const char *path, const hearth_err *err)
{
    if (rc) {
        fprintf(stderr, "fuzz_tokenizers: %s: %s (the shared vocabularies are needed: set HEARTH_SHARED)\n", path,
                err->msg);
        exit(1);
    }
}

static void load_gguf(const char *dir, const char *name, hearth_vocab *v)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/vocab/%s", dir, name);
    hearth_gguf g;
    hearth_err err = {0};
    int rc = hearth_gguf_open(&g, path, &err);
    need(rc, path, &err);
    rc = hearth_gguf_load_vocab(&g, v, &err);
    hearth_gguf_close(&g);
    need(rc, path, &err);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    const char *dir = getenv("HEARTH_SHARED") ? getenv("HEARTH_SHARED") : "../shared";
    char path[1024];
    hearth_err err = {0};
    snprintf(path, sizeof path, "%s/vocab/bert-base-uncased-vocab.txt", dir);
    need(hearth_vocab_load_txt(&wp_txt_vocab, path, &err), path, &err);
    need(hearth_wordpiece_init(&wp_txt, &wp_txt_vocab, NULL, &err), path, &err);
    load_gguf(dir, "ggml-vocab-bert-bge.gguf", &wp_gguf_vocab);
    need(hearth_wordpiece_init(&wp_gguf, &wp_gguf_vocab, NULL, &err), "ggml-vocab-bert-bge.gguf", &err);
    load_gguf(dir, "ggml-vocab-phi-3.gguf", &spm_vocab);
    need(hearth_tokenizer_init(&spm, &spm_vocab, &err), "ggml-vocab-phi-3.gguf", &err);
    load_gguf(dir, "ggml-vocab-gpt-2.gguf", &bpe_vocab);
    need(hearth_tokenizer_init(&bpe, &bpe_vocab, &err), "ggml-vocab-gpt-2.gguf", &err);
    return 0;
}

static void check_wordpiece(const hearth_wordpiece *wp, const char *text, size_t n)
{
    hearth_ids ids;
    hearth_ids_init(&ids, n + 1);
    hearth_tok_span *spans = malloc((n + 1) * sizeof *spans);
    hearth_err err = {0};
    int rc = hearth_wordpiece_encode_spans(wp, text, n, &ids, spans, n + 1, &err);
    if (rc != HEARTH_OK && rc != HEARTH_EINVAL) /* invalid UTF-8 is refused; a token covers >= 1 byte */
        abort();
    if (rc == HEARTH_EINVAL && !err.msg[0])
        abort();
    uint32_t last = 0;
    for (size_t k = 0; rc == HEARTH_OK && k < ids.n; k++) {
        if (ids.v[k] < 0 || ids.v[k] >= wp->vocab->n_tokens)
            abort();
        if (spans[k].start > spans[k].stop || spans[k].stop > n || spans[k].start < last)
            abort();
        last = spans[k].start;
    }
    for (int skip = 0; rc == HEARTH_OK && skip < 2; skip++) {
        hearth_buf out;
        hearth_buf_init(&out, (size_t)64 << 20);
        if (hearth_wordpiece_decode(wp, ids.v, ids.n, skip, &out, &err) != HEARTH_OK)
            abort();
        if (out.len && hearth_utf8_validate(out.data, out.len, NULL) != HEARTH_OK)
            abort(); /* vocabulary texts are UTF-8, and so is what joins them */
        hearth_buf_deinit(&out);
    }
    free(spans);
    hearth_ids_deinit(&ids);
}

/* Whether ids hold a token SPM puts a space after (see the top). */
static bool has_user_token(const hearth_tokenizer *t, const hearth_ids *ids)
{
    for (size_t k = 0; t->vocab->kind && k < ids->n; k++)
        if (t->vocab->kind[ids->v[k]] == HEARTH_TOK_USER_DEFINED)
            return true;
    return false;
}

static void check_tokenizer(const hearth_tokenizer *t, const char *text, size_t n, bool add_special,
                            bool parse_special, bool valid)
{
    hearth_ids ids;
    hearth_ids_init(&ids, 4 * n + 16);
    hearth_err err = {0};
    int rc = hearth_tokenizer_encode(t, text, n, add_special, parse_special, &ids, &err);
    if (rc != HEARTH_OK && rc != HEARTH_EINVAL)
        abort();
    for (size_t k = 0; rc == HEARTH_OK && k < ids.n; k++)
        if (ids.v[k] < 0 || ids.v[k] >= t->vocab->n_tokens)
            abort();
    if (rc == HEARTH_OK) {
        hearth_buf out;
        hearth_buf_init(&out, (size_t)64 << 20);
        if (hearth_tokenizer_decode(t, ids.v, ids.n, parse_special, &out) != HEARTH_OK)
            abort();
        if (out.len && hearth_utf8_validate(out.data, out.len, NULL) != HEARTH_OK)
            abort(); /* the detokenizer replaces malformed bytes */
        if (t == &spm && has_user_token(t, &ids))
            valid = false;
        if (valid && !parse_special && (out.len != n || (n && memcmp(out.data, text, n))))
            abort(); /* lossless on valid UTF-8 */
        hearth_buf_deinit(&out);
    }
    hearth_ids_deinit(&ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    /* the first byte picks the options; the rest is the text */
    bool add_special = data[0] & 1, parse_special = data[0] & 2;
    const char *text = (const char *)data + 1;
    size_t n = size - 1;
    char *copy = malloc(n ? n : 1); /* exactly n bytes: ASan sees any read past them */
    memcpy(copy, text, n);
    bool valid = hearth_utf8_validate(copy, n, NULL) == HEARTH_OK;
    check_wordpiece(&wp_txt, copy, n);
    check_wordpiece(&wp_gguf, copy, n);
    check_tokenizer(&spm, copy, n, add_special, parse_special, valid && !memmem(copy, n, "\xE2\x96\x81", 3));
    check_tokenizer(&bpe, copy, n, add_special, parse_special, valid);
    free(copy);
    return 0;
}
