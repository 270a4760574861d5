/* SPDX-License-Identifier: Apache-2.0 */
/* Erasure coding, the owner's side: encodes (isa-l) and sends slices or replicas, restores a lost main copy. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xxhash.h>

#include "base/codec.h"
#include "base/fanout.h"
#include "base/fdio.h"
#include "base/log.h"
#include "cluster/hrw.h"
#include "http/util.h"
#include "protect/ec.h"
#include "protect/ec_codec.h"
#include "protect/ec_xfer.h"
#include "rpc/client.h"
#include "target.h"

/*
 * DESIGN
 * Placement: the targets of the current map in HRW order for the object's name, the owner first;
 * slice i (or replica i) goes to the i-th target after the owner. Targets in maintenance (or being
 * decommissioned) come last in that order, so they take no new slices while others can. An object of at least the
 * bucket's objsize_limit is cut into D data + P parity slices (common/ec.c); a smaller one is
 * copied whole to P targets. D+P (or P) other targets must exist, else the PUT fails.
 *
 * PUT: after the main copy was published, outside the name's put lock (put.c; from an fd opened
 * on the published version under it: a newer PUT may replace the object meanwhile), the slices are
 * encoded in memory up to EC_MEMFD_MAX for the whole set (ec_send.c), else into O_TMPFILE files on
 * the object's mountpath, and POSTed to the holders' control ports at once, on the target's fan-out
 * threads (base/fanout.h; /v1/ec/slice, in chunks below the control port's body limit). The PUT is acknowledged only
 * when every holder confirmed its slice stored (synced per the sync policy): an acknowledged
 * object survives the loss of any P targets, the owner included. A holder down, or too few
 * targets in the map, fails the PUT (500, the main copy stays as put.c says).
 *
 * Holders: ec_holder.c.
 *
 * Restore (a GET found no main copy): every target of the current map is asked for what it holds
 * (so slices placed under an older map are found too); the newest version (mtime) that has D
 * distinct slices or a replica is fetched, each slice checked against its header's checksum, the
 * object decoded into a work file, checked against the object checksum in the slice metadata, and
 * published like a PUT (name lock, then the publish lock shared). Missing slices are then re-created
 * for the current map, after the put lock is released.
 *
 * Delete: before the DELETE is answered (tgt_ec_delete_now, on a worker: a GET right after must not
 * rebuild the object from slices not yet dropped), or after it on the worker pool (tgt_ec_delete,
 * from a loop thread); holders drop only slices stored before the delete (query "before"), so a PUT
 * right after survives.
 *
 * Job "ec-encode" and the scrub (tgt_ec_job_obj, tgt_ec_check; also POST /v1/ec/encode for one
 * object): the stored version is opened under the put lock; without it, the survey above tells
 * whether each current holder has a good slice of that version; if any lacks one, it is encoded
 * and sent again. The put lock is never held across network I/O.
 *
 * OWNERSHIP
 * Every function closes the fds and frees the buffers it opened; slice work files are opened
 * O_TMPFILE or memfd (or unlinked at once), so nothing is left behind on failure (the holders
 * remove an interrupted transfer's work file: ec_holder.c).
 */

/* What one target holds of an object. */
typedef struct {
	ec_node_t node;
	ft_ec_meta_t meta;
	int used;
} ec_cand_t;

static atomic_ulong ec_counter;

/* ---- placement ---- */

/*
 * The targets of m in HRW order for o, self left out, into out[m->n_targets]: those without flags
 * first, then those in maintenance or being decommissioned (used only when too few others exist).
 * Returns how many (-1 on allocation failure).
 */
static int ec_order(const tgt_t *t, const ft_smap_t *m, const tgt_obj_t *o, ec_node_t *out)
{
	uint64_t h = o->hash;
	uint64_t *dg = malloc(sizeof(*dg) * (size_t)(m->n_targets + 1));
	int *idx = malloc(sizeof(*idx) * (size_t)(m->n_targets + 1));
	int *order = malloc(sizeof(*order) * (size_t)(m->n_targets + 1));
	int left = m->n_targets, n = 0, k;

	if (dg == NULL || idx == NULL || order == NULL) {
		free(dg);
		free(idx);
		free(order);
		return -1;
	}
	for (int i = 0; i < left; i++) {
		dg[i] = m->target_digests[i];
		idx[i] = i;
	}
	for (k = 0; left > 0; k++) {
		int p = ft_hrw_pick(h, dg, left);
		order[k] = idx[p];
		memmove(dg + p, dg + p + 1, sizeof(*dg) * (size_t)(left - p - 1));
		memmove(idx + p, idx + p + 1, sizeof(*idx) * (size_t)(left - p - 1));
		left--;
	}
	for (int flagged = 0; flagged <= 1; flagged++) {
		for (int i = 0; i < m->n_targets; i++) {
			const ft_node_t *node = &m->targets[order[i]];
			if ((node->flags != 0) != flagged || strcmp(node->id, t->id) == 0)
				continue;
			snprintf(out[n].id, sizeof(out[n].id), "%s", node->id);
			snprintf(out[n].url, sizeof(out[n].url), "%s", node->control_url);
			snprintf(out[n].pub, sizeof(out[n].pub), "%s", node->public_url);
			n++;
		}
	}
	free(dg);
	free(idx);
	free(order);
	return n;
}

/* Every target of the current map (self included), into a malloc'd array; NULL when there is no map. */
static ec_node_t *ec_all_nodes(int *count)
{
	ft_smap_t *m = ft_smap_current();
	ec_node_t *out = m && m->n_targets > 0 ? calloc((size_t)m->n_targets, sizeof(*out)) : NULL;

	*count = 0;
	for (int i = 0; out && i < m->n_targets; i++) {
		snprintf(out[i].id, sizeof(out[i].id), "%s", m->targets[i].id);
		snprintf(out[i].url, sizeof(out[i].url), "%s", m->targets[i].control_url);
		snprintf(out[i].pub, sizeof(out[i].pub), "%s", m->targets[i].public_url);
	}
	if (out)
		*count = m->n_targets;
	ft_smap_put(m);
	return out;
}

/* The holders for o in the current map (HRW order after the owner); malloc'd, NULL with err. */
static ec_node_t *ec_holders(const tgt_obj_t *o, int *count, char *err, size_t cap)
{
	ft_smap_t *m = ft_smap_current();
	ec_node_t *out = m ? calloc((size_t)m->n_targets + 1, sizeof(*out)) : NULL;

	*count = out ? ec_order(o->t, m, o, out) : -1;
	ft_smap_put(m);
	if (*count < 0) {
		snprintf(err, cap, m ? "out of memory" : "no cluster map yet");
		free(out);
		return NULL;
	}
	return out;
}

/* "?provider=..&bucket=..&obj=.." for o's name; malloc'd, NULL on allocation failure. */
static char *ec_name_query(const char *provider, const char *bucket, const char *obj)
{
	char *esc = ft_pct_encode_dup(obj, strlen(obj), 0), *q = NULL;

	if (esc != NULL && asprintf(&q, "provider=%s&bucket=%s&obj=%s", provider, bucket, esc) < 0)
		q = NULL;
	free(esc);
	return q;
}

int ec_sync(const tgt_t *t, int fd)
{
	if (t->cfg.sync == FT_SYNC_DATA && fdatasync(fd) != 0)
		return -errno;
	if (t->cfg.sync == FT_SYNC_FULL && fsync(fd) != 0)
		return -errno;
	return 0;
}

/* The "message" of a control-port error reply, or "". */
static const char *ec_reply_message(const json_t *resp)
{
	const char *m = json_string_value(json_object_get(resp, "message"));
	return m ? m : "";
}

/* ---- sending slices ---- */

/*
 * Sends the slice m (payload: m->slice_size bytes of fd at payload_off) to node: chunked POSTs of
 * header + payload; the holder stores it when the last chunk arrives. 0, or -1 with err.
 */
static int ec_send_slice(const ec_node_t *node, const ft_ec_meta_t *m, int fd, off_t payload_off, char *err, size_t cap)
{
	uint8_t hdr[FT_EC_HDR_MAX];
	int hlen = ft_ec_hdr_encode(m, hdr, sizeof(hdr));
	uint64_t total = (uint64_t)(hlen > 0 ? hlen : 0) + m->slice_size;
	size_t bufcap = total < EC_XFER_CHUNK ? (size_t)total : EC_XFER_CHUNK;
	char *names = ec_name_query(m->provider, m->bucket, m->obj);
	uint8_t *buf = malloc(bufcap > 0 ? bufcap : 1);
	char url[EC_URL_MAX];
	unsigned long long xfer;
	int rc = -1;

	if (hlen < 0 || names == NULL || buf == NULL) {
		snprintf(err, cap, hlen < 0 ? "slice metadata does not encode" : "out of memory");
		goto out;
	}
	xfer = XXH64(m->slice_cksum, strlen(m->slice_cksum), (uint64_t)ft_now_ns()) ^
	       ((unsigned long long)getpid() << 32) ^ atomic_fetch_add(&ec_counter, 1);
	for (uint64_t off = 0; off < total;) {
		size_t len = total - off < bufcap ? (size_t)(total - off) : bufcap;
		size_t from_hdr = off < (uint64_t)hlen ? (size_t)((uint64_t)hlen - off) : 0;
		long status = 0;
		json_t *resp = NULL;
		if (from_hdr > len)
			from_hdr = len;
		if (from_hdr > 0)
			memcpy(buf, hdr + off, from_hdr);
		if (len > from_hdr) {
			uint64_t poff = off + from_hdr - (uint64_t)hlen;
			int e = ft_pread_all(fd, buf + from_hdr, len - from_hdr, payload_off + (off_t)poff);
			if (e != 0) {
				snprintf(err, cap, "read slice %d: %s", m->idx, strerror(-e));
				goto out;
			}
		}
		snprintf(url, sizeof(url), "%s/v1/ec/slice?%s&xfer=%016llx&off=%" PRIu64 "&total=%" PRIu64, node->url,
			 names, xfer, off, total);
		if (ft_ec_xfer_post(url, buf, len, EC_TIMEOUT_MS, &status, &resp, err, cap) != 0)
			goto out;
		if (status != 200) {
			snprintf(err, cap, "target %s did not store %s %d: HTTP %ld %s", node->id,
				 m->replica ? "replica" : "slice", m->idx, status, ec_reply_message(resp));
			json_decref(resp);
			goto out;
		}
		json_decref(resp);
		off += len;
	}
	rc = 0;
out:
	free(names);
	free(buf);
	return rc;
}

typedef struct {
	const ec_node_t *node;
	ft_ec_meta_t m;
	int fd;
	int rc;
	char err[256];
} ec_send_t;

static void ec_send_one(void *arg, int i)
{
	ec_send_t *s = (ec_send_t *)arg + i;

	s->rc = ec_send_slice(s->node, &s->m, s->fd, 0, s->err, sizeof(s->err));
}

/*
 * Sends slice i (payload fds[i]; checksum ck[i], or base's for replicas) to holders[i], all at
 * once on the target's fan-out threads. 0, or -1 with err (the first failure, in slice order).
 */
static int ec_send_all(ft_fanout_t *fanout, const ec_node_t *holders, const ft_ec_meta_t *base, const int *fds,
		       char (*ck)[FT_CKSUM_HEX_MAX], int n, char *err, size_t cap)
{
	ec_send_t *s = calloc((size_t)n, sizeof(*s));
	int rc = 0;

	if (s == NULL) {
		snprintf(err, cap, "out of memory");
		return -1;
	}
	for (int i = 0; i < n; i++) {
		s[i].node = &holders[i];
		s[i].m = *base;
		s[i].m.idx = i;
		if (ck != NULL)
			memcpy(s[i].m.slice_cksum, ck[i], sizeof(s[i].m.slice_cksum));
		s[i].fd = fds[i];
	}
	ft_fanout_run(fanout, ec_send_one, s, n);
	for (int i = 0; i < n; i++) {
		if (s[i].rc != 0 && rc == 0) {
			snprintf(err, cap, "%s", s[i].err);
			rc = -1;
		}
	}
	free(s);
	return rc;
}

static void ec_meta_base(ft_ec_meta_t *m, const tgt_obj_t *o, const ft_lom_t *lom)
{
	memset(m, 0, sizeof(*m));
	snprintf(m->provider, sizeof(m->provider), "%s", o->provider);
	snprintf(m->bucket, sizeof(m->bucket), "%s", o->bucket);
	memcpy(m->obj, o->obj, o->obj_len);
	m->obj[o->obj_len] = '\0';
	m->bucket_created = o->bucket_created;
	m->lom = *lom;
}

static int ec_replicated(const tgt_obj_t *o, const ft_lom_t *lom)
{
	return lom->size < (uint64_t)(o->ec_objsize_limit > 0 ? o->ec_objsize_limit : 0);
}

/* How many holders o needs: P replicas, or D+P slices. */
static int ec_needed(const tgt_obj_t *o, const ft_lom_t *lom)
{
	return ec_replicated(o, lom) ? o->ec_parity : o->ec_data + o->ec_parity;
}

/*
 * Encodes the object open at fd (metadata lom) and sends slice (or replica) i to holders[i].
 * 0, or -1 with err.
 */
static int ec_protect(const tgt_obj_t *o, int fd, const ft_lom_t *lom, const ec_node_t *holders, int count, char *err,
		      size_t cap)
{
	int d = o->ec_data, p = o->ec_parity, n = ec_needed(o, lom);
	int tmp[FT_EC_MAX_SLICES], ntmp = 0, rc = -1;
	char ck[FT_EC_MAX_SLICES][FT_CKSUM_HEX_MAX];
	ft_ec_io_t io[FT_EC_MAX_SLICES];
	ft_ec_meta_t *m = malloc(sizeof(*m));

	if (m == NULL) {
		snprintf(err, cap, "out of memory");
		return -1;
	}
	if (!ft_ec_geometry_ok(d, p)) {
		snprintf(err, cap, "unsupported EC geometry %d+%d (1 <= D, 1 <= P, D+P <= %d)", d, p, FT_EC_MAX_SLICES);
		goto out;
	}
	if (count < n && o->mirror_targets) {
		snprintf(err, cap,
			 "mirror.copies %d (scope \"targets\") needs %d other targets, the cluster map has %d", p + 1,
			 n, count);
		goto out;
	}
	if (count < n) {
		snprintf(err, cap,
			 "EC %d+%d of a %" PRIu64 "-byte object needs %d other targets, the cluster map has %d", d, p,
			 lom->size, n, count);
		goto out;
	}
	ec_meta_base(m, o, lom);
	if (ec_replicated(o, lom)) {
		int e = ft_ec_range_cksum(fd, 0, lom->size, m->slice_cksum);
		if (e != 0) {
			snprintf(err, cap, "read object: %s", strerror(-e));
			goto out;
		}
		m->replica = 1;
		m->parity = p;
		m->slice_size = lom->size;
		int fds[FT_EC_MAX_SLICES];
		for (int i = 0; i < n; i++)
			fds[i] = fd;
		rc = ec_send_all(o->t->fanout, holders, m, fds, NULL, n, err, cap);
		goto out;
	}
	m->data = d;
	m->parity = p;
	m->slice_size = ft_ec_slice_size(lom->size, d);
	if (m->slice_size * (uint64_t)n <= EC_MEMFD_MAX) { /* in memory: ec_send.c */
		rc = ec_send_mem(o->t->fanout, holders, m, fd, err, cap);
		goto out;
	}
	for (ntmp = 0; ntmp < n; ntmp++) {
		tmp[ntmp] = tgt_work_anon(o->mp);
		if (tmp[ntmp] < 0) {
			snprintf(err, cap, "mountpath %s: cannot create a work file: %s", o->mp->path,
				 strerror(-tmp[ntmp]));
			goto out;
		}
		io[ntmp].fd = tmp[ntmp];
		io[ntmp].off = 0;
	}
	if (ft_ec_encode(fd, lom->size, d, p, io, ck, err, cap) != 0)
		goto out;
	rc = ec_send_all(o->t->fanout, holders, m, tmp, ck, n, err, cap);
out:
	for (int i = 0; i < ntmp; i++)
		close(tmp[i]);
	free(m);
	return rc;
}

int tgt_ec_put_fd(const tgt_obj_t *o, int fd, const ft_lom_t *lom, char *err, size_t cap)
{
	ec_node_t *holders;
	int count, rc;

	if (o->ec_data <= 0)
		return 0;
	holders = ec_holders(o, &count, err, cap);
	if (holders == NULL)
		return -1;
	rc = ec_protect(o, fd, lom, holders, count, err, cap);
	free(holders);
	return rc;
}

/* ---- survey: who holds what ---- */

/* Gathers a reply body of at most cap bytes (a slice header). */
typedef struct {
	uint8_t *buf;
	size_t len, cap;
} ec_bytes_t;

static int ec_bytes_sink(void *arg, const uint8_t *p, size_t n, char *err, size_t cap)
{
	ec_bytes_t *b = arg;

	if (n > b->cap - b->len) {
		snprintf(err, cap, "reply longer than %zu bytes", b->cap);
		return -1;
	}
	memcpy(b->buf + b->len, p, n);
	b->len += n;
	return 0;
}

/* Asks node for its slice of o; 0 with *m filled, -1 when it has none (or cannot answer). */
static int ec_probe(const ec_node_t *node, const tgt_obj_t *o, const char *names, ft_ec_meta_t *m)
{
	char url[EC_URL_MAX], err[256];
	uint8_t hdr[FT_EC_HDR_MAX];
	ec_bytes_t b = {.buf = hdr, .cap = sizeof(hdr)};
	long status = 0;
	size_t hlen;

	snprintf(url, sizeof(url), "%s/v1/ec/meta?%s", node->url, names);
	if (ft_ec_xfer_get(url, EC_PROBE_TIMEOUT_MS, ec_bytes_sink, &b, &status, err, sizeof(err)) != 0) {
		ft_debug("ec: %s/%s: target %s not asked: %s", o->bucket, o->obj, node->id, err);
		return -1;
	}
	if (status == 200 && ft_ec_hdr_decode(m, hdr, b.len, &hlen) == 0 && hlen == b.len &&
	    strcmp(m->provider, o->provider) == 0 && strcmp(m->bucket, o->bucket) == 0 &&
	    strlen(m->obj) == o->obj_len && memcmp(m->obj, o->obj, o->obj_len) == 0 &&
	    m->bucket_created == o->bucket_created)
		return 0;
	return -1;
}

/* One survey: every target of the map asked at once (t->fanout), each answer in its own slot. */
typedef struct {
	const tgt_obj_t *o;
	const char *names;
	const ec_node_t *nodes;
	ft_ec_meta_t *metas;
	bool *found;
} ec_survey_t;

static void survey_one(void *arg, int i)
{
	ec_survey_t *s = arg;

	s->found[i] = ec_probe(&s->nodes[i], s->o, s->names, &s->metas[i]) == 0;
}

/* Asks every target of the current map; returns the candidates (malloc'd, *n of them) or NULL. */
static ec_cand_t *ec_survey(const tgt_obj_t *o, int *n)
{
	int count = 0;
	ec_node_t *nodes = ec_all_nodes(&count);
	ec_cand_t *c = nodes ? calloc((size_t)count, sizeof(*c)) : NULL;
	ec_survey_t s = {.o = o, .nodes = nodes, .names = ec_name_query(o->provider, o->bucket, o->obj)};

	*n = 0;
	s.metas = c != NULL ? calloc((size_t)count, sizeof(*s.metas)) : NULL;
	s.found = c != NULL ? calloc((size_t)count, sizeof(*s.found)) : NULL;
	if (s.names != NULL && s.metas != NULL && s.found != NULL) {
		ft_fanout_run(o->t->fanout, survey_one, &s, count);
		for (int i = 0; i < count; i++)
			if (s.found[i]) {
				c[*n].node = nodes[i];
				c[(*n)++].meta = s.metas[i];
			}
	}
	free(s.found);
	free(s.metas);
	free((char *)s.names);
	free(nodes);
	return c;
}

static int ec_same_version(const ft_ec_meta_t *a, const ft_ec_meta_t *b)
{
	return a->lom.mtime_ns == b->lom.mtime_ns && a->lom.size == b->lom.size && a->replica == b->replica &&
	       a->data == b->data && a->parity == b->parity && strcmp(a->lom.version, b->lom.version) == 0 &&
	       strcmp(a->lom.cksum, b->lom.cksum) == 0;
}

static int ec_lom_matches(const ft_ec_meta_t *a, const ft_lom_t *lom)
{
	return a->lom.mtime_ns == lom->mtime_ns && a->lom.size == lom->size &&
	       strcmp(a->lom.version, lom->version) == 0 && strcmp(a->lom.cksum, lom->cksum) == 0;
}

/* Distinct slice indexes (or 1 for any replica) among the candidates of c[k]'s version. */
static int ec_group_strength(const ec_cand_t *c, int n, int k)
{
	unsigned seen = 0;
	int distinct = 0;

	for (int i = 0; i < n; i++) {
		if (!ec_same_version(&c[i].meta, &c[k].meta))
			continue;
		if (c[i].meta.replica)
			return INT32_MAX;
		if (!(seen & (1u << c[i].meta.idx))) {
			seen |= 1u << c[i].meta.idx;
			distinct++;
		}
	}
	return distinct;
}

/* The candidate leading the newest version that can be rebuilt; -1 when none can. */
static int ec_pick_version(const ec_cand_t *c, int n)
{
	int best = -1;

	for (int k = 0; k < n; k++) {
		int need = c[k].meta.replica ? 1 : c[k].meta.data;
		if (ec_group_strength(c, n, k) < need)
			continue;
		if (best < 0 || c[k].meta.lom.mtime_ns > c[best].meta.lom.mtime_ns)
			best = k;
	}
	return best;
}

/*
 * Whether every holder of the current map holds its slice (replica) of the version lom:
 * holders[i] has index i. The survey c comes from before.
 */
static int ec_placement_complete(const ec_cand_t *c, int nc, const ec_node_t *holders, int count, int needed,
				 const ft_lom_t *lom, int replica)
{
	if (count < needed)
		return 0;
	for (int i = 0; i < needed; i++) {
		int ok = 0;
		for (int k = 0; k < nc && !ok; k++)
			ok = strcmp(c[k].node.id, holders[i].id) == 0 && c[k].meta.idx == i &&
			     c[k].meta.replica == replica && ec_lom_matches(&c[k].meta, lom);
		if (!ok)
			return 0;
	}
	return 1;
}

/* ---- restore ---- */

/* Receives a slice file (framed header, then payload) into fd: the header is checked against want. */
typedef struct {
	const ft_ec_meta_t *want;
	int fd;
	uint8_t *hdr; /* FT_EC_HDR_MAX bytes until the header is complete */
	size_t hdr_len, hlen;
	int in_payload;
	uint64_t payload; /* payload bytes written */
} ec_fetch_t;

static int ec_fetch_sink(void *arg, const uint8_t *p, size_t n, char *err, size_t cap)
{
	ec_fetch_t *f = arg;

	if (!f->in_payload) {
		ft_ec_meta_t *got = malloc(sizeof(*got));
		size_t take = FT_EC_HDR_MAX - f->hdr_len < n ? FT_EC_HDR_MAX - f->hdr_len : n;
		int rc;
		if (got == NULL) {
			snprintf(err, cap, "out of memory");
			return -1;
		}
		memcpy(f->hdr + f->hdr_len, p, take);
		f->hdr_len += take;
		rc = ft_ec_hdr_decode(got, f->hdr, f->hdr_len, &f->hlen);
		if (rc == 0 && (got->idx != f->want->idx || !ec_same_version(got, f->want))) {
			snprintf(err, cap, "slice %d changed since the survey (now slice %d of version %s)",
				 f->want->idx, got->idx, got->lom.version);
			rc = -1;
		}
		free(got);
		if (rc == 1 && f->hdr_len < FT_EC_HDR_MAX)
			return 0; /* more header to come */
		if (rc != 0) {
			if (!err[0])
				snprintf(err, cap, "bad slice header");
			return -1;
		}
		f->in_payload = 1;
		/* what came after the header in this buffer and the earlier ones */
		size_t extra = f->hdr_len - f->hlen;
		p = p + take - extra;
		n = n - take + extra;
	}
	if (n > f->want->slice_size - f->payload) {
		snprintf(err, cap, "slice longer than its %" PRIu64 " bytes", f->want->slice_size);
		return -1;
	}
	int e = ft_write_all(f->fd, p, n);
	if (e != 0) {
		snprintf(err, cap, "write work file: %s", strerror(-e));
		return -1;
	}
	f->payload += n;
	return 0;
}

/*
 * Fetches c's slice (one GET: its framed header, then its payload) into fd from offset 0 and
 * checks the payload against the slice checksum. 0, or -1 with err.
 */
static int ec_fetch(const ec_cand_t *c, const char *names, int fd, char *err, size_t cap)
{
	const ft_ec_meta_t *m = &c->meta;
	char url[EC_URL_MAX], hex[FT_CKSUM_HEX_MAX], msg[256] = "";
	ec_fetch_t f = {.want = m, .fd = fd, .hdr = malloc(FT_EC_HDR_MAX)};
	long status = 0;
	int rc = -1;

	if (f.hdr == NULL) {
		snprintf(err, cap, "out of memory");
		return -1;
	}
	if (ftruncate(fd, 0) != 0 || lseek(fd, 0, SEEK_SET) != 0) {
		snprintf(err, cap, "truncate work file: %s", strerror(errno));
		goto out;
	}
	snprintf(url, sizeof(url), "%s/v1/ec/slice?%s", c->node.url, names);
	if (ft_ec_xfer_get(url, EC_TIMEOUT_MS, ec_fetch_sink, &f, &status, msg, sizeof(msg)) != 0 || status != 200 ||
	    !f.in_payload || f.payload != m->slice_size) {
		snprintf(err, cap, "target %s: slice %d: %s%s", c->node.id, m->idx,
			 status != 200 && status != 0 ? "HTTP error: " : "", msg[0] ? msg : "short reply");
		goto out;
	}
	int e = ft_ec_range_cksum(fd, 0, m->slice_size, hex);
	if (e != 0 || strcmp(hex, m->slice_cksum) != 0) {
		snprintf(err, cap, "target %s: slice %d %s", c->node.id, m->idx,
			 e != 0 ? strerror(-e) : "does not match its checksum (changed or damaged in transit)");
		goto out;
	}
	rc = 0;
out:
	free(f.hdr);
	return rc;
}

/* Rebuilds the version led by c[best] into out_fd (the object, from offset 0). 0, or -1 with err. */
static int ec_rebuild(const tgt_obj_t *o, ec_cand_t *c, int nc, int best, int out_fd, char *err, size_t cap)
{
	const ft_ec_meta_t *v = &c[best].meta;
	char *names = ec_name_query(o->provider, o->bucket, o->obj);
	ft_ec_io_t in[FT_EC_MAX_SLICES];
	int have = 0, rc = -1;

	if (names == NULL) {
		snprintf(err, cap, "out of memory");
		return -1;
	}
	for (int i = 0; i < FT_EC_MAX_SLICES; i++)
		in[i].fd = -1, in[i].off = 0;
	if (v->replica) {
		snprintf(err, cap, "no replica could be fetched");
		for (int k = 0; k < nc && rc != 0; k++) {
			if (!c[k].meta.replica || !ec_same_version(&c[k].meta, v))
				continue;
			if (ec_fetch(&c[k], names, out_fd, err, cap) == 0)
				rc = 0;
			else
				ft_warn("ec: %s/%s: replica on %s not used: %s", o->bucket, o->obj, c[k].node.id, err);
		}
		goto out;
	}
	/* data slices first: fewer to compute */
	for (int idx = 0; idx < v->data + v->parity && have < v->data; idx++) {
		for (int k = 0; k < nc && in[idx].fd < 0; k++) {
			if (c[k].meta.idx != idx || !ec_same_version(&c[k].meta, v))
				continue;
			int fd = tgt_work_anon(o->mp);
			if (fd < 0) {
				snprintf(err, cap, "mountpath %s: cannot create a work file: %s", o->mp->path,
					 strerror(-fd));
				goto out;
			}
			if (ec_fetch(&c[k], names, fd, err, cap) == 0) {
				in[idx].fd = fd;
				have++;
			} else {
				ft_warn("ec: %s/%s: slice %d on %s not used: %s", o->bucket, o->obj, idx, c[k].node.id,
					err);
				close(fd);
			}
		}
	}
	if (have < v->data) {
		snprintf(err, cap, "only %d good slices of %d+%d found, %d needed", have, v->data, v->parity, v->data);
		goto out;
	}
	rc = ft_ec_decode(v->lom.size, v->data, v->parity, in, out_fd, NULL, NULL, err, cap);
out:
	for (int i = 0; i < FT_EC_MAX_SLICES; i++)
		if (in[i].fd >= 0)
			close(in[i].fd);
	free(names);
	return rc;
}

/* Whether o's main copy is a file at o->rel (a directory there is other names' path: core/keymap.h). */
static bool ec_main_present(const tgt_obj_t *o)
{
	struct stat st;

	return fstatat(o->mp->root_fd, o->rel, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode);
}

/*
 * Publishes the work file (named work in o->mp's .work, metadata set) under the name's put lock,
 * unless a main copy appeared meanwhile; then, without the lock, re-creates the slices the current
 * map lacks from an fd opened on the restored version under it (holders keep the newest version).
 * 0, or -errno with err.
 */
static int ec_publish(tgt_obj_t *o, char *work, const ft_lom_t *lom, const ec_cand_t *c, int nc, char *err, size_t cap)
{
	tgt_t *t = o->t;
	int rc, fd;

	tgt_name_lock(o);
	if (ec_main_present(o)) { /* a PUT or another restore was first */
		tgt_name_unlock(o);
		return 0;
	}
	rc = tgt_publish(o, work, t->cfg.sync);
	if (rc != 0) {
		tgt_name_unlock(o);
		snprintf(err, cap, "cannot publish the restored object: %s",
			 rc == -ESTALE ? "the bucket was destroyed meanwhile" : strerror(-rc));
		return rc;
	}
	tgt_list_bump(t, o->provider, o->bucket);
	ft_info("ec: %s/%s/%s restored (%" PRIu64 " bytes, version %s)", o->provider, o->bucket, o->obj, lom->size,
		lom->version);

	/* the slices for the current map, unless they are all there */
	int count = 0, open_errno = 0;
	char perr[256];
	ec_node_t *holders = ec_holders(o, &count, perr, sizeof(perr));
	int complete =
		holders && ec_placement_complete(c, nc, holders, count, ec_needed(o, lom), lom, ec_replicated(o, lom));
	fd = -1;
	if (holders && !complete) {
		fd = openat(o->mp->root_fd, o->rel, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		open_errno = fd < 0 ? errno : 0;
	}
	tgt_name_unlock(o);
	if (holders && !complete && (fd < 0 || ec_protect(o, fd, lom, holders, count, perr, sizeof(perr)) != 0))
		ft_warn("ec: %s/%s restored, but its slices were not re-created: %s", o->bucket, o->obj,
			fd < 0 ? strerror(open_errno) : perr);
	else if (!holders)
		ft_warn("ec: %s/%s restored, but its slices were not re-created: %s", o->bucket, o->obj, perr);
	if (fd >= 0)
		close(fd);
	free(holders);
	return 0;
}

static int ec_restore_locked(tgt_obj_t *o, char *err, size_t cap);

int tgt_ec_restore(tgt_obj_t *o, char *err, size_t cap)
{
	tgt_hold_t hold;
	int rc;

	if (o->ec_data <= 0) {
		snprintf(err, cap, "bucket \"%s\" has no erasure coding", o->bucket);
		return -ENOENT;
	}
	/* Concurrent GETs of one lost object: one restores, the others find it done. */
	tgt_name_hold(o, TGT_HOLD_RESTORE, &hold);
	if (ec_main_present(o))
		rc = 0;
	else
		rc = ec_restore_locked(o, err, cap);
	tgt_name_release(&hold);
	return rc;
}

/* tgt_ec_restore under the name's restore hold. */
static int ec_restore_locked(tgt_obj_t *o, char *err, size_t cap)
{
	char work[64] = "";
	ec_cand_t *c = NULL;
	int nc = 0, best, fd = -1, rc = -ENOENT;
	ft_lom_t lom;

	c = ec_survey(o, &nc);
	if (c == NULL) {
		snprintf(err, cap, "no cluster map or out of memory");
		return -ENOMEM;
	}
	best = ec_pick_version(c, nc);
	if (best < 0) {
		if (nc == 0)
			snprintf(err, cap, "no target holds slices of \"%s/%s\"", o->bucket, o->obj);
		else
			snprintf(err, cap, "%d slices of \"%s/%s\" found, not enough to rebuild it", nc, o->bucket,
				 o->obj);
		rc = nc == 0 ? -ENOENT : -EIO;
		goto out;
	}
	lom = c[best].meta.lom;
	snprintf(work, sizeof(work), "ec.%ld.%lu", (long)getpid(), atomic_fetch_add(&ec_counter, 1));
	fd = openat(o->mp->work_fd, work, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0) {
		rc = -errno;
		work[0] = '\0';
		snprintf(err, cap, "mountpath %s: cannot create a work file: %s", o->mp->path, strerror(-rc));
		goto out;
	}
	rc = -EIO;
	if (ec_rebuild(o, c, nc, best, fd, err, cap) != 0)
		goto out;
	if (lom.cksum_type != FT_CKSUM_NONE) {
		char hex[FT_CKSUM_HEX_MAX];
		int e = ft_ec_file_cksum(fd, lom.size, lom.cksum_type, hex);
		if (e != 0 || strcmp(hex, lom.cksum) != 0) {
			snprintf(err, cap, "rebuilt object does not match its %s checksum %s%s%s",
				 ft_cksum_name(lom.cksum_type), lom.cksum, e ? ": " : "", e ? strerror(-e) : "");
			goto out;
		}
	}
	lom.atime_ns = ft_now_ns();
	int e = ft_lom_fset(fd, &lom);
	if (e == 0)
		e = ec_sync(o->t, fd);
	if (e != 0) {
		rc = e;
		snprintf(err, cap, "work file: %s", strerror(-e));
		goto out;
	}
	close(fd);
	fd = -1;
	rc = ec_publish(o, work, &lom, c, nc, err, cap);
out:
	if (fd >= 0)
		close(fd);
	if (work[0])
		unlinkat(o->mp->work_fd, work, 0);
	free(c);
	return rc;
}

/* ---- check, job ---- */

/*
 * Verifies that the current holders have good slices of o's stored version and re-creates them
 * otherwise (holders verify and drop corrupt ones when asked). The version is the one open under
 * the name's put lock; the survey and the re-creation run without it (a newer PUT meanwhile sends
 * its own slices, and holders keep the newest). 0 when all were good, 1 when re-created, -1 with err.
 */
static int ec_check(tgt_obj_t *o, int64_t *bytes, char *err, size_t cap)
{
	ec_node_t *holders = NULL;
	ec_cand_t *c = NULL;
	int count = 0, nc = 0, fd, rc = -1;
	ft_lom_t lom;

	if (o->ec_data <= 0)
		return 0;
	tgt_name_lock(o); /* the stored version, consistent: data and metadata */
	fd = openat(o->mp->root_fd, o->rel, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	int lrc = fd < 0 ? -1 : ft_lom_fget(fd, &lom);
	tgt_name_unlock(o);
	if (fd < 0 || lrc != 0) {
		snprintf(err, cap, "main copy %s", fd < 0 ? "missing" : "has no valid metadata");
		goto out;
	}
	holders = ec_holders(o, &count, err, cap);
	c = holders ? ec_survey(o, &nc) : NULL;
	if (c == NULL) {
		if (holders)
			snprintf(err, cap, "out of memory");
		goto out;
	}
	if (ec_placement_complete(c, nc, holders, count, ec_needed(o, &lom), &lom, ec_replicated(o, &lom))) {
		rc = 0;
		goto out;
	}
	if (ec_protect(o, fd, &lom, holders, count, err, cap) != 0)
		goto out;
	*bytes = (int64_t)lom.size;
	rc = 1;
out:
	if (fd >= 0)
		close(fd);
	free(holders);
	free(c);
	return rc;
}

/* For the scrub: declared by its users (scrub.c); 0 all slices good, 1 re-created, -1 with err. */
int tgt_ec_check(tgt_obj_t *o, char *err, size_t cap)
{
	int64_t bytes = 0;
	return ec_check(o, &bytes, err, cap);
}

int tgt_ec_job_obj(tgt_obj_t *o, int64_t *bytes, char *err, size_t cap)
{
	int rc;

	if (o->ec_data <= 0) {
		snprintf(err, cap, "bucket \"%s\" has no erasure coding (set-bprops \"ec\" first)", o->bucket);
		return -1;
	}
	rc = ec_check(o, bytes, err, cap);
	return rc == 1 ? 0 : rc == 0 ? 1 : -1;
}

/* ---- delete ---- */

typedef struct {
	ft_fanout_t *fanout; /* the target's (t->fanout) */
	char *names;
	int64_t before;
	char label[TGT_REL_MAX];
	const ec_node_t *nodes; /* during ec_delete_run */
	atomic_int dropped;
} ec_delete_t;

/* Asks target i of d->nodes to drop d's slices stored before d->before. */
static void delete_one(void *arg, int i)
{
	ec_delete_t *d = arg;
	char url[EC_URL_MAX], err[256];
	long status = 0;

	snprintf(url, sizeof(url), "%s/v1/ec/slice?%s&before=%" PRId64, d->nodes[i].url, d->names, d->before);
	if (ft_client_json("DELETE", url, NULL, EC_PROBE_TIMEOUT_MS, &status, NULL, err, sizeof(err)) != 0)
		ft_warn("ec: %s: slices on %s not deleted: %s", d->label, d->nodes[i].id, err);
	else if (status != 200 && status != 404)
		ft_warn("ec: %s: slices on %s not deleted: HTTP %ld", d->label, d->nodes[i].id, status);
	else if (status == 200)
		atomic_fetch_add(&d->dropped, 1);
}

/* Asks every target of the current map at once to drop d's slices stored before d->before; how many dropped one. */
static int ec_delete_run(ec_delete_t *d)
{
	int count = 0;
	ec_node_t *nodes = ec_all_nodes(&count);

	d->nodes = nodes;
	atomic_store(&d->dropped, 0);
	if (nodes != NULL)
		ft_fanout_run(d->fanout, delete_one, d, count);
	d->nodes = NULL;
	free(nodes);
	return atomic_load(&d->dropped);
}

static void ec_delete_free(ec_delete_t *d)
{
	if (d != NULL)
		free(d->names);
	free(d);
}

static void ec_delete_work(void *arg)
{
	ec_delete_run(arg);
	ec_delete_free(arg);
}

/* The request to drop o's slices stored until now; NULL (logged) on allocation failure. */
static ec_delete_t *ec_delete_new(const tgt_obj_t *o)
{
	ec_delete_t *d = calloc(1, sizeof(*d));

	if (d)
		d->names = ec_name_query(o->provider, o->bucket, o->obj);
	if (!d || !d->names) {
		ft_warn("ec: %s: slices not deleted: out of memory", o->rel);
		ec_delete_free(d);
		return NULL;
	}
	d->fanout = o->t->fanout;
	d->before = ft_now_ns();
	snprintf(d->label, sizeof(d->label), "%s", o->rel);
	return d;
}

void tgt_ec_delete(const tgt_obj_t *o)
{
	ec_delete_t *d = o->ec_data > 0 ? ec_delete_new(o) : NULL;

	if (d)
		ft_httpd_defer(o->t->httpd, ec_delete_work, d); /* called on a loop thread */
}

int tgt_ec_delete_now(const tgt_obj_t *o)
{
	ec_delete_t *d = o->ec_data > 0 ? ec_delete_new(o) : NULL;
	int dropped = d ? ec_delete_run(d) : 0;

	ec_delete_free(d);
	return dropped;
}

/*
 * POST /v1/ec/encode?provider&bucket&obj: the "ec-encode" job's action on one object stored here
 * (slices made or re-created when any is missing or corrupt). {"encoded": bool, "bytes": N}.
 */
int tgt_ec_restore_missing(tgt_obj_t *o, bool *restored, char *err, size_t cap)
{
	bool present = ec_main_present(o); /* a directory at o->rel is other names' path */
	int rc = present ? 0 : tgt_ec_restore(o, err, cap);

	*restored = rc == 0 && !present;
	return rc;
}

/* ?restore=only: the main copy rebuilt from what the holders keep when it is missing here, nothing else. */
static void ec_ctl_restore_only(tgt_obj_t *o, ft_ctl_resp_t *resp)
{
	char err[512] = "";
	bool restored = false;
	int rc = tgt_ec_restore_missing(o, &restored, err, sizeof(err));

	if (rc != 0) {
		ft_ctl_error(resp, rc == -ENOENT ? 404 : 500, "restore of \"%s/%s\": %s", o->bucket, o->obj, err);
		return;
	}
	resp->status = 200;
	resp->json = json_pack("{s:b}", "restored", restored);
}

void ec_ctl_encode(tgt_t *t, const ft_ctl_req_t *req, ft_ctl_resp_t *resp)
{
	tgt_obj_t *o = calloc(1, sizeof(*o));
	ft_bmd_t *bmd = ft_bmd_current();
	const ft_bucket_t *b;
	char err[512] = "";
	int64_t bytes = 0;
	ec_name_t n;

	if (o == NULL) {
		ft_ctl_error(resp, 500, "out of memory");
		goto out;
	}
	if (ec_ctl_names(t, req, resp, &n) != 0)
		goto out;
	b = bmd ? ft_bmd_find(bmd, n.provider, n.bucket) : NULL;
	if (bmd == NULL) {
		ft_ctl_error(resp, 503, "target %s has not joined a cluster yet", t->id);
		goto out;
	}
	if (b == NULL) {
		ft_ctl_error(resp, 404, "bucket \"%s\" does not exist", n.bucket);
		goto out;
	}
	tgt_obj_init(o, t, b, n.obj, strlen(n.obj)); /* fits: ec_ctl_names checked */
	const char *restore = ft_ctl_query(req, "restore");
	if (restore != NULL && strcmp(restore, "only") == 0) { /* a holder after a loss (xact/held.c) */
		ec_ctl_restore_only(o, resp);
		goto out;
	}
	int rc = tgt_ec_job_obj(o, &bytes, err, sizeof(err));
	if (rc < 0) {
		ft_ctl_error(resp,
			     strstr(err, "main copy missing")   ? 404
			     : strstr(err, "no erasure coding") ? 400
								: 500,
			     "ec-encode of \"%s/%s\": %s", n.bucket, n.obj, err);
		goto out;
	}
	resp->status = 200;
	resp->json = json_pack("{s:b, s:I}", "encoded", rc == 0, "bytes", (json_int_t)bytes);
out:
	ft_bmd_put(bmd);
	free(o);
}

int tgt_ec_init(tgt_t *t)
{
	/* One thread per EC slice of a PUT besides the caller's own, as many as the widest geometry has. */
	t->fanout = ft_fanout_start(FT_EC_MAX_SLICES - 1);
	return t->fanout != NULL ? 0 : -1;
}

void tgt_ec_fini(tgt_t *t)
{
	ft_fanout_stop(t->fanout);
	t->fanout = NULL;
}
