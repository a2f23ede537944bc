/* bert_demo.c: a random-weight sentence-transformers BERT folder.
 *
 * How: the small JSON files are built with cJSON and printed; the vocab is
 * copied byte for byte (or made up), and tokenizer.json is built from the
 * same lines; the weights are generated tensor by tensor (the PRNG scheme is
 * in bert_demo.h) into buffers the safetensors writer borrows, then written
 * in one pass. The shape is checked with hearth_bert_config_parse on the
 * config.json text we are about to write, so the demo never writes a folder
 * the loader would refuse.
 *
 * Rejected: a global PRNG stream over all tensors in write order (any change
 * to the order would change every weight, and a reference script would have
 * to mimic the order). */
#include "models/bert_demo.h"

#include "base/file.h"
#include "models/safetensors_write.h"
#include "text/vocab_txt.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define PATH_CAP 4096

void hearth_bert_demo_shape_minilm(hearth_bert_demo_shape *s)
{
    *s = (hearth_bert_demo_shape){
        .vocab_size = 30522, .hidden_size = 384, .num_hidden_layers = 6, .num_attention_heads = 12,
        .intermediate_size = 1536, .max_position_embeddings = 512, .type_vocab_size = 2,
        .layer_norm_eps = 1e-12f, .max_seq_len = 256, .tokenizer_json = true,
        .pooling = HEARTH_POOL_MEAN, .normalize = true,
    };
}

static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t fnv1a64(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

/* n values (2u - 1) * a + base from the stream of name. */
static void fill(float *out, int64_t n, uint64_t seed, const char *name, float a, float base)
{
    uint64_t state = seed ^ fnv1a64(name);
    for (int64_t i = 0; i < n; i++) {
        float u = (float)(splitmix64(&state) >> 40) * (1.0f / 16777216.0f);
        out[i] = base + (2.0f * u - 1.0f) * a;
    }
}

static int write_text(const char *dir, const char *name, const char *text, size_t len, hearth_err *err)
{
    char path[PATH_CAP];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f)
        return hearth_err_sys(err, errno, "%s: cannot create", path);
    bool ok = fwrite(text, 1, len, f) == len;
    int e = errno;
    if (fclose(f) != 0 && ok) {
        ok = false;
        e = errno;
    }
    return ok ? HEARTH_OK : hearth_err_sys(err, e, "%s: write failed", path);
}

/* Prints and frees j. */
static int write_json(const char *dir, const char *name, cJSON *j, hearth_err *err)
{
    char *s = j ? cJSON_Print(j) : NULL;
    cJSON_Delete(j);
    if (!s)
        return hearth_err_set(err, HEARTH_ENOMEM, "%s/%s: out of memory", dir, name);
    int rc = write_text(dir, name, s, strlen(s), err);
    free(s);
    return rc;
}

static cJSON *config_json(const hearth_bert_demo_shape *s)
{
    cJSON *j = cJSON_CreateObject();
    cJSON *arch = cJSON_AddArrayToObject(j, "architectures");
    cJSON_AddItemToArray(arch, cJSON_CreateString(s->reranker ? "BertForSequenceClassification" : "BertModel"));
    if (s->reranker) { /* one label: transformers' default is two */
        cJSON_AddItemToObject(j, "id2label", cJSON_Parse("{\"0\": \"LABEL_0\"}"));
        cJSON_AddItemToObject(j, "label2id", cJSON_Parse("{\"LABEL_0\": 0}"));
    }
    cJSON_AddStringToObject(j, "model_type", "bert");
    cJSON_AddStringToObject(j, "hidden_act", "gelu");
    cJSON_AddStringToObject(j, "position_embedding_type", "absolute");
    cJSON_AddNumberToObject(j, "vocab_size", (double)s->vocab_size);
    cJSON_AddNumberToObject(j, "hidden_size", (double)s->hidden_size);
    cJSON_AddNumberToObject(j, "num_hidden_layers", (double)s->num_hidden_layers);
    cJSON_AddNumberToObject(j, "num_attention_heads", (double)s->num_attention_heads);
    cJSON_AddNumberToObject(j, "intermediate_size", (double)s->intermediate_size);
    cJSON_AddNumberToObject(j, "max_position_embeddings", (double)s->max_position_embeddings);
    cJSON_AddNumberToObject(j, "type_vocab_size", (double)s->type_vocab_size);
    cJSON_AddNumberToObject(j, "layer_norm_eps", (double)s->layer_norm_eps);
    cJSON_AddNumberToObject(j, "pad_token_id", 0);
    return j;
}

/* The vocab text: the caller's file copied, or a synthetic one. Lines are
 * counted and must not exceed vocab_size. */
static int vocab_text(const hearth_bert_demo_shape *s, char **out, size_t *len, hearth_err *err)
{
    if (s->vocab_path) {
        int rc = hearth_file_read(s->vocab_path, HEARTH_VOCAB_TXT_MAX_BYTES, out, len, err);
        if (rc)
            return rc;
        size_t lines = 0;
        for (size_t i = 0; i < *len; i++)
            lines += (*out)[i] == '\n';
        lines += *len && (*out)[*len - 1] != '\n';
        if ((int64_t)lines > s->vocab_size) {
            free(*out);
            *out = NULL;
            return hearth_err_set(err, HEARTH_EINVAL, "%s: %zu tokens > vocab_size %lld", s->vocab_path, lines,
                                  (long long)s->vocab_size);
        }
        return HEARTH_OK;
    }
    static const char *const words[] = {"the", "a", "of", "and", "to", "is", "in", "it", "hello", "world",
                                        "cat", "dog", "sat", "on", "mat", "##s", "##ing", "##ed", "un", "##able"};
    size_t cap = (size_t)s->vocab_size * 16 + 64, o = 0;
    char *t = malloc(cap);
    if (!t)
        return hearth_err_set(err, HEARTH_ENOMEM, "synthetic vocab: out of memory");
    int64_t n = 0;
    o += (size_t)snprintf(t, cap, "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n");
    n = 5;
    for (int pass = 0; pass < 2; pass++)
        for (int c = 33; c < 127 && n < s->vocab_size; c++, n++)
            o += (size_t)snprintf(t + o, cap - o, "%s%c\n", pass ? "##" : "", c);
    for (size_t w = 0; w < sizeof words / sizeof words[0] && n < s->vocab_size; w++, n++)
        o += (size_t)snprintf(t + o, cap - o, "%s\n", words[w]);
    for (int64_t u = 0; n < s->vocab_size; u++, n++)
        o += (size_t)snprintf(t + o, cap - o, "[unused%lld]\n", (long long)u);
    *out = t;
    *len = o;
    return HEARTH_OK;
}

static cJSON *tokenizer_json(const char *vocab, size_t len)
{
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "version", "1.0");
    cJSON *norm = cJSON_AddObjectToObject(j, "normalizer");
    cJSON_AddStringToObject(norm, "type", "BertNormalizer");
    cJSON_AddBoolToObject(norm, "clean_text", 1);
    cJSON_AddBoolToObject(norm, "handle_chinese_chars", 1);
    cJSON_AddNullToObject(norm, "strip_accents");
    cJSON_AddBoolToObject(norm, "lowercase", 1);
    cJSON_AddStringToObject(cJSON_AddObjectToObject(j, "pre_tokenizer"), "type", "BertPreTokenizer");
    cJSON *model = cJSON_AddObjectToObject(j, "model");
    cJSON_AddStringToObject(model, "type", "WordPiece");
    cJSON_AddStringToObject(model, "unk_token", "[UNK]");
    cJSON_AddStringToObject(model, "continuing_subword_prefix", "##");
    cJSON_AddNumberToObject(model, "max_input_chars_per_word", 100);
    cJSON *v = cJSON_AddObjectToObject(model, "vocab");
    int id = 0;
    for (size_t pos = 0; pos < len; id++) {
        const char *nl = memchr(vocab + pos, '\n', len - pos);
        size_t n = nl ? (size_t)(nl - (vocab + pos)) : len - pos;
        char tok[HEARTH_VOCAB_TXT_MAX_TOKEN + 1];
        size_t k = n && vocab[pos + n - 1] == '\r' ? n - 1 : n;
        k = k > HEARTH_VOCAB_TXT_MAX_TOKEN ? HEARTH_VOCAB_TXT_MAX_TOKEN : k;
        memcpy(tok, vocab + pos, k);
        tok[k] = 0;
        cJSON_AddNumberToObject(v, tok, id);
        pos += n + (nl ? 1 : 0);
    }
    return j;
}

static int write_small_files(const char *dir, const hearth_bert_demo_shape *s, hearth_err *err)
{
    cJSON *mods = cJSON_CreateArray();
    const char *types[3] = {"sentence_transformers.models.Transformer", "sentence_transformers.models.Pooling",
                            "sentence_transformers.models.Normalize"};
    const char *paths[3] = {"", "1_Pooling", "2_Normalize"};
    for (int i = 0; i < (s->normalize ? 3 : 2); i++) {
        cJSON *m = cJSON_CreateObject();
        cJSON_AddNumberToObject(m, "idx", i);
        cJSON_AddStringToObject(m, "name", i == 0 ? "0" : paths[i]);
        cJSON_AddStringToObject(m, "path", paths[i]);
        cJSON_AddStringToObject(m, "type", types[i]);
        cJSON_AddItemToArray(mods, m);
    }
    int rc = write_json(dir, "modules.json", mods, err);
    cJSON *pool = cJSON_CreateObject();
    cJSON_AddNumberToObject(pool, "word_embedding_dimension", (double)s->hidden_size);
    cJSON_AddBoolToObject(pool, "pooling_mode_cls_token", s->pooling == HEARTH_POOL_CLS);
    cJSON_AddBoolToObject(pool, "pooling_mode_mean_tokens", s->pooling == HEARTH_POOL_MEAN);
    cJSON_AddBoolToObject(pool, "pooling_mode_max_tokens", 0);
    cJSON_AddBoolToObject(pool, "pooling_mode_mean_sqrt_len_tokens", 0);
    cJSON_AddBoolToObject(pool, "pooling_mode_lasttoken", s->pooling == HEARTH_POOL_LAST);
    char sub[PATH_CAP];
    snprintf(sub, sizeof sub, "%s/1_Pooling", dir);
    if (rc == HEARTH_OK)
        rc = hearth_mkdirs(sub, err);
    if (rc == HEARTH_OK)
        rc = write_json(dir, "1_Pooling/config.json", pool, err);
    else
        cJSON_Delete(pool);
    cJSON *sb = cJSON_CreateObject();
    cJSON_AddNumberToObject(sb, "max_seq_length", (double)(s->max_seq_len ? s->max_seq_len : s->max_position_embeddings));
    cJSON_AddBoolToObject(sb, "do_lower_case", 0);
    if (rc == HEARTH_OK)
        rc = write_json(dir, "sentence_bert_config.json", sb, err);
    else
        cJSON_Delete(sb);
    cJSON *tc = cJSON_CreateObject();
    cJSON_AddStringToObject(tc, "tokenizer_class", "BertTokenizer");
    cJSON_AddBoolToObject(tc, "do_lower_case", 1);
    cJSON_AddNullToObject(tc, "strip_accents");
    cJSON_AddBoolToObject(tc, "tokenize_chinese_chars", 1);
    cJSON_AddNumberToObject(tc, "model_max_length", (double)s->max_position_embeddings);
    if (rc == HEARTH_OK)
        rc = write_json(dir, "tokenizer_config.json", tc, err);
    else
        cJSON_Delete(tc);
    return rc;
}

#define MAX_DEMO_TENSORS 8192

typedef struct weights {
    hearth_st_writer w;
    float *buf[MAX_DEMO_TENSORS];
    int n;
    uint64_t seed;
    const char *prefix;
} weights;

/* kind: 'w' Linear weight (a = 1/sqrt(dim1)), 'b' bias, 'g' LayerNorm weight, 'e' embedding */
static int add(weights *ws, const char *name, char kind, int64_t d0, int64_t d1, int64_t hidden, hearth_err *err)
{
    if (ws->n == MAX_DEMO_TENSORS)
        return hearth_err_set(err, HEARTH_ELIMIT, "bert demo: more than %d tensors", MAX_DEMO_TENSORS);
    int64_t n = d0 * (d1 ? d1 : 1);
    float *p = malloc((size_t)n * sizeof *p);
    if (!p)
        return hearth_err_set(err, HEARTH_ENOMEM, "bert demo: out of memory for '%s'", name);
    ws->buf[ws->n++] = p;
    float a = kind == 'w' ? 1.0f / sqrtf((float)d1) : kind == 'e' ? 1.0f / sqrtf((float)hidden)
            : kind == 'g' ? 0.1f : 0.02f;
    fill(p, n, ws->seed, name, a, kind == 'g' ? 1.0f : 0.0f);
    char full[256];
    snprintf(full, sizeof full, "%s%s", ws->prefix, name);
    int64_t shape[2] = {d0, d1};
    return hearth_st_writer_add(&ws->w, full, HEARTH_F32, d1 ? 2 : 1, shape, p, err);
}

static int write_weights(const char *dir, const hearth_bert_demo_shape *s, uint64_t seed, hearth_err *err)
{
    weights *ws = calloc(1, sizeof *ws);
    if (!ws)
        return hearth_err_set(err, HEARTH_ENOMEM, "bert demo: out of memory");
    hearth_st_writer_init(&ws->w);
    ws->seed = seed;
    ws->prefix = s->reranker ? "bert." : s->tensor_prefix ? s->tensor_prefix : "";
    int64_t h = s->hidden_size, ff = s->intermediate_size;
    int rc;
    if ((rc = add(ws, "embeddings.word_embeddings.weight", 'e', s->vocab_size, h, h, err)) ||
        (rc = add(ws, "embeddings.position_embeddings.weight", 'e', s->max_position_embeddings, h, h, err)) ||
        (rc = add(ws, "embeddings.token_type_embeddings.weight", 'e', s->type_vocab_size, h, h, err)) ||
        (rc = add(ws, "embeddings.LayerNorm.weight", 'g', h, 0, h, err)) ||
        (rc = add(ws, "embeddings.LayerNorm.bias", 'b', h, 0, h, err)))
        goto done;
    for (int64_t l = 0; l < s->num_hidden_layers; l++) {
        static const struct {
            const char *name;
            int out, in; /* 0: hidden, 1: intermediate */
        } lin[] = {{"attention.self.query", 0, 0}, {"attention.self.key", 0, 0}, {"attention.self.value", 0, 0},
                   {"attention.output.dense", 0, 0}, {"intermediate.dense", 1, 0}, {"output.dense", 0, 1}};
        char name[160];
        for (size_t i = 0; i < sizeof lin / sizeof lin[0]; i++) {
            int64_t out = lin[i].out ? ff : h, in = lin[i].in ? ff : h; /* HF Linear: [out_features, in_features] */
            snprintf(name, sizeof name, "encoder.layer.%lld.%s.weight", (long long)l, lin[i].name);
            if ((rc = add(ws, name, 'w', out, in, h, err)))
                goto done;
            snprintf(name, sizeof name, "encoder.layer.%lld.%s.bias", (long long)l, lin[i].name);
            if ((rc = add(ws, name, 'b', out, 0, h, err)))
                goto done;
        }
        static const char *const norms[] = {"attention.output.LayerNorm", "output.LayerNorm"};
        for (int i = 0; i < 2; i++) {
            snprintf(name, sizeof name, "encoder.layer.%lld.%s.weight", (long long)l, norms[i]);
            if ((rc = add(ws, name, 'g', h, 0, h, err)))
                goto done;
            snprintf(name, sizeof name, "encoder.layer.%lld.%s.bias", (long long)l, norms[i]);
            if ((rc = add(ws, name, 'b', h, 0, h, err)))
                goto done;
        }
    }
    if (s->reranker) {
        /* BertForSequenceClassification: the pooler under "bert.", the classifier outside it */
        if ((rc = add(ws, "pooler.dense.weight", 'w', h, h, h, err)) || (rc = add(ws, "pooler.dense.bias", 'b', h, 0, h, err)))
            goto done;
        ws->prefix = "";
        if ((rc = add(ws, "classifier.weight", 'w', 1, h, h, err)) || (rc = add(ws, "classifier.bias", 'b', 1, 0, h, err)))
            goto done;
    }
    if ((rc = hearth_st_writer_add_meta(&ws->w, "format", "pt", err)))
        goto done;
    char path[PATH_CAP];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    rc = hearth_st_writer_write(&ws->w, path, err);
done:
    hearth_st_writer_deinit(&ws->w);
    for (int i = 0; i < ws->n; i++)
        free(ws->buf[i]);
    free(ws);
    return rc;
}

int hearth_bert_demo_write(const char *dir, const hearth_bert_demo_shape *s, uint64_t seed, hearth_err *err)
{
    if (s->vocab_size < 5)
        return hearth_err_set(err, HEARTH_EINVAL, "bert demo: vocab_size %lld < 5", (long long)s->vocab_size);
    if (s->num_hidden_layers > 1000)
        return hearth_err_set(err, HEARTH_EINVAL, "bert demo: %lld layers", (long long)s->num_hidden_layers);
    int mrc = hearth_mkdirs(dir, err);
    if (mrc)
        return mrc;
    /* check the shape as the loader will, on the very text we write */
    cJSON *cfg = config_json(s);
    char *text = cJSON_Print(cfg);
    cJSON_Delete(cfg);
    if (!text)
        return hearth_err_set(err, HEARTH_ENOMEM, "bert demo: out of memory");
    hearth_bert_config check;
    char path[PATH_CAP];
    snprintf(path, sizeof path, "%s/config.json", dir);
    int rc = hearth_bert_config_parse(&check, text, strlen(text), path, err);
    if (rc == HEARTH_OK)
        rc = write_text(dir, "config.json", text, strlen(text), err);
    free(text);
    if (rc)
        return rc;
    char *vocab = NULL;
    size_t vlen = 0;
    if ((rc = vocab_text(s, &vocab, &vlen, err)))
        return rc;
    rc = write_text(dir, "vocab.txt", vocab, vlen, err);
    if (rc == HEARTH_OK && s->tokenizer_json) {
        rc = write_json(dir, "tokenizer.json", tokenizer_json(vocab, vlen), err);
    } else if (rc == HEARTH_OK) {
        snprintf(path, sizeof path, "%s/tokenizer.json", dir); /* a stale one would take precedence */
        if (remove(path) != 0 && errno != ENOENT)
            rc = hearth_err_sys(err, errno, "%s: cannot remove", path);
    }
    free(vocab);
    if (rc == HEARTH_OK)
        rc = write_small_files(dir, s, err);
    if (rc == HEARTH_OK)
        rc = write_weights(dir, s, seed, err);
    return rc;
}
