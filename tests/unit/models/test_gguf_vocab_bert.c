/* test_gguf_vocab_bert.c: WordPiece over the vocab llama.cpp's converter wrote
 * into ggml-vocab-bert-bge.gguf (pieces spelt "\u2581the" / "ing" instead of
 * "the" / "##ing"), against the same golden ids as the vocab.txt test, and
 * decoding back to the text tokenizers gives for the same ids. */
#include "harness.h"
#include "models/gguf.h"
#include "models/gguf_vocab.h"
#include "text/wordpiece.h"
#include "unit/text/wordpiece_decode_cases.h"
#include "unit/text/wordpiece_golden.h"

static void test_bge_golden(void)
{
    char path[512];
    if (!hearth_test_shared_path(path, sizeof path, "vocab/ggml-vocab-bert-bge.gguf"))
        return;
    hearth_gguf g = {0};
    hearth_vocab v = {0};
    hearth_err err = {0};
    int rc = hearth_gguf_open(&g, path, &err);
    CHECK_MSG(rc == HEARTH_OK, "%s", err.msg);
    if (!rc) {
        rc = hearth_gguf_load_vocab(&g, &v, &err);
        CHECK_MSG(rc == HEARTH_OK, "%s", err.msg);
    }
    hearth_gguf_close(&g); /* the vocab holds its own copies */
    if (rc)
        return;
    CHECK_EQ_INT(v.n_tokens, 30522);
    CHECK_EQ_STR(v.model, "bert");
    hearth_wordpiece wp;
    rc = hearth_wordpiece_init(&wp, &v, NULL, &err);
    CHECK_MSG(rc == HEARTH_OK, "%s", err.msg);
    if (!rc) {
        CHECK(wp.gguf_spelling);
        /* SOURCE.txt's special ids for this file. */
        CHECK_EQ_INT(hearth_wordpiece_unk(&wp), 100);
        CHECK_EQ_INT(hearth_wordpiece_cls(&wp), 101);
        CHECK_EQ_INT(hearth_wordpiece_sep(&wp), 102);
        CHECK_EQ_INT(hearth_wordpiece_pad(&wp), 0);
        CHECK_EQ_INT(hearth_wordpiece_mask(&wp), 103);
        check_wordpiece_golden(&wp, "vocab/ggml-vocab-bert-bge.gguf");
        check_wordpiece_decode_cases(&wp);
    }
    hearth_vocab_deinit(&v);
}

int main(void)
{
    RUN(test_bge_golden);
    TEST_EXIT();
}
