/* api.h: the HTTP APIs: the only layer that sees both the server (net) and
 * the engine. Each API family registers its routes on the server. */
#ifndef HEARTH_API_API_H
#define HEARTH_API_API_H

#include "engine/sampler.h"
#include "net/server.h"

#include <stdbool.h>
#include <stdint.h>

#define HEARTH_API_MAX_MODELS 16

/* A served model as /v1/models lists it. */
typedef struct hearth_api_model {
    char name[128];
    char family[32];   /* "embedding", "generation", "vision" */
    char source[512];  /* file or folder it came from, or "demo" */
    bool demo;         /* random weights made by hearth itself */
    bool named;        /* its name came from the operator (NAME=PATH or --alias), not its file */
    int64_t created;   /* unix time it was loaded */
} hearth_api_model;

typedef struct hearth_api_state hearth_api_state; /* loaded models and their queues (models.h) */

/* What serve's flags say about models; borrowed for the life of the api. */
typedef struct hearth_api_config {
    const char *const *models;   /* --model values: PATH or NAME=PATH */
    int n_models;
    const char *alias;           /* --alias: the name of a --model given without NAME= (llama-server's) */
    const char *demo_dir;        /* where demo models are written when no --model is given */
    bool no_demo;                /* serve no model at all when none is given */
    const char *dtype;           /* --dtype for encoders: f32, bf16, int8 */
    size_t max_batch_tokens;
    int max_concurrent;
    int max_client_batch;
    int compute_threads;         /* 0: one per physical core */
    int embed_lanes;           /* encoder passes at once, each on compute_threads / N threads (0: 2) */
    const char *default_prompt_name; /* --default-prompt-name: an encoder prompt for texts that name none */
    const char *default_prompt;  /* --default-prompt: text put before texts that name no prompt */
    /* generation */
    int parallel;                /* --parallel live sequences per model (4) */
    int cache_slots;             /* --cache-slots idle KV slots kept for prefix reuse (4) */
    int ctx_size;                /* --ctx-size positions of all --parallel sequences together, as llama-server's
                                    -c (0: the model's per sequence, capped at 4096) */
    int n_predict;               /* --n-predict: the most tokens an answer may have (-1: no limit) */
    hearth_sampler_params sampling; /* --temp, --top-k, ..., --seed: for requests that give none */
    bool context_shift;          /* --context-shift: shift a full context, truncate a long prompt (off, as llama-server's) */
    bool embedding_only;         /* --embedding: serve embedding models only, as llama-server's */
    bool reranking;              /* --reranking: every encoder must be a reranker (a load error otherwise) */
    const char *pooling;         /* --pooling mean|cls|last: every embedding model pools so (NULL: its own) */
    bool slots;                  /* --slots: GET /slots lists the slots (off, as llama-server's at c392e50) */
    bool verbose;                /* -v/--verbose: OpenAI answers carry llama-server's "__verbose" object too */
    bool spm_infill;             /* --spm-infill: /infill puts the suffix before the prefix (llama-server's) */
    const char *slot_save_path;  /* --slot-save-path DIR: POST /slots/{id}?action=save|restore|erase files (NULL: 501) */
    int max_queue;               /* --max-queue waiting generation requests (64) */
    int batch_size;              /* --batch-size tokens per forward pass (512) */
    int decode_steps;            /* --decode-steps: greedy decode steps one call may run on a GPU
                                    (HEARTH_GEN_DECODE_STEPS; 1: a call a step) */
    const char *chat_template;   /* --chat-template override (a family's name) */
    bool jinja;                  /* --jinja: chat templates run by the Jinja interpreter (text/jinja.h) */
    const char *chat_template_jinja; /* with --jinja: the template source --chat-template or
                                        --chat-template-file gave (serve parsed it once), or NULL */
    const char *cache_type;      /* --cache-type of the KV cache: f16 (default) or f32 */
    bool repack;                 /* --repack F16 weights into GEMM panels at load (on) */
    const char *device;          /* --device of generation models: "cpu", "cuda[:N]", or a comma list, one per
                                    worker in turn */
    int worker_index;            /* which entry of device this process takes (-1: the first) */
    /* frame models (.onnx), also on --device */
    const char *frame_shapes;    /* --shape NAME=DIMS[,...]: fixed dims of inputs declared dynamic */
    const char *frame_states;    /* --state IN=OUT[,...]: state pairs (default: MODEL.state beside the model) */
    int frame_slots;             /* --sequence-slots: sequences with state held at once (16) */
    int frame_threads;           /* --frame-threads: CPU threads of frames (0: --threads) */
    double deadline_ms;          /* --deadline-ms: a frame's deadline when its request gives no timeout (0: none) */
    uint64_t seq_timeout_ms;     /* --sequence-timeout-ms: an idle sequence expires (5000) */
    bool keepalive;              /* --keepalive: keep a GPU's clocks up between frames (on) */
    int frame_spin_us;           /* --frame-spin-us: frame models on a GPU: the frame thread and the I/O thread
                                    poll this long around a frame instead of sleeping (1000; 0: sleep) */
    int frame_lead_us;           /* --frame-lead-us: frame models on a GPU: a paced stream's next frame is met
                                    by both threads polling this long either side of its expected arrival
                                    (frame_queue.h's Cadence; 500; 0: they sleep until it comes) */
} hearth_api_config;

typedef struct hearth_api {
    hearth_server *server;
    hearth_api_config cfg;
    hearth_api_model models[HEARTH_API_MAX_MODELS];
    int n_models;
    _Atomic int ready;  /* 0 while models load: /health answers 503 */
    hearth_api_state *state;
} hearth_api;

void hearth_api_config_default(hearth_api_config *cfg);

/* Registers /health, /metrics, /v1/models and /v1/models/{id}. api must outlive the server. */
int hearth_api_register_system(hearth_api *api, hearth_server *s);
/* Registers the embedding APIs: TEI's POST /embed (also at / and /invocations,
 * where @huggingface/inference and SageMaker post), /embed_all and
 * /similarity; OpenAI's POST /v1/embeddings (and /embeddings). */
int hearth_api_register_embed(hearth_api *api, hearth_server *s);
/* Registers reranking (rerank.c): POST /rerank, /reranking, /v1/rerank and
 * /v1/reranking, in llama-server's/Jina's shape or, for a body with
 * "texts", TEI's. */
int hearth_api_register_rerank(hearth_api *api, hearth_server *s);
/* Registers TEI's routes around /embed (tei.c): GET /info, GET /ping (the
 * health check TEI and SageMaker call: public, answered as /health), POST
 * /tokenize (shared with llama-server's form) and POST /decode. */
int hearth_api_register_tei(hearth_api *api, hearth_server *s);
/* Registers the generation APIs: llama-server's /completion, /detokenize,
 * /props and OpenAI's /v1/completions, /v1/chat/completions. */
int hearth_api_register_generation(hearth_api *api, hearth_server *s);
/* Registers the Open Inference Protocol (KServe v2, as Triton serves it)
 * over the frame models (oip.c): /v2, /v2/health/live|ready,
 * /v2/models/{m}[/versions/{v}][/ready|/infer]. */
int hearth_api_register_oip(hearth_api *api, hearth_server *s);
/* Triton's system shared memory extension (oip_shm.h); workers: the
 * server's worker processes (regions need one). */
int hearth_api_register_oip_shm(hearth_api *api, hearth_server *s, int workers);
/* Loads the configured models (or writes and loads the demos) in this process;
 * sets ready. Returns 0 or a negative status with err naming the model. */
int hearth_api_load_models(hearth_api *api, hearth_err *err);
/* Frees what load_models made. */
void hearth_api_unload_models(hearth_api *api);

#endif
