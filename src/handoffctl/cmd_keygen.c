/* handoffctl keygen: not built yet. */
#include "handoffctl.h"

int cmd_keygen(int argc, char **argv)
{
        (void)argc, (void)argv;
        return ctl_fail(CTL_EXIT_USAGE, "keygen: not implemented yet");
}
