/* fuzz_tool_calls: OpenAI function calling's untrusted inputs
 * (api/tool_calls.c, tool_parse.c): a model's answer read for calls (a
 * client's prompt can steer what the model writes), the same answer fed as
 * a stream, and a client's tools / tool_choice turned into the forced-call
 * grammar.
 *
 * Input: byte 0 picks the family's format (low 2 bits: generic, llama3,
 * hermes) and how the stream is cut (the rest: piece length 1..64); the
 * rest is the answer. Checked: the parser returns a count or ENOMEM, every
 * call names an offered tool and carries a JSON object, the content before
 * the calls lies inside the text; the stream sends exactly the text, in
 * order, as content and held bytes, and parsing what it held finds the
 * same number of calls as parsing the whole answer when nothing was sent
 * early. When the rest is a JSON object it is also read as a request's
 * tools, and with a forced choice the grammar written must be one the
 * project's GBNF parser accepts (or a refusal naming the parameters). */
#include "api/tool_calls.h"
#include "engine/grammar.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const char *const NAMES[] = {"f", "get_weather", "test"};
static const hearth_chat_template_kind KIND[] = {HEARTH_TMPL_GEMMA, HEARTH_TMPL_LLAMA3, HEARTH_TMPL_CHATML,
                                                  HEARTH_TMPL_CHATML};

static void check_parse(hearth_chat_tool_style st, const char *s, size_t n)
{
    hearth_tool_parse p;
    int k = hearth_tools_parse_output(st, NAMES, 3, s, n, &p);
    if (k < 0 ? k != HEARTH_ENOMEM : k != p.n_calls)
        abort();
    if (k > 0 && p.content_len > n)
        abort();
    for (int i = 0; i < k; i++) {
        if (strcmp(p.calls[i].name, "f") && strcmp(p.calls[i].name, "get_weather") && strcmp(p.calls[i].name, "test"))
            abort();
        cJSON *a = cJSON_Parse(p.calls[i].arguments);
        if (!cJSON_IsObject(a))
            abort();
        cJSON_Delete(a);
    }
    hearth_tool_parse_deinit(&p);
}

static void check_stream(hearth_chat_template_kind k, const char *s, size_t n, size_t piece)
{
    cJSON *doc = cJSON_Parse("{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\"}}, "
                             "{\"type\": \"function\", \"function\": {\"name\": \"test\"}}]}");
    hearth_tool_set *ts = NULL;
    if (hearth_tools_from_json(doc, k, &ts, NULL) != HEARTH_OK || !ts) {
        cJSON_Delete(doc);
        return; /* out of memory */
    }
    cJSON_Delete(doc);
    size_t sent = 0;
    for (size_t at = 0; at < n; at += piece) {
        size_t len = n - at < piece ? n - at : piece, ready = 0;
        if (hearth_tools_stream_feed(ts, s + at, len, &ready) != HEARTH_OK)
            break;
        if (ready > ts->held.len || memcmp(ts->held.data, s + sent, ready))
            abort();
        sent += ready;
        hearth_buf_consume(&ts->held, ready);
    }
    if (sent + ts->held.len == n && (ts->held.len && memcmp(ts->held.data, s + sent, ts->held.len)))
        abort();
    if (sent == 0 && ts->held.len == n && n) {
        hearth_tool_parse a, b;
        int ka = hearth_tools_parse_output(ts->style, (const char *const *)ts->names, ts->n, s, n, &a);
        int kb = hearth_tools_parse_output(ts->style, (const char *const *)ts->names, ts->n, ts->held.data, n, &b);
        if (ka != kb)
            abort();
        hearth_tool_parse_deinit(&a);
        hearth_tool_parse_deinit(&b);
    }
    hearth_tool_set_free(ts);
}

static void check_request(hearth_chat_template_kind k, const char *s, size_t n)
{
    cJSON *doc = cJSON_ParseWithLength(s, n);
    if (!cJSON_IsObject(doc)) {
        cJSON_Delete(doc);
        return;
    }
    hearth_tool_set *ts = NULL;
    hearth_err err = {0};
    int rc = hearth_tools_from_json(doc, k, &ts, &err);
    if (rc != HEARTH_OK && (ts || (rc == HEARTH_EINVAL && !err.msg[0])))
        abort();
    if (ts && ts->choice != HEARTH_TOOL_AUTO) {
        hearth_buf g;
        hearth_buf_init(&g, HEARTH_GRAMMAR_MAX_TEXT);
        memset(&err, 0, sizeof err);
        rc = hearth_tools_grammar(ts, &g, &err);
        if (rc == HEARTH_OK) {
            hearth_grammar *gr = hearth_grammar_parse(g.data, g.len, &err);
            if (!gr && err.code != HEARTH_ELIMIT && err.code != HEARTH_ENOMEM)
                abort(); /* the converter wrote a grammar the parser calls malformed */
            hearth_grammar_free(gr);
        } else if (rc == HEARTH_EINVAL && !strstr(err.msg, "function.parameters")) {
            abort();
        }
        hearth_buf_deinit(&g);
    }
    hearth_tool_set_free(ts);
    cJSON_Delete(doc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    hearth_chat_template_kind k = KIND[data[0] & 3];
    size_t piece = 1 + ((data[0] >> 2) & 63);
    /* an exact-size copy, so a read past the answer is caught */
    char *s = malloc(size - 1 ? size - 1 : 1);
    if (!s)
        return 0;
    memcpy(s, data + 1, size - 1);
    check_parse(hearth_chat_template_tool_style(k), s, size - 1);
    check_stream(k, s, size - 1, piece);
    check_request(k, s, size - 1);
    free(s);
    return 0;
}
