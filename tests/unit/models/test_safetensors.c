/* Unit tests for the safetensors reader and writer (src/models/safetensors*.c).
 *
 * Files are handcrafted here, header text written by hand from the format's
 * description (huggingface/safetensors README), one corrupt file per failure;
 * each is placed so it ends where a PROT_NONE page begins, so a read past the
 * input faults. The writer's output is checked by an independent cJSON walk
 * of its header (sorted keys, 8-aligned data, no holes) as well as by the
 * reader, and the data bytes against what was given. */
#include "harness.h"

#include "models/safetensors.h"
#include "models/safetensors_write.h"

#include <cjson/cJSON.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#define GUARD_ROOM (1u << 20)

static uint8_t *g_map; /* GUARD_ROOM usable bytes, then one PROT_NONE page */

static int guard_setup(void)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    g_map = mmap(NULL, GUARD_ROOM + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (g_map == MAP_FAILED)
        return -1;
    return mprotect(g_map + GUARD_ROOM, page, PROT_NONE);
}

/* Copies s[0..n) to end at the guard page. The start is then n bytes before a
 * page boundary: 8-aligned when n is, which the alignment cases rely on. */
static const uint8_t *place(const void *s, size_t n)
{
    uint8_t *p = g_map + GUARD_ROOM - n;
    if (n)
        memcpy(p, s, n);
    return p;
}

/* file = u64 length of header, header, data_len bytes of data (0x11, 0x22, ...) */
static size_t build(uint8_t *out, size_t cap, const char *header, size_t data_len)
{
    size_t h = strlen(header), n = 8 + h + data_len;
    if (n > cap)
        return 0;
    for (int i = 0; i < 8; i++)
        out[i] = (uint8_t)((uint64_t)h >> (8 * i));
    memcpy(out + 8, header, h);
    for (size_t i = 0; i < data_len; i++)
        out[8 + h + i] = (uint8_t)(0x11 * (i + 1));
    return n;
}

/* Opens header + data_len bytes as "<name>.safetensors" against the guard
 * page and checks the code and that the message names the file and each of
 * the needles (a tensor name, an offset). */
static void expect_fail(const char *name, const char *header, size_t data_len, int code, const char *needle1,
                        const char *needle2)
{
    static uint8_t buf[16384];
    size_t n = build(buf, sizeof buf, header, data_len);
    char file[128];
    snprintf(file, sizeof file, "%s.safetensors", name);
    hearth_st st;
    hearth_err e = {0};
    int rc = hearth_st_open_memory(&st, place(buf, n), n, file, &e);
    CHECK_MSG(rc == code, "%s: got %d (%s), want %d", name, rc, e.msg, code);
    CHECK_MSG(strstr(e.msg, file) != NULL, "%s: message lacks the file: %s", name, e.msg);
    CHECK_MSG(!needle1 || strstr(e.msg, needle1), "%s: message lacks '%s': %s", name, needle1, e.msg);
    CHECK_MSG(!needle2 || strstr(e.msg, needle2), "%s: message lacks '%s': %s", name, needle2, e.msg);
    if (getenv("HEARTH_TEST_VERBOSE"))
        fprintf(stderr, "  %s\n", e.msg);
    hearth_st_close(&st);
}

/* Header bytes only (no 8-byte length), for the length-field cases. */
static void expect_fail_raw(const char *name, const uint8_t *bytes, size_t n, int code, const char *needle)
{
    char file[128];
    snprintf(file, sizeof file, "%s.safetensors", name);
    hearth_st st;
    hearth_err e = {0};
    int rc = hearth_st_open_memory(&st, place(bytes, n), n, file, &e);
    CHECK_MSG(rc == code, "%s: got %d (%s), want %d", name, rc, e.msg, code);
    CHECK_MSG(strstr(e.msg, file) && strstr(e.msg, needle), "%s: message lacks file or '%s': %s", name, needle,
              e.msg);
    hearth_st_close(&st);
}

static void length_field(void)
{
    uint8_t b[16] = {0};
    expect_fail_raw("too_short", b, 7, HEARTH_EINVAL, "offset 0");
    b[0] = 100; /* 100-byte header in a 16-byte file */
    expect_fail_raw("past_file", b, 16, HEARTH_EINVAL, "runs past the end");
    memset(b, 0, sizeof b);
    b[3] = 0x10; /* 256 MiB */
    expect_fail_raw("over_bound", b, 16, HEARTH_ELIMIT, "exceeds the limit");
    memset(b, 0, sizeof b);
    b[0] = 8;
    memcpy(b + 8, "[1,2,3] ", 8);
    expect_fail_raw("not_object_start", b, 16, HEARTH_EINVAL, "start with '{'");
    memset(b, 0, sizeof b);
    expect_fail_raw("zero_length", b, 8, HEARTH_EINVAL, "offset 8");
}

static void json_errors(void)
{
    /* cJSON stops at the first bad byte: the '}' missing after offset 8 + 8 */
    expect_fail("invalid_json", "{\"a\": {", 0, HEARTH_EINVAL, "invalid JSON", "at offset");
    expect_fail("trailing_json", "{}   x  ", 0, HEARTH_EINVAL, "offset 13", "after the header");
    expect_fail("entry_not_object", "{\"w\": 5}", 0, HEARTH_EINVAL, "tensor 'w' at offset 9", "not an object");
}

static void entry_errors(void)
{
    expect_fail("missing_dtype", "{\"w\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, HEARTH_EINVAL,
                "tensor 'w' at offset 9", "\"dtype\" is missing");
    expect_fail("dup_field", "{\"w\":{\"dtype\":\"F32\",\"dtype\":\"F16\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
                HEARTH_EINVAL, "tensor 'w'", "appears twice");
    expect_fail("dtype_not_string", "{\"w\":{\"dtype\":32,\"shape\":[1],\"data_offsets\":[0,4]}}", 4, HEARTH_EINVAL,
                "tensor 'w'", "not a string");
    expect_fail("unknown_dtype", "{\"w\":{\"dtype\":\"F33\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
                HEARTH_EINVAL, "tensor 'w' at offset 9", "unknown dtype 'F33'");
    expect_fail("shape_not_list", "{\"w\":{\"dtype\":\"F32\",\"shape\":1,\"data_offsets\":[0,4]}}", 4,
                HEARTH_EINVAL, "tensor 'w'", "not a list");
    expect_fail("shape_negative", "{\"w\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4,
                HEARTH_EINVAL, "tensor 'w'", "shape[0]");
    expect_fail("shape_fraction", "{\"w\":{\"dtype\":\"F32\",\"shape\":[2,0.5],\"data_offsets\":[0,4]}}", 4,
                HEARTH_EINVAL, "tensor 'w'", "shape[1]");
    expect_fail("shape_string", "{\"w\":{\"dtype\":\"F32\",\"shape\":[\"1\"],\"data_offsets\":[0,4]}}", 4,
                HEARTH_EINVAL, "tensor 'w'", "shape[0]");
    expect_fail("too_many_dims",
                "{\"w\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4,
                HEARTH_EINVAL, "tensor 'w'", "9 dims > 8");
    expect_fail("shape_overflow",
                "{\"w\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,4]}}", 4,
                HEARTH_EINVAL, "tensor 'w'", "overflows");
    expect_fail("offsets_one", "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", 4, HEARTH_EINVAL,
                "tensor 'w'", "two non-negative integers");
    /* data starts at 8 + header length; the offsets name file bytes */
    const char *rev = "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,4]}}";
    char at[64];
    snprintf(at, sizeof at, "at offset %zu", 8 + strlen(rev) + 8);
    expect_fail("offsets_reversed", rev, 8, HEARTH_EINVAL, at, "begin > end");
    expect_fail("offsets_past_data", "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,100]}}", 4,
                HEARTH_EINVAL, "tensor 'w'", "past the data section (4 bytes)");
    expect_fail("nbytes_mismatch", "{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", 4,
                HEARTH_EINVAL, "tensor 'w'", "need 8");
    expect_fail("sub_byte", "{\"w\":{\"dtype\":\"F4\",\"shape\":[3],\"data_offsets\":[0,2]}}", 2, HEARTH_EINVAL,
                "tensor 'w'", "whole number of bytes");
    static char longname[HEARTH_ST_MAX_NAME + 64];
    strcpy(longname, "{\"");
    memset(longname + 2, 'n', HEARTH_ST_MAX_NAME + 1);
    strcpy(longname + 2 + HEARTH_ST_MAX_NAME + 1, "\":{}}");
    expect_fail("name_too_long", longname, 0, HEARTH_ELIMIT, "tensor 'nnnn", "longer than 4096");
}

static void layout_errors(void)
{
    expect_fail("duplicate_name",
                "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                "\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
                8, HEARTH_EINVAL, "tensor 'w' at offset 9", "duplicate");
    const char *ov = "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                     "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}";
    char at[64];
    snprintf(at, sizeof at, "tensor 'b' at offset %zu", 8 + strlen(ov) + 4);
    expect_fail("overlap", ov, 12, HEARTH_EINVAL, at, "overlaps tensor 'a'");
    expect_fail("hole",
                "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}",
                12, HEARTH_EINVAL, "tensor 'b'", "4 unused bytes before this tensor (after tensor 'a')");
    expect_fail("hole_at_start", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8,
                HEARTH_EINVAL, "tensor 'a'", "4 unused bytes");
    const char *tr = "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}";
    snprintf(at, sizeof at, "offset %zu", 8 + strlen(tr) + 4);
    expect_fail("trailing_data", tr, 8, HEARTH_EINVAL, at, "4 trailing bytes after the last tensor 'a'");
    expect_fail("no_tensors_but_data", "{}", 4, HEARTH_EINVAL, "offset 10", "4 data bytes");
}

static void metadata_errors(void)
{
    expect_fail("meta_not_object", "{\"__metadata__\":[1]}", 0, HEARTH_EINVAL, "offset 9", "not an object");
    expect_fail("meta_value", "{\"__metadata__\":{\"k\":1}}", 0, HEARTH_EINVAL, "offset 9",
                "value of 'k' is not a string");
    expect_fail("meta_dup_key", "{\"__metadata__\":{\"k\":\"1\",\"k\":\"2\"}}", 0, HEARTH_EINVAL, "at offset 9",
                "'k' appears twice");
    expect_fail("meta_twice", "{\"__metadata__\":{},\"__metadata__\":{}}", 0, HEARTH_EINVAL, "offset 9",
                "appears twice");
}

/* Hand-written (in an aligned buffer, not against the guard page, so the
 * addresses are known): an I64 buffer (accepted, refused on use), a U8 byte that
 * leaves the F32 tensor after it at an odd address, metadata, escapes. */
static void handcrafted(void)
{
    const char *json = "{\"__metadata__\":{\"format\":\"pt\"},\"i\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[0,8]},"
                       "\"u\":{\"dtype\":\"U8\",\"shape\":[],\"data_offsets\":[8,9]},"
                       "\"f\":{\"dtype\":\"F32\",\"shape\":[1,2],\"data_offsets\":[9,17]}}";
    /* padded with spaces (as the reference writer pads) so the data starts
     * 8-aligned; i64 [0,8], u8 [8,9], f32 [9,17]: f lands on an odd address */
    char h[256];
    snprintf(h, sizeof h, "%s", json);
    while (strlen(h) % 8)
        strcat(h, " ");
    static _Alignas(16) uint8_t buf[512];
    size_t hl = strlen(h), n = 8 + hl + 17;
    for (int i = 0; i < 8; i++)
        buf[i] = (uint8_t)((uint64_t)hl >> (8 * i));
    memcpy(buf + 8, h, hl);
    uint8_t *d = buf + 8 + hl;
    memset(d, 0, 17);
    d[0] = 7;                                  /* i64 7 */
    d[8] = 0xab;                               /* u8 */
    memcpy(d + 9, "\x00\x00\xc0\x3f", 4);      /* 1.5f little-endian */
    memcpy(d + 13, "\x00\x00\x50\xc0", 4);     /* -3.25f */
    const uint8_t *p = buf;
    hearth_st st;
    hearth_err e = {0};
    int rc = hearth_st_open_memory(&st, p, n, "hand.safetensors", &e);
    CHECK_MSG(rc == HEARTH_OK, "%s", e.msg);
    if (rc)
        return;
    CHECK_EQ_INT(st.n_tensors, 3);
    CHECK_EQ_INT(st.data_offset, 8 + hl);
    CHECK_EQ_STR(hearth_st_meta(&st, "format"), "pt");
    CHECK(hearth_st_meta(&st, "nope") == NULL);
    const hearth_st_tensor *f = hearth_st_find(&st, "f"), *i = hearth_st_find(&st, "i"), *u = hearth_st_find(&st, "u");
    CHECK(f && i && u && !hearth_st_find(&st, "g"));
    if (!f || !i || !u)
        goto done;
    CHECK(i->data == p + 8 + hl && !i->supported && strcmp(i->dtype_name, "I64") == 0);
    CHECK(u->n_dims == 0 && u->n_elements == 1 && u->nbytes == 1 && ((const uint8_t *)u->data)[0] == 0xab);
    CHECK(f->supported && f->type == HEARTH_F32 && f->n_dims == 2 && f->shape[0] == 1 && f->shape[1] == 2);
    CHECK_EQ_INT(f->offset, 8 + hl + 9);
    CHECK((uintptr_t)f->data % 4 == 1 && !f->aligned);
    CHECK(i->aligned && u->aligned);
    float v[2] = {0};
    CHECK_EQ_INT(hearth_st_read_f32(f, 0, 2, v), HEARTH_OK);
    CHECK_NEAR(v[0], 1.5, 0);
    CHECK_NEAR(v[1], -3.25, 0);
    CHECK_EQ_INT(hearth_st_read_f32(f, 1, 2, v), HEARTH_EINVAL);
    CHECK_EQ_INT(hearth_st_read_f32(i, 0, 1, v), HEARTH_EUNSUPPORTED);
    const hearth_st_tensor *got;
    CHECK_EQ_INT(hearth_st_get(&st, "i", -1, NULL, &got, &e), HEARTH_EUNSUPPORTED);
    CHECK(strstr(e.msg, "hand.safetensors") && strstr(e.msg, "tensor 'i'") && strstr(e.msg, "unsupported dtype I64"));
    CHECK_EQ_INT(hearth_st_get(&st, "g", -1, NULL, &got, &e), HEARTH_ENOTFOUND);
    CHECK(strstr(e.msg, "tensor 'g' not found") != NULL);
    int64_t want[2] = {2, 1};
    CHECK_EQ_INT(hearth_st_get(&st, "f", 2, want, &got, &e), HEARTH_EINVAL);
    CHECK(strstr(e.msg, "shape [1, 2], expected [2, 1]") != NULL);
    want[0] = 1;
    want[1] = 2;
    CHECK_EQ_INT(hearth_st_get(&st, "f", 2, want, &got, &e), HEARTH_OK);
    CHECK(got == f);
done:
    hearth_st_close(&st);
}

static void conversions(void)
{
    /* bit patterns from IEEE 754 binary16 and bfloat16, worked by hand */
    CHECK_NEAR(hearth_st_f16_to_f32(0x3c00), 1.0, 0);
    CHECK_NEAR(hearth_st_f16_to_f32(0xc000), -2.0, 0);
    CHECK_NEAR(hearth_st_f16_to_f32(0x7bff), 65504.0, 0);
    CHECK_NEAR(hearth_st_f16_to_f32(0x0001), ldexp(1.0, -24), 0);
    CHECK_NEAR(hearth_st_f16_to_f32(0x03ff), ldexp(1023.0, -24), 0);
    CHECK_NEAR(hearth_st_f16_to_f32(0x3555), 0.333251953125, 0);
    CHECK(isinf(hearth_st_f16_to_f32(0xfc00)) && hearth_st_f16_to_f32(0xfc00) < 0);
    CHECK(isnan(hearth_st_f16_to_f32(0x7e00)));
    CHECK(signbit(hearth_st_f16_to_f32(0x8000)));
    CHECK_NEAR(hearth_st_bf16_to_f32(0x3fc0), 1.5, 0);
    CHECK_NEAR(hearth_st_bf16_to_f32(0xc2f7), -123.5, 0);
}

/* Walks a writer's header with cJSON, independently of the reader: keys
 * sorted, data 8-aligned, offsets tile the data by element size desc. */
static void check_writer_layout(const uint8_t *b, size_t n)
{
    uint64_t hl = 0;
    for (int i = 7; i >= 0; i--)
        hl = hl << 8 | b[i];
    CHECK((8 + hl) % 8 == 0 && 8 + hl <= n);
    cJSON *root = cJSON_ParseWithLength((const char *)b + 8, (size_t)hl);
    CHECK(root != NULL);
    if (!root)
        return;
    const char *prev = "";
    int first = 1;
    for (cJSON *e = root->child; e; e = e->next) {
        if (first && strcmp(e->string, "__metadata__") == 0) {
            first = 0;
            continue;
        }
        first = 0;
        CHECK_MSG(strcmp(prev, e->string) < 0, "'%s' after '%s'", e->string, prev);
        prev = e->string;
        cJSON *o = cJSON_GetObjectItem(e, "data_offsets");
        const char *dt = cJSON_GetObjectItem(e, "dtype")->valuestring;
        int es = strcmp(dt, "F32") == 0 ? 4 : 2;
        CHECK_MSG((int64_t)cJSON_GetArrayItem(o, 0)->valuedouble % es == 0, "'%s' misaligned", e->string);
    }
    cJSON_Delete(root);
}

static void writer_round_trip(void)
{
    static const float a[6] = {1, -2, 3.5f, 0, 1e-7f, -1e7f};
    static const uint16_t h[3] = {0x3c00, 0xc000, 0x0001};
    static const uint16_t bf[1] = {0x3fc0};
    static const float sc[1] = {42};
    hearth_st_writer w;
    hearth_st_writer_init(&w);
    hearth_err e = {0};
    int64_t s23[2] = {2, 3}, s3[1] = {3}, s11[2] = {1, 1}, s04[2] = {0, 4};
    CHECK_EQ_INT(hearth_st_writer_add(&w, "m.f16", HEARTH_F16, 1, s3, h, &e), 0);
    CHECK_EQ_INT(hearth_st_writer_add(&w, "z.f32", HEARTH_F32, 2, s23, a, &e), 0);
    CHECK_EQ_INT(hearth_st_writer_add(&w, "a.bf16", HEARTH_BF16, 2, s11, bf, &e), 0);
    CHECK_EQ_INT(hearth_st_writer_add(&w, "empty", HEARTH_F32, 2, s04, NULL, &e), 0);
    CHECK_EQ_INT(hearth_st_writer_add(&w, "q\"uote\\", HEARTH_F32, 0, NULL, sc, &e), 0);
    CHECK_EQ_INT(hearth_st_writer_add_meta(&w, "format", "pt", &e), 0);
    CHECK_EQ_INT(hearth_st_writer_add_meta(&w, "a key", "x\ny", &e), 0);
    CHECK_EQ_INT(hearth_st_writer_add(&w, "__metadata__", HEARTH_F32, 0, NULL, sc, &e), HEARTH_EINVAL);
    CHECK_EQ_INT(hearth_st_writer_add(&w, "bad", HEARTH_Q8_0, 0, NULL, sc, &e), HEARTH_EUNSUPPORTED);
    uint8_t *bytes = NULL;
    size_t n = 0;
    int rc = hearth_st_writer_serialize(&w, &bytes, &n, &e);
    CHECK_MSG(rc == 0, "%s", e.msg);
    char path[] = "/tmp/hearth-st-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd >= 0)
        close(fd);
    rc = hearth_st_writer_write(&w, path, &e);
    CHECK_MSG(rc == 0, "%s", e.msg);
    hearth_st_writer_deinit(&w);
    if (!bytes)
        return;
    check_writer_layout(bytes, n);
    for (int pass = 0; pass < 2; pass++) {
        hearth_st st;
        rc = pass == 0 ? hearth_st_open_memory(&st, place(bytes, n), n, "rt", &e) : hearth_st_open(&st, path, &e);
        CHECK_MSG(rc == 0, "%s", e.msg);
        if (rc)
            continue;
        CHECK_EQ_INT(st.n_tensors, 5);
        CHECK_EQ_INT(st.map.size, n);
        CHECK_EQ_STR(hearth_st_meta(&st, "a key"), "x\ny");
        const hearth_st_tensor *t = hearth_st_find(&st, "z.f32");
        CHECK(t && t->type == HEARTH_F32 && t->n_dims == 2 && t->shape[0] == 2 && t->shape[1] == 3 &&
              t->nbytes == 24 && t->aligned && memcmp(t->data, a, 24) == 0);
        t = hearth_st_find(&st, "m.f16");
        CHECK(t && t->type == HEARTH_F16 && t->nbytes == 6 && t->aligned && memcmp(t->data, h, 6) == 0);
        float v[3];
        CHECK(t && hearth_st_read_f32(t, 0, 3, v) == 0 && v[0] == 1 && v[1] == -2 && v[2] == ldexpf(1, -24));
        t = hearth_st_find(&st, "a.bf16");
        CHECK(t && t->type == HEARTH_BF16 && hearth_st_read_f32(t, 0, 1, v) == 0 && v[0] == 1.5f);
        t = hearth_st_find(&st, "empty");
        CHECK(t && t->nbytes == 0 && t->n_elements == 0 && t->shape[0] == 0 && t->shape[1] == 4);
        t = hearth_st_find(&st, "q\"uote\\");
        CHECK(t && t->n_dims == 0 && t->nbytes == 4 && memcmp(t->data, sc, 4) == 0);
        hearth_st_close(&st);
    }
    unlink(path);
    /* every proper prefix of a good file fails cleanly against the guard page */
    int bad = 0;
    for (size_t k = 0; k < n; k++) {
        hearth_st st;
        hearth_err pe = {0};
        rc = hearth_st_open_memory(&st, place(bytes, k), k, "prefix", &pe);
        if (rc != HEARTH_EINVAL || !strstr(pe.msg, "prefix"))
            bad++;
        hearth_st_close(&st);
    }
    CHECK_EQ_INT(bad, 0);
    free(bytes);
}

static void writer_duplicates(void)
{
    static const float x = 1;
    hearth_st_writer w;
    hearth_st_writer_init(&w);
    hearth_err e = {0};
    CHECK_EQ_INT(hearth_st_writer_add(&w, "x", HEARTH_F32, 0, NULL, &x, &e), 0);
    CHECK_EQ_INT(hearth_st_writer_add(&w, "x", HEARTH_F32, 0, NULL, &x, &e), 0);
    uint8_t *b = NULL;
    size_t n;
    CHECK_EQ_INT(hearth_st_writer_serialize(&w, &b, &n, &e), HEARTH_EINVAL);
    CHECK(strstr(e.msg, "duplicate tensor 'x'") != NULL);
    CHECK(b == NULL);
    hearth_st_writer_deinit(&w);
    /* an empty file: header only */
    hearth_st_writer_init(&w);
    CHECK_EQ_INT(hearth_st_writer_serialize(&w, &b, &n, &e), 0);
    hearth_st st;
    CHECK_EQ_INT(hearth_st_open_memory(&st, b, n, "empty", &e), 0);
    CHECK_EQ_INT(st.n_tensors, 0);
    hearth_st_close(&st);
    free(b);
    hearth_st_writer_deinit(&w);
}

/* Seeds written by Python's json and struct (tests/fuzz/corpus), an
 * independent writer: the good ones open with the values put there. */
static void python_written(void)
{
    hearth_st st;
    hearth_err e = {0};
    int rc = hearth_st_open(&st, "tests/fuzz/corpus/safetensors/mixed.st", &e);
    CHECK_MSG(rc == 0, "%s (run from the repository root)", e.msg);
    if (rc == 0) {
        const hearth_st_tensor *b = hearth_st_find(&st, "b"), *p = hearth_st_find(&st, "p");
        float v[3];
        CHECK(b && hearth_st_read_f32(b, 0, 3, v) == 0 && v[0] == 1 && v[1] == -2 && v[2] == ldexpf(1, -24));
        CHECK(p && !p->supported && p->nbytes == 16);
        CHECK_EQ_STR(hearth_st_meta(&st, "format"), "pt");
        hearth_st_close(&st);
    }
    rc = hearth_st_open(&st, "tests/fuzz/corpus/safetensors/escapes.st", &e);
    CHECK_MSG(rc == 0, "%s", e.msg);
    if (rc == 0) {
        CHECK(hearth_st_find(&st, "we\"ird\\name\xc3\xa9\n") != NULL);
        CHECK_EQ_STR(hearth_st_meta(&st, "k\x01"), "v\"");
        hearth_st_close(&st);
    }
    CHECK_EQ_INT(hearth_st_open(&st, "tests/fuzz/corpus/safetensors/hole.st", &e), HEARTH_EINVAL);
    CHECK(strstr(e.msg, "hole.st") && strstr(e.msg, "unused bytes"));
}

static void missing_file(void)
{
    hearth_st st;
    hearth_err e = {0};
    CHECK_EQ_INT(hearth_st_open(&st, "/nonexistent/hearth/model.safetensors", &e), HEARTH_EIO);
    CHECK(strstr(e.msg, "/nonexistent/hearth/model.safetensors") != NULL);
    hearth_st_close(&st);
}

int main(void)
{
    if (guard_setup() != 0) {
        fprintf(stderr, "cannot map the guard page\n");
        return 1;
    }
    RUN(length_field);
    RUN(json_errors);
    RUN(entry_errors);
    RUN(layout_errors);
    RUN(metadata_errors);
    RUN(handcrafted);
    RUN(conversions);
    RUN(writer_round_trip);
    RUN(writer_duplicates);
    RUN(python_written);
    RUN(missing_file);
    TEST_EXIT();
}
