/* json_body.c: a request body to a cJSON object, refusing what cJSON would
 * let through and the handlers would misread (see json_body.h).
 *
 * Two things cJSON_ParseWithLength does not check. It stops after the first
 * value, so "{...} xyz" and two objects back to back passed as the first:
 * cJSON_ParseWithLengthOpts gives the end of the value (and, on failure, the
 * offset of the error without cJSON's global, which another thread may be
 * writing), and only JSON whitespace may follow it. Its strings are C
 * strings with no length: "\u0000" (or a raw 0 byte, which it copies as is)
 * silently ends the prompt, the input, the model name there. So once the
 * text has parsed, one pass over the raw bytes tracks string state, escapes
 * and the path of keys and indexes, and the first string holding a NUL is
 * refused by name. The pass is linear and allocates nothing; it is only
 * entered when the body holds a 0 byte or "u0000" at all.
 *
 * Rejected: keeping the NUL as text (every layer below takes strings from
 * cJSON as C strings; carrying lengths would need a JSON parser of our own);
 * comparing each decoded string's length with strlen (cJSON keeps no
 * decoded length); refusing any body holding the six bytes "\u0000" (the
 * text "\\u0000", an escaped backslash then "u0000", is legitimate). */
#include "json_body.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* Levels of the path a message names; deeper ones show as "...". */
#define PATH_DEPTH 16
/* Levels whose kind (object or array) the scanner follows: cJSON refuses
 * deeper documents, so a parsed one never has more. */
#define NEST_MAX (CJSON_NESTING_LIMIT + 1)
/* A key is named by at most this many bytes of its JSON text. */
#define KEY_SHOWN 48

typedef struct path_level {
    const char *key;   /* an object's current member: its key's JSON text (escapes as sent); NULL before it */
    size_t key_len;
    long index;        /* an array's current element */
} path_level;

static bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

/* The path of levels[0..depth) into out: "messages[1].content". */
static void path_text(const path_level *levels, const bool *object, int depth, char *out, size_t n)
{
    size_t used = 0;
    out[0] = 0;
    for (int i = 0; i < depth && used < n; i++) {
        if (i == PATH_DEPTH) {
            snprintf(out + used, n - used, "...");
            return;
        }
        const path_level *l = &levels[i];
        int k;
        if (!object[i])
            k = snprintf(out + used, n - used, "[%ld]", l->index);
        else if (l->key)
            k = snprintf(out + used, n - used, "%s%.*s%s", used ? "." : "", (int)(l->key_len < KEY_SHOWN ? l->key_len : KEY_SHOWN),
                         l->key, l->key_len > KEY_SHOWN ? "..." : "");
        else
            k = 0;
        used += k > 0 ? (size_t)k : 0;
    }
}

/* The offset in the JSON text s[0..n) (parsed by cJSON: valid) of the first
 * NUL inside a string or key, "\u0000" or a raw 0 byte, or -1 when there is
 * none. Then path holds where it is (the member or element; for a key, the
 * object the key is in) and *in_key says whether it is a key. */
static long find_nul(const char *s, size_t n, char *path, size_t path_size, bool *in_key)
{
    if (!memchr(s, 0, n) && !memmem(s, n, "u0000", 5))
        return -1;
    path_level levels[PATH_DEPTH];
    bool object[NEST_MAX];
    int depth = 0;
    bool want_key = false; /* the next string is a key: just after '{' or an object's ',' */
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '{' || c == '[') {
            if (depth == NEST_MAX)
                return -1; /* not a document cJSON parsed */
            object[depth] = c == '{';
            if (depth < PATH_DEPTH)
                levels[depth] = (path_level){0};
            depth++;
            want_key = c == '{';
        } else if ((c == '}' || c == ']') && depth > 0) {
            depth--;
        } else if (c == ',' && depth > 0) {
            want_key = object[depth - 1];
            if (depth <= PATH_DEPTH) {
                levels[depth - 1].key = NULL;
                levels[depth - 1].index++;
            }
        } else if (c == '"') {
            size_t start = ++i;
            long nul = -1;
            for (; i < n && s[i] != '"'; i++) {
                if (s[i] == '\\') {
                    if (nul < 0 && i + 5 < n && !memcmp(s + i + 1, "u0000", 5))
                        nul = (long)i;
                    i++; /* the escaped byte: a '"' or '\\' there does not end the string; \uXXXX's digits are plain */
                } else if (s[i] == 0 && nul < 0) {
                    nul = (long)i;
                }
            }
            if (nul >= 0) {
                *in_key = want_key;
                path_text(levels, object, depth, path, path_size);
                return nul;
            }
            if (want_key && depth > 0 && depth <= PATH_DEPTH) {
                levels[depth - 1].key = s + start;
                levels[depth - 1].key_len = i - start;
            }
            want_key = false;
        }
    }
    return -1;
}

cJSON *hearth_json_body_parse(const char *body, size_t len, char *msg, size_t msg_size)
{
    if (len == 0) {
        snprintf(msg, msg_size, "the request body is empty: expected a JSON object");
        return NULL;
    }
    const char *end = NULL;
    cJSON *doc = cJSON_ParseWithLengthOpts(body, len, &end, 0);
    if (!doc) {
        long at = end && end >= body && end <= body + len ? (long)(end - body) : 0;
        snprintf(msg, msg_size, "the request body is not valid JSON (at byte %ld)", at);
        return NULL;
    }
    size_t tail = end && end >= body && end <= body + len ? (size_t)(end - body) : len;
    while (tail < len && is_ws(body[tail]))
        tail++;
    if (tail < len) {
        snprintf(msg, msg_size, "the request body has text after its JSON value, at byte %zu: send one JSON object", tail);
        goto fail;
    }
    if (!cJSON_IsObject(doc)) {
        snprintf(msg, msg_size, "the request body is not a JSON object");
        goto fail;
    }
    char path[256];
    bool in_key = false;
    long nul = find_nul(body, len, path, sizeof path, &in_key);
    if (nul >= 0) {
        if (in_key)
            snprintf(msg, msg_size, "a key %s%s%s holds a NUL character (at byte %ld): JSON strings must not contain \\u0000",
                     path[0] ? "in '" : "of the body", path, path[0] ? "'" : "", nul);
        else
            snprintf(msg, msg_size, "'%s' holds a NUL character (at byte %ld): JSON strings must not contain \\u0000", path, nul);
        goto fail;
    }
    return doc;
fail:
    cJSON_Delete(doc);
    return NULL;
}
