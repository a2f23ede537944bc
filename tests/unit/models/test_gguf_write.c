/* Unit tests for the GGUF writer (src/models/gguf_write.c): round trips
 * through the reader, and an independent check: rewriting stories260K.gguf
 * record by record must reproduce the file llama.cpp's gguf-py wrote, byte
 * for byte. Also the vocab loader's errors on files made by the writer. */
#include "harness.h"

#include "models/gguf.h"
#include "models/gguf_vocab.h"
#include "models/gguf_write.h"

#include <unistd.h>

static void scalars_round_trip(void)
{
    hearth_gguf_writer *w = hearth_gguf_writer_new();
    uint8_t u8 = 200;
    int8_t i8 = -100;
    uint16_t u16 = 60000;
    int16_t i16 = -30000;
    uint64_t u64 = 1ull << 40, big = UINT64_MAX;
    int64_t i64 = -(1ll << 40);
    double f64 = 0.1;
    CHECK_EQ_INT(hearth_gguf_writer_add_scalar(w, "u8", HEARTH_GGUF_U8, &u8), 0);
    hearth_gguf_writer_add_scalar(w, "i8", HEARTH_GGUF_I8, &i8);
    hearth_gguf_writer_add_scalar(w, "u16", HEARTH_GGUF_U16, &u16);
    hearth_gguf_writer_add_scalar(w, "i16", HEARTH_GGUF_I16, &i16);
    hearth_gguf_writer_add_scalar(w, "u64", HEARTH_GGUF_U64, &u64);
    hearth_gguf_writer_add_scalar(w, "u64max", HEARTH_GGUF_U64, &big);
    hearth_gguf_writer_add_scalar(w, "i64", HEARTH_GGUF_I64, &i64);
    hearth_gguf_writer_add_scalar(w, "f64", HEARTH_GGUF_F64, &f64);
    hearth_gguf_writer_add_u32(w, "u32", 4000000000u);
    hearth_gguf_writer_add_i32(w, "i32", -7);
    hearth_gguf_writer_add_f32(w, "f32", 1.5f);
    hearth_gguf_writer_add_bool(w, "yes", true);
    hearth_gguf_writer_add_bool(w, "no", false);
    hearth_gguf_writer_add_str(w, "s", "h\xc3\xa9llo");
    hearth_gguf_writer_add_str(w, "empty", "");
    CHECK_EQ_INT(hearth_gguf_writer_add_u32(w, "u32", 1), HEARTH_EINVAL); /* duplicate */
    uint8_t *bytes;
    size_t size;
    hearth_err e = {0};
    CHECK_EQ_INT(hearth_gguf_writer_serialize(w, 0, &bytes, &size, &e), HEARTH_EINVAL);
    CHECK(strstr(e.msg, "'u32' added twice") != NULL);
    hearth_gguf_writer_free(w);

    w = hearth_gguf_writer_new();
    hearth_gguf_writer_add_scalar(w, "u8", HEARTH_GGUF_U8, &u8);
    hearth_gguf_writer_add_scalar(w, "i8", HEARTH_GGUF_I8, &i8);
    hearth_gguf_writer_add_scalar(w, "u16", HEARTH_GGUF_U16, &u16);
    hearth_gguf_writer_add_scalar(w, "i16", HEARTH_GGUF_I16, &i16);
    hearth_gguf_writer_add_scalar(w, "u64", HEARTH_GGUF_U64, &u64);
    hearth_gguf_writer_add_scalar(w, "u64max", HEARTH_GGUF_U64, &big);
    hearth_gguf_writer_add_scalar(w, "i64", HEARTH_GGUF_I64, &i64);
    hearth_gguf_writer_add_scalar(w, "f64", HEARTH_GGUF_F64, &f64);
    hearth_gguf_writer_add_u32(w, "u32", 4000000000u);
    hearth_gguf_writer_add_i32(w, "i32", -7);
    hearth_gguf_writer_add_f32(w, "f32", 1.5f);
    hearth_gguf_writer_add_bool(w, "yes", true);
    hearth_gguf_writer_add_bool(w, "no", false);
    hearth_gguf_writer_add_str(w, "s", "h\xc3\xa9llo");
    hearth_gguf_writer_add_str(w, "empty", "");
    int rc = hearth_gguf_writer_serialize(w, 0, &bytes, &size, &e);
    CHECK_MSG(rc == 0, "%s", e.msg);
    hearth_gguf_writer_free(w);
    if (rc)
        return;
    hearth_gguf g;
    rc = hearth_gguf_open_memory(&g, bytes, size, "scalars.gguf", &e);
    CHECK_MSG(rc == 0, "%s", e.msg);
    if (rc == 0) {
        uint32_t u;
        int64_t i;
        float f;
        bool b;
        const char *s;
        size_t n;
        CHECK_EQ_INT(g.n_kv, 15);
        CHECK(hearth_gguf_get_u32(&g, "u8", &u, NULL) == 0 && u == 200);
        CHECK_EQ_INT(hearth_gguf_get_u32(&g, "i8", &u, &e), HEARTH_EINVAL); /* negative */
        CHECK(strstr(e.msg, "scalars.gguf: key 'i8' at offset") != NULL);
        CHECK(hearth_gguf_get_i64(&g, "i8", &i, NULL) == 0 && i == -100);
        CHECK(hearth_gguf_get_u32(&g, "u16", &u, NULL) == 0 && u == 60000);
        CHECK(hearth_gguf_get_i64(&g, "i16", &i, NULL) == 0 && i == -30000);
        CHECK_EQ_INT(hearth_gguf_get_u32(&g, "u64", &u, NULL), HEARTH_EINVAL); /* 2^40 does not fit */
        CHECK(hearth_gguf_get_i64(&g, "u64", &i, NULL) == 0 && i == (1ll << 40));
        CHECK_EQ_INT(hearth_gguf_get_i64(&g, "u64max", &i, NULL), HEARTH_EINVAL);
        CHECK(hearth_gguf_get_i64(&g, "i64", &i, NULL) == 0 && i == -(1ll << 40));
        CHECK(hearth_gguf_get_u32(&g, "u32", &u, NULL) == 0 && u == 4000000000u);
        CHECK(hearth_gguf_get_i64(&g, "i32", &i, NULL) == 0 && i == -7);
        CHECK(hearth_gguf_get_f32(&g, "f32", &f, NULL) == 0 && f == 1.5f);
        CHECK(hearth_gguf_get_f32(&g, "f64", &f, NULL) == 0 && f == (float)0.1);
        CHECK_EQ_INT(hearth_gguf_get_f32(&g, "u8", &f, NULL), HEARTH_EINVAL);
        CHECK(hearth_gguf_get_bool(&g, "yes", &b, NULL) == 0 && b);
        CHECK(hearth_gguf_get_bool(&g, "no", &b, NULL) == 0 && !b);
        CHECK_EQ_INT(hearth_gguf_get_bool(&g, "u8", &b, NULL), HEARTH_EINVAL);
        CHECK(hearth_gguf_get_str(&g, "s", &s, &n, NULL) == 0 && n == 6 && memcmp(s, "h\xc3\xa9llo", 6) == 0);
        CHECK(hearth_gguf_get_str(&g, "empty", &s, &n, NULL) == 0 && n == 0);
        CHECK_EQ_INT(hearth_gguf_get_str(&g, "u8", &s, &n, NULL), HEARTH_EINVAL);
        CHECK_EQ_INT(hearth_gguf_get_str(&g, "absent", &s, &n, &e), HEARTH_ENOTFOUND);
        CHECK(strstr(e.msg, "scalars.gguf: key 'absent' not found") != NULL);
        CHECK_EQ_INT(g.n_tensors, 0);
        CHECK_EQ_INT(size, g.map.size);
        hearth_gguf_close(&g);
    }
    free(bytes);
}

static void arrays_and_tensors_round_trip(void)
{
    static const char *const strs[] = {"a", "", "\xe2\x96\x81the", "longer string here"};
    const float fv[] = {0.5f, -2.0f, 3.25f};
    const int32_t iv[] = {1, -1, 2147483647};
    float w32[6 * 3];
    uint16_t w16[8];
    uint8_t q8[2 * 34 * 2]; /* Q8_0: 64 x 2 elements = 4 blocks of 34 bytes */
    for (size_t i = 0; i < 18; i++)
        w32[i] = (float)i * 0.25f - 1.0f;
    for (size_t i = 0; i < 8; i++)
        w16[i] = (uint16_t)(0x3c00 + i);
    for (size_t i = 0; i < sizeof q8; i++)
        q8[i] = (uint8_t)(i * 37 + 11);
    hearth_gguf_writer *w = hearth_gguf_writer_new();
    hearth_gguf_writer_add_arr_str(w, "strs", strs, 4);
    hearth_gguf_writer_add_arr_f32(w, "fv", fv, 3);
    hearth_gguf_writer_add_arr_i32(w, "iv", iv, 3);
    hearth_gguf_writer_add_arr_i32(w, "none", NULL, 0);
    CHECK_EQ_INT(hearth_gguf_writer_add_tensor(w, "w32", HEARTH_F32, 2, (int64_t[]){6, 3}, w32, sizeof w32), 0);
    CHECK_EQ_INT(hearth_gguf_writer_add_tensor(w, "w16", HEARTH_F16, 3, (int64_t[]){2, 2, 2}, w16, sizeof w16), 0);
    CHECK_EQ_INT(hearth_gguf_writer_add_tensor(w, "q8", HEARTH_Q8_0, 2, (int64_t[]){64, 2}, q8, sizeof q8), 0);
    CHECK_EQ_INT(hearth_gguf_writer_add_tensor(w, "empty", HEARTH_F32, 2, (int64_t[]){4, 0}, NULL, 0), 0);
    CHECK_EQ_INT(hearth_gguf_writer_add_tensor(w, "scalar", HEARTH_F32, 0, NULL, fv, 4), 0);
    uint8_t *bytes;
    size_t size;
    hearth_err e = {0};
    int rc = hearth_gguf_writer_serialize(w, 64, &bytes, &size, &e);
    CHECK_MSG(rc == 0, "%s", e.msg);
    char path[] = "/tmp/hearth-test-gguf-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd >= 0)
        close(fd);
    CHECK_EQ_INT(hearth_gguf_writer_write(w, path, 64, &e), 0);
    hearth_gguf_writer_free(w);
    if (rc)
        return;
    hearth_gguf g;
    rc = hearth_gguf_open(&g, path, &e);
    CHECK_MSG(rc == 0, "%s", e.msg);
    unlink(path);
    if (rc) {
        free(bytes);
        return;
    }
    CHECK(g.map.size == size && memcmp(g.map.data, bytes, size) == 0); /* file == memory */
    CHECK_EQ_INT(g.alignment, 64);
    CHECK_EQ_INT(g.data_offset % 64, 0);
    uint32_t a;
    CHECK(hearth_gguf_get_u32(&g, "general.alignment", &a, NULL) == 0 && a == 64);
    const hearth_gguf_kv *kv;
    CHECK_EQ_INT(hearth_gguf_get_arr(&g, "strs", HEARTH_GGUF_STRING, &kv, &e), 0);
    CHECK_EQ_INT(hearth_gguf_get_arr(&g, "fv", HEARTH_GGUF_STRING, &kv, &e), HEARTH_EINVAL);
    CHECK(strstr(e.msg, "array of f32, expected array of string") != NULL);
    if (hearth_gguf_get_arr(&g, "strs", HEARTH_GGUF_STRING, &kv, NULL) == 0) {
        CHECK_EQ_INT(kv->arr_n, 4);
        for (uint64_t i = 0; i < 4; i++) {
            const char *s;
            size_t n;
            CHECK(hearth_gguf_arr_str(kv, i, &s, &n) == 0 && n == strlen(strs[i]) && memcmp(s, strs[i], n) == 0);
        }
        const char *s;
        size_t n;
        CHECK_EQ_INT(hearth_gguf_arr_str(kv, 4, &s, &n), HEARTH_EINVAL);
        float f;
        CHECK_EQ_INT(hearth_gguf_arr_f32(kv, 0, &f), HEARTH_EINVAL);
    }
    if (hearth_gguf_get_arr(&g, "fv", HEARTH_GGUF_TYPE_ANY, &kv, NULL) == 0)
        for (uint64_t i = 0; i < 3; i++) {
            float f;
            CHECK(hearth_gguf_arr_f32(kv, i, &f) == 0 && f == fv[i]);
        }
    if (hearth_gguf_get_arr(&g, "iv", HEARTH_GGUF_I32, &kv, NULL) == 0)
        for (uint64_t i = 0; i < 3; i++) {
            int32_t v;
            CHECK(hearth_gguf_arr_i32(kv, i, &v) == 0 && v == iv[i]);
        }
    CHECK(hearth_gguf_get_arr(&g, "none", HEARTH_GGUF_I32, &kv, NULL) == 0 && kv->arr_n == 0);
    const hearth_gguf_tensor *t = hearth_gguf_find_tensor(&g, "w32");
    CHECK(t && t->n_dims == 2 && t->ne[0] == 6 && t->ne[1] == 3 && t->ne[2] == 1 && t->type == HEARTH_F32);
    CHECK(t && t->nbytes == sizeof w32 && memcmp(t->data, w32, sizeof w32) == 0 && t->offset % 64 == 0);
    t = hearth_gguf_find_tensor(&g, "w16");
    CHECK(t && t->n_dims == 3 && t->ne[2] == 2 && t->type == HEARTH_F16 && memcmp(t->data, w16, sizeof w16) == 0);
    t = hearth_gguf_find_tensor(&g, "q8");
    CHECK(t && t->type == HEARTH_Q8_0 && t->nbytes == sizeof q8 && memcmp(t->data, q8, sizeof q8) == 0);
    t = hearth_gguf_find_tensor(&g, "empty");
    CHECK(t && t->nbytes == 0 && t->ne[1] == 0);
    t = hearth_gguf_find_tensor(&g, "scalar");
    CHECK(t && t->n_dims == 0 && t->nbytes == 4 && memcmp(t->data, fv, 4) == 0);
    hearth_gguf_close(&g);
    free(bytes);
}

static void writer_rejects_bad_input(void)
{
    hearth_gguf_writer *w = hearth_gguf_writer_new();
    float x[4] = {0};
    CHECK_EQ_INT(hearth_gguf_writer_add_tensor(w, "x", HEARTH_F32, 1, (int64_t[]){3}, x, sizeof x), HEARTH_EINVAL);
    CHECK_EQ_INT(hearth_gguf_writer_add_tensor(w, "x", HEARTH_F32, 5, (int64_t[]){1, 1, 1, 1, 4}, x, 16),
                 HEARTH_EINVAL);
    CHECK_EQ_INT(hearth_gguf_writer_add_tensor(w, "x", HEARTH_Q8_0, 1, (int64_t[]){4}, x, 16), HEARTH_EINVAL);
    CHECK_EQ_INT(hearth_gguf_writer_add_tensor(w, "x", (hearth_dtype)99, 1, (int64_t[]){4}, x, 16), HEARTH_EINVAL);
    CHECK_EQ_INT(hearth_gguf_writer_add_tensor(w, "x", HEARTH_F32, 1, (int64_t[]){4}, x, 16), 0);
    CHECK_EQ_INT(hearth_gguf_writer_add_tensor(w, "x", HEARTH_F32, 1, (int64_t[]){4}, x, 16), HEARTH_EINVAL);
    CHECK_EQ_INT(hearth_gguf_writer_add_scalar(w, "k", HEARTH_GGUF_STRING, "x"), HEARTH_EINVAL);
    hearth_gguf_writer_free(w);
    w = hearth_gguf_writer_new();
    uint8_t *bytes;
    size_t size;
    hearth_err e = {0};
    CHECK_EQ_INT(hearth_gguf_writer_serialize(w, 48, &bytes, &size, &e), HEARTH_EINVAL);
    CHECK(strstr(e.msg, "48") != NULL);
    hearth_gguf_writer_add_u32(w, "general.alignment", 16);
    CHECK_EQ_INT(hearth_gguf_writer_serialize(w, 64, &bytes, &size, &e), HEARTH_EINVAL);
    CHECK_EQ_INT(hearth_gguf_writer_serialize(w, 16, &bytes, &size, &e), 0);
    free(bytes);
    hearth_gguf_writer_free(w);
    hearth_gguf_writer_free(NULL);
}

/* NUL-terminated copy of a string array element (test-only convenience). */
static char *dup_n(const char *s, size_t n)
{
    char *c = malloc(n + 1);
    memcpy(c, s, n);
    c[n] = 0;
    return c;
}

/* Copies one record of g into w with the writer's public calls. */
static int copy_kv(hearth_gguf_writer *w, const hearth_gguf_kv *kv)
{
    if (kv->type == HEARTH_GGUF_STRING) {
        char *s = dup_n((const char *)kv->data, kv->str_len);
        int rc = hearth_gguf_writer_add_str(w, kv->key, s);
        free(s);
        return rc;
    }
    if (kv->type != HEARTH_GGUF_ARRAY)
        return hearth_gguf_writer_add_scalar(w, kv->key, kv->type, kv->data);
    if (kv->arr_type == HEARTH_GGUF_STRING) {
        char **items = calloc(kv->arr_n, sizeof *items);
        for (uint64_t i = 0; i < kv->arr_n; i++) {
            const char *s;
            size_t n;
            hearth_gguf_arr_str(kv, i, &s, &n);
            items[i] = dup_n(s, n);
        }
        int rc = hearth_gguf_writer_add_arr_str(w, kv->key, (const char *const *)items, kv->arr_n);
        for (uint64_t i = 0; i < kv->arr_n; i++)
            free(items[i]);
        free(items);
        return rc;
    }
    if (kv->arr_type == HEARTH_GGUF_F32 || kv->arr_type == HEARTH_GGUF_I32) {
        void *v = malloc(kv->arr_n * 4);
        memcpy(v, kv->data, kv->arr_n * 4);
        int rc = kv->arr_type == HEARTH_GGUF_F32 ? hearth_gguf_writer_add_arr_f32(w, kv->key, v, kv->arr_n)
                                                 : hearth_gguf_writer_add_arr_i32(w, kv->key, v, kv->arr_n);
        free(v);
        return rc;
    }
    return HEARTH_EUNSUPPORTED;
}

static void rewrite_reproduces_stories260k(void)
{
    char path[512];
    if (!hearth_test_shared_path(path, sizeof path, "models/stories260K/stories260K.gguf"))
        return;
    hearth_gguf g;
    hearth_err e = {0};
    if (hearth_gguf_open(&g, path, &e)) {
        CHECK_MSG(0, "%s", e.msg);
        return;
    }
    hearth_gguf_writer *w = hearth_gguf_writer_new();
    for (uint64_t i = 0; i < g.n_kv; i++)
        CHECK_EQ_INT(copy_kv(w, &g.kv[i]), 0);
    for (uint64_t i = 0; i < g.n_tensors; i++) {
        const hearth_gguf_tensor *t = &g.tensors[i];
        CHECK_EQ_INT(hearth_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data, t->nbytes), 0);
    }
    uint8_t *bytes;
    size_t size;
    int rc = hearth_gguf_writer_serialize(w, 0, &bytes, &size, &e);
    CHECK_MSG(rc == 0, "%s", e.msg);
    if (rc == 0) {
        CHECK_EQ_INT(size, g.map.size);
        CHECK(size == g.map.size && memcmp(bytes, g.map.data, size) == 0);
        free(bytes);
    }
    hearth_gguf_writer_free(w);
    hearth_gguf_close(&g);
}

/* Serializes w into a reader over memory named name; frees w. */
static int open_written(hearth_gguf_writer *w, const char *name, hearth_gguf *g, uint8_t **bytes)
{
    size_t size;
    hearth_err e = {0};
    int rc = hearth_gguf_writer_serialize(w, 0, bytes, &size, &e);
    hearth_gguf_writer_free(w);
    if (rc == 0 && (rc = hearth_gguf_open_memory(g, *bytes, size, name, &e)))
        free(*bytes);
    CHECK_MSG(rc == 0, "%s", e.msg);
    return rc;
}

static void vocab_errors(void)
{
    static const char *const toks[] = {"<unk>", "a", "b"};
    const float scores2[] = {0, 1};
    const int32_t bad_kinds[] = {1, 1, 9};
    struct {
        const char *name;
        int code;
        const char *key;
    } cases[] = {
        {"no-tokens.gguf", HEARTH_ENOTFOUND, "tokenizer.ggml.tokens"},
        {"short-scores.gguf", HEARTH_EINVAL, "tokenizer.ggml.scores"},
        {"bad-kind.gguf", HEARTH_EINVAL, "tokenizer.ggml.token_type"},
        {"tokens-not-strings.gguf", HEARTH_EINVAL, "tokenizer.ggml.tokens"},
        {"model-too-long.gguf", HEARTH_EINVAL, "tokenizer.ggml.model"},
        {"bos-is-string.gguf", HEARTH_EINVAL, "tokenizer.ggml.bos_token_id"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        hearth_gguf_writer *w = hearth_gguf_writer_new();
        if (c == 3)
            hearth_gguf_writer_add_arr_f32(w, "tokenizer.ggml.tokens", scores2, 2);
        else if (c != 0)
            hearth_gguf_writer_add_arr_str(w, "tokenizer.ggml.tokens", toks, 3);
        if (c == 1)
            hearth_gguf_writer_add_arr_f32(w, "tokenizer.ggml.scores", scores2, 2);
        if (c == 2)
            hearth_gguf_writer_add_arr_i32(w, "tokenizer.ggml.token_type", bad_kinds, 3);
        if (c == 4)
            hearth_gguf_writer_add_str(w, "tokenizer.ggml.model", "a-model-name-longer-than-31-bytes");
        if (c == 5)
            hearth_gguf_writer_add_str(w, "tokenizer.ggml.bos_token_id", "1");
        hearth_gguf g;
        uint8_t *bytes;
        if (open_written(w, cases[c].name, &g, &bytes))
            continue;
        hearth_vocab v;
        hearth_err e = {0};
        CHECK_EQ_INT(hearth_gguf_load_vocab(&g, &v, &e), cases[c].code);
        CHECK_MSG(strstr(e.msg, cases[c].name) && strstr(e.msg, cases[c].key), "%s", e.msg);
        CHECK(v.text == NULL && v.n_tokens == 0); /* left deinitialized */
        hearth_gguf_close(&g);
        free(bytes);
    }
}

static void vocab_special_ids_out_of_range_are_absent(void)
{
    static const char *const toks[] = {"<unk>", "a", "b"};
    hearth_gguf_writer *w = hearth_gguf_writer_new();
    hearth_gguf_writer_add_arr_str(w, "tokenizer.ggml.tokens", toks, 3);
    hearth_gguf_writer_add_u32(w, "tokenizer.ggml.bos_token_id", 3);
    hearth_gguf_writer_add_i32(w, "tokenizer.ggml.eos_token_id", -1);
    hearth_gguf_writer_add_u32(w, "tokenizer.ggml.separator_token_id", 2);
    hearth_gguf_writer_add_bool(w, "tokenizer.ggml.add_space_prefix", false);
    hearth_gguf g;
    uint8_t *bytes;
    if (open_written(w, "ids.gguf", &g, &bytes))
        return;
    hearth_vocab v;
    hearth_err e = {0};
    CHECK_EQ_INT(hearth_gguf_load_vocab(&g, &v, &e), 0);
    CHECK_EQ_INT(v.bos, -1);
    CHECK_EQ_INT(v.eos, -1);
    CHECK_EQ_INT(v.sep, 2); /* the correct spelling is read too */
    CHECK_EQ_INT(v.add_space_prefix, 0);
    CHECK_EQ_INT(v.add_bos, -1);
    CHECK_EQ_STR(v.model, "");
    hearth_vocab_deinit(&v);
    hearth_gguf_close(&g);
    free(bytes);
}

int main(void)
{
    RUN(scalars_round_trip);
    RUN(arrays_and_tensors_round_trip);
    RUN(writer_rejects_bad_input);
    RUN(rewrite_reproduces_stories260k);
    RUN(vocab_errors);
    RUN(vocab_special_ids_out_of_range_are_absent);
    TEST_EXIT();
}
