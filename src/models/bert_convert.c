/* bert_convert.c: a sentence-transformers BERT folder to a `bert` GGUF.
 *
 * How: the folder is opened with the same loader the server uses (so a
 * folder hearth would refuse to serve is refused here too, with the same
 * message); each tensor is read as f32 (hearth_st_read_f32 takes any stored
 * float type and alignment), narrowed to f16 where asked, and handed to the
 * GGUF writer under llama.cpp's name. The buffers live until the file is
 * written, since the writer borrows them. The vocab is respelled the way
 * llama.cpp's converter does (see bert_convert.h).
 *
 * Rejected: streaming tensor by tensor (the GGUF writer lays out every
 * tensor before writing; converting is a one-off tool path where holding a
 * small encoder in memory is fine). */
#include "models/bert_convert.h"

#include "engine/quant.h"
#include "models/gguf.h"
#include "models/gguf_write.h"
#include "models/hf_folder.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NAME_CAP 128
#define MAX_BUFS 16384 /* two per tensor: room for 500 layers */

typedef struct conv {
    hearth_hf_folder f;
    hearth_gguf_writer *w;
    hearth_dtype type;
    void *bufs[MAX_BUFS];
    size_t n_bufs;
    char **tokens;
    int64_t n_tokens;
    const hearth_st_tensor *classifier; /* a one-label classifier.weight: the folder is a reranker */
} conv;

static void *keep(conv *c, size_t n)
{
    if (c->n_bufs == MAX_BUFS)
        return NULL;
    void *p = malloc(n ? n : 1);
    if (p)
        c->bufs[c->n_bufs++] = p;
    return p;
}

/* hf tensor (prefix added by the folder) -> gguf tensor; shape[0] outermost,
 * as safetensors writes it; matrices in c->type when narrow is set. */
static int add(conv *c, const char *hf_name, const char *gguf_name, int n_dims, int64_t d0, int64_t d1, bool narrow,
               hearth_err *err)
{
    const hearth_st_tensor *t;
    int64_t shape[2] = {d0, d1};
    int rc;
    /* the classifier sits outside the encoder's "bert." prefix */
    if (!strncmp(hf_name, "classifier.", 11)) {
        t = hearth_st_find(&c->f.st, hf_name);
        if (!t || t->n_elements != (n_dims == 1 ? d0 : d0 * d1) || !t->supported)
            return hearth_err_set(err, HEARTH_EINVAL, "convert: %s: tensor '%s' is missing or not %lld elements of a float type",
                                  c->f.dir, hf_name, (long long)(n_dims == 1 ? d0 : d0 * d1));
    } else if ((rc = hearth_hf_folder_tensor(&c->f, hf_name, n_dims, shape, &t, err))) {
        return rc;
    }
    int64_t n = t->n_elements;
    float *f32 = keep(c, (size_t)n * sizeof(float));
    if (!f32)
        return hearth_err_set(err, HEARTH_ENOMEM, "convert: out of memory at tensor '%s'", hf_name);
    if ((rc = hearth_st_read_f32(t, 0, n, f32)))
        return hearth_err_set(err, rc, "convert: %s: tensor '%s': cannot read as f32", c->f.dir, t->name);
    hearth_dtype type = narrow ? c->type : HEARTH_F32;
    const void *data = f32;
    size_t nbytes = (size_t)n * sizeof(float);
    if (type == HEARTH_F16) {
        uint16_t *h = keep(c, (size_t)n * sizeof *h);
        if (!h)
            return hearth_err_set(err, HEARTH_ENOMEM, "convert: out of memory at tensor '%s'", hf_name);
        hearth_quant_quantize_row(HEARTH_F16, f32, h, n);
        data = h;
        nbytes = (size_t)n * sizeof *h;
    }
    /* GGUF dims run innermost first */
    int64_t ne[2] = {n_dims == 1 ? d0 : d1, d0};
    if (hearth_gguf_writer_add_tensor(c->w, gguf_name, type, n_dims, ne, data, nbytes))
        return hearth_err_set(err, HEARTH_EINVAL, "convert: tensor '%s' could not be added", gguf_name);
    return HEARTH_OK;
}

/* The HF LayerNorm weight/bias or the TF gamma/beta spelling. */
static int add_norm(conv *c, const char *hf_base, const char *gguf_base, hearth_err *err)
{
    char hf[NAME_CAP], full[NAME_CAP + 16], gg[NAME_CAP];
    snprintf(full, sizeof full, "%s%s.gamma", c->f.prefix, hf_base);
    bool tf = hearth_st_find(&c->f.st, full) != NULL;
    int64_t h = c->f.config.hidden_size;
    snprintf(hf, sizeof hf, "%s.%s", hf_base, tf ? "gamma" : "weight");
    snprintf(gg, sizeof gg, "%s.weight", gguf_base);
    int rc = add(c, hf, gg, 1, h, 0, false, err);
    if (rc)
        return rc;
    snprintf(hf, sizeof hf, "%s.%s", hf_base, tf ? "beta" : "bias");
    snprintf(gg, sizeof gg, "%s.bias", gguf_base);
    return add(c, hf, gg, 1, h, 0, false, err);
}

static int add_linear(conv *c, const char *hf_base, const char *gguf_base, int64_t rows, int64_t cols, hearth_err *err)
{
    char hf[NAME_CAP], gg[NAME_CAP];
    snprintf(hf, sizeof hf, "%s.weight", hf_base);
    snprintf(gg, sizeof gg, "%s.weight", gguf_base);
    int rc = add(c, hf, gg, 2, rows, cols, true, err);
    if (rc)
        return rc;
    snprintf(hf, sizeof hf, "%s.bias", hf_base);
    snprintf(gg, sizeof gg, "%s.bias", gguf_base);
    return add(c, hf, gg, 1, rows, 0, false, err);
}

static int add_tensors(conv *c, hearth_err *err)
{
    const hearth_bert_config *k = &c->f.config;
    int64_t h = k->hidden_size, ff = k->intermediate_size;
    int rc;
    if ((rc = add(c, "embeddings.word_embeddings.weight", "token_embd.weight", 2, k->vocab_size, h, true, err)) ||
        (rc = add(c, "embeddings.position_embeddings.weight", "position_embd.weight", 2, k->max_position_embeddings, h,
                  false, err)) ||
        (rc = add(c, "embeddings.token_type_embeddings.weight", "token_types.weight", 2, k->type_vocab_size, h, false,
                  err)) ||
        (rc = add_norm(c, "embeddings.LayerNorm", "token_embd_norm", err)))
        return rc;
    for (int64_t i = 0; i < k->num_hidden_layers; i++) {
        char hf[NAME_CAP], gg[NAME_CAP];
#define HF(sub) (snprintf(hf, sizeof hf, "encoder.layer.%lld.%s", (long long)i, sub), hf)
#define GG(sub) (snprintf(gg, sizeof gg, "blk.%lld.%s", (long long)i, sub), gg)
        if ((rc = add_linear(c, HF("attention.self.query"), GG("attn_q"), h, h, err)) ||
            (rc = add_linear(c, HF("attention.self.key"), GG("attn_k"), h, h, err)) ||
            (rc = add_linear(c, HF("attention.self.value"), GG("attn_v"), h, h, err)) ||
            (rc = add_linear(c, HF("attention.output.dense"), GG("attn_output"), h, h, err)) ||
            (rc = add_norm(c, HF("attention.output.LayerNorm"), GG("attn_output_norm"), err)) ||
            (rc = add_linear(c, HF("intermediate.dense"), GG("ffn_up"), ff, h, err)) ||
            (rc = add_linear(c, HF("output.dense"), GG("ffn_down"), h, ff, err)) ||
            (rc = add_norm(c, HF("output.LayerNorm"), GG("layer_output_norm"), err)))
            return rc;
#undef HF
#undef GG
    }
    /* BertForSequenceClassification's head under llama.cpp's RANK names:
     * the pooler is cls, the classifier cls.output */
    if (c->classifier &&
        ((rc = add_linear(c, "pooler.dense", "cls", h, h, err)) ||
         (rc = add(c, "classifier.weight", "cls.output.weight", 2, 1, h, false, err)) ||
         (rc = add(c, "classifier.bias", "cls.output.bias", 1, 1, 0, false, err))))
        return rc;
    return HEARTH_OK;
}

static bool is_special(const hearth_vocab *v, int32_t id)
{
    return id == v->unk || id == v->cls || id == v->sep || id == v->pad || id == v->mask;
}

/* The token list in llama.cpp's spelling, padded to vocab_size. */
static int add_vocab(conv *c, hearth_err *err)
{
    const hearth_vocab *v = &c->f.vocab;
    int64_t n = c->f.config.vocab_size;
    c->tokens = calloc((size_t)n, sizeof *c->tokens);
    int32_t *types = keep(c, (size_t)n * sizeof *types);
    if (!c->tokens || !types)
        return hearth_err_set(err, HEARTH_ENOMEM, "convert: out of memory for the vocab");
    c->n_tokens = n;
    for (int64_t i = 0; i < n; i++) {
        const char *t = i < v->n_tokens ? v->text[i] : NULL;
        size_t len = t ? v->len[i] : 0;
        char *s = malloc(len + 16);
        if (!s)
            return hearth_err_set(err, HEARTH_ENOMEM, "convert: out of memory for the vocab");
        c->tokens[i] = s;
        if (!t) {
            snprintf(s, len + 16, "[PAD%lld]", (long long)i);
            types[i] = HEARTH_TOK_UNUSED;
        } else if (is_special(v, (int32_t)i)) {
            memcpy(s, t, len + 1);
            types[i] = HEARTH_TOK_CONTROL;
        } else if (len >= 2 && t[0] == '#' && t[1] == '#') {
            memcpy(s, t + 2, len - 1);
            types[i] = HEARTH_TOK_NORMAL;
        } else {
            memcpy(s, "\xe2\x96\x81", 3); /* U+2581, SentencePiece's word-start mark */
            memcpy(s + 3, t, len + 1);
            types[i] = HEARTH_TOK_NORMAL;
        }
    }
    hearth_gguf_writer *w = c->w;
    hearth_gguf_writer_add_str(w, "tokenizer.ggml.model", "bert");
    hearth_gguf_writer_add_str(w, "tokenizer.ggml.pre", "default");
    hearth_gguf_writer_add_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)c->tokens, (size_t)n);
    hearth_gguf_writer_add_arr_i32(w, "tokenizer.ggml.token_type", types, (size_t)n);
    hearth_gguf_writer_add_u32(w, "tokenizer.ggml.token_type_count", (uint32_t)c->f.config.type_vocab_size);
    struct {
        const char *key;
        int32_t id;
    } ids[] = {
        {"tokenizer.ggml.unknown_token_id", v->unk}, {"tokenizer.ggml.seperator_token_id", v->sep},
        {"tokenizer.ggml.padding_token_id", v->pad}, {"tokenizer.ggml.cls_token_id", v->cls},
        {"tokenizer.ggml.mask_token_id", v->mask},   {"tokenizer.ggml.bos_token_id", v->cls},
    };
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++)
        if (ids[i].id >= 0)
            hearth_gguf_writer_add_u32(w, ids[i].key, (uint32_t)ids[i].id);
    return HEARTH_OK;
}

static void add_hparams(conv *c)
{
    const hearth_bert_config *k = &c->f.config;
    hearth_gguf_writer *w = c->w;
    const char *base = strrchr(c->f.dir, '/');
    base = base && base[1] ? base + 1 : c->f.dir;
    hearth_gguf_writer_add_str(w, "general.architecture", "bert");
    hearth_gguf_writer_add_str(w, "general.name", base);
    hearth_gguf_writer_add_u32(w, "general.file_type", c->type == HEARTH_F16 ? 1 : 0);
    hearth_gguf_writer_add_u32(w, "bert.context_length", (uint32_t)k->max_position_embeddings);
    hearth_gguf_writer_add_u32(w, "bert.embedding_length", (uint32_t)k->hidden_size);
    hearth_gguf_writer_add_u32(w, "bert.feed_forward_length", (uint32_t)k->intermediate_size);
    hearth_gguf_writer_add_u32(w, "bert.block_count", (uint32_t)k->num_hidden_layers);
    hearth_gguf_writer_add_u32(w, "bert.attention.head_count", (uint32_t)k->num_attention_heads);
    hearth_gguf_writer_add_f32(w, "bert.attention.layer_norm_epsilon", k->layer_norm_eps);
    hearth_gguf_writer_add_bool(w, "bert.attention.causal", false);
    /* llama.cpp's pooling numbering: 1 mean, 2 cls, 3 last, 4 rank (a reranker) */
    hearth_gguf_writer_add_u32(w, "bert.pooling_type", c->classifier ? 4u : (uint32_t)c->f.pooling + 1);
}

int hearth_bert_convert(const char *hf_dir, const char *out_path, hearth_dtype type, hearth_err *err)
{
    if (type != HEARTH_F32 && type != HEARTH_F16)
        return hearth_err_set(err, HEARTH_EUNSUPPORTED, "convert: type %d: only f32 and f16 are written", (int)type);
    conv *c = calloc(1, sizeof *c);
    if (!c)
        return hearth_err_set(err, HEARTH_ENOMEM, "convert: out of memory");
    c->type = type;
    int rc = hearth_hf_folder_open(&c->f, hf_dir, err);
    if (rc)
        goto done;
    if (!(c->w = hearth_gguf_writer_new())) {
        rc = hearth_err_set(err, HEARTH_ENOMEM, "convert: out of memory");
        goto done;
    }
    const hearth_st_tensor *cw = hearth_st_find(&c->f.st, "classifier.weight");
    if (cw && cw->n_dims == 2 && cw->shape[0] == 1)
        c->classifier = cw; /* more labels: not a reranker; written as the encoder alone, as before */
    add_hparams(c);
    if ((rc = add_vocab(c, err)) || (rc = add_tensors(c, err)))
        goto done;
    rc = hearth_gguf_writer_write(c->w, out_path, 0, err);
done:
    hearth_gguf_writer_free(c->w);
    for (int64_t i = 0; c->tokens && i < c->n_tokens; i++)
        free(c->tokens[i]);
    free(c->tokens);
    for (size_t i = 0; i < c->n_bufs; i++)
        free(c->bufs[i]);
    hearth_hf_folder_close(&c->f);
    free(c);
    return rc;
}
