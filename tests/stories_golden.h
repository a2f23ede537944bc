/* stories_golden.h: ../shared/models/stories260K/GOLDEN.txt (made by a
 * separate port of llama2.c), read for the tests that decode stories260K on
 * any device: the 5 logits after "first 5 values: [" and the 60 ids on the
 * line after "first 60 generated ids:". Include after harness.h. */
#ifndef HEARTH_TESTS_STORIES_GOLDEN_H
#define HEARTH_TESTS_STORIES_GOLDEN_H

#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* 0, or -1 with a failed CHECK naming the file and what it lacks. */
static inline int hearth_test_read_golden(float logit5[5], int ids[60])
{
    char p[1024];
    if (!hearth_test_shared_path(p, sizeof p, "models/stories260K/GOLDEN.txt"))
        return -1;
    FILE *f = fopen(p, "r");
    char line[4096];
    int state = 0, got_logits = 0, got_ids = 0;
    while (f && fgets(line, sizeof line, f)) {
        const char *s = strstr(line, "first 5 values: [");
        if (s) {
            got_logits = sscanf(s + strlen("first 5 values: ["), "%f, %f, %f, %f, %f", &logit5[0], &logit5[1],
                                &logit5[2], &logit5[3], &logit5[4]) == 5;
        } else if (strstr(line, "first 60 generated ids:")) {
            state = 1;
        } else if (state == 1) {
            char *q = line;
            for (got_ids = 0; got_ids < 60; got_ids++) {
                char *end;
                long v = strtol(q, &end, 10);
                if (end == q)
                    break;
                ids[got_ids] = (int)v;
                q = end;
            }
            state = 2;
        }
    }
    if (f)
        fclose(f);
    CHECK_MSG(got_logits, "%s: no 'first 5 values: [' line", p);
    CHECK_MSG(got_ids == 60, "%s: %d of the 60 golden ids", p, got_ids);
    return got_logits && got_ids == 60 ? 0 : -1;
}

#endif
