/* SPDX-License-Identifier: Apache-2.0 */
/* Rebalance sender: streams an object to another target over the control port, then deletes it here. */
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/codec.h"
#include "base/log.h"
#include "cluster/bmd.h"
#include "cluster/hrw.h"
#include "cluster/smap.h"
#include "core/lom.h"
#include "http/util.h"
#include "protect/mirror.h"
#include "rpc/client.h"
#include "target.h"
#include "xact/rebalance.h"

static int same_version(const ft_lom_t *a, const ft_lom_t *b)
{
	return a->mtime_ns == b->mtime_ns && a->size == b->size && strcmp(a->version, b->version) == 0 &&
	       strcmp(a->cksum, b->cksum) == 0;
}

/* ---- sending to another target ---- */

typedef struct {
	char buf[4096];
	size_t len;
} resp_buf_t;

static size_t on_resp(char *p, size_t size, size_t n, void *arg)
{
	resp_buf_t *b = arg;
	size_t len = size * n, room = sizeof(b->buf) - 1 - b->len;

	memcpy(b->buf + b->len, p, len < room ? len : room);
	b->len += len < room ? len : room;
	b->buf[b->len] = '\0';
	return len;
}

static int on_progress(void *arg, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
	const tgt_rebalance_t *rb = arg;

	(void)dt;
	(void)dn;
	(void)ut;
	(void)un;
	return atomic_load(&rb->stopping); /* non-zero aborts the transfer: the daemon is stopping */
}

/* One keep-alive curl handle per thread (movers, control-port threads), freed when the thread exits. */
static pthread_key_t curl_key;
static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static int curl_key_ok;

static void curl_handle_free(void *h)
{
	curl_easy_cleanup(h);
}

static void curl_key_init(void)
{
	curl_key_ok = ft_client_global_init() == 0 && pthread_key_create(&curl_key, curl_handle_free) == 0;
}

static CURL *thread_curl(void)
{
	pthread_once(&curl_once, curl_key_init);
	if (!curl_key_ok)
		return NULL;
	CURL *h = pthread_getspecific(curl_key);
	if (h) {
		curl_easy_reset(h); /* keeps the connections */
		ft_client_tls_apply(h);
		return h;
	}
	h = curl_easy_init();
	if (h && pthread_setspecific(curl_key, h) != 0) {
		curl_easy_cleanup(h);
		h = NULL;
	}
	ft_client_tls_apply(h);
	return h;
}

/* PUT body to url. 0 with *status and msg (the JSON "message" or "result"), or -1 with msg. */
static int http_put(tgt_rebalance_t *rb, const char *url, const void *body, size_t len, long *status, char *msg,
		    size_t cap)
{
	CURL *h = thread_curl();
	struct curl_slist *hdrs = NULL;
	resp_buf_t rbuf = {.len = 0};
	int rc = -1;

	if (!h) {
		snprintf(msg, cap, "no HTTP client handle");
		return -1;
	}
	hdrs = curl_slist_append(hdrs, "Content-Type: application/octet-stream");
	hdrs = curl_slist_append(hdrs, "Expect:");
	if (ft_client_sign_headers(&hdrs, "PUT", url, body, len) != 0) { /* the control plane is signed */
		snprintf(msg, cap, "out of memory");
		goto out;
	}
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, "PUT");
	curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_resp);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &rbuf);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_NOPROXY, "*");
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, RB_CONNECT_MS);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, RB_XFER_MS);
	curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
	curl_easy_setopt(h, CURLOPT_XFERINFODATA, rb);
	curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
	CURLcode cc = curl_easy_perform(h);
	if (cc != CURLE_OK) {
		snprintf(msg, cap, "%s", curl_easy_strerror(cc));
		goto out;
	}
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
	json_t *j = json_loads(rbuf.buf, 0, NULL);
	const char *m = json_string_value(json_object_get(j, "message"));
	if (!m)
		m = json_string_value(json_object_get(j, "result"));
	snprintf(msg, cap, "%s", m ? m : "");
	json_decref(j);
	rc = 0;
out:
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
	curl_slist_free_all(hdrs);
	return rc;
}

/* "<base>/v1/rebalance/<what>?provider=..&bucket=..&obj=.." plus extra (starting with '&'); NULL on OOM. */
char *rb_obj_url(const char *base, const char *what, const tgt_obj_t *o, const char *extra)
{
	char *b = ft_pct_encode_dup(o->bucket, strlen(o->bucket), 0), *n = ft_pct_encode_dup(o->obj, strlen(o->obj), 0),
	     *url = NULL;

	if (b && n) {
		size_t cap = strlen(base) + strlen(b) + strlen(n) + strlen(extra) + 128;
		url = malloc(cap);
		if (url)
			snprintf(url, cap, "%s/v1/rebalance/%s?provider=%s&bucket=%s&obj=%s%s", base, what, o->provider,
				 b, n, extra);
	}
	free(b);
	free(n);
	return url;
}

/* Streams the open object (fd, lom) to dest_url in chunks; 0, or -1 with err. */
static int send_chunks(const tgt_obj_t *o, int fd, const ft_lom_t *lom, const char *dest_url, int64_t smap_v, char *err,
		       size_t cap)
{
	uint8_t enc[FT_LOM_MAX];
	char xfer[RB_XFER_MAX], extra[RB_XFER_MAX + 160], msg[512];
	int enc_len = ft_lom_encode(lom, enc, sizeof(enc));
	size_t bufcap = RB_CHUNK + sizeof(enc);
	uint8_t *buf = malloc(bufcap);
	uint64_t off = 0;
	int rc = -1;
	tgt_rebalance_t *rb = o->t->rebalance;
	ft_bmd_t *bmd = ft_bmd_current();
	int64_t bmd_v = bmd ? bmd->version : 0;

	ft_bmd_put(bmd);
	if (!buf || enc_len < 0) {
		snprintf(err, cap, "out of memory or metadata too large");
		goto out;
	}
	snprintf(xfer, sizeof(xfer), "%016" PRIx64 ".%d.%llu", ft_hrw_digest(o->t->id), (int)getpid(),
		 (unsigned long long)atomic_fetch_add(&rb->xfer_counter, 1));
	do {
		uint64_t n = lom->size - off < RB_CHUNK ? lom->size - off : RB_CHUNK;
		int last = off + n == lom->size;
		size_t pre = last ? (size_t)enc_len : 0;
		if (last)
			memcpy(buf, enc, pre);
		for (uint64_t got = 0; got < n;) {
			ssize_t r = pread(fd, buf + pre + got, (size_t)(n - got), (off_t)(off + got));
			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0) {
				snprintf(err, cap, "read: %s", r < 0 ? strerror(errno) : "file shrank");
				goto abort;
			}
			got += (uint64_t)r;
		}
		snprintf(extra, sizeof(extra),
			 "&xfer=%s&offset=%" PRIu64 "&total=%" PRIu64 "&lom=%zu&smap=%lld&bmd=%lld", xfer, off,
			 lom->size, pre, (long long)smap_v, (long long)bmd_v);
		char *url = rb_obj_url(dest_url, "obj", o, extra);
		long status = 0;
		if (!url) {
			snprintf(err, cap, "out of memory");
			goto abort;
		}
		int hrc;
		for (int busy = 0;; busy++) {
			hrc = http_put(rb, url, buf, pre + (size_t)n, &status, msg, sizeof(msg));
			if (hrc != 0 || status != 503 || busy >= RB_BUSY_TRIES || atomic_load(&rb->stopping))
				break;
			usleep(RB_BUSY_MS * 1000); /* the receiver has not caught up with the metadata yet */
		}
		free(url);
		if (hrc != 0 || status != 200) {
			if (hrc != 0)
				snprintf(err, cap, "send to %s: %s", dest_url, msg);
			else
				snprintf(err, cap, "send to %s: HTTP %ld: %s", dest_url, status, msg);
			goto abort;
		}
		off += n;
	} while (off < lom->size);
	rc = 0;
	goto out;
abort:
	if (off > 0 || lom->size > RB_CHUNK) { /* drop the partial work file over there */
		char *url = rb_obj_url(dest_url, "obj", o, "");
		if (url) {
			size_t len = strlen(url) + sizeof(xfer) + 16;
			char *u2 = malloc(len);
			if (u2) {
				long st = 0;
				snprintf(u2, len, "%s&xfer=%s", url, xfer);
				ft_client_json("DELETE", u2, NULL, (int)RB_CONNECT_MS, &st, NULL, msg, sizeof(msg));
				free(u2);
			}
			free(url);
		}
	}
out:
	free(buf);
	return rc;
}

/*
 * Sends o (on o->mp) to the target at dest_url; unless keep, then deletes the local copy (and its
 * mirror copies) if it is still the version sent. 0 when sent, 1 when o is not here, -1 with err.
 */
static int send_object(tgt_obj_t *o, const char *dest_url, int64_t smap_v, int keep, int64_t *bytes, char *err,
		       size_t cap)
{
	tgt_t *t = o->t;
	tgt_hold_t hold;
	int rc = -1;

	tgt_name_hold(o, TGT_HOLD_MOVE, &hold);
	for (int attempt = 0; attempt < RB_SEND_ATTEMPTS; attempt++) {
		ft_lom_t lom, now;
		struct stat st;
		ino_t ino;
		int fd = openat(o->mp->root_fd, o->rel, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0) {
			if (errno == ENOENT || errno == ENOTDIR || errno == ELOOP || errno == EISDIR) {
				rc = 1;
				break;
			}
			snprintf(err, cap, "open: %s", strerror(errno));
			break;
		}
		if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
			close(fd);
			rc = 1;
			break;
		}
		int lrc = ft_lom_fget(fd, &lom);
		if (lrc != 0 || (uint64_t)st.st_size != lom.size) {
			close(fd);
			snprintf(err, cap, "damaged (%s), left in place", lrc != 0 ? "metadata" : "size");
			break;
		}
		lrc = send_chunks(o, fd, &lom, dest_url, smap_v, err, cap);
		close(fd);
		if (lrc != 0)
			break;
		if (keep) {
			*bytes = (int64_t)lom.size;
			rc = 0;
			break;
		}
		/* Delivered: remove this copy unless a PUT replaced it meanwhile (then send again). */
		tgt_name_lock(o);
		int same = rb_lom_at(o->mp, o->rel, &now, &ino) == 0 && ino == st.st_ino && same_version(&now, &lom);
		if (same) {
			unlinkat(o->mp->root_fd, o->rel, 0);
			tgt_parent_prune(o->mp, o->rel);
		}
		tgt_name_unlock(o);
		if (same) {
			tgt_mirror_delete(o);
			tgt_list_bump(t, o->provider, o->bucket);
			*bytes = (int64_t)lom.size;
			rc = 0;
			break;
		}
		snprintf(err, cap, "changed while being sent %d times", attempt + 1);
	}
	tgt_name_release(&hold);
	return rc;
}

int rb_send_move(tgt_obj_t *o, const char *dest_url, int64_t smap_v, int64_t *bytes, char *err, size_t cap)
{
	return send_object(o, dest_url, smap_v, 0, bytes, err, cap);
}

int rb_send_copy(tgt_obj_t *o, const char *dest_url, int64_t smap_v, int64_t *bytes, char *err, size_t cap)
{
	return send_object(o, dest_url, smap_v, 1, bytes, err, cap);
}

/* POST /v1/rebalance/send?...&to=ID&url=CTL&smap=V: move (copy, when in maintenance) an object to the target asking for it. */
void rb_send_for_peer(tgt_t *t, const ft_ctl_req_t *req, ft_ctl_resp_t *resp)
{
	const char *to = ft_ctl_query(req, "to"), *url = ft_ctl_query(req, "url");
	char err[400] = "", dest[FT_URL_MAX];
	int64_t peer_v = 0, bytes = 0;
	tgt_obj_t o;
	struct stat st;

	if (rb_query_obj(t, req, resp, &o) != 0)
		return;
	rb_query_i64(req, "smap", &peer_v);
	if (!to || !*to) {
		ft_ctl_error(resp, 400, "send needs to=<target id>");
		return;
	}
	ft_smap_t *m = ft_smap_current();
	const ft_node_t *node = m ? ft_smap_find(m, to) : NULL;
	if (node)
		snprintf(dest, sizeof(dest), "%s", node->control_url);
	ft_smap_put(m);
	if (!node && (!url || strncmp(url, "http://", 7) != 0 || strlen(url) >= sizeof(dest))) {
		ft_ctl_error(resp, 400, "target %s is not in the map here and no url=http://... was given", to);
		return;
	}
	if (!node)
		snprintf(dest, sizeof(dest), "%s", url);
	if (strcmp(to, t->id) == 0) {
		ft_ctl_error(resp, 400, "cannot send to myself");
		return;
	}
	/* Wherever it is here: its mountpath, or another one not resilvered yet. */
	const tgt_mountpath_t *found = NULL;
	if (fstatat(o.mp->root_fd, o.rel, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode))
		found = o.mp;
	for (int i = 0; !found && i < t->n_mountpaths; i++) {
		int state = tgt_mountpath_slot_state(t, i);
		if (state < 0 || state > 1)
			continue;
		o.mp = &t->mountpaths[i];
		tgt_obj_locate(&o); /* its path or its hashed file, on that mountpath */
		if (fstatat(o.mp->root_fd, o.rel, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode))
			found = o.mp;
	}
	if (!found) {
		ft_ctl_error(resp, 404, "object %s/%s is not on target %s", o.bucket, o.obj, t->id);
		return;
	}
	if (rb_ownership_conflict(t, &o, peer_v, 0, resp))
		return;
	o.mp = found;
	/* In maintenance (not decommissioning) this target keeps what it holds and hands out copies; so it does
	 * while its map is older than the asker's: the newer map may flag it in maintenance, and its own walk
	 * moves the object (or keeps it) once that map arrives. */
	m = ft_smap_current();
	const ft_node_t *self = m ? ft_smap_find(m, t->id) : NULL;
	int keep = (self && self->flags == FT_NODE_MAINTENANCE) || !m || m->version < peer_v;
	ft_smap_put(m);
	int rc = keep ? rb_send_copy(&o, dest, peer_v, &bytes, err, sizeof(err))
		      : rb_send_move(&o, dest, peer_v, &bytes, err, sizeof(err));
	if (rc == 1) {
		ft_ctl_error(resp, 404, "object %s/%s is not on target %s", o.bucket, o.obj, t->id);
	} else if (rc < 0) {
		ft_ctl_error(resp, 502, "object %s/%s: %s", o.bucket, o.obj, err);
	} else {
		resp->status = 200;
		resp->json = json_pack("{s:s, s:I}", "result", "sent", "bytes", (json_int_t)bytes);
	}
}
