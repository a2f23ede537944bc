/* models.h: the models one serving process has loaded, by name, and how they
 * are loaded from the --model flags (or made as demos when none is given).
 * Private to the api layer. */
#ifndef HEARTH_API_MODELS_H
#define HEARTH_API_MODELS_H

#include "api.h"
#include "chat_jinja.h"
#include "embed_parse.h"

#include "base/pool.h"
#include "engine/embed_queue.h"
#include "engine/gen_sched.h"
#include "models/bert.h"
#include "models/decoder.h"
#include "oip_models.h"
#include "text/chat_template.h"
#include "text/jinja.h"

#include <cjson/cJSON.h>

/* Options of the embedding family, from serve's flags. */
typedef struct hearth_embed_opts {
    size_t max_batch_tokens;     /* --max-batch-tokens */
    int max_concurrent;          /* --max-concurrent-requests: queued requests per model; past it 429 */
    int max_client_batch;        /* --max-client-batch: inputs in one request; past it 413 */
    enum hearth_bert_dtype dtype;
} hearth_embed_opts;

typedef struct hearth_embed_model hearth_embed_model;

/* What one lane of an encoder's queue computes with. */
typedef struct hearth_embed_lane {
    hearth_embed_model *m;
    hearth_pool *pool;           /* borrowed: hearth_api_state's embed_pools[i] */
} hearth_embed_lane;

struct hearth_embed_model {
    hearth_api_model *info;      /* its /v1/models entry */
    hearth_bert *bert;
    hearth_embed_queue *queue;
    hearth_embed_lane lanes[HEARTH_EMBED_LANES_MAX];
    hearth_embed_lane wide;    /* a lone request's pass: on the shared pool, every thread */
    const char *prompt;          /* put before a text whose request names no prompt, or NULL */
    size_t prompt_len;
    bool rerank;                 /* a cross-encoder: its queue scores pairs (one float per sequence), it embeds nothing */
};

/* Options of the generation family, from serve's flags. */
typedef struct hearth_gen_opts {
    int n_parallel;              /* --parallel: live sequences per model */
    int n_cache_slots;           /* --cache-slots: extra KV slots that keep idle prefixes */
    int64_t n_ctx;               /* per sequence: --ctx-size / --parallel (0: the model's, capped at 4096) */
    int max_queue;               /* --max-queue: waiting requests; past it 503 */
    int32_t n_batch;             /* --batch-size: tokens per forward pass */
    int decode_steps;            /* --decode-steps (engine/gen_sched.h's runs) */
    const char *chat_template;   /* --chat-template override, or NULL */
    bool jinja;                  /* --jinja */
    const char *chat_template_jinja; /* --jinja's template source from the command line, or NULL */
    hearth_dtype kv_type;        /* --cache-type: HEARTH_F16 (default) or HEARTH_F32 */
} hearth_gen_opts;

/* A generation model: the decoder (weights, tokenizer, KV cache) and the
 * scheduler thread that drives it. */
typedef struct hearth_gen_entry {
    hearth_api_model *info;
    hearth_decoder *dec;
    hearth_gen_sched *sched;
    int64_t n_ctx;               /* per sequence */
    int n_parallel;
    hearth_sampler_params sampling; /* a request's defaults (--temp, ..., --seed; repeat_last_n -1 mapped) */
    int32_t n_predict;           /* --n-predict: the most tokens an answer may have (-1: no limit) */
    bool context_shift;          /* --context-shift */
    int64_t n_ctx_train;         /* the model's trained context: bounds an answer with no limit once it may shift */
    hearth_chat_template_kind tmpl; /* the built-in that renders chat, or (with jinja) the tool-call format */
    hearth_jinja *jinja;         /* --jinja: the template that renders chat (owned), or NULL */
    hearth_chat_jinja_caps jinja_caps; /* what jinja does with system turns (probed at load) */
    char tmpl_source[16];        /* "gguf", "override" or "fallback" (chatml: the GGUF has none hearth knows) */
    char bos_text[64];           /* the BOS token's text, for templates that write it */
    hearth_token_texts *token_texts; /* every token's text, for grammars (gen_grammar.c) */
} hearth_gen_entry;

struct hearth_api_state {
    hearth_pool *pool;           /* the compute threads, shared by the models */
    /* the encoders' lanes' pools (lane i of every encoder runs on
     * embed_pools[i]): one, st->pool itself, or n_embed_pools of
     * compute_threads / n_embed_pools threads each */
    hearth_pool *embed_pools[HEARTH_EMBED_LANES_MAX];
    int n_embed_pools;
    hearth_embed_opts embed;
    hearth_embed_model embed_models[HEARTH_API_MAX_MODELS];
    int n_embed;
    hearth_gen_opts gen;
    hearth_gen_entry gen_models[HEARTH_API_MAX_MODELS];
    int n_gen;
    /* frame models (frame_models.c) and the CPU threads their frames run on */
    hearth_frame_entry frame_models[HEARTH_API_MAX_MODELS];
    int n_frame;
    hearth_pool *frame_pool;
    bool frame_pool_made;
};

/* The encoder a request names (NULL name: the first that is not a
 * reranker, else the first); NULL when none matches. */
hearth_embed_model *hearth_api_find_embed(hearth_api *api, const char *name);
/* The same, or responds (503 while loading, 404 naming the model) and returns NULL (embed.c). */
hearth_embed_model *hearth_api_embed_model_or_respond(hearth_request *req, hearth_api *api, const char *name);
/* embed.c's helpers for tei.c. The body parsed as which, or a 400/413
 * answered and false (free p after true). */
bool hearth_api_embed_parse_or_respond(hearth_request *req, hearth_api *api, enum hearth_embed_api which,
                                       hearth_embed_parsed *p);
/* The prompt put before each text input: the one the request names, else
 * the default (--default-prompt[-name], else the model's own; none for most
 * models): *text NULL for none. On a name the model lacks, responds 400 and
 * returns false. */
bool hearth_api_embed_prompt_or_respond(hearth_request *req, hearth_embed_model *m, const char *name, const char **text,
                                        size_t *len);
/* prompt + text as one NUL-terminated malloc'd string of *len bytes (NULL on ENOMEM). */
char *hearth_api_with_prompt(const char *prompt, size_t plen, const char *text, size_t tlen, size_t *len);
/* The generation model a request names (NULL name: the first one); NULL when none matches. */
hearth_gen_entry *hearth_api_find_gen(hearth_api *api, const char *name);

/* llama-server's /tokenize ({"content": ...}): /tokenize is shared with TEI's
 * form ({"inputs": ...}); tei.c dispatches on the body (completion.c). */
void hearth_api_llama_tokenize(hearth_request *req, hearth_api *api, const cJSON *doc);

/* Appends the model families' metrics (models.c). */
int hearth_api_metrics(hearth_api *api, hearth_buf *out);

/* gen_models.c: a generation model from a decoder GGUF (models/decoder.h); the demo; unloading; metrics. */
int hearth_api_add_gen(hearth_api *api, const char *name, const char *path, bool demo, hearth_err *err);
int hearth_api_load_gen_demo(hearth_api *api, const char *dir, hearth_err *err);
void hearth_api_unload_gen(hearth_api *api);
int hearth_api_gen_metrics(hearth_api *api, hearth_buf *out);

/* frame_models.c: a frame model from an .onnx file (models/frame.h), its queue and its OIP registration. */
bool hearth_api_is_frame_path(const char *path);
int hearth_api_add_frame(hearth_api *api, const char *name, const char *path, hearth_err *err);
void hearth_api_unload_frames(hearth_api *api);

#endif
