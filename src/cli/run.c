/* run.c: `hearth run`: text generation from a GGUF model on the command line.
 *
 * Tokenizes the prompt (BOS as the vocabulary says unless --no-bos; special
 * tokens written in the prompt are parsed, as llama-cli does), then hands
 * the model to the engine's generation loop (engine/generate.h) through its
 * function table: forward = hearth_llama_forward on KV slot 0 with logits
 * of the last token only, detok = a streaming hearth_detok. Pieces are
 * written to stdout and flushed as they become final; the timings go to
 * stderr, so stdout holds exactly the generated text (the prompt is not
 * echoed; a final newline is added only on a terminal) and a script can
 * compare it byte for byte.
 *
 * --bench and --dump-logits share the model loading and live in
 * run_bench.c. Sampling flags are parsed here as strings because the shared
 * option table has no float kind; each value is still checked fully. */
#include "cli.h"
#include "opts.h"
#include "run.h"

#include "engine/generate.h"
#include "engine/sampler.h"
#include "models/llama.h"
#include "text/tokenizer.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Longest prompt accepted, in tokens, before the context check. */
#define PROMPT_MAX_TOKENS (1u << 24)

typedef struct llama_seq {
    hearth_llama *m;
    hearth_kv *kv;
    hearth_pool *pool;
    hearth_detok detok;
    int32_t *slots;          /* [n_batch] zeros: every token goes to slot 0 */
    int32_t n_batch;
} llama_seq;

static int seq_forward(void *ctx, const int32_t *tokens, int32_t n, float *logits, hearth_err *err)
{
    llama_seq *s = ctx;
    if (n > s->n_batch)
        return hearth_err_set(err, HEARTH_EINVAL, "run: a batch of %d tokens > n_batch %d", (int)n, (int)s->n_batch);
    hearth_llama_batch b = {.n = n, .tokens = tokens, .slot = s->slots, .want_logits = NULL};
    return hearth_llama_forward(s->m, s->kv, s->pool, &b, logits, err);
}

static int seq_detok(void *ctx, int32_t id, hearth_buf *out)
{
    llama_seq *s = ctx;
    return hearth_detok_push(&s->detok, id, out);
}

static int seq_detok_flush(void *ctx, hearth_buf *out)
{
    llama_seq *s = ctx;
    return hearth_detok_flush(&s->detok, out);
}

static int print_piece(void *user, const char *text, size_t n)
{
    (void)user;
    if (fwrite(text, 1, n, stdout) != n || fflush(stdout) != 0)
        return 1; /* stdout is gone (a closed pipe): stop generating */
    return 0;
}

static int parse_float(const char *flag, const char *v, float lo, float hi, float *out)
{
    if (!v)
        return 0;
    char *end = NULL;
    errno = 0;
    double x = strtod(v, &end);
    if (errno || end == v || *end || !isfinite(x) || x < lo || x > hi) {
        fprintf(stderr, "hearth run: %s: invalid value '%s' (expected a number in [%g, %g])\n", flag, v, lo, hi);
        return 2;
    }
    *out = (float)x;
    return 0;
}

static int parse_seed(const char *v, uint64_t *out)
{
    if (!v || !strcmp(v, "-1")) {
        *out = HEARTH_SAMPLER_SEED_RANDOM;
        return 0;
    }
    char *end = NULL;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (errno || end == v || *end || *v == '-' || x == HEARTH_SAMPLER_SEED_RANDOM) {
        fprintf(stderr, "hearth run: --seed: invalid value '%s' (expected -1 or a number)\n", v);
        return 2;
    }
    *out = x;
    return 0;
}

typedef struct sampling_flags {
    const char *temp, *top_k, *top_p, *min_p, *repeat_penalty, *repeat_last_n, *seed;
} sampling_flags;

static int sampling_params(const sampling_flags *f, hearth_sampler_params *p)
{
    hearth_sampler_params_default(p);
    float top_k = (float)p->top_k, last_n = (float)p->repeat_last_n;
    int rc = parse_float("--temp", f->temp, 0, 100, &p->temperature);
    if (!rc)
        rc = parse_float("--top-k", f->top_k, 0, 1e9f, &top_k);
    if (!rc)
        rc = parse_float("--top-p", f->top_p, 0, 1, &p->top_p);
    if (!rc)
        rc = parse_float("--min-p", f->min_p, 0, 1, &p->min_p);
    if (!rc)
        rc = parse_float("--repeat-penalty", f->repeat_penalty, 1e-3f, 100, &p->repeat_penalty);
    if (!rc)
        rc = parse_float("--repeat-last-n", f->repeat_last_n, 0, HEARTH_SAMPLER_MAX_LAST_N, &last_n);
    if (!rc)
        rc = parse_seed(f->seed, &p->seed);
    p->top_k = (int)top_k;
    p->repeat_last_n = (int)last_n;
    return rc;
}

static int generate(const run_opts *o, const hearth_gen_params *gp, const hearth_sampler_params *sp,
                    hearth_llama *m, hearth_pool *pool)
{
    const hearth_llama_hparams *hp = hearth_llama_hparams_get(m);
    const hearth_tokenizer *tok = hearth_llama_tokenizer(m);
    const hearth_vocab *voc = hearth_llama_vocab(m);
    hearth_err err = {0};
    hearth_ids ids;
    hearth_ids_init(&ids, PROMPT_MAX_TOKENS);
    llama_seq seq = {.m = m, .pool = pool, .n_batch = gp->n_batch};
    hearth_sampler *smp = NULL;
    int status = 1;
    const char *prompt = o->prompt ? o->prompt : "";
    if (hearth_tokenizer_encode(tok, prompt, strlen(prompt), !o->no_bos, true, &ids, &err)) {
        fprintf(stderr, "hearth run: tokenizing the prompt: %s\n", err.msg);
        goto done;
    }
    if (ids.n == 0) {
        fprintf(stderr, "hearth run: the prompt is empty and there is no BOS to start from (drop --no-bos or give -p)\n");
        status = 2;
        goto done;
    }
    int64_t n_ctx = o->ctx_size > 0 ? o->ctx_size : (hp->n_ctx_train < 4096 ? hp->n_ctx_train : 4096);
    seq.kv = hearth_kv_new_typed(m, 1, n_ctx, o->kv_type, &err);
    seq.slots = calloc((size_t)gp->n_batch, sizeof *seq.slots);
    smp = hearth_sampler_new(sp, (int32_t)hp->n_vocab, &err);
    if (!seq.kv || !seq.slots || !smp) {
        fprintf(stderr, "hearth run: %s\n", err.msg[0] ? err.msg : "out of memory");
        goto done;
    }
    /* With only BOS (or nothing) before it, the generated text starts the text:
     * SPM then drops the space its first word carries. */
    bool from_start = true;
    for (size_t i = 0; i < ids.n; i++)
        if (ids.v[i] != voc->bos)
            from_start = false;
    hearth_detok_init(&seq.detok, tok, from_start, false);
    hearth_gen_model gm = {.ctx = &seq, .n_vocab = (int32_t)hp->n_vocab, .n_ctx = n_ctx, .forward = seq_forward,
                           .detok = seq_detok, .detok_flush = seq_detok_flush};
    if (voc->eos >= 0)
        gm.end_ids[gm.n_end_ids++] = voc->eos;
    if (voc->eot >= 0 && voc->eot != voc->eos)
        gm.end_ids[gm.n_end_ids++] = voc->eot;
    hearth_gen_result res;
    if (hearth_generate(&gm, smp, ids.v, (int64_t)ids.n, gp, print_piece, NULL, &res, &err)) {
        fprintf(stderr, "\nhearth run: %s\n", err.msg);
        goto done;
    }
    if (isatty(STDOUT_FILENO))
        putchar('\n');
    fflush(stdout);
    fprintf(stderr, "\nprompt:    %6lld tokens %10.2f ms %10.2f tok/s\n", (long long)res.n_prompt, res.prompt_ms,
            res.prompt_ms > 0 ? (double)res.n_prompt * 1000.0 / res.prompt_ms : 0.0);
    fprintf(stderr, "generated: %6lld tokens %10.2f ms %10.2f tok/s\n", (long long)res.n_gen, res.gen_ms,
            res.gen_ms > 0 ? (double)res.n_gen * 1000.0 / res.gen_ms : 0.0);
    fprintf(stderr, "finish: %s (seed %llu, %d threads, context %lld)\n", res.finish == HEARTH_GEN_EOS ? "eos"
                                                                        : hearth_gen_finish_name(res.finish),
            (unsigned long long)hearth_sampler_seed(smp), hearth_pool_size(pool), (long long)n_ctx);
    status = 0;
done:
    hearth_sampler_free(smp);
    free(seq.slots);
    hearth_kv_free(seq.kv);
    hearth_ids_deinit(&ids);
    return status;
}

int hearth_cmd_run(int argc, char **argv)
{
    run_opts o = {.n_predict = RUN_UNSET, .reps = 5, .n_batch = 512};
    const char *cache_type = "f16";
    bool repack = true;
    sampling_flags sf = {0};
    opt_str_list stops = {0};
    const opt opts[] = {
        {"model", 'm', OPT_STR, &o.model, "FILE", "GGUF model (llama, qwen2, qwen3)"},
        {"prompt", 'p', OPT_STR, &o.prompt, "TEXT", "prompt text (empty: start from BOS); with --bench, its length (512)"},
        {"n-predict", 'n', OPT_INT, &o.n_predict, "N", "tokens to generate (-1: until EOS or the context is full); with --bench (128)"},
        {"temp", 0, OPT_STR, &sf.temp, "T", "temperature (0.8; 0: greedy)"},
        {"top-k", 0, OPT_STR, &sf.top_k, "N", "keep the N most likely tokens (40; 0: off)"},
        {"top-p", 0, OPT_STR, &sf.top_p, "P", "nucleus sampling (0.95; 1: off)"},
        {"min-p", 0, OPT_STR, &sf.min_p, "P", "drop tokens below P x the top probability (0.05; 0: off)"},
        {"repeat-penalty", 0, OPT_STR, &sf.repeat_penalty, "X", "penalty on recent tokens (1.0: off)"},
        {"repeat-last-n", 0, OPT_STR, &sf.repeat_last_n, "N", "tokens of history the penalty looks at (64)"},
        {"seed", 's', OPT_STR, &sf.seed, "N", "random seed (-1: from the OS)"},
        {"threads", 't', OPT_INT, &o.threads, "N", "compute threads (0: one per physical core)"},
        {"ctx-size", 'c', OPT_INT, &o.ctx_size, "N", "context positions (0: the model's, at most 4096)"},
        {"cache-type", 0, OPT_STR, &cache_type, "f16|f32", "KV cache elements (f16: half the memory, as llama.cpp; f32: exact, for parity checks)"},
        {"batch-size", 'b', OPT_INT, &o.n_batch, "N", "prompt tokens per forward pass (512)"},
        {"stop", 0, OPT_STR_LIST, &stops, "STR", "stop when STR is generated (repeatable; not printed)"},
        {"no-bos", 0, OPT_BOOL, &o.no_bos, NULL, "do not put BOS before the prompt"},
        {"repack", 0, OPT_BOOL, &repack, NULL, "F16 weights into the GEMM's layout at load, ~15% faster prompts (on; --no-repack: in place)"},
        {"bench", 0, OPT_BOOL, &o.bench, NULL, "measure prompt (pp) and decode (tg) speed, llama-bench style"},
        {"repetitions", 'r', OPT_INT, &o.reps, "N", "with --bench: runs of each test (5)"},
        {"parallel", 0, OPT_INT, &o.parallel, "N", "with --bench: also decode N sequences at once, one forward of N tokens per step (tg x N, t/s summed)"},
        {"dump-logits", 0, OPT_STR, &o.dump_logits, "OUT.bin", "run --tokens as one prefill; write float32 logits [n][n_vocab]"},
        {"tokens", 0, OPT_STR, &o.tokens, "IDS", "with --dump-logits: comma-separated token ids"},
    };
    int rc = opts_parse(opts, (int)(sizeof opts / sizeof opts[0]), argc, argv, "hearth run -m FILE [options]",
                        "Generates text from a GGUF model and prints it as it is made; timings go to stderr.");
    if (rc)
        return rc == 1 ? 0 : rc;
    if (!o.model) {
        fprintf(stderr, "hearth run: -m FILE is required (see --help)\n");
        return 2;
    }
    if (o.n_batch < 1 || o.reps < 1 || o.threads < 0 || o.ctx_size < 0 || o.parallel < 0 || o.parallel > 256) {
        fprintf(stderr, "hearth run: --batch-size and --repetitions must be >= 1, --threads and --ctx-size >= 0, "
                        "--parallel 0..256\n");
        return 2;
    }
    hearth_sampler_params sp;
    if ((rc = sampling_params(&sf, &sp)))
        return rc;
    int kv_type = hearth_kv_type_from_name(cache_type);
    if (kv_type < 0) {
        fprintf(stderr, "hearth run: --cache-type %s: want f16 or f32\n", cache_type);
        return 2;
    }
    o.kv_type = (hearth_dtype)kv_type;
    if (o.dump_logits && !o.tokens) {
        fprintf(stderr, "hearth run: --dump-logits needs --tokens\n");
        return 2;
    }
    hearth_err err = {0};
    hearth_llama *m = NULL;
    const hearth_llama_open_opts lo = {.no_repack = !repack};
    if (hearth_llama_open_with(&m, o.model, &lo, &err)) {
        fprintf(stderr, "hearth run: %s\n", err.msg);
        return 1;
    }
    hearth_pool *pool = hearth_pool_new(o.threads);
    if (o.bench) {
        rc = run_bench(&o, m, pool);
    } else if (o.dump_logits) {
        rc = run_dump_logits(&o, m, pool);
    } else {
        hearth_gen_params gp = {.n_predict = o.n_predict == RUN_UNSET ? -1 : o.n_predict, .n_batch = o.n_batch,
                                .stop = stops.items, .n_stop = stops.n};
        rc = generate(&o, &gp, &sp, m, pool);
    }
    hearth_pool_free(pool);
    hearth_llama_close(m);
    return rc;
}
