/* hf_json.c: reading a Hugging Face folder's JSON files with cJSON.
 *
 * Each file is read whole (bounded), parsed with an explicit length, and
 * looked up with typed getters that name the file and the key on failure.
 * Numbers come from cJSON as doubles: an integer key must be integral and in
 * its range before it is converted. Rejected: a schema table per file (more
 * code than the dozen keys it would describe). */
#include "models/hf_json.h"

#include "base/file.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int hf_json_read(const char *dir, const char *name, size_t max, bool optional, char *path, size_t path_cap,
                 cJSON **out, hearth_err *err)
{
    *out = NULL;
    if ((size_t)snprintf(path, path_cap, "%s/%s", dir, name) >= path_cap)
        return hearth_err_set(err, HEARTH_EINVAL, "%s/%s: path too long", dir, name);
    char *text = NULL;
    size_t len = 0;
    hearth_err local = {0};
    int rc = hearth_file_read(path, max, &text, &len, &local);
    if (rc) {
        if (optional && rc == HEARTH_EIO && local.sys == ENOENT)
            return HEARTH_OK;
        if (rc == HEARTH_EIO && local.sys == ENOENT)
            rc = HEARTH_ENOTFOUND;
        return hearth_err_set(err, rc, "%s", local.msg);
    }
    const char *end = NULL;
    *out = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    if (!*out) {
        size_t at = end && end >= text && end <= text + len ? (size_t)(end - text) : 0;
        free(text);
        return hearth_err_set(err, HEARTH_EINVAL, "%s: invalid JSON at byte %zu", path, at);
    }
    free(text);
    if (!cJSON_IsObject(*out)) {
        cJSON_Delete(*out);
        *out = NULL;
        return hearth_err_set(err, HEARTH_EINVAL, "%s: not a JSON object", path);
    }
    return HEARTH_OK;
}

int hf_json_int(const cJSON *obj, const char *key, bool required, int64_t def, int64_t lo, int64_t hi,
                const char *path, int64_t *out, hearth_err *err)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v || cJSON_IsNull(v)) {
        if (required)
            return hearth_err_set(err, HEARTH_ENOTFOUND, "%s: key '%s' is missing", path, key);
        *out = def;
        return HEARTH_OK;
    }
    if (!cJSON_IsNumber(v) || floor(v->valuedouble) != v->valuedouble)
        return hearth_err_set(err, HEARTH_EINVAL, "%s: key '%s' is not an integer", path, key);
    if (!(v->valuedouble >= (double)lo && v->valuedouble <= (double)hi))
        return hearth_err_set(err, HEARTH_EINVAL, "%s: key '%s' is %.17g, outside [%lld, %lld]", path, key,
                              v->valuedouble, (long long)lo, (long long)hi);
    *out = (int64_t)v->valuedouble;
    return HEARTH_OK;
}

int hf_json_bool(const cJSON *obj, const char *key, int def, const char *path, int *out, hearth_err *err)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v || cJSON_IsNull(v)) {
        *out = def;
        return HEARTH_OK;
    }
    if (!cJSON_IsBool(v))
        return hearth_err_set(err, HEARTH_EINVAL, "%s: key '%s' is not true or false", path, key);
    *out = cJSON_IsTrue(v) ? 1 : 0;
    return HEARTH_OK;
}

int hf_json_str(const cJSON *obj, const char *key, const char *def, const char *path, char *out, size_t cap,
                hearth_err *err)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    const char *s = def;
    if (v && !cJSON_IsNull(v)) {
        if (!cJSON_IsString(v))
            return hearth_err_set(err, HEARTH_EINVAL, "%s: key '%s' is not a string", path, key);
        s = v->valuestring;
    }
    if (!s)
        return hearth_err_set(err, HEARTH_ENOTFOUND, "%s: key '%s' is missing", path, key);
    if (strlen(s) >= cap)
        return hearth_err_set(err, HEARTH_EINVAL, "%s: key '%s' is longer than %zu bytes", path, key, cap - 1);
    memcpy(out, s, strlen(s) + 1);
    return HEARTH_OK;
}
