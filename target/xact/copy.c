/* SPDX-License-Identifier: Apache-2.0 */
/* Copy jobs on a target: one source object sent straight to its destination owner; sync removals. */
#include "xact/copy.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cluster/hrw.h"
#include "xact/xfer.h"

/*
 * DESIGN
 * jobs.c gives each target the source objects it is responsible for: the ones it stores (an ais
 * source, walked) or owns (a remote source: listed or named; fetched into the cache first, like a
 * prefetch). Each one goes from this target to its destination owner in one PUT through the
 * owner's public port (xfer.c), which stores it like any PUT: the destination bucket's checksum,
 * mirror copies, EC, write-through to a remote destination. Before sending, a HEAD on the owner
 * tells whether it holds the same object already (same size, same checksum type and value): a
 * re-run sends nothing for those. The PUT carries the source's checksum (Ais-Checksum-Type/-Value):
 * the owner checks the bytes against it whatever its bucket's type and stores nothing when they
 * differ, so a source damaged on disk or a copy damaged on the way is an error, never a silent
 * success or a damaged copy. After the PUT the owner's checksum must also equal the source's when
 * both buckets use one type (an owner of an older release does not check the headers).
 * Sync walks the destination objects this target stores and removes, through the owner, those
 * whose source object is gone (a HEAD on the source's owner says 404).
 * With a prepend every copy is named <prepend><name>: the HEAD, the PUT and the owner are the
 * new name's; sync walks the destination under <prepend><prefix> and looks for the source of
 * each name with the prepend taken off, so destination objects outside the prepend are not this
 * copy's and stay.
 */

/* The ext map of a copy message ({"jpg": "png"}: the proxy checked and normalized it) into c; 0, or -1 with why. */
static int ext_parse(tgt_copy_t *c, json_t *ext, char *why, size_t cap)
{
	const char *k;
	json_t *v;

	if (ext == NULL || json_object_size(ext) == 0)
		return 0;
	if (!json_is_object(ext) || c->sync) {
		snprintf(why, cap, "ext must be an object of extensions, and cannot go with sync");
		return -1;
	}
	json_object_foreach(ext, k, v) {
		if (!json_is_string(v) || k[0] == '\0' || json_string_length(v) == 0 || strpbrk(k, "./") != NULL ||
		    strpbrk(json_string_value(v), "./") != NULL) {
			snprintf(why, cap, "ext: \"%s\" must map an extension to another, without dots or slashes", k);
			return -1;
		}
	}
	c->ext = json_incref(ext);
	return 0;
}

int tgt_copy_parse(tgt_copy_t *c, const json_t *msg, const ft_bmd_t *bmd, const char *provider, const char *bucket,
		   char *why, size_t cap)
{
	const char *tp = json_string_value(json_object_get(msg, "to_provider"));
	const char *tb = json_string_value(json_object_get(msg, "to_bucket"));
	const ft_bucket_t *b;

	memset(c, 0, sizeof(*c));
	if (tp == NULL || tb == NULL || strlen(tp) >= sizeof(c->to_provider) || strlen(tb) >= sizeof(c->to_bucket)) {
		snprintf(why, cap, "a copy job needs to_provider and to_bucket strings");
		return -1;
	}
	if (strcmp(tp, provider) == 0 && strcmp(tb, bucket) == 0) {
		snprintf(why, cap, "cannot copy bucket %s/%s onto itself", provider, bucket);
		return -1;
	}
	snprintf(c->to_provider, sizeof(c->to_provider), "%s", tp);
	snprintf(c->to_bucket, sizeof(c->to_bucket), "%s", tb);
	c->dry_run = json_is_true(json_object_get(msg, "dry_run"));
	c->latest = json_is_true(json_object_get(msg, "latest"));
	c->sync = json_is_true(json_object_get(msg, "sync"));
	c->force = json_is_true(json_object_get(msg, "force"));
	b = ft_bmd_find(bmd, tp, tb);
	if (b == NULL) {
		snprintf(why, cap, "destination bucket %s/%s is not known", tp, tb);
		return -2;
	}
	c->to_bidx = (int)(b - bmd->buckets);
	const json_t *prepend = json_object_get(msg, "prepend");
	if (prepend != NULL && (!json_is_string(prepend) || json_string_length(prepend) >= sizeof(c->prepend))) {
		snprintf(why, cap, "prepend must be a string of at most %zu bytes", sizeof(c->prepend) - 1);
		return -1;
	}
	if (prepend != NULL) {
		c->prepend_len = json_string_length(prepend);
		memcpy(c->prepend, json_string_value(prepend), c->prepend_len + 1);
	}
	const char *etl = json_string_value(json_object_get(msg, "etl"));
	if (etl != NULL) {
		if (strlen(etl) >= sizeof(c->etl) || json_object_get(bmd->etl, etl) == NULL) {
			snprintf(why, cap, "etl \"%s\" does not exist", etl);
			return -2;
		}
		snprintf(c->etl, sizeof(c->etl), "%s", etl);
	}
	c->etl_timeout_ms = json_integer_value(json_object_get(msg, "etl_timeout_ms"));
	return ext_parse(c, json_object_get(msg, "ext"), why, cap);
}

void tgt_copy_free(tgt_copy_t *c)
{
	json_decref(c->ext);
	c->ext = NULL;
}

/* Removes the cached copy of o (a remote object that changed in the backend) under its name lock. */
static void uncache(tgt_obj_t *o)
{
	tgt_name_lock(o);
	if (unlinkat(o->mp->root_fd, o->rel, 0) == 0)
		tgt_parent_prune(o->mp, o->rel);
	tgt_name_unlock(o);
	tgt_list_bump(o->t, o->provider, o->bucket);
}

/* latest: drops the cached copy of remote o when the backend holds another version. 0, or -1 with err. */
static int revalidate(tgt_obj_t *o, char *err, size_t cap)
{
	ft_backend_error_t berr;
	ft_backend_meta_t now, have;
	ft_lom_t lom;
	ft_backend_t *b = tgt_backend_get(o, &berr);
	int fd, rc;

	if (b == NULL) {
		snprintf(err, cap, "backend: %s", berr.msg);
		return -1;
	}
	fd = openat(o->mp->root_fd, o->rel, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return 0; /* not cached: the fetch gets the latest */
	rc = ft_lom_fget(fd, &lom);
	close(fd);
	if (ft_backend_head(b, o->obj, &now, &berr) != FT_BACKEND_OK) {
		snprintf(err, cap, "revalidation: %s", berr.msg);
		return -1;
	}
	memset(&have, 0, sizeof(have));
	have.size = (int64_t)lom.size;
	have.mtime_ns = lom.mtime_ns;
	snprintf(have.etag, sizeof(have.etag), "%s", lom.etag);
	snprintf(have.version, sizeof(have.version), "%s", lom.version);
	if (rc != 0 || !ft_backend_meta_same(&have, &now))
		uncache(o);
	return 0;
}

/* Opens the stored copy of o with its metadata and size; fd, or -404 (no such object) or -1 with err. */
static int open_source(tgt_obj_t *o, ft_lom_t *lom, struct stat *st, char *err, size_t cap)
{
	int fd = openat(o->mp->root_fd, o->rel, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	int rc;

	if (fd < 0) {
		int e = errno;
		snprintf(err, cap, "%s", e == ENOENT ? "no such object" : strerror(e));
		return e == ENOENT ? -404 : -1;
	}
	rc = ft_lom_fget(fd, lom);
	if (rc == 0 && fstat(fd, st) != 0)
		rc = -errno;
	if (rc == 0 && (uint64_t)st->st_size != lom->size)
		rc = -EBADMSG;
	if (rc != 0) {
		snprintf(err, cap, "stored copy: %s", rc == -EBADMSG ? "damaged metadata or size" : strerror(-rc));
		close(fd);
		return -1;
	}
	return fd;
}

/* Whether the owner's h describes the same object as lom. */
static int same_object(const tgt_xfer_head_t *h, const ft_lom_t *lom)
{
	return h->size == (int64_t)lom->size && strcasecmp(h->cksum_type, ft_cksum_name(lom->cksum_type)) == 0 &&
	       strcmp(h->cksum, lom->cksum) == 0;
}

/* The destination URL of name on its owner in smap; 0, or -1 with err. */
static int dest_url(const tgt_copy_t *c, const ft_smap_t *smap, const char *name, size_t len, char *url, size_t url_cap,
		    char *err, size_t cap)
{
	const ft_node_t *owner = ft_smap_owner(smap, c->to_provider, c->to_bucket, name, len);

	if (owner == NULL) {
		snprintf(err, cap, "the cluster map has no targets");
		return -1;
	}
	if (tgt_xfer_obj_url(url, url_cap, owner->public_url, c->to_provider, c->to_bucket, name) != 0) {
		snprintf(err, cap, "name too long for a URL");
		return -1;
	}
	return 0;
}

/*
 * Transformer c->etl over the source (fd, lom) into a work file of o's mountpath, then, only when
 * it succeeded, the whole output PUT to url. 0 with *bytes (the output's size), -1 with err.
 */
static int copy_transformed(const tgt_copy_t *c, tgt_obj_t *o, int fd, const ft_lom_t *lom, const char *url,
			    int64_t *bytes, char *err, size_t cap)
{
	char why[600];
	tgt_xfer_head_t h;
	int64_t size = 0;
	tgt_etl_rc_t rc;
	int out = tgt_work_anon(o->mp);

	if (out < 0) {
		snprintf(err, cap, "work file: %s", strerror(-out));
		return -1;
	}
	rc = tgt_etl_transform(c->etl, fd, (int64_t)lom->size, out, &size, c->etl_timeout_ms, why, sizeof(why));
	if (rc != TGT_ETL_OK) {
		snprintf(err, cap, "etl %s: %s", c->etl, why);
		close(out);
		return -1;
	}
	rc = tgt_xfer_put(url, out, size, lom, false, &h, err, cap) == 0 ? TGT_ETL_OK : TGT_ETL_FAILED;
	close(out);
	if (rc != TGT_ETL_OK)
		return -1;
	*bytes = size;
	return 0;
}

/*
 * The copy's name of o into name: <prepend><name>, the extension after the name's last dot replaced
 * when the ext map has it (AIStore's TCBMsg.ToName). Its length, or -1 with err when too long.
 */
static long dest_name(const tgt_copy_t *c, const tgt_obj_t *o, char *name, size_t name_cap, char *err, size_t cap)
{
	const char *dot = memrchr(o->obj, '.', o->obj_len);
	char ext[FT_OBJ_NAME_MAX + 1];
	const char *repl = NULL;
	size_t keep = o->obj_len, len;

	if (c->to_name != NULL) { /* checked by its caller */
		snprintf(name, name_cap, "%s", c->to_name);
		return (long)strlen(name);
	}
	if (c->ext != NULL && dot != NULL && (size_t)(o->obj + o->obj_len - dot - 1) < sizeof(ext)) {
		size_t n = (size_t)(o->obj + o->obj_len - dot - 1);
		memcpy(ext, dot + 1, n);
		ext[n] = '\0';
		repl = json_string_value(json_object_get(c->ext, ext));
		if (repl != NULL)
			keep = (size_t)(dot + 1 - o->obj);
	}
	len = c->prepend_len + keep + (repl != NULL ? strlen(repl) : 0);
	if (len > FT_OBJ_NAME_MAX || len >= name_cap) {
		snprintf(err, cap, "the copy's name (prepend + name) would be longer than %d bytes", FT_OBJ_NAME_MAX);
		return -1;
	}
	memcpy(name, c->prepend, c->prepend_len);
	memcpy(name + c->prepend_len, o->obj, keep);
	if (repl != NULL)
		memcpy(name + c->prepend_len + keep, repl, strlen(repl));
	name[len] = '\0';
	return (long)len;
}

char *tgt_copy_dest_prefix(const tgt_copy_t *c, const char *prefix)
{
	size_t n = prefix != NULL ? strlen(prefix) : 0;
	char *p = malloc(c->prepend_len + n + 1);

	if (p != NULL) {
		memcpy(p, c->prepend, c->prepend_len);
		memcpy(p + c->prepend_len, prefix != NULL ? prefix : "", n + 1);
	}
	return p;
}

int tgt_copy_obj(const tgt_copy_t *c, const ft_smap_t *smap, tgt_obj_t *o, int64_t *bytes, char *err, size_t cap)
{
	char url[TGT_XFER_URL_MAX], name[FT_OBJ_NAME_MAX + 1];
	tgt_xfer_head_t h;
	ft_lom_t lom;
	struct stat st;
	int64_t fetched = 0;
	int fd, rc = -1;
	long len;

	*bytes = 0;
	if ((len = dest_name(c, o, name, sizeof(name), err, cap)) < 0)
		return -1;
	if (tgt_is_remote(o)) {
		if (c->latest && revalidate(o, err, cap) != 0)
			return -1;
		if ((rc = tgt_coldget_prefetch(o, &fetched, err, cap)) < 0)
			return rc;
	}
	if (dest_url(c, smap, name, (size_t)len, url, sizeof(url), err, cap) != 0)
		return -1;
	fd = open_source(o, &lom, &st, err, cap);
	if (fd < 0)
		return fd;
	if (c->etl[0] != '\0' && !c->dry_run) {
		rc = copy_transformed(c, o, fd, &lom, url, bytes, err, cap);
		goto out;
	}
	if (!c->force && c->etl[0] == '\0') {
		int found = tgt_xfer_head(url, &h, err, cap);
		if (found < 0)
			goto out;
		if (found == 1 && same_object(&h, &lom)) {
			rc = 1; /* the destination has it */
			goto out;
		}
	}
	if (c->dry_run) {
		*bytes = st.st_size; /* would be copied */
		rc = 0;
		goto out;
	}
	if (tgt_xfer_put(url, fd, st.st_size, &lom, true, &h, err, cap) != 0)
		goto out;
	if (strcasecmp(h.cksum_type, ft_cksum_name(lom.cksum_type)) == 0 && strcmp(h.cksum, lom.cksum) != 0) {
		snprintf(err, cap, "checksum of the copy (%s %s) differs from the source's (%s)", h.cksum_type, h.cksum,
			 lom.cksum);
		goto out;
	}
	*bytes = st.st_size;
	rc = 0;
out:
	close(fd);
	return rc;
}

int tgt_copy_sync_obj(const tgt_copy_t *c, const ft_smap_t *smap, const char *src_provider, const char *src_bucket,
		      tgt_obj_t *o, char *err, size_t cap)
{
	const char *src = o->obj + c->prepend_len; /* the source's name: the prepend taken off */
	char url[TGT_XFER_URL_MAX];
	tgt_xfer_head_t h;
	int found;

	if (o->obj_len <= c->prepend_len || memcmp(o->obj, c->prepend, c->prepend_len) != 0)
		return 1; /* not a copy of this job's */
	const ft_node_t *owner = ft_smap_owner(smap, src_provider, src_bucket, src, o->obj_len - c->prepend_len);
	if (owner == NULL ||
	    tgt_xfer_obj_url(url, sizeof(url), owner->public_url, src_provider, src_bucket, src) != 0) {
		snprintf(err, cap, "no owner for the source object");
		return -1;
	}
	found = tgt_xfer_head(url, &h, err, cap);
	if (found != 0)
		return found < 0 ? -1 : 1;
	if (c->dry_run)
		return 0;
	if (tgt_xfer_obj_url(url, sizeof(url), o->t->public_url, c->to_provider, c->to_bucket, o->obj) != 0) {
		snprintf(err, cap, "name too long for a URL");
		return -1;
	}
	return tgt_xfer_delete(url, err, cap) == 0 ? 0 : -1;
}
