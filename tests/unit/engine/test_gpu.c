/* Unit tests for engine/gpu.h: the GPU probe of whichever backend this build
 * has (gpu_none.c in a plain build, cuda/probe.cu under `make CUDA=1`), and
 * `hearth doctor` reporting exactly what the probe found.
 *
 * Three situations, each checked for what it must say:
 *   - no backend compiled: no device, and a reason naming `make CUDA=1`;
 *   - CUDA compiled, no GPU (the development and CI machines): no device, the
 *     runtime's version, and the CUDA error as the reason, with no crash;
 *   - HEARTH_REQUIRE_GPU=1 (`make CUDA=1 check-cuda` on the GPU machine): at
 *     least one device, every one usable (its self-test kernel ran and gave
 *     the right values), with a name, memory and a compute capability at
 *     least the one the kernels were built for. */
#include "harness.h"

#include "engine/gpu.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool gpu_required(void)
{
    const char *r = getenv("HEARTH_REQUIRE_GPU");
    return r && *r && strcmp(r, "0") != 0;
}

static void test_probe_is_consistent(void)
{
    hearth_gpu_list a, b;
    hearth_gpu_probe(&a);
    hearth_gpu_probe(&b);
    CHECK(a.backend != NULL);
    CHECK_MSG(a.n == b.n && !strcmp(a.why, b.why), "a second probe answers differently");
    CHECK(a.n >= 0 && a.n <= HEARTH_GPU_MAX);
#ifdef HEARTH_CUDA
    CHECK(a.compiled && !strcmp(a.backend, "cuda"));
    CHECK_MSG(a.runtime_version >= 12000, "runtime version %d", a.runtime_version);
    CHECK_EQ_INT(a.built_arch, HEARTH_CUDA_ARCH);
#else
    CHECK(!a.compiled && !strcmp(a.backend, "none"));
    CHECK_EQ_INT(a.n, 0);
    CHECK_MSG(strstr(a.why, "make CUDA=1") != NULL, "why: '%s'", a.why);
#endif
    int usable = 0;
    for (int i = 0; i < a.n; i++) {
        const hearth_gpu_info *g = &a.gpus[i];
        fprintf(stderr, "  %s:%d %s cc %d.%d, %d SMs, %.1f GiB (%.1f free), %s%s\n", a.backend, g->index, g->name,
                g->cc_major, g->cc_minor, g->multiprocessors, g->total_bytes / 1073741824.0,
                g->free_bytes / 1073741824.0, g->usable ? "usable" : "not usable: ", g->usable ? "" : g->why);
        CHECK_EQ_INT(g->index, i);
        if (g->usable) {
            usable++;
            CHECK(g->name[0] != 0 && g->total_bytes > 0 && g->free_bytes <= g->total_bytes);
            CHECK(g->multiprocessors > 0 && g->cc_major > 0);
        } else {
            CHECK_MSG(g->why[0] != 0, "device %d is not usable and says no reason", i);
        }
    }
    if (usable == 0)
        CHECK_MSG(a.why[0] != 0, "no usable GPU and no reason given");
}

static void test_required_gpu_is_there(void)
{
    hearth_gpu_list l;
    hearth_gpu_probe(&l);
    if (!gpu_required()) {
        fprintf(stderr, "  HEARTH_REQUIRE_GPU unset: not requiring a device (this machine: %d, %s)\n", l.n,
                l.n ? "listed" : l.why);
        return;
    }
    CHECK_MSG(l.compiled, "HEARTH_REQUIRE_GPU=1 on a build without a GPU backend: build with make CUDA=1");
    CHECK_MSG(l.n >= 1, "HEARTH_REQUIRE_GPU=1 and no device: %s", l.why);
    for (int i = 0; i < l.n; i++) {
        const hearth_gpu_info *g = &l.gpus[i];
        CHECK_MSG(g->usable, "%s:%d (%s) is not usable: %s", l.backend, i, g->name, g->why);
        CHECK_MSG(g->cc_major * 10 + g->cc_minor >= l.built_arch, "%s:%d is cc %d.%d, the kernels are for %d", l.backend,
                  i, g->cc_major, g->cc_minor, l.built_arch);
    }
    CHECK(l.driver_version > 0);
}

/* `hearth doctor` (the binary of this build, $HEARTH_BIN) lists the probe's devices. */
static void test_doctor_reports_the_probe(void)
{
    const char *bin = getenv("HEARTH_BIN");
    if (!bin) {
        fprintf(stderr, "  HEARTH_BIN unset (tests/run.sh sets it): skipping the doctor check\n");
        return;
    }
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' doctor", bin);
    FILE *p = popen(cmd, "r");
    CHECK(p != NULL);
    if (!p)
        return;
    static char out[1 << 16];
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = 0;
    int rc = pclose(p);
    CHECK_MSG(rc == 0, "hearth doctor exited with %d", rc);
    cJSON *doc = cJSON_Parse(out);
    CHECK_MSG(doc != NULL, "doctor's output is not JSON: %.200s", out);
    if (!doc)
        return;
    hearth_gpu_list l;
    hearth_gpu_probe(&l);
    const cJSON *gpus = cJSON_GetObjectItem(doc, "gpus");
    CHECK(cJSON_IsArray(gpus));
    CHECK_EQ_INT(cJSON_GetArraySize(gpus), l.n);
    for (int i = 0; i < l.n && i < cJSON_GetArraySize(gpus); i++) {
        const cJSON *g = cJSON_GetArrayItem(gpus, i);
        const cJSON *name = cJSON_GetObjectItem(g, "name");
        CHECK(cJSON_IsString(name) && !strcmp(name->valuestring, l.gpus[i].name));
        CHECK(cJSON_IsTrue(cJSON_GetObjectItem(g, "usable")) == l.gpus[i].usable);
        CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(g, "memory_bytes")) == (double)l.gpus[i].total_bytes);
    }
    const cJSON *build = cJSON_GetObjectItem(doc, "build");
    CHECK(cJSON_IsTrue(cJSON_GetObjectItem(build, "cuda")) == l.compiled);
    const cJSON *be = cJSON_GetObjectItem(doc, "gpu_backend");
    CHECK(cJSON_IsString(cJSON_GetObjectItem(be, "name")) &&
          !strcmp(cJSON_GetObjectItem(be, "name")->valuestring, l.backend));
    cJSON_Delete(doc);
}

int main(void)
{
    RUN(test_probe_is_consistent);
    RUN(test_required_gpu_is_there);
    RUN(test_doctor_reports_the_probe);
    TEST_EXIT();
}
