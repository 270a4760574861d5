/* SPDX-License-Identifier: Apache-2.0 */
/* ft-target: configuration, node id, startup of the servers and threads, signals, orderly shutdown. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "auth/auth.h"
#include "base/config.h"
#include "base/limits.h"
#include "base/log.h"
#include "base/metrics.h"
#include "core/fcache.h"
#include "http/http.h"
#include "http/tlsconf.h"
#include "rpc/client.h"
#include "rpc/ctl.h"
#include "target.h"

#define CTL_THREADS 4
#define ID_FILE "node.id"

/* snprintf into an error buffer, where truncating a long path is acceptable. */
static void errf(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void errf(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: ft-target [--config FILE] [--key value | --key=value]...\n"
		"Storage target of a FastTier cluster: serves objects on the public port, joins the proxy.\n"
		"\n"
		"  --id ID               node id (default: <state_dir>/node.id, generated on first start)\n"
		"  --bind ADDR           listen address of both ports (default 127.0.0.1)\n"
		"  --public_port N       public (client) port (default 51080)\n"
		"  --public_host HOST    advertised public host (default: bind)\n"
		"  --control_port N      control (intra-cluster) port (default public_port+1)\n"
		"  --control_host HOST   advertised control host (default: public_host)\n"
		"  --proxy_url URL[,URL] control URL of the proxy (several, comma-separated: any may be tried;\n"
		"                        joins and keepalives then go to the primary), e.g. http://127.0.0.1:51081\n"
		"  --state_dir DIR       node state (id file), default .\n"
		"  --public_unix PATH    the public port also on this Unix socket (plain HTTP, also under TLS), for\n"
		"                        nodes of this machine and mount namespace\n"
		"                        (default <state_dir>/public-<id>.sock; off = none; not with tls_client_ca)\n"
		"  --mountpath DIR       object storage directory (repeat for several)\n"
		"  --log_level L         debug|info|warn|error (default info)\n"
		"  --log-format F        text|json: one JSON object a line (default text)\n"
		"  --loop_threads N      public-port loop threads (0 = CPUs)\n"
		"  --worker_threads N    worker pool size (default 64)\n"
		"  --keepalive_ms N      keepalive interval (default 2000)\n"
		"  --sync P              none|data|full (default none)\n"
		"  --reserve_bytes N     free space kept on each mountpath (default 64 MiB)\n"
		"  --lru_high_pct N, --lru_low_pct N  eviction watermarks, %% of a mountpath (default 90, 75)\n"
		"  --lru_quota_bytes N   per-mountpath capacity for the watermarks (default 0: the filesystem's)\n"
		"  --lru_interval_ms N   how often usage is checked (default 10000)\n"
		"  --hint_max_bytes N    memory for the epoch order hints held here (default 32 MiB)\n"
		"  --hint_prefetch_inflight N  objects staged ahead at once under hints, 0 = none (default 4)\n"
		"  --open_file_cache N   open small object files kept per loop thread for warm GETs, and as many for\n"
		"                        GetBatch items; 0 = off (default 1024)\n"
		"  --job_expiry_s N      a finished job stays listed this long (default 3600)\n"
		"  --shard_max_decoded_bytes N  bytes one shard read may decode (default 1 GiB)\n"
		"  --batch_max_buffered_bytes N  TAR bytes of one buffered GetBatch answer (strm false; default 4 GiB)\n"
		"  --mpu_expire_hours N  a multipart upload neither completed nor aborted expires this long after\n"
		"                        it started (default 168; 0 = never)\n"
		"  --http_max_header_bytes N, --http_max_headers N, --http_idle_timeout_ms N,\n"
		"  --http_header_timeout_ms N, --http_body_timeout_ms N  as for ft-proxy (ft-proxy --help)\n"
		"  --allow_public_read BOOL  serve anonymous reads the proxy redirected as public-read (default false)\n"
		"  --config FILE         JSON file with the same keys (flags win)\n"
		"  --auth BOOL           require a token or a signed URL on the public port (default false)\n"
		"  --cluster_secret FILE the cluster secret (verifies tokens and redirects, signs the control plane)\n"
		"  --insecure            allow a non-loopback bind with auth off\n"
		"  --tls_cert FILE --tls_key FILE  serve the public port over HTTPS (PEM chain and key)\n"
		"  --tls_client_ca FILE  require client certificates signed by this CA on the public port\n"
		"  --tls_ca FILE         CA trusted (besides the system's) for https URLs of other nodes\n"
		"  --check-config        parse the flags and the config file, check them, print OK and exit\n"
		"                        (binds nothing, writes nothing; exit 2 on an error)\n"
		"  --help                this text\n");
}

static int id_valid(const char *id)
{
	size_t n = strlen(id);
	if (n == 0 || n >= FT_ID_MAX)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)id[i]) && id[i] != '-' && id[i] != '_' && id[i] != '.')
			return 0;
	return 1;
}

/* Reads <state_dir>/node.id into id; 1 if found, 0 if absent, -1 on error (err filled). */
static int id_read(const char *path, char *id, char *err, size_t errlen)
{
	char buf[FT_ID_MAX + 2];
	FILE *f = fopen(path, "re");

	if (!f) {
		if (errno == ENOENT)
			return 0;
		errf(err, errlen, "cannot read %s: %s", path, strerror(errno));
		return -1;
	}
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	while (n > 0 && isspace((unsigned char)buf[n - 1]))
		buf[--n] = '\0';
	if (!id_valid(buf)) {
		errf(err, errlen, "%s does not hold a valid node id", path);
		return -1;
	}
	strcpy(id, buf);
	return 1;
}

/* Writes id to path atomically (temp file, fsync, rename). 0 or -1 with err. */
static int id_write(const char *path, const char *id, char *err, size_t errlen)
{
	char tmp[FT_PATH_MAX + 16];
	int fd, rc = -1;

	if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp)) {
		errf(err, errlen, "state_dir path too long");
		return -1;
	}
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		errf(err, errlen, "cannot create %s: %s", tmp, strerror(errno));
		return -1;
	}
	if (dprintf(fd, "%s\n", id) < 0 || fsync(fd) != 0) {
		errf(err, errlen, "cannot write %s: %s", tmp, strerror(errno));
		goto out;
	}
	if (rename(tmp, path) != 0) {
		errf(err, errlen, "cannot rename %s: %s", tmp, strerror(errno));
		goto out;
	}
	rc = 0;
out:
	close(fd);
	if (rc != 0)
		unlink(tmp);
	return rc;
}

/* --id, else <state_dir>/node.id, else a new "t-<8 hex>" persisted there. */
static int resolve_id(tgt_t *t, char *err, size_t errlen)
{
	char path[FT_PATH_MAX + 16];
	uint32_t rnd = 0;

	if (t->cfg.id[0]) {
		if (!id_valid(t->cfg.id)) {
			errf(err, errlen, "invalid --id \"%s\": use 1..%d of [A-Za-z0-9._-]", t->cfg.id, FT_ID_MAX - 1);
			return -1;
		}
		strcpy(t->id, t->cfg.id);
		return 0;
	}
	if (mkdir(t->cfg.state_dir, 0755) != 0 && errno != EEXIST) {
		errf(err, errlen, "cannot create state_dir %s: %s", t->cfg.state_dir, strerror(errno));
		return -1;
	}
	if (snprintf(path, sizeof(path), "%s/%s", t->cfg.state_dir, ID_FILE) >= (int)sizeof(path)) {
		errf(err, errlen, "state_dir path too long");
		return -1;
	}
	int rc = id_read(path, t->id, err, errlen);
	if (rc != 0)
		return rc > 0 ? 0 : -1;
	if (getrandom(&rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd)) {
		errf(err, errlen, "getrandom: %s", strerror(errno));
		return -1;
	}
	snprintf(t->id, sizeof(t->id), "t-%08x", rnd);
	if (id_write(path, t->id, err, errlen) != 0)
		return -1;
	ft_info("generated node id %s (saved in %s)", t->id, path);
	return 0;
}

/*
 * t->public_unix: the configured path, else <state_dir>/public-<id>.sock made absolute (proxies
 * run elsewhere); "" for "off" and where every client must show a certificate (tls_client_ca). The
 * socket speaks plain HTTP even when the TCP port speaks TLS: only this user on this machine reaches
 * it (0600, and dialers check the listener's user), and nothing on it crosses a network. A
 * configured path that cannot be used is an error; a derived one that is too long is left out with
 * a warning.
 */
static int resolve_unix(tgt_t *t, char *err, size_t errlen)
{
	const char *cfg = t->cfg.public_unix;
	char dir[PATH_MAX];

	t->public_unix[0] = '\0';
	if (strcmp(cfg, "off") == 0)
		return 0;
	if (t->cfg.tls_client_ca[0] != '\0') {
		if (cfg[0] == '\0')
			return 0;
		errf(err, errlen,
		     "public_unix: not with tls_client_ca (every client of the public port shows a certificate)");
		return -1;
	}
	if (cfg[0] != '\0') {
		if (cfg[0] != '/' || strlen(cfg) >= sizeof(t->public_unix)) {
			errf(err, errlen, "public_unix: an absolute path shorter than %zu bytes",
			     sizeof(t->public_unix));
			return -1;
		}
		memcpy(t->public_unix, cfg, strlen(cfg) + 1);
		return 0;
	}
	errno = 0;
	if (realpath(t->cfg.state_dir, dir) == NULL ||
	    snprintf(t->public_unix, sizeof(t->public_unix), "%s/public-%s.sock", dir, t->id) >=
		    (int)sizeof(t->public_unix)) {
		ft_warn("public_unix: no Unix socket (state_dir %s: %s); proxies here relay over TCP", t->cfg.state_dir,
			errno != 0 ? strerror(errno) : "path too long");
		t->public_unix[0] = '\0';
	}
	return 0;
}

static int start_servers(tgt_t *t, char *err, size_t errlen)
{
	ft_httpd_opts_t o;

	t->ctl = ft_ctl_start(t->cfg.bind, t->cfg.control_port, CTL_THREADS, tgt_control_handler, t, err, errlen);
	if (!t->ctl)
		return -1;
	memset(&o, 0, sizeof(o));
	o.bind = t->cfg.bind;
	o.port = t->cfg.public_port;
	o.unix_path = t->public_unix;
	o.threads = t->cfg.loop_threads;
	o.workers = t->cfg.worker_threads;
	o.max_header_bytes = t->cfg.http_max_header_bytes;
	o.max_headers = t->cfg.http_max_headers;
	o.idle_timeout_ms = t->cfg.http_idle_timeout_ms;
	o.header_timeout_ms = t->cfg.http_header_timeout_ms;
	o.body_timeout_ms = t->cfg.http_body_timeout_ms;
	o.tls_cert = t->cfg.tls_cert;
	o.tls_key = t->cfg.tls_key;
	o.tls_client_ca = t->cfg.tls_client_ca;
	o.handler = tgt_route_public;
	o.ctx = t;
	t->httpd = ft_httpd_start(&o, err, errlen);
	return t->httpd ? 0 : -1;
}

/* Releases in reverse order of main's setup; every step tolerates "never started". */
static void shutdown_all(tgt_t *t)
{
	tgt_cluster_stop(t);
	if (t->httpd)
		ft_httpd_stop(t->httpd);
	t->httpd = NULL;
	if (t->ctl)
		ft_ctl_stop(t->ctl);
	t->ctl = NULL;
	/* once no control request can read a job, before what job threads use (janitor, LRU, coldget) */
	tgt_jobs_fini(t);
	tgt_rebalance_fini(t);
	tgt_janitor_stop(t);
	tgt_hint_stop(t);
	tgt_lru_stop(t);
	tgt_fcache_stop(t); /* after the loop threads, whose caches these are, and the LRU, which has them swept */
	tgt_hint_fini(t);
	tgt_cluster_fini(t);
	tgt_jobs_free(t);
	tgt_mpu_fini(t);
	tgt_coldget_fini(t);
	tgt_list_fini(t);
	tgt_shard_fini(t);
	tgt_namelock_fini(t);
	tgt_ec_fini(t);
	tgt_mountpaths_close(t);
	ft_config_free(&t->cfg);
	ft_auth_fini();
}

/* --check-config: what startup would refuse, found without binding, joining or writing anything. Exit status. */
static int check_config(tgt_t *t)
{
	const char *url = t->cfg.proxy_url;
	const char *why = NULL;

	if (t->cfg.id[0] != '\0' && !id_valid(t->cfg.id))
		why = "invalid --id: use 1..63 of [A-Za-z0-9._-]";
	else if (t->cfg.n_mountpaths == 0)
		why = "no mountpath configured (--mountpath DIR)";
	if (why != NULL) {
		fprintf(stderr, "ft-target: %s\n", why);
		return 2;
	}
	char err[512] = ""; /* the cluster secret and the bind rule, as startup reads them */
	if (ft_auth_init(&t->cfg, false, err, sizeof(err)) != 0 ||
	    ft_tls_config_check(&t->cfg, err, sizeof(err)) != 0 ||
	    (t->cfg.public_unix[0] != '\0' && resolve_unix(t, err, sizeof(err)) != 0)) { /* a given path */
		fprintf(stderr, "ft-target: %s\n", err);
		return 2;
	}
	ft_auth_fini();
	printf("OK ft-target id=%s public=%s control=%s proxy=%s mountpaths=%d\n",
	       t->cfg.id[0] ? t->cfg.id : "(state_dir)", t->public_url, t->control_url, url[0] ? url : "(none)",
	       t->cfg.n_mountpaths);
	return 0;
}

static int has_help(int argc, char **argv)
{
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
			return 1;
	return 0;
}

int main(int argc, char **argv)
{
	static tgt_t target;
	tgt_t *t = &target;
	char err[512] = "";
	sigset_t sigs;
	int sig = 0, rc = 1, check;

	if (has_help(argc, argv)) {
		usage(stdout);
		return 0;
	}
	check = ft_config_take_flag(&argc, argv, "--check-config") > 0;
	ft_config_defaults(&t->cfg);
	if (ft_config_load(&t->cfg, argc, argv, err, sizeof(err)) != 0) {
		fprintf(stderr, "ft-target: %s (see --help)\n", err);
		ft_config_free(&t->cfg);
		return 2;
	}
	ft_log_init("ft-target", t->cfg.log_level);
	ft_log_set_format(t->cfg.log_format);
	ft_metrics_set_role(FT_M_ROLE_TARGET);
	if (snprintf(t->public_url, sizeof(t->public_url), "%s://%s:%d", t->cfg.tls_cert[0] ? "https" : "http",
		     t->cfg.public_host, t->cfg.public_port) >= (int)sizeof(t->public_url) ||
	    snprintf(t->control_url, sizeof(t->control_url), "http://%s:%d", t->cfg.control_host,
		     t->cfg.control_port) >= (int)sizeof(t->control_url)) {
		fprintf(stderr, "ft-target: public_host or control_host too long\n");
		ft_config_free(&t->cfg);
		return 2;
	}
	if (check) {
		rc = check_config(t);
		ft_config_free(&t->cfg);
		return rc;
	}

	/* Signals are taken synchronously by main; block them before any thread exists. */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);
	ft_limits_raise_nofile(); /* before the open-file cache sizes itself by it */

	if (ft_auth_init(&t->cfg, false, err, sizeof(err)) != 0 || ft_tls_config_check(&t->cfg, err, sizeof(err)) != 0)
		goto fail;
	if (resolve_id(t, err, sizeof(err)) != 0 || tgt_mountpaths_open(t, err, sizeof(err)) != 0)
		goto fail;
	if (ft_client_global_init() != 0) {
		errf(err, sizeof(err), "HTTP client initialization failed");
		goto fail;
	}
	if (tgt_fcache_init(t) != 0 || tgt_ec_init(t) != 0 || tgt_namelock_init(t) != 0 || tgt_coldget_init(t) != 0 ||
	    tgt_jobs_init(t) != 0 || tgt_mpu_init(t) != 0 || tgt_list_init(t) != 0 || tgt_shard_init(t) != 0 ||
	    tgt_cluster_init(t) != 0 || tgt_janitor_start(t) != 0 || tgt_lru_start(t) != 0 || tgt_hint_start(t) != 0 ||
	    tgt_rebalance_init(t) != 0) {
		errf(err, sizeof(err), "out of memory or threads");
		goto fail;
	}
	if (resolve_unix(t, err, sizeof(err)) != 0 || start_servers(t, err, sizeof(err)) != 0)
		goto fail;
	ft_info("target %s ready public=%s control=%s mountpaths=%d", t->id, t->public_url, t->control_url,
		t->n_mountpaths);
	if (tgt_cluster_start(t) != 0) {
		errf(err, sizeof(err), "cannot start the cluster thread");
		goto fail;
	}
	if (tgt_jobs_resume(t) != 0)
		ft_warn("cannot start the thread that resumes jobs");
	while (sigwait(&sigs, &sig) != 0)
		;
	ft_info("signal %d (%s): shutting down", sig, strsignal(sig));
	rc = 0;
fail:
	if (rc != 0)
		ft_error("%s", err);
	shutdown_all(t);
	if (rc == 0)
		ft_info("stopped");
	return rc;
}
