/* grammar_match.c: which texts can follow the accepted prefix of a grammar.
 *
 * The matcher is llama.cpp's pushdown simulation: its state is a set of
 * stacks of element positions, one per way the text so far can be parsed.
 * Each stack's top is the character set the next character must match (an
 * empty stack: that parse is complete). A character advances every stack
 * whose top matches it (the top is replaced by the element after it) and
 * the rest die; a stack whose new top is a rule reference is expanded, one
 * stack per alternative of that rule, until every top is a character set
 * again. The parser refused left recursion, so expansion ends. Stacks that
 * come out equal are kept once, which keeps ambiguous grammars (JSON's
 * optional spaces) from multiplying them.
 *
 * A token is checked by running its characters through copies of the set
 * (two scratch sets, used in turn, so a check allocates nothing once they
 * have grown) and accepted by keeping the result. A token may end inside a
 * UTF-8 character: the bytes seen are kept, and the token is allowed when
 * some top can still match a character that starts with them (its range of
 * code points meets a set's ranges; a negated set is assumed to).
 *
 * Bounds (stacks, depth, expansion steps) keep a hostile grammar from
 * taking the server's memory or time: past them the text is refused, which
 * can only narrow what the grammar lets through.
 *
 * Rejected: precomputing a token trie per grammar (llama.cpp's matcher does
 * without; the scheduler masks the vocabulary only when the sampled token
 * is refused); persistent linked stacks (sharing tails saves copies, but
 * the stacks here are a few dozen positions and copying them is cheap). */
#include "engine/grammar_impl.h"

#include <stdlib.h>
#include <string.h>

enum {
    MAX_STACKS = 4096,     /* live parses at once */
    MAX_DEPTH = 8192,      /* positions in one stack */
    MAX_STEPS = 1 << 18,   /* stacks expanded for one character */
};
/* Work budgets, in stack positions copied plus stacks compared: a grammar
 * whose parses multiply (nested repetitions of optional rules: a fuzzed
 * "[ \t]{0,20}" in a rule used everywhere took 0.3 s a character) would
 * otherwise hold the scheduler thread, and every other slot's generation,
 * for seconds a token and minutes a vocabulary mask. Past a budget the
 * matcher is spent: it refuses every text from then on, and the scheduler
 * ends the request with an error naming it. CALL: one allows or accept
 * (milliseconds); MASK: one mask of the whole vocabulary (well under a
 * second), the JSON grammars of json_schema use a few percent of it on a
 * 150k vocabulary. */
#define CALL_BUDGET ((int64_t)1 << 22)
#define MASK_BUDGET ((int64_t)1 << 28)

/* The smallest code point of each UTF-8 length (shorter forms are overlong). */
static const uint32_t UTF8_MIN[5] = {0, 0, 0x80, 0x800, 0x10000};

/* A set of stacks: stack i is el[off[i] .. off[i+1]), the top last. */
typedef struct sset {
    uint32_t *el;
    size_t n_el, cap_el;
    uint32_t *off;        /* (n + 1) */
    size_t n, cap_off;
} sset;

struct hearth_grammar_matcher {
    const hearth_grammar *g;
    sset cur;             /* the accepted text's parses */
    uint32_t part_val;    /* the bits of an incomplete UTF-8 character */
    int part_left;        /* its continuation bytes still to come (0: none) */
    int part_len;         /* its whole length in bytes */
    sset a, b;            /* scratch for checks */
    sset work;            /* stacks still to expand */
    uint32_t *tmp;        /* (MAX_DEPTH + 1) one popped stack */
    int64_t budget;       /* work left (CALL_BUDGET per call, MASK_BUDGET for a mask) */
    bool in_mask;         /* a mask is running: its calls share its budget */
    bool spent;           /* a budget ran out: every text is refused */
};

/* Takes cost from m's budget; false (and m spent) when it runs out. */
static bool charge(hearth_grammar_matcher *m, int64_t cost)
{
    m->budget -= cost;
    if (m->budget < 0)
        m->spent = true;
    return !m->spent;
}

static void sset_clear(sset *s)
{
    s->n = 0;
    s->n_el = 0;
    if (s->off)
        s->off[0] = 0;
}

static void sset_free(sset *s)
{
    free(s->el);
    free(s->off);
}

static void sset_swap(sset *x, sset *y)
{
    sset t = *x;
    *x = *y;
    *y = t;
}

/* Appends st[0..len) and, when extra is not UINT32_MAX, one more position. */
static int sset_push(sset *s, const uint32_t *st, size_t len, uint32_t extra)
{
    size_t add = len + (extra != UINT32_MAX);
    if (s->n_el + add > s->cap_el) {
        size_t cap = s->cap_el ? s->cap_el : 64;
        while (cap < s->n_el + add)
            cap *= 2;
        uint32_t *e = realloc(s->el, cap * sizeof *e);
        if (!e)
            return -1;
        s->el = e;
        s->cap_el = cap;
    }
    if (s->n + 2 > s->cap_off) {
        size_t cap = s->cap_off ? s->cap_off * 2 : 16;
        uint32_t *o = realloc(s->off, cap * sizeof *o);
        if (!o)
            return -1;
        if (!s->off)
            o[0] = 0;
        s->off = o;
        s->cap_off = cap;
    }
    if (len)
        memcpy(s->el + s->n_el, st, len * sizeof *st);
    if (extra != UINT32_MAX)
        s->el[s->n_el + len] = extra;
    s->n_el += add;
    s->off[++s->n] = (uint32_t)s->n_el;
    return 0;
}

static int add_unique(sset *out, const uint32_t *st, size_t len)
{
    for (size_t i = 0; i < out->n; i++) {
        size_t l = out->off[i + 1] - out->off[i];
        if (l != len)
            continue;
        if (!len)
            return 0;
        const uint32_t *x = out->el + out->off[i]; /* l > 0: el is allocated */
        if (x[len - 1] == st[len - 1] && !memcmp(x, st, len * sizeof *st))
            return 0;
    }
    if (out->n >= MAX_STACKS)
        return -1;
    return sset_push(out, st, len, UINT32_MAX);
}

/* Expands every stack of m->work into out until each top is a character
 * set (or the stack is empty). -1 past a bound or out of memory. */
static int expand(hearth_grammar_matcher *m, sset *out)
{
    const hearth_grammar *g = m->g;
    size_t steps = 0;
    while (m->work.n) {
        if (++steps > MAX_STEPS)
            return -1;
        size_t k = m->work.n - 1, len = m->work.off[k + 1] - m->work.off[k];
        if (!charge(m, (int64_t)len + 1 + (int64_t)out->n))
            return -1;
        if (len) /* an empty stack may have no elements at all (el NULL): no pointer arithmetic on it */
            memcpy(m->tmp, m->work.el + m->work.off[k], len * sizeof *m->tmp);
        m->work.n = k;
        m->work.n_el = m->work.off[k];
        if (!len || g->el[m->tmp[len - 1]].type == GE_CHARS) {
            if (add_unique(out, m->tmp, len))
                return -1;
            continue;
        }
        uint32_t pos = m->tmp[len - 1], rule = g->el[pos].a;
        size_t base = len - 1;
        if (!hearth_gelem_is_end(&g->el[pos + 1]))
            m->tmp[base++] = pos + 1;
        if (base + 1 > MAX_DEPTH)
            return -1;
        for (uint32_t alt = g->rule_start[rule];;) {
            uint32_t first = hearth_gelem_is_end(&g->el[alt]) ? UINT32_MAX : alt;
            if (sset_push(&m->work, m->tmp, base, first))
                return -1;
            while (!hearth_gelem_is_end(&g->el[alt]))
                alt++;
            if (g->el[alt].type == GE_END)
                break;
            alt++;
        }
    }
    return 0;
}

static bool chars_match(const hearth_grammar *g, const hearth_gelem *e, uint32_t cp)
{
    const uint32_t *r = g->ranges + 2 * (size_t)e->a;
    bool in = false;
    for (uint32_t i = 0; i < e->b && !in; i++)
        in = cp >= r[2 * i] && cp <= r[2 * i + 1];
    return in != (bool)e->negated;
}

/* Whether some code point in [lo, hi] can match e. */
static bool chars_may_match(const hearth_grammar *g, const hearth_gelem *e, uint32_t lo, uint32_t hi)
{
    const uint32_t *r = g->ranges + 2 * (size_t)e->a;
    for (uint32_t i = 0; i < e->b; i++) {
        if (e->negated && r[2 * i] <= lo && r[2 * i + 1] >= hi)
            return false; /* one excluded range covers them all */
        if (!e->negated && r[2 * i] <= hi && r[2 * i + 1] >= lo)
            return true;
    }
    return e->negated;
}

/* out = the stacks of in after the character cp (expanded). */
static int step(hearth_grammar_matcher *m, const sset *in, uint32_t cp, sset *out)
{
    const hearth_grammar *g = m->g;
    sset_clear(out);
    sset_clear(&m->work);
    for (size_t i = 0; i < in->n; i++) {
        size_t len = in->off[i + 1] - in->off[i];
        if (!len) /* an empty stack set may have no elements at all (el NULL) */
            continue;
        const uint32_t *st = in->el + in->off[i];
        if (!chars_match(g, &g->el[st[len - 1]], cp))
            continue;
        uint32_t next = st[len - 1] + 1;
        if (sset_push(&m->work, st, len - 1, hearth_gelem_is_end(&g->el[next]) ? UINT32_MAX : next))
            return -1;
    }
    return expand(m, out);
}

hearth_grammar_matcher *hearth_grammar_matcher_new(const hearth_grammar *g, hearth_err *err)
{
    hearth_grammar_matcher *m = calloc(1, sizeof *m);
    if (!m || !(m->tmp = malloc((MAX_DEPTH + 1) * sizeof *m->tmp)))
        goto fail;
    m->g = g;
    m->budget = CALL_BUDGET;
    sset_clear(&m->cur);
    for (uint32_t alt = g->rule_start[g->root];;) {
        uint32_t first = hearth_gelem_is_end(&g->el[alt]) ? UINT32_MAX : alt;
        if (sset_push(&m->work, NULL, 0, first))
            goto fail;
        while (!hearth_gelem_is_end(&g->el[alt]))
            alt++;
        if (g->el[alt].type == GE_END)
            break;
        alt++;
    }
    if (expand(m, &m->cur))
        goto fail;
    return m;
fail:
    hearth_grammar_matcher_free(m);
    hearth_err_set(err, HEARTH_ENOMEM, "grammar: out of memory starting the matcher (or its root expands past the bounds)");
    return NULL;
}

void hearth_grammar_matcher_free(hearth_grammar_matcher *m)
{
    if (!m)
        return;
    sset_free(&m->cur);
    sset_free(&m->a);
    sset_free(&m->b);
    sset_free(&m->work);
    free(m->tmp);
    free(m);
}

/* Runs text through the accepted state; with commit, keeps the result. */
static bool walk(hearth_grammar_matcher *m, const char *text, size_t n, bool commit)
{
    if (!m->in_mask)
        m->budget = CALL_BUDGET;
    if (m->spent || !n || !text[0])
        return false;
    const sset *in = &m->cur;
    sset *bufs[2] = {&m->a, &m->b};
    int which = 0;
    uint32_t val = m->part_val;
    int left = m->part_left, len = m->part_len;
    for (size_t i = 0; i < n; i++) {
        unsigned c = (unsigned char)text[i];
        uint32_t cp;
        if (left == 0) {
            if (c < 0x80) {
                cp = c;
            } else {
                left = (c >> 5) == 6 ? 1 : (c >> 4) == 14 ? 2 : (c >> 3) == 30 ? 3 : 0;
                if (!left)
                    return false;
                len = left + 1;
                val = c & (0x3fu >> left);
                continue;
            }
        } else {
            if ((c & 0xc0) != 0x80)
                return false;
            val = val << 6 | (c & 0x3f);
            if (--left)
                continue;
            cp = val;
            /* an overlong form ("\xC1\xBB" for '{'), a surrogate or past U+10FFFF is not text */
            if (cp < UTF8_MIN[len] || (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
                return false;
        }
        sset *out = bufs[which];
        which ^= 1;
        if (step(m, in, cp, out) || out->n == 0)
            return false;
        in = out;
    }
    if (left) {
        uint32_t lo = val << (6 * left), hi = lo | ((1u << (6 * left)) - 1);
        if (hi < UTF8_MIN[len] || lo > 0x10ffff)
            return false;
        lo = lo < UTF8_MIN[len] ? UTF8_MIN[len] : lo;
        bool ok = false;
        for (size_t i = 0; i < in->n && !ok; i++) {
            size_t depth = in->off[i + 1] - in->off[i];
            ok = depth && chars_may_match(m->g, &m->g->el[in->el[in->off[i + 1] - 1]], lo, hi);
        }
        if (!ok)
            return false;
    }
    if (commit) {
        if (in != &m->cur)
            sset_swap(&m->cur, (sset *)in);
        m->part_val = val;
        m->part_left = left;
        m->part_len = len;
    }
    return true;
}

bool hearth_grammar_matcher_allows(hearth_grammar_matcher *m, const char *text, size_t n)
{
    return walk(m, text, n, false);
}

int hearth_grammar_matcher_accept(hearth_grammar_matcher *m, const char *text, size_t n)
{
    return walk(m, text, n, true) ? HEARTH_OK : HEARTH_EINVAL;
}

void hearth_grammar_matcher_mask_begin(hearth_grammar_matcher *m)
{
    m->in_mask = true;
    m->budget = MASK_BUDGET;
}

void hearth_grammar_matcher_mask_end(hearth_grammar_matcher *m)
{
    m->in_mask = false;
}

bool hearth_grammar_matcher_spent(const hearth_grammar_matcher *m)
{
    return m->spent;
}

bool hearth_grammar_matcher_complete(const hearth_grammar_matcher *m)
{
    if (m->part_left)
        return false;
    for (size_t i = 0; i < m->cur.n; i++)
        if (m->cur.off[i + 1] == m->cur.off[i])
            return true;
    return false;
}
