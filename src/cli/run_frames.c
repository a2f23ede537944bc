/* run_frames.c: `hearth run -m MODEL.onnx`: frames of a fixed-shape model
 * on the command line, for checking a model before serving it and for
 * timing it in-process, the way onnxruntime's own users time sessions.
 *
 * Inputs come from raw little-endian files (--input NAME=FILE, the layout
 * the Open Inference Protocol's binary extension carries) or, when none is
 * given, are drawn uniformly from [-1, 1] with a fixed seed. Outputs are
 * written as raw files into --output-dir, and their first values and
 * sums are printed. --bench N runs N frames back to back (after --warmup)
 * and prints the per-frame latency's mean, p50, p99 and max, also as one
 * JSON line for scripts (bench/frames.sh). --rate HZ paces them instead, from
 * a fixed schedule, and counts misses against --deadline-ms.
 *
 * Rejected: a separate subcommand (`hearth run` already means "run a model
 * here"); reading inputs as JSON (the files would be ten times the bytes and
 * the parse would be in every timing). */
#include "cli.h"
#include "opts.h"

#include "base/clock.h"
#include "base/file.h"
#include "base/log.h"
#include "base/pool.h"
#include "models/frame.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void sleep_until(uint64_t t)
{
    for (;;) {
        uint64_t now = hearth_now_ns();
        if (now >= t)
            return;
        struct timespec ts = {(time_t)((t - now) / 1000000000u), (long)((t - now) % 1000000000u)};
        nanosleep(&ts, NULL);
    }
}

/* xorshift64*: deterministic inputs without a dependency on libc's rand */
static float uniform(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    uint64_t r = *s * 2685821657736338717ull;
    return (float)((double)(r >> 40) / (double)(1ull << 24) * 2.0 - 1.0);
}

int hearth_cmd_run_frames(int argc, char **argv)
{
    const char *model = NULL, *device = "cpu", *shapes = NULL, *states = NULL, *out_dir = NULL;
    opt_str_list inputs = {0};
    int threads = 1, bench = 0, warmup = 10, seed = 20261202;
    float rate = 0, deadline_ms = 0;
    const opt opts[] = {
        {"model", 'm', OPT_STR, &model, "FILE.onnx", "the ONNX model", .no_env = true},
        {"input", 'i', OPT_STR_LIST, &inputs, "NAME=FILE", "an input's raw little-endian bytes (repeat per input; none: uniform [-1, 1] from --seed)", .no_env = true},
        {"output-dir", 'o', OPT_STR, &out_dir, "DIR", "write each output to DIR/NAME.f32", .no_env = true},
        {"device", 0, OPT_STR, &device, "cpu|cuda[:N]", "where the model runs (cpu)", .no_env = true},
        {"threads", 't', OPT_INT, &threads, "N", "CPU threads (1, as onnxruntime's intra_op_num_threads; 0: one per physical core)", .no_env = true},
        {"shape", 0, OPT_STR, &shapes, "NAME=DIMS[,...]", "fixed dims for inputs declared dynamic, e.g. input=1x3x320x320", .no_env = true},
        {"state", 0, OPT_STR, &states, "IN=OUT[,...]", "state pairs: OUT of one frame is IN of the next (default: MODEL.state beside the model)", .no_env = true},
        {"bench", 0, OPT_INT, &bench, "N", "time N frames and print mean, p50, p99, max", .no_env = true},
        {"warmup", 0, OPT_INT, &warmup, "N", "with --bench: untimed frames first (10)", .no_env = true},
        {"rate", 0, OPT_FLOAT, &rate, "HZ", "with --bench: frames on a fixed schedule, latency from each scheduled time", .no_env = true},
        {"deadline-ms", 0, OPT_FLOAT, &deadline_ms, "MS", "with --bench: count frames slower than this as misses", .no_env = true},
        {"seed", 's', OPT_INT, &seed, "N", "seed of the random inputs", .no_env = true},
    };
    int rc = opts_parse(opts, (int)(sizeof opts / sizeof opts[0]), argc, argv, "hearth run -m MODEL.onnx [options]",
                        "Runs frames of a fixed-shape ONNX model, from input files or random data; --bench times them.");
    if (rc)
        return rc == 1 ? 0 : rc;
    if (!model || threads < 0 || bench < 0 || warmup < 0 || rate < 0 || deadline_ms < 0) {
        fprintf(stderr, "hearth run: -m FILE.onnx is required; --threads, --bench, --warmup, --rate >= 0\n");
        return 2;
    }
    hearth_pool *pool = threads == 1 ? NULL : hearth_pool_new(threads);
    hearth_err err = {0};
    hearth_frame_opts fo = {.device = device, .pool = pool, .shapes = shapes, .states = states};
    hearth_frame_model *m = hearth_frame_model_open(model, &fo, &err);
    if (!m) {
        fprintf(stderr, "hearth run: %s\n", err.msg);
        hearth_pool_free(pool);
        return 1;
    }
    const hearth_frame_info *fi = hearth_frame_model_info(m);
    void *in[HEARTH_FRAME_MAX_IO] = {0}, *out[HEARTH_FRAME_MAX_IO] = {0};
    uint64_t *lat = NULL;
    rc = 1;
    uint64_t s = (uint64_t)seed * 0x9E3779B97F4A7C15ull + 1;
    for (int i = 0; i < fi->n_inputs; i++) {
        const hearth_frame_io *io = &fi->inputs[i];
        const char *file = NULL;
        for (int k = 0; k < inputs.n; k++) {
            const char *eq = strchr(inputs.items[k], '=');
            if (eq && (size_t)(eq - inputs.items[k]) == strlen(io->name) && !strncmp(inputs.items[k], io->name, strlen(io->name)))
                file = eq + 1;
            else if (!eq && fi->n_inputs == 1)
                file = inputs.items[k];
        }
        if (file) {
            size_t len = 0;
            if (hearth_file_read(file, io->bytes + 1, (char **)&in[i], &len, &err) != 0 || len != io->bytes) {
                fprintf(stderr, "hearth run: input '%s' from %s: %s%zu bytes, the model takes %zu\n", io->name, file,
                        err.msg[0] ? err.msg : "", len, io->bytes);
                goto done;
            }
        } else if (inputs.n) {
            fprintf(stderr, "hearth run: no --input for '%s' (give NAME=FILE)\n", io->name);
            goto done;
        } else {
            float *f = malloc(io->bytes);
            if (!f)
                goto done;
            for (size_t k = 0; k < io->bytes / sizeof(float); k++)
                f[k] = uniform(&s);
            in[i] = f;
        }
    }
    for (int j = 0; j < fi->n_outputs; j++)
        if (!(out[j] = calloc(1, fi->outputs[j].bytes)))
            goto done;
    if (hearth_frame_model_run(m, -1, true, (const void *const *)in, out, &err) != 0) {
        fprintf(stderr, "hearth run: %s\n", err.msg);
        goto done;
    }
    for (int j = 0; j < fi->n_outputs; j++) {
        const float *f = out[j];
        size_t n = fi->outputs[j].bytes / sizeof(float);
        double sum = 0;
        for (size_t k = 0; k < n; k++)
            sum += f[k];
        printf("%s [", fi->outputs[j].name);
        for (int k = 0; k < fi->outputs[j].ndim; k++)
            printf("%s%lld", k ? "," : "", (long long)fi->outputs[j].dims[k]);
        printf("]: sum %.6g, first", sum);
        for (size_t k = 0; k < n && k < 4; k++)
            printf(" %.6g", f[k]);
        printf("\n");
        if (out_dir) {
            char path[4096];
            snprintf(path, sizeof path, "%s/%s.f32", out_dir, fi->outputs[j].name);
            const void *parts[1] = {out[j]};
            size_t lens[1] = {fi->outputs[j].bytes};
            if (hearth_file_write_atomic(path, parts, lens, 1, &err) != 0) {
                fprintf(stderr, "hearth run: %s\n", err.msg);
                goto done;
            }
        }
    }
    if (bench > 0) {
        lat = calloc((size_t)bench, sizeof *lat);
        if (!lat)
            goto done;
        for (int k = 0; k < warmup; k++)
            if (hearth_frame_model_run(m, -1, true, (const void *const *)in, out, &err) != 0) {
                fprintf(stderr, "hearth run: %s\n", err.msg);
                goto done;
            }
        uint64_t period = rate > 0 ? (uint64_t)(1e9 / rate) : 0, t0 = hearth_now_ns(), misses = 0;
        double sum = 0;
        for (int k = 0; k < bench; k++) {
            uint64_t start = period ? t0 + (uint64_t)k * period : hearth_now_ns();
            if (period)
                sleep_until(start);
            if (hearth_frame_model_run(m, -1, true, (const void *const *)in, out, &err) != 0) {
                fprintf(stderr, "hearth run: %s\n", err.msg);
                goto done;
            }
            lat[k] = hearth_now_ns() - start;
            sum += (double)lat[k];
            misses += deadline_ms > 0 && (double)lat[k] > deadline_ms * 1e6;
        }
        qsort(lat, (size_t)bench, sizeof *lat, cmp_u64);
        double mean = sum / bench / 1e6, p50 = lat[bench / 2] / 1e6, p99 = lat[(size_t)((bench - 1) * 0.99)] / 1e6,
               mx = lat[bench - 1] / 1e6;
        fprintf(stderr, "%d frames on %s (%d thread%s)%s: mean %.3f ms, p50 %.3f, p99 %.3f, max %.3f, misses %llu\n",
                bench, fi->device, threads, threads == 1 ? "" : "s", period ? " paced" : "", mean, p50, p99, mx,
                (unsigned long long)misses);
        printf("{\"frames\":%d,\"device\":\"%s\",\"threads\":%d,\"rate\":%g,\"mean_ms\":%.4f,\"p50_ms\":%.4f,"
               "\"p99_ms\":%.4f,\"max_ms\":%.4f,\"misses\":%llu}\n",
               bench, fi->device, threads, rate, mean, p50, p99, mx, (unsigned long long)misses);
    }
    rc = 0;
done:
    for (int i = 0; i < HEARTH_FRAME_MAX_IO; i++) {
        free(in[i]);
        free(out[i]);
    }
    free(lat);
    hearth_frame_model_close(m);
    hearth_pool_free(pool);
    return rc;
}
