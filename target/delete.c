/* Target DELETE of an object: unlink, then prune the directories it leaves empty. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "target.h"

/*
 * Pruning races with a PUT that has just created (or opened) one of the directories: the PUT
 * retries its mkdir + rename when the rename finds the directory gone (see put.c).
 */
void tgt_delete(ft_req_t *r, tgt_obj_t *o)
{
	if (unlinkat(o->mp->root_fd, o->rel, 0) != 0) {
		/* EISDIR: the name is a directory of other objects, not an object. */
		if (errno == ENOENT || errno == ENOTDIR || errno == EISDIR)
			ft_resp_error(r, 404, "object \"%s/%s\" does not exist", o->bucket, o->obj);
		else
			ft_resp_error(r, 500, "object \"%s/%s\": cannot delete: %s", o->bucket, o->obj, strerror(errno));
		return;
	}
	tgt_list_bump(o->t, o->provider, o->bucket);
	tgt_parent_prune(o->mp, o->rel);
	tgt_mirror_delete(o);
	tgt_ec_delete(o);
	ft_resp_bytes(r, 200, NULL, NULL, 0);
}
