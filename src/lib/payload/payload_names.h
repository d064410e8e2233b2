/* Private: the payload_type values, each spelled here once, for the
 * table (payload.c), the formats' own files and handoffctl's usage.  Not
 * installed. */
#ifndef HD_PAYLOAD_NAMES_H
#define HD_PAYLOAD_NAMES_H

#define PT_VOX "vox/1.0"
#define PT_BATON "baton/1"
#define PT_UAH "U.AgentHandoff/0.1.0"
#define PT_ACT "act/1.0"
#define PT_A2A "a2a/1"
/* All of them, in the table's order, for usage texts. */
#define PAYLOAD_TYPE_NAMES PT_VOX ", " PT_BATON ", " PT_UAH ", " PT_ACT ", " PT_A2A

#endif
