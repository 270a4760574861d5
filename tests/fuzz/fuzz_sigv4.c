/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer harness of SigV4 verification (header and presigned forms, proxy/s3/sigv4.c): arbitrary requests never crash, signed ones verify. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/codec.h"
#include "s3/sigv4.h"

/*
 * The input is lines: method, path, query, then "name:value" headers (at most MAX_HEADERS). The
 * request is verified as it is (any result but a crash or a sanitizer report is fine); then the
 * same method, path and headers are signed with a known key and verified again, which must
 * succeed: what the signer produces the verifier accepts.
 */

#define MAX_HEADERS 12
#define NOW ((time_t)1790000000) /* a fixed clock, so presigned expiry and skew are reproducible */

static const char *secret_of(void *ctx, const char *access_key)
{
	(void)ctx;
	return strcmp(access_key, "AKIDFUZZ") == 0 ? "fuzz-secret-key" : NULL;
}

/* Splits buf (NUL-terminated, modified) into lines; returns how many, at most cap. */
static int split(char *buf, char **lines, int cap)
{
	int n = 0;

	for (char *p = buf; n < cap && p != NULL; n++) {
		lines[n] = p;
		p = strchr(p, '\n');
		if (p != NULL)
			*p++ = '\0';
	}
	return n;
}

/* Headers from "name:value" lines, without any the signer sets itself; returns the count. */
static int headers(char **lines, int n, ft_sigv4_header_t *h, int signing)
{
	int k = 0;

	for (int i = 0; i < n && k < MAX_HEADERS; i++) {
		char *colon = strchr(lines[i], ':');
		if (colon == NULL || colon == lines[i])
			continue;
		*colon = '\0';
		h[k].name = lines[i];
		h[k].value = colon + 1;
		if (signing &&
		    (strcasecmp(h[k].name, "authorization") == 0 || strcasecmp(h[k].name, "x-amz-date") == 0 ||
		     strcasecmp(h[k].name, "x-amz-content-sha256") == 0 || strcasecmp(h[k].name, "host") == 0))
			continue;
		int dup = 0;
		for (int j = 0; signing && j < k; j++)
			dup |= strcasecmp(h[j].name, h[k].name) ==
			       0; /* one value a name: how the pair combines is not signed here */
		if (!dup)
			k++;
	}
	return k;
}

static void verify_as_is(char **lines, int n)
{
	ft_sigv4_header_t h[MAX_HEADERS];
	ft_sigv4_request_t req = {.method = lines[0], .path = n > 1 ? lines[1] : "/", .query = n > 2 ? lines[2] : ""};
	ft_sigv4_auth_t out;

	req.headers = h;
	req.n_headers = n > 3 ? headers(lines + 3, n - 3, h, 0) : 0;
	(void)ft_sigv4_verify(&req, NOW, secret_of, NULL, &out);
}

/* The path and query as a signer would send them: the verifier reads the raw wire form. */
static int wire_safe(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s <= ' ' || (unsigned char)*s >= 0x7f || *s == '#' || *s == '%' || *s == '+' ||
		    *s == '&' || *s == '=' || *s == '?')
			return 0;
	return 1;
}

static void sign_then_verify(char **lines, int n)
{
	ft_sigv4_header_t h[MAX_HEADERS + 3];
	char amz_date[32], authz[1024];
	ft_sigv4_request_t req = {.method = "GET", .path = "/b/k", .query = "", .payload_hash = FT_SIGV4_UNSIGNED};
	ft_sigv4_auth_t out;

	if (n > 1 && lines[1][0] == '/' && wire_safe(lines[1]))
		req.path = lines[1];
	int k = n > 3 ? headers(lines + 3, n - 3, h, 1) : 0;
	for (int i = 0; i < k; i++)
		if (!wire_safe(h[i].name) || strchr(h[i].value, '\r') != NULL)
			return; /* header names of tokens only, as HTTP allows */
	ft_date_format_amz(NOW, amz_date);
	h[k++] = (ft_sigv4_header_t){"host", "localhost"};
	h[k++] = (ft_sigv4_header_t){"x-amz-date", amz_date};
	h[k++] = (ft_sigv4_header_t){"x-amz-content-sha256", FT_SIGV4_UNSIGNED};
	req.headers = h;
	req.n_headers = k;
	if (ft_sigv4_sign(&req, "AKIDFUZZ", "fuzz-secret-key", "us-east-1", "s3", amz_date, authz, sizeof(authz)) != 0)
		return;
	ft_sigv4_header_t all[MAX_HEADERS + 4];
	memcpy(all, h, sizeof(h[0]) * (size_t)k);
	all[k] = (ft_sigv4_header_t){"authorization", authz};
	req.headers = all;
	req.n_headers = k + 1;
	ft_sigv4_result_t r = ft_sigv4_verify(&req, NOW, secret_of, NULL, &out);
	if (r != FT_SIGV4_OK && r != FT_SIGV4_MALFORMED) {
		fprintf(stderr, "a request signed here does not verify: %s\n", ft_sigv4_strerror(r));
		abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *a = malloc(size + 1), *b = malloc(size + 1);
	char *la[MAX_HEADERS + 3], *lb[MAX_HEADERS + 3];

	if (a != NULL && b != NULL && size < 8192) {
		memcpy(a, data, size);
		a[size] = '\0';
		memcpy(b, a, size + 1);
		int n = split(a, la, MAX_HEADERS + 3);
		if (n > 0)
			verify_as_is(la, n);
		n = split(b, lb, MAX_HEADERS + 3);
		sign_then_verify(lb, n);
	}
	free(a);
	free(b);
	return 0;
}
