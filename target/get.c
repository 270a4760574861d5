/* Target GET and HEAD of an object: one fd for metadata, size check and data; whole or one range. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "httputil.h"
#include "log.h"
#include "lom.h"
#include "target.h"

/*
 * Opens the object and validates it. Returns the fd with *lom filled, or -1 after responding:
 * 404 when absent (or a directory of other objects), 500 when its metadata is missing, corrupt
 * or disagrees with the file size (such an object is never served).
 */
static int open_checked(ft_req_t *r, const tgt_obj_t *o, ft_lom_t *lom)
{
	struct stat st;
	int fd = openat(o->mp->root_fd, o->rel, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);

	if (fd < 0) {
		if (errno == ENOENT || errno == ENOTDIR || errno == ELOOP)
			ft_resp_error(r, 404, "object \"%s/%s\" does not exist", o->bucket, o->obj);
		else
			ft_resp_error(r, 500, "object \"%s/%s\": cannot open: %s", o->bucket, o->obj, strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) != 0) {
		ft_resp_error(r, 500, "object \"%s/%s\": cannot stat: %s", o->bucket, o->obj, strerror(errno));
		goto fail;
	}
	if (!S_ISREG(st.st_mode)) {
		ft_resp_error(r, 404, "object \"%s/%s\" does not exist", o->bucket, o->obj);
		goto fail;
	}
	int rc = ft_lom_fget(fd, lom);
	if (rc != 0) {
		const char *why = rc == -ENODATA ? "metadata missing" : rc == -EBADMSG ? "metadata corrupt" : strerror(-rc);
		ft_error("object %s/%s on %s: %s, not served", o->bucket, o->obj, o->mp->path, why);
		ft_resp_error(r, 500, "object \"%s/%s\" is damaged (%s) and cannot be served", o->bucket, o->obj, why);
		goto fail;
	}
	if ((uint64_t)st.st_size != lom->size) {
		ft_error("object %s/%s on %s: size %lld, metadata says %" PRIu64 ", not served", o->bucket, o->obj,
			 o->mp->path, (long long)st.st_size, lom->size);
		ft_resp_error(r, 500, "object \"%s/%s\" is damaged (size %lld, expected %" PRIu64 ") and cannot be served",
			      o->bucket, o->obj, (long long)st.st_size, lom->size);
		goto fail;
	}
	return fd;
fail:
	close(fd);
	return -1;
}

static void meta_headers(ft_req_t *r, const ft_lom_t *lom)
{
	ft_resp_header(r, "Ais-Checksum-Type", ft_cksum_name(lom->cksum_type));
	ft_resp_header(r, "Ais-Checksum-Value", lom->cksum);
	ft_resp_header(r, "Ais-Version", lom->version);
	ft_resp_headerf(r, "Ais-Atime", "%lld", (long long)lom->atime_ns);
	if (lom->cksum[0])
		ft_resp_headerf(r, "ETag", "\"%s\"", lom->cksum);
	ft_resp_header(r, "Accept-Ranges", "bytes");
}

void tgt_get(ft_req_t *r, tgt_obj_t *o)
{
	ft_lom_t lom;
	uint64_t off = 0, len = 0;
	int fd = open_checked(r, o, &lom);

	if (fd < 0)
		return;
	if (ft_req_method(r) == FT_HTTP_HEAD) {
		meta_headers(r, &lom);
		ft_resp_headerf(r, "Ais-Size", "%" PRIu64, lom.size);
		ft_resp_file(r, 200, TGT_CONTENT_TYPE, fd, 0, lom.size);
		return;
	}
	switch (ft_range_parse(ft_req_header(r, "Range"), lom.size, &off, &len)) {
	case FT_RANGE_NONE:
		meta_headers(r, &lom);
		ft_resp_file(r, 200, TGT_CONTENT_TYPE, fd, 0, lom.size);
		return;
	case FT_RANGE_OK:
		meta_headers(r, &lom);
		ft_resp_headerf(r, "Content-Range", "bytes %" PRIu64 "-%" PRIu64 "/%" PRIu64, off, off + len - 1,
				lom.size);
		ft_resp_file(r, 206, TGT_CONTENT_TYPE, fd, (off_t)off, len);
		return;
	case FT_RANGE_UNSAT:
		close(fd);
		ft_resp_headerf(r, "Content-Range", "bytes */%" PRIu64, lom.size);
		ft_resp_error(r, 416, "range \"%s\" not satisfiable for object \"%s/%s\" of %" PRIu64 " bytes",
			      ft_req_header(r, "Range"), o->bucket, o->obj, lom.size);
		return;
	case FT_RANGE_BAD:
	default:
		close(fd);
		ft_resp_error(r, 400, "malformed Range header \"%s\" (expected one range: bytes=a-b, a- or -n)",
			      ft_req_header(r, "Range"));
		return;
	}
}
