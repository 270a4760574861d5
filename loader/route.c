/* SPDX-License-Identifier: Apache-2.0 */
/* ft-loader routing: which host and request path an object goes to (proxy, owning target, S3, URL), SigV4 headers. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "auth/sigv4.h"
#include "base/codec.h"
#include "base/redact.h"
#include "loader.h"

static struct {
	int proxy_host;      /* native: the proxy */
	ft_smap_t *smap;     /* -direct: borrowed cluster map */
	int *target_hosts;   /* -direct: host index per smap target */
	int s3_host;         /* S3: where requests go (an alias carrying Host: bucket.endpoint) */
	char s3_prefix[512]; /* S3: endpoint path without the trailing '/' ("" or "/s3") */
	char s3_authority[LD_AUTH_MAX];
	char access_key[256], secret_key[256], region[64];
	bool signing;
	char esc_bucket[800]; /* percent-encoded bucket */
	char query[64];       /* native: "?provider=..." or "" */
} rt;

/* "host:port" for -ip/-port, bracketing an IPv6 literal. */
static void proxy_authority(const ld_opts_t *o, char *buf, size_t cap)
{
	if (strchr(o->ip, ':') != NULL && o->ip[0] != '[')
		snprintf(buf, cap, "[%s]:%d", o->ip, o->port);
	else
		snprintf(buf, cap, "%s:%d", o->ip, o->port);
}

static int init_s3(const ld_opts_t *o, char *err, size_t errlen)
{
	const char *auth, *path, *k, *s, *r;
	size_t alen, plen;
	char host[LD_AUTH_MAX + 300];
	bool tls;

	if (ld_url_split(o->s3endpoint, &auth, &alen, &path, &tls) != 0 || auth == NULL) {
		char shown[FT_REDACT_URL_MAX];
		snprintf(err, errlen, "-s3endpoint \"%s\" is not an http(s)://host:port[/path] URL",
			 ft_redact_url(o->s3endpoint, shown, sizeof(shown)));
		return -1;
	}
	plen = strcspn(path, "?#");
	while (plen > 0 && path[plen - 1] == '/')
		plen--;
	if (plen >= sizeof(rt.s3_prefix)) {
		snprintf(err, errlen, "-s3endpoint path too long");
		return -1;
	}
	memcpy(rt.s3_prefix, path, plen);
	rt.s3_prefix[plen] = '\0';
	int base = ld_host_get(auth, alen, tls, err, errlen);
	if (base < 0)
		return -1;
	if (o->s3_path_style) {
		rt.s3_host = base;
	} else {
		/* virtual-hosted style: connect to the endpoint, name the bucket in Host */
		snprintf(host, sizeof(host), "%s.%.*s", o->bucket, (int)alen, auth);
		rt.s3_host = ld_host_alias(host, strlen(host), base, err, errlen);
		if (rt.s3_host < 0)
			return -1;
	}
	snprintf(rt.s3_authority, sizeof(rt.s3_authority), "%s", ld_host_at(rt.s3_host)->authority);
	k = getenv("AWS_ACCESS_KEY_ID");
	s = getenv("AWS_SECRET_ACCESS_KEY");
	r = getenv("AWS_DEFAULT_REGION");
	if (r == NULL || *r == '\0')
		r = getenv("AWS_REGION");
	rt.signing = k != NULL && *k != '\0' && s != NULL && *s != '\0';
	snprintf(rt.access_key, sizeof(rt.access_key), "%s", rt.signing ? k : "");
	snprintf(rt.secret_key, sizeof(rt.secret_key), "%s", rt.signing ? s : "");
	snprintf(rt.region, sizeof(rt.region), "%s", r != NULL && *r != '\0' ? r : "us-east-1");
	return 0;
}

int ld_route_init(const ld_opts_t *o, ft_smap_t *smap, char *err, size_t errlen)
{
	char auth[LD_AUTH_MAX];
	ld_buf_t b = {rt.esc_bucket, 0, sizeof(rt.esc_bucket) - 1, false};

	ld_buf_escape(&b, o->bucket, strlen(o->bucket), false);
	rt.esc_bucket[b.len] = '\0';
	rt.query[0] = '\0';
	if (strcmp(o->provider, "ais") != 0)
		snprintf(rt.query, sizeof(rt.query), "?provider=%s", o->provider);
	if (o->api == LD_API_S3)
		return init_s3(o, err, errlen);
	if (o->api == LD_API_URLS)
		return 0;
	proxy_authority(o, auth, sizeof(auth));
	rt.proxy_host = ld_host_get(auth, strlen(auth), o->https, err, errlen);
	if (rt.proxy_host < 0)
		return -1;
	if (smap == NULL)
		return 0;
	if (smap->n_targets == 0) {
		snprintf(err, errlen, "the cluster map has no targets");
		return -1;
	}
	rt.smap = smap;
	rt.target_hosts = calloc((size_t)smap->n_targets, sizeof(int));
	if (rt.target_hosts == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (int i = 0; i < smap->n_targets; i++) {
		const char *a, *p;
		size_t alen;
		bool tls;
		if (ld_url_split(smap->targets[i].public_url, &a, &alen, &p, &tls) != 0 || a == NULL) {
			snprintf(err, errlen, "target %s: bad public_url \"%s\"", smap->targets[i].id,
				 smap->targets[i].public_url);
			return -1;
		}
		rt.target_hosts[i] = ld_host_get(a, alen, tls, err, errlen);
		if (rt.target_hosts[i] < 0)
			return -1;
	}
	return 0;
}

void ld_route_free(void)
{
	free(rt.target_hosts);
	rt.target_hosts = NULL;
	rt.smap = NULL;
}

int ld_route(const ld_opts_t *o, const ld_obj_t *url_obj, const char *name, size_t len, int *host, ld_buf_t *path,
	     char *err, size_t errlen)
{
	path->len = 0;
	path->overflow = false;
	switch (o->api) {
	case LD_API_URLS:
		*host = url_obj->host;
		ld_buf_str(path, url_obj->name);
		break;
	case LD_API_S3:
		*host = rt.s3_host;
		ld_buf_str(path, rt.s3_prefix);
		if (o->s3_path_style) {
			ld_buf_add(path, "/", 1);
			ld_buf_str(path, rt.esc_bucket);
		}
		ld_buf_add(path, "/", 1);
		ld_buf_escape(path, name, len, true);
		break;
	case LD_API_NATIVE:
	default:
		*host = ld_route_host_of(ld_route_owner(o, name, len));
		ld_buf_add(path, "/v1/objects/", 12);
		ld_buf_str(path, rt.esc_bucket);
		ld_buf_add(path, "/", 1);
		ld_buf_escape(path, name, len, true);
		ld_buf_str(path, rt.query);
		break;
	}
	if (path->overflow) {
		snprintf(err, errlen, "request path too long");
		return -1;
	}
	path->p[path->len] = '\0'; /* callers size path with one spare byte */
	return 0;
}

int ld_route_owner(const ld_opts_t *o, const char *name, size_t len)
{
	if (rt.smap == NULL)
		return -1;
	return (int)(ft_smap_owner(rt.smap, o->provider, o->bucket, name, len) - rt.smap->targets);
}

int ld_route_targets(void)
{
	return rt.smap != NULL ? rt.smap->n_targets : 0;
}

int ld_route_host_of(int t)
{
	return t >= 0 && rt.smap != NULL ? rt.target_hosts[t] : rt.proxy_host;
}

bool ld_s3_signing(void)
{
	return rt.signing;
}

/* The current x-amz-date, formatted once per second per thread. */
static const char *amz_now(void)
{
	static _Thread_local time_t last;
	static _Thread_local char date[17];
	time_t now = time(NULL);

	if (now != last) {
		ft_date_format_amz(now, date);
		last = now;
	}
	return date;
}

int ld_s3_sign_headers(ld_buf_t *b, const ld_reqspec_t *rs)
{
	char path[LD_PATH_MAX], auth[512];
	const char *q, *date;
	size_t plen;

	if (!rt.signing)
		return 0; /* anonymous requests */
	date = amz_now();
	q = strchr(rs->path, '?');
	plen = q != NULL ? (size_t)(q - rs->path) : strlen(rs->path);
	if (plen >= sizeof(path))
		return -1;
	memcpy(path, rs->path, plen);
	path[plen] = '\0';
	ft_sigv4_header_t h[3] = {
		{"host", rs->authority},
		{"x-amz-content-sha256", FT_SIGV4_UNSIGNED},
		{"x-amz-date", date},
	};
	ft_sigv4_request_t req = {
		.method = rs->method,
		.path = path,
		.query = q != NULL ? q + 1 : "",
		.headers = h,
		.n_headers = 3,
		.payload_hash = FT_SIGV4_UNSIGNED,
	};
	if (ft_sigv4_sign(&req, rt.access_key, rt.secret_key, rt.region, "s3", date, auth, sizeof(auth)) != 0)
		return -1;
	ld_buf_str(b, "x-amz-content-sha256: " FT_SIGV4_UNSIGNED "\r\nx-amz-date: ");
	ld_buf_str(b, date);
	ld_buf_str(b, "\r\nAuthorization: ");
	ld_buf_str(b, auth);
	ld_buf_add(b, "\r\n", 2);
	return 0;
}
