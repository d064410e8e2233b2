/* handoffctl consume: not built yet. */
#include "handoffctl.h"

int cmd_consume(int argc, char **argv)
{
        (void)argc, (void)argv;
        return ctl_fail(CTL_EXIT_USAGE, "consume: not implemented yet");
}
