/* SPDX-License-Identifier: Apache-2.0 */
/* Decoding shards with libarchive (TGZ, TAR.LZ4, ZIP's deflated members): entries in order, data bounded by the decoded-size limit. */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shard/shard.h"

/*
 * COST
 * A compressed stream has no random access: reaching a member decodes everything before it, so a
 * read costs O(its position) in decoded bytes (a ZIP reads its central directory and seeks to the
 * member, decoding only that one). Every byte decoded counts against the limit (the target's
 * shard_max_decoded_bytes), which stops a gzip or zip bomb with -EFBIG; a member that decodes to
 * a size other than the one its header declared is corrupt (-EBADMSG).
 */

#define READ_CHUNK (128 * 1024)

struct tgt_shard_dec {
	struct archive *a;
	int fd;
	uint64_t size, pos;
	uint64_t limit, decoded;
	bool zip;
	bool in_entry;
	uint64_t entry_size, entry_read;
	char err[256];
	uint8_t buf[READ_CHUNK];
};

static la_ssize_t read_cb(struct archive *a, void *arg, const void **out)
{
	tgt_shard_dec_t *d = arg;
	size_t want = d->size - d->pos < READ_CHUNK ? (size_t)(d->size - d->pos) : READ_CHUNK;
	ssize_t n;

	if (want == 0)
		return 0;
	do
		n = pread(d->fd, d->buf, want, (off_t)d->pos);
	while (n < 0 && errno == EINTR);
	if (n < 0) {
		archive_set_error(a, errno, "read: %s", strerror(errno));
		return -1;
	}
	d->pos += (uint64_t)n;
	*out = d->buf;
	return n;
}

static la_int64_t skip_cb(struct archive *a, void *arg, la_int64_t request)
{
	tgt_shard_dec_t *d = arg;
	uint64_t left = d->size - d->pos, n = request > 0 ? (uint64_t)request : 0;

	(void)a;
	if (n > left)
		n = left;
	d->pos += n;
	return (la_int64_t)n;
}

static la_int64_t seek_cb(struct archive *a, void *arg, la_int64_t offset, int whence)
{
	tgt_shard_dec_t *d = arg;
	int64_t base = whence == SEEK_SET ? 0 : whence == SEEK_CUR ? (int64_t)d->pos : (int64_t)d->size;

	(void)a;
	if (base + offset < 0 || (uint64_t)(base + offset) > d->size)
		return ARCHIVE_FATAL;
	d->pos = (uint64_t)(base + offset);
	return (la_int64_t)d->pos;
}

static int fail(tgt_shard_dec_t *d, int rc, const char *what)
{
	if (!d->err[0])
		snprintf(d->err, sizeof(d->err), "%s: %s", what,
			 archive_error_string(d->a) ? archive_error_string(d->a) : "corrupt archive");
	return rc;
}

tgt_shard_dec_t *tgt_shard_dec_open(int fd, uint64_t size, tgt_shard_fmt_t fmt, uint64_t limit, char *err, size_t cap)
{
	tgt_shard_dec_t *d = calloc(1, sizeof(*d));

	if (d == NULL || (d->a = archive_read_new()) == NULL) {
		free(d);
		snprintf(err, cap, "out of memory");
		return NULL;
	}
	d->fd = fd;
	d->size = size;
	d->limit = limit;
	d->zip = fmt == TGT_SHARD_ZIP;
	if (fmt == TGT_SHARD_ZIP) {
		archive_read_support_format_zip_seekable(d->a);
	} else {
		archive_read_support_format_tar(d->a);
		archive_read_support_format_gnutar(d->a);
		if (fmt == TGT_SHARD_TGZ)
			archive_read_support_filter_gzip(d->a);
		else if (fmt == TGT_SHARD_TLZ4)
			archive_read_support_filter_lz4(d->a);
	}
	archive_read_set_callback_data(d->a, d);
	archive_read_set_read_callback(d->a, read_cb);
	archive_read_set_skip_callback(d->a, skip_cb);
	if (d->zip)
		archive_read_set_seek_callback(d->a, seek_cb);
	if (archive_read_open1(d->a) != ARCHIVE_OK) {
		snprintf(err, cap, "cannot open as %s: %s", tgt_shard_fmt_name(fmt),
			 archive_error_string(d->a) ? archive_error_string(d->a) : "unknown error");
		tgt_shard_dec_close(d);
		return NULL;
	}
	return d;
}

ssize_t tgt_shard_dec_read(tgt_shard_dec_t *d, void *buf, size_t cap)
{
	if (!d->in_entry)
		return 0;
	la_ssize_t n = archive_read_data(d->a, buf, cap);
	if (n < 0)
		return fail(d, -EBADMSG, "decoding");
	d->decoded += (uint64_t)n;
	d->entry_read += (uint64_t)n;
	if (d->decoded > d->limit) {
		snprintf(d->err, sizeof(d->err), "decoded more than the limit of %llu bytes",
			 (unsigned long long)d->limit);
		return -EFBIG;
	}
	if (d->entry_read > d->entry_size) {
		snprintf(d->err, sizeof(d->err), "member decodes to more than its declared %llu bytes",
			 (unsigned long long)d->entry_size);
		return -EBADMSG;
	}
	if (n == 0) {
		d->in_entry = false;
		if (d->entry_read != d->entry_size) {
			snprintf(d->err, sizeof(d->err), "member cut: %llu of its %llu bytes",
				 (unsigned long long)d->entry_read, (unsigned long long)d->entry_size);
			return -EBADMSG;
		}
	}
	return n;
}

/* Reads the rest of the current entry (counting it: skipping compressed data decodes it too); ZIP seeks past it. */
static int drain(tgt_shard_dec_t *d)
{
	if (!d->in_entry)
		return 0;
	if (d->zip) {
		d->in_entry = false;
		return archive_read_data_skip(d->a) == ARCHIVE_OK ? 0 : fail(d, -EBADMSG, "skipping");
	}
	for (;;) {
		const void *blk;
		size_t len;
		la_int64_t off;
		int rc = archive_read_data_block(d->a, &blk, &len, &off);
		if (rc == ARCHIVE_EOF)
			break;
		if (rc < ARCHIVE_WARN)
			return fail(d, -EBADMSG, "decoding");
		d->decoded += len;
		if (d->decoded > d->limit) {
			snprintf(d->err, sizeof(d->err), "decoded more than the limit of %llu bytes",
				 (unsigned long long)d->limit);
			return -EFBIG;
		}
	}
	d->in_entry = false;
	return 0;
}

int tgt_shard_dec_next(tgt_shard_dec_t *d, const char **name, uint64_t *size, bool *regular)
{
	struct archive_entry *e;
	int rc = drain(d);

	if (rc != 0)
		return rc;
	rc = archive_read_next_header(d->a, &e);
	if (rc == ARCHIVE_EOF)
		return 0;
	if (rc < ARCHIVE_WARN || rc == ARCHIVE_RETRY)
		return fail(d, -EBADMSG, "reading a header");
	const char *n = archive_entry_pathname(e);
	*name = n ? n : "";
	*regular = n != NULL && *n && archive_entry_filetype(e) == AE_IFREG;
	*size = archive_entry_size_is_set(e) && archive_entry_size(e) > 0 ? (uint64_t)archive_entry_size(e) : 0;
	d->in_entry = true;
	d->entry_size = *size;
	d->entry_read = 0;
	return 1;
}

int tgt_shard_dec_seek(tgt_shard_dec_t *d, const tgt_shard_member_t *m)
{
	uint32_t seen = 0;
	const char *name;
	uint64_t size;
	bool regular;
	int rc;

	while ((rc = tgt_shard_dec_next(d, &name, &size, &regular)) == 1) {
		if (regular && strcmp(name, m->name) == 0 && seen++ == m->nth) {
			if (size != m->size) {
				snprintf(d->err, sizeof(d->err), "member \"%.200s\" changed size", m->name);
				return -EBADMSG;
			}
			return 0;
		}
	}
	return rc == 0 ? -ENOENT : rc;
}

const char *tgt_shard_dec_error(const tgt_shard_dec_t *d)
{
	return d->err[0] ? d->err : "corrupt archive";
}

void tgt_shard_dec_close(tgt_shard_dec_t *d)
{
	if (d == NULL)
		return;
	if (d->a)
		archive_read_free(d->a);
	free(d);
}
