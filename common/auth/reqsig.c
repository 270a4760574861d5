/* SPDX-License-Identifier: Apache-2.0 */
/* Signed control-plane requests and the replay cache that makes each signature usable once. */
#include "auth/reqsig.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include "auth/sigv4.h"
#include "base/codec.h"
#include "base/strbuf.h"

/*
 * DESIGN
 * String to sign: "ft-ctl-v1\n" METHOD "\n" target "\n" time "\n" nonce "\n" hex sha256(body).
 * The receiver checks the MAC before anything else (so the cache only ever holds nonces of
 * genuine requests, and nobody outside the cluster can fill it), then the time window, then the
 * nonce. A nonce is remembered until its time leaves the window: a replay is either too old or
 * in the cache. The cache is an open-addressing table of 16-byte nonces with their expiry; a
 * slot whose expiry has passed is free. When a probe finds no free slot the request is refused
 * (BUSY) rather than admitted unchecked.
 */

#define PROBE_MAX 64

typedef struct {
	uint8_t nonce[16];
	int64_t expires; /* 0 = never used */
} replay_slot_t;

struct ft_replay {
	pthread_mutex_t lock;
	size_t mask;
	replay_slot_t *slots;
};

static const char *const messages[] = {
	[FT_REQSIG_OK] = "ok",
	[FT_REQSIG_MISSING] = "unsigned request",
	[FT_REQSIG_BAD] = "bad signature",
	[FT_REQSIG_SKEWED] = "request time outside the window",
	[FT_REQSIG_REPLAYED] = "replayed request",
	[FT_REQSIG_BUSY] = "replay cache full",
};

const char *ft_reqsig_strerror(ft_reqsig_result_t r)
{
	return r >= FT_REQSIG_OK && r <= FT_REQSIG_BUSY ? messages[r] : "?";
}

/* The MAC of a request whose body's hex sha256 is body_hex, as hex into out; 0 or -1. */
static int mac_hex_hashed(const uint8_t key[FT_REQSIG_KEY_LEN], const char *method, const char *target,
			  const char *time_s, const char *nonce, const char *body_hex, char out[65])
{
	ft_strbuf_t msg = {0};
	uint8_t mac[32];
	unsigned int n = 32;
	int rc = -1;

	ft_strbuf_addf(&msg, "ft-ctl-v1\n%s\n%s\n%s\n%s\n%s", method, target, time_s, nonce, body_hex);
	if (!msg.failed && body_hex[0] != '\0' &&
	    HMAC(EVP_sha256(), key, FT_REQSIG_KEY_LEN, (const unsigned char *)msg.p, msg.len, mac, &n) != NULL &&
	    n == 32) {
		ft_hex_encode(mac, 32, out);
		rc = 0;
	}
	ft_strbuf_free(&msg);
	return rc;
}

int ft_reqsig_body_hex(const void *body, size_t len, char out[FT_REQSIG_BODY_HEX + 1])
{
	ft_sha256_t h;

	if (ft_sha256_init(&h) != 0)
		return -1;
	if (body != NULL && len > 0)
		ft_sha256_update(&h, body, len);
	ft_sha256_final(&h, out);
	return out[0] != '\0' ? 0 : -1;
}

static int mac_hex(const uint8_t key[FT_REQSIG_KEY_LEN], const char *method, const char *target, const char *time_s,
		   const char *nonce, const void *body, size_t len, char out[65])
{
	char body_hex[FT_SHA256_HEX];

	if (ft_reqsig_body_hex(body, len, body_hex) != 0)
		return -1;
	return mac_hex_hashed(key, method, target, time_s, nonce, body_hex, out);
}

int ft_reqsig_sign_hashed(const uint8_t key[FT_REQSIG_KEY_LEN], const char *method, const char *target,
			  const char *body_hex, time_t now, ft_reqsig_t *out)
{
	uint8_t nonce[16];

	if (RAND_bytes(nonce, sizeof(nonce)) != 1)
		return -1;
	ft_hex_encode(nonce, sizeof(nonce), out->nonce);
	snprintf(out->time, sizeof(out->time), "%lld", (long long)now);
	return mac_hex_hashed(key, method, target, out->time, out->nonce, body_hex, out->sig);
}

int ft_reqsig_sign(const uint8_t key[FT_REQSIG_KEY_LEN], const char *method, const char *target, const void *body,
		   size_t len, time_t now, ft_reqsig_t *out)
{
	uint8_t nonce[16];

	if (RAND_bytes(nonce, sizeof(nonce)) != 1)
		return -1;
	ft_hex_encode(nonce, sizeof(nonce), out->nonce);
	snprintf(out->time, sizeof(out->time), "%lld", (long long)now);
	return mac_hex(key, method, target, out->time, out->nonce, body, len, out->sig);
}

ft_replay_t *ft_replay_new(size_t slots)
{
	ft_replay_t *c;

	if (slots < 2 || (slots & (slots - 1)) != 0)
		return NULL;
	c = calloc(1, sizeof(*c));
	if (c == NULL)
		return NULL;
	c->slots = calloc(slots, sizeof(*c->slots));
	if (c->slots == NULL) {
		free(c);
		return NULL;
	}
	c->mask = slots - 1;
	pthread_mutex_init(&c->lock, NULL);
	return c;
}

void ft_replay_free(ft_replay_t *c)
{
	if (c == NULL)
		return;
	pthread_mutex_destroy(&c->lock);
	free(c->slots);
	free(c);
}

/* FT_REQSIG_OK when nonce was not seen (now recorded until expires), REPLAYED or BUSY. */
static ft_reqsig_result_t replay_check(ft_replay_t *c, const uint8_t nonce[16], int64_t expires, int64_t now)
{
	uint64_t h;
	replay_slot_t *free_slot = NULL;
	ft_reqsig_result_t r = FT_REQSIG_BUSY;

	memcpy(&h, nonce, sizeof(h)); /* random bytes, and only ever of requests whose MAC checked out */
	pthread_mutex_lock(&c->lock);
	for (size_t i = 0; i < PROBE_MAX && i <= c->mask; i++) {
		replay_slot_t *s = &c->slots[(h + i) & c->mask];
		if (s->expires <= now) {
			if (free_slot == NULL)
				free_slot = s;
			if (s->expires == 0)
				break; /* never used: the nonce is not further along */
			continue;
		}
		if (memcmp(s->nonce, nonce, 16) == 0) {
			r = FT_REQSIG_REPLAYED;
			goto out;
		}
	}
	if (free_slot != NULL) {
		memcpy(free_slot->nonce, nonce, 16);
		free_slot->expires = expires;
		r = FT_REQSIG_OK;
	}
out:
	pthread_mutex_unlock(&c->lock);
	return r;
}

/* ft_reqsig_verify with the body given as its hex sha256 (body_hex; NULL: the claim is missing). */
static ft_reqsig_result_t verify_hashed(const uint8_t key[FT_REQSIG_KEY_LEN], const char *method, const char *target,
					const char *body_hex, const char *time_s, const char *nonce, const char *sig,
					time_t now, ft_replay_t *cache)
{
	uint8_t nonce_bin[16], got[32], want_bin[32];
	char want[65];
	long long t;
	char *end;

	if (time_s == NULL && nonce == NULL && sig == NULL)
		return FT_REQSIG_MISSING;
	if (time_s == NULL || nonce == NULL || sig == NULL || body_hex == NULL ||
	    strlen(body_hex) != FT_REQSIG_BODY_HEX || strlen(nonce) != FT_REQSIG_NONCE_HEX ||
	    ft_hex_decode(nonce, FT_REQSIG_NONCE_HEX, nonce_bin, sizeof(nonce_bin), 0) != 16 || strlen(sig) != 64 ||
	    ft_hex_decode(sig, 64, got, sizeof(got), 0) != 32 || time_s[0] == '\0' || strlen(time_s) > 20)
		return FT_REQSIG_BAD;
	t = strtoll(time_s, &end, 10);
	if (*end != '\0')
		return FT_REQSIG_BAD;
	if (mac_hex_hashed(key, method, target, time_s, nonce, body_hex, want) != 0 ||
	    ft_hex_decode(want, 64, want_bin, sizeof(want_bin), 0) != 32 || CRYPTO_memcmp(want_bin, got, 32) != 0)
		return FT_REQSIG_BAD;
	if (t < (long long)now - FT_REQSIG_WINDOW || t > (long long)now + FT_REQSIG_WINDOW)
		return FT_REQSIG_SKEWED;
	if (cache == NULL)
		return FT_REQSIG_OK;
	return replay_check(cache, nonce_bin, (int64_t)t + FT_REQSIG_WINDOW + 1, (int64_t)now);
}

ft_reqsig_result_t ft_reqsig_verify(const uint8_t key[FT_REQSIG_KEY_LEN], const char *method, const char *target,
				    const void *body, size_t len, const char *time_s, const char *nonce,
				    const char *sig, time_t now, ft_replay_t *cache)
{
	char body_hex[FT_SHA256_HEX];

	if (time_s == NULL && nonce == NULL && sig == NULL)
		return FT_REQSIG_MISSING;
	if (ft_reqsig_body_hex(body, len, body_hex) != 0)
		return FT_REQSIG_BAD;
	return verify_hashed(key, method, target, body_hex, time_s, nonce, sig, now, cache);
}

ft_reqsig_result_t ft_reqsig_verify_hashed(const uint8_t key[FT_REQSIG_KEY_LEN], const char *method, const char *target,
					   const char *body_hex, const char *time_s, const char *nonce, const char *sig,
					   time_t now, ft_replay_t *cache)
{
	return verify_hashed(key, method, target, body_hex, time_s, nonce, sig, now, cache);
}
