/* fuzz_grammar: the GBNF parser and matcher (engine/grammar_parse.c,
 * grammar_match.c), fed what a client's "grammar" field can hold.
 *
 * The input is a grammar, then optionally a NUL byte and a text. The
 * grammar is parsed from an exact-size copy (ASan sees a read past it);
 * a failure must say why (a message, an EINVAL / ELIMIT / ENOMEM code). A
 * grammar that parses gets a matcher, and the text is fed to it in pieces of
 * 1 to 4 bytes (the first text byte picks the size, so tokens that split
 * UTF-8 characters are covered), checking that allows() and accept() agree
 * on every piece and that a refused piece leaves the matcher as it was
 * (the same piece is refused again). Sanitizers catch the rest. */
#include "engine/grammar.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nul = memchr(data, 0, size);
    size_t glen = nul ? (size_t)(nul - data) : size;
    char *g_text = malloc(glen ? glen : 1);
    memcpy(g_text, data, glen);
    hearth_err err = {0};
    hearth_grammar *g = hearth_grammar_parse(g_text, glen, &err);
    free(g_text);
    if (!g) {
        if (!err.msg[0] || (err.code != HEARTH_EINVAL && err.code != HEARTH_ELIMIT && err.code != HEARTH_ENOMEM))
            abort();
        return 0;
    }
    hearth_grammar_matcher *m = hearth_grammar_matcher_new(g, &err);
    if (m && nul && nul + 1 < data + size) {
        const char *t = (const char *)nul + 2;
        size_t n = size - (size_t)(nul - data) - 2;
        size_t step = 1 + nul[1] % 4;
        for (size_t i = 0; i < n; i += step) {
            size_t k = n - i < step ? n - i : step;
            char *piece = malloc(k);
            memcpy(piece, t + i, k);
            bool allowed = hearth_grammar_matcher_allows(m, piece, k);
            int rc = hearth_grammar_matcher_accept(m, piece, k);
            if (allowed != (rc == 0))
                abort();
            if (rc && hearth_grammar_matcher_allows(m, piece, k))
                abort();
            free(piece);
            (void)hearth_grammar_matcher_complete(m);
        }
    }
    hearth_grammar_matcher_free(m);
    hearth_grammar_free(g);
    return 0;
}
