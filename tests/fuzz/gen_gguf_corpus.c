/* gen_gguf_corpus.c: writes the fuzz seeds in tests/fuzz/corpus/gguf/ with
 * hearth's GGUF writer, so the seeds are reproducible. Not part of the build;
 * run by hand after changing the writer:
 *   make && cc -std=c17 -Ibuild/inc/tests -Isrc tests/fuzz/gen_gguf_corpus.c \
 *     build/libmodels.a build/libengine.a build/libtext.a build/libbase.a -o /tmp/gen \
 *     && /tmp/gen tests/fuzz/corpus/gguf */
#include "models/gguf.h"
#include "models/gguf_write.h"

#include <stdio.h>
#include <string.h>

static int save(hearth_gguf_writer *w, const char *dir, const char *name, uint32_t alignment)
{
    char path[512];
    hearth_err e = {0};
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int rc = hearth_gguf_writer_write(w, path, alignment, &e);
    if (rc)
        fprintf(stderr, "%s\n", e.msg);
    hearth_gguf_writer_free(w);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    const char *dir = argv[1];
    static const char *const toks[] = {"<unk>", "<s>", "</s>", "\xe2\x96\x81the", "a", "b", "ab", "<0x0A>"};
    static const char *const merges[] = {"a b", "\xe2\x96\x81 t"};
    const float scores[] = {0, 0, 0, -1, -2, -3, -4, 0};
    const int32_t kinds[] = {2, 3, 3, 1, 1, 1, 1, 6};
    float w32[16];
    uint8_t q8[34 * 2], q4k[144], q6k[210];
    uint16_t h[8];
    for (int i = 0; i < 16; i++)
        w32[i] = (float)i / 8.0f - 1.0f;
    for (size_t i = 0; i < sizeof q8; i++)
        q8[i] = (uint8_t)(i * 7 + 1);
    for (size_t i = 0; i < sizeof q4k; i++)
        q4k[i] = (uint8_t)(i * 13 + 5);
    for (size_t i = 0; i < sizeof q6k; i++)
        q6k[i] = (uint8_t)(i * 3 + 2);
    for (int i = 0; i < 8; i++)
        h[i] = (uint16_t)(0x3c00 + i);
    int rc = 0;

    hearth_gguf_writer *w = hearth_gguf_writer_new();
    hearth_gguf_writer_add_str(w, "general.architecture", "llama");
    hearth_gguf_writer_add_u32(w, "llama.block_count", 1);
    hearth_gguf_writer_add_f32(w, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
    hearth_gguf_writer_add_tensor(w, "token_embd.weight", HEARTH_F32, 2, (int64_t[]){4, 4}, w32, sizeof w32);
    hearth_gguf_writer_add_tensor(w, "blk.0.attn_q.weight", HEARTH_Q8_0, 2, (int64_t[]){32, 2}, q8, sizeof q8);
    hearth_gguf_writer_add_tensor(w, "output_norm.weight", HEARTH_F16, 1, (int64_t[]){8}, h, sizeof h);
    rc |= save(w, dir, "tiny-llama.gguf", 0);

    w = hearth_gguf_writer_new();
    hearth_gguf_writer_add_str(w, "tokenizer.ggml.model", "llama");
    hearth_gguf_writer_add_arr_str(w, "tokenizer.ggml.tokens", toks, 8);
    hearth_gguf_writer_add_arr_f32(w, "tokenizer.ggml.scores", scores, 8);
    hearth_gguf_writer_add_arr_i32(w, "tokenizer.ggml.token_type", kinds, 8);
    hearth_gguf_writer_add_arr_str(w, "tokenizer.ggml.merges", merges, 2);
    hearth_gguf_writer_add_u32(w, "tokenizer.ggml.bos_token_id", 1);
    hearth_gguf_writer_add_u32(w, "tokenizer.ggml.eos_token_id", 2);
    hearth_gguf_writer_add_u32(w, "tokenizer.ggml.seperator_token_id", 0xffffffffu);
    hearth_gguf_writer_add_bool(w, "tokenizer.ggml.add_bos_token", true);
    rc |= save(w, dir, "vocab.gguf", 0);

    w = hearth_gguf_writer_new();
    uint8_t u8 = 7;
    int16_t i16 = -3;
    uint64_t u64 = 1ull << 40;
    double f64 = 2.5;
    hearth_gguf_writer_add_scalar(w, "t.u8", HEARTH_GGUF_U8, &u8);
    hearth_gguf_writer_add_scalar(w, "t.i16", HEARTH_GGUF_I16, &i16);
    hearth_gguf_writer_add_scalar(w, "t.u64", HEARTH_GGUF_U64, &u64);
    hearth_gguf_writer_add_scalar(w, "t.f64", HEARTH_GGUF_F64, &f64);
    hearth_gguf_writer_add_tensor(w, "q4k", HEARTH_Q4_K, 1, (int64_t[]){256}, q4k, sizeof q4k);
    hearth_gguf_writer_add_tensor(w, "q6k", HEARTH_Q6_K, 1, (int64_t[]){256}, q6k, sizeof q6k);
    hearth_gguf_writer_add_tensor(w, "empty", HEARTH_BF16, 2, (int64_t[]){0, 3}, NULL, 0);
    rc |= save(w, dir, "types-align64.gguf", 64);
    return rc ? 1 : 0;
}
