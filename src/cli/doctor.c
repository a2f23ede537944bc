/* doctor.c: `hearth doctor`: what this binary was built for and what it
 * finds on this machine, as JSON, so a bug report can carry it whole. */
#include "cli.h"

#include "base/hw.h"
#include "engine/cpu/matmul.h"
#include "engine/gpu.h"
#include "net/loop.h"
#include "net/server.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

static cJSON *build_info(const hearth_gpu_list *gl)
{
    cJSON *b = cJSON_CreateObject();
    cJSON_AddStringToObject(b, "compiler", __VERSION__);
#if defined(__SANITIZE_ADDRESS__)
    cJSON_AddBoolToObject(b, "sanitizers", 1);
#else
    cJSON_AddBoolToObject(b, "sanitizers", 0);
#endif
#if defined(__OPTIMIZE__)
    cJSON_AddBoolToObject(b, "optimized", 1);
#else
    cJSON_AddBoolToObject(b, "optimized", 0);
#endif
    cJSON *isa = cJSON_AddArrayToObject(b, "kernel_isas_compiled");
    cJSON_AddItemToArray(isa, cJSON_CreateString("scalar"));
#if defined(__x86_64__)
    cJSON_AddItemToArray(isa, cJSON_CreateString("avx2"));
    cJSON_AddItemToArray(isa, cJSON_CreateString("avx512"));
#endif
    cJSON_AddBoolToObject(b, "cuda", gl->compiled && !strcmp(gl->backend, "cuda"));
    if (gl->built_arch)
        cJSON_AddNumberToObject(b, "cuda_arch", gl->built_arch);
    return b;
}

static cJSON *cpu_info(void)
{
    const hearth_hw_info *c = hearth_hw();
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "model", c->model);
    cJSON_AddNumberToObject(o, "physical_cores", c->physical_cores);
    cJSON_AddNumberToObject(o, "logical_cores", c->logical_cores);
    char feats[512];
    hearth_hw_features_string(c, feats, sizeof feats);
    cJSON *f = cJSON_AddArrayToObject(o, "features");
    for (char *tok = strtok(feats, " "); tok; tok = strtok(NULL, " "))
        cJSON_AddItemToArray(f, cJSON_CreateString(tok));
    /* the ISA the kernels really run, as the matmul decides it (AVX-512 wants
     * F, BW, VL, DQ and VNNI, not F alone), honouring HEARTH_CPU_DISABLE */
    cJSON_AddStringToObject(o, "kernels_selected", hearth_cpu_isa_name(hearth_cpu_matmul_isa()));
    return o;
}

/* CUDA's version encoding (1000 * major + 10 * minor) as "13.0". */
static void add_cuda_version(cJSON *o, const char *key, int v)
{
    char s[32];
    snprintf(s, sizeof s, "%d.%d", v / 1000, v % 1000 / 10);
    cJSON_AddStringToObject(o, key, v ? s : "none");
}

/* Each GPU as the backend's probe found it (engine/gpu.h), and why none is
 * usable when none is. */
static void gpu_info(cJSON *doc, const hearth_gpu_list *gl)
{
    cJSON *arr = cJSON_AddArrayToObject(doc, "gpus");
    for (int i = 0; i < gl->n; i++) {
        const hearth_gpu_info *g = &gl->gpus[i];
        cJSON *o = cJSON_CreateObject();
        char dev[32], cc[16];
        snprintf(dev, sizeof dev, "%s:%d", gl->backend, g->index);
        snprintf(cc, sizeof cc, "%d.%d", g->cc_major, g->cc_minor);
        cJSON_AddStringToObject(o, "device", dev);
        cJSON_AddStringToObject(o, "name", g->name);
        cJSON_AddStringToObject(o, "compute_capability", cc);
        cJSON_AddNumberToObject(o, "multiprocessors", g->multiprocessors);
        cJSON_AddNumberToObject(o, "memory_bytes", (double)g->total_bytes);
        cJSON_AddNumberToObject(o, "free_bytes", (double)g->free_bytes);
        cJSON_AddStringToObject(o, "pci_bus_id", g->pci_bus_id);
        add_cuda_version(o, "driver", gl->driver_version);
        add_cuda_version(o, "runtime", gl->runtime_version);
        cJSON_AddBoolToObject(o, "usable", g->usable);
        if (!g->usable)
            cJSON_AddStringToObject(o, "why", g->why);
        cJSON_AddItemToArray(arr, o);
    }
    cJSON *b = cJSON_AddObjectToObject(doc, "gpu_backend");
    cJSON_AddStringToObject(b, "name", gl->backend);
    add_cuda_version(b, "driver", gl->driver_version);
    add_cuda_version(b, "runtime", gl->runtime_version);
    if (gl->why[0])
        cJSON_AddStringToObject(b, "why_none_usable", gl->why);
}

static cJSON *limits_info(void)
{
    hearth_server_config cfg;
    hearth_server_config_default(&cfg);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "max_request_line_bytes", (double)cfg.limits.max_request_line);
    cJSON_AddNumberToObject(o, "max_header_bytes", (double)cfg.limits.max_header_bytes);
    cJSON_AddNumberToObject(o, "max_header_fields", (double)cfg.limits.max_headers);
    cJSON_AddNumberToObject(o, "max_body_bytes", (double)cfg.max_body);
    cJSON_AddNumberToObject(o, "handler_threads", cfg.handler_threads);
    cJSON_AddNumberToObject(o, "offload_body_bytes", (double)cfg.offload_body);
    cJSON_AddNumberToObject(o, "header_timeout_ms", (double)cfg.header_timeout_ms);
    cJSON_AddNumberToObject(o, "idle_timeout_ms", (double)cfg.idle_timeout_ms);
    cJSON_AddNumberToObject(o, "drain_timeout_ms", (double)cfg.drain_timeout_ms);
    cJSON_AddNumberToObject(o, "max_connections_per_thread", cfg.max_connections);
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        cJSON_AddNumberToObject(o, "open_files_soft", rl.rlim_cur == RLIM_INFINITY ? -1 : (double)rl.rlim_cur);
        cJSON_AddNumberToObject(o, "open_files_hard", rl.rlim_max == RLIM_INFINITY ? -1 : (double)rl.rlim_max);
    }
    return o;
}

int hearth_cmd_doctor(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: hearth doctor\n\nPrints, as JSON: version and build, CPU model and the ISA features the kernels\n"
                   "use, cores, memory, GPUs, the event poller, and the default limits.\n");
            return 0;
        }
        fprintf(stderr, "hearth doctor: unknown option '%s'\n", argv[i]);
        return 2;
    }
    hearth_gpu_list gl;
    hearth_gpu_probe(&gl);
    cJSON *doc = cJSON_CreateObject();
    cJSON_AddStringToObject(doc, "version", HEARTH_VERSION);
    cJSON_AddItemToObject(doc, "build", build_info(&gl));
    cJSON_AddItemToObject(doc, "cpu", cpu_info());
    cJSON *mem = cJSON_AddObjectToObject(doc, "memory");
    cJSON_AddNumberToObject(mem, "total_bytes", (double)hearth_mem_total());
    gpu_info(doc, &gl);
    cJSON_AddStringToObject(doc, "poller", hearth_loop_default_poller_name());
    cJSON_AddItemToObject(doc, "limits", limits_info());
    char *text = cJSON_Print(doc);
    int rc = 1;
    if (text) {
        printf("%s\n", text);
        rc = 0;
    }
    free(text);
    cJSON_Delete(doc);
    return rc;
}
