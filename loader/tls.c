/* SPDX-License-Identifier: Apache-2.0 */
/* ft-loader TLS client: the process's SSL_CTX, verified non-blocking connections, session resumption per host. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "loader.h"

/*
 * DESIGN
 * One SSL_CTX for the whole process (made before the threads start, read-only after), one SSL per
 * connection over its non-blocking socket. Every peer is verified: the chain against the CA bundle
 * and the certificate against the host's name (SNI sent) or IP address. There is no switch to turn
 * that off. Callers map LD_TLS_WANT_READ/WRITE to their own waiting (poll in sync.c, epoll in
 * engine.c). The last session each host gave is kept (under a mutex: new connections are rare) and
 * offered on the next connection to it, so a pool refilling after a server closed idle connections
 * resumes instead of doing a full handshake.
 */

static const ld_opts_t *opts;
static pthread_mutex_t ctx_mu = PTHREAD_MUTEX_INITIALIZER;
static SSL_CTX *_Atomic ctx;
static char cafile[1024];
static int host_index = -1; /* SSL ex_data slot: the host index the SSL talks to */
static pthread_mutex_t sess_mu = PTHREAD_MUTEX_INITIALIZER;
static SSL_SESSION *sessions[LD_MAX_HOSTS];

/* OpenSSL's new-session callback: keeps the session for the host (1: we own the reference). */
static int new_session(SSL *s, SSL_SESSION *sess)
{
	intptr_t h = (intptr_t)SSL_get_ex_data(s, host_index);

	if (h < 0 || h >= LD_MAX_HOSTS)
		return 0;
	pthread_mutex_lock(&sess_mu);
	if (sessions[h] != NULL)
		SSL_SESSION_free(sessions[h]);
	sessions[h] = sess;
	pthread_mutex_unlock(&sess_mu);
	return 1;
}

/* The default CA bundle: FT_CACERT as the ft CLI reads it, else ft-cluster's FT_STATE_DIR/tls/ca.pem. */
static void default_cafile(char *buf, size_t cap)
{
	const char *env = getenv("FT_CACERT"), *dir = getenv("FT_STATE_DIR");

	buf[0] = '\0';
	if (env != NULL && env[0] != '\0') {
		snprintf(buf, cap, "%s", env);
	} else if (dir != NULL && dir[0] != '\0') {
		snprintf(buf, cap, "%s/tls/ca.pem", dir);
		if (access(buf, R_OK) != 0)
			buf[0] = '\0';
	}
}

/* OpenSSL's first queued reason into buf (the queue cleared); "unknown error" when none. */
static const char *ssl_reason(char *buf, size_t cap)
{
	unsigned long e = ERR_get_error();

	if (e == 0)
		snprintf(buf, cap, "unknown error");
	else
		ERR_error_string_n(e, buf, cap);
	ERR_clear_error();
	return buf;
}

/* Makes the context (under ctx_mu). Returns 0, -1 with err. */
static int make_ctx(char *err, size_t errlen)
{
	SSL_CTX *c;
	char why[256];

	if (opts != NULL && opts->cacert[0])
		snprintf(cafile, sizeof(cafile), "%s", opts->cacert);
	else
		default_cafile(cafile, sizeof(cafile));
	c = SSL_CTX_new(TLS_client_method());
	if (c == NULL) {
		snprintf(err, errlen, "TLS: %s", ssl_reason(why, sizeof(why)));
		return -1;
	}
	SSL_CTX_set_min_proto_version(c, TLS1_2_VERSION);
	SSL_CTX_set_verify(c, SSL_VERIFY_PEER, NULL);
	/* a server may close a keep-alive connection without close_notify: that is an end, not an attack
	 * here (bodies are framed by Content-Length or chunking, and checked) */
	SSL_CTX_set_options(c, SSL_OP_IGNORE_UNEXPECTED_EOF | SSL_OP_NO_RENEGOTIATION);
	/* partial writes: a write that blocks is retried with what is left, from the same place */
	SSL_CTX_set_mode(c, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	/* read ahead: one recv fills OpenSSL's buffer with several records instead of two reads per record
	 * (header, then body); what it holds beyond a read shows in SSL_has_pending */
	SSL_CTX_set_read_ahead(c, 1);
	SSL_CTX_set_default_read_buffer_len(c, 64 * 1024);
	if (cafile[0] ? SSL_CTX_load_verify_locations(c, cafile, NULL) != 1
		      : SSL_CTX_set_default_verify_paths(c) != 1) {
		snprintf(err, errlen, "TLS: cannot load the CA bundle %s: %s", cafile[0] ? cafile : "(system)",
			 ssl_reason(why, sizeof(why)));
		goto fail;
	}
	host_index = SSL_get_ex_new_index(0, NULL, NULL, NULL, NULL);
	SSL_CTX_set_session_cache_mode(c, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
	SSL_CTX_sess_set_new_cb(c, new_session);
	ctx = c;
	return 0;
fail:
	SSL_CTX_free(c);
	return -1;
}

/* The context, made on first use (a plain run never pays for loading CAs). NULL with err. */
static SSL_CTX *get_ctx(char *err, size_t errlen)
{
	SSL_CTX *c = ctx;

	if (c != NULL)
		return c;
	pthread_mutex_lock(&ctx_mu);
	if (ctx == NULL)
		make_ctx(err, errlen);
	c = ctx;
	pthread_mutex_unlock(&ctx_mu);
	return c;
}

int ld_tls_init(const ld_opts_t *o, bool now, char *err, size_t errlen)
{
	opts = o;
	return now && get_ctx(err, errlen) == NULL ? -1 : 0;
}

void ld_tls_free(void)
{
	for (int i = 0; i < LD_MAX_HOSTS; i++) {
		if (sessions[i] != NULL)
			SSL_SESSION_free(sessions[i]);
		sessions[i] = NULL;
	}
	SSL_CTX_free(ctx);
	ctx = NULL;
}

const char *ld_tls_cafile(void)
{
	return cafile;
}

ld_ssl_t *ld_tls_new(int fd, const ld_host_t *h, char *err, size_t errlen)
{
	unsigned char ip[16];
	bool is_ip = inet_pton(AF_INET, h->name, ip) == 1 || inet_pton(AF_INET6, h->name, ip) == 1;
	intptr_t idx = h - ld_host_at(0);
	char why[256];
	SSL *s;
	SSL_CTX *c = get_ctx(err, errlen);

	if (c == NULL)
		return NULL;
	s = SSL_new(c);
	if (s == NULL || SSL_set_fd(s, fd) != 1)
		goto fail;
	if (is_ip) {
		if (X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(s), h->name) != 1)
			goto fail;
	} else if (SSL_set_tlsext_host_name(s, h->name) != 1 || SSL_set1_host(s, h->name) != 1) {
		goto fail;
	}
	SSL_set_ex_data(s, host_index, (void *)idx);
	pthread_mutex_lock(&sess_mu);
	if (idx >= 0 && idx < LD_MAX_HOSTS && sessions[idx] != NULL)
		SSL_set_session(s, sessions[idx]);
	pthread_mutex_unlock(&sess_mu);
	SSL_set_connect_state(s);
	return s;
fail:
	snprintf(err, errlen, "TLS to %s: %s", h->authority, ssl_reason(why, sizeof(why)));
	SSL_free(s);
	return NULL;
}

/* Maps a failed SSL_* call; fills err for LD_TLS_ERROR. Returns -ld_tls_rc_t. */
static int map_error(SSL *s, int ret, const char *what, const ld_host_t *h, char *err, size_t errlen)
{
	int e = SSL_get_error(s, ret);
	long v;
	char why[256];

	switch (e) {
	case SSL_ERROR_WANT_READ:
		return -LD_TLS_WANT_READ;
	case SSL_ERROR_WANT_WRITE:
		return -LD_TLS_WANT_WRITE;
	case SSL_ERROR_ZERO_RETURN:
		ERR_clear_error();
		return -LD_TLS_CLOSED;
	default:
		break;
	}
	v = SSL_get_verify_result(s);
	if (v != X509_V_OK) {
		ERR_clear_error();
		snprintf(err, errlen, "TLS %s %s: certificate verify failed: %s", what, h->authority,
			 X509_verify_cert_error_string(v));
	} else if (e == SSL_ERROR_SYSCALL && ERR_peek_error() == 0) {
		snprintf(err, errlen, "TLS %s %s: %s", what, h->authority,
			 errno != 0 ? strerror(errno) : "connection closed");
	} else {
		snprintf(err, errlen, "TLS %s %s: %s", what, h->authority, ssl_reason(why, sizeof(why)));
	}
	return -LD_TLS_ERROR;
}

int ld_tls_handshake(ld_ssl_t *s, const ld_host_t *h, char *err, size_t errlen)
{
	int ret;

	ERR_clear_error();
	errno = 0;
	ret = SSL_do_handshake(s);
	if (ret == 1)
		return LD_TLS_OK;
	return map_error(s, ret, "handshake with", h, err, errlen);
}

ssize_t ld_tls_read(ld_ssl_t *s, void *buf, size_t n, const ld_host_t *h, char *err, size_t errlen)
{
	size_t got = 0;
	int ret;

	ERR_clear_error();
	errno = 0;
	ret = SSL_read_ex(s, buf, n, &got);
	if (ret == 1)
		return (ssize_t)got;
	return map_error(s, ret, "read from", h, err, errlen);
}

ssize_t ld_tls_write(ld_ssl_t *s, const void *buf, size_t n, const ld_host_t *h, char *err, size_t errlen)
{
	size_t put = 0;
	int ret;

	ERR_clear_error();
	errno = 0;
	ret = SSL_write_ex(s, buf, n, &put);
	if (ret == 1)
		return (ssize_t)put;
	return map_error(s, ret, "write to", h, err, errlen);
}

int ld_tls_pending(ld_ssl_t *s)
{
	return SSL_has_pending(s);
}

void ld_tls_close(ld_ssl_t *s)
{
	SSL_free(s);
}
