/* onnx_shared.h: a model of ../shared opened for the ONNX tests
 * (test_onnx.c, test_onnx_lanes.c). */
#ifndef HEARTH_TESTS_ONNX_SHARED_H
#define HEARTH_TESTS_ONNX_SHARED_H

#include "harness.h"

#include "models/onnx.h"

/* ../shared's rel opened, or NULL (the test fails naming the path or the
 * loader's error). */
static inline hearth_onnx *onnx_open_shared(const char *rel)
{
    char path[1024];
    if (!hearth_test_shared_path(path, sizeof path, rel))
        return NULL;
    hearth_err err = {0};
    hearth_onnx *m = hearth_onnx_open(path, &err);
    CHECK_MSG(m != NULL, "%s: %s", rel, err.msg);
    return m;
}

#endif
