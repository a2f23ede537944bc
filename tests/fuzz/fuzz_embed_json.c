/* fuzz_embed_json: the embedding APIs' request bodies (TEI /embed, /tokenize,
 * /decode and /similarity, OpenAI /v1/embeddings) through hearth_embed_parse, which must
 * answer every input with success or a 400/413 and a message, never crash,
 * leak or read past the body. On success every input it reports must be
 * consistent (text with its length, or ids). */
#include "api/embed_parse.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const enum hearth_embed_api apis[] = {HEARTH_EMBED_TEI, HEARTH_EMBED_TEI_TOKENIZE, HEARTH_EMBED_TEI_DECODE,
                                                 HEARTH_EMBED_TEI_SIMILARITY, HEARTH_EMBED_OPENAI};
    for (int a = 0; a < 5; a++) {
        hearth_embed_parsed p;
        char msg[256];
        msg[0] = 0;
        int st = hearth_embed_parse((const char *)data, size, apis[a], 8, &p, msg, sizeof msg);
        if (st != 0) {
            if ((st != 400 && st != 413) || !msg[0])
                abort();
            continue;
        }
        if (p.n < 1 || p.n > 8)
            abort();
        for (int i = 0; i < p.n; i++) {
            const hearth_embed_input *in = &p.inputs[i];
            if (in->text ? strlen(in->text) != in->text_len : (in->n_ids < 1 || !in->ids))
                abort();
            if (apis[a] == HEARTH_EMBED_TEI_DECODE && in->text)
                abort(); /* /decode takes ids only */
            if (apis[a] == HEARTH_EMBED_TEI_SIMILARITY && (!in->text || p.n < 2))
                abort(); /* /similarity: a source and at least one sentence */
            for (int k = 0; !in->text && k < in->n_ids; k++)
                if (in->ids[k] < 0)
                    abort();
        }
        hearth_embed_parsed_free(&p);
    }
    return 0;
}
