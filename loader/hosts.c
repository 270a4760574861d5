/* SPDX-License-Identifier: Apache-2.0 */
/* ft-loader host table: host:port endpoints resolved once, indexed for the per-thread connection pools. */
#include <netdb.h>
#include <stdio.h>
#include <string.h>

#include "loader.h"

/*
 * Entries are written completely before the count is published (release), so readers scan
 * [0, count) without a lock; additions (rare: a redirect to a host not seen before) take mu.
 */
static ld_host_t hosts[LD_MAX_HOSTS];
static atomic_int n_hosts;
static pthread_mutex_t hosts_mu = PTHREAD_MUTEX_INITIALIZER;

static int find(const char *auth, size_t len, bool tls)
{
	int n = atomic_load_explicit(&n_hosts, memory_order_acquire);

	for (int i = 0; i < n; i++) {
		if (hosts[i].tls == tls && strlen(hosts[i].authority) == len &&
		    memcmp(hosts[i].authority, auth, len) == 0)
			return i;
	}
	return -1;
}

/* Resolves "host:port" / "[v6]:port" / "host" into h. Returns 0 or -1. */
static int resolve(ld_host_t *h, const char *auth, size_t len, bool tls, char *err, size_t errlen)
{
	char *host = h->name, port[8];
	const char *colon;
	struct addrinfo hints, *res = NULL;
	int rc;

	if (memchr(auth, '@', len) != NULL) { /* never repeated: it would print the password */
		snprintf(err, errlen, "bad host: user information (user:password@) in a URL is not supported");
		return -1;
	}
	if (len == 0 || len >= LD_AUTH_MAX) {
		snprintf(err, errlen, "bad host \"%.*s\"", (int)(len > 200 ? 200 : len), auth);
		return -1;
	}
	memcpy(h->authority, auth, len);
	h->authority[len] = '\0';
	h->tls = tls;
	snprintf(port, sizeof(port), "%s", tls ? "443" : "80");
	if (auth[0] == '[') {
		const char *close = memchr(auth, ']', len);
		if (close == NULL)
			goto bad;
		memcpy(host, auth + 1, (size_t)(close - auth - 1));
		host[close - auth - 1] = '\0';
		colon = close + 1 < auth + len && close[1] == ':' ? close + 1 : NULL;
	} else {
		colon = memrchr(auth, ':', len);
		size_t hl = colon != NULL ? (size_t)(colon - auth) : len;
		memcpy(host, auth, hl);
		host[hl] = '\0';
	}
	if (colon != NULL) {
		size_t pl = (size_t)(auth + len - colon - 1);
		if (pl == 0 || pl >= sizeof(port))
			goto bad;
		memcpy(port, colon + 1, pl);
		port[pl] = '\0';
	}
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	rc = getaddrinfo(host, port, &hints, &res);
	if (rc != 0) {
		snprintf(err, errlen, "cannot resolve \"%s\": %s", h->authority, gai_strerror(rc));
		return -1;
	}
	/* prefer IPv4: "localhost" may list ::1 first while the daemons bind 127.0.0.1 */
	struct addrinfo *pick = res;
	for (struct addrinfo *a = res; a != NULL; a = a->ai_next) {
		if (a->ai_family == AF_INET) {
			pick = a;
			break;
		}
	}
	memcpy(&h->addr, pick->ai_addr, pick->ai_addrlen);
	h->addrlen = pick->ai_addrlen;
	freeaddrinfo(res);
	return 0;
bad:
	snprintf(err, errlen, "bad host \"%s\"", h->authority);
	return -1;
}

/* Adds h unless its authority is there already; returns the index or -1 when the table is full. */
static int insert(const ld_host_t *h, const char *authority, size_t len, char *err, size_t errlen)
{
	int i;

	pthread_mutex_lock(&hosts_mu);
	i = find(authority, len, h->tls);
	if (i < 0) {
		int n = atomic_load_explicit(&n_hosts, memory_order_relaxed);
		if (n == LD_MAX_HOSTS) {
			snprintf(err, errlen, "more than %d distinct hosts", LD_MAX_HOSTS);
		} else {
			hosts[n] = *h;
			atomic_store_explicit(&n_hosts, n + 1, memory_order_release);
			i = n;
		}
	}
	pthread_mutex_unlock(&hosts_mu);
	return i;
}

int ld_host_get(const char *authority, size_t len, bool tls, char *err, size_t errlen)
{
	int i = find(authority, len, tls);
	ld_host_t h;

	if (i >= 0)
		return i;
	if (resolve(&h, authority, len, tls, err, errlen) != 0)
		return -1;
	return insert(&h, authority, len, err, errlen);
}

int ld_host_alias(const char *authority, size_t len, int like, char *err, size_t errlen)
{
	ld_host_t h = hosts[like]; /* its address, TLS and certificate name: only Host differs */
	int i = find(authority, len, h.tls);

	if (i >= 0)
		return i;
	if (len >= LD_AUTH_MAX) {
		snprintf(err, errlen, "host name too long");
		return -1;
	}
	memcpy(h.authority, authority, len);
	h.authority[len] = '\0';
	return insert(&h, authority, len, err, errlen);
}

const ld_host_t *ld_host_at(int index)
{
	return &hosts[index];
}

int ld_host_count(void)
{
	return atomic_load_explicit(&n_hosts, memory_order_acquire);
}

int ld_url_split(const char *url, const char **auth, size_t *auth_len, const char **path, bool *tls)
{
	const char *a, *slash;

	*tls = false;
	if (url[0] == '/') {
		*auth = NULL;
		*auth_len = 0;
		*path = url;
		return 0;
	}
	if (strncasecmp(url, "http://", 7) == 0) {
		a = url + 7;
	} else if (strncasecmp(url, "https://", 8) == 0) {
		a = url + 8;
		*tls = true;
	} else {
		return -1;
	}
	slash = a + strcspn(a, "/?#");
	if (slash == a)
		return -1;
	*auth = a;
	*auth_len = (size_t)(slash - a);
	*path = *slash == '/' ? slash : (*slash == '\0' ? "/" : NULL);
	return *path != NULL ? 0 : -1;
}
