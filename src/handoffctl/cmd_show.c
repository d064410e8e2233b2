/* handoffctl show: not built yet. */
#include "handoffctl.h"

int cmd_show(int argc, char **argv)
{
        (void)argc, (void)argv;
        return ctl_fail(CTL_EXIT_USAGE, "show: not implemented yet");
}
