/* serve.c: `hearth serve`: flags (each with its environment variable), the
 * server, and the routes of every API family.
 *
 * llama-server's common flags are accepted with llama-server's meaning, so
 * its command lines work unchanged: -m, -c (the context of all slots
 * together), -np, -t (compute threads; hearth's I/O threads are
 * --io-threads), -tb, -b, -ub, -n, -s/--seed and the sampling defaults,
 * -a/--alias, --api-key, --embedding, --reranking/--rerank (every model a
 * cross-encoder; /rerank and its aliases score pairs), --pooling (mean, cls,
 * last, rank; none refused: /embed_all), --chat-template, --chat-template-file
 * (its family recognised, see chat_template_file), --jinja (the template
 * run by text/jinja.h's interpreter: the GGUF's, --chat-template's source
 * or --chat-template-file's), --slots (off by
 * default, as llama-server's at c392e50), --slot-save-path. Those hearth has no use for are
 * accepted where hearth already behaves so (--metrics, --cont-batching,
 * --no-webui, -v, -ngl with a note);
 * --context-shift / --no-context-shift as llama-server's (off by default,
 * as in its newer versions); those it cannot honour (--no-cont-batching, --webui, a Jinja --chat-template
 * or a template file of no family hearth renders without --jinja) are refused with a
 * message, as is any flag it does not know: never dropped unseen. CORS
 * answers any origin unless --cors-origin or --no-cors says otherwise, as
 * llama-server's does. */
#include "cli.h"
#include "opts.h"

#include "api/api.h"
#include "api/debug.h"
#include "base/file.h"
#include "base/log.h"
#include "models/decoder.h" /* hearth_decoder_cache_type_from_name */
#include "models/llama.h"   /* HEARTH_LLAMA_STEPS_MAX: --decode-steps' bound */
#include "net/server.h"
#include "text/chat_template.h"
#include "text/jinja.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int on_process_start(hearth_server *s, void *ctx)
{
    hearth_api *api = ctx;
    /* models load here, in each serving process, never in the supervisor */
    api->cfg.worker_index = hearth_server_worker_index(s);
    hearth_err err = {0};
    int rc = hearth_api_load_models(api, &err);
    if (rc)
        HLOG_ERROR("cannot load models: %s", err.msg);
    return rc;
}

static void on_process_exit(hearth_server *s, void *ctx)
{
    hearth_api_debug_stop(); /* its threads write replies too: gone before the loops */
    hearth_api_unload_models(ctx);
}

/* --chat-template-file's text under --jinja: the process's (held from
 * here, so an early exit leaks nothing a leak checker counts). */
static char *tmpl_text;

/* A --jinja template from the command line (what names it: what), parsed
 * once here so that an error stops the start naming it. 0, or 2 after the
 * message. */
static int jinja_check(const char *src, const char *what)
{
    hearth_jinja *t = NULL;
    hearth_err err = {0};
    int rc = hearth_jinja_parse(src, strlen(src), &t, &err);
    hearth_jinja_free(t);
    if (rc != 0)
        fprintf(stderr, "hearth serve: %s: the Jinja template cannot be run: %s\n", what, err.msg);
    return rc ? 2 : 0;
}

/* llama-server's --chat-template-file. With --jinja the file's template
 * renders chat (*src keeps its text for the process). Without, it is not
 * run (chat_template.h): hearth reads it, recognises its family by
 * the markers it looks for in a GGUF's template, and renders that family,
 * as if --chat-template named it. A file it cannot map to a family is
 * refused here, naming the file, rather than answered with another layout
 * the operator did not ask for. Tools are then rendered and parsed in that
 * family's format (chat_template.h, api/tool_calls.c). */
static int chat_template_file(hearth_api_config *c, const char *path, char **kept)
{
    if (c->chat_template && *c->chat_template) {
        fprintf(stderr, "hearth serve: --chat-template and --chat-template-file both name a template: give one\n");
        return 2;
    }
    char *src = NULL;
    size_t len = 0;
    hearth_err err = {0};
    if (hearth_file_read(path, (size_t)1 << 20, &src, &len, &err) != 0) {
        fprintf(stderr, "hearth serve: --chat-template-file: %s\n", err.msg);
        return 2;
    }
    if (c->jinja) {
        if (strlen(src) != len) {
            fprintf(stderr, "hearth serve: --chat-template-file '%s': the template holds a NUL byte\n", path);
            free(src);
            return 2;
        }
        *kept = src;
        c->chat_template_jinja = src;
        HLOG_INFO("--chat-template-file '%s': run as a Jinja template (--jinja)", path);
        return jinja_check(src, "--chat-template-file");
    }
    hearth_chat_template_kind k;
    int rc = hearth_chat_template_detect(src, len, &k);
    free(src);
    if (rc != 0) {
        fprintf(stderr, "hearth serve: --chat-template-file '%s': not a template hearth can map to a family it "
                        "renders (chatml, llama3, phi3, gemma, mistral, llama2, command-r: it looks for their "
                        "special tokens); give --jinja to run it as a Jinja template\n", path);
        return 2;
    }
    c->chat_template = hearth_chat_template_name(k);
    HLOG_INFO("--chat-template-file '%s': rendered as the %s family", path, c->chat_template);
    return 0;
}

/* The flags llama-server's command lines bring: each honoured, noted or
 * refused here with a message (an unknown flag is refused by opts_parse). */
static int llama_server_flags(hearth_api_config *c, const char *seed, int ubatch, int gpu_layers, bool jinja)
{
    if (c->parallel >= 1 && c->ctx_size > 0 && c->ctx_size < c->parallel) {
        fprintf(stderr, "hearth serve: --ctx-size %d is the context of all %d sequences (--parallel) together: "
                        "give at least one position each\n", c->ctx_size, c->parallel);
        return 2;
    }
    if (c->chat_template && *c->chat_template) {
        hearth_chat_template_kind k;
        if (hearth_chat_template_by_name(c->chat_template, &k) != 0) {
            if (!jinja) {
                fprintf(stderr, "hearth serve: --chat-template '%s' is not one hearth renders (chatml, llama3, phi3, "
                                "gemma, mistral, llama2, command-r); give --jinja to run it as a Jinja template\n",
                        c->chat_template);
                return 2;
            }
            /* llama-server's --jinja takes a template's source here too */
            c->chat_template_jinja = c->chat_template;
            c->chat_template = NULL;
            if (jinja_check(c->chat_template_jinja, "--chat-template") != 0)
                return 2;
        }
    }
    if (c->pooling) {
        if (!strcmp(c->pooling, "rank")) {
            c->reranking = true;
            c->pooling = NULL;
        } else if (!strcmp(c->pooling, "none")) {
            fprintf(stderr, "hearth serve: --pooling none: hearth serves every token's vector at TEI's POST /embed_all "
                            "for any model, not as a server-wide mode: drop the flag and call /embed_all\n");
            return 2;
        } else if (strcmp(c->pooling, "mean") && strcmp(c->pooling, "cls") && strcmp(c->pooling, "last")) {
            fprintf(stderr, "hearth serve: --pooling '%s': want mean, cls, last or rank (llama-server's names)\n",
                    c->pooling);
            return 2;
        }
    }
    if (seed) {
        char *end = NULL;
        long long v = strtoll(seed, &end, 10);
        if (!*seed || *end || v < -1 || v > (1ll << 53)) {
            fprintf(stderr, "hearth serve: --seed '%s': want -1 (random) or 0..2^53\n", seed);
            return 2;
        }
        c->sampling.seed = v < 0 ? HEARTH_SAMPLER_SEED_RANDOM : (uint64_t)v;
    }
    const hearth_sampler_params *p = &c->sampling;
    if (p->top_p < 0 || p->top_p > 1 || p->min_p < 0 || p->min_p > 1 || p->repeat_penalty <= 0 || p->top_k < -1 ||
        c->n_predict < -1) {
        fprintf(stderr, "hearth serve: --top-p and --min-p must be in 0..1, --repeat-penalty > 0, --top-k >= -1, "
                        "--n-predict >= -1\n");
        return 2;
    }
    if (ubatch < 0) {
        fprintf(stderr, "hearth serve: --ubatch-size must be >= 1\n");
        return 2;
    }
    if (ubatch > 0 && ubatch < c->batch_size)
        c->batch_size = ubatch;
    if (gpu_layers != 0 && (!c->device || strcmp(c->device, "cpu") == 0))
        HLOG_INFO("note: --gpu-layers %d is ignored: generation models run where --device says (cpu; --device cuda "
                  "puts every layer on the GPU)", gpu_layers);
    return 0;
}

int hearth_cmd_serve(int argc, char **argv, char **full_argv)
{
    hearth_server_config cfg;
    hearth_server_config_default(&cfg);
    const char *log_level = "info";
    const char *poller = "auto";
    bool debug_routes = false;
    size_t request_line = cfg.limits.max_request_line, header_bytes = cfg.limits.max_header_bytes;
    int max_headers = (int)cfg.limits.max_headers;
    static hearth_api api; /* lives as long as the process: handlers hold it */
    hearth_api_config_default(&api.cfg);
    opt_str_list models = {0};
    int max_batch_tokens = (int)api.cfg.max_batch_tokens;
    bool demo = true;
    /* llama-server's flags with no hearth counterpart: checked below, never dropped unseen */
    const char *seed = NULL, *tmpl_file = NULL;
    int ubatch = 0, gpu_layers = 0, threads_batch = -1;
    float deadline_ms = 0;
    bool jinja = false, metrics = false, cont_batching = true, webui = false,
         verbose = false, cors = true;
    const opt opts[] = {
        {"model", 'm', OPT_STR_LIST, &models, "[NAME=]PATH", "a model to serve: a sentence-transformers folder or a GGUF file; repeat for more (none: demo models)"},
        {"alias", 'a', OPT_STR, &api.cfg.alias, "NAME", "the name the one --model is served under (llama-server's; default: its file name)"},
        {"dtype", 0, OPT_STR, &api.cfg.dtype, "f32|bf16|int8", "weights of embedding models in memory (f32)"},
        {"max-batch-tokens", 0, OPT_INT, &max_batch_tokens, "N", "tokens in one embedding forward pass (16384)"},
        {"max-concurrent-requests", 0, OPT_INT, &api.cfg.max_concurrent, "N", "requests queued per model; past it 429 (512)"},
        {"max-client-batch", 0, OPT_INT, &api.cfg.max_client_batch, "N", "inputs in one embedding request; past it 413 (512)"},
        {"threads", 't', OPT_INT, &api.cfg.compute_threads, "N", "threads for the forward passes, as llama-server's -t (0: one per physical core)"},
        {"compute-threads", 0, OPT_INT, &api.cfg.compute_threads, "N", "the same as --threads"},
        {"threads-batch", 0, OPT_INT, &threads_batch, "N", "llama-server's prompt threads: hearth has one pool for prompts and decoding, so it must equal --threads (or sets it when that is not given)", .dash_name = "tb"},
        {"embed-engines", 0, OPT_INT, &api.cfg.embed_lanes, "N", "embedding passes run at once, each on compute-threads / N threads (0: 2 where there are 2+ threads; 1: every pass on all threads; a lone request always runs on all)"},
        {"default-prompt-name", 0, OPT_STR, &api.cfg.default_prompt_name, "NAME", "embedding: the prompt of the model's config_sentence_transformers.json put before every text whose request names none (default: the model's default_prompt_name)"},
        {"default-prompt", 0, OPT_STR, &api.cfg.default_prompt, "TEXT", "embedding: text put before every text whose request names no prompt"},
        {"parallel", 0, OPT_INT, &api.cfg.parallel, "N", "generation: sequences decoded together per model (4)", .dash_name = "np"},
        {"cache-slots", 0, OPT_INT, &api.cfg.cache_slots, "N", "generation: extra KV slots that keep finished prompts for reuse (4)"},
        {"ctx-size", 'c', OPT_INT, &api.cfg.ctx_size, "N", "generation: positions of all --parallel sequences together, each getting N / --parallel, as llama-server's -c (0: the model's per sequence, at most 4096)"},
        {"n-predict", 'n', OPT_INT, &api.cfg.n_predict, "N", "generation: the most tokens an answer may have, whatever the request asks (-1: up to the context)"},
        {"seed", 's', OPT_STR, &seed, "N", "generation: the sampling seed of requests that give none (-1: a random one each)"},
        {"temp", 0, OPT_FLOAT, &api.cfg.sampling.temperature, "T", "generation: default temperature (0.8; <= 0: greedy)"},
        {"top-k", 0, OPT_INT, &api.cfg.sampling.top_k, "N", "generation: default top-k (40; 0: off)"},
        {"top-p", 0, OPT_FLOAT, &api.cfg.sampling.top_p, "P", "generation: default top-p (0.95; 1: off)"},
        {"min-p", 0, OPT_FLOAT, &api.cfg.sampling.min_p, "P", "generation: default min-p (0.05; 0: off)"},
        {"repeat-penalty", 0, OPT_FLOAT, &api.cfg.sampling.repeat_penalty, "X", "generation: default repeat penalty (1: off)"},
        {"repeat-last-n", 0, OPT_INT, &api.cfg.sampling.repeat_last_n, "N", "generation: default penalty window (64; 0: off; -1: the context)"},
        {"presence-penalty", 0, OPT_FLOAT, &api.cfg.sampling.presence_penalty, "X", "generation: default presence penalty (0: off)"},
        {"frequency-penalty", 0, OPT_FLOAT, &api.cfg.sampling.frequency_penalty, "X", "generation: default frequency penalty (0: off)"},
        {"cache-type", 0, OPT_STR, &api.cfg.cache_type, "f16|f32", "generation: KV cache elements (f16: half the memory, as llama.cpp; f32: exact)"},
        {"max-queue", 0, OPT_INT, &api.cfg.max_queue, "N", "generation: requests waiting for a sequence; past it 503 (64)"},
        {"batch-size", 'b', OPT_INT, &api.cfg.batch_size, "N", "generation: tokens per forward pass, decode rows and prompt chunks (512)"},
        {"decode-steps", 0, OPT_INT, &api.cfg.decode_steps, "N", "generation on a GPU: while every sequence decodes greedily and no request waits, one call runs up to N steps, the GPU feeding each sequence its own draw (8; 1: a call a step; at most 16)"},
        {"ubatch-size", 0, OPT_INT, &ubatch, "N", "generation: llama-server's physical batch: a forward pass takes at most min(-b, -ub) tokens", .dash_name = "ub"},
        {"repack", 0, OPT_BOOL, &api.cfg.repack, NULL, "generation: F16 weights into the GEMM's layout at load, ~15% faster prompts (on; --no-repack keeps them in place, shared by --workers)"},
        {"chat-template", 0, OPT_STR, &api.cfg.chat_template, "NAME", "chatml, llama3, phi3, gemma, mistral, llama2 or command-r instead of the model's (without one in the GGUF: chatml); with --jinja also a Jinja template's source"},
        {"chat-template-file", 0, OPT_STR, &tmpl_file, "FILE", "a Jinja chat template (llama-server's): with --jinja it runs; without, its family is recognised (as --chat-template names them) and rendered, and one hearth cannot map is refused"},
        {"jinja", 0, OPT_BOOL, &jinja, NULL, "run the chat template itself (the GGUF's, or --chat-template's / --chat-template-file's source) in hearth's Jinja interpreter, as llama-server's --jinja; without it the template's family is rendered by a built-in"},
        {"context-shift", 0, OPT_BOOL, &api.cfg.context_shift, NULL, "generation: an answer that fills the context drops the older half of it (after the request's n_keep) and goes on, and a prompt past it is truncated, as llama-server's (off; --no-context-shift: a 400 and an answer that ends there)"},
        {"embedding", 0, OPT_BOOL, &api.cfg.embedding_only, NULL, "serve embedding models only, as llama-server's (a generation model is refused)"},
        {"embeddings", 0, OPT_BOOL, &api.cfg.embedding_only, NULL, "the same as --embedding"},
        {"reranking", 0, OPT_BOOL, &api.cfg.reranking, NULL, "every model must be a reranker (a BERT cross-encoder: BertForSequenceClassification, or a GGUF of pooling type rank); POST /rerank scores (query, document) pairs. A cross-encoder reranks without it too, and embeds nothing"},
        {"rerank", 0, OPT_BOOL, &api.cfg.reranking, NULL, "the same as --reranking"},
        {"pooling", 0, OPT_STR, &api.cfg.pooling, "TYPE", "how embedding models pool, as llama-server's: mean, cls, last (every model, whatever its config says), or rank (as --reranking); none (every token's vector) is TEI's /embed_all here, and refused as a flag"},
        {"metrics", 0, OPT_BOOL, &metrics, NULL, "accepted for llama-server's command lines: /metrics is always served"},
        {"slots", 0, OPT_BOOL, &api.cfg.slots, NULL, "GET /slots lists the generation slots, as llama-server's (off; --no-slots)"},
        {"slot-save-path", 0, OPT_STR, &api.cfg.slot_save_path, "DIR", "POST /slots/{id}?action=save|restore|erase keeps slot files in DIR, made if missing (none: 501)"},
        {"cont-batching", 0, OPT_BOOL, &cont_batching, NULL, "accepted for llama-server's command lines: generation is always batched continuously (--no-cont-batching is refused)", .dash_name = "cb"},
        {"webui", 0, OPT_BOOL, &webui, NULL, "refused: hearth has no web UI (--no-webui is accepted)"},
        {"spm-infill", 0, OPT_BOOL, &api.cfg.spm_infill, NULL, "/infill puts the suffix before the prefix, as llama-server's --spm-infill (the order some code models were trained on)"},
        {"verbose", 0, OPT_BOOL, &verbose, NULL, "the same as --log-level debug, and OpenAI answers carry llama-server's __verbose object (llama-server's -v)", .dash_name = "v"},
        {"device", 0, OPT_STR, &api.cfg.device, "cpu|cuda[:N][,...]", "where generation and frame models run (cpu); a comma list gives each --spawn worker the next in turn"},
        {"shape", 0, OPT_STR, &api.cfg.frame_shapes, "NAME=DIMS[,...]", "frame models: fixed dims for inputs the ONNX file leaves dynamic, e.g. input=1x3x320x320"},
        {"state", 0, OPT_STR, &api.cfg.frame_states, "IN=OUT[,...]", "frame models: state pairs, OUT of one frame is IN of the next in a sequence (default: MODEL.state beside the model)"},
        {"sequence-slots", 0, OPT_INT, &api.cfg.frame_slots, "N", "frame models with state: sequences held at once (16)"},
        {"sequence-timeout-ms", 0, OPT_U64, &api.cfg.seq_timeout_ms, "MS", "frame models: a sequence idle this long expires (5000)"},
        {"deadline-ms", 0, OPT_FLOAT, &deadline_ms, "MS", "frame models: a frame's deadline when its request sets no timeout (none); a frame that cannot make it is answered late at once"},
        {"frame-threads", 0, OPT_INT, &api.cfg.frame_threads, "N", "frame models: CPU threads their frames run on (0: --threads)"},
        {"frame-spin-us", 0, OPT_INT, &api.cfg.frame_spin_us, "US", "frame models on a GPU: around each frame (and while its bytes arrive) the frame thread and the connection's thread poll this long instead of sleeping, so the answer and a client's next frame meet no thread's wake-up (1000; 0: sleep)"},
        {"frame-lead-us", 0, OPT_INT, &api.cfg.frame_lead_us, "US", "frame models on a GPU: when frames come at a steady rate, the frame thread and the connection's thread poll from this long (plus the gaps' jitter) before the next frame is due until as long after, instead of sleeping through its arrival (500; 0: sleep)"},
        {"keepalive", 0, OPT_BOOL, &api.cfg.keepalive, NULL, "frame models on a GPU: a tiny kernel between frames keeps its clocks up, stopping 1 s after the last frame (on; --no-keepalive)"},
        {"gpu-layers", 0, OPT_INT, &gpu_layers, "N", "accepted; with --device cuda every layer is on the GPU, else a note says it is ignored", .dash_name = "ngl"},
        {"n-gpu-layers", 0, OPT_INT, &gpu_layers, "N", "the same as --gpu-layers"},
        {"demo", 0, OPT_BOOL, &demo, NULL, "serve demo models when no --model is given (on; --no-demo serves none)"},
        {"demo-dir", 0, OPT_STR, &api.cfg.demo_dir, "DIR", "where demo models are written (~/.cache/hearth/demo)"},
        {"host", 0, OPT_STR, &cfg.host, "ADDR", "address to listen on (127.0.0.1; 0.0.0.0 or :: for every interface)"},
        {"port", 'p', OPT_INT, &cfg.port, "N", "TCP port (8080; 0 picks a free one)"},
        {"io-threads", 0, OPT_INT, &cfg.threads, "N", "I/O threads per process, each with its own event loop (1)"},
        {"handler-threads", 0, OPT_INT, &cfg.handler_threads, "N", "threads per process that run the handlers of large requests (bodies over --offload-body) off the I/O threads (2; 0: all on the I/O threads)"},
        {"offload-body", 0, OPT_SIZE, &cfg.offload_body, "BYTES", "a request body this large or larger is parsed and tokenized on a handler thread (16K)"},
        {"workers", 'w', OPT_INT, &cfg.workers, "N", "worker processes under a supervisor that respawns them (0: one process)"},
        {"spawn", 0, OPT_BOOL, &cfg.spawn, NULL, "start workers by fork+exec instead of fork (for runtimes that cannot survive fork)"},
        {"reuse-port", 0, OPT_BOOL, &cfg.reuse_port, NULL, "let other processes listen on the same port (SO_REUSEPORT)"},
        {"pin-threads", 0, OPT_BOOL, &cfg.pin_threads, NULL, "with 2+ I/O threads (all workers), no more than the CPUs: one CPU each, connections to the thread on their packets' CPU (on)"},
        {"poller", 0, OPT_STR, &poller, "auto|epoll|poll", "event notification API (auto)"},
        {"log-level", 0, OPT_STR, &log_level, "LEVEL", "debug, info, warn, error or off (info)"},
        {"max-body", 0, OPT_SIZE, &cfg.max_body, "BYTES", "largest request body, e.g. 16M (16M) -> 413"},
        {"max-request-line", 0, OPT_SIZE, &request_line, "BYTES", "longest request line (8K) -> 431"},
        {"max-header-bytes", 0, OPT_SIZE, &header_bytes, "BYTES", "largest request head (64K) -> 431"},
        {"max-headers", 0, OPT_INT, &max_headers, "N", "most header fields in a request (100) -> 431"},
        {"header-timeout", 0, OPT_U64, &cfg.header_timeout_ms, "MS", "time allowed to send a request (10000) -> 408"},
        {"idle-timeout", 0, OPT_U64, &cfg.idle_timeout_ms, "MS", "idle keep-alive connections close after this (60000)"},
        {"drain-timeout", 0, OPT_U64, &cfg.drain_timeout_ms, "MS", "on SIGTERM, longest wait for in-flight requests and for models still loading (10000)"},
        {"max-connections", 0, OPT_INT, &cfg.max_connections, "N", "open connections per process, all I/O threads together; past it new ones are closed at once (65536)"},
        {"api-key", 0, OPT_STR, &cfg.api_key, "KEY", "require \"Authorization: Bearer KEY\" (not on /health, /metrics and the model lists /models, /v1/models, as llama-server)"},
        {"cors-origin", 0, OPT_STR, &cfg.cors_origin, "ORIGIN", "the one origin browsers may call the APIs from (*: any, the default, as llama-server's, whose preflights allow headers '*', which browsers never stretch to Authorization: name the origin of a browser app that sends an API key; '': none, as --no-cors)"},
        {"cors", 0, OPT_BOOL, &cors, NULL, "answer CORS for browser clients: preflights and Access-Control-Allow-Origin (on, as llama-server; --no-cors turns it off)"},
        {"debug-routes", 0, OPT_BOOL, &debug_routes, NULL, "add /debug/* test endpoints (echo, delayed and streamed replies)"},
    };
    int rc = opts_parse(opts, (int)(sizeof opts / sizeof opts[0]), argc, argv, "hearth serve [options]",
                        "Serves models over HTTP: /health, /metrics, /v1/models and the APIs of the loaded models.");
    if (rc)
        return rc == 1 ? 0 : 2;
    if (!cont_batching || webui) {
        fprintf(stderr, "hearth serve: %s\n", webui ? "--webui: hearth has no web UI; drop the flag"
                                                   : "--no-cont-batching: hearth always batches generation continuously; drop the flag");
        return 2;
    }
    api.cfg.verbose = verbose;
    int level = hearth_log_parse_level(verbose ? "debug" : log_level);
    if (level < 0) {
        fprintf(stderr, "hearth serve: --log-level '%s' is not one of debug, info, warn, error, off\n", log_level);
        return 2;
    }
    hearth_log_set_level((enum hearth_log_level)level);
    if (!strcmp(poller, "epoll"))
        cfg.poller = HEARTH_POLLER_EPOLL;
    else if (!strcmp(poller, "poll"))
        cfg.poller = HEARTH_POLLER_POLL;
    else if (strcmp(poller, "auto") != 0) {
        fprintf(stderr, "hearth serve: --poller '%s' is not one of auto, epoll, poll\n", poller);
        return 2;
    }
    if (max_headers < 1 || max_headers > HEARTH_HTTP_MAX_HEADERS_CAP) {
        fprintf(stderr, "hearth serve: --max-headers %d is out of range (1..%d)\n", max_headers, HEARTH_HTTP_MAX_HEADERS_CAP);
        return 2;
    }
    if (request_line < 16 || header_bytes < request_line) {
        fprintf(stderr, "hearth serve: --max-request-line must be >= 16 and <= --max-header-bytes\n");
        return 2;
    }
    cfg.limits.max_request_line = request_line;
    cfg.limits.max_header_bytes = header_bytes;
    cfg.limits.max_headers = (size_t)max_headers;
    cfg.argv = full_argv;
    if (api.cfg.parallel < 1 || api.cfg.cache_slots < 0 || api.cfg.ctx_size < 0 || api.cfg.max_queue < 1 || api.cfg.batch_size < 1) {
        fprintf(stderr, "hearth serve: --parallel, --max-queue and --batch-size must be >= 1; --cache-slots and --ctx-size >= 0\n");
        return 2;
    }
    if (api.cfg.decode_steps < 1 || api.cfg.decode_steps > HEARTH_LLAMA_STEPS_MAX) {
        fprintf(stderr, "hearth serve: --decode-steps must be 1..%d\n", HEARTH_LLAMA_STEPS_MAX);
        return 2;
    }
    if (max_batch_tokens < 1 || api.cfg.max_concurrent < 1 || api.cfg.max_client_batch < 1 || api.cfg.compute_threads < 0 ||
        api.cfg.embed_lanes < 0) {
        fprintf(stderr, "hearth serve: --max-batch-tokens, --max-concurrent-requests and --max-client-batch must be >= 1; "
                        "--compute-threads and --embed-engines >= 0\n");
        return 2;
    }
    if (deadline_ms < 0 || api.cfg.frame_slots < 0 || api.cfg.frame_threads < 0) {
        fprintf(stderr, "hearth serve: --deadline-ms, --sequence-slots and --frame-threads must be >= 0\n");
        return 2;
    }
    if (api.cfg.frame_spin_us < 0 || api.cfg.frame_spin_us > 100000) {
        fprintf(stderr, "hearth serve: --frame-spin-us must be 0 to 100000 (%d given)\n", api.cfg.frame_spin_us);
        return 2;
    }
    if (api.cfg.frame_lead_us < 0 || api.cfg.frame_lead_us > 100000) {
        fprintf(stderr, "hearth serve: --frame-lead-us must be 0 to 100000 (%d given)\n", api.cfg.frame_lead_us);
        return 2;
    }
    api.cfg.deadline_ms = deadline_ms;
    if (api.cfg.default_prompt_name && api.cfg.default_prompt) {
        fprintf(stderr, "hearth serve: --default-prompt-name and --default-prompt: give one\n");
        return 2;
    }
    if (hearth_decoder_cache_type_from_name(api.cfg.cache_type) < 0) {
        fprintf(stderr, "hearth serve: --cache-type %s: want f16 or f32\n", api.cfg.cache_type);
        return 2;
    }
    if (api.cfg.alias && models.n != 1) {
        fprintf(stderr, "hearth serve: --alias names the one model served, and %d are given with --model: name each "
                        "with --model NAME=PATH instead\n", models.n);
        return 2;
    }
    if (api.cfg.device && strncmp(api.cfg.device, "cuda", 4) == 0 && cfg.workers > 0 && !cfg.spawn) {
        fprintf(stderr, "hearth serve: --device %s with --workers needs --spawn: CUDA does not survive fork, so each "
                        "GPU worker must start as a fresh process (fork+exec)\n", api.cfg.device);
        return 2;
    }
    api.cfg.jinja = jinja;
    if (tmpl_file && chat_template_file(&api.cfg, tmpl_file, &tmpl_text) != 0)
        return 2;
    if (llama_server_flags(&api.cfg, seed, ubatch, gpu_layers, jinja) != 0)
        return 2;
    if (threads_batch >= 0 && api.cfg.compute_threads == 0) {
        api.cfg.compute_threads = threads_batch;
    } else if (threads_batch >= 0 && threads_batch != api.cfg.compute_threads) {
        fprintf(stderr, "hearth serve: --threads-batch %d differs from --threads %d: hearth runs prompts and decoding on "
                        "one pool of threads; give one number\n", threads_batch, api.cfg.compute_threads);
        return 2;
    }
    if (cfg.threads < 1 || cfg.threads > 64) { /* checked here so the message names this flag */
        fprintf(stderr, "hearth serve: --io-threads %d is out of range (1..64)\n", cfg.threads);
        return 2;
    }
    (void)metrics;
    if (api.cfg.slot_save_path && *api.cfg.slot_save_path) {
        hearth_err derr = {0};
        if (hearth_mkdirs(api.cfg.slot_save_path, &derr) != 0) {
            fprintf(stderr, "hearth serve: --slot-save-path: %s\n", derr.msg);
            return 2;
        }
    }
    /* llama-server answers every origin; hearth's library default stays off */
    if (!cors)
        cfg.cors_origin = NULL;
    else if (!cfg.cors_origin)
        cfg.cors_origin = "*";
    api.cfg.max_batch_tokens = (size_t)max_batch_tokens;
    api.cfg.models = models.items;
    api.cfg.n_models = models.n;
    api.cfg.no_demo = !demo;

    hearth_err err = {0};
    hearth_server *s = hearth_server_new(&cfg, &err);
    if (!s) {
        fprintf(stderr, "hearth serve: %s\n", err.msg);
        return 2;
    }
    rc = hearth_api_register_system(&api, s);
    if (!rc)
        rc = hearth_api_register_embed(&api, s);
    if (!rc)
        rc = hearth_api_register_rerank(&api, s);
    if (!rc)
        rc = hearth_api_register_tei(&api, s);
    if (!rc)
        rc = hearth_api_register_generation(&api, s);
    if (!rc)
        rc = hearth_api_register_oip(&api, s);
    if (!rc)
        rc = hearth_api_register_oip_shm(&api, s, cfg.workers);
    if (!rc && debug_routes)
        rc = hearth_api_register_debug(s);
    if (rc) {
        fprintf(stderr, "hearth serve: cannot register routes\n");
        hearth_server_free(s);
        return 1;
    }
    hearth_server_on_process_init(s, on_process_start, &api);
    hearth_server_on_process_exit(s, on_process_exit, &api);
    rc = hearth_server_run(s);
    hearth_server_free(s);
    return rc;
}
