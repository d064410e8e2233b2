/* handoffctl status: not built yet. */
#include "handoffctl.h"

int cmd_status(int argc, char **argv)
{
        (void)argc, (void)argv;
        return ctl_fail(CTL_EXIT_USAGE, "status: not implemented yet");
}
