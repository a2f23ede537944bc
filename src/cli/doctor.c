/* doctor.c: placeholder until the server lands; prints CPU facts. */
#include "cli.h"
#include "base/cpu.h"
#include <stdio.h>
int hearth_cmd_doctor(int argc, char **argv)
{
    (void)argc; (void)argv;
    const hearth_cpu_info *c = hearth_cpu();
    printf("{\"cpu\":\"%s\"}\n", c->model);
    return 0;
}
