/* SPDX-License-Identifier: Apache-2.0 */
/* Control-plane request signing: HMAC-SHA256 with the cluster key over method, target, time, nonce and body; a replay cache. */
#ifndef FT_AUTH_REQSIG_H
#define FT_AUTH_REQSIG_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#define FT_REQSIG_KEY_LEN 32
#define FT_REQSIG_WINDOW 30 /* seconds a request's time may differ from the receiver's clock */
#define FT_REQSIG_NONCE_HEX 32
#define FT_REQSIG_HEADER_TIME "Ft-Time"
#define FT_REQSIG_HEADER_NONCE "Ft-Nonce"
#define FT_REQSIG_HEADER_SIG "Ft-Signature"
#define FT_REQSIG_HEADER_BODY "Ft-Body-Sha256" /* a streamed body's claimed hex sha256 (ft_reqsig_verify_hashed) */
#define FT_REQSIG_BODY_HEX 64

/* The three header values of a signed request. */
typedef struct {
	char time[24];
	char nonce[FT_REQSIG_NONCE_HEX + 1];
	char sig[65];
} ft_reqsig_t;

typedef enum {
	FT_REQSIG_OK = 0,
	FT_REQSIG_MISSING,  /* no signature headers */
	FT_REQSIG_BAD,      /* malformed headers or a wrong signature */
	FT_REQSIG_SKEWED,   /* time outside the window */
	FT_REQSIG_REPLAYED, /* nonce seen within the window */
	FT_REQSIG_BUSY,     /* replay cache full: refused rather than let a replay through */
} ft_reqsig_result_t;

const char *ft_reqsig_strerror(ft_reqsig_result_t r);

/*
 * Signs a request: method, target (the request target as sent: path and query, still
 * percent-encoded), body (len bytes, NULL for none) at time now, with a fresh random nonce.
 * Returns 0 or -1.
 */
int ft_reqsig_sign(const uint8_t key[FT_REQSIG_KEY_LEN], const char *method, const char *target, const void *body,
		   size_t len, time_t now, ft_reqsig_t *out);

/* The hex sha256 of len bytes at body (NULL: none), as signed; 0 or -1. */
int ft_reqsig_body_hex(const void *body, size_t len, char out[FT_REQSIG_BODY_HEX + 1]);
/*
 * ft_reqsig_sign for a body known by its hex sha256 (body_hex, as ft_reqsig_body_hex gives it):
 * the same signature, for a sender that streams the body and sends body_hex along in
 * FT_REQSIG_HEADER_BODY.
 */
int ft_reqsig_sign_hashed(const uint8_t key[FT_REQSIG_KEY_LEN], const char *method, const char *target,
			  const char *body_hex, time_t now, ft_reqsig_t *out);

typedef struct ft_replay ft_replay_t;
/* A cache of nonces seen in the last 2 * FT_REQSIG_WINDOW seconds, with room for slots entries (a power of two). */
ft_replay_t *ft_replay_new(size_t slots);
void ft_replay_free(ft_replay_t *c);

/*
 * Verifies the header values (any may be NULL) of a request at time now: the signature first,
 * then the time window, then the nonce against cache (recorded when fresh; cache may be NULL).
 */
ft_reqsig_result_t ft_reqsig_verify(const uint8_t key[FT_REQSIG_KEY_LEN], const char *method, const char *target,
				    const void *body, size_t len, const char *time_s, const char *nonce,
				    const char *sig, time_t now, ft_replay_t *cache);

/*
 * ft_reqsig_verify of a request whose body has not arrived yet, against its claimed hex sha256
 * (body_hex, NULL when not sent: BAD): checks everything but the body, before it is read. The
 * receiver must then hash the body as it streams and refuse it, and store nothing of it, unless
 * the digest equals body_hex.
 */
ft_reqsig_result_t ft_reqsig_verify_hashed(const uint8_t key[FT_REQSIG_KEY_LEN], const char *method, const char *target,
					   const char *body_hex, const char *time_s, const char *nonce, const char *sig,
					   time_t now, ft_replay_t *cache);

#endif
