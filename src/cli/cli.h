/* cli.h: the subcommands; each takes argv with argv[0] = its own name and
 * returns the process exit status. */
#ifndef HEARTH_CLI_H
#define HEARTH_CLI_H

int hearth_cmd_doctor(int argc, char **argv);
/* full_argv is the process's whole argv, for re-exec with --spawn. */
int hearth_cmd_serve(int argc, char **argv, char **full_argv);

#endif
