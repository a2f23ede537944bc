/* fuzz_hf_json: the JSON (and vocab.txt) files of a Hugging Face
 * sentence-transformers folder, from fuzz bytes. A model folder comes from a
 * download, so each of its files is untrusted input: the loader must open it
 * or refuse it with a message naming the folder, never crash, leak or read
 * past a file.
 *
 * Each input is parsed two ways:
 *   - the whole input as config.json text through hearth_bert_config_parse,
 *     from an exactly-sized copy (no NUL after it), so a read past its
 *     length is caught by ASan;
 *   - byte 0 picks one file of a small demo folder (written once, at
 *     start, into a temporary folder by hearth_bert_demo_write) and the rest
 *     replaces that file: config.json, modules.json, 1_Pooling/config.json,
 *     sentence_bert_config.json, config_sentence_transformers.json,
 *     tokenizer.json, tokenizer_config.json, or vocab.txt (in a second
 *     folder that has no tokenizer.json, so vocab.txt is what is read). The
 *     folder is then opened with hearth_hf_folder_open, which reads every
 *     file in order, and the file is put back.
 * Checked: a successful open gives a consistent folder (sizes in range, the
 * sequence limit within the positions, prompts within their limits, a
 * default prompt that exists); a failure has a message naming the folder.
 * Rejected: calling the static per-file readers directly (they would have
 * to be exported for the fuzzer only; going through the folder also covers
 * the order in which one file's values bound the next). */
#include "models/bert_demo.h"
#include "models/hf_folder.h"

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const files[] = {
    "config.json",      "modules.json",          "1_Pooling/config.json", "sentence_bert_config.json",
    "config_sentence_transformers.json", "tokenizer.json", "tokenizer_config.json", "vocab.txt",
};
#define N_FILES (sizeof files / sizeof files[0])

static char root[] = "/tmp/hearth-fuzz-hf-XXXXXX";
static char dir_json[256], dir_txt[256];
/* each file's original bytes, to put back after an input replaced it */
static char *orig[N_FILES];
static size_t orig_len[N_FILES];

static const char *folder_of(size_t i)
{
    return i == N_FILES - 1 ? dir_txt : dir_json;
}

static int write_file(const char *path, const void *d, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    size_t w = fwrite(d, 1, n, f);
    return fclose(f) == 0 && w == n ? 0 : -1;
}

static char *read_file(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *d = malloc(1 << 20);
    *n = d ? fread(d, 1, 1 << 20, f) : 0;
    fclose(f);
    return d;
}

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    return remove(p);
}

static void cleanup(void)
{
    nftw(root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    if (!mkdtemp(root))
        abort();
    atexit(cleanup);
    snprintf(dir_json, sizeof dir_json, "%s/json", root);
    snprintf(dir_txt, sizeof dir_txt, "%s/txt", root);
    hearth_bert_demo_shape s = {
        .vocab_size = 120, .hidden_size = 8, .num_hidden_layers = 1, .num_attention_heads = 2,
        .intermediate_size = 16, .max_position_embeddings = 32, .type_vocab_size = 2, .layer_norm_eps = 1e-12f,
        .max_seq_len = 24, .tokenizer_json = true, .pooling = HEARTH_POOL_MEAN, .normalize = true,
    };
    hearth_err e = {0};
    if (hearth_bert_demo_write(dir_json, &s, 1, &e))
        abort();
    s.tokenizer_json = false;
    if (hearth_bert_demo_write(dir_txt, &s, 1, &e))
        abort();
    /* config_sentence_transformers.json is optional and not written by the
     * demo: start from one with prompts, so they are reached too */
    static const char prompts[] = "{\"prompts\":{\"query\":\"query: \",\"passage\":\"passage: \"},"
                                  "\"default_prompt_name\":\"query\"}";
    char path[512];
    snprintf(path, sizeof path, "%s/config_sentence_transformers.json", dir_json);
    if (write_file(path, prompts, sizeof prompts - 1))
        abort();
    for (size_t i = 0; i < N_FILES; i++) {
        snprintf(path, sizeof path, "%s/%s", folder_of(i), files[i]);
        if (!(orig[i] = read_file(path, &orig_len[i])))
            abort();
    }
    return 0;
}

static void check_open(const char *dir)
{
    hearth_hf_folder f;
    hearth_err e = {0};
    int rc = hearth_hf_folder_open(&f, dir, &e);
    if (rc != HEARTH_OK) {
        if (!e.msg[0] || !strstr(e.msg, dir))
            abort();
        return;
    }
    const hearth_bert_config *c = &f.config;
    if (c->hidden_size < 1 || c->num_attention_heads < 1 || c->hidden_size % c->num_attention_heads ||
        c->vocab_size < f.vocab.n_tokens || f.max_seq_len < 2 || f.max_seq_len > c->max_position_embeddings ||
        f.n_prompts < 0 || f.n_prompts > HEARTH_HF_MAX_PROMPTS || f.default_prompt >= f.n_prompts)
        abort();
    for (int i = 0; i < f.n_prompts; i++)
        if (!f.prompts[i].text || strlen(f.prompts[i].text) != f.prompts[i].len ||
            f.prompts[i].len > HEARTH_HF_PROMPT_TEXT_MAX)
            abort();
    hearth_hf_folder_close(&f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *copy = malloc(size ? size : 1);
    if (!copy)
        return 0;
    memcpy(copy, data, size);
    hearth_bert_config c;
    hearth_err e = {0};
    if (hearth_bert_config_parse(&c, copy, size, "fuzz/config.json", &e) != HEARTH_OK &&
        (!e.msg[0] || !strstr(e.msg, "fuzz/config.json")))
        abort();
    free(copy);
    if (size < 1)
        return 0;

    size_t i = data[0] % N_FILES;
    char path[512];
    snprintf(path, sizeof path, "%s/%s", folder_of(i), files[i]);
    if (write_file(path, data + 1, size - 1))
        abort();
    check_open(folder_of(i));
    if (write_file(path, orig[i], orig_len[i]))
        abort();
    return 0;
}
