/* test_generate.c: generating one sequence, as `hearth run` does, on the
 * batching scheduler with one slot; and the stop-string hold-back.
 *
 * These assertions were written for engine/generate.c, the single-sequence
 * loop that `hearth run` had until 2026-12-02; that loop is gone (one
 * generation loop: gen_sched.c), and the same checks now drive the scheduler
 * through a one-slot model table. Where the two differed, the check says so:
 * a scheduler request always samples at least one token, and its own length
 * limit lets the last token be sampled from the last position's logits
 * (hearth run caps n_predict at the context's room, cli/run.c); a prompt that
 * leaves no room is refused at submit, with EINVAL.
 *
 * The fake model is scripted: after a sequence of length L its logits put
 * a large value on script[L] (or, in "hash" mode, are a hash of the
 * position and the last token), so greedy decoding must reproduce the
 * script and the expected text is known independently of the loop. Token
 * texts are raw byte strings that may split UTF-8 characters, which the
 * loop must reassemble. */
#include "engine/gen_sched.h"
#include "harness.h"

#include <stdatomic.h>
#include <stdint.h>
#include <unistd.h>

#define VOCAB 64
#define EOS_ID 2

typedef struct fake {
    const char *text[VOCAB];   /* bytes of each token (NULL: empty) */
    int32_t script[256];       /* token wanted after a sequence of length i */
    int n_script;
    bool hash_mode;
    int64_t len;               /* sequence length */
    int64_t n_ctx;
    int n_forward;             /* calls */
    int32_t chunk[16];         /* sizes of the first calls */
    int32_t last;
    bool fail;                 /* every forward fails ("device lost") */
} fake;

/* The logits after the sequence has length f->len, last token f->last. */
static void fake_logits(const fake *f, float *logits)
{
    for (int i = 0; i < VOCAB; i++) {
        if (f->hash_mode) {
            uint32_t h = (uint32_t)(f->len * 2654435761u) ^ (uint32_t)(f->last * 40503u) ^ (uint32_t)(i * 2246822519u);
            h ^= h >> 15;
            h *= 2654435761u;
            h ^= h >> 13;
            logits[i] = (float)(h % 10000) / 1000.0f;
        } else {
            logits[i] = 0;
        }
    }
    if (!f->hash_mode && f->len < f->n_script)
        logits[f->script[f->len]] = 20;
}

/* The scheduler's forward over the one slot: rows with want[i] get logits, in order. */
static int fake_forward(void *ctx, int32_t n, const int32_t *tokens, const int32_t *slots, const bool *want,
                        float *logits, hearth_err *err)
{
    fake *f = ctx;
    if (f->fail)
        return hearth_err_set(err, HEARTH_EIO, "device lost");
    if (f->len + n > f->n_ctx)
        return hearth_err_set(err, HEARTH_ELIMIT, "fake: past the context");
    if (f->n_forward < 16)
        f->chunk[f->n_forward] = n;
    f->n_forward++;
    int row = 0;
    for (int32_t i = 0; i < n; i++) {
        if (slots[i] != 0)
            return hearth_err_set(err, HEARTH_EINVAL, "fake: slot %d of 1", (int)slots[i]);
        f->len++;
        f->last = tokens[i];
        if (want[i])
            fake_logits(f, logits + (size_t)row++ * VOCAB);
    }
    return 0;
}

static int64_t fake_truncate(void *ctx, int slot, int64_t n)
{
    fake *f = ctx;
    if (n < f->len)
        f->len = n;
    return f->len;
}

static void fake_detok_init(void *ctx, void *state) { (void)ctx, (void)state; }

static int fake_detok(void *ctx, void *state, int32_t id, hearth_buf *out)
{
    fake *f = ctx;
    if (id < 0 || id >= VOCAB)
        return HEARTH_EINVAL;
    return f->text[id] ? hearth_buf_appends(out, f->text[id]) : 0;
}

static hearth_gen_batch_model fake_model(fake *f)
{
    hearth_gen_batch_model m = {.ctx = f, .n_vocab = VOCAB, .n_slots = 1, .n_ctx = f->n_ctx, .n_end_ids = 1,
                                .forward = fake_forward, .truncate = fake_truncate, .detok_size = 8,
                                .detok_init = fake_detok_init, .detok_push = fake_detok};
    m.end_ids[0] = EOS_ID;
    return m;
}

typedef struct collected {
    char text[4096];
    size_t len;
    int n_pieces;
    bool all_valid;            /* every piece was whole UTF-8 */
    char pieces[64][64];
    int cancel_after;          /* > 0: cancel at that piece */
    _Atomic int done;
    int status;                /* on_done's */
    char msg[256];
    hearth_gen_stats stats;
} collected;

/* An independent UTF-8 validator (no overlongs, no surrogates). */
static bool valid_utf8(const unsigned char *p, size_t n)
{
    size_t i = 0;
    while (i < n) {
        unsigned c = p[i];
        size_t k = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        if (!k || i + k > n)
            return false;
        for (size_t j = 1; j < k; j++)
            if ((p[i + j] & 0xC0) != 0x80)
                return false;
        i += k;
    }
    return true;
}

static void collect(hearth_gen_req *req, const char *text, size_t n, int32_t token, const hearth_gen_probs *probs)
{
    collected *c = req->user;
    if (!valid_utf8((const unsigned char *)text, n))
        c->all_valid = false;
    if (c->len + n < sizeof c->text) {
        memcpy(c->text + c->len, text, n);
        c->len += n;
        c->text[c->len] = 0;
    }
    if (c->n_pieces < 64 && n < 64) {
        memcpy(c->pieces[c->n_pieces], text, n);
        c->pieces[c->n_pieces][n] = 0;
    }
    c->n_pieces++;
    if (c->cancel_after > 0 && c->n_pieces >= c->cancel_after)
        atomic_store(&req->cancelled, 1);
}

static void collect_done(hearth_gen_req *req, int status, const char *msg, const hearth_gen_stats *st)
{
    collected *c = req->user;
    c->status = status;
    snprintf(c->msg, sizeof c->msg, "%s", msg ? msg : "");
    if (st)
        c->stats = *st;
    atomic_store(&c->done, 1);
}

static hearth_sampler_params greedy(void)
{
    hearth_sampler_params sp;
    hearth_sampler_params_default(&sp);
    sp.temperature = 0;
    sp.seed = 1;
    return sp;
}

/* Generates from prompt[0..n_prompt) on a one-slot scheduler over f and
 * waits for the end: the submit's status, else on_done's (in c->status). */
static int generate(fake *f, const int32_t *prompt, int64_t n_prompt, int n_predict, int32_t n_batch,
                    const char *const *stop, int n_stop, collected *c, hearth_gen_stats *r, hearth_err *err)
{
    hearth_gen_batch_model m = fake_model(f);
    hearth_gen_sched_config cfg = {.n_parallel = 1, .max_queue = 1, .n_batch = n_batch > 0 ? n_batch : 512};
    int cancel_after = c->cancel_after;
    memset(c, 0, sizeof *c);
    c->cancel_after = cancel_after;
    c->all_valid = true;
    memset(r, 0, sizeof *r);
    r->stop_index = -1;
    hearth_gen_sched *s = hearth_gen_sched_new(&m, &cfg, err);
    if (!s)
        return HEARTH_ENOMEM;
    hearth_gen_req req = {.prompt = prompt, .n_prompt = n_prompt, .sampling = greedy(), .n_predict = n_predict,
                          .stop = stop, .n_stop = n_stop, .on_text = collect, .on_done = collect_done, .user = c};
    int rc = hearth_gen_sched_submit(s, &req, err);
    while (rc == 0 && !atomic_load(&c->done))
        usleep(200);
    hearth_gen_sched_free(s);
    if (rc)
        return rc;
    *r = c->stats;
    if (c->status && c->status != HEARTH_ENOTFOUND)
        hearth_err_set(err, c->status, "%s", c->msg);
    return c->status == HEARTH_ENOTFOUND ? 0 : c->status;
}

/* Runs f with prompt {1} (BOS, no text) and the given stops; greedy. */
static int run_fake(fake *f, int n_predict, const char *const *stop, int n_stop, collected *c, hearth_gen_stats *r,
                    hearth_err *err)
{
    static const int32_t bos = 1;
    return generate(f, &bos, 1, n_predict, 0, stop, n_stop, c, r, err);
}

/* Token i of the script has text words[i]; ids from 10 up. */
static void script_words(fake *f, const char *const *words, int n)
{
    memset(f, 0, sizeof *f);
    f->n_ctx = 200;
    f->n_script = 1 + n;
    for (int i = 0; i < n; i++) {
        f->text[10 + i] = words[i];
        f->script[1 + i] = 10 + i;
    }
}

static void test_stop_split_across_tokens(void)
{
    const char *words[] = {"Hel", "lo W", "or", "ld! and", " more"};
    const char *stop[] = {"World"};
    fake f;
    script_words(&f, words, 5);
    collected c = {0};
    hearth_gen_stats r;
    CHECK_EQ_INT(run_fake(&f, 10, stop, 1, &c, &r, NULL), 0);
    CHECK_EQ_STR(c.text, "Hello ");
    CHECK_EQ_INT(r.finish, HEARTH_GEN_STOP);
    CHECK_EQ_INT(r.stop_index, 0);
    CHECK_EQ_STR(hearth_gen_finish_name(r.finish), "stop");
    for (int i = 0; i < c.n_pieces && i < 64; i++)
        CHECK_MSG(!strchr(c.pieces[i], 'W'), "piece %d '%s' leaks the stop's start", i, c.pieces[i]);
    CHECK_EQ_INT(r.n_gen, 4);
    /* the stop's last token was not run through the model */
    CHECK_EQ_INT(f.n_forward, 1 + 3);
}

static void test_partial_stop_is_released(void)
{
    const char *words[] = {"Hel", "lo W", "onder", "ful"};
    const char *stop[] = {"World", "xyz"};
    fake f;
    script_words(&f, words, 4);
    collected c = {0};
    hearth_gen_stats r;
    CHECK_EQ_INT(run_fake(&f, 4, stop, 2, &c, &r, NULL), 0);
    CHECK_EQ_STR(c.text, "Hello Wonderful");
    CHECK_EQ_INT(r.finish, HEARTH_GEN_LENGTH);
    CHECK_EQ_INT(r.stop_index, -1);
    /* a dangling stop prefix at the very end is released at the finish */
    const char *words2[] = {"ab", "c W", "or"};
    script_words(&f, words2, 3);
    CHECK_EQ_INT(run_fake(&f, 3, stop, 1, &c, &r, NULL), 0);
    CHECK_EQ_STR(c.text, "abc Wor");
}

static void test_stopper_every_split(void)
{
    /* every way of cutting the text into three pushes gives the same output */
    const char *text = "say a\xC3\xA9 <|end|> never";
    const char *stop[] = {"<|end|>", "zz"};
    size_t n = strlen(text);
    int bad = 0;
    for (size_t a = 0; a <= n; a++)
        for (size_t b = a; b <= n; b++) {
            hearth_stopper s;
            hearth_buf out;
            hearth_buf_init(&out, 1024);
            CHECK_EQ_INT(hearth_stopper_init(&s, stop, 2, NULL), 0);
            int r1 = hearth_stopper_push(&s, text, a, &out);
            bool ok = out.len == 0 || valid_utf8((const unsigned char *)out.data, out.len);
            int r2 = hearth_stopper_push(&s, text + a, b - a, &out);
            int r3 = hearth_stopper_push(&s, text + b, n - b, &out);
            hearth_stopper_finish(&s, &out);
            if (!ok || r1 < 0 || r2 < 0 || r3 < 0 || (r1 | r2 | r3) != 1 || s.matched != 0 || out.len != 8 ||
                memcmp(out.data, "say a\xC3\xA9 ", 8) != 0)
                bad++;
            hearth_stopper_deinit(&s);
            hearth_buf_deinit(&out);
        }
    CHECK_EQ_INT(bad, 0);
}

static void test_stopper_rejects_bad_strings(void)
{
    hearth_stopper s;
    hearth_err err = {0};
    const char *empty[] = {""};
    CHECK_EQ_INT(hearth_stopper_init(&s, empty, 1, &err), HEARTH_EINVAL);
    CHECK(strstr(err.msg, "empty") != NULL);
    char longs[HEARTH_GEN_MAX_STOP_LEN + 2];
    memset(longs, 'x', sizeof longs - 1);
    longs[sizeof longs - 1] = 0;
    const char *lp[] = {longs};
    CHECK_EQ_INT(hearth_stopper_init(&s, lp, 1, &err), HEARTH_EINVAL);
    CHECK_EQ_INT(hearth_stopper_init(&s, lp, HEARTH_GEN_MAX_STOP + 1, &err), HEARTH_EINVAL);
}

static void test_eos_stops(void)
{
    const char *words[] = {"one", " two", " three"};
    fake f;
    script_words(&f, words, 3);
    f.script[3] = EOS_ID; /* replaces " three" */
    f.text[EOS_ID] = "<eos-text-must-not-show>";
    collected c = {0};
    hearth_gen_stats r;
    CHECK_EQ_INT(run_fake(&f, -1, NULL, 0, &c, &r, NULL), 0);
    CHECK_EQ_STR(c.text, "one two");
    CHECK_EQ_INT(r.finish, HEARTH_GEN_EOS);
    CHECK_EQ_INT(r.n_gen, 3);
    CHECK_EQ_INT(r.n_prompt, 1);
    CHECK_EQ_STR(hearth_gen_finish_name(r.finish), "stop");
}

static void test_n_predict(void)
{
    const char *words[] = {"a", "b", "c", "d", "e", "f", "g"};
    fake f;
    script_words(&f, words, 7);
    collected c = {0};
    hearth_gen_stats r;
    CHECK_EQ_INT(run_fake(&f, 5, NULL, 0, &c, &r, NULL), 0);
    CHECK_EQ_STR(c.text, "abcde");
    CHECK_EQ_INT(r.n_gen, 5);
    CHECK_EQ_INT(r.finish, HEARTH_GEN_LENGTH);
    CHECK_EQ_STR(hearth_gen_finish_name(r.finish), "length");
    /* the prompt's forward plus one per kept token but the last */
    CHECK_EQ_INT(f.n_forward, 1 + 4);
    CHECK(r.prompt_ms >= 0 && r.gen_ms >= 0);
    /* n_predict 0: the scheduler samples one token all the same (the old
     * loop generated none; hearth run now skips the scheduler then, run.c) */
    script_words(&f, words, 7);
    CHECK_EQ_INT(run_fake(&f, 0, NULL, 0, &c, &r, NULL), 0);
    CHECK_EQ_INT(r.n_gen, 1);
    CHECK_EQ_STR(c.text, "a");
    CHECK_EQ_INT(r.finish, HEARTH_GEN_LENGTH);
    CHECK_EQ_INT(f.n_forward, 1);
}

static void test_context_limit(void)
{
    const char *words[] = {"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"};
    fake f;
    script_words(&f, words, 10);
    f.n_ctx = 6;
    collected c = {0};
    hearth_gen_stats r;
    /* sequence = BOS + 5 fed = 6 positions, the 6th token sampled from the
     * last position's logits (the old loop stopped at 5, and hearth run still
     * does, by capping n_predict at n_ctx - prompt): "length", with no
     * forward past the context */
    CHECK_EQ_INT(run_fake(&f, 100, NULL, 0, &c, &r, NULL), 0);
    CHECK_EQ_STR(c.text, "abcdef");
    CHECK_EQ_INT(r.finish, HEARTH_GEN_LENGTH);
    CHECK_EQ_INT(r.n_gen, 6);
    CHECK(f.len <= 6);
    /* hearth run's cap: BOS + 5 generated */
    script_words(&f, words, 10);
    f.n_ctx = 6;
    CHECK_EQ_INT(run_fake(&f, 6 - 1, NULL, 0, &c, &r, NULL), 0);
    CHECK_EQ_STR(c.text, "abcde");
    CHECK_EQ_INT(r.n_gen, 5);
    CHECK_EQ_INT(r.finish, HEARTH_GEN_LENGTH);
    CHECK(f.len <= 6);

    /* a prompt longer than the context: a clear error naming both lengths */
    script_words(&f, words, 10);
    f.n_ctx = 10;
    int32_t prompt[11] = {1, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19};
    hearth_err err = {0};
    CHECK_EQ_INT(generate(&f, prompt, 11, 4, 0, NULL, 0, &c, &r, &err), HEARTH_EINVAL);
    CHECK_MSG(strstr(err.msg, "11") && strstr(err.msg, "10"), "%s", err.msg);
    CHECK_EQ_INT(f.n_forward, 0);
    /* a prompt that exactly fills it leaves no room for a token: refused too
     * (hearth run reports nothing generated, "length", without a pass) */
    CHECK_EQ_INT(generate(&f, prompt, 10, 4, 0, NULL, 0, &c, &r, &err), HEARTH_EINVAL);
    CHECK_EQ_INT(f.n_forward, 0);
    /* an empty prompt is refused */
    CHECK_EQ_INT(generate(&f, prompt, 0, 4, 0, NULL, 0, &c, &r, &err), HEARTH_EINVAL);
}

static void test_utf8_pieces_complete(void)
{
    /* é = C3 A9, € = E2 82 AC, 😀 = F0 9F 98 80: split across tokens */
    const char *words[] = {"caf\xC3", "\xA9 \xE2", "\x82", "\xAC \xF0\x9F", "\x98", "\x80!"};
    fake f;
    script_words(&f, words, 6);
    collected c = {0};
    hearth_gen_stats r;
    CHECK_EQ_INT(run_fake(&f, 6, NULL, 0, &c, &r, NULL), 0);
    CHECK_EQ_STR(c.text, "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80!");
    CHECK(c.all_valid);
    /* a character cut off by the end of generation becomes U+FFFD, not a broken byte */
    script_words(&f, words, 6);
    CHECK_EQ_INT(run_fake(&f, 4, NULL, 0, &c, &r, NULL), 0);
    CHECK_EQ_STR(c.text, "caf\xC3\xA9 \xE2\x82\xAC \xEF\xBF\xBD");
    CHECK(c.all_valid);
    /* with a stop string whose first byte appears inside a character */
    const char *stop[] = {"\xE2\x82\xAC x"};
    script_words(&f, words, 6);
    CHECK_EQ_INT(run_fake(&f, 6, stop, 1, &c, &r, NULL), 0);
    CHECK(c.all_valid);
    CHECK_EQ_STR(c.text, "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80!");
}

static void test_prefill_chunks(void)
{
    fake f;
    memset(&f, 0, sizeof f);
    f.n_ctx = 4096;
    f.hash_mode = true;
    static int32_t prompt[1300];
    for (int i = 0; i < 1300; i++)
        prompt[i] = 10 + i % 40;
    collected c = {0};
    hearth_gen_stats r;
    CHECK_EQ_INT(generate(&f, prompt, 1300, 2, 512, NULL, 0, &c, &r, NULL), 0);
    CHECK_EQ_INT(f.chunk[0], 512);
    CHECK_EQ_INT(f.chunk[1], 512);
    CHECK_EQ_INT(f.chunk[2], 276);
    CHECK_EQ_INT(f.chunk[3], 1);
    CHECK_EQ_INT(f.n_forward, 4);
    CHECK_EQ_INT(r.n_prompt, 1300);
}

/* Greedy decoding picks the argmax at every step (checked against the fake's
 * logits recomputed here) and two runs agree. */
static void test_greedy_determinism(void)
{
    char first[4096];
    for (int run = 0; run < 2; run++) {
        fake f;
        memset(&f, 0, sizeof f);
        f.n_ctx = 100;
        f.hash_mode = true;
        static char names[VOCAB][8];
        for (int i = 0; i < VOCAB; i++) {
            snprintf(names[i], sizeof names[i], "<%d>", i);
            f.text[i] = names[i];
        }
        f.text[EOS_ID] = NULL;
        collected c = {0};
        hearth_gen_stats r;
        CHECK_EQ_INT(run_fake(&f, 30, NULL, 0, &c, &r, NULL), 0);
        /* replay: the argmax of the fake's logits after each token */
        fake g;
        memset(&g, 0, sizeof g);
        g.n_ctx = 100;
        g.hash_mode = true;
        char want[4096] = "";
        size_t wl = 0;
        float lg[VOCAB];
        int32_t tok = 1;
        for (int step = 0; step < r.n_gen; step++) {
            const int32_t slot0 = 0;
            const bool want_row = true;
            fake_forward(&g, 1, &tok, &slot0, &want_row, lg, NULL);
            int best = 0;
            for (int i = 1; i < VOCAB; i++)
                if (lg[i] > lg[best])
                    best = i;
            tok = best;
            if (tok == EOS_ID)
                break;
            wl += (size_t)snprintf(want + wl, sizeof want - wl, "<%d>", tok);
        }
        CHECK_EQ_STR(c.text, want);
        CHECK(r.n_gen > 0);
        if (run == 0)
            snprintf(first, sizeof first, "%s", c.text);
        else
            CHECK_EQ_STR(c.text, first);
    }
}

static void test_cancel(void)
{
    const char *words[] = {"a", "b", "c", "d", "e"};
    fake f;
    script_words(&f, words, 5);
    collected c = {0};
    c.cancel_after = 2;
    hearth_gen_stats r;
    CHECK_EQ_INT(run_fake(&f, 5, NULL, 0, &c, &r, NULL), 0);
    CHECK_EQ_STR(c.text, "ab");
    CHECK_EQ_INT(r.finish, HEARTH_GEN_CANCELLED);
}

static void test_model_error_propagates(void)
{
    fake f;
    memset(&f, 0, sizeof f);
    f.n_ctx = 10;
    f.fail = true;
    collected c = {0};
    hearth_gen_stats r;
    hearth_err err = {0};
    CHECK_EQ_INT(run_fake(&f, 3, NULL, 0, &c, &r, &err), HEARTH_EIO);
    CHECK(strstr(err.msg, "device lost") != NULL);
}

int main(void)
{
    RUN(test_stop_split_across_tokens);
    RUN(test_partial_stop_is_released);
    RUN(test_stopper_every_split);
    RUN(test_stopper_rejects_bad_strings);
    RUN(test_eos_stops);
    RUN(test_n_predict);
    RUN(test_context_limit);
    RUN(test_utf8_pieces_complete);
    RUN(test_prefill_chunks);
    RUN(test_greedy_determinism);
    RUN(test_cancel);
    RUN(test_model_error_propagates);
    TEST_EXIT();
}
