/* SPDX-License-Identifier: Apache-2.0 */
/* GetBatch's pull from one owner target: its items' part (POST /v1/batch?part=true) read into a bounded ring. */
#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "auth/auth.h"
#include "auth/jwt.h"
#include "base/log.h"
#include "base/strbuf.h"
#include "base/tarhdr.h"
#include "cluster/local.h"
#include "rpc/client.h"
#include "shard/shard.h"

/*
 * DESIGN
 * One thread per owner runs one libcurl POST and copies the answer's bytes into a ring of
 * TGT_BATCH_PULL_RING bytes; the write callback blocks while the ring is full, so the owner is
 * held back by TCP (never buffered here) when the assembler is slower. The assembler takes bytes
 * out in order (tgt_batch_pull_read). The thread owns the curl handle; the ring, the state and
 * the error are shared under mu. When the exchange ends, badly or not, done is set: a reader that
 * finds the ring empty then gets the error (or "ended early"), so a cut owner stream is never
 * taken for a short one.
 *
 * An owner on this machine (ft_local_path: same host id in the map) is reached on its public Unix
 * socket, which speaks plain HTTP even in a TLS cluster: curl connects to the path
 * (CURLOPT_UNIX_SOCKET_PATH) at an http:// URL, and the prereq callback checks the peer
 * (ft_local_peer_ok, as ft_local_dial does) before anything is sent: the cluster token never goes
 * to a socket of another user. (libcurl 7.88 connects a socket handed over as connected anyway,
 * so ft_local_dial's socket cannot be given to curl.) If the socket cannot be had after all (the
 * owner restarted, its backlog is full, the peer is not ours), the pull asks again at the owner's
 * own URL over TCP, with TLS when https: no byte of the request was sent yet.
 *
 * Cancelling wakes the write callback (cv) and shuts down the sockets curl holds (socks, kept by
 * the open and close callbacks under mu, so a socket is never touched after curl closed it): a
 * transfer waiting on the network ends at once. The progress callback still aborts what has no
 * socket yet (name resolution).
 */

#define TOKEN_S 600       /* lifetime of the cluster token of a pull */
#define CONNECT_MS 10000L /* connecting to the owner */
#define STALL_S 300L      /* an owner sending nothing for this long fails the pull */
#define ERRBODY_MAX 512   /* bytes of a non-200 answer kept for the error */
#define CURL_BUF (128 * 1024)
#define PULL_GONE_MS 100 /* a reader waiting for the part looks this often whether the batch's client is gone */
#define PULL_SOCKS 2     /* sockets a cancel reaches: curl holds one per address family while connecting */

struct tgt_batch_pull {
	pthread_t th;
	bool th_live; /* th runs (join it) */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	CURL *curl;
	struct curl_slist *hdrs;
	char *url, *plain_url, *body; /* owned; plain_url: http:// for the Unix socket */
	size_t body_len;
	char unix_path[sizeof(((struct sockaddr_un *)0)->sun_path)]; /* the owner's Unix socket, when via_unix */
	bool via_unix;                                               /* pull thread: this transfer goes to unix_path */
	bool unix_refused;     /* pull thread: the prereq callback refused the Unix socket's peer */
	int unix_fd;           /* pull thread: the Unix socket curl holds, or -1 */
	int socks[PULL_SOCKS]; /* under mu: the sockets curl holds, -1 for none (cancel shuts them down) */
	uint8_t *ring;
	size_t head, fill; /* under mu: read position, bytes held */
	bool done, cancel; /* under mu */
	bool failed;       /* under mu: the exchange failed (err says why) */
	char err[256];     /* under mu once done */
	ft_strbuf_t errbody;
	char owner[64];
};

/* Appends "Authorization: Bearer <cluster token>" when auth is on (the owner's /v1/batch needs one). */
static struct curl_slist *cluster_auth(struct curl_slist *l)
{
	const ft_auth_t *a = ft_auth();
	ft_principal_t p = {.sub = "cluster", .role = FT_ROLE_ADMIN};
	time_t now = time(NULL);
	char *tok, *line;

	if (!a->enabled || (tok = ft_jwt_issue(a->jwt_key, &p, now, now + TOKEN_S)) == NULL)
		return l;
	if (asprintf(&line, "Authorization: Bearer %s", tok) >= 0) {
		l = curl_slist_append(l, line);
		free(line);
	}
	free(tok);
	return l;
}

/* curl write callback (the pull's thread): into the ring, waiting while it is full. */
static size_t on_data(char *data, size_t size, size_t nmemb, void *arg)
{
	tgt_batch_pull_t *p = arg;
	size_t n = size * nmemb, left = n;
	long status = 0;

	curl_easy_getinfo(p->curl, CURLINFO_RESPONSE_CODE, &status);
	if (status != 200) {
		if (p->errbody.len < ERRBODY_MAX)
			ft_strbuf_add(&p->errbody, data, n < ERRBODY_MAX ? n : ERRBODY_MAX);
		return n;
	}
	pthread_mutex_lock(&p->mu);
	while (left > 0) {
		while (p->fill == TGT_BATCH_PULL_RING && !p->cancel)
			pthread_cond_wait(&p->cv, &p->mu);
		if (p->cancel)
			break;
		size_t tail = (p->head + p->fill) % TGT_BATCH_PULL_RING;
		size_t k = TGT_BATCH_PULL_RING - p->fill;
		if (k > TGT_BATCH_PULL_RING - tail)
			k = TGT_BATCH_PULL_RING - tail;
		if (k > left)
			k = left;
		memcpy(p->ring + tail, data, k);
		data += k;
		left -= k;
		p->fill += k;
		pthread_cond_broadcast(&p->cv);
	}
	bool cancel = p->cancel;
	pthread_mutex_unlock(&p->mu);
	return cancel ? 0 : n;
}

/* curl progress callback: nonzero aborts the exchange once the pull is cancelled. */
static int on_progress(void *arg, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
	tgt_batch_pull_t *p = arg;

	(void)dt, (void)dn, (void)ut, (void)un;
	pthread_mutex_lock(&p->mu);
	bool cancel = p->cancel;
	pthread_mutex_unlock(&p->mu);
	return cancel;
}

/* Marks p cancelled and wakes whatever waits in it: the callback, the reader, the network. Under p->mu. */
static void cancel_locked(tgt_batch_pull_t *p)
{
	p->cancel = true;
	pthread_cond_broadcast(&p->cv);
	for (int i = 0; i < PULL_SOCKS; i++)
		if (p->socks[i] >= 0)
			shutdown(p->socks[i], SHUT_RDWR); /* curl sees the end at once, then closes it */
}

/*
 * curl open-socket callback (the pull's thread): a socket of address (the owner's Unix socket when
 * via_unix) for curl to connect, kept in socks for a cancel. CURL_SOCKET_BAD once cancelled.
 */
static curl_socket_t on_open(void *arg, curlsocktype purpose, struct curl_sockaddr *address)
{
	tgt_batch_pull_t *p = arg;
	int fd, slot;
	bool keep;

	(void)purpose;
	fd = socket(address->family, address->socktype | SOCK_CLOEXEC, address->protocol);
	if (fd < 0)
		return CURL_SOCKET_BAD;
	pthread_mutex_lock(&p->mu);
	for (slot = 0; slot < PULL_SOCKS && p->socks[slot] >= 0; slot++)
		;
	keep = !p->cancel;
	if (keep && slot < PULL_SOCKS) /* else untracked: the progress callback still ends it within a second */
		p->socks[slot] = fd;
	pthread_mutex_unlock(&p->mu);
	if (!keep) {
		close(fd);
		return CURL_SOCKET_BAD;
	}
	if (address->family == AF_UNIX)
		p->unix_fd = fd;
	return fd;
}

/* curl prereq callback (connected, nothing sent): a Unix socket's peer must be one of ours. */
static int on_prereq(void *arg, char *primary_ip, char *local_ip, int primary_port, int local_port)
{
	tgt_batch_pull_t *p = arg;

	(void)primary_ip, (void)local_ip, (void)primary_port, (void)local_port;
	if (p->via_unix && (p->unix_fd < 0 || !ft_local_peer_ok(p->unix_fd))) {
		p->unix_refused = true;
		return CURL_PREREQFUNC_ABORT;
	}
	return CURL_PREREQFUNC_OK;
}

/* curl close-socket callback: forgets fd (under mu, so a cancel never shuts down a closed number), then closes it. */
static int on_close(void *arg, curl_socket_t fd)
{
	tgt_batch_pull_t *p = arg;

	pthread_mutex_lock(&p->mu);
	for (int i = 0; i < PULL_SOCKS; i++)
		if (p->socks[i] == fd)
			p->socks[i] = -1;
	pthread_mutex_unlock(&p->mu);
	if (fd == p->unix_fd)
		p->unix_fd = -1;
	return close(fd);
}

static void *pull_main(void *arg)
{
	tgt_batch_pull_t *p = arg;
	char errbuf[CURL_ERROR_SIZE] = "";
	long status = 0;
	CURLcode cc = curl_easy_perform(p->curl);

	pthread_mutex_lock(&p->mu);
	bool cancel = p->cancel;
	pthread_mutex_unlock(&p->mu);
	if (p->via_unix && !cancel && (cc == CURLE_COULDNT_CONNECT || p->unix_refused)) {
		/* the owner's socket cannot be had (gone since the lookup, a full backlog, not ours): nothing was sent */
		ft_log(p->unix_refused ? FT_LOG_WARN : FT_LOG_DEBUG,
		       "batch: part from %s: its Unix socket %s %s; over %s instead", p->owner, p->unix_path,
		       p->unix_refused ? "is not one of ours" : "cannot be reached",
		       strncmp(p->url, "https", 5) == 0 ? "TLS" : "TCP");
		p->via_unix = false;
		curl_easy_setopt(p->curl, CURLOPT_UNIX_SOCKET_PATH, NULL);
		curl_easy_setopt(p->curl, CURLOPT_URL, p->url);
		cc = curl_easy_perform(p->curl);
	}
	curl_easy_getinfo(p->curl, CURLINFO_RESPONSE_CODE, &status);
	pthread_mutex_lock(&p->mu);
	if (cc != CURLE_OK) {
		snprintf(errbuf, sizeof(errbuf), "%s", curl_easy_strerror(cc));
		snprintf(p->err, sizeof(p->err), "the part from %s failed: %s", p->owner, errbuf);
		p->failed = true;
	} else if (status != 200) {
		int k = (int)(p->errbody.len < 160 ? p->errbody.len : 160);
		snprintf(p->err, sizeof(p->err), "the part from %s: %ld %.*s", p->owner, status, k,
			 p->errbody.p ? p->errbody.p : "");
		p->failed = true;
	}
	p->done = true;
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

/* Sets up p's curl handle for the POST. 0, or -1 when out of memory. */
static int pull_setup(tgt_batch_pull_t *p)
{
	p->curl = curl_easy_init();
	p->hdrs = cluster_auth(curl_slist_append(NULL, "Content-Type: application/json"));
	if (p->curl == NULL || p->hdrs == NULL)
		return -1;
	curl_easy_setopt(p->curl, CURLOPT_URL, p->via_unix ? p->plain_url : p->url);
	if (p->via_unix)
		curl_easy_setopt(p->curl, CURLOPT_UNIX_SOCKET_PATH, p->unix_path);
	curl_easy_setopt(p->curl, CURLOPT_POST, 1L);
	curl_easy_setopt(p->curl, CURLOPT_POSTFIELDS, p->body);
	curl_easy_setopt(p->curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)p->body_len);
	curl_easy_setopt(p->curl, CURLOPT_HTTPHEADER, p->hdrs);
	curl_easy_setopt(p->curl, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(p->curl, CURLOPT_WRITEDATA, p);
	curl_easy_setopt(p->curl, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(p->curl, CURLOPT_XFERINFOFUNCTION, on_progress);
	curl_easy_setopt(p->curl, CURLOPT_XFERINFODATA, p);
	curl_easy_setopt(p->curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(p->curl, CURLOPT_PROXY,
			 ""); /* never an http_proxy of the environment: it would get the token */
	curl_easy_setopt(p->curl, CURLOPT_CONNECTTIMEOUT_MS, CONNECT_MS);
	curl_easy_setopt(p->curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
	curl_easy_setopt(p->curl, CURLOPT_LOW_SPEED_TIME, STALL_S);
	curl_easy_setopt(p->curl, CURLOPT_BUFFERSIZE, (long)CURL_BUF);
	curl_easy_setopt(p->curl, CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_1_1);
	curl_easy_setopt(p->curl, CURLOPT_EXPECT_100_TIMEOUT_MS, 0L);
	curl_easy_setopt(p->curl, CURLOPT_OPENSOCKETFUNCTION, on_open);
	curl_easy_setopt(p->curl, CURLOPT_OPENSOCKETDATA, p);
	curl_easy_setopt(p->curl, CURLOPT_PREREQFUNCTION, on_prereq);
	curl_easy_setopt(p->curl, CURLOPT_PREREQDATA, p);
	curl_easy_setopt(p->curl, CURLOPT_CLOSESOCKETFUNCTION, on_close);
	curl_easy_setopt(p->curl, CURLOPT_CLOSESOCKETDATA, p);
	ft_client_tls_apply(p->curl); /* an https owner: the cluster's CA (tls_ca) */
	return 0;
}

tgt_batch_pull_t *tgt_batch_pull_start(const char *owner, const char *public_url, char *body, size_t len, char *err,
				       size_t cap)
{
	tgt_batch_pull_t *p = calloc(1, sizeof(*p));
	const char *hp;
	char hostport[FT_URL_MAX];
	bool https = strncmp(public_url, "https://", 8) == 0;

	if (p == NULL) {
		free(body);
		snprintf(err, cap, "out of memory");
		return NULL;
	}
	p->body = body;
	p->body_len = len;
	snprintf(p->owner, sizeof(p->owner), "%s", owner);
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->cv, NULL);
	p->unix_fd = -1;
	for (int i = 0; i < PULL_SOCKS; i++)
		p->socks[i] = -1;
	hp = public_url + (https ? 8 : strncmp(public_url, "http://", 7) == 0 ? 7 : 0);
	snprintf(hostport, sizeof(hostport), "%.*s", (int)strcspn(hp, "/"), hp);
	p->via_unix = ft_local_path(hostport, https, p->unix_path, sizeof(p->unix_path));
	if (asprintf(&p->url, "%s/v1/batch?part=true", public_url) < 0)
		p->url = NULL;
	if (asprintf(&p->plain_url, "http://%s/v1/batch?part=true", hostport) < 0)
		p->plain_url = NULL;
	p->ring = malloc(TGT_BATCH_PULL_RING);
	if (p->url == NULL || p->plain_url == NULL || p->ring == NULL || pull_setup(p) != 0) {
		snprintf(err, cap, "out of memory");
		goto fail;
	}
	if (pthread_create(&p->th, NULL, pull_main, p) != 0) {
		snprintf(err, cap, "cannot start a thread for the part from %s", owner);
		goto fail;
	}
	p->th_live = true;
	return p;
fail:
	tgt_batch_pull_free(p);
	return NULL;
}

void tgt_batch_pull_cancel(tgt_batch_pull_t *p)
{
	pthread_mutex_lock(&p->mu);
	cancel_locked(p);
	pthread_mutex_unlock(&p->mu);
}

/* Waits (under p->mu) for bytes or the end of the part: 0, or -ECONNRESET once r's client is gone. */
static int wait_fill(tgt_batch_pull_t *p, ft_req_t *r)
{
	while (p->fill == 0 && !p->done && !p->cancel) {
		struct timespec until;
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_nsec += PULL_GONE_MS * 1000000L;
		if (until.tv_nsec >= 1000000000L) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000L;
		}
		if (pthread_cond_timedwait(&p->cv, &p->mu, &until) == ETIMEDOUT && ft_req_gone(r))
			cancel_locked(p);
	}
	return p->fill == 0 && p->cancel ? -ECONNRESET : 0;
}

int tgt_batch_pull_read(tgt_batch_pull_t *p, ft_req_t *r, void *buf, size_t len, char *err, size_t cap)
{
	uint8_t *out = buf;
	int rc = 0;

	pthread_mutex_lock(&p->mu);
	while (len > 0) {
		if ((rc = wait_fill(p, r)) != 0) {
			snprintf(err, cap, "the client left");
			break;
		}
		if (p->fill == 0) {
			snprintf(err, cap, "%s", p->failed ? p->err : "the part ended early");
			rc = -EIO;
			break;
		}
		size_t k = p->fill < len ? p->fill : len;
		if (k > TGT_BATCH_PULL_RING - p->head)
			k = TGT_BATCH_PULL_RING - p->head;
		memcpy(out, p->ring + p->head, k);
		out += k;
		len -= k;
		p->head = (p->head + k) % TGT_BATCH_PULL_RING;
		p->fill -= k;
		pthread_cond_broadcast(&p->cv);
	}
	pthread_mutex_unlock(&p->mu);
	return rc;
}

int tgt_batch_pull_member(tgt_batch_pull_t *p, ft_req_t *r, size_t *index, int *status, uint64_t *size, char *err,
			  size_t cap)
{
	uint8_t h[512];
	unsigned long long idx;
	int st, used = 0, rc;

	if ((rc = tgt_batch_pull_read(p, r, h, sizeof(h), err, cap)) != 0)
		return rc;
	if (!ft_tar_checksum_ok(h) || ft_tar_num(h + 124, 12, size) != 0 || memcmp(h + 257, "ustar", 5) != 0 ||
	    memchr(h, 0, 100) == NULL || sscanf((const char *)h, "%llu.%d%n", &idx, &st, &used) != 2 || h[used] != 0) {
		snprintf(err, cap, "the part from %s is not a batch part (bad member header)", p->owner);
		return -EIO;
	}
	*index = (size_t)idx;
	*status = st;
	return 0;
}

void tgt_batch_pull_free(tgt_batch_pull_t *p)
{
	if (p == NULL)
		return;
	pthread_mutex_lock(&p->mu);
	cancel_locked(p);
	pthread_mutex_unlock(&p->mu);
	if (p->th_live)
		pthread_join(p->th, NULL);
	if (p->curl != NULL)
		curl_easy_cleanup(p->curl);
	curl_slist_free_all(p->hdrs);
	ft_strbuf_free(&p->errbody);
	pthread_cond_destroy(&p->cv);
	pthread_mutex_destroy(&p->mu);
	free(p->ring);
	free(p->url);
	free(p->plain_url);
	free(p->body);
	free(p);
}
