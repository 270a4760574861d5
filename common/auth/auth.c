/* SPDX-License-Identifier: Apache-2.0 */
/* The daemon's authentication state: the cluster secret, the derived keys, the identity store and the bind check. */
#include "auth/auth.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "auth/jwt.h"
#include "base/log.h"

/*
 * DESIGN
 * One cluster secret, shared by every node through a file in its state dir, is the root of all
 * intra-cluster trust. Each use gets its own key, HMAC-SHA256(secret, label), so a key that
 * leaks through one use (say a redirect signature oracle) says nothing about the others.
 */

static ft_auth_t state;

const ft_auth_t *ft_auth(void)
{
	return &state;
}

int ft_auth_derive(const void *secret, size_t len, const char *label, uint8_t out[FT_AUTH_KEY_LEN])
{
	unsigned int n = FT_AUTH_KEY_LEN;

	return HMAC(EVP_sha256(), secret, (int)len, (const unsigned char *)label, strlen(label), out, &n) != NULL &&
			       n == FT_AUTH_KEY_LEN
		       ? 0
		       : -1;
}

bool ft_auth_is_loopback(const char *bind)
{
	struct in_addr a4;
	struct in6_addr a6;

	if (strcasecmp(bind, "localhost") == 0)
		return true;
	if (inet_pton(AF_INET, bind, &a4) == 1)
		return (ntohl(a4.s_addr) >> 24) == 127;
	if (inet_pton(AF_INET6, bind, &a6) == 1)
		return IN6_IS_ADDR_LOOPBACK(&a6);
	return false; /* a name or the wildcard: reachable from elsewhere */
}

long ft_auth_read_secret(const char *path, char *out, size_t cap, char *err, size_t errlen)
{
	struct stat st;
	ssize_t n;
	size_t len;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0) {
		snprintf(err, errlen, "secret file %s: %s", path, strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) == 0 && (st.st_mode & 077) != 0)
		ft_warn("secret file %s is readable by group or others (mode %03o): chmod 600 it", path,
			(unsigned)(st.st_mode & 0777));
	n = read(fd, out, cap - 1);
	close(fd);
	if (n < 0) {
		snprintf(err, errlen, "secret file %s: %s", path, strerror(errno));
		return -1;
	}
	len = (size_t)n;
	while (len > 0 && (out[len - 1] == '\n' || out[len - 1] == '\r' || out[len - 1] == ' '))
		len--;
	out[len] = '\0';
	if (len < FT_SECRET_MIN) {
		OPENSSL_cleanse(out, cap);
		snprintf(err, errlen, "secret file %s: shorter than %d bytes", path, FT_SECRET_MIN);
		return -1;
	}
	return (long)len;
}

static int load_secret(const char *path, char *err, size_t errlen)
{
	char secret[4096];
	long n = ft_auth_read_secret(path, secret, sizeof(secret), err, errlen);
	int rc = -1;

	if (n < 0)
		return -1;
	if (ft_auth_derive(secret, (size_t)n, "fasttier jwt v1", state.jwt_key) == 0 &&
	    ft_auth_derive(secret, (size_t)n, "fasttier url v1", state.url_key) == 0 &&
	    ft_auth_derive(secret, (size_t)n, "fasttier ctl v1", state.ctl_key) == 0 &&
	    ft_auth_derive(secret, (size_t)n, "fasttier seal v1", state.seal_key) == 0)
		rc = 0;
	OPENSSL_cleanse(secret, sizeof(secret));
	if (rc != 0)
		snprintf(err, errlen, "cannot derive keys from the cluster secret");
	state.have_secret = rc == 0;
	return rc;
}

static int load_ids(const ft_config_t *c, char *err, size_t errlen)
{
	const char *path = c->auth_keys[0] != '\0' ? c->auth_keys : c->s3_keys;

	if (path[0] == '\0') {
		if (c->auth)
			ft_warn("auth: no auth_keys (nor s3_keys): no key pair can get a token");
		return 0;
	}
	char why[512];
	struct stat st;

	if (stat(path, &st) == 0 && (st.st_mode & 077) != 0) /* it holds every key's secret */
		ft_warn("identity store %s is readable by group or others (mode %03o): chmod 600 it", path,
			(unsigned)(st.st_mode & 0777));
	state.ids = ft_ident_load(path, why, sizeof(why));
	if (state.ids == NULL) {
		snprintf(err, errlen, "%s %s", c->auth_keys[0] != '\0' ? "auth_keys" : "s3_keys", why);
		return -1;
	}
	ft_info("auth: %zu access key(s) from %s", ft_ident_count(state.ids), path);
	return 0;
}

int ft_auth_init(const ft_config_t *c, bool with_ids, char *err, size_t errlen)
{
	memset(&state, 0, sizeof(state));
	state.enabled = c->auth != 0;
	state.anonymous_metrics = c->auth_anonymous_metrics != 0;
	state.public_read = c->allow_public_read != 0;
	state.token_ttl_max = c->token_ttl_max;
	if (!state.enabled && !ft_auth_is_loopback(c->bind)) {
		if (!c->insecure) {
			snprintf(err, errlen,
				 "refusing to listen on %s with authentication off: anyone who reaches it could "
				 "read, write and delete every object. Turn auth on (--auth true with "
				 "--cluster_secret FILE), or pass --insecure to accept that",
				 c->bind);
			return -1;
		}
		ft_warn("INSECURE: listening on %s with authentication OFF (--insecure): every client that can "
			"reach this address has full access to the data and the cluster",
			c->bind);
	}
	if (c->cluster_secret[0] != '\0' && load_secret(c->cluster_secret, err, errlen) != 0)
		return -1;
	if (state.enabled && !state.have_secret) {
		snprintf(err, errlen,
			 "auth is on but no cluster_secret file is given (tokens and redirects are "
			 "signed with keys derived from it)");
		return -1;
	}
	if (state.enabled && c->s3_anonymous) {
		snprintf(err, errlen,
			 "s3_anonymous: not with auth on (an unsigned S3 request would pass every role check); "
			 "for anonymous reads of public data use allow_public_read");
		return -1;
	}
	if (with_ids && load_ids(c, err, errlen) != 0)
		return -1;
	if (state.enabled)
		ft_info("auth: on (tokens, signed redirects)%s",
			state.anonymous_metrics ? "; /metrics and /v1/daemon anonymous" : "");
	if (state.have_secret)
		ft_info("auth: control plane requests are signed with the cluster secret");
	return 0;
}

void ft_auth_fini(void)
{
	ft_ident_free(state.ids);
	OPENSSL_cleanse(&state, sizeof(state));
}

int ft_auth_bearer(const char *authz, time_t now, ft_principal_t *p, const char **why)
{
	ft_jwt_result_t r;

	memset(p, 0, sizeof(*p));
	if (authz == NULL || strncasecmp(authz, "Bearer ", 7) != 0)
		return 1;
	authz += 7;
	while (*authz == ' ')
		authz++;
	r = ft_jwt_verify(state.jwt_key, authz, strlen(authz), now, p, NULL);
	if (r != FT_JWT_OK) {
		*why = ft_jwt_strerror(r);
		return -1;
	}
	return 0;
}
