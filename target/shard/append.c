/* SPDX-License-Identifier: Apache-2.0 */
/* PUT ?archpath=: appends a member to a shard (created when absent) and publishes the new shard like a PUT. */
#include "shard/shard.h"

void tgt_shard_put(ft_req_t *r, tgt_obj_t *o)
{
	ft_resp_error(r, 501, "append to shard \"%s/%s\" is not built yet", o->bucket, o->obj);
}
