/* decoder.c: the decoder facade (decoder.h): opens a generation model by the
 * architecture its GGUF names, and assembles what serving it takes: the
 * weights and tokenizer, the KV cache, and the hearth_gen_batch_model table
 * the engine's scheduler drives (an adapter, so engine/ never depends on
 * models/). Close takes them apart in reverse: the cache, then the weights.
 *
 * Every architecture hearth generates with today is llama-family, so there is
 * one case, hearth_llama, whose open reads general.architecture and refuses
 * what it does not know. A new family (its own open, forward and state) adds
 * its names to ARCHS with a kind, a member here, and a case in open, close
 * and the adapter, with no edit above models/. Rejected: a vtable per
 * architecture before there is a second implementation to shape it; and
 * keeping the assembly in api/gen_models.c, which made each new
 * architecture an edit of the API layer and left it the only one knowing
 * the teardown order.
 *
 * Slot files (hearth_decoder_slot_save/restore): a 72-byte little-endian
 * header written field by field ("HRTHSLOT", version, cache type, arch,
 * n_layer, kv_dim, n_vocab, n_tokens), the ids as int32, then the slot's
 * rows as kv.h's hearth_kv_slot_read lays them out. The header names the
 * shape, not the weights: a file from another model of the same shape
 * restores and merely gives that model's continuation (llama.cpp's state
 * files check no more). */
#include "decoder.h"

#include "base/file.h"
#include "models/gguf.h"
#include "models/llama.h"
#include "text/tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* general.architecture names, all hearth_llama's (models/llama.h) */
static const char *const ARCHS[] = {
    "llama",
    "qwen2", /* q/k/v biases */
    "qwen3", /* QK-norm */
};

struct hearth_decoder {
    hearth_llama *llama;
    hearth_kv *kv;
    hearth_pool *pool;            /* borrowed */
    int64_t n_ctx;                /* per slot */
    hearth_gen_batch_model table; /* ctx: this decoder */
};

bool hearth_decoder_supports(const char *arch)
{
    for (size_t i = 0; i < sizeof ARCHS / sizeof ARCHS[0]; i++)
        if (!strcmp(arch, ARCHS[i]))
            return true;
    return false;
}

const char *hearth_decoder_archs(void) { return "llama, qwen2, qwen3"; }

/* ---- the adapter: hearth_gen_batch_model over hearth_llama ---- */

static int adapt_forward(void *ctx, int32_t n, const int32_t *tokens, const int32_t *slots, const bool *want, float *logits,
                         hearth_err *err)
{
    hearth_decoder *d = ctx;
    hearth_llama_batch b = {.n = n, .tokens = tokens, .slot = slots, .want_logits = want};
    return hearth_llama_forward(d->llama, d->kv, d->pool, &b, logits, err);
}

static int adapt_forward_argmax(void *ctx, int32_t n, const int32_t *tokens, const int32_t *slots, const bool *want,
                                int32_t *ids, hearth_err *err)
{
    hearth_decoder *d = ctx;
    hearth_llama_batch b = {.n = n, .tokens = tokens, .slot = slots, .want_logits = want, .argmax = ids};
    return hearth_llama_forward(d->llama, d->kv, d->pool, &b, NULL, err);
}

static int adapt_forward_steps(void *ctx, int32_t n, const int32_t *tokens, const int32_t *slots, int steps,
                               int32_t *ids, hearth_err *err)
{
    hearth_decoder *d = ctx;
    hearth_llama_batch b = {.n = n, .tokens = tokens, .slot = slots, .argmax = ids, .steps = steps};
    return hearth_llama_forward(d->llama, d->kv, d->pool, &b, NULL, err);
}

static int64_t adapt_truncate(void *ctx, int slot, int64_t n)
{
    hearth_decoder *d = ctx;
    return hearth_kv_truncate(d->kv, slot, n);
}

/* Generated text always continues a prompt (at least BOS), so SentencePiece's
 * leading space is kept: " park." after "...went to the", as llama-server
 * sends each piece (llama_token_to_piece without lstrip). Stripping it, as a
 * decode from the start of a text does, glued the first word to the prompt. */
static void adapt_detok_init(void *ctx, void *state)
{
    hearth_decoder *d = ctx;
    hearth_detok_init(state, hearth_decoder_tokenizer(d), false, false);
}

static int adapt_detok_push(void *ctx, void *state, int32_t id, hearth_buf *out) { return hearth_detok_push(state, id, out); }
static int adapt_detok_flush(void *ctx, void *state, hearth_buf *out) { return hearth_detok_flush(state, out); }

/* The table, once the model and its cache exist. End ids: eos and eot, each once. */
static void fill_table(hearth_decoder *d, int n_slots)
{
    const hearth_vocab *v = hearth_decoder_vocab(d);
    hearth_gen_batch_model *bm = &d->table;
    *bm = (hearth_gen_batch_model){
        .ctx = d,
        .n_vocab = (int32_t)hearth_llama_hparams_get(d->llama)->n_vocab,
        .n_slots = n_slots,
        .n_ctx = d->n_ctx,
        .forward = adapt_forward,
        .forward_argmax = hearth_llama_argmax_on_device(d->llama) ? adapt_forward_argmax : NULL,
        .forward_steps = hearth_llama_argmax_on_device(d->llama) ? adapt_forward_steps : NULL,
        .steps_max = HEARTH_LLAMA_STEPS_MAX,
        .records = d->kv->dev && d->kv->dev->ops->graph_begin, /* a GPU's graphs */
        .truncate = adapt_truncate,
        .detok_size = sizeof(hearth_detok),
        .detok_init = adapt_detok_init,
        .detok_push = adapt_detok_push,
        .detok_flush = adapt_detok_flush,
    };
    int32_t ends[3] = {v->eos, v->eot, -1};
    for (int i = 0; i < 3; i++) {
        bool dup = false;
        for (int k = 0; k < bm->n_end_ids; k++)
            dup |= bm->end_ids[k] == ends[i];
        if (ends[i] >= 0 && !dup)
            bm->end_ids[bm->n_end_ids++] = ends[i];
    }
}

int hearth_decoder_open(hearth_decoder **out, const char *path, const hearth_decoder_opts *opts, hearth_err *err)
{
    *out = NULL;
    hearth_decoder *d = calloc(1, sizeof *d);
    if (!d)
        return hearth_err_set(err, HEARTH_ENOMEM, "out of memory");
    d->pool = opts->pool;
    const hearth_llama_open_opts lo = {.no_repack = opts->no_repack, .dev = opts->dev};
    int rc = hearth_llama_open_with(&d->llama, path, &lo, err);
    if (rc)
        goto fail;
    const hearth_llama_hparams *hp = hearth_llama_hparams_get(d->llama);
    d->n_ctx = opts->n_ctx > 0                                ? opts->n_ctx
               : hp->n_ctx_train < HEARTH_DECODER_DEFAULT_CTX ? hp->n_ctx_train
                                                              : HEARTH_DECODER_DEFAULT_CTX;
    d->kv = hearth_kv_new_typed(d->llama, opts->n_slots, d->n_ctx, opts->kv_type, err);
    if (!d->kv) {
        rc = err ? err->code : HEARTH_ENOMEM;
        goto fail;
    }
    fill_table(d, opts->n_slots);
    *out = d;
    return HEARTH_OK;
fail:
    hearth_decoder_close(d);
    return rc;
}

void hearth_decoder_close(hearth_decoder *d)
{
    if (!d)
        return;
    hearth_kv_free(d->kv); /* the cache was sized from the model: it goes first */
    hearth_llama_close(d->llama);
    free(d);
}

const char *hearth_decoder_arch(const hearth_decoder *d) { return hearth_llama_hparams_get(d->llama)->arch; }
const hearth_tokenizer *hearth_decoder_tokenizer(const hearth_decoder *d) { return hearth_llama_tokenizer(d->llama); }
const hearth_vocab *hearth_decoder_vocab(const hearth_decoder *d) { return hearth_llama_vocab(d->llama); }

int hearth_decoder_chat_template(const hearth_decoder *d, const char **src, size_t *len)
{
    if (hearth_gguf_get_str(hearth_llama_gguf(d->llama), "tokenizer.chat_template", src, len, NULL) != 0)
        return HEARTH_ENOTFOUND;
    return HEARTH_OK;
}

int64_t hearth_decoder_n_ctx(const hearth_decoder *d) { return d->n_ctx; }
hearth_dev *hearth_decoder_device(const hearth_decoder *d) { return d->kv->dev; }
int64_t hearth_decoder_n_ctx_train(const hearth_decoder *d) { return hearth_llama_hparams_get(d->llama)->n_ctx_train; }
hearth_dtype hearth_decoder_weight_type(const hearth_decoder *d) { return hearth_llama_weight_type(d->llama); }
hearth_dtype hearth_decoder_cache_type(const hearth_decoder *d) { return hearth_kv_type(d->kv); }
uint64_t hearth_decoder_cache_bytes(const hearth_decoder *d) { return hearth_kv_bytes(d->kv); }
int hearth_decoder_cache_type_from_name(const char *name) { return hearth_kv_type_from_name(name); }
const hearth_gen_batch_model *hearth_decoder_batch_model(const hearth_decoder *d) { return &d->table; }

/* ---- slot files ---- */

#define SLOT_MAGIC "HRTHSLOT"
#define SLOT_VERSION 1u
#define SLOT_HEADER 72

typedef struct slot_header {
    uint32_t version, type;
    char arch[16];
    uint64_t n_layer, kv_dim, n_vocab, n_tokens;
} slot_header;

static void put_le(uint8_t *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static slot_header slot_header_of(const hearth_decoder *d, int64_t n)
{
    slot_header h = {.version = SLOT_VERSION, .type = (uint32_t)hearth_kv_type(d->kv)};
    snprintf(h.arch, sizeof h.arch, "%s", hearth_decoder_arch(d));
    h.n_layer = (uint64_t)d->kv->n_layer;
    h.kv_dim = (uint64_t)d->kv->kv_dim;
    h.n_vocab = (uint64_t)hearth_decoder_vocab(d)->n_tokens;
    h.n_tokens = (uint64_t)n;
    return h;
}

static void slot_header_put(uint8_t *p, const slot_header *h)
{
    memcpy(p, SLOT_MAGIC, 8);
    put_le(p + 8, h->version, 4);
    put_le(p + 12, h->type, 4);
    memcpy(p + 16, h->arch, 16);
    put_le(p + 32, h->n_layer, 8);
    put_le(p + 40, h->kv_dim, 8);
    put_le(p + 48, h->n_vocab, 8);
    put_le(p + 56, h->n_tokens, 8);
    put_le(p + 64, 0, 8); /* reserved */
}

int hearth_decoder_slot_save(hearth_decoder *d, int slot, const int32_t *tokens, int64_t n, const char *path,
                             size_t *bytes, hearth_err *err)
{
    size_t rows = hearth_kv_slot_bytes(d->kv, n);
    uint8_t head[SLOT_HEADER];
    slot_header h = slot_header_of(d, n);
    slot_header_put(head, &h);
    uint8_t *ids = malloc((size_t)n * 4 + 1);
    void *kv = malloc(rows + 1);
    int rc = ids && kv ? HEARTH_OK : hearth_err_set(err, HEARTH_ENOMEM, "slot %d: out of memory for %zu bytes", slot, rows);
    for (int64_t i = 0; i < n && !rc; i++)
        put_le(ids + 4 * i, (uint32_t)tokens[i], 4);
    if (!rc)
        rc = hearth_kv_slot_read(d->kv, slot, n, kv, err);
    if (!rc) {
        const void *parts[3] = {head, ids, kv};
        size_t lens[3] = {SLOT_HEADER, (size_t)n * 4, rows};
        rc = hearth_file_write_atomic(path, parts, lens, 3, err);
    }
    if (!rc && bytes)
        *bytes = SLOT_HEADER + (size_t)n * 4 + rows;
    free(ids);
    free(kv);
    return rc;
}

int hearth_decoder_slot_restore(hearth_decoder *d, int slot, const char *path, int32_t *tokens, int64_t cap, int64_t *n,
                                size_t *bytes, hearth_err *err)
{
    *n = 0;
    hearth_kv_truncate(d->kv, slot, 0);
    int64_t most = cap < d->n_ctx ? cap : d->n_ctx;
    size_t max = SLOT_HEADER + (size_t)most * 4 + hearth_kv_slot_bytes(d->kv, most);
    char *data = NULL;
    size_t len = 0;
    int rc = hearth_file_read(path, max, &data, &len, err);
    if (rc == HEARTH_ELIMIT)
        rc = hearth_err_set(err, HEARTH_EINVAL, "%s: larger than any slot file of this model (%zu bytes)", path, max);
    if (rc)
        return rc;
    const uint8_t *p = (const uint8_t *)data;
    slot_header want = slot_header_of(d, 0);
    slot_header got = {0};
    if (len >= SLOT_HEADER) {
        got.version = (uint32_t)get_le(p + 8, 4);
        got.type = (uint32_t)get_le(p + 12, 4);
        memcpy(got.arch, p + 16, 16);
        got.arch[15] = 0;
        got.n_layer = get_le(p + 32, 8);
        got.kv_dim = get_le(p + 40, 8);
        got.n_vocab = get_le(p + 48, 8);
        got.n_tokens = get_le(p + 56, 8);
    }
    const hearth_dtype_info *gt = hearth_dtype_get(got.type), *wt = hearth_dtype_get(want.type);
    if (len < SLOT_HEADER || memcmp(p, SLOT_MAGIC, 8) != 0)
        rc = hearth_err_set(err, HEARTH_EINVAL, "%s: not a hearth slot file", path);
    else if (got.version != SLOT_VERSION)
        rc = hearth_err_set(err, HEARTH_EINVAL, "%s: slot file version %u; this hearth reads version %u", path,
                            (unsigned)got.version, SLOT_VERSION);
    else if (strcmp(got.arch, want.arch) != 0 || got.n_layer != want.n_layer || got.kv_dim != want.kv_dim ||
             got.n_vocab != want.n_vocab)
        rc = hearth_err_set(err, HEARTH_EINVAL,
                            "%s: saved from another model: %s, %llu layers, K/V width %llu, %llu tokens in the vocabulary; "
                            "this one is %s, %llu, %llu, %llu",
                            path, got.arch, (unsigned long long)got.n_layer, (unsigned long long)got.kv_dim,
                            (unsigned long long)got.n_vocab, want.arch, (unsigned long long)want.n_layer,
                            (unsigned long long)want.kv_dim, (unsigned long long)want.n_vocab);
    else if (got.type != want.type)
        rc = hearth_err_set(err, HEARTH_EINVAL, "%s: saved from a %s cache; this server's is %s (--cache-type)", path,
                            gt && gt->name ? gt->name : "unknown", wt && wt->name ? wt->name : "unknown");
    else if (got.n_tokens > (uint64_t)most)
        rc = hearth_err_set(err, HEARTH_EINVAL, "%s: %llu positions; a slot of this server holds %lld", path,
                            (unsigned long long)got.n_tokens, (long long)most);
    else if (len != SLOT_HEADER + got.n_tokens * 4 + hearth_kv_slot_bytes(d->kv, (int64_t)got.n_tokens))
        rc = hearth_err_set(err, HEARTH_EINVAL, "%s: %zu bytes; %llu positions take %zu", path, len,
                            (unsigned long long)got.n_tokens,
                            SLOT_HEADER + (size_t)got.n_tokens * 4 + hearth_kv_slot_bytes(d->kv, (int64_t)got.n_tokens));
    int64_t k = (int64_t)got.n_tokens;
    for (int64_t i = 0; i < k && !rc; i++) {
        uint32_t id = (uint32_t)get_le(p + SLOT_HEADER + 4 * i, 4);
        if (id >= got.n_vocab)
            rc = hearth_err_set(err, HEARTH_EINVAL, "%s: token %lld is %u, not an id of the vocabulary", path, (long long)i,
                                (unsigned)id);
        else
            tokens[i] = (int32_t)id;
    }
    if (!rc)
        rc = hearth_kv_slot_write(d->kv, slot, k, p + SLOT_HEADER + 4 * (size_t)k, err);
    if (!rc) {
        *n = k;
        if (bytes)
            *bytes = len;
    }
    free(data);
    return rc;
}
