/* Where the e2e suite leaves its tally for the runner's last line. */
#ifndef HD_E2E_TALLY_H
#define HD_E2E_TALLY_H
#define E2E_TALLY ".e2e-tally"
#endif
