/* Unit tests for the decoder facade (src/models/decoder.c, decoder_demo.c):
 * which architectures it takes, the demo it writes, what an opened decoder
 * reports and the table it gives the scheduler, and open's failures (each
 * leaving nothing behind: the sanitizer build checks the half-built close).
 * The forward itself is test_llama.c's; here only that the table reaches it. */
#include "harness.h"

#include "models/decoder.h"
#include "models/gguf_write.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[64];

static void archs(void)
{
    CHECK(hearth_decoder_supports("llama"));
    CHECK(hearth_decoder_supports("qwen2"));
    CHECK(hearth_decoder_supports("qwen3"));
    CHECK(!hearth_decoder_supports("bert"));
    CHECK(!hearth_decoder_supports("llama4"));
    CHECK(!hearth_decoder_supports(""));
    CHECK_EQ_STR(hearth_decoder_archs(), "llama, qwen2, qwen3");
    hearth_decoder_close(NULL);
}

/* The demo, opened as serve opens it: its sizes, special ids, template, and
 * a forward and a truncate through the scheduler's table. */
static void demo_opened(void)
{
    char path[256];
    hearth_err e = {0};
    int rc = hearth_decoder_demo_path(dir, path, sizeof path, &e);
    CHECK_MSG(rc == 0, "%s", e.msg);
    if (rc)
        return;
    CHECK(strstr(path, "/demo-llama-tiny.gguf") != NULL);
    CHECK_EQ_INT(access(path, R_OK), 0);
    char again[256];
    CHECK_EQ_INT(hearth_decoder_demo_path(dir, again, sizeof again, &e), 0); /* there: not rewritten */
    CHECK_EQ_STR(again, path);

    hearth_decoder *d = NULL;
    hearth_decoder_opts o = {.n_slots = 3, .n_ctx = 0, .kv_type = HEARTH_F16};
    rc = hearth_decoder_open(&d, path, &o, &e);
    CHECK_MSG(rc == 0 && d, "%s", e.msg);
    if (rc)
        return;
    CHECK_EQ_STR(hearth_decoder_arch(d), "llama");
    CHECK_EQ_INT(hearth_decoder_n_ctx_train(d), 4096);
    CHECK_EQ_INT(hearth_decoder_n_ctx(d), HEARTH_DECODER_DEFAULT_CTX);
    CHECK_EQ_INT(hearth_decoder_weight_type(d), HEARTH_Q8_0);
    CHECK_EQ_INT(hearth_decoder_cache_type(d), HEARTH_F16);
    CHECK(hearth_decoder_cache_bytes(d) > 0);
    CHECK(hearth_decoder_tokenizer(d) != NULL);
    const hearth_vocab *v = hearth_decoder_vocab(d);
    CHECK_EQ_INT(v->bos, 1);
    CHECK_EQ_INT(v->eos, 2);
    const char *src;
    size_t len;
    CHECK_EQ_INT(hearth_decoder_chat_template(d, &src, &len), 0);
    CHECK(len > 20 && !strncmp(src, "{% for message in messages %}", 29));

    const hearth_gen_batch_model *bm = hearth_decoder_batch_model(d);
    CHECK(bm->ctx == d);
    CHECK_EQ_INT(bm->n_slots, 3);
    CHECK_EQ_INT(bm->n_ctx, HEARTH_DECODER_DEFAULT_CTX);
    CHECK_EQ_INT(bm->n_vocab, (int)v->n_tokens);
    CHECK_EQ_INT(bm->n_end_ids, 2); /* eos, then eot (<|im_end|>) */
    CHECK_EQ_INT(bm->end_ids[0], 2);
    CHECK_EQ_INT(bm->end_ids[1], v->eot);
    int32_t tokens[3] = {1, 300, 301}, slots[3] = {2, 2, 0};
    bool want[3] = {false, true, true};
    float *logits = malloc(2 * (size_t)bm->n_vocab * sizeof *logits);
    CHECK(logits != NULL);
    if (logits) {
        rc = bm->forward(bm->ctx, 3, tokens, slots, want, logits, &e);
        CHECK_MSG(rc == 0, "%s", e.msg);
        bool finite = true;
        for (int i = 0; i < 2 * bm->n_vocab; i++)
            finite &= isfinite(logits[i]) != 0;
        CHECK(finite);
        bm->truncate(bm->ctx, 2, 1);
        bm->truncate(bm->ctx, 2, 5); /* past its length: kept as it is */
        free(logits);
    }
    hearth_decoder_close(d);

    o = (hearth_decoder_opts){.n_slots = 1, .n_ctx = 64, .kv_type = HEARTH_F32, .no_repack = true};
    rc = hearth_decoder_open(&d, path, &o, &e);
    CHECK_MSG(rc == 0, "%s", e.msg);
    if (!rc) {
        CHECK_EQ_INT(hearth_decoder_n_ctx(d), 64);
        CHECK_EQ_INT(hearth_decoder_cache_type(d), HEARTH_F32);
        CHECK_EQ_INT(hearth_decoder_batch_model(d)->n_ctx, 64);
        hearth_decoder_close(d);
    }
}

/* Failures name the file, leave *out NULL and free what was built. */
static void open_errors(void)
{
    hearth_err e = {0};
    hearth_decoder *d = (hearth_decoder *)1;
    hearth_decoder_opts o = {.n_slots = 1, .kv_type = HEARTH_F16};
    char missing[128];
    snprintf(missing, sizeof missing, "%s/none.gguf", dir);
    CHECK(hearth_decoder_open(&d, missing, &o, &e) < 0);
    CHECK(d == NULL);
    CHECK_MSG(strstr(e.msg, missing) != NULL, "%s", e.msg);

    char other[128];
    snprintf(other, sizeof other, "%s/mamba.gguf", dir);
    hearth_gguf_writer *w = hearth_gguf_writer_new();
    CHECK(w != NULL);
    if (!w)
        return;
    hearth_gguf_writer_add_str(w, "general.architecture", "mamba");
    CHECK_EQ_INT(hearth_gguf_writer_write(w, other, 32, &e), 0);
    hearth_gguf_writer_free(w);
    d = (hearth_decoder *)1;
    CHECK_EQ_INT(hearth_decoder_open(&d, other, &o, &e), HEARTH_EUNSUPPORTED);
    CHECK(d == NULL);
    CHECK_MSG(strstr(e.msg, other) && strstr(e.msg, "'mamba'"), "%s", e.msg);
    unlink(other);

    /* a cache the model cannot have: the weights opened, then freed */
    char path[256];
    CHECK_EQ_INT(hearth_decoder_demo_path(dir, path, sizeof path, &e), 0);
    o.kv_type = HEARTH_Q8_0;
    d = (hearth_decoder *)1;
    CHECK(hearth_decoder_open(&d, path, &o, &e) < 0);
    CHECK(d == NULL);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/hearth-test-decoder-XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    RUN(archs);
    RUN(demo_opened);
    RUN(open_errors);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    TEST_EXIT();
}
