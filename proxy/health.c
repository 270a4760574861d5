/* SPDX-License-Identifier: Apache-2.0 */
/* Target failure detection at the proxy: connect probes and relays' reports take a dead target out of the map fast. */
#include "proxy.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"
#include "base/metrics.h"
#include "http/util.h"

/*
 * DESIGN
 * Keepalives find a silent target only after three intervals (6 s by default); until then the proxy
 * redirects and relays to it, and every request for an object it owns fails. Two faster signals:
 *
 * - A probe thread opens a TCP connection to every target's control port each probe_interval_ms,
 *   all at once, and waits at most one interval for the answers. A refused connection (the process
 *   is gone: nothing listens on the port) takes the target out at once; PX_PROBE_MISSES
 *   unanswered rounds in a row (a dead or cut-off host) take it out too. So a killed process is out
 *   within one interval (250 ms by default), a lost host within PX_PROBE_MISSES intervals.
 * - A relay that cannot connect to a target calls px_target_unreachable, which confirms with one
 *   probe of its own and takes the target out the same way, before the relay retries the request
 *   on the object's new owner.
 *
 * Taking out = px_cluster_remove: a new map without the target, persisted, installed and pushed to
 * every node. down_lock is held across the whole of it, so a caller that returns (or waited behind
 * another caller) knows every live node holds the new map: a request retried then reaches a
 * target that agrees it is the owner. The new owner rebuilds the object from EC slices or replicas
 * (target/obj/get.c); rebalance starts as for any map change. A target that comes back joins again.
 *
 * A target that answers the connect is alive, whatever its public port did: no probe ever takes out
 * a target that accepts connections.
 *
 * Several proxies (docs/multi-proxy.md): only the primary probes and takes targets out; a relay on
 * another proxy that cannot connect waits (up to PX_FOLLOWER_WAIT_MS) for the primary's new map to
 * arrive without the target, then retries as above.
 */

#define PX_PROBE_MISSES 3
#define PX_PROBE_CONFIRM_MS 300  /* px_target_unreachable's own probe */
#define PX_FOLLOWER_WAIT_MS 2000 /* several proxies: how long a follower waits for the primary to drop a target */

enum { PROBE_ALIVE = 0, PROBE_REFUSED, PROBE_SILENT };

typedef struct {
	char id[FT_ID_MAX];
	char url[FT_URL_MAX];
	int fd;
	int result;
} probe_t;

static pthread_mutex_t down_lock = PTHREAD_MUTEX_INITIALIZER;

/* Starts a non-blocking connect to the host:port of url ("http://host:port"); the fd, or -1 (refused at once). */
static int probe_start(const char *url, int *result)
{
	char host[FT_HOST_MAX], port[16];
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV}, *ai = NULL;
	const char *h = strstr(url, "://"), *colon;
	int fd = -1;

	*result = PROBE_SILENT;
	h = h != NULL ? h + 3 : url;
	colon = strrchr(h, ':');
	if (colon == NULL || (size_t)(colon - h) >= sizeof(host) || strlen(colon + 1) >= sizeof(port))
		return -1;
	memcpy(host, h, (size_t)(colon - h));
	host[colon - h] = '\0';
	snprintf(port, sizeof(port), "%s", colon + 1);
	if (host[0] == '[' && host[strlen(host) - 1] == ']') { /* [v6] */
		memmove(host, host + 1, strlen(host));
		host[strlen(host) - 1] = '\0';
	}
	if (getaddrinfo(host, port, &hints, &ai) != 0 || ai == NULL)
		return -1;
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) != 0 && errno != EINPROGRESS) {
		*result = errno == ECONNREFUSED || errno == ENETUNREACH || errno == EHOSTUNREACH ? PROBE_REFUSED
												 : PROBE_SILENT;
		close(fd);
		fd = -1;
	} else if (fd >= 0) {
		*result = -1; /* pending */
	}
	freeaddrinfo(ai);
	return fd;
}

/* Probes every p[i] at once, waiting at most timeout_ms; fills p[i].result. */
static void probe_all(probe_t *p, int n, int timeout_ms)
{
	struct pollfd *pf = calloc((size_t)(n > 0 ? n : 1), sizeof(*pf));
	int64_t deadline = ft_mono_ms() + timeout_ms;
	int pending = 0;

	if (pf == NULL)
		return;
	for (int i = 0; i < n; i++) {
		p[i].fd = probe_start(p[i].url, &p[i].result);
		pf[i].fd = p[i].fd;
		pf[i].events = POLLOUT;
		pending += p[i].fd >= 0;
	}
	while (pending > 0) {
		int64_t left = deadline - ft_mono_ms();
		if (left <= 0 || poll(pf, (nfds_t)n, (int)left) <= 0)
			break;
		for (int i = 0; i < n; i++) {
			int err = 0;
			socklen_t len = sizeof(err);
			if (pf[i].fd < 0 || pf[i].revents == 0)
				continue;
			getsockopt(pf[i].fd, SOL_SOCKET, SO_ERROR, &err, &len);
			p[i].result = err == 0 ? PROBE_ALIVE : err == ECONNREFUSED ? PROBE_REFUSED : PROBE_SILENT;
			pf[i].fd = -1; /* poll ignores it from now on */
			pending--;
		}
	}
	for (int i = 0; i < n; i++) {
		if (p[i].result < 0)
			p[i].result = PROBE_SILENT;
		if (p[i].fd >= 0)
			close(p[i].fd);
	}
	free(pf);
}

/*
 * A proxy that is not the primary cannot change the map (docs/multi-proxy.md): it waits for the primary's probes to
 * take id out and push the new map, up to PX_FOLLOWER_WAIT_MS. 0 when id left the map meanwhile.
 */
static int wait_removed(const char *id)
{
	int64_t deadline = ft_mono_ms() + PX_FOLLOWER_WAIT_MS;

	for (;;) {
		ft_smap_t *m = ft_smap_current();
		bool in = m != NULL && ft_smap_find(m, id) != NULL;
		ft_smap_put(m);
		if (!in)
			return 0;
		if (ft_mono_ms() >= deadline)
			return -1;
		struct timespec ts = {.tv_nsec = 50 * 1000000L};
		nanosleep(&ts, NULL);
	}
}

/* Takes id out of the map under down_lock (see DESIGN). 0 when it is out (now or already). */
static int take_out(px_t *px, const char *id, const char *why)
{
	if (!px_is_primary(px))
		return wait_removed(id);
	int rc = px_cluster_remove(px, id, why);

	if (rc == 0) {
		ft_metric_inc(FT_M_TARGET_DOWN_REPORTS);
		px_reprotect_after_loss(px, id);
	}
	return rc >= 0 ? 0 : -1;
}

int px_target_unreachable(px_t *px, const char *id)
{
	ft_smap_t *smap;
	const ft_node_t *n;
	probe_t p = {.fd = -1};
	int rc = 0;

	pthread_mutex_lock(&down_lock);
	smap = ft_smap_current();
	n = smap != NULL ? ft_smap_find(smap, id) : NULL;
	if (n != NULL && n->type == FT_NODE_TARGET) {
		snprintf(p.id, sizeof(p.id), "%s", n->id);
		snprintf(p.url, sizeof(p.url), "%s", n->control_url);
	}
	ft_smap_put(smap);
	if (p.id[0] != '\0') { /* still in the map: confirm */
		probe_all(&p, 1, PX_PROBE_CONFIRM_MS);
		if (p.result == PROBE_ALIVE)
			rc = -1;
		else
			rc = take_out(px, p.id,
				      p.result == PROBE_REFUSED ? "refused a relay's connection and a probe"
								: "did not answer a relay nor a probe");
	}
	pthread_mutex_unlock(&down_lock);
	return rc;
}

/* One probe round: every target of the current map; misses[] follows the targets by id. */
static void probe_round(px_t *px, probe_t **pp, int *cap, int **misses, char (**ids)[FT_ID_MAX], int *n_ids)
{
	ft_smap_t *smap = ft_smap_current();
	int n = smap != NULL ? smap->n_targets : 0;
	int *new_misses;
	char(*new_ids)[FT_ID_MAX];

	if (n > *cap) {
		probe_t *np = realloc(*pp, (size_t)n * sizeof(**pp));
		if (np == NULL)
			goto out;
		*pp = np;
		*cap = n;
	}
	for (int i = 0; i < n; i++) {
		snprintf((*pp)[i].id, sizeof((*pp)[i].id), "%s", smap->targets[i].id);
		snprintf((*pp)[i].url, sizeof((*pp)[i].url), "%s", smap->targets[i].control_url);
	}
	ft_smap_put(smap);
	smap = NULL;
	probe_all(*pp, n, px->cfg.probe_interval_ms);
	new_misses = calloc((size_t)(n > 0 ? n : 1), sizeof(*new_misses));
	new_ids = calloc((size_t)(n > 0 ? n : 1), sizeof(*new_ids));
	if (new_misses == NULL || new_ids == NULL) {
		free(new_misses);
		free(new_ids);
		goto out;
	}
	for (int i = 0; i < n; i++) {
		probe_t *p = &(*pp)[i];
		int before = 0;
		for (int j = 0; j < *n_ids; j++)
			if (strcmp((*ids)[j], p->id) == 0)
				before = (*misses)[j];
		snprintf(new_ids[i], sizeof(new_ids[i]), "%s", p->id);
		new_misses[i] = p->result == PROBE_ALIVE ? 0 : before + 1;
		if (p->result == PROBE_REFUSED || new_misses[i] >= PX_PROBE_MISSES) {
			pthread_mutex_lock(&down_lock);
			take_out(px, p->id,
				 p->result == PROBE_REFUSED ? "refused a probe's connection"
							    : "did not answer 3 probes");
			pthread_mutex_unlock(&down_lock);
			new_misses[i] = 0;
		}
	}
	free(*misses);
	free(*ids);
	*misses = new_misses;
	*ids = new_ids;
	*n_ids = n;
out:
	ft_smap_put(smap);
}

static void *prober_main(void *arg)
{
	px_t *px = arg;
	probe_t *probes = NULL;
	int cap = 0, *misses = NULL, n_ids = 0;
	char(*ids)[FT_ID_MAX] = NULL;
	int64_t interval = px->cfg.probe_interval_ms;

	for (int64_t wait = 0; !px_stop_wait(px, wait);) {
		int64_t start = ft_mono_ms();
		if (px_is_primary(px)) /* only the primary changes the map (docs/multi-proxy.md) */
			probe_round(px, &probes, &cap, &misses, &ids, &n_ids);
		wait = interval - (ft_mono_ms() - start);
	}
	free(probes);
	free(misses);
	free(ids);
	return NULL;
}

int px_prober_start(px_t *px)
{
	if (px->cfg.probe_interval_ms <= 0)
		return 0;
	if (pthread_create(&px->prober, NULL, prober_main, px) != 0)
		return -1;
	px->prober_started = true;
	return 0;
}

void px_prober_stop(px_t *px)
{
	if (!px->prober_started)
		return;
	pthread_mutex_lock(&px->stop_lock);
	px->stopping = true;
	pthread_cond_broadcast(&px->stop_cond);
	pthread_mutex_unlock(&px->stop_lock);
	pthread_join(px->prober, NULL);
	px->prober_started = false;
}
