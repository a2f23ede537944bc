/* bench_answer.c: what one JSON answer, or one SSE event of a streamed
 * answer, tells `hearth bench`: whether it carries a token's text, an
 * error, and the server's usage counts.
 *
 * How: one cJSON parse, then the few members the servers we bench put
 * these in: OpenAI's choices[0].text (completions) or
 * choices[0].delta.content (chat chunks), llama-server's top-level
 * "content" (/completion), "error" in a stream that failed after its 200,
 * and "usage" {prompt_tokens, completion_tokens} (OpenAI, hearth, vLLM,
 * llama-server; TEI gives none). Kept apart from bench_conn.c so the
 * parsing is tested without sockets.
 * Rejected: a streaming JSON scanner looking for the keys (cJSON already
 * parses every answer to check it is JSON; a scanner would be a second
 * parser to keep right). */
#include "bench.h"

#include <cjson/cJSON.h>

static int64_t count_of(const cJSON *usage, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(usage, key);
    return cJSON_IsNumber(v) && v->valuedouble >= 0 ? (int64_t)v->valuedouble : -1;
}

int bench_answer_parse(const char *json, size_t len, bench_answer *a)
{
    *a = (bench_answer){.prompt_tokens = -1, .completion_tokens = -1};
    /* cJSON stops at the end of the first value: what follows it, but
     * whitespace, makes the answer not JSON */
    const char *end = NULL;
    cJSON *j = cJSON_ParseWithLengthOpts(json, len, &end, 0);
    if (!j)
        return -1;
    while (end < json + len && (*end == ' ' || *end == '\t' || *end == '\r' || *end == '\n'))
        end++;
    if (end != json + len) {
        cJSON_Delete(j);
        return -1;
    }
    const cJSON *text = NULL, *ch = cJSON_GetObjectItemCaseSensitive(j, "choices");
    const cJSON *c0 = cJSON_IsArray(ch) ? cJSON_GetArrayItem(ch, 0) : NULL;
    if (c0) {
        text = cJSON_GetObjectItemCaseSensitive(c0, "text");
        const cJSON *delta = cJSON_GetObjectItemCaseSensitive(c0, "delta");
        if (!text && delta)
            text = cJSON_GetObjectItemCaseSensitive(delta, "content");
    } else if (cJSON_IsObject(j)) {
        text = cJSON_GetObjectItemCaseSensitive(j, "content"); /* llama-server's /completion */
    }
    a->has_text = cJSON_IsString(text) && text->valuestring[0];
    a->error = cJSON_IsObject(j) && cJSON_GetObjectItemCaseSensitive(j, "error");
    const cJSON *usage = cJSON_IsObject(j) ? cJSON_GetObjectItemCaseSensitive(j, "usage") : NULL;
    if (cJSON_IsObject(usage)) {
        a->prompt_tokens = count_of(usage, "prompt_tokens");
        a->completion_tokens = count_of(usage, "completion_tokens");
    }
    cJSON_Delete(j);
    return 0;
}
