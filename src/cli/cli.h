/* cli.h: the subcommands; each takes argv with argv[0] = its own name and
 * returns the process exit status. */
#ifndef HEARTH_CLI_H
#define HEARTH_CLI_H

int hearth_cmd_doctor(int argc, char **argv);
/* full_argv is the process's whole argv, for re-exec with --spawn. */
int hearth_cmd_serve(int argc, char **argv, char **full_argv);

/* `hearth run`: generate text from a GGUF model (also --bench, --dump-logits). */
int hearth_cmd_run(int argc, char **argv);
/* `hearth quantize IN OUT TYPE`: re-quantize a GGUF model's weight matrices. */
int hearth_cmd_quantize(int argc, char **argv);

#endif
