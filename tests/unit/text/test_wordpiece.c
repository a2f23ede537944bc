/* test_wordpiece.c: WordPiece against llama.cpp's golden tokenizations of the
 * bert-base-uncased vocab (made with Hugging Face's tokenizer), plus cases for
 * each normalisation rule whose expected ids are looked up by piece text.
 * Token offsets: cases whose byte ranges were written down from tokenizers'
 * encode (the Rust library through its Node binding, 0.23, with
 * bert-base-uncased's normalizer and this vocab), and properties over every
 * golden input. */
#include "harness.h"
#include "text/unicode.h"
#include "text/vocab_txt.h"
#include "text/wordpiece.h"
#include "unit/text/wordpiece_decode_cases.h"
#include "unit/text/wordpiece_golden.h"

#include <stdint.h>
#include <sys/mman.h>

static hearth_vocab vocab;
static hearth_wordpiece wp;
static int ready;

static int32_t id_of(const char *piece)
{
    int32_t id = hearth_vocab_find(&vocab, piece, strlen(piece));
    CHECK_MSG(id >= 0, "piece '%s' not in the vocab", piece);
    return id;
}

/* Encodes text and compares with the ids of the NULL-terminated pieces. */
static void expect_pieces(const char *text, size_t n, const char *const *pieces)
{
    hearth_ids ids;
    hearth_err err = {0};
    hearth_ids_init(&ids, 1000);
    int rc = hearth_wordpiece_encode(&wp, text, n, &ids, &err);
    CHECK_MSG(rc == HEARTH_OK, "'%s': %s", text, err.msg);
    size_t k = 0;
    for (; pieces[k]; k++) {
        int32_t want = pieces[k][0] ? id_of(pieces[k]) : hearth_wordpiece_unk(&wp);
        CHECK_MSG(k < ids.n && ids.v[k] == want, "'%s': piece %zu should be '%s' (%d), got %d", text, k,
                  pieces[k][0] ? pieces[k] : "[UNK]", (int)want, k < ids.n ? (int)ids.v[k] : -1);
    }
    CHECK_MSG(ids.n == k, "'%s': %zu ids, expected %zu", text, ids.n, k);
    hearth_ids_deinit(&ids);
}
#define EXPECT(text, ...) expect_pieces(text, sizeof(text) - 1, (const char *const[]){__VA_ARGS__, NULL})
#define UNK ""

/* Later cases need the vocab: without it they fail rather than pass empty. */
static void not_ready(void)
{
    CHECK_MSG(0, "the vocab did not load");
}

static void test_load(void)
{
    char path[512];
    hearth_err err = {0};
    if (!hearth_test_shared_path(path, sizeof path, "vocab/bert-base-uncased-vocab.txt"))
        return;
    int rc = hearth_vocab_load_txt(&vocab, path, &err);
    CHECK_MSG(rc == HEARTH_OK, "%s", err.msg);
    if (rc)
        return;
    CHECK_EQ_INT(vocab.n_tokens, 30522);
    rc = hearth_wordpiece_init(&wp, &vocab, NULL, &err);
    CHECK_MSG(rc == HEARTH_OK, "%s", err.msg);
    /* The ids bert-base-uncased's config and tokenizer_config.json name. */
    CHECK_EQ_INT(hearth_wordpiece_pad(&wp), 0);
    CHECK_EQ_INT(hearth_wordpiece_unk(&wp), 100);
    CHECK_EQ_INT(hearth_wordpiece_cls(&wp), 101);
    CHECK_EQ_INT(hearth_wordpiece_sep(&wp), 102);
    CHECK_EQ_INT(hearth_wordpiece_mask(&wp), 103);
    CHECK(!wp.gguf_spelling);
    ready = rc == HEARTH_OK;
}

static void test_golden(void)
{
    if (!ready)
        return not_ready();
    check_wordpiece_golden(&wp, "vocab/ggml-vocab-bert-bge.gguf");
}

static void test_accents(void)
{
    if (!ready)
        return not_ready();
    EXPECT("\xC3\x84pfel", "ap", "##fe", "##l");             /* Äpfel, precomposed */
    EXPECT("A\xCC\x88pfel", "ap", "##fe", "##l");            /* A + U+0308 */
    EXPECT("CR\xC3\x88ME br\xC3\xBBl\xC3\xA9" "e", "cr", "##eme", "br", "##ule", "##e"); /* CRÈME brûlée */
    /* Marks do not count towards max_input_chars_per_word once stripped. */
    char text[1 + 200 * 2];
    text[0] = 'a';
    for (int k = 0; k < 200; k++)
        memcpy(text + 1 + 2 * k, "\xCC\x81", 2);
    expect_pieces(text, sizeof text, (const char *const[]){"a", NULL});
    /* U+0130 lowercases to i + U+0307, and the dot is stripped. */
    EXPECT("\xC4\xB0s", "is");
    /* U+2260 decomposes to '=' + U+0338: the '=' then splits the word. */
    EXPECT("a\xE2\x89\xA0" "b", "a", "=", "b");
}

static void test_cjk(void)
{
    if (!ready)
        return not_ready();
    /* Without CJK spacing this would be one word, "我" "##天". */
    CHECK(hearth_vocab_find(&vocab, "##\xE5\xA4\xA9", 5) >= 0);
    EXPECT("\xE6\x88\x91\xE5\xA4\xA9", "\xE6\x88\x91", "\xE5\xA4\xA9");
    EXPECT("abc\xE6\x88\x91" "def", "abc", "\xE6\x88\x91", "def");
    /* Hiragana is not in HF's CJK ranges: it stays inside the word. */
    EXPECT("\xE3\x81\x82\xE3\x81\x84", "\xE3\x81\x82", "##\xE3\x81\x84");
}

static void test_punct_and_space(void)
{
    if (!ready)
        return not_ready();
    EXPECT("Hello,world!!", "hello", ",", "world", "!", "!");
    EXPECT("$5 a^b `c`", "$", "5", "a", "^", "b", "`", "c", "`"); /* ASCII symbols count as punctuation */
    EXPECT("\xC2\xBFqu\xC3\xA9?", "\xC2\xBF", "que", "?");         /* ¿qué? */
    EXPECT("a\xC2\xA0" "b\xE3\x80\x80" "c\tb\r\nc", "a", "b", "c", "b", "c"); /* NBSP, ideographic space */
    EXPECT("a\xE2\x80\xA8" "b", "a", "b");                         /* U+2028 splits like whitespace */
    /* Cleaning drops NUL, U+FFFD, controls and format characters. */
    EXPECT("ab\0c\xEF\xBF\xBD" "d\x01" "e\xE2\x80\x8D" "f", "abc", "##de", "##f");
}

static void test_empty(void)
{
    if (!ready)
        return not_ready();
    hearth_ids ids;
    hearth_ids_init(&ids, 10);
    const char *blank[] = {"", " ", "\t\n\r ", "\xE2\x80\x8D", "\xCC\x81\xCC\x81"};
    for (size_t k = 0; k < sizeof blank / sizeof *blank; k++) {
        CHECK_EQ_INT(hearth_wordpiece_encode(&wp, blank[k], strlen(blank[k]), &ids, NULL), HEARTH_OK);
        CHECK_EQ_INT(ids.n, 0);
    }
    hearth_ids_deinit(&ids);
}

static void test_unknown(void)
{
    if (!ready)
        return not_ready();
    char word[102];
    memset(word, 'a', sizeof word);
    /* 100 characters are matched piece by piece; 101 are one [UNK]. */
    hearth_ids ids;
    hearth_ids_init(&ids, 1000);
    CHECK_EQ_INT(hearth_wordpiece_encode(&wp, word, 100, &ids, NULL), HEARTH_OK);
    CHECK(ids.n > 1);
    for (size_t k = 0; k < ids.n; k++)
        CHECK(ids.v[k] != hearth_wordpiece_unk(&wp));
    ids.n = 0;
    CHECK_EQ_INT(hearth_wordpiece_encode(&wp, word, 101, &ids, NULL), HEARTH_OK);
    CHECK_EQ_INT(ids.n, 1);
    CHECK_EQ_INT(ids.v[0], hearth_wordpiece_unk(&wp));
    hearth_ids_deinit(&ids);
    /* "hello" matches but "##🚀" does not: the whole word is one [UNK]. */
    EXPECT("x hello\xF0\x9F\x9A\x80 y", "x", UNK, "y");
    EXPECT("\xF0\x9F\x9A\x80" "hello", UNK);
}

static void test_invalid_utf8(void)
{
    if (!ready)
        return not_ready();
    static const struct {
        const char *text;
        size_t n, offset;
    } bad[] = {
        {"ab\xFF" "cd", 5, 2},             /* never valid */
        {"a\xC0\x80", 3, 1},               /* overlong NUL */
        {"ab\xED\xA0\x80", 5, 2},          /* surrogate */
        {"abc\xE2\x82", 5, 3},             /* truncated */
        {"\xF4\x90\x80\x80", 4, 0},        /* past U+10FFFF */
        {"ok \xE2\x82\xAC \x80", 8, 7},    /* stray continuation */
    };
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        hearth_ids ids;
        hearth_err err = {0};
        hearth_ids_init(&ids, 100);
        CHECK_EQ_INT(hearth_wordpiece_encode(&wp, bad[k].text, bad[k].n, &ids, &err), HEARTH_EINVAL);
        CHECK_EQ_INT(ids.n, 0);
        char want[64];
        snprintf(want, sizeof want, "at offset %zu", bad[k].offset);
        CHECK_MSG(strstr(err.msg, want) != NULL, "case %zu: '%s' lacks '%s'", k, err.msg, want);
        hearth_ids_deinit(&ids);
    }
}

static void test_limit(void)
{
    if (!ready)
        return not_ready();
    hearth_ids ids;
    hearth_err err = {0};
    hearth_ids_init(&ids, 3);
    CHECK_EQ_INT(hearth_wordpiece_encode(&wp, "hello world, again", 18, &ids, &err), HEARTH_ELIMIT);
    CHECK_EQ_INT(ids.n, 3);
    if (ids.n == 3) {
        CHECK_EQ_INT(ids.v[0], id_of("hello"));
        CHECK_EQ_INT(ids.v[1], id_of("world"));
        CHECK_EQ_INT(ids.v[2], id_of(","));
    }
    CHECK_MSG(strstr(err.msg, "limit of 3") != NULL, "%s", err.msg);
    hearth_ids_deinit(&ids);
}

static void test_options(void)
{
    if (!ready)
        return not_ready();
    hearth_wordpiece_opts o;
    hearth_wordpiece_opts_default(&o);
    o.max_input_chars_per_word = 0;
    hearth_wordpiece w2;
    CHECK_EQ_INT(hearth_wordpiece_init(&w2, &vocab, &o, NULL), HEARTH_EINVAL);
    /* Cased: the uncased vocab has no "H", so "Hello" is one [UNK]. */
    hearth_wordpiece_opts_default(&o);
    o.lowercase = false;
    CHECK_EQ_INT(hearth_wordpiece_init(&w2, &vocab, &o, NULL), HEARTH_OK);
    CHECK(!w2.strip_accents);
    hearth_ids ids;
    hearth_ids_init(&ids, 10);
    CHECK_EQ_INT(hearth_wordpiece_encode(&w2, "Hello hello", 11, &ids, NULL), HEARTH_OK);
    CHECK_EQ_INT(ids.n, 2);
    if (ids.n == 2) {
        CHECK_EQ_INT(ids.v[0], hearth_wordpiece_unk(&wp));
        CHECK_EQ_INT(ids.v[1], id_of("hello"));
    }
    /* Lowercase without stripping accents keeps "é", and "café" is unknown. */
    EXPECT("Caf\xC3\xA9", "cafe");
    hearth_wordpiece_opts_default(&o);
    o.strip_accents = 0;
    CHECK_EQ_INT(hearth_wordpiece_init(&w2, &vocab, &o, NULL), HEARTH_OK);
    ids.n = 0;
    CHECK_EQ_INT(hearth_wordpiece_encode(&w2, "Caf\xC3\xA9 Cafe", 10, &ids, NULL), HEARTH_OK);
    CHECK_EQ_INT(ids.n, 2);
    if (ids.n == 2) {
        CHECK_EQ_INT(ids.v[0], hearth_wordpiece_unk(&wp));
        CHECK_EQ_INT(ids.v[1], id_of("cafe"));
    }
    hearth_ids_deinit(&ids);
}

/* One expected token: its piece ("" for [UNK]) and input bytes [start, stop). */
typedef struct want_tok {
    const char *piece;
    uint32_t start, stop;
} want_tok;

/* Encodes text with spans and compares with want (ended by a NULL piece). */
static void expect_spans(const hearth_wordpiece *w, const char *text, size_t n, const want_tok *want)
{
    hearth_ids ids;
    hearth_err err = {0};
    hearth_tok_span spans[64];
    hearth_ids_init(&ids, 64);
    int rc = hearth_wordpiece_encode_spans(w, text, n, &ids, spans, 64, &err);
    CHECK_MSG(rc == HEARTH_OK, "'%.*s': %s", (int)n, text, err.msg);
    size_t k = 0;
    for (; want[k].piece; k++) {
        int32_t id = want[k].piece[0] ? id_of(want[k].piece) : hearth_wordpiece_unk(w);
        if (k >= ids.n) {
            CHECK_MSG(0, "'%.*s': token %zu ('%s') is missing", (int)n, text, k, want[k].piece);
            continue;
        }
        CHECK_MSG(ids.v[k] == id && spans[k].start == want[k].start && spans[k].stop == want[k].stop,
                  "'%.*s': token %zu should be '%s' (%d) [%u, %u), got %d [%u, %u)", (int)n, text, k,
                  want[k].piece[0] ? want[k].piece : "[UNK]", (int)id, (unsigned)want[k].start,
                  (unsigned)want[k].stop, (int)ids.v[k], (unsigned)spans[k].start, (unsigned)spans[k].stop);
    }
    CHECK_MSG(ids.n == k, "'%.*s': %zu tokens, expected %zu", (int)n, text, ids.n, k);
    hearth_ids_deinit(&ids);
}
#define EXPECT_SPANS(text, ...) \
    expect_spans(&wp, text, sizeof(text) - 1, (const want_tok[]){__VA_ARGS__, {NULL, 0, 0}})

static void test_spans(void)
{
    if (!ready)
        return not_ready();
    EXPECT_SPANS("Hello, world!", {"hello", 0, 5}, {",", 5, 6}, {"world", 7, 12}, {"!", 12, 13});
    /* é is two bytes: every later range moves by one */
    EXPECT_SPANS("caf\xC3\xA9 au lait", {"cafe", 0, 5}, {"au", 6, 8}, {"lai", 9, 12}, {"##t", 12, 13});
    EXPECT_SPANS("tokenization", {"token", 0, 5}, {"##ization", 5, 12});
    /* a piece after a decomposed letter: Ä's two bytes stay in "ap" */
    EXPECT_SPANS("\xC3\x84pfel", {"ap", 0, 3}, {"##fe", 3, 5}, {"##l", 5, 6});
    EXPECT_SPANS("CR\xC3\x88ME br\xC3\xBBl\xC3\xA9" "e", {"cr", 0, 2}, {"##eme", 2, 6}, {"br", 7, 9},
                 {"##ule", 9, 14}, {"##e", 14, 15});
    EXPECT_SPANS("  a\tb ", {"a", 2, 3}, {"b", 4, 5});
    EXPECT_SPANS("a\xC2\xA0" "b", {"a", 0, 1}, {"b", 3, 4}); /* NBSP is whitespace */
    /* 我 天 abc 你: ideographs are words of three bytes; 你 is not in the vocab */
    EXPECT_SPANS("\xE6\x88\x91\xE5\xA4\xA9" "abc\xE4\xBD\xA0", {"\xE6\x88\x91", 0, 3},
                 {"\xE5\xA4\xA9", 3, 6}, {"abc", 6, 9}, {UNK, 9, 12});
    /* A stripped mark leaves nothing behind, as in tokenizers: "e" + U+0301
     * is "e" over its one byte, and "cafe" + U+0301 stops before the mark. */
    EXPECT_SPANS("e\xCC\x81", {"e", 0, 1});
    EXPECT_SPANS("cafe\xCC\x81 x", {"cafe", 0, 4}, {"x", 7, 8});
    EXPECT_SPANS("\xCC\x81x", {"x", 2, 3});
    /* expansions keep their source's range: U+0130 -> i + U+0307, U+212B -> a + U+030A */
    EXPECT_SPANS("\xC4\xB0s", {"is", 0, 3});
    EXPECT_SPANS("\xE2\x84\xAB", {"a", 0, 3});
    /* U+2260 -> '=' + U+0338: the '=' word covers the whole sign */
    EXPECT_SPANS("a\xE2\x89\xA0" "b", {"a", 0, 1}, {"=", 1, 4}, {"b", 4, 5});
    /* Hangul syllables decompose to jamo: pieces of one code point share its range */
    EXPECT_SPANS("\xEA\xB0\x81", {"\xE1\x84\x80", 0, 3}, {"##\xE1\x85\xA1", 0, 3}, {"##\xE1\x86\xA8", 0, 3});
    /* cleaned-away characters inside a word: the piece runs over them */
    EXPECT_SPANS("ab\x01" "cd", {"abc", 0, 4}, {"##d", 4, 5});
    EXPECT_SPANS("ab\xEF\xBF\xBD" "cd", {"abc", 0, 6}, {"##d", 6, 7});
    EXPECT_SPANS("\x01" "ab\xE2\x80\x8D", {"ab", 1, 3});
    /* [UNK] words cover the whole word */
    EXPECT_SPANS("x hello\xF0\x9F\x9A\x80 y", {"x", 0, 1}, {UNK, 2, 11}, {"y", 12, 13});
    /* Canonical reordering: tokenizers hands ranges out by position after
     * it. U+1161 U+0307 U+302E: U+302E (class 224, not Mn, so kept) moves
     * before U+0307 (230, stripped) and takes its range, [3, 5): the word is
     * [0, 5), and U+302E's own bytes are in no token. And U+1FA2 U+0316
     * U+302E: four code points of U+1FA2, then U+0316 and U+302E move ahead
     * of its three marks: the kept U+302E takes its own range, [5, 8). */
    EXPECT_SPANS("\xE1\x85\xA1\xCC\x87\xE3\x80\xAE", {UNK, 0, 5});
    EXPECT_SPANS("\xE1\xBE\xA2\xCC\x96\xE3\x80\xAE", {UNK, 0, 8});
}

static void test_spans_long_word(void)
{
    if (!ready)
        return not_ready();
    /* "x " + 101 letters + " y": the word is one [UNK] over its 101 bytes */
    char text[2 + 101 + 2];
    memcpy(text, "x ", 2);
    memset(text + 2, 'a', 101);
    memcpy(text + 103, " y", 2);
    expect_spans(&wp, text, sizeof text, (const want_tok[]){{"x", 0, 1}, {UNK, 2, 103}, {"y", 104, 105}, {NULL, 0, 0}});
    /* accented letters past the limit: the range still ends at the last
     * letter's last byte; trailing marks (stripped) are not in it */
    char acc[2 + 101 * 2 + 2 + 2];
    memcpy(acc, "x ", 2);
    for (int k = 0; k < 101; k++)
        memcpy(acc + 2 + 2 * k, "\xC3\xA9", 2);
    memcpy(acc + 204, "\xCC\x81 y", 4);
    expect_spans(&wp, acc, sizeof acc, (const want_tok[]){{"x", 0, 1}, {UNK, 2, 204}, {"y", 207, 208}, {NULL, 0, 0}});
    /* max_input_chars_per_word 3: "abcd" is too long, and starts after a
     * control character */
    hearth_wordpiece_opts o;
    hearth_wordpiece_opts_default(&o);
    o.max_input_chars_per_word = 3;
    hearth_wordpiece w3;
    CHECK_EQ_INT(hearth_wordpiece_init(&w3, &vocab, &o, NULL), HEARTH_OK);
    expect_spans(&w3, "abc \x01" "abcd,", 10,
                 (const want_tok[]){{"abc", 0, 3}, {UNK, 5, 9}, {",", 9, 10}, {NULL, 0, 0}});
}

/* Checks the spans of one input against the rules every tokenization keeps. */
static int span_properties(const char *text, size_t n, const hearth_ids *ids, const hearth_tok_span *spans)
{
    int bad = 0;
    unsigned char *covered = calloc(n + 1, 1), *boundary = calloc(n + 1, 1);
    for (size_t i = 0; i < n;) {
        boundary[i] = 1;
        if (hearth_utf8_decode(text, n, &i) < 0)
            break;
    }
    boundary[n] = 1;
    for (size_t k = 0; k < ids->n; k++) {
        hearth_tok_span sp = spans[k];
        if (sp.start >= sp.stop || sp.stop > n || !boundary[sp.start] || !boundary[sp.stop]) {
            fprintf(stderr, "    token %zu: [%u, %u) is not a range of whole code points in %zu bytes\n", k,
                    sp.start, sp.stop, n);
            bad = 1;
            break;
        }
        memset(covered + sp.start, 1, sp.stop - sp.start);
        if (k == 0)
            continue;
        hearth_tok_span prev = spans[k - 1];
        int32_t id = ids->v[k];
        bool cont = vocab.len[id] > 2 && memcmp(vocab.text[id], "##", 2) == 0;
        if (sp.start < prev.start) {
            fprintf(stderr, "    token %zu: starts at %u, before token %zu's %u\n", k, sp.start, k - 1, prev.start);
            bad = 1;
        }
        if (!cont && sp.start < prev.stop) {
            fprintf(stderr, "    token %zu starts a word at %u, inside token %zu [%u, %u)\n", k, sp.start, k - 1,
                    prev.start, prev.stop);
            bad = 1;
        }
        /* a ## piece continues the word: only dropped code points between */
        for (size_t i = prev.stop; cont && i < sp.start;) {
            size_t at = i;
            int32_t cp = hearth_utf8_decode(text, n, &i);
            if (!(cp == 0 || cp == 0xFFFD || hearth_uc_is_control(cp) || hearth_uc_is_nonspacing_mark(cp))) {
                fprintf(stderr, "    token %zu continues a word across U+%04X at byte %zu\n", k, (unsigned)cp, at);
                bad = 1;
                break;
            }
        }
    }
    /* nothing silently lost: whitespace, control characters and stripped
     * marks are the only code points no token covers */
    for (size_t i = 0; i < n;) {
        size_t at = i;
        int32_t cp = hearth_utf8_decode(text, n, &i);
        if (cp == 0 || cp == 0xFFFD || hearth_uc_is_whitespace(cp) || hearth_uc_is_control(cp) ||
            hearth_uc_is_nonspacing_mark(cp))
            continue;
        for (size_t j = at; j < i; j++)
            if (!covered[j]) {
                fprintf(stderr, "    U+%04X at byte %zu is in no token\n", (unsigned)cp, at);
                bad = 1;
                break;
            }
    }
    free(covered);
    free(boundary);
    return bad;
}

static void test_spans_golden(void)
{
    if (!ready)
        return not_ready();
    char path[512];
    char *inp = NULL;
    size_t len = 0;
    hearth_err err = {0};
    if (!hearth_test_shared_path(path, sizeof path, "vocab/ggml-vocab-bert-bge.gguf.inp"))
        return;
    if (hearth_file_read(path, 1 << 20, &inp, &len, &err)) {
        CHECK_MSG(0, "%s", err.msg);
        return;
    }
    size_t ip = 0, sep_len = strlen(GOLDEN_SEP), tokens = 0;
    int cases = 0;
    for (const char *hit; (hit = memmem(inp + ip, len - ip, GOLDEN_SEP, sep_len)) != NULL;
         ip = (size_t)(hit - inp) + sep_len, cases++) {
        const char *text = inp + ip;
        size_t n = (size_t)(hit - text);
        hearth_ids plain, ids;
        hearth_ids_init(&plain, 4096);
        hearth_ids_init(&ids, 4096);
        hearth_tok_span *spans = malloc((n + 1) * sizeof *spans);
        int rc1 = hearth_wordpiece_encode(&wp, text, n, &plain, &err);
        int rc2 = hearth_wordpiece_encode_spans(&wp, text, n, &ids, spans, n + 1, &err);
        int bad = rc1 || rc2 || plain.n != ids.n || (ids.n && memcmp(plain.v, ids.v, ids.n * sizeof *ids.v));
        if (bad)
            fprintf(stderr, "    the ids differ with spans (rc %d, %d; %zu, %zu ids)\n", rc1, rc2, plain.n, ids.n);
        else
            bad = span_properties(text, n, &ids, spans);
        if (bad) {
            hearth_test_case_failed = 1;
            fprintf(stderr, "  input %d: ", cases + 1);
            golden_print_text(text, n);
            fputc('\n', stderr);
        }
        tokens += ids.n;
        free(spans);
        hearth_ids_deinit(&plain);
        hearth_ids_deinit(&ids);
    }
    CHECK_MSG(cases >= 40 && tokens >= 250, "only %d golden inputs, %zu tokens", cases, tokens);
    free(inp);
}

static void test_spans_limit(void)
{
    if (!ready)
        return not_ready();
    hearth_ids ids;
    hearth_err err = {0};
    hearth_tok_span spans[4] = {{0, 0}, {0, 0}, {0, 0}, {77, 77}};
    /* room for 2 spans of 4 tokens: 2 ids and 2 spans, the rest untouched */
    hearth_ids_init(&ids, 100);
    CHECK_EQ_INT(hearth_wordpiece_encode_spans(&wp, "hello world, again", 18, &ids, spans, 2, &err), HEARTH_ELIMIT);
    CHECK_MSG(strstr(err.msg, "span limit of 2") != NULL, "%s", err.msg);
    CHECK_EQ_INT(ids.n, 2);
    if (ids.n == 2) {
        CHECK_EQ_INT(ids.v[0], id_of("hello"));
        CHECK_EQ_INT(ids.v[1], id_of("world"));
    }
    CHECK(spans[0].start == 0 && spans[0].stop == 5);
    CHECK(spans[1].start == 6 && spans[1].stop == 11);
    CHECK(spans[2].start == 0 && spans[2].stop == 0 && spans[3].start == 77);
    /* ids appended after ones already there: spans[k] is this call's k-th */
    ids.n = 1;
    CHECK_EQ_INT(hearth_wordpiece_encode_spans(&wp, "again hello", 11, &ids, spans, 3, &err), HEARTH_OK);
    CHECK_EQ_INT(ids.n, 3);
    CHECK(spans[0].start == 0 && spans[0].stop == 5);
    CHECK(spans[1].start == 6 && spans[1].stop == 11);
    /* out->max reached before n_spans: the spans of the ids that fit */
    hearth_ids small;
    hearth_ids_init(&small, 1);
    memset(spans, 0, sizeof spans);
    CHECK_EQ_INT(hearth_wordpiece_encode_spans(&wp, "hello world", 11, &small, spans, 4, &err), HEARTH_ELIMIT);
    CHECK_EQ_INT(small.n, 1);
    CHECK(spans[0].start == 0 && spans[0].stop == 5);
    CHECK(spans[1].start == 0 && spans[1].stop == 0);
    hearth_ids_deinit(&small);
    /* no spans wanted: n_spans does not matter */
    ids.n = 0;
    CHECK_EQ_INT(hearth_wordpiece_encode_spans(&wp, "hello world", 11, &ids, NULL, 0, &err), HEARTH_OK);
    CHECK_EQ_INT(ids.n, 2);
    /* no room at all */
    ids.n = 0;
    CHECK_EQ_INT(hearth_wordpiece_encode_spans(&wp, "hello", 5, &ids, spans, 0, &err), HEARTH_ELIMIT);
    CHECK_EQ_INT(ids.n, 0);
    CHECK_EQ_INT(hearth_wordpiece_encode_spans(&wp, " \x01 ", 3, &ids, spans, 0, &err), HEARTH_OK);
    /* invalid UTF-8: nothing appended */
    CHECK_EQ_INT(hearth_wordpiece_encode_spans(&wp, "ab\xFF", 3, &ids, spans, 4, &err), HEARTH_EINVAL);
    CHECK_EQ_INT(ids.n, 0);
#if SIZE_MAX > UINT32_MAX
    /* 2^32 bytes do not fit the offsets: refused before a byte is read (the
     * mapping is readable zeros, so a missing check fails slowly, not by crashing) */
    size_t big = (size_t)1 << 32;
    void *m = mmap(NULL, big, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m != MAP_FAILED) {
        CHECK_EQ_INT(hearth_wordpiece_encode_spans(&wp, m, big, &ids, spans, 4, &err), HEARTH_EINVAL);
        CHECK_MSG(strstr(err.msg, "4294967296 bytes") != NULL, "%s", err.msg);
        CHECK_EQ_INT(hearth_wordpiece_encode(&wp, m, big, &ids, &err), HEARTH_EINVAL);
        CHECK_EQ_INT(ids.n, 0);
        munmap(m, big);
    }
#endif
    hearth_ids_deinit(&ids);
}

/* Canonical reordering: within each run of non-starters, a stable sort by
 * combining class; starters stay put. Runs of 40 (past the insertion sort's
 * 32) and of 200,000 (a word may buffer that many marks) take the counting
 * sort; a run of 3 the insertion sort. Pattern per 4 marks: U+0301 (230),
 * U+0316 (220), U+0300 (230), U+0317 (220). */
static void test_reorder_runs(void)
{
    const int32_t pat[4] = {0x301, 0x316, 0x300, 0x317};
    const size_t runs[] = {3, 40, 200000};
    for (size_t r = 0; r < sizeof runs / sizeof runs[0]; r++) {
        size_t m = runs[r], n = m + 3;
        int32_t *cps = malloc(n * sizeof *cps);
        cps[0] = 'a';
        for (size_t i = 0; i < m; i++)
            cps[1 + i] = pat[i % 4];
        cps[1 + m] = 'b';
        cps[2 + m] = 0x301;
        hearth_uc_reorder(cps, n);
        /* class 220 first, in input order (0316, 0317, ...), then class 230 (0301, 0300, ...) */
        size_t n220 = m / 2, bad = 0; /* the odd positions */
        for (size_t i = 0; i < m; i++) {
            int32_t want = i < n220 ? (i % 2 ? 0x317 : 0x316) : ((i - n220) % 2 ? 0x300 : 0x301);
            bad += cps[1 + i] != want;
        }
        CHECK_MSG(bad == 0 && cps[0] == 'a' && cps[1 + m] == 'b' && cps[2 + m] == 0x301,
                  "run of %zu marks: %zu out of place", m, bad);
        free(cps);
    }
}

/* Decoding against tokenizers' goldens, and its errors. */
static void test_decode(void)
{
    if (!ready)
        return not_ready();
    check_wordpiece_decode_cases(&wp);
    hearth_buf out;
    hearth_err err = {0};
    /* an id outside the vocab: named with its position, nothing appended */
    hearth_buf_init(&out, 4096);
    int32_t bad[] = {7592, 30522};
    CHECK_EQ_INT(hearth_wordpiece_decode(&wp, bad, 2, true, &out, &err), HEARTH_EINVAL);
    CHECK_MSG(strstr(err.msg, "id 1") && strstr(err.msg, "30522"), "message '%s'", err.msg);
    CHECK_EQ_INT(out.len, 0);
    int32_t neg[] = {-1};
    CHECK_EQ_INT(hearth_wordpiece_decode(&wp, neg, 1, true, &out, &err), HEARTH_EINVAL);
    hearth_buf_deinit(&out);
    /* the buffer's bound: "hello hello" is 11 bytes */
    hearth_buf_init(&out, 8);
    int32_t two[] = {7592, 7592};
    CHECK_EQ_INT(hearth_wordpiece_decode(&wp, two, 2, true, &out, &err), HEARTH_ELIMIT);
    hearth_buf_deinit(&out);
    /* no ids: no text */
    hearth_buf_init(&out, 8);
    CHECK_EQ_INT(hearth_wordpiece_decode(&wp, two, 0, true, &out, &err), HEARTH_OK);
    CHECK_EQ_INT(out.len, 0);
    hearth_buf_deinit(&out);
}

int main(void)
{
    RUN(test_load);
    RUN(test_golden);
    RUN(test_accents);
    RUN(test_cjk);
    RUN(test_punct_and_space);
    RUN(test_empty);
    RUN(test_unknown);
    RUN(test_invalid_utf8);
    RUN(test_limit);
    RUN(test_options);
    RUN(test_spans);
    RUN(test_spans_long_word);
    RUN(test_spans_golden);
    RUN(test_spans_limit);
    RUN(test_reorder_runs);
    RUN(test_decode);
    hearth_vocab_deinit(&vocab);
    TEST_EXIT();
}
