/* handoffctl: placeholder main until the CLI lands. */
#include <stdio.h>
#include "handoff.h"
int main(void)
{
        printf("handoffctl %s\n", HD_VERSION_STRING);
        return 0;
}
