/* llama_demo.c: writing deterministic random-weight llama / qwen2 / qwen3
 * GGUF files.
 *
 * How: metadata as llama.cpp's converter writes it ("{arch}.*" keys), then
 * the tokenizer.* records copied one by one from the named vocab GGUF, then
 * the tensors in a fixed order (token_embd, output_norm, output, then each
 * layer). Values come from splitmix64 (Steele et al., 2014: state += 0x9e37..;
 * two xor-shift-multiply rounds), one stream from seed, mapped to uniform
 * [-1, 1) by the top 24 bits. Matrices are scaled by sqrt(3 / n_in) so each
 * output has about unit variance (logits and attention scores stay in a
 * range where softmax is neither flat nor one-hot); norm weights are
 * 1 + 0.1 u, biases 0.1 u, embeddings u. Matrices are generated in f32 and
 * converted with the kernels' hearth_quant_quantize_row.
 *
 * Rejected: copying real weights (none small enough of each arch are
 * shipped); normal-distributed draws (uniform is enough for parity, and
 * exactly reproducible in Python if ever needed). */
#include "models/llama_demo.h"

#include "engine/quant.h"
#include "models/gguf.h"
#include "models/gguf_write.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct demo_ctx {
    uint64_t rng;
    hearth_gguf_writer *w;
    void **bufs; /* tensor data, borrowed by the writer until it is freed */
    size_t n_bufs, cap_bufs;
} demo_ctx;

static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* uniform in [-1, 1) */
static float uniform(demo_ctx *c)
{
    return (float)(splitmix64(&c->rng) >> 40) * (2.0f / 16777216.0f) - 1.0f;
}

static void *keep(demo_ctx *c, size_t bytes)
{
    if (c->n_bufs == c->cap_bufs) {
        size_t cap = c->cap_bufs ? 2 * c->cap_bufs : 64;
        void **nb = realloc(c->bufs, cap * sizeof *nb);
        if (!nb)
            return NULL;
        c->bufs = nb;
        c->cap_bufs = cap;
    }
    void *p = malloc(bytes ? bytes : 1);
    if (p)
        c->bufs[c->n_bufs++] = p;
    return p;
}

/* A 1-D f32 tensor of n values base + amp * u. */
static int add_vec(demo_ctx *c, const char *name, int64_t n, float base, float amp)
{
    float *v = keep(c, (size_t)n * sizeof *v);
    if (!v)
        return HEARTH_ENOMEM;
    for (int64_t i = 0; i < n; i++)
        v[i] = base + amp * uniform(c);
    int64_t ne[1] = {n};
    return hearth_gguf_writer_add_tensor(c->w, name, HEARTH_F32, 1, ne, v, (size_t)n * sizeof *v);
}

/* A (n_out, n_in) matrix of type t with values amp * u. */
static int add_mat(demo_ctx *c, const char *name, hearth_dtype t, int64_t n_in, int64_t n_out, float amp)
{
    size_t row_bytes;
    if (!hearth_dtype_row_bytes(t, n_in, &row_bytes))
        return HEARTH_EINVAL;
    float *row = malloc((size_t)n_in * sizeof *row);
    uint8_t *data = keep(c, row_bytes * (size_t)n_out);
    if (!row || !data) {
        free(row);
        return HEARTH_ENOMEM;
    }
    int rc = 0;
    for (int64_t r = 0; r < n_out && !rc; r++) {
        for (int64_t i = 0; i < n_in; i++)
            row[i] = amp * uniform(c);
        rc = hearth_quant_quantize_row(t, row, data + (size_t)r * row_bytes, n_in);
    }
    free(row);
    int64_t ne[2] = {n_in, n_out};
    return rc ? rc : hearth_gguf_writer_add_tensor(c->w, name, t, 2, ne, data, row_bytes * (size_t)n_out);
}

/* Every tokenizer.* record of the vocab file, in its order. */
static int copy_tokenizer(demo_ctx *c, const hearth_gguf *g, hearth_err *err)
{
    for (uint64_t i = 0; i < g->n_kv; i++) {
        const hearth_gguf_kv *kv = &g->kv[i];
        if (strncmp(kv->key, "tokenizer.", 10) != 0)
            continue;
        int rc = 0;
        if (kv->type == HEARTH_GGUF_STRING) {
            char *s = keep(c, (size_t)kv->str_len + 1);
            if (!s)
                return hearth_err_set(err, HEARTH_ENOMEM, "%s: out of memory", g->path);
            memcpy(s, kv->data, (size_t)kv->str_len);
            s[kv->str_len] = 0;
            rc = hearth_gguf_writer_add_str(c->w, kv->key, s);
        } else if (kv->type != HEARTH_GGUF_ARRAY) {
            rc = hearth_gguf_writer_add_scalar(c->w, kv->key, kv->type, kv->data);
        } else if (kv->arr_type == HEARTH_GGUF_STRING) {
            char **ss = keep(c, (size_t)kv->arr_n * sizeof *ss);
            if (!ss)
                return hearth_err_set(err, HEARTH_ENOMEM, "%s: out of memory", g->path);
            for (uint64_t j = 0; j < kv->arr_n && !rc; j++) {
                const char *s;
                size_t n;
                if ((rc = hearth_gguf_arr_str(kv, j, &s, &n)))
                    break;
                if (!(ss[j] = keep(c, n + 1)))
                    return hearth_err_set(err, HEARTH_ENOMEM, "%s: out of memory", g->path);
                memcpy(ss[j], s, n);
                ss[j][n] = 0;
            }
            if (!rc)
                rc = hearth_gguf_writer_add_arr_str(c->w, kv->key, (const char *const *)ss, (size_t)kv->arr_n);
        } else if (kv->arr_type == HEARTH_GGUF_F32) {
            float *v = keep(c, (size_t)kv->arr_n * sizeof *v);
            if (!v)
                return hearth_err_set(err, HEARTH_ENOMEM, "%s: out of memory", g->path);
            for (uint64_t j = 0; j < kv->arr_n && !rc; j++)
                rc = hearth_gguf_arr_f32(kv, j, &v[j]);
            if (!rc)
                rc = hearth_gguf_writer_add_arr_f32(c->w, kv->key, v, (size_t)kv->arr_n);
        } else {
            int32_t *v = keep(c, (size_t)kv->arr_n * sizeof *v);
            if (!v)
                return hearth_err_set(err, HEARTH_ENOMEM, "%s: out of memory", g->path);
            for (uint64_t j = 0; j < kv->arr_n && !rc; j++)
                rc = hearth_gguf_arr_i32(kv, j, &v[j]);
            if (!rc)
                rc = hearth_gguf_writer_add_arr_i32(c->w, kv->key, v, (size_t)kv->arr_n);
        }
        if (rc)
            return hearth_err_set(err, rc, "%s: key '%s' cannot be copied (%s %s)", g->path, kv->key,
                                  hearth_gguf_type_name(kv->type), hearth_gguf_type_name(kv->arr_type));
    }
    return 0;
}

static int add_hparams(demo_ctx *c, const hearth_llama_demo *d)
{
    char k[96];
    hearth_gguf_writer *w = c->w;
#define KEY(s) (snprintf(k, sizeof k, "%s.%s", d->arch, s), k)
    hearth_gguf_writer_add_str(w, "general.architecture", d->arch);
    hearth_gguf_writer_add_str(w, "general.name", "hearth demo");
    hearth_gguf_writer_add_u32(w, KEY("context_length"), (uint32_t)d->n_ctx);
    hearth_gguf_writer_add_u32(w, KEY("embedding_length"), (uint32_t)d->n_embd);
    hearth_gguf_writer_add_u32(w, KEY("block_count"), (uint32_t)d->n_layer);
    hearth_gguf_writer_add_u32(w, KEY("feed_forward_length"), (uint32_t)d->n_ff);
    hearth_gguf_writer_add_u32(w, KEY("attention.head_count"), (uint32_t)d->n_head);
    hearth_gguf_writer_add_u32(w, KEY("attention.head_count_kv"), (uint32_t)d->n_head_kv);
    /* written only where it differs from the default n_embd / n_head, so
     * both the key and the default are exercised */
    if (d->head_dim * d->n_head != d->n_embd) {
        hearth_gguf_writer_add_u32(w, KEY("attention.key_length"), (uint32_t)d->head_dim);
        hearth_gguf_writer_add_u32(w, KEY("attention.value_length"), (uint32_t)d->head_dim);
    }
    hearth_gguf_writer_add_u32(w, KEY("rope.dimension_count"), (uint32_t)d->head_dim);
    bool llama = strcmp(d->arch, "llama") == 0;
    hearth_gguf_writer_add_f32(w, KEY("rope.freq_base"), llama ? 10000.0f : 1000000.0f);
    return hearth_gguf_writer_add_f32(w, KEY("attention.layer_norm_rms_epsilon"), llama ? 1e-5f : 1e-6f);
#undef KEY
}

static int add_weights(demo_ctx *c, const hearth_llama_demo *d, int64_t n_vocab)
{
    int64_t qd = d->n_head * d->head_dim, kvd = d->n_head_kv * d->head_dim, E = d->n_embd;
    hearth_dtype t = d->wtype;
    float s_e = sqrtf(3.0f / (float)E), s_q = sqrtf(3.0f / (float)qd), s_f = sqrtf(3.0f / (float)d->n_ff);
    int rc;
    if ((rc = add_mat(c, "token_embd.weight", t, E, n_vocab, 1.0f)) ||
        (rc = add_vec(c, "output_norm.weight", E, 1.0f, 0.1f)))
        return rc;
    if (!d->tied && (rc = add_mat(c, "output.weight", t, E, n_vocab, s_e)))
        return rc;
    bool qwen2 = strcmp(d->arch, "qwen2") == 0, qwen3 = strcmp(d->arch, "qwen3") == 0;
    for (int64_t il = 0; il < d->n_layer; il++) {
        char nm[96];
#define NAME(s) (snprintf(nm, sizeof nm, "blk.%lld.%s", (long long)il, s), nm)
        if ((rc = add_vec(c, NAME("attn_norm.weight"), E, 1.0f, 0.1f)) ||
            (rc = add_mat(c, NAME("attn_q.weight"), t, E, qd, s_e)) ||
            (rc = add_mat(c, NAME("attn_k.weight"), t, E, kvd, s_e)) ||
            (rc = add_mat(c, NAME("attn_v.weight"), t, E, kvd, s_e)) ||
            (rc = add_mat(c, NAME("attn_output.weight"), t, qd, E, s_q)) ||
            (rc = add_vec(c, NAME("ffn_norm.weight"), E, 1.0f, 0.1f)) ||
            (rc = add_mat(c, NAME("ffn_gate.weight"), t, E, d->n_ff, s_e)) ||
            (rc = add_mat(c, NAME("ffn_up.weight"), t, E, d->n_ff, s_e)) ||
            (rc = add_mat(c, NAME("ffn_down.weight"), t, d->n_ff, E, s_f)))
            return rc;
        if (qwen2 && ((rc = add_vec(c, NAME("attn_q.bias"), qd, 0.0f, 0.1f)) ||
                      (rc = add_vec(c, NAME("attn_k.bias"), kvd, 0.0f, 0.1f)) ||
                      (rc = add_vec(c, NAME("attn_v.bias"), kvd, 0.0f, 0.1f))))
            return rc;
        if (qwen3 && ((rc = add_vec(c, NAME("attn_q_norm.weight"), d->head_dim, 1.0f, 0.1f)) ||
                      (rc = add_vec(c, NAME("attn_k_norm.weight"), d->head_dim, 1.0f, 0.1f))))
            return rc;
#undef NAME
    }
    return 0;
}

static int check_shape(const hearth_llama_demo *d, const char *path, hearth_err *err)
{
    if (!d->arch || (strcmp(d->arch, "llama") && strcmp(d->arch, "qwen2") && strcmp(d->arch, "qwen3")))
        return hearth_err_set(err, HEARTH_EINVAL, "%s: demo arch '%s' is not llama, qwen2 or qwen3", path,
                              d->arch ? d->arch : "(null)");
    const hearth_dtype_info *di = hearth_dtype_get(d->wtype);
    int64_t dims[] = {d->n_embd, d->n_layer, d->n_head, d->n_head_kv, d->head_dim, d->n_ff, d->n_ctx};
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++)
        if (dims[i] < 1 || dims[i] > (1 << 20))
            return hearth_err_set(err, HEARTH_EINVAL, "%s: demo dims must be 1..2^20", path);
    if (d->n_head % d->n_head_kv || d->head_dim % 2)
        return hearth_err_set(err, HEARTH_EINVAL, "%s: demo heads %lld / kv %lld / head_dim %lld inconsistent", path,
                              (long long)d->n_head, (long long)d->n_head_kv, (long long)d->head_dim);
    if (!di || d->n_embd % di->block || d->n_ff % di->block || (d->n_head * d->head_dim) % di->block)
        return hearth_err_set(err, HEARTH_EINVAL, "%s: type %s needs hidden, FFN and q dims divisible by %lld", path,
                              di ? di->name : "?", di ? (long long)di->block : 0LL);
    return 0;
}

int hearth_llama_demo_write(const hearth_llama_demo *d, const char *path, hearth_err *err)
{
    int rc = check_shape(d, path, err);
    if (rc)
        return rc;
    demo_ctx c = {.rng = d->seed};
    hearth_gguf g = {0};
    if ((rc = hearth_gguf_open(&g, d->vocab_path ? d->vocab_path : "", err)))
        return rc;
    const hearth_gguf_kv *tokens;
    if ((rc = hearth_gguf_get_arr(&g, "tokenizer.ggml.tokens", HEARTH_GGUF_STRING, &tokens, err)))
        goto fail;
    c.w = hearth_gguf_writer_new();
    if (!c.w) {
        rc = hearth_err_set(err, HEARTH_ENOMEM, "%s: out of memory", path);
        goto fail;
    }
    add_hparams(&c, d);
    if ((rc = copy_tokenizer(&c, &g, err)))
        goto fail;
    if ((rc = add_weights(&c, d, (int64_t)tokens->arr_n))) {
        hearth_err_set(err, rc, "%s: cannot make the weights (%s)", path, hearth_status_name(rc));
        goto fail;
    }
    rc = hearth_gguf_writer_write(c.w, path, 0, err);
fail:
    hearth_gguf_writer_free(c.w);
    for (size_t i = 0; i < c.n_bufs; i++)
        free(c.bufs[i]);
    free(c.bufs);
    hearth_gguf_close(&g);
    return rc;
}

void hearth_llama_demo_tiny(hearth_llama_demo *d, const char *arch)
{
    bool qwen3 = strcmp(arch, "qwen3") == 0;
    *d = (hearth_llama_demo){.arch = arch, .wtype = HEARTH_F32, .n_embd = 256, .n_layer = 2,
                             .n_head = qwen3 ? 8 : 4, .n_head_kv = 2, .head_dim = 64, .n_ff = 512,
                             .n_ctx = 256, .seed = 1};
}

void hearth_llama_demo_bench(hearth_llama_demo *d, const char *arch)
{
    *d = (hearth_llama_demo){.arch = arch, .wtype = HEARTH_F32, .n_embd = 768, .n_layer = 12, .n_head = 12,
                             .n_head_kv = 12, .head_dim = 64, .n_ff = 2048, .n_ctx = 2048, .seed = 1};
}
