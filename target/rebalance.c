/* Rebalance (objects follow the cluster map) and resilver (objects follow the mountpath set). */
#include <errno.h>
#include <stdio.h>

#include "target.h"

void tgt_rebalance_smap_changed(tgt_t *t, const ft_smap_t *prev, const ft_smap_t *cur)
{
	(void)t;
	(void)prev;
	(void)cur;
}

int tgt_rebalance_pull(tgt_obj_t *o, char *err, size_t cap)
{
	(void)o;
	(void)err;
	(void)cap;
	return -ENOENT;
}

void tgt_rebalance_ctl(tgt_t *t, const ft_ctl_req_t *req, ft_ctl_resp_t *resp)
{
	(void)t;
	ft_ctl_error(resp, 501, "%s %s: rebalance and mountpath changes are not built yet", req->method, req->path);
}

void tgt_rebalance_fini(tgt_t *t)
{
	(void)t;
}
