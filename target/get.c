/* Target GET and HEAD of an object: one fd for metadata, size check and data; conditions; whole or one range. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
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

/* The object's entity tag without quotes: the S3 ETag when one was stored, else the checksum. */
static const char *etag_of(const ft_lom_t *lom)
{
	return lom->etag[0] ? lom->etag : lom->cksum;
}

/* "Sun, 06 Nov 1994 08:49:37 GMT" of t. */
static void http_date(time_t t, char *out, size_t cap)
{
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(out, cap, "%a, %d %b %Y %H:%M:%S GMT", &tm); /* the C locale: daemons never set another */
}

/* Parses an HTTP-date (IMF-fixdate, RFC 850 or asctime form); -1 when it is none. */
static time_t parse_http_date(const char *s)
{
	static const char *const forms[] = { "%a, %d %b %Y %H:%M:%S GMT", "%A, %d-%b-%y %H:%M:%S GMT",
					     "%a %b %e %H:%M:%S %Y" };
	struct tm tm;

	for (size_t i = 0; i < sizeof(forms) / sizeof(forms[0]); i++) {
		memset(&tm, 0, sizeof(tm));
		const char *end = strptime(s, forms[i], &tm);
		if (end != NULL && *end == '\0')
			return timegm(&tm);
	}
	return (time_t)-1;
}

/*
 * Whether the If-Match / If-None-Match list in hdr names tag: "*" matches any object; W/ tags
 * match only with weak comparison (If-None-Match).
 */
static bool etag_listed(const char *hdr, const char *tag, bool weak)
{
	size_t tlen = strlen(tag);
	const char *p = hdr;

	while (*p) {
		while (*p == ' ' || *p == '\t' || *p == ',')
			p++;
		if (*p == '*')
			return true;
		bool is_weak = strncmp(p, "W/", 2) == 0;
		if (is_weak)
			p += 2;
		if (*p != '"')
			return false; /* malformed: matches nothing */
		const char *end = strchr(p + 1, '"');
		if (!end)
			return false;
		if ((!is_weak || weak) && (size_t)(end - p - 1) == tlen && memcmp(p + 1, tag, tlen) == 0)
			return true;
		p = end + 1;
	}
	return false;
}

/*
 * Conditional request checks (RFC 9110 13.2.2, as S3 applies them). Returns 0 to go on, 304 or
 * 412 for the status to answer.
 */
static int check_conditions(ft_req_t *r, const ft_lom_t *lom)
{
	const char *im = ft_req_header(r, "If-Match");
	const char *inm = ft_req_header(r, "If-None-Match");
	const char *ius = ft_req_header(r, "If-Unmodified-Since");
	const char *ims = ft_req_header(r, "If-Modified-Since");
	time_t mtime = (time_t)(lom->mtime_ns / 1000000000);
	time_t t;

	if (im) {
		if (!etag_listed(im, etag_of(lom), false))
			return 412;
	} else if (ius && (t = parse_http_date(ius)) != (time_t)-1 && mtime > t) {
		return 412;
	}
	if (inm) {
		if (etag_listed(inm, etag_of(lom), true))
			return 304;
	} else if (ims && (t = parse_http_date(ims)) != (time_t)-1 && mtime <= t) {
		return 304;
	}
	return 0;
}

static void meta_headers(ft_req_t *r, const ft_lom_t *lom)
{
	char date[64];

	ft_resp_header(r, "Ais-Checksum-Type", ft_cksum_name(lom->cksum_type));
	ft_resp_header(r, "Ais-Checksum-Value", lom->cksum);
	ft_resp_header(r, "Ais-Version", lom->version);
	ft_resp_headerf(r, "Ais-Atime", "%lld", (long long)lom->atime_ns);
	if (etag_of(lom)[0])
		ft_resp_headerf(r, "ETag", "\"%s\"", etag_of(lom));
	if (lom->mtime_ns > 0) {
		http_date((time_t)(lom->mtime_ns / 1000000000), date, sizeof(date));
		ft_resp_header(r, "Last-Modified", date);
	}
	ft_resp_header(r, "Accept-Ranges", "bytes");
	tgt_meta_headers(r, lom);
}

void tgt_get(ft_req_t *r, tgt_obj_t *o)
{
	ft_lom_t lom;
	uint64_t off = 0, len = 0;

	if (tgt_coldget_wanted(r, o)) { /* remote bucket, not cached or revalidating (coldget.c) */
		tgt_coldget(r, o);
		return;
	}
	int fd = open_checked(r, o, &lom);

	if (fd < 0)
		return;
	tgt_lru_touch(o);
	int cond = check_conditions(r, &lom);
	if (cond == 304) {
		close(fd);
		meta_headers(r, &lom);
		ft_resp_bytes(r, 304, NULL, NULL, 0);
		return;
	}
	if (cond == 412) {
		close(fd);
		ft_resp_error(r, 412, "object \"%s/%s\": a precondition (If-Match or If-Unmodified-Since) does not hold",
			      o->bucket, o->obj);
		return;
	}
	if (ft_req_method(r) == FT_HTTP_HEAD) {
		meta_headers(r, &lom);
		ft_resp_headerf(r, "Ais-Size", "%" PRIu64, lom.size);
		ft_resp_file(r, 200, tgt_meta_ctype(&lom), fd, 0, lom.size);
		return;
	}
	switch (ft_range_parse(ft_req_header(r, "Range"), lom.size, &off, &len)) {
	case FT_RANGE_NONE:
		meta_headers(r, &lom);
		ft_resp_file(r, 200, tgt_meta_ctype(&lom), fd, 0, lom.size);
		return;
	case FT_RANGE_OK:
		meta_headers(r, &lom);
		ft_resp_headerf(r, "Content-Range", "bytes %" PRIu64 "-%" PRIu64 "/%" PRIu64, off, off + len - 1,
				lom.size);
		ft_resp_file(r, 206, tgt_meta_ctype(&lom), fd, (off_t)off, len);
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
