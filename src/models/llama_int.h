/* llama_int.h: private layout of a llama model, shared by
 * llama.c (open) and llama_forward.c (the forward pass). */
#ifndef HEARTH_MODELS_LLAMA_INT_H
#define HEARTH_MODELS_LLAMA_INT_H

#include "models/llama.h"
#include "engine/dev.h"

#include <stddef.h>
#include <stdint.h>

/* Tokens run through the layers at once; a longer batch is cut into chunks of
 * this many so the activation scratch stays bounded (a few MB per 100M
 * parameters) whatever the batch size. */
#define LLAMA_CHUNK 512

/* A weight matrix (n_out, n_in): the view into the mapping, and the weight
 * the device placed from it (engine/dev.h's weight_new; on the CPU, F16 goes
 * into the GEMM's f16 panels, the same bytes re-laid out once at open, and
 * the mapped copy is then released). */
typedef struct llama_mat {
    const void *data;
    hearth_dtype type;
    size_t row_bytes;
    int64_t n_in, n_out;
    hearth_weight *w;             /* owned (shared by out and embd when tied), or NULL before placement */
} llama_mat;

typedef struct llama_layer {
    float *attn_norm, *ffn_norm;  /* (n_embd) owned f32 copies */
    float *bq, *bk, *bv;          /* (n_head*hd), (n_head_kv*hd) x2: qwen2, else NULL */
    float *q_norm, *k_norm;       /* (head_dim): qwen3, else NULL */
    llama_mat wq;                 /* (n_head*hd, n_embd) */
    llama_mat wk, wv;             /* (n_head_kv*hd, n_embd) */
    llama_mat wo;                 /* (n_embd, n_head*hd) */
    llama_mat gate, up;           /* (n_ff, n_embd) */
    llama_mat down;               /* (n_embd, n_ff) */
} llama_layer;

struct hearth_llama {
    hearth_gguf g;
    hearth_llama_hparams hp;
    hearth_vocab vocab;
    hearth_tokenizer tok;
    bool tok_ready;
    llama_mat embd;          /* (n_vocab, n_embd) token_embd */
    llama_mat out;           /* (n_vocab, n_embd) output, or token_embd when tied */
    float *out_norm;         /* (n_embd) */
    double *inv_freq;        /* (n_rot/2) RoPE frequencies, freq scale and rope_freqs folded in */
    llama_layer *layers;     /* (n_layer) */
    hearth_dtype wtype;
    uint64_t wbytes;
    bool no_repack;          /* hearth_llama_open_opts */
    hearth_dev *dev;         /* the device the walk runs on (engine/dev.h) */
    uint64_t uid;            /* hearth_dev_uid: names this model in recorded passes */
};

#endif
