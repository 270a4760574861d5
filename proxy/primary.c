/* SPDX-License-Identifier: Apache-2.0 */
/* Several proxies on etcd: the primary's lease, fenced compare-and-swap commits of Smap/BMD, followers polling them. */
#include "proxy.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/log.h"
#include "cluster/hrw.h"
#include "http/util.h"
#include "rpc/client.h"
#include "rpc/etcd.h"

/*
 * DESIGN (docs/multi-proxy.md)
 * With --etcd set, etcd holds three keys under etcd_prefix: "primary" (the primary's id and URLs,
 * attached to its lease), "smap" and "bmd" (the documents' JSON). Every proxy holds a lease of
 * lease_ttl_s seconds, renewed every third of it by the elector thread below, which also ticks every
 * PX_ELECT_TICK_MS:
 * - no primary key: campaign, i.e. a txn "create_revision(primary) == 0 -> put primary with my lease";
 *   the winner takes over: reads smap/bmd from etcd, makes itself the map's primary (dropping the
 *   old primary from the proxies; a live one joins again), commits, installs, pushes to every node;
 * - the key is another's: follow: read smap/bmd and install what is newer; join the primary (as a
 *   proxy) when the map does not list this proxy.
 * Every proxy also puts "proxies/<id>" with its lease; the primary takes a proxy whose key is gone (its
 * lease expired: dead or cut off for a TTL) out of the map, checking every PX_PROXY_CHECK_MS.
 * A commit (px_persist_smap/bmd in this mode) is one txn: "mod_revision(doc) == the revision this
 * proxy last read or wrote AND lease(primary) == my lease -> put doc". A proxy whose lease expired,
 * or that lost the key to another, or that missed a write, can never commit: fencing is in etcd.
 * Locally a primary also stops committing once its last confirmed renewal is older than the TTL
 * (px_is_primary), so it does not even try while etcd is unreachable. Commits run under meta_lock.
 */

#define PX_ELECT_TICK_MS 200
#define PX_ETCD_CALL_MS 1000   /* one etcd call of the elector */
#define PX_ETCD_COMMIT_MS 2000 /* one commit */
#define PX_ETCD_START_MS 15000 /* startup waits this long for etcd and a first map */
#define PX_PROXY_JOIN_MS 1000  /* a follower not in the map asks the primary at most this often */
#define PX_PROXY_CHECK_MS 1000 /* the primary looks for proxies without a lease this often */

static int64_t ttl_ms(const px_t *px)
{
	return (int64_t)px->cfg.lease_ttl_s * 1000;
}

static void set_primary(px_t *px, bool v)
{
	__atomic_store_n(&px->primary, v, __ATOMIC_SEQ_CST);
}

bool px_is_primary(const px_t *px)
{
	if (px->cfg.etcd[0] == '\0')
		return true;
	if (!__atomic_load_n(&px->primary, __ATOMIC_SEQ_CST))
		return false;
	/* the lease is surely valid until the renewal's send time + TTL; keep a margin */
	return ft_mono_ms() - __atomic_load_n(&px->lease_ok_ms, __ATOMIC_SEQ_CST) < ttl_ms(px) - 250;
}

bool px_was_primary(const px_t *px)
{
	return px->cfg.etcd[0] == '\0' || __atomic_load_n(&px->primary, __ATOMIC_SEQ_CST);
}

/* ---- commits ---- */

/* Puts doc under key when rev is still its mod_revision and this proxy still holds the primary key (meta_lock). */
static int commit(px_t *px, const char *key, int64_t *rev, const json_t *doc)
{
	char err[512] = "";
	int64_t newrev = 0;
	char *text = json_dumps(doc, JSON_COMPACT);

	if (text == NULL)
		return -ENOMEM;
	ft_etcd_cmp_t cmp[2] = {
		{.key = key, .target = FT_ETCD_CMP_MOD, .value = *rev},
		{.key = px->etcd_key_primary, .target = FT_ETCD_CMP_LEASE, .value = px->lease},
	};
	int rc = ft_etcd_put_if(px->cfg.etcd, cmp, 2, key, text, strlen(text), 0, PX_ETCD_COMMIT_MS, &newrev, err,
				sizeof(err));
	free(text);
	if (rc == 0) {
		*rev = newrev;
		return 0;
	}
	if (rc == 1) {
		ft_warn("commit of %s refused by etcd: this proxy is no longer the primary or missed a write", key);
		set_primary(px, false);
	} else {
		ft_warn("commit of %s: %s", key, err);
	}
	/* Either way what etcd holds is unknown here (a timed-out put may have landed): re-read first (elector). */
	__atomic_store_n(&px->etcd_resync, true, __ATOMIC_SEQ_CST);
	return -EAGAIN;
}

/* Whether commits may go to etcd now: the primary, fresh lease, no failed commit to re-read after. */
static bool may_commit(const px_t *px)
{
	return px_is_primary(px) && !__atomic_load_n(&px->etcd_resync, __ATOMIC_SEQ_CST);
}

int px_primary_commit_smap(px_t *px, const ft_smap_t *m)
{
	if (!may_commit(px))
		return -EAGAIN;
	json_t *j = ft_smap_to_json(m);
	int rc = j != NULL ? commit(px, px->etcd_key_smap, &px->smap_rev, j) : -ENOMEM;
	json_decref(j);
	return rc;
}

int px_primary_commit_bmd(px_t *px, const ft_bmd_t *b)
{
	if (!may_commit(px))
		return -EAGAIN;
	json_t *j = ft_bmd_to_json(b);
	int rc = j != NULL ? commit(px, px->etcd_key_bmd, &px->bmd_rev, j) : -ENOMEM;
	json_decref(j);
	return rc;
}

/* ---- reading the documents ---- */

/* Reads key: 0 with *doc (caller owns) and *rev, 1 absent, -1 on error (logged at most as a debug line). */
static int read_doc(px_t *px, const char *key, json_t **doc, int64_t *rev)
{
	ft_etcd_kv_t kv;
	char err[512] = "";
	json_error_t jerr;
	int rc = ft_etcd_get(px->cfg.etcd, key, PX_ETCD_CALL_MS, &kv, err, sizeof(err));

	*doc = NULL;
	*rev = 0;
	if (rc != 0) {
		if (rc < 0)
			ft_debug("etcd: %s", err);
		return rc;
	}
	*doc = json_loadb(kv.value, kv.len, 0, &jerr);
	*rev = kv.mod_revision;
	free(kv.value);
	if (*doc == NULL) {
		ft_error("etcd key %s is not JSON: %s", key, jerr.text);
		return -1;
	}
	return 0;
}

/* Installs smap/bmd JSON when newer than what this proxy holds. */
static void install_docs(json_t *sj, json_t *bj)
{
	char why[256];

	if (bj != NULL) {
		ft_bmd_t *b = ft_bmd_from_json(bj, why, sizeof(why));
		if (b == NULL)
			ft_error("bucket metadata in etcd: %s", why);
		else if (ft_bmd_install(b) == 0)
			ft_info("bucket metadata v%lld from etcd", (long long)b->version);
	}
	if (sj != NULL) {
		ft_smap_t *m = ft_smap_from_json(sj, why, sizeof(why));
		if (m == NULL)
			ft_error("cluster map in etcd: %s", why);
		else if (ft_smap_install(m) == 0)
			ft_info("cluster map v%lld from etcd (primary %s)", (long long)m->version, m->primary);
	}
}

/* ---- takeover ---- */

/* The map etcd held, with this proxy as the primary (the previous primary's entry dropped), one version up. */
static ft_smap_t *takeover_map(px_t *px, json_t *sj, char *err, size_t errlen)
{
	ft_smap_t *m = ft_smap_from_json(sj, err, errlen), *cur = ft_smap_current();

	if (m == NULL)
		goto out;
	if (m->primary[0] != '\0' && strcmp(m->primary, px->id) != 0)
		ft_smap_remove(m, m->primary);
	if (px_smap_add_self(px, m) != 0) {
		snprintf(err, errlen, "out of memory");
		ft_smap_put(m);
		m = NULL;
		goto out;
	}
	snprintf(m->primary, sizeof(m->primary), "%s", px->id);
	if (cur != NULL && cur->version > m->version)
		m->version = cur->version;
	m->version++;
out:
	ft_smap_put(cur);
	return m;
}

/*
 * This proxy holds the primary key: read the documents, commit the map with itself as primary, install
 * both, restart every target's keepalive clock, push to every node. 0, or -1 (logged; tried again later).
 */
static int takeover(px_t *px)
{
	json_t *sj = NULL, *bj = NULL;
	ft_smap_t *m = NULL;
	ft_bmd_t *b = NULL;
	char err[512] = "";
	int rc = -1;

	pthread_mutex_lock(&px->meta_lock);
	int rs = read_doc(px, px->etcd_key_smap, &sj, &px->smap_rev);
	int rb = read_doc(px, px->etcd_key_bmd, &bj, &px->bmd_rev);
	if (rs < 0 || rb < 0)
		goto unlock;
	__atomic_store_n(&px->etcd_resync, false, __ATOMIC_SEQ_CST);
	set_primary(px, true); /* commits below check it; the txn's lease compare is the real fence */
	if (rs == 1) {         /* a new cluster: this proxy's state files, or new documents */
		if (px_cluster_init(px, err, sizeof(err)) != 0) {
			ft_error("first primary: %s", err);
			goto fail;
		}
		rc = 0;
		goto unlock;
	}
	m = takeover_map(px, sj, err, sizeof(err));
	if (m == NULL) {
		ft_error("cluster map in etcd: %s", err);
		goto fail;
	}
	if (rb == 0) {
		b = ft_bmd_from_json(bj, err, sizeof(err));
	} else {
		b = ft_bmd_new();
		if (b != NULL)
			b->version = 1;
	}
	if (b == NULL) {
		ft_error("bucket metadata in etcd: %s", err[0] ? err : "out of memory");
		goto fail;
	}
	if ((rb == 1 && px_primary_commit_bmd(px, b) != 0) || px_primary_commit_smap(px, m) != 0)
		goto fail;
	px_cluster_reset_seen(px, m);
	ft_bmd_get(b);
	ft_bmd_install(b);
	ft_smap_get(m);
	ft_smap_install(m);
	rc = 0;
	goto unlock;
fail:
	set_primary(px, false);
unlock:
	pthread_mutex_unlock(&px->meta_lock);
	if (rc == 0) {
		ft_smap_t *cm = ft_smap_current();
		ft_bmd_t *cb = ft_bmd_current();
		ft_warn("this proxy (%s) is now the primary: cluster map v%lld, %d proxies, %d targets", px->id,
			(long long)cm->version, cm->n_proxies, cm->n_targets);
		px_metasync(px, cm, cb, true, true, NULL);
		ft_bmd_put(cb);
		ft_smap_put(cm);
	}
	ft_smap_put(m);
	ft_bmd_put(b);
	json_decref(sj);
	json_decref(bj);
	return rc;
}

/* ---- following ---- */

/* Asks the primary (control_url) to list this proxy in the map. */
static void join_primary(px_t *px, const char *control_url)
{
	char url[FT_URL_MAX + 32], err[256] = "";
	long status = 0;
	json_t *reply = NULL;
	json_t *body = json_pack("{s:s,s:s,s:s,s:s}", "id", px->id, "role", "proxy", "public_url", px->public_url,
				 "control_url", px->control_url);

	if (body == NULL)
		return;
	snprintf(url, sizeof(url), "%s/v1/cluster/join", control_url);
	if (ft_client_json("POST", url, body, PX_PUSH_TIMEOUT_MS, &status, &reply, err, sizeof(err)) != 0)
		ft_warn("join as a proxy at %s: %s", url, err);
	else if (status != 200)
		ft_warn("join as a proxy at %s: HTTP %ld", url, status);
	else
		install_docs(json_object_get(reply, "smap"), json_object_get(reply, "bmd"));
	json_decref(reply);
	json_decref(body);
}

/* Installs what etcd holds when it changed since the last look; joins the primary when not in its map. */
static void follow(px_t *px, const json_t *primary_doc)
{
	json_t *sj = NULL, *bj = NULL;
	int64_t srev = 0, brev = 0;

	if (read_doc(px, px->etcd_key_smap, &sj, &srev) == 0 && read_doc(px, px->etcd_key_bmd, &bj, &brev) >= 0) {
		pthread_mutex_lock(&px->meta_lock);
		if (srev != px->smap_rev || brev != px->bmd_rev) {
			install_docs(sj, bj);
			px->smap_rev = srev;
			px->bmd_rev = brev;
		}
		pthread_mutex_unlock(&px->meta_lock);
	}
	json_decref(sj);
	json_decref(bj);

	ft_smap_t *m = ft_smap_current();
	const char *ctl = json_string_value(json_object_get(primary_doc, "control_url"));
	int64_t now = ft_mono_ms();
	/* joins only with its presence key in place, else the primary would drop it again at once */
	if (m != NULL && ft_smap_find(m, px->id) == NULL && ctl != NULL && px->presence_lease == px->lease &&
	    now - px->proxy_join_ms >= PX_PROXY_JOIN_MS) {
		px->proxy_join_ms = now;
		join_primary(px, ctl);
	}
	ft_smap_put(m);
}

/* ---- the lease and the primary key ---- */

/* A new lease; 0 or -1 (logged). */
/* Asks etcd for a lease: 0, or -1 with why filled (cap bytes). */
static int grant(px_t *px, char *why, size_t cap)
{
	int64_t lease = 0, granted = 0;
	int64_t sent = ft_mono_ms();

	if (ft_etcd_grant(px->cfg.etcd, px->cfg.lease_ttl_s, PX_ETCD_CALL_MS, &lease, &granted, why, cap) != 0) {
		ft_debug("lease grant: %s", why);
		return -1;
	}
	if (granted != px->cfg.lease_ttl_s)
		ft_warn("etcd granted a lease of %lld s (asked %d s)", (long long)granted, px->cfg.lease_ttl_s);
	pthread_mutex_lock(&px->meta_lock);
	px->lease = lease;
	pthread_mutex_unlock(&px->meta_lock);
	__atomic_store_n(&px->lease_ok_ms, sent, __ATOMIC_SEQ_CST);
	ft_info("etcd lease %llx (%lld s)", (unsigned long long)lease, (long long)granted);
	return 0;
}

/* Puts "proxies/<id>" with this proxy's lease (a txn without compares), once per lease. */
static void presence(px_t *px)
{
	char key[FT_PATH_MAX + 16 + FT_ID_MAX], err[512] = "";

	if (px->presence_lease == px->lease || px->lease == 0)
		return;
	snprintf(key, sizeof(key), "%s%s", px->etcd_key_proxies, px->id);
	if (ft_etcd_put_if(px->cfg.etcd, NULL, 0, key, px->control_url, strlen(px->control_url), px->lease,
			   PX_ETCD_CALL_MS, NULL, err, sizeof(err)) == 0)
		px->presence_lease = px->lease;
	else
		ft_debug("etcd: %s", err);
}

/* The primary: proxies of the map whose "proxies/<id>" key is gone leave the map. */
static void drop_dead_proxies(px_t *px)
{
	int64_t now = ft_mono_ms();
	ft_smap_t *m;

	if (now - px->proxy_check_ms < PX_PROXY_CHECK_MS || !px_is_primary(px))
		return;
	px->proxy_check_ms = now;
	m = ft_smap_current();
	for (int i = 0; m != NULL && i < m->n_proxies; i++) {
		char key[FT_PATH_MAX + 16 + FT_ID_MAX], err[512] = "";
		ft_etcd_kv_t kv;
		const char *id = m->proxies[i].id;
		if (strcmp(id, px->id) == 0)
			continue;
		snprintf(key, sizeof(key), "%s%s", px->etcd_key_proxies, id);
		int rc = ft_etcd_get(px->cfg.etcd, key, PX_ETCD_CALL_MS, &kv, err, sizeof(err));
		free(kv.value);
		if (rc == 1)
			px_cluster_remove(px, id, "has no etcd lease any more");
	}
	ft_smap_put(m);
}

/* Renews the lease when a third of the TTL has passed; a lease etcd no longer knows is replaced. */
static void renew(px_t *px)
{
	char err[512] = "";
	int64_t ttl = 0, sent = ft_mono_ms();

	if (px->lease == 0) {
		grant(px, err, sizeof(err));
		return;
	}
	if (sent - px->lease_sent_ms < ttl_ms(px) / 3)
		return;
	px->lease_sent_ms = sent;
	if (ft_etcd_keepalive(px->cfg.etcd, px->lease, PX_ETCD_CALL_MS, &ttl, err, sizeof(err)) != 0) {
		if (px_was_primary(px))
			ft_warn("lease renewal: %s (commits stop %lld ms after the last renewal)", err,
				(long long)ttl_ms(px));
		return;
	}
	if (ttl > 0) {
		__atomic_store_n(&px->lease_ok_ms, sent, __ATOMIC_SEQ_CST);
		return;
	}
	ft_warn("etcd lease %llx expired%s", (unsigned long long)px->lease,
		px_was_primary(px) ? ": no longer the primary" : "");
	set_primary(px, false);
	pthread_mutex_lock(&px->meta_lock);
	px->lease = 0;
	pthread_mutex_unlock(&px->meta_lock);
	grant(px, err, sizeof(err));
}

/* Puts the primary key with this proxy's lease when nobody holds it: 0 won, 1 lost, -1 error. */
static int campaign(px_t *px)
{
	char err[512] = "";
	json_t *doc =
		json_pack("{s:s,s:s,s:s}", "id", px->id, "public_url", px->public_url, "control_url", px->control_url);
	char *text = doc != NULL ? json_dumps(doc, JSON_COMPACT) : NULL;
	ft_etcd_cmp_t cmp = {.key = px->etcd_key_primary, .target = FT_ETCD_CMP_CREATE, .value = 0};
	int rc = -1;

	if (text != NULL && px->lease != 0)
		rc = ft_etcd_put_if(px->cfg.etcd, &cmp, 1, px->etcd_key_primary, text, strlen(text), px->lease,
				    PX_ETCD_CALL_MS, NULL, err, sizeof(err));
	if (rc < 0 && err[0])
		ft_debug("campaign: %s", err);
	free(text);
	json_decref(doc);
	return rc;
}

/* One round: renew, look at the primary key, campaign / take over / follow. */
static void tick(px_t *px)
{
	ft_etcd_kv_t kv;
	char err[512] = "";
	json_error_t jerr;

	renew(px);
	presence(px);
	int rc = ft_etcd_get(px->cfg.etcd, px->etcd_key_primary, PX_ETCD_CALL_MS, &kv, err, sizeof(err));
	if (rc < 0) {
		ft_debug("etcd: %s", err);
		return;
	}
	if (rc == 1) {
		if (campaign(px) == 0) {
			ft_info("won the primary key with lease %llx", (unsigned long long)px->lease);
			takeover(px);
		}
		return;
	}
	if (kv.lease == px->lease && px->lease != 0) {
		if (!__atomic_load_n(&px->primary, __ATOMIC_SEQ_CST) ||
		    __atomic_load_n(&px->etcd_resync, __ATOMIC_SEQ_CST))
			takeover(px);
		else
			drop_dead_proxies(px);
	} else {
		if (__atomic_load_n(&px->primary, __ATOMIC_SEQ_CST))
			ft_warn("the primary key belongs to another proxy now: following");
		set_primary(px, false);
		json_t *doc = json_loadb(kv.value, kv.len, 0, &jerr);
		follow(px, doc);
		json_decref(doc);
	}
	free(kv.value);
}

static void *elector_main(void *arg)
{
	px_t *px = arg;

	while (!px_stop_wait(px, PX_ELECT_TICK_MS))
		tick(px);
	return NULL;
}

int px_primary_init(px_t *px, char *err, size_t errlen)
{
	int64_t deadline = ft_mono_ms() + PX_ETCD_START_MS;
	const char *p = px->cfg.etcd_prefix;
	size_t n = strlen(p);

	while (n > 0 && p[n - 1] == '/')
		n--;
	snprintf(px->etcd_key_primary, sizeof(px->etcd_key_primary), "%.*s/primary", (int)n, p);
	snprintf(px->etcd_key_smap, sizeof(px->etcd_key_smap), "%.*s/smap", (int)n, p);
	snprintf(px->etcd_key_bmd, sizeof(px->etcd_key_bmd), "%.*s/bmd", (int)n, p);
	snprintf(px->etcd_key_proxies, sizeof(px->etcd_key_proxies), "%.*s/proxies/", (int)n, p);
	char why[512] = "";

	while (grant(px, why, sizeof(why)) != 0) {
		if (ft_mono_ms() >= deadline) {
			snprintf(err, errlen, "etcd at %s: no lease after %d s (last: %s)", px->cfg.etcd,
				 PX_ETCD_START_MS / 1000, why);
			return -1;
		}
		struct timespec ts = {.tv_nsec = PX_ELECT_TICK_MS * 1000000L};
		nanosleep(&ts, NULL);
	}
	px->lease_sent_ms = ft_mono_ms();
	presence(px);
	for (;;) {
		tick(px);
		ft_smap_t *m = ft_smap_current();
		bool have = m != NULL;
		ft_smap_put(m);
		if (have)
			return 0;
		if (ft_mono_ms() >= deadline) {
			snprintf(err, errlen, "etcd at %s: no cluster map after %d s", px->cfg.etcd,
				 PX_ETCD_START_MS / 1000);
			return -1;
		}
		struct timespec ts = {.tv_nsec = PX_ELECT_TICK_MS * 1000000L};
		nanosleep(&ts, NULL);
	}
}

int px_primary_start(px_t *px)
{
	if (px->cfg.etcd[0] == '\0')
		return 0;
	if (pthread_create(&px->elector, NULL, elector_main, px) != 0)
		return -1;
	px->elector_started = true;
	return 0;
}

void px_primary_stop(px_t *px)
{
	char err[256];

	if (px->elector_started) {
		pthread_mutex_lock(&px->stop_lock);
		px->stopping = true;
		pthread_cond_broadcast(&px->stop_cond);
		pthread_mutex_unlock(&px->stop_lock);
		pthread_join(px->elector, NULL);
		px->elector_started = false;
	}
	/* Revoking hands the primary key over at once instead of after the TTL. */
	if (px->cfg.etcd[0] != '\0' && px->lease != 0 &&
	    ft_etcd_revoke(px->cfg.etcd, px->lease, PX_ETCD_CALL_MS, err, sizeof(err)) == 0)
		ft_info("etcd lease %llx revoked", (unsigned long long)px->lease);
	set_primary(px, false);
	px->lease = 0;
}

void px_primary_not_primary(px_t *px, ft_ctl_resp_t *resp, const char *what)
{
	ft_smap_t *m = ft_smap_current();
	const ft_node_t *p = m != NULL && m->primary[0] ? ft_smap_find(m, m->primary) : NULL;

	if (px_was_primary(px))
		ft_ctl_error(resp, 503, "%s: the metadata store (etcd) cannot be reached: try again", what);
	else
		ft_ctl_error(resp, 503, "%s: this proxy (%s) is not the primary%s%s", what, px->id,
			     p != NULL ? "; the primary is " : "", p != NULL ? p->id : "");
	if (p != NULL && json_is_object(resp->json)) {
		json_object_set_new(resp->json, "primary", json_string(p->id));
		json_object_set_new(resp->json, "primary_url", json_string(p->control_url));
		json_object_set_new(resp->json, "primary_public_url", json_string(p->public_url));
	}
	ft_smap_put(m);
}
