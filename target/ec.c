/* Erasure coding of objects with isa-l: slices or replicas on other targets, restore on a lost main copy. */
#include <errno.h>
#include <stdio.h>

#include "target.h"

int tgt_ec_put(const tgt_obj_t *o, const ft_lom_t *lom, char *err, size_t cap)
{
	(void)lom;
	if (o->ec_data <= 0)
		return 0;
	snprintf(err, cap, "erasure coding (ec %d+%d) is not built yet", o->ec_data, o->ec_parity);
	return -1;
}

void tgt_ec_delete(const tgt_obj_t *o)
{
	(void)o;
}

int tgt_ec_restore(tgt_obj_t *o, char *err, size_t cap)
{
	(void)o;
	(void)err;
	(void)cap;
	return -ENOENT;
}

int tgt_ec_job_obj(tgt_obj_t *o, int64_t *bytes, char *err, size_t cap)
{
	(void)o;
	(void)bytes;
	snprintf(err, cap, "erasure coding is not built yet");
	return -1;
}

void tgt_ec_ctl(tgt_t *t, const ft_ctl_req_t *req, ft_ctl_resp_t *resp)
{
	(void)t;
	ft_ctl_error(resp, 501, "%s %s: erasure coding is not built yet", req->method, req->path);
}
