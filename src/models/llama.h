/* llama.h: llama-family decoders (llama, qwen2, qwen3) from GGUF, on the CPU.
 *
 * A model is opened from a GGUF file: hyperparameters from its metadata,
 * tensors used in place from the mapping (quantized blocks are never
 * expanded), its tokenizer from the tokenizer.ggml.* keys. The forward pass
 * takes a batch of tokens from one or more sequences (each in its own KV-cache
 * slot) and appends them to the cache: prompt processing is the same call
 * with many tokens of one slot (a matrix product, not one token a step);
 * a continuous-batching decode step is one token for each of several slots.
 * Weights are read once per call for the whole batch. */
#ifndef HEARTH_MODELS_LLAMA_H
#define HEARTH_MODELS_LLAMA_H

#include "base/err.h"
#include "base/pool.h"
#include "engine/dtype.h"
#include "engine/kv.h"
#include "models/gguf.h"
#include "text/tokenizer.h"
#include "text/vocab.h"

#include <stdbool.h>
#include <stdint.h>

enum hearth_rope_type {
    HEARTH_ROPE_NORM = 0, /* rotate adjacent pairs (2i, 2i+1): llama */
    HEARTH_ROPE_NEOX = 2, /* rotate (i, i + n_rot/2): qwen2, qwen3 */
};

typedef struct hearth_llama_hparams {
    char arch[16];         /* "llama", "qwen2", "qwen3" */
    int64_t n_vocab;
    int64_t n_embd;        /* hidden size */
    int64_t n_layer;
    int64_t n_head;
    int64_t n_head_kv;     /* GQA: n_head % n_head_kv == 0 */
    int64_t head_dim;      /* attention.key_length, else n_embd / n_head */
    int64_t n_ff;
    int64_t n_ctx_train;   /* context_length */
    int64_t n_rot;         /* rope.dimension_count, else head_dim */
    float rms_eps;
    float rope_theta;      /* rope.freq_base, default 10000 */
    float rope_freq_scale; /* 1 / rope.scaling.factor for linear scaling, else 1 */
    enum hearth_rope_type rope_type;
    bool qkv_bias;         /* qwen2 */
    bool qk_norm;          /* qwen3: RMSNorm over head_dim on q and k, per head, before RoPE */
    bool tied_output;      /* no output.weight: the token embedding is the output projection */
} hearth_llama_hparams;

typedef struct hearth_llama hearth_llama;

/* Opens and validates (every expected tensor present with the right shape and
 * a supported type; errors name the file and the tensor). */
int hearth_llama_open(hearth_llama **out, const char *path, hearth_err *err);

typedef struct hearth_llama_open_opts {
    /* Use F16 weights in place from the mapping instead of repacking them
     * into the GEMM's f16 panels at open. Repacked (the default) prompts run
     * ~15% faster, at the same memory, but the memory is the process's own:
     * worker processes no longer share one page-cache copy. */
    bool no_repack;
    /* The device the model's weights and walk live on (engine/dev.h's
     * hearth_dev_find); NULL: the CPU. */
    struct hearth_dev *dev;
} hearth_llama_open_opts;
/* The same with options (NULL: the defaults). */
int hearth_llama_open_with(hearth_llama **out, const char *path, const hearth_llama_open_opts *opts, hearth_err *err);
void hearth_llama_close(hearth_llama *m); /* NULL is a no-op */

const hearth_llama_hparams *hearth_llama_hparams_get(const hearth_llama *m);
const hearth_gguf *hearth_llama_gguf(const hearth_llama *m);          /* metadata, e.g. the chat template */
const hearth_vocab *hearth_llama_vocab(const hearth_llama *m);
const hearth_tokenizer *hearth_llama_tokenizer(const hearth_llama *m);
/* The most common weight type among the matrices (for reports): HEARTH_Q8_0, ... */
hearth_dtype hearth_llama_weight_type(const hearth_llama *m);
/* Bytes of weights read by one forward pass (for GB/s reports). */
uint64_t hearth_llama_weight_bytes(const hearth_llama *m);

/* ---- KV cache (engine/kv.h) for this model's shape, on its device ---- */

/* A cache of f32 elements (exact: what the parity tests use). */
hearth_kv *hearth_kv_new(const hearth_llama *m, int n_slots, int64_t n_ctx, hearth_err *err);
/* A cache of HEARTH_F32 or HEARTH_F16 elements (see hearth_kv_create). */
hearth_kv *hearth_kv_new_typed(const hearth_llama *m, int n_slots, int64_t n_ctx, hearth_dtype type,
                               hearth_err *err);

/* ---- forward ---- */

typedef struct hearth_llama_batch {
    int32_t n;                  /* tokens in the batch */
    const int32_t *tokens;      /* [n] */
    const int32_t *slot;        /* [n] KV slot of each token */
    const bool *want_logits;    /* [n] or NULL: logits for the last token only */
    int32_t *argmax;            /* or NULL; else each wanted row's greedy draw (sampler.h's
                                   hearth_logits_argmax) in place of its logits, in batch order: on a
                                   device with its own memory 4 bytes a row leave it, not 4 n_vocab */
    int32_t steps;              /* 0 or 1: one pass. 2 .. HEARTH_LLAMA_STEPS_MAX: that many greedy passes
                                   of a decode batch (argmax set, every row drawn: want_logits NULL or
                                   all set, each slot once, at most 512 rows), pass j > 0 feeding each
                                   row the draw of pass j - 1 on the device; argmax then gets steps x n
                                   ids, pass by pass, and each slot grows by steps positions (the caller
                                   truncates what it does not keep: a sequence that ended in the run) */
} hearth_llama_batch;

/* The most passes one hearth_llama_batch runs (its steps). */
#define HEARTH_LLAMA_STEPS_MAX 16

/* Whether greedy draws pay on the model's device (hearth_llama_batch's
 * argmax): it has its own memory, so the draws save the logits' download,
 * and argmax_rows. Every device that has argmax_rows makes them (the CPU
 * too: a run of steps is tested there); this says where a caller should
 * ask. */
bool hearth_llama_argmax_on_device(const hearth_llama *m);

/* Runs the tokens through the model. Each token's position is its slot's
 * current length; tokens of one slot must appear in order; the slot's length
 * grows by its token count. Writes, for each token with want_logits, a row of
 * n_vocab logits to logits (rows in batch order). Fails without touching the
 * cache when a slot would pass n_ctx (HEARTH_ELIMIT, message with both
 * numbers) or a token id is out of range. With b->argmax, logits may be
 * NULL and the draws are written there instead. Runs on the model's device
 * (engine/dev.h), on a stream over pool (NULL: the caller alone) whose
 * activations are the calling thread's arena, so one model may run forwards
 * on several threads at once; one cache may not. */
int hearth_llama_forward(hearth_llama *m, hearth_kv *kv, hearth_pool *pool, const hearth_llama_batch *b, float *logits,
                         hearth_err *err);

#endif
