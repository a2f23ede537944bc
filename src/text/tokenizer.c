/* tokenizer.c: the facade over spm.c and bpe.c: options, special tokens,
 * BOS/EOS, as llama.cpp's llama_vocab::impl::tokenize arranges them.
 *
 * How: the input is first partitioned into raw-text runs and special tokens
 * (llama.cpp's tokenizer_st_partition): every special token, longest text
 * first, is searched in every raw run left so far, and each occurrence splits
 * the run. The runs are then tokenized one by one by the vocabulary's
 * algorithm; SPM gives each run that starts the text or follows a special
 * token a leading space.
 *
 * Specials that do not occur anywhere in the text are skipped after one
 * memmem over the whole input, so a vocabulary with hundreds of control
 * tokens costs a few fast scans per request, not a pass per token per run.
 *
 * Not done: llama.cpp's per-model LSTRIP/RSTRIP attributes (its phi-3 rule
 * strips spaces after some special tokens, keyed on general.name, which the
 * vocabulary does not carry), and its name-based promotion of texts like
 * "<|eot_id|>" to control tokens when the file types them otherwise.
 * Rejected: an Aho-Corasick automaton over the special texts. It would change
 * nothing observable and the memmem screen already makes the common case
 * (no special text in a prompt) cheap. */
#include "text/tokenizer.h"

#include <stdlib.h>
#include <string.h>

static bool is_special_kind(uint8_t k)
{
    return k == HEARTH_TOK_CONTROL || k == HEARTH_TOK_USER_DEFINED || k == HEARTH_TOK_UNKNOWN;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static int build_specials(hearth_tokenizer *t, hearth_err *err)
{
    const hearth_vocab *v = t->vocab;
    if (!v->kind)
        return HEARTH_OK;
    int32_t n = 0;
    for (int32_t id = 0; id < v->n_tokens; id++)
        n += is_special_kind(v->kind[id]) && v->len[id] > 0;
    if (n == 0)
        return HEARTH_OK;
    /* sort keys: longest text first, then lowest id, packed so qsort needs no context */
    uint64_t *keys = malloc((size_t)n * sizeof *keys);
    t->special = malloc((size_t)n * sizeof *t->special);
    if (!keys || !t->special) {
        free(keys);
        return hearth_err_set(err, HEARTH_ENOMEM, "tokenizer: out of memory for %d special tokens", (int)n);
    }
    for (int32_t id = 0; id < v->n_tokens; id++)
        if (is_special_kind(v->kind[id]) && v->len[id] > 0)
            keys[t->n_special++] = ((uint64_t)(UINT32_MAX - v->len[id]) << 32) | (uint32_t)id;
    qsort(keys, (size_t)n, sizeof *keys, cmp_u64);
    for (int32_t i = 0; i < n; i++)
        t->special[i] = (int32_t)(keys[i] & UINT32_MAX);
    free(keys);
    return HEARTH_OK;
}

int hearth_tokenizer_init(hearth_tokenizer *t, const hearth_vocab *v, hearth_err *err)
{
    memset(t, 0, sizeof *t);
    t->vocab = v;
    t->bos = v->bos;
    t->eos = v->eos;
    int rc;
    if (!v->hash_slots)
        return hearth_err_set(err, HEARTH_EINVAL, "tokenizer: vocabulary is not finished");
    if (strcmp(v->model, "llama") == 0) {
        t->kind = HEARTH_TOKENIZER_SPM;
        if ((rc = hearth_spm_init(&t->spm, v, err)))
            return rc;
        /* llama.cpp's SPM defaults: <s> = 1, </s> = 2, BOS on, space prefix on */
        if (t->bos < 0 && v->n_tokens > 1)
            t->bos = 1;
        if (t->eos < 0 && v->n_tokens > 2)
            t->eos = 2;
        t->add_bos = v->add_bos != 0;
        t->add_space_prefix = v->add_space_prefix != 0;
    } else if (strcmp(v->model, "gpt2") == 0) {
        t->kind = HEARTH_TOKENIZER_BPE;
        if ((rc = hearth_bpe_init(&t->bpe, v, err)))
            return rc;
        t->add_bos = v->add_bos >= 0 ? v->add_bos != 0 : t->bpe.pre.add_bos;
        t->add_space_prefix = v->add_space_prefix == 1;
    } else if (strcmp(v->model, "bert") == 0) {
        return hearth_err_set(err, HEARTH_EUNSUPPORTED,
                              "tokenizer: model 'bert' is WordPiece, which this tokenizer does not handle");
    } else {
        return hearth_err_set(err, HEARTH_EUNSUPPORTED, "tokenizer: unknown tokenizer model '%s' (tokenizer.ggml.model)",
                              v->model);
    }
    t->add_eos = v->add_eos == 1;
    if (t->add_bos && t->bos < 0) {
        rc = hearth_err_set(err, HEARTH_EINVAL, "tokenizer: add_bos_token is set but the vocabulary has no BOS id");
        goto fail;
    }
    if (t->add_eos && t->eos < 0) {
        rc = hearth_err_set(err, HEARTH_EINVAL, "tokenizer: add_eos_token is set but the vocabulary has no EOS id");
        goto fail;
    }
    if ((rc = build_specials(t, err)))
        goto fail;
    return HEARTH_OK;
fail:
    hearth_tokenizer_deinit(t);
    return rc;
}

void hearth_tokenizer_deinit(hearth_tokenizer *t)
{
    if (t->kind == HEARTH_TOKENIZER_BPE)
        hearth_bpe_deinit(&t->bpe);
    free(t->special);
    memset(t, 0, sizeof *t);
}

/* A raw-text run (id < 0) or a special token, in input order. */
typedef struct frag {
    size_t off, len;
    int32_t id;
} frag;

typedef struct frag_list {
    frag *v;
    size_t n, cap;
} frag_list;

static int frag_push(frag_list *l, size_t off, size_t len, int32_t id)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        frag *p = realloc(l->v, cap * sizeof *p);
        if (!p)
            return HEARTH_ENOMEM;
        l->v = p;
        l->cap = cap;
    }
    l->v[l->n++] = (frag){off, len, id};
    return HEARTH_OK;
}

/* Splits the raw runs of *cur at every occurrence of special token id. */
static int split_on(const hearth_vocab *v, const char *text, int32_t id, frag_list *cur, frag_list *next)
{
    const char *s = v->text[id];
    size_t sn = v->len[id];
    next->n = 0;
    for (size_t i = 0; i < cur->n; i++) {
        frag f = cur->v[i];
        if (f.id >= 0) {
            if (frag_push(next, f.off, f.len, f.id))
                return HEARTH_ENOMEM;
            continue;
        }
        while (f.len > 0) {
            const char *m = memmem(text + f.off, f.len, s, sn);
            if (!m)
                break;
            size_t at = (size_t)(m - text);
            if (at > f.off && frag_push(next, f.off, at - f.off, -1))
                return HEARTH_ENOMEM;
            if (frag_push(next, at, sn, id))
                return HEARTH_ENOMEM;
            f.len -= at + sn - f.off;
            f.off = at + sn;
        }
        if (f.len > 0 && frag_push(next, f.off, f.len, -1))
            return HEARTH_ENOMEM;
    }
    frag_list tmp = *cur;
    *cur = *next;
    *next = tmp;
    return HEARTH_OK;
}

static int partition(const hearth_tokenizer *t, const char *text, size_t n, bool parse_special, frag_list *out)
{
    frag_list spare = {0};
    int rc = HEARTH_OK;
    if (n == 0)
        return HEARTH_OK;
    if (frag_push(out, 0, n, -1))
        return HEARTH_ENOMEM;
    const hearth_vocab *v = t->vocab;
    for (int32_t k = 0; k < t->n_special; k++) {
        int32_t id = t->special[k];
        if (!parse_special && v->kind[id] != HEARTH_TOK_USER_DEFINED)
            continue;
        if (!memmem(text, n, v->text[id], v->len[id]))
            continue;
        if ((rc = split_on(v, text, id, out, &spare)))
            break;
    }
    free(spare.v);
    return rc;
}

int hearth_tokenizer_encode(const hearth_tokenizer *t, const char *text, size_t n, bool add_special,
                            bool parse_special, hearth_ids *out, hearth_err *err)
{
    size_t n0 = out->n;
    frag_list frags = {0};
    int rc = HEARTH_OK;
    if (!text && n > 0)
        return hearth_err_set(err, HEARTH_EINVAL, "tokenizer: NULL text of %zu bytes", n);
    if ((rc = partition(t, text, n, parse_special, &frags))) {
        rc = hearth_err_set(err, HEARTH_ENOMEM, "tokenizer: out of memory splitting special tokens");
        goto fail;
    }
    if (add_special && t->add_bos && (rc = hearth_ids_push(out, t->bos)))
        goto push_failed;
    bool prev_special = true; /* SPM: the text start counts as after a special token */
    for (size_t i = 0; i < frags.n; i++) {
        frag f = frags.v[i];
        if (f.id >= 0) {
            if ((rc = hearth_ids_push(out, f.id)))
                goto push_failed;
            prev_special = true;
            continue;
        }
        if (t->kind == HEARTH_TOKENIZER_SPM)
            rc = hearth_spm_encode(&t->spm, text + f.off, f.len, t->add_space_prefix && prev_special, out, err);
        else
            rc = hearth_bpe_encode(&t->bpe, text + f.off, f.len, out, err);
        if (rc)
            goto fail;
        prev_special = false;
    }
    if (add_special && t->add_eos && (rc = hearth_ids_push(out, t->eos)))
        goto push_failed;
    free(frags.v);
    return HEARTH_OK;
push_failed:
    if (rc == HEARTH_ELIMIT)
        hearth_err_set(err, rc, "tokenizer: more than %zu tokens", out->max);
    else
        hearth_err_set(err, rc, "tokenizer: out of memory for the token list");
fail:
    free(frags.v);
    out->n = n0;
    return rc;
}
