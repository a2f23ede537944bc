/* hf_json.h: private helpers for reading the small JSON files of a Hugging
 * Face folder, each failure naming the file and the key. */
#ifndef HEARTH_MODELS_HF_JSON_H
#define HEARTH_MODELS_HF_JSON_H

#include "base/err.h"

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HF_CONFIG_MAX_BYTES ((size_t)1 << 20)      /* config.json and friends */
#define HF_TOKENIZER_MAX_BYTES ((size_t)64 << 20)  /* tokenizer.json */

/* Reads dir/name (at most max bytes) and parses it into *out (free with
 * cJSON_Delete). Writes dir/name to path. When optional and the file does not
 * exist, returns HEARTH_OK with *out NULL. */
int hf_json_read(const char *dir, const char *name, size_t max, bool optional, char *path, size_t path_cap,
                 cJSON **out, hearth_err *err);

/* Integer key in [lo, hi]. Absent: *out = def when !required, else
 * HEARTH_ENOTFOUND. Not an integral number: HEARTH_EINVAL. */
int hf_json_int(const cJSON *obj, const char *key, bool required, int64_t def, int64_t lo, int64_t hi,
                const char *path, int64_t *out, hearth_err *err);
/* Boolean key; absent (or null when null_ok): *out = def. */
int hf_json_bool(const cJSON *obj, const char *key, int def, const char *path, int *out, hearth_err *err);
/* String key copied into out (cap bytes); absent: def (NULL def makes it required). */
int hf_json_str(const cJSON *obj, const char *key, const char *def, const char *path, char *out, size_t cap,
                hearth_err *err);

#endif
