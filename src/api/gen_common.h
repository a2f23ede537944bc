/* gen_common.h: what the generation APIs (llama-server's in completion.c,
 * OpenAI's in openai_gen.c) share: reading sampling parameters from JSON with
 * clear 400s, turning a prompt into ids, the per-request state that lives
 * between the connection and the scheduler (hearth_gen_call, reference
 * counted), submitting it, and replying from the scheduler thread as one JSON
 * body or as server-sent events. Private to the api layer.
 *
 * The helpers that take a hearth_request respond themselves on bad input and
 * then say so (false, or -1): the handler just returns. */
#ifndef HEARTH_API_GEN_COMMON_H
#define HEARTH_API_GEN_COMMON_H

#include "models.h"
#include "tool_calls.h"

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct hearth_gen_call hearth_gen_call;
typedef struct hearth_gen_group hearth_gen_group;

/* The most prompts one request may hold (llama-server's prompt list); each is a sequence. */
#define HEARTH_GEN_MAX_PROMPTS 64

/* How one API family writes its answer. Called on the scheduler thread, one
 * call at a time per request. Each appends to out and returns 0 or a
 * negative status (the out buffer's). */
typedef struct hearth_gen_format {
    /* stream: the events before the first piece (chat's role delta); may be NULL */
    int (*start)(hearth_gen_call *c, hearth_buf *out);
    /* stream: the event(s) for one piece of final text (whole UTF-8 characters) */
    int (*piece)(hearth_gen_call *c, const char *text, size_t n, hearth_buf *out);
    /* stream: every event after the last piece, [DONE] left out;
     * not streamed: the whole JSON body, the text being in c->text */
    int (*end)(hearth_gen_call *c, const hearth_gen_stats *st, hearth_buf *out);
    /* streamed, the stream ends with "data: [DONE]" (OpenAI's; not
     * llama-server's /completion), sent by gen_common once per stream: after
     * the call's end, or a group's last call's */
    bool done_marker;
} hearth_gen_format;

/* One generation request, shared by the connection and the scheduler; freed
 * by whichever lets go last. The handler fills it, then
 * hearth_gen_call_submit hands it over; from then on only the scheduler
 * thread touches it, except g.cancelled (the connection's release callback). */
struct hearth_gen_call {
    hearth_gen_req g;              /* g.user is the call */
    const hearth_gen_format *fmt;
    hearth_gen_entry *model;       /* borrowed: the models outlive every connection */
    hearth_server *server;
    hearth_reply reply;
    _Atomic int refs;
    bool stream;
    bool include_usage;            /* OpenAI stream_options.include_usage */
    bool begun;                    /* the stream's head has been posted (scheduler thread) */
    bool return_tokens;            /* llama-server's return_tokens: the answer lists the generated ids */
    bool has_new_line;             /* some generated text held a '\n' (llama-server's has_new_line) */
    bool timings_per_token;        /* llama-server's timings_per_token: every streamed event carries "timings" */
    bool verbose;                  /* serve -v: OpenAI answers carry llama-server's "__verbose" */
    uint64_t submit_ns;            /* when the call was queued (hearth_now_ns) */
    uint64_t first_ns;             /* when its first token came (0: none yet) */
    int64_t n_gen;                 /* tokens generated so far (a streamed event's tokens_predicted) */
    int64_t n_keep;                /* llama-server's n_keep: prompt tokens a truncation or shift keeps (-1: all) */
    bool prompt_truncated;         /* the prompt was past the context and lost middle blocks (--context-shift) */
    bool post_sampling_probs;      /* n_probs as probabilities after the sampler chain ("prob", "top_probs") */
    hearth_ids prompt;
    char *stop[HEARTH_GEN_MAX_STOP]; /* owned copies; g.stop points here */
    char **fields;                 /* llama-server's response_fields (owned copies), or NULL */
    int n_fields;
    hearth_gen_group *group;       /* several prompts in one request: the answer it is part of, or NULL */
    int index;                     /* its place in that answer ("index" in the JSON; 0 alone) */
    int err_status;                /* a grouped call's failure, kept for the group's answer */
    char err_type[32];
    char err_msg[600];
    char id[48];                   /* "chatcmpl-<hex>" / "cmpl-<hex>" */
    char *echo_model;              /* OpenAI answers' "model": the name the request sent (owned), as
                                      llama-server echoes it, or its "gpt-3.5-turbo" when neither the
                                      request nor the operator named one; NULL: the served model's name.
                                      Which model served it is in every answer's X-Hearth-Model header */
    int64_t created;               /* unix time of the request */
    hearth_buf text;               /* not streamed: the whole generated text */
    hearth_buf probs;              /* n_probs: completion_probabilities entries, comma-separated,
                                      since the last streamed event (or all of them) */
    hearth_buf tokens;             /* generated ids, comma-separated: since the last streamed event,
                                      or (not streamed, with return_tokens) all of them */
    hearth_buf scratch;            /* the event or body being formatted */
    hearth_grammar *grammar;       /* grammar / json_schema / response_format, parsed (owned); g.grammar points here */
    hearth_tool_set *tools;        /* chat's tools in play (owned), or NULL: the answer may be calls */
};

/* A call with the model's default sampling (serve's --temp, ...), no stop strings, n_predict -1,
 * cache_prompt true, refs 2 (the scheduler's and the connection's). NULL
 * when out of memory. */
hearth_gen_call *hearth_gen_call_new(hearth_gen_entry *m, const hearth_gen_format *fmt);
/* Frees a call that was never submitted. NULL is a no-op. */
void hearth_gen_call_free(hearth_gen_call *c);
/* Sets c->id to prefix followed by 24 random hex digits, and c->created. */
void hearth_gen_call_set_id(hearth_gen_call *c, const char *prefix);

/* Checks the prompt against the context (400 naming both lengths; with
 * --context-shift a longer prompt is truncated as llama-server truncates it
 * instead), clamps n_predict (< 0: until an end or the context is full) to
 * the positions left after the prompt (with --context-shift: to the model's
 * trained context, as llama-server bounds an answer that could shift forever), defers the request and submits the call. The queue full
 * gives 503. Takes c in every case: the caller must not touch it afterwards. */
void hearth_gen_call_submit(hearth_request *req, hearth_api *api, hearth_gen_call *c, int64_t n_predict);

/* Several prompts of one request (calls[0..n), n >= 2): each checked as
 * hearth_gen_call_submit does, all queued at once (so admitted and batched
 * together); the answer is a JSON array of their whole answers in order
 * (llama-server's), or the first failure's error; streamed (calls[0]->stream),
 * one stream of every prompt's events, each naming its prompt ("index"), as
 * they come. Takes the calls and the array in every case. */
void hearth_gen_group_submit(hearth_request *req, hearth_api *api, hearth_gen_call **calls, int n, int64_t n_predict);

/* ---- request parsing (each responds on bad input) ---- */

/* The JSON object in the body, as hearth_json_body_parse reads it (one
 * object, no NUL in its strings), or NULL after a 400 saying what is wrong.
 * Free with cJSON_Delete. */
cJSON *hearth_gen_parse_body(hearth_request *req);
/* The generation model named (NULL: the first; any name when only one is
 * served, as llama-server answers every name), or NULL after a 503 (loading)
 * or 404 (no such model among several / none loaded). */
hearth_gen_entry *hearth_gen_find_or_respond(hearth_request *req, hearth_api *api, const char *name);
/* The generation model doc's optional "model" string names, as
 * hearth_gen_find_or_respond finds it, or NULL after a 400 (not a string),
 * 503 or 404. doc stays the caller's. */
hearth_gen_entry *hearth_gen_named_model(hearth_request *req, hearth_api *api, const cJSON *doc);
/* What every generation endpoint does first: the body parsed into *doc
 * (hearth_gen_parse_body) and the model it names (hearth_gen_named_model).
 * On success *doc is the caller's to cJSON_Delete; NULL after responding,
 * with *doc NULL (nothing to free). */
hearth_gen_entry *hearth_gen_open(hearth_request *req, hearth_api *api, cJSON **doc);

/* Optional fields: 0 absent or null (out untouched), 1 read, -1 after a 400
 * naming the key and the accepted range. Integers must be whole numbers. */
int hearth_gen_opt_num(hearth_request *req, const cJSON *doc, const char *key, double lo, double hi, double *out);
int hearth_gen_opt_int(hearth_request *req, const cJSON *doc, const char *key, int64_t lo, int64_t hi, int64_t *out);
int hearth_gen_opt_bool(hearth_request *req, const cJSON *doc, const char *key, bool *out);

/* The fields both families accept: temperature, top_k, top_p, min_p,
 * repeat_penalty, repeat_last_n (-1: the context), presence_penalty,
 * frequency_penalty, seed (absent or -1: drawn here, so the answer can say
 * which), stop (a string or a list of at most HEARTH_GEN_MAX_STOP; empty
 * strings are ignored), n_probs (0..16), post_sampling_probs, n_keep (-1..),
 * n_discard (0: half), cache_prompt, stream, timings_per_token, id_slot (-1: any; a slot past the
 * server's is refused at submission, 400). False after a 400. */
bool hearth_gen_parse_sampling(hearth_request *req, const cJSON *doc, hearth_gen_call *c);

/* llama-server's constrained sampling (gen_grammar.c): "grammar" (GBNF) or
 * "json_schema" (a non-empty grammar wins), and with chat also
 * "response_format" (json_object, json_schema; its schema replaces
 * json_schema; grammar and json_schema together are refused), parsed into
 * c->grammar. False after a 400 naming the field, the problem and, for
 * GBNF, the line and column. */
bool hearth_gen_parse_grammar(hearth_request *req, const cJSON *doc, hearth_gen_call *c, bool chat);
/* Parses GBNF text into c->grammar for the sampler; false after a 400
 * naming field (or a 503 out of memory). */
bool hearth_gen_set_grammar(hearth_request *req, hearth_gen_call *c, const char *text, size_t n, const char *field);
/* The text of every token as grammars match it (special tokens rendered),
 * for hearth_gen_entry.token_texts; NULL when out of memory. */
hearth_token_texts *hearth_gen_token_texts_new(const hearth_tokenizer *t, int32_t n_tokens);
/* NULL is a no-op. */
void hearth_gen_token_texts_free(hearth_token_texts *tt);

/* Appends the ids of text to c->prompt: BOS/EOS as the vocabulary says when
 * add_special, special tokens' texts parsed as those tokens. False after a 400/413. */
bool hearth_gen_encode(hearth_request *req, hearth_gen_call *c, const char *text, size_t n, bool add_special);
/* How many prompts a completion prompt holds: n for a list of n >= 2 strings
 * or id lists (llama-server's several prompts), else 1. */
int hearth_gen_prompt_count(const cJSON *prompt);
/* A completion prompt (llama-server's and OpenAI's): a string (tokenized with
 * BOS as the vocabulary says), a list of token ids (used as given), ids and
 * strings mixed (llama-server's: a string gets BOS only when it comes first),
 * or a list holding one of those. key names the field in messages. False
 * after a 400. */
bool hearth_gen_prompt_from_json(hearth_request *req, hearth_gen_call *c, const cJSON *prompt, const char *key);

/* One call of a completion request for one of its prompts (key names it in
 * messages: "prompt" or "prompt[i]"), reading the request's options from doc
 * and the limit into *n_predict; NULL after responding. arg is the caller's. */
typedef hearth_gen_call *(*hearth_gen_prompt_call_fn)(hearth_request *req, void *arg, const cJSON *doc,
                                                       const cJSON *prompt, const char *key, int64_t *n_predict);
/* doc's "prompt" as one call (hearth_gen_call_submit) or, when it holds
 * several prompts (hearth_gen_prompt_count), as a group answered whole
 * (hearth_gen_group_submit, streamed or not), each call made by
 * make. Responds in every case; doc stays the caller's. */
void hearth_gen_submit_prompts(hearth_request *req, hearth_api *api, const cJSON *doc, hearth_gen_prompt_call_fn make,
                               void *arg);

/* ---- formatting ---- */

/* Appends "data: " ... the caller's JSON ... then hearth_gen_sse_close appends "\n\n". */
int hearth_gen_sse_open(hearth_buf *out);
int hearth_gen_sse_close(hearth_buf *out);
/* Appends "timings":{...} as llama-server names them (prompt_n counts the
 * tokens computed, cache_n those reused). */
int hearth_gen_append_timings(hearth_buf *out, const hearth_gen_stats *st);
/* Appends "timings":{...} for the events of a stream before its end
 * (timings_per_token), from the call's own clock: the prompt's time runs from
 * the queueing to the first token (its wait for a slot included), the
 * generation's from there to now, and every prompt token counts as computed
 * (which were reused from the cache is known at the end only). */
int hearth_gen_append_timings_now(hearth_buf *out, const hearth_gen_call *c);
/* Ends a streamed event before the stream's last, both families': its
 * timings (hearth_gen_append_timings_now) when the call asked for
 * timings_per_token, the event object's closing brace, then
 * hearth_gen_sse_close. */
int hearth_gen_event_end(hearth_gen_call *c, hearth_buf *out);
/* Appends a JSON object of the sampling settings of g (llama-server's
 * generation_settings / params); seed is printed as -1 when random;
 * "grammar" is the request's GBNF text (a json_schema's converted one), ""
 * for none. */
int hearth_gen_append_settings(hearth_buf *out, const hearth_gen_req *g, const char *grammar);
/* llama-server's "truncated": the prompt lost middle blocks, the context
 * shifted, or the answer ended because the context was full. */
bool hearth_gen_truncated(const hearth_gen_call *c, const hearth_gen_stats *st);
/* llama-server's stop_type: "eos", "word" (a stop string), "limit", or "none". */
const char *hearth_gen_stop_type(const hearth_gen_stats *st);
/* Appends ,"prompt": the prompt's ids as text, control tokens shown
 * ("<s> I believe ..."), as llama-server's answers give it. */
int hearth_gen_append_prompt(hearth_gen_call *c, hearth_buf *out);
/* "stop" for an end token or a stop string, "length" otherwise (OpenAI's finish_reason). */
const char *hearth_gen_finish_reason(const hearth_gen_stats *st);

/* A /completion call (completion.c) with every option of doc read (the
 * limit into *n_predict) and no prompt yet, for routes that build their own
 * prompt (/infill); NULL after responding. */
hearth_gen_call *hearth_gen_completion_call_new(hearth_request *req, hearth_gen_entry *m, const cJSON *doc,
                                                int64_t *n_predict);
/* Registers llama-server's POST /infill (infill.c). */
int hearth_api_register_infill(hearth_api *api, hearth_server *s);
/* Registers llama-server's GET /slots and POST /slots/{id} (slots.c). */
int hearth_api_register_slots(hearth_api *api, hearth_server *s);
/* Registers OpenAI's /v1/completions, /v1/chat/completions and
 * /chat/completions (openai_gen.c). */
int hearth_api_register_openai_gen(hearth_api *api, hearth_server *s);

#endif
