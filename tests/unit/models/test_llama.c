/* Unit tests for the llama forward pass and KV cache (src/models/llama*.c,
 * engine/kv.c).
 *
 * Independent references: stories260K's greedy ids and position-0 logits
 * from GOLDEN.txt (made by a separate port of llama2.c). The rest compare the
 * forward with itself along paths that must agree (a prompt at once vs token
 * by token, slots together vs alone, a truncated or copied cache vs a
 * recomputation), and open errors on files made broken on purpose. Parity
 * with the PyTorch reference is tests/integration/test_llama_parity.py. */
#include "harness.h"
#include "stories_golden.h"

#include "engine/cpu/dev_cpu.h"
#include "engine/cpu/quant.h"
#include "engine/dev.h"
#include "models/gguf.h"
#include "models/gguf_write.h"
#include "models/llama.h"
#include "models/llama_demo.h"

#include <stdint.h>
#include <unistd.h>

static const char *stories(char *buf, size_t n)
{
    return hearth_test_shared_path(buf, n, "models/stories260K/stories260K.gguf");
}

static hearth_llama *open_stories(void)
{
    char p[1024];
    if (!stories(p, sizeof p))
        return NULL;
    hearth_llama *m = NULL;
    hearth_err e = {0};
    int rc = hearth_llama_open(&m, p, &e);
    CHECK_MSG(rc == 0, "%s", e.msg);
    return m;
}

static int argmax(const float *v, int64_t n)
{
    int best = 0;
    for (int64_t i = 1; i < n; i++)
        if (v[i] > v[best])
            best = (int)i;
    return best;
}

/* One token of one slot; logits of it into out. */
static int step(hearth_llama *m, hearth_kv *kv, hearth_pool *pool, int32_t tok, int32_t slot, float *out)
{
    hearth_llama_batch b = {1, &tok, &slot, NULL};
    hearth_err e = {0};
    int rc = hearth_llama_forward(m, kv, pool, &b, out, &e);
    CHECK_MSG(rc == 0, "%s", e.msg);
    return rc;
}

static void golden_stories260k(void)
{
    float want5[5];
    int want[60];
    if (hearth_test_read_golden(want5, want))
        return;
    hearth_llama *m = open_stories();
    if (!m)
        return;
    const hearth_llama_hparams *hp = hearth_llama_hparams_get(m);
    CHECK_EQ_INT(hp->n_vocab, 512);
    CHECK_EQ_INT(hp->n_layer, 5);
    CHECK_EQ_INT(hp->n_head_kv, 4);
    CHECK_EQ_INT(hp->rope_type, HEARTH_ROPE_NORM);
    hearth_pool *pool = hearth_pool_new(2);
    float *logits = malloc((size_t)hp->n_vocab * sizeof(float));
    /* an f32 cache (exact) and an f16 one (what the servers use): the golden
     * comes from llama.cpp, whose cache is f16 too */
    for (int f16 = 0; f16 < 2; f16++) {
        hearth_err e = {0};
        hearth_kv *kv = hearth_kv_new_typed(m, 1, 128, f16 ? HEARTH_F16 : HEARTH_F32, &e);
        CHECK_MSG(kv != NULL, "%s", e.msg);
        if (kv && step(m, kv, pool, 1, 0, logits) == 0) {
            /* f16 rounds V by up to 2^-11 relative; logits of ~10 move by
             * ~1e-3 (measured 6.3e-4): 2e-3 for f16, 1e-4 for f32 */
            double tol = f16 ? 2e-3 : 1e-4;
            for (int i = 0; i < 5; i++)
                CHECK_MSG(fabs(logits[i] - want5[i]) <= tol, "%s cache: logit %d = %g, want %g",
                          f16 ? "f16" : "f32", i, logits[i], want5[i]);
            int n_ok = 0;
            for (int t = 0; t < 60; t++) {
                int id = argmax(logits, hp->n_vocab);
                if (id != want[t]) {
                    CHECK_MSG(id == want[t], "%s cache: token %d: got %d, want %d", f16 ? "f16" : "f32", t, id,
                              want[t]);
                    break;
                }
                n_ok++;
                if (step(m, kv, pool, id, 0, logits))
                    break;
            }
            CHECK_EQ_INT(n_ok, 60);
            CHECK_EQ_INT(hearth_kv_len(kv, 0), 61);
        }
        hearth_kv_free(kv);
    }
    free(logits);
    hearth_pool_free(pool);
    hearth_llama_close(m);
}

/* ---- helpers for comparing runs ---- */

/* max |a - b| / max |b| over one row of n */
static double rel_row(const float *a, const float *b, int64_t n)
{
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        num = d > num ? d : num;
        den = fabs((double)b[i]) > den ? fabs((double)b[i]) : den;
    }
    return den > 0 ? num / den : num;
}

/* Runs ids[0..n) of one slot as one batch (want all logits) into out[n][n_vocab]. */
static int batch_all(hearth_llama *m, hearth_kv *kv, hearth_pool *pool, const int32_t *ids, int n, int32_t slot,
                     float *out)
{
    int32_t *slots = malloc((size_t)n * sizeof *slots);
    bool *want = malloc((size_t)n * sizeof *want);
    for (int i = 0; i < n; i++) {
        slots[i] = slot;
        want[i] = true;
    }
    hearth_llama_batch b = {n, ids, slots, want};
    hearth_err e = {0};
    int rc = hearth_llama_forward(m, kv, pool, &b, out, &e);
    CHECK_MSG(rc == 0, "%s", e.msg);
    free(slots);
    free(want);
    return rc;
}

/* Token ids for tests: a fixed pseudo-random walk over the vocabulary. */
static void some_ids(int32_t *ids, int n, int64_t n_vocab, uint32_t salt)
{
    uint32_t x = 2463534242u ^ salt;
    for (int i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        ids[i] = (int32_t)(x % (uint32_t)n_vocab);
    }
    ids[0] = 1;
}

/* A tiny random-weight model of arch and type in a temp file (NULL on failure). */
static hearth_llama *open_demo(const char *arch, hearth_dtype t, char *path, size_t n)
{
    char voc[1024];
    if (!stories(voc, sizeof voc))
        return NULL;
    hearth_llama_demo d;
    hearth_llama_demo_tiny(&d, arch);
    d.vocab_path = voc;
    d.wtype = t;
    snprintf(path, n, "/tmp/hearth-test-llama-%d-%s.gguf", (int)getpid(), arch);
    hearth_err e = {0};
    hearth_llama *m = NULL;
    int rc = hearth_llama_demo_write(&d, path, &e);
    if (!rc)
        rc = hearth_llama_open(&m, path, &e);
    CHECK_MSG(rc == 0, "%s", e.msg);
    unlink(path);
    return m;
}

/* (2) a prompt in one batch == the same tokens one forward each. n = 600
 * crosses the forward's 512-token chunk. */
static void prefill_equals_one_by_one_model(hearth_llama *m, int n, const char *what)
{
    int64_t nv = hearth_llama_hparams_get(m)->n_vocab;
    hearth_pool *pool = hearth_pool_new(2);
    hearth_err e = {0};
    hearth_kv *a = hearth_kv_new(m, 1, n, &e), *b = hearth_kv_new(m, 1, n, &e);
    int32_t *ids = malloc((size_t)n * sizeof *ids);
    float *la = malloc((size_t)n * (size_t)nv * sizeof(float)), *lb = malloc((size_t)nv * sizeof(float));
    some_ids(ids, n, nv, 7);
    if (a && b && batch_all(m, a, pool, ids, n, 0, la) == 0) {
        double worst = 0;
        for (int i = 0; i < n; i++) {
            if (step(m, b, pool, ids[i], 0, lb))
                break;
            double r = rel_row(la + (size_t)i * (size_t)nv, lb, nv);
            worst = r > worst ? r : worst;
        }
        CHECK_MSG(worst <= 1e-5, "%s: prefill vs one by one: relative error %g", what, worst);
        CHECK_EQ_INT(hearth_kv_len(a, 0), n);
        CHECK_EQ_INT(hearth_kv_len(b, 0), n);
    }
    free(ids);
    free(la);
    free(lb);
    hearth_kv_free(a);
    hearth_kv_free(b);
    hearth_pool_free(pool);
}

static void prefill_equals_one_by_one(void)
{
    hearth_llama *m = open_stories();
    if (m)
        prefill_equals_one_by_one_model(m, 600, "stories260K");
    hearth_llama_close(m);
    char p[256];
    m = open_demo("qwen3", HEARTH_F32, p, sizeof p);
    if (m)
        prefill_equals_one_by_one_model(m, 40, "qwen3 demo");
    hearth_llama_close(m);
}

/* (3) slots in one batch == each slot alone: two decode streams together,
 * and a decode step batched with another slot's prompt. */
static void slots_together_model(hearth_llama *m, const char *what)
{
    int64_t nv = hearth_llama_hparams_get(m)->n_vocab;
    hearth_pool *pool = hearth_pool_new(2);
    hearth_err e = {0};
    hearth_kv *both = hearth_kv_new(m, 2, 64, &e), *alone = hearth_kv_new(m, 2, 64, &e);
    int32_t pa[7], pb[3], dec[2][6];
    some_ids(pa, 7, nv, 1);
    some_ids(pb, 3, nv, 2);
    some_ids(dec[0], 6, nv, 3);
    some_ids(dec[1], 6, nv, 4);
    float *lt = malloc(8 * (size_t)nv * sizeof(float)), *l1 = malloc(8 * (size_t)nv * sizeof(float));
    if (!both || !alone)
        goto done;
    /* slot 0's prompt alone in both caches */
    if (batch_all(m, both, pool, pa, 7, 0, lt) || batch_all(m, alone, pool, pa, 7, 0, l1))
        goto done;
    /* one batch: a decode token of slot 0 and slot 1's whole prompt */
    int32_t mt[4] = {dec[0][0], pb[0], pb[1], pb[2]}, ms[4] = {0, 1, 1, 1};
    bool mw[4] = {true, false, true, true};
    hearth_llama_batch mb = {4, mt, ms, mw};
    CHECK_EQ_INT(hearth_llama_forward(m, both, pool, &mb, lt, &e), 0);
    CHECK(step(m, alone, pool, dec[0][0], 0, l1) == 0);
    CHECK(batch_all(m, alone, pool, pb, 3, 1, l1 + (size_t)nv) == 0);
    double worst = rel_row(lt, l1, nv);
    for (int r = 1; r < 3; r++) {
        double x = rel_row(lt + (size_t)r * (size_t)nv, l1 + (size_t)(r + 1) * (size_t)nv, nv);
        worst = x > worst ? x : worst;
    }
    /* then decode steps of both slots together vs each alone */
    for (int t = 1; t < 6; t++) {
        int32_t tk[2] = {dec[0][t], dec[1][t]}, sl[2] = {1, 0}; /* order in the batch is free */
        tk[0] = dec[1][t];
        tk[1] = dec[0][t];
        hearth_llama_batch b = {2, tk, sl, (const bool[]){true, true}};
        CHECK_EQ_INT(hearth_llama_forward(m, both, pool, &b, lt, &e), 0);
        step(m, alone, pool, dec[0][t], 0, l1);
        step(m, alone, pool, dec[1][t], 1, l1 + (size_t)nv);
        double x0 = rel_row(lt + (size_t)nv, l1, nv), x1 = rel_row(lt, l1 + (size_t)nv, nv);
        worst = x0 > worst ? x0 : worst;
        worst = x1 > worst ? x1 : worst;
    }
    CHECK_MSG(worst <= 1e-6, "%s: batched slots vs alone: relative error %g", what, worst);
    CHECK_EQ_INT(hearth_kv_len(both, 0), 13);
    CHECK_EQ_INT(hearth_kv_len(both, 1), 8);
done:
    free(lt);
    free(l1);
    hearth_kv_free(both);
    hearth_kv_free(alone);
    hearth_pool_free(pool);
}

static void slots_together_equal_alone(void)
{
    hearth_llama *m = open_stories();
    if (m)
        slots_together_model(m, "stories260K");
    hearth_llama_close(m);
    char p[256];
    m = open_demo("qwen2", HEARTH_Q4_K, p, sizeof p);
    if (m)
        slots_together_model(m, "qwen2 q4_k demo");
    hearth_llama_close(m);
}

/* (4) a batch that would pass n_ctx, or names a bad id or slot, is refused
 * and the cache is as before: the next token's logits equal a clean run. */
static void overflow_refused_cache_unchanged(void)
{
    hearth_llama *m = open_stories();
    if (!m)
        return;
    int64_t nv = hearth_llama_hparams_get(m)->n_vocab;
    hearth_err e = {0};
    hearth_kv *kv = hearth_kv_new(m, 2, 8, &e), *ref = hearth_kv_new(m, 1, 8, &e);
    int32_t ids[8];
    some_ids(ids, 8, nv, 9);
    float *l = malloc(8 * (size_t)nv * sizeof(float)), *lr = malloc(8 * (size_t)nv * sizeof(float));
    if (kv && ref && batch_all(m, kv, NULL, ids, 6, 0, l) == 0) {
        int32_t more[3] = {5, 6, 7}, sl[3] = {0, 0, 0};
        hearth_llama_batch b = {3, more, sl, NULL};
        CHECK_EQ_INT(hearth_llama_forward(m, kv, NULL, &b, l, &e), HEARTH_ELIMIT);
        CHECK_MSG(strstr(e.msg, "6 positions") && strstr(e.msg, "3 more") && strstr(e.msg, "n_ctx 8"), "%s", e.msg);
        /* a batch spread over two slots where only one overflows: nothing runs */
        int32_t more4[4] = {5, 6, 7, 8}, sl4[4] = {1, 0, 0, 0};
        hearth_llama_batch b4 = {4, more4, sl4, NULL};
        CHECK_EQ_INT(hearth_llama_forward(m, kv, NULL, &b4, l, &e), HEARTH_ELIMIT);
        CHECK_EQ_INT(hearth_kv_len(kv, 1), 0);
        int32_t bad[2] = {1, (int32_t)nv}, sl1[2] = {0, 0};
        hearth_llama_batch bb = {2, bad, sl1, NULL};
        CHECK_EQ_INT(hearth_llama_forward(m, kv, NULL, &bb, l, &e), HEARTH_EINVAL);
        CHECK(strstr(e.msg, "out of range") != NULL);
        int32_t good[1] = {1}, badslot[1] = {2};
        hearth_llama_batch bs = {1, good, badslot, NULL};
        CHECK_EQ_INT(hearth_llama_forward(m, kv, NULL, &bs, l, &e), HEARTH_EINVAL);
        CHECK_EQ_INT(hearth_kv_len(kv, 0), 6);
        /* runs of steps the forward cannot take: nothing runs */
        int32_t two[2] = {1, 2}, same[2] = {0, 0}, drawn[32];
        hearth_llama_batch rb = {.n = 1, .tokens = good, .slot = sl1, .argmax = drawn, .steps = 17};
        CHECK_EQ_INT(hearth_llama_forward(m, kv, NULL, &rb, NULL, &e), HEARTH_EINVAL);
        CHECK_MSG(strstr(e.msg, "17 steps") && strstr(e.msg, "1 to 16"), "%s", e.msg);
        rb.steps = 2, rb.argmax = NULL;
        CHECK_EQ_INT(hearth_llama_forward(m, kv, NULL, &rb, l, &e), HEARTH_EINVAL);
        CHECK_MSG(strstr(e.msg, "needs greedy draws"), "%s", e.msg);
        hearth_llama_batch rs = {.n = 2, .tokens = two, .slot = same, .argmax = drawn, .steps = 2};
        CHECK_EQ_INT(hearth_llama_forward(m, kv, NULL, &rs, NULL, &e), HEARTH_EINVAL);
        CHECK_MSG(strstr(e.msg, "both slot 0"), "%s", e.msg);
        int32_t other[2] = {0, 1};
        rs.slot = other, rs.want_logits = (const bool[]){true, false};
        CHECK_EQ_INT(hearth_llama_forward(m, kv, NULL, &rs, NULL, &e), HEARTH_EINVAL);
        CHECK_MSG(strstr(e.msg, "row 1 wants no draw"), "%s", e.msg);
        rs.want_logits = NULL, rs.steps = 3; /* slot 0 holds 6 of 8: 3 more pass n_ctx */
        CHECK_EQ_INT(hearth_llama_forward(m, kv, NULL, &rs, NULL, &e), HEARTH_ELIMIT);
        CHECK_MSG(strstr(e.msg, "6 positions") && strstr(e.msg, "3 more"), "%s", e.msg);
        CHECK_EQ_INT(hearth_kv_len(kv, 0), 6);
        CHECK_EQ_INT(hearth_kv_len(kv, 1), 0);
        /* exactly filling the context is allowed; the logits match a clean run */
        CHECK(batch_all(m, kv, NULL, ids + 6, 2, 0, l) == 0);
        CHECK(batch_all(m, ref, NULL, ids, 8, 0, lr) == 0);
        CHECK(rel_row(l + (size_t)nv, lr + 7 * (size_t)nv, nv) <= 1e-5);
        CHECK_EQ_INT(hearth_kv_len(kv, 0), 8);
        CHECK_EQ_INT(hearth_llama_forward(m, kv, NULL, &bs, l, &e), HEARTH_EINVAL);
        bs.slot = sl1;
        CHECK_EQ_INT(hearth_llama_forward(m, kv, NULL, &bs, l, &e), HEARTH_ELIMIT);
        CHECK_MSG(strstr(e.msg, "8 positions") && strstr(e.msg, "1 more") && strstr(e.msg, "n_ctx 8"), "%s", e.msg);
    }
    free(l);
    free(lr);
    hearth_kv_free(kv);
    hearth_kv_free(ref);
    hearth_llama_close(m);
}

/* (5) truncate and copy_prefix, then continue == a recomputation. */
static void truncate_and_copy_prefix(void)
{
    hearth_llama *m = open_stories();
    if (!m)
        return;
    int64_t nv = hearth_llama_hparams_get(m)->n_vocab;
    hearth_err e = {0};
    hearth_pool *pool = hearth_pool_new(2);
    hearth_kv *kv = hearth_kv_new(m, 3, 32, &e), *ref = hearth_kv_new(m, 1, 32, &e);
    int32_t ids[12], alt[12];
    some_ids(ids, 12, nv, 11);
    some_ids(alt, 12, nv, 12);
    for (int i = 0; i < 5; i++)
        alt[i] = ids[i];
    float *l = malloc(12 * (size_t)nv * sizeof(float)), *lr = malloc(12 * (size_t)nv * sizeof(float));
    if (!kv || !ref || batch_all(m, kv, pool, ids, 10, 0, l))
        goto done;
    CHECK_EQ_INT(hearth_kv_slots(kv), 3);
    CHECK_EQ_INT(hearth_kv_ctx(kv), 32);
    CHECK(hearth_kv_bytes(kv) == 3ull * 32 * 5 * 32 * 4 * 2); /* slots, ctx, layers, kv dim, f32, K+V */
    /* rollback: keep 5, continue with alt[5..12) */
    hearth_kv_truncate(kv, 0, 5);
    CHECK_EQ_INT(hearth_kv_len(kv, 0), 5);
    hearth_kv_truncate(kv, 0, 9); /* growing is not truncating: ignored */
    CHECK_EQ_INT(hearth_kv_len(kv, 0), 5);
    CHECK(batch_all(m, kv, pool, alt + 5, 7, 0, l) == 0);
    CHECK(batch_all(m, ref, pool, alt, 12, 0, lr) == 0);
    double worst = 0;
    for (int i = 0; i < 7; i++) {
        double x = rel_row(l + (size_t)i * (size_t)nv, lr + (size_t)(i + 5) * (size_t)nv, nv);
        worst = x > worst ? x : worst;
    }
    /* prefix copy: slot 2 gets slot 0's first 8 (alt[0..8)), then continues
     * with alt[8..12); slot 0 itself is untouched by continuing slot 2 */
    hearth_kv_copy_prefix(kv, 0, 2, 8);
    CHECK_EQ_INT(hearth_kv_len(kv, 2), 8);
    CHECK(batch_all(m, kv, pool, alt + 8, 4, 2, l) == 0);
    for (int i = 0; i < 4; i++) {
        double x = rel_row(l + (size_t)i * (size_t)nv, lr + (size_t)(i + 8) * (size_t)nv, nv);
        worst = x > worst ? x : worst;
    }
    CHECK_EQ_INT(hearth_kv_len(kv, 0), 12);
    /* copying more than the source holds copies what it holds */
    hearth_kv_copy_prefix(kv, 1, 2, 5);
    CHECK_EQ_INT(hearth_kv_len(kv, 2), 0);
    CHECK_MSG(worst <= 1e-5, "continue after truncate/copy vs recompute: relative error %g", worst);
done:
    free(l);
    free(lr);
    hearth_kv_free(kv);
    hearth_kv_free(ref);
    hearth_pool_free(pool);
    hearth_llama_close(m);
}

/* ---- (6) open errors, on copies of stories260K.gguf broken one way each ---- */

typedef struct breakage {
    const char *drop;       /* tensor left out */
    const char *transpose;  /* tensor written with its two dims swapped */
    const char *arch;       /* general.architecture replaced */
} breakage;

static int copy_kv(hearth_gguf_writer *w, const hearth_gguf_kv *kv, const breakage *br, char ***strs, size_t *n_strs)
{
    if (br->arch && !strcmp(kv->key, "general.architecture"))
        return hearth_gguf_writer_add_str(w, kv->key, br->arch);
    if (kv->type == HEARTH_GGUF_STRING) {
        char *s = strndup((const char *)kv->data, (size_t)kv->str_len);
        (*strs)[(*n_strs)++] = s;
        return hearth_gguf_writer_add_str(w, kv->key, s);
    }
    if (kv->type != HEARTH_GGUF_ARRAY)
        return hearth_gguf_writer_add_scalar(w, kv->key, kv->type, kv->data);
    int rc = 0;
    if (kv->arr_type == HEARTH_GGUF_STRING) {
        char **ss = calloc((size_t)kv->arr_n, sizeof *ss);
        for (uint64_t j = 0; j < kv->arr_n; j++) {
            const char *s;
            size_t n;
            hearth_gguf_arr_str(kv, j, &s, &n);
            ss[j] = strndup(s, n);
        }
        rc = hearth_gguf_writer_add_arr_str(w, kv->key, (const char *const *)ss, (size_t)kv->arr_n);
        for (uint64_t j = 0; j < kv->arr_n; j++)
            free(ss[j]);
        free(ss);
    } else if (kv->arr_type == HEARTH_GGUF_F32) {
        float *v = calloc((size_t)kv->arr_n, sizeof *v);
        for (uint64_t j = 0; j < kv->arr_n; j++)
            hearth_gguf_arr_f32(kv, j, &v[j]);
        rc = hearth_gguf_writer_add_arr_f32(w, kv->key, v, (size_t)kv->arr_n);
        free(v);
    } else {
        int32_t *v = calloc((size_t)kv->arr_n, sizeof *v);
        for (uint64_t j = 0; j < kv->arr_n; j++)
            hearth_gguf_arr_i32(kv, j, &v[j]);
        rc = hearth_gguf_writer_add_arr_i32(w, kv->key, v, (size_t)kv->arr_n);
        free(v);
    }
    return rc;
}

/* Opens a broken copy of stories260K; returns the open's status, message in e. */
static int open_broken(const breakage *br, char *path, size_t pn, hearth_err *e)
{
    char src[1024];
    if (!stories(src, sizeof src))
        return 0;
    hearth_gguf g = {0};
    if (hearth_gguf_open(&g, src, e))
        return 0;
    hearth_gguf_writer *w = hearth_gguf_writer_new();
    char **strs = calloc((size_t)g.n_kv, sizeof *strs);
    size_t n_strs = 0;
    for (uint64_t i = 0; i < g.n_kv; i++)
        copy_kv(w, &g.kv[i], br, &strs, &n_strs);
    for (uint64_t i = 0; i < g.n_tensors; i++) {
        const hearth_gguf_tensor *t = &g.tensors[i];
        if (br->drop && !strcmp(t->name, br->drop))
            continue;
        int64_t ne[4] = {t->ne[0], t->ne[1], t->ne[2], t->ne[3]};
        if (br->transpose && !strcmp(t->name, br->transpose)) {
            ne[0] = t->ne[1];
            ne[1] = t->ne[0];
        }
        hearth_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, ne, t->data, t->nbytes);
    }
    snprintf(path, pn, "/tmp/hearth-test-broken-%d.gguf", (int)getpid());
    int wrc = hearth_gguf_writer_write(w, path, 0, e);
    CHECK_MSG(wrc == 0, "%s", e->msg);
    hearth_gguf_writer_free(w);
    for (size_t i = 0; i < n_strs; i++)
        free(strs[i]);
    free(strs);
    hearth_gguf_close(&g);
    hearth_llama *m = NULL;
    int rc = hearth_llama_open(&m, path, e);
    hearth_llama_close(m);
    unlink(path);
    return rc;
}

/* stories260K's 60 golden ids drawn from kv's slot 0 (empty): one pass
 * from BOS, then runs of 7 steps (the last shorter), each fed the last
 * draw; after_run (NULL: none) sees each run's length after it ran.
 * Returns how many ids matched in order (60: all), checks each run. */
static int golden_in_runs(hearth_llama *m, hearth_kv *kv, const int *want, void (*after_run)(int run, int steps))
{
    hearth_err e = {0};
    int32_t tok = 1, slot = 0, ids[HEARTH_LLAMA_STEPS_MAX];
    hearth_llama_batch b = {.n = 1, .tokens = &tok, .slot = &slot, .argmax = ids};
    CHECK_EQ_INT(hearth_llama_forward(m, kv, NULL, &b, NULL, &e), 0);
    int got = ids[0] == want[0], rc = 0;
    for (int run = 0; got > 0 && got < 60 && rc == 0; run++) {
        tok = ids[b.steps > 1 ? b.steps - 1 : 0]; /* the last draw */
        b.steps = 60 - got < 7 ? 60 - got : 7;
        if ((rc = hearth_llama_forward(m, kv, NULL, &b, NULL, &e)))
            break;
        if (after_run)
            after_run(run, b.steps);
        int j = 0;
        while (j < b.steps && ids[j] == want[got])
            j++, got++;
        if (j < b.steps) {
            CHECK_MSG(0, "token %d: got %d, want %d", got, ids[j], want[got]);
            break;
        }
    }
    CHECK_MSG(rc == 0, "%s", e.msg);
    return got;
}

/* (5) greedy draws and runs of steps (hearth_llama_batch's argmax and
 * steps; the CPU makes draws too): stories260K's golden ids drawn in runs
 * of 7, and on a random qwen3, three slots in one run of 9 steps equal to
 * 9 batched steps whose draws the test makes from the logits. */
static void runs_of_steps_draw_as_steps(void)
{
    int want[60];
    float want5[5];
    hearth_llama *m = open_stories();
    if (m && !hearth_test_read_golden(want5, want)) {
        CHECK(!hearth_llama_argmax_on_device(m)); /* the draws do not pay on the CPU: callers take logits */
        hearth_err e = {0};
        hearth_kv *kv = hearth_kv_new(m, 1, 64, &e);
        CHECK_MSG(kv != NULL, "%s", e.msg);
        if (kv) {
            CHECK_EQ_INT(golden_in_runs(m, kv, want, NULL), 60);
            CHECK_EQ_INT(hearth_kv_len(kv, 0), 60);
        }
        hearth_kv_free(kv);
    }
    hearth_llama_close(m);
    char p[256];
    if (!(m = open_demo("qwen3", HEARTH_F32, p, sizeof p)))
        return;
    int64_t nv = hearth_llama_hparams_get(m)->n_vocab;
    hearth_err e = {0};
    hearth_kv *run = hearth_kv_new(m, 3, 32, &e), *ref = hearth_kv_new(m, 3, 32, &e);
    float *l = malloc(5 * (size_t)nv * sizeof(float));
    int32_t pr[3][5], tok[3], sl[3] = {2, 0, 1}, ids[9 * 3];
    for (int s = 0; s < 3 && run && ref; s++) {
        some_ids(pr[s], 5 - s, nv, 20 + (uint32_t)s);
        CHECK(batch_all(m, run, NULL, pr[s], 5 - s, s, l) == 0);
        CHECK(batch_all(m, ref, NULL, pr[s], 5 - s, s, l) == 0);
        tok[(s + 1) % 3] = argmax(l + (size_t)(4 - s) * (size_t)nv, nv); /* slot s is row (s + 1) % 3 */
    }
    hearth_llama_batch b = {.n = 3, .tokens = tok, .slot = sl, .argmax = ids, .steps = 9};
    if (run && ref && hearth_llama_forward(m, run, NULL, &b, NULL, &e) == 0) {
        int32_t cur[3] = {tok[0], tok[1], tok[2]};
        int bad = 0;
        for (int j = 0; j < 9; j++) {
            hearth_llama_batch rb = {3, cur, sl, (const bool[]){true, true, true}};
            if (hearth_llama_forward(m, ref, NULL, &rb, l, &e))
                break;
            for (int r = 0; r < 3; r++) {
                cur[r] = argmax(l + (size_t)r * (size_t)nv, nv);
                bad += cur[r] != ids[j * 3 + r];
            }
        }
        CHECK_MSG(bad == 0, "%d of 27 draws of the run differ from the steps'", bad);
        for (int s = 0; s < 3; s++)
            CHECK_EQ_INT(hearth_kv_len(run, s), 5 - s + 9);
    } else {
        CHECK_MSG(0, "a run of 9 steps failed: %s", e.msg);
    }
    free(l);
    hearth_kv_free(run);
    hearth_kv_free(ref);
    hearth_llama_close(m);
}

/* (6) a run recorded whole (caps.graph_runs, llama_forward.c's run_ops):
 * the CPU under a device that says it records runs and records nothing
 * (graph_begin 0: the walk enqueues the ops, here run at once), so the
 * run's passes and draws come in run_ops' order with each pass fed by the
 * draw before: stories260K's golden ids in runs of 7, each run asking for
 * one record keyed by its length and one row, no pass asking for its own. */
static hearth_graph_key g_keys[32]; /* the runs' */
static int g_n_keys, g_pass_keys, g_ends;

static int rec_begin(hearth_stream *st, const hearth_graph_key *key)
{
    if (key->steps == 0) {
        g_pass_keys++;
        return 0;
    }
    if (g_n_keys < 32)
        g_keys[g_n_keys] = *key;
    g_n_keys++;
    return 0;
}

static int rec_end(hearth_stream *st, const hearth_graph_key *key, int status)
{
    g_ends++;
    return status;
}

/* After run `run` of `steps` passes: it asked for one record, of its length. */
static void one_record_a_run(int run, int steps)
{
    const hearth_graph_key *k = &g_keys[run < 32 ? run : 31];
    CHECK_MSG(g_n_keys == run + 1 && k->steps == steps && k->rows == 1,
              "run %d of %d steps: %d records asked for, the last %lld rows x %lld steps", run, steps, g_n_keys,
              (long long)k->rows, (long long)k->steps);
}

static void runs_recorded_whole(void)
{
    int want[60];
    float want5[5];
    char p[1024];
    if (!stories(p, sizeof p) || hearth_test_read_golden(want5, want))
        return;
    static hearth_dev dev;
    static hearth_dev_ops ops;
    dev = *hearth_dev_cpu();
    ops = *dev.ops;
    ops.graph_begin = rec_begin;
    ops.graph_end = rec_end;
    dev.ops = &ops;
    dev.caps.graph_runs = true;
    hearth_llama_open_opts lo = {.dev = &dev};
    hearth_llama *m = NULL;
    hearth_err e = {0};
    CHECK_MSG(hearth_llama_open_with(&m, p, &lo, &e) == 0, "%s", e.msg);
    hearth_kv *kv = m ? hearth_kv_new(m, 1, 64, &e) : NULL;
    if (!kv) {
        hearth_llama_close(m);
        return;
    }
    g_n_keys = g_pass_keys = g_ends = 0;
    CHECK_EQ_INT(golden_in_runs(m, kv, want, one_record_a_run), 60);
    CHECK_EQ_INT(g_pass_keys, 1); /* the first pass alone: no pass of a run asks for its own */
    CHECK_EQ_INT(g_ends, g_n_keys + g_pass_keys);
    CHECK_EQ_INT(hearth_kv_len(kv, 0), 60);
    hearth_kv_free(kv);
    hearth_llama_close(m);
}

static void open_errors_name_file_and_tensor(void)
{
    char p[256];
    hearth_err e = {0};
    breakage none = {0};
    CHECK_EQ_INT(open_broken(&none, p, sizeof p, &e), 0); /* the copy itself is fine */

    breakage drop = {.drop = "blk.3.ffn_up.weight"};
    CHECK_EQ_INT(open_broken(&drop, p, sizeof p, &e), HEARTH_EINVAL);
    CHECK_MSG(strstr(e.msg, p) && strstr(e.msg, "'blk.3.ffn_up.weight'") && strstr(e.msg, "missing"), "%s", e.msg);

    breakage tr = {.transpose = "blk.1.attn_k.weight"};
    CHECK_EQ_INT(open_broken(&tr, p, sizeof p, &e), HEARTH_EINVAL);
    CHECK_MSG(strstr(e.msg, p) && strstr(e.msg, "'blk.1.attn_k.weight'") && strstr(e.msg, "[32, 64") &&
                  strstr(e.msg, "want [64, 32]"),
              "%s", e.msg);

    breakage arch = {.arch = "gpt2"};
    CHECK_EQ_INT(open_broken(&arch, p, sizeof p, &e), HEARTH_EUNSUPPORTED);
    CHECK_MSG(strstr(e.msg, p) && strstr(e.msg, "'gpt2'"), "%s", e.msg);

    breakage norm = {.drop = "output_norm.weight"};
    CHECK_EQ_INT(open_broken(&norm, p, sizeof p, &e), HEARTH_EINVAL);
    CHECK_MSG(strstr(e.msg, p) && strstr(e.msg, "'output_norm.weight'"), "%s", e.msg);

    hearth_llama *m = NULL;
    CHECK(hearth_llama_open(&m, "/nonexistent/model.gguf", &e) != 0);
    CHECK(m == NULL && strstr(e.msg, "/nonexistent/model.gguf") != NULL);
}

/* A head the device cannot run is refused at open, naming the key, the size
 * and the device's limit (engine/dev.h's caps.head_dim_max, asked at load). */
static void device_limits_refused_at_open(void)
{
    char voc[1024], path[256];
    if (!stories(voc, sizeof voc))
        return;
    int64_t max = hearth_dev_default()->caps.head_dim_max;
    hearth_llama_demo d;
    hearth_llama_demo_tiny(&d, "llama");
    d.vocab_path = voc;
    d.n_embd = 32;
    d.n_head = d.n_head_kv = 1;
    d.head_dim = max + 8;
    d.n_layer = 1;
    d.n_ff = 32;
    snprintf(path, sizeof path, "/tmp/hearth-test-llama-%d-bighead.gguf", (int)getpid());
    hearth_err e = {0};
    CHECK_EQ_INT(hearth_llama_demo_write(&d, path, &e), 0);
    hearth_llama *m = NULL;
    char want[64], lim[64];
    snprintf(want, sizeof want, "key_length %lld", (long long)(max + 8));
    snprintf(lim, sizeof lim, "> %lld", (long long)max);
    CHECK_EQ_INT(hearth_llama_open(&m, path, &e), HEARTH_EUNSUPPORTED);
    CHECK_MSG(m == NULL && strstr(e.msg, path) && strstr(e.msg, want) && strstr(e.msg, lim) &&
                  strstr(e.msg, hearth_dev_default()->caps.name),
              "%s", e.msg);
    unlink(path);
}

int main(void)
{
    RUN(golden_stories260k);
    RUN(prefill_equals_one_by_one);
    RUN(slots_together_equal_alone);
    RUN(overflow_refused_cache_unchanged);
    RUN(truncate_and_copy_prefix);
    RUN(runs_of_steps_draw_as_steps);
    RUN(runs_recorded_whole);
    RUN(open_errors_name_file_and_tensor);
    RUN(device_limits_refused_at_open);
    TEST_EXIT();
}
