/* SPDX-License-Identifier: Apache-2.0 */
/* Blocking HTTP client for node-to-node calls, on libcurl; keeps one keep-alive handle per thread. */
#ifndef FT_CLIENT_H
#define FT_CLIENT_H

#include <stddef.h>

#include <jansson.h>

#include "base/strbuf.h"

struct curl_slist;

/*
 * Adds the control-plane signature headers (auth/reqsig.h: cluster key, time, nonce, body hash) for
 * method, url and body (len bytes, NULL for none) to *l; nothing when no cluster secret is loaded.
 * Every call of this client signs itself; code that drives libcurl directly to a control port
 * calls this. Returns 0, -1 when out of memory.
 */
int ft_client_sign_headers(struct curl_slist **l, const char *method, const char *url, const void *body, size_t len);

/*
 * Trusts the CA certificates of the PEM file path, besides the system's, for https URLs (the public
 * ports of other nodes of a TLS cluster); "" or NULL trusts only the system's. Call before any
 * transfer starts. Returns 0, or -1 with err filled (unreadable file, no certificate in it).
 */
int ft_client_set_tls_ca(const char *path, char *err, size_t errlen);
/*
 * Presents the PEM certificate chain cert with its private key key to https servers that ask for a
 * client certificate (etcd with client-cert-auth); "" or NULL cert presents none. Call before any
 * transfer starts. Returns 0, or -1 with err filled (unreadable files, a key that is not cert's).
 */
int ft_client_set_tls_cert(const char *cert, const char *key, char *err, size_t errlen);
/* Applies that trust to a libcurl easy handle (CURL *), after its curl_easy_init or curl_easy_reset. */
void ft_client_tls_apply(void *curl);
/* The same for a server outside the cluster (a transformer): the cluster's CAs, no client certificate. */
void ft_client_tls_apply_ca(void *curl);

/* Call once per process before any thread uses the client. */
int ft_client_global_init(void);
/*
 * Sends method to url with an optional JSON body (borrowed). On a completed exchange returns 0,
 * sets *status to the HTTP status and *resp (if non-NULL) to the parsed JSON body or NULL when the
 * body is empty or not JSON (caller owns it). Returns -1 on a connection error or timeout
 * (err filled).
 */
int ft_client_json(const char *method, const char *url, const json_t *body, int timeout_ms, long *status, json_t **resp,
		   char *err, size_t errlen);
/*
 * ft_client_json with extra request header lines ("Name: value", NULL-terminated array, borrowed;
 * NULL for none). A "Content-Type: ..." line in headers replaces the body's application/json; a
 * request without either sends no Content-Type.
 */
int ft_client_call(const char *method, const char *url, const char *const *headers, const json_t *body, int timeout_ms,
		   long *status, json_t **resp, char *err, size_t errlen);
/*
 * ft_client_call with a body of len bytes (borrowed; NULL for none) instead of JSON; name its
 * Content-Type in headers (without one the request carries none). The reply is still read as JSON.
 */
int ft_client_send(const char *method, const char *url, const char *const *headers, const void *body, size_t len,
		   int timeout_ms, long *status, json_t **resp, char *err, size_t errlen);
/*
 * GETs url and hands over the body's bytes in *body (at most 64 MiB; the caller frees it with
 * ft_strbuf_free, also on failure). 0 with *status on a completed exchange, -1 with err.
 */
int ft_client_get_bytes(const char *url, int timeout_ms, long *status, ft_strbuf_t *body, char *err, size_t errlen);

#endif
