/* SPDX-License-Identifier: Apache-2.0 */
/* ft-proxy: configuration, startup of both ports and the cluster state, signals, graceful shutdown. */
#include "proxy.h"

#include <errno.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "auth/auth.h"
#include "base/limits.h"
#include "base/log.h"
#include "base/metrics.h"
#include "http/tlsconf.h"
#include "rpc/client.h"
#include "s3/s3.h"

/* libmicrohttpd threads: a join blocks one for up to the push timeout. */
#define PX_CTL_THREADS 8

static void usage(FILE *f)
{
	fprintf(f, "usage: ft-proxy [--config FILE] [--key value | --key=value]...\n"
		   "The primary proxy of a FastTier cluster: owns the cluster map and bucket metadata,\n"
		   "redirects object requests to their targets and merges object listings.\n"
		   "\n"
		   "  --config FILE          JSON file with any of the keys below (flags win)\n"
		   "  --id ID                proxy id (default p-<public_port>)\n"
		   "  --bind ADDR            listen address of both ports (default 127.0.0.1)\n"
		   "  --public_port N        client port (default 51080)\n"
		   "  --public_host HOST     advertised host of the public port (default = bind)\n"
		   "  --control_port N       intra-cluster port (default public_port+1)\n"
		   "  --control_host HOST    advertised host of the control port (default = public_host)\n"
		   "  --state_dir DIR        where smap.json and bmd.json are kept (default .)\n"
		   "  --etcd URL             etcd client URL: several proxies, the primary elected there and\n"
		   "                         Smap/BMD kept there (default none: one proxy, state in state_dir)\n"
		   "  --etcd_prefix PREFIX   prefix of the cluster's etcd keys (default /fasttier)\n"
		   "  --etcd_cert FILE --etcd_key FILE  client certificate for an https etcd that asks for\n"
		   "                         one (default: --tls_cert and --tls_key; --tls_ca verifies etcd)\n"
		   "  --lease_ttl_s N        TTL of the primary's etcd lease: a dead primary is replaced\n"
		   "                         within about this long (default 3)\n"
		   "  --log_level LEVEL      debug|info|warn|error (default info)\n"
		   "  --log-format FORMAT    text|json: one JSON object a line (default text)\n"
		   "  --loop_threads N       public-port io_uring loops (0 = CPUs)\n"
		   "  --worker_threads N     worker pool for requests that talk to other nodes (default 64)\n"
		   "  --keepalive_ms N       target keepalive interval; 3 missed = removed (default 2000)\n"
		   "  --probe_interval_ms N  connect probes of every target; refused, or 3 unanswered, = removed\n"
		   "                         from the map at once (default 250; 0 = keepalives only)\n"
		   "  --job_missing_grace_s N  a job whose target does not answer reads running this long after\n"
		   "                         the other targets ended, then incomplete (default 120)\n"
		   "  --s3_keys FILE         S3 access keys: JSON {\"ACCESS_KEY\": \"SECRET\", ...}\n"
		   "  --s3_anonymous BOOL    accept unsigned S3 requests (default false)\n"
		   "  --s3_root BOOL         serve the S3 API at / as well as /s3 (default false)\n"
		   "  --s3_domain DOMAIN     virtual-host style S3 for Host <bucket>.DOMAIN\n"
		   "  --s3_region REGION     region the S3 API reports (default us-east-1)\n"
		   "  --s3_relay_timeout_ms N  a target silent this long fails a relayed S3 request\n"
		   "                         (default 30000)\n"
		   "  --auth BOOL           require credentials on the public port (default false)\n"
		   "  --auth_keys FILE      identity store: access keys with roles (default: the s3_keys file)\n"
		   "  --cluster_secret FILE the cluster secret (signs tokens, redirects, the control plane)\n"
		   "  --insecure            allow a non-loopback bind with auth off\n"
		   "  --tls_cert FILE --tls_key FILE  serve the public port over HTTPS (PEM chain and key)\n"
		   "  --tls_client_ca FILE  require client certificates signed by this CA on the public port\n"
		   "  --tls_ca FILE         CA trusted (besides the system's) for https URLs of targets\n"
		   "  --auth_anonymous_metrics BOOL  /metrics and /v1/daemon without credentials\n"
		   "  --token_ttl_max N     longest token lifetime in seconds (default 604800)\n"
		   "  --hint_max_names N     most names of one epoch order hint (default 1000000)\n"
		   "  --restore_after_s N    a target out of the map this long: the slices and copies it held are\n"
		   "                         re-created on the others (default 300; 0 = never)\n"
		   "  --allow_public_read BOOL  anonymous reads of public-read buckets and objects (default false)\n"
		   "  --http_max_header_bytes N, --http_max_headers N  request head limits (default 16384, 100)\n"
		   "  --http_idle_timeout_ms N  keep-alive connection without a request (default 60000)\n"
		   "  --http_header_timeout_ms N  first byte to end of a request head, else 408 (default 10000)\n"
		   "  --http_body_timeout_ms N  longest gap between request body bytes (default 30000)\n"
		   "  --proxy_url, --mountpath, --sync, --reserve_bytes: accepted, used by targets\n"
		   "  --check-config         parse the flags and the config file, check them, print OK and exit\n"
		   "                         (binds nothing, writes nothing; exit 2 on an error)\n"
		   "  --help                 this text\n");
}

/* "http://host:port" ("https://" with tls), with brackets around an IPv6 literal. */
static void node_url(char *dst, size_t cap, const char *host, int port, bool tls)
{
	bool v6 = strchr(host, ':') != NULL && host[0] != '[';

	snprintf(dst, cap, "%s://%s%s%s:%d", tls ? "https" : "http", v6 ? "[" : "", host, v6 ? "]" : "", port);
}

/* Creates dir and its parents (like mkdir -p). Returns 0 or -errno. */
static int make_dirs(const char *dir)
{
	char path[FT_PATH_MAX];

	snprintf(path, sizeof(path), "%s", dir);
	for (char *p = path + 1; *p != '\0'; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(path, 0755) != 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(path, 0755) != 0 && errno != EEXIST)
		return -errno;
	return 0;
}

/* Derived settings that touch nothing: id and URLs. 0, or -1 with err filled. */
static int px_derive(px_t *px, char *err, size_t errlen)
{
	ft_config_t *c = &px->cfg;

	if (c->id[0] != '\0')
		snprintf(px->id, sizeof(px->id), "%s", c->id);
	else
		snprintf(px->id, sizeof(px->id), "p-%d", c->public_port);
	node_url(px->public_url, sizeof(px->public_url), c->public_host, c->public_port, c->tls_cert[0] != '\0');
	node_url(px->control_url, sizeof(px->control_url), c->control_host, c->control_port, false);
	if (c->keepalive_ms <= 0) {
		snprintf(err, errlen, "keepalive_ms must be positive");
		return -1;
	}
	return 0;
}

/* Derived settings: id, URLs, state file paths. */
static int px_setup(px_t *px, char *err, size_t errlen)
{
	ft_config_t *c = &px->cfg;
	int rc;

	if (px_derive(px, err, errlen) != 0)
		return -1;
	rc = make_dirs(c->state_dir);
	if (rc != 0) {
		snprintf(err, errlen, "state_dir %s: %s", c->state_dir, strerror(-rc));
		return -1;
	}
	snprintf(px->smap_path, sizeof(px->smap_path), "%s/smap.json", c->state_dir);
	snprintf(px->bmd_path, sizeof(px->bmd_path), "%s/bmd.json", c->state_dir);
	return 0;
}

static void px_init_sync(px_t *px)
{
	pthread_condattr_t attr;

	pthread_mutex_init(&px->meta_lock, NULL);
	pthread_mutex_init(&px->stop_lock, NULL);
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&px->stop_cond, &attr);
	pthread_condattr_destroy(&attr);
}

static void px_destroy_sync(px_t *px)
{
	pthread_cond_destroy(&px->stop_cond);
	pthread_mutex_destroy(&px->stop_lock);
	pthread_mutex_destroy(&px->meta_lock);
}

/* ---- what the S3 front end (proxy/s3/) gets from the proxy ---- */

static int s3_bucket_create(void *ctx, const char *bucket, ft_cksum_type_t cksum)
{
	return px_bucket_create_do(ctx, bucket, cksum);
}

static int s3_bucket_destroy(void *ctx, const char *bucket)
{
	return px_bucket_destroy_do(ctx, bucket);
}

static int s3_bucket_set_acl(void *ctx, const char *bucket, bool public_read)
{
	return px_bucket_set_acl(ctx, "ais", bucket, public_read);
}

static int s3_list_page(void *ctx, const char *bucket, const char *prefix, const char *token, int pagesize,
			json_t **entries, bool *more, int *status, char *why, size_t cap)
{
	return px_list_page(ctx, bucket, prefix, token, pagesize, entries, more, status, why, cap);
}

static int s3_rlist_page(void *ctx, const char *provider, const char *bucket, const px_s3_rlist_args_t *s,
			 json_t **entries, char **next, int *status, char *why, size_t cap)
{
	px_rlist_args_t a = {s->prefix, s->delimiter, s->start_after, s->token, s->pagesize};

	return px_rlist_page(ctx, provider, bucket, &a, entries, next, status, why, cap);
}

static int s3_target_unreachable(void *ctx, const char *id)
{
	return px_target_unreachable(ctx, id);
}

static int s3_start(px_t *px, char *err, size_t errlen)
{
	const px_s3_host_t host = {
		.cfg = &px->cfg,
		.fanout = px->fanout,
		.ctx = px,
		.bucket_create = s3_bucket_create,
		.bucket_destroy = s3_bucket_destroy,
		.bucket_set_acl = s3_bucket_set_acl,
		.list_page = s3_list_page,
		.rlist_page = s3_rlist_page,
		.target_unreachable = s3_target_unreachable,
	};

	px->s3 = px_s3_init(&host, err, errlen);
	return px->s3 != NULL ? 0 : -1;
}

/* Starts the fan-out threads, the state, both servers and the checker. Returns 0, -1 with err filled. */
static int px_start(px_t *px, char *err, size_t errlen)
{
	ft_config_t *c = &px->cfg;

	/* Fan-out parallelism per call; the caller runs calls too, so a few threads suffice. */
	px->fanout = ft_fanout_start(c->worker_threads < 8 ? c->worker_threads : 8);
	if (px->fanout == NULL) {
		snprintf(err, errlen, "cannot start the fan-out threads");
		return -1;
	}
	if (ft_auth_init(c, true, err, errlen) != 0)
		return -1;
	if ((c->etcd[0] != '\0' ? px_primary_init(px, err, errlen) : px_cluster_init(px, err, errlen)) != 0)
		return -1;
	if (s3_start(px, err, errlen) != 0)
		return -1;
	px->ctl = ft_ctl_start(c->bind, c->control_port, PX_CTL_THREADS, px_ctl_handler, px, err, errlen);
	if (px->ctl == NULL)
		return -1;
	ft_httpd_opts_t o = {
		.bind = c->bind,
		.port = c->public_port,
		.threads = c->loop_threads,
		.workers = c->worker_threads,
		.max_header_bytes = c->http_max_header_bytes,
		.max_headers = c->http_max_headers,
		.idle_timeout_ms = c->http_idle_timeout_ms,
		.header_timeout_ms = c->http_header_timeout_ms,
		.body_timeout_ms = c->http_body_timeout_ms,
		.tls_cert = c->tls_cert,
		.tls_key = c->tls_key,
		.tls_client_ca = c->tls_client_ca,
		.handler = px_route,
		.ctx = px,
		.server_error = px_server_error,
	};
	px->httpd = ft_httpd_start(&o, err, errlen);
	if (px->httpd == NULL)
		return -1;
	if (px_checker_start(px) != 0 || px_prober_start(px) != 0 || px_primary_start(px) != 0) {
		snprintf(err, errlen, "cannot start the keepalive checker, the target prober or the elector");
		return -1;
	}
	return 0;
}

/* Stops whatever px_start started, in reverse order; safe after a partial start. */
static void px_stop(px_t *px)
{
	px_ais_summ_stop();
	px_maint_stop(px);
	px_primary_stop(px);
	px_prober_stop(px);
	px_checker_stop(px);
	if (px->httpd != NULL)
		ft_httpd_stop(px->httpd);
	px->httpd = NULL;
	if (px->ctl != NULL)
		ft_ctl_stop(px->ctl);
	px->ctl = NULL;
	ft_fanout_stop(px->fanout);
	px->fanout = NULL;
	px_s3_fini(px->s3);
	px->s3 = NULL;
	px_cluster_free(px);
	ft_auth_fini();
}

static bool wants_help(int argc, char **argv)
{
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
			return true;
	return false;
}

/* --check-config: what startup would refuse, found without binding or writing anything. Exit status. */
static int check_config(px_t *px)
{
	char err[2048] = "";

	/* the cluster secret, the identity store (S3 keys among it) and the bind rule, as startup reads them */
	if (px_derive(px, err, sizeof(err)) != 0 || ft_auth_init(&px->cfg, true, err, sizeof(err)) != 0 ||
	    ft_tls_config_check(&px->cfg, err, sizeof(err)) != 0) {
		fprintf(stderr, "ft-proxy: %s\n", err);
		return 2;
	}
	ft_auth_fini();
	printf("OK ft-proxy id=%s public=%s control=%s\n", px->id, px->public_url, px->control_url);
	return 0;
}

/*
 * glibc gives the free top of a thread's heap back to the kernel once it passes 128 KiB, so a GET's
 * response (head and body copied into its request's arena, ~16 KiB at 16 KiB objects) kept landing
 * in freshly faulted pages: 0.67 page faults and a brk or madvise every ~10 GETs per request, ~5% of
 * the proxy's CPU at 16 KiB. A heap keeps up to PX_MALLOC_TRIM free bytes instead; a fixed mmap
 * threshold (a set trim threshold stops glibc's own adjusting of both) keeps the 128 KiB - 1 MiB
 * buffers (stream rings, copy rings, body readers) in the heaps, as the adjusted threshold did.
 */
#define PX_MALLOC_TRIM (4 << 20)
#define PX_MALLOC_MMAP (1 << 20)

static void malloc_tune(void)
{
	mallopt(M_TRIM_THRESHOLD, PX_MALLOC_TRIM);
	mallopt(M_MMAP_THRESHOLD, PX_MALLOC_MMAP);
}

int main(int argc, char **argv)
{
	static px_t px; /* large (paths, URLs): not on the stack */
	char err[2048] = "";
	sigset_t sigs;
	int sig = 0, rc = 1;
	bool check;

	if (wants_help(argc, argv)) {
		usage(stdout);
		return 0;
	}
	check = ft_config_take_flag(&argc, argv, "--check-config") > 0;
	if (ft_config_load(&px.cfg, argc, argv, err, sizeof(err)) != 0) {
		fprintf(stderr, "ft-proxy: %s (see ft-proxy --help)\n", err);
		ft_config_free(&px.cfg);
		return 2;
	}
	if (check) {
		rc = check_config(&px);
		ft_config_free(&px.cfg);
		return rc;
	}
	malloc_tune();
	ft_log_init("ft-proxy", px.cfg.log_level);
	ft_log_set_format(px.cfg.log_format);
	ft_metrics_set_role(FT_M_ROLE_PROXY);
	/* Every thread inherits the mask: only sigwait below sees SIGINT/SIGTERM. */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);
	ft_limits_raise_nofile();
	px_init_sync(&px);
	if (px_setup(&px, err, sizeof(err)) != 0 || ft_client_global_init() != 0 ||
	    ft_tls_config_check(&px.cfg, err, sizeof(err)) != 0) {
		ft_error("startup: %s", err[0] ? err : "cannot initialize the HTTP client");
		goto out;
	}
	if (px_start(&px, err, sizeof(err)) != 0) {
		ft_error("startup: %s", err);
		goto out;
	}
	ft_info("ready public=%s control=%s id=%s", px.public_url, px.control_url, px.id);
	while (sigwait(&sigs, &sig) != 0)
		;
	ft_info("signal %d: shutting down", sig);
	rc = 0;
out:
	px_stop(&px);
	px_destroy_sync(&px);
	ft_config_free(&px.cfg);
	if (rc == 0)
		ft_info("stopped");
	return rc;
}
