/* handoffctl render: not built yet. */
#include "handoffctl.h"

int cmd_render(int argc, char **argv)
{
        (void)argc, (void)argv;
        return ctl_fail(CTL_EXIT_USAGE, "render: not implemented yet");
}
