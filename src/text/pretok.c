/* pretok.c: BPE pre-tokenization by regex, one table row per GGUF `pre`.
 *
 * How: each known pre name maps to the list of regexes llama.cpp applies
 * (llama-vocab.cpp, llm_tokenizer_bpe), compiled once with PCRE2 in UTF + UCP
 * mode and JIT-compiled when available. Splitting walks the matches of each
 * regex inside every piece left by the previous one; text between matches is
 * kept as a piece, as llama.cpp's unicode_regex_split does.
 *
 * \s is spelled out as llama.cpp's whitespace set (the Unicode White_Space
 * property: \t-\r, space, U+0085, U+00A0, U+1680, U+2000-U+200A, U+2028,
 * U+2029, U+202F, U+205F, U+3000) because PCRE2's \s under UCP also takes
 * U+180E (its horizontal-space list predates Unicode 6.3, which dropped that
 * character from White_Space), and the splits must agree with the reference
 * character for character. The (?i:'s|...) contractions are written with
 * [sS] classes, as llama.cpp rewrote them.
 *
 * Rejected: porting llama.cpp's hand-written matchers for the gpt-2 and llama3
 * patterns. They exist because std::regex cannot do Unicode classes; PCRE2
 * can, so one engine serves every pattern and new pre names are one table row.
 * Rejected: std-C regex.h (no \p{L}, no lookahead). */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "text/pretok.h"

#include <pcre2.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WS "\\t-\\r\\x{20}\\x{85}\\x{a0}\\x{1680}\\x{2000}-\\x{200a}\\x{2028}\\x{2029}\\x{202f}\\x{205f}\\x{3000}"

/* 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ */
#define RE_GPT2                                                                              \
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" WS "\\p{L}\\p{N}]+|[" WS "]+(?![^" WS \
    "])|[" WS "]+"
#define RE_CONTRACTIONS "'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD]"
/* (?i:'s|...)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+ */
#define RE_LLAMA3_WITH(num)                                                                  \
    RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|" num "| ?[^" WS "\\p{L}\\p{N}]+[\\r\\n]*|[" WS \
    "]*[\\r\\n]+|[" WS "]+(?![^" WS "])|[" WS "]+"

typedef struct pre_row {
    const char *names;  /* NUL-separated aliases, ended by an empty name */
    const char *re[HEARTH_PRETOK_MAX_RE];
    bool ignore_merges, add_bos;
} pre_row;

static const pre_row k_pre[] = {
    {"gpt-2\0phi-2\0mpt\0olmo\0jais\0roberta-bpe\0exaone4\0", {RE_GPT2}, false, false},
    {"llama3\0llama-v3\0llama-bpe\0falcon3\0falcon-h1\0pixtral\0midm-2.0\0lfm2\0",
     {RE_LLAMA3_WITH("\\p{N}{1,3}")}, true, true},
    {"dbrx\0smaug-bpe\0", {RE_LLAMA3_WITH("\\p{N}{1,3}")}, false, false},
    {"qwen2\0deepseek-r1-qwen\0megrez\0stablelm2\0hunyuan\0", {RE_LLAMA3_WITH("\\p{N}")}, false, false},
    {"starcoder\0refact\0command-r\0smollm\0codeshell\0exaone\0minerva-7b\0",
     {"\\p{N}", RE_GPT2}, false, false},
    {"falcon\0", {"[\\p{P}\\$\\+<=>\\^~\\|`]+", RE_GPT2, "[0-9][0-9][0-9]"}, false, false},
    {"default\0", {"[\\p{P}\\$\\+<=>\\^~\\|]+", RE_GPT2, "\\p{N}+", "[0-9][0-9][0-9]"}, false, false},
};

static const pre_row *find_row(const char *pre)
{
    for (size_t i = 0; i < sizeof k_pre / sizeof k_pre[0]; i++)
        for (const char *n = k_pre[i].names; *n; n += strlen(n) + 1)
            if (strcmp(n, pre) == 0)
                return &k_pre[i];
    return NULL;
}

int hearth_pretok_init(hearth_pretok *p, const char *pre, hearth_err *err)
{
    memset(p, 0, sizeof *p);
    if (!pre || !*pre)
        pre = "default";
    const pre_row *row = find_row(pre);
    if (!row)
        return hearth_err_set(err, HEARTH_EUNSUPPORTED, "bpe: unknown pre-tokenizer '%s' (tokenizer.ggml.pre)", pre);
    snprintf(p->name, sizeof p->name, "%s", pre);
    p->ignore_merges = row->ignore_merges;
    p->add_bos = row->add_bos;
    for (int i = 0; i < HEARTH_PRETOK_MAX_RE && row->re[i]; i++) {
        int code;
        PCRE2_SIZE at;
        pcre2_code *re = pcre2_compile((PCRE2_SPTR)row->re[i], PCRE2_ZERO_TERMINATED,
                                       PCRE2_UTF | PCRE2_UCP, &code, &at, NULL);
        if (!re) {
            PCRE2_UCHAR msg[160];
            pcre2_get_error_message(code, msg, sizeof msg);
            hearth_pretok_deinit(p);
            return hearth_err_set(err, HEARTH_EINVAL, "bpe: pre '%s': regex %d does not compile at %zu: %s",
                                  pre, i, (size_t)at, (const char *)msg);
        }
        /* JIT is an optimisation only: the interpreter gives the same matches. */
        (void)pcre2_jit_compile(re, PCRE2_JIT_COMPLETE);
        p->re[p->n_re++] = re;
    }
    return HEARTH_OK;
}

void hearth_pretok_deinit(hearth_pretok *p)
{
    for (int i = 0; i < p->n_re; i++)
        pcre2_code_free(p->re[i]);
    memset(p, 0, sizeof *p);
}

typedef struct span_list {
    hearth_span *v;
    size_t n, cap;
} span_list;

static int span_push(span_list *l, size_t off, size_t len)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        hearth_span *p = realloc(l->v, cap * sizeof *p);
        if (!p)
            return HEARTH_ENOMEM;
        l->v = p;
        l->cap = cap;
    }
    l->v[l->n++] = (hearth_span){off, len};
    return HEARTH_OK;
}

/* Splits one piece by one regex into out. */
static int split_piece(pcre2_code *re, pcre2_match_data *md, const char *text, hearth_span in,
                       span_list *out, hearth_err *err)
{
    PCRE2_SPTR subject = (PCRE2_SPTR)(text + in.off);
    size_t start = 0, prev = 0;
    while (start < in.len) {
        int rc = pcre2_match(re, subject, in.len, start, PCRE2_NO_UTF_CHECK, md, NULL);
        if (rc == PCRE2_ERROR_NOMATCH)
            break;
        if (rc < 0) {
            PCRE2_UCHAR msg[160];
            pcre2_get_error_message(rc, msg, sizeof msg);
            return hearth_err_set(err, HEARTH_EINVAL, "bpe: pre-tokenizer regex failed at byte %zu: %s",
                                  in.off + start, (const char *)msg);
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        size_t ms = ov[0], me = ov[1];
        if (ms > prev && span_push(out, in.off + prev, ms - prev))
            return HEARTH_ENOMEM;
        if (me > ms && span_push(out, in.off + ms, me - ms))
            return HEARTH_ENOMEM;
        prev = me;
        if (me > ms) {
            start = me;
        } else {
            /* an empty match: step over one character so the loop advances */
            start = me + 1;
            while (start < in.len && (subject[start] & 0xc0) == 0x80)
                start++;
        }
    }
    if (prev < in.len && span_push(out, in.off + prev, in.len - prev))
        return HEARTH_ENOMEM;
    return HEARTH_OK;
}

int hearth_pretok_split(const hearth_pretok *p, const char *text, size_t n, hearth_span **pieces,
                        size_t *n_pieces, hearth_err *err)
{
    span_list cur = {0}, next = {0};
    pcre2_match_data *md = NULL;
    int rc = HEARTH_OK;
    *pieces = NULL;
    *n_pieces = 0;
    if (n == 0)
        return HEARTH_OK;
    if (span_push(&cur, 0, n))
        goto nomem;
    for (int i = 0; i < p->n_re; i++) {
        pcre2_code *re = p->re[i];
        md = pcre2_match_data_create_from_pattern(re, NULL);
        if (!md)
            goto nomem;
        next.n = 0;
        for (size_t k = 0; k < cur.n; k++) {
            rc = split_piece(re, md, text, cur.v[k], &next, err);
            if (rc == HEARTH_ENOMEM)
                goto nomem;
            if (rc)
                goto fail;
        }
        pcre2_match_data_free(md);
        md = NULL;
        span_list t = cur;
        cur = next;
        next = t;
    }
    free(next.v);
    *pieces = cur.v;
    *n_pieces = cur.n;
    return HEARTH_OK;
nomem:
    rc = hearth_err_set(err, HEARTH_ENOMEM, "bpe: out of memory splitting %zu bytes", n);
fail:
    pcre2_match_data_free(md);
    free(cur.v);
    free(next.v);
    return rc;
}
