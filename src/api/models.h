/* models.h: the models one serving process has loaded, by name, and how they
 * are loaded from the --model flags (or made as demos when none is given).
 * Private to the api layer. */
#ifndef HEARTH_API_MODELS_H
#define HEARTH_API_MODELS_H

#include "api.h"

#include "base/pool.h"
#include "engine/embed_queue.h"
#include "models/bert.h"

/* Options of the embedding family, from serve's flags. */
typedef struct hearth_embed_opts {
    size_t max_batch_tokens;     /* --max-batch-tokens */
    int max_concurrent;          /* --max-concurrent-requests: queued requests per model; past it 429 */
    int max_client_batch;        /* --max-client-batch: inputs in one request; past it 413 */
    enum hearth_bert_dtype dtype;
} hearth_embed_opts;

typedef struct hearth_embed_model {
    hearth_api_model *info;      /* its /v1/models entry */
    hearth_bert *bert;
    hearth_embed_queue *queue;
    hearth_pool *pool;           /* borrowed from hearth_api_state */
} hearth_embed_model;

struct hearth_api_state {
    hearth_pool *pool;           /* the compute threads, shared by the models */
    hearth_embed_opts embed;
    hearth_embed_model embed_models[HEARTH_API_MAX_MODELS];
    int n_embed;
};

/* The embedding model a request names (NULL name: the first one); NULL when none matches. */
hearth_embed_model *hearth_api_find_embed(hearth_api *api, const char *name);

#endif
