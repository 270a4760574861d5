/* SPDX-License-Identifier: Apache-2.0 */
/* GET ?archregx=&archmode=: the shard's matching members (or one WebDataset sample) as one TAR stream. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "shard/shard.h"

/*
 * DESIGN
 * The members are chosen from the index (names checked: a member whose name cannot be addressed
 * is not sent) and sent in archive order, each as a ustar header (PAX for long names) and its
 * data, so the length of the whole stream is known before it starts (Content-Length). Indexed
 * members go out with sendfile(2); a compressed shard is decoded in one pass, its unmatched
 * members skipped. A failure after the start cuts the connection: a client never sees a short
 * TAR that looks whole.
 */

#define CHUNK (256 * 1024)
#define BLOCK 512

typedef struct {
	const tgt_shard_member_t **v; /* chosen members, archive order */
	size_t n;
	uint8_t *hdr; /* header scratch */
	size_t hdr_cap;
	int64_t mtime_s;
} pick_t;

static uint64_t padding(uint64_t size)
{
	return (BLOCK - size % BLOCK) % BLOCK;
}

/* Header, data and padding of one member. 0, or -errno (stream cut). */
static int send_header(ft_req_t *r, pick_t *p, const tgt_shard_member_t *m)
{
	ssize_t h = tgt_tar_header(m->name, m->size, p->mtime_s, p->hdr, p->hdr_cap);

	return h < 0 ? -EINVAL : ft_resp_stream_write(r, p->hdr, (size_t)h);
}

static int send_padding(ft_req_t *r, uint64_t size)
{
	static const uint8_t zeros[BLOCK];
	uint64_t pad = padding(size);

	return pad ? ft_resp_stream_write(r, zeros, (size_t)pad) : 0;
}

/* Members with offsets: sendfile each. */
static int send_indexed(ft_req_t *r, pick_t *p, int fd)
{
	int rc = 0;

	for (size_t i = 0; i < p->n && rc == 0; i++) {
		const tgt_shard_member_t *m = p->v[i];
		rc = send_header(r, p, m);
		if (rc == 0 && m->size > 0)
			rc = ft_resp_stream_sendfile(r, fd, (uint64_t)m->off, m->size);
		if (rc == 0)
			rc = send_padding(r, m->size);
	}
	return rc;
}

/* A compressed shard: one decoding pass, sending the chosen members as they come. */
static int send_decoded(ft_req_t *r, pick_t *p, const tgt_obj_t *o, int fd, const ft_lom_t *lom, tgt_shard_fmt_t fmt)
{
	char err[300] = "";
	tgt_shard_dec_t *d =
		tgt_shard_dec_open(fd, lom->size, fmt, (uint64_t)o->t->cfg.shard_max_decoded_bytes, err, sizeof(err));
	uint8_t *buf = malloc(CHUNK);
	int rc = 0;

	if (d == NULL || buf == NULL) {
		ft_warn("shard %s/%s: %s", o->bucket, o->obj, d == NULL ? err : "out of memory");
		rc = -EIO;
		goto out;
	}
	for (size_t i = 0; i < p->n && rc == 0; i++) {
		const tgt_shard_member_t *m = p->v[i];
		/* Members are in archive order and each is its name's effective occurrence: seek forward to it. */
		if (tgt_shard_dec_seek(d, m) != 0 || (rc = send_header(r, p, m)) != 0) {
			rc = rc ? rc : -EIO;
			break;
		}
		ssize_t n;
		uint64_t sent = 0;
		while (rc == 0 && (n = tgt_shard_dec_read(d, buf, CHUNK)) > 0) {
			rc = ft_resp_stream_write(r, buf, (size_t)n);
			sent += (uint64_t)n;
		}
		if (rc == 0 && (n < 0 || sent != m->size))
			rc = -EIO;
		if (rc == 0)
			rc = send_padding(r, m->size);
	}
	if (rc == -EIO && d != NULL)
		ft_warn("shard %s/%s: TAR stream cut: %s", o->bucket, o->obj, tgt_shard_dec_error(d));
out:
	free(buf);
	tgt_shard_dec_close(d);
	return rc;
}

/*
 * tgt_shard_dec_seek counts occurrences from where the decoder stands; for a later member that
 * is right only when no earlier occurrence of its name lies between, so the decoder starts over
 * for a member with nth > 0 (rare: a name appended twice).
 */
static bool needs_restart(const pick_t *p)
{
	for (size_t i = 0; i < p->n; i++)
		if (p->v[i]->nth > 0)
			return true;
	return false;
}

void tgt_shard_select(ft_req_t *r, tgt_obj_t *o, tgt_shard_fmt_t fmt)
{
	const char *regx = ft_req_query(r, "archregx"), *why;
	tgt_t *t = o->t; /* o is request memory: gone once the response call returned */
	tgt_shard_match_t match;
	tgt_shard_index_t *ix = NULL;
	pick_t p = {0};
	ft_lom_t lom;
	char err[300] = "";
	int fd = -1;

	if (tgt_shard_match_init(&match, ft_req_query(r, "archmode"), regx, err, sizeof(err)) != 0) {
		ft_resp_error(r, 400, "%s", err);
		return;
	}
	if (tgt_shard_open(r, o, true, &fd, &lom) != 0)
		goto out;
	int rc = tgt_shard_index_get(o, fd, &lom, fmt, true, &ix, err, sizeof(err));
	if (rc != 0) {
		tgt_shard_fail(r, o, rc, err);
		goto out;
	}
	p.v = malloc((ix->n ? ix->n : 1) * sizeof(*p.v));
	p.hdr_cap = tgt_tar_header_max(TGT_SHARD_NAME_MAX);
	p.hdr = malloc(p.hdr_cap);
	p.mtime_s = lom.mtime_ns / 1000000000;
	if (p.v == NULL || p.hdr == NULL) {
		ft_resp_error(r, 500, "out of memory");
		goto out;
	}
	uint64_t total = 2 * BLOCK;
	bool indexed = true;
	for (size_t i = 0; i < ix->n; i++) {
		const tgt_shard_member_t *m = &ix->m[i];
		if (!tgt_shard_match(&match, m->name) || tgt_shard_member_check(m->name, &why) != 0)
			continue;
		p.v[p.n++] = m;
		total += (uint64_t)tgt_tar_header(m->name, m->size, p.mtime_s, p.hdr, p.hdr_cap) + m->size +
			 padding(m->size);
		indexed = indexed && m->off >= 0;
	}
	if (p.n == 0) {
		ft_resp_error(r, 404, "shard \"%s/%s\" has no member matching archregx \"%s\" (archmode %s)", o->bucket,
			      o->obj, regx, ft_req_query(r, "archmode") ? ft_req_query(r, "archmode") : "regexp");
		goto out;
	}
	if (!indexed && needs_restart(&p)) {
		ft_resp_error(r, 501, "shard \"%s/%s\": archregx over a compressed shard with repeated member names",
			      o->bucket, o->obj);
		goto out;
	}
	ft_resp_header(r, "Ais-Version", lom.version);
	ft_resp_stream_start(r, 200, "application/x-tar", (int64_t)total);
	rc = indexed ? send_indexed(r, &p, fd) : send_decoded(r, &p, o, fd, &lom, fmt);
	if (rc == 0) {
		static const uint8_t eof[2 * BLOCK];
		rc = ft_resp_stream_write(r, eof, sizeof(eof));
	}
	ft_resp_stream_end(r, rc);
out:
	free(p.hdr);
	free(p.v);
	tgt_shard_index_put(t, ix);
	if (fd >= 0)
		close(fd);
	tgt_shard_match_fini(&match);
}
