/* SPDX-License-Identifier: Apache-2.0 */
/* Writing shards of every format (TAR, TGZ, TAR.LZ4, ZIP with stored members) member by member with libarchive. */
#include <archive.h>
#include <archive_entry.h>
#include <string.h>

#include "base/fdio.h"
#include "shard/shard.h"

static la_ssize_t write_cb(struct archive *w, void *arg, const void *buf, size_t len)
{
	int rc = ft_write_all(*(int *)arg, buf, len);

	if (rc != 0) {
		archive_set_error(w, -rc, "write: %s", strerror(-rc));
		return -1;
	}
	return (la_ssize_t)len;
}

static int set_format(struct archive *w, tgt_shard_fmt_t fmt)
{
	switch (fmt) {
	case TGT_SHARD_ZIP:
		return archive_write_set_format_zip(w) == ARCHIVE_OK &&
		       archive_write_set_options(w, "zip:compression=store") == ARCHIVE_OK;
	case TGT_SHARD_TAR:
		return archive_write_set_format_pax_restricted(w) == ARCHIVE_OK;
	case TGT_SHARD_TGZ:
		return archive_write_set_format_pax_restricted(w) == ARCHIVE_OK &&
		       archive_write_add_filter_gzip(w) == ARCHIVE_OK;
	case TGT_SHARD_TLZ4:
		return archive_write_set_format_pax_restricted(w) == ARCHIVE_OK &&
		       archive_write_add_filter_lz4(w) == ARCHIVE_OK;
	default:
		return 0;
	}
}

struct archive *tgt_shard_writer_new(tgt_shard_fmt_t fmt, int *fd)
{
	struct archive *w = archive_write_new();

	if (w == NULL)
		return NULL;
	if (!set_format(w, fmt) || archive_write_set_bytes_in_last_block(w, 1) != ARCHIVE_OK ||
	    archive_write_open2(w, fd, NULL, write_cb, NULL, NULL) != ARCHIVE_OK) {
		archive_write_free(w);
		return NULL;
	}
	return w;
}

int tgt_shard_writer_header(struct archive *w, const char *name, uint64_t size, int64_t mtime_s)
{
	struct archive_entry *e = archive_entry_new();
	int rc;

	if (e == NULL)
		return -1;
	archive_entry_set_pathname(e, name);
	archive_entry_set_size(e, (la_int64_t)size);
	archive_entry_set_filetype(e, AE_IFREG);
	archive_entry_set_perm(e, 0644);
	archive_entry_set_mtime(e, mtime_s, 0);
	rc = archive_write_header(w, e) < ARCHIVE_WARN ? -1 : 0;
	archive_entry_free(e);
	return rc;
}
