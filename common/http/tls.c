/* SPDX-License-Identifier: Apache-2.0 */
/* TLS on the public port: the server's OpenSSL context and each connection's handshake and record layer. */
#include "http/internal.h"

#include <errno.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "base/log.h"

/*
 * DESIGN
 * OpenSSL runs non-blocking over the connection's socket (a socket BIO, so that OpenSSL can switch
 * the socket to kernel TLS after the handshake when the kernel offers it). The ring is used for
 * readiness instead of data: where a plain connection submits a recv or a send, a TLS connection
 * submits a POLL_ADD for the readiness OpenSSL asked for (or a NOP when the answer is already known)
 * under the same TAG_RECV / TAG_SEND tag, and the completion runs SSL_read / SSL_write before the
 * plain completion handler sees a result in the usual form (bytes, 0 at the end, -errno). So the
 * connection's state machine (conn.c, resp.c, stream.c) is the same for both.
 *
 * - recv: SSL_read into the read buffer where the recv would have written. The handshake happens in
 *   the first SSL_read. When OpenSSL already holds bytes (SSL_has_pending: read-ahead may have taken
 *   several records in one read) the arm is a NOP, since the socket may never become readable again
 *   for them; but not after an SSL_read that wanted more (the bytes held are a partial record).
 * - send: SSL_write of the whole piece at once (no partial writes): done at once -> a NOP completes
 *   with n; the socket full -> POLLOUT, then SSL_write again with the same buffer and length, as
 *   OpenSSL requires. The caller keeps the buffer until the completion, as it does for a ring send.
 * - file and pipe bodies (resp.c, stream.c): with kernel TLS on the send side, sendfile / splice go
 *   to the socket as on a plain connection (the kernel encrypts; no copy through user memory).
 *   Without it, up to TLS_STAGE bytes are read into a per-connection staging buffer and written
 *   with SSL_write; bytes staged but not yet written stay there until the socket takes them, and the
 *   caller (which asks again with the same offset after EAGAIN) is told of them then. The head of a
 *   file response (ft_resp_file) is staged in front of the first file bytes, so it shares their
 *   records and write instead of costing a record and a write of its own.
 * Every call is on the connection's loop thread.
 */

#define TLS_STAGE (64 * 1024)

struct http_tls_conn {
	SSL *ssl;
	bool ready;         /* handshake done */
	bool ktls_tx;       /* the kernel encrypts what is written to the socket */
	bool rd_want_write; /* the last SSL_read needs the socket writable */
	bool rd_starved;    /* the last SSL_read wanted more bytes: what OpenSSL buffered is a partial record */
	bool wr_want_read;  /* the last SSL_write needs the socket readable */
	int send_res;       /* what the pending TAG_SEND completion reports when it is a NOP */
	const void *send_p; /* an SSL_write waiting for POLLOUT: buffer and length to repeat */
	size_t send_n;
	unsigned char *stage; /* TLS_STAGE bytes, malloc'd on the first file body */
	size_t stage_len;     /* staged bytes not yet written */
	size_t stage_head;    /* of which a response head, at the front (not counted as file bytes) */
};

static atomic_bool ktls_reported;

/* The most recent OpenSSL error as text (clears the queue). */
static void ssl_errstr(char *buf, size_t cap)
{
	unsigned long e = ERR_get_error(), more;

	if (e == 0) {
		snprintf(buf, cap, "unknown error");
		return;
	}
	while ((more = ERR_get_error()) != 0)
		e = more;
	ERR_error_string_n(e, buf, cap);
}

/* ---- context ---- */

static SSL_CTX *ctx_fail(SSL_CTX *ctx, const char *what, const char *file, char *err, size_t errlen)
{
	char why[256];

	ssl_errstr(why, sizeof(why));
	snprintf(err, errlen, "tls: %s %s: %s", what, file, why);
	SSL_CTX_free(ctx);
	return NULL;
}

/* 0 when path opens for reading; -1 with err naming the key, the file and why not. */
static int file_check(const char *key, const char *path, char *err, size_t errlen)
{
	FILE *f = fopen(path, "r");

	if (f == NULL) {
		snprintf(err, errlen, "tls: %s %s: %s", key, path, strerror(errno));
		return -1;
	}
	fclose(f);
	return 0;
}

/* A server context for o's certificate, key and optional client CA. NULL with err filled. */
static SSL_CTX *ctx_build(const ft_httpd_opts_t *o, char *err, size_t errlen)
{
	static const unsigned char sid[] = "fasttier";
	SSL_CTX *ctx;

	if (o->tls_cert == NULL || o->tls_cert[0] == '\0' || o->tls_key == NULL || o->tls_key[0] == '\0') {
		snprintf(err, errlen, "tls: tls_cert and tls_key go together (tls_client_ca needs both)");
		return NULL;
	}
	if (file_check("tls_cert", o->tls_cert, err, errlen) != 0 ||
	    file_check("tls_key", o->tls_key, err, errlen) != 0 ||
	    (o->tls_client_ca != NULL && o->tls_client_ca[0] != '\0' &&
	     file_check("tls_client_ca", o->tls_client_ca, err, errlen) != 0))
		return NULL;
	ctx = SSL_CTX_new(TLS_server_method());
	if (ctx == NULL) {
		snprintf(err, errlen, "tls: no memory for a context");
		return NULL;
	}
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	SSL_CTX_set_options(ctx, SSL_OP_ENABLE_KTLS | SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
	SSL_CTX_set_mode(ctx, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER | SSL_MODE_RELEASE_BUFFERS);
	SSL_CTX_set_session_id_context(ctx, sid, sizeof(sid) - 1);
	SSL_CTX_set_read_ahead(ctx, 1); /* one read(2) per socket wake-up, not one per record header and body */
	if (SSL_CTX_use_certificate_chain_file(ctx, o->tls_cert) != 1)
		return ctx_fail(ctx, "tls_cert", o->tls_cert, err, errlen);
	if (SSL_CTX_use_PrivateKey_file(ctx, o->tls_key, SSL_FILETYPE_PEM) != 1 &&
	    ERR_GET_REASON(ERR_peek_last_error()) != X509_R_KEY_VALUES_MISMATCH)
		return ctx_fail(ctx, "tls_key", o->tls_key, err, errlen);
	if (SSL_CTX_check_private_key(ctx) != 1) {
		snprintf(err, errlen, "tls: tls_key %s is not the key of tls_cert %s", o->tls_key, o->tls_cert);
		SSL_CTX_free(ctx);
		ERR_clear_error();
		return NULL;
	}
	if (o->tls_client_ca != NULL && o->tls_client_ca[0] != '\0') {
		STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(o->tls_client_ca);

		if (names == NULL || SSL_CTX_load_verify_locations(ctx, o->tls_client_ca, NULL) != 1) {
			sk_X509_NAME_pop_free(names, X509_NAME_free);
			return ctx_fail(ctx, "tls_client_ca", o->tls_client_ca, err, errlen);
		}
		SSL_CTX_set_client_CA_list(ctx, names);
		SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
	}
	return ctx;
}

int ft_httpd_tls_check(const ft_httpd_opts_t *o, char *err, size_t errlen)
{
	SSL_CTX *ctx;

	if (!ft_httpd_opts_tls(o))
		return 0;
	ctx = ctx_build(o, err, errlen);
	if (ctx == NULL)
		return -1;
	SSL_CTX_free(ctx);
	return 0;
}

int ft_httpd_opts_tls(const ft_httpd_opts_t *o)
{
	return (o->tls_cert != NULL && o->tls_cert[0] != '\0') || (o->tls_key != NULL && o->tls_key[0] != '\0') ||
	       (o->tls_client_ca != NULL && o->tls_client_ca[0] != '\0');
}

int http_tls_ctx_init(ft_httpd_t *s, char *err, size_t errlen)
{
	s->tls_ctx = NULL;
	if (!ft_httpd_opts_tls(&s->o))
		return 0;
	s->tls_ctx = ctx_build(&s->o, err, errlen);
	return s->tls_ctx != NULL ? 0 : -1;
}

void http_tls_ctx_free(ft_httpd_t *s)
{
	SSL_CTX_free(s->tls_ctx);
	s->tls_ctx = NULL;
}

/* ---- connections ---- */

int http_tls_conn_new(conn_t *c)
{
	http_tls_conn_t *t = calloc(1, sizeof(*t));

	if (t == NULL)
		return -1;
	t->ssl = SSL_new(c->L->s->tls_ctx);
	if (t->ssl == NULL || SSL_set_fd(t->ssl, c->fd) != 1) {
		SSL_free(t->ssl);
		free(t);
		ERR_clear_error();
		return -1;
	}
	SSL_set_accept_state(t->ssl);
	c->tls = t;
	return 0;
}

void http_tls_conn_free(conn_t *c)
{
	if (c->tls == NULL)
		return;
	SSL_free(c->tls->ssl);
	free(c->tls->stage);
	free(c->tls);
	c->tls = NULL;
}

/* Sends a TLS close_notify if the handshake is done and the socket takes it now; best effort. */
void http_tls_close_notify(conn_t *c)
{
	if (c->tls == NULL || !c->tls->ready || c->closed)
		return;
	if (SSL_shutdown(c->tls->ssl) < 0)
		ERR_clear_error();
}

/* Notes the handshake's outcome once per connection, and once per process whether kTLS is in use. */
static void on_handshake(conn_t *c)
{
	http_tls_conn_t *t = c->tls;
	bool expected = false;

	t->ready = true;
	t->ktls_tx = BIO_get_ktls_send(SSL_get_wbio(t->ssl)) > 0;
	ft_debug("http: tls %s %s with %s%s", SSL_get_version(t->ssl), SSL_get_cipher_name(t->ssl), c->peer,
		 t->ktls_tx ? " (kTLS send)" : "");
	if (atomic_compare_exchange_strong(&ktls_reported, &expected, true))
		ft_info("http: tls: kernel TLS %s: object bodies go %s", t->ktls_tx ? "on" : "off",
			t->ktls_tx ? "by sendfile(2) through the kernel's TLS" : "through SSL_write of read buffers");
}

/* Submits the readiness wait (or a NOP when the answer is known) for an operation tagged tag. */
static void arm(conn_t *c, unsigned tag, short events, bool now)
{
	struct io_uring_sqe *sqe = http_get_sqe(c->L);

	if (now)
		io_uring_prep_nop(sqe);
	else
		io_uring_prep_poll_add(sqe, c->fd, events);
	io_uring_sqe_set_data64(sqe, http_ud(c, tag));
}

void http_tls_recv_arm(conn_t *c)
{
	http_tls_conn_t *t = c->tls;

	/* buffered bytes answer at once, unless they are a record still incomplete (a NOP would spin) */
	arm(c, TAG_RECV, t->rd_want_write ? POLLOUT : POLLIN, !t->rd_starved && SSL_has_pending(t->ssl) == 1);
}

/* A plain HTTP request on the TLS port: a plain 400 saying so, then whatever else came is dropped. */
static void answer_plain_http(conn_t *c)
{
#define PLAIN_BODY "This port speaks HTTPS: use https://.\n"
	static const char msg[] = "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\nContent-Length: 38\r\n"
				  "Connection: close\r\n\r\n" PLAIN_BODY;
	char sink[4096];

	if (send(c->fd, msg, sizeof(msg) - 1, MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
		return;
	/* unread input at close would turn into a reset that may destroy the answer in flight */
	while (recv(c->fd, sink, sizeof(sink), MSG_DONTWAIT) > 0)
		;
}

/* A failed SSL_read: logs why at debug level (clients that go away are normal), answers plain HTTP. */
static int read_failed(conn_t *c, int rc)
{
	int e = SSL_get_error(c->tls->ssl, rc);
	unsigned long code = ERR_peek_error();
	char why[256];

	if (e == SSL_ERROR_ZERO_RETURN || (e == SSL_ERROR_SYSCALL && code == 0)) {
		ERR_clear_error();
		return 0; /* close_notify, or EOF / reset */
	}
	if (!c->tls->ready && ERR_GET_REASON(code) == SSL_R_HTTP_REQUEST)
		answer_plain_http(c);
	ssl_errstr(why, sizeof(why));
	ft_debug("http: tls %s from %s: %s", c->tls->ready ? "read" : "handshake", c->peer, why);
	return -ECONNRESET;
}

bool http_tls_on_recv(conn_t *c, int *res)
{
	http_tls_conn_t *t = c->tls;
	int rc, e;

	if (*res < 0 || c->closed) {
		if (*res >= 0)
			*res = -ECANCELED;
		return true;
	}
	ERR_clear_error();
	rc = SSL_read(t->ssl, c->buf + c->end, (int)(c->cap - c->end > INT32_MAX ? INT32_MAX : c->cap - c->end));
	if (!t->ready && SSL_is_init_finished(t->ssl))
		on_handshake(c);
	if (rc > 0) {
		t->rd_want_write = t->rd_starved = false;
		*res = rc;
		return true;
	}
	e = SSL_get_error(t->ssl, rc);
	if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
		/* a partial record, a handshake step or a ticket: wait again; the operation stays in flight */
		t->rd_want_write = e == SSL_ERROR_WANT_WRITE;
		t->rd_starved = true;
		c->refs++;
		http_tls_recv_arm(c);
		return false;
	}
	*res = read_failed(c, rc);
	return true;
}

/*
 * One SSL_write of n bytes: n, or -1 with errno EAGAIN (call again with the same p and n once the
 * socket is ready: t->wr_want_read says for reading) or EPIPE.
 */
static ssize_t tls_write(conn_t *c, const void *p, size_t n)
{
	http_tls_conn_t *t = c->tls;
	size_t done = 0;
	int rc, e;

	if (n == 0)
		return 0;
	if (n > INT32_MAX)
		n = INT32_MAX;
	ERR_clear_error();
	rc = SSL_write_ex(t->ssl, p, n, &done) == 1 ? 1 : 0;
	if (rc == 1) {
		t->wr_want_read = false;
		return (ssize_t)done;
	}
	e = SSL_get_error(t->ssl, 0);
	if (e == SSL_ERROR_WANT_WRITE || e == SSL_ERROR_WANT_READ) {
		t->wr_want_read = e == SSL_ERROR_WANT_READ;
		errno = EAGAIN;
		return -1;
	}
	if (e == SSL_ERROR_SSL) {
		char why[256];

		ssl_errstr(why, sizeof(why));
		ft_debug("http: tls write to %s: %s", c->peer, why);
	}
	ERR_clear_error();
	errno = EPIPE;
	return -1;
}

/* Tries the pending SSL_write; true when the completion may report t->send_res. */
static bool send_try(conn_t *c)
{
	http_tls_conn_t *t = c->tls;
	ssize_t k = tls_write(c, t->send_p, t->send_n);

	if (k < 0 && errno == EAGAIN)
		return false;
	t->send_res = k < 0 ? -EPIPE : (int)k;
	return true;
}

void http_tls_send(conn_t *c, const void *p, size_t n)
{
	http_tls_conn_t *t = c->tls;

	t->send_p = p;
	t->send_n = n > (1u << 30) ? (1u << 30) : n;
	if (send_try(c)) {
		t->send_p = NULL;
		arm(c, TAG_SEND, 0, true);
	} else
		arm(c, TAG_SEND, t->wr_want_read ? POLLIN : POLLOUT, false);
}

bool http_tls_on_send(conn_t *c, int *res)
{
	http_tls_conn_t *t = c->tls;

	if (*res < 0 || c->closed) {
		*res = *res < 0 ? *res : -ECANCELED;
		return true;
	}
	if (t->send_p == NULL) {
		*res = t->send_res; /* the NOP of a write that was done at once */
		return true;
	}
	if (!send_try(c)) {
		c->refs++;
		arm(c, TAG_SEND, t->wr_want_read ? POLLIN : POLLOUT, false);
		return false;
	}
	*res = t->send_res;
	t->send_p = NULL;
	return true;
}

/* The staging buffer (allocated on first use); false when out of memory. */
static bool stage_get(http_tls_conn_t *t)
{
	if (t->stage == NULL)
		t->stage = malloc(TLS_STAGE);
	return t->stage != NULL;
}

ssize_t http_tls_write_head(conn_t *c, const void *p, size_t n, bool may_stage)
{
	http_tls_conn_t *t = c->tls;

	if (!may_stage || t->ktls_tx || t->stage_len != 0 || n > TLS_STAGE / 4 || !stage_get(t))
		return tls_write(c, p, n);
	memcpy(t->stage, p, n);
	t->stage_len = t->stage_head = n;
	return (ssize_t)n;
}

ssize_t http_tls_sendfile(conn_t *c, int fd, off_t *off, size_t n, bool pipe)
{
	http_tls_conn_t *t = c->tls;
	ssize_t k;

	if (t->ktls_tx && t->stage_len == 0) {
		if (pipe)
			return splice(fd, NULL, c->fd, NULL, n, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
		return sendfile(c->fd, fd, off, n);
	}
	if (t->stage_len == t->stage_head) { /* nothing staged but perhaps the head: read file bytes after it */
		size_t room = TLS_STAGE - t->stage_head, want = n < room ? n : room;

		if (!stage_get(t)) {
			errno = ENOMEM;
			return -1;
		}
		do
			k = pipe ? read(fd, t->stage + t->stage_head, want)
				 : pread(fd, t->stage + t->stage_head, want, *off);
		while (k < 0 && errno == EINTR);
		if (k <= 0)
			return k; /* 0: the file ended early; -1: errno (EAGAIN: an empty pipe) */
		t->stage_len += (size_t)k;
	}
	if (tls_write(c, t->stage, t->stage_len) < 0)
		return -1;
	k = (ssize_t)(t->stage_len - t->stage_head);
	t->stage_len = t->stage_head = 0;
	if (!pipe)
		*off += k;
	return k;
}
