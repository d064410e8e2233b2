/* handoffctl verify: not built yet. */
#include "handoffctl.h"

int cmd_verify(int argc, char **argv)
{
        (void)argc, (void)argv;
        return ctl_fail(CTL_EXIT_USAGE, "verify: not implemented yet");
}
