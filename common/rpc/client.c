/* SPDX-License-Identifier: Apache-2.0 */
/* Node-to-node client on libcurl (JSON bodies, or bytes through ft_client_send): one keep-alive easy handle per thread. */
#include "rpc/client.h"
#include "base/metrics.h"
#include "base/redact.h"
#include "base/strbuf.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <time.h>

#include <curl/curl.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "auth/auth.h"
#include "auth/reqsig.h"

/*
 * DESIGN
 * Each thread gets its own CURL easy handle (a pthread key), created on first use and cleaned up
 * when the thread exits (key destructor) or, for the thread calling exit(), by an atexit hook.
 * curl_easy_reset() between calls clears the options but keeps the handle's live connections,
 * so calls to the same node reuse one TCP connection.
 * Proxy environment variables are ignored: intra-cluster traffic goes straight to the node.
 */

#define CLIENT_MAX_RESPONSE (64u << 20) /* larger bodies are refused: no map is that big */

static pthread_key_t client_key;
static pthread_once_t client_once = PTHREAD_ONCE_INIT;
static int client_init_rc = -1;

typedef struct {
	ft_strbuf_t body;
	bool too_big;
} client_buf_t;

static void handle_destroy(void *h)
{
	curl_easy_cleanup(h);
}

/* Releases the exiting thread's handle (thread-exit destructors do not run for exit()). */
static void client_atexit(void)
{
	CURL *h = pthread_getspecific(client_key);

	if (h != NULL) {
		pthread_setspecific(client_key, NULL);
		curl_easy_cleanup(h);
	}
}

static void client_init_once(void)
{
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
		return;
	if (pthread_key_create(&client_key, handle_destroy) != 0)
		return;
	atexit(client_atexit);
	client_init_rc = 0;
}

/* ---- trust for https URLs of other nodes ---- */

static STACK_OF(X509) * tls_ca_certs; /* set once at startup, read-only after */

/* The client certificate (first of the chain), its chain and key: set once at startup, read-only after. */
static STACK_OF(X509) * tls_client_chain;
static EVP_PKEY *tls_client_key;

/* The PEM certificates of path (a new stack with at least one), or NULL with err filled. */
static STACK_OF(X509) * read_certs(const char *what, const char *path, char *err, size_t errlen)
{
	STACK_OF(X509) * certs;
	X509 *x;
	FILE *f = fopen(path, "r");

	if (f == NULL) {
		snprintf(err, errlen, "%s %s: %s", what, path, strerror(errno));
		return NULL;
	}
	certs = sk_X509_new_null();
	while (certs != NULL && (x = PEM_read_X509(f, NULL, NULL, NULL)) != NULL)
		if (sk_X509_push(certs, x) == 0)
			X509_free(x);
	fclose(f);
	ERR_clear_error(); /* the end of the file reads as an error */
	if (certs == NULL || sk_X509_num(certs) == 0) {
		sk_X509_pop_free(certs, X509_free);
		snprintf(err, errlen, "%s %s: no PEM certificate in it", what, path);
		return NULL;
	}
	return certs;
}

int ft_client_set_tls_ca(const char *path, char *err, size_t errlen)
{
	STACK_OF(X509) * certs;

	if (path == NULL || path[0] == '\0')
		return 0;
	certs = read_certs("tls_ca", path, err, errlen);
	if (certs == NULL)
		return -1;
	sk_X509_pop_free(tls_ca_certs, X509_free);
	tls_ca_certs = certs;
	return 0;
}

int ft_client_set_tls_cert(const char *cert, const char *key, char *err, size_t errlen)
{
	STACK_OF(X509) * chain;
	EVP_PKEY *pk;
	FILE *f;

	if (cert == NULL || cert[0] == '\0')
		return 0;
	chain = read_certs("etcd_cert", cert, err, errlen);
	if (chain == NULL)
		return -1;
	f = key != NULL && key[0] != '\0' ? fopen(key, "r") : NULL;
	pk = f != NULL ? PEM_read_PrivateKey(f, NULL, NULL, NULL) : NULL;
	if (f != NULL)
		fclose(f);
	ERR_clear_error();
	if (pk == NULL || X509_check_private_key(sk_X509_value(chain, 0), pk) != 1) {
		snprintf(err, errlen, "etcd_key %s: %s", key != NULL && key[0] ? key : "(none)",
			 f == NULL    ? "cannot be read"
			 : pk == NULL ? "no PEM private key in it"
				      : "not the key of etcd_cert");
		ERR_clear_error();
		EVP_PKEY_free(pk);
		sk_X509_pop_free(chain, X509_free);
		return -1;
	}
	sk_X509_pop_free(tls_client_chain, X509_free);
	EVP_PKEY_free(tls_client_key);
	tls_client_chain = chain;
	tls_client_key = pk;
	return 0;
}

static const int ca_only = 1; /* CURLOPT_SSL_CTX_DATA of ft_client_tls_apply_ca */

/*
 * libcurl's hook on each new TLS context: adds the cluster CA to the system's trust store, and
 * (unless arg is &ca_only) the client certificate for servers that ask for one (etcd with
 * client-cert-auth).
 */
static CURLcode tls_ctx_hook(CURL *h, void *sslctx, void *arg)
{
	SSL_CTX *ctx = sslctx;
	X509_STORE *store = SSL_CTX_get_cert_store(ctx);
	int i;

	(void)h;
	for (i = 0; i < sk_X509_num(tls_ca_certs); i++)
		X509_STORE_add_cert(store, sk_X509_value(tls_ca_certs, i)); /* a duplicate is fine */
	if (tls_client_chain != NULL && arg != &ca_only) {
		if (SSL_CTX_use_certificate(ctx, sk_X509_value(tls_client_chain, 0)) != 1 ||
		    SSL_CTX_use_PrivateKey(ctx, tls_client_key) != 1)
			return CURLE_SSL_CERTPROBLEM;
		for (i = 1; i < sk_X509_num(tls_client_chain); i++)
			SSL_CTX_add1_chain_cert(ctx, sk_X509_value(tls_client_chain, i));
	}
	ERR_clear_error();
	return CURLE_OK;
}

void ft_client_tls_apply(void *curl)
{
	if ((tls_ca_certs == NULL && tls_client_chain == NULL) || curl == NULL)
		return;
	curl_easy_setopt(curl, CURLOPT_SSL_CTX_FUNCTION, tls_ctx_hook);
	curl_easy_setopt(curl, CURLOPT_SSL_CTX_DATA, NULL);
}

void ft_client_tls_apply_ca(void *curl)
{
	if (tls_ca_certs == NULL || curl == NULL)
		return;
	curl_easy_setopt(curl, CURLOPT_SSL_CTX_FUNCTION, tls_ctx_hook);
	curl_easy_setopt(curl, CURLOPT_SSL_CTX_DATA, (void *)&ca_only);
}

/* Returns 0, -1 if libcurl cannot be initialized. Safe to call more than once. */
int ft_client_global_init(void)
{
	pthread_once(&client_once, client_init_once);
	return client_init_rc;
}

static CURL *thread_handle(void)
{
	CURL *h;

	if (ft_client_global_init() != 0)
		return NULL;
	h = pthread_getspecific(client_key);
	if (h != NULL)
		return h;
	h = curl_easy_init();
	if (h == NULL)
		return NULL;
	if (pthread_setspecific(client_key, h) != 0) {
		curl_easy_cleanup(h);
		return NULL;
	}
	return h;
}

static size_t on_write(char *ptr, size_t size, size_t nmemb, void *userdata)
{
	client_buf_t *b = userdata;
	size_t n = size * nmemb;

	if (n > CLIENT_MAX_RESPONSE - b->body.len) {
		b->too_big = true;
		return 0; /* aborts the transfer with CURLE_WRITE_ERROR */
	}
	ft_strbuf_add(&b->body, ptr, n);
	return b->body.failed ? 0 : n;
}

/* Sets the method and body options; the body stays owned by the caller until perform returns. */
static void set_method(CURL *h, const char *method, const void *body, size_t len)
{
	if (strcmp(method, "GET") == 0 && body == NULL) {
		curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
		return;
	}
	if (strcmp(method, "HEAD") == 0) {
		curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
		return;
	}
	/* POSTFIELDS gives a Content-Length body; CUSTOMREQUEST renames the method for PUT, DELETE, ... */
	curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)(body != NULL ? len : 0));
	curl_easy_setopt(h, CURLOPT_POSTFIELDS, body != NULL ? body : "");
	if (strcmp(method, "POST") != 0)
		curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
}

/* Appends line to *l; false (list kept) when out of memory. */
static bool header_add(struct curl_slist **l, const char *line)
{
	struct curl_slist *n = curl_slist_append(*l, line);

	if (n == NULL)
		return false;
	*l = n;
	return true;
}

/* The request target of url: what follows "scheme://authority" ("/" when nothing does). */
static const char *url_target(const char *url)
{
	const char *p = strstr(url, "://");
	const char *slash = p != NULL ? strchr(p + 3, '/') : NULL;

	return slash != NULL ? slash : "/";
}

int ft_client_sign_headers(struct curl_slist **l, const char *method, const char *url, const void *body, size_t len)
{
	const ft_auth_t *a = ft_auth();
	ft_reqsig_t sig;
	char line[128];

	if (!a->have_secret)
		return 0;
	if (ft_reqsig_sign(a->ctl_key, method, url_target(url), body, len, time(NULL), &sig) != 0)
		return -1;
	snprintf(line, sizeof(line), "%s: %s", FT_REQSIG_HEADER_TIME, sig.time);
	if (!header_add(l, line))
		return -1;
	snprintf(line, sizeof(line), "%s: %s", FT_REQSIG_HEADER_NONCE, sig.nonce);
	if (!header_add(l, line))
		return -1;
	snprintf(line, sizeof(line), "%s: %s", FT_REQSIG_HEADER_SIG, sig.sig);
	return header_add(l, line) ? 0 : -1;
}

/* The request's header list, signed for the control plane (caller frees), NULL when out of memory. */
static struct curl_slist *request_headers(const char *method, const char *url, const char *const *extra, bool json_body,
					  const void *body, size_t len)
{
	struct curl_slist *l = NULL;
	bool ok = header_add(&l, "Expect:"); /* no "100 Continue" round trip */
	bool typed = false;

	for (int i = 0; ok && extra != NULL && extra[i] != NULL; i++) {
		typed = typed || strncasecmp(extra[i], "Content-Type:", 13) == 0;
		ok = header_add(&l, extra[i]);
	}
	/* Without a body curl would label an empty POST as a form: say nothing instead. */
	if (ok && !typed)
		ok = header_add(&l, json_body ? "Content-Type: application/json" : "Content-Type:");
	if (ok)
		ok = ft_client_sign_headers(&l, method, url, body, len) == 0;
	if (!ok) {
		curl_slist_free_all(l);
		return NULL;
	}
	return l;
}

/*
 * The one exchange behind every call: body (borrowed, NULL for none) of len bytes; json_body
 * labels it application/json unless extra names a Content-Type. timeout_ms <= 0 means none.
 */
static int client_send(const char *method, const char *url, const char *const *extra, bool json_body, const void *body,
		       size_t len, int timeout_ms, long *status, json_t **resp, ft_strbuf_t *raw, char *err,
		       size_t errlen)
{
	char curl_err[CURL_ERROR_SIZE] = "", shown[FT_REDACT_URL_MAX];
	struct curl_slist *headers = NULL;
	client_buf_t buf = {0};
	CURLcode cc;
	CURL *h;
	int rc = -1;

	*status = 0;
	if (resp != NULL)
		*resp = NULL;
	h = thread_handle();
	if (h == NULL) {
		snprintf(err, errlen, "%s %s: cannot initialize libcurl", method,
			 ft_redact_url(url, shown, sizeof(shown)));
		goto out;
	}
	headers = request_headers(method, url, extra, json_body, body, len);
	if (headers == NULL) {
		snprintf(err, errlen, "%s %s: out of memory", method, ft_redact_url(url, shown, sizeof(shown)));
		goto out;
	}

	curl_easy_reset(h);
	ft_client_tls_apply(h); /* after the reset, which clears it */
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_PROXY, "");
	curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, curl_err);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_write);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &buf);
	if (timeout_ms > 0) {
		curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)timeout_ms);
		curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)timeout_ms);
	}
	set_method(h, method, body, len);

	cc = curl_easy_perform(h);
	if (cc != CURLE_OK) {
		ft_metric_error(FT_ME_NODE);
		snprintf(err, errlen, "%s %s: %s", method, ft_redact_url(url, shown, sizeof(shown)),
			 buf.too_big           ? "response body too large"
			 : curl_err[0] != '\0' ? curl_err
					       : curl_easy_strerror(cc));
		goto out;
	}
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
	if (resp != NULL && buf.body.len > 0)
		*resp = json_loadb(buf.body.p, buf.body.len, JSON_DECODE_ANY, NULL);
	if (raw != NULL) { /* the bytes change hands: buf is left empty */
		*raw = buf.body;
		memset(&buf.body, 0, sizeof(buf.body));
	}
	rc = 0;
out:
	if (h != NULL) {
		/* Drop pointers to this frame's buffers; the connection stays in the handle. */
		curl_easy_setopt(h, CURLOPT_ERRORBUFFER, NULL);
		curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, NULL);
	}
	curl_slist_free_all(headers);
	ft_strbuf_free(&buf.body);
	return rc;
}

int ft_client_json(const char *method, const char *url, const json_t *body, int timeout_ms, long *status, json_t **resp,
		   char *err, size_t errlen)
{
	return ft_client_call(method, url, NULL, body, timeout_ms, status, resp, err, errlen);
}

int ft_client_call(const char *method, const char *url, const char *const *extra, const json_t *body, int timeout_ms,
		   long *status, json_t **resp, char *err, size_t errlen)
{
	char *text = NULL, shown[FT_REDACT_URL_MAX];
	int rc;

	if (body != NULL && (text = json_dumps(body, JSON_COMPACT | JSON_ENCODE_ANY)) == NULL) {
		*status = 0;
		if (resp != NULL)
			*resp = NULL;
		snprintf(err, errlen, "%s %s: cannot encode the JSON body", method,
			 ft_redact_url(url, shown, sizeof(shown)));
		return -1;
	}
	rc = client_send(method, url, extra, text != NULL, text, text != NULL ? strlen(text) : 0, timeout_ms, status,
			 resp, NULL, err, errlen);
	free(text);
	return rc;
}

int ft_client_send(const char *method, const char *url, const char *const *headers, const void *body, size_t len,
		   int timeout_ms, long *status, json_t **resp, char *err, size_t errlen)
{
	return client_send(method, url, headers, false, body, len, timeout_ms, status, resp, NULL, err, errlen);
}

int ft_client_get_bytes(const char *url, int timeout_ms, long *status, ft_strbuf_t *body, char *err, size_t errlen)
{
	memset(body, 0, sizeof(*body));
	return client_send("GET", url, NULL, false, NULL, 0, timeout_ms, status, NULL, body, err, errlen);
}
