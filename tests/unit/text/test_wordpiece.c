/* test_wordpiece.c: WordPiece against llama.cpp's golden tokenizations of the
 * bert-base-uncased vocab (made with Hugging Face's tokenizer), plus cases for
 * each normalisation rule whose expected ids are looked up by piece text. */
#include "harness.h"
#include "text/unicode.h"
#include "text/vocab_txt.h"
#include "text/wordpiece.h"
#include "unit/text/wordpiece_golden.h"

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
    hearth_vocab_deinit(&vocab);
    TEST_EXIT();
}
