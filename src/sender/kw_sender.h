/*-------------------------------------------------------------------------
 *
 * kw_sender.h
 *		The request sender (sender.c): the background process that sends
 *		the applies kwatch.apply() recorded at commit.
 *
 *-------------------------------------------------------------------------
 */
#ifndef KW_SENDER_H
#define KW_SENDER_H

#include "kw_common.h"


#endif							/* KW_SENDER_H */
