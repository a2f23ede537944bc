/* kv.c: the KV cache of a decoder (kv.h): n_slots sequences of up to n_ctx
 * positions each.
 *
 * Layout: for each slot, for each layer, one K block and one V block of
 * (n_ctx, n_head_kv * head_dim) elements, rows in position order
 * (kv_block below). A slot's rows for one layer are
 * contiguous, so attention for a token streams its slot's keys and values
 * front to back, and truncating or copying a prefix is a length change or
 * one memcpy per layer. The blocks are allocated once at creation, by the
 * model's device (engine/dev.h's alloc; the element type is refused there
 * when the device has no attention for it); untouched pages cost nothing
 * until a slot grows into them.
 *
 * Elements are f32 or f16, chosen at creation. f16 is what the servers use
 * by default (--cache-type, as llama.cpp's cache): half the memory (the
 * 110M shape takes 72 KiB per position in f32), and half the bytes a decode
 * step reads for attention, which with several streams comes from DRAM
 * every step (the weights push it out of L3): in hearth serve with 4 streams
 * the attention head was ~8% of the engine's time. Rounding K and V to f16
 * moves logits by ~1e-3 relative, so the parity tests against the reference
 * (1e-4) run on an f32 cache, and an f16 cache has its own bound in
 * test_llama. Rejected: a paged cache shared between slots (prefix sharing
 * by copy is enough for one server's chat turns, and paging adds an
 * indirection to the inner attention loop). */
#include "engine/kv.h"

#include <stdlib.h>
#include <string.h>

/* Bound on positions per slot: keeps every offset product far from overflow. */
#define KV_CTX_MAX ((int64_t)1 << 24)
#define KV_SLOTS_MAX 4096

/* Rows (n_ctx, kv_dim) of one slot and layer: block (slot, layer) of base,
 * blocks in slot-major order. */
static char *kv_block(const hearth_kv *kv, char *base, int slot, int64_t layer)
{
    return base + ((size_t)slot * (size_t)kv->n_layer + (size_t)layer) * (size_t)kv->n_ctx * (size_t)kv->kv_dim *
                      kv->elt;
}

hearth_kv *hearth_kv_create(hearth_dev *dev, int64_t n_layer, int64_t kv_dim, int n_slots, int64_t n_ctx,
                            hearth_dtype type, hearth_err *err)
{
    if (type != HEARTH_F32 && type != HEARTH_F16) {
        hearth_err_set(err, HEARTH_EINVAL, "kv cache: element type %d: want f32 or f16", (int)type);
        return NULL;
    }
    size_t elt = type == HEARTH_F16 ? 2 : 4;
    if (!dev->ops->supports(dev, HEARTH_OP_ATTN_CACHED, type) || !dev->ops->supports(dev, HEARTH_OP_QK_ROPE_STORE, type)) {
        hearth_err_set(err, HEARTH_EUNSUPPORTED, "kv cache: device %s has no attention over %s elements",
                       dev->caps.name, type == HEARTH_F16 ? "f16" : "f32");
        return NULL;
    }
    if (n_slots < 1 || n_slots > KV_SLOTS_MAX || n_ctx < 1 || n_ctx > KV_CTX_MAX) {
        hearth_err_set(err, HEARTH_EINVAL, "kv cache: %d slots of %lld positions: want 1..%d slots, 1..%lld positions",
                       n_slots, (long long)n_ctx, KV_SLOTS_MAX, (long long)KV_CTX_MAX);
        return NULL;
    }
    if (n_layer < 1 || n_layer > 4096 || kv_dim < 1 || kv_dim > ((int64_t)1 << 30)) {
        hearth_err_set(err, HEARTH_EINVAL, "kv cache: %lld layers of %lld values: out of range", (long long)n_layer,
                       (long long)kv_dim);
        return NULL;
    }
    /* elements of K (or V) for all slots and layers; each factor is bounded
     * (slots 2^12, ctx 2^24, layers 2^12, kv_dim 2^30), so check the product. */
    unsigned __int128 elems = (unsigned __int128)n_slots * (uint64_t)n_layer * (uint64_t)n_ctx * (uint64_t)kv_dim;
    unsigned __int128 bytes = elems * elt * 2;
    if (bytes > (unsigned __int128)SIZE_MAX / 2) {
        hearth_err_set(err, HEARTH_ENOMEM, "kv cache: %d slots x %lld positions x %lld layers is too large",
                       n_slots, (long long)n_ctx, (long long)n_layer);
        return NULL;
    }
    hearth_kv *kv = calloc(1, sizeof *kv);
    if (!kv)
        goto fail;
    kv->n_slots = n_slots;
    kv->n_ctx = n_ctx;
    kv->n_layer = n_layer;
    kv->kv_dim = kv_dim;
    kv->bytes = (uint64_t)bytes;
    kv->type = type;
    kv->elt = elt;
    kv->dev = dev;
    kv->uid = hearth_dev_uid();
    kv->len = calloc((size_t)n_slots, sizeof *kv->len);
    kv->pend = calloc((size_t)n_slots, sizeof *kv->pend);
    kv->k = dev->ops->alloc(dev, (size_t)elems * elt, NULL);
    kv->v = dev->ops->alloc(dev, (size_t)elems * elt, NULL);
    if (!kv->len || !kv->pend || !kv->k || !kv->v)
        goto fail;
    return kv;
fail:
    hearth_kv_free(kv);
    hearth_err_set(err, HEARTH_ENOMEM, "kv cache: out of memory for %d slots x %lld positions (%.1f MiB)", n_slots,
                   (long long)n_ctx, (double)bytes / (1024.0 * 1024.0));
    return NULL;
}

void hearth_kv_free(hearth_kv *kv)
{
    if (!kv)
        return;
    free(kv->len);
    free(kv->pend);
    if (kv->dev) {
        kv->dev->ops->free(kv->dev, kv->k);
        kv->dev->ops->free(kv->dev, kv->v);
    }
    free(kv);
}

int hearth_kv_slots(const hearth_kv *kv) { return kv->n_slots; }
int64_t hearth_kv_ctx(const hearth_kv *kv) { return kv->n_ctx; }
uint64_t hearth_kv_bytes(const hearth_kv *kv) { return kv->bytes; }
hearth_dtype hearth_kv_type(const hearth_kv *kv) { return kv->type; }

int hearth_kv_type_from_name(const char *name)
{
    if (!name)
        return HEARTH_F16;
    int t = hearth_dtype_from_name(name);
    return t == HEARTH_F16 || t == HEARTH_F32 ? t : -1;
}

int64_t hearth_kv_len(const hearth_kv *kv, int slot)
{
    return slot >= 0 && slot < kv->n_slots ? kv->len[slot] : 0;
}

/* A slot out of range, or n outside [0, len], is the caller's bug; it is
 * ignored (n clamped) rather than trusted, so a bad call cannot make the
 * cache claim positions it never computed; the length returned says what
 * is held. */
int64_t hearth_kv_truncate(hearth_kv *kv, int slot, int64_t n)
{
    if (slot < 0 || slot >= kv->n_slots)
        return 0;
    if (n >= 0 && n < kv->len[slot])
        kv->len[slot] = n;
    return kv->len[slot];
}

void hearth_kv_copy_prefix(hearth_kv *kv, int src, int dst, int64_t n)
{
    if (src < 0 || src >= kv->n_slots || dst < 0 || dst >= kv->n_slots || n < 0)
        return;
    if (n > kv->len[src])
        n = kv->len[src];
    if (src == dst) {
        kv->len[dst] = n;
        return;
    }
    /* through the device's copy: the blocks are device memory */
    size_t row_bytes = (size_t)kv->kv_dim * kv->elt;
    const hearth_dev_ops *D = kv->dev->ops;
    hearth_stream st;
    int rc = hearth_stream_init(&st, kv->dev, NULL, NULL);
    for (int64_t il = 0; il < kv->n_layer && !rc; il++) {
        rc = D->copy(&st, kv_block(kv, kv->k, dst, il), kv_block(kv, kv->k, src, il), (size_t)n * row_bytes);
        if (!rc)
            rc = D->copy(&st, kv_block(kv, kv->v, dst, il), kv_block(kv, kv->v, src, il), (size_t)n * row_bytes);
    }
    if (!rc)
        rc = D->sync(&st);
    hearth_stream_deinit(&st);
    /* a failed copy leaves dst empty rather than claiming rows it lacks */
    kv->len[dst] = rc ? 0 : n;
}

size_t hearth_kv_slot_bytes(const hearth_kv *kv, int64_t n)
{
    return 2 * (size_t)kv->n_layer * (size_t)n * (size_t)kv->kv_dim * kv->elt;
}

/* One slot's rows between the cache and host memory, one copy per layer and
 * K/V block: the rows [0, n) of a block are contiguous (kv_block). */
static int slot_copy(hearth_kv *kv, int slot, int64_t n, char *host, bool up, hearth_err *err)
{
    if (slot < 0 || slot >= kv->n_slots || n < 0 || n > (up ? kv->n_ctx : kv->len[slot]))
        return hearth_err_set(err, HEARTH_EINVAL, "kv cache: slot %d, %lld positions: out of range", slot, (long long)n);
    size_t bytes = (size_t)n * (size_t)kv->kv_dim * kv->elt;
    const hearth_dev_ops *D = kv->dev->ops;
    hearth_stream st;
    int rc = hearth_stream_init(&st, kv->dev, NULL, err);
    for (int64_t il = 0; il < kv->n_layer && !rc; il++) {
        for (int w = 0; w < 2 && !rc; w++) {
            char *block = kv_block(kv, w ? kv->v : kv->k, slot, il);
            char *h = host + (size_t)(2 * il + w) * bytes;
            rc = up ? D->upload(&st, block, h, bytes) : D->download(&st, h, block, bytes);
        }
    }
    if (!rc)
        rc = D->sync(&st);
    hearth_stream_deinit(&st);
    if (rc && err && !err->code)
        hearth_err_set(err, rc, "kv cache: slot %d: %s of %lld positions failed on %s", slot, up ? "upload" : "download",
                       (long long)n, kv->dev->caps.name);
    return rc;
}

int hearth_kv_slot_read(const hearth_kv *kv, int slot, int64_t n, void *dst, hearth_err *err)
{
    return slot_copy((hearth_kv *)kv, slot, n, dst, false, err);
}

int hearth_kv_slot_write(hearth_kv *kv, int slot, int64_t n, const void *src, hearth_err *err)
{
    int rc = slot_copy(kv, slot, n, (char *)src, true, err);
    if (slot >= 0 && slot < kv->n_slots)
        kv->len[slot] = rc ? 0 : n;
    return rc;
}
