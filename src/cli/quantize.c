/* quantize.c: `hearth quantize IN.gguf OUT.gguf TYPE`: re-quantizes a GGUF
 * model's weight matrices.
 *
 * What changes: every 2-D tensor named "*.weight" (the token embedding
 * included, as llama.cpp does) becomes TYPE, unless its rows are not a whole
 * number of TYPE's blocks (then it keeps its type, with a warning); 1-D
 * tensors (norms, biases) become F32; anything else is copied as it is, and
 * so is a matrix already of TYPE (re-quantizing would only add error).
 * Metadata is copied record by record as raw bytes from the input, so every
 * value type survives untouched; general.file_type is replaced.
 *
 * How: the output header is computed first (all sizes follow from the types
 * and shapes), then tensors are streamed in file order through
 * dequantize_row -> quantize_row in chunks of rows spread over a thread
 * pool, so memory stays at one chunk (~16 MiB) whatever the model size. The
 * output goes to OUT.tmp and is renamed over OUT only when complete, so a
 * failure never leaves a truncated model behind.
 *
 * Rejected: building the file with gguf_write.h (it holds every tensor's
 * data until the end: a 7B model would need its whole converted copy in
 * memory) and re-encoding metadata values one type at a time (more code,
 * and a chance to change what it should only copy). */
#include "cli.h"
#include "opts.h"

#include "base/pool.h"
#include "engine/cpu/quant.h"
#include "engine/dtype.h"
#include "models/gguf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Output bytes converted per pool job: bounds memory, keeps every thread busy. */
#define CHUNK_BYTES (16u << 20)

typedef struct plan {
    hearth_dtype type;   /* output type */
    size_t nbytes;       /* output size */
    uint64_t offset;     /* relative to the data section */
    bool convert;        /* false: copy the input bytes */
} plan;

typedef struct conv_job {
    hearth_dtype src_type, dst_type;
    const uint8_t *src;
    uint8_t *dst;
    int64_t ne0, rows;
    size_t src_row, dst_row;
    float *scratch;      /* [n_tasks][ne0] */
    int64_t n_tasks;
    _Atomic int rc;
} conv_job;

/* llama.cpp's llama_ftype numbers for general.file_type. */
static uint32_t file_type_of(hearth_dtype t)
{
    switch (t) {
    case HEARTH_F32: return 0;
    case HEARTH_F16: return 1;
    case HEARTH_Q4_0: return 2;
    case HEARTH_Q8_0: return 7;
    case HEARTH_Q4_K: return 14; /* MOSTLY_Q4_K_S: every matrix Q4_K */
    case HEARTH_Q6_K: return 18;
    case HEARTH_BF16: return 32;
    default: return 0;
    }
}

static void conv_task(void *ctx, int64_t task, int64_t n_tasks)
{
    conv_job *j = ctx;
    int64_t per = (j->rows + n_tasks - 1) / n_tasks;
    int64_t r0 = task * per, r1 = r0 + per < j->rows ? r0 + per : j->rows;
    float *f = j->scratch + task * j->ne0;
    for (int64_t r = r0; r < r1; r++) {
        int rc = hearth_quant_dequantize_row(j->src_type, j->src + (size_t)r * j->src_row, f, j->ne0);
        if (!rc)
            rc = hearth_quant_quantize_row(j->dst_type, f, j->dst + (size_t)r * j->dst_row, j->ne0);
        if (rc) {
            j->rc = rc;
            return;
        }
    }
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

static int64_t n_elements(const hearth_gguf_tensor *t)
{
    return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
}

/* Decides each tensor's output type and place. */
static int make_plan(const hearth_gguf *g, hearth_dtype target, plan *p, uint64_t *data_size, hearth_err *err)
{
    uint64_t off = 0;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const hearth_gguf_tensor *t = &g->tensors[i];
        plan *q = &p[i];
        q->type = t->type;
        q->convert = false;
        if (n_elements(t) == 0) {
            /* nothing to convert; keep it as it is */
        } else if (t->n_dims == 1 && t->type != HEARTH_F32) {
            q->type = HEARTH_F32;
        } else if (t->n_dims == 2 && ends_with(t->name, ".weight") && t->type != target) {
            const hearth_dtype_info *di = hearth_dtype_get(target);
            if (t->ne[0] % di->block == 0)
                q->type = target;
            else
                fprintf(stderr, "hearth quantize: warning: %s: tensor '%s': rows of %lld are not a multiple of "
                                "%s's block of %lld; kept as %s\n",
                        g->path, t->name, (long long)t->ne[0], di->name, (long long)di->block,
                        hearth_dtype_get(t->type)->name);
        }
        q->convert = q->type != t->type;
        if (!hearth_dtype_row_bytes(q->type, n_elements(t), &q->nbytes))
            return hearth_err_set(err, HEARTH_EINVAL, "%s: tensor '%s': size overflow", g->path, t->name);
        q->offset = off;
        off += (q->nbytes + g->alignment - 1) / g->alignment * g->alignment;
    }
    *data_size = off;
    return 0;
}

static int put(FILE *f, const void *p, size_t n, const char *path, hearth_err *err)
{
    if (n && fwrite(p, 1, n, f) != n)
        return hearth_err_sys(err, errno, "%s: write", path);
    return 0;
}

static int put_u32(FILE *f, uint32_t v, const char *path, hearth_err *err)
{
    uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    return put(f, b, 4, path, err);
}

static int put_u64(FILE *f, uint64_t v, const char *path, hearth_err *err)
{
    uint8_t b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)(v >> (8 * i));
    return put(f, b, 8, path, err);
}

static int put_zeros(FILE *f, uint64_t n, const char *path, hearth_err *err)
{
    static const uint8_t z[64];
    while (n) {
        size_t k = n < sizeof z ? (size_t)n : sizeof z;
        int rc = put(f, z, k, path, err);
        if (rc)
            return rc;
        n -= k;
    }
    return 0;
}

/* Header, metadata (raw copies but general.file_type, then the new one) and tensor infos. */
static int write_header(FILE *f, const char *path, const hearth_gguf *g, const plan *p, uint32_t ftype,
                        hearth_err *err)
{
    const hearth_gguf_kv *old_ft = hearth_gguf_find_kv(g, "general.file_type");
    int rc = put(f, "GGUF", 4, path, err);
    if (!rc)
        rc = put_u32(f, 3, path, err);
    if (!rc)
        rc = put_u64(f, g->n_tensors, path, err);
    if (!rc)
        rc = put_u64(f, g->n_kv - (old_ft ? 1 : 0) + 1, path, err);
    for (uint64_t i = 0; i < g->n_kv && !rc; i++) {
        if (&g->kv[i] == old_ft)
            continue;
        /* a record runs to the next one; the last to the first tensor info */
        uint64_t end = i + 1 < g->n_kv ? g->kv[i + 1].offset : g->tensors[0].info_offset;
        rc = put(f, g->map.data + g->kv[i].offset, (size_t)(end - g->kv[i].offset), path, err);
    }
    const char *key = "general.file_type";
    if (!rc)
        rc = put_u64(f, strlen(key), path, err);
    if (!rc)
        rc = put(f, key, strlen(key), path, err);
    if (!rc)
        rc = put_u32(f, HEARTH_GGUF_U32, path, err);
    if (!rc)
        rc = put_u32(f, ftype, path, err);
    for (uint64_t i = 0; i < g->n_tensors && !rc; i++) {
        const hearth_gguf_tensor *t = &g->tensors[i];
        rc = put_u64(f, strlen(t->name), path, err);
        if (!rc)
            rc = put(f, t->name, strlen(t->name), path, err);
        if (!rc)
            rc = put_u32(f, (uint32_t)t->n_dims, path, err);
        for (int d = 0; d < t->n_dims && !rc; d++)
            rc = put_u64(f, (uint64_t)t->ne[d], path, err);
        if (!rc)
            rc = put_u32(f, (uint32_t)p[i].type, path, err);
        if (!rc)
            rc = put_u64(f, p[i].offset, path, err);
    }
    if (rc)
        return rc;
    long pos = ftell(f);
    if (pos < 0)
        return hearth_err_sys(err, errno, "%s: ftell", path);
    return put_zeros(f, (g->alignment - (uint64_t)pos % g->alignment) % g->alignment, path, err);
}

/* Converts tensor t into f in chunks of rows. */
static int write_converted(FILE *f, const char *out_path, const hearth_gguf *g, const hearth_gguf_tensor *t,
                           const plan *q, hearth_pool *pool, hearth_err *err)
{
    conv_job j = {.src_type = t->type, .dst_type = q->type, .ne0 = t->ne[0]};
    int64_t rows = n_elements(t) / t->ne[0];
    if (!hearth_dtype_row_bytes(t->type, j.ne0, &j.src_row) || !hearth_dtype_row_bytes(q->type, j.ne0, &j.dst_row))
        return hearth_err_set(err, HEARTH_EINVAL, "%s: tensor '%s': rows of %lld are not whole blocks", g->path,
                              t->name, (long long)j.ne0);
    int64_t chunk = (int64_t)(CHUNK_BYTES / j.dst_row);
    if (chunk < 1)
        chunk = 1;
    if (chunk > rows)
        chunk = rows;
    j.n_tasks = hearth_pool_size(pool);
    j.dst = malloc((size_t)chunk * j.dst_row);
    j.scratch = malloc((size_t)j.n_tasks * (size_t)j.ne0 * sizeof(float));
    int rc = 0;
    if (!j.dst || !j.scratch) {
        rc = hearth_err_set(err, HEARTH_ENOMEM, "%s: tensor '%s': out of memory for a chunk of %lld rows", g->path,
                            t->name, (long long)chunk);
        goto done;
    }
    for (int64_t r = 0; r < rows && !rc; r += chunk) {
        j.rows = rows - r < chunk ? rows - r : chunk;
        j.src = (const uint8_t *)t->data + (size_t)r * j.src_row;
        j.rc = 0;
        hearth_pool_run(pool, conv_task, &j, j.n_tasks);
        if (j.rc) {
            rc = hearth_err_set(err, j.rc, "%s: tensor '%s': cannot convert %s to %s", g->path, t->name,
                                hearth_dtype_get(t->type)->name, hearth_dtype_get(q->type)->name);
            break;
        }
        rc = put(f, j.dst, (size_t)j.rows * j.dst_row, out_path, err);
    }
done:
    free(j.dst);
    free(j.scratch);
    return rc;
}

static int quantize_file(const char *in, const char *out, hearth_dtype target, int threads, hearth_err *err)
{
    hearth_gguf g;
    plan *p = NULL;
    FILE *f = NULL;
    hearth_pool *pool = NULL;
    char tmp[4096];
    bool made_tmp = false;
    int rc = hearth_gguf_open(&g, in, err);
    if (rc)
        return rc;
    if (g.n_tensors == 0) {
        rc = hearth_err_set(err, HEARTH_EINVAL, "%s: no tensors to quantize", in);
        goto done;
    }
    p = calloc((size_t)g.n_tensors, sizeof *p);
    if (!p) {
        rc = hearth_err_set(err, HEARTH_ENOMEM, "%s: out of memory for %llu tensors", in,
                            (unsigned long long)g.n_tensors);
        goto done;
    }
    uint64_t data_size;
    if ((rc = make_plan(&g, target, p, &data_size, err)))
        goto done;
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp", out) >= sizeof tmp) {
        rc = hearth_err_set(err, HEARTH_EINVAL, "%s: path too long", out);
        goto done;
    }
    f = fopen(tmp, "wb");
    if (!f) {
        rc = hearth_err_sys(err, errno, "%s: cannot create", tmp);
        goto done;
    }
    made_tmp = true;
    if ((rc = write_header(f, tmp, &g, p, file_type_of(target), err)))
        goto done;
    pool = hearth_pool_new(threads);
    uint64_t in_bytes = 0, out_bytes = 0;
    for (uint64_t i = 0; i < g.n_tensors && !rc; i++) {
        const hearth_gguf_tensor *t = &g.tensors[i];
        fprintf(stderr, "[%3llu/%3llu] %-36s %-5s -> %-5s [%lld x %lld]\n", (unsigned long long)i + 1,
                (unsigned long long)g.n_tensors, t->name, hearth_dtype_get(t->type)->name,
                hearth_dtype_get(p[i].type)->name, (long long)t->ne[0], (long long)(n_elements(t) / t->ne[0]));
        rc = p[i].convert ? write_converted(f, tmp, &g, t, &p[i], pool, err) : put(f, t->data, t->nbytes, tmp, err);
        if (!rc)
            rc = put_zeros(f, (g.alignment - p[i].nbytes % g.alignment) % g.alignment, tmp, err);
        in_bytes += t->nbytes;
        out_bytes += p[i].nbytes;
    }
    if (rc)
        goto done;
    if (fclose(f) != 0) {
        f = NULL;
        rc = hearth_err_sys(err, errno, "%s: write", tmp);
        goto done;
    }
    f = NULL;
    if (rename(tmp, out) != 0) {
        rc = hearth_err_sys(err, errno, "%s: cannot rename to %s", tmp, out);
        goto done;
    }
    made_tmp = false;
    fprintf(stderr, "hearth quantize: %s -> %s (%s): weights %.2f MiB -> %.2f MiB\n", in, out,
            hearth_dtype_get(target)->name, (double)in_bytes / (1 << 20), (double)out_bytes / (1 << 20));
done:
    if (f)
        fclose(f);
    if (made_tmp)
        unlink(tmp);
    hearth_pool_free(pool);
    free(p);
    hearth_gguf_close(&g);
    return rc;
}

/* Splits argv into positional arguments and options (with their values), for opts_parse. */
static int split_args(const opt *opts, int n_opts, int argc, char **argv, char **opt_argv, int *opt_argc,
                      const char **pos, int max_pos, int *n_pos)
{
    *opt_argc = 0;
    *n_pos = 0;
    opt_argv[(*opt_argc)++] = argv[0];
    for (int a = 1; a < argc; a++) {
        const char *arg = argv[a];
        if (arg[0] != '-' || !arg[1]) {
            if (*n_pos >= max_pos) {
                fprintf(stderr, "hearth %s: unexpected argument '%s' (see --help)\n", argv[0], arg);
                return 2;
            }
            pos[(*n_pos)++] = arg;
            continue;
        }
        opt_argv[(*opt_argc)++] = argv[a];
        bool takes_value = false;
        for (int i = 0; i < n_opts; i++) {
            bool long_match = arg[1] == '-' && !strcmp(arg + 2, opts[i].name);
            bool short_match = arg[1] != '-' && !arg[2] && arg[1] == opts[i].short_name;
            if ((long_match || short_match) && opts[i].kind != OPT_BOOL)
                takes_value = true;
        }
        if (takes_value && a + 1 < argc)
            opt_argv[(*opt_argc)++] = argv[++a];
    }
    return 0;
}

int hearth_cmd_quantize(int argc, char **argv)
{
    int threads = 0;
    const opt opts[] = {
        {"threads", 't', OPT_INT, &threads, "N", "threads converting rows (0: one per physical core)"},
    };
    const int n_opts = (int)(sizeof opts / sizeof opts[0]);
    const char *usage = "hearth quantize [options] IN.gguf OUT.gguf TYPE";
    const char *desc = "Writes a copy of a GGUF model with its weight matrices (2-D '*.weight' tensors) in TYPE:\n"
                       "f32, f16, bf16, q8_0, q4_0, q4_k or q6_k. 1-D tensors become f32; metadata is copied.";
    char **opt_argv = calloc((size_t)argc + 1, sizeof *opt_argv);
    if (!opt_argv)
        return 1;
    const char *pos[3];
    int opt_argc, n_pos;
    int rc = split_args(opts, n_opts, argc, argv, opt_argv, &opt_argc, pos, 3, &n_pos);
    if (!rc)
        rc = opts_parse(opts, n_opts, opt_argc, opt_argv, usage, desc);
    free(opt_argv);
    if (rc)
        return rc == 1 ? 0 : rc;
    if (n_pos != 3) {
        fprintf(stderr, "hearth quantize: expected IN.gguf OUT.gguf TYPE (see --help)\n");
        return 2;
    }
    int type = hearth_dtype_from_name(pos[2]);
    const hearth_dtype_info *di = type >= 0 ? hearth_dtype_get((uint32_t)type) : NULL;
    if (!di) {
        fprintf(stderr, "hearth quantize: unknown type '%s' (expected f32, f16, bf16, q8_0, q4_0, q4_k or q6_k)\n",
                pos[2]);
        return 2;
    }
    hearth_err err = {0};
    if (quantize_file(pos[0], pos[1], (hearth_dtype)type, threads, &err)) {
        fprintf(stderr, "hearth quantize: %s\n", err.msg);
        return 1;
    }
    return 0;
}
