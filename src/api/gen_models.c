/* gen_models.c: generation models in a serving process: opening a llama-
 * family GGUF, its KV cache (--parallel live sequences plus --cache-slots
 * idle ones that keep prefixes for reuse), the scheduler thread, and the
 * adapter that lets the engine's scheduler drive hearth_llama without the
 * engine depending on models/. Also the demo: a tiny random-weight llama
 * with a byte-level vocabulary and a ChatML template, written by hearth. */
#include "models.h"

#include "base/clock.h"
#include "base/log.h"
#include "models/gguf_write.h"
#include "models/llama_demo.h"
#include "text/tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---- the adapter: hearth_gen_batch_model over hearth_llama ---- */

static int adapt_forward(void *ctx, int32_t n, const int32_t *tokens, const int32_t *slots, const bool *want, float *logits,
                         hearth_err *err)
{
    hearth_gen_entry *g = ctx;
    hearth_llama_batch b = {.n = n, .tokens = tokens, .slot = slots, .want_logits = want};
    return hearth_llama_forward(g->llama, g->kv, g->pool, &b, logits, err);
}

static void adapt_truncate(void *ctx, int slot, int64_t n)
{
    hearth_gen_entry *g = ctx;
    if (n < hearth_kv_len(g->kv, slot))
        hearth_kv_truncate(g->kv, slot, n);
}

/* Generated text always continues a prompt (at least BOS), so SentencePiece's
 * leading space is kept: " park." after "...went to the", as llama-server
 * sends each piece (llama_token_to_piece without lstrip). Stripping it, as a
 * decode from the start of a text does, glued the first word to the prompt. */
static void adapt_detok_init(void *ctx, void *state)
{
    hearth_gen_entry *g = ctx;
    hearth_detok_init(state, hearth_llama_tokenizer(g->llama), false, false);
}

static int adapt_detok_push(void *ctx, void *state, int32_t id, hearth_buf *out) { return hearth_detok_push(state, id, out); }
static int adapt_detok_flush(void *ctx, void *state, hearth_buf *out) { return hearth_detok_flush(state, out); }

/* The chat template: --chat-template, else the GGUF's when hearth knows its
 * family, else chatml with a warning, as llama-server falls back (its
 * common_chat_templates_init for a GGUF without one; its start-up check for
 * one it cannot apply). Rejected: refusing chat (a 400) for such a model: a
 * client written for llama-server gets an answer there. */
static void find_template(hearth_gen_entry *g, const char *override)
{
    if (override && *override && hearth_chat_template_by_name(override, &g->tmpl) == 0) {
        snprintf(g->tmpl_source, sizeof g->tmpl_source, "override");
        return;
    }
    if (override && *override)
        HLOG_WARN("--chat-template '%s' is not one hearth knows (chatml, llama3, phi3, gemma, mistral, llama2)", override);
    const char *src;
    size_t len;
    bool in_gguf = hearth_gguf_get_str(hearth_llama_gguf(g->llama), "tokenizer.chat_template", &src, &len, NULL) == 0;
    if (in_gguf && hearth_chat_template_detect(src, len, &g->tmpl) == 0) {
        snprintf(g->tmpl_source, sizeof g->tmpl_source, "gguf");
        return;
    }
    g->tmpl = HEARTH_TMPL_CHATML;
    snprintf(g->tmpl_source, sizeof g->tmpl_source, "fallback");
    HLOG_WARN("model '%s': %s: chat falls back to chatml, as llama-server's does; it may answer poorly "
              "(--chat-template chatml, llama3, phi3, gemma, mistral or llama2 chooses another)",
              g->info->name, in_gguf ? "its chat template is not one hearth recognises" : "its GGUF has no chat template");
}

int hearth_api_add_gen(hearth_api *api, const char *name, const char *path, bool demo, hearth_err *err)
{
    hearth_api_state *st = api->state;
    if (api->n_models >= HEARTH_API_MAX_MODELS)
        return hearth_err_set(err, HEARTH_ELIMIT, "at most %d models", HEARTH_API_MAX_MODELS);
    uint64_t t0 = hearth_now_ns();
    hearth_gen_entry *g = &st->gen_models[st->n_gen];
    memset(g, 0, sizeof *g);
    const hearth_llama_open_opts lo = {.no_repack = !api->cfg.repack};
    int rc = hearth_llama_open_with(&g->llama, path, &lo, err);
    if (rc)
        return rc;
    const hearth_llama_hparams *hp = hearth_llama_hparams_get(g->llama);
    g->pool = st->pool;
    g->n_parallel = st->gen.n_parallel;
    g->n_ctx = st->gen.n_ctx > 0 ? st->gen.n_ctx : hp->n_ctx_train < 4096 ? hp->n_ctx_train : 4096;
    g->sampling = api->cfg.sampling;
    if (g->sampling.repeat_last_n < 0) /* llama-server's -1: the context */
        g->sampling.repeat_last_n = (int)(g->n_ctx < HEARTH_SAMPLER_MAX_LAST_N ? g->n_ctx : HEARTH_SAMPLER_MAX_LAST_N);
    g->n_predict = api->cfg.n_predict;
    int n_slots = st->gen.n_parallel + st->gen.n_cache_slots;
    g->kv = hearth_kv_new_typed(g->llama, n_slots, g->n_ctx, st->gen.kv_type, err);
    if (!g->kv) {
        hearth_llama_close(g->llama);
        return err ? err->code : HEARTH_ENOMEM;
    }
    const hearth_vocab *v = hearth_llama_vocab(g->llama);
    hearth_gen_batch_model bm = {
        .ctx = g,
        .n_vocab = (int32_t)hp->n_vocab,
        .n_slots = n_slots,
        .n_ctx = g->n_ctx,
        .forward = adapt_forward,
        .truncate = adapt_truncate,
        .detok_size = sizeof(hearth_detok),
        .detok_init = adapt_detok_init,
        .detok_push = adapt_detok_push,
        .detok_flush = adapt_detok_flush,
    };
    int32_t ends[3] = {v->eos, v->eot, -1};
    for (int i = 0; i < 3; i++) {
        bool dup = false;
        for (int k = 0; k < bm.n_end_ids; k++)
            dup |= bm.end_ids[k] == ends[i];
        if (ends[i] >= 0 && !dup)
            bm.end_ids[bm.n_end_ids++] = ends[i];
    }
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
    find_template(g, st->gen.chat_template);
    hearth_gen_sched_config sc = {.n_parallel = st->gen.n_parallel, .max_queue = st->gen.max_queue, .n_batch = st->gen.n_batch};
    g->sched = hearth_gen_sched_new(&bm, &sc, err);
    if (!g->sched) {
        hearth_kv_free(g->kv);
        hearth_llama_close(g->llama);
        return err ? err->code : HEARTH_ENOMEM;
    }
    api->n_models++;
    st->n_gen++;
    HLOG_INFO("model '%s': %s %s from %s, %lld-token context x %d sequences (+%d cached), %.0f MiB of %s KV cache, "
              "chat template %s, loaded in %.0f ms",
              name, demo ? "demo" : hp->arch, hearth_dtype_get(hearth_llama_weight_type(g->llama))->name, path,
              (long long)g->n_ctx, st->gen.n_parallel, st->gen.n_cache_slots, (double)hearth_kv_bytes(g->kv) / 1048576.0,
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
        hearth_gen_sched_free(st->gen_models[i].sched);
        hearth_kv_free(st->gen_models[i].kv);
        hearth_llama_close(st->gen_models[i].llama);
    }
    st->n_gen = 0;
}

/* ---- the demo ---- */

static const char CHATML[] =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

/* A byte-level SentencePiece vocabulary: <unk> <s> </s>, the 256 byte
 * tokens, the ChatML markers as control tokens, and "▁" + each printable
 * ASCII character, so every text tokenizes (bytes are the fallback). */
static int write_demo_vocab(const char *path, hearth_err *err)
{
    enum { N = 3 + 256 + 2 + 95 };
    char *tokens[N];
    float scores[N];
    int32_t types[N];
    char store[N][16];
    int n = 0;
    const char *fixed[3] = {"<unk>", "<s>", "</s>"};
    for (int i = 0; i < 3; i++) {
        snprintf(store[n], sizeof store[n], "%s", fixed[i]);
        types[n] = i == 0 ? HEARTH_TOK_UNKNOWN : HEARTH_TOK_CONTROL;
        scores[n] = 0;
        n++;
    }
    for (int b = 0; b < 256; b++, n++) {
        snprintf(store[n], sizeof store[n], "<0x%02X>", b);
        types[n] = HEARTH_TOK_BYTE;
        scores[n] = 0;
    }
    snprintf(store[n], sizeof store[n], "<|im_start|>");
    types[n] = HEARTH_TOK_CONTROL;
    scores[n++] = 0;
    snprintf(store[n], sizeof store[n], "<|im_end|>");
    types[n] = HEARTH_TOK_CONTROL;
    scores[n++] = 0;
    for (int c = 32; c < 127; c++, n++) {
        snprintf(store[n], sizeof store[n], "\xe2\x96\x81%c", c);
        types[n] = HEARTH_TOK_NORMAL;
        scores[n] = -(float)(c - 31);
    }
    for (int i = 0; i < n; i++)
        tokens[i] = store[i];
    hearth_gguf_writer *w = hearth_gguf_writer_new();
    if (!w)
        return hearth_err_set(err, HEARTH_ENOMEM, "out of memory");
    hearth_gguf_writer_add_str(w, "general.architecture", "llama");
    hearth_gguf_writer_add_str(w, "tokenizer.ggml.model", "llama");
    hearth_gguf_writer_add_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)tokens, (size_t)n);
    hearth_gguf_writer_add_arr_f32(w, "tokenizer.ggml.scores", scores, (size_t)n);
    hearth_gguf_writer_add_arr_i32(w, "tokenizer.ggml.token_type", types, (size_t)n);
    hearth_gguf_writer_add_u32(w, "tokenizer.ggml.unknown_token_id", 0);
    hearth_gguf_writer_add_u32(w, "tokenizer.ggml.bos_token_id", 1);
    hearth_gguf_writer_add_u32(w, "tokenizer.ggml.eos_token_id", 2);
    hearth_gguf_writer_add_u32(w, "tokenizer.ggml.eot_token_id", 3 + 256 + 1);
    hearth_gguf_writer_add_bool(w, "tokenizer.ggml.add_bos_token", true);
    hearth_gguf_writer_add_str(w, "tokenizer.chat_template", CHATML);
    int rc = hearth_gguf_writer_write(w, path, 32, err);
    hearth_gguf_writer_free(w);
    return rc;
}

int hearth_api_load_gen_demo(hearth_api *api, const char *dir, hearth_err *err)
{
    char vocab[1024], model[1024];
    snprintf(vocab, sizeof vocab, "%s/demo-vocab.gguf", dir);
    snprintf(model, sizeof model, "%s/demo-llama-tiny.gguf", dir);
    struct stat sb;
    if (stat(model, &sb) != 0) {
        char tmp[1100];
        snprintf(tmp, sizeof tmp, "%s.tmp", model);
        HLOG_INFO("writing the demo generation model (a tiny llama, random weights) to %s", model);
        int rc = write_demo_vocab(vocab, err);
        if (rc)
            return rc;
        hearth_llama_demo d;
        hearth_llama_demo_tiny(&d, "llama");
        d.wtype = HEARTH_Q8_0;
        d.vocab_path = vocab;
        d.n_ctx = 4096;
        rc = hearth_llama_demo_write(&d, tmp, err);
        if (rc)
            return rc;
        if (rename(tmp, model) != 0)
            return hearth_err_sys(err, 5, "cannot rename %s", tmp);
    }
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
