/* llama_demo.h: deterministic random-weight llama-family GGUF files, for
 * tests (parity with the PyTorch reference) and benchmarks (a ~110M shape).
 *
 * Weights are drawn from splitmix64 (see llama_demo.c) seeded with seed, in
 * a fixed order, so the same description gives the same file bytes. The
 * tokenizer is copied from another GGUF (every "tokenizer.*" key), and the
 * model's vocabulary size is that tokenizer's token count. */
#ifndef HEARTH_MODELS_LLAMA_DEMO_H
#define HEARTH_MODELS_LLAMA_DEMO_H

#include "base/err.h"
#include "engine/dtype.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct hearth_llama_demo {
    const char *arch;       /* "llama", "qwen2" (q/k/v biases), "qwen3" (QK-norm) */
    hearth_dtype wtype;     /* type of every matrix, token_embd and output included;
                               norms and biases are always f32 */
    bool tied;              /* no output.weight: token_embd is the output projection */
    int64_t n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff, n_ctx;
    uint64_t seed;
    const char *vocab_path; /* GGUF whose tokenizer.* keys are copied (borrowed) */
} hearth_llama_demo;

/* A tiny shape whose dims are multiples of 256 (so every quantized type
 * fits): 2 layers, 256 hidden, 4 heads of 64 (2 kv heads), FFN 512;
 * qwen3 gets 8 heads of 64 (q dim 512 != hidden, as key_length allows).
 * wtype F32, untied, seed 1; vocab_path is left NULL for the caller. */
void hearth_llama_demo_tiny(hearth_llama_demo *d, const char *arch);
/* The ~110M bench shape: 12 layers, 768 hidden, 12 heads of 64 (no GQA),
 * FFN 2048; with ggml-vocab-phi-3.gguf the vocabulary is 32064 tokens. */
void hearth_llama_demo_bench(hearth_llama_demo *d, const char *arch);

/* Writes the model to path. HEARTH_EINVAL: an unknown arch, a dim that the
 * weight type's block does not divide, inconsistent heads; HEARTH_EIO /
 * HEARTH_EINVAL from reading the vocab file or writing path; HEARTH_ENOMEM.
 * err names the file. */
int hearth_llama_demo_write(const hearth_llama_demo *d, const char *path, hearth_err *err);

#endif
