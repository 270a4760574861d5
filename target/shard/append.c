/* SPDX-License-Identifier: Apache-2.0 */
/* PUT ?archpath=: appends a member to a shard (created when absent) and publishes the new shard like a PUT. */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fdio.h"
#include "base/log.h"
#include "http/util.h"
#include "protect/protect.h"
#include "shard/shard.h"

/*
 * DESIGN
 * The member's bytes land in a work file first (read on a worker, before any lock). Then, under
 * the shard's name lock, the new shard is built in a second work file and published exactly as a
 * PUT publishes (next version, metadata, rename, mirror copies; EC slices after the lock): a
 * reader sees the old shard or the new one, never a torn one, and concurrent appends to one shard
 * serialize on the name lock (which covers local disk I/O only, like every publisher's).
 * An uncompressed TAR is copied up to its end-of-archive marker with copy_file_range(2) (no copy
 * through user memory; a reflink where the file system has them) and the member added after it;
 * any earlier member of the same name stays in the file and is shadowed (the last one wins). A
 * compressed shard is re-encoded by libarchive, its decoded bytes bounded by
 * shard_max_decoded_bytes, dropping an earlier member of the same name; ZIP members are written
 * stored, so every member of an appended ZIP is read by sendfile. The cost is O(shard size) per
 * append: batch members into one shard where that matters.
 */

#define CHUNK (256 * 1024)

typedef struct {
	tgt_obj_t *o;
	tgt_shard_fmt_t fmt;
	const char *archpath;
	int body_fd, new_fd;     /* work files are created write-only: body_fd is reopened to read once received */
	char body[64], work[64]; /* work file names; "" once gone */
	uint64_t body_size;
	char err[300];
} append_t;

static void release(append_t *a)
{
	tgt_work_drop(a->o->mp, &a->body_fd, a->body);
	tgt_work_drop(a->o->mp, &a->new_fd, a->work);
}

static void release_hook(void *arg)
{
	release(arg);
}

/* Reads the request body into the body work file. 0, or -1 after responding. */
static int receive(ft_req_t *r, append_t *a)
{
	uint8_t *buf = malloc(CHUNK);
	ssize_t n;
	int rc = 0;

	if (buf == NULL) {
		ft_resp_error(r, 500, "out of memory");
		return -1;
	}
	while ((n = ft_req_body_read(r, buf, CHUNK)) > 0) {
		if ((rc = ft_write_all(a->body_fd, buf, (size_t)n)) != 0)
			break;
		a->body_size += (uint64_t)n;
	}
	free(buf);
	if (rc != 0) {
		ft_resp_error(r, rc == -ENOSPC ? 507 : 500, "shard \"%s/%s\": cannot store the member: %s",
			      a->o->bucket, a->o->obj, strerror(-rc));
		return -1;
	}
	if (n < 0) {
		ft_resp_error(r, n == -ETIMEDOUT ? 408 : 400, "shard \"%s/%s\": request body %s; nothing stored",
			      a->o->bucket, a->o->obj, n == -ETIMEDOUT ? "stalled" : "incomplete");
		return -1;
	}
	return 0;
}

/* TAR: the old shard up to its end marker, the new member's header, data and padding, two zero blocks. */
static int build_tar(append_t *a, int old_fd, const ft_lom_t *old)
{
	uint64_t end = 0;
	int rc;

	if (old_fd >= 0) {
		tgt_shard_index_t *ix = NULL;
		rc = tgt_shard_index_get(a->o, old_fd, old, TGT_SHARD_TAR, true, &ix, a->err, sizeof(a->err));
		if (rc != 0)
			return rc;
		end = ix->tar_end;
		tgt_shard_index_put(a->o->t, ix);
		if ((rc = ft_copy_range(old_fd, 0, a->new_fd, -1, end)) != 0)
			return rc;
	}
	size_t cap = tgt_tar_header_max(strlen(a->archpath)) + 2 * 512;
	uint8_t *hdr = calloc(1, cap);
	if (hdr == NULL)
		return -ENOMEM;
	ssize_t h = tgt_tar_header(a->archpath, a->body_size, ft_now_ns() / 1000000000, hdr, cap);
	rc = h < 0 ? -EINVAL : ft_write_all(a->new_fd, hdr, (size_t)h);
	if (rc == 0)
		rc = ft_copy_range(a->body_fd, 0, a->new_fd, -1, a->body_size);
	memset(hdr, 0, cap);
	if (rc == 0) /* padding of the data, then the end-of-archive marker */
		rc = ft_write_all(a->new_fd, hdr, (size_t)((512 - a->body_size % 512) % 512) + 1024);
	free(hdr);
	return rc;
}

/* Copies the data of the reader's current entry (or the body fd when r == NULL) into w. 0 or -errno. */
static int copy_data(append_t *a, struct archive *r, struct archive *w, uint64_t *decoded)
{
	uint8_t *buf = malloc(CHUNK);
	uint64_t off = 0;
	int rc = buf ? 0 : -ENOMEM;

	while (rc == 0) {
		la_ssize_t n;
		if (r != NULL) {
			n = archive_read_data(r, buf, CHUNK);
			if (n < 0) {
				snprintf(a->err, sizeof(a->err), "decoding: %s", archive_error_string(r));
				rc = -EBADMSG;
				break;
			}
			*decoded += (uint64_t)n;
			if (*decoded > (uint64_t)a->o->t->cfg.shard_max_decoded_bytes) {
				snprintf(a->err, sizeof(a->err), "decoded more than the limit");
				rc = -EFBIG;
				break;
			}
		} else {
			size_t k = a->body_size - off > CHUNK ? CHUNK : (size_t)(a->body_size - off);
			n = (la_ssize_t)k;
			if (k > 0 && (rc = ft_pread_all(a->body_fd, buf, k, (off_t)off)) != 0)
				break;
			off += k;
		}
		if (n == 0)
			break;
		if (archive_write_data(w, buf, (size_t)n) != n) {
			snprintf(a->err, sizeof(a->err), "encoding: %s", archive_error_string(w));
			rc = -EIO;
		}
	}
	free(buf);
	return rc;
}

/* Compressed formats: every old member but one of the same name, re-encoded, then the new member. */
static int build_reencoded(append_t *a, int old_fd)
{
	struct archive *w = tgt_shard_writer_new(a->fmt, &a->new_fd), *r = NULL;
	struct archive_entry *e;
	uint64_t decoded = 0;
	int rc = 0;

	if (w == NULL) {
		snprintf(a->err, sizeof(a->err), "cannot write %s", tgt_shard_fmt_name(a->fmt));
		return -EIO;
	}
	if (old_fd >= 0) {
		r = archive_read_new();
		if (a->fmt == TGT_SHARD_ZIP) {
			archive_read_support_format_zip_seekable(r);
		} else {
			archive_read_support_format_tar(r);
			archive_read_support_filter_gzip(r);
			archive_read_support_filter_lz4(r);
		}
		if (archive_read_open_fd(r, old_fd, CHUNK) != ARCHIVE_OK) {
			snprintf(a->err, sizeof(a->err), "%s", archive_error_string(r));
			rc = -EBADMSG;
		}
		while (rc == 0) {
			int h = archive_read_next_header(r, &e);
			if (h == ARCHIVE_EOF)
				break;
			if (h < ARCHIVE_WARN || h == ARCHIVE_RETRY) {
				snprintf(a->err, sizeof(a->err), "%s", archive_error_string(r));
				rc = -EBADMSG;
				break;
			}
			const char *name = archive_entry_pathname(e);
			if (name != NULL && strcmp(name, a->archpath) == 0)
				continue; /* replaced by the new member */
			if (archive_write_header(w, e) < ARCHIVE_WARN) {
				snprintf(a->err, sizeof(a->err), "encoding: %s", archive_error_string(w));
				rc = -EIO;
				break;
			}
			rc = copy_data(a, r, w, &decoded);
		}
	}
	if (rc == 0) {
		if (tgt_shard_writer_header(w, a->archpath, a->body_size, ft_now_ns() / 1000000000) != 0) {
			snprintf(a->err, sizeof(a->err), "encoding: %s", archive_error_string(w));
			rc = -EIO;
		} else {
			rc = copy_data(a, NULL, w, &decoded);
		}
	}
	if (rc == 0 && archive_write_close(w) != ARCHIVE_OK) {
		snprintf(a->err, sizeof(a->err), "encoding: %s", archive_error_string(w));
		rc = -EIO;
	}
	archive_write_free(w);
	if (r)
		archive_read_free(r);
	return rc;
}

/* The bucket's checksum of the new shard (read back whole) into lom. 0 or -errno. */
static int checksum(append_t *a, ft_lom_t *lom)
{
	ft_cksum_t ck;
	uint8_t *buf = malloc(CHUNK);
	uint64_t off = 0;
	int rc = 0;

	int fd = openat(a->o->mp->work_fd, a->work, O_RDONLY | O_CLOEXEC); /* new_fd is write-only */

	lom->cksum_type = a->o->cksum == FT_CKSUM_NONE ? FT_CKSUM_XXHASH : a->o->cksum;
	if (fd < 0 || buf == NULL || ft_cksum_init(&ck, lom->cksum_type) != 0) {
		rc = fd < 0 ? -errno : -ENOMEM;
		if (fd >= 0)
			close(fd);
		free(buf);
		return rc;
	}
	for (;;) {
		ssize_t n = pread(fd, buf, CHUNK, (off_t)off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = -errno;
			break;
		}
		if (n == 0)
			break;
		ft_cksum_update(&ck, buf, (size_t)n);
		off += (uint64_t)n;
	}
	if (rc == 0)
		ft_cksum_final(&ck, lom->cksum);
	else
		ft_cksum_abort(&ck);
	lom->size = off;
	close(fd);
	free(buf);
	return rc;
}

/*
 * Under the name lock: the current shard, the new one built from it, its metadata, the publish
 * and the mirror copies. *protect_fd gets an fd for EC (after the lock). 0, or -errno with a->err.
 */
static int build_and_publish(append_t *a, ft_lom_t *lom, int *protect_fd)
{
	tgt_obj_t *o = a->o;
	ft_lom_t old;
	int rc, old_fd = openat(o->mp->root_fd, o->rel, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);

	memset(lom, 0, sizeof(*lom));
	if (old_fd < 0 && errno != ENOENT) {
		snprintf(a->err, sizeof(a->err), "cannot open the shard: %s", strerror(errno));
		return -errno;
	}
	if (old_fd >= 0) {
		struct stat st;
		if (ft_lom_fget(old_fd, &old) != 0 || fstat(old_fd, &st) != 0 || (uint64_t)st.st_size != old.size) {
			close(old_fd);
			snprintf(a->err, sizeof(a->err), "the stored shard is damaged (a plain GET repairs it)");
			return -EIO;
		}
		/* what the shard carried besides its bytes */
		snprintf(lom->content_type, sizeof(lom->content_type), "%s", old.content_type);
		snprintf(lom->user_meta, sizeof(lom->user_meta), "%s", old.user_meta);
	}
	rc = a->fmt == TGT_SHARD_TAR ? build_tar(a, old_fd, &old) : build_reencoded(a, old_fd);
	if (old_fd >= 0)
		close(old_fd);
	if (rc == 0)
		rc = checksum(a, lom);
	if (rc == 0 && o->t->cfg.sync != FT_SYNC_NONE && fsync(a->new_fd) != 0)
		rc = -errno;
	if (rc != 0)
		return rc;
	tgt_next_version(o, lom->version, sizeof(lom->version));
	lom->atime_ns = lom->mtime_ns = ft_now_ns();
	rc = ft_lom_fset(a->new_fd, lom);
	if (rc == 0)
		rc = tgt_publish(o, a->work, o->t->cfg.sync);
	if (rc == 0 && tgt_protect_local(o, lom, protect_fd, a->err, sizeof(a->err)) != 0)
		rc = -EPIPE;
	if (rc != 0 && rc != -EPIPE && !a->err[0])
		snprintf(a->err, sizeof(a->err), "cannot publish: %s", strerror(-rc));
	return rc;
}

static void append_work(ft_req_t *r, void *arg)
{
	append_t *a = arg;
	tgt_obj_t *o = a->o;
	ft_lom_t lom;
	int protect_fd = -1, rc;

	if (receive(r, a) != 0)
		return;
	int rd = openat(o->mp->work_fd, a->body, O_RDONLY | O_CLOEXEC);
	if (rd < 0) {
		ft_resp_error(r, 500, "shard \"%s/%s\": cannot reopen the member: %s", o->bucket, o->obj,
			      strerror(errno));
		return;
	}
	close(a->body_fd);
	a->body_fd = rd;
	a->new_fd = tgt_work_create(o->mp, a->work, sizeof(a->work));
	if (a->new_fd < 0) {
		a->work[0] = '\0';
		ft_resp_error(r, 500, "shard \"%s/%s\": cannot create a work file: %s", o->bucket, o->obj,
			      strerror(-a->new_fd));
		return;
	}
	tgt_name_lock(o);
	rc = build_and_publish(a, &lom, &protect_fd);
	tgt_name_unlock(o);
	if ((rc == 0 || rc == -EPIPE) && tgt_protect_remote(o, protect_fd, &lom, a->err, sizeof(a->err)) != 0)
		rc = -EPIPE;
	release(a);
	if (rc == 0 || rc == -EPIPE)
		tgt_list_bump(o->t, o->provider, o->bucket);
	if (rc == -EPIPE) {
		ft_resp_error(r, 500, "shard \"%s/%s\" stored, but not with the bucket's redundancy: %s", o->bucket,
			      o->obj, a->err);
	} else if (rc == -EBADMSG || rc == -EFBIG) {
		tgt_shard_fail(r, o, rc, a->err);
	} else if (rc == -ESTALE) {
		ft_resp_error(r, 404, "bucket \"%s\" was destroyed while \"%s\" was being stored", o->bucket, o->obj);
	} else if (rc == -ENOTDIR || rc == -EISDIR) {
		ft_resp_error(r, 409, "cannot store \"%s/%s\": the name conflicts with other objects", o->bucket,
			      o->obj);
	} else if (rc != 0) {
		ft_resp_error(r, rc == -ENOSPC ? 507 : 500, "shard \"%s/%s\": %s", o->bucket, o->obj,
			      a->err[0] ? a->err : strerror(-rc));
	} else {
		ft_resp_header(r, "Ais-Version", lom.version);
		ft_resp_header(r, "Ais-Checksum-Type", ft_cksum_name(lom.cksum_type));
		ft_resp_header(r, "Ais-Checksum-Value", lom.cksum);
		ft_resp_bytes(r, 200, NULL, NULL, 0);
	}
}

void tgt_shard_put(ft_req_t *r, tgt_obj_t *o)
{
	append_t *a = ft_req_alloc(r, sizeof(*a));
	const char *why;

	memset(a, 0, sizeof(*a));
	a->o = o;
	a->body_fd = a->new_fd = -1;
	if (tgt_is_remote(o)) {
		ft_resp_error(r, 501, "appending to shards of %s buckets is not supported: write the whole shard",
			      o->provider);
		return;
	}
	if (tgt_shard_fmt_req(r, o, &a->fmt) != 0)
		return;
	a->archpath = ft_req_query(r, "archpath");
	if (a->archpath == NULL || tgt_shard_member_check(a->archpath, &why) != 0) {
		ft_resp_error(r, 400, "invalid archpath \"%s\": %s", a->archpath ? a->archpath : "",
			      a->archpath ? why : "archregx is for GET");
		return;
	}
	if (ft_req_content_length(r) == 0 && !ft_req_header(r, "Content-Length")) {
		ft_resp_error(r, 411, "PUT needs Content-Length or Transfer-Encoding: chunked");
		return;
	}
	a->body_fd = tgt_work_create(o->mp, a->body, sizeof(a->body));
	if (a->body_fd < 0) {
		a->body[0] = '\0';
		ft_resp_error(r, 500, "shard \"%s/%s\": cannot create a work file: %s", o->bucket, o->obj,
			      strerror(-a->body_fd));
		return;
	}
	ft_req_on_done(r, release_hook, a);
	ft_req_defer(r, append_work, a);
}
