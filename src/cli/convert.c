/* convert.c: `hearth convert`: model files for hearth and llama.cpp.
 *
 *   hearth convert [--type f32|f16] HF_DIR OUT.gguf
 *       a sentence-transformers BERT folder as a `bert` GGUF (bert_convert.h)
 *   hearth convert --demo OUT_DIR [--seed N] [--vocab vocab.txt] [--pooling mean|cls|last] [--reranker]
 *       a random-weight folder with all-MiniLM-L6-v2's shapes (bert_demo.h),
 *       for tests and benchmarks that must not download a model; with
 *       --reranker, a cross-encoder (BertForSequenceClassification, one
 *       label), which the first form converts to llama.cpp's RANK GGUF. */
#include "cli.h"
#include "opts.h"

#include "models/bert_convert.h"
#include "models/bert_demo.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int demo(const char *dir, uint64_t seed, const char *vocab, const char *pooling, bool reranker)
{
    hearth_bert_demo_shape shape;
    hearth_bert_demo_shape_minilm(&shape);
    shape.vocab_path = vocab;
    shape.reranker = reranker;
    if (!strcmp(pooling, "cls"))
        shape.pooling = HEARTH_POOL_CLS;
    else if (!strcmp(pooling, "last"))
        shape.pooling = HEARTH_POOL_LAST;
    else if (strcmp(pooling, "mean") != 0) {
        fprintf(stderr, "hearth convert: --pooling '%s' is not one of mean, cls, last\n", pooling);
        return 2;
    }
    hearth_err err = {0};
    if (hearth_bert_demo_write(dir, &shape, seed, &err)) {
        fprintf(stderr, "hearth convert: %s\n", err.msg);
        return 1;
    }
    return 0;
}

int hearth_cmd_convert(int argc, char **argv)
{
    const char *type = "f32", *demo_dir = NULL, *vocab = NULL, *pooling = "mean";
    uint64_t seed = 1;
    bool reranker = false;
    const opt opts[] = {
        {"type", 0, OPT_STR, &type, "f32|f16", "type of the linear weights and token embeddings (f32)"},
        {"demo", 0, OPT_STR, &demo_dir, "DIR", "write a random-weight all-MiniLM-L6-v2-shaped folder instead", .no_env = true},
        {"seed", 0, OPT_U64, &seed, "N", "with --demo: the weights' seed (1)"},
        {"vocab", 0, OPT_STR, &vocab, "PATH", "with --demo: the vocab.txt to use (default: a synthetic one)"},
        {"pooling", 0, OPT_STR, &pooling, "MODE", "with --demo: mean, cls or last (mean)"},
        {"reranker", 0, OPT_BOOL, &reranker, NULL, "with --demo: a cross-encoder (BertForSequenceClassification, one label)"},
    };
    int n_opts = (int)(sizeof opts / sizeof opts[0]), n_flags, n_pos, status = 2;
    char **flags = calloc((size_t)argc + 1, sizeof *flags), **pos = calloc((size_t)argc + 1, sizeof *pos);
    if (!flags || !pos)
        goto done;
    hearth_cli_split_args(opts, n_opts, argc, argv, flags, &n_flags, pos, &n_pos);
    int rc = opts_parse(opts, n_opts, n_flags, flags, "hearth convert [--type f32|f16] HF_DIR OUT.gguf | --demo DIR",
                        "Writes a sentence-transformers BERT folder as a bert GGUF file (llama.cpp's names), or a "
                        "random-weight demo folder.");
    if (rc) {
        status = rc == 1 ? 0 : 2;
        goto done;
    }
    if (demo_dir) {
        status = n_pos ? 2 : demo(demo_dir, seed, vocab, pooling, reranker);
        if (n_pos)
            fprintf(stderr, "hearth convert: --demo takes no other arguments\n");
        goto done;
    }
    if (n_pos != 2 || (strcmp(type, "f32") && strcmp(type, "f16"))) {
        fprintf(stderr, "hearth convert: need HF_DIR OUT.gguf and --type f32 or f16; see --help\n");
        goto done;
    }
    hearth_err err = {0};
    if (hearth_bert_convert(pos[0], pos[1], strcmp(type, "f16") ? HEARTH_F32 : HEARTH_F16, &err)) {
        fprintf(stderr, "hearth convert: %s\n", err.msg);
        status = 1;
        goto done;
    }
    status = 0;
done:
    free(flags);
    free(pos);
    return status;
}
