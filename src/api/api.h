/* api.h: the HTTP APIs: the only layer that sees both the server (net) and
 * the engine. Each API family registers its routes on the server. */
#ifndef HEARTH_API_API_H
#define HEARTH_API_API_H

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
    int64_t created;   /* unix time it was loaded */
} hearth_api_model;

typedef struct hearth_api {
    hearth_server *server;
    hearth_api_model models[HEARTH_API_MAX_MODELS];
    int n_models;
    _Atomic int ready;  /* 0 while models load: /health answers 503 */
} hearth_api;

/* Registers /health, /metrics and /v1/models. api must outlive the server. */
int hearth_api_register_system(hearth_api *api, hearth_server *s);

#endif
