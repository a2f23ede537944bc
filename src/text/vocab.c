/* vocab.c: token storage and an open-addressing hash (FNV-1a, linear probing,
 * load <= 0.5) from token text to id. A hash rather than a sorted array
 * because tokenizers look up every candidate substring, millions per second. */
#include "vocab.h"

#include <stdlib.h>
#include <string.h>

static uint64_t fnv1a(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) {
        h ^= (uint8_t)s[i];
        h *= 1099511628211ull;
    }
    return h;
}

int hearth_vocab_init(hearth_vocab *v, int32_t n_tokens, hearth_err *err)
{
    memset(v, 0, sizeof *v);
    v->bos = v->eos = v->eot = v->unk = v->sep = v->pad = v->cls = v->mask = -1;
    v->fim_pre = v->fim_suf = v->fim_mid = v->fim_rep = v->fim_sep = -1;
    v->add_bos = v->add_eos = v->add_space_prefix = -1;
    if (n_tokens <= 0 || n_tokens > (1 << 24))
        return hearth_err_set(err, HEARTH_EINVAL, "vocab: %d tokens is out of range (1..16777216)", (int)n_tokens);
    v->n_tokens = n_tokens;
    v->text = calloc((size_t)n_tokens, sizeof *v->text);
    v->len = calloc((size_t)n_tokens, sizeof *v->len);
    v->score = calloc((size_t)n_tokens, sizeof *v->score);
    v->kind = calloc((size_t)n_tokens, sizeof *v->kind);
    if (!v->text || !v->len || !v->score || !v->kind) {
        hearth_vocab_deinit(v);
        return hearth_err_set(err, HEARTH_ENOMEM, "vocab: out of memory for %d tokens", (int)n_tokens);
    }
    memset(v->kind, HEARTH_TOK_NORMAL, (size_t)n_tokens);
    return HEARTH_OK;
}

int hearth_vocab_set_token(hearth_vocab *v, int32_t id, const char *s, size_t n, hearth_err *err)
{
    if (id < 0 || id >= v->n_tokens)
        return hearth_err_set(err, HEARTH_EINVAL, "vocab: token id %d out of range", (int)id);
    if (n > 65535)
        return hearth_err_set(err, HEARTH_EINVAL, "vocab: token %d is %zu bytes long (max 65535)", (int)id, n);
    char *copy = malloc(n + 1);
    if (!copy)
        return hearth_err_set(err, HEARTH_ENOMEM, "vocab: out of memory");
    memcpy(copy, s, n);
    copy[n] = 0;
    free(v->text[id]);
    v->text[id] = copy;
    v->len[id] = (uint32_t)n;
    return HEARTH_OK;
}

int hearth_vocab_finish(hearth_vocab *v, hearth_err *err)
{
    size_t cap = 16;
    while (cap < (size_t)v->n_tokens * 2)
        cap *= 2;
    free(v->hash_slots);
    v->hash_slots = malloc(cap * sizeof *v->hash_slots);
    if (!v->hash_slots)
        return hearth_err_set(err, HEARTH_ENOMEM, "vocab: out of memory for the hash");
    for (size_t i = 0; i < cap; i++)
        v->hash_slots[i] = -1;
    v->hash_cap = cap;
    for (int32_t id = 0; id < v->n_tokens; id++) {
        if (!v->text[id]) {
            if (hearth_vocab_set_token(v, id, "", 0, err))
                return err ? err->code : HEARTH_ENOMEM;
        }
        if (hearth_vocab_find(v, v->text[id], v->len[id]) >= 0)
            continue; /* duplicate text: the lowest id wins */
        size_t i = fnv1a(v->text[id], v->len[id]) & (cap - 1);
        while (v->hash_slots[i] >= 0)
            i = (i + 1) & (cap - 1);
        v->hash_slots[i] = id;
    }
    return HEARTH_OK;
}

void hearth_vocab_guess_fim(hearth_vocab *v)
{
    static const struct {
        size_t field;
        const char *texts[4];
    } marks[] = {
        {offsetof(hearth_vocab, fim_pre), {"<|fim_prefix|>", "<fim-prefix>", "<\uff5cfim\u2581begin\uff5c>", "<PRE>"}},
        {offsetof(hearth_vocab, fim_suf), {"<|fim_suffix|>", "<fim-suffix>", "<\uff5cfim\u2581hole\uff5c>", "<SUF>"}},
        {offsetof(hearth_vocab, fim_mid), {"<|fim_middle|>", "<fim-middle>", "<\uff5cfim\u2581end\uff5c>", "<MID>"}},
        {offsetof(hearth_vocab, fim_rep), {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>"}},
        {offsetof(hearth_vocab, fim_sep), {"<|file_sep|>"}},
    };
    for (size_t m = 0; m < sizeof marks / sizeof marks[0]; m++) {
        int32_t *id = (int32_t *)((char *)v + marks[m].field);
        for (int k = 0; *id < 0 && k < 4 && marks[m].texts[k]; k++)
            *id = hearth_vocab_find(v, marks[m].texts[k], strlen(marks[m].texts[k]));
        if (*id >= 0 && v->kind)
            v->kind[*id] = HEARTH_TOK_CONTROL;
    }
}

int32_t hearth_vocab_find(const hearth_vocab *v, const char *s, size_t n)
{
    if (!v->hash_slots)
        return -1;
    size_t i = fnv1a(s, n) & (v->hash_cap - 1);
    for (;;) {
        int32_t id = v->hash_slots[i];
        if (id < 0)
            return -1;
        if (v->len[id] == n && memcmp(v->text[id], s, n) == 0)
            return id;
        i = (i + 1) & (v->hash_cap - 1);
    }
}

void hearth_vocab_deinit(hearth_vocab *v)
{
    if (v->text)
        for (int32_t i = 0; i < v->n_tokens; i++)
            free(v->text[i]);
    if (v->merges)
        for (int32_t i = 0; i < v->n_merges; i++)
            free(v->merges[i]);
    free(v->text);
    free(v->len);
    free(v->score);
    free(v->kind);
    free(v->merges);
    free(v->hash_slots);
    memset(v, 0, sizeof *v);
}

void hearth_ids_init(hearth_ids *ids, size_t max)
{
    ids->v = NULL;
    ids->n = ids->cap = 0;
    ids->max = max;
}

void hearth_ids_deinit(hearth_ids *ids)
{
    free(ids->v);
    ids->v = NULL;
    ids->n = ids->cap = 0;
}

int hearth_ids_push(hearth_ids *ids, int32_t id)
{
    if (ids->n >= ids->max)
        return HEARTH_ELIMIT;
    if (ids->n == ids->cap) {
        size_t cap = ids->cap ? ids->cap * 2 : 64;
        if (cap > ids->max)
            cap = ids->max;
        int32_t *p = realloc(ids->v, cap * sizeof *p);
        if (!p)
            return HEARTH_ENOMEM;
        ids->v = p;
        ids->cap = cap;
    }
    ids->v[ids->n++] = id;
    return HEARTH_OK;
}
