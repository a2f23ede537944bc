/* fuzz_safetensors.c: libFuzzer target for the safetensors reader.
 *
 * Opens the input as a file in memory; on success touches every byte of
 * every tensor (so a view past the input faults under ASan), looks each
 * tensor up by name, reads float tensors through hearth_st_read_f32, and
 * reads the metadata. Seeds: tests/fuzz/corpus/safetensors/. */
#include "models/safetensors.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* a private copy so the input ends at an ASan redzone */
    uint8_t *copy = malloc(size ? size : 1);
    if (!copy)
        return 0;
    if (size)
        memcpy(copy, data, size);
    hearth_st st;
    hearth_err err = {0};
    if (hearth_st_open_memory(&st, copy, size, "fuzz", &err) == HEARTH_OK) {
        volatile uint8_t sink = 0;
        for (size_t i = 0; i < st.n_tensors; i++) {
            const hearth_st_tensor *t = &st.tensors[i];
            for (size_t k = 0; k < t->nbytes; k++)
                sink ^= ((const uint8_t *)t->data)[k];
            if (hearth_st_find(&st, t->name) != t)
                abort(); /* names are unique after open, so lookup must find this one */
            float f[16];
            int64_t n = t->n_elements < 16 ? t->n_elements : 16;
            if (t->supported && hearth_st_read_f32(t, 0, n, f) != HEARTH_OK)
                abort();
        }
        for (size_t i = 0; i < st.n_meta; i++)
            if (hearth_st_meta(&st, st.meta_keys[i]) != st.meta_values[i])
                abort();
        (void)sink;
        hearth_st_close(&st);
    } else if (!err.msg[0] || !strstr(err.msg, "fuzz")) {
        abort(); /* every failure names the file */
    }
    free(copy);
    return 0;
}
