/* decoder.h: a text-generation model, whatever its architecture: the one
 * door through which a server (api/) or a tool opens a decoder from a GGUF.
 *
 * The facade dispatches on the GGUF's general.architecture: llama, qwen2
 * and qwen3 today, all three hearth_llama (models/llama.h). A new
 * architecture is a new case in decoder.c; callers never name one. A
 * decoder is assembled whole at open (weights, tokenizer, a KV cache of
 * n_slots sequences, the table that lets engine/gen_sched.h drive it) and
 * taken apart whole by one close, in the order its parts depend on each
 * other. What drives the table (a scheduler thread) is the caller's: it
 * stops that first, then closes the decoder.
 *
 * Thread-safety: open and close are for one thread, with nothing else using
 * the decoder. Everything read through the getters (tokenizer, vocabulary,
 * chat template, sizes) is fixed at open and may be read from any thread at
 * once. The table's functions touch the KV cache: one thread at a time
 * (the scheduler thread, as gen_sched.h calls them). */
#ifndef HEARTH_MODELS_DECODER_H
#define HEARTH_MODELS_DECODER_H

#include "base/err.h"
#include "base/pool.h"
#include "engine/dtype.h"
#include "engine/gen_sched.h"
#include "text/tokenizer.h"
#include "text/vocab.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Context per sequence when the caller names none: the model's training
 * context, capped here (a 128k-token model would otherwise reserve a cache
 * for 128k positions per slot). */
#define HEARTH_DECODER_DEFAULT_CTX 4096

typedef struct hearth_decoder hearth_decoder;

typedef struct hearth_decoder_opts {
    int n_slots;            /* KV-cache sequences (live + idle ones kept for prefix reuse), >= 1 */
    int64_t n_ctx;          /* positions per sequence; 0: the model's, capped at HEARTH_DECODER_DEFAULT_CTX */
    hearth_dtype kv_type;   /* HEARTH_F16 or HEARTH_F32 */
    bool no_repack;         /* hearth_llama_open_opts.no_repack: use F16 weights in place from the mapping */
    hearth_pool *pool;      /* borrowed, outlives the decoder: the threads of each forward (NULL: the caller alone) */
    struct hearth_dev *dev; /* where the weights, the cache and the walk live (NULL: the CPU) */
} hearth_decoder_opts;

/* True when hearth generates with a model of architecture arch (a GGUF's
 * general.architecture). */
bool hearth_decoder_supports(const char *arch);
/* The architectures it supports, for messages: "llama, qwen2, qwen3". */
const char *hearth_decoder_archs(void);

/* Opens path, its architecture's weights and tokenizer, and a KV cache as
 * opts asks. 0 and *out set, or a negative code with err naming the file
 * (the architecture's own loader's messages, unchanged) and *out NULL:
 * HEARTH_EUNSUPPORTED for an architecture hearth_decoder_supports refuses,
 * HEARTH_EINVAL / HEARTH_EIO for the file, HEARTH_ENOMEM. The decoder owns
 * the mapping, the weights and the cache. */
int hearth_decoder_open(hearth_decoder **out, const char *path, const hearth_decoder_opts *opts, hearth_err *err);
/* Frees the cache, then the weights and the mapping. Stop whatever drives
 * the table (hearth_gen_sched_free) first: pointers from the getters die
 * here too. NULL is a no-op. */
void hearth_decoder_close(hearth_decoder *d);

/* The architecture's name as the GGUF gives it: "llama", "qwen2", "qwen3". */
const char *hearth_decoder_arch(const hearth_decoder *d);
/* The tokenizer and the vocabulary (special ids: bos, eos, eot; their text). */
const hearth_tokenizer *hearth_decoder_tokenizer(const hearth_decoder *d);
const hearth_vocab *hearth_decoder_vocab(const hearth_decoder *d);
/* The GGUF's tokenizer.chat_template (Jinja source, not NUL-terminated):
 * 0 with *src and *len set, or HEARTH_ENOTFOUND when the file has none. */
int hearth_decoder_chat_template(const hearth_decoder *d, const char **src, size_t *len);
/* Positions per sequence (opts.n_ctx resolved), and the training context. */
int64_t hearth_decoder_n_ctx(const hearth_decoder *d);
/* The device its weights and cache live on. */
struct hearth_dev *hearth_decoder_device(const hearth_decoder *d);
int64_t hearth_decoder_n_ctx_train(const hearth_decoder *d);
/* The most common weight type among the matrices (for reports). */
hearth_dtype hearth_decoder_weight_type(const hearth_decoder *d);
/* The KV cache's element type and its bytes (for reports and metrics). */
hearth_dtype hearth_decoder_cache_type(const hearth_decoder *d);
uint64_t hearth_decoder_cache_bytes(const hearth_decoder *d);
/* A cache type by name, as --cache-type takes it: "f16" (also NULL: the
 * default) or "f32"; -1 for anything else. */
int hearth_decoder_cache_type_from_name(const char *name);

/* The table engine/gen_sched.h drives: n_vocab, n_slots, n_ctx, the end ids
 * (eos, eot: each once), forward over the slots of the cache, truncate (a
 * slot keeps a prefix), and a streaming detokenizer that keeps
 * SentencePiece's leading space (generated text continues a prompt). ctx is
 * the decoder. Owned by it, valid until close; gen_sched copies it. */
const hearth_gen_batch_model *hearth_decoder_batch_model(const hearth_decoder *d);

/* Slot files (llama-server's slot save and restore): a slot's cached ids and
 * its K and V rows, with a header that names the model's shape, checked on
 * restore. Scheduler thread only (they touch the cache, as the table does),
 * on a slot no request holds.
 *
 * save writes tokens[0..n) (what the slot's cache holds, n its length) and
 * the rows to path atomically; *bytes gets the file's size. restore reads
 * path into slot: its ids to tokens (room for cap), *n their count, the rows
 * into the cache (its length becomes *n). HEARTH_EINVAL with err saying why
 * for a file that is not a slot file or is for another model shape (arch,
 * layers, K/V width, cache type, vocabulary), longer than the context, or
 * cut short; HEARTH_EIO naming the path; the device's status. A failed
 * restore leaves the slot empty (*n 0). */
int hearth_decoder_slot_save(hearth_decoder *d, int slot, const int32_t *tokens, int64_t n, const char *path,
                             size_t *bytes, hearth_err *err);
int hearth_decoder_slot_restore(hearth_decoder *d, int slot, const char *path, int32_t *tokens, int64_t cap, int64_t *n,
                                size_t *bytes, hearth_err *err);

/* The demo generation model, a tiny random-weight llama with a byte-level
 * SentencePiece vocabulary and a ChatML template, at <dir>/demo-llama-tiny.gguf
 * (its vocabulary beside it): written there first when missing (through a
 * .tmp and a rename, so a crash mid-write is redone). Its path goes to
 * path (n bytes). 0, or HEARTH_EIO / HEARTH_ENOMEM with err naming the file. */
int hearth_decoder_demo_path(const char *dir, char *path, size_t n, hearth_err *err);

#endif
