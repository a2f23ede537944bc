/* opts.c: one table drives parsing, environment variables and --help, so a
 * flag cannot exist without its variable and its help line. Values are
 * checked (numbers fully parsed, ranges non-negative, sizes with K/M/G,
 * floats finite). Besides -x and --name, a flag may have a longer name after
 * one dash ("-np", "-ngl"), so that llama.cpp's command lines parse. */
#include "opts.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Copies of list values from the environment; they live as long as the process. */
static char *env_copies[16];
static int n_env_copies;

static void env_name(const char *name, char *out, size_t n)
{
    size_t i = (size_t)snprintf(out, n, "HEARTH_");
    for (const char *p = name; *p && i + 1 < n; p++)
        out[i++] = *p == '-' ? '_' : (char)toupper((unsigned char)*p);
    out[i] = 0;
}

static int parse_value(const opt *o, const char *v, const char *from)
{
    char *end = NULL;
    errno = 0;
    switch (o->kind) {
    case OPT_STR:
        *(const char **)o->target = v;
        return 0;
    case OPT_STR_LIST: {
        opt_str_list *l = o->target;
        if (l->n >= 16) {
            fprintf(stderr, "hearth: %s: at most 16 values\n", from);
            return 2;
        }
        l->items[l->n++] = v;
        return 0;
    }
    case OPT_BOOL:
        if (!strcmp(v, "1") || !strcmp(v, "true") || !strcmp(v, "yes") || !strcmp(v, "on")) {
            *(bool *)o->target = true;
            return 0;
        }
        if (!strcmp(v, "0") || !strcmp(v, "false") || !strcmp(v, "no") || !strcmp(v, "off")) {
            *(bool *)o->target = false;
            return 0;
        }
        break;
    case OPT_INT: {
        long x = strtol(v, &end, 10);
        if (!errno && end != v && !*end && x >= -1 && x <= 1000000000) {
            *(int *)o->target = (int)x;
            return 0;
        }
        break;
    }
    case OPT_FLOAT: {
        double x = strtod(v, &end);
        if (!errno && end != v && !*end && isfinite(x) && fabs(x) <= 1e9) {
            *(float *)o->target = (float)x;
            return 0;
        }
        break;
    }
    case OPT_SIZE:
    case OPT_U64: {
        if (*v == '-')
            break;
        unsigned long long x = strtoull(v, &end, 10);
        if (errno || end == v)
            break;
        unsigned long long mul = 1;
        if (o->kind == OPT_SIZE && *end) {
            switch (toupper((unsigned char)*end)) {
            case 'K': mul = 1ull << 10; break;
            case 'M': mul = 1ull << 20; break;
            case 'G': mul = 1ull << 30; break;
            default: mul = 0;
            }
            end++;
            if (*end == 'i' || *end == 'I')
                end++;
            if (*end == 'B' || *end == 'b')
                end++;
        }
        if (*end || !mul || x > (1ull << 50) / mul)
            break;
        if (o->kind == OPT_SIZE)
            *(size_t *)o->target = (size_t)(x * mul);
        else
            *(uint64_t *)o->target = x;
        return 0;
    }
    }
    fprintf(stderr, "hearth: %s: invalid value '%s' (expected %s)\n", from, v,
            o->kind == OPT_BOOL ? "1, true, yes, on, 0, false, no or off" : o->metavar ? o->metavar : "a value");
    return 2;
}

void opts_print_help(FILE *f, const opt *opts, int n_opts, const char *usage_line, const char *description)
{
    fprintf(f, "usage: %s\n\n%s\n\noptions (each also read from the environment variable shown):\n", usage_line, description);
    for (int i = 0; i < n_opts; i++) {
        const opt *o = &opts[i];
        char env[64], left[96];
        env_name(o->name, env, sizeof env);
        if (o->dash_name)
            snprintf(left, sizeof left, "-%s, --%s%s%s", o->dash_name, o->name, o->kind == OPT_BOOL ? "" : " ",
                     o->kind == OPT_BOOL ? "" : o->metavar);
        else if (o->short_name)
            snprintf(left, sizeof left, "-%c, --%s%s%s", o->short_name, o->name, o->kind == OPT_BOOL ? "" : " ",
                     o->kind == OPT_BOOL ? "" : o->metavar);
        else
            snprintf(left, sizeof left, "    --%s%s%s", o->name, o->kind == OPT_BOOL ? "" : " ", o->kind == OPT_BOOL ? "" : o->metavar);
        if (o->no_env)
            fprintf(f, "  %-34s %s\n", left, o->help);
        else
            fprintf(f, "  %-34s %s [%s]\n", left, o->help, env);
    }
    fprintf(f, "  %-34s %s\n", "-h, --help", "show this help");
}

int opts_parse(const opt *opts, int n_opts, int argc, char **argv, const char *usage_line, const char *description)
{
    for (int i = 0; i < n_opts; i++) {
        char env[64];
        env_name(opts[i].name, env, sizeof env);
        const char *v = opts[i].no_env ? NULL : getenv(env);
        if (v && *v) {
            if (opts[i].kind == OPT_STR_LIST) {
                /* a list from the environment is comma-separated; the copy lives as long as the process */
                char *copy = strdup(v);
                if (!copy || n_env_copies >= 16)
                    return 2;
                env_copies[n_env_copies++] = copy;
                for (char *tok = strtok(copy, ","); tok; tok = strtok(NULL, ","))
                    if (parse_value(&opts[i], tok, env))
                        return 2;
            } else if (parse_value(&opts[i], v, env)) {
                return 2;
            }
        }
    }
    for (int a = 1; a < argc; a++) {
        const char *arg = argv[a];
        if (!strcmp(arg, "-h") || !strcmp(arg, "--help")) {
            opts_print_help(stdout, opts, n_opts, usage_line, description);
            return 1;
        }
        const opt *o = NULL;
        const char *inline_value = NULL;
        if (arg[0] == '-' && arg[1] == '-') {
            const char *name = arg + 2;
            const char *eq = strchr(name, '=');
            size_t len = eq ? (size_t)(eq - name) : strlen(name);
            for (int i = 0; i < n_opts && !o; i++)
                if (strlen(opts[i].name) == len && !strncmp(opts[i].name, name, len))
                    o = &opts[i];
            if (o && eq)
                inline_value = eq + 1;
            if (!o && len > 3 && !strncmp(name, "no-", 3)) {
                for (int i = 0; i < n_opts && !o; i++)
                    if (opts[i].kind == OPT_BOOL && strlen(opts[i].name) == len - 3 && !strncmp(opts[i].name, name + 3, len - 3))
                        o = &opts[i];
                if (o) {
                    *(bool *)o->target = false;
                    continue;
                }
            }
        } else if (arg[0] == '-' && arg[1] && !arg[2]) {
            for (int i = 0; i < n_opts && !o; i++)
                if (opts[i].short_name == arg[1])
                    o = &opts[i];
        } else if (arg[0] == '-' && arg[1]) {
            for (int i = 0; i < n_opts && !o; i++)
                if (opts[i].dash_name && !strcmp(opts[i].dash_name, arg + 1))
                    o = &opts[i];
        }
        if (!o) {
            fprintf(stderr, "hearth %s: unknown option '%s' (see --help)\n", argv[0], arg);
            return 2;
        }
        if (o->kind == OPT_BOOL && !inline_value) {
            *(bool *)o->target = true;
            continue;
        }
        const char *v = inline_value;
        if (!v) {
            if (a + 1 >= argc) {
                fprintf(stderr, "hearth %s: option '%s' needs a value (%s)\n", argv[0], arg, o->metavar);
                return 2;
            }
            v = argv[++a];
        }
        char from[80];
        snprintf(from, sizeof from, "--%s", o->name);
        if (parse_value(o, v, from))
            return 2;
    }
    return 0;
}
