/* gen_models.c: generation models in a serving process: a decoder
 * (models/decoder.h: the architecture's weights, tokenizer and a KV cache of
 * --parallel live sequences plus --cache-slots idle ones that keep prefixes
 * for reuse), its chat template, and the scheduler thread that drives the
 * decoder's table. The API layer names no architecture: the decoder opens
 * whichever the GGUF holds, and tears itself down. Also the demo (written by
 * models/decoder_demo.c) and the generation metrics. */
#include "gen_common.h"
#include "models.h"

#include "base/clock.h"
#include "base/log.h"
#include "engine/dev.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* With --jinja (as llama-server's): the command line's template source,
 * else the GGUF's, parsed into g->jinja; the family its markers name (else
 * chatml) is the tool-call format. A GGUF template the interpreter refuses
 * is logged and chat falls back to the built-ins, as without --jinja.
 * Returns whether g->jinja renders chat. */
static bool find_jinja(hearth_gen_entry *g, const hearth_api_state *st)
{
    const char *src = st->gen.chat_template_jinja, *from = "--chat-template";
    size_t len = src ? strlen(src) : 0;
    if (!src && hearth_decoder_chat_template(g->dec, &src, &len) != 0)
        return false;
    if (!st->gen.chat_template_jinja)
        from = "its GGUF's";
    hearth_err err = {0};
    if (hearth_jinja_parse(src, len, &g->jinja, &err) != 0) {
        HLOG_WARN("model '%s': --jinja: %s chat template cannot be run (%s); its family is rendered instead",
                  g->info->name, from, err.msg);
        return false;
    }
    if (hearth_chat_template_detect(src, len, &g->tmpl) != 0)
        g->tmpl = HEARTH_TMPL_CHATML;
    hearth_chat_jinja_probe(g->jinja, &g->jinja_caps);
    if (!g->jinja_caps.system_role)
        HLOG_INFO("model '%s': its chat template shows no system turn: system messages join the user turn after "
                  "them, as llama-server's polyfill does", g->info->name);
    snprintf(g->tmpl_source, sizeof g->tmpl_source, st->gen.chat_template_jinja ? "override" : "gguf");
    HLOG_INFO("model '%s': --jinja: %s chat template renders chat (tool calls in the %s format)", g->info->name, from,
              hearth_chat_template_name(g->tmpl));
    return true;
}

/* The chat template: --chat-template, else the GGUF's when hearth knows its
 * family, else chatml with a warning, as llama-server falls back (its
 * common_chat_templates_init for a GGUF without one; its start-up check for
 * one it cannot apply). Rejected: refusing chat (a 400) for such a model: a
 * client written for llama-server gets an answer there. With --jinja, a
 * family named by --chat-template is its built-in (llama-server runs its
 * own Jinja copy of the same layout); else find_jinja first. */
static void find_template(hearth_gen_entry *g, const hearth_api_state *st)
{
    const char *override = st->gen.chat_template;
    if (st->gen.jinja && !(override && *override && hearth_chat_template_by_name(override, &g->tmpl) == 0) &&
        find_jinja(g, st))
        return;
    if (override && *override && hearth_chat_template_by_name(override, &g->tmpl) == 0) {
        snprintf(g->tmpl_source, sizeof g->tmpl_source, "override");
        return;
    }
    if (override && *override)
        HLOG_WARN("--chat-template '%s' is not one hearth knows (chatml, llama3, phi3, gemma, mistral, llama2, command-r)", override);
    const char *src;
    size_t len;
    bool in_gguf = hearth_decoder_chat_template(g->dec, &src, &len) == 0;
    if (in_gguf && hearth_chat_template_detect(src, len, &g->tmpl) == 0) {
        snprintf(g->tmpl_source, sizeof g->tmpl_source, "gguf");
        return;
    }
    g->tmpl = HEARTH_TMPL_CHATML;
    snprintf(g->tmpl_source, sizeof g->tmpl_source, "fallback");
    HLOG_WARN("model '%s': %s: chat falls back to chatml, as llama-server's does; it may answer poorly "
              "(--chat-template chatml, llama3, phi3, gemma, mistral, llama2 or command-r chooses another)",
              g->info->name, in_gguf ? "its chat template is not one hearth recognises" : "its GGUF has no chat template");
}

/* The device of this process's generation models: entry worker_index (in
 * turn) of --device's comma list, so --workers N --spawn --device
 * cuda:0,cuda:1 puts each worker on its own GPU. */
static hearth_dev *gen_device(const hearth_api *api, hearth_err *err)
{
    const char *list = api->cfg.device && *api->cfg.device ? api->cfg.device : "cpu";
    int n = 1;
    for (const char *p = list; *p; p++)
        n += *p == ',';
    int want = api->cfg.worker_index > 0 ? api->cfg.worker_index % n : 0;
    const char *at = list;
    for (int i = 0; i < want; i++)
        at = strchr(at, ',') + 1;
    char name[32];
    size_t len = strcspn(at, ",");
    if (len >= sizeof name) {
        hearth_err_set(err, HEARTH_EINVAL, "--device: '%.*s' is not a device", (int)len, at);
        return NULL;
    }
    memcpy(name, at, len);
    name[len] = 0;
    return hearth_dev_find(name, err);
}

int hearth_api_add_gen(hearth_api *api, const char *name, const char *path, bool demo, hearth_err *err)
{
    hearth_api_state *st = api->state;
    if (api->n_models >= HEARTH_API_MAX_MODELS)
        return hearth_err_set(err, HEARTH_ELIMIT, "at most %d models", HEARTH_API_MAX_MODELS);
    uint64_t t0 = hearth_now_ns();
    hearth_gen_entry *g = &st->gen_models[st->n_gen];
    memset(g, 0, sizeof *g);
    hearth_dev *dev = gen_device(api, err);
    if (!dev)
        return err ? err->code : HEARTH_EINVAL;
    const hearth_decoder_opts o = {
        .dev = dev,
        .n_slots = st->gen.n_parallel + st->gen.n_cache_slots,
        .n_ctx = st->gen.n_ctx,
        .kv_type = st->gen.kv_type,
        .no_repack = !api->cfg.repack,
        .pool = st->pool,
    };
    int rc = hearth_decoder_open(&g->dec, path, &o, err);
    if (rc)
        return rc;
    g->n_parallel = st->gen.n_parallel;
    g->n_ctx = hearth_decoder_n_ctx(g->dec);
    g->sampling = api->cfg.sampling;
    if (g->sampling.repeat_last_n < 0) /* llama-server's -1: the context */
        g->sampling.repeat_last_n = (int)(g->n_ctx < HEARTH_SAMPLER_MAX_LAST_N ? g->n_ctx : HEARTH_SAMPLER_MAX_LAST_N);
    g->n_predict = api->cfg.n_predict;
    g->context_shift = api->cfg.context_shift;
    g->n_ctx_train = hearth_decoder_n_ctx_train(g->dec);
    const hearth_vocab *v = hearth_decoder_vocab(g->dec);
    if (v->bos >= 0)
        snprintf(g->bos_text, sizeof g->bos_text, "%s", v->text[v->bos]);
    hearth_api_model *info = &api->models[api->n_models];
    memset(info, 0, sizeof *info);
    snprintf(info->name, sizeof info->name, "%s", name);
    snprintf(info->family, sizeof info->family, "generation");
    snprintf(info->source, sizeof info->source, "%s", path);
    info->demo = demo;
    info->created = hearth_unix_time();
    g->info = info;
    find_template(g, st);
    hearth_gen_sched_config sc = {.n_parallel = st->gen.n_parallel,
                                  .max_queue = st->gen.max_queue,
                                  .n_batch = st->gen.n_batch,
                                  .decode_steps = st->gen.decode_steps,
                                  .pool = st->pool,
                                  .warm_up = true}; /* a served GPU model meets its step shapes before requests do */
    g->token_texts = hearth_gen_token_texts_new(hearth_decoder_tokenizer(g->dec), v->n_tokens);
    if (!g->token_texts) {
        hearth_decoder_close(g->dec);
        return hearth_err_set(err, HEARTH_ENOMEM, "model '%s': out of memory for its token texts", name);
    }
    g->sched = hearth_gen_sched_new(hearth_decoder_batch_model(g->dec), &sc, err);
    if (!g->sched) {
        hearth_gen_token_texts_free(g->token_texts);
        hearth_jinja_free(g->jinja);
        hearth_decoder_close(g->dec);
        return err ? err->code : HEARTH_ENOMEM;
    }
    api->n_models++;
    st->n_gen++;
    HLOG_INFO("model '%s': %s %s from %s, %lld-token context x %d sequences (+%d cached), %.0f MiB of %s KV cache, "
              "chat template %s, loaded in %.0f ms",
              name, demo ? "demo" : hearth_decoder_arch(g->dec), hearth_dtype_get(hearth_decoder_weight_type(g->dec))->name, path,
              (long long)g->n_ctx, st->gen.n_parallel, st->gen.n_cache_slots,
              (double)hearth_decoder_cache_bytes(g->dec) / 1048576.0,
              hearth_dtype_get(st->gen.kv_type)->name,
              hearth_chat_template_name(g->tmpl), (double)(hearth_now_ns() - t0) / 1e6);
    return HEARTH_OK;
}

hearth_gen_entry *hearth_api_find_gen(hearth_api *api, const char *name)
{
    hearth_api_state *st = api->state;
    if (!st || st->n_gen == 0)
        return NULL;
    if (!name)
        return &st->gen_models[0];
    for (int i = 0; i < st->n_gen; i++)
        if (strcmp(st->gen_models[i].info->name, name) == 0)
            return &st->gen_models[i];
    return NULL;
}

void hearth_api_unload_gen(hearth_api *api)
{
    hearth_api_state *st = api->state;
    for (int i = 0; i < st->n_gen; i++) {
        hearth_gen_sched_free(st->gen_models[i].sched); /* the thread that drives the decoder stops first */
        hearth_decoder_close(st->gen_models[i].dec);
        hearth_gen_token_texts_free(st->gen_models[i].token_texts);
        hearth_jinja_free(st->gen_models[i].jinja);
    }
    st->n_gen = 0;
}

/* ---- the demo ---- */

int hearth_api_load_gen_demo(hearth_api *api, const char *dir, hearth_err *err)
{
    char model[1024];
    int rc = hearth_decoder_demo_path(dir, model, sizeof model, err);
    if (rc)
        return rc;
    return hearth_api_add_gen(api, "demo-llama-tiny", model, true, err);
}

/* ---- metrics ---- */

static int hist(hearth_buf *out, const char *name, const char *model, const uint64_t *b, double sum, uint64_t count)
{
    int rc = 0;
    uint64_t cum = 0;
    for (int i = 0; i < 12 && !rc; i++) {
        cum += b[i];
        if (i == 11)
            rc = hearth_buf_printf(out, "%s_bucket{model=\"%s\",le=\"+Inf\"} %llu\n", name, model, (unsigned long long)cum);
        else
            rc = hearth_buf_printf(out, "%s_bucket{model=\"%s\",le=\"%g\"} %llu\n", name, model, hearth_gen_sched_hist_bounds[i],
                                   (unsigned long long)cum);
    }
    if (!rc)
        rc = hearth_buf_printf(out, "%s_sum{model=\"%s\"} %.6f\n%s_count{model=\"%s\"} %llu\n", name, model, sum, name, model,
                               (unsigned long long)count);
    return rc;
}

int hearth_api_gen_metrics(hearth_api *api, hearth_buf *out)
{
    hearth_api_state *st = api->state;
    int rc = 0;
    if (!st || st->n_gen == 0)
        return 0;
    rc = hearth_buf_appends(out, "# TYPE hearth_gen_prompt_tokens_total counter\n"
                                 "# TYPE hearth_gen_prompt_tokens_cached_total counter\n"
                                 "# TYPE hearth_gen_generated_tokens_total counter\n"
                                 "# TYPE hearth_gen_requests_total counter\n"
                                 "# TYPE hearth_gen_prefix_cache_hits_total counter\n"
                                 "# TYPE hearth_gen_queue_depth gauge\n"
                                 "# TYPE hearth_gen_live_sequences gauge\n"
                                 "# TYPE hearth_gen_kv_cache_used_ratio gauge\n"
                                 "# TYPE hearth_gen_time_to_first_token_seconds histogram\n"
                                 "# TYPE hearth_gen_inter_token_latency_seconds histogram\n");
    for (int i = 0; i < st->n_gen && !rc; i++) {
        hearth_gen_sched_metrics m;
        hearth_gen_sched_get_metrics(st->gen_models[i].sched, &m);
        const char *n = st->gen_models[i].info->name;
        rc = hearth_buf_printf(out,
                               "hearth_gen_prompt_tokens_total{model=\"%s\"} %llu\n"
                               "hearth_gen_prompt_tokens_cached_total{model=\"%s\"} %llu\n"
                               "hearth_gen_generated_tokens_total{model=\"%s\"} %llu\n"
                               "hearth_gen_requests_total{model=\"%s\",result=\"done\"} %llu\n"
                               "hearth_gen_requests_total{model=\"%s\",result=\"cancelled\"} %llu\n"
                               "hearth_gen_requests_total{model=\"%s\",result=\"failed\"} %llu\n"
                               "hearth_gen_prefix_cache_hits_total{model=\"%s\"} %llu\n"
                               "hearth_gen_queue_depth{model=\"%s\"} %d\n"
                               "hearth_gen_live_sequences{model=\"%s\"} %d\n"
                               "hearth_gen_kv_cache_used_ratio{model=\"%s\"} %.4f\n",
                               n, (unsigned long long)m.prompt_tokens, n, (unsigned long long)m.prompt_tokens_cached, n,
                               (unsigned long long)m.gen_tokens, n, (unsigned long long)m.requests_done, n,
                               (unsigned long long)m.requests_cancelled, n, (unsigned long long)m.requests_failed, n,
                               (unsigned long long)m.prefix_hits, n, m.queued, n, m.live, n,
                               m.kv_positions_total ? (double)m.kv_positions_used / (double)m.kv_positions_total : 0.0);
        if (!rc)
            rc = hist(out, "hearth_gen_time_to_first_token_seconds", n, m.ttft_bucket, m.ttft_sum, m.ttft_count);
        if (!rc)
            rc = hist(out, "hearth_gen_inter_token_latency_seconds", n, m.itl_bucket, m.itl_sum, m.itl_count);
    }
    return rc;
}
