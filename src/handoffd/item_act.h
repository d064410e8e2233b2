/* The actions of item.c's table on a record; see item_act.c. */
#ifndef HD_ITEM_ACT_H
#define HD_ITEM_ACT_H

#include "item_files.h"

item_action item_act_publish, item_act_wait_or_expire, item_act_archive_expired,
            item_act_archive_canceled, item_act_archive_consumed, item_act_cancel,
            item_act_expired_not_cancelable, item_act_taken_not_cancelable;

#endif
