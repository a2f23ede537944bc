/* cli.h: the subcommands; each takes argv with argv[0] = its own name and
 * returns the process exit status. */
#ifndef HEARTH_CLI_H
#define HEARTH_CLI_H

int hearth_cmd_doctor(int argc, char **argv);

#endif
