/* gen_sched.c: the continuous-batching scheduler (see gen_sched.h).
 *
 * One thread, one loop: admit waiting requests into free slots (choosing the
 * slot by longest cached prefix, else least recently used), build one batch
 * (a decode row for every live sequence past its prompt, then prompt chunks
 * from the others in admission order, within n_batch tokens), run it, and
 * sample, detokenize and stop-check every row that produced logits. A step
 * whose every row draws greedily with nothing else to keep asks the model
 * for the draws instead (forward_argmax, where the device makes them: a GPU
 * then hands back 4 bytes a row, not a vocabulary of logits).
 *
 * The lock guards the waiting queue, the slot jobs, the metrics and each
 * slot's "shown" fields (what GET /slots copies); everything else of a slot
 * belongs to the thread. Callbacks run without the lock. A cancelled request is noticed
 * at the top of the next step (submitters poke the thread so that is at
 * once), its slot freed and its cache kept for reuse.
 *
 * Rejected: a thread per sequence (each would read the weights on its own,
 * which is the cost continuous batching exists to share), and splitting the
 * KV cache per request dynamically (a paged cache): fixed slots are simpler and
 * the slot count is the memory budget. */
#include "gen_sched.h"

#include "base/clock.h"
#include "base/log.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const double hearth_gen_sched_hist_bounds[12] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 0};

typedef struct seq {
    int slot;
    hearth_gen_req *req;      /* NULL when idle */
    int32_t *tokens;          /* what the slot's cache holds, for prefix matching */
    int64_t n_tokens, cap;
    uint64_t last_used;       /* for LRU eviction of idle caches */
    uint64_t admit_order;
    /* the live request */
    int64_t n_prompt_done;    /* prompt positions in the cache */
    int64_t refeed_end;       /* after a context shift: tokens[n_tokens..refeed_end) are to be fed again */
    int n_shifts;
    int64_t n_cached;         /* of them, reused */
    int32_t next_token;       /* sampled, to be fed in the next step */
    bool decoding;
    hearth_sampler *sampler;
    hearth_grammar_matcher *gm; /* the request's grammar, or NULL */
    hearth_stopper stopper;
    void *detok;
    int64_t n_gen;
    uint64_t t_admit, t_first, t_last;
    /* shown: written by the thread under the lock, read by hearth_gen_sched_slots */
    const hearth_gen_req *shown_req;
    hearth_gen_slot_info shown;   /* used, sampling, n_predict, n_probs, cache_prompt, grammar (owned):
                                     the last request's */
    int64_t shown_n_gen, shown_n_tokens;
} seq;

struct hearth_gen_sched {
    hearth_gen_batch_model m;
    hearth_gen_sched_config cfg;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    hearth_gen_req *q_head, *q_tail;
    int queued;
    hearth_gen_slot_job *j_head, *j_tail;
    bool stopping;
    bool poked;
    bool inited, started;
    bool warmed;                 /* the warm-up is over (or was never asked for) */
    seq *seqs;
    bool *taken;                 /* (n_slots) admission scratch: slots promised to pinned requests */
    int live;
    uint64_t admit_counter;
    hearth_gen_sched_metrics metrics;
    /* batch scratch */
    int32_t *b_tokens, *b_slots;
    bool *b_want;
    seq **b_seq;              /* the sequence of each logits row */
    int32_t *b_draw;          /* (n_slots) each row's token drawn in parallel, or -1 (draw_rows) */
    int32_t *b_run;           /* (decode_steps, n_slots) a run's draws, pass by pass */
    uint64_t pass_ns;         /* the last step's forward time, a pass's share of it for a run */
    hearth_gen_req **b_req;   /* (n_slots) each row's request when its run began */
    float *b_logits;
    uint8_t *allowed;         /* (n_vocab) a grammar's mask, made at the first one */
    hearth_buf text, out;
};

static int hist_index(double sec)
{
    int b = 0;
    while (b < 11 && sec > hearth_gen_sched_hist_bounds[b])
        b++;
    return b;
}

static void seq_push_token(seq *q, int32_t t)
{
    if (q->n_tokens < q->cap) /* cap is the context: the model refuses more before this */
        q->tokens[q->n_tokens++] = t;
}

/* Emits the text that became final; returns true when a stop string matched. */
static bool emit(hearth_gen_sched *s, seq *q, const char *text, size_t n, int32_t token, const hearth_gen_probs *probs)
{
    hearth_buf_reset(&s->out, 1 << 16);
    int rc = hearth_stopper_push(&q->stopper, text, n, &s->out);
    if (s->out.len)
        q->req->on_text(q->req, s->out.data, s->out.len, token, probs);
    return rc == 1;
}

static void finish(hearth_gen_sched *s, seq *q, int status, enum hearth_gen_finish why, const char *msg)
{
    hearth_gen_req *req = q->req;
    uint64_t now = hearth_now_ns();
    if (status == 0) {
        /* release held text: a partial character, a stop-string prefix that never completed */
        hearth_buf_reset(&s->text, 1 << 16);
        if (s->m.detok_flush)
            s->m.detok_flush(s->m.ctx, q->detok, &s->text);
        hearth_buf_reset(&s->out, 1 << 16);
        if (s->text.len)
            hearth_stopper_push(&q->stopper, s->text.data, s->text.len, &s->out);
        if (why != HEARTH_GEN_STOP)
            hearth_stopper_finish(&q->stopper, &s->out);
        if (s->out.len)
            req->on_text(req, s->out.data, s->out.len, -1, NULL);
    }
    hearth_gen_stats st = {
        .finish = why,
        .stop_index = q->stopper.matched,
        .n_prompt = req->n_prompt,
        .n_cached = q->n_cached,
        .n_gen = q->n_gen,
        .n_shifts = q->n_shifts,
        .queue_ms = (double)(q->t_admit - req->submitted_ns) / 1e6,
        .prompt_ms = q->t_first ? (double)(q->t_first - q->t_admit) / 1e6 : (double)(now - q->t_admit) / 1e6,
        .gen_ms = q->t_first ? (double)(now - q->t_first) / 1e6 : 0,
        .slot = q->slot,
    };
    hearth_sampler_free(q->sampler);
    q->sampler = NULL;
    hearth_grammar_matcher_free(q->gm);
    q->gm = NULL;
    hearth_stopper_deinit(&q->stopper);
    q->req = NULL;
    q->decoding = false;
    q->last_used = now;
    s->live--;
    pthread_mutex_lock(&s->lock);
    q->shown_req = NULL;
    q->shown_n_tokens = q->n_tokens;
    if (status == 0)
        s->metrics.requests_done++;
    else if (status == HEARTH_ENOTFOUND)
        s->metrics.requests_cancelled++;
    else
        s->metrics.requests_failed++;
    s->metrics.live = s->live;
    pthread_mutex_unlock(&s->lock);
    req->on_done(req, status, msg, &st);
}

/* A live request its client cancelled: its slot freed, its cache kept. */
static void finish_cancelled(hearth_gen_sched *s, seq *q)
{
    HLOG_INFO("slot %d: request cancelled after %lld tokens; slot freed", q->slot, (long long)q->n_gen);
    finish(s, q, HEARTH_ENOTFOUND, HEARTH_GEN_CANCELLED, "cancelled");
}

static int64_t common_prefix(const seq *q, const hearth_gen_req *req)
{
    int64_t n = q->n_tokens < req->n_prompt ? q->n_tokens : req->n_prompt;
    int64_t i = 0;
    while (i < n && q->tokens[i] == req->prompt[i])
        i++;
    return i;
}

/* Picks the idle slot for req: the one it is pinned to, else the longest
 * cached prefix, else the least recently used. taken[i]: slot i is promised
 * to a pinned request admitted in the same round. */
static seq *pick_slot(hearth_gen_sched *s, const hearth_gen_req *req, const bool *taken, int64_t *keep)
{
    seq *best = NULL, *lru = NULL;
    int64_t best_n = 0;
    if (req->pin_slot) {
        best = &s->seqs[req->id_slot];
        best_n = req->cache_prompt ? common_prefix(best, req) : 0;
        *keep = best_n < req->n_prompt ? best_n : req->n_prompt - 1;
        return best;
    }
    for (int i = 0; i < s->m.n_slots; i++) {
        seq *q = &s->seqs[i];
        if (q->req || taken[i])
            continue;
        if (!lru || q->last_used < lru->last_used)
            lru = q;
        int64_t n = req->cache_prompt ? common_prefix(q, req) : 0;
        if (n > best_n || (n == best_n && n > 0 && q->last_used < best->last_used)) {
            best = q;
            best_n = n;
        }
    }
    if (!best) {
        *keep = 0;
        return lru;
    }
    /* at least the last prompt token is computed again: its logits start the answer */
    *keep = best_n < req->n_prompt ? best_n : req->n_prompt - 1;
    return best;
}

static bool admit(hearth_gen_sched *s, seq *q, hearth_gen_req *req, int64_t keep)
{
    hearth_err err = {0};
    q->sampler = hearth_sampler_new(&req->sampling, s->m.n_vocab, &err);
    if (q->sampler && req->grammar)
        q->gm = hearth_grammar_matcher_new(req->grammar, &err);
    if (!q->sampler || (req->grammar && !q->gm) || hearth_stopper_init(&q->stopper, req->stop, req->n_stop, &err) != 0) {
        hearth_sampler_free(q->sampler);
        q->sampler = NULL;
        hearth_grammar_matcher_free(q->gm);
        q->gm = NULL;
        req->on_done(req, err.code ? err.code : HEARTH_EINVAL, err.msg, NULL);
        return false;
    }
    for (int64_t i = 0; i < req->n_prompt; i++)
        hearth_sampler_accept(q->sampler, req->prompt[i]);
    int64_t kept = s->m.truncate(s->m.ctx, q->slot, keep);
    if (kept >= 0 && kept < keep) /* the cache rolled back further: re-feed from there */
        keep = kept;
    q->n_tokens = keep;
    q->req = req;
    q->n_prompt_done = keep;
    q->n_cached = keep;
    q->n_gen = 0;
    q->refeed_end = 0;
    q->n_shifts = 0;
    q->decoding = false;
    q->t_admit = hearth_now_ns();
    q->t_first = q->t_last = 0;
    q->admit_order = s->admit_counter++;
    s->m.detok_init(s->m.ctx, q->detok);
    s->live++;
    HLOG_INFO("slot %d: kept %lld of %lld positions (%lld to compute)", q->slot, (long long)keep, (long long)req->n_prompt,
              (long long)(req->n_prompt - keep));
    pthread_mutex_lock(&s->lock);
    q->shown_req = req;
    q->shown.used = true;
    q->shown.sampling = req->sampling;
    q->shown.n_predict = req->n_predict;
    q->shown.n_probs = req->n_probs;
    q->shown.cache_prompt = req->cache_prompt;
    free(q->shown.grammar); /* a failed copy shows no grammar: the request runs regardless */
    q->shown.grammar = req->grammar ? strdup(hearth_grammar_text(req->grammar)) : NULL;
    q->shown_n_gen = 0;
    q->shown_n_tokens = keep;
    s->metrics.prompt_tokens_cached += (uint64_t)keep;
    s->metrics.prefix_hits += keep > 0;
    s->metrics.live = s->live;
    pthread_mutex_unlock(&s->lock);
    return true;
}

static bool is_end(const hearth_gen_sched *s, int32_t t)
{
    for (int i = 0; i < s->m.n_end_ids; i++)
        if (s->m.end_ids[i] == t)
            return true;
    return false;
}

/* llama-server's context shift, done by computing again: the slot keeps its
 * first n_keep positions, drops n_discard after them (half the rest unless
 * the request says), and the tail that stays plus tok (sampled, not yet fed)
 * are fed again as a prompt chunk at their new positions. llama-server
 * instead moves the tail's cached keys in place (a RoPE rotation by
 * -n_discard); recomputing costs one prefill of at most n_ctx tokens per
 * shift, but needs nothing of the model beyond truncate and forward, gives
 * exactly the cache a fresh prefill would, and so works unchanged for every
 * cache (checkpointed recurrent ones included). Correctness first; the
 * rotation is the faster way, should shifts ever be hot. Returns false when
 * nothing can be dropped (n_keep leaves fewer than 2 positions). */
static bool shift(hearth_gen_sched *s, seq *q, int32_t tok)
{
    const hearth_gen_req *req = q->req;
    int64_t keep = req->n_keep < 0 ? 0 : req->n_keep;
    if (keep > s->m.n_ctx - 4) /* llama-server's bound: something must be left to drop */
        keep = s->m.n_ctx - 4 > 0 ? s->m.n_ctx - 4 : 0;
    if (keep > q->n_tokens)
        keep = q->n_tokens;
    int64_t left = q->n_tokens - keep;
    int64_t discard = req->n_discard > 0 ? req->n_discard : left / 2;
    if (discard > left)
        discard = left;
    if (discard < 1)
        return false;
    int64_t n_new = q->n_tokens - discard; /* < n_ctx: room for tok */
    memmove(q->tokens + keep, q->tokens + keep + discard, (size_t)(n_new - keep) * sizeof *q->tokens);
    q->tokens[n_new] = tok;
    int64_t kept = s->m.truncate(s->m.ctx, q->slot, keep);
    if (kept < 0 || kept > keep) /* a cache that cannot say: feed everything again */
        kept = kept < 0 ? s->m.truncate(s->m.ctx, q->slot, 0) : keep;
    q->n_tokens = kept < 0 ? 0 : kept;
    q->refeed_end = n_new + 1;
    q->decoding = false;
    q->n_shifts++;
    HLOG_INFO("slot %d: context shift: kept %lld, dropped %lld, %lld to compute again", q->slot, (long long)keep,
              (long long)discard, (long long)(q->refeed_end - q->n_tokens));
    pthread_mutex_lock(&s->lock);
    q->shown_n_tokens = q->n_tokens;
    pthread_mutex_unlock(&s->lock);
    return true;
}

/* The tokens q has still to feed before it samples: the rest of its prompt,
 * or after a shift the tail to compute again (from is where they are). */
static int64_t pending(const seq *q, const int32_t **from)
{
    if (q->n_prompt_done < q->req->n_prompt) {
        *from = q->req->prompt + q->n_prompt_done;
        return q->req->n_prompt - q->n_prompt_done;
    }
    *from = q->tokens + q->n_tokens;
    return q->refeed_end > q->n_tokens ? q->refeed_end - q->n_tokens : 0;
}

/* A grammar's token: the sampled one when the grammar allows it, else one
 * sampled again over the allowed ones (llama.cpp's order: the second draw
 * comes from the same generator). -1 when the grammar allows nothing. */
static int32_t constrain(hearth_gen_sched *s, seq *q, const float *logits, int32_t tok)
{
    const hearth_token_texts *t = q->req->token_texts;
    if (hearth_grammar_token_allowed(q->gm, t, tok, is_end(s, tok)))
        return tok;
    if (!s->allowed && !(s->allowed = malloc((size_t)s->m.n_vocab)))
        return -1;
    if (hearth_grammar_mask(q->gm, t, s->m.end_ids, s->m.n_end_ids, s->allowed) <= 0)
        return -1;
    return hearth_sampler_sample_masked(q->sampler, logits, s->allowed);
}

/* Rows a step draws in parallel from: below, the pool's hand-off costs
 * about what it saves (a greedy draw over 32k logits, sanitized copy and
 * argmax, is some tens of microseconds). */
#define DRAW_PAR_MIN 4

/* Task r of draw_rows: row r's token from its own sampler (a sequence's
 * sampler is touched by this task alone). Rows under a grammar draw in
 * sample_row: constrain's mask is the scheduler's one buffer. */
static void draw_task(void *ctx, int64_t r, int64_t n)
{
    (void)n;
    hearth_gen_sched *s = ctx;
    seq *q = s->b_seq[r];
    s->b_draw[r] = -1;
    if (q->req && !q->gm)
        s->b_draw[r] = hearth_sampler_sample(q->sampler, s->b_logits + (size_t)r * (size_t)s->m.n_vocab);
}

/* The step's draws, on the pool when there are rows enough: with the model
 * on a GPU they were the CPU's part of a batched step (64 rows of 32k
 * logits, one after another on the scheduler thread). The tokens are the
 * same whichever thread draws them. */
static void draw_rows(hearth_gen_sched *s, int rows)
{
    for (int r = 0; r < rows; r++)
        s->b_draw[r] = -1;
    if (s->cfg.pool && rows >= DRAW_PAR_MIN && hearth_pool_size(s->cfg.pool) > 1)
        hearth_pool_run(s->cfg.pool, draw_task, s, rows);
}

/* Whether q's next token is the argmax of its logits with nothing else to
 * keep: no grammar (it masks), no probabilities to report (they read the
 * logits), a greedy sampler without penalties. */
static bool draws_argmax(const seq *q)
{
    return q->req && !q->gm && q->req->n_probs <= 0 && hearth_sampler_is_plain_argmax(q->sampler);
}

/* Samples the row of logits for q (drawn: its token when draw_rows or the
 * device drew it, else -1; logits may then be NULL, draws_argmax having
 * held); finishes q when it is done. */
static void sample_row(hearth_gen_sched *s, seq *q, const float *logits, int32_t drawn)
{
    hearth_gen_req *req = q->req;
    int32_t tok = drawn >= 0 ? drawn : hearth_sampler_sample(q->sampler, logits);
    if (q->gm && (tok = constrain(s, q, logits, tok)) < 0 && hearth_grammar_matcher_spent(q->gm)) {
        finish(s, q, HEARTH_ELIMIT, HEARTH_GEN_NONE,
               "the grammar is too costly to follow: its parses multiplied past the matcher's work budget "
               "(nested repetitions of optional rules?)");
        return;
    }
    if (q->gm && tok < 0) {
        HLOG_INFO("slot %d: the grammar allows no token of the vocabulary here: ending the answer", q->slot);
        finish(s, q, 0, HEARTH_GEN_EOS, NULL);
        return;
    }
    hearth_gen_probs probs, *pp = NULL;
    if (req->n_probs > 0) {
        int k = req->n_probs > 16 ? 16 : req->n_probs;
        probs.n = req->post_sampling_probs ? hearth_sampler_top_probs_post(q->sampler, k, probs.ids, probs.probs)
                                           : hearth_sampler_top_probs(q->sampler, k, probs.ids, probs.probs);
        probs.token_prob = req->post_sampling_probs ? hearth_sampler_post_prob(q->sampler, tok) : -1;
        if (probs.n > 0)
            pp = &probs;
    }
    hearth_sampler_accept(q->sampler, tok);
    uint64_t now = hearth_now_ns();
    pthread_mutex_lock(&s->lock);
    q->shown_n_gen = q->n_gen + 1;
    s->metrics.gen_tokens++;
    if (!q->t_first) {
        double ttft = (double)(now - req->submitted_ns) / 1e9;
        s->metrics.ttft_bucket[hist_index(ttft)]++;
        s->metrics.ttft_sum += ttft;
        s->metrics.ttft_count++;
    } else {
        double itl = (double)(now - q->t_last) / 1e9;
        s->metrics.itl_bucket[hist_index(itl)]++;
        s->metrics.itl_sum += itl;
        s->metrics.itl_count++;
    }
    pthread_mutex_unlock(&s->lock);
    if (!q->t_first)
        q->t_first = now;
    q->t_last = now;
    q->n_gen++;
    if (!req->ignore_eos && is_end(s, tok)) {
        finish(s, q, 0, HEARTH_GEN_EOS, NULL);
        return;
    }
    if (q->gm && !is_end(s, tok) && hearth_grammar_accept_token(q->gm, req->token_texts, tok) != 0) {
        finish(s, q, HEARTH_EINVAL, HEARTH_GEN_NONE, "the grammar refused a token it had allowed");
        return;
    }
    hearth_buf_reset(&s->text, 1 << 16);
    s->m.detok_push(s->m.ctx, q->detok, tok, &s->text);
    if (emit(s, q, s->text.data ? s->text.data : "", s->text.len, tok, pp)) {
        finish(s, q, 0, HEARTH_GEN_STOP, NULL);
        return;
    }
    /* the sampled token needs one more position to be fed back */
    if ((req->n_predict >= 0 && q->n_gen >= req->n_predict) ||
        (q->n_tokens + 1 > s->m.n_ctx && !(req->context_shift && shift(s, q, tok)))) {
        finish(s, q, 0, HEARTH_GEN_LENGTH, NULL);
        return;
    }
    if (q->refeed_end > q->n_tokens)
        return; /* shifted: the kept tail and tok are fed as a prompt chunk first */
    q->next_token = tok;
    q->decoding = true;
}

/* The longest a run may take by the last pass's time: a request that
 * arrives meanwhile waits for the run's end, and a row that ends inside it
 * holds its slot till then. On an H100 a 1.04B's pass takes 0.56 ms alone
 * (a run of 8) and 3 ms for 64 rows (none): bench/RESULTS.md, stop 36. */
#define RUN_BUDGET_NS 5000000ull

/* The passes this step runs as one call of forward_steps (1: a plain
 * step): a run while every row of the batch is a greedy decode row
 * (on_device) and nothing waits (a queued request or a slot job would wait
 * out the whole run), at most cfg.decode_steps and RUN_BUDGET_NS, short
 * enough that every row's positions fit its context with the last step
 * the only one that can meet the limit (as a single step meets it), and no
 * longer than the most tokens any row still wants. */
static int run_length(hearth_gen_sched *s, int n, int rows, bool on_device)
{
    if (!on_device || s->cfg.decode_steps < 2 || n != rows)
        return 1;
    pthread_mutex_lock(&s->lock);
    bool waiting = s->q_head != NULL || s->j_head != NULL;
    pthread_mutex_unlock(&s->lock);
    if (waiting)
        return 1;
    int64_t k = s->cfg.decode_steps, longest = 0;
    if (s->pass_ns && RUN_BUDGET_NS / s->pass_ns < (uint64_t)k)
        k = (int64_t)(RUN_BUDGET_NS / s->pass_ns);
    for (int r = 0; r < rows; r++) {
        const seq *q = s->b_seq[r];
        if (!q->decoding)
            return 1;
        if (s->m.n_ctx - q->n_tokens < k)
            k = s->m.n_ctx - q->n_tokens;
        int64_t left = q->req->n_predict >= 0 ? q->req->n_predict - q->n_gen : k;
        if (left > longest)
            longest = left;
    }
    if (longest < k)
        k = longest;
    return k < 2 ? 1 : (int)k;
}

/* A sequence that left a run before its last pass: its cache holds the
 * positions the run fed it after that; keep what q records. */
static void drop_run_tail(hearth_gen_sched *s, seq *q)
{
    int64_t kept = s->m.truncate(s->m.ctx, q->slot, q->n_tokens);
    if (kept < 0)
        kept = s->m.truncate(s->m.ctx, q->slot, 0);
    if (kept >= q->n_tokens)
        return;
    q->n_tokens = kept < 0 ? 0 : kept; /* a cache that rolls back to checkpoints only */
    pthread_mutex_lock(&s->lock);
    q->shown_n_tokens = q->n_tokens;
    pthread_mutex_unlock(&s->lock);
}

/* A run's k passes over the batch's n rows (b_run: k x n draws), taken as
 * k single steps would have been: a pass's fed tokens recorded, then each
 * row's draw sampled (end ids, stop strings, lengths as ever). A row whose
 * request ends (or is cancelled, checked before each pass as the loop
 * checks before each step) leaves the run, and its cache loses the
 * positions fed after. */
static void run_results(hearth_gen_sched *s, int n, int k)
{
    for (int r = 0; r < n; r++)
        s->b_req[r] = s->b_seq[r]->req;
    for (int j = 0; j < k; j++) {
        for (int r = 0; r < n; r++) {
            seq *q = s->b_seq[r];
            if (!s->b_req[r])
                continue;
            if (j > 0 && atomic_load(&q->req->cancelled)) {
                finish_cancelled(s, q);
                s->b_req[r] = NULL;
                drop_run_tail(s, q);
                continue;
            }
            seq_push_token(q, j ? s->b_run[(size_t)(j - 1) * (size_t)n + (size_t)r] : s->b_tokens[r]);
        }
        pthread_mutex_lock(&s->lock);
        s->metrics.steps++;
        for (int r = 0; r < n; r++)
            s->b_seq[r]->shown_n_tokens = s->b_seq[r]->n_tokens;
        pthread_mutex_unlock(&s->lock);
        for (int r = 0; r < n; r++) {
            seq *q = s->b_seq[r];
            if (!s->b_req[r])
                continue;
            int32_t id = s->b_run[(size_t)j * (size_t)n + (size_t)r];
            sample_row(s, q, NULL, id);
            if (q->req != s->b_req[r] || !q->decoding || q->next_token != id) {
                s->b_req[r] = NULL;
                if (j < k - 1)
                    drop_run_tail(s, q);
            }
        }
    }
}

/* One step: returns false when there was nothing to run. */
static bool step(hearth_gen_sched *s)
{
    int n = 0, rows = 0;
    /* decode rows first: they are what the streams are waiting for */
    for (int i = 0; i < s->m.n_slots; i++) {
        seq *q = &s->seqs[i];
        if (!q->req || !q->decoding)
            continue;
        s->b_tokens[n] = q->next_token;
        s->b_slots[n] = q->slot;
        s->b_want[n] = true;
        s->b_seq[rows++] = q;
        n++;
    }
    int32_t budget = s->cfg.n_batch - n;
    if (budget < 1)
        budget = 1;
    /* then prompt chunks, oldest admission first */
    for (;;) {
        seq *next = NULL;
        for (int i = 0; i < s->m.n_slots; i++) {
            seq *q = &s->seqs[i];
            const int32_t *from;
            if (q->req && !q->decoding && pending(q, &from) > 0 && (!next || q->admit_order < next->admit_order)) {
                bool in_batch = false;
                for (int k = 0; k < n && !in_batch; k++)
                    in_batch = s->b_slots[k] == q->slot;
                if (!in_batch)
                    next = q;
            }
        }
        if (!next || budget <= 0)
            break;
        const int32_t *from;
        int64_t left = pending(next, &from);
        int64_t take = left < budget ? left : budget;
        for (int64_t k = 0; k < take; k++) {
            s->b_tokens[n] = from[k];
            s->b_slots[n] = next->slot;
            s->b_want[n] = false;
            n++;
        }
        if (take == left) {
            s->b_want[n - 1] = true; /* the prompt's last token: its logits start the answer */
            s->b_seq[rows++] = next;
        }
        budget -= (int32_t)take;
    }
    if (n == 0)
        return false;
    /* every row a plain greedy draw: the device makes the draws where the
     * logits are (forward_argmax), else they come to the host */
    bool on_device = s->m.forward_argmax != NULL;
    for (int r = 0; r < rows && on_device; r++)
        on_device = draws_argmax(s->b_seq[r]);
    const int passes = run_length(s, n, rows, on_device);
    hearth_err err = {0};
    const uint64_t t0 = hearth_now_ns();
    int rc = passes > 1  ? s->m.forward_steps(s->m.ctx, n, s->b_tokens, s->b_slots, passes, s->b_run, &err)
             : on_device ? s->m.forward_argmax(s->m.ctx, n, s->b_tokens, s->b_slots, s->b_want, s->b_draw, &err)
                         : s->m.forward(s->m.ctx, n, s->b_tokens, s->b_slots, s->b_want, s->b_logits, &err);
    const uint64_t t1 = hearth_now_ns();
    s->pass_ns = (t1 - t0) / (uint64_t)passes;
    if (passes == 1 || rc) {
        pthread_mutex_lock(&s->lock);
        s->metrics.steps++;
        pthread_mutex_unlock(&s->lock);
    }
    if (rc) {
        HLOG_ERROR("forward pass of %d tokens failed: %s", n, err.msg);
        for (int i = 0; i < s->m.n_slots; i++) {
            seq *q = &s->seqs[i];
            bool in_batch = false;
            for (int k = 0; k < n && !in_batch; k++)
                in_batch = s->b_slots[k] == q->slot;
            if (q->req && in_batch) {
                s->m.truncate(s->m.ctx, q->slot, 0);
                q->n_tokens = 0;
                finish(s, q, rc, HEARTH_GEN_NONE, err.msg);
            }
        }
        return true;
    }
    if (passes > 1) {
        run_results(s, n, passes);
        HLOG_DEBUG("run: %d rows, %d steps: forward %.3f ms, draws and emits %.3f ms", n, passes,
                   (double)(t1 - t0) / 1e6, (double)(hearth_now_ns() - t1) / 1e6);
        return true;
    }
    /* record what entered each cache (seqs[i] is slot i) */
    uint64_t prompt_evaluated = 0;
    for (int k = 0; k < n; k++) {
        seq *q = &s->seqs[s->b_slots[k]];
        bool prompt = !q->decoding && q->n_prompt_done < q->req->n_prompt; /* not a shift's tail */
        seq_push_token(q, s->b_tokens[k]);
        if (prompt) {
            q->n_prompt_done++;
            prompt_evaluated++;
        }
    }
    pthread_mutex_lock(&s->lock);
    s->metrics.prompt_tokens += prompt_evaluated;
    for (int i = 0; i < s->m.n_slots; i++)
        s->seqs[i].shown_n_tokens = s->seqs[i].n_tokens;
    pthread_mutex_unlock(&s->lock);
    if (!on_device)
        draw_rows(s, rows);
    for (int r = 0; r < rows; r++) {
        seq *q = s->b_seq[r];
        if (q->req)
            sample_row(s, q, on_device ? NULL : s->b_logits + (size_t)r * (size_t)s->m.n_vocab, s->b_draw[r]);
    }
    /* where a served step's time goes (--log-level debug): the pass, then
     * the draws and the answers' tokens handed on */
    HLOG_DEBUG("step: %d tokens, %d rows sampled: forward %.3f ms, draws and emits %.3f ms", n, rows,
               (double)(t1 - t0) / 1e6, (double)(hearth_now_ns() - t1) / 1e6);
    return true;
}

static void run_job(hearth_gen_sched *s, hearth_gen_slot_job *job)
{
    seq *q = &s->seqs[job->slot];
    char msg[512] = "";
    if (q->req) {
        snprintf(msg, sizeof msg, "slot %d is processing a request; retry when it is idle", job->slot);
        job->on_done(job, HEARTH_ELIMIT, msg);
        return;
    }
    int64_t n = q->n_tokens;
    int rc = job->run(job, q->tokens, &n, q->cap, msg, sizeof msg);
    if (n < 0 || n > q->cap) /* the job's bug: claim nothing rather than rows never computed */
        n = s->m.truncate(s->m.ctx, q->slot, 0);
    q->n_tokens = n;
    q->last_used = hearth_now_ns();
    pthread_mutex_lock(&s->lock);
    q->shown_n_tokens = n;
    pthread_mutex_unlock(&s->lock);
    job->on_done(job, rc, msg);
}

/* The warm-up (gen_sched.h), on the scheduler thread: each forward pass's
 * rows in their own slots (row i in slot i), token 0 throughout; a failed
 * pass ends it with a warning (serving goes on, paying the first sights). */
static void warm_up(hearth_gen_sched *s)
{
    const hearth_gen_batch_model *m = &s->m;
    const uint64_t t0 = hearth_now_ns();
    hearth_err err = {0};
    int passes = 0, rc = 0;
    int32_t chunk = s->cfg.n_batch < m->n_ctx - 1 ? s->cfg.n_batch : (int32_t)(m->n_ctx - 1);
    for (int32_t i = 0; i < chunk; i++) {
        s->b_tokens[i] = 0;
        s->b_slots[i] = 0;
        s->b_want[i] = i == chunk - 1;
    }
    if (chunk > 0 && !(rc = m->forward(m->ctx, chunk, s->b_tokens, s->b_slots, s->b_want, s->b_logits, &err)))
        passes++;
    m->truncate(m->ctx, 0, 0);
    int rows = s->cfg.n_parallel < 64 ? s->cfg.n_parallel : 64;
    if (rows > (m->n_ctx - 1) / 2)
        rows = (int)((m->n_ctx - 1) / 2); /* slot 0 takes two tokens a row count */
    for (int b = 1; b <= rows && !rc; b++)
        for (int rep = 0; rep < 2 && !rc; rep++) {
            for (int i = 0; i < b; i++) {
                s->b_tokens[i] = 0;
                s->b_slots[i] = i;
                s->b_want[i] = true;
            }
            if (!(rc = m->forward(m->ctx, b, s->b_tokens, s->b_slots, s->b_want, s->b_logits, &err)))
                passes++;
        }
    for (int i = 0; i < rows; i++)
        m->truncate(m->ctx, i, 0);
    /* a lone sequence's runs, each length twice: a device may record a run
     * of one row whole, keyed by its length (engine/dev.h's graph_runs) */
    int runs = 0;
    const int k_max = s->m.forward_steps ? s->cfg.decode_steps : 1;
    for (int k = 2; k <= k_max && k < m->n_ctx && !rc; k++)
        for (int rep = 0; rep < 2 && !rc; rep++) {
            s->b_tokens[0] = 0;
            s->b_slots[0] = 0;
            if (!(rc = m->forward_steps(m->ctx, 1, s->b_tokens, s->b_slots, k, s->b_run, &err)))
                runs++;
            m->truncate(m->ctx, 0, 0);
        }
    if (rc)
        HLOG_WARN("warm-up: a pass failed (%s): serving without the rest of it", err.msg);
    HLOG_INFO("warm-up: %d passes (a %d-token prompt chunk, steps of 1 to %d rows twice) and %d runs of one row "
              "(2 to %d passes, twice) in %.0f ms",
              passes, (int)chunk, rows, runs, k_max, (double)(hearth_now_ns() - t0) / 1e6);
}

static void *run(void *arg)
{
    hearth_gen_sched *s = arg;
    if (!s->warmed) {
        warm_up(s);
        pthread_mutex_lock(&s->lock);
        s->warmed = true;
        pthread_cond_broadcast(&s->wake);
        pthread_mutex_unlock(&s->lock);
    }
    for (;;) {
        hearth_gen_req *dropped = NULL;
        pthread_mutex_lock(&s->lock);
        while (!s->stopping && !s->poked && !s->j_head && (!s->q_head || s->live >= s->cfg.n_parallel) && s->live == 0)
            pthread_cond_wait(&s->wake, &s->lock);
        s->poked = false;
        if (s->stopping) {
            pthread_mutex_unlock(&s->lock);
            break;
        }
        hearth_gen_slot_job *jobs = s->j_head;
        s->j_head = s->j_tail = NULL;
        /* admit what fits */
        hearth_gen_req *admitted[256];
        int n_admitted = 0;
        /* in queue order; a request pinned to a busy slot (or to one promised
         * in this round) stays queued, and those behind it go ahead */
        memset(s->taken, 0, (size_t)s->m.n_slots * sizeof *s->taken);
        hearth_gen_req **at = &s->q_head, *prev = NULL;
        while (*at && s->live + n_admitted < s->cfg.n_parallel && n_admitted < 256) {
            hearth_gen_req *req = *at;
            bool cancelled = atomic_load(&req->cancelled);
            if (!cancelled && req->pin_slot && (s->seqs[req->id_slot].req || s->taken[req->id_slot])) {
                prev = req;
                at = &req->link;
                continue;
            }
            *at = req->link;
            if (s->q_tail == req)
                s->q_tail = prev;
            s->queued--;
            if (cancelled) {
                req->link = dropped;
                dropped = req;
                continue;
            }
            if (req->pin_slot)
                s->taken[req->id_slot] = true;
            admitted[n_admitted++] = req;
        }
        s->metrics.queued = s->queued;
        pthread_mutex_unlock(&s->lock);
        /* slot jobs before admission, so a restored cache serves the requests queued behind it */
        while (jobs) {
            hearth_gen_slot_job *next = jobs->link;
            run_job(s, jobs);
            jobs = next;
        }
        while (dropped) {
            hearth_gen_req *next = dropped->link;
            pthread_mutex_lock(&s->lock);
            s->metrics.requests_cancelled++;
            pthread_mutex_unlock(&s->lock);
            dropped->on_done(dropped, HEARTH_ENOTFOUND, "cancelled while queued", NULL);
            dropped = next;
        }
        for (int i = 0; i < n_admitted; i++) {
            int64_t keep;
            seq *q = pick_slot(s, admitted[i], s->taken, &keep);
            admit(s, q, admitted[i], keep);
        }
        /* cancellations of live sequences */
        for (int i = 0; i < s->m.n_slots; i++) {
            seq *q = &s->seqs[i];
            if (q->req && atomic_load(&q->req->cancelled))
                finish_cancelled(s, q);
        }
        step(s);
    }
    return NULL;
}

hearth_gen_sched *hearth_gen_sched_new(const hearth_gen_batch_model *m, const hearth_gen_sched_config *cfg, hearth_err *err)
{
    if (m->n_slots < 1 || cfg->n_parallel < 1 || cfg->n_parallel > m->n_slots || cfg->n_batch < 1 || cfg->max_queue < 1 ||
        !m->forward || !m->truncate || !m->detok_init || !m->detok_push) {
        hearth_err_set(err, HEARTH_EINVAL, "scheduler: %d parallel of %d slots, batch %d, queue %d: bad configuration",
                       cfg->n_parallel, m->n_slots, (int)cfg->n_batch, cfg->max_queue);
        return NULL;
    }
    hearth_gen_sched *s = calloc(1, sizeof *s);
    if (!s)
        goto oom;
    s->m = *m;
    s->cfg = *cfg;
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->wake, NULL);
    s->inited = true;
    hearth_buf_init(&s->text, (size_t)1 << 20);
    hearth_buf_init(&s->out, (size_t)1 << 20);
    int rows_max = cfg->n_batch + m->n_slots;
    s->seqs = calloc((size_t)m->n_slots, sizeof *s->seqs);
    s->taken = calloc((size_t)m->n_slots, sizeof *s->taken);
    s->b_tokens = malloc((size_t)rows_max * sizeof *s->b_tokens);
    s->b_slots = malloc((size_t)rows_max * sizeof *s->b_slots);
    s->b_want = malloc((size_t)rows_max * sizeof *s->b_want);
    s->b_seq = malloc((size_t)m->n_slots * sizeof *s->b_seq);
    s->b_draw = malloc((size_t)m->n_slots * sizeof *s->b_draw);
    if (s->cfg.decode_steps > m->steps_max)
        s->cfg.decode_steps = m->steps_max;
    if (!m->forward_steps || !m->forward_argmax)
        s->cfg.decode_steps = 1;
    const size_t run_rows = (size_t)(s->cfg.decode_steps > 1 ? s->cfg.decode_steps : 1) * (size_t)m->n_slots;
    s->b_run = malloc(run_rows * sizeof *s->b_run);
    s->b_req = malloc((size_t)m->n_slots * sizeof *s->b_req);
    s->b_logits = malloc((size_t)m->n_slots * (size_t)m->n_vocab * sizeof *s->b_logits);
    if (!s->seqs || !s->taken || !s->b_tokens || !s->b_slots || !s->b_want || !s->b_seq || !s->b_draw || !s->b_logits ||
        !s->b_run || !s->b_req)
        goto oom;
    for (int i = 0; i < m->n_slots; i++) {
        s->seqs[i].slot = i;
        s->seqs[i].detok = calloc(1, m->detok_size ? m->detok_size : 1);
        s->seqs[i].tokens = malloc((size_t)m->n_ctx * sizeof(int32_t));
        s->seqs[i].cap = m->n_ctx;
        if (!s->seqs[i].detok || !s->seqs[i].tokens)
            goto oom;
    }
    s->metrics.kv_positions_total = (int64_t)m->n_slots * m->n_ctx;
    s->warmed = !(cfg->warm_up && m->records);
    if (pthread_create(&s->thread, NULL, run, s) != 0) {
        hearth_err_set(err, HEARTH_EIO, "scheduler: cannot start its thread");
        hearth_gen_sched_free(s);
        return NULL;
    }
    s->started = true;
    pthread_mutex_lock(&s->lock);
    while (!s->warmed)
        pthread_cond_wait(&s->wake, &s->lock);
    pthread_mutex_unlock(&s->lock);
    return s;
oom:
    hearth_err_set(err, HEARTH_ENOMEM, "scheduler: out of memory");
    hearth_gen_sched_free(s);
    return NULL;
}

void hearth_gen_sched_free(hearth_gen_sched *s)
{
    if (!s)
        return;
    if (s->started) {
        pthread_mutex_lock(&s->lock);
        s->stopping = true;
        pthread_cond_signal(&s->wake);
        pthread_mutex_unlock(&s->lock);
        pthread_join(s->thread, NULL);
    }
    for (int i = 0; s->seqs && i < s->m.n_slots; i++) {
        seq *q = &s->seqs[i];
        if (q->req)
            finish(s, q, HEARTH_ENOTFOUND, HEARTH_GEN_CANCELLED, "the server is shutting down");
        free(q->tokens);
        free(q->detok);
        free(q->shown.grammar);
    }
    hearth_gen_req *req = s->q_head;
    while (req) {
        hearth_gen_req *next = req->link;
        req->on_done(req, HEARTH_ENOTFOUND, "the server is shutting down", NULL);
        req = next;
    }
    hearth_gen_slot_job *job = s->j_head;
    while (job) {
        hearth_gen_slot_job *next = job->link;
        job->on_done(job, HEARTH_ENOTFOUND, "the server is shutting down");
        job = next;
    }
    hearth_buf_deinit(&s->text);
    hearth_buf_deinit(&s->out);
    free(s->seqs);
    free(s->taken);
    free(s->b_tokens);
    free(s->b_slots);
    free(s->b_want);
    free(s->b_seq);
    free(s->b_draw);
    free(s->b_run);
    free(s->b_req);
    free(s->b_logits);
    free(s->allowed);
    if (s->inited) {
        pthread_mutex_destroy(&s->lock);
        pthread_cond_destroy(&s->wake);
    }
    free(s);
}

static int check_req(const hearth_gen_sched *s, const hearth_gen_req *req, hearth_err *err)
{
    if (req->n_prompt < 1)
        return hearth_err_set(err, HEARTH_EINVAL, "the prompt is empty");
    if (req->n_prompt >= s->m.n_ctx)
        return hearth_err_set(err, HEARTH_EINVAL, "the prompt is %lld tokens; the context holds %lld (leaving room for at least one generated token)",
                              (long long)req->n_prompt, (long long)s->m.n_ctx);
    for (int64_t i = 0; i < req->n_prompt; i++)
        if (req->prompt[i] < 0 || req->prompt[i] >= s->m.n_vocab)
            return hearth_err_set(err, HEARTH_EINVAL, "prompt token %lld is %d, not an id in 0..%d", (long long)i,
                                  (int)req->prompt[i], (int)s->m.n_vocab - 1);
    if (req->n_stop > HEARTH_GEN_MAX_STOP)
        return hearth_err_set(err, HEARTH_EINVAL, "at most %d stop strings", HEARTH_GEN_MAX_STOP);
    if (req->grammar && (!req->token_texts || req->token_texts->n != s->m.n_vocab))
        return hearth_err_set(err, HEARTH_EINVAL, "a grammar needs the texts of the model's %d tokens", (int)s->m.n_vocab);
    if (req->pin_slot && (req->id_slot < 0 || req->id_slot >= s->m.n_slots))
        return hearth_err_set(err, HEARTH_EINVAL, "id_slot %d: this server has slots 0..%d", req->id_slot, s->m.n_slots - 1);
    return HEARTH_OK;
}

int hearth_gen_sched_submit_all(hearth_gen_sched *s, hearth_gen_req *const *reqs, int n, hearth_err *err)
{
    for (int i = 0; i < n; i++) {
        int rc = check_req(s, reqs[i], err);
        if (rc)
            return rc;
    }
    uint64_t now = hearth_now_ns();
    pthread_mutex_lock(&s->lock);
    if (n > s->cfg.max_queue - s->queued || s->stopping) {
        pthread_mutex_unlock(&s->lock);
        return hearth_err_set(err, HEARTH_ELIMIT, "%d requests are already waiting (--max-queue); retry later", s->queued);
    }
    for (int i = 0; i < n; i++) {
        hearth_gen_req *req = reqs[i];
        req->link = NULL;
        req->submitted_ns = now;
        if (s->q_tail)
            s->q_tail->link = req;
        else
            s->q_head = req;
        s->q_tail = req;
        s->queued++;
    }
    s->metrics.queued = s->queued;
    pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(&s->lock);
    return HEARTH_OK;
}

int hearth_gen_sched_submit(hearth_gen_sched *s, hearth_gen_req *req, hearth_err *err)
{
    return hearth_gen_sched_submit_all(s, &req, 1, err);
}

void hearth_gen_sched_poke(hearth_gen_sched *s)
{
    pthread_mutex_lock(&s->lock);
    s->poked = true;
    pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(&s->lock);
}

void hearth_gen_sched_get_metrics(hearth_gen_sched *s, hearth_gen_sched_metrics *out)
{
    pthread_mutex_lock(&s->lock);
    *out = s->metrics;
    int64_t used = 0;
    for (int i = 0; i < s->m.n_slots; i++)
        used += s->seqs[i].shown_n_tokens;
    out->kv_positions_used = used;
    pthread_mutex_unlock(&s->lock);
}

int hearth_gen_sched_n_slots(const hearth_gen_sched *s) { return s->m.n_slots; }

int hearth_gen_sched_slots(hearth_gen_sched *s, hearth_gen_slot_info *out, int max)
{
    int n = max < s->m.n_slots ? max : s->m.n_slots;
    int rc = 0;
    memset(out, 0, (size_t)(n > 0 ? n : 0) * sizeof *out);
    pthread_mutex_lock(&s->lock);
    for (int i = 0; i < n && !rc; i++) {
        const seq *q = &s->seqs[i];
        hearth_gen_slot_info *o = &out[i];
        o->id = i;
        o->n_ctx = s->m.n_ctx;
        o->n_cached = q->shown_n_tokens;
        o->used = q->shown.used;
        o->sampling = q->shown.sampling;
        o->n_predict = q->shown.n_predict;
        o->n_probs = q->shown.n_probs;
        o->cache_prompt = q->shown.cache_prompt;
        o->n_decoded = q->shown_n_gen;
        if (q->shown.grammar && !(o->grammar = strdup(q->shown.grammar))) {
            rc = HEARTH_ENOMEM;
            break;
        }
        const hearth_gen_req *r = q->shown_req;
        if (!r)
            continue;
        /* the request and its prompt live until its on_done, which runs after
         * finish has cleared shown_req under this lock */
        o->processing = true;
        o->n_prompt = r->n_prompt;
        o->prompt = malloc((size_t)r->n_prompt * sizeof *o->prompt);
        if (o->prompt)
            memcpy(o->prompt, r->prompt, (size_t)r->n_prompt * sizeof *o->prompt);
        else
            rc = HEARTH_ENOMEM;
    }
    pthread_mutex_unlock(&s->lock);
    if (rc) {
        for (int i = 0; i < n; i++) {
            free(out[i].prompt);
            free(out[i].grammar);
        }
        return rc;
    }
    return n;
}

int hearth_gen_sched_slot_job(hearth_gen_sched *s, hearth_gen_slot_job *job, hearth_err *err)
{
    if (job->slot < 0 || job->slot >= s->m.n_slots)
        return hearth_err_set(err, HEARTH_EINVAL, "slot %d: this model has slots 0..%d", job->slot, s->m.n_slots - 1);
    pthread_mutex_lock(&s->lock);
    if (s->stopping) {
        pthread_mutex_unlock(&s->lock);
        return hearth_err_set(err, HEARTH_ELIMIT, "the server is shutting down");
    }
    job->link = NULL;
    if (s->j_tail)
        s->j_tail->link = job;
    else
        s->j_head = job;
    s->j_tail = job;
    pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(&s->lock);
    return HEARTH_OK;
}
