/* kv.h: the KV cache of a decoder: n_slots sequences of up to n_ctx
 * positions each, K and V of every layer, in the memory of the device the
 * model runs on (its alloc), read and written by the device's
 * qk_rope_store and attn_cached (engine/dev.h's hearth_dev_kv is the view
 * they take). A model makes its cache from its shape (n_layer, kv_dim);
 * lengths stay on the host with whoever schedules the slots.
 *
 * truncate returns the length it kept, not void: a cache that can roll back
 * only to checkpoints (a recurrent model's state) keeps more than asked, and
 * the scheduler must then re-feed from there, not from where it wished. */
#ifndef HEARTH_ENGINE_KV_H
#define HEARTH_ENGINE_KV_H

#include "base/err.h"
#include "engine/dev.h"
#include "engine/dtype.h"

#include <stddef.h>
#include <stdint.h>

/* n_slots x n_layer x {K, V} blocks of (n_ctx, kv_dim) elements of type (f32
 * or f16), slot-major (kv.c has the addressing). The fields are read by the
 * walks (lengths, the view); only kv.c and the walk's batch bookkeeping
 * write them. */
typedef struct hearth_kv {
    int n_slots;
    int64_t n_ctx, n_layer, kv_dim;
    int64_t *len;            /* (n_slots) positions held */
    int64_t *pend;           /* (n_slots) a forward's scratch: tokens per slot in its batch */
    char *k, *v;             /* device memory (dev->ops->alloc) */
    hearth_dtype type;
    size_t elt;              /* bytes per element: 4 or 2 */
    hearth_dev *dev;
    uint64_t bytes;
    uint64_t uid;            /* hearth_dev_uid: names this cache in recorded passes */
} hearth_kv;

/* A cache on dev for a model of n_layer layers of kv_dim K (and V) values
 * per position: type HEARTH_F32 (exact) or HEARTH_F16 (half the memory and
 * the bytes attention reads; K and V rounded to f16, as llama.cpp's default
 * cache). NULL with err: a type the device has no attention for, sizes out
 * of range, out of (device) memory. */
hearth_kv *hearth_kv_create(hearth_dev *dev, int64_t n_layer, int64_t kv_dim, int n_slots, int64_t n_ctx,
                            hearth_dtype type, hearth_err *err);
void hearth_kv_free(hearth_kv *kv);
int hearth_kv_slots(const hearth_kv *kv);
int64_t hearth_kv_ctx(const hearth_kv *kv);
/* Positions held by slot. */
int64_t hearth_kv_len(const hearth_kv *kv, int slot);
/* Keeps at most the first n positions of slot (prefix reuse, rollback);
 * returns the length actually kept (this cache keeps min(n, len)). */
int64_t hearth_kv_truncate(hearth_kv *kv, int slot, int64_t n);
/* Copies the first n positions of slot src into dst (dst's old content is dropped). */
void hearth_kv_copy_prefix(hearth_kv *kv, int src, int dst, int64_t n);
/* Bytes of the K and V rows of n positions of one slot, every layer:
 * 2 * n_layer * n * kv_dim * elt (hearth_kv_slot_read's layout). */
size_t hearth_kv_slot_bytes(const hearth_kv *kv, int64_t n);
/* Copies the first n positions of slot (n <= its length) to host memory
 * dst of hearth_kv_slot_bytes(kv, n) bytes, layer by layer, K rows then V
 * rows, through the device's download (the cache is device memory). 0, or
 * HEARTH_EINVAL for a slot or n out of range, the device's status. */
int hearth_kv_slot_read(const hearth_kv *kv, int slot, int64_t n, void *dst, hearth_err *err);
/* The reverse (upload): positions [0, n) of slot from src, in the same
 * layout; the slot's length becomes n, or 0 when the upload fails. */
int hearth_kv_slot_write(hearth_kv *kv, int slot, int64_t n, const void *src, hearth_err *err);
/* Bytes of cache memory (for budgets and metrics). */
uint64_t hearth_kv_bytes(const hearth_kv *kv);
/* A cache type by name, as --cache-type takes it: "f16" (also NULL: the
 * default) or "f32"; -1 for anything else. */
int hearth_kv_type_from_name(const char *name);
/* Its element type: HEARTH_F32 or HEARTH_F16. */
hearth_dtype hearth_kv_type(const hearth_kv *kv);

/* The cache as the device's ops see it. */
static inline hearth_dev_kv hearth_kv_view(const hearth_kv *kv)
{
    return (hearth_dev_kv){kv->k, kv->v, kv->type, kv->n_ctx, kv->n_layer, kv->kv_dim};
}

#endif
