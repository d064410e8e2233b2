/* handoffctl submit: not built yet. */
#include "handoffctl.h"

int cmd_submit(int argc, char **argv)
{
        (void)argc, (void)argv;
        return ctl_fail(CTL_EXIT_USAGE, "submit: not implemented yet");
}
