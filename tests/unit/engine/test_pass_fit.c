/* Unit tests for engine/pass_fit: the fixed cost of a pass from passes of
 * known cost, and when the fit declines to say. */
#include "harness.h"

#include "engine/pass_fit.h"

/* y = 2 ms + 10 us per token over sizes 10..100: c0 is 2 ms (exact data; the
 * tolerance covers rounding in the decayed sums). */
static void exact_line_gives_its_intercept(void)
{
    hearth_pass_fit f = {0};
    for (int i = 0; i < 50; i++) {
        double x = 10 + (i * 37) % 91;
        hearth_pass_fit_add(&f, x, 2e6 + 1e4 * x);
    }
    CHECK_NEAR(hearth_pass_fit_c0(&f), 2e6, 1.0);
}

static void declines_without_enough_or_varied_data(void)
{
    hearth_pass_fit f = {0};
    for (int i = 0; i < 5; i++) /* fewer than 8 passes */
        hearth_pass_fit_add(&f, 10 + 10 * i, 2e6 + 1e4 * (10 + 10 * i));
    CHECK_EQ_INT(hearth_pass_fit_c0(&f) == 0, 1);
    hearth_pass_fit g = {0};
    for (int i = 0; i < 50; i++) /* sizes within 5% of each other */
        hearth_pass_fit_add(&g, 100 + i % 5, 2e6 + 1e4 * (100 + i % 5));
    CHECK_EQ_INT(hearth_pass_fit_c0(&g) == 0, 1);
    hearth_pass_fit h = {0};
    for (int i = 0; i < 50; i++) /* a negative intercept: no fixed cost to save */
        hearth_pass_fit_add(&h, 10 + i, -1e6 + 1e5 * (10 + i));
    CHECK_EQ_INT(hearth_pass_fit_c0(&h) == 0, 1);
}

/* After a change of machine speed, the old passes fade: 400 passes of a
 * line with c0 = 5 ms after 400 with 1 ms give ~5 ms (the old weight is
 * (63/64)^400, ~2e-3). */
static void follows_a_drift(void)
{
    hearth_pass_fit f = {0};
    for (int i = 0; i < 400; i++)
        hearth_pass_fit_add(&f, 10 + i % 50, 1e6 + 1e4 * (10 + i % 50));
    CHECK_NEAR(hearth_pass_fit_c0(&f), 1e6, 1.0);
    for (int i = 0; i < 400; i++)
        hearth_pass_fit_add(&f, 10 + i % 50, 5e6 + 2e4 * (10 + i % 50));
    CHECK_NEAR(hearth_pass_fit_c0(&f), 5e6, 5e6 * 0.01);
}

int main(void)
{
    RUN(exact_line_gives_its_intercept);
    RUN(declines_without_enough_or_varied_data);
    RUN(follows_a_drift);
    TEST_EXIT();
}
