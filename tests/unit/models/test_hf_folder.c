/* Unit tests for the sentence-transformers folder loader (src/models/hf_*.c)
 * and the demo folder writer (src/models/bert_demo.c).
 *
 * Demo folders are written to a mkdtemp folder and loaded back; the expected
 * values are the shape the test asked for, the bert-base-uncased ids of
 * well-known words, and weights recomputed by a Python script from the PRNG
 * description in bert_demo.h (not by the C code under test). Bad configs are
 * handcrafted text, one per failure, each checked for the code and for a
 * message naming the file and the key. */
#include "harness.h"

#include "models/bert_demo.h"
#include "models/hf_folder.h"

#include <ftw.h>
#include <unistd.h>

static char root[] = "/tmp/hearth-hf-XXXXXX";

static void small_shape(hearth_bert_demo_shape *s)
{
    *s = (hearth_bert_demo_shape){
        .vocab_size = 300, .hidden_size = 32, .num_hidden_layers = 2, .num_attention_heads = 4,
        .intermediate_size = 64, .max_position_embeddings = 64, .type_vocab_size = 2, .layer_norm_eps = 1e-12f,
        .max_seq_len = 48, .tokenizer_json = true, .pooling = HEARTH_POOL_MEAN, .normalize = true,
    };
}

static const char *sub(const char *name)
{
    static char path[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(path[k], sizeof path[k], "%s/%s", root, name);
    return path[k];
}

static void put(const char *dir, const char *file, const char *text, size_t len)
{
    char path[600];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (f) {
        CHECK_EQ_INT(fwrite(text, 1, len, f), len);
        fclose(f);
    }
}

static int open_ok(hearth_hf_folder *f, const char *dir)
{
    hearth_err e = {0};
    int rc = hearth_hf_folder_open(f, dir, &e);
    CHECK_MSG(rc == HEARTH_OK, "%s", e.msg);
    return rc;
}

static void check_tensors(const hearth_hf_folder *f, const hearth_bert_demo_shape *s)
{
    hearth_err e = {0};
    const hearth_st_tensor *t;
    int64_t h = s->hidden_size, ff = s->intermediate_size;
    int64_t emb[2] = {s->vocab_size, h}, pos[2] = {s->max_position_embeddings, h}, typ[2] = {s->type_vocab_size, h};
    CHECK_MSG(hearth_hf_folder_tensor(f, "embeddings.word_embeddings.weight", 2, emb, &t, &e) == 0, "%s", e.msg);
    CHECK_MSG(hearth_hf_folder_tensor(f, "embeddings.position_embeddings.weight", 2, pos, &t, &e) == 0, "%s", e.msg);
    CHECK_MSG(hearth_hf_folder_tensor(f, "embeddings.token_type_embeddings.weight", 2, typ, &t, &e) == 0, "%s", e.msg);
    CHECK_MSG(hearth_hf_folder_tensor(f, "embeddings.LayerNorm.weight", 1, &h, &t, &e) == 0, "%s", e.msg);
    for (int l = 0; l < s->num_hidden_layers; l++) {
        struct {
            const char *n;
            int64_t out, in;
        } lin[] = {{"attention.self.query", h, h},   {"attention.self.key", h, h},
                   {"attention.self.value", h, h},   {"attention.output.dense", h, h},
                   {"intermediate.dense", ff, h},    {"output.dense", h, ff}};
        for (size_t i = 0; i < 6; i++) {
            char name[128];
            int64_t w[2] = {lin[i].out, lin[i].in};
            snprintf(name, sizeof name, "encoder.layer.%d.%s.weight", l, lin[i].n);
            CHECK_MSG(hearth_hf_folder_tensor(f, name, 2, w, &t, &e) == 0, "%s", e.msg);
            float v[4096];
            if (t && w[0] * w[1] <= 4096 && hearth_st_read_f32(t, 0, w[0] * w[1], v) == 0) {
                float a = 1.0f / sqrtf((float)w[1]);
                for (int64_t k = 0; k < w[0] * w[1]; k++)
                    CHECK(v[k] >= -a && v[k] < a);
            }
            snprintf(name, sizeof name, "encoder.layer.%d.%s.bias", l, lin[i].n);
            CHECK_MSG(hearth_hf_folder_tensor(f, name, 1, &lin[i].out, &t, &e) == 0, "%s", e.msg);
        }
        const char *ln[2] = {"attention.output.LayerNorm", "output.LayerNorm"};
        for (int i = 0; i < 2; i++) {
            char name[128];
            snprintf(name, sizeof name, "encoder.layer.%d.%s.weight", l, ln[i]);
            CHECK_MSG(hearth_hf_folder_tensor(f, name, 1, &h, &t, &e) == 0, "%s", e.msg);
            float v[64];
            if (t && h <= 64 && hearth_st_read_f32(t, 0, h, v) == 0)
                for (int64_t k = 0; k < h; k++)
                    CHECK(v[k] >= 0.9f && v[k] < 1.1f);
            snprintf(name, sizeof name, "encoder.layer.%d.%s.bias", l, ln[i]);
            CHECK_MSG(hearth_hf_folder_tensor(f, name, 1, &h, &t, &e) == 0, "%s", e.msg);
        }
    }
    /* 16 per layer + 5 embedding tensors, nothing else */
    CHECK_EQ_INT(f->st.n_tensors, 5 + 16 * s->num_hidden_layers);
}

/* The first values of a tensor as Python computes them from bert_demo.h. */
static int python_values(uint64_t seed, const char *name, double a, double base, int n, double *out)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 -c '\n"
             "M=(1<<64)-1\n"
             "h=0xcbf29ce484222325\n"
             "for c in b\"%s\": h=((h^c)*0x100000001b3)&M\n"
             "s=%llu^h\n"
             "for i in range(%d):\n"
             "  s=(s+0x9e3779b97f4a7c15)&M; z=s\n"
             "  z=((z^(z>>30))*0xbf58476d1ce4e5b9)&M; z=((z^(z>>27))*0x94d049bb133111eb)&M; z^=z>>31\n"
             "  print(repr(%.17g+(2*(z>>40)/2**24-1)*%.17g))\n'",
             name, (unsigned long long)seed, n, base, a);
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    int k = 0;
    while (k < n && fscanf(p, "%lf", &out[k]) == 1)
        k++;
    pclose(p);
    return k == n ? 0 : -1;
}

static void demo_round_trip(void)
{
    hearth_bert_demo_shape s;
    small_shape(&s);
    hearth_err e = {0};
    int rc = hearth_bert_demo_write(sub("plain"), &s, 42, &e);
    CHECK_MSG(rc == 0, "%s", e.msg);
    hearth_hf_folder f;
    if (rc || open_ok(&f, sub("plain")))
        return;
    CHECK_EQ_STR(f.config.model_type, "bert");
    CHECK_EQ_STR(f.config.hidden_act, "gelu");
    CHECK_EQ_INT(f.config.vocab_size, 300);
    CHECK_EQ_INT(f.config.hidden_size, 32);
    CHECK_EQ_INT(f.config.num_hidden_layers, 2);
    CHECK_EQ_INT(f.config.num_attention_heads, 4);
    CHECK_EQ_INT(f.config.intermediate_size, 64);
    CHECK_EQ_INT(f.config.max_position_embeddings, 64);
    CHECK_EQ_INT(f.config.type_vocab_size, 2);
    CHECK_NEAR(f.config.layer_norm_eps, 1e-12, 1e-18);
    CHECK_EQ_INT(f.pooling, HEARTH_POOL_MEAN);
    CHECK(f.normalize);
    CHECK_EQ_INT(f.max_seq_len, 48);
    CHECK_EQ_STR(f.prefix, "");
    CHECK_EQ_STR(f.vocab_source, "tokenizer.json");
    CHECK_EQ_INT(f.vocab.n_tokens, 300);
    CHECK_EQ_INT(f.vocab.pad, 0);
    CHECK_EQ_INT(f.vocab.unk, 1);
    CHECK_EQ_INT(f.vocab.cls, 2);
    CHECK_EQ_INT(f.vocab.sep, 3);
    CHECK_EQ_INT(f.vocab.mask, 4);
    CHECK(f.wp_opts.lowercase && f.wp_opts.clean_text && f.wp_opts.handle_chinese_chars);
    CHECK_EQ_INT(f.wp_opts.strip_accents, -1);
    CHECK_EQ_INT(f.wp_opts.max_input_chars_per_word, 100);
    CHECK_EQ_STR(hearth_st_meta(&f.st, "format"), "pt");
    check_tensors(&f, &s);
    /* weights against the Python reference of the documented PRNG */
    const hearth_st_tensor *t = hearth_st_find(&f.st, "encoder.layer.1.intermediate.dense.weight");
    double want[6];
    float got[6];
    CHECK(t && hearth_st_read_f32(t, 0, 6, got) == 0);
    CHECK(python_values(42, "encoder.layer.1.intermediate.dense.weight", 1.0 / sqrt(32.0), 0, 6, want) == 0);
    for (int i = 0; t && i < 6; i++)
        CHECK_NEAR(got[i], want[i], 1e-7);
    t = hearth_st_find(&f.st, "embeddings.LayerNorm.weight");
    CHECK(t && hearth_st_read_f32(t, 0, 6, got) == 0);
    CHECK(python_values(42, "embeddings.LayerNorm.weight", 0.1, 1.0, 6, want) == 0);
    for (int i = 0; t && i < 6; i++)
        CHECK_NEAR(got[i], want[i], 1e-7);
    hearth_hf_folder_close(&f);

    /* the same folder without tokenizer.json: vocab.txt + tokenizer_config.json */
    unlink(sub("plain/tokenizer.json"));
    if (open_ok(&f, sub("plain")))
        return;
    CHECK_EQ_STR(f.vocab_source, "vocab.txt");
    CHECK_EQ_INT(f.vocab.n_tokens, 300);
    CHECK_EQ_INT(f.vocab.cls, 2);
    CHECK_EQ_INT(hearth_vocab_find(&f.vocab, "##a", 3), 5 + 94 + ('a' - 33));
    CHECK(f.wp_opts.lowercase && f.wp_opts.handle_chinese_chars);
    hearth_hf_folder_close(&f);
}

static void prefix_bert(void)
{
    hearth_bert_demo_shape s;
    small_shape(&s);
    s.tensor_prefix = "bert.";
    s.pooling = HEARTH_POOL_CLS;
    s.normalize = false;
    hearth_err e = {0};
    CHECK_MSG(hearth_bert_demo_write(sub("prefixed"), &s, 42, &e) == 0, "%s", e.msg);
    small_shape(&s);
    CHECK_MSG(hearth_bert_demo_write(sub("bare"), &s, 42, &e) == 0, "%s", e.msg);
    hearth_hf_folder f, g;
    if (open_ok(&f, sub("prefixed")))
        return;
    CHECK_EQ_STR(f.prefix, "bert.");
    CHECK_EQ_INT(f.pooling, HEARTH_POOL_CLS);
    CHECK(!f.normalize);
    CHECK(hearth_st_find(&f.st, "bert.encoder.layer.0.output.dense.weight") != NULL);
    s.tensor_prefix = "bert.";
    check_tensors(&f, &s);
    /* the streams are keyed by the unprefixed name: same weights */
    if (open_ok(&g, sub("bare")) == 0) {
        const hearth_st_tensor *a, *b;
        CHECK(hearth_hf_folder_tensor(&f, "encoder.layer.1.output.dense.weight", -1, NULL, &a, &e) == 0);
        CHECK(hearth_hf_folder_tensor(&g, "encoder.layer.1.output.dense.weight", -1, NULL, &b, &e) == 0);
        CHECK(a && b && a->nbytes == b->nbytes && memcmp(a->data, b->data, a->nbytes) == 0);
        hearth_hf_folder_close(&g);
    }
    hearth_hf_folder_close(&f);
}

/* The real bert-base-uncased vocab, through tokenizer.json and vocab.txt:
 * "hello world" is [7592, 2088] in that vocab (its well-known ids). */
static void real_vocab(void)
{
    char vocab[512];
    if (!hearth_test_shared_path(vocab, sizeof vocab, "vocab/bert-base-uncased-vocab.txt"))
        return;
    hearth_bert_demo_shape s;
    small_shape(&s);
    s.vocab_size = 30522;
    s.vocab_path = vocab;
    hearth_err e = {0};
    CHECK_MSG(hearth_bert_demo_write(sub("real"), &s, 7, &e) == 0, "%s", e.msg);
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1)
            unlink(sub("real/tokenizer.json"));
        hearth_hf_folder f;
        if (open_ok(&f, sub("real")))
            return;
        CHECK_EQ_STR(f.vocab_source, pass ? "vocab.txt" : "tokenizer.json");
        CHECK_EQ_INT(f.vocab.n_tokens, 30522);
        CHECK_EQ_INT(f.vocab.cls, 101);
        CHECK_EQ_INT(f.vocab.sep, 102);
        CHECK_EQ_INT(f.vocab.unk, 100);
        hearth_wordpiece wp;
        hearth_ids ids;
        hearth_ids_init(&ids, 64);
        CHECK(hearth_wordpiece_init(&wp, &f.vocab, &f.wp_opts, &e) == 0);
        CHECK(hearth_wordpiece_encode(&wp, "Hello World", 11, &ids, &e) == 0);
        CHECK(ids.n == 2 && ids.v[0] == 7592 && ids.v[1] == 2088);
        hearth_ids_deinit(&ids);
        hearth_hf_folder_close(&f);
    }
    /* vocab_size smaller than the vocab file: refused */
    s.vocab_size = 1000;
    CHECK_EQ_INT(hearth_bert_demo_write(sub("real_small"), &s, 7, &e), HEARTH_EINVAL);
    CHECK(strstr(e.msg, "bert-base-uncased-vocab.txt") && strstr(e.msg, "vocab_size 1000"));
}

static void minilm_preset(void)
{
    hearth_bert_demo_shape s;
    hearth_bert_demo_shape_minilm(&s);
    /* all-MiniLM-L6-v2's published config.json values */
    CHECK(s.num_hidden_layers == 6 && s.hidden_size == 384 && s.num_attention_heads == 12 &&
          s.intermediate_size == 1536 && s.vocab_size == 30522 && s.max_position_embeddings == 512 &&
          s.type_vocab_size == 2 && s.layer_norm_eps == 1e-12f && s.max_seq_len == 256);
    hearth_err e = {0};
    CHECK_MSG(hearth_bert_demo_write(sub("minilm"), &s, 1, &e) == 0, "%s", e.msg);
    hearth_hf_folder f;
    if (open_ok(&f, sub("minilm")))
        return;
    CHECK_EQ_INT(f.max_seq_len, 256);
    CHECK_EQ_INT(f.st.n_tensors, 5 + 16 * 6);
    CHECK_EQ_INT(f.st.map.size >= (size_t)(30522 + 512 + 2) * 384 * 4, 1);
    hearth_hf_folder_close(&f);
}

/* config.json text: code and the key the message must name */
static void bad_config(const char *json, int code, const char *key)
{
    hearth_bert_config c;
    hearth_err e = {0};
    int rc = hearth_bert_config_parse(&c, json, strlen(json), "x/config.json", &e);
    CHECK_MSG(rc == code, "got %d (%s), want %d", rc, e.msg, code);
    CHECK_MSG(strstr(e.msg, "x/config.json") && strstr(e.msg, key), "message lacks '%s': %s", key, e.msg);
}

#define GOOD_KEYS "\"vocab_size\":10,\"num_hidden_layers\":1,\"intermediate_size\":8,\"max_position_embeddings\":8"

static void bad_configs(void)
{
    bad_config("{\"model_type\":\"bert\",\"num_attention_heads\":2," GOOD_KEYS "}", HEARTH_ENOTFOUND,
               "'hidden_size' is missing");
    bad_config("{\"model_type\":\"bert\",\"hidden_size\":30,\"num_attention_heads\":4," GOOD_KEYS "}", HEARTH_EINVAL,
               "'num_attention_heads' (4) does not divide 'hidden_size' (30)");
    /* heads of 2048: past what the attention keeps on its stack (1024 is taken) */
    bad_config("{\"model_type\":\"bert\",\"hidden_size\":4096,\"num_attention_heads\":2," GOOD_KEYS "}",
               HEARTH_EUNSUPPORTED, "'num_attention_heads' (2) makes heads of 2048");
    bad_config("{\"model_type\":\"bert\",\"hidden_size\":8,\"num_attention_heads\":2,\"hidden_act\":\"relu\"," GOOD_KEYS
               "}",
               HEARTH_EUNSUPPORTED, "'hidden_act' is \"relu\"");
    bad_config("{\"model_type\":\"roberta\"}", HEARTH_EUNSUPPORTED, "'model_type'");
    bad_config("{\"hidden_size\":8}", HEARTH_ENOTFOUND, "'model_type' is missing");
    bad_config("{\"model_type\":\"bert\",\"hidden_size\":-8,\"num_attention_heads\":2," GOOD_KEYS "}", HEARTH_EINVAL,
               "'hidden_size' is -8");
    bad_config("{\"model_type\":\"bert\",\"hidden_size\":8.5,\"num_attention_heads\":2," GOOD_KEYS "}", HEARTH_EINVAL,
               "'hidden_size' is not an integer");
    bad_config("{\"model_type\":\"bert\",\"hidden_size\":8,\"num_attention_heads\":2,\"layer_norm_eps\":0," GOOD_KEYS
               "}",
               HEARTH_EINVAL, "'layer_norm_eps'");
    bad_config("{\"model_type\":\"bert\",\"hidden_size\":8,\"num_attention_heads\":2,"
               "\"position_embedding_type\":\"relative_key\"," GOOD_KEYS "}",
               HEARTH_EUNSUPPORTED, "'position_embedding_type'");
    bad_config("{\"model_type\":\"bert\",", HEARTH_EINVAL, "invalid JSON");
}

/* A demo folder with one file replaced: code and what the message must name. */
static void bad_folder(const char *name, const char *file, const char *text, size_t len, int code,
                       const char *n1, const char *n2)
{
    hearth_bert_demo_shape s;
    small_shape(&s);
    hearth_err e = {0};
    const char *dir = sub(name);
    CHECK_MSG(hearth_bert_demo_write(dir, &s, 3, &e) == 0, "%s", e.msg);
    char path[600];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    if (text)
        put(dir, file, text, len ? len : strlen(text));
    else
        unlink(path);
    hearth_hf_folder f;
    int rc = hearth_hf_folder_open(&f, dir, &e);
    CHECK_MSG(rc == code, "%s: got %d (%s), want %d", name, rc, e.msg, code);
    CHECK_MSG(strstr(e.msg, n1) && strstr(e.msg, n2), "%s: message lacks '%s' or '%s': %s", name, n1, n2, e.msg);
    if (getenv("HEARTH_TEST_VERBOSE"))
        fprintf(stderr, "  %s\n", e.msg);
    hearth_hf_folder_close(&f);
}

static void bad_folders(void)
{
    bad_folder("f_config", "config.json",
               "{\"model_type\":\"bert\",\"hidden_size\":32,\"num_attention_heads\":4,\"hidden_act\":\"gelu_new\"," GOOD_KEYS "}", 0, HEARTH_EUNSUPPORTED, "f_config/config.json", "'hidden_act'");
    bad_folder("f_pool", "1_Pooling/config.json", "{\"pooling_mode_max_tokens\":true}", 0, HEARTH_EUNSUPPORTED,
               "1_Pooling/config.json", "'pooling_mode_max_tokens'");
    bad_folder("f_pool2", "1_Pooling/config.json",
               "{\"pooling_mode_cls_token\":true,\"pooling_mode_mean_tokens\":true}", 0, HEARTH_EUNSUPPORTED,
               "1_Pooling/config.json", "concatenated");
    bad_folder("f_dense", "modules.json",
               "[{\"idx\":0,\"path\":\"\",\"type\":\"sentence_transformers.models.Transformer\"},"
               "{\"idx\":1,\"path\":\"2_Dense\",\"type\":\"sentence_transformers.models.Dense\"}]", 0, HEARTH_EUNSUPPORTED, "modules.json", "models.Dense");
    bad_folder("f_escape", "modules.json",
               "[{\"idx\":1,\"path\":\"../../etc\",\"type\":\"sentence_transformers.models.Pooling\"}]", 0, HEARTH_EINVAL,
               "modules.json", "not inside the folder");
    bad_folder("f_tok", "tokenizer.json", "{\"model\":{\"type\":\"WordPiece\",\"vocab\":{\"[UNK]\":0,\"a\":0}}}", 0, HEARTH_EINVAL, "tokenizer.json", "reuses id 0");
    bad_folder("f_tok2", "tokenizer.json", "{\"model\":{\"type\":\"BPE\",\"vocab\":{}}}", 0, HEARTH_EUNSUPPORTED,
               "tokenizer.json", "'model.type'");
    bad_folder("f_tok3", "tokenizer.json",
               "{\"normalizer\":{\"type\":\"Sequence\"},\"model\":{\"type\":\"WordPiece\",\"vocab\":{\"[UNK]\":0}}}", 0, HEARTH_EUNSUPPORTED, "tokenizer.json", "'normalizer.type'");
    bad_folder("f_nounk", "tokenizer.json", "{\"model\":{\"type\":\"WordPiece\",\"vocab\":{\"a\":0}}}", 0, HEARTH_EINVAL, "f_nounk/tokenizer.json", "UNK");
    bad_folder("f_seq", "sentence_bert_config.json", "{\"max_seq_length\":100000}", 0, HEARTH_EINVAL,
               "sentence_bert_config.json", "'max_seq_length'");
    bad_folder("f_prompts", "config_sentence_transformers.json", "{\"prompts\":[\"query: \"]}", 0, HEARTH_EINVAL,
               "config_sentence_transformers.json", "'prompts' is not an object");
    bad_folder("f_prompt", "config_sentence_transformers.json", "{\"prompts\":{\"query\":1}}", 0, HEARTH_EINVAL,
               "config_sentence_transformers.json", "prompt 'query' is not a string");
    {
        /* 33 prompts (one past HEARTH_HF_MAX_PROMPTS), a name of 64 bytes, a text of 4097 */
        char many[33 * 24 + 32], name[128], text[4200];
        size_t at = (size_t)snprintf(many, sizeof many, "{\"prompts\":{");
        for (int i = 0; i < 33; i++)
            at += (size_t)snprintf(many + at, sizeof many - at, "%s\"p%d\":\"x\"", i ? "," : "", i);
        snprintf(many + at, sizeof many - at, "}}");
        bad_folder("f_prompt_many", "config_sentence_transformers.json", many, 0, HEARTH_EUNSUPPORTED,
                   "config_sentence_transformers.json", "more than 32 prompts");
        snprintf(name, sizeof name, "{\"prompts\":{\"%064d\":\"x\"}}", 0);
        bad_folder("f_prompt_name", "config_sentence_transformers.json", name, 0, HEARTH_EINVAL,
                   "config_sentence_transformers.json", "name is 64 bytes");
        at = (size_t)snprintf(text, sizeof text, "{\"prompts\":{\"q\":\"");
        memset(text + at, 'a', 4097);
        snprintf(text + at + 4097, sizeof text - at - 4097, "\"}}");
        bad_folder("f_prompt_text", "config_sentence_transformers.json", text, 0, HEARTH_EINVAL,
                   "config_sentence_transformers.json", "4097 bytes");
    }
    bad_folder("f_prompt_def", "config_sentence_transformers.json",
               "{\"prompts\":{\"query\":\"q: \"},\"default_prompt_name\":\"passage\"}", 0, HEARTH_EINVAL,
               "config_sentence_transformers.json", "'passage' is not one of the prompts");
    bad_folder("f_weights", "model.safetensors", NULL, 0, HEARTH_EIO, "f_weights/model.safetensors", "cannot open");
    bad_folder("f_notensor", "model.safetensors", "\x02\0\0\0\0\0\0\0{}", 10, HEARTH_ENOTFOUND, "model.safetensors",
               "embeddings.word_embeddings.weight");
}

/* config_sentence_transformers.json's prompts and default, as
 * sentence-transformers writes them; absent: none. */
static void prompts(void)
{
    hearth_bert_demo_shape s;
    small_shape(&s);
    hearth_err e = {0};
    const char *dir = sub("prompts");
    CHECK_MSG(hearth_bert_demo_write(dir, &s, 3, &e) == 0, "%s", e.msg);
    hearth_hf_folder f;
    CHECK_MSG(hearth_hf_folder_open(&f, dir, &e) == 0, "%s", e.msg);
    CHECK_EQ_INT(f.n_prompts, 0);
    CHECK_EQ_INT(f.default_prompt, -1);
    hearth_hf_folder_close(&f);
    const char *cfg = "{\"__version__\":{\"sentence_transformers\":\"3.0.1\"},"
                      "\"prompts\":{\"query\":\"query: \",\"passage\":\"passage: \"},"
                      "\"default_prompt_name\":\"passage\",\"similarity_fn_name\":\"cosine\"}";
    put(dir, "config_sentence_transformers.json", cfg, strlen(cfg));
    CHECK_MSG(hearth_hf_folder_open(&f, dir, &e) == 0, "%s", e.msg);
    CHECK_EQ_INT(f.n_prompts, 2);
    if (f.n_prompts == 2) {
        CHECK_EQ_STR(f.prompts[0].name, "query");
        CHECK_EQ_STR(f.prompts[0].text, "query: ");
        CHECK_EQ_INT(f.prompts[0].len, 7);
        CHECK_EQ_STR(f.prompts[1].name, "passage");
        CHECK_EQ_INT(f.default_prompt, 1);
    }
    hearth_hf_folder_close(&f);
}

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    return remove(p);
}

int main(void)
{
    if (!mkdtemp(root)) {
        perror("mkdtemp");
        return 1;
    }
    RUN(demo_round_trip);
    RUN(prefix_bert);
    RUN(real_vocab);
    RUN(minilm_preset);
    RUN(bad_configs);
    RUN(bad_folders);
    RUN(prompts);
    nftw(root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    TEST_EXIT();
}
