/* test_onnx_lanes.c: the lane schedule of a plan's steps and the arena laid
 * out for it (onnx_lanes.c, onnx_plan_mem.c's plan_arena), over the shared
 * vision models (../shared/vision/).
 *
 * The oracle is independent of the scheduler: a step's reads and writes as
 * element sets of the values' storage (a copy's written elements counted
 * one by one), so two steps conflict where one writes elements the other
 * touches; the order the schedule promises is rebuilt from its own edges
 * (each lane's order, each wait on the step that set the mark). Checked:
 * every conflicting pair is ordered; marks are set before they are waited
 * for, once each; a lane's first step waits; the end joins every lane; and
 * the arena holds under many orders the schedule allows (random topological
 * orders of its edges): each value's bytes, tagged by its writer, still
 * carry its tag when any step reads it and when the walk ends (outputs). */
#include "harness.h"
#include "onnx_shared.h"

#include "models/onnx.h"
#include "models/onnx_plan.h"

#include <stdlib.h>
#include <string.h>

static const char *g_model = ""; /* the model being checked, for messages */

static int root(const hearth_plan *p, int id)
{
    return id < 0 || p->v[id].is_const ? -1 : p->v[id].root;
}

/* The elements of its output's storage step s writes (a bitmap of n). */
static void written(const hearth_plan *p, const plan_step *s, unsigned char *bits, int64_t n)
{
    if (s->kind != STEP_COPY) {
        memset(bits, 1, (size_t)n);
        return;
    }
    const hearth_strided_desc *d = &s->u.cp;
    int64_t idx[HEARTH_VIS_DIMS] = {0}, total = 1;
    for (int k = 0; k < d->ndim; k++)
        total *= d->dims[k];
    for (int64_t e = 0; e < total; e++) {
        int64_t at = s->y_off;
        for (int k = 0; k < d->ndim; k++)
            at += idx[k] * d->dst_stride[k];
        if (at >= 0 && at < n)
            bits[at] = 1;
        for (int k = d->ndim - 1; k >= 0; k--) {
            if (++idx[k] < d->dims[k])
                break;
            idx[k] = 0;
        }
    }
}

/* Whether steps i and j conflict: one writes elements the other reads or writes. */
static bool conflict(const hearth_plan *p, int i, int j)
{
    const plan_step *a = &p->steps[i], *b = &p->steps[j];
    int wa = root(p, a->y), wb = root(p, b->y);
    if (wa >= 0 && (wa == root(p, b->a) || wa == root(p, b->b)))
        return true;
    if (wb >= 0 && (wb == root(p, a->a) || wb == root(p, a->b)))
        return true;
    if (wa < 0 || wa != wb)
        return false;
    int64_t n = p->v[wa].n;
    unsigned char *x = calloc((size_t)n + 1, 1), *y = calloc((size_t)n + 1, 1);
    written(p, a, x, n);
    written(p, b, y, n);
    bool meet = false;
    for (int64_t e = 0; e < n && !meet; e++)
        meet = x[e] && y[e];
    free(x);
    free(y);
    return meet;
}

/* The schedule's edges as predecessor lists: pred[i] holds up to
 * HEARTH_VIS_LANES + 1 steps (-1 ends). */
static int *edges(const plan_lanes *l)
{
    int w = HEARTH_VIS_LANES + 2;
    int *pred = malloc((size_t)l->n_steps * (size_t)w * sizeof *pred);
    int last[HEARTH_VIS_LANES];
    for (int k = 0; k < HEARTH_VIS_LANES; k++)
        last[k] = -1;
    for (int i = 0; i < l->n_steps; i++) {
        int n = 0;
        if (last[(int)l->lane[i]] >= 0)
            pred[i * w + n++] = last[(int)l->lane[i]];
        for (int q = l->wait_at[i]; q < l->wait_at[i + 1]; q++) {
            int by = -1;
            for (int j = 0; j < i; j++)
                if (l->mark[j] == l->waits[q])
                    by = j;
            CHECK_MSG(l->waits[q] == 0 || by >= 0, "step %d waits for mark %d, set by no earlier step", i, l->waits[q]);
            if (by >= 0 && n < w - 1)
                pred[i * w + n++] = by;
        }
        pred[i * w + n] = -1;
        last[(int)l->lane[i]] = i;
    }
    return pred;
}

/* done[i][j]: step j is done before step i starts, by the edges alone. */
static unsigned char *closure(const plan_lanes *l, const int *pred)
{
    int n = l->n_steps, w = HEARTH_VIS_LANES + 2;
    unsigned char *done = calloc((size_t)n * (size_t)n + 1, 1);
    for (int i = 0; i < n; i++)
        for (int e = 0; pred[i * w + e] >= 0; e++) {
            int j = pred[i * w + e];
            done[(size_t)i * n + j] = 1;
            for (int k = 0; k < n; k++)
                done[(size_t)i * n + k] |= done[(size_t)j * n + k];
        }
    return done;
}

/* Runs the steps in a random order the edges allow (seeded), tagging each
 * value's bytes in the arena as it is written and checking them where it is
 * read: 0 failures expected. */
static int simulate(const hearth_plan *p, const plan_lanes *l, const int *pred, unsigned seed)
{
    int n = p->n_steps, w = HEARTH_VIS_LANES + 2, bad = 0;
    size_t gran = p->arena_bytes / 4 + 1;
    int *tag = malloc(gran * sizeof *tag);
    unsigned char *ran = calloc((size_t)n + 1, 1);
    for (size_t g = 0; g < gran; g++)
        tag[g] = -1;
    for (int i = 0; i < p->n_inputs; i++) {
        const plan_value *v = &p->v[p->v[p->inputs[i]].root];
        for (int64_t e = 0; e < v->n; e++)
            tag[v->off / 4 + e] = v->root;
    }
    for (int done = 0; done < n; done++) {
        int ready[4096], nr = 0;
        for (int i = 0; i < n && nr < 4096; i++) {
            if (ran[i])
                continue;
            bool ok = true;
            for (int e = 0; pred[i * w + e] >= 0 && ok; e++)
                ok = ran[pred[i * w + e]];
            if (ok)
                ready[nr++] = i;
        }
        if (!nr) {
            CHECK_MSG(0, "the schedule's edges have a cycle");
            break;
        }
        seed = seed * 1103515245u + 12345u;
        int i = ready[(seed >> 16) % (unsigned)nr];
        ran[i] = 1;
        const plan_step *s = &p->steps[i];
        int reads[2] = {root(p, s->a), root(p, s->b)};
        for (int r = 0; r < 2; r++) {
            const plan_value *v = reads[r] >= 0 ? &p->v[reads[r]] : NULL;
            if (!v || v->io == PLAN_STATE_IN || v->io == PLAN_STATE_OUT || v->off < 0)
                continue;
            for (int64_t e = 0; e < v->n && !bad; e++)
                if (tag[v->off / 4 + e] != reads[r] && tag[v->off / 4 + e] != -1) {
                    CHECK_MSG(0, "%s: seed %u: step %d reads value %d (%s) whose bytes value %d overwrote", g_model, seed, i,
                              reads[r], v->name, tag[v->off / 4 + e]);
                    bad++;
                }
        }
        const plan_value *y = root(p, s->y) >= 0 ? &p->v[root(p, s->y)] : NULL;
        if (y && y->io != PLAN_STATE_IN && y->io != PLAN_STATE_OUT && y->off >= 0)
            for (int64_t e = 0; e < y->n; e++)
                tag[y->off / 4 + e] = y->root;
    }
    for (int i = 0; i < p->n_outputs && !bad; i++) {
        const plan_value *v = &p->v[p->v[p->outputs[i]].root];
        for (int64_t e = 0; e < v->n && !bad; e++)
            if (tag[v->off / 4 + e] != v->root) {
                CHECK_MSG(0, "%s: seed %u: output %s overwritten by value %d before the end", g_model, seed, v->name,
                          tag[v->off / 4 + e]);
                bad++;
            }
    }
    free(tag);
    free(ran);
    return bad;
}

/* One model: its schedule at most lanes wide, checked against the oracle;
 * the arena laid out for it simulated. Returns the lanes used (0 on a
 * planning failure). */
static int check_model(const char *rel, const char *shapes, int lanes, int *chain_out)
{
    hearth_onnx *m = onnx_open_shared(rel);
    if (!m)
        return 0;
    g_model = rel;
    hearth_plan p;
    hearth_err err = {0};
    int rc = hearth_plan_build(&p, m, shapes, NULL, &err);
    CHECK_MSG(rc == 0, "%s: %s", rel, err.msg);
    plan_lanes l;
    int used = 0;
    if (!rc) {
        rc = plan_lanes_build(&l, &p, lanes, &err);
        CHECK_MSG(rc == 0, "%s: lanes: %s", rel, err.msg);
    }
    if (!rc) {
        rc = plan_arena(&p, &l, &err);
        CHECK_MSG(rc == 0, "%s: arena: %s", rel, err.msg);
    }
    if (!rc) {
        int n = p.n_steps;
        used = l.n_lanes;
        CHECK(l.n_lanes >= 1 && l.n_lanes <= lanes);
        int *pred = edges(&l);
        unsigned char *done = closure(&l, pred);
        /* every conflicting pair ordered, hb as the scheduler keeps it the same */
        int depth_max = 0, *depth = calloc((size_t)n + 1, sizeof *depth);
        for (int i = 0; i < n; i++) {
            for (int j = 0; j < i; j++) {
                bool c = conflict(&p, i, j);
                if (c) {
                    CHECK_MSG(done[(size_t)i * n + j], "%s: step %d conflicts with step %d, unordered", rel, i, j);
                    if (depth[j] > depth[i])
                        depth[i] = depth[j];
                }
                CHECK_MSG(plan_hb(&l, i, j) == (bool)done[(size_t)i * n + j], "%s: hb(%d, %d) differs from the edges'",
                          rel, i, j);
            }
            depth[i]++;
            if (depth[i] > depth_max)
                depth_max = depth[i];
        }
        /* the scheduler's dependencies may be coarser than the oracle's element sets (a copy's span), never finer */
        CHECK_MSG(l.chain >= depth_max, "%s: chain %d shorter than the data's %d", rel, l.chain, depth_max);
        *chain_out = l.chain;
        /* marks set once each; a lane's first step waits */
        int *set = calloc((size_t)l.n_marks + 1, sizeof *set);
        bool seen[HEARTH_VIS_LANES] = {false};
        for (int i = 0; i < n; i++) {
            if (l.mark[i] >= 0) {
                CHECK(l.mark[i] > 0 && l.mark[i] < l.n_marks);
                if (l.mark[i] > 0 && l.mark[i] < l.n_marks)
                    set[l.mark[i]]++;
            }
            if (l.lane[i] > 0 && !seen[(int)l.lane[i]])
                CHECK_MSG(l.wait_at[i + 1] > l.wait_at[i], "%s: lane %d starts at step %d with no wait", rel, l.lane[i], i);
            seen[(int)l.lane[i]] = true;
        }
        for (int k = 1; k < l.n_marks; k++)
            CHECK_EQ_INT(set[k], 1);
        /* the end: every step done before it (lane 0's last step and the end waits) */
        int last0 = -1;
        for (int i = 0; i < n; i++)
            if (l.lane[i] == 0)
                last0 = i;
        for (int i = 0; i < n; i++) {
            bool ok = i == last0 || (last0 >= 0 && done[(size_t)last0 * n + i]);
            for (int e = 0; e < l.n_end && !ok; e++)
                for (int j = 0; j < n; j++)
                    if (l.mark[j] == l.end[e] && (j == i || done[(size_t)j * n + i]))
                        ok = true;
            CHECK_MSG(ok, "%s: step %d is not joined at the end", rel, i);
        }
        /* the arena under orders the schedule allows */
        for (unsigned seed = 1; seed <= 12; seed++)
            if (simulate(&p, &l, pred, seed))
                break;
        free(set);
        free(depth);
        free(done);
        free(pred);
    }
    plan_lanes_free(&l);
    hearth_plan_free(&p);
    hearth_onnx_close(m);
    return used;
}

static void test_rfb320(void)
{
    int chain1 = 0, chain4 = 0;
    CHECK_EQ_INT(check_model("vision/ultraface-rfb-320/version-RFB-320.onnx", NULL, 1, &chain1), 1);
    int used = check_model("vision/ultraface-rfb-320/version-RFB-320.onnx", NULL, 4, &chain4);
    /* its RFB modules' branches and detection heads: more than one lane, and a chain near the data's (47 steps
     * of 86 at stop 41, where the step order's arena made it 74) */
    CHECK(used > 1);
    CHECK_MSG(chain4 < 60, "longest chain %d steps", chain4);
    CHECK_EQ_INT(chain1, chain4); /* the chain is the dependencies', whatever the lanes */
}

static void test_others(void)
{
    int chain = 0;
    check_model("vision/ultraface-rfb-320/version-RFB-320_simplified.onnx", NULL, 4, &chain);
    check_model("vision/ultraface-rfb-320/version-slim-320_simplified.onnx", NULL, 2, &chain);
    check_model("vision/ultraface-rfb-320/version-slim-320_simplified.onnx", NULL, 3, &chain);
    CHECK_EQ_INT(check_model("vision/mnist-8/mnist-8.onnx", NULL, 4, &chain), 1); /* a chain: one lane */
    check_model("vision/yunet-2026may/face_detection_yunet_2026may.onnx", "input=1x3x320x320", 4, &chain);
}

int main(void)
{
    RUN(test_rfb320);
    RUN(test_others);
    TEST_EXIT();
}
