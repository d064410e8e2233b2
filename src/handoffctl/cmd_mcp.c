#include "handoffctl.h"
int cmd_mcp(int argc, char **argv) { return 2; }
