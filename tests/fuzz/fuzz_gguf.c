/* libFuzzer target for the GGUF reader and vocab loader: opens the input
 * from memory, then reads every record and every tensor's first and last byte,
 * so anything the reader accepted is proven safe to use. Seeds are in
 * tests/fuzz/corpus/gguf/ (made by gen_gguf_corpus.c). */
#include "base/log.h"
#include "models/gguf.h"
#include "models/gguf_vocab.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static volatile uint64_t sink;

static void touch_kv(const hearth_gguf *g, const hearth_gguf_kv *kv)
{
    int64_t i;
    double d;
    uint32_t u;
    float f;
    bool b;
    const char *s;
    size_t n;
    if (hearth_gguf_kv_i64(kv, &i) == 0)
        sink += (uint64_t)i;
    if (hearth_gguf_kv_f64(kv, &d) == 0)
        sink += (uint64_t)(d == d);
    hearth_gguf_get_u32(g, kv->key, &u, NULL);
    hearth_gguf_get_f32(g, kv->key, &f, NULL);
    hearth_gguf_get_bool(g, kv->key, &b, NULL);
    if (hearth_gguf_get_str(g, kv->key, &s, &n, NULL) == 0 && n)
        sink += (uint8_t)s[0] + (uint8_t)s[n - 1];
    if (kv->type != HEARTH_GGUF_ARRAY)
        return;
    for (uint64_t k = 0; k < kv->arr_n; k++) {
        int32_t i32;
        if (hearth_gguf_arr_str(kv, k, &s, &n) == 0 && n)
            sink += (uint8_t)s[0] + (uint8_t)s[n - 1];
        if (hearth_gguf_arr_f32(kv, k, &f) == 0)
            sink += (uint64_t)(f == f);
        if (hearth_gguf_arr_i64(kv, k, &i) == 0)
            sink += (uint64_t)i;
        hearth_gguf_arr_i32(kv, k, &i32);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int quiet;
    if (!quiet) {
        hearth_log_set_level(HEARTH_LOG_OFF);
        quiet = 1;
    }
    /* an exact-size copy so ASan sees any read past the end */
    uint8_t *copy = malloc(size ? size : 1);
    if (!copy)
        return 0;
    memcpy(copy, data, size);
    hearth_gguf g;
    hearth_err err;
    if (hearth_gguf_open_memory(&g, copy, size, "fuzz.gguf", &err) == 0) {
        for (uint64_t i = 0; i < g.n_kv; i++) {
            touch_kv(&g, &g.kv[i]);
            if (hearth_gguf_find_kv(&g, g.kv[i].key) != &g.kv[i])
                abort(); /* keys are unique: lookup must find this very record */
        }
        for (uint64_t i = 0; i < g.n_tensors; i++) {
            const hearth_gguf_tensor *t = &g.tensors[i];
            if (hearth_gguf_find_tensor(&g, t->name) != t)
                abort();
            if (t->nbytes)
                sink += ((const uint8_t *)t->data)[0] + ((const uint8_t *)t->data)[t->nbytes - 1];
        }
        hearth_vocab v;
        if (hearth_gguf_load_vocab(&g, &v, &err) == 0)
            hearth_vocab_deinit(&v);
        hearth_gguf_close(&g);
    }
    free(copy);
    return 0;
}
