/* run.c: `hearth run`: text generation from a GGUF model on the command line.
 *
 * Tokenizes the prompt (BOS as the vocabulary says unless --no-bos; special
 * tokens written in the prompt are parsed, as llama-cli does), then submits
 * it as one request to the batching scheduler (engine/gen_sched.h), the
 * one generation loop `hearth serve` also runs, over a KV cache of one slot
 * (run_sched.c builds the model table: forward = hearth_llama_forward,
 * detok = a streaming hearth_detok). Pieces are
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

#include "base/random.h"
#include "engine/sampler.h"
#include "models/llama.h"
#include "text/tokenizer.h"

#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Longest prompt accepted, in tokens, before the context check. */
#define PROMPT_MAX_TOKENS (1u << 24)

/* The text callback: stdout gone (a closed pipe) cancels the generation. */
static void print_piece(hearth_gen_req *req, const char *text, size_t n, int32_t token, const hearth_gen_probs *probs)
{
    (void)token, (void)probs;
    if (fwrite(text, 1, n, stdout) != n || fflush(stdout) != 0)
        atomic_store(&req->cancelled, 1);
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

/* What the generation is asked for: n_predict (< 0: to the end of the
 * context) and the stop strings. */
typedef struct gen_params {
    int32_t n_predict;
    const char *const *stop;
    int n_stop;
} gen_params;

static int generate(const run_opts *o, const gen_params *gp, const hearth_sampler_params *sp_in,
                    hearth_llama *m, hearth_pool *pool)
{
    const hearth_llama_hparams *hp = hearth_llama_hparams_get(m);
    const hearth_tokenizer *tok = hearth_llama_tokenizer(m);
    const hearth_vocab *voc = hearth_llama_vocab(m);
    hearth_err err = {0};
    hearth_ids ids;
    hearth_ids_init(&ids, PROMPT_MAX_TOKENS);
    run_model rm = {.m = m, .pool = pool};
    hearth_gen_sched *sched = NULL;
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
    int64_t n_prompt = (int64_t)ids.n;
    if (n_prompt > n_ctx) {
        fprintf(stderr, "\nhearth run: generate: the prompt is %lld tokens, longer than the context of %lld positions\n",
                (long long)n_prompt, (long long)n_ctx);
        goto done;
    }
    /* The whole sequence fits the context: generation stops with "length"
     * once prompt + generated tokens fill it, so every emitted token could
     * still be stored (the scheduler alone would sample one more from the
     * last position's logits). */
    int64_t room = n_ctx - n_prompt;
    int32_t n_predict = gp->n_predict < 0 || gp->n_predict > room ? (int32_t)room : gp->n_predict;
    /* A random seed is drawn here, so the line below can print it and the
     * run be repeated with --seed. */
    hearth_sampler_params sp = *sp_in;
    while (sp.seed == HEARTH_SAMPLER_SEED_RANDOM)
        sp.seed = hearth_random_u64();
    /* With only BOS (or nothing) before it, the generated text starts the text:
     * SPM then drops the space its first word carries. */
    rm.from_start = true;
    for (size_t i = 0; i < ids.n; i++)
        if (ids.v[i] != voc->bos)
            rm.from_start = false;
    /* nothing to generate (-n 0, or the prompt fills the context): no pass
     * runs, and the report still gives the prompt's length, as before */
    run_end end = {.stats = {.finish = HEARTH_GEN_LENGTH, .n_prompt = n_prompt}, .have_stats = true};
    if (n_predict > 0) {
        rm.kv = hearth_kv_new_typed(m, 1, n_ctx, o->kv_type, &err);
        hearth_gen_batch_model bm;
        if (rm.kv) {
            run_model_table(&rm, 1, n_ctx, &bm);
            sched = run_sched_new(&bm, o, rm.pool, &err);
        }
        if (!sched) {
            fprintf(stderr, "hearth run: %s\n", err.msg[0] ? err.msg : "out of memory");
            goto done;
        }
        hearth_gen_req req = {.prompt = ids.v, .n_prompt = n_prompt, .sampling = sp, .n_predict = n_predict,
                              .stop = gp->stop, .n_stop = gp->n_stop, .on_text = print_piece};
        hearth_gen_req *reqs[1] = {&req};
        if (run_sched_wait(sched, reqs, &end, 1, &err)) {
            fprintf(stderr, "\nhearth run: %s\n", err.msg);
            goto done;
        }
        if (end.status && !(end.status == HEARTH_ENOTFOUND && end.have_stats)) {
            fprintf(stderr, "\nhearth run: %s\n", end.msg);
            goto done;
        }
    }
    const hearth_gen_stats *st = &end.stats;
    if (isatty(STDOUT_FILENO))
        putchar('\n');
    fflush(stdout);
    fprintf(stderr, "\nprompt:    %6lld tokens %10.2f ms %10.2f tok/s\n", (long long)st->n_prompt,
            st->prompt_ms, st->prompt_ms > 0 ? (double)st->n_prompt * 1000.0 / st->prompt_ms : 0.0);
    fprintf(stderr, "generated: %6lld tokens %10.2f ms %10.2f tok/s\n", (long long)st->n_gen, st->gen_ms,
            st->gen_ms > 0 ? (double)st->n_gen * 1000.0 / st->gen_ms : 0.0);
    fprintf(stderr, "finish: %s (seed %llu, %d threads, context %lld)\n", st->finish == HEARTH_GEN_EOS ? "eos"
                                                                        : hearth_gen_finish_name(st->finish),
            (unsigned long long)sp.seed, hearth_pool_size(pool), (long long)n_ctx);
    status = 0;
done:
    hearth_gen_sched_free(sched);
    hearth_kv_free(rm.kv);
    hearth_ids_deinit(&ids);
    return status;
}

/* Whether -m/--model names an .onnx file: frames, not text (run_frames.c). */
static bool onnx_model(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        if ((!strcmp(argv[i], "-m") || !strcmp(argv[i], "--model")) && i + 1 < argc)
            v = argv[i + 1];
        else if (!strncmp(argv[i], "--model=", 8))
            v = argv[i] + 8;
        size_t n = v ? strlen(v) : 0;
        if (n > 5 && !strcmp(v + n - 5, ".onnx"))
            return true;
    }
    return false;
}

int hearth_cmd_run(int argc, char **argv)
{
    if (onnx_model(argc, argv))
        return hearth_cmd_run_frames(argc, argv);
    run_opts o = {.n_predict = RUN_UNSET, .reps = 5, .n_batch = 512, .decode_steps = HEARTH_GEN_DECODE_STEPS};
    const char *cache_type = "f16";
    bool repack = true;
    const char *device = "cpu";
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
        {"device", 0, OPT_STR, &device, "cpu|cuda[:N]", "where the model runs (cpu; cuda: the first GPU, as hearth doctor lists them)"},
        {"ctx-size", 'c', OPT_INT, &o.ctx_size, "N", "context positions (0: the model's, at most 4096)"},
        {"cache-type", 0, OPT_STR, &cache_type, "f16|f32", "KV cache elements (f16: half the memory, as llama.cpp; f32: exact, for parity checks)"},
        {"batch-size", 'b', OPT_INT, &o.n_batch, "N", "prompt tokens per forward pass (512)"},
        {"decode-steps", 0, OPT_INT, &o.decode_steps, "N", "on a GPU, greedy: up to N decode steps a call, the GPU feeding each sequence its own draw (8; 1: a call a step; at most 16)"},
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
    if (o.n_batch < 1 || o.reps < 1 || o.threads < 0 || o.ctx_size < 0 || o.parallel < 0 || o.parallel > 256 ||
        o.decode_steps < 1 || o.decode_steps > HEARTH_LLAMA_STEPS_MAX) {
        fprintf(stderr, "hearth run: --batch-size and --repetitions must be >= 1, --threads and --ctx-size >= 0, "
                        "--parallel 0..256, --decode-steps 1..%d\n", HEARTH_LLAMA_STEPS_MAX);
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
    if (!(o.dev = hearth_dev_find(device, &err))) {
        fprintf(stderr, "hearth run: --device %s: %s\n", device, err.msg);
        return 2;
    }
    hearth_llama *m = NULL;
    const hearth_llama_open_opts lo = {.no_repack = !repack, .dev = o.dev};
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
        gen_params gp = {.n_predict = o.n_predict == RUN_UNSET ? -1 : o.n_predict, .stop = stops.items,
                         .n_stop = stops.n};
        rc = generate(&o, &gp, &sp, m, pool);
    }
    hearth_pool_free(pool);
    hearth_llama_close(m);
    return rc;
}
