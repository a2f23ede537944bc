/* fuzz_json_schema: the JSON schema to GBNF converter (api/json_schema_gbnf.c
 * and its pattern and integer-range parts), fed what a client's
 * "json_schema" or response_format schema can hold.
 *
 * The input is JSON text, parsed by cJSON from an exact-size copy as the
 * server parses a body; what is not JSON is skipped (cJSON is not under
 * test here). The converter then either refuses the schema, with a code
 * that says why (EINVAL, ELIMIT, ENOMEM) and a message that starts
 * "json_schema: ", or writes a grammar, and then the project's GBNF parser
 * must accept that grammar: the converter is meant to refuse what it cannot
 * write, so a grammar the parser calls malformed (a syntax error, an
 * undefined rule, left recursion) is a converter bug and aborts, after
 * printing the schema, the grammar and the parser's message. The parser's
 * size bounds (HEARTH_ELIMIT: a {m,n} that expands past its element limit)
 * and out of memory are allowed: they bound every client's grammar, and the
 * server answers them as it answers a client's grammar that is too big.
 *
 * The output buffer has the bound the server gives it
 * (HEARTH_GRAMMAR_MAX_TEXT). Sanitizers catch the rest: reads past the
 * schema's strings, leaks on every refusal path. */
#include "api/json_schema_gbnf.h"
#include "engine/grammar.h"

#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size ? size : 1);
    memcpy(text, data, size);
    cJSON *schema = cJSON_ParseWithLength(text, size);
    free(text);
    if (!schema)
        return 0;
    hearth_buf out;
    hearth_buf_init(&out, HEARTH_GRAMMAR_MAX_TEXT);
    hearth_err err = {0};
    int rc = hearth_json_schema_to_gbnf(schema, &out, &err);
    if (rc) {
        if (rc != err.code || strncmp(err.msg, "json_schema: ", 13) != 0 ||
            (rc != HEARTH_EINVAL && rc != HEARTH_ELIMIT && rc != HEARTH_ENOMEM)) {
            fprintf(stderr, "fuzz_json_schema: refused with rc %d, err.code %d, message '%s'\n", rc, err.code, err.msg);
            abort();
        }
    } else {
        hearth_err perr = {0};
        hearth_grammar *g = hearth_grammar_parse(out.data, out.len, &perr);
        if (!g && perr.code != HEARTH_ELIMIT && perr.code != HEARTH_ENOMEM) {
            char *s = cJSON_PrintUnformatted(schema);
            fprintf(stderr, "fuzz_json_schema: the grammar of %s does not parse: %s\n%.*s\n", s ? s : "?", perr.msg,
                    (int)(out.len < 4096 ? out.len : 4096), out.data ? out.data : "");
            free(s);
            abort();
        }
        hearth_grammar_free(g);
    }
    hearth_buf_deinit(&out);
    cJSON_Delete(schema);
    return 0;
}
