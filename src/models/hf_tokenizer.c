/* hf_tokenizer.c: a sentence-transformers folder's WordPiece tokenizer.
 *
 * tokenizer.json is preferred: it is what the fast tokenizer (and so
 * sentence-transformers) runs, and it holds both the vocab (model.vocab, a
 * token -> id object) and the normalizer's options. The vocab must be dense:
 * ids 0..n-1, each once, else the file is refused naming the token. Without
 * tokenizer.json, vocab.txt is read by hearth_vocab_load_txt and the options
 * come from tokenizer_config.json, with BertTokenizer's defaults.
 *
 * Rejected: other normalizers (a Sequence, NFKC, ...) and subword prefixes
 * other than "##": hearth_wordpiece implements BERT's rules only, so such a
 * file is refused naming the key rather than tokenized differently. */
#include "models/hf_tokenizer.h"

#include "models/hf_json.h"
#include "text/vocab_txt.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PATH_CAP 4096

static void set_specials(hearth_vocab *v, const char *unk)
{
    v->unk = hearth_vocab_find(v, unk, strlen(unk));
    v->cls = hearth_vocab_find(v, "[CLS]", 5);
    v->sep = hearth_vocab_find(v, "[SEP]", 5);
    v->pad = hearth_vocab_find(v, "[PAD]", 5);
    v->mask = hearth_vocab_find(v, "[MASK]", 6);
    snprintf(v->model, sizeof v->model, "bert");
}

static int read_vocab_object(hearth_vocab *v, const cJSON *vocab, const char *path, hearth_err *err)
{
    if (!cJSON_IsObject(vocab))
        return hearth_err_set(err, HEARTH_EINVAL, "%s: key 'model.vocab' is not an object", path);
    int64_t n = 0;
    for (const cJSON *e = vocab->child; e; e = e->next)
        if (++n > HF_VOCAB_MAX)
            return hearth_err_set(err, HEARTH_ELIMIT, "%s: model.vocab has more than %lld tokens", path,
                                  (long long)HF_VOCAB_MAX);
    if (n == 0)
        return hearth_err_set(err, HEARTH_EINVAL, "%s: model.vocab is empty", path);
    int rc = hearth_vocab_init(v, (int32_t)n, err);
    if (rc)
        return rc;
    for (const cJSON *e = vocab->child; e; e = e->next) {
        double id = cJSON_IsNumber(e) ? e->valuedouble : -1;
        if (!(id >= 0 && id < (double)n) || floor(id) != id)
            return hearth_err_set(err, HEARTH_EINVAL, "%s: model.vocab: token '%.64s' has id %s outside [0, %lld)",
                                  path, e->string, cJSON_IsNumber(e) ? "" : "(not a number)", (long long)n);
        if (v->text[(int32_t)id])
            return hearth_err_set(err, HEARTH_EINVAL, "%s: model.vocab: token '%.64s' reuses id %d", path, e->string,
                                  (int)id);
        if ((rc = hearth_vocab_set_token(v, (int32_t)id, e->string, strlen(e->string), err)))
            return rc;
    }
    return hearth_vocab_finish(v, err);
}

static int read_normalizer(const cJSON *norm, const char *path, hearth_wordpiece_opts *o, hearth_err *err)
{
    if (!norm || cJSON_IsNull(norm)) {
        o->clean_text = o->lowercase = o->handle_chinese_chars = false;
        o->strip_accents = 0;
        return HEARTH_OK;
    }
    char type[64];
    int rc = hf_json_str(norm, "type", NULL, path, type, sizeof type, err);
    if (rc)
        return rc;
    if (strcmp(type, "BertNormalizer") != 0)
        return hearth_err_set(err, HEARTH_EUNSUPPORTED, "%s: key 'normalizer.type' is \"%s\"; hearth supports \"BertNormalizer\"",
                              path, type);
    int clean, chinese, lower, strip;
    if ((rc = hf_json_bool(norm, "clean_text", 1, path, &clean, err)) ||
        (rc = hf_json_bool(norm, "handle_chinese_chars", 1, path, &chinese, err)) ||
        (rc = hf_json_bool(norm, "lowercase", 1, path, &lower, err)) ||
        (rc = hf_json_bool(norm, "strip_accents", -1, path, &strip, err)))
        return rc;
    o->clean_text = clean;
    o->handle_chinese_chars = chinese;
    o->lowercase = lower;
    o->strip_accents = strip;
    return HEARTH_OK;
}

static int read_tokenizer_json(hearth_hf_folder *f, const cJSON *root, const char *path, hearth_err *err)
{
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    if (!cJSON_IsObject(model))
        return hearth_err_set(err, HEARTH_EINVAL, "%s: key 'model' is missing or not an object", path);
    char type[64], prefix[16], unk[64];
    int rc;
    if ((rc = hf_json_str(model, "type", "WordPiece", path, type, sizeof type, err)))
        return rc;
    if (strcmp(type, "WordPiece") != 0)
        return hearth_err_set(err, HEARTH_EUNSUPPORTED, "%s: key 'model.type' is \"%s\"; hearth supports \"WordPiece\"",
                              path, type);
    if ((rc = hf_json_str(model, "continuing_subword_prefix", "##", path, prefix, sizeof prefix, err)) ||
        (rc = hf_json_str(model, "unk_token", "[UNK]", path, unk, sizeof unk, err)))
        return rc;
    if (strcmp(prefix, "##") != 0)
        return hearth_err_set(err, HEARTH_EUNSUPPORTED,
                              "%s: key 'model.continuing_subword_prefix' is \"%s\"; hearth supports \"##\"", path, prefix);
    int64_t max_chars;
    if ((rc = hf_json_int(model, "max_input_chars_per_word", false, 100, 1, HEARTH_WORDPIECE_MAX_WORD_CHARS, path,
                          &max_chars, err)))
        return rc;
    f->wp_opts.max_input_chars_per_word = (int)max_chars;
    const cJSON *pre = cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer");
    if (pre && !cJSON_IsNull(pre)) {
        char pt[64];
        if ((rc = hf_json_str(pre, "type", NULL, path, pt, sizeof pt, err)))
            return rc;
        if (strcmp(pt, "BertPreTokenizer") != 0)
            return hearth_err_set(err, HEARTH_EUNSUPPORTED,
                                  "%s: key 'pre_tokenizer.type' is \"%s\"; hearth supports \"BertPreTokenizer\"", path, pt);
    }
    if ((rc = read_normalizer(cJSON_GetObjectItemCaseSensitive(root, "normalizer"), path, &f->wp_opts, err)) ||
        (rc = read_vocab_object(&f->vocab, cJSON_GetObjectItemCaseSensitive(model, "vocab"), path, err)))
        return rc;
    set_specials(&f->vocab, unk);
    snprintf(f->vocab_source, sizeof f->vocab_source, "tokenizer.json");
    return HEARTH_OK;
}

/* tokenizer_config.json's options into f->wp_opts (BertTokenizer's defaults
 * when absent) and model_max_length. */
static int read_tokenizer_config(hearth_hf_folder *f, int64_t *model_max_length, hearth_err *err)
{
    char path[PATH_CAP];
    cJSON *root;
    *model_max_length = 0;
    int rc = hf_json_read(f->dir, "tokenizer_config.json", HF_CONFIG_MAX_BYTES, true, path, sizeof path, &root, err);
    if (rc || !root)
        return rc;
    int lower, strip, chinese;
    if ((rc = hf_json_bool(root, "do_lower_case", 1, path, &lower, err)) ||
        (rc = hf_json_bool(root, "strip_accents", -1, path, &strip, err)) ||
        (rc = hf_json_bool(root, "tokenize_chinese_chars", 1, path, &chinese, err)))
        goto done;
    f->wp_opts.lowercase = lower;
    f->wp_opts.strip_accents = strip;
    f->wp_opts.handle_chinese_chars = chinese;
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(root, "model_max_length");
    if (cJSON_IsNumber(m) && m->valuedouble >= 2 && m->valuedouble <= (double)(1 << 20) &&
        floor(m->valuedouble) == m->valuedouble)
        *model_max_length = (int64_t)m->valuedouble;
done:
    cJSON_Delete(root);
    return rc;
}

int hf_tokenizer_load(hearth_hf_folder *f, int64_t *model_max_length, hearth_err *err)
{
    char path[PATH_CAP];
    hearth_wordpiece_opts_default(&f->wp_opts);
    int rc = read_tokenizer_config(f, model_max_length, err);
    if (rc)
        return rc;
    cJSON *root;
    if ((rc = hf_json_read(f->dir, "tokenizer.json", HF_TOKENIZER_MAX_BYTES, true, path, sizeof path, &root, err)))
        return rc;
    if (root) {
        rc = read_tokenizer_json(f, root, path, err);
        cJSON_Delete(root);
    } else {
        snprintf(path, sizeof path, "%s/vocab.txt", f->dir);
        hearth_err local = {0};
        rc = hearth_vocab_load_txt(&f->vocab, path, &local);
        if (rc == HEARTH_EIO && local.sys == ENOENT)
            return hearth_err_set(err, HEARTH_ENOTFOUND, "%s: no tokenizer.json or vocab.txt", f->dir);
        if (rc)
            return hearth_err_set(err, rc, "%s", local.msg);
        snprintf(f->vocab_source, sizeof f->vocab_source, "vocab.txt");
    }
    if (rc)
        return rc;
    if (f->vocab.n_tokens > f->config.vocab_size)
        return hearth_err_set(err, HEARTH_EINVAL, "%s/%s: %d tokens but config.json's vocab_size is %lld", f->dir,
                              f->vocab_source, (int)f->vocab.n_tokens, (long long)f->config.vocab_size);
    hearth_wordpiece wp;
    if ((rc = hearth_wordpiece_init(&wp, &f->vocab, &f->wp_opts, err)))
        hearth_err_prefix(err, "%s/%s", f->dir, f->vocab_source);
    return rc;
}
