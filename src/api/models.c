/* models.c: loading the models named by --model (or the demos) in a serving
 * process, and finding them by name.
 *
 * A --model value is PATH or NAME=PATH (or PATH named by --alias, as
 * llama-server names its one model). A directory with a config.json is a
 * Hugging Face sentence-transformers encoder; a .gguf file is routed by its
 * general.architecture (bert -> embeddings). The name defaults to the last
 * path component without its extension. With no --model at all, hearth writes
 * demo models (deterministic random weights of real shapes) into the demo
 * directory once and serves those, labeled demo in /v1/models, so a fresh
 * install answers every API before the user has a model of their own. */
#include "models.h"
#include "oip.h"

#include "base/clock.h"
#include "base/hw.h"
#include "base/file.h"
#include "base/log.h"
#include "models/bert_demo.h"
#include "models/gguf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define DEMO_EMBED_NAME "demo-minilm-l6"
#define DEMO_SEED 20261129u

void hearth_api_config_default(hearth_api_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->dtype = "f32";
    cfg->max_batch_tokens = 16384;
    cfg->max_concurrent = 512;
    cfg->max_client_batch = 512;
    cfg->parallel = 4;
    cfg->cache_slots = 4;
    cfg->max_queue = 64;
    cfg->batch_size = 512;
    cfg->decode_steps = HEARTH_GEN_DECODE_STEPS;
    cfg->repack = true;
    cfg->n_predict = -1;
    cfg->seq_timeout_ms = 5000;
    cfg->keepalive = true;
    cfg->frame_spin_us = 1000;
    cfg->frame_lead_us = 500;
    hearth_sampler_params_default(&cfg->sampling);
}

int hearth_api_metrics(hearth_api *api, hearth_buf *out)
{
    hearth_api_state *st = api->state;
    if (!st)
        return 0;
    int rc = 0;
    if (st->n_embed)
        rc = hearth_buf_appends(out, "# TYPE hearth_embed_batches_total counter\n# TYPE hearth_embed_sequences_total counter\n"
                                     "# TYPE hearth_embed_tokens_total counter\n# TYPE hearth_embed_queue_depth gauge\n"
                                     "# TYPE hearth_embed_busy_seconds_total counter\n# TYPE hearth_embed_restarts_total counter\n"
                                     "# TYPE hearth_embed_pass_fixed_seconds gauge\n");
    for (int i = 0; i < st->n_embed && !rc; i++) {
        hearth_embed_queue_stats q;
        hearth_embed_queue_get_stats(st->embed_models[i].queue, &q);
        const char *n = st->embed_models[i].info->name;
        rc = hearth_buf_printf(out,
                               "hearth_embed_batches_total{model=\"%s\"} %llu\nhearth_embed_sequences_total{model=\"%s\"} %llu\n"
                               "hearth_embed_tokens_total{model=\"%s\"} %llu\nhearth_embed_queue_depth{model=\"%s\"} %d\n"
                               "hearth_embed_busy_seconds_total{model=\"%s\"} %.6f\nhearth_embed_restarts_total{model=\"%s\"} %llu\n"
                               "hearth_embed_pass_fixed_seconds{model=\"%s\"} %.6f\n",
                               n, (unsigned long long)q.batches, n, (unsigned long long)q.sequences, n, (unsigned long long)q.tokens,
                               n, q.queued_jobs, n, (double)q.busy_ns / 1e9, n, (unsigned long long)q.restarts, n,
                               q.pass_fixed_ns / 1e9);
    }
    if (!rc)
        rc = hearth_api_gen_metrics(api, out);
    if (!rc && st->n_frame)
        rc = hearth_api_oip_metrics(api, out);
    return rc;
}

hearth_embed_model *hearth_api_find_embed(hearth_api *api, const char *name)
{
    hearth_api_state *st = api->state;
    if (!st || st->n_embed == 0)
        return NULL;
    if (!name) {
        for (int i = 0; i < st->n_embed; i++)
            if (!st->embed_models[i].rerank)
                return &st->embed_models[i];
        return &st->embed_models[0];
    }
    for (int i = 0; i < st->n_embed; i++)
        if (strcmp(st->embed_models[i].info->name, name) == 0)
            return &st->embed_models[i];
    return NULL;
}

static int embed_compute(void *lane, int n, const int32_t *const *ids, const int32_t *lens, const bool *all_tokens,
                         float *out, const hearth_embed_restart *restart, hearth_err *err)
{
    hearth_embed_lane *e = lane;
    return hearth_bert_embed_stoppable(e->m->bert, e->pool, n, ids, lens, all_tokens, false, out,
                                       restart ? restart->check : NULL, restart ? restart->ctx : NULL, err);
}

/* A reranker's lane: one logit per pair sequence (the queue's dim is 1). */
static int rerank_compute(void *lane, int n, const int32_t *const *ids, const int32_t *lens, const bool *all_tokens,
                          float *out, const hearth_embed_restart *restart, hearth_err *err)
{
    hearth_embed_lane *e = lane;
    return hearth_bert_rerank_stoppable(e->m->bert, e->pool, n, ids, lens, out, restart ? restart->check : NULL,
                                        restart ? restart->ctx : NULL, err);
}

static bool is_dir(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

static void default_name(const char *path, char *out, size_t n)
{
    size_t len = strlen(path);
    while (len > 1 && path[len - 1] == '/')
        len--;
    size_t start = len;
    while (start > 0 && path[start - 1] != '/')
        start--;
    size_t end = len;
    if (end - start > 5 && (strncmp(path + end - 5, ".gguf", 5) == 0 || strncmp(path + end - 5, ".onnx", 5) == 0))
        end -= 5;
    snprintf(out, n, "%.*s", (int)(end - start), path + start);
}

static int parse_dtype(const char *s, enum hearth_bert_dtype *out, hearth_err *err)
{
    if (!strcmp(s, "f32"))
        *out = HEARTH_BERT_F32;
    else if (!strcmp(s, "bf16"))
        *out = HEARTH_BERT_BF16;
    else if (!strcmp(s, "int8"))
        *out = HEARTH_BERT_INT8;
    else
        return hearth_err_set(err, HEARTH_EINVAL, "--dtype '%s' is not one of f32, bf16, int8", s);
    return HEARTH_OK;
}

/* The architecture a GGUF file declares, into arch. */
static int gguf_arch(const char *path, char *arch, size_t n, hearth_err *err)
{
    hearth_gguf g;
    int rc = hearth_gguf_open(&g, path, err);
    if (rc)
        return rc;
    const char *s;
    size_t len;
    rc = hearth_gguf_get_str(&g, "general.architecture", &s, &len, err);
    if (!rc)
        snprintf(arch, n, "%.*s", (int)len, s);
    hearth_gguf_close(&g);
    return rc;
}

/* The encoders' lanes (see hearth_api_config.embed_lanes): n of them
 * (0: two where there are two or more compute threads), the threads split
 * evenly, the first lanes taking one more where they do not divide. One
 * lane runs on the shared pool itself. Two, not one per thread, by
 * default: every pass reads all the weights, so n lanes read them n times
 * as often; with two that was a gain here, more were not measured on a
 * machine with more cores (three on two cores lost 15%). Measured on the 2-core Zen 5 with MiniLM (bench/RESULTS.md,
 * 2026-12-02), two one-thread lanes against one two-thread lane, served
 * with 8 connections: +5% sentences/s at 1 sentence per request, +14% at 8
 * (embed_queue.c, "Engines", says why). A lone request still runs on every
 * thread (the wide pass); --embed-engines 1 gives the old behaviour. */
static int embed_pools(hearth_api_state *st, int n, hearth_err *err)
{
    int threads = hearth_pool_size(st->pool);
    if (n <= 0)
        n = threads >= 2 ? 2 : 1;
    if (n > threads)
        n = threads;
    if (n > HEARTH_EMBED_LANES_MAX)
        n = HEARTH_EMBED_LANES_MAX;
    if (n <= 1) {
        st->embed_pools[0] = st->pool;
        st->n_embed_pools = 1;
        return HEARTH_OK;
    }
    for (int i = 0; i < n; i++) {
        st->embed_pools[i] = hearth_pool_new(threads / n + (i < threads % n));
        if (!st->embed_pools[i])
            return hearth_err_set(err, HEARTH_ENOMEM, "cannot start the threads of embedding lane %d", i + 1);
        st->n_embed_pools = i + 1;
    }
    HLOG_INFO("embedding lanes: %d, %d-%d compute threads each", n, threads / n, threads / n + (threads % n > 0));
    return HEARTH_OK;
}

static int add_embed(hearth_api *api, const char *name, const char *path, bool demo, hearth_err *err)
{
    hearth_api_state *st = api->state;
    if (api->n_models >= HEARTH_API_MAX_MODELS)
        return hearth_err_set(err, HEARTH_ELIMIT, "at most %d models", HEARTH_API_MAX_MODELS);
    for (int i = 0; i < api->n_models; i++)
        if (!strcmp(api->models[i].name, name))
            return hearth_err_set(err, HEARTH_EINVAL, "two models are named '%s': name one with --model NAME=PATH", name);
    uint64_t t0 = hearth_now_ns();
    hearth_embed_model *m = &st->embed_models[st->n_embed];
    memset(m, 0, sizeof *m);
    int rc = hearth_bert_open(&m->bert, path, st->embed.dtype, err);
    if (rc)
        return rc;
    /* a model with the head reranks whatever the flags; --reranking (as
     * llama-server's) asks that every encoder can */
    m->rerank = hearth_bert_is_reranker(m->bert);
    if (api->cfg.reranking && !m->rerank) {
        rc = hearth_err_set(err, HEARTH_EUNSUPPORTED, "--reranking: %s", hearth_bert_no_rerank_reason(m->bert));
        hearth_bert_close(m->bert);
        m->bert = NULL;
        return rc;
    }
    /* --pooling (llama-server's): every encoder pools so; a reranker's pooling is its head's */
    if (api->cfg.pooling && !m->rerank)
        hearth_bert_set_pooling(m->bert, !strcmp(api->cfg.pooling, "cls")    ? HEARTH_POOL_CLS
                                         : !strcmp(api->cfg.pooling, "last") ? HEARTH_POOL_LAST
                                                                              : HEARTH_POOL_MEAN);
    /* the default prompt: --default-prompt, --default-prompt-name, else the model's own */
    const char *pname = api->cfg.default_prompt_name ? api->cfg.default_prompt_name : hearth_bert_default_prompt(m->bert);
    if (api->cfg.default_prompt) {
        m->prompt = api->cfg.default_prompt;
        m->prompt_len = strlen(m->prompt);
    } else if (pname && !(m->prompt = hearth_bert_prompt(m->bert, pname, &m->prompt_len))) {
        char names[512];
        hearth_bert_prompt_names(m->bert, names, sizeof names);
        hearth_bert_close(m->bert);
        m->bert = NULL;
        return hearth_err_set(err, HEARTH_EINVAL, "model '%s': --default-prompt-name '%s' is not one of its prompts (%s)",
                              name, pname, names[0] ? names : "it has none");
    }
    void *lanes[HEARTH_EMBED_LANES_MAX];
    for (int i = 0; i < st->n_embed_pools; i++) {
        m->lanes[i] = (hearth_embed_lane){.m = m, .pool = st->embed_pools[i]};
        lanes[i] = &m->lanes[i];
    }
    m->queue = hearth_embed_queue_new_lanes(m->rerank ? rerank_compute : embed_compute, lanes, st->n_embed_pools,
                                              m->rerank ? 1 : hearth_bert_dim(m->bert),
                                              st->embed.max_batch_tokens, st->embed.max_concurrent, err);
    if (!m->queue) {
        hearth_bert_close(m->bert);
        m->bert = NULL;
        return err ? err->code : HEARTH_ENOMEM;
    }
    m->wide = (hearth_embed_lane){.m = m, .pool = st->pool};
    hearth_embed_queue_set_wide(m->queue, &m->wide);
    hearth_api_model *info = &api->models[api->n_models++];
    memset(info, 0, sizeof *info);
    snprintf(info->name, sizeof info->name, "%s", name);
    snprintf(info->family, sizeof info->family, "%s", m->rerank ? "rerank" : "embedding");
    snprintf(info->source, sizeof info->source, "%s", path);
    info->demo = demo;
    info->created = hearth_unix_time();
    m->info = info;
    st->n_embed++;
    HLOG_INFO("model '%s': %s %s from %s, %lld dimensions, up to %lld tokens, loaded in %.0f ms", name,
              demo ? "demo" : "BERT", m->rerank ? "reranker" : "encoder", path, (long long)hearth_bert_dim(m->bert), (long long)hearth_bert_max_tokens(m->bert),
              (double)(hearth_now_ns() - t0) / 1e6);
    return HEARTH_OK;
}

static int add_model(hearth_api *api, const char *name, const char *path, hearth_err *err);

static int load_one(hearth_api *api, const char *spec, hearth_err *err)
{
    char name[128];
    const char *eq = strchr(spec, '=');
    const char *path = spec;
    bool named = true;
    if (eq && eq != spec && !memchr(spec, '/', (size_t)(eq - spec))) {
        snprintf(name, sizeof name, "%.*s", (int)(eq - spec), spec);
        path = eq + 1;
    } else if (api->cfg.alias && *api->cfg.alias) {
        snprintf(name, sizeof name, "%s", api->cfg.alias);
    } else {
        default_name(spec, name, sizeof name);
        named = false;
    }
    int n = api->n_models;
    int rc = add_model(api, name, path, err);
    if (!rc && api->n_models > n)
        api->models[api->n_models - 1].named = named;
    return rc;
}

static int add_model(hearth_api *api, const char *name, const char *path, hearth_err *err)
{
    if (is_dir(path))
        return add_embed(api, name, path, false, err);
    if (hearth_api_is_frame_path(path)) {
        if (api->cfg.embedding_only)
            return hearth_err_set(err, HEARTH_EUNSUPPORTED, "%s: --embedding serves embedding models only, and this is "
                                  "a frame model (ONNX)", path);
        return hearth_api_add_frame(api, name, path, err);
    }
    size_t len = strlen(path);
    if (len > 5 && !strcmp(path + len - 5, ".gguf")) {
        char arch[64];
        int rc = gguf_arch(path, arch, sizeof arch, err);
        if (rc)
            return rc;
        if (!strcmp(arch, "bert"))
            return add_embed(api, name, path, false, err);
        if (hearth_decoder_supports(arch) && api->cfg.embedding_only)
            return hearth_err_set(err, HEARTH_EUNSUPPORTED,
                                  "%s: --embedding asks for embeddings, and hearth computes them with BERT-family encoders "
                                  "only, not a '%s' decoder: serve this model without --embedding for generation",
                                  path, arch);
        if (hearth_decoder_supports(arch))
            return hearth_api_add_gen(api, name, path, false, err);
        return hearth_err_set(err, HEARTH_EUNSUPPORTED, "%s: architecture '%s' cannot be served (embeddings: bert; generation: %s)",
                              path, arch, hearth_decoder_archs());
    }
    return hearth_err_set(err, HEARTH_EINVAL, "--model %s: not a model folder (config.json), a .gguf or an .onnx file", path);
}

static void demo_root(const hearth_api *api, char *out, size_t n)
{
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (api->cfg.demo_dir && *api->cfg.demo_dir)
        snprintf(out, n, "%s", api->cfg.demo_dir);
    else if (xdg && *xdg)
        snprintf(out, n, "%s/hearth/demo", xdg);
    else if (home && *home)
        snprintf(out, n, "%s/.cache/hearth/demo", home);
    else
        snprintf(out, n, "/tmp/hearth-demo");
}

static int load_demos(hearth_api *api, hearth_err *err)
{
    char root[768], dir[900], stamp[960];
    demo_root(api, root, sizeof root);
    snprintf(dir, sizeof dir, "%s/%s-seed%u", root, DEMO_EMBED_NAME, DEMO_SEED);
    snprintf(stamp, sizeof stamp, "%s/.complete", dir);
    struct stat sb;
    if (stat(stamp, &sb) != 0) {
        /* written once: into a fresh folder, marked complete last, so a crash mid-write is redone */
        if (hearth_mkdirs(dir, err) != 0) {
            hearth_err_prefix(err, "the demo model folder (set --demo-dir)");
            return err ? err->code : HEARTH_EIO;
        }
        HLOG_INFO("writing the demo embedding model (MiniLM-L6 shapes, random weights) to %s", dir);
        hearth_bert_demo_shape shape;
        hearth_bert_demo_shape_minilm(&shape);
        int rc = hearth_bert_demo_write(dir, &shape, DEMO_SEED, err);
        if (rc)
            return rc;
        FILE *f = fopen(stamp, "w");
        if (f)
            fclose(f);
    }
    int rc = add_embed(api, DEMO_EMBED_NAME, dir, true, err);
    if (!rc)
        rc = hearth_api_load_gen_demo(api, root, err);
    return rc;
}

int hearth_api_load_models(hearth_api *api, hearth_err *err)
{
    api->state = calloc(1, sizeof *api->state);
    if (!api->state)
        return hearth_err_set(err, HEARTH_ENOMEM, "out of memory");
    hearth_api_state *st = api->state;
    int rc = parse_dtype(api->cfg.dtype ? api->cfg.dtype : "f32", &st->embed.dtype, err);
    if (rc)
        return rc;
    st->embed.max_batch_tokens = api->cfg.max_batch_tokens;
    st->embed.max_concurrent = api->cfg.max_concurrent;
    st->embed.max_client_batch = api->cfg.max_client_batch;
    st->gen.n_parallel = api->cfg.parallel > 0 ? api->cfg.parallel : 4;
    st->gen.n_cache_slots = api->cfg.cache_slots >= 0 ? api->cfg.cache_slots : 4;
    /* llama-server's -c is the context of all its slots together: each gets an equal share */
    st->gen.n_ctx = api->cfg.ctx_size > 0 ? api->cfg.ctx_size / st->gen.n_parallel : 0;
    if (api->cfg.ctx_size > 0)
        HLOG_INFO("context: %d positions in all (--ctx-size), %lld per sequence (--parallel %d)", api->cfg.ctx_size,
                  (long long)st->gen.n_ctx, st->gen.n_parallel);
    st->gen.max_queue = api->cfg.max_queue > 0 ? api->cfg.max_queue : 64;
    st->gen.n_batch = api->cfg.batch_size > 0 ? api->cfg.batch_size : 512;
    st->gen.decode_steps = api->cfg.decode_steps;
    st->gen.chat_template = api->cfg.chat_template;
    st->gen.jinja = api->cfg.jinja;
    st->gen.chat_template_jinja = api->cfg.chat_template_jinja;
    /* serve checked the name; anything else falls back to the default */
    int kv_type = hearth_decoder_cache_type_from_name(api->cfg.cache_type);
    st->gen.kv_type = kv_type >= 0 ? (hearth_dtype)kv_type : HEARTH_F16;
    st->pool = hearth_pool_new(api->cfg.compute_threads);
    HLOG_INFO("compute pool: %d threads", hearth_pool_size(st->pool));
    if ((rc = embed_pools(st, api->cfg.embed_lanes, err)))
        return rc;
    if (api->cfg.n_models == 0 && !api->cfg.no_demo)
        rc = load_demos(api, err);
    for (int i = 0; i < api->cfg.n_models && !rc; i++)
        rc = load_one(api, api->cfg.models[i], err);
    if (!rc)
        atomic_store(&api->ready, 1);
    return rc;
}

void hearth_api_unload_models(hearth_api *api)
{
    hearth_api_state *st = api->state;
    if (!st)
        return;
    atomic_store(&api->ready, 0);
    hearth_api_unload_frames(api);
    hearth_api_unload_gen(api);
    for (int i = 0; i < st->n_embed; i++) {
        hearth_embed_queue_free(st->embed_models[i].queue);
        hearth_bert_close(st->embed_models[i].bert);
    }
    if (st->n_embed_pools > 1)
        for (int i = 0; i < st->n_embed_pools; i++)
            hearth_pool_free(st->embed_pools[i]);
    hearth_pool_free(st->pool);
    free(st);
    api->state = NULL;
}
