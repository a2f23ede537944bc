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
 * the teardown order. */
#include "decoder.h"

#include "models/gguf.h"
#include "models/llama.h"
#include "text/tokenizer.h"

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
