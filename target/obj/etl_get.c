/* SPDX-License-Identifier: Apache-2.0 */
/* GET ?etl=NAME: an object served through a transformer, whole or not at all. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "target.h"

/*
 * DESIGN
 * The transformer's output goes to an unnamed work file (O_TMPFILE) on the object's mountpath
 * first, and only a complete result is sent (200 with its length, by sendfile); a failing
 * transformer answers a JSON error with nothing of its output, so a client never gets a partial
 * body under a 200. A remote object not cached yet is fetched into the cache first, as a
 * prefetch would. Range, conditions and the object's checksum headers do not apply to the output.
 */

/* Opens the stored copy of o and its metadata; fd, or -1 after answering. */
static int open_object(ft_req_t *r, tgt_obj_t *o, ft_lom_t *lom)
{
	char err[512] = "";
	int64_t bytes = 0;
	int fd, rc = tgt_is_remote(o) ? tgt_coldget_prefetch(o, &bytes, err, sizeof(err)) : 0;

	if (rc < 0) {
		ft_resp_error(r, -rc, "object \"%s://%s/%s\": %s", o->provider, o->bucket, o->obj, err);
		return -1;
	}
	fd = openat(o->mp->root_fd, o->rel, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0) {
		if (errno == ENOENT)
			ft_resp_error(r, 404, "object \"%s://%s/%s\" does not exist", o->provider, o->bucket, o->obj);
		else
			ft_resp_error(r, 500, "object \"%s/%s\": %s", o->bucket, o->obj, strerror(errno));
		return -1;
	}
	rc = ft_lom_fget(fd, lom);
	if (rc != 0) {
		close(fd);
		ft_resp_error(r, 500, "object \"%s/%s\": damaged metadata, not transformed", o->bucket, o->obj);
		return -1;
	}
	return fd;
}

/* Worker: transform into a work file, then send it whole (or the error). */
static void etl_work(ft_req_t *r, void *arg)
{
	tgt_obj_t *o = arg;
	const char *name = ft_req_query(r, "etl");
	char err[600] = "";
	int64_t size = 0;
	ft_lom_t lom;
	tgt_etl_rc_t rc;
	int fd, out;

	if (!tgt_etl_known(name)) {
		ft_resp_error(r, 404, "etl \"%s\" does not exist", name);
		return;
	}
	fd = open_object(r, o, &lom);
	if (fd < 0)
		return;
	out = tgt_work_anon(o->mp);
	if (out < 0) {
		ft_resp_error(r, 500, "work file: %s", strerror(-out));
		close(fd);
		return;
	}
	rc = tgt_etl_transform(name, fd, (int64_t)lom.size, out, &size, 0, err, sizeof(err));
	close(fd);
	if (rc != TGT_ETL_OK) {
		close(out);
		ft_resp_error(r, tgt_etl_http_status(rc), "etl \"%s\" of object \"%s/%s\": %s", name, o->bucket, o->obj,
			      err);
		return;
	}
	ft_resp_header(r, "Ais-Etl", name);
	ft_resp_file(r, 200, "application/octet-stream", out, 0, (uint64_t)size);
}

void tgt_etl_get(ft_req_t *r, tgt_obj_t *o)
{
	ft_req_defer(r, etl_work, o);
}
