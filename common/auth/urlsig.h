/* SPDX-License-Identifier: Apache-2.0 */
/* Signed, expiring object URLs: the authorization a redirect (or an intra-cluster call) carries to a target. */
#ifndef FT_AUTH_URLSIG_H
#define FT_AUTH_URLSIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "base/strbuf.h"

#define FT_URLSIG_TTL 120        /* seconds a redirect stays valid */
#define FT_URLSIG_ANY_METHOD "*" /* intra-cluster URLs (the proxy's S3 relay): any method */
#define FT_URLSIG_KEY_LEN 32
#define FT_URLSIG_METHOD_MAX 1280 /* a copy's method: "COPY <length>:<provider>/@#/<bucket>/<object>" */

typedef enum {
	FT_URLSIG_NONE = 0, /* the URL carries no signature */
	FT_URLSIG_OK,
	FT_URLSIG_BAD,     /* malformed or wrong signature */
	FT_URLSIG_EXPIRED, /* past its expiry */
} ft_urlsig_result_t;

/*
 * Appends "ft_exp=<unix>&ft_sig=<hex>" to the URL in b ('?' first unless has_query, then '&'),
 * valid for method on provider/bucket/obj until now + FT_URLSIG_TTL.
 */
void ft_urlsig_append(ft_strbuf_t *b, bool has_query, const uint8_t key[FT_URLSIG_KEY_LEN], const char *method,
		      const char *provider, const char *bucket, const char *obj, size_t obj_len, time_t now);
/*
 * Checks the ft_exp and ft_sig query values (either NULL = none) for method (or, failing that,
 * FT_URLSIG_ANY_METHOD, but not for a copy's method) on provider/bucket/obj at time now.
 */
ft_urlsig_result_t ft_urlsig_check(const uint8_t key[FT_URLSIG_KEY_LEN], const char *exp, const char *sig,
				   const char *method, const char *provider, const char *bucket, const char *obj,
				   size_t obj_len, time_t now);

/*
 * The method a request's signature covers: its own, but for a PUT with obj_to (AIStore's object copy,
 * which writes another object, maybe of another bucket) "COPY <length>:<obj_to>", made in buf: a signature for
 * a PUT of the source (or for any method) never authorizes a copy elsewhere. NULL when buf is too small.
 */
const char *ft_urlsig_method(const char *method, const char *obj_to, char *buf, size_t cap);

#endif
