/* dtype.c: the table of supported element types. Sizes follow GGUF's block
 * structs: Q4_0 = 2 + 16, Q8_0 = 2 + 32, Q4_K = 2 + 2 + 12 + 128,
 * Q6_K = 128 + 64 + 16 + 2. */
#include "dtype.h"

#include <strings.h>

static const hearth_dtype_info TABLE[HEARTH_DTYPE_COUNT_] = {
    [HEARTH_F32] = {"f32", 1, 4},
    [HEARTH_F16] = {"f16", 1, 2},
    [HEARTH_Q4_0] = {"q4_0", 32, 18},
    [HEARTH_Q8_0] = {"q8_0", 32, 34},
    [HEARTH_Q4_K] = {"q4_k", 256, 144},
    [HEARTH_Q6_K] = {"q6_k", 256, 210},
    [HEARTH_BF16] = {"bf16", 1, 2},
};

const hearth_dtype_info *hearth_dtype_get(uint32_t id)
{
    if (id >= HEARTH_DTYPE_COUNT_ || !TABLE[id].name)
        return NULL;
    return &TABLE[id];
}

int hearth_dtype_from_name(const char *name)
{
    for (int i = 0; i < HEARTH_DTYPE_COUNT_; i++)
        if (TABLE[i].name && strcasecmp(TABLE[i].name, name) == 0)
            return i;
    return -1;
}

bool hearth_dtype_row_bytes(hearth_dtype t, int64_t n, size_t *out)
{
    const hearth_dtype_info *info = hearth_dtype_get((uint32_t)t);
    if (!info || n < 0 || n % info->block != 0)
        return false;
    uint64_t blocks = (uint64_t)(n / info->block);
    if (blocks > SIZE_MAX / info->block_bytes)
        return false;
    *out = (size_t)blocks * info->block_bytes;
    return true;
}
