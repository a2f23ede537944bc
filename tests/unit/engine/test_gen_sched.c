/* Unit tests for engine/gen_sched: continuous batching with a fake model
 * whose next token depends on everything in its slot's cache, so a row fed
 * to the wrong slot, out of order or twice changes the text. Checks: batched
 * == alone, prefix reuse (longest match over all idle slots), n_predict, end
 * ids, stop strings, cancellation, the queue bound, context limits, the
 * slot snapshot (GET /slots), slot jobs (save/restore/erase) and the
 * context shift (the text after a shift is what the fake gives for the
 * shifted history, so a kept, dropped or re-fed position out of place
 * shows), the warm-up of a model that records passes, and greedy steps
 * drawn by the model (forward_argmax). */
#include "harness.h"

#include "engine/gen_sched.h"

#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#define VOCAB 32
#define SLOTS 4
#define CTX 64
#define END_ID 1

typedef struct fake {
    int32_t cache[SLOTS][CTX];
    int64_t len[SLOTS];
    _Atomic int forwards;
    _Atomic int max_rows;
    _Atomic int slow_us;
    _Atomic int argmax_forwards; /* forward_argmax calls */
    _Atomic int argmax_draws;    /* rows drawn by them */
    _Atomic int runs, run_passes, longest_run; /* forward_steps calls, their passes, the most in one */
    int checkpoint;          /* > 0: truncate rolls back only to multiples of it (a recurrent cache) */
} fake;

/* next token: a hash of the whole history, never the end id unless the history says so */
static int32_t next_of(const int32_t *hist, int64_t n)
{
    uint32_t h = 2166136261u;
    for (int64_t i = 0; i < n; i++)
        h = (h ^ (uint32_t)hist[i]) * 16777619u;
    if (n > 0 && hist[0] == 31 && n >= 6)
        return END_ID; /* prompts starting with 31 end after a few tokens */
    return (int32_t)(2 + h % (VOCAB - 2));
}

/* Appends the batch to the slots' caches; each wanted row's token (a hash
 * of its slot's history) goes out as one-hot logits (10 against 0) or, with
 * ids, as the id itself: what the logits' argmax is. */
static int fake_run(fake *f, int32_t n, const int32_t *tokens, const int32_t *slots, const bool *want, float *logits,
                    int32_t *ids, hearth_err *err)
{
    int row = 0;
    for (int32_t i = 0; i < n; i++) {
        int s = slots[i];
        if (f->len[s] >= CTX)
            return hearth_err_set(err, HEARTH_ELIMIT, "slot %d full", s);
        f->cache[s][f->len[s]++] = tokens[i];
        if (!want[i])
            continue;
        int32_t t = next_of(f->cache[s], f->len[s]);
        if (ids) {
            ids[row] = t;
            atomic_fetch_add(&f->argmax_draws, 1);
        } else {
            for (int v = 0; v < VOCAB; v++)
                logits[row * VOCAB + v] = v == t ? 10.0f : 0.0f;
        }
        row++;
    }
    return 0;
}

static int fake_forward(void *ctx, int32_t n, const int32_t *tokens, const int32_t *slots, const bool *want, float *logits,
                        hearth_err *err)
{
    fake *f = ctx;
    int rc = fake_run(f, n, tokens, slots, want, logits, NULL, err);
    if (rc)
        return rc;
    atomic_fetch_add(&f->forwards, 1);
    if (n > atomic_load(&f->max_rows))
        atomic_store(&f->max_rows, n);
    int us = atomic_load(&f->slow_us);
    if (us)
        usleep((useconds_t)us);
    return 0;
}

/* forward_argmax: the draws instead of the logits. */
static int fake_forward_argmax(void *ctx, int32_t n, const int32_t *tokens, const int32_t *slots, const bool *want,
                               int32_t *ids, hearth_err *err)
{
    fake *f = ctx;
    int rc = fake_run(f, n, tokens, slots, want, NULL, ids, err);
    if (rc == 0)
        atomic_fetch_add(&f->argmax_forwards, 1);
    int us = atomic_load(&f->slow_us);
    if (us)
        usleep((useconds_t)us);
    return rc;
}

/* forward_steps: the run's passes one after another, each row fed its
 * last draw; nothing runs when a slot would overflow (as llama's). */
static int fake_forward_steps(void *ctx, int32_t n, const int32_t *tokens, const int32_t *slots, int steps,
                              int32_t *ids, hearth_err *err)
{
    fake *f = ctx;
    int32_t cur[SLOTS];
    const bool want[SLOTS] = {true, true, true, true};
    if (n < 1 || n > SLOTS || steps < 2)
        return hearth_err_set(err, HEARTH_EINVAL, "a run of %d rows, %d steps", n, steps);
    for (int32_t r = 0; r < n; r++) {
        if (f->len[slots[r]] + steps > CTX)
            return hearth_err_set(err, HEARTH_ELIMIT, "slot %d full", slots[r]);
        cur[r] = tokens[r];
    }
    for (int j = 0; j < steps; j++) {
        int rc = fake_run(f, n, cur, slots, want, NULL, ids + j * n, err);
        if (rc)
            return rc;
        memcpy(cur, ids + j * n, (size_t)n * sizeof *cur);
        int us = atomic_load(&f->slow_us);
        if (us)
            usleep((useconds_t)us);
    }
    atomic_fetch_add(&f->runs, 1);
    atomic_fetch_add(&f->run_passes, steps);
    if (steps > atomic_load(&f->longest_run))
        atomic_store(&f->longest_run, steps);
    return 0;
}

static int64_t fake_truncate(void *ctx, int slot, int64_t n)
{
    fake *f = ctx;
    if (n < f->len[slot])
        f->len[slot] = f->checkpoint > 0 ? n / f->checkpoint * f->checkpoint : n;
    return f->len[slot];
}

static void detok_init(void *ctx, void *state) { (void)ctx, (void)state; }
static int detok_push(void *ctx, void *state, int32_t id, hearth_buf *out)
{
    char c = (char)('a' + (id % 26));
    return hearth_buf_append(out, &c, 1);
}

static hearth_gen_batch_model model_of(fake *f)
{
    hearth_gen_batch_model m = {
        .ctx = f, .n_vocab = VOCAB, .n_slots = SLOTS, .n_ctx = CTX, .end_ids = {END_ID}, .n_end_ids = 1,
        .forward = fake_forward, .truncate = fake_truncate, .detok_size = 8,
        .detok_init = detok_init, .detok_push = detok_push, .detok_flush = NULL,
    };
    return m;
}

typedef struct treq {
    hearth_gen_req req;
    int32_t prompt[CTX];
    char text[256];
    size_t n_text;
    _Atomic int done;
    int status;
    hearth_gen_stats stats;
} treq;

static void on_text(hearth_gen_req *r, const char *text, size_t n, int32_t token, const hearth_gen_probs *probs)
{
    treq *t = r->user;
    if (t->n_text + n < sizeof t->text) {
        memcpy(t->text + t->n_text, text, n);
        t->n_text += n;
        t->text[t->n_text] = 0;
    }
}

static void on_done(hearth_gen_req *r, int status, const char *msg, const hearth_gen_stats *st)
{
    treq *t = r->user;
    t->status = status;
    if (st)
        t->stats = *st;
    atomic_store(&t->done, 1);
}

static void make(treq *t, const int32_t *prompt, int n, int n_predict)
{
    memset(t, 0, sizeof *t);
    memcpy(t->prompt, prompt, (size_t)n * sizeof *prompt);
    t->req.prompt = t->prompt;
    t->req.n_prompt = n;
    hearth_sampler_params_default(&t->req.sampling);
    t->req.sampling.temperature = 0; /* greedy: the fake's one-hot logits decide */
    t->req.n_predict = n_predict;
    t->req.cache_prompt = true;
    t->req.on_text = on_text;
    t->req.on_done = on_done;
    t->req.user = t;
}

static void wait_done(treq *t)
{
    for (int i = 0; i < 5000 && !atomic_load(&t->done); i++)
        usleep(1000);
    CHECK(atomic_load(&t->done));
}

/* The 20-token prompt a, 3 tokens asked for, pinned to slot (id_slot), run
 * to its end. */
static void run_pinned(hearth_gen_sched *s, treq *t, const int32_t *a, int slot)
{
    make(t, a, 20, 3);
    t->req.pin_slot = true;
    t->req.id_slot = slot;
    CHECK_EQ_INT(hearth_gen_sched_submit(s, &t->req, NULL), 0);
    wait_done(t);
}

/* The text the fake model gives for prompt, computed directly. */
static void expected_text(const int32_t *prompt, int n, int n_predict, char *out)
{
    int32_t hist[CTX];
    memcpy(hist, prompt, (size_t)n * sizeof *prompt);
    int64_t len = n;
    int k = 0;
    for (int g = 0; g < n_predict; g++) {
        int32_t t = next_of(hist, len);
        if (t == END_ID)
            break;
        out[k++] = (char)('a' + t % 26);
        hist[len++] = t;
    }
    out[k] = 0;
}

static hearth_gen_sched *new_sched(fake *f, int parallel, int queue, int batch)
{
    hearth_gen_batch_model m = model_of(f);
    hearth_gen_sched_config cfg = {.n_parallel = parallel, .max_queue = queue, .n_batch = batch};
    return hearth_gen_sched_new(&m, &cfg, NULL);
}

static void batched_equals_alone(void)
{
    fake f = {0};
    hearth_gen_sched *s = new_sched(&f, 4, 16, 8); /* a small batch: prompts arrive in chunks */
    treq t[6];
    int32_t prompts[6][12];
    for (int i = 0; i < 6; i++) {
        for (int k = 0; k < 12; k++)
            prompts[i][k] = 2 + (i * 7 + k * 3) % 29;
        make(&t[i], prompts[i], 5 + i, 10 + i);
    }
    for (int i = 0; i < 6; i++)
        CHECK_EQ_INT(hearth_gen_sched_submit(s, &t[i].req, NULL), 0);
    for (int i = 0; i < 6; i++) {
        wait_done(&t[i]);
        char want[64];
        expected_text(prompts[i], 5 + i, 10 + i, want);
        CHECK_EQ_INT(t[i].status, 0);
        CHECK_EQ_STR(t[i].text, want);
        CHECK_EQ_INT(t[i].stats.n_gen, 10 + i);
        CHECK_EQ_INT(t[i].stats.finish, HEARTH_GEN_LENGTH);
    }
    CHECK(atomic_load(&f.max_rows) <= 8 + SLOTS);
    hearth_gen_sched_free(s);
}

/* Four requests of 8-token prompts (prompt i's token k: lo + (i a + k b) %
 * 27), submitted together on a new scheduler drawing on pool (may be NULL),
 * each n_predict tokens at temperature temp (seeds 1000 + i), run to their
 * end into t; returns the most rows a step ran. */
static int run_four(hearth_pool *pool, float temp, int lo, int a, int b, int n_predict, treq t[SLOTS],
                    int32_t prompts[SLOTS][8])
{
    fake f = {0};
    hearth_gen_batch_model m = model_of(&f);
    hearth_gen_sched_config cfg = {.n_parallel = SLOTS, .max_queue = 16, .n_batch = 64, .pool = pool};
    hearth_gen_sched *s = hearth_gen_sched_new(&m, &cfg, NULL);
    for (int i = 0; i < SLOTS; i++) {
        for (int k = 0; k < 8; k++)
            prompts[i][k] = lo + (i * a + k * b) % 27;
        make(&t[i], prompts[i], 8, n_predict);
        t[i].req.sampling.temperature = temp;
        t[i].req.sampling.seed = 1000 + (uint64_t)i;
    }
    CHECK_EQ_INT(hearth_gen_sched_submit_all(s, (hearth_gen_req *[]){&t[0].req, &t[1].req, &t[2].req, &t[3].req},
                                             SLOTS, NULL),
                 0);
    for (int i = 0; i < SLOTS; i++) {
        wait_done(&t[i]);
        CHECK_EQ_INT(t[i].status, 0);
    }
    hearth_gen_sched_free(s);
    return atomic_load(&f.max_rows);
}

/* The step's draws on a pool (draw_rows) give every sequence what the
 * scheduler thread alone gives: seeded sampling at a high temperature (the
 * fake's one-hot logits then leave real choices), four sequences decoding
 * together so each step has the rows to go to the pool, the same seeds in
 * both runs; and a greedy run on the pool equals the fake's own text. */
static void pooled_draws_equal_serial(void)
{
    hearth_pool *pool = hearth_pool_new(4);
    CHECK(pool != NULL && hearth_pool_size(pool) == 4);
    treq t[2][SLOTS];
    int32_t prompts[SLOTS][8];
    for (int run = 0; run < 2; run++)
        CHECK(run_four(run ? pool : NULL, 4.0f, 2, 5, 7, 24, t[run], prompts) >= 4); /* the sequences decoded together */
    int differ = 0;
    for (int i = 0; i < SLOTS; i++) {
        CHECK_EQ_STR(t[1][i].text, t[0][i].text);
        differ += strcmp(t[0][i].text, t[0][0].text) != 0;
    }
    CHECK(differ > 0); /* the seeds drew different texts: the comparison can fail */
    /* greedy on the pool: the fake's text */
    run_four(pool, 0.0f, 3, 11, 5, 16, t[0], prompts);
    for (int i = 0; i < SLOTS; i++) {
        char want[64];
        expected_text(prompts[i], 8, 16, want);
        CHECK_EQ_STR(t[0][i].text, want);
    }
    hearth_pool_free(pool);
}

static void prefix_reuse_picks_the_longest_match(void)
{
    fake f = {0};
    hearth_gen_sched *s = new_sched(&f, 1, 16, 64);
    int32_t a[20], b[20];
    for (int k = 0; k < 20; k++) {
        a[k] = 2 + k;
        b[k] = 20 - k / 2 + 2;
    }
    treq t;
    make(&t, a, 20, 3);
    hearth_gen_sched_submit(s, &t.req, NULL);
    wait_done(&t);
    make(&t, b, 20, 3);
    hearth_gen_sched_submit(s, &t.req, NULL);
    wait_done(&t);
    /* a's second turn: its prompt, its answer's tokens, then more */
    int32_t a2[30];
    memcpy(a2, a, sizeof a);
    for (int k = 20; k < 30; k++)
        a2[k] = 3 + k % 5;
    make(&t, a2, 30, 4);
    hearth_gen_sched_submit(s, &t.req, NULL);
    wait_done(&t);
    CHECK_EQ_INT(t.stats.n_cached, 20); /* all of a's prompt, from the older of two idle slots */
    char want[64];
    expected_text(a2, 30, 4, want);
    CHECK_EQ_STR(t.text, want);
    /* the same prompt again: everything but the last token is reused */
    make(&t, a2, 30, 4);
    hearth_gen_sched_submit(s, &t.req, NULL);
    wait_done(&t);
    CHECK_EQ_INT(t.stats.n_cached, 29);
    CHECK_EQ_STR(t.text, want);
    /* cache_prompt off: nothing reused */
    make(&t, a2, 30, 4);
    t.req.cache_prompt = false;
    hearth_gen_sched_submit(s, &t.req, NULL);
    wait_done(&t);
    CHECK_EQ_INT(t.stats.n_cached, 0);
    CHECK_EQ_STR(t.text, want);
    hearth_gen_sched_metrics mt;
    hearth_gen_sched_get_metrics(s, &mt);
    CHECK_EQ_INT(mt.prefix_hits, 2);
    CHECK_EQ_INT(mt.prompt_tokens_cached, 49);
    hearth_gen_sched_free(s);
}

/* llama-server's id_slot: a pinned request runs in its slot, so it reuses
 * that slot's prefix and no other's; pinned to a busy slot it waits in the
 * queue while a request behind it goes ahead; a slot past the cache is
 * refused at submission. */
static void pinned_slots(void)
{
    fake f = {0};
    atomic_store(&f.slow_us, 2000);
    hearth_gen_sched *s = new_sched(&f, 2, 16, 64);
    int32_t a[20], b[12];
    for (int k = 0; k < 20; k++)
        a[k] = 2 + k;
    for (int k = 0; k < 12; k++)
        b[k] = 30 - k;
    treq t, u, v;
    run_pinned(s, &t, a, 3);
    CHECK_EQ_INT(t.stats.slot, 3);
    CHECK_EQ_INT(t.stats.n_cached, 0);
    /* the same prompt pinned to another slot computes it all again; unpinned, it finds slot 3 */
    run_pinned(s, &t, a, 1);
    CHECK_EQ_INT(t.stats.slot, 1);
    CHECK_EQ_INT(t.stats.n_cached, 0);
    run_pinned(s, &t, a, 3);
    CHECK_EQ_INT(t.stats.slot, 3);
    CHECK_EQ_INT(t.stats.n_cached, 19);
    char want[64];
    expected_text(a, 20, 3, want);
    CHECK_EQ_STR(t.text, want);
    /* t holds slot 0 for a while; u, pinned there too, waits; v, behind u, runs at once */
    make(&t, a, 20, 40);
    t.req.pin_slot = true;
    t.req.id_slot = 0;
    make(&u, b, 12, 2);
    u.req.pin_slot = true;
    u.req.id_slot = 0;
    make(&v, b, 12, 2);
    CHECK_EQ_INT(hearth_gen_sched_submit(s, &t.req, NULL), 0);
    CHECK_EQ_INT(hearth_gen_sched_submit(s, &u.req, NULL), 0);
    CHECK_EQ_INT(hearth_gen_sched_submit(s, &v.req, NULL), 0);
    wait_done(&v);
    CHECK(!atomic_load(&t.done));
    CHECK(!atomic_load(&u.done));
    CHECK(v.stats.slot != 0);
    wait_done(&t);
    wait_done(&u);
    CHECK_EQ_INT(t.status, 0);
    CHECK_EQ_INT(u.status, 0);
    CHECK_EQ_INT(u.stats.slot, 0);
    expected_text(b, 12, 2, want);
    CHECK_EQ_STR(u.text, want);
    /* slots are 0..n_slots-1 */
    make(&t, a, 20, 3);
    t.req.pin_slot = true;
    t.req.id_slot = SLOTS;
    hearth_err err = {0};
    CHECK_EQ_INT(hearth_gen_sched_submit(s, &t.req, &err), HEARTH_EINVAL);
    CHECK(strstr(err.msg, "id_slot") != NULL);
    hearth_gen_sched_free(s);
}

/* A cache that keeps less than asked (a recurrent model's checkpoints):
 * the scheduler re-feeds from what was kept, and the text is unchanged. */
static void truncate_keeping_less_refeeds(void)
{
    fake f = {.checkpoint = 8};
    hearth_gen_sched *s = new_sched(&f, 1, 16, 64);
    int32_t a[30];
    for (int k = 0; k < 30; k++)
        a[k] = 2 + (k * 7) % 29;
    char want[64];
    expected_text(a, 30, 4, want);
    treq t;
    make(&t, a, 30, 4);
    hearth_gen_sched_submit(s, &t.req, NULL);
    wait_done(&t);
    CHECK_EQ_STR(t.text, want);
    /* again: 29 tokens would be reused; the cache keeps 24 (a multiple of 8) */
    make(&t, a, 30, 4);
    hearth_gen_sched_submit(s, &t.req, NULL);
    wait_done(&t);
    CHECK_EQ_INT(t.stats.n_cached, 24);
    CHECK_EQ_STR(t.text, want);
    hearth_gen_sched_free(s);
}

static const char *const STOPS[] = {"zz-never", NULL};

static void end_ids_stop_strings_and_context(void)
{
    fake f = {0};
    hearth_gen_sched *s = new_sched(&f, 2, 16, 64);
    int32_t p[3] = {31, 5, 6};
    treq t;
    make(&t, p, 3, 50);
    hearth_gen_sched_submit(s, &t.req, NULL);
    wait_done(&t);
    CHECK_EQ_INT(t.stats.finish, HEARTH_GEN_EOS);
    char want[64];
    expected_text(p, 3, 50, want);
    CHECK_EQ_STR(t.text, want);
    /* ignore_eos: the same prompt runs to n_predict, the end id's text included */
    make(&t, p, 3, 12);
    t.req.ignore_eos = true;
    hearth_gen_sched_submit(s, &t.req, NULL);
    wait_done(&t);
    CHECK_EQ_INT(t.stats.finish, HEARTH_GEN_LENGTH);
    CHECK_EQ_INT(t.stats.n_gen, 12);
    /* a stop string made of the 3rd and 4th characters of the answer */
    int32_t q[4] = {2, 3, 4, 5};
    expected_text(q, 4, 20, want);
    char stop[3] = {want[2], want[3], 0};
    const char *stops[1] = {stop};
    make(&t, q, 4, 20);
    t.req.stop = stops;
    t.req.n_stop = 1;
    hearth_gen_sched_submit(s, &t.req, NULL);
    wait_done(&t);
    CHECK_EQ_INT(t.stats.finish, HEARTH_GEN_STOP);
    CHECK(strstr(want, stop) != NULL);
    size_t cut = (size_t)(strstr(want, stop) - want);
    CHECK_EQ_INT(t.n_text, cut);
    CHECK(strncmp(t.text, want, cut) == 0);
    /* the context ends generation with "length" */
    int32_t longp[60];
    for (int k = 0; k < 60; k++)
        longp[k] = 2 + k % 20;
    make(&t, longp, 60, -1);
    hearth_gen_sched_submit(s, &t.req, NULL);
    wait_done(&t);
    CHECK_EQ_INT(t.stats.finish, HEARTH_GEN_LENGTH);
    CHECK_EQ_INT(t.stats.n_gen, CTX - 60 + 1);
    /* a prompt that fills the context is refused with both lengths */
    int32_t full[CTX];
    for (int k = 0; k < CTX; k++)
        full[k] = 2;
    make(&t, full, CTX, 5);
    hearth_err err = {0};
    CHECK_EQ_INT(hearth_gen_sched_submit(s, &t.req, &err), HEARTH_EINVAL);
    CHECK(strstr(err.msg, "64") != NULL);
    (void)STOPS;
    hearth_gen_sched_free(s);
}

static void cancel_and_queue_bound(void)
{
    fake f = {0};
    atomic_store(&f.slow_us, 2000);
    hearth_gen_sched *s = new_sched(&f, 1, 2, 64);
    int32_t p[4] = {2, 3, 4, 5};
    treq a, b, c, d;
    make(&a, p, 4, -1);
    make(&b, p, 4, 5);
    make(&c, p, 4, 5);
    make(&d, p, 4, 5);
    CHECK_EQ_INT(hearth_gen_sched_submit(s, &a.req, NULL), 0);
    usleep(20000); /* a is live; b and c wait */
    CHECK_EQ_INT(hearth_gen_sched_submit(s, &b.req, NULL), 0);
    CHECK_EQ_INT(hearth_gen_sched_submit(s, &c.req, NULL), 0);
    CHECK_EQ_INT(hearth_gen_sched_submit(s, &d.req, NULL), HEARTH_ELIMIT);
    atomic_store(&c.req.cancelled, 1); /* cancelled while queued */
    atomic_store(&a.req.cancelled, 1); /* cancelled while live: frees the slot for b */
    hearth_gen_sched_poke(s);
    wait_done(&a);
    wait_done(&b);
    wait_done(&c);
    CHECK_EQ_INT(a.status, HEARTH_ENOTFOUND);
    CHECK_EQ_INT(b.status, 0);
    CHECK_EQ_INT(b.stats.n_gen, 5);
    CHECK_EQ_INT(c.status, HEARTH_ENOTFOUND);
    hearth_gen_sched_metrics mt;
    hearth_gen_sched_get_metrics(s, &mt);
    CHECK_EQ_INT(mt.requests_cancelled, 2);
    CHECK_EQ_INT(mt.live, 0);
    hearth_gen_sched_free(s);
}

static void free_with_live_requests(void)
{
    fake f = {0};
    atomic_store(&f.slow_us, 1000);
    hearth_gen_sched *s = new_sched(&f, 1, 4, 64);
    int32_t p[4] = {2, 3, 4, 5};
    treq a, b;
    make(&a, p, 4, -1);
    make(&b, p, 4, -1);
    hearth_gen_sched_submit(s, &a.req, NULL);
    hearth_gen_sched_submit(s, &b.req, NULL);
    usleep(10000);
    hearth_gen_sched_free(s);
    CHECK(atomic_load(&a.done) && atomic_load(&b.done));
    CHECK(a.status == HEARTH_ENOTFOUND || a.status == 0);
    CHECK_EQ_INT(b.status, HEARTH_ENOTFOUND);
}

/* Requests submitted together start in the same forward pass (hearth run
 * --bench --parallel relies on it), and a group that does not fit the queue
 * is refused whole. */
static void submit_all_starts_together(void)
{
    fake f = {0};
    hearth_gen_sched *s = new_sched(&f, SLOTS, SLOTS, 64);
    treq t[SLOTS];
    hearth_gen_req *reqs[SLOTS];
    int32_t prompts[SLOTS][3];
    for (int i = 0; i < SLOTS; i++) {
        for (int k = 0; k < 3; k++)
            prompts[i][k] = 2 + (i * 5 + k) % 29;
        make(&t[i], prompts[i], 3, 4);
        t[i].req.cache_prompt = false;
        reqs[i] = &t[i].req;
    }
    CHECK_EQ_INT(hearth_gen_sched_submit_all(s, reqs, SLOTS, NULL), 0);
    for (int i = 0; i < SLOTS; i++) {
        wait_done(&t[i]);
        char want[64];
        expected_text(prompts[i], 3, 4, want);
        CHECK_EQ_INT(t[i].status, 0);
        CHECK_EQ_STR(t[i].text, want);
    }
    /* one pass of every prompt (4 x 3 rows), then 3 passes of 4 decode rows */
    CHECK_EQ_INT(atomic_load(&f.max_rows), SLOTS * 3);
    CHECK_EQ_INT(atomic_load(&f.forwards), 1 + 3);
    hearth_err err = {0};
    hearth_gen_req *too_many[SLOTS + 1];
    treq extra[SLOTS + 1];
    for (int i = 0; i <= SLOTS; i++) {
        make(&extra[i], prompts[0], 3, 1);
        too_many[i] = &extra[i].req;
    }
    CHECK_EQ_INT(hearth_gen_sched_submit_all(s, too_many, SLOTS + 1, &err), HEARTH_ELIMIT);
    hearth_gen_sched_free(s);
    for (int i = 0; i <= SLOTS; i++)
        CHECK(!atomic_load(&extra[i].done)); /* refused whole: none was queued */
}

/* A slot job: records what it saw; "restore" rewrites the slot to its ids
 * (the fake's cache too), "erase" empties it. */
typedef struct tjob {
    hearth_gen_slot_job job;
    fake *f;
    int32_t set[CTX];
    int64_t n_set;           /* -1: leave the slot as it is */
    int64_t saw;
    _Atomic int done;
    int status;
} tjob;

static int tjob_run(hearth_gen_slot_job *job, int32_t *tokens, int64_t *n, int64_t cap, char *msg, size_t msg_size)
{
    tjob *j = (tjob *)job;
    j->saw = *n;
    if (j->n_set >= 0) {
        memcpy(tokens, j->set, (size_t)j->n_set * sizeof *tokens);
        memcpy(j->f->cache[job->slot], j->set, (size_t)j->n_set * sizeof *tokens);
        j->f->len[job->slot] = j->n_set;
        *n = j->n_set;
    }
    return 0;
}

static void tjob_done(hearth_gen_slot_job *job, int status, const char *msg)
{
    tjob *j = (tjob *)job;
    j->status = status;
    atomic_store(&j->done, 1);
}

static void run_tjob(hearth_gen_sched *s, tjob *j, fake *f, int slot, const int32_t *set, int64_t n_set)
{
    memset(j, 0, sizeof *j);
    if (n_set > 0)
        memcpy(j->set, set, (size_t)n_set * sizeof *set);
    j->job.slot = slot;
    j->job.run = tjob_run;
    j->job.on_done = tjob_done;
    j->f = f;
    j->n_set = n_set;
    CHECK_EQ_INT(hearth_gen_sched_slot_job(s, &j->job, NULL), 0);
    for (int i = 0; i < 5000 && !atomic_load(&j->done); i++)
        usleep(1000);
    CHECK(atomic_load(&j->done));
}

static void slot_snapshot_and_jobs(void)
{
    fake f = {0};
    hearth_gen_sched *s = new_sched(&f, 1, 16, 64);
    CHECK_EQ_INT(hearth_gen_sched_n_slots(s), SLOTS);
    hearth_gen_slot_info info[SLOTS];
    CHECK_EQ_INT(hearth_gen_sched_slots(s, info, SLOTS), SLOTS);
    for (int i = 0; i < SLOTS; i++) {
        CHECK_EQ_INT(info[i].id, i);
        CHECK(!info[i].processing && !info[i].used && !info[i].prompt);
        CHECK_EQ_INT(info[i].n_ctx, CTX);
    }
    /* a slow request: the snapshot shows it live, with its prompt */
    int32_t p[8] = {2, 3, 4, 5, 6, 7, 8, 9};
    treq t;
    make(&t, p, 8, 20);
    t.req.sampling.top_k = 7;
    atomic_store(&f.slow_us, 2000);
    CHECK_EQ_INT(hearth_gen_sched_submit(s, &t.req, NULL), 0);
    int live = -1;
    for (int k = 0; k < 2000 && live < 0 && !atomic_load(&t.done); k++) {
        CHECK_EQ_INT(hearth_gen_sched_slots(s, info, SLOTS), SLOTS);
        for (int i = 0; i < SLOTS; i++) {
            if (info[i].processing && live < 0) {
                live = i;
                CHECK_EQ_INT(info[i].n_prompt, 8);
                CHECK(info[i].prompt && memcmp(info[i].prompt, p, sizeof p) == 0);
                CHECK_EQ_INT(info[i].sampling.top_k, 7);
                CHECK_EQ_INT(info[i].n_predict, 20);
            }
            free(info[i].prompt);
        }
        usleep(200);
    }
    CHECK(live >= 0);
    /* a job on the live slot is refused, not run */
    tjob j;
    if (live >= 0 && !atomic_load(&t.done)) {
        run_tjob(s, &j, &f, live, NULL, -1);
        CHECK(j.status == HEARTH_ELIMIT || j.status == 0); /* 0 only if the request ended first */
    }
    wait_done(&t);
    atomic_store(&f.slow_us, 0);
    CHECK_EQ_INT(hearth_gen_sched_slots(s, info, SLOTS), SLOTS);
    CHECK(!info[t.stats.slot].processing && info[t.stats.slot].used);
    CHECK_EQ_INT(info[t.stats.slot].n_decoded, 20);
    CHECK_EQ_INT(info[t.stats.slot].n_cached, 8 + 19); /* the last sampled token was never fed */
    /* a job sees what the slot holds; one that rewrites it ("restore") makes
     * the next request reuse the new prefix */
    run_tjob(s, &j, &f, t.stats.slot, NULL, -1);
    CHECK_EQ_INT(j.status, 0);
    CHECK_EQ_INT(j.saw, 8 + 19);
    int32_t q[10] = {9, 9, 8, 8, 7, 7, 6, 6, 5, 5};
    run_tjob(s, &j, &f, 3, NULL, 0); /* erase slot 3 */
    CHECK_EQ_INT(j.status, 0);
    run_tjob(s, &j, &f, 3, q, 10); /* "restore" q into it */
    CHECK_EQ_INT(j.status, 0);
    CHECK_EQ_INT(hearth_gen_sched_slots(s, info, SLOTS), SLOTS);
    CHECK_EQ_INT(info[3].n_cached, 10);
    treq u;
    make(&u, q, 10, 3);
    CHECK_EQ_INT(hearth_gen_sched_submit(s, &u.req, NULL), 0);
    wait_done(&u);
    CHECK_EQ_INT(u.stats.slot, 3);
    CHECK_EQ_INT(u.stats.n_cached, 9);
    char want[16];
    expected_text(q, 10, 3, want);
    CHECK_EQ_STR(u.text, want);
    /* a slot out of range is refused at once */
    tjob bad = {.job = {.slot = SLOTS, .run = tjob_run, .on_done = tjob_done}};
    CHECK_EQ_INT(hearth_gen_sched_slot_job(s, &bad.job, NULL), HEARTH_EINVAL);
    hearth_gen_sched_free(s);
}

/* The text the fake gives with context_shift: whenever the history fills
 * CTX before a sampled token is fed, keep its first keep positions and drop
 * half of the rest (llama-server's n_discard default). *shifts counts them. */
static void expected_shifted(const int32_t *prompt, int n, int n_predict, int keep, char *out, int *shifts)
{
    int32_t hist[CTX];
    memcpy(hist, prompt, (size_t)n * sizeof *prompt);
    int64_t len = n;
    int k = 0;
    *shifts = 0;
    for (int g = 0; g < n_predict; g++) {
        int32_t t = next_of(hist, len);
        if (t == END_ID)
            break;
        out[k++] = (char)('a' + t % 26);
        if (g + 1 == n_predict)
            break;
        if (len + 1 > CTX) {
            int64_t discard = (len - keep) / 2;
            memmove(hist + keep, hist + keep + discard, (size_t)(len - keep - discard) * sizeof *hist);
            len -= discard;
            (*shifts)++;
        }
        hist[len++] = t;
    }
    out[k] = 0;
}

static void context_shift_goes_on(void)
{
    int32_t p[60];
    for (int k = 0; k < 60; k++)
        p[k] = 2 + (k * 7) % 29;
    /* keep 0 and keep 5, a plain cache and one that rolls back only to
     * multiples of 8 (so the kept head is partly computed again), with a
     * second sequence decoding beside it in the same batches */
    for (int variant = 0; variant < 4; variant++) {
        fake f = {0};
        f.checkpoint = variant >= 2 ? 8 : 0;
        int keep = variant % 2 ? 5 : 0;
        hearth_gen_sched *s = new_sched(&f, 2, 16, 16);
        treq t, other;
        make(&t, p, 60, 100);
        t.req.context_shift = true;
        t.req.n_keep = keep;
        int32_t q[3] = {3, 4, 5};
        make(&other, q, 3, 30);
        hearth_gen_req *both[2] = {&t.req, &other.req};
        CHECK_EQ_INT(hearth_gen_sched_submit_all(s, both, 2, NULL), 0);
        wait_done(&t);
        wait_done(&other);
        char want[256];
        int shifts;
        expected_shifted(p, 60, 100, keep, want, &shifts);
        CHECK(shifts >= 2); /* 100 tokens past a 64-token context: more than one shift */
        CHECK_EQ_INT(t.status, 0);
        CHECK_EQ_INT(t.stats.finish, HEARTH_GEN_LENGTH);
        CHECK_EQ_INT(t.stats.n_gen, (int64_t)strlen(want));
        CHECK_EQ_INT(t.stats.n_gen, 100);
        CHECK_EQ_INT(t.stats.n_shifts, shifts);
        CHECK_EQ_STR(t.text, want);
        char want_other[64];
        expected_text(q, 3, 30, want_other);
        CHECK_EQ_STR(other.text, want_other);
        CHECK_EQ_INT(other.stats.n_shifts, 0);
        /* the slot's cache is the shifted history: a request that repeats it reuses it */
        CHECK(f.len[t.stats.slot] <= CTX);
        hearth_gen_sched_free(s);
    }
    /* off: the same request ends at the context */
    fake f = {0};
    hearth_gen_sched *s = new_sched(&f, 2, 16, 16);
    treq t;
    make(&t, p, 60, 100);
    hearth_gen_sched_submit(s, &t.req, NULL);
    wait_done(&t);
    CHECK_EQ_INT(t.stats.finish, HEARTH_GEN_LENGTH);
    CHECK_EQ_INT(t.stats.n_gen, CTX - 60 + 1);
    CHECK_EQ_INT(t.stats.n_shifts, 0);
    /* n_keep past the context leaves nothing to drop: llama-server's bound (n_ctx - 4) still shifts */
    make(&t, p, 60, 20);
    t.req.context_shift = true;
    t.req.n_keep = 1000;
    hearth_gen_sched_submit(s, &t.req, NULL);
    wait_done(&t);
    CHECK_EQ_INT(t.stats.n_gen, 20);
    CHECK(t.stats.n_shifts >= 1);
    hearth_gen_sched_free(s);
}

/* The warm-up: on a model that records passes, hearth_gen_sched_new
 * returns after one prompt chunk of n_batch tokens and decode steps of 1
 * .. n_parallel rows twice each, with every cache it used empty again (a
 * request after it gives the text of an empty cache); on one that does
 * not, or without warm_up, it runs nothing. */
/* A scheduler over the fake with forward_argmax (f counts its calls). */
static hearth_gen_sched *argmax_sched(fake *f)
{
    hearth_gen_batch_model m = model_of(f);
    m.forward_argmax = fake_forward_argmax;
    hearth_gen_sched_config cfg = {.n_parallel = 4, .max_queue = 16, .n_batch = 8};
    return hearth_gen_sched_new(&m, &cfg, NULL);
}

/* Submits t[k] for k in [k0, k1) (request k: prompts[k]'s first 6 + k
 * tokens, 9 + k asked for), waits, and checks each text against the fake's. */
static void run_checked(hearth_gen_sched *s, treq *t, int32_t prompts[][12], int k0, int k1)
{
    for (int k = k0; k < k1; k++)
        CHECK_EQ_INT(hearth_gen_sched_submit(s, &t[k].req, NULL), 0);
    for (int k = k0; k < k1; k++) {
        wait_done(&t[k]);
        char want[64];
        expected_text(prompts[k], 6 + k, 9 + k, want);
        CHECK_EQ_INT(t[k].status, 0);
        CHECK_EQ_STR(t[k].text, want);
    }
}

/* Request k >= 1 made to need the logits: 1 reports probabilities, 2
 * samples (the fake's logits are one-hot at 10 against 0: min_p keeps the
 * one token, so the text is the greedy one), 3 has a repeat penalty. */
static void make_logits_user(treq *t, int32_t prompts[][12], int k)
{
    make(&t[k], prompts[k], 6 + k, 9 + k);
    if (k == 1)
        t[k].req.n_probs = 2;
    else if (k == 2)
        t[k].req.sampling.temperature = 0.8f;
    else
        t[k].req.sampling.repeat_penalty = 1.1f;
}

/* With forward_argmax, a step whose rows all draw greedily (no penalties,
 * grammar or probabilities) takes it and its ids become the tokens; a step
 * with one row that samples or reports probabilities takes the logits.
 * The texts are the fake's either way (a draw misplaced between rows, or
 * read from logits never written, changes them). */
static void greedy_steps_draw_on_the_device(void)
{
    treq t[4];
    int32_t prompts[4][12];
    for (int i = 0; i < 4; i++)
        for (int k = 0; k < 12; k++)
            prompts[i][k] = 2 + (i * 5 + k * 7) % 29;
    /* all greedy: the device's draws alone */
    fake f = {0};
    hearth_gen_sched *s = argmax_sched(&f);
    for (int i = 0; i < 4; i++)
        make(&t[i], prompts[i], 6 + i, 9 + i);
    run_checked(s, t, prompts, 0, 4);
    CHECK(atomic_load(&f.argmax_draws) >= 4 * 9);
    CHECK_EQ_INT(atomic_load(&f.forwards), 0);
    hearth_gen_sched_free(s);
    /* one greedy request beside three that need the logits: the same texts */
    fake g = {0};
    s = argmax_sched(&g);
    make(&t[0], prompts[0], 6, 9);
    for (int k = 1; k < 4; k++)
        make_logits_user(t, prompts, k);
    run_checked(s, t, prompts, 0, 4);
    CHECK(atomic_load(&g.forwards) > 0);
    hearth_gen_sched_free(s);
    /* alone, none of those three has a row drawn by the device (a step of
     * prompt tokens that wants no row may take either forward) */
    for (int k = 1; k < 4; k++) {
        fake h = {0};
        s = argmax_sched(&h);
        make_logits_user(t, prompts, k);
        run_checked(s, t, prompts, k, k + 1);
        CHECK_MSG(atomic_load(&h.argmax_draws) == 0 && atomic_load(&h.forwards) > 0,
                  "request %d: %d forwards with logits, %d rows drawn by the device", k, atomic_load(&h.forwards),
                  atomic_load(&h.argmax_draws));
        hearth_gen_sched_free(s);
    }
}

/* A scheduler over the fake with forward_steps (runs of at most 6). */
static hearth_gen_sched *steps_sched(fake *f, int parallel, int decode_steps)
{
    hearth_gen_batch_model m = model_of(f);
    m.forward_argmax = fake_forward_argmax;
    m.forward_steps = fake_forward_steps;
    m.steps_max = 6;
    hearth_gen_sched_config cfg = {.n_parallel = parallel, .max_queue = 16, .n_batch = 8, .decode_steps = decode_steps};
    return hearth_gen_sched_new(&m, &cfg, NULL);
}

/* Whether each finished request's slot holds exactly what it fed: its
 * prompt and every token it drew but the last (never fed back). Read
 * after the scheduler is freed (its thread truncates after on_done). */
static void check_cache_lengths(const fake *f, const treq *t, int n)
{
    for (int k = 0; k < n; k++) {
        int64_t fed = t[k].req.n_prompt + t[k].stats.n_gen - 1;
        int64_t held = f->len[t[k].stats.slot];
        if (f->checkpoint > 0)
            CHECK_MSG(held <= fed && held > fed - f->checkpoint, "request %d: slot %d holds %lld, fed %lld", k,
                      t[k].stats.slot, (long long)held, (long long)fed);
        else
            CHECK_MSG(held == fed, "request %d: slot %d holds %lld, fed %lld", k, t[k].stats.slot, (long long)held,
                      (long long)fed);
    }
}

static void on_text_cancel_at_2(hearth_gen_req *r, const char *text, size_t n, int32_t token,
                                const hearth_gen_probs *probs)
{
    on_text(r, text, n, token, probs);
    if (((treq *)r->user)->n_text >= 2)
        atomic_store(&r->cancelled, true);
}

/* Runs of steps (forward_steps): the texts are the steps' texts; requests
 * that end inside a run (their lengths, an end id, a stop string, a
 * cancellation from the text callback) leave it, and their slots keep
 * only what they fed, also in a cache that truncates to checkpoints (the
 * scheduler's record then shrinks with it, so a request that reuses the
 * prefix gets the text of its whole prompt). No run while a request waits
 * in the queue, none with decode_steps 1, none longer than steps_max. */
static void runs_of_steps_take_their_draws_as_steps(void)
{
    treq t[4];
    int32_t prompts[4][12];
    for (int i = 0; i < 4; i++)
        for (int k = 0; k < 12; k++)
            prompts[i][k] = 2 + (i * 5 + k * 7) % 29;
    prompts[3][0] = 31; /* ends with the end id after 6 positions: inside a run */
    for (int cp = 0; cp < 2; cp++) {
        fake f = {.checkpoint = cp ? 4 : 0};
        hearth_gen_sched *s = steps_sched(&f, 4, 8);
        for (int i = 0; i < 4; i++)
            make(&t[i], prompts[i], 6 + i, 9 + i); /* run_checked's lengths: the shorter end inside runs */
        run_checked(s, t, prompts, 0, 3);
        CHECK(atomic_load(&f.runs) > 0 && atomic_load(&f.longest_run) == 6);
        /* a stop string inside the answer, and the end id */
        char want[64];
        expected_text(prompts[1], 7, 20, want);
        char stop[3] = {want[4], want[5], 0};
        const char *stops[1] = {stop};
        make(&t[1], prompts[1], 7, 20);
        t[1].req.stop = stops;
        t[1].req.n_stop = 1;
        make(&t[3], prompts[3], 3, 20);
        CHECK_EQ_INT(hearth_gen_sched_submit(s, &t[1].req, NULL), 0);
        CHECK_EQ_INT(hearth_gen_sched_submit(s, &t[3].req, NULL), 0);
        wait_done(&t[1]);
        wait_done(&t[3]);
        CHECK_EQ_INT(t[1].stats.finish, HEARTH_GEN_STOP);
        CHECK_EQ_INT((int)t[1].n_text, (int)(strstr(want, stop) - want));
        CHECK_EQ_INT(t[3].stats.finish, HEARTH_GEN_EOS);
        CHECK_EQ_INT(t[3].stats.n_gen, 4);
        /* the prompt of request 2 and its answer again, one token more:
         * the cached prefix is what the slot really holds */
        int32_t longer[40];
        int n_long = 8 + (int)strlen(t[2].text) + 1;
        CHECK_EQ_INT(t[2].stats.slot != t[1].stats.slot && t[2].stats.slot != t[3].stats.slot, 1);
        /* the answer's ids (the text shows them mod 26 only) */
        int32_t hist[CTX];
        memcpy(hist, prompts[2], 8 * sizeof *hist);
        for (int g = 8; g < n_long - 1; g++)
            hist[g] = next_of(hist, g);
        hist[n_long - 1] = 5;
        memcpy(longer, hist, (size_t)n_long * sizeof *longer);
        treq u;
        make(&u, longer, n_long, 6);
        CHECK_EQ_INT(hearth_gen_sched_submit(s, &u.req, NULL), 0);
        wait_done(&u);
        expected_text(longer, n_long, 6, want);
        CHECK_EQ_STR(u.text, want);
        CHECK(u.stats.n_cached > 0);
        hearth_gen_sched_free(s);
        check_cache_lengths(&f, t, 2); /* request 2's slot is u's now */
        check_cache_lengths(&f, t + 3, 1);
        check_cache_lengths(&f, &u, 1);
    }
    /* cancelled from its text callback after 2 tokens: noticed before the
     * next pass, as before the next step */
    for (int steps = 1; steps <= 8; steps += 7) {
        fake f = {0};
        hearth_gen_sched *s = steps_sched(&f, 4, steps);
        make(&t[0], prompts[0], 6, 12);
        t[0].req.on_text = on_text_cancel_at_2;
        CHECK_EQ_INT(hearth_gen_sched_submit(s, &t[0].req, NULL), 0);
        wait_done(&t[0]);
        CHECK_EQ_INT(t[0].status, HEARTH_ENOTFOUND);
        CHECK_EQ_INT(t[0].stats.n_gen, 2);
        hearth_gen_sched_free(s);
        check_cache_lengths(&f, t, 1);
        CHECK_EQ_INT(atomic_load(&f.runs) > 0, steps > 1);
    }
    /* passes of 3 ms: no run (they would pass the scheduler's 5 ms), the
     * same text */
    {
        fake f = {.slow_us = 3000};
        hearth_gen_sched *s = steps_sched(&f, 4, 8);
        make(&t[0], prompts[0], 6, 9);
        run_checked(s, t, prompts, 0, 1);
        hearth_gen_sched_free(s);
        CHECK_MSG(atomic_load(&f.runs) == 0, "%d runs of passes of 3 ms", atomic_load(&f.runs));
    }
    /* one sequence at a time, two queued together: the first takes single
     * steps while the second waits, the second runs */
    fake f = {0};
    hearth_gen_sched *s = steps_sched(&f, 1, 8);
    make(&t[0], prompts[0], 6, 12);
    make(&t[1], prompts[1], 7, 12);
    hearth_gen_req *both[2] = {&t[0].req, &t[1].req};
    CHECK_EQ_INT(hearth_gen_sched_submit_all(s, both, 2, NULL), 0);
    wait_done(&t[0]);
    wait_done(&t[1]);
    hearth_gen_sched_free(s);
    CHECK_MSG(atomic_load(&f.argmax_forwards) >= 12 && atomic_load(&f.runs) > 0,
              "%d single steps, %d runs: the first request's steps are single while one waits",
              atomic_load(&f.argmax_forwards), atomic_load(&f.runs));
}

/* The warm-up runs a lone sequence's runs too, each length 2 .. the
 * config's decode_steps twice (a device records them whole, keyed by
 * length), and leaves every cache empty; then a greedy request's text is
 * its steps' as ever. */
/* After a warm-up: every slot's cache empty, then a greedy request of n
 * tokens answers the text it would have without one; frees s. */
static void empty_then_greedy(hearth_gen_sched *s, const fake *f, int n)
{
    for (int i = 0; i < SLOTS; i++)
        CHECK_EQ_INT((int)f->len[i], 0);
    int32_t prompt[5] = {7, 3, 9, 4, 12};
    treq t;
    make(&t, prompt, 5, n);
    CHECK_EQ_INT(hearth_gen_sched_submit(s, &t.req, NULL), 0);
    wait_done(&t);
    char want[32];
    expected_text(prompt, 5, n, want);
    CHECK_EQ_STR(t.text, want);
    hearth_gen_sched_free(s);
}

static void warm_up_runs_the_run_lengths(void)
{
    fake f = {0};
    hearth_gen_batch_model m = model_of(&f);
    m.forward_argmax = fake_forward_argmax;
    m.forward_steps = fake_forward_steps;
    m.steps_max = 6;
    m.records = true;
    hearth_gen_sched_config cfg = {.n_parallel = 2, .max_queue = 4, .n_batch = 8, .decode_steps = 4, .warm_up = true};
    hearth_gen_sched *s = hearth_gen_sched_new(&m, &cfg, NULL);
    CHECK(s != NULL);
    if (!s)
        return;
    CHECK_EQ_INT(atomic_load(&f.runs), 2 * 3);    /* lengths 2, 3, 4, twice each */
    CHECK_EQ_INT(atomic_load(&f.run_passes), 2 * (2 + 3 + 4));
    CHECK_EQ_INT(atomic_load(&f.longest_run), 4);
    empty_then_greedy(s, &f, 9);
}

static void warm_up_runs_the_step_shapes(void)
{
    for (int k = 0; k < 3; k++) {
        fake f = {0};
        hearth_gen_batch_model m = model_of(&f);
        m.records = k != 1;
        hearth_gen_sched_config cfg = {.n_parallel = 3, .max_queue = 4, .n_batch = 16, .warm_up = k != 2};
        hearth_gen_sched *s = hearth_gen_sched_new(&m, &cfg, NULL);
        CHECK(s != NULL);
        const bool warm = k == 0;
        CHECK_EQ_INT(atomic_load(&f.forwards), warm ? 1 + 2 * 3 : 0); /* read once new has returned */
        CHECK_EQ_INT(atomic_load(&f.max_rows), warm ? 16 : 0);
        empty_then_greedy(s, &f, 6);
    }
}

int main(void)
{
    RUN(batched_equals_alone);
    RUN(pooled_draws_equal_serial);
    RUN(prefix_reuse_picks_the_longest_match);
    RUN(pinned_slots);
    RUN(truncate_keeping_less_refeeds);
    RUN(end_ids_stop_strings_and_context);
    RUN(cancel_and_queue_bound);
    RUN(free_with_live_requests);
    RUN(submit_all_starts_together);
    RUN(slot_snapshot_and_jobs);
    RUN(context_shift_goes_on);
    RUN(warm_up_runs_the_step_shapes);
    RUN(warm_up_runs_the_run_lengths);
    RUN(greedy_steps_draw_on_the_device);
    RUN(runs_of_steps_take_their_draws_as_steps);
    TEST_EXIT();
}
