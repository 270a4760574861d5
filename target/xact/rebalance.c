/* Rebalance (objects follow the cluster map) and resilver (objects follow the mountpath set). */
#include <curl/curl.h>
#include <dirent.h>
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

#include "base/fdio.h"
#include "base/log.h"
#include "cluster/bmd.h"
#include "cluster/hrw.h"
#include "cluster/smap.h"
#include "core/lom.h"
#include "http/util.h"
#include "rpc/client.h"
#include "target.h"

/*
 * DESIGN
 * Placement is a function of the map and the mountpath set: the owner is ft_smap_owner over the
 * current Smap, the mountpath tgt_mountpath_pick over the active mountpaths. When either changes,
 * objects are moved to where they now belong by one per-object step, tgt_rebalance_job_obj:
 * another owner -> the object is sent to it over the control port and deleted here (with its
 * mirror copies); this owner but another mountpath -> it is moved locally (rename, or copy and
 * verify across filesystems). A map change first tries tgt_jobs_start_local (job
 * "rebalance-<smap version>", status in the job table); when the job framework refuses, and for
 * every mountpath change, this file's own walker runs: one manager thread walks
 * "<mp>/<provider>/<bucket>/" of every bucket in the BMD (never .work, .copies or .ec), keeps the
 * misplaced objects and moves them on RB_THREADS threads. A newer request (map change, attach,
 * detach) bumps a generation: the running walk stops and a new one starts with the new placement.
 * Status: GET /v1/rebalance on the control port.
 *
 * TRANSFER (control port, JSON answers only, bodies up to FT_CTL_MAX_BODY): the sender PUTs
 * /v1/rebalance/obj?provider=&bucket=&obj=&xfer=&offset=&total=&lom=N&smap=V in chunks of at most
 * RB_CHUNK bytes; the last chunk's body starts with the N bytes of the encoded LOM (the xattr
 * bytes: version, checksum, ETag, user metadata travel unchanged). The receiver appends to
 * ".work/rb.<xfer>" on the object's mountpath, and on the last chunk verifies the size and the
 * checksum against the LOM, sets the LOM, and publishes under the name's put_locks stripe like a
 * PUT; an object already there with a newer or equal mtime (a client PUT after the map change, or
 * an earlier move) wins and the incoming one is dropped. Only after a 200 does the sender delete
 * its copy, and only if it is still the version it sent (under its put_locks stripe).
 * A target that does not own an object in a map at least as new as the sender's refuses it (409);
 * one that does not know the bucket yet while the sender's BMD (&bmd=V) is newer answers 503 and
 * the sender retries the chunk for a while (a joining target gets the BMD just after the map).
 *
 * PULL: a GET that misses on the owner (get.c) calls tgt_rebalance_pull: first the other local
 * mountpaths (a resilver not done yet), then, within RB_PULL_WINDOW_NS of a map change, the next
 * targets in HRW order in the current map (with HRW, the owner before a target joined is the next
 * one in the new order) and the owners in the last RB_HISTORY maps: each is asked
 * (POST /v1/rebalance/send) to move the object here now, as its walker would. The pulling thread
 * must not be a control-port thread of this target (the object comes in through that server):
 * POST /v1/rebalance/pull, the on-demand form, pulls on a thread of its own and answers 202.
 *
 * DETACH: the mountpath leaves the active set at once (mountpath.c), a walk moves its objects
 * away; if some cannot be moved (damaged, no space) it is made active again and the run reports
 * them; else it is sealed (publishes there fail from then on), what was published there between
 * the walk and the seal is moved in a last sweep, and it is detached.
 *
 * Remote-bucket objects cached here move like the others (the cache stays warm); a miss for them
 * goes to the backend through coldget anyway.
 *
 * OWNERSHIP: the rb_t state is static (one target per process); its Smap history holds one
 * reference per entry, released by tgt_rebalance_fini. A run owns its item list and BMD reference.
 * Lock order: move_locks[i] -> put_locks[j] -> publish_lock; rb.lock is never held across I/O.
 */

#define RB_THREADS 2
#define RB_CHUNK (8u << 20)
#define RB_HISTORY 3
#define RB_RANKED 3 /* next targets in HRW order asked by a pull */
#define RB_PULL_WINDOW_NS (600LL * 1000000000LL)
#define RB_SAMPLES 5
#define RB_MOVE_LOCKS 64
#define RB_CONNECT_MS 3000L
#define RB_XFER_MS 120000L
#define RB_ASK_MS 30000 /* a pull's request to a previous owner, its transfer included (also connect) */
#define RB_ID_MAX 64
#define RB_XFER_MAX 96
#define RB_SEND_ATTEMPTS 3
#define RB_BUSY_TRIES 40 /* a 503 (receiver without the BMD yet) is retried every RB_BUSY_MS */
#define RB_BUSY_MS 250

enum { ST_IDLE = 0, ST_RUNNING, ST_FINISHED, ST_ABORTED };
static const char *const state_names[] = {
	[ST_IDLE] = "idle", [ST_RUNNING] = "running", [ST_FINISHED] = "finished", [ST_ABORTED] = "aborted"};

typedef struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	pthread_t thread;
	int thread_running;
	int stop;
	int disabled;  /* POST /v1/rebalance {"action":"disable"}: map changes are only noted */
	int missed;    /* a map change came while disabled */
	int want_walk; /* a walk is requested */
	char want_id[RB_ID_MAX];
	char want_kind[16];
	int detach_pending[FT_MAX_MOUNTPATHS];
	atomic_int gen;              /* bumped by every request; a walk of an older generation stops */
	atomic_int stopping;         /* set by tgt_rebalance_fini: transfers and walks end now */
	ft_smap_t *hist[RB_HISTORY]; /* previous maps, newest first */
	int64_t last_change_ns;
	/* status of the current or last run (strings and samples under lock, counters atomic) */
	char id[RB_ID_MAX];
	char kind[16];
	char mode[8]; /* "local" (this walker) or "job" (tgt_jobs_start_local) */
	atomic_int state;
	atomic_llong scanned, total, objects, bytes, errors;
	atomic_llong pulled, pull_misses; /* since start: objects a GET miss pulled here, pulls that found none */
	int64_t start_ns, end_ns;
	char samples[RB_SAMPLES][256];
	int n_samples;
	char note[256];
} rb_t;

static rb_t rb = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};
static pthread_mutex_t move_locks[RB_MOVE_LOCKS];
static pthread_once_t move_once = PTHREAD_ONCE_INIT;
static atomic_uint_fast64_t xfer_counter;

static void move_locks_init(void)
{
	for (int i = 0; i < RB_MOVE_LOCKS; i++)
		pthread_mutex_init(&move_locks[i], NULL);
}

static void note_error(const char *what, const char *msg)
{
	atomic_fetch_add(&rb.errors, 1);
	pthread_mutex_lock(&rb.lock);
	if (rb.n_samples < RB_SAMPLES)
		snprintf(rb.samples[rb.n_samples++], sizeof(rb.samples[0]), "%s: %s", what, msg);
	pthread_mutex_unlock(&rb.lock);
	ft_warn("rebalance: %s: %s", what, msg);
}

static uint64_t name_hash(const tgt_obj_t *o)
{
	return ft_hrw_name_hash(o->provider, o->bucket, o->obj, o->obj_len);
}

/* Fills o for name of bucket b found on mp (rel built; -1 if it does not fit). */
static int obj_init(tgt_obj_t *o, tgt_t *t, const ft_bucket_t *b, const tgt_mountpath_t *mp, const char *name)
{
	memset(o, 0, sizeof(*o));
	o->t = t;
	snprintf(o->provider, sizeof(o->provider), "%s", b->provider);
	snprintf(o->bucket, sizeof(o->bucket), "%s", b->name);
	tgt_obj_props(o, b);
	o->obj = name;
	o->obj_len = strlen(name);
	o->mp = mp;
	return tgt_rel_path(o->rel, sizeof(o->rel), o->provider, o->bucket, name);
}

/* The LOM of rel on mp (and its inode); 0, or -errno (-ENOENT: no object there). */
static int lom_at(const tgt_mountpath_t *mp, const char *rel, ft_lom_t *lom, ino_t *ino)
{
	struct stat st;
	int fd = openat(mp->root_fd, rel, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);

	if (fd < 0)
		return errno == ENOTDIR || errno == ELOOP ? -ENOENT : -errno;
	int rc = fstat(fd, &st) != 0 ? -errno : !S_ISREG(st.st_mode) ? -ENOENT : ft_lom_fget(fd, lom);
	if (rc == 0 && (uint64_t)st.st_size != lom->size)
		rc = -EBADMSG;
	if (rc == 0 && ino)
		*ino = st.st_ino;
	close(fd);
	return rc;
}

static int same_version(const ft_lom_t *a, const ft_lom_t *b)
{
	return a->mtime_ns == b->mtime_ns && a->size == b->size && strcmp(a->version, b->version) == 0 &&
	       strcmp(a->cksum, b->cksum) == 0;
}

/* Checksum of fd's first size bytes, as type, into hex. 0 or -errno. */
static int file_cksum(int fd, uint64_t size, ft_cksum_type_t type, char hex[FT_CKSUM_HEX_MAX])
{
	static const size_t bufsz = 1 << 20;
	ft_cksum_t ck;
	uint64_t off = 0;
	char *buf = malloc(bufsz);

	if (!buf || ft_cksum_init(&ck, type) != 0) {
		free(buf);
		return -ENOMEM;
	}
	while (off < size) {
		size_t want = size - off < bufsz ? (size_t)(size - off) : bufsz;
		ssize_t n = pread(fd, buf, want, (off_t)off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			int e = n < 0 ? -errno : -EIO;
			ft_cksum_abort(&ck);
			free(buf);
			return e;
		}
		ft_cksum_update(&ck, buf, (size_t)n);
		off += (uint64_t)n;
	}
	ft_cksum_final(&ck, hex);
	free(buf);
	return 0;
}

static int sync_fd(const tgt_t *t, int fd)
{
	if (t->cfg.sync == FT_SYNC_DATA && fdatasync(fd) != 0)
		return -errno;
	if (t->cfg.sync == FT_SYNC_FULL && fsync(fd) != 0)
		return -errno;
	return 0;
}

/* Publishes the work file as o (on o->mp) under publish_lock; the caller holds the put_locks stripe. */
static int publish_locked(const tgt_obj_t *o, char *work)
{
	tgt_t *t = o->t;

	pthread_rwlock_rdlock(&t->publish_lock);
	int rc = tgt_put_bucket_alive(o) ? tgt_put_publish(o, work, t->cfg.sync) : -ESTALE;
	pthread_rwlock_unlock(&t->publish_lock);
	return rc;
}

/* ---- moving within this target (resilver) ---- */

/* Copies size bytes of src to dst (both at offset 0): copy_file_range, else read and write. 0 or -errno. */
static int copy_data(int src, int dst, uint64_t size)
{
	off_t in = 0, out = 0;
	int plain = 0;

	while ((uint64_t)in < size && !plain) {
		ssize_t n = copy_file_range(src, &in, dst, &out, (size_t)(size - (uint64_t)in), 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EXDEV || errno == EOPNOTSUPP || errno == EINVAL || errno == ENOSYS) && in == 0)
			plain = 1; /* not between these filesystems */
		else if (n <= 0)
			return n < 0 ? -errno : -EIO;
	}
	if (!plain)
		return 0;
	char *buf = malloc(1 << 20);
	int rc = buf ? 0 : -ENOMEM;
	for (uint64_t off = 0; off < size && rc == 0;) {
		size_t want = size - off < (1u << 20) ? (size_t)(size - off) : (1u << 20);
		ssize_t n = pread(src, buf, want, (off_t)off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			rc = n < 0 ? -errno : -EIO;
		else
			rc = ft_write_all(dst, buf, (size_t)n);
		off += n > 0 ? (uint64_t)n : 0;
	}
	free(buf);
	return rc;
}

/*
 * Copies src_fd (size bytes, metadata lom) into a new work file of dst, verifying the checksum.
 * The work name is written to work. 0, or -errno with err (-EBADMSG: the source is corrupt).
 */
static int copy_to_work(const tgt_t *t, int src_fd, const ft_lom_t *lom, const tgt_mountpath_t *dst, char *work,
			size_t wcap, char *err, size_t cap)
{
	char hex[FT_CKSUM_HEX_MAX];
	int fd = tgt_work_create(dst, work, wcap);
	int rc = 0;

	if (fd < 0) {
		snprintf(err, cap, "cannot create a work file on %s: %s", dst->path, strerror(-fd));
		work[0] = '\0';
		return fd;
	}
	rc = copy_data(src_fd, fd, lom->size);
	if (rc == 0 && lom->cksum_type != FT_CKSUM_NONE) { /* what landed there, read back */
		int rfd = openat(dst->work_fd, work, O_RDONLY | O_CLOEXEC);
		rc = rfd < 0 ? -errno : file_cksum(rfd, lom->size, lom->cksum_type, hex);
		if (rfd >= 0)
			close(rfd);
		if (rc == 0 && strcmp(hex, lom->cksum) != 0)
			rc = -EBADMSG;
	}
	if (rc == 0)
		rc = sync_fd(t, fd);
	if (rc == 0)
		rc = ft_lom_fset(fd, lom);
	close(fd);
	if (rc != 0) {
		snprintf(err, cap, "copy to %s: %s", dst->path,
			 rc == -EBADMSG ? "checksum mismatch (source corrupt, left in place)" : strerror(-rc));
		unlinkat(dst->work_fd, work, 0);
		work[0] = '\0';
	}
	return rc;
}

/*
 * Moves o (on o->mp) to dst on this target. The copy already at dst wins when its mtime is newer
 * or equal (then o's copy is removed). 0 when moved or superseded, 1 when o is gone, -1 with err.
 */
static int local_move(tgt_obj_t *o, const tgt_mountpath_t *dst, int64_t *bytes, char *err, size_t cap)
{
	tgt_t *t = o->t;
	pthread_mutex_t *lock = &t->put_locks[name_hash(o) % TGT_PUT_LOCKS];
	tgt_obj_t d = *o;
	ft_lom_t slom, dlom;
	char work[64] = "";
	ino_t ino;
	int rc;

	d.mp = dst;
	pthread_mutex_lock(lock);
	rc = lom_at(o->mp, o->rel, &slom, &ino);
	if (rc == -ENOENT) {
		rc = 1;
		goto out;
	}
	if (rc != 0) {
		snprintf(err, cap, "on %s: %s, left in place", o->mp->path,
			 rc == -EBADMSG || rc == -ENODATA ? "damaged (metadata or size)" : strerror(-rc));
		rc = -1;
		goto out;
	}
	if (lom_at(dst, o->rel, &dlom, NULL) == 0 && dlom.mtime_ns >= slom.mtime_ns) {
		unlinkat(o->mp->root_fd, o->rel, 0); /* superseded by the copy already in place */
		tgt_parent_prune(o->mp, o->rel);
		rc = 0;
		goto out;
	}
	snprintf(work, sizeof(work), "rb.local.%llu", (unsigned long long)atomic_fetch_add(&xfer_counter, 1));
	if (renameat(o->mp->root_fd, o->rel, dst->work_fd, work) != 0) {
		if (errno != EXDEV) {
			snprintf(err, cap, "rename to %s: %s", dst->path, strerror(errno));
			work[0] = '\0';
			rc = -1;
			goto out;
		}
		int fd = openat(o->mp->root_fd, o->rel, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0) {
			snprintf(err, cap, "open: %s", strerror(errno));
			work[0] = '\0';
			rc = -1;
			goto out;
		}
		rc = copy_to_work(t, fd, &slom, dst, work, sizeof(work), err, cap);
		close(fd);
		if (rc != 0) {
			rc = -1;
			goto out;
		}
		rc = publish_locked(&d, work);
		if (rc == 0) {
			unlinkat(o->mp->root_fd, o->rel, 0);
			tgt_parent_prune(o->mp, o->rel);
		}
	} else {
		rc = publish_locked(&d, work);
		if (rc != 0 && rc != -ESTALE) {
			/* Back where it was; if even that fails, the work file is kept (never deleted here). */
			if (renameat(dst->work_fd, work, o->mp->root_fd, o->rel) != 0)
				ft_error("resilver: %s stays in %s/%s/%s: %s", o->rel, dst->path, TGT_WORK_DIR, work,
					 strerror(errno));
			work[0] = '\0';
		}
		if (rc == 0)
			tgt_parent_prune(o->mp, o->rel);
	}
	if (rc != 0) {
		snprintf(err, cap, "publish on %s: %s", dst->path, rc == -ESTALE ? "bucket destroyed" : strerror(-rc));
		if (work[0])
			unlinkat(dst->work_fd, work, 0);
		rc = rc == -ESTALE ? 1 : -1;
		goto out;
	}
	*bytes = (int64_t)slom.size;
out:
	pthread_mutex_unlock(lock);
	if (rc == 0)
		tgt_list_bump(t, o->provider, o->bucket);
	return rc;
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
	(void)arg;
	(void)dt;
	(void)dn;
	(void)ut;
	(void)un;
	return atomic_load(&rb.stopping); /* non-zero aborts the transfer: the daemon is stopping */
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
		return h;
	}
	h = curl_easy_init();
	if (h && pthread_setspecific(curl_key, h) != 0) {
		curl_easy_cleanup(h);
		h = NULL;
	}
	return h;
}

/* PUT body to url. 0 with *status and msg (the JSON "message" or "result"), or -1 with msg. */
static int http_put(const char *url, const void *body, size_t len, long *status, char *msg, size_t cap)
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
static char *obj_url(const char *base, const char *what, const tgt_obj_t *o, const char *extra)
{
	char *b = ft_url_escape_query(o->bucket), *n = ft_url_escape_query(o->obj), *url = NULL;

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
	ft_bmd_t *bmd = ft_bmd_current();
	int64_t bmd_v = bmd ? bmd->version : 0;

	ft_bmd_put(bmd);
	if (!buf || enc_len < 0) {
		snprintf(err, cap, "out of memory or metadata too large");
		goto out;
	}
	snprintf(xfer, sizeof(xfer), "%016" PRIx64 ".%d.%llu", ft_hrw_digest(o->t->id), (int)getpid(),
		 (unsigned long long)atomic_fetch_add(&xfer_counter, 1));
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
		char *url = obj_url(dest_url, "obj", o, extra);
		long status = 0;
		if (!url) {
			snprintf(err, cap, "out of memory");
			goto abort;
		}
		int hrc;
		for (int busy = 0;; busy++) {
			hrc = http_put(url, buf, pre + (size_t)n, &status, msg, sizeof(msg));
			if (hrc != 0 || status != 503 || busy >= RB_BUSY_TRIES || atomic_load(&rb.stopping))
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
		char *url = obj_url(dest_url, "obj", o, "");
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
 * Moves o (on o->mp) to the target at dest_url: sends it, then deletes the local copy (and its
 * mirror copies) if it is still the version sent. 0 when moved, 1 when o is not here, -1 with err.
 */
static int send_move(tgt_obj_t *o, const char *dest_url, int64_t smap_v, int64_t *bytes, char *err, size_t cap)
{
	tgt_t *t = o->t;
	uint64_t h = name_hash(o);
	pthread_mutex_t *mlock = &move_locks[h % RB_MOVE_LOCKS];
	pthread_mutex_t *plock = &t->put_locks[h % TGT_PUT_LOCKS];
	int rc = -1;

	pthread_once(&move_once, move_locks_init);
	pthread_mutex_lock(mlock);
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
		/* Delivered: remove this copy unless a PUT replaced it meanwhile (then send again). */
		pthread_mutex_lock(plock);
		int same = lom_at(o->mp, o->rel, &now, &ino) == 0 && ino == st.st_ino && same_version(&now, &lom);
		if (same) {
			unlinkat(o->mp->root_fd, o->rel, 0);
			tgt_parent_prune(o->mp, o->rel);
		}
		pthread_mutex_unlock(plock);
		if (same) {
			tgt_mirror_delete(o);
			tgt_list_bump(t, o->provider, o->bucket);
			*bytes = (int64_t)lom.size;
			rc = 0;
			break;
		}
		snprintf(err, cap, "changed while being sent %d times", attempt + 1);
	}
	pthread_mutex_unlock(mlock);
	return rc;
}

/* ---- the per-object step ---- */

int tgt_rebalance_job_obj(tgt_obj_t *o, int64_t *bytes, char *err, size_t cap)
{
	tgt_t *t = o->t;
	ft_smap_t *smap = ft_smap_current();
	const ft_node_t *owner = smap ? ft_smap_owner(smap, o->provider, o->bucket, o->obj, o->obj_len) : NULL;
	int rc;

	*bytes = 0;
	if (!owner) {
		rc = 1;
	} else if (strcmp(owner->id, t->id) != 0) {
		rc = send_move(o, owner->control_url, smap->version, bytes, err, cap);
		if (rc < 0) {
			char tmp[300];
			snprintf(tmp, sizeof(tmp), "to %s: %s", owner->id, err);
			snprintf(err, cap, "%s", tmp);
		}
	} else {
		const tgt_mountpath_t *dst = tgt_mountpath_pick(t, o->provider, o->bucket, o->obj, o->obj_len);
		rc = dst == o->mp ? 1 : local_move(o, dst, bytes, err, cap);
	}
	ft_smap_put(smap);
	return rc;
}

/* ---- the walker ---- */

typedef struct {
	int src;    /* index in run_t.srcs */
	int bucket; /* index in run_t.bmd->buckets */
	char *name; /* owned */
} item_t;

typedef struct {
	tgt_t *t;
	const tgt_mountpath_t **srcs;
	int n_src;
	ft_bmd_t *bmd;
	ft_smap_t *smap;
	item_t *items;
	size_t n, cap;
	atomic_size_t next;
	int gen; /* -1: not abortable (only stop ends it) */
	int oom;
	size_t on_src[FT_MAX_MOUNTPATHS]; /* items found per source */
} run_t;

static int run_aborted(const run_t *r)
{
	if (atomic_load(&rb.stopping))
		return 1;
	return r->gen >= 0 && atomic_load(&rb.gen) != r->gen;
}

/* Whether name (of bucket b, found on srcs[src]) is placed elsewhere now. */
static int misplaced(const run_t *r, int src, const ft_bucket_t *b, const char *name, size_t len)
{
	const ft_node_t *owner = ft_smap_owner(r->smap, b->provider, b->name, name, len);

	if (owner && strcmp(owner->id, r->t->id) != 0)
		return 1;
	return tgt_mountpath_pick(r->t, b->provider, b->name, name, len) != r->srcs[src];
}

static void collect(run_t *r, int dfd, char *name, size_t len, int src, int bucket)
{
	DIR *d = fdopendir(dfd);
	struct dirent *de;

	if (!d) {
		close(dfd);
		return;
	}
	while (!r->oom && (de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		size_t leaf = strlen(de->d_name), sep = len ? 1 : 0;
		if (len + sep + leaf > FT_OBJ_NAME_MAX)
			continue;
		if (sep)
			name[len] = '/';
		memcpy(name + len + sep, de->d_name, leaf + 1);
		struct stat st;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
			if (S_ISDIR(st.st_mode)) {
				int sub = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
				if (sub >= 0)
					collect(r, sub, name, len + sep + leaf, src, bucket);
			} else if (S_ISREG(st.st_mode)) {
				atomic_fetch_add(&rb.scanned, 1);
				if (misplaced(r, src, &r->bmd->buckets[bucket], name, len + sep + leaf)) {
					if (r->n == r->cap) {
						size_t cap = r->cap ? r->cap * 2 : 1024;
						item_t *v = realloc(r->items, cap * sizeof(*v));
						if (!v) {
							r->oom = 1;
							break;
						}
						r->items = v;
						r->cap = cap;
					}
					item_t *it = &r->items[r->n];
					it->src = src;
					it->bucket = bucket;
					it->name = strdup(name);
					if (!it->name) {
						r->oom = 1;
						break;
					}
					r->n++;
					r->on_src[src]++;
				}
			}
		}
		name[len] = '\0';
	}
	closedir(d);
}

static void *mover_main(void *arg)
{
	run_t *r = arg;
	char err[400];

	for (;;) {
		if (run_aborted(r))
			break;
		size_t i = atomic_fetch_add(&r->next, 1);
		if (i >= r->n)
			break;
		item_t *it = &r->items[i];
		const ft_bucket_t *b = &r->bmd->buckets[it->bucket];
		tgt_obj_t o;
		int64_t bytes = 0;
		if (obj_init(&o, r->t, b, r->srcs[it->src], it->name) != 0)
			continue;
		err[0] = '\0';
		int rc = tgt_rebalance_job_obj(&o, &bytes, err, sizeof(err));
		if (rc == 0) {
			atomic_fetch_add(&rb.objects, 1);
			atomic_fetch_add(&rb.bytes, bytes);
		} else if (rc < 0) {
			char what[FT_BUCKET_NAME_MAX + FT_OBJ_NAME_MAX + 8];
			snprintf(what, sizeof(what), "%s/%s", b->name, it->name);
			note_error(what, err);
		}
	}
	return NULL;
}

/*
 * Walks srcs and moves what is misplaced. gen: the generation this walk belongs to (-1: it cannot
 * be aborted by a newer request, only by the daemon stopping). Returns 0 when complete, 1 when aborted.
 */
static int walk_and_move(tgt_t *t, const tgt_mountpath_t **srcs, int n_src, int gen)
{
	char rel[TGT_REL_MAX], name[FT_OBJ_NAME_MAX + 1];
	run_t r = {.t = t, .srcs = srcs, .n_src = n_src, .gen = gen};
	pthread_t th[RB_THREADS];
	int n_th = 0, aborted;

	r.bmd = ft_bmd_current();
	r.smap = ft_smap_current();
	if (!r.bmd || !r.smap)
		goto done;
	for (int s = 0; s < n_src && !r.oom && !run_aborted(&r); s++) {
		for (int b = 0; b < r.bmd->n && !r.oom; b++) {
			const ft_bucket_t *bk = &r.bmd->buckets[b];
			if (tgt_rel_path(rel, sizeof(rel), bk->provider, bk->name, NULL) != 0)
				continue;
			int fd = openat(srcs[s]->root_fd, rel, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (fd < 0)
				continue;
			name[0] = '\0';
			collect(&r, fd, name, 0, s, b);
		}
	}
	if (r.oom)
		note_error("walk", "out of memory: the walk is incomplete");
	atomic_store(&rb.total, (long long)r.n);
	for (int i = 0; i < RB_THREADS && r.n > 0; i++)
		if (pthread_create(&th[n_th], NULL, mover_main, &r) == 0)
			n_th++;
	if (r.n > 0 && n_th == 0)
		mover_main(&r);
	for (int i = 0; i < n_th; i++)
		pthread_join(th[i], NULL);
done:
	aborted = run_aborted(&r) || r.oom;
	for (size_t i = 0; i < r.n; i++)
		free(r.items[i].name);
	free(r.items);
	ft_bmd_put(r.bmd);
	ft_smap_put(r.smap);
	return aborted;
}

/* Objects still stored on mp (for a detach: what the walk could not move). */
static size_t count_objects(tgt_t *t, const tgt_mountpath_t *mp)
{
	char rel[TGT_REL_MAX], name[FT_OBJ_NAME_MAX + 1];
	const tgt_mountpath_t *srcs[1] = {mp};
	/* A run whose placement test always says "misplaced": nothing on a detached mountpath stays. */
	run_t r = {.t = t, .srcs = srcs, .n_src = 1, .gen = -1};
	size_t n = 0;

	r.bmd = ft_bmd_current();
	r.smap = ft_smap_current();
	for (int b = 0; r.bmd && r.smap && b < r.bmd->n && !r.oom; b++) {
		const ft_bucket_t *bk = &r.bmd->buckets[b];
		if (tgt_rel_path(rel, sizeof(rel), bk->provider, bk->name, NULL) != 0)
			continue;
		int fd = openat(mp->root_fd, rel, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			continue;
		name[0] = '\0';
		collect(&r, fd, name, 0, 0, b);
	}
	n = r.n + (size_t)r.oom;
	for (size_t i = 0; i < r.n; i++)
		free(r.items[i].name);
	free(r.items);
	ft_bmd_put(r.bmd);
	ft_smap_put(r.smap);
	return n;
}

/* Detaches slot after a complete walk: seal, sweep what was published meanwhile, close. */
static void finish_detach(tgt_t *t, int slot)
{
	tgt_mountpath_t *mp = &t->mountpaths[slot];
	tgt_mountpath_t real;
	const tgt_mountpath_t *srcs[1];
	size_t left = count_objects(t, mp);

	if (left > 0) { /* moves failed (no space, damaged objects): try once more, else keep it */
		srcs[0] = mp;
		walk_and_move(t, srcs, 1, -1);
		left = count_objects(t, mp);
	}
	if (left > 0) {
		char msg[256];
		snprintf(msg, sizeof(msg), "%zu objects could not be moved away: the mountpath stays attached", left);
		note_error(mp->path, msg);
		tgt_mountpath_detach_abort(t, slot);
		return;
	}
	int rc = tgt_mountpath_detach_seal(t, slot, &real);
	if (rc != 0) {
		note_error(mp->path, strerror(-rc));
		tgt_mountpath_detach_abort(t, slot);
		return;
	}
	srcs[0] = &real;
	walk_and_move(t, srcs, 1, -1);
	left = count_objects(t, &real);
	if (left > 0) {
		char msg[256];
		snprintf(msg, sizeof(msg),
			 "%zu objects stored during the detach could not be moved and stay on disk, not served", left);
		note_error(real.path, msg);
	}
	tgt_mountpath_detach_end(t, slot, &real);
}

/* One run: walk every live mountpath, then finish the detaches asked for. */
static void run_once(tgt_t *t, int gen, const int *detach)
{
	const tgt_mountpath_t *srcs[FT_MAX_MOUNTPATHS];
	int n = 0, aborted;

	for (int i = 0; i < t->n_mountpaths; i++) {
		int st = tgt_mountpath_slot_state(t, i);
		if (st == 0 || st == 1) /* active or detaching */
			srcs[n++] = &t->mountpaths[i];
	}
	aborted = walk_and_move(t, srcs, n, gen);
	for (int i = 0; i < FT_MAX_MOUNTPATHS && !aborted; i++) {
		if (!detach[i])
			continue;
		finish_detach(t, i);
		pthread_mutex_lock(&rb.lock);
		rb.detach_pending[i] = 0;
		pthread_mutex_unlock(&rb.lock);
	}
	pthread_mutex_lock(&rb.lock);
	rb.end_ns = ft_now_ns();
	atomic_store(&rb.state, aborted ? ST_ABORTED : ST_FINISHED);
	pthread_mutex_unlock(&rb.lock);
	ft_info("%s %s: %s, %lld objects scanned, %lld misplaced, %lld moved (%lld bytes), %lld errors", rb.kind, rb.id,
		aborted ? "aborted (a newer change restarts it)" : "finished", (long long)atomic_load(&rb.scanned),
		(long long)atomic_load(&rb.total), (long long)atomic_load(&rb.objects),
		(long long)atomic_load(&rb.bytes), (long long)atomic_load(&rb.errors));
}

static void *manager_main(void *arg)
{
	tgt_t *t = arg;
	int detach[FT_MAX_MOUNTPATHS];

	pthread_mutex_lock(&rb.lock);
	for (;;) {
		while (!rb.stop && !rb.want_walk)
			pthread_cond_wait(&rb.cond, &rb.lock);
		if (rb.stop)
			break;
		rb.want_walk = 0;
		int gen = atomic_load(&rb.gen);
		memcpy(detach, rb.detach_pending, sizeof(detach));
		snprintf(rb.id, sizeof(rb.id), "%s", rb.want_id);
		snprintf(rb.kind, sizeof(rb.kind), "%s", rb.want_kind);
		snprintf(rb.mode, sizeof(rb.mode), "local");
		rb.note[0] = '\0';
		rb.n_samples = 0;
		rb.start_ns = ft_now_ns();
		rb.end_ns = 0;
		atomic_store(&rb.scanned, 0);
		atomic_store(&rb.total, 0);
		atomic_store(&rb.objects, 0);
		atomic_store(&rb.bytes, 0);
		atomic_store(&rb.errors, 0);
		atomic_store(&rb.state, ST_RUNNING);
		pthread_mutex_unlock(&rb.lock);
		ft_info("%s %s: started", rb.kind, rb.id);
		run_once(t, gen, detach);
		pthread_mutex_lock(&rb.lock);
	}
	pthread_mutex_unlock(&rb.lock);
	return NULL;
}

/* Asks the manager for a walk (rb.lock held); starts it on first use. */
static void request_walk_locked(tgt_t *t, const char *kind, const char *id)
{
	snprintf(rb.want_kind, sizeof(rb.want_kind), "%s", kind);
	snprintf(rb.want_id, sizeof(rb.want_id), "%s", id);
	rb.want_walk = 1;
	atomic_fetch_add(&rb.gen, 1);
	if (!rb.thread_running && !rb.stop) {
		if (pthread_create(&rb.thread, NULL, manager_main, t) == 0)
			rb.thread_running = 1;
		else
			ft_error("rebalance: cannot start its thread");
	}
	pthread_cond_signal(&rb.cond);
}

/* Starts a rebalance for the current map: as a local job when the job framework takes it, else here. */
static void start_rebalance(tgt_t *t, int64_t version)
{
	char id[RB_ID_MAX];

	snprintf(id, sizeof(id), "rebalance-%lld", (long long)version);
	if (tgt_jobs_start_local(t, id, "rebalance", tgt_rebalance_job_obj, NULL, NULL) == 0) {
		pthread_mutex_lock(&rb.lock);
		snprintf(rb.id, sizeof(rb.id), "%s", id);
		snprintf(rb.kind, sizeof(rb.kind), "rebalance");
		snprintf(rb.mode, sizeof(rb.mode), "job");
		atomic_store(&rb.state, ST_IDLE); /* the job table has its state */
		rb.start_ns = ft_now_ns();
		pthread_mutex_unlock(&rb.lock);
		ft_info("rebalance %s: started as a job (GET /v1/jobs/%s)", id, id);
		return;
	}
	pthread_mutex_lock(&rb.lock);
	request_walk_locked(t, "rebalance", id);
	pthread_mutex_unlock(&rb.lock);
}

void tgt_rebalance_smap_changed(tgt_t *t, const ft_smap_t *prev, const ft_smap_t *cur)
{
	pthread_mutex_lock(&rb.lock);
	if (prev) {
		ft_smap_put(rb.hist[RB_HISTORY - 1]);
		memmove(&rb.hist[1], &rb.hist[0], (RB_HISTORY - 1) * sizeof(rb.hist[0]));
		rb.hist[0] = (ft_smap_t *)prev; /* only its reference count changes */
		ft_smap_get(rb.hist[0]);
	}
	rb.last_change_ns = ft_now_ns();
	int disabled = rb.disabled, stopping = rb.stop;
	if (disabled)
		rb.missed = 1;
	pthread_mutex_unlock(&rb.lock);
	ft_info("Smap v%lld: the set of targets changed (%d -> %d targets)%s", (long long)cur->version,
		prev ? prev->n_targets : 0, cur->n_targets, disabled ? ", rebalance disabled" : "");
	if (!disabled && !stopping)
		start_rebalance(t, cur->version);
}

/* ---- pull: a GET missed on the owner ---- */

/* Whether remote targets may still hold objects this one owns (a map change not long ago). */
static int pull_window_open(void)
{
	pthread_mutex_lock(&rb.lock);
	int open = rb.last_change_ns > 0 && ft_now_ns() - rb.last_change_ns < RB_PULL_WINDOW_NS;
	open = open || atomic_load(&rb.state) == ST_RUNNING;
	pthread_mutex_unlock(&rb.lock);
	return open;
}

/* Asks the target at url to move o here now. 0 moved, -ENOENT not there, another -errno with err. */
static int ask_send(tgt_t *t, const tgt_obj_t *o, const char *url, int64_t smap_v, char *err, size_t cap)
{
	char extra[FT_ID_MAX + FT_URL_MAX + 96], msg[256];
	char *me = ft_url_escape_query(t->id), *my_url = ft_url_escape_query(t->control_url);
	json_t *resp = NULL;
	long status = 0;
	int rc = -ENOMEM;

	if (me && my_url) {
		snprintf(extra, sizeof(extra), "&to=%s&url=%s&smap=%lld", me, my_url, (long long)smap_v);
		char *u = obj_url(url, "send", o, extra);
		if (u && ft_client_json("POST", u, NULL, RB_ASK_MS, &status, &resp, msg, sizeof(msg)) != 0) {
			snprintf(err, cap, "%s: %s", url, msg);
			rc = -EIO;
		} else if (u) {
			const char *m = json_string_value(json_object_get(resp, "message"));
			rc = status == 200 ? 0 : status == 404 ? -ENOENT : -EIO;
			if (rc == -EIO)
				snprintf(err, cap, "%s: HTTP %ld: %s", url, status, m ? m : "");
		}
		free(u);
	}
	json_decref(resp);
	free(me);
	free(my_url);
	return rc;
}

/* Control URLs to ask for o: next targets in HRW order now, then the owners in earlier maps. */
static int pull_candidates(tgt_t *t, const tgt_obj_t *o, char urls[][FT_URL_MAX], int max, int64_t *smap_v)
{
	ft_smap_t *cur = ft_smap_current();
	char ids[RB_RANKED + RB_HISTORY][FT_ID_MAX];
	int n = 0;

	*smap_v = cur ? cur->version : 0;
	if (cur && cur->n_targets > 0) {
		uint64_t h = name_hash(o);
		uint64_t *d = malloc((size_t)cur->n_targets * sizeof(*d));
		int *map = malloc((size_t)cur->n_targets * sizeof(*map));
		int left = cur->n_targets;
		for (int i = 0; d && map && i < left; i++) {
			d[i] = cur->target_digests[i];
			map[i] = i;
		}
		for (int rank = 0; d && map && left > 0 && n < max && rank < RB_RANKED + 1; rank++) {
			int k = ft_hrw_pick(h, d, left);
			const ft_node_t *node = &cur->targets[map[k]];
			d[k] = d[left - 1];
			map[k] = map[left - 1];
			left--;
			if (strcmp(node->id, t->id) == 0)
				continue;
			snprintf(ids[n], FT_ID_MAX, "%s", node->id);
			snprintf(urls[n++], FT_URL_MAX, "%s", node->control_url);
		}
		free(d);
		free(map);
	}
	pthread_mutex_lock(&rb.lock);
	for (int i = 0; i < RB_HISTORY && n < max; i++) {
		const ft_node_t *owner =
			rb.hist[i] ? ft_smap_owner(rb.hist[i], o->provider, o->bucket, o->obj, o->obj_len) : NULL;
		int dup = !owner || strcmp(owner->id, t->id) == 0;
		for (int j = 0; j < n && !dup; j++)
			dup = strcmp(ids[j], owner->id) == 0;
		if (dup)
			continue;
		snprintf(ids[n], FT_ID_MAX, "%s", owner->id);
		snprintf(urls[n++], FT_URL_MAX, "%s", owner->control_url);
	}
	pthread_mutex_unlock(&rb.lock);
	ft_smap_put(cur);
	return n;
}

int tgt_rebalance_pull(tgt_obj_t *o, char *err, size_t cap)
{
	tgt_t *t = o->t;
	const tgt_mountpath_t *dst = tgt_mountpath_pick(t, o->provider, o->bucket, o->obj, o->obj_len);
	char urls[RB_RANKED + RB_HISTORY][FT_URL_MAX], lerr[300] = "";
	struct stat st;
	int64_t bytes, smap_v;
	int rc = -ENOENT;

	err[0] = '\0';
	/* Another local mountpath (resilver not done yet). */
	for (int i = 0; i < t->n_mountpaths; i++) {
		const tgt_mountpath_t *mp = &t->mountpaths[i];
		int state = tgt_mountpath_slot_state(t, i);
		if (mp == dst || state < 0 || state > 1)
			continue;
		if (fstatat(mp->root_fd, o->rel, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
			continue;
		tgt_obj_t src = *o;
		src.mp = mp;
		if (local_move(&src, dst, &bytes, lerr, sizeof(lerr)) == 0) {
			o->mp = dst;
			atomic_fetch_add(&rb.pulled, 1);
			return 0;
		}
	}
	if (!pull_window_open())
		return -ENOENT;
	int n = pull_candidates(t, o, urls, RB_RANKED + RB_HISTORY, &smap_v);
	for (int i = 0; i < n; i++) {
		int r = ask_send(t, o, urls[i], smap_v, lerr, sizeof(lerr));
		if (r == 0 && fstatat(dst->root_fd, o->rel, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode)) {
			o->mp = dst;
			atomic_fetch_add(&rb.pulled, 1);
			ft_debug("pull %s/%s from %s", o->bucket, o->obj, urls[i]);
			return 0;
		}
		if (r != 0 && r != -ENOENT) {
			snprintf(err, cap, "%s", lerr);
			rc = r;
		}
	}
	/* A walker may have delivered it while we asked. */
	if (fstatat(dst->root_fd, o->rel, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode)) {
		o->mp = dst;
		return 0;
	}
	atomic_fetch_add(&rb.pull_misses, 1);
	return rc;
}

/* ---- control port ---- */

static int query_i64(const ft_ctl_req_t *req, const char *key, int64_t *out)
{
	const char *v = ft_ctl_query(req, key);
	char *end = NULL;

	if (!v || !*v)
		return -1;
	errno = 0;
	long long x = strtoll(v, &end, 10);
	if (errno != 0 || *end != '\0' || x < 0)
		return -1;
	*out = x;
	return 0;
}

/*
 * The object named by the query (provider, bucket, obj), its bucket in the current BMD; o->mp is
 * the mountpath it belongs on here. 0, or -1 after answering 400/404. The name lives in req.
 */
static int query_obj(tgt_t *t, const ft_ctl_req_t *req, ft_ctl_resp_t *resp, tgt_obj_t *o)
{
	const char *provider = ft_ctl_query(req, "provider"), *bucket = ft_ctl_query(req, "bucket");
	const char *obj = ft_ctl_query(req, "obj"), *why = NULL;
	ft_backend_provider_t bp;

	if (!provider || !bucket || !obj) {
		ft_ctl_error(resp, 400, "%s needs provider, bucket and obj", req->path);
		return -1;
	}
	if (strcmp(provider, "ais") != 0 &&
	    (ft_backend_provider_parse(provider, &bp) != 0 || strcmp(ft_backend_provider_name(bp), provider) != 0)) {
		ft_ctl_error(resp, 400, "unknown provider \"%s\"", provider);
		return -1;
	}
	if (ft_name_check_bucket(bucket, &why) != 0 || ft_name_check_object(obj, strlen(obj), &why) != 0) {
		ft_ctl_error(resp, 400, "invalid name: %s", why ? why : "not allowed");
		return -1;
	}
	ft_bmd_t *bmd = ft_bmd_current();
	const ft_bucket_t *b = bmd ? ft_bmd_find(bmd, provider, bucket) : NULL;
	int rc = b ? obj_init(o, t, b, NULL, obj) : -1;
	int64_t mine = bmd ? bmd->version : 0, peer = 0;
	ft_bmd_put(bmd);
	if (!b && query_i64(req, "bmd", &peer) == 0 && peer > mine) {
		ft_ctl_error(resp, 503, "bucket %s/%s: target %s holds BMD v%lld, the sender v%lld: retry", provider,
			     bucket, t->id, (long long)mine, (long long)peer);
		return -1;
	}
	if (!b) {
		ft_ctl_error(resp, 404, "bucket %s/%s does not exist on target %s", provider, bucket, t->id);
		return -1;
	}
	if (rc != 0) {
		ft_ctl_error(resp, 400, "object name too long");
		return -1;
	}
	o->mp = tgt_mountpath_pick(t, o->provider, o->bucket, o->obj, o->obj_len);
	return 0;
}

/* Refuses (409) to take or give away o when this target owns it in a map at least as new as peer_v. */
static int ownership_conflict(tgt_t *t, const tgt_obj_t *o, int64_t peer_v, int want_owner, ft_ctl_resp_t *resp)
{
	ft_smap_t *m = ft_smap_current();
	const ft_node_t *owner = m ? ft_smap_owner(m, o->provider, o->bucket, o->obj, o->obj_len) : NULL;
	int conflict = 0;

	if (owner && m->version >= peer_v && (strcmp(owner->id, t->id) == 0) != want_owner) {
		ft_ctl_error(resp, 409, "object %s/%s: owner in Smap v%lld is %s", o->bucket, o->obj,
			     (long long)m->version, owner->id);
		conflict = 1;
	}
	ft_smap_put(m);
	return conflict;
}

static int xfer_ok(const char *x)
{
	size_t n = x ? strlen(x) : 0;

	if (n == 0 || n >= RB_XFER_MAX || x[0] == '.')
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!((x[i] >= 'a' && x[i] <= 'z') || (x[i] >= 'A' && x[i] <= 'Z') || (x[i] >= '0' && x[i] <= '9') ||
		      x[i] == '.' || x[i] == '-' || x[i] == '_'))
			return 0;
	return 1;
}

/* Last chunk: verify, set the metadata, publish unless a newer copy is here. */
static void receive_finish(tgt_t *t, tgt_obj_t *o, int fd, char *work, const ft_lom_t *lom, ft_ctl_resp_t *resp)
{
	pthread_mutex_t *lock = &t->put_locks[name_hash(o) % TGT_PUT_LOCKS];
	char hex[FT_CKSUM_HEX_MAX], perr[256];
	ft_lom_t here;
	int rc = 0;

	if (lom->cksum_type != FT_CKSUM_NONE) {
		rc = file_cksum(fd, lom->size, lom->cksum_type, hex);
		if (rc == 0 && strcmp(hex, lom->cksum) != 0) {
			ft_ctl_error(resp, 422,
				     "object %s/%s: checksum mismatch (got %s, metadata says %s): not stored",
				     o->bucket, o->obj, hex, lom->cksum);
			return;
		}
	}
	if (rc == 0)
		rc = sync_fd(t, fd);
	if (rc == 0)
		rc = ft_lom_fset(fd, lom);
	if (rc != 0) {
		ft_ctl_error(resp, 500, "object %s/%s: %s", o->bucket, o->obj, strerror(-rc));
		return;
	}
	pthread_mutex_lock(lock);
	if (lom_at(o->mp, o->rel, &here, NULL) == 0 && here.mtime_ns >= lom->mtime_ns) {
		pthread_mutex_unlock(lock);
		resp->status = 200;
		resp->json = json_pack("{s:s}", "result", "kept");
		return; /* the caller removes the work file */
	}
	rc = publish_locked(o, work);
	if (rc == 0 && tgt_put_protect(o, lom, perr, sizeof(perr)) != 0)
		ft_warn("rebalance: %s/%s stored, but not with the bucket's redundancy: %s", o->bucket, o->obj, perr);
	pthread_mutex_unlock(lock);
	if (rc != 0) {
		ft_ctl_error(resp, rc == -ESTALE ? 404 : 409, "object %s/%s: cannot publish: %s", o->bucket, o->obj,
			     rc == -ESTALE ? "bucket destroyed" : strerror(-rc));
		return;
	}
	tgt_list_bump(t, o->provider, o->bucket);
	resp->status = 200;
	resp->json = json_pack("{s:s}", "result", "stored");
}

/* PUT /v1/rebalance/obj: one chunk of an object sent by another target. */
static void receive_chunk(tgt_t *t, const ft_ctl_req_t *req, ft_ctl_resp_t *resp)
{
	const char *xfer = ft_ctl_query(req, "xfer");
	int64_t off, total, lom_len, peer_v = 0;
	char work[RB_XFER_MAX + 8];
	ft_lom_t lom;
	tgt_obj_t o;
	struct stat st;

	if (query_obj(t, req, resp, &o) != 0)
		return;
	if (!xfer_ok(xfer) || query_i64(req, "offset", &off) != 0 || query_i64(req, "total", &total) != 0 ||
	    query_i64(req, "lom", &lom_len) != 0) {
		ft_ctl_error(resp, 400, "rebalance transfer needs xfer ([A-Za-z0-9._-]), offset, total and lom");
		return;
	}
	query_i64(req, "smap", &peer_v);
	size_t body = req->body_len;
	if ((uint64_t)lom_len > body || lom_len > FT_LOM_MAX ||
	    (uint64_t)off + (body - (size_t)lom_len) > (uint64_t)total) {
		ft_ctl_error(resp, 400,
			     "rebalance chunk of %zu bytes (metadata %lld) does not fit at offset %lld of %lld", body,
			     (long long)lom_len, (long long)off, (long long)total);
		return;
	}
	size_t dlen = body - (size_t)lom_len;
	int last = (uint64_t)off + dlen == (uint64_t)total;
	if (last && (lom_len == 0 || ft_lom_decode(&lom, (const uint8_t *)req->body, (size_t)lom_len) != 0 ||
		     lom.size != (uint64_t)total)) {
		ft_ctl_error(resp, 400, "object %s/%s: last chunk without valid metadata of %lld bytes", o.bucket,
			     o.obj, (long long)total);
		return;
	}
	if (off == 0 && ownership_conflict(t, &o, peer_v, 1, resp))
		return;
	snprintf(work, sizeof(work), "rb.%s", xfer);
	int fd = openat(o.mp->work_fd, work, O_RDWR | O_CLOEXEC | (off == 0 ? O_CREAT | O_TRUNC : 0), 0644);
	if (fd < 0) {
		ft_ctl_error(resp, errno == ENOENT ? 409 : 500, "transfer %s: %s", xfer,
			     errno == ENOENT ? "unknown (start again at offset 0)" : strerror(errno));
		return;
	}
	if (fstat(fd, &st) != 0 || (uint64_t)st.st_size != (uint64_t)off) {
		ft_ctl_error(resp, 409, "transfer %s: have %lld bytes, chunk at offset %lld", xfer,
			     (long long)st.st_size, (long long)off);
		goto drop;
	}
	const char *p = req->body ? req->body + lom_len : "";
	for (size_t done = 0; done < dlen;) {
		ssize_t n = pwrite(fd, p + done, dlen - done, (off_t)((uint64_t)off + done));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			int e = n < 0 ? errno : EIO;
			ft_ctl_error(resp, e == ENOSPC || e == EDQUOT ? 507 : 500, "transfer %s: write: %s", xfer,
				     strerror(e));
			goto drop;
		}
		done += (size_t)n;
	}
	if (!last) {
		close(fd);
		resp->status = 200;
		resp->json = json_pack("{s:s}", "result", "partial");
		return;
	}
	receive_finish(t, &o, fd, work, &lom, resp);
drop:
	close(fd);
	if (work[0])
		unlinkat(o.mp->work_fd, work, 0);
}

/* DELETE /v1/rebalance/obj?...&xfer=: the sender gave up; drop the partial work file. */
static void receive_abort(tgt_t *t, const ft_ctl_req_t *req, ft_ctl_resp_t *resp)
{
	const char *xfer = ft_ctl_query(req, "xfer");
	char work[RB_XFER_MAX + 8];
	tgt_obj_t o;

	if (query_obj(t, req, resp, &o) != 0)
		return;
	if (!xfer_ok(xfer)) {
		ft_ctl_error(resp, 400, "xfer missing or invalid");
		return;
	}
	snprintf(work, sizeof(work), "rb.%s", xfer);
	unlinkat(o.mp->work_fd, work, 0);
	resp->status = 200;
}

/* POST /v1/rebalance/send?...&to=ID&url=CTL&smap=V: move an object to the target asking for it. */
static void send_for_peer(tgt_t *t, const ft_ctl_req_t *req, ft_ctl_resp_t *resp)
{
	const char *to = ft_ctl_query(req, "to"), *url = ft_ctl_query(req, "url");
	char err[400] = "", dest[FT_URL_MAX];
	int64_t peer_v = 0, bytes = 0;
	tgt_obj_t o;
	struct stat st;

	if (query_obj(t, req, resp, &o) != 0)
		return;
	query_i64(req, "smap", &peer_v);
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
		if (state >= 0 && state <= 1 &&
		    fstatat(t->mountpaths[i].root_fd, o.rel, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode))
			found = &t->mountpaths[i];
	}
	if (!found) {
		ft_ctl_error(resp, 404, "object %s/%s is not on target %s", o.bucket, o.obj, t->id);
		return;
	}
	if (ownership_conflict(t, &o, peer_v, 0, resp))
		return;
	o.mp = found;
	int rc = send_move(&o, dest, peer_v, &bytes, err, sizeof(err));
	if (rc == 1) {
		ft_ctl_error(resp, 404, "object %s/%s is not on target %s", o.bucket, o.obj, t->id);
	} else if (rc < 0) {
		ft_ctl_error(resp, 502, "object %s/%s: %s", o.bucket, o.obj, err);
	} else {
		resp->status = 200;
		resp->json = json_pack("{s:s, s:I}", "result", "sent", "bytes", (json_int_t)bytes);
	}
}

typedef struct {
	tgt_obj_t o;
	char name[FT_OBJ_NAME_MAX + 1]; /* o.obj points here */
} pull_req_t;

static atomic_int pulls_running; /* pull_now threads; tgt_rebalance_fini waits for them */

static void *pull_main(void *arg)
{
	pull_req_t *p = arg;
	char err[400] = "";
	int rc = tgt_rebalance_pull(&p->o, err, sizeof(err));

	if (rc == 0)
		ft_info("pull %s/%s: stored here", p->o.bucket, p->name);
	else if (rc == -ENOENT)
		ft_info("pull %s/%s: no target has it", p->o.bucket, p->name);
	else
		note_error(p->name, err);
	free(p);
	atomic_fetch_sub(&pulls_running, 1);
	return NULL;
}

/*
 * POST /v1/rebalance/pull?provider=&bucket=&obj=: what a GET miss does, on demand. Answers 202 and
 * pulls on a thread of its own: the object comes in through this same control server, whose
 * thread must not be the one waiting for it. Outcome: the object appears, or "pull_misses" grows.
 */
static void pull_now(tgt_t *t, const ft_ctl_req_t *req, ft_ctl_resp_t *resp)
{
	pthread_attr_t attr;
	pthread_t th;
	pull_req_t *p;
	struct stat st;
	tgt_obj_t o;

	if (query_obj(t, req, resp, &o) != 0)
		return;
	if (fstatat(o.mp->root_fd, o.rel, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode)) {
		resp->status = 200;
		resp->json = json_pack("{s:s}", "result", "present");
		return;
	}
	p = malloc(sizeof(*p));
	if (!p) {
		ft_ctl_error(resp, 500, "out of memory");
		return;
	}
	p->o = o;
	snprintf(p->name, sizeof(p->name), "%s", o.obj);
	p->o.obj = p->name;
	atomic_fetch_add(&pulls_running, 1);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	int rc = atomic_load(&rb.stopping) ? EAGAIN : pthread_create(&th, &attr, pull_main, p);
	pthread_attr_destroy(&attr);
	if (rc != 0) {
		atomic_fetch_sub(&pulls_running, 1);
		free(p);
		ft_ctl_error(resp, 503, "cannot start a pull now: %s", strerror(rc));
		return;
	}
	resp->status = 202;
	resp->json = json_pack("{s:s}", "result", "started");
}

static json_t *status_json(tgt_t *t)
{
	json_t *samples = json_array();

	pthread_mutex_lock(&rb.lock);
	for (int i = 0; i < rb.n_samples; i++)
		json_array_append_new(samples, json_string(rb.samples[i]));
	int st = atomic_load(&rb.state);
	json_t *j = json_pack(
		"{s:s, s:s, s:s, s:s, s:s, s:b, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:o}", "node", t->id, "id", rb.id,
		"kind", rb.kind[0] ? rb.kind : "rebalance", "mode", rb.mode[0] ? rb.mode : "local", "state",
		state_names[st], "enabled", !rb.disabled, "scanned", (json_int_t)atomic_load(&rb.scanned), "misplaced",
		(json_int_t)atomic_load(&rb.total), "objects", (json_int_t)atomic_load(&rb.objects), "bytes",
		(json_int_t)atomic_load(&rb.bytes), "errors", (json_int_t)atomic_load(&rb.errors), "start",
		(json_int_t)rb.start_ns, "end", (json_int_t)rb.end_ns, "error_samples", samples);
	if (j) {
		json_object_set_new(j, "pulled", json_integer((json_int_t)atomic_load(&rb.pulled)));
		json_object_set_new(j, "pull_misses", json_integer((json_int_t)atomic_load(&rb.pull_misses)));
	}
	if (j && strcmp(rb.mode, "job") == 0)
		json_object_set_new(j, "job", json_string(rb.id));
	pthread_mutex_unlock(&rb.lock);
	return j;
}

/* POST /v1/rebalance {"action": "start" | "enable" | "disable"}. */
static void rebalance_action(tgt_t *t, const ft_ctl_req_t *req, ft_ctl_resp_t *resp)
{
	json_t *msg = req->body ? json_loadb(req->body, req->body_len, 0, NULL) : NULL;
	const char *action = json_string_value(json_object_get(msg, "action"));
	int start = 0;

	if (!action) {
		ft_ctl_error(resp, 400, "expected {\"action\": \"start\" | \"enable\" | \"disable\"}");
		goto out;
	}
	pthread_mutex_lock(&rb.lock);
	if (strcmp(action, "disable") == 0) {
		rb.disabled = 1;
	} else if (strcmp(action, "enable") == 0) {
		rb.disabled = 0;
		start = rb.missed;
		rb.missed = 0;
	} else if (strcmp(action, "start") == 0) {
		start = 1;
		rb.missed = 0;
	} else {
		pthread_mutex_unlock(&rb.lock);
		ft_ctl_error(resp, 400, "unknown action \"%s\" (start, enable, disable)", action);
		goto out;
	}
	pthread_mutex_unlock(&rb.lock);
	if (start) {
		ft_smap_t *m = ft_smap_current();
		start_rebalance(t, m ? m->version : 0);
		ft_smap_put(m);
	}
	resp->status = 200;
	resp->json = status_json(t);
out:
	json_decref(msg);
}

static const char *mp_state_name(int st)
{
	return st == 0 ? "active" : st == 1 ? "detaching" : "detached";
}

static json_t *mountpaths_json(tgt_t *t)
{
	json_t *list = json_array();
	int n = __atomic_load_n(&t->n_mountpaths, __ATOMIC_ACQUIRE);

	for (int i = 0; i < n; i++) {
		int st = tgt_mountpath_slot_state(t, i);
		if (st == 2)
			continue;
		json_array_append_new(
			list, json_pack("{s:s, s:s}", "path", t->mountpaths[i].path, "state", mp_state_name(st)));
	}
	return json_pack("{s:s, s:o, s:o}", "node", t->id, "mountpaths", list, "resilver", status_json(t));
}

/* POST /v1/mountpaths {"action": "attach" | "detach", "path": "/abs/dir"}. */
static void mountpath_action(tgt_t *t, const ft_ctl_req_t *req, ft_ctl_resp_t *resp)
{
	json_t *msg = req->body ? json_loadb(req->body, req->body_len, 0, NULL) : NULL;
	const char *action = json_string_value(json_object_get(msg, "action"));
	const char *path = json_string_value(json_object_get(msg, "path"));
	char err[512] = "", id[RB_ID_MAX];
	static atomic_int seq;
	int rc;

	if (!action || !path) {
		ft_ctl_error(resp, 400, "expected {\"action\": \"attach\" | \"detach\", \"path\": \"/dir\"}");
		goto out;
	}
	snprintf(id, sizeof(id), "resilver-%d", atomic_fetch_add(&seq, 1) + 1);
	if (strcmp(action, "attach") == 0) {
		rc = tgt_mountpath_attach(t, path, err, sizeof(err));
		if (rc < 0) {
			ft_ctl_error(resp, rc == -EINVAL ? 400 : rc == -EEXIST || rc == -ENOSPC ? 409 : 500, "%s", err);
			goto out;
		}
		ft_info("mountpath %s attached: resilver %s", path, id);
		pthread_mutex_lock(&rb.lock);
		request_walk_locked(t, "resilver", id);
		pthread_mutex_unlock(&rb.lock);
		resp->status = 200;
	} else if (strcmp(action, "detach") == 0) {
		rc = tgt_mountpath_detach_begin(t, path, err, sizeof(err));
		if (rc < 0) {
			ft_ctl_error(resp, rc == -ENOENT ? 404 : rc == -EBUSY || rc == -EPERM ? 409 : 500, "%s", err);
			goto out;
		}
		ft_info("mountpath %s detaching: resilver %s moves its objects away", path, id);
		pthread_mutex_lock(&rb.lock);
		rb.detach_pending[rc] = 1;
		request_walk_locked(t, "resilver", id);
		pthread_mutex_unlock(&rb.lock);
		resp->status = 202;
	} else {
		ft_ctl_error(resp, 400, "unknown action \"%s\" (attach, detach)", action);
		goto out;
	}
	resp->json = mountpaths_json(t);
	if (resp->json)
		json_object_set_new(resp->json, "resilver_id", json_string(id));
out:
	json_decref(msg);
}

void tgt_rebalance_ctl(tgt_t *t, const ft_ctl_req_t *req, ft_ctl_resp_t *resp)
{
	const char *p = req->path, *m = req->method;

	if (strcmp(p, "/v1/rebalance") == 0) {
		if (strcmp(m, "GET") == 0) {
			resp->status = 200;
			resp->json = status_json(t);
		} else if (strcmp(m, "POST") == 0) {
			rebalance_action(t, req, resp);
		} else {
			ft_ctl_error(resp, 405, "method %s not allowed on %s (use GET, POST)", m, p);
		}
	} else if (strcmp(p, "/v1/rebalance/obj") == 0) {
		if (strcmp(m, "PUT") == 0)
			receive_chunk(t, req, resp);
		else if (strcmp(m, "DELETE") == 0)
			receive_abort(t, req, resp);
		else
			ft_ctl_error(resp, 405, "method %s not allowed on %s (use PUT, DELETE)", m, p);
	} else if (strcmp(p, "/v1/rebalance/send") == 0 || strcmp(p, "/v1/rebalance/pull") == 0) {
		if (strcmp(m, "POST") != 0)
			ft_ctl_error(resp, 405, "method %s not allowed on %s (use POST)", m, p);
		else if (p[14] == 's')
			send_for_peer(t, req, resp);
		else
			pull_now(t, req, resp);
	} else if (strcmp(p, "/v1/mountpaths") == 0) {
		if (strcmp(m, "GET") == 0) {
			resp->status = 200;
			resp->json = mountpaths_json(t);
		} else if (strcmp(m, "POST") == 0) {
			mountpath_action(t, req, resp);
		} else {
			ft_ctl_error(resp, 405, "method %s not allowed on %s (use GET, POST)", m, p);
		}
	} else {
		ft_ctl_error(resp, 404, "no such control endpoint: %s %s", m, p);
	}
}

void tgt_rebalance_fini(tgt_t *t)
{
	(void)t;
	pthread_mutex_lock(&rb.lock);
	rb.stop = 1;
	atomic_store(&rb.stopping, 1);
	atomic_fetch_add(&rb.gen, 1);
	int running = rb.thread_running;
	rb.thread_running = 0;
	pthread_cond_signal(&rb.cond);
	pthread_mutex_unlock(&rb.lock);
	if (running)
		pthread_join(rb.thread, NULL);
	while (atomic_load(&pulls_running) > 0)
		usleep(10000);
	pthread_mutex_lock(&rb.lock);
	for (int i = 0; i < RB_HISTORY; i++) {
		ft_smap_put(rb.hist[i]);
		rb.hist[i] = NULL;
	}
	pthread_mutex_unlock(&rb.lock);
}
