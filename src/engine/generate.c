/* generate.c: the single-sequence generation loop.
 *
 * The prompt goes through the model in chunks of n_batch tokens (each chunk
 * is one forward call, a matrix product over the chunk, so the weights are
 * read once per chunk instead of once per token); only the last chunk's
 * logits are used. Then, per step: sample, accept, stop on an end id, turn
 * the token into text (model detokenizer, then the stop-string hold-back),
 * hand the final text to the callback, stop on a stop string or a limit,
 * and only then run the token through the model: the last token's forward
 * pass is never computed for nothing.
 *
 * The length limit counts the whole sequence: generation stops with
 * "length" once prompt + generated tokens fill n_ctx, so every emitted
 * token could still be stored. The end id is counted as generated (as
 * llama-server's tokens_predicted does) but has no text.
 *
 * Rejected: a per-token callback with ids (the server wants text; ids are
 * one wrapper away in its own loop) and copying the prompt into the sampler
 * window by the caller (easy to forget; llama-server always does it). */
#include "engine/generate.h"

#include "base/clock.h"

#include <stdlib.h>
#include <string.h>

/* Text produced by one token is tiny; one push never gets near this. */
#define PIECE_MAX (1u << 20)

static bool is_end(const hearth_gen_model *m, int32_t id)
{
    for (int i = 0; i < m->n_end_ids; i++)
        if (m->end_ids[i] == id)
            return true;
    return false;
}

/* n_predict tokens made, or the sequence fills the context. */
static bool at_limit(const hearth_gen_model *m, const hearth_gen_params *p, int64_t n_gen, int64_t n_seq)
{
    return (p->n_predict >= 0 && n_gen >= p->n_predict) || n_seq >= m->n_ctx;
}

/* Hands out's bytes to the callback and empties it; true when it cancels. */
static bool deliver(hearth_buf *out, hearth_gen_text_fn on_text, void *user)
{
    bool cancel = false;
    if (out->len && on_text)
        cancel = on_text(user, out->data, out->len) != 0;
    out->len = 0;
    return cancel;
}

static int prefill(const hearth_gen_model *m, const int32_t *prompt, int64_t n_prompt, int32_t n_batch,
                   float *logits, hearth_err *err)
{
    for (int64_t i = 0; i < n_prompt; i += n_batch) {
        int32_t n = n_prompt - i < n_batch ? (int32_t)(n_prompt - i) : n_batch;
        int rc = m->forward(m->ctx, prompt + i, n, logits, err);
        if (rc)
            return rc;
    }
    return 0;
}

int hearth_generate(const hearth_gen_model *m, hearth_sampler *s, const int32_t *prompt, int64_t n_prompt,
                    const hearth_gen_params *p, hearth_gen_text_fn on_text, void *user, hearth_gen_result *res,
                    hearth_err *err)
{
    memset(res, 0, sizeof *res);
    res->stop_index = -1;
    if (!m->forward || !m->detok || m->n_vocab < 1 || m->n_ctx < 1)
        return hearth_err_set(err, HEARTH_EINVAL, "generate: incomplete model table");
    if (n_prompt < 1)
        return hearth_err_set(err, HEARTH_EINVAL, "generate: the prompt is empty (at least one token, e.g. BOS)");
    if (n_prompt > m->n_ctx)
        return hearth_err_set(err, HEARTH_ELIMIT,
                              "generate: the prompt is %lld tokens, longer than the context of %lld positions",
                              (long long)n_prompt, (long long)m->n_ctx);
    uint64_t t1 = hearth_now_ns();
    hearth_stopper stop;
    int rc = hearth_stopper_init(&stop, p->stop, p->n_stop, err);
    if (rc)
        return rc;
    hearth_buf text, out;
    hearth_buf_init(&text, PIECE_MAX);
    hearth_buf_init(&out, PIECE_MAX);
    float *logits = malloc((size_t)m->n_vocab * sizeof *logits);
    if (!logits) {
        rc = hearth_err_set(err, HEARTH_ENOMEM, "generate: logits of %d floats", (int)m->n_vocab);
        goto done;
    }
    int32_t n_batch = p->n_batch > 0 ? p->n_batch : 512;
    for (int64_t i = 0; i < n_prompt; i++)
        hearth_sampler_accept(s, prompt[i]);

    uint64_t t0 = hearth_now_ns();
    rc = prefill(m, prompt, n_prompt, n_batch, logits, err);
    t1 = hearth_now_ns();
    res->prompt_ms = (double)(t1 - t0) / 1e6;
    if (rc)
        goto done;
    res->n_prompt = n_prompt;

    int64_t n_seq = n_prompt;
    while (!at_limit(m, p, res->n_gen, n_seq)) {
        int32_t tok = hearth_sampler_sample(s, logits);
        hearth_sampler_accept(s, tok);
        res->n_gen++;
        n_seq++;
        if (is_end(m, tok)) {
            res->finish = HEARTH_GEN_EOS;
            break;
        }
        text.len = 0;
        rc = m->detok(m->ctx, tok, &text);
        if (rc) {
            hearth_err_set(err, rc, "generate: detokenizing token %d", (int)tok);
            goto done;
        }
        rc = hearth_stopper_push(&stop, text.data ? text.data : "", text.len, &out);
        if (rc < 0) {
            hearth_err_set(err, rc, "generate: text buffer");
            goto done;
        }
        bool matched = rc == 1;
        rc = 0;
        if (deliver(&out, on_text, user)) {
            res->finish = HEARTH_GEN_CANCELLED;
            break;
        }
        if (matched) {
            res->finish = HEARTH_GEN_STOP;
            res->stop_index = stop.matched;
            break;
        }
        if (at_limit(m, p, res->n_gen, n_seq))
            break; /* without a forward pass whose logits nobody would use */
        rc = m->forward(m->ctx, &tok, 1, logits, err);
        if (rc)
            goto done;
    }
    if (res->finish == HEARTH_GEN_NONE && at_limit(m, p, res->n_gen, n_seq))
        res->finish = HEARTH_GEN_LENGTH;
    if (res->finish != HEARTH_GEN_STOP && res->finish != HEARTH_GEN_CANCELLED) {
        /* The end of the stream: what the detokenizer and the hold-back kept is final now. */
        text.len = 0;
        if (m->detok_flush && (rc = m->detok_flush(m->ctx, &text)) != 0) {
            hearth_err_set(err, rc, "generate: flushing the detokenizer");
            goto done;
        }
        rc = hearth_stopper_push(&stop, text.data ? text.data : "", text.len, &out);
        if (rc == 1) {
            res->finish = HEARTH_GEN_STOP;
            res->stop_index = stop.matched;
        }
        if (rc >= 0)
            rc = hearth_stopper_finish(&stop, &out);
        if (rc < 0) {
            hearth_err_set(err, rc, "generate: text buffer");
            goto done;
        }
        rc = 0;
        if (deliver(&out, on_text, user))
            res->finish = HEARTH_GEN_CANCELLED;
    }
done:
    res->gen_ms = (double)(hearth_now_ns() - t1) / 1e6;
    free(logits);
    hearth_buf_deinit(&text);
    hearth_buf_deinit(&out);
    hearth_stopper_deinit(&stop);
    return rc;
}
