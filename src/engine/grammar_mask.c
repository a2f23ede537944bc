/* grammar_mask.c: a grammar matcher applied to tokens (see grammar.h).
 *
 * The scheduler samples first without the grammar and checks only the
 * token it got (hearth_grammar_token_allowed): most sampled tokens of a
 * model that follows its instructions are allowed, and one check costs a
 * token's few characters. Only a refused token makes it mask the whole
 * vocabulary (hearth_grammar_mask) and sample again: llama.cpp's order,
 * which a seeded llama-server run follows too. Ends of generation are
 * allowed only when the text is complete, as llama.cpp's grammar sampler
 * allows its end-of-generation tokens.
 *
 * Rejected: masking before every sample (a full pass over a 150k
 * vocabulary per token when the first draw is almost always allowed). */
#include "engine/grammar.h"

bool hearth_grammar_token_allowed(hearth_grammar_matcher *m, const hearth_token_texts *t, int32_t id, bool is_end)
{
    if (is_end)
        return hearth_grammar_matcher_complete(m);
    if (id < 0 || id >= t->n)
        return false;
    return hearth_grammar_matcher_allows(m, t->bytes + t->off[id], t->off[id + 1] - t->off[id]);
}

int32_t hearth_grammar_mask(hearth_grammar_matcher *m, const hearth_token_texts *t, const int32_t *end_ids, int n_end,
                            uint8_t *allowed)
{
    bool complete = hearth_grammar_matcher_complete(m);
    int32_t n_ok = 0;
    hearth_grammar_matcher_mask_begin(m);
    for (int32_t i = 0; i < t->n && !hearth_grammar_matcher_spent(m); i++)
        allowed[i] = hearth_grammar_matcher_allows(m, t->bytes + t->off[i], t->off[i + 1] - t->off[i]);
    hearth_grammar_matcher_mask_end(m);
    if (hearth_grammar_matcher_spent(m))
        return -1;
    for (int k = 0; k < n_end; k++)
        if (end_ids[k] >= 0 && end_ids[k] < t->n)
            allowed[end_ids[k]] = complete;
    for (int32_t i = 0; i < t->n; i++)
        n_ok += allowed[i];
    return n_ok;
}

int hearth_grammar_accept_token(hearth_grammar_matcher *m, const hearth_token_texts *t, int32_t id)
{
    if (id < 0 || id >= t->n)
        return HEARTH_EINVAL;
    return hearth_grammar_matcher_accept(m, t->bytes + t->off[id], t->off[id + 1] - t->off[id]);
}
