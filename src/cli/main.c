/* main.c: hearth's entry point; dispatches to a subcommand. */
#include "cli.h"

#include <stdio.h>
#include <string.h>

static void usage(FILE *f)
{
    fprintf(f, "usage: hearth <command> [options]\n\n"
               "commands:\n"
               "  serve    serve models over HTTP\n"
               "  doctor   print what this binary was built for and what it found, as JSON\n"
               "  embed    print sentence embeddings as JSON, or --bench the encoder\n"
               "  convert  write a sentence-transformers BERT folder as a bert GGUF file\n"
               "  run      generate text from a GGUF model (--bench: prompt and decode speed)\n"
               "  quantize write a GGUF model's weight matrices in another type\n"
               "  bench    send HTTP load to a server: requests/s, latency percentiles, TTFT and ITL\n"
               "\nRun `hearth <command> --help` for a command's options.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(cmd, "--version") == 0) {
        printf("hearth %s\n", HEARTH_VERSION);
        return 0;
    }
    if (strcmp(cmd, "serve") == 0)
        return hearth_cmd_serve(argc - 1, argv + 1, argv);
    if (strcmp(cmd, "doctor") == 0)
        return hearth_cmd_doctor(argc - 1, argv + 1);
    if (strcmp(cmd, "embed") == 0)
        return hearth_cmd_embed(argc - 1, argv + 1);
    if (strcmp(cmd, "convert") == 0)
        return hearth_cmd_convert(argc - 1, argv + 1);
    if (strcmp(cmd, "run") == 0)
        return hearth_cmd_run(argc - 1, argv + 1);
    if (strcmp(cmd, "quantize") == 0)
        return hearth_cmd_quantize(argc - 1, argv + 1);
    if (strcmp(cmd, "bench") == 0)
        return hearth_cmd_bench(argc - 1, argv + 1);
    fprintf(stderr, "hearth: unknown command '%s'\n", cmd);
    usage(stderr);
    return 2;
}
