/* Unit tests for the GGUF reader (src/models/gguf*.c) against real files in
 * shared/: the expected values come from their SOURCE.txt descriptions and an
 * independent Python dump of the files, not from this reader. */
#include "harness.h"

#include "models/gguf.h"
#include "models/gguf_vocab.h"

static void reads_stories260k(void)
{
    char path[512];
    if (!hearth_test_shared_path(path, sizeof path, "models/stories260K/stories260K.gguf"))
        return;
    hearth_gguf g;
    hearth_err e = {0};
    int rc = hearth_gguf_open(&g, path, &e);
    CHECK_MSG(rc == HEARTH_OK, "%s", e.msg);
    if (rc)
        return;
    CHECK_EQ_INT(g.version, 3);
    CHECK_EQ_INT(g.n_tensors, 48);
    CHECK_EQ_INT(g.n_kv, 19);
    CHECK_EQ_INT(g.alignment, 32);
    uint32_t u = 0;
    CHECK_EQ_INT(hearth_gguf_get_u32(&g, "llama.embedding_length", &u, &e), 0);
    CHECK_EQ_INT(u, 64);
    CHECK_EQ_INT(hearth_gguf_get_u32(&g, "llama.block_count", &u, &e), 0);
    CHECK_EQ_INT(u, 5);
    CHECK_EQ_INT(hearth_gguf_get_u32(&g, "llama.attention.head_count", &u, &e), 0);
    CHECK_EQ_INT(u, 8);
    CHECK_EQ_INT(hearth_gguf_get_u32(&g, "llama.attention.head_count_kv", &u, &e), 0);
    CHECK_EQ_INT(u, 4);
    CHECK_EQ_INT(hearth_gguf_get_u32(&g, "llama.feed_forward_length", &u, &e), 0);
    CHECK_EQ_INT(u, 172);
    CHECK_EQ_INT(hearth_gguf_get_u32(&g, "llama.context_length", &u, &e), 0);
    CHECK_EQ_INT(u, 2048);
    CHECK_EQ_INT(hearth_gguf_get_u32(&g, "llama.rope.dimension_count", &u, &e), 0);
    CHECK_EQ_INT(u, 8);
    float f = 0;
    CHECK_EQ_INT(hearth_gguf_get_f32(&g, "llama.attention.layer_norm_rms_epsilon", &f, &e), 0);
    CHECK_NEAR(f, 1e-5, 1e-12);
    const char *s;
    size_t n;
    CHECK_EQ_INT(hearth_gguf_get_str(&g, "general.architecture", &s, &n, &e), 0);
    CHECK(n == 5 && memcmp(s, "llama", 5) == 0);
    /* wrong type and absent keys */
    CHECK_EQ_INT(hearth_gguf_get_u32(&g, "general.architecture", &u, &e), HEARTH_EINVAL);
    CHECK(strstr(e.msg, "general.architecture") && strstr(e.msg, "stories260K.gguf"));
    CHECK_EQ_INT(hearth_gguf_get_u32(&g, "llama.nope", &u, &e), HEARTH_ENOTFOUND);
    CHECK(strstr(e.msg, "llama.nope") != NULL);
    const hearth_gguf_tensor *t = hearth_gguf_find_tensor(&g, "token_embd.weight");
    CHECK(t != NULL);
    if (t) {
        CHECK_EQ_INT(t->n_dims, 2);
        CHECK_EQ_INT(t->ne[0], 64);
        CHECK_EQ_INT(t->ne[1], 512);
        CHECK_EQ_INT(t->type, HEARTH_F32);
        CHECK_EQ_INT(t->nbytes, 64 * 512 * 4);
        CHECK_EQ_INT(t->offset, 14176); /* infos end at 14152, aligned up to 32 */
    }
    t = hearth_gguf_find_tensor(&g, "blk.4.ffn_norm.weight");
    CHECK(t != NULL && t->offset == 14176 + 1170944 && t->nbytes == 256);
    CHECK(t && (const uint8_t *)t->data + t->nbytes == g.map.data + g.map.size);
    CHECK(hearth_gguf_find_tensor(&g, "blk.5.ffn_norm.weight") == NULL);
    int all_f32 = 1;
    size_t total = 0;
    for (uint64_t i = 0; i < g.n_tensors; i++) {
        all_f32 &= g.tensors[i].type == HEARTH_F32;
        total += g.tensors[i].nbytes;
    }
    CHECK(all_f32);
    CHECK_EQ_INT(total / 4, 292800); /* SOURCE.txt: total parameters, output.weight included */
    hearth_gguf_close(&g);
    hearth_gguf_close(&g); /* closing twice is safe */
}

static void refuses_v1(void)
{
    char path[512];
    if (!hearth_test_shared_path(path, sizeof path, "models/stories260K-gguf-v1/tinyllamas-stories-260k-f32.gguf"))
        return;
    hearth_gguf g;
    hearth_err e = {0};
    CHECK_EQ_INT(hearth_gguf_open(&g, path, &e), HEARTH_EUNSUPPORTED);
    CHECK(strstr(e.msg, "unsupported GGUF version 1") != NULL);
    CHECK(strstr(e.msg, "tinyllamas-stories-260k-f32.gguf") != NULL);
    hearth_gguf_close(&g);
}

static int open_vocab(const char *rel, hearth_gguf *g, hearth_vocab *v)
{
    char path[512];
    if (!hearth_test_shared_path(path, sizeof path, rel))
        return -1;
    hearth_err e = {0};
    int rc = hearth_gguf_open(g, path, &e);
    CHECK_MSG(rc == 0, "%s", e.msg);
    if (rc)
        return rc;
    rc = hearth_gguf_load_vocab(g, v, &e);
    CHECK_MSG(rc == 0, "%s", e.msg);
    if (rc)
        hearth_gguf_close(g);
    return rc;
}

static void vocab_stories260k(void)
{
    hearth_gguf g;
    hearth_vocab v;
    if (open_vocab("models/stories260K/stories260K.gguf", &g, &v))
        return;
    CHECK_EQ_INT(v.n_tokens, 512);
    CHECK_EQ_INT(v.bos, 1);
    CHECK_EQ_INT(v.eos, 2);
    CHECK_EQ_INT(v.unk, 0);
    CHECK_EQ_INT(v.sep, -1); /* stored as 0xffffffff */
    CHECK_EQ_INT(v.pad, -1);
    CHECK_EQ_STR(v.model, "llama");
    CHECK_EQ_STR(v.text[1], "<s>");
    CHECK_EQ_STR(v.text[3], "<0x00>");
    CHECK_EQ_INT(v.kind[0], HEARTH_TOK_UNKNOWN);
    CHECK_EQ_INT(v.kind[3], HEARTH_TOK_BYTE);
    CHECK_EQ_INT(v.kind[511], HEARTH_TOK_NORMAL);
    CHECK_NEAR(v.score[511], -252.0, 0);
    CHECK_EQ_STR(v.text[511], "\xe2\x80\x8a");
    CHECK_EQ_INT(hearth_vocab_find(&v, "</s>", 4), 2);
    hearth_vocab_deinit(&v);
    hearth_gguf_close(&g);
}

static void vocab_bert_bge(void)
{
    hearth_gguf g;
    hearth_vocab v;
    if (open_vocab("vocab/ggml-vocab-bert-bge.gguf", &g, &v))
        return;
    CHECK_EQ_INT(g.n_tensors, 0);
    CHECK_EQ_INT(v.n_tokens, 30522);
    CHECK_EQ_INT(v.cls, 101);
    CHECK_EQ_INT(v.sep, 102);
    CHECK_EQ_INT(v.unk, 100);
    CHECK_EQ_INT(v.pad, 0);
    CHECK_EQ_INT(v.mask, 103);
    CHECK_EQ_INT(v.bos, -1);
    CHECK_EQ_STR(v.model, "bert");
    CHECK_EQ_STR(v.pre, "bert-bge");
    CHECK_EQ_STR(v.text[101], "[CLS]");
    CHECK_EQ_STR(v.text[30521], "\xef\xbd\x9e");
    CHECK_EQ_INT(v.kind[0], HEARTH_TOK_CONTROL);
    CHECK_EQ_INT(v.n_merges, 0);
    hearth_vocab_deinit(&v);
    hearth_gguf_close(&g);
}

static void vocab_phi3(void)
{
    hearth_gguf g;
    hearth_vocab v;
    if (open_vocab("vocab/ggml-vocab-phi-3.gguf", &g, &v))
        return;
    CHECK_EQ_INT(v.n_tokens, 32064);
    CHECK_EQ_INT(v.bos, 1);
    CHECK_EQ_INT(v.eos, 32000);
    CHECK_EQ_INT(v.unk, 0);
    CHECK_EQ_INT(v.pad, 32000);
    CHECK_EQ_INT(v.add_bos, 1);
    CHECK_EQ_INT(v.add_eos, 0);
    CHECK_EQ_INT(v.add_space_prefix, -1);
    CHECK_EQ_STR(v.model, "llama");
    CHECK_EQ_STR(v.pre, "default");
    CHECK_EQ_STR(v.text[32063], "[PAD32063]");
    CHECK_NEAR(v.score[0], -1000.0, 0);
    CHECK_NEAR(v.score[32063], -10000.0, 0);
    CHECK_EQ_INT(v.kind[2], HEARTH_TOK_USER_DEFINED);
    CHECK_EQ_INT(v.kind[32063], HEARTH_TOK_UNKNOWN);
    const char *s;
    size_t n;
    CHECK_EQ_INT(hearth_gguf_get_str(&g, "tokenizer.chat_template", &s, &n, NULL), 0);
    CHECK(n > 15 && memcmp(s, "{{ bos_token }}", 15) == 0);
    hearth_vocab_deinit(&v);
    hearth_gguf_close(&g);
}

static void vocab_gpt2(void)
{
    hearth_gguf g;
    hearth_vocab v;
    if (open_vocab("vocab/ggml-vocab-gpt-2.gguf", &g, &v))
        return;
    CHECK_EQ_INT(v.n_tokens, 50257);
    CHECK_EQ_INT(v.n_merges, 50000);
    CHECK_EQ_INT(v.bos, 50256);
    CHECK_EQ_INT(v.eos, 50256);
    CHECK_EQ_STR(v.model, "gpt2");
    CHECK_EQ_STR(v.pre, "gpt-2");
    CHECK_EQ_STR(v.text[0], "!");
    CHECK_EQ_STR(v.text[50256], "<|endoftext|>");
    CHECK_EQ_STR(v.merges[0], "\xc4\xa0 t");
    CHECK_EQ_STR(v.merges[49999], "\xc4\xa0g azed");
    CHECK_EQ_INT(v.kind[50256], HEARTH_TOK_CONTROL);
    CHECK_EQ_INT(hearth_vocab_find(&v, "<|endoftext|>", 13), 50256);
    hearth_vocab_deinit(&v);
    hearth_gguf_close(&g);
}

int main(void)
{
    RUN(reads_stories260k);
    RUN(refuses_v1);
    RUN(vocab_stories260k);
    RUN(vocab_bert_bge);
    RUN(vocab_phi3);
    RUN(vocab_gpt2);
    TEST_EXIT();
}
