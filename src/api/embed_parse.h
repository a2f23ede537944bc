/* embed_parse.h: the JSON bodies of the embedding APIs, parsed and
 * validated without a model or a connection (so they can be fuzzed).
 *
 *   TEI     POST /embed           {"inputs": str | [str], "normalize", "truncate", "truncation_direction", "prompt_name"}
 *   TEI     POST /tokenize        {"inputs": str | [str], "add_special_tokens", "prompt_name"}
 *   TEI     POST /decode          {"ids": [int] | [[int]], "skip_special_tokens"}
 *   TEI     POST /similarity      {"inputs": {"source_sentence": str, "sentences": [str]},
 *                                  "parameters": {"truncate", "truncation_direction", "prompt_name"}}
 *                                 (inputs: the source sentence, then the sentences)
 *   OpenAI  POST /v1/embeddings   {"input": str | [str] | [int] | [[int]], "model", "encoding_format", "dimensions", "user"} */
#ifndef HEARTH_API_EMBED_PARSE_H
#define HEARTH_API_EMBED_PARSE_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum hearth_embed_api {
    HEARTH_EMBED_TEI,
    HEARTH_EMBED_TEI_TOKENIZE,
    HEARTH_EMBED_TEI_DECODE,
    HEARTH_EMBED_TEI_SIMILARITY,
    HEARTH_EMBED_OPENAI,
};

typedef struct hearth_embed_input {
    const char *text;      /* NUL-terminated, inside the parsed document; NULL for token ids */
    size_t text_len;
    int32_t *ids;          /* OpenAI's token-id form (owned), without [CLS]/[SEP]; TEI decode's ids */
    int n_ids;
} hearth_embed_input;

typedef struct hearth_embed_parsed {
    int n;
    hearth_embed_input *inputs;
    bool normalize;        /* TEI, default true; OpenAI always true */
    bool truncate;         /* TEI, default false */
    bool truncate_left;    /* TEI "truncation_direction": "Left" (keep the last tokens); default "Right" */
    bool add_special;      /* TEI tokenize, default true */
    bool skip_special;     /* TEI decode, default true */
    bool base64;           /* OpenAI encoding_format */
    int64_t dimensions;    /* OpenAI; 0 when absent (range checked against the model by the caller) */
    const char *model;     /* OpenAI; NULL when absent */
    const char *prompt_name; /* TEI /embed and /tokenize; NULL when absent (checked against the model by the caller) */
    cJSON *doc;            /* owned: texts point into it */
} hearth_embed_parsed;

/* Parses body[0..len) for api (the body read by hearth_json_body_parse: one
 * object, no NUL in its strings). Returns 0, or the HTTP status to answer
 * (400, or 413 past max_inputs) with msg saying what is wrong. On failure nothing
 * needs freeing; on success call hearth_embed_parsed_free. */
int hearth_embed_parse(const char *body, size_t len, enum hearth_embed_api api, int max_inputs, hearth_embed_parsed *out,
                       char *msg, size_t msg_size);
void hearth_embed_parsed_free(hearth_embed_parsed *p);

#endif
