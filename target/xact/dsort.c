/* SPDX-License-Identifier: Apache-2.0 */
/* dsort (reshard) on a target: its output shards, each built from members pulled from the input shards' owners. */
#include "xact/dsort.h"

#include <archive.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "auth/auth.h"
#include "auth/urlsig.h"
#include "base/codec.h"
#include "base/log.h"
#include "cluster/bmd.h"
#include "cluster/smap.h"
#include "core/replica.h"
#include "http/util.h"
#include "shard/shard.h"
#include "xact/xfer.h"

/*
 * DESIGN
 * The proxy computes the whole plan (docs/jobs.md "dsort"): which records go to which output
 * shard, in order. Every target gets the plan and builds the output shards it owns (HRW of the
 * output name in the output bucket), one per run item. A member travels from the owner of its
 * input shard (GET ?archpath= on its public port, with the cluster token when auth is on) into an
 * unnamed work file (O_TMPFILE) on the output's mountpath, and from there through the shared shard
 * writer (shard/writer.c) into the output's own unnamed work file. So record bytes never sit in
 * memory: a thread holds one copy buffer (DSORT_BUF) plus libarchive's state, whatever the sizes.
 * A complete output is PUT through this target's public port, which publishes it like any PUT
 * (work file, rename, checksum, mirror, EC): a reader sees it whole or not at all, and a crash
 * leaves no work file behind. An aborted or failed part removes the outputs it published.
 */

#define DSORT_BUF (256 * 1024)
#define DSORT_ATTEMPTS 4 /* a member GET failing with 408, 429 or 5xx: again after 0.25, 0.5, 1 s */
/* ... failing to connect, or with 503 (its target restarting): again every second up to this long */
#define DSORT_OWNER_WAIT_MS 60000

struct tgt_dsort {
	json_t *inputs;  /* array of input shard names */
	json_t *outputs; /* output name -> [[input index, member, size], ...] */
	char to_bucket[FT_BUCKET_NAME_MAX + 1];
	int to_bidx;
};

/* Whether recs is an array of [index < n_inputs, member (string), size >= 0]. */
static int records_ok(const json_t *recs, size_t n_inputs)
{
	if (!json_is_array(recs))
		return 0;
	for (size_t i = 0; i < json_array_size(recs); i++) {
		const json_t *r = json_array_get(recs, i);
		const json_t *ix = json_array_get(r, 0), *size = json_array_get(r, 2);
		if (json_array_size(r) != 3 || !json_is_integer(ix) || json_integer_value(ix) < 0 ||
		    (size_t)json_integer_value(ix) >= n_inputs || !json_is_string(json_array_get(r, 1)) ||
		    !json_is_integer(size) || json_integer_value(size) < 0)
			return 0;
	}
	return 1;
}

tgt_dsort_t *tgt_dsort_parse(const json_t *msg, const ft_bmd_t *bmd, int *status, char *why, size_t cap)
{
	const char *to = json_string_value(json_object_get(msg, "to_bucket"));
	json_t *inputs = json_object_get(msg, "inputs"), *outputs = json_object_get(msg, "outputs");
	const ft_bucket_t *b = NULL;
	tgt_dsort_t *d;
	const char *k;
	json_t *v;

	*status = 400;
	if (to == NULL || strlen(to) > FT_BUCKET_NAME_MAX || !json_is_array(inputs) || !json_is_object(outputs)) {
		snprintf(why, cap, "a dsort job needs to_bucket, inputs (array) and outputs (object)");
		return NULL;
	}
	for (size_t i = 0; i < json_array_size(inputs); i++)
		if (!json_is_string(json_array_get(inputs, i))) {
			snprintf(why, cap, "dsort inputs[%zu] is not a string", i);
			return NULL;
		}
	json_object_foreach(outputs, k, v) {
		if (!records_ok(v, json_array_size(inputs)) || tgt_shard_fmt_of_name(k) == TGT_SHARD_NONE) {
			snprintf(why, cap, "dsort output \"%s\": bad records or not a shard name", k);
			return NULL;
		}
	}
	const json_t *names = json_object_get(msg, "objnames");
	for (size_t i = 0; i < json_array_size(names); i++) {
		const char *name = json_string_value(json_array_get(names, i));
		if (name == NULL || json_object_get(outputs, name) == NULL) {
			snprintf(why, cap, "dsort objnames[%zu] is not an output of the plan", i);
			return NULL;
		}
	}
	if ((b = ft_bmd_find(bmd, "ais", to)) == NULL) {
		*status = 404;
		snprintf(why, cap, "dsort output bucket ais/%s is not known", to);
		return NULL;
	}
	if ((d = calloc(1, sizeof(*d))) == NULL) {
		*status = 500;
		snprintf(why, cap, "out of memory");
		return NULL;
	}
	d->inputs = json_incref(inputs);
	d->outputs = json_incref(outputs);
	snprintf(d->to_bucket, sizeof(d->to_bucket), "%s", to);
	d->to_bidx = (int)(b - bmd->buckets);
	return d;
}

void tgt_dsort_free(tgt_dsort_t *d)
{
	if (d == NULL)
		return;
	json_decref(d->inputs);
	json_decref(d->outputs);
	free(d);
}

const char *tgt_dsort_to_bucket(const tgt_dsort_t *d)
{
	return d->to_bucket;
}

int tgt_dsort_to_bidx(const tgt_dsort_t *d)
{
	return d->to_bidx;
}

/*
 * The URL of member of input shard shard on its owner in smap into u (signed like a proxy's
 * redirect when auth is on, so the owner's public port lets it in); 0, or -1 with err.
 */
static int member_url(ft_strbuf_t *u, const ft_smap_t *smap, const char *provider, const char *bucket,
		      const char *shard, const char *member, char *err, size_t cap)
{
	const ft_node_t *owner = ft_smap_owner(smap, provider, bucket, shard, strlen(shard));

	if (owner == NULL) {
		snprintf(err, cap, "the cluster map has no targets");
		return -1;
	}
	ft_strbuf_addf(u, "%s/v1/objects/%s/", owner->public_url, bucket);
	ft_pct_encode_buf(u, shard, strlen(shard), FT_PCT_KEEP_SLASH);
	ft_strbuf_addf(u, "?provider=%s&archpath=", provider);
	ft_pct_encode_buf(u, member, strlen(member), 0);
	if (ft_auth()->enabled)
		ft_urlsig_append(u, true, ft_auth()->url_key, "GET", provider, bucket, shard, strlen(shard),
				 time(NULL));
	if (u->failed) {
		snprintf(err, cap, "out of memory");
		return -1;
	}
	return 0;
}

/* Copies size bytes of fd from offset base into the writer's current member; 0, or -1 with err. */
static int copy_member(struct archive *w, int fd, int64_t base, int64_t size, char *buf, char *err, size_t cap)
{
	for (int64_t off = 0; off < size;) {
		size_t want = size - off < DSORT_BUF ? (size_t)(size - off) : DSORT_BUF;
		ssize_t n = pread(fd, buf, want, base + off);
		if (n <= 0) {
			snprintf(err, cap, "reading the member: %s", n < 0 ? strerror(errno) : "short");
			return -1;
		}
		if (archive_write_data(w, buf, (size_t)n) != n) {
			snprintf(err, cap, "writing the shard: %s", archive_error_string(w));
			return -1;
		}
		off += n;
	}
	return 0;
}

/*
 * A member of an input shard stored here whose data has an offset (TAR, a stored ZIP member):
 * written into w straight from the shard file, through the cached member index. 0 done, 1 not
 * readable that way (fetch it instead), -1 with err (after its header was written).
 */
static int local_member(tgt_t *t, const ft_bucket_t *src, const char *shard, const char *member, int64_t size,
			struct archive *w, char *buf, char *err, size_t cap)
{
	tgt_shard_fmt_t fmt = tgt_shard_fmt_of_name(shard);
	tgt_shard_index_t *ix = NULL;
	tgt_obj_t so;
	ft_lom_t lom;
	int fd = -1, rc = 1;

	if ((fmt != TGT_SHARD_TAR && fmt != TGT_SHARD_ZIP) || tgt_obj_init(&so, t, src, shard, strlen(shard)) != 0)
		return 1;
	tgt_replica_t main_copy = {.mp_index = (int)(so.mp - t->mountpaths), .copy = false};
	if (tgt_replica_open(&so, &main_copy, false, &fd, &lom, NULL) != TGT_REPLICA_OK)
		return 1;
	if (tgt_shard_index_get(&so, fd, &lom, fmt, true, &ix, err, cap) == 0) {
		const tgt_shard_member_t *m = tgt_shard_index_find(ix, member);
		if (m != NULL && m->off >= 0 && (int64_t)m->size == size) {
			rc = -1;
			if (tgt_shard_writer_header(w, member, (uint64_t)size, (int64_t)time(NULL)) != 0)
				snprintf(err, cap, "%s: member header: %s", member, archive_error_string(w));
			else
				rc = copy_member(w, fd, m->off, size, buf, err, cap);
		}
		tgt_shard_index_put(t, ix);
	}
	close(fd);
	return rc;
}

/*
 * GETs url into scratch, again on errors worth it (tgt_xfer_fetch's retry) unless run is aborted
 * meanwhile: a few times over about 2 s, and for as long as DSORT_OWNER_WAIT_MS while the member's
 * target cannot be reached or answers 503 (it restarts, and its own part resumes from its journal).
 */
static int fetch(const char *url, int scratch, const tgt_run_t *run, int64_t *got, long *status, char *why, size_t cap)
{
	int64_t first_fail = 0;
	int retry = 0;

	for (int i = 0;; i++) {
		int pause = i == 0 ? 0 : i < 3 ? 250 << (i - 1) : 1000;
		for (int ms = 0; ms < pause; ms += 50) {
			if (run != NULL && tgt_run_aborted(run)) {
				snprintf(why, cap, "aborted");
				return -1;
			}
			nanosleep(&(struct timespec){.tv_nsec = 50 * 1000000L}, NULL);
		}
		if (tgt_xfer_fetch(url, scratch, NULL, got, status, &retry, why, cap) == 0)
			return 0;
		if (!retry)
			return -1;
		if (first_fail == 0)
			first_fail = ft_mono_ms();
		bool away = *status == 0 || *status == 503;
		if (away ? ft_mono_ms() - first_fail >= DSORT_OWNER_WAIT_MS : i + 1 >= DSORT_ATTEMPTS)
			return -1;
	}
}

/* One member: read here when its shard is stored here, else fetched into scratch; then written into w. 0, or -1 with err. */
static int add_member(const tgt_dsort_t *d, const ft_smap_t *smap, tgt_t *t, const ft_bucket_t *src, const json_t *rec,
		      struct archive *w, int scratch, const tgt_run_t *run, char *buf, char *err, size_t cap)
{
	const char *shard = json_string_value(json_array_get(d->inputs, json_integer_value(json_array_get(rec, 0))));
	const char *member = json_string_value(json_array_get(rec, 1));
	const char *provider = src->provider, *bucket = src->name;
	int64_t size = json_integer_value(json_array_get(rec, 2)), got = 0;
	const ft_node_t *owner = ft_smap_owner(smap, provider, bucket, shard, strlen(shard));
	ft_strbuf_t url = {0};
	char why[300];
	long status = 0;
	int rc;

	if (owner != NULL && strcmp(owner->id, t->id) == 0 &&
	    (rc = local_member(t, src, shard, member, size, w, buf, err, cap)) != 1)
		return rc;
	if (member_url(&url, smap, provider, bucket, shard, member, err, cap) != 0) {
		ft_strbuf_free(&url);
		return -1;
	}
	rc = fetch(url.p, scratch, run, &got, &status, why, sizeof(why));
	ft_strbuf_free(&url);
	if (rc != 0) {
		snprintf(err, cap, "%s/%s: %s", shard, member,
			 status == 404   ? "no such input shard or member"
			 : status == 422 ? "input shard is corrupt"
					 : why);
		return -1;
	}
	if (got != size) {
		snprintf(err, cap, "%s/%s: %lld bytes, the plan said %lld (changed since the job started)", shard,
			 member, (long long)got, (long long)size);
		return -1;
	}
	if (tgt_shard_writer_header(w, member, (uint64_t)size, (int64_t)time(NULL)) != 0) {
		snprintf(err, cap, "%s: member header: %s", member, archive_error_string(w));
		return -1;
	}
	return copy_member(w, scratch, 0, size, buf, err, cap);
}

/* Writes the records of recs into the work file out; 0 with *bytes, -1 with err. */
static int build(const tgt_dsort_t *d, const ft_smap_t *smap, tgt_t *t, const ft_bucket_t *src, tgt_shard_fmt_t fmt,
		 const json_t *recs, int out, int scratch, const tgt_run_t *run, int64_t *bytes, char *err, size_t cap)
{
	struct archive *w = tgt_shard_writer_new(fmt, &out);
	char *buf = malloc(DSORT_BUF);
	int rc = -1;

	if (w == NULL || buf == NULL) {
		snprintf(err, cap, "cannot start the shard writer");
		goto out;
	}
	for (size_t i = 0; i < json_array_size(recs); i++) {
		if (run != NULL && tgt_run_aborted(run)) {
			snprintf(err, cap, "aborted");
			goto out;
		}
		const json_t *rec = json_array_get(recs, i);
		if (add_member(d, smap, t, src, rec, w, scratch, run, buf, err, cap) != 0)
			goto out;
		*bytes += json_integer_value(json_array_get(rec, 2));
	}
	if (archive_write_close(w) != ARCHIVE_OK) {
		snprintf(err, cap, "closing the shard: %s", archive_error_string(w));
		goto out;
	}
	rc = 0;
out:
	if (w != NULL)
		archive_write_free(w);
	free(buf);
	return rc;
}

int tgt_dsort_obj(const tgt_dsort_t *d, const ft_smap_t *smap, const ft_bucket_t *src, tgt_obj_t *o,
		  const tgt_run_t *run, int64_t *bytes, char *err, size_t cap)
{
	const json_t *recs = json_object_get(d->outputs, o->obj);
	tgt_shard_fmt_t fmt = tgt_shard_fmt_of_name(o->obj);
	char dest[TGT_XFER_URL_MAX];
	tgt_xfer_head_t h;
	struct stat st;
	int out = -1, scratch = -1, rc = -1;

	*bytes = 0;
	if (recs == NULL || fmt == TGT_SHARD_NONE) {
		snprintf(err, cap, "not an output shard of the plan");
		return -1;
	}
	if (tgt_xfer_obj_url(dest, sizeof(dest), o->t->public_url, o->provider, o->bucket, o->obj) != 0) {
		snprintf(err, cap, "name too long for a URL");
		return -1;
	}
	out = tgt_work_anon(o->mp);
	scratch = tgt_work_anon(o->mp);
	if (out < 0 || scratch < 0) {
		snprintf(err, cap, "work file: %s", strerror(-(out < 0 ? out : scratch)));
		goto out;
	}
	if (build(d, smap, o->t, src, fmt, recs, out, scratch, run, bytes, err, cap) != 0)
		goto out;
	if (fstat(out, &st) != 0) {
		snprintf(err, cap, "work file: %s", strerror(errno));
		goto out;
	}
	if (tgt_xfer_put(dest, out, (int64_t)st.st_size, NULL, false, &h, err, cap) != 0)
		goto out;
	rc = 0;
out:
	if (out >= 0)
		close(out);
	if (scratch >= 0)
		close(scratch);
	return rc;
}

void tgt_dsort_cleanup(const tgt_dsort_t *d, tgt_t *t, const ft_smap_t *smap)
{
	char url[TGT_XFER_URL_MAX], err[256] = "name too long for a URL";
	const char *name;
	json_t *v;

	json_object_foreach(d->outputs, name, v) {
		const ft_node_t *owner = ft_smap_owner(smap, "ais", d->to_bucket, name, strlen(name));
		if (owner == NULL || strcmp(owner->id, t->id) != 0)
			continue;
		if (tgt_xfer_obj_url(url, sizeof(url), t->public_url, "ais", d->to_bucket, name) != 0 ||
		    tgt_xfer_delete(url, err, sizeof(err)) != 0)
			ft_warn("dsort: output %s/%s not removed: %s", d->to_bucket, name, err);
	}
}
