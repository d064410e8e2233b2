/* handoffctl baton: not built yet. */
#include "handoffctl.h"

int cmd_baton(int argc, char **argv)
{
        (void)argc, (void)argv;
        return ctl_fail(CTL_EXIT_USAGE, "baton: not implemented yet");
}
