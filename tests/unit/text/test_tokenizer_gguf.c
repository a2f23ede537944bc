/* Unit tests for the SPM and BPE tokenizers (src/text/spm.c, bpe.c, pretok.c,
 * tokenizer.c, detok.c) on llama.cpp's vocab-only GGUF files.
 *
 * References, none produced by this code: the .inp/.out golden pairs that
 * llama.cpp's test-tokenizer-0 checks (add_special = false, parse_special =
 * false; the .out lines carry no BOS/EOS), the token ids and texts stored in
 * the GGUF metadata, the UTF-8 bytes of the inputs themselves (round trips),
 * and pre-tokenizer splits worked out by hand from the regexes.
 *
 * Round trips: decode(encode(x)) == x holds for every golden input with both
 * vocabularies. For SPM that relies on the decoder dropping the one space the
 * encoder prepends (add_space_prefix); inputs that begin with spaces keep the
 * rest. SPM is lossy only for inputs holding U+2581 itself (decoded as ' '),
 * which the goldens do not contain.
 *
 * Invalid UTF-8 (see tokenizer.h): BPE replaces each bad byte by U+FFFD before
 * splitting, as llama.cpp does; SPM keeps the bytes as <0xNN> tokens. */
#include "harness.h"

#include "models/gguf.h"
#include "models/gguf_vocab.h"
#include "text/pretok.h"
#include "text/tokenizer.h"

#include <pthread.h>

#define MAX_CASES 64

typedef struct golden {
    char *inp_raw, *out_raw;
    size_t n;
    const char *text[MAX_CASES];
    size_t len[MAX_CASES];
    int32_t ids[MAX_CASES][512];
    size_t n_ids[MAX_CASES];
} golden;

static char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)sz + 1);
    if (buf && fread(buf, 1, (size_t)sz, f) != (size_t)sz) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf)
        buf[sz] = 0;
    *n = (size_t)sz;
    return buf;
}

/* Splits .inp on "\n__ggml_vocab_test__\n" (no empty case after the last
 * separator, as in test-tokenizer-0.cpp) and .out into lines of ids. */
static int load_golden(const char *rel, golden *g)
{
    char path[512], rel2[256];
    size_t n_inp, n_out;
    memset(g, 0, sizeof *g);
    snprintf(rel2, sizeof rel2, "%s.inp", rel);
    if (!hearth_test_shared_path(path, sizeof path, rel2) || !(g->inp_raw = slurp(path, &n_inp)))
        return -1;
    snprintf(rel2, sizeof rel2, "%s.out", rel);
    if (!hearth_test_shared_path(path, sizeof path, rel2) || !(g->out_raw = slurp(path, &n_out)))
        return -1;
    const char *sep = "\n__ggml_vocab_test__\n";
    size_t seplen = strlen(sep), pos = 0;
    while (pos < n_inp && g->n < MAX_CASES) {
        char *next = strstr(g->inp_raw + pos, sep);
        size_t end = next ? (size_t)(next - g->inp_raw) : n_inp;
        g->text[g->n] = g->inp_raw + pos;
        g->len[g->n] = end - pos;
        g->n++;
        if (!next)
            break;
        *next = 0;
        pos = end + seplen;
    }
    size_t line = 0;
    char *p = g->out_raw;
    while (*p && line < MAX_CASES) {
        char *eol = strchr(p, '\n');
        if (eol)
            *eol = 0;
        for (char *q = p; *q;) {
            char *e;
            long id = strtol(q, &e, 10);
            if (e == q)
                break;
            g->ids[line][g->n_ids[line]++] = (int32_t)id;
            q = e;
        }
        line++;
        if (!eol)
            break;
        p = eol + 1;
    }
    CHECK_EQ_INT(line, g->n);
    return 0;
}

static void free_golden(golden *g)
{
    free(g->inp_raw);
    free(g->out_raw);
}

static int open_tok(const char *rel, hearth_vocab *v, hearth_tokenizer *t)
{
    char path[512];
    hearth_gguf g;
    hearth_err e = {0};
    if (!hearth_test_shared_path(path, sizeof path, rel))
        return -1;
    int rc = hearth_gguf_open(&g, path, &e);
    if (rc == 0) {
        rc = hearth_gguf_load_vocab(&g, v, &e);
        hearth_gguf_close(&g);
    }
    if (rc == 0 && (rc = hearth_tokenizer_init(t, v, &e)))
        hearth_vocab_deinit(v);
    CHECK_MSG(rc == 0, "%s: %s", rel, e.msg);
    return rc;
}

static void print_ids(const char *what, const int32_t *ids, size_t n)
{
    fprintf(stderr, "    %s:", what);
    for (size_t i = 0; i < n; i++)
        fprintf(stderr, " %d", (int)ids[i]);
    fputc('\n', stderr);
}

static int same_ids(const int32_t *a, size_t na, const int32_t *b, size_t nb)
{
    return na == nb && (na == 0 || memcmp(a, b, na * sizeof *a) == 0);
}

static void run_golden(const char *rel)
{
    hearth_vocab v;
    hearth_tokenizer t;
    golden *g = malloc(sizeof *g);
    if (!g || load_golden(rel, g) || open_tok(rel, &v, &t)) {
        free_golden(g);
        free(g);
        return;
    }
    CHECK(g->n >= 30);
    int failed = 0;
    for (size_t i = 0; i < g->n; i++) {
        hearth_ids out;
        hearth_err e = {0};
        hearth_ids_init(&out, 100000);
        int rc = hearth_tokenizer_encode(&t, g->text[i], g->len[i], false, false, &out, &e);
        CHECK_MSG(rc == 0, "case %zu: %s", i, e.msg);
        if (!same_ids(out.v, out.n, g->ids[i], g->n_ids[i])) {
            failed++;
            fprintf(stderr, "  %s case %zu: input '%.*s'\n", rel, i, (int)g->len[i], g->text[i]);
            print_ids("expected", g->ids[i], g->n_ids[i]);
            print_ids("got     ", out.v, out.n);
        }
        hearth_ids_deinit(&out);
    }
    CHECK_EQ_INT(failed, 0);
    hearth_tokenizer_deinit(&t);
    hearth_vocab_deinit(&v);
    free_golden(g);
    free(g);
}

static void golden_phi3_spm(void)
{
    run_golden("vocab/ggml-vocab-phi-3.gguf");
}

static void golden_gpt2_bpe(void)
{
    run_golden("vocab/ggml-vocab-gpt-2.gguf");
}

static void run_round_trip(const char *rel)
{
    hearth_vocab v;
    hearth_tokenizer t;
    golden *g = malloc(sizeof *g);
    if (!g || load_golden(rel, g) || open_tok(rel, &v, &t)) {
        free_golden(g);
        free(g);
        return;
    }
    for (size_t i = 0; i < g->n; i++) {
        for (int special = 0; special < 2; special++) {
            hearth_ids ids;
            hearth_buf text;
            hearth_ids_init(&ids, 100000);
            hearth_buf_init(&text, 1 << 20);
            CHECK_EQ_INT(hearth_tokenizer_encode(&t, g->text[i], g->len[i], special, false, &ids, NULL), 0);
            CHECK_EQ_INT(hearth_tokenizer_decode(&t, ids.v, ids.n, false, &text), 0);
            int ok = text.len == g->len[i] && (text.len == 0 || memcmp(text.data, g->text[i], text.len) == 0);
            CHECK_MSG(ok, "%s case %zu (add_special %d): '%.*s' came back as '%.*s'", rel, i, special,
                      (int)g->len[i], g->text[i], (int)text.len, text.data ? text.data : "");
            hearth_buf_deinit(&text);
            hearth_ids_deinit(&ids);
        }
    }
    hearth_tokenizer_deinit(&t);
    hearth_vocab_deinit(&v);
    free_golden(g);
    free(g);
}

static void round_trip_phi3(void)
{
    run_round_trip("vocab/ggml-vocab-phi-3.gguf");
}

static void round_trip_gpt2(void)
{
    run_round_trip("vocab/ggml-vocab-gpt-2.gguf");
}

/* Streams ids one by one; every chunk must be whole UTF-8 and the emoji
 * (4 bytes, split over several byte-level tokens) must arrive in one chunk. */
static void stream_emoji(const char *rel)
{
    hearth_vocab v;
    hearth_tokenizer t;
    if (open_tok(rel, &v, &t))
        return;
    const char *text = " this is \xf0\x9f\xa6\x99.cpp";
    hearth_ids ids;
    hearth_ids_init(&ids, 1000);
    CHECK_EQ_INT(hearth_tokenizer_encode(&t, text, strlen(text), false, false, &ids, NULL), 0);
    hearth_detok d;
    hearth_detok_init(&d, &t, true, false);
    hearth_buf all;
    hearth_buf_init(&all, 1 << 16);
    int saw_emoji_whole = 0, partial_pushes = 0;
    for (size_t i = 0; i < ids.n; i++) {
        hearth_buf chunk;
        hearth_buf_init(&chunk, 1 << 16);
        CHECK_EQ_INT(hearth_detok_push(&d, ids.v[i], &chunk), 0);
        if (chunk.len == 0)
            partial_pushes++;
        if (chunk.len && memmem(chunk.data, chunk.len, "\xf0\x9f\xa6\x99", 4))
            saw_emoji_whole = 1;
        /* no chunk may end inside a character */
        if (chunk.len) {
            uint8_t last = (uint8_t)chunk.data[chunk.len - 1];
            CHECK(last < 0x80 || (chunk.len >= 4 && memcmp(chunk.data + chunk.len - 4, "\xf0\x9f\xa6\x99", 4) == 0));
            hearth_buf_append(&all, chunk.data, chunk.len);
        }
        hearth_buf_deinit(&chunk);
    }
    CHECK_EQ_INT(hearth_detok_flush(&d, &all), 0);
    CHECK(saw_emoji_whole);
    CHECK(partial_pushes >= 1); /* the emoji really was split across tokens */
    /* from the start: SPM drops the space its encoder prepended, keeps the text's own */
    CHECK(all.len == strlen(text) && memcmp(all.data, text, all.len) == 0);
    hearth_buf_deinit(&all);
    hearth_ids_deinit(&ids);
    hearth_tokenizer_deinit(&t);
    hearth_vocab_deinit(&v);
}

static void stream_emoji_byte_tokens_spm(void)
{
    stream_emoji("vocab/ggml-vocab-phi-3.gguf");
}

static void stream_emoji_byte_tokens_bpe(void)
{
    stream_emoji("vocab/ggml-vocab-gpt-2.gguf");
}

/* A held incomplete character is flushed as one U+FFFD; malformed bytes in
 * the middle become U+FFFD too. Byte tokens are found by their text. */
static void stream_flush_and_invalid(void)
{
    hearth_vocab v;
    hearth_tokenizer t;
    if (open_tok("vocab/ggml-vocab-phi-3.gguf", &v, &t))
        return;
    int32_t f0 = hearth_vocab_find(&v, "<0xF0>", 6), x9f = hearth_vocab_find(&v, "<0x9F>", 6);
    int32_t ff = hearth_vocab_find(&v, "<0xFF>", 6), a = hearth_vocab_find(&v, "<0x41>", 6);
    CHECK(f0 >= 0 && x9f >= 0 && ff >= 0 && a >= 0);
    hearth_detok d;
    hearth_buf out;
    hearth_buf_init(&out, 1024);
    hearth_detok_init(&d, &t, false, false);
    CHECK_EQ_INT(hearth_detok_push(&d, f0, &out), 0);
    CHECK_EQ_INT(hearth_detok_push(&d, x9f, &out), 0);
    CHECK_EQ_INT(out.len, 0);
    CHECK_EQ_INT(hearth_detok_flush(&d, &out), 0);
    CHECK(out.len == 3 && memcmp(out.data, "\xef\xbf\xbd", 3) == 0);
    /* F0 then 'A': the F0 is a maximal invalid subpart, 'A' survives */
    hearth_buf_reset(&out, 0);
    hearth_detok_init(&d, &t, false, false);
    CHECK_EQ_INT(hearth_detok_push(&d, f0, &out), 0);
    CHECK_EQ_INT(hearth_detok_push(&d, a, &out), 0);
    CHECK_EQ_INT(hearth_detok_push(&d, ff, &out), 0);
    CHECK_EQ_INT(hearth_detok_flush(&d, &out), 0);
    CHECK(out.len == 7 && memcmp(out.data, "\xef\xbf\xbd" "A" "\xef\xbf\xbd", 7) == 0);
    CHECK_EQ_INT(hearth_detok_push(&d, v.n_tokens, &out), HEARTH_EINVAL);
    CHECK_EQ_INT(hearth_detok_push(&d, -1, &out), HEARTH_EINVAL);
    hearth_buf_deinit(&out);
    hearth_tokenizer_deinit(&t);
    hearth_vocab_deinit(&v);
}

/* "<|endoftext|>" (the control token 50256 in the GGUF) is one id only when
 * parse_special is set; otherwise it is ordinary text. */
static void parse_special_gpt2(void)
{
    hearth_vocab v;
    hearth_tokenizer t;
    if (open_tok("vocab/ggml-vocab-gpt-2.gguf", &v, &t))
        return;
    int32_t eot = hearth_vocab_find(&v, "<|endoftext|>", 13);
    CHECK_EQ_INT(eot, 50256);
    CHECK_EQ_INT(v.kind[eot], HEARTH_TOK_CONTROL);
    const char *s = "Hello<|endoftext|> world";
    hearth_ids on, off, hello, world;
    hearth_ids_init(&on, 100);
    hearth_ids_init(&off, 100);
    hearth_ids_init(&hello, 100);
    hearth_ids_init(&world, 100);
    CHECK_EQ_INT(hearth_tokenizer_encode(&t, s, strlen(s), false, true, &on, NULL), 0);
    CHECK_EQ_INT(hearth_tokenizer_encode(&t, s, strlen(s), false, false, &off, NULL), 0);
    CHECK_EQ_INT(hearth_tokenizer_encode(&t, "Hello", 5, false, false, &hello, NULL), 0);
    CHECK_EQ_INT(hearth_tokenizer_encode(&t, " world", 6, false, false, &world, NULL), 0);
    /* golden: "Hello" = 15496, " world" = 995 */
    CHECK(hello.n == 1 && hello.v[0] == 15496);
    CHECK(world.n == 1 && world.v[0] == 995);
    CHECK(on.n == 3 && on.v[0] == 15496 && on.v[1] == eot && on.v[2] == 995);
    int has_eot = 0;
    for (size_t i = 0; i < off.n; i++)
        has_eot |= off.v[i] == eot;
    CHECK(!has_eot && off.n > 3);
    /* decoding: control tokens are empty unless asked for */
    hearth_buf txt;
    hearth_buf_init(&txt, 1024);
    CHECK_EQ_INT(hearth_tokenizer_decode(&t, on.v, on.n, false, &txt), 0);
    CHECK(txt.len == 11 && memcmp(txt.data, "Hello world", 11) == 0);
    hearth_buf_reset(&txt, 0);
    CHECK_EQ_INT(hearth_tokenizer_decode(&t, on.v, on.n, true, &txt), 0);
    CHECK(txt.len == strlen(s) && memcmp(txt.data, s, txt.len) == 0);
    char piece[64];
    CHECK_EQ_INT(hearth_tokenizer_piece(&t, eot, piece, sizeof piece), 0);
    CHECK_EQ_INT(hearth_tokenizer_piece_special(&t, eot, piece, sizeof piece), 13);
    CHECK_EQ_INT(hearth_tokenizer_piece_special(&t, eot, piece, 5), HEARTH_ELIMIT);
    CHECK_EQ_INT(hearth_tokenizer_piece(&t, 50257, piece, sizeof piece), HEARTH_EINVAL);
    /* " world" is "\xc4\xa0world" in the vocabulary (U+0120 stands for the space byte) */
    CHECK_EQ_STR(v.text[995], "\xc4\xa0world");
    CHECK_EQ_INT(hearth_tokenizer_piece(&t, 995, piece, sizeof piece), 6);
    CHECK(memcmp(piece, " world", 6) == 0);
    hearth_buf_deinit(&txt);
    hearth_ids_deinit(&on);
    hearth_ids_deinit(&off);
    hearth_ids_deinit(&hello);
    hearth_ids_deinit(&world);
    hearth_tokenizer_deinit(&t);
    hearth_vocab_deinit(&v);
}

/* SPM: BOS from the metadata (add_bos_token true, bos 1), the space prefix
 * after a special token, and the user-defined "</s>" matched even without
 * parse_special (llama.cpp's rule), while the control "<s>" is not. */
static void specials_phi3(void)
{
    hearth_vocab v;
    hearth_tokenizer t;
    if (open_tok("vocab/ggml-vocab-phi-3.gguf", &v, &t))
        return;
    CHECK(t.add_bos && !t.add_eos && t.add_space_prefix);
    hearth_ids ids;
    hearth_ids_init(&ids, 100);
    /* golden: "Hello" -> 15043 */
    CHECK_EQ_INT(hearth_tokenizer_encode(&t, "Hello", 5, true, false, &ids, NULL), 0);
    CHECK(ids.n == 2 && ids.v[0] == 1 && ids.v[1] == 15043);
    ids.n = 0;
    int32_t end = hearth_vocab_find(&v, "<|end|>", 7);
    CHECK_EQ_INT(v.kind[end], HEARTH_TOK_CONTROL);
    CHECK_EQ_INT(hearth_tokenizer_encode(&t, "<|end|>Hello", 12, false, true, &ids, NULL), 0);
    CHECK(ids.n == 2 && ids.v[0] == end && ids.v[1] == 15043);
    ids.n = 0;
    CHECK_EQ_INT(v.kind[2], HEARTH_TOK_USER_DEFINED);
    CHECK_EQ_INT(hearth_tokenizer_encode(&t, "Hello</s>", 9, false, false, &ids, NULL), 0);
    CHECK(ids.n == 2 && ids.v[0] == 15043 && ids.v[1] == 2);
    hearth_ids_deinit(&ids);
    hearth_tokenizer_deinit(&t);
    hearth_vocab_deinit(&v);
}

static void invalid_utf8(void)
{
    hearth_vocab v;
    hearth_tokenizer t;
    if (open_tok("vocab/ggml-vocab-gpt-2.gguf", &v, &t))
        return;
    hearth_ids a, b;
    hearth_ids_init(&a, 100);
    hearth_ids_init(&b, 100);
    /* BPE: each bad byte is U+FFFD, like llama.cpp: a truncated 3-byte lead
     * plus its one continuation byte gives two of them */
    CHECK_EQ_INT(hearth_tokenizer_encode(&t, "a\xff\xe2\x96z", 5, false, false, &a, NULL), 0);
    const char *repl = "a\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbdz";
    CHECK_EQ_INT(hearth_tokenizer_encode(&t, repl, strlen(repl), false, false, &b, NULL), 0);
    CHECK(a.n > 0 && same_ids(a.v, a.n, b.v, b.n));
    hearth_ids_deinit(&a);
    hearth_ids_deinit(&b);
    hearth_tokenizer_deinit(&t);
    hearth_vocab_deinit(&v);

    if (open_tok("vocab/ggml-vocab-phi-3.gguf", &v, &t))
        return;
    hearth_ids_init(&a, 100);
    /* SPM: "\xff" after the prefix space stays a byte: <0xFF> */
    CHECK_EQ_INT(hearth_tokenizer_encode(&t, "\xff", 1, false, false, &a, NULL), 0);
    CHECK(a.n == 2 && a.v[0] == hearth_vocab_find(&v, "\xe2\x96\x81", 3) && a.v[1] == hearth_vocab_find(&v, "<0xFF>", 6));
    hearth_ids_deinit(&a);
    hearth_tokenizer_deinit(&t);
    hearth_vocab_deinit(&v);
}

static void limits_and_models(void)
{
    hearth_vocab v;
    hearth_tokenizer t;
    hearth_err e = {0};
    if (open_tok("vocab/ggml-vocab-gpt-2.gguf", &v, &t))
        return;
    hearth_ids ids;
    hearth_ids_init(&ids, 3);
    CHECK_EQ_INT(hearth_ids_push(&ids, 7), 0);
    CHECK_EQ_INT(hearth_tokenizer_encode(&t, "one two three four", 18, false, false, &ids, &e), HEARTH_ELIMIT);
    CHECK(ids.n == 1 && ids.v[0] == 7); /* out is left as it was */
    CHECK(strstr(e.msg, "more than 3 tokens") != NULL);
    CHECK_EQ_INT(hearth_tokenizer_encode(&t, NULL, 1, false, false, &ids, &e), HEARTH_EINVAL);
    hearth_ids_deinit(&ids);
    hearth_tokenizer_deinit(&t);

    /* an unknown pre-tokenizer is refused by name */
    snprintf(v.pre, sizeof v.pre, "made-up-pre");
    CHECK_EQ_INT(hearth_tokenizer_init(&t, &v, &e), HEARTH_EUNSUPPORTED);
    CHECK(strstr(e.msg, "made-up-pre") != NULL);
    snprintf(v.model, sizeof v.model, "bert");
    CHECK_EQ_INT(hearth_tokenizer_init(&t, &v, &e), HEARTH_EUNSUPPORTED);
    CHECK(strstr(e.msg, "bert") != NULL);
    snprintf(v.model, sizeof v.model, "t5");
    CHECK_EQ_INT(hearth_tokenizer_init(&t, &v, &e), HEARTH_EUNSUPPORTED);
    CHECK(strstr(e.msg, "t5") != NULL);
    hearth_vocab_deinit(&v);
}

/* Pre-tokenizer splits worked out by hand from each regex. */
static void check_split(const char *pre, const char *text, const char *const *want, size_t n_want)
{
    hearth_pretok p;
    hearth_err e = {0};
    CHECK_EQ_INT(hearth_pretok_init(&p, pre, &e), 0);
    hearth_span *sp = NULL;
    size_t n = 0;
    CHECK_EQ_INT(hearth_pretok_split(&p, text, strlen(text), &sp, &n, &e), 0);
    int ok = n == n_want;
    for (size_t i = 0; ok && i < n; i++)
        ok = sp[i].len == strlen(want[i]) && memcmp(text + sp[i].off, want[i], sp[i].len) == 0;
    if (!ok) {
        fprintf(stderr, "  pre '%s' split of '%s':", pre, text);
        for (size_t i = 0; i < n; i++)
            fprintf(stderr, " [%.*s]", (int)sp[i].len, text + sp[i].off);
        fputc('\n', stderr);
    }
    CHECK_MSG(ok, "pre '%s'", pre);
    free(sp);
    hearth_pretok_deinit(&p);
}

static void pretok_splits(void)
{
    const char *text = "Hello world's 12345\n\n  x";
    const char *llama3[] = {"Hello", " world", "'s", " ", "123", "45", "\n\n", " ", " x"};
    check_split("llama-bpe", text, llama3, sizeof llama3 / sizeof *llama3);
    const char *qwen2[] = {"Hello", " world", "'s", " ", "1", "2", "3", "4", "5", "\n\n", " ", " x"};
    check_split("qwen2", text, qwen2, sizeof qwen2 / sizeof *qwen2);
    const char *gpt2[] = {"Hello", " world", "'s", " 12345", "\n\n ", " x"};
    check_split("gpt-2", text, gpt2, sizeof gpt2 / sizeof *gpt2);
    const char *dflt[] = {"Hi", ",", " ", "123", "45", "!"};
    check_split("default", "Hi, 12345!", dflt, sizeof dflt / sizeof *dflt);
    /* llama3 contractions ignore case; one non-letter may lead a word */
    const char *l3b[] = {"I", "'LL", "\xe3\x80\x80go"};
    check_split("llama3", "I'LL\xe3\x80\x80go", l3b, sizeof l3b / sizeof *l3b);
    /* U+0085 is whitespace to llama.cpp (White_Space), so two of them split */
    const char *nel[] = {"a", "\xc2\x85", "\xc2\x85", "b"};
    check_split("gpt-2", "a\xc2\x85\xc2\x85" "b", nel, sizeof nel / sizeof *nel);
    /* U+180E left White_Space in Unicode 6.3: to llama.cpp it is a symbol-like
     * character, so two of them stay one piece */
    const char *mvs[] = {"a", "\xe1\xa0\x8e\xe1\xa0\x8e", "b"};
    check_split("gpt-2", "a\xe1\xa0\x8e\xe1\xa0\x8e" "b", mvs, sizeof mvs / sizeof *mvs);
}

static int valid_utf8(const char *s, size_t n)
{
    const uint8_t *u = (const uint8_t *)s;
    for (size_t i = 0; i < n;) {
        uint8_t c = u[i];
        size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        if (len == 0 || i + len > n)
            return 0;
        for (size_t k = 1; k < len; k++)
            if ((u[i + k] & 0xc0) != 0x80)
                return 0;
        i += len;
    }
    return 1;
}

/* Random bytes (fixed seed, biased towards UTF-8 lead/continuation bytes,
 * spaces and special-token texts): encoding succeeds with ids in range, and
 * streaming them back gives valid UTF-8. */
static void random_bytes(const char *rel)
{
    hearth_vocab v;
    hearth_tokenizer t;
    if (open_tok(rel, &v, &t))
        return;
    static const char alphabet[] = " a\n\xe2\x96\x81\xf0\x9f\xa6\x99\xc3\xff\x80\xed\xa0<|endoftext|></s>";
    uint64_t seed = 12345;
    int bad_ids = 0, bad_text = 0;
    for (int round = 0; round < 300; round++) {
        char text[96];
        size_t n = 0;
        for (seed = seed * 6364136223846793005ull + 1; n < (seed >> 58); n++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            text[n] = (seed >> 40) & 1 ? alphabet[(seed >> 33) % (sizeof alphabet - 1)] : (char)(seed >> 24);
        }
        hearth_ids ids;
        hearth_ids_init(&ids, 10000);
        CHECK_EQ_INT(hearth_tokenizer_encode(&t, text, n, round & 1, round & 2, &ids, NULL), 0);
        for (size_t i = 0; i < ids.n; i++)
            bad_ids += ids.v[i] < 0 || ids.v[i] >= v.n_tokens;
        hearth_buf out;
        hearth_buf_init(&out, 1 << 16);
        CHECK_EQ_INT(hearth_tokenizer_decode(&t, ids.v, ids.n, round & 4, &out), 0);
        bad_text += !valid_utf8(out.data, out.len);
        hearth_buf_deinit(&out);
        hearth_ids_deinit(&ids);
    }
    CHECK_EQ_INT(bad_ids, 0);
    CHECK_EQ_INT(bad_text, 0);
    hearth_tokenizer_deinit(&t);
    hearth_vocab_deinit(&v);
}

static void random_bytes_spm(void)
{
    random_bytes("vocab/ggml-vocab-phi-3.gguf");
}

static void random_bytes_bpe(void)
{
    random_bytes("vocab/ggml-vocab-gpt-2.gguf");
}

typedef struct worker {
    const hearth_tokenizer *t;
    const golden *g;
    int mismatches;
} worker;

static void *work(void *arg)
{
    worker *w = arg;
    for (int round = 0; round < 20; round++) {
        for (size_t i = 0; i < w->g->n; i++) {
            hearth_ids out;
            hearth_ids_init(&out, 100000);
            if (hearth_tokenizer_encode(w->t, w->g->text[i], w->g->len[i], false, false, &out, NULL) ||
                !same_ids(out.v, out.n, w->g->ids[i], w->g->n_ids[i]))
                w->mismatches++;
            hearth_ids_deinit(&out);
        }
    }
    return NULL;
}

/* One shared const tokenizer, four threads, every golden case 20 times each. */
static void threads_share_tokenizer(void)
{
    hearth_vocab v;
    hearth_tokenizer t;
    golden *g = malloc(sizeof *g);
    if (!g || load_golden("vocab/ggml-vocab-gpt-2.gguf", g) || open_tok("vocab/ggml-vocab-gpt-2.gguf", &v, &t)) {
        free_golden(g);
        free(g);
        return;
    }
    pthread_t th[4];
    worker w[4];
    for (int i = 0; i < 4; i++) {
        w[i] = (worker){&t, g, 0};
        CHECK_EQ_INT(pthread_create(&th[i], NULL, work, &w[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        CHECK_EQ_INT(w[i].mismatches, 0);
    }
    hearth_tokenizer_deinit(&t);
    hearth_vocab_deinit(&v);
    free_golden(g);
    free(g);
}

int main(void)
{
    RUN(golden_phi3_spm);
    RUN(golden_gpt2_bpe);
    RUN(round_trip_phi3);
    RUN(round_trip_gpt2);
    RUN(stream_emoji_byte_tokens_spm);
    RUN(stream_emoji_byte_tokens_bpe);
    RUN(stream_flush_and_invalid);
    RUN(parse_special_gpt2);
    RUN(specials_phi3);
    RUN(invalid_utf8);
    RUN(limits_and_models);
    RUN(pretok_splits);
    RUN(random_bytes_spm);
    RUN(random_bytes_bpe);
    RUN(threads_share_tokenizer);
    TEST_EXIT();
}
