/* handoffd: placeholder main until the daemon lands. */
#include <stdio.h>
#include "handoff.h"
int main(void)
{
        printf("handoffd %s\n", HD_VERSION_STRING);
        return 0;
}
