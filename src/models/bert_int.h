/* bert_int.h: the inside of a hearth_bert, shared by its loaders
 * (bert_hf.c, bert_gguf.c), the helpers they build with (bert_build.c), its
 * weight conversion (bert_weights.c), its forward pass (bert_forward.c) and
 * its public face (bert.c).
 *
 * Who calls whom: bert.c -> bert_hf.c, bert_gguf.c, bert_weights.c ->
 * bert_build.c; nothing below calls back up into bert.c.
 *
 * Pooling is kept here as an int holding enum hearth_pooling's values
 * (hf_folder.h: mean 0, cls 1, last 2). */
#ifndef HEARTH_MODELS_BERT_INT_H
#define HEARTH_MODELS_BERT_INT_H

#include "base/err.h"
#include "engine/dev.h"
#include "engine/dtype.h"
#include "models/hf_folder.h" /* hearth_hf_prompt */
#include "text/vocab.h"
#include "text/wordpiece.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct hearth_bert hearth_bert; /* the same typedef as bert.h's */

/* Hard bounds on what a file may ask for; real encoders are far below. */
#define BERT_MAX_LAYERS 256
#define BERT_MAX_HIDDEN 16384
#define BERT_MAX_FF ((int64_t)1 << 18)
#define BERT_MAX_POSITIONS ((int64_t)1 << 16)

/* A weight matrix (rows, cols) of type, each row row_bytes long, as stored:
 * data points into a mapping or into m->owned; w is it placed on the
 * model's device (bert_place_weights; on the CPU, f32 weights also get GEMM
 * panels). */
typedef struct bert_mat {
    hearth_dtype type;
    const void *data;
    size_t row_bytes;
    int64_t rows, cols;
    hearth_weight *w;           /* owned, or NULL before placement */
} bert_mat;

typedef struct bert_layer {
    bert_mat q, k, v;          /* (hidden, hidden) each */
    bert_mat o;                /* (hidden, hidden) */
    bert_mat up;               /* (ff, hidden) */
    bert_mat down;             /* (hidden, ff) */
    const float *bq, *bk, *bv, *bo;         /* (hidden) */
    const float *b_up;                      /* (ff) */
    const float *b_down;                    /* (hidden) */
    const float *ln1_w, *ln1_b;             /* attention output LayerNorm, (hidden) */
    const float *ln2_w, *ln2_b;             /* layer output LayerNorm, (hidden) */
} bert_layer;

/* A block the model owns (converted weights, f32 copies of small vectors). */
typedef struct bert_owned {
    void **p;
    size_t n, cap;
} bert_owned;

struct hearth_bert {
    int64_t n_vocab, hidden, n_layer, n_head, n_ff, n_pos, n_types;
    float eps;
    int pooling;             /* enum hearth_pooling's value */
    bool normalize;
    int64_t max_tokens;      /* [CLS] and [SEP] included; <= n_pos */

    bert_mat tok_embd;       /* (n_vocab, hidden): rows read one at a time, any type */
    const float *pos_embd;   /* (n_pos, hidden) */
    const float *type0;      /* (hidden): token type 0's row; a single segment is all type 0 */
    const float *type1;      /* (hidden): type 1's row (a pair's second segment); type0 when n_types is 1 */
    /* The classification head of a cross-encoder (rank), or none: pooler
     * (hidden -> hidden, tanh) on the [CLS] row, then classifier (hidden ->
     * 1). Held as f32 copies: it runs on the host once per sequence. */
    bool rank;
    const float *pool_w;     /* (hidden, hidden) pooler / GGUF cls.weight */
    const float *pool_b;     /* (hidden) */
    const float *cls_w;      /* (hidden): classifier / cls.output, label 0's row (the only one) */
    float cls_b;
    char no_rank[192];       /* why the model cannot rerank, for messages ("" when it can) */
    float *pos_type;         /* (2 n_pos, hidden): pos + type0 rows, then pos + type1 rows; rank only */
    float *zero_row;         /* (hidden) zeros: the type row the embed op adds when pos_type has it */
    const float *emb_ln_w, *emb_ln_b; /* (hidden) */
    bert_layer *layers;      /* n_layer */

    const hearth_hf_prompt *prompts; /* n_prompts, owned by the source below (a folder's) */
    int n_prompts;
    const hearth_hf_prompt *default_prompt; /* or NULL */
    const hearth_vocab *vocab; /* owned by the source below */
    hearth_wordpiece wp;
    int32_t cls, sep;

    void *src;               /* the open folder or GGUF file the views point into */
    void (*src_close)(void *src);
    bert_owned owned;
    hearth_dev *dev;         /* the device the walk runs on (engine/dev.h) */
    char path[256];          /* for messages (cut when longer) */
};

/* The loaders' helpers (bert_build.c). */

/* Keeps p (malloc'd) until the model closes; frees it and fails on ENOMEM. */
int bert_own(hearth_bert *m, void *p, hearth_err *err);
/* malloc(n) owned by m; NULL (err set) on failure. */
void *bert_alloc(hearth_bert *m, size_t n, hearth_err *err);
/* An f32 copy of n elements of src (type F32/F16/BF16 or a quantized type,
 * any alignment), owned by m; NULL (err set) on failure. */
const float *bert_f32_copy(hearth_bert *m, hearth_dtype type, const void *src, int64_t n, const char *name,
                           hearth_err *err);
/* Points out at a (rows, cols) weight of type at data; when data is not
 * aligned to its element size, points it at an owned aligned copy instead. */
int bert_mat_set(hearth_bert *m, bert_mat *out, hearth_dtype type, const void *data, int64_t rows, int64_t cols,
                 const char *name, hearth_err *err);
/* Checks the loaded shape and sets up the tokenizer; called by each loader
 * once every field is set. */
int bert_finish(hearth_bert *m, const hearth_wordpiece_opts *wp_opts, hearth_err *err);
/* With m->rank set and the head's vectors loaded: builds pos_type and
 * zero_row (bert_finish calls it). */
int bert_rank_tables(hearth_bert *m, hearth_err *err);

/* The loaders: fill m (already zeroed, path set) from a folder or a GGUF file. */
int bert_load_hf(hearth_bert *m, const char *dir, hearth_err *err);
int bert_load_gguf(hearth_bert *m, const char *path, hearth_err *err);

/* Asks m->dev whether it can run m (head size, the weights' and the token
 * table's types: refused naming the tensor and the limit), then places
 * every linear weight (HEARTH_WEIGHT_FAST: on the CPU, f32 weights packed
 * once into the GEMM's panels) and the token table (read by rows) on it;
 * the model owns them and bert_free_weights frees them (bert_weights.c). */
int bert_place_weights(hearth_bert *m, hearth_err *err);
void bert_free_weights(hearth_bert *m);

/* Converts every linear weight of m to bf16 (HEARTH_BF16) or Q8_0 in memory
 * m owns (bert_weights.c). HEARTH_EUNSUPPORTED when the type cannot be made. */
int bert_convert_weights(hearth_bert *m, hearth_dtype to, hearth_err *err);

#endif
