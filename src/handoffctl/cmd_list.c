/* handoffctl list: not built yet. */
#include "handoffctl.h"

int cmd_list(int argc, char **argv)
{
        (void)argc, (void)argv;
        return ctl_fail(CTL_EXIT_USAGE, "list: not implemented yet");
}
