/* test_llama_demo_tool: the random-weight model writer's self-checks, and
 * (given arguments) a small tool for the parity test and for timing.
 *
 *   test_llama_demo_tool                       self-checks (run by the suite)
 *   test_llama_demo_tool write OUT ARCH TYPE VOCAB [tied] [bench|1b] [seed=N]
 *       bench: the ~110M shape; 1b: the 1.04B llama shape of issue 21's GPU
 *       numbers (16 layers, 2048 wide, 32 heads of 64, 8 KV heads, FFN 8192)
 *   test_llama_demo_tool logits MODEL IDS OUT [onebyone] [norepack]
 *       IDS is "1,2,3"; writes float32 logits [n_ids][n_vocab] (raw, row-major)
 *       for every position: the ids as one batch, or one forward per token;
 *       norepack opens with F16 weights in place (hearth_llama_open_opts)
 *   test_llama_demo_tool bench MODEL [N_PROMPT] [N_GEN] [THREADS]
 *       prints prompt (one batch) and decode (one slot) tokens per second
 *
 * Exit status 0 on success; with arguments, errors go to stderr with status 1. */
#include "harness.h"

#include "base/clock.h"
#include "models/llama.h"
#include "models/llama_demo.h"

#include <stdint.h>
#include <unistd.h>

static int usage(void)
{
    fprintf(stderr, "usage: test_llama_demo_tool [write OUT ARCH TYPE VOCAB [tied] [bench|1b] [seed=N] | "
                    "logits MODEL IDS OUT [onebyone] [norepack] | bench MODEL [N_PROMPT] [N_GEN] [THREADS]]\n");
    return 1;
}

static int cmd_write(int argc, char **argv)
{
    if (argc < 6)
        return usage();
    hearth_llama_demo d;
    bool bench = false, tied = false, b1 = false;
    uint64_t seed = 1;
    for (int i = 6; i < argc; i++) {
        if (!strcmp(argv[i], "bench"))
            bench = true;
        else if (!strcmp(argv[i], "1b"))
            b1 = true;
        else if (!strcmp(argv[i], "tied"))
            tied = true;
        else if (!strncmp(argv[i], "seed=", 5))
            seed = strtoull(argv[i] + 5, NULL, 10);
        else
            return usage();
    }
    if (bench)
        hearth_llama_demo_bench(&d, argv[3]);
    else
        hearth_llama_demo_tiny(&d, argv[3]);
    if (b1) {
        d.n_layer = 16, d.n_embd = 2048, d.n_head = 32, d.n_head_kv = 8, d.head_dim = 64, d.n_ff = 8192;
        d.n_ctx = 4096;
    }
    int t = hearth_dtype_from_name(argv[4]);
    if (t < 0) {
        fprintf(stderr, "unknown type %s\n", argv[4]);
        return 1;
    }
    d.wtype = (hearth_dtype)t;
    d.tied = tied;
    d.seed = seed;
    d.vocab_path = argv[5];
    hearth_err e = {0};
    if (hearth_llama_demo_write(&d, argv[2], &e)) {
        fprintf(stderr, "%s\n", e.msg);
        return 1;
    }
    return 0;
}

static int parse_ids(const char *s, int32_t **out)
{
    int n = 1;
    for (const char *p = s; *p; p++)
        n += *p == ',';
    int32_t *ids = malloc((size_t)n * sizeof *ids);
    char *end;
    for (int i = 0; ids && i < n; i++) {
        ids[i] = (int32_t)strtol(s, &end, 10);
        s = *end == ',' ? end + 1 : end;
    }
    *out = ids;
    return ids ? n : -1;
}

static int cmd_logits(int argc, char **argv)
{
    if (argc < 5)
        return usage();
    bool one = false;
    hearth_llama_open_opts lo = {0};
    for (int i = 5; i < argc; i++) {
        if (!strcmp(argv[i], "onebyone"))
            one = true;
        else if (!strcmp(argv[i], "norepack"))
            lo.no_repack = true;
        else
            return usage();
    }
    hearth_llama *m = NULL;
    hearth_kv *kv = NULL;
    hearth_pool *pool = hearth_pool_new(2);
    int32_t *ids = NULL, *slots = NULL;
    bool *want = NULL;
    float *logits = NULL;
    hearth_err e = {0};
    int rc = 1, n = parse_ids(argv[3], &ids);
    FILE *f = NULL;
    if (n < 1 || hearth_llama_open_with(&m, argv[2], &lo, &e) || !(kv = hearth_kv_new(m, 1, n, &e)))
        goto done;
    int64_t nv = hearth_llama_hparams_get(m)->n_vocab;
    slots = calloc((size_t)n, sizeof *slots);
    want = malloc((size_t)n * sizeof *want);
    logits = malloc((size_t)n * (size_t)nv * sizeof *logits);
    if (!slots || !want || !logits)
        goto done;
    for (int i = 0; i < n; i++)
        want[i] = true;
    for (int i = 0; i < n; i += one ? 1 : n) {
        hearth_llama_batch b = {one ? 1 : n, ids + i, slots, want};
        if (hearth_llama_forward(m, kv, pool, &b, logits + (size_t)i * (size_t)nv, &e))
            goto done;
    }
    f = fopen(argv[4], "wb");
    if (f && fwrite(logits, sizeof *logits, (size_t)n * (size_t)nv, f) == (size_t)n * (size_t)nv)
        rc = 0;
done:
    if (f && fclose(f))
        rc = 1;
    if (rc)
        fprintf(stderr, "logits: %s\n", e.msg[0] ? e.msg : "failed");
    free(ids);
    free(slots);
    free(want);
    free(logits);
    hearth_kv_free(kv);
    hearth_llama_close(m);
    hearth_pool_free(pool);
    return rc;
}

static double now_s(void)
{
    return 1e-9 * (double)hearth_now_ns();
}

static int cmd_bench(int argc, char **argv)
{
    if (argc < 3)
        return usage();
    int np = argc > 3 ? atoi(argv[3]) : 128, ng = argc > 4 ? atoi(argv[4]) : 64;
    int threads = argc > 5 ? atoi(argv[5]) : 0;
    if (np < 1 || ng < 1)
        return usage();
    hearth_llama *m = NULL;
    hearth_kv *kv = NULL;
    hearth_pool *pool = hearth_pool_new(threads);
    hearth_err e = {0};
    int rc = 1;
    int32_t *ids = malloc((size_t)np * sizeof *ids), *slots = calloc((size_t)np, sizeof *slots);
    float *logits = NULL;
    if (!ids || !slots || hearth_llama_open(&m, argv[2], &e) || !(kv = hearth_kv_new(m, 1, np + ng, &e)))
        goto done;
    const hearth_llama_hparams *hp = hearth_llama_hparams_get(m);
    logits = malloc((size_t)hp->n_vocab * sizeof *logits);
    if (!logits)
        goto done;
    for (int i = 0; i < np; i++)
        ids[i] = (int32_t)(1 + (i * 7919) % (hp->n_vocab - 1));
    hearth_llama_batch b = {np, ids, slots, NULL};
    double t0 = now_s();
    if (hearth_llama_forward(m, kv, pool, &b, logits, &e))
        goto done;
    double t1 = now_s();
    for (int i = 0; i < ng; i++) {
        int32_t tok = (int32_t)(1 + (i * 104729) % (hp->n_vocab - 1)), slot = 0;
        hearth_llama_batch d = {1, &tok, &slot, NULL};
        if (hearth_llama_forward(m, kv, pool, &d, logits, &e))
            goto done;
    }
    double t2 = now_s();
    double gb = (double)hearth_llama_weight_bytes(m) / 1e9;
    printf("%s %s %lld layers %lld hidden: prompt %d tok in one batch: %.1f tok/s; decode %d tok: %.1f tok/s "
           "(%.1f GB/s of weights), %d threads\n",
           hp->arch, hearth_dtype_get(hearth_llama_weight_type(m))->name, (long long)hp->n_layer,
           (long long)hp->n_embd, np, np / (t1 - t0), ng, ng / (t2 - t1), gb * ng / (t2 - t1),
           hearth_pool_size(pool));
    rc = 0;
done:
    if (rc)
        fprintf(stderr, "bench: %s\n", e.msg[0] ? e.msg : "failed");
    free(ids);
    free(slots);
    free(logits);
    hearth_kv_free(kv);
    hearth_llama_close(m);
    hearth_pool_free(pool);
    return rc;
}

/* ---- self-checks ---- */

static char tmpdir[256];

static const char *tmp_path(char *buf, size_t n, const char *name)
{
    snprintf(buf, n, "%s/%s", tmpdir, name);
    return buf;
}

static unsigned char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = sz > 0 ? malloc((size_t)sz) : NULL;
    *n = b && fread(b, 1, (size_t)sz, f) == (size_t)sz ? (size_t)sz : 0;
    fclose(f);
    return b;
}

static void deterministic_bytes(void)
{
    char voc[1024], a[512], b[512], c[512];
    if (!hearth_test_shared_path(voc, sizeof voc, "models/stories260K/stories260K.gguf"))
        return;
    hearth_llama_demo d;
    hearth_llama_demo_tiny(&d, "llama");
    d.vocab_path = voc;
    hearth_err e = {0};
    CHECK_EQ_INT(hearth_llama_demo_write(&d, tmp_path(a, sizeof a, "a.gguf"), &e), 0);
    CHECK_EQ_INT(hearth_llama_demo_write(&d, tmp_path(b, sizeof b, "b.gguf"), &e), 0);
    d.seed = 2;
    CHECK_EQ_INT(hearth_llama_demo_write(&d, tmp_path(c, sizeof c, "c.gguf"), &e), 0);
    size_t na = 0, nb = 0, nc = 0;
    unsigned char *ba = slurp(a, &na), *bb = slurp(b, &nb), *bc = slurp(c, &nc);
    CHECK(na > 0 && na == nb && nb == nc);
    CHECK(ba && bb && memcmp(ba, bb, na) == 0);
    CHECK(ba && bc && na == nc && memcmp(ba, bc, na) != 0); /* the seed matters */
    free(ba);
    free(bb);
    free(bc);
    unlink(a);
    unlink(b);
    unlink(c);
}

/* Every arch and type: the file opens with the hyperparameters asked for,
 * and a short forward gives finite logits. */
static void shapes_and_types(void)
{
    char voc[1024], p[512];
    if (!hearth_test_shared_path(voc, sizeof voc, "models/stories260K/stories260K.gguf"))
        return;
    const char *archs[] = {"llama", "qwen2", "qwen3"};
    const hearth_dtype types[] = {HEARTH_F32, HEARTH_F16, HEARTH_BF16, HEARTH_Q8_0,
                                  HEARTH_Q4_0, HEARTH_Q4_K, HEARTH_Q6_K};
    for (int a = 0; a < 3; a++) {
        for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
            hearth_llama_demo d;
            hearth_llama_demo_tiny(&d, archs[a]);
            d.vocab_path = voc;
            d.wtype = types[t];
            d.tied = a == 2;
            hearth_err e = {0};
            tmp_path(p, sizeof p, "m.gguf");
            int rc = hearth_llama_demo_write(&d, p, &e);
            CHECK_MSG(rc == 0, "%s", e.msg);
            hearth_llama *m = NULL;
            rc = rc ? rc : hearth_llama_open(&m, p, &e);
            CHECK_MSG(rc == 0, "%s %s: %s", archs[a], hearth_dtype_get(types[t])->name, e.msg);
            if (!m)
                continue;
            const hearth_llama_hparams *hp = hearth_llama_hparams_get(m);
            CHECK_EQ_STR(hp->arch, archs[a]);
            CHECK_EQ_INT(hp->n_vocab, 512);
            CHECK_EQ_INT(hp->n_embd, d.n_embd);
            CHECK_EQ_INT(hp->n_head, d.n_head);
            CHECK_EQ_INT(hp->n_head_kv, d.n_head_kv);
            CHECK_EQ_INT(hp->head_dim, d.head_dim);
            CHECK_EQ_INT(hp->n_ff, d.n_ff);
            CHECK_EQ_INT(hp->qkv_bias, a == 1);
            CHECK_EQ_INT(hp->qk_norm, a == 2);
            CHECK_EQ_INT(hp->tied_output, a == 2);
            CHECK_EQ_INT(hp->rope_type, a == 0 ? HEARTH_ROPE_NORM : HEARTH_ROPE_NEOX);
            CHECK_EQ_INT(hearth_llama_weight_type(m), types[t]);
            CHECK_EQ_INT(hearth_llama_vocab(m)->n_tokens, 512);
            hearth_kv *kv = hearth_kv_new(m, 1, 8, &e);
            int32_t ids[3] = {1, 42, 7}, slots[3] = {0, 0, 0};
            float logits[512];
            hearth_llama_batch b = {3, ids, slots, NULL};
            CHECK(kv && hearth_llama_forward(m, kv, NULL, &b, logits, &e) == 0);
            int finite = 1;
            for (int i = 0; i < 512; i++)
                finite &= isfinite(logits[i]) != 0;
            CHECK(finite);
            hearth_kv_free(kv);
            hearth_llama_close(m);
            unlink(p);
        }
    }
}

static void bad_requests(void)
{
    char voc[1024], p[512];
    if (!hearth_test_shared_path(voc, sizeof voc, "models/stories260K/stories260K.gguf"))
        return;
    hearth_llama_demo d;
    hearth_llama_demo_tiny(&d, "llama");
    d.vocab_path = voc;
    d.wtype = HEARTH_Q4_K;
    d.n_embd = 128; /* not a multiple of Q4_K's 256 */
    hearth_err e = {0};
    CHECK_EQ_INT(hearth_llama_demo_write(&d, tmp_path(p, sizeof p, "bad.gguf"), &e), HEARTH_EINVAL);
    CHECK(strstr(e.msg, "q4_k") || strstr(e.msg, "Q4_K"));
    hearth_llama_demo_tiny(&d, "gpt2");
    d.vocab_path = voc;
    CHECK_EQ_INT(hearth_llama_demo_write(&d, p, &e), HEARTH_EINVAL);
    hearth_llama_demo_tiny(&d, "llama");
    d.vocab_path = "/nonexistent/vocab.gguf";
    CHECK(hearth_llama_demo_write(&d, p, &e) != 0);
    CHECK(strstr(e.msg, "/nonexistent/vocab.gguf") != NULL);
}

int main(int argc, char **argv)
{
    if (argc > 1) {
        if (!strcmp(argv[1], "write"))
            return cmd_write(argc, argv);
        if (!strcmp(argv[1], "logits"))
            return cmd_logits(argc, argv);
        if (!strcmp(argv[1], "bench"))
            return cmd_bench(argc, argv);
        return usage();
    }
    snprintf(tmpdir, sizeof tmpdir, "/tmp/hearth-demo-XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    RUN(deterministic_bytes);
    RUN(shapes_and_types);
    RUN(bad_requests);
    rmdir(tmpdir);
    TEST_EXIT();
}
