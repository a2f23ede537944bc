/* llama.c: opening a llama-family GGUF (llama, qwen2, qwen3): hyperparameters,
 * tensor validation, tokenizer, accessors.
 *
 * How: the file is mapped by the GGUF reader; hyperparameters come from the
 * "{arch}.*" keys with llama.cpp's defaults where a key is optional; every
 * tensor the forward pass will touch is looked up once, its shape and type
 * checked, and kept as a view into the mapping (llama_mat). The few 1-D
 * tensors (norm weights, biases, rope_freqs) are converted to owned f32
 * arrays, whatever their stored type, so the forward's elementwise code has
 * one type to handle. Every error names the file and the key or tensor.
 *
 * Rejected: inferring the architecture from which tensors exist (a file that
 * says "phi3" but looks like llama would then run with the wrong RoPE and
 * norms: refusing is safer); supporting value_length != key_length (no
 * llama/qwen model uses it; refused with a message). */
#include "models/llama_int.h"

#include "base/file.h"
#include "engine/quant.h"
#include "models/gguf_vocab.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Sanity bounds on dimensions read from the file: generous, but they keep
 * every product below in range. */
#define DIM_MAX (1 << 20)
#define LAYER_MAX 4096

static int get_dim(const hearth_llama *m, const char *key, bool required, int64_t def, int64_t *out,
                   hearth_err *err)
{
    char full[96];
    snprintf(full, sizeof full, "%s.%s", m->hp.arch, key);
    int64_t v;
    int rc = hearth_gguf_get_i64(&m->g, full, &v, err);
    if (rc == HEARTH_ENOTFOUND && !required) {
        *out = def;
        return 0;
    }
    if (rc)
        return hearth_err_set(err, rc == HEARTH_ENOTFOUND ? HEARTH_EINVAL : rc, "%s: metadata %s: %s",
                              m->g.path, full, rc == HEARTH_ENOTFOUND ? "missing" : "not an integer");
    if (v < 1 || v > DIM_MAX)
        return hearth_err_set(err, HEARTH_EINVAL, "%s: metadata %s = %lld, want 1..%d", m->g.path, full,
                              (long long)v, DIM_MAX);
    *out = v;
    return 0;
}

static int get_float(const hearth_llama *m, const char *key, bool required, float def, float *out, hearth_err *err)
{
    char full[96];
    snprintf(full, sizeof full, "%s.%s", m->hp.arch, key);
    int rc = hearth_gguf_get_f32(&m->g, full, out, err);
    if (rc == HEARTH_ENOTFOUND && !required) {
        *out = def;
        return 0;
    }
    if (rc)
        return hearth_err_set(err, HEARTH_EINVAL, "%s: metadata %s: %s", m->g.path, full,
                              rc == HEARTH_ENOTFOUND ? "missing" : "not a float");
    if (!isfinite(*out))
        return hearth_err_set(err, HEARTH_EINVAL, "%s: metadata %s is not finite", m->g.path, full);
    return 0;
}

static int read_hparams(hearth_llama *m, hearth_err *err)
{
    hearth_llama_hparams *hp = &m->hp;
    const char *s;
    size_t n;
    if (hearth_gguf_get_str(&m->g, "general.architecture", &s, &n, err))
        return hearth_err_set(err, HEARTH_EINVAL, "%s: metadata general.architecture missing or not a string",
                              m->g.path);
    if ((n == 5 && !memcmp(s, "llama", 5)) || (n == 5 && !memcmp(s, "qwen2", 5)) ||
        (n == 5 && !memcmp(s, "qwen3", 5))) {
        memcpy(hp->arch, s, n);
        hp->arch[n] = 0;
    } else {
        return hearth_err_set(err, HEARTH_EUNSUPPORTED,
                              "%s: architecture '%.*s' is not supported (llama, qwen2, qwen3)", m->g.path,
                              (int)(n > 32 ? 32 : n), s);
    }
    int64_t layers;
    int rc;
    if ((rc = get_dim(m, "embedding_length", true, 0, &hp->n_embd, err)) ||
        (rc = get_dim(m, "block_count", true, 0, &layers, err)) ||
        (rc = get_dim(m, "feed_forward_length", true, 0, &hp->n_ff, err)) ||
        (rc = get_dim(m, "attention.head_count", true, 0, &hp->n_head, err)) ||
        (rc = get_dim(m, "attention.head_count_kv", false, hp->n_head, &hp->n_head_kv, err)) ||
        (rc = get_dim(m, "attention.key_length", false, hp->n_embd / hp->n_head, &hp->head_dim, err)))
        return rc;
    if (layers > LAYER_MAX)
        return hearth_err_set(err, HEARTH_EINVAL, "%s: metadata %s.block_count = %lld > %d", m->g.path, hp->arch,
                              (long long)layers, LAYER_MAX);
    hp->n_layer = layers;
    int64_t vlen;
    if ((rc = get_dim(m, "attention.value_length", false, hp->head_dim, &vlen, err)) ||
        (rc = get_dim(m, "rope.dimension_count", false, hp->head_dim, &hp->n_rot, err)) ||
        (rc = get_dim(m, "context_length", false, 0, &hp->n_ctx_train, err)))
        return rc;
    if (vlen != hp->head_dim)
        return hearth_err_set(err, HEARTH_EUNSUPPORTED, "%s: %s.attention.value_length %lld != key_length %lld",
                              m->g.path, hp->arch, (long long)vlen, (long long)hp->head_dim);
    if (hp->n_head % hp->n_head_kv || hp->head_dim < 1 || hp->n_rot % 2 || hp->n_rot > hp->head_dim)
        return hearth_err_set(err, HEARTH_EINVAL,
                              "%s: inconsistent attention: %lld heads, %lld kv heads, head_dim %lld, n_rot %lld",
                              m->g.path, (long long)hp->n_head, (long long)hp->n_head_kv, (long long)hp->head_dim,
                              (long long)hp->n_rot);
    /* a kernel limit, asked of the device the model will run on */
    if (hp->head_dim > m->dev->caps.head_dim_max)
        return hearth_err_set(err, HEARTH_EUNSUPPORTED, "%s: %s.attention.key_length %lld > %lld, the largest head device %s runs",
                              m->g.path, hp->arch, (long long)hp->head_dim, (long long)m->dev->caps.head_dim_max,
                              m->dev->caps.name);
    if ((rc = get_float(m, "attention.layer_norm_rms_epsilon", true, 0, &hp->rms_eps, err)) ||
        (rc = get_float(m, "rope.freq_base", false, 10000.0f, &hp->rope_theta, err)))
        return rc;
    hp->rope_freq_scale = 1.0f;
    char key[96];
    snprintf(key, sizeof key, "%s.rope.scaling.type", hp->arch);
    if (hearth_gguf_get_str(&m->g, key, &s, &n, NULL) == 0 && !(n == 4 && !memcmp(s, "none", 4))) {
        if (!(n == 6 && !memcmp(s, "linear", 6)))
            return hearth_err_set(err, HEARTH_EUNSUPPORTED, "%s: %s '%.*s' is not supported (none, linear)",
                                  m->g.path, key, (int)(n > 32 ? 32 : n), s);
        float factor;
        if ((rc = get_float(m, "rope.scaling.factor", false, 1.0f, &factor, err)))
            return rc;
        if (!(factor > 0))
            return hearth_err_set(err, HEARTH_EINVAL, "%s: %s.rope.scaling.factor %g <= 0", m->g.path, hp->arch,
                                  (double)factor);
        hp->rope_freq_scale = 1.0f / factor;
    }
    hp->rope_type = strcmp(hp->arch, "llama") == 0 ? HEARTH_ROPE_NORM : HEARTH_ROPE_NEOX;
    return 0;
}

/* The tensor name, checked to have exactly the dims given (ne0 innermost). */
static int find_shaped(const hearth_llama *m, const char *name, bool required, int n_dims, int64_t ne0, int64_t ne1,
                       const hearth_gguf_tensor **out, hearth_err *err)
{
    const hearth_gguf_tensor *t = hearth_gguf_find_tensor(&m->g, name);
    *out = t;
    if (!t)
        return required ? hearth_err_set(err, HEARTH_EINVAL, "%s: tensor '%s' is missing", m->g.path, name) : 0;
    bool ok = t->n_dims == n_dims && t->ne[0] == ne0 && (n_dims < 2 || t->ne[1] == ne1);
    if (!ok) {
        char want[64];
        if (n_dims == 1)
            snprintf(want, sizeof want, "[%lld]", (long long)ne0);
        else
            snprintf(want, sizeof want, "[%lld, %lld]", (long long)ne0, (long long)ne1);
        return hearth_err_set(err, HEARTH_EINVAL, "%s: tensor '%s' has shape [%lld, %lld, %lld, %lld] (%d dims), want %s",
                              m->g.path, name, (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2],
                              (long long)t->ne[3], t->n_dims, want);
    }
    return 0;
}

static int load_mat(hearth_llama *m, const char *name, int64_t n_in, int64_t n_out, llama_mat *w, hearth_err *err)
{
    const hearth_gguf_tensor *t;
    int rc = find_shaped(m, name, true, 2, n_in, n_out, &t, err);
    if (rc)
        return rc;
    const hearth_dtype_info *di = hearth_dtype_get(t->type);
    size_t rb;
    if (!di || !hearth_dtype_row_bytes(t->type, n_in, &rb))
        return hearth_err_set(err, HEARTH_EUNSUPPORTED, "%s: tensor '%s': type %s cannot hold rows of %lld",
                              m->g.path, name, di ? di->name : "?", (long long)n_in);
    if (!m->dev->ops->supports(m->dev, HEARTH_OP_MATMUL, t->type))
        return hearth_err_set(err, HEARTH_EUNSUPPORTED, "%s: tensor '%s': device %s has no matmul for type %s",
                              m->g.path, name, m->dev->caps.name, di->name);
    w->data = t->data;
    w->type = t->type;
    w->row_bytes = rb;
    w->n_in = n_in;
    w->n_out = n_out;
    return 0;
}

/* A 1-D tensor of n elements as an owned f32 array (*out stays NULL when an
 * optional tensor is absent). */
static int load_vec_host(hearth_llama *m, const char *name, bool required, int64_t n, float **out, hearth_err *err)
{
    const hearth_gguf_tensor *t;
    *out = NULL;
    int rc = find_shaped(m, name, required, 1, n, 1, &t, err);
    if (rc || !t)
        return rc;
    float *v = malloc((size_t)n * sizeof *v);
    if (!v)
        return hearth_err_set(err, HEARTH_ENOMEM, "%s: tensor '%s': out of memory", m->g.path, name);
    if (hearth_quant_dequantize_row(t->type, t->data, v, n)) {
        free(v);
        const hearth_dtype_info *di = hearth_dtype_get(t->type);
        return hearth_err_set(err, HEARTH_EUNSUPPORTED, "%s: tensor '%s': type %s not usable for a vector of %lld",
                              m->g.path, name, di ? di->name : "?", (long long)n);
    }
    *out = v;
    return 0;
}

/* load_vec_host, then placed where the ops read it: on a device whose
 * memory is not the host's, one copy there and the host's freed. */
static int load_vec(hearth_llama *m, const char *name, bool required, int64_t n, float **out, hearth_err *err)
{
    int rc = load_vec_host(m, name, required, n, out, err);
    float *v = *out;
    if (rc || !v || m->dev->caps.host_memory)
        return rc;
    *out = NULL;
    float *d = m->dev->ops->alloc(m->dev, (size_t)n * sizeof *v, err);
    hearth_stream st;
    rc = d ? hearth_stream_init(&st, m->dev, NULL, err) : HEARTH_ENOMEM;
    if (!rc) {
        const hearth_dev_ops *D = m->dev->ops;
        if ((rc = D->upload(&st, d, v, (size_t)n * sizeof *v)) == 0)
            rc = D->sync(&st);
        hearth_stream_deinit(&st);
    }
    free(v);
    if (rc) {
        m->dev->ops->free(m->dev, d);
        return hearth_err_set(err, rc, "%s: tensor '%s' cannot be placed on %s (%s)", m->g.path, name,
                              m->dev->caps.name, hearth_status_name(rc));
    }
    *out = d;
    return 0;
}

/* Frees a vector load_vec made, on the host or the device. */
static void free_vec(hearth_llama *m, float *v)
{
    if (m->dev && !m->dev->caps.host_memory)
        m->dev->ops->free(m->dev, v);
    else
        free(v);
}

static int load_layer(hearth_llama *m, int64_t il, hearth_err *err)
{
    const hearth_llama_hparams *hp = &m->hp;
    llama_layer *L = &m->layers[il];
    int64_t qd = hp->n_head * hp->head_dim, kvd = hp->n_head_kv * hp->head_dim;
    char nm[96];
    int rc;
#define NAME(suffix) (snprintf(nm, sizeof nm, "blk.%lld.%s", (long long)il, suffix), nm)
    if ((rc = load_vec(m, NAME("attn_norm.weight"), true, hp->n_embd, &L->attn_norm, err)) ||
        (rc = load_vec(m, NAME("ffn_norm.weight"), true, hp->n_embd, &L->ffn_norm, err)) ||
        (rc = load_mat(m, NAME("attn_q.weight"), hp->n_embd, qd, &L->wq, err)) ||
        (rc = load_mat(m, NAME("attn_k.weight"), hp->n_embd, kvd, &L->wk, err)) ||
        (rc = load_mat(m, NAME("attn_v.weight"), hp->n_embd, kvd, &L->wv, err)) ||
        (rc = load_mat(m, NAME("attn_output.weight"), qd, hp->n_embd, &L->wo, err)) ||
        (rc = load_mat(m, NAME("ffn_gate.weight"), hp->n_embd, hp->n_ff, &L->gate, err)) ||
        (rc = load_mat(m, NAME("ffn_up.weight"), hp->n_embd, hp->n_ff, &L->up, err)) ||
        (rc = load_mat(m, NAME("ffn_down.weight"), hp->n_ff, hp->n_embd, &L->down, err)))
        return rc;
    bool qwen2 = strcmp(hp->arch, "qwen2") == 0, qwen3 = strcmp(hp->arch, "qwen3") == 0;
    /* llama files may carry biases too (some converters write them): used when present. */
    if ((rc = load_vec(m, NAME("attn_q.bias"), qwen2, qd, &L->bq, err)) ||
        (rc = load_vec(m, NAME("attn_k.bias"), qwen2, kvd, &L->bk, err)) ||
        (rc = load_vec(m, NAME("attn_v.bias"), qwen2, kvd, &L->bv, err)) ||
        (rc = load_vec(m, NAME("attn_q_norm.weight"), qwen3, hp->head_dim, &L->q_norm, err)) ||
        (rc = load_vec(m, NAME("attn_k_norm.weight"), qwen3, hp->head_dim, &L->k_norm, err)))
        return rc;
#undef NAME
    if (!L->bq != !L->bk || !L->bq != !L->bv)
        return hearth_err_set(err, HEARTH_EINVAL, "%s: layer %lld has some but not all of the q/k/v biases",
                              m->g.path, (long long)il);
    if (!L->q_norm != !L->k_norm)
        return hearth_err_set(err, HEARTH_EINVAL, "%s: layer %lld has only one of attn_q_norm / attn_k_norm",
                              m->g.path, (long long)il);
    if (il == 0) {
        m->hp.qkv_bias = L->bq != NULL;
        m->hp.qk_norm = L->q_norm != NULL;
    } else if (m->hp.qkv_bias != (L->bq != NULL) || m->hp.qk_norm != (L->q_norm != NULL)) {
        return hearth_err_set(err, HEARTH_EINVAL, "%s: layer %lld differs from layer 0 in its biases or QK-norm",
                              m->g.path, (long long)il);
    }
    return 0;
}

/* Places w on the model's device (engine/dev.h's weight_new). COMPACT: on
 * the CPU, F16 weights go into the GEMM's f16 panels where its kernels take
 * them (matmul.h): the prompt's matmuls then skip packing the weights on
 * every call (~20% of an F16 prefill GEMM), decode streams the panels as it
 * streamed the rows, and the memory stays the same: the mapped copy is
 * released once the weight no longer reads it. Other types, and F16
 * elsewhere, stay in place. AS_STORED for a table read by rows. */
static int place_mat(hearth_llama *m, const char *what, llama_mat *w, enum hearth_weight_place place,
                     hearth_err *err)
{
    const hearth_dev_ops *D = m->dev->ops;
    hearth_weight_desc d = {w->type, w->data, w->row_bytes, w->n_out, w->n_in,
                            m->no_repack ? HEARTH_WEIGHT_AS_STORED : place, what};
    w->w = D->weight_new(m->dev, &d, err);
    if (!w->w) {
        hearth_err_prefix(err, "%s", m->g.path);
        return err ? err->code : HEARTH_ENOMEM;
    }
    if (!D->weight_reads_host(w->w))
        hearth_mmap_release(w->data, w->row_bytes * (size_t)w->n_out);
    return 0;
}

static void count_mat(hearth_llama *m, const llama_mat *w, uint64_t counts[])
{
    counts[w->type]++;
    m->wbytes += (uint64_t)w->row_bytes * (uint64_t)w->n_out;
}

static int load_tensors(hearth_llama *m, hearth_err *err)
{
    hearth_llama_hparams *hp = &m->hp;
    const hearth_gguf_tensor *te = hearth_gguf_find_tensor(&m->g, "token_embd.weight");
    if (!te)
        return hearth_err_set(err, HEARTH_EINVAL, "%s: tensor 'token_embd.weight' is missing", m->g.path);
    if (te->n_dims != 2 || te->ne[1] < 1 || te->ne[1] > INT32_MAX)
        return hearth_err_set(err, HEARTH_EINVAL, "%s: tensor 'token_embd.weight' has %d dims [%lld, %lld], want [%lld, n_vocab]",
                              m->g.path, te->n_dims, (long long)te->ne[0], (long long)te->ne[1],
                              (long long)hp->n_embd);
    hp->n_vocab = te->ne[1];
    int rc;
    if ((rc = load_mat(m, "token_embd.weight", hp->n_embd, hp->n_vocab, &m->embd, err)) ||
        (rc = load_vec(m, "output_norm.weight", true, hp->n_embd, &m->out_norm, err)))
        return rc;
    hp->tied_output = hearth_gguf_find_tensor(&m->g, "output.weight") == NULL;
    if (hp->tied_output)
        m->out = m->embd;
    else if ((rc = load_mat(m, "output.weight", hp->n_embd, hp->n_vocab, &m->out, err)))
        return rc;

    float *freqs = NULL;
    if ((rc = load_vec_host(m, "rope_freqs.weight", false, hp->n_rot / 2, &freqs, err)))
        return rc;
    m->inv_freq = malloc((size_t)(hp->n_rot / 2 + 1) * sizeof *m->inv_freq);
    if (!m->inv_freq) {
        free(freqs);
        return hearth_err_set(err, HEARTH_ENOMEM, "%s: out of memory", m->g.path);
    }
    /* theta_i = pos * scale * base^(-2i/n_rot) / rope_freqs[i], in double so
     * positions in the tens of thousands keep their angles exact to float. */
    for (int64_t i = 0; i < hp->n_rot / 2; i++) {
        double f = (double)hp->rope_freq_scale * pow((double)hp->rope_theta, -2.0 * (double)i / (double)hp->n_rot);
        m->inv_freq[i] = freqs ? f / (double)freqs[i] : f;
    }
    free(freqs);

    m->layers = calloc((size_t)hp->n_layer, sizeof *m->layers);
    if (!m->layers)
        return hearth_err_set(err, HEARTH_ENOMEM, "%s: out of memory", m->g.path);
    /* a device with its own memory: refuse a model that cannot fit there
     * now, with the figures, rather than fail half-placed */
    uint64_t need = 0, free_b = 0, total_b = 0;
    for (uint64_t i = 0; i < m->g.n_tensors; i++)
        need += m->g.tensors[i].nbytes;
    if (m->dev->ops->mem_info && m->dev->ops->mem_info(m->dev, &free_b, &total_b) == 0 && need > free_b)
        return hearth_err_set(err, HEARTH_ENOMEM,
                              "%s: the model needs %llu bytes of weights on %s and %llu of its %llu bytes are free",
                              m->g.path, (unsigned long long)need, m->dev->caps.name, (unsigned long long)free_b,
                              (unsigned long long)total_b);
    uint64_t counts[HEARTH_DTYPE_COUNT_] = {0};
    for (int64_t il = 0; il < hp->n_layer; il++) {
        if ((rc = load_layer(m, il, err)))
            return rc;
        llama_layer *L = &m->layers[il];
        llama_mat *ws[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->gate, &L->up, &L->down};
        char what[48];
        snprintf(what, sizeof what, "layer %lld's weights", (long long)il);
        for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++) {
            count_mat(m, ws[i], counts);
            if ((rc = place_mat(m, what, ws[i], HEARTH_WEIGHT_COMPACT, err)))
                return rc;
        }
    }
    count_mat(m, &m->out, counts);
    /* a tied output head is also the token embedding table, read by rows */
    if ((rc = place_mat(m, "token_embd.weight", &m->embd, HEARTH_WEIGHT_AS_STORED, err)))
        return rc;
    if (hp->tied_output)
        m->out.w = m->embd.w;
    else if ((rc = place_mat(m, "output.weight", &m->out, HEARTH_WEIGHT_COMPACT, err)))
        return rc;
    m->wtype = HEARTH_F32;
    for (int t = 0; t < HEARTH_DTYPE_COUNT_; t++)
        if (counts[t] > counts[m->wtype])
            m->wtype = (hearth_dtype)t;
    return 0;
}

static int load_tokenizer(hearth_llama *m, hearth_err *err)
{
    int rc = hearth_gguf_load_vocab(&m->g, &m->vocab, err);
    if (rc) {
        hearth_err_prefix(err, "%s: tokenizer", m->g.path);
        return rc;
    }
    if (m->vocab.n_tokens > m->hp.n_vocab)
        return hearth_err_set(err, HEARTH_EINVAL, "%s: %d tokens in tokenizer.ggml.tokens > %lld rows of token_embd.weight",
                              m->g.path, m->vocab.n_tokens, (long long)m->hp.n_vocab);
    if ((rc = hearth_tokenizer_init(&m->tok, &m->vocab, err))) {
        hearth_err_prefix(err, "%s", m->g.path);
        return rc;
    }
    m->tok_ready = true;
    return 0;
}

int hearth_llama_open(hearth_llama **out, const char *path, hearth_err *err)
{
    return hearth_llama_open_with(out, path, NULL, err);
}

int hearth_llama_open_with(hearth_llama **out, const char *path, const hearth_llama_open_opts *opts, hearth_err *err)
{
    *out = NULL;
    hearth_llama *m = calloc(1, sizeof *m);
    if (!m)
        return hearth_err_set(err, HEARTH_ENOMEM, "%s: out of memory", path);
    int rc = hearth_gguf_open(&m->g, path, err);
    if (rc)
        goto fail;
    m->no_repack = opts && opts->no_repack;
    m->dev = opts && opts->dev ? opts->dev : hearth_dev_default();
    m->uid = hearth_dev_uid();
    if ((rc = read_hparams(m, err)) || (rc = load_tensors(m, err)) || (rc = load_tokenizer(m, err)))
        goto fail;
    *out = m;
    return 0;
fail:
    hearth_llama_close(m);
    return rc;
}

void hearth_llama_close(hearth_llama *m)
{
    if (!m)
        return;
    if (m->layers) {
        for (int64_t il = 0; il < m->hp.n_layer; il++) {
            llama_layer *L = &m->layers[il];
            llama_mat *ws[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->gate, &L->up, &L->down};
            for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++)
                m->dev->ops->weight_free(ws[i]->w);
            free_vec(m, L->attn_norm);
            free_vec(m, L->ffn_norm);
            free_vec(m, L->bq);
            free_vec(m, L->bk);
            free_vec(m, L->bv);
            free_vec(m, L->q_norm);
            free_vec(m, L->k_norm);
        }
        free(m->layers);
    }
    if (m->dev) {
        if (m->out.w != m->embd.w)
            m->dev->ops->weight_free(m->out.w);
        m->dev->ops->weight_free(m->embd.w);
    }
    free_vec(m, m->out_norm);
    free(m->inv_freq);
    if (m->tok_ready)
        hearth_tokenizer_deinit(&m->tok);
    hearth_vocab_deinit(&m->vocab);
    hearth_gguf_close(&m->g);
    free(m);
}

hearth_kv *hearth_kv_new(const hearth_llama *m, int n_slots, int64_t n_ctx, hearth_err *err)
{
    return hearth_kv_new_typed(m, n_slots, n_ctx, HEARTH_F32, err);
}

hearth_kv *hearth_kv_new_typed(const hearth_llama *m, int n_slots, int64_t n_ctx, hearth_dtype type,
                               hearth_err *err)
{
    return hearth_kv_create(m->dev, m->hp.n_layer, m->hp.n_head_kv * m->hp.head_dim, n_slots, n_ctx, type, err);
}

const hearth_llama_hparams *hearth_llama_hparams_get(const hearth_llama *m) { return &m->hp; }
const hearth_gguf *hearth_llama_gguf(const hearth_llama *m) { return &m->g; }
const hearth_vocab *hearth_llama_vocab(const hearth_llama *m) { return &m->vocab; }
const hearth_tokenizer *hearth_llama_tokenizer(const hearth_llama *m) { return &m->tok; }
hearth_dtype hearth_llama_weight_type(const hearth_llama *m) { return m->wtype; }
uint64_t hearth_llama_weight_bytes(const hearth_llama *m) { return m->wbytes; }
