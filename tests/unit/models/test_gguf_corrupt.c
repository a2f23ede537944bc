/* Handcrafted corrupt GGUF files, one per failure. Each file is built byte by
 * byte here (not by the writer, so the writer's own checks cannot hide a
 * reader bug), placed so its last byte touches a PROT_NONE guard page (any
 * read past the end faults under every build), and must fail with the
 * expected code and a message naming the file, the key or tensor, and the
 * offset. The tiling cases also corrupt a copy of the real stories260K.gguf
 * the way issue 16 did (its first tensor's type F32 -> Q4_0). */
#include "harness.h"

#include "base/file.h"
#include "models/gguf.h"

#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

typedef struct bytes {
    uint8_t d[4096];
    size_t n;
} bytes;

static void put(bytes *b, const void *p, size_t n)
{
    memcpy(b->d + b->n, p, n);
    b->n += n;
}
static void u32(bytes *b, uint32_t v) { put(b, &v, 4); }
static uint32_t gguf_le32_test(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}
static void u64(bytes *b, uint64_t v) { put(b, &v, 8); }
static void str(bytes *b, const char *s)
{
    u64(b, strlen(s));
    put(b, s, strlen(s));
}
static void zeros(bytes *b, size_t n)
{
    memset(b->d + b->n, 0, n);
    b->n += n;
}
static void pad(bytes *b, size_t a) { zeros(b, (a - b->n % a) % a); }

static void header(bytes *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv)
{
    put(b, "GGUF", 4);
    u32(b, version);
    u64(b, n_tensors);
    u64(b, n_kv);
}

static void kv_u32(bytes *b, const char *key, uint32_t v)
{
    str(b, key);
    u32(b, HEARTH_GGUF_U32);
    u32(b, v);
}

static void kv_str(bytes *b, const char *key, const char *v)
{
    str(b, key);
    u32(b, HEARTH_GGUF_STRING);
    str(b, v);
}

/* A tensor info record; ne has n_dims entries. */
static void tinfo(bytes *b, const char *name, uint32_t n_dims, const uint64_t *ne, uint32_t type, uint64_t off)
{
    str(b, name);
    u32(b, n_dims);
    for (uint32_t i = 0; i < n_dims; i++)
        u64(b, ne[i]);
    u32(b, type);
    u64(b, off);
}

/* The valid file every case departs from: two keys, one 4x2 f32 tensor "w". */
static size_t good_sections[4]; /* end of header, of the keys, of the infos, of the file */
static void good(bytes *b)
{
    b->n = 0;
    header(b, 3, 1, 2);
    good_sections[0] = b->n;
    kv_str(b, "general.architecture", "llama");
    kv_u32(b, "llama.block_count", 7);
    good_sections[1] = b->n;
    tinfo(b, "w", 2, (uint64_t[]){4, 2}, 0, 0);
    good_sections[2] = b->n;
    pad(b, 32);
    for (int i = 0; i < 8; i++) {
        float f = (float)i;
        put(b, &f, 4);
    }
    good_sections[3] = b->n;
}

/* Opens n bytes placed right before a guard page. */
static int open_guarded(const uint8_t *d, size_t n, const char *name, hearth_err *e)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t span = (n + page - 1) / page * page + page;
    uint8_t *m = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return 99;
    mprotect(m + span - page, page, PROT_NONE);
    uint8_t *at = m + span - page - n;
    memcpy(at, d, n);
    hearth_gguf g;
    int rc = hearth_gguf_open_memory(&g, at, n, name, e);
    hearth_gguf_close(&g);
    munmap(m, span);
    return rc;
}

/* Opens b as name; checks the code and that the message holds the file name
 * and each of the given fragments (the key or tensor, the detail). */
static void expect(const bytes *b, const char *name, int code, const char *frag1, const char *frag2)
{
    hearth_err e = {0};
    int rc = open_guarded(b->d, b->n, name, &e);
    CHECK_MSG(rc == code, "%s: got %d (%s), want %d", name, rc, e.msg, code);
    CHECK_MSG(strstr(e.msg, name) != NULL, "message lacks the file name: %s", e.msg);
    CHECK_MSG(strstr(e.msg, "at offset ") != NULL, "message lacks the offset: %s", e.msg);
    CHECK_MSG(!frag1 || strstr(e.msg, frag1), "message lacks '%s': %s", frag1, e.msg);
    CHECK_MSG(!frag2 || strstr(e.msg, frag2), "message lacks '%s': %s", frag2, e.msg);
}

static void good_file_opens(void)
{
    bytes b;
    good(&b);
    hearth_err e = {0};
    hearth_gguf g;
    int rc = hearth_gguf_open_memory(&g, b.d, b.n, "good.gguf", &e);
    CHECK_MSG(rc == 0, "%s", e.msg);
    const hearth_gguf_tensor *t = hearth_gguf_find_tensor(&g, "w");
    CHECK(t && t->nbytes == 32 && t->offset == good_sections[3] - 32);
    uint32_t u;
    CHECK(hearth_gguf_get_u32(&g, "llama.block_count", &u, NULL) == 0 && u == 7);
    hearth_gguf_close(&g);
    CHECK_EQ_INT(open_guarded(b.d, b.n, "good.gguf", &e), 0);
}

static void bad_magic(void)
{
    bytes b;
    good(&b);
    memcpy(b.d, "GGML", 4);
    expect(&b, "bad-magic.gguf", HEARTH_EINVAL, "header at offset 0", "bad magic 'GGML'");
}

static void version_1(void)
{
    bytes b;
    good(&b);
    b.d[4] = 1;
    expect(&b, "v1.gguf", HEARTH_EUNSUPPORTED, "header", "unsupported GGUF version 1");
}

static void version_4(void)
{
    bytes b;
    good(&b);
    b.d[4] = 4;
    expect(&b, "v4.gguf", HEARTH_EUNSUPPORTED, "header", "unsupported GGUF version 4");
}

static void version_big_endian(void)
{
    bytes b;
    good(&b);
    b.d[4] = 0;
    b.d[7] = 3;
    expect(&b, "be.gguf", HEARTH_EUNSUPPORTED, "header", "big-endian");
}

static void truncated_in_header(void)
{
    bytes b;
    good(&b);
    b.n = 12;
    expect(&b, "trunc-header.gguf", HEARTH_EINVAL, "header at offset 8", "tensor count needs 8 bytes");
}

static void truncated_in_key(void)
{
    bytes b;
    b.n = 0;
    header(&b, 3, 0, 1);
    str(&b, "general.architecture");
    b.n -= 4; /* inside the key's text */
    expect(&b, "trunc-key.gguf", HEARTH_EINVAL, "key #0 at offset 24", "runs past the end");
}

static void truncated_in_value(void)
{
    bytes b;
    good(&b);
    b.n = good_sections[1] - 2; /* inside llama.block_count's u32 */
    expect(&b, "trunc-value.gguf", HEARTH_EINVAL, "key 'llama.block_count'", "value needs 4 bytes but only 2 remain");
}

static void truncated_in_tensor_info(void)
{
    bytes b;
    good(&b);
    b.n = good_sections[2] - 3; /* inside w's data offset */
    expect(&b, "trunc-info.gguf", HEARTH_EINVAL, "tensor 'w'", "data offset needs 8 bytes");
}

static void truncated_in_data(void)
{
    bytes b;
    good(&b);
    b.n = good_sections[3] - 1;
    expect(&b, "trunc-data.gguf", HEARTH_EINVAL, "tensor 'w'", "runs past the end of the file");
}

/* Every proper prefix of the good file is refused cleanly (and, against the
 * guard page, without reading past its end). */
static void every_prefix_is_refused(void)
{
    bytes b;
    good(&b);
    for (size_t n = 0; n < b.n; n++) {
        hearth_err e = {0};
        int rc = open_guarded(b.d, n, "prefix.gguf", &e);
        CHECK_MSG(rc == HEARTH_EINVAL, "prefix of %zu bytes: %d %s", n, rc, e.msg);
        CHECK_MSG(strstr(e.msg, "prefix.gguf") != NULL, "prefix of %zu bytes: %s", n, e.msg);
    }
}

static void n_kv_too_large(void)
{
    bytes b;
    good(&b);
    b.d[16] = 200; /* n_kv 200: cannot fit in the bytes that remain */
    expect(&b, "nkv.gguf", HEARTH_EINVAL, "header", "200 keys and 1 tensors cannot fit");
    memcpy(b.d + 16, &(uint64_t){1ull << 40}, 8);
    expect(&b, "nkv-huge.gguf", HEARTH_ELIMIT, "header", "more than the limit");
}

static void n_tensors_too_large(void)
{
    bytes b;
    good(&b);
    b.d[8] = 100; /* 100 tensor infos need at least 2400 bytes */
    expect(&b, "ntensors.gguf", HEARTH_EINVAL, "header", "cannot fit");
}

static void string_length_past_end(void)
{
    bytes b;
    b.n = 0;
    header(&b, 3, 0, 1);
    str(&b, "general.name");
    u32(&b, HEARTH_GGUF_STRING);
    u64(&b, 1000);
    put(&b, "abc", 3);
    expect(&b, "strlen.gguf", HEARTH_EINVAL, "key 'general.name' at offset 48", "length 1000 runs past the end");
}

static void key_too_long(void)
{
    bytes b;
    b.n = 0;
    header(&b, 3, 0, 1);
    u64(&b, (uint64_t)HEARTH_GGUF_NAME_MAX + 1);
    zeros(&b, 64);
    expect(&b, "longkey.gguf", HEARTH_EINVAL, "key #0", "exceeds the limit");
}

static void key_with_nul(void)
{
    bytes b;
    b.n = 0;
    header(&b, 3, 0, 1);
    u64(&b, 3);
    put(&b, "a\0b", 3);
    u32(&b, HEARTH_GGUF_U8);
    zeros(&b, 1);
    expect(&b, "nulkey.gguf", HEARTH_EINVAL, "key #0", "NUL byte");
}

static void unknown_kv_type(void)
{
    bytes b;
    b.n = 0;
    header(&b, 3, 0, 1);
    str(&b, "x.weird");
    u32(&b, 13);
    zeros(&b, 8);
    expect(&b, "kvtype.gguf", HEARTH_EINVAL, "key 'x.weird' at offset 39", "value type 13 is unknown");
}

static void nested_array(void)
{
    bytes b;
    b.n = 0;
    header(&b, 3, 0, 1);
    str(&b, "x.nested");
    u32(&b, HEARTH_GGUF_ARRAY);
    u32(&b, HEARTH_GGUF_ARRAY);
    u64(&b, 1);
    zeros(&b, 16);
    expect(&b, "nested.gguf", HEARTH_EINVAL, "key 'x.nested'", "nested arrays");
}

static void unknown_array_element_type(void)
{
    bytes b;
    b.n = 0;
    header(&b, 3, 0, 1);
    str(&b, "x.arr");
    u32(&b, HEARTH_GGUF_ARRAY);
    u32(&b, 77);
    u64(&b, 1);
    zeros(&b, 16);
    expect(&b, "arrtype.gguf", HEARTH_EINVAL, "key 'x.arr'", "element type 77 is unknown");
}

static void array_count_past_end(void)
{
    bytes b;
    b.n = 0;
    header(&b, 3, 0, 1);
    str(&b, "x.arr");
    u32(&b, HEARTH_GGUF_ARRAY);
    u32(&b, HEARTH_GGUF_F32);
    u64(&b, 1ull << 61); /* count * 4 would wrap a 64-bit multiply */
    zeros(&b, 16);
    expect(&b, "arrcount.gguf", HEARTH_EINVAL, "key 'x.arr'", "cannot fit");
}

static void string_array_element_past_end(void)
{
    bytes b;
    b.n = 0;
    header(&b, 3, 0, 1);
    str(&b, "tokenizer.ggml.tokens");
    u32(&b, HEARTH_GGUF_ARRAY);
    u32(&b, HEARTH_GGUF_STRING);
    u64(&b, 2);
    str(&b, "ok");
    u64(&b, 5);
    put(&b, "abc", 3);
    expect(&b, "arrstr.gguf", HEARTH_EINVAL, "key 'tokenizer.ggml.tokens'", "array string length 5 runs past");
}

static void duplicate_key(void)
{
    bytes b;
    b.n = 0;
    header(&b, 3, 0, 3);
    kv_u32(&b, "a", 1);
    kv_u32(&b, "b", 2);
    size_t second = b.n;
    kv_u32(&b, "a", 3);
    char want[64];
    snprintf(want, sizeof want, "key 'a' at offset %zu", second);
    expect(&b, "dupkey.gguf", HEARTH_EINVAL, want, "duplicate key");
}

static void alignment_not_power_of_two(void)
{
    bytes b;
    b.n = 0;
    header(&b, 3, 0, 1);
    kv_u32(&b, "general.alignment", 48);
    expect(&b, "align48.gguf", HEARTH_EINVAL, "key 'general.alignment'", "alignment 48 is not a power of two");
    b.n = 0;
    header(&b, 3, 0, 1);
    kv_u32(&b, "general.alignment", 0);
    expect(&b, "align0.gguf", HEARTH_EINVAL, "key 'general.alignment'", "alignment 0 is not a power of two");
}

static void alignment_wrong_type(void)
{
    bytes b;
    b.n = 0;
    header(&b, 3, 0, 1);
    kv_str(&b, "general.alignment", "32");
    expect(&b, "alignstr.gguf", HEARTH_EINVAL, "key 'general.alignment'", "type is string, expected u32");
}

/* A file with one tensor info record of the given fields and 64 data bytes. */
static void one_tensor(bytes *b, const char *name, uint32_t n_dims, const uint64_t *ne, uint32_t type, uint64_t off)
{
    b->n = 0;
    header(b, 3, 1, 0);
    tinfo(b, name, n_dims, ne, type, off);
    pad(b, 32);
    zeros(b, 64);
}

static void five_dims(void)
{
    bytes b;
    one_tensor(&b, "blk.0.attn_q.weight", 5, (uint64_t[]){1, 1, 1, 1, 1}, 0, 0);
    expect(&b, "dims.gguf", HEARTH_EINVAL, "tensor 'blk.0.attn_q.weight' at offset 51", "5 dims > 4");
}

static void unknown_tensor_type(void)
{
    bytes b;
    one_tensor(&b, "blk.0.attn_q.weight", 1, (uint64_t[]){4}, 99, 0);
    expect(&b, "ttype.gguf", HEARTH_EUNSUPPORTED, "tensor 'blk.0.attn_q.weight'", "type id 99");
}

static void tensor_data_past_end(void)
{
    bytes b;
    one_tensor(&b, "w", 1, (uint64_t[]){16}, 0, 32); /* 64 bytes at 32 of a 64-byte section */
    expect(&b, "pastend.gguf", HEARTH_EINVAL, "tensor 'w' at offset 24", "runs past the end of the file");
    one_tensor(&b, "w", 1, (uint64_t[]){16}, 0, UINT64_MAX - 31); /* start wraps */
    expect(&b, "wrap.gguf", HEARTH_EINVAL, "tensor 'w'", "runs past the end of the file");
}

static void misaligned_offset(void)
{
    bytes b;
    one_tensor(&b, "w", 1, (uint64_t[]){4}, 0, 4);
    expect(&b, "misaligned.gguf", HEARTH_EINVAL, "tensor 'w'", "data offset 4 is not a multiple of the alignment 32");
}

static void ne_overflow(void)
{
    bytes b;
    one_tensor(&b, "w", 2, (uint64_t[]){1ull << 32, 1ull << 32}, 0, 0);
    expect(&b, "neoverflow.gguf", HEARTH_EINVAL, "tensor 'w'", "overflows");
    /* the element count fits, the byte count (x4) does not */
    one_tensor(&b, "w", 2, (uint64_t[]){1ull << 31, 1ull << 31}, 0, 0);
    expect(&b, "bytesoverflow.gguf", HEARTH_EINVAL, "tensor 'w'", "overflows");
}

static void ne_negative(void)
{
    bytes b;
    one_tensor(&b, "w", 2, (uint64_t[]){4, UINT64_MAX}, 0, 0);
    expect(&b, "neneg.gguf", HEARTH_EINVAL, "tensor 'w'", "ne[1] = 18446744073709551615 is out of range");
}

static void duplicate_tensor_name(void)
{
    bytes b;
    b.n = 0;
    header(&b, 3, 2, 0);
    tinfo(&b, "w", 1, (uint64_t[]){8}, 0, 0);
    tinfo(&b, "w", 1, (uint64_t[]){8}, 0, 32);
    pad(&b, 32);
    zeros(&b, 64);
    expect(&b, "duptensor.gguf", HEARTH_EINVAL, "tensor 'w' at offset 57", "duplicate tensor name");
}

static void ne0_not_block_multiple(void)
{
    bytes b;
    one_tensor(&b, "blk.0.ffn_down.weight", 2, (uint64_t[]){33, 1}, HEARTH_Q8_0, 0);
    expect(&b, "block.gguf", HEARTH_EINVAL, "tensor 'blk.0.ffn_down.weight'", "ne[0] = 33 is not a multiple of the q8_0 block size 32");
}

static void hostile_names_are_escaped(void)
{
    bytes b;
    one_tensor(&b, "evil\n\x1b[31m", 5, (uint64_t[]){1, 1, 1, 1, 1}, 0, 0);
    hearth_err e = {0};
    CHECK_EQ_INT(open_guarded(b.d, b.n, "evil.gguf", &e), HEARTH_EINVAL);
    CHECK_MSG(strstr(e.msg, "tensor 'evil??[31m'") != NULL, "%s", e.msg);
}

/* Tensors whose data regions, sorted by offset, do not tile the data
 * section (a changed type or shape changes a region's size): a gap, an
 * overlap, data after the last tensor, a first tensor past the start. */
static void tensors_leave_a_gap(void)
{
    bytes b;
    b.n = 0;
    header(&b, 3, 2, 0);
    tinfo(&b, "a", 1, (uint64_t[]){8}, 0, 0);
    tinfo(&b, "b", 1, (uint64_t[]){8}, 0, 64);
    pad(&b, 32);
    size_t data = b.n;
    zeros(&b, 96);
    char want[160];
    snprintf(want, sizeof want,
             "type f32, data of 32 bytes at file offset %zu, ends 32 bytes before the next tensor, 'b', at %zu", data,
             data + 64);
    expect(&b, "gap.gguf", HEARTH_EINVAL, "tensor 'a' at offset 24", want);
    expect(&b, "gap.gguf", HEARTH_EINVAL, "do not tile the data section", NULL);
}

static void tensors_overlap(void)
{
    bytes b;
    b.n = 0;
    header(&b, 3, 2, 0);
    tinfo(&b, "b", 1, (uint64_t[]){8}, 0, 32); /* listed first, placed second */
    tinfo(&b, "a", 1, (uint64_t[]){16}, 0, 0);
    pad(&b, 32);
    size_t data = b.n;
    zeros(&b, 64);
    char want[160];
    snprintf(want, sizeof want,
             "type f32, data of 64 bytes at file offset %zu, runs 32 bytes into the next tensor, 'b', at %zu", data,
             data + 32);
    expect(&b, "overlap.gguf", HEARTH_EINVAL, "tensor 'a'", want);
}

static void data_after_the_last_tensor(void)
{
    bytes b;
    good(&b);
    zeros(&b, 32);
    expect(&b, "tail.gguf", HEARTH_EINVAL, "tensor 'w'", "the last, ends 32 bytes before the end of the file");
    b.n -= 1; /* 31 bytes past the tensor: padding, accepted */
    hearth_err e = {0};
    CHECK_MSG(open_guarded(b.d, b.n, "tail31.gguf", &e) == 0, "%s", e.msg);
}

static void first_tensor_past_the_start(void)
{
    bytes b;
    one_tensor(&b, "w", 1, (uint64_t[]){8}, 0, 32); /* 32 bytes at 32 of a 64-byte section */
    expect(&b, "late.gguf", HEARTH_EINVAL, "tensor 'w'", "the lowest, starts 32 bytes into the data section");
}

/* What tiles is accepted: padding under the alignment after each tensor,
 * infos in any order, an empty tensor, a larger alignment. */
static void padded_tensors_tile(void)
{
    bytes b;
    b.n = 0;
    header(&b, 3, 3, 1);
    kv_u32(&b, "general.alignment", 64);
    tinfo(&b, "b", 1, (uint64_t[]){8}, 0, 64);
    tinfo(&b, "a", 1, (uint64_t[]){3}, 0, 0);
    tinfo(&b, "empty", 1, (uint64_t[]){0}, 0, 64);
    pad(&b, 64);
    zeros(&b, 64 + 32 + 31);
    hearth_err e = {0};
    CHECK_MSG(open_guarded(b.d, b.n, "padded.gguf", &e) == 0, "%s", e.msg);
}

/* Reads a whole shared file into a malloc'd copy. */
static uint8_t *read_shared(const char *rel, size_t *n)
{
    char path[512];
    if (!hearth_test_shared_path(path, sizeof path, rel))
        return NULL;
    hearth_err e = {0};
    char *text = NULL;
    CHECK_MSG(hearth_file_read(path, 64u << 20, &text, n, &e) == 0, "%s", e.msg);
    return (uint8_t *)text;
}

/* The corruption issue 16 found: stories260K.gguf with its first tensor's
 * type changed from F32 to Q4_0 loaded and generated garbage. The region
 * shrinks from 131072 bytes to 18432 and leaves a gap before the next
 * tensor; the message names the tensor, its type, size and offset. */
static void stories_type_changed(void)
{
    size_t n = 0;
    uint8_t *d = read_shared("models/stories260K/stories260K.gguf", &n);
    if (!d)
        return;
    hearth_err e = {0};
    hearth_gguf g;
    int rc = hearth_gguf_open_memory(&g, d, n, "stories260K.gguf", &e);
    CHECK_MSG(rc == 0 && g.n_tensors == 48, "%d %s", rc, e.msg);
    if (rc || g.n_tensors != 48) {
        hearth_gguf_close(&g);
        free(d);
        return;
    }
    const hearth_gguf_tensor *t = &g.tensors[0], *next = &g.tensors[1];
    CHECK_EQ_STR(t->name, "token_embd.weight");
    CHECK(t->type == HEARTH_F32 && t->n_dims == 2 && t->nbytes == 131072);
    /* the type field: after the name (u64 length + bytes), n_dims (u32) and the dims (u64 each) */
    size_t at = (size_t)t->info_offset + 8 + strlen(t->name) + 4 + 8 * (size_t)t->n_dims;
    CHECK_EQ_INT(gguf_le32_test(d + at), HEARTH_F32);
    char want[200];
    snprintf(want, sizeof want,
             "type q4_0, data of 18432 bytes at file offset %llu, ends %llu bytes before the next tensor, "
             "'output_norm.weight', at %llu", (unsigned long long)t->offset,
             (unsigned long long)(next->offset - t->offset - 18432), (unsigned long long)next->offset);
    hearth_gguf_close(&g);
    uint32_t q4 = HEARTH_Q4_0;
    memcpy(d + at, &q4, 4);
    CHECK_EQ_INT(hearth_gguf_open_memory(&g, d, n, "stories260K-q4.gguf", &e), HEARTH_EINVAL);
    CHECK_MSG(strstr(e.msg, "stories260K-q4.gguf: tensor 'token_embd.weight'") && strstr(e.msg, want) &&
                  strstr(e.msg, "do not tile the data section"),
              "%s", e.msg);
    hearth_gguf_close(&g);
    free(d);
}

/* Every real GGUF in shared/ still opens (the tiling check refuses none). */
static void shared_files_tile(void)
{
    static const char *const files[] = {
        "models/stories260K/stories260K.gguf",
        "vocab/ggml-vocab-bert-bge.gguf",
        "vocab/ggml-vocab-gpt-2.gguf",
        "vocab/ggml-vocab-phi-3.gguf",
    };
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char path[512];
        if (!hearth_test_shared_path(path, sizeof path, files[i]))
            continue;
        hearth_err e = {0};
        hearth_gguf g;
        CHECK_MSG(hearth_gguf_open(&g, path, &e) == 0, "%s", e.msg);
        hearth_gguf_close(&g);
    }
}

int main(void)
{
    RUN(good_file_opens);
    RUN(bad_magic);
    RUN(version_1);
    RUN(version_4);
    RUN(version_big_endian);
    RUN(truncated_in_header);
    RUN(truncated_in_key);
    RUN(truncated_in_value);
    RUN(truncated_in_tensor_info);
    RUN(truncated_in_data);
    RUN(every_prefix_is_refused);
    RUN(n_kv_too_large);
    RUN(n_tensors_too_large);
    RUN(string_length_past_end);
    RUN(key_too_long);
    RUN(key_with_nul);
    RUN(unknown_kv_type);
    RUN(nested_array);
    RUN(unknown_array_element_type);
    RUN(array_count_past_end);
    RUN(string_array_element_past_end);
    RUN(duplicate_key);
    RUN(alignment_not_power_of_two);
    RUN(alignment_wrong_type);
    RUN(five_dims);
    RUN(unknown_tensor_type);
    RUN(tensor_data_past_end);
    RUN(misaligned_offset);
    RUN(ne_overflow);
    RUN(ne_negative);
    RUN(duplicate_tensor_name);
    RUN(ne0_not_block_multiple);
    RUN(hostile_names_are_escaped);
    RUN(tensors_leave_a_gap);
    RUN(tensors_overlap);
    RUN(data_after_the_last_tensor);
    RUN(first_tensor_past_the_start);
    RUN(padded_tensors_tile);
    RUN(stories_type_changed);
    RUN(shared_files_tile);
    TEST_EXIT();
}
