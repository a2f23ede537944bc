/* test_vocab_txt.c: the vocab.txt loader on handcrafted files, one per rule
 * or failure, written to a temporary folder. */
#include "harness.h"
#include "text/vocab_txt.h"
#include "text/wordpiece.h"

#include <unistd.h>

static char dir[] = "/tmp/hearth-vocab-txt-XXXXXX";

/* Writes n bytes to a fresh file in dir; returns its path (static storage). */
static const char *write_file(const char *name, const char *data, size_t n)
{
    static char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (!f)
        return path;
    CHECK_EQ_INT(fwrite(data, 1, n, f), n);
    fclose(f);
    return path;
}

static void test_lines(void)
{
    /* CRLF endings, an empty line (a token with empty text, as in Python's
     * readlines) and a last line without "\n". */
    static const char text[] = "[PAD]\r\nhello\r\n\n##lo\n[UNK]\n[CLS]\nlast";
    hearth_vocab v;
    hearth_err err = {0};
    int rc = hearth_vocab_load_txt(&v, write_file("lines.txt", text, sizeof text - 1), &err);
    CHECK_MSG(rc == HEARTH_OK, "%s", err.msg);
    if (rc)
        return;
    CHECK_EQ_INT(v.n_tokens, 7);
    CHECK_EQ_STR(v.text[1], "hello");
    CHECK_EQ_INT(v.len[2], 0);
    CHECK_EQ_STR(v.text[6], "last");
    CHECK_EQ_INT(hearth_vocab_find(&v, "##lo", 4), 3);
    CHECK_EQ_INT(v.pad, 0);
    CHECK_EQ_INT(v.unk, 4);
    CHECK_EQ_INT(v.cls, 5);
    CHECK_EQ_INT(v.sep, -1);
    CHECK_EQ_INT(v.mask, -1);
    CHECK_EQ_STR(v.model, "bert");
    hearth_vocab_deinit(&v);
}

static void test_trailing_newline_is_no_token(void)
{
    static const char text[] = "a\nb\n";
    hearth_vocab v;
    CHECK_EQ_INT(hearth_vocab_load_txt(&v, write_file("nl.txt", text, sizeof text - 1), NULL), HEARTH_OK);
    CHECK_EQ_INT(v.n_tokens, 2);
    hearth_vocab_deinit(&v);
}

static void test_failures(void)
{
    hearth_vocab v;
    hearth_err err = {0};
    CHECK_EQ_INT(hearth_vocab_load_txt(&v, write_file("empty.txt", "", 0), &err), HEARTH_EINVAL);
    CHECK_MSG(strstr(err.msg, "empty") != NULL, "%s", err.msg);

    static const char bad_utf8[] = "ok\nb\xC3(d\n";
    CHECK_EQ_INT(hearth_vocab_load_txt(&v, write_file("bad.txt", bad_utf8, sizeof bad_utf8 - 1), &err),
                 HEARTH_EINVAL);
    CHECK_MSG(strstr(err.msg, "line 2") != NULL && strstr(err.msg, "offset 1") != NULL, "%s", err.msg);

    char long_token[HEARTH_VOCAB_TXT_MAX_TOKEN + 8];
    memset(long_token, 'x', sizeof long_token);
    long_token[0] = '\n';
    CHECK_EQ_INT(hearth_vocab_load_txt(&v, write_file("long.txt", long_token, sizeof long_token), &err),
                 HEARTH_ELIMIT);
    CHECK_MSG(strstr(err.msg, "line 2") != NULL, "%s", err.msg);

    char missing[300];
    snprintf(missing, sizeof missing, "%s/missing.txt", dir);
    CHECK_EQ_INT(hearth_vocab_load_txt(&v, missing, &err), HEARTH_EIO);
    CHECK_MSG(strstr(err.msg, "missing.txt") != NULL, "%s", err.msg);
}

static void test_wordpiece_needs_unk(void)
{
    static const char text[] = "[PAD]\nhello\n";
    hearth_vocab v;
    hearth_err err = {0};
    CHECK_EQ_INT(hearth_vocab_load_txt(&v, write_file("nounk.txt", text, sizeof text - 1), NULL), HEARTH_OK);
    hearth_wordpiece wp;
    CHECK_EQ_INT(hearth_wordpiece_init(&wp, &v, NULL, &err), HEARTH_EINVAL);
    CHECK_MSG(strstr(err.msg, "[UNK]") != NULL, "%s", err.msg);
    hearth_vocab_deinit(&v);
}

int main(void)
{
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    RUN(test_lines);
    RUN(test_trailing_newline_is_no_token);
    RUN(test_failures);
    RUN(test_wordpiece_needs_unk);
    static const char *const names[] = {"lines.txt", "nl.txt", "empty.txt", "bad.txt", "long.txt", "nounk.txt"};
    for (size_t k = 0; k < sizeof names / sizeof *names; k++) {
        char path[300];
        snprintf(path, sizeof path, "%s/%s", dir, names[k]);
        unlink(path);
    }
    rmdir(dir);
    TEST_EXIT();
}
