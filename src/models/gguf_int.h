/* gguf_int.h: little-endian decoding and the name hash shared by the
 * GGUF reader's files. Private to src/models. Values in a mapping may be
 * unaligned, so everything goes through memcpy (which compilers turn into a
 * plain load on x86-64 and ARM64). */
#ifndef HEARTH_MODELS_GGUF_INT_H
#define HEARTH_MODELS_GGUF_INT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "hearth's GGUF code assumes a little-endian host"
#endif

static inline uint16_t gguf_le16(const uint8_t *p)
{
    uint16_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline uint32_t gguf_le32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline uint64_t gguf_le64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* Bytes taken by one scalar of type t (0 for STRING, ARRAY and unknown ids). */
static inline size_t gguf_scalar_size(uint32_t t)
{
    static const uint8_t sizes[13] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    return t < 13 ? sizes[t] : 0;
}

/* FNV-1a over a NUL-terminated name. */
static inline uint64_t gguf_hash(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) {
        h ^= (uint8_t)*s;
        h *= 1099511628211ull;
    }
    return h;
}

#endif
