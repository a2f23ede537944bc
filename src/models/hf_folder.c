/* hf_folder.c: opening a sentence-transformers folder: config.json, the
 * module list, pooling, the sequence length, the weights and their prefix.
 * The tokenizer files are read by hf_tokenizer.c.
 *
 * How: each file is read whole and parsed with cJSON (hf_json.c), values are
 * range-checked as they are read, and unsupported settings are refused here,
 * at load, naming the key, rather than giving wrong embeddings later. The
 * tensor-name prefix is found by probing for the word embeddings under "",
 * "bert." and "model." (transformers saves BertModel bare, BertFor* with
 * "bert.", some exporters with "model.").
 *
 * Rejected: BertConfig's default for every key (a config without
 * hidden_size is a broken download, not a request for 768); following the
 * module list's paths outside the folder (a path with ".." or a leading "/"
 * is refused). */
#include "models/hf_folder.h"

#include "models/hf_json.h"
#include "models/hf_tokenizer.h"

#include "engine/dev.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PATH_CAP 4096

int hearth_bert_config_parse(hearth_bert_config *c, const char *json, size_t len, const char *path,
                             hearth_err *err)
{
    memset(c, 0, sizeof *c);
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(json, len, &end, 0);
    if (!root) {
        size_t at = end && end >= json && end <= json + len ? (size_t)(end - json) : 0;
        return hearth_err_set(err, HEARTH_EINVAL, "%s: invalid JSON at byte %zu", path, at);
    }
    int rc = HEARTH_OK;
    if (!cJSON_IsObject(root)) {
        rc = hearth_err_set(err, HEARTH_EINVAL, "%s: not a JSON object", path);
        goto done;
    }
    if ((rc = hf_json_str(root, "model_type", NULL, path, c->model_type, sizeof c->model_type, err)))
        goto done;
    if (strcmp(c->model_type, "bert") != 0) {
        rc = hearth_err_set(err, HEARTH_EUNSUPPORTED, "%s: key 'model_type' is \"%s\"; hearth supports \"bert\"", path,
                            c->model_type);
        goto done;
    }
    struct {
        const char *key;
        int64_t *out;
        bool required;
        int64_t def, hi;
    } ints[] = {
        {"vocab_size", &c->vocab_size, true, 0, (int64_t)1 << 24},
        {"hidden_size", &c->hidden_size, true, 0, 16384},
        {"num_hidden_layers", &c->num_hidden_layers, true, 0, 256},
        {"num_attention_heads", &c->num_attention_heads, true, 0, 1024},
        {"intermediate_size", &c->intermediate_size, true, 0, (int64_t)1 << 18},
        {"max_position_embeddings", &c->max_position_embeddings, true, 0, (int64_t)1 << 16},
        {"type_vocab_size", &c->type_vocab_size, false, 2, 1024},
    };
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        if ((rc = hf_json_int(root, ints[i].key, ints[i].required, ints[i].def, 1, ints[i].hi, path, ints[i].out,
                              err)))
            goto done;
    if (c->hidden_size % c->num_attention_heads != 0) {
        rc = hearth_err_set(err, HEARTH_EINVAL,
                            "%s: key 'num_attention_heads' (%lld) does not divide 'hidden_size' (%lld)", path,
                            (long long)c->num_attention_heads, (long long)c->hidden_size);
        goto done;
    }
    /* the head size is a device limit, asked of the default device so that
     * config.json alone is refused naming its key (bert_place_weights asks the
     * device the model really opens on again) */
    const hearth_dev *dev = hearth_dev_default();
    if (c->hidden_size / c->num_attention_heads > dev->caps.head_dim_max) {
        rc = hearth_err_set(err, HEARTH_EUNSUPPORTED,
                            "%s: key 'num_attention_heads' (%lld) makes heads of %lld of 'hidden_size' (%lld); the "
                            "attention of device %s takes at most %lld",
                            path, (long long)c->num_attention_heads,
                            (long long)(c->hidden_size / c->num_attention_heads), (long long)c->hidden_size,
                            dev->caps.name, (long long)dev->caps.head_dim_max);
        goto done;
    }
    const cJSON *eps = cJSON_GetObjectItemCaseSensitive(root, "layer_norm_eps");
    c->layer_norm_eps = 1e-12f;
    if (eps) {
        if (!cJSON_IsNumber(eps) || !(eps->valuedouble > 0 && eps->valuedouble <= 0.1)) {
            rc = hearth_err_set(err, HEARTH_EINVAL, "%s: key 'layer_norm_eps' is not a number in (0, 0.1]", path);
            goto done;
        }
        c->layer_norm_eps = (float)eps->valuedouble;
    }
    if ((rc = hf_json_str(root, "hidden_act", "gelu", path, c->hidden_act, sizeof c->hidden_act, err)))
        goto done;
    if (strcmp(c->hidden_act, "gelu") != 0) {
        rc = hearth_err_set(err, HEARTH_EUNSUPPORTED, "%s: key 'hidden_act' is \"%s\"; hearth supports \"gelu\"", path,
                            c->hidden_act);
        goto done;
    }
    char pos[32];
    if ((rc = hf_json_str(root, "position_embedding_type", "absolute", path, pos, sizeof pos, err)))
        goto done;
    if (strcmp(pos, "absolute") != 0)
        rc = hearth_err_set(err, HEARTH_EUNSUPPORTED,
                            "%s: key 'position_embedding_type' is \"%s\"; hearth supports \"absolute\"", path, pos);
done:
    cJSON_Delete(root);
    return rc;
}

/* A module path from modules.json: relative, inside the folder. */
static bool safe_subpath(const char *p)
{
    return p[0] != '/' && strstr(p, "..") == NULL && strlen(p) < 256;
}

static int read_pooling(hearth_hf_folder *f, const char *subdir, hearth_err *err)
{
    static const struct {
        const char *key;
        int mode; /* hearth_pooling, or -1: unsupported */
    } modes[] = {
        {"pooling_mode_mean_tokens", HEARTH_POOL_MEAN},   {"pooling_mode_cls_token", HEARTH_POOL_CLS},
        {"pooling_mode_lasttoken", HEARTH_POOL_LAST},     {"pooling_mode_max_tokens", -1},
        {"pooling_mode_mean_sqrt_len_tokens", -1},        {"pooling_mode_weightedmean_tokens", -1},
    };
    char rel[300], path[PATH_CAP];
    snprintf(rel, sizeof rel, "%s/config.json", subdir);
    cJSON *root;
    int rc = hf_json_read(f->dir, rel, HF_CONFIG_MAX_BYTES, true, path, sizeof path, &root, err);
    if (rc || !root)
        return rc; /* absent: mean, sentence-transformers' default */
    int n_on = 0;
    for (size_t i = 0; i < sizeof modes / sizeof modes[0] && rc == HEARTH_OK; i++) {
        int on = 0;
        if ((rc = hf_json_bool(root, modes[i].key, 0, path, &on, err)) || !on)
            continue;
        if (modes[i].mode < 0)
            rc = hearth_err_set(err, HEARTH_EUNSUPPORTED, "%s: key '%s' is true; hearth pools by mean, cls or last token",
                                path, modes[i].key);
        else if (n_on++ > 0)
            rc = hearth_err_set(err, HEARTH_EUNSUPPORTED,
                                "%s: key '%s' is true with another mode; concatenated pooling is not supported", path,
                                modes[i].key);
        else
            f->pooling = (hearth_pooling)modes[i].mode;
    }
    if (rc == HEARTH_OK && n_on == 0)
        rc = hearth_err_set(err, HEARTH_EINVAL, "%s: no pooling_mode_* key is true", path);
    int64_t dim;
    if (rc == HEARTH_OK && (rc = hf_json_int(root, "word_embedding_dimension", false, f->config.hidden_size, 1,
                                             INT64_MAX / 2, path, &dim, err)) == HEARTH_OK &&
        dim != f->config.hidden_size)
        rc = hearth_err_set(err, HEARTH_EINVAL, "%s: key 'word_embedding_dimension' is %lld but hidden_size is %lld",
                            path, (long long)dim, (long long)f->config.hidden_size);
    cJSON_Delete(root);
    return rc;
}

/* modules.json: Transformer, Pooling (where its config lives), Normalize. */
static int read_modules(hearth_hf_folder *f, hearth_err *err)
{
    char path[PATH_CAP], pool_dir[256] = "1_Pooling";
    cJSON *root = NULL;
    const char *end = NULL;
    char *text = NULL;
    size_t len = 0;
    /* modules.json is a list, so hf_json_read (objects only) does not fit */
    snprintf(path, sizeof path, "%s/modules.json", f->dir);
    hearth_err local = {0};
    int rc = hearth_file_read(path, HF_CONFIG_MAX_BYTES, &text, &len, &local);
    if (rc) {
        if (rc == HEARTH_EIO && local.sys == ENOENT)
            return read_pooling(f, pool_dir, err);
        return hearth_err_set(err, rc, "%s", local.msg);
    }
    root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    free(text);
    if (!cJSON_IsArray(root)) {
        cJSON_Delete(root);
        return hearth_err_set(err, HEARTH_EINVAL, "%s: not a JSON list", path);
    }
    int i = 0;
    for (const cJSON *m = root->child; m && rc == HEARTH_OK; m = m->next, i++) {
        char type[128], sub[256] = "";
        if ((rc = hf_json_str(m, "type", NULL, path, type, sizeof type, err)) ||
            (rc = hf_json_str(m, "path", "", path, sub, sizeof sub, err)))
            break;
        const char *t = strncmp(type, "sentence_transformers.models.", 29) == 0 ? type + 29 : type;
        if (strcmp(t, "Transformer") == 0)
            continue;
        if (strcmp(t, "Normalize") == 0) {
            f->normalize = true;
        } else if (strcmp(t, "Pooling") == 0) {
            if (!safe_subpath(sub) || !sub[0])
                rc = hearth_err_set(err, HEARTH_EINVAL, "%s: module %d: path \"%s\" is not inside the folder", path, i,
                                    sub);
            else
                snprintf(pool_dir, sizeof pool_dir, "%s", sub);
        } else {
            rc = hearth_err_set(err, HEARTH_EUNSUPPORTED, "%s: module %d: type \"%s\" is not supported", path, i, type);
        }
    }
    cJSON_Delete(root);
    return rc ? rc : read_pooling(f, pool_dir, err);
}

static int read_config(hearth_hf_folder *f, hearth_err *err)
{
    char path[PATH_CAP];
    snprintf(path, sizeof path, "%s/config.json", f->dir);
    char *text = NULL;
    size_t len = 0;
    int rc = hearth_file_read(path, HF_CONFIG_MAX_BYTES, &text, &len, err);
    if (rc)
        return rc;
    rc = hearth_bert_config_parse(&f->config, text, len, path, err);
    free(text);
    return rc;
}

/* max_seq_length from sentence_bert_config.json, else model_max_length, at
 * most max_position_embeddings. */
static int read_seq_len(hearth_hf_folder *f, int64_t model_max_length, hearth_err *err)
{
    char path[PATH_CAP];
    cJSON *root;
    int64_t maxpos = f->config.max_position_embeddings;
    int rc = hf_json_read(f->dir, "sentence_bert_config.json", HF_CONFIG_MAX_BYTES, true, path, sizeof path, &root,
                          err);
    if (rc)
        return rc;
    f->max_seq_len = model_max_length > 0 && model_max_length < maxpos ? model_max_length : maxpos;
    if (root)
        rc = hf_json_int(root, "max_seq_length", false, f->max_seq_len, 2, maxpos, path, &f->max_seq_len, err);
    cJSON_Delete(root);
    return rc;
}

/* config_sentence_transformers.json: "prompts" (an object of strings) and
 * "default_prompt_name" (null or one of them). */
static int read_prompts(hearth_hf_folder *f, hearth_err *err)
{
    char path[PATH_CAP];
    cJSON *root;
    f->default_prompt = -1;
    int rc = hf_json_read(f->dir, "config_sentence_transformers.json", HF_CONFIG_MAX_BYTES, true, path, sizeof path,
                          &root, err);
    if (rc || !root)
        return rc;
    const cJSON *prompts = cJSON_GetObjectItemCaseSensitive(root, "prompts");
    if (prompts && !cJSON_IsNull(prompts) && !cJSON_IsObject(prompts))
        rc = hearth_err_set(err, HEARTH_EINVAL, "%s: key 'prompts' is not an object", path);
    const cJSON *p, *list = cJSON_IsObject(prompts) ? prompts : NULL;
    cJSON_ArrayForEach(p, list)
    {
        if (rc)
            break;
        size_t name_len = strlen(p->string);
        if (!cJSON_IsString(p))
            rc = hearth_err_set(err, HEARTH_EINVAL, "%s: prompt '%s' is not a string", path, p->string);
        else if (f->n_prompts == HEARTH_HF_MAX_PROMPTS)
            rc = hearth_err_set(err, HEARTH_EUNSUPPORTED, "%s: more than %d prompts", path, HEARTH_HF_MAX_PROMPTS);
        else if (name_len == 0 || name_len >= HEARTH_HF_PROMPT_NAME_MAX)
            rc = hearth_err_set(err, HEARTH_EINVAL, "%s: a prompt's name is %zu bytes (1..%d)", path, name_len,
                                HEARTH_HF_PROMPT_NAME_MAX - 1);
        else if (strlen(p->valuestring) > HEARTH_HF_PROMPT_TEXT_MAX)
            rc = hearth_err_set(err, HEARTH_EINVAL, "%s: prompt '%s' is %zu bytes (at most %d)", path, p->string,
                                strlen(p->valuestring), HEARTH_HF_PROMPT_TEXT_MAX);
        if (rc)
            break;
        hearth_hf_prompt *q = &f->prompts[f->n_prompts];
        if (!(q->text = strdup(p->valuestring))) {
            rc = hearth_err_set(err, HEARTH_ENOMEM, "%s: out of memory", path);
            break;
        }
        memcpy(q->name, p->string, name_len + 1);
        q->len = strlen(q->text);
        f->n_prompts++;
    }
    const cJSON *def = cJSON_GetObjectItemCaseSensitive(root, "default_prompt_name");
    if (!rc && def && !cJSON_IsNull(def)) {
        if (!cJSON_IsString(def))
            rc = hearth_err_set(err, HEARTH_EINVAL, "%s: key 'default_prompt_name' is not a string or null", path);
        for (int i = 0; !rc && i < f->n_prompts; i++)
            if (!strcmp(f->prompts[i].name, def->valuestring))
                f->default_prompt = i;
        if (!rc && f->default_prompt < 0)
            rc = hearth_err_set(err, HEARTH_EINVAL, "%s: default_prompt_name '%s' is not one of the prompts", path,
                                def->valuestring);
    }
    cJSON_Delete(root);
    return rc;
}

static int open_weights(hearth_hf_folder *f, hearth_err *err)
{
    static const char *const prefixes[] = {"", "bert.", "model."};
    char path[PATH_CAP];
    snprintf(path, sizeof path, "%s/model.safetensors", f->dir);
    int rc = hearth_st_open(&f->st, path, err);
    if (rc)
        return rc;
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++) {
        char name[64];
        snprintf(name, sizeof name, "%sembeddings.word_embeddings.weight", prefixes[i]);
        if (hearth_st_find(&f->st, name)) {
            snprintf(f->prefix, sizeof f->prefix, "%s", prefixes[i]);
            const hearth_st_tensor *t;
            int64_t shape[2] = {f->config.vocab_size, f->config.hidden_size};
            return hearth_hf_folder_tensor(f, "embeddings.word_embeddings.weight", 2, shape, &t, err);
        }
    }
    return hearth_err_set(err, HEARTH_ENOTFOUND,
                          "%s: no tensor 'embeddings.word_embeddings.weight' (nor with prefix \"bert.\" or \"model.\")",
                          path);
}

int hearth_hf_folder_open(hearth_hf_folder *f, const char *dir, hearth_err *err)
{
    memset(f, 0, sizeof *f);
    if (!(f->dir = strdup(dir)))
        return hearth_err_set(err, HEARTH_ENOMEM, "%s: out of memory", dir);
    int64_t model_max_length = 0;
    int rc = read_config(f, err);
    if (rc == HEARTH_OK)
        rc = read_modules(f, err);
    if (rc == HEARTH_OK)
        rc = hf_tokenizer_load(f, &model_max_length, err);
    if (rc == HEARTH_OK)
        rc = read_seq_len(f, model_max_length, err);
    if (rc == HEARTH_OK)
        rc = read_prompts(f, err);
    if (rc == HEARTH_OK)
        rc = open_weights(f, err);
    if (rc)
        hearth_hf_folder_close(f);
    return rc;
}

void hearth_hf_folder_close(hearth_hf_folder *f)
{
    for (int i = 0; i < f->n_prompts; i++)
        free(f->prompts[i].text);
    hearth_vocab_deinit(&f->vocab);
    hearth_st_close(&f->st);
    free(f->dir);
    memset(f, 0, sizeof *f);
}

int hearth_hf_folder_tensor(const hearth_hf_folder *f, const char *name, int n_dims, const int64_t *shape,
                            const hearth_st_tensor **out, hearth_err *err)
{
    char full[512];
    if ((size_t)snprintf(full, sizeof full, "%s%s", f->prefix, name) >= sizeof full)
        return hearth_err_set(err, HEARTH_EINVAL, "%s: tensor name '%s' too long", f->st.path, name);
    return hearth_st_get(&f->st, full, n_dims, shape, out, err);
}
