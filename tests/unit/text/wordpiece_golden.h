/* wordpiece_golden.h: checks a WordPiece tokenizer against llama.cpp's test
 * vectors, <stem>.inp and <stem>.out in the shared folder, made by
 * llama.cpp's convert-hf-to-gguf-update.py with Hugging Face's tokenizer.
 *
 * .inp: every input followed by "\n__ggml_vocab_test__\n" (so the text after
 * the last separator is empty and is no input; an input may be empty or be
 * only newlines). .out: one line per input, " id id ...\n", ids without
 * special tokens; an input with no ids has an empty line. Included by the
 * text and models tests, after harness.h. */
#ifndef HEARTH_TEST_WORDPIECE_GOLDEN_H
#define HEARTH_TEST_WORDPIECE_GOLDEN_H

#include "base/file.h"
#include "text/wordpiece.h"

#define GOLDEN_SEP "\n__ggml_vocab_test__\n"

static void golden_print_text(const char *s, size_t n)
{
    fputc('"', stderr);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\n')
            fputs("\\n", stderr);
        else if (c == '\t')
            fputs("\\t", stderr);
        else if (c < 0x20 || c == 0x7F)
            fprintf(stderr, "\\x%02x", c);
        else
            fputc(c, stderr);
    }
    fputc('"', stderr);
}

/* Parses one .out line into want (at most cap ids); returns the count or -1. */
static int golden_parse_ids(const char *line, size_t n, int32_t *want, int cap)
{
    int count = 0;
    size_t i = 0;
    while (i < n) {
        if (line[i] == ' ') {
            i++;
            continue;
        }
        long v = 0;
        size_t start = i;
        while (i < n && line[i] >= '0' && line[i] <= '9' && v < 100000000)
            v = v * 10 + (line[i++] - '0');
        if (i == start || count == cap || (i < n && line[i] != ' '))
            return -1;
        want[count++] = (int32_t)v;
    }
    return count;
}

/* Runs every input of <stem>.inp through wp and compares with <stem>.out;
 * prints the input, expected and got ids for each mismatch. */
static void check_wordpiece_golden(const hearth_wordpiece *wp, const char *stem)
{
    char rel[256], inp_path[512], out_path[512];
    char *inp = NULL, *out = NULL;
    size_t inp_len = 0, out_len = 0;
    hearth_err err = {0};
    snprintf(rel, sizeof rel, "%s.inp", stem);
    if (!hearth_test_shared_path(inp_path, sizeof inp_path, rel))
        return;
    snprintf(rel, sizeof rel, "%s.out", stem);
    if (!hearth_test_shared_path(out_path, sizeof out_path, rel))
        return;
    if (hearth_file_read(inp_path, 1 << 20, &inp, &inp_len, &err) ||
        hearth_file_read(out_path, 1 << 20, &out, &out_len, &err)) {
        CHECK_MSG(0, "%s", err.msg);
        goto done;
    }
    size_t ip = 0, op = 0, sep_len = strlen(GOLDEN_SEP);
    int cases = 0, bad = 0;
    for (;;) {
        const char *hit = memmem(inp + ip, inp_len - ip, GOLDEN_SEP, sep_len);
        if (!hit)
            break;
        size_t text_len = (size_t)(hit - (inp + ip));
        const char *nl = memchr(out + op, '\n', out_len - op);
        if (!nl) {
            CHECK_MSG(0, "%s: no line for input %d", out_path, cases + 1);
            break;
        }
        int32_t want[512];
        int n_want = golden_parse_ids(out + op, (size_t)(nl - (out + op)), want, 512);
        CHECK_MSG(n_want >= 0, "%s: line %d is not a list of ids", out_path, cases + 1);
        hearth_ids got;
        hearth_ids_init(&got, 4096);
        int rc = hearth_wordpiece_encode(wp, inp + ip, text_len, &got, &err);
        CHECK_MSG(rc == HEARTH_OK, "input %d: %s", cases + 1, rc ? err.msg : "");
        int same = n_want >= 0 && rc == HEARTH_OK && got.n == (size_t)n_want;
        for (size_t k = 0; same && k < got.n; k++)
            same = got.v[k] == want[k];
        if (!same) {
            bad++;
            hearth_test_case_failed = 1;
            fprintf(stderr, "  input %d: ", cases + 1);
            golden_print_text(inp + ip, text_len);
            fprintf(stderr, "\n    expected:");
            for (int k = 0; k < n_want; k++)
                fprintf(stderr, " %d", (int)want[k]);
            fprintf(stderr, "\n    got:     ");
            for (size_t k = 0; k < got.n; k++)
                fprintf(stderr, " %d", (int)got.v[k]);
            fputc('\n', stderr);
        }
        hearth_ids_deinit(&got);
        cases++;
        ip = (size_t)(hit - inp) + sep_len;
        op = (size_t)(nl - out) + 1;
    }
    CHECK_MSG(ip == inp_len, "%s: %zu bytes after the last separator", inp_path, inp_len - ip);
    CHECK_MSG(op == out_len, "%s: more lines than inputs (%d)", out_path, cases);
    CHECK_MSG(cases >= 40, "only %d golden cases", cases);
    if (bad)
        fprintf(stderr, "  %d of %d golden inputs differ\n", bad, cases);
done:
    free(inp);
    free(out);
}

#endif
