/* opts.h: declarative command-line flags, each also read from an environment
 * variable (flag --max-body -> HEARTH_MAX_BODY), for service managers.
 * Precedence: built-in default < environment < command line. */
#ifndef HEARTH_CLI_OPTS_H
#define HEARTH_CLI_OPTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum opt_kind { OPT_INT, OPT_STR, OPT_BOOL, OPT_SIZE, OPT_U64, OPT_STR_LIST, OPT_FLOAT };

typedef struct opt_str_list {
    const char *items[16];
    int n;
} opt_str_list;

typedef struct opt {
    const char *name;   /* long name without "--" */
    char short_name;    /* or 0 */
    enum opt_kind kind;
    void *target;       /* int*, const char**, bool*, size_t*, uint64_t*, opt_str_list*, float* */
    const char *metavar;
    const char *help;
    bool no_env;        /* command line only: the name means something else to another command */
    const char *dash_name; /* or NULL: a longer name after one dash, as llama.cpp's "-np", "-ngl" */
} opt;

/* Parses env then argv (argv[0] is the subcommand). Prints a clear error and
 * returns 2 on a bad flag or value; returns 1 after printing help for --help;
 * 0 on success. */
int opts_parse(const opt *opts, int n_opts, int argc, char **argv, const char *usage_line, const char *description);
void opts_print_help(FILE *f, const opt *opts, int n_opts, const char *usage_line, const char *description);

#endif
