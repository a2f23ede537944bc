/* test_vocab_fim.c: fill-in-the-middle markers found by their texts when a
 * file names none, as llama.cpp's vocabulary loader finds them (c392e50):
 * each family's spellings, the first of a list winning, ids the file gave
 * kept, and a found token made a control token. */
#include "harness.h"
#include "text/vocab.h"

#include <string.h>

/* A vocabulary of the given texts (ids in order), hashed. */
static int make(hearth_vocab *v, const char *const *texts, int n)
{
    hearth_err err = {0};
    int rc = hearth_vocab_init(v, n, &err);
    for (int i = 0; i < n && !rc; i++)
        rc = hearth_vocab_set_token(v, i, texts[i], strlen(texts[i]), &err);
    if (!rc)
        rc = hearth_vocab_finish(v, &err);
    CHECK_MSG(rc == HEARTH_OK, "%s", err.msg);
    return rc;
}

static void test_qwen(void)
{
    static const char *const t[] = {"a", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>",
                                    "<|repo_name|>", "<|file_sep|>", "<|fim_repo|>"};
    hearth_vocab v;
    if (make(&v, t, 8))
        return;
    hearth_vocab_guess_fim(&v);
    CHECK_EQ_INT(v.fim_pre, 1);
    CHECK_EQ_INT(v.fim_mid, 2);
    CHECK_EQ_INT(v.fim_suf, 3);
    CHECK_EQ_INT(v.fim_rep, 7); /* "<|fim_repo|>" comes before "<|repo_name|>" in llama.cpp's list */
    CHECK_EQ_INT(v.fim_sep, 6);
    if (v.kind) {
        CHECK_EQ_INT(v.kind[1], HEARTH_TOK_CONTROL);
        CHECK_EQ_INT(v.kind[6], HEARTH_TOK_CONTROL);
        CHECK(v.kind[0] != HEARTH_TOK_CONTROL);
    }
    hearth_vocab_deinit(&v);
}

static void test_codellama_and_deepseek(void)
{
    static const char *const t[] = {"<PRE>", "<SUF>", "<MID>", "x", "<\uff5cfim\u2581begin\uff5c>",
                                    "<\uff5cfim\u2581hole\uff5c>", "<\uff5cfim\u2581end\uff5c>"};
    hearth_vocab v;
    if (make(&v, t, 4)) /* CodeLlama's */
        return;
    hearth_vocab_guess_fim(&v);
    CHECK_EQ_INT(v.fim_pre, 0);
    CHECK_EQ_INT(v.fim_suf, 1);
    CHECK_EQ_INT(v.fim_mid, 2);
    CHECK_EQ_INT(v.fim_rep, -1);
    CHECK_EQ_INT(v.fim_sep, -1);
    hearth_vocab_deinit(&v);
    if (make(&v, t + 3, 4)) /* DeepSeek-Coder's */
        return;
    hearth_vocab_guess_fim(&v);
    CHECK_EQ_INT(v.fim_pre, 1);
    CHECK_EQ_INT(v.fim_suf, 2);
    CHECK_EQ_INT(v.fim_mid, 3);
    hearth_vocab_deinit(&v);
}

static void test_file_ids_win_and_none_found(void)
{
    static const char *const t[] = {"<PRE>", "<SUF>", "<MID>", "<fim-prefix>"};
    hearth_vocab v;
    if (make(&v, t, 4))
        return;
    v.fim_pre = 3; /* the file's word */
    hearth_vocab_guess_fim(&v);
    CHECK_EQ_INT(v.fim_pre, 3);
    CHECK_EQ_INT(v.fim_suf, 1);
    hearth_vocab_deinit(&v);
    static const char *const plain[] = {"<s>", "</s>", "PRE", "<pre>"};
    if (make(&v, plain, 4))
        return;
    hearth_vocab_guess_fim(&v);
    CHECK_EQ_INT(v.fim_pre, -1);
    CHECK_EQ_INT(v.fim_suf, -1);
    CHECK_EQ_INT(v.fim_mid, -1);
    hearth_vocab_deinit(&v);
}

int main(void)
{
    RUN(test_qwen);
    RUN(test_codellama_and_deepseek);
    RUN(test_file_ids_win_and_none_found);
    TEST_EXIT();
}
