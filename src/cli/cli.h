/* cli.h: the subcommands; each takes argv with argv[0] = its own name and
 * returns the process exit status. */
#ifndef HEARTH_CLI_H
#define HEARTH_CLI_H

int hearth_cmd_doctor(int argc, char **argv);
/* full_argv is the process's whole argv, for re-exec with --spawn. */
int hearth_cmd_serve(int argc, char **argv, char **full_argv);

/* hearth embed: JSON embeddings of texts, or --bench (embed.c). */
int hearth_cmd_embed(int argc, char **argv);
/* hearth convert: a sentence-transformers folder to a bert GGUF, or --demo (convert.c). */
int hearth_cmd_convert(int argc, char **argv);

struct opt;
/* Splits argv (argv[0] the subcommand) into flags with their values, for
 * opts_parse, and positional arguments ("--" ends the flags); flags and
 * positional need argc entries each (embed.c). */
int hearth_cli_split_args(const struct opt *opts, int n_opts, int argc, char **argv, char **flags, int *n_flags,
                          char **positional, int *n_positional);
/* `hearth run`: generate text from a GGUF model (also --bench, --dump-logits). */
int hearth_cmd_run(int argc, char **argv);
/* `hearth run -m MODEL.onnx`: frames of a fixed-shape model (run_frames.c). */
int hearth_cmd_run_frames(int argc, char **argv);
/* `hearth quantize IN OUT TYPE`: re-quantize a GGUF model's weight matrices. */
int hearth_cmd_quantize(int argc, char **argv);
/* `hearth bench URL`: an HTTP load generator, closed or open loop (bench.c). */
int hearth_cmd_bench(int argc, char **argv);

#endif
